#!/usr/bin/env python3
"""validate-schema.py [--each] [--max N] [--check-schema] GROUP [--next GROUP]...
GROUP: [--strict] SCHEMA [+|-]FILE...

Validates JSON files against JSON Schemas (draft 2020-12) in one interpreter, so a test file
pays one Python start for all its reports. A FILE prefixed with '-' must FAIL validation, one
prefixed with '+' (or not prefixed) must pass. --strict closes the group's schema at its top
level (additionalProperties: false), so a key the code writes but the schema does not declare
fails too (report.schema.json leaves its top level open for forward compatibility).
--check-schema also checks each schema against the 2020-12 metaschema (about 0.05 s each).

Prints one line per file that did not do what was expected (at most --max, default 5; an
invalid file gets its first errors: FILE: $.json.path: message), or with --each one line per
file, "PASS<TAB>FILE<TAB>detail" or "FAIL<TAB>FILE<TAB>detail". Then "checked K".
Exit 0: every file as expected; 1: not; 2: usage or an unusable schema; 77: no usable
jsonschema module (python3-jsonschema, with Draft 2020-12: 4.0 or later).
"""

import json
import sys


def json_path(path):
    out = "$"
    for p in path:
        out += "[%d]" % p if isinstance(p, int) else "." + str(p)
    return out


def short(msg, n=240):
    msg = " ".join(msg.split())
    return msg if len(msg) <= n else msg[: n - 3] + "..."


def parse(args):
    """The options, then the groups: [(schema path, strict, [file args])]."""
    opts = {"each": False, "max": 5, "check": False}
    while args and args[0] in ("--each", "--max", "--check-schema"):
        opt = args.pop(0)
        if opt == "--max":
            opts["max"] = int(args.pop(0))
        else:
            opts["each" if opt == "--each" else "check"] = True
    groups = []
    while args:
        strict = args[0] == "--strict"
        if strict:
            args.pop(0)
        if not args or args[0].startswith("--"):
            raise ValueError("a schema is missing")
        schema, files = args.pop(0), []
        while args and args[0] != "--next":
            files.append(args.pop(0))
        if args:
            args.pop(0)
        groups.append((schema, strict, files))
    if not groups:
        raise ValueError("no schema given")
    return opts, groups


def main(argv):
    try:
        opts, groups = parse(argv[1:])
    except (ValueError, IndexError) as e:
        print("validate-schema.py: %s" % e, file=sys.stderr)
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        return 2
    try:
        import jsonschema
        from jsonschema import Draft202012Validator
    except ImportError as e:
        print("python3-jsonschema with Draft 2020-12 support is not installed (%s)" % e)
        return 77

    bad = checked = 0
    lines = []
    for schema_path, strict, files in groups:
        try:
            with open(schema_path, encoding="utf-8") as f:
                schema = json.load(f)
            if opts["check"]:
                Draft202012Validator.check_schema(schema)
        except (OSError, ValueError, jsonschema.exceptions.SchemaError) as e:
            print("%s: not a usable schema: %s" % (schema_path, short(str(e))))
            return 2
        if strict:
            schema = dict(schema, additionalProperties=False)
        validator = Draft202012Validator(schema)
        for arg in files:
            checked += 1
            want_valid = not arg.startswith("-")
            path = arg[1:] if arg[:1] in "+-" else arg
            try:
                with open(path, encoding="utf-8") as f:
                    doc = json.load(f)
            except (OSError, ValueError) as e:
                bad += 1
                lines.append(("FAIL", path, "not readable as JSON: %s" % short(str(e))))
                continue
            errors = sorted(
                validator.iter_errors(doc), key=lambda e: list(map(str, e.absolute_path))
            )
            if want_valid and errors:
                bad += 1
                detail = "; ".join(
                    "%s: %s" % (json_path(e.absolute_path), short(e.message, 160))
                    for e in errors[:3]
                )
                if len(errors) > 3:
                    detail += "; (%d more)" % (len(errors) - 3)
                lines.append(("FAIL", path, detail))
            elif not want_valid and not errors:
                bad += 1
                lines.append(("FAIL", path, "validates, but must not"))
            elif opts["each"]:
                why = (
                    "%s: %s" % (json_path(errors[0].absolute_path), short(errors[0].message, 160))
                    if errors
                    else "validates"
                )
                lines.append(("PASS", path, why))
    if opts["each"]:
        for st, path, detail in lines:
            print("%s\t%s\t%s" % (st, path, detail))
    else:
        for st, path, detail in lines[: opts["max"]]:
            print("%s: %s" % (path, detail))
        if len(lines) > opts["max"]:
            print("(%d more files fail)" % (len(lines) - opts["max"]))
    print("checked %d" % checked)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

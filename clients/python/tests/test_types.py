"""The Result dataclasses against the report schema, field by field, so that the C core, the
Python client and the Node client cannot drift apart.

1. schemas/report.schema.json (when the tree has it; AB_REPORT_SCHEMA names another copy):
   every property of every object is a field and every field a property; a key that may be
   null or absent is Optional (or has a default) and only such a key is; JSON types map to
   int / str / bool / List / a dataclass / an Enum with exactly the schema's values.
2. Real reports from the real binary: every key they hold is a field, of a matching JSON type.
"""

import dataclasses
import enum
import json
import os
import subprocess
import typing
from typing import Any, Dict, List, Union

import pytest

import agentbox_bwrap as agentbox
from agentbox_bwrap import _report
from conftest import SRCDIR

NoneType = type(None)


def schema_path():
    return os.environ.get("AB_REPORT_SCHEMA") or os.path.join(SRCDIR, "schemas", "report.schema.json")


def report_fields(cls) -> Dict[str, dataclasses.Field]:
    return {f.name: f for f in dataclasses.fields(cls) if not f.metadata.get("client")}


def split_optional(hint):
    """(the hint without None, whether None was in it)"""
    if typing.get_origin(hint) is Union:
        args = typing.get_args(hint)
        rest = [a for a in args if a is not NoneType]
        if len(rest) < len(args):
            return (rest[0] if len(rest) == 1 else Union[tuple(rest)]), True
    return hint, False


class Checker:
    def __init__(self, schema: Dict[str, Any]) -> None:
        self.schema = schema
        self.errors: List[str] = []
        self.seen: set = set()
        self.active: set = set()  # the dataclasses being checked (WalkSummary.pre_run recurses)

    def resolve(self, node):
        while "$ref" in node:
            name = node["$ref"].split("/")[-1]
            merged = dict(self.schema["$defs"][name])
            merged.update({k: v for k, v in node.items() if k != "$ref"})
            node = merged
        return node

    def nullable(self, node) -> bool:
        node = self.resolve(node)
        t = node.get("type")
        if t == "null" or (isinstance(t, list) and "null" in t):
            return True
        if None in node.get("enum", []):
            return True
        return any(self.nullable(v) for v in node.get("oneOf", []))

    def err(self, where, msg):
        self.errors.append("%s: %s" % (where, msg))

    def field_(self, where, node, hint, required, has_default):
        inner, optional = split_optional(hint)
        nullable = self.nullable(node)
        if nullable and not optional:
            self.err(where, "the schema allows null, the type %s does not" % hint)
        if optional and not nullable and required:
            self.err(where, "Optional, but the schema requires a non-null value")
        if not required and not has_default:
            self.err(where, "the schema may leave it out, the dataclass field has no default")
        if required and has_default and not nullable:
            self.err(where, "required by the schema, yet has a default")
        self.value(where, node, inner)

    def value(self, where, node, hint):
        node = self.resolve(node)
        if "oneOf" in node:
            # null or an object (Stream.file): the null is the field's (nullable() above)
            shapes = [v for v in node["oneOf"] if self.resolve(v).get("type") != "null"]
            if len(shapes) == 1:
                return self.value(where, shapes[0], hint)
            return self.one_of(where, dict(node, oneOf=shapes), hint)
        if "enum" in node or "const" in node:
            vals = [v for v in node.get("enum", [node.get("const")]) if v is not None]
            kinds = {type(v) for v in vals}
            if isinstance(hint, type) and issubclass(hint, enum.Enum):
                got = {m.value for m in hint}
                if got != set(vals):
                    self.err(where, "enum %s has %s, the schema %s" % (hint.__name__, sorted(got), sorted(vals)))
            elif kinds == {str} and hint is not str:
                self.err(where, "string enum, type %s" % hint)
            elif kinds == {int} and hint is not int:
                self.err(where, "integer const, type %s" % hint)
            elif kinds == {bool} and hint is not bool:
                self.err(where, "boolean const, type %s" % hint)
            return
        types = node.get("type")
        types = [t for t in (types if isinstance(types, list) else [types]) if t != "null"]
        want = {"integer": int, "string": str, "boolean": bool}
        if len(types) == 1 and types[0] in want:
            if hint is not want[types[0]]:
                self.err(where, "%s in the schema, %s here" % (types[0], hint))
            return
        if types == ["array"]:
            if typing.get_origin(hint) not in (list, List):
                return self.err(where, "array in the schema, %s here" % hint)
            return self.value(where + "[]", node["items"], typing.get_args(hint)[0])
        if types == ["object"] or "properties" in node:
            return self.obj(where, node, hint)
        self.err(where, "schema node %s not understood" % json.dumps(node)[:120])

    def obj(self, where, node, hint, field_meta=None):
        props = node.get("properties", {})
        if typing.get_origin(hint) in (dict, Dict) and (field_meta or {}).get("open"):
            # a map of any keys (pre_run.resolved): its values' type
            if props or not isinstance(node.get("additionalProperties"), dict):
                return self.err(where, "an open Dict, but the schema fixes its keys")
            return self.value(where + "{}", node["additionalProperties"], typing.get_args(hint)[1])
        if typing.get_origin(hint) in (dict, Dict):
            keys = (field_meta or {}).get("keys")
            if keys is None:
                return self.err(where, "a Dict without the list of its keys (metadata 'keys')")
            if set(keys) != set(props):
                self.err(where, "keys %s, the schema %s" % (sorted(keys), sorted(props)))
            item = typing.get_args(hint)[1]
            shapes = []
            for sub in props.values():
                if self.resolve(sub) not in shapes:
                    shapes.append(self.resolve(sub))
            if len(shapes) == 1:
                self.value(where + "[]", shapes[0], item)
            else:  # values of several shapes (sandbox.network has one more key)
                self.one_of(where + "[]", {"oneOf": shapes}, item)
            return
        if not dataclasses.is_dataclass(hint):
            return self.err(where, "object in the schema, %s here" % hint)
        if node.get("additionalProperties") is not False and where != "Result":
            self.err(where, "an open object in the schema: a dataclass cannot mirror it")
        self.dataclass(where, hint, props, set(node.get("required", [])))

    def dataclass(self, where, cls, props, required):
        if cls in self.active:
            return  # a schema object holding its own kind: checked once, where it started
        self.active.add(cls)
        try:
            self._dataclass(where, cls, props, required)
        finally:
            self.active.discard(cls)

    def _dataclass(self, where, cls, props, required):
        fields = report_fields(cls)
        hints = typing.get_type_hints(cls)
        for name in sorted(set(props) - set(fields)):
            self.err(where, "%s.%s is in the schema, not in the dataclass" % (cls.__name__, name))
        for name in sorted(set(fields) - set(props)):
            self.err(where, "%s.%s is not in the schema" % (cls.__name__, name))
        self.seen.add(cls)
        for name in sorted(set(fields) & set(props)):
            f = fields[name]
            has_default = f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
            sub = self.resolve(props[name])
            w = "%s.%s" % (cls.__name__, name)
            hint = hints[name]
            inner, _ = split_optional(hint)
            if typing.get_origin(inner) in (dict, Dict):
                if self.nullable(sub) != (inner is not hint) or (name in required) == has_default:
                    self.err(w, "nullable or required unlike the schema")
                self.obj(w, sub, inner, f.metadata)
            else:
                self.field_(w, props[name], hint, name in required, has_default)

    def one_of(self, where, node, hint):
        """A dataclass for several object shapes: the union of their properties; a property
        the shapes type differently is a Union of those types."""
        variants = [self.resolve(v) for v in node["oneOf"]]
        if not dataclasses.is_dataclass(hint):
            return self.err(where, "oneOf of objects, %s here" % hint)
        self.seen.add(hint)
        fields = report_fields(hint)
        hints = typing.get_type_hints(hint)
        props = {}
        for v in variants:
            for k, sub in v.get("properties", {}).items():
                props.setdefault(k, []).append(sub)
        for name in sorted(set(props) ^ set(fields)):
            self.err(where, "%s: in %s only" % (name, "the schema" if name in props else "the dataclass"))
        in_all = set.intersection(*[set(v.get("required", [])) for v in variants])
        for name in sorted(set(props) & set(fields)):
            f = fields[name]
            w = "%s.%s" % (hint.__name__, name)
            has_default = f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
            inner, optional = split_optional(hints[name])
            if name not in in_all and not (optional and has_default):
                self.err(w, "not in every shape: must be Optional with a default")
            if name in in_all and has_default:
                self.err(w, "in every shape, yet has a default")
            shapes = props[name]
            alts = list(typing.get_args(inner)) if typing.get_origin(inner) is Union else [inner]
            for sub in shapes:
                sub_r = self.resolve(sub)
                ok = [a for a in alts if not self._mismatch(w, sub_r, a)]
                if not ok:
                    self.err(w, "no type of %s fits the shape %s" % (inner, json.dumps(sub_r)[:100]))

    def _mismatch(self, where, node, hint) -> bool:
        probe = Checker(self.schema)
        probe.value(where, node, hint)
        return bool(probe.errors)


def check_against_schema(schema) -> List[str]:
    c = Checker(schema)
    c.obj("Result", schema, agentbox.Result)
    for cls in (agentbox.Stream, agentbox.StreamFile, agentbox.FileEntry, agentbox.WalkSummary, agentbox.SkippedEntry,
                agentbox.InputEntry, agentbox.Collected, agentbox.Environment,
                agentbox.NetworkProxy, agentbox.Limit, agentbox.Usage, agentbox.Protection,
                agentbox.PreRun, agentbox.SessionSummary, agentbox.EvictedEnv,
                agentbox.Result):
        if cls not in c.seen:
            c.err(cls.__name__, "a class no schema object maps to")
    return c.errors


def test_result_matches_the_schema_field_by_field():
    path = schema_path()
    if not os.path.exists(path):
        pytest.skip("%s is not in this tree yet; the real reports are checked below" % path)
    with open(path) as f:
        schema = json.load(f)
    errors = check_against_schema(schema)
    assert errors == [], "\n".join(errors)
    assert schema["properties"]["schema_version"].get("const") in agentbox.SCHEMA_VERSIONS
    # the client's lists of values say what the schema says
    defs = schema["$defs"]
    assert agentbox.FILE_ORIGINS == tuple(defs["file_entry"]["properties"]["origin"]["enum"])
    assert agentbox.NETWORK_MODES == tuple(defs["network_protection"]["properties"]["mode"]["enum"])
    assert set(agentbox.PROTECTION_NAMES) == set(defs["sandbox"]["properties"])
    assert set(agentbox.LIMIT_NAMES) == set(defs["limits"]["properties"])


def test_the_checker_sees_drift():
    """The check above would catch a field added, dropped, mistyped or wrongly nullable."""
    schema = {
        "type": "object", "required": ["a", "b", "s"],
        "properties": {"a": {"type": "integer"}, "b": {"type": ["string", "null"]},
                       "s": {"enum": ["x", "y"]}, "extra": {"type": "boolean"}},
    }

    class E(enum.Enum):
        X = "x"

    @dataclasses.dataclass
    class Bad:
        a: str
        b: str
        s: E
        gone: int

    errors = Checker(schema)
    errors.obj("Result", schema, Bad)
    text = "\n".join(errors.errors)
    for needle in ("Bad.extra is in the schema", "Bad.gone is not in the schema",
                   "Bad.a: integer in the schema", "Bad.b: the schema allows null",
                   "enum E has"):
        assert needle in text, text


# 2. real reports


def check_value(where, value, hint, errors, meta=None):
    inner, optional = split_optional(hint)
    if value is None:
        if not optional:
            errors.append("%s: null, the type %s is not Optional" % (where, hint))
        return
    origin = typing.get_origin(inner)
    if origin is Union:
        for alt in typing.get_args(inner):
            probe: List[str] = []
            check_value(where, value, alt, probe)
            if not probe:
                return
        errors.append("%s: %r fits no type of %s" % (where, value, inner))
    elif origin in (list, List):
        if not isinstance(value, list):
            errors.append("%s: %r is not a list" % (where, value))
        else:
            for i, v in enumerate(value):
                check_value("%s[%d]" % (where, i), v, typing.get_args(inner)[0], errors)
    elif origin in (dict, Dict):
        keys = (meta or {}).get("keys", ())
        for k, v in value.items():
            if k not in keys:
                errors.append("%s: key %r is not in %s" % (where, k, keys))
            check_value("%s[%r]" % (where, k), v, typing.get_args(inner)[1], errors)
    elif dataclasses.is_dataclass(inner):
        fields = report_fields(inner)
        hints = typing.get_type_hints(inner)
        for k in value:
            if k not in fields:
                errors.append("%s: the report has %r, %s has no such field" % (where, k, inner.__name__))
        for name, f in fields.items():
            if name in value:
                check_value("%s.%s" % (where, name), value[name], hints[name], errors, f.metadata)
            elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                errors.append("%s: the report has no %r, a required field" % (where, name))
    elif isinstance(inner, type) and issubclass(inner, enum.Enum):
        try:
            inner(value)
        except ValueError:
            errors.append("%s: %r is not a %s" % (where, value, inner.__name__))
    elif inner is int:
        if not isinstance(value, int) or isinstance(value, bool):
            errors.append("%s: %r is not an int" % (where, value))
    elif not isinstance(value, inner):
        errors.append("%s: %r is not a %s" % (where, value, inner.__name__))


def test_real_reports_fit_the_types(tmp_path, agentbox_bin):
    reports = []
    r = agentbox.run("import os; os.symlink('x', 'l'); open('f', 'w').write('1')",
                     files={"d/in.txt": "1"}, collect=tmp_path / "c")
    reports.append(r.raw)
    reports.append(agentbox.run("import time; time.sleep(5)", timeout=0.5).raw)
    reports.append(agentbox.run("process.exit(2)", language="node").raw)
    # an elided stream, its file kept in the run directory (removed right away)
    r = agentbox.run("print('x' * 5000)", options={"inline_output": 100, "rm": False})
    subprocess.run([agentbox_bin, "rm", r.run_dir], check=True)
    assert r.raw["stdout"]["file"] is not None
    reports.append(r.raw)
    for bad in ({"files": [str(tmp_path / "missing")]}, {"limits": {"pids": "many"}}):
        with pytest.raises(agentbox.SetupError) as e:
            agentbox.run("1", **bad)
        reports.append(e.value.result.raw)
    errors: List[str] = []
    for i, rep in enumerate(reports):
        check_value("report%d" % i, rep, agentbox.Result, errors)
        _report.parse_report(rep)  # and it parses
    assert errors == [], "\n".join(errors)

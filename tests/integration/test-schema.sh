#!/bin/sh
# test-schema.sh -- the JSON Schemas themselves: schemas/spec.schema.json accepts docs/spec.md's
# example and well-formed specs and rejects malformed ones (unknown key, script and code, wrong
# types, a bad language...); schemas/report.schema.json rejects broken reports, so the check
# every other test file ends with (lib.sh validate_reports) can fail. One python3 for all.
# shellcheck source-path=SCRIPTDIR
# shellcheck source=lib.sh
. "$AB_TESTDIR/integration/lib.sh"

SPEC_SCHEMA=$AB_SRCDIR/schemas/spec.schema.json
REPORT_SCHEMA=$AB_SRCDIR/schemas/report.schema.json
C=$WORK/cases
TAB=$(printf '\t')
mkdir "$C"

# case_ NAME JSON: a test document $C/NAME.json (each name once)
case_() {
    [ ! -e "$C/$1.json" ] || bail "test-schema.sh: case $1 twice"
    printf '%s\n' "$2" >"$C/$1.json"
}

# group LABEL [--strict] SCHEMA [+|-]NAME...: cases for SCHEMA (+NAME must validate, -NAME must
# not), collected into $ARGS and $CASES (LABEL:+NAME, so no space or colon in LABEL) for
# expect, which validates them all in one python3
ARGS=
CASES=
group() {
    _label=$1
    shift
    [ -z "$ARGS" ] || ARGS="$ARGS --next"
    if [ "$1" = --strict ]; then
        ARGS="$ARGS --strict"
        shift
    fi
    ARGS="$ARGS $1"
    shift
    for _c in "$@"; do
        ARGS="$ARGS ${_c%"${_c#?}"}$C/${_c#?}.json"
        CASES="$CASES $_label:$_c"
    done
}
# expect: validate every case, one TAP line each
expect() {
    _vrc=0
    # shellcheck disable=SC2086 # a word list: options, schemas and +/-paths without spaces
    validate_json --each --check-schema $ARGS >"$WORK/v.out" 2>&1 || _vrc=$?
    if [ "$_vrc" = 77 ]; then
        for _lc in $CASES; do skip "${_lc%:*} case ${_lc##*:}" "$(head -n1 "$WORK/v.out")"; done
        return 0
    fi
    # the validator prints one line per file, in the order given: read them along $CASES
    cp "$WORK/v.out" "$WORK/v.lines"
    # shellcheck disable=SC2086
    set -- $CASES
    while [ $# -gt 0 ]; do
        _label=${1%:*}
        _c=${1##*:}
        shift
        _name=${_c#?}
        if [ "${_c%"${_c#?}"}" = + ]; then _want=accepts; else _want=rejects; fi
        IFS= read -r _line || _line=
        case $_line in
        "PASS$TAB$C/$_name.json$TAB"*) ok "$_label $_want $_name (${_line##*"$TAB"})" ;;
        "FAIL$TAB$C/$_name.json$TAB"*) not_ok "$_label $_want $_name" "${_line##*"$TAB"}" ;;
        *) not_ok "$_label $_want $_name" "no verdict (exit $_vrc):" "$(head -n5 "$WORK/v.out")" ;;
        esac
    done <"$WORK/v.lines"
}

# ---- spec.schema.json --------------------------------------------------------------------------
# docs/spec.md's example, as written there (the ```json block)
# shellcheck disable=SC2016 # backquotes, not an expansion
sed -n '/^```json$/,/^```$/p' "$AB_SRCDIR/docs/spec.md" | sed '1d;$d' >"$C/doc-example.json"
if [ -s "$C/doc-example.json" ]; then
    ok "docs/spec.md has an example spec"
else
    not_ok "docs/spec.md has an example spec" "no \`\`\`json block found"
fi
case_ script-only '{"script": "agent.py"}'
case_ code-shebang '{"code": "#!/usr/bin/env python3\nprint(1)"}'
case_ every-key '{"spec_version": 1, "script": "/srv/a.py", "language": "node",
  "args": ["-v", ""], "stdin": "/srv/in.txt", "stdin_data": "x", "stdin_fd": 4, "env": {"A": "1", "B": ""},
  "inputs": ["/srv/data.csv"], "workspace": "/srv/ws", "collect": "/srv/out", "rm": false,
  "runs_dir": "/srv/runs",
  "limits": {"timeout": 2.5, "memory": 268435456, "pids": "64", "cpus": 1.5, "cpu-time": "90s",
             "disk": "1G", "inodes": 1000, "tmp-size": "64M", "file-size": 1048576,
             "nofile": 256, "output-limit": "1M"},
  "without": ["seccomp", "landlock", "disable-userns", "cgroup"], "seccomp_policy": "strict",
  "python": "/usr/bin/python3", "node": "/usr/bin/node", "venv": "/srv/venv",
  "node_modules": "/srv/nm", "env_dir": "/srv/env", "ro_binds": ["/srv/ro:/ro"],
  "allow_binds": ["/srv"], "sandbox_user": "1000:1000", "quiet": true, "dry_run": true,
  "inline_output": "1M", "on_output_limit": "truncate"}'
case_ unknown-key '{"script": "a.py", "timout": "10s"}'
case_ unknown-limit '{"script": "a.py", "limits": {"mem": "1G"}}'
case_ script-and-code '{"script": "a.py", "code": "print(1)", "language": "python"}'
case_ neither '{"language": "python", "args": ["1"]}'
case_ bad-language '{"code": "puts 1", "language": "ruby"}'
# issue 25: code is Python unless a shebang or language says otherwise
case_ code-no-language '{"code": "print(1)"}'
case_ stdin-fd-negative '{"script": "a.py", "stdin_fd": -1}'
case_ stdin-fd-string '{"script": "a.py", "stdin_fd": "0"}'
case_ args-not-array '{"script": "a.py", "args": "1 2 3"}'
case_ args-number '{"script": "a.py", "args": [1, 2]}'
case_ rm-string '{"script": "a.py", "rm": "yes"}'
case_ env-number '{"script": "a.py", "env": {"N": 1}}'
case_ memory-fractional '{"script": "a.py", "limits": {"memory": 1.5}}'
case_ timeout-bool '{"script": "a.py", "limits": {"timeout": true}}'
case_ without-network '{"script": "a.py", "without": ["network"]}'
case_ policy-bogus '{"script": "a.py", "seccomp_policy": "lax"}'
case_ spec-version-2 '{"spec_version": 2, "script": "a.py"}'
case_ on-output-limit-bogus '{"script": "a.py", "on_output_limit": "stop"}'
case_ not-object '["a.py"]'
group spec.schema.json "$SPEC_SCHEMA" +doc-example +script-only +code-shebang +every-key \
    +code-no-language -stdin-fd-negative -stdin-fd-string \
    -unknown-key -unknown-limit -script-and-code -neither -bad-language \
    -args-not-array -args-number -rm-string -env-number -memory-fractional -timeout-bool -on-output-limit-bogus \
    -without-network -policy-bogus -spec-version-2 -not-object

# ---- report.schema.json: it can fail ---------------------------------------------------------
# a real report that needs no sandbox: a usage error
"$AGENTBOX" run --report "$C/usage.json" --no-such-option x.py >/dev/null 2>&1 || true
if [ -f "$C/usage.json" ]; then
    ok "a usage error writes a report"
else
    not_ok "a usage error writes a report"
fi
# mut NAME FILTER: a copy of the usage error's report, changed by jq FILTER; mut_write writes
# them all with one jq
MUTS=
MUT_NAMES=
mut() {
    MUT_NAMES="$MUT_NAMES $1"
    MUTS="${MUTS:+$MUTS, }($2)"
}
mut_write() {
    jq -c "$MUTS" "$C/usage.json" >"$C/mutated" || bail "test-schema.sh: jq failed"
    # shellcheck disable=SC2086 # names without spaces
    set -- $MUT_NAMES
    while IFS= read -r _doc; do
        [ ! -e "$C/$1.json" ] || bail "test-schema.sh: case $1 twice"
        printf '%s\n' "$_doc" >"$C/$1.json"
        shift
    done <"$C/mutated"
    [ $# -eq 0 ] || bail "test-schema.sh: jq wrote fewer documents than cases"
}
FILE='{"path": "a.txt", "type": "file", "size": 1, "blocks_bytes": 4096, "mode": "0644",
  "collected": true}'
SHA=$(printf '%064d' 0)
mut with-file ".files = [$FILE + {sha256: \"$SHA\"}]"
mut with-prepare-keys '.environment = {bytes: 0, entries: 0, skipped_count: 0, skipped: [],
  truncated: false} | .network_proxy = {listen: "127.0.0.1:3128", own_network_namespace: true,
  allowed_hosts: [], connections_allowed: null, connections_refused: null,
  connections_failed: null, refused: [], proxy_landlock_abi: 0}'
mut status-bogus '.status = "bogus"'
mut no-exit-code 'del(.exit_code)'
mut exit-code-string '.exit_code = "0"'
mut schema-version-2 '.schema_version = 2'
mut limits-hit-unknown '.limits_hit = ["cpu"]'
mut usage-negative '.usage.cpu_ms = -1'
mut stream-extra-key '.stdout.extra = 1'
mut sandbox-partial '.sandbox = {seccomp: {enforced: true}}'
mut sandbox-unknown '.sandbox.selinux = {enforced: true}'
mut mode-bogus ".files = [$FILE + {mode: \"rw-r--r--\", sha256: \"$SHA\"}]"
mut file-type-bogus ".files = [$FILE + {type: \"door\", sha256: \"$SHA\"}]"
mut file-no-hash-no-flag ".files = [$FILE]"
mut path-raw-byte ".files = [$FILE + {path: \"a\\u001bb\", sha256: \"$SHA\"}]"
mut workspace-mode-bogus '.workspace_mode = "overlay"'
mut top-level-extra '.future_key = 1'
mut future-key '.future_key = 1'
mut_write
group report.schema.json/strict --strict "$REPORT_SCHEMA" +usage +with-file \
    +with-prepare-keys -status-bogus -no-exit-code -exit-code-string -schema-version-2 \
    -limits-hit-unknown -usage-negative -stream-extra-key -sandbox-partial -sandbox-unknown \
    -mode-bogus -file-type-bogus -file-no-hash-no-flag -path-raw-byte -workspace-mode-bogus \
    -top-level-extra
# the published schema stays open at the top level: keys may be added within a version
group report.schema.json "$REPORT_SCHEMA" +future-key
expect

done_testing

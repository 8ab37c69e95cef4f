#!/bin/sh
# test-spec.sh -- issue 14: the run spec (docs/spec.md). `agentbox run --spec -` runs what a JSON
# object describes; every flag is sugar over a spec key, so the same run given as flags and as
# a spec makes the same bwrap command line (--dry-run, byte for byte) and the same outcome; a
# spec with an unknown key, a wrong type or a value that does not parse is a usage error (2).
# shellcheck source-path=SCRIPTDIR
# shellcheck source=lib.sh
. "$AB_TESTDIR/integration/lib.sh"

# the issue's own check
out=$(printf '{"language":"python","code":"print(6*7)"}' |
    AGENTBOX_RUNS_DIR=$RUNS bounded 60 "$AGENTBOX" run --spec - 2>"$WORK/err")
is "$out" 42 "printf '{\"language\":\"python\",\"code\":\"print(6*7)\"}' | agentbox run --spec - prints 42"

# stdin_data: the script's stdin given inline reaches the script (it used to be parsed and dropped)
out=$(printf '{"language":"python","code":"import sys; print(sys.stdin.read().upper())","stdin_data":"inline input","rm":true}' |
    AGENTBOX_RUNS_DIR=$RUNS bounded 60 "$AGENTBOX" run --spec - 2>"$WORK/err")
is "$out" "INLINE INPUT" "stdin_data is the script's stdin"

printf 'import sys\nprint(sys.argv[1:])\n' >"$WORK/s.py"
mkdir -m 0755 "$WORK/in"
echo data >"$WORK/in/d.txt"
# same LABEL 'FLAGS' 'SPEC': --dry-run output of both is identical (the run directory's random
# name aside)
same() {
    _sl=$1 _flags=$2 _spec=$3
    rc=0
    # shellcheck disable=SC2086 # the flags are words
    "$AGENTBOX" run --runs-dir "$RUNS" --dry-run $_flags >"$WORK/a" 2>"$WORK/ea" || rc=$?
    printf '%s' "$_spec" | "$AGENTBOX" run --spec - >"$WORK/b" 2>"$WORK/eb" || rc=$((rc + $?))
    is "$rc" 0 "$_sl: both exit 0 ($(head -c 160 "$WORK/eb"))"
    if [ -s "$WORK/a" ] && cmp -s "$WORK/a" "$WORK/b"; then
        ok "$_sl: the same bwrap command line from flags and from the spec"
    else
        not_ok "$_sl: the same bwrap command line from flags and from the spec" \
            "$(diff "$WORK/a" "$WORK/b" | head -n 6 | tr '\n' '|')"
    fi
}
same "script and args" "$WORK/s.py a b" \
    "{\"script\":\"$WORK/s.py\",\"args\":[\"a\",\"b\"],\"dry_run\":true,\"runs_dir\":\"$RUNS\"}"
same "limits and env" "--timeout 5s --pids 40 --tmp-size 8M --nofile 512 --env A=1 --env B=x=y $WORK/s.py" \
    "{\"script\":\"$WORK/s.py\",\"limits\":{\"timeout\":5,\"pids\":40,\"tmp-size\":8388608,\"nofile\":\"512\"},\"env\":{\"A\":\"1\",\"B\":\"x=y\"},\"dry_run\":true,\"runs_dir\":\"$RUNS\"}"
same "without, policy, ro_binds" "--without landlock --seccomp-policy strict --ro-bind $WORK/in:/data --lang python $WORK/s.py" \
    "{\"script\":\"$WORK/s.py\",\"language\":\"python\",\"without\":[\"landlock\"],\"seccomp_policy\":\"strict\",\"ro_binds\":[\"$WORK/in:/data\"],\"dry_run\":true,\"runs_dir\":\"$RUNS\"}"
same "net_strict and an /etc file" "--net-strict --ro-bind /etc/adduser.conf $WORK/s.py" \
    "{\"script\":\"$WORK/s.py\",\"net_strict\":true,\"ro_binds\":[\"/etc/adduser.conf\"],\"dry_run\":true,\"runs_dir\":\"$RUNS\"}"
check "net_strict: the dry run's command line has the Landlock TCP rule" grep -qx -- --landlock-net "$WORK/b"

# the same outcome: a real run both ways
abb 60 --input "$WORK/in" "$WORK/s.py" x
flags_files=$(jq -c '[.files[].path] | sort' "$WORK/r.json")
flags_out=$(cat "$WORK/out")
printf '{"script":"%s","args":["x"],"inputs":["%s"],"runs_dir":"%s"}' "$WORK/s.py" "$WORK/in" "$RUNS" |
    bounded 60 "$AGENTBOX" run --spec - --report "$WORK/r2.json" >"$WORK/out2" 2>"$WORK/err2"
is "$(cat "$WORK/out2")" "$flags_out" "a real run: the same output from the spec"
is "$(jq -c '[.files[].path] | sort' "$WORK/r2.json")" "$flags_files" "a real run: the same files in the report"

# refusals: exit 2, one line naming the key, a usage_error report
refused_spec() { # LABEL JSON PATTERN
    rc=0
    rm -f "$WORK/r3.json"
    printf '%s' "$2" | bounded 30 "$AGENTBOX" run --spec - --report "$WORK/r3.json" >"$WORK/out3" 2>"$WORK/err3" || rc=$?
    is "$rc" 2 "$1: exit 2"
    check "$1: the line names the problem" grep -q -- "$3" "$WORK/err3"
    is "$(jq -r .status "$WORK/r3.json" 2>/dev/null)" usage_error "$1: the report says usage_error"
    # issue 25: a spec's caller reads the spec's keys, never a flag it did not use, and a fix
    is "$(jq '(.message | test("--") | not) and (.fix | test("--") | not)' "$WORK/r3.json")" \
        true "$1: the report's message and fix name no flag"
    is "$(jq '.fix | type == "string" and length > 0' "$WORK/r3.json")" true \
        "$1: the report has a fix"
}
refused_spec "an unknown key" '{"code":"print(1)","language":"python","bogus":1}' 'unknown key "bogus"'
refused_spec "script and code" '{"code":"print(1)","script":"/x.py"}' 'exactly one of'
refused_spec "a wrong type" '{"code":"print(1)","language":"python","args":"a"}' '"args" must be an array'
refused_spec "a limit that does not parse" '{"code":"print(1)","language":"python","limits":{"memory":"lots"}}' "invalid limits.memory 'lots'"
refused_spec "an unknown limit" '{"code":"print(1)","language":"python","limits":{"ram":1}}' 'unknown limit "ram"'
refused_spec "not JSON" '{"code":' 'not valid JSON'
refused_spec "a spec_version from the future" '{"spec_version":2,"code":"print(1)","language":"python"}' 'spec_version'
# issue 25: a limit a spec set is raised by its key, a flag by its flag
printf '{"language":"python","code":"while True: pass","limits":{"timeout":"1s"},"rm":true}' |
    AGENTBOX_RUNS_DIR=$RUNS bounded 60 "$AGENTBOX" run --spec - --report "$WORK/r3.json" >/dev/null 2>&1
is "$(jq -r .fix "$WORK/r3.json")" "raise limits.timeout (now 1.0 s), or make the script faster" \
    "a spec's timeout: the fix names limits.timeout"
bounded 60 "$AGENTBOX" run --runs-dir "$RUNS" --rm --timeout 1s --lang python --code 'while True: pass' \
    --report "$WORK/r3.json" >/dev/null 2>&1
is "$(jq -r .fix "$WORK/r3.json")" "raise --timeout (now 1.0 s), or make the script faster" \
    "a flag's timeout: the fix names --timeout"
rc=0
printf '{}' | "$AGENTBOX" run --spec - --timeout 5s "$WORK/s.py" >/dev/null 2>"$WORK/err3" || rc=$?
is "$rc" 2 "--spec with other run flags: exit 2"
check "--spec with other run flags: the line says why" grep -q 'describes the whole run' "$WORK/err3"

# --report-fd: the report alone on a descriptor of the caller's (what the client packages read)
rc=0
printf '{"language":"python","code":"print(5)","rm":true}' |
    bounded 60 "$AGENTBOX" run --spec - --report-fd 3 3>"$WORK/fd.json" >"$WORK/out4" 2>"$WORK/err4" || rc=$?
is "$rc" 0 "--report-fd 3: exit 0"
is "$(jq -r .status "$WORK/fd.json" 2>/dev/null)/$(cat "$WORK/out4")" "exited/5" \
    "--report-fd 3: the report on fd 3, the script's output on stdout"
rc=0
"$AGENTBOX" run --report-fd 9 --lang python --code 'print(1)' >/dev/null 2>"$WORK/err4" || rc=$?
is "$rc" 2 "--report-fd of a closed fd: exit 2"
# a spec that does not parse: the usage_error report goes to the fd too (a client reads only it)
rc=0
printf '{"language":"python","code":"1","bogus":1}' |
    "$AGENTBOX" run --spec - --report-fd 3 3>"$WORK/fd2.json" >/dev/null 2>"$WORK/err4" || rc=$?
is "$rc/$(jq -r '.status + " " + .message' "$WORK/fd2.json" 2>/dev/null)" '2/usage_error spec: unknown key "bogus"' \
    "--report-fd: a spec with an unknown key gets a usage_error report on the fd"
# version --json: what the client packages check before their first run
is "$("$AGENTBOX" version --json | jq -c '[.report_schema_version, .spec_version, (.agentbox_version | type)]')" \
    '[1,1,"string"]' "version --json: report schema, spec version and the version"

done_testing

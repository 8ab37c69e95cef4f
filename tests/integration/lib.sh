# lib.sh -- sourced by every integration test (POSIX sh). TAP output.
#
# Environment (set by tests/meson.build, or by run-as.sh for the user variant):
#   AGENTBOX AGENTBOX_INIT AB_PROBE AB_SRCDIR AB_TESTDIR
# Provides:
#   $WORK   a private temp dir, removed on exit; $RUNS = $WORK/runs (the runs root)
#   ab ARGS...        agentbox run --runs-dir $RUNS --report $WORK/r.json ARGS...
#                     sets $rc; stdout in $WORK/out, stderr in $WORK/err
#   jr FILTER         jq -r FILTER on the last report
#   keep_report FILE  keep a copy of the report FILE (ab and abb_core keep $WORK/r.json)
#                     in $WORK/reports, for done_testing to validate against
#                     schemas/report.schema.json (one python3 for all: one TAP line)
#   ok/not_ok/skip/is/check/done_testing   TAP helpers
#   bounded SECS CMD  run CMD under an outer timeout (safety net for attack tests)
#   no_procs TOKEN    true when no process on the host has TOKEN in its command line
set -u

_n=0
_failed=0
WORK=$(mktemp -d /tmp/agentbox-test.XXXXXX)
RUNS=$WORK/runs
export WORK RUNS
_cleanup() {
    chmod -R u+rwX "$WORK" 2>/dev/null || true
    rm -rf --one-file-system "$WORK"
}
trap _cleanup EXIT
trap 'exit 1' INT TERM
# Started as root, the sandbox user must be able to reach the run directories under $WORK
# (mktemp made it 0700): see test-badinput.sh for what happens when it cannot.
chmod 711 "$WORK"

ok() {
    _n=$((_n + 1))
    echo "ok $_n - $*"
}
not_ok() {
    _n=$((_n + 1))
    _failed=$((_failed + 1))
    echo "not ok $_n - $1"
    shift
    # every line of a detail is a comment (a detail may hold lines such as "not ok ...")
    for _l in "$@"; do
        printf '%s\n' "$_l" | sed 's/^/#   /'
    done
    if [ -f "$WORK/err" ]; then
        sed -n '1,15s/^/#   stderr: /p' "$WORK/err"
    fi
}
# skip MSG REASON: an explicit TAP skip, never counted as a pass.
skip() {
    _n=$((_n + 1))
    echo "ok $_n - $1 # SKIP $2"
}
# is GOT WANT MSG
is() {
    if [ "$1" = "$2" ]; then
        ok "$3"
    else
        not_ok "$3" "got:  '$1'" "want: '$2'"
    fi
}
# check MSG CMD...: ok when CMD succeeds
check() {
    _msg=$1
    shift
    if "$@"; then ok "$_msg"; else not_ok "$_msg" "command failed: $*"; fi
}
# refute MSG CMD...: ok when CMD fails
refute() {
    _msg=$1
    shift
    if "$@"; then not_ok "$_msg" "command unexpectedly succeeded: $*"; else ok "$_msg"; fi
}
# keep_report FILE: keep a copy of the report FILE (ab and abb_core pass $WORK/r.json) as
# $WORK/reports/N.json, when it exists and is not the copy kept last (ab does not remove the
# previous report first). N is the next free number, so a call in a subshell, whose count the
# test does not see, never overwrites a copy.
_nrep=0
keep_report() {
    _kr=$1
    [ -f "$_kr" ] && [ ! -L "$_kr" ] || return 0
    if [ -f "$WORK/reports/$_nrep.json" ] && cmp -s "$_kr" "$WORK/reports/$_nrep.json"; then
        return 0
    fi
    [ -d "$WORK/reports" ] || mkdir "$WORK/reports"
    _nrep=$((_nrep + 1))
    while [ -e "$WORK/reports/$_nrep.json" ]; do _nrep=$((_nrep + 1)); done
    cp "$_kr" "$WORK/reports/$_nrep.json"
    echo "$_nrep.json $_n" >>"$WORK/reports/index"
}
# validate_json ARGS...: tests/integration/validate-schema.py ARGS (exit 77: no jsonschema). Debian's
# python3 first, the one ./setup installs python3-jsonschema for (and no pyenv shim to start);
# then python3 from PATH, if it differs.
validate_json() {
    _vpy=python3
    if [ -x /usr/bin/python3 ]; then _vpy=/usr/bin/python3; fi
    _vjrc=0
    "$_vpy" "$AB_TESTDIR/integration/validate-schema.py" "$@" || _vjrc=$?
    if [ "$_vjrc" = 77 ] && [ "$_vpy" != python3 ] &&
        [ "$(command -v python3)" != /usr/bin/python3 ] && command -v python3 >/dev/null; then
        _vjrc=0
        python3 "$AB_TESTDIR/integration/validate-schema.py" "$@" || _vjrc=$?
    fi
    return "$_vjrc"
}
# validate_reports: one TAP line for every report kept in this test file, validated in one
# python3 process against schemas/report.schema.json (from the source tree, or the stage
# run-as.sh made). A skip when there is none to validate or no python3-jsonschema.
validate_reports() {
    _schema=$AB_SRCDIR/schemas/report.schema.json
    _what="reports validate against schemas/report.schema.json"
    keep_report "$WORK/r.json"
    set -- "$WORK"/reports/*.json
    if [ ! -f "$1" ]; then
        skip "$_what" "this test file kept no report"
        return 0
    fi
    _vrc=0
    _vt0=$(date +%s%N)
    validate_json --strict "$_schema" "$@" >"$WORK/validate.out" 2>&1 || _vrc=$?
    _vms=$((($(date +%s%N) - _vt0) / 1000000))
    case $_vrc in
    0)
        ok "all $# $_what"
        echo "# validated in $_vms ms ($(du -sk "$WORK/reports" | cut -f1) KiB of reports)"
        ;;
    77) skip "$_what" "$(head -n1 "$WORK/validate.out")" ;;
    *)
        _vn=$((_n + 1))
        echo "not ok $_vn - $# $_what (see below)"
        _n=$_vn
        _failed=$((_failed + 1))
        # each failing report named with the TAP test it was kept after
        awk 'NR == FNR { after[$1] = $2; next }
            match($0, /^[^ :]*\/reports\/[0-9]+\.json/) {
                f = substr($0, 1, RLENGTH)
                sub(/.*\//, "", f)
                $0 = "report " f " (kept after test " after[f] ")" substr($0, RLENGTH + 1)
            }
            { print "#   " $0 }' "$WORK/reports/index" "$WORK/validate.out"
        ;;
    esac
}
done_testing() {
    validate_reports
    echo "1..$_n"
    [ "$_failed" -eq 0 ]
}
bail() {
    echo "Bail out! $*"
    exit 1
}

is_root() { [ "$(id -u)" -eq 0 ]; }
as_user() { [ "${AB_AS_USER:-0}" = 1 ] || ! is_root; }

# rc is read by the tests that source this file
# shellcheck disable=SC2034
ab() {
    rc=0
    "$AGENTBOX" run --runs-dir "$RUNS" --report "$WORK/r.json" "$@" \
        >"$WORK/out" 2>"$WORK/err" || rc=$?
    keep_report "$WORK/r.json"
}
# abb SECS ARGS...: ab under an outer timeout of SECS (the test's own safety net), after
# removing the last report. Tests that need more (--rm, a note) redefine abb on top of abb_core.
# shellcheck disable=SC2034
abb_core() {
    _secs=$1
    shift
    rm -f "$WORK/r.json"
    rc=0
    bounded "$_secs" "$AGENTBOX" run --runs-dir "$RUNS" --report "$WORK/r.json" "$@" \
        >"$WORK/out" 2>"$WORK/err" || rc=$?
    keep_report "$WORK/r.json"
}
abb() { abb_core "$@"; }
# has LINE: the last run printed exactly LINE; hasre RE: a line matches RE
has() { grep -qxF -- "$1" "$WORK/out"; }
hasre() { grep -q -- "$1" "$WORK/out"; }
# val KEY: the value of a KEY=VALUE line the last run printed
val() { sed -n "s/^$1=//p" "$WORK/out" | head -n1; }
jr() {
    jq -r "$1" "$WORK/r.json"
}
# jqe FILTER [FILE]: true when the jq condition holds (default: the last report); prints nothing
jqe() {
    jq -e "$1" "${2:-$WORK/r.json}" >/dev/null
}
bounded() {
    _secs=$1
    shift
    timeout -k 5 "$_secs" "$@"
}
no_procs() {
    for _p in /proc/[0-9]*; do
        if tr '\0' ' ' 2>/dev/null <"$_p/cmdline" | grep -q -- "$1"; then
            return 1
        fi
    done
    return 0
}
# no_procs_mine PATTERN: the same, among this user's processes run from this test's binaries
# only (a test's own slots and supervisors: the same test as the other user, or another tree's
# tests, may run beside it).
no_procs_mine() {
    _me=$(id -u)
    _sup=$(readlink -f "${AGENTBOX_SUPERVISOR:-/nonexistent}" 2>/dev/null || true)
    for _p in /proc/[0-9]*; do
        _uid=$(awk '/^Uid:/ { print $2 }' "$_p/status" 2>/dev/null) || continue
        [ "$_uid" = "$_me" ] || continue
        if [ -n "$_sup" ] && [ -e "$_sup" ]; then
            [ "$(readlink "$_p/exe" 2>/dev/null)" = "$_sup" ] || continue
        fi
        if tr '\0' ' ' 2>/dev/null <"$_p/cmdline" | grep -q -- "$1"; then
            return 1
        fi
    done
    return 0
}
# A TCP+UDP listener on 127.0.0.1 that logs every connection/datagram to $1.log.
# Prints "TCPPORT UDPPORT" into $1.ports. Stop it with: kill "$(cat $1.pid)".
listener_start() {
    python3 - "$1" <<'PY' &
import socket, sys, threading, os
base = sys.argv[1]
t = socket.socket(); t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
t.bind(("127.0.0.1", 0)); t.listen(16)
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(("127.0.0.1", 0))
log = open(base + ".log", "a", buffering=1)
def tcp():
    while True:
        c, a = t.accept(); log.write("tcp %s\n" % (a,)); c.close()
def udp():
    while True:
        d, a = u.recvfrom(4096); log.write("udp %s\n" % (a,))
threading.Thread(target=tcp, daemon=True).start()
threading.Thread(target=udp, daemon=True).start()
with open(base + ".ports.tmp", "w") as f:
    f.write("%d %d\n" % (t.getsockname()[1], u.getsockname()[1]))
os.rename(base + ".ports.tmp", base + ".ports")
threading.Event().wait(600)
PY
    echo $! >"$1.pid"
    _i=0
    while [ ! -f "$1.ports" ] && [ $_i -lt 100 ]; do sleep 0.05; _i=$((_i + 1)); done
    : >>"$1.log"
}
listener_stop() {
    kill "$(cat "$1.pid")" 2>/dev/null || true
}

command -v jq >/dev/null || bail "jq is required (apt-get install jq)"
[ -x "$AGENTBOX" ] || bail "AGENTBOX='$AGENTBOX' is not executable"

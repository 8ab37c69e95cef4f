#!/bin/sh
# tests/vm/checks.sh -- the VM lane's checks (issue 23), run as root inside the throwaway
# Debian 12 VM of tests/vm/vm-run: systemd 252 as PID 1, a pure cgroup v2 hierarchy, a
# lingering user "agent" (uid 1000) whose user@1000.service is delegated cpu, memory and pids.
# The host's build tree is shared at /mnt/host (built on the host: building in the VM takes
# 15 minutes). TAP on stdout.
#
# Each of root, the user in a login session (su -l: pam_systemd, XDG_RUNTIME_DIR, the user's
# bus) and the user without one (runuser, a bare environment) runs the same checks: a run gets
# a cgroup v2 place of its own from systemd with memory.max, pids.max and cpu.max set (read on
# the host side while the run is alive), an OOM is status oom and exit 137, a fork bomb stops
# at --pids. Then: prepare's install sandbox gets its cgroup too, systemd's own cgroups are as
# they were, no agentbox scope is left, doctor agrees with a run, a warm slot and MCP calls
# through the official SDK run with a cgroup.
#   checks.sh BINDIR   BINDIR: the shared build's directory in the VM (default /mnt/host/build)
set -u
cd /mnt/host || exit 1
A=${1:-/mnt/host/build}/agentbox
W=$(mktemp -d /tmp/vmcheck.XXXXXX)
chmod 1777 "$W" # reports of the user's runs land here too (a throwaway VM)
n=0
failed=0

ok() {
    n=$((n + 1))
    echo "ok $n - $1"
}
not_ok() {
    n=$((n + 1))
    failed=$((failed + 1))
    echo "not ok $n - $1"
    [ $# -lt 2 ] || printf '%s\n' "$2" | head -c 3000 | sed 's/^/#   /'
}
check() { # DESC CMD...
    _d=$1
    shift
    if "$@"; then ok "$_d"; else not_ok "$_d"; fi
}
jqe() { jq -e "$1" "$2" >/dev/null 2>&1; } # FILTER FILE: the condition holds
is() { # GOT WANT DESC
    if [ "$1" = "$2" ]; then ok "$3"; else not_ok "$3" "got '$1', want '$2'"; fi
}

# as WHO CMD: run the shell command CMD as WHO (root, session: the user in a login session,
# nosession: the user with a bare environment, no XDG_RUNTIME_DIR and no bus address)
as() {
    _who=$1
    shift
    case $_who in
    root) sh -c "$*" ;;
    session) su -l agent -c "cd $W && $*" ;;
    nosession) runuser -u agent -- env -i PATH=/usr/bin:/bin HOME="$W" LANG=C.UTF-8 \
        sh -c "cd $W && $*" ;;
    esac
}

# What systemd's tree looks like: every cgroup directory and what it enables for its children.
# Every cgroup that existed before the checks must enable exactly the same afterwards (issue
# 23: the probe wrote +pids into a cgroup systemd manages), and nothing of agentbox's may be
# left anywhere. (systemd itself adds units meanwhile, e.g. a login session's: not compared.)
cg_state() {
    find /sys/fs/cgroup -mindepth 1 -type d 2>/dev/null | sort | while read -r d; do
        printf '%s %s\n' "$d" "$(tr ' ' , <"$d/cgroup.subtree_control" 2>/dev/null)"
    done
}
cg_state >"$W/cg.before"

# Reads memory.max, pids.max, cpu.max of the one live run cgroup of a run of WHO.
live_limits() {
    for _ in $(seq 1 200); do
        d=$(find /sys/fs/cgroup -type d -path '*/agentbox-*.scope/run-*' 2>/dev/null | head -n1)
        if [ -n "$d" ] && [ -f "$d/memory.max" ]; then
            echo "$(cat "$d/memory.max") $(cat "$d/pids.max") $(cat "$d/cpu.max")"
            return 0
        fi
        sleep 0.05
    done
    echo none
}

# systemd stops an emptied scope and removes its cgroup a moment after its last process
scopes_gone() {
    for _ in $(seq 1 100); do
        [ -n "$(find /sys/fs/cgroup -type d -name 'agentbox-*.scope' 2>/dev/null | head -n1)" ] || return 0
        sleep 0.05
    done
    find /sys/fs/cgroup -type d -name 'agentbox-*.scope' | sed 's/^/#   left: /'
    return 1
}

for who in root session nosession; do
    r=$W/$who.json
    rm -f "$r"
    # a plain run: the cgroup, its place and its mechanisms
    as "$who" "$A run --report $r --lang python --code 'print(6*7)' >$W/$who.out 2>$W/$who.err"
    rc=$?
    is "$rc/$(jq -r .status "$r" 2>/dev/null)" 0/exited "$who: a run exits 0"
    [ "$rc" = 0 ] || sed 's/^/#   /' "$W/$who.err"
    det=$(jq -r .sandbox.cgroup.detail "$r" 2>/dev/null)
    case "$det" in
    "cgroup v2 /sys/fs/cgroup/"*"/agentbox-"*".scope/run-"*"(a scope systemd delegated to this run; controllers: memory pids cpu)")
        ok "$who: the run's cgroup is a leaf of a scope systemd delegated to it" ;;
    *) not_ok "$who: the run's cgroup is a leaf of a scope systemd delegated to it" "$det" ;;
    esac
    case "$who/$det" in
    root/*/system.slice/*) ok "$who: the scope is the system manager's" ;;
    */user@1000.service/*) ok "$who: the scope is the user's manager's" ;;
    *) not_ok "$who: the scope comes from the right manager" "$det" ;;
    esac
    is "$(jq -r '[.limits.memory.mechanism, .limits.pids.mechanism, .limits.cpus.mechanism] | join("|")' "$r")" \
        "cgroup v2 memory.max, memory.swap.max=0|cgroup v2 pids.max|cgroup v2 cpu.max" \
        "$who: memory, pids and cpus are cgroup v2 limits"
    is "$(jq -r '.warnings | length' "$r")" 0 "$who: no warning"

    # the kernel limits, read on the host side while the run is alive
    as "$who" "$A run --rm --memory 96M --pids 33 --cpus 0.5 --lang python --code 'import time; time.sleep(4)' >/dev/null 2>&1" &
    bg=$!
    is "$(live_limits)" "100663296 34 50000 100000" \
        "$who: the live run cgroup has memory.max, pids.max (+1: bwrap's monitor) and cpu.max"
    wait "$bg"

    # memory: an OOM kill is status oom and exit 137 (not 125: issue 23)
    as "$who" "$A run --report $r --memory 64M --lang python --code 'x = bytearray(300 << 20); print(len(x))' >/dev/null 2>$W/$who.err"
    rc=$?
    is "$rc/$(jq -r .status "$r")/$(jq -r '.limits_hit | join(",")' "$r")" 137/oom/memory \
        "$who: 300 MiB under --memory 64M: exit 137, status oom, limits_hit memory"
    check "$who: ... counted by the cgroup (usage.oom_kills >= 1)" \
        jqe '.usage.oom_kills >= 1' "$r"

    # pids: a fork bomb stops at --pids, and nothing of it outlives the run
    as "$who" "timeout 60 $A run --report $r --pids 16 --timeout 20s --lang python --code '
import os, time
kids = 0
for i in range(200):
    try:
        if os.fork() == 0:
            time.sleep(30); os._exit(0)
        kids += 1
    except OSError:
        break
print(\"forked\", kids)
' >$W/$who.out 2>/dev/null"
    kids=$(sed -n 's/^forked //p' "$W/$who.out")
    check "$who: a fork bomb under --pids 16 is refused after at most 16 tasks ($kids children)" \
        test -n "$kids" -a "${kids:-999}" -lt 16
    check "$who: ... and the report says pids" jqe '.limits_hit | index("pids")' "$r"
    check "$who: no agentbox scope is left after the runs" scopes_gone
done

# prepare's install sandbox gets its cgroup the same way (an empty requirements file, no index:
# the VM has no network; once, as the user: a venv takes most of a minute under emulation)
: >"$W/empty.txt"
chmod 644 "$W/empty.txt"
who=session
as "$who" "$A prepare --python $W/empty.txt --no-index --cache-dir $W/pc-$who --report $W/prep-$who.json >$W/$who.out 2>$W/$who.err"
rc=$?
is "$rc/$(jq -r '[.limits.memory.mechanism, .limits.pids.mechanism] | join("|")' "$W/prep-$who.json" 2>/dev/null)" \
    "0/cgroup v2 memory.max, memory.swap.max=0|cgroup v2 pids.max" \
    "$who: prepare's install sandbox has its cgroup v2 limits"
[ "$rc" = 0 ] || sed 's/^/#   /' "$W/$who.err"

# a session (issue 27), as the user in a login session: state kept across cells, and its
# memory limit (cgroup v2, in its own scope) binding the whole session
cat >"$W/ses.in" <<'CELLS'
{"spec": {"language": "python", "limits": {"memory": "128M"}}}
{"cell": {"code": "x = 1"}}
{"cell": {"code": "x += 1; x"}}
{"cell": {"code": "a = bytearray(200 << 20)"}}
{"close": {}}
CELLS
chmod 644 "$W/ses.in"
as session "$A session --jsonl <$W/ses.in >$W/ses.out 2>$W/ses.err"
is "$(jq -r 'select(.cell.id == 2) | .cell.result.text' "$W/ses.out" 2>/dev/null)" 2 \
    "session: x = 1 then x += 1; x -> 2"
is "$(jq -r 'select(.cell.id == 3) | .cell.status' "$W/ses.out" 2>/dev/null)/$(jq -r 'select(.closed) | .closed.limits.memory.mechanism' "$W/ses.out" 2>/dev/null)" \
    "lost/cgroup v2 memory.max, memory.swap.max=0" \
    "session: its cgroup v2 memory limit binds across cells (200M in 128M: lost)"

# systemd's own cgroups are as they were: nothing enabled in them, nothing of ours left
cg_state >"$W/cg.after"
changed=$(join "$W/cg.before" "$W/cg.after" | awk '$2 != $3')
if [ -z "$changed" ]; then
    ok "systemd's cgroups enable the same controllers as before ($(wc -l <"$W/cg.before") compared)"
else
    not_ok "systemd's cgroups enable the same controllers as before" "$changed"
fi
left=$(find /sys/fs/cgroup -mindepth 1 \( -name 'agentbox*' -o -name 'run-[0-9]*' \) 2>/dev/null)
is "$left" "" "no cgroup of agentbox's is left anywhere"

# doctor takes the very path a run takes, and says so as the user
as session "$A doctor --json >$W/doctor.json 2>$W/doctor.err"
is "$?" 0 "doctor (user, login session): ok"
drun=$(jq -r '.checks[] | select(.check == "sandbox run") | "\(.result) \(.detail)"' "$W/doctor.json")
case "$drun" in
"ok status exited, exit 0, "*"cgroup: cgroup v2 /sys/fs/cgroup/user.slice/"*"memory: cgroup v2 memory.max, memory.swap.max=0; pids: cgroup v2 pids.max; cpus: cgroup v2 cpu.max")
    ok "doctor: its sandbox run got a cgroup v2 scope and every kernel limit" ;;
*) not_ok "doctor: its sandbox run got a cgroup v2 scope and every kernel limit" "$drun" ;;
esac
is "$(jq -r '.checks[] | select(.check == "cgroups") | .result' "$W/doctor.json")" ok \
    "doctor: its cgroups check is ok"

# MCP through the official SDK, as the user in a session: a run, an OOM, and a warm slot
if [ -d /mnt/host/.deps/mcp-sdk/node_modules ] && command -v node >/dev/null; then
    as session "AGENTBOX=$A NODE_PATH=/mnt/host/.deps/mcp-sdk/node_modules node /mnt/host/tests/vm/mcp.cjs" >"$W/mcp.tap" 2>&1
    while IFS= read -r line; do
        case $line in
        "ok "*) ok "mcp: ${line#ok * - }" ;;
        "not ok "*) not_ok "mcp: ${line#not ok * - }" ;;
        "#"*) echo "$line" ;;
        esac
    done <"$W/mcp.tap"
    grep -q '^ok \|^not ok ' "$W/mcp.tap" || not_ok "mcp: the SDK client ran" "$(tail -20 "$W/mcp.tap")"
else
    not_ok "mcp: the MCP SDK (.deps/mcp-sdk, ./setup) and node are in the VM"
fi

rm -rf "$W"
echo "1..$n"
[ "$failed" -eq 0 ]

#!/bin/sh
# test-lifecycle.sh -- how runs end (T13, T14, T15): the timeout kills a SIGTERM-ignoring loop
# and daemons (double-forked setsid, detached Node children), the run ends when the script's
# main process exits and nothing survives it, and killing agentbox itself (TERM, HUP, KILL)
# leaves no sandbox process behind. No process with the run's token may be left on the host.
# A reader of agentbox's output that does not read (a FIFO, a terminal) holds up neither the
# timeout nor SIGTERM, and the report still has all of the output (issue 13).
# shellcheck source-path=SCRIPTDIR
# shellcheck source=lib.sh
. "$AB_TESTDIR/integration/lib.sh"

# between N LO HI
between() { [ "$1" -ge "$2" ] && [ "$1" -le "$3" ]; }
# gone_within SECS TOKEN: no host process has TOKEN in its command line within SECS seconds
gone_within() {
    _t=0
    while ! no_procs "$2" 2>/dev/null; do
        [ "$_t" -ge $(($1 * 20)) ] && return 1
        sleep 0.05
        _t=$((_t + 1))
    done
    return 0
}
# seen_within SECS PATTERN: a host process matching PATTERN shows up within SECS seconds
seen_within() {
    _t=0
    while no_procs "$2" 2>/dev/null; do
        [ "$_t" -ge $(($1 * 20)) ] && return 1
        sleep 0.05
        _t=$((_t + 1))
    done
    return 0
}
# leftovers TOKEN: the command lines still holding TOKEN (for diagnostics)
leftovers() {
    for _p in /proc/[0-9]*; do
        tr '\0' ' ' 2>/dev/null <"$_p/cmdline" | grep -- "$1" && echo " (pid ${_p#/proc/})"
    done
}
# expect_timeout LABEL: the last run ended by the 2 s timeout. The deadline cannot come early;
# how late the kill lands depends on the machine's load, so the upper bound is generous (the
# runs it catches hang until the test's own 30 s net).
expect_timeout() {
    is "$rc" 124 "$1: agentbox exits 124"
    is "$(jr .status)" timeout "$1: status timeout"
    is "$(jr .agentbox_exit)" 124 "$1: agentbox_exit 124"
    is "$(jr '.limits_hit | index("timeout") != null')" true "$1: limits_hit names timeout"
    _w=$(jr .wall_ms)
    if between "${_w:-0}" 2000 10000; then ok "$1: wall_ms $_w is in [2000, 10000]"; else
        not_ok "$1: wall_ms is in [2000, 10000]" "wall_ms=$_w"
    fi
}
# expect_no_procs LABEL TOKEN: checked right after agentbox returned
expect_no_procs() {
    if no_procs "$2" 2>/dev/null; then ok "$1: no process is left"; else
        not_ok "$1: no process is left" "$(leftovers "$2" | tr '\n' ' ')"
    fi
}

T=ablc$$x$(date +%s)

# ---- (a) a loop that ignores SIGTERM (and spins) ----------------------------------------------
cat >"$WORK/spin.py" <<'EOF'
import signal, sys
for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1):
    signal.signal(s, signal.SIG_IGN)
print("SPINNING", flush=True)
while True:
    pass
EOF
abb 30 --timeout 2s "$WORK/spin.py" "${T}a"
expect_timeout "py SIGTERM-ignoring spin"
is "$(jr .stdout.text)" SPINNING "py SIGTERM-ignoring spin: its output before the kill is kept"
is "$(jr .signal)" 9 "py SIGTERM-ignoring spin: ended by SIGKILL"
expect_no_procs "py SIGTERM-ignoring spin" "${T}a"

# ---- (b) a double-forked setsid daemon; the main process exits at once ----------------------
# The daemon keeps stdout and stderr open (T15: agentbox must not wait for their EOF) and
# re-executes itself with TOKEN-daemon in its argv.
cat >"$WORK/daemon.py" <<'EOF'
import os, sys, time
tok, main_sleeps = sys.argv[1], sys.argv[2] == "sleep"
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.setsid()
    if os.fork() == 0:
        os.close(r)
        os.write(w, b"up")
        os.close(w)
        os.execv(sys.executable, [sys.executable, "-c",
                 "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                 "signal.signal(signal.SIGHUP, signal.SIG_IGN)\ntime.sleep(3600)", tok + "-daemon"])
    os._exit(0)
os.close(w)
os.waitpid(pid, 0)
up = os.read(r, 2)
open("/work/daemon-up", "w").write(up.decode())
print("DAEMON " + up.decode(), flush=True)
if main_sleeps:
    time.sleep(3600)
EOF
# A run that waited for the daemon (or its hold on the pipes, T15) would last until the 30 s
# timeout: "at once" is anything well under that, whatever the machine's load.
abb 60 --timeout 30s "$WORK/daemon.py" "${T}b" exit
is "$rc" 0 "py double-fork daemon, main exits: agentbox exits 0"
is "$(jr .status)" exited "py double-fork daemon, main exits: status exited"
is "$(jr '.limits_hit | length')" 0 "py double-fork daemon, main exits: no limit was hit"
check "py double-fork daemon, main exits: the daemon was up" test "$(cat "$(jr .workspace)/daemon-up")" = up
w=$(jr .wall_ms)
if between "${w:-99999}" 0 15000; then ok "py double-fork daemon, main exits: the run ends at once ($w ms)"; else
    not_ok "py double-fork daemon, main exits: the run ends at once (wall_ms < 15000 of the 30 s timeout)" "wall_ms=$w"
fi
expect_no_procs "py double-fork daemon, main exits" "${T}b"

# ---- (c) the same daemon, and the main process sleeps too: the timeout ends it --------------
rm -f "$WORK/r.json"
rc=0
# The timeout leaves the daemon time to start on a loaded machine (a sandbox and two Python
# starts): the check is that it is seen, then ended with the run.
bounded 40 "$AGENTBOX" run --runs-dir "$RUNS" --report "$WORK/r.json" --timeout 8s \
    "$WORK/daemon.py" "${T}c" sleep >"$WORK/out" 2>"$WORK/err" &
bg=$!
if seen_within 20 "${T}c-daemon"; then
    ok "py daemon + sleeping main: the daemon shows up on the host (the check can see it)"
else
    not_ok "py daemon + sleeping main: the daemon shows up on the host"
fi
wait "$bg" || rc=$?
keep_report "$WORK/r.json"
expect_timeout "py daemon + sleeping main"
expect_no_procs "py daemon + sleeping main" "${T}c"

# ---- Node: a SIGTERM-ignoring interval loop, detached + unref'd children -------------------
cat >"$WORK/loop.js" <<'EOF'
for (const s of ['SIGTERM', 'SIGINT', 'SIGHUP']) process.on(s, () => {});
setInterval(() => {}, 50);
console.log('LOOPING');
EOF
abb 30 --timeout 2s "$WORK/loop.js" "${T}d"
expect_timeout "node SIGTERM-ignoring setInterval"
expect_no_procs "node SIGTERM-ignoring setInterval" "${T}d"

cat >"$WORK/detach.js" <<'EOF'
const { spawn } = require('child_process');
const [tok, mode] = process.argv.slice(2);
const code = "for (const s of ['SIGTERM','SIGHUP']) process.on(s, () => {}); setInterval(() => {}, 1000);";
// stdio inherited: the child holds agentbox's pipes open (T15)
const c = spawn(process.execPath, ['-e', code, tok + '-daemon'], { detached: true, stdio: 'inherit' });
c.on('spawn', () => {
  console.log('CHILD ' + (c.pid > 0 ? 'up' : 'down'));
  c.unref();
  if (mode === 'loop') setInterval(() => {}, 1000);
});
c.on('error', (e) => { console.log('CHILD error ' + e.code); process.exit(3); });
EOF
abb 60 --timeout 30s "$WORK/detach.js" "${T}e" exit
is "$rc" 0 "node detached+unref child, main exits: agentbox exits 0"
is "$(jr .status)" exited "node detached+unref child, main exits: status exited"
is "$(jr '.limits_hit | length')" 0 "node detached+unref child, main exits: no limit was hit"
is "$(jr .stdout.text)" "CHILD up" "node detached+unref child, main exits: the child was spawned"
w=$(jr .wall_ms)
if between "${w:-99999}" 0 15000; then ok "node detached+unref child, main exits: the run ends at once ($w ms)"; else
    not_ok "node detached+unref child, main exits: the run ends at once (wall_ms < 15000 of the 30 s timeout)" "wall_ms=$w"
fi
expect_no_procs "node detached+unref child, main exits" "${T}e"

abb 30 --timeout 2s "$WORK/detach.js" "${T}f" loop
expect_timeout "node detached child + looping main"
is "$(jr .stdout.text)" "CHILD up" "node detached child + looping main: the child was spawned"
expect_no_procs "node detached child + looping main" "${T}f"

# ---- killing agentbox itself ----------------------------------------------------------------
cat >"$WORK/sleeper.py" <<'EOF'
import signal, sys, time
for s in (signal.SIGTERM, signal.SIGHUP):
    signal.signal(s, signal.SIG_IGN)
print("READY", flush=True)
time.sleep(3600)
EOF
# start_bg TOKEN: agentbox in the background with the sleeper; waits for READY
start_bg() {
    rm -f "$WORK/r.json"
    : >"$WORK/out"
    "$AGENTBOX" run --runs-dir "$RUNS" --report "$WORK/r.json" --timeout 60s \
        "$WORK/sleeper.py" "$1" >"$WORK/out" 2>"$WORK/err" &
    bg=$!
    _t=0
    while ! grep -q READY "$WORK/out" && [ $_t -lt 200 ]; do sleep 0.05; _t=$((_t + 1)); done
}
for sig in TERM HUP; do
    tok=${T}k$sig
    start_bg "$tok"
    check "kill -$sig agentbox: the script was running" grep -q READY "$WORK/out"
    if seen_within 10 "/work/sleeper.py $tok"; then
        ok "kill -$sig agentbox: the sandboxed script is visible on the host before the kill"
    else
        not_ok "kill -$sig agentbox: the sandboxed script is visible on the host before the kill"
    fi
    kill -"$sig" "$bg"
    # bounded: if agentbox does not exit within 10 s, SIGKILL it (and the test fails)
    _t=0
    while st=$(cut -d' ' -f3 "/proc/$bg/stat" 2>/dev/null) && [ "$st" != Z ] && [ $_t -lt 200 ]; do
        sleep 0.05
        _t=$((_t + 1))
    done
    kill -KILL "$bg" 2>/dev/null || true
    rc=0
    wait "$bg" || rc=$?
    keep_report "$WORK/r.json"
    is "$rc" 130 "kill -$sig agentbox: it exits 130 (interrupted)"
    is "$(jr .status)" interrupted "kill -$sig agentbox: the report says interrupted"
    is "$(jr .agentbox_exit)" 130 "kill -$sig agentbox: agentbox_exit 130"
    case $(jr .message) in
    *"$sig"*) ok "kill -$sig agentbox: the report names the signal" ;;
    *) not_ok "kill -$sig agentbox: the report names the signal" "message: $(jr .message)" ;;
    esac
    expect_no_procs "kill -$sig agentbox" "$tok"
done

tok=${T}kKILL
start_bg "$tok"
check "kill -KILL agentbox: the script was running" grep -q READY "$WORK/out"
if seen_within 10 "/work/sleeper.py $tok"; then
    ok "kill -KILL agentbox: the sandboxed script is visible on the host before the kill"
else
    not_ok "kill -KILL agentbox: the sandboxed script is visible on the host before the kill"
fi
kill -KILL "$bg"
wait "$bg" 2>/dev/null || true
# PR_SET_PDEATHSIG and the PID namespace kill at once; the kernel's teardown of the processes
# takes longer on a loaded machine, so the bound is generous (it returns as soon as they are gone)
if gone_within 10 "$tok"; then
    ok "kill -KILL agentbox: no sandbox process is left within 10 s"
else
    not_ok "kill -KILL agentbox: no sandbox process is left within 10 s" "$(leftovers "$tok" | tr '\n' ' ')"
    # do not leave it running on the host
    for p in /proc/[0-9]*; do
        if tr '\0' ' ' 2>/dev/null <"$p/cmdline" | grep -q -- "$tok"; then kill -KILL "${p#/proc/}" 2>/dev/null; fi
    done
fi

# ---- a reader that never reads: the limits do not wait for it (issue 13) -------------------
# now_ms: a wall clock in ms (GNU date)
now_ms() { echo $(($(date +%s%N) / 1000000)); }
cat >"$WORK/flood.py" <<'EOF'
import sys, time
out = sys.stdout
for i in range(65536):
    out.write("%08d %s\n" % (i, "y" * 54))    # 4 MiB of numbered 64-byte lines
out.flush()
print("FLOODED", file=sys.stderr, flush=True)
time.sleep(3600)
EOF
python3 -c 'import sys
for i in range(65536): sys.stdout.write("%08d %s\n" % (i, "y" * 54))' >"$WORK/flood.want"
# stalled_reader GOFILE OUTFILE: holds the FIFO $WORK/stall open for reading and reads nothing
# until GOFILE exists, then copies what is left to OUTFILE. Sets $reader.
mkfifo "$WORK/stall"
stalled_reader() {
    rm -f "$1"
    {
        while [ ! -f "$1" ]; do sleep 0.1; done
        cat >"$2"
    } <"$WORK/stall" &
    reader=$!
}
# expect_flood LABEL: the capture holds all 4 MiB, and the report says what the reader did not get
expect_flood() {
    is "$(jr .stdout.captured_bytes)" 4194304 "$1: the report captured all 4 MiB of stdout"
    is "$(jr .stdout.truncated)" false "$1: stdout is not truncated"
    # past --inline-output the report has a head and a tail, and RUN_DIR/stdout all of it
    check "$1: stdout.file (RUN_DIR/stdout) is the script's output, byte for byte" \
        cmp -s "$(jr '.stdout.file.path // "none"')" "$WORK/flood.want"
    _d=$(jr .stdout.relay_dropped_bytes)
    if [ "${_d:-0}" -gt 0 ] 2>/dev/null && [ "$_d" -le 4194304 ]; then
        ok "$1: stdout.relay_dropped_bytes says what the reader did not get ($_d)"
    else
        not_ok "$1: stdout.relay_dropped_bytes says what the reader did not get" "got: '$_d'"
    fi
    check "$1: a warning says the relay fell behind" relay_warned
}
relay_warned() { jq -e '.warnings | any(test("not relayed"))' "$WORK/r.json" >/dev/null; }

stalled_reader "$WORK/go-g" "$WORK/relayed-g"
rm -f "$WORK/r.json"
rc=0
t0=$(now_ms)
bounded 40 "$AGENTBOX" run --runs-dir "$RUNS" --report "$WORK/r.json" --timeout 3s \
    --output-limit 8M "$WORK/flood.py" "${T}g" >"$WORK/stall" 2>"$WORK/err" || rc=$?
keep_report "$WORK/r.json"
el=$(($(now_ms) - t0))
touch "$WORK/go-g"
wait "$reader"
is "$rc" 124 "stalled reader, --timeout 3s: agentbox exits 124"
is "$(jr .status)" timeout "stalled reader: status timeout"
w=$(jr .wall_ms)
# Before the fix the run lasted as long as the reader held on (here until the outer timeout
# killed agentbox, with no report at all).
if between "${w:-0}" 3000 10000; then ok "stalled reader: the timeout ended the run ($w ms)"; else
    not_ok "stalled reader: the timeout ended the run (wall_ms in [3000, 10000])" "wall_ms=$w"
fi
# 3 s, at most 2 s of bounded flush, and slack for a loaded machine
if [ "$el" -lt 20000 ]; then ok "stalled reader: agentbox returned in $el ms"; else
    not_ok "stalled reader: agentbox returned within 20 s" "took $el ms"
fi
expect_flood "stalled reader"
n=$(wc -c <"$WORK/relayed-g")
check "stalled reader: what the reader got is a clean prefix of the output ($n bytes)" \
    cmp -s -n "$n" "$WORK/relayed-g" "$WORK/flood.want"
d=$(jr '.stdout.relay_dropped_bytes // 0' 2>/dev/null)
is "$((n + ${d:-0}))" 4194304 "stalled reader: bytes relayed + relay_dropped_bytes = bytes captured"
expect_no_procs "stalled reader" "${T}g"

# SIGTERM while the reader stalls: answered at once, the report written.
stalled_reader "$WORK/go-h" /dev/null
rm -f "$WORK/r.json"
: >"$WORK/err"
"$AGENTBOX" run --runs-dir "$RUNS" --report "$WORK/r.json" --timeout 60s --output-limit 8M \
    "$WORK/flood.py" "${T}h" >"$WORK/stall" 2>"$WORK/err" &
bg=$!
_t=0
while ! grep -q FLOODED "$WORK/err" && [ $_t -lt 400 ]; do sleep 0.05; _t=$((_t + 1)); done
check "SIGTERM, stalled reader: stderr was relayed while stdout's reader stalled" \
    grep -q FLOODED "$WORK/err"
t0=$(now_ms)
kill -TERM "$bg"
_t=0
while st=$(cut -d' ' -f3 "/proc/$bg/stat" 2>/dev/null) && [ "$st" != Z ] && [ $_t -lt 300 ]; do
    sleep 0.05
    _t=$((_t + 1))
done
el=$(($(now_ms) - t0))
kill -KILL "$bg" 2>/dev/null || true
rc=0
wait "$bg" || rc=$?
keep_report "$WORK/r.json"
touch "$WORK/go-h"
wait "$reader"
is "$rc" 130 "SIGTERM, stalled reader: agentbox exits 130"
is "$(jr .status)" interrupted "SIGTERM, stalled reader: status interrupted"
# no flush wait after an interrupt: only the teardown of the run
if [ "$el" -lt 10000 ]; then ok "SIGTERM, stalled reader: agentbox was gone $el ms after the signal"; else
    not_ok "SIGTERM, stalled reader: agentbox was gone within 10 s of the signal" "took $el ms"
fi
expect_flood "SIGTERM, stalled reader"
expect_no_procs "SIGTERM, stalled reader" "${T}h"

# A terminal whose reader never reads: a pty whose master nobody reads.
cat >"$WORK/ptyhold.py" <<'EOF'
import os, pty, subprocess, sys, time
m, s = pty.openpty()
t0 = time.monotonic()
p = subprocess.Popen(sys.argv[1:], stdout=s, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
os.close(s)
try:
    rc = p.wait(timeout=40)
except subprocess.TimeoutExpired:
    p.kill()
    rc = p.wait()
print("rc=%d ms=%d" % (rc, (time.monotonic() - t0) * 1000))
EOF
rm -f "$WORK/r.json"
python3 "$WORK/ptyhold.py" "$AGENTBOX" run --runs-dir "$RUNS" --report "$WORK/r.json" --timeout 3s \
    --output-limit 8M "$WORK/flood.py" "${T}i" >"$WORK/pty.out" 2>&1
keep_report "$WORK/r.json"
sed "s/^/# pty: /" "$WORK/pty.out"
is "$(sed -n 's/^rc=\([0-9-]*\) .*/\1/p' "$WORK/pty.out")" 124 "stalled terminal: agentbox exits 124"
is "$(jr .status)" timeout "stalled terminal: status timeout"
w=$(jr .wall_ms)
if between "${w:-0}" 3000 10000; then ok "stalled terminal: the timeout ended the run ($w ms)"; else
    not_ok "stalled terminal: the timeout ended the run (wall_ms in [3000, 10000])" "wall_ms=$w"
fi
expect_flood "stalled terminal"
expect_no_procs "stalled terminal" "${T}i"

# ---- a run refused after its bwrap started -----------------------------------------------------
# A plain run starts bwrap before it stages the workspace and /etc (bwrap reads its options
# from a pipe, written once they are staged). An input too large for --disk fails that
# staging: the waiting bwrap must be killed and reaped, and the run's cgroup removed, as if it
# had never been started. The token is on bwrap's command line (the script's argument).
head -c 3000000 /dev/zero >"$WORK/big.bin"
abb 30 --disk 1M --input "$WORK/big.bin" "$WORK/spin.py" "${T}j"
is "$rc" 125 "staging refused after bwrap's start: agentbox exits 125"
is "$(jr .status)" setup_error "staging refused after bwrap's start: status setup_error"
check "staging refused after bwrap's start: the report says why" \
    jqe '.message | test("does not fit in the workspace")'
expect_no_procs "staging refused after bwrap's start" "${T}j"
id=$(jr .run_id)
left=$(find /sys/fs/cgroup -maxdepth 8 -type d -name "run-*-$id" 2>/dev/null)
if [ -n "$id" ] && [ -z "$left" ]; then ok "staging refused after bwrap's start: no cgroup is left"; else
    not_ok "staging refused after bwrap's start: no cgroup is left" "run_id=$id left=$left"
fi
rm -f "$WORK/big.bin"

done_testing

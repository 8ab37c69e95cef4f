#!/bin/sh
# test-lifecycle.sh -- how runs end (T13, T14, T15): the timeout kills a SIGTERM-ignoring loop
# and daemons (double-forked setsid, detached Node children), the run ends when the script's
# main process exits and nothing survives it, and killing agentbox itself (TERM, HUP, KILL)
# leaves no sandbox process behind. No process with the run's token may be left on the host.
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
# expect_timeout LABEL: the last run ended by the 2 s timeout
expect_timeout() {
    is "$rc" 124 "$1: agentbox exits 124"
    is "$(jr .status)" timeout "$1: status timeout"
    is "$(jr .agentbox_exit)" 124 "$1: agentbox_exit 124"
    is "$(jr '.limits_hit | index("timeout") != null')" true "$1: limits_hit names timeout"
    _w=$(jr .wall_ms)
    if between "${_w:-0}" 2000 4000; then ok "$1: wall_ms $_w is in [2000, 4000]"; else
        not_ok "$1: wall_ms is in [2000, 4000]" "wall_ms=$_w"
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
abb 30 --timeout 10s "$WORK/daemon.py" "${T}b" exit
is "$rc" 0 "py double-fork daemon, main exits: agentbox exits 0"
is "$(jr .status)" exited "py double-fork daemon, main exits: status exited"
check "py double-fork daemon, main exits: the daemon was up" test "$(cat "$(jr .workspace)/daemon-up")" = up
w=$(jr .wall_ms)
if between "${w:-99999}" 0 2000; then ok "py double-fork daemon, main exits: the run ends at once ($w ms)"; else
    not_ok "py double-fork daemon, main exits: the run ends at once" "wall_ms=$w"
fi
expect_no_procs "py double-fork daemon, main exits" "${T}b"

# ---- (c) the same daemon, and the main process sleeps too: the timeout ends it --------------
rm -f "$WORK/r.json"
rc=0
bounded 30 "$AGENTBOX" run --runs-dir "$RUNS" --report "$WORK/r.json" --timeout 2s \
    "$WORK/daemon.py" "${T}c" sleep >"$WORK/out" 2>"$WORK/err" &
bg=$!
if seen_within 2 "${T}c-daemon"; then
    ok "py daemon + sleeping main: the daemon shows up on the host (the check can see it)"
else
    not_ok "py daemon + sleeping main: the daemon shows up on the host"
fi
wait "$bg" || rc=$?
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
abb 30 --timeout 10s "$WORK/detach.js" "${T}e" exit
is "$rc" 0 "node detached+unref child, main exits: agentbox exits 0"
is "$(jr .status)" exited "node detached+unref child, main exits: status exited"
is "$(jr .stdout.text)" "CHILD up" "node detached+unref child, main exits: the child was spawned"
w=$(jr .wall_ms)
if between "${w:-99999}" 0 3000; then ok "node detached+unref child, main exits: the run ends at once ($w ms)"; else
    not_ok "node detached+unref child, main exits: the run ends at once" "wall_ms=$w"
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
    if seen_within 1 "/work/sleeper.py $tok"; then
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
if seen_within 1 "/work/sleeper.py $tok"; then
    ok "kill -KILL agentbox: the sandboxed script is visible on the host before the kill"
else
    not_ok "kill -KILL agentbox: the sandboxed script is visible on the host before the kill"
fi
kill -KILL "$bg"
wait "$bg" 2>/dev/null || true
if gone_within 2 "$tok"; then
    ok "kill -KILL agentbox: no sandbox process is left within 2 s"
else
    not_ok "kill -KILL agentbox: no sandbox process is left within 2 s" "$(leftovers "$tok" | tr '\n' ' ')"
    # do not leave it running on the host
    for p in /proc/[0-9]*; do
        if tr '\0' ' ' 2>/dev/null <"$p/cmdline" | grep -q -- "$tok"; then kill -KILL "${p#/proc/}" 2>/dev/null; fi
    done
fi

done_testing

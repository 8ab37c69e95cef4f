#!/bin/sh
# test-warm.sh -- warm slots (issue 19; docs/design.md "Warm slots"). The same scripts run cold
# (ab_run) and through a warm slot of the library's pool (tests/helpers/ab-warm.c, one slot per
# class), in real sandboxes; their reports are compared field by field, timings and ids aside:
# sys.argv, __main__, __file__, sys.path[0], cwd, environment, tracebacks, exit statuses,
# signals, limits, files. Then what only a slot has: pre-imports, a claim a slot declines, the
# failure of a slot that cannot start, and nothing left behind.
# shellcheck source-path=SCRIPTDIR
# shellcheck source=lib.sh
. "$AB_TESTDIR/integration/lib.sh"

[ -x "${AB_WARM:-}" ] || bail "AB_WARM='${AB_WARM:-}' is not the ab-warm helper"
[ -x "${AGENTBOX_SUPERVISOR:-}" ] || bail "AGENTBOX_SUPERVISOR is not set"
export AGENTBOX_SUPERVISOR AGENTBOX_INIT

SPECS=$WORK/specs
OUT=$WORK/out.d
IN=$WORK/in
mkdir -p "$SPECS" "$OUT" "$IN/lib" "$IN/esm"
printf 'input data\n' >"$IN/data.txt"
printf 'VALUE = 42\n' >"$IN/lib/wmod.py"
printf '{"type": "module"}\n' >"$IN/esm/package.json"
head -c 2097152 /dev/zero >"$IN/big.bin"
printf 'console.log(JSON.stringify({argv: process.argv.slice(2), execArgv: process.execArgv}))\n' \
    >"$IN/child.js"
chmod -R a+rX "$IN"

# spec NAME LANG CODE [EXTRA_JSON]: a spec file for ab-warm (runs_dir is this test's)
spec() {
    _extra=${4:-}
    [ -n "$_extra" ] || _extra='{}'
    jq -n --arg lang "$2" --arg code "$3" --arg runs "$RUNS" --argjson extra "$_extra" \
        '{language: $lang, code: $code, runs_dir: $runs} + $extra' >"$SPECS/$1.json"
}

PROBE_PY='import inspect, os, sys
print("ARGV", sys.argv)
print("ORIG", sys.orig_argv)
print("MAIN", __name__, __file__, repr(__spec__), type(__loader__).__name__, __cached__, __package__)
print("GLOBALS", sorted(globals()))
print("PATH0", sys.path[0], os.getcwd())
print("PATH", sys.path)
print("ENV", sorted(os.environ.items()))
print("MODULES", sorted(sys.modules))
print("FDS", sorted(os.listdir("/proc/self/fd")))
print("TMP", os.listdir("/tmp"), "WORK", sorted(os.listdir("/work")))
print("STACK", len(inspect.stack()))
print("DATA", open("data.txt").read().strip())
print("FLAGS", sys.flags)'
spec py-probe python "$PROBE_PY" \
    "$(jq -n --arg in "$IN/data.txt" '{args: ["a", "b c", "ü", ""], inputs: [$in]}')"
spec py-exit3 python 'import sys; print("out"); sys.exit(3)'
spec py-exitmsg python 'import sys; sys.exit("bye")'
spec py-raise python 'def f(x):
    return 1 / x
def g():
    return f(0)
g()'
spec py-kbd python 'raise KeyboardInterrupt'
spec py-sigterm python 'import os, signal; os.kill(os.getpid(), signal.SIGTERM)'
spec py-files python 'import os
os.makedirs("sub", exist_ok=True)
open("out.txt", "w").write("hello\n")
open("sub/x.bin", "wb").write(bytes(range(256)) * 40)
os.remove("data.txt")' "$(jq -n --arg in "$IN/data.txt" '{inputs: [$in]}')"
spec py-timeout python 'import time
print("start", flush=True)
time.sleep(30)' '{"limits": {"timeout": "1s"}}'
spec py-output python 'import sys
sys.stdout.write("x" * 400000)' '{"limits": {"output-limit": "100K"}, "on_output_limit": "kill"}'
spec py-chatty python 'for i in range(20000):
    print("line", i)' '{"limits": {"output-limit": "100K"}}'
spec py-fsize python 'import os
with open("big.out", "wb") as f:
    try:
        f.write(b"y" * 2000000)
    except OSError as e:
        print("write failed", e.errno)' '{"limits": {"file-size": "1M"}}'
spec py-bigin python 'import os; print(os.path.getsize("big.bin"))' \
    "$(jq -n --arg in "$IN/big.bin" '{inputs: [$in], limits: {"file-size": "1M"}}')"
spec py-memory python 'b = []
for i in range(64):
    b.append(bytearray(16 << 20))
print("survived")' '{"limits": {"memory": "128M", "timeout": "20s"}}'
# the slot's cgroup (or rlimit) for processes holds from the hand-over as in a cold run
spec py-pids python 'import os, time
n = 0
try:
    for n in range(1, 50):
        if os.fork() == 0:
            time.sleep(5)
            os._exit(0)
except OSError as e:
    print("fork refused", e.errno, "limited" if n < 20 else "late")
else:
    print("no limit")' '{"limits": {"pids": 12}}'
# the Python hook's bytecode in /etc is what this interpreter would load instead of compiling
# the hook at each slot's start (PEP 552, checked by hash)
spec py-hookpyc python 'import importlib.util, sys
d = "/etc/agentbox/warm"
src = open(d + "/sitecustomize.py", "rb").read()
pyc = open("%s/__pycache__/sitecustomize.%s.pyc" % (d, sys.implementation.cache_tag), "rb").read()
print("magic", pyc[:4] == importlib.util.MAGIC_NUMBER, "flags", int.from_bytes(pyc[4:8], "little"),
      "hash", pyc[8:16] == importlib.util.source_hash(src))'
spec py-pythonpath python 'import sys, wmod; print(wmod.VALUE, sys.path[:3])' \
    "$(jq -n --arg in "$IN/lib" '{inputs: [$in], env: {PYTHONPATH: "/work/lib", FOO: "bar"}}')"

PROBE_JS='const fs = require("fs");
console.log("ARGV", JSON.stringify(process.argv), JSON.stringify(process.execArgv));
console.log("MAIN", __filename, require.main === module, module.id, process.cwd());
console.log("CACHE", JSON.stringify(Object.keys(require.cache)));
console.log("ENV", JSON.stringify(Object.keys(process.env).sort().map((k) => k + "=" + process.env[k])));
console.log("TMP", fs.readdirSync("/tmp"), "WORK", fs.readdirSync("/work").sort());
console.log("FDNEXT", fs.openSync("/work/new.txt", "w"));'
spec js-probe node "$PROBE_JS" '{"args": ["a", "b c", "ü"]}'
spec js-throw node 'function f() { throw new Error("boom"); }
function g() { f(); }
g();'
spec js-exit node 'console.log("out"); process.exit(4);'
spec js-sigterm node 'process.kill(process.pid, "SIGTERM"); setTimeout(() => {}, 5000);'
spec js-worker node 'const { Worker } = require("worker_threads");
const w = new Worker("require(\"worker_threads\").parentPort.postMessage(process.execArgv)", { eval: true });
w.on("message", (m) => console.log("worker", JSON.stringify(m)));
w.on("error", (e) => { console.log("worker error", e.message); process.exitCode = 9; });'
spec js-fork node 'const cp = require("child_process");
const c = cp.fork("/work/child.js", ["x"]);
c.on("exit", (code) => console.log("child exit", code));' \
    "$(jq -n --arg in "$IN/child.js" '{inputs: [$in]}')"
# /work/package.json makes the script an ES module: the slot's Node never looked for it
spec js-esm node 'console.log(typeof require, import.meta.url);' \
    "$(jq -n --arg in "$IN/esm/package.json" '{inputs: [$in]}')"

# ---- the same scripts cold and warm ---------------------------------------------------------
rc=0
bounded 600 "$AB_WARM" --info "$WORK/info.json" "$OUT" "$SPECS"/*.json >"$WORK/out" 2>"$WORK/err" ||
    rc=$?
is "$rc" 0 "ab-warm ran every spec cold and warm"

# what may differ: timings, ids and the paths that hold them, resource peaks (a slot's
# interpreter was started before the hand-over), and "warm" itself
NORM='del(.started_unix_ms, .wall_ms, .cpu_ms, .max_rss_kib, .kill_to_reaped_ms,
    .agentbox_max_rss_kib, .run_id, .warm, .usage.cpu_ms, .usage.memory_peak_bytes,
    .usage.tasks_peak, .files_summary.walk_ms, .files_summary.pre_run.walk_ms)
  | (.. | strings) |= gsub("run-[0-9]+-[0-9]+-[A-Za-z0-9]{6}"; "run-CGROUP")
  | (.. | strings) |= gsub("agentbox-[0-9]+-[0-9a-f]{8}[.]scope"; "agentbox-SCOPE")
  | (.. | strings) |= gsub("run-[A-Za-z0-9]{6}"; "run-ID")
  | if .status == "oom" then .message |= gsub("[0-9]+ bytes against"; "N bytes against") else . end'
for f in "$SPECS"/*.json; do
    n=$(basename "$f" .json)
    c=$OUT/$n.cold.json
    w=$OUT/$n.warm.json
    if [ ! -f "$c" ] || [ ! -f "$w" ]; then
        not_ok "$n: both reports exist"
        continue
    fi
    keep_report "$c"
    keep_report "$w"
    if jqe '.warm == false' "$c" && jqe '.warm == true' "$w"; then
        ok "$n: the cold report says warm false, the slot's warm true"
    else
        not_ok "$n: warm flags" "cold $(jq -c .warm "$c"), warm $(jq -c .warm "$w")"
    fi
    jq -S "$NORM" "$c" >"$WORK/c.n"
    jq -S "$NORM" "$w" >"$WORK/w.n"
    if cmp -s "$WORK/c.n" "$WORK/w.n"; then
        ok "$n: cold and warm reports are the same, field by field ($(jq -r .status "$c"))"
    else
        not_ok "$n: cold and warm reports differ" \
            "$(diff "$WORK/c.n" "$WORK/w.n" | head -n 12 | tr '\n' '|')"
    fi
done

# the comparison means something only if the scripts did what they were written for
st() { jq -r "$1" "$OUT/$2.warm.json"; }
is "$(st '.status + " " + (.exit_code|tostring)' py-exit3)" "exited 3" "py-exit3: exit status 3"
is "$(st '.status + " " + (.signal_name // "-")' py-kbd)" "signaled INT" \
    "py-kbd: an uncaught KeyboardInterrupt ends in SIGINT, as CPython does"
is "$(st '.signal_name' py-sigterm)" "TERM" "py-sigterm: killed by SIGTERM"
check "py-raise: the traceback names the script's frames and no other" \
    jqe '(.stderr.text | test("File \"/work/script.py\", line 5, in <module>")) and
        (.stderr.text | test("sitecustomize|agentbox") | not)' "$OUT/py-raise.warm.json"
is "$(st '.status' py-timeout)" "timeout" "py-timeout: the timeout runs from the hand-over"
is "$(st '.status' py-output)" "output_limit" "py-output: the output limit (on_output_limit kill)"
is "$(st '.status + " " + (.limits_hit | join(","))' py-chatty)" "exited output-limit" \
    "py-chatty: past the output limit the run goes on by default (issue 25)"
check "py-chatty: the report ends with the script's last line" \
    jqe '.stdout.text | endswith("line 19999\n")' "$OUT/py-chatty.warm.json"
is "$(st '.limits_hit | index("file-size") != null' py-fsize)" "true" "py-fsize: a write past --file-size"
is "$(st '.limits_hit | index("file-size") != null' py-bigin)" "false" \
    "py-bigin: an input larger than --file-size, copied in at the hand-over, is no hit"
is "$(st '.status' py-memory)" "oom" "py-memory: the memory limit"
check "py-pids: the process limit refuses a fork" \
    jqe '.stdout.text | test("^fork refused 11 limited")' "$OUT/py-pids.warm.json"
check "py-probe: arguments, __file__, sys.path[0] and cwd as \`python3 /work/script.py ARGS\`" \
    jqe '.stdout.text | test("ARGV \\[.\/work\/script.py., .a., .b c., .ü., ..\\]") and
        test("MAIN __main__ /work/script.py None SourceFileLoader None None") and
        test("PATH0 /work /work")' "$OUT/py-probe.warm.json"
check "py-probe: no trace of the hook (environment, sys.path, fds, /tmp)" \
    jqe '.stdout.text | (test("PYTHONPATH|/etc/agentbox|sitecustomize") | not) and
        test("FDS \\[.0., .1., .2., .3.\\]") and test("TMP \\[\\]")' "$OUT/py-probe.warm.json"
check "py-probe: a cold run has no trace of the hooks either (no PYTHONPATH, no sys.path entry)" \
    jqe '.stdout.text | (test("PYTHONPATH|/etc/agentbox|sitecustomize") | not)' "$OUT/py-probe.cold.json"
check "js-probe: a cold Node run has no preload, no NODE_OPTIONS" \
    jqe '.stdout.text | (test("NODE_OPTIONS|/etc/agentbox|hook.js") | not)' "$OUT/js-probe.cold.json"
is "$(st '.stdout.text' py-hookpyc)" "magic True flags 3 hash True" \
    "py-hookpyc: the hook's bytecode matches the sandbox's interpreter and the hook's source"
check "py-pythonpath: PYTHONPATH as the spec set it, its modules imported from the workspace" \
    jqe '.stdout.text | test("^42 \\[./work., ./work/lib.")' "$OUT/py-pythonpath.warm.json"
check "js-probe: process.argv, execArgv, require.main as \`node /work/script.js ARGS\`" \
    jqe '.stdout.text | test("ARGV \\[\"[^\"]*node[^\"]*\",\"/work/script.js\",\"a\",\"b c\",\"ü\"\\] \\[\\]") and
        test("MAIN /work/script.js true \\.") and (test("agentbox") | not)' "$OUT/js-probe.warm.json"
check "js-throw: the stack trace is Node's own, from the script up" \
    jqe '.stderr.text | test("at f \\(/work/script.js:1") and (test("agentbox|hook.js") | not)' \
    "$OUT/js-throw.warm.json"
is "$(st '.exit_code' js-exit)" "4" "js-exit: process.exit(4)"
check "js-worker: a worker thread starts, with an empty execArgv" \
    jqe '.stdout.text == "worker []\n"' "$OUT/js-worker.warm.json"
check "js-fork: child_process.fork gets the script's execArgv, not the hook's" \
    jqe '.stdout.text | test("\"execArgv\":\\[\\]") and test("child exit 0")' \
    "$OUT/js-fork.warm.json"
check "js-esm: a package.json of type module in /work makes the script an ES module" \
    jqe '.stdout.text == "undefined file:///work/script.js\n"' "$OUT/js-esm.warm.json"

# ---- pre-imports, a declined claim, a slot that cannot start -----------------------------------
spec pre-in python 'import sys; print("json" in sys.modules, "csv" in sys.modules)'
spec pre-shadow python 'import json; print(json.__file__)' \
    "$(jq -n --arg in "$WORK/json.py" '{inputs: [$in]}')"
printf 'print("mine")\n' >"$WORK/json.py"
chmod a+r "$WORK/json.py"
# a sitecustomize on the spec's PYTHONPATH under /work: a cold interpreter imports it at its
# start, a slot's started before the inputs came
mkdir -p "$WORK/sc/lib"
printf 'print("site hook")\n' >"$WORK/sc/lib/sitecustomize.py"
chmod -R a+rX "$WORK/sc"
spec pre-site python 'print("script")' \
    "$(jq -n --arg in "$WORK/sc/lib" '{inputs: [$in], env: {PYTHONPATH: "/work/lib"}}')"
mkdir "$WORK/pre.d"
rc=0
bounded 120 "$AB_WARM" --preimport json,csv --only warm --info "$WORK/pre-info.json" \
    "$WORK/pre.d" "$SPECS/pre-in.json" "$SPECS/pre-shadow.json" "$SPECS/pre-site.json" \
    >"$WORK/out" 2>"$WORK/err" || rc=$?
is "$rc" 0 "ab-warm with pre-imports ran"
check "a pre-imported module is in sys.modules when the run starts" \
    jqe '.warm and .stdout.text == "True True\n"' "$WORK/pre.d/pre-in.warm.json"
check "an input that shadows a pre-imported module: the slot declines, the run goes cold" \
    jqe '(.warm | not) and .stdout.text == "mine\n/work/json.py\n"' \
    "$WORK/pre.d/pre-shadow.warm.json"
check "a sitecustomize on the spec's PYTHONPATH, in an input: the slot declines, the cold run imports it" \
    jqe '(.warm | not) and .stdout.text == "site hook\nscript\n"' "$WORK/pre.d/pre-site.warm.json"
check "the pool's info: the pre-imports, one warm and one cold run, the memory the slot holds" \
    jqe '[.classes[] | select(.spec.env == null)][0] | .preimport == ["json", "csv"] and
        .warm_runs == 1 and .cold_runs == 1' "$WORK/pre-info.json"
check "... and the PYTHONPATH class's one cold run" \
    jqe '[.classes[] | select(.spec.env != null)][0] | .warm_runs == 0 and .cold_runs == 1' \
    "$WORK/pre-info.json"
# a ready Python slot holds its interpreter (Pss 5-8 MiB with bwrap, agentbox-init and its
# supervisor): a count that missed the interpreter would be 1-3 MiB
check "... the memory the ready slots hold, each slot's interpreter included" \
    jqe '.memory_bytes > 1000000 and
        all(.classes[] | select(.ready > 0); .memory_bytes >= .ready * 4194304)' "$WORK/pre-info.json"

mkdir "$WORK/bad.d"
rc=0
bounded 120 "$AB_WARM" --preimport no_such_module_xyz --only warm "$WORK/bad.d" \
    "$SPECS/pre-in.json" >"$WORK/out" 2>"$WORK/err" || rc=$?
is "$rc" 1 "a slot whose pre-import fails: ab-warm fails"
check "... and says which module and why" grep -q "pre-import no_such_module_xyz.*ModuleNotFoundError" \
    "$WORK/err"

# ---- large arguments (issue 24) ---------------------------------------------------------------------
# A run's arguments reach the interpreter's hook in one message on a non-blocking socket; 1 MiB of
# them is more than the socket takes at once, so the hand-over must wait for the hook to read
# (it failed with EAGAIN in 13 of 20 runs), never fail where the same spec runs cold.
mkdir "$WORK/big.d"
for i in $(seq 20); do
    # built inside jq: 1 MiB is more than one command-line argument may hold
    jq -n --arg runs "$RUNS" '{language: "python", runs_dir: $runs,
        code: "import sys; print(\"ARGS\", len(sys.argv) - 1, sum(len(a) for a in sys.argv[1:]))",
        args: [range(16) | "x" * 65536]}' >"$SPECS/big$i.json"
done
rc=0
bounded 600 "$AB_WARM" --only warm "$WORK/big.d" "$SPECS"/big*.json >"$WORK/out" 2>"$WORK/err" || rc=$?
is "$rc" 0 "20 runs with 1 MiB of arguments each through a pool: every one ran"
n=0
for i in $(seq 20); do
    f=$WORK/big.d/big$i.warm.json
    if [ -f "$f" ] && jqe '.status == "exited" and .exit_code == 0 and .warm == true and
        (.stdout.text | test("^ARGS 16 1048576"))' "$f"; then
        n=$((n + 1))
    fi
    keep_report "$f"
done
is "$n" 20 "... each in its warm slot, with all 16 arguments of 64 KiB in sys.argv"

# ---- slots let go while they are being built --------------------------------------------------------
# Without a cgroup (the user variant), a sandbox whose bwrap is killed before its child set its
# parent-death signal lives on: the supervisor must kill it itself, or it waits forever.
mkdir "$WORK/start.d"
for round in 1 2 3; do
    rc=0
    bounded 60 "$AB_WARM" --only start "$WORK/start.d" "$SPECS/py-exit3.json" "$SPECS/js-exit.json" \
        "$SPECS/py-kbd.json" "$SPECS/js-throw.json" >"$WORK/out" 2>"$WORK/err" || rc=$?
    is "$rc" 0 "round $round: four slots started and let go at once: the pool is freed, nothing hangs"
done
# (this user's: the same test runs beside it as the other user)
check "... and no slot's supervisor is left" no_procs_mine "agentbox-supervisor slot"
check "... nor a slot's sandbox" no_procs "warm-fd 1000"

# ---- doctor builds a slot and runs in it ------------------------------------------------------------
rc=0
bounded 120 "$AGENTBOX" doctor --json >"$WORK/doctor.json" 2>"$WORK/err" || rc=$?
is "$rc" 0 "doctor ran"
check "doctor: its 'warm slots' check ran a script in a slot, with the slot's time and memory" \
    jqe '.checks[] | select(.check == "warm slots") | .result == "ok" and
        (.detail | test("^a Python slot was ready in [0-9]+ ms, holding [0-9.]+ MiB; a run in it took [0-9]+ ms"))' \
    "$WORK/doctor.json"

# ---- nothing left ---------------------------------------------------------------------------------
check "no slot's supervisor is left running" no_procs_mine "agentbox-supervisor slot"
# every run directory is a run's (the library's retention may have pruned older ones): an unused
# slot kept none
find "$OUT" "$WORK/pre.d" "$WORK/big.d" -name '*.json' -exec jq -r 'select(.run_dir_kept) | .run_dir' {} + |
    sort -u >"$WORK/kept"
find "$RUNS" -mindepth 1 -maxdepth 1 -name 'run-*' | sort >"$WORK/left"
if [ -s "$WORK/left" ] && [ -z "$(comm -23 "$WORK/left" "$WORK/kept")" ]; then
    ok "the runs directory holds runs' directories only, none of a slot no run took"
else
    not_ok "the runs directory holds runs' directories only" \
        "not a run's: $(comm -23 "$WORK/left" "$WORK/kept" | tr '\n' ' ')"
fi

done_testing

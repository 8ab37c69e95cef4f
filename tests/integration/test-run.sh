#!/bin/sh
# test-run.sh -- the ordinary path, checked on the host: the examples run and leave their result
# files, stdout is relayed and captured, arguments and stdin reach the script, --rm,
# --workspace, --dry-run, exit codes and signals, language detection.
# shellcheck source-path=SCRIPTDIR
# shellcheck source=lib.sh
. "$AB_TESTDIR/integration/lib.sh"

# abb SECS ARGS...: like ab, under an outer timeout, and never reading a stale report.
# outtext: the last run's stdout on one line (newlines as |), for comparisons
outtext() { tr '\n' '|' <"$WORK/out" | sed 's/|$//'; }
# the number of run directories left in the runs root
nruns() {
    find "$RUNS" -mindepth 1 -maxdepth 1 -name 'run-*' 2>/dev/null | wc -l
}

EX=$AB_SRCDIR/examples
CSV=$EX/sales.csv
nrows=$(($(wc -l <"$CSV") - 1))

# ---- the examples -------------------------------------------------------------------------
# The oracle for result.json: the same example run on the host, without a sandbox.
mkdir "$WORK/host"
cp "$CSV" "$WORK/host/sales.csv"

for lang in py js; do
    if [ $lang = py ]; then interp=python3; else interp=node; fi
    (cd "$WORK/host" && rm -f result.json && "$interp" "$EX/agent_script.$lang" >/dev/null) ||
        bail "the $lang example does not run on the host with $interp"
    jq -S . "$WORK/host/result.json" >"$WORK/host/expected.$lang.json"

    abb 60 --input "$CSV" "$EX/agent_script.$lang"
    is "$rc" 0 "$lang example: exit status 0"
    is "$(jr .status)" exited "$lang example: status exited"
    is "$(jr .exit_code)" 0 "$lang example: exit_code 0"
    is "$(jr .agentbox_exit)" 0 "$lang example: agentbox_exit 0"
    ws=$(jr .workspace)
    check "$lang example: result.json in the kept workspace" test -f "$ws/result.json"
    if [ -f "$ws/result.json" ]; then
        is "$(jq -S . "$ws/result.json")" "$(cat "$WORK/host/expected.$lang.json")" \
            "$lang example: result.json has the content of an unsandboxed run"
        is "$(jq -r .rows "$ws/result.json")" "$nrows" "$lang example: result.json counted every row"
        is "$(jq -r .source "$ws/result.json")" sales.csv "$lang example: it read the --input copy"
        is "$(jr '.files[] | select(.path == "result.json") | .sha256')" \
            "$(sha256sum "$ws/result.json" | cut -d' ' -f1)" \
            "$lang example: files[] lists result.json with the host copy's sha256"
    else
        not_ok "$lang example: result.json content" "no $ws/result.json"
    fi
    check "$lang example: stdout relayed live" grep -q "read $nrows rows from sales.csv" "$WORK/out"
    jq -j .stdout.text "$WORK/r.json" >"$WORK/captured"
    check "$lang example: stdout captured in the report, byte for byte" cmp -s "$WORK/captured" "$WORK/out"
    check "$lang example: the input copy is listed in files[]" \
        test "$(jr '[.files[] | select(.path == "sales.csv")] | length')" = 1
done

# ---- an --input that is a symlink is not copied, and the report says so in the usual shape --
ln -s "$CSV" "$WORK/link.csv"
abb 60 --input "$WORK/link.csv" "$EX/agent_script.py"
check "symlink --input: listed as a symlink, not copied, with its reason" \
    jqe '.inputs[0] | .type == "symlink" and .bytes == 0 and .entries == 0 and .truncated == false
        and (.skipped | length) == 1 and (.skipped[0].reason | test("not a regular file"))'
check "symlink --input: a warning names it" jqe '.warnings | any(test("link.csv"))'
rm -f "$WORK/link.csv"

# ---- script arguments ---------------------------------------------------------------------
cat >"$WORK/args.py" <<'EOF'
import json, sys
print(json.dumps(sys.argv[1:]))
EOF
# shellcheck disable=SC2016 # a literal $HOME: it must reach the script unexpanded
abb 60 "$WORK/args.py" -- a 'b c' --bind=/ '' '$HOME'
is "$rc" 0 "args after --: exit 0"
# shellcheck disable=SC2016
is "$(outtext)" '["a", "b c", "--bind=/", "", "$HOME"]' "args after -- reach the script verbatim"
abb 60 "$WORK/args.py" x --timeout 1s -y
is "$(outtext)" '["x", "--timeout", "1s", "-y"]' \
    "options after SCRIPT are the script's own arguments"
cat >"$WORK/args.js" <<'EOF'
console.log(JSON.stringify(process.argv.slice(2)));
EOF
abb 60 "$WORK/args.js" -- 'one two' --inspect
is "$(outtext)" '["one two","--inspect"]' "node: args reach the script verbatim"

# ---- --rm -----------------------------------------------------------------------------------
cat >"$WORK/hello.py" <<'EOF'
open("hello.txt", "w").write("hi\n")
print("HELLO-RAN")
EOF
before=$(nruns)
abb 60 --rm "$WORK/hello.py"
is "$rc" 0 "--rm: exit 0"
is "$(jr .run_dir_kept)" false "--rm: report says the run dir was not kept"
is "$(jr .run_dir)" null "--rm: no run dir was ever made (nothing of the run touches the disk)"
case "$(jr .run_id)" in
[A-Za-z0-9][A-Za-z0-9][A-Za-z0-9][A-Za-z0-9][A-Za-z0-9][A-Za-z0-9]) ok "--rm: the report still has a 6-character run_id" ;;
*) not_ok "--rm: the report still has a 6-character run_id" "got '$(jr .run_id)'" ;;
esac
is "$(jr .agentbox_fds_left)" 0 "--rm: agentbox closed every fd it opened"
is "$(nruns)" "$before" "--rm: no run dir left in the runs root"
is "$(jr '.files[] | select(.path == "hello.txt") | .size')" 3 "--rm: files[] still lists what the script wrote"
abb 60 "$WORK/hello.py"
check "without --rm: the run dir is kept" test -d "$(jr .run_dir)"
is "$(jr .run_dir)" "$RUNS/run-$(jr .run_id)" "without --rm: the run dir is named after run_id"
is "$(jr .agentbox_fds_left)" 0 "without --rm: agentbox closed every fd it opened"
check "without --rm: the workspace copy holds the script's file" \
    test "$(cat "$(jr .workspace)/hello.txt")" = hi
is "$(find "$(jr .run_dir)" -mindepth 1 -maxdepth 1 -printf '%f\n' | sort | tr '\n' ' ')" ".agentbox-run report.json work " \
    "a kept run dir holds the marker, the report and the workspace copy, nothing else"
# The workspace, /etc, /tmp, /dev/shm and /dev/pts (agentbox's own tmpfs and devpts since
# issue 24) were mounted on RUNS/.mnt/* in agentbox's own mount namespace: on the host those
# stay empty directories, and nothing is mounted there.
is "$(find "$RUNS/.mnt" -mindepth 1 -maxdepth 1 -printf '%f\n' | sort | tr '\n' ' ')" "env etc pts ro script shm tmp work " "the runs root has the eight shared mountpoint dirs"
is "$(find "$RUNS/.mnt" -mindepth 2 | wc -l)" 0 "the shared mountpoints are empty on the host"
is "$(grep -c " $RUNS/" /proc/self/mountinfo)" 0 "nothing is mounted under the runs root on the host"
# a mountpoint that is no longer a directory (a symlink planted in its place) is refused
# before anything is mounted on it, and left as it is
rmdir "$RUNS/.mnt/tmp"
ln -s "$WORK" "$RUNS/.mnt/tmp"
abb 60 "$WORK/hello.py"
is "$rc" 125 "a symlink in place of RUNS/.mnt/tmp: refused (exit 125)"
check "... saying it is not a directory" grep -q "\.mnt/tmp' is not a directory" "$WORK/err"
check "... and the link is left alone" test -L "$RUNS/.mnt/tmp"
rm "$RUNS/.mnt/tmp"
abb 60 "$WORK/hello.py"
is "$rc" 0 "... and once it is gone, the next run makes the directory again"
check "... which is a directory" test -d "$RUNS/.mnt/tmp" -a ! -L "$RUNS/.mnt/tmp"

# ---- --workspace DIR ------------------------------------------------------------------------
mkdir -m 0700 "$WORK/ws" "$WORK/ws/sub"
cat >"$WORK/ws/sub/inplace.py" <<'EOF'
import os
print("SEES=" + ",".join(sorted(os.listdir("/work"))))
open("/work/written.txt", "w").write("in place\n")
print("CWD=" + os.getcwd())
EOF
abb 60 --workspace "$WORK/ws" "$WORK/ws/sub/inplace.py"
if is_root && [ "$rc" = 125 ] && grep -q "cannot make .*idmapped mount" "$WORK/err"; then
    # a host (or a container's root) that cannot idmap refuses, as the README says
    check "--workspace: refused where no idmapped mount can be made, with a fix" \
        grep -q "fix: copy in and out with --input" "$WORK/err"
    skip "--workspace: the script runs in place in DIR" "no idmapped mount here: $(head -c 160 "$WORK/err")"
else
    is "$rc" 0 "--workspace: exit 0"
    is "$(cat "$WORK/ws/written.txt" 2>/dev/null)" "in place" "--workspace: the file the script wrote is in DIR"
    check "--workspace: the script ran in place (cwd /work)" grep -qx 'CWD=/work' "$WORK/out"
    check "--workspace: DIR is /work" grep -qx 'SEES=sub' "$WORK/out"
    refute "--workspace: the script was not copied to the top of DIR" test -e "$WORK/ws/inplace.py"
    is "$(jr .workspace)" "$(cd "$WORK/ws" && pwd -P)" "--workspace: the report names DIR"
fi

# ---- --dry-run ------------------------------------------------------------------------------
cat >"$WORK/dry.py" <<'EOF'
print("DRY-RAN")
EOF
before=$(nruns)
abb 60 --dry-run "$WORK/dry.py"
is "$rc" 0 "--dry-run: exit 0"
for w in --unshare-all --disable-userns --new-session --die-with-parent --cap-drop --clearenv; do
    check "--dry-run: '$w' is a word of its own" grep -qx -- "$w" "$WORK/out"
done
is "$(head -n1 "$WORK/out" | sed 's|.*/||')" bwrap "--dry-run: the first line is the bwrap path"
# shellcheck disable=SC2016 # awk's own $0
check "--dry-run: a '--' comes right before agentbox-init (exec'd as /proc/self/fd/6)" \
    awk 'p == "--" && $0 == "/proc/self/fd/6" { f = 1 } { p = $0 } END { exit !f }' "$WORK/out"
is "$(tail -n1 "$WORK/out")" /work/dry.py "--dry-run: the script is the last word, after the interpreter"
refute "--dry-run: the script did not run" grep -q DRY-RAN "$WORK/out"
is "$(nruns)" "$before" "--dry-run: no run dir left in the runs root"

# ---- stdin ----------------------------------------------------------------------------------
cat >"$WORK/stdin.py" <<'EOF'
import os, stat, sys
data = sys.stdin.read()
st = os.fstat(0)
print("LEN=%d" % len(data))
print("DATA=" + data.replace("\n", "|"))
print("CHR=%d DEV=%d,%d" % (stat.S_ISCHR(st.st_mode), os.major(st.st_rdev), os.minor(st.st_rdev)))
EOF
printf 'line one\nline two\n' >"$WORK/in.txt"
abb 60 --stdin "$WORK/in.txt" "$WORK/stdin.py"
is "$rc" 0 "--stdin: exit 0"
check "--stdin FILE feeds the script's stdin" grep -qx 'DATA=line one|line two|' "$WORK/out"
abb 60 "$WORK/stdin.py" </dev/zero
check "without --stdin: stdin is empty (not the caller's)" grep -qx 'LEN=0' "$WORK/out"
check "without --stdin: stdin is /dev/null (char 1,3)" grep -qx 'CHR=1 DEV=1,3' "$WORK/out"
cat >"$WORK/stdin.js" <<'EOF'
const d = require('fs').readFileSync(0, 'utf8');
console.log('LEN=' + d.length + ' DATA=' + d.replace(/\n/g, '|'));
EOF
abb 60 --stdin "$WORK/in.txt" "$WORK/stdin.js"
check "node: --stdin FILE feeds stdin" grep -qx 'LEN=18 DATA=line one|line two|' "$WORK/out"

# ---- exit codes and signals -----------------------------------------------------------------
printf 'import sys\nsys.exit(3)\n' >"$WORK/exit3.py"
abb 60 "$WORK/exit3.py"
is "$rc" 3 "sys.exit(3): agentbox exits 3"
is "$(jr .exit_code)" 3 "sys.exit(3): exit_code 3"
is "$(jr .status)" exited "sys.exit(3): status exited"
is "$(jr .agentbox_exit)" 3 "sys.exit(3): agentbox_exit 3"

printf 'import os\nprint("before", flush=True)\nos.kill(os.getpid(), 9)\n' >"$WORK/kill9.py"
abb 60 "$WORK/kill9.py"
is "$rc" 137 "SIGKILL self: agentbox exits 128+9"
is "$(jr .status)" signaled "SIGKILL self: status signaled"
is "$(jr .signal)" 9 "SIGKILL self: signal 9"
is "$(jr .exit_code)" null "SIGKILL self: no exit_code"
is "$(jr .stdout.text)" "before" "SIGKILL self: output before the signal is kept"

printf 'import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n' >"$WORK/segv.py"
abb 60 "$WORK/segv.py"
is "$rc" 139 "SIGSEGV: agentbox exits 128+11"
is "$(jr .signal_name)" SEGV "SIGSEGV: signal_name SEGV"

printf 'process.exit(5);\n' >"$WORK/exit5.js"
abb 60 "$WORK/exit5.js"
is "$rc" 5 "node process.exit(5): agentbox exits 5"
is "$(jr .exit_code)" 5 "node process.exit(5): exit_code 5"
is "$(jr .status)" exited "node process.exit(5): status exited"

printf "process.kill(process.pid, 'SIGTERM');\nsetTimeout(() => {}, 5000);\n" >"$WORK/term.js"
abb 60 "$WORK/term.js"
is "$rc" 143 "node SIGTERM self: agentbox exits 128+15"
is "$(jr .status)/$(jr .signal)" signaled/15 "node SIGTERM self: status signaled, signal 15"

printf 'import sys\nsys.exit(137)\n' >"$WORK/exit137.py"
abb 60 "$WORK/exit137.py"
is "$rc" 137 "exit(137) by itself: agentbox exits 137"
is "$(jr .exit_code)" 137 "exit(137) by itself: exit_code 137"
is "$(jr .status)" exited "exit(137) by itself: status exited, not signaled"
is "$(jr .signal)" null "exit(137) by itself: no signal"

printf 'raise SystemExit("boom")\n' >"$WORK/raise.py"
abb 60 "$WORK/raise.py"
is "$rc" 1 "an uncaught exception: exit 1"
check "an uncaught exception: stderr relayed" grep -q boom "$WORK/err"
is "$(jr .stderr.text)" "boom" "an uncaught exception: stderr captured"

# ---- issue 25: the figures of a killed run, and of a short one --------------------------------
# A run agentbox kills: its processes die unreaped by their parents, and the wait statuses
# carried 5 ms of a second of CPU. The script says what it used before it waits to be killed.
cat >"$WORK/burn.py" <<'EOF'
import resource, time
end = time.process_time() + 0.6
while time.process_time() < end:
    pass
x = bytearray(40 << 20)
for i in range(0, len(x), 4096):
    x[i] = 1
print("cpu_ms", int(time.process_time() * 1000), "maxrss", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, flush=True)
time.sleep(60)
EOF
abb 60 --timeout 8s "$WORK/burn.py"
own_cpu=$(sed -n 's/^cpu_ms \([0-9]*\) .*/\1/p' "$WORK/out")
own_rss=$(sed -n 's/.* maxrss \([0-9]*\)$/\1/p' "$WORK/out")
is "$(jr .status)" timeout "killed run: status timeout"
if [ -n "$own_cpu" ] && [ -n "$own_rss" ]; then
    check "killed run: cpu_ms ($(jr .cpu_ms)) counts the script's own $own_cpu ms" \
        test "$(jr .cpu_ms)" -ge $((own_cpu - 20))
    is "$(jr .usage.cpu_ms)" "$(jr .cpu_ms)" "killed run: usage.cpu_ms is the same figure"
    check "killed run: max_rss_kib ($(jr .max_rss_kib)) is at least the script's own ($own_rss KiB)" \
        test "$(jr .max_rss_kib)" -ge $((own_rss - 1024))
else
    not_ok "killed run: the script said what it used" "stdout: $(cat "$WORK/out")"
fi
# a short script: its memory is measured (the watchdog's first sample came after it), or null
printf 'import time\nprint(6 * 7)\ntime.sleep(0.05)\n' >"$WORK/short.py"
abb 60 "$WORK/short.py"
check "short run: memory_peak_bytes measured the interpreter ($(jr .usage.memory_peak_bytes) bytes)" \
    jqe '.usage.memory_peak_bytes > 1048576'
abb 60 --code 'print(6 * 7)'
check "print(6*7): memory_peak_bytes is the interpreter's or null, never agentbox-init's ($(jr .usage.memory_peak_bytes))" \
    jqe '.usage.memory_peak_bytes == null or .usage.memory_peak_bytes > 1048576'

# ---- issue 25: stdin flows, as for any Unix filter ------------------------------------------
cat >"$WORK/stdin.py" <<'EOF'
import sys
data = sys.stdin.buffer.read()
print("read", len(data), data[:20])
EOF
printf 'import time\nprint("no read")\n' >"$WORK/noread.py"
sin() { # sin CMD...: an agentbox run whose stdin the caller sets up; report, out, err as ab's
    rm -f "$WORK/r.json"
    rc=0
    bounded 60 "$AGENTBOX" run --runs-dir "$RUNS" --report "$WORK/r.json" "$@" >"$WORK/out" 2>"$WORK/err" || rc=$?
    keep_report "$WORK/r.json"
}
echo hi | sin "$WORK/stdin.py"
is "$rc/$(outtext)" "0/read 3 b'hi\\n'" "a pipe on agentbox's stdin: the script reads it (the default)"
echo hi | sin --stdin - "$WORK/stdin.py"
is "$(outtext)" "read 3 b'hi\\n'" "--stdin -: the script reads agentbox's stdin"
printf 'from a file' >"$WORK/in.txt"
sin "$WORK/stdin.py" <"$WORK/in.txt"
is "$(outtext)" "read 11 b'from a file'" "a file on agentbox's stdin: the script reads it (the default)"
sin "$WORK/stdin.py" </dev/null
is "$(outtext)" "read 0 b''" "/dev/null on agentbox's stdin: nothing to read"
head -c 50000000 /dev/zero | sin "$WORK/stdin.py"
is "$(outtext)" "read 50000000 b'\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00'" \
    "50 MB streamed through a pipe, every byte"
lt_kib() { if [ "$1" -lt "$2" ] 2>/dev/null; then ok "$3 ($1 KiB)"; else not_ok "$3" "got '$1', want < $2"; fi; }
lt_kib "$(jr .agentbox_max_rss_kib)" 32768 "... and agentbox held little of it"
# a script that does not read: the writer waits (a bounded buffer), the run ends on time
yes | head -c 100000000 | sin "$WORK/noread.py"
is "$rc/$(outtext)" "0/no read" "100 MB offered to a script that does not read: it ends as usual"
lt_kib "$(jr .agentbox_max_rss_kib)" 32768 "... and agentbox buffered little of it"
# a stdin that never closes never delays a script that does not read it
mkfifo "$WORK/never"
sleep 60 >"$WORK/never" &
holder=$!
t0=$(date +%s)
sin "$WORK/noread.py" <"$WORK/never"
el=$(($(date +%s) - t0))
kill "$holder" 2>/dev/null
wait "$holder" 2>/dev/null
is "$rc/$(outtext)" "0/no read" "a stdin that never closes: the script ran"
check "... and agentbox did not wait for the stream's end (${el}s)" test "$el" -lt 20
# a spec names a stream of its caller's by its fd
printf '{"script": "%s", "runs_dir": "%s", "stdin_fd": 5}' "$WORK/stdin.py" "$RUNS" >"$WORK/spec-fd.json"
rc=0
bounded 60 "$AGENTBOX" run --report "$WORK/r.json" --spec "$WORK/spec-fd.json" >"$WORK/out" 2>"$WORK/err" 5<"$WORK/in.txt" || rc=$?
keep_report "$WORK/r.json"
is "$rc/$(outtext)" "0/read 11 b'from a file'" "spec stdin_fd 5: the script reads the caller's fd 5"
rc=0
printf '{"script": "%s", "stdin_fd": 0}' "$WORK/stdin.py" |
    bounded 30 "$AGENTBOX" run --spec - >/dev/null 2>"$WORK/err" || rc=$?
is "$rc" 2 "spec stdin_fd 0 with --spec -: a usage error (that stream is the spec)"
rc=0
bounded 30 "$AGENTBOX" run --spec "$WORK/spec-fd.json" >/dev/null 2>"$WORK/err" 5<&- || rc=$?
is "$rc" 2 "spec stdin_fd of a closed fd: a usage error"
check "... naming it, with a fix" grep -q 'stdin_fd 5 is not an open fd.*(fix: ' "$WORK/err"
rc=0
echo 'print(1)' | bounded 30 "$AGENTBOX" run --stdin - - >/dev/null 2>"$WORK/err" || rc=$?
is "$rc" 2 "--stdin - with SCRIPT -: a usage error (both read agentbox's stdin)"

# ---- issue 25: a hint for the common mistakes ----------------------------------------------
mkdir -p "$WORK/proj/node_modules/leftpad" "$WORK/proj2"
printf 'print(open("data.txt").read())\n' >"$WORK/proj/reads.py"
printf 'the data\n' >"$WORK/proj/data.txt"
printf 'import helpers\n' >"$WORK/proj/imports.py"
printf 'X = 1\n' >"$WORK/proj/helpers.py"
printf 'require("leftpad");\n' >"$WORK/proj/app.js"
printf 'module.exports = 1;\n' >"$WORK/proj/node_modules/leftpad/index.js"
printf 'print(open("data.txt").read())\n' >"$WORK/proj2/reads.py"
chmod -R a+rX "$WORK/proj" "$WORK/proj2"
abb 60 --summary "$WORK/proj/reads.py"
is "$rc" 1 "a file next to the script: the run fails (only the script is copied)"
is "$(jr .hint)" "'data.txt' is next to the script on the host, but only the script is copied into the sandbox: add --input $WORK/proj/data.txt (or run in $WORK/proj with --workspace $WORK/proj)" \
    "... the report's hint names --input and --workspace"
check "... and so does the summary line" grep -q "; hint: 'data.txt' is next to the script" "$WORK/err"
abb 60 --input "$WORK/proj/data.txt" "$WORK/proj/reads.py"
is "$rc/$(jr .hint)" 0/null "... which the hint's --input fixes"
abb 60 "$WORK/proj2/reads.py"
is "$rc/$(jr .hint)" 1/null "no such file next to the script: no hint"
abb 60 "$WORK/proj/imports.py"
is "$(jq --arg p "$WORK/proj/helpers.py" '.hint | contains("add --input " + $p)' "$WORK/r.json")" true \
    "a module next to the script: the hint names --input helpers.py"
abb 60 "$WORK/proj/app.js"
is "$(jr .hint)" "'leftpad' is in the node_modules next to the script on the host, which the sandbox does not see: add --node-modules $WORK/proj/node_modules" \
    "require() of a package in node_modules next to the script: the hint names --node-modules"
abb 60 --node-modules "$WORK/proj/node_modules" "$WORK/proj/app.js"
is "$rc/$(jr .hint)" 0/null "... which the hint's --node-modules fixes"
printf '{"script": "%s", "runs_dir": "%s"}' "$WORK/proj/reads.py" "$RUNS" |
    bounded 60 "$AGENTBOX" run --spec - --report "$WORK/r.json" >/dev/null 2>&1
keep_report "$WORK/r.json"
is "$(jq --arg p "$WORK/proj/data.txt" '.hint | contains("add \"" + $p + "\" to inputs") and (test("--") | not)' "$WORK/r.json")" true \
    "a spec's run: the hint names inputs and workspace, the spec's keys"

# ---- language detection ---------------------------------------------------------------------
printf 'import sys\nprint("PY", sys.version_info[0])\n' >"$WORK/noext_py"
printf 'console.log("JS", typeof process.versions.node);\n' >"$WORK/noext_js"
abb 60 --lang python "$WORK/noext_py"
is "$rc/$(jr .lang)" 0/python "--lang python: a file without extension runs as Python"
check "--lang python: output" grep -qx 'PY 3' "$WORK/out"
abb 60 --lang node "$WORK/noext_js"
is "$rc/$(jr .lang)" 0/node "--lang node: a file without extension runs as Node"
check "--lang node: output" grep -qx 'JS string' "$WORK/out"
printf 'print("PY-BY-LANG")\n' >"$WORK/forced.js"
abb 60 --lang python "$WORK/forced.js"
is "$rc/$(jr .lang)" 0/python "--lang overrides the extension"

printf '#!/usr/bin/env python3\nprint("SHEBANG-PY")\n' >"$WORK/shebang_py"
printf '#!/usr/bin/env node\nconsole.log("SHEBANG-JS");\n' >"$WORK/shebang_js"
printf '#!/usr/bin/python3 -u\nprint("SHEBANG-PY2")\n' >"$WORK/shebang2"
abb 60 "$WORK/shebang_py"
is "$rc/$(jr .lang)/$(outtext)" 0/python/SHEBANG-PY "a python shebang picks Python"
abb 60 "$WORK/shebang_js"
is "$rc/$(jr .lang)/$(outtext)" 0/node/SHEBANG-JS "a node shebang picks Node"
abb 60 "$WORK/shebang2"
is "$rc/$(jr .lang)/$(outtext)" 0/python/SHEBANG-PY2 "a /usr/bin/python3 shebang picks Python"
printf 'print(1)\n' >"$WORK/mjs_is_node.mjs"
abb 60 "$WORK/mjs_is_node.mjs"
is "$(jr .lang)" node ".mjs is Node (by extension)"

# ---- doctor takes the path a run takes (issue 23) ---------------------------------------------
# Its sandbox run is a real run through the library: it passes only where runs pass, names the
# cgroup that run got, and its limit mechanisms are those of an ordinary run here.
rc=0
timeout 120 "$AGENTBOX" doctor --json >"$WORK/doctor.json" 2>"$WORK/doctor.err" || rc=$?
is "$rc" 0 "doctor: ok here"
drun=$(jq -r '.checks[] | select(.check == "sandbox run") | "\(.result) \(.detail)"' "$WORK/doctor.json")
abb 60 --lang python --code 'print(1)'
mech="memory: $(jr .limits.memory.mechanism); pids: $(jr '.limits.pids.mechanism // "not enforced"'); cpus: $(jr '.limits.cpus.mechanism // "not enforced"')"
is "$(jq -r '.checks[] | select(.check == "limits") | .detail' "$WORK/doctor.json")" "$mech" \
    "doctor: its limits line is what a run gets here"
case "$drun" in
"ok status exited, exit 0, "*"; cgroup: "*"; $mech") ok "doctor: its sandbox run passed with the mechanisms a run gets" ;;
*) not_ok "doctor: its sandbox run passed with the mechanisms a run gets" "$drun" ;;
esac
if [ "$(jr .sandbox.cgroup.enforced)" = true ]; then
    case "$drun" in
    *"cgroup: cgroup v"[12]" /sys/fs/cgroup/"*) ok "doctor: it names the run's cgroup" ;;
    *) not_ok "doctor: it names the run's cgroup" "$drun" ;;
    esac
else
    case "$drun" in
    *"cgroup: none"*) ok "doctor: it says the run had no cgroup" ;;
    *) not_ok "doctor: it says the run had no cgroup" "$drun" ;;
    esac
fi

# issue 25: code given on the command line or on stdin is Python unless a shebang or --lang
# says otherwise (as python3 -c)
abb 60 --code 'import sys; print("CODE-PY", sys.version_info[0])'
is "$rc/$(jr .lang)/$(outtext)" "0/python/CODE-PY 3" "--code without --lang runs as Python"
rm -f "$WORK/r.json"
rc=0
printf 'print("STDIN-PY")\n' | bounded 60 "$AGENTBOX" run --runs-dir "$RUNS" --report "$WORK/r.json" - \
    >"$WORK/out" 2>"$WORK/err" || rc=$?
keep_report "$WORK/r.json"
is "$rc/$(jr .lang)/$(outtext)" 0/python/STDIN-PY "SCRIPT - without --lang runs as Python"
abb 60 --code '#!/usr/bin/env node
console.log("CODE-JS")'
is "$rc/$(jr .lang)/$(outtext)" 0/node/CODE-JS "--code with a node shebang runs as Node"
abb 60 --lang node --code 'console.log("CODE-LANG-JS")'
is "$rc/$(jr .lang)/$(outtext)" 0/node/CODE-LANG-JS "--code with --lang node runs as Node"

# ---- --report to what is not a regular file: written to, never replaced -------------------
# (a review during issue 24: the temp file was renamed over /dev/null, which became a
# regular file). agentbox changes nothing it did not create.
printf 'print("R")\n' >"$WORK/rep.py"
mkfifo "$WORK/rep.fifo"
ln -s rep.fifo "$WORK/rep.link"
# a reader that has the FIFO open (and says so) before agentbox opens it
fifo_reader() {
    rm -f "$WORK/fifo.out" "$WORK/fifo.ready"
    # as long as the run may take (bounded 60 below): on a loaded machine a reader that gave
    # up first would fail the run with EPIPE
    bounded 70 python3 - "$WORK/rep.fifo" "$WORK/fifo.out" "$WORK/fifo.ready" <<'PY' &
import os, sys, time
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_NONBLOCK)
open(sys.argv[3], "w").close()
buf, t0 = b"", time.time()
while time.time() - t0 < 62:
    try:
        d = os.read(fd, 65536)
    except BlockingIOError:
        time.sleep(0.01)
        continue
    if d:
        buf += d
    elif buf:
        break
    else:
        time.sleep(0.01)
open(sys.argv[2], "wb").write(buf)
PY
    reader=$!
    _t=0
    while [ ! -e "$WORK/fifo.ready" ] && [ "$_t" -lt 200 ]; do
        sleep 0.05
        _t=$((_t + 1))
    done
}
for dest in rep.fifo rep.link; do
    fifo_reader
    rc=0
    bounded 60 "$AGENTBOX" run --rm --report "$WORK/$dest" "$WORK/rep.py" >"$WORK/out" 2>"$WORK/err" || rc=$?
    wait "$reader" || true
    if [ "$rc" = 0 ]; then
        ok "--report $dest (a FIFO with a reader): the run ends 0"
    else
        not_ok "--report $dest (a FIFO with a reader): the run ends 0" "got: $rc" \
            "stderr: $(tail -n 2 "$WORK/err")" "reader ready: $(ls "$WORK/fifo.ready" 2>&1)"
    fi
    check "--report $dest: the FIFO is still a FIFO" test -p "$WORK/rep.fifo"
    check "--report $dest: the reader got the report" jqe '.status == "exited"' "$WORK/fifo.out"
done
check "--report rep.link: the link is still a link to the FIFO" \
    test "$(readlink "$WORK/rep.link")" = rep.fifo
rc=0
bounded 60 "$AGENTBOX" run --rm --report "$WORK/rep.fifo" "$WORK/rep.py" >"$WORK/out" 2>"$WORK/err" || rc=$?
is "$rc" 2 "--report a FIFO no one reads: a usage error, not a hang"
check "... naming the problem" grep -q "a FIFO with no reader" "$WORK/err"
check "... and the FIFO is still a FIFO" test -p "$WORK/rep.fifo"
python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$WORK/rep.sock"
rc=0
bounded 60 "$AGENTBOX" run --rm --report "$WORK/rep.sock" "$WORK/rep.py" >"$WORK/out" 2>"$WORK/err" || rc=$?
is "$rc" 2 "--report a socket: refused"
check "... and it is still a socket" test -S "$WORK/rep.sock"
if is_root; then
    # a link of root's whose target goes through another user's symlink: followed only by
    # trusted links, so the report never lands in the file that user points it at
    mkdir "$WORK/rep.eve" "$WORK/rep.secret"
    printf 'precious\n' >"$WORK/rep.secret/f"
    ln -s "$WORK/rep.secret" "$WORK/rep.eve/lnk"
    chown -h nobody "$WORK/rep.eve/lnk" "$WORK/rep.eve"
    ln -s "$WORK/rep.eve/lnk/f" "$WORK/rep.rootlink"
    rc=0
    bounded 60 "$AGENTBOX" run --rm --report "$WORK/rep.rootlink" "$WORK/rep.py" >"$WORK/out" 2>"$WORK/err" || rc=$?
    is "$rc" 2 "--report a root link through another user's symlink: refused"
    is "$(cat "$WORK/rep.secret/f")" precious "... the file that user pointed it at is untouched"
    check "... and the link is still a link" test -L "$WORK/rep.rootlink"
    mknod "$WORK/rep.null" c 1 3
    chmod 666 "$WORK/rep.null"
    rc=0
    bounded 60 "$AGENTBOX" run --rm --report "$WORK/rep.null" "$WORK/rep.py" >"$WORK/out" 2>"$WORK/err" || rc=$?
    is "$rc" 0 "--report a copy of /dev/null (root): the run ends 0"
    check "... and it is still the character device 1,3" \
        test "$(stat -c '%F %t,%T' "$WORK/rep.null")" = "character special file 1,3"
    # the real /dev/null and /dev/stdout, in a read-only host (../shared/tools/safe-ns):
    # a regression fails there instead of replacing them
    SAFE_NS=$AB_SRCDIR/../shared/tools/safe-ns
    if [ -x "$SAFE_NS" ]; then
        SCR=$(mktemp -d /var/lib/agentbox-devnull.XXXXXX)
        cp "$WORK/rep.py" "$SCR/rep.py"
        rc=0
        # shellcheck disable=SC2016 # expanded by the inner sh
        "$SAFE_NS" "$SCR" sh -c '
            "$1" run --rm --report /dev/null "$2/rep.py" >"$2/o1" 2>"$2/e1"; echo "null $?"
            "$1" run --rm --report /dev/stdout "$2/rep.py" >"$2/o2" 2>"$2/e2"; echo "stdout $?"
            stat -c "%F" /dev/null; readlink /dev/stdout' sh "$AGENTBOX" "$SCR" >"$WORK/sn.out" 2>&1 || rc=$?
        is "$(head -n 4 "$WORK/sn.out" | tr '\n' ' ')" "null 0 stdout 0 character special file /proc/self/fd/1 " \
            "--report /dev/null and /dev/stdout (read-only host; stdout a file): both end 0, /dev/null stays a device, /dev/stdout a link"
        check "--report /dev/stdout: the report is on stdout" jqe '.status == "exited"' "$SCR/o2"
        rm -rf "$SCR"
    else
        skip "--report /dev/null in a read-only host" "needs ../shared/tools/safe-ns"
    fi
fi

done_testing

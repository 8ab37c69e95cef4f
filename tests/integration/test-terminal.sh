#!/bin/sh
# test-terminal.sh -- what a person at a terminal sees: one summary line on stderr after every run
# (at a terminal, or with --summary), the fix for a limit in it, colour only on a terminal and
# never with NO_COLOR, a live status line for a long run that never lands in the script's own
# output. Terminals are pseudo-terminals from script(1).
# shellcheck source-path=SCRIPTDIR
# shellcheck source=lib.sh
. "$AB_TESTDIR/integration/lib.sh"

command -v script >/dev/null 2>&1 || bail "script(1) (util-linux) is needed for the terminal tests"
ESC=$(printf '\033')
# the last run's stderr without the warnings and the note on the defaults this host cannot
# apply (an unprivileged run without a delegated cgroup has one; that is not what is tested
# here, but below)
own() { grep -v '^agentbox: warning: \|^agentbox: note: ' "$WORK/err" || true; }

# ---- not a terminal: nothing of agentbox's own unless asked --------------------------------
printf 'print("hello")\n' >"$WORK/ok.py"
abb 60 "$WORK/ok.py"
is "$rc" 0 "no terminal: exit 0"
is "$(own)" "" "no terminal: stderr has nothing of agentbox's by default but warnings"
abb 60 --summary "$WORK/ok.py"
is "$(own | wc -l)" 1 "--summary: one line on stderr (and the warnings)"
check "--summary: it says exit 0 and the time" grep -Eq '^agentbox: exit 0 after [0-9.]+m?s, ' "$WORK/err"
check "--summary: peak memory" grep -q 'peak memory [0-9.]* MiB\|max RSS [0-9.]* MiB' "$WORK/err"
check "--summary: files written" grep -q '0 files written' "$WORK/err"
refute "--summary off a terminal: no colour" grep -q "$ESC" "$WORK/err"
is "$(cat "$WORK/out")" hello "--summary: stdout is the script's alone"

printf 'open("a.txt", "w").write("a")\nopen("b.txt", "w").write("b")\n' >"$WORK/two.py"
abb 60 --summary "$WORK/two.py"
check "--summary: counts the files the script wrote (2)" grep -q ', 2 files written' "$WORK/err"

printf 'raise SystemExit(3)\n' >"$WORK/three.py"
abb 60 --summary "$WORK/three.py"
is "$rc" 3 "exit 3: agentbox exits 3"
check "--summary: exit 3" grep -q '^agentbox: exit 3 after' "$WORK/err"

printf 'import time\ntime.sleep(30)\n' >"$WORK/sleep.py"
abb 60 --summary --timeout 1s "$WORK/sleep.py"
is "$(jr .status)" timeout "timeout: status timeout"
check "timeout: the line says timeout, the limit and the fix" \
    grep -Eq '^agentbox: timeout after [0-9.]+s \(--timeout 1s\).*; raise --timeout' "$WORK/err"
is "$(jr .fix)" "$(own | sed -n 's/^agentbox: timeout.*; //p')" "timeout: the line's fix is the report's"

# bounded by the run's own 64M limit, and by the test's own net: prlimit's 2G address space
# on everything it starts, and the outer timeout
printf 'x = []\nwhile True:\n    x.append(bytearray(8 << 20))\n' >"$WORK/hog.py"
rm -f "$WORK/r.json"
rc=0
bounded 60 prlimit --as=$((2 << 30)) "$AGENTBOX" run --runs-dir "$RUNS" --report "$WORK/r.json" \
    --summary --memory 64M "$WORK/hog.py" >"$WORK/out" 2>"$WORK/err" || rc=$?
keep_report "$WORK/r.json"
case "$(jr .status)" in
oom)
    check "oom: the line names the memory limit and the fix" \
        grep -Eq '^agentbox: out of memory after .*\(--memory 64M\).*; raise --memory' "$WORK/err"
    ;;
*) skip "oom summary" "this host cannot enforce --memory for this user: status $(jr .status)" ;;
esac

printf 'import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n' >"$WORK/segv.py"
abb 60 --summary "$WORK/segv.py"
check "signal: the line names it" grep -q '^agentbox: killed by SIGSEGV after' "$WORK/err"

abb 60 --summary=never "$WORK/ok.py"
is "$(own)" "" "--summary=never: nothing on stderr but warnings"

# ---- issue 25: the line agrees with the report, and says where the files are --------------
printf 'for i in range(100):\n    open("f%%d" %% i, "w").close()\n' >"$WORK/inodes.py"
abb 60 --summary --inodes 64 "$WORK/inodes.py"
is "$(jr .status)/$(jq -c .limits_hit "$WORK/r.json")" 'disk_limit/["inodes"]' \
    "inode flood: status disk_limit, limits_hit inodes"
check "inode flood: the line names --inodes, its value and its fix" \
    grep -Eq '^agentbox: workspace full after .*\(--inodes 64\).*; raise --inodes' "$WORK/err"
refute "inode flood: the line does not name --disk" grep -q -- '--disk' "$WORK/err"
cat >"$WORK/fsize.py" <<'PY'
import sys
try:
    with open("big.bin", "wb") as f:
        f.write(b"x" * 8192)
except OSError as e:
    print("EFBIG:", e.errno, file=sys.stderr)
    sys.exit(1)
PY
abb 60 --summary --file-size 4K "$WORK/fsize.py"
is "$(jr .status)/$(jr .exit_code)/$(jq -c .limits_hit "$WORK/r.json")" 'exited/1/["file-size"]' \
    "file-size hit: exited 1, limits_hit file-size"
check "file-size hit: the line names --file-size, its value and the report's fix" \
    grep -Eq '^agentbox: exit 1 after .*; file size limit reached \(--file-size 4K\).*; raise --file-size' "$WORK/err"
abb 60 --summary "$WORK/two.py"
ws=$(jr .workspace)
check "the line names where the files are (the kept run directory's workspace)" \
    grep -qF "2 files written (in $ws)" "$WORK/err"
check "... which holds them" test -f "$ws/a.txt"
abb 60 --summary --collect "$WORK/collected" "$WORK/two.py"
check "with --collect: the line names the collect directory" \
    grep -qF "2 files written (in $WORK/collected)" "$WORK/err"
abb 60 --summary --rm "$WORK/two.py"
check "with --rm: the line says the files were not kept" grep -q '2 files written (not kept' "$WORK/err"
printf '{"script":"%s","runs_dir":"%s","limits":{"timeout":"1s"}}' "$WORK/sleep.py" "$RUNS" |
    bounded 60 "$AGENTBOX" run --spec - --summary --report "$WORK/r.json" >/dev/null 2>"$WORK/err"
keep_report "$WORK/r.json"
check "a --spec run: the line names limits.timeout, the spec's key" \
    grep -Eq '^agentbox: timeout after .*\(limits.timeout 1s\).*; raise limits.timeout' "$WORK/err"

# issue 25: a default this host cannot apply is one short line, not its warning on every run
abb 60 "$WORK/ok.py"
if [ "$(jr '.defaults_not_applied | length')" -gt 0 ]; then
    is "$(grep -c '^agentbox: note: ' "$WORK/err")" 1 "defaults not applied here ($(jr '.defaults_not_applied | join(",")')): one note line"
    check "... naming them and agentbox doctor" \
        grep -q "^agentbox: note: defaults this host cannot fully apply: $(jr '.defaults_not_applied | join(", ")') (agentbox doctor explains)$" "$WORK/err"
    refute "... and not their warnings" grep -q '^agentbox: warning: default ' "$WORK/err"
    check "... which the report keeps" jqe '([.warnings[] | select(startswith("default "))] | length) == (.defaults_not_applied | length)'
    lt_note=$(grep '^agentbox: note: ' "$WORK/err" | wc -c)
    check "... short (under 120 characters: $lt_note)" test "$lt_note" -lt 120
else
    is "$(grep -c '^agentbox: note: ' "$WORK/err")" 0 "every default applied here: no note line"
    refute "... and no default's warning" grep -q '^agentbox: warning: default ' "$WORK/err"
fi

# ---- at a terminal ---------------------------------------------------------------------
# tty CMD: run CMD under a pseudo-terminal; what the terminal showed in $WORK/tty
tty() {
    rc=0
    bounded 60 script -qec "$1" /dev/null >"$WORK/tty" 2>&1 </dev/null || rc=$?
}
tty "'$AGENTBOX' run --rm --runs-dir '$RUNS' '$WORK/ok.py'"
check "terminal: the summary line by default" grep -q 'agentbox: .*exit 0 after' "$WORK/tty"
check "terminal: in colour" grep -q "agentbox: ${ESC}\[32mexit 0" "$WORK/tty"
tty "NO_COLOR=1 '$AGENTBOX' run --rm --runs-dir '$RUNS' '$WORK/ok.py'"
check "terminal, NO_COLOR=1: the summary line" grep -q 'agentbox: exit 0 after' "$WORK/tty"
refute "terminal, NO_COLOR=1: no escape sequence at all" grep -q "$ESC" "$WORK/tty"
tty "TERM=dumb '$AGENTBOX' run --rm --runs-dir '$RUNS' '$WORK/ok.py'"
refute "terminal, TERM=dumb: no colour" grep -q "$ESC\[3" "$WORK/tty"
tty "'$AGENTBOX' run --rm --no-summary --runs-dir '$RUNS' '$WORK/ok.py'"
refute "terminal, --no-summary: no summary" grep -q 'agentbox: [^wn]' "$WORK/tty"

# a long run shows it is alive; the script's own stdout (a file) stays exactly what it wrote
cat >"$WORK/long.py" <<'PY'
import time
print("start", flush=True)
time.sleep(4.5)
print("end", flush=True)
PY
tty "'$AGENTBOX' run --rm --runs-dir '$RUNS' '$WORK/long.py' >'$WORK/long.out'"
check "long run at a terminal: a live status line" grep -q 'agentbox: running [0-9]*s' "$WORK/tty"
tr '\r' '\n' <"$WORK/tty" >"$WORK/tty.lines"
refute "long run: nothing is ever written after a status line but its erasure" \
    grep -q 'stops it).' "$WORK/tty.lines"
check "long run: the summary starts on an erased line" grep -q "^${ESC}\[Kagentbox: \(warning\|note\|${ESC}\[32mexit 0\)" "$WORK/tty.lines"
is "$(cat "$WORK/long.out")" "$(printf 'start\nend')" "long run: the script's stdout has only its own lines"
tty "'$AGENTBOX' run --rm --runs-dir '$RUNS' '$WORK/long.py'"
check "long run, output on the terminal: each line of the script starts clean" \
    grep -q "${ESC}\[Kend" "$WORK/tty"
tty "'$AGENTBOX' run --rm --summary=never --runs-dir '$RUNS' '$WORK/long.py'"
refute "long run, --summary=never: no status line" grep -q 'agentbox: running' "$WORK/tty"
printf 'print("quick")\n' >"$WORK/quick.py"
tty "'$AGENTBOX' run --rm --runs-dir '$RUNS' '$WORK/quick.py'"
refute "a short run never shows a status line" grep -q 'agentbox: running' "$WORK/tty"

# issue 25: a terminal on agentbox's stdin stays agentbox's: by default the script gets
# /dev/null; with --stdin - what is typed is streamed through a pipe, never the terminal itself
printf 'import os, stat\nst = os.fstat(0)\nprint("STDIN tty=%%s fifo=%%s chr=%%s" %% (os.isatty(0), stat.S_ISFIFO(st.st_mode), stat.S_ISCHR(st.st_mode)))\n' >"$WORK/isatty.py"
tty "'$AGENTBOX' run --rm --runs-dir '$RUNS' '$WORK/isatty.py'"
check "a terminal on stdin: the script's stdin is not it (/dev/null)" \
    grep -q 'STDIN tty=False fifo=False chr=True' "$WORK/tty"
tty "'$AGENTBOX' run --rm --stdin - --runs-dir '$RUNS' '$WORK/isatty.py'"
check "a terminal on stdin, --stdin -: the script reads a pipe, not the terminal" \
    grep -q 'STDIN tty=False fifo=True chr=False' "$WORK/tty"

done_testing

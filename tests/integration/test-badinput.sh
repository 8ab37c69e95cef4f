#!/bin/sh
# test-badinput.sh -- every bad input is refused cleanly: the documented exit status (2 usage,
# 125 refused, 126/127 interpreter), one clear line on stderr naming the problem (and the fix
# where agentbox has one), a report with status usage_error/setup_error, and nothing outside
# the runs root touched (a --workspace or --runs-dir symlink's target stays as it was).
# shellcheck source-path=SCRIPTDIR
# shellcheck source=lib.sh
. "$AB_TESTDIR/integration/lib.sh"

# snap: every path under $WORK except the runs root and our own outputs, with its mode,
# owner, size and mtime
snap() {
    find "$WORK" -mindepth 1 \( -path "$RUNS" -o -path "$WORK/reports" -o -name out -o -name err \
        -o -name 'r.json*' \) \
        -prune -o -printf '%p %m %U:%G %s %T@\n' | sort
}
HINT="Try 'agentbox run --help' for more information."

# refused LABEL RC STATUS PATTERN FIX ARGS...: run agentbox with ARGS and check the refusal.
# PATTERN is a grep -E pattern the error line must match; FIX=fix: the line must carry a
# "(fix: ...)" and the report a fix; FIX=-: no fix expected.
refused() {
    _label=$1 _rc=$2 _status=$3 _pat=$4 _fix=$5
    shift 5
    _before=$(snap)
    abb 30 "$@"
    is "$rc" "$_rc" "$_label: exit status $_rc"
    is "$(jr .status)" "$_status" "$_label: report status $_status"
    is "$(jr .agentbox_exit)" "$_rc" "$_label: report agentbox_exit $_rc"
    _line=$(head -n1 "$WORK/err")
    if printf '%s\n' "$_line" | grep -Eq "^agentbox: .*($_pat)"; then
        ok "$_label: stderr names the problem"
    else
        not_ok "$_label: stderr names the problem" "want /$_pat/" "got: $_line"
    fi
    # one line: the error; a usage error may add the standard --help hint, nothing else
    _others=$(sed 1d "$WORK/err" | grep -vxF "$HINT" || true)
    if [ -z "$_others" ]; then ok "$_label: one line on stderr"; else
        not_ok "$_label: one line on stderr" "extra: $(printf '%s' "$_others" | head -n3 | tr '\n' '|')"
    fi
    if [ "$_status" = usage_error ]; then
        check "$_label: the --help hint follows" grep -qxF "$HINT" "$WORK/err"
        # issue 25: every usage error says how to fix it
        _fix=fix
    fi
    is "$(jr .message | head -c 200)" "$(printf '%s\n' "$_line" | sed 's/^agentbox: //; s/ (fix: .*//' | head -c 200)" \
        "$_label: the report's message is the stderr line"
    if [ "$_fix" = fix ]; then
        check "$_label: the line says how to fix it" grep -q '(fix: ' "$WORK/err"
        refute "$_label: the report has the fix" test "$(jr .fix)" = null
    fi
    _after=$(snap)
    if [ "$_after" = "$_before" ]; then ok "$_label: nothing outside the runs root changed"; else
        not_ok "$_label: nothing outside the runs root changed" \
            "changed: $(printf '%s\n%s\n' "$_before" "$_after" | sort | uniq -u | head -n4 | tr '\n' '|')"
    fi
    is "$(find "$RUNS" -mindepth 2 -path "$RUNS/run-*/work/*" 2>/dev/null | head -n3 | tr '\n' ' ')" "" \
        "$_label: no workspace was populated"
}

printf 'print("SHOULD-NOT-RUN")\n' >"$WORK/ok.py"
printf 'console.log("SHOULD-NOT-RUN")\n' >"$WORK/ok.js"
printf 'print("SHOULD-NOT-RUN")\n' >"$WORK/noext"

# ---- the script -----------------------------------------------------------------------------
refused "missing script" 125 setup_error "'[^']*nope\.py' does not exist" fix "$WORK/nope.py"
if is_root; then
    skip "unreadable script: refused" "root reads a mode-000 file (DAC override)"
else
    printf 'print(1)\n' >"$WORK/secret.py"
    chmod 000 "$WORK/secret.py"
    refused "unreadable script" 125 setup_error "cannot open script .*[Pp]ermission denied" fix \
        "$WORK/secret.py"
fi
ln -s ok.py "$WORK/link.py"
refused "script is a symlink" 125 setup_error "is a symlink" fix "$WORK/link.py"
mkdir "$WORK/dir.py"
refused "script is a directory" 125 setup_error "not a regular file" fix "$WORK/dir.py"
refused "unknown language" 2 usage_error "cannot tell the language" fix "$WORK/noext"
refused "--lang ruby" 2 usage_error "invalid --lang 'ruby'" - --lang ruby "$WORK/ok.py"
refused "no SCRIPT" 2 usage_error "no SCRIPT given" -
refused "empty SCRIPT" 2 usage_error "empty string" - ''
refused "unknown option" 2 usage_error "unknown option '--frobnicate'" - --frobnicate "$WORK/ok.py"
refused "option without its value" 2 usage_error "'--timeout' needs a value" - --timeout

# ---- limits that do not parse ---------------------------------------------------------------
refused "--timeout 5x" 2 usage_error "invalid --timeout '5x': expected a duration" - \
    --timeout 5x "$WORK/ok.py"
refused "--timeout 0" 2 usage_error "invalid --timeout '0'" - --timeout 0 "$WORK/ok.py"
refused "--memory lots" 2 usage_error "invalid --memory 'lots': expected a size" - \
    --memory lots "$WORK/ok.py"
refused "--memory 1K (too small)" 2 usage_error "invalid --memory '1K'.*from 16M to 1024T" - \
    --memory 1K "$WORK/ok.py"
refused "--pids -1" 2 usage_error "invalid --pids '-1': expected a whole number" - \
    --pids -1 "$WORK/ok.py"
refused "--cpus 0" 2 usage_error "invalid --cpus '0'" - --cpus 0 "$WORK/ok.py"
refused "--disk 12Q" 2 usage_error "invalid --disk '12Q'" - --disk 12Q "$WORK/ok.py"
refused "--nofile 1" 2 usage_error "invalid --nofile '1'" - --nofile 1 "$WORK/ok.py"
# every limit's error gives the accepted range
refused "--timeout 8d (over the range)" 2 usage_error "invalid --timeout '8d'.*from 1ms to 7d" - \
    --timeout 8d "$WORK/ok.py"
refused "--disk 1 (under the range)" 2 usage_error "invalid --disk '1'.*from 1M to 1024T" - \
    --disk 1 "$WORK/ok.py"
refused "--cpus 0.001" 2 usage_error "invalid --cpus '0.001'.*from 0.01 to 1024" - \
    --cpus 0.001 "$WORK/ok.py"
refused "--pids 1" 2 usage_error "invalid --pids '1'.*from 2 to 4194304" - --pids 1 "$WORK/ok.py"
refused "--inodes 3" 2 usage_error "invalid --inodes '3'.*from 16 to" - --inodes 3 "$WORK/ok.py"
refused "--tmp-size 2000T" 2 usage_error "invalid --tmp-size '2000T'.*from 1M to 1024T" - \
    --tmp-size 2000T "$WORK/ok.py"
refused "--output-limit 0" 2 usage_error "invalid --output-limit '0'.*from 1 byte to 1T" - \
    --output-limit 0 "$WORK/ok.py"
refused "--file-size 0" 2 usage_error "invalid --file-size '0'.*from 1 byte" - \
    --file-size 0 "$WORK/ok.py"
refused "--cpu-time 8d" 2 usage_error "invalid --cpu-time '8d'.*from 0 \(no limit\) to 7d" - \
    --cpu-time 8d "$WORK/ok.py"
refused "--env without =" 2 usage_error "invalid --env 'NOVALUE'" - --env NOVALUE "$WORK/ok.py"
refused "--without unknown" 2 usage_error "invalid --without 'foo'" - --without foo "$WORK/ok.py"

# ---- interpreters ---------------------------------------------------------------------------
refused "--python not found" 127 setup_error "python interpreter '/nonexistent/python3' not found" fix \
    --python /nonexistent/python3 "$WORK/ok.py"
printf '#!/bin/sh\n' >"$WORK/notexec"
chmod 644 "$WORK/notexec"
refused "--python not executable" 126 setup_error "is not an executable file" - \
    --python "$WORK/notexec" "$WORK/ok.py"
refused "--node not found" 127 setup_error "node interpreter '/nonexistent/node' not found" fix \
    --node /nonexistent/node "$WORK/ok.js"

# ---- --workspace ------------------------------------------------------------------------------
mkdir -m 0700 "$WORK/realws"
echo keep >"$WORK/realws/keep.txt"
ln -s realws "$WORK/wslink"
refused "--workspace is a symlink" 2 usage_error "workspace '[^']*wslink' is a symlink" fix \
    --workspace "$WORK/wslink" "$WORK/ok.py"
is "$(ls -A "$WORK/realws")" keep.txt "--workspace symlink: the target directory holds only what it held"
is "$(stat -c %u "$WORK/realws/keep.txt")" "$(id -u)" "--workspace symlink: the target's file is still ours"

mkdir -m 0700 "$WORK/sharedws"
chmod 0777 "$WORK/sharedws"
refused "--workspace is other-writable" 2 usage_error "writable by group or others" fix \
    --workspace "$WORK/sharedws" "$WORK/ok.py"
is "$(stat -c %a "$WORK/sharedws")" 777 "--workspace other-writable: its mode was left alone"
mkdir -m 0700 "$WORK/groupws"
chmod 0770 "$WORK/groupws"
refused "--workspace is group-writable" 2 usage_error "writable by group or others" fix \
    --workspace "$WORK/groupws" "$WORK/ok.py"

# A root caller may hand over any user's directory (it is idmapped to its owner, see
# test-workspace.sh); an unprivileged caller only its own.
if ! is_root && [ "$(stat -c %u "$AB_SRCDIR/examples")" != "$(id -u)" ]; then
    notmine=$AB_SRCDIR/examples
    before_nm=$(find "$notmine" -printf '%p %m %U %s %T@\n' | sort | tr '\n' '|')
    refused "--workspace not owned by the caller" 2 usage_error "is owned by uid [0-9]+, not by you" fix \
        --workspace "$notmine" "$WORK/ok.py"
    is "$(find "$notmine" -printf '%p %m %U %s %T@\n' | sort | tr '\n' '|')" "$before_nm" \
        "--workspace not owned: that directory is untouched"
elif is_root; then
    skip "--workspace not owned by the caller" "root may use any user's directory (idmapped)"
else
    skip "--workspace not owned by the caller" "no directory owned by someone else to try"
fi
refused "--workspace missing" 125 setup_error "workspace '[^']*nowhere'" fix \
    --workspace "$WORK/nowhere" "$WORK/ok.py"
refused "--input with --workspace" 2 usage_error "cannot be combined" - \
    --input "$WORK/ok.py" --workspace "$WORK/realws" "$WORK/ok.py"

# ---- --stdin, --input -------------------------------------------------------------------------
refused "--stdin missing" 125 setup_error "--stdin '[^']*nofile'" - --stdin "$WORK/nofile" "$WORK/ok.py"
refused "--input missing" 125 setup_error "--input '[^']*nofile'" fix --input "$WORK/nofile" "$WORK/ok.py"

# ---- bwrap missing ----------------------------------------------------------------------------
AGENTBOX_BWRAP=/nonexistent
export AGENTBOX_BWRAP
refused "bwrap missing (AGENTBOX_BWRAP=/nonexistent)" 125 setup_error "bubblewrap|bwrap" fix "$WORK/ok.py"
unset AGENTBOX_BWRAP
refute "bwrap missing: the script did not run" grep -q SHOULD-NOT-RUN "$WORK/out"

# ---- --runs-dir -------------------------------------------------------------------------------
mkdir -m 0700 "$WORK/realruns"
ln -s realruns "$WORK/runslink"
refused "--runs-dir is a symlink" 125 setup_error "runs directory '[^']*runslink' is a symlink" - \
    --runs-dir "$WORK/runslink" "$WORK/ok.py"
# issue 2: every bad input names the fix; this one does not (src/supervisor/rundir.c rundir_open_root)
check "--runs-dir is a symlink: the line says how to fix it" grep -q '(fix: ' "$WORK/err"
is "$(ls -A "$WORK/realruns")" "" "--runs-dir symlink: nothing was created in its target"
refused "--runs-dir relative" 2 usage_error "must be an absolute path" - --runs-dir relative/runs "$WORK/ok.py"
refute "--runs-dir relative: nothing was created" test -e relative/runs
mkdir -m 0700 "$WORK/gwruns"
chmod 0777 "$WORK/gwruns"
refused "--runs-dir is other-writable" 125 setup_error "writable by group or others" fix \
    --runs-dir "$WORK/gwruns" "$WORK/ok.py"
is "$(ls -A "$WORK/gwruns")" "" "--runs-dir other-writable: nothing was created in it"
echo x >"$WORK/runsfile"
refused "--runs-dir is a file" 125 setup_error "runsfile" - --runs-dir "$WORK/runsfile" "$WORK/ok.py"
refute "no refused run ran the script" grep -q SHOULD-NOT-RUN "$WORK/out"

# ---- every subcommand has --help; its usage errors are one line and the hint ---------------
for _c in run prepare doctor collect rm gc version; do
    rc=0
    "$AGENTBOX" "$_c" --help >"$WORK/out" 2>"$WORK/err" || rc=$?
    is "$rc" 0 "$_c --help: exit 0"
    check "$_c --help: its usage on stdout" grep -q "^usage: agentbox $_c" "$WORK/out"
    check "$_c --help: nothing on stderr" test ! -s "$WORK/err"
    rc=0
    "$AGENTBOX" help "$_c" >"$WORK/out2" 2>/dev/null || rc=$?
    check "help $_c: the same text" cmp -s "$WORK/out" "$WORK/out2"
done
subcmd_refused() { # LABEL PATTERN ARGS...: exit 2, the error line, then the command's hint
    _label=$1 _pat=$2
    shift 2
    rc=0
    "$AGENTBOX" "$@" >"$WORK/out" 2>"$WORK/err" || rc=$?
    is "$rc" 2 "$_label: exit 2"
    check "$_label: the error names the problem" grep -q -- "$_pat" "$WORK/err"
    is "$(sed -n 2p "$WORK/err")" "Try 'agentbox $1 --help' for more information." "$_label: the hint"
    is "$(wc -l <"$WORK/err")" 2 "$_label: two lines, nothing else"
    check "$_label: nothing on stdout" test ! -s "$WORK/out"
}
subcmd_refused "gc --frob" "unknown option '--frob'" gc --frob
subcmd_refused "gc --older-than (no value)" "value is needed after '--older-than'" gc --older-than
subcmd_refused "gc with an operand" "takes no operands" gc extra
subcmd_refused "doctor --verbose" "unknown option '--verbose'" doctor --verbose
subcmd_refused "collect with one operand" "give RUN_DIR and DIR" collect "$WORK/x"
subcmd_refused "rm without operands" "at least one RUN_DIR" rm
rc=0
"$AGENTBOX" gc --older-than 5x >"$WORK/out" 2>"$WORK/err" || rc=$?
is "$rc" 2 "gc --older-than 5x: exit 2"
check "gc --older-than 5x: names the accepted form" grep -q "invalid --older-than '5x': expected a duration" "$WORK/err"

# ---- root: a runs root the sandbox user cannot reach --------------------------------------------
# Started as root, bwrap runs as the sandbox user and opens RUN/etc by path. Under a 0700 parent
# it cannot: agentbox must either cope or refuse up front with one line and a fix, not pass on
# bwrap's "Can't find source path ...: Permission denied".
if is_root; then
    mkdir -m 0700 "$WORK/private"
    printf 'print("RAN")\n' >"$WORK/ran.py"
    abb 30 --runs-dir "$WORK/private/runs" "$WORK/ran.py"
    if [ "$rc" -eq 0 ]; then
        is "$(cat "$WORK/out")" RAN "runs root under a 0700 parent: the run works"
    else
        is "$rc/$(jr .status)" 125/setup_error "runs root under a 0700 parent: refused as a setup error"
        refute "runs root under a 0700 parent: agentbox names the problem itself (not bwrap's error)" \
            grep -q 'bubblewrap failed\|^bwrap:' "$WORK/err"
        is "$(wc -l <"$WORK/err")" 1 "runs root under a 0700 parent: one line on stderr"
    fi
else
    skip "runs root under a 0700 parent" "only a root caller hands the run to another uid"
fi

done_testing

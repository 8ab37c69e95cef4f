#!/bin/sh
# test-soak.sh -- a short soak (issue 7): 50 runs back to back and 50 with 2 in parallel,
# mixing normal, failing, timed-out and limit-hitting scripts; then nothing may have leaked.
# The long soak (1,000 + 500 runs) is bench/soak.py with its defaults.
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$AB_TESTDIR/integration/lib.sh"

command -v python3 >/dev/null || bail "python3 is required"
out=$WORK/soak.out
rc=0
bounded 600 python3 "$AB_SRCDIR/bench/soak.py" --runs 50 --parallel-runs 50 --parallel 2 \
    --agentbox "$AGENTBOX" >"$out" 2>&1 || rc=$?
while IFS= read -r line; do
    case $line in
    "ok   "*) ok "soak: ${line#ok   }" ;;
    "FAIL "*) not_ok "soak: ${line#FAIL }" ;;
    *) echo "# $line" ;;
    esac
done <"$out"
is "$rc" 0 "soak: exit status 0"
grep -q "^ok   no process of any run is left" "$out" || not_ok "soak: the process check ran"
done_testing

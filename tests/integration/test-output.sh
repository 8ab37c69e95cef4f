#!/bin/sh
# test-output.sh -- issue 15: what the report and agentbox's own stdout carry of the script's
# output. A 50 MB stdout under --output-limit 100M leaves a small report (a head and a tail
# with a marker) and the whole stream in RUN_DIR/stdout, checked byte for byte on the host;
# --on-output-limit truncate (the default since issue 25) lets a flooding script run on (it writes
# a file afterwards) and keeps its last bytes, while kill still stops it; --rm keeps no stream
# file and says so; an excerpt never
# splits a UTF-8 character; --report - puts exactly one JSON document on stdout.
# Every flood is bounded by --output-limit and --timeout, and runs under an outer timeout.
# shellcheck source-path=SCRIPTDIR
# shellcheck source=lib.sh
. "$AB_TESTDIR/integration/lib.sh"

MiB=1048576
num() { case $1 in '' | *[!0-9]*) return 1 ;; esac; }
lt() {
    if num "$1" && num "$2" && [ "$1" -lt "$2" ]; then ok "$3 ($1)"; else not_ok "$3" "got: '$1', want < $2"; fi
}
sha() { sha256sum "$1" | cut -d' ' -f1; }

# ---- 50 MB under --output-limit 100M --------------------------------------------------
# 51200 numbered lines of 1 KiB, then a last line with a two-byte character
cat >"$WORK/big.py" <<'EOF'
import sys
out = sys.stdout.buffer
for i in range(51200):
    out.write(b"%08d " % i + b"z" * 1014 + b"\n")
out.write("the end \u00e9\n".encode())
out.flush()
print("stderr too", file=sys.stderr)
EOF
python3 -c '
import sys
out = sys.stdout.buffer
for i in range(51200):
    out.write(b"%08d " % i + b"z" * 1014 + b"\n")
out.write("the end \u00e9\n".encode())' >"$WORK/big.want"
want_size=$(wc -c <"$WORK/big.want")
abb 180 --output-limit 100M --timeout 120s "$WORK/big.py"
is "$rc" 0 "50 MB stdout under --output-limit 100M: exit 0"
is "$(jr .status)" exited "50 MB stdout: status exited"
lt "$(wc -c <"$WORK/r.json")" $MiB "50 MB stdout: the report is small (< 1 MiB)"
is "$(jr .stdout.captured_bytes)" "$want_size" "50 MB stdout: captured_bytes counts it all"
is "$(jr .stdout.truncated)" false "50 MB stdout: not truncated"
is "$(jr '.stdout.head_bytes + .stdout.tail_bytes + .stdout.elided_bytes')" "$want_size" \
    "50 MB stdout: head_bytes + tail_bytes + elided_bytes = captured_bytes"
is "$(jr '.stdout.head_bytes + .stdout.tail_bytes')" 65536 "50 MB stdout: 64 KiB inline by default"
check "50 MB stdout: the text starts with the stream's first line" \
    jqe '.stdout.text | startswith("00000000 zzz")'
check "50 MB stdout: the text ends with its last line" jqe '.stdout.text | endswith("the end \u00e9\n")'
check "50 MB stdout: the marker names the elided bytes and the stream file" \
    jqe '.stdout.text | test("\n\\[agentbox: [0-9]+ bytes of stdout elided here; all [0-9]+ captured bytes are in [^]]*/stdout\\]\n")'
is "$(jr .stdout.text_lossy)" false "50 MB stdout: the excerpt is valid UTF-8 as it stands"
f=$(jr '.stdout.file.path // empty')
rd=$(jr .run_dir)
is "$f" "$rd/stdout" "50 MB stdout: stdout.file.path is RUN_DIR/stdout"
if [ -n "$f" ] && [ -f "$f" ] && [ ! -L "$f" ]; then
    is "$(wc -c <"$f")" "$want_size" "50 MB stdout: the stream file on the host has every byte"
    is "$(sha "$f")" "$(sha "$WORK/big.want")" "50 MB stdout: the stream file is the script's output, byte for byte"
    is "$(jr .stdout.file.sha256)" "$(sha "$WORK/big.want")" "50 MB stdout: stdout.file.sha256 is its hash"
    is "$(jr .stdout.file.bytes)" "$want_size" "50 MB stdout: stdout.file.bytes"
    is "$(stat -c '%a %u' "$f")" "600 $(id -u)" "50 MB stdout: the stream file is 0600 and the caller's"
else
    not_ok "50 MB stdout: the stream file exists on the host" "path: '$f'"
fi
check "50 MB stdout: the live relay got all of it too" cmp -s "$WORK/out" "$WORK/big.want"
is "$(jr '.stderr.file')" null "50 MB stdout: a short stderr is inline only (file null)"
is "$(jr '.stderr.text')" "stderr too" "50 MB stdout: stderr.text"
refute "50 MB stdout: no stream file for a stream that fit inline" test -e "$rd/stderr"
check "50 MB stdout: the run directory's report.json is as small" test "$(wc -c <"$rd/report.json")" -lt $MiB
rm -f "$WORK/out" "$WORK/big.want"
"$AGENTBOX" rm "$rd" 2>/dev/null || true

# ---- --on-output-limit truncate / kill --------------------------------------------------
# 16 MiB to stdout and 16 MiB to stderr, its last line its own, then a file and an exit status
# of its own
cat >"$WORK/flood.py" <<'EOF'
import os, sys
line = "y" * 1023 + "\n"
for i in range(16 * 1024 - 1):
    sys.stdout.write(line)
    sys.stderr.write(line)
sys.stdout.write("the last line of stdout" + "." * 1000 + "\n")
sys.stderr.write("y" * 1023 + "\n")
sys.stdout.flush()
sys.stderr.flush()
with open("/work/after.txt", "w") as f:
    f.write("ran on\n")
sys.exit(3)
EOF
python3 -c '
import sys
sys.stdout.write(("y" * 1023 + "\n") * 1024)' >"$WORK/first1m"
# issue 25: truncate is the default; the flag says the same
for how in "" "--on-output-limit truncate"; do
# shellcheck disable=SC2086 # $how is words
abb 120 --output-limit 1M $how --timeout 60s "$WORK/flood.py"
[ -z "$how" ] && how="(the default)"
is "$rc" 3 "truncate $how: agentbox exits with the script's own status (3)"
is "$(jr .status)" exited "truncate: status exited (the cap did not end the run)"
is "$(jr .exit_code)" 3 "truncate: exit_code 3"
is "$(jq -c .limits_hit "$WORK/r.json")" '["output-limit"]' "truncate: limits_hit lists output-limit"
is "$(jr .stdout.truncated),$(jr .stderr.truncated)" true,true "truncate: both streams truncated"
is "$(jr .stdout.captured_bytes)" $MiB "truncate: stdout.captured_bytes is the cap"
is "$(jr .stdout.bytes)" $((16 * MiB)) "truncate: stdout.bytes counts all 16 MiB (read and discarded)"
is "$(jr .stderr.bytes)" $((16 * MiB)) "truncate: stderr.bytes counts all 16 MiB"
check "truncate: the message says the run went on" jqe '.message | test("and the run went on")'
check "truncate: limits.output-limit.note names the mode" jqe '.limits."output-limit".note | test("truncate")'
rd=$(jr .run_dir)
is "$(cat "$rd/work/after.txt" 2>/dev/null)" "ran on" "truncate: the script ran on and wrote a file after the flood"
check "truncate: files lists it" jqe '[.files[] | select(.path == "after.txt")] | length == 1'
is "$(wc -c <"$WORK/out")" $((16 * MiB)) "truncate: the live relay went on past the cap (all 16 MiB)"
is "$(sha "$rd/stdout")" "$(sha "$WORK/first1m")" "truncate: RUN_DIR/stdout holds the first MiB, byte for byte"
is "$(jr .stderr.file.sha256)" "$(sha "$rd/stderr")" "truncate: stderr.file.sha256 is RUN_DIR/stderr's hash"
check "truncate: the report's text ends with the stream's own last line" \
    jqe '.stdout.text | endswith("the last line of stdout" + ("." * 1000) + "\n")'
check "truncate: the marker says what is in RUN_DIR/stdout and how much was dropped" \
    jqe '.stdout.text | test("the first 1048576 bytes are in [^ ]*/stdout, the [0-9]+ after them \\(past the output limit\\) were dropped\\]")'
is "$(jr '.stdout.head_bytes + .stdout.elided_bytes + .stdout.tail_bytes')" $((16 * MiB)) \
    "truncate: head + elided + tail is the whole stream"
is "$(jr '.stdout.dropped_bytes')" "$(jr '.stdout.bytes - .stdout.captured_bytes - .stdout.tail_bytes')" \
    "truncate: dropped_bytes is what lies between the capture and the tail"
lt "$(jr .agentbox_max_rss_kib)" 65536 "truncate: agentbox held little while 32 MiB went by (KiB)"
keep_report "$WORK/r.json"
done

# kill: an option (issue 25: no longer the default)
abb 120 --output-limit 1M --on-output-limit kill --timeout 60s "$WORK/flood.py"
l="kill"
is "$rc" 137 "$l: the run was SIGKILLed at the cap (exit 137)"
is "$(jr .status)" output_limit "$l: status output_limit"
is "$(jr .stdout.captured_bytes)" $MiB "$l: stdout.captured_bytes is the cap"
lt "$(jr .stdout.bytes)" $((8 * MiB)) "$l: reading stopped soon after the cap"
refute "$l: the script did not run on" test -e "$(jr .run_dir)/work/after.txt"
check "$l: limits.output-limit.note says the run is stopped" \
    jqe '.limits."output-limit".note | test("stopped")'

# ---- --rm: no stream file, and the report says so ------------------------------------------
abb 120 --rm --output-limit 4M --inline-output 1K --timeout 60s "$WORK/big.py"
is "$(jr .stdout.file)" null "--rm: no stream file"
is "$(jr '.stdout.head_bytes + .stdout.tail_bytes')" 1024 "--inline-output 1K: 1 KiB inline"
check "--rm: the marker says the middle was not kept" jqe '.stdout.text | test("elided here and not kept")'
check "--rm: a warning says why" jqe '.warnings | any(test("--rm there is no run directory"))'
check "--rm: the warning is on stderr too" grep -q "warning: the report has only the first and last bytes" "$WORK/err"
is "$(jr .run_dir)" null "--rm: no run directory"

# ---- an excerpt never splits a character -------------------------------------------------
printf 'import sys\nsys.stdout.write("\\u00e9" * 100000 + "\\n")\n' >"$WORK/u8.py"
for cap in 1001 1002 1003 1004; do
    abb 60 --rm --inline-output "$cap" "$WORK/u8.py"
    is "$(jr .stdout.text_lossy)" false "--inline-output $cap over two-byte characters: text_lossy false"
done

# ---- the spec keys and the flag checks ----------------------------------------------------
printf '{"script":"%s","runs_dir":"%s","on_output_limit":"truncate","inline_output":"2K","limits":{"output-limit":"1M","timeout":"60s"}}' \
    "$WORK/flood.py" "$RUNS" >"$WORK/spec.json"
rm -f "$WORK/r.json"
rc=0
bounded 120 "$AGENTBOX" run --report "$WORK/r.json" --spec "$WORK/spec.json" >/dev/null 2>"$WORK/err" || rc=$?
is "$rc" 3 "spec on_output_limit truncate: the script ran to its own exit"
is "$(jr '.stdout.head_bytes + .stdout.tail_bytes')" 2048 "spec inline_output \"2K\": 2 KiB inline"
keep_report "$WORK/r.json"
printf '{"script":"%s","runs_dir":"%s","on_output_limit":"kill","limits":{"output-limit":"1M","timeout":"60s"}}' \
    "$WORK/flood.py" "$RUNS" >"$WORK/spec.json"
rm -f "$WORK/r.json"
rc=0
bounded 120 "$AGENTBOX" run --report "$WORK/r.json" --spec "$WORK/spec.json" >/dev/null 2>"$WORK/err" || rc=$?
is "$rc/$(jr .status)" 137/output_limit "spec on_output_limit kill: the run was stopped at the cap"
keep_report "$WORK/r.json"
for bad in "--inline-output 65M" "--inline-output lots" "--on-output-limit maybe"; do
    # shellcheck disable=SC2086 # $bad is words
    abb 30 $bad "$WORK/u8.py"
    is "$rc" 2 "$bad: usage error (exit 2)"
done
check "--on-output-limit maybe: the message gives the accepted values" grep -q "expected kill or truncate" "$WORK/err"

# ---- --report -: stdout is one JSON document ---------------------------------------------
# one_json FILE: FILE holds exactly one JSON document (nothing before or after it)
one_json() {
    python3 -c 'import json, sys; json.loads(open(sys.argv[1], "rb").read().decode())' "$1" 2>/dev/null
}
cat >"$WORK/talk.py" <<'EOF'
import sys
print('{"not": "the report"}')
print("plain line")
print("to stderr", file=sys.stderr)
EOF
rc=0
bounded 60 "$AGENTBOX" run --runs-dir "$RUNS" --report - "$WORK/talk.py" >"$WORK/rep.out" 2>"$WORK/err" || rc=$?
is "$rc" 0 "--report -: exit 0"
check "--report -: stdout parses as exactly one JSON document" one_json "$WORK/rep.out"
is "$(jq -r .status "$WORK/rep.out" 2>/dev/null)" exited "--report -: that document is the report"
is "$(jq -r .stdout.text "$WORK/rep.out" 2>/dev/null)" '{"not": "the report"}
plain line' "--report -: the script's stdout is in the report"
is "$(jq -r .stdout.relay_dropped_bytes "$WORK/rep.out" 2>/dev/null)" null \
    "--report -: stdout was not relayed (relay_dropped_bytes null)"
is "$(grep -v "^agentbox: warning: \|^agentbox: note: " "$WORK/err")" "to stderr" "--report -: the script's stderr still goes to stderr"
keep_report "$WORK/rep.out"
# the same with the run given as a spec on stdin, and a stream past --inline-output
printf '{"script":"%s","runs_dir":"%s","limits":{"output-limit":"100M","timeout":"120s"}}' \
    "$WORK/big.py" "$RUNS" >"$WORK/bigspec.json"
rc=0
bounded 180 "$AGENTBOX" run --report - --spec - <"$WORK/bigspec.json" >"$WORK/rep.out" 2>"$WORK/err" || rc=$?
is "$rc" 0 "--report - --spec -, 50 MB of stdout: exit 0"
check "--report - --spec -: stdout parses as exactly one JSON document" one_json "$WORK/rep.out"
lt "$(wc -c <"$WORK/rep.out")" $MiB "--report -, 50 MB of stdout: what agentbox printed is small"
check "--report -, 50 MB of stdout: the whole stream is in stdout.file" \
    test "$(wc -c <"$(jq -r '.stdout.file.path // "/dev/null"' "$WORK/rep.out")")" = "$want_size"
keep_report "$WORK/rep.out"

done_testing

#!/bin/sh
# test-origin.sh -- issue 15: every entry of files[] says where it came from, against a listing
# of the workspace taken before the run: script, created, modified, unchanged (unknown only
# past a cap of that listing). Content decides: a file rewritten with the same size and its
# mtime set back is modified; files the walk does not hash (a sparse giant) are compared by
# inode, size, mtime and ctime and say so (origin_by "metadata"). With agentbox's tmpfs and
# --input, with --workspace DIR (hostile names, links out of the tree, a FIFO: none followed
# or opened by the listing before the run), and in collected.files. The host side is checked
# against the report.
# shellcheck source-path=SCRIPTDIR
# shellcheck source=lib.sh
. "$AB_TESTDIR/integration/lib.sh"

# origin PATH: files[].origin of PATH in the last report ("" when not listed)
origin() { jq -r --arg p "$1" '.files[] | select(.path == $p) | .origin' "$WORK/r.json"; }
origin_by() { jq -r --arg p "$1" '.files[] | select(.path == $p) | .origin_by // "content"' "$WORK/r.json"; }
NL='
'

# ---- agentbox's tmpfs workspace, --input ---------------------------------------------------
mkdir -p "$WORK/in/sub" "$WORK/in/big"
echo keep >"$WORK/in/keep.txt"
echo touch >"$WORK/in/touched.txt"
echo append >"$WORK/in/append.txt"
printf aaaa >"$WORK/in/same-size.txt"
echo inner >"$WORK/in/sub/inner.txt"
echo gone >"$WORK/in/removed.txt"
printf 'x' >"$WORK/in/becomes-dir"
# sparse giants (100 MiB, 4 KiB allocated): never hashed, so compared by metadata
truncate -s 100M "$WORK/in/big/sparse-keep.bin" "$WORK/in/big/sparse-change.bin"
echo single >"$WORK/single.txt"
cat >"$WORK/agent.py" <<'EOF'
import os
w = "/work/in/"
st = os.stat(w + "same-size.txt")
with open(w + "same-size.txt", "r+b") as f:
    f.write(b"bbbb")                                   # same size ...
os.utime(w + "same-size.txt", ns=(st.st_atime_ns, st.st_mtime_ns))   # ... and mtime
with open(w + "append.txt", "a") as f:
    f.write("more\n")
os.utime(w + "touched.txt")                            # new times, same content
with open(w + "big/sparse-change.bin", "r+b") as f:
    f.seek(50 << 20)
    f.write(b"X")
os.unlink(w + "removed.txt")
os.unlink(w + "becomes-dir")
os.mkdir(w + "becomes-dir")
os.mkdir("/work/out")
with open("/work/out/result.txt", "w") as f:
    f.write("result\n")
with open(w + "sub/new.txt", "w") as f:
    f.write("new\n")
EOF
abb 120 --input "$WORK/in" --input "$WORK/single.txt" --collect "$WORK/coll" "$WORK/agent.py"
is "$rc" 0 "tmpfs: the run exits 0"
is "$(origin agent.py)" script "tmpfs: the script is origin script"
is "$(origin single.txt)" unchanged "tmpfs: a file --input the run left alone is unchanged"
is "$(origin in)" unchanged "tmpfs: an --input directory is unchanged"
is "$(origin in/keep.txt)" unchanged "tmpfs: a file of an --input directory left alone is unchanged"
is "$(origin in/sub/inner.txt)" unchanged "tmpfs: one level down, unchanged"
is "$(origin in/touched.txt)" unchanged "tmpfs: new times, same content: unchanged"
is "$(origin_by in/touched.txt)" content "tmpfs: ... decided by content"
is "$(origin in/append.txt)" modified "tmpfs: appended to: modified"
is "$(origin in/same-size.txt)" modified "tmpfs: rewritten with the same size and mtime: modified (content decides)"
is "$(origin in/becomes-dir)" created "tmpfs: a directory where a file was: created"
is "$(origin out)" created "tmpfs: a new directory is created"
is "$(origin out/result.txt)" created "tmpfs: a new file is created"
is "$(origin in/sub/new.txt)" created "tmpfs: a new file in an --input directory is created"
is "$(origin in/removed.txt)" "" "tmpfs: a removed file is not listed"
is "$(origin in/big/sparse-keep.bin)" unchanged "tmpfs: a sparse giant left alone is unchanged"
is "$(origin_by in/big/sparse-keep.bin)" metadata "tmpfs: ... decided by metadata (never hashed)"
is "$(origin in/big/sparse-change.bin)" modified "tmpfs: a sparse giant written to is modified"
is "$(origin_by in/big/sparse-change.bin)" metadata "tmpfs: ... decided by metadata"
check "tmpfs: every entry of files[] has an origin" jqe '[.files[] | select(.origin == null)] | length == 0'
check "tmpfs: files_summary.pre_run is the listing before the run, complete" \
    jqe '.files_summary.pre_run.truncated == false and .files_summary.pre_run.entries >= 10'
check "--collect: collected.files carry origins too" \
    jqe '[.collected.files[] | select(.path == "out/result.txt" and .origin == "created")] | length == 1'
# the host side: what the report calls unchanged is what went in
ws=$(jr .workspace)
check "host: an unchanged file's copy equals the input" cmp -s "$ws/in/keep.txt" "$WORK/in/keep.txt"
refute "host: a modified file's copy differs from the input" cmp -s "$ws/in/same-size.txt" "$WORK/in/same-size.txt"
is "$(jr '.files[] | select(.path == "in/keep.txt") | .sha256')" "$(sha256sum "$WORK/in/keep.txt" | cut -d' ' -f1)" \
    "host: an unchanged file's sha256 is the input's"

# --code: the script is a file agentbox wrote into the workspace
rm -f "$WORK/r.json"
rc=0
bounded 60 "$AGENTBOX" run --runs-dir "$RUNS" --report "$WORK/r.json" --lang python \
    --code 'open("/work/made.txt", "w").write("x")' >/dev/null 2>"$WORK/err" || rc=$?
is "$(origin script.py)" script "--code: the script file agentbox wrote is origin script"
is "$(origin made.txt)" created "--code: what it made is created"
keep_report "$WORK/r.json"

# ---- --workspace DIR, hostile -------------------------------------------------------------
D=$WORK/wsdir
mkdir -p "$D/sub"
chmod 755 "$D"
echo data >"$D/data.txt"
echo old >"$D/sub/old.txt"
printf 'evil\n' >"$D/name${NL}with newline"
printf 'esc\n' >"$D/$(printf 'e\033]0;x\007')"
ln -s /etc/passwd "$D/escape-link"
ln -s /etc "$D/etc-dir-link"
mkfifo "$D/fifo"
cat >"$D/job.py" <<'EOF'
import os
with open("/work/data.txt", "a") as f:
    f.write("more\n")
with open("/work/made.txt", "w") as f:
    f.write("made\n")
os.unlink("/work/escape-link")
os.symlink("data.txt", "/work/escape-link")
EOF
# as root the workspace is handed over through an idmapped mount: DIR must be the caller's
# and not group/other-writable (all of it, the test's own files too)
chmod -R go-w "$D"
passwd_sum=$(sha256sum /etc/passwd | cut -d' ' -f1)
abb 120 --workspace "$D" "$D/job.py"
if [ "$rc" -eq 125 ] && jqe '.message | test("idmap")'; then
    skip "--workspace origins" "this kernel or filesystem cannot idmap --workspace: $(jr .message)"
else
    is "$rc" 0 "--workspace: the run exits 0 (the listing before it did not block on the FIFO)"
    is "$(origin job.py)" script "--workspace: a script inside DIR is origin script"
    is "$(origin data.txt)" modified "--workspace: appended to: modified"
    is "$(origin sub/old.txt)" unchanged "--workspace: untouched: unchanged"
    is "$(origin sub)" unchanged "--workspace: a directory that was there: unchanged"
    is "$(origin made.txt)" created "--workspace: new: created"
    is "$(origin 'name\x0awith newline')" unchanged "--workspace: a name with a newline, escaped, unchanged"
    is "$(origin 'e\x1b]0;x\x07')" unchanged "--workspace: a name with an escape sequence, escaped, unchanged"
    is "$(origin etc-dir-link)" unchanged "--workspace: a link to /etc, never followed, unchanged"
    is "$(jq '[.files[] | select(.path | startswith("etc-dir-link/"))] | length' "$WORK/r.json")" 0 \
        "--workspace: nothing listed through the link to /etc"
    is "$(origin escape-link)" modified "--workspace: a link given another target: modified"
    is "$(origin fifo)" unchanged "--workspace: a FIFO, never opened: unchanged"
    is "$(origin_by fifo)" metadata "--workspace: ... by metadata"
    is "$(sha256sum /etc/passwd | cut -d' ' -f1)" "$passwd_sum" "--workspace: /etc/passwd untouched"
    check "--workspace: files_summary.pre_run complete" jqe '.files_summary.pre_run.truncated == false'
fi

done_testing

#!/bin/sh
# test-workspace.sh -- issue 12: agentbox never changes, chowns or removes anything it did not
# create. --workspace DIR is used in place: as root through an idmapped mount (new files belong
# to DIR's owner), unprivileged as a plain bind; nothing in DIR is chowned or chmodded, the
# script is never copied into DIR, dangerous directories are refused with exit 2, and names
# swapped under agentbox's feet (inside DIR, or DIR itself) change nothing outside it.
# Refusals of system paths run under ../shared/tools/safe-ns (host read-only) as root.
# shellcheck source-path=SCRIPTDIR
# shellcheck source=lib.sh
. "$AB_TESTDIR/integration/lib.sh"

SAFE_NS=$AB_SRCDIR/../shared/tools/safe-ns

# snap DIR...: owner, group, mode, size, mtime and link count of every entry below each DIR,
# directories without size/mtime/nlink (a new file changes those of its parent directory).
snap() {
    find "$@" \( -type d -printf '%p d %U:%G %m\n' \) -o \
        \( ! -type d -printf '%p %y %U:%G %m %s %T@ %n\n' \) | sort
}

# ---- a tree of several owners and modes, used in place -----------------------------------------
mk_tree() { # DIR OWNER: DIR with what the issue lists, owned by OWNER (root callers only)
    _d=$1
    mkdir -m 0755 "$_d"
    echo data >"$_d/plain.txt"
    printf 'secret\n' >"$_d/private.txt"
    chmod 0600 "$_d/private.txt"
    cp /usr/bin/true "$_d/suid-true"
    chmod 4755 "$_d/suid-true"
    ln -s "$OUTSIDE/target.txt" "$_d/link-out"
    ln "$OUTSIDE/hardlinked.txt" "$_d/hardlink"
    mkfifo "$_d/fifo"
    mkdir -m 0700 "$_d/nested"
    echo deep >"$_d/nested/deep.txt"
    mkdir -m 0755 "$_d/sub"
    echo sub >"$_d/sub/s.txt"
    if is_root; then
        chown -R "$2" "$_d"
        chmod 4755 "$_d/suid-true" # chown cleared it
        echo other >"$_d/other-owner.txt"
        chown 12345:12345 "$_d/other-owner.txt"
        echo rootfile >"$_d/root-owned.txt"
        chown 0:0 "$_d/root-owned.txt"
    fi
}

cat >"$WORK/readall.py" <<'EOF'
import os, stat
read = 0
for dirpath, dirs, files in os.walk("/work"):
    for f in files:
        p = os.path.join(dirpath, f)
        st = os.lstat(p)
        if stat.S_ISREG(st.st_mode):
            try:
                open(p, "rb").read()
                read += 1
            except OSError:
                pass
open("/work/new.txt", "w").write("new\n")
os.mkdir("/work/newdir")
open("/work/newdir/inner.txt", "w").write("inner\n")
if os.path.isdir("/work/sub"):
    open("/work/sub/added.txt", "w").write("added\n")
print("READ", read)
print("ME", os.getuid())
EOF

OUTSIDE=$WORK/outside
mkdir -m 0755 "$OUTSIDE"
echo target >"$OUTSIDE/target.txt"
echo hard >"$OUTSIDE/hardlinked.txt"

workspace_case() { # LABEL OWNER
    _label=$1
    _ws=$WORK/ws-$1
    mk_tree "$_ws" "$2"
    _before=$(snap "$_ws" "$OUTSIDE")
    touch "$WORK/before-run"
    abb 60 --workspace "$_ws" "$WORK/readall.py"
    is "$rc" 0 "$_label: the run exits 0"
    check "$_label: the script read the regular files" hasre '^READ [1-9]'
    # every pre-existing entry (and the outside files) exactly as it was
    _after=$(snap "$_ws" "$OUTSIDE" | grep -v -e '/new.txt ' -e '/newdir' -e '/sub/added.txt ')
    if [ "$_after" = "$_before" ]; then ok "$_label: every pre-existing entry and the outside files are unchanged"; else
        not_ok "$_label: every pre-existing entry and the outside files are unchanged" \
            "$(printf '%s\n%s\n' "$_before" "$_after" | sort | uniq -u | head -n 6 | tr '\n' '|')"
    fi
    _owner=$(stat -c %u:%g "$_ws")
    is "$(stat -c %u:%g "$_ws/new.txt" 2>/dev/null)" "$_owner" "$_label: a new file belongs to DIR's owner ($_owner)"
    is "$(stat -c %u:%g "$_ws/newdir" 2>/dev/null)" "$_owner" "$_label: a new directory belongs to DIR's owner"
    is "$(stat -c %u:%g "$_ws/newdir/inner.txt" 2>/dev/null)" "$_owner" "$_label: a nested new file belongs to DIR's owner"
    is "$(stat -c %u:%g "$_ws/sub/added.txt" 2>/dev/null)" "$_owner" "$_label: a file added to a subdirectory belongs to DIR's owner"
    is "$(find "$_ws" -user "$(jr .sandbox_host_uid)" ! -user "${_owner%%:*}" | head -n 3 | tr '\n' ' ')" "" \
        "$_label: nothing in DIR belongs to the sandbox uid"
    is "$(find "$_ws" -perm /6000 -cnewer "$WORK/before-run" | head -n 3 | tr '\n' ' ')" "" \
        "$_label: nothing new carries a setuid/setgid bit"
    refute "$_label: the script (outside DIR) was not copied into DIR" test -e "$_ws/readall.py"
    check "$_label: the report lists the new file" jqe '[.files[].path] | index("new.txt")' "$WORK/r.json"
}

if is_root; then
    workspace_case root-owned 0:0
    workspace_case user-owned 65534:65534
    is "$(jr .workspace_mode)" idmapped "root: the report says the workspace is idmapped"
else
    workspace_case own "$(id -u):$(id -g)"
    is "$(jr .workspace_mode)" bind "user: the report says the workspace is a plain bind"
fi

# A script outside DIR runs from a read-only copy at /.agentbox/script; one inside runs in place.
mkdir -m 0755 "$WORK/ws-where"
printf 'import os, sys\nprint("FILE", __file__)\nprint("CWD", os.getcwd())\n' >"$WORK/where.py"
cp "$WORK/where.py" "$WORK/ws-where/inside.py"
abb 60 --workspace "$WORK/ws-where" "$WORK/where.py"
check "a script outside DIR runs from /.agentbox/script" has "FILE /.agentbox/script/where.py"
check "its working directory is /work" has "CWD /work"
is "$(ls -A "$WORK/ws-where")" inside.py "DIR holds only what it held"
abb 60 --workspace "$WORK/ws-where" "$WORK/ws-where/inside.py"
check "a script inside DIR runs in place" has "FILE /work/inside.py"

# ---- what the run leaves: no setuid/setgid bit, nothing group/world-writable that it made so --
# (seccomp refuses the s-bits; --without seccomp shows the post-run strip on its own). Bits an
# entry had before the run stay, also where the script wrote.
SWS=$WORK/ws-strip
mkdir -m 0755 "$SWS" "$SWS/old-dir" "$SWS/shared"
chmod 2775 "$SWS/shared"
echo old >"$SWS/old.txt"
chmod 0644 "$SWS/old.txt"
cat >"$WORK/loosen.py" <<'EOF'
import os, shutil
os.umask(0)
os.mkdir("/work/open-dir", 0o777)
os.chmod("/work/open-dir", 0o777)
open("/work/open.txt", "w").write("x")
os.chmod("/work/open.txt", 0o666)
os.chmod("/work/old.txt", 0o666)
os.chmod("/work/old-dir", 0o777)
open("/work/shared/in-shared.txt", "w").write("x")
shutil.copy("/usr/bin/true", "/work/sp")
for m in (0o4755, 0o2755):
    try:
        os.chmod("/work/sp", m)
        print("CHMOD", oct(m), "ok")
    except OSError as e:
        print("CHMOD", oct(m), e.errno)
os.chmod("/work", 0o777)
EOF
for mode in default without-seccomp; do
    if [ $mode = default ]; then abb 60 --workspace "$SWS" "$WORK/loosen.py"; else
        abb 60 --without seccomp --workspace "$SWS" "$WORK/loosen.py"; fi
    is "$rc" 0 "strip ($mode): the run exits 0"
    is "$(find "$SWS" -perm /6000 ! -path "$SWS/shared" | tr '\n' ' ')" "" \
        "strip ($mode): nothing in DIR has a setuid/setgid bit afterwards"
    is "$(find "$SWS" -perm /022 ! -path "$SWS/shared" | tr '\n' ' ')" "" \
        "strip ($mode): nothing the run made group/world-writable stays so (DIR itself included)"
    is "$(stat -c %a "$SWS/shared")" 2775 "strip ($mode): a setgid, group-writable directory the script wrote in keeps its mode"
    check "strip ($mode): the report flags what it stripped" \
        jqe '[.files[] | select((.flags // []) | index("stripped"))] | length > 0' "$WORK/r.json"
    if [ -n "$SWS" ] && [ -d "$SWS/old-dir" ]; then
        rm -rf "${SWS:?}/open-dir" "${SWS:?}/open.txt" "${SWS:?}/sp" "${SWS:?}/shared/in-shared.txt"
        chmod 0644 "$SWS/old.txt"
        chmod 0755 "$SWS/old-dir" "$SWS"
    fi
done
check "strip (without seccomp): the script could set the bit inside (so the strip was tested)" \
    has "CHMOD 0o4755 ok"

# The strip is a walk with caps: past the depth cap (or the entry cap, or the time budget) it
# sees nothing, so bits the run set there stay. That must be said, not left silent.
DWS=$WORK/ws-deep
mkdir -m 0755 "$DWS"
cat >"$WORK/deep.py" <<'EOF'
import os
os.chdir("/work")
for i in range(4200):
    os.mkdir("d")
    os.chdir("d")
    if i in (10, 4199):
        os.chmod(".", 0o777)
EOF
abb 120 --workspace "$DWS" "$WORK/deep.py"
is "$rc" 0 "strip past the depth cap: the run exits 0"
is "$(stat -c %a "$DWS/d/d/d/d/d/d/d/d/d/d/d")" 755 "strip past the depth cap: a 0777 directory above the cap is stripped"
check "strip past the depth cap: a warning says the strip stopped and bits may remain" \
    jqe '.warnings | any(test("removal of the bits the run added in --workspace stopped at the depth cap"))' "$WORK/r.json"
rm -rf "${DWS:?}"

# mountinfo (issue 13 item 8): a bind always shows its source's path within its filesystem, so
# with --workspace DIR the sandbox sees DIR's host path on /work's line: a documented exception
# (docs/threats-coverage.md, T35). Nothing else of the host shows: not the runs directory,
# not the test's own directory around DIR.
MI=$WORK/ws-mountinfo
mkdir -m 0755 "$MI"
printf 'print(open("/proc/self/mountinfo").read())\n' >"$WORK/mi.py"
abb 60 --workspace "$MI" "$WORK/mi.py"
check "mountinfo with --workspace: /work's line names DIR (the documented exception)" \
    grep -q " $MI /work " "$WORK/out"
refute "mountinfo with --workspace: the runs directory does not show" grep -qF "$RUNS" "$WORK/out"
is "$(grep -F "$WORK" "$WORK/out" | grep -vc " $MI /work ")" 0 \
    "mountinfo with --workspace: no other line names a path under the test's directory"
abb 60 --input "$WORK/mi.py" "$WORK/mi.py"
refute "mountinfo without --workspace: no path under the test's directory at all" grep -qF "$WORK" "$WORK/out"

# ---- refusals: exit 2, the rule named, nothing touched ----------------------------------------
refuse_ws() { # LABEL PATTERN DIR [AGENTBOX ARGS...]
    _l=$1 _pat=$2 _dir=$3
    shift 3
    abb 30 --rm --workspace "$_dir" "$@" "$WORK/readall.py"
    is "$rc" 2 "--workspace $_l: exit 2"
    check "--workspace $_l: the line names the rule" grep -Eq "refusing --workspace .*($_pat)" "$WORK/err"
    refute "--workspace $_l: the script did not run" has "ME $(id -u)"
}
refuse_ws "the runs directory" "runs directory" "$RUNS"
mkdir -p "$RUNS/inside"
chmod 0755 "$RUNS/inside"
refuse_ws "inside the runs directory" "runs directory" "$RUNS/inside"
mkdir -m 0755 "$WORK/holder"
refuse_ws "a directory holding the runs directory" "runs directory" "$WORK/holder" \
    --runs-dir "$WORK/holder/runs"
mkdir -m 0755 "$WORK/fakehome" "$WORK/fakehome/.ssh"
realhome=$HOME
HOME=$WORK/fakehome
export HOME
abb 30 --rm --workspace "$WORK/fakehome" "$WORK/readall.py"
HOME=$realhome
is "$rc" 2 "--workspace \$HOME itself: exit 2"
check "--workspace \$HOME itself: the rule is named" grep -q 'home directory' "$WORK/err"
refuse_ws "a .ssh directory" "credentials" "$WORK/fakehome/.ssh"
abb 30 --rm --input "$WORK/fakehome/.ssh" "$WORK/readall.py"
is "$rc" 2 "--input ~/.ssh: exit 2"
check "--input ~/.ssh: the rule is named" grep -q 'refusing --input .*credentials' "$WORK/err"
abb 30 --rm --input /etc "$WORK/readall.py"
is "$rc" 2 "--input /etc: exit 2"
abb 30 --rm --input /etc/shadow "$WORK/readall.py"
is "$rc" 2 "--input /etc/shadow: exit 2"

# ---- issue 25: a project's token files are hidden from the run, not a refusal -----------------
mkdir -m 0755 "$WORK/npmproj"
printf 'package-lock=false\n//registry.npmjs.org/:_authToken=SECRET-TOKEN-25\n' >"$WORK/npmproj/.npmrc"
printf '[pypi]\npassword = SECRET-PYPI-25\n' >"$WORK/npmproj/.pypirc"
printf '{"name": "p"}\n' >"$WORK/npmproj/package.json"
chmod 0644 "$WORK/npmproj/.npmrc" "$WORK/npmproj/.pypirc" "$WORK/npmproj/package.json"
npmrc_sum=$(sha256sum <"$WORK/npmproj/.npmrc")
cat >"$WORK/tokens.py" <<'EOF'
import os
for name in (".npmrc", ".pypirc"):
    p = "/work/" + name
    print(name, "content", repr(open(p).read()), "mode", oct(os.stat(p).st_mode & 0o777))
    for op in ("write", "unlink", "rename"):
        try:
            if op == "write":
                open(p, "w").write("mine")
            elif op == "unlink":
                os.unlink(p)
            else:
                os.rename(p, "/work/stolen")
            print(name, op, "WORKED")
        except OSError as e:
            print(name, op, "refused", e.errno)
found = []
for d, _, files in os.walk("/work"):
    for f in files:
        try:
            if b"SECRET-" in open(os.path.join(d, f), "rb").read():
                found.append(f)
        except OSError:
            pass
print("secrets found:", found)
open("/work/out.txt", "w").write("ran\n")
EOF
abb 60 --workspace "$WORK/npmproj" "$WORK/tokens.py"
is "$rc" 0 "--workspace holding a .npmrc and a .pypirc: the run goes ahead"
check "... the files read empty in the sandbox" grep -q "^.npmrc content '' mode 0o444" "$WORK/out"
is "$(grep -c 'WORKED' "$WORK/out")" 0 "... and cannot be written, removed or renamed there"
check "... no token is readable anywhere in /work" grep -qx 'secrets found: \[\]' "$WORK/out"
is "$(jr '.hidden_files | join(",")')" ".npmrc,.pypirc" "... the report lists them in hidden_files"
check "... and sandbox.writable says so" jqe '.sandbox.writable.detail | test("hidden under an empty read-only file: .npmrc, .pypirc")'
is "$(sha256sum <"$WORK/npmproj/.npmrc")" "$npmrc_sum" "... the host's .npmrc is as it was"
is "$(cat "$WORK/npmproj/out.txt" 2>/dev/null)" ran "... and the run wrote its own file in DIR"
mkdir -m 0700 "$WORK/npmproj/.ssh"
refuse_ws "a project holding a .ssh directory" "credentials" "$WORK/npmproj"
rmdir "$WORK/npmproj/.ssh"

# --input through another user's symlink (issue 24): a root caller names a file under a
# directory someone else owns; that user points a symlink on the way at root's own files. Only
# symlinks owned by root or by the caller are followed on the way, as for --workspace.
if is_root; then
    mkdir -m 0700 "$WORK/rootonly"
    printf 'root secret %s\n' "$$" >"$WORK/rootonly/data.txt"
    mkdir -m 0755 "$WORK/theirs"
    ln -s "$WORK/rootonly" "$WORK/theirs/data"
    chown -h nobody "$WORK/theirs/data" "$WORK/theirs"
    printf '%s\n' 'import os' 'print("IN", sorted(os.listdir(".")))' \
        'if os.path.exists("data.txt"):' '    print("DATA", open("data.txt").read().strip())' \
        >"$WORK/showin.py"
    abb 30 --rm --input "$WORK/theirs/data/data.txt" "$WORK/showin.py"
    is "$rc" 2 "--input through a symlink another user owns: exit 2, nothing runs"
    check "... the message names the symlink and its owner" \
        grep -q "passes through the symlink 'data', owned by uid 65534" "$WORK/err"
    refute "... and root's file never reached the sandbox" grep -q "root secret" "$WORK/out"
    chown -h root "$WORK/theirs/data"
    abb 30 --rm --input "$WORK/theirs/data/data.txt" "$WORK/showin.py"
    is "$rc|$(grep '^DATA' "$WORK/out")" "0|DATA root secret $$" "... one root owns is followed"
else
    skip "--input through a symlink another user owns" "needs root to make another user's symlink"
fi

if is_root && [ -x "$SAFE_NS" ] && [ -x "$AGENTBOX" ]; then
    # The scratch tree lives outside /tmp and /var/tmp (safe-ns replaces those with tmpfs).
    SCR=$(mktemp -d /var/lib/agentbox-wstest.XXXXXX)
    trap 'rm -rf --one-file-system "$SCR"; _cleanup' EXIT
    chmod 0755 "$SCR"
    cp "$WORK/readall.py" "$SCR/x.py"
    cat >"$SCR/refusals.sh" <<'EOF'
# runs inside safe-ns: the host is read-only; prints "PATH RC" per attempt
ab=$1 scr=$2
for d in / /usr /etc /var /boot /proc /sys /dev /run /home /root /srv /opt /tmp /var/tmp \
    /usr/lib /usr/local /etc/ssh /dev/shm /var/lib /bin /mnt; do
    "$ab" run --rm --runs-dir "$scr/runs" --workspace "$d" "$scr/x.py" >/dev/null 2>"$scr/err"
    echo "$d $? $(head -n1 "$scr/err" | sed 's/.*: it is //; s/ (fix:.*//')"
done
mkdir -p "$scr/mnt" && mount -t tmpfs -o mode=0755 tmpfs "$scr/mnt"
"$ab" run --rm --runs-dir "$scr/runs" --workspace "$scr/mnt" "$scr/x.py" >/dev/null 2>"$scr/err"
echo "MOUNT $? $(head -n1 "$scr/err" | sed 's/.*: it is //; s/ (fix:.*//')"
mkdir -p "$scr/mnt/sub"
"$ab" run --rm --runs-dir "$scr/runs" --workspace "$scr/mnt/sub" "$scr/x.py" >/dev/null 2>"$scr/err"
echo "UNDERMOUNT $? $(tail -n1 "$scr/err" | head -c 200)"
# ramfs cannot be idmapped: a root caller's run is refused with the reason and the choices
mkdir -p "$scr/ram" && mount -t ramfs -o mode=0755 ramfs "$scr/ram" && mkdir -p "$scr/ram/ws"
chown 65534:65534 "$scr/ram/ws"
"$ab" run --rm --runs-dir "$scr/runs" --workspace "$scr/ram/ws" "$scr/x.py" >/dev/null 2>"$scr/err"
echo "NOIDMAP $? $(head -n1 "$scr/err" | head -c 400)"
echo "NOIDMAPLS $(ls -A "$scr/ram/ws" | wc -l)"
EOF
    "$SAFE_NS" "$SCR" sh "$SCR/refusals.sh" "$AGENTBOX" "$SCR" >"$SCR/out" 2>&1
    ns_rc=$?
    if [ "$ns_rc" = 99 ]; then
        not_ok "safe-ns could make a read-only namespace" "$(head -n 3 "$SCR/out")"
    else
        while read -r d got why; do
            case $d in
            MOUNT) is "$got" 2 "--workspace on a mount point: exit 2 ($why)" ;;
            UNDERMOUNT) is "$got" 0 "--workspace in a tmpfs mount (idmapped tmpfs): runs ($why)" ;;
            NOIDMAP)
                is "$got" 125 "--workspace on ramfs (no idmapped mounts): refused, exit 125"
                case $why in
                *"cannot make an idmapped mount"*"uid 65534"*"--input"*"--collect"*)
                    ok "--workspace on ramfs: the line gives the reason and the alternatives" ;;
                *) not_ok "--workspace on ramfs: the line gives the reason and the alternatives" "got: $why" ;;
                esac
                ;;
            NOIDMAPLS) is "$got" 0 "--workspace on ramfs: nothing was written into DIR" ;;
            *) is "$got" 2 "--workspace $d (host read-only): exit 2 ($why)" ;;
            esac
        done <"$SCR/out"
    fi
else
    skip "--workspace on / and the system directories (read-only host)" "needs root and ../shared/tools/safe-ns"
fi

# ---- races -------------------------------------------------------------------------------------
# A canary tree outside every workspace, owned by the workspace's owner, whose modes a racer keeps
# refreshing (so a walk that strayed into it would find entries "changed during the run").
CANARY=$WORK/canary
mkdir -m 0755 "$CANARY"
for i in 1 2 3 4 5; do echo "c$i" >"$CANARY/f$i"; done
cp /usr/bin/true "$CANARY/suid"
chmod 0666 "$CANARY"/f*
chmod 4755 "$CANARY/suid"
mkdir -m 0777 "$CANARY/open"
canary_snap() { find "$CANARY" -printf '%p %U:%G %m %s\n' | sort; }
# (a canary dir 0777 and files 0666/4755: a post-run walk that strayed into it would strip them)
canary_before=$(canary_snap)

# (a) a directory inside DIR swapped for a symlink to the canary while runs set up and collect
RWS=$WORK/ws-race
mkdir -m 0755 "$RWS" "$RWS/d"
echo x >"$RWS/d/x"
cat >"$WORK/race-in.py" <<'EOF'
import os
for i in range(200):
    open("/work/d/w%d" % (i % 5), "w").write("x")
EOF
(
    i=0
    while [ ! -e "$WORK/stop-a" ] && [ $i -lt 20000 ]; do
        mv "$RWS/d" "$RWS/d.real" 2>/dev/null && ln -s "$CANARY" "$RWS/d" 2>/dev/null
        chmod 0666 "$CANARY"/f* 2>/dev/null # a fresh ctime: "changed during the run"
        chmod 4755 "$CANARY/suid" 2>/dev/null
        rm -f "$RWS/d" 2>/dev/null
        mv "$RWS/d.real" "$RWS/d" 2>/dev/null
        i=$((i + 1))
    done
) &
racer=$!
n=0
while [ $n -lt 15 ]; do
    abb 60 --rm --workspace "$RWS" "$WORK/race-in.py"
    n=$((n + 1))
done
: >"$WORK/stop-a"
wait "$racer"
is "$(canary_snap)" "$canary_before" "a directory swapped for a symlink during 15 runs: the canary tree is untouched"
is "$(find "$CANARY" -name 'w*' | head -n 3 | tr '\n' ' ')" "" "nothing was written into the canary"

# (b) the --workspace name itself swapped between check and use
NWS=$WORK/ws-name
mkdir -m 0755 "$NWS"
printf 'open("/work/planted.txt", "w").write("x")\n' >"$WORK/plant.py"
(
    i=0
    while [ ! -e "$WORK/stop-b" ] && [ $i -lt 20000 ]; do
        mv "$NWS" "$NWS.real" 2>/dev/null && ln -s "$CANARY" "$NWS" 2>/dev/null
        rm -f "$NWS" 2>/dev/null
        mv "$NWS.real" "$NWS" 2>/dev/null
        i=$((i + 1))
    done
) &
racer=$!
n=0 ran=0 refused=0
while [ $n -lt 30 ]; do
    abb 60 --rm --workspace "$NWS" "$WORK/plant.py"
    case $rc in 0) ran=$((ran + 1)) ;; 2 | 125) refused=$((refused + 1)) ;; esac
    n=$((n + 1))
done
: >"$WORK/stop-b"
wait "$racer"
ok "the --workspace name swapped during 30 runs: $ran ran, $refused refused"
is "$(canary_snap)" "$canary_before" "the --workspace name swapped: the canary tree is untouched"
refute "the --workspace name swapped: nothing was planted in the canary" test -e "$CANARY/planted.txt"

done_testing

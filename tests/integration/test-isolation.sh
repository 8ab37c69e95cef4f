#!/bin/sh
# test-isolation.sh -- filesystem, identity and privilege isolation, checked on the host
# (T1, T2, T3, T30, T32, T34, T35, T37): writes outside the workspace fail in Python and Node
# and leave the host untouched; the sandbox sees its own root, hostname, /etc/passwd; no
# capabilities, no_new_privs, no nested user namespace; a root caller's script is not host root
# and cannot open core_pattern; a script named like a bwrap option stays a script.
# shellcheck source-path=SCRIPTDIR
# shellcheck source=lib.sh
. "$AB_TESTDIR/integration/lib.sh"

# names DIR: the entries of DIR, one per line
names() { find "$1" -mindepth 1 -maxdepth 1 -printf '%f\n' | sort; }

TOKEN=abiso$$x$(date +%s)
HOSTHOME=${HOME:-/root}
CANARY=$WORK/canary.txt
printf 'canary %s\n' "$TOKEN" >"$CANARY"
chmod 666 "$CANARY" # even a world-writable host file must stay out of reach
canary_sum=$(sha256sum "$CANARY" | cut -d' ' -f1)
canary_mtime=$(stat -c %Y "$CANARY")
mkdir -p "$RUNS"
touch "$WORK/stamp"
sleep 1 # so that -newer cannot miss a file made in the same second

# ---- writes outside the workspace: Python and Node ---------------------------------------
# Each target is LABEL=PATH; the scripts print "W LABEL OK" or "W LABEL FAIL ERRNO".
set -- \
    parent=/work/../"$TOKEN" \
    root=/"$TOKEN" \
    usr=/usr/"$TOKEN" \
    usrbin=/usr/bin/"$TOKEN" \
    etc=/etc/"$TOKEN" \
    etcpasswd=/etc/passwd \
    home="$HOSTHOME/$TOKEN" \
    canary="$CANARY" \
    canarydir="$WORK/$TOKEN" \
    runsroot="$RUNS/$TOKEN" \
    proc1root=/proc/1/root/"$TOKEN" \
    proc1cwdup=/proc/1/cwd/../"$TOKEN" \
    selfrootup=/proc/self/root/work/../"$TOKEN" \
    procsys=/proc/sys/kernel/core_pattern \
    hosttmp=/tmp/"$TOKEN" \
    ok=/work/ok-"$TOKEN"
targets="$*"

cat >"$WORK/writes.py" <<'EOF'
import errno, os, sys
for t in sys.argv[1:]:
    label, path = t.split("=", 1)
    try:
        mode = "a" if label in ("canary", "etcpasswd", "procsys") else "x"
        with open(path, mode) as f:
            f.write("pwned\n")
        print("W %s OK" % label)
    except OSError as e:
        print("W %s FAIL %s" % (label, errno.errorcode.get(e.errno, e.errno)))
# the same targets once more as directories and symlinks
for t in sys.argv[1:]:
    label, path = t.split("=", 1)
    if label in ("ok", "hosttmp", "canary", "etcpasswd", "procsys"):
        continue
    for what, fn in (("mkdir", lambda p: os.mkdir(p + "-d")), ("symlink", lambda p: os.symlink("/", p + "-l"))):
        try:
            fn(path)
            print("%s %s OK" % (what.upper(), label))
        except OSError as e:
            print("%s %s FAIL %s" % (what.upper(), label, errno.errorcode.get(e.errno, e.errno)))
EOF
cat >"$WORK/writes.js" <<'EOF'
const fs = require('fs');
for (const t of process.argv.slice(2)) {
  const i = t.indexOf('=');
  const label = t.slice(0, i), path = t.slice(i + 1);
  try {
    const flag = ['canary', 'etcpasswd', 'procsys'].includes(label) ? 'a' : 'wx';
    fs.writeFileSync(path, 'pwned\n', { flag });
    console.log(`W ${label} OK`);
  } catch (e) {
    console.log(`W ${label} FAIL ${e.code}`);
  }
}
EOF

for lang in py js; do
    names "$RUNS" >"$WORK/before.lst"
    # shellcheck disable=SC2086 # targets holds no spaces or globs: word splitting is wanted
    abb 60 "$WORK/writes.$lang" $targets
    is "$rc" 0 "$lang writes: the script ran to the end"
    for t in $targets; do
        label=${t%%=*}
        case $label in
        ok) check "$lang writes: a write to /work works (the control)" has "W ok OK" ;;
        hosttmp) check "$lang writes: /tmp got an answer" grep -q "^W hosttmp " "$WORK/out" ;;
        *) check "$lang writes: $label (${t#*=}) fails inside" grep -q "^W $label FAIL " "$WORK/out" ;;
        esac
    done
    if [ $lang = py ]; then
        refute "py writes: no mkdir or symlink outside /work succeeded" \
            grep -Eq '^(MKDIR|SYMLINK) .* OK$' "$WORK/out"
        check "py writes: the mkdir/symlink attempts ran" grep -q '^SYMLINK parent FAIL' "$WORK/out"
    fi
    ws=$(jr .workspace)
    rd=$(jr .run_dir)
    check "$lang writes: the control file is in the kept workspace" test -f "$ws/ok-$TOKEN"
    is "$(sha256sum "$CANARY" | cut -d' ' -f1)" "$canary_sum" "$lang writes: the canary is unchanged"
    is "$(stat -c %Y "$CANARY")" "$canary_mtime" "$lang writes: the canary was not touched"
    stray=$(find /tmp "$HOSTHOME" "$WORK" /usr /etc -xdev -maxdepth 4 -name "*$TOKEN*" \
        ! -path "$RUNS/run-*/work/ok-$TOKEN" 2>/dev/null | head -n5 | tr '\n' ' ')
    is "$stray" "" "$lang writes: no file named after the token on the host outside the workspace"
    new=$(names "$RUNS" | grep -vxF -e .cache -e .mnt | grep -vxF -f "$WORK/before.lst" | tr '\n' ' ')
    new=${new% }
    is "$new" "$(basename "$rd")" "$lang writes: the only new entry in the runs root is the run dir"
    is "$(names "$rd" | grep -v -x -e .agentbox-run -e report.json -e work -e ro | tr '\n' ' ')" "" \
        "$lang writes: the run dir holds only what agentbox made"
    # $WORK itself: canary, stamp, the scripts, our outputs, the runs root; nothing else
    extra=$(names "$WORK" | grep -v -x -e canary.txt -e stamp -e runs -e out -e err -e r.json -e reports \
        -e writes.py -e writes.js -e before.lst | tr '\n' ' ')
    is "$extra" "" "$lang writes: nothing new next to the canary"
done
sbuid=$(jr .sandbox_host_uid)
# depth 1 only: deeper, other people's concurrent runs (run dirs owned by the same sandbox uid)
# could show up
new_owned=$(find /tmp "$HOSTHOME" -xdev -maxdepth 1 \
    \( -path '/tmp/agentbox-test.*' -o -path '/tmp/agentbox-stage.*' -o -path "$WORK" \) -prune \
    -o -newer "$WORK/stamp" -user "$sbuid" -print 2>/dev/null | head -n5 | tr '\n' ' ')
is "$new_owned" "" "nothing new owned by the sandbox uid in the host /tmp or \$HOME"

# ---- what the sandbox sees ------------------------------------------------------------------
cat >"$WORK/info.py" <<'EOF'
import ctypes, errno, os
def en(e): return errno.errorcode.get(e, str(e))
print("UP_IS_ROOT=%d" % os.path.samestat(os.stat("/work/.."), os.stat("/")))
print("ROOTLS=" + ",".join(sorted(os.listdir("/work/.."))))
print("HOSTNAME=" + os.uname().nodename)
print("ETC_HOSTNAME=" + open("/etc/hostname").read().strip())
print("PASSWD_USERS=" + ",".join(sorted(l.split(":")[0] for l in open("/etc/passwd") if l.strip())))
print("PASSWD_AGENT=" + ":".join(l.strip() for l in open("/etc/passwd") if l.startswith("agent:")))
print("SHADOW=%d" % os.path.lexists("/etc/shadow"))
print("SYS=" + ("absent" if not os.path.lexists("/sys") else str(len(os.listdir("/sys")))))
print("UID=%d GID=%d EUID=%d" % (os.getuid(), os.getgid(), os.geteuid()))
st = {}
for l in open("/proc/self/status"):
    k, _, v = l.partition(":")
    st[k] = v.strip()
for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs"):
    print("%s=%s" % (k, st.get(k)))
try:
    fd = os.open("/proc/sys/kernel/core_pattern", os.O_WRONLY)
    os.close(fd)
    print("CORE=OK")
except OSError as e:
    print("CORE=" + en(e.errno))
libc = ctypes.CDLL(None, use_errno=True)
for name, flag in (("USERNS", 0x10000000), ("MOUNTNS", 0x00020000), ("NETNS", 0x40000000)):
    r = libc.unshare(flag)
    print("%s=%s" % (name, "OK" if r == 0 else "FAIL " + en(ctypes.get_errno())))
with open("/work/mountinfo.txt", "w") as f:
    f.write(open("/proc/self/mountinfo").read())
with open("/work/created.txt", "w") as f:
    f.write("made by the sandbox\n")
print("DONE")
EOF
abb 60 "$WORK/info.py"
is "$rc" 0 "info: exit 0"
check "info: the script ran to the end" has DONE
check "/work/.. is the sandbox's own root" has UP_IS_ROOT=1
rootls=$(val ROOTLS)
for h in home root var boot mnt srv opt .agentbox-run report.json; do
    case ",$rootls," in
    *",$h,"*) not_ok "/work/.. is not the host: no '$h' in it" "got: $rootls" ;;
    *) ok "/work/.. is not the host: no '$h' in it" ;;
    esac
done
check "hostname is 'sandbox'" has HOSTNAME=sandbox
check "/etc/hostname says 'sandbox'" has ETC_HOSTNAME=sandbox
check "/etc/passwd is generated: user agent is uid 1000" hasre "^PASSWD_AGENT=agent:x:1000:1000:"
is "$(val PASSWD_USERS)" "agent,nobody,root" "/etc/passwd lists no host users"
hostusers=$(cut -d: -f1 /etc/passwd | grep -v -x -e root -e nobody -e agent | tr '\n' ',')
leaked=$(val PASSWD_USERS | tr ',' '\n' | grep -xF -e "$(printf '%s' "$hostusers" | tr ',' '\n')" || true)
is "$leaked" "" "no host user name from the host's /etc/passwd inside"
check "/etc/shadow is absent" has SHADOW=0
case $(val SYS) in
absent | 0) ok "/sys is absent or empty ($(val SYS))" ;;
*) not_ok "/sys is absent or empty" "got: $(val SYS) entries" ;;
esac
check "the script runs as uid/gid 1000 inside" has "UID=1000 GID=1000 EUID=1000"
for c in CapInh CapPrm CapEff CapBnd CapAmb; do
    is "$(val $c)" 0000000000000000 "$c is all zero"
done
is "$(val NoNewPrivs)" 1 "no_new_privs is set"
case $(val CORE) in
EROFS | EACCES | EPERM) ok "core_pattern cannot be opened for writing ($(val CORE))" ;;
*) not_ok "core_pattern cannot be opened for writing" "got: $(val CORE)" ;;
esac
check "a nested user namespace cannot be created" hasre "^USERNS=FAIL "
check "a new mount namespace cannot be created" hasre "^MOUNTNS=FAIL "
check "a new network namespace cannot be created" hasre "^NETNS=FAIL "

sbuid=$(jr .sandbox_host_uid)
case $sbuid in
'' | null | 0) not_ok "the sandbox's host uid is non-zero" "got: $sbuid" ;;
*) ok "the sandbox's host uid is non-zero ($sbuid)" ;;
esac
if is_root; then
    is "$(jr .sandbox.no_host_root.enforced)" true "root caller: the report says no_host_root"
else
    is "$sbuid" "$(id -u)" "user caller: the sandbox runs as the caller's uid"
fi
ws=$(jr .workspace)
mi=$ws/mountinfo.txt
if [ -f "$mi" ]; then
    # T35: the generated /etc is bound from RUN/etc, so its host path shows in mountinfo
    refute "mountinfo inside does not show the host's \$WORK path ($WORK)" grep -qF "$WORK" "$mi"
    if [ "$HOSTHOME" != / ]; then
        refute "mountinfo inside does not show the host's \$HOME ($HOSTHOME)" \
            grep -qE "[[:space:]]$HOSTHOME(/|[[:space:]])" "$mi"
    fi
    if ! is_root; then
        refute "mountinfo inside does not show the user name ($(id -un))" grep -qF "$(id -un)" "$mi"
    fi
    refute "mountinfo inside does not show the workspace's host path" grep -qF "$(jr .run_dir)" "$mi"
else
    not_ok "mountinfo was saved" "no $mi"
fi

# Files the script makes in --workspace DIR belong to DIR's owner on the host (root: through an
# idmapped mount; unprivileged: the caller, who must own DIR): never to the sandbox uid, and
# DIR itself is never chowned.
mkdir -m 0700 "$WORK/own"
printf 'open("/work/created.txt", "w").write("x")\nimport os\nos.mkdir("/work/d")\n' >"$WORK/own/mk.py"
abb 60 --workspace "$WORK/own" "$WORK/own/mk.py"
if is_root && [ "$rc" = 125 ] && grep -q "cannot make .*idmapped mount" "$WORK/err"; then
    # a host (or a container's root) that cannot idmap refuses, as the README says
    check "--workspace: refused where no idmapped mount can be made, with a fix" \
        grep -q "fix: copy in and out with --input" "$WORK/err"
    skip "--workspace: files belong to DIR's owner" "no idmapped mount here: $(head -c 160 "$WORK/err")"
else
    is "$rc" 0 "--workspace: exit 0"
    is "$(stat -c %u "$WORK/own/created.txt" 2>/dev/null)" "$(id -u)" \
        "a file the script created is owned on the host by the workspace's owner"
    is "$(stat -c %u "$WORK/own/d" 2>/dev/null)" "$(id -u)" \
        "a directory the script created is owned on the host by the workspace's owner"
    is "$(stat -c %u:%a "$WORK/own")" "$(id -u):700" "--workspace itself keeps its owner and mode"
    if is_root; then
        is "$(jr .workspace_mode)" idmapped "root caller: the report says the workspace is idmapped"
    else
        is "$(jr .workspace_mode)" bind "unprivileged caller: the report says the workspace is bound"
    fi
fi

# Node: core_pattern and a nested namespace through the child_process route
cat >"$WORK/core.js" <<'EOF'
const fs = require('fs');
try { fs.closeSync(fs.openSync('/proc/sys/kernel/core_pattern', 'w')); console.log('CORE=OK'); }
catch (e) { console.log('CORE=' + e.code); }
console.log('UID=' + process.getuid());
EOF
abb 60 "$WORK/core.js"
case $(val CORE) in
EROFS | EACCES | EPERM) ok "node: core_pattern cannot be opened for writing ($(val CORE))" ;;
*) not_ok "node: core_pattern cannot be opened for writing" "got: $(val CORE)" ;;
esac
is "$(val UID)" 1000 "node: runs as uid 1000 inside"

# ---- a script named like a bwrap option (T37) ---------------------------------------------
cd "$WORK" || bail "cd $WORK"
cat >"$WORK/--bind=x.py" <<'EOF'
import os, sys
print("BINDSCRIPT-RAN")
print("ARGV=" + "|".join(sys.argv))
print("XPY=%d" % (os.path.lexists("/x.py") or os.path.lexists("/work/x.py")))
print("XMNT=%d" % any("x.py" in l.split()[4] for l in open("/proc/self/mountinfo")))
EOF
abb 60 ./--bind=x.py
is "$rc" 0 "a script named ./--bind=x.py: runs (exit 0)"
check "./--bind=x.py: it ran as a script" has BINDSCRIPT-RAN
check "./--bind=x.py: it is /work/--bind=x.py inside" has "ARGV=/work/--bind=x.py"
check "./--bind=x.py: nothing named x.py exists inside" has XPY=0
check "./--bind=x.py: nothing named x.py is mounted inside" has XMNT=0
is "$(jr .script)" ./--bind=x.py "./--bind=x.py: the report names the script"
abb 60 -- --bind=x.py --ro-bind / /
is "$rc" 0 "'-- --bind=x.py': runs as a script (exit 0)"
check "'-- --bind=x.py': its own options are its arguments" has "ARGV=/work/--bind=x.py|--ro-bind|/|/"
check "'-- --bind=x.py': nothing named x.py exists inside" has XPY=0
check "'-- --bind=x.py': nothing named x.py is mounted inside" has XMNT=0
abb 60 --bind=x.py
is "$rc" 2 "bare --bind=x.py is an unknown agentbox option: usage error"
is "$(jr .status)" usage_error "bare --bind=x.py: status usage_error"
check "bare --bind=x.py: stderr says unknown option" grep -q "unknown option '--bind=x.py'" "$WORK/err"
abb 60 --dry-run -- --bind=x.py
last_sep=$(grep -nx -- -- "$WORK/out" | tail -n1 | cut -d: -f1)
xlines=$(grep -n 'x\.py' "$WORK/out" | tr '\n' ' ')
nlines=$(wc -l <"$WORK/out")
is "$xlines" "$nlines:/work/--bind=x.py " "dry-run: x.py appears once, as the last word, /work/--bind=x.py"
check "dry-run: the script path comes after the last '--'" test "${last_sep:-999999}" -lt "$(wc -l <"$WORK/out")"
is "$(find "$WORK" -xdev -name 'x.py' | tr '\n' ' ')" "" "no file named x.py appeared anywhere under \$WORK"
refute "no x.py in the host's / or /tmp" test -e /x.py -o -e /tmp/x.py
cd / || true

# ---- the curated trees' checks are kept between runs (issue 29) -----------------------------
# A tree found public is not walked again while nothing it rests on changed (RUNS/.cache/
# etc-trees); a file made private or added is seen by the next run. As root: a fake /etc/fonts
# is bound over the host's in a private mount namespace of this test (the host's is untouched).
if is_root && command -v unshare >/dev/null && [ -d /etc/fonts ] && unshare -m true 2>/dev/null; then
    mkdir -p "$WORK/fonts/conf.d" "$WORK/trees-runs"
    printf '<fontconfig/>\n' >"$WORK/fonts/fonts.conf"
    printf 'x\n' >"$WORK/fonts/conf.d/10-test.conf"
    chmod -R a+rX "$WORK/fonts"
    printf 'print("TREES-RAN")\n' >"$WORK/trees.py"
    cat >"$WORK/trees.sh" <<'EOF'
set -u
mount --bind "$WORK/fonts" /etc/fonts || exit 99
run() { # N: one run, its stderr in trees.N.err, the cache file's inode in trees.N.ino
    "$AGENTBOX" run --rm --runs-dir "$WORK/trees-runs" "$WORK/trees.py" >"$WORK/trees.$1.out" \
        2>"$WORK/trees.$1.err"
    echo "run $1: exit $?" >>"$WORK/trees.log"
    stat -c %i "$WORK/trees-runs/.cache/etc-trees" >"$WORK/trees.$1.ino" 2>/dev/null
}
run 1
cp "$WORK/trees-runs/.cache/etc-trees" "$WORK/trees.1.cache"
run 2
chmod o-r "$WORK/fonts/conf.d/10-test.conf"
run 3
chmod o+r "$WORK/fonts/conf.d/10-test.conf"
run 4
printf 'secret\n' >"$WORK/fonts/conf.d/20-new.conf"
chmod 600 "$WORK/fonts/conf.d/20-new.conf"
run 5
EOF
    rc=0
    bounded 120 env WORK="$WORK" AGENTBOX="$AGENTBOX" unshare -m sh "$WORK/trees.sh" || rc=$?
    is "$rc" 0 "trees cache: the runs under a fake /etc/fonts went ahead"
    if grep -qs TREES-RAN "$WORK/trees.5.out"; then
        ok "trees cache: the scripts ran"
    else
        not_ok "trees cache: the scripts ran" "$(cat "$WORK/trees.log" 2>&1)" \
            "$(cat "$WORK/trees.1.err" 2>&1)"
    fi
    check "trees cache: the first run kept what /etc/fonts's verdict rests on" \
        grep -qs '^conf.d/10-test.conf	' "$WORK/trees.1.cache"
    ino1=$(cat "$WORK/trees.1.ino" 2>/dev/null)
    ino2=$(cat "$WORK/trees.2.ino" 2>/dev/null)
    if [ -n "$ino1" ] && [ "$ino1" = "$ino2" ]; then
        ok "trees cache: an unchanged tree is taken from the cache (not walked, not rewritten)"
    else
        not_ok "trees cache: an unchanged tree is taken from the cache (not walked, not rewritten)" \
            "the cache file's inode after run 1: '$ino1', after run 2: '$ino2'"
    fi
    refute "trees cache: no entry left out while the tree is public" \
        grep -qs "left out" "$WORK/trees.2.err"
    check "trees cache: a file made private is seen by the next run" \
        grep -q "host /etc/fonts: a file is not readable by every user (10-test.conf) left out" \
        -s "$WORK/trees.3.err"
    refute "trees cache: made public again, the tree is in again" grep -qs "left out" "$WORK/trees.4.err"
    check "trees cache: a private file added is seen by the next run" \
        grep -q "host /etc/fonts: a file is not readable by every user (20-new.conf) left out" \
        -s "$WORK/trees.5.err"
else
    skip "trees cache: a fake /etc/fonts" "needs root, a host /etc/fonts and unshare -m (a private mount namespace over /etc/fonts)"
fi

done_testing

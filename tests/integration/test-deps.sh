#!/bin/sh
# test-deps.sh -- dependencies (issue 6): `agentbox prepare` builds a Python venv from a wheel
# made here (offline, --no-index --find-links) and a node_modules from the npm registry; the same
# inputs again are a cache hit; `run --env-dir` (the path, or the requirements / package.json it
# came from) imports them offline, read-only. Install scripts are untrusted code: they cannot
# write outside the environment being built, see the caller's secrets or the host's files, or
# smuggle a host path into later runs. --venv / --python VENV/bin/python with
# --system-site-packages, interpreters outside /usr (pyenv, a copied node), and --ro-bind with
# its never-mount list and --allow-bind.
# shellcheck source-path=SCRIPTDIR
# shellcheck source=lib.sh
. "$AB_TESTDIR/integration/lib.sh"

PY=/usr/bin/python3
CACHE=$WORK/cache
# `run --env-dir FILE` has no --cache-dir: both phases find the cache through the environment
AGENTBOX_CACHE_DIR=$CACHE
# prepare's install runs go to the default runs root: keep them in $WORK too
AGENTBOX_RUNS_DIR=$RUNS
export AGENTBOX_CACHE_DIR AGENTBOX_RUNS_DIR
TOKEN=abdeps$$x$(date +%s)

abb() {
    _s=$1
    shift
    abb_core "$_s" --rm "$@"
}
# prep ARGS...: agentbox prepare; $rc, stdout in $WORK/pout, stderr in $WORK/perr, ms in $pms
prep() {
    rc=0
    _t0=$(date +%s%N)
    bounded 300 "$AGENTBOX" prepare "$@" >"$WORK/pout" 2>"$WORK/perr" || rc=$?
    pms=$((($(date +%s%N) - _t0) / 1000000))
}
# treesum DIR: names, types, modes, sizes and content hashes of a tree
treesum() {
    (cd "$1" && find . -printf '%p|%y|%m|%s|%l\n' | LC_ALL=C sort &&
        find . -type f -exec sha256sum {} + | LC_ALL=C sort)
}
# refused LABEL ARGS...: a run with ARGS is refused before anything runs
refused() {
    _l=$1
    shift
    abb 60 "$@" "$WORK/hello.py"
    is "$rc" 125 "$_l: refused with 125"
    is "$(jr .status)" setup_error "$_l: status setup_error"
    check "$_l: the message says it refuses to mount it" grep -q 'refus' "$WORK/r.json"
    refute "$_l: the script did not run" grep -q HELLO "$WORK/out"
}
# rm_left LABEL: every --rm run so far removed its run directory (then clears what is left, so
# that the next check starts clean)
rm_left() {
    _left=$(find "$RUNS" -mindepth 1 -maxdepth 1 -name 'run-*' 2>/dev/null | sed 's|.*/||' | tr '\n' ' ')
    # BUG as root (run.c stage_ro_binds/cleanup_run): the binds staged on RUN_DIR/ro/N are not
    # unmounted before --rm, so the removal stops at them (after deleting the marker)
    is "$_left" "" "$1: --rm left no run directory behind"
    if [ -n "$_left" ]; then
        chmod -R u+rwX "$RUNS" 2>/dev/null
        find "$RUNS" -mindepth 1 -maxdepth 1 -name 'run-*' -exec rm -rf --one-file-system '{}' +
    fi
}
printf 'print("HELLO")\n' >"$WORK/hello.py"

# ---- Python: a wheel built here, prepared offline -----------------------------------------
mkdir "$WORK/wheels"
"$PY" - "$WORK/wheels" <<'EOF'
import base64, hashlib, sys, zipfile
d, name, ver = sys.argv[1], 'abtestpkg', '1.0.0'
info = '%s-%s.dist-info' % (name, ver)
files = {
    name + '/__init__.py': "VALUE = 'abtestpkg-ok'\n",
    info + '/METADATA': 'Metadata-Version: 2.1\nName: %s\nVersion: %s\n' % (name, ver),
    info + '/WHEEL': 'Wheel-Version: 1.0\nGenerator: agentbox-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n',
}
record = []
for path, text in files.items():
    digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b'=')
    record.append('%s,sha256=%s,%d' % (path, digest.decode(), len(text.encode())))
record.append(info + '/RECORD,,')
with zipfile.ZipFile('%s/%s-%s-py3-none-any.whl' % (d, name, ver), 'w') as z:
    for path, text in files.items():
        z.writestr(path, text)
    z.writestr(info + '/RECORD', '\n'.join(record) + '\n')
EOF
check "python: the test wheel was built" test -f "$WORK/wheels/abtestpkg-1.0.0-py3-none-any.whl"
printf 'abtestpkg==1.0.0\n' >"$WORK/req.txt"

prep --python "$WORK/req.txt" --no-index --find-links "$WORK/wheels" --cache-dir "$CACHE"
is "$rc" 0 "prepare --python: exit 0"
sed -n '1,20s/^/# prepare: /p' "$WORK/perr"
PENV=$(tail -n1 "$WORK/pout")
case $PENV in "$CACHE"/*) ok "prepare --python: prints an environment under --cache-dir" ;;
*) not_ok "prepare --python: prints an environment under --cache-dir" "printed: '$PENV'" ;; esac
check "prepare --python: the environment has a venv and a marker" \
    test -x "$PENV/venv/bin/python" -a -f "$PENV/agentbox-env.json"
check "prepare --python: the wheel is installed in it" \
    test -f "$PENV/venv/lib/python3.11/site-packages/abtestpkg/__init__.py" -o \
    -n "$(find "$PENV/venv/lib" -path '*/site-packages/abtestpkg/__init__.py' 2>/dev/null)"

touch "$WORK/again.stamp"
prep --python "$WORK/req.txt" --no-index --find-links "$WORK/wheels" --cache-dir "$CACHE"
is "$rc" 0 "prepare --python again: exit 0"
is "$(tail -n1 "$WORK/pout")" "$PENV" "prepare --python again: the same environment"
check "prepare --python again: stderr says cache hit" grep -q 'cache hit' "$WORK/perr"
# A cache hit does no work: nothing in the environment was written again (asserted on its
# mtimes, not on the wall clock, which a loaded machine stretches).
echo "# prepare --python again: ${pms} ms"
is "$(find "$PENV" -newer "$WORK/again.stamp" | head -n3)" "" \
    "prepare --python again: nothing in the environment was rebuilt"

cat >"$WORK/imp.py" <<'EOF'
import sys, abtestpkg
print('IMPORT', abtestpkg.VALUE)
print('PREFIX', sys.prefix)
print('FILE', abtestpkg.__file__)
EOF
abb 60 --env-dir "$PENV" "$WORK/imp.py"
is "$rc" 0 "run --env-dir PATH (python): exit 0"
check "run --env-dir PATH: the package imports offline" has 'IMPORT abtestpkg-ok'
check "run --env-dir PATH: the venv is active (sys.prefix)" has "PREFIX $PENV/venv"
is "$(jr .sandbox.network.enforced)" true "run --env-dir PATH: the run had no network (offline)"
abb 60 --env-dir "$WORK/req.txt" "$WORK/imp.py"
is "$rc" 0 "run --env-dir req.txt: exit 0"
check "run --env-dir req.txt: finds the prepared environment by content" has 'IMPORT abtestpkg-ok'
check "run --env-dir req.txt: the one prepared variant is used (sys.prefix)" has "PREFIX $PENV/venv"

# The lookup by file matches the run's interpreter, as prepare keyed it: the same Python under
# another name matches; another Python (a copy: its own path, size and mtime) does not.
PYREAL=$(readlink -f "$PY")
abb 60 --env-dir "$WORK/req.txt" --python "$PYREAL" "$WORK/imp.py"
is "$rc" 0 "run --env-dir req.txt --python $PYREAL (the same interpreter): exit 0"
check "run --env-dir req.txt --python $PYREAL: the environment prepared for $PY" has "PREFIX $PENV/venv"
mkdir "$WORK/altpy"
cp "$PYREAL" "$WORK/altpy/python3"
abb 60 --env-dir "$WORK/req.txt" --python "$WORK/altpy/python3" "$WORK/imp.py"
is "$rc" 125 "run --env-dir req.txt --python ANOTHER: no environment matches (125)"
check "run --env-dir req.txt --python ANOTHER: the message names the interpreter" \
    jqe ".message | test(\"no environment prepared from .* for $WORK/altpy/python3\")"
check "run --env-dir req.txt --python ANOTHER: the fix names --interpreter" \
    jqe ".fix | test(\"--interpreter $WORK/altpy/python3\")"
refute "run --env-dir req.txt --python ANOTHER: the script did not run" has 'IMPORT abtestpkg-ok'

# Only the --system-site-packages variant prepared from a file: that one is used.
printf 'abtestpkg==1.0.0\n# the system-site variant only\n' >"$WORK/req-sys.txt"
prep --python "$WORK/req-sys.txt" --system-site-packages --no-index --find-links "$WORK/wheels" \
    --cache-dir "$CACHE"
is "$rc" 0 "prepare --python --system-site-packages: exit 0"
SENV=$(tail -n1 "$WORK/pout")
abb 60 --env-dir "$WORK/req-sys.txt" "$WORK/imp.py"
is "$rc" 0 "run --env-dir FILE, only the system-site variant prepared: exit 0"
check "run --env-dir FILE, only the system-site variant prepared: it is used" has "PREFIX $SENV/venv"

# Both variants prepared from one file: refused, both listed, with the fix.
prep --python "$WORK/req.txt" --system-site-packages --no-index --find-links "$WORK/wheels" \
    --cache-dir "$CACHE"
is "$rc" 0 "prepare --python req.txt --system-site-packages as well: exit 0"
BENV=$(tail -n1 "$WORK/pout")
check "the two variants are two environments" test -n "$BENV" -a "$BENV" != "$PENV"
abb 60 --env-dir "$WORK/req.txt" "$WORK/imp.py"
is "$rc" 2 "run --env-dir req.txt, both variants prepared: refused as a usage error (2)"
is "$(grep -c '^agentbox: ' "$WORK/err")" 1 "both variants: one line on stderr"
check "both variants: the line lists the isolated one" grep -qF "$PENV (isolated)" "$WORK/err"
check "both variants: the line lists the system-site one" \
    grep -qF "$BENV (--system-site-packages)" "$WORK/err"
check "both variants: the line gives the fix" grep -q '(fix: pass the directory agentbox prepare printed' "$WORK/err"
is "$(jr .status)" usage_error "both variants: the report says usage_error"
refute "both variants: the script did not run" has 'IMPORT abtestpkg-ok'
abb 60 --env-dir "$BENV" "$WORK/imp.py"
check "both variants: the directory picks one (system-site)" has "PREFIX $BENV/venv"

cat >"$WORK/wvenv.py" <<'EOF'
import errno, os, sys
import abtestpkg
pkg = os.path.dirname(abtestpkg.__file__)
def attempt(label, f):
    try:
        f()
        print('W', label, 'OK')
    except OSError as e:
        print('W', label, errno.errorcode.get(e.errno, e.errno))
attempt('modify', lambda: open(abtestpkg.__file__, 'a').write('EVIL = 1\n'))
attempt('create', lambda: open(os.path.join(pkg, 'evil.py'), 'w').write('x'))
attempt('remove', lambda: os.remove(abtestpkg.__file__))
attempt('mkdir', lambda: os.mkdir(os.path.join(sys.prefix, 'evil')))
EOF
before=$(treesum "$PENV")
abb 60 --env-dir "$PENV" "$WORK/wvenv.py"
for w in modify create remove mkdir; do
    got=$(sed -n "s/^W $w //p" "$WORK/out")
    case $got in EROFS | EACCES | EPERM) ok "venv read-only: $w fails ($got)" ;;
    *) not_ok "venv read-only: $w fails" "got: '$got'" ;; esac
done
is "$(treesum "$PENV")" "$before" "venv read-only: the environment on the host is unchanged"
rm_left "run --env-dir (python)"

# ---- --venv and --python VENV/bin/python with Debian's packages ----------------------------
mod=
for m in yaml apt_pkg debian; do
    f=$("$PY" -c "import $m; print($m.__file__)" 2>/dev/null) || continue
    case $f in /usr/lib/python3/dist-packages/*)
        mod=$m
        break
        ;;
    esac
done
if [ -z "$mod" ]; then
    for _i in 1 2 3 4 5 6; do
        skip "--venv --system-site-packages check $_i" "no Debian python3-* module (yaml, apt_pkg, debian) in /usr/lib/python3/dist-packages"
    done
elif ! "$PY" -m venv --without-pip --system-site-packages "$WORK/sysvenv" 2>"$WORK/err"; then
    for _i in 1 2 3 4 5 6; do
        skip "--venv --system-site-packages check $_i" "python3 -m venv does not work here (python3-venv missing?)"
    done
else
    printf 'import sys, %s\nprint("MOD", %s.__file__)\nprint("PREFIX", sys.prefix)\n' "$mod" "$mod" \
        >"$WORK/sysmod.py"
    abb 60 --venv "$WORK/sysvenv" "$WORK/sysmod.py"
    is "$rc" 0 "--venv (system-site-packages): exit 0"
    check "--venv: imports Debian's $mod from /usr/lib/python3/dist-packages" \
        grep -q "^MOD /usr/lib/python3/dist-packages/$mod" "$WORK/out"
    check "--venv: the venv is active (sys.prefix)" has "PREFIX $WORK/sysvenv"
    abb 60 --python "$WORK/sysvenv/bin/python" "$WORK/sysmod.py"
    is "$rc" 0 "--python VENV/bin/python: exit 0"
    check "--python VENV/bin/python: imports $mod too" grep -q "^MOD /usr/lib/python3/dist-packages/$mod" "$WORK/out"
    check "--python VENV/bin/python: the venv is active, like --venv" has "PREFIX $WORK/sysvenv"
    rm_left "--venv and --python VENV/bin/python"
fi
# the prepared venv is isolated: no Debian packages in it
if [ -n "$mod" ]; then
    abb 60 --env-dir "$PENV" "$WORK/sysmod.py"
    check "an isolated prepared venv does not see Debian's $mod" grep -q 'ModuleNotFoundError' "$WORK/r.json"
fi

# ---- Node: is-number from the npm registry ------------------------------------------------
mkdir "$WORK/np"
cat >"$WORK/np/package.json" <<'EOF'
{ "name": "abdeps-node", "version": "1.0.0", "private": true,
  "dependencies": { "is-number": "7.0.0" } }
EOF
cat >"$WORK/t.js" <<'EOF'
const isNumber = require('is-number');
console.log('CJS', isNumber(5), isNumber('x'), require.resolve('is-number'));
EOF
cat >"$WORK/t.mjs" <<'EOF'
import isNumber from 'is-number';
console.log('ESM', isNumber(5), isNumber('x'));
EOF
cat >"$WORK/wnm.js" <<'EOF'
const fs = require('fs');
for (const [label, f] of [
  ['modify', () => fs.appendFileSync('/node_modules/is-number/index.js', 'evil()\n')],
  ['create', () => fs.writeFileSync('/node_modules/evil.js', 'x')],
  ['remove', () => fs.unlinkSync('/node_modules/is-number/package.json')],
  ['mkdir', () => fs.mkdirSync('/node_modules/evil')],
]) {
  try { f(); console.log('W', label, 'OK'); } catch (e) { console.log('W', label, e.code); }
}
EOF
prep --node "$WORK/np/package.json" --cache-dir "$CACHE"
NENV=$(tail -n1 "$WORK/pout")
if [ "$rc" -ne 0 ] && grep -qE 'ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ETIMEDOUT|ECONNRESET' "$WORK/perr"; then
    for _i in 1 2 3 4 5 6 7 8 9 10 11; do
        skip "node prepare check $_i" "the npm registry is not reachable from here"
    done
else
    is "$rc" 0 "prepare --node: exit 0"
    sed -n '1,20s/^/# prepare: /p' "$WORK/perr"
    check "prepare --node: is-number is in the environment's node_modules" \
        test -f "$NENV/node_modules/is-number/package.json"
    abb 60 --env-dir "$NENV" "$WORK/t.js"
    is "$rc" 0 "run --env-dir (node, CommonJS): exit 0"
    check "run --env-dir: require('is-number') works offline from /node_modules" \
        has 'CJS true false /node_modules/is-number/index.js'
    abb 60 --env-dir "$NENV" "$WORK/t.mjs"
    is "$rc" 0 "run --env-dir (node, ESM .mjs): exit 0"
    check "run --env-dir: import isNumber from 'is-number' works" has 'ESM true false'
    abb 60 --env-dir "$WORK/np/package.json" "$WORK/t.js"
    check "run --env-dir package.json: finds the prepared environment by content" \
        grep -q '^CJS true false' "$WORK/out"
    before=$(treesum "$NENV")
    abb 60 --env-dir "$NENV" "$WORK/wnm.js"
    for w in modify create remove mkdir; do
        got=$(sed -n "s/^W $w //p" "$WORK/out")
        case $got in EROFS | EACCES | EPERM) ok "/node_modules read-only: $w fails ($got)" ;;
        *) not_ok "/node_modules read-only: $w fails" "got: '$got'" ;; esac
    done
    is "$(treesum "$NENV")" "$before" "/node_modules read-only: the environment on the host is unchanged"
    rm_left "run --env-dir (node)"
fi

# ---- install scripts are untrusted code --------------------------------------------------
# prepare copies only package.json (and its lock) into the install sandbox, and the install's
# network reaches nothing but the registry (through agentbox-netproxy; test-prepnet.sh checks
# that), so the untrusted code here is the root package's own lifecycle scripts: its
# preinstall, and its postinstall (evil.js, carried in package.json), try to reach the host;
# the postinstall writes what it saw into the environment being built (the one place it may
# write). npm runs a dependency's scripts the same way, in the same sandbox.
CANARY=$WORK/canary
printf 'canary %s\n' "$TOKEN" >"$CANARY"
chmod 666 "$CANARY"
printf 'host secret %s\n' "$TOKEN" >"$WORK/hostsecret"
chmod 644 "$WORK/hostsecret"
HOSTHOME=${HOME:-/root}
if as_user && [ -d "$HOSTHOME" ] && [ -w "$HOSTHOME" ]; then
    # the throwaway user's home: a fake key to look for
    mkdir -p "$HOSTHOME/.ssh"
    printf 'ssh key %s\n' "$TOKEN" >"$HOSTHOME/.ssh/id_fake"
fi
mkdir -p "$WORK/evil/package" "$WORK/srv"
cat >"$WORK/evil/package/package.json" <<'EOF'
{ "name": "abevil", "version": "1.0.0", "scripts": { "postinstall": "node evil.js" } }
EOF
cat >"$WORK/evil.js" <<EOF
const fs = require('fs');
const out = {};
function w(label, p) { try { fs.writeFileSync(p, 'pwned\n'); out[label] = 'OK'; } catch (e) { out[label] = e.code || String(e); } }
function r(label, p) { try { out[label] = 'OK ' + fs.readFileSync(p, 'utf8'); } catch (e) { out[label] = e.code || String(e); } }
function l(label, p) { try { out[label] = 'OK ' + JSON.stringify(fs.readdirSync(p)); } catch (e) { out[label] = e.code || String(e); } }
w('canary', '$CANARY');
w('home', '$HOSTHOME/abevil-$TOKEN');
w('tmp', '/tmp/abevil-$TOKEN');
w('cwdup', '$WORK/abevil-$TOKEN');
r('hostsecret', '$WORK/hostsecret');
r('sshkey', '$HOSTHOME/.ssh/id_fake');
l('ssh', '$HOSTHOME/.ssh');
out.env = process.env;
fs.mkdirSync(process.env.INIT_CWD + '/node_modules', { recursive: true });
fs.writeFileSync(process.env.INIT_CWD + '/evil-report.json', JSON.stringify(out, null, 1));
console.log('EVIL postinstall ran');
EOF
cp "$WORK/evil.js" "$WORK/evil/package/evil.js"
(cd "$WORK/evil" && tar czf "$WORK/srv/abevil-1.0.0.tgz" package)
# a loopback HTTP server for the tarball; it logs every request to srv.log and prints its
# port into srv.port
"$PY" - "$WORK/srv" <<'EOF' &
import functools, http.server, os, sys, threading
d = sys.argv[1]
log = open(d + '.log', 'a', buffering=1)
class Logged(http.server.SimpleHTTPRequestHandler):
    def log_message(self, fmt, *a):
        log.write((fmt % a) + '\n')
s = http.server.HTTPServer(('127.0.0.1', 0), functools.partial(Logged, directory=d))
with open(d + '.port.tmp', 'w') as f:
    f.write('%d\n' % s.server_address[1])
os.rename(d + '.port.tmp', d + '.port')
threading.Timer(300, s.shutdown).start()
s.serve_forever()
EOF
SRVPID=$!
_i=0
while [ ! -f "$WORK/srv.port" ] && [ $_i -lt 100 ]; do sleep 0.05; _i=$((_i + 1)); done
PORT=$(cat "$WORK/srv.port" 2>/dev/null)
mkdir "$WORK/np-evil"
jq -n --rawfile js "$WORK/evil.js" --arg canary "$CANARY" '{
  name: "abdeps-evil", version: "1.0.0", private: true, abevilJs: $js,
  scripts: {
    preinstall: ("node -e \"const fs=require(\u0027fs\u0027); let r; try { fs.writeFileSync(\u0027" + $canary + "\u0027, \u0027pwned\u0027); r = \u0027OK\u0027; } catch (e) { r = e.code; } fs.writeFileSync(\u0027root-preinstall.txt\u0027, r + \u0027 \u0027 + (process.env.AB_FAKE_SECRET || \u0027nosecret\u0027));\""),
    postinstall: "node -e \"eval(require(\u0027./package.json\u0027).abevilJs)\"" } }' \
    >"$WORK/np-evil/package.json"
rc=0
AB_FAKE_SECRET="secret-$TOKEN" NPM_TOKEN="npm-$TOKEN" bounded 300 "$AGENTBOX" prepare \
    --node "$WORK/np-evil/package.json" --cache-dir "$CACHE" >"$WORK/pout" 2>"$WORK/perr" || rc=$?
EENV=$(tail -n1 "$WORK/pout")
is "$rc" 0 "evil install: prepare finishes (exit 0)"
sed -n '1,20s/^/# prepare: /p' "$WORK/perr"
check "evil install: the root package's preinstall ran (in the environment)" test -f "$EENV/root-preinstall.txt"
check "evil install: the postinstall ran (in the environment)" test -f "$EENV/evil-report.json"
is "$(cat "$CANARY")" "canary $TOKEN" "evil install: the host canary is untouched"
# What the scripts saw inside (the writes may "succeed" into the sandbox's own /tmp tmpfs, in
# which bwrap made the path to the environment's mount point): only the host side counts.
echo "# root preinstall: $(cat "$EENV/root-preinstall.txt" 2>/dev/null)"
if [ -f "$EENV/evil-report.json" ]; then
    ej() { jq -r "$1" "$EENV/evil-report.json"; }
    echo "# postinstall: $(jq -c 'del(.env)' "$EENV/evil-report.json")"
    refute "evil install: nothing appeared in the host's home" test -e "$HOSTHOME/abevil-$TOKEN"
    refute "evil install: nothing appeared in the host's /tmp (the sandbox has its own)" test -e "/tmp/abevil-$TOKEN"
    refute "evil install: nothing appeared next to the canary" test -e "$WORK/abevil-$TOKEN"
    is "$(ej .hostsecret | cut -c1-2)" EN "evil install: a world-readable host file is not visible ($(ej .hostsecret))"
    is "$(ej .sshkey | cut -c1-2)" EN "evil install: ~/.ssh is not readable ($(ej .sshkey))"
    refute "evil install: the caller's secret variables did not reach the install" \
        grep -q "$TOKEN" "$EENV/evil-report.json" "$EENV/root-preinstall.txt"
    is "$(ej '.env.HOME')" /work "evil install: HOME is the sandbox's /work"
else
    not_ok "evil install: the postinstall's report is in the environment"
fi
is "$(find "$WORK" -newer "$WORK/np-evil/package.json" -name "abevil-$TOKEN" | wc -l)" 0 \
    "evil install: no file named by the postinstall appeared under \$WORK"

# (a) a dependency served from the host's loopback: before issue 13 the install kept the host
# network and npm fetched it (and ran its postinstall); now the registry proxy refuses the
# request and the server on 127.0.0.1 never sees it.
mkdir "$WORK/np-loop"
cat >"$WORK/np-loop/package.json" <<EOF
{ "name": "abdeps-loop", "version": "1.0.0", "private": true,
  "dependencies": { "abevil": "http://127.0.0.1:$PORT/abevil-1.0.0.tgz" } }
EOF
: >>"$WORK/srv.log"
prep --node "$WORK/np-loop/package.json" --cache-dir "$CACHE" --report "$WORK/loop.json"
keep_report "$WORK/loop.json"
sed -n '1,8s/^/# prepare: /p' "$WORK/perr"
is "$rc" 125 "loopback dependency: the install fails (exit 125)"
is "$(wc -l <"$WORK/srv.log")" 0 "loopback dependency: the server on the host's 127.0.0.1 saw no request"
check "loopback dependency: the proxy's refusal is on stderr" \
    grep -q "agentbox-netproxy: refused .*127.0.0.1:$PORT" "$WORK/perr"
is "$(jq -r '.network_proxy.connections_refused' "$WORK/loop.json" 2>/dev/null)" 1 \
    "loopback dependency: the report counts the refusal"
is "$(jq -r '.status' "$WORK/loop.json" 2>/dev/null)" exited \
    "loopback dependency: the report says the installer ran and failed"

# (b) the environment marker: prepare writes agentbox-env.json.tmp in a directory the install
# scripts controlled. A planted symlink there must not be followed (as root: any host file).
printf 'marker canary %s\n' "$TOKEN" >"$WORK/canary2"
chmod 666 "$WORK/canary2"
mkdir "$WORK/np-marker"
cat >"$WORK/np-marker/package.json" <<EOF
{ "name": "abdeps-marker", "version": "1.0.0", "private": true,
  "scripts": { "postinstall": "node -e \"const fs=require('fs'); fs.mkdirSync('node_modules', {recursive: true}); fs.symlinkSync('$WORK/canary2', 'agentbox-env.json.tmp')\"" } }
EOF
prep --node "$WORK/np-marker/package.json" --cache-dir "$CACHE"
# BUG (prepare.c write_marker): json_dump_file() fopen()s the .tmp name, following the symlink
is "$(cat "$WORK/canary2")" "marker canary $TOKEN" \
    "marker: a symlink planted at agentbox-env.json.tmp is not written through (host file intact)"
if [ "$rc" -ne 0 ]; then
    echo "# marker: prepare failed (exit $rc): $(tail -n1 "$WORK/perr")"
fi

# (c) node_modules swapped for a symlink to a host directory: a later run must not mount it
mkdir "$WORK/private"
printf 'private %s\n' "$TOKEN" >"$WORK/private/secret.txt"
chmod 755 "$WORK/private"
chmod 644 "$WORK/private/secret.txt"
mkdir "$WORK/np-swap"
cat >"$WORK/np-swap/package.json" <<EOF
{ "name": "abdeps-swap", "version": "1.0.0", "private": true,
  "scripts": { "postinstall": "node -e \"const fs=require('fs'); fs.mkdirSync('node_modules', {recursive: true}); fs.renameSync('node_modules', 'nm.real'); fs.symlinkSync('$WORK/private', 'node_modules')\"" } }
EOF
prep --node "$WORK/np-swap/package.json" --cache-dir "$CACHE"
SENV=$(tail -n1 "$WORK/pout")
cat >"$WORK/readnm.js" <<'EOF'
const fs = require('fs');
try { console.log('READ', fs.readFileSync('/node_modules/secret.txt', 'utf8').trim()); } catch (e) { console.log('READ', e.code); }
EOF
if [ "$rc" -ne 0 ]; then
    ok "swap: prepare refused an environment whose node_modules is a symlink (exit $rc)"
else
    abb 60 --env-dir "$SENV" "$WORK/readnm.js"
    # BUG (prepare.c read_env_marker + interp.c): node_modules is realpath()ed, so the
    # install script chooses which host directory later runs get mounted at /node_modules
    refute "swap: a run does not get the host directory the install script pointed node_modules at" \
        grep -q "READ private $TOKEN" "$WORK/out"
fi
kill "$SRVPID" 2>/dev/null || true

# ---- issue 13: what a hostile install leaves is never usable on the host -------------------------
# The install runs on a tmpfs of its own; the cache gets agentbox's copy: no setuid/setgid bit,
# nothing group/world-writable, no FIFO, socket or device, no link pointing outside the
# environment, everything owned by the caller.
cat >"$WORK/hostile.js" <<'EOF'
const fs = require('fs'), cp = require('child_process');
const r = {};
const t = (k, f) => { try { f(); r[k] = 'OK'; } catch (e) { r[k] = e.code || String(e); } };
t('copy', () => fs.copyFileSync(process.execPath, '.sp'));
t('suid', () => fs.chmodSync('.sp', 0o4755));
t('sgid', () => fs.chmodSync('.sp', 0o2755));
t('openmode', () => fs.chmodSync('.sp', 0o777));
t('envdir', () => fs.chmodSync('.', 0o777));
t('wwfile', () => { fs.writeFileSync('ww.txt', 'x'); fs.chmodSync('ww.txt', 0o666); });
t('fifo', () => cp.execFileSync('mkfifo', ['fifo']));
t('abslink', () => fs.symlinkSync('/etc/passwd', 'passwd-link'));
t('uplink', () => fs.symlinkSync('../../../../../../etc', 'up-link'));
t('innerlink', () => fs.symlinkSync('package.json', 'inner-link'));
t('usrlink', () => fs.symlinkSync('/usr/bin/env', 'usr-link'));
t('hardlink', () => fs.linkSync('package.json', 'hard-link'));
fs.mkdirSync('node_modules', { recursive: true });
fs.writeFileSync('hostile-report.json', JSON.stringify(r));
EOF
mkdir "$WORK/np-hostile"
jq -n --rawfile js "$WORK/hostile.js" '{ name: "abdeps-hostile", version: "1.0.0", private: true,
  abJs: $js, scripts: { postinstall: "node -e \"eval(require(\u0027./package.json\u0027).abJs)\"" } }' \
    >"$WORK/np-hostile/package.json"
prep --node "$WORK/np-hostile/package.json" --cache-dir "$CACHE" --report "$WORK/hostile-prep.json"
keep_report "$WORK/hostile-prep.json"
is "$rc" 0 "hostile install: prepare finishes (exit 0)"
if is_root; then
    refute "prepare's own defaults: no warning that its tmpfs caps exceed its memory limit" \
        jqe '.warnings | any(test("counted against --memory"))' "$WORK/hostile-prep.json"
fi
HENV=$(tail -n1 "$WORK/pout")
echo "# hostile install saw: $(cat "$HENV/hostile-report.json" 2>/dev/null)"
check "hostile install: its postinstall ran" test -f "$HENV/hostile-report.json"
# the install sandbox has the runs' seccomp rule (issue 13 item 1): the bits never exist
is "$(jq -r '.suid + " " + .sgid' "$HENV/hostile-report.json" 2>/dev/null)" "EPERM EPERM" \
    "hostile install: chmod 4755 and 2755 in the install sandbox -> EPERM (seccomp)"
is "$(find "$HENV" -perm /6000 | tr '\n' ' ')" "" "hostile install: no setuid/setgid bit in the environment"
is "$(find "$HENV" ! -type l -perm /022 | tr '\n' ' ')" "" "hostile install: nothing group- or world-writable (the environment included)"
is "$(find "$HENV" \( -type p -o -type s -o -type b -o -type c \) | tr '\n' ' ')" "" \
    "hostile install: no FIFO, socket or device"
is "$(find "$HENV" ! -user "$(id -u)" | tr '\n' ' ')" "" "hostile install: everything belongs to the caller ($(id -u))"
refute "hostile install: no link to /etc/passwd" test -L "$HENV/passwd-link"
refute "hostile install: no link climbing out" test -L "$HENV/up-link"
check "hostile install: a link inside the environment is kept" test -L "$HENV/inner-link"
check "hostile install: a link into /usr is kept" test -L "$HENV/usr-link"
is "$(stat -c %a "$HENV")" 755 "hostile install: the environment directory is 0755"
is "$(jq -r '.environment.skipped_count' "$WORK/hostile-prep.json" 2>/dev/null | grep -c '^[1-9]')" 1 \
    "hostile install: the report counts what was left out"

# The cache and runs directories: agentbox's own, or refused (never chowned or chmodded).
mkdir -m 0777 "$WORK/shared-cache"
prep --node "$WORK/np-hostile/package.json" --cache-dir "$WORK/shared-cache"
is "$rc" 125 "a group/world-writable --cache-dir is refused (exit 125)"
check "a group/world-writable --cache-dir: the line says why and how to fix it" \
    grep -q 'writable by group or others.*(fix: ' "$WORK/perr"
is "$(stat -c %a "$WORK/shared-cache")$(find "$WORK/shared-cache" -mindepth 1 | wc -l)" 7770 \
    "a group/world-writable --cache-dir is left as it was, empty"
if is_root; then
    mkdir -m 0700 "$WORK/their-cache"
    chown 65534:65534 "$WORK/their-cache"
    prep --node "$WORK/np-hostile/package.json" --cache-dir "$WORK/their-cache"
    is "$rc" 125 "a --cache-dir owned by another user is refused (exit 125)"
    is "$(stat -c %u:%a "$WORK/their-cache")$(find "$WORK/their-cache" -mindepth 1 | wc -l)" "65534:7000" \
        "a --cache-dir owned by another user is left as it was, empty"
    mkdir -m 0777 "$WORK/preplanted"
    chown 65534:65534 "$WORK/preplanted"
    AGENTBOX_RUNS_DIR=$WORK/preplanted AGENTBOX_CACHE_DIR='' bounded 300 "$AGENTBOX" prepare \
        --node "$WORK/np-hostile/package.json" >"$WORK/pout" 2>"$WORK/perr" && rc=0 || rc=$?
    is "$rc" 125 "a runs directory another user created first is refused (exit 125)"
    is "$(stat -c %u:%a "$WORK/preplanted")$(find "$WORK/preplanted" -mindepth 1 | wc -l)" "65534:7770" \
        "a runs directory another user created first is left as it was, empty"
else
    skip "a --cache-dir owned by another user is refused" "needs root to make one"
fi

# The race of issue 13 item 2, under ../shared/tools/safe-ns (host read-only; /var/tmp and /root
# fresh tmpfs): while root prepares with the default runs root /var/tmp/agentbox-0, a local
# user (65534) keeps planting that name as a 0777 directory holding links to a root-only
# directory, and as a link to it, between each prepare. Whoever wins, root's secret directory
# keeps its owner and mode and gains nothing, and every prepare either refuses the planted
# name (125) or gets as far as the index (3, an index on a closed port, so no install runs).
SAFE_NS=$AB_SRCDIR/../shared/tools/safe-ns
# 400 rounds; 100 under the sanitizers (run-suite's ASan pass, AB_SANITIZED), where a prepare
# costs ten times as much (a sanitized process's start and its leak check) while the racer
# spins on the other core; the plain pass runs all 400. How the rounds end depends on the
# load (here 123 refused and 277 at the index in one run, 372 and 28 in another; 100 and 0
# under the sanitizers): a last prepare, once the racer has stopped, takes the index path in
# every pass, and is a control that the rounds' refusals are the racer's doing.
RACES=400
[ "${AB_SANITIZED:-0}" != 1 ] || RACES=100
if is_root && [ -x "$SAFE_NS" ] && command -v setpriv >/dev/null 2>&1; then
    SCR=$(mktemp -d /var/lib/agentbox-preprace.XXXXXX)
    chmod 0755 "$SCR"
    echo requests >"$SCR/req.txt"
    cat >"$SCR/race.sh" <<'EOF'
# runs inside safe-ns; prints "RC n" per prepare, "LAST n" for the one after the race, then
# "SECRET stat" and "SECRETLS n"
ab=$1 scr=$2 races=$3
unset AGENTBOX_RUNS_DIR AGENTBOX_CACHE_DIR
mkdir -m 0700 /root/secret && echo key >/root/secret/key && chmod 0600 /root/secret/key
before=$(stat -c '%u:%g:%a' /root/secret /root/secret/key | tr '\n' ' ')
setpriv --reuid 65534 --regid 65534 --clear-groups sh -c '
    n=/var/tmp/agentbox-0
    while [ ! -e /var/tmp/stop ]; do
        mkdir -m 0777 $n.d 2>/dev/null && for x in envs .cache .mnt; do ln -s /root/secret $n.d/$x; done
        mv -T $n.d $n 2>/dev/null
        rm -rf $n.d 2>/dev/null
        ln -s /root/secret $n.l 2>/dev/null && mv -T $n.l $n 2>/dev/null
        rm -f $n.l 2>/dev/null
    done' &
racer=$!
i=0
while [ $i -lt "$races" ]; do
    "$ab" prepare --python "$scr/req.txt" --index-url https://127.0.0.1:9/simple >/dev/null 2>>"$scr/err"
    echo "RC $?"
    rm -rf --one-file-system /var/tmp/agentbox-0
    i=$((i + 1))
done
touch /var/tmp/stop
wait "$racer"
rm -rf --one-file-system /var/tmp/agentbox-0
"$ab" prepare --python "$scr/req.txt" --index-url https://127.0.0.1:9/simple >/dev/null 2>>"$scr/err"
echo "LAST $?"
echo "SECRET $(stat -c '%u:%g:%a' /root/secret /root/secret/key | tr '\n' ' ')| $before"
echo "SECRETLS $(ls -A /root/secret | tr '\n' ' ')"
EOF
    "$SAFE_NS" "$SCR" sh "$SCR/race.sh" "$AGENTBOX" "$SCR" "$RACES" >"$SCR/out" 2>&1
    if [ $? = 99 ]; then
        not_ok "prepare race: safe-ns could make a read-only namespace" "$(head -n 3 "$SCR/out")"
    else
        refused=$(grep -c '^RC 125$' "$SCR/out")
        reached=$(grep -c '^RC 3$' "$SCR/out")
        is "$((refused + reached))" "$RACES" \
            "prepare race: all $RACES prepares refused the planted name or reached the index ($refused refused, $reached reached)"
        check "prepare race: the planted name won at least once (the race was run)" test "$refused" -gt 0
        is "$(sed -n 's/^LAST //p' "$SCR/out")" 3 \
            "prepare race: once the racer stopped, a prepare reaches the index (exit 3)"
        sec=$(sed -n 's/^SECRET //p' "$SCR/out")
        is "${sec%%|*}" "${sec#*| }" "prepare race: root's 0700 directory and 0600 file keep owner and mode"
        is "$(sed -n 's/^SECRETLS //p' "$SCR/out")" "key " "prepare race: nothing was added to root's directory"
        check "prepare race: a refusal names the planted runs directory and the fix" \
            grep -q "agentbox-0.*(fix: " "$SCR/err"
    fi
    rm -rf --one-file-system "$SCR"
else
    skip "prepare race against a planted runs root" "needs root, setpriv and ../shared/tools/safe-ns"
fi

# ---- interpreters outside /usr ----------------------------------------------------------
printf 'import sys\nprint("EXE", sys.executable)\nprint("VER", sys.version.split()[0])\n' >"$WORK/ver.py"
PYENV=/root/.pyenv/versions/3.11.7/bin/python3
if as_user; then
    if [ -e /root/.pyenv/versions/3.11.7 ] 2>/dev/null; then
        skip "pyenv python: runs from its prefix" "/root is readable by this user: not the setup this case checks"
    else
        abb 60 --python "$PYENV" "$WORK/ver.py"
        is "$rc" 127 "pyenv python as a user: /root is not reachable: a clear 'not found' (127)"
        check "pyenv python as a user: the message names the interpreter" grep -q "$PYENV" "$WORK/r.json"
    fi
elif [ -x "$PYENV" ]; then
    abb 60 --python "$PYENV" "$WORK/ver.py"
    is "$rc" 0 "pyenv python: exit 0"
    check "pyenv python: sys.executable is under the pyenv prefix" \
        grep -q '^EXE /root/.pyenv/versions/3.11.7/bin/python3' "$WORK/out"
    check "pyenv python: version 3.11.7" has 'VER 3.11.7'
    rm_left "pyenv python"
else
    skip "pyenv python: runs from its prefix" "no pyenv Python at $PYENV"
fi

mkdir -p "$WORK/opt/node/bin"
if cp "$(command -v node)" "$WORK/opt/node/bin/node" 2>/dev/null; then
    chmod 755 "$WORK/opt/node/bin/node"
    printf 'console.log("EXE", process.execPath);\nconsole.log("VER", process.version);\n' >"$WORK/ver.js"
    abb 60 --node "$WORK/opt/node/bin/node" "$WORK/ver.js"
    is "$rc" 0 "node outside /usr: exit 0"
    check "node outside /usr: process.execPath is the copy" has "EXE $WORK/opt/node/bin/node"
    check "node outside /usr: its version" has "VER $(node --version)"
    is "$(jr .interpreter)" "$WORK/opt/node/bin/node" "node outside /usr: the report names it"
    rm_left "node outside /usr"
else
    skip "node outside /usr" "cannot copy node"
fi

# ---- --ro-bind ----------------------------------------------------------------------------
refused "--ro-bind \$HOME" --ro-bind "$HOSTHOME"
mkdir -p "$WORK/proj/.ssh" "$WORK/data"
printf 'key %s\n' "$TOKEN" >"$WORK/proj/.ssh/id"
chmod 755 "$WORK/proj" "$WORK/proj/.ssh"
chmod 777 "$WORK/data" # only the read-only mount may stop the writes below
chmod 644 "$WORK/proj/.ssh/id"
refused "--ro-bind a .ssh directory" --ro-bind "$WORK/proj/.ssh:/keys"
refused "--ro-bind a directory holding .ssh" --ro-bind "$WORK/proj:/proj"
refused "--ro-bind /etc" --ro-bind /etc
refused "--ro-bind /run" --ro-bind /run
"$PY" -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$WORK/host.sock"
refused "--ro-bind a socket" --ro-bind "$WORK/host.sock:/host.sock"
refused "--allow-bind of .ssh does not let its parent through" \
    --ro-bind "$WORK/proj:/proj" --allow-bind "$WORK/proj/.ssh"
printf 'import sys\nprint(open(sys.argv[1]).read().strip())\n' >"$WORK/cat.py"
abb 60 --ro-bind "$WORK/proj/.ssh:/keys" --allow-bind "$WORK/proj/.ssh" "$WORK/cat.py" -- /keys/id
is "$rc" 0 "--allow-bind lets exactly the named path through: exit 0"
check "--allow-bind: the file is readable in the sandbox" has "key $TOKEN"

printf 'data %s\n' "$TOKEN" >"$WORK/data/file.txt"
chmod 666 "$WORK/data/file.txt"
cat >"$WORK/data.py" <<'EOF'
import errno
print('READ', open('/data/file.txt').read().strip())
for label, f in [('modify', lambda: open('/data/file.txt', 'a').write('evil\n')),
                 ('create', lambda: open('/data/new.txt', 'w').write('evil\n'))]:
    try:
        f()
        print('W', label, 'OK')
    except OSError as e:
        print('W', label, errno.errorcode.get(e.errno, e.errno))
EOF
before=$(treesum "$WORK/data")
abb 60 --ro-bind "$WORK/data:/data" "$WORK/data.py"
is "$rc" 0 "--ro-bind HOST:/data: exit 0"
check "--ro-bind HOST:/data: readable at /data" has "READ data $TOKEN"
for w in modify create; do
    got=$(sed -n "s/^W $w //p" "$WORK/out")
    is "$got" EROFS "--ro-bind HOST:/data: $w fails with EROFS (world-writable on the host)"
done
is "$(treesum "$WORK/data")" "$before" "--ro-bind HOST:/data: the host directory is unchanged"
rm_left "--ro-bind"

done_testing

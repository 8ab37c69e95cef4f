#!/bin/sh
# test-secrets.sh -- ambient secrets stay out (T6, T7, T8): the caller's environment (an API
# key) is nowhere in the sandbox, /proc/1/environ and every /proc/*/cmdline included, nor in
# the report; --env does reach the script; fds the caller leaked are not open inside; the
# caller's session keyring is out of reach.
# shellcheck source-path=SCRIPTDIR
# shellcheck source=lib.sh
. "$AB_TESTDIR/integration/lib.sh"


# ---- environment --------------------------------------------------------------------------
# The script searches for both canaries; it builds the needles at run time so that its own
# argv and source never contain them.
cat >"$WORK/env.py" <<'EOF'
import os
needles = ["sk-test-" + "CANARY123", "aws-secret-" + "CANARY456", "OPENAI_API" + "_KEY",
           "AWS_SECRET" + "_ACCESS_KEY"]
found, read, unreadable = [], 0, 0
def look(where, data):
    for n in needles:
        if n.encode() in data:
            found.append("%s:%s" % (where, n[:10]))
for k, v in os.environ.items():
    look("os.environ", (k + "=" + v).encode())
for pid in sorted(p for p in os.listdir("/proc") if p.isdigit()):
    for f in ("environ", "cmdline"):
        try:
            with open("/proc/%s/%s" % (pid, f), "rb") as fh:
                look("/proc/%s/%s" % (pid, f), fh.read())
            read += 1
        except OSError:
            unreadable += 1
            if pid == "1" and f == "environ":
                print("PID1_ENVIRON=unreadable")
for f in ("/proc/self/environ", "/proc/1/cmdline"):
    try:
        with open(f, "rb") as fh:
            look(f, fh.read())
    except OSError:
        pass
print("READ=%d UNREADABLE=%d" % (read, unreadable))
print("SELF_ENVIRON_HAS_VISIBLE=%d" % (b"AB_VISIBLE=visible-value" in open("/proc/self/environ", "rb").read()))
print("VISIBLE=" + os.environ.get("AB_VISIBLE", "<unset>"))
print("ENVKEYS=" + ",".join(sorted(os.environ)))
print("FOUND " + " ".join(found) if found else "NOTFOUND")
EOF
C1=sk-test-CANARY123
C2=aws-secret-CANARY456
# the secrets are in agentbox's own environment (exported, as an agent's would be)
OPENAI_API_KEY=$C1
AWS_SECRET_ACCESS_KEY=$C2
export OPENAI_API_KEY AWS_SECRET_ACCESS_KEY
# control: the same search, run unsandboxed by the caller, finds them
python3 "$WORK/env.py" >"$WORK/env.host" 2>&1
check "env control: the search finds the secrets in an unsandboxed child" \
    grep -q '^FOUND .*os.environ:sk-test-CA' "$WORK/env.host"
abb 60 --env AB_VISIBLE=visible-value "$WORK/env.py"
is "$rc" 0 "env: the script ran (exit 0)"
is "$(grep -E '^(FOUND|NOTFOUND)' "$WORK/out")" NOTFOUND \
    "env: no caller secret in os.environ, /proc/*/environ or /proc/*/cmdline"
check "env: the search read /proc files (it is not vacuous)" hasre '^READ=[1-9]'
check "env: --env NAME=VALUE reaches the script" has VISIBLE=visible-value
check "env: --env NAME=VALUE is in /proc/self/environ (the search can see env vars)" \
    has SELF_ENVIRON_HAS_VISIBLE=1
is "$(val ENVKEYS)" "AB_VISIBLE,HOME,LANG,MPLCONFIGDIR,PATH,PWD,PYTHONDONTWRITEBYTECODE,TMPDIR,XDG_CACHE_HOME,npm_config_cache" \
    "env: the script's environment is exactly the allow-list (and bwrap's PWD) plus --env"
refute "env: the report does not contain the canaries" grep -q -e "$C1" -e "$C2" "$WORK/r.json"
refute "env: nothing in the run dir contains the canaries" grep -rqs -e "$C1" -e "$C2" "$(jr .run_dir)"
refute "env: agentbox's own output does not contain the canaries" \
    grep -qs -e "$C1" -e "$C2" "$WORK/out" "$WORK/err"

cat >"$WORK/env.js" <<'EOF'
const fs = require('fs');
const needles = ['sk-test-' + 'CANARY123', 'aws-secret-' + 'CANARY456', 'OPENAI_API' + '_KEY'];
const found = [];
let read = 0;
const look = (where, s) => { for (const n of needles) if (s.includes(n)) found.push(where); };
for (const [k, v] of Object.entries(process.env)) look('process.env', k + '=' + v);
for (const pid of fs.readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
  for (const f of ['environ', 'cmdline']) {
    try { look(`/proc/${pid}/${f}`, fs.readFileSync(`/proc/${pid}/${f}`, 'latin1')); read++; } catch (e) {}
  }
}
console.log('READ=' + read);
console.log('VISIBLE=' + (process.env.AB_VISIBLE || '<unset>'));
console.log(found.length ? 'FOUND ' + found.join(' ') : 'NOTFOUND');
EOF
abb 60 --env AB_VISIBLE=visible-value "$WORK/env.js"
is "$rc" 0 "env js: the script ran (exit 0)"
is "$(grep -E '^(FOUND|NOTFOUND)' "$WORK/out")" NOTFOUND \
    "env js: no caller secret in process.env, /proc/*/environ or /proc/*/cmdline"
check "env js: the search read /proc files" hasre '^READ=[1-9]'
check "env js: --env reaches the script" has VISIBLE=visible-value
refute "env js: the report does not contain the canaries" grep -q -e "$C1" -e "$C2" "$WORK/r.json"
unset OPENAI_API_KEY AWS_SECRET_ACCESS_KEY

# ---- leaked file descriptors ---------------------------------------------------------------
echo "fd-secret-CANARY789" >"$WORK/secretfile"
mkdir "$WORK/secretdir"
mkfifo "$WORK/secretfifo"
cat >"$WORK/fds.py" <<'EOF'
import errno, os
names = os.listdir("/proc/self/fd")   # the listing's own fd is closed again here
targets, leaked = [], []
for fd in range(0, 64):
    try:
        t = os.readlink("/proc/self/fd/%d" % fd)
    except OSError:
        continue
    targets.append("%d:%s" % (fd, t))
    if "secret" in t:
        leaked.append(str(fd))
print("FDS=" + ",".join(t.split(":")[0] for t in targets))
print("TARGETS=" + " ".join(targets))
print("LEAKED=" + ",".join(leaked))
for fd in range(3, 13):
    try:
        os.fstat(fd)
        print("FSTAT%d=OPEN" % fd)
    except OSError as e:
        print("FSTAT%d=%s" % (fd, errno.errorcode[e.errno]))
print("DONE")
EOF
# leak.py WORK CMD...: runs CMD with fds 3..12 open on the secret file, directory and fifo
# (inheritable, the way a careless caller leaks them), and checks they really are open.
cat >"$WORK/leak.py" <<'EOF'
import os, sys
w = sys.argv[1]
plan = {3: "secretfile", 4: "secretfile", 5: "secretdir", 6: "secretfile", 7: "secretfile",
        8: "secretdir", 9: "secretfifo", 10: "secretfile", 11: "secretdir", 12: "secretfile"}
for fd, name in plan.items():
    f = os.open(os.path.join(w, name), os.O_RDWR if name == "secretfifo" else os.O_RDONLY)
    if f != fd:
        os.dup2(f, fd, inheritable=True)
        os.close(f)
    else:
        os.set_inheritable(fd, True)
for fd in plan:
    os.fstat(fd)
os.execv(sys.argv[2], sys.argv[2:])
EOF
# The caller leaks fds 3..12: every slot agentbox uses for bwrap (--args, --seccomp, status,
# agentbox-init) and beyond. Some slots are used only in some setups (seccomp off, no
# cgroup), so also with --without seccomp.
for variant in default without-seccomp; do
    if [ $variant = default ]; then opt=; else opt="--without seccomp"; fi
    rm -f "$WORK/r.json"
    rc=0
    # shellcheck disable=SC2086 # $opt is one option and its value, or nothing
    bounded 60 python3 "$WORK/leak.py" "$WORK" "$AGENTBOX" run --runs-dir "$RUNS" \
        --report "$WORK/r.json" $opt "$WORK/fds.py" >"$WORK/out" 2>"$WORK/err" || rc=$?
    keep_report "$WORK/r.json"
    is "$rc" 0 "fds ($variant): the script ran (exit 0)"
    check "fds ($variant): the script ran to the end" has DONE
    is "$(val FDS)" 0,1,2 "fds ($variant): only stdin, stdout and stderr are open inside"
    if [ -z "$(val LEAKED)" ]; then
        ok "fds ($variant): no fd inside points at the caller's secret file, dir or fifo"
    else
        not_ok "fds ($variant): no fd inside points at the caller's secret file, dir or fifo" \
            "LEAKED=$(val LEAKED)" "TARGETS=$(val TARGETS)"
    fi
    for fd in 3 4 5 6 7 8 9 10 11 12; do
        is "$(val FSTAT$fd)" EBADF "fds ($variant): fd $fd is not open inside (fstat gives EBADF)"
    done
done

# ---- kernel keyrings -------------------------------------------------------------------------
cat >"$WORK/keys.py" <<'EOF'
import ctypes, errno, sys
libc = ctypes.CDLL(None, use_errno=True)
SYS_keyctl = 250
KEYCTL_SEARCH, KEYCTL_READ, KEYCTL_DESCRIBE = 10, 11, 6
KEY_SPEC_SESSION_KEYRING, KEY_SPEC_USER_KEYRING = -3, -4
def en():
    return errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))
for name, ring in (("SESSION", KEY_SPEC_SESSION_KEYRING), ("USER", KEY_SPEC_USER_KEYRING)):
    r = libc.syscall(SYS_keyctl, KEYCTL_SEARCH, ctypes.c_long(ring), b"user", sys.argv[1 if name == "SESSION" else 2].encode(), 0)
    print("SEARCH_%s=%s" % (name, ("FOUND %d" % r) if r >= 0 else "FAIL " + en()))
for name, kid in (("SESSION", int(sys.argv[3])), ("USER", int(sys.argv[4]))):
    buf = ctypes.create_string_buffer(256)
    r = libc.syscall(SYS_keyctl, KEYCTL_READ, ctypes.c_long(kid), buf, ctypes.c_long(256))
    print("READ_%s=%s" % (name, ("GOT " + buf.value.decode(errors="replace")) if r >= 0 else "FAIL " + en()))
    r = libc.syscall(SYS_keyctl, KEYCTL_DESCRIBE, ctypes.c_long(kid), buf, ctypes.c_long(256))
    print("DESCRIBE_%s=%s" % (name, ("GOT " + buf.value.decode(errors="replace")) if r >= 0 else "FAIL " + en()))
try:
    keys = open("/proc/keys").read()
    listed = [w for w, n in (("session-key", sys.argv[1]), ("user-key", sys.argv[2])) if n in keys]
    print("PROCKEYS=" + ("LISTED " + ",".join(listed) if listed else "CLEAN"))
except OSError as e:
    print("PROCKEYS=UNREADABLE " + errno.errorcode.get(e.errno, ""))
print("DONE")
EOF
if ! command -v keyctl >/dev/null 2>&1; then
    skip "keyring: the caller's session key is out of reach" "keyctl (keyutils) is not installed"
    skip "keyring: the caller's user key is out of reach" "keyctl (keyutils) is not installed"
elif ! (keyctl new_session >/dev/null 2>&1); then
    skip "keyring: the caller's session key is out of reach" "keyctl new_session fails here"
else
    SNAME=ab-canary-s$$
    UNAME=ab-canary-u$$
    (
        set -e
        keyctl new_session >/dev/null
        skid=$(keyctl add user "$SNAME" "key-secret-CANARY-S" @s)
        # the user keyring outlives us: take the key out again whatever happens below
        ukid=$(keyctl add user "$UNAME" "key-secret-CANARY-U" @u)
        trap 'keyctl unlink "$ukid" @u >/dev/null 2>&1 || true' EXIT
        # control: an ordinary child of the caller finds and reads both keys with the probe
        python3 "$WORK/keys.py" "$SNAME" "$UNAME" "$skid" "$ukid" >"$WORK/keys.host"
        set +e
        abb 60 "$WORK/keys.py" "$SNAME" "$UNAME" "$skid" "$ukid"
        echo "$rc" >"$WORK/keys.rc"
    )
    hv() { sed -n "s/^$1=//p" "$WORK/keys.host"; }
    check "keyring control: a normal child of the caller finds the session key" \
        grep -q '^SEARCH_SESSION=FOUND' "$WORK/keys.host"
    is "$(hv READ_SESSION)" "GOT key-secret-CANARY-S" "keyring control: and reads it"
    check "keyring control: and describes the user-keyring key" grep -q "^DESCRIBE_USER=GOT user;.*;$UNAME\$" "$WORK/keys.host"
    is "$(hv PROCKEYS)" "LISTED session-key,user-key" "keyring control: /proc/keys lists them"
    is "$(cat "$WORK/keys.rc" 2>/dev/null)" 0 "keyring: the script ran (exit 0)"
    check "keyring: the script ran to the end" has DONE
    check "keyring: KEYCTL_SEARCH in the session keyring fails inside" hasre '^SEARCH_SESSION=FAIL '
    check "keyring: KEYCTL_SEARCH in the user keyring fails inside" hasre '^SEARCH_USER=FAIL '
    check "keyring: KEYCTL_READ of the caller's session key fails inside" hasre '^READ_SESSION=FAIL '
    check "keyring: KEYCTL_READ of the caller's user key fails inside" hasre '^READ_USER=FAIL '
    check "keyring: KEYCTL_DESCRIBE of the session key fails inside" hasre '^DESCRIBE_SESSION=FAIL '
    check "keyring: KEYCTL_DESCRIBE of the user key fails inside" hasre '^DESCRIBE_USER=FAIL '
    # T8/T24: as a user the sandbox shares the caller's kuid, and /proc/keys lists every key that
    # uid may view (names of session and user keys). Docker masks /proc/keys for this reason.
    case $(val PROCKEYS) in
    CLEAN | UNREADABLE*) ok "keyring: /proc/keys inside does not list the keys ($(val PROCKEYS))" ;;
    *) not_ok "keyring: /proc/keys inside does not list the keys" "PROCKEYS=$(val PROCKEYS)" ;;
    esac
    refute "keyring: no key payload reached the script's output" grep -q 'CANARY' "$WORK/out"
    if keyctl list @u 2>/dev/null | grep -q "$UNAME"; then
        not_ok "keyring: the test's user key was removed again"
    else
        ok "keyring: the test's user key was removed again"
    fi
fi

done_testing

#!/bin/sh
# test-seccomp.sh -- the seccomp filter inside real `agentbox run` sandboxes (T31, T3, T8,
# T10, T12, T32), for --seccomp-policy default and strict:
#   - ab-probe try-syscall over the whole expected table of tests/unit/test-seccomp.c (parsed
#     from that file: one source of truth) must print exactly the expected errno per call:
#     EPERM / ENOSYS / EAFNOSUPPORT / EMFILE for blocked calls, the kernel's own answer for
#     allowed ones; the 32-bit and x32 entry points kill the caller with SIGSYS;
#   - the sandbox runs in seccomp filter mode with no_new_privs; the report says so;
#   - a control run with --without seccomp shows that those calls do reach the kernel there;
#   - no setuid/setgid file can be made (issue 12): Python and Node get EPERM, plain modes work,
#     and the host finds no s-bit in the report, the kept copy or a --workspace DIR;
#   - real workloads keep working under the filter: Python asyncio, multiprocessing,
#     subprocess and threading; Node child_process, worker_threads, fs and net.
# shellcheck source-path=SCRIPTDIR
# shellcheck source=lib.sh
. "$AB_TESTDIR/integration/lib.sh"
mkdir -p "$RUNS"

# bounded run of agentbox: abx [OPTIONS...] SCRIPT [ARGS...]
abx() {
    rm -f "$WORK/r.json"
    rc=0
    bounded 90 "$AGENTBOX" run --runs-dir "$RUNS" --report "$WORK/r.json" --timeout 60s "$@" \
        >"$WORK/out" 2>"$WORK/err" </dev/null || rc=$?
    keep_report "$WORK/r.json"
}
# the answer ab-probe printed for NAME in the last run
got() { sed -n "s/^$1 //p" "$WORK/out" | head -n 1; }

# ---- the expected table, from the unit test --------------------------------------------------
TABLE=$WORK/expect.txt
sed -n -E \
    -e 's/^[[:space:]]*(ALLOWED|BLOCKED|PRIV)\("([a-z0-9_]+)", "([A-Z0-9]+)"\),.*/\2 \3 \3 \1/p' \
    -e 's/^[[:space:]]*STRICT\("([a-z0-9_]+)", "([A-Z0-9]+)", "([A-Z0-9]+)"\),.*/\1 \2 \3 STRICT/p' \
    "$AB_TESTDIR/unit/test-seccomp.c" >"$TABLE"
n_expect=$(wc -l <"$TABLE")
check "the expected table was read from tests/unit/test-seccomp.c ($n_expect calls)" \
    test "$n_expect" -ge 100
cut -d' ' -f1 "$TABLE" >"$WORK/names.txt"

cat >"$WORK/probe.py" <<'EOF'
# Runs ab-probe (copied in as /work/ab-probe) over every name, then each foreign-ABI call alone.
import subprocess
names = open("/work/names.txt").read().split()
r = subprocess.run(["/work/ab-probe", "try-syscall"] + names, capture_output=True, text=True)
print(r.stdout, end="")
print("PROBE_EXIT %d" % r.returncode)
for what in ("x32_getpid", "i386_getpid"):
    r = subprocess.run(["/work/ab-probe", "try-syscall", what], capture_output=True, text=True)
    print("ABI %s %d %s" % (what, r.returncode, r.stdout.strip().replace(" ", "=") or "-"))
r = subprocess.run(["/work/ab-probe", "ids"], capture_output=True, text=True)
print(r.stdout, end="")
EOF

# Some hypervisors' guests fault on the 32-bit entry itself (int 0x80), filter or no filter: the
# i386 cases then cannot show what the filter does, and are skipped with the reason.
i386_entry=yes
"$AB_PROBE" try-syscall i386_getpid >/dev/null 2>&1 || i386_entry=no
abi_is() { # WHAT WANT DESC
    if [ "$1" = i386_getpid ] && [ "$i386_entry" = no ]; then
        skip "$3" "this kernel faults on the 32-bit entry itself, with no filter"
    else
        is "$(sed -n "s/^ABI $1 \([-0-9]*\) .*/\1/p" "$WORK/out")" "$2" "$3"
    fi
}

for pol in default strict; do
    col=2
    [ $pol = strict ] && col=3
    abx --seccomp-policy $pol --input "$AB_PROBE" --input "$WORK/names.txt" "$WORK/probe.py"
    is "$rc" 0 "$pol: the probe run exits 0"
    is "$(jr .sandbox.seccomp.enforced)" true "$pol: the report says seccomp is enforced"
    is "$(jr .sandbox.seccomp.detail)" "policy $pol" "$pol: the report names the policy"
    is "$(got PROBE_EXIT)" 0 "$pol: ab-probe knew every name"
    # no memory cgroup: the memory watchdog's filter variant also refuses memfd_create
    # (ENOSYS, src/supervisor/filter.h AB_FILTER_NO_HIDDEN_MEM)
    mw=false
    case $(jr .limits.memory.mechanism) in "agentbox watchdog"*) mw=true ;; esac
    while read -r name d s kind; do
        want=$d
        [ $col = 3 ] && want=$s
        if [ "$mw" = true ] && [ "$name" = memfd_create ]; then
            want=ENOSYS
            kind="$kind, memory watchdog"
        fi
        is "$(got "$name")" "$want" "$pol: $name -> $want ($kind)"
    done <"$TABLE"
    # SIGSYS = 31: subprocess reports a signal death as -31
    for what in x32_getpid i386_getpid; do
        abi_is "$what" -31 "$pol: $what (another ABI) is killed by SIGSYS"
    done
    check "$pol: the sandbox runs in seccomp filter mode" grep -q "^Seccomp:[[:space:]]*2$" "$WORK/out"
    check "$pol: no_new_privs is set" grep -q "^NoNewPrivs:[[:space:]]*1$" "$WORK/out"
done

# ---- control: without the filter, the same calls reach the kernel ------------------------------
abx --without seccomp --input "$AB_PROBE" --input "$WORK/names.txt" "$WORK/probe.py"
is "$rc" 0 "control (--without seccomp): the probe run exits 0"
is "$(jr .sandbox.seccomp.enforced)" false "control: the report says seccomp is off"
check "control: the sandbox runs without a filter" grep -q "^Seccomp:[[:space:]]*0$" "$WORK/out"
# Calls that only the filter refuses: without it each must get another answer. (PRIV calls are
# refused by the kernel itself to a caller without capabilities, so they prove nothing here.)
for name in keyctl add_key request_key ptrace userfaultfd bpf perf_event_open io_uring_setup \
    clone3 fsopen open_tree mount_setattr unshare setns mount chroot open_by_handle_at \
    name_to_handle_at ioctl_tiocsti ioctl_tiocsti64 ioctl_tioclinux clone_newuser socket_netlink \
    socket_packet socket_vsock personality_rie process_vm_readv kcmp chmod_suid fchmodat2_sgid \
    open_creat_suid openat_creat_sgid openat_tmpfile_suid mknod_suid openat2; do
    want=$(sed -n "s/^$name \([A-Z0-9]*\) .*/\1/p" "$TABLE")
    g=$(got "$name")
    if [ -n "$g" ] && [ "$g" != "$want" ]; then
        ok "control: $name reaches the kernel without the filter ($g, not $want)"
    else
        not_ok "control: $name reaches the kernel without the filter" "got '$g', the filter's answer is '$want'"
    fi
done
for what in x32_getpid i386_getpid; do
    abi_is "$what" 0 "control: $what works without the filter (so the SIGSYS above is the filter's)"
done

# ---- issue 12 (T27): no setuid/setgid file ever leaves the sandbox ------------------------------
# Python and Node try the ordinary ways to make one: chmod/fchmod, open(O_CREAT) with the mode,
# mkdir, mknod, and copying a setuid binary with its mode (shutil.copy2, fs.copyFileSync). Each
# must get EPERM; the same calls with plain modes must work. Host oracles: the report's files[]
# (the live workspace, before any sanitising), the kept copy, and above all a --workspace DIR,
# a host directory the sandbox writes into directly. The control run with --without seccomp
# shows that this oracle does see the bits when nothing stops them.
SUID_SRC=/usr/bin/su
[ -u "$SUID_SRC" ] || SUID_SRC=
cat >"$WORK/sbits.py" <<'EOF'
import errno, os, shutil, stat, sys
d, src = sys.argv[1], sys.argv[2]


def attempt(what, fn):
    try:
        fn()
        print("SBIT %s OK" % what, flush=True)
    except OSError as e:
        print("SBIT %s %s" % (what, errno.errorcode.get(e.errno, str(e.errno))), flush=True)


def fchmod(p, mode):
    fd = os.open(p, os.O_RDONLY)
    try:
        os.fchmod(fd, mode)
    finally:
        os.close(fd)


def create(p, mode):
    os.close(os.open(p, os.O_CREAT | os.O_WRONLY, mode))


f = os.path.join(d, "sb-file")
open(f, "w").close()
attempt("chmod-4755", lambda: os.chmod(f, 0o4755))
attempt("chmod-2755", lambda: os.chmod(f, 0o2755))
attempt("chmod-6755", lambda: os.chmod(f, 0o6755))
attempt("fchmod-4755", lambda: fchmod(f, 0o4755))
attempt("open-4755", lambda: create(os.path.join(d, "sb-open-s"), 0o4755))
attempt("open-2755", lambda: create(os.path.join(d, "sb-open-g"), 0o2755))
attempt("mkdir-2775", lambda: os.mkdir(os.path.join(d, "sb-dir-g"), 0o2775))
attempt("mknod-4755", lambda: os.mknod(os.path.join(d, "sb-node-s"), stat.S_IFREG | 0o4755))
if src:
    attempt("copy-setuid", lambda: shutil.copy2(src, os.path.join(d, "sb-copy")))
attempt("chmod-0755", lambda: os.chmod(f, 0o755))
attempt("fchmod-0700", lambda: fchmod(f, 0o700))
attempt("open-0644", lambda: create(os.path.join(d, "sb-open-plain"), 0o644))
attempt("mkdir-0755", lambda: os.mkdir(os.path.join(d, "sb-dir-plain"), 0o755))
for name in sorted(os.listdir(d)):
    if name.startswith("sb-"):
        print("MODE %s %04o" % (name, os.lstat(os.path.join(d, name)).st_mode & 0o7777))
print("DONE", flush=True)
EOF
cat >"$WORK/sbits.js" <<'EOF'
const fs = require('fs'), path = require('path');
const [d, src] = process.argv.slice(2);
function attempt(what, fn) {
  try {
    fn();
    console.log(`SBIT ${what} OK`);
  } catch (e) {
    console.log(`SBIT ${what} ${e.code}`);
  }
}
function fchmod(p, mode) {
  const fd = fs.openSync(p, 'r');
  try { fs.fchmodSync(fd, mode); } finally { fs.closeSync(fd); }
}
const create = (p, mode) => fs.closeSync(fs.openSync(p, 'w', mode));
const f = path.join(d, 'sb-file');
fs.writeFileSync(f, '');
attempt('chmod-4755', () => fs.chmodSync(f, 0o4755));
attempt('chmod-2755', () => fs.chmodSync(f, 0o2755));
attempt('chmod-6755', () => fs.chmodSync(f, 0o6755));
attempt('fchmod-4755', () => fchmod(f, 0o4755));
attempt('open-4755', () => create(path.join(d, 'sb-open-s'), 0o4755));
attempt('open-2755', () => create(path.join(d, 'sb-open-g'), 0o2755));
attempt('mkdir-2775', () => fs.mkdirSync(path.join(d, 'sb-dir-g'), 0o2775));
attempt('writefile-4755', () => fs.writeFileSync(path.join(d, 'sb-wf-s'), 'x', { mode: 0o4755 }));
if (src) attempt('copy-setuid', () => fs.copyFileSync(src, path.join(d, 'sb-copy')));
attempt('chmod-0755', () => fs.chmodSync(f, 0o755));
attempt('fchmod-0700', () => fchmod(f, 0o700));
attempt('open-0644', () => create(path.join(d, 'sb-open-plain'), 0o644));
attempt('mkdir-0755', () => fs.mkdirSync(path.join(d, 'sb-dir-plain'), 0o755));
for (const name of fs.readdirSync(d).sort()) {
  if (name.startsWith('sb-')) {
    const m = fs.lstatSync(path.join(d, name)).mode & 0o7777;
    console.log(`MODE ${name} ${m.toString(8).padStart(4, '0')}`);
  }
}
console.log('DONE');
EOF
# sbit_refused WHAT LANG: every s-bit attempt of the last run got EPERM, every plain one worked,
# and the report's files[] (the live workspace, before the copy strips anything) has no s-bit
sbit_refused() {
    for a in chmod-4755 chmod-2755 chmod-6755 fchmod-4755 open-4755 open-2755 mkdir-2775; do
        is "$(got "SBIT $a")" EPERM "$1: $a -> EPERM"
    done
    if [ "$2" = py ]; then
        is "$(got "SBIT mknod-4755")" EPERM "$1: mknod(S_IFREG|04755) -> EPERM"
    else
        is "$(got "SBIT writefile-4755")" EPERM "$1: writeFileSync with mode 04755 -> EPERM"
    fi
    if [ -n "$SUID_SRC" ]; then
        is "$(got "SBIT copy-setuid")" EPERM "$1: copying $SUID_SRC with its mode -> EPERM"
    else
        skip "$1: copying a setuid binary with its mode" "no setuid /usr/bin/su on this host"
    fi
    for a in chmod-0755 fchmod-0700 open-0644 mkdir-0755; do
        is "$(got "SBIT $a")" OK "$1: plain $a still works"
    done
    is "$(got "MODE sb-file")" 0700 "$1: sb-file has the plain mode it was given last"
    is "$(got "MODE sb-open-plain")" 0644 "$1: open(O_CREAT, 0644) made a 0644 file"
    is "$(sed -n 's/^MODE \(.*\) [2-7][0-7][0-7][0-7]$/\1/p' "$WORK/out" | tr '\n' ' ')" "" \
        "$1: inside, no sb-* entry has a setuid or setgid bit"
    check "$1: the script ran to its end" grep -qx DONE "$WORK/out"
    is "$(jq -r '[.files[] | select(.mode | test("^[2-7]")) | .path] | join(" ")' "$WORK/r.json")" "" \
        "$1: the report's files[] (the live workspace) has no setuid or setgid entry"
}
for pol in default strict; do
    for lang in py js; do
        abx --seccomp-policy $pol "$WORK/sbits.$lang" /work "$SUID_SRC"
        is "$rc" 0 "s-bits $pol $lang: exit 0"
        sbit_refused "s-bits $pol $lang" $lang
        ws=$(jr .workspace)
        check "s-bits $pol $lang: the kept workspace copy exists" test -f "$ws/sb-file"
        is "$(find "$ws" -perm /6000 | head -n 3 | tr '\n' ' ')" "" \
            "s-bits $pol $lang: nothing in the kept workspace copy has an s-bit (find -perm /6000)"
    done
done
# --workspace DIR: the sandbox writes into a host directory; the host must find no s-bit there.
for lang in py js; do
    HWS=$WORK/hostws-$lang
    mkdir "$HWS"
    chmod 700 "$HWS"
    cp "$WORK/sbits.$lang" "$HWS/"
    abx --workspace "$HWS" "$HWS/sbits.$lang" /work "$SUID_SRC"
    is "$rc" 0 "s-bits --workspace $lang: exit 0"
    sbit_refused "s-bits --workspace $lang" $lang
    check "s-bits --workspace $lang: the script's files are in the host directory" \
        test -f "$HWS/sb-file"
    is "$(find "$HWS" -perm /6000 | head -n 3 | tr '\n' ' ')" "" \
        "s-bits --workspace $lang: the host directory holds no setuid/setgid file (find -perm /6000)"
done
# control: without the filter, the same script does leave s-bits in the host directory
HWS=$WORK/hostws-control
mkdir "$HWS"
chmod 700 "$HWS"
cp "$WORK/sbits.py" "$HWS/"
abx --without seccomp --workspace "$HWS" "$HWS/sbits.py" /work ""
is "$(got "SBIT chmod-4755")|$(got "SBIT open-4755")" "OK|OK" \
    "control (--without seccomp): chmod 04755 and open(O_CREAT, 04755) succeed"
check "control: the report's files[] saw the s-bits the script set" \
    jqe '[.files[] | select(.mode | test("^[2-7]"))] | length > 0'
# ... and the second layer took them off again after the run (the strip of --workspace DIR)
is "$(find "$HWS" -perm /6000 | head -n 3 | tr '\n' ' ')" "" \
    "control: the post-run strip left no setuid/setgid file in the host directory"
check "control: the report flags those entries stripped" \
    jqe '[.files[] | select((.flags // []) | index("stripped"))] | length > 0'
rm -rf "$HWS" "$WORK/hostws-py" "$WORK/hostws-js"

# ---- workloads under the filter -----------------------------------------------------------------
cat >"$WORK/py_work.py" <<'EOF'
import asyncio, multiprocessing, subprocess, sys, threading, socket
kind = sys.argv[1] if len(sys.argv) > 1 else "unix"

def sq(x):
    return x * x

async def echo(r, w):
    w.write(await r.readline())
    await w.drain()
    w.close()

async def amain():
    if kind == "inet":
        srv = await asyncio.start_server(echo, "127.0.0.1", 0)
        port = srv.sockets[0].getsockname()[1]
        r, w = await asyncio.open_connection("127.0.0.1", port)
    else:
        srv = await asyncio.start_unix_server(echo, "/tmp/py.sock")
        r, w = await asyncio.open_unix_connection("/tmp/py.sock")
    w.write(b"ping\n")
    await w.drain()
    assert await r.readline() == b"ping\n"
    w.close()
    srv.close()
    await srv.wait_closed()
    p = await asyncio.create_subprocess_exec("/usr/bin/echo", "sub", stdout=asyncio.subprocess.PIPE)
    out, _ = await p.communicate()
    assert out == b"sub\n", out
    await asyncio.gather(*(asyncio.sleep(0.01) for _ in range(20)))
    print("ASYNCIO_OK", flush=True)

def main():
    # everything at the top level of the script runs again in each "spawn" child: keep it here
    asyncio.run(amain())
    for method in ("fork", "spawn", "forkserver"):
        ctx = multiprocessing.get_context(method)
        with ctx.Pool(2) as pool:
            assert pool.map(sq, range(8)) == [x * x for x in range(8)]
        print("MP_%s_OK" % method.upper(), flush=True)
    q = multiprocessing.Queue()
    p = multiprocessing.Process(target=q.put, args=(42,))
    p.start()
    assert q.get(timeout=10) == 42
    p.join()
    print("MP_PROCESS_QUEUE_OK", flush=True)
    out = subprocess.run(["/usr/bin/echo", "hi"], capture_output=True, check=True).stdout
    assert out == b"hi\n", out
    out = subprocess.run("echo $((6*7)) | cat", shell=True, capture_output=True, text=True).stdout
    assert out.strip() == "42", out
    print("SUBPROCESS_OK", flush=True)
    seen = []
    ts = [threading.Thread(target=lambda i=i: seen.append(i)) for i in range(16)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert sorted(seen) == list(range(16))
    from concurrent.futures import ThreadPoolExecutor, ProcessPoolExecutor
    with ThreadPoolExecutor(4) as ex:
        assert list(ex.map(sq, range(5))) == [0, 1, 4, 9, 16]
    with ProcessPoolExecutor(2) as ex:
        assert list(ex.map(sq, range(5))) == [0, 1, 4, 9, 16]
    print("THREADING_OK", flush=True)
    if kind == "inet":
        s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        s.close()
    print("PYOK", flush=True)


if __name__ == "__main__":
    main()
EOF
cat >"$WORK/node_work.js" <<'EOF'
const cp = require('child_process'), wt = require('worker_threads');
const net = require('net'), fs = require('fs'), os = require('os');
const kind = process.argv[2];
(async () => {
  const out = cp.execFileSync('/usr/bin/echo', ['hi']).toString();
  if (out !== 'hi\n') throw new Error('execFileSync: ' + out);
  const sh = cp.execSync('echo $((6*7)) | cat').toString().trim();
  if (sh !== '42') throw new Error('execSync: ' + sh);
  await new Promise((res, rej) => {
    const c = cp.spawn(process.execPath, ['-e', 'process.stdout.write("child")']);
    let d = '';
    c.stdout.on('data', (x) => { d += x; });
    c.on('exit', (code) => (code === 0 && d === 'child' ? res() : rej(new Error('spawn ' + code))));
  });
  fs.writeFileSync('/tmp/child.js', 'process.send(7 * 6)');
  const f = cp.fork('/tmp/child.js');
  const fm = await new Promise((res) => f.on('message', res));
  if (fm !== 42) throw new Error('fork: ' + fm);
  console.log('CHILD_PROCESS_OK');
  await fs.promises.writeFile('/tmp/f', 'data');
  if ((await fs.promises.readFile('/tmp/f', 'utf8')) !== 'data') throw new Error('fs');
  console.log('FS_OK');
  try { // inotify: allowed by default; strict answers EMFILE (instances count against the uid)
    fs.watch('/tmp', () => {}).close();
    console.log('WATCH_OK');
  } catch (e) {
    console.log('WATCH_' + e.code);
  }
  const results = await Promise.all([1, 2, 3, 4].map((n) => new Promise((res, rej) => {
    const wk = new wt.Worker(
      'const { parentPort, workerData } = require("worker_threads");' +
      'parentPort.postMessage(workerData * 10)', { eval: true, workerData: n });
    wk.on('message', res);
    wk.on('error', rej);
  })));
  if (results.join(',') !== '10,20,30,40') throw new Error('workers: ' + results);
  const sab = new SharedArrayBuffer(4);
  await new Promise((res, rej) => {
    const wk = new wt.Worker('const { workerData } = require("worker_threads");' +
      'Atomics.add(new Int32Array(workerData), 0, 5)', { eval: true, workerData: sab });
    wk.on('exit', res);
    wk.on('error', rej);
  });
  if (new Int32Array(sab)[0] !== 5) throw new Error('atomics');
  console.log('WORKER_THREADS_OK');
  const addr = kind === 'inet' ? { host: '127.0.0.1', port: 0 } : { path: '/tmp/node.sock' };
  const srv = net.createServer((s) => s.pipe(s));
  await new Promise((res) => srv.listen(addr, res));
  const a = srv.address();
  const to = typeof a === 'string' ? { path: a } : { host: '127.0.0.1', port: a.port };
  const got = await new Promise((res, rej) => {
    const c = net.connect(to, () => c.write('ping'));
    c.on('data', (d) => { c.end(); res(String(d)); });
    c.on('error', rej);
  });
  srv.close();
  if (got !== 'ping') throw new Error('echo: ' + got);
  console.log('NET_OK');
  if (os.cpus().length < 1) throw new Error('os.cpus');
  await new Promise((r) => setTimeout(r, 10));
  await new Promise((r) => setImmediate(r));
  require('crypto').randomBytes(16);
  await new Promise((res, rej) => require('zlib').gzip('x'.repeat(1000), (e) => (e ? rej(e) : res())));
  console.log('NODEOK');
})().catch((e) => { console.error(e); process.exit(1); });
EOF

for pol in default strict; do
    abx --seccomp-policy $pol "$WORK/py_work.py" unix
    is "$rc" 0 "$pol: the Python workload exits 0"
    for m in ASYNCIO_OK MP_FORK_OK MP_SPAWN_OK MP_FORKSERVER_OK MP_PROCESS_QUEUE_OK SUBPROCESS_OK \
        THREADING_OK PYOK; do
        check "$pol: python $m (asyncio over a unix socket, multiprocessing, subprocess, threading)" \
            grep -qx "$m" "$WORK/out"
    done
    abx --seccomp-policy $pol "$WORK/node_work.js" unix
    is "$rc" 0 "$pol: the Node workload exits 0"
    for m in CHILD_PROCESS_OK FS_OK WORKER_THREADS_OK NET_OK NODEOK; do
        check "$pol: node $m (child_process, fs, worker_threads, net over a unix socket)" \
            grep -qx "$m" "$WORK/out"
    done
    if [ $pol = default ]; then
        check "default: node fs.watch (inotify) works" grep -qx WATCH_OK "$WORK/out"
    else
        check "strict: node fs.watch gets EMFILE (inotify refused by design)" \
            grep -qx WATCH_EMFILE "$WORK/out"
    fi
done
# Loopback TCP works by default (and without Landlock); the strict seccomp policy refuses
# AF_INET itself.
abx --without landlock "$WORK/py_work.py" inet
is "$rc" 0 "default --without landlock: python asyncio over TCP on 127.0.0.1 works"
check "default --without landlock: python PYOK (inet)" grep -qx PYOK "$WORK/out"
abx --without landlock "$WORK/node_work.js" inet
is "$rc" 0 "default --without landlock: node net over TCP on 127.0.0.1 works"
check "default --without landlock: node NODEOK (inet)" grep -qx NODEOK "$WORK/out"
cat >"$WORK/inet.py" <<'EOF'
import errno, socket
for fam in (socket.AF_INET, socket.AF_INET6):
    try:
        socket.socket(fam, socket.SOCK_STREAM).close()
        print("%s OK" % fam.name)
    except OSError as e:
        print("%s %s" % (fam.name, errno.errorcode[e.errno]))
EOF
abx --without landlock --seccomp-policy strict "$WORK/inet.py"
check "strict --without landlock: python cannot make an AF_INET socket" grep -qx "AF_INET EAFNOSUPPORT" "$WORK/out"
check "strict --without landlock: python cannot make an AF_INET6 socket" grep -qx "AF_INET6 EAFNOSUPPORT" "$WORK/out"
abx --without landlock "$WORK/inet.py"
check "default --without landlock: AF_INET sockets can be made (the control)" grep -qx "AF_INET OK" "$WORK/out"

done_testing

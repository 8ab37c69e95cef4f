#!/bin/sh
# test-limits.sh -- resource limits, checked on the host (threats T16-T23): a fork bomb, memory
# bombs (one process and four), /tmp and /dev/shm fills, a workspace disk fill and inode flood,
# a 1 TiB sparse file, a file-size hit the script swallowed, a CPU hog, stdout/stderr floods
# and a CPU-time spinner, in Python and Node. Each asserts the report's status, limits.<name>
# and usage as far as the mode provides them. Nonsense limit values are usage errors. As root:
# no run cgroup is left behind, and the cgroup of a SIGKILLed agentbox is swept by the next
# start.
# Every attack has its own cap, runs under an outer timeout and under small explicit limits.
# shellcheck source-path=SCRIPTDIR
# shellcheck source=lib.sh
. "$AB_TESTDIR/integration/lib.sh"

MiB=1048576
CGV1=/sys/fs/cgroup/pids/agentbox
CG_CHECKED=0
CG_LEFT=
# abb SECS ARGS...: like ab, under an outer timeout, never reading a stale report. As root
# with v1 cgroups, also notes any run cgroup left behind by the run (checked at the end).
abb() {
    abb_core "$@"
    cg_note
}
# run_suffix: the random suffix of the last run's directory ("" when there was none)
run_suffix() {
    [ -f "$WORK/r.json" ] || return 0
    jq -r '.run_dir // ""' "$WORK/r.json" | sed -n 's|.*/run-||p'
}
# cg_dirs SUFFIX: v1 run cgroups of the run whose directory ends in SUFFIX
cg_dirs() {
    for _d in /sys/fs/cgroup/*/agentbox/run-*-"$1"; do
        [ -d "$_d" ] && echo "$_d"
    done
    return 0
}
cg_note() {
    is_root && [ -d "$CGV1" ] || return 0
    _s=$(run_suffix)
    [ -n "$_s" ] || return 0
    CG_CHECKED=$((CG_CHECKED + 1))
    _left=$(cg_dirs "$_s")
    [ -z "$_left" ] || CG_LEFT="$CG_LEFT $_left"
}
# num VALUE: VALUE is a whole number
num() { case $1 in '' | *[!0-9]*) return 1 ;; esac; }
# le A B MSG / ge A B MSG: numeric comparisons that fail on null or garbage
le() {
    if num "$1" && num "$2" && [ "$1" -le "$2" ]; then ok "$3"; else not_ok "$3" "got: '$1', want <= $2"; fi
}
ge() {
    if num "$1" && num "$2" && [ "$1" -ge "$2" ]; then ok "$3"; else not_ok "$3" "got: '$1', want >= $2"; fi
}
# ratio_le A B MAX MSG: A/B <= MAX
ratio_le() {
    if num "$1" && num "$2" && [ "$2" -gt 0 ] && awk "BEGIN { exit !($1 / $2 <= $3) }"; then
        ok "$4 ($1/$2)"
    else
        not_ok "$4" "got: $1/$2, want <= $3"
    fi
}
# hit NAME: the last report's limits_hit contains NAME
hit() { jq -e --arg n "$1" '.limits_hit | index($n) != null' "$WORK/r.json" >/dev/null 2>&1; }
# jqe FILTER: FILTER is true on the last report
jqe() { jq -e "$1" "$WORK/r.json" >/dev/null 2>&1; }
# val KEY: KEY=VALUE printed by the script (first occurrence)
val() { tr ' ' '\n' <"$WORK/out" | sed -n "s/^$1=//p" | head -n1; }
# dfused DIR: KiB used on the filesystem holding DIR
dfused() { df -Pk "$1" | awk 'NR == 2 { print $3 }'; }
host_forks() { sh -c true && /bin/true; }

mkdir -p "$RUNS"
touch "$WORK/stamp"
TOKEN=ablim$$x$(date +%s)

cat >"$WORK/hello.py" <<'EOF'
print("hello")
EOF

# What the mode offers: a cgroup (root here; a delegated v2 cgroup elsewhere) or not.
abb 60 "$WORK/hello.py"
[ "$rc" -eq 0 ] || bail "a plain run fails (rc $rc): $(head -c 300 "$WORK/err")"
CG=$(jr .sandbox.cgroup.enforced)
# Memory without a memory cgroup: the supervisor's watchdog (src/supervisor/memwatch.h, issue 18)
MEMWATCH=false
case $(jr .limits.memory.mechanism) in "agentbox watchdog"*) MEMWATCH=true ;; esac
SAFE="--memory 256M --pids 64 --timeout 20s"
if [ "$CG" = true ]; then
    echo "# mode: cgroup ($(jr .sandbox.cgroup.detail)), memory watchdog: $MEMWATCH"
else
    echo "# mode: no cgroup, memory by the watchdog: $MEMWATCH"
fi

# ---- T24: the caller's per-uid quotas (issue 18) ------------------------------------------
# Unprivileged, the script runs as the caller's uid: inotify instances it holds would come out
# of the caller's quota (fs.inotify.max_user_instances, 128 by default). The script takes all
# it can and holds them; meanwhile the caller (this shell, same uid) must still get its own.
cat >"$WORK/inotify.py" <<'EOF'
import ctypes, os, time
libc = ctypes.CDLL(None, use_errno=True)
fds = []
err = 0
while len(fds) < 1024:
    fd = libc.inotify_init1(0)
    if fd < 0:
        err = ctypes.get_errno()
        break
    fds.append(fd)
print('held=%d errno=%d' % (len(fds), err), flush=True)
time.sleep(3)
EOF
cat >"$WORK/caller_inotify.py" <<'EOF'
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.inotify_init1(0)
print('caller=%s' % ('ok' if fd >= 0 else 'errno %d' % ctypes.get_errno()))
EOF
if as_user; then
    rm -f "$WORK/r.json"
    bounded 60 "$AGENTBOX" run --runs-dir "$RUNS" --report "$WORK/r.json" --pids 64 --timeout 20s \
        "$WORK/inotify.py" >"$WORK/out" 2>"$WORK/err" &
    apid=$!
    i=0
    while [ $i -lt 100 ] && ! grep -q held= "$WORK/out"; do
        sleep 0.1
        i=$((i + 1))
    done
    caller=$(python3 "$WORK/caller_inotify.py")
    wait "$apid" || true
    is "$caller" "caller=ok" "the caller still gets an inotify instance while a run holds all it can"
    case $(jr .stdout.text) in
    "held=8 errno=24"*) ok "the run held at most 8 instances (EMFILE past that): $(jr .stdout.text | head -n 1)" ;;
    "held=0 errno=24"*) ok "inotify refused in the run (seccomp; read-only /proc/sys)" ;;
    *) not_ok "the run's inotify instances are capped" "got: $(jr .stdout.text)" ;;
    esac
    check "the report says how the caller's quotas are kept" \
        jqe '.sandbox.caller_quotas.enforced and (.sandbox.caller_quotas.detail | test("shares your uid"))'
else
    abb 30 --pids 64 --timeout 20s "$WORK/hello.py"
    check "as root the report says no quota of the caller's is shared" \
        jqe '.sandbox.caller_quotas.enforced and (.sandbox.caller_quotas.detail | test("no quota of the caller"))'
fi

# ---- T16: fork bomb ----------------------------------------------------------------------
# A real (recursive) bomb, capped by itself at 8+64+512 processes; each process logs whether
# its fork worked and how many tasks it saw in the sandbox's /proc.
cat >"$WORK/bomb.py" <<'EOF'
import os, sys, time
log = os.open('/work/bomb.log', os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
def nprocs():
    try:
        return sum(1 for d in os.listdir('/proc') if d.isdigit())
    except OSError:
        return -1
def bomb(depth):
    kids = []
    for i in range(8):
        try:
            pid = os.fork()
        except OSError as e:
            os.write(log, b'E %d\n' % e.errno)
            continue
        if pid == 0:
            try:
                os.write(log, b'P %d\n' % nprocs())
                if depth < 3:
                    bomb(depth + 1)
                else:
                    time.sleep(2)
            finally:
                os._exit(0)
        kids.append(pid)
    for k in kids:
        os.waitpid(k, 0)
bomb(0)
os.close(log)
ok = refused = peak = 0
errnos = set()
for line in open('/work/bomb.log'):
    kind, v = line.split()
    if kind == 'P':
        ok += 1; peak = max(peak, int(v))
    else:
        refused += 1; errnos.add(int(v))
print('forked=%d refused=%d peak=%d errnos=%s' % (ok, refused, peak, ','.join(map(str, sorted(errnos)))))
EOF
cat >"$WORK/bomb.js" <<'EOF'
// spawns up to 300 sleepers at once; counts the ones the kernel refused and the peak alive
const { spawn } = require('child_process');
const dur = process.argv[3];
let n = 300, started = 0, refused = 0, settled = 0, live = 0, peak = 0;
const codes = new Set();
function settle() {
  if (++settled === n)
    console.log(`forked=${started} peak=${peak} refused=${refused} codes=${[...codes].join(',')}`);
}
for (let i = 0; i < n; i++) {
  let done = false;
  const fin = () => { if (!done) { done = true; settle(); } };
  try {
    const c = spawn('/bin/sleep', [dur], { stdio: 'ignore' });
    c.on('error', (e) => { refused++; codes.add(e.code); fin(); });
    c.on('spawn', () => { started++; live++; peak = Math.max(peak, live); });
    c.on('exit', () => { live--; fin(); });
  } catch (e) { refused++; codes.add(e.code); fin(); }
}
EOF
# Its memory net is 512M, not $SAFE's 256M: the bomb's 64 CPython processes hold 223-254 MiB
# by the watchdog's count (measured as a user, 12 runs), and with a busy CPU more of them are
# alive at once: at 256M one run in 12 ended oom (278 MiB) beside two CPU hogs, and the pids
# limit under test was never reached. The outer timeout and --pids hold it as before.
abb 60 --memory 512M --pids 64 --timeout 20s "$WORK/bomb.py" "$TOKEN"
is "$rc" 0 "py fork bomb: the script ended on its own (rc 0, no timeout)"
is "$(jr .limits.pids.enforced)" 64 "py fork bomb: limits.pids.enforced 64"
is "$(jr .limits.pids.whole_run)" true "py fork bomb: limits.pids covers the whole run"
ge "$(val refused)" 1 "py fork bomb: forks were refused inside ($(val forked) made)"
is "$(val errnos)" 11 "py fork bomb: refused with EAGAIN"
# A /proc scan is not atomic: under fork/exit churn it can count a task that exited and one
# forked after it, and the slower the scan the more (a full suite run at a load of 5 on 2
# cores saw more than 72 once). Two generations of forks (16) of slack; the exact figure is
# the cgroup's usage.tasks_peak, asserted below where there is a cgroup.
le "$(val peak)" 80 "py fork bomb: at most 64 tasks (+16 for the racy /proc scan) visible in the sandbox"
if [ "$CG" = true ]; then
    is "$(jr .status)" pids_limit "py fork bomb: status pids_limit"
    check "py fork bomb: limits_hit has pids" hit pids
    case $(jr .limits.pids.mechanism) in
    "cgroup v"[12]" pids.max") ok "py fork bomb: mechanism is the pids cgroup" ;;
    *) not_ok "py fork bomb: mechanism is the pids cgroup" "got: $(jr .limits.pids.mechanism)" ;;
    esac
    ge "$(jr .usage.pids_refused)" 1 "py fork bomb: usage.pids_refused >= 1"
    le "$(jr .usage.tasks_peak)" 64 "py fork bomb: usage.tasks_peak <= 64"
else
    is "$(jr .limits.pids.mechanism)" "rlimit RLIMIT_NPROC in a per-run user namespace" \
        "py fork bomb: mechanism RLIMIT_NPROC in a per-run user namespace"
    is "$(jr .status)" exited "py fork bomb: status exited (RLIMIT_NPROC hits are not counted)"
    skip "py fork bomb: status pids_limit" "RLIMIT_NPROC refusals are invisible to agentbox"
fi
check "py fork bomb: the host can still fork" host_forks
check "py fork bomb: no bomb process left on the host" no_procs "$TOKEN"

SLEEPDUR=2.0$$
# shellcheck disable=SC2086
abb 60 $SAFE "$WORK/bomb.js" "$TOKEN" "$SLEEPDUR"
is "$rc" 0 "js spawn bomb: the script ended on its own (rc 0)"
ge "$(val refused)" 1 "js spawn bomb: spawns were refused ($(val forked) made)"
is "$(val codes)" EAGAIN "js spawn bomb: refused with EAGAIN"
le "$(val peak)" 64 "js spawn bomb: at most 64 sleepers alive at once ($(val peak))"
if [ "$CG" = true ]; then
    is "$(jr .status)" pids_limit "js spawn bomb: status pids_limit"
    ge "$(jr .usage.pids_refused)" 1 "js spawn bomb: usage.pids_refused >= 1"
    le "$(jr .usage.tasks_peak)" 64 "js spawn bomb: usage.tasks_peak <= 64"
else
    is "$(jr .status)" exited "js spawn bomb: status exited (RLIMIT_NPROC hits are not counted)"
fi
check "js spawn bomb: the host can still fork" host_forks
check "js spawn bomb: no sleeper left on the host" no_procs "sleep $SLEEPDUR"

# --pids N must mean the same as root and as user; a value too small to start the sandbox at
# all should be refused as a usage error, not fail later with a bwrap/fork EAGAIN.
for p in 1 2; do
    abb 30 --pids "$p" --timeout 10s "$WORK/hello.py"
    if [ "$rc" -eq 0 ] || [ "$rc" -eq 2 ]; then
        ok "--pids $p with a script that does not fork: runs, or is a usage error (rc $rc)"
    else
        not_ok "--pids $p with a script that does not fork: runs, or is a usage error" \
            "rc $rc, status $(jr .status): $(jr .message)"
    fi
done

# ---- T17: memory bombs -------------------------------------------------------------------
# Each allocator writes how much it holds to /work/progress* after every 8 MiB chunk: what the
# script held when it was killed, seen from the host after the run (--collect).
cat >"$WORK/mem.py" <<'EOF'
import os
fd = os.open('/work/progress', os.O_WRONLY | os.O_CREAT, 0o644)
b = bytearray()
n = 0
while n < (2 << 30):          # the attack's own cap: 2 GiB
    b += b'\x01' * (8 << 20)
    n += 8 << 20
    os.pwrite(fd, b'%16d\n' % n, 0)
print('survived', n >> 20, flush=True)
EOF
cat >"$WORK/mem.js" <<'EOF'
const fs = require('fs');
const fd = fs.openSync('/work/progress', 'w');
const bufs = [];
let n = 0;
while (n < 2 * 1024 * 1024 * 1024) {   // the attack's own cap: 2 GiB, off the V8 heap
  bufs.push(Buffer.alloc(8 << 20, 1));
  n += 8 << 20;
  fs.writeSync(fd, String(n).padStart(16) + '\n', 0);
}
console.log('survived', n >> 20);
EOF
cat >"$WORK/mem4.py" <<'EOF'
import os, time
kids = []
for i in range(4):
    pid = os.fork()
    if pid == 0:
        fd = os.open('/work/progress.%d' % i, os.O_WRONLY | os.O_CREAT, 0o644)
        b = bytearray()
        n = 0
        while n < (1 << 29):      # each child's own cap: 512 MiB, 2 GiB together
            b += b'\x01' * (8 << 20)
            n += 8 << 20
            os.pwrite(fd, b'%16d\n' % n, 0)
        print('survived', i, flush=True)
        time.sleep(1)
        os._exit(0)
    kids.append(pid)
codes = [os.waitstatus_to_exitcode(os.waitpid(k, 0)[1]) for k in kids]
print('children=' + ','.join(map(str, codes)), flush=True)
EOF
# held DIR: MiB the allocators reported holding, summed
held() { cat "$1"/progress* 2>/dev/null | awk '{ s += $1 } END { printf "%d\n", s / 1048576 }'; }
if [ "$CG" = true ] && [ "$MEMWATCH" = false ]; then
    for s in mem.py mem.js mem4.py; do
        # shellcheck disable=SC2086
        abb 60 $SAFE "$WORK/$s"
        is "$(jr .status)" oom "$s: status oom under --memory 256M"
        ge "$(jr .usage.oom_kills)" 1 "$s: usage.oom_kills >= 1"
        le "$(jr .usage.memory_peak_bytes)" $((256 * MiB + 4 * MiB)) \
            "$s: usage.memory_peak_bytes <= 256M + 4M"
        refute "$s: no allocator survived" grep -q survived "$WORK/out"
        check "$s: limits_hit has memory" hit memory
        is "$(jr .limits.memory.enforced)" $((256 * MiB)) "$s: limits.memory.enforced 256M"
        is "$(jr .limits.memory.whole_run)" true "$s: limits.memory covers the whole run"
        case $(jr .limits.memory.mechanism) in
        "cgroup v"*) ok "$s: mechanism is the memory cgroup" ;;
        *) not_ok "$s: mechanism is the memory cgroup" "got: $(jr .limits.memory.mechanism)" ;;
        esac
    done
    ge "$(jr .usage.oom_kills)" 4 "mem4.py: each of the four allocators was OOM-killed"
    is "$(val children)" "-9,-9,-9,-9" "mem4.py: the parent saw its four children SIGKILLed"
elif [ "$MEMWATCH" = true ]; then
    # The watchdog polls: a run is stopped a little past the limit. The bound here (256M +
    # 96M at most) is what docs/design.md promises; the measured numbers are printed.
    for s in mem.py mem.js mem4.py; do
        col=$WORK/col-$s
        rm -rf "$col"
        # shellcheck disable=SC2086
        abb 60 $SAFE --collect "$col" "$WORK/$s"
        is "$(jr .status)" oom "$s: status oom under --memory 256M (watchdog)"
        is "$rc" 137 "$s: exit 137, as for a kernel OOM kill"
        refute "$s: no allocator survived" grep -q survived "$WORK/out"
        check "$s: limits_hit has memory" hit memory
        check "$s: the message names the watchdog and the limit" \
            jqe '.message | test("watchdog measured [0-9]+ bytes against --memory 268435456")'
        is "$(jr .limits.memory.enforced)" $((256 * MiB)) "$s: limits.memory.enforced 256M"
        is "$(jr .limits.memory.whole_run)" true "$s: limits.memory covers the whole run"
        case $(jr .limits.memory.mechanism) in
        "agentbox watchdog"*) ok "$s: mechanism names the watchdog" ;;
        *) not_ok "$s: mechanism names the watchdog" "got: $(jr .limits.memory.mechanism)" ;;
        esac
        h=$(held "$col")
        echo "# $s: the watchdog measured $(($(jr .usage.memory_peak_bytes) / MiB)) MiB at the kill; the script held $h MiB (limit 256)"
        le "$(jr .usage.memory_peak_bytes)" $((256 * MiB + 96 * MiB)) \
            "$s: stopped within 96 MiB of the limit (measured peak)"
        if num "$h" && [ "$h" -ge 64 ] && [ "$h" -le $((256 + 96)) ]; then
            ok "$s: the script held $h MiB when killed (<= 256 + 96)"
        else
            not_ok "$s: the script held at most 256 + 96 MiB when killed" "held: '$h'"
        fi
    done
    is "$(val children)" "" "mem4.py: the parent never saw its children end (all killed at once)"
    # copy-on-write after fork is counted once: 4 children sharing a 120 MiB heap fit in 256M
    cat >"$WORK/cow.py" <<'EOF'
import os, time
b = bytearray(120 << 20)
for i in range(0, len(b), 4096):
    b[i] = 1
kids = []
for i in range(4):
    pid = os.fork()
    if pid == 0:
        time.sleep(1)
        os._exit(0)
    kids.append(pid)
for k in kids:
    os.waitpid(k, 0)
print('cow ok', flush=True)
EOF
    # shellcheck disable=SC2086
    abb 60 $SAFE "$WORK/cow.py"
    is "$(jr .status)/$(cat "$WORK/out")" "exited/cow ok" \
        "5 processes sharing 120 MiB copy-on-write are not killed at 256M (precise count)"
    # memory the watchdog could not see is refused (memfd_create is ENOSYS), and a shared
    # anonymous mapping is counted (RssShmem)
    cat >"$WORK/hidden.py" <<'EOF'
import os, mmap
try:
    os.memfd_create('x')
    print('memfd=ok', flush=True)
except OSError as e:
    print('memfd=%d' % e.errno, flush=True)
m = mmap.mmap(-1, 512 << 20, flags=mmap.MAP_SHARED)
for i in range(0, 512 << 20, 1 << 20):
    m[i:i + (1 << 20)] = b'\x01' * (1 << 20)
print('sharedanon=survived', flush=True)
EOF
    # shellcheck disable=SC2086
    abb 60 $SAFE "$WORK/hidden.py"
    is "$(val memfd)" 38 "memfd_create is ENOSYS under the watchdog (callers fall back to /dev/shm)"
    is "$(jr .status)" oom "512 MiB of shared anonymous memory: status oom at 256M"
else
    skip "memory bombs end with status oom" "no memory limit in this mode: $(jr .limits.memory.mechanism)"
fi
if [ "$CG" = true ] || [ "$MEMWATCH" = true ]; then
    # tmpfs pages count against --memory: /dev/shm bigger than the memory limit
    cat >"$WORK/shmfill.py" <<'EOF'
n = 0
try:
    with open('/dev/shm/fill', 'wb', buffering=0) as f:
        while n < (512 << 20):
            n += f.write(b'\x5a' * (1 << 20))
except OSError as e:
    print('err=%d' % e.errno)
print('written=%d' % n, flush=True)
EOF
    abb 60 --memory 128M --tmp-size 512M --pids 64 --timeout 20s "$WORK/shmfill.py"
    w=$(val written)
    if [ "$(jr .status)" = oom ] || { num "$w" && [ "$w" -lt $((128 * MiB)) ]; }; then
        ok "/dev/shm pages count against --memory (status $(jr .status), written '${w:-}')"
    else
        not_ok "/dev/shm pages count against --memory" "status $(jr .status), written $w"
    fi
fi

# ---- T18/T19/T20: /tmp, /dev/shm, the workspace, inodes ---------------------------------
cat >"$WORK/fill.py" <<'EOF'
import errno, sys
path = sys.argv[1]
n = 0
err = 'none'
chunk = b'\x5a' * (1 << 20)
try:
    with open(path, 'wb', buffering=0) as f:
        while n < (512 << 20):         # the attack's own cap: 512 MiB
            n += f.write(chunk)
except OSError as e:
    err = errno.errorcode.get(e.errno, str(e.errno))
print('written=%d err=%s' % (n, err), flush=True)
EOF
cat >"$WORK/fill.js" <<'EOF'
const fs = require('fs');
const chunk = Buffer.alloc(1 << 20, 0x5a);
let n = 0, err = 'none';
try {
  const fd = fs.openSync(process.argv[2], 'w');
  while (n < 512 * 1024 * 1024) n += fs.writeSync(fd, chunk);   // the attack's own cap
} catch (e) { err = e.code; }
console.log(`written=${n} err=${err}`);
EOF
for s in fill.py fill.js; do
    for d in /tmp /dev/shm; do
        # shellcheck disable=SC2086
        abb 60 $SAFE --tmp-size 16M --rm "$WORK/$s" "$d/fill-$TOKEN"
        is "$(val err)" ENOSPC "$s $d: the fill ends with ENOSPC"
        le "$(val written)" $((16 * MiB)) "$s $d: at most --tmp-size 16M written ($(val written))"
        ge "$(val written)" $((8 * MiB)) "$s $d: the fill got going"
        is "$(jr .limits.\"tmp-size\".enforced)" $((16 * MiB)) "$s $d: limits.tmp-size.enforced 16M"
        is "$(jr .limits.\"tmp-size\".mechanism)" "tmpfs size= and nr_inodes= on /tmp and /dev/shm" \
            "$s $d: limits.tmp-size mechanism"
    done
done
check "tmp fills: no fill file on the host's /tmp or /dev/shm" \
    test ! -e "/tmp/fill-$TOKEN" -a ! -e "/dev/shm/fill-$TOKEN"

# The host filesystems' growth during a fill: a fill that landed on the host disk grows one of
# them by the whole 64 MiB each time. Another test writing there at the same moment (the
# suite runs two at a time) can too, once: a fill whose growth passes 16 MiB is run again, up
# to twice, and the smallest growth counts.
grow=0
growvt=0
for s in fill.py fill.js; do
    g=-1
    gvt=-1
    for _try in 1 2 3; do
        b0=$(dfused "$WORK")
        v0=$(dfused /var/tmp)
        # shellcheck disable=SC2086
        abb 60 $SAFE --disk 64M --rm "$WORK/$s" /work/fill
        b1=$(dfused "$WORK")
        v1=$(dfused /var/tmp)
        { [ "$g" -lt 0 ] || [ $((b1 - b0)) -lt "$g" ]; } && g=$((b1 - b0))
        { [ "$gvt" -lt 0 ] || [ $((v1 - v0)) -lt "$gvt" ]; } && gvt=$((v1 - v0))
        [ "$g" -le 16384 ] && [ "$gvt" -le 16384 ] && break
        echo "# $s workspace: the host filesystems grew by $g / $gvt KiB; measuring again"
    done
    [ "$g" -gt "$grow" ] && grow=$g
    [ "$gvt" -gt "$growvt" ] && growvt=$gvt
    is "$(jr .status)" disk_limit "$s workspace: status disk_limit"
    check "$s workspace: limits_hit has disk" hit disk
    is "$(val err)" ENOSPC "$s workspace: the fill ends with ENOSPC"
    le "$(val written)" $((64 * MiB)) "$s workspace: at most --disk 64M written ($(val written))"
    ge "$(val written)" $((32 * MiB)) "$s workspace: the fill got going"
    le "$(jr .usage.workspace_bytes)" $((64 * MiB)) "$s workspace: usage.workspace_bytes <= 64M"
    is "$(jr .limits.disk.enforced)" $((64 * MiB)) "$s workspace: limits.disk.enforced 64M"
    is "$(jr .limits.disk.mechanism)" "tmpfs size= on the workspace" "$s workspace: limits.disk mechanism"
    is "$(jr .run_dir_kept)" false "$s workspace: --rm removed the run directory"
done
le "$grow" 16384 "workspace fills: the host filesystem of \$WORK grew by at most 16 MiB (${grow} KiB)"
le "$growvt" 16384 "workspace fills: the host filesystem of /var/tmp grew by at most 16 MiB (${growvt} KiB)"

cat >"$WORK/inodes.py" <<'EOF'
import errno, os
n = 0
err = 'none'
os.mkdir('/work/flood')
while n < 100000:           # the attack's own cap
    try:
        os.close(os.open('/work/flood/f%d' % n, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
    except OSError as e:
        err = errno.errorcode.get(e.errno, str(e.errno))
        break
    n += 1
print('created=%d err=%s' % (n, err), flush=True)
EOF
cat >"$WORK/inodes.js" <<'EOF'
const fs = require('fs');
let n = 0, err = 'none';
fs.mkdirSync('/work/flood');
while (n < 100000) {        // the attack's own cap
  try { fs.closeSync(fs.openSync('/work/flood/f' + n, 'wx')); } catch (e) { err = e.code; break; }
  n++;
}
console.log(`created=${n} err=${err}`);
EOF
for s in inodes.py inodes.js; do
    # shellcheck disable=SC2086
    abb 60 $SAFE --inodes 2000 --rm "$WORK/$s"
    is "$(jr .status)" disk_limit "$s: status disk_limit"
    check "$s: limits_hit has inodes" hit inodes
    is "$(val err)" ENOSPC "$s: the flood ends with ENOSPC"
    le "$(val created)" 2000 "$s: at most --inodes 2000 files ($(val created))"
    ge "$(val created)" 1900 "$s: the flood got going"
    le "$(jr .usage.workspace_entries)" 2000 "$s: usage.workspace_entries <= 2000"
    is "$(jr .limits.inodes.enforced)" 2000 "$s: limits.inodes.enforced 2000"
    is "$(jr .limits.inodes.mechanism)" "tmpfs nr_inodes= on the workspace" "$s: limits.inodes mechanism"
done
runs_kib=$(du -sk "$RUNS" | cut -f1)
le "$runs_kib" 4096 "fills and floods: nothing large left under \$RUNS (${runs_kib} KiB)"

# ---- T21: a 1 TiB sparse file ------------------------------------------------------------
cat >"$WORK/sparse.py" <<'EOF'
import errno, os, signal, sys
if len(sys.argv) > 1:
    signal.signal(signal.SIGXFSZ, signal.SIG_DFL)   # do not ignore SIGXFSZ: die of it
def tag(e):
    return errno.errorcode.get(e.errno, str(e.errno))
res = []
try:
    with open('/work/huge1', 'wb') as f:
        f.truncate(1 << 40)
    res.append('truncate=ok')
except OSError as e:
    res.append('truncate=' + tag(e))
try:
    fd = os.open('/work/huge2', os.O_WRONLY | os.O_CREAT, 0o644)
    os.lseek(fd, (1 << 40) - 1, os.SEEK_SET)
    os.write(fd, b'x')
    res.append('seekwrite=ok')
except OSError as e:
    res.append('seekwrite=' + tag(e))
sizes = [os.stat(p).st_size for p in ('/work/huge1', '/work/huge2') if os.path.exists(p)]
res.append('maxsize=%d' % max(sizes + [0]))
print(' '.join(res), flush=True)
EOF
cat >"$WORK/sparse.js" <<'EOF'
const fs = require('fs');
const res = [];
try { const fd = fs.openSync('/work/huge1', 'w'); fs.ftruncateSync(fd, 2 ** 40); res.push('truncate=ok'); }
catch (e) { res.push('truncate=' + e.code); }
try { const fd = fs.openSync('/work/huge2', 'w'); fs.writeSync(fd, Buffer.from('x'), 0, 1, 2 ** 40 - 1); res.push('seekwrite=ok'); }
catch (e) { res.push('seekwrite=' + e.code); }
let max = 0;
for (const p of ['/work/huge1', '/work/huge2']) { try { max = Math.max(max, fs.statSync(p).size); } catch (e) {} }
res.push('maxsize=' + max);
console.log(res.join(' '));
EOF
for s in sparse.py sparse.js; do
    # shellcheck disable=SC2086
    abb 60 $SAFE --file-size 1M "$WORK/$s"
    is "$(val truncate)" EFBIG "$s: truncate to 1 TiB refused with EFBIG"
    is "$(val seekwrite)" EFBIG "$s: a write at 1 TiB - 1 refused with EFBIG"
    is "$(val maxsize)" 0 "$s: no file grew inside the sandbox"
    case $(jr .status) in
    exited | file_size_limit) ok "$s: status $(jr .status) (the script coped with EFBIG)" ;;
    *) not_ok "$s: status exited or file_size_limit" "got: $(jr .status)" ;;
    esac
    le "$(jq '[.files[]? | .size] | max // 0' "$WORK/r.json")" $MiB "$s: every file in files[] <= --file-size"
    is "$(jr .limits.\"file-size\".enforced)" $MiB "$s: limits.file-size.enforced 1M"
    is "$(jr .limits.\"file-size\".mechanism)" "rlimit RLIMIT_FSIZE" "$s: limits.file-size mechanism"
done
# shellcheck disable=SC2086
abb 60 $SAFE --file-size 1M "$WORK/sparse.py" dfl
is "$(jr .status)" file_size_limit "sparse.py with SIGXFSZ at default: status file_size_limit"
is "$(jr .signal_name)" XFSZ "sparse.py with SIGXFSZ at default: killed by SIGXFSZ"
check "sparse.py with SIGXFSZ at default: limits_hit has file-size" hit file-size
big=$(find "$WORK" /var/tmp -xdev -newer "$WORK/stamp" -type f -size +1G 2>/dev/null | head -n3)
is "$big" "" "sparse files: no file over 1 GiB appeared on the host"

# ---- T21 (issue 13): a file-size hit the script swallowed ----------------------------------
# CPython and Node ignore SIGXFSZ, so writing past --file-size is only an EFBIG; a script that
# catches it and exits 0 must still show "file-size" in limits_hit (agentbox-init's scan after
# the interpreter ends, init/proto.h), with status exited, its own exit code and a fix. Args:
# the byte count and the directory. A file just under the limit, and an --input over the
# limit that the script never touched, are not a hit.
cat >"$WORK/fsize.py" <<'EOF'
import errno, os, sys
n, d = int(sys.argv[1]), sys.argv[2]
p = os.path.join(d, "big.bin")
try:
    with open(p, "wb") as f:
        for _ in range(n // 65536):
            f.write(b"x" * 65536)
        f.write(b"x" * (n % 65536))
    print("write=ok", flush=True)
except OSError as e:
    print("write=" + errno.errorcode.get(e.errno, str(e.errno)), flush=True)
print("size=%d" % os.stat(p).st_size, flush=True)
EOF
cat >"$WORK/fsize.js" <<'EOF'
const fs = require('fs'), path = require('path');
const n = Number(process.argv[2]), p = path.join(process.argv[3], 'big.bin');
try {
  fs.writeFileSync(p, Buffer.alloc(n, 'x'));
  console.log('write=ok');
} catch (e) {
  console.log('write=' + e.code);
}
console.log('size=' + fs.statSync(p).size);
EOF
for s in fsize.py fsize.js; do
    for d in /work /tmp /dev/shm; do
        # shellcheck disable=SC2086
        abb 60 $SAFE --file-size 1M "$WORK/$s" $((2 * MiB)) $d
        is "$rc|$(val write)|$(val size)" "0|EFBIG|$MiB" \
            "$s 2 MiB into $d under --file-size 1M: EFBIG, the file stops at 1 MiB, exit 0"
        is "$(jr .status)|$(jr .exit_code)|$(jr .signal)" "exited|0|null" \
            "$s $d: status exited with the script's own exit code (no signal)"
        check "$s $d: limits_hit has file-size" hit file-size
        is "$(jr .fix)" "raise --file-size" "$s $d: the fix says to raise --file-size"
        is "$(jr .message)" "a file in $d reached --file-size ($MiB bytes): writes past that size fail with EFBIG" \
            "$s $d: the message names $d and the limit"
    done
    # shellcheck disable=SC2086
    abb 60 $SAFE --file-size 1M "$WORK/$s" $((MiB - 1)) /work
    is "$rc|$(val write)|$(val size)" "0|ok|$((MiB - 1))" "$s 1 MiB - 1 byte under --file-size 1M: written"
    is "$(jr .status)|$(jr '.limits_hit | index("file-size")')|$(jr .message)" "exited|null|null" \
        "$s 1 MiB - 1 byte: not a hit, no message"
done
# an --input over the limit: copied in by agentbox before the run, never written by the script
head -c $((2 * MiB)) /dev/zero >"$WORK/big-input.bin"
# shellcheck disable=SC2086
abb 60 $SAFE --file-size 1M --input "$WORK/big-input.bin" "$WORK/hello.py"
is "$rc|$(jr .status)" "0|exited" "a 2 MiB --input under --file-size 1M: the run exits 0"
is "$(jr '.limits_hit | index("file-size")')" null \
    "a 2 MiB --input the script did not touch is not a file-size hit"
rm -f "$WORK/big-input.bin"
# SIGXFSZ at its default: killed, status file_size_limit, one file-size entry, the same fix
cat >"$WORK/fsize_dfl.py" <<'EOF'
import signal
signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
with open("/work/big.bin", "wb") as f:
    f.write(b"x" * (2 << 20))
EOF
# shellcheck disable=SC2086
abb 60 $SAFE --file-size 1M "$WORK/fsize_dfl.py"
is "$(jr .status)|$(jr .signal_name)|$(jr .fix)" "file_size_limit|XFSZ|raise --file-size" \
    "fsize_dfl.py: killed by SIGXFSZ: status file_size_limit with the fix"
is "$(jq '[.limits_hit[] | select(. == "file-size")] | length' "$WORK/r.json")" 1 \
    "fsize_dfl.py: file-size is in limits_hit once"

# ---- T22: CPU hog on all cores -----------------------------------------------------------
# Two processes spin for 0.75 s of CPU time each (the work is CPU time, so a loaded machine
# only stretches the wall time, and the ratios below only drop; 30 s of wall time is their own
# safety net); with an argument each first tries to widen its CPU affinity.
cat >"$WORK/hog.py" <<'EOF'
import os, sys, time
kids = []
for i in range(2):
    pid = os.fork()
    if pid == 0:
        if len(sys.argv) > 1:
            try:
                os.sched_setaffinity(0, range(os.cpu_count() or 1))
                print('widen=ok', flush=True)
            except OSError as e:
                print('widen=%d' % e.errno, flush=True)
        end = time.monotonic() + 30
        while time.process_time() < 0.75 and time.monotonic() < end:
            pass
        os._exit(0)
    kids.append(pid)
for k in kids:
    os.waitpid(k, 0)
print('done', flush=True)
EOF
if [ "$CG" = true ]; then
    # shellcheck disable=SC2086
    abb 60 $SAFE --cpus 0.5 "$WORK/hog.py" widen
    is "$(jr .status)" exited "cpu hog --cpus 0.5: ran to the end"
    ratio_le "$(jr .usage.cpu_ms)" "$(jr .wall_ms)" 0.65 "cpu hog --cpus 0.5: cpu_ms/wall_ms <= 0.65"
    ge "$(jr .usage.cpu_ms)" 1400 "cpu hog --cpus 0.5: both spun their 0.75 s"
    is "$(jr .limits.cpus.enforced)" 500 "cpu hog: limits.cpus.enforced 500 (milli-cores)"
    is "$(jr .limits.cpus.whole_run)" true "cpu hog: limits.cpus covers the whole run"
    case $(jr .limits.cpus.mechanism) in
    "cgroup v"*) ok "cpu hog: mechanism is the cpu cgroup" ;;
    *) not_ok "cpu hog: mechanism is the cpu cgroup" "got: $(jr .limits.cpus.mechanism)" ;;
    esac
else
    abb 60 --pids 64 --timeout 20s "$WORK/hog.py"
    is "$(jr .status)" exited "cpu hog (default 1 core): ran to the end"
    ratio_le "$(jr .usage.cpu_ms)" "$(jr .wall_ms)" 1.15 "cpu hog (default 1 core): cpu_ms/wall_ms <= 1.15"
    ge "$(jr .usage.cpu_ms)" 1400 "cpu hog: both spun their 0.75 s"
    is "$(jr .limits.cpus.mechanism)" "cpu affinity (whole cores)" "cpu hog: mechanism cpu affinity"
    is "$(jr .limits.cpus.enforced)" 1000 "cpu hog: limits.cpus.enforced 1000"
    is "$(jr .limits.cpus.whole_run)" false "cpu hog: the report says affinity is not a whole-run limit"
    # the strict seccomp policy keeps the script from undoing its pinning
    abb 60 --pids 64 --timeout 20s --seccomp-policy strict "$WORK/hog.py" widen
    is "$(tr ' ' '\n' <"$WORK/out" | grep -c '^widen=1$')" 2 \
        "cpu hog, strict policy: both sched_setaffinity calls got EPERM"
    ratio_le "$(jr .usage.cpu_ms)" "$(jr .wall_ms)" 1.15 "cpu hog, strict policy: cpu_ms/wall_ms <= 1.15"
    # Concurrent runs claim different cores (a lock per core in RUNS/.cache), so two of
    # them never share one core while another idles.
    if [ "$(nproc)" -ge 2 ]; then
        cat >"$WORK/aff.py" <<'EOF'
import os, time
print('cpus=' + ','.join(map(str, sorted(os.sched_getaffinity(0)))), flush=True)
time.sleep(3)
EOF
        for i in 1 2; do
            bounded 30 "$AGENTBOX" run --runs-dir "$RUNS" --rm "$WORK/aff.py" \
                >"$WORK/aff$i.out" 2>/dev/null &
        done
        wait
        a1=$(sed -n 's/^cpus=//p' "$WORK/aff1.out")
        a2=$(sed -n 's/^cpus=//p' "$WORK/aff2.out")
        case "$a1" in
        *,* | "") not_ok "concurrent runs: each pinned to one core" "got '$a1' and '$a2'" ;;
        *) ok "concurrent runs: each pinned to one core" ;;
        esac
        if [ -n "$a1" ] && [ "$a1" != "$a2" ]; then
            ok "concurrent runs: pinned to different cores ($a1, $a2)"
        else
            not_ok "concurrent runs: pinned to different cores" "got '$a1' and '$a2'"
        fi
        check "core claims are lock files in the runs cache" \
            test -f "$RUNS/.cache/cpu-$a1.lock"
    else
        skip "concurrent runs: pinned to different cores" "one core"
    fi
fi

# ---- T23: output floods ------------------------------------------------------------------
# --on-output-limit kill stops a flooding run at the cap (an option since issue 25: by default
# the run goes on, which the end of this section checks)
cat >"$WORK/flood.py" <<'EOF'
import sys
stream = sys.stderr.buffer if len(sys.argv) > 1 else sys.stdout.buffer
line = b'y' * 1023 + b'\n'
for i in range(50 * 1024):        # 50 MiB
    stream.write(line)
stream.flush()
print('flood done', file=sys.stderr)
EOF
cat >"$WORK/flood.js" <<'EOF'
const chunk = ('y'.repeat(1023) + '\n').repeat(1024);   // 1 MiB
let i = 0;
function more() {
  while (i < 50) { i++; if (!process.stdout.write(chunk)) { process.stdout.once('drain', more); return; } }
  process.stderr.write('flood done\n');
}
more();
EOF
have_time=0
[ -x /usr/bin/time ] && /usr/bin/time -f %M -o "$WORK/time.probe" true 2>/dev/null && have_time=1
rm -f "$WORK/r.json"
rc=0
if [ $have_time = 1 ]; then
    # shellcheck disable=SC2086
    bounded 60 /usr/bin/time -f %M -o "$WORK/time" "$AGENTBOX" run --runs-dir "$RUNS" \
        --report "$WORK/r.json" $SAFE --output-limit 1M --on-output-limit kill --rm "$WORK/flood.py" \
        >"$WORK/out" 2>"$WORK/err" || rc=$?
    keep_report "$WORK/r.json"
    cg_note
else
    # shellcheck disable=SC2086
    abb 60 $SAFE --output-limit 1M --on-output-limit kill --rm "$WORK/flood.py"
fi
is "$rc" 137 "py stdout flood: agentbox exits 137 (the run was SIGKILLed at the cap)"
is "$(jr .status)" output_limit "py stdout flood: status output_limit"
check "py stdout flood: limits_hit has output-limit" hit output-limit
is "$(jr .stdout.truncated)" true "py stdout flood: stdout.truncated"
is "$(jr .stdout.captured_bytes)" $MiB "py stdout flood: stdout.captured_bytes == cap"
le "$(jr .stdout.bytes)" $((8 * MiB)) "py stdout flood: stopped soon after the cap ($(jr .stdout.bytes) bytes read)"
le "$(wc -c <"$WORK/out")" $MiB "py stdout flood: at most the cap relayed"
le "$(jr .wall_ms)" 10000 "py stdout flood: agentbox stopped the run promptly"
is "$(jr .limits.\"output-limit\".enforced)" $MiB "py stdout flood: limits.output-limit.enforced 1M"
is "$(jr .limits.\"output-limit\".mechanism)" "agentbox pipe capture" "py stdout flood: limits.output-limit mechanism"
if [ $have_time = 1 ]; then
    # the largest RSS among agentbox and what it reaped (the Python writer included)
    le "$(tail -n1 "$WORK/time")" 49152 "py stdout flood: max RSS of agentbox and its children <= 48 MiB"
else
    skip "py stdout flood: agentbox RSS stays small" "/usr/bin/time is not installed (apt-get install time)"
fi
# shellcheck disable=SC2086
abb 60 $SAFE --output-limit 1M --on-output-limit kill --rm "$WORK/flood.py" stderr
is "$(jr .status)" output_limit "py stderr flood: status output_limit"
is "$(jr .stderr.truncated)" true "py stderr flood: stderr.truncated"
is "$(jr .stderr.captured_bytes)" $MiB "py stderr flood: stderr.captured_bytes == cap"
# shellcheck disable=SC2086
abb 60 $SAFE --output-limit 1M --on-output-limit kill --rm "$WORK/flood.js"
is "$(jr .status)" output_limit "js stdout flood: status output_limit"
is "$(jr .stdout.truncated)" true "js stdout flood: stdout.truncated"
is "$(jr .stdout.captured_bytes)" $MiB "js stdout flood: stdout.captured_bytes == cap"
le "$(wc -c <"$WORK/out")" $MiB "js stdout flood: at most the cap relayed"
le "$(jr .wall_ms)" 10000 "js stdout flood: agentbox stopped the run promptly"
# issue 25: by default a chatty script is not killed: the run goes on past the cap, the relay
# too, the report keeps the first and last bytes, and agentbox holds no more than before
for s in flood.py flood.js; do
    # shellcheck disable=SC2086
    abb 60 $SAFE --output-limit 1M --rm "$WORK/$s"
    is "$rc/$(jr .status)" 0/exited "$s, the default: the run went on to its own end"
    check "$s, the default: limits_hit has output-limit" hit output-limit
    check "$s, the default: it finished (flood done)" jqe '.stderr.text | test("flood done")'
    is "$(jr .stdout.bytes)" $((50 * MiB)) "$s, the default: stdout.bytes counts all 50 MiB"
    is "$(wc -c <"$WORK/out")" $((50 * MiB)) "$s, the default: the live relay got all of it"
    is "$(jr .stdout.captured_bytes)" $MiB "$s, the default: captured_bytes is the cap"
    check "$s, the default: the report's text ends with the stream's end" \
        jqe '.stdout.tail_bytes > 0 and (.stdout.text | endswith("yyy\n"))'
    le "$(jr .agentbox_max_rss_kib)" 32768 "$s, the default: agentbox's own peak RSS (KiB) stays small"
done

# ---- --cpu-time --------------------------------------------------------------------------
# The spinners count CPU time (5 s is their own cap), so a loaded machine only stretches the
# wall time; 30 s of wall time is their safety net (past the 20 s --timeout of $SAFE).
cat >"$WORK/spin.py" <<'EOF'
import time
end = time.monotonic() + 30
while time.process_time() < 5 and time.monotonic() < end:
    pass
print('spun out', flush=True)
EOF
cat >"$WORK/spin.js" <<'EOF'
const end = Date.now() + 30000;
const cpu = () => { const u = process.cpuUsage(); return (u.user + u.system) / 1e6; };
while (cpu() < 5 && Date.now() < end) {}
console.log('spun out');
EOF
for s in spin.py spin.js; do
    # shellcheck disable=SC2086
    abb 60 $SAFE --cpu-time 1s "$WORK/$s"
    is "$(jr .status)" cpu_time_limit "$s --cpu-time 1s: status cpu_time_limit"
    check "$s: limits_hit has cpu-time" hit cpu-time
    refute "$s: the spinner did not run out its own 5 s of CPU" grep -q "spun out" "$WORK/out"
    # What the kernel counted, not wall time. Not ">= 1 s": the RLIMIT_CPU backstop samples
    # CPU time by ticks and can fire at ~0.9 s of the cgroup's exact count.
    ge "$(jr .usage.cpu_ms)" 500 "$s: it spun (usage.cpu_ms >= 0.5 s), then the limit stopped it"
    le "$(jr .usage.cpu_ms)" 2500 "$s: usage.cpu_ms <= 2.5 s"
    is "$(jr .limits.\"cpu-time\".enforced)" 1000 "$s: limits.cpu-time.enforced 1000 ms"
    is "$rc" $((128 + $(jq -r '.signal // 0' "$WORK/r.json"))) "$s: exit status 128 + the signal"
    if [ "$CG" = true ]; then
        is "$(jr .limits.\"cpu-time\".whole_run)" true "$s: cpu-time covers the whole run"
        case $(jr .limits.\"cpu-time\".mechanism) in
        "cgroup v"*"+ RLIMIT_CPU") ok "$s: mechanism cgroup CPU time + RLIMIT_CPU" ;;
        *) not_ok "$s: mechanism cgroup CPU time + RLIMIT_CPU" "got: $(jr .limits.\"cpu-time\".mechanism)" ;;
        esac
    else
        is "$(jr .limits.\"cpu-time\".mechanism)" "rlimit RLIMIT_CPU (per process)" "$s: mechanism RLIMIT_CPU"
        is "$(jr .limits.\"cpu-time\".whole_run)" false "$s: the report says per process"
        check "$s: a warning says --cpu-time is per process" \
            jqe '.warnings | any(test("cpu-time is enforced per process"))'
        case $(jr .signal_name) in
        XCPU | KILL) ok "$s: the spinner got $(jr .signal_name)" ;;
        *) not_ok "$s: the spinner got SIGXCPU or SIGKILL" "got: $(jr .signal_name)" ;;
        esac
    fi
done
# Two processes, each under the budget, together over it.
cat >"$WORK/spin2.py" <<'EOF'
import os, signal, sys, time
kids = []
for i in range(2):
    pid = os.fork()
    if pid == 0:
        while time.process_time() < 0.7:   # each under the 1 s budget
            pass
        os._exit(0)
    kids.append(pid)
for k in kids:
    os.waitpid(k, 0)
print('children done', flush=True)
if len(sys.argv) > 1:
    os.kill(os.getpid(), signal.SIGKILL)
EOF
if [ "$CG" = true ]; then
    # shellcheck disable=SC2086
    abb 60 $SAFE --cpu-time 1s "$WORK/spin2.py"
    is "$(jr .status)" cpu_time_limit "two spinners, 1.4 s in total: status cpu_time_limit (whole run)"
    refute "two spinners: stopped before they finished" grep -q "children done" "$WORK/out"
    le "$(jr .usage.cpu_ms)" 1600 "two spinners: usage.cpu_ms <= 1.6 s"
    skip "per-process cpu-time: a SIGKILL that is not RLIMIT_CPU's is not a cpu-time hit" \
        "a cgroup measures the whole run here: 1.4 s in total is a real hit"
else
    # Per-process RLIMIT_CPU: no process reaches 1 s, then the script SIGKILLs itself.
    abb 60 --pids 64 --timeout 20s --cpu-time 1s "$WORK/spin2.py" selfkill
    check "per-process cpu-time: both children finished under the budget" grep -q "children done" "$WORK/out"
    is "$(jr .signal_name)" KILL "per-process cpu-time: the script killed itself with SIGKILL"
    is "$(jr .status)" signaled \
        "per-process cpu-time: a SIGKILL that is not RLIMIT_CPU's is not a cpu-time hit (status signaled)"
    refute "per-process cpu-time: limits_hit has no cpu-time" hit cpu-time
fi

# ---- nonsense limit values ---------------------------------------------------------------
nruns_before=$(find "$RUNS" -mindepth 1 -maxdepth 1 -name 'run-*' | wc -l)
for a in "--memory lots" "--cpus -1" "--timeout 5parsecs" "--memory 0" "--pids 0" "--disk 1Q" \
    "--tmp-size -5M" "--cpu-time -1s" "--inodes abc" "--file-size 1.5.5M" "--output-limit 12XB"; do
    # shellcheck disable=SC2086 # "OPTION VALUE"
    abb 30 $a "$WORK/hello.py"
    is "$rc" 2 "'$a': a usage error (rc 2)"
    is "$(jr .status)" usage_error "'$a': report status usage_error"
    check "'$a': the message names the option" grep -q -- "${a%% *}" "$WORK/err"
done
is "$(find "$RUNS" -mindepth 1 -maxdepth 1 -name 'run-*' | wc -l)" "$nruns_before" \
    "nonsense limits: no run directory was created"
refute "nonsense limits: nothing ran" grep -q hello "$WORK/out"

# ---- run cgroups: none left behind; a SIGKILLed agentbox's cgroup is swept ---------------
if is_root && [ -d "$CGV1" ]; then
    is "${CG_LEFT:-none}" none "no run cgroup left after $CG_CHECKED root runs"

    cat >"$WORK/sleep.py" <<'EOF'
import time
print('sleeping', flush=True)
time.sleep(30)
EOF
    "$AGENTBOX" run --runs-dir "$RUNS" --report "$WORK/rk.json" --timeout 40s --memory 256M \
        --pids 64 "$WORK/sleep.py" "$TOKEN-k" >"$WORK/kout" 2>"$WORK/kerr" &
    abpid=$!
    i=0
    while ! grep -q sleeping "$WORK/kout" 2>/dev/null && [ $i -lt 200 ]; do
        sleep 0.05
        i=$((i + 1))
    done
    # the run's cgroup (run-PID-...) belongs to its supervisor: agentbox run's own process,
    # which runs its supervisor in itself (a library caller's is a grandchild, under the
    # intermediate process); SIGKILLed, it leaves its cgroup behind
    suppid=$abpid
    stale=$(for d in /sys/fs/cgroup/*/agentbox/run-"${suppid:-none}"-*; do [ -d "$d" ] && echo "$d"; done)
    check "kill -9: the sleeping run was up, with its supervisor's cgroup" test -n "$stale"
    [ -n "$suppid" ] && kill -9 "$suppid" 2>/dev/null
    wait "$abpid" 2>/dev/null
    # right away: a concurrent agentbox (other tests on this host) may sweep it first
    left=
    for d in $stale; do [ -d "$d" ] && left="$left $d"; done
    if [ -n "$stale" ] && [ -n "$left" ]; then
        ok "kill -9: the run cgroup is left for the sweep ($(echo "$left" | wc -w) dirs)"
        abb 60 --timeout 20s "$WORK/hello.py"
        is "$rc" 0 "kill -9: the next agentbox runs"
        after=
        for d in $left; do [ -d "$d" ] && after="$after $d"; done
        is "${after:-none}" none "kill -9: the next agentbox start removed the stale run cgroup"
    else
        skip "kill -9: the stale cgroup is swept by the next start" \
            "no stale cgroup to sweep (already swept by a concurrent agentbox, or never made)"
    fi
    i=0
    while ! no_procs "$TOKEN-k" && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
    check "kill -9: the sandbox died with its supervisor" no_procs "$TOKEN-k"
    kill -9 "$abpid" 2>/dev/null || true
else
    skip "no run cgroup left behind" "needs root and v1 cgroups at /sys/fs/cgroup/*/agentbox"
    skip "kill -9: the stale cgroup is swept by the next start" "needs root and v1 cgroups"
fi
check "the end: the host can still fork" host_forks

done_testing

#!/bin/sh
# test-memdisk.sh -- issue 15: the workspace, /tmp and /dev/shm are tmpfs, whose pages count
# against --memory. When their caps add up to more than the memory limit in force, the report
# warns at the start (and agentbox says it on stderr), and an OOM kill says that tmpfs counts
# as memory, with the fix; so does an OOM kill of a run whose workspace held a quarter of the
# limit. Without a memory cgroup there is no limit to exceed: no such warning.
# Every fill is small (at most 96 MiB of tmpfs), under --memory 64M, --pids and --timeout, and
# runs under an outer timeout.
# shellcheck source-path=SCRIPTDIR
# shellcheck source=lib.sh
. "$AB_TESTDIR/integration/lib.sh"

cat >"$WORK/hello.py" <<'EOF'
print("hello")
EOF
# fill.py MIB [hog]: writes MIB MiB to /work/fill, then (hog) allocates until killed
cat >"$WORK/fill.py" <<'EOF'
import sys
chunk = b"f" * (1 << 20)
n = 0
with open("/work/fill", "wb") as f:
    for i in range(int(sys.argv[1])):
        f.write(chunk)
        f.flush()
        n += 1
print("wrote", n, "MiB", flush=True)
if len(sys.argv) > 2:
    hog = []
    while len(hog) < 512:
        hog.append(bytearray(1 << 20))
EOF
warned() { jqe '.warnings | any(test("are tmpfs, held in RAM and counted against --memory"))'; }

abb 60 "$WORK/hello.py"
[ "$rc" -eq 0 ] || bail "a plain run fails (rc $rc): $(head -c 300 "$WORK/err")"
if [ "$(jr .limits.memory.enforced)" = null ]; then
    echo "# mode: no memory cgroup"
    abb 60 --disk 2G "$WORK/hello.py"
    is "$rc" 0 "no memory cgroup, --disk 2G: the run goes ahead"
    refute "no memory cgroup: no tmpfs warning (no memory limit to exceed)" warned
    skip "--disk 2G --memory 1G warns at the start" "no memory cgroup in this mode (an explicit --memory is refused)"
    skip "an OOM kill says tmpfs counts as memory" "no memory cgroup in this mode (nothing would stop the fill)"
    done_testing
    exit $?
fi
echo "# mode: memory cgroup ($(jr .limits.memory.mechanism))"

# ---- the warning at the start ------------------------------------------------------------
refute "defaults (512M + 2 x 128M under 1G): no tmpfs warning" warned
abb 60 --disk 2G --memory 1G "$WORK/hello.py"
is "$rc" 0 "--disk 2G --memory 1G: the run goes ahead"
check "--disk 2G --memory 1G: the report warns that tmpfs counts as memory" warned
check "--disk 2G --memory 1G: the warning names the caps, their sum and the limit" \
    jqe '.warnings | any(test("the workspace \\(--disk 2G\\), /tmp and /dev/shm \\(--tmp-size 128M each\\).*may hold 2304M, more than --memory 1G"))'
check "--disk 2G --memory 1G: the warning says the fix" \
    jqe '.warnings | any(test("fix: raise --memory above 2304M, or lower --disk or --tmp-size"))'
check "--disk 2G --memory 1G: the warning is on stderr" \
    grep -q "^agentbox: warning: the workspace (--disk 2G), /tmp and /dev/shm" "$WORK/err"
check "--disk 2G --memory 1G: limits.disk says the workspace is RAM" \
    jqe '.limits.disk.note | test("count against --memory")'

# ---- an OOM kill over-committed tmpfs causes --------------------------------------------
# 96 MiB into a 256 MiB workspace under --memory 64M: the kernel kills the writer
abb 60 --memory 64M --disk 256M --tmp-size 16M --pids 64 --timeout 30s "$WORK/fill.py" 96
is "$(jr .status)" oom "filling the workspace past --memory: status oom (not disk_limit)"
is "$rc" 137 "filling the workspace past --memory: exit 137"
check "the warning was there from the start" warned
check "the OOM message says tmpfs counts as memory, and which caps" \
    jqe '.message | test("(OOM-killed|killed the run); tmpfs pages count against --memory 64M, and the workspace \\(--disk 256M\\), /tmp and /dev/shm \\(--tmp-size 16M each\\) may hold 288M")'
check "the OOM message says how much tmpfs held" jqe '.message | test("(the workspace|tmpfs) held [0-9.]+[KM] at the end")'
is "$(jr .fix)" "raise --memory above 288M, or lower --disk or --tmp-size (the workspace, /tmp and /dev/shm are RAM and count against it)" \
    "the OOM fix: raise --memory or lower the caps"
check "the OOM message is in the report only once: limits_hit memory" jqe '.limits_hit == ["memory"]'

# ---- an OOM kill with a full workspace, caps under the limit -------------------------------
# 40 MiB in the workspace (caps 48M + 2 x 4M under --memory 64M: no warning), then the heap
abb 60 --memory 64M --disk 48M --tmp-size 4M --pids 64 --timeout 30s "$WORK/fill.py" 40 hog
is "$(jr .status)" oom "40 MiB in the workspace, then a heap: status oom"
refute "caps under --memory: no tmpfs warning" warned
check "the OOM message says the workspace held a share of --memory" \
    jqe '.message | test("(OOM-killed|killed the run); (the workspace|tmpfs) held [0-9.]+M at the end.*, and tmpfs pages count against --memory 64M")'
is "$(jr .fix)" "raise --memory, or keep less in /work, /tmp and /dev/shm (they are RAM and count against it)" \
    "the OOM fix names tmpfs: it held a real share of the limit"

# ---- an OOM kill with nothing in tmpfs says nothing of it ---------------------------------
abb 60 --memory 64M --disk 48M --tmp-size 4M --pids 64 --timeout 30s "$WORK/fill.py" 0 hog
is "$(jr .status)" oom "an empty workspace, then a heap: status oom"
# the cgroup's OOM kill, or (no memory cgroup: unprivileged on a v1 host) the watchdog's; then
# what tmpfs was measured to hold (issue 25): little, so the processes used the memory
check "a heap alone: the OOM message says tmpfs held little" \
    jqe '.message | test("^memory limit reached: (1 process\\(es\\) OOM-killed|the watchdog measured [0-9]+ bytes against --memory [0-9]+ and killed the run)(; tmpfs held only [0-9.]+[KM], so the script.s processes used the memory)?$")'

# ---- issue 25: caps over the limit, but tmpfs held next to nothing: the fix is --memory ------
# the default workspace and /tmp, /dev/shm caps (768M) over --memory 64M, a heap alone
abb 60 --memory 64M --pids 64 --timeout 30s "$WORK/fill.py" 0 hog
is "$(jr .status)" oom "caps over --memory, a heap alone: status oom"
check "caps over --memory: the warning was there from the start" warned
is "$(jr .fix)" "raise --memory (now 64M), or have the script hold less in memory" \
    "caps over --memory, tmpfs empty: the fix names --memory alone"
refute "... not --disk or --tmp-size" jqe '(.message + .fix) | test("--disk|--tmp-size|may hold")'
check "... and the message says tmpfs held little" jqe '.message | test("tmpfs held only [0-9.]+[KM]")'

done_testing

#!/bin/sh
# tests/vm/lane.sh -- the suite's VM lane (issue 23): boots the throwaway Debian 12 VM of
# tests/vm/vm-run (systemd as PID 1, pure cgroup v2, a lingering user; QEMU under software
# emulation), shares the source tree with this build in it, and runs tests/vm/checks.sh there
# as root. TAP on stdout. The image is built on first use (mmdebstrap from Debian's archive,
# about 100 s and 1 GiB under /var/tmp/agentbox-vm) and again only when its recipe changes.
# Env: AGENTBOX (this build's agentbox), AB_SRCDIR (the source tree holding the build).
# AB_VM_LANE=FILE: tests/run-suite already runs the lane in the background (from the end of the
# build, beside the host's tests), its TAP going to FILE and its exit status to FILE.rc, while
# it holds a lock on FILE.lock: wait for it and report what it found.
set -u
if [ -n "${AB_VM_LANE:-}" ]; then
    flock "$AB_VM_LANE.lock" true
    if [ -f "$AB_VM_LANE.rc" ]; then
        cat "$AB_VM_LANE"
        exit "$(cat "$AB_VM_LANE.rc")"
    fi
    echo "1..1"
    echo "not ok 1 - the VM lane run-suite started in the background left an exit status ($AB_VM_LANE.rc)"
    exit 1
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "1..0 # SKIP the VM lane needs root (QEMU, the image)"
    exit 0
fi
for tool in qemu-system-x86_64 mmdebstrap mkfs.ext4; do
    if ! command -v "$tool" >/dev/null; then
        echo "1..1"
        echo "not ok 1 - the VM lane needs $tool: apt-get install qemu-system-x86 mmdebstrap e2fsprogs (./setup does)"
        exit 1
    fi
done
src=$(cd "$AB_SRCDIR" && pwd -P)
bin=$(cd "$(dirname "$AGENTBOX")" && pwd -P)
case $bin in
"$src"/*) rel=${bin#"$src"/} ;;
*)
    echo "1..1"
    echo "not ok 1 - the build ($bin) must be inside the source tree ($src) to be shared with the VM"
    exit 1
    ;;
esac
here=$(dirname "$0")
out=$(mktemp /tmp/vm-lane.XXXXXX)
rc=0
# 2 GiB and one CPU, so that the host's tests beside it keep the other core (with both, the
# checks took 8% less time and twice the host CPU); the lane's own bound, well under meson's
"$here/vm-run" -s "$src" -t 700 -m 2048 -c 1 -- sh /mnt/host/tests/vm/checks.sh "/mnt/host/$rel" >"$out" 2>&1 || rc=$?
grep -E '^(ok|not ok|1\.\.|#)' "$out"
if ! grep -q '^1\.\.' "$out"; then
    echo "not ok 999 - the VM ran the checks (vm-run exit $rc)"
    grep -vE '^(ok|not ok|#)' "$out" | tail -30 | sed 's/^/# /'
    echo "1..999"
fi
grep '^vm-run:' "$out" | sed 's/^/# /'
rm -f "$out"
exit "$rc"

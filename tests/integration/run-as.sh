#!/bin/sh
# run-as.sh root|user TEST.sh -- run one integration test as root, or as an unprivileged
# user. As root, "user" creates a throwaway system user, stages the binaries and tests in a
# world-readable temp dir (the checkout may be under /root), runs the test as that user, and
# removes the user and the stage afterwards. TAP on stdout.
# Tests run two at a time (tests/meson.build), each variant with binaries of its own: as root,
# the build's; as the throwaway user, staged copies. Locks (flock, files named by meson):
#   AB_TEST_LOCK    held by the root variant of tests that must not run beside each other
#                   with the build's binaries (tests/meson.build says which and why)
#   AB_SERIAL_LOCK  held by every "user" variant run by a caller who is not root: they all run
#                   as that caller, with the build's binaries, so one at a time
# AB_ROOT_BUILD=DIR (tests/run-suite: its ASan+UBSan build): a root variant whose AB_SAN_ROOT is
# 1 (tests/meson.build: all but the nosan ones) runs that build's binaries, with AB_SANITIZED=1
# (the tests' bounds for a sanitized build) and the ASAN_OPTIONS and UBSAN_OPTIONS it is given.
set -eu
who=$1
test=$2
name=$(basename "$test")

case $who in
root)
    if [ "$(id -u)" -ne 0 ]; then
        echo "1..0 # SKIP $name: the root variant needs root"
        exit 0
    fi
    if [ -n "${AB_ROOT_BUILD:-}" ] && [ "${AB_SAN_ROOT:-}" = 1 ]; then
        AGENTBOX=$AB_ROOT_BUILD/agentbox
        AGENTBOX_INIT=$AB_ROOT_BUILD/agentbox-init
        AGENTBOX_NETPROXY=$AB_ROOT_BUILD/agentbox-netproxy
        AGENTBOX_SUPERVISOR=$AB_ROOT_BUILD/agentbox-supervisor
        AB_PROBE=$AB_ROOT_BUILD/tests/ab-probe
        AB_WARM=$AB_ROOT_BUILD/tests/ab-warm
        AB_SANITIZED=1
        export AGENTBOX AGENTBOX_INIT AGENTBOX_NETPROXY AGENTBOX_SUPERVISOR AB_PROBE AB_WARM \
            AB_SANITIZED
        echo "# $name as root with $AB_ROOT_BUILD's binaries (ASan+UBSan)"
    fi
    if [ -n "${AB_TEST_LOCK:-}" ]; then
        exec flock "$AB_TEST_LOCK" sh "$test"
    fi
    exec sh "$test"
    ;;
user)
    if [ "$(id -u)" -ne 0 ]; then
        if [ -n "${AB_SERIAL_LOCK:-}" ]; then
            exec flock "$AB_SERIAL_LOCK" sh "$test"
        fi
        exec sh "$test"
    fi
    ;;
*)
    echo "Bail out! run-as.sh: unknown mode '$who'"
    exit 1
    ;;
esac

user="abtest$$"
stage=$(mktemp -d /tmp/agentbox-stage.XXXXXX)
# shellcheck disable=SC2317 # called from the trap
cleanup() {
    # the test's own processes are gone (it ran in the foreground); remove what we made
    userdel "$user" >/dev/null 2>&1 || true
    rm -rf --one-file-system "$stage"
    if [ -n "$outer" ]; then
        echo $$ >/sys/fs/cgroup/memory/cgroup.procs 2>/dev/null || true
        rmdir "$outer" 2>/dev/null || true
    fi
}
outer=""
trap cleanup EXIT INT TERM
chmod 755 "$stage"
useradd --system --no-create-home --home-dir "$stage/home" --shell /usr/sbin/nologin "$user"
mkdir -p "$stage/bin" "$stage/home"
cp "$AGENTBOX" "$AGENTBOX_INIT" "$AB_PROBE" "$stage/bin/"
# the warm-slot helper (test-warm.sh), built from the library's sources
if [ -n "${AB_WARM:-}" ]; then cp "$AB_WARM" "$stage/bin/"; fi
# prepare's registry proxy: found next to agentbox
if [ -n "${AGENTBOX_NETPROXY:-}" ]; then cp "$AGENTBOX_NETPROXY" "$stage/bin/"; fi
# each run's supervisor: found next to agentbox too
if [ -n "${AGENTBOX_SUPERVISOR:-}" ]; then cp "$AGENTBOX_SUPERVISOR" "$stage/bin/"; fi
cp -r "$AB_TESTDIR" "$stage/tests"
cp -r "$AB_SRCDIR/examples" "$stage/examples"
cp -r "$AB_SRCDIR/bench" "$stage/bench"
# the JSON Schemas every kept report is validated against, and docs/spec.md's example spec
cp -r "$AB_SRCDIR/schemas" "$stage/schemas"
mkdir "$stage/docs"
cp "$AB_SRCDIR/docs/spec.md" "$stage/docs/"
# the MCP SDK (node_modules), for test-mcp.sh alone
sdk=""
if [ "$name" = test-mcp.sh ] && [ -d "${AB_MCP_SDK:-/nonexistent}" ]; then
    cp -r "$AB_MCP_SDK" "$stage/mcp-sdk"
    sdk="$stage/mcp-sdk"
fi
chown -R "$user" "$stage/home"
chmod -R a+rX "$stage"
# test-kmem.sh's attacks on the host's memory: as a safety net of the test's own, the
# unprivileged run (whose --memory is the supervisor's watchdog) inside a v1 memory cgroup
# of ours, where one is writable. Kernel memory v1 charges (slab, page tables) counts in it.
if [ "$name" = test-kmem.sh ] && [ -w /sys/fs/cgroup/memory/cgroup.procs ]; then
    outer=/sys/fs/cgroup/memory/abtest-kmem-$$
    mkdir "$outer"
    echo $((1536 * 1048576)) >"$outer/memory.limit_in_bytes"
    echo $$ >"$outer/cgroup.procs"
fi
rc=0
runuser -u "$user" -- env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$stage/home" \
    LANG=C.UTF-8 \
    AGENTBOX="$stage/bin/$(basename "$AGENTBOX")" \
    AGENTBOX_INIT="$stage/bin/$(basename "$AGENTBOX_INIT")" \
    ${AGENTBOX_SUPERVISOR:+AGENTBOX_SUPERVISOR="$stage/bin/$(basename "$AGENTBOX_SUPERVISOR")"} \
    AB_PROBE="$stage/bin/$(basename "$AB_PROBE")" \
    ${AB_WARM:+AB_WARM="$stage/bin/$(basename "$AB_WARM")"} \
    AB_SRCDIR="$stage" AB_TESTDIR="$stage/tests" AB_AS_USER=1 \
    ${sdk:+AB_MCP_SDK="$sdk"} \
    ${ASAN_OPTIONS:+ASAN_OPTIONS="$ASAN_OPTIONS"} \
    ${UBSAN_OPTIONS:+UBSAN_OPTIONS="$UBSAN_OPTIONS"} \
    sh "$stage/tests/integration/$name" || rc=$?
exit $rc

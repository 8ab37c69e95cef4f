#!/bin/sh
# test-containers.sh -- agentbox inside real containers (issue 18): rootful podman with runc,
# --network none, the image localhost/agentbox-test built offline from Debian's archive by
# contrib/container/build-image (kept in the build directory: the Debian part is built once),
# a test-private containers.conf (runc, explicit ulimits: never /etc) and a private store.
#
# The matrix (each case writes doctor --json, one run's report, and the TAP of the
# integration tests it runs inside, to a directory the host judges):
#   default       a default container as root: refused (125), the message names /proc and the
#                 fix names podman's exact flag; doctor says the same
#   default-user  the same as uid 1000
#   unmask        only --security-opt unmask=/proc/*: runs, every protection enforced, and
#                 the one thing the default seccomp profile refuses (sethostname) is a
#                 warning that names the profile that fixes it
#   flags         contrib/container/run-flags, as root: runs with every protection; test-run
#                 and test-isolation pass inside, as root and as a throwaway user
#   flags-user    the same flags as uid 1000 (--user): test-run, test-isolation and
#                 test-limits (the memory watchdog, the caller's quotas) pass inside
#   k8s           what a Kubernetes pod gets by default: masked /proc, uid 1000, a service
#                 account mount: refused, the fix names procMount: Unmasked
# For every case: a run either has every default protection enforced or exits 125 with the
# missing piece and its fix; never a silent weaker run.
#
# Root only (rootful podman). Without podman, runc or mmdebstrap, or when the image cannot be
# built (no route to deb.debian.org), the whole test is an explicit SKIP with the reason.
# shellcheck source-path=SCRIPTDIR
# shellcheck source=lib.sh
. "$AB_TESTDIR/integration/lib.sh"

if ! is_root; then
    echo "1..0 # SKIP rootful podman needs root"
    exit 0
fi
for tool in podman runc mmdebstrap; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "1..0 # SKIP $tool is not installed (./setup installs podman, runc, mmdebstrap)"
        exit 0
    fi
done

CT=$AB_BUILDDIR/container
mkdir -p "$CT"
cat >"$CT/containers.conf" <<'EOF'
# test-containers.sh: crun refuses this host's hybrid cgroup layout, and the host lacks
# CAP_SYS_RESOURCE, so podman's default ulimits cannot be raised
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
EOF
CONTAINERS_CONF=$CT/containers.conf
PODMAN="podman --root $CT/storage --runroot $CT/run --storage-driver overlay"
export CONTAINERS_CONF PODMAN
IMAGE=localhost/agentbox-test

t0=$(date +%s)
if ! "$AB_SRCDIR/contrib/container/build-image" -b "$AB_BUILDDIR" -c "$CT" -t "$IMAGE" \
    >"$WORK/build.out" 2>"$WORK/build.err"; then
    echo "1..0 # SKIP the image cannot be built here: $(tail -n 3 "$WORK/build.err" | tr '\n' ' ')"
    exit 0
fi
echo "# image $IMAGE ready in $(($(date +%s) - t0)) s"

NAMES=""
# shellcheck disable=SC2317 # called from the trap
ct_cleanup() {
    for n in $NAMES; do
        $PODMAN rm -f "$n" >/dev/null 2>&1 || true
    done
    _cleanup
}
trap ct_cleanup EXIT
trap 'exit 1' INT TERM

# ct CASE WHO TESTS -- PODMAN-RUN-FLAGS...: one container; its /out is $WORK/CASE
ct() {
    _case=$1 _who=$2 _tests=$3
    shift 4
    _name=agentbox-test-$_case-$$
    NAMES="$NAMES $_name"
    mkdir -p "$WORK/$_case"
    chmod 777 "$WORK/$_case"
    _t=$(date +%s)
    # $PODMAN carries options and $_tests is a list: split them on purpose
    # shellcheck disable=SC2086
    bounded 400 $PODMAN run --rm --name "$_name" --network none \
        -v "$WORK/$_case:/out" -v "$AB_SRCDIR:/src:ro" -v "$AB_PROBE:/opt/ab-probe:ro" \
        "$@" "$IMAGE" sh /src/tests/integration/container-inside.sh "$_who" $_tests \
        >"$WORK/$_case.log" 2>&1
    echo "# $_case: $(($(date +%s) - _t)) s"
}
out() { cat "$WORK/$1/$2" 2>/dev/null; }
# jcase CASE FILE FILTER: the jq condition holds on CASE's FILE
jcase() { jq -e "$3" "$WORK/$1/$2" >/dev/null 2>&1; }

# every_run_honest CASE: the run either has every protection enforced or is a 125 with a
# message and a fix (never a silent weaker run)
every_run_honest() {
    _rc=$(out "$1" hello.rc)
    # cgroup is how limits are held, not a protection of its own: without one each limit's
    # mechanism is named, and one that is not whole-run is a warning
    if [ "$_rc" = 0 ] && jcase "$1" hello.json '([.sandbox | to_entries[] | select(.key != "cgroup") | .value.enforced] | all) and ([.limits | to_entries[] | select(.value.whole_run == false) | .key] | all(. == "cpus")) and ((.limits.cpus.whole_run != false) or (.warnings | any(test("cpus limit only approximated"))))'; then
        ok "$1: the run went ahead with every protection enforced"
    elif [ "$_rc" = 125 ] && jcase "$1" hello.json '.status == "setup_error" and (.message | length > 0) and (.fix | length > 0)'; then
        ok "$1: the run was refused (125) with a message and a fix"
    else
        not_ok "$1: a run is either fully protected or refused with a fix" \
            "rc '$_rc'" "$(jq -c '[.status, (.sandbox | map_values(.enforced))]' "$WORK/$1/hello.json" 2>&1)"
    fi
    check "$1: doctor --json was captured" jcase "$1" doctor.json '.checks | length > 5'
}

# tap_passed CASE TEST-WHO: the inner integration test passed (plan, no failures)
tap_passed() {
    _f=$WORK/$1/$2.tap
    _okn=$(grep -c '^ok ' "$_f" 2>/dev/null)
    _skn=$(grep -c '^ok .*# SKIP' "$_f" 2>/dev/null)
    _bad=$(grep -c '^not ok ' "$_f" 2>/dev/null)
    if [ "$(out "$1" "$2.rc")" = 0 ] && [ "${_bad:-0}" -eq 0 ] && grep -q '^1\.\.[1-9]' "$_f"; then
        ok "$1: $2 passes inside ($_okn ok, $_skn of them skips)"
    else
        not_ok "$1: $2 passes inside" "rc $(out "$1" "$2.rc"), $_bad not ok" \
            "$(grep -A3 -E '^not ok|^Bail' "$_f" 2>/dev/null | grep -E '^not ok|^Bail|^#' | head -n 16)" \
            "$(tail -n 3 "$WORK/$1/$2.err" 2>/dev/null)"
    fi
}

FLAGS=$(grep -v '^#' "$AB_SRCDIR/contrib/container/run-flags" | sed "s|=contrib/|=$AB_SRCDIR/contrib/|")

# ---- (a) a default container -------------------------------------------------------------
ct default root "" --
is "$(out default hello.rc)" 125 "default: the run is refused (exit 125)"
check "default: the message names /proc" jcase default hello.json '.message | test("cannot mount a fresh /proc")'
check "default: the fix is podman's exact flag" \
    jcase default hello.json '.fix | test("podman run --security-opt unmask=/proc/\\*")'
check "default: the fix is on stderr too" grep -q "fix: .*unmask=/proc/\*" "$WORK/default/hello.err"
check "default: doctor is not ok, its proc check FAILs with the flag" \
    jcase default doctor.json '(.ok | not) and (.checks[] | select(.check == "proc") | .result == "FAIL" and (.fix | test("unmask")))'
check "default: doctor names the class" \
    jcase default doctor.json '.host.class | test("root without CAP_SYS_ADMIN in a podman container")'
refute "default: nothing ran" grep -q "hello from" "$WORK/default/hello.out"
every_run_honest default

ct default-user user "" -- --user 1000:1000
is "$(out default-user hello.rc)" 125 "default-user: the run is refused (exit 125)"
check "default-user: the fix is podman's exact flag" \
    jcase default-user hello.json '.fix | test("unmask=/proc/\\*")'
check "default-user: doctor names the class" \
    jcase default-user doctor.json '.host.class | test("unprivileged user in a podman container")'
every_run_honest default-user

# ---- only /proc unmasked: the default seccomp profile refuses sethostname ------------------
ct unmask root "" -- --security-opt 'unmask=/proc/*'
is "$(out unmask hello.rc)" 0 "unmask: the run goes ahead"
check "unmask: the sandbox kept the container's hostname (not 'sandbox')" \
    sh -c "grep -q '^hello from ' '$WORK/unmask/hello.out' && ! grep -qx 'hello from sandbox' '$WORK/unmask/hello.out'"
check "unmask: ... and a warning says so, naming the seccomp profile that fixes it" \
    jcase unmask hello.json '.warnings | any(test("keeps this container.s hostname.*seccomp=.*seccomp.json"))'
check "unmask: one short note on stderr (issue 25: the report has the whole warning)" grep -q "note: .*hostname" "$WORK/unmask/hello.err"
every_run_honest unmask

# ---- (b) the recommended flags -------------------------------------------------------------
# shellcheck disable=SC2086 # FLAGS is a list
ct flags "root user" "run isolation" -- $FLAGS
is "$(out flags hello.rc)" 0 "flags: the run goes ahead"
is "$(out flags hello.out)" "hello from sandbox" "flags: the sandbox has its own hostname"
check "flags: doctor is ok" jcase flags doctor.json '.ok'
check "flags: no warning but what a container without cgroups must say (cpus)" \
    jcase flags hello.json '[.warnings[] | select(test("cpus limit") | not)] | length == 0'
check "flags: memory is held by the watchdog" \
    jcase flags hello.json '.limits.memory.mechanism | test("^agentbox watchdog")'
check "flags: pids by RLIMIT_NPROC in the run's own user namespace" \
    jcase flags hello.json '.limits.pids.whole_run and (.limits.pids.mechanism | test("per-run user namespace"))'
check "flags: the script runs as the sandbox user, not root" jcase flags hello.json '.sandbox.no_host_root.enforced and .sandbox_host_uid != 0'
every_run_honest flags
for t in run-root run-user isolation-root isolation-user; do
    tap_passed flags "$t"
done

# ---- (c) a non-root user inside ----------------------------------------------------------------
# shellcheck disable=SC2086 # FLAGS is a list
ct flags-user user "run isolation limits" -- --user 1000:1000 $FLAGS
is "$(out flags-user hello.rc)" 0 "flags-user: the run goes ahead"
check "flags-user: doctor is ok" jcase flags-user doctor.json '.ok'
check "flags-user: the caller's quotas are kept (the script shares uid 1000)" \
    jcase flags-user hello.json '.sandbox.caller_quotas.enforced and (.sandbox.caller_quotas.detail | test("shares your uid: inotify (capped|refused)"))'
every_run_honest flags-user
for t in run-user isolation-user limits-user; do
    tap_passed flags-user "$t"
done

# ---- (d) Kubernetes' defaults: masked /proc, non-root, a service account ----------------------
mkdir -p "$WORK/sa"
# shellcheck disable=SC2086 # FLAGS is a list
ct k8s user "" -- --user 1000:1000 \
    --security-opt "seccomp=$AB_SRCDIR/contrib/container/seccomp.json" \
    -v "$WORK/sa:/var/run/secrets/kubernetes.io/serviceaccount:ro"
is "$(out k8s hello.rc)" 125 "k8s: the run is refused (exit 125)"
check "k8s: the fix is the pod's procMount: Unmasked" \
    jcase k8s hello.json '.fix | test("procMount: Unmasked")'
check "k8s: doctor names a Kubernetes pod" jcase k8s doctor.json '.host.container == "kubernetes"'
every_run_honest k8s

# nothing of ours is left running
left=$($PODMAN ps -a --format '{{.Names}}' 2>/dev/null | grep -c "^agentbox-test-.*-$$\$")
is "${left:-0}" 0 "no container of this test is left"
echo "# matrix done in $(($(date +%s) - t0)) s"
done_testing

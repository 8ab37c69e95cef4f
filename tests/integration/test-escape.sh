#!/bin/sh
# test-escape.sh -- the attack suite (tests/escape/*.py, *.js) against real agentbox runs.
#
# Every attack exists in Python and in Node. Each script prints one line per attempt:
# "CONTAINED <what> <detail>" or "ESCAPED <what> <detail>" ("ATTEMPT" when only the host can
# judge, "NOTE" for information) and "DONE <name>" at its end. For each attack this harness
#   1. sets up a host-side oracle first: a canary file and its sha256, listeners that log every
#      connection, a host process that logs every signal, a leaked fd, a session key, a pty;
#   2. runs the Python and the Node version through agentbox, bounded (outer timeout, --timeout);
#   3. asserts the script's own verdict (no ESCAPED line, enough CONTAINED lines, DONE) AND the
#      host-side oracle (canary unchanged, nothing logged, process alive, nothing left...).
# Controls (--without landlock / seccomp, a connection from the host itself) show that the
# oracles can fail. Threat ids (T1..T40) refer to docs/threats.md; docs/threats-coverage.md
# maps them to this file. Environment limits give explicit SKIP lines.
# shellcheck source-path=SCRIPTDIR
# shellcheck source=lib.sh
. "$AB_TESTDIR/integration/lib.sh"

ESC=$AB_TESTDIR/escape
TOKEN=abesc$$x$(date +%s)
HOSTHOME=${HOME:-/root}
LANGS="py js"
mkdir -p "$RUNS"
[ -d "$ESC" ] || bail "no attack scripts in $ESC"
command -v node >/dev/null || bail "node is required"

# host helpers we start; killed by PID when the test ends
HELPERS=""
esc_cleanup() {
    for p in $HELPERS; do
        # only if that PID is still one of ours (never a reused number)
        case $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null) in
        *hostside.py* | *"$WORK"*) kill -9 "$p" 2>/dev/null || true ;;
        esac
    done
    if [ -n "${KEYID:-}" ]; then
        keyctl unlink "$KEYID" @s >/dev/null 2>&1 || true
    fi
}
trap 'esc_cleanup; _cleanup' EXIT
helper() { HELPERS="$HELPERS $1"; }
stop_helper() {
    kill -9 "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
    HELPERS=$(for p in $HELPERS; do [ "$p" = "$1" ] || printf '%s ' "$p"; done)
}
quiet() { "$@" >/dev/null 2>&1; }

# escrun LANG NAME [AGENTBOX-OPTIONS...] [-- SCRIPT-ARGS...]
# Runs tests/escape/NAME.LANG with ab-probe copied in, under an outer timeout; sets $rc and
# $secs; output in $WORK/out and $WORK/err, the report in $WORK/r.json. $E_ENV (NAME=VALUE
# words, no spaces) is added to agentbox's environment only.
escrun() {
    e_script=$ESC/$2.$1
    shift 2
    e_cnt=$#
    e_seen=0
    while [ "$e_cnt" -gt 0 ]; do
        e_a=$1
        shift
        e_cnt=$((e_cnt - 1))
        if [ "$e_seen" = 0 ] && [ "$e_a" = -- ]; then
            set -- "$@" "$e_script"
            e_seen=1
        else
            set -- "$@" "$e_a"
        fi
    done
    [ "$e_seen" = 1 ] || set -- "$@" "$e_script"
    rm -f "$WORK/r.json"
    rc=0
    e_t0=$(date +%s)
    # shellcheck disable=SC2086 # E_ENV is a list of NAME=VALUE words
    bounded 60 env ${E_ENV:-} "$AGENTBOX" run --runs-dir "$RUNS" --report "$WORK/r.json" \
        --timeout 30s --pids 128 --input "$AB_PROBE" "$@" \
        >"$WORK/out" 2>"$WORK/err" </dev/null || rc=$?
    secs=$(($(date +%s) - e_t0))
    keep_report "$WORK/r.json"
}

# verdict LANG NAME MIN: the script's own verdict: it ran to its end, no attempt escaped, and
# at least MIN attempts were contained.
verdict() {
    e_w="$2.$1"
    e_esc=$(grep '^ESCAPED ' "$WORK/out" | head -n 12 | tr '\n' '|')
    if [ -z "$e_esc" ]; then
        ok "$e_w: no attempt escaped (the script's own verdict)"
    else
        not_ok "$e_w: no attempt escaped (the script's own verdict)" "escaped: $e_esc"
    fi
    e_c=$(grep -c '^CONTAINED ' "$WORK/out" || true)
    if [ "$e_c" -ge "$3" ]; then
        ok "$e_w: $e_c attempts contained (at least $3)"
    else
        not_ok "$e_w: at least $3 attempts contained" "got $e_c" "$(tail -n 3 "$WORK/out" | tr '\n' '|')"
    fi
    check "$e_w: the script ran to its end" grep -qx "DONE $2" "$WORK/out"
}
# contained LANG NAME WHAT [ERRNO-RE]: that attempt was made and contained (with that errno)
contained() {
    if grep -Eq "^CONTAINED $3( ${4:-.*}|$)" "$WORK/out"; then
        ok "$2.$1: $3 contained${4:+ ($4)}"
    else
        not_ok "$2.$1: $3 contained${4:+ ($4)}" "got: $(grep -E "^[A-Z]+ $3( |$)" "$WORK/out" | head -n 1)"
    fi
}
# not_in FILE... -- PATTERN: PATTERN occurs in none of the files (recursively for directories)
absent_from() {
    e_pat=$1
    shift
    ! grep -rqF -- "$e_pat" "$@" 2>/dev/null
}
sum() { sha256sum "$1" | cut -d' ' -f1; }
# logged_within SECS PATTERN FILE: PATTERN shows up in FILE within SECS seconds (a positive
# control: returns as soon as it does, so the bound can be generous for a loaded machine)
logged_within() {
    _lw=0
    while ! grep -q -- "$2" "$3" 2>/dev/null; do
        [ "$_lw" -ge $(($1 * 20)) ] && return 1
        sleep 0.05
        _lw=$((_lw + 1))
    done
}
pick() { sed -n "s/^$1 //p" "$WORK/out" | head -n 1; }

# ---- static: no privileged helpers (T38) ------------------------------------------------
refute "T38: agentbox is not setuid/setgid" test -u "$AGENTBOX" -o -g "$AGENTBOX"
refute "T38: agentbox-init is not setuid/setgid" test -u "$AGENTBOX_INIT" -o -g "$AGENTBOX_INIT"
BWRAP=$(command -v bwrap || echo /usr/bin/bwrap)
if [ -u "$BWRAP" ]; then
    not_ok "T38: bwrap ($BWRAP) is not setuid" "a setuid bwrap has its own CVE history"
else
    ok "T38: bwrap ($BWRAP) is not setuid"
fi

# ---- T1/T5: writes outside the workspace ------------------------------------------------
CANARY=$WORK/canary.txt
printf 'canary %s\n' "$TOKEN" >"$CANARY"
chmod 666 "$CANARY" # world-writable: only the sandbox's isolation protects it
canary_sum=$(sum "$CANARY")
canary_mtime=$(stat -c %Y "$CANARY")
touch "$WORK/stamp"
sleep 1
for lang in $LANGS; do
    escrun "$lang" write_outside -- "$TOKEN" "$CANARY" "$HOSTHOME" "$RUNS" "$WORK"
    is "$rc" 0 "write_outside.$lang: exit 0"
    verdict "$lang" write_outside 60
    for w in create-parent-of-work create-root create-usr create-proc-self-root \
        create-proc-1-root create-proc-self-fd-root create-proc-self-fd-work-up \
        create-host-test-dir append-host-canary open-w-proc-1-exe open-w-agentbox-init \
        rename-out-of-work link-out-of-work create-through-root-symlink; do
        contained "$lang" write_outside "$w"
    done
    is "$(sum "$CANARY")" "$canary_sum" "write_outside.$lang: host canary content unchanged"
    is "$(stat -c %Y "$CANARY")" "$canary_mtime" "write_outside.$lang: host canary not touched"
    stray=$( (find / /etc /usr /usr/bin /var/tmp -maxdepth 1 -name "*$TOKEN*" 2>/dev/null
        find /tmp "$HOSTHOME" -xdev -maxdepth 3 -name "*$TOKEN*" 2>/dev/null
        find "$WORK" -name "*$TOKEN*" 2>/dev/null) | sort -u | head -n 5 | tr '\n' ' ')
    is "$stray" "" "write_outside.$lang: no file named after the token anywhere on the host"
done
sbuid=$(jr .sandbox_host_uid)
new_owned=$(find /tmp "$HOSTHOME" -xdev -maxdepth 2 \
    \( -path '/tmp/agentbox-test.*' -o -path '/tmp/agentbox-stage.*' \) -prune \
    -o -newer "$WORK/stamp" -user "$sbuid" -print 2>/dev/null | head -n 5 | tr '\n' ' ')
is "$new_owned" "" "write_outside: nothing new owned by the sandbox uid ($sbuid) in /tmp or \$HOME"
LL_DETAIL=$(jr '.sandbox.landlock.detail // ""')
LL_ABI=$(printf '%s' "$LL_DETAIL" | sed -n 's/^ABI \([0-9]*\).*/\1/p')

# ---- T2: host secrets -------------------------------------------------------------------
SECRET2=$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
printf 'abesc-secret-%s:%s\n' "$TOKEN" "$SECRET2" >"$WORK/host-secret.txt"
chmod 644 "$WORK/host-secret.txt"
printf 'open("/work/secret.txt", "w").write(open("/work/host-secret.txt").read())\n' >"$WORK/plant_secret.py"
bounded 60 "$AGENTBOX" run --runs-dir "$RUNS" --report "$WORK/r.json" \
    --input "$WORK/host-secret.txt" "$WORK/plant_secret.py" >/dev/null 2>&1 </dev/null || true
keep_report "$WORK/r.json"
OTHERWORK=$(jr .workspace)
check "read_secrets: another run left a secret in its kept workspace ($OTHERWORK)" \
    grep -q "$SECRET2" "$OTHERWORK/secret.txt"
HOSTUSERS=$(cut -d: -f1 /etc/passwd | grep -v -x -e root -e nobody -e agent | tr '\n' ',')
for lang in $LANGS; do
    escrun "$lang" read_secrets -- "abesc-secret-$TOKEN" "$HOSTHOME" "$WORK" "$OTHERWORK" \
        "$RUNS" "$HOSTUSERS"
    is "$rc" 0 "read_secrets.$lang: exit 0"
    verdict "$lang" read_secrets 15
    for w in etc-shadow root-home caller-home host-secret-file other-run-workspace \
        other-run-secret runs-root proc-1-root-secret etc-passwd-host-names scan-for-secret; do
        contained "$lang" read_secrets "$w"
    done
    check "read_secrets.$lang: the secret is in nothing the sandbox produced (output, report, workspace)" \
        absent_from "$SECRET2" "$WORK/out" "$WORK/err" "$WORK/r.json" "$(jr .workspace)"
done

# ---- T3: mount, chroot, file handles ----------------------------------------------------
mounts_with_token() {
    cat /proc/self/mountinfo /proc/1/mountinfo 2>/dev/null | grep -c "$TOKEN" || true
}
for lang in $LANGS; do
    escrun "$lang" mount_breakout -- "$TOKEN"
    is "$rc" 0 "mount_breakout.$lang: exit 0"
    verdict "$lang" mount_breakout 20
    if [ "$lang" = py ]; then
        for w in mount-tmpfs remount-root-rw remount-usr-rw umount-proc-sys chroot-escape \
            pivot-root unshare-mount-ns name-to-handle-at; do
            contained py mount_breakout "$w" EPERM
        done
        contained py mount_breakout open-by-handle-at-shocker EPERM
        for w in fsopen-tmpfs open-tree-clone-root move-mount mount-setattr-usr-rw; do
            contained py mount_breakout "$w" ENOSYS
        done
    else
        for w in mount-tmpfs remount-root-rw chroot unshare-user-mount-ns nsenter-pid1-mnt \
            syscall-open_by_handle_at syscall-fsopen syscall-mount_setattr; do
            contained js mount_breakout "$w"
        done
    fi
    contained "$lang" mount_breakout still-readonly-usr EROFS
    is "$(mounts_with_token)" 0 "mount_breakout.$lang: no mount named after the token in the host's mount table"
    refute "mount_breakout.$lang: nothing was created in the host's / or /usr" \
        test -e "/$TOKEN" -o -e "/usr/$TOKEN"
done

# ---- T6: environment secrets ------------------------------------------------------------
ENVSECRET=$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
printf 'AB_ESC_API_KEY\nsk-abesc-\n%s\n%s\n%s\n' "$WORK" "$RUNS" "$HOSTHOME" >"$WORK/markers.txt"
[ "$HOSTHOME" = / ] && printf 'AB_ESC_API_KEY\nsk-abesc-\n%s\n%s\n' "$WORK" "$RUNS" >"$WORK/markers.txt"
for lang in $LANGS; do
    E_ENV="AB_ESC_API_KEY=sk-abesc-$ENVSECRET OPENAI_API_KEY=sk-abesc-$ENVSECRET-2 AWS_SECRET_ACCESS_KEY=abesc$ENVSECRET"
    escrun "$lang" env_secrets --input "$WORK/markers.txt"
    E_ENV=
    is "$rc" 0 "env_secrets.$lang: exit 0"
    verdict "$lang" env_secrets 12
    for w in read-environ-1 read-cmdline-1 read-environ-self pid1-mem pid1-fd own-environment \
        own-environment-values; do
        contained "$lang" env_secrets "$w"
    done
    contained "$lang" env_secrets read-environ-1 EACCES
    check "env_secrets.$lang: the secret value is in nothing the sandbox produced" \
        absent_from "$ENVSECRET" "$WORK/out" "$WORK/err" "$WORK/r.json" "$(jr .workspace)"
done

# ---- T7: inherited file descriptors ------------------------------------------------------
mkdir "$WORK/fddir"
printf 'abesc-fdsecret-%s\n' "$TOKEN" >"$WORK/fdsecret"
printf 'fd canary\n' >"$WORK/fdcanary"
fdc_sum=$(sum "$WORK/fdcanary")
for lang in $LANGS; do
    exec 7<"$WORK/fddir" 8>>"$WORK/fdcanary" 9<"$WORK/fdsecret"
    escrun "$lang" leaked_fds
    exec 7<&- 8>&- 9<&-
    is "$rc" 0 "leaked_fds.$lang: exit 0"
    verdict "$lang" leaked_fds 6
    for w in stdin-is-dev-null fd1-is-a-pipe fd2-is-a-pipe child-fds open-dev-tty; do
        contained "$lang" leaked_fds "$w"
    done
    if [ "$lang" = py ]; then
        for w in fd-set fstat-3-to-4095 read-fd-9 write-fd-8 openat-fd-7; do
            contained py leaked_fds "$w"
        done
    else
        contained js leaked_fds fd-targets
    fi
    is "$(sum "$WORK/fdcanary")" "$fdc_sum" "leaked_fds.$lang: the host file behind fd 8 is unchanged"
    is "$(find "$WORK/fddir" -mindepth 1 | wc -l)" 0 "leaked_fds.$lang: nothing was created in the directory behind fd 7"
    check "leaked_fds.$lang: the content behind fd 9 is in nothing the sandbox produced" \
        absent_from "abesc-fdsecret-$TOKEN" "$WORK/out" "$WORK/err" "$(jr .workspace)"
done

# ---- T7: a host directory as --stdin ------------------------------------------------------
mkdir "$WORK/stdindir"
chmod 755 "$WORK/stdindir"
for lang in $LANGS; do
    escrun "$lang" stdin_dir --stdin "$WORK/stdindir" -- host-secret.txt
    case $rc in
    2 | 125) ok "stdin_dir.$lang: agentbox refuses a directory as --stdin (exit $rc)" ;;
    *) not_ok "stdin_dir.$lang: agentbox refuses a directory as --stdin" \
        "exit $rc: the sandbox got an open fd on a host directory as its stdin" ;;
    esac
    check "stdin_dir.$lang: no host file was read through it (the secret next to it is in nothing the sandbox produced)" \
        absent_from "$SECRET2" "$WORK/out" "$WORK/err" "$WORK/r.json"
    refute "stdin_dir.$lang: the host's root was not listed through it" \
        grep -q '^ESCAPED list-host-root' "$WORK/out"
    is "$(find "$WORK/stdindir" -mindepth 1 | wc -l)" 0 "stdin_dir.$lang: nothing was created in that directory"
done

# ---- T8: the session keyring -------------------------------------------------------------
KEYID=
KEYPAYLOAD=abesc-payload-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
KEYDESC=abesc-desc-$TOKEN
if command -v keyctl >/dev/null 2>&1; then
    # a session keyring of our own, as a login session has (else @s may be the shared
    # user-session keyring, whose keys even the caller cannot read back)
    keyctl new_session >/dev/null 2>&1 || true
    KEYID=$(keyctl add user "$KEYDESC" "$KEYPAYLOAD" @s 2>/dev/null || true)
    [ "$(keyctl print "$KEYID" 2>/dev/null)" = "$KEYPAYLOAD" ] || KEYID=
fi
for lang in $LANGS; do
    escrun "$lang" keyring -- "$KEYDESC" "$TOKEN"
    is "$rc" 0 "keyring.$lang: exit 0"
    verdict "$lang" keyring 4
    if [ "$lang" = py ]; then
        for w in keyctl-get-session-keyring keyctl-search-session keyctl-search-user request-key \
            add-key-session add-key-user keyctl-join-named-session; do
            contained py keyring "$w" EPERM
        done
    else
        for w in syscall-keyctl syscall-add_key syscall-request_key; do
            contained js keyring "$w" EPERM
        done
    fi
    if [ -z "$KEYID" ]; then
        skip "keyring.$lang: the caller's key stays out of reach" "keyctl is not installed (apt-get install keyutils) or no session keyring"
        continue
    fi
    # T8/T35: the key's description must not be listed to the sandbox either
    contained "$lang" keyring proc-keys-description
    is "$(keyctl print "$KEYID" 2>/dev/null)" "$KEYPAYLOAD" "keyring.$lang: the host key is intact"
    refute "keyring.$lang: no key was added to the caller's session keyring" \
        quiet keyctl search @s user "abesc-added-$TOKEN"
    refute "keyring.$lang: no key was added to the caller's user keyring" \
        quiet keyctl search @u user "abesc-added-$TOKEN"
    check "keyring.$lang: the payload is in nothing the sandbox produced" \
        absent_from "$KEYPAYLOAD" "$WORK/out" "$WORK/err" "$WORK/r.json"
done

# ---- T9: host IPC endpoints --------------------------------------------------------------
IPCLOG=$WORK/ipc.log
python3 "$ESC/hostside.py" listen "$IPCLOG" 120 "$WORK/ssh-agent.sock" "$WORK/dbus-session.sock" \
    "@abesc-ipc-$TOKEN" "@/tmp/.X11-unix/X0" &
IPCPID=$!
helper "$IPCPID"
i=0
while [ ! -f "$IPCLOG.ready" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
check "ipc: the host listeners are up" grep -q "^bound @abesc-ipc-$TOKEN" "$IPCLOG"
for lang in $LANGS; do
    E_ENV="SSH_AUTH_SOCK=$WORK/ssh-agent.sock DBUS_SESSION_BUS_ADDRESS=unix:path=$WORK/dbus-session.sock DISPLAY=:0 XDG_RUNTIME_DIR=$WORK"
    escrun "$lang" ipc_sockets -- "$WORK/ssh-agent.sock" "$WORK/dbus-session.sock" \
        "@abesc-ipc-$TOKEN"
    E_ENV=
    is "$rc" 0 "ipc_sockets.$lang: exit 0"
    verdict "$lang" ipc_sockets 20
    p_ssh=connect-$(printf '%s' "$WORK/ssh-agent.sock" | tr / _)-stream
    contained "$lang" ipc_sockets "$p_ssh"
    contained "$lang" ipc_sockets "connect-abstractabesc-ipc-$TOKEN-stream" ECONNREFUSED
    contained "$lang" ipc_sockets "connect-abstract_tmp_.X11-unix_X0-stream"
    contained "$lang" ipc_sockets env-SSH_AUTH_SOCK
    contained "$lang" ipc_sockets env-DISPLAY
    is "$(grep -c '^conn ' "$IPCLOG" || true)" 0 "ipc_sockets.$lang: no connection reached any host listener"
done
# control: the oracle does log a connection
python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(b"\0"+sys.argv[1].encode())' \
    "abesc-ipc-$TOKEN" 2>/dev/null || true
check "ipc control: a connection from the host itself is logged" \
    logged_within 10 "^conn @abesc-ipc-$TOKEN" "$IPCLOG"
stop_helper "$IPCPID"

# ---- T10 (+T29): terminal injection ------------------------------------------------------
for lang in $LANGS; do
    escrun "$lang" tty_inject -- "$TOKEN"
    is "$rc" 0 "tty_inject.$lang (stdin /dev/null): exit 0"
    verdict "$lang" tty_inject 8
    if [ "$lang" = py ]; then
        for w in tiocsti-fd1-before tiocsti64-fd1-before tioclinux-fd2-before tioclinux64-fd0-before; do
            contained py tty_inject "$w" EPERM
        done
    else
        for w in perl-tiocsti-fd1-before perl-tiocsti64-fd1-before perl-tioclinux-fd0-before; do
            contained js tty_inject "$w" EPERM
        done
    fi
done
# a real terminal as stdin: a pty with no session, watched from the host
tty_run() { # tty_run LANG [OPTIONS...]
    t_lang=$1
    shift
    PTYLOG=$WORK/pty-$t_lang-$#.log
    : >"$PTYLOG"
    python3 "$ESC/hostside.py" pty "$PTYLOG" 60 >"$WORK/ptyname" &
    PTYPID=$!
    helper "$PTYPID"
    i=0
    while [ ! -s "$WORK/ptyname" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
    escrun "$t_lang" tty_inject --stdin "$(cat "$WORK/ptyname")" "$@" -- "$TOKEN"
    sleep 0.5 # let the watcher read what arrived
    stop_helper "$PTYPID"
    rm -f "$WORK/ptyname"
}
# A terminal cannot be handed to the sandbox at all: --stdin takes regular files only (a
# sealed copy), so the attack that needs a tty on fd 0 never gets one.
for lang in $LANGS; do
    tty_run "$lang"
    is "$rc" 125 "tty_inject.$lang: a pty as --stdin is refused (rc 125)"
    is "$(jr .status)" setup_error "tty_inject.$lang: a pty as --stdin: status setup_error"
    check "tty_inject.$lang: the refusal names --stdin" grep -q -- "--stdin" "$WORK/err"
    check "tty_inject.$lang: nothing was injected into the host terminal's input" \
        absent_from "abesc-injected" "$PTYLOG"
    check "tty_inject.$lang: nothing reached the host terminal (raw /dev/tty write)" \
        absent_from "abesc-raw" "$PTYLOG"
done
# TIOCSCTTY is allowed since issue 15 (forkpty and pty.spawn need it): agentbox-init refuses
# to start with a terminal on fds 0-2, so only the sandbox's own ptys can be adopted.

# ---- T11: network to host loopback -------------------------------------------------------
listener_start "$WORK/net"
helper "$(cat "$WORK/net.pid")"
read -r TCPPORT UDPPORT <"$WORK/net.ports"
for lang in $LANGS; do
    escrun "$lang" net_loopback -- "$TCPPORT" "$UDPPORT"
    is "$rc" 0 "net_loopback.$lang: exit 0"
    verdict "$lang" net_loopback 10
    for w in tcp-host-listener tcp6-host-listener udp-host-listener interfaces \
        host-listener-invisible; do
        contained "$lang" net_loopback "$w"
    done
    if [ "$lang" = py ]; then contained py net_loopback dns-example.com; else
        contained js net_loopback dns-lookup-example.com
    fi
    sleep 0.3
    is "$(wc -l <"$WORK/net.log")" 0 "net_loopback.$lang: the host listener saw no TCP connection and no datagram"
done
python3 -c 'import socket,sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 2).close()' "$TCPPORT" || true
check "net control: a connection from the host itself is logged" logged_within 10 '^tcp ' "$WORK/net.log"
stop_helper "$(cat "$WORK/net.pid")"

# ---- T12: signals, ptrace, /proc of a host process ---------------------------------------
SLOG=$WORK/sleeper.log
: >"$SLOG"
python3 "$ESC/hostside.py" sleeper "$SLOG" 300 "abesc-sleep-$TOKEN" &
SLEEPER=$!
helper "$SLEEPER"
sleep 0.3
for lang in $LANGS; do
    escrun "$lang" signal_ptrace -- "$SLEEPER" "$TOKEN"
    is "$rc" 0 "signal_ptrace.$lang: exit 0"
    verdict "$lang" signal_ptrace 12
    for w in kill-hostpid-probe host-process-invisible read-pid1-mem pid1-survives-sigkill; do
        contained "$lang" signal_ptrace "$w"
    done
    if [ "$lang" = py ]; then
        contained py signal_ptrace kill-hostpid-sigterm ESRCH
        contained py signal_ptrace ptrace-attach-hostpid EPERM
        contained py signal_ptrace ptrace-attach-pid1 EPERM
        contained py signal_ptrace process-vm-readv-pid1 EPERM
        contained py signal_ptrace pidfd-open-hostpid ESRCH
    else
        contained js signal_ptrace kill-hostpid-SIGTERM ESRCH
        contained js signal_ptrace syscall-ptrace EPERM
    fi
    check "signal_ptrace.$lang: the host process is alive" kill -0 "$SLEEPER"
    is "$(cat "$SLOG")" "" "signal_ptrace.$lang: the host process got no signal"
done
stop_helper "$SLEEPER"

# ---- T13/T14/T15: survivors --------------------------------------------------------------
for lang in $LANGS; do
    escrun "$lang" survivors -- exit "$TOKEN"
    is "$rc" 0 "survivors.$lang (exit): exit 0"
    check "survivors.$lang (exit): the daemons were running inside" \
        grep -Eq '^ATTEMPT daemons-running-inside [1-9]' "$WORK/out"
    check "survivors.$lang (exit): the script ran to its end" grep -qx "DONE survivors" "$WORK/out"
    check "survivors.$lang (exit): agentbox returned at once although daemons held stdout ($secs s)" \
        test "$secs" -lt 15
    check "survivors.$lang (exit): no daemon left on the host" no_procs "abesc-daemon-$TOKEN"
    escrun "$lang" survivors --timeout 3s -- hang "$TOKEN"
    is "$rc" 124 "survivors.$lang (hang): exit 124 at the timeout"
    is "$(jr .status)" timeout "survivors.$lang (hang): status timeout"
    wall=$(jr .wall_ms)
    check "survivors.$lang (hang): ended near 3 s although SIGTERM is ignored (${wall} ms)" \
        test "$wall" -ge 2900 -a "$wall" -lt 10000
    check "survivors.$lang (hang): no daemon left on the host" no_procs "abesc-daemon-$TOKEN"
done

# ---- T32: nested user namespaces ---------------------------------------------------------
for lang in $LANGS; do
    escrun "$lang" userns_nested
    is "$rc" 0 "userns_nested.$lang: exit 0"
    verdict "$lang" userns_nested 10
    if [ "$lang" = py ]; then
        contained py userns_nested unshare-user EPERM
        contained py userns_nested clone-newuser EPERM
        contained py userns_nested clone3-newuser ENOSYS
        contained py userns_nested unshare-tool-map-root
        contained py userns_nested bwrap-tool-uid0
    else
        contained js userns_nested syscall-clone_newuser EPERM
        contained js userns_nested syscall-clone3 ENOSYS
        contained js userns_nested unshare-tool-map-root
    fi
done
# second layer alone: bwrap --disable-userns still refuses (ENOSPC) without the filter
escrun py userns_nested --without seccomp
verdict py userns_nested 10
contained py userns_nested unshare-user ENOSPC
contained py userns_nested clone-newuser ENOSPC

# ---- T30: sysctls ------------------------------------------------------------------------
sysctl_sum() {
    cat /proc/sys/kernel/core_pattern /proc/sys/kernel/modprobe /proc/sys/kernel/panic \
        /proc/sys/kernel/randomize_va_space /proc/sys/fs/protected_hardlinks 2>/dev/null | sha256sum
}
sys_before=$(sysctl_sum)
for lang in $LANGS; do
    escrun "$lang" sysctl_write
    is "$rc" 0 "sysctl_write.$lang: exit 0"
    verdict "$lang" sysctl_write 10
    for w in open-w-sys.kernel.core_pattern open-w-sys.vm.drop_caches open-w-sys.kernel.modprobe \
        open-w-sysrq-trigger proc-sys-mount-readonly; do
        contained "$lang" sysctl_write "$w"
    done
    is "$(sysctl_sum)" "$sys_before" "sysctl_write.$lang: the host's sysctls are unchanged"
done
if [ "$(jr .sandbox.no_host_root.enforced)" = true ]; then
    ok "sysctl_write: the report says the sandbox is not host root ($(jr .sandbox.no_host_root.detail))"
else
    not_ok "sysctl_write: the report says the sandbox is not host root" "$(jr .sandbox.no_host_root)"
fi

# ---- T33/T34: capabilities and setuid binaries --------------------------------------------
for lang in $LANGS; do
    escrun "$lang" caps_setuid
    is "$rc" 0 "caps_setuid.$lang: exit 0"
    verdict "$lang" caps_setuid 10
    for w in capabilities-CapEff capabilities-CapPrm capabilities-CapBnd capabilities-CapAmb \
        no-new-privs seccomp-filter-mode not-uid-0 setuid-mount-tmpfs; do
        contained "$lang" caps_setuid "$w"
    done
    if [ -u /usr/bin/su ]; then
        contained "$lang" caps_setuid setuid-exec-su
        contained "$lang" caps_setuid setuid-running-uids-su
    else
        skip "caps_setuid.$lang: a setuid su stays unprivileged" "/usr/bin/su is not setuid on this host"
    fi
    if [ -u /usr/bin/mount ]; then
        contained "$lang" caps_setuid setuid-exec-mount
    else
        skip "caps_setuid.$lang: a setuid mount stays unprivileged" "/usr/bin/mount is not setuid on this host"
    fi
done

# ---- T35: information leaks --------------------------------------------------------------
{
    echo "user $(id -un)"
    [ "$HOSTHOME" != / ] && echo "home $HOSTHOME"
    echo "runs_root $RUNS"
    echo "test_dir $WORK"
    echo "init_dir $(dirname "$AGENTBOX_INIT")"
    echo "hostname $(hostname)"
    [ -r /etc/machine-id ] && echo "machine_id $(cat /etc/machine-id)"
    for a in /sys/class/net/*/address; do
        m=$(cat "$a" 2>/dev/null) || continue
        [ "$m" = 00:00:00:00:00:00 ] || echo "mac $m"
    done
} >"$WORK/markers.txt"
for lang in $LANGS; do
    escrun "$lang" info_leaks --input "$WORK/markers.txt"
    is "$rc" 0 "info_leaks.$lang: exit 0"
    verdict "$lang" info_leaks 10
    for w in sys-hidden interfaces-lo-only no-host-mac mountinfo-no-user-name mountinfo-no-home; do
        contained "$lang" info_leaks "$w"
    done
    if [ "$lang" = py ]; then contained py info_leaks uname-nodename sandbox; else
        contained js info_leaks os-hostname sandbox
    fi
    contained "$lang" info_leaks mountinfo-no-runs-root
    contained "$lang" info_leaks mountinfo-no-test-dir
    contained "$lang" info_leaks cmdline-1-no-runs-root
    check "info_leaks.$lang: where agentbox-init lives is reported (NOTE)" \
        grep -q '^NOTE mountinfo-init-dir ' "$WORK/out"
done
# agentbox-init installed under a directory named after the caller, outside /home and /root
# (/srv/NAME, /data/NAME, /tmp/NAME...): its host path must not carry the name into mountinfo
UDIR=$WORK/$(id -un)
mkdir -p "$UDIR/m"
chmod 755 "$UDIR" "$UDIR/m"
cp "$AGENTBOX_INIT" "$UDIR/agentbox-init"
printf 'user %s\n' "$(id -un)" >"$UDIR/m/markers.txt"
E_ENV="AGENTBOX_INIT=$UDIR/agentbox-init"
escrun py info_leaks --input "$UDIR/m/markers.txt"
E_ENV=
is "$rc" 0 "info_leaks (init under .../$(id -un)/): exit 0"
contained py info_leaks mountinfo-no-user-name

# ---- T27: setuid files left in the workspace ---------------------------------------------
# The filter refuses the bits (issue 12); --without seccomp sets them, and the layers below
# (nosuid, no_new_privs, the sanitised copy) must still hold.
for lang in $LANGS; do
    rm -rf "$WORK/collect"
    escrun "$lang" setuid_left --collect "$WORK/collect"
    is "$rc" 0 "setuid_left.$lang: exit 0"
    verdict "$lang" setuid_left 3
    for w in chmod-suid-probe chmod-sgid-probe chmod-suid-sgid-probe chmod-sgid-dir \
        chmod-inner-suid open-creat-suid; do
        contained "$lang" setuid_left "$w" EPERM
    done
    refute "setuid_left.$lang: no file got an s-bit inside" grep -q '^ATTEMPT setid-file-' "$WORK/out"
    is "$(jq -r '[.files[] | select(.mode | test("^[2-7]")) | .path] | join(" ")' "$WORK/r.json")" "" \
        "setuid_left.$lang: the report lists no setuid/setgid entry in the live workspace"
    ws=$(jr .workspace)
    is "$(find "$ws" "$WORK/collect" -perm /7000 | head -n 3 | tr '\n' ' ')" "" \
        "setuid_left.$lang: no setuid/setgid/sticky bit in the kept workspace or --collect"

    rm -rf "$WORK/collect"
    escrun "$lang" setuid_left --without seccomp --collect "$WORK/collect"
    is "$rc" 0 "setuid_left.$lang --without seccomp: exit 0"
    verdict "$lang" setuid_left 3
    check "setuid_left.$lang --without seccomp: the setuid copy had its bit inside" \
        grep -q '^ATTEMPT setid-file-suid-probe mode 4755' "$WORK/out"
    ws=$(jr .workspace)
    check "setuid_left.$lang --without seccomp: the kept copy exists" test -f "$ws/suid-probe"
    is "$(find "$ws" "$WORK/collect" -perm /7000 | head -n 3 | tr '\n' ' ')" "" \
        "setuid_left.$lang --without seccomp: no setuid/setgid/sticky bit in the kept workspace or --collect"
    # a root caller's kept run is root's: nothing it leaves is usable as the sandbox uid
    is "$(find "$ws" -user "$(jr .sandbox_host_uid)" | head -n 3 | tr '\n' ' ')" "$(
        as_user && find "$ws" -user "$(id -u)" | head -n 3 | tr '\n' ' ')" \
        "setuid_left.$lang --without seccomp: nothing in the kept workspace is owned by the sandbox uid"
    is "$(jq -r '.files[] | select(.path == "suid-probe") | .flags | join(",")' "$WORK/r.json")" \
        setid "setuid_left.$lang --without seccomp: the report flags suid-probe as setid"
done

# ---- T25/T26: links and special files ----------------------------------------------------
for lang in $LANGS; do
    rm -rf "$WORK/collect"
    escrun "$lang" links --collect "$WORK/collect" -- "$CANARY"
    is "$rc" 0 "links.$lang: exit 0 (the collector did not block on the FIFO)"
    verdict "$lang" links 4
    for w in hardlink-etc-passwd hardlink-agentbox-init hardlink-dev-null mknod-char; do
        contained "$lang" links "$w"
    done
    ws=$(jr .workspace)
    is "$(find "$ws" "$WORK/collect" ! -type f ! -type d | head -n 3 | tr '\n' ' ')" "" \
        "links.$lang: the kept workspace and --collect hold only regular files and directories"
    is "$(sum "$CANARY")" "$canary_sum" "links.$lang: the host canary (a symlink target) is unchanged"
    is "$(jq -r '.files[] | select(.path == "link-shadow") | .type' "$WORK/r.json")" symlink \
        "links.$lang: the report lists link-shadow as a symlink"
    check "links.$lang: the run's own report.json was not redirected by the planted symlink" \
        quiet jq -e .status "$(jr .run_dir)/report.json"
done

# ---- T37: bwrap option injection ----------------------------------------------------------
cd "$WORK" || bail "cd $WORK"
INJ=$(printf 'a\n--bind\n/\n/z')
for lang in $LANGS; do
    cp "$ESC/bwrap_inject.$lang" "$WORK/--bind=inj.$lang"
    rm -f "$WORK/r.json"
    rc=0
    bounded 60 "$AGENTBOX" run --runs-dir "$RUNS" --report "$WORK/r.json" --timeout 30s \
        --env "INJ=$INJ" --env 'INJ2=-- --ro-bind / /y' \
        -- "./--bind=inj.$lang" --bind / /x -- --setenv X Y --ro-bind / /y \
        >"$WORK/out" 2>"$WORK/err" </dev/null || rc=$?
    keep_report "$WORK/r.json"
    is "$rc" 0 "bwrap_inject.$lang: exit 0"
    verdict "$lang" bwrap_inject 15
    is "$(pick ARGV)" "[\"/work/--bind=inj.$lang\", \"--bind\", \"/\", \"/x\", \"--\", \"--setenv\", \"X\", \"Y\", \"--ro-bind\", \"/\", \"/y\"]" \
        "bwrap_inject.$lang: the script's arguments arrive verbatim"
    is "$(pick ENV_INJ)" '"a\n--bind\n/\n/z"' "bwrap_inject.$lang: an --env value with newlines arrives verbatim"
    is "$(pick ENV_INJ2)" '"-- --ro-bind / /y"' "bwrap_inject.$lang: an --env value with '--' arrives verbatim"
    for w in no-path-/x no-path-/y no-path-/z no-extra-env; do
        contained "$lang" bwrap_inject "$w"
    done
    refute "bwrap_inject.$lang: nothing named x, y or z appeared in the host's /" test -e /x -o -e /y -o -e /z
done
cd / || true

# ---- Landlock ----------------------------------------------------------------------------
# ll_run LANG NAME [OPTIONS...]: runs landlock_probe in the background; once its interpreter is
# up, binds the abstract socket NAME from the host inside the sandbox's network namespace.
ll_run() {
    l_lang=$1
    l_name=$2
    shift 2
    LLLOG=$WORK/ll-$l_name.log
    : >"$LLLOG"
    (escrun "$l_lang" landlock_probe "$@" -- "$l_name" 20 "$TOKEN"
        echo "$rc" >"$WORK/ll.rc") &
    l_bg=$!
    l_pid=
    l_end=$(($(date +%s) + 15))
    while [ -z "$l_pid" ] && [ "$(date +%s)" -lt "$l_end" ] && kill -0 "$l_bg" 2>/dev/null; do
        # the interpreter's own process: "<interpreter> /work/landlock_probe.LANG NAME ..."
        # shellcheck disable=SC2013 # /proc/N/cmdline paths have no spaces
        for f in $(grep -lsF -e "$l_name" /proc/[0-9]*/cmdline 2>/dev/null); do
            c=$( (tr '\0' ' ' <"$f") 2>/dev/null) || continue
            if [ "$(printf '%s\n' "$c" | cut -d' ' -f2)" = "/work/landlock_probe.$l_lang" ]; then
                l_pid=${f#/proc/}
                l_pid=${l_pid%/cmdline}
                break
            fi
        done
        [ -n "$l_pid" ] || sleep 0.05
    done
    if [ -n "$l_pid" ]; then
        python3 "$ESC/hostside.py" nslisten "$LLLOG" 25 "$l_pid" "@$l_name" &
        l_ns=$!
        helper "$l_ns"
    fi
    wait $l_bg
    rc=$(cat "$WORK/ll.rc")
    if [ -n "$l_pid" ]; then stop_helper "$l_ns"; fi
}
# --net-strict: the TCP rules are the opt-in strict mode (by default the sandbox's own
# loopback is the script's; test-network.sh checks both modes)
for lang in $LANGS; do
    ll_run "$lang" "abesc-ll-$TOKEN-$lang" --net-strict
    is "$rc" 0 "landlock_probe.$lang: exit 0"
    if [ "$(jr .sandbox.landlock.enforced)" != true ]; then
        skip "landlock_probe.$lang: Landlock checks" "the report says Landlock is not enforced here ($(jr .sandbox.landlock.detail))"
        continue
    fi
    verdict "$lang" landlock_probe 3
    # /dev is read-only since issue 24: creating there is EROFS before Landlock is asked;
    # writing /proc/self/comm (the script's own, on a writable mount) is Landlock's alone
    contained "$lang" landlock_probe create-in-dev 'E(ACCES|ROFS)'
    contained "$lang" landlock_probe write-proc-comm EACCES
    if [ "${LL_ABI:-0}" -ge 4 ]; then
        contained "$lang" landlock_probe tcp-bind-inet EACCES
        contained "$lang" landlock_probe tcp-bind-inet6 EACCES
    else
        skip "landlock_probe.$lang: TCP bind denied" "Landlock ABI ${LL_ABI:-?} < 4 has no network rules"
    fi
    if [ "${LL_ABI:-0}" -lt 6 ]; then
        skip "landlock_probe.$lang: abstract socket outside the domain" "Landlock ABI ${LL_ABI:-?} < 6 has no scoping"
    elif ! grep -q '^listening' "$LLLOG"; then
        skip "landlock_probe.$lang: abstract socket outside the domain" "could not enter the sandbox's network namespace from the host: $(head -n 1 "$LLLOG")"
    else
        contained "$lang" landlock_probe abstract-connect-outside-domain EPERM
        refute "landlock_probe.$lang: the listener outside the domain got no connection" \
            grep -q '^conn' "$LLLOG"
    fi
done
# control: without Landlock the same probes get through (the test can fail)
for lang in $LANGS; do
    ll_run "$lang" "abesc-llctl-$TOKEN-$lang" --without landlock
    is "$(jr .sandbox.landlock.enforced)" false "landlock control.$lang: the report says Landlock is off"
    check "landlock control.$lang: without Landlock, TCP bind inside works" \
        grep -q '^ESCAPED tcp-bind-inet ' "$WORK/out"
    check "landlock control.$lang: without Landlock, /proc/self/comm is writable" \
        grep -q '^ESCAPED write-proc-comm ' "$WORK/out"
    if grep -q '^listening' "$LLLOG"; then
        check "landlock control.$lang: without Landlock, the abstract socket outside the domain is reachable" \
            grep -q '^ESCAPED abstract-connect-outside-domain ' "$WORK/out"
        check "landlock control.$lang: ... and the host-side listener logged it" grep -q '^conn' "$LLLOG"
    else
        skip "landlock control.$lang: abstract socket reachable" "could not enter the sandbox's network namespace: $(head -n 1 "$LLLOG")"
    fi
done

# ---- T40 (+T4): what one run leaves for the next ------------------------------------------
for lang in $LANGS; do
    escrun "$lang" cross_run -- plant "$TOKEN"
    is "$rc" 0 "cross_run.$lang (plant): exit 0"
    check "cross_run.$lang (plant): planted" grep -q '^ATTEMPT planted' "$WORK/out"
    escrun "$lang" cross_run -- check "$TOKEN"
    is "$rc" 0 "cross_run.$lang (check): exit 0"
    verdict "$lang" cross_run 4
    contained "$lang" cross_run abstract-socket-of-earlier-run ECONNREFUSED
    contained "$lang" cross_run workspace-fresh
    refute "cross_run.$lang: nothing it planted in /tmp or /dev/shm is on the host" \
        test -e "/tmp/abesc-$TOKEN" -o -e "/dev/shm/abesc-$TOKEN"
    check "cross_run.$lang: the planting daemon is gone" no_procs "cross_run.$lang plant $TOKEN"
    check "cross_run.$lang: the node daemon is gone" no_procs "abesc-cross-$TOKEN"
done
shmkey=$(python3 -c 'import sys,zlib; print("0x%08x" % (zlib.crc32(sys.argv[1].encode()) & 0x7fffffff))' "$TOKEN")
refute "cross_run: the SysV segment it made is not in the host's IPC namespace" \
    sh -c "ipcs -m 2>/dev/null | grep -qi '$shmkey'"

# ---- T39: the runs root ------------------------------------------------------------------
mkdir "$WORK/real-runs"
ln -s "$WORK/real-runs" "$WORK/link-runs"
printf 'print("ran")\n' >"$WORK/t39.py"
rc=0
bounded 60 "$AGENTBOX" run --runs-dir "$WORK/link-runs" --report "$WORK/r.json" "$WORK/t39.py" \
    >"$WORK/out" 2>"$WORK/err" </dev/null || rc=$?
keep_report "$WORK/r.json"
is "$rc" 125 "T39: a symlinked runs root is refused (exit 125)"
is "$(find "$WORK/real-runs" -mindepth 1 | wc -l)" 0 "T39: nothing was created through the symlink"
mkdir -m 0777 "$WORK/shared-runs"
chmod 0777 "$WORK/shared-runs"
rc=0
bounded 60 "$AGENTBOX" run --runs-dir "$WORK/shared-runs" --report "$WORK/r.json" "$WORK/t39.py" \
    >"$WORK/out" 2>"$WORK/err" </dev/null || rc=$?
keep_report "$WORK/r.json"
is "$rc" 125 "T39: a world-writable runs root is refused (exit 125)"

done_testing

#!/bin/sh
# test-network.sh -- no network (T9, T11): TCP and UDP to a listener on the host's 127.0.0.1
# fail from Python and Node and the listener sees nothing; DNS fails; the only interface inside
# is lo and the host's listening socket is not in the sandbox's network namespace.
# The sandbox's own loopback is the script's (issue 15): bind, listen, connect and UDP on
# 127.0.0.1, 0.0.0.0 and ::1 work, even on the host listener's port number, and the host
# listener still sees nothing; --net-strict denies TCP there. agentbox-init refuses to start
# a script in a namespace with more than lo, or in agentbox's own.
# shellcheck source-path=SCRIPTDIR
# shellcheck source=lib.sh
. "$AB_TESTDIR/integration/lib.sh"


L=$WORK/listener
trap 'listener_stop "$L"; _cleanup' EXIT
listener_start "$L"
[ -f "$L.ports" ] || bail "the host listener did not start"
read -r TPORT UPORT <"$L.ports"

# The listener works: a connection and a datagram from the host itself are logged.
python3 - "$TPORT" "$UPORT" <<'EOF'
import socket, sys
t, u = int(sys.argv[1]), int(sys.argv[2])
socket.create_connection(("127.0.0.1", t), timeout=2).close()
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.sendto(b"host", ("127.0.0.1", u)); s.close()
EOF
i=0
while [ "$(wc -l <"$L.log")" -lt 2 ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
is "$(wc -l <"$L.log")" 2 "control: the host listener logs a TCP connection and a UDP datagram from the host"
: >"$L.log"

cat >"$WORK/net.py" <<'EOF'
import errno, socket, sys
tport, uport = int(sys.argv[1]), int(sys.argv[2])
def en(e):
    return errno.errorcode.get(e.errno, str(e.errno)) if isinstance(e, OSError) and e.errno else type(e).__name__
# TCP to the host's loopback listener
try:
    socket.create_connection(("127.0.0.1", tport), timeout=3).close()
    print("TCP OK")
except Exception as e:
    print("TCP FAIL " + en(e))
try:
    s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM); s.settimeout(3)
    s.connect(("::1", tport)); print("TCP6 OK")
except Exception as e:
    print("TCP6 FAIL " + en(e))
# TCP to an outside address and to the cloud metadata address
for name, addr in (("TCPOUT", ("1.1.1.1", 53)), ("TCPMETA", ("169.254.169.254", 80))):
    try:
        socket.create_connection(addr, timeout=3).close()
        print(name + " OK")
    except Exception as e:
        print(name + " FAIL " + en(e))
# UDP: sendto the host's port, then wait for an answer (the listener never answers; what
# matters is that its log stays empty) and try an outside address
try:
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.settimeout(1)
    u.sendto(b"from-sandbox", ("127.0.0.1", uport))
    print("UDPSEND SENT-LOCALLY")
    try:
        u.recvfrom(100); print("UDPRECV GOT")
    except Exception as e:
        print("UDPRECV FAIL " + en(e))
except Exception as e:
    print("UDPSEND FAIL " + en(e))
try:
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.sendto(b"x", ("1.1.1.1", 53)); print("UDPOUT OK")
except Exception as e:
    print("UDPOUT FAIL " + en(e))
# DNS
try:
    print("DNS OK " + str(socket.getaddrinfo("example.com", 80)[0][4]))
except Exception as e:
    print("DNS FAIL " + type(e).__name__)
# interfaces and the sandbox's own listening sockets
ifs = [l.split(":")[0].strip() for l in open("/proc/net/dev").read().splitlines()[2:]]
print("IFACES=" + ",".join(sorted(ifs)))
listen = []
for f in ("/proc/net/tcp", "/proc/net/tcp6"):
    for l in open(f).read().splitlines()[1:]:
        p = l.split()
        if p[3] == "0A":
            listen.append(int(p[1].rsplit(":", 1)[1], 16))
print("LISTEN=" + ",".join(str(x) for x in sorted(listen)))
print("DONE")
EOF
abb 60 "$WORK/net.py" "$TPORT" "$UPORT"
is "$rc" 0 "py: the script ran (exit 0)"
check "py: the script ran to the end" has DONE
check "py: TCP to the host's 127.0.0.1:$TPORT fails" hasre "^TCP FAIL "
check "py: TCP to [::1]:$TPORT fails" hasre "^TCP6 FAIL "
check "py: TCP to an outside address fails" hasre "^TCPOUT FAIL "
check "py: TCP to 169.254.169.254 fails" hasre "^TCPMETA FAIL "
refute "py: no UDP answer from the host port" has "UDPRECV GOT"
check "py: UDP to an outside address fails" hasre "^UDPOUT FAIL "
check "py: DNS (getaddrinfo example.com) fails" hasre "^DNS FAIL "
is "$(val IFACES)" lo "py: the only network interface is lo (/proc/net/dev)"
case ",$(val LISTEN)," in
*",$TPORT,"*) not_ok "py: the host's listening port is not in the sandbox's namespace" "LISTEN=$(val LISTEN)" ;;
*) ok "py: the host's listening port is not in the sandbox's namespace" ;;
esac
sleep 0.3
is "$(cat "$L.log")" "" "py: the host listener saw nothing"

cat >"$WORK/net.js" <<'EOF'
const net = require('net'), dgram = require('dgram'), dns = require('dns'), fs = require('fs');
const [tport, uport] = process.argv.slice(2).map(Number);
function tcp(name, host, port) {
  return new Promise((res) => {
    const s = net.connect({ host, port, timeout: 3000 });
    s.on('connect', () => { console.log(name + ' OK'); s.destroy(); res(); });
    s.on('timeout', () => { console.log(name + ' FAIL ETIMEDOUT'); s.destroy(); res(); });
    s.on('error', (e) => { console.log(name + ' FAIL ' + e.code); res(); });
  });
}
function udp(name, host, port) {
  return new Promise((res) => {
    const s = dgram.createSocket('udp4');
    s.on('error', (e) => { console.log(name + ' FAIL ' + e.code); s.close(); res(); });
    s.on('message', () => { console.log(name + 'RECV GOT'); });
    s.send(Buffer.from('from-sandbox'), port, host, (e) => {
      console.log(name + (e ? ' FAIL ' + e.code : ' SENT-LOCALLY'));
      setTimeout(() => { try { s.close(); } catch (x) {} res(); }, 500);
    });
  });
}
function lookup(name, fn) {
  return new Promise((res) => {
    const t = setTimeout(() => { console.log(name + ' FAIL TIMEOUT'); res(); }, 5000);
    fn((e, a) => { clearTimeout(t); console.log(name + (e ? ' FAIL ' + e.code : ' OK ' + JSON.stringify(a))); res(); });
  });
}
(async () => {
  await tcp('TCP', '127.0.0.1', tport);
  await tcp('TCP6', '::1', tport);
  await tcp('TCPOUT', '1.1.1.1', 53);
  await udp('UDPSEND', '127.0.0.1', uport);
  await udp('UDPOUT', '1.1.1.1', 53);
  await lookup('DNS', (cb) => dns.lookup('example.com', cb));
  await lookup('RESOLVE', (cb) => dns.resolve4('example.com', cb));
  const ifs = fs.readFileSync('/proc/net/dev', 'utf8').trim().split('\n').slice(2).map((l) => l.split(':')[0].trim());
  console.log('IFACES=' + ifs.sort().join(','));
  console.log('DONE');
})();
EOF
abb 60 "$WORK/net.js" "$TPORT" "$UPORT"
is "$rc" 0 "js: the script ran (exit 0)"
check "js: the script ran to the end" has DONE
check "js: TCP to the host's 127.0.0.1:$TPORT fails" hasre "^TCP FAIL "
check "js: TCP to [::1]:$TPORT fails" hasre "^TCP6 FAIL "
check "js: TCP to an outside address fails" hasre "^TCPOUT FAIL "
refute "js: no UDP answer from the host port" has "UDPSENDRECV GOT"
check "js: UDP to an outside address fails" hasre "^UDPOUT FAIL "
check "js: DNS (dns.lookup example.com) fails" hasre "^DNS FAIL "
check "js: DNS (dns.resolve4 example.com) fails" hasre "^RESOLVE FAIL "
is "$(val IFACES)" lo "js: the only network interface is lo"
sleep 0.3
is "$(cat "$L.log")" "" "js: the host listener saw nothing"

# ---- the sandbox's own loopback (issue 15) ------------------------------------------------
cat >"$WORK/loop.py" <<'EOF'
import errno, socket, sys
hostport = int(sys.argv[1])
def en(e):
    return errno.errorcode.get(e.errno, str(e.errno)) if isinstance(e, OSError) and e.errno else type(e).__name__
def tcp(name, fam, bind_addr, conn_addr, port=0):
    try:
        srv = socket.socket(fam, socket.SOCK_STREAM)
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        srv.bind((bind_addr, port)); srv.listen(4)
        c = socket.create_connection((conn_addr, srv.getsockname()[1]), timeout=3)
        a, _ = srv.accept(); c.sendall(b"ping"); a.sendall(a.recv(4).upper())
        got = c.recv(4); c.close(); a.close(); srv.close()
        print("%s %s" % (name, "OK" if got == b"PING" else "BAD " + repr(got)))
    except Exception as e:
        print("%s FAIL %s" % (name, en(e)))
tcp("TCP4", socket.AF_INET, "127.0.0.1", "127.0.0.1")
tcp("TCPANY", socket.AF_INET, "0.0.0.0", "127.0.0.1")
tcp("TCP6", socket.AF_INET6, "::1", "::1")
# the port the host's listener holds is free here: another namespace
tcp("SAMEPORT", socket.AF_INET, "127.0.0.1", "127.0.0.1", hostport)
try:
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(("127.0.0.1", 0))
    v = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); v.settimeout(3)
    v.sendto(b"dgram", u.getsockname()); d, a = u.recvfrom(16); u.sendto(d.upper(), a)
    print("UDP4 " + ("OK" if v.recvfrom(16)[0] == b"DGRAM" else "BAD"))
except Exception as e:
    print("UDP4 FAIL " + en(e))
print("DONE")
EOF
cat >"$WORK/loop.js" <<'EOF'
const http = require('http');
const srv = http.createServer((req, res) => res.end('hello ' + req.url));
srv.on('error', (e) => { console.log('HTTP FAIL ' + e.code); console.log('DONE'); });
srv.listen(0, '127.0.0.1', () => {
  http.get({ host: '127.0.0.1', port: srv.address().port, path: '/x' }, (res) => {
    let b = '';
    res.on('data', (d) => { b += d; });
    res.on('end', () => { console.log(b === 'hello /x' ? 'HTTP OK' : 'HTTP BAD ' + b); srv.close(); console.log('DONE'); });
  }).on('error', (e) => { console.log('HTTP FAIL ' + e.code); srv.close(); console.log('DONE'); });
});
EOF
abb 60 "$WORK/loop.py" "$TPORT"
is "$rc" 0 "loopback py: exit 0"
check "loopback py: the script ran to the end" has DONE
for w in TCP4 TCPANY TCP6 SAMEPORT UDP4; do
    is "$(sed -n "s/^$w //p" "$WORK/out")" OK "loopback py: $w round trip inside the sandbox"
done
is "$(jr .sandbox.network.mode)" loopback "loopback py: the report says sandbox.network.mode loopback"
check "loopback py: the report says the namespace was checked" \
    jqe '.sandbox.network.enforced and (.sandbox.network.detail | test("lo only"))'
check "loopback py: Landlock has no TCP rule by default" jqe '.sandbox.landlock.detail | test("TCP") | not'
abb 60 "$WORK/loop.js"
is "$rc" 0 "loopback js: exit 0"
is "$(sed -n 's/^HTTP //p' "$WORK/out")" OK "loopback js: an http server on 127.0.0.1 and a client of it"
sleep 0.3
is "$(cat "$L.log")" "" "loopback: the host listener on the same port saw nothing"

# --net-strict: Landlock denies TCP bind and connect, loopback included (ABI >= 4)
abb 60 --net-strict "$WORK/loop.py" "$TPORT"
if [ "$rc" -eq 125 ] && grep -q "Landlock ABI 4" "$WORK/err"; then
    skip "--net-strict denies loopback TCP" "this kernel's Landlock has no TCP rules (ABI < 4): refused, as documented"
else
    is "$rc" 0 "strict py: exit 0"
    for w in TCP4 TCPANY TCP6 SAMEPORT; do
        is "$(sed -n "s/^$w //p" "$WORK/out")" "FAIL EACCES" "strict py: $w on loopback is denied (EACCES)"
    done
    is "$(jr .sandbox.network.mode)" strict "strict py: the report says sandbox.network.mode strict"
    check "strict py: Landlock's detail names the TCP rule" \
        jqe '.sandbox.landlock.detail | test("TCP bind/connect denied")'
    abb 60 --net-strict "$WORK/loop.js"
    is "$(sed -n 's/^HTTP //p' "$WORK/out")" "FAIL EACCES" "strict js: listen on 127.0.0.1 is denied"
fi

# End to end: a bwrap that forgets to unshare the network (a regression, or a wrapper) gets
# the run refused before the script starts, with the reason in the report.
cat >"$WORK/bwrap-sharenet" <<'EOF'
#!/usr/bin/python3
# bwrap with the network namespace shared (everything else unshared as asked)
import os, sys
args = sys.argv[1:]
if "--args" in args:
    fd = int(args[args.index("--args") + 1])
    data = b""
    while True:
        b = os.read(fd, 65536)
        if not b:
            break
        data += b
    data = data.replace(b"--unshare-all\0", b"--unshare-user\0--unshare-ipc\0--unshare-pid\0"
                        b"--unshare-uts\0--unshare-cgroup-try\0")
    m = os.memfd_create("args", 0)
    os.write(m, data)
    os.lseek(m, 0, 0)
    os.dup2(m, fd, inheritable=True)
os.execv("/usr/bin/bwrap", ["bwrap"] + args)
EOF
chmod 755 "$WORK/bwrap-sharenet"
AGENTBOX_BWRAP=$WORK/bwrap-sharenet abb 60 "$WORK/loop.py" "$TPORT"
is "$rc" 125 "a bwrap that shares the network: the run is refused (exit 125)"
is "$(jr .status)" setup_error "a bwrap that shares the network: status setup_error"
check "a bwrap that shares the network: the message says why" \
    jqe '.message | test("not isolated from the network.*shares agentbox.s own network namespace")'
refute "a bwrap that shares the network: the script never ran" has DONE

# The same bwrap, seen first by the memory watchdog (unprivileged: the watchdog's /proc comes
# before agentbox-init's own check; on a loaded machine it often looked first, killed the run,
# and the report said "bubblewrap failed ... no message"). A stand-in PID 1 hands the watchdog
# its fds and never checks anything: the watchdog's own check must refuse the run, saying why.
cat >"$WORK/init-handover-only" <<'EOF'
#!/usr/bin/python3
import os, socket, sys, time
a = sys.argv
if "--memwatch-fd" in a:
    s = socket.socket(fileno=int(a[a.index("--memwatch-fd") + 1]))
    fds = [os.open(p, os.O_RDONLY | os.O_DIRECTORY) for p in ("/proc", "/tmp", "/dev/shm")]
    socket.send_fds(s, [b"M"], fds)
    s.close()
time.sleep(3)
EOF
chmod 755 "$WORK/init-handover-only"
if as_user; then
    AGENTBOX_INIT=$WORK/init-handover-only AGENTBOX_BWRAP=$WORK/bwrap-sharenet abb 60 "$WORK/loop.py" "$TPORT"
    is "$rc" 125 "a bwrap that shares the network, seen by the memory watchdog: refused (exit 125)"
    check "... the message says why" \
        jqe '.message | test("not isolated from the network.*shares agentbox.s own network namespace")'
    refute "... the script never ran" has DONE
else
    skip "a bwrap that shares the network, seen by the memory watchdog" "as root the run's memory is its cgroup's: no watchdog"
fi

# issue 24: the host's namespace inode reaches agentbox-init through its environment, which it
# clears before the script starts: the script's /proc/1/cmdline and environment do not have it.
cat >"$WORK/cmdline.py" <<'EOF'
import os
print("cmdline=" + open("/proc/1/cmdline", "rb").read().replace(b"\0", b" ").decode())
print("env=" + ",".join(k for k in os.environ if "NET_CHECK" in k))
print("DONE")
EOF
HOSTNS=$(stat -L -c %i /proc/self/ns/net)
abb 60 "$WORK/cmdline.py"
is "$(jr .status)" exited "/proc/1/cmdline: the run ends exited"
check "/proc/1/cmdline: the script read it (agentbox-init's)" hasre '^cmdline=.*--status-fd'
refute "/proc/1/cmdline: no host network namespace inode ($HOSTNS) in it" hasre "^cmdline=.*$HOSTNS"
refute "/proc/1/cmdline: no --net-check in it" hasre '^cmdline=.*--net-check'
is "$(val env)" "" "the script's environment has no AGENTBOX_INIT_NET_CHECK"

# agentbox-init's own check, run directly (the inode in its environment): it refuses agentbox's namespace (by inode) and a
# namespace with another interface; a fresh one with only lo passes.
INIT_OK=$WORK/init-ok
printf '#!/bin/sh\necho started\n' >"$INIT_OK"
chmod 755 "$INIT_OK"
init_rc=0
AGENTBOX_INIT_NET_CHECK=$HOSTNS "$AGENTBOX_INIT" --status-fd 3 -- "$INIT_OK" 3>"$WORK/st" >"$WORK/init.out" 2>&1 ||
    init_rc=$?
is "$init_rc" 125 "agentbox-init AGENTBOX_INIT_NET_CHECK: its own namespace (by inode) is refused (exit 125)"
check "agentbox-init AGENTBOX_INIT_NET_CHECK: the status record says why" \
    grep -aq "shares agentbox's own network namespace" "$WORK/st"
refute "agentbox-init AGENTBOX_INIT_NET_CHECK: the command did not start" grep -q started "$WORK/init.out"
if unshare -rn true 2>/dev/null; then
    init_rc=0
    AGENTBOX_INIT_NET_CHECK=$HOSTNS unshare -rn "$AGENTBOX_INIT" --status-fd 3 -- "$INIT_OK" \
        3>"$WORK/st" >"$WORK/init.out" 2>&1 || init_rc=$?
    is "$init_rc" 0 "agentbox-init AGENTBOX_INIT_NET_CHECK: a fresh namespace with lo only passes"
    check "agentbox-init AGENTBOX_INIT_NET_CHECK: ... and the command ran" grep -q started "$WORK/init.out"
    if command -v ip >/dev/null && unshare -rn ip link add v0 type veth peer name v1 2>/dev/null; then
        init_rc=0
        # shellcheck disable=SC2016 # expanded by the inner shell
        unshare -rn sh -c 'ip link add v0 type veth peer name v1 && AGENTBOX_INIT_NET_CHECK=0 exec "$0" --status-fd 3 -- "$1"' \
            "$AGENTBOX_INIT" "$INIT_OK" 3>"$WORK/st" >"$WORK/init.out" 2>&1 || init_rc=$?
        is "$init_rc" 125 "agentbox-init AGENTBOX_INIT_NET_CHECK: a namespace with a veth besides lo is refused"
        check "agentbox-init AGENTBOX_INIT_NET_CHECK: the record names the interface" \
            grep -aq "interface 'v[01]' besides lo" "$WORK/st"
        refute "agentbox-init AGENTBOX_INIT_NET_CHECK: the command did not start there" grep -q started "$WORK/init.out"
    else
        skip "agentbox-init AGENTBOX_INIT_NET_CHECK: an extra interface is refused" "cannot create a veth in a user namespace here (no ip or no veth)"
    fi
else
    skip "agentbox-init AGENTBOX_INIT_NET_CHECK: a fresh namespace passes" "unshare -rn is not allowed here"
fi

# The listener is still up (so an empty log means something): the host can still reach it.
python3 -c 'import socket,sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=2).close()' "$TPORT"
i=0
while [ "$(wc -l <"$L.log")" -lt 1 ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
is "$(wc -l <"$L.log")" 1 "control: the listener was up for the whole test"

listener_stop "$L"
done_testing

#!/bin/sh
# test-network.sh -- no network (T9, T11): TCP and UDP to a listener on the host's 127.0.0.1
# fail from Python and Node and the listener sees nothing; DNS fails; the only interface inside
# is lo and the host's listening socket is not in the sandbox's network namespace.
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

# The listener is still up (so an empty log means something): the host can still reach it.
python3 -c 'import socket,sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=2).close()' "$TPORT"
i=0
while [ "$(wc -l <"$L.log")" -lt 1 ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
is "$(wc -l <"$L.log")" 1 "control: the listener was up for the whole test"

listener_stop "$L"
done_testing

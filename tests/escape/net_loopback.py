# T11: the network, host loopback included. argv: TCPPORT UDPPORT
# The harness listens on 127.0.0.1:TCPPORT (TCP) and :UDPPORT (UDP) on the host and logs every
# connection and datagram. Only 127.0.0.1/::1 are ever addressed; names are resolved, never
# contacted. The sandbox must have nothing but its own loopback.
import errno
import os
import socket
import sys

TCP, UDP = int(sys.argv[1]), int(sys.argv[2])


def en(e):
    return errno.errorcode.get(e, str(e))


def out(tag, what, detail=""):
    print("%s %s%s" % (tag, what, " " + detail if detail else ""), flush=True)


def tcp(what, family, host, port):
    s = socket.socket(family, socket.SOCK_STREAM)
    s.settimeout(3)
    try:
        s.connect((host, port))
        out("ESCAPED", what, "connected")
    except OSError as e:
        out("CONTAINED", what, en(e.errno) if e.errno else type(e).__name__)
    finally:
        s.close()


def udp(what, family, host, port):
    s = socket.socket(family, socket.SOCK_DGRAM)
    s.settimeout(1)
    try:
        s.connect((host, port))
        s.send(b"abesc udp probe")
        s.recv(100)  # a local "port unreachable" arrives as ECONNREFUSED
        out("ESCAPED", what, "got a reply")
    except OSError as e:
        # ECONNREFUSED: nobody listens on that port in this network namespace; a timeout is
        # left to the host side, which logs what it receives
        out("CONTAINED", what, en(e.errno) if e.errno else "no-reply")
    finally:
        s.close()


tcp("tcp-host-listener", socket.AF_INET, "127.0.0.1", TCP)
tcp("tcp-localhost-name", socket.AF_INET, "localhost", TCP)
tcp("tcp6-host-listener", socket.AF_INET6, "::1", TCP)
tcp("tcp-host-ssh", socket.AF_INET, "127.0.0.1", 22)
tcp("tcp-host-ollama", socket.AF_INET, "127.0.0.1", 11434)
udp("udp-host-listener", socket.AF_INET, "127.0.0.1", UDP)
udp("udp6-host-listener", socket.AF_INET6, "::1", UDP)
udp("udp-dns-127.0.0.1", socket.AF_INET, "127.0.0.1", 53)
udp("udp-dns-127.0.0.53", socket.AF_INET, "127.0.0.53", 53)
for name in ("example.com", "metadata.google.internal", "pypi.org"):
    try:
        r = socket.getaddrinfo(name, 443)
        out("ESCAPED", "dns-" + name, r[0][4][0])
    except socket.gaierror as e:
        out("CONTAINED", "dns-" + name, "EAI%d" % e.errno)
    except OSError as e:
        out("CONTAINED", "dns-" + name, en(e.errno))

# what the namespace has: lo only, and no socket of the host
ifs = [l.split(":")[0].strip() for l in open("/proc/net/dev").read().splitlines()[2:]]
out("CONTAINED" if ifs == ["lo"] else "ESCAPED", "interfaces", ",".join(ifs))
listen = []
for f in ("/proc/net/tcp", "/proc/net/tcp6"):
    for l in open(f).read().splitlines()[1:]:
        port = int(l.split()[1].split(":")[1], 16)
        if port == TCP:
            listen.append(f)
out("ESCAPED" if listen else "CONTAINED", "host-listener-invisible", ",".join(listen) or "absent")
routes = open("/proc/net/route").read().splitlines()[1:]
out("ESCAPED" if any(r.split()[0] != "lo" for r in routes) else "CONTAINED", "no-routes",
    "%d routes" % len(routes))
print("DONE net_loopback", flush=True)

#!/usr/bin/env python3
"""hostside.py -- host-side oracles for tests/integration/test-escape.sh (NOT an attack).

Runs on the host, outside any sandbox, and records whether an attack reached it:

  hostside.py listen LOG SECS NAME...     listen on unix sockets (a path, or '@name' for an
                                           abstract one, bound both exact and NUL-padded);
                                           log "conn NAME" for every connection and
                                           "bound NAME" / "bindfail NAME ERR" at start;
                                           LOG.ready appears when all are bound
  hostside.py sleeper LOG SECS TOKEN      a long sleep that logs every catchable signal it
                                           gets ("sig N") and keeps sleeping; TOKEN is only
                                           there so that the process can be found by name
  hostside.py pty LOG SECS                a pseudo-terminal with no session: prints the slave
                                           path on stdout, then keeps LOG holding (repr) all
                                           that showed up on each side of it so far: what
                                           TIOCSTI injects ("slave") and what is written to
                                           the terminal ("master")
  hostside.py nslisten LOG SECS PID NAME  enter the network namespace of PID (root: setns;
                                           a user: first the user namespace that owns it) and
                                           listen on the abstract socket NAME there, outside
                                           the sandbox's Landlock domain; log "listening" and
                                           "conn" / "noconn"

Everything is bounded by SECS; nothing is ever sent anywhere.
"""
import ctypes
import fcntl
import os
import select
import signal
import socket
import sys
import time
import tty


def log_to(path):
    f = open(path, "a", buffering=1)
    return f


def sockaddr(name):
    return b"\0" + name[1:].encode() if name.startswith("@") else name


def addresses(name):
    """(label, address) to bind for NAME. An abstract name is bound twice: with its exact
    length (how C, Python and X11 address it) and NUL-padded to the whole sun_path (how
    Node's libuv addresses it): to the kernel those are different names, and an oracle that
    listens on only one would let the other kind of client fail for the wrong reason."""
    if not name.startswith("@"):
        return [(name, name)]
    exact = sockaddr(name)
    return [(name, exact), (name + "+padded", exact + b"\0" * (108 - len(exact)))]


def cmd_listen(logp, secs, names):
    log = log_to(logp)
    socks = {}
    for label, addr in [a for n in names for a in addresses(n)]:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.bind(addr)
            s.listen(16)
            s.setblocking(False)
            socks[s] = label
            log.write("bound %s\n" % label)
        except OSError as e:
            log.write("bindfail %s %s\n" % (label, e.strerror))
            s.close()
    open(logp + ".ready", "w").close()
    end = time.monotonic() + secs
    while time.monotonic() < end and socks:
        r, _, _ = select.select(list(socks), [], [], 0.5)
        for s in r:
            try:
                c, _ = s.accept()
                log.write("conn %s\n" % socks[s])
                c.close()
            except OSError:
                pass


def cmd_sleeper(logp, secs, _token):
    log = log_to(logp)

    def handler(signum, _frame):
        log.write("sig %d\n" % signum)

    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2,
              signal.SIGQUIT, signal.SIGALRM, signal.SIGCONT):
        signal.signal(s, handler)
    end = time.monotonic() + secs
    while time.monotonic() < end:
        time.sleep(min(1.0, max(0.0, end - time.monotonic())))


def cmd_pty(logp, secs):
    m, s = os.openpty()  # O_NOCTTY: this process never adopts it
    tty.setraw(s)
    print(os.ttyname(s), flush=True)
    os.set_blocking(m, False)
    os.set_blocking(s, False)
    seen = {m: b"", s: b""}
    open(logp, "w").close()
    end = time.monotonic() + secs
    while time.monotonic() < end:
        r, _, _ = select.select([m, s], [], [], 0.2)
        for fd in r:
            try:
                data = os.read(fd, 4096)
            except OSError:
                continue
            if data:
                seen[fd] += data
                # the whole of each side so far, one line each (reads split arbitrarily)
                with open(logp + ".tmp", "w") as f:
                    f.write("master %r\nslave %r\n" % (seen[m], seen[s]))
                os.rename(logp + ".tmp", logp)


def cmd_nslisten(logp, secs, pid, name):
    log = log_to(logp)
    libc = ctypes.CDLL(None, use_errno=True)
    netfd = os.open("/proc/%d/ns/net" % pid, os.O_RDONLY)
    if os.geteuid() != 0:
        userfd = fcntl.ioctl(netfd, 0xB701)  # NS_GET_USERNS: the owner of that netns
        if libc.setns(userfd, 0x10000000) != 0:
            log.write("setns-user-failed %s\n" % os.strerror(ctypes.get_errno()))
            return 3
    if libc.setns(netfd, 0x40000000) != 0:
        log.write("setns-net-failed %s\n" % os.strerror(ctypes.get_errno()))
        return 3
    socks = []
    for _label, addr in addresses(name):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(addr)
        s.listen(4)
        socks.append(s)
    log.write("listening\n")
    r, _, _ = select.select(socks, [], [], secs)
    if r:
        c, _ = r[0].accept()
        log.write("conn\n")
        c.close()
    else:
        log.write("noconn\n")
    return 0


def main(argv):
    cmd = argv[1]
    if cmd == "listen":
        return cmd_listen(argv[2], float(argv[3]), argv[4:])
    if cmd == "sleeper":
        return cmd_sleeper(argv[2], float(argv[3]), argv[4])
    if cmd == "pty":
        return cmd_pty(argv[2], float(argv[3]))
    if cmd == "nslisten":
        return cmd_nslisten(argv[2], float(argv[3]), int(argv[4]), argv[5])
    print("usage: hostside.py listen|sleeper|pty|nslisten ...", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv) or 0)

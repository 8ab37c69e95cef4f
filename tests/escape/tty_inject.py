# T10 (+T29): terminal injection. argv: TOKEN
# TIOCSTI (push keystrokes into a terminal's input) and TIOCLINUX (console paste), with the
# 32-bit command numbers and with junk in the upper 32 bits (CVE-2019-10063), through
# fcntl.ioctl and a raw syscall, on fds 0, 1, 2 and /dev/tty. When the harness hands us a
# terminal as stdin (--stdin /dev/pts/N of a pty with no session), the script also tries to
# adopt it as its controlling terminal (setsid + TIOCSCTTY), which is what makes TIOCSTI work
# for an unprivileged process, and to write raw bytes to it through /dev/tty, around
# agentbox's output relay. The harness reads the pty: nothing may arrive.
import ctypes
import errno
import fcntl
import os
import sys
import termios

TOKEN = sys.argv[1]
TIOCSTI, TIOCLINUX, TIOCSCTTY = termios.TIOCSTI, 0x541C, termios.TIOCSCTTY
HI = 1 << 32
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long


def en(e):
    return errno.errorcode.get(e, str(e))


def out(tag, what, detail=""):
    print("%s %s%s" % (tag, what, " " + detail if detail else ""), flush=True)


def raw_ioctl(fd, cmd, buf):
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(16), ctypes.c_long(fd), ctypes.c_ulong(cmd), buf)
    if r < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return r


def inject(fd, cmd, raw):
    """Pushes the whole marker, one byte per call; returns only if every call worked."""
    data = ("\nabesc-injected-%s\n" % TOKEN).encode()
    for b in data:
        if cmd & 0xFFFFFFFF == TIOCLINUX:
            arg = bytes([3, b])  # TIOCL_PASTESEL-ish subcode with a byte
        else:
            arg = bytes([b])
        if raw:
            raw_ioctl(fd, cmd, ctypes.create_string_buffer(arg))
        else:
            fcntl.ioctl(fd, cmd, arg)


def attempt(what, fn):
    try:
        fn()
    except OSError as e:
        out("CONTAINED", what, en(e.errno))
        return False
    out("ESCAPED", what, "succeeded")
    return True


def all_injections(tag):
    fds = [(str(i), i) for i in (0, 1, 2)]
    try:
        fds.append(("devtty", os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY)))
        # before: a controlling terminal we never asked for; after: the one we just adopted
        out("ESCAPED" if tag == "before" else "NOTE", "open-dev-tty-" + tag,
            "opened (a controlling terminal exists)")
    except OSError as e:
        out("CONTAINED", "open-dev-tty-" + tag, en(e.errno))
    for name, fd in fds:
        for cname, cmd in (("tiocsti", TIOCSTI), ("tioclinux", TIOCLINUX)):
            attempt("%s-fd%s-%s" % (cname, name, tag), lambda: inject(fd, cmd, False))
            attempt("%s64-fd%s-%s" % (cname, name, tag), lambda: inject(fd, cmd | HI, True))
            attempt("%s-raw-fd%s-%s" % (cname, name, tag), lambda: inject(fd, cmd, True))


all_injections("before")

if os.isatty(0):
    # the attack that makes TIOCSTI legal: become a session leader and take the terminal
    try:
        os.setsid()
    except OSError:
        pass
    try:
        fcntl.ioctl(0, TIOCSCTTY, 0)
        out("NOTE", "adopted-stdin-as-controlling-terminal")
    except OSError as e:
        out("NOTE", "tiocsctty-refused", en(e.errno))
    all_injections("after-setsid")
    # write to the terminal directly, bypassing agentbox's relay and its escaping (T29)
    for what, path in (("dev-tty", "/dev/tty"), ("reopen-stdin", "/proc/self/fd/0")):
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NOCTTY)
            os.write(fd, ("\x1b]0;abesc-raw-%s\x07abesc-raw-%s\n" % (TOKEN, TOKEN)).encode())
            os.close(fd)
            out("ESCAPED", "raw-write-to-terminal-" + what, "wrote past the relay")
        except OSError as e:
            out("CONTAINED", "raw-write-to-terminal-" + what, en(e.errno))
else:
    out("CONTAINED", "stdin-is-not-a-terminal", os.readlink("/proc/self/fd/0"))
print("DONE tty_inject", flush=True)

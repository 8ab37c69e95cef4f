# T12: signals, ptrace and /proc access to a host process of the same uid, and to our own
# PID 1. argv: HOSTPID TOKEN
# The harness runs a sleeper on the host (same uid as the sandbox as a user; root's as root)
# with "abesc-sleep-TOKEN" in its command line (our own command line, and PID 1's, carry only
# TOKEN); it logs every signal it gets and must be alive afterwards.
import ctypes
import errno
import os
import signal
import sys
import time

HOSTPID, MARK = int(sys.argv[1]), "abesc-sleep-" + sys.argv[2]
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
PTRACE_TRACEME, PTRACE_ATTACH, PTRACE_SEIZE, PTRACE_PEEKDATA = 0, 16, 0x4206, 2


def en(e):
    return errno.errorcode.get(e, str(e))


def out(tag, what, detail=""):
    print("%s %s%s" % (tag, what, " " + detail if detail else ""), flush=True)


def sc(nr, *args):
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) if isinstance(a, int) else a
                                         for a in args])
    if r < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return r


def is_ours(pid):
    """True if pid (in our PID namespace) is the host sleeper: its cmdline has MARK."""
    try:
        return MARK.encode() in open("/proc/%d/cmdline" % pid, "rb").read()
    except OSError:
        return False


def attempt(what, fn):
    try:
        r = fn()
    except OSError as e:
        out("CONTAINED", what, en(e.errno))
        return
    out("ESCAPED", what, "returned %r" % (r,))


# the host pid, by number: it is not in our PID namespace
for sig, name in ((0, "probe"), (signal.SIGTERM, "sigterm"), (signal.SIGUSR1, "sigusr1")):
    attempt("kill-hostpid-" + name, lambda s=sig: os.kill(HOSTPID, s))
attempt("pidfd-open-hostpid", lambda: sc(434, HOSTPID, 0))
attempt("ptrace-attach-hostpid", lambda: sc(101, PTRACE_ATTACH, HOSTPID, 0, 0))
attempt("ptrace-seize-hostpid", lambda: sc(101, PTRACE_SEIZE, HOSTPID, 0, 0))
attempt("process-vm-readv-hostpid", lambda: sc(310, HOSTPID, 0, 0, 0, 0, 0))
for f in ("cmdline", "environ", "status", "mem", "root"):
    attempt("proc-hostpid-" + f, lambda f=f: os.stat("/proc/%d/%s" % (HOSTPID, f)))

# every process we can see: none may be the host sleeper
visible = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
host = [p for p in visible if is_ours(p)]
out("ESCAPED" if host else "CONTAINED", "host-process-invisible",
    "pids %s" % ",".join(map(str, visible)))

# PID 1 (agentbox-init): same uid, but non-dumpable, and the filter denies ptrace
attempt("ptrace-attach-pid1", lambda: sc(101, PTRACE_ATTACH, 1, 0, 0))
attempt("ptrace-seize-pid1", lambda: sc(101, PTRACE_SEIZE, 1, 0, 0))
attempt("ptrace-traceme", lambda: sc(101, PTRACE_TRACEME, 0, 0, 0))
attempt("process-vm-readv-pid1", lambda: sc(310, 1, 0, 0, 0, 0, 0))
attempt("pidfd-getfd-pid1", lambda: sc(438, sc(434, 1, 0), 0, 0))
attempt("kcmp-pid1", lambda: sc(312, 1, os.getpid(), 0, 0, 0))
attempt("read-pid1-mem", lambda: open("/proc/1/mem", "rb").read(1))

# signals to PID 1 from inside are dropped unless it handles them: it must survive a SIGKILL
for s in (signal.SIGTERM, signal.SIGINT, signal.SIGKILL):
    try:
        os.kill(1, s)
    except OSError:
        pass
time.sleep(0.2)
out("CONTAINED", "pid1-survives-sigkill", "still running")  # else we would be dead by now

# kill(-1): every process we may signal. We and our child ignore it; the harness checks that
# the host sleeper never got it.
signal.signal(signal.SIGUSR2, signal.SIG_IGN)
pid = os.fork()
if pid == 0:
    try:
        os.kill(-1, signal.SIGUSR2)
    except OSError:
        pass
    os._exit(0)
os.waitpid(pid, 0)
out("ATTEMPT", "kill-minus-one-sigusr2", "host decides")
print("DONE signal_ptrace", flush=True)

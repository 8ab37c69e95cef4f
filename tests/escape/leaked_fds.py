# T7: file descriptors the caller leaked into agentbox (the harness opens fd 7 on a host
# directory, fd 8 for append on a host file and fd 9 on a host secret before it runs us).
# argv: none. Only 0, 1 and 2 may exist: stdin /dev/null, stdout and stderr pipes (never a
# terminal). Every way of reaching the leaked fds is tried.
import errno
import os
import stat
import subprocess

EXPECTED = {0, 1, 2}


def en(e):
    return errno.errorcode.get(e, str(e))


def out(tag, what, detail=""):
    print("%s %s%s" % (tag, what, " " + detail if detail else ""), flush=True)


def attempt(what, fn):
    try:
        r = fn()
    except OSError as e:
        out("CONTAINED", what, en(e.errno))
        return
    out("ESCAPED", what, "succeeded" if r is None else repr(r)[:80])


names = os.listdir("/proc/self/fd")  # its own directory fd is closed again by now
open_fds = set()
for n in names:
    try:
        os.fstat(int(n))
        open_fds.add(int(n))
    except OSError:
        pass
for fd in sorted(open_fds - EXPECTED):
    try:
        target = os.readlink("/proc/self/fd/%d" % fd)
    except OSError as e:
        target = en(e.errno)
    out("ESCAPED", "inherited-fd-%d" % fd, target)
out("CONTAINED" if open_fds <= EXPECTED else "ESCAPED", "fd-set",
    ",".join(str(f) for f in sorted(open_fds)))

# every number, not only what /proc lists
reachable = []
for fd in range(3, 4096):
    try:
        os.fstat(fd)
        reachable.append(fd)
    except OSError:
        pass
out("ESCAPED" if reachable else "CONTAINED", "fstat-3-to-4095",
    ",".join(map(str, reachable)) or "all EBADF")

# the leaked numbers, directly
attempt("read-fd-9", lambda: os.read(9, 100))
attempt("write-fd-8", lambda: os.write(8, b"pwned by the sandbox\n"))
attempt("openat-fd-7", lambda: os.close(os.open("pwned", os.O_WRONLY | os.O_CREAT, dir_fd=7)))
attempt("proc-self-fd-7-create", lambda: open("/proc/self/fd/7/pwned2", "w").close())
attempt("proc-self-fd-7-up", lambda: os.listdir("/proc/self/fd/7/.."))
attempt("dev-fd-9", lambda: open("/dev/fd/9").read())
attempt("proc-1-fd-9", lambda: open("/proc/1/fd/9").read())
attempt("fchdir-fd-7", lambda: os.fchdir(7))

# stdio: /dev/null in, pipes out
st = [os.fstat(i) for i in range(3)]
t0 = os.readlink("/proc/self/fd/0")
out("CONTAINED" if t0 == "/dev/null" else "ESCAPED", "stdin-is-dev-null", t0)
for i in (1, 2):
    tty = os.isatty(i)
    fifo = stat.S_ISFIFO(st[i].st_mode)
    out("CONTAINED" if fifo and not tty else "ESCAPED", "fd%d-is-a-pipe" % i,
        os.readlink("/proc/self/fd/%d" % i))
out("ESCAPED" if os.isatty(0) else "CONTAINED", "stdin-not-a-tty")
attempt("open-dev-tty", lambda: os.close(os.open("/dev/tty", os.O_RDWR)))

# what a child would inherit if nothing closed it (close_fds=False)
r = subprocess.run(["/work/ab-probe", "fds"], capture_output=True, text=True, close_fds=False)
child = r.stdout.split()
out("CONTAINED" if child and set(child) <= {"0", "1", "2"} else "ESCAPED", "child-fds",
    ",".join(child))
print("DONE leaked_fds", flush=True)

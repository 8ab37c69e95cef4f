# T32: nested user namespaces (and the other namespaces they would unlock), by unshare(2),
# raw clone(2) and clone3(2) through ctypes, setns(2), and the unshare/bwrap tools.
# argv: none. unshare/clone must fail with EPERM (filter) or ENOSPC (--disable-userns),
# clone3 with ENOSYS.
import ctypes
import errno
import os
import struct
import subprocess

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
libc.unshare.argtypes = [ctypes.c_int]
CLONE = {"user": 0x10000000, "mnt": 0x00020000, "pid": 0x20000000, "net": 0x40000000,
         "uts": 0x04000000, "ipc": 0x08000000, "cgroup": 0x02000000, "time": 0x00000080}
SIGCHLD = 17


def en(e):
    return errno.errorcode.get(e, str(e))


def out(tag, what, detail=""):
    print("%s %s%s" % (tag, what, " " + detail if detail else ""), flush=True)


def unshare(flags):
    if libc.unshare(flags) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def raw_clone(flags):
    """clone(flags | SIGCHLD) like fork(); a child that appears exits at once."""
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(56), ctypes.c_long(flags | SIGCHLD), ctypes.c_long(0),
                     ctypes.c_long(0), ctypes.c_long(0), ctypes.c_long(0))
    if r == 0:
        os._exit(0)
    if r < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    os.waitpid(r, 0)
    return r


def clone3(flags):
    # struct clone_args: flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls
    args = ctypes.create_string_buffer(struct.pack("=8Q", flags, 0, 0, 0, SIGCHLD, 0, 0, 0))
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(435), args, ctypes.c_long(64))
    if r == 0:
        os._exit(0)
    if r < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    os.waitpid(r, 0)
    return r


def attempt(what, fn):
    try:
        r = fn()
    except OSError as e:
        out("CONTAINED", what, en(e.errno))
        return
    out("ESCAPED", what, "returned %r" % (r,))


attempt("unshare-user", lambda: unshare(CLONE["user"]))
attempt("unshare-user-all", lambda: unshare(sum(CLONE.values())))
for ns in ("mnt", "pid", "net", "uts", "ipc", "cgroup", "time"):
    attempt("unshare-" + ns, lambda f=CLONE[ns]: unshare(f))
attempt("clone-newuser", lambda: raw_clone(CLONE["user"]))
attempt("clone-newuser-newnet", lambda: raw_clone(CLONE["user"] | CLONE["net"]))
attempt("clone-newns", lambda: raw_clone(CLONE["mnt"]))
attempt("clone3-newuser", lambda: clone3(CLONE["user"]))


def setns(path, nstype):
    fd = os.open(path, os.O_RDONLY)
    try:
        if libc.setns(fd, nstype) != 0:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e))
    finally:
        os.close(fd)


attempt("setns-own-user", lambda: setns("/proc/self/ns/user", CLONE["user"]))
attempt("setns-pid1-user", lambda: setns("/proc/1/ns/user", CLONE["user"]))
for what, argv in (("unshare-tool-user", ["/usr/bin/unshare", "-U", "/usr/bin/true"]),
                   ("unshare-tool-map-root", ["/usr/bin/unshare", "-Ur", "/usr/bin/id", "-u"]),
                   ("bwrap-tool-nested", ["/usr/bin/bwrap", "--unshare-user", "--ro-bind", "/",
                                          "/", "/usr/bin/true"]),
                   ("bwrap-tool-uid0", ["/usr/bin/bwrap", "--unshare-user", "--uid", "0",
                                        "--ro-bind", "/", "/", "/usr/bin/id", "-u"])):
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=10)
        out("ESCAPED" if r.returncode == 0 else "CONTAINED", what,
            "exit %d %s" % (r.returncode, "_".join(r.stderr.split()[:6])))
    except OSError as e:
        out("CONTAINED", what, en(e.errno))
try:
    v = open("/proc/sys/user/max_user_namespaces").read().strip()
    out("NOTE", "max-user-namespaces", v)
except OSError:
    pass
print("DONE userns_nested", flush=True)

# T3: mount, remount, chroot, pivot_root, namespace and file-handle ("shocker") breakouts,
# through raw syscalls (ctypes). argv: TOKEN
# Every call must be refused; afterwards the root and /usr must still be read-only and no
# mount named after TOKEN may exist (the harness checks the host mount table too).
import ctypes
import errno
import os
import struct
import sys

TOKEN = sys.argv[1]
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long

MS_RDONLY, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 1, 32, 4096, 16384, 1 << 18
MNT_DETACH = 2
CLONE_NEWNS, CLONE_NEWUSER = 0x00020000, 0x10000000
AT_FDCWD = -100
NR = {"pivot_root": 155, "chroot": 161, "umount2": 166, "name_to_handle_at": 303,
      "open_by_handle_at": 304, "setns": 308, "open_tree": 428, "move_mount": 429,
      "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433, "mount_setattr": 442,
      "mount": 165, "unshare": 272}


def en(e):
    return errno.errorcode.get(e, str(e))


def out(tag, what, detail=""):
    print("%s %s%s" % (tag, what, " " + detail if detail else ""), flush=True)


def arg(a):
    if a is None:
        return ctypes.c_void_p(None)
    if isinstance(a, bytes):
        return ctypes.c_char_p(a)
    if isinstance(a, int):
        return ctypes.c_long(a)
    return a


def sc(name, *args):
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(NR[name]), *[arg(a) for a in args])
    if r < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return r


def attempt(what, fn):
    try:
        r = fn()
    except OSError as e:
        out("CONTAINED", what, en(e.errno))
        return
    out("ESCAPED", what, "returned %r" % (r,))


for d in ("/tmp/m", "/tmp/b", "/tmp/c", "/tmp/c/inner"):
    os.makedirs(d, exist_ok=True)

src = ("abesc-" + TOKEN).encode()
attempt("mount-tmpfs", lambda: sc("mount", src, b"/tmp/m", b"tmpfs", 0, None))
attempt("remount-root-rw", lambda: sc("mount", None, b"/", None, MS_REMOUNT | MS_BIND, None))
attempt("remount-usr-rw", lambda: sc("mount", None, b"/usr", None, MS_REMOUNT | MS_BIND, None))
attempt("remount-proc-sys-rw",
        lambda: sc("mount", None, b"/proc/sys", None, MS_REMOUNT | MS_BIND, None))
attempt("bind-root-elsewhere", lambda: sc("mount", b"/", b"/tmp/b", None, MS_BIND | MS_REC, None))
attempt("make-root-private", lambda: sc("mount", None, b"/", None, MS_PRIVATE | MS_REC, None))
attempt("mount-proc-again", lambda: sc("mount", src, b"/tmp/m", b"proc", 0, None))
attempt("umount-proc-sys", lambda: sc("umount2", b"/proc/sys", MNT_DETACH))
attempt("umount-work", lambda: sc("umount2", b"/work", MNT_DETACH))
attempt("umount-usr", lambda: sc("umount2", b"/usr", MNT_DETACH))

# the classic chroot escape: chroot into a subdirectory, walk up past it, chroot(".")
def chroot_escape():
    cwd = os.open("/", os.O_RDONLY | os.O_DIRECTORY)
    sc("chroot", b"/tmp/c")
    os.fchdir(cwd)
    for _ in range(32):
        os.chdir("..")
    return sc("chroot", b".")


attempt("chroot-escape", chroot_escape)
os.chdir("/work")
attempt("pivot-root", lambda: sc("pivot_root", b"/tmp/c", b"/tmp/c/inner"))
attempt("unshare-mount-ns", lambda: sc("unshare", CLONE_NEWNS))
attempt("unshare-user-mount-ns", lambda: sc("unshare", CLONE_NEWUSER | CLONE_NEWNS))


def setns_to(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        return sc("setns", fd, 0)
    finally:
        os.close(fd)


attempt("setns-pid1-mnt", lambda: setns_to("/proc/1/ns/mnt"))
attempt("setns-self-mnt", lambda: setns_to("/proc/self/ns/mnt"))


# open_by_handle_at "shocker": an ext4/xfs root-directory handle (inode 2, generation 0),
# opened relative to a mount on the host's root filesystem (/usr)
def shocker():
    mfd = os.open("/usr", os.O_RDONLY | os.O_DIRECTORY)
    fh = ctypes.create_string_buffer(struct.pack("=Ii", 8, 1) + struct.pack("=II", 2, 0))
    return sc("open_by_handle_at", mfd, fh, os.O_RDONLY)


def name_to_handle():
    fh = ctypes.create_string_buffer(struct.pack("=Ii", 128, 0) + b"\0" * 128)
    mid = ctypes.c_int(0)
    return sc("name_to_handle_at", AT_FDCWD, b"/usr", fh, ctypes.byref(mid), 0)


attempt("open-by-handle-at-shocker", shocker)
attempt("name-to-handle-at", name_to_handle)

# the new mount API (CVE-2021-41133 class)
attempt("fsopen-tmpfs", lambda: sc("fsopen", b"tmpfs", 0))
attempt("open-tree-clone-root", lambda: sc("open_tree", AT_FDCWD, b"/", 1 | 0x8000))
attempt("move-mount", lambda: sc("move_mount", AT_FDCWD, b"/tmp/m", AT_FDCWD, b"/tmp/b", 0))
attempt("fspick-root", lambda: sc("fspick", AT_FDCWD, b"/", 0))
attempt("fsconfig", lambda: sc("fsconfig", -1, 0, None, None, 0))
attempt("fsmount", lambda: sc("fsmount", -1, 0, 0))
# mount_setattr(AT_FDCWD, "/usr", AT_RECURSIVE, {attr_set=0, attr_clr=MOUNT_ATTR_RDONLY}, 32)
attr = ctypes.create_string_buffer(struct.pack("=QQQQ", 0, 1, 0, 0))
attempt("mount-setattr-usr-rw", lambda: sc("mount_setattr", AT_FDCWD, b"/usr", 0x8000, attr, 32))

# the net effect: still read-only, and no mount of ours anywhere
for label, p in (("root", "/" + TOKEN), ("usr", "/usr/" + TOKEN)):
    try:
        os.close(os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL))
        out("ESCAPED", "still-readonly-" + label, "created " + p)
    except OSError as e:
        out("CONTAINED", "still-readonly-" + label, en(e.errno))
mi = open("/proc/self/mountinfo").read()
out("ESCAPED" if TOKEN in mi else "CONTAINED", "no-new-mount", "%d mounts" % len(mi.splitlines()))
print("DONE mount_breakout", flush=True)

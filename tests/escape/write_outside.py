# T1/T5: write or modify host files from inside the sandbox.
# argv: TOKEN CANARY HOSTHOME RUNSROOT HOSTWORK
# Every path below names something outside the sandbox's own writable places (/work, /tmp,
# /dev/shm): the read-only root and base, magic links under /proc, the workspace's parent,
# directory fds, and host paths passed in by the harness. Creating, opening for write,
# renaming, linking or chmod'ing any of them must fail. Prints CONTAINED/ESCAPED per attempt.
import errno
import os
import sys

TOKEN, CANARY, HOSTHOME, RUNSROOT, HOSTWORK = sys.argv[1:6]


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
    out("ESCAPED", what, "succeeded" if r is None else str(r))


def create(path):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    os.write(fd, b"pwned by the sandbox\n")
    os.close(fd)


def open_w(path, extra=0):
    # opened for writing, never written: success alone is the escape
    fd = os.open(path, os.O_WRONLY | extra)
    os.close(fd)


def append(path):
    with open(path, "a") as f:
        f.write("pwned by the sandbox\n")


# Directory fds the script holds: a write through /proc/self/fd/N must not leave the mounts.
root_fd = os.open("/", os.O_RDONLY | os.O_DIRECTORY)
work_fd = os.open("/work", os.O_RDONLY | os.O_DIRECTORY)
usr_fd = os.open("/usr", os.O_PATH | os.O_DIRECTORY)
etc_fd = os.open("/etc", os.O_RDONLY | os.O_DIRECTORY)

targets = [
    ("parent-of-work", "/work/../" + TOKEN),
    ("root", "/" + TOKEN),
    ("etc", "/etc/" + TOKEN),
    ("usr", "/usr/" + TOKEN),
    ("usr-bin", "/usr/bin/" + TOKEN),
    ("bin-link", "/bin/" + TOKEN),
    ("tmp-parent", "/tmp/../" + TOKEN),
    ("agentbox-dir", "/.agentbox/" + TOKEN),
    ("etc-alternatives", "/etc/alternatives/" + TOKEN),
    ("proc-self-root", "/proc/self/root/" + TOKEN),
    ("proc-self-cwd-up", "/proc/self/cwd/../" + TOKEN),
    ("proc-thread-self-root", "/proc/thread-self/root/" + TOKEN),
    ("proc-1-root", "/proc/1/root/" + TOKEN),
    ("proc-1-cwd-up", "/proc/1/cwd/../" + TOKEN),
    ("proc-self-fd-root", "/proc/self/fd/%d/%s" % (root_fd, TOKEN)),
    ("proc-self-fd-work-up", "/proc/self/fd/%d/../%s" % (work_fd, TOKEN)),
    ("proc-self-fd-usr", "/proc/self/fd/%d/%s" % (usr_fd, TOKEN)),
    ("dev-fd-etc", "/dev/fd/%d/%s" % (etc_fd, TOKEN)),
    ("host-home", os.path.join(HOSTHOME, TOKEN)),
    ("host-runs-root", os.path.join(RUNSROOT, TOKEN)),
    ("host-test-dir", os.path.join(HOSTWORK, TOKEN)),
    ("host-tmp-via-root", "/proc/self/root" + os.path.join(HOSTWORK, TOKEN)),
]
# every process's root and cwd links
for p in sorted(os.listdir("/proc")):
    if p.isdigit():
        targets.append(("proc-%s-root-scan" % p, "/proc/%s/root/%s" % (p, TOKEN)))
        targets.append(("proc-%s-cwd-up-scan" % p, "/proc/%s/cwd/../%s" % (p, TOKEN)))

for label, path in targets:
    attempt("create-" + label, lambda p=path: create(p))
    attempt("mkdir-" + label, lambda p=path: os.mkdir(p + ".d"))
    attempt("symlink-" + label, lambda p=path: os.symlink("/", p + ".l"))

# relative to directory fds
attempt("openat-root-fd", lambda: os.close(os.open(TOKEN, os.O_WRONLY | os.O_CREAT | os.O_EXCL,
                                                   dir_fd=root_fd)))
attempt("openat-work-fd-up", lambda: os.close(os.open("../" + TOKEN, os.O_WRONLY | os.O_CREAT |
                                                      os.O_EXCL, dir_fd=work_fd)))
attempt("openat-etc-fd", lambda: os.close(os.open(TOKEN, os.O_WRONLY | os.O_CREAT | os.O_EXCL,
                                                  dir_fd=etc_fd)))
os.chdir("/work")
attempt("fchdir-root-create", lambda: (os.fchdir(root_fd), create(TOKEN)))
os.chdir("/work")

# existing files: the host canary, the base, our own PID 1 and interpreter binaries (T5)
attempt("append-host-canary", lambda: append(CANARY))
attempt("append-via-root-canary", lambda: append("/proc/self/root" + CANARY))
attempt("append-etc-passwd", lambda: append("/etc/passwd"))
attempt("open-w-etc-hostname", lambda: open_w("/etc/hostname"))
attempt("open-w-usr-bin-python3", lambda: open_w("/usr/bin/python3"))
attempt("open-w-proc-self-exe", lambda: open_w("/proc/self/exe"))
attempt("open-w-proc-1-exe", lambda: open_w("/proc/1/exe"))
attempt("open-w-agentbox-init", lambda: open_w("/.agentbox/init"))
attempt("open-w-ld-so-cache", lambda: open_w("/etc/ld.so.cache"))
# the host files bound into the sandbox's /etc for libraries (src/supervisor/etcgen.c): read-only too
attempt("open-w-etc-matplotlibrc", lambda: open_w("/etc/matplotlibrc"))
attempt("open-w-etc-mime-types", lambda: open_w("/etc/mime.types"))
attempt("create-in-etc-fonts", lambda: open_w("/etc/fonts/agentbox-escape.conf", os.O_CREAT))
attempt("chmod-usr-bin-python3",
        lambda: os.chmod("/usr/bin/python3", os.stat("/usr/bin/python3").st_mode & 0o7777))
attempt("chmod-agentbox-init",
        lambda: os.chmod("/.agentbox/init", os.stat("/.agentbox/init").st_mode & 0o7777))
attempt("chmod-root-dir", lambda: os.chmod("/", os.stat("/").st_mode & 0o7777))

# move or link something from the workspace out of it
with open("/work/movable", "w") as f:
    f.write("x")
attempt("rename-out-of-work", lambda: os.rename("/work/movable", "/work/../" + TOKEN))
attempt("rename-to-etc", lambda: os.rename("/work/movable", "/etc/" + TOKEN))
attempt("link-out-of-work", lambda: os.link("/work/movable", "/work/../" + TOKEN))
attempt("rename-work-itself", lambda: os.rename("/work", "/" + TOKEN))
attempt("rmdir-work", lambda: os.rmdir("/work"))

# a symlink planted in the workspace, then written through
os.symlink("/etc", "/work/etc-link")
attempt("create-through-workspace-symlink", lambda: create("/work/etc-link/" + TOKEN))
os.symlink("/", "/work/root-link")
attempt("create-through-root-symlink", lambda: create("/work/root-link/" + TOKEN))

print("DONE write_outside", flush=True)

# T7: a host directory handed to the sandbox as stdin (agentbox run --stdin DIR); see
# stdin_dir.js. (CPython 3.11 refuses to start with a directory as stdin, so this version only
# runs where the interpreter accepts it; the harness checks the host side either way.)
# argv: SECRET_NAME
import errno
import os
import stat
import sys

SECRET = sys.argv[1]


def en(e):
    return errno.errorcode.get(e, str(e))


def out(tag, what, detail=""):
    print("%s %s%s" % (tag, what, " " + detail if detail else ""), flush=True)


try:
    is_dir = stat.S_ISDIR(os.fstat(0).st_mode)
except OSError:
    is_dir = False
out("NOTE" if is_dir else "CONTAINED", "stdin-is-a-directory", str(is_dir))


def host_root():
    names = os.listdir("/proc/self/fd/0/../../..")
    if ".agentbox" in names:
        raise OSError(errno.ENOENT, "the sandbox's own root")
    return ",".join(sorted(names)[:8])


def fchdir_up():
    os.fchdir(0)
    for _ in range(16):
        os.chdir("..")
    names = os.listdir(".")
    os.chdir("/work")
    if ".agentbox" in names:
        raise OSError(errno.ENOENT, "the sandbox's own root")
    return ",".join(sorted(names)[:8])


for what, fn in (
        ("read-next-to-stdin-dir", lambda: open("/proc/self/fd/0/../" + SECRET).read().strip()),
        ("list-host-root", host_root),
        ("fchdir-walk-up", fchdir_up),
        ("create-in-stdin-dir",
         lambda: os.close(os.open("pwned-by-sandbox", os.O_WRONLY | os.O_CREAT, dir_fd=0)))):
    try:
        out("ESCAPED", what, str(fn()).replace(" ", "_"))
    except OSError as e:
        out("CONTAINED", what, en(e.errno))
print("DONE stdin_dir", flush=True)

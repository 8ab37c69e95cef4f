# T40 (+T4): state that one run leaves for the next. argv: MODE(plant|check) TOKEN
# plant: leaves files in /tmp and /dev/shm, a SysV shared memory segment and message queue
# keyed on TOKEN, symlinks in /work named like the places bwrap mounts, and a daemon holding an
# abstract socket. check (a later run): none of it may be visible.
import ctypes
import errno
import os
import socket
import sys
import zlib

MODE, TOKEN = sys.argv[1], sys.argv[2]
KEY = zlib.crc32(TOKEN.encode()) & 0x7FFFFFFF
IPC_CREAT = 0o1000
libc = ctypes.CDLL(None, use_errno=True)
FILES = ["/tmp/abesc-" + TOKEN, "/dev/shm/abesc-" + TOKEN]


def en(e):
    return errno.errorcode.get(e, str(e))


def out(tag, what, detail=""):
    print("%s %s%s" % (tag, what, " " + detail if detail else ""), flush=True)


if MODE == "plant":
    for p in FILES:
        with open(p, "w") as f:
            f.write("left by an earlier run\n")
    shm = libc.shmget(KEY, 4096, IPC_CREAT | 0o666)
    msq = libc.msgget(KEY, IPC_CREAT | 0o666)
    out("ATTEMPT", "sysv-ipc-planted", "shm %d msq %d" % (shm, msq))
    for name in ("etc", "usr", "tmp", "proc", "dev", ".agentbox", "work", "x"):
        os.symlink("/", "/work/plant-" + name)
    os.symlink("/", "/work/tmp")
    if os.fork() == 0:
        os.setsid()
        s = socket.socket(socket.AF_UNIX)
        s.bind(b"\0abesc-cross-" + TOKEN.encode())
        s.listen(1)
        s.accept()  # forever, until the run is torn down
        os._exit(0)
    out("ATTEMPT", "planted", "files, ipc, symlinks, abstract socket")
else:
    for p in FILES:
        out("ESCAPED" if os.path.exists(p) else "CONTAINED", "file-" + p, "absent")
    r = libc.shmget(KEY, 0, 0)
    out("ESCAPED" if r >= 0 else "CONTAINED", "sysv-shm",
        "found" if r >= 0 else en(ctypes.get_errno()))
    r = libc.msgget(KEY, 0)
    out("ESCAPED" if r >= 0 else "CONTAINED", "sysv-msgqueue",
        "found" if r >= 0 else en(ctypes.get_errno()))
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(b"\0abesc-cross-" + TOKEN.encode())
        out("ESCAPED", "abstract-socket-of-earlier-run", "connected")
    except OSError as e:
        out("CONTAINED", "abstract-socket-of-earlier-run", en(e.errno))
    left = sorted(n for n in os.listdir("/work") if n.startswith("plant-") or n == "tmp")
    out("ESCAPED" if left else "CONTAINED", "workspace-fresh", ",".join(left) or "clean")
print("DONE cross_run", flush=True)

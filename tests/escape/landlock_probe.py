# Landlock, the layer under agentbox-init (writes only to /work, /tmp, /dev/shm; no TCP
# bind/connect with ABI >= 4; abstract unix sockets scoped with ABI >= 6).
# argv: ABSTRACT_NAME WAIT_SECS TOKEN
# Each check is something only Landlock stops here (the mount namespace and the uid allow it):
#  - bind/listen on 127.0.0.1 inside the sandbox's own network namespace (ABI >= 4)
#  - write /proc/self/comm, a file of the script's own on a writable mount (ABI >= 1); /dev
#    is read-only since issue 24, so creating a file there is contained (EROFS) either way
#  - connect to the abstract socket ABSTRACT_NAME, which the harness binds from the host inside
#    this sandbox's network namespace, i.e. outside the Landlock domain (ABI >= 6); the script
#    waits up to WAIT_SECS for it to appear. WAIT_SECS 0 skips this check.
# Run with --without landlock, every check must print ESCAPED: the harness's control.
import errno
import os
import socket
import sys
import time

NAME, WAIT, TOKEN = sys.argv[1], float(sys.argv[2]), sys.argv[3]


def en(e):
    return errno.errorcode.get(e, str(e))


def out(tag, what, detail=""):
    print("%s %s%s" % (tag, what, " " + detail if detail else ""), flush=True)


for fam, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
    s = socket.socket(fam, socket.SOCK_STREAM)
    what = "tcp-bind-" + ("inet" if fam == socket.AF_INET else "inet6")
    try:
        s.bind((host, 0))
        s.listen(1)
        out("ESCAPED", what, "listening on port %d" % s.getsockname()[1])
    except OSError as e:
        out("CONTAINED", what, en(e.errno))
    finally:
        s.close()
try:
    fd = os.open("/dev/abesc-" + TOKEN, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.close(fd)
    out("ESCAPED", "create-in-dev", "created /dev/abesc-" + TOKEN)
except OSError as e:
    out("CONTAINED", "create-in-dev", en(e.errno))
try:
    os.mkdir("/dev/abesc-dir-" + TOKEN)
    out("ESCAPED", "mkdir-in-dev", "created")
except OSError as e:
    out("CONTAINED", "mkdir-in-dev", en(e.errno))
try:
    with open("/proc/self/comm", "w") as f:
        f.write("abesc")
    out("ESCAPED", "write-proc-comm", "wrote /proc/self/comm")
except OSError as e:
    out("CONTAINED", "write-proc-comm", en(e.errno))
# the allowed places stay writable (the control that Landlock is not simply denying all)
for d in ("/work", "/tmp", "/dev/shm"):
    p = "%s/abesc-ok-%s" % (d, TOKEN)
    try:
        with open(p, "w") as f:
            f.write("ok")
        os.unlink(p)
        out("NOTE", "writable-" + d.strip("/").replace("/", "-"), "ok")
    except OSError as e:
        out("ESCAPED", "writable-" + d.strip("/").replace("/", "-"), "broken: " + en(e.errno))

if WAIT > 0:
    end = time.monotonic() + WAIT
    result = None
    while time.monotonic() < end:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(b"\0" + NAME.encode())
            result = ("ESCAPED", "connected to the socket outside the domain")
            break
        except OSError as e:
            if e.errno in (errno.ECONNREFUSED, errno.ENOENT):
                time.sleep(0.05)  # not listening yet
                continue
            result = ("CONTAINED", en(e.errno))
            break
        finally:
            s.close()
    if result:
        out(result[0], "abstract-connect-outside-domain", result[1])
    else:
        out("NOTE", "abstract-listener-never-appeared", "after %gs" % WAIT)
print("DONE landlock_probe", flush=True)

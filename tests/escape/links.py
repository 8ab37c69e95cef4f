# T25/T26: links and special files left for the collector. argv: CANARY
# Hard links to files outside the workspace must fail (EXDEV: separate mounts; EPERM:
# protected_hardlinks). Symlinks, FIFOs and sockets can be made inside; the harness checks that
# the kept copy and --collect hold none of them, that no collector followed them (the host
# CANARY is unchanged, and nothing blocked on the FIFO) and that the report lists them.
import errno
import os
import socket
import sys

CANARY = sys.argv[1]


def en(e):
    return errno.errorcode.get(e, str(e))


def out(tag, what, detail=""):
    print("%s %s%s" % (tag, what, " " + detail if detail else ""), flush=True)


for label, src in (("usr-bin-python3", "/usr/bin/python3"), ("etc-passwd", "/etc/passwd"),
                   ("etc-ld-so-cache", "/etc/ld.so.cache"), ("agentbox-init", "/.agentbox/init"),
                   ("proc-self-exe", "/proc/self/exe"), ("dev-null", "/dev/null"),
                   ("host-canary", CANARY)):
    try:
        os.link(src, "/work/hard-" + label, follow_symlinks=True)
        out("ESCAPED", "hardlink-" + label, "linked")
    except OSError as e:
        out("CONTAINED", "hardlink-" + label, en(e.errno))
# through an O_PATH fd and /proc/self/fd (linkat AT_SYMLINK_FOLLOW)
fd = os.open("/usr/bin/python3", os.O_PATH)
try:
    os.link("/proc/self/fd/%d" % fd, "/work/hard-opath", follow_symlinks=True)
    out("ESCAPED", "hardlink-opath-python3", "linked")
except OSError as e:
    out("CONTAINED", "hardlink-opath-python3", en(e.errno))

# what the collector will meet
for name, target in (("link-shadow", "/etc/shadow"), ("link-root", "/"), ("link-up", "../../.."),
                     ("link-canary", CANARY), ("link-bashrc", "/root/.bashrc"),
                     ("report.json", CANARY)):
    os.symlink(target, "/work/" + name)
os.mkdir("/work/sub")
os.symlink("../../../../../../..", "/work/sub/deep-up")
os.mkfifo("/work/fifo")
s = socket.socket(socket.AF_UNIX)
s.bind("/work/sock")
with open("/work/plain.txt", "w") as f:
    f.write("plain\n")
os.link("/work/plain.txt", "/work/plain-hardlink")
for n in ("mknod-char", "mknod-block"):
    try:
        os.mknod("/work/" + n, (0o20600 if n == "mknod-char" else 0o60600), os.makedev(1, 3))
        out("ESCAPED", n, "device node created")
    except OSError as e:
        out("CONTAINED", n, en(e.errno))
out("ATTEMPT", "symlinks-fifo-socket-hardlink-left", "host decides")
print("DONE links", flush=True)

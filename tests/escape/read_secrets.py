# T2: read host secrets through whatever the sandbox can see.
# argv: SECRET_PREFIX HOSTHOME HOSTWORK OTHER_RUN_WORK RUNSROOT HOSTUSERS(comma-separated)
# The harness planted files whose content starts with SECRET_PREFIX in HOSTWORK (its own test
# directory), in another run's kept workspace (OTHER_RUN_WORK) and in the host's /etc-like
# places it controls. A read of any of them, of /etc/shadow, of the caller's home or of /root,
# or a host user name in the sandbox's /etc/passwd, is an escape. Finally every readable file
# in the sandbox outside /proc, /sys, /dev and /usr is scanned for the prefix.
import errno
import os
import sys

PREFIX, HOSTHOME, HOSTWORK, OTHERWORK, RUNSROOT, HOSTUSERS = sys.argv[1:7]
PREFIX_B = PREFIX.encode()


def en(e):
    return errno.errorcode.get(e, str(e))


def out(tag, what, detail=""):
    print("%s %s%s" % (tag, what, " " + detail if detail else ""), flush=True)


def read_attempt(what, path):
    try:
        if os.path.isdir(path):
            data = "\n".join(os.listdir(path)).encode()
            kind = "listed %d entries" % len(data.split(b"\n"))
        else:
            with open(path, "rb") as f:
                data = f.read(1 << 20)
            kind = "read %d bytes" % len(data)
    except OSError as e:
        out("CONTAINED", what, en(e.errno))
        return
    # a path that exists inside the sandbox but is its own (empty) directory is no leak,
    # but nothing in this list should exist at all
    out("ESCAPED", what, kind + (" with the secret" if PREFIX_B in data else ""))


targets = [
    ("etc-shadow", "/etc/shadow"),
    ("etc-gshadow", "/etc/gshadow"),
    ("etc-sudoers", "/etc/sudoers"),
    ("etc-ssh-host-key", "/etc/ssh/ssh_host_ed25519_key"),
    ("root-home", "/root"),
    ("root-bashrc", "/root/.bashrc"),
    ("root-ssh", "/root/.ssh"),
    ("home-dirs", "/home"),
    ("caller-home", HOSTHOME),
    ("caller-home-ssh", os.path.join(HOSTHOME, ".ssh")),
    ("host-test-dir", HOSTWORK),
    ("host-secret-file", os.path.join(HOSTWORK, "host-secret.txt")),
    ("other-run-workspace", OTHERWORK),
    ("other-run-secret", os.path.join(OTHERWORK, "secret.txt")),
    ("runs-root", RUNSROOT),
    ("default-runs-root", "/var/tmp"),
    ("proc-1-root-secret", "/proc/1/root" + os.path.join(HOSTWORK, "host-secret.txt")),
    ("proc-self-root-secret", "/proc/self/root" + os.path.join(HOSTWORK, "host-secret.txt")),
    ("proc-1-root-shadow", "/proc/1/root/etc/shadow"),
    ("run-dir", "/run"),
    ("var-lib", "/var/lib"),
]
for what, path in targets:
    read_attempt(what, path)

# the generated /etc/passwd and /etc/group name only the sandbox's users
for f in ("passwd", "group"):
    try:
        names = {l.split(":")[0] for l in open("/etc/" + f) if l.strip()}
    except OSError as e:
        out("CONTAINED", "etc-%s-unreadable" % f, en(e.errno))
        continue
    host_only = sorted(set(filter(None, HOSTUSERS.split(","))) & names)
    if host_only:
        out("ESCAPED", "etc-%s-host-names" % f, ",".join(host_only))
    else:
        out("CONTAINED", "etc-%s-host-names" % f, "only " + ",".join(sorted(names)))

# scan everything readable for the secret
found, files = [], 0
for top in ("/etc", "/tmp", "/work", "/dev/shm", "/.agentbox", "/run", "/var", "/home", "/root",
            "/opt", "/srv", "/mnt", "/media"):
    for dirpath, dirnames, filenames in os.walk(top, followlinks=False):
        for fn in filenames:
            p = os.path.join(dirpath, fn)
            try:
                if not os.path.isfile(p) or os.path.islink(p):
                    continue
                with open(p, "rb") as f:
                    files += 1
                    if PREFIX_B in f.read(4 << 20):
                        found.append(p)
            except OSError:
                pass
if found:
    out("ESCAPED", "scan-for-secret", " ".join(found))
else:
    out("CONTAINED", "scan-for-secret", "%d files read, no secret" % files)
print("DONE read_secrets", flush=True)

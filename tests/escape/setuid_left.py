# T27 (+T33): setuid/setgid files left in the workspace for the host to find. argv: none
# (the harness copies ab-probe in). The seccomp filter refuses every way to set S_ISUID or
# S_ISGID (EPERM: CONTAINED). Under --without seccomp the bits do get set (ATTEMPT), and the
# layers below must hold: a setuid copy must not raise privileges (nosuid mount, no_new_privs,
# and the file belongs to the sandbox user anyway); on the host, the kept and collected copies
# must carry no S_ISUID/S_ISGID/S_ISVTX bit and not be owned by root. The harness checks the
# host side.
import errno
import os
import shutil
import subprocess


def en(e):
    return errno.errorcode.get(e, str(e))


def out(tag, what, detail=""):
    print("%s %s%s" % (tag, what, " " + detail if detail else ""), flush=True)


def setid(what, fn):
    """fn() sets an s-bit: EPERM is the filter's answer, success is for the host to judge."""
    try:
        fn()
        return True
    except OSError as e:
        out("CONTAINED" if e.errno == errno.EPERM else "NOTE", what, en(e.errno))
        return False


def create_suid():
    os.close(os.open("/work/created-suid", os.O_CREAT | os.O_WRONLY, 0o4755))


made = []
for name, mode in (("suid-probe", 0o4755), ("sgid-probe", 0o2755), ("suid-sgid-probe", 0o6755)):
    shutil.copy("/work/ab-probe", "/work/" + name)
    if setid("chmod-" + name, lambda: os.chmod("/work/" + name, mode)):
        made.append((name, mode))
os.mkdir("/work/sgid-dir")
setid("chmod-sgid-dir", lambda: os.chmod("/work/sgid-dir", 0o2775))
os.mkdir("/work/sticky-dir")
os.chmod("/work/sticky-dir", 0o1777)
with open("/work/sgid-dir/inner-suid.sh", "w") as f:
    f.write("#!/bin/sh\nid\n")
setid("chmod-inner-suid", lambda: os.chmod("/work/sgid-dir/inner-suid.sh", 0o4777))
if setid("open-creat-suid", create_suid):
    out("ATTEMPT", "setid-file-created-suid",
        "mode %o inside" % (os.stat("/work/created-suid").st_mode & 0o7777))
for name, mode in made:
    got = os.stat("/work/" + name).st_mode & 0o7777
    out("ATTEMPT", "setid-file-" + name, "mode %o inside" % got)

for name, _ in made:
    r = subprocess.run(["/work/" + name, "ids"], capture_output=True, text=True)
    uid = [l.split()[1:] for l in r.stdout.splitlines() if l.startswith("Uid:")]
    gid = [l.split()[1:] for l in r.stdout.splitlines() if l.startswith("Gid:")]
    ids = (uid[0] if uid else []) + (gid[0] if gid else [])
    bad = not ids or len(set(ids)) != 1
    out("ESCAPED" if bad else "CONTAINED", "exec-" + name,
        "uids/gids " + ",".join(ids) if ids else "no output, exit %d" % r.returncode)
print("DONE setuid_left", flush=True)

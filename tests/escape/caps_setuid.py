# T33/T34: retained capabilities, no_new_privs, seccomp mode, and the setuid-root binaries the
# read-only /usr carries (su, mount, passwd, firejail...). argv: none
# A setuid exec that took effect would run with euid 0 and AT_SECURE=1. Two independent
# checks: (1) the dynamic loader honours LD_DEBUG only when AT_SECURE is 0, so statistics on
# stderr prove no privilege change; (2) a setuid binary that blocks reading stdin (su,
# passwd) is caught while it runs and its /proc/PID/status Uid line read.
import errno
import os
import subprocess
import time


def en(e):
    return errno.errorcode.get(e, str(e))


def out(tag, what, detail=""):
    print("%s %s%s" % (tag, what, " " + detail if detail else ""), flush=True)


st = {}
for l in open("/proc/self/status"):
    k, _, v = l.partition(":")
    st[k] = v.strip()
for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
    out("CONTAINED" if int(st[k], 16) == 0 else "ESCAPED", "capabilities-" + k, st[k])
out("CONTAINED" if st.get("NoNewPrivs") == "1" else "ESCAPED", "no-new-privs",
    st.get("NoNewPrivs", "?"))
out("CONTAINED" if st.get("Seccomp") == "2" else "ESCAPED", "seccomp-filter-mode",
    st.get("Seccomp", "?"))
uids = st["Uid"].split()
out("CONTAINED" if "0" not in uids else "ESCAPED", "not-uid-0", ",".join(uids))
gids = st["Gid"].split()
out("CONTAINED" if "0" not in gids else "ESCAPED", "not-gid-0", ",".join(gids))
groups = st.get("Groups", "").split()
out("CONTAINED" if "0" not in groups else "ESCAPED", "no-group-0", ",".join(groups) or "none")

SETUID = ["/usr/bin/su", "/usr/bin/mount", "/usr/bin/umount", "/usr/bin/passwd",
          "/usr/bin/chsh", "/usr/bin/chfn", "/usr/bin/gpasswd", "/usr/bin/newgrp",
          "/usr/bin/firejail", "/usr/bin/sudo", "/usr/bin/pkexec", "/usr/bin/fusermount3",
          "/usr/lib/openssh/ssh-keysign", "/usr/lib/dbus-1.0/dbus-daemon-launch-helper",
          "/usr/lib/polkit-1/polkit-agent-helper-1"]
present = [b for b in SETUID if os.path.exists(b) and os.stat(b).st_mode & 0o4000]
out("NOTE", "setuid-binaries-visible", ",".join(os.path.basename(b) for b in present) or "none")
env = dict(os.environ, LD_DEBUG="statistics")
for b in present:
    try:
        r = subprocess.run([b, "--version"], capture_output=True, text=True, env=env,
                           stdin=subprocess.DEVNULL, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as e:
        out("CONTAINED", "setuid-exec-" + os.path.basename(b), type(e).__name__)
        continue
    secure = "runtime linker statistics" not in r.stderr
    out("ESCAPED" if secure else "CONTAINED", "setuid-exec-" + os.path.basename(b),
        "AT_SECURE=1: privileges changed" if secure else "AT_SECURE=0, exit %d" % r.returncode)

for b, args in (("/usr/bin/su", ["root", "-c", "id"]), ("/usr/bin/passwd", [])):
    if b not in present:
        continue
    p = subprocess.Popen([b] + args, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    time.sleep(0.4)
    try:
        line = [l for l in open("/proc/%d/status" % p.pid) if l.startswith("Uid:")][0].split()[1:]
        what = "setuid-running-uids-" + os.path.basename(b)
        out("ESCAPED" if "0" in line else "CONTAINED", what, ",".join(line))
    except (OSError, IndexError):
        out("NOTE", "setuid-exited-early-" + os.path.basename(b), "no status to read")
    p.kill()
    p.wait()

r = subprocess.run(["/usr/bin/mount", "-t", "tmpfs", "abesc", "/tmp"], capture_output=True,
                   text=True)
out("ESCAPED" if r.returncode == 0 else "CONTAINED", "setuid-mount-tmpfs",
    "exit %d" % r.returncode)
print("DONE caps_setuid", flush=True)

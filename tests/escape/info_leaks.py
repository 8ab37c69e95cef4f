# T35: information about the host. input: /work/markers.txt, "KEY VALUE" lines (a file, so
# that the values appear in no command line): user (the caller's name), home, runs_root,
# test_dir, init_dir (where agentbox-init lives on the host), hostname, machine_id, mac (any
# number of these). None of these may be visible: not in the hostname, not in mountinfo or
# any command line, no /sys, no host machine-id, no host MAC, no interface but lo.
import errno
import os
import re

M = {}
for line in open("/work/markers.txt").read().splitlines():
    k, _, v = line.partition(" ")
    if v:
        M.setdefault(k, []).append(v)


def en(e):
    return errno.errorcode.get(e, str(e))


def out(tag, what, detail=""):
    print("%s %s%s" % (tag, what, " " + detail if detail else ""), flush=True)


def has_path(text, path):
    """path occurs as a whole path (followed by '/', whitespace or the end)."""
    return re.search(re.escape(path) + r"(?=/|\s|$)", text) is not None


host_name = M.get("hostname", ["?"])[0]
name = os.uname().nodename
out("CONTAINED" if name == "sandbox" else "ESCAPED", "uname-nodename", name)
k = open("/proc/sys/kernel/hostname").read().strip()
out("CONTAINED" if k == "sandbox" else "ESCAPED", "proc-hostname", k)
hosts = open("/etc/hosts").read()
out("ESCAPED" if re.search(r"(?<![\w.-])%s(?![\w.-])" % re.escape(host_name), hosts)
    else "CONTAINED", "etc-hosts", "no host name")

mi = open("/proc/self/mountinfo").read()
texts = {"mountinfo": mi}
for p in os.listdir("/proc"):
    if p.isdigit():
        try:
            texts["cmdline-%s" % p] = open("/proc/%s/cmdline" % p).read().replace("\0", " ")
        except OSError:
            pass
try:
    texts["cgroup"] = open("/proc/self/cgroup").read()
except OSError:
    pass
checks = [("runs-root", M.get("runs_root", [])), ("test-dir", M.get("test_dir", [])),
          ("home", [h for h in M.get("home", []) if h not in ("/", "")])]
user = M.get("user", [""])[0]
for where, text in texts.items():
    for label, paths in checks:
        hit = [p for p in paths if has_path(text, p)]
        out("ESCAPED" if hit else "CONTAINED", "%s-no-%s" % (where, label),
            ("shows " + hit[0]) if hit else "clean")
    # the user name as a path component or word ("root" only as a whole word: bwrap's own
    # mount root is called /newroot)
    if user:
        hit = re.search(r"(?<![A-Za-z0-9_])%s(?![A-Za-z0-9_])" % re.escape(user), text)
        if user == "root":
            hit = re.search(r"/root(?=/|\s|$)", text)
        out("ESCAPED" if hit else "CONTAINED", "%s-no-user-name" % where,
            ("shows " + user) if hit else "clean")

# where agentbox-init lives on the host is shown by design unless it is under /home or /root
# (src/supervisor/run.c mount_etc copies it then); the user-name check above is what must hold
init = [p for p in M.get("init_dir", []) if has_path(mi, p)]
out("NOTE", "mountinfo-init-dir", ("shows " + init[0]) if init else "hidden")
if os.path.exists("/sys") and os.listdir("/sys"):
    out("ESCAPED", "sys-hidden", "%d entries" % len(os.listdir("/sys")))
else:
    out("CONTAINED", "sys-hidden", "absent or empty")
for p in ("/etc/machine-id", "/var/lib/dbus/machine-id", "/sys/class/dmi/id/product_uuid"):
    try:
        v = open(p).read().strip()
        out("ESCAPED" if v in M.get("machine_id", []) else "CONTAINED", "machine-id-" + p,
            "present, not the host's" if v not in M.get("machine_id", []) else "host value")
    except OSError as e:
        out("CONTAINED", "machine-id-" + p, en(e.errno))

ifs = [l.split(":")[0].strip() for l in open("/proc/net/dev").read().splitlines()[2:]]
out("CONTAINED" if ifs == ["lo"] else "ESCAPED", "interfaces-lo-only", ",".join(ifs))
seen = []
for f in os.listdir("/proc/net"):
    p = "/proc/net/" + f
    try:
        data = open(p).read(1 << 20).lower()
    except OSError:
        continue
    for mac in M.get("mac", []):
        if mac.lower() in data:
            seen.append("%s:%s" % (f, mac))
out("ESCAPED" if seen else "CONTAINED", "no-host-mac", ",".join(seen) or "none in /proc/net")
print("DONE info_leaks", flush=True)

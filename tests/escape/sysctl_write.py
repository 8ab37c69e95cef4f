# T30: host-global sysctls and other /proc write surfaces. argv: none
# Each file is only OPENED for writing (nothing is ever written): the open itself must fail
# (EROFS from the read-only /proc/sys bind, or EACCES because the sandbox is not host root).
# kernel.core_pattern alone would be a full escape: "|/work/x" runs /work/x as host root.
import errno
import os

PATHS = [
    "/proc/sys/kernel/core_pattern", "/proc/sys/vm/drop_caches", "/proc/sys/kernel/panic",
    "/proc/sys/kernel/randomize_va_space", "/proc/sys/kernel/modprobe",
    "/proc/sys/kernel/unprivileged_bpf_disabled", "/proc/sys/kernel/io_uring_disabled",
    "/proc/sys/dev/tty/legacy_tiocsti", "/proc/sys/vm/unprivileged_userfaultfd",
    "/proc/sys/fs/protected_hardlinks", "/proc/sys/fs/protected_symlinks",
    "/proc/sys/kernel/hostname", "/proc/sys/kernel/yama/ptrace_scope",
    "/proc/sys/user/max_user_namespaces", "/proc/sys/net/ipv4/ip_forward",
    "/proc/sys/kernel/sysrq", "/proc/sysrq-trigger", "/proc/sys/fs/binfmt_misc/register",
    "/proc/sys/kernel/core_uses_pid", "/proc/sys/vm/overcommit_memory",
]


def en(e):
    return errno.errorcode.get(e, str(e))


def out(tag, what, detail=""):
    print("%s %s%s" % (tag, what, " " + detail if detail else ""), flush=True)


for p in PATHS:
    what = "open-w-" + p[len("/proc/"):].replace("/", ".")
    try:
        fd = os.open(p, os.O_WRONLY)
    except OSError as e:
        out("CONTAINED", what, en(e.errno))
        continue
    os.close(fd)  # never written
    out("ESCAPED", what, "opened for writing")
# second layer: /proc/sys itself is a read-only mount (T30 "--ro-bind /proc/sys /proc/sys")
ro = [l.split()[5] for l in open("/proc/self/mountinfo") if l.split()[4] == "/proc/sys"]
out("CONTAINED" if ro and ro[-1].split(",")[0] == "ro" else "ESCAPED", "proc-sys-mount-readonly",
    ",".join(ro) or "not a mount")
# and the read side still works (the harness compares core_pattern with the host's)
try:
    out("NOTE", "core-pattern-value", open("/proc/sys/kernel/core_pattern").read().strip()
        .replace(" ", "_") or "empty")
except OSError as e:
    out("NOTE", "core-pattern-unreadable", en(e.errno))
print("DONE sysctl_write", flush=True)

# T6: environment secrets of the caller, through /proc/1/environ, /proc/*/environ,
# /proc/*/cmdline, PID 1's memory and our own environment.
# input: /work/markers.txt (copied in with --input, so that the markers appear in no command
# line): line 1 VARNAME, line 2 VALUE_PREFIX, then host paths, one a line.
# The harness exported VARNAME=VALUE_PREFIX<random> (and more) to agentbox only. Neither the
# name nor the value may be visible anywhere; no process's command line may show a host path.
import errno
import os

_lines = [l for l in open("/work/markers.txt").read().split("\n") if l]
NAME, PREFIX, MARKS = _lines[0], _lines[1], _lines[2:]
ALLOWED_ENV = {"PATH", "HOME", "TMPDIR", "LANG", "PYTHONDONTWRITEBYTECODE", "PWD", "SHLVL",
               "_", "OLDPWD", "XDG_CACHE_HOME", "MPLCONFIGDIR", "npm_config_cache"}


def en(e):
    return errno.errorcode.get(e, str(e))


def out(tag, what, detail=""):
    print("%s %s%s" % (tag, what, " " + detail if detail else ""), flush=True)


def leaks(data):
    found = [x for x in [NAME, PREFIX] + MARKS if x.encode() in data]
    return ",".join(found)


pids = sorted((p for p in os.listdir("/proc") if p.isdigit()), key=int)
for p in pids + ["self", "thread-self"]:
    for f in ("environ", "cmdline"):
        try:
            with open("/proc/%s/%s" % (p, f), "rb") as fh:
                data = fh.read()
        except OSError as e:
            out("CONTAINED", "read-%s-%s" % (f, p), en(e.errno))
            continue
        lk = leaks(data)
        out("ESCAPED" if lk else "CONTAINED", "read-%s-%s" % (f, p),
            ("shows " + lk) if lk else "clean")

# PID 1 (agentbox-init) is non-dumpable: its memory, fds and maps stay closed
for f in ("mem", "maps", "auxv", "stack", "syscall", "fd", "map_files", "root", "cwd"):
    p = "/proc/1/" + f
    try:
        if os.path.isdir(p) and f in ("fd", "map_files"):
            n = len(os.listdir(p))
            out("ESCAPED", "pid1-" + f, "listed %d entries" % n)
        elif f in ("root", "cwd"):
            os.listdir(p)
            out("ESCAPED", "pid1-" + f, "listed")
        else:
            with open(p, "rb") as fh:
                data = fh.read(4096) if f != "mem" else os.pread(fh.fileno(), 16, 0x400000)
            out("ESCAPED", "pid1-" + f, "read %d bytes" % len(data))
    except OSError as e:
        out("CONTAINED", "pid1-" + f, en(e.errno))

extra = sorted(set(os.environ) - ALLOWED_ENV)
if extra:
    out("ESCAPED", "own-environment", "unexpected variables " + ",".join(extra))
else:
    out("CONTAINED", "own-environment", ",".join(sorted(os.environ)))
lk = leaks("\n".join("%s=%s" % kv for kv in os.environ.items()).encode())
out("ESCAPED" if lk else "CONTAINED", "own-environment-values", lk or "clean")
print("DONE env_secrets", flush=True)

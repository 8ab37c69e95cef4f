# T37: option injection into bwrap through the script's name, its arguments and --env values.
# The harness runs this script under a name like "--bind=inj.py", with arguments such as
# "--bind / /x" and "--", and with --env values holding newlines and bwrap options. None of it
# may reach bwrap: no extra mount, no /x /y /z, no extra variable; the arguments arrive
# verbatim. argv: whatever the harness passes; it compares the ARGV line itself.
import json
import os
import sys


def out(tag, what, detail=""):
    print("%s %s%s" % (tag, what, " " + detail if detail else ""), flush=True)


print("ARGV " + json.dumps(sys.argv), flush=True)
print("ENV_INJ " + json.dumps(os.environ.get("INJ")), flush=True)
print("ENV_INJ2 " + json.dumps(os.environ.get("INJ2")), flush=True)

for p in ("/x", "/y", "/z", "/work/x", "/host", "/oldroot", "/newroot", "/x/etc/shadow"):
    out("ESCAPED" if os.path.lexists(p) else "CONTAINED", "no-path-" + p, "absent")

EXPECTED = {"/", "/usr", "/etc", "/proc", "/proc/sys",
            "/dev", "/dev/shm", "/dev/pts", "/dev/mqueue", "/tmp", "/work", "/.agentbox/init"}
# the curated host /etc entries (src/supervisor/etcgen.c etcgen_host_entries), each bound on its own
EXPECTED |= {"/etc/" + e for e in (
    "alternatives", "ld.so.cache", "matplotlibrc", "fonts", "mime.types", "ssl/certs",
    "ssl/openssl.cnf", "services", "protocols", "mailcap", "magic", "magic.mime", "inputrc",
    "debian_version")}
for l in open("/proc/self/mountinfo"):
    mp = l.split()[4]
    if mp.startswith("/dev/") and mp.count("/") == 2 and mp not in ("/dev/shm", "/dev/pts"):
        continue  # the device nodes bwrap binds: null, zero, full, random, urandom, tty
    if mp.startswith("/proc/") and l.split()[3] == "/null":
        continue  # a /proc file masked with /dev/null (e.g. /proc/keys)
    out("CONTAINED" if mp in EXPECTED else "ESCAPED", "mount-" + mp,
        "expected" if mp in EXPECTED else "unexpected mount: " + l.split()[3])
extra = sorted(k for k in os.environ if k not in {"PATH", "HOME", "TMPDIR", "LANG",
                                                  "PYTHONDONTWRITEBYTECODE", "PWD", "INJ",
                                                  "INJ2", "XDG_CACHE_HOME", "MPLCONFIGDIR",
                                                  "npm_config_cache"})
out("ESCAPED" if extra else "CONTAINED", "no-extra-env", ",".join(extra) or "none")
print("DONE bwrap_inject", flush=True)

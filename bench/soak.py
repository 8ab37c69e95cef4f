#!/usr/bin/env python3
"""Soak agentbox: many back-to-back runs, serial and parallel, mixing normal, failing,
timed-out and limit-hitting scripts, then check that nothing leaked: processes, mounts,
cgroups, run directories, temp files, and that agentbox's own RSS stayed flat.

Usage: bench/soak.py [--runs N] [--parallel-runs M] [--parallel P] [--agentbox PATH]
Defaults: 1,000 back-to-back runs, then 500 runs with 2 in parallel.
Prints one "ok"/"FAIL" line per check and exits non-zero on any failure.
"""
import argparse
import glob
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOKEN = "agentbox-soak-%d" % os.getpid()

SCRIPTS = {
    # name: (source, extra agentbox args, expected statuses)
    "normal.py": ("import sys\nopen('out.txt','w').write('x'*1000)\nprint('ok', sys.argv[1])\n",
                  [], {"exited"}),
    "failing.py": ("import sys\nprint('boom', sys.argv[1], file=sys.stderr)\nsys.exit(3)\n",
                   [], {"exited"}),
    "normal.js": ("require('fs').writeFileSync('o.txt', 'y'); console.log('ok', process.argv[2]);\n",
                  [], {"exited"}),
    "timeout.py": ("import os, time, sys\nif os.fork() == 0:\n    os.setsid()\n"
                   "time.sleep(3600)\n", ["--timeout", "300ms"], {"timeout"}),
    "flood.py": ("import sys\nwhile True:\n    sys.stdout.write('z' * 65536)\n",
                 ["--output-limit", "256K", "--on-output-limit", "kill"], {"output_limit"}),
    "diskfill.py": ("f = open('big', 'wb')\ntry:\n    while True:\n        f.write(b'0' * (1 << 20))\n"
                    "except OSError:\n    pass\n", ["--disk", "8M"], {"disk_limit"}),
    "forks.py": ("import os, sys, time\nkids = []\nfor _ in range(20):\n    try:\n"
                 "        pid = os.fork()\n    except OSError:\n        break\n"
                 "    if pid == 0:\n        time.sleep(0.2)\n        os._exit(0)\n"
                 "    kids.append(pid)\nfor k in kids:\n    os.waitpid(k, 0)\n",
                 ["--pids", "8"], {"exited", "pids_limit"}),
}


def host_procs_with_token():
    n = 0
    for p in glob.glob("/proc/[0-9]*/cmdline"):
        try:
            if TOKEN.encode() in open(p, "rb").read():
                n += 1
        except OSError:
            pass
    return n


def host_mounts():
    try:
        return sum(1 for l in open("/proc/1/mountinfo") if "agentbox" in l)
    except OSError:
        return sum(1 for l in open("/proc/self/mountinfo") if "agentbox" in l)


def run_cgroups():
    return sorted(glob.glob("/sys/fs/cgroup/*/agentbox/run-*") +
                  glob.glob("/sys/fs/cgroup/agentbox/run-*"))


def tmp_entries():
    # what agentbox itself might leave; the test harness's own directories (agentbox-test.*,
    # agentbox-stage.*), of this or of a concurrent suite, are not agentbox's
    return set(e for e in os.listdir("/tmp") if e.startswith("agentbox")
               and not e.startswith(("agentbox-test.", "agentbox-stage.")))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=1000, help="back-to-back runs")
    ap.add_argument("--parallel-runs", type=int, default=500, help="runs done P at a time")
    ap.add_argument("--parallel", type=int, default=2)
    ap.add_argument("--agentbox", default=os.path.join(ROOT, "build", "agentbox"))
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="soak.", dir="/var/tmp")
    os.chmod(tmp, 0o755)
    runs = os.path.join(tmp, "runs")
    for name, (src, _, _) in SCRIPTS.items():
        with open(os.path.join(tmp, name), "w") as f:
            f.write(src)
    before = {"mounts": host_mounts(), "cgroups": run_cgroups(), "tmp": tmp_entries()}
    names = list(SCRIPTS)
    suffixes = []
    random.seed(1)

    def one(i):
        name = names[i % len(names)] if i % 3 else "normal.py"
        src, extra, want = SCRIPTS[name]
        rep = os.path.join(tmp, "r%d.json" % i)
        keep = i % 10 == 0  # some runs keep their directory, the rest use --rm
        argv = [a.agentbox, "run", "--quiet", "--runs-dir", runs, "--report", rep] + extra
        argv += ([] if keep else ["--rm"]) + [os.path.join(tmp, name), "--", TOKEN]
        p = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           timeout=60)
        r = json.load(open(rep))
        os.unlink(rep)
        suffixes.append(r.get("run_id") or "?")
        return (i, name, r["status"], want, r.get("agentbox_max_rss_kib"), keep, p.returncode,
                r.get("agentbox_fds_left"))

    t0 = time.time()
    results = []
    serial = a.runs
    for i in range(serial):
        results.append(one(i))
    with ThreadPoolExecutor(max_workers=max(1, a.parallel)) as ex:
        results += list(ex.map(one, range(serial, serial + a.parallel_runs)))
    dt = time.time() - t0
    time.sleep(0.5)
    fails = 0

    def check(ok, what):
        nonlocal fails
        print(("ok   " if ok else "FAIL ") + what)
        if not ok:
            fails += 1

    bad = [(i, n, s) for i, n, s, w, *_ in results if s not in w]
    check(not bad, "%d runs (%d back to back, %d with %d in parallel) in %.1f s; every status as "
          "expected%s" % (len(results), serial, len(results) - serial, a.parallel, dt,
                          "" if not bad else ": unexpected " + repr(bad[:5])))
    check(host_procs_with_token() == 0, "no process of any run is left on the host")
    check(host_mounts() == before["mounts"], "no mount leaked into the host namespace")
    # only this soak's runs count: other agentbox runs may be going on beside it
    ours = [c for c in run_cgroups() if c.rsplit("-", 1)[-1] in set(suffixes)]
    check(not ours, "no run cgroup of these runs left%s" % (": " + ", ".join(ours[:3]) if ours else ""))
    kept = sum(1 for r in results if r[5])
    left = glob.glob(os.path.join(runs, "run-*"))
    check(len(left) == kept, "run directories: %d kept as asked, %d on disk" % (kept, len(left)))
    check(tmp_entries() == before["tmp"], "no temp files left in /tmp")
    fds = [(r[0], r[7]) for r in results if r[7] != 0]
    check(not fds, "no fd leaked: every report says agentbox_fds_left 0%s"
          % (": " + repr(fds[:5]) if fds else ""))
    rss = [r[4] for r in results if r[4]]
    head = statistics.median(rss[:20])
    tail = statistics.median(rss[-20:])
    check(tail <= head * 1.15 + 64, "agentbox RSS flat: median %d KiB first 20 runs, %d KiB last 20"
          % (head, tail))
    subprocess.run([a.agentbox, "gc", "--runs-dir", runs], stdout=subprocess.DEVNULL)
    check(not glob.glob(os.path.join(runs, "run-*")), "agentbox gc removed the kept runs")
    subprocess.run(["rm", "-rf", "--one-file-system", tmp])
    print("soak: %s" % ("all checks passed" if not fails else "%d check(s) failed" % fails))
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()

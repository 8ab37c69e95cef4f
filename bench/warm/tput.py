#!/usr/bin/env python3
"""bench/warm/tput.py POOL_BENCH [--runs N] [--at-once K] [--pairs P] [--slots S] [--serial]

The library's pool against the same trivial Python runs cold, through pool-bench (built by
bench/warm/tput), in alternating batches: a pool batch and a cold batch make a pair, their
order alternating, so that the machine's drift hits both alike. Per batch: runs per second,
the host's CPU per run (busy time of all CPUs from /proc/uptime's idle, which NO_HZ measures
precisely, rather than /proc/stat's tick-sampled busy time) and how busy the CPUs were.
Then the medians and the pairwise pool/cold rates (geometric mean, median, range).

--serial: one run at a time with nothing beside it: a warm run after its slot is ready
(the slot's build counted in its batch), against a cold run; the CPU per run then says what
a warm run costs against a cold one, apart from any contention.
"""
import argparse
import math
import os
import statistics
import subprocess
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("pool_bench")
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--at-once", type=int, default=2)
    ap.add_argument("--pairs", type=int, default=6)
    ap.add_argument("--slots", type=int, default=0, help="slots of the class (default: --at-once)")
    ap.add_argument("--serial", action="store_true")
    a = ap.parse_args()
    p = subprocess.Popen([a.pool_bench], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def cmd(c):
        p.stdin.write(c + "\n")
        p.stdin.flush()
        line = p.stdout.readline().strip()
        if not line.startswith("ok"):
            sys.exit("pool-bench %s: %s" % (c, line or "no answer"))
        return line

    ncpu = os.cpu_count()

    def busy_s():
        up, idle = map(float, open("/proc/uptime").read().split())
        return up * ncpu - idle, up * ncpu

    slots = 1 if a.serial else (a.slots or a.at_once)
    cmd("add tp python %d -" % slots)
    cmd("ready")
    res = {"pool": [], "cold": []}
    for i in range(a.pairs):
        for w in (["pool", "cold"] if i % 2 == 0 else ["cold", "pool"]):
            cmd("ready")
            time.sleep(0.1)
            b0, t0 = busy_s()
            w0 = time.monotonic()
            warm = 0
            if a.serial:
                for _ in range(a.runs):
                    if w == "pool":
                        warm += int(cmd("tput tp 1 1").split()[1])
                        cmd("ready")
                    else:
                        cmd("tput tp 1 1 cold")
            else:
                warm = int(cmd("tput tp %d %d%s" % (a.runs, a.at_once,
                                                   " cold" if w == "cold" else "")).split()[1])
            wall = time.monotonic() - w0
            b1, t1 = busy_s()
            row = (a.runs / wall, (b1 - b0) * 1000 / a.runs, (b1 - b0) / max(1e-9, t1 - t0), warm)
            res[w].append(row)
            print("%-4s %6.1f runs/s  host CPU %6.1f ms/run  CPUs busy %.2f  warm %d/%d"
                  % ((w,) + row + (a.runs,)), flush=True)
    p.stdin.close()
    p.wait()
    med = {w: [statistics.median(x[k] for x in res[w]) for k in range(3)] for w in res}
    for w in res:
        print("%s: median %.1f runs/s, host CPU %.1f ms/run, CPUs busy %.2f" % ((w,) + tuple(med[w])))
    pr = [x[0] / y[0] for x, y in zip(res["pool"], res["cold"])]
    print("pool/cold: rate %.3f (pairwise geometric mean %.3f, median %.3f, %.3f-%.3f), "
          "host CPU per run %.3f; %d at once, %d runs x %d pairs"
          % (med["pool"][0] / med["cold"][0], math.exp(sum(map(math.log, pr)) / len(pr)),
             statistics.median(pr), min(pr), max(pr), med["pool"][1] / med["cold"][1],
             1 if a.serial else a.at_once, a.runs, a.pairs))


if __name__ == "__main__":
    main()

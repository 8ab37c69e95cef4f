#!/usr/bin/env python3
"""bench/phases.py: where one cold `agentbox run --rm` of a trivial script spends its time,
phase by phase, wall and CPU, beside the seed bwrap line (docs/performance.md, "Per-phase
budget"; issue 29).

Two views, each the median of N runs:

1. The supervisor's own phases, from AGENTBOX_TIMING=1 (any user): each line of
   "agentbox: timing WALL ms (cpu CPU ms) WHAT" is the wall and the supervisor's CPU since
   the previous mark (probe, plan, mounts, cgroup, bwrap start, the sandbox, walk, report).
2. As root with perf: the whole process tree, from the kernel's sched tracepoints (exec,
   fork, exit for the wall; sched_stat_runtime summed per process for the CPU), for agentbox
   and for the seed line (`timeout 60 bwrap ...`, bench.py raw_bwrap), interleaved, so that
   a regression in any process shows (the CLI, bwrap, agentbox-init, the interpreter,
   teardown).

usage: bench/phases.py [--runs N] [--lang python|node] [--agentbox PATH]
Timings on a shared 2-core VM are noisy: compare the two columns of one run, and CPU (which
moves less than wall).
"""
import argparse
import collections
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MARK = re.compile(r"agentbox: timing +([0-9.]+) ms \(cpu +([0-9.]+) ms\) (.*)")


def med(v):
    return statistics.median(v) if v else float("nan")


def supervisor_phases(ab, script, runs_dir, n):
    wall, cpu, order = collections.defaultdict(list), collections.defaultdict(list), []
    env = dict(os.environ, AGENTBOX_TIMING="1")
    for _ in range(n):
        p = subprocess.run([ab, "run", "--quiet", "--rm", "--runs-dir", runs_dir, script],
                           capture_output=True, text=True, env=env)
        pw = pc = None
        for line in p.stderr.splitlines():
            m = MARK.match(line)
            if not m:
                continue
            w, c, what = float(m.group(1)), float(m.group(2)), m.group(3)
            if pw is not None:
                if what not in order:
                    order.append(what)
                wall[what].append(w - pw)
                cpu[what].append(c - pc)
            pw, pc = w, c
    print(f"\n### The supervisor's phases (AGENTBOX_TIMING, median of {n} runs)\n")
    print("| phase (ends at) | wall ms | supervisor CPU ms |")
    print("| --- | ---: | ---: |")
    for k in order:
        print(f"| {k} | {med(wall[k]):.2f} | {med(cpu[k]):.2f} |")


# ---- the process tree, from sched tracepoints ----------------------------------------------

EV = re.compile(r"\s*(.+?)\s+(\d+)\s+([\d.]+):\s+sched:(\S+):\s*(.*)")


def trace(cmds, n, tmp):
    """Runs each command n times interleaved under perf; returns perf script lines."""
    sh = os.path.join(tmp, "loop.sh")
    with open(sh, "w") as f:
        for _ in range(n):
            for c in cmds:
                f.write(shlex.join(c) + " >/dev/null 2>&1; sleep 0.03\n")
    data = os.path.join(tmp, "sched.data")
    subprocess.run(["perf", "record", "-q", "-o", data, "-a", "-e",
                    "sched:sched_process_exec,sched:sched_process_fork,"
                    "sched:sched_process_exit,sched:sched_stat_runtime", "--", "sh", sh],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return subprocess.run(["perf", "script", "-i", data, "-F", "comm,pid,time,event,trace"],
                          capture_output=True, text=True).stdout.splitlines()


def runs_of(lines, first):
    """Splits the trace into runs starting at an exec of `first`; each run: the ordered
    (t_ms, event) list of its tree and the CPU (ms) of each of its processes by program."""
    runs, cur, tree, prog = [], None, set(), {}
    for line in lines:
        m = EV.match(line)
        if not m:
            continue
        comm, pid, t, ev, rest = m.group(1), int(m.group(2)), float(m.group(3)) * 1000, \
            m.group(4), m.group(5)
        if ev == "sched_process_exec":
            name = os.path.basename(rest.split()[0].split("=", 1)[1])
            if name == first and (cur is None or cur["done"]):
                cur = {"t0": t, "root": pid, "ev": [], "cpu": collections.Counter(),
                       "done": False}
                runs.append(cur)
                tree, prog = {pid}, {pid: first}
            if cur is None or cur["done"] or pid not in tree:
                continue
            prog[pid] = name
            cur["ev"].append((t, "exec " + name))
        elif cur is None or cur["done"]:
            continue
        elif ev == "sched_process_fork":
            child = int(re.search(r"child_pid=(\d+)", rest).group(1))
            if pid in tree:
                tree.add(child)
                prog[child] = prog.get(pid, comm)
                cur["ev"].append((t, "fork by " + prog[child]))
        elif ev == "sched_process_exit" and pid in tree:
            cur["ev"].append((t, "exit " + prog.get(pid, comm)))
            if pid == cur["root"]:
                cur["done"] = True
        elif ev == "sched_stat_runtime":
            p = int(re.search(r"pid=(\d+)", rest).group(1))
            if p in tree:
                ns = int(re.search(r"runtime=(\d+)", rest).group(1))
                # agentbox run is its run's supervisor (one process): another pid named
                # agentbox is a child of it before its exec (bwrap's vfork) or a helper
                who = prog.get(p, comm)
                if who == "agentbox" and p != cur["root"]:
                    who = "agentbox's children, before their exec"
                cur["cpu"][who] += ns / 1e6
    return [r for r in runs if r["done"]]


def tree_table(title, runs):
    seg, order, total = collections.defaultdict(list), [], []
    cpu = collections.defaultdict(list)
    for r in runs:
        prev, seen = r["t0"], collections.Counter()
        for t, name in r["ev"]:
            seen[name] += 1
            key = name if seen[name] == 1 else f"{name} #{seen[name]}"
            if key not in order:
                order.append(key)
            seg[key].append(t - prev)
            prev = t
        total.append(prev - r["t0"])
        for k in set().union(*(x["cpu"].keys() for x in runs)):
            cpu[k].append(r["cpu"].get(k, 0.0))
    print(f"\n### {title} (median of {len(runs)} runs)\n")
    print("| until | wall ms since the previous event |")
    print("| --- | ---: |")
    for k in order:
        print(f"| {k} | {med(seg[k]):.2f} |")
    print(f"| **total** | **{med(total):.2f}** |")
    print("\n| process | CPU ms |")
    print("| --- | ---: |")
    for k in sorted(cpu, key=lambda k: -med(cpu[k])):
        print(f"| {k} | {med(cpu[k]):.2f} |")
    print(f"| **all** | **{med([sum(r['cpu'].values()) for r in runs]):.2f}** |")
    return med(total)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--lang", choices=["python", "node"], default="python")
    ap.add_argument("--agentbox", default=os.path.join(ROOT, "build", "agentbox"))
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="agentbox-phases.")
    os.chmod(tmp, 0o755)
    try:
        work = os.path.join(tmp, "w")
        os.makedirs(work)
        os.chmod(work, 0o777)
        script = os.path.join(work, "s." + ("py" if a.lang == "python" else "js"))
        with open(script, "w") as f:
            f.write("pass\n" if a.lang == "python" else "0;\n")
        runs_dir = os.path.join(tmp, "runs")
        print(f"# agentbox phases: trivial {a.lang} script, uid {os.getuid()}, "
              f"load {os.getloadavg()[0]:.2f}")
        supervisor_phases(a.agentbox, script, runs_dir, a.runs)
        if os.geteuid() != 0 or not shutil.which("perf"):
            print("\n(the process tree needs root and perf: not shown)")
            return
        ab = [a.agentbox, "run", "--quiet", "--rm", "--runs-dir", runs_dir, script]
        seed = ["timeout", "60"] + bench.raw_bwrap(a.lang, work)
        lines = trace([ab, seed], a.runs, tmp)
        t_ab = tree_table("agentbox run --rm, the process tree", runs_of(lines, "agentbox"))
        t_seed = tree_table("The seed line (timeout 60 bwrap ...), the process tree",
                            runs_of(lines, "timeout"))
        print(f"\nagentbox / seed (medians, traced): {t_ab / t_seed:.3f}x")
    finally:
        subprocess.run(["rm", "-rf", "--one-file-system", tmp])


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""agentbox benchmarks: side by side, interleaved, in one run (see docs/performance.md).

Usage: bench/run [--rounds N] [--quick] [--agentbox PATH]

Latency: each round runs every configuration once, in a shuffled order, for a trivial and a
moderately heavy script in Python and in Node; we report median and min-max wall ms and the
ratio of medians against the bare interpreter. Then: throughput of 200 back-to-back trivial
runs with 1 and 2 workers (agentbox vs the raw bwrap line, alternating batches of 20 runs so
that drift hits both alike), agentbox's own peak RSS, and
the time from the deadline to every process dead.
"""
import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SCRIPTS = {
    ("python", "trivial"): "pass\n",
    ("python", "moderate"): (
        "import json, hashlib, re\n"
        "d = [{'i': i, 's': str(i) * 20} for i in range(20000)]\n"
        "t = json.dumps(d)\n"
        "h = hashlib.sha256(t.encode()).hexdigest()\n"
        "n = len(re.findall(r'7+', t))\n"
        "open('out.txt', 'w').write(h + str(n))\n"
    ),
    ("node", "trivial"): "\n",
    ("node", "moderate"): (
        "const crypto = require('crypto'); const fs = require('fs');\n"
        "const d = []; for (let i = 0; i < 20000; i++) d.push({i, s: String(i).repeat(20)});\n"
        "const t = JSON.stringify(d);\n"
        "const h = crypto.createHash('sha256').update(t).digest('hex');\n"
        "const n = (t.match(/7+/g) || []).length;\n"
        "fs.writeFileSync('out.txt', h + n);\n"
    ),
}


def interp(lang):
    if lang == "python":
        return "/usr/bin/python3"
    return shutil.which("node") or "/usr/bin/node"


def raw_bwrap(lang, work):
    # The seed recipe from the threat catalog: the raw bwrap command line.
    return ["bwrap", "--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin",
            "--symlink", "usr/sbin", "/sbin", "--symlink", "usr/lib", "/lib",
            "--symlink", "usr/lib64", "/lib64", "--ro-bind", "/etc/alternatives",
            "/etc/alternatives", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
            "--bind", work, "/work", "--chdir", "/work", "--unshare-all", "--new-session",
            "--die-with-parent", "--clearenv", "--setenv", "PATH", "/usr/bin", "--setenv",
            "HOME", "/work", "--setenv", "PYTHONDONTWRITEBYTECODE", "1", "--cap-drop", "ALL",
            "--unshare-user", "--disable-userns", interp(lang),
            "/work/s." + ("py" if lang == "python" else "js")]


def configs(agentbox, lang, script, work, runs):
    ab = [agentbox, "run", "--quiet", "--rm", "--runs-dir", runs]
    c = {
        "bare": [interp(lang), script],
        "raw bwrap": raw_bwrap(lang, work),
        "timeout 60 + raw bwrap": ["timeout", "60"] + raw_bwrap(lang, work),
        "agentbox (defaults)": ab + [script],
        "agentbox (every layer)": ab + ["--seccomp-policy", "strict", "--cpu-time", "60s",
                                        "--report", os.path.join(runs, "..", "r.json"),
                                        script],
    }
    if os.geteuid() == 0:
        # as root the run's cgroup is joined with a migration (cgroup v1 here): show its cost
        c["agentbox (--without cgroup)"] = ab + ["--without", "cgroup", script]
    if shutil.which("firejail"):
        c["firejail"] = ["firejail", "--quiet", "--noprofile", "--net=none",
                         "--private=" + work, interp(lang), os.path.join(work, os.path.basename(script))]
    return c


def run_once(argv, cwd):
    t = time.perf_counter()
    r = subprocess.run(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"})
    return (time.perf_counter() - t) * 1000.0, r.returncode


def latency(agentbox, rounds, tmp):
    out = []
    for (lang, kind), src in SCRIPTS.items():
        work = os.path.join(tmp, f"w-{lang}-{kind}")
        runs = os.path.join(tmp, f"runs-{lang}-{kind}")
        os.makedirs(work, exist_ok=True)
        os.chmod(work, 0o777)  # writable by the sandbox uid of every configuration
        script = os.path.join(work, "s." + ("py" if lang == "python" else "js"))
        with open(script, "w") as f:
            f.write(src)
        cfg = configs(agentbox, lang, script, work, runs)
        times = {k: [] for k in cfg}
        failures = {k: 0 for k in cfg}
        for name, argv in cfg.items():  # warm-up, and check each works
            _, rc = run_once(argv, work)
            if rc != 0:
                failures[name] += 1
        for _ in range(rounds):
            order = list(cfg.items())
            random.shuffle(order)
            for name, argv in order:
                ms, rc = run_once(argv, work)
                times[name].append(ms)
                if rc != 0:
                    failures[name] += 1
        base = statistics.median(times["bare"])
        for name in cfg:
            med = statistics.median(times[name])
            out.append({"lang": lang, "script": kind, "config": name, "median_ms": round(med, 2),
                        "min_ms": round(min(times[name]), 2), "max_ms": round(max(times[name]), 2),
                        "ratio": round(med / base, 3), "failures": failures[name]})
    return out


def host_busy_s():
    """Seconds of CPU the whole machine spent busy so far (/proc/stat: all but idle and
    iowait), kernel threads included: what a run costs the host, not only its own processes."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (sum(v) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")


def throughput(agentbox, n, tmp):
    work = os.path.join(tmp, "w-tput")
    runs = os.path.join(tmp, "runs-tput")
    os.makedirs(work, exist_ok=True)
    os.chmod(work, 0o777)
    script = os.path.join(work, "s.py")
    with open(script, "w") as f:
        f.write("pass\n")
    # the seed line as issue 29 states its target: the seed's bwrap command under `timeout 60`
    # (the seed's wall-clock limit); the bare bwrap line for reference
    cmds = {"raw bwrap": raw_bwrap("python", work),
            "timeout 60 + raw bwrap": ["timeout", "60"] + raw_bwrap("python", work),
            "agentbox (defaults)": [agentbox, "run", "--quiet", "--rm", "--runs-dir", runs, script]}
    res = []
    # Interleaved like the latency rounds: batches of 20 runs per configuration, alternating,
    # so a drift of the machine over the minutes this takes hits both sides alike.
    batch = min(20, n)
    for workers in (1, 2):
        spent = {name: 0.0 for name in cmds}
        busy = {name: 0.0 for name in cmds}
        done = {name: 0 for name in cmds}
        fails = {name: 0 for name in cmds}
        while any(done[name] < n for name in cmds):
            order = list(cmds.items())
            random.shuffle(order)
            for name, argv in order:
                k = min(batch, n - done[name])
                if k <= 0:
                    continue
                t = time.perf_counter()
                b = host_busy_s()
                with ThreadPoolExecutor(max_workers=workers) as ex:
                    rcs = list(ex.map(lambda _: run_once(argv, work)[1], range(k)))
                spent[name] += time.perf_counter() - t
                busy[name] += host_busy_s() - b
                done[name] += k
                fails[name] += sum(1 for r in rcs if r)
        for name in cmds:
            # host CPU per run: with 2 workers on 2 cores the machine is CPU-bound and this,
            # not the wall time, decides the rate (docs/performance.md, "Third round")
            res.append({"config": name, "workers": workers, "runs": n,
                        "runs_per_s": round(n / spent[name], 1), "failures": fails[name],
                        "host_cpu_ms_per_run": round(busy[name] * 1000 / n, 1)})
    for workers in (1, 2):
        rate = {r["config"]: r["runs_per_s"] for r in res if r["workers"] == workers}
        ab = next(r for r in res if r["workers"] == workers and r["config"].startswith("agentbox"))
        ab["vs_raw_bwrap"] = round(rate["agentbox (defaults)"] / rate["raw bwrap"], 3)
        ab["vs_seed_line"] = round(rate["agentbox (defaults)"] / rate["timeout 60 + raw bwrap"], 3)
        cpu = {r["config"]: r["host_cpu_ms_per_run"] for r in res if r["workers"] == workers}
        ab["cpu_vs_seed_line"] = round(cpu["agentbox (defaults)"] /
                                       max(cpu["timeout 60 + raw bwrap"], 0.1), 3)
    return res


def supervisor_and_kill(agentbox, tmp):
    runs = os.path.join(tmp, "runs-misc")
    rep = os.path.join(tmp, "misc.json")
    out = {}
    script = os.path.join(tmp, "triv.py")
    with open(script, "w") as f:
        f.write("pass\n")
    rss = []
    for _ in range(10):
        subprocess.run([agentbox, "run", "--quiet", "--rm", "--runs-dir", runs, "--report", rep,
                        script], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        r = json.load(open(rep))
        if r.get("status") != "exited":
            sys.exit(f"bench: agentbox failed: {r.get('status')} {r.get('message')}")
        rss.append(r["agentbox_max_rss_kib"])
    out["agentbox_max_rss_kib_median"] = statistics.median(rss)
    sleeper = os.path.join(tmp, "sleep.py")
    with open(sleeper, "w") as f:
        f.write("import os, time\nfor _ in range(3):\n    if os.fork() == 0:\n        break\n"
                "while True:\n    time.sleep(1)\n")
    kills = []
    for _ in range(10):
        subprocess.run([agentbox, "run", "--quiet", "--rm", "--runs-dir", runs, "--report", rep,
                        "--timeout", "300ms", sleeper], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        r = json.load(open(rep))
        if r.get("kill_to_reaped_ms") is None:
            sys.exit(f"bench: the timeout run did not report a kill: {r.get('status')} {r.get('message')}")
        kills.append(r["kill_to_reaped_ms"])
    out["deadline_to_all_dead_ms_median"] = statistics.median(kills)
    out["deadline_to_all_dead_ms_max"] = max(kills)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--throughput-runs", type=int, default=200)
    ap.add_argument("--quick", action="store_true", help="5 rounds, 40 throughput runs")
    ap.add_argument("--agentbox", default=os.path.join(ROOT, "build", "agentbox"))
    ap.add_argument("--json", help="also write the results here")
    a = ap.parse_args()
    if a.quick:
        a.rounds, a.throughput_runs = 5, 40
    tmp = tempfile.mkdtemp(prefix="agentbox-bench.")
    os.chmod(tmp, 0o755)
    try:
        print(f"# agentbox bench: {a.rounds} interleaved rounds; host: {os.uname().release}, "
              f"{os.cpu_count()} cpus, uid {os.getuid()}; load {os.getloadavg()[0]:.2f}")
        lat = latency(a.agentbox, a.rounds, tmp)
        print("\n| lang | script | configuration | median ms | min-max ms | ratio vs bare |")
        print("| --- | --- | --- | ---: | ---: | ---: |")
        for r in lat:
            fail = f" ({r['failures']} failed)" if r["failures"] else ""
            print(f"| {r['lang']} | {r['script']} | {r['config']}{fail} | {r['median_ms']} | "
                  f"{r['min_ms']}-{r['max_ms']} | {r['ratio']:.2f}x |")
        tput = throughput(a.agentbox, a.throughput_runs, tmp)
        print("\n| throughput (trivial python) | workers | runs/s | vs the seed line | vs raw bwrap "
              "| host CPU ms/run | CPU vs the seed line |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
        for r in tput:
            print(f"| {r['config']} | {r['workers']} | {r['runs_per_s']} | "
                  f"{r.get('vs_seed_line', '')} | {r.get('vs_raw_bwrap', '')} | "
                  f"{r['host_cpu_ms_per_run']} | {r.get('cpu_vs_seed_line', '')} |")
        misc = supervisor_and_kill(a.agentbox, tmp)
        print(f"\nagentbox supervisor peak RSS: {misc['agentbox_max_rss_kib_median']} KiB (median of 10)")
        print(f"deadline to every process dead: median {misc['deadline_to_all_dead_ms_median']} ms, "
              f"max {misc['deadline_to_all_dead_ms_max']} ms (4-process sleeper, 10 runs)")
        if a.json:
            json.dump({"latency": lat, "throughput": tput, "misc": misc}, open(a.json, "w"), indent=2)
    finally:
        subprocess.run(["rm", "-rf", "--one-file-system", tmp])


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""test-session.py (through test-session.sh): sessions end to end (issue 27), real sandboxes
through `agentbox session --jsonl`, checked on the host side. TAP. Env: AGENTBOX, WORK (a
private directory), AB_AS_USER (1 when the user lane runs it as root's throwaway user)."""
import base64
import json
import os
import select
import subprocess
import sys
import time
import uuid

AGENTBOX = os.environ["AGENTBOX"]
WORK = os.environ["WORK"]
RUNS = os.path.join(WORK, "runs-session")
n = 0
failed = 0


def ok(cond, desc, extra=None):
    global n, failed
    n += 1
    print("%s %d - %s" % ("ok" if cond else "not ok", n, desc), flush=True)
    if not cond:
        failed += 1
        if extra is not None:
            for line in repr(extra)[:3000].splitlines():
                print("#   " + line)
    return cond


class Session:
    """One `agentbox session --jsonl`, bounded by its own deadline (a safety net)."""

    def __init__(self, spec, bound=120):
        spec = dict(spec)
        spec.setdefault("runs_dir", RUNS)
        self.p = subprocess.Popen([AGENTBOX, "session", "--jsonl"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.buf = b""
        self.bound = time.monotonic() + bound
        self.send({"spec": spec})
        self.ready = self.recv()

    def send(self, obj):
        self.p.stdin.write(json.dumps(obj).encode() + b"\n")
        self.p.stdin.flush()

    def recv(self, timeout=60):
        end = min(time.monotonic() + timeout, self.bound)
        while b"\n" not in self.buf:
            left = end - time.monotonic()
            if left <= 0 or not select.select([self.p.stdout], [], [], left)[0]:
                return {"timeout": True}
            chunk = os.read(self.p.stdout.fileno(), 1 << 20)
            if not chunk:
                return {"eof": True}
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def cell(self, code, timeout_ms=None):
        req = {"code": code}
        if timeout_ms:
            req["timeout_ms"] = timeout_ms
        self.send({"cell": req})
        m = self.recv()
        if "cell" in m:
            CELLS.append(m["cell"])
        return m.get("cell", m)

    def close(self):
        try:
            self.send({"close": {}})
        except BrokenPipeError:
            pass
        m = self.recv()
        while m and "closed" not in m and "eof" not in m and "timeout" not in m:
            m = self.recv()
        try:
            self.p.wait(30)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
        return m.get("closed")


def procs_with(token):
    """host pids whose command line holds token"""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                if token.encode() in f.read():
                    found.append(int(pid))
        except OSError:
            pass
    return found


CELLS = []


def text(c, key="result"):
    v = c.get(key)
    return v.get("text") if isinstance(v, dict) else None


# -- Python: state across cells, values, errors ---------------------------------------------
s = Session({"language": "python", "limits": {"timeout": "30s"}})
ok("ready" in s.ready and s.ready["ready"].get("language") == "python",
   "a Python session starts and says it is ready", s.ready)
c1 = s.cell("x = 1")
c2 = s.cell("x += 1; x")
ok(c1.get("status") == "ok" and text(c2) == "2", "x = 1 then x += 1; x -> 2", c2)
c = s.cell("print('out'); import sys; print('err', file=sys.stderr); 'last'")
ok(c.get("stdout", {}).get("text") == "out\n" and c.get("stderr", {}).get("text") == "err\n"
   and text(c) == "'last'", "each cell gets its own stdout and stderr and its last value", c)
c = s.cell("1/0")
err = c.get("error") or {}
ok(c.get("status") == "error" and err.get("type") == "ZeroDivisionError"
   and any("1/0" in l for l in err.get("traceback", []))
   and not any("agentbox-session" in l for l in err.get("traceback", [])),
   "1/0 -> a structured ZeroDivisionError with the cell's own frames", c)
c = s.cell("import os; sorted(os.listdir('/work')), os.path.exists('/.agentbox/script')")
ok(text(c) == "([], True)", "the driver is not in the workspace (/work is empty)", c)

# pandas kept between cells (imported once)
c = s.cell("import pandas as pd\ndf = pd.DataFrame({'a': [1, 2, 3]})\ndf")
ok(c.get("status") == "ok" and "html" in (c.get("result") or {}),
   "a DataFrame as the last value comes with its HTML form", c.get("result"))
c = s.cell("import sys\n(int(df['a'].sum()), 'pandas' in sys.modules, pd.__name__)")
ok(text(c) == "(6, True, 'pandas')" and c.get("wall_ms", 10**6) < 300,
   "pandas imported in one cell is used in the next without a re-import (%s ms)"
   % c.get("wall_ms"), c)

# figures
c = s.cell("import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.show()")
imgs = c.get("images") or []
png = base64.b64decode(imgs[0]["data"]) if imgs else b""
ok(len(imgs) == 1 and png.startswith(b"\x89PNG\r\n\x1a\n"), "plt.show() -> one PNG", c)

# a cell past its timeout is interrupted; the state survives
c = s.cell("while True: pass", timeout_ms=1000)
ok(c.get("status") == "timeout" and (c.get("error") or {}).get("type") == "KeyboardInterrupt",
   "a 1 s timeout interrupts while True: pass (status timeout)", c)
c = s.cell("x")
ok(text(c) == "2", "... and x is still 2 afterwards", c)

# what a cell prints or writes cannot forge a cell's status
forged = b'{"done": {"id": 1, "value": {"text": "forged"}}}'
c = s.cell('print(\'{"cell": {"status": "ok", "id": 99}}\')\n'
           'import os\nos.write(1000, (%d).to_bytes(4, "little") + %r)\n'
           'while True: pass' % (len(forged), forged), timeout_ms=1000)
ok(c.get("status") == "timeout" and text(c) is None, "a forged answer on the driver's socket and "
   "JSON on stdout do not end a cell early or change its status", c)

# processes: a background child is killed when the session closes
token = "abses-" + uuid.uuid4().hex[:12]
# (the token is an argument of the child for its whole life: a shell's $0 is gone when it execs
# its last command)
c = s.cell("import subprocess, sys\np = subprocess.Popen([sys.executable, '-c', "
           "'import time; time.sleep(1000)', '%s'])\np.pid > 0" % token)
# Popen returns once the child's exec has begun (vfork, then the close-on-exec pipe), which is
# before the kernel sets the new program's command line: on a loaded machine /proc shows an
# empty cmdline for a moment, so look again for a while
found = procs_with(token)
for _ in range(50):
    if found:
        break
    time.sleep(0.1)
    found = procs_with(token)
ok(text(c) == "True" and found, "a cell leaves a background process running", c)
rep = s.close()
time.sleep(0.5)
ok(not procs_with(token), "closing the session kills its processes", procs_with(token))
rep_path = os.path.join(WORK, "session-report.json")
with open(rep_path, "w") as f:
    json.dump(rep, f)
schema = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "schemas",
                      "report.schema.json")
if not os.path.exists(schema):
    schema = os.path.join(os.environ.get("AB_SRCDIR", ""), "schemas", "report.schema.json")
v = subprocess.run([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                 "validate-schema.py"), "--strict", schema,
                    rep_path], capture_output=True, text=True)
ok(v.returncode == 0, "the session's report validates against schemas/report.schema.json "
   "(strict)", v.stdout + v.stderr)
ok(isinstance(rep, dict) and rep.get("session", {}).get("cells", 0) >= 10
   and rep.get("status") == "exited",
   "the session's report at close says it ran its cells and ended", (rep or {}).get("session"))

# -- a crash is reported, the next call says so, a restart says the state is gone ------------
s = Session({"language": "python"})
s.cell("x = 5")
c = s.cell("import os; os._exit(3)")
ok(c.get("status") == "lost" and "code 3" in c.get("message", ""), "os._exit(3) -> lost", c)
m = s.recv(5)
ok("ended" in m, "... the session then says it ended", m)
s.send({"cell": {"code": "x"}})
m = s.recv()
ok("error" in m and "ended" in m["error"].get("message", ""),
   "... and the next call is an error that says so (no silent fresh interpreter)", m)
s.send({"restart": {}})
m = s.recv()
c = s.cell("'x' in dir()")
ok("ready" in m and text(c) == "False" and "gone" in (c.get("session") or {}).get("restarted", ""),
   "a restart asked for starts afresh and says the state is gone", [m, c])
s.close()

# a cell that breaks the protocol ends its session; it cannot keep it half-alive
s = Session({"language": "python"})
c = s.cell("import os; os.write(1000, b'\\xff\\xff\\xff\\xff'); import time; time.sleep(30)")
ok(c.get("status") == "lost" and "protocol" in c.get("message", ""),
   "garbage on the driver's socket ends the session (lost, said why)", c)
s.close()

# -- isolation: two sessions share nothing ---------------------------------------------------
a = Session({"language": "python"})
b = Session({"language": "python"})
a.cell("secret = 42\nopen('/tmp/a-secret', 'w').write('x')\nopen('/work/a-file', 'w').write('y')")
c = b.cell("import os\n('secret' in dir(), os.path.exists('/tmp/a-secret'), "
           "os.path.exists('/work/a-file'))")
ok(text(c) == "(False, False, False)",
   "a second session sees neither the first's variables nor its /tmp nor its files", c)
ca = a.cell("open('/proc/self/cgroup').read() + str(os.getpid()) if 'os' in dir() else "
            "__import__('os').listdir('/proc')")
cb = b.cell("__import__('os').listdir('/proc')")
pids_b = [p for p in json.loads(json.dumps(eval(text(cb) or "[]"))) if p.isdigit()]
ok(len(pids_b) <= 4, "a session sees only its own processes", pids_b)
a.close()
b.close()

# -- Node --------------------------------------------------------------------------------------
s = Session({"language": "node"})
s.cell("let y = 5")
c = s.cell("y * 2")
ok(text(c) == "10", "a Node session keeps let y = 5 and returns y * 2 -> 10", c)
c = s.cell("await new Promise(r => setTimeout(() => r('later'), 50))")
ok(text(c) == "'later'", "top-level await in a Node cell", c)
c = s.cell("throw new TypeError('bad')")
ok(c.get("status") == "error" and (c.get("error") or {}).get("type") == "TypeError",
   "a Node exception is structured", c)
c = s.cell("for (;;) {}", timeout_ms=1000)
ok(c.get("status") == "timeout", "a Node busy loop is interrupted at its timeout", c)
c = s.cell("y")
ok(text(c) == "5", "... and the context survives", c)
s.close()

# -- limits bind the whole session -----------------------------------------------------------
s = Session({"language": "python", "limits": {"memory": "256M"}})
c1 = s.cell("a = bytearray(150 << 20)\nlen(a)")
c2 = s.cell("b = bytearray(150 << 20)\nlen(b)")
ok(c1.get("status") == "ok" and (c2.get("status") == "lost" or
                                 (c2.get("error") or {}).get("type") == "MemoryError"),
   "the memory limit binds across cells (150M + 150M under 256M)", [c1.get("status"), c2])
s.close()

# -- idle reaping ------------------------------------------------------------------------------
s = Session({"language": "python", "session": {"idle_timeout": "2s"}})
s.cell("z = 1")
m = s.recv(15)
ok("ended" in m and "idle" in m["ended"].get("ended", ""), "an idle session is ended", m)
s.close()

# -- inside a virtualenv ----------------------------------------------------------------------
venv = os.path.join(WORK, "venv")
subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip", venv], check=True)
os.chmod(WORK, 0o711)
s = Session({"language": "python", "venv": venv})
c = s.cell("import sys\nsys.prefix")
ok(text(c) == repr(venv), "a session runs inside a --venv environment", [c, venv])
s.close()

# -- the command line: cells from a file, Ctrl-C interrupts the cell, not the session --------
cells = os.path.join(WORK, "cells.txt")
with open(cells, "w") as f:
    f.write("x = 1\n%%\nx += 1; x\n%%\nimport time\nfor i in range(600): time.sleep(0.1)\n"
            "%%\nprint('after', x)\n")
p = subprocess.Popen([AGENTBOX, "session", "--runs-dir", RUNS, "--cells", cells],
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
time.sleep(3)
p.send_signal(2)
try:
    out, err = p.communicate(timeout=60)
except subprocess.TimeoutExpired:
    p.kill()
    out, err = p.communicate()
ok(p.returncode == 0 and out.decode() == "2\nafter 2\n" and b"KeyboardInterrupt" in err,
   "agentbox session --cells: values printed, Ctrl-C interrupts the running cell and the "
   "session goes on", [p.returncode, out, err[-600:]])

# -- four at once -------------------------------------------------------------------------------
many = [Session({"language": "python"}) for _ in range(4)]
for i, x in enumerate(many):
    x.send({"cell": {"code": "import time; time.sleep(0.5); v = %d; v * v" % i}})
res = [x.recv().get("cell", {}) for x in many]
ok([text(r) for r in res] == [str(i * i) for i in range(4)], "4 concurrent sessions", res)
for x in many:
    x.close()

# every cell result seen follows schemas/cell.schema.json
cells_path = os.path.join(WORK, "cells")
os.makedirs(cells_path, exist_ok=True)
files = []
for i, c in enumerate(CELLS):
    files.append(os.path.join(cells_path, "%d.json" % i))
    with open(files[-1], "w") as f:
        json.dump(c, f)
here = os.path.dirname(os.path.abspath(__file__))
v = subprocess.run([sys.executable, os.path.join(here, "validate-schema.py"),
                    os.path.join(here, "..", "..", "schemas", "cell.schema.json")] + files,
                   capture_output=True, text=True)
ok(v.returncode == 0 and len(files) >= 20,
   "all %d cell results follow schemas/cell.schema.json" % len(files), v.stdout + v.stderr)

print("1..%d" % n)
sys.exit(1 if failed else 0)

#!/usr/bin/env python3
"""test-drivers.py: the session drivers (src/session/session.py, session.js) outside any
sandbox: each is started as a session's sandbox starts it, with fd 1000 a socket, and is sent
cells. TAP. The same behaviours are checked end to end through sessions by the integration
tests; this one pins the drivers' own semantics (what persists, values, errors, figures,
interrupts) fast. Env: AB_SRCDIR."""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

n = 0
failed = 0


def ok(cond, desc, extra=None):
    global n, failed
    n += 1
    print("%s %d - %s" % ("ok" if cond else "not ok", n, desc))
    if not cond:
        failed += 1
        if extra is not None:
            print("#   " + repr(extra)[:2000])


class Driver:
    def __init__(self, argv, cwd):
        self.a, b = socket.socketpair()
        fd = b.fileno()
        self.p = subprocess.Popen(argv, close_fds=False, cwd=cwd,
                                  preexec_fn=lambda: os.dup2(fd, 1000) and None,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        b.close()
        self.a.settimeout(60)

    def recv(self):
        head = self.a.recv(4, socket.MSG_WAITALL)
        if len(head) < 4:
            return None
        want = int.from_bytes(head, "little")
        data = b""
        while len(data) < want:
            chunk = self.a.recv(want - len(data))
            if not chunk:
                return None
            data += chunk
        return json.loads(data)

    def cell(self, cid, code, interrupt_after=None):
        body = json.dumps({"cell": {"id": cid, "code": code}}).encode()
        self.a.sendall(len(body).to_bytes(4, "little") + body)
        if interrupt_after is not None:
            time.sleep(interrupt_after)
            self.p.send_signal(signal.SIGINT)
        msg = self.recv()
        return (msg or {}).get("done") or {}

    def close(self):
        self.a.close()
        try:
            out, err = self.p.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            self.p.kill()
            out, err = self.p.communicate()
        return self.p.returncode, out, err


def text(r):
    return (r.get("value") or {}).get("text")


def etype(r):
    return (r.get("error") or {}).get("type")


def python_cases(src, work):
    d = Driver(["/usr/bin/python3", os.path.join(src, "src/session/session.py")], work)
    ready = d.recv()
    ok(ready and "ready" in ready, "python: the driver says ready", ready)
    ok(d.cell(1, "x = 1").get("error") is None, "python: x = 1")
    ok(text(d.cell(2, "x += 1; x")) == "2", "python: x += 1; x -> 2 (state persists)")
    r = d.cell(3, "1/0")
    ok(etype(r) == "ZeroDivisionError" and any("<cell 3>" in line for line in r["error"]["traceback"])
       and not any("session.py" in line for line in r["error"]["traceback"]),
       "python: 1/0 is a structured ZeroDivisionError with the cell's own frames", r)
    r = d.cell(4, "def f():\n    raise ValueError('bad')\nf()")
    ok(etype(r) == "ValueError" and r["error"]["value"] == "bad", "python: an exception from a cell's function", r)
    ok(etype(d.cell(5, "import sys; sys.exit(3)")) == "SystemExit", "python: sys.exit is an error, the session goes on")
    ok(text(d.cell(6, "x")) == "2", "python: ... x is still 2")
    r = d.cell(7, "import asyncio\nawait asyncio.sleep(0.01)\n42")
    ok(text(r) == "42", "python: top-level await", r)
    r = d.cell(8, "while True: pass", interrupt_after=0.5)
    ok(etype(r) == "KeyboardInterrupt", "python: SIGINT interrupts a busy cell (KeyboardInterrupt)", r)
    r = d.cell(9, "import time\ntime.sleep(30)", interrupt_after=0.5)
    ok(etype(r) == "KeyboardInterrupt", "python: SIGINT interrupts a sleeping cell", r)
    ok(text(d.cell(10, "x")) == "2", "python: ... and the state survives interrupts")
    ok(text(d.cell(11, "print('out'); 'v'")) == "'v'", "python: a value after a print")
    have_mpl = subprocess.run(["/usr/bin/python3", "-c", "import matplotlib"]).returncode == 0
    if have_mpl:
        r = d.cell(12, "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()")
        imgs = r.get("images") or []
        ok(len(imgs) == 1 and imgs[0]["mime"] == "image/png" and imgs[0]["data"].startswith("iVBOR"),
           "python: plt.show() returns the figure as a PNG", r.get("error"))
        r = d.cell(13, "plt.figure(); plt.plot([3, 2]); None")
        ok(len(r.get("images") or []) == 1, "python: a figure left open at the end of a cell is returned too")
        ok(len(d.cell(14, "1").get("images") or []) == 0, "python: ... once")
    else:
        for _ in range(3):
            ok(True, "python: matplotlib # SKIP python3-matplotlib is not installed")
    have_pd = subprocess.run(["/usr/bin/python3", "-c", "import pandas"]).returncode == 0
    if have_pd:
        r = d.cell(15, "import pandas as pd\npd.DataFrame({'a': [1, 2]})")
        ok("html" in (r.get("value") or {}) and "<table" in r["value"]["html"], "python: a DataFrame's HTML form", r.get("value"))
    else:
        ok(True, "python: DataFrame HTML # SKIP python3-pandas is not installed")
    rc, out, err = d.close()
    ok(rc == 0 and out == b"out\n", "python: the socket's end ends the driver; output went to stdout", (rc, out, err[-500:]))


def node_cases(src, work, node):
    d = Driver([node, "--expose-internals", os.path.join(src, "src/session/session.js")], work)
    ready = d.recv()
    ok(ready and "ready" in ready, "node: the driver says ready", ready)
    ok(d.cell(1, "let y = 5").get("error") is None, "node: let y = 5")
    ok(text(d.cell(2, "y * 2")) == "10", "node: y * 2 -> 10 (let persists)")
    ok(text(d.cell(3, "const f = (a) => a + 1; function g() { return f(y) }; g()")) == "6", "node: const and function declarations")
    ok(text(d.cell(4, "g() + f(1)")) == "8", "node: ... persist")
    ok(text(d.cell(5, "let z = await Promise.resolve(3); z")) == "3", "node: top-level await with a declaration")
    ok(text(d.cell(6, "z + 1")) == "4", "node: ... which persists")
    r = d.cell(7, "throw new TypeError('bad')")
    ok(etype(r) == "TypeError" and r["error"]["value"] == "bad" and any("<cell 7>" in line for line in r["error"]["traceback"])
       and not any("session.js" in line for line in r["error"]["traceback"]), "node: a structured TypeError", r)
    ok(text(d.cell(8, "({a: 1})")) == "{ a: 1 }" and text(d.cell(9, "{a: 1}")) == "{ a: 1 }", "node: object literals")
    r = d.cell(10, "while (true) {}", interrupt_after=0.5)
    ok(etype(r) == "Interrupted", "node: SIGINT interrupts a busy cell", r)
    r = d.cell(11, "await new Promise((r) => setTimeout(r, 30000))", interrupt_after=0.5)
    ok(etype(r) == "Interrupted", "node: SIGINT interrupts a pending await", r)
    ok(text(d.cell(12, "y")) == "5", "node: ... and the state survives")
    ok(text(d.cell(13, "require('path').basename('/a/b')")) == "'b'", "node: require works in a cell")
    rc, out, err = d.close()
    ok(rc == 0, "node: the socket's end ends the driver", (rc, err[-500:]))


def main():
    src = os.environ.get("AB_SRCDIR") or os.path.join(os.path.dirname(__file__), "..", "..")
    work = tempfile.mkdtemp(prefix="ab-drivers-")
    try:
        python_cases(src, work)
        node = shutil.which("node")
        if node:
            node_cases(src, work, node)
        else:
            ok(True, "node # SKIP no node")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("1..%d" % n)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""Real runs through the real agentbox binary (AGENTBOX): what an agent platform does."""

import asyncio
import hashlib
import os
import signal
import stat
import subprocess
import sys
import time
import uuid

import pytest

import agentbox_bwrap as agentbox
from conftest import procs_with

pytestmark = pytest.mark.usefixtures("agentbox_bin")


def test_hello_world():
    r = agentbox.run("print('hello from the sandbox')")
    assert r.status is agentbox.Status.EXITED and r.exit_code == 0 and r.ok
    assert r.stdout.text == "hello from the sandbox\n" and not r.stdout.truncated
    assert r.lang == "python" and r.schema_version == 1
    assert r.sandbox["network"].enforced and r.limits["timeout"].enforced is not None
    assert r.raise_for_status() is r
    assert r.run_dir is None and not r.run_dir_kept  # no run directory left behind


def test_node_and_args_stdin_env():
    r = agentbox.run("console.log(process.argv.slice(2).join(','), process.env.GREETING)",
                     language="node", args=["a", "b c"], env={"GREETING": "hi"})
    assert r.ok and r.stdout.text == "a,b c hi\n" and r.lang == "node"
    r = agentbox.run("import sys; print(sys.stdin.read().upper())", stdin="quiet input")
    assert r.stdout.text == "QUIET INPUT\n"
    r = agentbox.run("import sys; print(len(sys.stdin.buffer.read()))", stdin=bytes(range(256)))
    assert r.stdout.text == "256\n"


def test_failure_is_a_result_and_raise_for_status():
    r = agentbox.run("import sys; print('oops', file=sys.stderr); sys.exit(3)")
    assert r.status is agentbox.Status.EXITED and r.exit_code == 3 and not r.ok
    assert r.stderr.text == "oops\n"
    with pytest.raises(agentbox.RunFailed) as e:
        r.raise_for_status()
    assert e.value.result is r and "status 3" in str(e.value)


def test_files_in_and_out(tmp_path):
    host = tmp_path / "host.csv"
    host.write_text("x\n1\n2\n")
    code = (
        "import json, hashlib\n"
        "rows = open('data/in.csv').read().split()[1:]\n"
        "blob = open('blob.bin', 'rb').read()\n"
        "host = open('host.csv').read()\n"
        "json.dump({'sum': sum(map(int, rows)), 'blob': len(blob), 'host': host}, open('out/result.json', 'w'))\n"
    )
    r = agentbox.run("import os; os.makedirs('out')\n" + code,
                     files={"data/in.csv": "n\n3\n4\n", "blob.bin": b"\x00\xff" * 100, "host.csv": host})
    assert r.ok, r.stderr.text
    import json
    out = json.loads(r.read("out/result.json"))
    assert out == {"sum": 7, "blob": 200, "host": "x\n1\n2\n"}
    entry = next(f for f in r.files if f.path == "out/result.json")
    assert entry.type == "file" and entry.sha256 == hashlib.sha256(r.read("out/result.json")).hexdigest()
    assert r.read_text("data/in.csv") == "n\n3\n4\n"
    # never through a link the script made, never outside the workspace
    r2 = agentbox.run("import os; os.symlink('/etc/passwd', 'link')")
    with pytest.raises((OSError, ValueError)):
        r2.read("link")
    with pytest.raises(ValueError):
        r2.read("../x")
    d = r.files_dir
    assert d and os.path.isdir(d)
    r.close()
    assert not os.path.exists(d)


def test_file_origins(tmp_path):
    r = agentbox.run("open('new.txt', 'w').write('n')\nopen('edit.txt', 'a').write('!')",
                     files={"keep.txt": "k", "edit.txt": "e"})
    assert r.ok, r.stderr.text
    origins = {f.path: f.origin for f in r.files}
    assert origins == {"script.py": "script", "new.txt": "created", "edit.txt": "modified",
                       "keep.txt": "unchanged"}, origins
    assert sorted(f.path for f in r.changed_files) == ["edit.txt", "new.txt"]
    assert sorted(f.path for f in r.files_with_origin("unchanged", "script")) == ["keep.txt", "script.py"]
    with pytest.raises(ValueError):
        r.files_with_origin("input")
    assert r.files_summary is not None and r.files_summary.pre_run is not None
    assert r.files_summary.pre_run.listed == 3 and r.files_summary.pre_run.pre_run is None
    assert r.sandbox["network"].mode == "loopback" and r.sandbox["seccomp"].mode is None
    r.close()


def test_long_output_elided_and_kept(agentbox_bin):
    code = "import sys\nfor i in range(2000): print('line %d' % i)\nsys.stdout.flush()"
    want = "".join("line %d\n" % i for i in range(2000))
    # the client's runs are rm runs: the middle of a long stream is not kept
    r = agentbox.run(code, options={"inline_output": 1000})
    assert r.ok and r.stdout.elided and r.stdout.file is None
    assert r.stdout.head_bytes + r.stdout.tail_bytes + r.stdout.elided_bytes == len(want)
    assert r.stdout.text.startswith("line 0\n") and r.stdout.text.endswith("line 1999\n")
    # in the spec's words (issue 25): this caller never used a flag
    assert any("inline_output" in w for w in r.warnings), r.warnings
    assert not any("--" in w for w in r.warnings), r.warnings
    with pytest.raises(FileNotFoundError):
        r.stdout.read()
    assert not r.stderr.elided and r.stderr.read() == b"" and r.stderr.read_text() == ""
    r.close()
    # with the run directory kept, `file` has every captured byte
    r = agentbox.run(code, options={"inline_output": 1000, "rm": False})
    try:
        f = r.stdout.file
        assert r.ok and r.stdout.elided and f is not None and r.run_dir
        assert f.path == os.path.join(r.run_dir, "stdout") and f.bytes == len(want)
        assert f.sha256 == hashlib.sha256(want.encode()).hexdigest()
        assert r.stdout.read() == want.encode() and r.stdout.read_text() == want
    finally:
        r.close()
        if r.run_dir:
            subprocess.run([agentbox_bin, "rm", r.run_dir], check=True)
    # short output: everything inline
    r = agentbox.run("print('short')")
    assert not r.stdout.elided and r.stdout.file is None and r.stdout.read() == b"short\n"
    assert r.stdout.head_bytes == 6 and r.stdout.tail_bytes == 0 and r.stdout.elided_bytes == 0
    r.close()


def test_files_as_host_paths_and_collect(tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("from the host")
    out = tmp_path / "collected"
    r = agentbox.run("open('copy.txt', 'w').write(open('in.txt').read() + '!')",
                     files=[str(src)], collect=out)
    assert r.ok and (out / "copy.txt").read_text() == "from the host!"
    assert r.collected is not None and r.collected.dir == str(out)
    assert r.read("copy.txt") == b"from the host!"
    r.close()
    assert (out / "copy.txt").exists()  # a collect directory of the caller's is never removed


MPL = """
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
plt.plot([1, 2, 3], [1, 4, 9])
plt.title("agentbox")
plt.savefig("plot.png")
"""


def _png_ok(r):
    assert r.ok, r.stderr.text[-500:]
    png = r.read("plot.png")
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 1000
    assert next(f for f in r.files if f.path == "plot.png").sha256 == hashlib.sha256(png).hexdigest()


def test_matplotlib_png():
    pytest.importorskip("matplotlib", reason="python3-matplotlib is not installed on the host")
    r = agentbox.run(MPL, timeout=60)
    # the sandbox's curated /etc carries the host's /etc/matplotlibrc, where Debian's
    # python3-matplotlib keeps its defaults (src/supervisor/etcgen.c)
    assert "Could not find matplotlibrc" not in r.stderr.text, r.stderr.text[-500:]
    _png_ok(r)


def test_matplotlib_png_with_rc():
    pytest.importorskip("matplotlib", reason="python3-matplotlib is not installed on the host")
    import matplotlib

    rc = matplotlib.matplotlib_fname()
    r = agentbox.run(MPL, files={"matplotlibrc": rc}, timeout=60)
    _png_ok(r)


def test_timeout():
    t = time.monotonic()
    r = agentbox.run("import time\nwhile True: time.sleep(0.05)", timeout=1)
    assert r.status is agentbox.Status.TIMEOUT and "timeout" in r.limits_hit
    assert not r.ok and time.monotonic() - t < 15
    with pytest.raises(agentbox.RunFailed):
        r.raise_for_status()


@pytest.mark.skipif(os.geteuid() != 0, reason="the memory limit is enforced by a memory cgroup, "
                    "which this host gives to root only (unprivileged: cgroup v2 delegation)")
def test_oom():
    r = agentbox.run("b = bytearray(400 * 1024 * 1024)\nfor i in range(0, len(b), 4096): b[i] = 1",
                     limits={"memory": "128M"}, timeout=60)
    assert r.status is agentbox.Status.OOM and "memory" in r.limits_hit, r.raw
    assert r.signal_name == "KILL" and not r.ok


def test_setup_error_raises_with_fix(tmp_path):
    with pytest.raises(agentbox.SetupError) as e:
        agentbox.run("print(1)", files=[str(tmp_path / "missing")])
    assert "does not exist" in e.value.message and e.value.fix
    assert e.value.result is not None and e.value.result.status is agentbox.Status.SETUP_ERROR
    assert not isinstance(e.value, agentbox.UsageError)


def test_usage_error_raises():
    with pytest.raises(agentbox.UsageError) as e:
        agentbox.run("print(1)", limits={"memory": "lots"})
    assert "memory" in e.value.message and e.value.result.status is agentbox.Status.USAGE_ERROR
    # issue 25: the caller's words (limits.memory, not --memory), and always a fix
    for lim in ({"memory": "5"}, {"memory": "lots"}, {"timeout": "soon"}):
        with pytest.raises(agentbox.UsageError) as e:
            agentbox.run("print(1)", limits=lim)
        assert "limits.%s" % next(iter(lim)) in e.value.message, e.value.message
        assert e.value.fix and "--" not in e.value.message + e.value.fix, (e.value.message,
                                                                            e.value.fix)
    with pytest.raises(agentbox.UsageError) as e:
        agentbox.run("print(1)", limits={"memory": "5"})
    assert "a bare number is bytes" in e.value.fix, e.value.fix
    with pytest.raises(agentbox.UsageError) as e:
        agentbox.run("print(1)", options={"no_such_key": True})
    assert "no_such_key" in e.value.message


def test_binary_not_found_and_version(tmp_path, agentbox_bin):
    with pytest.raises(agentbox.AgentboxNotFound) as e:
        agentbox.run("print(1)", binary=str(tmp_path / "nope"))
    assert "AGENTBOX" in (e.value.fix or "")
    info = agentbox.binary_info()
    assert info.version == agentbox.__version__ and info.report_schema_version == 1
    assert info.path == os.path.abspath(agentbox_bin)


def test_refuses_unknown_schema(tmp_path):
    fake = tmp_path / "agentbox"
    fake.write_text("#!/bin/sh\necho '{\"agentbox_version\": \"9.0.0\", "
                    "\"report_schema_version\": 7, \"spec_version\": 1}'\n")
    fake.chmod(0o755)
    with pytest.raises(agentbox.IncompatibleAgentbox) as e:
        agentbox.run("print(1)", binary=str(fake))
    assert "schema 7" in e.value.message and "9.0.0" in e.value.message and e.value.fix


def test_concurrent_async_runs():
    async def main():
        t = time.monotonic()
        rs = await asyncio.gather(*[
            agentbox.run_async("import time; time.sleep(1); print(%d)" % i) for i in range(4)])
        return rs, time.monotonic() - t

    rs, took = asyncio.run(main())
    assert [r.stdout.text for r in rs] == ["0\n", "1\n", "2\n", "3\n"]
    assert all(r.ok for r in rs) and len({r.run_id for r in rs}) == 4
    assert took < 3.5, "4 runs of 1 s took %.1f s: not at once" % took


def test_async_cancellation_kills_the_run():
    token = "cancel-" + uuid.uuid4().hex

    async def main():
        task = asyncio.ensure_future(agentbox.run_async(
            "import sys, time\nprint('up', flush=True)\ntime.sleep(60)", args=[token]))
        deadline = time.monotonic() + 20
        while not procs_with(token) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert procs_with(token), "the run never started"
        t = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return time.monotonic() - t

    took = asyncio.run(main())
    assert took < 10
    assert procs_with(token) == [], "a process of the cancelled run is still there"


def test_keyboard_interrupt_kills_the_run():
    token = "kbd-" + uuid.uuid4().hex

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 1.0)
        with pytest.raises(KeyboardInterrupt):
            agentbox.run("import time; time.sleep(60)", args=[token])
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert procs_with(token) == []


def test_no_temporary_directories_left(tmp_path, monkeypatch):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with agentbox.run("open('x', 'w').write('1')", files={"a": "b"}) as r:
        assert r.read("x") == b"1"
    with pytest.raises(agentbox.SetupError):
        agentbox.run("1", files=["/nonexistent/path"])
    assert os.listdir(tmp_path) == []


def test_collect_false_keeps_no_files():
    r = agentbox.run("open('x', 'w').write('1')", collect=False)
    assert r.ok and r.collected is None and r.files_dir is None
    assert next(f for f in r.files if f.path == "x").sha256 == hashlib.sha256(b"1").hexdigest()
    with pytest.raises(FileNotFoundError):
        r.read("x")


STREAMING = ("import sys, time\nfor i in range(3):\n"
             "    print(i, flush=True); print('e', i, file=sys.stderr, flush=True); time.sleep(0.3)")


def test_streaming_callbacks():
    events = []
    r = agentbox.run(STREAMING, on_stdout=lambda t: events.append(("out", time.monotonic(), t)),
                     on_stderr=lambda t: events.append(("err", time.monotonic(), t)))
    assert r.ok
    assert "".join(t for k, _, t in events if k == "out") == "0\n1\n2\n"
    assert "".join(t for k, _, t in events if k == "err") == "e 0\ne 1\ne 2\n"
    outs = [when for k, when, _ in events if k == "out"]
    assert outs[-1] - outs[0] >= 0.4, "the output came as it was written, not at the end"
    assert r.stdout.text == "0\n1\n2\n" and r.stdout.relay_dropped_bytes == 0

    async def main():
        out = []
        r = await agentbox.run_async(STREAMING, on_stdout=out.append)
        return r, "".join(out)

    r, out = asyncio.run(main())
    assert r.ok and out == "0\n1\n2\n"


def test_stderr_filter_keeps_the_scripts_lines_in_order():
    from agentbox_bwrap._run import _StderrFilter

    def through(chunks, ours):
        out = []
        f = _StderrFilter(out.append)
        for c in chunks:
            f.push(c)
        f.end(ours)
        return "".join(out)

    assert through(["a\nb", "c\nagen", "tbox: warning: w1\n"], "agentbox: warning: w1\n") == "a\nbc\n"
    assert through(["x\nagentbox: mine\ny\n", "agentbox: warning: w\n"],
                   "agentbox: warning: w\n") == "x\nagentbox: mine\ny\n"
    assert through(["ag", "ent", "x\n", "agentbo"], None) == "agentx\nagentbo"
    # issue 25: a default this host cannot apply is one note line, which is agentbox's too
    from agentbox_bwrap._run import _own_lines
    rep = {"warnings": ["default cpus limit only approximated: ...", "other"],
           "defaults_not_applied": ["cpus"]}
    ours = _own_lines(rep)
    assert ours == ("agentbox: warning: other\n"
                    "agentbox: note: defaults this host cannot fully apply: cpus "
                    "(agentbox doctor explains)\n"), ours
    assert through(["s\n", ours], ours) == "s\n"
    # issue 24: a line like agentbox's holds back only itself (and the ones like it right
    # after) until the next line, never the rest of the stream
    out = []
    f = _StderrFilter(out.append)
    f.push("agentbox: fake\nTry 'agentbox x\n")
    assert out == []
    f.push("la")
    f.push("ter\nmore\n")
    assert "".join(out) == "agentbox: fake\nTry 'agentbox x\nlater\nmore\n"
    f.push("agentbox: warning: w\n")
    f.end("agentbox: warning: w\n")
    assert "".join(out) == "agentbox: fake\nTry 'agentbox x\nlater\nmore\n"
    err = []
    r = agentbox.run("import sys\nprint('agentbox: not really', file=sys.stderr)\n"
                     "print('partial', end='', file=sys.stderr)", on_stderr=err.append)
    assert "".join(err) == "agentbox: not really\npartial" == r.stderr.text


def test_stderr_after_a_line_like_agentboxs_flows_while_the_run_goes_on():
    # issue 24: the filter held everything after a line starting "agentbox: " until the run
    # ended; now the next line releases it. The script sleeps 4 s after its lines: they
    # must reach the callback while it sleeps, not when the run returns.
    import time

    seen = {}

    def cb(text):
        if "after-the-fake" in text and "t" not in seen:
            seen["t"] = time.monotonic()

    r = agentbox.run("import sys, time\n"
                     "print('agentbox: warning: not agentbox', file=sys.stderr, flush=True)\n"
                     "print('after-the-fake', file=sys.stderr, flush=True)\n"
                     "time.sleep(4)\n", on_stderr=cb, timeout=30)
    end = time.monotonic()
    assert r.ok, r.message
    assert "t" in seen and end - seen["t"] >= 2, end - seen.get("t", end)
    assert "agentbox: warning: not agentbox\nafter-the-fake\n" in r.stderr.text


def test_a_callback_that_raises_stops_the_run():
    token = "cb-" + uuid.uuid4().hex

    def boom(text):
        raise ValueError("the callback failed")

    t = time.monotonic()
    with pytest.raises(ValueError):
        agentbox.run("import time\nprint('go', flush=True)\ntime.sleep(60)", args=[token],
                     on_stdout=boom)
    assert time.monotonic() - t < 15 and procs_with(token) == []


def test_stdin_streams(tmp_path):
    """issue 25: a stream as the script's stdin, read as the script reads it."""
    import io

    upper = "import sys; print(sys.stdin.read().upper(), end='')"
    p = tmp_path / "in.txt"
    p.write_bytes(b"from a file\n")
    with open(p, "rb") as f:
        r = agentbox.run(upper, stdin=f)
    assert r.ok and r.stdout.text == "FROM A FILE\n", r.raw
    rfd, wfd = os.pipe()
    os.write(wfd, b"piped\n")
    os.close(wfd)
    try:
        r = agentbox.run(upper, stdin=rfd)
    finally:
        os.close(rfd)
    assert r.ok and r.stdout.text == "PIPED\n", r.raw
    r = agentbox.run(upper, stdin=io.BytesIO(b"no fd\n"))
    assert r.ok and r.stdout.text == "NO FD\n", r.raw
    # a stream that never closes does not hold up a script that does not read it
    rfd, wfd = os.pipe()
    try:
        t = time.monotonic()
        r = agentbox.run("print('no read')", stdin=rfd)
        assert r.ok and r.stdout.text == "no read\n" and time.monotonic() - t < 20
    finally:
        os.close(wfd)
        os.close(rfd)

    async def two():
        a, b = os.pipe()
        os.write(b, b"async\n")
        os.close(b)
        try:
            return await agentbox.run_async(upper, stdin=a)
        finally:
            os.close(a)

    r = asyncio.run(two())
    assert r.ok and r.stdout.text == "ASYNC\n", r.raw


def test_hint_for_a_file_next_to_the_script(tmp_path):
    """issue 25: a script that fails on a file lying next to it gets a hint, in the spec's
    words (this client's caller gives files=, which is the spec's inputs)."""
    (tmp_path / "data.txt").write_text("the data\n")
    script = tmp_path / "reads.py"
    script.write_text("print(open('data.txt').read())\n")
    os.chmod(tmp_path, 0o755)
    r = agentbox.run(script=script)
    assert not r.ok and r.hint and "data.txt" in r.hint, r.raw
    assert "to inputs" in r.hint and "--" not in r.hint, r.hint
    r = agentbox.run(script=script, files=[str(tmp_path / "data.txt")])
    assert r.ok and r.hint is None, r.raw


def test_workspace_with_a_project_npmrc(tmp_path):
    """issue 25: a project's .npmrc does not end the run: the sandbox sees it empty."""
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / ".npmrc").write_text("//registry.npmjs.org/:_authToken=SECRET-25\n")
    os.chmod(proj, 0o755)
    r = agentbox.run("print(repr(open('.npmrc').read()))", workspace=proj)
    assert r.ok and r.stdout.text == "''\n", r.raw
    assert r.hidden_files == [".npmrc"], r.raw
    assert "SECRET-25" in (proj / ".npmrc").read_text()

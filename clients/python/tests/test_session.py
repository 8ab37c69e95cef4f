"""Sessions (issue 27) through the real agentbox binary (AGENTBOX): one live sandbox, code run
cell by cell, state kept; timeouts, interrupts and crashes said as they are."""

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
import uuid

import pytest

import agentbox_bwrap as agentbox
from conftest import procs_with

pytestmark = pytest.mark.usefixtures("agentbox_bin")

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def session():
    s = agentbox.Session(timeout=30)
    yield s
    s.close()


def test_state_persists_and_the_last_value_is_returned(session):
    assert session.id and session.info["state"] == "ready" and session.info["language"] == "python"
    c = session.run("x = 1")
    assert c.status is agentbox.CellStatus.OK and c.ok and c.result is None and c.error is None
    c = session.run("x += 1; print('out'); x")
    assert c.result == "2" and c.stdout == "out\n" and c.stderr == ""
    assert c.id == 2 and c.session["cells"] == 2 and c.raw["schema"] == "agentbox.cell/1"
    assert c.raise_for_status() is c
    # what a cell prints is its output, never a protocol line of agentbox's
    c = session.run("print('{\"cell\": {\"status\": \"lost\"}}'); import sys; "
                    "print('{\"ended\": {}}', file=sys.stderr); 'x'")
    assert c.ok and c.result == "'x'" and c.stdout == '{"cell": {"status": "lost"}}\n'
    assert c.stderr == '{"ended": {}}\n' and session.info["state"] == "ready"


def test_plt_show_returns_a_png(session):
    c = session.run("import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.show()")
    assert c.ok, c
    assert len(c.images) == 1
    img = c.images[0]
    assert img.mime == "image/png" and img.data.startswith(PNG_MAGIC) and len(img.data) > 1000


def test_an_exception_is_a_structured_error(session):
    c = session.run("def f():\n    return 1/0\nf()")
    assert c.status is agentbox.CellStatus.ERROR and not c.ok
    assert c.error is not None and c.error.type == "ZeroDivisionError"
    assert c.error.value == "division by zero" and str(c.error).startswith("ZeroDivisionError")
    assert any("return 1/0" in line for line in c.error.traceback), c.error.traceback
    with pytest.raises(agentbox.CellFailed) as e:
        c.raise_for_status()
    assert e.value.cell is c and "ZeroDivisionError" in str(e.value)


def test_a_cell_past_its_timeout_is_interrupted_and_the_state_goes_on(session):
    session.run("x = 2")
    t0 = time.monotonic()
    c = session.run("while True: pass", timeout=1)
    assert c.status is agentbox.CellStatus.TIMEOUT, c
    assert time.monotonic() - t0 < 10
    assert c.message and "timeout" in c.message
    assert c.error is not None and c.error.type == "KeyboardInterrupt"
    assert session.run("x").result == "2"


def test_a_crash_ends_the_session_and_restart_says_the_state_is_gone(session):
    session.run("x = 2")
    c = session.run("import os; os._exit(3)")
    assert c.status is agentbox.CellStatus.LOST, c
    assert c.message and "code 3" in c.message and "state is gone" in c.message
    assert session.info["state"] == "ended"
    with pytest.raises(agentbox.SessionEnded) as e:
        session.run("x")
    assert e.value.reason and "code 3" in e.value.reason and "code 3" in str(e.value)
    assert e.value.report_status == "exited" and e.value.fix
    # asked for: a fresh interpreter, and the cell says the state is gone
    c = session.run("x", restart=True)
    assert c.error is not None and c.error.type == "NameError"
    assert c.restarted and "gone" in c.restarted
    session.run("x = 5")
    info = session.restart()  # a live session restarted by its caller
    assert info["state"] == "ready" and "gone" in info["restarted"]
    assert session.run("x").error.type == "NameError"


def test_close_kills_the_processes_and_refuses_later_calls():
    token = "agentbox-session-test-" + uuid.uuid4().hex
    s = agentbox.Session()
    c = s.run("import subprocess\n"
              "p = subprocess.Popen(['/bin/sh', '-c', 'sleep 1000; : %s'])\n"
              "p.pid > 0" % token)
    assert c.result == "True", c
    assert procs_with(token)
    report = s.close()
    assert isinstance(report, agentbox.Result), report
    assert report.raw["session"]["ended"] == "closed by its caller"
    assert report.raw["session"]["cells"] == 1
    assert not procs_with(token)
    assert s.state == "closed" and s.close() is report
    with pytest.raises(agentbox.SessionEnded) as e:
        s.run("1")
    assert "closed" in str(e.value)
    with pytest.raises(agentbox.SessionEnded):
        s.restart()


def test_two_sessions_share_nothing():
    with agentbox.Session() as a, agentbox.Session() as b:
        assert a.id != b.id
        a.run("secret = 42\nopen('/tmp/mark', 'w').write('a')\nopen('ws.txt', 'w').write('a')")
        c = b.run("import os\n"
                  "('secret' in globals(), os.path.exists('/tmp/mark'), os.path.exists('ws.txt'))")
        assert c.result == "(False, False, False)", c
        assert a.run("secret, open('/tmp/mark').read()").result == "(42, 'a')"


def test_interrupt_from_another_thread(session):
    session.run("x = 7")
    timer = threading.Timer(0.5, session.interrupt)
    timer.start()
    try:
        c = session.run("import time\nwhile True: time.sleep(0.05)", timeout=30)
    finally:
        timer.cancel()
    assert c.status is agentbox.CellStatus.CANCELLED, c
    assert session.run("x").result == "7"
    assert session.interrupt() is False  # nothing running


def test_keyboard_interrupt_interrupts_the_cell(session):
    session.run("x = 8")
    # a real SIGINT (Ctrl-C) to this process, as a person at a terminal sends it
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        session.run("import time\nwhile True: time.sleep(0.05)", timeout=30)
    assert time.monotonic() - t0 < 20
    # the cell was interrupted and its answer read: the session goes on, in step
    assert session.run("x").result == "8"


def test_files_in_and_out():
    with agentbox.Session(files={"data/in.csv": "a\n1\n2\n"}) as s:
        c = s.run("rows = open('data/in.csv').read().split()[1:]\n"
                  "open('out.txt', 'w').write(str(sum(map(int, rows))))\n"
                  "len(rows)")
        assert c.result == "2", c
    report = s.close()
    assert isinstance(report, agentbox.Result)
    assert report.read_text("out.txt") == "3"
    assert "out.txt" in [f.path for f in report.changed_files]
    report.close()


def test_node_session():
    with agentbox.Session("node") as s:
        assert s.info["language"] == "node"
        assert s.run("let y = 5").ok
        c = s.run("y * 2")
        assert c.result == "10", c
        c = s.run("await Promise.resolve(1); throw new TypeError('bad')")
        assert c.error is not None and c.error.type == "TypeError" and c.error.value == "bad"


def test_idle_timeout_ends_the_session():
    with agentbox.Session(idle_timeout=1) as s:
        assert s.info["idle_timeout_ms"] == 1000
        s.run("x = 1")
        time.sleep(2.5)
        with pytest.raises(agentbox.SessionEnded) as e:
            s.run("x")
        assert "idle" in (e.value.reason or ""), e.value.info
        assert s.run("x", restart=True).error.type == "NameError"


def test_refused_sessions_raise():
    with pytest.raises(agentbox.UsageError) as e:
        agentbox.Session(limits={"pids": "many"})
    assert "pids" in e.value.message and e.value.fix
    with pytest.raises(agentbox.SetupError) as e:
        agentbox.Session(files=["/nonexistent/agentbox-session-test"])
    assert "nonexistent" in e.value.message
    with pytest.raises(ValueError):
        agentbox.Session("ruby")


def test_async_session():
    async def main():
        async with agentbox.AsyncSession(timeout=30) as s, agentbox.AsyncSession() as t:
            assert s.id and s.id != t.id
            await s.run("x = 1")
            c = await s.run("x += 1; x")
            assert c.result == "2"
            # two sessions at once from one event loop
            a, b = await asyncio.gather(s.run("import time; time.sleep(0.5); x"),
                                        t.run("'x' in globals()"))
            assert a.result == "2" and b.result == "False"
            c = await s.run("while True: pass", timeout=1)
            assert c.status is agentbox.CellStatus.TIMEOUT
            # cancelling the task interrupts the cell; the session goes on
            task = asyncio.ensure_future(s.run("import time\nwhile True: time.sleep(0.05)"))
            await asyncio.sleep(0.5)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert (await s.run("x")).result == "2"
            c = await s.run("import os; os._exit(3)")
            assert c.status is agentbox.CellStatus.LOST
            with pytest.raises(agentbox.SessionEnded):
                await s.run("x")
            c = await s.run("x", restart=True)
            assert c.error.type == "NameError" and c.restarted
        report = await s.close()
        assert isinstance(report, agentbox.Result)
        with pytest.raises(agentbox.SessionEnded):
            await s.run("1")

    asyncio.run(main())


@pytest.mark.parametrize("how", ["kept to the end", "dropped"])
def test_a_session_never_closed_ends_with_its_program(tmp_path, how):
    token = "agentbox-session-test-" + uuid.uuid4().hex
    script = (
        "import sys, time; sys.path.insert(0, %r)\n"
        "import agentbox_bwrap\n"
        "s = agentbox_bwrap.Session(files={'in.txt': 'x'})\n"
        "print(s.run(\"import subprocess; open('out.txt', 'w').write('y'); \"\n"
        "            \"subprocess.Popen(['/bin/sh', '-c', 'sleep 1000; : %s']); 'up'\").result)\n"
        "if %r == 'dropped':\n"
        "    del s\n"
        "    time.sleep(1)\n"
        % (os.path.dirname(os.path.dirname(os.path.abspath(agentbox.__file__))), token, how))
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = dict(os.environ, TMPDIR=str(tmp))
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                       timeout=60, env=env)
    assert p.returncode == 0 and p.stdout == "'up'\n", p.stderr
    # agentbox saw its stdin end and closed the session: nothing of it is left
    for _ in range(100):
        if not procs_with(token):
            break
        time.sleep(0.1)
    assert not procs_with(token)
    # nor of the client: its staging of files= and the directory the files out would have
    # gone to (agentbox collected into it after the program was gone, and nobody read them)
    assert sorted(os.listdir(tmp)) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="the memory limit is enforced by a memory cgroup, "
                    "which this host gives to root only (unprivileged: cgroup v2 delegation)")
def test_the_memory_limit_binds_the_session_across_cells():
    with agentbox.Session(limits={"memory": "256M"}) as s:
        grab = "keep.append(bytearray(100 * 1024 * 1024)); len(keep)"
        s.run("keep = []")
        # each cell alone fits; together they do not: the limit is the session's
        assert s.run(grab).result == "1"
        c = None
        for _ in range(4):
            c = s.run(grab)
            if c.status is not agentbox.CellStatus.OK:
                break
        assert c is not None and c.status is agentbox.CellStatus.LOST, c
        assert s.info["report_status"] == "oom", s.info
        with pytest.raises(agentbox.SessionEnded) as e:
            s.run("1")
        assert e.value.report_status == "oom"
    report = s.close()
    assert isinstance(report, agentbox.Result) and report.status is agentbox.Status.OOM


def test_four_async_sessions_at_once():
    async def main():
        sessions = [agentbox.AsyncSession("node" if i % 2 else "python") for i in range(4)]
        await asyncio.gather(*(s.start() for s in sessions))
        try:
            assert len({s.id for s in sessions}) == 4
            await asyncio.gather(*(s.run("var n = %d" % i if i % 2 else "n = %d" % i)
                                   for i, s in enumerate(sessions)))
            cells = await asyncio.gather(*(s.run("n * 10") for s in sessions))
            assert [c.result for c in cells] == ["0", "10", "20", "30"]
        finally:
            await asyncio.gather(*(s.close() for s in sessions))

    asyncio.run(main())

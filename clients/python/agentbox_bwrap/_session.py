"""Sessions (issue 27): one sandbox kept alive, code run in it cell by cell as in a notebook.

A Session drives one `agentbox session --jsonl` (docs/sessions.md): the spec goes first, then
one request a line ({"cell": ...}, {"interrupt": {}}, {"restart": {}}, {"close": {}}); agentbox
answers a line each ({"ready": info}, {"cell": result}, {"error": ...}, {"closed": report}) and
says {"ended": info} when the session ended on its own (a crash, the idle timeout, its
lifetime). The cell's status, limits and crashes come from agentbox's supervisor, never from
what the cell printed. Closing stdin (this process exiting) makes agentbox close the session.
"""

from __future__ import annotations

import asyncio
import base64
import enum
import errno
import json
import os
import queue
import subprocess
import threading
import time
import weakref
from dataclasses import dataclass, field
from typing import IO, Any, Dict, Iterable, List, Mapping, Optional, Tuple, Union

from ._report import Result
from ._run import FileContent, PathLike, _Invocation, binary_info, requirements_spec
from .errors import (AgentboxError, AgentboxNotFound, CellFailed, IncompatibleAgentbox,
                     SessionEnded, SetupError, UsageError)

#: The cell result schemas this client reads.
CELL_SCHEMAS: Tuple[str, ...] = ("agentbox.cell/1",)
#: After an interrupt (KeyboardInterrupt, a cancelled task), how long the cell gets to come
#: back: agentbox itself ends the session 2 s after an interrupt the interpreter ignores.
INTERRUPT_GRACE_S = 30.0
#: How long close() waits for agentbox's report (it gives the interpreter 5 s to leave).
CLOSE_GRACE_S = 60.0
#: agentbox's stderr kept for when it fails without a word on stdout
_STDERR_KEEP = 65536

Files = Union[Mapping[str, FileContent], Iterable[PathLike], None]
Duration = Union[float, int, str, None]


class CellStatus(str, enum.Enum):
    """How a cell ended (the cell result's `status`)."""

    OK = "ok"
    #: the cell raised: `error` says what
    ERROR = "error"
    #: past its timeout, interrupted; the session and its state go on
    TIMEOUT = "timeout"
    #: interrupted by its caller (interrupt(), KeyboardInterrupt, a cancelled task)
    CANCELLED = "cancelled"
    #: the session ended during the cell (a crash, an OOM kill, no answer to an interrupt):
    #: its state is gone, later cells raise SessionEnded unless restarted
    LOST = "lost"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class CellImage:
    """A figure the cell showed (`plt.show()`, or left open at its end)."""

    mime: str
    data: bytes


@dataclass(frozen=True)
class CellError:
    """The exception a cell raised: its type's name, its value, the traceback of the cell's
    own frames (lines, as the interpreter formats them)."""

    type: str
    value: str
    traceback: List[str]

    def __str__(self) -> str:
        return "%s: %s" % (self.type, self.value) if self.value else self.type


@dataclass(eq=False)
class Cell:
    """The result of one cell. Everything but `status` and `message` is what the code in the
    sandbox printed or returned: untrusted text."""

    id: int
    status: CellStatus
    stdout: str
    stderr: str
    #: the repr of the cell's last expression (None: no value, or None)
    result: Optional[str]
    #: a rich form of that value where the object offers one cheaply (a DataFrame's HTML)
    result_html: Optional[str]
    images: List[CellImage]
    error: Optional[CellError]
    #: timeout / cancelled / lost: what happened, in agentbox's words
    message: Optional[str]
    wall_ms: Optional[int]
    #: the session as the cell left it: id, state, cells, ended?, restarted?...
    session: Dict[str, Any]
    #: the cell result as agentbox wrote it (stdout/stderr byte counts, truncation...)
    raw: Dict[str, Any] = field(repr=False)

    @property
    def ok(self) -> bool:
        return self.status is CellStatus.OK

    @property
    def restarted(self) -> Optional[str]:
        """Set when this cell ran in a restarted interpreter: the earlier state is gone."""
        v = self.session.get("restarted")
        return str(v) if v is not None else None

    def raise_for_status(self) -> "Cell":
        """Raise CellFailed unless `ok`; returns the cell so calls chain."""
        if not self.ok:
            raise CellFailed(self)
        return self


def parse_cell(raw: Mapping[str, Any]) -> Cell:
    """A Cell from a cell result (a dict of the JSON agentbox wrote)."""
    if raw.get("schema") not in CELL_SCHEMAS:
        raise IncompatibleAgentbox(
            "a cell result of schema %r; this client reads %s"
            % (raw.get("schema"), "/".join(CELL_SCHEMAS)),
            "use the client from the same agentbox release as the binary")

    def text(stream: Any) -> str:
        return str(stream.get("text") or "") if isinstance(stream, Mapping) else ""

    res = raw.get("result")
    err = raw.get("error")
    images = [CellImage(str(i.get("mime") or ""), base64.b64decode(str(i.get("data") or "")))
              for i in raw.get("images") or [] if isinstance(i, Mapping)]
    wall = raw.get("wall_ms")
    return Cell(
        id=int(raw.get("id") or 0),
        status=CellStatus(raw.get("status")),
        stdout=text(raw.get("stdout")),
        stderr=text(raw.get("stderr")),
        result=str(res["text"]) if isinstance(res, Mapping) and res.get("text") is not None
        else None,
        result_html=str(res["html"]) if isinstance(res, Mapping) and res.get("html") is not None
        else None,
        images=images,
        error=CellError(str(err.get("type") or ""), str(err.get("value") or ""),
                        [str(t) for t in err.get("traceback") or []])
        if isinstance(err, Mapping) else None,
        message=str(raw["message"]) if raw.get("message") is not None else None,
        wall_ms=int(wall) if isinstance(wall, int) else None,
        session=dict(raw.get("session") or {}),
        raw=dict(raw),
    )


def _duration(name: str, v: Duration) -> Union[int, str]:
    """Seconds (a number) as the spec's milliseconds, or a string as it is ("10m")."""
    if isinstance(v, bool) or not isinstance(v, (int, float, str)):
        raise TypeError("%s: seconds (a number) or a duration string like '10m'" % name)
    if isinstance(v, str):
        return v
    if v <= 0:
        raise ValueError("%s must be more than 0 seconds" % name)
    return max(1, int(round(v * 1000)))


class _SessionSpec(_Invocation):
    """The session's spec, the staging directory of `files=` (kept until close: a restart
    copies the inputs in again), where the files out go at close."""

    def __init__(self, language: str, files: Files, env: Optional[Mapping[str, str]],
                 limits: Optional[Mapping[str, Any]], timeout: Optional[float],
                 idle_timeout: Duration, max_lifetime: Duration,
                 env_dir: Optional[PathLike], collect: Union[PathLike, bool, None],
                 options: Optional[Mapping[str, Any]], requirements: Optional[Iterable[str]],
                 index_url: Optional[str], find_links: Optional[PathLike]) -> None:
        self.streaming = False
        self.stdin_fd: Optional[int] = None
        self.staging: Optional[str] = None
        self.owned: Optional[str] = None
        self._owned_fin: Optional[weakref.finalize] = None
        self._staging_fin: Optional[weakref.finalize] = None
        self.files_dir: Optional[str] = None
        try:
            self.spec = self._session_spec(language, files, env, limits, timeout, idle_timeout,
                                           max_lifetime, env_dir, collect, options)
            reqs = requirements_spec(requirements, index_url, find_links)
            for k, v in reqs.items():  # `options` has the last word, as in run()
                self.spec.setdefault(k, v)
        except BaseException:
            self.cleanup(True)
            raise

    def _session_spec(self, language: str, files: Files, env: Optional[Mapping[str, str]],
                      limits: Optional[Mapping[str, Any]], timeout: Optional[float],
                      idle_timeout: Duration, max_lifetime: Duration,
                      env_dir: Optional[PathLike], collect: Union[PathLike, bool, None],
                      options: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
        if language not in ("python", "node"):
            raise ValueError("language must be 'python' or 'node', not %r" % (language,))
        ses: Dict[str, Any] = {}
        if idle_timeout is not None:
            ses["idle_timeout"] = _duration("idle_timeout", idle_timeout)
        if max_lifetime is not None:
            ses["max_lifetime"] = _duration("max_lifetime", max_lifetime)
        spec: Dict[str, Any] = {"spec_version": 1, "language": language, "rm": True,
                                "session": ses or True}
        self._common(spec, env, limits, timeout, files, None, collect)
        if env_dir is not None:
            spec["env_dir"] = os.path.abspath(os.fspath(env_dir))
        if options:
            spec.update(options)
        return spec


class _Core:
    """What a session's lines mean, shared by Session and AsyncSession."""

    def __init__(self, inv: _SessionSpec) -> None:
        self.inv = inv
        self.info: Dict[str, Any] = {}
        self.busy = False
        self.closed = False
        self.report: Union[Result, Dict[str, Any], None] = None
        self.stderr = bytearray()

    def spec_line(self) -> bytes:
        return (json.dumps({"spec": self.inv.spec}) + "\n").encode("utf-8")

    @staticmethod
    def cell_line(code: str, timeout: Optional[float]) -> bytes:
        if not isinstance(code, str):
            raise TypeError("code must be a str")
        cell: Dict[str, Any] = {"code": code}
        if timeout is not None:
            if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
                raise ValueError("timeout: seconds, more than 0")
            cell["timeout_ms"] = max(1, int(round(timeout * 1000)))
        return (json.dumps({"cell": cell}) + "\n").encode("utf-8")

    def keep_stderr(self, chunk: bytes) -> None:
        self.stderr.extend(chunk)
        if len(self.stderr) > 2 * _STDERR_KEEP:
            del self.stderr[:len(self.stderr) - _STDERR_KEEP]

    def take(self, msg: Optional[Dict[str, Any]], want: Tuple[str, ...],
             rc: Optional[int]) -> Optional[Tuple[str, Any]]:
        """One line from agentbox (None: its stdout ended): (key, value) when it answers the
        request (a key in `want`, or "error"); None when it only says something about the
        session."""
        if msg is None:
            raise self.gone(rc)
        if len(msg) != 1:
            return None  # not a line of this protocol: ignored
        key, val = next(iter(msg.items()))
        if key in ("ready", "ended") and isinstance(val, dict):
            self.info = dict(val)
        if key in want or key == "error":
            return key, val
        return None

    def gone(self, rc: Optional[int]) -> AgentboxError:
        """agentbox stopped answering."""
        lines = [ln for ln in self.stderr.decode("utf-8", "replace").splitlines()
                 if ln.startswith("agentbox")]
        msg = lines[-1] if lines else "agentbox session exited%s without a word" % (
            "" if rc is None else " with status %d" % rc)
        self.closed = True
        return AgentboxError("the session's agentbox is gone: %s" % msg,
                             "start a new session; agentbox's stderr said the above")

    def error(self, e: Any, starting: bool = False, rc: Optional[int] = None) -> AgentboxError:
        e = e if isinstance(e, Mapping) else {}
        message = str(e.get("message") or "agentbox refused the request")
        fix = str(e["fix"]) if e.get("fix") else None
        code = e.get("code")
        if code == -errno.EPIPE:
            return SessionEnded(message, "start a new session, or run(..., restart=True) / "
                                "restart() for a fresh interpreter (its state is gone)",
                                self.info)
        if starting:
            cls = UsageError if rc == 2 or code == -errno.EINVAL else SetupError
            return cls(message, fix)
        return AgentboxError(message, fix)

    def closed_error(self) -> SessionEnded:
        info = dict(self.info)
        info.setdefault("ended", "closed by its caller")
        return SessionEnded("session %s is closed" % info.get("id", "?"),
                            "start a new session", info)

    def after_cell(self, val: Any) -> Cell:
        cell = parse_cell(val if isinstance(val, Mapping) else {})
        self.info.update(cell.session)
        return cell

    def ended(self) -> bool:
        return self.info.get("state") == "ended"

    def final(self, val: Any, rc: int) -> Union[Result, Dict[str, Any], None]:
        """The session's run report from its {"closed": ...} line."""
        if not isinstance(val, dict):
            self.inv.cleanup(True)
            return None
        try:
            return self.inv.finish(json.dumps(val).encode("utf-8"), bytes(self.stderr), rc)
        except (AgentboxError, KeyError, TypeError, ValueError):
            return dict(val)
        finally:
            self.inv.cleanup(False)

    def start_failed(self, val: Any, rc: int) -> AgentboxError:
        """The session ended before it was ready: its report says why."""
        reason = str(self.info.get("ended") or "the session ended before it was ready")
        if isinstance(val, dict):
            try:
                res = self.inv.finish(json.dumps(val).encode("utf-8"), bytes(self.stderr), rc)
            except AgentboxError as e:  # SetupError / UsageError with the report
                return e
            res.close()
            return SessionEnded(reason, res.fix, self.info)
        self.inv.cleanup(True)
        return SessionEnded(reason, None, self.info)


def _decode(line: bytes) -> Optional[Dict[str, Any]]:
    try:
        v = json.loads(line)
    except ValueError:
        return {}
    return v if isinstance(v, dict) else {}


class Session:
    """One live sandbox with one interpreter in it, for code run cell by cell as in a
    notebook: variables, imports and files are kept between cells.

        with agentbox_bwrap.Session() as s:
            s.run("x = 1")
            print(s.run("x += 1; x").result)     # 2

    language: "python" (the default) or "node".
    files:    {name: str | bytes | path} or a list of host paths, copied into the workspace.
    env, limits, binary, options: as for run(); `limits` (memory, pids, disk...) bind the
              whole session.
    timeout:  each cell's default timeout in seconds (default 60); run(code, timeout=) per cell.
    idle_timeout, max_lifetime: seconds, or a duration string ("10m"); the session is ended
              after so long without a cell (default 10 min) / in all (default 1 h).
    env_dir:  a dependency environment `agentbox prepare` made (spec `env_dir`).
    collect:  where the files left go at close (default: a temporary directory the report
              owns: `report.read(path)`); False: none.
    requirements, index_url, find_links: packages the session needs, as for run(): installed
              (or found in agentbox's cache) before the interpreter starts, then read-only
              and offline for every cell; the report close() returns has them in `pre_run`.

    A cell that fails, times out or is interrupted is a Cell (`cell.status`); a session that
    has ended makes run() raise SessionEnded (unless `restart=True`). close() (or leaving the
    `with` block) ends it and returns its run report.
    """

    def __init__(self, language: str = "python", *, files: Files = None,
                 env: Optional[Mapping[str, str]] = None,
                 limits: Optional[Mapping[str, Any]] = None, timeout: Optional[float] = None,
                 idle_timeout: Duration = None, max_lifetime: Duration = None,
                 env_dir: Optional[PathLike] = None, collect: Union[PathLike, bool, None] = None,
                 binary: Optional[PathLike] = None,
                 options: Optional[Mapping[str, Any]] = None,
                 requirements: Optional[Iterable[str]] = None, index_url: Optional[str] = None,
                 find_links: Optional[PathLike] = None) -> None:
        path = binary_info(binary).path
        self._core = _Core(_SessionSpec(language, files, env, limits, timeout, idle_timeout,
                                        max_lifetime, env_dir, collect, options, requirements,
                                        index_url, find_links))
        self._lock = threading.RLock()  # one request at a time
        self._wlock = threading.Lock()  # one line at a time on agentbox's stdin
        self._lines: "queue.Queue[Optional[Dict[str, Any]]]" = queue.Queue()
        self._got: Optional[Tuple[str, Any]] = None  # the last answer read
        try:
            self._proc = subprocess.Popen([path, "session", "--jsonl"], stdin=subprocess.PIPE,
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        except OSError as e:
            self._core.inv.cleanup(True)
            raise AgentboxNotFound("cannot start %s: %s" % (path, e), "check the binary") from None
        assert self._proc.stdout is not None and self._proc.stderr is not None
        self._threads = [
            threading.Thread(target=_read_lines, args=(self._proc.stdout, self._lines),
                             daemon=True),
            threading.Thread(target=_read_stderr, args=(self._proc.stderr, self._core),
                             daemon=True),
        ]
        for t in self._threads:
            t.start()
        try:
            self._start()
        except BaseException:
            self._kill()
            raise

    # -- plumbing

    def _send(self, line: bytes) -> None:
        with self._wlock:
            stdin = self._proc.stdin
            if stdin is None or stdin.closed:
                raise self._core.closed_error()
            try:
                stdin.write(line)
                stdin.flush()
            except (BrokenPipeError, ConnectionResetError, ValueError):
                pass  # agentbox is gone: reading says how

    def _expect(self, *want: str, deadline: Optional[float] = None) -> Tuple[str, Any]:
        while True:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                msg = self._lines.get(timeout=wait)
            except queue.Empty:
                raise TimeoutError("agentbox did not answer in time") from None
            if msg is None:
                self._lines.put(None)  # the end stays the end
            got = self._core.take(msg, want, self._proc.poll())
            if got is not None:
                self._got = got
                return got

    def _drain(self) -> None:
        """What agentbox said on its own while no request was made (an idle session ended)."""
        while True:
            try:
                msg = self._lines.get_nowait()
            except queue.Empty:
                return
            if msg is None:
                self._lines.put(None)
                return
            self._core.take(msg, (), None)

    def _start(self) -> None:
        self._send(self._core.spec_line())
        key, val = self._expect("ready", "ended")
        if key == "ready":
            return
        if key == "ended":  # it ended before it was ready
            self._send(b'{"close": {}}\n')
            key, val = self._expect("closed", deadline=time.monotonic() + CLOSE_GRACE_S)
            self._finish_proc()
            raise self._core.start_failed(val if key == "closed" else None,
                                          self._proc.returncode)
        self._finish_proc()
        err = self._core.error(val, True, self._proc.returncode)
        self._core.inv.cleanup(True)
        raise err

    def _finish_proc(self) -> None:
        self._core.closed = True
        stdin = self._proc.stdin
        if stdin is not None and not stdin.closed:
            try:
                stdin.close()
            except OSError:
                pass
        try:
            self._proc.wait(timeout=CLOSE_GRACE_S)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        for t in self._threads:
            t.join(5)
        for f in (self._proc.stdout, self._proc.stderr):
            if f is not None:
                f.close()

    def _kill(self) -> None:
        if self._proc.poll() is None:
            self._proc.kill()
        self._finish_proc()
        self._core.inv.cleanup(True)

    # -- the API

    @property
    def id(self) -> str:
        """The session's id (as in agentbox's info and the MCP server's session_id)."""
        return str(self._core.info.get("id", ""))

    @property
    def info(self) -> Dict[str, Any]:
        """The session's last info: id, language, state ("ready", "busy", "ended"), cells,
        idle_timeout_ms, max_lifetime_ms, version; ended (how) and report_status once it has
        ended; restarted once restarted."""
        if self._lock.acquire(blocking=False):
            try:
                self._drain()
            finally:
                self._lock.release()
        return dict(self._core.info)

    @property
    def state(self) -> str:
        return "closed" if self._core.closed else str(self.info.get("state", ""))

    def run(self, code: str, timeout: Optional[float] = None, *, restart: bool = False) -> Cell:
        """Run one cell; its Cell once it ends. timeout: seconds (default: the session's).
        SessionEnded when the session has ended (restart=True: a fresh interpreter, its state
        gone, and `cell.restarted` says so). KeyboardInterrupt interrupts the cell, waits for
        it, and propagates."""
        line = self._core.cell_line(code, timeout)
        with self._lock:
            if self._core.closed:
                raise self._core.closed_error()
            self._drain()
            if restart and self._core.ended():
                self._restart()
            for attempt in (0, 1):
                self._core.busy = True
                try:
                    self._send(line)
                    key, val = self._wait_cell()
                finally:
                    self._core.busy = False
                if key == "cell":
                    return self._core.after_cell(val)
                err = self._core.error(val)
                if not (restart and attempt == 0 and isinstance(err, SessionEnded)):
                    raise err
                self._restart()
            raise AssertionError("not reached")

    def _wait_cell(self) -> Tuple[str, Any]:
        self._got = None
        try:
            return self._expect("cell")
        except KeyboardInterrupt:
            if self._got is not None:
                raise  # the cell had come back
            # the cell is interrupted (status "cancelled"), its answer read, then this goes on
            self._send(b'{"interrupt": {}}\n')
            try:
                self._expect("cell", deadline=time.monotonic() + INTERRUPT_GRACE_S)
            except (TimeoutError, AgentboxError):
                pass
            raise

    def interrupt(self) -> bool:
        """Interrupt the running cell (from another thread): KeyboardInterrupt in it, and its
        Cell has status "cancelled" (or "lost" if the interpreter does not recover within
        2 s). False when no cell was running."""
        if not self._core.busy or self._core.closed:
            return False
        self._send(b'{"interrupt": {}}\n')
        return True

    def _restart(self) -> Dict[str, Any]:
        self._send(b'{"restart": {}}\n')
        key, val = self._expect("ready")
        if key == "error":
            raise self._core.error(val)
        return dict(self._core.info)

    def restart(self) -> Dict[str, Any]:
        """A fresh interpreter in a fresh sandbox (the current one, if alive, is killed): its
        variables and files are gone. Returns the new info (its `restarted` says so)."""
        with self._lock:
            if self._core.closed:
                raise self._core.closed_error()
            return self._restart()

    def close(self) -> Union[Result, Dict[str, Any], None]:
        """End the session (a running cell is interrupted first) and return its run report:
        a Result (usage, files...; `raw["session"]` is its last info), or the report as a
        dict if this client cannot parse it. Later calls return the same report."""
        if self._core.busy:
            self.interrupt()
        with self._lock:
            if self._core.closed:
                return self._core.report
            self._send(b'{"close": {}}\n')
            try:
                key, val = self._expect("closed", deadline=time.monotonic() + CLOSE_GRACE_S)
            except (TimeoutError, AgentboxError):
                key, val = "error", None
            self._finish_proc()
            if key == "closed":
                self._core.report = self._core.final(val, self._proc.returncode)
            else:
                self._core.inv.cleanup(True)
            return self._core.report

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        # never closed: agentbox closes the session when its stdin ends. Nobody will read
        # the files it collects then: the client's own collect directory goes first.
        core = getattr(self, "_core", None)
        if core is not None and not core.closed:
            core.inv.cleanup(True)
        proc = getattr(self, "_proc", None)
        if proc is not None and proc.stdin is not None and not proc.stdin.closed:
            try:
                proc.stdin.close()
            except OSError:
                pass


def _read_lines(f: IO[bytes], q: "queue.Queue[Optional[Dict[str, Any]]]") -> None:
    try:
        for line in f:
            q.put(_decode(line))
    except (OSError, ValueError):
        pass
    q.put(None)


def _read_stderr(f: IO[bytes], core: _Core) -> None:
    try:
        while True:
            chunk = f.read1(65536)  # type: ignore[attr-defined]
            if not chunk:
                return
            core.keep_stderr(chunk)
    except (OSError, ValueError):
        return


class AsyncSession:
    """Session for asyncio: `async with AsyncSession() as s: cell = await s.run(code)`
    (or `s = await AsyncSession(...).start()` ... `await s.close()`). Cancelling a run()
    interrupts its cell and waits for it before CancelledError propagates."""

    def __init__(self, language: str = "python", *, files: Files = None,
                 env: Optional[Mapping[str, str]] = None,
                 limits: Optional[Mapping[str, Any]] = None, timeout: Optional[float] = None,
                 idle_timeout: Duration = None, max_lifetime: Duration = None,
                 env_dir: Optional[PathLike] = None, collect: Union[PathLike, bool, None] = None,
                 binary: Optional[PathLike] = None,
                 options: Optional[Mapping[str, Any]] = None,
                 requirements: Optional[Iterable[str]] = None, index_url: Optional[str] = None,
                 find_links: Optional[PathLike] = None) -> None:
        # checked at once, as Session does; a generator is read here, once
        reqs: Optional[List[str]] = requirements_spec(requirements, index_url,
                                                      find_links).get("requirements")
        self._args = (language, files, env, limits, timeout, idle_timeout, max_lifetime,
                      env_dir, collect, options, reqs, index_url, find_links)
        self._binary = binary
        self._core: Optional[_Core] = None
        self._proc: Optional["asyncio.subprocess.Process"] = None
        self._lock: Optional[asyncio.Lock] = None
        self._lines: "Optional[asyncio.Queue[Optional[Dict[str, Any]]]]" = None
        self._tasks: List["asyncio.Task[None]"] = []

    async def start(self) -> "AsyncSession":
        """Start the session (run() and `async with` do it too); returns it once ready."""
        if self._core is not None:
            return self
        path = (await asyncio.get_running_loop().run_in_executor(
            None, binary_info, self._binary)).path
        if self._core is not None:
            return self
        core = self._core = _Core(_SessionSpec(*self._args))
        self._lock = asyncio.Lock()
        self._lines = asyncio.Queue()
        try:
            self._proc = await asyncio.create_subprocess_exec(
                path, "session", "--jsonl", stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                limit=1 << 30)
        except OSError as e:
            core.inv.cleanup(True)
            core.closed = True
            raise AgentboxNotFound("cannot start %s: %s" % (path, e), "check the binary") from None
        self._tasks = [asyncio.ensure_future(self._read_lines()),
                       asyncio.ensure_future(self._read_stderr())]
        try:
            async with self._lock:
                await self._start()
        except BaseException:
            await asyncio.shield(self._kill())
            raise
        return self

    def _need(self) -> Tuple[_Core, "asyncio.subprocess.Process", asyncio.Lock,
                             "asyncio.Queue[Optional[Dict[str, Any]]]"]:
        assert self._core and self._proc and self._lock and self._lines
        return self._core, self._proc, self._lock, self._lines

    async def _read_lines(self) -> None:
        _, proc, _, q = self._need()
        assert proc.stdout is not None
        try:
            while True:
                line = await proc.stdout.readline()
                if not line:
                    break
                q.put_nowait(_decode(line))
        except (OSError, ValueError):
            pass
        q.put_nowait(None)

    async def _read_stderr(self) -> None:
        core, proc, _, _ = self._need()
        assert proc.stderr is not None
        try:
            while True:
                chunk = await proc.stderr.read(65536)
                if not chunk:
                    return
                core.keep_stderr(chunk)
        except (OSError, ValueError):
            return

    async def _send(self, line: bytes) -> None:
        core, proc, _, _ = self._need()
        if proc.stdin is None or proc.stdin.is_closing():
            raise core.closed_error()
        try:
            proc.stdin.write(line)
            await proc.stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            pass  # agentbox is gone: reading says how

    async def _expect(self, *want: str, timeout: Optional[float] = None) -> Tuple[str, Any]:
        core, proc, _, q = self._need()
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                msg = await asyncio.wait_for(q.get(), wait)
            except asyncio.TimeoutError:
                raise TimeoutError("agentbox did not answer in time") from None
            if msg is None:
                q.put_nowait(None)
                await asyncio.wait([asyncio.ensure_future(proc.wait())], timeout=5)
            got = core.take(msg, want, proc.returncode)
            if got is not None:
                return got

    def _drain(self) -> None:
        if self._core is None or self._lines is None:
            return
        while not self._lines.empty():
            msg = self._lines.get_nowait()
            if msg is None:
                self._lines.put_nowait(None)
                return
            self._core.take(msg, (), None)

    async def _start(self) -> None:
        core, proc, _, _ = self._need()
        await self._send(core.spec_line())
        key, val = await self._expect("ready", "ended")
        if key == "ready":
            return
        if key == "ended":
            await self._send(b'{"close": {}}\n')
            key, val = await self._expect("closed", timeout=CLOSE_GRACE_S)
            await self._finish_proc()
            raise core.start_failed(val if key == "closed" else None, proc.returncode or 0)
        await self._finish_proc()
        err = core.error(val, True, proc.returncode)
        core.inv.cleanup(True)
        raise err

    async def _finish_proc(self) -> None:
        core, proc, _, _ = self._need()
        core.closed = True
        if proc.stdin is not None and not proc.stdin.is_closing():
            proc.stdin.close()
        try:
            await asyncio.wait_for(proc.wait(), CLOSE_GRACE_S)
        except asyncio.TimeoutError:
            proc.kill()
            await proc.wait()
        await asyncio.wait(self._tasks, timeout=5)

    async def _kill(self) -> None:
        core, proc, _, _ = self._need()
        if proc.returncode is None:
            try:
                proc.kill()
            except ProcessLookupError:
                pass
        await self._finish_proc()
        core.inv.cleanup(True)

    @property
    def id(self) -> str:
        return str(self._core.info.get("id", "")) if self._core else ""

    @property
    def info(self) -> Dict[str, Any]:
        """As Session.info (empty before start())."""
        if self._lock is not None and not self._lock.locked():
            self._drain()
        return dict(self._core.info) if self._core else {}

    @property
    def state(self) -> str:
        if self._core is None:
            return "new"
        return "closed" if self._core.closed else str(self.info.get("state", ""))

    async def run(self, code: str, timeout: Optional[float] = None, *,
                  restart: bool = False) -> Cell:
        """As Session.run; cancelling the task interrupts the cell (status "cancelled"), waits
        for it, then CancelledError propagates."""
        line = _Core.cell_line(code, timeout)
        await self.start()
        core, _, lock, _ = self._need()
        async with lock:
            if core.closed:
                raise core.closed_error()
            self._drain()
            if restart and core.ended():
                await self._restart()
            for attempt in (0, 1):
                core.busy = True
                try:
                    await self._send(line)
                    key, val = await self._wait_cell()
                finally:
                    core.busy = False
                if key == "cell":
                    return core.after_cell(val)
                err = core.error(val)
                if not (restart and attempt == 0 and isinstance(err, SessionEnded)):
                    raise err
                await self._restart()
            raise AssertionError("not reached")

    async def _wait_cell(self) -> Tuple[str, Any]:
        work = asyncio.ensure_future(self._expect("cell"))
        try:
            return await asyncio.shield(work)
        except asyncio.CancelledError:
            await asyncio.shield(self._send(b'{"interrupt": {}}\n'))
            try:
                await asyncio.wait_for(asyncio.shield(work), INTERRUPT_GRACE_S)
            except (asyncio.TimeoutError, asyncio.CancelledError, AgentboxError):
                work.cancel()
            raise

    async def interrupt(self) -> bool:
        """As Session.interrupt (from another task)."""
        if self._core is None or not self._core.busy or self._core.closed:
            return False
        await self._send(b'{"interrupt": {}}\n')
        return True

    async def _restart(self) -> Dict[str, Any]:
        core, _, _, _ = self._need()
        await self._send(b'{"restart": {}}\n')
        key, val = await self._expect("ready")
        if key == "error":
            raise core.error(val)
        return dict(core.info)

    async def restart(self) -> Dict[str, Any]:
        """As Session.restart."""
        await self.start()
        core, _, lock, _ = self._need()
        async with lock:
            if core.closed:
                raise core.closed_error()
            return await self._restart()

    async def close(self) -> Union[Result, Dict[str, Any], None]:
        """As Session.close."""
        if self._core is None:
            return None
        core, proc, lock, _ = self._need()
        if core.busy:
            await self.interrupt()
        async with lock:
            if core.closed:
                return core.report
            await self._send(b'{"close": {}}\n')
            try:
                key, val = await self._expect("closed", timeout=CLOSE_GRACE_S)
            except (TimeoutError, AgentboxError):
                key, val = "error", None
            await self._finish_proc()
            if key == "closed":
                core.report = core.final(val, proc.returncode or 0)
            else:
                core.inv.cleanup(True)
            return core.report

    async def __aenter__(self) -> "AsyncSession":
        return await self.start()

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

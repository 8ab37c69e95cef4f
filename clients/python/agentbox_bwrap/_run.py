"""Driving the agentbox binary: one `agentbox run --spec - --report-fd N` per run.

The spec (docs/spec.md) goes to agentbox's stdin with `"quiet": true` (nothing is relayed
live; the output is in the report), the report comes back alone on a pipe at fd N, and
agentbox's stderr is kept for when it writes no report at all. Cancelling sends SIGTERM to
agentbox, which hands it to the run's supervisor: the sandbox is killed and reported
`interrupted`.
"""

from __future__ import annotations

import asyncio
import codecs
import json
import os
import re
import selectors
import shutil
import signal
import subprocess
import tempfile
import threading
import weakref
from dataclasses import dataclass
from typing import IO, Any, Callable, Dict, Iterable, List, Mapping, Optional, Tuple, Union

from . import __version__
from ._report import SCHEMA_VERSIONS, Result, Status, _own_dir, parse_report
from .errors import AgentboxError, AgentboxNotFound, IncompatibleAgentbox, SetupError, UsageError

#: The environment variable naming the agentbox binary (else `agentbox` on PATH).
BINARY_ENV = "AGENTBOX"
#: The spec versions this client writes.
SPEC_VERSIONS: Tuple[int, ...] = (1,)
#: After SIGTERM, how long agentbox gets to stop the run and write its report.
STOP_GRACE_S = 30.0

PathLike = Union[str, "os.PathLike[str]"]
#: on_stdout / on_stderr: called with the script's output as it comes
Callback = Callable[[str], None]
FileContent = Union[str, bytes, "os.PathLike[str]"]
StdinArg = Union[str, bytes, "os.PathLike[str]", int, IO[Any], None]


@dataclass(frozen=True)
class BinaryInfo:
    """The agentbox binary this client drives, and the formats it speaks."""

    path: str
    version: str
    report_schema_version: int
    spec_version: int


_info_cache: Dict[Tuple[str, int, int], BinaryInfo] = {}
_info_lock = threading.Lock()


def find_binary(binary: Optional[PathLike] = None) -> str:
    """The agentbox binary: `binary`, else $AGENTBOX, else `agentbox` on PATH."""
    cand = os.fspath(binary) if binary is not None else os.environ.get(BINARY_ENV) or "agentbox"
    where = "binary=%r" % cand if binary is not None else (
        "%s=%r" % (BINARY_ENV, cand) if os.environ.get(BINARY_ENV) else "PATH")
    path = cand if os.sep in cand else shutil.which(cand)
    if not path or not os.path.isfile(path) or not os.access(path, os.X_OK):
        raise AgentboxNotFound(
            "no agentbox binary found (looked at %s)" % where,
            "install agentbox (meson setup build && ninja -C build && meson install -C build), "
            "or set %s=/path/to/agentbox, or pass binary=" % BINARY_ENV)
    return os.path.abspath(path)


def binary_info(binary: Optional[PathLike] = None) -> BinaryInfo:
    """Which agentbox runs the scripts (`agentbox version --json`), checked once per binary:
    IncompatibleAgentbox when it writes a report schema this client does not read."""
    path = find_binary(binary)
    st = os.stat(path)
    key = (path, st.st_mtime_ns, st.st_ino)
    with _info_lock:
        if key in _info_cache:
            return _info_cache[key]
    try:
        out = subprocess.run([path, "version", "--json"], stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30,
                             check=False).stdout.decode("utf-8", "replace")
    except (OSError, subprocess.SubprocessError) as e:
        raise AgentboxNotFound("cannot run %s: %s" % (path, e),
                               "check that it is an agentbox binary for this machine") from None
    try:
        j = json.loads(out)
        info = BinaryInfo(path, str(j["agentbox_version"]), int(j["report_schema_version"]),
                          int(j["spec_version"]))
    except (ValueError, KeyError, TypeError):
        # Before `version --json` (0.1.0 without it): every such agentbox wrote schema 1.
        m = re.match(r"agentbox (0\.1\.[0-9]+)\s*$", out)
        if not m:
            raise IncompatibleAgentbox(
                "%s does not say which report schema it writes (`version --json` printed %r)"
                % (path, out[:100]),
                "install the agentbox of this client's release (%s), or point %s at it"
                % (__version__, BINARY_ENV)) from None
        info = BinaryInfo(path, m.group(1), 1, 1)
    if info.report_schema_version not in SCHEMA_VERSIONS or info.spec_version not in SPEC_VERSIONS:
        raise IncompatibleAgentbox(
            "agentbox %s (%s) writes report schema %d and reads spec version %d; "
            "agentbox-bwrap %s knows report schema %s and spec version %s"
            % (info.version, path, info.report_schema_version, info.spec_version, __version__,
               "/".join(map(str, SCHEMA_VERSIONS)), "/".join(map(str, SPEC_VERSIONS))),
            "install the client from that agentbox's own source tree "
            "(pip install ./clients/python), or point %s at an agentbox %s" %
            (BINARY_ENV, __version__))
    with _info_lock:
        _info_cache[key] = info
    return info


def _rm(path: str) -> None:
    shutil.rmtree(path, ignore_errors=True)


def requirements_spec(requirements: Optional[Iterable[str]], index_url: Optional[str],
                      find_links: Optional[PathLike]) -> Dict[str, Any]:
    """The spec's `requirements` and `index` (docs/requirements.md) from the keyword
    arguments of run() and Session: each requirement one string as pip or npm takes it, the
    index's URL, a directory of wheels (made absolute)."""
    spec: Dict[str, Any] = {}
    if requirements is not None:
        if isinstance(requirements, (str, bytes)) or not isinstance(requirements, Iterable):
            raise TypeError("requirements must be a list of strings, one requirement each "
                            "(['requests==2.31.0']), not %s" % type(requirements).__name__)
        reqs = list(requirements)
        for r in reqs:
            if not isinstance(r, str):
                raise TypeError("requirements: each one is a str, not %r" % (r,))
        spec["requirements"] = reqs
    index: Dict[str, str] = {}
    if index_url is not None:
        if not isinstance(index_url, str):
            raise TypeError("index_url must be a str (the package index's URL)")
        index["url"] = index_url
    if find_links is not None:
        index["find_links"] = os.path.abspath(os.fspath(find_links))
    if index:
        spec["index"] = index
    return spec


class _Invocation:
    """One run being prepared: the spec, the staging directory of `files=`, where the
    files out go. cleanup() removes what it made (but the collect directory a Result owns)."""

    def __init__(self, code: Optional[str], script: Optional[PathLike], language: Optional[str],
                 files: Union[Mapping[str, FileContent], Iterable[PathLike], None],
                 args: Iterable[str], stdin: StdinArg,
                 env: Optional[Mapping[str, str]], limits: Optional[Mapping[str, Any]],
                 timeout: Optional[float], workspace: Optional[PathLike],
                 collect: Union[PathLike, bool, None],
                 options: Optional[Mapping[str, Any]], streaming: bool = False, *,
                 requirements: Optional[Iterable[str]] = None, index_url: Optional[str] = None,
                 find_links: Optional[PathLike] = None) -> None:
        self.streaming = streaming
        #: a stream for the script's stdin: our own duplicate of it, passed to agentbox as
        #: this fd (spec stdin_fd), closed by cleanup()
        self.stdin_fd: Optional[int] = None
        self.staging: Optional[str] = None
        self.owned: Optional[str] = None
        self._owned_fin: Optional[weakref.finalize] = None
        self._staging_fin: Optional[weakref.finalize] = None
        self.files_dir: Optional[str] = None
        try:
            self.spec = self._build(code, script, language, files, args, stdin, env, limits,
                                    timeout, workspace, collect, options,
                                    requirements_spec(requirements, index_url, find_links))
        except BaseException:
            self.cleanup(True)
            raise

    @staticmethod
    def _stream_fd(stdin: StdinArg) -> Optional[int]:
        """The fd of a stream given as stdin (an int, or a file object with a real fileno())."""
        if isinstance(stdin, bool):
            raise TypeError("stdin must be str, bytes, a path, an fd or a file object")
        if isinstance(stdin, int):
            return stdin
        fileno = getattr(stdin, "fileno", None)
        if fileno is None or isinstance(stdin, (str, bytes, bytearray)) or hasattr(stdin,
                                                                                 "__fspath__"):
            return None
        try:
            return int(fileno())
        except (OSError, ValueError):  # io.BytesIO: io.UnsupportedOperation
            return None

    def _stage(self) -> str:
        if self.staging is None:
            self.staging = tempfile.mkdtemp(prefix="agentbox-bwrap-in-")
            self._staging_fin = weakref.finalize(self, _rm, self.staging)  # as _owned_fin
            os.chmod(self.staging, 0o711)
        return self.staging

    def _build(self, code: Optional[str], script: Optional[PathLike], language: Optional[str],
               files: Union[Mapping[str, FileContent], Iterable[PathLike], None],
               args: Iterable[str], stdin: StdinArg,
               env: Optional[Mapping[str, str]], limits: Optional[Mapping[str, Any]],
               timeout: Optional[float], workspace: Optional[PathLike],
               collect: Union[PathLike, bool, None], options: Optional[Mapping[str, Any]],
               reqs: Mapping[str, Any]) -> Dict[str, Any]:
        if (code is None) == (script is None):
            raise TypeError("run() needs exactly one of code and script")
        spec: Dict[str, Any] = {"spec_version": 1, "quiet": not self.streaming, "rm": True}
        if code is not None:
            if not isinstance(code, str):
                raise TypeError("code must be a str")
            spec["code"] = code
            if language is None and not code.startswith("#!"):
                language = "python"
        elif script is not None:
            spec["script"] = os.path.abspath(os.fspath(script))
        if language is not None:
            if language not in ("python", "node"):
                raise ValueError("language must be 'python' or 'node', not %r" % (language,))
            spec["language"] = language
        if isinstance(args, (str, bytes)):
            raise TypeError("args must be a sequence of strings, not one string")
        args = [str(a) for a in args]
        if args:
            spec["args"] = args
        fd = self._stream_fd(stdin)
        if fd is not None:
            # a stream: agentbox reads it as the script does (issue 25); a duplicate of ours
            # above 2, so that it cannot be the spec's pipe on agentbox's stdin
            import fcntl

            self.stdin_fd = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
            spec["stdin_fd"] = self.stdin_fd
        elif isinstance(stdin, str):
            spec["stdin_data"] = stdin
        elif isinstance(stdin, (bytes, bytearray)):
            p = os.path.join(self._stage(), ".stdin")
            with open(p, "wb") as f:
                f.write(stdin)
            spec["stdin"] = p
        elif hasattr(stdin, "read"):  # a file object without an fd (io.BytesIO): its content
            data = stdin.read()  # type: ignore[union-attr]
            p = os.path.join(self._stage(), ".stdin")
            with open(p, "wb") as f:
                f.write(data.encode("utf-8") if isinstance(data, str) else data)
            spec["stdin"] = p
        elif stdin is not None:
            spec["stdin"] = os.path.abspath(os.fspath(stdin))  # type: ignore[arg-type]
        self._common(spec, env, limits, timeout, files, workspace, collect)
        spec.update(reqs)
        if options:
            spec.update(options)
        return spec

    def _common(self, spec: Dict[str, Any], env: Optional[Mapping[str, str]],
                limits: Optional[Mapping[str, Any]], timeout: Optional[float],
                files: Union[Mapping[str, FileContent], Iterable[PathLike], None],
                workspace: Optional[PathLike], collect: Union[PathLike, bool, None]) -> None:
        """What a run's and a session's specs share: env, limits, inputs, where files go."""
        if env:
            spec["env"] = {str(k): str(v) for k, v in env.items()}
        lim = {str(k).replace("_", "-"): v for k, v in (limits or {}).items()}
        if timeout is not None:
            lim["timeout"] = timeout
        if lim:
            spec["limits"] = lim
        if files is not None:
            spec["inputs"] = self._inputs(files)
        if workspace is not None:
            spec["workspace"] = os.path.abspath(os.fspath(workspace))
            self.files_dir = spec["workspace"]
        if collect is True:
            raise TypeError("collect is a directory, or False for no files out")
        if collect is not None and collect is not False:
            spec["collect"] = os.path.abspath(os.fspath(collect))
            self.files_dir = spec["collect"]
        elif workspace is None and collect is None:
            # the files out: collected into a directory the Result owns (removed by close()
            # or when the Result goes away), no run directory kept
            self.owned = tempfile.mkdtemp(prefix="agentbox-bwrap-out-")
            # removed with this invocation or at exit, unless a Result takes it over: a
            # session never closed has no Result, and agentbox would fill the directory
            # after this program has gone
            self._owned_fin = weakref.finalize(self, _rm, self.owned)
            spec["collect"] = self.owned
            self.files_dir = self.owned

    def _inputs(self, files: Union[Mapping[str, FileContent], Iterable[PathLike]]) -> List[str]:
        if isinstance(files, (str, bytes)) or hasattr(files, "__fspath__"):
            raise TypeError("files must be a mapping {name: content} or a list of paths")
        if not isinstance(files, Mapping):
            return [os.path.abspath(os.fspath(p)) for p in files]
        stage = os.path.join(self._stage(), "files")
        os.makedirs(stage, exist_ok=True)
        for name, content in files.items():
            parts = [p for p in str(name).split("/") if p not in ("", ".")]
            if not parts or ".." in parts or str(name).startswith("/"):
                raise ValueError("files: %r is not a relative path" % (name,))
            dest = os.path.join(stage, *parts)
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            if isinstance(content, str):
                with open(dest, "w", encoding="utf-8") as f:
                    f.write(content)
            elif isinstance(content, (bytes, bytearray, memoryview)):
                with open(dest, "wb") as f:
                    f.write(content)
            elif os.path.isdir(os.fspath(content)):
                shutil.copytree(os.fspath(content), dest, symlinks=True)
            else:
                shutil.copyfile(os.fspath(content), dest, follow_symlinks=False)
        for dirpath, dirnames, filenames in os.walk(stage):
            os.chmod(dirpath, 0o755)
            for fn in filenames:
                os.chmod(os.path.join(dirpath, fn), 0o644)
        return [os.path.join(stage, n) for n in sorted(os.listdir(stage))]

    def argv(self, path: str, report_fd: int) -> List[str]:
        return [path, "run", "--spec", "-", "--report-fd", str(report_fd)]

    def spec_bytes(self) -> bytes:
        return json.dumps(self.spec).encode("utf-8")

    def pass_fds(self, report_fd: int) -> Tuple[int, ...]:
        return (report_fd,) if self.stdin_fd is None else (report_fd, self.stdin_fd)

    def cleanup(self, everything: bool) -> None:
        if self.stdin_fd is not None:
            os.close(self.stdin_fd)
            self.stdin_fd = None
        if self._staging_fin is not None:
            self._staging_fin()
            self._staging_fin = None
            self.staging = None
        if everything:
            owned = self.take_owned()
            if owned:
                _rm(owned)

    def take_owned(self) -> Optional[str]:
        """The client's temporary collect directory, no longer removed by this invocation."""
        owned, self.owned = self.owned, None
        fin = self._owned_fin
        if fin is not None:
            fin.detach()
            self._owned_fin = None
        return owned

    def finish(self, report: bytes, stderr: bytes, returncode: int) -> Result:
        """The Result, or the exception agentbox's outcome calls for."""
        if not report.strip():
            self.cleanup(True)
            lines = [ln for ln in stderr.decode("utf-8", "replace").splitlines()
                     if ln.startswith("agentbox:")]
            msg = lines[-1][len("agentbox: "):] if lines else (
                "agentbox exited with status %d and wrote no report" % returncode)
            fix = None
            m = re.match(r"^(.*) \(fix: (.*)\)$", msg)
            if m:
                msg, fix = m.group(1), m.group(2)
            raise AgentboxError(msg, fix)
        try:
            rep = json.loads(report)
        except ValueError as e:
            self.cleanup(True)
            raise AgentboxError("agentbox wrote a report that is not JSON: %s" % e) from None
        if rep.get("schema_version") not in SCHEMA_VERSIONS:
            self.cleanup(True)
            raise IncompatibleAgentbox(
                "the report has schema_version %r; agentbox-bwrap %s reads %s"
                % (rep.get("schema_version"), __version__, SCHEMA_VERSIONS),
                "use the client from the same agentbox release as the binary")
        res = parse_report(rep)
        if res.status in (Status.SETUP_ERROR, Status.USAGE_ERROR):
            self.cleanup(True)
            cls = UsageError if res.status is Status.USAGE_ERROR else SetupError
            raise cls(res.message or "agentbox refused the run", res.fix, res)
        res.files_dir = self.files_dir or (res.workspace if res.run_dir_kept else None)
        owned = self.take_owned()
        if owned:
            _own_dir(res, owned, _rm)
        return res


# agentbox's own lines on its stderr ("agentbox: warning: ...", its error line) come after
# the script's relayed output, once the run has ended: they are the stream's last lines. With
# on_stderr, the output goes out as it comes, but a line that starts like one of agentbox's is
# held, with the ones like it right after, until a line that does not follows (then they were
# the script's: they go out, in order) or the run ends (then the lines the report accounts for
# are dropped from their end, the rest goes out). The script's stderr never waits for more
# than its own next line.
_HELD = ("agentbox: ", "Try 'agentbox ")


class _StderrFilter:
    def __init__(self, emit: Callback) -> None:
        self.emit = emit
        self.line = ""  # the start of the current line, while it could still be agentbox's
        self.mode = "start"  # "start" of a line, "pass" (the rest of a line that is not)
        self.held = ""  # whole lines like agentbox's, not yet known to be the script's

    def push(self, text: str) -> None:
        i = 0
        while i < len(text):
            nl = text.find("\n", i)
            end = len(text) if nl < 0 else nl + 1
            piece, i = text[i:end], end
            if self.mode == "pass":
                self.emit(piece)
                if piece.endswith("\n"):
                    self.mode = "start"
                continue
            self.line += piece
            done = self.line.endswith("\n")
            if self.line.startswith(_HELD):
                if done:  # held until what follows tells whose it is
                    self.held, self.line = self.held + self.line, ""
                continue
            if not done and any(h.startswith(self.line) for h in _HELD):
                continue  # too short to tell
            self.emit(self.held + self.line)
            self.held, self.line, self.mode = "", "", "start" if done else "pass"

    def end(self, ours: Optional[str]) -> None:
        rest = self.held + self.line
        if ours and rest.endswith(ours):
            rest = rest[:len(rest) - len(ours)]
        if rest:
            self.emit(rest)


def _own_lines(rep: Mapping[str, Any]) -> str:
    """What agentbox printed on its stderr for this report after the script's output: each
    warning, but for the defaults this host cannot apply, which get one short note line."""
    defaults = [str(d) for d in rep.get("defaults_not_applied") or []]

    def of_default(w: str) -> bool:
        return any(w.startswith("default %s " % d) for d in defaults)

    lines = "".join("agentbox: warning: %s\n" % w for w in rep.get("warnings") or []
                    if not of_default(str(w)))
    if defaults:
        lines += ("agentbox: note: defaults this host cannot fully apply: %s "
                  "(agentbox doctor explains)\n" % ", ".join(defaults))
    return lines


class _Streams:
    """The live relay, for on_stdout / on_stderr: UTF-8 decoded as it comes."""

    def __init__(self, on_stdout: Optional[Callback], on_stderr: Optional[Callback]) -> None:
        self.on_stdout = on_stdout
        self.out = codecs.getincrementaldecoder("utf-8")("replace")
        self.err = codecs.getincrementaldecoder("utf-8")("replace")
        self.filter = _StderrFilter(on_stderr) if on_stderr else None

    def stdout(self, chunk: bytes, final: bool = False) -> None:
        text = self.out.decode(chunk, final)
        if text and self.on_stdout:
            self.on_stdout(text)

    def stderr(self, chunk: bytes, final: bool = False) -> None:
        text = self.err.decode(chunk, final)
        if text and self.filter:
            self.filter.push(text)

    def end(self, report: bytes) -> None:
        self.stdout(b"", True)
        self.stderr(b"", True)
        if self.filter:
            try:
                rep = json.loads(report)
            except ValueError:
                rep = None
            ours = None
            if isinstance(rep, dict) and rep.get("status") not in ("setup_error", "usage_error"):
                ours = _own_lines(rep)
            self.filter.end(ours)


def _stop(proc: "subprocess.Popen[bytes]") -> None:
    if proc.poll() is None:
        try:
            proc.send_signal(signal.SIGTERM)
        except ProcessLookupError:
            pass


def _pump(proc: "subprocess.Popen[bytes]", report_fd: int, data: bytes,
          deadline: Optional[float] = None,
          streams: Optional[_Streams] = None) -> Tuple[bytes, bytes]:
    """Feed the spec, read the report, stderr (and stdout) to their ends (until `deadline`)."""
    import time

    report, err = bytearray(), bytearray()
    with selectors.DefaultSelector() as sel:
        if proc.stdin is not None and not proc.stdin.closed:
            if data:
                os.set_blocking(proc.stdin.fileno(), False)
                sel.register(proc.stdin, selectors.EVENT_WRITE)
            else:
                proc.stdin.close()
        for f in (proc.stderr, proc.stdout):
            if f is not None and not f.closed:
                sel.register(f, selectors.EVENT_READ)
        sel.register(report_fd, selectors.EVENT_READ)
        out_fd = proc.stdout.fileno() if proc.stdout is not None else -1
        view, off = memoryview(data), 0
        while sel.get_map():
            wait = None if deadline is None else deadline - time.monotonic()
            if wait is not None and wait <= 0:
                break
            for key, _ in sel.select(wait):
                if proc.stdin is not None and key.fileobj is proc.stdin:
                    try:
                        off += os.write(proc.stdin.fileno(), view[off:off + 65536])
                    except BlockingIOError:
                        continue
                    except (BrokenPipeError, ConnectionResetError):
                        off = len(data)
                    if off >= len(data):
                        sel.unregister(proc.stdin)
                        proc.stdin.close()
                    continue
                fd = key.fd
                chunk = os.read(fd, 65536)
                if not chunk:
                    sel.unregister(key.fileobj)
                    continue
                if fd == report_fd:
                    report.extend(chunk)
                elif fd == out_fd:
                    if streams:
                        streams.stdout(chunk)
                else:
                    err.extend(chunk)
                    if streams:
                        streams.stderr(chunk)
    return bytes(report), bytes(err)


def run_invocation(inv: _Invocation, path: str, streams: Optional[_Streams] = None) -> Result:
    """Runs what `inv` describes with the agentbox at `path` (binary_info() checked it)."""
    import time

    rfd, wfd = os.pipe()
    try:
        try:
            proc = subprocess.Popen(inv.argv(path, wfd), stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE if streams else subprocess.DEVNULL,
                                    stderr=subprocess.PIPE, pass_fds=inv.pass_fds(wfd))
        finally:
            os.close(wfd)
        try:
            report, err = _pump(proc, rfd, inv.spec_bytes(), None, streams)
            rc = proc.wait()
            if streams:
                streams.end(report)
        except BaseException:
            # KeyboardInterrupt, or anything else: the run stops and is reaped, not orphaned
            _stop(proc)
            try:
                _pump(proc, rfd, b"", time.monotonic() + STOP_GRACE_S)
                proc.wait(timeout=max(0.1, STOP_GRACE_S))
            except BaseException:
                proc.kill()
                proc.wait()
            raise
        finally:
            for f in (proc.stdin, proc.stderr, proc.stdout):
                if f is not None and not f.closed:
                    f.close()
    except BaseException:
        inv.cleanup(True)
        raise
    finally:
        os.close(rfd)
        inv.cleanup(False)
    return inv.finish(report, err, rc)


async def run_invocation_async(inv: _Invocation, path: str,
                               streams: Optional[_Streams] = None) -> Result:
    loop = asyncio.get_running_loop()
    try:
        rfd, wfd = os.pipe()
        try:
            proc = await asyncio.create_subprocess_exec(
                *inv.argv(path, wfd), stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE if streams else asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.PIPE,
                pass_fds=inv.pass_fds(wfd))
        except BaseException:
            os.close(rfd)
            raise
        finally:
            os.close(wfd)
        reader = asyncio.StreamReader()
        transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(rfd, "rb", 0))

        async def feed() -> None:
            assert proc.stdin is not None
            try:
                proc.stdin.write(inv.spec_bytes())
                await proc.stdin.drain()
            except (BrokenPipeError, ConnectionResetError):
                pass
            finally:
                proc.stdin.close()

        async def read_err() -> bytes:
            assert proc.stderr is not None
            buf = bytearray()
            while True:
                chunk = await proc.stderr.read(65536)
                if not chunk:
                    return bytes(buf)
                buf.extend(chunk)
                if streams:
                    streams.stderr(chunk)

        async def read_out() -> None:
            while proc.stdout is not None and streams:
                chunk = await proc.stdout.read(65536)
                if not chunk:
                    return
                streams.stdout(chunk)

        work = asyncio.ensure_future(
            asyncio.gather(feed(), reader.read(), read_err(), read_out(), proc.wait()))
        try:
            _, report, err, _, rc = await asyncio.shield(work)
            if streams:
                streams.end(report)
        except BaseException:
            # the task was cancelled (or reading failed): agentbox stops the run (reported
            # `interrupted`), and the task ends only when every process of the run is gone
            if proc.returncode is None:
                try:
                    proc.send_signal(signal.SIGTERM)
                except ProcessLookupError:
                    pass
            try:
                await asyncio.wait_for(asyncio.shield(work), STOP_GRACE_S)
            except BaseException:
                if proc.returncode is None:
                    proc.kill()
                await asyncio.shield(proc.wait())
            raise
        finally:
            transport.close()
    except BaseException:
        inv.cleanup(True)
        raise
    finally:
        inv.cleanup(False)
    return inv.finish(report, err, rc)

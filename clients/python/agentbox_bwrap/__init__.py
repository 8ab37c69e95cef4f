"""agentbox-bwrap: run untrusted Python and Node code in agentbox's sandbox.

    import agentbox_bwrap as agentbox
    result = agentbox.run("print(6 * 7)")
    print(result.status, result.stdout.text)

Each run is one `agentbox run --spec - --report-fd N` of the installed agentbox binary
(`binary=`, else $AGENTBOX, else `agentbox` on PATH); the Result is its JSON report.
A Session (AsyncSession for asyncio) keeps one sandbox and interpreter alive for code run
cell by cell: one `agentbox session --jsonl`.
"""

from __future__ import annotations

__version__ = "0.1.0"

import os
from typing import IO, Any, Iterable, Mapping, Optional, Union

from ._report import (
    FILE_ORIGINS,
    LIMIT_NAMES,
    NETWORK_MODES,
    PROTECTION_NAMES,
    SCHEMA_VERSIONS,
    Collected,
    Environment,
    EvictedEnv,
    PreRun,
    SessionSummary,
    FileEntry,
    InputEntry,
    Limit,
    NetworkProxy,
    Protection,
    Result,
    SkippedEntry,
    Status,
    Stream,
    StreamFile,
    Usage,
    WalkSummary,
    parse_report,
)
from ._run import (
    BINARY_ENV,
    BinaryInfo,
    Callback,
    FileContent,
    PathLike,
    _Invocation,
    _Streams,
    binary_info,
    find_binary,
    run_invocation,
    run_invocation_async,
)
from ._session import (
    CELL_SCHEMAS,
    AsyncSession,
    Cell,
    CellError,
    CellImage,
    CellStatus,
    Session,
    parse_cell,
)
from .errors import (
    AgentboxError,
    AgentboxNotFound,
    CellFailed,
    IncompatibleAgentbox,
    RunFailed,
    SessionEnded,
    SetupError,
    UsageError,
)

__all__ = [
    "run", "run_async", "binary_info", "find_binary", "parse_report", "BinaryInfo", "Result",
    "Status", "Stream", "StreamFile", "FileEntry", "WalkSummary", "SkippedEntry", "InputEntry",
    "Collected", "Environment", "EvictedEnv", "PreRun", "SessionSummary", "NetworkProxy", "Limit", "Usage", "Protection", "AgentboxError",
    "AgentboxNotFound", "IncompatibleAgentbox", "SetupError", "UsageError", "RunFailed",
    "BINARY_ENV", "FILE_ORIGINS", "LIMIT_NAMES", "NETWORK_MODES", "PROTECTION_NAMES",
    "SCHEMA_VERSIONS", "__version__", "Session", "AsyncSession", "Cell", "CellStatus",
    "CellError", "CellImage", "SessionEnded", "CellFailed", "parse_cell", "CELL_SCHEMAS",
]

Files = Union[Mapping[str, FileContent], Iterable[PathLike], None]
#: str or bytes (given inline), a path (a file's content), or a stream: an open fd (int) or a
#: file object with a fileno() (a pipe, a file, sys.stdin), read as the script reads it
Stdin = Union[str, bytes, "os.PathLike[str]", int, IO[Any], None]


def run(code: Optional[str] = None, *, script: Optional[PathLike] = None,
        language: Optional[str] = None, files: Files = None, args: Iterable[str] = (),
        stdin: Stdin = None, env: Optional[Mapping[str, str]] = None,
        limits: Optional[Mapping[str, Any]] = None, timeout: Optional[float] = None,
        workspace: Optional[PathLike] = None, collect: Union[PathLike, bool, None] = None,
        binary: Optional[PathLike] = None, options: Optional[Mapping[str, Any]] = None,
        on_stdout: Optional[Callback] = None, on_stderr: Optional[Callback] = None,
        requirements: Optional[Iterable[str]] = None, index_url: Optional[str] = None,
        find_links: Optional[PathLike] = None) -> Result:
    """Run `code` (or the file `script`) in a fresh sandbox and return its report.

    language: "python" (the default for `code`) or "node"; for a script, by its extension.
    files:    {name: str | bytes | path} copied into the workspace as `name`, or a list of
              host paths copied in under their own names.
    args:     the script's arguments.
    stdin:    its stdin: str or bytes, a path (the file's content), or a stream to read as
              the script reads it (an open fd, or a file object with a fileno(): a pipe,
              sys.stdin); a script that does not read it is never held up by it.
    env:      variables added to the sandbox's clean environment.
    limits:   {"memory": "256M", "cpus": 1, "cpu_time": 10, ...} (docs/spec.md; "_" = "-").
    timeout:  the wall-clock limit in seconds (status "timeout" when it hits; default 60).
    workspace: work in this directory in place. collect: copy the files left here.
              Without either, the files left are collected into a temporary directory the
              Result owns: `result.read(path)`; removed by `result.close()` or with it.
              collect=False: no files out (faster with many files; `files` still lists
              them with their sha256).
    binary:   the agentbox binary (default: $AGENTBOX, else `agentbox` on PATH).
    options:  any other spec keys (`without`, `seccomp_policy`, `venv`, `python`...).
    on_stdout, on_stderr: called with the script's output (str) as it comes (the live
              relay; agentbox's own warning lines are left out). Without them the run is
              quiet; the output is in the report either way.
    requirements: packages the script needs (docs/requirements.md), one string each:
              pip requirement specifiers for Python (["requests==2.31.0"]), NAME@RANGE for
              Node (["is-number@7.0.0"]). agentbox installs them before the run, in its
              install sandbox (only the package index reachable), into a cached environment
              the run then uses read-only and offline; `result.pre_run` says whether it was
              "cached" or "installed", how long it took, and the versions it holds.
    index_url: the package index for `requirements` (spec `index.url`; default the
              operator's, else PyPI / npm).
    find_links: Python: a directory of wheels to install from (spec `index.find_links`);
              the sandbox's user must be able to read it.

    The script failing, or a limit stopping it, is a Result (`result.ok` is False;
    `result.raise_for_status()` raises RunFailed). agentbox refusing the run raises
    SetupError / UsageError (with `message` and `fix`). KeyboardInterrupt stops the run.
    """
    path = binary_info(binary).path
    streams = _Streams(on_stdout, on_stderr) if on_stdout or on_stderr else None
    inv = _Invocation(code, script, language, files, args, stdin, env, limits, timeout,
                      workspace, collect, options, streams is not None,
                      requirements=requirements, index_url=index_url, find_links=find_links)
    return run_invocation(inv, path, streams)


async def run_async(code: Optional[str] = None, *, script: Optional[PathLike] = None,
                    language: Optional[str] = None, files: Files = None,
                    args: Iterable[str] = (), stdin: Stdin = None,
                    env: Optional[Mapping[str, str]] = None,
                    limits: Optional[Mapping[str, Any]] = None, timeout: Optional[float] = None,
                    workspace: Optional[PathLike] = None,
                    collect: Union[PathLike, bool, None] = None,
                    binary: Optional[PathLike] = None,
                    options: Optional[Mapping[str, Any]] = None,
                    on_stdout: Optional[Callback] = None,
                    on_stderr: Optional[Callback] = None,
                    requirements: Optional[Iterable[str]] = None,
                    index_url: Optional[str] = None,
                    find_links: Optional[PathLike] = None) -> Result:
    """run() for asyncio: many runs at once from one event loop. Cancelling the task stops
    the run (agentbox kills the sandbox and reaps it) before CancelledError propagates."""
    import asyncio

    path = (await asyncio.get_running_loop().run_in_executor(None, binary_info, binary)).path
    streams = _Streams(on_stdout, on_stderr) if on_stdout or on_stderr else None
    inv = _Invocation(code, script, language, files, args, stdin, env, limits, timeout,
                      workspace, collect, options, streams is not None,
                      requirements=requirements, index_url=index_url, find_links=find_links)
    return await run_invocation_async(inv, path, streams)

"""The report of a run as dataclasses, key for key (docs/report-schema.md, schema version 1).

Field names are the report's keys. A key the schema may leave out is a field with a default
(None, or an empty list); a key that may be null is Optional. Keys a newer agentbox adds
within schema version 1 are kept in `Result.raw` and never break parsing.
tests/test_types.py checks every class here against schemas/report.schema.json.
"""

from __future__ import annotations

import builtins
import dataclasses
import enum
import os
import weakref
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

from .errors import RunFailed

#: The report schema versions this client reads.
SCHEMA_VERSIONS: Tuple[int, ...] = (1,)

#: The keys of `Result.limits` (one per limit agentbox plans; `cpu-time` only when set).
LIMIT_NAMES: Tuple[str, ...] = (
    "timeout", "memory", "pids", "cpus", "cpu-time", "disk", "inodes", "tmp-size",
    "file-size", "nofile", "output-limit",
)

#: The keys of `Result.sandbox` (every protection, or none when the run stopped before).
PROTECTION_NAMES: Tuple[str, ...] = (
    "namespaces", "network", "readonly_base", "writable", "new_session", "die_with_parent",
    "cap_drop_all", "clearenv", "disable_userns", "seccomp", "landlock", "fresh_keyring",
    "no_host_root", "pid1_nondumpable", "cgroup", "caller_quotas",
)

#: The values of `FileEntry.origin`: where an entry of the workspace came from, against the
#: listing taken before the run (docs/report-schema.md, "Where each entry came from").
FILE_ORIGINS: Tuple[str, ...] = ("script", "created", "modified", "unchanged", "unknown")

#: The values of `Result.sandbox["network"].mode`.
NETWORK_MODES: Tuple[str, ...] = ("loopback", "strict", "proxy")


class Status(str, enum.Enum):
    """How the run ended (the report's `status`)."""

    EXITED = "exited"
    SIGNALED = "signaled"
    TIMEOUT = "timeout"
    OOM = "oom"
    PIDS_LIMIT = "pids_limit"
    CPU_TIME_LIMIT = "cpu_time_limit"
    DISK_LIMIT = "disk_limit"
    FILE_SIZE_LIMIT = "file_size_limit"
    OUTPUT_LIMIT = "output_limit"
    EXEC_FAILED = "exec_failed"
    INTERRUPTED = "interrupted"
    SETUP_ERROR = "setup_error"
    USAGE_ERROR = "usage_error"

    def __str__(self) -> str:
        return self.value


@dataclass
class StreamFile:
    """RUN_DIR/stdout or RUN_DIR/stderr: every captured byte of a stream longer than the
    report holds inline (kept only with the run directory: not with `rm`)."""

    path: str
    bytes: int
    sha256: str


@dataclass
class Stream:
    """The script's stdout or stderr as agentbox captured it (up to the output limit).

    `text` holds all of it, or (`elided_bytes` > 0, a stream longer than `inline_output`)
    its first `head_bytes`, one marker line of agentbox's and its last `tail_bytes`; then
    `file` names the file with every captured byte, when the run directory was kept. The
    client's runs are `rm` runs (no run directory): pass `options={"rm": False}` to keep it
    (`agentbox rm` / `agentbox gc` remove it), or raise `options={"inline_output": ...}`.
    """

    bytes: int
    captured_bytes: int
    truncated: bool
    text: str
    text_lossy: bool
    relay_dropped_bytes: Optional[int]
    head_bytes: int
    tail_bytes: int
    elided_bytes: int
    #: bytes kept nowhere: past the output limit the run goes on by default (`truncated`),
    #: `text` ends with the stream's own last bytes, and what lay between is dropped
    dropped_bytes: int
    file: Optional[StreamFile]

    def __str__(self) -> str:
        return self.text

    @property
    def elided(self) -> bool:
        """`text` is an excerpt: the middle of the stream is not in the report."""
        return bool(self.elided_bytes)

    def read(self) -> builtins.bytes:
        """Every captured byte: from `file` when the report holds an excerpt (its size and
        sha256 checked), else `text` as UTF-8 (where `text_lossy`, with the U+FFFD agentbox
        put in). FileNotFoundError when the middle was elided and not kept (see `warnings`)."""
        if self.file is None:
            if self.elided:
                raise FileNotFoundError(
                    "%d bytes of this stream were elided from the report and not kept (no run "
                    "directory: run with options={'rm': False}, or raise "
                    "options={'inline_output': ...})" % self.elided_bytes)
            return self.text.encode("utf-8")
        import hashlib

        fd = os.open(self.file.path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        with os.fdopen(fd, "rb") as f:
            data = f.read()
        if len(data) != self.file.bytes or hashlib.sha256(data).hexdigest() != self.file.sha256:
            raise ValueError("%s: not the %d bytes the report lists (sha256 %s)"
                             % (self.file.path, self.file.bytes, self.file.sha256))
        return data

    def read_text(self, encoding: str = "utf-8", errors: str = "replace") -> str:
        """read(), decoded (invalid bytes replaced, as in `text`)."""
        if self.file is None and not self.elided:
            return self.text
        return self.read().decode(encoding, errors)


@dataclass
class FileEntry:
    """One entry the workspace held after the run. `path` escapes hostile bytes as \\xNN."""

    path: str
    type: str
    size: int
    blocks_bytes: int
    mode: str
    collected: bool
    sha256: Optional[str] = None
    link_target: Optional[str] = None
    flags: List[str] = field(default_factory=list)
    reason: Optional[str] = None
    #: one of FILE_ORIGINS (None from an agentbox before issue 15)
    origin: Optional[str] = None
    #: "metadata" when origin was decided by inode, size, mtime and ctime, not by content
    origin_by: Optional[str] = None


@dataclass
class WalkSummary:
    """What the post-run walk of the workspace skipped and why (`files_summary`)."""

    listed: int
    entries: int
    unlisted: int
    truncated: bool
    truncated_by: List[str]
    list_bytes: int
    hashed_bytes: int
    hashes_reused: int
    unhashed: int
    stripped: int
    strip_failed: int
    walk_ms: int
    #: `files_summary` only: the listing of the workspace taken before the run, which
    #: `FileEntry.origin` is decided against
    pre_run: Optional["WalkSummary"] = None


@dataclass
class SkippedEntry:
    path: str
    reason: str


@dataclass
class InputEntry:
    """What one input (a file of `files=`) became: a file, a directory, or a refusal."""

    path: str
    type: str
    bytes: int
    entries: Optional[int] = None
    skipped: Optional[List[SkippedEntry]] = None
    truncated: Optional[bool] = None


@dataclass
class Collected:
    """With `collect=DIR`: what was copied there."""

    dir: str
    bytes: int
    skipped_count: int
    files: List[FileEntry]
    summary: WalkSummary


@dataclass
class Environment:
    """`agentbox prepare` only: what was copied into the cache."""

    bytes: int
    entries: int
    skipped_count: int
    skipped: List[SkippedEntry]
    truncated: bool


@dataclass
class NetworkProxy:
    """`agentbox prepare` only: the registry proxy."""

    listen: str
    own_network_namespace: bool
    allowed_hosts: List[str]
    connections_allowed: Optional[int]
    connections_refused: Optional[int]
    connections_failed: Optional[int]
    refused: List[str]
    proxy_landlock_abi: int


@dataclass
class EvictedEnv:
    """An environment the cache's bound removed (docs/requirements.md)."""

    env: str
    bytes: int


@dataclass
class PreRun:
    """Packages on request (docs/requirements.md): how the run's environment was found."""

    requirements: List[str]
    #: "cached" or "installed"
    environment: str
    ms: int
    env_dir: str
    #: every package in the environment: name -> version
    resolved: Dict[str, str] = field(metadata={"open": True})
    index_url: Optional[str] = None
    find_links: Optional[str] = None
    evicted: Optional[List[EvictedEnv]] = None


@dataclass
class SessionSummary:
    """A session's report at its close (docs/sessions.md)."""

    id: str
    language: str
    state: str
    cells: int
    version: Optional[str] = None
    idle_timeout_ms: Optional[int] = None
    max_lifetime_ms: Optional[int] = None
    ended: Optional[str] = None
    report_status: Optional[str] = None
    restarted: Optional[str] = None


@dataclass
class Limit:
    """One limit: asked for, in force, and how."""

    requested: Optional[int]
    explicit: bool
    enforced: Optional[int]
    mechanism: Optional[str]
    whole_run: bool
    note: Optional[str] = None


@dataclass
class Usage:
    """What the run used (None: this host cannot measure it)."""

    memory_peak_bytes: Optional[int]
    cpu_ms: Optional[int]
    tasks_peak: Optional[int]
    workspace_bytes: Optional[int]
    workspace_entries: Optional[int]
    oom_kills: Optional[int]
    pids_refused: Optional[int]


@dataclass
class Protection:
    """One protection of the sandbox and whether it was in force."""

    enforced: bool
    detail: Optional[str] = None
    #: `sandbox["network"]` of `agentbox prepare` only: the registry proxy's refusals
    refused_connections: Optional[int] = None
    #: `sandbox["network"]` only: one of NETWORK_MODES
    mode: Optional[str] = None


def _client(default: Any = None) -> Any:
    """A field of the client's own, not a report key."""
    return field(default=default, repr=False, compare=False, metadata={"client": True})


@dataclass(eq=False)
class Result:
    """The report of one run. `ok`, `raise_for_status()` and `read(path)` on top."""

    schema_version: int
    agentbox_version: str
    status: Status
    exit_code: Optional[int]
    signal: Optional[int]
    signal_name: Optional[str]
    agentbox_exit: int
    message: Optional[str]
    fix: Optional[str]
    #: a common mistake the failure points at (a file or module next to the script on the
    #: host, which the sandbox does not see) and how to bring it in; None otherwise
    hint: Optional[str]
    limits_hit: List[str]
    started_unix_ms: Optional[int]
    wall_ms: Optional[int]
    cpu_ms: Optional[int]
    max_rss_kib: Optional[int]
    kill_to_reaped_ms: Optional[int]
    agentbox_max_rss_kib: Optional[int]
    agentbox_fds_left: Optional[int]
    run_id: Optional[str]
    warm: bool
    script: Optional[str]
    lang: Optional[str]
    interpreter: Optional[str]
    stdout: Stream
    stderr: Stream
    run_dir: Optional[str]
    run_dir_kept: bool
    workspace: Optional[str]
    files: List[FileEntry]
    limits: Dict[str, Limit] = field(metadata={"keys": LIMIT_NAMES})
    usage: Usage
    sandbox: Dict[str, Protection] = field(metadata={"keys": PROTECTION_NAMES})
    sandbox_host_uid: Optional[int]
    workspace_mode: Optional[str]
    warnings: List[str]
    #: defaults this host cannot apply as documented ("cpus", "pids", "hostname"), each with
    #: the entry of `warnings` that begins "default NAME "; `agentbox doctor` explains them
    defaults_not_applied: List[str]
    #: token files of a `workspace=` directory (its .npmrc...) the sandbox saw as an empty
    #: read-only file: the run could neither read nor change them
    hidden_files: List[str]
    files_summary: Optional[WalkSummary] = None
    inputs: Optional[List[InputEntry]] = None
    collected: Optional[Collected] = None
    environment: Optional[Environment] = None
    network_proxy: Optional[NetworkProxy] = None
    #: with requirements: how their environment was found or built
    pre_run: Optional[PreRun] = None
    #: a session's report at its close
    session: Optional[SessionSummary] = None
    #: the report as agentbox wrote it (keys a newer agentbox added are here too)
    raw: Dict[str, Any] = _client()
    #: where `read()` finds the files the script left (the collect directory or workspace)
    files_dir: Optional[str] = _client()

    @property
    def ok(self) -> bool:
        """The script exited on its own with status 0."""
        return self.status is Status.EXITED and self.exit_code == 0

    def files_with_origin(self, *origins: str) -> List[FileEntry]:
        """The entries of `files` whose `origin` is one of `origins` (FILE_ORIGINS)."""
        bad = set(origins) - set(FILE_ORIGINS)
        if bad:
            raise ValueError("no such origin: %s (one of %s)"
                             % (", ".join(sorted(bad)), ", ".join(FILE_ORIGINS)))
        return [f for f in self.files if f.origin in origins]

    @property
    def changed_files(self) -> List[FileEntry]:
        """What the run wrote: the entries of `files` it created or modified (not those of
        `unknown` origin, which a capped pre-run listing left undecided: see
        `files_with_origin`)."""
        return self.files_with_origin("created", "modified")

    def raise_for_status(self) -> "Result":
        """Raise RunFailed unless `ok`; returns the result so calls chain."""
        if not self.ok:
            raise RunFailed(self)
        return self

    def read(self, path: str) -> bytes:
        """The bytes of a regular file the script left, by its path in the workspace.
        Never follows a link the script made (a link, or a path through one, is refused)."""
        if not self.files_dir:
            raise FileNotFoundError(
                "%s: this run kept no files (collect/workspace; or the result was closed)" % path)
        return _read_beneath(self.files_dir, path)

    def read_text(self, path: str, encoding: str = "utf-8") -> str:
        return self.read(path).decode(encoding)

    def close(self) -> None:
        """Remove the temporary directory the client collected the files into (if it made
        one; a `collect=` or `workspace=` directory of yours is left alone)."""
        fin = _owned.pop(self, None)
        if fin is not None:
            fin()
        self.files_dir = None

    def __enter__(self) -> "Result":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


_owned: "weakref.WeakKeyDictionary[Result, weakref.finalize]" = weakref.WeakKeyDictionary()


def _own_dir(result: Result, path: str, remove: Any) -> None:
    """The result owns `path` (the client's temporary collect directory): removed by
    close(), or when the result is garbage collected, or at exit."""
    _owned[result] = weakref.finalize(result, remove, path)


def _read_beneath(root: str, path: str) -> bytes:
    parts = [p for p in path.replace("\\", "/").split("/") if p not in ("", ".")]
    if not parts or ".." in parts or path.startswith("/"):
        raise ValueError("%r: give a relative path inside the workspace" % path)
    flags = os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW
    fd = os.open(root, flags | os.O_DIRECTORY)
    try:
        for part in parts[:-1]:
            nfd = os.open(part, flags | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = nfd
        ffd = os.open(parts[-1], flags | os.O_NONBLOCK, dir_fd=fd)
    finally:
        os.close(fd)
    with os.fdopen(ffd, "rb") as f:
        import stat

        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise ValueError("%r is not a regular file" % path)
        return f.read()


# Parsing: the report's JSON → the classes above, by their type hints.

def _hints(cls: type) -> Dict[str, Any]:
    import typing

    return typing.get_type_hints(cls)


def _convert(hint: Any, value: Any) -> Any:
    import typing

    if value is None:
        return None
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is Union:
        non_none = [a for a in args if a is not type(None)]
        if len(non_none) == 1:
            return _convert(non_none[0], value)
        for a in non_none:  # skipped: a list of entries, or a reason
            o = typing.get_origin(a) or a
            if isinstance(value, o if isinstance(o, type) else object):
                return _convert(a, value)
        return value
    if origin in (list, List):
        return [_convert(args[0], v) for v in value]
    if origin in (dict, Dict):
        return {k: _convert(args[1], v) for k, v in value.items()}
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return hint(value)
    if dataclasses.is_dataclass(hint):
        return _from_dict(hint, value)
    return value


def _from_dict(cls: Any, data: Mapping[str, Any]) -> Any:
    hints = _hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.metadata.get("client"):
            continue
        if f.name in data:
            kwargs[f.name] = _convert(hints[f.name], data[f.name])
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            kwargs[f.name] = None  # a required key missing: keep going, say None
    return cls(**kwargs)


def parse_report(report: Mapping[str, Any]) -> Result:
    """A Result from a report (a dict of the JSON agentbox wrote)."""
    res: Result = _from_dict(Result, report)
    res.raw = dict(report)
    return res

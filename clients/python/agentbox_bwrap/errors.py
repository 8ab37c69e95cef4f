"""Exceptions. Every one agentbox itself raises carries `message` and `fix` (what went wrong,
and what to do about it), like agentbox's own error line and report."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Mapping, Optional

if TYPE_CHECKING:
    from ._report import Result
    from ._session import Cell


class AgentboxError(Exception):
    """agentbox could not run the script, or this client could not drive agentbox."""

    def __init__(self, message: str, fix: Optional[str] = None,
                 result: Optional["Result"] = None) -> None:
        super().__init__(message + (" (fix: %s)" % fix if fix else ""))
        self.message = message
        self.fix = fix
        #: the report, when agentbox wrote one
        self.result = result


class AgentboxNotFound(AgentboxError):
    """No agentbox binary where this client looked."""


class IncompatibleAgentbox(AgentboxError):
    """The agentbox binary writes a report schema this client does not know."""


class SetupError(AgentboxError):
    """agentbox failed or refused before the script ran (report status `setup_error`):
    bad input, or a protection or limit this host cannot apply. Nothing ran."""


class UsageError(SetupError):
    """The run described is invalid (report status `usage_error`): an unknown spec key, a
    limit that does not parse, a refused path. Nothing ran."""


class RunFailed(Exception):
    """raise_for_status(): the script did not exit 0 on its own (it failed, was killed, or
    a limit stopped it). `result` is the whole report."""

    def __init__(self, result: "Result") -> None:
        what = {
            "exited": "the script exited with status %s" % result.exit_code,
            "signaled": "the script died of signal %s" % (result.signal_name or result.signal),
        }.get(str(result.status), "the run ended with status %s" % result.status)
        if result.message:
            what += ": " + result.message
        super().__init__(what)
        self.result = result


class SessionEnded(AgentboxError):
    """The session ended (a crash, os._exit, an OOM kill, the idle timeout, its lifetime, or
    close()): its interpreter and state are gone. `reason` says how; `info` is the session's
    last info. `run(..., restart=True)` or `restart()` start a fresh interpreter instead."""

    def __init__(self, message: str, fix: Optional[str] = None,
                 info: Optional[Mapping[str, Any]] = None) -> None:
        super().__init__(message, fix)
        self.info: Dict[str, Any] = dict(info or {})
        ended = self.info.get("ended")
        #: how it ended, in agentbox's words
        self.reason: Optional[str] = str(ended) if ended is not None else None
        rs = self.info.get("report_status")
        #: the run report's status when the session's sandbox ended (exited, oom...)
        self.report_status: Optional[str] = str(rs) if rs is not None else None


class CellFailed(Exception):
    """Cell.raise_for_status(): the cell did not end `ok`. `cell` is the whole result."""

    def __init__(self, cell: "Cell") -> None:
        what = "cell %d ended %s" % (cell.id, cell.status)
        if cell.error is not None:
            what += ": %s" % cell.error
        elif cell.message:
            what += ": %s" % cell.message
        super().__init__(what)
        self.cell = cell

"""Shared fixtures: the real agentbox binary (AGENTBOX, set by tests/meson.build to the build
tree's), the repository root, and a check that no process of a run is left behind."""

import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SRCDIR = os.environ.get("AB_SRCDIR") or os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
# the package from this tree, not an installed copy
sys.path.insert(0, os.path.dirname(HERE))


def procs_with(token: str) -> list:
    """PIDs of processes whose command line holds `token` (a run left behind)."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                if token.encode() in f.read():
                    found.append(int(pid))
        except OSError:
            pass
    return found


@pytest.fixture(scope="session")
def srcdir() -> str:
    return SRCDIR


@pytest.fixture(scope="session")
def agentbox_bin() -> str:
    import agentbox_bwrap

    try:
        return agentbox_bwrap.find_binary()
    except agentbox_bwrap.AgentboxNotFound as e:
        pytest.skip("no agentbox binary: %s (set AGENTBOX, as tests/meson.build does)" % e)

"""The package is fully typed: mypy --strict for Python 3.9 finds nothing (where Debian's mypy
is installed; `apt-get install mypy`)."""

import os
import subprocess
import sys

import pytest

PKG = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_mypy_strict(tmp_path):
    pytest.importorskip("mypy", reason="mypy is not installed (apt-get install mypy)")
    p = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--python-version", "3.9",
                        "--cache-dir", str(tmp_path), "agentbox_bwrap"],
                       cwd=PKG, capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    assert os.path.exists(os.path.join(PKG, "agentbox_bwrap", "py.typed"))

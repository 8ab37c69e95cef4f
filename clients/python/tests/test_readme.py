"""The README's "From Python" blocks, exactly as written there: `pip install --no-index
./clients/python` into a fresh venv of Debian's python3, then the first block run as a file
must print what the README says; the agent-loop block's handler must answer a tool call."""

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import SRCDIR

DEBIAN_PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


def section(title: str) -> str:
    with open(os.path.join(SRCDIR, "README.md"), encoding="utf-8") as f:
        text = f.read()
    start = text.index("\n## %s\n" % title)
    end = text.find("\n## ", start + 1)
    return text[start:end if end > 0 else None]


def blocks(text: str, lang: str) -> list:
    return re.findall(r"^```%s\n(.*?)^```$" % lang, text, re.S | re.M)


@pytest.fixture(scope="module")
def venv(tmp_path_factory, agentbox_bin):
    if subprocess.run([DEBIAN_PYTHON, "-c", "import ensurepip"], capture_output=True).returncode:
        pytest.skip("%s has no venv/ensurepip (apt-get install python3-venv)" % DEBIAN_PYTHON)
    d = tmp_path_factory.mktemp("readme")
    v = d / "venv"
    subprocess.run([DEBIAN_PYTHON, "-m", "venv", str(v)], check=True, capture_output=True)
    # the README's own command line, run where the README says: the repository root
    cmd = section("From Python").split("$ python3 -m venv venv && ", 1)[1].splitlines()[0]
    assert cmd == "venv/bin/pip install --no-index ./clients/python", cmd
    src = d / "src"
    # a copy: pip may not write into the checkout, and the checkout may be read-only
    shutil.copytree(os.path.join(SRCDIR, "clients", "python"), src / "clients" / "python",
                    ignore=shutil.ignore_patterns("__pycache__", "tests"))
    os.symlink(v, src / "venv")
    p = subprocess.run(cmd.split(), cwd=src, capture_output=True, text=True,
                       env=dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_CACHE_DIR="1"))
    assert p.returncode == 0, p.stdout + p.stderr
    return d


def test_readme_example_runs_in_a_fresh_venv(venv):
    sec = section("From Python")
    example = blocks(sec, "python")[0]
    assert len(example.splitlines()) < 15
    console = blocks(sec, "console")[0].splitlines()
    want = console[console.index("$ venv/bin/python example.py") + 1:]
    (venv / "example.py").write_text(example)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    p = subprocess.run([str(venv / "venv" / "bin" / "python"), "example.py"], cwd=venv,
                       capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == want, p.stdout + p.stderr
    # it ran the installed package, not this tree's
    p = subprocess.run([str(venv / "venv" / "bin" / "python"), "-c",
                        "import agentbox_bwrap, importlib.metadata as m; "
                        "print(agentbox_bwrap.__file__); print(m.version('agentbox-bwrap'))"],
                       cwd=venv, capture_output=True, text=True, env=env)
    where, version = p.stdout.split()
    assert str(venv / "venv") in where and version == "0.1.0"
    assert os.path.exists(os.path.join(os.path.dirname(where), "py.typed"))


def test_readme_agent_tool_handler(agentbox_bin):
    code = blocks(section("From Python"), "python")[1]
    ns: dict = {}
    exec(compile(code, "README.md (From Python, agent loop)", "exec"), ns)
    tool = ns["RUN_CODE_TOOL"]
    assert tool["parameters"]["required"] == ["language", "code"]
    out = json.loads(ns["run_code"]("python", "print(6 * 7)"))
    assert out["status"] == "exited" and out["stdout"] == "42\n" and out["exit_code"] == 0
    out = json.loads(ns["run_code"]("node", "require('fs').writeFileSync('a.txt', 'x')"))
    assert out["files"] == ["a.txt"]  # what the run wrote, not the script


def test_versions_agree(srcdir):
    """Versioned with the C core: meson.build, pyproject.toml, package.json, __version__."""
    import agentbox_bwrap

    with open(os.path.join(srcdir, "meson.build")) as f:
        meson = re.search(r"version\s*:\s*'([^']+)'", f.read()).group(1)
    with open(os.path.join(srcdir, "clients", "python", "pyproject.toml")) as f:
        py = re.search(r'^version = "([^"]+)"', f.read(), re.M).group(1)
    with open(os.path.join(srcdir, "clients", "node", "package.json")) as f:
        node = json.load(f)["version"]
    assert meson == py == node == agentbox_bwrap.__version__

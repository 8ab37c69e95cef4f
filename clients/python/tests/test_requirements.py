"""Packages on request (issue 28, docs/requirements.md) through the client: `requirements=`,
`index_url=`, `find_links=` of run(), run_async(), Session and AsyncSession, against the real
agentbox binary (AGENTBOX). No Python index is reachable here: the wheels come from a folder
this test builds (find_links), and agentbox's environment cache is a directory of the test's
own (AGENTBOX_CACHE_DIR), so the first run installs and the later ones find it cached."""

import asyncio
import base64
import hashlib
import os
import shutil
import tempfile
import uuid
import zipfile
from typing import Dict, Iterator

import pytest

import agentbox_bwrap as agentbox

pytestmark = pytest.mark.usefixtures("agentbox_bin")

# one name per test session: nothing of an earlier run can answer for this one
PKG = "abclient_%s" % uuid.uuid4().hex[:10]
CODE = "import %s; print(%s.VALUE)" % (PKG, PKG)


def wheel(d: str, name: str, ver: str, body: str) -> None:
    """A trivial pure-Python wheel (as tests/integration/test-requirements.py builds them)."""
    info = "%s-%s.dist-info" % (name, ver)
    files = {name + "/__init__.py": body,
             info + "/METADATA": "Metadata-Version: 2.1\nName: %s\nVersion: %s\n" % (name, ver),
             info + "/WHEEL": "Wheel-Version: 1.0\nGenerator: agentbox-test\n"
                              "Root-Is-Purelib: true\nTag: py3-none-any\n"}
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
        record.append("%s,sha256=%s,%d" % (path, digest.decode(), len(text.encode())))
    record.append(info + "/RECORD,,")
    with zipfile.ZipFile("%s/%s-%s-py3-none-any.whl" % (d, name, ver), "w") as z:
        for path, text in files.items():
            z.writestr(path, text)
        z.writestr(info + "/RECORD", "\n".join(record) + "\n")


@pytest.fixture(scope="module")
def cache() -> Iterator[str]:
    """agentbox's environment cache for these tests only: mode 0700, ours, removed after."""
    d = tempfile.mkdtemp(prefix="agentbox-client-cache-")
    os.chmod(d, 0o700)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AGENTBOX_CACHE_DIR", d)
        yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def wheels() -> Iterator[str]:
    """A folder of wheels the install sandbox's user can read when the tests run as root
    (its own directory 0755 in the temporary directory, the wheel 0644)."""
    d = tempfile.mkdtemp(prefix="agentbox-client-wheels-")
    wheel(d, PKG, "1.0.0", "VALUE = '%s-ok'\n" % PKG)
    os.chmod(d, 0o755)
    for f in os.listdir(d):
        os.chmod(os.path.join(d, f), 0o644)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def installed(cache: str, wheels: str) -> Dict[str, agentbox.Result]:
    """The first run with the requirement (it installs), then the same again (cached)."""
    first = agentbox.run(CODE, requirements=[PKG], find_links=wheels, timeout=60)
    again = agentbox.run(CODE, requirements=iter([PKG]), find_links=wheels, timeout=60)
    return {"first": first, "again": again}


def test_run_installs_then_finds_it_cached(installed: Dict[str, agentbox.Result],
                                           wheels: str, cache: str) -> None:
    first = installed["first"]
    assert first.ok, (first.status, first.stderr.text, first.message)
    assert first.stdout.text == "%s-ok\n" % PKG
    pre = first.pre_run
    assert isinstance(pre, agentbox.PreRun)
    assert pre.environment == "installed", pre
    assert pre.requirements == [PKG]
    assert pre.resolved[PKG] == "1.0.0"
    assert pre.find_links == wheels and pre.index_url is None
    # the environment is in the cache these tests set, nowhere else
    assert os.path.dirname(pre.env_dir) == cache and os.path.isdir(pre.env_dir)
    again = installed["again"]
    assert again.ok and again.stdout.text == "%s-ok\n" % PKG, again.stderr.text
    assert again.pre_run is not None and again.pre_run.environment == "cached"
    assert again.pre_run.env_dir == pre.env_dir
    # the report as agentbox wrote it says the same
    assert first.raw["pre_run"]["environment"] == "installed"


def test_run_without_requirements_has_no_pre_run(cache: str) -> None:
    r = agentbox.run("print(1)")
    assert r.ok and r.pre_run is None and "pre_run" not in r.raw


def test_run_async(installed: Dict[str, agentbox.Result], wheels: str) -> None:
    async def main() -> agentbox.Result:
        return await agentbox.run_async(CODE, requirements=(PKG,), find_links=wheels)

    r = asyncio.run(main())
    assert r.ok and r.stdout.text == "%s-ok\n" % PKG, r.stderr.text
    assert r.pre_run is not None and r.pre_run.environment in ("installed", "cached")
    assert r.pre_run.resolved[PKG] == "1.0.0"


def test_session(installed: Dict[str, agentbox.Result], wheels: str) -> None:
    with agentbox.Session(requirements=[PKG], find_links=wheels, timeout=30) as s:
        c = s.run("import %s" % PKG)
        assert c.ok, c.error
        c = s.run("%s.VALUE" % PKG)
        assert c.ok and c.result == repr("%s-ok" % PKG), (c.error, c.result)
        # the environment is read-only in the sandbox, as any other
        c = s.run("import os; os.access(%s.__file__, os.W_OK)" % PKG)
        assert c.ok and c.result == "False", (c.error, c.result)
    rep = s.close()
    assert isinstance(rep, agentbox.Result)
    assert rep.pre_run is not None, rep.raw
    assert rep.pre_run.environment in ("installed", "cached")
    assert rep.pre_run.resolved[PKG] == "1.0.0"
    rep.close()


def test_async_session(installed: Dict[str, agentbox.Result], wheels: str) -> None:
    async def main() -> str:
        async with agentbox.AsyncSession(requirements=(r for r in [PKG]),
                                         find_links=wheels) as s:
            c = await s.run("import %s; %s.VALUE" % (PKG, PKG))
            assert c.ok, c.error
            return str(c.result)

    assert asyncio.run(main()) == repr("%s-ok" % PKG)


def test_a_session_without_the_requirement_cannot_import_it(cache: str) -> None:
    # the module comes from the requirements, not from anywhere else on this host
    with agentbox.Session(timeout=30) as s:
        c = s.run("import %s" % PKG)
        assert c.status is agentbox.CellStatus.ERROR
        assert c.error is not None and c.error.type == "ModuleNotFoundError"


def test_index_url_and_find_links_reach_agentbox(cache: str, wheels: str,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # the operator's index is set: a run naming another is refused, before any install
    monkeypatch.setenv("AGENTBOX_INDEX_URL", "https://a.example/simple")
    with pytest.raises(agentbox.UsageError, match="a spec may not name another"):
        agentbox.run("print(1)", requirements=[PKG], index_url="https://b.example/simple")
    with pytest.raises(agentbox.UsageError, match="a spec may not name another"):
        agentbox.Session(requirements=[PKG], index_url="https://b.example/simple")
    monkeypatch.delenv("AGENTBOX_INDEX_URL")
    monkeypatch.setenv("AGENTBOX_FIND_LINKS", wheels)
    with pytest.raises(agentbox.UsageError, match="a spec may not name another"):
        agentbox.run("print(1)", requirements=[PKG], find_links=wheels + "/elsewhere")


def test_an_installer_option_is_refused(cache: str) -> None:
    with pytest.raises(agentbox.UsageError):
        agentbox.run("print(1)", requirements=["-r/etc/shadow"])


def test_requirements_must_be_a_list_of_strings() -> None:
    with pytest.raises(TypeError, match="list of strings"):
        agentbox.run("print(1)", requirements="requests")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="each one is a str"):
        agentbox.run("print(1)", requirements=[b"requests"])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="list of strings"):
        agentbox.Session(requirements="requests")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="list of strings"):
        agentbox.AsyncSession(requirements="requests")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="index_url"):
        agentbox.run("print(1)", requirements=["x"], index_url=1)  # type: ignore[arg-type]

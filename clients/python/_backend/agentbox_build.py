"""A PEP 517 build backend in the standard library alone, for this one package.

`pip install ./clients/python` must work offline, in a fresh venv, with nothing to download:
pip's isolated build environment gets no setuptools from an index it cannot reach, so the
package builds itself. It writes a pure-Python wheel (PEP 427) of the `agentbox_bwrap`
directory, an sdist, and PEP 660 editable wheels (a .pth file pointing at this directory).
Metadata comes from pyproject.toml's [project] table.
"""

import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_PACKAGE = "agentbox_bwrap"


def _project():
    """The [project] table: tomllib where there is one (3.11+), else the simple
    `key = "string"` lines this pyproject.toml is written in."""
    with open(os.path.join(_ROOT, "pyproject.toml"), "rb") as f:
        raw = f.read()
    try:
        import tomllib  # type: ignore[import-not-found]

        return tomllib.loads(raw.decode("utf-8"))["project"]
    except ImportError:
        pass
    project, table = {}, None
    for line in raw.decode("utf-8").splitlines():
        m = re.match(r"^\[(.+)\]\s*$", line)
        if m:
            table = m.group(1).strip()
            continue
        m = re.match(r'^([A-Za-z0-9_-]+)\s*=\s*"((?:[^"\\]|\\.)*)"\s*$', line)
        if table == "project" and m:
            project[m.group(1)] = m.group(2).replace('\\"', '"').replace("\\\\", "\\")
    return project


def _names():
    p = _project()
    name = p["name"]
    return p, name, re.sub(r"[-_.]+", "_", name).lower(), p["version"]


def _metadata():
    p, name, _, version = _names()
    lines = [
        "Metadata-Version: 2.1",
        "Name: " + name,
        "Version: " + version,
        "Summary: " + p.get("description", ""),
        "Requires-Python: " + p.get("requires-python", ">=3.9"),
        "License: MIT",
    ]
    readme = os.path.join(_ROOT, "README.md")
    if os.path.exists(readme):
        lines.append("Description-Content-Type: text/markdown")
        with open(readme, encoding="utf-8") as f:
            return ("\n".join(lines) + "\n\n" + f.read()).encode("utf-8")
    return ("\n".join(lines) + "\n").encode("utf-8")


def _dist_info():
    _, _, norm, version = _names()
    return "%s-%s.dist-info" % (norm, version)


def _record_line(path, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (path, digest, len(data))


def _package_files():
    """(archive path, bytes) for every file of the package, sorted, no caches."""
    out = []
    base = os.path.join(_ROOT, _PACKAGE)
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for fn in sorted(filenames):
            if fn.endswith((".pyc", ".pyo")):
                continue
            full = os.path.join(dirpath, fn)
            rel = os.path.relpath(full, _ROOT).replace(os.sep, "/")
            with open(full, "rb") as f:
                out.append((rel, f.read()))
    return out


def _write_wheel(wheel_directory, files):
    _, _, norm, version = _names()
    wheel_name = "%s-%s-py3-none-any.whl" % (norm, version)
    di = _dist_info()
    meta = [
        (di + "/METADATA", _metadata()),
        (di + "/WHEEL", b"Wheel-Version: 1.0\nGenerator: agentbox_build\nRoot-Is-Purelib: true\nTag: py3-none-any\n"),
        (di + "/top_level.txt", (_PACKAGE + "\n").encode()),
    ]
    record = [_record_line(p, d) for p, d in files + meta] + [di + "/RECORD,,"]
    path = os.path.join(wheel_directory, wheel_name)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for p, d in files + meta + [(di + "/RECORD", ("\n".join(record) + "\n").encode())]:
            info = zipfile.ZipInfo(p, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, d)
    return wheel_name


# PEP 517 hooks


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    di = _dist_info()
    os.makedirs(os.path.join(metadata_directory, di), exist_ok=True)
    with open(os.path.join(metadata_directory, di, "METADATA"), "wb") as f:
        f.write(_metadata())
    return di


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory, _package_files())


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    _, _, norm, _ = _names()
    pth = ("__editable__.%s.pth" % norm, (_ROOT + "\n").encode())
    return _write_wheel(wheel_directory, [pth])


def build_sdist(sdist_directory, config_settings=None):
    _, _, norm, version = _names()
    base = "%s-%s" % (norm, version)
    name = base + ".tar.gz"
    files = [("pyproject.toml", None), ("README.md", None), ("_backend/agentbox_build.py", None)]
    files = [(p, None) for p, _ in files if os.path.exists(os.path.join(_ROOT, p))]
    files += [(p, d) for p, d in _package_files()]
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz", format=tarfile.PAX_FORMAT) as t:
        for p, d in files:
            if d is None:
                with open(os.path.join(_ROOT, p), "rb") as f:
                    d = f.read()
            info = tarfile.TarInfo(base + "/" + p)
            info.size, info.mode, info.mtime = len(d), 0o644, 0
            t.addfile(info, io.BytesIO(d))
        pkg_info = _metadata()
        info = tarfile.TarInfo(base + "/PKG-INFO")
        info.size, info.mode, info.mtime = len(pkg_info), 0o644, 0
        t.addfile(info, io.BytesIO(pkg_info))
    return name

#!/usr/bin/env python3
"""test-requirements.py (through test-requirements.sh): packages on request (issue 28), real
installs in prepare's sandbox and real runs, checked on the host side. TAP. Node against the
npm registry (the one registry these machines reach); Python from wheels this test builds
(index.find_links). Env: AGENTBOX, WORK."""
import base64
import hashlib
import json
import os
import socket
import stat
import subprocess
import sys
import tarfile
import threading
import time
import zipfile

AGENTBOX = os.environ["AGENTBOX"]
WORK = os.environ["WORK"]
RUNS = os.path.join(WORK, "runs-req")
CACHE = os.path.join(WORK, "envs")
n = 0
failed = 0


def ok(cond, desc, extra=None):
    global n, failed
    n += 1
    print("%s %d - %s" % ("ok" if cond else "not ok", n, desc), flush=True)
    if not cond:
        failed += 1
        if extra is not None:
            for line in repr(extra)[:3000].splitlines():
                print("#   " + line)
    return cond


def run(spec, env=None, timeout=600):
    """agentbox run --spec - ; returns (exit status, report, stdout, stderr)"""
    spec = dict(spec)
    spec.setdefault("runs_dir", RUNS)
    spec.setdefault("rm", True)
    rfd, wfd = os.pipe()
    e = dict(os.environ, AGENTBOX_CACHE_DIR=CACHE)
    e.update(env or {})
    p = subprocess.Popen([AGENTBOX, "run", "--spec", "-", "--report-fd", str(wfd)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         pass_fds=(wfd,), env=e)
    os.close(wfd)
    out, err = p.communicate(json.dumps(spec).encode(), timeout=timeout)
    with os.fdopen(rfd, "rb") as f:
        rep = f.read()
    try:
        rep = json.loads(rep)
    except ValueError:
        rep = {}
    return p.returncode, rep, out.decode(errors="replace"), err.decode(errors="replace")


def wheel(d, name, ver, body):
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


os.makedirs(CACHE, mode=0o700)
wheels = os.path.join(WORK, "wheels")
os.makedirs(wheels)
for name in ("abreqa", "abreqb", "abreqc"):
    wheel(wheels, name, "1.0.0", "VALUE = '%s-ok'\n" % name)
os.chmod(WORK, 0o711)
for root, dirs, files in os.walk(wheels):
    os.chmod(root, 0o755)
    for f in files:
        os.chmod(os.path.join(root, f), 0o644)

# -- Node, from the npm registry ---------------------------------------------------------------
node_code = ("const isNumber = require('is-number');\n"
             "console.log('isNumber', isNumber(5), isNumber('x'));\n"
             "const net = require('net');\n"
             "const s = net.connect({host: '127.0.0.1', port: +process.argv[2]});\n"
             "s.on('connect', () => { console.log('CONNECTED'); s.end(); });\n"
             "s.on('error', e => console.log('net', e.code));\n"
             "require('https').get('https://registry.npmjs.org/', () => console.log('REGISTRY'))"
             ".on('error', e => console.log('registry', e.code));\n")
lsock = socket.socket()
lsock.bind(("127.0.0.1", 0))
lsock.listen(8)
port = lsock.getsockname()[1]
seen = []


def accept():
    lsock.settimeout(0.5)
    while not stop:
        try:
            c, _ = lsock.accept()
            seen.append(c)
        except OSError:
            pass


stop = False
t = threading.Thread(target=accept)
t.start()
spec = {"language": "node", "code": node_code, "args": [str(port)],
        "requirements": ["is-number@7.0.0"]}
rc, rep, out, err = run(spec)
pre = rep.get("pre_run") or {}
ok(rc == 0 and "isNumber true false" in out, "node: requirements is-number@7.0.0 -> the module "
   "loads in the run", [rc, out, err[-800:], rep.get("message")])
ok(pre.get("environment") == "installed" and pre.get("resolved", {}).get("is-number") == "7.0.0",
   "node: pre_run says installed, with the resolved version", pre)
ok("REGISTRY" not in out and "CONNECTED" not in out and "registry " in out and not seen,
   "node: the run itself reaches no network (not the registry, not the host's 127.0.0.1)",
   [out, len(seen)])
rc, rep, out, err = run(spec)
pre = rep.get("pre_run") or {}
ok(rc == 0 and pre.get("environment") == "cached" and pre.get("ms", 10**6) < 1000,
   "node: the same set again is served from the cache (%s ms)" % pre.get("ms"), [rc, pre])
stop = True
t.join()
rc, rep, out, err = run({"language": "node", "code": "1",
                         "requirements": ["agentbox-no-such-package-q7x@1.0.0"]})
ok(rc == 125 and "agentbox-no-such-package-q7x" in (rep.get("message") or "")
   and rep.get("status") == "setup_error",
   "node: an unknown package is named in the error, with the registry's answer",
   [rc, rep.get("message")])

# -- Python, from a folder of wheels -----------------------------------------------------------
py = {"language": "python", "code": "import abreqa; print(abreqa.VALUE)",
      "requirements": ["abreqa==1.0.0"], "index": {"find_links": wheels}}
rc, rep, out, err = run(py)
pre = rep.get("pre_run") or {}
ok(rc == 0 and out == "abreqa-ok\n" and pre.get("resolved", {}).get("abreqa") == "1.0.0",
   "python: requirements from index.find_links -> the module imports in the run",
   [rc, out, err[-800:], rep.get("message"), pre])
key_a = os.path.basename(pre.get("env_dir") or "")
with open(os.path.join(WORK, "req-report.json"), "w") as f:
    json.dump(rep, f)
here = os.path.dirname(os.path.abspath(__file__))
schema = os.path.join(here, "..", "..", "schemas", "report.schema.json")
v = subprocess.run([sys.executable, os.path.join(here, "validate-schema.py"), "--strict", schema,
                    os.path.join(WORK, "req-report.json")], capture_output=True, text=True)
ok(v.returncode == 0, "the report with pre_run validates (strict)", v.stdout + v.stderr)

# two at once, one install
two = {"language": "python", "code": "import abreqb; print(abreqb.VALUE)",
       "requirements": ["abreqb==1.0.0"], "index": {"find_links": wheels}}
res = [None, None]


def one(i):
    res[i] = run(two)


ts = [threading.Thread(target=one, args=(i,)) for i in range(2)]
for x in ts:
    x.start()
for x in ts:
    x.join()
envs = sorted((r[1].get("pre_run") or {}).get("environment", "?") for r in res)
ok(all(r[0] == 0 and r[2] == "abreqb-ok\n" for r in res) and envs == ["cached", "installed"],
   "two calls with one new set at once: one install, the other waits and uses it", envs)

# eviction under the cap: a tiny cap leaves only the environment just used
rc, rep, out, err = run({"language": "python", "code": "import abreqc; print(abreqc.VALUE)",
                         "requirements": ["abreqc==1.0.0"], "index": {"find_links": wheels}},
                        env={"AGENTBOX_CACHE_MAX": "1"})
ev = [e.get("env") for e in (rep.get("pre_run") or {}).get("evicted") or []]
ok(rc == 0 and key_a in ev and not os.path.exists(os.path.join(CACHE, key_a)),
   "past AGENTBOX_CACHE_MAX the least recently used environments are evicted", [rc, ev, key_a])
left = [d for d in os.listdir(CACHE) if len(d) == 32]
ok(len(left) == 1, "... and only the one in use stays", left)

# -- the operator's policy ---------------------------------------------------------------------
rc, rep, out, err = run(py, env={"AGENTBOX_REQUIREMENTS": "deny"})
ok(rc == 2 and "requirements=deny" in (rep.get("message") or "") and out == "",
   "requirements=deny: refused (exit 2), naming the rule, nothing ran", [rc, rep.get("message")])
rc, rep, out, err = run(py, env={"AGENTBOX_ALLOW_PACKAGES": "numpy, pandas"})
ok(rc == 2 and "allow-list" in (rep.get("message") or "") and "abreqa" in rep.get("message", ""),
   "a package off the operator's allow-list: refused, naming it", rep.get("message"))
rc, rep, out, err = run(py, env={"AGENTBOX_ALLOW_PACKAGES": "numpy,ABREQA"})
ok(rc == 0 and out == "abreqa-ok\n", "the allow-list compares names as pip does", [rc, out])
rc, rep, out, err = run(py, env={"AGENTBOX_MAX_REQUIREMENTS": "0"})
ok(rc == 2 and "max_requirements" in (rep.get("message") or ""),
   "more requirements than max_requirements: refused", rep.get("message"))
rc, rep, out, err = run(dict(py, requirements=["-r /etc/shadow"]))
ok(rc == 2 and "invalid requirement" in (rep.get("message") or ""),
   "a requirement that is an installer option is refused", rep.get("message"))
rc, rep, out, err = run(py, env={"AGENTBOX_FIND_LINKS": "/nonexistent"})
ok(rc == 2 and "operator" in (rep.get("message") or ""),
   "a spec may not name another index than the operator's", rep.get("message"))

# -- a hostile package's build runs confined, as prepare's installs do ------------------------
canary = os.path.join(WORK, "canary")
with open(canary, "w") as f:
    f.write("untouched\n")
os.chmod(canary, 0o666)
evil = os.path.join(WORK, "evil")
os.makedirs(evil)
backend = '''
import os, socket, zipfile, base64, hashlib
def _attack():
    r = {}
    try:
        open(%(canary)r, "w").write("overwritten")
        r["canary"] = "written"
    except OSError as e:
        r["canary"] = e.errno
    try:
        socket.create_connection(("127.0.0.1", %(port)d), 2)
        r["net"] = "connected"
    except OSError as e:
        r["net"] = e.errno
    return r
def get_requires_for_build_wheel(config_settings=None):
    return []
def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    r = _attack()
    name, ver = "abevil", "1.0.0"
    info = "%%s-%%s.dist-info" %% (name, ver)
    files = {name + "/__init__.py": "SAW = %%r\\n" %% (r,),
             info + "/METADATA": "Metadata-Version: 2.1\\nName: abevil\\nVersion: 1.0.0\\n",
             info + "/WHEEL": "Wheel-Version: 1.0\\nGenerator: x\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n"}
    rec = []
    for p, t in files.items():
        d = base64.urlsafe_b64encode(hashlib.sha256(t.encode()).digest()).rstrip(b"=").decode()
        rec.append("%%s,sha256=%%s,%%d" %% (p, d, len(t.encode())))
    rec.append(info + "/RECORD,,")
    fn = "abevil-1.0.0-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, fn), "w") as z:
        for p, t in files.items():
            z.writestr(p, t)
        z.writestr(info + "/RECORD", "\\n".join(rec) + "\\n")
    return fn
'''
lsock2 = socket.socket()
lsock2.bind(("127.0.0.1", 0))
lsock2.listen(8)
lsock2.settimeout(0.2)
port2 = lsock2.getsockname()[1]
sdist_src = {"abevil-1.0.0/pyproject.toml": "[build-system]\nrequires = []\n"
             "build-backend = \"evil_backend\"\nbackend-path = [\".\"]\n",
             "abevil-1.0.0/evil_backend.py": backend % {"canary": canary, "port": port2},
             "abevil-1.0.0/PKG-INFO": "Metadata-Version: 2.1\nName: abevil\nVersion: 1.0.0\n"}
with tarfile.open(os.path.join(evil, "abevil-1.0.0.tar.gz"), "w:gz") as tf:
    for path, text in sdist_src.items():
        data = text.encode()
        ti = tarfile.TarInfo(path)
        ti.size = len(data)
        ti.mode = 0o644
        import io
        tf.addfile(ti, io.BytesIO(data))
os.chmod(evil, 0o755)
os.chmod(os.path.join(evil, "abevil-1.0.0.tar.gz"), 0o644)
rc, rep, out, err = run({"language": "python", "code": "import abevil; print(abevil.SAW)",
                         "requirements": ["abevil==1.0.0"], "index": {"find_links": evil}})
try:
    lsock2.accept()
    connected = True
except OSError:
    connected = False
with open(canary) as f:
    ok(f.read() == "untouched\n" and not connected,
       "a package's build code runs confined: the host file and the host's 127.0.0.1 are out "
       "of its reach", [rc, out, err[-600:], rep.get("message")])
env = (rep.get("pre_run") or {}).get("env_dir")
bad = []
for root, dirs, files in os.walk(env or "/nonexistent"):
    for f in files + dirs:
        st = os.lstat(os.path.join(root, f))
        if stat.S_ISLNK(st.st_mode):
            continue
        if st.st_mode & (stat.S_ISUID | stat.S_ISGID) or st.st_mode & stat.S_IWOTH:
            bad.append(os.path.join(root, f))
ok(rc == 0 and "'canary'" in out and "'net': 'connected'" not in out and not bad,
   "... its install succeeded, the run saw what it tried, and the environment has no "
   "set-id or world-writable entry", [rc, out, bad[:5]])

# -- the hint ----------------------------------------------------------------------------------
rc, rep, out, err = run({"language": "python", "code":
                         "import subprocess, sys\n"
                         "subprocess.run([sys.executable, '-m', 'pip', 'install', 'requests'])\n"
                         "import requests\n"})
ok(rc == 1 and "requirements" in (rep.get("hint") or "") and "requests" in rep.get("hint", ""),
   "a script that runs pip install gets a hint naming requirements", rep.get("hint"))

print("1..%d" % n)
sys.exit(1 if failed else 0)

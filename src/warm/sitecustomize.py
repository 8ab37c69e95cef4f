# agentbox's warm-slot hook for Python (docs/design.md "Warm slots"). Every sandbox's /etc has
# it at /etc/agentbox/warm/sitecustomize.py, cold or warm, so both see the same files; it runs
# only in a warm slot's interpreter, which is started as `python3 /work/script.py` with
# PYTHONPATH naming this directory and fd 1000 a socket to agentbox-supervisor. site imports
# it (as sitecustomize) after the interpreter is up and before CPython opens the script, so
# everything after the hand-over is CPython's own `python3 SCRIPT`: __main__, __file__,
# sys.path[0] (from the real argv[0]), tracebacks, exit status and signals.
#
# Messages both ways: a little-endian u32 length, then NUL-separated fields.
#   agentbox -> hook  config PYTHONPATH_SET PYTHONPATH_VALUE MODULE...
#   hook -> agentbox  ready TOP_LEVEL_MODULE...   (what the pre-imports added)
#                     error TEXT                  (the slot is unusable; it is discarded)
#   agentbox -> hook  go ARG...                   (the script is in /work: run it)
# Nothing is imported that the interpreter's start did not import already (os, sys).


def _agentbox_warm():
    import os
    import sys

    fd = 1000
    here = "/etc/agentbox/warm"
    try:
        if os.fstat(fd).st_mode & 0o170000 != 0o140000:
            return
    except OSError:
        return

    def read_exact(n):
        data = b""
        while len(data) < n:
            chunk = os.read(fd, n - len(data))
            if not chunk:
                os._exit(125)  # agentbox let the slot go: nothing will run here
            data += chunk
        return data

    def recv():
        n = int.from_bytes(read_exact(4), "little")
        return read_exact(n).split(b"\0")

    def send(fields):
        body = b"\0".join(fields)
        data = len(body).to_bytes(4, "little") + body
        while data:
            data = data[os.write(fd, data):]

    # This directory leaves sys.path, its finder cache and the environment as if it had
    # never been there.
    while here in sys.path:
        sys.path.remove(here)
    sys.path_importer_cache.pop(here, None)
    config = recv()
    if config[0] != b"config" or len(config) < 3:
        os._exit(125)
    if config[1] == b"1":
        os.environ["PYTHONPATH"] = os.fsdecode(config[2])
    else:
        os.environ.pop("PYTHONPATH", None)
    modules = [os.fsdecode(m) for m in config[3:] if m]

    # The interpreter's own sitecustomize, which this one shadowed, as site imports it.
    ours = sys.modules.pop("sitecustomize")
    found = True
    try:
        import sitecustomize  # noqa: F401
    except ImportError as exc:
        if exc.name != "sitecustomize":
            send([b"error", os.fsencode("sitecustomize: %r" % (exc,))])
            os._exit(125)
        found = False
    except Exception as exc:
        send([b"error", os.fsencode("sitecustomize: %r" % (exc,))])
        os._exit(125)
    if not found:
        sys.modules["sitecustomize"] = ours  # until site's import of it ends (below)

    # The operator's pre-imports; the workspace is empty and not on sys.path yet.
    before = {name.partition(".")[0] for name in sys.modules}
    for name in modules:
        try:
            __import__(name)
        except BaseException as exc:
            send([b"error", os.fsencode("pre-import %s: %r" % (name, exc))])
            os._exit(125)
    added = sorted({name.partition(".")[0] for name in sys.modules} - before)
    # Finders cached for the workspace (a PYTHONPATH entry under /work, empty until the
    # run's files come) are made again when the script imports, as in a cold run.
    for path in [p for p in sys.path_importer_cache if p == "/work" or p.startswith("/work/")]:
        del sys.path_importer_cache[path]
    send([b"ready"] + [os.fsencode(name) for name in added])

    go = recv()
    os.close(fd)
    if go[0] != b"go":
        os._exit(125)
    args = [os.fsdecode(a) for a in go[1:]]
    sys.argv[1:] = args
    sys.orig_argv.extend(args)
    return found


if _agentbox_warm() is False:
    # The interpreter has no sitecustomize of its own: site's import of it ends as it would
    # have, with the ImportError site ignores, and none is left in sys.modules.
    raise ImportError("No module named 'sitecustomize'", name="sitecustomize")

# agentbox's session driver for Python (docs/sessions.md). A session's sandbox starts
# `python3 /.agentbox/script/agentbox-session.py` (read-only, outside /work) with fd 1000 a
# socket to libagentbox (src/lib/session.c); it runs the cells it is sent in one namespace, as
# a notebook does, and answers each with its value, figures and error. stdout and stderr stay
# the interpreter's own (the supervisor relays them to the library): after a cell it flushes
# them and writes the cell's mark on each, so the library gives each cell what it printed.
# Everything this driver says is untrusted to agentbox (a cell can write to this socket and
# its streams too): the cell's status, its limits and crashes come from the library and the
# supervisor, never from here.
#
# Messages both ways: a little-endian u32 length, then one JSON object.
#   driver -> agentbox  {"ready": {"version": "3.11.2"}}
#   agentbox -> driver  {"cell": {"id": N, "code": "...", "mark": "..."}}
#   driver -> agentbox  {"done": {"id": N, "value": {"text": repr, "html": ...} | null,
#                        "images": [{"mime": "image/png", "data": BASE64}],
#                        "error": {"type", "value", "traceback": [...]} | null}}
# A cell is interrupted by SIGINT (KeyboardInterrupt), which the supervisor sends.
# Nothing heavy is imported before the first cell asks for it (matplotlib only once a cell
# imports it: its backend, module://agentbox_inline, is this driver's).


def _agentbox_session():
    import ast
    import base64
    import builtins
    import io
    import json
    import linecache
    import os
    import signal
    import sys
    import traceback
    import types

    fd = 1000
    max_text = 64 << 10
    max_html = 256 << 10
    max_images = 16
    max_image_bytes = 4 << 20
    here = os.path.abspath(__file__)

    def read_exact(n):
        data = b""
        while len(data) < n:
            chunk = os.read(fd, n - len(data))
            if not chunk:
                os._exit(0)  # agentbox closed the session
            data += chunk
        return data

    def recv():
        n = int.from_bytes(read_exact(4), "little")
        return json.loads(read_exact(n))

    def send(obj):
        body = json.dumps(obj, ensure_ascii=True).encode()
        data = len(body).to_bytes(4, "little") + body
        while data:
            data = data[os.write(fd, data):]

    # the cells' __main__, so that pickle, multiprocessing and `if __name__ == "__main__"`
    # see what a script would
    main = types.ModuleType("__main__")
    main.__dict__["__builtins__"] = builtins
    sys.modules["__main__"] = main
    ns = main.__dict__
    sys.argv = [""]
    if "" not in sys.path:
        sys.path.insert(0, "")
    images = []
    loop = [None]

    def capture_figure(fig):
        if len(images) >= max_images:
            return
        buf = io.BytesIO()
        try:
            fig.savefig(buf, format="png", bbox_inches="tight")
        except Exception as e:  # a figure that cannot be drawn is the cell's error to see
            print("agentbox: a figure could not be drawn: %r" % (e,), file=sys.stderr)
            return
        data = buf.getvalue()
        if len(data) <= max_image_bytes:
            images.append({"mime": "image/png", "data": base64.b64encode(data).decode()})

    def show(*args, **kwargs):
        """plt.show(): each open figure becomes one of the cell's images, then is closed."""
        import matplotlib.pyplot as plt

        for num in plt.get_fignums():
            capture_figure(plt.figure(num))
        plt.close("all")

    # matplotlib's backend module://agentbox_inline: Agg's canvas, and show() above. It is
    # made the default as matplotlib is imported (its package wrapped on the way in), not
    # through MPLBACKEND, which a cell's child processes would inherit without this driver.
    import importlib.abc
    import importlib.machinery
    import importlib.util

    class InlineBackend(importlib.abc.Loader):
        def create_module(self, spec):
            return None

        def exec_module(self, module):
            from matplotlib.backend_bases import FigureManagerBase
            from matplotlib.backends.backend_agg import FigureCanvasAgg

            module.FigureCanvas = FigureCanvasAgg
            module.FigureManager = FigureManagerBase
            module.show = show

    class Matplotlib(importlib.abc.Loader):
        def __init__(self, real):
            self.real = real

        def create_module(self, spec):
            return self.real.create_module(spec)

        def exec_module(self, module):
            self.real.exec_module(module)
            if "MPLBACKEND" not in os.environ:
                module.rcParams["backend"] = "module://agentbox_inline"

    class Finder(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "agentbox_inline":
                return importlib.util.spec_from_loader(name, InlineBackend())
            if name != "matplotlib":
                return None
            spec = importlib.machinery.PathFinder.find_spec(name, path)
            if spec is not None and spec.loader is not None:
                spec.loader = Matplotlib(spec.loader)
            return spec

    sys.meta_path.insert(0, Finder())

    def value_of(v):
        if v is None:
            return None
        try:
            text = repr(v)
        except Exception as e:
            text = "<repr failed: %r>" % (e,)
        out = {"text": text[:max_text] + ("..." if len(text) > max_text else "")}
        f = getattr(type(v), "_repr_html_", None)
        if callable(f):
            try:
                html = f(v)
                if isinstance(html, str) and len(html) <= max_html:
                    out["html"] = html
            except Exception:
                pass
        return out

    def error_of(e):
        tb = traceback.extract_tb(e.__traceback__)
        # the cell's own frames (and what it called), not this driver's
        while tb and tb[0].filename == here:
            tb = tb[1:]
        lines = traceback.format_list(tb)
        lines += traceback.format_exception_only(type(e), e)
        try:
            value = str(e)
        except Exception:
            value = "<str failed>"
        return {"type": type(e).__name__, "value": value[:max_text],
                "traceback": [line[:4096] for line in lines[-64:]]}

    def run_cell(cid, code):
        name = "<cell %d>" % cid
        linecache.cache[name] = (len(code), None, code.splitlines(True), name)
        flags = getattr(ast, "PyCF_ALLOW_TOP_LEVEL_AWAIT", 0)
        value = None
        tree = ast.parse(code, name, "exec")
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        for part, mode in ((tree, "exec"), (last, "eval")):
            if part is None:
                continue
            co = compile(part, name, mode, flags=flags, dont_inherit=True)
            if co.co_flags & 0x80:  # CO_COROUTINE: top-level await
                import asyncio

                if loop[0] is None:
                    loop[0] = asyncio.new_event_loop()
                    asyncio.set_event_loop(loop[0])
                r = loop[0].run_until_complete(eval(co, ns))
            else:
                r = eval(co, ns)
            if mode == "eval":
                value = r
        return value

    # SIGINT (the supervisor's interrupt) is blocked between cells, so that it can never cut
    # a message in two; a stale one is dropped as the next cell starts.
    sigint = {signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, sigint)
    send({"ready": {"version": "%d.%d.%d" % sys.version_info[:3]}})
    while True:
        msg = recv().get("cell")
        if not isinstance(msg, dict):
            continue
        cid = int(msg.get("id", 0))
        code = str(msg.get("code", ""))
        mark = str(msg.get("mark", "")).encode()
        images.clear()
        result = {"id": cid, "value": None, "images": images, "error": None}
        while signal.sigtimedwait(sigint, 0) is not None:
            pass
        try:
            try:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, sigint)
                v = run_cell(cid, code)
            finally:
                signal.pthread_sigmask(signal.SIG_BLOCK, sigint)
            if v is not None:
                ns["_"] = v
            result["value"] = value_of(v)
        except BaseException as e:  # SystemExit and KeyboardInterrupt too: the session goes on
            result["error"] = error_of(e)
        try:
            if sys.modules.get("matplotlib.pyplot") is not None:
                show()  # the figures a cell left open are shown too, as in a notebook
        except BaseException as e:
            print("agentbox: figures: %r" % (e,), file=sys.stderr)
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:
                pass
        # the end of this cell's output on each stream: agentbox splits the streams there
        for f in (1, 2):
            data = mark
            try:
                while data:
                    data = data[os.write(f, data):]
            except OSError:
                pass
        send({"done": result})


if __name__ == "__main__":
    import signal as _signal

    # KeyboardInterrupt is how a cell is stopped: the default handler, whatever we inherited
    _signal.signal(_signal.SIGINT, _signal.default_int_handler)
    _agentbox_session()

# T8/T24: the caller's kernel keyrings. The harness put a "user" key described
# abesc-desc-TOKEN (payload secret) in its session keyring before it ran agentbox.
# argv: DESC TOKEN
# keyctl (syscall 250), add_key (248) and request_key (249) must all be refused (EPERM from the
# filter); the key's description must not show up in /proc/keys either.
import ctypes
import errno
import os
import sys

DESC, TOKEN = sys.argv[1].encode(), sys.argv[2]
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
KEY_SPEC_SESSION, KEY_SPEC_USER, KEY_SPEC_USER_SESSION, KEY_SPEC_PROCESS = -3, -4, -5, -2
KEYCTL_GET_KEYRING_ID, KEYCTL_JOIN_SESSION, KEYCTL_DESCRIBE = 0, 1, 6
KEYCTL_SEARCH, KEYCTL_READ, KEYCTL_LINK = 10, 11, 8


def en(e):
    return errno.errorcode.get(e, str(e))


def out(tag, what, detail=""):
    print("%s %s%s" % (tag, what, " " + detail if detail else ""), flush=True)


def arg(a):
    if a is None:
        return ctypes.c_void_p(None)
    if isinstance(a, bytes):
        return ctypes.c_char_p(a)
    if isinstance(a, int):
        return ctypes.c_long(a)
    return a


def sc(nr, *args):
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *[arg(a) for a in args])
    if r < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return r


def attempt(what, fn):
    try:
        r = fn()
    except OSError as e:
        out("CONTAINED", what, en(e.errno))
        return None
    out("ESCAPED", what, "returned %r" % (r,))
    return r


buf = ctypes.create_string_buffer(4096)
for name, spec in (("session", KEY_SPEC_SESSION), ("user", KEY_SPEC_USER),
                   ("user-session", KEY_SPEC_USER_SESSION)):
    attempt("keyctl-get-%s-keyring" % name, lambda s=spec: sc(250, KEYCTL_GET_KEYRING_ID, s, 0))
    attempt("keyctl-describe-%s" % name, lambda s=spec: sc(250, KEYCTL_DESCRIBE, s, buf, 4096))
    kid = attempt("keyctl-search-%s" % name,
                  lambda s=spec: sc(250, KEYCTL_SEARCH, s, b"user", DESC, 0))
    if kid:
        n = attempt("keyctl-read-found-key", lambda: sc(250, KEYCTL_READ, kid, buf, 4096))
        if n:
            out("ESCAPED", "keyctl-payload", repr(buf.raw[:n]))
attempt("request-key", lambda: sc(249, b"user", DESC, None, KEY_SPEC_PROCESS))
added = ("abesc-added-" + TOKEN).encode()
attempt("add-key-session", lambda: sc(248, b"user", added, b"x", 1, KEY_SPEC_SESSION))
attempt("add-key-user", lambda: sc(248, b"user", added, b"x", 1, KEY_SPEC_USER))
attempt("keyctl-join-named-session", lambda: sc(250, KEYCTL_JOIN_SESSION, b"_ses"))
attempt("keyctl-link-user-into-session",
        lambda: sc(250, KEYCTL_LINK, KEY_SPEC_USER, KEY_SPEC_SESSION))

# /proc/keys lists every key this uid may "view"; the caller's must not be among them
try:
    keys = open("/proc/keys", "rb").read()
    lines = [l for l in keys.split(b"\n") if DESC in l]
    out("ESCAPED" if lines else "CONTAINED", "proc-keys-description",
        lines[0].decode(errors="replace").replace(" ", "_") if lines else
        "%d keys visible, none of the caller's" % len(keys.splitlines()))
except OSError as e:
    out("CONTAINED", "proc-keys-description", en(e.errno))
print("DONE keyring", flush=True)

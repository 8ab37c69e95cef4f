# Pseudo-terminals: two ttys and their buffers per pair, kernel memory.
import os, sys, time
ptys = []
try:
    while len(ptys) < 3000:
        m, s = os.openpty()
        ptys.append((m, s))
        os.set_blocking(m, False)
        try:
            while True:
                os.write(m, b"x" * 4096)
        except BlockingIOError:
            pass
except OSError as e:
    print("err=%s ptys=%d" % (e.strerror, len(ptys)), flush=True)
print("ptys=%d" % len(ptys), flush=True)
time.sleep(3)

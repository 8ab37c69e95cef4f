# Pipes grown with F_SETPIPE_SZ (to fs.pipe-max-size) and filled: buffers no process maps.
import fcntl, os, time
F_SETPIPE_SZ = 1031
held, keep = 0, []
try:
    while held < (1 << 30):
        r, w = os.pipe2(os.O_NONBLOCK)
        keep += [r, w]
        try:
            fcntl.fcntl(w, F_SETPIPE_SZ, 1 << 20)
        except OSError as e:
            if not keep[2:]:
                print("setpipe=%s" % e.strerror, flush=True)
        try:
            while True:
                held += os.write(w, b"x" * 65536)
        except BlockingIOError:
            pass
except OSError as e:
    print("err=%s held=%d" % (e.strerror, held), flush=True)
print("held=%d" % held, flush=True)
time.sleep(3)

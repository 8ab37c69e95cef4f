# Pipes in flight: filled, sent over SCM_RIGHTS into a socket's queue and closed here, so
# no process has them open.
import array, os, socket, time
a, b = socket.socketpair()
a.setblocking(False)
sent = 0
try:
    while True:
        r, w = os.pipe2(os.O_NONBLOCK)
        try:
            while True:
                os.write(w, b"x" * 65536)
        except BlockingIOError:
            pass
        a.sendmsg([b"p"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [r, w]))])
        os.close(r)
        os.close(w)
        sent += 1
except OSError as e:
    print("err=%s pipes=%d" % (e.strerror, sent), flush=True)
time.sleep(3)

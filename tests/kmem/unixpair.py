# AF_UNIX socketpairs with SO_SNDBUF raised (to net.core.wmem_max): each keeps what its peer
# never reads queued, kernel memory. One process, up to --nofile sockets.
import socket, time
held, keep = 0, []
try:
    while held < (1 << 30):
        a, b = socket.socketpair()
        keep += [a, b]
        try:
            a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8 << 20)
        except OSError as e:
            if not keep[2:]:
                print("sndbuf=%s" % e.strerror, flush=True)
        a.setblocking(False)
        try:
            while True:
                held += a.send(b"x" * 65536)
        except BlockingIOError:
            pass
except OSError as e:
    print("err=%s held=%d" % (e.strerror, held), flush=True)
print("held=%d" % held, flush=True)
time.sleep(3)

# AF_UNIX socket buffers in many processes (each has its own --nofile), and a closed
# sender's data left queued to its peer.
import os, socket, sys, time
procs = int(sys.argv[1]) if len(sys.argv) > 1 else 16
kids = []
for _ in range(procs):
    pid = os.fork()
    if pid == 0:
        held, keep = 0, []
        try:
            while True:
                a, b = socket.socketpair()
                try:
                    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8 << 20)
                except OSError:
                    pass
                a.setblocking(False)
                try:
                    while True:
                        held += a.send(b"x" * 65536)
                except BlockingIOError:
                    pass
                for i in range(300):  # small messages: much more kernel memory than payload
                    try:
                        a.send(b"y")
                    except BlockingIOError:
                        break
                a.close()  # b keeps what a sent
                keep.append(b)
        except OSError as e:
            print("err=%s held=%d" % (e.strerror, held), flush=True)
        time.sleep(3)
        os._exit(0)
    kids.append(pid)
for k in kids:
    os.waitpid(k, 0)
print("done", flush=True)

# UDP over the sandbox's own loopback: datagrams queued to sockets that never read them
# (each up to its rcvbuf, which SO_RCVBUF raises to net.core.rmem_max x 2).
import os, socket, sys, time
procs = int(sys.argv[1]) if len(sys.argv) > 1 else 8
kids = []
for _ in range(procs):
    pid = os.fork()
    if pid == 0:
        held, keep = 0, []
        tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        tx.setblocking(False)
        try:
            while held < (1 << 30) // procs:
                rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                try:
                    rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
                except OSError:
                    pass
                rx.bind(("127.0.0.1", 0))
                keep.append(rx)
                dst = rx.getsockname()
                before = held
                for _ in range(20000):
                    try:
                        tx.sendto(b"x" * 60000, dst)
                        held += 60000
                    except BlockingIOError:
                        time.sleep(0.001)
                    if rx.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF) * 2 < held - before:
                        break
        except OSError as e:
            print("err=%s held=%d" % (e.strerror, held), flush=True)
        time.sleep(3)
        os._exit(0)
    kids.append(pid)
for k in kids:
    os.waitpid(k, 0)
print("done", flush=True)

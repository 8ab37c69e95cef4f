# TCP over the sandbox's own loopback: a peer that never reads holds the sender's data in
# both sockets' queues (kernel memory, autotuned up to tcp_rmem/tcp_wmem).
import os, socket, sys, time
procs = int(sys.argv[1]) if len(sys.argv) > 1 else 8
lst = socket.socket(); lst.bind(("127.0.0.1", 0)); lst.listen(1024)
port = lst.getsockname()[1]
kids = []
for _ in range(procs):
    pid = os.fork()
    if pid == 0:
        held, conns = 0, []
        try:
            while held < (1 << 30) // procs:
                c = socket.create_connection(("127.0.0.1", port))
                a, _ = lst.accept()
                conns.append((c, a))
                c.setblocking(False)
                try:
                    while True:
                        held += c.send(b"x" * 65536)
                except BlockingIOError:
                    pass
        except OSError as e:
            print("err=%s held=%d" % (e.strerror, held), flush=True)
        time.sleep(3)
        os._exit(0)
    kids.append(pid)
for k in kids:
    os.waitpid(k, 0)
print("done", flush=True)

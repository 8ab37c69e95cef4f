# epoll watches: kernel memory per (instance, fd) pair, none of it in any process's RSS.
# 16 processes, each with 400 epoll instances watching 600 fds: ~3.8 million watches.
import os, select, sys, time
procs = int(sys.argv[1]) if len(sys.argv) > 1 else 16
kids = []
for _ in range(procs):
    pid = os.fork()
    if pid == 0:
        n = 0
        try:
            fds = [os.eventfd(0) for _ in range(600)]
            eps = []
            for _ in range(400):
                ep = select.epoll()
                eps.append(ep)
                for fd in fds:
                    ep.register(fd, select.EPOLLIN)
                    n += 1
        except OSError as e:
            print("err=%s watches=%d" % (e.strerror, n), flush=True)
        time.sleep(3)
        os._exit(0)
    kids.append(pid)
for k in kids:
    os.waitpid(k, 0)
print("done", flush=True)

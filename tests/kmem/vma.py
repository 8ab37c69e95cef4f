# Mappings: each VMA is kernel memory (and a share of page tables), none of it RSS.
# 16 processes, each splitting a mapping into 64k VMAs by mprotect on every other page.
import ctypes, mmap, os, sys, time
procs = int(sys.argv[1]) if len(sys.argv) > 1 else 16
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
kids = []
for _ in range(procs):
    pid = os.fork()
    if pid == 0:
        n = 64000
        base = libc.mmap(None, 2 * n * 4096, mmap.PROT_READ, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0)
        made = 0
        for i in range(n):
            if libc.mprotect(base + 2 * i * 4096, 4096, mmap.PROT_READ | mmap.PROT_WRITE) != 0:
                print("err=%s vmas=%d" % (os.strerror(ctypes.get_errno()), made), flush=True)
                break
            made += 1
        time.sleep(3)
        os._exit(0)
    kids.append(pid)
for k in kids:
    os.waitpid(k, 0)
print("done", flush=True)

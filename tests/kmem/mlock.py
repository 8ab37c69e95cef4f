# Locked pages: files of /usr mapped and mlock()ed are page cache the kernel can no longer
# reclaim (RLIMIT_MEMLOCK per process); 32 processes.
import ctypes, mmap, os, resource, sys, time
procs = int(sys.argv[1]) if len(sys.argv) > 1 else 32
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.mlock.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
files = []
for root, dirs, names in os.walk("/usr/lib"):
    for f in names:
        p = os.path.join(root, f)
        if not os.path.islink(p) and os.path.isfile(p) and os.path.getsize(p) > (1 << 20):
            files.append(p)
print("memlock=%d files=%d" % (resource.getrlimit(resource.RLIMIT_MEMLOCK)[0], len(files)), flush=True)
kids = []
for k in range(procs):
    pid = os.fork()
    if pid == 0:
        locked = 0
        for p in files[k::procs]:
            fd = os.open(p, os.O_RDONLY)
            size = os.fstat(fd).st_size
            addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
            os.close(fd)
            if addr in (None, ctypes.c_void_p(-1).value):
                continue
            if libc.mlock(addr, size) == 0:
                locked += size
        print("locked=%d" % locked, flush=True)
        time.sleep(3)
        os._exit(0)
    kids.append(pid)
for k in kids:
    os.waitpid(k, 0)
print("done", flush=True)

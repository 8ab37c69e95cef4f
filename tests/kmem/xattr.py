# user.* xattrs on a tmpfs (since 6.6 tmpfs has them): values the kernel holds, no blocks used.
# Files in DIR (argv[1]), each with as many 64 KiB... values as it takes, up to 1 GiB in all.
import os, sys, time
d = sys.argv[1] if len(sys.argv) > 1 else "/tmp"
held, files = 0, 0
val = b"v" * 65000  # under XATTR_SIZE_MAX
try:
    while held < (1 << 30):
        p = os.path.join(d, "x%d" % files)
        open(p, "w").close()
        files += 1
        for i in range(64):
            os.setxattr(p, "user.a%d" % i, val)
            held += len(val)
except OSError as e:
    print("err=%s held=%d files=%d" % (e.strerror, held, files), flush=True)
print("held=%d" % held, flush=True)
time.sleep(3)

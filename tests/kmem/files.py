# Empty files with long names in DIR (argv[1]): an inode and a dentry each, no blocks used.
import os, sys, time
d = sys.argv[1] if len(sys.argv) > 1 else "/tmp"
n = 0
try:
    while n < 1200000:
        fd = os.open(os.path.join(d, "%0250d" % n), os.O_CREAT | os.O_WRONLY, 0o600)
        os.close(fd)
        n += 1
except OSError as e:
    print("err=%s files=%d" % (e.strerror, n), flush=True)
print("files=%d" % n, flush=True)
time.sleep(3)

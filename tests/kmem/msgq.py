# SysV message queues: queued messages are kernel memory (msgmni queues of msgmnb bytes each).
import ctypes, os, time
libc = ctypes.CDLL(None, use_errno=True)
IPC_PRIVATE, IPC_CREAT, IPC_NOWAIT = 0, 0o1000, 0o4000
MSGMAX = 8192
class Msg(ctypes.Structure):
    _fields_ = [("mtype", ctypes.c_long), ("mtext", ctypes.c_char * MSGMAX)]
m = Msg(1, b"m" * MSGMAX)
held, queues = 0, 0
try:
    while held < (1 << 30):
        q = libc.msgget(IPC_PRIVATE, IPC_CREAT | 0o600)
        if q < 0:
            raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
        queues += 1
        while libc.msgsnd(q, ctypes.byref(m), MSGMAX, IPC_NOWAIT) == 0:
            held += MSGMAX
        if ctypes.get_errno() != 11:  # EAGAIN: this queue is full
            raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
except OSError as e:
    print("err=%s held=%d queues=%d" % (e.strerror, held, queues), flush=True)
print("held=%d" % held, flush=True)
time.sleep(3)

# T13/T14/T15: processes that try to outlive the run. argv: MODE TOKEN
# Starts daemons that detach every way a script can (double fork + setsid, a new session via
# subprocess, SIGTERM/SIGHUP ignored, stdout kept open so that a relay waiting for EOF would
# hang), each with "abesc-daemon-TOKEN" in its command line. MODE "exit": the script then
# exits at once; MODE "hang": it ignores SIGTERM and sleeps far past any timeout.
# The script cannot judge this itself (ATTEMPT lines): the harness checks that agentbox
# returned in time and that no process with the marker is left on the host.
import os
import signal
import subprocess
import sys
import time

MODE, TOKEN = sys.argv[1], sys.argv[2]
MARK = "abesc-daemon-" + TOKEN
SLEEPER = ("import signal, time\n"
           "for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):\n"
           "    signal.signal(s, signal.SIG_IGN)\n"
           "time.sleep(600)\n")


def out(tag, what, detail=""):
    print("%s %s%s" % (tag, what, " " + detail if detail else ""), flush=True)


# 1. the classic daemon: fork, setsid, fork again, keep stdout/stderr (the relay's pipes)
pid = os.fork()
if pid == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, "-c", SLEEPER, MARK + "-doublefork"])
    os._exit(0)
os.waitpid(pid, 0)
out("ATTEMPT", "daemon-double-fork-setsid")

# 2. a new session through subprocess, never waited for
p = subprocess.Popen([sys.executable, "-c", SLEEPER, MARK + "-popen"], start_new_session=True)
out("ATTEMPT", "daemon-popen-new-session", "pid %d" % p.pid)

# 3. the setsid tool, forking into the background
subprocess.run(["/usr/bin/setsid", "-f", sys.executable, "-c", SLEEPER, MARK + "-setsid"])
out("ATTEMPT", "daemon-setsid-tool")

# 4. a process group of its own that ignores everything catchable
pid = os.fork()
if pid == 0:
    os.setpgid(0, 0)
    os.execv(sys.executable, [sys.executable, "-c", SLEEPER, MARK + "-pgrp"])
out("ATTEMPT", "daemon-own-process-group")

time.sleep(0.3)  # let them all start
alive = 0
for d in os.listdir("/proc"):
    if d.isdigit():
        try:
            if MARK.encode() in open("/proc/%s/cmdline" % d, "rb").read():
                alive += 1
        except OSError:
            pass
out("ATTEMPT", "daemons-running-inside", "%d" % alive)
if MODE == "hang":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    print("DONE survivors", flush=True)
    while True:
        time.sleep(3600)
print("DONE survivors", flush=True)

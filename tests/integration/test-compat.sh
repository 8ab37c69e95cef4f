#!/bin/sh
# test-compat.sh -- Debian's Python and Node stacks work unchanged under the default
# protections (issue 15): ptys (os.openpty, pty.spawn) from the sandbox's private /dev/pts,
# while agentbox-init refuses to start with a host terminal on fds 0-2; caches go to /tmp
# (XDG_CACHE_HOME, MPLCONFIGDIR, npm's), never into the workspace or the report's files.
# shellcheck source-path=SCRIPTDIR
# shellcheck source=lib.sh
. "$AB_TESTDIR/integration/lib.sh"

# ---- ptys --------------------------------------------------------------------------------
cat >"$WORK/ptys.py" <<'EOF'
import os, pty, sys, termios, tty
m, s = os.openpty()
print("OPENPTY " + os.ttyname(s))
os.write(m, b"ping\n")
print("SLAVE_READ " + os.read(s, 100).decode().strip())
tty.setraw(s)  # no echo from here on: the master reads only what the slave writes
print("SETRAW OK")
os.write(s, b"pong\n")
got = b""
while b"pong" not in got:  # the echo of "ping" came first
    got += os.read(m, 100)
print("MASTER_READ " + got.decode().split()[-1])
os.close(m); os.close(s)
# pty.spawn: a child on a new pty as its controlling terminal (forkpty: setsid + TIOCSCTTY)
out = []
def rd(fd):
    d = os.read(fd, 1024)
    out.append(d)
    return d
st = pty.spawn([sys.executable, "-c",
                "import os, sys; print('CHILD', os.ttyname(0), os.isatty(1));"
                "f = open('/dev/tty', 'w'); f.write('TTYWRITE\\n'); f.close()"], rd)
text = b"".join(out).decode().replace("\r", "")
for line in text.splitlines():
    print("SPAWN " + line)
print("SPAWN_STATUS %d" % os.waitstatus_to_exitcode(st))
print("PTS " + ",".join(sorted(x for x in os.listdir("/dev/pts"))))
print("DONE")
EOF
abb 60 "$WORK/ptys.py"
is "$rc" 0 "pty: the script exits 0"
check "pty: os.openpty gives a /dev/pts device" hasre '^OPENPTY /dev/pts/[0-9]'
is "$(sed -n 's/^SLAVE_READ //p' "$WORK/out")" ping "pty: master -> slave"
is "$(sed -n 's/^MASTER_READ //p' "$WORK/out")" pong "pty: slave -> master"
check "pty: tty.setraw on the slave" has "SETRAW OK"
check "pty: pty.spawn child runs on a pty" hasre '^SPAWN CHILD /dev/pts/[0-9]* True$'
check "pty: the child writes to its /dev/tty (the pty)" has "SPAWN TTYWRITE"
is "$(sed -n 's/^SPAWN_STATUS //p' "$WORK/out")" 0 "pty: pty.spawn child exits 0"
# the sandbox's devpts is its own instance: only what this run opened (the two pairs are closed)
is "$(sed -n 's/^PTS //p' "$WORK/out")" ptmx "pty: the sandbox's /dev/pts holds no host pty"
check "pty: Landlock stays enforced" jqe '.sandbox.landlock.enforced'

# agentbox-init refuses a terminal on fds 0-2 (agentbox never hands one over; this is the
# guard that makes TIOCSCTTY safe to allow)
printf '#!/bin/sh\necho started\n' >"$WORK/init-ok"
chmod 755 "$WORK/init-ok"
init_rc=0
python3 - "$AGENTBOX_INIT" "$WORK/init-ok" >"$WORK/init.out" 2>&1 <<'EOF' || init_rc=$?
import os, subprocess, sys
st = os.open(os.environ["WORK"] + "/st", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.dup2(st, 3, inheritable=True)
m, s = os.openpty()  # after fd 3 is taken: the master stays open, the slave usable
r = subprocess.run([sys.argv[1], "--status-fd", "3", "--", sys.argv[2]], stdin=s,
                   stdout=subprocess.PIPE, pass_fds=(3,))
sys.stdout.write(r.stdout.decode())
sys.exit(r.returncode)
EOF
is "$init_rc" 125 "agentbox-init: a terminal on stdin is refused (exit 125)"
check "agentbox-init: the status record says why" grep -aq "a terminal on fd 0-2" "$WORK/st"
refute "agentbox-init: the command did not start" grep -q started "$WORK/init.out"

# ---- caches go to /tmp --------------------------------------------------------------------
cat >"$WORK/caches.js" <<'EOF'
const fs = require('fs'), path = require('path'), os = require('os');
for (const k of ['XDG_CACHE_HOME', 'MPLCONFIGDIR', 'npm_config_cache'])
  console.log(k + '=' + process.env[k]);
// what an XDG-aware library does: its cache under XDG_CACHE_HOME
const d = path.join(process.env.XDG_CACHE_HOME, 'somelib');
fs.mkdirSync(d, { recursive: true });
fs.writeFileSync(path.join(d, 'index.json'), '{}');
fs.writeFileSync('/work/result.txt', 'ok\n');
console.log('HOME=' + os.homedir());
EOF
abb 60 "$WORK/caches.js"
is "$rc" 0 "caches: the script exits 0"
is "$(val XDG_CACHE_HOME)" /tmp/.cache "caches: XDG_CACHE_HOME is under the sandbox's /tmp"
is "$(val MPLCONFIGDIR)" /tmp/.cache/matplotlib "caches: MPLCONFIGDIR is under /tmp"
is "$(val npm_config_cache)" /tmp/.cache/npm "caches: npm's cache is under /tmp"
is "$(jr '[.files[].path] | sort | join(",")')" "caches.js,result.txt" \
    "caches: the report's files list only the script and its output"

done_testing

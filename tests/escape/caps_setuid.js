// T33/T34: capabilities, no_new_privs, and setuid-root binaries (Node version of
// caps_setuid.py; the same LD_DEBUG and /proc/PID/status checks).
'use strict';
const cp = require('child_process');
const fs = require('fs');

function out(tag, what, detail) {
  console.log(`${tag} ${what}${detail ? ' ' + detail : ''}`);
}
const st = Object.fromEntries(fs.readFileSync('/proc/self/status', 'utf8').split('\n')
  .filter(Boolean).map((l) => [l.split(':')[0], l.slice(l.indexOf(':') + 1).trim()]));
for (const k of ['CapInh', 'CapPrm', 'CapEff', 'CapBnd', 'CapAmb']) {
  out(BigInt('0x' + st[k]) === 0n ? 'CONTAINED' : 'ESCAPED', 'capabilities-' + k, st[k]);
}
out(st.NoNewPrivs === '1' ? 'CONTAINED' : 'ESCAPED', 'no-new-privs', st.NoNewPrivs);
out(st.Seccomp === '2' ? 'CONTAINED' : 'ESCAPED', 'seccomp-filter-mode', st.Seccomp);
const uids = st.Uid.split(/\s+/);
out(uids.includes('0') ? 'ESCAPED' : 'CONTAINED', 'not-uid-0', uids.join(','));
out(process.geteuid() === 0 ? 'ESCAPED' : 'CONTAINED', 'geteuid', String(process.geteuid()));

const SETUID = ['/usr/bin/su', '/usr/bin/mount', '/usr/bin/umount', '/usr/bin/passwd',
                '/usr/bin/chsh', '/usr/bin/chfn', '/usr/bin/gpasswd', '/usr/bin/newgrp',
                '/usr/bin/firejail', '/usr/bin/sudo', '/usr/bin/pkexec'];
const present = SETUID.filter((b) => {
  try {
    return (fs.statSync(b).mode & 0o4000) !== 0;
  } catch (e) {
    return false;
  }
});
out('NOTE', 'setuid-binaries-visible', present.map((b) => b.split('/').pop()).join(',') || 'none');
for (const b of present) {
  const r = cp.spawnSync(b, ['--version'], {
    encoding: 'utf8', timeout: 10000, stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, LD_DEBUG: 'statistics' },
  });
  const secure = !String(r.stderr).includes('runtime linker statistics');
  out(secure ? 'ESCAPED' : 'CONTAINED', 'setuid-exec-' + b.split('/').pop(),
      secure ? 'AT_SECURE=1: privileges changed' : `AT_SECURE=0, exit ${r.status}`);
}
const waiting = [['/usr/bin/su', ['root', '-c', 'id']], ['/usr/bin/passwd', []]]
  .filter(([b]) => present.includes(b));
let pending = waiting.length;
const finish = () => {
  const r = cp.spawnSync('/usr/bin/mount', ['-t', 'tmpfs', 'abesc', '/tmp'], { encoding: 'utf8' });
  out(r.status === 0 ? 'ESCAPED' : 'CONTAINED', 'setuid-mount-tmpfs', `exit ${r.status}`);
  console.log('DONE caps_setuid');
};
if (!pending) finish();
for (const [b, args] of waiting) {
  const p = cp.spawn(b, args, { stdio: ['pipe', 'ignore', 'ignore'] });
  setTimeout(() => {
    const name = b.split('/').pop();
    try {
      const u = fs.readFileSync(`/proc/${p.pid}/status`, 'utf8').split('\n')
        .find((l) => l.startsWith('Uid:')).split(/\s+/).slice(1);
      out(u.includes('0') ? 'ESCAPED' : 'CONTAINED', 'setuid-running-uids-' + name, u.join(','));
    } catch (e) {
      out('NOTE', 'setuid-exited-early-' + name, 'no status to read');
    }
    p.kill('SIGKILL');
    if (--pending === 0) finish();
  }, 400);
}

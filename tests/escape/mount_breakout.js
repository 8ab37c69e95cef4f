// T3: mount, remount, chroot, namespace and file-handle breakouts (Node version).
// argv: TOKEN. Node has no raw syscalls, so it does what an attacker in Node would do: run the
// host's own tools (mount, umount, chroot, unshare, nsenter: setuid-root ones included) through
// child_process, and ab-probe (copied in by the harness as /work/ab-probe) for the raw calls.
'use strict';
const cp = require('child_process');
const fs = require('fs');
const TOKEN = process.argv[2];

function out(tag, what, detail) {
  console.log(`${tag} ${what}${detail ? ' ' + detail : ''}`);
}
// a tool run: exit 0 means it did what it was asked
function run(what, file, args) {
  const r = cp.spawnSync(file, args, { stdio: ['ignore', 'pipe', 'pipe'], timeout: 10000 });
  if (r.error) {
    out('CONTAINED', what, r.error.code);
    return;
  }
  const msg = String(r.stderr).trim().split('\n')[0].replace(/\s+/g, '_').slice(0, 60);
  if (r.status === 0) out('ESCAPED', what, 'exit 0');
  else out('CONTAINED', what, `exit ${r.status === null ? r.signal : r.status} ${msg}`);
}
for (const d of ['/tmp/m', '/tmp/b', '/tmp/c']) fs.mkdirSync(d, { recursive: true });

const src = 'abesc-' + TOKEN;
run('mount-tmpfs', '/usr/bin/mount', ['-t', 'tmpfs', src, '/tmp/m']);
run('remount-root-rw', '/usr/bin/mount', ['-o', 'remount,rw', '/']);
run('remount-usr-rw', '/usr/bin/mount', ['-o', 'remount,bind,rw', '/usr']);
run('bind-root-elsewhere', '/usr/bin/mount', ['--rbind', '/', '/tmp/b']);
run('umount-work', '/usr/bin/umount', ['-l', '/work']);
run('umount-proc-sys', '/usr/bin/umount', ['-l', '/proc/sys']);
run('chroot', '/usr/sbin/chroot', ['/tmp/c', '/usr/bin/true']);
run('unshare-mount-ns', '/usr/bin/unshare', ['-m', '/usr/bin/true']);
run('unshare-user-mount-ns', '/usr/bin/unshare', ['-Urm', '/usr/bin/true']);
run('nsenter-pid1-mnt', '/usr/bin/nsenter', ['-t', '1', '-m', '/usr/bin/true']);
run('bwrap-inside', '/usr/bin/bwrap', ['--bind', '/', '/', '/usr/bin/true']);

// raw calls, through the static probe: each must be refused by the filter, not the kernel
const calls = ['mount', 'umount2', 'chroot', 'pivot_root', 'unshare', 'setns',
               'open_by_handle_at', 'name_to_handle_at', 'fsopen', 'fsconfig', 'fsmount',
               'fspick', 'open_tree', 'move_mount', 'mount_setattr', 'clone_newns'];
const r = cp.spawnSync('/work/ab-probe', ['try-syscall', ...calls], { encoding: 'utf8' });
const got = new Map(String(r.stdout).trim().split('\n').map((l) => l.split(' ')));
for (const c of calls) {
  const e = got.get(c);
  if (e === 'EPERM' || e === 'ENOSYS') out('CONTAINED', 'syscall-' + c, e);
  else out('ESCAPED', 'syscall-' + c, `reached the kernel: ${e}`);
}

for (const [label, p] of [['root', '/' + TOKEN], ['usr', '/usr/' + TOKEN]]) {
  try {
    fs.writeFileSync(p, 'x', { flag: 'wx' });
    out('ESCAPED', 'still-readonly-' + label, 'created ' + p);
  } catch (e) {
    out('CONTAINED', 'still-readonly-' + label, e.code);
  }
}
const mi = fs.readFileSync('/proc/self/mountinfo', 'utf8');
out(mi.includes(TOKEN) ? 'ESCAPED' : 'CONTAINED', 'no-new-mount',
    `${mi.trim().split('\n').length} mounts`);
console.log('DONE mount_breakout');

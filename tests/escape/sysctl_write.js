// T30: host-global sysctls (Node version of sysctl_write.py): open for write only, never write.
'use strict';
const fs = require('fs');
const PATHS = [
  '/proc/sys/kernel/core_pattern', '/proc/sys/vm/drop_caches', '/proc/sys/kernel/panic',
  '/proc/sys/kernel/randomize_va_space', '/proc/sys/kernel/modprobe',
  '/proc/sys/kernel/unprivileged_bpf_disabled', '/proc/sys/dev/tty/legacy_tiocsti',
  '/proc/sys/vm/unprivileged_userfaultfd', '/proc/sys/fs/protected_hardlinks',
  '/proc/sys/kernel/hostname', '/proc/sys/user/max_user_namespaces', '/proc/sysrq-trigger',
];
for (const p of PATHS) {
  const what = 'open-w-' + p.slice('/proc/'.length).replace(/\//g, '.');
  try {
    fs.closeSync(fs.openSync(p, fs.constants.O_WRONLY));
    console.log(`ESCAPED ${what} opened for writing`);
  } catch (e) {
    console.log(`CONTAINED ${what} ${e.code}`);
  }
}
const ro = fs.readFileSync('/proc/self/mountinfo', 'utf8').split('\n').map((l) => l.split(' '))
  .filter((f) => f[4] === '/proc/sys').map((f) => f[5]);
console.log(`${ro.length && ro[ro.length - 1].split(',')[0] === 'ro' ? 'CONTAINED' : 'ESCAPED'} ` +
            `proc-sys-mount-readonly ${ro.join(',') || 'not a mount'}`);
console.log('DONE sysctl_write');

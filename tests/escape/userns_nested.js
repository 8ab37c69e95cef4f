// T32: nested user namespaces (Node version of userns_nested.py): the unshare and bwrap tools
// through child_process, and the raw calls through ab-probe.
'use strict';
const cp = require('child_process');

function out(tag, what, detail) {
  console.log(`${tag} ${what}${detail ? ' ' + detail : ''}`);
}
for (const [what, file, args] of [
  ['unshare-tool-user', '/usr/bin/unshare', ['-U', '/usr/bin/true']],
  ['unshare-tool-map-root', '/usr/bin/unshare', ['-Ur', '/usr/bin/id', '-u']],
  ['unshare-tool-net', '/usr/bin/unshare', ['-n', '/usr/bin/true']],
  ['bwrap-tool-nested', '/usr/bin/bwrap', ['--unshare-user', '--ro-bind', '/', '/', '/usr/bin/true']],
  ['bwrap-tool-uid0', '/usr/bin/bwrap', ['--unshare-user', '--uid', '0', '--ro-bind', '/', '/',
                                         '/usr/bin/id', '-u']],
]) {
  const r = cp.spawnSync(file, args, { encoding: 'utf8', timeout: 10000 });
  if (r.error) out('CONTAINED', what, r.error.code);
  else out(r.status === 0 ? 'ESCAPED' : 'CONTAINED', what,
           `exit ${r.status} ${String(r.stderr).split(/\s+/).slice(0, 6).join('_')}`);
}
const calls = ['unshare', 'setns', 'clone_newuser', 'clone_newns', 'clone_newpid', 'clone_newnet',
               'clone_newuts', 'clone_newipc', 'clone_newcgroup', 'clone3'];
const r = cp.spawnSync('/work/ab-probe', ['try-syscall', ...calls], { encoding: 'utf8' });
for (const l of String(r.stdout).trim().split('\n')) {
  const [c, e] = l.split(' ');
  out(['EPERM', 'ENOSPC', 'ENOSYS'].includes(e) ? 'CONTAINED' : 'ESCAPED', 'syscall-' + c, e);
}
console.log('DONE userns_nested');

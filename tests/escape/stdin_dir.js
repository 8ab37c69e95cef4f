// T7: a host directory handed to the sandbox as stdin (agentbox run --stdin DIR). An open
// directory fd is a way out of any mount namespace: /proc/self/fd/0 (or fchdir) lands in the
// host's directory tree, and ".." walks up to the host's root from there.
// argv: SECRET_NAME (a file the harness put next to that directory)
'use strict';
const fs = require('fs');
const SECRET = process.argv[2];

function out(tag, what, detail) {
  console.log(`${tag} ${what}${detail ? ' ' + detail : ''}`);
}
let isDir = false;
try {
  isDir = fs.fstatSync(0).isDirectory();
} catch (e) { /* no stdin */ }
out(isDir ? 'NOTE' : 'CONTAINED', 'stdin-is-a-directory', String(isDir));
const base = '/proc/self/fd/0';
for (const [what, fn] of [
  ['read-next-to-stdin-dir', () => fs.readFileSync(`${base}/../${SECRET}`, 'utf8').trim()],
  ['list-host-root', () => {
    const l = fs.readdirSync(`${base}/../../..`);
    if (l.includes('.agentbox')) throw Object.assign(new Error('sandbox root'), { code: 'SANDBOX' });
    return l.slice(0, 8).join(',');
  }],
  ['read-host-etc-hostname', () => fs.readFileSync(`${base}/../../../etc/hostname`, 'utf8').trim()],
  ['create-in-stdin-dir', () => fs.writeFileSync(`${base}/pwned-by-sandbox`, 'x')],
]) {
  try {
    out('ESCAPED', what, String(fn()).replace(/\s+/g, '_'));
  } catch (e) {
    out('CONTAINED', what, e.code || String(e));
  }
}
console.log('DONE stdin_dir');

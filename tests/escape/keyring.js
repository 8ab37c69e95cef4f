// T8/T24: the caller's kernel keyrings (Node version of keyring.py). argv: DESC TOKEN
// Node has no keyctl binding: it reads /proc/keys and runs the keyctl tool (if installed in
// /usr) and ab-probe, as an attacker would.
'use strict';
const cp = require('child_process');
const fs = require('fs');
const [DESC, TOKEN] = process.argv.slice(2);

function out(tag, what, detail) {
  console.log(`${tag} ${what}${detail ? ' ' + detail : ''}`);
}
function run(what, file, args) {
  const r = cp.spawnSync(file, args, { encoding: 'utf8', timeout: 10000 });
  if (r.error) {
    out('CONTAINED', what, r.error.code);
    return;
  }
  const all = r.stdout + r.stderr;
  if (r.status === 0 || all.includes('payload')) out('ESCAPED', what, `exit ${r.status}`);
  else out('CONTAINED', what, `exit ${r.status} ${all.trim().split('\n')[0].replace(/\s+/g, '_')}`);
}
if (fs.existsSync('/usr/bin/keyctl')) {
  run('keyctl-search-session', '/usr/bin/keyctl', ['search', '@s', 'user', DESC]);
  run('keyctl-search-user', '/usr/bin/keyctl', ['search', '@u', 'user', DESC]);
  run('keyctl-request', '/usr/bin/keyctl', ['request', 'user', DESC]);
  run('keyctl-add-user', '/usr/bin/keyctl', ['add', 'user', 'abesc-added-' + TOKEN, 'x', '@u']);
  run('keyctl-add-session', '/usr/bin/keyctl', ['add', 'user', 'abesc-added-' + TOKEN, 'x', '@s']);
  run('keyctl-show-session', '/usr/bin/keyctl', ['show', '@s']);
} else {
  out('CONTAINED', 'keyctl-tool', 'not installed in /usr: the probe below covers the calls');
}
const r = cp.spawnSync('/work/ab-probe', ['try-syscall', 'keyctl', 'add_key', 'request_key'],
                       { encoding: 'utf8' });
for (const l of String(r.stdout).trim().split('\n')) {
  const [c, e] = l.split(' ');
  out(e === 'EPERM' ? 'CONTAINED' : 'ESCAPED', 'syscall-' + c, e);
}
try {
  const keys = fs.readFileSync('/proc/keys', 'utf8').split('\n');
  const hit = keys.filter((l) => l.includes(DESC));
  out(hit.length ? 'ESCAPED' : 'CONTAINED', 'proc-keys-description',
      hit.length ? hit[0].replace(/\s+/g, '_') : `${keys.length - 1} keys visible, none of the caller's`);
} catch (e) {
  out('CONTAINED', 'proc-keys-description', e.code);
}
console.log('DONE keyring');

// T27 (+T33): setuid/setgid files left in the workspace (Node version of setuid_left.py).
// The filter answers EPERM to every s-bit (CONTAINED); under --without seccomp they are set
// (ATTEMPT) and the layers below must hold.
'use strict';
const cp = require('child_process');
const fs = require('fs');

function out(tag, what, detail) {
  console.log(`${tag} ${what}${detail ? ' ' + detail : ''}`);
}
// fn() sets an s-bit: EPERM is the filter's answer, success is for the host to judge
function setid(what, fn) {
  try {
    fn();
    return true;
  } catch (e) {
    out(e.code === 'EPERM' ? 'CONTAINED' : 'NOTE', what, e.code);
    return false;
  }
}
const modeOf = (p) => (fs.statSync(p).mode & 0o7777).toString(8);
const made = [];
for (const [name, mode] of [['suid-probe', 0o4755], ['sgid-probe', 0o2755],
                            ['suid-sgid-probe', 0o6755]]) {
  fs.copyFileSync('/work/ab-probe', '/work/' + name);
  if (setid('chmod-' + name, () => fs.chmodSync('/work/' + name, mode))) {
    made.push(name);
    out('ATTEMPT', 'setid-file-' + name, 'mode ' + modeOf('/work/' + name) + ' inside');
  }
}
fs.mkdirSync('/work/sgid-dir');
setid('chmod-sgid-dir', () => fs.chmodSync('/work/sgid-dir', 0o2775));
fs.writeFileSync('/work/sgid-dir/inner-suid.sh', '#!/bin/sh\nid\n');
setid('chmod-inner-suid', () => fs.chmodSync('/work/sgid-dir/inner-suid.sh', 0o4777));
if (setid('open-creat-suid',
          () => fs.closeSync(fs.openSync('/work/created-suid', 'w', 0o4755)))) {
  out('ATTEMPT', 'setid-file-created-suid', 'mode ' + modeOf('/work/created-suid') + ' inside');
}
for (const name of made) {
  const r = cp.spawnSync('/work/' + name, ['ids'], { encoding: 'utf8' });
  const ids = String(r.stdout).split('\n').filter((l) => /^(Uid|Gid):/.test(l))
    .flatMap((l) => l.split(/\s+/).slice(1));
  const bad = !ids.length || new Set(ids).size !== 1;
  out(bad ? 'ESCAPED' : 'CONTAINED', 'exec-' + name, 'uids/gids ' + ids.join(','));
}
console.log('DONE setuid_left');

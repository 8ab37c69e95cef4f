// T27 (+T33): setuid/setgid files left in the workspace (Node version of setuid_left.py).
'use strict';
const cp = require('child_process');
const fs = require('fs');

function out(tag, what, detail) {
  console.log(`${tag} ${what}${detail ? ' ' + detail : ''}`);
}
const made = [];
for (const [name, mode] of [['suid-probe', 0o4755], ['sgid-probe', 0o2755],
                            ['suid-sgid-probe', 0o6755]]) {
  fs.copyFileSync('/work/ab-probe', '/work/' + name);
  try {
    fs.chmodSync('/work/' + name, mode);
    made.push(name);
    out('ATTEMPT', 'setid-file-' + name,
        'mode ' + (fs.statSync('/work/' + name).mode & 0o7777).toString(8) + ' inside');
  } catch (e) {
    out('NOTE', 'chmod-' + name, e.code);
  }
}
fs.mkdirSync('/work/sgid-dir');
fs.chmodSync('/work/sgid-dir', 0o2775);
fs.writeFileSync('/work/sgid-dir/inner-suid.sh', '#!/bin/sh\nid\n');
fs.chmodSync('/work/sgid-dir/inner-suid.sh', 0o4777);
for (const name of made) {
  const r = cp.spawnSync('/work/' + name, ['ids'], { encoding: 'utf8' });
  const ids = String(r.stdout).split('\n').filter((l) => /^(Uid|Gid):/.test(l))
    .flatMap((l) => l.split(/\s+/).slice(1));
  const bad = !ids.length || new Set(ids).size !== 1;
  out(bad ? 'ESCAPED' : 'CONTAINED', 'exec-' + name, 'uids/gids ' + ids.join(','));
}
console.log('DONE setuid_left');

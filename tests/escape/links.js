// T25/T26: links and special files left for the collector (Node version of links.py).
// argv: CANARY
'use strict';
const cp = require('child_process');
const fs = require('fs');
const CANARY = process.argv[2];

function out(tag, what, detail) {
  console.log(`${tag} ${what}${detail ? ' ' + detail : ''}`);
}
for (const [label, src] of [['node-binary', process.execPath], ['etc-passwd', '/etc/passwd'],
                            ['agentbox-init', '/.agentbox/init'], ['dev-null', '/dev/null'],
                            ['host-canary', CANARY]]) {
  try {
    fs.linkSync(src, '/work/hard-' + label);
    out('ESCAPED', 'hardlink-' + label, 'linked');
  } catch (e) {
    out('CONTAINED', 'hardlink-' + label, e.code);
  }
}
for (const [name, target] of [['link-shadow', '/etc/shadow'], ['link-root', '/'],
                              ['link-up', '../../..'], ['link-canary', CANARY],
                              ['report.json', CANARY]]) {
  fs.symlinkSync(target, '/work/' + name);
}
fs.mkdirSync('/work/sub');
fs.symlinkSync('../../../../../../..', '/work/sub/deep-up');
cp.spawnSync('/usr/bin/mkfifo', ['/work/fifo']);
fs.writeFileSync('/work/plain.txt', 'plain\n');
fs.linkSync('/work/plain.txt', '/work/plain-hardlink');
const r = cp.spawnSync('/usr/bin/mknod', ['/work/mknod-char', 'c', '1', '3'], { encoding: 'utf8' });
out(r.status === 0 ? 'ESCAPED' : 'CONTAINED', 'mknod-char', `exit ${r.status}`);
const srv = require('net').createServer().listen('/work/sock', () => {
  out('ATTEMPT', 'symlinks-fifo-socket-hardlink-left', 'host decides');
  console.log('DONE links');
  process.exit(0);
});
srv.on('error', (e) => { out('NOTE', 'socket-file', e.code); console.log('DONE links'); process.exit(0); });

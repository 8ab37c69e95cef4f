// T40 (+T4): state one run leaves for the next (Node version of cross_run.py; no SysV IPC:
// Node has no binding for it). argv: MODE(plant|check) TOKEN
'use strict';
const cp = require('child_process');
const fs = require('fs');
const net = require('net');
const [MODE, TOKEN] = process.argv.slice(2);
const FILES = ['/tmp/abesc-' + TOKEN, '/dev/shm/abesc-' + TOKEN];
const ABSTRACT = '\0abesc-cross-' + TOKEN;

function out(tag, what, detail) {
  console.log(`${tag} ${what}${detail ? ' ' + detail : ''}`);
}
if (MODE === 'plant') {
  for (const p of FILES) fs.writeFileSync(p, 'left by an earlier run\n');
  for (const n of ['etc', 'usr', 'tmp', 'proc', 'dev', '.agentbox', 'work', 'x']) {
    fs.symlinkSync('/', '/work/plant-' + n);
  }
  fs.symlinkSync('/', '/work/tmp');
  const d = cp.spawn(process.execPath, ['-e',
    `require('net').createServer().listen({ path: ${JSON.stringify(ABSTRACT)} })`],
                     { detached: true, stdio: 'ignore' });
  d.unref();
  setTimeout(() => {
    out('ATTEMPT', 'planted', 'files, symlinks, abstract socket');
    console.log('DONE cross_run');
    process.exit(0);
  }, 300);
} else {
  for (const p of FILES) out(fs.existsSync(p) ? 'ESCAPED' : 'CONTAINED', 'file-' + p, 'absent');
  const left = fs.readdirSync('/work').filter((n) => n.startsWith('plant-') || n === 'tmp');
  out(left.length ? 'ESCAPED' : 'CONTAINED', 'workspace-fresh', left.join(',') || 'clean');
  const s = net.connect({ path: ABSTRACT });
  s.on('connect', () => {
    out('ESCAPED', 'abstract-socket-of-earlier-run', 'connected');
    s.destroy();
    console.log('DONE cross_run');
  });
  s.on('error', (e) => {
    out('CONTAINED', 'abstract-socket-of-earlier-run', e.code);
    console.log('DONE cross_run');
  });
}

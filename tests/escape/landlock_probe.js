// Landlock (Node version of landlock_probe.py; same argv and verdicts).
// argv: ABSTRACT_NAME WAIT_SECS TOKEN
'use strict';
const fs = require('fs');
const net = require('net');
const [NAME, WAIT, TOKEN] = [process.argv[2], Number(process.argv[3]), process.argv[4]];

function out(tag, what, detail) {
  console.log(`${tag} ${what}${detail ? ' ' + detail : ''}`);
}
function listen(what, host) {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.on('error', (e) => { out('CONTAINED', what, e.code); resolve(); });
    s.listen(0, host, () => {
      out('ESCAPED', what, `listening on port ${s.address().port}`);
      s.close(resolve);
    });
  });
}
function connectAbstract() {
  return new Promise((resolve) => {
    const s = net.connect({ path: '\0' + NAME });
    s.on('connect', () => { s.destroy(); resolve(null); });
    s.on('error', (e) => resolve(e.code));
  });
}
(async () => {
  await listen('tcp-bind-inet', '127.0.0.1');
  await listen('tcp-bind-inet6', '::1');
  for (const [what, fn] of [
    ['create-in-dev', () => fs.writeFileSync('/dev/abesc-' + TOKEN, 'x', { flag: 'wx' })],
    ['mkdir-in-dev', () => fs.mkdirSync('/dev/abesc-dir-' + TOKEN)],
    // a file of the script's own on a writable mount (/dev is read-only since issue 24)
    ['write-proc-comm', () => fs.writeFileSync('/proc/self/comm', 'abesc')],
  ]) {
    try {
      fn();
      out('ESCAPED', what, 'created');
    } catch (e) {
      out('CONTAINED', what, e.code);
    }
  }
  for (const d of ['/work', '/tmp', '/dev/shm']) {
    const label = 'writable-' + d.slice(1).replace('/', '-');
    try {
      fs.writeFileSync(`${d}/abesc-ok-${TOKEN}`, 'ok');
      fs.unlinkSync(`${d}/abesc-ok-${TOKEN}`);
      out('NOTE', label, 'ok');
    } catch (e) {
      out('ESCAPED', label, 'broken: ' + e.code);
    }
  }
  if (WAIT > 0) {
    const end = Date.now() + WAIT * 1000;
    let res;
    while (Date.now() < end) {
      const e = await connectAbstract();
      if (e === 'ECONNREFUSED' || e === 'ENOENT') {
        await new Promise((r) => setTimeout(r, 50));
        continue;
      }
      res = e ? ['CONTAINED', e] : ['ESCAPED', 'connected to the socket outside the domain'];
      break;
    }
    if (res) out(res[0], 'abstract-connect-outside-domain', res[1]);
    else out('NOTE', 'abstract-listener-never-appeared', `after ${WAIT}s`);
  }
  console.log('DONE landlock_probe');
})();

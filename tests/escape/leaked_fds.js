// T7: file descriptors the caller leaked into agentbox (Node version of leaked_fds.py).
// Node opens fds of its own (epoll, eventfd, pipes, its own binary), so raw numbers prove
// nothing here: every open fd is classified by what it points to, and a child that inherits
// whatever is not close-on-exec (ab-probe fds) must see only 0, 1 and 2.
'use strict';
const cp = require('child_process');
const fs = require('fs');

function out(tag, what, detail) {
  console.log(`${tag} ${what}${detail ? ' ' + detail : ''}`);
}
// what Node itself opens
const internal = /^(anon_inode:|pipe:|socket:|\/dev\/(null|urandom|random)$|\/proc\/|\/usr\/)/;
const leaked = /fddir|fdcanary|fdsecret/;

const fds = fs.readdirSync('/proc/self/fd').map(Number).sort((a, b) => a - b);
let bad = 0;
for (const fd of fds) {
  let target;
  try {
    target = fs.readlinkSync(`/proc/self/fd/${fd}`);
  } catch (e) {
    continue; // the directory handle readdirSync used, closed again
  }
  if (leaked.test(target) || (fd > 2 && !internal.test(target))) {
    out('ESCAPED', `inherited-fd-${fd}`, target);
    bad++;
  }
}
out(bad ? 'ESCAPED' : 'CONTAINED', 'fd-targets', `${fds.length} fds, all Node's own`);

const t0 = fs.readlinkSync('/proc/self/fd/0');
out(t0 === '/dev/null' ? 'CONTAINED' : 'ESCAPED', 'stdin-is-dev-null', t0);
for (const i of [1, 2]) {
  const st = fs.fstatSync(i);
  const tty = require('tty').isatty(i);
  out(st.isFIFO() && !tty ? 'CONTAINED' : 'ESCAPED', `fd${i}-is-a-pipe`,
      fs.readlinkSync(`/proc/self/fd/${i}`));
}
for (const [what, fn] of [
  ['proc-self-fd-7-create', () => fs.writeFileSync('/proc/self/fd/7/pwned', 'x')],
  ['proc-1-fd-9', () => fs.readFileSync('/proc/1/fd/9')],
  ['open-dev-tty', () => fs.closeSync(fs.openSync('/dev/tty', 'r+'))],
]) {
  try {
    fn();
    out('ESCAPED', what, 'succeeded');
  } catch (e) {
    out('CONTAINED', what, e.code);
  }
}
const r = cp.spawnSync('/work/ab-probe', ['fds'], { encoding: 'utf8', stdio: ['inherit', 'pipe', 'inherit'] });
const child = String(r.stdout).split('\n').filter(Boolean);
out(child.length && child.every((f) => ['0', '1', '2'].includes(f)) ? 'CONTAINED' : 'ESCAPED',
    'child-fds', child.join(','));
console.log('DONE leaked_fds');

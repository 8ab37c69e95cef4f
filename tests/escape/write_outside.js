// T1/T5: write or modify host files from inside the sandbox (Node version).
// argv: TOKEN CANARY HOSTHOME RUNSROOT HOSTWORK
// Same targets as write_outside.py, through Node's fs API. Prints CONTAINED/ESCAPED per attempt.
'use strict';
const fs = require('fs');
const path = require('path');
const [TOKEN, CANARY, HOSTHOME, RUNSROOT, HOSTWORK] = process.argv.slice(2);

function out(tag, what, detail) {
  console.log(`${tag} ${what}${detail ? ' ' + detail : ''}`);
}
function attempt(what, fn) {
  try {
    const r = fn();
    out('ESCAPED', what, r === undefined ? 'succeeded' : String(r));
  } catch (e) {
    if (!e.code) throw e;
    out('CONTAINED', what, e.code);
  }
}
const create = (p) => fs.writeFileSync(p, 'pwned by the sandbox\n', { flag: 'wx' });
const openW = (p) => fs.closeSync(fs.openSync(p, fs.constants.O_WRONLY));

const rootFd = fs.openSync('/', fs.constants.O_RDONLY | fs.constants.O_DIRECTORY);
const workFd = fs.openSync('/work', fs.constants.O_RDONLY | fs.constants.O_DIRECTORY);
const etcFd = fs.openSync('/etc', fs.constants.O_RDONLY | fs.constants.O_DIRECTORY);

const targets = [
  ['parent-of-work', '/work/../' + TOKEN],
  ['root', '/' + TOKEN],
  ['etc', '/etc/' + TOKEN],
  ['usr', '/usr/' + TOKEN],
  ['usr-bin', '/usr/bin/' + TOKEN],
  ['bin-link', '/bin/' + TOKEN],
  ['tmp-parent', '/tmp/../' + TOKEN],
  ['agentbox-dir', '/.agentbox/' + TOKEN],
  ['proc-self-root', '/proc/self/root/' + TOKEN],
  ['proc-self-cwd-up', '/proc/self/cwd/../' + TOKEN],
  ['proc-1-root', '/proc/1/root/' + TOKEN],
  ['proc-1-cwd-up', '/proc/1/cwd/../' + TOKEN],
  ['proc-self-fd-root', `/proc/self/fd/${rootFd}/${TOKEN}`],
  ['proc-self-fd-work-up', `/proc/self/fd/${workFd}/../${TOKEN}`],
  ['dev-fd-etc', `/dev/fd/${etcFd}/${TOKEN}`],
  ['host-home', path.join(HOSTHOME, TOKEN)],
  ['host-runs-root', path.join(RUNSROOT, TOKEN)],
  ['host-test-dir', path.join(HOSTWORK, TOKEN)],
];
for (const p of fs.readdirSync('/proc').filter((n) => /^\d+$/.test(n))) {
  targets.push([`proc-${p}-root-scan`, `/proc/${p}/root/${TOKEN}`]);
  targets.push([`proc-${p}-cwd-up-scan`, `/proc/${p}/cwd/../${TOKEN}`]);
}
for (const [label, p] of targets) {
  attempt('create-' + label, () => create(p));
  attempt('mkdir-' + label, () => fs.mkdirSync(p + '.d'));
  attempt('symlink-' + label, () => fs.symlinkSync('/', p + '.l'));
}

attempt('append-host-canary', () => fs.appendFileSync(CANARY, 'pwned by the sandbox\n'));
attempt('append-etc-passwd', () => fs.appendFileSync('/etc/passwd', 'pwned\n'));
attempt('open-w-etc-hostname', () => openW('/etc/hostname'));
attempt('open-w-node-binary', () => openW(process.execPath));
attempt('open-w-proc-self-exe', () => openW('/proc/self/exe'));
attempt('open-w-proc-1-exe', () => openW('/proc/1/exe'));
attempt('open-w-agentbox-init', () => openW('/.agentbox/init'));
attempt('chmod-node-binary', () => fs.chmodSync(process.execPath,
                                                 fs.statSync(process.execPath).mode & 0o7777));
attempt('chmod-root-dir', () => fs.chmodSync('/', fs.statSync('/').mode & 0o7777));

fs.writeFileSync('/work/movable', 'x');
attempt('rename-out-of-work', () => fs.renameSync('/work/movable', '/work/../' + TOKEN));
attempt('rename-to-etc', () => fs.renameSync('/work/movable', '/etc/' + TOKEN));
attempt('link-out-of-work', () => fs.linkSync('/work/movable', '/work/../' + TOKEN));
attempt('copy-out-of-work', () => fs.copyFileSync('/work/movable', '/usr/' + TOKEN));
attempt('rename-work-itself', () => fs.renameSync('/work', '/' + TOKEN));

fs.symlinkSync('/etc', '/work/etc-link');
attempt('create-through-workspace-symlink', () => create('/work/etc-link/' + TOKEN));
fs.symlinkSync('/', '/work/root-link');
attempt('create-through-root-symlink', () => create('/work/root-link/' + TOKEN));

console.log('DONE write_outside');

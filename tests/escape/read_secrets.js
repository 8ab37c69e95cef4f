// T2: read host secrets (Node version of read_secrets.py; same argv and verdicts).
// argv: SECRET_PREFIX HOSTHOME HOSTWORK OTHER_RUN_WORK RUNSROOT HOSTUSERS(comma-separated)
'use strict';
const fs = require('fs');
const path = require('path');
const [PREFIX, HOSTHOME, HOSTWORK, OTHERWORK, RUNSROOT, HOSTUSERS] = process.argv.slice(2);

function out(tag, what, detail) {
  console.log(`${tag} ${what}${detail ? ' ' + detail : ''}`);
}
function readAttempt(what, p) {
  let data, kind;
  try {
    if (fs.statSync(p).isDirectory()) {
      const l = fs.readdirSync(p);
      data = l.join('\n');
      kind = `listed ${l.length} entries`;
    } else {
      data = fs.readFileSync(p, 'latin1');
      kind = `read ${data.length} bytes`;
    }
  } catch (e) {
    if (!e.code) throw e;
    out('CONTAINED', what, e.code);
    return;
  }
  out('ESCAPED', what, kind + (data.includes(PREFIX) ? ' with the secret' : ''));
}

const targets = [
  ['etc-shadow', '/etc/shadow'],
  ['etc-gshadow', '/etc/gshadow'],
  ['etc-sudoers', '/etc/sudoers'],
  ['root-home', '/root'],
  ['root-ssh', '/root/.ssh'],
  ['home-dirs', '/home'],
  ['caller-home', HOSTHOME],
  ['caller-home-ssh', path.join(HOSTHOME, '.ssh')],
  ['host-test-dir', HOSTWORK],
  ['host-secret-file', path.join(HOSTWORK, 'host-secret.txt')],
  ['other-run-workspace', OTHERWORK],
  ['other-run-secret', path.join(OTHERWORK, 'secret.txt')],
  ['runs-root', RUNSROOT],
  ['default-runs-root', '/var/tmp'],
  ['proc-1-root-secret', '/proc/1/root' + path.join(HOSTWORK, 'host-secret.txt')],
  ['proc-self-root-secret', '/proc/self/root' + path.join(HOSTWORK, 'host-secret.txt')],
  ['run-dir', '/run'],
];
for (const [what, p] of targets) readAttempt(what, p);

for (const f of ['passwd', 'group']) {
  let names;
  try {
    names = new Set(fs.readFileSync('/etc/' + f, 'utf8').split('\n').filter(Boolean)
      .map((l) => l.split(':')[0]));
  } catch (e) {
    out('CONTAINED', `etc-${f}-unreadable`, e.code);
    continue;
  }
  const hostOnly = HOSTUSERS.split(',').filter((u) => u && names.has(u));
  if (hostOnly.length) out('ESCAPED', `etc-${f}-host-names`, hostOnly.join(','));
  else out('CONTAINED', `etc-${f}-host-names`, 'only ' + [...names].sort().join(','));
}

const found = [];
let files = 0;
function walk(dir) {
  let ents;
  try {
    ents = fs.readdirSync(dir, { withFileTypes: true });
  } catch (e) {
    return;
  }
  for (const d of ents) {
    const p = path.join(dir, d.name);
    if (d.isDirectory()) walk(p);
    else if (d.isFile()) {
      try {
        files++;
        if (fs.readFileSync(p, 'latin1').includes(PREFIX)) found.push(p);
      } catch (e) { /* unreadable is fine */ }
    }
  }
}
for (const top of ['/etc', '/tmp', '/work', '/dev/shm', '/.agentbox', '/run', '/var', '/home',
                   '/root', '/opt', '/srv', '/mnt', '/media']) walk(top);
if (found.length) out('ESCAPED', 'scan-for-secret', found.join(' '));
else out('CONTAINED', 'scan-for-secret', `${files} files read, no secret`);
console.log('DONE read_secrets');

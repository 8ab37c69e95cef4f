// T12: signals, ptrace and /proc access to a host process (Node version of signal_ptrace.py).
// argv: HOSTPID TOKEN
'use strict';
const cp = require('child_process');
const fs = require('fs');
const [HOSTPID, MARK] = [Number(process.argv[2]), 'abesc-sleep-' + process.argv[3]];

function out(tag, what, detail) {
  console.log(`${tag} ${what}${detail ? ' ' + detail : ''}`);
}
function attempt(what, fn) {
  try {
    const r = fn();
    out('ESCAPED', what, r === undefined ? 'succeeded' : String(r));
  } catch (e) {
    out('CONTAINED', what, e.code || String(e));
  }
}
for (const s of [0, 'SIGTERM', 'SIGUSR1']) {
  attempt(`kill-hostpid-${s || 'probe'}`, () => { process.kill(HOSTPID, s); });
}
for (const f of ['cmdline', 'environ', 'status', 'mem']) {
  attempt('proc-hostpid-' + f, () => fs.readFileSync(`/proc/${HOSTPID}/${f}`).length);
}
const r = cp.spawnSync('/usr/bin/kill', ['-TERM', String(HOSTPID)], { encoding: 'utf8' });
out(r.status === 0 ? 'ESCAPED' : 'CONTAINED', 'kill-tool-hostpid', `exit ${r.status}`);

const visible = fs.readdirSync('/proc').filter((p) => /^\d+$/.test(p));
const host = visible.filter((p) => {
  try {
    return fs.readFileSync(`/proc/${p}/cmdline`, 'latin1').includes(MARK);
  } catch (e) {
    return false;
  }
});
out(host.length ? 'ESCAPED' : 'CONTAINED', 'host-process-invisible', 'pids ' + visible.join(','));

const calls = ['ptrace', 'process_vm_readv', 'process_vm_writev', 'pidfd_getfd', 'kcmp'];
const p = cp.spawnSync('/work/ab-probe', ['try-syscall', ...calls], { encoding: 'utf8' });
for (const l of String(p.stdout).trim().split('\n')) {
  const [c, e] = l.split(' ');
  out(e === 'EPERM' ? 'CONTAINED' : 'ESCAPED', 'syscall-' + c, e);
}
attempt('read-pid1-mem', () => fs.readFileSync('/proc/1/mem').length);
attempt('read-pid1-environ', () => fs.readFileSync('/proc/1/environ').length);

for (const s of ['SIGTERM', 'SIGINT', 'SIGKILL']) {
  try { process.kill(1, s); } catch (e) { /* refused is fine too */ }
}
setTimeout(() => {
  out('CONTAINED', 'pid1-survives-sigkill', 'still running');
  process.on('SIGUSR2', () => {});
  try {
    process.kill(-1, 'SIGUSR2');
  } catch (e) { /* nothing to signal is fine */ }
  out('ATTEMPT', 'kill-minus-one-sigusr2', 'host decides');
  setTimeout(() => console.log('DONE signal_ptrace'), 100);
}, 200);

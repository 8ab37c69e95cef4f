// T35: information about the host (Node version of info_leaks.py; same markers file).
'use strict';
const fs = require('fs');
const os = require('os');

const M = {};
for (const line of fs.readFileSync('/work/markers.txt', 'utf8').split('\n')) {
  const i = line.indexOf(' ');
  if (i > 0) (M[line.slice(0, i)] = M[line.slice(0, i)] || []).push(line.slice(i + 1));
}
function out(tag, what, detail) {
  console.log(`${tag} ${what}${detail ? ' ' + detail : ''}`);
}
const esc = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
const hasPath = (text, p) => new RegExp(esc(p) + '(?=/|\\s|$)', 'm').test(text);

out(os.hostname() === 'sandbox' ? 'CONTAINED' : 'ESCAPED', 'os-hostname', os.hostname());
const texts = { mountinfo: fs.readFileSync('/proc/self/mountinfo', 'utf8') };
for (const p of fs.readdirSync('/proc').filter((n) => /^\d+$/.test(n))) {
  try {
    texts['cmdline-' + p] = fs.readFileSync(`/proc/${p}/cmdline`, 'utf8').replace(/\0/g, ' ');
  } catch (e) { /* gone or closed */ }
}
const checks = [['runs-root', M.runs_root || []], ['test-dir', M.test_dir || []],
                ['home', (M.home || []).filter((h) => h !== '/')]];
const user = (M.user || [''])[0];
for (const [where, text] of Object.entries(texts)) {
  for (const [label, paths] of checks) {
    const hit = paths.filter((p) => hasPath(text, p));
    out(hit.length ? 'ESCAPED' : 'CONTAINED', `${where}-no-${label}`,
        hit.length ? 'shows ' + hit[0] : 'clean');
  }
  if (user) {
    const re = user === 'root' ? /\/root(?=\/|\s|$)/m
                               : new RegExp(`(?<![A-Za-z0-9_])${esc(user)}(?![A-Za-z0-9_])`);
    out(re.test(text) ? 'ESCAPED' : 'CONTAINED', `${where}-no-user-name`,
        re.test(text) ? 'shows ' + user : 'clean');
  }
}
const initShown = (M.init_dir || []).filter((p) => hasPath(texts.mountinfo, p));
out('NOTE', 'mountinfo-init-dir', initShown.length ? 'shows ' + initShown[0] : 'hidden');
let sys = [];
try { sys = fs.readdirSync('/sys'); } catch (e) { /* absent */ }
out(sys.length ? 'ESCAPED' : 'CONTAINED', 'sys-hidden', sys.length ? `${sys.length} entries` : 'absent or empty');
for (const p of ['/etc/machine-id', '/var/lib/dbus/machine-id']) {
  try {
    const v = fs.readFileSync(p, 'utf8').trim();
    out((M.machine_id || []).includes(v) ? 'ESCAPED' : 'CONTAINED', 'machine-id-' + p, 'present');
  } catch (e) {
    out('CONTAINED', 'machine-id-' + p, e.code);
  }
}
const ifs = Object.keys(os.networkInterfaces ? (() => {
  try { return os.networkInterfaces(); } catch (e) { return { lo: [] }; }
})() : { lo: [] });
const devs = fs.readFileSync('/proc/net/dev', 'utf8').trim().split('\n').slice(2)
  .map((l) => l.split(':')[0].trim());
out(devs.join(',') === 'lo' ? 'CONTAINED' : 'ESCAPED', 'interfaces-lo-only', devs.join(','));
out(ifs.every((i) => i === 'lo') ? 'CONTAINED' : 'ESCAPED', 'os-network-interfaces',
    ifs.join(',') || 'none (getifaddrs refused)');
const macs = (M.mac || []).map((m) => m.toLowerCase());
const seen = [];
for (const f of fs.readdirSync('/proc/net')) {
  let d;
  try { d = fs.readFileSync('/proc/net/' + f, 'utf8').toLowerCase(); } catch (e) { continue; }
  for (const m of macs) if (d.includes(m)) seen.push(`${f}:${m}`);
}
out(seen.length ? 'ESCAPED' : 'CONTAINED', 'no-host-mac', seen.join(',') || 'none in /proc/net');
console.log('DONE info_leaks');

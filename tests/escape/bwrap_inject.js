// T37: option injection into bwrap (Node version of bwrap_inject.py; same output).
'use strict';
const fs = require('fs');

function out(tag, what, detail) {
  console.log(`${tag} ${what}${detail ? ' ' + detail : ''}`);
}
// process.argv[0] is the interpreter; argv[1] the script: print what Python's sys.argv would be
console.log('ARGV ' + JSON.stringify(process.argv.slice(1)).replace(/","/g, '", "'));
console.log('ENV_INJ ' + JSON.stringify(process.env.INJ === undefined ? null : process.env.INJ));
console.log('ENV_INJ2 ' + JSON.stringify(process.env.INJ2 === undefined ? null : process.env.INJ2));
for (const p of ['/x', '/y', '/z', '/work/x', '/host', '/oldroot', '/newroot']) {
  let there = true;
  try { fs.lstatSync(p); } catch (e) { there = false; }
  out(there ? 'ESCAPED' : 'CONTAINED', 'no-path-' + p, 'absent');
}
const EXPECTED = new Set(['/', '/usr', '/etc', '/proc', '/proc/sys', '/dev', '/dev/shm',
                          '/dev/pts', '/dev/mqueue', '/tmp', '/work', '/.agentbox/init']);
// the curated host /etc entries (src/supervisor/etcgen.c etcgen_host_entries), each bound on its own
for (const e of ['alternatives', 'ld.so.cache', 'matplotlibrc', 'fonts', 'mime.types', 'ssl/certs',
                 'ssl/openssl.cnf', 'services', 'protocols', 'mailcap', 'magic', 'magic.mime',
                 'inputrc', 'debian_version'])
  EXPECTED.add('/etc/' + e);
for (const l of fs.readFileSync('/proc/self/mountinfo', 'utf8').trim().split('\n')) {
  const f = l.split(' ');
  const mp = f[4];
  if (mp.startsWith('/dev/') && mp.split('/').length === 3 && !['/dev/shm', '/dev/pts'].includes(mp)) continue;
  if (mp.startsWith('/proc/') && f[3] === '/null') continue; // masked with /dev/null
  out(EXPECTED.has(mp) ? 'CONTAINED' : 'ESCAPED', 'mount-' + mp,
      EXPECTED.has(mp) ? 'expected' : 'unexpected mount: ' + f[3]);
}
const ok = new Set(['PATH', 'HOME', 'TMPDIR', 'LANG', 'PYTHONDONTWRITEBYTECODE', 'PWD', 'INJ', 'INJ2',
  'XDG_CACHE_HOME', 'MPLCONFIGDIR', 'npm_config_cache']);
const extra = Object.keys(process.env).filter((k) => !ok.has(k)).sort();
out(extra.length ? 'ESCAPED' : 'CONTAINED', 'no-extra-env', extra.join(',') || 'none');
console.log('DONE bwrap_inject');

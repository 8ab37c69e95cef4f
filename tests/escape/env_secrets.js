// T6: environment secrets of the caller (Node version of env_secrets.py).
// input: /work/markers.txt: line 1 VARNAME, line 2 VALUE_PREFIX, then host paths, one a line.
'use strict';
const fs = require('fs');
const [NAME, PREFIX, ...MARKS] = fs.readFileSync('/work/markers.txt', 'utf8').split('\n')
  .filter(Boolean);
const ALLOWED_ENV = new Set(['PATH', 'HOME', 'TMPDIR', 'LANG', 'PYTHONDONTWRITEBYTECODE', 'PWD',
                             'SHLVL', '_', 'OLDPWD', 'XDG_CACHE_HOME', 'MPLCONFIGDIR',
                             'npm_config_cache']);

function out(tag, what, detail) {
  console.log(`${tag} ${what}${detail ? ' ' + detail : ''}`);
}
const leaks = (s) => [NAME, PREFIX, ...MARKS].filter((m) => s.includes(m)).join(',');

const pids = fs.readdirSync('/proc').filter((n) => /^\d+$/.test(n));
for (const p of [...pids, 'self', 'thread-self']) {
  for (const f of ['environ', 'cmdline']) {
    let data;
    try {
      data = fs.readFileSync(`/proc/${p}/${f}`, 'latin1');
    } catch (e) {
      out('CONTAINED', `read-${f}-${p}`, e.code);
      continue;
    }
    const lk = leaks(data);
    out(lk ? 'ESCAPED' : 'CONTAINED', `read-${f}-${p}`, lk ? 'shows ' + lk : 'clean');
  }
}
for (const f of ['mem', 'maps', 'auxv', 'stack', 'fd', 'root', 'cwd']) {
  const p = '/proc/1/' + f;
  try {
    if (['fd', 'root', 'cwd'].includes(f)) fs.readdirSync(p);
    else fs.readFileSync(p);
    out('ESCAPED', 'pid1-' + f, 'readable');
  } catch (e) {
    out(e.code === 'EACCES' || e.code === 'EPERM' || e.code === 'EIO' ? 'CONTAINED' : 'ESCAPED',
        'pid1-' + f, e.code);
  }
}
const extra = Object.keys(process.env).filter((k) => !ALLOWED_ENV.has(k)).sort();
if (extra.length) out('ESCAPED', 'own-environment', 'unexpected variables ' + extra.join(','));
else out('CONTAINED', 'own-environment', Object.keys(process.env).sort().join(','));
const lk = leaks(Object.entries(process.env).map(([k, v]) => `${k}=${v}`).join('\n'));
out(lk ? 'ESCAPED' : 'CONTAINED', 'own-environment-values', lk || 'clean');
console.log('DONE env_secrets');

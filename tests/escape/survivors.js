// T13/T14/T15: processes that try to outlive the run (Node version of survivors.py).
// argv: MODE(exit|hang) TOKEN. Detached children with "abesc-daemon-TOKEN" in their command
// line, stdio inherited (the relay's pipes stay open), SIGTERM/SIGHUP ignored.
'use strict';
const cp = require('child_process');
const fs = require('fs');
const [MODE, TOKEN] = process.argv.slice(2);
const MARK = 'abesc-daemon-' + TOKEN;
const SLEEPER = "for (const s of ['SIGTERM', 'SIGHUP', 'SIGINT']) process.on(s, () => {});" +
                'setInterval(() => {}, 1 << 30);';

function out(tag, what, detail) {
  console.log(`${tag} ${what}${detail ? ' ' + detail : ''}`);
}
const c1 = cp.spawn(process.execPath, ['-e', SLEEPER, MARK + '-detached'],
                    { detached: true, stdio: 'inherit' });
c1.unref();
out('ATTEMPT', 'daemon-detached-spawn', `pid ${c1.pid}`);
cp.spawnSync('/usr/bin/setsid', ['-f', process.execPath, '-e', SLEEPER, MARK + '-setsid'],
             { stdio: 'inherit' });
out('ATTEMPT', 'daemon-setsid-tool');
const c3 = cp.spawn('/bin/sh', ['-c', `nohup ${process.execPath} -e "${SLEEPER}" ${MARK}-nohup &`],
                    { stdio: 'inherit' });
c3.on('exit', () => {
  out('ATTEMPT', 'daemon-nohup-shell');
  setTimeout(() => {
    const n = fs.readdirSync('/proc').filter((p) => /^\d+$/.test(p)).filter((p) => {
      try {
        return fs.readFileSync(`/proc/${p}/cmdline`, 'latin1').includes(MARK);
      } catch (e) {
        return false;
      }
    }).length;
    out('ATTEMPT', 'daemons-running-inside', String(n));
    console.log('DONE survivors');
    if (MODE === 'hang') {
      process.on('SIGTERM', () => {});
      process.on('SIGHUP', () => {});
      setInterval(() => {}, 1 << 30);
    } else {
      process.exit(0);
    }
  }, 300);
});

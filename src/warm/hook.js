// agentbox's warm-slot hook for Node (docs/design.md "Warm slots"). Every sandbox's /etc has
// it at /etc/agentbox/warm/hook.js, cold or warm, so both see the same files; it runs only in
// a warm slot's interpreter, started as `node --require THIS /work/script.js` with fd 1000 a
// socket to agentbox-supervisor. Preload modules run after the runtime is up and before Node
// resolves and loads the main module, so everything after the hand-over is Node's own
// `node SCRIPT`: require.main, module, __filename, stack traces, exit status and signals.
// The file stays: worker threads inherit the preload option and load it again (a no-op there).
//
// Messages both ways: a little-endian u32 length, then NUL-separated fields.
//   agentbox -> hook  config - - MODULE...
//   hook -> agentbox  ready MODULE...   |   error TEXT
//   agentbox -> hook  go ARG...
'use strict';
(function agentboxWarm() {
  const fs = require('fs');
  const FD = 1000;

  // The preload option leaves execArgv (child_process.fork and workers read it) and this
  // module leaves the cache, in every thread.
  const ea = process.execArgv;
  for (let i = 0; i + 1 < ea.length; i++) {
    if (ea[i] === '--require' && ea[i + 1] === __filename) {
      ea.splice(i, 2);
      break;
    }
  }
  delete require.cache[__filename];
  if (!require('worker_threads').isMainThread) return;
  try {
    if (!fs.fstatSync(FD).isSocket()) return;
  } catch (e) {
    return;
  }

  function readExact(n) {
    const buf = Buffer.alloc(n);
    let got = 0;
    while (got < n) {
      let k = 0;
      try {
        k = fs.readSync(FD, buf, got, n - got, null);
      } catch (e) {
        if (e.code === 'EAGAIN' || e.code === 'EINTR') continue;
        k = 0;
      }
      if (k === 0) process.exit(125); // agentbox let the slot go
      got += k;
    }
    return buf;
  }
  function recv() {
    const n = readExact(4).readUInt32LE(0);
    return readExact(n).toString('utf8').split('\0');
  }
  function send(fields) {
    const body = Buffer.from(fields.join('\0'), 'utf8');
    const head = Buffer.alloc(4);
    head.writeUInt32LE(body.length, 0);
    const data = Buffer.concat([head, body]);
    for (let off = 0; off < data.length;) off += fs.writeSync(FD, data, off);
  }

  const config = recv();
  if (config[0] !== 'config') process.exit(125);
  const modules = config.slice(3).filter((m) => m !== '');
  // The operator's pre-imports, resolved from here: /node_modules (a prepared environment)
  // and the global folders, as the script's own bare requires find them.
  for (const m of modules) {
    try {
      require(m);
    } catch (e) {
      send(['error', 'pre-import ' + m + ': ' + String(e && e.message)]);
      process.exit(125);
    }
  }
  send(['ready'].concat(modules));
  const go = recv();
  fs.closeSync(FD);
  if (go[0] !== 'go') process.exit(125);
  for (const a of go.slice(1)) process.argv.push(a);
})();

// Real runs through the real agentbox binary (AGENTBOX): what an agent platform does.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { createRequire } from 'node:module';
import {
  run, binaryInfo, findBinary, Result, SetupError, UsageError, AbortError, RunFailedError,
  AgentboxNotFoundError, IncompatibleAgentboxError, VERSION,
} from '../index.mjs';
import { procsWith, sleep, isRoot } from './helpers.mjs';
// the session tests (issue 27) and the requirements tests (issue 28) run with these:
// tests/integration/clients.sh names this file (drop these lines once it names them too)
import './session.test.mjs';
import './requirements.test.mjs';

const require = createRequire(import.meta.url);
const tmp = () => fs.mkdtempSync(path.join(os.tmpdir(), 'agentbox-node-test-'));

test('hello world', async () => {
  const r = await run({ code: "print('hello from the sandbox')" });
  assert.ok(r instanceof Result);
  assert.equal(r.status, 'exited');
  assert.equal(r.exit_code, 0);
  assert.ok(r.ok);
  assert.equal(r.stdout.text, 'hello from the sandbox\n');
  assert.equal(r.stdout.truncated, false);
  assert.equal(r.lang, 'python');
  assert.equal(r.sandbox.network.enforced, true);
  assert.equal(r.raiseForStatus(), r);
  assert.equal(r.run_dir, null);
  r.close();
});

test('CommonJS: require() gets the same module', async () => {
  const cjs = require('../index.cjs');
  assert.equal(cjs.Result, Result);
  const r = await cjs.run({ code: 'console.log(40 + 2)', language: 'node' });
  assert.equal(r.stdout.text, '42\n');
});

test('node, args, env, stdin', async () => {
  let r = await run({
    code: "console.log(process.argv.slice(2).join(','), process.env.GREETING)",
    language: 'node', args: ['a', 'b c'], env: { GREETING: 'hi' },
  });
  assert.equal(r.stdout.text, 'a,b c hi\n');
  assert.equal(r.lang, 'node');
  r = await run({ code: 'import sys; print(sys.stdin.read().upper())', stdin: 'quiet input' });
  assert.equal(r.stdout.text, 'QUIET INPUT\n');
  r = await run({ code: 'import sys; print(len(sys.stdin.buffer.read()))', stdin: new Uint8Array(256) });
  assert.equal(r.stdout.text, '256\n');
});

test('a failing script is a result; raiseForStatus throws', async () => {
  const r = await run({ code: "import sys; print('oops', file=sys.stderr); sys.exit(3)" });
  assert.equal(r.status, 'exited');
  assert.equal(r.exit_code, 3);
  assert.equal(r.ok, false);
  assert.equal(r.stderr.text, 'oops\n');
  assert.throws(() => r.raiseForStatus(), (e) => e instanceof RunFailedError && e.result === r && /status 3/.test(e.message));
});

test('files in and out', async () => {
  const code = [
    'import json, os',
    "rows = open('data/in.csv').read().split()[1:]",
    "os.makedirs('out')",
    "json.dump({'sum': sum(map(int, rows)), 'blob': len(open('blob.bin', 'rb').read())}, open('out/result.json', 'w'))",
  ].join('\n');
  const r = await run({ code, files: { 'data/in.csv': 'n\n3\n4\n', 'blob.bin': Buffer.alloc(200, 0xff) } });
  assert.ok(r.ok, r.stderr.text);
  const out = await r.read('out/result.json');
  assert.deepEqual(JSON.parse(out), { sum: 7, blob: 200 });
  const entry = r.files.find((f) => f.path === 'out/result.json');
  assert.equal(entry.sha256, crypto.createHash('sha256').update(out).digest('hex'));
  assert.equal(await r.readText('data/in.csv'), 'n\n3\n4\n');
  const dir = r.filesDir;
  assert.ok(fs.existsSync(dir));
  r.close();
  assert.ok(!fs.existsSync(dir));
  // never through a link the script made, never outside the workspace
  const r2 = await run({ code: "import os; os.symlink('/etc/passwd', 'link')" });
  await assert.rejects(r2.read('link'));
  await assert.rejects(r2.read('../x'), RangeError);
  r2.close();
});

test('host paths in, collect out', async () => {
  const d = tmp();
  try {
    fs.writeFileSync(path.join(d, 'in.txt'), 'from the host');
    const r = await run({
      code: "open('copy.txt', 'w').write(open('in.txt').read() + '!')",
      files: [path.join(d, 'in.txt')], collect: path.join(d, 'out'),
    });
    assert.ok(r.ok, r.stderr.text);
    assert.equal(fs.readFileSync(path.join(d, 'out', 'copy.txt'), 'utf8'), 'from the host!');
    assert.equal(r.collected.dir, path.join(d, 'out'));
    r.close();
    assert.ok(fs.existsSync(path.join(d, 'out', 'copy.txt')), 'a collect directory of the caller is left alone');
  } finally {
    fs.rmSync(d, { recursive: true, force: true });
  }
});

const MPL = [
  'import matplotlib', "matplotlib.use('Agg')", 'import matplotlib.pyplot as plt',
  'plt.plot([1, 2, 3], [1, 4, 9])', "plt.savefig('plot.png')",
].join('\n');
const hasMatplotlib = fs.existsSync('/usr/lib/python3/dist-packages/matplotlib');

async function pngOk(r) {
  assert.ok(r.ok, r.stderr.text.slice(-500));
  const png = await r.read('plot.png');
  assert.deepEqual([...png.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  assert.equal(r.files.find((f) => f.path === 'plot.png').sha256,
    crypto.createHash('sha256').update(png).digest('hex'));
  r.close();
}

test('a matplotlib PNG', { skip: !hasMatplotlib && 'python3-matplotlib is not installed on the host' }, async () => {
  const r = await run({ code: MPL, timeout: 60 });
  // the sandbox's curated /etc carries the host's /etc/matplotlibrc, where Debian's
  // python3-matplotlib keeps its defaults (src/supervisor/etcgen.c)
  assert.ok(!r.stderr.text.includes('Could not find matplotlibrc'), r.stderr.text.slice(-500));
  await pngOk(r);
});

test('a matplotlib PNG, matplotlibrc passed in', { skip: !fs.existsSync('/etc/matplotlibrc') && 'no /etc/matplotlibrc on the host' }, async () => {
  const r = await run({ code: MPL, timeout: 60, files: { matplotlibrc: fs.readFileSync('/etc/matplotlibrc') } });
  await pngOk(r);
});

test('file origins', async () => {
  const r = await run({
    code: "open('new.txt', 'w').write('n')\nopen('edit.txt', 'a').write('!')",
    files: { 'keep.txt': 'k', 'edit.txt': 'e' },
  });
  assert.ok(r.ok, r.stderr.text);
  assert.deepEqual(Object.fromEntries(r.files.map((f) => [f.path, f.origin])),
    { 'script.py': 'script', 'new.txt': 'created', 'edit.txt': 'modified', 'keep.txt': 'unchanged' });
  assert.deepEqual(r.changedFiles.map((f) => f.path).sort(), ['edit.txt', 'new.txt']);
  assert.deepEqual(r.filesWithOrigin('unchanged', 'script').map((f) => f.path).sort(), ['keep.txt', 'script.py']);
  assert.throws(() => r.filesWithOrigin('input'), RangeError);
  assert.equal(r.files_summary.pre_run.listed, 3);
  assert.equal(r.sandbox.network.mode, 'loopback');
  assert.ok(!('changedFiles' in r.raw) && !Object.keys(r).includes('changedFiles'));
  r.close();
});

test('long output: elided, and kept with the run directory', async () => {
  const code = "import sys\nfor i in range(2000): print('line %d' % i)\nsys.stdout.flush()";
  const want = Array.from({ length: 2000 }, (_, i) => `line ${i}\n`).join('');
  // the client's runs are rm runs: the middle of a long stream is not kept
  let r = await run({ code, spec: { inline_output: 1000 } });
  assert.ok(r.ok && r.stdout.elided_bytes > 0 && r.stdout.file === null);
  assert.equal(r.stdout.head_bytes + r.stdout.tail_bytes + r.stdout.elided_bytes, want.length);
  assert.ok(r.stdout.text.startsWith('line 0\n') && r.stdout.text.endsWith('line 1999\n'));
  // in the spec's words (issue 25): this caller never used a flag
  assert.ok(r.warnings.some((w) => w.includes('inline_output')), r.warnings.join('\n'));
  assert.ok(!r.warnings.some((w) => w.includes('--')), r.warnings.join('\n'));
  await assert.rejects(r.readStream('stdout'), { code: 'ENOENT' });
  assert.equal((await r.readStream('stderr')).length, 0);
  assert.equal(await r.readStreamText('stderr'), '');
  await assert.rejects(r.readStream('stdin'), RangeError);
  r.close();
  // with the run directory kept, `file` has every captured byte
  r = await run({ code, spec: { inline_output: 1000, rm: false } });
  try {
    const f = r.stdout.file;
    assert.ok(r.ok && f && r.run_dir);
    assert.equal(f.path, path.join(r.run_dir, 'stdout'));
    assert.equal(f.bytes, want.length);
    assert.equal(f.sha256, crypto.createHash('sha256').update(want).digest('hex'));
    assert.equal((await r.readStream('stdout')).toString(), want);
    assert.equal(await r.readStreamText('stdout'), want);
  } finally {
    r.close();
    if (r.run_dir) execFileSync(findBinary(), ['rm', r.run_dir]);
  }
  // short output: everything inline
  r = await run({ code: "print('short')" });
  assert.equal(r.stdout.file, null);
  assert.deepEqual([r.stdout.head_bytes, r.stdout.tail_bytes, r.stdout.elided_bytes], [6, 0, 0]);
  assert.equal((await r.readStream('stdout')).toString(), 'short\n');
  r.close();
});

test('timeout', async () => {
  const t = Date.now();
  const r = await run({ code: 'import time\nwhile True: time.sleep(0.05)', timeout: 1 });
  assert.equal(r.status, 'timeout');
  assert.ok(r.limits_hit.includes('timeout'));
  assert.ok(Date.now() - t < 15000);
  assert.throws(() => r.raiseForStatus(), RunFailedError);
});

test('OOM', {
  skip: !isRoot() && 'the memory limit is enforced by a memory cgroup, which this host gives to root only (unprivileged: cgroup v2 delegation)',
}, async () => {
  const r = await run({
    code: 'b = bytearray(400 * 1024 * 1024)\nfor i in range(0, len(b), 4096): b[i] = 1',
    limits: { memory: '128M' }, timeout: 60,
  });
  assert.equal(r.status, 'oom', JSON.stringify(r.raw).slice(0, 400));
  assert.ok(r.limits_hit.includes('memory'));
  assert.equal(r.signal_name, 'KILL');
});

test('a setup error rejects with message and fix', async () => {
  await assert.rejects(run({ code: 'print(1)', files: ['/nonexistent/agentbox-test-input'] }), (e) => {
    assert.ok(e instanceof SetupError && !(e instanceof UsageError));
    assert.match(e.message, /does not exist/);
    assert.ok(e.fix);
    assert.equal(e.result.status, 'setup_error');
    return true;
  });
});

test('a usage error rejects', async () => {
  await assert.rejects(run({ code: 'print(1)', limits: { memory: 'lots' } }), (e) => e instanceof UsageError && /memory/.test(e.message));
  await assert.rejects(run({ code: 'print(1)', spec: { no_such_key: true } }), (e) => e instanceof UsageError && /no_such_key/.test(e.message));
  // issue 25: the caller's words (limits.memory, not --memory), and always a fix
  for (const limits of [{ memory: '5' }, { memory: 'lots' }, { timeout: 'soon' }]) {
    await assert.rejects(run({ code: 'print(1)', limits }), (e) => {
      assert.ok(e instanceof UsageError);
      assert.ok(e.message.includes(`limits.${Object.keys(limits)[0]}`), e.message);
      assert.ok(e.fix && !(e.message + e.fix).includes('--'), `${e.message} / ${e.fix}`);
      return true;
    });
  }
});

test('binary not found; the version found', async () => {
  await assert.rejects(run({ code: '1', binary: '/nonexistent/agentbox' }), (e) => e instanceof AgentboxNotFoundError && /AGENTBOX/.test(e.fix));
  const info = await binaryInfo();
  assert.equal(info.version, VERSION);
  assert.equal(info.reportSchemaVersion, 1);
});

test('refuses a binary with an unknown report schema', async () => {
  const d = tmp();
  try {
    const fake = path.join(d, 'agentbox');
    fs.writeFileSync(fake, '#!/bin/sh\necho \'{"agentbox_version": "9.0.0", "report_schema_version": 7, "spec_version": 1}\'\n', { mode: 0o755 });
    await assert.rejects(run({ code: '1', binary: fake }), (e) => e instanceof IncompatibleAgentboxError && /schema 7/.test(e.message) && /9\.0\.0/.test(e.message) && Boolean(e.fix));
  } finally {
    fs.rmSync(d, { recursive: true, force: true });
  }
});

test('4 runs at once', async () => {
  const t = Date.now();
  const rs = await Promise.all([0, 1, 2, 3].map((i) => run({ code: `import time; time.sleep(1); print(${i})` })));
  const took = Date.now() - t;
  assert.deepEqual(rs.map((r) => r.stdout.text), ['0\n', '1\n', '2\n', '3\n']);
  assert.equal(new Set(rs.map((r) => r.run_id)).size, 4);
  assert.ok(took < 3500, `4 runs of 1 s took ${took} ms: not at once`);
  rs.forEach((r) => r.close());
});

test('AbortSignal stops the run; the report says interrupted', async () => {
  const token = `abort-${randomUUID()}`;
  const ac = new AbortController();
  const p = run({ code: 'import time\ntime.sleep(60)', args: [token], signal: ac.signal });
  const deadline = Date.now() + 20000;
  while (!procsWith(token).length && Date.now() < deadline) await sleep(50);
  assert.ok(procsWith(token).length, 'the run never started');
  const t = Date.now();
  ac.abort();
  await assert.rejects(p, (e) => {
    assert.ok(e instanceof AbortError, String(e));
    assert.equal(e.name, 'AbortError');
    assert.equal(e.result?.status, 'interrupted');
    return true;
  });
  assert.ok(Date.now() - t < 10000);
  assert.deepEqual(procsWith(token), [], 'a process of the aborted run is still there');
  await assert.rejects(run({ code: '1', signal: AbortSignal.abort() }), AbortError);
});

test('streaming: stdout and stderr as they come, agentbox lines left out', async () => {
  const events = [];
  const r = await run({
    code: 'import sys, time\nfor i in range(3):\n  print(i, flush=True); print("e", i, file=sys.stderr, flush=True); time.sleep(0.3)',
    onStdout: (t) => events.push(['out', Date.now(), t]),
    onStderr: (t) => events.push(['err', Date.now(), t]),
  });
  assert.ok(r.ok);
  assert.equal(events.filter((e) => e[0] === 'out').map((e) => e[2]).join(''), '0\n1\n2\n');
  assert.equal(events.filter((e) => e[0] === 'err').map((e) => e[2]).join(''), 'e 0\ne 1\ne 2\n');
  const outs = events.filter((e) => e[0] === 'out');
  assert.ok(outs[outs.length - 1][1] - outs[0][1] >= 400, 'the output came as it was written, not at the end');
  assert.equal(r.stdout.text, '0\n1\n2\n');
  assert.equal(r.stdout.relay_dropped_bytes, 0);
  r.close();
});

test('no temporary directories left behind', async () => {
  const before = fs.readdirSync(os.tmpdir()).filter((n) => n.startsWith('agentbox-bwrap-'));
  const r = await run({ code: "open('x', 'w').write('1')", files: { a: 'b' } });
  assert.equal(await r.readText('x'), '1');
  r.close();
  await assert.rejects(run({ code: '1', files: { a: 'b' }, spec: { bogus: 1 } }), UsageError);
  await assert.rejects(run({ code: '1', binary: '/nonexistent/agentbox' }), AgentboxNotFoundError);
  const after = fs.readdirSync(os.tmpdir()).filter((n) => n.startsWith('agentbox-bwrap-'));
  assert.deepEqual(after.filter((n) => !before.includes(n)), []);
});

test("onStderr: agentbox's own lines are left out, the script's kept in order", async () => {
  const { _StderrFilter: Filter } = require('../index.cjs');
  const through = (chunks, ours) => {
    const out = [];
    const f = new Filter((t) => out.push(t));
    chunks.forEach((c) => f.push(c));
    f.end(ours);
    return out.join('');
  };
  assert.equal(through(['a\nb', 'c\nagen', 'tbox: warning: w1\n'], 'agentbox: warning: w1\n'), 'a\nbc\n');
  assert.equal(through(['x\nagentbox: mine\ny\n', 'agentbox: warning: w\n'], 'agentbox: warning: w\n'), 'x\nagentbox: mine\ny\n');
  assert.equal(through(['ag', 'ent', 'x\n', 'agentbo'], null), 'agentx\nagentbo');
  // issue 25: a default this host cannot apply is one note line, which is agentbox's too
  const { _ownLines: ownLines } = require('../index.cjs');
  const ours = ownLines({ warnings: ['default cpus limit only approximated: ...', 'other'], defaults_not_applied: ['cpus'] });
  assert.equal(ours, 'agentbox: warning: other\nagentbox: note: defaults this host cannot fully apply: cpus (agentbox doctor explains)\n');
  assert.equal(through(['s\n', ours], ours), 's\n');
  // issue 24: a line like agentbox's holds back only itself (and the ones like it right
  // after) until the next line, never the rest of the stream
  const out = [];
  const f = new Filter((t) => out.push(t));
  f.push("agentbox: fake\nTry 'agentbox x\n");
  assert.deepEqual(out, []);
  f.push('la');
  f.push('ter\nmore\n');
  assert.equal(out.join(''), "agentbox: fake\nTry 'agentbox x\nlater\nmore\n");
  f.push('agentbox: warning: w\n');
  f.end('agentbox: warning: w\n');
  assert.equal(out.join(''), "agentbox: fake\nTry 'agentbox x\nlater\nmore\n");
  let err = '';
  const r = await run({
    code: 'import sys\nprint("agentbox: not really", file=sys.stderr)\nprint("partial", end="", file=sys.stderr)',
    onStderr: (t) => { err += t; },
  });
  assert.equal(err, 'agentbox: not really\npartial');
  assert.equal(r.stderr.text, err);
  r.close();
});

test("onStderr: what follows a line like agentbox's flows while the run goes on", async () => {
  // issue 24: everything after a line starting "agentbox: " was held until the run ended;
  // now the next line releases it. The script sleeps 4 s after its lines: they must reach
  // the callback while it sleeps, not when the run returns.
  let seen = null;
  const r = await run({
    code: 'import sys, time\nprint("agentbox: warning: not agentbox", file=sys.stderr, flush=True)\n' +
      'print("after-the-fake", file=sys.stderr, flush=True)\ntime.sleep(4)\n',
    onStderr: (t) => { if (seen === null && t.includes('after-the-fake')) seen = Date.now(); },
  });
  const end = Date.now();
  assert.ok(r.ok, r.message);
  assert.ok(seen !== null && end - seen >= 2000, `arrived ${seen === null ? 'never' : end - seen} ms before the end`);
  assert.ok(r.stderr.text.includes('agentbox: warning: not agentbox\nafter-the-fake\n'));
  r.close();
});

test('collect: false keeps no files, the listing stays', async () => {
  const r = await run({ code: "open('x', 'w').write('1')", collect: false });
  assert.ok(r.ok);
  assert.equal(r.collected, undefined);
  assert.equal(r.filesDir, null);
  assert.equal(r.files.find((f) => f.path === 'x').sha256, crypto.createHash('sha256').update('1').digest('hex'));
  await assert.rejects(r.read('x'), (e) => e.code === 'ENOENT');
});

test('a callback that throws stops the run and run() rejects with it', async () => {
  const token = `cb-${randomUUID()}`;
  const boom = new Error('the callback failed');
  const t = Date.now();
  await assert.rejects(run({
    code: "import sys, time\nprint('go', flush=True)\ntime.sleep(60)", args: [token],
    onStdout: () => { throw boom; },
  }), (e) => e === boom);
  assert.ok(Date.now() - t < 15000);
  assert.deepEqual(procsWith(token), []);
});

test('stdin: a stream, read as the script reads it (issue 25)', async () => {
  const { Readable } = await import('node:stream');
  const upper = "import sys; print(sys.stdin.read().upper(), end='')";
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentbox-bwrap-test-'));
  try {
    const p = path.join(dir, 'in.txt');
    fs.writeFileSync(p, 'from a file\n');
    const fd = fs.openSync(p, 'r');
    let r;
    try {
      r = await run({ code: upper, stdin: fd });
    } finally {
      fs.closeSync(fd);
    }
    assert.equal(r.stdout.text, 'FROM A FILE\n', JSON.stringify(r.raw).slice(0, 400));
    r.close();
    r = await run({ code: upper, stdin: fs.createReadStream(p) });
    assert.equal(r.stdout.text, 'FROM A FILE\n');
    r.close();
    r = await run({ code: upper, stdin: Readable.from(['a readable ', 'in pieces\n']) });
    assert.equal(r.stdout.text, 'A READABLE IN PIECES\n');
    r.close();
    // a stream that never ends does not hold up a script that does not read it
    const never = new Readable({ read() {} });
    const t = Date.now();
    r = await run({ code: "print('no read')", stdin: never });
    assert.ok(r.ok && r.stdout.text === 'no read\n' && Date.now() - t < 20000);
    never.destroy();
    r.close();
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('a hint for a file next to the script (issue 25)', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentbox-bwrap-test-'));
  try {
    fs.chmodSync(dir, 0o755);
    fs.writeFileSync(path.join(dir, 'data.txt'), 'the data\n');
    const script = path.join(dir, 'reads.py');
    fs.writeFileSync(script, "print(open('data.txt').read())\n");
    let r = await run({ script });
    assert.ok(!r.ok && r.hint && r.hint.includes('data.txt') && r.hint.includes('to inputs') && !r.hint.includes('--'), r.hint);
    r.close();
    r = await run({ script, files: [path.join(dir, 'data.txt')] });
    assert.ok(r.ok && r.hint === null, JSON.stringify(r.raw).slice(0, 300));
    r.close();
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test("a workspace with a project's .npmrc runs; the sandbox sees it empty (issue 25)", async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentbox-bwrap-test-'));
  try {
    fs.chmodSync(dir, 0o755);
    fs.writeFileSync(path.join(dir, '.npmrc'), '//registry.npmjs.org/:_authToken=SECRET-25\n');
    const r = await run({ code: "print(repr(open('.npmrc').read()))", workspace: dir });
    assert.ok(r.ok && r.stdout.text === "''\n", JSON.stringify(r.raw).slice(0, 400));
    assert.deepEqual(r.hidden_files, ['.npmrc']);
    assert.match(fs.readFileSync(path.join(dir, '.npmrc'), 'utf8'), /SECRET-25/);
    r.close();
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

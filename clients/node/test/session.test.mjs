// Sessions (issue 27) through the real agentbox binary (AGENTBOX): one live sandbox, code run
// cell by cell, state kept; timeouts, aborts and crashes said as they are.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import {
  Session, Cell, Result, SessionEndedError, CellFailedError, SetupError, UsageError, AbortError,
  CELL_STATUSES,
} from '../index.mjs';
import { PKG, procsWith, sleep } from './helpers.mjs';

const require = createRequire(import.meta.url);
const PNG_MAGIC = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

async function withSession(options, fn) {
  const s = await Session.create(options);
  try {
    return await fn(s);
  } finally {
    await s.close();
  }
}

test('Node: let persists across cells, the last value is returned', () => withSession({ language: 'node' }, async (s) => {
  assert.equal(s.info.language, 'node');
  assert.equal(s.state, 'ready');
  assert.ok(/^[0-9a-f]+$/.test(s.id));
  const c1 = await s.run('let y = 5');
  assert.ok(c1 instanceof Cell && c1.ok, JSON.stringify(c1));
  const c2 = await s.run("console.log('out'); y * 2");
  assert.equal(c2.result, '10');
  assert.equal(c2.stdout, 'out\n');
  assert.equal(c2.id, 2);
  assert.equal(c2.session.cells, 2);
  assert.equal(c2.raw.schema, 'agentbox.cell/1');
  assert.ok(CELL_STATUSES.includes(c2.status));
  const c3 = await s.run("await new Promise((r) => setTimeout(r, 50)); throw new TypeError('bad')");
  assert.equal(c3.status, 'error');
  assert.deepEqual([c3.error.type, c3.error.value], ['TypeError', 'bad']);
  assert.throws(() => c3.raiseForStatus(), (e) => e instanceof CellFailedError && e.cell === c3 && /TypeError: bad/.test(e.message));
}));

test('Python: state, a PNG from plt.show(), a structured error', () => withSession({ timeout: 30 }, async (s) => {
  await s.run('x = 1');
  const c = await s.run('x += 1; x');
  assert.equal(c.result, '2');
  assert.equal(c.raiseForStatus(), c);
  const fig = await s.run('import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.show()');
  assert.ok(fig.ok, JSON.stringify(fig.error));
  assert.equal(fig.images.length, 1);
  assert.equal(fig.images[0].mime, 'image/png');
  assert.ok(Buffer.isBuffer(fig.images[0].data) && fig.images[0].data.subarray(0, 8).equals(PNG_MAGIC));
  const err = await s.run('1/0');
  assert.equal(err.status, 'error');
  assert.equal(err.error.type, 'ZeroDivisionError');
  assert.ok(err.error.traceback.some((l) => l.includes('1/0')), err.error.traceback.join(''));
  // what a cell prints is its output, never a line of agentbox's protocol
  const fake = await s.run('print(\'{"cell": {"status": "lost"}}\'); \'x\'');
  assert.equal(fake.status, 'ok');
  assert.equal(fake.stdout, '{"cell": {"status": "lost"}}\n');
  assert.equal(s.state, 'ready');
}));

test('a cell past its timeout is interrupted and the state goes on', () => withSession({}, async (s) => {
  await s.run('x = 2');
  const t0 = Date.now();
  const c = await s.run('while True: pass', { timeout: 1 });
  assert.equal(c.status, 'timeout');
  assert.ok(Date.now() - t0 < 10000);
  assert.match(c.message, /timeout/);
  assert.equal((await s.run('x')).result, '2');
}));

test('an AbortSignal interrupts the cell; the session goes on', () => withSession({ language: 'node', timeout: 60 }, async (s) => {
  await s.run('let y = 5');
  const ac = new AbortController();
  setTimeout(() => ac.abort(), 500);
  const t0 = Date.now();
  const c = await s.run('await new Promise((r) => setTimeout(r, 60000))', { signal: ac.signal });
  assert.equal(c.status, 'cancelled', JSON.stringify(c));
  assert.ok(Date.now() - t0 < 20000, `${Date.now() - t0} ms`);
  assert.match(c.message, /cancel/);
  assert.equal((await s.run('y')).result, '5');
  // aborted before it started: nothing runs
  await assert.rejects(s.run('y = 6', { signal: ac.signal }), AbortError);
  assert.equal((await s.run('y')).result, '5');
  assert.equal(s.interrupt(), false);
}));

test('a crash ends the session; the next call says so; a restart says the state is gone', () => withSession({}, async (s) => {
  await s.run('x = 2');
  const c = await s.run('import os; os._exit(3)');
  assert.equal(c.status, 'lost');
  assert.match(c.message, /code 3.*state is gone/);
  assert.equal(s.state, 'ended');
  await assert.rejects(s.run('x'), (e) => e instanceof SessionEndedError && /code 3/.test(e.reason) &&
    e.reportStatus === 'exited' && Boolean(e.fix));
  const r = await s.run('x', { restart: true });
  assert.equal(r.error.type, 'NameError');
  assert.match(r.restarted, /gone/);
  await s.run('x = 5');
  const info = await s.restart();
  assert.equal(info.state, 'ready');
  assert.match(info.restarted, /gone/);
  assert.equal((await s.run('x')).error.type, 'NameError');
}));

test('close kills the processes, returns the report and refuses later calls', async () => {
  const token = `agentbox-session-test-${randomUUID()}`;
  const s = await Session.create({ files: { 'in.txt': 'hello' } });
  const c = await s.run(`import subprocess\np = subprocess.Popen(['/bin/sh', '-c', 'sleep 1000; : ${token}'])\n` +
    "open('out.txt', 'w').write(open('in.txt').read().upper())\np.pid > 0");
  assert.equal(c.result, 'True', JSON.stringify(c));
  assert.ok(procsWith(token).length > 0);
  const report = await s.close();
  assert.ok(report instanceof Result);
  assert.equal(report.raw.session.ended, 'closed by its caller');
  assert.equal(await report.readText('out.txt'), 'HELLO');
  report.close();
  assert.deepEqual(procsWith(token), []);
  assert.equal(s.state, 'closed');
  assert.equal(await s.close(), report);
  await assert.rejects(s.run('1'), (e) => e instanceof SessionEndedError && /closed/.test(e.message));
  await assert.rejects(s.restart(), SessionEndedError);
});

test('two sessions share nothing', async () => {
  const [a, b] = await Promise.all([Session.create(), Session.create()]);
  try {
    assert.notEqual(a.id, b.id);
    await a.run("secret = 42\nopen('/tmp/mark', 'w').write('a')\nopen('ws.txt', 'w').write('a')");
    const c = await b.run("import os\n('secret' in globals(), os.path.exists('/tmp/mark'), os.path.exists('ws.txt'))");
    assert.equal(c.result, '(False, False, False)');
    assert.equal((await a.run("secret, open('/tmp/mark').read()")).result, "(42, 'a')");
  } finally {
    await Promise.all([a.close(), b.close()]);
  }
});

test('cells queue: one runs at a time, each gets its own result', () => withSession({}, async (s) => {
  const cells = await Promise.all([s.run('import time; time.sleep(0.3); a = 1; a'), s.run('a + 1'), s.run('a + 2')]);
  assert.deepEqual(cells.map((c) => c.result), ['1', '2', '3']);
}));

test('the idle timeout ends the session', () => withSession({ idleTimeout: 1 }, async (s) => {
  assert.equal(s.info.idle_timeout_ms, 1000);
  await s.run('x = 1');
  await sleep(2500);
  await assert.rejects(s.run('x'), (e) => e instanceof SessionEndedError && /idle/.test(e.reason));
  assert.equal((await s.run('x', { restart: true })).error.type, 'NameError');
}));

test('refused sessions reject with UsageError / SetupError', async () => {
  await assert.rejects(Session.create({ limits: { pids: 'many' } }), (e) => e instanceof UsageError && /pids/.test(e.message) && Boolean(e.fix));
  await assert.rejects(Session.create({ files: ['/nonexistent/agentbox-session-test'] }), (e) => e instanceof SetupError && /nonexistent/.test(e.message));
  await assert.rejects(Session.create({ language: 'ruby' }), RangeError);
  assert.throws(() => new Session(), TypeError);
});

test('CommonJS: the same Session', () => {
  assert.equal(require('../index.cjs').Session, Session);
});

test('a session never closed does not keep Node alive, and ends with it', async () => {
  const token = `agentbox-session-test-${randomUUID()}`;
  const script = `
    const { Session } = require(${JSON.stringify(`${PKG}/index.cjs`)});
    (async () => {
      const s = await Session.create({ files: { 'in.txt': 'x' } });
      const c = await s.run("import subprocess; open('out.txt', 'w').write('y'); subprocess.Popen(['/bin/sh', '-c', 'sleep 1000; : ${token}']); 'up'");
      console.log(c.result);
    })();`;
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'agentbox-node-test-'));
  const t0 = Date.now();
  const out = await new Promise((resolve, reject) => {
    execFile(process.execPath, ['-e', script], { timeout: 60000, env: { ...process.env, TMPDIR: tmp } }, (err, stdout, stderr) => (err ? reject(new Error(`${err.message}: ${stderr}`)) : resolve(stdout)));
  });
  assert.equal(out, "'up'\n");
  assert.ok(Date.now() - t0 < 30000);
  // agentbox saw its stdin end and closed the session: nothing of it is left
  for (let i = 0; i < 100 && procsWith(token).length; i++) await sleep(100);
  assert.deepEqual(procsWith(token), []);
  // nor of the client: its staging of files and the directory the files out would have gone
  // to (agentbox collected into it after the program was gone, and nobody read them)
  const left = fs.readdirSync(tmp);
  fs.rmSync(tmp, { recursive: true, force: true });
  assert.deepEqual(left, []);
});

test('four sessions at once, each with its own state', async () => {
  const sessions = await Promise.all([0, 1, 2, 3].map((i) => Session.create({ language: i % 2 ? 'node' : 'python' })));
  try {
    assert.equal(new Set(sessions.map((s) => s.id)).size, 4);
    await Promise.all(sessions.map((s, i) => s.run(i % 2 ? `var n = ${i}` : `n = ${i}`)));
    const cells = await Promise.all(sessions.map((s) => s.run('n * 10')));
    assert.deepEqual(cells.map((c) => c.result), ['0', '10', '20', '30']);
  } finally {
    await Promise.all(sessions.map((s) => s.close()));
  }
});

// Packages on request (issue 28, docs/requirements.md) through the client: `requirements`,
// `indexUrl`, `findLinks` of run() and Session.create(), against the real agentbox binary
// (AGENTBOX) and the real npm registry (the one registry these machines reach). agentbox's
// environment cache is a directory of these tests' own (AGENTBOX_CACHE_DIR, mode 0700), so the
// first run installs and the later ones find the environment cached.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { run, Session, Result, SetupError, UsageError } from '../index.mjs';

const CODE = "const isNumber = require('is-number'); console.log(isNumber(5), isNumber('x'))";

describe('requirements', () => {
  let cache;
  let saved;
  const setEnv = (name, value) => {
    if (!(name in saved)) saved[name] = process.env[name];
    if (value == null) delete process.env[name];
    else process.env[name] = value;
  };

  before(() => {
    saved = {};
    cache = fs.mkdtempSync(path.join(os.tmpdir(), 'agentbox-node-cache-'));
    fs.chmodSync(cache, 0o700);
    setEnv('AGENTBOX_CACHE_DIR', cache);
  });

  after(() => {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
    fs.rmSync(cache, { recursive: true, force: true });
  });

  test('run: installed the first time, cached the next, the module loads', async () => {
    const r = await run({ code: CODE, language: 'node', requirements: ['is-number@7.0.0'], timeout: 60 });
    assert.ok(r instanceof Result);
    assert.ok(r.ok, `${r.status} ${r.message} ${r.stderr.text}`);
    assert.equal(r.stdout.text, 'true false\n');
    assert.equal(r.pre_run.environment, 'installed');
    assert.deepEqual(r.pre_run.requirements, ['is-number@7.0.0']);
    assert.equal(r.pre_run.resolved['is-number'], '7.0.0');
    assert.equal(r.pre_run.index_url, null);
    // the environment is in these tests' cache, nowhere else
    assert.equal(path.dirname(r.pre_run.env_dir), cache);
    assert.ok(fs.statSync(r.pre_run.env_dir).isDirectory());
    // the run itself is offline as always
    assert.equal(r.sandbox.network.enforced, true);
    r.close();

    const again = await run({ code: CODE, language: 'node', requirements: new Set(['is-number@7.0.0']) });
    assert.ok(again.ok, again.stderr.text);
    assert.equal(again.stdout.text, 'true false\n');
    assert.equal(again.pre_run.environment, 'cached');
    assert.equal(again.pre_run.env_dir, r.pre_run.env_dir);
    assert.equal(again.pre_run.resolved['is-number'], '7.0.0');
    again.close();
  });

  test('a run without requirements has no pre_run and cannot load the module', async () => {
    const r = await run({ code: CODE, language: 'node' });
    assert.equal(r.pre_run, undefined);
    assert.equal(r.ok, false);
    assert.match(r.stderr.text, /Cannot find module 'is-number'/);
    r.close();
  });

  test('Session.create: the module loads in every cell, the report has pre_run', async () => {
    const s = await Session.create({ language: 'node', requirements: ['is-number@7.0.0'], timeout: 30 });
    let rep;
    try {
      const c1 = await s.run("const isNumber = require('is-number')");
      assert.ok(c1.ok, JSON.stringify(c1.error));
      const c2 = await s.run('isNumber(5) && !isNumber("x")');
      assert.ok(c2.ok, JSON.stringify(c2.error));
      assert.equal(c2.result, 'true');
      // read-only in the sandbox, as every environment
      const c3 = await s.run("const fs = require('fs'); let w; try { fs.accessSync(require.resolve('is-number'), fs.constants.W_OK); w = true } catch { w = false }; w");
      assert.equal(c3.result, 'false', JSON.stringify(c3));
    } finally {
      rep = await s.close();
    }
    assert.ok(rep instanceof Result, JSON.stringify(rep));
    assert.ok(['installed', 'cached'].includes(rep.pre_run.environment), JSON.stringify(rep.pre_run));
    assert.equal(rep.pre_run.resolved['is-number'], '7.0.0');
    rep.close();
  });

  test('an unknown package: SetupError naming it with the registry\'s answer', async () => {
    const name = `agentbox-no-such-package-${crypto.randomBytes(6).toString('hex')}`;
    await assert.rejects(run({ code: 'console.log(1)', language: 'node', requirements: [name] }), (e) => {
      assert.ok(e instanceof SetupError && !(e instanceof UsageError), String(e));
      assert.ok(e.message.includes(name), e.message);
      assert.match(e.message, /404/);
      return true;
    });
  });

  test('indexUrl and findLinks reach agentbox (the operator\'s index: another is refused)', async () => {
    setEnv('AGENTBOX_INDEX_URL', 'https://a.example/simple');
    try {
      const refused = (e) => e instanceof UsageError && /a spec may not name another/.test(e.message);
      await assert.rejects(run({ code: 'print(1)', requirements: ['abx'], indexUrl: 'https://b.example/simple' }), refused);
      await assert.rejects(Session.create({ requirements: ['abx'], indexUrl: 'https://b.example/simple' }), refused);
      setEnv('AGENTBOX_INDEX_URL', null);
      setEnv('AGENTBOX_FIND_LINKS', cache);
      await assert.rejects(run({ code: 'print(1)', requirements: ['abx'], findLinks: path.join(cache, 'elsewhere') }), refused);
      await assert.rejects(Session.create({ requirements: ['abx'], findLinks: 'elsewhere' }), refused);
    } finally {
      setEnv('AGENTBOX_INDEX_URL', null);
      setEnv('AGENTBOX_FIND_LINKS', null);
    }
  });

  test('an installer option is refused', async () => {
    await assert.rejects(run({ code: 'console.log(1)', language: 'node', requirements: ['--registry=http://127.0.0.1:9'] }), UsageError);
  });

  test('requirements: an array of strings', async () => {
    await assert.rejects(run({ code: '1', requirements: 'is-number' }), (e) => e instanceof TypeError && /array of strings/.test(e.message));
    await assert.rejects(run({ code: '1', requirements: [7] }), (e) => e instanceof TypeError && /each one is a string/.test(e.message));
    await assert.rejects(run({ code: '1', requirements: ['x'], indexUrl: 1 }), (e) => e instanceof TypeError && /indexUrl/.test(e.message));
    await assert.rejects(Session.create({ requirements: 'is-number' }), TypeError);
  });
});

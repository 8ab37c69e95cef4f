// The README's "From JavaScript/TypeScript" blocks, exactly as written there: `npm install
// --offline ./clients/node` into a fresh project, then the first block run with `node` as an
// .mjs file must print what the README says; the agent-loop block's handler must answer a
// tool call. Also: the package is versioned with the C core, and has no dependencies.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PKG, SRCDIR } from './helpers.mjs';

function section(title) {
  const text = fs.readFileSync(path.join(SRCDIR, 'README.md'), 'utf8');
  const start = text.indexOf(`\n## ${title}\n`);
  assert.ok(start >= 0, `README has no '## ${title}'`);
  const end = text.indexOf('\n## ', start + 1);
  return text.slice(start, end > 0 ? end : undefined);
}
const blocks = (text, lang) => [...text.matchAll(new RegExp(`^\`\`\`${lang}\\n([\\s\\S]*?)^\`\`\`$`, 'gm'))].map((m) => m[1]);

let dir;
before(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentbox-node-readme-'));
  // a copy of the package, where the README's command finds it: ./clients/node
  fs.mkdirSync(path.join(dir, 'clients'));
  fs.cpSync(PKG, path.join(dir, 'clients', 'node'), {
    recursive: true, filter: (p) => !p.includes(`${path.sep}node_modules`) && !p.includes(`${path.sep}test`),
  });
  fs.writeFileSync(path.join(dir, 'package.json'), '{"name": "readme-check", "private": true}\n');
});
after(() => fs.rmSync(dir, { recursive: true, force: true }));

test("the README's example runs after npm install --offline", () => {
  const sec = section('From JavaScript/TypeScript');
  const console_ = blocks(sec, 'console')[0].split('\n').filter(Boolean);
  const cmd = console_[0].replace(/^\$ /, '');
  assert.equal(cmd, 'npm install --offline ./clients/node');
  const npm = spawnSync('npm', [...cmd.split(' ').slice(1), '--no-audit', '--no-fund'], {
    cwd: dir, encoding: 'utf8', env: { ...process.env, npm_config_update_notifier: 'false' },
  });
  assert.equal(npm.status, 0, npm.stdout + npm.stderr);
  const example = blocks(sec, 'js')[0];
  assert.ok(example.trimEnd().split('\n').length < 15);
  fs.writeFileSync(path.join(dir, 'example.mjs'), example);
  const want = console_.slice(console_.indexOf('$ node example.mjs') + 1);
  const out = execFileSync(process.execPath, ['example.mjs'], { cwd: dir, encoding: 'utf8', timeout: 120000 });
  assert.deepEqual(out.split('\n').filter(Boolean), want);
  // and the CommonJS entry of the installed package
  const cjs = execFileSync(process.execPath, ['-e', "const a = require('agentbox-bwrap'); console.log(typeof a.run, a.VERSION)"],
    { cwd: dir, encoding: 'utf8' });
  assert.equal(cjs.trim(), 'function 0.1.0');
});

test("the README's agent-loop tool handler answers a tool call", async () => {
  const code = blocks(section('From JavaScript/TypeScript'), 'js')[1];
  fs.writeFileSync(path.join(dir, 'tool.mjs'), code);
  const { runCodeTool, runCode } = await import(path.join(dir, 'tool.mjs'));
  assert.deepEqual(runCodeTool.parameters.required, ['language', 'code']);
  let out = JSON.parse(await runCode({ language: 'python', code: 'print(6 * 7)' }));
  assert.equal(out.status, 'exited');
  assert.equal(out.stdout, '42\n');
  out = JSON.parse(await runCode({ language: 'node', code: "require('fs').writeFileSync('a.txt', 'x')" }));
  assert.deepEqual(out.files, ['a.txt']); // what the run wrote, not the script
});

test('versioned with the C core; zero dependencies; Node >= 18', () => {
  const pkg = JSON.parse(fs.readFileSync(path.join(PKG, 'package.json'), 'utf8'));
  const meson = /version\s*:\s*'([^']+)'/.exec(fs.readFileSync(path.join(SRCDIR, 'meson.build'), 'utf8'))[1];
  assert.equal(pkg.version, meson);
  assert.equal(pkg.dependencies, undefined);
  assert.equal(pkg.engines.node, '>=18');
  for (const f of pkg.files) assert.ok(fs.existsSync(path.join(PKG, f)), f);
});

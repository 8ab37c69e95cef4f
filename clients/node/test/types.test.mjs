// The TypeScript declarations (index.d.cts) against the report schema, field by field, so the
// C core, the Python client and this one cannot drift apart.
//  1. schemas/report.schema.json (when the tree has it; AB_REPORT_SCHEMA names another copy):
//     every property of every object is a member of its interface and every member a property;
//     `?` exactly where the schema may leave a key out, `| null` exactly where it may be null;
//     enums are the same literal unions; integer/string/boolean/array/object map one to one.
//  2. Real reports from the real binary fit the declarations.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import {
  run, findBinary, SetupError, STATUSES, LIMIT_NAMES, PROTECTION_NAMES, FILE_ORIGINS, NETWORK_MODES,
  Session, CELL_STATUSES,
} from '../index.mjs';
import { PKG, SRCDIR } from './helpers.mjs';

// A parser for the subset of TypeScript index.d.cts is written in.
export function parseDeclarations(text) {
  const src = text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/\/\/[^\n]*/g, '');
  const aliases = {};
  const interfaces = {};
  for (const m of src.matchAll(/export type (\w+)\s*=\s*([^;]+);/g)) aliases[m[1]] = parseType(m[2]);
  for (const m of src.matchAll(/export interface (\w+)(?:\s+extends\s+(\w+))?\s*\{([^}]*)\}/g)) {
    const members = {};
    for (const line of m[3].split(';').map((l) => l.trim()).filter(Boolean)) {
      const mm = /^(?:readonly\s+)?(?:'([^']+)'|(\w+))(\?)?\s*:\s*([\s\S]+)$/.exec(line);
      if (!mm) throw new Error(`${m[1]}: cannot parse member '${line}'`);
      members[mm[1] || mm[2]] = { optional: Boolean(mm[3]), type: parseType(mm[4]) };
    }
    interfaces[m[1]] = { extends: m[2] || null, members };
  }
  return { aliases, interfaces };
}

function splitTop(s, sep) {
  const out = [];
  let depth = 0;
  let cur = '';
  for (const ch of s) {
    if ('<(['.includes(ch)) depth++;
    if ('>)]'.includes(ch)) depth--;
    if (ch === sep && depth === 0) {
      out.push(cur);
      cur = '';
    } else cur += ch;
  }
  out.push(cur);
  return out.map((x) => x.trim()).filter(Boolean);
}

function parseType(s) {
  s = s.trim();
  const alts = splitTop(s, '|');
  if (alts.length > 1) return { kind: 'union', alts: alts.map(parseType) };
  if (s.endsWith('[]')) return { kind: 'array', item: parseType(s.slice(0, -2)) };
  let m = /^Array<(.+)>$/.exec(s);
  if (m) return { kind: 'array', item: parseType(m[1]) };
  m = /^Record<string,\s*(.+)>$/.exec(s);
  if (m) return { kind: 'record', item: parseType(m[1]) };
  m = /^'([^']*)'$/.exec(s);
  if (m) return { kind: 'literal', value: m[1] };
  if (/^-?[0-9]+$/.test(s)) return { kind: 'literal', value: Number(s) };
  if (s === 'true' || s === 'false') return { kind: 'literal', value: s === 'true' };
  if (['string', 'number', 'boolean', 'null', 'unknown'].includes(s)) return { kind: s };
  if (/^\(.+\)$/.test(s)) return parseType(s.slice(1, -1));
  if (/^\w+$/.test(s)) return { kind: 'ref', name: s };
  return { kind: 'opaque', text: s }; // a function type and the like: never in a report
}

// Flatten a type into its alternatives, resolving aliases.
function alternatives(t, decl) {
  if (t.kind === 'union') return t.alts.flatMap((a) => alternatives(a, decl));
  if (t.kind === 'ref' && decl.aliases[t.name]) return alternatives(decl.aliases[t.name], decl);
  return [t];
}

export class Checker {
  constructor(schema, decl) {
    this.schema = schema;
    this.decl = decl;
    this.errors = [];
    this.seen = new Set();
    this.active = new Set(); // the interfaces being checked (WalkSummary.pre_run recurses)
  }

  resolve(node) {
    while (node && node.$ref) {
      const name = node.$ref.split('/').pop();
      const { $ref, ...rest } = node;
      node = { ...this.schema.$defs[name], ...rest };
    }
    return node;
  }

  nullable(node) {
    node = this.resolve(node);
    const t = node.type;
    if (t === 'null' || (Array.isArray(t) && t.includes('null'))) return true;
    if ((node.enum || []).includes(null)) return true;
    return (node.oneOf || []).some((v) => this.nullable(v));
  }

  err(where, msg) {
    this.errors.push(`${where}: ${msg}`);
  }

  member(where, node, m, required) {
    const alts = alternatives(m.type, this.decl);
    const hasNull = alts.some((a) => a.kind === 'null');
    const nullable = this.nullable(node);
    if (nullable !== hasNull) this.err(where, nullable ? 'the schema allows null, the type does not' : '| null, but the schema never has null');
    if (required === m.optional) this.err(where, required ? 'required by the schema, yet optional (?)' : 'the schema may leave it out: needs ?');
    this.value(where, node, alts.filter((a) => a.kind !== 'null'));
  }

  // alts: the non-null alternatives of the declared type
  value(where, node, alts) {
    node = this.resolve(node);
    if (node.oneOf) {
      // null or an object (Stream.file): the null is the member's (nullable() above)
      const shapes = node.oneOf.filter((v) => this.resolve(v).type !== 'null');
      if (shapes.length === 1) return this.value(where, shapes[0], alts);
      return this.oneOf(where, { ...node, oneOf: shapes }, alts);
    }
    if (node.enum || 'const' in node) {
      const vals = (node.enum || [node.const]).filter((v) => v !== null);
      const kinds = new Set(vals.map((v) => typeof v));
      if (alts.every((a) => a.kind === 'literal')) {
        const got = new Set(alts.map((a) => a.value));
        if (got.size !== vals.length || !vals.every((v) => got.has(v))) {
          this.err(where, `literals ${[...got].sort()}, the schema ${[...vals].sort()}`);
        }
      } else if (kinds.size === 1 && kinds.has('string')) {
        this.err(where, `a string enum (${vals.join(', ')}): declare the literals, not ${alts.map((a) => a.kind)}`);
      } else if (!(alts.length === 1 && alts[0].kind === { number: 'number', boolean: 'boolean', string: 'string' }[[...kinds][0]])) {
        this.err(where, `const/enum ${JSON.stringify(vals)}, type ${JSON.stringify(alts)}`);
      }
      return;
    }
    const types = [].concat(node.type || []).filter((t) => t !== 'null');
    const want = { integer: 'number', string: 'string', boolean: 'boolean' };
    if (types.length === 1 && want[types[0]]) {
      if (!(alts.length === 1 && alts[0].kind === want[types[0]])) this.err(where, `${types[0]} in the schema, ${JSON.stringify(alts)} here`);
      return;
    }
    if (types.length === 1 && types[0] === 'array') {
      if (!(alts.length === 1 && alts[0].kind === 'array')) return this.err(where, `array in the schema, ${JSON.stringify(alts)} here`);
      return this.value(`${where}[]`, node.items, alternatives(alts[0].item, this.decl));
    }
    if (types.length === 1 && types[0] === 'object' && !node.properties && typeof node.additionalProperties === 'object') {
      // a map of any keys (pre_run.resolved): Record<string, T>
      if (!(alts.length === 1 && alts[0].kind === 'record')) return this.err(where, `an open object in the schema, ${JSON.stringify(alts)} here`);
      return this.value(`${where}{}`, node.additionalProperties, alternatives(alts[0].item, this.decl));
    }
    if ((types.length === 1 && types[0] === 'object') || node.properties) {
      if (!(alts.length === 1 && alts[0].kind === 'ref' && this.decl.interfaces[alts[0].name])) {
        return this.err(where, `object in the schema, ${JSON.stringify(alts)} here`);
      }
      return this.object(where, node, alts[0].name);
    }
    this.err(where, `schema node not understood: ${JSON.stringify(node).slice(0, 120)}`);
  }

  object(where, node, name) {
    if (this.active.has(name)) return; // a schema object holding its own kind: checked once
    this.active.add(name);
    try {
      this.objectMembers(where, node, name);
    } finally {
      this.active.delete(name);
    }
  }

  objectMembers(where, node, name) {
    const iface = this.decl.interfaces[name];
    this.seen.add(name);
    const props = node.properties || {};
    const required = new Set(node.required || []);
    for (const k of Object.keys(props)) if (!(k in iface.members)) this.err(where, `${name}.${k} is in the schema, not in the interface`);
    for (const k of Object.keys(iface.members)) if (!(k in props)) this.err(where, `${name}.${k} is not in the schema`);
    for (const k of Object.keys(props)) {
      if (k in iface.members) this.member(`${name}.${k}`, props[k], iface.members[k], required.has(k));
    }
  }

  oneOf(where, node, alts) {
    const shapes = node.oneOf.map((v) => this.resolve(v));
    if (!(alts.length === 1 && alts[0].kind === 'ref' && this.decl.interfaces[alts[0].name])) {
      return this.err(where, `oneOf of objects, ${JSON.stringify(alts)} here`);
    }
    const name = alts[0].name;
    this.seen.add(name);
    const iface = this.decl.interfaces[name];
    const props = {};
    for (const s of shapes) for (const [k, v] of Object.entries(s.properties || {})) (props[k] ||= []).push(this.resolve(v));
    for (const k of Object.keys(props)) if (!(k in iface.members)) this.err(where, `${name}.${k} is in the schema, not in the interface`);
    for (const k of Object.keys(iface.members)) if (!(k in props)) this.err(where, `${name}.${k} is not in the schema`);
    const inAll = Object.keys(props).filter((k) => shapes.every((s) => (s.required || []).includes(k)));
    for (const [k, subs] of Object.entries(props)) {
      const m = iface.members[k];
      if (!m) continue;
      const w = `${name}.${k}`;
      if (inAll.includes(k) === m.optional) this.err(w, inAll.includes(k) ? 'in every shape, yet optional' : 'not in every shape: needs ?');
      const malts = alternatives(m.type, this.decl);
      const literals = malts.every((a) => a.kind === 'literal');
      if (literals) { // the literals of every shape together
        const want = new Set(subs.flatMap((s) => (s.enum || [s.const])));
        const got = new Set(malts.map((a) => a.value));
        if (want.size !== got.size || ![...want].every((v) => got.has(v))) this.err(w, `literals ${[...got]}, the shapes ${[...want]}`);
        continue;
      }
      for (const s of subs) {
        const probe = new Checker(this.schema, this.decl);
        if (s.enum || 'const' in s) {
          const vals = s.enum || [s.const];
          const kind = { number: 'number', boolean: 'boolean', string: 'string' }[typeof vals[0]];
          if (!(malts.length === 1 && malts[0].kind === kind)) this.err(w, `shape const ${JSON.stringify(vals)}, type ${JSON.stringify(malts)}`);
          continue;
        }
        probe.value(w, s, malts);
        this.errors.push(...probe.errors);
        probe.seen.forEach((n) => this.seen.add(n));
      }
    }
  }
}

// the sessions' types (issue 27): no report schema object; checked against real cells below
const SESSION_TYPES = ['CellImage', 'CellError', 'SessionInfo', 'CellResult', 'Cell', 'SessionOptions', 'CellOptions'];

const decl = parseDeclarations(fs.readFileSync(path.join(PKG, 'index.d.cts'), 'utf8'));

test('the declarations parse, and index.d.mts re-exports them', () => {
  assert.ok(decl.interfaces.Report && decl.interfaces.Stream && decl.aliases.Status);
  const mts = fs.readFileSync(path.join(PKG, 'index.d.mts'), 'utf8');
  assert.match(mts, /export \* from '\.\/index\.cjs'/);
  // the runtime constants say what the types say
  assert.deepEqual([...STATUSES].sort(), alternatives(decl.aliases.Status, decl).map((a) => a.value).sort());
  assert.deepEqual([...LIMIT_NAMES].sort(), Object.keys(decl.interfaces.Limits.members).sort());
  assert.deepEqual([...PROTECTION_NAMES].sort(), Object.keys(decl.interfaces.Sandbox.members).sort());
  assert.deepEqual([...FILE_ORIGINS], alternatives(decl.aliases.FileOrigin, decl).map((a) => a.value));
  assert.deepEqual([...NETWORK_MODES], alternatives(decl.aliases.NetworkMode, decl).map((a) => a.value));
});

const schemaPath = process.env.AB_REPORT_SCHEMA || path.join(SRCDIR, 'schemas', 'report.schema.json');

test('the Report type matches schemas/report.schema.json field by field', (t) => {
  if (!fs.existsSync(schemaPath)) {
    t.skip(`${schemaPath} is not in this tree yet; the real reports are checked below`);
    return;
  }
  const schema = JSON.parse(fs.readFileSync(schemaPath, 'utf8'));
  const c = new Checker(schema, decl);
  c.object('Report', schema, 'Report');
  const unused = Object.keys(decl.interfaces).filter((n) => !c.seen.has(n) && !['Result', 'RunOptions', 'RunLimits', 'BinaryInfo', ...SESSION_TYPES].includes(n));
  assert.deepEqual(c.errors, []);
  assert.deepEqual(unused, [], 'interfaces no schema object maps to');
  // the runtime lists say what the schema says
  assert.deepEqual([...FILE_ORIGINS], schema.$defs.file_entry.properties.origin.enum);
  assert.deepEqual([...NETWORK_MODES], schema.$defs.network_protection.properties.mode.enum);
  assert.deepEqual([...PROTECTION_NAMES].sort(), Object.keys(schema.$defs.sandbox.properties).sort());
  assert.deepEqual([...LIMIT_NAMES].sort(), Object.keys(schema.$defs.limits.properties).sort());
});

test('the checker sees drift', () => {
  const d = parseDeclarations(`export type S = 'x';
    export interface Bad { a: string; b: string; s: S; gone: number; }`);
  const schema = {
    type: 'object', required: ['a', 'b', 's'],
    properties: { a: { type: 'integer' }, b: { type: ['string', 'null'] }, s: { enum: ['x', 'y'] }, extra: { type: 'boolean' } },
  };
  const c = new Checker(schema, d);
  c.object('Bad', schema, 'Bad');
  const text = c.errors.join('\n');
  for (const needle of ['Bad.extra is in the schema', 'Bad.gone is not in the schema', 'Bad.a: integer in the schema',
    'Bad.b: the schema allows null', 'Bad.s: literals']) {
    assert.ok(text.includes(needle), text);
  }
});

// 2. real reports

function fits(where, value, t, errors) {
  const alts = alternatives(t, decl);
  if (value === null) {
    if (!alts.some((a) => a.kind === 'null')) errors.push(`${where}: null, not allowed by the type`);
    return;
  }
  const tries = alts.filter((a) => a.kind !== 'null').map((a) => {
    const e = [];
    fitsOne(where, value, a, e);
    return e;
  });
  if (!tries.some((e) => e.length === 0)) errors.push(...(tries.length === 1 ? tries[0] : [`${where}: ${JSON.stringify(value).slice(0, 80)} fits no alternative`]));
}

function fitsOne(where, value, a, errors) {
  switch (a.kind) {
    case 'string': case 'number': case 'boolean':
      if (typeof value !== a.kind) errors.push(`${where}: ${JSON.stringify(value)} is not a ${a.kind}`);
      else if (a.kind === 'number' && !Number.isInteger(value)) errors.push(`${where}: ${value} is not an integer`);
      return;
    case 'literal':
      if (value !== a.value) errors.push(`${where}: ${JSON.stringify(value)} is not ${JSON.stringify(a.value)}`);
      return;
    case 'array':
      if (!Array.isArray(value)) errors.push(`${where}: not an array`);
      else value.forEach((v, i) => fits(`${where}[${i}]`, v, a.item, errors));
      return;
    case 'ref': {
      const iface = decl.interfaces[a.name];
      if (!iface || typeof value !== 'object' || Array.isArray(value)) {
        errors.push(`${where}: ${JSON.stringify(value).slice(0, 60)} is not a ${a.name}`);
        return;
      }
      for (const k of Object.keys(value)) if (!(k in iface.members)) errors.push(`${where}: the report has '${k}', ${a.name} does not`);
      for (const [k, m] of Object.entries(iface.members)) {
        if (k in value) fits(`${where}.${k}`, value[k], m.type, errors);
        else if (!m.optional) errors.push(`${where}: no '${k}', a required member of ${a.name}`);
      }
      return;
    }
    default:
      errors.push(`${where}: type ${a.kind} not handled`);
  }
}

test('real reports fit the declarations', async () => {
  const reports = [];
  let r = await run({ code: "import os; os.symlink('x', 'l'); open('f', 'w').write('1')", files: { 'd/in.txt': '1' } });
  reports.push(r.raw);
  r.close();
  r = await run({ code: 'import time; time.sleep(5)', timeout: 0.5 });
  reports.push(r.raw);
  r.close();
  r = await run({ code: 'process.exit(2)', language: 'node', onStdout: () => {} });
  reports.push(r.raw);
  r.close();
  // an elided stream, its file kept in the run directory (removed right away)
  r = await run({ code: "print('x' * 5000)", spec: { inline_output: 100, rm: false } });
  execFileSync(findBinary(), ['rm', r.run_dir]);
  assert.ok(r.raw.stdout.file);
  reports.push(r.raw);
  r.close();
  for (const bad of [{ files: ['/nonexistent/agentbox-test'] }, { limits: { pids: 'many' } }]) {
    try {
      await run({ code: '1', ...bad });
      assert.fail('no error');
    } catch (e) {
      assert.ok(e instanceof SetupError, String(e));
      reports.push(e.result.raw);
    }
  }
  const errors = [];
  reports.forEach((rep, i) => fits(`report${i}`, rep, { kind: 'ref', name: 'Report' }, errors));
  assert.deepEqual(errors, []);
});

test('real cells and session infos fit the declarations', async () => {
  assert.deepEqual([...CELL_STATUSES], alternatives(decl.aliases.CellStatus, decl).map((a) => a.value));
  const members = Object.keys(decl.interfaces.CellResult.members).sort();
  const errors = [];
  const cells = [];
  const infos = [];
  for (const language of ['python', 'node']) {
    const s = await Session.create({ language });
    infos.push(s.info);
    const code = language === 'python'
      ? ['x = 1', 'x', '1/0', 'import matplotlib.pyplot as plt; plt.plot([1]); plt.show()', 'while True: pass']
      : ['let y = 1', 'y', 'null.x', 'while (true) {}'];
    for (const c of code) cells.push(await s.run(c, { timeout: 1 }));
    cells.push(await s.run(language === 'python' ? 'import os; os._exit(3)' : 'process.exit(3)'));
    infos.push(s.info);
    infos.push(await s.restart());
    await s.close();
  }
  assert.deepEqual([...new Set(cells.map((c) => c.status))].sort(), ['error', 'lost', 'ok', 'timeout']);
  cells.forEach((c, i) => {
    assert.deepEqual(Object.keys(c).sort(), members, `cell ${i}: its own keys are the interface's`);
    // images hold a Buffer (not JSON): checked apart
    const plain = { ...c, images: [] };
    fits(`cell${i}`, plain, { kind: 'ref', name: 'CellResult' }, errors);
    c.images.forEach((im) => assert.ok(typeof im.mime === 'string' && Buffer.isBuffer(im.data)));
  });
  infos.forEach((info, i) => fits(`info${i}`, info, { kind: 'ref', name: 'SessionInfo' }, errors));
  assert.deepEqual(errors, []);
});

'use strict';
// agentbox-bwrap: run untrusted Python and Node code in agentbox's sandbox, from Node.
//
// Each run is one `agentbox run --spec - --report-fd 3` of the installed agentbox binary
// (`binary`, else $AGENTBOX, else `agentbox` on PATH): the spec (docs/spec.md) goes to its
// stdin, the JSON report comes back alone on fd 3. With onStdout/onStderr the spec asks for
// the live relay and the script's output streams from agentbox's stdout/stderr; without them
// the run is quiet and the output is in the report. Aborting sends SIGTERM to agentbox, which
// hands it to the run's supervisor: the sandbox is killed, reaped and reported `interrupted`.
// Zero dependencies; index.mjs re-exports this file for `import`.

const { spawn, execFile } = require('node:child_process');
const crypto = require('node:crypto');
const { StringDecoder } = require('node:string_decoder');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const VERSION = '0.1.0';
const SCHEMA_VERSIONS = Object.freeze([1]);
const SPEC_VERSIONS = Object.freeze([1]);
const BINARY_ENV = 'AGENTBOX';
const STOP_GRACE_MS = 30000;
// the fd of agentbox's that a stream for the script's stdin is handed over on (spec stdin_fd)
const STDIN_FD = 4;
const STATUSES = Object.freeze([
  'exited', 'signaled', 'timeout', 'oom', 'pids_limit', 'cpu_time_limit', 'disk_limit',
  'file_size_limit', 'output_limit', 'exec_failed', 'interrupted', 'setup_error', 'usage_error',
]);
const LIMIT_NAMES = Object.freeze([
  'timeout', 'memory', 'pids', 'cpus', 'cpu-time', 'disk', 'inodes', 'tmp-size', 'file-size',
  'nofile', 'output-limit',
]);
const PROTECTION_NAMES = Object.freeze([
  'namespaces', 'network', 'readonly_base', 'writable', 'new_session', 'die_with_parent',
  'cap_drop_all', 'clearenv', 'disable_userns', 'seccomp', 'landlock', 'fresh_keyring',
  'no_host_root', 'pid1_nondumpable', 'cgroup', 'caller_quotas',
]);
const FILE_ORIGINS = Object.freeze(['script', 'created', 'modified', 'unchanged', 'unknown']);
const NETWORK_MODES = Object.freeze(['loopback', 'strict', 'proxy']);

// Errors. Those about agentbox itself carry `fix`: what to do about it.

class AgentboxError extends Error {
  constructor(message, fix = null, result = null, options = undefined) {
    super(message, options);
    this.name = 'AgentboxError';
    this.fix = fix;
    this.result = result;
  }
}
class AgentboxNotFoundError extends AgentboxError {
  constructor(...a) { super(...a); this.name = 'AgentboxNotFoundError'; }
}
class IncompatibleAgentboxError extends AgentboxError {
  constructor(...a) { super(...a); this.name = 'IncompatibleAgentboxError'; }
}
class SetupError extends AgentboxError {
  constructor(...a) { super(...a); this.name = 'SetupError'; }
}
class UsageError extends SetupError {
  constructor(...a) { super(...a); this.name = 'UsageError'; }
}
class AbortError extends AgentboxError {
  constructor(message, result, cause) {
    super(message, null, result, cause === undefined ? undefined : { cause });
    this.name = 'AbortError';
    this.code = 'ABORT_ERR';
  }
}
class RunFailedError extends Error {
  constructor(result) {
    let what = result.status === 'exited' ? `the script exited with status ${result.exit_code}`
      : result.status === 'signaled' ? `the script died of signal ${result.signal_name || result.signal}`
        : `the run ended with status ${result.status}`;
    if (result.message) what += `: ${result.message}`;
    super(what);
    this.name = 'RunFailedError';
    this.result = result;
  }
}

// Directories the client made (the staging of `files`, the files collected): removed when
// done with, by a Result's close(), when the Result is garbage collected, or at exit.
const owned = new Set();
const registry = new FinalizationRegistry((dir) => rmDir(dir));
let exitHook = false;
function rmDir(dir) {
  owned.delete(dir);
  try { fs.rmSync(dir, { recursive: true, force: true }); } catch { /* gone */ }
}
function own(dir) {
  owned.add(dir);
  if (!exitHook) {
    exitHook = true;
    process.on('exit', () => { for (const d of [...owned]) rmDir(d); });
  }
}

class Result {
  constructor(report, filesDir = null, ownedDir = null) {
    Object.assign(this, report);
    Object.defineProperty(this, 'raw', { value: report, enumerable: false });
    Object.defineProperty(this, 'filesDir', { value: filesDir, writable: true, enumerable: false });
    Object.defineProperty(this, '_owned', { value: ownedDir, writable: true, enumerable: false });
    if (ownedDir) registry.register(this, ownedDir, this);
  }

  /** The script exited on its own with status 0. */
  get ok() { return this.status === 'exited' && this.exit_code === 0; }

  /** Throws RunFailedError unless `ok`; returns the result so calls chain. */
  raiseForStatus() {
    if (!this.ok) throw new RunFailedError(this);
    return this;
  }

  /** The bytes of a regular file the script left, by its path in the workspace. Never
   * through a link the script made. */
  async read(file) {
    if (!this.filesDir) {
      throw Object.assign(new Error(`${file}: this run kept no files (or the result was closed)`),
        { code: 'ENOENT' });
    }
    const parts = String(file).split('/').filter((p) => p !== '' && p !== '.');
    if (!parts.length || parts.includes('..') || String(file).startsWith('/')) {
      throw new RangeError(`${file}: give a relative path inside the workspace`);
    }
    let dir = this.filesDir;
    for (const p of parts.slice(0, -1)) {
      dir = path.join(dir, p);
      const st = await fs.promises.lstat(dir);
      if (!st.isDirectory()) throw new RangeError(`${file}: ${p} is not a directory`);
    }
    const fh = await fs.promises.open(path.join(dir, parts[parts.length - 1]),
      fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK);
    try {
      if (!(await fh.stat()).isFile()) throw new RangeError(`${file} is not a regular file`);
      return await fh.readFile();
    } finally {
      await fh.close();
    }
  }

  async readText(file, encoding = 'utf8') {
    return (await this.read(file)).toString(encoding);
  }

  /** Every captured byte of stdout or stderr: from its `file` when the report holds an
   * excerpt (size and sha256 checked), else `text` as UTF-8 (with the U+FFFD agentbox put in
   * where text_lossy). */
  async readStream(name) {
    if (name !== 'stdout' && name !== 'stderr') throw new RangeError(`readStream: 'stdout' or 'stderr', not ${JSON.stringify(name)}`);
    const s = this[name];
    if (!s.file) {
      if (s.elided_bytes) {
        throw Object.assign(new Error(`${s.elided_bytes} bytes of ${name} were elided from the report and not kept ` +
          "(no run directory: run with spec: { rm: false }, or raise spec: { inline_output: ... })"), { code: 'ENOENT' });
      }
      return Buffer.from(s.text, 'utf8');
    }
    const fh = await fs.promises.open(s.file.path, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW);
    let data;
    try {
      data = await fh.readFile();
    } finally {
      await fh.close();
    }
    if (data.length !== s.file.bytes || crypto.createHash('sha256').update(data).digest('hex') !== s.file.sha256) {
      throw new Error(`${s.file.path}: not the ${s.file.bytes} bytes the report lists (sha256 ${s.file.sha256})`);
    }
    return data;
  }

  async readStreamText(name, encoding = 'utf8') {
    const s = this[name];
    if (s && !s.file && !s.elided_bytes) return s.text;
    return (await this.readStream(name)).toString(encoding);
  }

  /** The entries of `files` whose origin is one of `origins` (FILE_ORIGINS). */
  filesWithOrigin(...origins) {
    const bad = origins.filter((o) => !FILE_ORIGINS.includes(o));
    if (bad.length) throw new RangeError(`no such origin: ${bad.join(', ')} (one of ${FILE_ORIGINS.join(', ')})`);
    return (this.files || []).filter((f) => origins.includes(f.origin));
  }

  /** What the run wrote: the entries of `files` it created or modified (not those of
   * `unknown` origin, which a capped pre-run listing left undecided). */
  get changedFiles() {
    return this.filesWithOrigin('created', 'modified');
  }

  /** Removes the temporary directory the client collected the files into (a `collect` or
   * `workspace` directory of yours is left alone). */
  close() {
    if (this._owned) {
      registry.unregister(this);
      rmDir(this._owned);
      this._owned = null;
    }
    this.filesDir = null;
  }
}

// The binary

function findBinary(binary) {
  const env = process.env[BINARY_ENV];
  const cand = binary != null ? String(binary) : env || 'agentbox';
  const where = binary != null ? `binary ${JSON.stringify(cand)}`
    : env ? `${BINARY_ENV}=${JSON.stringify(cand)}` : 'PATH';
  const candidates = cand.includes('/') ? [cand]
    : (process.env.PATH || '/usr/local/bin:/usr/bin:/bin').split(':').filter(Boolean)
      .map((d) => path.join(d, cand));
  for (const c of candidates) {
    try {
      if (fs.statSync(c).isFile()) {
        fs.accessSync(c, fs.constants.X_OK);
        return path.resolve(c);
      }
    } catch { /* next */ }
  }
  throw new AgentboxNotFoundError(`no agentbox binary found (looked at ${where})`,
    'install agentbox (meson setup build && ninja -C build && meson install -C build), ' +
    `or set ${BINARY_ENV}=/path/to/agentbox, or pass { binary }`);
}

const infoCache = new Map();

/** Which agentbox runs the scripts (`agentbox version --json`), checked once per binary. */
async function binaryInfo(binary) {
  const file = findBinary(binary);
  const st = fs.statSync(file);
  const key = `${file}\0${st.mtimeMs}\0${st.ino}`;
  if (infoCache.has(key)) return infoCache.get(key);
  const out = await new Promise((resolve, reject) => {
    execFile(file, ['version', '--json'], { timeout: 30000 }, (err, stdout) => {
      if (err && !stdout) {
        reject(new AgentboxNotFoundError(`cannot run ${file}: ${err.message}`,
          'check that it is an agentbox binary for this machine'));
      } else resolve(String(stdout));
    });
  });
  let info;
  try {
    const j = JSON.parse(out);
    info = { path: file, version: String(j.agentbox_version),
      reportSchemaVersion: Number(j.report_schema_version), specVersion: Number(j.spec_version) };
    if (!Number.isInteger(info.reportSchemaVersion)) throw new Error('no schema');
  } catch {
    // Before `version --json` (0.1.0 without it): every such agentbox wrote schema 1.
    const m = /^agentbox (0\.1\.[0-9]+)\s*$/.exec(out);
    if (!m) {
      throw new IncompatibleAgentboxError(
        `${file} does not say which report schema it writes (\`version --json\` printed ${JSON.stringify(out.slice(0, 100))})`,
        `install the agentbox of this client's release (${VERSION}), or point ${BINARY_ENV} at it`);
    }
    info = { path: file, version: m[1], reportSchemaVersion: 1, specVersion: 1 };
  }
  if (!SCHEMA_VERSIONS.includes(info.reportSchemaVersion) || !SPEC_VERSIONS.includes(info.specVersion)) {
    throw new IncompatibleAgentboxError(
      `agentbox ${info.version} (${file}) writes report schema ${info.reportSchemaVersion} and reads ` +
      `spec version ${info.specVersion}; agentbox-bwrap ${VERSION} knows report schema ` +
      `${SCHEMA_VERSIONS.join('/')} and spec version ${SPEC_VERSIONS.join('/')}`,
      "install the client from that agentbox's own source tree (npm install ./clients/node), " +
      `or point ${BINARY_ENV} at an agentbox ${VERSION}`);
  }
  Object.freeze(info);
  infoCache.set(key, info);
  return info;
}

// One run

function relName(name) {
  const parts = String(name).split('/').filter((p) => p !== '' && p !== '.');
  if (!parts.length || parts.includes('..') || String(name).startsWith('/')) {
    throw new RangeError(`files: ${JSON.stringify(name)} is not a relative path`);
  }
  return parts;
}

/** The spec's `requirements` and `index` (docs/requirements.md) from `requirements`,
 * `indexUrl`, `findLinks` (made absolute). */
function requirementsSpec(o) {
  const spec = {};
  if (o.requirements != null) {
    const r = o.requirements;
    if (typeof r === 'string' || typeof r[Symbol.iterator] !== 'function') {
      throw new TypeError("requirements must be an array of strings, one requirement each (['is-number@7.0.0'])");
    }
    const reqs = Array.from(r);
    for (const x of reqs) {
      if (typeof x !== 'string') throw new TypeError(`requirements: each one is a string, not ${JSON.stringify(x) ?? typeof x}`);
    }
    spec.requirements = reqs;
  }
  const index = {};
  if (o.indexUrl != null) {
    if (typeof o.indexUrl !== 'string') throw new TypeError("indexUrl must be a string (the package index's URL)");
    index.url = o.indexUrl;
  }
  if (o.findLinks != null) index.find_links = path.resolve(String(o.findLinks));
  if (Object.keys(index).length) spec.index = index;
  return spec;
}

/** The spec, the staging directory of `files`, and where the files out go. */
function prepare(o) {
  const inv = { staging: null, owned: null, filesDir: null, spec: null, stdinStream: null };
  try {
    const hasCode = o.code != null;
    if (hasCode === (o.script != null)) throw new TypeError('run() needs exactly one of code and script');
    const spec = { spec_version: 1, quiet: !(o.onStdout || o.onStderr), rm: true };
    let language = o.language;
    if (hasCode) {
      if (typeof o.code !== 'string') throw new TypeError('code must be a string');
      spec.code = o.code;
      if (language == null && !o.code.startsWith('#!')) language = 'python';
    } else {
      spec.script = path.resolve(String(o.script));
    }
    if (language != null) {
      if (language !== 'python' && language !== 'node') {
        throw new RangeError(`language must be 'python' or 'node', not ${JSON.stringify(language)}`);
      }
      spec.language = language;
    }
    if (o.args != null) {
      if (!Array.isArray(o.args)) throw new TypeError('args must be an array of strings');
      if (o.args.length) spec.args = o.args.map(String);
    }
    const stage = () => {
      if (!inv.staging) own(inv.staging = fs.mkdtempSync(path.join(os.tmpdir(), 'agentbox-bwrap-in-')));
      fs.chmodSync(inv.staging, 0o711);
      return inv.staging;
    };
    if (typeof o.stdin === 'number' || (o.stdin && typeof o.stdin.pipe === 'function')) {
      // a stream (an open fd, or a Readable such as process.stdin): agentbox reads it as the
      // script does (issue 25), on its fd 4
      if (typeof o.stdin === 'number' && !(Number.isInteger(o.stdin) && o.stdin >= 0)) {
        throw new TypeError('stdin: an fd is a whole number >= 0');
      }
      inv.stdinStream = o.stdin;
      spec.stdin_fd = STDIN_FD;
    } else if (typeof o.stdin === 'string') {
      spec.stdin_data = o.stdin;
    } else if (o.stdin != null) {
      const p = path.join(stage(), '.stdin');
      fs.writeFileSync(p, o.stdin);
      spec.stdin = p;
    }
    specCommon(inv, spec, o, stage);
    Object.assign(spec, requirementsSpec(o));
    if (o.spec) Object.assign(spec, o.spec);
    inv.spec = spec;
    return inv;
  } catch (e) {
    cleanup(inv, true);
    throw e;
  }
}

function cleanup(inv, everything) {
  if (inv.staging) {
    rmDir(inv.staging);
    inv.staging = null;
  }
  if (everything && inv.owned) {
    rmDir(inv.owned);
    inv.owned = null;
  }
}

// agentbox's own lines on its stderr ("agentbox: warning: ...", its error line) come after
// the script's relayed output, once the run has ended: they are the stream's last lines. With
// onStderr, the output goes out as it comes, but a line that starts like one of agentbox's is
// held, with the ones like it right after, until a line that does not follows (then they were
// the script's: they go out, in order) or the run ends (then the lines the report accounts
// for are dropped from their end, the rest goes out). The script's stderr never waits for
// more than its own next line.
const HELD = ['agentbox: ', "Try 'agentbox "];
class StderrFilter {
  constructor(emit) {
    this.emit = emit;
    this.line = ''; // the start of the current line, while it could still be agentbox's
    this.mode = 'start'; // 'start' of a line, 'pass' (the rest of a line that is not)
    this.held = ''; // whole lines like agentbox's, not yet known to be the script's
  }

  push(text) {
    let i = 0;
    while (i < text.length) {
      const nl = text.indexOf('\n', i);
      const end = nl < 0 ? text.length : nl + 1;
      const piece = text.slice(i, end);
      i = end;
      if (this.mode === 'pass') {
        this.emit(piece);
        if (piece.endsWith('\n')) this.mode = 'start';
        continue;
      }
      this.line += piece;
      const done = this.line.endsWith('\n');
      if (HELD.some((h) => this.line.startsWith(h))) {
        if (done) {
          // held until what follows tells whose it is
          this.held += this.line;
          this.line = '';
        }
        continue;
      }
      if (!done && HELD.some((h) => h.startsWith(this.line))) continue; // too short to tell
      this.emit(this.held + this.line);
      this.held = '';
      this.line = '';
      this.mode = done ? 'start' : 'pass';
    }
  }

  end(ours) {
    let rest = this.held + this.line;
    if (ours && rest.endsWith(ours)) rest = rest.slice(0, rest.length - ours.length);
    if (rest) this.emit(rest);
  }
}

// What agentbox printed on its stderr for this report after the script's output: each warning,
// but for the defaults this host cannot apply, which get one short note line.
function ownLines(report) {
  if (!report) return null;
  if (report.status === 'setup_error' || report.status === 'usage_error') return null;
  const defaults = (report.defaults_not_applied || []).map(String);
  const ofDefault = (w) => defaults.some((d) => w.startsWith(`default ${d} `));
  let lines = (report.warnings || []).filter((w) => !ofDefault(String(w)))
    .map((w) => `agentbox: warning: ${w}\n`).join('');
  if (defaults.length) {
    lines += `agentbox: note: defaults this host cannot fully apply: ${defaults.join(', ')} (agentbox doctor explains)\n`;
  }
  return lines;
}

function finish(inv, reportText, stderrText, exitCode) {
  if (!reportText.trim()) {
    cleanup(inv, true);
    const lines = stderrText.split('\n').filter((l) => l.startsWith('agentbox:'));
    let msg = lines.length ? lines[lines.length - 1].slice('agentbox: '.length)
      : `agentbox exited with status ${exitCode} and wrote no report`;
    let fix = null;
    const m = /^(.*) \(fix: (.*)\)$/.exec(msg);
    if (m) [, msg, fix] = m;
    throw new AgentboxError(msg, fix);
  }
  let report;
  try {
    report = JSON.parse(reportText);
  } catch (e) {
    cleanup(inv, true);
    throw new AgentboxError(`agentbox wrote a report that is not JSON: ${e.message}`);
  }
  if (!SCHEMA_VERSIONS.includes(report.schema_version)) {
    cleanup(inv, true);
    throw new IncompatibleAgentboxError(
      `the report has schema_version ${report.schema_version}; agentbox-bwrap ${VERSION} reads ${SCHEMA_VERSIONS.join('/')}`,
      'use the client from the same agentbox release as the binary');
  }
  if (report.status === 'setup_error' || report.status === 'usage_error') {
    cleanup(inv, true);
    const E = report.status === 'usage_error' ? UsageError : SetupError;
    throw new E(report.message || 'agentbox refused the run', report.fix ?? null, new Result(report));
  }
  const filesDir = inv.filesDir || (report.run_dir_kept ? report.workspace : null);
  const ownedDir = inv.owned;
  if (ownedDir) own(ownedDir);
  inv.owned = null;
  return new Result(report, filesDir, ownedDir);
}

function abortReason(signal) {
  return signal.reason === undefined ? undefined : signal.reason;
}

/**
 * Runs `code` (or the file `script`) in a fresh sandbox; resolves to its report.
 * With `requirements` (and `indexUrl`, `findLinks`), agentbox first installs them in its
 * install sandbox, or finds them in its cache; `result.pre_run` says which.
 * The script failing or a limit stopping it resolves (result.ok is false); agentbox refusing
 * the run rejects with SetupError / UsageError; an abort rejects with AbortError once the
 * run is stopped and reaped.
 */
async function run(options = {}) {
  const o = options;
  const signal = o.signal;
  if (signal && signal.aborted) throw new AbortError('the run was aborted before it started', null, abortReason(signal));
  const info = await binaryInfo(o.binary);
  if (signal && signal.aborted) throw new AbortError('the run was aborted before it started', null, abortReason(signal));
  const inv = prepare(o);
  const streaming = Boolean(o.onStdout || o.onStderr);
  let child;
  try {
    const stdio = ['pipe', streaming ? 'pipe' : 'ignore', 'pipe', 'pipe'];
    // a stream for the script's stdin: an fd is shared as it is, a Readable piped in
    if (inv.stdinStream != null) stdio.push(typeof inv.stdinStream === 'number' ? inv.stdinStream : 'pipe');
    child = spawn(info.path, ['run', '--spec', '-', '--report-fd', '3'], { stdio });
  } catch (e) {
    cleanup(inv, true);
    throw new AgentboxNotFoundError(`cannot start ${info.path}: ${e.message}`, 'check the binary');
  }
  const report = [];
  const stderr = [];
  const errDecoder = new StringDecoder('utf8');
  let aborted = false;
  let callbackError = null;
  let killTimer = null;
  const stop = () => {
    if (child.exitCode === null && child.signalCode === null && !killTimer) {
      child.kill('SIGTERM');
      killTimer = setTimeout(() => child.kill('SIGKILL'), STOP_GRACE_MS);
    }
  };
  const onAbort = () => {
    aborted = true;
    stop();
  };
  // a callback that throws stops the run; run() then rejects with what it threw
  const guard = (fn) => (t) => {
    if (callbackError) return;
    try {
      fn(t);
    } catch (e) {
      callbackError = { error: e };
      stop();
    }
  };
  const onOut = o.onStdout ? guard(o.onStdout) : null;
  const filter = o.onStderr ? new StderrFilter(guard(o.onStderr)) : null;
  try {
    const exit = await new Promise((resolve, reject) => {
      child.on('error', (e) => reject(new AgentboxNotFoundError(`cannot start ${info.path}: ${e.message}`,
        'check the binary')));
      child.on('close', (code, sig) => resolve(code === null ? 128 + (os.constants.signals[sig] || 0) : code));
      child.stdin.on('error', () => { /* agentbox stopped reading: its report says why */ });
      child.stdin.end(JSON.stringify(inv.spec));
      child.stdio[3].on('data', (d) => report.push(d));
      if (inv.stdinStream != null && typeof inv.stdinStream !== 'number') {
        const sink = child.stdio[STDIN_FD];
        sink.on('error', () => { /* the run ended, or the script closed its stdin */ });
        inv.stdinStream.pipe(sink);
        child.on('close', () => inv.stdinStream.unpipe(sink));
      }
      child.stderr.on('data', (d) => {
        stderr.push(d);
        if (filter) filter.push(errDecoder.write(d));
      });
      if (streaming) {
        const outDecoder = new StringDecoder('utf8');
        child.stdout.on('data', (d) => {
          if (onOut) {
            const t = outDecoder.write(d);
            if (t) onOut(t);
          }
        });
        child.stdout.on('end', () => {
          const t = outDecoder.end();
          if (t && onOut) onOut(t);
        });
      }
      if (signal) signal.addEventListener('abort', onAbort, { once: true });
    });
    const reportText = Buffer.concat(report).toString('utf8');
    const stderrText = Buffer.concat(stderr).toString('utf8');
    let parsed = null;
    try { parsed = JSON.parse(reportText); } catch { /* finish() says */ }
    if (filter) {
      filter.push(errDecoder.end());
      filter.end(ownLines(parsed));
    }
    if (callbackError) {
      try { finish(inv, reportText, stderrText, exit).close(); } catch { /* no report */ }
      throw callbackError.error;
    }
    if (aborted) {
      let result = null;
      try { result = finish(inv, reportText, stderrText, exit); } catch { /* no report */ }
      throw new AbortError('the run was aborted: agentbox stopped it', result, abortReason(signal));
    }
    return finish(inv, reportText, stderrText, exit);
  } catch (e) {
    cleanup(inv, true);
    throw e;
  } finally {
    if (killTimer) clearTimeout(killTimer);
    if (signal) signal.removeEventListener('abort', onAbort);
    cleanup(inv, false);
  }
}

// Sessions (issue 27): one sandbox kept alive, code run in it cell by cell as in a notebook.
//
// A Session drives one `agentbox session --jsonl` (docs/sessions.md): the spec goes first,
// then one request a line ({"cell": ...}, {"interrupt": {}}, {"restart": {}}, {"close": {}});
// agentbox answers a line each ({"ready": info}, {"cell": result}, {"error": ...},
// {"closed": report}) and says {"ended": info} when the session ended on its own (a crash,
// the idle timeout, its lifetime). A cell's status, limits and crashes come from agentbox's
// supervisor, never from what the cell printed. This process exiting closes agentbox's stdin,
// and agentbox then closes the session.

const CELL_SCHEMAS = Object.freeze(['agentbox.cell/1']);
const CELL_STATUSES = Object.freeze(['ok', 'error', 'timeout', 'cancelled', 'lost']);
// how long an interrupted cell gets to come back (agentbox ends the session 2 s after an
// interrupt the interpreter ignores), and close() its report
const INTERRUPT_GRACE_MS = 30000;
const CLOSE_GRACE_MS = 60000;
const STDERR_KEEP = 65536;
const EPIPE = -32;
const EINVAL = -22;

class SessionEndedError extends AgentboxError {
  constructor(message, fix = null, info = {}) {
    super(message, fix);
    this.name = 'SessionEndedError';
    /** The session's last info. */
    this.info = { ...info };
    /** How it ended, in agentbox's words. */
    this.reason = info.ended ?? null;
    /** The run report's status when the sandbox ended (exited, oom, ...). */
    this.reportStatus = info.report_status ?? null;
  }
}

class CellFailedError extends Error {
  constructor(cell) {
    let what = `cell ${cell.id} ended ${cell.status}`;
    if (cell.error) what += `: ${cell.error.type}${cell.error.value ? `: ${cell.error.value}` : ''}`;
    else if (cell.message) what += `: ${cell.message}`;
    super(what);
    this.name = 'CellFailedError';
    this.cell = cell;
  }
}

class Cell {
  constructor(raw) {
    if (!CELL_SCHEMAS.includes(raw.schema)) {
      throw new IncompatibleAgentboxError(`a cell result of schema ${JSON.stringify(raw.schema)}; this client reads ${CELL_SCHEMAS.join('/')}`,
        'use the client from the same agentbox release as the binary');
    }
    const text = (s) => (s && typeof s.text === 'string' ? s.text : '');
    const res = raw.result && typeof raw.result === 'object' ? raw.result : null;
    const err = raw.error && typeof raw.error === 'object' ? raw.error : null;
    this.id = Number(raw.id) || 0;
    this.status = raw.status;
    this.stdout = text(raw.stdout);
    this.stderr = text(raw.stderr);
    this.result = res && res.text != null ? String(res.text) : null;
    this.result_html = res && res.html != null ? String(res.html) : null;
    this.images = (raw.images || []).map((i) => ({ mime: String(i.mime || ''), data: Buffer.from(String(i.data || ''), 'base64') }));
    this.error = err ? { type: String(err.type || ''), value: String(err.value || ''), traceback: (err.traceback || []).map(String) } : null;
    this.message = raw.message != null ? String(raw.message) : null;
    this.wall_ms = Number.isInteger(raw.wall_ms) ? raw.wall_ms : null;
    this.session = { ...(raw.session || {}) };
    Object.defineProperty(this, 'raw', { value: raw, enumerable: false });
  }

  /** The cell ran to its end without an exception. */
  get ok() { return this.status === 'ok'; }

  /** Set when the cell ran in a restarted interpreter: the earlier state is gone. */
  get restarted() { return this.session.restarted ?? null; }

  /** Throws CellFailedError unless `ok`; returns the cell so calls chain. */
  raiseForStatus() {
    if (!this.ok) throw new CellFailedError(this);
    return this;
  }
}

// Seconds (a number) as the spec's milliseconds, or a duration string ("10m") as it is.
function duration(name, v) {
  if (typeof v === 'string') return v;
  if (typeof v !== 'number' || !Number.isFinite(v)) throw new TypeError(`${name}: seconds (a number) or a duration string like '10m'`);
  if (v <= 0) throw new RangeError(`${name} must be more than 0 seconds`);
  return Math.max(1, Math.round(v * 1000));
}

/** What a run's and a session's specs share: env, limits, inputs (staged under stage()),
 * where the files go (a session's has no workspace: its caller passes none). */
function specCommon(inv, spec, o, stage) {
  if (o.env) spec.env = Object.fromEntries(Object.entries(o.env).map(([k, v]) => [k, String(v)]));
  const limits = {};
  for (const [k, v] of Object.entries(o.limits || {})) {
    limits[k.replace(/_/g, '-').replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)] = v;
  }
  if (o.timeout != null) limits.timeout = o.timeout;
  if (Object.keys(limits).length) spec.limits = limits;
  if (o.files != null) {
    if (Array.isArray(o.files)) {
      spec.inputs = o.files.map((p) => path.resolve(String(p)));
    } else {
      const dir = path.join(stage(), 'files');
      fs.mkdirSync(dir, { mode: 0o755 });
      for (const [name, content] of Object.entries(o.files)) {
        const dest = path.join(dir, ...relName(name));
        fs.mkdirSync(path.dirname(dest), { recursive: true, mode: 0o755 });
        fs.writeFileSync(dest, content, { mode: 0o644 });
      }
      spec.inputs = fs.readdirSync(dir).sort().map((n) => path.join(dir, n));
    }
  }
  if (o.workspace != null) {
    spec.workspace = path.resolve(String(o.workspace));
    inv.filesDir = spec.workspace;
  }
  if (o.collect === true) throw new TypeError('collect is a directory, or false for no files out');
  if (o.collect != null && o.collect !== false) {
    spec.collect = path.resolve(String(o.collect));
    inv.filesDir = spec.collect;
  } else if (o.workspace == null && o.collect == null) {
    // removed at exit too: a session never closed has no Result, and agentbox would fill
    // the directory after this program has gone
    own(inv.owned = fs.mkdtempSync(path.join(os.tmpdir(), 'agentbox-bwrap-out-')));
    spec.collect = inv.owned;
    inv.filesDir = inv.owned;
  }
}

/** The session's spec, the staging directory of `files` (kept until close: a restart copies
 * the inputs in again), where the files out go at close. */
function prepareSession(o) {
  const inv = { staging: null, owned: null, filesDir: null, spec: null };
  try {
    const language = o.language ?? 'python';
    if (language !== 'python' && language !== 'node') {
      throw new RangeError(`language must be 'python' or 'node', not ${JSON.stringify(language)}`);
    }
    const session = {};
    if (o.idleTimeout != null) session.idle_timeout = duration('idleTimeout', o.idleTimeout);
    if (o.maxLifetime != null) session.max_lifetime = duration('maxLifetime', o.maxLifetime);
    const spec = { spec_version: 1, language, rm: true, session: Object.keys(session).length ? session : true };
    specCommon(inv, spec, { ...o, workspace: null }, () => {
      if (!inv.staging) {
        own(inv.staging = fs.mkdtempSync(path.join(os.tmpdir(), 'agentbox-bwrap-in-')));
        fs.chmodSync(inv.staging, 0o711);
      }
      return inv.staging;
    });
    if (o.envDir != null) spec.env_dir = path.resolve(String(o.envDir));
    Object.assign(spec, requirementsSpec(o));
    if (o.spec) Object.assign(spec, o.spec);
    inv.spec = spec;
    return inv;
  } catch (e) {
    cleanup(inv, true);
    throw e;
  }
}

/**
 * One live sandbox with one interpreter in it, for code run cell by cell as in a notebook:
 * variables, imports and files are kept between cells. `await Session.create({...})`, then
 * `await session.run(code)` (one cell at a time; calls queue), `await session.close()`.
 */
class Session {
  constructor(child, inv, token) {
    if (token !== SESSION_TOKEN) throw new TypeError('use Session.create()');
    this._child = child;
    this._inv = inv;
    this._info = {};
    this._busy = false;
    this._closed = false;
    this._report = undefined;
    this._lines = []; // parsed lines not yet taken
    this._waiter = null; // resolves when a line comes
    this._ended = false; // agentbox's stdout ended
    this._stderr = [];
    this._stderrLen = 0;
    this._chain = Promise.resolve(); // one request at a time
    this._refs = 0;
    let buf = '';
    const decoder = new StringDecoder('utf8');
    const push = (msg) => {
      this._lines.push(msg);
      if (msg && typeof msg === 'object') {
        for (const k of ['ready', 'ended']) if (msg[k] && typeof msg[k] === 'object') this._info = { ...msg[k] };
      }
      if (this._waiter) this._waiter();
    };
    child.stdout.on('data', (d) => {
      buf += decoder.write(d);
      let nl;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        let msg = {};
        try { msg = JSON.parse(line); } catch { /* not a line of the protocol */ }
        push(msg && typeof msg === 'object' && !Array.isArray(msg) ? msg : {});
      }
    });
    child.stdout.on('end', () => {
      this._ended = true;
      if (this._waiter) this._waiter();
    });
    child.stderr.on('data', (d) => {
      this._stderr.push(d);
      this._stderrLen += d.length;
      if (this._stderrLen > 2 * STDERR_KEEP) {
        const all = Buffer.concat(this._stderr);
        this._stderr = [all.subarray(all.length - STDERR_KEEP)];
        this._stderrLen = STDERR_KEEP;
      }
    });
    child.stdin.on('error', () => { /* agentbox is gone: reading says how */ });
    this._exited = new Promise((resolve) => {
      child.on('close', (code, sig) => resolve(code === null ? 128 + (os.constants.signals[sig] || 0) : code));
    });
  }

  /** Starts a session; resolves once its interpreter is ready. Rejects with SetupError /
   * UsageError when agentbox refuses it. */
  static async create(options = {}) {
    const info = await binaryInfo(options.binary);
    const inv = prepareSession(options);
    let child;
    try {
      child = spawn(info.path, ['session', '--jsonl'], { stdio: ['pipe', 'pipe', 'pipe'] });
    } catch (e) {
      cleanup(inv, true);
      throw new AgentboxNotFoundError(`cannot start ${info.path}: ${e.message}`, 'check the binary');
    }
    const s = new Session(child, inv, SESSION_TOKEN);
    const spawned = new Promise((resolve, reject) => {
      child.once('spawn', resolve);
      child.once('error', (e) => reject(new AgentboxNotFoundError(`cannot start ${info.path}: ${e.message}`, 'check the binary')));
    });
    try {
      await spawned;
      await s._locked(() => s._start());
    } catch (e) {
      s._closed = true;
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      cleanup(inv, true);
      throw e;
    }
    return s;
  }

  // -- plumbing

  _ref() {
    if (this._refs++ === 0) {
      this._child.ref();
      for (const st of [this._child.stdin, this._child.stdout, this._child.stderr]) if (st && st.ref) st.ref();
    }
  }

  _unref() {
    if (--this._refs === 0) {
      // an idle session does not keep the process alive (its exit closes the session)
      this._child.unref();
      for (const st of [this._child.stdin, this._child.stdout, this._child.stderr]) if (st && st.unref) st.unref();
    }
  }

  _locked(fn) {
    const next = this._chain.then(async () => {
      this._ref();
      try {
        return await fn();
      } finally {
        this._unref();
      }
    });
    this._chain = next.catch(() => {});
    return next;
  }

  _send(obj) {
    if (this._child.stdin.destroyed || this._child.stdin.writableEnded) throw this._closedError();
    this._child.stdin.write(`${JSON.stringify(obj)}\n`);
  }

  _gone() {
    const lines = Buffer.concat(this._stderr).toString('utf8').split('\n').filter((l) => l.startsWith('agentbox'));
    const code = this._child.exitCode;
    const msg = lines.length ? lines[lines.length - 1]
      : `agentbox session exited${code == null ? '' : ` with status ${code}`} without a word`;
    this._closed = true;
    return new AgentboxError(`the session's agentbox is gone: ${msg}`, "start a new session; agentbox's stderr said the above");
  }

  _error(e, starting = false, rc = null) {
    e = e && typeof e === 'object' ? e : {};
    const message = String(e.message || 'agentbox refused the request');
    const fix = e.fix ? String(e.fix) : null;
    if (e.code === EPIPE) {
      return new SessionEndedError(message, 'start a new session, or run(code, { restart: true }) / restart() ' +
        'for a fresh interpreter (its state is gone)', this._info);
    }
    if (starting) return new (rc === 2 || e.code === EINVAL ? UsageError : SetupError)(message, fix);
    return new AgentboxError(message, fix);
  }

  _closedError() {
    const info = { ended: 'closed by its caller', ...this._info };
    return new SessionEndedError(`session ${info.id || '?'} is closed`, 'start a new session', info);
  }

  // The next answer to a request (a key in `want`, or 'error'), skipping what agentbox says
  // on its own ({"ended"}, which the line handler took into info).
  async _expect(want, timeoutMs = null) {
    const deadline = timeoutMs == null ? null : Date.now() + timeoutMs;
    for (;;) {
      if (this._lines.length) {
        const msg = this._lines.shift();
        const keys = Object.keys(msg);
        if (keys.length !== 1) continue;
        if (want.includes(keys[0]) || keys[0] === 'error') return [keys[0], msg[keys[0]]];
        continue;
      }
      if (this._ended) {
        await Promise.race([this._exited, sleepMs(5000)]);
        throw this._gone();
      }
      const wait = deadline == null ? null : deadline - Date.now();
      if (wait != null && wait <= 0) throw new AgentboxError('agentbox did not answer in time');
      let timer = null;
      await new Promise((resolve) => {
        this._waiter = resolve;
        if (wait != null) timer = setTimeout(resolve, wait);
      });
      this._waiter = null;
      if (timer) clearTimeout(timer);
    }
  }

  // lines agentbox sent on its own while no request was made (info already has them)
  _drain() {
    this._lines = this._lines.filter((m) => !('ended' in m || 'ready' in m));
  }

  async _start() {
    this._send({ spec: this._inv.spec });
    const [key, val] = await this._expect(['ready', 'ended']);
    if (key === 'ready') return;
    if (key === 'ended') { // it ended before it was ready: its report says why
      this._send({ close: {} });
      const [k, report] = await this._expect(['closed'], CLOSE_GRACE_MS);
      const rc = await this._finishChild();
      const reason = this._info.ended || 'the session ended before it was ready';
      if (k === 'closed' && report && typeof report === 'object') {
        const res = finish(this._inv, JSON.stringify(report), '', rc); // throws SetupError / UsageError
        res.close();
        throw new SessionEndedError(reason, res.fix ?? null, this._info);
      }
      throw new SessionEndedError(reason, null, this._info);
    }
    const rc = await this._finishChild();
    throw this._error(val, true, rc);
  }

  async _finishChild() {
    this._closed = true;
    if (!this._child.stdin.writableEnded) this._child.stdin.end();
    let timer;
    const rc = await Promise.race([this._exited, new Promise((r) => { timer = setTimeout(() => r(null), CLOSE_GRACE_MS); })]);
    clearTimeout(timer);
    if (rc === null) {
      this._child.kill('SIGKILL');
      return this._exited;
    }
    return rc;
  }

  async _restart() {
    this._send({ restart: {} });
    const [key, val] = await this._expect(['ready']);
    if (key === 'error') throw this._error(val);
    return { ...this._info };
  }

  // -- the API

  /** The session's id. */
  get id() { return String(this._info.id || ''); }

  /** The session's last info: id, language, state ('ready', 'busy', 'ended'), cells,
   * idle_timeout_ms, max_lifetime_ms, version; ended (how) and report_status once it has
   * ended; restarted once restarted. */
  get info() { return { ...this._info }; }

  /** 'ready', 'busy', 'ended' (on its own: a restart may follow), or 'closed'. */
  get state() { return this._closed ? 'closed' : String(this._info.state || ''); }

  /**
   * Runs one cell; resolves to its Cell once it ends (a cell that fails, times out or is
   * interrupted resolves too: `cell.status`). timeout: seconds (default: the session's).
   * signal: aborting interrupts the cell (its status is then 'cancelled'). restart: a session
   * that has ended gets a fresh interpreter first (else: SessionEndedError).
   */
  run(code, options = {}) {
    if (typeof code !== 'string') return Promise.reject(new TypeError('code must be a string'));
    const { timeout, signal, restart = false } = options;
    const cell = { code };
    if (timeout != null) {
      if (typeof timeout !== 'number' || !(timeout > 0)) return Promise.reject(new RangeError('timeout: seconds, more than 0'));
      cell.timeout_ms = Math.max(1, Math.round(timeout * 1000));
    }
    return this._locked(async () => {
      if (this._closed) throw this._closedError();
      if (signal && signal.aborted) throw new AbortError('the cell was aborted before it started', null, abortReason(signal));
      this._drain();
      if (restart && this._info.state === 'ended') await this._restart();
      for (let attempt = 0; ; attempt++) {
        let key;
        let val;
        const onAbort = () => {
          if (this._busy) this._send({ interrupt: {} });
        };
        this._busy = true;
        try {
          this._send({ cell });
          if (signal) signal.addEventListener('abort', onAbort, { once: true });
          [key, val] = await this._expect(['cell']);
        } finally {
          this._busy = false;
          if (signal) signal.removeEventListener('abort', onAbort);
        }
        if (key === 'cell') {
          const c = new Cell(val && typeof val === 'object' ? val : {});
          this._info = { ...this._info, ...c.session };
          return c;
        }
        const err = this._error(val);
        if (!(restart && attempt === 0 && err instanceof SessionEndedError)) throw err;
        await this._restart();
      }
    });
  }

  /** Interrupts the running cell (its status is then 'cancelled', or 'lost' if the
   * interpreter does not recover within 2 s). False when no cell was running. */
  interrupt() {
    if (!this._busy || this._closed) return false;
    this._send({ interrupt: {} });
    return true;
  }

  /** A fresh interpreter in a fresh sandbox (the current one, if alive, is killed): its
   * variables and files are gone. Resolves to the new info (its `restarted` says so). */
  restart() {
    return this._locked(async () => {
      if (this._closed) throw this._closedError();
      return this._restart();
    });
  }

  /** Ends the session (a running cell is interrupted first) and resolves to its run report:
   * a Result (usage, files: `read(path)`; `raw.session` its last info), or the report as an
   * object if this client cannot parse it. Later calls resolve to the same report. */
  close() {
    if (this._busy) this.interrupt();
    return this._locked(async () => {
      if (this._closed) return this._report ?? null;
      let key = 'error';
      let val = null;
      try {
        this._send({ close: {} });
        [key, val] = await this._expect(['closed'], CLOSE_GRACE_MS);
      } catch { /* gone: no report */ }
      const rc = await this._finishChild();
      this._report = null;
      if (key === 'closed' && val && typeof val === 'object') {
        try {
          this._report = finish(this._inv, JSON.stringify(val), Buffer.concat(this._stderr).toString('utf8'), rc);
        } catch {
          this._report = val;
        }
      } else {
        cleanup(this._inv, true);
      }
      cleanup(this._inv, false);
      return this._report;
    });
  }

  /** `await using s = await Session.create()` closes it (where the runtime has it). */
  async [Symbol.asyncDispose ?? Symbol.for('Symbol.asyncDispose')]() {
    await this.close();
  }
}
const SESSION_TOKEN = Symbol('agentbox-bwrap session');
const sleepMs = (ms) => new Promise((r) => { setTimeout(r, ms).unref(); });

module.exports = {
  run,
  Session,
  Cell,
  SessionEndedError,
  CellFailedError,
  CELL_SCHEMAS,
  CELL_STATUSES,
  binaryInfo,
  findBinary,
  Result,
  AgentboxError,
  AgentboxNotFoundError,
  IncompatibleAgentboxError,
  SetupError,
  UsageError,
  AbortError,
  RunFailedError,
  VERSION,
  SCHEMA_VERSIONS,
  SPEC_VERSIONS,
  BINARY_ENV,
  STATUSES,
  LIMIT_NAMES,
  PROTECTION_NAMES,
  FILE_ORIGINS,
  NETWORK_MODES,
  _StderrFilter: StderrFilter, // for the tests
  _ownLines: ownLines,
};

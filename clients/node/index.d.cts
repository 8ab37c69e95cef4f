// Types of agentbox-bwrap. The report interfaces mirror docs/report-schema.md (schema
// version 1) key by key; test/types.test.mjs checks them against schemas/report.schema.json.
// Keys are the report's own (snake_case). `?` = the report may leave the key out; `| null` =
// it may be null.

/** How the run ended. */
export type Status =
  | 'exited'
  | 'signaled'
  | 'timeout'
  | 'oom'
  | 'pids_limit'
  | 'cpu_time_limit'
  | 'disk_limit'
  | 'file_size_limit'
  | 'output_limit'
  | 'exec_failed'
  | 'interrupted'
  | 'setup_error'
  | 'usage_error';

/** A limit with evidence it was reached. */
export type LimitHit =
  | 'timeout'
  | 'memory'
  | 'pids'
  | 'cpu-time'
  | 'disk'
  | 'inodes'
  | 'file-size'
  | 'output-limit';

export type FileType = 'file' | 'dir' | 'symlink' | 'fifo' | 'socket' | 'chardev' | 'blockdev' | 'other';

export type FileFlag =
  | 'symlink'
  | 'special'
  | 'setid'
  | 'hardlink'
  | 'sparse'
  | 'too_big'
  | 'unreadable'
  | 'other_fs'
  | 'over_cap'
  | 'stripped';

/** Where a workspace entry came from, against the listing taken before the run. */
export type FileOrigin = 'script' | 'created' | 'modified' | 'unchanged' | 'unknown';

/** How the sandbox's network namespace may be used. */
export type NetworkMode = 'loopback' | 'strict' | 'proxy';

export type WalkCap =
  | 'entries'
  | 'depth'
  | 'path_length'
  | 'manifest_size'
  | 'total_bytes'
  | 'time'
  | 'hash_budget';

/** RUN_DIR/stdout or RUN_DIR/stderr: every captured byte of a stream longer than the report
 * holds inline (kept only with the run directory: `spec: { rm: false }`). */
export interface StreamFile {
  path: string;
  bytes: number;
  sha256: string;
}

/** The script's stdout or stderr as agentbox captured it. `text` is untrusted: all of it, or
 * (elided_bytes > 0) its first head_bytes, a marker line of agentbox's, its last tail_bytes;
 * then `file` has every captured byte, when the run directory was kept
 * (result.readStream()). Past the output limit the run goes on by default: `truncated`, the
 * tail is the stream's own end, and `dropped_bytes` were kept nowhere. */
export interface Stream {
  bytes: number;
  captured_bytes: number;
  truncated: boolean;
  text: string;
  text_lossy: boolean;
  relay_dropped_bytes: number | null;
  head_bytes: number;
  tail_bytes: number;
  elided_bytes: number;
  dropped_bytes: number;
  file: StreamFile | null;
}

/** One entry the workspace held after the run; `path` escapes hostile bytes as \xNN. */
export interface FileEntry {
  path: string;
  type: FileType;
  size: number;
  blocks_bytes: number;
  mode: string;
  sha256?: string;
  link_target?: string;
  flags?: FileFlag[];
  collected: boolean;
  /** Absent from an agentbox before issue 15. */
  origin?: FileOrigin;
  /** Present when origin was decided by inode, size, mtime and ctime, not by content. */
  origin_by?: 'metadata';
  reason?: string;
}

/** What the post-run walk of the workspace skipped and why. */
export interface WalkSummary {
  listed: number;
  entries: number;
  unlisted: number;
  truncated: boolean;
  truncated_by: WalkCap[];
  list_bytes: number;
  hashed_bytes: number;
  hashes_reused: number;
  unhashed: number;
  stripped: number;
  strip_failed: number;
  walk_ms: number;
  /** files_summary only: the listing taken before the run, which origin is decided against. */
  pre_run?: WalkSummary;
}

export interface SkippedEntry {
  path: string;
  reason: string;
}

/** What one input became: a file, a directory, or a link/special file not copied. */
export interface InputEntry {
  path: string;
  type: 'file' | 'dir' | 'symlink' | 'special';
  bytes: number;
  entries?: number;
  skipped?: SkippedEntry[];
  truncated?: boolean;
}

/** With `collect`: what was copied there. */
export interface Collected {
  dir: string;
  bytes: number;
  skipped_count: number;
  files: FileEntry[];
  summary: WalkSummary;
}

/** `agentbox prepare` only. */
export interface Environment {
  bytes: number;
  entries: number;
  skipped_count: number;
  skipped: SkippedEntry[];
  truncated: boolean;
}

/** An environment the cache's bound removed (docs/requirements.md). */
export interface EvictedEnv {
  env: string;
  bytes: number;
}

/** Packages on request (docs/requirements.md): how the run's environment was found. */
export interface PreRun {
  requirements: string[];
  environment: 'cached' | 'installed';
  ms: number;
  env_dir: string;
  /** every package in the environment: name -> version */
  resolved: Record<string, string>;
  index_url?: string | null;
  find_links?: string | null;
  evicted?: EvictedEnv[];
}

/** A session's report at its close (docs/sessions.md). */
export interface SessionSummary {
  id: string;
  language: 'python' | 'node';
  version?: string;
  state: 'starting' | 'ready' | 'busy' | 'ended';
  cells: number;
  idle_timeout_ms?: number;
  max_lifetime_ms?: number;
  ended?: string;
  report_status?: string;
  restarted?: string;
}

/** `agentbox prepare` only. */
export interface NetworkProxy {
  listen: string;
  own_network_namespace: boolean;
  allowed_hosts: string[];
  connections_allowed: number | null;
  connections_refused: number | null;
  connections_failed: number | null;
  refused: string[];
  proxy_landlock_abi: number;
}

/** One limit: asked for, in force, and how. */
export interface Limit {
  requested: number | null;
  explicit: boolean;
  enforced: number | null;
  mechanism: string | null;
  whole_run: boolean;
  note?: string;
}

export interface Limits {
  timeout?: Limit;
  memory?: Limit;
  pids?: Limit;
  cpus?: Limit;
  'cpu-time'?: Limit;
  disk?: Limit;
  inodes?: Limit;
  'tmp-size'?: Limit;
  'file-size'?: Limit;
  nofile?: Limit;
  'output-limit'?: Limit;
}

/** What the run used (null: this host cannot measure it). */
export interface Usage {
  memory_peak_bytes: number | null;
  cpu_ms: number | null;
  tasks_peak: number | null;
  workspace_bytes: number | null;
  workspace_entries: number | null;
  oom_kills: number | null;
  pids_refused: number | null;
}

export interface Protection {
  enforced: boolean;
  detail?: string;
}

export interface NetworkProtection {
  enforced: boolean;
  detail?: string;
  /** agentbox prepare only: the registry proxy's refusals. */
  refused_connections?: number;
  mode?: NetworkMode;
}

/** Every protection (all of them, or none when the run stopped before its plan). */
export interface Sandbox {
  namespaces?: Protection;
  network?: NetworkProtection;
  readonly_base?: Protection;
  writable?: Protection;
  new_session?: Protection;
  die_with_parent?: Protection;
  cap_drop_all?: Protection;
  clearenv?: Protection;
  disable_userns?: Protection;
  seccomp?: Protection;
  landlock?: Protection;
  fresh_keyring?: Protection;
  no_host_root?: Protection;
  pid1_nondumpable?: Protection;
  cgroup?: Protection;
  caller_quotas?: Protection;
}

/** The report of one run, as agentbox wrote it. */
export interface Report {
  schema_version: 1;
  agentbox_version: string;
  status: Status;
  exit_code: number | null;
  signal: number | null;
  signal_name: string | null;
  agentbox_exit: number;
  message: string | null;
  fix: string | null;
  /** A common mistake the failure points at (a file or module next to the script on the host,
   * which the sandbox does not see) and how to bring it in; null otherwise. */
  hint: string | null;
  limits_hit: LimitHit[];
  started_unix_ms: number | null;
  wall_ms: number | null;
  cpu_ms: number | null;
  max_rss_kib: number | null;
  kill_to_reaped_ms: number | null;
  agentbox_max_rss_kib: number | null;
  agentbox_fds_left: number | null;
  run_id: string | null;
  warm: boolean;
  script: string | null;
  lang: 'python' | 'node' | null;
  interpreter: string | null;
  stdout: Stream;
  stderr: Stream;
  run_dir: string | null;
  run_dir_kept: boolean;
  workspace: string | null;
  files: FileEntry[];
  files_summary?: WalkSummary;
  inputs?: InputEntry[];
  collected?: Collected;
  environment?: Environment;
  network_proxy?: NetworkProxy;
  /** with requirements: how their environment was found or built */
  pre_run?: PreRun;
  /** a session's report at its close */
  session?: SessionSummary;
  limits: Limits;
  usage: Usage;
  sandbox: Sandbox;
  sandbox_host_uid: number | null;
  workspace_mode: 'tmpfs' | 'idmapped' | 'bind' | null;
  warnings: string[];
  /** Defaults this host cannot apply as documented ('cpus', 'pids', 'hostname'), each with the
   * entry of `warnings` that begins `default NAME `; `agentbox doctor` explains them. */
  defaults_not_applied: string[];
  /** Token files of a `workspace` directory (its .npmrc...) the sandbox saw as an empty
   * read-only file: the run could neither read nor change them. */
  hidden_files: string[];
}

/** The report of one run, with helpers. */
export interface Result extends Report {}
export declare class Result {
  private constructor();
  /** The report exactly as parsed (keys a newer agentbox added are here too). */
  readonly raw: Record<string, unknown>;
  /** Where `read()` finds the files the script left (null once closed, or none kept). */
  filesDir: string | null;
  /** The script exited on its own with status 0. */
  get ok(): boolean;
  /** Throws RunFailedError unless `ok`; returns the result. */
  raiseForStatus(): this;
  /** A regular file the script left, by its path in the workspace; never through a link. */
  read(path: string): Promise<Buffer>;
  readText(path: string, encoding?: BufferEncoding): Promise<string>;
  /** Every captured byte of stdout or stderr: from its `file` when the report holds an
   * excerpt (size and sha256 checked), else `text` as UTF-8. Rejects (ENOENT) when the middle
   * was elided and not kept: the client's runs keep no run directory unless
   * `spec: { rm: false }`. */
  readStream(name: 'stdout' | 'stderr'): Promise<Buffer>;
  readStreamText(name: 'stdout' | 'stderr', encoding?: BufferEncoding): Promise<string>;
  /** The entries of `files` whose origin is one of `origins`. */
  filesWithOrigin(...origins: FileOrigin[]): FileEntry[];
  /** What the run wrote: the entries of `files` it created or modified. */
  get changedFiles(): FileEntry[];
  /** Removes the temporary directory the client collected the files into. */
  close(): void;
}

/** The limits of docs/spec.md: a string in the CLI's units ("512M", "90s") or a number in
 * the limit's base unit. camelCase and snake_case keys are accepted too (cpuTime, cpu_time). */
export type LimitValue = string | number;
export interface RunLimits {
  timeout?: LimitValue;
  memory?: LimitValue;
  pids?: LimitValue;
  cpus?: LimitValue;
  'cpu-time'?: LimitValue;
  cpuTime?: LimitValue;
  disk?: LimitValue;
  inodes?: LimitValue;
  'tmp-size'?: LimitValue;
  tmpSize?: LimitValue;
  'file-size'?: LimitValue;
  fileSize?: LimitValue;
  nofile?: LimitValue;
  'output-limit'?: LimitValue;
  outputLimit?: LimitValue;
}

export interface RunOptions {
  /** The script itself (one of `code` and `script`). */
  code?: string;
  /** A script file on the host. */
  script?: string;
  /** 'python' (the default for `code`) or 'node'; for a script, by its extension. */
  language?: 'python' | 'node';
  /** { name: content } written into the workspace, or host paths copied in. */
  files?: Record<string, string | Uint8Array> | string[];
  args?: string[];
  /** The script's stdin: a string or bytes, or a stream read as the script reads it (an open
   * fd, or a Readable such as process.stdin); a script that does not read it is never held
   * up by it. */
  stdin?: string | Uint8Array | number | NodeJS.ReadableStream;
  env?: Record<string, string>;
  limits?: RunLimits;
  /** The wall-clock limit in seconds (status 'timeout'; default 60). */
  timeout?: number;
  /** Work in this directory in place. */
  workspace?: string;
  /** Copy the files the script left into this directory (else: a temporary one the Result
   * owns, removed by result.close(), when the Result is collected, or at exit). `false`: no
   * files out (faster with many files; `files` still lists them with their sha256). */
  collect?: string | false;
  /** The agentbox binary (default: $AGENTBOX, else `agentbox` on PATH). */
  binary?: string;
  /** Aborting stops the run; run() then rejects with AbortError. */
  signal?: AbortSignal;
  /** The script's stdout as it comes (the live relay). */
  onStdout?: (text: string) => void;
  /** The script's stderr as it comes (agentbox's own lines are left out). */
  onStderr?: (text: string) => void;
  /** Packages the script needs (docs/requirements.md), one string each: `NAME@RANGE` for
   * Node ('is-number@7.0.0'), pip requirement specifiers for Python ('requests==2.31.0').
   * agentbox installs them before the run, in its install sandbox (only the package index
   * reachable), into a cached environment the run then uses read-only and offline;
   * `result.pre_run` says whether it was 'cached' or 'installed' and what it holds. */
  requirements?: string[];
  /** The package index for `requirements` (spec index.url; default: the operator's, else
   * npm / PyPI). */
  indexUrl?: string;
  /** Python: a directory of wheels to install from (spec index.find_links); the sandbox's
   * user must be able to read it. */
  findLinks?: string;
  /** Any other spec keys (without, seccomp_policy, venv, python, ...): docs/spec.md. */
  spec?: Record<string, unknown>;
}

export interface BinaryInfo {
  readonly path: string;
  readonly version: string;
  readonly reportSchemaVersion: number;
  readonly specVersion: number;
}

export declare function run(options: RunOptions): Promise<Result>;
export declare function binaryInfo(binary?: string): Promise<BinaryInfo>;
export declare function findBinary(binary?: string): string;

export declare class AgentboxError extends Error {
  constructor(message: string, fix?: string | null, result?: Result | null, options?: { cause?: unknown });
  /** What to do about it. */
  fix: string | null;
  /** The report, when agentbox wrote one. */
  result: Result | null;
}
export declare class AgentboxNotFoundError extends AgentboxError {}
export declare class IncompatibleAgentboxError extends AgentboxError {}
/** agentbox failed or refused before the script ran (status 'setup_error'). */
export declare class SetupError extends AgentboxError {}
/** The run described is invalid (status 'usage_error'). */
export declare class UsageError extends SetupError {}
/** The signal aborted the run; `result` is its report (status 'interrupted') if it has one. */
export declare class AbortError extends AgentboxError {
  constructor(message: string, result?: Result | null, cause?: unknown);
  code: 'ABORT_ERR';
}
/** raiseForStatus(): the script did not exit 0 on its own. */
export declare class RunFailedError extends Error {
  constructor(result: Result);
  result: Result;
}

// Sessions (issue 27): one live sandbox, code run cell by cell.

/** How a cell ended: 'timeout' and 'cancelled' were interrupted and the session goes on;
 * 'lost': the session ended during the cell (its state is gone). */
export type CellStatus = 'ok' | 'error' | 'timeout' | 'cancelled' | 'lost';

/** A figure the cell showed (plt.show(), or left open at its end). */
export interface CellImage {
  mime: string;
  data: Buffer;
}

/** The exception a cell raised; the traceback holds the cell's own frames. */
export interface CellError {
  type: string;
  value: string;
  traceback: string[];
}

/** A session as agentbox describes it (its {"ready"} and {"ended"} lines, a cell's
 * `session`). */
export interface SessionInfo {
  id: string;
  language: 'python' | 'node';
  state: 'starting' | 'ready' | 'busy' | 'ended';
  cells: number;
  idle_timeout_ms: number;
  max_lifetime_ms: number;
  /** The interpreter's version. */
  version?: string;
  /** How it ended, once it has. */
  ended?: string;
  /** The run report's status when its sandbox ended. */
  report_status?: Status;
  /** Set once restarted: the state before is gone. */
  restarted?: string;
  idle_ms?: number;
  age_ms?: number;
}

/** The result of one cell. All but `status` and `message` is what the code printed or
 * returned: untrusted text. */
export interface CellResult {
  id: number;
  status: CellStatus;
  stdout: string;
  stderr: string;
  /** The repr of the cell's last expression (null: no value). */
  result: string | null;
  /** A rich form of that value, where the object offers one cheaply (a DataFrame's HTML). */
  result_html: string | null;
  images: CellImage[];
  error: CellError | null;
  /** timeout / cancelled / lost: what happened, in agentbox's words. */
  message: string | null;
  wall_ms: number | null;
  session: SessionInfo;
}

export interface Cell extends CellResult {}
export declare class Cell {
  private constructor();
  /** The cell result as agentbox wrote it (byte counts, truncation, ...). */
  readonly raw: Record<string, unknown>;
  /** The cell ran to its end without an exception. */
  get ok(): boolean;
  /** Set when the cell ran in a restarted interpreter: the earlier state is gone. */
  get restarted(): string | null;
  /** Throws CellFailedError unless `ok`; returns the cell. */
  raiseForStatus(): this;
}

export interface SessionOptions {
  /** 'python' (the default) or 'node'. */
  language?: 'python' | 'node';
  /** { name: content } written into the workspace, or host paths copied in. */
  files?: Record<string, string | Uint8Array> | string[];
  env?: Record<string, string>;
  /** Bind the whole session (memory, pids, disk, ...). */
  limits?: RunLimits;
  /** Each cell's default timeout in seconds (default 60). */
  timeout?: number;
  /** Seconds, or a duration string ('10m'): ended after so long without a cell (default
   * 10 min). */
  idleTimeout?: number | string;
  /** Seconds, or a duration string ('1h'): ended after so long in all (default 1 h). */
  maxLifetime?: number | string;
  /** A dependency environment `agentbox prepare` made (spec env_dir). */
  envDir?: string;
  /** Where the files left go at close (default: a temporary directory the report owns);
   * false: none. */
  collect?: string | false;
  /** The agentbox binary (default: $AGENTBOX, else `agentbox` on PATH). */
  binary?: string;
  /** Packages the session needs, as RunOptions.requirements: installed (or found in
   * agentbox's cache) before the interpreter starts, read-only and offline for every cell;
   * the report close() resolves to has them in `pre_run`. */
  requirements?: string[];
  /** As RunOptions.indexUrl. */
  indexUrl?: string;
  /** As RunOptions.findLinks. */
  findLinks?: string;
  /** Any other spec keys: docs/spec.md. */
  spec?: Record<string, unknown>;
}

export interface CellOptions {
  /** This cell's timeout in seconds (status 'timeout'; default: the session's). */
  timeout?: number;
  /** Aborting interrupts the cell: it resolves with status 'cancelled'. */
  signal?: AbortSignal;
  /** A session that has ended gets a fresh interpreter first (else SessionEndedError). */
  restart?: boolean;
}

/** One live sandbox with one interpreter in it, for code run cell by cell. */
export declare class Session {
  private constructor();
  /** Resolves once the interpreter is ready; SetupError / UsageError when refused. */
  static create(options?: SessionOptions): Promise<Session>;
  readonly id: string;
  /** The session's last info. */
  readonly info: SessionInfo;
  readonly state: 'starting' | 'ready' | 'busy' | 'ended' | 'closed';
  /** One cell (calls queue, one runs at a time). Rejects with SessionEndedError when the
   * session has ended (unless `restart`). */
  run(code: string, options?: CellOptions): Promise<Cell>;
  /** Interrupts the running cell; false when none was running. */
  interrupt(): boolean;
  /** A fresh interpreter: the variables and files are gone. */
  restart(): Promise<SessionInfo>;
  /** Ends the session; its run report (a Result, or the raw report if it does not parse). */
  close(): Promise<Result | Record<string, unknown> | null>;
}

/** The session has ended (a crash, the idle timeout, its lifetime, or close()). */
export declare class SessionEndedError extends AgentboxError {
  constructor(message: string, fix?: string | null, info?: Partial<SessionInfo>);
  info: Partial<SessionInfo>;
  /** How it ended, in agentbox's words. */
  reason: string | null;
  reportStatus: Status | null;
}
/** cell.raiseForStatus(): the cell did not end 'ok'. */
export declare class CellFailedError extends Error {
  constructor(cell: Cell);
  cell: Cell;
}

export declare const CELL_SCHEMAS: readonly string[];
export declare const CELL_STATUSES: readonly CellStatus[];

export declare const VERSION: string;
export declare const SCHEMA_VERSIONS: readonly number[];
export declare const SPEC_VERSIONS: readonly number[];
export declare const BINARY_ENV: 'AGENTBOX';
export declare const STATUSES: readonly Status[];
export declare const LIMIT_NAMES: readonly (keyof Limits)[];
export declare const PROTECTION_NAMES: readonly (keyof Sandbox)[];
export declare const FILE_ORIGINS: readonly FileOrigin[];
export declare const NETWORK_MODES: readonly NetworkMode[];

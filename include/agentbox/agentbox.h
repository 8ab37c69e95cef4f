/* agentbox.h: run an untrusted Python or Node script in a bubblewrap sandbox and get one JSON
 * report back. The public API of libagentbox (link with `pkg-config --cflags --libs agentbox`).
 *
 * Every run happens in a supervisor process of its own (agentbox-supervisor, started for the
 * run): the namespaces, mounts, child subreaper, signal handling and cgroup membership live
 * and die there. The calling process keeps its children, signal mask and handlers, SIGCHLD
 * disposition, cwd, environment and fds; the library only holds the fds it documents (a run's
 * pollable fd) until the run is waited for. All functions are safe to call from several
 * threads at once on different objects; one object is not to be used by two threads at once.
 *
 * Errors: a function that can fail returns a negative errno-style value (or NULL) and, when
 * `err` is not NULL, sets *err to an ab_error the caller frees with ab_error_free. An error
 * carries a message, a fix (how to resolve it, may be empty) and the exit status agentbox's
 * command line would use (2: usage, 3: the package index prepare needs is unreachable, 125:
 * refused or failed before the script ran).
 *
 * A minimal program:
 *
 *     ab_spec *s = ab_spec_from_json("{\"language\":\"python\",\"code\":\"print(6*7)\"}",
 *                                    (size_t) -1, NULL);
 *     ab_result *res = NULL;
 *     if (ab_run(NULL, s, &res, NULL) == 0)
 *             printf("%s: %s", ab_result_status(res), ab_result_stdout(res, NULL));
 *     ab_result_free(res);
 *     ab_spec_free(s);
 */
#ifndef AGENTBOX_AGENTBOX_H
#define AGENTBOX_AGENTBOX_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define AB_API_VERSION 1 /* this header's API level */

typedef struct ab_context ab_context;       /* where helpers and run directories are */
typedef struct ab_spec ab_spec;             /* one run, described */
typedef struct ab_run_handle ab_run_handle; /* one run, started (asynchronous API) */
typedef struct ab_result ab_result;         /* one run, finished: its report */
typedef struct ab_error ab_error;

/* ---- errors ---------------------------------------------------------------------------- */

int ab_error_code(const ab_error *e); /* negative errno-style value */
const char *ab_error_message(const ab_error *e);
const char *ab_error_fix(const ab_error *e); /* "" when there is none */
int ab_error_exit_status(const ab_error *e); /* 2 (usage), 3 (unreachable), 125 (failed) */
/* Prefixes outer context to e's message ("outer: inner"), keeping the code and fix. */
void ab_error_wrap(ab_error *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ab_error_free(ab_error *e);

/* ---- context ---------------------------------------------------------------------------- */

/* Reads the environment once (AGENTBOX_RUNS_DIR, AGENTBOX_CACHE_DIR, AGENTBOX_BWRAP,
 * AGENTBOX_INIT, AGENTBOX_NETPROXY, AGENTBOX_SUPERVISOR, AGENTBOX_CGROUP, AGENTBOX_TIMING, HOME,
 * PATH, XDG_RUNTIME_DIR); nothing reads it again. NULL wherever a context is taken means a
 * default context made on the spot. */
ab_context *ab_context_new(ab_error **err);
/* Overrides one setting: "runs_dir", "cache_dir", "bwrap", "init", "netproxy", "supervisor",
 * "home", "path". value NULL restores "unset". "words": "flags" makes reports and errors name
 * the command line's flags (--memory) instead of the spec's keys (limits.memory, the default,
 * also "spec"). "supervisor_inline": "1" runs a run's supervisor in the calling process
 * instead of an exec of agentbox-supervisor: ab_run_start returns when the run is over (its
 * ab_run_fd is readable at once) and the process stays in the run's namespaces; only the
 * agentbox program (which carries the supervisor's code, is single-threaded and exits after
 * its run) can: elsewhere -ENOTSUP. Returns 0 or -EINVAL for an unknown key or value. */
int ab_context_set(ab_context *ctx, const char *key, const char *value);
void ab_context_free(ab_context *ctx);

/* ---- the run spec (docs/spec.md, schemas/spec.schema.json) ---------------------------- */

ab_spec *ab_spec_new(void);
/* Parses and checks a spec (len (size_t) -1: NUL-terminated). Unknown keys, wrong types and
 * values that do not parse are errors (exit status 2). */
ab_spec *ab_spec_from_json(const char *json, size_t len, ab_error **err);
/* The same from a jansson tree the caller already holds (an MCP server's request: no second
 * parse of megabytes of code). The spec shares the tree (it takes a reference): do not change
 * it afterwards. */
struct json_t;
ab_spec *ab_spec_from_jansson(struct json_t *tree, ab_error **err);
/* The spec as JSON (malloc'd; free with free()). */
char *ab_spec_to_json(const ab_spec *s);
ab_spec *ab_spec_copy(const ab_spec *s);
void ab_spec_free(ab_spec *s);

/* Setters: 0, or a negative errno with *err set (usage errors: exit status 2). */
int ab_spec_set_language(ab_spec *s, const char *lang, ab_error **err); /* python|node */
int ab_spec_set_script(ab_spec *s, const char *path, ab_error **err);
int ab_spec_set_code(ab_spec *s, const char *code, size_t len, ab_error **err);
int ab_spec_add_arg(ab_spec *s, const char *arg, ab_error **err);
int ab_spec_set_stdin_file(ab_spec *s, const char *path, ab_error **err);
int ab_spec_set_stdin_data(ab_spec *s, const char *data, size_t len, ab_error **err);
int ab_spec_set_env(ab_spec *s, const char *name, const char *value, ab_error **err);
int ab_spec_add_input(ab_spec *s, const char *path, ab_error **err);
int ab_spec_set_workspace(ab_spec *s, const char *dir, ab_error **err);
int ab_spec_set_collect(ab_spec *s, const char *dir, ab_error **err);
int ab_spec_set_rm(ab_spec *s, int rm, ab_error **err);
/* A limit by its name ("timeout", "memory", "pids", "cpus", "cpu-time", "disk", "inodes",
 * "tmp-size", "file-size", "nofile", "output-limit") and a value in the CLI's units ("512M",
 * "90s", "1.5"). */
int ab_spec_set_limit(ab_spec *s, const char *name, const char *value, ab_error **err);
/* Opts out of a default protection: "seccomp", "landlock", "disable-userns", "cgroup". */
int ab_spec_set_without(ab_spec *s, const char *protection, ab_error **err);
int ab_spec_set_env_dir(ab_spec *s, const char *dir, ab_error **err);
/* Any other spec key, its value as JSON text (e.g. key "ro_binds", value "[\"/opt/x\"]"). */
int ab_spec_set_json(ab_spec *s, const char *key, const char *value_json, ab_error **err);
/* The value of a key as JSON text (malloc'd; free it), or NULL when the spec does not set it. */
char *ab_spec_get_json(const ab_spec *s, const char *key);

/* ---- running ---------------------------------------------------------------------------- */

/* Where the script's output is relayed live (besides being captured in the report): fds of
 * the caller, or -1 for none (that stream is then not relayed at all: the report's
 * relay_dropped_bytes is null; the same for an fd that is /dev/null). The fds are duplicated
 * into the supervisor; the library never closes or changes them. */
typedef struct ab_io {
	int out_fd;
	int err_fd;
} ab_io;

/* Runs the spec and waits. 0 when the run produced a report (whatever its status: a script
 * that failed, a limit, or agentbox refusing the run are all reports; see
 * ab_result_agentbox_exit); a negative errno with *err when no report could be made. */
int ab_run(ab_context *ctx, const ab_spec *s, ab_result **ret, ab_error **err);
int ab_run_io(ab_context *ctx, const ab_spec *s, const ab_io *io, ab_result **ret, ab_error **err);

/* Asynchronous: start a run, poll its fd (readable when it has finished), then wait. Many
 * runs can be in flight at once from one thread. */
ab_run_handle *ab_run_start(ab_context *ctx, const ab_spec *s, const ab_io *io, ab_error **err);
int ab_run_fd(const ab_run_handle *r);
/* Stops the run (the sandbox is killed; the report says status "interrupted"). */
int ab_run_cancel(ab_run_handle *r);
/* Sends sig to the run's supervisor, which answers SIGINT, SIGTERM, SIGHUP and SIGQUIT by
 * stopping the run and reporting it (a CLI forwards the signals it gets this way). Returns 0,
 * or -EINVAL once the run has been waited for or its supervisor is gone, or -errno. */
int ab_run_signal(ab_run_handle *r, int sig);
/* Waits for the run to finish (at once when its fd was readable) and frees r. */
int ab_run_wait(ab_run_handle *r, ab_result **ret, ab_error **err);

/* ---- sessions (docs/sessions.md) --------------------------------------------------------- */

/* A session: one sandbox that outlives a call, one interpreter kept alive in it; cells run in
 * it one at a time, in one namespace (Python) or context (Node). Its spec is a run spec
 * without script, code, args or stdin, with "session": true or {"idle_timeout": "10m",
 * "max_lifetime": "1h"}; limits.timeout is each cell's default timeout, the other limits bind
 * the whole session. A cell's result is JSON (docs/sessions.md "A cell's result"). */
typedef struct ab_session ab_session;

/* Starts a session and returns at once (asynchronous: poll ab_session_fd with
 * ab_session_timeout_ms, then ab_session_step); a cell started before it is ready waits. */
ab_session *ab_session_start(ab_context *ctx, const ab_spec *s, ab_error **err);
/* Starts a session and waits until its interpreter is ready. */
ab_session *ab_session_new(ab_context *ctx, const ab_spec *s, ab_error **err);
/* Readable when ab_session_step has something to do; and call it at the latest after
 * ab_session_timeout_ms (-1: nothing is due). */
int ab_session_fd(const ab_session *s);
int ab_session_timeout_ms(const ab_session *s);
/* Moves the session on (never blocks). 1 when a cell finished (*ret_cell: its result, free()
 * it), 0 otherwise. Also ends an idle session (idle_timeout). */
int ab_session_step(ab_session *s, char **ret_cell, ab_error **err);
/* Starts a cell (timeout_ms <= 0: the spec's limits.timeout). -EPIPE once the session ended
 * (the error says how), -EBUSY while a cell runs. */
int ab_session_cell_start(ab_session *s, const char *code, size_t len, int64_t timeout_ms,
			  ab_error **err);
/* Interrupts the running cell (KeyboardInterrupt in Python): status "cancelled"; a cell that
 * does not stop within 2 s ends the session. */
int ab_session_interrupt(ab_session *s);
/* Runs a cell and waits for its result (*ret_cell, free() it). */
int ab_session_run(ab_session *s, const char *code, size_t len, int64_t timeout_ms, char **ret_cell,
		   ab_error **err);
/* "starting", "ready", "busy" or "ended". */
const char *ab_session_state(const ab_session *s);
const char *ab_session_id(const ab_session *s);
/* The session as JSON (id, language, state, cells, how it ended...); free() it. */
char *ab_session_info(const ab_session *s);
/* An ended session: a fresh interpreter in a fresh sandbox from the same spec; the next
 * cell's result says the state is gone ("session": {"restarted": ...}). */
int ab_session_restart(ab_session *s, ab_error **err);
/* Ends the session (its interpreter leaves; one that does not within 5 s is killed) and frees
 * it. *ret: its report (a run's, with "session"), when it produced one. */
int ab_session_close(ab_session *s, ab_result **ret, ab_error **err);

/* ---- warm slots (docs/api.md "Warm slots", docs/warm.md) ------------------------------- */

/* A pool of warm slots for a long-lived caller. A slot is one future run's sandbox, built
 * before the run is asked for: its cgroup, namespaces, mounts, empty workspace and the
 * interpreter already started (and, if asked, modules imported), waiting for its script. A run
 * whose spec is of a slot's class takes a ready slot: its files are copied in, its arguments
 * handed over, and it runs and is reported as a cold run would be (the report says "warm";
 * its clock, CPU time and memory peak start at the hand-over). A slot serves one run only and
 * is replaced when that run ends (250 ms after the claim at the latest, so that the
 * replacement is not built on the cores a short run uses); one no run took is killed and leaves
 * nothing. Runs of no class, or with no slot ready, start cold (ab_run_start). Not thread-safe: one
 * thread uses a pool. */
typedef struct ab_pool ab_pool;

/* An empty pool. ctx (NULL: a default context the pool owns) must outlive it. */
ab_pool *ab_pool_new(ab_context *ctx, ab_error **err);
/* Keeps `slots` slots (at most 64) ready for the class of tmpl: every key of tmpl but code,
 * args, inputs, collect, quiet, progress, inline_output, on_output_limit and the timeout and
 * output-limit limits, which each run brings. tmpl needs code (any), a language, no stdin, no
 * workspace, no cpu-time limit and nofile above 1000 (-EINVAL otherwise). opts_json: NULL, or
 * {"preimport":
 * ["numpy", ...] (modules each slot's interpreter imports before it is ready), "idle_ms": N
 * (let the slots go after N ms without a run of the class; the next run refills them)}.
 * Starts the slots. Returns 0 or a negative errno with *err (-EEXIST: the class is in the
 * pool already). */
int ab_pool_add(ab_pool *p, const ab_spec *tmpl, unsigned slots, const char *opts_json,
		ab_error **err);
/* Starts a run: in a ready slot of its class when there is one, else cold. Never blocks on a
 * slot being built. Then as ab_run_start (ab_run_fd, ab_run_cancel, ab_run_wait). */
ab_run_handle *ab_pool_run_start(ab_pool *p, const ab_spec *s, const ab_io *io, ab_error **err);
/* An fd to poll: readable when the pool has something to do (a slot became ready or ended);
 * then call ab_pool_tick. */
int ab_pool_fd(const ab_pool *p);
/* Housekeeping, never blocking: notes ready and failed slots, reaps ended ones, replaces
 * them (a class whose slots fail to start, or end while ready with no run, waits 1 s,
 * doubling to a minute, before it starts another; no more slots are built at once than the
 * caller has CPUs, two at least, counting the pool's runs in their first 250 ms; none in the
 * 5 ms after a tick found one of them ended), lets idle classes go. Returns the ms until it
 * wants to be called again, or -1. */
int ab_pool_tick(ab_pool *p);
/* Waits (at most timeout_ms) until every class that is not idle has its slots ready. 0, or
 * -ETIMEDOUT, or -EIO when a class's last slot failed to start (the message says why). */
int ab_pool_wait_ready(ab_pool *p, int timeout_ms, ab_error **err);
/* The pool as JSON (malloc'd): per class its template, pre-imports, slots wanted, ready and
 * starting, the memory the ready ones hold (Pss), warm and cold runs, slots started, failed
 * (to start) and lost (ended while ready), the back-off left (retry_in_ms) and the last
 * error; the total memory_bytes. */
char *ab_pool_info(ab_pool *p);
/* Lets every slot go and waits for their supervisors (a few ms each). Runs already started
 * from the pool are the caller's and go on. */
void ab_pool_free(ab_pool *p);

/* ---- results ---------------------------------------------------------------------------- */

const char *ab_result_json(const ab_result *r); /* the report (docs/report-schema.md) */
const char *ab_result_status(const ab_result *r);
int ab_result_exit_code(const ab_result *r); /* the script's, -1 when none */
int ab_result_signal(const ab_result *r);    /* 0 when none */
/* The exit status agentbox's command line would use for this run (README "Exit status"). */
int ab_result_agentbox_exit(const ab_result *r);
int64_t ab_result_wall_ms(const ab_result *r);
/* The report's stdout.text / stderr.text (NUL-terminated, possibly lossy UTF-8); *len its
 * bytes. A stream longer than the spec's inline_output (64K) is an excerpt there, its head and
 * tail around a marker line; the whole capture is then the file the report's stdout.file
 * names (in the run directory; none with rm). */
const char *ab_result_stdout(const ab_result *r, size_t *len);
const char *ab_result_stderr(const ab_result *r, size_t *len);
const char *ab_result_message(const ab_result *r); /* NULL when none */
const char *ab_result_fix(const ab_result *r);     /* NULL when none */
/* The report's warnings[i], and defaults_not_applied[i] (a default protection this host
 * could not apply; `agentbox doctor` explains it): NULL past the end. Each warning ends in
 * its fix. */
const char *ab_result_warning(const ab_result *r, size_t i);
const char *ab_result_default_not_applied(const ab_result *r, size_t i);
const char *ab_result_run_dir(const ab_result *r); /* NULL with rm */
const char *ab_result_workspace(const ab_result *r);
void ab_result_free(ab_result *r);

/* ---- the other commands (each JSON text in *ret, malloc'd) -------------------------------- */

/* What `agentbox doctor --json` prints: every check with its result and fix. */
int ab_probe(ab_context *ctx, char **ret, ab_error **err);
/* `agentbox prepare`: req is {"python": "requirements.txt"} or {"node": "package.json"} with
 * optional "lock", "interpreter", "system_site_packages", "find_links", "no_index", "index_url",
 * "allow_hosts", "cache_dir", "limits" ({"timeout","memory","pids","disk"}). *ret: {"env_dir":
 * PATH, "cache_hit": bool, "report": {...}}. Progress goes to io's fds. */
int ab_prepare(ab_context *ctx, const char *req_json, const ab_io *io, char **ret, ab_error **err);
/* Copies what a kept run left into dest (never through a link); *ret lists it. */
int ab_collect(ab_context *ctx, const char *run_dir, const char *dest, char **ret, ab_error **err);
/* Removes a kept run directory (one agentbox made; nothing else). */
int ab_rm(ab_context *ctx, const char *run_dir, ab_error **err);
/* Removes kept runs older than older_than_ms (0: all) under the runs directory; *ret says
 * what was removed and kept. */
int ab_gc(ab_context *ctx, int64_t older_than_ms, int dry_run, char **ret, ab_error **err);

const char *ab_version(void);

#ifdef __cplusplus
}
#endif

#endif

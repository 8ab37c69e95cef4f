/* api.c: libagentbox, the public API (include/agentbox/agentbox.h). A thin client: specs are
 * checked here, and each run, prepare, probe, collect, rm or gc happens in a supervisor
 * process of its own (src/supervisor/main.c). What this file does to the calling process:
 * opens the fds of a run (a pidfd, two memfds, one pipe end) and closes them in ab_run_wait;
 * starts the supervisor with clone3(CLONE_PIDFD) and exit_signal 0, so no SIGCHLD reaches
 * the caller and its waitpid(-1) never reaps it. Nothing else. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <linux/sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "../lib/api-private.h"
#include "../spec/cfg.h"
#include "../spec/spec.h"
#include "../util/fdclose.h"
#include "../util/fdutil.h"
#include "../util/macro.h"
#include "../util/path.h"
#include "../util/proc.h"
#include "../util/xalloc.h"
#include "agentbox/agentbox.h"
#include "config.h"

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

/* ---- errors ---------------------------------------------------------------------------- */

struct ab_error {
	int code;
	int exit;
	char *message;
	char *fix;
};

static ab_error *
error_new(int code, int exit, const char *fix, const char *fmt, va_list ap)
{
	ab_error *e = xcalloc(1, sizeof(*e));

	e->code = code < 0 ? code : -EIO;
	e->exit = exit ? exit : 125;
	if (vasprintf(&e->message, fmt, ap) < 0)
		e->message = xstrdup("out of memory");
	/* every usage error says how to fix it: docs/api.md has each call's arguments */
	e->fix = xstrdup(fix && *fix ? fix : e->exit == 2 ? "docs/api.md describes the call" : "");
	return e;
}

/* Sets *err (when err is not NULL) and returns code. */
int
api_fail(ab_error **err, int code, int exit, const char *fix, const char *fmt, ...)
{
	va_list ap;

	if (err) {
		va_start(ap, fmt);
		*err = error_new(code, exit, fix, fmt, ap);
		va_end(ap);
	}
	return code < 0 ? code : -EIO;
}

#define fail api_fail

int
api_fail_ab(ab_error **err, const struct ab_err *e)
{
	return fail(err, e->code, e->exit ? e->exit : 125, e->fix, "%s", e->msg);
}

AB_EXPORT int
ab_error_code(const ab_error *e)
{
	return e ? e->code : 0;
}

AB_EXPORT const char *
ab_error_message(const ab_error *e)
{
	return e ? e->message : "";
}

AB_EXPORT const char *
ab_error_fix(const ab_error *e)
{
	return e ? e->fix : "";
}

AB_EXPORT int
ab_error_exit_status(const ab_error *e)
{
	return e ? e->exit : 0;
}

AB_EXPORT void
ab_error_wrap(ab_error *e, const char *fmt, ...)
{
	char *outer = NULL, *both = NULL;
	va_list ap;

	if (!e)
		return;
	va_start(ap, fmt);
	if (vasprintf(&outer, fmt, ap) < 0)
		outer = NULL;
	va_end(ap);
	if (outer && asprintf(&both, "%s: %s", outer, e->message) >= 0) {
		free(e->message);
		e->message = both;
	}
	free(outer);
}

AB_EXPORT void
ab_error_free(ab_error *e)
{
	if (!e)
		return;
	free(e->message);
	free(e->fix);
	free(e);
}

/* ---- context ---------------------------------------------------------------------------- */

/* The supervisor's code (src/supervisor/entry.c), linked into the agentbox program only: a
 * hidden weak reference, NULL in libagentbox.so, so that only the command line can run its
 * supervisor in its own process ("supervisor_inline": a single-threaded program whose
 * process is there only for the run; a library caller's supervisors always exec). Saves the
 * exec, the intermediate process, the fork and a second address space per run (issue 29). */
extern int supervisor_main(int argc, char **argv) __attribute__((weak, visibility("hidden")));

struct ab_context {
	struct ab_cfg cfg;
	struct strv sanitizer_env; /* ASAN_OPTIONS etc., passed on to supervisors */
	bool flag_words;           /* the command line's: reports name its flags (words.h) */
	bool inline_runs;          /* "supervisor_inline": the command line's runs */
};

AB_EXPORT ab_context *
ab_context_new(ab_error **err)
{
	static const char *const pass[] = { "ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS" };
	ab_context *ctx = xcalloc(1, sizeof(*ctx));

	(void) err;
	cfg_from_env(&ctx->cfg);
	for (size_t i = 0; i < ARRAY_SIZE(pass); i++) {
		const char *v = getenv(pass[i]);

		if (v)
			strv_pushf(&ctx->sanitizer_env, "%s=%s", pass[i], v);
	}
	return ctx;
}

AB_EXPORT int
ab_context_set(ab_context *ctx, const char *key, const char *value)
{
	static const struct {
		const char *key;
		size_t off;
	} keys[] = {
		{ "runs_dir", offsetof(struct ab_cfg, runs_dir) },
		{ "cache_dir", offsetof(struct ab_cfg, cache_dir) },
		{ "bwrap", offsetof(struct ab_cfg, bwrap) },
		{ "init", offsetof(struct ab_cfg, init) },
		{ "netproxy", offsetof(struct ab_cfg, netproxy) },
		{ "supervisor", offsetof(struct ab_cfg, supervisor) },
		{ "home", offsetof(struct ab_cfg, home) },
		{ "path", offsetof(struct ab_cfg, path) },
		{ "keep_runs", offsetof(struct ab_cfg, keep_runs) },
		{ "keep_age", offsetof(struct ab_cfg, keep_age) },
		/* the operator's policy for requirements (docs/requirements.md) */
		{ "requirements", offsetof(struct ab_cfg, requirements) },
		{ "allow_packages", offsetof(struct ab_cfg, allow_packages) },
		{ "max_requirements", offsetof(struct ab_cfg, max_requirements) },
		{ "install_timeout", offsetof(struct ab_cfg, install_timeout) },
		{ "index_url", offsetof(struct ab_cfg, index_url) },
		{ "find_links", offsetof(struct ab_cfg, find_links) },
		{ "cache_max", offsetof(struct ab_cfg, cache_max) },
	};

	if (!ctx || !key)
		return -EINVAL;
	if (strcmp(key, "supervisor_inline") == 0) {
		if (value && strcmp(value, "1") != 0 && strcmp(value, "0") != 0)
			return -EINVAL;
		if (value && strcmp(value, "1") == 0 && !supervisor_main)
			return -ENOTSUP;
		ctx->inline_runs = value && strcmp(value, "1") == 0;
		return 0;
	}
	if (strcmp(key, "words") == 0) {
		if (value && strcmp(value, "flags") != 0 && strcmp(value, "spec") != 0)
			return -EINVAL;
		ctx->flag_words = value && strcmp(value, "flags") == 0;
		return 0;
	}
	for (size_t i = 0; i < ARRAY_SIZE(keys); i++) {
		char **field = (char **) ((char *) &ctx->cfg + keys[i].off);

		if (strcmp(key, keys[i].key) != 0)
			continue;
		free(*field);
		*field = value ? xstrdup(value) : NULL;
		return 0;
	}
	return -EINVAL;
}

bool
api_context_flag_words(const ab_context *ctx)
{
	return ctx && ctx->flag_words;
}

AB_EXPORT void
ab_context_free(ab_context *ctx)
{
	if (!ctx)
		return;
	cfg_done(&ctx->cfg);
	strv_done(&ctx->sanitizer_env);
	free(ctx);
}

/* ---- specs ------------------------------------------------------------------------------ */

struct ab_spec {
	json_t *j;     /* an object; each key checked when set, the whole once */
	bool whole_ok; /* the whole was checked (ab_spec_from_json) and not changed since */
	int stdin_fd;  /* its stdin_fd, when whole_ok */
};

const json_t *
api_spec_json(const ab_spec *s)
{
	return s ? s->j : NULL;
}

AB_EXPORT ab_spec *
ab_spec_new(void)
{
	ab_spec *s = xcalloc(1, sizeof(*s));

	s->j = json_object();
	return s;
}

/* Checks one key the way spec_parse will (the "script or code" rule waits for the run). */
static int
check_key(const char *key, json_t *v, ab_error **err)
{
	struct ab_run_opts o;
	struct ab_err e = { 0 };
	json_t *one = json_pack("{s:O}", key, v);
	int r;

	if (strcmp(key, "script") != 0 && strcmp(key, "code") != 0)
		json_object_set_new(one, "code", json_string("x"));
	run_opts_init(&o);
	r = spec_parse(one, &o, &e);
	run_opts_done(&o);
	json_decref(one);
	return r < 0 ? api_fail_ab(err, &e) : 0;
}

AB_EXPORT ab_spec *
ab_spec_from_json(const char *json, size_t len, ab_error **err)
{
	json_error_t je;
	ab_spec *s;
	json_t *j;

	if (!json)
		return fail(err, -EINVAL, 2, "pass the spec's JSON text (docs/spec.md)",
			    "spec: no JSON given"),
		       NULL;
	j = json_loadb(json, len == (size_t) -1 ? strlen(json) : len, JSON_REJECT_DUPLICATES, &je);
	if (!j) {
		fail(err, -EINVAL, 2, "pass one JSON object (docs/spec.md)",
		     "spec: not valid JSON (line %d, column %d): %s", je.line, je.column, je.text);
		return NULL;
	}
	s = ab_spec_from_jansson(j, err);
	json_decref(j);
	return s;
}

AB_EXPORT ab_spec *
ab_spec_from_jansson(struct json_t *j, ab_error **err)
{
	struct ab_run_opts o;
	struct ab_err e = { 0 };
	ab_spec *s;
	int r, in_fd;

	if (!json_is_object(j))
		return fail(err, -EINVAL, 2, "pass one JSON object (docs/spec.md)",
			    "spec: not a JSON object"),
		       NULL;
	run_opts_init(&o);
	r = spec_parse(j, &o, &e);
	in_fd = o.stdin_fd;
	run_opts_done(&o);
	if (r < 0) {
		api_fail_ab(err, &e);
		return NULL;
	}
	s = xcalloc(1, sizeof(*s));
	s->j = json_incref(j);
	s->whole_ok = true;
	s->stdin_fd = in_fd;
	return s;
}

AB_EXPORT char *
ab_spec_to_json(const ab_spec *s)
{
	return s ? json_dumps(s->j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
}

AB_EXPORT char *
ab_spec_get_json(const ab_spec *s, const char *key)
{
	const json_t *v = s && key ? json_object_get(s->j, key) : NULL;

	return v ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
}

AB_EXPORT ab_spec *
ab_spec_copy(const ab_spec *s)
{
	ab_spec *c;

	if (!s)
		return NULL;
	c = xcalloc(1, sizeof(*c));
	c->j = json_deep_copy(s->j);
	c->whole_ok = s->whole_ok;
	c->stdin_fd = s->stdin_fd;
	return c;
}

AB_EXPORT void
ab_spec_free(ab_spec *s)
{
	if (!s)
		return;
	json_decref(s->j);
	free(s);
}

/* Sets key to v (stolen) after checking it. */
static int
spec_put(ab_spec *s, const char *key, json_t *v, ab_error **err)
{
	int r;

	if (!s || !v) {
		json_decref(v);
		return fail(err, -EINVAL, 2, "pass a spec from ab_spec_new() and a value",
			    "spec: no spec or no value for \"%s\"", key);
	}
	r = check_key(key, v, err);
	if (r < 0) {
		json_decref(v);
		return r;
	}
	s->whole_ok = false;
	if (strcmp(key, "script") == 0)
		json_object_del(s->j, "code");
	if (strcmp(key, "code") == 0)
		json_object_del(s->j, "script");
	json_object_set_new(s->j, key, v);
	return 0;
}

/* Adds v (stolen) to the array or object at key. */
static int
spec_add(ab_spec *s, const char *key, const char *name, json_t *v, ab_error **err)
{
	json_t *cur = json_object_get(s->j, key);
	json_t *next = cur ? json_deep_copy(cur) : (name ? json_object() : json_array());

	if (name)
		json_object_set_new(next, name, v);
	else
		json_array_append_new(next, v);
	return spec_put(s, key, next, err);
}

AB_EXPORT int
ab_spec_set_language(ab_spec *s, const char *lang, ab_error **err)
{
	return spec_put(s, "language", json_string(lang ? lang : ""), err);
}

AB_EXPORT int
ab_spec_set_script(ab_spec *s, const char *path, ab_error **err)
{
	return spec_put(s, "script", json_string(path ? path : ""), err);
}

AB_EXPORT int
ab_spec_set_code(ab_spec *s, const char *code, size_t len, ab_error **err)
{
	if (!code)
		return fail(err, -EINVAL, 2, "pass the script's text", "spec: no code given");
	return spec_put(s, "code", json_stringn(code, len == (size_t) -1 ? strlen(code) : len),
			err);
}

AB_EXPORT int
ab_spec_add_arg(ab_spec *s, const char *arg, ab_error **err)
{
	return spec_add(s, "args", NULL, json_string(arg ? arg : ""), err);
}

AB_EXPORT int
ab_spec_set_stdin_file(ab_spec *s, const char *path, ab_error **err)
{
	return spec_put(s, "stdin", json_string(path ? path : ""), err);
}

AB_EXPORT int
ab_spec_set_stdin_data(ab_spec *s, const char *data, size_t len, ab_error **err)
{
	if (!data)
		return fail(err, -EINVAL, 2, "pass the text the script reads on stdin",
			    "spec: no stdin data given");
	return spec_put(s, "stdin_data",
			json_stringn(data, len == (size_t) -1 ? strlen(data) : len), err);
}

AB_EXPORT int
ab_spec_set_env(ab_spec *s, const char *name, const char *value, ab_error **err)
{
	if (!name || !value)
		return fail(err, -EINVAL, 2, "pass the variable's name and its value",
			    "spec: env needs a name and a value");
	return spec_add(s, "env", name, json_string(value), err);
}

AB_EXPORT int
ab_spec_add_input(ab_spec *s, const char *path, ab_error **err)
{
	return spec_add(s, "inputs", NULL, json_string(path ? path : ""), err);
}

AB_EXPORT int
ab_spec_set_workspace(ab_spec *s, const char *dir, ab_error **err)
{
	return spec_put(s, "workspace", json_string(dir ? dir : ""), err);
}

AB_EXPORT int
ab_spec_set_collect(ab_spec *s, const char *dir, ab_error **err)
{
	return spec_put(s, "collect", json_string(dir ? dir : ""), err);
}

AB_EXPORT int
ab_spec_set_rm(ab_spec *s, int rm, ab_error **err)
{
	return spec_put(s, "rm", json_boolean(rm), err);
}

AB_EXPORT int
ab_spec_set_limit(ab_spec *s, const char *name, const char *value, ab_error **err)
{
	if (!name || !value)
		return fail(err, -EINVAL, 2,
			    "pass a limit's name (\"memory\") and a value (\"512M\")",
			    "spec: a limit needs a name and a value");
	return spec_add(s, "limits", name, json_string(value), err);
}

AB_EXPORT int
ab_spec_set_without(ab_spec *s, const char *protection, ab_error **err)
{
	return spec_add(s, "without", NULL, json_string(protection ? protection : ""), err);
}

AB_EXPORT int
ab_spec_set_env_dir(ab_spec *s, const char *dir, ab_error **err)
{
	return spec_put(s, "env_dir", json_string(dir ? dir : ""), err);
}

AB_EXPORT int
ab_spec_set_json(ab_spec *s, const char *key, const char *value_json, ab_error **err)
{
	json_error_t je;
	json_t *v;

	if (!key || !value_json)
		return fail(err, -EINVAL, 2, "pass a spec key and its value as JSON text",
			    "spec: a key and a JSON value are needed");
	v = json_loads(value_json, JSON_DECODE_ANY, &je);
	if (!v)
		return fail(err, -EINVAL, 2, "pass the value as JSON text (a string in quotes)",
			    "spec: \"%s\": not valid JSON: %s", key, je.text);
	return spec_put(s, key, v, err);
}

/* ---- starting a supervisor -------------------------------------------------------------- */

#define run_free       api_run_free
#define finish_quietly api_finish_quietly

/* agentbox-supervisor: the context's, else next to the running program (the build tree,
 * the CLI and the supervisor itself), else the installed one. */
static char *
find_supervisor(const ab_context *ctx)
{
	return path_helper(ctx->cfg.supervisor, "agentbox-supervisor");
}

static int
sealed_memfd(const char *name, const char *text, size_t len)
{
	cleanup_fd int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);

	if (fd < 0 || write_all(fd, text, len) < 0 || lseek(fd, 0, SEEK_SET) < 0 ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) < 0)
		return -errno ? -errno : -EIO;
	return steal_fd(&fd);
}

/* A supervisor starts clean of its caller's signal state: default handlers, nothing blocked.
 * Async-signal-safe. */
static void
signals_clean(void)
{
	sigset_t none;

	proc_reset_signals();
	sigemptyset(&none);
	(void) sigprocmask(SIG_SETMASK, &none, NULL);
}

/* A supervisor's fds: src[0..6] onto fds 0..6. The sources are all >= 10, so the dup2s
 * cannot clobber one another. src[6] (a slot's control socket) may be -1: none. Returns how
 * many were placed (6 or 7; the fds from there up are the caller's to close or mark), or
 * -errno. Async-signal-safe. */
static int
supervisor_fds(const int src[7])
{
	int first = src[6] >= 0 ? 7 : 6;

	for (int i = 0; i < first; i++)
		if (dup2(src[i], i) < 0)
			return -errno;
	return first;
}

/* A new supervisor's process state (its child_exec): signals_clean, src[] on fds 0..6 and
 * nothing else open. Async-signal-safe calls only (the caller may have threads). */
static void
child_state(const int src[7])
{
	int first;

	signals_clean();
	first = supervisor_fds(src);
	if (first < 0)
		_exit(127);
	(void) fds_close_from(first);
}

/* Between clone3 and execve. */
static _Noreturn void
child_exec(const char *path, char *const argv[], char *const envp[], const int src[7])
{
	child_state(src);
	execve(path, argv, envp);
	_exit(127);
}

static int
high(int fd)
{
	int h = fd < 0 ? -1 : fcntl(fd, F_DUPFD_CLOEXEC, 10);

	if (fd >= 0)
		(void) close(fd);
	return h;
}

/* In the intermediate process (a copy of the caller that never execs, so only
 * async-signal-safe calls): starts the supervisor as its own child, tells the caller its pid,
 * lets go of every fd it inherited, and reaps the supervisor. Its exit, with exit_signal 0,
 * sends the caller no SIGCHLD; the supervisor's exit (an exec resets exit_signal to SIGCHLD)
 * goes to this process, never to the caller. */
static _Noreturn void
intermediate(const char *path, char *const argv[], char *const envp[], const int src[7], int pid_w)
{
	struct sigaction ign = { .sa_handler = SIG_IGN };
	static const int quiet[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE };
	long sup;
	int st, code;

	/* the caller's handlers are not ours; a terminal's ^C is the supervisor's to answer (a
	 * new process has no pending signal for the emptied mask to let through first) */
	signals_clean();
	for (size_t i = 0; i < ARRAY_SIZE(quiet); i++)
		(void) sigaction(quiet[i], &ign, NULL);
	/* vfork: this process is single-threaded and only waits for the exec; no page tables
	 * to copy */
	sup = vfork();
	if (sup == 0)
		child_exec(path, argv, envp, src);
	{
		int v = sup < 0 ? -errno : (int) sup;

		(void) !write(pid_w, &v, sizeof(v));
	}
	/* nothing of the caller's stays open here: a pipe end held by this process would keep
	 * the caller's readers (and the supervisor's watch pipe) from ever seeing EOF */
	(void) fds_close_from(0);
	if (sup < 0)
		_exit(127);
	while (waitpid((pid_t) sup, &st, 0) < 0)
		if (errno != EINTR)
			_exit(127);
	code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	_exit(code);
}

/* Puts back fds 0..6 as saved[] had them (-1: it was closed), and closes saved[]. */
static void
fds_put_back(int saved[7])
{
	for (int i = 0; i < 7; i++) {
		if (saved[i] >= 0) {
			(void) dup2(saved[i], i);
			(void) close(saved[i]);
			saved[i] = -1;
		} else {
			(void) close(i);
		}
	}
}

/* The command line's supervisor ("supervisor_inline"): supervisor_main called in this
 * process, which has one thread and is there only for this run. The supervisor gets what
 * child_exec gives agentbox-supervisor: src[] on fds 0..6, nothing else that an exec would
 * carry (every other fd is marked close-on-exec: its children exec bwrap, busctl and the
 * proxy, and the caller's inherited fds are not theirs), default handlers, nothing blocked,
 * and the clean environment envp. What is this process's own comes back after: fds 0..6,
 * the environment, the working directory, SIGPIPE's handler. What the supervisor leaves is
 * what it would have left in its own process, gone with this one a moment later: its mount
 * (and user) namespace, its cgroup, the stop signals and SIGCHLD blocked (a signal now waits
 * for the report, as it did behind the command line's forwarding). Returns supervisor_main's
 * status, or -errno when the fds could not be arranged (nothing ran). */
static int
inline_supervisor(char *const argv[], char *const envp[], const int src[7])
{
	extern char **environ;
	char **env_was = environ;
	struct sigaction pipe_was;
	int saved[7], first = 0, code;
	cleanup_fd int cwd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);

	(void) fflush(NULL); /* nothing of ours is buffered when the supervisor writes */
	for (int i = 0; i < 7; i++) {
		saved[i] = fcntl(i, F_DUPFD_CLOEXEC, 10);
		if (saved[i] < 0 && errno != EBADF)
			first = -errno;
	}
	if (first == 0)
		first = supervisor_fds(src);
	if (first < 0) {
		fds_put_back(saved);
		return first;
	}
	for (int i = first; i < 7; i++)
		(void) close(i);
	(void) fds_cloexec_from(7);
	(void) sigaction(SIGPIPE, NULL, &pipe_was);
	signals_clean();
	environ = (char **) envp;
	code = supervisor_main(2, (char **) argv);
	environ = env_was;
	(void) fflush(NULL); /* what the supervisor printed goes where its fds 1 and 2 went */
	fds_put_back(saved);
	if (cwd >= 0)
		(void) !fchdir(cwd);
	(void) sigaction(SIGPIPE, &pipe_was, NULL);
	return code;
}

/* Starts `agentbox-supervisor mode` with the request (config + body). */
static ab_run_handle *
start(ab_context *ctx, const char *mode, const char *body_key, const json_t *body, const ab_io *io,
      ab_error **err)
{
	return api_start(ctx, mode, body_key, body, NULL, NULL, io, -1, -1, err);
}

ab_run_handle *
api_start(ab_context *ctx, const char *mode, const char *body_key, const json_t *body,
	  const char *extra_key, const json_t *extra, const ab_io *io, int ctl_fd, int in_fd,
	  ab_error **err)
{
	/* the command line's run: its supervisor runs in this process (inline_supervisor) */
	bool inl = ctx->inline_runs && strcmp(mode, "run") == 0 && ctl_fd < 0;
	cleanup_free char *path = inl ? NULL : find_supervisor(ctx), *text = NULL;
	cleanup_fd int req = -1, nul = -1, out = -1, errfd = -1, watch_r = -1, in = -1, resp = -1;
	cleanup_fd int ctl = -1;
	json_t *request;
	struct strv env = { 0 };
	int watch[2] = { -1, -1 }, pp[2] = { -1, -1 }, pidfd = -1, sup = -1;
	struct clone_args ca = { 0 };
	ab_run_handle *r;
	long mid;

	request = json_pack("{s:o, s:O}", "config", cfg_to_json(&ctx->cfg), body_key, body);
	if (extra_key)
		json_object_set(request, extra_key, (json_t *) extra);
	text = json_dumps(request, JSON_COMPACT);
	json_decref(request);
	if (!text)
		return fail(err, -ENOMEM, 125, NULL, "out of memory"), NULL;
	r = xcalloc(1, sizeof(*r));
	r->pidfd = r->sup_pidfd = r->response_fd = r->watch_w = -1;
	req = high(sealed_memfd("agentbox-request", text, strlen(text)));
	r->response_fd = memfd_create("agentbox-response", MFD_CLOEXEC);
	resp = r->response_fd >= 0 ? fcntl(r->response_fd, F_DUPFD_CLOEXEC, 10) : -1;
	nul = open("/dev/null", O_RDWR | O_CLOEXEC);
	/* a run's stdin_fd, streamed by the supervisor into the sandbox (feed.h) */
	in = high(in_fd >= 0 ? fcntl(in_fd, F_DUPFD_CLOEXEC, 0)
			     : (nul >= 0 ? fcntl(nul, F_DUPFD_CLOEXEC, 0) : -1));
	out = high(io && io->out_fd >= 0 ? fcntl(io->out_fd, F_DUPFD_CLOEXEC, 0)
					 : fcntl(nul, F_DUPFD_CLOEXEC, 0));
	errfd = high(io && io->err_fd >= 0 ? fcntl(io->err_fd, F_DUPFD_CLOEXEC, 0)
					   : fcntl(nul, F_DUPFD_CLOEXEC, 0));
	if (pipe2(watch, O_CLOEXEC) == 0) {
		watch_r = high(watch[0]);
		r->watch_w = watch[1];
	}
	if (ctl_fd >= 0)
		ctl = fcntl(ctl_fd, F_DUPFD_CLOEXEC, 10);
	if (req < 0 || resp < 0 || in < 0 || out < 0 || errfd < 0 || watch_r < 0 ||
	    (ctl_fd >= 0 && ctl < 0) || (!inl && pipe2(pp, O_CLOEXEC) < 0)) {
		int e = errno;

		run_free(r);
		return fail(err, -e, 125, NULL, "start a run: %s", strerror(e)), NULL;
	}
	strv_push(&env, "PATH=/usr/sbin:/usr/bin:/sbin:/bin");
	STRV_FOREACH (kv, &ctx->sanitizer_env)
		strv_push(&env, *kv);
	{
		int src[7] = { in, out, errfd, req, resp, watch_r, ctl };
		char *argv[] = { (char *) "agentbox-supervisor", (char *) mode, NULL };

		if (inl) {
			/* the handle returned is that of a run already over */
			int code = inline_supervisor(argv, strv_array(&env), src);

			strv_done(&env);
			if (code < 0) {
				run_free(r);
				return fail(err, code, 125, NULL, "start a run: %s",
					    strerror(-code)),
				       NULL;
			}
			r->ran_inline = true;
			r->inline_exit = code;
			return r;
		}
		ca.flags = CLONE_PIDFD;
		ca.pidfd = (uint64_t) (uintptr_t) &pidfd;
		ca.exit_signal = 0; /* no SIGCHLD for the caller; waitpid(-1) never reaps it */
		mid = syscall(SYS_clone3, &ca, sizeof(ca));
		if (mid < 0 && errno == ENOSYS) {
			/* no clone3 (an old kernel, or valgrind): the same with clone(2), exit
			 * signal 0 in its flags, the pidfd opened after */
			mid = syscall(SYS_clone, 0UL, 0UL, 0UL, 0UL, 0UL);
			if (mid > 0)
				pidfd = (int) syscall(SYS_pidfd_open, (pid_t) mid, 0);
		}
		if (mid == 0)
			intermediate(path, argv, strv_array(&env), src, pp[1]);
	}
	strv_done(&env);
	(void) close(pp[1]);
	if (mid >= 0 && read(pp[0], &sup, sizeof(sup)) != (ssize_t) sizeof(sup))
		sup = -EIO;
	(void) close(pp[0]);
	if (mid < 0 || sup < 0) {
		int e = mid < 0 ? errno : -sup;

		r->pidfd = pidfd;
		r->pid = (pid_t) mid;
		if (mid > 0)
			(void) finish_quietly(r);
		run_free(r);
		return fail(err, -e, 125, "check that agentbox is installed (meson install)",
			    "start agentbox-supervisor '%s': %s", path, strerror(e)),
		       NULL;
	}
	r->pid = (pid_t) mid;
	r->pidfd = pidfd;
	/* the supervisor is the intermediate's child, which reaps it only when it ends: its
	 * pid cannot be reused while we hold on, so this pidfd names it or nothing */
	r->sup_pidfd = (int) syscall(SYS_pidfd_open, sup, 0);
	return r;
}

/* Waits for the supervisor and returns its response text (malloc'd, maybe empty). */
static int
finish(ab_run_handle *r, char **ret_text, ab_error **err)
{
	siginfo_t si = { 0 };
	struct stat st;
	char *text = NULL;
	size_t got = 0;

	if (r->watch_w >= 0) {
		/* keep it open until the end: closing it would stop the run */
	}
	while (r->pidfd >= 0 && waitid(P_PIDFD, (id_t) r->pidfd, &si, WEXITED | __WALL) < 0) {
		if (errno != EINTR)
			return fail(err, -errno, 125, NULL, "wait for the supervisor: %s",
				    strerror(errno));
	}
	r->waited = true;
	if (fstat(r->response_fd, &st) < 0)
		return fail(err, -errno, 125, NULL, "read the response: %s", strerror(errno));
	text = xmalloc((size_t) st.st_size + 1);
	while (got < (size_t) st.st_size) {
		ssize_t n =
			pread(r->response_fd, text + got, (size_t) st.st_size - got, (off_t) got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t) n;
	}
	text[got] = '\0';
	if (got == 0) {
		free(text);
		if (r->ran_inline)
			return fail(err, -EIO, 125, "report a bug with the output above",
				    "the run's supervisor ended without a response (status %d)",
				    r->inline_exit);
		if (si.si_code == CLD_EXITED && si.si_status == 127)
			return fail(err, -ENOENT, 125,
				    "check that agentbox is installed (meson "
				    "install), or set AGENTBOX_SUPERVISOR",
				    "agentbox-supervisor could not be started");
		return fail(err, -EIO, 125, "report a bug with the output above",
			    "agentbox-supervisor ended without a response (%s %d)",
			    si.si_code == CLD_EXITED ? "exit" : "signal", si.si_status);
	}
	*ret_text = text;
	return 0;
}

int
finish_quietly(ab_run_handle *r)
{
	siginfo_t si;

	while (r->pidfd >= 0 && waitid(P_PIDFD, (id_t) r->pidfd, &si, WEXITED | __WALL) < 0)
		if (errno != EINTR)
			return -errno;
	r->waited = true;
	return 0;
}

void
run_free(ab_run_handle *r)
{
	if (r->pidfd >= 0)
		(void) close(r->pidfd);
	if (r->sup_pidfd >= 0)
		(void) close(r->sup_pidfd);
	if (r->response_fd >= 0)
		(void) close(r->response_fd);
	if (r->watch_w >= 0)
		(void) close(r->watch_w);
	free(r);
}

/* A command's response {"result": ...} or {"error": ...}. */
static int
command(ab_context *ctx, const char *mode, json_t *body, const ab_io *io, json_t **ret,
	ab_error **err)
{
	ab_context *own = NULL;
	cleanup_free char *text = NULL;
	json_t *resp, *e;
	ab_run_handle *r;
	int rc;

	if (!ctx)
		ctx = own = ab_context_new(err);
	r = start(ctx, mode, "request", body, io, err);
	json_decref(body);
	ab_context_free(own);
	if (!r)
		return -EIO;
	rc = finish(r, &text, err);
	run_free(r);
	if (rc < 0)
		return rc;
	resp = json_loads(text, 0, NULL);
	if (!resp)
		return fail(err, -EIO, 125, NULL, "agentbox-supervisor answered garbage");
	e = json_object_get(resp, "error");
	if (e) {
		rc = fail(err, (int) json_integer_value(json_object_get(e, "code")),
			  (int) json_integer_value(json_object_get(e, "exit")),
			  json_string_value(json_object_get(e, "fix")), "%s",
			  json_string_value(json_object_get(e, "message")) ?: "?");
		/* a failed prepare still carries its report */
		if (ret && json_object_get(resp, "result"))
			*ret = json_incref(json_object_get(resp, "result"));
	} else if (ret) {
		*ret = json_incref(json_object_get(resp, "result"));
	}
	json_decref(resp);
	return rc;
}

/* ---- runs -------------------------------------------------------------------------------- */

struct ab_result {
	char *text;   /* the report as written */
	json_t *json; /* parsed */
	char *out, *err_text;
	size_t out_len, err_len;
};

void
api_result_annotate(ab_result *r, const char *key, json_t *v)
{
	char *text;

	if (!r || !r->json) {
		json_decref(v);
		return;
	}
	json_object_set_new(r->json, key, v);
	text = json_dumps(r->json, JSON_COMPACT);
	if (text) {
		free(r->text);
		r->text = text;
	}
}

AB_EXPORT ab_run_handle *
ab_run_start(ab_context *ctx, const ab_spec *s, const ab_io *io, ab_error **err)
{
	ab_context *own = NULL;
	struct ab_run_opts o;
	struct ab_err e = { 0 };
	ab_run_handle *r;
	int rc, in_fd;

	if (!s)
		return fail(err, -EINVAL, 2, "pass a spec (ab_spec_from_json, ab_spec_new)",
			    "no spec given"),
		       NULL;
	/* the whole spec, as the supervisor will read it: refused here, not after a fork (once:
	 * a spec from ab_spec_from_json, not changed since, was checked whole then) */
	if (s->whole_ok) {
		in_fd = s->stdin_fd;
	} else {
		run_opts_init(&o);
		rc = spec_parse(s->j, &o, &e);
		in_fd = o.stdin_fd;
		run_opts_done(&o);
		if (rc < 0)
			return api_fail_ab(err, &e), NULL;
	}
	if (in_fd >= 0 && fcntl(in_fd, F_GETFD) < 0)
		return fail(err, -EBADF, 2,
			    "open the stream first, or leave stdin_fd out (the script's stdin is "
			    "then /dev/null)",
			    "stdin_fd %d is not an open fd of this process", in_fd),
		       NULL;
	if (!ctx)
		ctx = own = ab_context_new(err);
	{
		json_t *words = json_string("flags");

		r = api_start(ctx, "run", "spec", s->j, ctx->flag_words ? "words" : NULL, words, io,
			      -1, in_fd, err);
		json_decref(words);
	}
	ab_context_free(own);
	return r;
}

AB_EXPORT int
ab_run_fd(const ab_run_handle *r)
{
	/* an inline run is over: its response memfd, a regular file, polls readable */
	return r ? (r->ran_inline ? r->response_fd : r->pidfd) : -1;
}

AB_EXPORT int
ab_run_signal(ab_run_handle *r, int sig)
{
	if (!r || r->waited || r->sup_pidfd < 0)
		return -EINVAL;
	return syscall(SYS_pidfd_send_signal, r->sup_pidfd, sig, NULL, 0) < 0 ? -errno : 0;
}

AB_EXPORT int
ab_run_cancel(ab_run_handle *r)
{
	return ab_run_signal(r, SIGTERM);
}

static char *
stream_text(const json_t *rep, const char *key, size_t *ret_len)
{
	const json_t *t = json_object_get(json_object_get(rep, key), "text");

	*ret_len = json_is_string(t) ? json_string_length(t) : 0;
	return xstrdup(json_is_string(t) ? json_string_value(t) : "");
}

AB_EXPORT int
ab_run_wait(ab_run_handle *r, ab_result **ret, ab_error **err)
{
	cleanup_free char *text = NULL;
	ab_result *res;
	json_t *j;
	int rc;

	if (ret)
		*ret = NULL;
	if (!r)
		return fail(err, -EINVAL, 2, "pass the handle ab_run_start returned",
			    "no run given");
	if (r->pid <= 0 && !r->ran_inline) { /* never started */
		run_free(r);
		return -EINVAL;
	}
	rc = finish(r, &text, err);
	run_free(r);
	if (rc < 0)
		return rc;
	j = json_loads(text, 0, NULL);
	if (!j || !json_is_object(j))
		return fail(err, -EIO, 125, NULL, "agentbox-supervisor answered garbage");
	if (json_object_get(j, "result") || json_object_get(j, "error")) {
		/* not a report: a dry run, or the supervisor's own failure */
		const json_t *e = json_object_get(j, "error");

		rc = e ? fail(err, (int) json_integer_value(json_object_get(e, "code")),
			      (int) json_integer_value(json_object_get(e, "exit")),
			      json_string_value(json_object_get(e, "fix")), "%s",
			      json_string_value(json_object_get(e, "message")) ?: "?")
		       : 1;
		json_decref(j);
		return rc;
	}
	res = xcalloc(1, sizeof(*res));
	res->text = steal_ptr(&text);
	res->json = j;
	res->out = stream_text(j, "stdout", &res->out_len);
	res->err_text = stream_text(j, "stderr", &res->err_len);
	if (ret)
		*ret = res;
	else
		ab_result_free(res);
	return 0;
}

AB_EXPORT int
ab_run_io(ab_context *ctx, const ab_spec *s, const ab_io *io, ab_result **ret, ab_error **err)
{
	ab_run_handle *r = ab_run_start(ctx, s, io, err);

	if (ret)
		*ret = NULL;
	if (!r)
		return -EINVAL;
	return ab_run_wait(r, ret, err);
}

AB_EXPORT int
ab_run(ab_context *ctx, const ab_spec *s, ab_result **ret, ab_error **err)
{
	return ab_run_io(ctx, s, NULL, ret, err);
}

/* ---- results ----------------------------------------------------------------------------- */

static const char *
res_str(const ab_result *r, const char *key)
{
	return r ? json_string_value(json_object_get(r->json, key)) : NULL;
}

static int64_t
res_int(const ab_result *r, const char *key, int64_t dflt)
{
	const json_t *v = r ? json_object_get(r->json, key) : NULL;

	return json_is_integer(v) ? (int64_t) json_integer_value(v) : dflt;
}

AB_EXPORT const char *
ab_result_json(const ab_result *r)
{
	return r ? r->text : NULL;
}

AB_EXPORT const char *
ab_result_status(const ab_result *r)
{
	return res_str(r, "status");
}

AB_EXPORT int
ab_result_exit_code(const ab_result *r)
{
	return (int) res_int(r, "exit_code", -1);
}

AB_EXPORT int
ab_result_signal(const ab_result *r)
{
	return (int) res_int(r, "signal", 0);
}

AB_EXPORT int
ab_result_agentbox_exit(const ab_result *r)
{
	return (int) res_int(r, "agentbox_exit", 125);
}

AB_EXPORT int64_t
ab_result_wall_ms(const ab_result *r)
{
	return res_int(r, "wall_ms", -1);
}

AB_EXPORT const char *
ab_result_stdout(const ab_result *r, size_t *len)
{
	if (len)
		*len = r ? r->out_len : 0;
	return r ? r->out : NULL;
}

AB_EXPORT const char *
ab_result_stderr(const ab_result *r, size_t *len)
{
	if (len)
		*len = r ? r->err_len : 0;
	return r ? r->err_text : NULL;
}

AB_EXPORT const char *
ab_result_message(const ab_result *r)
{
	return res_str(r, "message");
}

AB_EXPORT const char *
ab_result_fix(const ab_result *r)
{
	return res_str(r, "fix");
}

AB_EXPORT const char *
ab_result_warning(const ab_result *r, size_t i)
{
	return r ? json_string_value(json_array_get(json_object_get(r->json, "warnings"), i))
		 : NULL;
}

AB_EXPORT const char *
ab_result_default_not_applied(const ab_result *r, size_t i)
{
	return r ? json_string_value(
			   json_array_get(json_object_get(r->json, "defaults_not_applied"), i))
		 : NULL;
}

AB_EXPORT const char *
ab_result_run_dir(const ab_result *r)
{
	return res_str(r, "run_dir");
}

AB_EXPORT const char *
ab_result_workspace(const ab_result *r)
{
	return res_str(r, "workspace");
}

AB_EXPORT void
ab_result_free(ab_result *r)
{
	if (!r)
		return;
	free(r->text);
	free(r->out);
	free(r->err_text);
	json_decref(r->json);
	free(r);
}

/* ---- the other commands ------------------------------------------------------------------ */

static int
dump(json_t *j, char **ret)
{
	if (ret)
		*ret = j ? json_dumps(j, JSON_INDENT(2) | JSON_SORT_KEYS) : NULL;
	json_decref(j);
	return 0;
}

/* "memory: M; pids: P; cpus: C" from a report's limits, as the probe's "limits" check says it
 * (doctor.c), so the two can be compared word for word. */
static char *
limits_line(const json_t *rep)
{
	const json_t *l = json_object_get(rep, "limits");
	const char *m[3];
	static const char *const names[] = { "memory", "pids", "cpus" };
	char *out = NULL;

	for (int i = 0; i < 3; i++) {
		m[i] = json_string_value(
			json_object_get(json_object_get(l, names[i]), "mechanism"));
		m[i] = m[i] ? m[i] : "not enforced";
	}
	if (asprintf(&out, "memory: %s; pids: %s; cpus: %s", m[0], m[1], m[2]) < 0)
		return NULL;
	return out;
}

/* doctor's sandbox runs (issue 23): a real run of a one-line script through this library,
 * the very path every run takes (a supervisor of its own, its systemd scope, its cgroup), so
 * doctor can never pass where runs fail. The check names the cgroup the run got, and the run's
 * limit mechanisms must be the ones the probe predicted. required: a failure is a FAIL (and
 * "ok" false), else a warning. */
static void
probe_run(ab_context *ctx, json_t *probe, const char *check, const char *lang, const char *code,
	  bool required)
{
	json_t *checks = json_object_get(probe, "checks"), *c, *rep = NULL;
	const char *predicted = NULL, *status;
	cleanup_free char *got = NULL, *detail = NULL, *fix = NULL, *cg_text = NULL;
	ab_error *e = NULL;
	ab_result *res = NULL;
	ab_spec *s;
	size_t i;
	bool ok = false;

	json_array_foreach(checks, i, c)
	{
		if (strcmp(json_string_value(json_object_get(c, "check")) ?: "", "limits") == 0)
			predicted = json_string_value(json_object_get(c, "detail"));
	}
	s = ab_spec_new();
	if (ab_spec_set_language(s, lang, &e) == 0 &&
	    ab_spec_set_code(s, code, strlen(code), &e) == 0 && ab_spec_set_rm(s, 1, &e) == 0 &&
	    ab_spec_set_limit(s, "timeout", "30s", &e) == 0 && ab_run(ctx, s, &res, &e) == 0)
		rep = json_loads(ab_result_json(res), 0, NULL);
	ab_spec_free(s);
	status = json_string_value(json_object_get(rep, "status"));
	{
		const json_t *g = json_object_get(json_object_get(rep, "sandbox"), "cgroup");
		const char *d = json_string_value(json_object_get(g, "detail"));

		cg_text = json_is_true(json_object_get(g, "enforced"))
				  ? xasprintf("%s", d ? d : "?")
				  : xasprintf("none (%s)", d ? d : "not set up");
	}
	got = rep ? limits_line(rep) : NULL;
	if (!rep) {
		detail = xasprintf("no run: %s", e ? ab_error_message(e) : "no report");
		fix = xasprintf("%s",
				e && ab_error_fix(e)[0] ? ab_error_fix(e) : "see the message");
	} else if (!status || strcmp(status, "exited") != 0 ||
		   json_integer_value(json_object_get(rep, "exit_code")) != 0) {
		detail =
			xasprintf("status %s, exit %lld: %s", status ? status : "?",
				  (long long) json_integer_value(json_object_get(rep, "exit_code")),
				  json_string_value(json_object_get(rep, "message"))
					  ?: "the script did not print ok");
		fix = xasprintf("%s", json_string_value(json_object_get(rep, "fix"))
					      ?: "see the message");
	} else if (required && predicted && got && strcmp(predicted, got) != 0) {
		detail = xasprintf("the run got %s, but the checks above predicted %s", got,
				   predicted);
		fix = xasprintf("report a bug: doctor and a run must agree");
	} else {
		ok = true;
		detail = xasprintf("status exited, exit 0, %lld ms; cgroup: %s%s%s",
				   (long long) json_integer_value(json_object_get(rep, "wall_ms")),
				   cg_text, required ? "; " : "", required ? got : "");
	}
	json_array_append_new(checks, json_pack("{s:s, s:s, s:s, s:s?}", "check", check, "result",
						ok         ? "ok"
						: required ? "FAIL"
							   : "warn",
						"detail", detail, "fix", ok ? NULL : fix));
	if (!ok && required) {
		const char *cls =
			json_string_value(json_object_get(json_object_get(probe, "host"), "class"));

		json_object_set_new(probe, "ok", json_false());
		json_object_set_new(probe, "summary",
				    json_sprintf("%s: agentbox refuses to run here until the FAIL "
						 "lines are fixed",
						 cls ? cls : "this host"));
	}
	json_decref(rep);
	ab_result_free(res);
	ab_error_free(e);
}

AB_EXPORT int
ab_probe(ab_context *ctx, char **ret, ab_error **err)
{
	json_t *j = NULL;
	int r = command(ctx, "probe", json_object(), NULL, &j, err);

	if (r < 0) {
		json_decref(j);
		return r;
	}
	/* the host checks passed: now a run through the path every run takes */
	if (json_is_true(json_object_get(j, "ok"))) {
		probe_run(ctx, j, "sandbox run", "python", "print('ok')\n", true);
		probe_run(ctx, j, "sandbox run node", "node", "console.log('ok')\n", false);
	}
	return dump(j, ret);
}

AB_EXPORT int
ab_prepare(ab_context *ctx, const char *req_json, const ab_io *io, char **ret, ab_error **err)
{
	json_t *req, *j = NULL;
	json_error_t je;
	int r;

	if (ret)
		*ret = NULL;
	req = req_json ? json_loads(req_json, 0, &je) : NULL;
	if (!json_is_object(req)) {
		json_decref(req);
		return fail(err, -EINVAL, 2,
			    "pass a JSON object such as {\"python\": \"requirements.txt\"}",
			    "prepare: the request is not a JSON object");
	}
	r = command(ctx, "prepare", req, io, &j, err);
	dump(j, ret);
	return r;
}

AB_EXPORT int
ab_collect(ab_context *ctx, const char *run_dir, const char *dest, char **ret, ab_error **err)
{
	json_t *j = NULL;
	int r;

	if (!run_dir || !dest)
		return fail(err, -EINVAL, 2, "pass a kept run directory and a destination",
			    "collect: give RUN_DIR and DIR");
	r = command(ctx, "collect", json_pack("{s:s, s:s}", "run_dir", run_dir, "dest", dest), NULL,
		    &j, err);
	if (r < 0) {
		json_decref(j);
		return r;
	}
	return dump(j, ret);
}

AB_EXPORT int
ab_rm(ab_context *ctx, const char *run_dir, ab_error **err)
{
	if (!run_dir)
		return fail(err, -EINVAL, 2, "pass a kept run directory", "rm: give RUN_DIR");
	return command(ctx, "rm", json_pack("{s:s}", "run_dir", run_dir), NULL, NULL, err);
}

AB_EXPORT int
ab_gc(ab_context *ctx, int64_t older_than_ms, int dry_run, char **ret, ab_error **err)
{
	json_t *j = NULL;
	int r = command(ctx, "gc",
			json_pack("{s:I, s:b}", "older_than_ms", (json_int_t) older_than_ms,
				  "dry_run", dry_run),
			NULL, &j, err);

	if (r < 0) {
		json_decref(j);
		return r;
	}
	return dump(j, ret);
}

AB_EXPORT const char *
ab_version(void)
{
	return AB_VERSION;
}

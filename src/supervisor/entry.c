/* agentbox-supervisor: one process per run (or per prepare / doctor / collect / rm / gc), started
 * by libagentbox (src/lib/api.c): the program agentbox-supervisor (main.c), or, for the command
 * line's run, the command line's own process, which calls supervisor_main without a fork or an
 * exec (api.c inline_supervisor, "supervisor_inline") and exits after it. Everything
 * process-wide lives and dies here: the user and mount namespaces, the child subreaper, the
 * signalfd, cgroup membership, the cwd. The caller of the library is never touched.
 *
 *   argv:  agentbox-supervisor MODE    MODE: run slot prepare probe collect rm gc
 *   fd 0, 1, 2   the script's stdin default (/dev/null), and where output is relayed
 *   fd 3         the request: {"config": {...}, "spec"|"request": {...}} (sealed memfd)
 *   fd 4         the response: a run's report text, or {"result": ...} / {"error": ...}
 *   fd 5         the caller's watch pipe: EOF means the caller is gone; the run is stopped
 *   fd 6         slot mode: the pool's control socket (SOCK_SEQPACKET, src/lib/pool.c); a
 *                session (run mode, spec "session"): the library's socket to the driver,
 *                which the sandbox gets at fd 1000 (src/session/session.h)
 * Exit status 0 when a response was written.
 *
 * Slot mode (warm.h, docs/design.md "Warm slots"): the request is {"config", "spec": the
 * template, "slot": {"preimport": [...], "ready_timeout_ms": N}}. The sandbox is built for the
 * template and waits; on fd 6 the supervisor says {"ready": {...}} or {"failed": {...}}, and
 * answers a {"claim": {}} (fds: the run's spec in a memfd, its stdout and stderr) with
 * {"accepted": true} or {"declined": WHY}. A claimed slot responds with the run's report, as
 * run mode; one no run took responds with an error and keeps nothing. */
#include "entry.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/socket.h>
#include <sys/stat.h>

#include "../session/session.h"
#include "../spec/cfg.h"
#include "../spec/record.h"
#include "../spec/report.h"
#include "../spec/spec.h"
#include "../util/fdutil.h"
#include "../util/macro.h"
#include "../util/proc.h"
#include "../util/xalloc.h"
#include "../warm/warm.h"
#include "cgroup/cgroup.h"
#include "cmds.h"
#include "prepare.h"
#include "requirements.h"
#include "run.h"
#include "supervise.h"

#define SUP_FD_REQUEST  3
#define SUP_FD_RESPONSE 4
#define SUP_FD_WATCH    5
#define SUP_FD_CTL      6

static int response_fd = -1;

/* Reads the whole request from fd 3. */
static json_t *
read_request(void)
{
	cleanup_free char *text = NULL;
	struct stat st;
	json_error_t je;
	size_t got = 0;

	if (fstat(SUP_FD_REQUEST, &st) < 0 || st.st_size <= 0 || st.st_size > (64 << 20))
		return NULL;
	text = xmalloc((size_t) st.st_size + 1);
	while (got < (size_t) st.st_size) {
		ssize_t n =
			pread(SUP_FD_REQUEST, text + got, (size_t) st.st_size - got, (off_t) got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return NULL;
		got += (size_t) n;
	}
	text[got] = '\0';
	return json_loadb(text, got, 0, &je);
}

static int
respond_text(const char *text, size_t len)
{
	if (ftruncate(response_fd, 0) < 0 || lseek(response_fd, 0, SEEK_SET) < 0)
		return -errno;
	return write_all(response_fd, text, len);
}

/* {"result": ...} or {"error": {"code", "message", "fix", "exit"}} */
static int
respond(json_t *result, const struct ab_err *err)
{
	json_t *o = json_object();
	cleanup_free char *text = NULL;
	int r;

	if (err && err->code < 0)
		json_object_set_new(o, "error",
				    json_pack("{s:i, s:s, s:s, s:i}", "code", err->code, "message",
					      err->msg, "fix", err->fix, "exit",
					      err->exit ? err->exit : AB_EXIT_SETUP));
	/* a failed command may still have something to say (prepare: the install's report) */
	if (result || !err || err->code >= 0)
		json_object_set_new(o, "result", result ? result : json_null());
	text = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	if (!text)
		return -ENOMEM;
	r = respond_text(text, strlen(text));
	return r;
}

/* The report of a run: built and serialised here, with agentbox's own peak memory measured
 * last and patched in, written to the response and to a kept run's directory. */
static int
respond_report(struct ab_record *res)
{
	cleanup_free char *text = NULL;
	size_t len = 0;
	json_t *rep;

	res->supervisor_max_rss_kib = INT64_MAX;
	rep = report_build(res);
	text = report_dumps(rep, &len);
	json_decref(rep);
	if (!text)
		return -ENOMEM;
	res->supervisor_max_rss_kib = proc_self_peak_rss_kib();
	(void) report_patch_int(&text, &len, "agentbox_max_rss_kib", res->supervisor_max_rss_kib);
	if (res->run_dir_fd >= 0 && res->run_dir_kept) {
		struct ab_report_dest kept = { .dirfd = res->run_dir_fd, .base = "report.json" };

		(void) report_write_at(&kept, text, len);
	}
	return respond_text(text, len);
}

/* A run's cgroup (cgroup.h cg_enter_scope): on a systemd host this process first asks systemd
 * for a delegated scope of its own, before it enters any namespace. Not for a run that wants no
 * cgroup, nor for a dry run (which makes nothing). */
static void
enter_scope(const struct ab_run_opts *o)
{
	if (!o || (!o->without[AB_PROT_CGROUP] && !o->dry_run)) {
		(void) cg_enter_scope();
		timing_mark("systemd scope");
	}
}

/* A session (docs/sessions.md): the driver is the code, the library's socket is on fd 6. */
static int
session_request(struct ab_run_opts *o, struct ab_err *err)
{
	if (fcntl(SUP_FD_CTL, F_GETFD) < 0)
		return ab_err_usage(err, "a session needs the library's socket on fd %d",
				    SUP_FD_CTL),
		       ab_err_fix(err, "start sessions through ab_session_start (libagentbox)");
	if (o->lang == AB_LANG_AUTO)
		o->lang = AB_LANG_PYTHON;
	o->code = o->lang == AB_LANG_NODE ? ab_session_js : ab_session_py;
	o->code_len = strlen(o->code);
	o->session_fd = SUP_FD_CTL;
	return 0;
}

static int
mode_run(const json_t *req)
{
	struct ab_run_opts o;
	struct ab_record res;
	struct ab_err err = { 0 };
	int r, fds_before, env_lock = -1;

	run_opts_init(&o);
	result_init(&res, &o);
	r = spec_parse(json_object_get(req, "spec"), &o, &err);
	/* the command line asked: its messages name flags (words.h) */
	o.flag_words = json_is_string(json_object_get(req, "words")) &&
		       strcmp(json_string_value(json_object_get(req, "words")), "flags") == 0;
	if (r == 0 && o.session)
		r = session_request(&o, &err);
	if (r == 0)
		enter_scope(&o);
	/* packages on request: the environment first (its install a sandbox of its own) */
	o.watch_fd = fcntl(SUP_FD_WATCH, F_GETFD) >= 0 ? SUP_FD_WATCH : -1;
	if (r == 0 && o.requirements.n)
		r = requirements_resolve(&o, &res, &env_lock, &err);
	if (r == 0) {
		fds_before = fds_count_from(3);
		r = run_main(&o, &res, &err);
		/* every fd of the run is closed by now: one more than at the start is a leak */
		res.supervisor_fds_left =
			fds_count_from(3) - fds_before - (res.run_dir_fd >= 0 ? 1 : 0);
	}
	if (r < 0) {
		/* every usage error says how to fix it; these are what each check names */
		if (err.exit == AB_EXIT_USAGE)
			ab_err_fix(&err, "%s",
				   o.flag_words ? "agentbox run --help says what each option takes"
						: "docs/spec.md says what each key takes");
		res.status =
			err.exit == AB_EXIT_USAGE ? AB_STATUS_USAGE_ERROR : AB_STATUS_SETUP_ERROR;
		result_set_message(&res, err.msg, err.fix);
		res.agentbox_exit = err.exit ? err.exit : AB_EXIT_SETUP;
	} else {
		res.agentbox_exit = run_exit_code(&res);
	}
	r = res.status == AB_STATUS_DRY_RUN ? respond(json_string("dry_run"), NULL)
					    : respond_report(&res);
	if (env_lock >= 0)
		(void) close(env_lock); /* the environment is no longer in use */
	timing_mark("report written");
	result_done(&res);
	run_opts_done(&o);
	return r;
}

/* The slot's request beyond its spec: the pre-imports (checked names), the ready timeout. */
static int
slot_request(const json_t *slot, enum ab_lang lang, struct ab_slot_opts *so, struct ab_err *err)
{
	const json_t *pre = json_object_get(slot, "preimport");
	const json_t *t = json_object_get(slot, "ready_timeout_ms");
	size_t i;
	json_t *m;

	if (pre && (!json_is_array(pre) || json_array_size(pre) > AB_WARM_MAX_MODS))
		return ab_err_usage(err, "slot: \"preimport\" must be an array of at most %d names",
				    AB_WARM_MAX_MODS);
	json_array_foreach(pre, i, m)
	{
		if (!json_is_string(m) || !warm_module_ok(lang, json_string_value(m)))
			return ab_err_usage(err, "slot: pre-import '%s' is not a module name",
					    json_is_string(m) ? json_string_value(m) : "?");
		strv_push(&so->preimport, json_string_value(m));
	}
	if (json_is_integer(t) && json_integer_value(t) > 0)
		so->ready_timeout_ms = json_integer_value(t);
	return 0;
}

/* A warm slot: run_main builds the sandbox for the template and waits; a claim makes it a run,
 * whose report is the response. */
static int
mode_slot(const json_t *req)
{
	const json_t *spec = json_object_get(req, "spec");
	struct ab_slot_opts so = { .ctl_fd = SUP_FD_CTL, .state = AB_WARM_STARTING };
	struct ab_run_opts o;
	struct ab_record res;
	struct ab_err err = { 0 };
	int r, fds_before = 0;

	run_opts_init(&o);
	result_init(&res, &o);
	r = fcntl(SUP_FD_CTL, F_GETFD) < 0 ? ab_err_usage(&err, "slot mode without fd 6") : 0;
	if (r == 0)
		r = spec_parse(spec, &o, &err);
	if (r == 0)
		r = slot_request(json_object_get(req, "slot"), o.lang, &so, &err);
	if (r == 0) {
		so.class_key = warm_class_key(spec);
		o.slot = &so;
		enter_scope(&o);
		(void) fcntl(SUP_FD_CTL, F_SETFD, FD_CLOEXEC);
		fds_before = fds_count_from(3);
		o.watch_fd = fcntl(SUP_FD_WATCH, F_GETFD) >= 0 ? SUP_FD_WATCH : -1;
		r = run_main(&o, &res, &err);
	}
	if (so.state != AB_WARM_CLAIMED) {
		/* no run: the library hears why on fd 6 (supervise.c said it when it knew) */
		if (so.state == AB_WARM_STARTING || (r < 0 && so.state != AB_WARM_FAILED)) {
			json_t *m = json_pack("{s:{s:s}}", "failed", "message",
					      r < 0 ? err.msg : "the slot could not start");
			char *t = json_dumps(m, JSON_COMPACT);

			if (t)
				(void) send(SUP_FD_CTL, t, strlen(t), MSG_NOSIGNAL | MSG_DONTWAIT);
			free(t);
			json_decref(m);
		}
		if (r >= 0)
			ab_err_set(&err, -ECANCELED, "%s",
				   so.state == AB_WARM_FAILED ? so.failure
							      : "the slot was not used");
		r = respond(NULL, &err);
	} else {
		res.supervisor_fds_left =
			fds_count_from(3) - fds_before - (res.run_dir_fd >= 0 ? 1 : 0);
		if (r < 0) {
			res.status = err.exit == AB_EXIT_USAGE ? AB_STATUS_USAGE_ERROR
							       : AB_STATUS_SETUP_ERROR;
			result_set_message(&res, err.msg, err.fix);
			res.agentbox_exit = err.exit ? err.exit : AB_EXIT_SETUP;
		} else {
			res.agentbox_exit = run_exit_code(&res);
		}
		r = respond_report(&res);
	}
	result_done(&res);
	if (so.claimed) {
		run_opts_done(so.claimed);
		free(so.claimed);
	}
	run_opts_done(&o);
	strv_done(&so.preimport);
	free(so.class_key);
	return r;
}

static int
mode_other(const char *mode, const json_t *req)
{
	const json_t *q = json_object_get(req, "request");
	struct ab_err err = { 0 };
	json_t *result = NULL;
	int r;

	/* prepare's install sandbox gets its cgroup as a run does; doctor sees what a run sees */
	if (strcmp(mode, "prepare") == 0 || strcmp(mode, "probe") == 0)
		enter_scope(NULL);
	if (strcmp(mode, "prepare") == 0)
		r = prepare_do(q, &result, &err);
	else if (strcmp(mode, "probe") == 0)
		r = doctor_checks(&result, &err);
	else if (strcmp(mode, "collect") == 0)
		r = collect_do(json_string_value(json_object_get(q, "run_dir")),
			       json_string_value(json_object_get(q, "dest")), &result, &err);
	else if (strcmp(mode, "rm") == 0)
		r = rm_do(json_string_value(json_object_get(q, "run_dir")), &err);
	else if (strcmp(mode, "gc") == 0)
		r = gc_do(json_integer_value(json_object_get(q, "older_than_ms")),
			  json_is_true(json_object_get(q, "dry_run")), &result, &err);
	else
		r = ab_err_usage(&err, "agentbox-supervisor: unknown mode '%s'", mode);
	return respond(result, r < 0 ? &err : NULL);
}

int
supervisor_main(int argc, char **argv)
{
	struct ab_cfg c;
	json_t *req;
	int r;

	if (argc < 2 || fcntl(SUP_FD_REQUEST, F_GETFD) < 0 || fcntl(SUP_FD_RESPONSE, F_GETFD) < 0) {
		fprintf(stderr, "agentbox-supervisor: started by libagentbox, not by hand\n");
		return 2;
	}
	/* Signals the run answers (the caller's cancel, a terminal's ^C) stay blocked from the
	 * start: a signal during set-up is picked up by the supervision loop, which stops the
	 * run and reports it, instead of killing us before there is a report. */
	{
		sigset_t set;

		sigemptyset(&set);
		proc_add_stop_signals(&set);
		(void) sigprocmask(SIG_BLOCK, &set, NULL);
	}
	req = read_request();
	response_fd = fcntl(SUP_FD_RESPONSE, F_DUPFD_CLOEXEC, 10);
	if (!req || response_fd < 0) {
		fprintf(stderr, "agentbox-supervisor: cannot read the request\n");
		return 2;
	}
	(void) fcntl(SUP_FD_REQUEST, F_SETFD, FD_CLOEXEC);
	(void) fcntl(SUP_FD_WATCH, F_SETFD, FD_CLOEXEC);
	(void) close(SUP_FD_RESPONSE);
	if (cfg_from_json(json_object_get(req, "config"), &c) == 0) {
		cfg_set(&c);
		cfg_done(&c);
	}
	if (strcmp(argv[1], "run") == 0)
		r = mode_run(req);
	else if (strcmp(argv[1], "slot") == 0)
		r = mode_slot(req);
	else
		r = mode_other(argv[1], req);
	json_decref(req);
	return r < 0 ? 1 : 0;
}

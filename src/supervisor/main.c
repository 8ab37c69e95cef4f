/* agentbox-supervisor: one process per run (or per prepare / doctor / collect / rm / gc), started
 * by libagentbox (src/lib/api.c). Everything process-wide lives and dies here: the user and
 * mount namespaces, the child subreaper, the signalfd, cgroup membership, the cwd. The caller
 * of the library is never touched.
 *
 *   argv:  agentbox-supervisor MODE [--in-scope]     MODE: run prepare probe collect rm gc
 *   fd 0, 1, 2   the script's stdin default (/dev/null), and where output is relayed
 *   fd 3         the request: {"config": {...}, "spec"|"request": {...}} (sealed memfd)
 *   fd 4         the response: a run's report text, or {"result": ...} / {"error": ...}
 *   fd 5         the caller's watch pipe: EOF means the caller is gone; the run is stopped
 * Exit status 0 when a response was written. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/stat.h>

#include "../cfg.h"
#include "../cmds.h"
#include "../prepare.h"
#include "../report.h"
#include "../result.h"
#include "../run.h"
#include "../spec.h"
#include "../util/fdutil.h"
#include "../util/macro.h"
#include "../util/proc.h"
#include "../util/xalloc.h"

#define SUP_FD_REQUEST  3
#define SUP_FD_RESPONSE 4
#define SUP_FD_WATCH    5

static int response_fd = -1;

/* Reads the whole request from fd 3 (from offset 0: a re-exec inside a systemd scope reads it
 * again). */
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
respond_report(struct ab_result *res)
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

static int
mode_run(const json_t *req, int argc, char **argv)
{
	struct ab_run_opts o;
	struct ab_result res;
	struct ab_err err = { 0 };
	int r, fds_before;

	run_opts_init(&o);
	result_init(&res, &o);
	r = spec_parse(json_object_get(req, "spec"), &o, &err);
	if (r == 0) {
		run_maybe_reexec_in_scope(argc, argv, &o);
		fds_before = fds_count_from(3);
		o.watch_fd = fcntl(SUP_FD_WATCH, F_GETFD) >= 0 ? SUP_FD_WATCH : -1;
		r = run_main(&o, &res, &err);
		/* every fd of the run is closed by now: one more than at the start is a leak */
		res.supervisor_fds_left =
			fds_count_from(3) - fds_before - (res.run_dir_fd >= 0 ? 1 : 0);
	}
	if (r < 0) {
		res.status =
			err.exit == AB_EXIT_USAGE ? AB_STATUS_USAGE_ERROR : AB_STATUS_SETUP_ERROR;
		result_set_message(&res, err.msg, err.fix);
		res.agentbox_exit = err.exit ? err.exit : AB_EXIT_SETUP;
	} else {
		res.agentbox_exit = run_exit_code(&res);
	}
	r = res.status == AB_STATUS_DRY_RUN ? respond(json_string("dry_run"), NULL)
					    : respond_report(&res);
	timing_mark("report written");
	result_done(&res);
	run_opts_done(&o);
	return r;
}

static int
mode_other(const char *mode, const json_t *req)
{
	const json_t *q = json_object_get(req, "request");
	struct ab_err err = { 0 };
	json_t *result = NULL;
	int r;

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
main(int argc, char **argv)
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
		sigaddset(&set, SIGINT);
		sigaddset(&set, SIGTERM);
		sigaddset(&set, SIGHUP);
		sigaddset(&set, SIGQUIT);
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
		c.in_scope = c.in_scope || (argc > 2 && strcmp(argv[2], "--in-scope") == 0);
		cfg_set(&c);
		cfg_done(&c);
	}
	if (strcmp(argv[1], "run") == 0)
		r = mode_run(req, argc, argv);
	else
		r = mode_other(argv[1], req);
	json_decref(req);
	return r < 0 ? 1 : 0;
}

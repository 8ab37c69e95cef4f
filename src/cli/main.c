/* agentbox: the command line, a thin client of libagentbox. Flags become a run spec
 * (src/cli.c → src/spec.c), the library runs it in a supervisor process, and this file
 * prints: the report where --report says, warnings and errors on stderr (this is the one
 * place that prints them), and the exit status. No sandboxing happens in this process. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/signalfd.h>

#include "../cli.h"
#include "../lib/api-private.h"
#include "../mcp/mcp.h"
#include "../prepare.h"
#include "../report.h"
#include "../result.h"
#include "../spec.h"
#include "../units.h"
#include "../util/fdutil.h"
#include "../util/macro.h"
#include "../util/xalloc.h"
#include "agentbox/agentbox.h"
#include "config.h"

static const char main_help[] =
	"usage: agentbox COMMAND [OPTIONS...]\n"
	"\n"
	"Commands:\n"
	"  run [OPTIONS] SCRIPT [ARGS...]   run SCRIPT in a sandbox (agentbox run --help)\n"
	"  run --spec FILE|-                run what a JSON spec describes (docs/spec.md)\n"
	"  prepare --python REQS | --node PKG  build a dependency environment (sandboxed)\n"
	"  doctor [--json]                  check what this host supports, with fixes\n"
	"  collect RUN_DIR DIR              copy what a kept run left into DIR\n"
	"  rm RUN_DIR...                    remove kept runs\n"
	"  gc [--older-than DUR]            remove kept runs (all, or older than DUR)\n"
	"  mcp [OPTIONS]                    an MCP server on stdin/stdout (agentbox mcp --help)\n"
	"  version                          print the version\n"
	"  help                             this text\n"
	"\n"
	"`agentbox run --help` lists the run options.\n";

/* The one place that prints an error: "agentbox: MESSAGE (fix: FIX)". */
static void
print_error(const char *prefix, const char *msg, const char *fix, bool usage)
{
	fprintf(stderr, "agentbox: %s%s%s%s%s\n", prefix, msg, fix && *fix ? " (fix: " : "",
		fix && *fix ? fix : "", fix && *fix ? ")" : "");
	if (usage)
		fprintf(stderr, "Try 'agentbox run --help' for more information.\n");
}

static int
fail_with(const char *prefix, ab_error *e)
{
	int code = ab_error_exit_status(e);

	print_error(prefix, ab_error_message(e), ab_error_fix(e), false);
	ab_error_free(e);
	return code;
}

/* A report for a run refused before the library had it (a flag that does not parse): the
 * same schema as every other report. */
static void
write_usage_report(struct ab_run_opts *o, const struct ab_report_dest *dest,
		   const struct ab_err *err)
{
	struct ab_result res;
	cleanup_free char *text = NULL;
	size_t len = 0;
	json_t *rep;

	result_init(&res, o);
	res.status = AB_STATUS_USAGE_ERROR;
	result_set_message(&res, err->msg, err->fix);
	res.agentbox_exit = AB_EXIT_USAGE;
	rep = report_build(&res);
	text = report_dumps(rep, &len);
	json_decref(rep);
	if (text)
		(void) report_write_at(dest, text, len);
	result_done(&res);
}

/* Waits for the run; SIGINT, SIGTERM, SIGHUP and SIGQUIT go on to the supervisor, which
 * stops the run and reports it (a terminal's ^C reaches it directly too). */
static int
wait_forwarding(ab_run_handle *run, ab_result **ret, ab_error **err)
{
	sigset_t set, old;
	int sfd;

	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGQUIT);
	(void) sigprocmask(SIG_BLOCK, &set, &old);
	sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	for (;;) {
		struct pollfd p[2] = { { .fd = ab_run_fd(run), .events = POLLIN },
				       { .fd = sfd, .events = POLLIN } };

		if (poll(p, 2, -1) < 0 && errno != EINTR)
			break;
		if (p[1].revents & POLLIN) {
			struct signalfd_siginfo si;

			while (read(sfd, &si, sizeof(si)) == (ssize_t) sizeof(si))
				(void) api_run_signal(run, (int) si.ssi_signo);
		}
		if (p[0].revents)
			break;
	}
	if (sfd >= 0)
		(void) close(sfd);
	return ab_run_wait(run, ret, err);
}

/* The report's warnings, or its error line for a run agentbox refused. */
static void
print_outcome(const ab_result *res)
{
	json_t *rep = json_loads(ab_result_json(res), 0, NULL);
	const char *status = ab_result_status(res);
	size_t i;
	json_t *w;

	if (status && (strcmp(status, "setup_error") == 0 || strcmp(status, "usage_error") == 0)) {
		print_error("", ab_result_message(res) ? ab_result_message(res) : "failed",
			    ab_result_fix(res), strcmp(status, "usage_error") == 0);
	} else {
		json_array_foreach(json_object_get(rep, "warnings"), i, w)
			fprintf(stderr, "agentbox: warning: %s\n", json_string_value(w));
	}
	json_decref(rep);
}

static int
cmd_run(int argc, char **argv)
{
	struct ab_run_opts o;
	struct ab_err err = { 0 };
	struct ab_report_dest dest = { .dirfd = -1 };
	bool have_dest = false;
	cleanup_free char *code = NULL, *spec_text = NULL;
	ab_context *ctx = NULL;
	ab_spec *spec = NULL;
	ab_result *res = NULL;
	ab_error *e = NULL;
	ab_run_handle *run;
	int r, code_exit;

	run_opts_init(&o);
	r = cli_parse_run(argc, argv, &o, &err);
	if (r == 1) {
		fputs(cli_run_help(), stdout);
		run_opts_done(&o);
		return 0;
	}
	/* --report-fd: must be open now, and is not passed on to anything */
	if (r == 0 && o.report_fd > 0 && fcntl(o.report_fd, F_GETFD) < 0)
		r = ab_err_usage(&err, "--report-fd %d is not an open fd", o.report_fd);
	if (r == 0 && o.report_fd > 0)
		(void) fcntl(o.report_fd, F_SETFD, FD_CLOEXEC);
	/* --spec: the whole run as JSON; other flags may not be mixed in */
	if (r == 0 && o.spec_path) {
		cleanup_fd int fd = strcmp(o.spec_path, "-") == 0
					    ? fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3)
					    : open(o.spec_path, O_RDONLY | O_CLOEXEC);
		struct ab_run_opts so;
		const char *report = o.report_path;

		if (fd < 0 || read_all_capped(fd, 64 << 20, &spec_text) < 0) {
			r = ab_err_usage(&err, "--spec '%s': %s", o.spec_path,
					 fd < 0 ? strerror(errno)
						: "cannot read it (over 64 MiB?)");
		} else {
			run_opts_init(&so);
			r = spec_parse_text(spec_text, (size_t) -1, &so, &err);
			run_opts_done(&so);
		}
		o.report_path = report;
	}
	/* SCRIPT '-': the code comes from our stdin */
	if (r == 0 && !o.spec_path && !o.code && strcmp(o.script, "-") == 0) {
		ssize_t n = read_all_capped(STDIN_FILENO, 16u << 20, &code);

		if (n < 0)
			r = ab_err_usage(&err, "reading the script from stdin: %s",
					 n == -EFBIG ? "more than 16 MiB" : strerror((int) -n));
		else {
			o.code = code;
			o.code_len = (size_t) n;
		}
	}
	/* The report's destination before anything runs: a report that cannot be written
	 * stops the run here, not after it. */
	if (o.report_path) {
		struct ab_err derr = { 0 };
		int d = report_dest_open(o.report_path, &dest, r == 0 ? &err : &derr);

		have_dest = d == 0;
		if (r == 0)
			r = d;
	}
	if (r < 0) {
		if (have_dest)
			write_usage_report(&o, &dest, &err);
		print_error("", err.msg, err.fix, err.exit == AB_EXIT_USAGE);
		report_dest_done(&dest);
		run_opts_done(&o);
		return err.exit ? err.exit : AB_EXIT_SETUP;
	}
	if (!spec_text) {
		json_t *j = spec_build(&o);

		spec_text = json_dumps(j, JSON_COMPACT);
		json_decref(j);
	}
	ctx = ab_context_new(NULL);
	spec = ab_spec_from_json(spec_text, (size_t) -1, &e);
	run = spec ? ab_run_start(ctx, spec, &(ab_io){ STDOUT_FILENO, STDERR_FILENO }, &e) : NULL;
	r = run ? wait_forwarding(run, &res, &e) : -EINVAL;
	ab_spec_free(spec);
	ab_context_free(ctx);
	if (r == 1) { /* --dry-run: the command line was printed */
		code_exit = 0;
	} else if (r < 0) {
		if (have_dest && ab_error_exit_status(e) == AB_EXIT_USAGE) {
			struct ab_err ue = { .code = -EINVAL, .exit = AB_EXIT_USAGE };

			snprintf(ue.msg, sizeof(ue.msg), "%s", ab_error_message(e));
			snprintf(ue.fix, sizeof(ue.fix), "%s", ab_error_fix(e));
			write_usage_report(&o, &dest, &ue);
		}
		code_exit = ab_error_exit_status(e);
		print_error("", ab_error_message(e), ab_error_fix(e), code_exit == AB_EXIT_USAGE);
		ab_error_free(e);
	} else {
		/* the report first: a reader of our stderr that does not read must not keep it
		 * from being written */
		if (have_dest) {
			const char *t = ab_result_json(res);
			int w = report_write_at(&dest, t, strlen(t));

			if (w < 0)
				fprintf(stderr, "agentbox: cannot write the report: %s\n",
					strerror(-w));
		}
		if (o.report_fd > 0) {
			const char *t = ab_result_json(res);

			if (write_all(o.report_fd, t, strlen(t)) < 0)
				fprintf(stderr, "agentbox: cannot write the report to fd %d: %s\n",
					o.report_fd, strerror(errno));
			(void) close(o.report_fd);
		}
		print_outcome(res);
		code_exit = ab_result_agentbox_exit(res);
		ab_result_free(res);
	}
	report_dest_done(&dest);
	run_opts_done(&o);
	return code_exit;
}

static int
cmd_prepare(int argc, char **argv)
{
	struct ab_err err = { 0 };
	struct ab_report_dest dest = { .dirfd = -1 };
	const char *report = NULL;
	cleanup_free char *req_text = NULL, *out = NULL;
	json_t *req = NULL, *res;
	ab_error *e = NULL;
	int r;

	r = prepare_request_from_args(argc, argv, &req, &report, &err);
	if (r == 1) {
		fputs(prepare_usage(), stdout);
		return 0;
	}
	if (r == 0 && report)
		r = report_dest_open(report, &dest, &err);
	if (r < 0) {
		print_error("prepare: ", err.msg, err.fix, false);
		if (err.exit == AB_EXIT_USAGE)
			fputs(prepare_usage(), stderr);
		json_decref(req);
		return err.exit ? err.exit : AB_EXIT_SETUP;
	}
	req_text = json_dumps(req, JSON_COMPACT);
	json_decref(req);
	r = ab_prepare(NULL, req_text, &(ab_io){ -1, STDERR_FILENO }, &out, &e);
	res = out ? json_loads(out, 0, NULL) : NULL;
	if (report && json_object_get(res, "report")) {
		cleanup_free char *t =
			json_dumps(json_object_get(res, "report"), JSON_INDENT(2) | JSON_SORT_KEYS);
		int w = t ? report_write_at(&dest, t, strlen(t)) : -ENOMEM;

		if (w < 0)
			fprintf(stderr, "agentbox: cannot write the report '%s': %s\n", report,
				strerror(-w));
	}
	report_dest_done(&dest);
	if (r < 0) {
		json_decref(res);
		return fail_with("prepare: ", e);
	}
	printf("%s\n", json_string_value(json_object_get(res, "env_dir")));
	json_decref(res);
	return 0;
}

static int
cmd_doctor(int argc, char **argv)
{
	cleanup_free char *out = NULL;
	bool as_json = false;
	ab_error *e = NULL;
	json_t *j, *c;
	size_t i;
	int ok;

	for (int k = 1; k < argc; k++) {
		if (strcmp(argv[k], "--json") != 0) {
			print_error("", "unknown doctor option:", argv[k], false);
			return AB_EXIT_USAGE;
		}
		as_json = true;
	}
	if (ab_probe(NULL, &out, &e) < 0)
		return fail_with("doctor: ", e);
	if (as_json) {
		puts(out);
		j = json_loads(out, 0, NULL);
		ok = json_is_true(json_object_get(j, "ok"));
		json_decref(j);
		return ok ? 0 : 1;
	}
	j = json_loads(out, 0, NULL);
	printf("agentbox %s doctor (%s)\n", AB_VERSION,
	       json_is_true(json_object_get(j, "as_root"))
		       ? "as root: the sandbox runs as an unprivileged uid"
		       : "as an unprivileged user");
	json_array_foreach(json_object_get(j, "checks"), i, c)
	{
		const char *fix = json_string_value(json_object_get(c, "fix"));

		printf("[%-4s] %-16s %s\n", json_string_value(json_object_get(c, "result")),
		       json_string_value(json_object_get(c, "check")),
		       json_string_value(json_object_get(c, "detail")) ?: "");
		if (fix)
			printf("       %-16s fix: %s\n", "", fix);
	}
	ok = json_is_true(json_object_get(j, "ok"));
	printf("%s\n", ok ? "agentbox can run sandboxes here."
			  : "agentbox cannot run sandboxes here until the failures above are "
			    "fixed.");
	json_decref(j);
	return ok ? 0 : 1;
}

static int
cmd_collect(int argc, char **argv)
{
	cleanup_free char *out = NULL;
	ab_error *e = NULL;

	if (argc != 3) {
		print_error("", "usage: agentbox collect RUN_DIR DIR", NULL, false);
		return AB_EXIT_USAGE;
	}
	if (ab_collect(NULL, argv[1], argv[2], &out, &e) < 0)
		return fail_with("", e);
	puts(out);
	return 0;
}

static int
cmd_rm(int argc, char **argv)
{
	int status = 0;

	if (argc < 2) {
		print_error("", "usage: agentbox rm RUN_DIR...", NULL, false);
		return AB_EXIT_USAGE;
	}
	for (int i = 1; i < argc; i++) {
		ab_error *e = NULL;

		if (ab_rm(NULL, argv[i], &e) < 0)
			status = fail_with("", e);
	}
	return status;
}

static int
cmd_gc(int argc, char **argv)
{
	cleanup_free char *out = NULL;
	uint64_t older = 0;
	bool dry = false;
	ab_context *ctx = ab_context_new(NULL);
	ab_error *e = NULL;
	json_t *j, *n;
	size_t i, removed;
	int r;

	for (int k = 1; k < argc; k++) {
		if (strcmp(argv[k], "--dry-run") == 0)
			dry = true;
		else if (strcmp(argv[k], "--runs-dir") == 0 && k + 1 < argc)
			(void) ab_context_set(ctx, "runs_dir", argv[++k]);
		else if (strcmp(argv[k], "--older-than") == 0 && k + 1 < argc &&
			 units_parse_duration_ms(argv[k + 1], &older) == 0)
			k++;
		else {
			ab_context_free(ctx);
			print_error("",
				    "usage: agentbox gc [--runs-dir DIR] [--older-than DURATION] "
				    "[--dry-run]",
				    NULL, false);
			return AB_EXIT_USAGE;
		}
	}
	r = ab_gc(ctx, (int64_t) older, dry, &out, &e);
	ab_context_free(ctx);
	if (r < 0)
		return fail_with("gc: ", e);
	j = json_loads(out, 0, NULL);
	removed = json_array_size(json_object_get(j, "removed"));
	if (dry)
		json_array_foreach(json_object_get(j, "removed"), i, n) printf(
			"would remove %s/%s\n", json_string_value(json_object_get(j, "runs_dir")),
			json_string_value(n));
	printf("%s %zu run%s, kept %lld\n", dry ? "would remove" : "removed", removed,
	       removed == 1 ? "" : "s", (long long) json_integer_value(json_object_get(j, "kept")));
	r = json_integer_value(json_object_get(j, "failed")) > 0 ? AB_EXIT_SETUP : 0;
	json_decref(j);
	return r;
}

int
main(int argc, char **argv)
{
	if (argc < 2) {
		fputs(main_help, stderr);
		return AB_EXIT_USAGE;
	}
	if (strcmp(argv[1], "run") == 0)
		return cmd_run(argc - 1, argv + 1);
	if (strcmp(argv[1], "prepare") == 0)
		return cmd_prepare(argc - 1, argv + 1);
	if (strcmp(argv[1], "doctor") == 0)
		return cmd_doctor(argc - 1, argv + 1);
	if (strcmp(argv[1], "collect") == 0)
		return cmd_collect(argc - 1, argv + 1);
	if (strcmp(argv[1], "rm") == 0)
		return cmd_rm(argc - 1, argv + 1);
	if (strcmp(argv[1], "gc") == 0)
		return cmd_gc(argc - 1, argv + 1);
	if (strcmp(argv[1], "mcp") == 0)
		return mcp_main(argc - 1, argv + 1);
	if (strcmp(argv[1], "version") == 0 || strcmp(argv[1], "--version") == 0) {
		printf("agentbox %s\n", AB_VERSION);
		return 0;
	}
	if (strcmp(argv[1], "help") == 0 || strcmp(argv[1], "--help") == 0) {
		fputs(main_help, stdout);
		return 0;
	}
	fprintf(stderr, "agentbox: unknown command '%s'\nTry 'agentbox help'.\n", argv[1]);
	return AB_EXIT_USAGE;
}

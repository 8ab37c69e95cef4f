/* agentbox: run an agent-written Python or Node script in a bubblewrap sandbox and report
 * exactly what happened. main() only dispatches; see docs/design.md for the theory of
 * operation. Only this file prints errors and picks exit statuses. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cmds.h"
#include "config.h"
#include "prepare.h"
#include "report.h"
#include "result.h"
#include "run.h"
#include "util/err.h"
#include "util/fdutil.h"
#include "util/macro.h"

static const char main_help[] =
	"usage: agentbox COMMAND [OPTIONS...]\n"
	"\n"
	"Commands:\n"
	"  run [OPTIONS] SCRIPT [-- ARGS]   run a Python or Node script in a sandbox\n"
	"  prepare --python REQS | --node PKG  build a dependency environment (sandboxed,\n"
	"                                   with network) and print its path\n"
	"  doctor [--json]                  check what this host supports, with fixes\n"
	"  collect RUN_DIR DIR              copy a kept run's files out, safely\n"
	"  rm RUN_DIR...                    remove kept runs\n"
	"  gc [--older-than DUR]            remove kept runs (all, or older than DUR)\n"
	"  version                          print the version\n"
	"  help                             this text\n"
	"\n"
	"`agentbox run --help` lists the run options.\n";

static void
print_error(const struct ab_err *err)
{
	if (err->fix[0])
		fprintf(stderr, "agentbox: %s (fix: %s)\n", err->msg, err->fix);
	else
		fprintf(stderr, "agentbox: %s\n", err->msg);
	if (err->exit == AB_EXIT_USAGE)
		fprintf(stderr, "Try 'agentbox run --help' for more information.\n");
}

/* agentbox's own peak resident set, VmHWM. Not getrusage: ru_maxrss also counts the image
 * our parent had before exec. -1 when unknown. */
static int64_t
peak_rss_kib(void)
{
	char buf[4096];
	const char *p;

	if (read_small_file_at(AT_FDCWD, "/proc/self/status", buf, sizeof(buf)) > 0 &&
	    (p = strstr(buf, "VmHWM:")))
		return strtoll(p + 6, NULL, 10);
	return -1;
}

/* agentbox_max_rss_kib is measured last: building and serialising the report (a long listing)
 * is where agentbox's memory peaks, so the report is serialised once with a placeholder as
 * long as any value, the peak is read, and the number is patched into the text, which then
 * goes to both places unchanged. */
static void
write_report(const struct ab_report_dest *dest, struct ab_result *res)
{
	cleanup_free char *text = NULL;
	size_t len = 0;
	json_t *rep;
	int r;

	res->supervisor_max_rss_kib = INT64_MAX;
	rep = report_build(res);
	text = report_dumps(rep, &len);
	json_decref(rep);
	if (!text) {
		fprintf(stderr, "agentbox: cannot serialise the report: out of memory\n");
		return;
	}
	res->supervisor_max_rss_kib = peak_rss_kib();
	(void) report_patch_int(&text, &len, "agentbox_max_rss_kib", res->supervisor_max_rss_kib);
	if (dest) {
		r = report_write_at(dest, text, len);
		if (r < 0)
			fprintf(stderr, "agentbox: cannot write the report: %s\n", strerror(-r));
	}
	/* A copy stays with a kept run, for `agentbox collect` and for people: through the run
	 * directory's own fd. */
	if (res->run_dir_fd >= 0 && res->run_dir_kept) {
		struct ab_report_dest kept = { .dirfd = res->run_dir_fd, .base = "report.json" };

		(void) report_write_at(&kept, text, len);
	}
}

static int
cmd_run(int argc, char **argv, int full_argc, char **full_argv)
{
	struct ab_run_opts o;
	struct ab_result res;
	struct ab_err err = { 0 };
	struct ab_report_dest dest = { .dirfd = -1 };
	bool have_dest = false;
	int r, code, fds_before = -1;

	run_opts_init(&o);
	result_init(&res, &o);
	r = cli_parse_run(argc, argv, &o, &err);
	if (r == 1) {
		fputs(cli_run_help(), stdout);
		run_opts_done(&o);
		return 0;
	}
	/* The report's destination first: a report that cannot be written must stop the run
	 * before anything starts, not lose what happened afterwards. */
	if (r >= 0 && o.report_path) {
		r = report_dest_open(o.report_path, &dest, &err);
		have_dest = r == 0;
	} else if (r < 0 && o.report_path) {
		/* a usage error is reported there too, when the destination is usable */
		struct ab_err ignored = { 0 };

		have_dest = report_dest_open(o.report_path, &dest, &ignored) == 0;
	}
	if (r < 0) {
		res.status = AB_STATUS_USAGE_ERROR;
	} else {
		run_maybe_reexec_in_scope(full_argc, full_argv, &o);
		/* what our caller left open is not ours: count it, to tell our own leaks */
		if (o.report_path || !o.rm)
			fds_before = fds_count_from(3);
		r = run_main(&o, &res, &err);
		if (r < 0)
			res.status = err.exit == AB_EXIT_USAGE ? AB_STATUS_USAGE_ERROR
							       : AB_STATUS_SETUP_ERROR;
	}
	if (r < 0) {
		result_set_message(&res, err.msg, err.fix);
		res.agentbox_exit = err.exit ? err.exit : AB_EXIT_SETUP;
	} else {
		res.agentbox_exit = run_exit_code(&res);
	}
	/* The report is built only when someone will read it: --report, or a kept run. */
	if (res.status != AB_STATUS_DRY_RUN && (have_dest || (res.run_dir && res.run_dir_kept))) {
		/* Every fd of the run is closed by now: one more than we started with is a leak.
		 * agentbox_max_rss_kib is measured in write_report, last. */
		if (fds_before >= 0)
			res.supervisor_fds_left =
				fds_count_from(3) - fds_before - (res.run_dir_fd >= 0 ? 1 : 0);
		write_report(have_dest ? &dest : NULL, &res);
	}
	/* Printed after the report: a reader of our stderr that does not read blocks these
	 * writes, and must not keep the report from being written (issue 13). A refused run
	 * prints its one line; its warnings stay in the report. */
	if (r < 0)
		print_error(&err);
	for (size_t i = 0; r >= 0 && i < res.warnings.n; i++)
		fprintf(stderr, "agentbox: warning: %s\n", res.warnings.v[i]);
	code = res.agentbox_exit;
	timing_mark("report written");
	report_dest_done(&dest);
	result_done(&res);
	run_opts_done(&o);
	return code;
}

int
main(int argc, char **argv)
{
	if (argc < 2) {
		fputs(main_help, stderr);
		return AB_EXIT_USAGE;
	}
	if (strcmp(argv[1], "run") == 0)
		return cmd_run(argc - 1, argv + 1, argc, argv);
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

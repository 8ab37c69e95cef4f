/* agentbox: the command line, a thin client of libagentbox. Flags become a run spec
 * (src/spec/options.c → src/spec/spec.c), the library runs it in a supervisor process, and this
 * file prints: the report where --report says, warnings and errors on stderr (this is the one place
 * that prints them), and the exit status. No sandboxing happens in this process. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/signalfd.h>
#include <sys/stat.h>

#include "../mcp/mcp.h"
#include "../spec/options.h"
#include "../spec/record.h"
#include "../spec/report.h"
#include "../spec/spec.h"
#include "../spec/units.h"
#include "../spec/words.h"
#include "../util/fdutil.h"
#include "../util/macro.h"
#include "../util/proc.h"
#include "../util/xalloc.h"
#include "agentbox/agentbox.h"
#include "config.h"
#include "prepare-flags.h"
#include "session.h"

static const char main_help[] =
	"usage: agentbox COMMAND [OPTIONS...]\n"
	"\n"
	"Commands:\n"
	"  run [OPTIONS] SCRIPT [ARGS...]   run SCRIPT in a sandbox (agentbox run --help)\n"
	"  run --spec FILE|-                run what a JSON spec describes (docs/spec.md)\n"
	"  session [--lang L] [OPTIONS]     cells in one live sandbox, as in a notebook\n"
	"  prepare --python REQS | --node PKG  build a dependency environment (sandboxed)\n"
	"  doctor [--json]                  check what this host supports, with fixes\n"
	"  collect RUN_DIR DIR              copy what a kept run left into DIR\n"
	"  rm RUN_DIR...                    remove kept runs\n"
	"  gc [--older-than DUR]            remove kept runs (all, or older than DUR)\n"
	"  mcp [OPTIONS]                    an MCP server on stdin/stdout (agentbox mcp --help)\n"
	"  version [--json]                 print the version (--json: and the formats)\n"
	"  help [COMMAND]                   this text, or COMMAND's (as COMMAND --help)\n"
	"\n"
	"`agentbox COMMAND --help` lists each command's options; man agentbox has them all.\n";

static const char doctor_help[] =
	"usage: agentbox doctor [--json]\n"
	"\n"
	"Checks what this host supports (bwrap, user namespaces, Landlock, seccomp, cgroups,\n"
	"AppArmor, the interpreters), runs a trivial sandboxed script, and reports what the\n"
	"runs directory holds. Each failed check names its fix.\n"
	"\n"
	"  --json      one JSON object: {agentbox_version, as_root, checks: [{check, result,\n"
	"              detail, fix}], ok}\n"
	"  --help      this text\n"
	"\n"
	"Exit status: 0 when sandboxes can run here, 1 when a check failed, 2 usage error.\n";

static const char collect_help[] =
	"usage: agentbox collect RUN_DIR DIR\n"
	"\n"
	"Copies the regular files a kept run left in its workspace (RUN_DIR/work) into DIR,\n"
	"which must exist, be yours and be empty of the names it copies: nothing is\n"
	"overwritten, links and special files are skipped and listed. Prints a JSON summary\n"
	"({dir, bytes, files, summary}). RUN_DIR is a run_dir from a report.\n"
	"\n"
	"  --help      this text\n"
	"\n"
	"Exit status: 0 copied, 2 usage error, 125 refused or failed (the message says why).\n";

static const char rm_help[] =
	"usage: agentbox rm RUN_DIR...\n"
	"\n"
	"Removes kept runs. Each RUN_DIR must be a run directory agentbox created (a\n"
	"run-XXXXXX name with agentbox's marker, made by you); a run still going is refused.\n"
	"\n"
	"  --help      this text\n"
	"\n"
	"Exit status: 0 all removed, 2 usage error, 125 one was refused or failed.\n";

static const char gc_help[] =
	"usage: agentbox gc [--older-than DURATION] [--runs-dir DIR] [--dry-run]\n"
	"\n"
	"Removes kept runs from the runs directory: all of them, or those older than DURATION\n"
	"(90s, 30m, 12h, 7d). Runs whose agentbox is still alive are left alone. Without gc,\n"
	"every run already keeps the newest $AGENTBOX_KEEP_RUNS (default 20) and none older\n"
	"than $AGENTBOX_KEEP_AGE (default 7d).\n"
	"\n"
	"  --older-than DURATION  only runs older than this\n"
	"  --runs-dir DIR         the runs directory (default $AGENTBOX_RUNS_DIR or\n"
	"                         /var/tmp/agentbox-UID)\n"
	"  --dry-run              print what would go, remove nothing\n"
	"  --help                 this text\n"
	"\n"
	"Exit status: 0, 2 usage error, 125 a run could not be removed.\n";

static const char version_help[] =
	"usage: agentbox version [--json]\n"
	"\n"
	"Prints agentbox's version.\n"
	"\n"
	"  --json      one JSON object: {agentbox_version, report_schema_version,\n"
	"              spec_version}, the formats this agentbox writes and reads (what the\n"
	"              client packages check before their first run)\n"
	"  --help      this text\n";

/* Options of a subcommand that takes only --help (and what the table adds): returns the
 * getopt result loop's verdict: 1 --help was asked, 0 go on (optind at the operands), -1 a
 * usage error was printed. */
static int
sub_getopt(int argc, char **argv, const struct option *opts, const char *help,
	   int (*on_opt)(int c, void *data), void *data)
{
	int c;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+:h", opts, NULL)) != -1) {
		if (c == 'h') {
			fputs(help, stdout);
			return 1;
		}
		if (c == '?' || c == ':' || !on_opt || on_opt(c, data) < 0) {
			fprintf(stderr, "agentbox %s: %s '%s'\n", argv[0],
				c == ':' ? "a value is needed after" : "unknown option",
				argv[optind - 1]);
			fprintf(stderr, "Try 'agentbox %s --help' for more information.\n",
				argv[0]);
			return -1;
		}
	}
	return 0;
}

static int
usage_operands(const char *cmd, const char *what)
{
	fprintf(stderr, "agentbox %s: %s\nTry 'agentbox %s --help' for more information.\n", cmd,
		what, cmd);
	return AB_EXIT_USAGE;
}

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

/* A report for a run refused before the library had it (a flag or a spec that does not
 * parse): the same schema as every other report, to --report (dest, when open) and to
 * --report-fd (report_fd, when > 0), so a client reading only the fd learns why too. */
static void
write_usage_report(struct ab_run_opts *o, const struct ab_report_dest *dest, int report_fd,
		   const struct ab_err *err)
{
	struct ab_record res;
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
	if (text && dest)
		(void) report_write_at(dest, text, len);
	if (text && report_fd > 0)
		(void) write_all(report_fd, text, len);
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
	proc_add_stop_signals(&set);
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
				(void) ab_run_signal(run, (int) si.ssi_signo);
		}
		if (p[0].revents)
			break;
	}
	if (sfd >= 0)
		(void) close(sfd);
	return ab_run_wait(run, ret, err);
}

/* Is warning w the one of a default this host cannot apply (it begins "default NAME ", NAME
 * in the report's defaults_not_applied)? */
static bool
default_warning(const ab_result *res, const char *w)
{
	const char *name;

	for (size_t i = 0; (name = ab_result_default_not_applied(res, i)); i++) {
		size_t l = strlen(name);

		if (strncmp(w, "default ", 8) == 0 && strncmp(w + 8, name, l) == 0 &&
		    w[8 + l] == ' ')
			return true;
	}
	return false;
}

/* The report's warnings, or its error line for a run agentbox refused. The defaults this host
 * cannot apply get one short line for all of them (issue 25: not the same essay every run;
 * agentbox doctor explains them, and the report keeps every word). Through the result's
 * accessors: the library parsed the report once already. */
static void
print_outcome(const ab_result *res)
{
	const char *status = ab_result_status(res), *w;

	if (status && (strcmp(status, "setup_error") == 0 || strcmp(status, "usage_error") == 0)) {
		print_error("", ab_result_message(res) ? ab_result_message(res) : "failed",
			    ab_result_fix(res), strcmp(status, "usage_error") == 0);
		return;
	}
	for (size_t i = 0; (w = ab_result_warning(res, i)); i++)
		if (!default_warning(res, w))
			fprintf(stderr, "agentbox: warning: %s\n", w);
	if (ab_result_default_not_applied(res, 0)) {
		fputs("agentbox: note: defaults this host cannot fully apply:", stderr);
		for (size_t i = 0; (w = ab_result_default_not_applied(res, i)); i++)
			fprintf(stderr, "%s %s", i ? "," : "", w);
		fputs(" (agentbox doctor explains)\n", stderr);
	}
}

/* "1G", "512M", "3.5K", "100" bytes as the flags take them. */
static void
fmt_size(char *buf, size_t size, double v)
{
	static const char *const unit[] = { "", "K", "M", "G", "T" };
	size_t u = 0;

	while (v >= 1024 && u + 1 < ARRAY_SIZE(unit)) {
		v /= 1024;
		u++;
	}
	snprintf(buf, size, v == (double) (long long) v ? "%.0f%s" : "%.1f%s", v, unit[u]);
}

static void
fmt_secs(char *buf, size_t size, double ms)
{
	if (ms < 1000)
		snprintf(buf, size, "%.0fms", ms);
	else if (ms < 600000)
		snprintf(buf, size, "%.1fs", ms / 1000);
	else
		snprintf(buf, size, "%.0fm", ms / 60000);
}

/* The limits, how each reads in the summary line, and the status that names it. */
static const struct {
	const char *limit, *what, *status;
} limit_words[] = {
	{ "timeout", "timeout", "timeout" },
	{ "memory", "out of memory", "oom" },
	{ "pids", "task limit reached", "pids_limit" },
	{ "cpu-time", "CPU time limit reached", "cpu_time_limit" },
	{ "disk", "workspace full", "disk_limit" },
	{ "inodes", "workspace full", "disk_limit" },
	{ "file-size", "file size limit reached", "file_size_limit" },
	{ "output-limit", "output limit reached", "output_limit" },
};

/* "--timeout 1s", "--memory 256M", "--inodes 16384": a limit as the flags take it. */
static void
fmt_limit(char *buf, size_t size, const json_t *rep, const char *limit)
{
	json_t *l = json_object_get(json_object_get(rep, "limits"), limit);
	json_t *v = json_object_get(l, "enforced");
	double d = (double) json_integer_value(
		json_is_integer(v) ? v : json_object_get(l, "requested"));
	char num[32];

	if (strcmp(limit, "timeout") == 0 || strcmp(limit, "cpu-time") == 0)
		snprintf(num, sizeof(num), (long long) d % 1000 == 0 ? "%.0fs" : "%.0fms",
			 (long long) d % 1000 == 0 ? d / 1000 : d);
	else if (strcmp(limit, "pids") == 0 || strcmp(limit, "inodes") == 0)
		snprintf(num, sizeof(num), "%.0f", d);
	else
		fmt_size(num, sizeof(num), d);
	snprintf(buf, size, "--%s %s", limit, num);
}

static const char *
limit_what(const char *limit)
{
	for (size_t i = 0; i < ARRAY_SIZE(limit_words); i++)
		if (strcmp(limit_words[i].limit, limit) == 0)
			return limit_words[i].what;
	return "limit reached";
}

/* Where the files the script wrote are: the --collect directory, else the workspace (the
 * --workspace directory, or the kept run directory's copy); NULL with --rm. */
static const char *
files_place(const json_t *rep)
{
	const char *c =
		json_string_value(json_object_get(json_object_get(rep, "collected"), "dir"));

	return c ? c : json_string_value(json_object_get(rep, "workspace"));
}

/* One line on stderr after a run, for a person: what happened, how long, how much memory,
 * what the script wrote and where it is, every limit it reached (the report's limits_hit:
 * issue 25, the line never disagrees with the report), and the fix. In the words of the
 * interface that asked (words.h): a --spec run's line names the spec's keys. Colour only on
 * a terminal, never with NO_COLOR (no-color.org) or TERM=dumb. */
static void
print_summary(const ab_result *res, bool colour, bool flag_words)
{
	json_t *rep = json_loads(ab_result_json(res), 0, NULL);
	const char *status = json_string_value(json_object_get(rep, "status"));
	const char *fix = json_string_value(json_object_get(rep, "fix"));
	const char *hint = json_string_value(json_object_get(rep, "hint"));
	const char *script = json_string_value(json_object_get(rep, "script"));
	const char *base = script && strrchr(script, '/') ? strrchr(script, '/') + 1 : script;
	const char *place = NULL, *ended = NULL;
	json_t *usage = json_object_get(rep, "usage"), *files = json_object_get(rep, "files"), *f;
	json_t *hits = json_object_get(rep, "limits_hit");
	char head[256], num[32], lim[64];
	const char *col = "31"; /* red: a limit, a signal, an interrupt */
	double wall = (double) json_integer_value(json_object_get(rep, "wall_ms"));
	json_t *peak = json_object_get(usage, "memory_peak_bytes");
	size_t i, written = 0;
	bool origins = false;
	struct strv tail = { 0 };
	cleanup_free char *line = NULL, *text = NULL;

	if (!status) {
		json_decref(rep);
		return;
	}
	json_array_foreach(files, i, f) if (json_object_get(f, "origin")) origins = true;
	json_array_foreach(files, i, f)
	{
		const char *o = json_string_value(json_object_get(f, "origin"));
		const char *t = json_string_value(json_object_get(f, "type"));
		const char *path = json_string_value(json_object_get(f, "path"));

		if (origins ? o && (strcmp(o, "created") == 0 || strcmp(o, "modified") == 0)
			    : t && strcmp(t, "file") == 0 &&
				      !(base && path && strcmp(path, base) == 0))
			written++;
	}
	fmt_secs(num, sizeof(num), wall);
	/* the limit that ended the run: the one its status names, the last of limits_hit */
	json_array_foreach(hits, i, f)
	{
		for (size_t k = 0; k < ARRAY_SIZE(limit_words); k++)
			if (strcmp(limit_words[k].limit, json_string_value(f) ?: "") == 0 &&
			    strcmp(limit_words[k].status, status) == 0)
				ended = limit_words[k].limit;
	}
	if (strcmp(status, "exited") == 0) {
		json_int_t code = json_integer_value(json_object_get(rep, "exit_code"));

		col = code == 0 && json_array_size(hits) == 0 ? "32" : "33";
		snprintf(head, sizeof(head), "exit %lld after %s", (long long) code, num);
	} else if (strcmp(status, "signaled") == 0) {
		snprintf(head, sizeof(head), "killed by SIG%s after %s",
			 json_string_value(json_object_get(rep, "signal_name")) ?: "?", num);
	} else if (strcmp(status, "interrupted") == 0) {
		snprintf(head, sizeof(head), "interrupted after %s", num);
	} else if (ended) {
		fmt_limit(lim, sizeof(lim), rep, ended);
		snprintf(head, sizeof(head), "%s after %s (%s)", limit_what(ended), num, lim);
	} else {
		snprintf(head, sizeof(head), "%s after %s", status, num);
	}
	/* every other limit the run reached, as the report lists them */
	json_array_foreach(hits, i, f)
	{
		const char *h = json_string_value(f);

		if (!h || (ended && strcmp(h, ended) == 0))
			continue;
		fmt_limit(lim, sizeof(lim), rep, h);
		strv_pushf(&tail, "; %s (%s)", limit_what(h), lim);
	}
	if (json_is_integer(peak))
		strv_pushf(&tail, ", peak memory %.1f MiB",
			   (double) json_integer_value(peak) / (1 << 20));
	else if (json_integer_value(json_object_get(rep, "max_rss_kib")) > 0)
		strv_pushf(&tail, ", max RSS %.1f MiB",
			   (double) json_integer_value(json_object_get(rep, "max_rss_kib")) / 1024);
	place = files_place(rep);
	strv_pushf(&tail, ", %zu file%s written", written, written == 1 ? "" : "s");
	if (place)
		strv_pushf(&tail, " (in %s)", place);
	else if (written > 0)
		strv_pushf(&tail, " (not kept: --rm without --collect)");
	if (fix && (strcmp(status, "exited") != 0 || json_array_size(hits) > 0))
		strv_pushf(&tail, "; %s", fix);
	if (hint)
		strv_pushf(&tail, "; hint: %s", hint);
	line = strv_join(&tail, "");
	strv_done(&tail);
	/* the report's fix and hint are in the run's words already */
	text = flag_words ? xstrdup(head) : words_for_spec(head);
	if (!flag_words) {
		char *t = words_for_spec(line);

		free(line);
		line = t;
	}
	if (colour)
		fprintf(stderr, "agentbox: \033[%sm%s\033[0m%s\n", col, text, line);
	else
		fprintf(stderr, "agentbox: %s%s\n", text, line);
	json_decref(rep);
}

static int
cmd_run(int argc, char **argv)
{
	struct ab_run_opts o;
	struct ab_err err = { 0 };
	struct ab_report_dest dest = { .dirfd = -1 };
	bool have_dest = false, fd_ok = false, to_stdout, dry_run = false;
	cleanup_free char *code = NULL, *spec_text = NULL;
	ab_context *ctx = NULL;
	ab_spec *spec = NULL;
	ab_result *res = NULL;
	ab_error *e = NULL;
	ab_run_handle *run;
	bool tty;
	int r, code_exit;

	run_opts_init(&o);
	r = cli_parse_run(argc, argv, &o, &err);
	if (r == 1) {
		fputs(cli_run_help(), stdout);
		run_opts_done(&o);
		return 0;
	}
	/* --report-fd: must be open now, and is not passed on to anything */
	fd_ok = o.report_fd > 0 && fcntl(o.report_fd, F_GETFD) >= 0;
	if (r == 0 && o.report_fd > 0 && !fd_ok)
		r = ab_err_usage(&err, "--report-fd %d is not an open fd", o.report_fd),
		ab_err_fix(&err, "open it first, e.g. --report-fd 3 3>report.json");
	if (fd_ok)
		(void) fcntl(o.report_fd, F_SETFD, FD_CLOEXEC);
	/* --spec: the whole run as JSON; other flags may not be mixed in */
	if (r == 0 && o.spec_path) {
		cleanup_fd int fd = strcmp(o.spec_path, "-") == 0
					    ? fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3)
					    : open(o.spec_path, O_RDONLY | O_CLOEXEC);
		const char *report = o.report_path;

		if (fd < 0 || read_all_capped(fd, 64 << 20, &spec_text) < 0) {
			r = ab_err_usage(&err, "--spec '%s': %s", o.spec_path,
					 fd < 0 ? strerror(errno)
						: "cannot read it (over 64 MiB?)");
			ab_err_fix(&err, "pass a readable JSON file, or - for stdin");
		} else if (!(spec = ab_spec_from_json(spec_text, (size_t) -1, &e))) {
			/* checked whole here, once: the library runs this spec as it is */
			r = ab_err_set(&err, -EINVAL, "%s", ab_error_message(e));
			err.exit = ab_error_exit_status(e);
			ab_err_fix(&err, "%s", ab_error_fix(e) ? ab_error_fix(e) : "");
			ab_error_free(e);
			e = NULL;
		} else {
			cleanup_free char *dr = ab_spec_get_json(spec, "dry_run");
			cleanup_free char *in = ab_spec_get_json(spec, "stdin_fd");

			dry_run = dr && strcmp(dr, "true") == 0;
			if (in && strcmp(in, "0") == 0 && strcmp(o.spec_path, "-") == 0)
				r = ab_err_usage(&err, "spec: stdin_fd 0 is the spec itself here "
						       "(--spec -)"),
				ab_err_fix(&err, "pass the spec in a file (--spec FILE), or the "
						 "stream on another fd");
		}
		o.report_path = report;
	}
	/* The script's stdin (issue 25): `--stdin -` streams ours, and so does a pipe or a file on
	 * our stdin by default, as for any Unix filter; a terminal never (it stays ours), nor
	 * what SCRIPT - reads the code from. */
	if (r == 0 && !o.spec_path && o.stdin_fd == STDIN_FILENO && !o.code &&
	    strcmp(o.script, "-") == 0)
		r = ab_err_usage(&err, "--stdin - and SCRIPT - both read agentbox's stdin"),
		ab_err_fix(&err, "give the code with --code TEXT or in a file, or the input with "
				 "--stdin FILE");
	if (r == 0 && !o.spec_path && !o.stdin_path && o.stdin_fd < 0 &&
	    !(!o.code && strcmp(o.script, "-") == 0)) {
		struct stat st;

		if (fstat(STDIN_FILENO, &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISREG(st.st_mode)))
			o.stdin_fd = STDIN_FILENO;
	}
	/* SCRIPT '-': the code comes from our stdin */
	if (r == 0 && !o.spec_path && !o.code && strcmp(o.script, "-") == 0) {
		ssize_t n = read_all_capped(STDIN_FILENO, 16u << 20, &code);

		if (n < 0)
			r = ab_err_usage(&err, "reading the script from stdin: %s",
					 n == -EFBIG ? "more than 16 MiB" : strerror((int) -n)),
			ab_err_fix(&err, "pass a script file instead");
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
		if (have_dest || fd_ok)
			write_usage_report(&o, have_dest ? &dest : NULL, fd_ok ? o.report_fd : -1,
					   &err);
		print_error("", err.msg, err.fix, err.exit == AB_EXIT_USAGE);
		report_dest_done(&dest);
		ab_spec_free(spec);
		run_opts_done(&o);
		return err.exit ? err.exit : AB_EXIT_SETUP;
	}
	/* at a terminal, a long run shows it is alive (unless --summary=never) */
	tty = isatty(STDERR_FILENO);
	o.progress = tty && o.summary >= 0;
	ctx = ab_context_new(NULL);
	/* this process has one thread and is here only for the run: the run's supervisor runs
	 * in it, neither forked nor exec'd (agentbox.h "supervisor_inline"); ab_run_start
	 * returns when the run is over */
	(void) ab_context_set(ctx, "supervisor_inline", "1");
	if (!spec) {
		json_t *j = spec_build(&o);

		spec_text = json_dumps(j, JSON_COMPACT);
		json_decref(j);
		/* flags asked for the run: its messages name them (a --spec run's, the spec's
		 * keys) */
		(void) ab_context_set(ctx, "words", "flags");
		spec = ab_spec_from_json(spec_text, (size_t) -1, &e);
	} else if (o.progress) {
		cleanup_free char *pr = ab_spec_get_json(spec, "progress");

		if (!pr)
			(void) ab_spec_set_json(spec, "progress", "true", NULL);
	}
	/* --report -: our stdout carries the report and nothing else (one JSON document for a
	 * caller that parses it), so the script's stdout is not relayed there: it is in the
	 * report (and RUN_DIR/stdout past --inline-output). Its stderr still goes to stderr.
	 * --dry-run prints its command line on stdout and writes no report. */
	to_stdout = o.report_path && strcmp(o.report_path, "-") == 0 && !o.dry_run && !dry_run;
	run = spec ? ab_run_start(ctx, spec,
				  &(ab_io){ to_stdout ? -1 : STDOUT_FILENO, STDERR_FILENO }, &e)
		   : NULL;
	r = run ? wait_forwarding(run, &res, &e) : -EINVAL;
	ab_spec_free(spec);
	ab_context_free(ctx);
	if (r == 1) { /* --dry-run: the command line was printed */
		code_exit = 0;
	} else if (r < 0) {
		if ((have_dest || fd_ok) && ab_error_exit_status(e) == AB_EXIT_USAGE) {
			struct ab_err ue = { .code = -EINVAL, .exit = AB_EXIT_USAGE };

			snprintf(ue.msg, sizeof(ue.msg), "%s", ab_error_message(e));
			snprintf(ue.fix, sizeof(ue.fix), "%s", ab_error_fix(e));
			write_usage_report(&o, have_dest ? &dest : NULL, fd_ok ? o.report_fd : -1,
					   &ue);
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
		if (o.summary > 0 || (o.summary == 0 && tty)) {
			const char *st = ab_result_status(res);
			const char *nc = getenv("NO_COLOR"), *term = getenv("TERM");

			if (st && strcmp(st, "setup_error") != 0 && strcmp(st, "usage_error") != 0)
				print_summary(res,
					      tty && !(nc && *nc) &&
						      !(term && strcmp(term, "dumb") == 0),
					      !o.spec_path);
		}
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
doctor_opt(int c, void *data)
{
	if (c != 'j')
		return -1;
	*(bool *) data = true;
	return 0;
}

/* doctor's "warm slots" check, appended to the probe's checks when the host can run: a pool
 * of one Python slot (docs/warm.md) is built, one run takes it, and the check says how long
 * the slot took to be ready, what it holds in memory, and how long the warm run took. Warm
 * slots are an optimisation of long-lived callers (agentbox mcp --warm, ab_pool_*): a host
 * where they fail still runs everything cold, so a failure is a warning. */
static void
doctor_warm(json_t *checks)
{
	ab_error *e = NULL;
	ab_pool *p = ab_pool_new(NULL, &e);
	ab_spec *t = ab_spec_from_json("{\"language\":\"python\",\"code\":\"\",\"rm\":true}",
				       (size_t) -1, e ? NULL : &e);
	ab_spec *s = ab_spec_from_json(
		"{\"language\":\"python\",\"code\":\"print('ok')\",\"rm\":true,\"quiet\":true}",
		(size_t) -1, e ? NULL : &e);
	ab_run_handle *h = NULL;
	ab_result *res = NULL;
	json_t *info = NULL, *c, *rep = NULL;
	char detail[512] = "";
	bool ok = false;

	if (p && t && s && ab_pool_add(p, t, 1, NULL, &e) == 0 &&
	    ab_pool_wait_ready(p, 20000, &e) == 0) {
		char *text = ab_pool_info(p);

		info = text ? json_loads(text, 0, NULL) : NULL;
		free(text);
		h = ab_pool_run_start(p, s, NULL, &e);
	}
	if (h && ab_run_wait(h, &res, &e) == 0)
		rep = json_loads(ab_result_json(res), 0, NULL);
	c = json_array_get(json_object_get(info, "classes"), 0);
	if (rep && json_is_true(json_object_get(rep, "warm")) &&
	    json_integer_value(json_object_get(rep, "exit_code")) == 0) {
		ok = true;
		snprintf(detail, sizeof(detail),
			 "a Python slot was ready in %lld ms, holding %.1f MiB; a run in it took "
			 "%lld ms (agentbox mcp --warm N, ab_pool_*)",
			 (long long) json_integer_value(json_object_get(c, "slot_ready_ms")),
			 (double) json_integer_value(json_object_get(info, "memory_bytes")) /
				 1048576.0,
			 (long long) json_integer_value(json_object_get(rep, "wall_ms")));
	} else {
		snprintf(detail, sizeof(detail), "no warm run: %s",
			 e     ? ab_error_message(e)
			 : rep ? "the run did not take the slot, or failed"
			       : "no report");
	}
	json_array_append_new(
		checks, json_pack("{s:s, s:s, s:s, s:s?}", "check", "warm slots", "result",
				  ok ? "ok" : "warn", "detail", detail, "fix",
				  ok ? NULL
				     : "none needed: runs go cold (docs/warm.md); the message says "
				       "why a slot could not be used"));
	json_decref(rep);
	json_decref(info);
	ab_result_free(res);
	ab_spec_free(s);
	ab_spec_free(t);
	ab_pool_free(p);
	ab_error_free(e);
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

	static const struct option opts[] = { { "json", no_argument, NULL, 'j' },
					      { "help", no_argument, NULL, 'h' },
					      { NULL, 0, NULL, 0 } };
	int r = sub_getopt(argc, argv, opts, doctor_help, doctor_opt, &as_json);

	if (r != 0)
		return r > 0 ? 0 : AB_EXIT_USAGE;
	if (optind < argc)
		return usage_operands("doctor", "takes no operands");
	if (ab_probe(NULL, &out, &e) < 0)
		return fail_with("doctor: ", e);
	j = json_loads(out, 0, NULL);
	if (json_is_true(json_object_get(j, "ok")))
		doctor_warm(json_object_get(j, "checks"));
	if (as_json) {
		char *text = json_dumps(j, JSON_INDENT(2) | JSON_SORT_KEYS);

		puts(text ? text : "{}");
		free(text);
		ok = json_is_true(json_object_get(j, "ok"));
		json_decref(j);
		return ok ? 0 : 1;
	}
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
	/* one line: the host's class (README "Where it runs") and what it means */
	printf("%s\n", json_string_value(json_object_get(j, "summary"))
			       ?: (ok ? "agentbox can run sandboxes here."
				      : "agentbox cannot run sandboxes here until the failures "
					"above are fixed."));
	json_decref(j);
	return ok ? 0 : 1;
}

static int
cmd_collect(int argc, char **argv)
{
	cleanup_free char *out = NULL;
	ab_error *e = NULL;

	static const struct option opts[] = { { "help", no_argument, NULL, 'h' },
					      { NULL, 0, NULL, 0 } };
	int r = sub_getopt(argc, argv, opts, collect_help, NULL, NULL);

	if (r != 0)
		return r > 0 ? 0 : AB_EXIT_USAGE;
	if (argc - optind != 2)
		return usage_operands("collect", "give RUN_DIR and DIR");
	if (ab_collect(NULL, argv[optind], argv[optind + 1], &out, &e) < 0)
		return fail_with("", e);
	puts(out);
	return 0;
}

static int
cmd_rm(int argc, char **argv)
{
	static const struct option opts[] = { { "help", no_argument, NULL, 'h' },
					      { NULL, 0, NULL, 0 } };
	int status = 0, r = sub_getopt(argc, argv, opts, rm_help, NULL, NULL);

	if (r != 0)
		return r > 0 ? 0 : AB_EXIT_USAGE;
	if (optind >= argc)
		return usage_operands("rm", "give at least one RUN_DIR");
	for (int i = optind; i < argc; i++) {
		ab_error *e = NULL;

		if (ab_rm(NULL, argv[i], &e) < 0)
			status = fail_with("", e);
	}
	return status;
}

struct gc_args {
	ab_context *ctx;
	uint64_t older;
	bool dry;
};

static int
gc_opt(int c, void *data)
{
	struct gc_args *a = data;

	switch (c) {
	case 'n':
		a->dry = true;
		return 0;
	case 'r':
		return ab_context_set(a->ctx, "runs_dir", optarg);
	case 'o':
		if (units_parse_duration_ms(optarg, &a->older) == 0)
			return 0;
		fprintf(stderr,
			"agentbox gc: invalid --older-than '%s': expected a duration like 90s, "
			"30m, "
			"12h, 7d\n",
			optarg);
		exit(AB_EXIT_USAGE);
	default:
		return -1;
	}
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

	static const struct option opts[] = { { "dry-run", no_argument, NULL, 'n' },
					      { "runs-dir", required_argument, NULL, 'r' },
					      { "older-than", required_argument, NULL, 'o' },
					      { "help", no_argument, NULL, 'h' },
					      { NULL, 0, NULL, 0 } };
	struct gc_args a = { .ctx = ctx };

	r = sub_getopt(argc, argv, opts, gc_help, gc_opt, &a);
	if (r == 0 && optind < argc) {
		(void) usage_operands("gc", "takes no operands");
		r = -1;
	}
	if (r != 0) {
		ab_context_free(ctx);
		return r > 0 ? 0 : AB_EXIT_USAGE;
	}
	older = a.older;
	dry = a.dry;
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
	{
		const json_t *envs = json_object_get(j, "envs");
		size_t ev = json_array_size(json_object_get(envs, "evicted"));

		if (envs)
			printf("environments of requirements: %s%zu, kept %lld (%.1f MiB of a %.0f "
			       "MiB cap)\n",
			       dry ? "(none removed with --dry-run) " : "removed ", ev,
			       (long long) json_integer_value(json_object_get(envs, "entries")),
			       (double) json_integer_value(json_object_get(envs, "bytes")) /
				       (1 << 20),
			       (double) json_integer_value(json_object_get(envs, "cap_bytes")) /
				       (1 << 20));
	}
	r = json_integer_value(json_object_get(j, "failed")) > 0 ? AB_EXIT_SETUP : 0;
	json_decref(j);
	return r;
}

static int
command(int argc, char **argv)
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
	if (strcmp(argv[1], "session") == 0)
		return cmd_session(argc, argv);
	if (strcmp(argv[1], "mcp") == 0)
		return mcp_main(argc - 1, argv + 1);
	if (strcmp(argv[1], "version") == 0 || strcmp(argv[1], "--version") == 0) {
		if (argc > 2 && strcmp(argv[2], "--help") == 0) {
			fputs(version_help, stdout);
			return 0;
		}
		/* --json: what a client checks before its first run (the formats it speaks) */
		if (argc > 2 && strcmp(argv[2], "--json") == 0)
			printf("{\"agentbox_version\": \"%s\", \"report_schema_version\": %d, "
			       "\"spec_version\": %d}\n",
			       AB_VERSION, AB_REPORT_SCHEMA_VERSION, AB_SPEC_VERSION);
		else
			printf("agentbox %s\n", AB_VERSION);
		return 0;
	}
	if (strcmp(argv[1], "help") == 0 || strcmp(argv[1], "--help") == 0 ||
	    strcmp(argv[1], "-h") == 0) {
		if (argc > 2 && strcmp(argv[1], "help") == 0 && strcmp(argv[2], "help") != 0)
			return command(3, (char *[]){ argv[0], argv[2], (char *) "--help", NULL });
		fputs(main_help, stdout);
		return 0;
	}
	fprintf(stderr, "agentbox: unknown command '%s'\nTry 'agentbox help'.\n", argv[1]);
	return AB_EXIT_USAGE;
}

int
main(int argc, char **argv)
{
	return command(argc, argv);
}

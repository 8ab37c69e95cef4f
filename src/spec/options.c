#include "options.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/macro.h"
#include "units.h"

enum {
	OPT_ALLOW_BIND = 256,
	OPT_COLLECT,
	OPT_CPU_TIME,
	OPT_CPUS,
	OPT_DISK,
	OPT_DRY_RUN,
	OPT_ENV,
	OPT_ENV_DIR,
	OPT_FILE_SIZE,
	OPT_INLINE_OUTPUT,
	OPT_INODES,
	OPT_INPUT,
	OPT_INDEX_URL,
	OPT_FIND_LINKS,
	OPT_REQUIREMENT,
	OPT_REQUIREMENTS_FILE,
	OPT_LANG,
	OPT_MEMORY,
	OPT_NET_STRICT,
	OPT_NODE,
	OPT_NODE_MODULES,
	OPT_NOFILE,
	OPT_ON_OUTPUT_LIMIT,
	OPT_OUTPUT_LIMIT,
	OPT_PIDS,
	OPT_PYTHON,
	OPT_QUIET,
	OPT_SUMMARY,
	OPT_NO_SUMMARY,
	OPT_REPORT,
	OPT_REPORT_FD,
	OPT_RM,
	OPT_RO_BIND,
	OPT_RUNS_DIR,
	OPT_SANDBOX_USER,
	OPT_SECCOMP_POLICY,
	OPT_STDIN,
	OPT_TIMEOUT,
	OPT_TMP_SIZE,
	OPT_VENV,
	OPT_WITHOUT,
	OPT_WORKSPACE,
	OPT_CODE,
	OPT_SPEC,
	OPT_HELP,
};

/* Sorted alphabetically (isolate). */
static const struct option run_options[] = {
	{ "allow-bind", required_argument, NULL, OPT_ALLOW_BIND },
	{ "collect", required_argument, NULL, OPT_COLLECT },
	{ "cpu-time", required_argument, NULL, OPT_CPU_TIME },
	{ "cpus", required_argument, NULL, OPT_CPUS },
	{ "disk", required_argument, NULL, OPT_DISK },
	{ "dry-run", no_argument, NULL, OPT_DRY_RUN },
	{ "env", required_argument, NULL, OPT_ENV },
	{ "env-dir", required_argument, NULL, OPT_ENV_DIR },
	{ "file-size", required_argument, NULL, OPT_FILE_SIZE },
	{ "help", no_argument, NULL, OPT_HELP },
	{ "inline-output", required_argument, NULL, OPT_INLINE_OUTPUT },
	{ "inodes", required_argument, NULL, OPT_INODES },
	{ "index-url", required_argument, NULL, OPT_INDEX_URL },
	{ "find-links", required_argument, NULL, OPT_FIND_LINKS },
	{ "input", required_argument, NULL, OPT_INPUT },
	{ "lang", required_argument, NULL, OPT_LANG },
	{ "memory", required_argument, NULL, OPT_MEMORY },
	{ "net-strict", no_argument, NULL, OPT_NET_STRICT },
	{ "node", required_argument, NULL, OPT_NODE },
	{ "node-modules", required_argument, NULL, OPT_NODE_MODULES },
	{ "nofile", required_argument, NULL, OPT_NOFILE },
	{ "on-output-limit", required_argument, NULL, OPT_ON_OUTPUT_LIMIT },
	{ "output-limit", required_argument, NULL, OPT_OUTPUT_LIMIT },
	{ "pids", required_argument, NULL, OPT_PIDS },
	{ "python", required_argument, NULL, OPT_PYTHON },
	{ "quiet", no_argument, NULL, OPT_QUIET },
	{ "summary", optional_argument, NULL, OPT_SUMMARY },
	{ "no-summary", no_argument, NULL, OPT_NO_SUMMARY },
	{ "report", required_argument, NULL, OPT_REPORT },
	{ "report-fd", required_argument, NULL, OPT_REPORT_FD },
	{ "requirement", required_argument, NULL, OPT_REQUIREMENT },
	{ "requirements-file", required_argument, NULL, OPT_REQUIREMENTS_FILE },
	{ "rm", no_argument, NULL, OPT_RM },
	{ "ro-bind", required_argument, NULL, OPT_RO_BIND },
	{ "runs-dir", required_argument, NULL, OPT_RUNS_DIR },
	{ "sandbox-user", required_argument, NULL, OPT_SANDBOX_USER },
	{ "seccomp-policy", required_argument, NULL, OPT_SECCOMP_POLICY },
	{ "stdin", required_argument, NULL, OPT_STDIN },
	{ "timeout", required_argument, NULL, OPT_TIMEOUT },
	{ "tmp-size", required_argument, NULL, OPT_TMP_SIZE },
	{ "venv", required_argument, NULL, OPT_VENV },
	{ "without", required_argument, NULL, OPT_WITHOUT },
	{ "workspace", required_argument, NULL, OPT_WORKSPACE },
	{ "code", required_argument, NULL, OPT_CODE },
	{ "spec", required_argument, NULL, OPT_SPEC },
	{ NULL, 0, NULL, 0 },
};

static const char *const limit_names[AB_LIM_COUNT] = {
	[AB_LIM_TIMEOUT_MS] = "timeout",
	[AB_LIM_MEMORY] = "memory",
	[AB_LIM_PIDS] = "pids",
	[AB_LIM_CPUS_MILLI] = "cpus",
	[AB_LIM_CPU_TIME_MS] = "cpu-time",
	[AB_LIM_DISK] = "disk",
	[AB_LIM_INODES] = "inodes",
	[AB_LIM_TMP_SIZE] = "tmp-size",
	[AB_LIM_FILE_SIZE] = "file-size",
	[AB_LIM_NOFILE] = "nofile",
	[AB_LIM_OUTPUT] = "output-limit",
};

/* What each limit accepts, and how an error says it (the sandbox always holds agentbox-init
 * and the interpreter, hence pids >= 2; below 16M of memory no interpreter starts). */
static const struct {
	uint64_t min, max;
	const char *text;
} limit_range[AB_LIM_COUNT] = {
	[AB_LIM_TIMEOUT_MS] = { 1, 7 * 24 * 3600 * 1000ULL, "from 1ms to 7d" },
	[AB_LIM_MEMORY] = { 16ULL << 20, 1ULL << 50, "from 16M to 1024T" },
	[AB_LIM_PIDS] = { 2, 4194304, "from 2 to 4194304" },
	[AB_LIM_CPUS_MILLI] = { 10, 1024 * 1000, "from 0.01 to 1024" },
	[AB_LIM_CPU_TIME_MS] = { 0, 7 * 24 * 3600 * 1000ULL, "from 0 (no limit) to 7d" },
	[AB_LIM_DISK] = { 1ULL << 20, 1ULL << 50, "from 1M to 1024T" },
	[AB_LIM_INODES] = { 16, 1ULL << 32, "from 16 to 4294967296" },
	[AB_LIM_TMP_SIZE] = { 1ULL << 20, 1ULL << 50, "from 1M to 1024T" },
	[AB_LIM_FILE_SIZE] = { 1, 1ULL << 50, "from 1 byte to 1024T" },
	[AB_LIM_NOFILE] = { 16, 1048576, "from 16 to 1048576" },
	[AB_LIM_OUTPUT] = { 1, 1ULL << 40, "from 1 byte to 1T" },
};

static const char *const prot_names[AB_PROT_COUNT] = {
	[AB_PROT_SECCOMP] = "seccomp",
	[AB_PROT_LANDLOCK] = "landlock",
	[AB_PROT_DISABLE_USERNS] = "disable-userns",
	[AB_PROT_CGROUP] = "cgroup",
};

const char *
cli_limit_name(enum ab_limit_id id)
{
	return id < AB_LIM_COUNT ? limit_names[id] : "?";
}

const char *
cli_prot_name(enum ab_prot p)
{
	return p < AB_PROT_COUNT ? prot_names[p] : "?";
}

void
run_opts_init(struct ab_run_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->lang = AB_LANG_AUTO;
	o->seccomp_policy = AB_SECCOMP_DEFAULT;
	o->limits[AB_LIM_TIMEOUT_MS].value = 60 * 1000;
	o->limits[AB_LIM_MEMORY].value = 1ULL << 30;
	o->limits[AB_LIM_PIDS].value = 256;
	o->limits[AB_LIM_CPUS_MILLI].value = 1000;
	o->limits[AB_LIM_CPU_TIME_MS].value = 0; /* off unless asked for */
	o->limits[AB_LIM_DISK].value = 512ULL << 20;
	o->limits[AB_LIM_INODES].value = 16384;
	o->limits[AB_LIM_TMP_SIZE].value = 128ULL << 20;
	o->limits[AB_LIM_FILE_SIZE].value = 256ULL << 20;
	o->limits[AB_LIM_NOFILE].value = 1024;
	o->limits[AB_LIM_OUTPUT].value = 1ULL << 20;
	o->inline_output = AB_INLINE_OUTPUT_DEFAULT;
	/* a chatty script (a training loop, a progress bar) runs on past --output-limit; the
	 * report keeps its head and tail (issue 25) */
	o->output_truncate = true;
	o->env_dst_fd = -1;
	o->session_idle_ms = AB_SESSION_IDLE_DEFAULT_MS;
	o->session_lifetime_ms = AB_SESSION_LIFETIME_DEFAULT_MS;
	o->session_fd = -1;
	o->watch_fd = -1;
	o->stdin_fd = -1;
}

void
run_opts_done(struct ab_run_opts *o)
{
	strv_done(&o->script_args);
	strv_done(&o->owned);
	free(o->code_owned);
	free(o->stdin_data_owned);
	strv_done(&o->inputs);
	strv_done(&o->requirements);
	strv_done(&o->env);
	strv_done(&o->ro_binds);
	strv_done(&o->allow_binds);
}

const char *
cli_run_help(void)
{
	return "usage: agentbox run [OPTIONS] SCRIPT [--] [ARGS...]\n"
	       "\n"
	       "Runs SCRIPT (Python .py, Node .js/.mjs/.cjs, or by shebang) in a bubblewrap\n"
	       "sandbox: read-only system, one writable workspace at /work, no network (a\n"
	       "loopback of its own).\n"
	       "SCRIPT '-' reads the code from stdin; --code TEXT takes it from the command\n"
	       "line (then every word after the options is an argument of the script).\n"
	       "\n"
	       "Files and directories:\n"
	       "  --workspace DIR        use DIR (yours, not a symlink, not group/other-writable)\n"
	       "                         as the workspace instead of a fresh run directory;\n"
	       "                         its .npmrc, .pypirc, .netrc and .git-credentials\n"
	       "                         read as empty files inside\n"
	       "  --input PATH           copy PATH (file or directory) into the workspace\n"
	       "  --runs-dir DIR         where run directories are created\n"
	       "                         (default $AGENTBOX_RUNS_DIR or /var/tmp/agentbox-UID)\n"
	       "  --collect DIR          copy the regular files the script left into DIR\n"
	       "  --rm                   remove the run directory after the report\n"
	       "  --stdin FILE|-         the script's stdin: a file, or - for agentbox's own,\n"
	       "                         streamed as it comes (default: agentbox's stdin when\n"
	       "                         it is a pipe or a file, else /dev/null)\n"
	       "  --code TEXT            the script itself: Python unless a shebang or --lang\n"
	       "                         says otherwise (so is SCRIPT '-')\n"
	       "  --spec FILE|-          the whole run as a JSON spec (docs/spec.md)\n"
	       "  --report FILE          write the JSON report to FILE ('-': stdout, which then\n"
	       "                         carries the report alone: the script's stdout is not\n"
	       "                         relayed, its stderr still goes to stderr)\n"
	       "  --report-fd N          write the JSON report to open fd N (>= 3), alone\n"
	       "  --inline-output SIZE   bytes of each stream the report holds (default 64K):\n"
	       "                         past it, its first and last halves, and the whole\n"
	       "                         stream in RUN_DIR/stdout, RUN_DIR/stderr\n"
	       "\n"
	       "Interpreter and environment:\n"
	       "  --lang python|node     override detection by extension / shebang\n"
	       "  --python PATH          Python interpreter (default /usr/bin/python3)\n"
	       "  --node PATH            Node interpreter (default: node on PATH)\n"
	       "  --venv DIR             a virtualenv, mounted read-only and activated\n"
	       "  --node-modules DIR     a node_modules tree, mounted read-only\n"
	       "  --requirement REQ      a package the script needs ('requests==2.31.0',\n"
	       "                         'is-number@7.0.0'; repeatable): installed first in a\n"
	       "                         sandbox of its own into a cached environment, which\n"
	       "                         the run then uses offline (docs/requirements.md)\n"
	       "  --requirements-file F  one requirement a line\n"
	       "  --index-url URL        the package index for them (default: PyPI / npm)\n"
	       "  --find-links DIR       Python: a directory of wheels to install them from\n"
	       "  --env-dir DIR          an environment built by `agentbox prepare`\n"
	       "  --ro-bind HOST[:PATH]  mount HOST read-only in the sandbox (never: home\n"
	       "                         directories, credentials, /run, sockets...); under\n"
	       "                         /etc, one world-readable non-secret file, same path\n"
	       "  --allow-bind HOST      allow exactly HOST despite that list\n"
	       "  --env NAME=VALUE       add a variable to the sandbox's clean environment\n"
	       "\n"
	       "Limits (units: 512M 2G; 90s 500ms 2m; 1.5 cores):\n"
	       "  --timeout DUR          wall clock (default 60s)\n"
	       "  --memory SIZE          memory incl. tmpfs, no swap (default 1G)\n"
	       "  --pids N               tasks in the sandbox, agentbox-init included\n"
	       "                         (default 256, at least 2)\n"
	       "  --cpus N               CPU bandwidth in cores (default 1)\n"
	       "  --cpu-time DUR         total CPU time (default off)\n"
	       "  --disk SIZE            workspace bytes (default 512M)\n"
	       "  --inodes N             workspace entries (default 16384)\n"
	       "  --tmp-size SIZE        /tmp and /dev/shm each (default 128M)\n"
	       "  --file-size SIZE       largest single file (default 256M)\n"
	       "  --nofile N             open files per process (default 1024)\n"
	       "  --output-limit SIZE    what is kept of stdout and stderr each (default 1M)\n"
	       "  --on-output-limit truncate|kill\n"
	       "                         past --output-limit: let the run go on and keep the\n"
	       "                         stream's first bytes and its last ones (truncate, the\n"
	       "                         default; the middle past the limit is dropped), or stop\n"
	       "                         the run (kill)\n"
	       "\n"
	       "Hardening:\n"
	       "  --seccomp-policy default|strict\n"
	       "  --net-strict           no TCP bind or connect at all, not even on the\n"
	       "                         sandbox's own loopback (Landlock)\n"
	       "  --without NAME         opt out of a default protection that this host cannot\n"
	       "                         apply: seccomp, landlock, disable-userns, cgroup\n"
	       "  --sandbox-user USER    when started as root: the unprivileged user (name or\n"
	       "                         UID[:GID]) the script runs as (default: user 'agentbox'\n"
	       "                         if it exists, else 64000:64000)\n"
	       "\n"
	       "  --dry-run              print the bwrap command line, one word per line\n"
	       "  --quiet                do not relay the script's output live\n"
	       "  --summary[=WHEN]       one line on stderr at the end: status, time, memory,\n"
	       "                         files, the fix for a limit; WHEN: auto (default: when\n"
	       "                         stderr is a terminal), always, never; at a terminal a\n"
	       "                         run past 3 s also shows a live status line\n"
	       "  --no-summary           --summary=never\n"
	       "  --help                 this text\n"
	       "\n"
	       "Exit status: the script's; 128+N if it died of signal N; 124 timeout;\n"
	       "125 agentbox failed or refused (nothing ran); 126/127 interpreter not\n"
	       "executable / not found; 2 usage error.\n";
}

const char *
lang_name(enum ab_lang lang)
{
	switch (lang) {
	case AB_LANG_PYTHON:
		return "python";
	case AB_LANG_NODE:
		return "node";
	case AB_LANG_AUTO:
	default:
		return "auto";
	}
}

/* The policy names live here, not in filter.c: libagentbox parses specs without libseccomp. */
int
filter_policy_parse(const char *s, enum ab_seccomp_policy *ret)
{
	if (s && strcmp(s, "default") == 0)
		*ret = AB_SECCOMP_DEFAULT;
	else if (s && strcmp(s, "strict") == 0)
		*ret = AB_SECCOMP_STRICT;
	else
		return -EINVAL;
	return 0;
}

const char *
filter_policy_name(enum ab_seccomp_policy p)
{
	return p == AB_SECCOMP_STRICT ? "strict" : "default";
}

bool
cli_only_spec(const struct ab_run_opts *o)
{
	struct ab_run_opts d;
	bool same;

	/* with --spec, everything but --report must come from the spec */
	run_opts_init(&d);
	same = !o->script && !o->code && o->script_args.n == 0 && o->inputs.n == 0 &&
	       o->env.n == 0 && o->ro_binds.n == 0 && o->allow_binds.n == 0 &&
	       memcmp(o->limits, d.limits, sizeof(d.limits)) == 0 &&
	       memcmp(o->without, d.without, sizeof(d.without)) == 0 && o->lang == d.lang &&
	       !o->workspace && !o->collect_dir && !o->runs_dir && !o->stdin_path &&
	       o->stdin_fd == d.stdin_fd && !o->python_path && !o->node_path && !o->venv &&
	       !o->node_modules && !o->env_dir && !o->sandbox_user &&
	       o->seccomp_policy == d.seccomp_policy && !o->dry_run && !o->rm && !o->quiet &&
	       !o->inline_output_set && o->output_truncate == d.output_truncate && !o->net_strict;
	run_opts_done(&d);
	return same;
}

int
cli_set_lang(struct ab_run_opts *o, const char *arg, struct ab_err *err)
{
	if (strcmp(arg, "python") == 0)
		o->lang = AB_LANG_PYTHON;
	else if (strcmp(arg, "node") == 0)
		o->lang = AB_LANG_NODE;
	else
		return ab_err_usage(err, "invalid --lang '%s': expected python or node", arg),
		       ab_err_fix(err, "pass --lang python or --lang node");
	return 0;
}

int
cli_limit_id(const char *name)
{
	for (int i = 0; i < AB_LIM_COUNT; i++)
		if (strcmp(name, limit_names[i]) == 0)
			return i;
	return -1;
}

const char *
cli_own(struct ab_run_opts *o, const char *s)
{
	strv_push(&o->owned, s);
	return o->owned.v[o->owned.n - 1];
}

int
cli_check(const struct ab_run_opts *o, struct ab_err *err)
{
	if (o->workspace && o->inputs.n > 0)
		return ab_err_usage(err, "--input cannot be combined with --workspace"),
		       ab_err_fix(err,
				  "put the files in the --workspace directory instead, or drop "
				  "--workspace");
	if ((o->stdin_path != NULL) + (o->stdin_data != NULL) + (o->stdin_fd >= 0) > 1)
		return ab_err_usage(err, "stdin, stdin_data and stdin_fd cannot be combined"),
		       ab_err_fix(err, "give the script's stdin once: stdin (a file), stdin_data "
				       "(the text) or stdin_fd (a stream)");
	/* what the run would refuse when it starts, refused now (a queued MCP call: issue 24) */
	if (o->code && o->code_len > AB_CODE_MAX)
		return ab_err_usage(err, "the code is %zu bytes; at most %u are taken", o->code_len,
				    AB_CODE_MAX),
		       ab_err_fix(err, "send less code: put data in a file given as an input "
				       "instead of in the code");
	if (o->stdin_data && o->stdin_data_len > o->limits[AB_LIM_DISK].value)
		return ab_err_usage(
			       err,
			       "stdin_data is %zu bytes, more than the workspace holds (--disk "
			       "%llu)",
			       o->stdin_data_len,
			       (unsigned long long) o->limits[AB_LIM_DISK].value),
		       ab_err_fix(err, "raise the disk limit, or give the input as a file "
				       "(stdin) or a stream (stdin_fd)");
	return 0;
}

int
cli_set_limit(struct ab_run_opts *o, enum ab_limit_id id, const char *arg, struct ab_err *err)
{
	uint64_t v = 0;
	int r;
	const char *expect;

	switch (id) {
	case AB_LIM_TIMEOUT_MS:
	case AB_LIM_CPU_TIME_MS:
		r = units_parse_duration_ms(arg, &v);
		expect = "a duration like 90s, 500ms, 2m";
		break;
	case AB_LIM_CPUS_MILLI:
		r = units_parse_cpus_milli(arg, &v);
		expect = "a number of cores like 1 or 1.5";
		break;
	case AB_LIM_PIDS:
	case AB_LIM_INODES:
	case AB_LIM_NOFILE:
		r = units_parse_count(arg, &v);
		expect = "a whole number like 256";
		break;
	case AB_LIM_MEMORY:
	case AB_LIM_DISK:
	case AB_LIM_TMP_SIZE:
	case AB_LIM_FILE_SIZE:
	case AB_LIM_OUTPUT:
		r = units_parse_size(arg, &v);
		expect = "a size like 512M or 2G";
		break;
	case AB_LIM_COUNT:
	default:
		return ab_err_usage(err, "internal: unknown limit"),
		       ab_err_fix(err, "report a bug");
	}
	if (r == 0 && (v < limit_range[id].min || v > limit_range[id].max))
		r = -ERANGE;
	if (r < 0) {
		/* a bare number for a size is bytes: "5" is 5 bytes, not 5 megabytes */
		bool bare = arg[strspn(arg, "0123456789")] == '\0' && *arg &&
			    strncmp(expect, "a size", 6) == 0;

		ab_err_usage(err, "invalid --%s '%s': expected %s, %s", limit_names[id], arg,
			     expect, limit_range[id].text);
		return ab_err_fix(err, "give --%s %s%s, %s", limit_names[id],
				  bare ? "a unit (a bare number is bytes): " : "", expect,
				  limit_range[id].text);
	}
	o->limits[id].value = v;
	o->limits[id].set = true;
	return 0;
}

int
cli_set_env(struct ab_run_opts *o, const char *arg, struct ab_err *err)
{
	const char *eq = strchr(arg, '=');

	if (!eq || eq == arg)
		return ab_err_usage(err, "invalid --env '%s': expected NAME=VALUE", arg),
		       ab_err_fix(err, "write it as NAME=VALUE, e.g. --env DEBUG=1");
	for (const char *p = arg; p < eq; p++)
		if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || *p == '_' ||
		      (p > arg && *p >= '0' && *p <= '9')))
			return ab_err_usage(err, "invalid --env name in '%s'", arg),
			       ab_err_fix(err, "use a name of letters, digits and _ that does not "
					       "start with a digit");
	strv_push(&o->env, arg);
	return 0;
}

int
cli_set_without(struct ab_run_opts *o, const char *arg, struct ab_err *err)
{
	for (int p = 0; p < AB_PROT_COUNT; p++) {
		if (strcmp(arg, prot_names[p]) == 0) {
			o->without[p] = true;
			return 0;
		}
	}
	return ab_err_usage(err,
			    "invalid --without '%s': expected seccomp, landlock, disable-userns or "
			    "cgroup",
			    arg),
	       ab_err_fix(err, "name one of seccomp, landlock, disable-userns, cgroup (agentbox "
			       "doctor says which this host needs)");
}

/* One requirement as a pip or npm line takes it: no option (a leading '-' would be one:
 * "-r /etc/shadow", "--index-url"), no line break, no control character. */
int
cli_add_requirement(struct ab_run_opts *o, const char *req, struct ab_err *err)
{
	size_t len = strlen(req);

	if (len == 0 || len > 256 || req[0] == '-' || req[0] == ' ')
		return ab_err_usage(err, "invalid requirement '%.80s'", req),
		       ab_err_fix(err, "give a package and its version, like 'requests==2.31.0' "
				       "(Python) or 'is-number@7.0.0' (Node), at most 256 bytes, "
				       "not an installer option");
	for (const char *p = req; *p; p++)
		if ((unsigned char) *p < 0x20 || *p == 0x7f)
			return ab_err_usage(err, "invalid requirement '%.80s': a control character",
					    req),
			       ab_err_fix(err, "give one requirement per entry");
	if (o->requirements.n >= 256)
		return ab_err_usage(err, "more than 256 requirements"),
		       ab_err_fix(err, "install fewer packages");
	strv_push(&o->requirements, req);
	return 0;
}

/* --requirements-file FILE: one requirement a line; blank lines and # comments skipped. */
int
cli_add_requirements_file(struct ab_run_opts *o, const char *path, struct ab_err *err)
{
	FILE *f = fopen(path, "re");
	cleanup_free char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	int r = 0;

	if (!f)
		return ab_err_usage(err, "--requirements-file '%s': %s", path, strerror(errno)),
		       ab_err_fix(err, "pass a readable file, one requirement a line");
	while (r == 0 && (n = getline(&line, &cap, f)) >= 0) {
		char *s = line, *e;

		if ((e = strchr(s, '#')))
			*e = '\0';
		while (*s == ' ' || *s == '\t')
			s++;
		e = s + strlen(s);
		while (e > s && (e[-1] == '\n' || e[-1] == '\r' || e[-1] == ' ' || e[-1] == '\t'))
			*--e = '\0';
		if (*s)
			r = cli_add_requirement(o, s, err);
	}
	fclose(f);
	return r;
}

int
cli_set_inline_output(struct ab_run_opts *o, const char *arg, struct ab_err *err)
{
	uint64_t v = 0;

	if (units_parse_size(arg, &v) < 0 || v > AB_INLINE_OUTPUT_MAX)
		return ab_err_usage(err, "invalid --inline-output '%s'", arg),
		       ab_err_fix(err, "give --inline-output a size from 0 to 64M, like 64K");
	o->inline_output = v;
	o->inline_output_set = true;
	return 0;
}

int
cli_set_on_output_limit(struct ab_run_opts *o, const char *arg, struct ab_err *err)
{
	if (strcmp(arg, "kill") == 0)
		o->output_truncate = false;
	else if (strcmp(arg, "truncate") == 0)
		o->output_truncate = true;
	else
		return ab_err_usage(err,
				    "invalid --on-output-limit '%s': expected kill or truncate",
				    arg),
		       ab_err_fix(err, "pass --on-output-limit truncate or --on-output-limit kill");
	return 0;
}

/* The flags that set a limit, and which. */
static const struct {
	int opt;
	enum ab_limit_id lim;
} limit_flags[] = {
	{ OPT_CPU_TIME, AB_LIM_CPU_TIME_MS },
	{ OPT_CPUS, AB_LIM_CPUS_MILLI },
	{ OPT_DISK, AB_LIM_DISK },
	{ OPT_FILE_SIZE, AB_LIM_FILE_SIZE },
	{ OPT_INODES, AB_LIM_INODES },
	{ OPT_MEMORY, AB_LIM_MEMORY },
	{ OPT_NOFILE, AB_LIM_NOFILE },
	{ OPT_OUTPUT_LIMIT, AB_LIM_OUTPUT },
	{ OPT_PIDS, AB_LIM_PIDS },
	{ OPT_TIMEOUT, AB_LIM_TIMEOUT_MS },
	{ OPT_TMP_SIZE, AB_LIM_TMP_SIZE },
};

/* Sets the limit flag c names; false when c is not one. */
static bool
set_limit_flag(struct ab_run_opts *o, int c, const char *value, int *r, struct ab_err *err)
{
	for (size_t i = 0; i < ARRAY_SIZE(limit_flags); i++)
		if (limit_flags[i].opt == c) {
			*r = cli_set_limit(o, limit_flags[i].lim, value, err);
			return true;
		}
	return false;
}

int
cli_parse_run(int argc, char **argv, struct ab_run_opts *o, struct ab_err *err)
{
	int c, r = 0;

	optind = 0; /* full reset: tests call this repeatedly */
	opterr = 0;
	o->flag_words = true;
	/* '+': stop at the first non-option, which is SCRIPT; its arguments follow. */
	while ((c = getopt_long(argc, argv, "+:", run_options, NULL)) != -1) {
		if (set_limit_flag(o, c, optarg, &r, err)) {
			if (r < 0)
				return r;
			continue;
		}
		switch (c) {
		case OPT_ALLOW_BIND:
			strv_push(&o->allow_binds, optarg);
			break;
		case OPT_SPEC:
			o->spec_path = optarg;
			break;
		case OPT_CODE:
			o->code = optarg;
			o->code_len = strlen(optarg);
			break;
		case OPT_COLLECT:
			o->collect_dir = optarg;
			break;
		case OPT_DRY_RUN:
			o->dry_run = true;
			break;
		case OPT_ENV:
			r = cli_set_env(o, optarg, err);
			break;
		case OPT_ENV_DIR:
			o->env_dir = optarg;
			break;
		case OPT_HELP:
			return 1;
		case OPT_INLINE_OUTPUT:
			r = cli_set_inline_output(o, optarg, err);
			break;
		case OPT_INPUT:
			strv_push(&o->inputs, optarg);
			break;
		case OPT_REQUIREMENT:
			r = cli_add_requirement(o, optarg, err);
			break;
		case OPT_REQUIREMENTS_FILE:
			r = cli_add_requirements_file(o, optarg, err);
			break;
		case OPT_INDEX_URL:
			o->req_index_url = optarg;
			break;
		case OPT_FIND_LINKS:
			o->req_find_links = optarg;
			break;
		case OPT_LANG:
			r = cli_set_lang(o, optarg, err);
			break;
		case OPT_NET_STRICT:
			o->net_strict = true;
			break;
		case OPT_NODE:
			o->node_path = optarg;
			break;
		case OPT_NODE_MODULES:
			o->node_modules = optarg;
			break;
		case OPT_ON_OUTPUT_LIMIT:
			r = cli_set_on_output_limit(o, optarg, err);
			break;
		case OPT_PYTHON:
			o->python_path = optarg;
			break;
		case OPT_QUIET:
			o->quiet = true;
			break;
		case OPT_SUMMARY:
			if (!optarg || strcmp(optarg, "always") == 0)
				o->summary = 1;
			else if (strcmp(optarg, "auto") == 0)
				o->summary = 0;
			else if (strcmp(optarg, "never") == 0)
				o->summary = -1;
			else
				return ab_err_usage(err, "invalid --summary '%s'", optarg),
				       ab_err_fix(err, "pass --summary=always, --summary=auto or "
						       "--summary=never");
			break;
		case OPT_NO_SUMMARY:
			o->summary = -1;
			break;
		case OPT_REPORT_FD: {
			uint64_t fd = 0;

			if (units_parse_count(optarg, &fd) < 0 || fd < 3 || fd > 1000000)
				return ab_err_usage(err, "invalid --report-fd '%s'", optarg),
				       ab_err_fix(err,
						  "open a file or pipe on fd 3 or above and "
						  "name it (e.g. --report-fd 3 3>report.json)");
			o->report_fd = (int) fd;
			break;
		}
		case OPT_REPORT:
			o->report_path = optarg;
			break;
		case OPT_RM:
			o->rm = true;
			break;
		case OPT_RO_BIND:
			strv_push(&o->ro_binds, optarg);
			break;
		case OPT_RUNS_DIR:
			o->runs_dir = optarg;
			break;
		case OPT_SANDBOX_USER:
			o->sandbox_user = optarg;
			break;
		case OPT_SECCOMP_POLICY:
			if (filter_policy_parse(optarg, &o->seccomp_policy) < 0)
				r = ab_err_usage(err,
						 "invalid --seccomp-policy '%s': expected default "
						 "or strict",
						 optarg),
				ab_err_fix(err, "pass --seccomp-policy default or "
						"--seccomp-policy strict");
			break;
		case OPT_STDIN:
			/* -: agentbox's own stdin, streamed (issue 25) */
			if (strcmp(optarg, "-") == 0)
				o->stdin_fd = 0;
			else
				o->stdin_path = optarg;
			break;
		case OPT_VENV:
			o->venv = optarg;
			break;
		case OPT_WITHOUT:
			r = cli_set_without(o, optarg, err);
			break;
		case OPT_WORKSPACE:
			o->workspace = optarg;
			break;
		case ':':
			return ab_err_usage(err, "option '%s' needs a value", argv[optind - 1]),
			       ab_err_fix(err, "give its value after it (agentbox run --help "
					       "shows each option's)");
		case '?':
		default:
			if (optopt)
				ab_err_usage(err, "unknown option '-%c'", optopt);
			else
				ab_err_usage(err, "unknown option '%s'", argv[optind - 1]);
			return ab_err_fix(err, "agentbox run --help lists the options; the "
					       "script's own options go after SCRIPT");
		}
		if (r < 0)
			return r;
	}
	if (o->spec_path) {
		/* --spec: the spec is the run; only --report may come with it */
		if (optind < argc || !cli_only_spec(o))
			return ab_err_usage(err, "--spec describes the whole run: give no other "
						 "options (but --report) and no SCRIPT"),
			       ab_err_fix(err, "put everything in the spec, or drop --spec and "
					       "use flags");
		return 0;
	}
	if (o->code) {
		/* --code TEXT: every word after the options is an argument of the script */
		o->script = "--code";
	} else {
		if (optind >= argc)
			return ab_err_usage(err, "no SCRIPT given"),
			       ab_err_fix(err,
					  "name the script (agentbox run script.py), give "
					  "it with --code TEXT, or pass - to read it from stdin");
		o->script = argv[optind++];
		if (o->script[0] == '\0')
			return ab_err_usage(err, "SCRIPT is an empty string"),
			       ab_err_fix(err, "name the script (agentbox run script.py)");
	}
	if (optind < argc && strcmp(argv[optind], "--") == 0)
		optind++;
	for (; optind < argc; optind++)
		strv_push(&o->script_args, argv[optind]);
	return cli_check(o, err);
}

/* options.h: the run options (struct ab_run_opts), from a command line or a spec. Never prints,
 * never exits (unit-tested). */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include <sys/types.h>

#include "../util/err.h"
#include "../util/strv.h"

enum ab_lang {
	AB_LANG_AUTO,
	AB_LANG_PYTHON,
	AB_LANG_NODE,
};

/* "python", "node" or "auto". */
const char *lang_name(enum ab_lang lang);

enum ab_seccomp_policy {
	AB_SECCOMP_DEFAULT, /* Flatpak + Docker blocklists, socket-family allow-list */
	AB_SECCOMP_STRICT,  /* default, plus no sockets but AF_UNIX, no process tracing aids */
	AB_SECCOMP_COUNT,
};

/* "default" | "strict" -> enum. Returns 0, or -EINVAL for anything else. */
int filter_policy_parse(const char *s, enum ab_seccomp_policy *ret);
const char *filter_policy_name(enum ab_seccomp_policy p);

/* A limit: its value and whether the caller set it (an explicit limit the host cannot
 * enforce is an error; a default that cannot be enforced is a warning). */
struct ab_limit {
	uint64_t value;
	bool set;
};

/* Indexes into ab_run_opts.limits; the order is the report's order. */
enum ab_limit_id {
	AB_LIM_TIMEOUT_MS,
	AB_LIM_MEMORY,
	AB_LIM_PIDS,
	AB_LIM_CPUS_MILLI,
	AB_LIM_CPU_TIME_MS,
	AB_LIM_DISK,
	AB_LIM_INODES,
	AB_LIM_TMP_SIZE,
	AB_LIM_FILE_SIZE,
	AB_LIM_NOFILE,
	AB_LIM_OUTPUT,
	AB_LIM_COUNT,
};

/* Protections that are on by default; the caller may opt out of one by name with
 * --without NAME (recorded in the report). */
enum ab_prot {
	AB_PROT_SECCOMP,
	AB_PROT_LANDLOCK,
	AB_PROT_DISABLE_USERNS,
	AB_PROT_CGROUP,
	AB_PROT_COUNT,
};

struct ab_netproxy;
struct ab_slot_opts;

/* The longest code a run takes (--code, a script on stdin, a spec's "code"). */
#define AB_CODE_MAX (16u << 20)

struct ab_run_opts {
	const char
		*script;  /* as given ("-": the code is read from stdin); NULL for a usage error */
	const char *code; /* --code TEXT, or code set by a caller of run_main: no file at all */
	size_t code_len;
	const char *stdin_data; /* the script's stdin given inline (spec "stdin_data") */
	size_t stdin_data_len;
	/* the script's stdin streamed from this open fd of the caller's (spec "stdin_fd",
	 * `--stdin -`: 0); -1: none. The library hands it to the supervisor as its fd 0. */
	int stdin_fd;
	struct strv owned; /* strings this struct owns (a spec parsed from JSON) */
	char *code_owned, *stdin_data_owned;
	struct strv script_args;
	enum ab_lang lang;
	const char *report_path; /* NULL: no report file; "-": stdout after the run */
	const char *spec_path;   /* --spec FILE|-: the run as JSON (the CLI reads it) */
	int report_fd;           /* --report-fd N: the report alone on fd N (0: none) */
	const char *runs_dir;
	const char *workspace;   /* --workspace DIR */
	struct strv inputs;      /* --input PATH */
	struct strv env;         /* --env NAME=VALUE, validated */
	struct strv ro_binds;    /* --ro-bind HOST[:SANDBOX] */
	struct strv allow_binds; /* --allow-bind HOST: exempt from the never-mount list */
	const char *stdin_path;
	const char *collect_dir;
	const char *python_path; /* --python PATH */
	const char *node_path;   /* --node PATH */
	const char *venv;        /* --venv DIR */
	const char *node_modules;
	const char *env_dir;
	const char *sandbox_user; /* --sandbox-user NAME|UID[:GID] (root callers) */
	enum ab_seccomp_policy seccomp_policy;
	bool without[AB_PROT_COUNT];
	struct ab_limit limits[AB_LIM_COUNT];
	bool dry_run;
	bool rm;
	bool quiet;    /* do not relay the script's output live */
	bool progress; /* a live status line on stderr when it is a terminal (progress.h) */
	int summary;   /* the command line's summary line: -1 never, 0 on a terminal, 1 always */
	/* bytes of each stream the report holds inline (--inline-output): the first half and
	 * the last half of a longer stream, whose whole is then in RUN_DIR/stdout|stderr */
	uint64_t inline_output;
	bool inline_output_set;
	/* --on-output-limit truncate (the default): past the cap, run on, keep the tail */
	bool output_truncate;
	/* --net-strict: Landlock denies TCP bind and connect even on the sandbox's own loopback
	 * (by default the script may use it; the namespace keeps it off the network). */
	bool net_strict;
	/* Messages and fixes name the command line's flags (--memory): the run was asked for
	 * with flags. Otherwise (a spec: the library, the clients, the MCP server, --spec) they
	 * name the spec's keys (limits.memory); words.h. */
	bool flag_words;
	/* Set by `agentbox prepare`, never from the command line of `run`. */
	bool share_net; /* share agentbox's network namespace (installs need one) */
	/* prepare: a fresh tmpfs (env_bytes, env_inodes) bound read-write at env_path in the
	 * sandbox; after a run that exits 0, its tree is copied into env_dst_fd (sanitised:
	 * files, directories and links that stay inside, owned by agentbox's caller). The
	 * install never writes to the host itself. */
	const char *env_path;
	uint64_t env_bytes, env_inodes;
	int env_dst_fd;
	bool relay_to_stderr; /* relay the script's stdout to our stderr */
	int watch_fd;         /* the supervisor's caller watch pipe: EOF stops the run (-1: none) */
	/* With share_net: the install's own network namespace, served by the registry proxy
	 * (netproxy.h), rather than the host's. */
	struct ab_netproxy *netproxy;
	/* Set by agentbox-supervisor's slot mode only (run.h): this run is a warm slot. */
	struct ab_slot_opts *slot;
	/* A session (spec "session", docs/sessions.md): the sandbox runs the session driver
	 * (src/session/) for the cells the library sends on its socket, which agentbox-init keeps
	 * at fd 1000 for the interpreter; there is no script. limits.timeout is then each
	 * cell's default timeout (the library's to enforce); the run itself lasts at most
	 * session_lifetime_ms (the supervisor's wall clock); session_idle_ms: the library ends a
	 * session nobody used for that long. */
	bool session;
	uint64_t session_idle_ms, session_lifetime_ms;
	/* Packages on request (spec "requirements", --requirement; docs/requirements.md): pip
	 * requirement specifiers (Python) or NAME@RANGE (Node), installed by prepare's install
	 * sandbox into a cached environment the run then mounts read-only (requirements.c);
	 * the package index for them (spec "index", --index-url/--find-links), else the
	 * operator's. */
	struct strv requirements;
	const char *req_index_url, *req_find_links;
	int session_fd; /* the supervisor's: the library's socket to the driver (-1: none) */
};

#define AB_SESSION_IDLE_DEFAULT_MS     (10 * 60 * 1000ULL)
#define AB_SESSION_LIFETIME_DEFAULT_MS (60 * 60 * 1000ULL)

#define AB_INLINE_OUTPUT_DEFAULT (64u << 10)
#define AB_INLINE_OUTPUT_MAX     (64u << 20)

/* Names, units and defaults of the limits (for help text and the report). */
const char *cli_limit_name(enum ab_limit_id id);
const char *cli_prot_name(enum ab_prot p);

void run_opts_init(struct ab_run_opts *o); /* defaults */
void run_opts_done(struct ab_run_opts *o);

/* Parses `agentbox run` arguments (argv[0] is "run"). Returns 0, 1 when --help was asked
 * (help text is in cli_run_help()), or a negative errno with err set (err->exit == 2). */
int cli_parse_run(int argc, char **argv, struct ab_run_opts *ret, struct ab_err *err);
const char *cli_run_help(void);

/* The setters behind the flags, shared with the JSON spec (spec.c): the same checks, the same
 * messages (usage errors, exit 2). */
int cli_set_lang(struct ab_run_opts *o, const char *arg, struct ab_err *err);
int cli_set_limit(struct ab_run_opts *o, enum ab_limit_id id, const char *arg, struct ab_err *err);
int cli_set_env(struct ab_run_opts *o, const char *name_eq_value, struct ab_err *err);
int cli_set_without(struct ab_run_opts *o, const char *name, struct ab_err *err);
int cli_set_inline_output(struct ab_run_opts *o, const char *size, struct ab_err *err);
int cli_add_requirement(struct ab_run_opts *o, const char *req, struct ab_err *err);
int cli_add_requirements_file(struct ab_run_opts *o, const char *path, struct ab_err *err);
int cli_set_on_output_limit(struct ab_run_opts *o, const char *kill_or_truncate,
			    struct ab_err *err);
int cli_limit_id(const char *name); /* -1 when unknown */
/* Checks that need the whole set (--input with --workspace...). */
int cli_check(const struct ab_run_opts *o, struct ab_err *err);
/* True when o holds nothing but what --spec may come with (--report). */
bool cli_only_spec(const struct ab_run_opts *o);
/* A copy of s that lives as long as o. */
const char *cli_own(struct ab_run_opts *o, const char *s);

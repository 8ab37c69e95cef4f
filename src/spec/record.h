/* record.h: the internal record of one run (struct ab_record; the library's public, opaque
 * ab_result is another thing): what happened, filled as the run goes, turned into JSON by
 * report.c. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include <sys/types.h>

#include "../util/strv.h"
#include "options.h"

enum ab_status {
	AB_STATUS_EXITED,          /* the script exited on its own (exit_code) */
	AB_STATUS_SIGNALED,        /* the script died of a signal it did not get from a limit */
	AB_STATUS_TIMEOUT,         /* the wall-clock limit ended it */
	AB_STATUS_OOM,             /* the memory limit: a process was OOM-killed */
	AB_STATUS_PIDS_LIMIT,      /* the task limit refused a fork */
	AB_STATUS_CPU_TIME_LIMIT,  /* the CPU-time limit ended it */
	AB_STATUS_DISK_LIMIT,      /* the workspace ran out of bytes or entries */
	AB_STATUS_FILE_SIZE_LIMIT, /* SIGXFSZ killed the script (an EFBIG it caught: limits_hit) */
	AB_STATUS_OUTPUT_LIMIT,    /* stdout or stderr went past --output-limit; run stopped */
	AB_STATUS_EXEC_FAILED,     /* the interpreter could not be started in the sandbox */
	AB_STATUS_INTERRUPTED,     /* agentbox got SIGINT/SIGTERM/SIGHUP and stopped the run */
	AB_STATUS_SETUP_ERROR,     /* agentbox failed or refused before the script ran */
	AB_STATUS_USAGE_ERROR,     /* the command line was wrong */
	AB_STATUS_DRY_RUN,         /* --dry-run: nothing ran */
	AB_STATUS_COUNT,
};

const char *result_status_name(enum ab_status s);

/* One of the script's output streams as captured (supervise.c) and reported (report.c).
 *
 * Up to inline_max bytes are kept in memory for the report. Past that the report gets an
 * excerpt: buf then holds the first head = inline_max / 2 bytes and, in [head, inline_max),
 * a ring of the last inline_max - head bytes (ring_pos: the oldest byte and the next write),
 * and every captured byte goes to the stream file RUN_DIR/stdout or RUN_DIR/stderr instead
 * (none with --rm: the middle is then lost, and the report says so). With --on-output-limit
 * truncate (the default, issue 25) the ring goes on past --output-limit (past_cap), so the
 * excerpt ends with the stream's own last bytes; what lies between the capture and that tail
 * is kept nowhere (dropped_bytes in the report). */
struct ab_stream {
	char *buf;            /* the inline bytes (see above), not NUL-terminated */
	size_t len;           /* bytes in buf */
	size_t buf_cap;       /* allocated */
	size_t inline_max;    /* the inline cap (--inline-output) */
	bool excerpt;         /* captured > inline_max: buf is head + ring */
	size_t ring_pos;      /* in the ring: the oldest byte, where the next one goes */
	uint64_t captured;    /* bytes kept (up to --output-limit): inline, or in the stream file */
	uint64_t past_cap;    /* bytes past --output-limit that went through the ring (truncate) */
	uint64_t bytes;       /* everything read from the stream (with --on-output-limit kill,
			       * reading stops past the cap; with truncate, the rest is discarded) */
	bool truncated;       /* the stream passed --output-limit */
	bool file_kept;       /* the stream file holds every captured byte */
	char file_sha256[65]; /* its sha256 (hex), when file_kept */
	bool relayed;         /* the live relay to agentbox's stdout/stderr was on */
	uint64_t relay_dropped; /* captured bytes the relay did not pass on (slow reader) */
};

/* The inline part of s in the stream's order (the head, then the ring from its oldest byte),
 * malloc'd; *ret_len its length. Pure. */
char *stream_inline_text(const struct ab_stream *s, size_t *ret_len);

/* Keeps n captured bytes in s's inline part (head, then the ring). Pure. */
void stream_keep(struct ab_stream *s, const char *p, size_t n);
/* Keeps n bytes read past --output-limit in the ring only (truncate: the report's tail is the
 * stream's end), not counted as captured. Pure. */
void stream_keep_past_cap(struct ab_stream *s, const char *p, size_t n);

struct ab_limit_result {
	bool applies;          /* false: not reported (e.g. cpu-time off) */
	uint64_t enforced;     /* value in force (0 when not enforced) */
	const char *mechanism; /* "cgroup v1 memory.limit_in_bytes", "rlimit", "tmpfs", ... */
	bool enforced_ok;      /* the mechanism bounds the whole run as asked */
	char *note;            /* malloc'd, may be NULL */
};

struct ab_protection {
	const char *name; /* "seccomp", "landlock", "disable_userns", ... */
	bool enforced;
	char *detail; /* malloc'd, may be NULL */
};

struct ab_usage {
	int64_t memory_peak_bytes; /* -1 unknown */
	int64_t cpu_ms;            /* -1 unknown */
	int64_t tasks_peak;        /* -1 unknown */
	int64_t workspace_bytes;   /* bytes in the workspace after the run; -1 unknown */
	int64_t workspace_entries; /* entries in the workspace after the run; -1 unknown */
	int64_t oom_kills;         /* -1 unknown */
	int64_t pids_refused;      /* forks refused at the task limit; -1 unknown */
};

struct ab_record {
	enum ab_status status;
	int exit_code; /* the script's exit code, -1 when it did not exit */
	int signal;    /* the signal that killed the script, 0 when none */
	int agentbox_exit;
	int64_t wall_ms;
	int64_t cpu_ms;
	bool cpu_from_cgroup; /* cpu_ms is the run cgroup's count (not the wait statuses') */
	int64_t max_rss_kib;
	int64_t started_unix_ms;
	int64_t kill_to_reaped_ms; /* when agentbox killed the run: until all was reaped; -1 */
	int64_t supervisor_max_rss_kib;
	int64_t supervisor_fds_left; /* fds agentbox opened and still had open after the run */
	char *run_id; /* the run's random suffix: run dir and cgroup names end in it */
	struct ab_stream out, err;
	char *message; /* human text for setup errors and limit hits */
	char *fix;
	char *hint; /* a common mistake the run's failure points at (hint.h), or NULL */
	char *run_dir;
	int run_dir_fd; /* O_DIRECTORY fd of a kept run directory (for its report.json), or -1 */
	char *workspace;
	bool run_dir_kept;
	char *script;
	enum ab_lang lang;
	char *interpreter;
	json_t *files;     /* manifest (owned) or NULL */
	json_t *collected; /* --collect summary (owned) or NULL */
	json_t *inputs;    /* copy-in report (owned) or NULL */
	struct ab_limit_result limits[AB_LIM_COUNT];
	struct ab_run_opts *opts; /* requested values (borrowed) */
	bool warm;                /* the run took a warm slot (warm.h): its clock started there */
	struct ab_usage usage;
	struct ab_protection prot[24];
	size_t n_prot;
	uid_t sandbox_host_uid;     /* host uid the script ran as */
	const char *workspace_mode; /* "tmpfs", "idmapped" or "bind" (static), NULL before */
	/* sandbox.network.mode (static): "loopback" (the script's own loopback, TCP and UDP),
	 * "strict" (--net-strict: no TCP bind or connect), "proxy" (prepare: connect only to
	 * the registry proxy); NULL before the plan */
	const char *net_mode;
	json_t *environment; /* prepare: what was copied into the cache (owned), or NULL */
	json_t *pre_run;     /* requirements: how the environment was found or built (owned) */
	bool env_copied;     /* prepare: the environment was copied out */
	struct strv warnings;
	/* defaults this host cannot apply as documented ("cpus", "pids", "hostname"): each has
	 * the warning that begins "default NAME " (result_default_unapplied) */
	struct strv defaults_not_applied;
	/* --workspace DIR's token files covered by an empty read-only file in the sandbox */
	struct strv hidden_files;
	struct strv limits_hit; /* every limit with evidence it was reached */
	/* what the walk of the workspace skipped and why (owned) or NULL */
	json_t *files_summary;
};

void result_init(struct ab_record *r, struct ab_run_opts *opts);
void result_done(struct ab_record *r);
void result_warn(struct ab_record *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A default this host cannot apply (issue 25): the warning, which must begin "default NAME ",
 * and NAME in defaults_not_applied, so that a terminal can get one short line for all of them
 * (agentbox doctor explains) while the report keeps the whole text. */
void result_default_unapplied(struct ab_record *r, const char *name, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void result_protect(struct ab_record *r, const char *name, bool enforced, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
void result_set_message(struct ab_record *r, const char *msg, const char *fix);

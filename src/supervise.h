/* supervise.h: start bwrap, relay and capture output, enforce the deadline and output cap,
 * reap everything, and collect agentbox-init's status records.
 *
 * Process tree: agentbox (this process; a child subreaper) -> bwrap (outer, monitor) ->
 * agentbox-init (PID 1 of the sandbox's PID namespace) -> interpreter -> the script's own
 * children. When the run ends for any reason the supervisor SIGKILLs bwrap and the run's
 * cgroup; bwrap's --die-with-parent SIGKILLs PID 1, and the PID namespace takes every other
 * process with it. Because agentbox is a subreaper, PID 1 is re-parented to it if bwrap dies
 * first, so waitpid() returning ECHILD proves no process of the run is left. */
#pragma once

#include <sched.h>
#include <stdbool.h>
#include <stdint.h>

#include <sys/resource.h>
#include <sys/types.h>

#include "cgroup.h"
#include "init/proto.h"
#include "limitplan.h"
#include "memwatch.h"
#include "result.h"
#include "util/err.h"

struct ab_spawn {
	const char *bwrap_path;
	const char *args_buf; /* NUL-separated bwrap argv for --args */
	size_t args_len;
	char **cmd;            /* "--" and the command, on bwrap's real argv */
	int seccomp_fd;        /* -1: none */
	const char *init_path; /* agentbox-init on the host, passed as AB_FD_INIT */
	int stdin_fd;          /* -1: /dev/null */
	struct ab_cg *cg;      /* NULL: no cgroup */
	bool drop;             /* root caller: become drop_uid/drop_gid before bwrap */
	uid_t drop_uid;
	gid_t drop_gid;
	const struct ab_limits_plan *lp;
	const cpu_set_t *cpus; /* NULL: leave CPU placement alone */
	bool relay;            /* copy the script's output to our stdout/stderr live (relay.h) */
	bool relay_to_stderr;  /* ... both to our stderr */
	bool sanitize_out;     /* our stdout is a terminal: neutralise control sequences */
	bool sanitize_err;
	size_t inline_bytes;  /* each stream's inline part for the report (--inline-output) */
	int stream_dirfd;     /* the run directory for the stream files (0..2, as in a
			       * zero-initialised struct, or -1: none, as with --rm) */
	bool output_truncate; /* --on-output-limit truncate: past the cap, read and discard */
	bool progress;        /* a live status line on stderr if it is a terminal (progress.h) */
	int watch_fd; /* EOF or POLLHUP here: whoever started us is gone; stop the run (0..2, as
		       * in a zero-initialised struct, or -1: none) */
	struct ab_memwatch *memwatch; /* the memory watchdog (memwatch.h), or NULL */
};

struct ab_outcome {
	bool started;      /* bwrap was exec'd */
	int bwrap_wstatus; /* outer bwrap's wait status */
	bool bwrap_reaped;
	struct rusage ru; /* bwrap and everything it reaped, plus re-parented PID 1 */
	bool init_started;
	int landlock_abi;
	bool init_exec_failed;
	int init_errno;
	bool init_setup_failed;
	char init_text[160];
	bool script_done; /* agentbox-init reported the interpreter's wait status */
	int script_wstatus;
	unsigned fsize_hit; /* AB_FSIZE_* (init/proto.h): a file reached RLIMIT_FSIZE */
	bool timed_out;
	bool output_limited;
	bool cpu_time_limited;
	bool mem_limited;         /* the memory watchdog found the run over --memory */
	uint64_t mem_over_bytes;  /* ... measuring this much */
	char memwatch_error[120]; /* the watchdog could not watch: the run was stopped */
	int interrupted_by;       /* signal that interrupted agentbox, 0 none */
	int64_t wall_ms;
	int64_t kill_to_reaped_ms; /* when we killed: time until every process was reaped */
	int exec_errno;            /* the child could not exec bwrap */
	char exec_what[64];
};

int supervise_run(const struct ab_spawn *sp, struct ab_result *res, struct ab_outcome *ret,
		  struct ab_err *err);

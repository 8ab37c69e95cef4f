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

#include <jansson.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>

#include <sys/resource.h>
#include <sys/types.h>

#include "../init/proto.h"
#include "../spec/record.h"
#include "../util/err.h"
#include "../util/strv.h"
#include "cgroup/cgroup.h"
#include "limitplan.h"
#include "memwatch.h"

struct ab_spawn;

enum ab_warm_state {
	AB_WARM_STARTING, /* the sandbox is being built, the interpreter starting */
	AB_WARM_READY,    /* the interpreter's hook waits for its script */
	AB_WARM_CLAIMED,  /* a run took the slot: from here it is that run */
	AB_WARM_UNUSED,   /* let go before any run took it (the pool shrank or closed) */
	AB_WARM_FAILED,   /* the slot could not be made ready (failure says why) */
};

/* A warm slot (warm.h; docs/design.md "Warm slots"). supervise_run starts the sandbox, sends
 * the hook its config, and tells the library on ctl_fd when the interpreter is ready; the run
 * proper (deadline, limits, relay, capture) starts when a claim arrives and is taken. */
struct ab_warm {
	int ctl_fd;         /* the library's control socket (SOCK_SEQPACKET), borrowed */
	int hook_fd;        /* our end of the hook's socket (owned: closed by supervise_run) */
	int hook_peer;      /* its end: AB_WARM_FD in the sandbox (owned: closed after the fork) */
	const char *config; /* the hook's config message */
	size_t config_len;
	int64_t ready_timeout_ms; /* a slot not ready by then has failed */
	/* A claim arrived (the message's JSON; fds it carried, taken over): 0 takes it, > 0
	 * declines it (why filled; the slot waits for another), < 0 is an error. */
	int (*claim)(void *ctx, const json_t *msg, int *fds, size_t nfds, char *why, size_t size);
	/* The claim was taken: put the run's files in place and adjust sp (relay, inline
	 * output, limits); returns 0 with the hook's go message (malloc'd), or -errno with err
	 * set: the run then ends as a setup error. */
	int (*prepare)(void *ctx, struct ab_spawn *sp, char **ret_go, size_t *ret_len,
		       struct ab_err *err);
	void *ctx;
	/* results */
	enum ab_warm_state state;
	struct strv modules;   /* the top-level modules the hook's pre-imports added */
	uint64_t base_cpu_ns;  /* CPU time of the sandbox's processes when it was ready */
	uint64_t memory_bytes; /* what the slot held when ready (Pss, or RSS) */
	int64_t ready_ms;      /* from start to ready */
	char failure[400];     /* AB_WARM_FAILED: why */
};

struct ab_spawn {
	const char *bwrap_path;
	const char *args_buf; /* NUL-separated bwrap argv for --args */
	size_t args_len;
	char **cmd;            /* "--" and the command, on bwrap's real argv */
	int seccomp_fd;        /* -1: none */
	const char *init_path; /* agentbox-init on the host, passed as AB_FD_INIT */
	int stdin_fd;          /* -1: /dev/null */
	bool stdin_feed;  /* stream our fd 0 (the caller's) into the sandbox's stdin (feed.h) */
	struct ab_cg *cg; /* NULL: no cgroup */
	bool drop;        /* root caller: become drop_uid/drop_gid before bwrap */
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
	struct ab_warm *warm;         /* a warm slot, or NULL: a run */
	uint64_t cg_cpu_base_usec;    /* the cgroup's CPU time when the run started (warm) */
	/* a session: the library's socket, the driver's at AB_WARM_FD; SIGUSR1 to us then
	 * interrupts the running cell (SIGINT to the interpreter) instead of stopping the run.
	 * -1 (or 0, as in a zero-initialised struct): none */
	int session_fd;
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
	/* when we killed: the run's processes read just before (their CPU, their own and their
	 * reaped children's; their largest peak RSS), which no wait status carries then */
	bool reading;
	int64_t reading_cpu_ms;
	int64_t reading_maxrss_kib;
	/* what the run's tmpfs held (the workspace, /tmp, /dev/shm), bytes, -1 unmeasured: the
	 * memory cgroup's shmem when the interpreter ended, the watchdog's last and largest
	 * counts of the tmpfs mounts (issue 25: the evidence an OOM fix names tmpfs on) */
	int64_t tmpfs_end_bytes;
	int64_t tmpfs_peak_bytes;
	int exec_errno; /* the child could not exec bwrap */
	char exec_what[64];
};

/* Starts the sandbox and supervises the run to its end. With sp->warm, first waits as a slot
 * (see struct ab_warm): unless a claim was taken, the sandbox is killed and reaped, and the
 * outcome is not a run's. sp is changed only by warm->prepare. */
int supervise_run(struct ab_spawn *sp, struct ab_record *res, struct ab_outcome *ret,
		  struct ab_err *err);

/* supervise_run in two parts, for a run whose bwrap can start before all its options are
 * known: bwrap's exec and its dynamic loading (milliseconds) overlap the staging of the
 * workspace and /etc. supervise_prestart writes sp->args_buf, the head of bwrap's options
 * (bwargv_head: the namespaces, the identity, --die-with-parent; at most
 * AB_PRESTART_HEAD_MAX bytes, which any pipe holds unread), into a pipe, starts bwrap on it
 * with its final command sp->cmd, and sets *ret; or fails with err set and nothing left
 * running. bwrap reads its options to the pipe's end: should this process die before the
 * rest is written, bwrap still has the head (and is killed: PR_SET_PDEATHSIG). Then exactly
 * one of: supervise_continue writes the rest of the options and supervises the run to its
 * end, as supervise_run; supervise_abandon kills and reaps that bwrap (which has started
 * nothing yet). Both free the handle; sp, res and oc must live until then. Not for warm
 * slots. */
#define AB_PRESTART_HEAD_MAX 4096
struct ab_sup;
int supervise_prestart(struct ab_spawn *sp, struct ab_record *res, struct ab_outcome *oc,
		       struct ab_sup **ret, struct ab_err *err);
int supervise_continue(struct ab_sup *s, const char *rest, size_t len, struct ab_err *err);
void supervise_abandon(struct ab_sup *s);

/* limits.h: decide, per limit, the strongest mechanism this host offers, and say which.
 * An explicit limit the host cannot enforce is an error (nothing runs); a default that cannot
 * be enforced becomes a warning in the report. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include <sys/resource.h>

#include "../spec/options.h"
#include "../spec/record.h"
#include "../util/err.h"
#include "cgroup/cgroup.h"
#include "host.h"

/* /tmp and /dev/shm: nr_inodes = --tmp-size / this (tmpfs's own default ratio, of RAM), at
 * least AB_TMP_MIN_INODES */
/* RLIMIT_MEMLOCK in the sandbox: the kernel's old default; enough for a crypto library's
 * secure heap, bounds pinned page cache to pids x this */
#define AB_MEMLOCK_BYTES (64u << 10)

#define AB_TMP_BYTES_PER_INODE 8192
#define AB_TMP_MIN_INODES      1024

struct ab_limits_plan {
	bool use_cgroup;
	struct ab_cg_limits cg;
	bool cg_cpu_time; /* the supervisor polls the cgroup's CPU time against cpu_time_ms */
	/* no memory cgroup: the supervisor's watchdog (memwatch.h) holds the run to this */
	bool memwatch;
	uint64_t memwatch_bytes;
	/* cgroup v1 memory: its limit does not charge TCP and UDP socket buffers, so the
	 * supervisor adds them to the cgroup's usage (memwatch.h, the socket guard) */
	bool sockguard;
	uint64_t cpu_time_ms;
	/* rlimits set in the child before bwrap (inherited by everything in the sandbox);
	 * RLIM_INFINITY = leave alone */
	rlim_t fsize, nofile, cpu_s, nproc, core;
	/* per-uid kernel objects the sandbox would otherwise take from its uid's quota (the
	 * caller's own, unprivileged): pending signals, POSIX message queue bytes */
	rlim_t sigpending, msgqueue;
	/* RLIMIT_MEMLOCK: locked pages per process (AB_MEMLOCK_BYTES) */
	rlim_t memlock;
	/* the workspace tmpfs */
	bool tmpfs_workspace;
	uint64_t work_bytes, work_inodes;
	uint64_t tmp_bytes, tmp_inodes; /* /tmp and /dev/shm, each */
	int cpu_affinity; /* >= 0: pin the run to this many cores (fallback for --cpus) */
	uint64_t timeout_ms;
	uint64_t output_bytes;
	/* The RAM the run's tmpfs may hold, all charged to the memory cgroup: the workspace
	 * (--disk, when it is agentbox's tmpfs), /tmp and /dev/shm (--tmp-size each), prepare's
	 * environment. tmpfs_over_memory: that is more than the memory limit in force. */
	uint64_t tmpfs_bytes;
	bool tmpfs_over_memory;
};

/* Decides mechanisms. tmpfs_workspace: the workspace is agentbox's own capped tmpfs (false
 * with --workspace). per_run_userns: the supervisor runs in its own user namespace, so
 * RLIMIT_NPROC counts only this run's tasks. Fills res->limits, adds warnings.
 * Returns 0 or -errno with err set (an explicit limit that cannot be enforced). */
int limits_plan(const struct ab_run_opts *o, const struct ab_host *h, bool tmpfs_workspace,
		bool per_run_userns, struct ab_limits_plan *ret, struct ab_record *res,
		struct ab_err *err);

/* The limits only the supervision loop applies, the timeout and the output cap: set by
 * limits_plan, and again when a warm slot's run brings its own (warm.h). Fills res->limits. */
void limits_plan_run(const struct ab_run_opts *o, struct ab_limits_plan *lp, struct ab_record *res);

/* For people: which tmpfs caps add up to lp->tmpfs_bytes ("the workspace (--disk 2G), /tmp
 * and /dev/shm (--tmp-size 128M each)"), into buf. Pure. Returns buf. */
char *limits_tmpfs_text(const struct ab_limits_plan *lp, const struct ab_run_opts *o, char *buf,
			size_t size);

/* Applies the rlimits to the calling process (a forked child before exec). Returns 0 or
 * -errno. Async-signal-safe. */
int limits_apply_rlimits(const struct ab_limits_plan *lp);

/* Unprivileged, the sandbox runs as the caller's uid and its inotify instances and watches
 * count against that uid's quota (fs.inotify.max_user_instances, 128 by default): a run could
 * leave the caller none. In the supervisor's own user namespace (ws_enter_mntns) these are
 * per-namespace limits it may lower, and the kernel checks every namespace level: the run then
 * holds at most AB_INOTIFY_INSTANCES / AB_INOTIFY_WATCHES of the caller's quota. Writes
 * PROC_ROOT/sys/user/max_inotify_{instances,watches}. Returns 0 or -errno (a read-only
 * /proc/sys, as in containers: the caller then refuses inotify with seccomp instead). */
#define AB_INOTIFY_INSTANCES 8
#define AB_INOTIFY_WATCHES   8192
int limits_cap_inotify(const char *proc_root);

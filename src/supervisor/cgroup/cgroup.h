/* cgroup.h: per-run cgroups, v2 (delegated subtree) or v1 (root: memory, pids, cpu, cpuacct
 * hierarchies). Every path is relative to a root directory so the code runs against a fake
 * cgroupfs tree in unit tests (tests/unit/test-cgroup.c). Implemented by src/cgroup*.c; which
 * file does what is in cgroup-internal.h. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sys/types.h>

#include "../../util/err.h"

enum ab_cg_kind {
	AB_CG_NONE,
	AB_CG_V1,
	AB_CG_V2,
};

/* What this host offers the current process. Filled by cg_probe. */
struct ab_cg_host {
	enum ab_cg_kind kind;
	char root[256];       /* "/sys/fs/cgroup" in production, a temp dir in tests */
	char v2_parent[1024]; /* v2: delegated parent, relative to root, where run cgroups go */
	bool memory, pids, cpu, cpuacct; /* controllers usable for a run cgroup */
	bool swap;                       /* v2 memory.swap.max / v1 memory.memsw.* present */
	bool kill_file;                  /* v2 cgroup.kill present */
	char why[512]; /* when kind == AB_CG_NONE or a controller is missing: why, and the fix */
	char how[64];  /* how the place was had, for messages: "a cgroup systemd delegated", ... */
};

/* Probes root (NULL = "/sys/fs/cgroup") for a place this process may create run cgroups.
 * v2: the parent is, in order, $AGENTBOX_CGROUP (relative to root, or an absolute path under
 * root; it must hold no processes of its own; runs go directly under it), else the process's
 * own cgroup D (from /proc/self/cgroup, or proc_self_cgroup in tests) when it is ours to use:
 * delegated by systemd (a scope cg_enter_scope made, or a cgroup with the xattr
 * user.delegate / trusted.delegate = 1), or any writable cgroup where systemd does not
 * manage the tree (a container's). A cgroup systemd manages and did not delegate is never
 * written. The no-internal-processes rule forbids a cgroup that holds processes to hand
 * controllers to its children, so this process, when it is the only one in D, moves itself
 * into the leaf D/agentbox-supervisor and enables the controllers in D; runs go in sibling
 * leaves D/run-*. A D that holds other processes is left alone (kind NONE, with why). A
 * cgroup namespace's root (".") may hold processes: runs go under "agentbox/".
 * v1 (only when the v2 mount at root has no controllers): the memory/pids/cpu/cpuacct
 * hierarchies under root, each must be writable (in practice: root); runs go under
 * "<controller>/agentbox/" (created here). Returns 0 (kind may be AB_CG_NONE, with why set)
 * or -errno.
 * With root == NULL (or "/sys/fs/cgroup") the filesystem types are checked with fstatfs();
 * any other root is a fake tree for tests and only the files present decide (and
 * cg_test_systemd whether systemd manages it). */
int cg_probe(const char *root, const char *proc_self_cgroup, struct ab_cg_host *ret);

/* On a systemd host with a cgroup v2 tree where cg_probe() finds no place of this process's
 * own (its cgroup is systemd's and not delegated): asks systemd for a transient scope with
 * Delegate=yes holding this process (the system manager as root, the user's manager
 * otherwise; AGENTBOX_NO_SYSTEMD_SCOPE=1 or AGENTBOX_CGROUP turn this off) and waits until
 * the kernel shows this process in it; cg_probe() then finds the scope. Call it before this
 * process enters any namespace (systemd takes the PID and the credentials as it sees them).
 * Returns 1 when this process is now in its own scope, 0 otherwise; when it tried and failed,
 * cg_probe()'s why says why. Implemented in cgroup-scope.c. */
int cg_enter_scope(void);

struct ab_cg_limits {
	/* memory_bytes: 0 = no limit; swap is always set to 0 when a memory limit is set */
	uint64_t memory_bytes;
	uint64_t pids;          /* 0 = no limit */
	uint64_t cpu_quota_us;  /* 0 = no limit; per cpu_period_us */
	uint64_t cpu_period_us; /* default 100000 */
};

/* A run's cgroup: dirfds for each hierarchy (v2 uses only dirfd[0]).
 * Ownership convention: the fds are owned only while name[0] != '\0'. A zeroed struct (whose
 * fds read 0, i.e. stdin) therefore owns nothing and cg_destroy() leaves fd 0 alone; still,
 * initialize with cg_init() so the fds read -1. cg_create() fills the struct only on success
 * and leaves it in the cg_init() state on failure; cg_destroy() returns it to that state. */
struct ab_cg {
	enum ab_cg_kind kind;
	char name[64];   /* the run cgroup's directory name */
	int dirfd[4];    /* v2: [0]; v1: memory, pids, cpu, cpuacct (-1 if absent) */
	int procs_fd[4]; /* O_WRONLY fds on each cgroup.procs, for cg_attach_self() */
};

/* Sets kind to AB_CG_NONE, name to "" and every fd to -1: owns nothing. */
void cg_init(struct ab_cg *cg);

struct ab_cg_usage {
	uint64_t memory_peak_bytes; /* v2 memory.peak / v1 memory.max_usage_in_bytes; 0 unknown */
	uint64_t oom_kills;         /* v2 memory.events oom_kill / v1 memory.oom_control oom_kill */
	uint64_t memory_max_events; /* v2 memory.events max / v1 memory.failcnt */
	uint64_t pids_max_events;   /* v2/v1 pids.events "max": forks refused at the limit */
	uint64_t pids_peak;         /* v2 pids.peak (6.1+) / v1 pids.peak if present; 0 unknown */
	uint64_t cpu_usec;          /* v2 cpu.stat usage_usec / v1 cpuacct.usage / 1000 */
	uint64_t cpu_throttled_usec; /* v2 cpu.stat throttled_usec / v1 cpu.stat throttled_time */
	bool valid;
};

/* A warm slot's run starts (warm.h): the memory high-water mark starts again from what is
 * in use now (cgroup v1 memory.max_usage_in_bytes; v2's memory.peak can be reset only for one
 * open file, so there the peak includes the slot's start). Returns 0 or -errno
 * (-EOPNOTSUPP on v2). */
int cg_reset_peaks(struct ab_cg *cg);

/* Creates the run cgroup `name` (e.g. "run-ab12cd") under the probed place and writes the
 * limits. On any failure removes what it created. Returns 0 or -errno with err set.
 * name: [A-Za-z0-9._-], not starting with '.', shorter than sizeof(ret->name). The directory
 * must not exist yet (mkdirat, -EEXIST otherwise). A limit whose controller the host lacks is
 * an error (-EOPNOTSUPP): zero it to run without. v1 with cpu and cpuacct co-mounted
 * ("cpu,cpuacct"): one directory, dirfd[3] is a dup of dirfd[2] and procs_fd[3] is -1. */
int cg_create(const struct ab_cg_host *h, const char *name, const struct ab_cg_limits *l,
	      struct ab_cg *ret, struct ab_err *err);

/* In a forked child, before exec: moves the calling process into the run cgroup by writing
 * "0" to each procs_fd. Async-signal-safe (write only). Returns 0 or -errno. */
int cg_attach_self(const struct ab_cg *cg);

/* Moves process pid (not its existing children) into the run cgroup. Returns 0 or -errno. */
int cg_attach_pid(const struct ab_cg *cg, pid_t pid);

/* Kills every process in the run cgroup (v2: cgroup.kill, else/and v1: SIGKILL each pid in
 * cgroup.procs until empty, bounded retries). Returns 0 or -errno (-EBUSY: not empty yet).
 * A pid read from cgroup.procs is signalled only through a pidfd and only after
 * /proc/PID/cgroup shows it in a cgroup named cg->name, so a recycled pid is never hit.
 * v2 without cgroup.kill (Linux < 5.14): the cgroup is frozen while the pids are killed. */
int cg_kill(struct ab_cg *cg);

/* Number of processes still in the run cgroup (0 when empty), or -errno. */
int cg_count_procs(struct ab_cg *cg);

/* The processes in the run cgroup (as cgroup.procs lists them: they may have ended since),
 * their number, *ret malloc'd; or -errno. */
int cg_list_procs(struct ab_cg *cg, pid_t **ret);

int cg_read_usage(struct ab_cg *cg, struct ab_cg_usage *ret);

/* Kills what is left, waits (bounded, ~2 s) until empty, removes the directories, closes fds.
 * Safe to call on a zeroed / half-created struct, and again afterwards (a no-op). Always
 * releases the fds; a directory that could not be removed (-EBUSY) is left for
 * cg_sweep_stale(). Child cgroups created inside the run cgroup are not removed (the sandbox
 * has no cgroupfs to make them). Returns 0 or -errno. */
int cg_destroy(struct ab_cg *cg);

/* Run cgroup names have the form "run-<PID>-<STARTTIME>-<SUFFIX>": PID is the owning agentbox
 * process, STARTTIME field 22 of /proc/<PID>/stat (so a recycled pid is not mistaken for the
 * owner), SUFFIX the run directory's random suffix. cg_run_name() builds it for this process. */
void cg_run_name(const char *suffix, char *buf, size_t size);

/* Removes stale run cgroups left by an agentbox that was SIGKILLed: every "run-*" directory
 * under the agentbox parent whose owner (by the name's PID and STARTTIME) is gone. Kills what
 * is inside and removes them. proc_root: "/proc" (tests pass a fake). Returns the number
 * removed or -errno.
 * The number counts directories, so one v1 run counts once per hierarchy. An owner is gone
 * when PROC_ROOT/PID/stat does not exist or its starttime differs (a STARTTIME of 0 in the
 * name only counts the first). Names that do not parse, and owners whose stat cannot be
 * read or parsed, are left alone. PIDs are this pid namespace's. */
int cg_sweep_stale(const struct ab_cg_host *h, const char *proc_root);

/* Test hooks (tests/unit/test-cgroup.c only; NULL in production, never set them elsewhere).
 * A fake cgroupfs is a tree of plain directories and files: the kernel creates a cgroup's
 * interface files on mkdir and drops them on rmdir, plain directories do neither. So:
 * cg_test_after_mkdir is called right after every mkdirat() this module makes (run cgroups,
 * "agentbox" parents, "agentbox-supervisor"), with the parent dirfd and the new name, and
 * may populate the fake interface files; cg_test_before_rmdir is called right before every
 * rmdir (unlinkat AT_REMOVEDIR) and may delete them. This module itself never unlinks a
 * file: in a real cgroupfs that is never right. */
extern void (*cg_test_after_mkdir)(int parent_dirfd, const char *name);
extern void (*cg_test_before_rmdir)(int parent_dirfd, const char *name);
/* cg_test_subtree_write, when set, replaces each write of value ("+memory") to a v2
 * cgroup.subtree_control (dirfd's), so that a fake can keep the kernel's semantics: a set of
 * controllers that only grows, refusals (a controller the cgroup is not offered, processes in
 * a non-root cgroup, a busy one). Returns 0 or -errno like the write it replaces. */
extern int (*cg_test_subtree_write)(int dirfd, const char *value);
/* cg_test_systemd: 1 = systemd manages the (fake) tree, 0 = it does not, -1 (the default) =
 * look (/run/systemd/system, for the real tree only). */
extern int cg_test_systemd;

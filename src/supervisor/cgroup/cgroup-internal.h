/* cgroup-internal.h: what the cgroup*.c files share; the interface is cgroup.h.
 *
 * Where run cgroups live:
 *   v2: <root>/<v2_parent>/<run>      v2_parent = $AGENTBOX_CGROUP, or "<own cgroup>/agentbox"
 *   v1: <root>/<ctrl>/agentbox/<run>  for ctrl in memory, pids, cpu, cpuacct
 *
 * Only the root is opened by name; everything below it is reached with *at() calls on
 * directory fds, and a run cgroup is opened O_NOFOLLOW right after this code made it. The
 * module never unlinks a file: only run directories (and nothing else) are removed, with
 * unlinkat(AT_REMOVEDIR), after checking the entry is still the directory we hold open.
 *
 * The files: cgroup.c is a run cgroup's life (create with its limits, attach, destroy);
 * cgroup-probe.c finds what the host offers (v2 delegation, v1 hierarchies); cgroup-kill.c
 * kills and counts what is inside a run cgroup; cgroup-usage.c reads what the run used;
 * cgroup-sweep.c names run cgroups and removes stale ones; cgroup-util.c has the helpers
 * declared here. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sys/types.h>

#include "cgroup.h"

#define CG_ROOT_DEFAULT    "/sys/fs/cgroup"
#define CG_PARENT          "agentbox"            /* v1 runs parent; v2 own-cgroup runs parent */
#define CG_SUPERVISOR      "agentbox-supervisor" /* v2 leaf this process moves itself into */
#define CG_PROCS_CAP       (4u << 20)            /* cgroup.procs bytes we are willing to read */
#define CG_KILL_ROUNDS     100                   /* read cgroup.procs / SIGKILL rounds */
#define CG_DESTROY_WAIT_MS 2000                  /* how long cg_destroy waits for an empty cgroup */
#define CG_DEFAULT_PERIOD  100000

/* Index into ab_cg.dirfd for v1, and bit numbers for wanted v2 controllers. */
enum {
	CG_MEMORY,
	CG_PIDS,
	CG_CPU,
	CG_CPUACCT,
	CG_N,
};

#define CG_MEM_OR_PIDS (1u << CG_MEMORY | 1u << CG_PIDS)

/* Controller names, by the index above: hierarchy directories (v1), cgroup.controllers words
 * (v2). */
extern const char *const cg_names[CG_N];

/* Why this process is not in a scope of its own when cg_enter_scope() tried and failed ("" when
 * it did not try or succeeded): the probe appends it to its own why. */
extern char cg_scope_why[256];
/* The scope cg_enter_scope() put this process in ("agentbox-PID-RAND.scope"), or "". */
extern char cg_scope_unit[64];

/* nanosleep, resumed after EINTR. */
void cg_sleep_ms(long ms);

/* Is s[0..len) one or more ASCII digits and nothing else? */
bool cg_all_digits(const char *s, size_t len);

/* Parses s[0..len) as one unsigned decimal, blanks around it allowed; no sign, no junk.
 * Returns 0 and sets *ret, or -EINVAL / -ERANGE and leaves *ret alone. */
int cg_parse_u64(const char *s, size_t len, uint64_t *ret);

/* Does dirfd/path exist (never following a final symlink)? */
bool cg_exists_at(int dirfd, const char *path);

/* Are the two fds the same inode? false when either fstat fails. */
bool cg_same_inode(int fd_a, int fd_b);

/* mkdirat(0755) + test hook. Returns 0 or -errno (-EEXIST included). */
int cg_mkdir(int parent, const char *name);

/* Reads the pids in dirfd's cgroup.procs into *ret (malloc'd, caller frees). Lines that are
 * not a pid > 0 are skipped. Returns the count or -errno. */
int cg_read_procs(int dirfd, pid_t **ret);

/* Is controller i (CG_MEMORY, ...) usable on this host? */
bool cg_host_has(const struct ab_cg_host *h, int i);

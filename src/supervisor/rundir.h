/* rundir.h: the runs root, per-run directories and copy-in.
 * Layout of a run directory (mode 0700, owned by the caller: root's runs are never the
 * sandbox user's, so nothing a run leaves is usable as that uid):
 *   RUNS/run-XXXXXX/.agentbox-run   marker: this is a run directory agentbox created
 *   RUNS/run-XXXXXX/work/           the workspace as collected after the run (not with --rm)
 *   RUNS/run-XXXXXX/report.json     a copy of the report
 * and, shared by all runs (each agentbox mounts there in its own mount namespace only):
 *   RUNS/.mnt/work/                 during a run: the size- and inode-capped tmpfs
 *   RUNS/.mnt/etc/                  during a run: the sandbox's generated /etc (tmpfs)
 *   RUNS/.mnt/ro/N                  during a run: read-only binds, mounted from checked fds
 *   RUNS/.mnt/script/               during a run: a copy of a script outside --workspace
 *   RUNS/.mnt/env/                  during `prepare`: the environment being built (tmpfs)
 *   RUNS/.mnt/{tmp,shm,pts}/        during a run: the sandbox's /tmp, /dev/shm (tmpfs) and
 *                                   /dev/pts (devpts with max=)
 * A --rm run has no run directory at all: nothing of it is ever written to disk. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include <sys/types.h>

#include "../util/err.h"

#define AB_RUN_PREFIX "run-"
#define AB_RUN_MARKER ".agentbox-run"

struct ab_rundir {
	char *root;     /* runs root path */
	int root_fd;    /* O_DIRECTORY fd on it */
	char *path;     /* run directory path */
	int fd;         /* O_DIRECTORY fd on it */
	char suffix[8]; /* the random part of the name */
	char *mnt_work; /* RUNS/.mnt/work and RUNS/.mnt/etc: mountpoints, see above */
	char *mnt_etc;
	char *mnt_ro;     /* RUNS/.mnt/ro: parent of the staged read-only binds */
	char *mnt_script; /* RUNS/.mnt/script: a script outside --workspace DIR (tmpfs) */
	char *mnt_env;    /* RUNS/.mnt/env: prepare's environment while it is built (tmpfs) */
	char *mnt_tmp;    /* RUNS/.mnt/tmp, RUNS/.mnt/shm: the sandbox's /tmp and /dev/shm */
	char *mnt_shm;
	char *mnt_pts; /* RUNS/.mnt/pts: the sandbox's devpts instance */
};

void rundir_init(struct ab_rundir *rd);
void rundir_done(struct ab_rundir *rd);

/* The default runs root for uid: $AGENTBOX_RUNS_DIR, else /var/tmp/agentbox-UID. malloc'd. */
char *rundir_default_root(uid_t uid);

/* Opens (creating the last component if missing) the runs root. It must be a directory owned
 * by the caller, not a symlink, not group/other writable. Mode 0700, or 0711 when
 * traverse_for_others (root callers: the sandbox user must reach its run directory).
 * Returns 0 or -errno with err set (message names the problem and the fix). */
int rundir_open_root(const char *path, bool traverse_for_others, struct ab_rundir *rd,
		     struct ab_err *err);

/* Creates (when missing) and opens the directory `name` below root_fd (O_NOFOLLOW): it must
 * be a directory owned by the caller and not group/other writable, else it is refused with
 * the fix. display names it in messages. Returns an O_DIRECTORY fd or -errno. */
int rundir_open_private(int root_fd, const char *name, const char *display, struct ab_err *err);

/* Makes sure the shared mountpoints exist (rd->mnt_*). When on_disk, creates a fresh run
 * directory under the root's fd (a new random name, never reused), writes the marker and
 * creates work/; else (--rm) only picks rd->suffix and leaves rd->path NULL. */
int rundir_create(struct ab_rundir *rd, bool on_disk, struct ab_err *err);

/* Is `name` in root_fd a run directory agentbox created (pattern, marker, owner)? */
bool rundir_is_run(int root_fd, const char *name);

/* Is the agentbox that created run `name` still running (marker pid + start time)? */
bool rundir_owner_alive(int root_fd, const char *name);

/* Copies the regular file open on src_fd into dst_dirfd/name (O_EXCL, never through a
 * symlink), mode 0644 (0755 when the source is executable by its owner), owned by
 * owner:group when not -1. Returns 0 or -errno. */
int rundir_copy_file(int src_fd, int dst_dirfd, const char *name, uid_t owner, gid_t group);

/* Retention of kept runs: at the start of every run the runs root keeps the newest `count`
 * runs (0: no count limit) and none older than `age_ms` (0: no age limit), by the time each
 * run started (its marker). A run whose agentbox is alive and the run named `own` are never
 * touched; at most max_remove runs go per call, so a start is never stalled for long.
 * Settings: $AGENTBOX_KEEP_RUNS (default 20) and $AGENTBOX_KEEP_AGE (default 7d). */
#define AB_KEEP_RUNS_DEFAULT   20
#define AB_KEEP_AGE_MS_DEFAULT (7ULL * 24 * 3600 * 1000)
int rundir_retention(uint64_t *ret_count, uint64_t *ret_age_ms, struct ab_err *err);
int rundir_prune(int root_fd, const char *own, uint64_t count, uint64_t age_ms,
		 unsigned max_remove);

/* What the runs root holds: the number of runs and their bytes on disk (st_blocks; entries
 * that cannot be read are not counted). Bounded: stops after max_entries entries and says so
 * in *ret_partial. */
void rundir_usage(int root_fd, uint64_t max_entries, unsigned *ret_runs, uint64_t *ret_bytes,
		  bool *ret_partial);

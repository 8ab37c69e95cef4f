/* runctx.h: the state of one `agentbox run`, shared by run.c (the order of things),
 * workspace.c (host-side files and mounts) and outcome.c (what happened). Private to them. */
#pragma once

#include <stdbool.h>
#include <time.h>

#include <sys/types.h>

#include "../fs/walk/walk.h"
#include "../spec/options.h"
#include "../spec/record.h"
#include "../util/err.h"
#include "cgroup/cgroup.h"
#include "host.h"
#include "limitplan.h"
#include "plan.h"
#include "rundir.h"
#include "supervise.h"

struct run_ctx {
	struct ab_run_opts *o;
	struct ab_record *res;
	struct ab_host host;
	struct ab_plan plan;
	struct ab_rundir rd;
	struct ab_limits_plan lp;
	struct ab_cg cg;
	bool cg_made;
	bool drop;        /* root caller: the sandbox runs as sb_uid */
	bool root_userns; /* root without CAP_SYS_ADMIN: the supervisor is in a user namespace of
			   * its own that maps root and sb_uid (ws_enter_mntns) */
	/* unprivileged: how the caller's inotify quota is kept (limitplan.h limits_cap_inotify):
	 * 1 capped in the run's user namespace, -1 refused by seccomp, 0 not decided yet */
	int inotify_guard;
	uid_t sb_uid;
	gid_t sb_gid;
	uid_t owner_uid; /* owner for files we create for the sandbox, or -1 */
	gid_t owner_gid;
	bool tmpfs_mounted; /* RUNS/.mnt/work is the capped tmpfs */
	bool etc_mounted;   /* RUNS/.mnt/etc is the /etc tmpfs */
	int work_fd;        /* the live workspace (tmpfs or --workspace DIR), for reading */
	int cache_fd;       /* RUNS/.cache (borrowed from run.c's struct run), or -1 */
	int ws_dir_fd;      /* --workspace DIR as opened and checked once (O_PATH), or -1 */
	int collect_fd;     /* --collect DIR, opened and checked before the run, or -1 */
	uid_t ws_owner_uid; /* --workspace DIR's owner: new files belong to it on the host */
	gid_t ws_owner_gid;
	struct timespec started_rt; /* CLOCK_REALTIME before the sandbox starts (for ctimes) */
	mode_t ws_root_bits;        /* --workspace DIR's own strip bits before the run */
	struct ab_strip_keep *strip_keep; /* entries of DIR that had strip bits before */
	size_t n_strip_keep;
	struct ab_manifest pre; /* the workspace before the run (ws_snapshot_workspace) */
	bool have_pre;
	char *script_rel;     /* the script's path in the workspace, or NULL: outside it */
	uint64_t env_skipped; /* prepare: entries of the environment not copied */
	bool env_truncated;   /* prepare: a cap stopped the copy */
	int script_fd;
	int seccomp_fd;
	int stdin_fd;
	char *script_name; /* basename, or the path relative to --workspace */
	/* a warm slot (run.h struct ab_slot_opts; slot.c) */
	struct ab_warm warm;
	char *warm_config; /* the hook's config message */
	size_t warm_config_len;
	struct ab_cg_usage cg_base;  /* the cgroup's counters when the run took the slot */
	struct timespec handover_rt; /* CLOCK_REALTIME_COARSE after the run's files were in */
};

/* workspace.c */
int ws_enter_mntns(struct run_ctx *c, struct ab_err *err);
int ws_mount_workspace(struct run_ctx *c, struct ab_err *err);
int ws_open_workspace(struct run_ctx *c, int runs_root_fd, struct ab_err *err);
int ws_open_collect(struct run_ctx *c, struct ab_err *err);
int ws_mount_dir(struct run_ctx *c, struct ab_err *err);
/* A project's token files in --workspace DIR, covered by an empty read-only file each (issue
 * 25), listed in the report's hidden_files. */
int ws_hide_token_files(struct run_ctx *c, struct ab_err *err);
/* The workspace as the script will find it (after --input, or --workspace DIR as it is):
 * listed and hashed within bounds, for the origins of files after the run; with
 * --workspace, also the bits a strip must keep. */
int ws_snapshot_workspace(struct run_ctx *c, struct ab_err *err);
int ws_mount_env(struct run_ctx *c, struct ab_err *err);
int ws_env_copy_out(struct run_ctx *c, struct ab_err *err);
int ws_mount_etc(struct run_ctx *c, struct ab_err *err);
int ws_mount_scratch(struct run_ctx *c, struct ab_err *err);
int ws_stage_ro_binds(struct run_ctx *c, struct ab_err *err);
int ws_open_script(struct run_ctx *c, struct ab_err *err);
bool ws_script_is_code(const struct run_ctx *c);
void ws_name_script(struct run_ctx *c); /* c->script_name, once the language is known */
int ws_place_script(struct run_ctx *c, struct ab_err *err);
int ws_copy_inputs(struct run_ctx *c, struct ab_err *err);
int ws_stdin_memfd(const char *path, uint64_t cap, int *ret, struct ab_err *err);
int ws_stdin_memfd_data(const char *data, size_t len, uint64_t cap, int *ret, struct ab_err *err);
int ws_collect(struct run_ctx *c, struct ab_err *err);
void ws_cleanup(struct run_ctx *c);

/* slot.c */
/* Makes sp a warm slot's spawn: the hook's socket, its config, the claim callbacks. */
int slot_start(struct run_ctx *c, struct ab_spawn *sp, struct ab_err *err);
void slot_done(struct run_ctx *c);
/* After a claimed run: takes what the slot used before the hand-over off the cgroup's counters
 * (u) and judges a file-size hit in /work from the hand-over (oc). */
void slot_settle(struct run_ctx *c, struct ab_outcome *oc, struct ab_cg_usage *u);
/* ... and off the run's CPU time (after outcome_interpret). */
void slot_settle_cpu(struct run_ctx *c);

/* outcome.c */
void outcome_interpret(struct run_ctx *c, const struct ab_outcome *oc, const struct ab_cg_usage *u);
void outcome_record_protections(struct run_ctx *c, const struct ab_outcome *oc);

#include "cmds.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "../fs/hostfs.h"
#include "../fs/walk/walk.h"
#include "../spec/record.h"
#include "../spec/units.h"
#include "../util/fdutil.h"
#include "../util/macro.h"
#include "../util/xalloc.h"
#include "config.h"
#include "filter.h"
#include "host.h"
#include "prepare.h"
#include "run.h"
#include "rundir.h"

/* Splits RUN_DIR into an O_DIRECTORY fd on its parent and its name, and checks that it is a
 * run directory agentbox created: the run-XXXXXX name, not a symlink, the marker inside. */
static int
open_run(const char *path, int *ret_parent, char **ret_name)
{
	struct ab_err err = { 0 };
	cleanup_free char *name = NULL;
	cleanup_fd int ppath = hostfs_open_parent(path, 0, "run directory", &name, &err);
	int pfd;

	if (ppath < 0)
		return ppath;
	pfd = openat(ppath, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (pfd < 0)
		return -errno;
	if (!rundir_is_run(pfd, name)) {
		(void) close(pfd);
		return -EPERM;
	}
	*ret_parent = pfd;
	*ret_name = steal_ptr(&name);
	return 0;
}

int
rm_do(const char *run_dir, struct ab_err *err)
{
	cleanup_free char *name = NULL;
	cleanup_fd int pfd = -1;
	int r;

	if (!run_dir)
		return ab_err_usage(err, "rm: give RUN_DIR");
	r = open_run(run_dir, &pfd, &name);
	if (r == -EPERM) {
		ab_err_set(err, r,
			   "refusing to remove '%s': not a run directory agentbox created (no "
			   "run-XXXXXX name or no %s marker of yours)",
			   run_dir, AB_RUN_MARKER);
		return ab_err_fix(err, "pass a path from a report's run_dir");
	}
	if (r < 0)
		return ab_err_set(err, r, "cannot remove '%s': %s", run_dir, strerror(-r));
	if (rundir_owner_alive(pfd, name))
		return ab_err_set(err, -EBUSY, "'%s' belongs to a run that is still going",
				  run_dir);
	return walk_remove_tree(pfd, name, err);
}

int
gc_do(int64_t older_ms, bool dry, json_t **ret, struct ab_err *err)
{
	cleanup_free char *root = rundir_default_root(geteuid());
	cleanup_fd int rfd = -1;
	json_t *removed = json_array();
	DIR *d;
	struct dirent *de;
	int kept = 0, failed = 0;
	time_t now = time(NULL);

	rfd = open(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (rfd < 0) {
		if (errno == ENOENT) {
			*ret = json_pack("{s:s, s:o, s:i, s:b}", "runs_dir", root, "removed",
					 removed, "kept", 0, "dry_run", dry);
			return 0;
		}
		json_decref(removed);
		return ab_err_set(err, -errno, "cannot open the runs directory '%s': %s", root,
				  strerror(errno));
	}
	d = fdopendir(fcntl(rfd, F_DUPFD_CLOEXEC, 3));
	if (!d) {
		json_decref(removed);
		return ab_err_set(err, -errno, "read the runs directory '%s'", root);
	}
	while ((de = readdir(d))) {
		struct stat st;
		struct ab_err e = { 0 };

		if (!rundir_is_run(rfd, de->d_name))
			continue;
		if (fstatat(rfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (older_ms > 0 && (int64_t) (now - st.st_mtime) * 1000 < older_ms) {
			kept++;
			continue;
		}
		if (rundir_owner_alive(rfd, de->d_name)) {
			kept++;
			continue;
		}
		if (!dry && walk_remove_tree(rfd, de->d_name, &e) < 0) {
			fprintf(stderr, "agentbox: removing %s/%s: %s\n", root, de->d_name, e.msg);
			failed++;
			kept++;
			continue;
		}
		json_array_append_new(removed, json_string(de->d_name));
	}
	closedir(d);
	*ret = json_pack("{s:s, s:o, s:i, s:i, s:b}", "runs_dir", root, "removed", removed, "kept",
			 kept, "failed", failed, "dry_run", dry);
	{
		/* the environments requirements built: down to their cap (AGENTBOX_CACHE_MAX) */
		json_t *envs = NULL;

		if (prepare_cache_bound(!dry, &envs) == 0 && envs)
			json_object_set_new(*ret, "envs", envs);
	}
	return 0;
}

int
collect_do(const char *run_dir, const char *dest, json_t **ret, struct ab_err *err)
{
	cleanup_free char *name = NULL;
	cleanup_fd int pfd = -1, wfd = -1, dfd = -1;
	struct ab_manifest m = { 0 };
	/* bounded by totals like a run's own post-run walk (docs/design.md) */
	struct ab_walk_opts wo = {
		.max_entries = 100000,
		.max_file_bytes = 256ULL << 20,
		.max_total_bytes = 1ULL << 30,
		.hash_max_bytes = 64ULL << 20,
		.hash_budget_bytes = 512ULL << 20,
		.max_list_bytes = 8ULL << 20,
		.time_budget_ms = 60000,
		.chown_uid = (uid_t) -1,
		.chown_gid = (gid_t) -1,
		.strip_uid = (uid_t) -1,
	};
	int r;

	if (!run_dir || !dest)
		return ab_err_usage(err, "collect: give RUN_DIR and DIR");
	r = open_run(run_dir, &pfd, &name);
	if (r < 0) {
		ab_err_set(err, r, "'%s' is not a run directory agentbox created%s%s", run_dir,
			   r == -EPERM ? "" : ": ", r == -EPERM ? "" : strerror(-r));
		return ab_err_fix(err, "pass a path from a report's run_dir");
	}
	{
		cleanup_free char *work = xasprintf("%s/work", name);

		wfd = openat(pfd, work, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	}
	if (wfd < 0)
		return ab_err_set(err, -errno, "'%s' has no workspace: %s", run_dir,
				  strerror(errno));
	dfd = hostfs_open_collect(dest, "collect: DIR", pfd, err);
	if (dfd < 0)
		return dfd;
	wo.dst_dirfd = dfd;
	r = walk_tree(wfd, &wo, &m, err);
	if (r < 0) {
		manifest_done(&m);
		return ab_err_wrap(err, "collect '%s' into '%s'", run_dir, dest);
	}
	if (m.truncated_caps) {
		cleanup_free char *caps = walk_caps_text(m.truncated_caps);

		fprintf(stderr,
			"agentbox: collect: %s cut the listing or the copy short (see summary)\n",
			caps);
	}
	*ret = json_pack("{s:s, s:I, s:o, s:o}", "dir", dest, "bytes", (json_int_t) m.copied_bytes,
			 "files", manifest_to_json(&m), "summary", manifest_summary_json(&m));
	manifest_done(&m);
	return 0;
}

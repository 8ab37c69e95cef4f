/* workspace.c: everything agentbox does to a run's files on the host side: its private mount
 * namespace, the workspace and /etc tmpfs, staged read-only binds, copying the script and
 * inputs in, --stdin, collecting what the script left, and taking it all down again. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include "etcgen.h"
#include "runctx.h"
#include "rundir.h"
#include "util/fdutil.h"
#include "util/macro.h"
#include "util/xalloc.h"
#include "walk.h"

static int
write_proc_self(const char *file, const char *text)
{
	return write_small_file_at(AT_FDCWD, file, text);
}

/* Root: a private mount namespace. Unprivileged: a user namespace mapping only ourselves,
 * plus a mount namespace. Either way our mounts (the workspace tmpfs) die with this process,
 * also when it is SIGKILLed: nothing to unmount, nothing to leak. */
int
ws_enter_mntns(struct run_ctx *c, struct ab_err *err)
{
	char map[64];
	int r;

	if (c->host.is_root) {
		if (unshare(CLONE_NEWNS) < 0)
			return ab_err_set(err, -errno, "unshare(CLONE_NEWNS): %s", strerror(errno));
	} else {
		uid_t uid = geteuid();
		gid_t gid = getegid();

		if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0) {
			ab_err_set(err, -errno,
				   "cannot create a user namespace for the workspace: %s",
				   strerror(errno));
			return ab_err_fix(err, "%s",
					  c->host.apparmor_restrict_userns
						  ? "AppArmor restricts user namespaces: install "
						    "contrib/apparmor/agentbox (see README)"
						  : "enable unprivileged user namespaces "
						    "(sysctl user.max_user_namespaces > 0)");
		}
		r = write_proc_self("/proc/self/setgroups", "deny");
		if (r == 0) {
			snprintf(map, sizeof(map), "%u %u 1", (unsigned) uid, (unsigned) uid);
			r = write_proc_self("/proc/self/uid_map", map);
		}
		if (r == 0) {
			snprintf(map, sizeof(map), "%u %u 1", (unsigned) gid, (unsigned) gid);
			r = write_proc_self("/proc/self/gid_map", map);
		}
		if (r < 0)
			return ab_err_set(err, r, "map the user namespace: %s", strerror(-r));
	}
	/* Never propagate our mounts back to the host (systemd makes / shared). */
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return ab_err_set(err, -errno, "make mounts private: %s", strerror(errno));
	return 0;
}

int
ws_mount_workspace(struct run_ctx *c, struct ab_err *err)
{
	const char *mnt = c->rd.mnt_work;
	char opts[256];
	uid_t uid = c->drop ? c->sb_uid : geteuid();
	gid_t gid = c->drop ? c->sb_gid : getegid();

	snprintf(opts, sizeof(opts), "size=%llu,nr_inodes=%llu,mode=0700,uid=%u,gid=%u",
		 (unsigned long long) c->lp.work_bytes,
		 (unsigned long long) c->lp.work_inodes + 1, /* +1: the root directory */
		 (unsigned) uid, (unsigned) gid);
	if (mount("agentbox-work", mnt, "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0)
		return ab_err_set(err, -errno, "mount the workspace tmpfs: %s", strerror(errno));
	c->tmpfs_mounted = true;
	c->work_fd = open(mnt, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (c->work_fd < 0)
		return ab_err_set(err, -errno, "open the workspace: %s", strerror(errno));
	return 0;
}

/* The generated /etc on its own small tmpfs: the sandbox's mountinfo then shows no host
 * path for it (T35), and it disappears with our mount namespace. */
int
ws_mount_etc(struct run_ctx *c, struct ab_err *err)
{
	const char *dir = c->rd.mnt_etc;
	cleanup_fd int efd = -1;
	char opts[128];
	uid_t uid = c->drop ? c->sb_uid : geteuid();
	gid_t gid = c->drop ? c->sb_gid : getegid();

	snprintf(opts, sizeof(opts), "size=2m,nr_inodes=64,mode=0755,uid=%u,gid=%u", (unsigned) uid,
		 (unsigned) gid);
	if (mount("agentbox-etc", dir, "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0)
		return ab_err_set(err, -errno, "mount the sandbox /etc: %s", strerror(errno));
	c->etc_mounted = true;
	efd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (efd < 0)
		return ab_err_set(err, -errno, "open the sandbox /etc: %s", strerror(errno));
	c->plan.etc_src = xstrdup(dir);
	return etcgen_fill(efd, c->owner_uid, c->owner_gid, c->o->share_net, err);
}

/* Root callers: bind host paths the sandbox user may not be able to reach (an interpreter
 * under /root) onto RUNS/.mnt/ro/N (in our own mount namespace), which it can. */
int
ws_stage_ro_binds(struct run_ctx *c, struct ab_err *err)
{
	if (!c->drop || c->plan.n_ro_binds == 0)
		return 0;
	for (size_t i = 0; i < c->plan.n_ro_binds; i++) {
		char *staged = xasprintf("%s/%zu", c->rd.mnt_ro, i);

		if (mkdir(staged, 0755) < 0 && errno != EEXIST) {
			int e = errno;

			free(staged);
			return ab_err_set(err, -e, "create %s/%zu: %s", c->rd.mnt_ro, i,
					  strerror(e));
		}
		if (mount(c->plan.ro_binds[i].src, staged, NULL, MS_BIND | MS_REC, NULL) < 0) {
			int e = errno;

			free(staged);
			return ab_err_set(err, -e, "bind '%s' for the sandbox: %s",
					  c->plan.ro_binds[i].src, strerror(e));
		}
		free(c->plan.ro_binds[i].src);
		c->plan.ro_binds[i].src = staged;
	}
	return 0;
}

int
ws_open_script(struct run_ctx *c, struct ab_err *err)
{
	const char *s = c->o->script;
	struct stat st;
	int fd;

	fd = open(s, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;

		if (e == ENOENT) {
			ab_err_set(err, -e, "script '%s' does not exist", s);
			return ab_err_fix(err, "check the path");
		}
		if (e == ELOOP) {
			ab_err_set(err, -e, "script '%s' is a symlink", s);
			return ab_err_fix(err, "pass the file it points to");
		}
		ab_err_set(err, -e, "cannot open script '%s': %s", s, strerror(e));
		return ab_err_fix(err, "make it readable by you");
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		(void) close(fd);
		ab_err_set(err, -EINVAL, "script '%s' is not a regular file", s);
		return ab_err_fix(err, "pass a .py or .js file");
	}
	c->script_fd = fd;
	return 0;
}

static char *
base_name(const char *path)
{
	const char *slash = strrchr(path, '/');
	char *b = xstrdup(slash ? slash + 1 : path);

	return b;
}

/* --workspace: SCRIPT inside DIR runs in place; otherwise it is copied into DIR. */
int
ws_place_script(struct run_ctx *c, struct ab_err *err)
{
	char ws[PATH_MAX], sc[PATH_MAX];
	size_t l;
	int r;

	if (!realpath(c->o->workspace, ws) || !realpath(c->o->script, sc))
		return ab_err_set(err, -errno, "resolve the workspace: %s", strerror(errno));
	l = strlen(ws);
	if (strncmp(sc, ws, l) == 0 && sc[l] == '/') {
		c->script_name = xstrdup(sc + l + 1);
		return 0;
	}
	c->script_name = base_name(c->o->script);
	r = rundir_copy_file(c->script_fd, c->work_fd, c->script_name, (uid_t) -1, (gid_t) -1);
	if (r == -EEXIST) {
		ab_err_set(err, r, "'%s' already exists in the workspace", c->script_name);
		return ab_err_fix(err, "put the script inside the workspace directory and pass "
				       "that path");
	}
	if (r < 0)
		return ab_err_set(err, r, "copy the script into the workspace: %s", strerror(-r));
	return 0;
}

int
ws_copy_inputs(struct run_ctx *c, struct ab_err *err)
{
	uid_t ou = c->owner_uid;
	gid_t og = c->owner_gid;
	int r;

	c->script_name = base_name(c->o->script);
	r = rundir_copy_file(c->script_fd, c->work_fd, c->script_name, ou, og);
	if (r < 0) {
		ab_err_set(err, r, "copy the script into the workspace: %s", strerror(-r));
		return r == -ENOSPC ? ab_err_fix(err, "raise --disk") : r;
	}
	c->res->inputs = json_array();
	STRV_FOREACH (in, &c->o->inputs) {
		cleanup_fd int fd = -1;
		cleanup_free char *name = base_name(*in);
		struct stat st;

		/* O_PATH|O_NOFOLLOW: a symlink input is reported, never followed (T25). */
		fd = open(*in, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0) {
			ab_err_set(err, -errno, "--input '%s': %s", *in, strerror(errno));
			return ab_err_fix(err, "check the path");
		}
		if (fstat(fd, &st) < 0)
			return ab_err_set(err, -errno, "--input '%s': %s", *in, strerror(errno));
		if (name[0] == '\0' || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
			return ab_err_usage(err, "--input '%s' has no usable name", *in);
		if (S_ISREG(st.st_mode)) {
			cleanup_fd int rfd =
				open(*in, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);

			if (rfd < 0)
				return ab_err_set(err, -errno, "--input '%s': %s", *in,
						  strerror(errno));
			r = rundir_copy_file(rfd, c->work_fd, name, ou, og);
			if (r == -EEXIST)
				return ab_err_usage(err,
						    "--input '%s': the workspace already has "
						    "'%s'",
						    *in, name);
			if (r == -ENOSPC || r == -EFBIG) {
				ab_err_set(err, r, "--input '%s' does not fit in the workspace",
					   *in);
				return ab_err_fix(err, "raise --disk / --inodes");
			}
			if (r < 0)
				return ab_err_set(err, r, "--input '%s': %s", *in, strerror(-r));
			json_array_append_new(c->res->inputs,
					      json_pack("{s:s, s:s, s:I}", "path", *in, "type",
							"file", "bytes", (json_int_t) st.st_size));
		} else if (S_ISDIR(st.st_mode)) {
			cleanup_fd int dfd =
				open(*in, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			struct ab_walk_opts wo = {
				.max_entries = c->o->limits[AB_LIM_INODES].value,
				.max_file_bytes = c->o->limits[AB_LIM_DISK].value,
				.max_total_bytes = c->o->limits[AB_LIM_DISK].value,
				.hash_max_bytes = 1, /* no hashing on the way in */
				.chown_uid = ou,
				.chown_gid = og,
			};
			struct ab_manifest m = { 0 };
			cleanup_fd int sub = -1;
			json_t *skipped;

			if (dfd < 0)
				return ab_err_set(err, -errno, "--input '%s': %s", *in,
						  strerror(errno));
			if (mkdirat(c->work_fd, name, 0755) < 0)
				return ab_err_usage(err,
						    "--input '%s': cannot create '%s' in the "
						    "workspace: %s",
						    *in, name, strerror(errno));
			sub = openat(c->work_fd, name,
				     O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (sub < 0 || (ou != (uid_t) -1 && fchown(sub, ou, og) < 0))
				return ab_err_set(err, -errno, "--input '%s'", *in);
			wo.dst_dirfd = sub;
			r = walk_tree(dfd, &wo, &m, err);
			if (r < 0)
				return r;
			skipped = json_array();
			for (size_t i = 0; i < m.n; i++) {
				if (m.entries[i].collected || m.entries[i].type == AB_ENTRY_DIR)
					continue;
				cleanup_free char *esc = walk_escape_name(m.entries[i].path);

				json_array_append_new(
					skipped,
					json_pack("{s:s, s:s}", "path", esc ? esc : "?", "reason",
						  m.entries[i].reason ? m.entries[i].reason
								      : "not copied"));
			}
			json_array_append_new(c->res->inputs,
					      json_pack("{s:s, s:s, s:I, s:I, s:o, s:b}", "path",
							*in, "type", "dir", "bytes",
							(json_int_t) m.copied_bytes, "entries",
							(json_int_t) m.total_entries, "skipped",
							skipped, "truncated", m.truncated));
			if (json_array_size(skipped) > 0)
				result_warn(c->res,
					    "--input '%s': %zu entries not copied (see inputs)",
					    *in, json_array_size(skipped));
			manifest_done(&m);
		} else {
			json_array_append_new(c->res->inputs,
					      json_pack("{s:s, s:s, s:s}", "path", *in, "type",
							S_ISLNK(st.st_mode) ? "symlink" : "special",
							"skipped",
							"not a regular file or directory"));
			result_warn(c->res, "--input '%s' is a %s: not copied", *in,
				    S_ISLNK(st.st_mode) ? "symlink" : "special file");
		}
	}
	return 0;
}

/* nftw has no user pointer: the target of ws_give() */
static uid_t chown_to_uid;
static gid_t chown_to_gid;

static int
chown_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void) st;
	(void) flag;
	(void) ftw;
	/* lchown: never through a link */
	return lchown(path, chown_to_uid, chown_to_gid) < 0 ? -1 : 0;
}

/* --stdin FILE: the script gets a sealed in-memory copy, never the caller's fd: a directory fd
 * would open the host filesystem through /proc/self/fd/0/.., a terminal could be taken as a
 * controlling tty, and a file could be reopened for writing (T7, T29). */
int
ws_stdin_memfd(const char *path, uint64_t cap, int *ret, struct ab_err *err)
{
	cleanup_fd int src = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	cleanup_fd int mfd = -1;
	struct stat st;
	char buf[65536];
	uint64_t total = 0;
	ssize_t n;

	if (src < 0) {
		ab_err_set(err, -errno, "--stdin '%s': %s", path, strerror(errno));
		return ab_err_fix(err, "check the path");
	}
	if (fstat(src, &st) < 0 || !S_ISREG(st.st_mode)) {
		ab_err_set(err, -EINVAL, "--stdin '%s' is not a regular file", path);
		return ab_err_fix(err, "write the input to a file and pass that");
	}
	mfd = memfd_create("agentbox-stdin", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (mfd < 0)
		return ab_err_set(err, -errno, "memfd_create: %s", strerror(errno));
	while ((n = read(src, buf, sizeof(buf))) > 0) {
		total += (uint64_t) n;
		if (total > cap) {
			ab_err_set(err, -EFBIG, "--stdin '%s' is bigger than --disk", path);
			return ab_err_fix(err, "raise --disk, or pass the data with --input");
		}
		if (write_all(mfd, buf, (size_t) n) < 0)
			return ab_err_set(err, -errno, "copy --stdin: %s", strerror(errno));
	}
	if (n < 0)
		return ab_err_set(err, -errno, "read --stdin '%s': %s", path, strerror(errno));
	if (lseek(mfd, 0, SEEK_SET) < 0 ||
	    fcntl(mfd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) < 0)
		return ab_err_set(err, -errno, "seal --stdin: %s", strerror(errno));
	*ret = steal_fd(&mfd);
	return 0;
}

/* Post-run work runs outside every limit of the run, so it is bounded by totals for the whole
 * run (docs/design.md, "Post-run work is bounded"): one time budget and one hash budget shared
 * by the walk of the workspace and the --collect walk (the first gets half the time when there
 * is a second, so that it cannot starve it), and a listing cap for each. */
#define WS_POST_RUN_MS 60000
#define WS_HASH_BUDGET (512ULL << 20)
#define WS_LIST_BYTES  (8ULL << 20)
#define WS_HASH_MAX    (64ULL << 20)
#define WS_MAX_ENTRIES 100000

/* Says in the warnings what a cap cut from the walk `what`. */
static void
warn_walk(struct ab_result *res, const char *what, const struct ab_manifest *m)
{
	cleanup_free char *caps = walk_caps_text(m->truncated_caps & ~(unsigned) AB_CAP_HASH);

	if (m->truncated)
		result_warn(res,
			    "%s is incomplete: %s stopped it (%ju entries walked but not "
			    "listed; see files_summary)",
			    what, *caps ? caps : "a cap", (uintmax_t) m->unlisted);
	if (m->truncated_caps & AB_CAP_HASH)
		result_warn(res,
			    "%s: the hash budget (%llu MiB a run) is used up: %ju files have "
			    "no sha256 (flag over_cap)",
			    what, WS_HASH_BUDGET >> 20, (uintmax_t) m->unhashed);
}

int
ws_collect(struct run_ctx *c, struct ab_err *err)
{
	int64_t deadline = now_ms() + WS_POST_RUN_MS;
	struct ab_walk_opts wo = {
		.max_entries = WS_MAX_ENTRIES,
		.max_file_bytes = 0,
		.max_total_bytes = 0,
		.hash_max_bytes = WS_HASH_MAX,
		.hash_budget_bytes = WS_HASH_BUDGET,
		.max_list_bytes = WS_LIST_BYTES,
		.time_budget_ms = c->o->collect_dir ? WS_POST_RUN_MS / 2 : WS_POST_RUN_MS,
		.dst_dirfd = -1,
		.chown_uid = (uid_t) -1,
		.chown_gid = (gid_t) -1,
		.strip_uid = (uid_t) -1, /* idmapped --workspace: the uid its files map to */
	};
	struct ab_manifest m = { 0 };
	cleanup_fd int keep_fd = -1, coll_fd = -1;
	int r;

	if (c->tmpfs_mounted && !c->o->rm) {
		/* the kept copy: run/work, sanitized (regular files and directories only) */
		keep_fd = openat(c->rd.fd, "work", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (keep_fd < 0)
			return ab_err_set(err, -errno, "open %s/work", c->rd.path);
		wo.dst_dirfd = keep_fd;
		if (c->drop) {
			wo.chown_uid = c->sb_uid;
			wo.chown_gid = c->sb_gid;
		}
	}
	r = walk_tree(c->work_fd, &wo, &m, err);
	if (r < 0)
		return r;
	c->res->files = manifest_to_json(&m);
	c->res->files_summary = manifest_summary_json(&m);
	c->res->usage.workspace_bytes = (int64_t) m.total_bytes;
	c->res->usage.workspace_entries = (int64_t) m.total_entries;
	warn_walk(c->res, "the workspace listing", &m);

	if (c->o->collect_dir) {
		struct ab_walk_opts co = wo;
		struct ab_manifest cm = { 0 };
		int64_t left = deadline - now_ms();
		size_t skipped = 0;

		if (mkdir(c->o->collect_dir, 0755) < 0 && errno != EEXIST) {
			r = ab_err_set(err, -errno, "--collect '%s': %s", c->o->collect_dir,
				       strerror(errno));
			goto out;
		}
		coll_fd = open(c->o->collect_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (coll_fd < 0) {
			r = ab_err_set(err, -errno, "--collect '%s': %s", c->o->collect_dir,
				       strerror(errno));
			goto out;
		}
		co.dst_dirfd = coll_fd;
		co.chown_uid = (uid_t) -1;
		co.chown_gid = (gid_t) -1;
		co.max_file_bytes = c->o->limits[AB_LIM_FILE_SIZE].value;
		co.max_total_bytes = c->o->limits[AB_LIM_DISK].value;
		/* the same files: take their hashes instead of reading them again, and spend
		 * only what is left of the run's budgets (1 rather than 0, the default) */
		co.hashes_from = &m;
		co.hash_budget_bytes =
			WS_HASH_BUDGET > m.hashed_bytes ? WS_HASH_BUDGET - m.hashed_bytes : 1;
		co.time_budget_ms = left > 0 ? (uint64_t) left : 1;
		r = walk_tree(c->work_fd, &co, &cm, err);
		if (r < 0)
			goto out;
		for (size_t i = 0; i < cm.n; i++)
			if (!cm.entries[i].collected)
				skipped++;
		c->res->collected = json_pack(
			"{s:s, s:I, s:I, s:o, s:o}", "dir", c->o->collect_dir, "bytes",
			(json_int_t) cm.copied_bytes, "skipped_count", (json_int_t) skipped,
			"files", manifest_to_json(&cm), "summary", manifest_summary_json(&cm));
		warn_walk(c->res, "--collect", &cm);
		manifest_done(&cm);
	}
	r = 0;
out:
	manifest_done(&m);
	return r;
}

void
ws_cleanup(struct run_ctx *c)
{
	/* The workspace and /etc tmpfs (and staged --ro-bind sources) stay mounted on RUNS/.mnt
	 * in our own mount namespace until we exit: the namespace goes with us, and one
	 * teardown (one RCU grace period) is cheaper than an umount(2) each. Nothing outside
	 * this process ever sees them. */
	if (c->work_fd >= 0) {
		(void) close(c->work_fd);
		c->work_fd = -1;
	}
	if (c->cg_made) {
		(void) cg_destroy(&c->cg);
		c->cg_made = false;
	}
}

int
ws_give(const char *path, uid_t uid, gid_t gid, struct ab_err *err)
{
	chown_to_uid = uid;
	chown_to_gid = gid;
	/* FTW_PHYS: never through a link; FTW_MOUNT: stay on one filesystem */
	if (nftw(path, chown_one, 64, FTW_PHYS | FTW_MOUNT) != 0)
		return ab_err_set(err, -errno, "give the workspace to uid %u: %s", (unsigned) uid,
				  strerror(errno));
	return 0;
}

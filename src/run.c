#include "run.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/time.h>
#include <sys/wait.h>

#include "binds.h"
#include "bwargv.h"
#include "cgroup.h"
#include "config.h"
#include "etcgen.h"
#include "host.h"
#include "interp.h"
#include "limitplan.h"
#include "plan.h"
#include "prepare.h"
#include "rundir.h"
#include "seccomp.h"
#include "supervise.h"
#include "units.h"
#include "util/fdutil.h"
#include "util/macro.h"
#include "util/xalloc.h"
#include "walk.h"

#define AB_DEFAULT_SANDBOX_ID 64000

struct run_ctx {
	struct ab_run_opts *o;
	struct ab_result *res;
	struct ab_host host;
	struct ab_plan plan;
	struct ab_rundir rd;
	struct ab_limits_plan lp;
	struct ab_cg cg;
	bool cg_made;
	bool drop; /* root caller: the sandbox runs as sb_uid */
	uid_t sb_uid;
	gid_t sb_gid;
	uid_t owner_uid; /* owner for files we create for the sandbox, or -1 */
	gid_t owner_gid;
	bool mntns;         /* we are in our private mount namespace */
	bool tmpfs_mounted; /* run/mnt is the capped tmpfs */
	bool etc_mounted;   /* run/etc is the /etc tmpfs */
	bool ro_staged;     /* run/ro/N hold staged read-only binds (root callers) */
	int work_fd;        /* the live workspace (tmpfs or --workspace DIR) */
	int script_fd;
	int seccomp_fd;
	int stdin_fd;
	char *script_name; /* basename, or the path relative to --workspace */
};

/* ---- identity ---------------------------------------------------------------------- */

/* Looks a user up in /etc/passwd itself (fgetpwent: no NSS modules to load; the sandbox
 * user is a local system account). Returns true and fills uid/gid when found. */
static bool
passwd_lookup(const char *name, uid_t *ret_uid, gid_t *ret_gid)
{
	FILE *f = fopen("/etc/passwd", "re");
	struct passwd *pw;
	bool found = false;

	if (!f)
		return false;
	while ((pw = fgetpwent(f))) {
		if (strcmp(pw->pw_name, name) == 0) {
			*ret_uid = pw->pw_uid;
			*ret_gid = pw->pw_gid;
			found = true;
			break;
		}
	}
	fclose(f);
	return found;
}

int
run_sandbox_user(const char *spec, uid_t *ret_uid, gid_t *ret_gid, struct ab_err *err)
{
	char *end;
	unsigned long u, g;

	if (!spec) {
		if (!passwd_lookup("agentbox", ret_uid, ret_gid)) {
			*ret_uid = AB_DEFAULT_SANDBOX_ID;
			*ret_gid = AB_DEFAULT_SANDBOX_ID;
		}
	} else if (spec[0] >= '0' && spec[0] <= '9') {
		errno = 0;
		u = strtoul(spec, &end, 10);
		g = u;
		if (*end == ':')
			g = strtoul(end + 1, &end, 10);
		if (errno || *end || u > 0x7fffffffUL || g > 0x7fffffffUL)
			return ab_err_usage(
				err, "invalid --sandbox-user '%s': expected NAME or UID[:GID]",
				spec);
		*ret_uid = (uid_t) u;
		*ret_gid = (gid_t) g;
	} else if (!passwd_lookup(spec, ret_uid, ret_gid)) {
		ab_err_set(err, -ENOENT, "--sandbox-user '%s' is not in /etc/passwd", spec);
		return ab_err_fix(err, "create it (useradd --system %s) or pass a UID", spec);
	}
	if (*ret_uid == 0 || *ret_gid == 0) {
		ab_err_set(err, -EPERM, "the sandbox user must not be root (uid/gid 0)");
		return ab_err_fix(err, "pass --sandbox-user with an unprivileged user");
	}
	return 0;
}

/* ---- the private mount namespace ---------------------------------------------------- */

static int
write_proc_self(const char *file, const char *text)
{
	return write_small_file_at(AT_FDCWD, file, text);
}

/* Root: a private mount namespace. Unprivileged: a user namespace mapping only ourselves,
 * plus a mount namespace. Either way our mounts (the workspace tmpfs) die with this process,
 * also when it is SIGKILLed: nothing to unmount, nothing to leak. */
static int
enter_mntns(struct run_ctx *c, struct ab_err *err)
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
	c->mntns = true;
	return 0;
}

static int
mount_workspace(struct run_ctx *c, struct ab_err *err)
{
	cleanup_free char *mnt = xasprintf("%s/mnt", c->rd.path);
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
static int
mount_etc(struct run_ctx *c, struct ab_err *err)
{
	cleanup_free char *dir = xasprintf("%s/etc", c->rd.path);
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
	/* agentbox-init from a build tree: copy it here (~0.2 ms), so its host path (which may
	 * carry a user or project name) does not show in the sandbox's mountinfo either (T35).
	 * Installed under /usr it is bound as it is. */
	if (strncmp(c->host.init_path, "/usr/", 5) != 0) {
		cleanup_fd int ifd = open(c->host.init_path, O_RDONLY | O_CLOEXEC);
		int r = ifd < 0 ? -errno
				: rundir_copy_file(ifd, efd, ".agentbox-init", c->owner_uid,
						   c->owner_gid);

		if (r < 0)
			return ab_err_set(err, r, "copy agentbox-init: %s", strerror(-r));
		free(c->plan.init_src);
		c->plan.init_src = xasprintf("%s/.agentbox-init", dir);
	}
	return etcgen_fill(efd, c->owner_uid, c->owner_gid, c->o->share_net, &c->plan.host_etc,
			   err);
}

/* Root callers: bind host paths the sandbox user may not be able to reach (an interpreter
 * under /root) onto run/ro/N, which it can. */
static int
stage_ro_binds(struct run_ctx *c, struct ab_err *err)
{
	if (!c->drop || c->plan.n_ro_binds == 0)
		return 0;
	if (mkdirat(c->rd.fd, "ro", 0755) < 0 && errno != EEXIST)
		return ab_err_set(err, -errno, "create %s/ro", c->rd.path);
	if (fchownat(c->rd.fd, "ro", c->sb_uid, c->sb_gid, AT_SYMLINK_NOFOLLOW) < 0)
		return ab_err_set(err, -errno, "chown %s/ro", c->rd.path);
	c->ro_staged = true;
	for (size_t i = 0; i < c->plan.n_ro_binds; i++) {
		char name[32];
		char *staged;

		snprintf(name, sizeof(name), "ro/%zu", i);
		if (mkdirat(c->rd.fd, name, 0755) < 0)
			return ab_err_set(err, -errno, "create %s/%s", c->rd.path, name);
		staged = xasprintf("%s/%s", c->rd.path, name);
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

/* ---- inputs ---------------------------------------------------------------------------- */

static int
open_script(struct run_ctx *c, struct ab_err *err)
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
static int
place_script_in_workspace(struct run_ctx *c, struct ab_err *err)
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

static int
copy_inputs(struct run_ctx *c, struct ab_err *err)
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
static int
stdin_memfd(const char *path, uint64_t cap, int *ret, struct ab_err *err)
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

/* ---- the environment ------------------------------------------------------------------ */

static void
build_env(struct run_ctx *c)
{
	struct strv *e = &c->plan.env;
	const char *path = "/usr/local/bin:/usr/bin:/bin";
	cleanup_free char *interp_dir = xstrdup(c->plan.interp);
	char *slash = strrchr(interp_dir, '/');

	*slash = '\0';
	if (strcmp(interp_dir, "/usr/bin") != 0 && strcmp(interp_dir, "/usr/local/bin") != 0)
		strv_pushf(e, "PATH=%s:%s", interp_dir, path);
	else
		strv_pushf(e, "PATH=%s", path);
	if (c->plan.venv)
		strv_pushf(e, "VIRTUAL_ENV=%s", c->plan.venv);
	strv_push(e, "HOME=" AB_SANDBOX_WORK);
	strv_push(e, "TMPDIR=/tmp");
	strv_push(e, "LANG=C.UTF-8");
	strv_push(e, "PYTHONDONTWRITEBYTECODE=1");
	STRV_FOREACH (kv, &c->o->env)
		strv_push(e, *kv);
}

/* ---- outcome ---------------------------------------------------------------------------- */

static void
interpret(struct run_ctx *c, const struct ab_outcome *oc, const struct ab_cg_usage *u)
{
	struct ab_result *res = c->res;
	int ws = oc->script_wstatus;

	res->wall_ms = oc->wall_ms;
	res->cpu_ms = (oc->ru.ru_utime.tv_sec + oc->ru.ru_stime.tv_sec) * 1000LL +
		      (oc->ru.ru_utime.tv_usec + oc->ru.ru_stime.tv_usec) / 1000;
	res->max_rss_kib = oc->ru.ru_maxrss;
	if (oc->script_done) {
		if (WIFEXITED(ws))
			res->exit_code = WEXITSTATUS(ws);
		else if (WIFSIGNALED(ws))
			res->signal = WTERMSIG(ws);
	} else if (oc->timed_out || oc->output_limited || oc->cpu_time_limited ||
		   oc->interrupted_by) {
		res->signal = SIGKILL;
	}
	if (u && u->valid) {
		res->usage.memory_peak_bytes = (int64_t) u->memory_peak_bytes;
		res->usage.oom_kills = (int64_t) u->oom_kills;
		res->usage.pids_refused = (int64_t) u->pids_max_events;
		res->usage.cpu_ms = (int64_t) (u->cpu_usec / 1000);
		if (u->pids_peak) /* minus bwrap's monitor, which is outside the sandbox */
			res->usage.tasks_peak = (int64_t) u->pids_peak - 1;
	} else {
		res->usage.cpu_ms = res->cpu_ms;
	}

	if (oc->interrupted_by) {
		res->status = AB_STATUS_INTERRUPTED;
		res->message = xasprintf("agentbox got %s and stopped the run",
					 sigabbrev_np(oc->interrupted_by)
						 ? sigabbrev_np(oc->interrupted_by)
						 : "a signal");
	} else if (oc->timed_out) {
		res->status = AB_STATUS_TIMEOUT;
		strv_push(&res->limits_hit, "timeout");
		res->message = xasprintf("wall-clock limit of %llu ms reached; the run was killed",
					 (unsigned long long) c->lp.timeout_ms);
	} else if (oc->output_limited) {
		res->status = AB_STATUS_OUTPUT_LIMIT;
		strv_push(&res->limits_hit, "output-limit");
		res->message = xasprintf("output passed --output-limit (%llu bytes per stream); "
					 "the run was stopped",
					 (unsigned long long) c->lp.output_bytes);
	} else if (oc->cpu_time_limited ||
		   (res->signal == SIGXCPU && c->lp.cpu_s != RLIM_INFINITY)) {
		/* Without a cgroup only SIGXCPU is evidence: RLIMIT_CPU is per process, and the
		 * run's summed CPU time says nothing about any one process. */
		res->status = AB_STATUS_CPU_TIME_LIMIT;
		strv_push(&res->limits_hit, "cpu-time");
		res->message = xasprintf("CPU-time limit of %llu ms reached",
					 (unsigned long long) c->lp.cpu_time_ms);
	} else if (u && u->valid && u->oom_kills > 0) {
		res->status = AB_STATUS_OOM;
		strv_push(&res->limits_hit, "memory");
		res->message = xasprintf("memory limit reached: %llu process(es) OOM-killed",
					 (unsigned long long) u->oom_kills);
	} else if (u && u->valid && u->pids_max_events > 0) {
		res->status = AB_STATUS_PIDS_LIMIT;
		strv_push(&res->limits_hit, "pids");
		res->message = xasprintf("task limit reached: %llu fork(s) refused",
					 (unsigned long long) u->pids_max_events);
	} else if (res->signal == SIGXFSZ) {
		res->status = AB_STATUS_FILE_SIZE_LIMIT;
		strv_push(&res->limits_hit, "file-size");
		res->message = xstrdup("a file write went past --file-size (SIGXFSZ)");
	} else if (oc->init_exec_failed) {
		res->status = AB_STATUS_EXEC_FAILED;
		res->message = xasprintf("the interpreter '%s' could not be started in the "
					 "sandbox: %s",
					 c->plan.interp, strerror(oc->init_errno));
	} else if (oc->script_done && WIFEXITED(ws) && WEXITSTATUS(ws) == 127 && res->err.buf &&
		   memmem(res->err.buf, res->err.len, "error while loading shared libraries", 36)) {
		/* the dynamic loader could not start the interpreter in the sandbox */
		const char *p = memmem(res->err.buf, res->err.len, "libraries: ", 11);
		size_t n = 0;

		if (p) {
			p += 11;
			while (p + n < res->err.buf + res->err.len && p[n] != ':' && p[n] != '\n' &&
			       n < 200)
				n++;
		}
		res->status = AB_STATUS_EXEC_FAILED;
		res->message =
			xasprintf("the interpreter '%s' cannot start in the sandbox: it needs "
				  "'%.*s', which is not visible there",
				  c->plan.interp, (int) n, p ? p : "?");
		res->fix = xstrdup("install the library under /usr, or mount its directory with "
				   "--ro-bind");
	} else if (oc->script_done && WIFSIGNALED(ws)) {
		res->status = AB_STATUS_SIGNALED;
	} else if (oc->script_done) {
		res->status = AB_STATUS_EXITED;
	} else {
		res->status = AB_STATUS_SETUP_ERROR;
	}
	/* The workspace full is evidence even when the script coped with ENOSPC. */
	if (c->tmpfs_mounted) {
		struct statfs sf;

		if (fstatfs(c->work_fd, &sf) == 0 && (sf.f_bfree == 0 || sf.f_ffree == 0)) {
			strv_push(&res->limits_hit, sf.f_bfree == 0 ? "disk" : "inodes");
			if (res->status == AB_STATUS_EXITED || res->status == AB_STATUS_SIGNALED) {
				res->status = AB_STATUS_DISK_LIMIT;
				free(res->message);
				res->message = xasprintf("the workspace is full (%s limit reached)",
							 sf.f_bfree == 0 ? "--disk" : "--inodes");
			}
		}
	}
}

void
run_maybe_reexec_in_scope(int argc, char **argv, const struct ab_run_opts *o)
{
	static const char *const candidates[] = { "/usr/bin/systemd-run", "/bin/systemd-run",
						  NULL };
	const char *runtime = getenv("XDG_RUNTIME_DIR");
	const char *systemd_run = NULL;
	struct ab_cg_host h;
	struct statfs sf;
	static char self_exe[PATH_MAX];
	char **nargv;
	int n = 0;

	if (getenv("AGENTBOX_IN_SCOPE") || getenv("AGENTBOX_NO_SYSTEMD_SCOPE") || geteuid() == 0 ||
	    o->without[AB_PROT_CGROUP] || o->dry_run)
		return;
	/* only on a pure cgroup v2 host whose user manager we can reach */
	if (statfs("/sys/fs/cgroup", &sf) < 0 || sf.f_type != CGROUP2_SUPER_MAGIC || !runtime)
		return;
	{
		cleanup_free char *bus = xasprintf("%s/bus", runtime);

		if (access(bus, F_OK) != 0)
			return;
	}
	for (const char *const *c = candidates; *c && !systemd_run; c++)
		if (access(*c, X_OK) == 0)
			systemd_run = *c;
	if (!systemd_run || cg_probe(NULL, NULL, &h) < 0 || h.kind != AB_CG_NONE)
		return;
	/* systemd-run --scope moves this very process into a new delegated scope and execs
	 * agentbox again there; cg_probe then finds its own cgroup writable. */
	nargv = xcalloc((size_t) argc + 12, sizeof(char *));
	nargv[n++] = (char *) "systemd-run";
	nargv[n++] = (char *) "--user";
	nargv[n++] = (char *) "--scope";
	nargv[n++] = (char *) "--quiet";
	nargv[n++] = (char *) "--collect";
	nargv[n++] = (char *) "-p";
	nargv[n++] = (char *) "Delegate=yes";
	nargv[n++] = (char *) "--";
	/* our own binary by absolute path: /proc/self/exe would be systemd-run by then */
	{
		ssize_t l = readlink("/proc/self/exe", self_exe, sizeof(self_exe) - 1);

		if (l <= 0) {
			free(nargv);
			return;
		}
		self_exe[l] = '\0';
	}
	nargv[n++] = self_exe;
	for (int i = 1; i < argc; i++)
		nargv[n++] = argv[i];
	nargv[n] = NULL;
	if (setenv("AGENTBOX_IN_SCOPE", "1", 1) == 0)
		execv(systemd_run, nargv);
	/* could not: carry on without a cgroup (the limits report says what is missing) */
	(void) unsetenv("AGENTBOX_IN_SCOPE");
	free(nargv);
}

int
run_exit_code(const struct ab_result *res)
{
	switch (res->status) {
	case AB_STATUS_USAGE_ERROR:
		return AB_EXIT_USAGE;
	case AB_STATUS_SETUP_ERROR:
	case AB_STATUS_DRY_RUN:
		return res->status == AB_STATUS_DRY_RUN ? 0 : AB_EXIT_SETUP;
	case AB_STATUS_TIMEOUT:
		return AB_EXIT_TIMEOUT;
	case AB_STATUS_INTERRUPTED:
		return 130;
	case AB_STATUS_EXEC_FAILED:
		return res->exit_code == AB_EXIT_NOT_FOUND ? AB_EXIT_NOT_FOUND
							   : AB_EXIT_CANNOT_EXEC;
	case AB_STATUS_EXITED:
	case AB_STATUS_SIGNALED:
	case AB_STATUS_OOM:
	case AB_STATUS_PIDS_LIMIT:
	case AB_STATUS_CPU_TIME_LIMIT:
	case AB_STATUS_DISK_LIMIT:
	case AB_STATUS_FILE_SIZE_LIMIT:
	case AB_STATUS_OUTPUT_LIMIT:
	case AB_STATUS_COUNT:
	default:
		if (res->signal > 0)
			return 128 + res->signal;
		if (res->exit_code >= 0)
			return res->exit_code;
		return AB_EXIT_SETUP;
	}
}

/* ---- the run ---------------------------------------------------------------------------- */

static int
check_protections(struct run_ctx *c, struct ab_err *err)
{
	struct ab_host *h = &c->host;
	struct ab_result *res = c->res;

	if (!h->bwrap_runs) {
		ab_err_set(err, -EPERM, "bubblewrap cannot create a sandbox here: %s",
			   h->bwrap_error[0] ? h->bwrap_error : "unknown error");
		if (h->apparmor_restrict_userns)
			return ab_err_fix(err, "AppArmor restricts unprivileged user namespaces: "
					       "install contrib/apparmor/agentbox (see README)");
		return ab_err_fix(err, "enable unprivileged user namespaces (sysctl "
				       "kernel.unprivileged_userns_clone=1, "
				       "user.max_user_namespaces > 0); run `agentbox doctor`");
	}
	if (!h->proc_mountable) {
		ab_err_set(err, -EPERM,
			   "bubblewrap cannot mount a fresh /proc here (a container "
			   "without a /proc it may remount?)");
		return ab_err_fix(err, "run agentbox outside the container or give the container "
				       "an unmasked /proc; run `agentbox doctor`");
	}
	if (!h->has_disable_userns && !c->o->without[AB_PROT_DISABLE_USERNS]) {
		ab_err_set(err, -ENOTSUP,
			   "this bwrap cannot disable nested user namespaces "
			   "(--disable-userns)");
		return ab_err_fix(err, "install bubblewrap >= 0.8, or pass --without "
				       "disable-userns");
	}
	if (h->landlock_abi <= 0 && !c->o->without[AB_PROT_LANDLOCK]) {
		ab_err_set(err, -ENOTSUP,
			   "this kernel has no Landlock (needs Linux >= 5.13 with "
			   "CONFIG_SECURITY_LANDLOCK and lsm=landlock)");
		return ab_err_fix(err, "boot with landlock in lsm=, or pass --without landlock");
	}
	c->plan.disable_userns = h->has_disable_userns && !c->o->without[AB_PROT_DISABLE_USERNS];
	c->plan.landlock = h->landlock_abi > 0 && !c->o->without[AB_PROT_LANDLOCK];
	c->plan.landlock_net = c->plan.landlock && h->landlock_abi >= 4 && !c->o->share_net;
	c->plan.landlock_scope = c->plan.landlock && h->landlock_abi >= 6;
	c->plan.share_net = c->o->share_net;
	if (c->o->rw_bind)
		c->plan.rw_bind = xstrdup(c->o->rw_bind);
	c->plan.seccomp = !c->o->without[AB_PROT_SECCOMP];
	(void) res;
	return 0;
}

static void
record_protections(struct run_ctx *c, const struct ab_outcome *oc)
{
	struct ab_result *r = c->res;
	const struct ab_plan *p = &c->plan;

	result_protect(r, "namespaces", true, "user, mount, pid, net, ipc, uts, cgroup");
	if (p->share_net)
		result_protect(r, "network", false, "host network kept (agentbox prepare)");
	else
		result_protect(r, "network", true, "own network namespace: loopback only");
	result_protect(r, "readonly_base", true, "/usr and generated /etc read-only; / read-only");
	result_protect(r, "writable", true, "only /work (%s), /tmp and /dev/shm",
		       c->tmpfs_mounted ? "capped tmpfs" : "--workspace bind");
	result_protect(r, "new_session", true, "no controlling terminal (TIOCSTI)");
	result_protect(r, "die_with_parent", true, NULL);
	result_protect(r, "cap_drop_all", true, NULL);
	result_protect(r, "clearenv", true, "%zu variables", p->env.n);
	result_protect(r, "disable_userns", p->disable_userns,
		       p->disable_userns ? NULL
					 : (c->o->without[AB_PROT_DISABLE_USERNS]
						    ? "opted out with --without disable-userns"
						    : "bwrap lacks --disable-userns"));
	result_protect(r, "seccomp", p->seccomp, "policy %s%s",
		       seccomp_policy_name(c->o->seccomp_policy),
		       p->seccomp ? "" : " (opted out with --without seccomp)");
	if (p->landlock)
		result_protect(r, "landlock", oc && oc->init_started && oc->landlock_abi > 0,
			       "ABI %d%s%s", oc ? oc->landlock_abi : 0,
			       p->landlock_net ? ", TCP bind/connect denied" : "",
			       p->landlock_scope ? ", abstract sockets and signals scoped" : "");
	else
		result_protect(r, "landlock", false, "%s",
			       c->o->without[AB_PROT_LANDLOCK] ? "opted out with --without landlock"
							       : "kernel has no Landlock");
	result_protect(r, "fresh_keyring", true, "new anonymous session keyring");
	result_protect(r, "no_host_root", !c->host.is_root || c->drop,
		       c->host.is_root ? "started as root: runs as uid %u" : "runs as uid %u",
		       (unsigned) (c->drop ? c->sb_uid : geteuid()));
	result_protect(r, "pid1_nondumpable", oc && oc->init_started, "agentbox-init is PID 1");
	result_protect(r, "cgroup", c->cg_made, "%s",
		       c->cg_made
			       ? (c->host.cg.kind == AB_CG_V2 ? "cgroup v2" : "cgroup v1")
			       : (c->o->without[AB_PROT_CGROUP] ? "opted out with --without cgroup"
								: c->host.cg.why));
}

static int
collect_workspace(struct run_ctx *c, struct ab_err *err)
{
	struct ab_walk_opts wo = {
		.max_entries = 100000,
		.max_file_bytes = 0,
		.max_total_bytes = 0,
		.hash_max_bytes = 64ULL << 20,
		.dst_dirfd = -1,
		.chown_uid = (uid_t) -1,
		.chown_gid = (gid_t) -1,
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
	c->res->usage.workspace_bytes = (int64_t) m.total_bytes;
	c->res->usage.workspace_entries = (int64_t) m.total_entries;
	if (m.truncated)
		result_warn(c->res, "the workspace listing is incomplete: %s stopped it",
			    m.truncated_by ? m.truncated_by : "a cap");
	manifest_done(&m);

	if (c->o->collect_dir) {
		struct ab_walk_opts co = wo;
		struct ab_manifest cm = { 0 };
		size_t skipped = 0;

		if (mkdir(c->o->collect_dir, 0755) < 0 && errno != EEXIST)
			return ab_err_set(err, -errno, "--collect '%s': %s", c->o->collect_dir,
					  strerror(errno));
		coll_fd = open(c->o->collect_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (coll_fd < 0)
			return ab_err_set(err, -errno, "--collect '%s': %s", c->o->collect_dir,
					  strerror(errno));
		co.dst_dirfd = coll_fd;
		co.chown_uid = (uid_t) -1;
		co.chown_gid = (gid_t) -1;
		co.max_file_bytes = c->o->limits[AB_LIM_FILE_SIZE].value;
		co.max_total_bytes = c->o->limits[AB_LIM_DISK].value;
		r = walk_tree(c->work_fd, &co, &cm, err);
		if (r < 0)
			return r;
		for (size_t i = 0; i < cm.n; i++)
			if (!cm.entries[i].collected)
				skipped++;
		c->res->collected =
			json_pack("{s:s, s:I, s:I, s:o}", "dir", c->o->collect_dir, "bytes",
				  (json_int_t) cm.copied_bytes, "skipped_count",
				  (json_int_t) skipped, "files", manifest_to_json(&cm));
		manifest_done(&cm);
	}
	return 0;
}

static void
cleanup_run(struct run_ctx *c)
{
	/* read-only binds staged for the sandbox user (root callers) */
	for (size_t i = 0; c->ro_staged && i < c->plan.n_ro_binds; i++) {
		char name[PATH_MAX];

		snprintf(name, sizeof(name), "%s/ro/%zu", c->rd.path, i);
		(void) umount2(name, MNT_DETACH);
		snprintf(name, sizeof(name), "ro/%zu", i);
		(void) unlinkat(c->rd.fd, name, AT_REMOVEDIR);
	}
	if (c->ro_staged) {
		(void) unlinkat(c->rd.fd, "ro", AT_REMOVEDIR);
		c->ro_staged = false;
	}
	if (c->etc_mounted) {
		cleanup_free char *etc = xasprintf("%s/etc", c->rd.path);

		if (umount2(etc, MNT_DETACH) == 0)
			c->etc_mounted = false;
		(void) unlinkat(c->rd.fd, "etc", AT_REMOVEDIR);
	}
	if (c->tmpfs_mounted) {
		cleanup_free char *mnt = xasprintf("%s/mnt", c->rd.path);

		if (c->work_fd >= 0) {
			(void) close(c->work_fd);
			c->work_fd = -1;
		}
		if (umount2(mnt, MNT_DETACH) == 0)
			c->tmpfs_mounted = false;
		(void) unlinkat(c->rd.fd, "mnt", AT_REMOVEDIR);
	}
	if (c->cg_made) {
		(void) cg_destroy(&c->cg);
		c->cg_made = false;
	}
}

int
run_main(struct ab_run_opts *o, struct ab_result *res, struct ab_err *err)
{
	struct run_ctx c = {
		.o = o, .res = res, .work_fd = -1, .script_fd = -1, .seccomp_fd = -1, .stdin_fd = -1
	};
	struct ab_outcome oc = { 0 };
	struct ab_cg_usage usage = { 0 };
	struct strv av = { 0 }, cmd = { 0 };
	cleanup_free char *args = NULL;
	cleanup_free char *root_path = NULL;
	cleanup_free char *env_venv = NULL, *env_nm = NULL, *cache_path = NULL;
	cleanup_fd int cache_fd = -1;
	size_t args_len = 0;
	struct timespec ts;
	int r;

	clock_gettime(CLOCK_REALTIME, &ts);
	res->started_unix_ms = ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
	res->script = xstrdup(o->script);
	rundir_init(&c.rd);
	for (int i = 0; i < 4; i++)
		c.cg.dirfd[i] = c.cg.procs_fd[i] = -1;

	timing_mark("start");
	r = host_probe_paths(&c.host, err);
	if (r < 0)
		goto out;
	c.owner_uid = (uid_t) -1;
	c.owner_gid = (gid_t) -1;
	if (c.host.is_root) {
		r = run_sandbox_user(o->sandbox_user, &c.sb_uid, &c.sb_gid, err);
		if (r < 0)
			goto out;
		c.drop = true;
		c.owner_uid = c.sb_uid;
		c.owner_gid = c.sb_gid;
		res->sandbox_host_uid = c.sb_uid;
	} else {
		res->sandbox_host_uid = geteuid();
	}

	timing_mark("host paths probed");
	r = open_script(&c, err);
	if (r < 0)
		goto out;
	r = interp_detect_lang(o->script, c.script_fd, o->lang, &c.plan.lang, err);
	if (r < 0)
		goto out;
	res->lang = c.plan.lang;
	if (o->env_dir) {
		r = prepare_lookup(o->env_dir, NULL, &env_venv, &env_nm, err);
		if (r < 0)
			goto out;
		if (env_venv && c.plan.lang != AB_LANG_PYTHON) {
			r = ab_err_usage(err,
					 "--env-dir '%s' is a Python environment but the script "
					 "is %s",
					 o->env_dir, interp_lang_name(c.plan.lang));
			goto out;
		}
		if (env_nm && c.plan.lang != AB_LANG_NODE) {
			r = ab_err_usage(err,
					 "--env-dir '%s' is a Node environment but the script "
					 "is %s",
					 o->env_dir, interp_lang_name(c.plan.lang));
			goto out;
		}
		if (env_venv)
			o->venv = env_venv;
		if (env_nm)
			o->node_modules = env_nm;
	}
	r = interp_resolve(o, c.plan.lang, &c.plan, err);
	if (r < 0)
		goto out;
	res->interpreter = xstrdup(c.plan.interp);
	STRV_FOREACH (spec, &o->ro_binds) {
		r = binds_add_user(&c.plan, *spec, &o->allow_binds, err);
		if (r < 0)
			goto out;
	}
	if (!c.host.bwrap_path[0]) {
		if (getenv("AGENTBOX_BWRAP")) {
			r = ab_err_set(err, -ENOENT,
				       "AGENTBOX_BWRAP='%s' is not an executable bwrap",
				       getenv("AGENTBOX_BWRAP"));
			ab_err_fix(err, "unset AGENTBOX_BWRAP or point it at bwrap");
		} else {
			r = ab_err_set(err, -ENOENT, "bubblewrap (bwrap) is not installed");
			ab_err_fix(err, "apt-get install bubblewrap");
		}
		goto out;
	}
	if (!c.host.init_path[0]) {
		r = ab_err_set(err, -ENOENT,
			       "agentbox-init was not found next to agentbox or in %s",
			       AB_LIBEXECDIR);
		ab_err_fix(err, "reinstall agentbox (meson install), or set AGENTBOX_INIT");
		goto out;
	}
	if (o->stdin_path) {
		r = stdin_memfd(o->stdin_path, o->limits[AB_LIM_DISK].value, &c.stdin_fd, err);
		if (r < 0)
			goto out;
	}

	timing_mark("interpreter resolved");
	/* The runs root and a fresh run directory. */
	root_path = o->runs_dir ? xstrdup(o->runs_dir) : rundir_default_root(geteuid());
	r = rundir_open_root(root_path, c.host.is_root, &c.rd, err);
	if (r < 0)
		goto out;
	r = rundir_create(&c.rd, c.owner_uid, c.owner_gid, err);
	if (r < 0)
		goto out;
	res->run_dir = xstrdup(c.rd.path);
	res->run_dir_kept = true;

	timing_mark("run dir created");
	/* Probe the sandbox as the sandbox user; the result is cached per bwrap and boot. */
	cache_path = xasprintf("%s/.cache", c.rd.root);
	if (mkdir(cache_path, 0700) < 0 && errno != EEXIST)
		result_warn(res, "cannot create the cache '%s': %s", cache_path, strerror(errno));
	cache_fd = open(cache_path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	(void) host_probe_sandbox_cached(&c.host, c.drop, c.sb_uid, c.sb_gid, cache_fd);
	r = check_protections(&c, err);
	if (r < 0)
		goto out;
	if (c.host.cg.kind != AB_CG_NONE && !o->without[AB_PROT_CGROUP])
		(void) cg_sweep_stale(&c.host.cg, "/proc");

	timing_mark("sandbox probed");
	r = limits_plan(o, &c.host, o->workspace == NULL, !c.host.is_root, &c.lp, res, err);
	if (r < 0)
		goto out;
	c.plan.tmp_size = c.lp.tmp_bytes;

	if (c.plan.seccomp) {
		c.seccomp_fd = seccomp_program_fd(o->seccomp_policy,
						  cache_fd >= 0 ? cache_path : NULL, err);
		if (c.seccomp_fd < 0) {
			r = c.seccomp_fd;
			ab_err_fix(err, "report a bug, or pass --without seccomp");
			goto out;
		}
	}

	timing_mark("seccomp ready");
	/* Our own mount namespace: the workspace tmpfs (unless --workspace DIR) and the /etc
	 * tmpfs live there and die with us. */
	r = enter_mntns(&c, err);
	if (r < 0)
		goto out;
	if (o->workspace) {
		int fd = rundir_check_workspace(o->workspace, getuid(), err);

		if (fd < 0) {
			r = fd;
			goto out;
		}
		c.work_fd = fd;
		r = place_script_in_workspace(&c, err);
		if (r < 0)
			goto out;
		c.plan.work_src = realpath(o->workspace, NULL);
		if (c.drop) {
			chown_to_uid = c.sb_uid;
			chown_to_gid = c.sb_gid;
			if (nftw(c.plan.work_src, chown_one, 64, FTW_PHYS | FTW_MOUNT) != 0) {
				r = ab_err_set(err, -errno, "give the workspace to uid %u: %s",
					       (unsigned) c.sb_uid, strerror(errno));
				goto out;
			}
			res->workspace_chowned = true;
		}
		res->workspace = xstrdup(c.plan.work_src);
	} else {
		r = mount_workspace(&c, err);
		if (r < 0)
			goto out;
		r = copy_inputs(&c, err);
		if (r < 0)
			goto out;
		c.plan.work_src = xasprintf("%s/mnt", c.rd.path);
		res->workspace = xasprintf("%s/work", c.rd.path);
	}
	timing_mark("workspace ready");
	c.plan.script_sandbox = xasprintf(AB_SANDBOX_WORK "/%s", c.script_name);
	STRV_FOREACH (a, &o->script_args)
		strv_push(&c.plan.script_args, *a);

	c.plan.init_src = xstrdup(c.host.init_path);
	r = mount_etc(&c, err);
	if (r < 0)
		goto out;
	{
		struct stat st;

		c.plan.usr_links[0] = lstat("/bin", &st) == 0 && S_ISLNK(st.st_mode);
		c.plan.usr_links[1] = lstat("/sbin", &st) == 0 && S_ISLNK(st.st_mode);
		c.plan.usr_links[2] = lstat("/lib", &st) == 0 && S_ISLNK(st.st_mode);
		c.plan.usr_links[3] = lstat("/lib64", &st) == 0 && S_ISLNK(st.st_mode);
		c.plan.lib32 = lstat("/lib32", &st) == 0 && S_ISLNK(st.st_mode);
		c.plan.libx32 = lstat("/libx32", &st) == 0 && S_ISLNK(st.st_mode);
	}
	build_env(&c);
	if (c.mntns) {
		r = stage_ro_binds(&c, err);
		if (r < 0)
			goto out;
	}

	timing_mark("etc generated");
	/* v1: join the cgroup during bwrap's setup (--info-fd/--block-fd); v2: the child is
	 * created in the cgroup (clone3 CLONE_INTO_CGROUP) */
	c.plan.cgroup_handshake = c.lp.use_cgroup && c.host.cg.kind == AB_CG_V1;
	bwargv_build(&av, &cmd, &c.plan);
	if (cmd.n > 250) {
		r = ab_err_usage(err, "too many script arguments (at most 240)");
		goto out;
	}
	if (o->dry_run) {
		printf("%s\n", c.host.bwrap_path);
		STRV_FOREACH (w, &av) {
			char *q = bwargv_shell_quote(*w);

			printf("%s\n", q);
			free(q);
		}
		STRV_FOREACH (w, &cmd) {
			char *q = bwargv_shell_quote(*w);

			printf("%s\n", q);
			free(q);
		}
		fflush(stdout);
		res->status = AB_STATUS_DRY_RUN;
		cleanup_run(&c);
		(void) walk_remove_tree(c.rd.root_fd, strrchr(c.rd.path, '/') + 1, NULL);
		res->run_dir_kept = false;
		r = 0;
		goto out;
	}
	args = bwargv_serialize(&av, &args_len);

	timing_mark("argv built");
	if (c.lp.use_cgroup) {
		char name[128];

		cg_run_name(c.rd.suffix, name, sizeof(name));
		r = cg_create(&c.host.cg, name, &c.lp.cg, &c.cg, err);
		if (r < 0) {
			ab_err_fix(err, "%s",
				   "check cgroup delegation (agentbox doctor), or pass "
				   "--without cgroup");
			goto out;
		}
		c.cg_made = true;
	}

	timing_mark("cgroup created");
	{
		struct ab_spawn sp = {
			.bwrap_path = c.host.bwrap_path,
			.args_buf = args,
			.args_len = args_len,
			.cmd = strv_array(&cmd),
			.seccomp_fd = c.seccomp_fd,
			.stdin_fd = c.stdin_fd,
			.cg = c.cg_made ? &c.cg : NULL,
			.cg_handshake = c.plan.cgroup_handshake,
			.drop = c.drop,
			.drop_uid = c.sb_uid,
			.drop_gid = c.sb_gid,
			.lp = &c.lp,
			.relay = !o->quiet,
			.relay_to_stderr = o->relay_to_stderr,
			.sanitize_out = isatty(STDOUT_FILENO),
			.sanitize_err = isatty(STDERR_FILENO),
		};

		r = supervise_run(&sp, res, &oc, err);
		if (r < 0)
			goto out;
	}
	timing_mark("sandbox finished");
	if (c.cg_made)
		(void) cg_read_usage(&c.cg, &usage);

	if (!oc.started) {
		r = ab_err_set(err, -oc.exec_errno, "could not start bwrap: %s: %s", oc.exec_what,
			       strerror(oc.exec_errno));
		goto out;
	}
	if (oc.init_setup_failed) {
		r = ab_err_set(err, -oc.init_errno, "sandbox hardening failed: %s: %s",
			       oc.init_text, strerror(oc.init_errno));
		ab_err_fix(err,
			   "run `agentbox doctor`; opt out of the failing layer with --without");
		goto out;
	}
	if (!oc.init_started && !oc.timed_out && !oc.interrupted_by) {
		/* bwrap failed before it started our PID 1: its message is on stderr */
		char msg[400];
		size_t n = res->err.len < sizeof(msg) - 1 ? res->err.len : sizeof(msg) - 1;

		memcpy(msg, res->err.buf ? res->err.buf : "", n);
		msg[n] = '\0';
		while (n > 0 && msg[n - 1] == '\n')
			msg[--n] = '\0';
		r = ab_err_set(err, -EIO, "bubblewrap failed to set up the sandbox: %s",
			       n ? msg : "no message");
		host_probe_forget(cache_fd, c.drop ? c.sb_uid : geteuid());
		ab_err_fix(err, "run `agentbox doctor`");
		goto out;
	}
	interpret(&c, &oc, c.cg_made ? &usage : NULL);
	if (oc.timed_out || oc.output_limited || oc.cpu_time_limited || oc.interrupted_by)
		res->kill_to_reaped_ms = oc.kill_to_reaped_ms;
	if (oc.init_exec_failed)
		res->exit_code = oc.init_errno == ENOENT ? AB_EXIT_NOT_FOUND : AB_EXIT_CANNOT_EXEC;
	record_protections(&c, &oc);

	timing_mark("interpreted");
	r = collect_workspace(&c, err);
	if (r < 0)
		goto out;
	r = 0;

	timing_mark("collected");
out:
	if (r < 0 && res->n_prot == 0 && c.plan.interp)
		record_protections(&c, NULL);
	cleanup_run(&c);
	if (o->rm && c.rd.path && c.rd.root_fd >= 0) {
		if (walk_remove_tree(c.rd.root_fd, strrchr(c.rd.path, '/') + 1, NULL) == 0)
			res->run_dir_kept = false;
	}
	if (c.rd.path && res->run_dir_kept && o->workspace == NULL && !res->workspace)
		res->workspace = xasprintf("%s/work", c.rd.path);
	timing_mark("cleaned up");
	strv_done(&av);
	strv_done(&cmd);
	plan_done(&c.plan);
	rundir_done(&c.rd);
	if (c.script_fd >= 0)
		(void) close(c.script_fd);
	if (c.seccomp_fd >= 0)
		(void) close(c.seccomp_fd);
	if (c.stdin_fd >= 0)
		(void) close(c.stdin_fd);
	if (c.work_fd >= 0)
		(void) close(c.work_fd);
	free(c.script_name);
	return r;
}

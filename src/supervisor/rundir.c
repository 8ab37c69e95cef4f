#include "rundir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sys/random.h>
#include <sys/sendfile.h>
#include <sys/stat.h>

#include "../fs/hostfs.h"
#include "../fs/walk/walk.h"
#include "../spec/cfg.h"
#include "../spec/units.h"
#include "../util/fdutil.h"
#include "../util/macro.h"
#include "../util/proc.h"
#include "../util/xalloc.h"

void
rundir_init(struct ab_rundir *rd)
{
	memset(rd, 0, sizeof(*rd));
	rd->root_fd = -1;
	rd->fd = -1;
}

void
rundir_done(struct ab_rundir *rd)
{
	free(rd->root);
	free(rd->path);
	free(rd->mnt_work);
	free(rd->mnt_etc);
	free(rd->mnt_ro);
	free(rd->mnt_script);
	free(rd->mnt_env);
	free(rd->mnt_tmp);
	free(rd->mnt_shm);
	free(rd->mnt_pts);
	if (rd->root_fd >= 0)
		(void) close(rd->root_fd);
	if (rd->fd >= 0)
		(void) close(rd->fd);
	rundir_init(rd);
}

char *
rundir_default_root(uid_t uid)
{
	const char *env = cfg()->runs_dir;

	if (env && *env)
		return xstrdup(env);
	return xasprintf("/var/tmp/agentbox-%u", (unsigned) uid);
}

static int
check_private_dir(int fd, const char *path, const char *what, struct ab_err *err)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return ab_err_set(err, -errno, "stat %s '%s': %s", what, path, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return ab_err_set(err, -ENOTDIR, "%s '%s' is not a directory", what, path);
	if (st.st_uid != geteuid()) {
		ab_err_set(err, -EPERM, "%s '%s' is owned by uid %u, not by you (uid %u)", what,
			   path, (unsigned) st.st_uid, (unsigned) geteuid());
		return ab_err_fix(err, "use a directory you own (--runs-dir DIR)");
	}
	if (st.st_mode & (S_IWGRP | S_IWOTH)) {
		ab_err_set(err, -EPERM, "%s '%s' is writable by group or others", what, path);
		return ab_err_fix(err, "chmod go-w '%s', or use another --runs-dir", path);
	}
	return 0;
}

int
rundir_open_root(const char *path, bool traverse_for_others, struct ab_rundir *rd,
		 struct ab_err *err)
{
	mode_t mode = traverse_for_others ? 0711 : 0700;
	cleanup_fd int fd = -1, parent = -1;
	cleanup_free char *base = NULL;
	bool created = true;
	struct stat st;
	int r;

	if (path[0] != '/')
		return ab_err_usage(err, "--runs-dir '%s' must be an absolute path", path);
	/* the parent once (trusted symlinks only), then everything relative to it */
	parent = hostfs_open_parent(path, 0, "the runs directory", &base, err);
	if (parent < 0)
		return ab_err_fix(err, "create its parent, or pass --runs-dir DIR");
	{
		cleanup_fd int pdir = openat(parent, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

		if (pdir < 0)
			return ab_err_set(err, -errno, "open the parent of '%s': %s", path,
					  strerror(errno));
		(void) close(parent);
		parent = steal_fd(&pdir);
	}
	if (mkdirat(parent, base, mode) < 0) {
		created = false;
		if (errno != EEXIST) {
			ab_err_set(err, -errno, "cannot create the runs directory '%s': %s", path,
				   strerror(errno));
			return ab_err_fix(err, "create its parent, or pass --runs-dir DIR");
		}
	}
	fd = openat(parent, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ELOOP || errno == ENOTDIR) {
			int e = errno;
			bool link = e == ELOOP ||
				    (fstatat(parent, base, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
				     S_ISLNK(st.st_mode));

			ab_err_set(err, -e, "the runs directory '%s' is %s", path,
				   link ? "a symlink" : "not a directory");
			return ab_err_fix(err, "pass a real directory you own as --runs-dir");
		}
		return ab_err_set(err, -errno, "open the runs directory '%s': %s", path,
				  strerror(errno));
	}
	r = check_private_dir(fd, path, "the runs directory", err);
	if (r < 0)
		return r;
	/* Only a root we created gets its mode set (umask); an existing one is the caller's. */
	if (created && fchmod(fd, mode) < 0)
		return ab_err_set(err, -errno, "chmod the runs directory '%s'", path);
	if (!created && traverse_for_others && fstat(fd, &st) == 0 && !(st.st_mode & S_IXOTH)) {
		ab_err_set(err, -EACCES,
			   "the runs directory '%s' is not searchable by the sandbox user", path);
		return ab_err_fix(err, "chmod o+x '%s' (mode 0711), or use another --runs-dir",
				  path);
	}
	if (traverse_for_others) {
		/* root callers: the sandbox user must be able to walk down to its run dir */
		cleanup_free char *anc = xstrdup(path);
		char *slash;

		while ((slash = strrchr(anc, '/')) && slash != anc) {
			*slash = '\0';
			if (stat(anc, &st) == 0 && S_ISDIR(st.st_mode) && !(st.st_mode & S_IXOTH)) {
				ab_err_set(err, -EACCES,
					   "the sandbox user cannot reach the runs directory '%s': "
					   "'%s' is not searchable by others (mode %04o)",
					   path, anc, (unsigned) (st.st_mode & 07777));
				return ab_err_fix(err,
						  "use a --runs-dir under /var/tmp (the default), "
						  "or chmod o+x '%s'",
						  anc);
			}
		}
	}
	rd->root = xstrdup(path);
	rd->root_fd = steal_fd(&fd);
	return 0;
}

int
rundir_open_private(int root_fd, const char *name, const char *display, struct ab_err *err)
{
	cleanup_fd int fd = -1;
	int r;

	if (mkdirat(root_fd, name, 0700) < 0 && errno != EEXIST)
		return ab_err_set(err, -errno, "create '%s': %s", display, strerror(errno));
	fd = openat(root_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		ab_err_set(err, -errno, "open '%s': %s", display, strerror(errno));
		return ab_err_fix(err, "remove it (agentbox makes it again), or use another "
				       "--runs-dir");
	}
	r = check_private_dir(fd, display, "agentbox's directory", err);
	if (r < 0)
		return r;
	return steal_fd(&fd);
}

/* RUNS/.mnt/{work,etc,...}: where agentbox mounts a run's tmpfs in its own mount namespace.
 * Shared by every run of this root (each sees only its own mounts there), so a run creates
 * and removes no mountpoint directories on the host filesystem. */
static int
open_mountpoints(struct ab_rundir *rd, struct ab_err *err)
{
	static const struct {
		const char *name;
		mode_t mode;
	} mp[] = { { "work", 0700 }, { "etc", 0755 }, { "ro", 0711 },  { "script", 0755 },
		   { "env", 0700 },  { "tmp", 0700 }, { "shm", 0700 }, { "pts", 0700 } };
	cleanup_free char *where = xasprintf("%s/.mnt", rd->root);
	cleanup_fd int fd = -1;
	int r;

	if (mkdirat(rd->root_fd, ".mnt", 0711) < 0 && errno != EEXIST)
		return ab_err_set(err, -errno, "create '%s': %s", where, strerror(errno));
	fd = openat(rd->root_fd, ".mnt", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return ab_err_set(err, -errno, "open '%s': %s", where, strerror(errno));
	r = check_private_dir(fd, where, "the mountpoint directory", err);
	if (r < 0)
		return r;
	/* they exist after the first run: one stat each, a mkdir only when one is missing */
	for (size_t i = 0; i < sizeof(mp) / sizeof(mp[0]); i++) {
		struct stat st;

		if (fstatat(fd, mp[i].name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno != ENOENT ||
			    (mkdirat(fd, mp[i].name, mp[i].mode) < 0 && errno != EEXIST))
				return ab_err_set(err, -errno, "create '%s/%s': %s", where,
						  mp[i].name, strerror(errno));
			if (fstatat(fd, mp[i].name, &st, AT_SYMLINK_NOFOLLOW) < 0)
				return ab_err_set(err, -errno, "'%s/%s': %s", where, mp[i].name,
						  strerror(errno));
		}
		if (!S_ISDIR(st.st_mode))
			return ab_err_set(err, -ENOTDIR, "'%s/%s' is not a directory: %s", where,
					  mp[i].name, strerror(ENOTDIR));
	}
	rd->mnt_work = xasprintf("%s/work", where);
	rd->mnt_etc = xasprintf("%s/etc", where);
	rd->mnt_ro = xasprintf("%s/ro", where);
	rd->mnt_script = xasprintf("%s/script", where);
	rd->mnt_env = xasprintf("%s/env", where);
	rd->mnt_tmp = xasprintf("%s/tmp", where);
	rd->mnt_shm = xasprintf("%s/shm", where);
	rd->mnt_pts = xasprintf("%s/pts", where);
	return 0;
}

/* A run without a directory (--rm) still needs a name for its cgroup: 6 random characters
 * from mkdtemp's alphabet. */
static void
random_suffix(char *buf, size_t size)
{
	static const char abc[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
	unsigned char rnd[6] = { 0 };
	size_t n = size - 1 < sizeof(rnd) ? size - 1 : sizeof(rnd);

	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t) sizeof(rnd)) {
		uint64_t x = (uint64_t) getpid() * 0x9E3779B97F4A7C15ULL ^ (uint64_t) time(NULL);

		memcpy(rnd, &x, sizeof(rnd));
	}
	for (size_t i = 0; i < n; i++)
		buf[i] = abc[rnd[i] % (sizeof(abc) - 1)];
	buf[n] = '\0';
}

int
rundir_create(struct ab_rundir *rd, bool on_disk, struct ab_err *err)
{
	cleanup_fd int fd = -1;
	char marker[96], name[sizeof(AB_RUN_PREFIX) + 8];
	uint64_t start = 0;
	int mfd, r;

	r = open_mountpoints(rd, err);
	if (r < 0)
		return r;
	if (!on_disk) {
		random_suffix(rd->suffix, sizeof(rd->suffix));
		return 0;
	}
	/* mkdtemp, relative to the runs root's fd: a fresh name, never reused */
	for (int tries = 0;; tries++) {
		random_suffix(rd->suffix, sizeof(rd->suffix));
		snprintf(name, sizeof(name), AB_RUN_PREFIX "%s", rd->suffix);
		if (mkdirat(rd->root_fd, name, 0700) == 0)
			break;
		if (errno != EEXIST || tries > 100)
			return ab_err_set(err, -errno, "create a run directory in '%s': %s",
					  rd->root, strerror(errno));
	}
	fd = openat(rd->root_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return ab_err_set(err, -errno, "open the run directory '%s/%s'", rd->root, name);
	rd->path = xasprintf("%s/%s", rd->root, name);

	mfd = openat(fd, AB_RUN_MARKER, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (mfd < 0)
		return ab_err_set(err, -errno, "write the run marker in '%s'", rd->path);
	/* The owner (pid + start time): gc leaves runs whose agentbox is still alive. */
	(void) proc_pid_starttime("/proc", 0, &start);
	snprintf(marker, sizeof(marker), "agentbox %d %llu\n", (int) getpid(),
		 (unsigned long long) start);
	r = write_all(mfd, marker, strlen(marker));
	(void) close(mfd);
	if (r < 0)
		return ab_err_set(err, r, "write the run marker in '%s'", rd->path);
	if (mkdirat(fd, "work", 0700) < 0)
		return ab_err_set(err, -errno, "create the workspace in '%s'", rd->path);
	rd->fd = steal_fd(&fd);
	return 0;
}

bool
rundir_is_run(int root_fd, const char *name)
{
	cleanup_fd int fd = -1;
	struct stat st;
	size_t len = strlen(name);

	if (strncmp(name, AB_RUN_PREFIX, strlen(AB_RUN_PREFIX)) != 0 ||
	    len != strlen(AB_RUN_PREFIX) + 6 || strchr(name, '/'))
		return false;
	fd = openat(root_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return false;
	/* the marker is agentbox's, made by the caller's own uid (also in runs of older
	 * versions, whose directories belonged to the sandbox uid) */
	if (fstatat(fd, AB_RUN_MARKER, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode) ||
	    st.st_uid != geteuid())
		return false;
	return true;
}

bool
rundir_owner_alive(int root_fd, const char *name)
{
	cleanup_fd int fd = -1;
	char buf[128], path[256];
	int pid = 0;
	unsigned long long start = 0;

	snprintf(path, sizeof(path), "%s/" AB_RUN_MARKER, name);
	fd = openat(root_fd, path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return false;
	{
		ssize_t n = read(fd, buf, sizeof(buf) - 1);

		if (n <= 0)
			return false;
		buf[n] = '\0';
	}
	if (sscanf(buf, "agentbox %d %llu", &pid, &start) != 2)
		return false;
	return pid != getpid() && proc_is_alive("/proc", pid, start);
}

int
rundir_copy_file(int src_fd, int dst_dirfd, const char *name, uid_t owner, gid_t group)
{
	cleanup_fd int dfd = -1;
	struct stat st;
	off_t off = 0;

	if (fstat(src_fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	dfd = openat(dst_dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
		     (st.st_mode & S_IXUSR) ? 0755 : 0644);
	if (dfd < 0)
		return -errno;
	while (off < st.st_size) {
		ssize_t n = sendfile(dfd, src_fd, &off, (size_t) (st.st_size - off));

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			break;
	}
	if (owner != (uid_t) -1 && fchown(dfd, owner, group) < 0)
		return -errno;
	return 0;
}

int
rundir_retention(uint64_t *ret_count, uint64_t *ret_age_ms, struct ab_err *err)
{
	const char *c = cfg()->keep_runs, *a = cfg()->keep_age;

	*ret_count = AB_KEEP_RUNS_DEFAULT;
	*ret_age_ms = AB_KEEP_AGE_MS_DEFAULT;
	if (c && *c && units_parse_count(c, ret_count) < 0) {
		ab_err_usage(err, "AGENTBOX_KEEP_RUNS='%s' is not a whole number", c);
		return ab_err_fix(err, "set it to how many kept runs to keep (0: no limit)");
	}
	if (a && *a && units_parse_duration_ms(a, ret_age_ms) < 0) {
		ab_err_usage(err, "AGENTBOX_KEEP_AGE='%s' is not a duration", a);
		return ab_err_fix(err, "set it like 7d, 12h or 30m (0: no limit)");
	}
	return 0;
}

struct kept_run {
	char name[sizeof(AB_RUN_PREFIX) + 8];
	int64_t started; /* the marker's mtime, ns */
	bool busy;       /* its agentbox is alive, or it is ours */
};

static int
newest_first(const void *a, const void *b)
{
	const struct kept_run *x = a, *y = b;

	return x->started < y->started ? 1 : x->started > y->started ? -1 : 0;
}

int
rundir_prune(int root_fd, const char *own, uint64_t count, uint64_t age_ms, unsigned max_remove)
{
	struct kept_run *runs = NULL;
	size_t n = 0, cap = 0;
	struct timespec now;
	struct dirent *de;
	unsigned removed = 0;
	DIR *d;

	if (count == 0 && age_ms == 0)
		return 0;
	d = fdopendir(fcntl(root_fd, F_DUPFD_CLOEXEC, 3));
	if (!d)
		return -errno;
	clock_gettime(CLOCK_REALTIME, &now);
	while ((de = readdir(d)) && n < 100000) {
		char path[NAME_MAX + sizeof(AB_RUN_MARKER) + 2];
		struct stat st;

		if (!rundir_is_run(root_fd, de->d_name))
			continue;
		snprintf(path, sizeof(path), "%s/%s", de->d_name, AB_RUN_MARKER);
		if (fstatat(root_fd, path, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 64;
			runs = xrealloc(runs, cap * sizeof(*runs));
		}
		if (strlen(de->d_name) >= sizeof(runs[n].name))
			continue;
		memcpy(runs[n].name, de->d_name, strlen(de->d_name) + 1);
		runs[n].started = st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
		runs[n].busy = (own && strcmp(own, de->d_name) == 0) ||
			       rundir_owner_alive(root_fd, de->d_name);
		n++;
	}
	closedir(d);
	if (n > 1)
		qsort(runs, n, sizeof(*runs), newest_first);
	for (size_t i = 0; i < n && removed < max_remove; i++) {
		int64_t age = now.tv_sec * 1000000000LL + now.tv_nsec - runs[i].started;
		struct ab_err e = { 0 };

		if (runs[i].busy)
			continue;
		if (!(count > 0 && i >= count) && !(age_ms > 0 && age > (int64_t) age_ms * 1000000))
			continue;
		/* another agentbox pruning at the same time may get there first: not an error */
		if (walk_remove_tree(root_fd, runs[i].name, &e) == 0)
			removed++;
	}
	free(runs);
	return (int) removed;
}

static void
usage_dir(int dfd, unsigned depth, uint64_t *left, uint64_t *bytes)
{
	struct dirent *de;
	DIR *d = fdopendir(dfd);

	if (!d) {
		(void) close(dfd);
		return;
	}
	while (*left > 0 && (de = readdir(d))) {
		struct stat st;

		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		(*left)--;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		*bytes += (uint64_t) st.st_blocks * 512;
		if (S_ISDIR(st.st_mode) && depth < 256) {
			int fd = openat(dirfd(d), de->d_name,
					O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

			if (fd >= 0)
				usage_dir(fd, depth + 1, left, bytes);
		}
	}
	closedir(d);
}

void
rundir_usage(int root_fd, uint64_t max_entries, unsigned *ret_runs, uint64_t *ret_bytes,
	     bool *ret_partial)
{
	uint64_t left = max_entries;
	struct dirent *de;
	DIR *d = fdopendir(fcntl(root_fd, F_DUPFD_CLOEXEC, 3));

	*ret_runs = 0;
	*ret_bytes = 0;
	*ret_partial = false;
	if (!d)
		return;
	while (left > 0 && (de = readdir(d))) {
		int fd;

		if (!rundir_is_run(root_fd, de->d_name))
			continue;
		(*ret_runs)++;
		fd = openat(root_fd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd >= 0)
			usage_dir(fd, 0, &left, ret_bytes);
	}
	*ret_partial = left == 0;
	closedir(d);
}

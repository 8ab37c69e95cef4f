#include "hostfs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <linux/stat.h>

#include "../spec/cfg.h"
#include "../util/macro.h"
#include "../util/xalloc.h"
#include "refusal.h"

#ifndef STATX_ATTR_MOUNT_ROOT
#define STATX_ATTR_MOUNT_ROOT 0x00002000
#endif
#ifndef STATX_MNT_ID
#define STATX_MNT_ID 0x00001000U
#endif

#define HOSTFS_MAX_LINKS 40

/* Replaces *rest by target + "/" + after (after may be ""). */
static void
splice_link(char **rest, const char *target, const char *after)
{
	char *n = *after ? xasprintf("%s/%s", target, after) : xstrdup(target);

	free(*rest);
	*rest = n;
}

int
hostfs_open(const char *path, unsigned flags, const char *what, struct ab_err *err)
{
	return hostfs_open_at(AT_FDCWD, path, flags, what, err);
}

int
hostfs_open_at(int dirfd, const char *path, unsigned flags, const char *what, struct ab_err *err)
{
	cleanup_free char *rest = NULL;
	cleanup_fd int dfd = -1;
	uid_t me = geteuid();
	int links = 0;
	struct stat st;

	if (!path || !path[0])
		return ab_err_usage(err, "%s: the path is empty", what),
		       ab_err_fix(err, "give %s a path", what);
	if (path[0] == '/')
		dfd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	else if (dirfd == AT_FDCWD)
		dfd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	else
		dfd = fcntl(dirfd, F_DUPFD_CLOEXEC, 3);
	if (dfd < 0)
		return ab_err_set(err, -errno, "%s '%s': %s", what, path, strerror(errno));
	rest = xstrdup(path);
	for (;;) {
		char *p = rest, *end, comp[NAME_MAX + 1];
		const char *after;
		bool last, slash, dir_only;
		size_t len;
		int fd;

		while (*p == '/')
			p++;
		if (!*p)
			break;
		end = strchrnul(p, '/');
		len = (size_t) (end - p);
		if (len > NAME_MAX)
			return ab_err_set(err, -ENAMETOOLONG, "%s '%s': a name is too long", what,
					  path);
		memcpy(comp, p, len);
		comp[len] = '\0';
		after = end;
		while (*after == '/')
			after++;
		last = *after == '\0';
		slash = *end == '/'; /* "dir/": the last component is followed and a directory */

		fd = openat(dfd, comp, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0 || fstat(fd, &st) < 0) {
			int e = errno;

			if (fd >= 0)
				(void) close(fd);
			ab_err_set(err, -e, "%s '%s': %s%s%s", what, path, e == ENOENT ? "'" : "",
				   e == ENOENT ? comp : strerror(e),
				   e == ENOENT ? "' does not exist" : "");
			return e == ENOENT ? ab_err_fix(err, "check the path") : -e;
		}
		if (S_ISLNK(st.st_mode)) {
			char target[PATH_MAX];
			ssize_t n;

			if (last && !slash && (flags & HOSTFS_LINK_OK))
				return fd; /* the link itself, for the caller to report */
			if (last && !slash && (flags & HOSTFS_NOFOLLOW)) {
				(void) close(fd);
				ab_err_set(err, -ELOOP, "%s '%s' is a symlink", what, path);
				return ab_err_fix(err, "pass the real path it points to");
			}
			if (!(flags & HOSTFS_ANY_LINK) && st.st_uid != 0 && st.st_uid != me) {
				(void) close(fd);
				ab_err_set(
					err, -EPERM,
					"%s '%s' passes through the symlink '%s', owned by uid %u: "
					"agentbox follows only symlinks owned by root or by you",
					what, path, comp, (unsigned) st.st_uid);
				return ab_err_fix(err, "pass the real path");
			}
			n = readlinkat(fd, "", target, sizeof(target) - 1);
			(void) close(fd);
			if (n <= 0 || ++links > HOSTFS_MAX_LINKS)
				return ab_err_set(err, n < 0 ? -errno : -ELOOP,
						  "%s '%s': cannot follow '%s'", what, path, comp);
			target[n] = '\0';
			if (target[0] == '/') {
				int root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);

				if (root < 0)
					return ab_err_set(err, -errno, "open /: %s",
							  strerror(errno));
				(void) close(dfd);
				dfd = root;
			}
			/* after points into rest, which splice_link frees */
			dir_only = slash && !*after;
			splice_link(&rest, target, slash ? after : "");
			if (dir_only) {
				/* "link/": what it points to must be a directory */
				char *n2 = xasprintf("%s/", rest);

				free(rest);
				rest = n2;
			}
			continue;
		}
		if ((!last || slash) && !S_ISDIR(st.st_mode)) {
			(void) close(fd);
			return ab_err_set(err, -ENOTDIR, "%s '%s': '%s' is not a directory", what,
					  path, comp);
		}
		(void) close(dfd);
		dfd = fd;
		{
			char *n2 = xstrdup(after);

			free(rest);
			rest = n2;
		}
	}
	if (fstat(dfd, &st) < 0)
		return ab_err_set(err, -errno, "%s '%s': %s", what, path, strerror(errno));
	if ((flags & HOSTFS_DIR) && !S_ISDIR(st.st_mode))
		return ab_err_set(err, -ENOTDIR, "%s '%s' is not a directory", what, path);
	return steal_fd(&dfd);
}

int
hostfs_open_parent(const char *path, unsigned flags, const char *what, char **ret_base,
		   struct ab_err *err)
{
	cleanup_free char *copy = xstrdup(path);
	char *slash, *base;
	size_t l = strlen(copy);
	int fd;

	while (l > 1 && copy[l - 1] == '/')
		copy[--l] = '\0';
	slash = strrchr(copy, '/');
	base = slash ? slash + 1 : copy;
	if (!*base || strcmp(base, ".") == 0 || strcmp(base, "..") == 0)
		return ab_err_usage(err, "%s '%s' does not name a file", what, path),
		       ab_err_fix(err, "give %s a file's path, e.g. ./report.json", what);
	if (slash == copy)
		fd = hostfs_open("/", flags | HOSTFS_DIR, what, err);
	else if (slash) {
		*slash = '\0';
		fd = hostfs_open(copy, flags | HOSTFS_DIR, what, err);
	} else
		fd = hostfs_open(".", flags | HOSTFS_DIR, what, err);
	if (fd < 0)
		return fd;
	*ret_base = xstrdup(base);
	return fd;
}

int
hostfs_reopen(int fd, int flags)
{
	char proc[64];

	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	return open(proc, flags | O_CLOEXEC);
}

char *
hostfs_fd_path(int fd)
{
	char proc[64], buf[PATH_MAX];
	ssize_t n;

	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	n = readlink(proc, buf, sizeof(buf) - 1);
	if (n <= 0 || buf[0] != '/')
		return NULL;
	buf[n] = '\0';
	return xstrdup(buf);
}

char *
hostfs_realpath(const char *path)
{
	struct ab_err ignored = { 0 };
	cleanup_fd int fd = hostfs_open(path, HOSTFS_ANY_LINK, "path", &ignored);
	char *real;

	if (fd < 0) {
		errno = -fd;
		return NULL;
	}
	real = hostfs_fd_path(fd);
	if (!real)
		errno = ENOENT;
	return real;
}

bool
hostfs_is_mount_root(int fd)
{
	struct statx a, b;
	cleanup_fd int parent = -1;

	if (statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS | STATX_MNT_ID,
		  &a) < 0)
		return false;
	if (a.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT)
		return (a.stx_attributes & STATX_ATTR_MOUNT_ROOT) != 0;
	parent = openat(fd, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (parent < 0 || statx(parent, "", AT_EMPTY_PATH, STATX_MNT_ID, &b) < 0)
		return false;
	if ((a.stx_mask & STATX_MNT_ID) && (b.stx_mask & STATX_MNT_ID))
		return a.stx_mnt_id != b.stx_mnt_id;
	return a.stx_dev_major != b.stx_dev_major || a.stx_dev_minor != b.stx_dev_minor;
}

bool
hostfs_is_within(int fd, const struct stat *dir)
{
	cleanup_fd int cur = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	struct stat st;

	for (int i = 0; cur >= 0 && i < 4096; i++) {
		int up;
		struct stat pst;

		if (fstat(cur, &st) < 0)
			return false;
		if (st.st_dev == dir->st_dev && st.st_ino == dir->st_ino)
			return true;
		if (!S_ISDIR(st.st_mode))
			return false; /* only directories have a ".." to walk up */
		up = openat(cur, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (up < 0 || fstat(up, &pst) < 0) {
			if (up >= 0)
				(void) close(up);
			return false;
		}
		(void) close(cur);
		cur = up;
		if (pst.st_dev == st.st_dev && pst.st_ino == st.st_ino)
			return false; /* "/" */
	}
	return false;
}

static bool
same_file(const struct stat *a, const char *path)
{
	struct stat b;

	return stat(path, &b) == 0 && a->st_dev == b.st_dev && a->st_ino == b.st_ino;
}

static bool
under(const char *real, const char *top)
{
	size_t l = strlen(top);

	return strncmp(real, top, l) == 0 && (real[l] == '\0' || real[l] == '/');
}

/* Is st the home directory of any user in /etc/passwd, or the caller's $HOME? */
static bool
is_a_home(const struct stat *st)
{
	const char *home = cfg()->home;
	FILE *f;
	struct passwd *pw;
	bool found = false;

	if (home && home[0] == '/' && strcmp(home, "/") != 0 && same_file(st, home))
		return true;
	f = fopen("/etc/passwd", "re");
	if (!f)
		return false;
	while (!found && (pw = fgetpwent(f)))
		found = pw->pw_dir && pw->pw_dir[0] == '/' && strcmp(pw->pw_dir, "/") != 0 &&
			same_file(st, pw->pw_dir);
	fclose(f);
	return found;
}

bool
hostfs_is_allowed(const struct stat *st, const struct strv *allowed)
{
	if (!allowed)
		return false;
	STRV_FOREACH (a, allowed) {
		struct ab_err ignored = { 0 };
		cleanup_fd int afd = hostfs_open(*a, HOSTFS_ANY_LINK, "--allow-bind", &ignored);
		struct stat ast;

		if (afd >= 0 && fstat(afd, &ast) == 0 && ast.st_dev == st->st_dev &&
		    ast.st_ino == st->st_ino)
			return true;
	}
	return false;
}

const char *
hostfs_refusal(int fd, const char *real, enum hostfs_use use, int runs_root_fd,
	       const struct strv *allowed)
{
	static const char *const system_dirs[] = {
		"/usr",       "/etc",       "/var",      "/boot",      "/proc",    "/sys",
		"/dev",       "/run",       "/home",     "/root",      "/srv",     "/opt",
		"/tmp",       "/var/tmp",   "/bin",      "/sbin",      "/lib",     "/lib32",
		"/lib64",     "/libx32",    "/mnt",      "/media",     "/var/lib", "/var/log",
		"/var/cache", "/var/spool", "/var/mail", "/usr/local", "/snap",    NULL,
	};
	static const char *const never_under[] = { "/proc",    "/sys",  "/dev", "/run",
						   "/var/run", "/boot", NULL };
	static const char *const never_write_under[] = { "/etc",   "/usr",    "/bin",
							 "/sbin",  "/lib",    "/lib32",
							 "/lib64", "/libx32", NULL };
	bool write = use != HOSTFS_USE_INPUT;
	struct stat st, root;

	if (fstat(fd, &st) < 0)
		return "a path agentbox cannot examine";
	if (stat("/", &root) == 0 && st.st_dev == root.st_dev && st.st_ino == root.st_ino)
		return "the root directory /";
	if (!real)
		return "a path agentbox cannot place (is /proc mounted?)";
	if (write) {
		/* Never overridable: agentbox itself would write there. */
		for (const char *const *d = system_dirs; *d; d++)
			if (same_file(&st, *d) || strcmp(real, *d) == 0)
				return "a system directory itself";
		for (const char *const *d = never_under; *d; d++)
			if (under(real, *d))
				return "inside a kernel, device, boot or runtime directory";
		for (const char *const *d = never_write_under; *d; d++)
			if (under(real, *d))
				return "part of the operating system (/etc, /usr)";
		if (S_ISDIR(st.st_mode) && is_a_home(&st))
			return "a home directory itself";
		if (S_ISDIR(st.st_mode) && hostfs_is_mount_root(fd))
			return "a mount point";
	}
	if (runs_root_fd >= 0) {
		struct stat rst;

		if (fstat(runs_root_fd, &rst) == 0 &&
		    (hostfs_is_within(fd, &rst) ||
		     (S_ISDIR(st.st_mode) && hostfs_is_within(runs_root_fd, &st))))
			return "agentbox's runs directory, a directory inside it or one that "
			       "holds it";
	}
	if (hostfs_is_allowed(&st, allowed))
		return NULL;
	if (!write && S_ISDIR(st.st_mode) && is_a_home(&st))
		return "a home directory itself";
	return use == HOSTFS_USE_WORKSPACE ? refusal_workspace(real, cfg()->home)
					   : refusal_mount(real, cfg()->home);
}

int
hostfs_open_collect(const char *dir, const char *what, int runs_root_fd, struct ab_err *err)
{
	cleanup_free char *base = NULL, *real = NULL;
	cleanup_fd int parent = -1, pdir = -1, fd = -1;
	const char *why;

	parent = hostfs_open_parent(dir, 0, what, &base, err);
	if (parent < 0) {
		err->exit = AB_EXIT_USAGE;
		return ab_err_fix(err, "create its parent directory first");
	}
	pdir = openat(parent, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (pdir < 0 || (mkdirat(pdir, base, 0755) < 0 && errno != EEXIST)) {
		ab_err_usage(err, "%s '%s': cannot create it: %s", what, dir, strerror(errno));
		return ab_err_fix(err, "pass a directory you can create or write");
	}
	fd = openat(pdir, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		ab_err_usage(err, "%s '%s': %s", what, dir,
			     errno == ELOOP || errno == ENOTDIR ? "not a directory (a symlink?)"
								: strerror(errno));
		return ab_err_fix(err, "pass a real directory");
	}
	real = hostfs_fd_path(fd);
	why = hostfs_refusal(fd, real, HOSTFS_USE_COLLECT, runs_root_fd, NULL);
	if (why) {
		ab_err_usage(err, "refusing %s '%s': it is %s", what, dir, why);
		return ab_err_fix(err, "collect into a directory of its own (e.g. ./out)");
	}
	if (faccessat(fd, ".", W_OK, AT_EACCESS) < 0) {
		ab_err_usage(err, "%s '%s' is not writable by you", what, dir);
		return ab_err_fix(err, "pass a directory you can write");
	}
	return steal_fd(&fd);
}

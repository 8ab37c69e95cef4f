/* walk-remove.c: walk_remove_tree, iterative like walk_tree: an explicit stack of directory
 * levels, only the top WALK_OPEN_FRAMES with open fds, chmodding what is locked, never
 * following a link, never crossing a mount. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/stat.h>

#include "../../util/macro.h"
#include "../../util/strv.h"
#include "../../util/xalloc.h"
#include "walk-internal.h"

#define RM_MAX_KEPT \
	4096 /* entries of one directory that may resist removal before it is given up */

struct rm_frame {
	int fd; /* -1 while evicted */
	dev_t dev;
	ino_t ino;
	char *name; /* name in the parent directory */
	char *buf;  /* getdents64 records not handled yet */
	size_t len, pos;
	bool progress;    /* something was removed or entered since the listing (re)started */
	bool chmodded;    /* already made 0700 */
	struct strv kept; /* names that stay: mount points and failures */
};

struct rm {
	struct rm_frame *st;
	size_t n, cap;
	int parent_dirfd;
	dev_t dev; /* the start's filesystem */
	int first; /* first failure */
	struct ab_err *err;
};

static void
rm_fail(struct rm *rm, int code, const char *what, const char *name)
{
	cleanup_free char *p = walk_escape_name(name);

	if (rm->first == 0)
		rm->first = code;
	(void) ab_err_set(rm->err, code, "remove the workspace: %s '%s'", what, p);
}

static bool
strv_has(const struct strv *sv, const char *s)
{
	for (size_t i = 0; i < sv->n; i++)
		if (strcmp(sv->v[i], s) == 0)
			return true;
	return false;
}

static int
rm_parent_fd(struct rm *rm)
{
	return rm->n >= 2 ? rm->st[rm->n - 2].fd : rm->parent_dirfd;
}

/* Gives a directory we are inside u+rwx, once: what a chmod 000 / 0500 tree needs. */
static bool
rm_make_writable(struct rm_frame *f)
{
	if (f->chmodded)
		return false;
	f->chmodded = true;
	return fchmod(f->fd, 0700) == 0;
}

/* chmod 0700 the directory `name` below dirfd, never through a symlink. */
static int
rm_chmod_dir_at(int dirfd, const char *name)
{
	struct stat st;

	if (fchmodat(dirfd, name, 0700, AT_SYMLINK_NOFOLLOW) == 0)
		return 0;
	if (errno != EOPNOTSUPP && errno != ENOTSUP && errno != ENOENT && errno != ENOSYS)
		return -errno;
	/* fallback (a glibc without the O_PATH trick): our own O_PATH fd on it, never through a
	 * link, checked to be a directory, chmodded through /proc/self/fd/N (that inode only);
	 * never chmod by name, which a swap to a symlink would redirect */
	{
		cleanup_fd int fd = walk_open_beneath(dirfd, name, O_PATH);
		char p[64];

		if (fd < 0)
			return fd;
		if (fstat(fd, &st) < 0)
			return -errno;
		if (!S_ISDIR(st.st_mode))
			return -ENOTDIR;
		(void) snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
		return chmod(p, 0700) < 0 ? -errno : 0;
	}
}

/* Opens the directory `name` below dirfd for removal, chmodding it first if it is locked.
 * Checks it is the directory st describes. Returns an fd or -errno. */
static int
rm_open_dir(int dirfd, const char *name, const struct stat *st)
{
	cleanup_fd int fd = -1;
	struct stat fst;

	fd = walk_open_beneath(dirfd, name, O_RDONLY | O_DIRECTORY);
	if (fd == -EACCES || fd == -EPERM) {
		int r = rm_chmod_dir_at(dirfd, name);

		if (r < 0)
			return r;
		fd = walk_open_beneath(dirfd, name, O_RDONLY | O_DIRECTORY);
	}
	if (fd < 0)
		return fd;
	if (fstat(fd, &fst) < 0)
		return -errno;
	if (fst.st_dev != st->st_dev || fst.st_ino != st->st_ino)
		return -ESTALE;
	return steal_fd(&fd);
}

/* Pushes a directory level; takes ownership of fd and name. */
static void
rm_push(struct rm *rm, int fd, const struct stat *st, char *name)
{
	struct rm_frame *f;

	if (rm->n == rm->cap) {
		rm->cap = rm->cap ? rm->cap * 2 : 64;
		rm->st = xrealloc(rm->st, rm->cap * sizeof(*rm->st));
	}
	f = &rm->st[rm->n++];
	memset(f, 0, sizeof(*f));
	f->fd = fd;
	f->dev = st->st_dev;
	f->ino = st->st_ino;
	f->name = name;
	if (rm->n > WALK_OPEN_FRAMES) {
		struct rm_frame *v = &rm->st[rm->n - 1 - WALK_OPEN_FRAMES];

		if (v->fd >= 0) {
			(void) close(v->fd);
			v->fd = -1;
		}
	}
}

static void
rm_frame_free(struct rm_frame *f)
{
	if (f->fd >= 0)
		(void) close(f->fd);
	f->fd = -1;
	free(f->name);
	free(f->buf);
	strv_done(&f->kept);
}

/* The next name in the directory on top, or NULL when it is exhausted. The pointer is valid
 * until the next call or push. */
static const char *
rm_next_name(struct rm *rm, struct rm_frame *f)
{
	for (;;) {
		ssize_t n;

		if (f->kept.n >= RM_MAX_KEPT)
			return NULL; /* give this directory up; its rmdir reports ENOTEMPTY */
		while (f->pos < f->len) {
			struct dirent64 *d = (struct dirent64 *) (void *) (f->buf + f->pos);

			f->pos += d->d_reclen;
			if (!walk_is_dot_or_dotdot(d->d_name) && !strv_has(&f->kept, d->d_name))
				return d->d_name;
		}
		free(f->buf);
		f->buf = NULL;
		f->len = f->pos = 0;

		f->buf = xmalloc(WALK_BUF_SIZE);
		n = RETRY_EINTR(getdents64(f->fd, f->buf, WALK_BUF_SIZE));
		if (n > 0) {
			f->len = (size_t) n;
			continue;
		}
		free(f->buf);
		f->buf = NULL;
		if (n < 0) {
			rm_fail(rm, -errno, "list", f->name);
			return NULL;
		}
		if (!f->progress)
			return NULL;
		/* Something changed during this pass: list once more from the start, so that
		 * nothing is missed. A pass without progress ends the directory. */
		f->progress = false;
		if (lseek(f->fd, 0, SEEK_SET) < 0) {
			rm_fail(rm, -errno, "rewind", f->name);
			return NULL;
		}
	}
}

/* Handles one name in the directory on top: unlinks it, or enters it if it is a directory. */
static void
rm_one(struct rm *rm, const char *name)
{
	struct rm_frame *f = &rm->st[rm->n - 1];
	struct stat st;
	char *child;
	int fd, r;

	r = fstatat(f->fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
	if ((r == -EACCES || r == -EPERM) && rm_make_writable(f))
		r = fstatat(f->fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
	if (r == -ENOENT)
		return;
	if (r < 0) {
		rm_fail(rm, r, "examine", name);
		strv_push(&f->kept, name);
		return;
	}

	if (!S_ISDIR(st.st_mode)) {
		/* Files, symlinks, fifos, sockets, devices: the link itself goes. */
		r = unlinkat(f->fd, name, 0) < 0 ? -errno : 0;
		if ((r == -EACCES || r == -EPERM) && rm_make_writable(f))
			r = unlinkat(f->fd, name, 0) < 0 ? -errno : 0;
		if (r == 0)
			f->progress = true;
		else if (r != -ENOENT) {
			rm_fail(rm, r, "unlink", name);
			strv_push(&f->kept, name);
		}
		return;
	}

	if (st.st_dev != rm->dev) {
		rm_fail(rm, -EXDEV, "left a mount point in place:", name);
		strv_push(&f->kept, name);
		return;
	}
	fd = rm_open_dir(f->fd, name, &st);
	if (fd == -EACCES && rm_make_writable(f))
		fd = rm_open_dir(f->fd, name, &st);
	if (fd < 0) {
		if (fd == -ENOENT)
			return;
		if (fd == -EXDEV)
			rm_fail(rm, -EXDEV, "left a mount point in place:", name);
		else
			rm_fail(rm, fd, "open", name);
		strv_push(&f->kept, name);
		return;
	}
	f->progress = true;
	child = xstrdup(name); /* name points into f->buf, which shrinks now */
	/* Keep only the unread records of this level while the child is handled. */
	if (f->buf && f->pos < f->len) {
		memmove(f->buf, f->buf + f->pos, f->len - f->pos);
		f->len -= f->pos;
		f->pos = 0;
		f->buf = xrealloc(f->buf, f->len);
	} else {
		free(f->buf);
		f->buf = NULL;
		f->len = f->pos = 0;
	}
	rm_push(rm, fd, &st, child); /* f is stale from here on */
}

/* The directory on top is exhausted: bring its parent back if evicted, close it, rmdir it. */
static int
rm_pop(struct rm *rm)
{
	struct rm_frame *f = &rm->st[rm->n - 1];
	struct rm_frame *p = rm->n >= 2 ? &rm->st[rm->n - 2] : NULL;
	int pfd, r;

	if (p && p->fd < 0) {
		p->fd = walk_reopen_parent(f->fd, p->dev, p->ino);
		if (p->fd < 0) {
			r = p->fd;
			rm_fail(rm, r, "reopen the parent of", f->name);
			return r; /* the tree changed under us: stop */
		}
	}
	(void) close(f->fd);
	f->fd = -1;
	pfd = rm_parent_fd(rm);
	r = unlinkat(pfd, f->name, AT_REMOVEDIR) < 0 ? -errno : 0;
	if ((r == -EACCES || r == -EPERM) && p && rm_make_writable(p))
		r = unlinkat(pfd, f->name, AT_REMOVEDIR) < 0 ? -errno : 0;
	if (r < 0 && r != -ENOENT) {
		rm_fail(rm, r, "rmdir", f->name);
		if (p)
			strv_push(&p->kept, f->name);
	} else if (p) {
		p->progress = true;
	}
	rm_frame_free(f);
	rm->n--;
	return 0;
}

int
walk_remove_tree(int parent_dirfd, const char *name, struct ab_err *err)
{
	struct rm rm = { .parent_dirfd = parent_dirfd, .err = err };
	struct stat st, pst;
	int fd, r = 0;

	if (!name || !*name || strchr(name, '/') || walk_is_dot_or_dotdot(name))
		return ab_err_set(err, -EINVAL, "remove: not a single path component");
	if (fstatat(parent_dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno == ENOENT)
			return 0;
		return ab_err_set(err, -errno, "remove: examine the top entry");
	}
	if (!S_ISDIR(st.st_mode)) {
		if (unlinkat(parent_dirfd, name, 0) < 0 && errno != ENOENT)
			return ab_err_set(err, -errno, "remove: unlink the top entry");
		return 0;
	}
	if (fstat(parent_dirfd, &pst) < 0)
		return ab_err_set(err, -errno, "remove: fstat the parent");
	if (pst.st_dev != st.st_dev)
		return ab_err_set(err, -EXDEV, "remove: the top directory is a mount point");
	fd = rm_open_dir(parent_dirfd, name, &st);
	if (fd < 0)
		return ab_err_set(err, fd, "remove: open the top directory");
	rm.dev = st.st_dev;
	rm_push(&rm, fd, &st, xstrdup(name));

	while (rm.n > 0) {
		struct rm_frame *f = &rm.st[rm.n - 1];
		const char *next = rm_next_name(&rm, f);

		if (next) {
			rm_one(&rm, next);
			continue;
		}
		r = rm_pop(&rm);
		if (r < 0)
			break;
	}
	while (rm.n > 0)
		rm_frame_free(&rm.st[--rm.n]);
	free(rm.st);
	if (r < 0)
		return r;
	return rm.first;
}

/* walk-strip.c: the in-place strip (strip_uid): setuid/setgid/g+w/o+w removed from what the
 * run made, through the walk's own fd or an O_PATH fd and /proc/self/fd/N, never by name. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>

#include <sys/stat.h>

#include "../../util/macro.h"
#include "../../util/xalloc.h"
#include "walk-internal.h"

static int
keep_cmp(const void *a, const void *b)
{
	uint64_t x = ((const struct ab_strip_keep *) a)->ino,
		 y = ((const struct ab_strip_keep *) b)->ino;

	return x < y ? -1 : x > y;
}

struct ab_strip_keep *
walk_strip_keep_list(const struct ab_manifest *m, size_t *ret_n)
{
	struct ab_strip_keep *k = NULL;
	size_t n = 0;

	for (size_t i = 0; i < m->n; i++) {
		if (!(m->entries[i].mode & WALK_STRIP_BITS))
			continue;
		k = xrealloc(k, (n + 1) * sizeof(*k));
		k[n].ino = m->entries[i].ino;
		k[n].bits = m->entries[i].mode & WALK_STRIP_BITS;
		n++;
	}
	if (n)
		qsort(k, n, sizeof(*k), keep_cmp);
	*ret_n = n;
	return k;
}

/* The bits a strip removes from this inode: those it has that it did not have before. */
static mode_t
strip_bits(const struct walk *w, const struct stat *st)
{
	struct ab_strip_keep key = { .ino = (uint64_t) st->st_ino };
	const struct ab_strip_keep *k = NULL;

	if (w->o.strip_keep)
		k = bsearch(&key, w->o.strip_keep, w->o.n_strip_keep, sizeof(key), keep_cmp);
	return (st->st_mode & WALK_STRIP_BITS) & ~(k ? k->bits : 0);
}

static bool
strip_applies(const struct walk *w, const struct stat *st)
{
	const struct timespec *c = &st->st_ctim, *s = &w->o.strip_since;

	return w->strip && (S_ISREG(st->st_mode) || S_ISDIR(st->st_mode)) &&
	       st->st_uid == w->o.strip_uid && st->st_dev == w->root_dev &&
	       (c->tv_sec > s->tv_sec || (c->tv_sec == s->tv_sec && c->tv_nsec >= s->tv_nsec)) &&
	       strip_bits(w, st);
}

static void
strip_failed(struct walk *w, struct ab_entry *e)
{
	/* no flag: the entry may well have been read and copied; strip_failed tells the caller */
	w->m.strip_failed++;
	walk_entry_mark(e, 0, "special bits could not be removed in place");
}

/* Strips the entry open on fd, whose fstat is fst. fd is an O_PATH fd when by_proc: fchmod()
 * refuses those, so it goes through /proc/self/fd/N, which names this inode and no other. */
void
walk_strip_fd(struct walk *w, struct ab_entry *e, int fd, const struct stat *fst, bool by_proc)
{
	mode_t mode = fst->st_mode & 07777;
	int r;

	if (!strip_applies(w, fst))
		return;
	mode &= ~strip_bits(w, fst);
	if (by_proc) {
		char p[64];

		(void) snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
		r = chmod(p, mode);
	} else {
		r = fchmod(fd, mode);
	}
	if (r < 0) {
		strip_failed(w, e);
		return;
	}
	e->flags |= AB_FLAG_STRIPPED;
	w->m.stripped++;
}

/* Strips `name` below dirfd, which the walk did not (or could not) open readable: an O_PATH
 * fd beneath dirfd (never through a symlink, never across a mount), checked to be the inode
 * and type lstat saw. Never opens a FIFO or a device for reading. */
int
walk_strip_at(struct walk *w, struct ab_entry *e, int dirfd, const char *name,
	      const struct stat *st)
{
	cleanup_fd int fd = -1;
	struct stat fst;

	if (!strip_applies(w, st))
		return 0;
	fd = walk_open_beneath(dirfd, name, O_PATH);
	if (fd < 0) {
		if (walk_is_fd_exhaustion(fd))
			return ab_err_set(w->err, fd, "open a workspace entry to strip it");
		strip_failed(w, e);
		return 0;
	}
	if (fstat(fd, &fst) < 0 || fst.st_dev != st->st_dev || fst.st_ino != st->st_ino ||
	    (fst.st_mode & S_IFMT) != (st->st_mode & S_IFMT)) {
		strip_failed(w, e);
		return 0;
	}
	walk_strip_fd(w, e, fd, &fst, true);
	return 0;
}

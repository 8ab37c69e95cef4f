/* walk.c: the workspace walk, walk_tree (issue 5; contract in walk.h; the other walk-*.c
 * files in walk-internal.h).
 *
 * Both walk_tree and walk_remove_tree keep an explicit stack of directory levels instead of
 * recursing. Only the top WALK_OPEN_FRAMES levels keep their fds open; a deeper ancestor is
 * reopened through ".." of its child when the walk climbs back to it, and is accepted only if
 * st_dev/st_ino match what was recorded on the way down. That keeps a 10,000-deep tree within
 * a few dozen fds. */
#include "walk.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/stat.h>

#include "../../util/fdutil.h"
#include "../../util/macro.h"
#include "../../util/strv.h"
#include "../../util/xalloc.h"
#include "walk-internal.h"

#define WALK_DEFAULT_MAX_ENTRIES 100000
#define WALK_DEFAULT_MAX_DEPTH   4096
#define WALK_DEFAULT_HASH_MAX    (64ULL << 20)
#define WALK_DEFAULT_HASH_BUDGET (512ULL << 20)
#define WALK_DEFAULT_LIST_BYTES  (8ULL << 20)
#define WALK_DEFAULT_TIME_MS     60000
#define WALK_LINK_MAX            4096          /* bytes of a symlink target kept */
#define WALK_MAX_NAME_BYTES      (64ULL << 20) /* paths + link targets held by one manifest */

static enum ab_entry_type
type_of(mode_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG:
		return AB_ENTRY_FILE;
	case S_IFDIR:
		return AB_ENTRY_DIR;
	case S_IFLNK:
		return AB_ENTRY_SYMLINK;
	case S_IFIFO:
		return AB_ENTRY_FIFO;
	case S_IFSOCK:
		return AB_ENTRY_SOCKET;
	case S_IFCHR:
		return AB_ENTRY_CHARDEV;
	case S_IFBLK:
		return AB_ENTRY_BLOCKDEV;
	default:
		return AB_ENTRY_OTHER;
	}
}

enum walk_access
walk_access_of(enum ab_entry_type type)
{
	switch (type) {
	case AB_ENTRY_FILE:
		return WALK_READ;
	case AB_ENTRY_DIR:
		return WALK_ENTER;
	case AB_ENTRY_SYMLINK:
		return WALK_READLINK;
	case AB_ENTRY_FIFO:
	case AB_ENTRY_SOCKET:
	case AB_ENTRY_CHARDEV:
	case AB_ENTRY_BLOCKDEV:
	case AB_ENTRY_OTHER:
	case AB_ENTRY_TYPE_COUNT:
		break;
	}
	return WALK_STAT_ONLY;
}

void
manifest_done(struct ab_manifest *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->n; i++) {
		free(m->entries[i].path);
		free(m->entries[i].link_target);
	}
	free(m->entries);
	memset(m, 0, sizeof(*m));
}

/* Reasons that only inform: the entry is still collected. Any other reason replaces them. */
const char walk_reason_setid[] = "setuid/setgid/sticky bit (stripped on copy)";
const char walk_reason_sparse[] = "sparse file (holes kept on copy)";
const char walk_reason_sparse_unhashed[] = "sparse file (not hashed; holes kept on copy)";
const char walk_reason_hash_too_big[] = "over the hash size cap (not hashed)";
const char walk_reason_hash_budget[] = "hash budget used up (not hashed)";

bool
walk_reason_informs(const char *r)
{
	return !r || r == walk_reason_setid || r == walk_reason_sparse ||
	       r == walk_reason_sparse_unhashed || r == walk_reason_hash_too_big ||
	       r == walk_reason_hash_budget;
}

/* Records that a cap cut the walk or the listing; the first cap is the one named. */
void
walk_truncate_by(struct walk *w, enum ab_walk_cap cap)
{
	w->m.truncated = true;
	w->m.truncated_caps |= cap;
	for (size_t b = 0; b < AB_CAP_COUNT && !w->m.truncated_by; b++)
		if ((unsigned) cap == 1U << b)
			w->m.truncated_by = walk_cap_texts[b];
}

void
walk_entry_mark(struct ab_entry *e, unsigned flag, const char *reason)
{
	e->flags |= flag;
	if (walk_reason_informs(e->reason))
		e->reason = reason;
}

/* For error messages: the entry's path, or its name when it is not listed. Escaped. */
char *
walk_entry_display(const struct ab_entry *e, const char *name)
{
	return walk_escape_name(e->path ? e->path : name);
}

/* The time budget: true (and the walk stops) once it is spent. */
bool
walk_out_of_time(struct walk *w)
{
	if (w->stopped)
		return true;
	if (now_ns() < w->deadline_ns)
		return false;
	w->stopped = true;
	walk_truncate_by(w, AB_CAP_TIME);
	return true;
}

static void
frame_close(struct walk_frame *f)
{
	if (f->fd >= 0)
		(void) close(f->fd);
	if (f->own_dst && f->dst_fd >= 0)
		(void) close(f->dst_fd);
	f->fd = f->dst_fd = -1;
	strv_done(&f->names);
}

/* Lists the directory of f into f->names, at most up to the entry cap. */
static int
walk_list(struct walk *w, struct walk_frame *f)
{
	for (;;) {
		ssize_t n = getdents64(f->fd, w->buf, WALK_BUF_SIZE);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (f->depth == 0)
				return ab_err_set(w->err, -errno, "list the walk root");
			if (f->entry != WALK_NO_ENTRY)
				walk_entry_mark(walk_entry_at(w, f->entry), AB_FLAG_UNREADABLE,
						"directory listing failed part way");
			return 0;
		}
		if (n == 0)
			return 0;
		for (ssize_t off = 0; off < n;) {
			struct dirent64 *d = (struct dirent64 *) (void *) (w->buf + off);

			off += d->d_reclen;
			if (walk_is_dot_or_dotdot(d->d_name))
				continue;
			if (w->m.total_entries >= w->o.max_entries) {
				w->listing_stopped = true;
				walk_truncate_by(w, AB_CAP_ENTRIES);
				if (f->entry != WALK_NO_ENTRY)
					walk_entry_mark(walk_entry_at(w, f->entry),
							AB_FLAG_OVER_CAP,
							"entry cap reached (listing incomplete)");
				return 0;
			}
			w->m.total_entries++;
			strv_push(&f->names, d->d_name);
		}
	}
}

static int
walk_push(struct walk *w, const struct walk_frame *nf)
{
	struct walk_frame *f;
	int r;

	if (w->n == w->cap) {
		w->cap = w->cap ? w->cap * 2 : 64;
		w->st = xrealloc(w->st, w->cap * sizeof(*w->st));
	}
	f = &w->st[w->n++];
	*f = *nf;
	r = walk_list(w, f);
	if (r < 0)
		return r;
	/* Keep the fds of the top levels only (frame 0 always stays). A level's copy stays open
	 * when the level below is not copied, since ".." of nothing cannot bring it back. */
	if (w->n > WALK_OPEN_FRAMES + 1) {
		struct walk_frame *v = &w->st[w->n - 1 - WALK_OPEN_FRAMES];

		if (v->fd >= 0) {
			(void) close(v->fd);
			v->fd = -1;
		}
		if (v->own_dst && v->dst_fd >= 0 && v[1].has_dst) {
			(void) close(v->dst_fd);
			v->dst_fd = -1;
		}
	}
	return 0;
}

/* A listed entry is complete: its origin is decided, its reservation becomes its exact cost. */
static void
list_settle(struct walk *w, size_t idx, uint64_t reserved)
{
	struct ab_entry *e = walk_entry_at(w, idx);

	walk_origin_set(w, e);
	w->m.list_bytes = w->m.list_bytes - reserved + walk_entry_json_cost(e, false);
	if (e->type == AB_ENTRY_FILE && !e->sha256[0])
		w->m.unhashed++;
}

/* The level on top is done: give its copy the sanitized mode, bring the parent's fds back if
 * they were evicted, and drop the level. */
static int
walk_pop(struct walk *w)
{
	struct walk_frame *f = walk_top(w);
	int r = 0;

	if (f->entry != WALK_NO_ENTRY)
		list_settle(w, f->entry, f->reserved);
	if (f->own_dst && f->dst_fd >= 0 && fchmod(f->dst_fd, f->dst_mode) < 0)
		r = ab_err_set(w->err, -errno, "chmod a copied directory");
	if (r == 0 && w->n >= 2) {
		struct walk_frame *p = &w->st[w->n - 2];

		if (p->fd < 0) {
			p->fd = walk_reopen_parent(f->fd, p->dev, p->ino);
			if (p->fd < 0)
				r = ab_err_set(w->err, p->fd,
					       "reopen a workspace directory on the way up");
		}
		if (r == 0 && p->has_dst && p->dst_fd < 0) {
			p->dst_fd = walk_reopen_parent(f->dst_fd, p->dst_dev, p->dst_ino);
			if (p->dst_fd < 0)
				r = ab_err_set(w->err, p->dst_fd,
					       "reopen a destination directory on the way up");
		}
	}
	frame_close(f);
	w->n--;
	return r;
}

/* Enters the directory `name` (entry e, manifest index idx or WALK_NO_ENTRY) unless a cap or
 * its state says not to; reserved is what its listing holds until it is done. */
static int
walk_dir(struct walk *w, struct ab_entry *e, size_t idx, uint64_t reserved, const char *name,
	 uint64_t path_len, const struct stat *st)
{
	struct walk_frame *f = walk_top(w);
	cleanup_fd int fd = -1, dfd = -1;
	struct walk_frame nf = { .fd = -1, .dst_fd = -1, .own_dst = true };
	struct stat fst;

	if (st->st_mode & 07000) {
		e->flags |= AB_FLAG_SETID;
		e->reason = walk_reason_setid;
	}
	if (w->listing_stopped) {
		e->flags |= AB_FLAG_OVER_CAP;
		e->reason = "entry cap reached (not listed)";
		return walk_strip_at(w, e, f->fd, name, st);
	}
	if (f->depth + 1 >= w->o.max_depth) {
		e->flags |= AB_FLAG_OVER_CAP;
		e->reason = "depth cap reached (not entered)";
		walk_truncate_by(w, AB_CAP_DEPTH);
		return walk_strip_at(w, e, f->fd, name, st);
	}

	fd = walk_open_beneath(f->fd, name, O_RDONLY | O_DIRECTORY);
	if (fd < 0) {
		if (walk_is_fd_exhaustion(fd))
			return ab_err_set(w->err, fd, "open a workspace directory");
		if (fd == -EXDEV) {
			walk_entry_mark(e, AB_FLAG_OTHER_FS, "mount point (not entered)");
			return 0;
		}
		walk_entry_mark(e, AB_FLAG_UNREADABLE, "cannot be opened (not entered)");
		return walk_strip_at(w, e, f->fd, name, st);
	}
	if (fstat(fd, &fst) < 0 || !S_ISDIR(fst.st_mode) || fst.st_dev != st->st_dev ||
	    fst.st_ino != st->st_ino || fst.st_dev != w->root_dev) {
		walk_entry_mark(e, AB_FLAG_UNREADABLE, "changed while walking");
		return 0;
	}
	walk_strip_fd(w, e, fd, &fst, false);
	if (w->o.dst_dirfd >= 0 && fst.st_dev == w->st[0].dst_dev &&
	    fst.st_ino == w->st[0].dst_ino) {
		/* The destination inside the source: copying it into itself would never end. */
		e->reason = "is the copy destination (not entered)";
		return 0;
	}

	if (w->o.dst_dirfd >= 0 && !f->has_dst && !e->reason)
		e->reason = "inside a directory that was not copied";
	if (f->has_dst) {
		if (mkdirat(f->dst_fd, name, 0700) < 0) {
			cleanup_free char *p = NULL;

			if (errno == EEXIST) {
				e->reason = "destination name already exists (not overwritten)";
				goto push;
			}
			p = walk_entry_display(e, name);
			return ab_err_set(w->err, -errno, "create the copy of '%s'", p);
		}
		dfd = RETRY_EINTR(
			openat(f->dst_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
		if (dfd < 0 || fstat(dfd, &fst) < 0)
			return ab_err_set(w->err, -errno, "open a copied directory");
		if (w->o.chown_uid != (uid_t) -1 && fchown(dfd, w->o.chown_uid, w->o.chown_gid) < 0)
			return ab_err_set(w->err, -errno, "chown a copied directory");
		nf.has_dst = true;
		nf.dst_dev = fst.st_dev;
		nf.dst_ino = fst.st_ino;
		nf.dst_mode = WALK_COPY_DIR_MODE(st->st_mode);
		e->collected = true;
	}
push:
	nf.dev = st->st_dev;
	nf.ino = st->st_ino;
	nf.entry = idx;
	nf.listed = idx != WALK_NO_ENTRY;
	nf.reserved = reserved;
	nf.depth = f->depth + 1;
	nf.path_len = path_len;
	nf.fd = steal_fd(&fd);
	nf.dst_fd = steal_fd(&dfd);
	return walk_push(w, &nf);
}

/* Decides whether the entry `name` of the directory on top is listed. Returns its manifest
 * index and sets *ret_reserved (what its JSON may cost, held in list_bytes), or returns
 * WALK_NO_ENTRY: it is walked all the same (copied, stripped, counted), through w->scratch. */
static size_t
walk_record(struct walk *w, const char *name, uint64_t path_len, const char *link,
	    uint64_t *ret_reserved)
{
	struct walk_frame *f = walk_top(w);
	struct ab_entry *parent = f->entry == WALK_NO_ENTRY ? NULL : walk_entry_at(w, f->entry);
	struct ab_entry *e;
	uint64_t cost;
	size_t idx;
	char *path;

	if (!f->listed || w->list_full)
		return WALK_NO_ENTRY;
	if (path_len > WALK_LIST_PATH_MAX) {
		walk_truncate_by(w, AB_CAP_PATH_LENGTH);
		if (parent)
			walk_entry_mark(parent, AB_FLAG_OVER_CAP,
					"path length cap reached (contents not all listed)");
		return WALK_NO_ENTRY;
	}
	path = parent ? xasprintf("%s/%s", parent->path, name) : xstrdup(name);
	w->scratch.path = path;
	w->scratch.link_target = (char *) link;
	w->scratch.origin = w->o.origins_from ? AB_ORIGIN_UNKNOWN : AB_ORIGIN_NONE;
	cost = walk_entry_json_cost(&w->scratch, true);
	w->scratch.path = w->scratch.link_target = NULL;
	if (w->m.list_bytes + cost > w->o.max_list_bytes ||
	    w->name_bytes + path_len + 1 + (link ? strlen(link) + 1 : 0) > WALK_MAX_NAME_BYTES) {
		free(path);
		w->list_full = true;
		walk_truncate_by(w, AB_CAP_MANIFEST);
		if (parent)
			walk_entry_mark(parent, AB_FLAG_OVER_CAP,
					"manifest size cap reached (contents not all listed)");
		return WALK_NO_ENTRY;
	}
	w->m.list_bytes += cost;
	w->name_bytes += path_len + 1 + (link ? strlen(link) + 1 : 0);
	if (w->m.n == w->m.cap) {
		w->m.cap = w->m.cap ? w->m.cap * 2 : 64;
		w->m.entries = xrealloc(w->m.entries, w->m.cap * sizeof(*w->m.entries));
	}
	idx = w->m.n++;
	e = walk_entry_at(w, idx);
	memset(e, 0, sizeof(*e));
	e->path = path;
	e->link_target = link ? xstrdup(link) : NULL;
	e->origin = w->o.origins_from ? AB_ORIGIN_UNKNOWN : AB_ORIGIN_NONE;
	*ret_reserved = cost;
	return idx;
}

/* copy_symlinks: does a link in a directory `depth` levels below the root, with this target,
 * resolve inside the tree wherever the tree is put? Relative: leading ".." (at most depth of
 * them), then plain names only (a ".." after a name could climb out through a name that is
 * itself a link); each link on the way is judged the same. Absolute: only into /usr, the
 * sandbox's read-only base. */
static bool
link_stays_inside(const char *target, uint64_t depth)
{
	bool names = false;
	uint64_t up = 0;

	if (target[0] == '/')
		return strncmp(target, "/usr/", 5) == 0 && !strstr(target, "/../") &&
		       strcmp(target + strlen(target) - 3, "/..") != 0;
	if (!target[0])
		return false;
	for (const char *p = target; *p;) {
		const char *end = strchrnul(p, '/');
		size_t len = (size_t) (end - p);

		if (len == 2 && p[0] == '.' && p[1] == '.') {
			if (names || ++up > depth)
				return false;
		} else if (len > 0 && !(len == 1 && p[0] == '.')) {
			names = true;
		}
		p = *end ? end + 1 : end;
	}
	return true;
}

/* Records one entry of the directory on top of the stack, and enters it if it is one. */
static int
walk_one(struct walk *w, const char *name)
{
	struct walk_frame *f = walk_top(w);
	uint64_t path_len = (f->depth ? f->path_len + 1 : 0) + strlen(name), reserved = 0;
	char target[WALK_LINK_MAX + 1];
	const char *link = NULL;
	size_t idx, frames = w->n;
	struct ab_entry *e;
	struct stat st;
	int r = 0, stat_err;

	if (walk_out_of_time(w))
		return 0;
	stat_err = fstatat(f->fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0;
	if (!stat_err && S_ISLNK(st.st_mode)) {
		ssize_t n = readlinkat(f->fd, name, target, WALK_LINK_MAX);

		if (n >= 0) {
			target[n] = '\0';
			link = target;
		}
	}
	idx = walk_record(w, name, path_len, link, &reserved);
	if (idx == WALK_NO_ENTRY) {
		w->m.unlisted++;
		e = &w->scratch;
		memset(e, 0, sizeof(*e));
	} else {
		e = walk_entry_at(w, idx);
	}

	if (stat_err) {
		e->type = AB_ENTRY_OTHER;
		walk_entry_mark(e, AB_FLAG_UNREADABLE, "vanished or cannot be examined");
		goto done;
	}
	e->type = type_of(st.st_mode);
	e->size = st.st_size > 0 ? (uint64_t) st.st_size : 0;
	e->blocks_bytes = (uint64_t) st.st_blocks * 512;
	e->mode = st.st_mode & 07777;
	e->ino = (uint64_t) st.st_ino;
	e->ctime = st.st_ctim;
	e->mtime = st.st_mtim;
	if (st.st_dev != w->root_dev) {
		walk_entry_mark(e, AB_FLAG_OTHER_FS,
				"on another filesystem (mount point; not entered)");
		goto done;
	}

	switch (walk_access_of(e->type)) {
	case WALK_READ:
		r = walk_file(w, e, name, &st);
		break;
	case WALK_ENTER:
		r = walk_dir(w, e, idx, reserved, name, path_len, &st);
		if (w->n > frames)
			return r; /* entered: its listing settles when the level is done */
		break;
	case WALK_READLINK:
		if (link && w->o.copy_symlinks && f->has_dst && f->dst_fd >= 0 &&
		    link_stays_inside(link, f->depth)) {
			if (symlinkat(link, f->dst_fd, name) == 0) {
				e->flags |= AB_FLAG_SYMLINK;
				e->collected = true;
				break;
			}
			if (errno == EMFILE || errno == ENFILE || errno == ENOMEM)
				return ab_err_set(w->err, -errno, "copy a symlink");
		}
		walk_entry_mark(e, AB_FLAG_SYMLINK,
				w->o.copy_symlinks && link
					? "symbolic link pointing outside the tree "
					  "(not copied)"
					: "symbolic link (not followed)");
		if (!link)
			e->flags |= AB_FLAG_UNREADABLE;
		break;
	case WALK_STAT_ONLY:
		walk_entry_mark(e, AB_FLAG_SPECIAL,
				"special file (fifo, socket or device; not opened)");
		break;
	}
done:
	if (idx != WALK_NO_ENTRY)
		list_settle(w, idx, reserved);
	return r;
}

static void
walk_free(struct walk *w)
{
	while (w->n > 0)
		frame_close(&w->st[--w->n]);
	free(w->st);
	free(w->buf);
	free(w->reuse);
	free(w->origins);
	w->st = NULL;
	w->buf = NULL;
	w->reuse = NULL;
	w->origins = NULL;
}

int
walk_tree(int root_dirfd, const struct ab_walk_opts *o, struct ab_manifest *ret, struct ab_err *err)
{
	struct walk w = { .err = err };
	struct walk_frame root = { .fd = -1, .dst_fd = -1, .entry = WALK_NO_ENTRY, .listed = true };
	int64_t t0 = now_ns();
	struct stat st;
	int r;

	if (o)
		w.o = *o;
	else
		w.o = (struct ab_walk_opts){ .dst_dirfd = -1, .chown_uid = (uid_t) -1 };
	if (!w.o.max_entries)
		w.o.max_entries = WALK_DEFAULT_MAX_ENTRIES;
	if (!w.o.max_depth)
		w.o.max_depth = WALK_DEFAULT_MAX_DEPTH;
	if (!w.o.hash_max_bytes)
		w.o.hash_max_bytes = WALK_DEFAULT_HASH_MAX;
	if (!w.o.hash_budget_bytes)
		w.o.hash_budget_bytes = WALK_DEFAULT_HASH_BUDGET;
	if (!w.o.max_list_bytes)
		w.o.max_list_bytes = WALK_DEFAULT_LIST_BYTES;
	if (!w.o.time_budget_ms)
		w.o.time_budget_ms = WALK_DEFAULT_TIME_MS;
	w.deadline_ns = t0 + (int64_t) (w.o.time_budget_ms > INT64_MAX / 2000000
						? INT64_MAX / 2
						: w.o.time_budget_ms * 1000000);
	w.strip = w.o.strip_uid != (uid_t) -1 &&
		  (w.o.strip_since.tv_sec != 0 || w.o.strip_since.tv_nsec != 0);
	w.m.list_bytes = WALK_JSON_ARRAY_COST;

	if (fstat(root_dirfd, &st) < 0)
		return ab_err_set(err, -errno, "fstat the walk root");
	if (!S_ISDIR(st.st_mode))
		return ab_err_set(err, -ENOTDIR, "the walk root is not a directory");
	w.root_dev = root.dev = st.st_dev;
	root.ino = st.st_ino;
	/* A description of our own: listing must not move the caller's directory offset. */
	root.fd = RETRY_EINTR(openat(root_dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
	if (root.fd < 0)
		return ab_err_set(err, -errno, "reopen the walk root");
	if (fstat(root.fd, &st) < 0 || st.st_dev != root.dev || st.st_ino != root.ino) {
		(void) close(root.fd);
		return ab_err_set(err, -ESTALE, "reopen the walk root");
	}
	if (w.o.dst_dirfd >= 0) {
		if (fstat(w.o.dst_dirfd, &st) < 0 || !S_ISDIR(st.st_mode)) {
			(void) close(root.fd);
			return ab_err_set(err, -ENOTDIR, "the copy destination is not a directory");
		}
		root.dst_fd = w.o.dst_dirfd;
		root.has_dst = true;
		root.dst_dev = st.st_dev;
		root.dst_ino = st.st_ino;
	}

	w.buf = xmalloc(WALK_BUF_SIZE);
	walk_reuse_index(&w);
	walk_origin_index(&w);
	r = walk_push(&w, &root);
	while (r == 0 && w.n > 0) {
		struct walk_frame *f = walk_top(&w);

		if (w.stopped || f->next == f->names.n)
			r = walk_pop(&w);
		else
			r = walk_one(&w, f->names.v[f->next++]);
	}
	walk_free(&w);
	if (r < 0) {
		manifest_done(&w.m);
		return r;
	}
	w.m.walk_ms = (uint64_t) ((now_ns() - t0) / 1000000);
	*ret = w.m;
	return 0;
}

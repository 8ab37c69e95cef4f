/* walk.c: the workspace walker, copier and remover (issue 5; contract in walk.h).
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
#include <nettle/sha2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <linux/limits.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "util/fdutil.h"
#include "util/macro.h"
#include "util/strv.h"
#include "util/xalloc.h"

#ifndef SYS_openat2
#define SYS_openat2 437 /* the same on every architecture */
#endif

#define WALK_DEFAULT_MAX_ENTRIES 100000
#define WALK_DEFAULT_MAX_DEPTH   4096
#define WALK_DEFAULT_HASH_MAX    (64ULL << 20)
#define WALK_LINK_MAX            4096          /* bytes of a symlink target kept */
#define WALK_SPARSE_MIN          (1ULL << 20)  /* smaller files are never flagged sparse */
#define WALK_OPEN_FRAMES         32            /* directory levels whose fds stay open */
#define WALK_MAX_PATH            32768         /* longest manifest path; deeper is not entered */
#define WALK_MAX_NAME_BYTES      (64ULL << 20) /* paths + link targets held by one manifest */
#define WALK_BUF_SIZE            ((size_t) 64 * 1024) /* getdents64 and copy buffer */

#define RM_MAX_KEPT \
	4096 /* entries of one directory that may resist removal before it is given up */

/* Special bits and group/other write never reach a copy; the owner can always read (and
 * enter) it, also when the script left it chmod 000. */
#define WALK_COPY_MODE_MASK    0755
#define WALK_COPY_FILE_MODE(m) (((m) &WALK_COPY_MODE_MASK) | 0600)
#define WALK_COPY_DIR_MODE(m)  (((m) &WALK_COPY_MODE_MASK) | 0700)

#define WALK_RESOLVE \
	(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV)

bool walk_force_no_openat2;

/* openat2() returned ENOSYS once: Linux < 5.6, or a seccomp filter that hides it. */
static bool openat2_missing;

static const char *const type_names[AB_ENTRY_TYPE_COUNT] = {
	[AB_ENTRY_FILE] = "file",         [AB_ENTRY_DIR] = "dir",
	[AB_ENTRY_SYMLINK] = "symlink",   [AB_ENTRY_FIFO] = "fifo",
	[AB_ENTRY_SOCKET] = "socket",     [AB_ENTRY_CHARDEV] = "chardev",
	[AB_ENTRY_BLOCKDEV] = "blockdev", [AB_ENTRY_OTHER] = "other",
};

static const char *const flag_names[] = {
	"symlink", "special",    "setid",    "hardlink", "sparse",
	"too_big", "unreadable", "other_fs", "over_cap",
};

static const char zeros[WALK_BUF_SIZE];

/* The mount id of fd, or -errno. name_to_handle_at() with no room for the handle still
 * reports the mount id (with EOVERFLOW); filesystems without file handles refuse before that,
 * so /proc/self/fdinfo is the second source. */
static int
mount_id_of(int fd)
{
	union {
		struct file_handle fh;
		char space[sizeof(struct file_handle) + 8];
	} h = { .fh.handle_bytes = 0 };
	char path[64], buf[4096];
	const char *p;
	int id = -1;

	if (name_to_handle_at(fd, "", &h.fh, &id, AT_EMPTY_PATH) == 0 || errno == EOVERFLOW)
		return id;
	(void) snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	if (read_small_file_at(AT_FDCWD, path, buf, sizeof(buf)) < 0)
		return -ENOENT;
	p = strstr(buf, "mnt_id:");
	if (!p || sscanf(p, "mnt_id: %d", &id) != 1 || id < 0)
		return -ENOENT;
	return id;
}

/* Opens the single component `name` below dirfd without following a symlink or crossing a
 * mount. Returns an fd or -errno: -ELOOP for a symlink, -EXDEV for a mount point (bind mounts
 * of the same filesystem included). */
static int
open_beneath(int dirfd, const char *name, int flags)
{
	int fd;

	flags |= O_NOFOLLOW | O_CLOEXEC | O_NOCTTY;
	if (!walk_force_no_openat2 && !openat2_missing) {
		struct open_how how = {
			.flags = (uint64_t) (unsigned) flags,
			.resolve = WALK_RESOLVE,
		};
		long r = RETRY_EINTR(syscall(SYS_openat2, dirfd, name, &how, sizeof(how)));

		if (r >= 0)
			return (int) r;
		if (errno != ENOSYS)
			return -errno;
		openat2_missing = true;
	}
	/* fallback: openat2() needs Linux 5.6. Callers also compare st_dev; the mount id catches
	 * a bind mount of the same filesystem when it can be read. */
	fd = RETRY_EINTR(openat(dirfd, name, flags));
	if (fd < 0)
		return -errno;
	{
		int a = mount_id_of(dirfd), b = a >= 0 ? mount_id_of(fd) : -1;

		if (a >= 0 && b >= 0 && a != b) {
			(void) close(fd);
			return -EXDEV;
		}
	}
	return fd;
}

/* Reopens the parent of the directory dirfd and checks it is the one recorded on the way
 * down. Returns an fd or -errno (-ESTALE when the tree was rearranged under us). */
static int
reopen_parent(int dirfd, dev_t dev, ino_t ino)
{
	cleanup_fd int fd = -1;
	struct stat st;

	fd = RETRY_EINTR(openat(dirfd, "..", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISDIR(st.st_mode) || st.st_dev != dev || st.st_ino != ino)
		return -ESTALE;
	return steal_fd(&fd);
}

static bool
is_dot_or_dotdot(const char *s)
{
	return s[0] == '.' && (s[1] == '\0' || (s[1] == '.' && s[2] == '\0'));
}

static bool
is_fd_exhaustion(int r)
{
	return r == -EMFILE || r == -ENFILE || r == -ENOMEM;
}

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

char *
walk_escape_name(const char *raw)
{
	static const char hex[] = "0123456789abcdef";
	size_t len, j = 0;
	char *out;

	if (!raw)
		return NULL;
	len = strlen(raw);
	out = xmalloc(len * 4 + 1);
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char) raw[i];

		if (c >= 0x20 && c < 0x7f && c != '\\') {
			out[j++] = (char) c;
			continue;
		}
		out[j++] = '\\';
		out[j++] = 'x';
		out[j++] = hex[c >> 4];
		out[j++] = hex[c & 0xf];
	}
	out[j] = '\0';
	return out;
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

static void
json_put(json_t *obj, const char *key, json_t *value)
{
	/* Every string here is printable ASCII, so only allocation can fail. */
	if (!value || json_object_set_new(obj, key, value) < 0)
		abort();
}

json_t *
manifest_to_json(const struct ab_manifest *m)
{
	json_t *arr = json_array();

	if (!arr)
		abort();
	for (size_t i = 0; m && i < m->n; i++) {
		const struct ab_entry *e = &m->entries[i];
		cleanup_free char *path = walk_escape_name(e->path ? e->path : "");
		json_t *o = json_object();
		char mode[16];

		if (!o)
			abort();
		(void) snprintf(mode, sizeof(mode), "%04o", (unsigned) (e->mode & 07777));
		json_put(o, "path", json_string(path));
		json_put(
			o, "type",
			json_string(e->type < AB_ENTRY_TYPE_COUNT ? type_names[e->type] : "other"));
		json_put(o, "size", json_integer((json_int_t) e->size));
		json_put(o, "blocks_bytes", json_integer((json_int_t) e->blocks_bytes));
		json_put(o, "mode", json_string(mode));
		if (e->sha256[0])
			json_put(o, "sha256", json_string(e->sha256));
		if (e->link_target) {
			cleanup_free char *t = walk_escape_name(e->link_target);

			json_put(o, "link_target", json_string(t));
		}
		if (e->flags) {
			json_t *flags = json_array();

			if (!flags)
				abort();
			for (size_t b = 0; b < ARRAY_SIZE(flag_names); b++)
				if (e->flags & (1U << b) &&
				    json_array_append_new(flags, json_string(flag_names[b])) < 0)
					abort();
			json_put(o, "flags", flags);
		}
		json_put(o, "collected", json_boolean(e->collected));
		if (e->reason)
			json_put(o, "reason", json_string(e->reason));
		if (json_array_append_new(arr, o) < 0)
			abort();
	}
	return arr;
}

/* ---- walk_tree ---- */

struct walk_frame {
	int fd;       /* source directory; -1 while evicted */
	int dst_fd;   /* its copy; -1 while evicted or when this level is not copied */
	bool has_dst; /* this level is copied */
	bool own_dst; /* dst_fd is ours (false for the caller's destination) */
	dev_t dev, dst_dev;
	ino_t ino, dst_ino;
	mode_t dst_mode; /* sanitized mode, applied to the copy once its contents are in */
	size_t entry;    /* manifest index of this directory; SIZE_MAX for the root */
	uint64_t depth;  /* 0 for the root */
	struct strv names;
	size_t next;
};

struct walk {
	struct ab_walk_opts o; /* with defaults filled in */
	struct ab_manifest m;
	dev_t root_dev;
	uint64_t name_bytes;  /* bytes held in manifest paths and link targets */
	bool listing_stopped; /* entry cap: nothing more is listed */
	bool stopped;         /* memory cap: nothing more is recorded */
	struct walk_frame *st;
	size_t n, cap;
	char *buf;
	struct ab_err *err;
};

static struct walk_frame *
walk_top(struct walk *w)
{
	return &w->st[w->n - 1];
}

static struct ab_entry *
walk_entry_at(struct walk *w, size_t i)
{
	return &w->m.entries[i];
}

/* Reasons that only inform: the entry is still collected. Any other reason replaces them. */
static const char reason_setid[] = "setuid/setgid/sticky bit (stripped on copy)";
static const char reason_sparse[] = "sparse file (holes kept on copy)";

/* Records that a cap stopped the walk or the listing; the first cap is the one named. */
static void
truncate_by(struct walk *w, const char *cap)
{
	w->m.truncated = true;
	if (!w->m.truncated_by)
		w->m.truncated_by = cap;
}

static void
entry_mark(struct ab_entry *e, unsigned flag, const char *reason)
{
	e->flags |= flag;
	if (!e->reason || e->reason == reason_setid || e->reason == reason_sparse)
		e->reason = reason;
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
			if (f->entry == SIZE_MAX)
				return ab_err_set(w->err, -errno, "list the walk root");
			entry_mark(walk_entry_at(w, f->entry), AB_FLAG_UNREADABLE,
				   "directory listing failed part way");
			return 0;
		}
		if (n == 0)
			return 0;
		for (ssize_t off = 0; off < n;) {
			struct dirent64 *d = (struct dirent64 *) (void *) (w->buf + off);

			off += d->d_reclen;
			if (is_dot_or_dotdot(d->d_name))
				continue;
			if (w->m.total_entries >= w->o.max_entries) {
				w->listing_stopped = true;
				truncate_by(w, "the entry cap");
				if (f->entry != SIZE_MAX)
					entry_mark(walk_entry_at(w, f->entry), AB_FLAG_OVER_CAP,
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

/* The level on top is done: give its copy the sanitized mode, bring the parent's fds back if
 * they were evicted, and drop the level. */
static int
walk_pop(struct walk *w)
{
	struct walk_frame *f = walk_top(w);
	int r = 0;

	if (f->own_dst && f->dst_fd >= 0 && fchmod(f->dst_fd, f->dst_mode) < 0)
		r = ab_err_set(w->err, -errno, "chmod a copied directory");
	if (r == 0 && w->n >= 2) {
		struct walk_frame *p = &w->st[w->n - 2];

		if (p->fd < 0) {
			p->fd = reopen_parent(f->fd, p->dev, p->ino);
			if (p->fd < 0)
				r = ab_err_set(w->err, p->fd,
					       "reopen a workspace directory on the way up");
		}
		if (r == 0 && p->has_dst && p->dst_fd < 0) {
			p->dst_fd = reopen_parent(f->dst_fd, p->dst_dev, p->dst_ino);
			if (p->dst_fd < 0)
				r = ab_err_set(w->err, p->dst_fd,
					       "reopen a destination directory on the way up");
		}
	}
	frame_close(f);
	w->n--;
	return r;
}

static void
sha256_hex(struct sha256_ctx *ctx, char out[65])
{
	static const char hex[] = "0123456789abcdef";
	uint8_t d[SHA256_DIGEST_SIZE];

	sha256_digest(ctx, sizeof(d), d);
	for (size_t i = 0; i < sizeof(d); i++) {
		out[2 * i] = hex[d[i] >> 4];
		out[2 * i + 1] = hex[d[i] & 0xf];
	}
	out[64] = '\0';
}

enum copy_result {
	COPY_OK = 0,
	COPY_SOURCE_FAILED = 1, /* the workspace file could not be read in full */
};

/* Reads [0, size) of src once, feeding the hash (holes as zeros) and writing data ranges to
 * dst at the same offsets so that holes stay holes. Never reads past size. Returns COPY_OK,
 * COPY_SOURCE_FAILED, or -errno when writing the copy failed. */
static int
copy_data(int src, int dst, uint64_t size, struct sha256_ctx *hash, char *buf,
	  uint64_t *ret_written)
{
	uint64_t off = 0, written = 0;
	bool seekable = true;

	while (off < size) {
		uint64_t data = off, hole = size;

		if (seekable) {
			off_t d = lseek(src, (off_t) off, SEEK_DATA);

			if (d < 0 && errno == ENXIO)
				data = size; /* only a hole is left */
			else if (d < 0)
				seekable = false; /* no SEEK_DATA here: treat everything as data */
			else
				data = (uint64_t) d < size ? (uint64_t) d : size;
		}
		if (seekable && data < size) {
			off_t h = lseek(src, (off_t) data, SEEK_HOLE);

			if (h < 0 || (uint64_t) h <= data)
				seekable = false;
			else
				hole = (uint64_t) h < size ? (uint64_t) h : size;
		}
		for (; hash && off < data;) {
			size_t n =
				data - off < sizeof(zeros) ? (size_t) (data - off) : sizeof(zeros);

			sha256_update(hash, n, (const uint8_t *) zeros);
			off += n;
		}
		off = data;
		while (off < hole) {
			size_t want =
				hole - off < WALK_BUF_SIZE ? (size_t) (hole - off) : WALK_BUF_SIZE;
			ssize_t r = RETRY_EINTR(pread(src, buf, want, (off_t) off));

			if (r <= 0)
				return COPY_SOURCE_FAILED; /* read error, or it shrank */
			if (hash)
				sha256_update(hash, (size_t) r, (const uint8_t *) buf);
			for (ssize_t done = 0; dst >= 0 && done < r;) {
				ssize_t k = RETRY_EINTR(pwrite(dst, buf + done, (size_t) (r - done),
							       (off_t) off + done));

				if (k < 0)
					return -errno;
				if (k == 0)
					return -ENOSPC;
				done += k;
			}
			off += (uint64_t) r;
			written += (uint64_t) r;
		}
	}
	if (dst >= 0 && ftruncate(dst, (off_t) size) < 0)
		return -errno;
	*ret_written = dst >= 0 ? written : 0;
	return COPY_OK;
}

static int
walk_file(struct walk *w, size_t idx, const char *name, const struct stat *st)
{
	struct walk_frame *f = walk_top(w);
	struct ab_entry *e = walk_entry_at(w, idx);
	uint64_t size = e->size, written = 0;
	cleanup_fd int fd = -1, dfd = -1;
	struct sha256_ctx ctx;
	bool copy, hash;
	struct stat fst;
	int r;

	if (st->st_nlink > 1)
		entry_mark(e, AB_FLAG_HARDLINK, "hard link (may be a host file; not opened)");
	if (w->o.max_file_bytes && size > w->o.max_file_bytes)
		entry_mark(e, AB_FLAG_TOO_BIG, "over the per-file size cap");
	if (size > WALK_SPARSE_MIN && e->blocks_bytes < size / 2)
		e->flags |= AB_FLAG_SPARSE;
	if (st->st_mode & 07000)
		e->flags |= AB_FLAG_SETID;
	w->m.total_bytes += size;

	copy = f->has_dst && !(e->flags & ~(unsigned) (AB_FLAG_SPARSE | AB_FLAG_SETID));
	if (copy && w->o.max_total_bytes && size > w->o.max_total_bytes - w->m.copied_bytes) {
		entry_mark(e, AB_FLAG_OVER_CAP, "over the total size cap");
		truncate_by(w, "the total size cap");
		copy = false;
	}
	if (w->o.dst_dirfd >= 0 && !f->has_dst && !e->reason)
		e->reason = "inside a directory that was not copied";
	hash = !(e->flags & AB_FLAG_HARDLINK) && size <= w->o.hash_max_bytes;
	if (e->flags & AB_FLAG_SETID && !e->reason)
		e->reason = reason_setid;
	if (e->flags & AB_FLAG_SPARSE && !e->reason)
		e->reason = reason_sparse;
	if (!copy && !hash)
		return 0;

	fd = open_beneath(f->fd, name, O_RDONLY | O_NONBLOCK);
	if (fd < 0) {
		if (is_fd_exhaustion(fd))
			return ab_err_set(w->err, fd, "open a workspace file");
		if (fd == -EXDEV)
			entry_mark(e, AB_FLAG_OTHER_FS, "mount point (not read)");
		else
			entry_mark(e, AB_FLAG_UNREADABLE, "cannot be opened");
		e->collected = false;
		return 0;
	}
	/* Still the regular file lstat saw? A FIFO swapped in is never read (and never blocked
	 * on: O_NONBLOCK). */
	if (fstat(fd, &fst) < 0 || !S_ISREG(fst.st_mode) || fst.st_dev != st->st_dev ||
	    fst.st_ino != st->st_ino || fst.st_dev != w->root_dev) {
		entry_mark(e, AB_FLAG_UNREADABLE, "changed while walking");
		return 0;
	}

	if (copy) {
		dfd = RETRY_EINTR(openat(f->dst_fd, name,
					 O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
					 0600));
		if (dfd < 0 && errno == EEXIST) {
			e->reason = "destination name already exists (not overwritten)";
			copy = false;
		} else if (dfd < 0) {
			cleanup_free char *p = walk_escape_name(e->path);

			return ab_err_set(w->err, -errno, "create the copy of '%s'", p);
		}
	}
	if (copy && w->o.chown_uid != (uid_t) -1 &&
	    fchown(dfd, w->o.chown_uid, w->o.chown_gid) < 0) {
		r = -errno;
		(void) unlinkat(f->dst_fd, name, 0);
		return ab_err_set(w->err, r, "chown a copied file");
	}
	if (!copy && !hash)
		return 0;

	if (hash)
		sha256_init(&ctx);
	r = copy_data(fd, copy ? dfd : -1, size, hash ? &ctx : NULL, w->buf, &written);
	if (r != COPY_OK) {
		if (copy)
			(void) unlinkat(f->dst_fd, name, 0); /* our own partial copy */
		if (r < 0) {
			cleanup_free char *p = walk_escape_name(e->path);

			return ab_err_set(w->err, r, "write the copy of '%s'", p);
		}
		entry_mark(e, AB_FLAG_UNREADABLE, "read failed or file changed while reading");
		return 0;
	}
	if (hash)
		sha256_hex(&ctx, e->sha256);
	if (copy) {
		if (fchmod(dfd, WALK_COPY_FILE_MODE(st->st_mode)) < 0) {
			r = -errno;
			(void) unlinkat(f->dst_fd, name, 0);
			return ab_err_set(w->err, r, "chmod a copied file");
		}
		e->collected = true;
		w->m.copied_bytes += written;
	}
	return 0;
}

static int
walk_dir(struct walk *w, size_t idx, const char *name, const struct stat *st)
{
	struct walk_frame *f = walk_top(w);
	struct ab_entry *e = walk_entry_at(w, idx);
	cleanup_fd int fd = -1, dfd = -1;
	struct walk_frame nf = { .fd = -1, .dst_fd = -1, .own_dst = true };
	struct stat fst;

	if (st->st_mode & 07000) {
		e->flags |= AB_FLAG_SETID;
		e->reason = reason_setid;
	}
	if (w->listing_stopped) {
		e->flags |= AB_FLAG_OVER_CAP;
		e->reason = "entry cap reached (not listed)";
		return 0;
	}
	if (f->depth + 1 >= w->o.max_depth) {
		e->flags |= AB_FLAG_OVER_CAP;
		e->reason = "depth cap reached (not entered)";
		truncate_by(w, "the depth cap");
		return 0;
	}
	if (strlen(e->path) + 1 + NAME_MAX >= WALK_MAX_PATH) {
		e->flags |= AB_FLAG_OVER_CAP;
		e->reason = "path length cap reached (not entered)";
		truncate_by(w, "the path length cap");
		return 0;
	}

	fd = open_beneath(f->fd, name, O_RDONLY | O_DIRECTORY);
	if (fd < 0) {
		if (is_fd_exhaustion(fd))
			return ab_err_set(w->err, fd, "open a workspace directory");
		if (fd == -EXDEV)
			entry_mark(e, AB_FLAG_OTHER_FS, "mount point (not entered)");
		else
			entry_mark(e, AB_FLAG_UNREADABLE, "cannot be opened (not entered)");
		return 0;
	}
	if (fstat(fd, &fst) < 0 || !S_ISDIR(fst.st_mode) || fst.st_dev != st->st_dev ||
	    fst.st_ino != st->st_ino || fst.st_dev != w->root_dev) {
		entry_mark(e, AB_FLAG_UNREADABLE, "changed while walking");
		return 0;
	}
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
			p = walk_escape_name(e->path);
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
	nf.depth = f->depth + 1;
	nf.fd = steal_fd(&fd);
	nf.dst_fd = steal_fd(&dfd);
	return walk_push(w, &nf);
}

/* Records one entry of the directory on top of the stack, and enters it if it is one. */
static int
walk_one(struct walk *w, const char *name)
{
	struct walk_frame *f = walk_top(w);
	const char *prefix = f->entry == SIZE_MAX ? NULL : walk_entry_at(w, f->entry)->path;
	char *path = prefix ? xasprintf("%s/%s", prefix, name) : xstrdup(name);
	struct ab_entry *e;
	struct stat st;
	size_t idx;

	if (w->name_bytes + strlen(path) + 1 > WALK_MAX_NAME_BYTES) {
		free(path);
		w->stopped = true;
		truncate_by(w, "the name memory cap");
		return 0;
	}
	w->name_bytes += strlen(path) + 1;
	if (w->m.n == w->m.cap) {
		w->m.cap = w->m.cap ? w->m.cap * 2 : 64;
		w->m.entries = xrealloc(w->m.entries, w->m.cap * sizeof(*w->m.entries));
	}
	idx = w->m.n++;
	e = walk_entry_at(w, idx);
	memset(e, 0, sizeof(*e));
	e->path = path;

	if (fstatat(f->fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		e->type = AB_ENTRY_OTHER;
		entry_mark(e, AB_FLAG_UNREADABLE, "vanished or cannot be examined");
		return 0;
	}
	e->type = type_of(st.st_mode);
	e->size = st.st_size > 0 ? (uint64_t) st.st_size : 0;
	e->blocks_bytes = (uint64_t) st.st_blocks * 512;
	e->mode = st.st_mode & 07777;
	if (st.st_dev != w->root_dev) {
		entry_mark(e, AB_FLAG_OTHER_FS, "on another filesystem (mount point; not entered)");
		return 0;
	}

	switch (e->type) {
	case AB_ENTRY_FILE:
		return walk_file(w, idx, name, &st);
	case AB_ENTRY_DIR:
		return walk_dir(w, idx, name, &st);
	case AB_ENTRY_SYMLINK: {
		char target[WALK_LINK_MAX + 1];
		ssize_t n = readlinkat(f->fd, name, target, WALK_LINK_MAX);

		entry_mark(e, AB_FLAG_SYMLINK, "symbolic link (not followed)");
		if (n >= 0 && w->name_bytes + (size_t) n + 1 <= WALK_MAX_NAME_BYTES) {
			e->link_target = xstrndup(target, (size_t) n);
			w->name_bytes += (size_t) n + 1;
		} else if (n < 0) {
			e->flags |= AB_FLAG_UNREADABLE;
		}
		return 0;
	}
	case AB_ENTRY_FIFO:
	case AB_ENTRY_SOCKET:
	case AB_ENTRY_CHARDEV:
	case AB_ENTRY_BLOCKDEV:
	case AB_ENTRY_OTHER:
	case AB_ENTRY_TYPE_COUNT:
		entry_mark(e, AB_FLAG_SPECIAL, "special file (fifo, socket or device; not opened)");
		return 0;
	}
	return 0;
}

static void
walk_free(struct walk *w)
{
	while (w->n > 0)
		frame_close(&w->st[--w->n]);
	free(w->st);
	free(w->buf);
	w->st = NULL;
	w->buf = NULL;
}

int
walk_tree(int root_dirfd, const struct ab_walk_opts *o, struct ab_manifest *ret, struct ab_err *err)
{
	struct walk w = { .err = err };
	struct walk_frame root = { .fd = -1, .dst_fd = -1, .entry = SIZE_MAX };
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
	*ret = w.m;
	return 0;
}

/* ---- walk_remove_tree ---- */

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
	/* fallback: glibc needs /proc (or Linux 6.6 fchmodat2) for AT_SYMLINK_NOFOLLOW; chmod by
	 * name only what fstatat just showed to be a directory */
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	if (!S_ISDIR(st.st_mode))
		return -ENOTDIR;
	return fchmodat(dirfd, name, 0700, 0) < 0 ? -errno : 0;
}

/* Opens the directory `name` below dirfd for removal, chmodding it first if it is locked.
 * Checks it is the directory st describes. Returns an fd or -errno. */
static int
rm_open_dir(int dirfd, const char *name, const struct stat *st)
{
	cleanup_fd int fd = -1;
	struct stat fst;

	fd = open_beneath(dirfd, name, O_RDONLY | O_DIRECTORY);
	if (fd == -EACCES || fd == -EPERM) {
		int r = rm_chmod_dir_at(dirfd, name);

		if (r < 0)
			return r;
		fd = open_beneath(dirfd, name, O_RDONLY | O_DIRECTORY);
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
			if (!is_dot_or_dotdot(d->d_name) && !strv_has(&f->kept, d->d_name))
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
		p->fd = reopen_parent(f->fd, p->dev, p->ino);
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

	if (!name || !*name || strchr(name, '/') || is_dot_or_dotdot(name))
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

/* walk-copy.c: a regular file of the walk (walk_file): flagged, then read once, feeding the
 * hash and writing the copy (holes kept), never through a symlink, never past its size. */
#include <errno.h>
#include <fcntl.h>
#include <nettle/sha2.h>
#include <stdint.h>
#include <unistd.h>

#include <sys/stat.h>

#include "../../util/fdutil.h"
#include "../../util/macro.h"
#include "walk-internal.h"

#define WALK_SPARSE_MIN (1ULL << 20) /* smaller files are never flagged sparse */

static const char zeros[WALK_BUF_SIZE];

enum copy_result {
	COPY_OK = 0,
	COPY_SOURCE_FAILED = 1, /* the workspace file could not be read in full */
	COPY_TIMED_OUT = 2,     /* the time budget ran out part way */
};

/* Reads [0, size) of src once, feeding the hash (holes as zeros) and writing data ranges to
 * dst at the same offsets so that holes stay holes. Never reads past size. Returns COPY_OK,
 * COPY_SOURCE_FAILED, COPY_TIMED_OUT (past deadline_ns), or -errno when writing the copy
 * failed. */
static int
copy_data(int src, int dst, uint64_t size, struct sha256_ctx *hash, char *buf, int64_t deadline_ns,
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
			ssize_t r;

			if (now_ns() >= deadline_ns)
				return COPY_TIMED_OUT;
			r = RETRY_EINTR(pread(src, buf, want, (off_t) off));
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

int
walk_file(struct walk *w, struct ab_entry *e, const char *name, const struct stat *st)
{
	struct walk_frame *f = walk_top(w);
	uint64_t size = e->size, written = 0;
	cleanup_fd int fd = -1, dfd = -1;
	struct sha256_ctx ctx;
	bool copy, hash;
	struct stat fst;
	int r;

	if (st->st_nlink > 1)
		walk_entry_mark(e, AB_FLAG_HARDLINK, "hard link (may be a host file; not opened)");
	if (w->o.max_file_bytes && size > w->o.max_file_bytes)
		walk_entry_mark(e, AB_FLAG_TOO_BIG, "over the per-file size cap");
	if (size > WALK_SPARSE_MIN && e->blocks_bytes < size / 2)
		e->flags |= AB_FLAG_SPARSE;
	if (st->st_mode & 07000)
		e->flags |= AB_FLAG_SETID;
	w->m.total_bytes += size;

	copy = f->has_dst && !(e->flags & ~(unsigned) (AB_FLAG_SPARSE | AB_FLAG_SETID));
	if (copy && w->o.max_total_bytes && size > w->o.max_total_bytes - w->m.copied_bytes) {
		walk_entry_mark(e, AB_FLAG_OVER_CAP, "over the total size cap");
		walk_truncate_by(w, AB_CAP_TOTAL_BYTES);
		copy = false;
	}
	if (w->o.dst_dirfd >= 0 && !f->has_dst && !e->reason)
		e->reason = "inside a directory that was not copied";
	if (e->flags & AB_FLAG_SETID && !e->reason)
		e->reason = walk_reason_setid;
	if (e->flags & AB_FLAG_SPARSE && !e->reason)
		e->reason = walk_reason_sparse;
	/* only what is listed is hashed: nobody would see the hash of the rest */
	hash = e->path && walk_hash_wanted(w, e);
	if (!copy && !hash)
		return walk_strip_at(w, e, f->fd, name, st);

	fd = walk_open_beneath(f->fd, name, O_RDONLY | O_NONBLOCK);
	if (fd < 0) {
		if (walk_is_fd_exhaustion(fd))
			return ab_err_set(w->err, fd, "open a workspace file");
		if (fd == -EXDEV)
			walk_entry_mark(e, AB_FLAG_OTHER_FS, "mount point (not read)");
		else
			walk_entry_mark(e, AB_FLAG_UNREADABLE, "cannot be opened");
		e->collected = false;
		return fd == -EXDEV ? 0 : walk_strip_at(w, e, f->fd, name, st);
	}
	/* Still the regular file lstat saw? A FIFO swapped in is never read (and never blocked
	 * on: O_NONBLOCK). */
	if (fstat(fd, &fst) < 0 || !S_ISREG(fst.st_mode) || fst.st_dev != st->st_dev ||
	    fst.st_ino != st->st_ino || fst.st_dev != w->root_dev) {
		walk_entry_mark(e, AB_FLAG_UNREADABLE, "changed while walking");
		return 0;
	}
	walk_strip_fd(w, e, fd, &fst, false);

	if (copy) {
		dfd = RETRY_EINTR(openat(f->dst_fd, name,
					 O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
					 0600));
		if (dfd < 0 && errno == EEXIST) {
			e->reason = "destination name already exists (not overwritten)";
			copy = false;
		} else if (dfd < 0) {
			cleanup_free char *p = walk_entry_display(e, name);

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
	r = copy_data(fd, copy ? dfd : -1, size, hash ? &ctx : NULL, w->buf, w->deadline_ns,
		      &written);
	if (r != COPY_OK) {
		if (copy)
			(void) unlinkat(f->dst_fd, name, 0); /* our own partial copy */
		e->collected = false;
		if (r < 0) {
			cleanup_free char *p = walk_entry_display(e, name);

			return ab_err_set(w->err, r, "write the copy of '%s'", p);
		}
		if (r == COPY_TIMED_OUT) {
			(void) walk_out_of_time(w);
			walk_entry_mark(e, AB_FLAG_OVER_CAP,
					"walk time budget reached (not read in full)");
			return 0;
		}
		walk_entry_mark(e, AB_FLAG_UNREADABLE, "read failed or file changed while reading");
		return 0;
	}
	if (hash)
		walk_sha256_hex(&ctx, e->sha256);
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

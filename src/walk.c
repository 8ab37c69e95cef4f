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
#define WALK_DEFAULT_HASH_BUDGET (512ULL << 20)
#define WALK_DEFAULT_LIST_BYTES  (8ULL << 20)
#define WALK_DEFAULT_TIME_MS     60000
#define WALK_LINK_MAX            4096          /* bytes of a symlink target kept */
#define WALK_SPARSE_MIN          (1ULL << 20)  /* smaller files are never flagged sparse */
#define WALK_OPEN_FRAMES         32            /* directory levels whose fds stay open */
#define WALK_MAX_NAME_BYTES      (64ULL << 20) /* paths + link targets held by one manifest */
#define WALK_BUF_SIZE            ((size_t) 64 * 1024) /* getdents64 and copy buffer */

#define RM_MAX_KEPT \
	4096 /* entries of one directory that may resist removal before it is given up */

/* Special bits and group/other write never reach a copy; the owner can always read (and
 * enter) it, also when the script left it chmod 000. */
#define WALK_COPY_MODE_MASK    0755
#define WALK_COPY_FILE_MODE(m) (((m) &WALK_COPY_MODE_MASK) | 0600)
#define WALK_COPY_DIR_MODE(m)  (((m) &WALK_COPY_MODE_MASK) | 0700)

/* What strip_uid removes in place. */

/* The JSON cost model (entry_json_cost): indentation as deep as `collected.files` in the report
 * with JSON_INDENT(2), plus slack, and the longest reason any entry can get. */
#define JSON_ITEM_INDENT 8
#define JSON_KEY_INDENT  10
#define JSON_FLAG_INDENT 12
#define WALK_REASON_MAX  100

#define WALK_NO_ENTRY SIZE_MAX

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

static const char *const flag_names[AB_FLAG_COUNT] = {
	"symlink", "special",    "setid",    "hardlink", "sparse",
	"too_big", "unreadable", "other_fs", "over_cap", "stripped",
};

/* per enum ab_walk_cap bit: the report's name, and the text of truncated_by */
static const char *const cap_names[AB_CAP_COUNT] = {
	"entries", "depth", "path_length", "manifest_size", "total_bytes", "time", "hash_budget",
};
static const char *const cap_texts[AB_CAP_COUNT] = {
	"the entry cap",         "the depth cap",      "the path length cap",
	"the manifest size cap", "the total size cap", "the walk time budget",
	"the hash budget",
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

	/* openat2() refuses O_PATH with any flag but O_DIRECTORY|O_NOFOLLOW|O_CLOEXEC */
	flags |= O_NOFOLLOW | O_CLOEXEC | (flags & O_PATH ? 0 : O_NOCTTY);
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

const char *
walk_cap_name(enum ab_walk_cap cap)
{
	for (size_t b = 0; b < AB_CAP_COUNT; b++)
		if ((unsigned) cap == 1U << b)
			return cap_names[b];
	return NULL;
}

char *
walk_caps_text(unsigned caps)
{
	char *out = xstrdup(""), *next;
	unsigned left = caps & ((1U << AB_CAP_COUNT) - 1);

	for (size_t b = 0; b < AB_CAP_COUNT; b++) {
		if (!(left & (1U << b)))
			continue;
		left &= ~(1U << b);
		next = xasprintf("%s%s%s", out, !*out ? "" : left ? ", " : " and ", cap_texts[b]);
		free(out);
		out = next;
	}
	return out;
}

/* ---- the listing as JSON, and what it may cost ---- */

static void
json_put(json_t *obj, const char *key, json_t *value)
{
	/* Every string here is printable ASCII, so only allocation can fail. */
	if (!value || json_object_set_new(obj, key, value) < 0)
		abort();
}

/* Bytes of the JSON string a raw name becomes: walk_escape_name() turns every byte but
 * printable ASCII other than '\' into \xNN, and jansson then writes that '\' as "\\" and a '"'
 * as "\"". */
static uint64_t
raw_str_cost(const char *raw)
{
	uint64_t n = 2;

	for (const unsigned char *c = (const unsigned char *) raw; *c; c++)
		n += *c >= 0x20 && *c < 0x7f && *c != '\\' ? 1 + (*c == '"') : 5;
	return n;
}

/* The same for a static ASCII text (a reason). */
static uint64_t
text_cost(const char *s)
{
	uint64_t n = 2;

	for (; *s; s++)
		n += 1 + (*s == '"' || *s == '\\');
	return n;
}

static uint64_t
digits(uint64_t v)
{
	uint64_t n = 1;

	while (v >= 10) {
		v /= 10;
		n++;
	}
	return n;
}

/* "\n<indent>\"key\": value," */
static uint64_t
key_cost(const char *key, uint64_t value)
{
	return 1 + JSON_KEY_INDENT + 2 + strlen(key) + 2 + value + 1;
}

/* An upper bound of the bytes e takes in manifest_to_json()'s JSON_INDENT(2) dump, nested as
 * deep as `collected.files` in the report. worst: as if every flag, a sha256, the longest
 * reason and 20-digit sizes were still to come (what an entry may grow to once recorded). */
static uint64_t
entry_json_cost(const struct ab_entry *e, bool worst)
{
	uint64_t c = 2 * (1 + JSON_ITEM_INDENT + 1) + 1, fl = 0;

	c += key_cost("path", raw_str_cost(e->path ? e->path : ""));
	c += key_cost("type",
		      2 + (worst || e->type >= AB_ENTRY_TYPE_COUNT ? 8 /* "blockdev" */
								   : strlen(type_names[e->type])));
	c += key_cost("size", worst ? 20 : digits(e->size));
	c += key_cost("blocks_bytes", worst ? 20 : digits(e->blocks_bytes));
	c += key_cost("mode", 6);
	if (worst || e->sha256[0])
		c += key_cost("sha256", 66);
	if (e->link_target)
		c += key_cost("link_target", raw_str_cost(e->link_target));
	for (size_t b = 0; b < AB_FLAG_COUNT; b++)
		if (worst || e->flags & (1U << b))
			fl += 1 + JSON_FLAG_INDENT + 2 + strlen(flag_names[b]) + 1;
	if (fl)
		c += key_cost("flags", 1 + fl + 1 + JSON_KEY_INDENT + 1);
	c += key_cost("collected", 5);
	if (worst)
		c += key_cost("reason", 2 + WALK_REASON_MAX);
	else if (e->reason)
		c += key_cost("reason", text_cost(e->reason));
	return c;
}

/* "[", its closing line, and the key around it */
#define JSON_ARRAY_COST (1 + 1 + JSON_ITEM_INDENT + 1 + 16)

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
			for (size_t b = 0; b < AB_FLAG_COUNT; b++)
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

json_t *
manifest_summary_json(const struct ab_manifest *m)
{
	json_t *o = json_object(), *by = json_array();

	if (!o || !by)
		abort();
	for (size_t b = 0; b < AB_CAP_COUNT; b++)
		if (m->truncated_caps & (1U << b) &&
		    json_array_append_new(by, json_string(cap_names[b])) < 0)
			abort();
	json_put(o, "listed", json_integer((json_int_t) m->n));
	json_put(o, "entries", json_integer((json_int_t) m->total_entries));
	json_put(o, "unlisted", json_integer((json_int_t) m->unlisted));
	json_put(o, "truncated", json_boolean(m->truncated));
	json_put(o, "truncated_by", by);
	json_put(o, "list_bytes", json_integer((json_int_t) m->list_bytes));
	json_put(o, "hashed_bytes", json_integer((json_int_t) m->hashed_bytes));
	json_put(o, "hashes_reused", json_integer((json_int_t) m->hashes_reused));
	json_put(o, "unhashed", json_integer((json_int_t) m->unhashed));
	json_put(o, "stripped", json_integer((json_int_t) m->stripped));
	json_put(o, "strip_failed", json_integer((json_int_t) m->strip_failed));
	json_put(o, "walk_ms", json_integer((json_int_t) m->walk_ms));
	return o;
}

/* ---- walk_tree ---- */

struct walk_frame {
	int fd;       /* source directory; -1 while evicted */
	int dst_fd;   /* its copy; -1 while evicted or when this level is not copied */
	bool has_dst; /* this level is copied */
	bool own_dst; /* dst_fd is ours (false for the caller's destination) */
	bool listed;  /* its entries may be listed: the root, or a listed directory */
	dev_t dev, dst_dev;
	ino_t ino, dst_ino;
	mode_t dst_mode;   /* sanitized mode, applied to the copy once its contents are in */
	size_t entry;      /* manifest index of this directory; WALK_NO_ENTRY for the root and
			    * for directories that are not listed */
	uint64_t reserved; /* list_bytes held for its entry until it is done */
	uint64_t depth;    /* 0 for the root */
	uint64_t path_len; /* bytes of its path below the root */
	struct strv names;
	size_t next;
};

/* hashes_from, by inode */
struct walk_reuse {
	uint64_t ino;
	size_t idx;
};

struct walk {
	struct ab_walk_opts o; /* with defaults filled in */
	struct ab_manifest m;
	dev_t root_dev;
	uint64_t name_bytes;     /* bytes held in manifest paths and link targets */
	bool listing_stopped;    /* entry cap: no more directories are listed */
	bool list_full;          /* manifest size cap: no more entries are listed */
	bool stopped;            /* time budget: nothing more is walked */
	bool strip;              /* o.strip_uid / o.strip_since are in force */
	int64_t deadline_ns;     /* CLOCK_MONOTONIC */
	struct ab_entry scratch; /* the entry being walked when it is not listed */
	struct walk_reuse *reuse;
	size_t n_reuse;
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
static const char reason_sparse_unhashed[] = "sparse file (not hashed; holes kept on copy)";
static const char reason_hash_too_big[] = "over the hash size cap (not hashed)";
static const char reason_hash_budget[] = "hash budget used up (not hashed)";

static bool
reason_informs(const char *r)
{
	return !r || r == reason_setid || r == reason_sparse || r == reason_sparse_unhashed ||
	       r == reason_hash_too_big || r == reason_hash_budget;
}

/* Records that a cap cut the walk or the listing; the first cap is the one named. */
static void
truncate_by(struct walk *w, enum ab_walk_cap cap)
{
	w->m.truncated = true;
	w->m.truncated_caps |= cap;
	for (size_t b = 0; b < AB_CAP_COUNT && !w->m.truncated_by; b++)
		if ((unsigned) cap == 1U << b)
			w->m.truncated_by = cap_texts[b];
}

static void
entry_mark(struct ab_entry *e, unsigned flag, const char *reason)
{
	e->flags |= flag;
	if (reason_informs(e->reason))
		e->reason = reason;
}

/* For error messages: the entry's path, or its name when it is not listed. Escaped. */
static char *
entry_display(const struct ab_entry *e, const char *name)
{
	return walk_escape_name(e->path ? e->path : name);
}

/* The time budget: true (and the walk stops) once it is spent. */
static bool
walk_out_of_time(struct walk *w)
{
	if (w->stopped)
		return true;
	if (now_ns() < w->deadline_ns)
		return false;
	w->stopped = true;
	truncate_by(w, AB_CAP_TIME);
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
				truncate_by(w, AB_CAP_ENTRIES);
				if (f->entry != WALK_NO_ENTRY)
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

/* A listed entry is complete: its reservation becomes its exact cost. */
static void
list_settle(struct walk *w, size_t idx, uint64_t reserved)
{
	const struct ab_entry *e = walk_entry_at(w, idx);

	w->m.list_bytes = w->m.list_bytes - reserved + entry_json_cost(e, false);
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

/* ---- strip_uid ---- */

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
	entry_mark(e, 0, "special bits could not be removed in place");
}

/* Strips the entry open on fd, whose fstat is fst. fd is an O_PATH fd when by_proc: fchmod()
 * refuses those, so it goes through /proc/self/fd/N, which names this inode and no other. */
static void
strip_fd(struct walk *w, struct ab_entry *e, int fd, const struct stat *fst, bool by_proc)
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
static int
strip_at(struct walk *w, struct ab_entry *e, int dirfd, const char *name, const struct stat *st)
{
	cleanup_fd int fd = -1;
	struct stat fst;

	if (!strip_applies(w, st))
		return 0;
	fd = open_beneath(dirfd, name, O_PATH);
	if (fd < 0) {
		if (is_fd_exhaustion(fd))
			return ab_err_set(w->err, fd, "open a workspace entry to strip it");
		strip_failed(w, e);
		return 0;
	}
	if (fstat(fd, &fst) < 0 || fst.st_dev != st->st_dev || fst.st_ino != st->st_ino ||
	    (fst.st_mode & S_IFMT) != (st->st_mode & S_IFMT)) {
		strip_failed(w, e);
		return 0;
	}
	strip_fd(w, e, fd, &fst, true);
	return 0;
}

/* ---- hashing ---- */

static int
reuse_cmp(const void *a, const void *b)
{
	const struct walk_reuse *x = a, *y = b;

	return x->ino < y->ino ? -1 : x->ino > y->ino;
}

static void
reuse_index(struct walk *w)
{
	const struct ab_manifest *hf = w->o.hashes_from;

	for (size_t i = 0; hf && i < hf->n; i++) {
		if (hf->entries[i].type != AB_ENTRY_FILE || !hf->entries[i].sha256[0])
			continue;
		if (w->n_reuse % 1024 == 0)
			w->reuse = xrealloc(w->reuse, (w->n_reuse + 1024) * sizeof(*w->reuse));
		w->reuse[w->n_reuse++] = (struct walk_reuse){ hf->entries[i].ino, i };
	}
	if (w->n_reuse)
		qsort(w->reuse, w->n_reuse, sizeof(*w->reuse), reuse_cmp);
}

/* The sha256 of an unchanged file from hashes_from: same inode, size and ctime. */
static bool
reuse_hash(struct walk *w, struct ab_entry *e)
{
	struct walk_reuse key = { .ino = e->ino }, *r;

	if (!w->n_reuse)
		return false;
	r = bsearch(&key, w->reuse, w->n_reuse, sizeof(*w->reuse), reuse_cmp);
	/* equal inodes are adjacent: find the first */
	while (r && r > w->reuse && r[-1].ino == e->ino)
		r--;
	for (; r && r < w->reuse + w->n_reuse && r->ino == e->ino; r++) {
		const struct ab_entry *o = &w->o.hashes_from->entries[r->idx];

		if (o->size == e->size && o->ctime.tv_sec == e->ctime.tv_sec &&
		    o->ctime.tv_nsec == e->ctime.tv_nsec) {
			memcpy(e->sha256, o->sha256, sizeof(e->sha256));
			w->m.hashes_reused++;
			return true;
		}
	}
	return false;
}

/* Whether to hash a listed regular file, charging the hash budget if so. A file that is not
 * hashed gets a flag saying why. The charge is the allocated blocks, or the apparent size
 * where that is bigger (holes are hashed as zeros); sparse files past WALK_SPARSE_HASH_MAX are
 * not hashed at all, so holes never cost more than that per file. */
static bool
hash_wanted(struct walk *w, struct ab_entry *e)
{
	uint64_t cost = e->blocks_bytes > e->size ? e->blocks_bytes : e->size;

	if (e->flags & AB_FLAG_HARDLINK || reuse_hash(w, e))
		return false;
	if (e->flags & AB_FLAG_SPARSE &&
	    (e->size > WALK_SPARSE_HASH_MAX || e->size > w->o.hash_max_bytes)) {
		if (reason_informs(e->reason))
			e->reason = reason_sparse_unhashed;
		return false;
	}
	if (e->size > w->o.hash_max_bytes) {
		entry_mark(e, AB_FLAG_TOO_BIG, reason_hash_too_big);
		return false;
	}
	if (cost > w->o.hash_budget_bytes - w->m.hashed_bytes) {
		entry_mark(e, AB_FLAG_OVER_CAP, reason_hash_budget);
		w->m.truncated_caps |= AB_CAP_HASH;
		return false;
	}
	w->m.hashed_bytes += cost;
	return true;
}

static int
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
		truncate_by(w, AB_CAP_TOTAL_BYTES);
		copy = false;
	}
	if (w->o.dst_dirfd >= 0 && !f->has_dst && !e->reason)
		e->reason = "inside a directory that was not copied";
	if (e->flags & AB_FLAG_SETID && !e->reason)
		e->reason = reason_setid;
	if (e->flags & AB_FLAG_SPARSE && !e->reason)
		e->reason = reason_sparse;
	/* only what is listed is hashed: nobody would see the hash of the rest */
	hash = e->path && hash_wanted(w, e);
	if (!copy && !hash)
		return strip_at(w, e, f->fd, name, st);

	fd = open_beneath(f->fd, name, O_RDONLY | O_NONBLOCK);
	if (fd < 0) {
		if (is_fd_exhaustion(fd))
			return ab_err_set(w->err, fd, "open a workspace file");
		if (fd == -EXDEV)
			entry_mark(e, AB_FLAG_OTHER_FS, "mount point (not read)");
		else
			entry_mark(e, AB_FLAG_UNREADABLE, "cannot be opened");
		e->collected = false;
		return fd == -EXDEV ? 0 : strip_at(w, e, f->fd, name, st);
	}
	/* Still the regular file lstat saw? A FIFO swapped in is never read (and never blocked
	 * on: O_NONBLOCK). */
	if (fstat(fd, &fst) < 0 || !S_ISREG(fst.st_mode) || fst.st_dev != st->st_dev ||
	    fst.st_ino != st->st_ino || fst.st_dev != w->root_dev) {
		entry_mark(e, AB_FLAG_UNREADABLE, "changed while walking");
		return 0;
	}
	strip_fd(w, e, fd, &fst, false);

	if (copy) {
		dfd = RETRY_EINTR(openat(f->dst_fd, name,
					 O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
					 0600));
		if (dfd < 0 && errno == EEXIST) {
			e->reason = "destination name already exists (not overwritten)";
			copy = false;
		} else if (dfd < 0) {
			cleanup_free char *p = entry_display(e, name);

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
			cleanup_free char *p = entry_display(e, name);

			return ab_err_set(w->err, r, "write the copy of '%s'", p);
		}
		if (r == COPY_TIMED_OUT) {
			(void) walk_out_of_time(w);
			entry_mark(e, AB_FLAG_OVER_CAP,
				   "walk time budget reached (not read in full)");
			return 0;
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
		e->reason = reason_setid;
	}
	if (w->listing_stopped) {
		e->flags |= AB_FLAG_OVER_CAP;
		e->reason = "entry cap reached (not listed)";
		return strip_at(w, e, f->fd, name, st);
	}
	if (f->depth + 1 >= w->o.max_depth) {
		e->flags |= AB_FLAG_OVER_CAP;
		e->reason = "depth cap reached (not entered)";
		truncate_by(w, AB_CAP_DEPTH);
		return strip_at(w, e, f->fd, name, st);
	}

	fd = open_beneath(f->fd, name, O_RDONLY | O_DIRECTORY);
	if (fd < 0) {
		if (is_fd_exhaustion(fd))
			return ab_err_set(w->err, fd, "open a workspace directory");
		if (fd == -EXDEV) {
			entry_mark(e, AB_FLAG_OTHER_FS, "mount point (not entered)");
			return 0;
		}
		entry_mark(e, AB_FLAG_UNREADABLE, "cannot be opened (not entered)");
		return strip_at(w, e, f->fd, name, st);
	}
	if (fstat(fd, &fst) < 0 || !S_ISDIR(fst.st_mode) || fst.st_dev != st->st_dev ||
	    fst.st_ino != st->st_ino || fst.st_dev != w->root_dev) {
		entry_mark(e, AB_FLAG_UNREADABLE, "changed while walking");
		return 0;
	}
	strip_fd(w, e, fd, &fst, false);
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
			p = entry_display(e, name);
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
		truncate_by(w, AB_CAP_PATH_LENGTH);
		if (parent)
			entry_mark(parent, AB_FLAG_OVER_CAP,
				   "path length cap reached (contents not all listed)");
		return WALK_NO_ENTRY;
	}
	path = parent ? xasprintf("%s/%s", parent->path, name) : xstrdup(name);
	w->scratch.path = path;
	w->scratch.link_target = (char *) link;
	cost = entry_json_cost(&w->scratch, true);
	w->scratch.path = w->scratch.link_target = NULL;
	if (w->m.list_bytes + cost > w->o.max_list_bytes ||
	    w->name_bytes + path_len + 1 + (link ? strlen(link) + 1 : 0) > WALK_MAX_NAME_BYTES) {
		free(path);
		w->list_full = true;
		truncate_by(w, AB_CAP_MANIFEST);
		if (parent)
			entry_mark(parent, AB_FLAG_OVER_CAP,
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
		entry_mark(e, AB_FLAG_UNREADABLE, "vanished or cannot be examined");
		goto done;
	}
	e->type = type_of(st.st_mode);
	e->size = st.st_size > 0 ? (uint64_t) st.st_size : 0;
	e->blocks_bytes = (uint64_t) st.st_blocks * 512;
	e->mode = st.st_mode & 07777;
	e->ino = (uint64_t) st.st_ino;
	e->ctime = st.st_ctim;
	if (st.st_dev != w->root_dev) {
		entry_mark(e, AB_FLAG_OTHER_FS, "on another filesystem (mount point; not entered)");
		goto done;
	}

	switch (e->type) {
	case AB_ENTRY_FILE:
		r = walk_file(w, e, name, &st);
		break;
	case AB_ENTRY_DIR:
		r = walk_dir(w, e, idx, reserved, name, path_len, &st);
		if (w->n > frames)
			return r; /* entered: its listing settles when the level is done */
		break;
	case AB_ENTRY_SYMLINK:
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
		entry_mark(e, AB_FLAG_SYMLINK,
			   w->o.copy_symlinks && link ? "symbolic link pointing outside the tree "
							"(not copied)"
						      : "symbolic link (not followed)");
		if (!link)
			e->flags |= AB_FLAG_UNREADABLE;
		break;
	case AB_ENTRY_FIFO:
	case AB_ENTRY_SOCKET:
	case AB_ENTRY_CHARDEV:
	case AB_ENTRY_BLOCKDEV:
	case AB_ENTRY_OTHER:
	case AB_ENTRY_TYPE_COUNT:
		entry_mark(e, AB_FLAG_SPECIAL, "special file (fifo, socket or device; not opened)");
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
	w->st = NULL;
	w->buf = NULL;
	w->reuse = NULL;
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
	w.m.list_bytes = JSON_ARRAY_COST;

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
	reuse_index(&w);
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
	/* fallback (a glibc without the O_PATH trick): our own O_PATH fd on it, never through a
	 * link, checked to be a directory, chmodded through /proc/self/fd/N (that inode only);
	 * never chmod by name, which a swap to a symlink would redirect */
	{
		cleanup_fd int fd = open_beneath(dirfd, name, O_PATH);
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

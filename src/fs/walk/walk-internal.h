/* walk-internal.h: what the walk*.c files share; the interface is walk.h.
 *
 * The files: walk.c is the iterative walk (walk_tree: the stack of directory levels, listing,
 * the caps, entering directories); walk-open.c opens beneath the root without following a
 * link or crossing a mount (shared with the removal); walk-copy.c reads a regular file once,
 * hashing and/or copying it; walk-hash.c decides what is hashed and reuses earlier hashes;
 * walk-strip.c is the in-place strip (strip_uid); walk-json.c is the listing as JSON, its cost
 * model, and the names and texts of types, flags and caps; walk-remove.c is
 * walk_remove_tree. */
#pragma once

#include <nettle/sha2.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sys/stat.h>
#include <sys/types.h>

#include "../../util/err.h"
#include "../../util/strv.h"
#include "walk.h"

#define WALK_OPEN_FRAMES 32                   /* directory levels whose fds stay open */
#define WALK_BUF_SIZE    ((size_t) 64 * 1024) /* getdents64 and copy buffer */

/* Special bits and group/other write never reach a copy; the owner can always read (and
 * enter) it, also when the script left it chmod 000. */
#define WALK_COPY_MODE_MASK    0755
#define WALK_COPY_FILE_MODE(m) (((m) &WALK_COPY_MODE_MASK) | 0600)
#define WALK_COPY_DIR_MODE(m)  (((m) &WALK_COPY_MODE_MASK) | 0700)

/* The JSON cost model (walk_entry_json_cost): indentation as deep as `collected.files` in the
 * report with JSON_INDENT(2), plus slack; the longest reason any entry can get is
 * WALK_REASON_MAX (walk-json.c). */
#define WALK_JSON_ITEM_INDENT 8
#define WALK_JSON_KEY_INDENT  10
#define WALK_JSON_FLAG_INDENT 12

/* "[", its closing line, and the key around it: what an empty listing costs */
#define WALK_JSON_ARRAY_COST (1 + 1 + WALK_JSON_ITEM_INDENT + 1 + 16)

#define WALK_NO_ENTRY SIZE_MAX

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
	const struct ab_entry **origins; /* origins_from's listed entries, sorted by path */
	size_t n_origins;
	struct walk_frame *st;
	size_t n, cap;
	char *buf;
	struct ab_err *err;
};

static inline struct walk_frame *
walk_top(struct walk *w)
{
	return &w->st[w->n - 1];
}

static inline struct ab_entry *
walk_entry_at(struct walk *w, size_t i)
{
	return &w->m.entries[i];
}

/* ---- walk.c ---- */

/* How the walk touches an entry of each type. Only these three kinds are ever opened: a
 * fifo, socket, device or unknown type is known by its metadata alone (never blocked on).
 * Decided once, here, for the walk and for the origins. */
enum walk_access {
	WALK_READ,      /* a regular file: read (hashed, copied) */
	WALK_ENTER,     /* a directory: listed and walked */
	WALK_READLINK,  /* a symlink: its target read, never followed */
	WALK_STAT_ONLY, /* everything else: never opened */
};

enum walk_access walk_access_of(enum ab_entry_type type);

/* Reasons that only inform: the entry is still collected. Any other reason replaces them. */
extern const char walk_reason_setid[];
extern const char walk_reason_sparse[];
extern const char walk_reason_sparse_unhashed[];
extern const char walk_reason_hash_too_big[];
extern const char walk_reason_hash_budget[];

/* Is r (an entry's reason) one of the above, or none? */
bool walk_reason_informs(const char *r);

/* Records that a cap cut the walk or the listing; the first cap is the one named. */
void walk_truncate_by(struct walk *w, enum ab_walk_cap cap);

/* Adds flag to e; reason replaces e's reason unless that says more (walk_reason_informs). */
void walk_entry_mark(struct ab_entry *e, unsigned flag, const char *reason);

/* For error messages: the entry's path, or its name when it is not listed. Escaped. */
char *walk_entry_display(const struct ab_entry *e, const char *name);

/* The time budget: true (and the walk stops) once it is spent. */
bool walk_out_of_time(struct walk *w);

/* ---- walk-open.c ---- */

/* Opens the single component `name` below dirfd without following a symlink or crossing a
 * mount. Returns an fd or -errno: -ELOOP for a symlink, -EXDEV for a mount point (bind mounts
 * of the same filesystem included). */
int walk_open_beneath(int dirfd, const char *name, int flags);

/* Reopens the parent of the directory dirfd and checks it is the one recorded on the way
 * down. Returns an fd or -errno (-ESTALE when the tree was rearranged under us). */
int walk_reopen_parent(int dirfd, dev_t dev, ino_t ino);

bool walk_is_dot_or_dotdot(const char *s);

/* -EMFILE, -ENFILE, -ENOMEM: out of fds or memory, which stops a walk (anything else about
 * one entry is that entry's flag). */
bool walk_is_fd_exhaustion(int r);

/* ---- walk-copy.c ---- */

/* The regular file `name` (entry e, lstat st) of the directory on top: flags it, hashes
 * and/or copies it in one read, strips it. Returns 0 or -errno (what stops the walk). */
int walk_file(struct walk *w, struct ab_entry *e, const char *name, const struct stat *st);

/* ---- walk-hash.c ---- */

/* Indexes o.hashes_from by inode for walk_hash_wanted(). */
void walk_reuse_index(struct walk *w);

/* Whether to hash a listed regular file, charging the hash budget if so. A file that is not
 * hashed gets a flag saying why; one whose sha256 is reused from hashes_from has it set. */
bool walk_hash_wanted(struct walk *w, struct ab_entry *e);

/* Finishes ctx into 64 hex digits and a NUL. */
void walk_sha256_hex(struct sha256_ctx *ctx, char out[65]);

/* ---- walk-origin.c ---- */

/* Indexes o.origins_from by path for walk_origin_set(). */
void walk_origin_index(struct walk *w);

/* Sets e->origin (when origins_from is given) from its type, path, sha256 and metadata. Call
 * once e is complete (hashed). */
void walk_origin_set(struct walk *w, struct ab_entry *e);

/* ---- walk-strip.c ---- */

/* Strips the entry open on fd, whose fstat is fst (an O_PATH fd when by_proc). */
void walk_strip_fd(struct walk *w, struct ab_entry *e, int fd, const struct stat *fst,
		   bool by_proc);

/* Strips `name` below dirfd (lstat st) through an O_PATH fd of its own. Returns 0 or -errno
 * (fd exhaustion). */
int walk_strip_at(struct walk *w, struct ab_entry *e, int dirfd, const char *name,
		  const struct stat *st);

/* ---- walk-json.c ---- */

/* Per enum ab_walk_cap bit: the text of truncated_by ("the depth cap"). */
extern const char *const walk_cap_texts[AB_CAP_COUNT];

/* An upper bound of the bytes e takes in manifest_to_json()'s JSON_INDENT(2) dump, nested as
 * deep as `collected.files` in the report. worst: as if every flag, a sha256, the longest
 * reason and 20-digit sizes were still to come (what an entry may grow to once recorded). */
uint64_t walk_entry_json_cost(const struct ab_entry *e, bool worst);

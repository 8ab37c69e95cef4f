/* walk.h: everything that touches a workspace after a script ran in it. The tree is hostile:
 * symlinks, FIFOs, sockets, devices, setuid bits, sparse giants, 10,000-deep trees, names with
 * newlines and escapes, chmod 000 directories. Never follows a link, never blocks on a FIFO,
 * never leaves the starting filesystem, never writes outside the destination. Iterative: no
 * recursion, so depth is bounded only by the caps. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include <sys/types.h>

#include "util/err.h"

enum ab_entry_type {
	AB_ENTRY_FILE,
	AB_ENTRY_DIR,
	AB_ENTRY_SYMLINK,
	AB_ENTRY_FIFO,
	AB_ENTRY_SOCKET,
	AB_ENTRY_CHARDEV,
	AB_ENTRY_BLOCKDEV,
	AB_ENTRY_OTHER,
	AB_ENTRY_TYPE_COUNT,
};

/* Flags: why an entry is unusual. An entry with any flag other than AB_FLAG_SPARSE and
 * AB_FLAG_SETID is not collected (SETID entries are copied with the special bits stripped). */
enum ab_entry_flag {
	AB_FLAG_SYMLINK = 1 << 0,
	AB_FLAG_SPECIAL = 1 << 1,    /* fifo, socket, device */
	AB_FLAG_SETID = 1 << 2,      /* setuid / setgid / sticky bit present (stripped on copy) */
	AB_FLAG_HARDLINK = 1 << 3,   /* regular file with st_nlink > 1 */
	AB_FLAG_SPARSE = 1 << 4,     /* allocated blocks well below the apparent size */
	AB_FLAG_TOO_BIG = 1 << 5,    /* over the per-file cap */
	AB_FLAG_UNREADABLE = 1 << 6, /* could not be opened or read */
	AB_FLAG_OTHER_FS = 1 << 7,   /* a mount point: st_dev differs from the root's */
	AB_FLAG_OVER_CAP = 1 << 8,   /* total bytes, entries or depth cap reached */
};

struct ab_entry {
	char *path;              /* raw bytes, relative to the walk root, '/'-separated */
	enum ab_entry_type type; /* from lstat, never following links */
	uint64_t size;           /* apparent size (st_size) */
	uint64_t blocks_bytes;   /* st_blocks * 512 */
	mode_t mode;             /* permission bits incl. setuid/setgid/sticky */
	char *link_target;       /* symlinks only: readlinkat() result (capped), else NULL */
	char sha256[65];         /* hex for regular files read in full and <= hash cap; else "" */
	unsigned flags;          /* enum ab_entry_flag */
	bool collected;          /* copied to the destination */
	const char *reason;      /* static text: why it was not collected / what is unusual */
};

struct ab_manifest {
	struct ab_entry *entries;
	size_t n, cap;
	uint64_t total_bytes;     /* apparent bytes of regular files seen */
	uint64_t total_entries;   /* every entry seen, including directories (not the root) */
	uint64_t copied_bytes;    /* bytes written to the destination */
	bool truncated;           /* a cap stopped the walk or the listing */
	const char *truncated_by; /* static text: which cap ("the depth cap", ...), or NULL */
};

struct ab_walk_opts {
	uint64_t max_entries;     /* stop listing after this many entries (0 = 100000) */
	uint64_t max_depth;       /* do not descend deeper (0 = 4096) */
	uint64_t max_file_bytes;  /* per-file copy cap; bigger files are skipped (0 = unlimited) */
	uint64_t max_total_bytes; /* total copy cap (0 = unlimited) */
	uint64_t hash_max_bytes;  /* hash regular files up to this size (0 = 64 MiB) */
	int dst_dirfd;            /* copy regular files and directories here; -1 = manifest only */
	uid_t chown_uid; /* when copying as root, give copies to this uid; (uid_t) -1 = no */
	gid_t chown_gid;
};

/* Walks the tree under root_dirfd (an O_DIRECTORY fd the caller opened with O_NOFOLLOW) and
 * fills ret. When o->dst_dirfd >= 0 copies regular files (special bits stripped, sparse-aware,
 * created O_EXCL|O_NOFOLLOW, never through an existing symlink) and directories into it.
 * Uses openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_XDEV|RESOLVE_NO_MAGICLINKS) with an
 * O_NOFOLLOW fallback when openat2 is missing (ENOSYS), and opens files O_NONBLOCK.
 * Returns 0 (caps and skipped entries are reported in ret, not as errors) or -errno. */
int walk_tree(int root_dirfd, const struct ab_walk_opts *o, struct ab_manifest *ret,
	      struct ab_err *err);

void manifest_done(struct ab_manifest *m);

/* The manifest as the report's "files" array: each entry has "path" (hostile bytes escaped as
 * \xNN, see walk_escape_name), "type", "size", "mode" (octal string), and, when present,
 * "sha256", "link_target" (escaped), "flags" (array of strings), "collected", "reason". */
json_t *manifest_to_json(const struct ab_manifest *m);

/* Escapes a raw name for display/JSON: printable ASCII other than backslash is kept; every other
 * byte (controls, ESC, DEL, bytes >= 0x80, backslash) becomes \xNN. Returns a malloc'd string. */
char *walk_escape_name(const char *raw);

/* Removes the entry `name` in parent_dirfd and everything below it: iterative, chmods
 * directories it cannot read or enter, never follows a link, never crosses into another
 * filesystem (mount points are left in place and reported as an error). Returns 0 or -errno. */
int walk_remove_tree(int parent_dirfd, const char *name, struct ab_err *err);

/* test hook: when true, walk_tree and walk_remove_tree behave as if openat2() returned ENOSYS
 * (the O_NOFOLLOW + fstat + st_dev fallback). Never set outside tests. */
extern bool walk_force_no_openat2;

/* walk.h: everything that touches a workspace after a script ran in it. The tree is hostile:
 * symlinks, FIFOs, sockets, devices, setuid bits, sparse giants, 10,000-deep trees, names with
 * newlines and escapes, chmod 000 directories. Never follows a link, never blocks on a FIFO,
 * never leaves the starting filesystem, never writes outside the destination. Iterative: no
 * recursion, so depth is bounded only by the caps.
 *
 * The work is bounded by totals, not per file, because it runs after the sandbox, outside
 * every limit of the run: bytes hashed (charged by allocated blocks), bytes of JSON the
 * listing may become, wall time, entries and depth. What a budget skipped is said per entry
 * (flags, reason) and per walk (truncated_caps, the counters). */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include <sys/stat.h>
#include <sys/types.h>

#include "../../util/err.h"

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

/* Flags: why an entry is unusual. An entry with any flag other than AB_FLAG_SPARSE,
 * AB_FLAG_SETID and AB_FLAG_STRIPPED is not collected (SETID entries are copied with the special
 * bits stripped), except that a regular file can be collected and yet carry TOO_BIG or OVER_CAP
 * when those say why it has no sha256. Every listed regular file without a sha256 carries at
 * least one of HARDLINK, SPARSE, TOO_BIG, UNREADABLE, OTHER_FS, OVER_CAP. */
enum ab_entry_flag {
	AB_FLAG_SYMLINK = 1 << 0,
	AB_FLAG_SPECIAL = 1 << 1,    /* fifo, socket, device */
	AB_FLAG_SETID = 1 << 2,      /* setuid / setgid / sticky bit present (stripped on copy) */
	AB_FLAG_HARDLINK = 1 << 3,   /* regular file with st_nlink > 1 */
	AB_FLAG_SPARSE = 1 << 4,     /* allocated blocks well below the apparent size; a sparse
				      * file over WALK_SPARSE_HASH_MAX is not hashed */
	AB_FLAG_TOO_BIG = 1 << 5,    /* over the per-file copy cap, or over hash_max_bytes */
	AB_FLAG_UNREADABLE = 1 << 6, /* could not be opened or read */
	AB_FLAG_OTHER_FS = 1 << 7,   /* a mount point: st_dev differs from the root's */
	AB_FLAG_OVER_CAP = 1 << 8,   /* a total cap: bytes, entries, depth, path length, manifest
				      * size, hash budget or time budget */
	AB_FLAG_STRIPPED = 1 << 9,   /* strip_uid: setuid/setgid/g+w/o+w removed in place */
	AB_FLAG_COUNT = 10,
};

/* Why a walk or its listing is incomplete (struct ab_manifest.truncated_caps). */
enum ab_walk_cap {
	AB_CAP_ENTRIES = 1 << 0,     /* max_entries: directories left unlisted */
	AB_CAP_DEPTH = 1 << 1,       /* max_depth: deeper directories not entered */
	AB_CAP_PATH_LENGTH = 1 << 2, /* paths over WALK_LIST_PATH_MAX walked, not listed */
	AB_CAP_MANIFEST = 1 << 3,    /* max_list_bytes (or name memory): listing stopped */
	AB_CAP_TOTAL_BYTES = 1 << 4, /* max_total_bytes: files not copied */
	AB_CAP_TIME = 1 << 5,        /* time_budget_ms: the walk stopped */
	AB_CAP_HASH = 1 << 6,        /* hash_budget_bytes: files not hashed (listing complete) */
	AB_CAP_COUNT = 7,
};

/* Where an entry of a run's workspace came from, against the listing taken before the run
 * (ab_walk_opts.origins_from). NONE: not asked (no "origin" key). */
enum ab_entry_origin {
	AB_ORIGIN_NONE,
	AB_ORIGIN_UNKNOWN,   /* not in the pre-run listing, which a cap cut short */
	AB_ORIGIN_SCRIPT,    /* the script agentbox ran, as it was placed */
	AB_ORIGIN_CREATED,   /* no entry at this path before, or one of another type */
	AB_ORIGIN_MODIFIED,  /* there before; its content is not the same */
	AB_ORIGIN_UNCHANGED, /* there before with the same content (an --input the run left
			      * alone, or what --workspace DIR held) */
	AB_ORIGIN_COUNT,
};

struct ab_entry {
	char *path;              /* raw bytes, relative to the walk root, '/'-separated; at most
				  * WALK_LIST_PATH_MAX bytes (longer paths are walked, not listed) */
	enum ab_entry_type type; /* from lstat, never following links */
	uint64_t size;           /* apparent size (st_size) */
	uint64_t blocks_bytes;   /* st_blocks * 512 */
	mode_t mode;             /* permission bits incl. setuid/setgid/sticky, as found (before
				  * a strip) */
	uint64_t ino;            /* st_ino and st_ctim: what hashes_from matches on */
	struct timespec ctime;
	struct timespec mtime;   /* with ino, size and ctime: the origin of an unhashed file */
	unsigned char origin;    /* enum ab_entry_origin */
	bool origin_by_metadata; /* origin decided by ino, size, mtime and ctime: a sha256 was
				  * missing before or after the run */
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
	const char *truncated_by; /* static text: the first cap ("the depth cap", ...), or NULL */
	unsigned truncated_caps;  /* enum ab_walk_cap: every cap that cut something */
	uint64_t unlisted;        /* entries walked (copied, stripped, counted) but not listed */
	uint64_t list_bytes;      /* upper bound of the listing's JSON (manifest_to_json, nested
				   * as in the report, JSON_INDENT(2), escaping included) */
	uint64_t hashed_bytes;    /* charged to the hash budget (allocated blocks) */
	uint64_t hashes_reused;   /* sha256 taken from hashes_from instead of reading the file */
	uint64_t unhashed;        /* listed regular files without a sha256 */
	uint64_t stripped;        /* entries strip_uid changed (listed or not) */
	uint64_t strip_failed;    /* entries strip_uid should have changed but could not (their
				   * reason says so); the caller must not trust the tree then */
	uint64_t walk_ms;         /* wall time of the walk */
};

/* Sparse files bigger than this are not hashed (hashing reads their holes as zeros). */
#define WALK_SPARSE_HASH_MAX (4ULL << 20)
/* Longest path listed; deeper entries are walked (copied, stripped, counted), not listed. */
#define WALK_LIST_PATH_MAX 4096

struct ab_walk_opts {
	uint64_t max_entries;     /* stop listing after this many entries (0 = 100000) */
	uint64_t max_depth;       /* do not descend deeper (0 = 4096) */
	uint64_t max_file_bytes;  /* per-file copy cap; bigger files are skipped (0 = unlimited) */
	uint64_t max_total_bytes; /* total copy cap (0 = unlimited) */
	uint64_t hash_max_bytes;  /* hash regular files up to this size (0 = 64 MiB) */
	/* Total bytes hashing may cost, charged per file by allocated blocks (st_blocks * 512),
	 * or by the apparent size where that is bigger (holes are hashed as zeros); a file that
	 * does not fit is not hashed and flagged over_cap (0 = 512 MiB). */
	uint64_t hash_budget_bytes;
	uint64_t max_list_bytes; /* JSON the listing may take (list_bytes); then it stops
				  * (0 = 8 MiB) */
	uint64_t time_budget_ms; /* the walk stops after this long (0 = 60 s) */
	/* Take the sha256 of a regular file from this earlier walk of the same tree when its
	 * inode, size and ctime are unchanged, instead of reading it (NULL = no). */
	const struct ab_manifest *hashes_from;
	/* Give every listed entry an origin (enum ab_entry_origin) against this listing of the
	 * same tree taken before the run, matched by path (NULL = no origins). A regular file
	 * that is there before and after is unchanged when both sha256s are equal; when either
	 * is missing (too big, hash budget, hard link...), when inode, size, mtime and ctime
	 * are all equal (origin_by_metadata). origin_script: the script's path in the tree, whose
	 * unchanged file is AB_ORIGIN_SCRIPT (NULL = none). */
	const struct ab_manifest *origins_from;
	const char *origin_script;
	int dst_dirfd;   /* copy regular files and directories here; -1 = manifest only */
	uid_t chown_uid; /* when copying as root, give copies to this uid; (uid_t) -1 = no */
	gid_t chown_gid;
	/* In-place strip: every regular file and directory below the root (not the root itself,
	 * never a symlink or special file) owned by strip_uid whose st_ctim >= strip_since loses
	 * S_ISUID|S_ISGID|S_IWGRP|S_IWOTH, through the fd the walk opened for it or an O_PATH fd
	 * and /proc/self/fd/N, never by name; entries on another filesystem are left alone
	 * (reported other_fs). Entries past the listing caps are stripped too (counted in
	 * stripped, not listed); the root is not an entry: the caller sees to it. Otherwise
	 * the depth cap, the entry cap and the time budget stop it (truncated_caps says so).
	 * A strip that failed is counted in strip_failed and given a reason.
	 * Off when strip_uid is (uid_t) -1 OR strip_since is {0, 0}: a zero-initialised
	 * ab_walk_opts never strips (uid 0 is a valid strip_uid; pass {0, 1} for "any ctime"). */
	uid_t strip_uid;
	struct timespec strip_since;
	/* Copy symbolic links too (dst_dirfd >= 0): those whose target stays inside the tree
	 * (leading ".." no deeper than the link's own depth, then plain names) or points into
	 * /usr; every other link is listed and not copied. For `prepare` (venvs and node_modules
	 * need their links). */
	bool copy_symlinks;
	/* Bits an inode already had before the run (from walk_strip_keep_list): they are not
	 * the run's doing and stay; sorted by ino (NULL = none). */
	const struct ab_strip_keep *strip_keep;
	size_t n_strip_keep;
};

/* An inode of the walked filesystem and the setuid/setgid/g+w/o+w bits it had before. */
struct ab_strip_keep {
	uint64_t ino;
	mode_t bits;
};

/* The entries of an earlier manifest-only walk that carry any of the bits a strip removes,
 * sorted for ab_walk_opts.strip_keep. malloc'd (NULL when there are none); *ret_n set. */
struct ab_strip_keep *walk_strip_keep_list(const struct ab_manifest *m, size_t *ret_n);

/* The bits a strip removes: setuid, setgid, group and other write. */
#define WALK_STRIP_BITS (S_ISUID | S_ISGID | S_IWGRP | S_IWOTH)

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
 * "sha256", "link_target" (escaped), "flags" (array of strings), "collected", "origin" and
 * "origin_by" ("metadata", when origins_from was given), "reason". Its
 * JSON_INDENT(2) dump is at most m->list_bytes long, nested as in the report or not. */
json_t *manifest_to_json(const struct ab_manifest *m);

/* What the walk skipped and why, as a JSON object: "listed", "entries", "unlisted",
 * "truncated", "truncated_by" (array of cap names, see walk_cap_name), "list_bytes",
 * "hashed_bytes", "hashes_reused", "unhashed", "stripped", "strip_failed", "walk_ms". */
json_t *manifest_summary_json(const struct ab_manifest *m);

/* "unknown", "script", "created", "modified", "unchanged"; NULL for AB_ORIGIN_NONE. */
const char *walk_origin_name(enum ab_entry_origin o);

/* "entries", "depth", "path_length", "manifest_size", "total_bytes", "time", "hash_budget";
 * NULL for anything else. */
const char *walk_cap_name(enum ab_walk_cap cap);

/* The caps in caps (enum ab_walk_cap bits) as text for people: "the path length cap and the
 * depth cap". Returns a malloc'd string ("" when none). */
char *walk_caps_text(unsigned caps);

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

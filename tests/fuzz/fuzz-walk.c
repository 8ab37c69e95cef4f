/* fuzz-walk.c: libFuzzer target for walk_tree / walk_remove_tree (issue 5).
 *
 * The input is a small script that builds a hostile tree in a fresh temp dir: directories,
 * files, symlinks with raw targets ('/', '..', absolute paths to the canary), FIFOs, sockets,
 * hardlinks, sparse giants, modes including 000 and setuid, names with newlines, ESC and 0xff,
 * and entries planted in the destination. Then it walks the tree into the destination with
 * caps from the input, removes both trees, and abort()s when:
 *   - anything was written outside the destination (the canary dir beside it must stay as it
 *     was, and its file unread-and-unchanged);
 *   - a copy is not a regular file or directory, or has special bits or group/other write;
 *   - a collected entry is not what the manifest says (type, flags, sha256 of the copy);
 *   - a cap is exceeded, an escaped name is not printable ASCII, the JSON cannot be built;
 *   - walk_remove_tree does not remove the whole tree, or removes the canary;
 *   - the listing's JSON is longer than list_bytes or the cap, hashing cost more than the
 *     budget, or a listed regular file has no sha256 and no flag saying why;
 *   - the in-place strip (strip_uid) changed anything but the setuid/setgid/g+w/o+w bits of
 *     regular files and directories, missed one in a walk no cap cut short, or reached
 *     through a symlink (the canary file is setuid).
 *
 * clang -fsanitize=fuzzer,address ... (see tests/meson.build, option 'fuzz'), or with
 * -DAB_FUZZ_MAIN a plain main() that replays the files named on the command line (gcc). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <nettle/sha2.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <linux/limits.h>
#include <sys/stat.h>

#include "src/fs/walk/walk.h"
#include "src/util/fdutil.h"
#include "src/util/macro.h"
#include "src/util/xalloc.h"

#define FUZZ_MAX_OPS      64
#define FUZZ_MAX_DEPTH    24 /* levels of "cd" the script may go down */
#define FUZZ_MAX_CHMODS   64
#define FUZZ_MAX_PLANTED  16
#define FUZZ_CHAIN_MAX    48
#define FUZZ_CANARY       "canary\n"
#define FUZZ_CANARY_ATIME 1000000000
#define FUZZ_CANARY_MODE  04755
#define FUZZ_SNAP_MAX     512
#define STRIP_BITS        (S_ISUID | S_ISGID | S_IWGRP | S_IWOTH)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct reader {
	const uint8_t *p;
	size_t n;
};

static bool
take(struct reader *r, uint8_t *ret)
{
	if (r->n == 0)
		return false;
	*ret = *r->p++;
	r->n--;
	return true;
}

static uint8_t
take_or(struct reader *r, uint8_t dflt)
{
	uint8_t b;

	return take(r, &b) ? b : dflt;
}

/* A name for an entry: raw bytes from the input. '/' and NUL cannot be in a name, so they
 * become ESC and newline; "." and ".." are kept (creating them just fails with EEXIST). */
static void
take_name(struct reader *r, char name[256])
{
	size_t len = take_or(r, 1) % 24;

	if (len == 23) /* now and then a long one */
		len = 200 + take_or(r, 0) % 56;
	if (len == 0)
		len = 1;
	for (size_t i = 0; i < len; i++) {
		uint8_t c = take_or(r, 'a');

		if (c == '/')
			c = 0x1b;
		else if (c == 0)
			c = '\n';
		name[i] = (char) c;
	}
	name[len] = '\0';
}

/* A symlink target: raw bytes, '/' and ".." welcome; a few canned hostile ones too. */
static void
take_target(struct reader *r, const char *base, char *out, size_t size)
{
	static const char *const canned[] = {
		"/etc/shadow", "../../..", "../canary", "../../canary",
		"..",          ".",        "/",         "/proc/self/root",
	};
	uint8_t sel = take_or(r, 0);
	size_t len;

	if (sel < 64) {
		snprintf(out, size, "%s", canned[sel % ARRAY_SIZE(canned)]);
		return;
	}
	if (sel < 96) {
		snprintf(out, size, "%s/canary%s", base, sel & 1 ? "/c.txt" : "");
		return;
	}
	len = take_or(r, 1) % 64;
	for (size_t i = 0; i < len && i + 1 < size; i++) {
		uint8_t c = take_or(r, '.');

		out[i] = c ? (char) c : '/';
		out[i + 1] = '\0';
	}
	if (len == 0)
		snprintf(out, size, "x");
}

struct chmod_later {
	int dirfd;
	char name[256];
	mode_t mode;
};

struct fuzz {
	char base[64];
	int base_fd, src, dst, canary;
	int stack[FUZZ_MAX_DEPTH];
	int depth;
	char last_dir[256], last_file[256];
	struct chmod_later chmods[FUZZ_MAX_CHMODS];
	int n_chmods;
	char planted[FUZZ_MAX_PLANTED][256];
	int n_planted;
};

static int
cur(struct fuzz *z)
{
	return z->depth ? z->stack[z->depth - 1] : z->src;
}

static void
chmod_later(struct fuzz *z, const char *name, mode_t mode)
{
	struct chmod_later *c;

	if (z->n_chmods == FUZZ_MAX_CHMODS)
		return;
	c = &z->chmods[z->n_chmods++];
	c->dirfd = fcntl(cur(z), F_DUPFD_CLOEXEC, 3);
	snprintf(c->name, sizeof(c->name), "%s", name);
	c->mode = mode;
}

static mode_t
take_mode(struct reader *r)
{
	static const mode_t canned[] = { 0, 0644, 0755, 04755, 06755, 01777, 07777, 0200, 0500 };
	uint8_t b = take_or(r, 0);

	if (b < 128)
		return canned[b % ARRAY_SIZE(canned)];
	return (mode_t) (((b << 4) | take_or(r, 0)) & 07777);
}

static void
op_file(struct fuzz *z, struct reader *r)
{
	char name[256];
	cleanup_fd int fd = -1;
	uint8_t len, buf[256];
	mode_t mode;

	take_name(r, name);
	mode = take_mode(r);
	len = take_or(r, 0);
	for (unsigned i = 0; i < len; i++)
		buf[i] = take_or(r, 0);
	fd = openat(cur(z), name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return;
	(void) write_all(fd, buf, len);
	snprintf(z->last_file, sizeof(z->last_file), "%s", name);
	chmod_later(z, name, mode);
}

static void
op_sparse(struct fuzz *z, struct reader *r)
{
	static const uint64_t sizes[] = { 0, 1, 4097, (1 << 20) + 1, 3 << 20, 1ULL << 40 };
	char name[256];
	cleanup_fd int fd = -1;
	uint64_t size;
	uint8_t at;

	take_name(r, name);
	size = sizes[take_or(r, 0) % ARRAY_SIZE(sizes)];
	at = take_or(r, 0);
	fd = openat(cur(z), name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0)
		return;
	if (ftruncate(fd, (off_t) size) < 0)
		return;
	if (size)
		(void) !pwrite(fd, "S", 1, (off_t) (size / 256 * at));
	snprintf(z->last_file, sizeof(z->last_file), "%s", name);
}

static void
op_chain(struct fuzz *z, struct reader *r)
{
	int levels = take_or(r, 0) % FUZZ_CHAIN_MAX;
	int fd = fcntl(cur(z), F_DUPFD_CLOEXEC, 3);

	for (int i = 0; fd >= 0 && i < levels; i++) {
		int next;

		if (mkdirat(fd, "d", 0755) < 0)
			break;
		next = openat(fd, "d", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		(void) close(fd);
		fd = next;
	}
	if (fd >= 0)
		(void) close(fd);
}

static void
op_plant(struct fuzz *z, struct reader *r)
{
	char name[256], target[PATH_MAX];
	uint8_t how = take_or(r, 0);

	take_name(r, name);
	if (z->n_planted == FUZZ_MAX_PLANTED)
		return;
	if (how & 1)
		snprintf(target, sizeof(target), "%s/canary", z->base);
	else
		snprintf(target, sizeof(target), "../canary/%s", name);
	if (symlinkat(target, z->dst, name) < 0)
		return;
	snprintf(z->planted[z->n_planted++], 256, "%s", name);
}

static void
run_script(struct fuzz *z, struct reader *r)
{
	for (int ops = 0; ops < FUZZ_MAX_OPS && r->n > 0; ops++) {
		uint8_t op = take_or(r, 0);
		char name[256], target[PATH_MAX];

		switch (op % 12) {
		case 0: /* mkdir */
			take_name(r, name);
			if (mkdirat(cur(z), name, 0755) == 0) {
				snprintf(z->last_dir, sizeof(z->last_dir), "%s", name);
				chmod_later(z, name, take_mode(r));
			}
			break;
		case 1:
			op_file(z, r);
			break;
		case 2: /* symlink */
			take_name(r, name);
			take_target(r, z->base, target, sizeof(target));
			(void) !symlinkat(target, cur(z), name);
			break;
		case 3: /* fifo */
			take_name(r, name);
			(void) mkfifoat(cur(z), name, 0644);
			break;
		case 4: /* socket inode: mknod needs no privilege for S_IFSOCK */
			take_name(r, name);
			(void) mknodat(cur(z), name, S_IFSOCK | 0644, 0);
			break;
		case 5: /* cd into the last directory made here */
			if (z->depth < FUZZ_MAX_DEPTH && z->last_dir[0]) {
				int fd = openat(cur(z), z->last_dir,
						O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

				if (fd >= 0)
					z->stack[z->depth++] = fd;
				z->last_dir[0] = '\0';
			}
			break;
		case 6: /* cd .. */
			if (z->depth > 0)
				(void) close(z->stack[--z->depth]);
			z->last_dir[0] = '\0';
			break;
		case 7: /* hardlink */
			take_name(r, name);
			if (z->last_file[0])
				(void) !linkat(cur(z), z->last_file, cur(z), name, 0);
			break;
		case 8:
			op_sparse(z, r);
			break;
		case 9:
			op_plant(z, r);
			break;
		case 10:
			op_chain(z, r);
			break;
		case 11: /* a file in the destination where the source may have one too */
			take_name(r, name);
			{
				int fd = openat(
					z->dst, name,
					O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);

				if (fd >= 0) {
					(void) close(fd);
					if (z->n_planted < FUZZ_MAX_PLANTED)
						snprintf(z->planted[z->n_planted++], 256, "%s",
							 name);
				}
			}
			break;
		default:
			break;
		}
	}
	/* Modes last and innermost first, so that a 000 directory can still be filled. */
	for (int i = z->n_chmods - 1; i >= 0; i--) {
		(void) !fchmodat(z->chmods[i].dirfd, z->chmods[i].name, z->chmods[i].mode,
				 AT_SYMLINK_NOFOLLOW);
		(void) close(z->chmods[i].dirfd);
	}
	z->n_chmods = 0;
	while (z->depth > 0)
		(void) close(z->stack[--z->depth]);
}

#define CHECK(cond)                                                                         \
	do {                                                                                \
		if (!(cond)) {                                                              \
			fprintf(stderr, "fuzz-walk: check failed at %s:%d: %s\n", __FILE__, \
				__LINE__, #cond);                                           \
			abort();                                                            \
		}                                                                           \
	} while (0)

static bool
printable(const char *s)
{
	for (; *s; s++)
		if ((unsigned char) *s < 0x20 || (unsigned char) *s > 0x7e)
			return false;
	return true;
}

static int
count_dir(int dirfd)
{
	cleanup_fd int fd = -1;
	char buf[4096];
	int n = 0;

	fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	CHECK(fd >= 0);
	for (;;) {
		ssize_t r = getdents64(fd, buf, sizeof(buf));

		CHECK(r >= 0);
		if (r == 0)
			return n;
		for (ssize_t off = 0; off < r;) {
			struct dirent64 *d = (struct dirent64 *) (void *) (buf + off);

			off += d->d_reclen;
			if (strcmp(d->d_name, ".") && strcmp(d->d_name, ".."))
				n++;
		}
	}
}

static void
check_canary(struct fuzz *z)
{
	struct stat st;

	CHECK(count_dir(z->canary) == 1);
	CHECK(fstatat(z->canary, "c.txt", &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode));
	CHECK(st.st_atim.tv_sec == FUZZ_CANARY_ATIME); /* never read */
	CHECK(st.st_size == (off_t) strlen(FUZZ_CANARY));
	CHECK((st.st_mode & 07777) == FUZZ_CANARY_MODE); /* the strip never reached it */
}

static bool
is_planted(struct fuzz *z, const char *name)
{
	for (int i = 0; i < z->n_planted; i++)
		if (strcmp(z->planted[i], name) == 0)
			return true;
	return false;
}

/* Opens a '/'-separated manifest path below dirfd one component at a time, never following
 * a link. Returns an fd or -1. */
static int
open_rel(int dirfd, const char *path, bool dir)
{
	cleanup_free char *copy = xstrdup(path);
	int fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 3);
	char *save = NULL;

	for (char *c = strtok_r(copy, "/", &save); c && fd >= 0; c = strtok_r(NULL, "/", &save)) {
		bool last = save == NULL || *save == '\0';
		int flags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK;
		int next;

		if (!last || dir)
			flags |= O_DIRECTORY;
		next = openat(fd, c, flags);
		(void) close(fd);
		fd = next;
	}
	return fd;
}

static void
check_copy(int dst, const struct ab_entry *e)
{
	cleanup_fd int fd = open_rel(dst, e->path, e->type == AB_ENTRY_DIR);
	struct stat st;

	CHECK(fd >= 0);
	CHECK(fstat(fd, &st) == 0);
	CHECK((st.st_mode & 07022) == 0);
	if (e->type == AB_ENTRY_DIR) {
		CHECK(S_ISDIR(st.st_mode));
		CHECK((st.st_mode & 07777) == ((e->mode & 0755) | 0700));
		return;
	}
	CHECK(S_ISREG(st.st_mode));
	CHECK((uint64_t) st.st_size == e->size);
	/* special bits and group/other write stripped; the owner can always read it */
	CHECK((st.st_mode & 07777) == ((e->mode & 0755) | 0600));
	if (e->sha256[0]) {
		struct sha256_ctx ctx;
		uint8_t d[SHA256_DIGEST_SIZE];
		char hex[65], buf[4096];
		ssize_t r;

		sha256_init(&ctx);
		while ((r = read(fd, buf, sizeof(buf))) > 0)
			sha256_update(&ctx, (size_t) r, (const uint8_t *) buf);
		CHECK(r == 0);
		sha256_digest(&ctx, sizeof(d), d);
		for (size_t i = 0; i < sizeof(d); i++)
			snprintf(hex + 2 * i, 3, "%02x", d[i]);
		CHECK(strcmp(hex, e->sha256) == 0);
	}
}

/* Every entry in the destination (iteratively, bounded) is a planted one at the top, or a
 * regular file or directory without special bits and without group/other write. */
static void
check_dst_tree(struct fuzz *z)
{
	struct ab_walk_opts o = { .dst_dirfd = -1, .chown_uid = (uid_t) -1 };
	struct ab_manifest m = { 0 };

	CHECK(walk_tree(z->dst, &o, &m, NULL) == 0);
	for (size_t i = 0; i < m.n; i++) {
		const struct ab_entry *e = &m.entries[i];

		if (!strchr(e->path, '/') && is_planted(z, e->path))
			continue;
		CHECK(e->type == AB_ENTRY_FILE || e->type == AB_ENTRY_DIR);
		CHECK((e->mode & 07022) == 0);
		CHECK(!(e->flags & (AB_FLAG_SYMLINK | AB_FLAG_SPECIAL | AB_FLAG_SETID |
				    AB_FLAG_UNREADABLE | AB_FLAG_OTHER_FS)));
	}
	manifest_done(&m);
}

/* Every entry of the source tree with its type and mode, found by opening directories
 * (never following a link), to compare before and after the walk. */
struct snap {
	char path[FUZZ_SNAP_MAX][PATH_MAX];
	mode_t mode[FUZZ_SNAP_MAX]; /* st_mode, type included */
	size_t n;
};

static void
snap_dir(struct snap *sn, int dirfd, const char *prefix, int depth)
{
	cleanup_fd int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	char buf[4096];

	if (fd < 0 || depth > FUZZ_MAX_DEPTH + FUZZ_CHAIN_MAX + 2)
		return;
	for (;;) {
		ssize_t r = getdents64(fd, buf, sizeof(buf));

		if (r <= 0)
			return;
		for (ssize_t off = 0; off < r;) {
			struct dirent64 *d = (struct dirent64 *) (void *) (buf + off);
			struct stat st;

			off += d->d_reclen;
			if (!strcmp(d->d_name, ".") || !strcmp(d->d_name, "..") ||
			    sn->n == FUZZ_SNAP_MAX ||
			    strlen(prefix) + strlen(d->d_name) + 2 > PATH_MAX ||
			    fstatat(fd, d->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
				continue;
			snprintf(sn->path[sn->n], PATH_MAX, "%s/%s", prefix, d->d_name);
			sn->mode[sn->n++] = st.st_mode;
			if (S_ISDIR(st.st_mode)) {
				cleanup_fd int sub =
					openat(fd, d->d_name,
					       O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

				if (sub >= 0)
					snap_dir(sn, sub, sn->path[sn->n - 1], depth + 1);
			}
		}
	}
}

/* The strip changed the strip bits of regular files and directories, only those, and all of
 * them when no cap cut the walk short. */
static void
check_strip(const struct snap *a, const struct snap *b, bool strip, const struct ab_manifest *m)
{
	bool complete = !(m->truncated_caps & (AB_CAP_ENTRIES | AB_CAP_DEPTH | AB_CAP_TIME)) &&
			m->strip_failed == 0;
	uint64_t changed = 0;

	CHECK(a->n == b->n);
	for (size_t i = 0; i < a->n; i++) {
		mode_t want = a->mode[i];

		CHECK(strcmp(a->path[i], b->path[i]) == 0);
		if (strip && (S_ISREG(want) || S_ISDIR(want)))
			want &= ~(mode_t) STRIP_BITS;
		if (b->mode[i] != a->mode[i])
			changed++;
		CHECK(b->mode[i] == want || (!complete && b->mode[i] == a->mode[i]));
	}
	CHECK(strip || m->stripped == 0);
	/* a hardlinked inode changes under each of its names but is stripped once */
	CHECK(m->stripped <= changed);
}

/* Why a listed regular file may have no sha256. */
#define UNHASHED_WHY                                                                \
	(AB_FLAG_HARDLINK | AB_FLAG_SPARSE | AB_FLAG_TOO_BIG | AB_FLAG_UNREADABLE | \
	 AB_FLAG_OTHER_FS | AB_FLAG_OVER_CAP)

static void
check_manifest(struct fuzz *z, const struct ab_manifest *m, const struct ab_walk_opts *o)
{
	/* over_cap: listing cut; stripped: in the source, not the copy */
	const unsigned ok_when_collected =
		AB_FLAG_SPARSE | AB_FLAG_SETID | AB_FLAG_OVER_CAP | AB_FLAG_STRIPPED;
	json_t *j, *wrap;
	char *dump;

	CHECK(m->n <= o->max_entries && m->total_entries <= o->max_entries);
	CHECK(m->n + m->unlisted <= m->total_entries);
	if (o->max_total_bytes)
		CHECK(m->copied_bytes <= o->max_total_bytes);
	if (o->max_list_bytes)
		CHECK(m->n == 0 || m->list_bytes <= o->max_list_bytes);
	CHECK(m->hashed_bytes <= (o->hash_budget_bytes ? o->hash_budget_bytes : 512ULL << 20));
	for (size_t i = 0; i < m->n; i++) {
		const struct ab_entry *e = &m->entries[i];
		cleanup_free char *p = walk_escape_name(e->path);
		cleanup_free char *t = walk_escape_name(e->link_target);
		size_t depth = 1;

		for (const char *c = e->path; *c; c++)
			depth += *c == '/';
		CHECK(depth <= o->max_depth);
		CHECK(printable(p) && (!t || printable(t)));
		CHECK(e->type < AB_ENTRY_TYPE_COUNT);
		CHECK(!e->link_target || e->type == AB_ENTRY_SYMLINK);
		CHECK(strlen(e->path) <= WALK_LIST_PATH_MAX);
		if (e->type == AB_ENTRY_FILE && e->collected && o->max_file_bytes)
			CHECK(e->size <= o->max_file_bytes);
		if (e->type == AB_ENTRY_FILE && !e->sha256[0])
			CHECK(e->flags & UNHASHED_WHY);
		if (!e->collected)
			continue;
		CHECK(e->type == AB_ENTRY_FILE || e->type == AB_ENTRY_DIR);
		/* too_big on a collected file: too big to hash, not to copy */
		CHECK(!(e->flags & ~ok_when_collected) ||
		      (e->type == AB_ENTRY_FILE && !e->sha256[0] &&
		       !(e->flags & ~(ok_when_collected | AB_FLAG_TOO_BIG))));
		CHECK(e->type == AB_ENTRY_DIR || !(e->flags & AB_FLAG_OVER_CAP) || !e->sha256[0]);
		check_copy(z->dst, e);
	}
	j = manifest_to_json(m);
	CHECK(j && json_array_size(j) == m->n);
	dump = json_dumps(j, JSON_COMPACT);
	CHECK(dump && printable(dump));
	if (getenv("FUZZ_WALK_DEBUG"))
		fprintf(stderr, "%s\n", dump);
	free(dump);
	/* nested as deep as the report's collected.files: within list_bytes */
	wrap = json_pack("{s:{s:o}}", "collected", "files", j);
	dump = json_dumps(wrap, JSON_INDENT(2) | JSON_SORT_KEYS);
	CHECK(dump && strlen(dump) <= m->list_bytes + 32);
	free(dump);
	json_decref(wrap);
}

static void
setup(struct fuzz *z)
{
	const char *tmp = getenv("TMPDIR");
	struct timespec ts[2] = { { .tv_sec = FUZZ_CANARY_ATIME }, { .tv_nsec = UTIME_NOW } };
	cleanup_fd int fd = -1;

	snprintf(z->base, sizeof(z->base), "%s/fuzz-walk-XXXXXX",
		 tmp && *tmp && strlen(tmp) < 32 ? tmp : "/tmp");
	CHECK(mkdtemp(z->base));
	z->base_fd = open(z->base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	CHECK(z->base_fd >= 0);
	CHECK(mkdirat(z->base_fd, "src", 0755) == 0 && mkdirat(z->base_fd, "dst", 0755) == 0 &&
	      mkdirat(z->base_fd, "canary", 0755) == 0);
	z->src = openat(z->base_fd, "src", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	z->dst = openat(z->base_fd, "dst", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	z->canary = openat(z->base_fd, "canary", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	CHECK(z->src >= 0 && z->dst >= 0 && z->canary >= 0);
	fd = openat(z->canary, "c.txt", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	CHECK(fd >= 0 && write_all(fd, FUZZ_CANARY, strlen(FUZZ_CANARY)) == 0);
	CHECK(fchmod(fd, FUZZ_CANARY_MODE) == 0);
	CHECK(utimensat(z->canary, "c.txt", ts, 0) == 0);
}

static void
teardown(struct fuzz *z)
{
	struct ab_err err = { 0 };
	cleanup_fd int parent = -1;
	char *slash = strrchr(z->base, '/');
	int r;

	(void) close(z->src);
	(void) close(z->dst);
	r = walk_remove_tree(z->base_fd, "src", &err);
	if (r != 0)
		fprintf(stderr, "fuzz-walk: remove src: %d %s\n", r, err.msg);
	CHECK(r == 0);
	CHECK(faccessat(z->base_fd, "src", F_OK, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT);
	CHECK(walk_remove_tree(z->base_fd, "dst", NULL) == 0);
	check_canary(z); /* removing planted symlinks did not reach through them */
	(void) close(z->canary);
	(void) close(z->base_fd);
	*slash = '\0';
	parent = open(z->base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	CHECK(parent >= 0);
	CHECK(walk_remove_tree(parent, slash + 1, NULL) == 0);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint64_t file_caps[] = { 0, 1, 100, 4096, 65536, 1 << 20, 4 << 20 };
	static const uint64_t total_caps[] = { 0, 1, 10, 300, 5000, 1 << 20 };
	static const uint64_t list_caps[] = { 0, 1, 700, 3000, 20000, 200000 };
	static const uint64_t hash_budgets[] = { 0, 1, 100, 5000, 1 << 20, 5 << 20 };
	struct reader r = { data, size };
	struct fuzz z = { .depth = 0 };
	struct ab_manifest m = { 0 };
	struct ab_walk_opts o = { .chown_uid = (uid_t) -1, .chown_gid = (gid_t) -1 };
	struct ab_err err = { 0 };
	static struct snap before, after;
	uint8_t flags, budgets;
	int ret;

	o.max_entries = 1 + take_or(&r, 63) % 64;
	o.max_depth = 1 + take_or(&r, 7) % 16;
	o.max_file_bytes = file_caps[take_or(&r, 0) % ARRAY_SIZE(file_caps)];
	o.max_total_bytes = total_caps[take_or(&r, 0) % ARRAY_SIZE(total_caps)];
	flags = take_or(&r, 0);
	o.hash_max_bytes = flags & 4 ? 10 : 0;
	budgets = take_or(&r, 0);
	o.max_list_bytes = list_caps[budgets % ARRAY_SIZE(list_caps)];
	o.hash_budget_bytes = hash_budgets[(budgets >> 3) % ARRAY_SIZE(hash_budgets)];
	/* strip: the tree's owner (every entry), or another uid (none) */
	o.strip_uid = flags & 8 ? geteuid() + (flags & 16 ? 1 : 0) : (uid_t) -1;
	o.strip_since = (struct timespec){ .tv_sec = 1 };

	setup(&z);
	run_script(&z, &r);
	o.dst_dirfd = flags & 2 ? -1 : z.dst;
	walk_force_no_openat2 = flags & 1;
	before.n = after.n = 0;
	snap_dir(&before, z.src, "", 0);
	ret = walk_tree(z.src, &o, &m, &err);
	if (ret != 0)
		fprintf(stderr, "fuzz-walk: walk_tree: %d %s\n", ret, err.msg);
	CHECK(ret == 0);
	snap_dir(&after, z.src, "", 0);
	check_strip(&before, &after, (flags & 24) == 8, &m);
	if (!o.max_depth)
		o.max_depth = 4096;
	check_manifest(&z, &m, &o);
	check_canary(&z);
	check_dst_tree(&z);
	manifest_done(&m);
	teardown(&z);
	walk_force_no_openat2 = false;
	return 0;
}

#ifdef AB_FUZZ_MAIN
/* Replays inputs without libFuzzer: fuzz-walk FILE... */
int
main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		cleanup_fd int fd = open(argv[i], O_RDONLY | O_CLOEXEC);
		char *buf = NULL;
		ssize_t n;

		if (fd < 0) {
			perror(argv[i]);
			return 1;
		}
		n = read_all_capped(fd, 1 << 20, &buf);
		if (n < 0) {
			fprintf(stderr, "%s: %s\n", argv[i], strerror((int) -n));
			return 1;
		}
		(void) LLVMFuzzerTestOneInput((const uint8_t *) buf, (size_t) n);
		free(buf);
		printf("%s: ok\n", argv[i]);
	}
	return 0;
}
#endif

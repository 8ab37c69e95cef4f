/* test-walk.c: walk_tree, manifest_to_json, walk_escape_name and
 * walk_remove_tree against a crafted hostile tree in a temp dir under /tmp
 * (issue 5; threats T25-T28).
 *
 * The tests run in a forked child; the parent removes the temp dir afterwards
 * whatever happened to the child (a hang ends in SIGALRM), so a failing run
 * leaves nothing behind. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <nettle/sha2.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <linux/filter.h>
#include <linux/limits.h>
#include <linux/seccomp.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>

#include "src/fs/walk/walk.h"
#include "src/util/fdutil.h"
#include "src/util/macro.h"
#include "src/util/xalloc.h"
#include "tests/tap.h"

#define SHA_HELLO "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03"
#define SHA_EMPTY "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

#define MIB             (1ULL << 20)
#define TIB             (1ULL << 40)
#define DEEP_LEVELS     10000
#define FILE_CAP        (2 * MIB)
#define WALK_ALARM_S    20
#define CANARY_ATIME_S  1000000000
#define NAME_OSC52      "\x1b]52;c;aGVsbG8=\a"
#define NAME_NEWLINE    "new\nline"
#define NAME_HIGH       "\xff\xfe\x80"
#define NAME_BACKSLASH  "back\\slash"
#define DEFAULT_MAX_DEP 4096

static char base[64];       /* /tmp/ab-walk-XXXXXX */
static int base_fd = -1;    /* the temp dir */
static char long_name[256]; /* 255 bytes with a newline and an ESC in it */
static bool privileged;     /* root: mode 000 is no obstacle */
static char sha_holes[65];  /* holes.bin */
static char sha_big[65];    /* big.bin */

static _Noreturn void
bail(const char *what)
{
	printf("Bail out! %s: %s\n", what, strerror(errno));
	fflush(stdout);
	exit(1);
}

static void
tap_skip(const char *why)
{
	tap_n++;
	printf("ok %d # SKIP %s\n", tap_n, why);
	fflush(stdout);
}

static void
hex_digest(struct sha256_ctx *ctx, char out[65])
{
	uint8_t d[SHA256_DIGEST_SIZE];

	sha256_digest(ctx, sizeof(d), d);
	for (size_t i = 0; i < sizeof(d); i++)
		snprintf(out + 2 * i, 3, "%02x", d[i]);
}

static void
mkfile(int dirfd, const char *name, const void *data, size_t len, mode_t mode)
{
	cleanup_fd int fd = -1;

	fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		bail("create a test file");
	if (len && write_all(fd, data, len) < 0)
		bail("write a test file");
	if (fchmod(fd, mode) < 0)
		bail("chmod a test file");
}

/* A sparse file: size bytes, with `c` written at each offset in offs. */
static void
mksparse(int dirfd, const char *name, uint64_t size, const uint64_t *offs, size_t n, char c)
{
	cleanup_fd int fd = -1;

	fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0 || ftruncate(fd, (off_t) size) < 0)
		bail("create a sparse file");
	for (size_t i = 0; i < n; i++)
		if (pwrite(fd, &c, 1, (off_t) offs[i]) != 1)
			bail("write a sparse file");
}

static int
open_dir_at(int dirfd, const char *name)
{
	int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0)
		bail("open a test directory");
	return fd;
}

static int
mkdir_open(int dirfd, const char *name, mode_t mode)
{
	if (mkdirat(dirfd, name, mode) < 0)
		bail("mkdir a test directory");
	return open_dir_at(dirfd, name);
}

static bool
exists_at(int dirfd, const char *name)
{
	struct stat st;

	return fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

static bool
is_printable_ascii(const char *s)
{
	for (; *s; s++)
		if ((unsigned char) *s < 0x20 || (unsigned char) *s > 0x7e)
			return false;
	return true;
}

static const struct ab_entry *
find(const struct ab_manifest *m, const char *path)
{
	for (size_t i = 0; i < m->n; i++)
		if (strcmp(m->entries[i].path, path) == 0)
			return &m->entries[i];
	return NULL;
}

/* "deep" followed by `levels` times "/d". */
static char *
deep_path(size_t levels)
{
	char *p = xmalloc(4 + 2 * levels + 1);

	memcpy(p, "deep", 4);
	for (size_t i = 0; i < levels; i++)
		memcpy(p + 4 + 2 * i, "/d", 2);
	p[4 + 2 * levels] = '\0';
	return p;
}

static int
count_entries(int dirfd, const char *name)
{
	cleanup_fd int fd = -1;
	int n = 0;
	char buf[4096];

	fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -1;
	for (;;) {
		ssize_t r = getdents64(fd, buf, sizeof(buf));

		if (r <= 0)
			return r < 0 ? -1 : n;
		for (ssize_t off = 0; off < r;) {
			struct dirent64 *d = (struct dirent64 *) (void *) (buf + off);

			off += d->d_reclen;
			if (strcmp(d->d_name, ".") != 0 && strcmp(d->d_name, "..") != 0)
				n++;
		}
	}
}

static bool
sha_of_file_at(int dirfd, const char *name, char out[65])
{
	cleanup_fd int fd = -1;
	struct sha256_ctx ctx;
	char buf[65536];
	ssize_t r;

	fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return false;
	sha256_init(&ctx);
	while ((r = read(fd, buf, sizeof(buf))) > 0)
		sha256_update(&ctx, (size_t) r, (const uint8_t *) buf);
	if (r < 0)
		return false;
	hex_digest(&ctx, out);
	return true;
}

/* ---- the hostile tree ---- */

static void
build_deep_chain(int dirfd)
{
	int fd = mkdir_open(dirfd, "deep", 0755);

	for (int i = 0; i < DEEP_LEVELS; i++) {
		int next = mkdir_open(fd, "d", 0755);

		(void) close(fd);
		fd = next;
	}
	(void) close(fd);
}

static void
build_tree(void)
{
	cleanup_fd int src = -1, dst = -1, canary = -1, locked = -1, sticky = -1, planted = -1;
	char path[PATH_MAX];
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	struct timespec ts[2] = { { .tv_sec = CANARY_ATIME_S }, { .tv_nsec = UTIME_NOW } };
	uint64_t offs[2];
	char *buf;
	int s;

	src = mkdir_open(base_fd, "src", 0755);
	dst = mkdir_open(base_fd, "dst", 0755);
	canary = mkdir_open(base_fd, "canary", 0755);

	/* Outside the tree: must stay untouched and unread (atime set to the past).
	 */
	mkfile(canary, "secret.txt", "canary\n", 7, 0644);
	if (utimensat(canary, "secret.txt", ts, 0) < 0)
		bail("set the canary atime");

	mkfile(src, "hello.txt", "hello\n", 6, 0644);
	mkfile(src, "empty", "", 0, 0600);
	if (symlinkat("/etc/shadow", src, "link") < 0 || symlinkat("../../..", src, "up") < 0)
		bail("symlink");
	snprintf(path, sizeof(path), "%s/canary/secret.txt", base);
	if (symlinkat(path, src, "canlink") < 0)
		bail("symlink");
	snprintf(path, sizeof(path), "%s/canary", base);
	if (symlinkat(path, src, "outdir") < 0)
		bail("symlink");
	if (mkfifoat(src, "fifo", 0644) < 0)
		bail("mkfifo");
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s/src/sock", base);
	s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0 || bind(s, (struct sockaddr *) &sun, sizeof(sun)) < 0)
		bail("bind a unix socket");
	(void) close(s);

	mkfile(src, "setid", "#!/bin/sh\n", 10, 06755);
	sticky = mkdir_open(src, "stickydir", 0755);
	mkfile(sticky, "f", "f\n", 2, 0666);
	if (fchmod(sticky, 01777) < 0)
		bail("chmod 01777");

	mkfile(src, "hard1", "same\n", 5, 0644);
	if (linkat(src, "hard1", src, "hard2", 0) < 0)
		bail("link");

	offs[0] = 0;
	offs[1] = TIB / 2;
	mksparse(src, "huge.sparse", TIB, offs, 2, 'X');
	/* holes.bin: 'A' at 0, 'Z' at the end, zeros between; exactly at the per-file
	 * cap. */
	mksparse(src, "holes.bin", FILE_CAP, offs, 1, 'A');
	{
		cleanup_fd int fd = openat(src, "holes.bin", O_WRONLY | O_CLOEXEC);

		if (fd < 0 || pwrite(fd, "Z", 1, (off_t) (FILE_CAP - 1)) != 1)
			bail("write holes.bin");
	}
	buf = xcalloc(1, FILE_CAP + 1);
	{
		struct sha256_ctx ctx;

		buf[0] = 'A';
		buf[FILE_CAP - 1] = 'Z';
		sha256_init(&ctx);
		sha256_update(&ctx, FILE_CAP, (const uint8_t *) buf);
		hex_digest(&ctx, sha_holes);
		memset(buf, 'b', FILE_CAP + 1);
		sha256_init(&ctx);
		sha256_update(&ctx, FILE_CAP + 1, (const uint8_t *) buf);
		hex_digest(&ctx, sha_big);
	}
	mkfile(src, "big.bin", buf, FILE_CAP + 1, 0644);
	free(buf);

	locked = mkdir_open(src, "locked", 0755);
	mkfile(locked, "inside", "secret\n", 7, 0644);
	if (fchmod(locked, 0) < 0)
		bail("chmod 000");

	build_deep_chain(src);

	mkfile(src, NAME_NEWLINE, "n\n", 2, 0644);
	mkfile(src, NAME_OSC52, "o\n", 2, 0644);
	mkfile(src, NAME_HIGH, "h\n", 2, 0644);
	mkfile(src, NAME_BACKSLASH, "b\n", 2, 0644);
	memset(long_name, 'L', 255);
	long_name[10] = '\n';
	long_name[20] = '\x1b';
	long_name[30] = '\xff';
	long_name[255] = '\0';
	mkfile(src, long_name, "l\n", 2, 0644);

	/* The destination already holds a symlink where the source has a directory.
	 */
	planted = mkdir_open(src, "planted", 0755);
	mkfile(planted, "payload", "payload\n", 8, 0644);
	snprintf(path, sizeof(path), "%s/canary", base);
	if (symlinkat(path, dst, "planted") < 0)
		bail("plant a symlink");
	mkfile(src, "planted-file", "x\n", 2, 0644);
	snprintf(path, sizeof(path), "%s/canary/planted-file", base);
	if (symlinkat(path, dst, "planted-file") < 0)
		bail("plant a symlink");
}

/* ---- tests ---- */

static int
run_walk(int root, const struct ab_walk_opts *o, struct ab_manifest *m, int64_t *ret_ms)
{
	struct ab_err err = { 0 };
	int64_t t0 = now_ms();
	int r;

	alarm(WALK_ALARM_S); /* a walker blocked on the FIFO dies here: the test fails
			      */
	r = walk_tree(root, o, m, &err);
	alarm(0);
	if (ret_ms)
		*ret_ms = now_ms() - t0;
	if (r < 0)
		printf("# walk_tree: %s (%d)\n", err.msg, r);
	return r;
}

static struct ab_walk_opts
copy_opts(int dst)
{
	return (struct ab_walk_opts){
		.max_file_bytes = FILE_CAP,
		.dst_dirfd = dst,
		.chown_uid = (uid_t) -1,
		.chown_gid = (gid_t) -1,
	};
}

static void
check_canary(const char *when)
{
	cleanup_fd int canary = open_dir_at(base_fd, "canary");
	struct timespec ts[2] = { { .tv_sec = CANARY_ATIME_S }, { .tv_nsec = UTIME_OMIT } };
	char buf[64] = { 0 };
	struct stat st;

	TAP_OK(count_entries(base_fd, "canary") == 1, "%s: nothing was written into the canary dir",
	       when);
	/* atime first: reading the content below touches it (and it is put back
	 * afterwards). */
	TAP_OK(fstatat(canary, "secret.txt", &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		       st.st_atim.tv_sec == CANARY_ATIME_S,
	       "%s: the canary file was never read (atime untouched)", when);
	TAP_OK(read_small_file_at(canary, "secret.txt", buf, sizeof(buf)) == 6 &&
		       strcmp(buf, "canary") == 0,
	       "%s: the canary file is unchanged", when);
	if (utimensat(canary, "secret.txt", ts, 0) < 0)
		bail("reset the canary atime");
}

static void
check_types_and_flags(const struct ab_manifest *m)
{
	const struct ab_entry *e;

	e = find(m, "hello.txt");
	TAP_OK(e && e->type == AB_ENTRY_FILE && e->flags == 0 && e->collected && e->size == 6 &&
		       e->mode == 0644,
	       "hello.txt: plain file, collected");
	TAP_STREQ(e ? e->sha256 : NULL, SHA_HELLO, "hello.txt: sha256 of \"hello\\n\"");
	e = find(m, "empty");
	TAP_STREQ(e ? e->sha256 : NULL, SHA_EMPTY, "empty: sha256 of nothing");

	e = find(m, "link");
	TAP_OK(e && e->type == AB_ENTRY_SYMLINK && e->flags == AB_FLAG_SYMLINK && !e->collected &&
		       e->link_target && strcmp(e->link_target, "/etc/shadow") == 0 &&
		       !e->sha256[0],
	       "link -> /etc/shadow: symlink, target recorded, not followed");
	e = find(m, "up");
	TAP_OK(e && e->type == AB_ENTRY_SYMLINK && e->link_target &&
		       strcmp(e->link_target, "../../..") == 0 && !e->collected,
	       "up -> ../../..: symlink, not followed");
	e = find(m, "outdir");
	TAP_OK(e && e->type == AB_ENTRY_SYMLINK && !e->collected && !find(m, "outdir/secret.txt"),
	       "outdir -> outside directory: not entered");
	e = find(m, "canlink");
	TAP_OK(e && e->type == AB_ENTRY_SYMLINK && !e->collected && !e->sha256[0],
	       "canlink -> canary file: not read");

	e = find(m, "fifo");
	TAP_OK(e && e->type == AB_ENTRY_FIFO && e->flags == AB_FLAG_SPECIAL && !e->collected,
	       "fifo: special, not collected (and the walk did not hang)");
	e = find(m, "sock");
	TAP_OK(e && e->type == AB_ENTRY_SOCKET && e->flags == AB_FLAG_SPECIAL && !e->collected,
	       "unix socket: special, not collected");

	e = find(m, "setid");
	TAP_OK(e && e->type == AB_ENTRY_FILE && (e->flags & AB_FLAG_SETID) && e->mode == 06755 &&
		       e->collected,
	       "setid file: flagged setid, collected with bits stripped");
	e = find(m, "stickydir");
	TAP_OK(e && e->type == AB_ENTRY_DIR && (e->flags & AB_FLAG_SETID) && e->mode == 01777 &&
		       e->collected,
	       "sticky dir: flagged setid, collected");
	e = find(m, "stickydir/f");
	TAP_OK(e && e->collected, "sticky dir contents collected");

	e = find(m, "hard1");
	TAP_OK(e && (e->flags & AB_FLAG_HARDLINK) && !e->collected && !e->sha256[0],
	       "hard1: hardlink, not collected, never opened");
	e = find(m, "hard2");
	TAP_OK(e && (e->flags & AB_FLAG_HARDLINK) && !e->collected, "hard2: hardlink");

	e = find(m, "huge.sparse");
	TAP_OK(e && e->size == TIB && e->blocks_bytes < MIB &&
		       e->flags == (AB_FLAG_SPARSE | AB_FLAG_TOO_BIG) && !e->collected &&
		       !e->sha256[0],
	       "1 TiB sparse file: sparse + too_big, not copied, not hashed");
	e = find(m, "holes.bin");
	TAP_OK(e && e->flags == AB_FLAG_SPARSE && e->collected, "holes.bin: sparse, collected");
	TAP_STREQ(e ? e->sha256 : NULL, sha_holes, "holes.bin: sha256 counts holes as zeros");
	e = find(m, "big.bin");
	TAP_OK(e && e->flags == AB_FLAG_TOO_BIG && !e->collected,
	       "big.bin: over the per-file cap, not copied");
	TAP_STREQ(e ? e->sha256 : NULL, sha_big, "big.bin: still hashed (under the hash cap)");

	e = find(m, "locked");
	if (privileged) {
		TAP_OK(e && e->type == AB_ENTRY_DIR && e->mode == 0 && e->collected &&
			       find(m, "locked/inside") && find(m, "locked/inside")->collected,
		       "chmod 000 dir: root reads it; copied with its contents");
	} else {
		TAP_OK(e && e->type == AB_ENTRY_DIR && (e->flags & AB_FLAG_UNREADABLE) &&
			       !e->collected && !find(m, "locked/inside"),
		       "chmod 000 dir: flagged unreadable, not entered");
	}

	e = find(m, NAME_NEWLINE);
	TAP_OK(e && e->collected, "name with a newline: listed and collected as raw bytes");
	e = find(m, NAME_OSC52);
	TAP_OK(e && e->collected, "name with an OSC 52 escape: listed and collected");
	e = find(m, NAME_HIGH);
	TAP_OK(e && e->collected, "name with 0xff bytes: listed and collected");
	e = find(m, long_name);
	TAP_OK(e && e->collected && strlen(e->path) == 255, "255-byte name: listed and collected");

	e = find(m, "planted");
	TAP_OK(e && e->type == AB_ENTRY_DIR && !e->collected && e->reason &&
		       strstr(e->reason, "already exists"),
	       "planted dir: destination symlink not followed, skipped with a reason");
	e = find(m, "planted/payload");
	TAP_OK(e && !e->collected, "planted/payload: listed, not copied");
	e = find(m, "planted-file");
	TAP_OK(e && !e->collected && e->reason && strstr(e->reason, "already exists"),
	       "planted-file: destination symlink not overwritten");
}

/* Levels of the chain name/d/d/... below dirfd, name included, counted by
 * opening them (no listing cap). */
static size_t
chain_depth(int dirfd, const char *name)
{
	int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	size_t n = fd >= 0;

	while (fd >= 0) {
		int next = openat(fd, "d", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

		(void) close(fd);
		fd = next;
		n += fd >= 0;
	}
	return n;
}

/* The listing stops at WALK_LIST_PATH_MAX bytes of path ("deep" + 2 bytes a
 * level); the walk goes on to max_depth (checked on the copy, in check_copies).
 */
static void
check_deep(const struct ab_manifest *m)
{
	size_t listed = (WALK_LIST_PATH_MAX - 4) / 2;
	cleanup_free char *last = deep_path(listed);
	cleanup_free char *over = deep_path(listed + 1);
	const struct ab_entry *e = find(m, last);

	TAP_OK(e && e->type == AB_ENTRY_DIR && (e->flags & AB_FLAG_OVER_CAP) && e->collected &&
		       e->reason && strstr(e->reason, "path length"),
	       "10,000-deep chain: the last level within the listed path length is "
	       "flagged "
	       "over_cap (and copied)");
	TAP_OK(!find(m, over), "10,000-deep chain: nothing with a longer path is listed");
	TAP_OK(m->truncated && (m->truncated_caps & AB_CAP_DEPTH) &&
		       (m->truncated_caps & AB_CAP_PATH_LENGTH) &&
		       m->unlisted >= DEFAULT_MAX_DEP - 1 - listed,
	       "manifest says truncated, by the depth and the path length caps (%ju "
	       "unlisted)",
	       (uintmax_t) m->unlisted);
}

static void
check_copies(int dst)
{
	struct ab_walk_opts o = { .dst_dirfd = -1, .chown_uid = (uid_t) -1 };
	struct ab_manifest m = { 0 };
	struct stat st;
	bool all_ok = true;
	char sha[65] = "";
	size_t deep = 0;

	TAP_OK(run_walk(dst, &o, &m, NULL) == 0, "walk the destination");
	for (size_t i = 0; i < m.n; i++) {
		const struct ab_entry *e = &m.entries[i];

		if (strcmp(e->path, "planted") == 0 || strcmp(e->path, "planted-file") == 0)
			continue; /* our own planted symlinks */
		/* over_cap: the depth cap; sparse: holes.bin keeps its holes */
		if ((e->type != AB_ENTRY_FILE && e->type != AB_ENTRY_DIR) || (e->mode & 07022) ||
		    (e->flags & ~(unsigned) (AB_FLAG_OVER_CAP | AB_FLAG_SPARSE))) {
			cleanup_free char *p = walk_escape_name(e->path);

			printf("#   bad copy '%s' type %d mode %o flags %x\n", p, e->type, e->mode,
			       e->flags);
			all_ok = false;
		}
	}
	TAP_OK(all_ok,
	       "copies are regular files and directories only, no special bits, no g/o "
	       "write (%zu entries)",
	       m.n);
	deep = chain_depth(dst, "deep");
	TAP_OK(deep == DEFAULT_MAX_DEP - 1,
	       "the deep chain is copied down to the depth cap, past the listing (%zu)", deep);
	TAP_OK(!exists_at(dst, "link") && !exists_at(dst, "up") && !exists_at(dst, "outdir") &&
		       !exists_at(dst, "canlink") && !exists_at(dst, "fifo") &&
		       !exists_at(dst, "sock") && !exists_at(dst, "hard1") &&
		       !exists_at(dst, "huge.sparse") && !exists_at(dst, "big.bin"),
	       "no copy of links, specials, hardlinks or over-cap files");
	TAP_OK(fstatat(dst, "setid", &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
		       (st.st_mode & 07777) == 0755,
	       "setid copy has mode 0755");
	TAP_OK(fstatat(dst, "stickydir", &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode) &&
		       (st.st_mode & 07777) == 0755,
	       "sticky dir copy has mode 0755");
	TAP_OK(fstatat(dst, "stickydir/f", &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		       (st.st_mode & 07777) == 0644,
	       "0666 file copied as 0644");
	TAP_OK(fstatat(dst, "holes.bin", &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		       (uint64_t) st.st_size == FILE_CAP && (uint64_t) st.st_blocks * 512 < MIB,
	       "holes.bin copy keeps its holes (%ju bytes allocated)",
	       (uintmax_t) st.st_blocks * 512);
	TAP_OK(sha_of_file_at(dst, "holes.bin", sha) && strcmp(sha, sha_holes) == 0,
	       "holes.bin copy has the same content");
	TAP_OK(sha_of_file_at(dst, "hello.txt", sha) && strcmp(sha, SHA_HELLO) == 0,
	       "hello.txt copy has the same content");
	TAP_OK(fstatat(dst, "planted", &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode) &&
		       fstatat(dst, "planted-file", &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		       S_ISLNK(st.st_mode),
	       "planted symlinks in the destination are left as they were");
	if (privileged)
		TAP_OK(fstatat(dst, "locked", &st, AT_SYMLINK_NOFOLLOW) == 0 &&
			       (st.st_mode & 07777) == 0700,
		       "000 dir copy is 0700: its owner can read and enter it");
	else
		TAP_OK(!exists_at(dst, "locked"), "unreadable dir is not created in the copy");
	manifest_done(&m);
}

static void
check_escapes(const struct ab_manifest *m)
{
	bool all = true;
	char *s;

	for (size_t i = 0; i < m->n; i++) {
		cleanup_free char *p = walk_escape_name(m->entries[i].path);
		cleanup_free char *t = walk_escape_name(m->entries[i].link_target);

		if (!is_printable_ascii(p) || (t && !is_printable_ascii(t)))
			all = false;
	}
	TAP_OK(all, "every escaped path and link target is printable ASCII");
	s = walk_escape_name(NAME_NEWLINE);
	TAP_STREQ(s, "new\\x0aline", "newline escaped");
	free(s);
	s = walk_escape_name(NAME_OSC52);
	TAP_STREQ(s, "\\x1b]52;c;aGVsbG8=\\x07", "OSC 52 escaped");
	free(s);
	s = walk_escape_name(NAME_HIGH);
	TAP_STREQ(s, "\\xff\\xfe\\x80", "high bytes escaped");
	free(s);
	s = walk_escape_name(NAME_BACKSLASH "\x7f");
	TAP_STREQ(s, "back\\x5cslash\\x7f", "backslash and DEL escaped");
	free(s);
	s = walk_escape_name(long_name);
	TAP_OK(s && is_printable_ascii(s) && strlen(s) == 255 + 3 * 3, "255-byte name escaped");
	free(s);
}

static json_t *
files_find(json_t *arr, const char *path)
{
	for (size_t i = 0; i < json_array_size(arr); i++) {
		json_t *o = json_array_get(arr, i);

		if (strcmp(json_string_value(json_object_get(o, "path")), path) == 0)
			return o;
	}
	return NULL;
}

static bool
flags_are(json_t *o, const char *a, const char *b)
{
	json_t *f = json_object_get(o, "flags");
	size_t n = b ? 2 : 1;

	return f && json_array_size(f) == n &&
	       strcmp(json_string_value(json_array_get(f, 0)), a) == 0 &&
	       (!b || strcmp(json_string_value(json_array_get(f, 1)), b) == 0);
}

static void
check_json(const struct ab_manifest *m)
{
	json_t *arr = manifest_to_json(m);
	cleanup_free char *dump = NULL;
	json_t *o;

	TAP_OK(json_is_array(arr) && json_array_size(arr) == m->n, "manifest_to_json: one object "
								   "per entry");
	o = files_find(arr, "hello.txt");
	TAP_OK(o && strcmp(json_string_value(json_object_get(o, "type")), "file") == 0 &&
		       strcmp(json_string_value(json_object_get(o, "mode")), "0644") == 0 &&
		       strcmp(json_string_value(json_object_get(o, "sha256")), SHA_HELLO) == 0 &&
		       json_integer_value(json_object_get(o, "size")) == 6 &&
		       json_is_integer(json_object_get(o, "blocks_bytes")) &&
		       json_is_true(json_object_get(o, "collected")) &&
		       !json_object_get(o, "flags"),
	       "json: hello.txt");
	o = files_find(arr, "link");
	TAP_OK(o && strcmp(json_string_value(json_object_get(o, "type")), "symlink") == 0 &&
		       strcmp(json_string_value(json_object_get(o, "link_target")),
			      "/etc/shadow") == 0 &&
		       flags_are(o, "symlink", NULL) &&
		       json_is_string(json_object_get(o, "reason")),
	       "json: link");
	o = files_find(arr, "fifo");
	TAP_OK(o && strcmp(json_string_value(json_object_get(o, "type")), "fifo") == 0 &&
		       flags_are(o, "special", NULL),
	       "json: fifo");
	o = files_find(arr, "sock");
	TAP_OK(o && strcmp(json_string_value(json_object_get(o, "type")), "socket") == 0,
	       "json: socket");
	o = files_find(arr, "huge.sparse");
	TAP_OK(o && flags_are(o, "sparse", "too_big") &&
		       json_is_false(json_object_get(o, "collected")),
	       "json: sparse giant");
	o = files_find(arr, "setid");
	TAP_OK(o && strcmp(json_string_value(json_object_get(o, "mode")), "6755") == 0 &&
		       flags_are(o, "setid", NULL),
	       "json: setid mode and flag");
	o = files_find(arr, "\\x1b]52;c;aGVsbG8=\\x07");
	TAP_OK(o != NULL, "json: the OSC 52 name appears escaped");
	dump = json_dumps(arr, JSON_COMPACT);
	TAP_OK(dump && is_printable_ascii(dump), "json: the dump is printable ASCII only");
	json_decref(arr);
}

static bool
manifests_equal(const struct ab_manifest *a, const struct ab_manifest *b)
{
	if (a->n != b->n || a->truncated != b->truncated || a->total_bytes != b->total_bytes ||
	    a->copied_bytes != b->copied_bytes) {
		printf("#   n %zu/%zu truncated %d/%d total %ju/%ju copied %ju/%ju\n", a->n, b->n,
		       a->truncated, b->truncated, (uintmax_t) a->total_bytes,
		       (uintmax_t) b->total_bytes, (uintmax_t) a->copied_bytes,
		       (uintmax_t) b->copied_bytes);
		return false;
	}
	for (size_t i = 0; i < a->n; i++) {
		const struct ab_entry *x = &a->entries[i], *y = &b->entries[i];

		/* Same directory, same listing order; look the path up only if that fails.
		 */
		if (strcmp(x->path, y->path) != 0)
			y = find(b, x->path);

		if (!y || x->type != y->type || x->flags != y->flags ||
		    x->collected != y->collected || strcmp(x->sha256, y->sha256) != 0 ||
		    x->mode != y->mode) {
			cleanup_free char *p = walk_escape_name(x->path);

			printf("#   differs: '%s'\n", p);
			return false;
		}
	}
	return true;
}

static void
set_nofile(rlim_t soft)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		bail("getrlimit");
	rl.rlim_cur = soft;
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
		bail("setrlimit");
}

static void
test_caps(int src)
{
	struct ab_walk_opts o = { .dst_dirfd = -1, .chown_uid = (uid_t) -1, .max_entries = 5 };
	struct ab_manifest m = { 0 };
	cleanup_fd int dst = -1;
	uint64_t sum = 0;
	bool reason = false;

	TAP_OK(run_walk(src, &o, &m, NULL) == 0 && m.truncated && m.n <= 5 && m.total_entries == 5,
	       "max_entries 5: truncated at 5 entries (n=%zu)", m.n);
	manifest_done(&m);

	o = (struct ab_walk_opts){ .dst_dirfd = -1, .chown_uid = (uid_t) -1, .max_depth = 2 };
	TAP_OK(run_walk(src, &o, &m, NULL) == 0 && m.truncated && find(&m, "deep/d") &&
		       (find(&m, "deep/d")->flags & AB_FLAG_OVER_CAP) && !find(&m, "deep/d/d") &&
		       find(&m, "stickydir/f"),
	       "max_depth 2: deep/d over_cap, nothing below it");
	manifest_done(&m);

	dst = mkdir_open(base_fd, "dst-total", 0700);
	o = copy_opts(dst);
	o.max_total_bytes = 10;
	o.max_depth = 3; /* spare the 4096 mkdirs of the deep chain */
	TAP_OK(run_walk(src, &o, &m, NULL) == 0, "max_total_bytes 10: walk");
	for (size_t i = 0; i < m.n; i++) {
		if (m.entries[i].collected && m.entries[i].type == AB_ENTRY_FILE)
			sum += m.entries[i].size;
		if (m.entries[i].reason && strstr(m.entries[i].reason, "total size cap"))
			reason = true;
	}
	TAP_OK(m.copied_bytes <= 10 && sum <= 10 && reason && m.truncated,
	       "max_total_bytes 10: %ju bytes copied, the rest skipped with a reason",
	       (uintmax_t) m.copied_bytes);
	manifest_done(&m);
}

static void
test_sparse_giant(void)
{
	cleanup_fd int sp = -1, dst = -1;
	struct ab_walk_opts o;
	struct ab_manifest m = { 0 };
	const struct ab_entry *e;
	uint64_t offs[2] = { 0, TIB / 2 };
	struct stat st;
	int64_t ms = 0;

	sp = mkdir_open(base_fd, "sparse-src", 0755);
	dst = mkdir_open(base_fd, "sparse-dst", 0755);
	mksparse(sp, "giant", TIB, offs, 2, 'X');
	o = copy_opts(dst);
	o.max_file_bytes = 0; /* no per-file cap: the copy itself must stay sparse */
	TAP_OK(run_walk(sp, &o, &m, &ms) == 0, "1 TiB sparse file with no cap: walk (%jd ms)",
	       (intmax_t) ms);
	e = find(&m, "giant");
	TAP_OK(e && e->collected && (e->flags & AB_FLAG_SPARSE) && !e->sha256[0] &&
		       m.copied_bytes < MIB,
	       "1 TiB sparse file: copied %ju data bytes, not hashed", (uintmax_t) m.copied_bytes);
	TAP_OK(fstatat(dst, "giant", &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		       (uint64_t) st.st_size == TIB && (uint64_t) st.st_blocks * 512 < MIB,
	       "1 TiB sparse copy: holes stay holes (%ju bytes allocated)",
	       (uintmax_t) st.st_blocks * 512);
	TAP_OK(ms < 10000, "1 TiB sparse copy: fast");
	manifest_done(&m);
}

static void
test_chown(int src)
{
	cleanup_fd int dst = -1;
	struct ab_walk_opts o;
	struct ab_manifest m = { 0 };
	struct stat st, st2;

	if (!privileged) {
		tap_skip("chown_uid needs root");
		return;
	}
	dst = mkdir_open(base_fd, "dst-chown", 0700);
	o = copy_opts(dst);
	o.chown_uid = 65534;
	o.chown_gid = 65534;
	o.max_depth = 3;
	TAP_OK(run_walk(src, &o, &m, NULL) == 0 && fstatat(dst, "hello.txt", &st, 0) == 0 &&
		       st.st_uid == 65534 && st.st_gid == 65534 &&
		       fstatat(dst, "stickydir", &st2, AT_SYMLINK_NOFOLLOW) == 0 &&
		       st2.st_uid == 65534 && (st.st_mode & 07777) == 0644,
	       "chown_uid: copies belong to 65534");
	manifest_done(&m);
}

static void
test_deep_few_fds(void)
{
	cleanup_fd int deep = -1, dst = -1;
	struct ab_walk_opts o;
	struct ab_manifest m = { 0 };
	struct ab_err err = { 0 };
	struct rlimit old;
	int r;

	if (getrlimit(RLIMIT_NOFILE, &old) < 0)
		bail("getrlimit");
	deep = open_dir_at(base_fd, "src");
	dst = mkdir_open(base_fd, "dst-fds", 0700);
	{
		int d = open_dir_at(deep, "deep");

		(void) close(deep);
		deep = d;
	}
	set_nofile(100);
	o = copy_opts(dst);
	r = run_walk(deep, &o, &m, NULL);
	set_nofile(old.rlim_cur);
	TAP_OK(r == 0 && m.n + m.unlisted == DEFAULT_MAX_DEP && m.truncated &&
		       chain_depth(dst, "d") == DEFAULT_MAX_DEP - 1,
	       "deep chain with RLIMIT_NOFILE 100: walked and copied to the depth "
	       "cap (n=%zu, "
	       "unlisted %ju)",
	       m.n, (uintmax_t) m.unlisted);
	manifest_done(&m);
	set_nofile(100);
	r = walk_remove_tree(base_fd, "dst-fds", &err);
	set_nofile(old.rlim_cur);
	TAP_OK(r == 0 && !exists_at(base_fd, "dst-fds"),
	       "remove the 4096-deep copy with RLIMIT_NOFILE 100 (%d %s)", r, err.msg);
}

static void
test_fallback(int src, const struct ab_manifest *want)
{
	cleanup_fd int dst = -1;
	struct ab_walk_opts o;
	struct ab_manifest m = { 0 };
	int r;

	dst = mkdir_open(base_fd, "dst-fallback", 0755);
	{
		char path[PATH_MAX];

		snprintf(path, sizeof(path), "%s/canary", base);
		if (symlinkat(path, dst, "planted") < 0)
			bail("plant a symlink");
		snprintf(path, sizeof(path), "%s/canary/planted-file", base);
		if (symlinkat(path, dst, "planted-file") < 0)
			bail("plant a symlink");
	}
	o = copy_opts(dst);
	walk_force_no_openat2 = true;
	r = run_walk(src, &o, &m, NULL);
	walk_force_no_openat2 = false;
	TAP_OK(r == 0, "fallback (no openat2): walk");
	TAP_OK(manifests_equal(want, &m), "fallback (no openat2): same manifest as with openat2");
	check_canary("fallback");
	manifest_done(&m);
	walk_force_no_openat2 = true;
	r = walk_remove_tree(base_fd, "dst-fallback", NULL);
	walk_force_no_openat2 = false;
	TAP_OK(r == 0 && !exists_at(base_fd, "dst-fallback"),
	       "fallback (no openat2): remove the copy");
}

static void
test_dst_inside_src(void)
{
	cleanup_fd int self = -1, out = -1, sub = -1;
	struct ab_walk_opts o;
	struct ab_manifest m = { 0 };
	const struct ab_entry *e;

	self = mkdir_open(base_fd, "self", 0755);
	mkfile(self, "a", "a\n", 2, 0644);
	sub = mkdir_open(self, "sub", 0755);
	out = mkdir_open(sub, "out", 0755);
	o = copy_opts(out);
	TAP_OK(run_walk(self, &o, &m, NULL) == 0, "destination inside the source: walk");
	e = find(&m, "sub/out");
	TAP_OK(e && !e->collected && e->reason && strstr(e->reason, "destination") &&
		       !find(&m, "sub/out/a") && exists_at(out, "a") && exists_at(out, "sub") &&
		       count_entries(out, "sub") == 0,
	       "destination inside the source: copied once, not into itself");
	manifest_done(&m);
	TAP_OK(walk_remove_tree(base_fd, "self", NULL) == 0,
	       "destination inside the source: remove");
}

struct enosys_result {
	bool filtered; /* openat2() really returned ENOSYS */
	bool walked;
	size_t n, collected;
	unsigned flag_sum;
	bool removed, canary_ok;
};

/* A summary of a manifest-only walk to depth 3, to compare two walks. */
static bool
walk_summary(int src, size_t *ret_n, size_t *ret_collected, unsigned *ret_flag_sum)
{
	cleanup_fd int dst = -1;
	struct ab_walk_opts o;
	struct ab_manifest m = { 0 };
	char name[32];
	static int seq;

	snprintf(name, sizeof(name), "dst-sum-%d-%d", (int) getpid(), seq++);
	dst = mkdir_open(base_fd, name, 0700);
	o = copy_opts(dst);
	o.max_depth = 3;
	if (walk_tree(src, &o, &m, NULL) < 0)
		return false;
	*ret_n = m.n;
	*ret_collected = *ret_flag_sum = 0;
	for (size_t i = 0; i < m.n; i++) {
		*ret_collected += m.entries[i].collected;
		*ret_flag_sum += m.entries[i].flags;
	}
	manifest_done(&m);
	return walk_remove_tree(base_fd, name, NULL) == 0;
}

/* The real fallback: a seccomp filter makes openat2() fail with ENOSYS, as on
 * Linux < 5.6. */
static void
enosys_child(int src, int wfd)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_openat2, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = ARRAY_SIZE(f), .filter = f };
	struct enosys_result res = { 0 };
	cleanup_fd int t = -1, locked = -1;
	char path[PATH_MAX];

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) < 0)
		goto out;
	res.filtered = syscall(SYS_openat2, AT_FDCWD, "/", NULL, 0) < 0 && errno == ENOSYS;
	res.walked = walk_summary(src, &res.n, &res.collected, &res.flag_sum);

	t = mkdir_open(base_fd, "enosys-rm", 0755);
	snprintf(path, sizeof(path), "%s/canary", base);
	if (symlinkat(path, t, "outdir") < 0)
		bail("symlink");
	locked = mkdir_open(t, "locked", 0755);
	mkfile(locked, "x", "x", 1, 0644);
	if (fchmod(locked, 0) < 0)
		bail("chmod");
	res.removed = walk_remove_tree(base_fd, "enosys-rm", NULL) == 0 &&
		      !exists_at(base_fd, "enosys-rm");
	res.canary_ok = count_entries(base_fd, "canary") == 1;
out:
	(void) write_all(wfd, &res, sizeof(res));
}

static void
test_real_enosys(int src)
{
	struct enosys_result res = { 0 };
	size_t n = 0, collected = 0;
	unsigned flag_sum = 0;
	int p[2];
	pid_t pid;

	TAP_OK(walk_summary(src, &n, &collected, &flag_sum), "summary walk with openat2");
	if (pipe2(p, O_CLOEXEC) < 0)
		bail("pipe");
	fflush(stdout);
	pid = fork();
	if (pid < 0)
		bail("fork");
	if (pid == 0) {
		(void) close(p[0]);
		enosys_child(src, p[1]);
		_exit(0);
	}
	(void) close(p[1]);
	if (read(p[0], &res, sizeof(res)) != (ssize_t) sizeof(res))
		memset(&res, 0, sizeof(res));
	(void) close(p[0]);
	(void) waitpid(pid, NULL, 0);
	if (!res.filtered) {
		tap_skip("cannot make openat2() fail with ENOSYS (seccomp)");
		return;
	}
	TAP_OK(res.walked && res.n == n && res.collected == collected && res.flag_sum == flag_sum,
	       "openat2 -> ENOSYS: the fallback walk gives the same manifest (%zu "
	       "entries)",
	       res.n);
	TAP_OK(res.removed && res.canary_ok,
	       "openat2 -> ENOSYS: remove works, the canary behind a symlink survives");
}

static void
test_remove_small(void)
{
	struct ab_err err = { 0 };

	mkfile(base_fd, "single", "x", 1, 0);
	TAP_OK(walk_remove_tree(base_fd, "single", NULL) == 0 && !exists_at(base_fd, "single"),
	       "remove: a single file");
	TAP_OK(walk_remove_tree(base_fd, "does-not-exist", NULL) == 0,
	       "remove: a missing entry is already gone");
	TAP_OK(walk_remove_tree(base_fd, "..", &err) == -EINVAL &&
		       walk_remove_tree(base_fd, "a/b", NULL) == -EINVAL,
	       "remove: refuses names that are not one component");
	if (symlinkat(base, base_fd, "selflink") < 0)
		bail("symlink");
	TAP_OK(walk_remove_tree(base_fd, "selflink", NULL) == 0 &&
		       !exists_at(base_fd, "selflink") && exists_at(base_fd, "canary"),
	       "remove: a symlink to a directory removes the link only");
}

/* The result of the mount-point subtest, written by the forked child. */
struct mount_result {
	bool skip;
	char why[160];
	bool walk_flagged, fallback_flagged, exdev, mount_kept, rest_removed;
	bool fallback_exdev, fallback_kept, removed_after;
};

static bool
mounts_flagged(int mnt, bool fallback)
{
	struct ab_walk_opts o = { .dst_dirfd = -1, .chown_uid = (uid_t) -1 };
	struct ab_manifest man = { 0 };
	const struct ab_entry *m, *b;
	bool ok = false;

	walk_force_no_openat2 = fallback;
	if (walk_tree(mnt, &o, &man, NULL) == 0) {
		m = find(&man, "sub/m");
		b = find(&man, "bind");
		ok = m && (m->flags & AB_FLAG_OTHER_FS) && !find(&man, "sub/m/inner") && b &&
		     (b->flags & AB_FLAG_OTHER_FS) && !find(&man, "bind/keepme");
	}
	walk_force_no_openat2 = false;
	manifest_done(&man);
	return ok;
}

static void
mount_child(int wfd)
{
	struct mount_result res = { 0 };
	cleanup_fd int mnt = -1, sub = -1, m = -1, bindsrc = -1;
	char path[PATH_MAX], from[PATH_MAX];
	uid_t uid = geteuid();
	gid_t gid = getegid();
	int r;

	if (unshare(CLONE_NEWNS) < 0) {
		char map[64];

		/* Not root: an unprivileged user namespace may still allow a private mount.
		 */
		if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0) {
			snprintf(res.why, sizeof(res.why), "cannot unshare the mount namespace: %s",
				 strerror(errno));
			res.skip = true;
			goto out;
		}
		snprintf(map, sizeof(map), "0 %u 1", (unsigned) uid);
		(void) write_small_file_at(AT_FDCWD, "/proc/self/setgroups", "deny");
		if (write_small_file_at(AT_FDCWD, "/proc/self/uid_map", map) < 0) {
			snprintf(res.why, sizeof(res.why), "cannot write uid_map");
			res.skip = true;
			goto out;
		}
		snprintf(map, sizeof(map), "0 %u 1", (unsigned) gid);
		(void) write_small_file_at(AT_FDCWD, "/proc/self/gid_map", map);
	}
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
		snprintf(res.why, sizeof(res.why), "cannot make / private: %s", strerror(errno));
		res.skip = true;
		goto out;
	}
	/* An fd opened before unshare() resolves through the old namespace's mounts,
	 * where the mounts below would not be visible: reopen the temp dir by path.
	 */
	(void) close(base_fd);
	base_fd = open(base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (base_fd < 0)
		bail("reopen the temp dir");
	mnt = mkdir_open(base_fd, "mnt", 0755);
	mkfile(mnt, "file", "f", 1, 0644);
	(void) close(mkdir_open(mnt, "keep", 0755));
	(void) close(mkdir_open(mnt, "bind", 0755));
	sub = mkdir_open(mnt, "sub", 0755);
	(void) close(mkdir_open(sub, "m", 0755));
	bindsrc = mkdir_open(base_fd, "bindsrc", 0755); /* same filesystem, outside the tree */
	mkfile(bindsrc, "keepme", "k", 1, 0644);

	snprintf(path, sizeof(path), "%s/mnt/sub/m", base);
	if (mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m") < 0) {
		snprintf(res.why, sizeof(res.why), "cannot mount a tmpfs: %s", strerror(errno));
		res.skip = true;
		goto out;
	}
	snprintf(path, sizeof(path), "%s/mnt/bind", base);
	snprintf(from, sizeof(from), "%s/bindsrc", base);
	if (mount(from, path, NULL, MS_BIND, NULL) < 0) {
		snprintf(res.why, sizeof(res.why), "cannot bind mount: %s", strerror(errno));
		res.skip = true;
		goto out;
	}
	m = open_dir_at(sub, "m");
	mkfile(m, "inner", "i", 1, 0644);

	res.walk_flagged = mounts_flagged(mnt, false);
	res.fallback_flagged = mounts_flagged(mnt, true);

	r = walk_remove_tree(base_fd, "mnt", NULL);
	res.exdev = r == -EXDEV;
	res.mount_kept = exists_at(m, "inner") && exists_at(sub, "m") &&
			 exists_at(bindsrc, "keepme") && exists_at(mnt, "bind");
	res.rest_removed = !exists_at(mnt, "file") && !exists_at(mnt, "keep");

	mkfile(mnt, "file", "f", 1, 0644);
	walk_force_no_openat2 = true;
	r = walk_remove_tree(base_fd, "mnt", NULL);
	walk_force_no_openat2 = false;
	res.fallback_exdev = r == -EXDEV && !exists_at(mnt, "file");
	res.fallback_kept = exists_at(m, "inner") && exists_at(bindsrc, "keepme");

	(void) close(m);
	m = -1;
	snprintf(path, sizeof(path), "%s/mnt/sub/m", base);
	if (umount2(path, MNT_DETACH) == 0) {
		snprintf(path, sizeof(path), "%s/mnt/bind", base);
		if (umount2(path, MNT_DETACH) == 0)
			res.removed_after = walk_remove_tree(base_fd, "mnt", NULL) == 0 &&
					    !exists_at(base_fd, "mnt") &&
					    exists_at(bindsrc, "keepme");
	}
out:
	fflush(stdout);
	(void) write_all(wfd, &res, sizeof(res));
}

static void
test_mount_point(void)
{
	struct mount_result res = { 0 };
	int p[2], status;
	pid_t pid;

	if (pipe2(p, O_CLOEXEC) < 0)
		bail("pipe");
	fflush(stdout);
	pid = fork();
	if (pid < 0)
		bail("fork");
	if (pid == 0) {
		(void) close(p[0]);
		mount_child(p[1]);
		_exit(0);
	}
	(void) close(p[1]);
	if (read(p[0], &res, sizeof(res)) != (ssize_t) sizeof(res))
		memset(&res, 0, sizeof(res)); /* the child died: every check below fails */
	(void) close(p[0]);
	(void) waitpid(pid, &status, 0);
	if (res.skip) {
		printf("# %s\n", res.why);
		tap_skip("mount point subtests need a private mount namespace");
		return;
	}
	TAP_OK(res.walk_flagged, "walk: a tmpfs and a same-fs bind mount are flagged other_fs");
	TAP_OK(res.fallback_flagged, "walk (no openat2): both mount points flagged other_fs");
	TAP_OK(res.exdev, "remove: fails with -EXDEV at a mount point");
	TAP_OK(res.mount_kept, "remove: mount points and what is behind them are left in place");
	TAP_OK(res.rest_removed, "remove: everything else is removed");
	TAP_OK(res.fallback_exdev, "remove (no openat2): -EXDEV, the rest removed");
	TAP_OK(res.fallback_kept, "remove (no openat2): nothing behind a mount point removed");
	TAP_OK(res.removed_after, "remove: succeeds once the mounts are gone");
}

/* ---- post-run budgets (issue 13 item 4) ---- */

static bool
has_flag_name(json_t *o, const char *name)
{
	json_t *f = json_object_get(o, "flags");

	for (size_t i = 0; i < json_array_size(f); i++)
		if (strcmp(json_string_value(json_array_get(f, i)), name) == 0)
			return true;
	return false;
}

/* Every listed regular file without a sha256 says why. */
static bool
unhashed_all_flagged(const struct ab_manifest *m)
{
	const unsigned why = AB_FLAG_HARDLINK | AB_FLAG_SPARSE | AB_FLAG_TOO_BIG |
			     AB_FLAG_UNREADABLE | AB_FLAG_OTHER_FS | AB_FLAG_OVER_CAP;
	bool ok = true;

	for (size_t i = 0; i < m->n; i++) {
		const struct ab_entry *e = &m->entries[i];

		if (e->type == AB_ENTRY_FILE && !e->sha256[0] && !(e->flags & why)) {
			cleanup_free char *p = walk_escape_name(e->path);

			printf("#   unhashed without a flag: '%s'\n", p);
			ok = false;
		}
	}
	return ok;
}

/* The JSON_INDENT(2) dump of the manifest nested as the report's
 * collected.files. */
static size_t
nested_dump_len(const struct ab_manifest *m)
{
	json_t *wrap = json_pack("{s:{s:o}}", "collected", "files", manifest_to_json(m));
	char *d = json_dumps(wrap, JSON_INDENT(2) | JSON_SORT_KEYS);
	size_t n = d ? strlen(d) : SIZE_MAX;

	free(d);
	json_decref(wrap);
	return n;
}

static void
mkdense(int dirfd, const char *name, size_t len)
{
	char *buf = xmalloc(len);

	for (size_t i = 0; i < len; i++)
		buf[i] = (char) (i * 7 + 1);
	mkfile(dirfd, name, buf, len, 0644);
	free(buf);
}

static void
test_hash_budget(void)
{
	cleanup_fd int d = mkdir_open(base_fd, "hashb", 0755);
	struct ab_walk_opts o = { .dst_dirfd = -1, .chown_uid = (uid_t) -1 };
	struct ab_manifest m = { 0 };
	const struct ab_entry *a, *b, *e;
	uint64_t offs[1] = { 0 };
	char name[32];
	bool sparse_ok = true;
	int64_t ms = 0;
	int hashed;

	/* 50 sparse 64 MiB files: made in milliseconds; hashing their holes took ~4 s
	 */
	for (int i = 0; i < 50; i++) {
		snprintf(name, sizeof(name), "sp%02d", i);
		mksparse(d, name, 64 * MIB, offs, 1, 'S');
	}
	mkdense(d, "dense1", MIB);
	mkdense(d, "dense2", MIB);
	mkdense(d, "toobig", 2 * MIB);
	mkfile(d, "small", "0123456789", 10, 0644);

	o.hash_budget_bytes = 3 * MIB / 2; /* one dense file fits, not two */
	o.hash_max_bytes = 3 * MIB / 2;
	TAP_OK(run_walk(d, &o, &m, &ms) == 0, "hash budget: walk (%jd ms)", (intmax_t) ms);
	for (int i = 0; i < 50; i++) {
		snprintf(name, sizeof(name), "sp%02d", i);
		e = find(&m, name);
		if (!e || e->sha256[0] || e->flags != AB_FLAG_SPARSE || !e->reason ||
		    !strstr(e->reason, "not hashed"))
			sparse_ok = false;
	}
	TAP_OK(sparse_ok, "50 sparse 64 MiB files: flagged sparse, not hashed, with a reason");
	TAP_OK(ms < 1000 && m.hashed_bytes <= o.hash_budget_bytes,
	       "sparse files cost no hash time: %jd ms, %ju bytes charged (budget %ju)",
	       (intmax_t) ms, (uintmax_t) m.hashed_bytes, (uintmax_t) o.hash_budget_bytes);
	a = find(&m, "dense1");
	b = find(&m, "dense2");
	hashed = (a && a->sha256[0]) + (b && b->sha256[0]);
	e = a && a->sha256[0] ? b : a;
	TAP_OK(hashed == 1 && e && (e->flags & AB_FLAG_OVER_CAP) && e->reason &&
		       strstr(e->reason, "hash budget"),
	       "hash budget: one dense 1 MiB file hashed, the other flagged over_cap "
	       "(budget)");
	e = a && a->sha256[0] ? a : b;
	TAP_OK(e && m.hashed_bytes >= e->blocks_bytes && e->blocks_bytes >= MIB,
	       "hash budget: charged by allocated blocks (%ju bytes for a 1 MiB file)",
	       (uintmax_t) (e ? e->blocks_bytes : 0));
	TAP_OK(!m.truncated && (m.truncated_caps & AB_CAP_HASH) && m.unhashed == 52,
	       "hash budget: the listing is complete; caps say hash_budget; %ju "
	       "unhashed",
	       (uintmax_t) m.unhashed);
	e = find(&m, "toobig");
	TAP_OK(e && e->flags == AB_FLAG_TOO_BIG && !e->sha256[0] && e->reason &&
		       strstr(e->reason, "hash size cap"),
	       "a file over hash_max_bytes: too_big, not hashed, with a reason");
	e = find(&m, "small");
	TAP_OK(e && e->sha256[0], "a small file is hashed while budget is left");
	TAP_OK(unhashed_all_flagged(&m), "hash budget: every unhashed file carries a flag");
	{
		json_t *j = manifest_to_json(&m);

		TAP_OK(has_flag_name(files_find(j, "toobig"), "too_big") &&
			       !json_object_get(files_find(j, "toobig"), "sha256") &&
			       has_flag_name(files_find(j, a && a->sha256[0] ? "dense2" : "dense1"),
					     "over_cap") &&
			       has_flag_name(files_find(j, "sp00"), "sparse"),
		       "hash budget: the JSON of an unhashed file has no sha256 and says why");
		json_decref(j);
	}
	manifest_done(&m);
	(void) close(d);
	d = -1;
	TAP_OK(walk_remove_tree(base_fd, "hashb", NULL) == 0, "hash budget: remove");
}

/* The --collect walk takes the first walk's hashes instead of reading the files
 * again. */
static void
test_hashes_from(void)
{
	cleanup_fd int d = mkdir_open(base_fd, "reuse", 0755), fd = -1;
	struct ab_walk_opts o = { .dst_dirfd = -1, .chown_uid = (uid_t) -1 };
	struct ab_manifest first = { 0 }, m = { 0 };
	const struct ab_entry *e;
	bool same = true;

	mkdense(d, "a", MIB);
	mkdense(d, "b", 4096);
	mkfile(d, "c", "c\n", 2, 0644);
	TAP_OK(run_walk(d, &o, &first, NULL) == 0 && first.hashed_bytes > MIB,
	       "reuse: the first walk hashes %ju bytes", (uintmax_t) first.hashed_bytes);
	o.hashes_from = &first;
	o.hash_budget_bytes = 1; /* no fresh hashing */
	TAP_OK(run_walk(d, &o, &m, NULL) == 0, "reuse: second walk");
	for (size_t i = 0; i < first.n; i++) {
		e = find(&m, first.entries[i].path);
		if (!e || strcmp(e->sha256, first.entries[i].sha256) != 0)
			same = false;
	}
	TAP_OK(same && m.hashes_reused == 3 && m.hashed_bytes == 0,
	       "reuse: every sha256 taken from the first walk, nothing hashed again");
	manifest_done(&m);

	fd = openat(d, "a", O_WRONLY | O_CLOEXEC);
	if (fd < 0 || pwrite(fd, "X", 1, 0) != 1)
		bail("change a");
	TAP_OK(run_walk(d, &o, &m, NULL) == 0, "reuse: walk after a file changed");
	e = find(&m, "a");
	TAP_OK(e && !e->sha256[0] && (e->flags & AB_FLAG_OVER_CAP) && m.hashes_reused == 2,
	       "reuse: a changed file (new ctime) is not given its old hash");
	manifest_done(&m);
	manifest_done(&first);
	(void) close(d);
	d = -1;
	TAP_OK(walk_remove_tree(base_fd, "reuse", NULL) == 0, "reuse: remove");
}

/* origin_is: the entry at path in m has this origin, decided by metadata or not. */
static void
origin_is(const struct ab_manifest *m, const char *path, enum ab_entry_origin want, bool by_meta,
	  const char *what)
{
	const struct ab_entry *e = find(m, path);

	TAP_OK(e && e->origin == want && e->origin_by_metadata == by_meta,
	       "origins: %s is %s%s (%s)", path, walk_origin_name(want),
	       by_meta ? " by metadata" : "", what);
	if (e && (e->origin != want || e->origin_by_metadata != by_meta))
		printf("#   got: %s%s\n", walk_origin_name((enum ab_entry_origin) e->origin),
		       e->origin_by_metadata ? " by metadata" : "");
}

/* files[].origin (issue 15): against a listing taken before, by path, by content. */
static void
test_origins(void)
{
	cleanup_fd int d = mkdir_open(base_fd, "origins", 0755), fd = -1, sub = -1;
	struct ab_walk_opts o = { .dst_dirfd = -1,
				  .chown_uid = (uid_t) -1,
				  .hash_max_bytes = 1024 };
	struct ab_manifest pre = { 0 }, m = { 0 };
	const struct ab_entry *e;
	struct stat st;
	char big[4096];
	size_t dump;

	memset(big, 'b', sizeof(big));
	mkfile(d, "script.py", "print(1)\n", 9, 0644);
	mkfile(d, "keep.txt", "k\n", 2, 0644);
	mkfile(d, "touched.txt", "t\n", 2, 0644);
	mkfile(d, "append.txt", "a\n", 2, 0644);
	mkfile(d, "same-size.txt", "aaaa", 4, 0644);
	mkfile(d, "big-keep.bin", big, sizeof(big), 0644);
	mkfile(d, "big-change.bin", big, sizeof(big), 0644);
	mkfile(d, "becomes-dir", "f", 1, 0644);
	mkfile(d, "removed.txt", "r", 1, 0644);
	if (symlinkat("keep.txt", d, "link") < 0)
		bail("plant a symlink");
	sub = mkdir_open(d, "sub", 0755);
	mkfile(sub, "inner.txt", "i", 1, 0644);
	TAP_OK(run_walk(d, &o, &pre, NULL) == 0 && !pre.truncated,
	       "origins: the listing before (%zu entries)", pre.n);

	/* what a run does */
	if (fstatat(d, "same-size.txt", &st, 0) < 0)
		bail("stat same-size.txt");
	fd = openat(d, "same-size.txt", O_WRONLY | O_CLOEXEC);
	if (fd < 0 || pwrite(fd, "bbbb", 4, 0) != 4)
		bail("rewrite same-size.txt");
	/* the same size and mtime as before: only the content says it changed */
	if (futimens(fd, (struct timespec[]){ st.st_atim, st.st_mtim }) < 0)
		bail("set the mtime back");
	(void) close(fd);
	fd = openat(d, "append.txt", O_WRONLY | O_APPEND | O_CLOEXEC);
	if (fd < 0 || write(fd, "more\n", 5) != 5)
		bail("append");
	(void) close(fd);
	fd = -1;
	if (utimensat(d, "touched.txt", NULL, 0) < 0) /* new times, same content */
		bail("touch");
	fd = openat(d, "big-change.bin", O_WRONLY | O_CLOEXEC);
	if (fd < 0 || pwrite(fd, "X", 1, 100) != 1)
		bail("change big-change.bin");
	(void) close(fd);
	fd = -1;
	if (unlinkat(d, "becomes-dir", 0) < 0 || mkdirat(d, "becomes-dir", 0755) < 0)
		bail("replace a file by a directory");
	if (unlinkat(d, "removed.txt", 0) < 0 || unlinkat(d, "link", 0) < 0 ||
	    symlinkat("touched.txt", d, "link") < 0)
		bail("retarget the link");
	mkfile(d, "new.txt", "n", 1, 0644);
	mkfile(sub, "new-inner.txt", "n", 1, 0644);

	o.origins_from = &pre;
	o.origin_script = "script.py";
	TAP_OK(run_walk(d, &o, &m, NULL) == 0, "origins: the walk after");
	origin_is(&m, "script.py", AB_ORIGIN_SCRIPT, false, "the script, as it was");
	origin_is(&m, "keep.txt", AB_ORIGIN_UNCHANGED, false, "untouched");
	origin_is(&m, "touched.txt", AB_ORIGIN_UNCHANGED, false, "new times, same sha256");
	origin_is(&m, "append.txt", AB_ORIGIN_MODIFIED, false, "appended to");
	origin_is(&m, "same-size.txt", AB_ORIGIN_MODIFIED, false,
		  "same size and mtime, other content");
	origin_is(&m, "big-keep.bin", AB_ORIGIN_UNCHANGED, true, "over the hash cap, untouched");
	origin_is(&m, "big-change.bin", AB_ORIGIN_MODIFIED, true, "over the hash cap, written");
	origin_is(&m, "becomes-dir", AB_ORIGIN_CREATED, false, "a directory where a file was");
	origin_is(&m, "link", AB_ORIGIN_MODIFIED, false, "a link with another target");
	origin_is(&m, "sub", AB_ORIGIN_UNCHANGED, false, "a directory that was there");
	origin_is(&m, "sub/inner.txt", AB_ORIGIN_UNCHANGED, false, "untouched, one level down");
	origin_is(&m, "new.txt", AB_ORIGIN_CREATED, false, "new");
	origin_is(&m, "sub/new-inner.txt", AB_ORIGIN_CREATED, false, "new, one level down");
	TAP_OK(!find(&m, "removed.txt"), "origins: a removed file is not listed");
	dump = nested_dump_len(&m);
	TAP_OK(dump <= m.list_bytes, "origins: the JSON (%zu) stays within list_bytes (%ju)", dump,
	       (uintmax_t) m.list_bytes);
	{
		json_t *j = manifest_to_json(&m);
		size_t i;
		json_t *x;
		bool keys = true;

		json_array_foreach(j, i, x)
		{
			const char *p = json_string_value(json_object_get(x, "path"));
			const char *by = json_string_value(json_object_get(x, "origin_by"));

			e = find(&m, p);
			keys = keys && e &&
			       strcmp(json_string_value(json_object_get(x, "origin")),
				      walk_origin_name((enum ab_entry_origin) e->origin)) == 0 &&
			       (e->origin_by_metadata ? by && strcmp(by, "metadata") == 0 : !by);
		}
		TAP_OK(keys, "origins: manifest_to_json writes origin, and origin_by for metadata");
		json_decref(j);
	}
	manifest_done(&m);

	/* the script itself changed: modified, like any file */
	fd = openat(d, "script.py", O_WRONLY | O_APPEND | O_CLOEXEC);
	if (fd < 0 || write(fd, "#\n", 2) != 2)
		bail("change the script");
	(void) close(fd);
	fd = -1;
	TAP_OK(run_walk(d, &o, &m, NULL) == 0, "origins: the walk after the script changed");
	origin_is(&m, "script.py", AB_ORIGIN_MODIFIED, false, "the script, changed by the run");
	manifest_done(&m);

	/* no origins_from: no origin at all */
	o.origins_from = NULL;
	TAP_OK(run_walk(d, &o, &m, NULL) == 0 && (e = find(&m, "keep.txt")) &&
		       e->origin == AB_ORIGIN_NONE,
	       "origins: none without origins_from");
	{
		json_t *j = manifest_to_json(&m);

		TAP_OK(!json_object_get(json_array_get(j, 0), "origin"),
		       "origins: no origin key without origins_from");
		json_decref(j);
	}
	manifest_done(&m);
	manifest_done(&pre);

	/* a listing before the run that a cap cut short: what it missed is unknown */
	o.max_entries = 3;
	TAP_OK(run_walk(d, &o, &pre, NULL) == 0 && pre.truncated, "origins: a truncated listing");
	o.max_entries = 0;
	o.origins_from = &pre;
	TAP_OK(run_walk(d, &o, &m, NULL) == 0, "origins: the walk after a truncated listing");
	{
		size_t unknown = 0, known = 0;

		for (size_t i = 0; i < m.n; i++) {
			if (m.entries[i].origin == AB_ORIGIN_UNKNOWN)
				unknown++;
			else if (m.entries[i].origin == AB_ORIGIN_UNCHANGED ||
				 m.entries[i].origin == AB_ORIGIN_SCRIPT)
				known++;
		}
		TAP_OK(unknown == m.n - known && known == pre.n && unknown > 0,
		       "origins: %zu entries the listing missed are unknown, never created; the "
		       "%zu it had are unchanged",
		       unknown, known);
	}
	manifest_done(&m);
	manifest_done(&pre);
	(void) close(sub);
	sub = -1;
	(void) close(d);
	d = -1;
	TAP_OK(walk_remove_tree(base_fd, "origins", NULL) == 0, "origins: remove");
}

/* 255-byte names, mostly bytes that are escaped as \xNN (5 bytes of JSON each).
 */
static void
hostile_name(char out[256], int tag, char fill, char last)
{
	memset(out, fill, 255);
	snprintf(out, 8, "%05d", tag);
	out[5] = fill;
	out[254] = last;
	out[255] = '\0';
}

static void
test_manifest_cap(void)
{
	cleanup_fd int d = mkdir_open(base_fd, "many", 0755);
	cleanup_fd int dst = mkdir_open(base_fd, "many-dst", 0755);
	struct ab_walk_opts o = copy_opts(dst);
	struct ab_manifest m = { 0 };
	char name[256];
	size_t dump;

	for (int i = 0; i < 300; i++) {
		hostile_name(name, i, '\xff', 'F');
		mkfile(d, name, "x", 1, 0644);
	}
	o.max_list_bytes = 64 << 10;
	TAP_OK(run_walk(d, &o, &m, NULL) == 0, "manifest cap: walk 300 long hostile names");
	dump = nested_dump_len(&m);
	TAP_OK(m.truncated && (m.truncated_caps & AB_CAP_MANIFEST) && m.truncated_by &&
		       strstr(m.truncated_by, "manifest size"),
	       "manifest cap: truncated by the manifest size cap");
	TAP_OK(m.n > 0 && m.n < 300 && m.n + m.unlisted == 300,
	       "manifest cap: %zu listed, %ju walked but not listed", m.n, (uintmax_t) m.unlisted);
	TAP_OK(dump <= m.list_bytes && m.list_bytes <= o.max_list_bytes,
	       "manifest cap: the JSON (%zu bytes, escaping included) <= list_bytes "
	       "(%ju) <= cap",
	       dump, (uintmax_t) m.list_bytes);
	TAP_OK(count_entries(base_fd, "many-dst") == 300,
	       "manifest cap: every file is still copied (the cap is on the listing)");
	manifest_done(&m);
	(void) close(d);
	(void) close(dst);
	d = dst = -1;
	TAP_OK(walk_remove_tree(base_fd, "many", NULL) == 0 &&
		       walk_remove_tree(base_fd, "many-dst", NULL) == 0,
	       "manifest cap: remove");
}

static int64_t
vm_hwm_kib(void)
{
	char buf[4096];
	const char *p;

	if (read_small_file_at(AT_FDCWD, "/proc/self/status", buf, sizeof(buf)) <= 0 ||
	    !(p = strstr(buf, "VmHWM:")))
		return -1;
	return strtoll(p + 6, NULL, 10);
}

struct deep_result {
	int r;
	size_t n, dump, longest;
	uint64_t unlisted, total, list_bytes, caps;
	int64_t ms, rss_kib;
};

/* In a fresh child, so that VmHWM measures this walk and its JSON only. */
static void
deep_names_child(int src, int wfd)
{
	struct ab_walk_opts o = { .dst_dirfd = -1, .chown_uid = (uid_t) -1 };
	struct deep_result res = { 0 };
	struct ab_manifest m = { 0 };
	int64_t hwm0 = vm_hwm_kib();

	res.r = run_walk(src, &o, &m, &res.ms);
	res.dump = nested_dump_len(&m);
	res.rss_kib = vm_hwm_kib() - hwm0;
	res.n = m.n;
	res.unlisted = m.unlisted;
	res.total = m.total_entries;
	res.list_bytes = m.list_bytes;
	res.caps = m.truncated_caps;
	for (size_t i = 0; i < m.n; i++)
		if (strlen(m.entries[i].path) > res.longest)
			res.longest = strlen(m.entries[i].path);
	manifest_done(&m);
	(void) write_all(wfd, &res, sizeof(res));
}

/* The report amplification of issue 13: a deep chain of 255-byte names, 17
 * empty files a level, every path stored in full and escaped 5 times over, made
 * a 319 MiB report. */
static void
test_deep_long_names(void)
{
	cleanup_fd int d = mkdir_open(base_fd, "deepnames", 0755);
	struct deep_result res = { .r = -1 };
	int fd = fcntl(d, F_DUPFD_CLOEXEC, 3), p[2];
	uint64_t full = 0, plen = 0;
	char name[256];
	pid_t pid;

	for (int lvl = 0; lvl < 120; lvl++) {
		int next;

		for (int k = 0; k < 17; k++) {
			hostile_name(name, k, '\xff', 'F');
			mkfile(fd, name, "", 0, 0644);
			full += (plen + 256) * 5;
		}
		hostile_name(name, lvl, '\xfe', 'D');
		next = mkdir_open(fd, name, 0755);
		full += (plen + 256) * 5;
		plen += 256;
		(void) close(fd);
		fd = next;
	}
	(void) close(fd);
	if (pipe2(p, O_CLOEXEC) < 0)
		bail("pipe");
	fflush(stdout);
	pid = fork();
	if (pid < 0)
		bail("fork");
	if (pid == 0) {
		(void) close(p[0]);
		deep_names_child(d, p[1]);
		_exit(0);
	}
	(void) close(p[1]);
	if (read(p[0], &res, sizeof(res)) != (ssize_t) sizeof(res))
		res.r = -1;
	(void) close(p[0]);
	(void) waitpid(pid, NULL, 0);
	TAP_OK(res.r == 0 && res.total == 120 * 18 && res.n + res.unlisted == res.total,
	       "deep chain of long names: all %ju entries walked, %zu listed (%jd ms)",
	       (uintmax_t) res.total, res.n, (intmax_t) res.ms);
	TAP_OK(res.longest <= WALK_LIST_PATH_MAX && (res.caps & AB_CAP_PATH_LENGTH),
	       "deep chain of long names: no listed path is over %d bytes (longest %zu)",
	       WALK_LIST_PATH_MAX, res.longest);
	TAP_OK(res.dump <= res.list_bytes && res.list_bytes <= (8 << 20),
	       "deep chain of long names: JSON %zu bytes (<= list_bytes %ju <= 8 "
	       "MiB); listing "
	       "every path in full would take ~%ju MiB",
	       res.dump, (uintmax_t) res.list_bytes, (uintmax_t) (full >> 20));
	TAP_OK(res.rss_kib >= 0 && res.rss_kib < 64 * 1024,
	       "deep chain of long names: walk + JSON + dump grew the peak RSS by "
	       "%jd KiB",
	       (intmax_t) res.rss_kib);
	(void) close(d);
	d = -1;
	TAP_OK(walk_remove_tree(base_fd, "deepnames", NULL) == 0, "deep chain of long names: "
								  "remove");
}

static void
test_time_budget(int src)
{
	struct ab_walk_opts o = { .dst_dirfd = -1, .chown_uid = (uid_t) -1, .time_budget_ms = 1 };
	struct ab_manifest m = { 0 };
	int64_t ms = 0;

	TAP_OK(run_walk(src, &o, &m, &ms) == 0 && m.truncated && (m.truncated_caps & AB_CAP_TIME) &&
		       ms < 1000,
	       "time budget 1 ms: the 10,000-deep tree is cut short (%jd ms, %zu "
	       "listed)",
	       (intmax_t) ms, m.n);
	manifest_done(&m);
}

/* ---- in-place strip (issue 12) ---- */

static const char *const strip_names[] = {
	"old-file",   "old-dir", "new-file", "new-unreadable", "new-dir", "new-dir/inner",
	"new-sticky", "hl",      "hl2",      "fifo",           "outlink", "other",
	"plain",
};

struct strip_snap {
	struct stat st[ARRAY_SIZE(strip_names)];
	bool there[ARRAY_SIZE(strip_names)];
	struct stat outside;
};

static void
strip_snapshot(int t, int outside_dir, struct strip_snap *s)
{
	for (size_t i = 0; i < ARRAY_SIZE(strip_names); i++)
		s->there[i] = fstatat(t, strip_names[i], &s->st[i], AT_SYMLINK_NOFOLLOW) == 0;
	if (fstatat(outside_dir, "suid", &s->outside, AT_SYMLINK_NOFOLLOW) < 0)
		bail("stat the outside file");
}

static bool
same_stat(const struct stat *a, const struct stat *b)
{
	return a->st_mode == b->st_mode && a->st_uid == b->st_uid && a->st_ino == b->st_ino &&
	       a->st_size == b->st_size && a->st_nlink == b->st_nlink &&
	       a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

static int
strip_index(const char *name)
{
	for (size_t i = 0; i < ARRAY_SIZE(strip_names); i++)
		if (strcmp(strip_names[i], name) == 0)
			return (int) i;
	bail("no such strip test entry");
}

/* Builds the strip tree in `dir`: entries left before *since, then entries
 * changed after. */
static int
strip_build(const char *dir, int outside_dir, struct timespec *since)
{
	int t = mkdir_open(base_fd, dir, 0755);
	cleanup_fd int nd = -1, od = -1;
	char path[PATH_MAX];
	struct stat st;

	mkfile(t, "old-file", "o\n", 2, 06777);
	od = mkdir_open(t, "old-dir", 0755);
	if (fchmod(od, 02777) < 0)
		bail("chmod old-dir");
	*since = (struct timespec){ 0 };
	for (int i = 0; i < 2; i++) {
		if (fstatat(t, i ? "old-dir" : "old-file", &st, AT_SYMLINK_NOFOLLOW) < 0)
			bail("stat an old entry");
		if (st.st_ctim.tv_sec > since->tv_sec ||
		    (st.st_ctim.tv_sec == since->tv_sec && st.st_ctim.tv_nsec > since->tv_nsec))
			*since = st.st_ctim;
	}
	/* since: just after the old entries; wait until a new change has a later
	 * ctime */
	since->tv_nsec++;
	if (since->tv_nsec >= 1000000000) {
		since->tv_sec++;
		since->tv_nsec = 0;
	}
	for (int i = 0; i < 200; i++) {
		usleep(10000);
		mkfile(t, "probe", "", 0, 0644);
		if (fstatat(t, "probe", &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    unlinkat(t, "probe", 0) < 0)
			bail("probe the ctime");
		if (st.st_ctim.tv_sec > since->tv_sec ||
		    (st.st_ctim.tv_sec == since->tv_sec && st.st_ctim.tv_nsec > since->tv_nsec))
			break;
	}

	mkfile(t, "new-file", "n\n", 2, 06777);
	mkfile(t, "new-unreadable", "u\n", 2, 04002); /* its owner cannot open it to read */
	nd = mkdir_open(t, "new-dir", 0755);
	mkfile(nd, "inner", "i\n", 2, 04755);
	if (fchmod(nd, 02777) < 0)
		bail("chmod new-dir");
	(void) close(mkdir_open(t, "new-sticky", 01777));
	if (fchmodat(t, "new-sticky", 01777, 0) < 0)
		bail("chmod new-sticky");
	mkfile(t, "hl", "h\n", 2, 06755);
	if (linkat(t, "hl", t, "hl2", 0) < 0)
		bail("link");
	if (mkfifoat(t, "fifo", 0666) < 0 || fchmodat(t, "fifo", 0666, 0) < 0)
		bail("mkfifo");
	snprintf(path, sizeof(path), "%s/strip-outside/suid", base);
	if (symlinkat(path, t, "outlink") < 0)
		bail("symlink");
	mkfile(t, "other", "x\n", 2, 06777);
	if (privileged && fchownat(t, "other", 4242, 4242, AT_SYMLINK_NOFOLLOW) < 0)
		bail("chown other");
	if (privileged && fchmodat(t, "other", 06777, 0) < 0) /* chown cleared the bits */
		bail("chmod other");
	mkfile(t, "plain", "p\n", 2, 0644);
	(void) outside_dir;
	return t;
}

/* by_path: hashing off, so no file is opened readable and every strip takes the
 * O_PATH + /proc/self/fd route; fallback: openat2 is not used. */
static void
test_strip(const char *tag, bool by_path, bool fallback)
{
	static const char *const stripped[] = { "new-file",      "new-unreadable", "new-dir",
						"new-dir/inner", "new-sticky",     "hl" };
	cleanup_fd int t = -1, outside = -1;
	struct ab_walk_opts o = { .dst_dirfd = -1, .chown_uid = (uid_t) -1 };
	struct ab_manifest m = { 0 };
	struct strip_snap before, after;
	char dir[64];
	bool ok = true;
	json_t *j;
	int r;

	snprintf(dir, sizeof(dir), "strip-%s", tag);
	outside = mkdir_open(base_fd, "strip-outside", 0755);
	mkfile(outside, "suid", "s\n", 2, 04755);
	t = strip_build(dir, outside, &o.strip_since);
	strip_snapshot(t, outside, &before);

	/* another owner: nothing changes */
	o.strip_uid = geteuid() + 1;
	o.hash_max_bytes = by_path ? 1 : 0;
	walk_force_no_openat2 = fallback;
	r = run_walk(t, &o, &m, NULL);
	strip_snapshot(t, outside, &after);
	for (size_t i = 0; i < ARRAY_SIZE(strip_names); i++)
		ok = ok && before.there[i] && after.there[i] &&
		     same_stat(&before.st[i], &after.st[i]);
	TAP_OK(r == 0 && ok && m.stripped == 0,
	       "strip %s: strip_uid of nobody here: every entry's stat is identical", tag);
	manifest_done(&m);

	o.strip_uid = geteuid();
	r = run_walk(t, &o, &m, NULL);
	walk_force_no_openat2 = false;
	strip_snapshot(t, outside, &after);
	TAP_OK(r == 0 && m.stripped == ARRAY_SIZE(stripped) && m.strip_failed == 0,
	       "strip %s: %ju entries stripped (hl and hl2 are one inode)", tag,
	       (uintmax_t) m.stripped);
	ok = true;
	for (size_t i = 0; i < ARRAY_SIZE(stripped); i++) {
		int k = strip_index(stripped[i]);
		const struct ab_entry *e = find(&m, stripped[i]);
		/* the walk flags whichever name of the pair it meets first */
		const struct ab_entry *e2 = strcmp(stripped[i], "hl") ? NULL : find(&m, "hl2");
		mode_t want =
			before.st[k].st_mode & ~(mode_t) (S_ISUID | S_ISGID | S_IWGRP | S_IWOTH);

		if (after.st[k].st_mode != want || after.st[k].st_ino != before.st[k].st_ino ||
		    !e || !((e->flags | (e2 ? e2->flags : 0)) & AB_FLAG_STRIPPED) ||
		    (e->mode != (before.st[k].st_mode & 07777) && !e2)) {
			printf("#   %s: mode %o -> %o (want %o)\n", stripped[i],
			       before.st[k].st_mode & 07777, after.st[k].st_mode & 07777,
			       want & 07777);
			ok = false;
		}
	}
	TAP_OK(ok,
	       "strip %s: setuid/setgid/g+w/o+w removed from new files and "
	       "directories of the "
	       "owner, in place (same inode), flagged stripped, mode as found kept",
	       tag);
	TAP_OK((after.st[strip_index("new-sticky")].st_mode & 07777) == 01755,
	       "strip %s: the sticky bit stays (01777 -> 01755)", tag);
	ok = true;
	for (size_t i = 0; i < ARRAY_SIZE(strip_names); i++) {
		const char *n = strip_names[i];

		if (!strcmp(n, "old-file") || !strcmp(n, "old-dir") || !strcmp(n, "fifo") ||
		    !strcmp(n, "outlink") || !strcmp(n, "plain") ||
		    (!strcmp(n, "other") && privileged))
			if (!same_stat(&before.st[i], &after.st[i])) {
				printf("#   %s changed\n", n);
				ok = false;
			}
	}
	TAP_OK(ok,
	       "strip %s: older ctime, another owner%s, a FIFO, a symlink and a "
	       "plain file: "
	       "stat before and after identical",
	       tag, privileged ? "" : " (not root: skipped)");
	TAP_OK(same_stat(&before.outside, &after.outside) &&
		       (after.outside.st_mode & 07777) == (before.outside.st_mode & 07777) &&
		       (before.outside.st_mode & S_ISUID),
	       "strip %s: the setuid file outside, behind a symlink, is untouched", tag);
	j = manifest_to_json(&m);
	TAP_OK(has_flag_name(files_find(j, "new-file"), "stripped") &&
		       !has_flag_name(files_find(j, "old-file"), "stripped"),
	       "strip %s: the JSON says \"stripped\"", tag);
	json_decref(j);
	manifest_done(&m);
	(void) close(t);
	(void) close(outside);
	t = outside = -1;
	TAP_OK(walk_remove_tree(base_fd, dir, NULL) == 0 &&
		       walk_remove_tree(base_fd, "strip-outside", NULL) == 0,
	       "strip %s: remove", tag);
}

/* A zero-initialised ab_walk_opts (strip_uid 0, strip_since {0, 0}) never
 * strips. */
static void
test_strip_off_by_default(void)
{
	cleanup_fd int t = mkdir_open(base_fd, "strip-zero", 0755);
	struct ab_walk_opts o = { .dst_dirfd = -1, .chown_uid = (uid_t) -1 };
	struct ab_manifest m = { 0 };
	struct stat st;

	mkfile(t, "f", "f\n", 2, 06777);
	if (privileged && (fchownat(t, "f", 0, 0, AT_SYMLINK_NOFOLLOW) < 0 ||
			   fchmodat(t, "f", 06777, 0) < 0)) /* chown clears the bits */
		bail("chown");
	TAP_OK(run_walk(t, &o, &m, NULL) == 0 && m.stripped == 0 &&
		       fstatat(t, "f", &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		       (st.st_mode & 07777) == (privileged ? 06777 : (st.st_mode & 07777)),
	       "strip: a zero-initialised ab_walk_opts strips nothing (uid 0, since "
	       "{0, 0})");
	manifest_done(&m);
	(void) close(t);
	t = -1;
	(void) walk_remove_tree(base_fd, "strip-zero", NULL);
}

static void
run_tests(void)
{
	cleanup_fd int src = -1, dst = -1;
	struct ab_walk_opts o;
	struct ab_manifest m = { 0 };
	struct ab_err err = { 0 };
	struct rlimit nofile;
	struct stat st;
	int64_t ms = 0;
	int r;

	if (getrlimit(RLIMIT_NOFILE, &nofile) < 0)
		bail("getrlimit");
	build_tree();
	src = open_dir_at(base_fd, "src");
	dst = open_dir_at(base_fd, "dst");

	o = copy_opts(dst);
	r = run_walk(src, &o, &m, &ms);
	TAP_OK(r == 0, "walk_tree over the hostile tree with a copy (%jd ms, %zu entries)",
	       (intmax_t) ms, m.n);
	if (r < 0)
		return;
	check_types_and_flags(&m);
	check_deep(&m);
	check_canary("walk");
	check_copies(dst);
	check_escapes(&m);
	check_json(&m);
	TAP_OK(fstatat(src, "locked", &st, AT_SYMLINK_NOFOLLOW) == 0 && (st.st_mode & 07777) == 0 &&
		       fstatat(src, "setid", &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		       (st.st_mode & 07777) == 06755,
	       "walk_tree left the source tree's modes alone");

	test_fallback(src, &m);
	manifest_done(&m);
	test_caps(src);
	test_sparse_giant();
	test_chown(src);
	test_deep_few_fds();
	test_dst_inside_src();
	test_real_enosys(src);
	test_remove_small();
	test_mount_point();
	test_hash_budget();
	test_hashes_from();
	test_origins();
	test_manifest_cap();
	test_deep_long_names();
	test_time_budget(src);
	test_strip("fd", false, false);
	test_strip("opath", true, false);
	test_strip("fallback", true, true);
	test_strip_off_by_default();

	(void) close(src);
	src = -1;
	set_nofile(100);
	r = walk_remove_tree(base_fd, "src", &err);
	set_nofile(nofile.rlim_cur);
	TAP_OK(r == 0 && !exists_at(base_fd, "src"),
	       "remove the whole hostile tree (10,000 deep, 000 dir, long names) (%d "
	       "%s)",
	       r, err.msg);
	r = walk_remove_tree(base_fd, "dst", &err);
	TAP_OK(r == 0 && !exists_at(base_fd, "dst"), "remove the copy, planted symlinks included");
	check_canary("remove");
	TAP_OK(exists_at(base_fd, "canary"), "the canary dir outside survives");
}

int
main(void)
{
	char *slash;
	int status = 0;
	pid_t pid;

	snprintf(base, sizeof(base), "/tmp/ab-walk-XXXXXX");
	if (!mkdtemp(base))
		bail("mkdtemp");
	base_fd = open(base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (base_fd < 0)
		bail("open the temp dir");
	privileged = geteuid() == 0;
	fflush(stdout);

	pid = fork();
	if (pid < 0)
		bail("fork");
	if (pid == 0) {
		run_tests();
		exit(tap_done());
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			bail("waitpid");

	/* Whatever the child did: remove the temp dir. */
	{
		cleanup_fd int tmp = open("/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		struct ab_err err = { 0 };

		slash = strrchr(base, '/');
		if (tmp < 0 || walk_remove_tree(tmp, slash + 1, &err) < 0) {
			printf("# cleanup of %s failed: %s\n", base, err.msg);
			status = status ? status : 1 << 8;
		}
	}
	if (WIFSIGNALED(status)) {
		printf("Bail out! the test process died of signal %d (a hang ends in "
		       "SIGALRM)\n",
		       WTERMSIG(status));
		return 1;
	}
	return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

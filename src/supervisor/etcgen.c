#include "etcgen.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/mount.h>
#include <sys/sendfile.h>
#include <sys/stat.h>

#include "../fs/hostfs.h"
#include "../util/fdutil.h"
#include "../util/macro.h"
#include "../util/xalloc.h"
#include "../warm/warm.h"
#include "binds.h"
#include "plan.h"

/* The curated set (issue 15): what interpreters and common packages read from /etc, and
 * nothing secret. Bound read-only at the same path when it exists on the host, after the
 * checks in add_host_entry. docs/design.md "The sandbox's /etc" lists and explains them. */
const char *const etcgen_host_entries[] = {
	"/etc/alternatives", /* Debian's alternatives links in /usr/bin point here */
	"/etc/ld.so.cache",  /* the dynamic linker's cache: faster startup */
	/* Read-only configuration that libraries the scripts import need, and nothing secret:
	 * Debian's matplotlib refuses to import without its matplotlibrc, fontconfig reads
	 * fonts/, Python's mimetypes and others read mime.types. */
	"/etc/matplotlibrc",
	"/etc/fonts",
	"/etc/mime.types",
	/* CA certificates for offline verification (ssl's default paths, Node's https);
	 * certs/ only, never ssl/ whole: ssl/private holds the host's keys */
	"/etc/ssl/certs",
	"/etc/ssl/openssl.cnf", /* OpenSSL's defaults (Debian's security level, providers) */
	"/etc/services",        /* getservbyname(), socket.getservbyname */
	"/etc/protocols",       /* getprotobyname(), socket.getprotobyname */
	"/etc/mailcap",         /* Python's mailcap, and MIME handlers */
	"/etc/magic",           /* libmagic's local additions (python3-magic, file) */
	"/etc/magic.mime",
	"/etc/inputrc",        /* readline in REPLs driven through a pty */
	"/etc/debian_version", /* platform checks of build and packaging tools */
	NULL,
};

struct etc_file {
	const char *name;
	const char *text;
};

#define STR_(x) #x
#define STR(x)  STR_(x)

/* The sandbox user's passwd and group lines, e.g. "agent:x:1000:1000:sandbox user:/work:..." */
#define PASSWD_AGENT                                                                       \
	AB_SANDBOX_USER                                                                    \
	":x:" STR(AB_SANDBOX_UID) ":" STR(AB_SANDBOX_GID) ":sandbox user:" AB_SANDBOX_WORK \
							  ":/usr/sbin/nologin\n"
#define GROUP_AGENT AB_SANDBOX_USER ":x:" STR(AB_SANDBOX_GID) ":\n"

static const struct etc_file etc_files[] = {
	{ "passwd", "root:x:0:0:root:/nonexistent:/usr/sbin/nologin\n" PASSWD_AGENT
		    "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n" },
	{ "group", "root:x:0:\n" GROUP_AGENT "nogroup:x:65534:\n" },
	{ "hostname", AB_SANDBOX_HOSTNAME "\n" },
	{ "hosts", "127.0.0.1\tlocalhost " AB_SANDBOX_HOSTNAME "\n"
		   "::1\tlocalhost ip6-localhost ip6-loopback\n" },
	{ "nsswitch.conf", "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\n"
			   "networks: files\nprotocols: files\nservices: files\n" },
	{ "timezone", "Etc/UTC\n" }, /* with localtime: UTC, no host timezone */
};

/* Generated links: the sandbox's clock is UTC (deterministic, no host timezone leak), and
 * os-release is the one /usr already shows. */
static const struct etc_file etc_links[] = {
	{ "localtime", "/usr/share/zoneinfo/Etc/UTC" },
	{ "os-release", "../usr/lib/os-release" },
};

/* Bound from the host only when the sandbox keeps the network (`agentbox prepare`). */
static const char *const net_entries[] = { "/etc/resolv.conf", NULL };

bool
etcgen_is_generated(const char *name)
{
	for (size_t i = 0; i < ARRAY_SIZE(etc_files); i++)
		if (strcmp(name, etc_files[i].name) == 0)
			return true;
	for (size_t i = 0; i < ARRAY_SIZE(etc_links); i++)
		if (strcmp(name, etc_links[i].name) == 0)
			return true;
	/* the warm-slot hooks (warm.h) */
	if (strncmp(name, "agentbox", 8) == 0 && (name[8] == '\0' || name[8] == '/'))
		return true;
	return strcmp(name, "resolv.conf") == 0;
}

bool
etcgen_is_curated(const char *name)
{
	for (const char *const *h = etcgen_host_entries; *h; h++) {
		const char *e = *h + strlen("/etc/");
		size_t l = strlen(e);

		if (strncmp(name, e, l) == 0 && (name[l] == '\0' || name[l] == '/'))
			return true;
	}
	return false;
}

static int
write_bytes_at(int dirfd, const char *name, const void *data, size_t len, uid_t owner, gid_t group)
{
	cleanup_fd int fd = -1;
	int r;

	fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	r = write_all(fd, data, len);
	if (r < 0)
		return r;
	if (owner != (uid_t) -1 && fchown(fd, owner, group) < 0)
		return -errno;
	return 0;
}

static int
write_file_at(int dirfd, const char *name, const char *text, uid_t owner, gid_t group)
{
	return write_bytes_at(dirfd, name, text, strlen(text), owner, group);
}

/* Regular files up to this size are copied into the generated /etc rather than bound (its
 * tmpfs is 2 MiB; the curated files total about 200 KiB on Debian 12). */
#define ETC_COPY_MAX (128 * 1024)

/* Copies the file open on fd (fstat st) to a new `name` below efd, kernel to kernel
 * (sendfile: no buffer of ours to fault in and unmap). -EAGAIN: it grew past ETC_COPY_MAX
 * while read, nothing left behind, bind it instead. */
static int
copy_small_file(int efd, const char *name, int fd, const struct stat *st)
{
	cleanup_fd int in = hostfs_reopen(fd, O_RDONLY);
	cleanup_fd int out = -1;
	size_t len = 0;
	int r = 0;

	if (in < 0)
		return -EAGAIN;
	out = openat(efd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
		     st->st_mode & 0644);
	if (out < 0)
		return -errno;
	while (len <= ETC_COPY_MAX) {
		ssize_t n = sendfile(out, in, NULL, ETC_COPY_MAX + 1 - len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = errno == ENOSPC || errno == EDQUOT ? -errno : -EAGAIN;
			break;
		}
		if (n == 0)
			break;
		len += (size_t) n;
	}
	if (r == 0 && len > ETC_COPY_MAX)
		r = -EAGAIN;
	if (r == -EAGAIN)
		(void) unlinkat(efd, name, 0);
	return r;
}

/* AB_WARM_DIR with the warm-slot hooks (warm.h): in every sandbox, cold or warm, so that both
 * see the same /etc; they act only in a slot's interpreter, started to load them. The Python
 * hook's bytecode is in __pycache__, as CPython would have written it: compiling the source
 * took a slot's interpreter 4-5 ms of CPU at each start (bench/warm). */
static int
write_warm_hooks(int efd, uid_t owner, gid_t group)
{
	static const char *const dirs[] = { "agentbox", "agentbox/warm",
					    "agentbox/warm/__pycache__" };
	cleanup_fd int wfd = -1;
	int r;

	for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
		if (mkdirat(efd, dirs[i], 0755) < 0)
			return -errno;
		if (owner != (uid_t) -1 &&
		    fchownat(efd, dirs[i], owner, group, AT_SYMLINK_NOFOLLOW) < 0)
			return -errno;
	}
	wfd = openat(efd, "agentbox/warm", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (wfd < 0)
		return -errno;
	r = write_file_at(wfd, "sitecustomize.py", ab_warm_sitecustomize_py, owner, group);
	if (r == 0)
		r = write_file_at(wfd, "hook.js", ab_warm_hook_js, owner, group);
	if (r == 0) {
		cleanup_fd int cfd =
			openat(wfd, "__pycache__", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

		r = cfd < 0 ? -errno
			    : write_bytes_at(cfd, ab_warm_sitecustomize_py_pyc_file,
					     ab_warm_sitecustomize_py_pyc,
					     ab_warm_sitecustomize_py_pyc_len, owner, group);
	}
	return r;
}

/* Records what a verdict of tree_public rests on (the trees cache, below): one line per
 * directory and per entry that is not a link, "REL\tDEV INO MODE MTIME MTIME_NS CTIME
 * CTIME_NS". *ok turns false for a name the line format cannot carry. */
static void
record_stat(struct strv *rec, bool *ok, const char *rel, const struct stat *st)
{
	if (!rec || !*ok)
		return;
	if (strpbrk(rel, "\t\n\\") || strlen(rel) > 1024) {
		*ok = false;
		return;
	}
	strv_pushf(rec, "%s\t%llu %llu %o %lld %ld %lld %ld", rel, (unsigned long long) st->st_dev,
		   (unsigned long long) st->st_ino, (unsigned) st->st_mode,
		   (long long) st->st_mtim.tv_sec, (long) st->st_mtim.tv_nsec,
		   (long long) st->st_ctim.tv_sec, (long) st->st_ctim.tv_nsec);
}

/* The curated tree behind fd (an O_RDONLY directory fd, taken over) must hold nothing but
 * what every host user may read: regular files o+r, directories o+rx, links (they resolve
 * inside the sandbox, which shows /usr and this /etc only), and no file or directory whose
 * name binds_etc_denied() matches. Bounded: depth 4, *budget entries. Returns NULL, or why
 * with the entry's name in buf. rel names fd's directory below the tree's top ("." for the
 * top); with rec, what the verdict rests on is recorded there (record_stat). */
static const char *
tree_public(int fd, int depth, long *budget, char *buf, size_t bufsz, const char *rel,
	    struct strv *rec, bool *rec_ok)
{
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *de;
	const char *why = NULL;

	if (!d) {
		if (fd >= 0)
			(void) close(fd);
		return "cannot be listed";
	}
	while (!why && (de = readdir(d))) {
		cleanup_free char *sub_rel = NULL;
		struct stat st;
		int sub;

		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		snprintf(buf, bufsz, "%s", de->d_name);
		if (--*budget < 0)
			why = "too many entries to check";
		else if (de->d_type == DT_LNK)
			continue; /* most of alternatives/ and ssl/certs/: no stat needed */
		else if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			why = "an entry cannot be examined";
		else if (S_ISLNK(st.st_mode))
			continue; /* alternatives/keytool, certs/..._Authentication_....pem */
		else if (binds_etc_denied(de->d_name))
			why = "an entry's name marks a secret";
		if (why || S_ISLNK(st.st_mode))
			continue;
		sub_rel = strcmp(rel, ".") == 0 ? xstrdup(de->d_name)
						: xasprintf("%s/%s", rel, de->d_name);
		record_stat(rec, rec_ok, sub_rel, &st);
		if (S_ISREG(st.st_mode))
			why = (st.st_mode & S_IROTH) ? NULL
						     : "a file is not readable by every user";
		else if (!S_ISDIR(st.st_mode))
			why = "not a file, directory or link";
		else if ((st.st_mode & (S_IROTH | S_IXOTH)) != (S_IROTH | S_IXOTH))
			why = "a directory is not open to every user";
		else if (depth >= 4)
			why = "too deep to check";
		else if ((sub = openat(dirfd(d), de->d_name,
				       O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
			why = "a directory cannot be opened";
		else
			why = tree_public(sub, depth + 1, budget, buf, bufsz, sub_rel, rec, rec_ok);
	}
	closedir(d);
	return why;
}

/* ---- the trees cache ------------------------------------------------------------------
 * Walking the curated trees costs each run about half a millisecond (alternatives/ alone has
 * some 500 entries). tree_public's verdict rests only on each directory's entries (their names
 * and types: the directory's mtime) and on the type and mode of each entry that is not a link
 * (its ctime), so a public verdict is kept in RUNS/.cache/etc-trees with the device, inode,
 * mode, mtime and ctime of every one of those (a few dozen); a later run that finds them all
 * unchanged has the same verdict without the walk, and anything changed walks again. The
 * file is the caller's own (RUNS/.cache is 0700), written whole and renamed into place. */
#define TREES_CACHE     "etc-trees"
#define TREES_CACHE_MAX (256 * 1024)

struct trees_cache {
	int dirfd;       /* RUNS/.cache, or -1 */
	char *old;       /* the file as it was read, or NULL */
	struct strv out; /* the sections to keep: "P PATH\n" lines "E\n" */
	bool dirty;      /* a tree was walked and found public: out is new */
};

static void
trees_open(struct trees_cache *tc, int cache_dirfd)
{
	*tc = (struct trees_cache){ .dirfd = cache_dirfd };
	if (cache_dirfd >= 0) {
		/* sized to the file (a few KiB), not to the cap: a 256 KiB buffer is an mmap
		 * and a munmap per run */
		cleanup_fd int fd =
			openat(cache_dirfd, TREES_CACHE, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		char *buf = NULL;
		ssize_t n = fd >= 0 ? read_all_capped(fd, TREES_CACHE_MAX - 3, &buf) : -errno;

		while (n > 0 && buf[n - 1] == '\n')
			n--;
		if (n > 0) {
			buf = xrealloc(buf, (size_t) n + 2);
			buf[n] = '\n'; /* one, whatever the file ended with */
			buf[n + 1] = '\0';
			tc->old = buf;
		} else if (n == 0) {
			free(buf);
		}
	}
}

/* One recorded line against what is there now (fd: the tree's top). */
static bool
trees_line_holds(int fd, const char *line, size_t len)
{
	char rel[1100], fields[200];
	const char *tab = memchr(line, '\t', len);
	unsigned long long dev, ino;
	long long ms, cs;
	long mn, cn;
	unsigned mode;
	struct stat st;

	if (!tab || (size_t) (tab - line) >= sizeof(rel) ||
	    len - (size_t) (tab - line) >= sizeof(fields))
		return false;
	memcpy(rel, line, (size_t) (tab - line));
	rel[tab - line] = '\0';
	memcpy(fields, tab + 1, len - (size_t) (tab - line) - 1);
	fields[len - (size_t) (tab - line) - 1] = '\0';
	if (sscanf(fields, "%llu %llu %o %lld %ld %lld %ld", &dev, &ino, &mode, &ms, &mn, &cs,
		   &cn) != 7)
		return false;
	if (strcmp(rel, ".") == 0 ? fstat(fd, &st) < 0
				  : fstatat(fd, rel, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return false;
	return st.st_dev == dev && st.st_ino == ino && st.st_mode == mode &&
	       st.st_mtim.tv_sec == ms && st.st_mtim.tv_nsec == mn && st.st_ctim.tv_sec == cs &&
	       st.st_ctim.tv_nsec == cn;
}

/* The tree at path (open on fd) was found public before and nothing it rested on changed:
 * its section is kept. */
static bool
trees_cached_public(struct trees_cache *tc, const char *path, int fd)
{
	cleanup_free char *head = xasprintf("P %s\n", path);
	const char *p, *sec, *end;

	if (!tc->old)
		return false;
	for (p = tc->old; (p = strstr(p, head)); p++)
		if (p == tc->old || p[-1] == '\n')
			break;
	if (!p)
		return false;
	sec = p;
	end = strstr(p, "\nE\n");
	if (!end)
		return false;
	for (p += strlen(head); p < end + 1;) {
		const char *nl = memchr(p, '\n', (size_t) (end + 1 - p));

		if (!nl || !trees_line_holds(fd, p, (size_t) (nl - p)))
			return false;
		p = nl + 1;
	}
	{
		cleanup_free char *keep = xstrndup(sec, (size_t) (end + 3 - sec));

		strv_push(&tc->out, keep);
	}
	return true;
}

static void
trees_add(struct trees_cache *tc, const char *path, const struct strv *rec)
{
	cleanup_free char *lines = strv_join(rec, "\n");

	strv_pushf(&tc->out, "P %s\n%s\nE\n", path, lines);
	tc->dirty = true;
}

static void
trees_close(struct trees_cache *tc)
{
	if (tc->dirty && tc->dirfd >= 0) {
		cleanup_free char *text = strv_join(&tc->out, "");
		char tmp[64];
		cleanup_fd int fd = -1;

		snprintf(tmp, sizeof(tmp), TREES_CACHE ".tmp%d", (int) getpid());
		fd = openat(tc->dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			    0600);
		if (fd >= 0) {
			if (write_all(fd, text, strlen(text)) == 0)
				(void) renameat(tc->dirfd, tmp, tc->dirfd, TREES_CACHE);
			else
				(void) unlinkat(tc->dirfd, tmp, 0);
		}
	}
	free(tc->old);
	strv_done(&tc->out);
}

/* One curated entry: opened once (only root's symlinks followed), judged by its fd
 * (world-readable, everything inside public), then cloned from that fd onto a mount point in
 * the generated /etc. Bound here, in agentbox's own mount namespace, rather than by bwrap:
 * bwrap's one recursive --ro-bind of this /etc carries it and makes it read-only, which
 * costs less than a bwrap --ro-bind (mount, mountinfo parse, remount) each. An entry that
 * does not exist is skipped; one that fails a check is skipped and named in *skipped. */
static int
add_host_entry(int efd, int host_etc, const char *path, int src_fd, struct trees_cache *tc,
	       struct strv *skipped, struct ab_err *err)
{
	const char *base = path + strlen("/etc/");
	cleanup_fd int fd = -1, tfd = -1;
	struct ab_err ignored = { 0 };
	const char *slash;
	char what[300], name[256];
	struct stat st;

	if (src_fd >= 0) {
		fd = fcntl(src_fd, F_DUPFD_CLOEXEC, 3);
	} else if (host_etc >= 0) {
		fd = hostfs_open_at(host_etc, base, 0, "/etc", &ignored);
	} else {
		fd = hostfs_open(path, 0, "/etc", &ignored);
	}
	if (fd < 0 || fstat(fd, &st) < 0)
		return 0; /* not on this host */
	if (src_fd < 0) {
		const char *why = NULL;
		long budget = 4096;

		name[0] = '\0';
		if (S_ISREG(st.st_mode))
			why = (st.st_mode & S_IROTH) ? NULL : "not readable by every user";
		else if (!S_ISDIR(st.st_mode))
			why = "not a file or directory";
		else if ((st.st_mode & (S_IROTH | S_IXOTH)) != (S_IROTH | S_IXOTH))
			why = "not open to every user";
		else if (!tc || !trees_cached_public(tc, path, fd)) {
			struct strv rec = { 0 };
			bool rec_ok = true;

			record_stat(&rec, &rec_ok, ".", &st);
			why = tree_public(hostfs_reopen(fd, O_RDONLY | O_DIRECTORY), 0, &budget,
					  name, sizeof(name), ".", tc ? &rec : NULL, &rec_ok);
			if (!why && tc && rec_ok)
				trees_add(tc, path, &rec);
			strv_done(&rec);
		}
		if (why) {
			if (name[0])
				snprintf(what, sizeof(what), "%s (%s)", why, name);
			strv_pushf(skipped, "%s: %s", path, name[0] ? what : why);
			return 0;
		}
	}
	for (slash = strchr(base, '/'); slash; slash = strchr(slash + 1, '/')) {
		/* the parents inside the generated /etc (ssl for ssl/certs) */
		cleanup_free char *parent = xstrndup(base, (size_t) (slash - base));

		if (mkdirat(efd, parent, 0755) < 0 && errno != EEXIST)
			return ab_err_set(err, -errno, "create /etc/%s: %s", parent,
					  strerror(errno));
	}
	if (S_ISREG(st.st_mode) && st.st_size <= ETC_COPY_MAX) {
		/* a small file is copied (the whole /etc is read-only in the sandbox): a bind
		 * costs a mount here and a remount in bwrap; a sendfile of these tens of KiB
		 * costs tens of microseconds */
		int r = copy_small_file(efd, base, fd, &st);

		if (r != -EAGAIN) {
			if (r < 0)
				return ab_err_set(err, r, "copy %s into the sandbox /etc: %s", path,
						  strerror(-r));
			return 0;
		}
	}
	if (S_ISDIR(st.st_mode)) {
		if (mkdirat(efd, base, 0755) < 0)
			return ab_err_set(err, -errno, "create mount point /etc/%s: %s", base,
					  strerror(errno));
	} else {
		int r = write_file_at(efd, base, "", (uid_t) -1, (gid_t) -1);

		if (r < 0)
			return ab_err_set(err, r, "create mount point /etc/%s: %s", base,
					  strerror(-r));
	}
	tfd = open_tree(fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE);
	if (tfd < 0 || move_mount(tfd, "", efd, base, MOVE_MOUNT_F_EMPTY_PATH) < 0)
		return ab_err_set(err, -errno, "bind %s into the sandbox /etc: %s", path,
				  strerror(errno));
	return 0;
}

static int
fill(int efd, uid_t owner, gid_t group, bool net, const struct ab_bind *extra, size_t n_extra,
     struct trees_cache *tc, struct strv *skipped, struct ab_err *err)
{
	/* the host's /etc, opened once for every entry below: about a tenth of a millisecond
	 * less than walking / and etc again for each */
	struct ab_err ignored = { 0 };
	cleanup_fd int host_etc = hostfs_open("/etc", HOSTFS_DIR, "/etc", &ignored);
	int r;

	for (size_t i = 0; i < ARRAY_SIZE(etc_files); i++) {
		r = write_file_at(efd, etc_files[i].name, etc_files[i].text, owner, group);
		if (r < 0)
			return ab_err_set(err, r, "write the sandbox /etc/%s: %s",
					  etc_files[i].name, strerror(-r));
	}
	for (size_t i = 0; i < ARRAY_SIZE(etc_links); i++)
		if (symlinkat(etc_links[i].text, efd, etc_links[i].name) < 0)
			return ab_err_set(err, -errno, "write the sandbox /etc/%s: %s",
					  etc_links[i].name, strerror(errno));
	r = write_warm_hooks(efd, owner, group);
	if (r < 0)
		return ab_err_set(err, r, "write the sandbox " AB_WARM_DIR ": %s", strerror(-r));
	if (!net) {
		r = write_file_at(efd, "resolv.conf", "# no network in the sandbox\n", owner,
				  group);
		if (r < 0)
			return ab_err_set(err, r, "write the sandbox /etc/resolv.conf");
	}
	for (const char *const *h = etcgen_host_entries; *h; h++) {
		r = add_host_entry(efd, host_etc, *h, -1, tc, skipped, err);
		if (r < 0)
			return r;
	}
	for (const char *const *h = net_entries; net && *h; h++) {
		r = add_host_entry(efd, host_etc, *h, -1, NULL, skipped, err);
		if (r < 0)
			return r;
	}
	/* --ro-bind /etc/NAME: checked by binds_add_etc, bound from its fd */
	for (size_t i = 0; i < n_extra; i++) {
		cleanup_free char *path = xasprintf("/etc/%s", extra[i].dest);

		r = add_host_entry(efd, host_etc, path, extra[i].fd, NULL, skipped, err);
		if (r < 0)
			return r;
	}
	return 0;
}

int
etcgen_fill(int efd, uid_t owner, gid_t group, bool net, const struct ab_bind *extra,
	    size_t n_extra, int cache_dirfd, struct strv *skipped, struct ab_err *err)
{
	struct trees_cache tc;
	int r;

	trees_open(&tc, cache_dirfd);
	r = fill(efd, owner, group, net, extra, n_extra, &tc, skipped, err);
	trees_close(&tc);
	return r;
}

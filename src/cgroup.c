/* cgroup.c: per-run cgroups, v2 (delegated subtree) or v1 (root), see cgroup.h.
 *
 * Where run cgroups live:
 *   v2: <root>/<v2_parent>/<run>      v2_parent = $AGENTBOX_CGROUP, or "<own cgroup>/agentbox"
 *   v1: <root>/<ctrl>/agentbox/<run>  for ctrl in memory, pids, cpu, cpuacct
 *
 * Only the root is opened by name; everything below it is reached with *at() calls on
 * directory fds, and a run cgroup is opened O_NOFOLLOW right after this code made it. The
 * module never unlinks a file: only run directories (and nothing else) are removed, with
 * unlinkat(AT_REMOVEDIR), after checking the entry is still the directory we hold open.
 *
 * Killing: a pid read from cgroup.procs may exit and be recycled before we signal it, so a
 * pid is signalled only through a pidfd (which pins one process) and only after
 * /proc/PID/cgroup shows that process in a cgroup named like the run. v2's cgroup.kill
 * (Linux 5.14) avoids the question and is preferred. */
#include "cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>

#include "cfg.h"
#include "util/fdutil.h"
#include "util/macro.h"
#include "util/proc.h"
#include "util/strv.h"
#include "util/xalloc.h"

#define CG_ROOT_DEFAULT    "/sys/fs/cgroup"
#define CG_PARENT          "agentbox"            /* v1 runs parent; v2 own-cgroup runs parent */
#define CG_SUPERVISOR      "agentbox-supervisor" /* v2 leaf this process moves itself into */
#define CG_PROCS_CAP       (4u << 20)            /* cgroup.procs bytes we are willing to read */
#define CG_KILL_ROUNDS     100                   /* read cgroup.procs / SIGKILL rounds */
#define CG_DESTROY_WAIT_MS 2000                  /* how long cg_destroy waits for an empty cgroup */
#define CG_DEFAULT_PERIOD  100000

#define CG_FIX_DELEGATE                                                                \
	"run under `systemd-run --user --scope -p Delegate=yes agentbox ...`, or set " \
	"AGENTBOX_CGROUP to a delegated cgroup that holds no processes"

void (*cg_test_after_mkdir)(int parent_dirfd, const char *name);
void (*cg_test_before_rmdir)(int parent_dirfd, const char *name);

/* Index into ab_cg.dirfd for v1, and bit numbers for wanted v2 controllers. */
enum {
	CG_MEMORY,
	CG_PIDS,
	CG_CPU,
	CG_CPUACCT,
	CG_N,
};

#define CG_MEM_OR_PIDS (1u << CG_MEMORY | 1u << CG_PIDS)

static const char *const cg_names[CG_N] = { "memory", "pids", "cpu", "cpuacct" };

static void why_add(struct ab_cg_host *h, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void note_printf(char *buf, size_t size, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

void
cg_init(struct ab_cg *cg)
{
	memset(cg, 0, sizeof(*cg));
	cg->kind = AB_CG_NONE;
	for (int i = 0; i < CG_N; i++) {
		cg->dirfd[i] = -1;
		cg->procs_fd[i] = -1;
	}
}

/* Appends "; "-separated text to h->why, truncating at its size. */
static void
why_add(struct ab_cg_host *h, const char *fmt, ...)
{
	size_t len = strlen(h->why);
	va_list ap;

	if (len + 3 >= sizeof(h->why))
		return;
	if (len > 0) {
		memcpy(h->why + len, "; ", 3);
		len += 2;
	}
	va_start(ap, fmt);
	vsnprintf(h->why + len, sizeof(h->why) - len, fmt, ap);
	va_end(ap);
}

/* snprintf for messages, where truncation is expected and fine. */
static void
note_printf(char *buf, size_t size, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, size, fmt, ap);
	va_end(ap);
}

static void
sleep_ms(long ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static bool
all_digits(const char *s, size_t len)
{
	if (len == 0)
		return false;
	for (size_t i = 0; i < len; i++)
		if (s[i] < '0' || s[i] > '9')
			return false;
	return true;
}

/* Parses s[0..len) as one unsigned decimal, blanks around it allowed; no sign, no junk.
 * Returns 0 and sets *ret, or -EINVAL / -ERANGE and leaves *ret alone. */
static int
parse_u64(const char *s, size_t len, uint64_t *ret)
{
	char buf[32];
	char *end;
	unsigned long long v;

	while (len > 0 && (*s == ' ' || *s == '\t')) {
		s++;
		len--;
	}
	while (len > 0 && (s[len - 1] == ' ' || s[len - 1] == '\t' || s[len - 1] == '\n'))
		len--;
	if (!all_digits(s, len) || len >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, s, len);
	buf[len] = '\0';
	errno = 0;
	v = strtoull(buf, &end, 10);
	if (errno == ERANGE)
		return -ERANGE;
	if (errno != 0 || end == buf || *end != '\0')
		return -EINVAL;
	*ret = v;
	return 0;
}

/* Looks up "key value" in a flat-keyed file's text (cpu.stat, memory.events, pids.events,
 * memory.oom_control). Returns 0, -ENOENT when the key is absent, or a parse error. */
static int
kv_find(const char *text, const char *key, uint64_t *ret)
{
	size_t klen = strlen(key);

	for (const char *p = text; *p;) {
		const char *nl = strchr(p, '\n');
		size_t llen = nl ? (size_t) (nl - p) : strlen(p);

		if (llen > klen && strncmp(p, key, klen) == 0 && p[klen] == ' ')
			return parse_u64(p + klen + 1, llen - klen - 1, ret);
		p += llen;
		if (*p == '\n')
			p++;
	}
	return -ENOENT;
}

static int
read_u64_at(int dirfd, const char *file, uint64_t *ret)
{
	char buf[64];
	ssize_t n = read_small_file_at(dirfd, file, buf, sizeof(buf));

	if (n < 0)
		return (int) n;
	return parse_u64(buf, (size_t) n, ret);
}

static int
read_kv_at(int dirfd, const char *file, const char *key, uint64_t *ret)
{
	char buf[4096];
	ssize_t n = read_small_file_at(dirfd, file, buf, sizeof(buf));

	if (n < 0)
		return (int) n;
	return kv_find(buf, key, ret);
}

/* Is word one of the blank-separated words of list? */
static bool
word_in(const char *list, const char *word)
{
	size_t wlen = strlen(word);

	for (const char *p = list; *p;) {
		size_t n;

		while (*p == ' ' || *p == '\n' || *p == '\t')
			p++;
		n = strcspn(p, " \n\t");
		if (n == wlen && strncmp(p, word, n) == 0)
			return true;
		p += n;
	}
	return false;
}

static bool
exists_at(int dirfd, const char *path)
{
	return faccessat(dirfd, path, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
}

static bool
writable_at(int dirfd, const char *path)
{
	return faccessat(dirfd, path, W_OK, AT_EACCESS) == 0;
}

static bool
same_inode(int fd_a, int fd_b)
{
	struct stat a, b;

	if (fstat(fd_a, &a) < 0 || fstat(fd_b, &b) < 0)
		return false;
	return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/* mkdirat(0755) + test hook. Returns 0 or -errno (-EEXIST included). */
static int
cg_mkdir(int parent, const char *name)
{
	if (mkdirat(parent, name, 0755) < 0)
		return -errno;
	if (cg_test_after_mkdir)
		cg_test_after_mkdir(parent, name);
	return 0;
}

/* Makes sure parent/name is a directory (creating it if missing). Returns 0 or -errno. */
static int
cg_ensure_dir(int parent, const char *name)
{
	struct stat st;
	int r = cg_mkdir(parent, name);

	if (r != -EEXIST)
		return r;
	if (fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

/* Reads the pids in dirfd's cgroup.procs into *ret (malloc'd, caller frees). Lines that are
 * not a pid > 0 are skipped. Returns the count or -errno. */
static int
read_procs(int dirfd, pid_t **ret)
{
	cleanup_fd int fd = -1;
	cleanup_free char *buf = NULL;
	pid_t *pids;
	size_t lines = 1;
	ssize_t len;
	int n = 0;

	fd = openat(dirfd, "cgroup.procs", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	len = read_all_capped(fd, CG_PROCS_CAP, &buf);
	if (len < 0)
		return (int) len;
	for (ssize_t i = 0; i < len; i++)
		if (buf[i] == '\n')
			lines++;
	pids = xcalloc(lines, sizeof(*pids));
	for (char *p = buf; *p;) {
		size_t l = strcspn(p, "\n");
		uint64_t v;

		if (parse_u64(p, l, &v) == 0 && v > 0 && v <= INT32_MAX)
			pids[n++] = (pid_t) v;
		p += l;
		if (*p == '\n')
			p++;
	}
	*ret = pids;
	return n;
}

/* Does /proc/PID/cgroup put PID in a cgroup whose last path component is name? */
static bool
pid_in_cgroup_named(pid_t pid, const char *name)
{
	char path[64], buf[4096];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int) pid);
	n = read_small_file_at(AT_FDCWD, path, buf, sizeof(buf));
	if (n <= 0)
		return false;
	for (char *line = buf; line;) {
		char *nl = strchr(line, '\n');
		char *p, *base;

		if (nl)
			*nl = '\0';
		/* "hierarchy-id:controllers:/path" */
		p = strchr(line, ':');
		p = p ? strchr(p + 1, ':') : NULL;
		base = p ? strrchr(p + 1, '/') : NULL;
		if (base && strcmp(base + 1, name) == 0)
			return true;
		line = nl ? nl + 1 : NULL;
	}
	return false;
}

/* SIGKILLs pid if it is (still) in a cgroup named name. Returns 0 or -errno. */
static int
kill_verified(pid_t pid, const char *name)
{
	int pidfd, r = 0;

	if (pid <= 0 || pid == getpid())
		return 0;
	pidfd = (int) syscall(SYS_pidfd_open, pid, 0);
	if (pidfd < 0) {
		if (errno == ESRCH)
			return 0;
		if (errno != ENOSYS)
			return -errno;
		/* fallback: pidfd_open() needs Linux 5.3; a small pid-recycling window remains */
		if (pid_in_cgroup_named(pid, name) && kill(pid, SIGKILL) < 0 && errno != ESRCH)
			return -errno;
		return 0;
	}
	if (pid_in_cgroup_named(pid, name) &&
	    syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0) < 0 && errno != ESRCH)
		r = -errno;
	(void) close(pidfd);
	return r;
}

/* Rounds of: read every cgroup.procs, SIGKILL what is listed; until all are empty. */
static int
kill_loop(struct ab_cg *cg)
{
	for (int round = 0; round < CG_KILL_ROUNDS; round++) {
		size_t live = 0;

		for (int i = 0; i < CG_N; i++) {
			cleanup_free pid_t *pids = NULL;
			int n;

			if (cg->dirfd[i] < 0)
				continue;
			n = read_procs(cg->dirfd[i], &pids);
			if (n == -ENOENT)
				continue;
			if (n < 0)
				return n;
			for (int k = 0; k < n; k++) {
				if (pids[k] == getpid())
					continue; /* never ourselves (and never counted as live) */
				(void) kill_verified(pids[k], cg->name);
				live++;
			}
		}
		if (live == 0)
			return 0;
		sleep_ms(1);
	}
	return -EBUSY;
}

int
cg_kill(struct ab_cg *cg)
{
	bool frozen;
	int r;

	if (!cg || cg->name[0] == '\0')
		return 0;
	if (cg->kind == AB_CG_V2 && cg->dirfd[0] >= 0) {
		/* Linux 5.14: the kernel kills every member, including ones forking right now */
		if (write_small_file_at(cg->dirfd[0], "cgroup.kill", "1") == 0)
			return 0;
		/* fallback: freeze (Linux 5.2) so nothing forks or exits while we read pids;
		 * SIGKILL still ends frozen tasks */
		frozen = write_small_file_at(cg->dirfd[0], "cgroup.freeze", "1") == 0;
		r = kill_loop(cg);
		if (frozen)
			(void) write_small_file_at(cg->dirfd[0], "cgroup.freeze", "0");
		return r;
	}
	/* v1: the freezer is a hierarchy of its own, where we made no group; loop instead */
	return kill_loop(cg);
}

int
cg_count_procs(struct ab_cg *cg)
{
	bool have = false;
	int best = -EBADF;

	if (!cg || cg->name[0] == '\0')
		return -EBADF;
	/* v1: every member is in each hierarchy; the largest count wins */
	for (int i = 0; i < CG_N; i++) {
		cleanup_free pid_t *pids = NULL;
		int n;

		if (cg->dirfd[i] < 0)
			continue;
		n = read_procs(cg->dirfd[i], &pids);
		if (n >= 0 && (!have || n > best)) {
			best = n;
			have = true;
		} else if (n < 0 && !have) {
			best = n;
		}
	}
	return best;
}

/* Writes `text` (a pid, "0" = the caller) to every run cgroup's join file (v2 cgroup.procs,
 * v1 tasks). write(2) only. */
static int
cg_write_procs(const struct ab_cg *cg, const char *text, size_t len)
{
	if (!cg || cg->name[0] == '\0')
		return -EBADF;
	for (int i = 0; i < CG_N; i++) {
		ssize_t w;

		if (cg->procs_fd[i] < 0)
			continue;
		do
			w = write(cg->procs_fd[i], text, len);
		while (w < 0 && errno == EINTR);
		if (w < 0)
			return -errno;
		if ((size_t) w != len)
			return -EIO;
	}
	return 0;
}

int
cg_attach_self(const struct ab_cg *cg)
{
	/* Async-signal-safe: write(2) only. */
	return cg_write_procs(cg, "0", 1);
}

int
cg_attach_pid(const struct ab_cg *cg, pid_t pid)
{
	char buf[24];
	int n = snprintf(buf, sizeof(buf), "%d", (int) pid);

	if (pid <= 0)
		return -EINVAL;
	return cg_write_procs(cg, buf, (size_t) n);
}

int
cg_read_usage(struct ab_cg *cg, struct ab_cg_usage *ret)
{
	struct ab_cg_usage u = { 0 };
	bool any = false;
	uint64_t ns;
	char buf[4096];
	int d;

	memset(ret, 0, sizeof(*ret));
	if (!cg || cg->name[0] == '\0')
		return -EBADF;
	if (cg->kind == AB_CG_V2) {
		d = cg->dirfd[0];
		if (d < 0)
			return -EBADF;
		any |= read_u64_at(d, "memory.peak", &u.memory_peak_bytes) == 0;
		if (read_small_file_at(d, "memory.events", buf, sizeof(buf)) >= 0) {
			any |= kv_find(buf, "oom_kill", &u.oom_kills) == 0;
			any |= kv_find(buf, "max", &u.memory_max_events) == 0;
		}
		any |= read_kv_at(d, "pids.events", "max", &u.pids_max_events) == 0;
		any |= read_u64_at(d, "pids.peak", &u.pids_peak) == 0;
		if (read_small_file_at(d, "cpu.stat", buf, sizeof(buf)) >= 0) {
			any |= kv_find(buf, "usage_usec", &u.cpu_usec) == 0;
			any |= kv_find(buf, "throttled_usec", &u.cpu_throttled_usec) == 0;
		}
	} else {
		d = cg->dirfd[CG_MEMORY];
		if (d >= 0) {
			any |= read_u64_at(d, "memory.max_usage_in_bytes", &u.memory_peak_bytes) ==
			       0;
			any |= read_kv_at(d, "memory.oom_control", "oom_kill", &u.oom_kills) == 0;
			/* With memsw == limit the memsw counter is charged first and fails
			 * first, so its failcnt holds the hits: take the larger one. */
			any |= read_u64_at(d, "memory.failcnt", &u.memory_max_events) == 0;
			if (read_u64_at(d, "memory.memsw.failcnt", &ns) == 0 &&
			    ns > u.memory_max_events) {
				u.memory_max_events = ns;
				any = true;
			}
		}
		d = cg->dirfd[CG_PIDS];
		if (d >= 0) {
			any |= read_kv_at(d, "pids.events", "max", &u.pids_max_events) == 0;
			any |= read_u64_at(d, "pids.peak", &u.pids_peak) == 0;
		}
		d = cg->dirfd[CG_CPUACCT];
		if (d >= 0 && read_u64_at(d, "cpuacct.usage", &ns) == 0) {
			u.cpu_usec = ns / 1000;
			any = true;
		}
		d = cg->dirfd[CG_CPU];
		if (d >= 0 && read_kv_at(d, "cpu.stat", "throttled_time", &ns) == 0) {
			u.cpu_throttled_usec = ns / 1000;
			any = true;
		}
	}
	u.valid = any;
	*ret = u;
	return 0;
}

/* Removes the run directory dirfd refers to (named name in its parent), retrying on EBUSY
 * until deadline_ms. Returns 0 (also when it is already gone) or -errno. */
static int
rmdir_run(int dirfd, const char *name, int64_t deadline_ms)
{
	cleanup_fd int parent = -1;
	struct stat want, got;

	if (fstat(dirfd, &want) < 0)
		return -errno;
	parent = openat(dirfd, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (parent < 0)
		return errno == ENOENT ? 0 : -errno;
	for (;;) {
		if (fstatat(parent, name, &got, AT_SYMLINK_NOFOLLOW) < 0)
			return errno == ENOENT ? 0 : -errno;
		if (got.st_dev != want.st_dev || got.st_ino != want.st_ino)
			return -ESTALE; /* not the directory we made: leave it */
		if (cg_test_before_rmdir)
			cg_test_before_rmdir(parent, name);
		if (unlinkat(parent, name, AT_REMOVEDIR) == 0 || errno == ENOENT)
			return 0;
		if (errno != EBUSY || now_ms() >= deadline_ms)
			return -errno;
		sleep_ms(5);
	}
}

int
cg_destroy(struct ab_cg *cg)
{
	int64_t deadline, next_kill;
	int ret = 0;

	if (!cg)
		return 0;
	if (cg->name[0] == '\0') {
		cg_init(cg); /* owns nothing, whatever its fds read (a zeroed struct: 0) */
		return 0;
	}
	deadline = now_ms() + CG_DESTROY_WAIT_MS;
	next_kill = 0;
	for (;;) {
		int n;

		if (now_ms() >= next_kill) {
			(void) cg_kill(cg);
			next_kill = now_ms() + 100;
		}
		n = cg_count_procs(cg);
		if (n <= 0)
			break;
		if (now_ms() >= deadline) {
			ret = -EBUSY;
			break;
		}
		sleep_ms(5);
	}
	for (int i = 0; i < CG_N; i++) {
		bool dup = false;
		int r;

		if (cg->dirfd[i] < 0)
			continue;
		for (int j = 0; j < i; j++)
			if (cg->dirfd[j] >= 0 && same_inode(cg->dirfd[i], cg->dirfd[j]))
				dup = true; /* co-mounted cpu,cpuacct: one directory */
		if (dup)
			continue;
		r = rmdir_run(cg->dirfd[i], cg->name, deadline);
		if (r < 0 && ret == 0)
			ret = r;
	}
	for (int i = 0; i < CG_N; i++) {
		if (cg->dirfd[i] >= 0)
			(void) close(cg->dirfd[i]);
		if (cg->procs_fd[i] >= 0)
			(void) close(cg->procs_fd[i]);
	}
	cg_init(cg);
	return ret;
}

static bool
valid_run_name(const char *name, size_t size)
{
	size_t len = strlen(name);

	if (len == 0 || len >= size || name[0] == '.')
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = name[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '-' || c == '_' || c == '.'))
			return false;
	}
	return true;
}

static bool
host_has(const struct ab_cg_host *h, int i)
{
	switch (i) {
	case CG_MEMORY:
		return h->memory;
	case CG_PIDS:
		return h->pids;
	case CG_CPU:
		return h->cpu;
	case CG_CPUACCT:
		return h->cpuacct;
	default:
		return false;
	}
}

/* Writes val to dirfd/file; the error names the file and the cgroup. */
static int
cg_write(int dirfd, const char *file, const char *val, const char *where, struct ab_err *err)
{
	int r = write_small_file_at(dirfd, file, val);

	if (r < 0)
		return ab_err_set(err, r, "write '%s' to %s/%s: %s", val, where, file,
				  strerror(-r));
	return 0;
}

/* Like cg_write, but a missing file is fine (optional knobs). */
static int
cg_write_opt(int dirfd, const char *file, const char *val, const char *where, struct ab_err *err)
{
	if (!exists_at(dirfd, file))
		return 0;
	return cg_write(dirfd, file, val, where, err);
}

/* mkdirat parent/name, then opens it and its `procs` file for joining. On success *ret_dirfd
 * and *ret_procs are set (the caller's cleanup removes the directory from then on). */
static int
make_run_dir(int parent, const char *name, const char *procs, const char *where, int *ret_dirfd,
	     int *ret_procs, struct ab_err *err)
{
	int r, fd;

	r = cg_mkdir(parent, name);
	if (r == -EEXIST)
		return ab_err_set(err, r, "run cgroup %s already exists", where);
	if (r < 0)
		return ab_err_set(err, r, "create run cgroup %s: %s", where, strerror(-r));
	fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		r = -errno;
		if (cg_test_before_rmdir)
			cg_test_before_rmdir(parent, name);
		(void) unlinkat(parent, name, AT_REMOVEDIR);
		return ab_err_set(err, r, "open run cgroup %s: %s", where, strerror(-r));
	}
	*ret_dirfd = fd;
	*ret_procs = openat(fd, procs, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
	if (*ret_procs < 0) {
		r = -errno;
		return ab_err_set(err, r, "open %s/%s: %s", where, procs, strerror(-r));
	}
	return 0;
}

static int
create_v2(const struct ab_cg_host *h, int rootfd, const struct ab_cg_limits *l, uint64_t period,
	  struct ab_cg *cg, struct ab_err *err)
{
	cleanup_fd int parent = -1;
	char where[1400], val[64];
	int r, d;

	snprintf(where, sizeof(where), "%s/%s/%s", h->root, h->v2_parent, cg->name);
	parent = openat(rootfd, h->v2_parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (parent < 0)
		return ab_err_set(err, -errno, "open cgroup %s/%s: %s", h->root, h->v2_parent,
				  strerror(errno));
	r = make_run_dir(parent, cg->name, "cgroup.procs", where, &cg->dirfd[0], &cg->procs_fd[0],
			 err);
	if (r < 0)
		return r;
	d = cg->dirfd[0];
	if (l->memory_bytes) {
		snprintf(val, sizeof(val), "%" PRIu64, l->memory_bytes);
		if ((r = cg_write(d, "memory.max", val, where, err)) < 0)
			return r;
		/* no swap: a memory limit that can spill into swap is no limit (T17) */
		if ((r = cg_write_opt(d, "memory.swap.max", "0", where, err)) < 0)
			return r;
	}
	/* an OOM kill (ours or an ancestor's) takes the whole run, not one random process */
	if (h->memory && (r = cg_write_opt(d, "memory.oom.group", "1", where, err)) < 0)
		return r;
	if (l->pids) {
		snprintf(val, sizeof(val), "%" PRIu64, l->pids);
		if ((r = cg_write(d, "pids.max", val, where, err)) < 0)
			return r;
	}
	if (l->cpu_quota_us) {
		snprintf(val, sizeof(val), "%" PRIu64 " %" PRIu64, l->cpu_quota_us, period);
		if ((r = cg_write(d, "cpu.max", val, where, err)) < 0)
			return r;
	}
	return 0;
}

static int
create_v1(const struct ab_cg_host *h, int rootfd, const struct ab_cg_limits *l, uint64_t period,
	  struct ab_cg *cg, struct ab_err *err)
{
	char where[CG_N][600], val[64];
	int r, d;

	for (int i = 0; i < CG_N; i++) {
		cleanup_fd int parent = -1;
		char rel[64];
		struct stat st;

		snprintf(where[i], sizeof(where[i]), "%s/%s/" CG_PARENT "/%s", h->root, cg_names[i],
			 cg->name);
		if (!host_has(h, i))
			continue;
		snprintf(rel, sizeof(rel), "%s/" CG_PARENT, cg_names[i]);
		parent = openat(rootfd, rel, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (parent < 0)
			return ab_err_set(err, -errno, "open cgroup %s/%s: %s", h->root, rel,
					  strerror(errno));
		/* "cpu,cpuacct" co-mounted: cpu's run directory is already cpuacct's */
		if (i == CG_CPUACCT && cg->dirfd[CG_CPU] >= 0 &&
		    fstatat(parent, cg->name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
			struct stat cpu;

			if (fstat(cg->dirfd[CG_CPU], &cpu) == 0 && cpu.st_dev == st.st_dev &&
			    cpu.st_ino == st.st_ino) {
				cg->dirfd[i] = fcntl(cg->dirfd[CG_CPU], F_DUPFD_CLOEXEC, 3);
				if (cg->dirfd[i] < 0)
					return ab_err_set(err, -errno, "dup: %s", strerror(errno));
				continue;
			}
		}
		/* v1 joins through `tasks`: writing "0" there moves only the calling thread,
		 * which the kernel does without write-locking the global threadgroup rwsem,
		 * i.e. without waiting for an RCU grace period (cgroup.procs: ~8 ms here). The
		 * joiner is a freshly forked, single-threaded child, so thread = process. */
		r = make_run_dir(parent, cg->name, "tasks", where[i], &cg->dirfd[i],
				 &cg->procs_fd[i], err);
		if (r < 0)
			return r;
	}
	if ((d = cg->dirfd[CG_MEMORY]) >= 0 && l->memory_bytes) {
		const char *w = where[CG_MEMORY];

		snprintf(val, sizeof(val), "%" PRIu64, l->memory_bytes);
		/* limit_in_bytes first: memsw must never be below it */
		if ((r = cg_write(d, "memory.limit_in_bytes", val, w, err)) < 0)
			return r;
		/* memory + swap = memory: no swap (T17) */
		if ((r = cg_write_opt(d, "memory.memsw.limit_in_bytes", val, w, err)) < 0)
			return r;
		/* best effort, and the OOM killer stays on (memory.oom_control untouched) */
		(void) write_small_file_at(d, "memory.swappiness", "0");
	}
	if ((d = cg->dirfd[CG_PIDS]) >= 0 && l->pids) {
		snprintf(val, sizeof(val), "%" PRIu64, l->pids);
		if ((r = cg_write(d, "pids.max", val, where[CG_PIDS], err)) < 0)
			return r;
	}
	if ((d = cg->dirfd[CG_CPU]) >= 0 && l->cpu_quota_us) {
		snprintf(val, sizeof(val), "%" PRIu64, period);
		if ((r = cg_write(d, "cpu.cfs_period_us", val, where[CG_CPU], err)) < 0)
			return r;
		snprintf(val, sizeof(val), "%" PRIu64, l->cpu_quota_us);
		if ((r = cg_write(d, "cpu.cfs_quota_us", val, where[CG_CPU], err)) < 0)
			return r;
	}
	return 0;
}

int
cg_create(const struct ab_cg_host *h, const char *name, const struct ab_cg_limits *l,
	  struct ab_cg *ret, struct ab_err *err)
{
	static const struct ab_cg_limits none = { 0 };
	cleanup_fd int rootfd = -1;
	struct ab_cg cg;
	uint64_t period;
	int r;

	cg_init(ret);
	if (!l)
		l = &none;
	if (!h || (h->kind != AB_CG_V1 && h->kind != AB_CG_V2))
		return ab_err_set(err, -EOPNOTSUPP, "no usable cgroups: %s",
				  h && h->why[0] ? h->why : "not probed");
	if (!name || !valid_run_name(name, sizeof(cg.name)))
		return ab_err_set(err, -EINVAL, "invalid run cgroup name '%s'", name ? name : "");
	if (l->memory_bytes && !h->memory)
		return ab_err_set(err, -EOPNOTSUPP,
				  "memory limit requested, but no memory controller is usable: %s",
				  h->why);
	if (l->pids && !h->pids)
		return ab_err_set(err, -EOPNOTSUPP,
				  "pids limit requested, but no pids controller is usable: %s",
				  h->why);
	if (l->cpu_quota_us && !h->cpu)
		return ab_err_set(err, -EOPNOTSUPP,
				  "CPU limit requested, but no cpu controller is usable: %s",
				  h->why);
	period = l->cpu_period_us ? l->cpu_period_us : CG_DEFAULT_PERIOD;
	if (l->cpu_quota_us && (period < 1000 || period > 1000000 || l->cpu_quota_us < 1000))
		return ab_err_set(
			err, -EINVAL,
			"CPU limit %" PRIu64 "/%" PRIu64
			" us: the period must be 1000..1000000 us and the quota >= 1000 us",
			l->cpu_quota_us, period);

	rootfd = open(h->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0)
		return ab_err_set(err, -errno, "open %s: %s", h->root, strerror(errno));

	cg_init(&cg);
	cg.kind = h->kind;
	memcpy(cg.name, name, strlen(name) + 1);
	if (h->kind == AB_CG_V2)
		r = create_v2(h, rootfd, l, period, &cg, err);
	else
		r = create_v1(h, rootfd, l, period, &cg, err);
	if (r < 0) {
		(void) cg_destroy(&cg);
		return r;
	}
	*ret = cg;
	return 0;
}

/* ---- probe ---- */

/* Turns an AGENTBOX_CGROUP value or a /proc/self/cgroup path into a path relative to root:
 * no leading or trailing '/', "." for the root cgroup. An absolute path under root loses the
 * root; any other leading '/' is read as a cgroup path ("/user.slice/x"). "." and ".."
 * components are refused. Returns 0 or -EINVAL / -ENAMETOOLONG. */
static int
rel_cgroup_path(const char *root, const char *in, char *out, size_t size)
{
	size_t rlen = strlen(root), len = 0;
	const char *p = in;

	if (strncmp(in, root, rlen) == 0 && (in[rlen] == '/' || in[rlen] == '\0'))
		p = in + rlen;
	out[0] = '\0';
	while (*p) {
		size_t n;

		while (*p == '/')
			p++;
		n = strcspn(p, "/");
		if (n == 0)
			break;
		if ((n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
			return -EINVAL;
		if (len + n + 2 > size)
			return -ENAMETOOLONG;
		if (len > 0)
			out[len++] = '/';
		memcpy(out + len, p, n);
		len += n;
		out[len] = '\0';
		p += n;
	}
	if (len == 0) {
		if (size < 2)
			return -ENAMETOOLONG;
		memcpy(out, ".", 2);
	}
	return 0;
}

/* The process's own cgroup v2 path ("0::/path" in /proc/self/cgroup), relative to root. */
static int
own_v2_cgroup(const char *root, const char *proc_self_cgroup, char *out, size_t size)
{
	cleanup_fd int fd = -1;
	cleanup_free char *buf = NULL;
	ssize_t n;

	fd = open(proc_self_cgroup, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read_all_capped(fd, 65536, &buf);
	if (n < 0)
		return (int) n;
	for (char *line = buf; line && *line;) {
		char *nl = strchr(line, '\n');

		if (nl)
			*nl = '\0';
		if (strncmp(line, "0::", 3) == 0) {
			size_t l = strlen(line);
			const char *del = " (deleted)";

			if (l > strlen(del) && strcmp(line + l - strlen(del), del) == 0)
				return -ENOENT;
			if (line[3] != '/')
				return -EINVAL;
			return rel_cgroup_path(root, line + 3, out, size);
		}
		line = nl ? nl + 1 : NULL;
	}
	return -ENOENT;
}

static bool
host_has_swap(void)
{
	char buf[4096];
	ssize_t n = read_small_file_at(AT_FDCWD, "/proc/swaps", buf, sizeof(buf));

	if (n < 0)
		return true;              /* unknown: assume the worst */
	return strchr(buf, '\n') != NULL; /* anything after the header line */
}

static void
note_swap(struct ab_cg_host *h, const char *file)
{
	if (host_has_swap())
		why_add(h,
			"swap accounting is off (no %s): a run may swap beyond its memory limit; "
			"boot with swapaccount=1",
			file);
	else
		why_add(h, "no swap accounting (no %s), which is fine: this host has no swap",
			file);
}

/* Bit mask (1 << CG_MEMORY | ...) of the v2 controllers we want that cgroup.controllers of
 * dfd offers; the text is copied to list for messages. */
static unsigned
v2_offered(int dfd, char *list, size_t size)
{
	static const int want[] = { CG_MEMORY, CG_PIDS, CG_CPU };
	unsigned mask = 0;

	if (read_small_file_at(dfd, "cgroup.controllers", list, size) < 0)
		list[0] = '\0';
	for (size_t i = 0; i < ARRAY_SIZE(want); i++)
		if (word_in(list, cg_names[want[i]]))
			mask |= 1u << want[i];
	return mask;
}

/* Enables each controller in mask in dfd's cgroup.subtree_control, one write each, so that
 * one refusal (say cpu, with realtime tasks around) does not cost the others. Returns the
 * mask of controllers now enabled; *ret_err gets the first -errno (0 when none failed). */
static unsigned
v2_enable(int dfd, unsigned mask, int *ret_err)
{
	char cur[512], val[32];
	unsigned ok = 0;

	*ret_err = 0;
	if (read_small_file_at(dfd, "cgroup.subtree_control", cur, sizeof(cur)) < 0)
		cur[0] = '\0';
	for (int i = 0; i < CG_N; i++) {
		int r = 0;

		if (!(mask & (1u << i)))
			continue;
		if (!word_in(cur, cg_names[i])) {
			snprintf(val, sizeof(val), "+%s", cg_names[i]);
			r = write_small_file_at(dfd, "cgroup.subtree_control", val);
		}
		if (r == 0)
			ok |= 1u << i;
		else if (*ret_err == 0)
			*ret_err = r;
	}
	return ok;
}

/* Is this process the only one in dfd's cgroup.procs? */
static bool
v2_only_self(int dfd)
{
	cleanup_free pid_t *pids = NULL;
	int n = read_procs(dfd, &pids);

	if (n <= 0)
		return false;
	for (int i = 0; i < n; i++)
		if (pids[i] != getpid())
			return false;
	return true;
}

/* Moves this process into the leaf dfd/agentbox-supervisor. Returns 0 or -errno. */
static int
v2_move_self(int dfd)
{
	cleanup_fd int leaf = -1;
	int r = cg_ensure_dir(dfd, CG_SUPERVISOR);

	if (r < 0)
		return r;
	leaf = openat(dfd, CG_SUPERVISOR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (leaf < 0)
		return -errno;
	return write_small_file_at(leaf, "cgroup.procs", "0");
}

/* Names the first of dfd, its cgroup.procs, its cgroup.subtree_control that we cannot write,
 * or returns NULL when all are writable. */
static const char *
v2_unwritable(int dfd)
{
	if (!writable_at(dfd, "."))
		return "the directory";
	if (!writable_at(dfd, "cgroup.procs"))
		return "cgroup.procs";
	if (!writable_at(dfd, "cgroup.subtree_control"))
		return "cgroup.subtree_control";
	return NULL;
}

/* Fills the flags of a v2 host whose runs go under pfd (relative path rel). */
static void
v2_fill(struct ab_cg_host *h, int pfd, const char *rel, unsigned mask, const char *offered)
{
	h->kind = AB_CG_V2;
	snprintf(h->v2_parent, sizeof(h->v2_parent), "%s", rel);
	h->memory = mask & (1u << CG_MEMORY);
	h->pids = mask & (1u << CG_PIDS);
	h->cpu = mask & (1u << CG_CPU);
	h->cpuacct = true; /* cpu.stat usage_usec is core in v2, with or without cpu */
	h->swap = h->memory && exists_at(pfd, "memory.swap.max");
	h->kill_file = exists_at(pfd, "cgroup.kill");
	if (!h->memory)
		why_add(h,
			"no usable memory controller under '/%s' (cgroup.controllers: '%s'): no "
			"memory limit",
			rel, offered);
	if (!h->pids)
		why_add(h,
			"no usable pids controller under '/%s' (cgroup.controllers: '%s'): no "
			"process limit",
			rel, offered);
	if (!h->cpu)
		why_add(h,
			"no usable cpu controller under '/%s' (cgroup.controllers: '%s'): no CPU "
			"limit",
			rel, offered);
	if (h->memory && !h->swap)
		note_swap(h, "memory.swap.max");
}

/* The longest common ancestor of two relative cgroup paths, by whole components ("." when
 * they share none). */
static void
common_ancestor(const char *a, const char *b, char *out, size_t size)
{
	size_t i = 0, last = 0;

	for (; a[i] && a[i] == b[i]; i++)
		if (a[i] == '/')
			last = i;
	if ((a[i] == '\0' || a[i] == '/') && (b[i] == '\0' || b[i] == '/'))
		last = i;
	if (strcmp(a, ".") == 0 || strcmp(b, ".") == 0 || last == 0 || last >= size)
		last = 0;
	if (last == 0) {
		snprintf(out, size, ".");
		return;
	}
	memcpy(out, a, last);
	out[last] = '\0';
}

/* AGENTBOX_CGROUP=env: runs go directly under it. */
static void
probe_v2_env(struct ab_cg_host *h, int rootfd, const char *env, const char *proc_self_cgroup)
{
	cleanup_fd int dfd = -1;
	char rel[1024], own[1024], anc[1024], offered[256];
	const char *bad;
	unsigned mask;
	int r;

	if (rel_cgroup_path(h->root, env, rel, sizeof(rel)) < 0) {
		why_add(h, "AGENTBOX_CGROUP='%s' is not a cgroup path under %s", env, h->root);
		return;
	}
	dfd = openat(rootfd, rel, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		why_add(h, "AGENTBOX_CGROUP: cannot open %s/%s: %s", h->root, rel, strerror(errno));
		return;
	}
	if ((bad = v2_unwritable(dfd))) {
		why_add(h, "AGENTBOX_CGROUP '/%s' is not delegated to uid %u (%s is not writable)",
			rel, (unsigned) geteuid(), bad);
		return;
	}
	mask = v2_offered(dfd, offered, sizeof(offered));
	if (!(mask & CG_MEM_OR_PIDS)) {
		why_add(h,
			"AGENTBOX_CGROUP '/%s' offers neither the memory nor the pids controller "
			"(cgroup.controllers: '%s'); delegate them to it",
			rel, offered);
		return;
	}
	mask = v2_enable(dfd, mask, &r);
	if (!(mask & CG_MEM_OR_PIDS)) {
		why_add(h,
			"AGENTBOX_CGROUP '/%s': cannot enable controllers in its "
			"cgroup.subtree_control (%s); it must hold no processes of its own",
			rel, strerror(-r));
		return;
	}
	/* Moving a process needs write access to cgroup.procs of the common ancestor of the
	 * source cgroup (ours, where the run's child starts) and the destination. */
	if (own_v2_cgroup(h->root, proc_self_cgroup, own, sizeof(own)) == 0) {
		common_ancestor(own, rel, anc, sizeof(anc));
		strncat(anc, "/cgroup.procs", sizeof(anc) - strlen(anc) - 1);
		if (!writable_at(rootfd, anc)) {
			why_add(h,
				"processes cannot move from '/%s' to AGENTBOX_CGROUP '/%s': "
				"%s is not writable; start agentbox inside the delegated subtree",
				own, rel, anc);
			return;
		}
	}
	v2_fill(h, dfd, rel, mask, offered);
}

/* The process's own cgroup: runs go under "<own>/agentbox". */
static void
probe_v2_own(struct ab_cg_host *h, int rootfd, const char *proc_self_cgroup)
{
	cleanup_fd int dfd = -1, pfd = -1;
	char rel[1024], parent[1024], offered[256];
	const char *bad;
	unsigned mask, enabled;
	int r;

	r = own_v2_cgroup(h->root, proc_self_cgroup, rel, sizeof(rel));
	if (r < 0) {
		why_add(h, "cannot find this process's cgroup in %s: %s", proc_self_cgroup,
			strerror(-r));
		return;
	}
	dfd = openat(rootfd, rel, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		why_add(h, "cannot open own cgroup %s/%s: %s", h->root, rel, strerror(errno));
		return;
	}
	if ((bad = v2_unwritable(dfd))) {
		why_add(h, "own cgroup '/%s' is not delegated to uid %u (%s is not writable); %s",
			rel, (unsigned) geteuid(), bad, CG_FIX_DELEGATE);
		return;
	}
	mask = v2_offered(dfd, offered, sizeof(offered));
	if (!(mask & CG_MEM_OR_PIDS)) {
		why_add(h,
			"own cgroup '/%s' offers neither the memory nor the pids controller "
			"(cgroup.controllers: '%s'); %s",
			rel, offered, CG_FIX_DELEGATE);
		return;
	}
	enabled = v2_enable(dfd, mask, &r);
	/* No internal processes: a cgroup holding processes cannot hand controllers to its
	 * children. When the only process is us, step aside into a leaf and retry. */
	if (!(enabled & CG_MEM_OR_PIDS) && v2_only_self(dfd) && v2_move_self(dfd) == 0)
		enabled = v2_enable(dfd, mask, &r);
	if (!(enabled & CG_MEM_OR_PIDS)) {
		why_add(h,
			"own cgroup '/%s' holds processes, so controllers cannot be enabled in its "
			"cgroup.subtree_control (%s); %s",
			rel, strerror(-r), CG_FIX_DELEGATE);
		return;
	}
	r = cg_ensure_dir(dfd, CG_PARENT);
	if (r >= 0) {
		pfd = openat(dfd, CG_PARENT, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (pfd < 0)
			r = -errno;
		else
			enabled = v2_enable(pfd, enabled, &r);
	}
	if (pfd < 0 || !(enabled & CG_MEM_OR_PIDS)) {
		why_add(h, "cannot prepare '/%s/" CG_PARENT "' for runs: %s", rel, strerror(-r));
		return;
	}
	mask = enabled;
	if (strcmp(rel, ".") == 0) {
		snprintf(parent, sizeof(parent), CG_PARENT);
	} else if ((size_t) snprintf(parent, sizeof(parent), "%s/" CG_PARENT, rel) >=
		   sizeof(parent)) {
		why_add(h, "own cgroup path '/%s' is too long", rel);
		return;
	}
	v2_fill(h, pfd, parent, mask, offered);
}

/* Returns 1 when root is no cgroup v2 hierarchy with controllers (try v1), 0 when decided
 * (h->kind is V2, or NONE with why set), or -errno. v2note gets why v2 was passed over. */
static int
probe_v2(struct ab_cg_host *h, int rootfd, bool real, const char *proc_self_cgroup, char *v2note,
	 size_t size)
{
	char ctrls[512];
	const char *env;
	ssize_t n;

	if (real) {
		struct statfs sf;

		if (fstatfs(rootfd, &sf) < 0)
			return -errno;
		if (sf.f_type != CGROUP2_SUPER_MAGIC) {
			/* hybrid: a cgroup2 mount at unified, usually without controllers */
			n = read_small_file_at(rootfd, "unified/cgroup.controllers", ctrls,
					       sizeof(ctrls));
			if (n >= 0 && !word_in(ctrls, "memory") && !word_in(ctrls, "pids"))
				note_printf(
					v2note, size,
					"the cgroup2 mount at %s/unified has no memory or pids "
					"controller (cgroup.controllers: '%s'; they are bound to "
					"cgroup v1)",
					h->root, ctrls);
			else if (n >= 0)
				note_printf(
					v2note, size,
					"the cgroup2 mount at %s/unified has controllers '%s', but "
					"agentbox uses cgroup v2 only when it is mounted at %s",
					h->root, ctrls, h->root);
			return 1;
		}
	}
	n = read_small_file_at(rootfd, "cgroup.controllers", ctrls, sizeof(ctrls));
	if (n == -ENOENT)
		return 1;
	if (n < 0)
		return (int) n;
	if (!word_in(ctrls, "memory") && !word_in(ctrls, "pids")) {
		note_printf(v2note, size,
			    "the cgroup2 hierarchy at %s has no memory or pids controller "
			    "(cgroup.controllers: '%s'; they are bound to cgroup v1)",
			    h->root, ctrls);
		return 1;
	}
	env = cfg()->cgroup;
	if (env && *env)
		probe_v2_env(h, rootfd, env, proc_self_cgroup);
	else
		probe_v2_own(h, rootfd, proc_self_cgroup);
	return 0;
}

static void
probe_v1(struct ab_cg_host *h, int rootfd, bool real)
{
	const char *missing[CG_N] = { NULL };
	bool usable[CG_N] = { false }, any_dir = false, any_usable = false;
	bool swap = false;

	for (int i = 0; i < CG_N; i++) {
		cleanup_fd int hfd = -1;
		int r;

		hfd = openat(rootfd, cg_names[i], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (hfd < 0) {
			missing[i] = "not mounted";
			continue;
		}
		if (real) {
			struct statfs sf;

			if (fstatfs(hfd, &sf) < 0 || sf.f_type != CGROUP_SUPER_MAGIC) {
				missing[i] = "not a cgroup v1 hierarchy";
				continue;
			}
		} else if (!exists_at(hfd, "cgroup.procs")) {
			missing[i] = "not a cgroup v1 hierarchy";
			continue;
		}
		any_dir = true;
		if (!writable_at(hfd, ".") && !writable_at(hfd, CG_PARENT)) {
			missing[i] = "not writable";
			continue;
		}
		r = cg_ensure_dir(hfd, CG_PARENT);
		if (r < 0 || !writable_at(hfd, CG_PARENT)) {
			missing[i] = "cannot create or write " CG_PARENT "/";
			continue;
		}
		if (i == CG_MEMORY)
			swap = exists_at(hfd, "memory.memsw.limit_in_bytes");
		usable[i] = true;
		any_usable = true;
	}
	if (!any_dir) {
		why_add(h, "no cgroup v1 memory, pids, cpu or cpuacct hierarchy under %s", h->root);
		return;
	}
	if (!any_usable) {
		if (geteuid() != 0)
			why_add(h,
				"cgroup v1 hierarchies are writable only by root; run as root or "
				"on a cgroup v2 host with delegation");
		else
			why_add(h, "the cgroup v1 hierarchies under %s are not writable", h->root);
		return;
	}
	if (!usable[CG_MEMORY] && !usable[CG_PIDS]) {
		why_add(h,
			"cgroup v1: neither the memory (%s) nor the pids (%s) hierarchy is usable",
			missing[CG_MEMORY], missing[CG_PIDS]);
		return;
	}
	h->kind = AB_CG_V1;
	h->memory = usable[CG_MEMORY];
	h->pids = usable[CG_PIDS];
	h->cpu = usable[CG_CPU];
	h->cpuacct = usable[CG_CPUACCT];
	h->swap = swap;
	h->kill_file = false;
	for (int i = 0; i < CG_N; i++)
		if (!usable[i])
			why_add(h, "cgroup v1 %s: %s (%s)", cg_names[i], missing[i],
				i == CG_MEMORY ? "no memory limit"
				: i == CG_PIDS ? "no process limit"
				: i == CG_CPU  ? "no CPU limit"
					       : "no CPU usage");
	if (h->memory && !h->swap)
		note_swap(h, "memory.memsw.limit_in_bytes");
}

int
cg_probe(const char *root, const char *proc_self_cgroup, struct ab_cg_host *ret)
{
	struct ab_cg_host h;
	cleanup_fd int rootfd = -1;
	char v2note[384] = "";
	bool real;
	int r;

	memset(&h, 0, sizeof(h));
	h.kind = AB_CG_NONE;
	if (!root)
		root = CG_ROOT_DEFAULT;
	if (!proc_self_cgroup)
		proc_self_cgroup = "/proc/self/cgroup";
	real = strcmp(root, CG_ROOT_DEFAULT) == 0;
	if (strlen(root) >= sizeof(h.root) || root[0] != '/')
		return -EINVAL;
	memcpy(h.root, root, strlen(root) + 1);

	rootfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0) {
		if (errno != ENOENT && errno != ENOTDIR)
			return -errno;
		why_add(&h, "no cgroup filesystem at %s", root);
		*ret = h;
		return 0;
	}
	r = probe_v2(&h, rootfd, real, proc_self_cgroup, v2note, sizeof(v2note));
	if (r < 0)
		return r;
	if (r > 0) {
		probe_v1(&h, rootfd, real);
		if (h.kind == AB_CG_NONE && v2note[0]) {
			char v1why[sizeof(h.why)];

			memcpy(v1why, h.why, sizeof(v1why));
			h.why[0] = '\0';
			why_add(&h, "%s", v2note);
			why_add(&h, "%s", v1why);
		}
		if (h.kind == AB_CG_NONE && cfg()->cgroup)
			why_add(&h, "AGENTBOX_CGROUP is ignored: no cgroup v2 controllers here");
	}
	*ret = h;
	return 0;
}

/* ---- names and stale runs ---- */

/* starttime of procfd/<who>/stat. Returns 0, -ENOENT / -ESRCH when gone, or -errno. */
static int
proc_starttime(int procfd, const char *who, uint64_t *ret)
{
	char path[64], buf[2048];
	ssize_t n;

	snprintf(path, sizeof(path), "%s/stat", who);
	n = read_small_file_at(procfd, path, buf, sizeof(buf));
	if (n < 0)
		return (int) n;
	return proc_parse_starttime(buf, ret);
}

void
cg_run_name(const char *suffix, char *buf, size_t size)
{
	cleanup_fd int procfd = -1;
	uint64_t start = 0;

	if (size == 0)
		return;
	procfd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (procfd >= 0)
		(void) proc_starttime(procfd, "self", &start);
	snprintf(buf, size, "run-%d-%" PRIu64 "-%s", (int) getpid(), start, suffix);
}

/* "run-<PID>-<STARTTIME>-<SUFFIX>" with PID > 0 and a non-empty suffix. */
static bool
parse_run_name(const char *name, pid_t *ret_pid, uint64_t *ret_start)
{
	const char *p, *dash;
	uint64_t pid, start;

	if (strncmp(name, "run-", 4) != 0)
		return false;
	p = name + 4;
	dash = strchr(p, '-');
	if (!dash || !all_digits(p, (size_t) (dash - p)) ||
	    parse_u64(p, (size_t) (dash - p), &pid) < 0 || pid == 0 || pid > INT32_MAX)
		return false;
	p = dash + 1;
	dash = strchr(p, '-');
	if (!dash || !all_digits(p, (size_t) (dash - p)) ||
	    parse_u64(p, (size_t) (dash - p), &start) < 0 || dash[1] == '\0')
		return false;
	*ret_pid = (pid_t) pid;
	*ret_start = start;
	return true;
}

static bool
owner_gone(int procfd, pid_t pid, uint64_t start)
{
	char who[16];
	uint64_t now;
	int r;

	snprintf(who, sizeof(who), "%d", (int) pid);
	r = proc_starttime(procfd, who, &now);
	if (r == -ENOENT || r == -ESRCH)
		return true;
	if (r < 0)
		return false; /* cannot tell: keep */
	return start != 0 && now != start;
}

/* Removes the stale run directories under parent. Returns how many were removed. */
static int
sweep_dir(enum ab_cg_kind kind, int parent, int procfd)
{
	struct strv names = { 0 };
	DIR *d;
	struct dirent *de;
	int fd, removed = 0;

	fd = openat(parent, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	d = fdopendir(fd);
	if (!d) {
		(void) close(fd);
		return -errno;
	}
	while ((de = readdir(d))) {
		pid_t pid;
		uint64_t start;

		if (de->d_type != DT_DIR && de->d_type != DT_UNKNOWN)
			continue;
		if (strlen(de->d_name) < sizeof(((struct ab_cg *) 0)->name) &&
		    parse_run_name(de->d_name, &pid, &start) && owner_gone(procfd, pid, start))
			strv_push(&names, de->d_name);
	}
	(void) closedir(d);
	STRV_FOREACH (n, &names) {
		struct ab_cg cg;

		cg_init(&cg);
		cg.kind = kind;
		cg.dirfd[0] = openat(parent, *n, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (cg.dirfd[0] < 0)
			continue;
		memcpy(cg.name, *n, strlen(*n) + 1);
		if (cg_destroy(&cg) == 0)
			removed++;
	}
	strv_done(&names);
	return removed;
}

int
cg_sweep_stale(const struct ab_cg_host *h, const char *proc_root)
{
	cleanup_fd int rootfd = -1, procfd = -1;
	int removed = 0, cpu_parent = -1;

	if (!h || (h->kind != AB_CG_V1 && h->kind != AB_CG_V2))
		return 0;
	rootfd = open(h->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0)
		return -errno;
	procfd = open(proc_root ? proc_root : "/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (procfd < 0)
		return -errno;
	if (h->kind == AB_CG_V2) {
		cleanup_fd int pfd =
			openat(rootfd, h->v2_parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

		if (pfd < 0)
			return -errno;
		return sweep_dir(h->kind, pfd, procfd);
	}
	for (int i = 0; i < CG_N; i++) {
		cleanup_fd int pfd = -1;
		char rel[64];
		int r;

		if (!host_has(h, i))
			continue;
		snprintf(rel, sizeof(rel), "%s/" CG_PARENT, cg_names[i]);
		pfd = openat(rootfd, rel, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (pfd < 0)
			continue;
		if (i == CG_CPUACCT && cpu_parent >= 0 && same_inode(pfd, cpu_parent))
			continue; /* co-mounted with cpu: already swept */
		r = sweep_dir(h->kind, pfd, procfd);
		if (r > 0)
			removed += r;
		if (i == CG_CPU)
			cpu_parent = fcntl(pfd, F_DUPFD_CLOEXEC, 3);
	}
	if (cpu_parent >= 0)
		(void) close(cpu_parent);
	return removed;
}

/* cgroup.c: a run cgroup's life: created with its limits (v2 or v1), joined, destroyed (see
 * cgroup.h, and cgroup-internal.h for where run cgroups live and the other files). */
#include "cgroup.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <sys/stat.h>

#include "../../util/fdutil.h"
#include "../../util/macro.h"
#include "cgroup-internal.h"

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

/* Writes `text` (a pid, "0" = the caller) to every run cgroup's join file (v2 cgroup.procs,
 * v1 tasks). write(2) only. */
static int
cg_write_procs(const struct ab_cg *cg, const char *text, size_t len)
{
	if (!cg || cg->name[0] == '\0')
		return -EBADF;
	for (int i = 0; i < CG_N; i++) {
		int r = cg->procs_fd[i] < 0 ? 0 : write_once(cg->procs_fd[i], text, len);

		if (r < 0)
			return r;
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
		cg_sleep_ms(5);
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
		cg_sleep_ms(5);
	}
	for (int i = 0; i < CG_N; i++) {
		bool dup = false;
		int r;

		if (cg->dirfd[i] < 0)
			continue;
		for (int j = 0; j < i; j++)
			if (cg->dirfd[j] >= 0 && cg_same_inode(cg->dirfd[i], cg->dirfd[j]))
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
	if (!cg_exists_at(dirfd, file))
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
	/* memory.oom.group stays 0, as on cgroup v1: with 1 an OOM kill takes agentbox-init and
	 * bwrap too, and the run ends with no exact status (exit 125, issue 23). The kernel kills
	 * the biggest task, in practice the interpreter or a child of it; agentbox-init reports
	 * its wait status and ends the sandbox, which ends every other process. */
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
		if (!cg_host_has(h, i))
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

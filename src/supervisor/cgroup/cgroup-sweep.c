/* cgroup-sweep.c: run cgroup names, and removing the run cgroups of an agentbox that is gone
 * (cg_run_name, cg_sweep_stale). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <sys/stat.h>

#include "../../util/fdutil.h"
#include "../../util/macro.h"
#include "../../util/proc.h"
#include "../../util/strv.h"
#include "cgroup-internal.h"

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
	if (!dash || !cg_all_digits(p, (size_t) (dash - p)) ||
	    cg_parse_u64(p, (size_t) (dash - p), &pid) < 0 || pid == 0 || pid > INT32_MAX)
		return false;
	p = dash + 1;
	dash = strchr(p, '-');
	if (!dash || !cg_all_digits(p, (size_t) (dash - p)) ||
	    cg_parse_u64(p, (size_t) (dash - p), &start) < 0 || dash[1] == '\0')
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
	struct stat st;
	int fd, removed = 0;

	/* A directory's link count is 2 plus its subdirectories (kernfs, as tmpfs): none, so
	 * nothing to sweep, and no listing of the parent's thirty-odd control files per run */
	if (fstat(parent, &st) == 0 && S_ISDIR(st.st_mode) && st.st_nlink == 2)
		return 0;
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

		if (!cg_host_has(h, i))
			continue;
		snprintf(rel, sizeof(rel), "%s/" CG_PARENT, cg_names[i]);
		pfd = openat(rootfd, rel, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (pfd < 0)
			continue;
		if (i == CG_CPUACCT && cpu_parent >= 0 && cg_same_inode(pfd, cpu_parent))
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

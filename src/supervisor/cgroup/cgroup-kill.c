/* cgroup-kill.c: killing, counting and listing what is in a run cgroup (cg_kill,
 * cg_count_procs, cg_list_procs).
 *
 * A pid read from cgroup.procs may exit and be recycled before we signal it, so a pid is
 * signalled only through a pidfd (which pins one process) and only after /proc/PID/cgroup
 * shows that process in a cgroup named like the run. v2's cgroup.kill (Linux 5.14) avoids the
 * question and is preferred. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <sys/syscall.h>

#include "../../util/fdutil.h"
#include "../../util/macro.h"
#include "cgroup-internal.h"

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

/* Calls visit with what cgroup.procs lists in each hierarchy where the run has a group: the
 * pids and their count, or no pids and the read's -errno. Stops at the first visit that returns
 * nonzero and returns that; else 0. */
static int
each_procs(struct ab_cg *cg, int (*visit)(const pid_t *pids, int n, void *ctx), void *ctx)
{
	for (int i = 0; i < CG_N; i++) {
		cleanup_free pid_t *pids = NULL;
		int n, r;

		if (cg->dirfd[i] < 0)
			continue;
		n = cg_read_procs(cg->dirfd[i], &pids);
		r = visit(pids, n, ctx);
		if (r != 0)
			return r;
	}
	return 0;
}

struct kill_round {
	const char *name; /* the run's cgroup */
	size_t live;      /* processes listed (other than ourselves) */
};

/* each_procs: SIGKILLs what one hierarchy lists; a group already gone lists nothing. */
static int
kill_listed(const pid_t *pids, int n, void *ctx)
{
	struct kill_round *round = ctx;

	if (n == -ENOENT)
		return 0;
	if (n < 0)
		return n;
	for (int k = 0; k < n; k++) {
		if (pids[k] == getpid())
			continue; /* never ourselves (and never counted as live) */
		(void) kill_verified(pids[k], round->name);
		round->live++;
	}
	return 0;
}

/* Rounds of: read every cgroup.procs, SIGKILL what is listed; until all are empty. */
static int
kill_loop(struct ab_cg *cg)
{
	for (int i = 0; i < CG_KILL_ROUNDS; i++) {
		struct kill_round round = { .name = cg->name };
		int r = each_procs(cg, kill_listed, &round);

		if (r < 0)
			return r;
		if (round.live == 0)
			return 0;
		cg_sleep_ms(1);
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

struct proc_count {
	bool have; /* a read succeeded */
	int best;  /* the largest count read; while none was, the last error */
};

/* each_procs: keeps the largest count (v1: every member is in each hierarchy). */
static int
count_most(const pid_t *pids, int n, void *ctx)
{
	struct proc_count *c = ctx;

	(void) pids;
	if (n >= 0 && (!c->have || n > c->best)) {
		c->best = n;
		c->have = true;
	} else if (n < 0 && !c->have) {
		c->best = n;
	}
	return 0;
}

int
cg_count_procs(struct ab_cg *cg)
{
	struct proc_count c = { .best = -EBADF };

	if (!cg || cg->name[0] == '\0')
		return -EBADF;
	(void) each_procs(cg, count_most, &c);
	return c.best;
}

int
cg_list_procs(struct ab_cg *cg, pid_t **ret)
{
	if (!cg || cg->name[0] == '\0')
		return -EBADF;
	/* v1: every member is in each hierarchy where the run has a group */
	for (int i = 0; i < CG_N; i++)
		if (cg->dirfd[i] >= 0)
			return cg_read_procs(cg->dirfd[i], ret);
	return -EBADF;
}

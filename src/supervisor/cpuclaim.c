/* cpuclaim.c: a core per run, claimed with flock(2) on RUNS/.cache/cpu-N.lock. A lock dies
 * with its holder, so a killed agentbox never leaves a core claimed. */
#include "cpuclaim.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <sys/file.h>

static int
try_lock(int dir_fd, int cpu)
{
	char name[32];
	int fd;

	snprintf(name, sizeof(name), "cpu-%d.lock", cpu);
	fd = openat(dir_fd, name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0600);
	if (fd < 0)
		return -1;
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		(void) close(fd);
		return -1;
	}
	return fd;
}

int
cpu_claim(int want, int lock_dir_fd, struct ab_cpu_claim *claim)
{
	cpu_set_t allowed;
	int order[CPU_SETSIZE];
	int count = 0, first = 0, cur;

	CPU_ZERO(&claim->set);
	claim->nlocks = 0;
	if (sched_getaffinity(0, sizeof(allowed), &allowed) < 0)
		return -errno;
	if (want >= CPU_COUNT(&allowed))
		return 0;
	cur = sched_getcpu();
	for (int i = 0; i < CPU_SETSIZE; i++)
		if (CPU_ISSET(i, &allowed)) {
			if (i == cur)
				first = count;
			order[count++] = i;
		}
	if (lock_dir_fd < 0)
		first = (int) (getpid() % count);
	/* Free cores first, starting at ours; without locks every core counts as free. */
	for (int k = 0; k < count && want > 0; k++) {
		int cpu = order[(first + k) % count];

		if (lock_dir_fd >= 0) {
			int fd;

			if (claim->nlocks >= AB_CPU_CLAIM_MAX)
				break;
			fd = try_lock(lock_dir_fd, cpu);
			if (fd < 0)
				continue;
			claim->locks[claim->nlocks++] = fd;
		}
		CPU_SET(cpu, &claim->set);
		want--;
	}
	/* Every core is held by another run: share, from ours on. */
	for (int k = 0; k < count && want > 0; k++) {
		int cpu = order[(first + k) % count];

		if (!CPU_ISSET(cpu, &claim->set)) {
			CPU_SET(cpu, &claim->set);
			want--;
		}
	}
	return 1;
}

void
cpu_claim_release(struct ab_cpu_claim *claim)
{
	for (int i = 0; i < claim->nlocks; i++)
		(void) close(claim->locks[i]);
	claim->nlocks = 0;
}

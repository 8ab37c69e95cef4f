/* cpuclaim.h: where a run pinned to whole cores (the --cpus fallback without a cpu cgroup)
 * goes. Concurrent runs used to pick a core from their pid, so two of them landed on the same
 * core half of the time while the other idled; now each run claims a core with a lock file,
 * so concurrent runs of one runs directory spread over the cores. */
#pragma once

#include <sched.h>
#include <stddef.h>

#define AB_CPU_CLAIM_MAX 16

struct ab_cpu_claim {
	cpu_set_t set;
	int nlocks;
	int locks[AB_CPU_CLAIM_MAX]; /* flock'd cpu-N.lock files, held until the run ends */
};

/* Chooses `want` of the cores we may run on: first ones no other run holds (trying the core
 * we are on first, which saves a migration), then shared ones. lock_dir_fd < 0: no locks,
 * cores chosen from our pid as before. Returns 1 when `claim->set` should be applied, 0 when
 * `want` covers every allowed core (nothing to pin), -errno on failure. */
int cpu_claim(int want, int lock_dir_fd, struct ab_cpu_claim *claim);

/* Releases the locks. */
void cpu_claim_release(struct ab_cpu_claim *claim);

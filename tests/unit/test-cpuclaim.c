/* Unit tests for cpuclaim.c: concurrent claims get different cores while there are free
 * ones, share once there are not, and a released claim frees its core. Each claim opens its
 * own lock files, and flock(2) locks belong to the open file, so claims within this one
 * process conflict just as claims of two agentbox processes do. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "src/supervisor/cpuclaim.h"
#include "tests/tap.h"

int
main(void)
{
	char dir[] = "/tmp/ab-cpuclaim-XXXXXX";
	struct ab_cpu_claim a, b, c, all;
	cpu_set_t allowed;
	int dfd, n;

	if (!mkdtemp(dir) || (dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
		perror("mkdtemp");
		return 1;
	}
	(void) sched_getaffinity(0, sizeof(allowed), &allowed);
	n = CPU_COUNT(&allowed);

	TAP_OK(cpu_claim(n, dfd, &all) == 0 && all.nlocks == 0,
	       "wanting every allowed core (%d) pins nothing", n);
	if (n >= 2) {
		TAP_OK(cpu_claim(1, dfd, &a) == 1 && CPU_COUNT(&a.set) == 1 && a.nlocks == 1,
		       "first claim: one core, one lock");
		TAP_OK(cpu_claim(1, dfd, &b) == 1 && CPU_COUNT(&b.set) == 1 && b.nlocks == 1,
		       "second claim: one core, one lock");
		TAP_OK(!CPU_EQUAL(&a.set, &b.set), "concurrent claims get different cores");
		if (n == 2) {
			TAP_OK(cpu_claim(1, dfd, &c) == 1 && CPU_COUNT(&c.set) == 1 &&
				       c.nlocks == 0,
			       "a third claim on two cores shares one, holding no lock");
			cpu_claim_release(&c);
		}
		cpu_claim_release(&a);
		TAP_OK(a.nlocks == 0, "release drops the locks");
		if (n == 2)
			TAP_OK(cpu_claim(1, dfd, &c) == 1 && CPU_EQUAL(&c.set, &a.set) &&
				       c.nlocks == 1,
			       "the released core is the free one a new claim gets");
		else
			TAP_OK(cpu_claim(1, dfd, &c) == 1 && !CPU_EQUAL(&c.set, &b.set),
			       "a new claim avoids the core still held");
		cpu_claim_release(&b);
		cpu_claim_release(&c);
	}
	TAP_OK(cpu_claim(1, -1, &c) == (n >= 2 ? 1 : 0) && c.nlocks == 0 &&
		       CPU_COUNT(&c.set) == (n >= 2 ? 1 : 0),
	       "without a lock directory: one core from the pid, no lock");
	for (int i = 0; i < CPU_SETSIZE; i++) {
		char name[32];

		snprintf(name, sizeof(name), "cpu-%d.lock", i);
		(void) unlinkat(dfd, name, 0);
	}
	(void) close(dfd);
	(void) rmdir(dir);
	return tap_done();
}

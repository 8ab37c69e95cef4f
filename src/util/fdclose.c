/* fdclose.c: see fdclose.h. Linked into agentbox-init too: nothing here but libc. */
#include "fdclose.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

#include <sys/syscall.h>

#define FDS_BRUTE_MAX 65536 /* without close_range and /proc: close() every fd below this */

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2) /* linux/close_range.h, Linux 5.11 */
#endif

/* fallback: close_range() needs Linux 5.9 */
static bool
kept(int fd, const int *keep, int nkeep)
{
	for (int i = 0; i < nkeep; i++)
		if (keep[i] == fd)
			return true;
	return false;
}

enum walk_do {
	WALK_COUNT,
	WALK_CLOSE,
	WALK_CLOEXEC
};

static void
walk_one(int fd, enum walk_do what)
{
	if (what == WALK_CLOSE)
		(void) close(fd);
	else if (what == WALK_CLOEXEC)
		(void) fcntl(fd, F_SETFD, FD_CLOEXEC); /* the only fd flag there is */
}

static int
proc_fds_walk(int first, const int *keep, int nkeep, enum walk_do what)
{
	int dfd = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	char buf[4096];
	int count = 0;

	if (dfd < 0) {
		if (what == WALK_COUNT)
			return -errno;
		for (int fd = first; fd < FDS_BRUTE_MAX; fd++)
			if (!kept(fd, keep, nkeep))
				walk_one(fd, what);
		return 0;
	}
	for (;;) {
		long n = syscall(SYS_getdents64, dfd, buf, sizeof(buf));

		if (n <= 0)
			break;
		for (long off = 0; off < n;) {
			struct dirent64 *d = (struct dirent64 *) (buf + off);
			char *end;
			long fd = strtol(d->d_name, &end, 10);

			off += d->d_reclen;
			if (*end != '\0' || end == d->d_name || fd < first || fd == dfd ||
			    kept((int) fd, keep, nkeep))
				continue;
			count++;
			walk_one((int) fd, what);
		}
	}
	(void) close(dfd);
	return what == WALK_COUNT ? count : 0;
}

static bool
close_range_ok(int from, int to)
{
	return syscall(SYS_close_range, (unsigned) from, (unsigned) to, 0) == 0;
}

int
fds_close_from_keep(int first, const int *keep, int nkeep)
{
	int sorted[8], n = 0, from = first;

	/* the fds to keep at or above first, in order (a handful: insertion sort) */
	for (int i = 0; i < nkeep && n < (int) (sizeof(sorted) / sizeof(sorted[0])); i++) {
		int j = n;

		if (keep[i] < first || kept(keep[i], sorted, n))
			continue;
		while (j > 0 && sorted[j - 1] > keep[i]) {
			sorted[j] = sorted[j - 1];
			j--;
		}
		sorted[j] = keep[i];
		n++;
	}
	/* close_range() over each gap between them */
	for (int i = 0; i <= n; i++) {
		int to = i < n ? sorted[i] - 1 : -1;

		if (i < n && to < from) {
			from = sorted[i] + 1;
			continue;
		}
		if (!close_range_ok(from, to))
			return proc_fds_walk(first, sorted, n, WALK_CLOSE);
		if (i < n)
			from = sorted[i] + 1;
	}
	return 0;
}

int
fds_close_from_except(int first, int keep)
{
	return fds_close_from_keep(first, &keep, 1);
}

int
fds_close_from(int first)
{
	return fds_close_from_except(first, -1);
}

int
fds_count_from(int first)
{
	return proc_fds_walk(first, NULL, 0, WALK_COUNT);
}

int
fds_cloexec_from(int first)
{
	if (syscall(SYS_close_range, (unsigned) first, ~0U, CLOSE_RANGE_CLOEXEC) == 0)
		return 0;
	return proc_fds_walk(first, NULL, 0, WALK_CLOEXEC);
}

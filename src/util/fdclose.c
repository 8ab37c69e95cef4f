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

/* fallback: close_range() needs Linux 5.9 */
static int
proc_fds_walk(int first, int keep, bool close_them)
{
	int dfd = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	char buf[4096];
	int count = 0;

	if (dfd < 0) {
		if (!close_them)
			return -errno;
		for (int fd = first; fd < FDS_BRUTE_MAX; fd++)
			if (fd != keep)
				(void) close(fd);
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
			    fd == keep)
				continue;
			count++;
			if (close_them)
				(void) close((int) fd);
		}
	}
	(void) close(dfd);
	return close_them ? 0 : count;
}

static bool
close_range_ok(int from, int to)
{
	return syscall(SYS_close_range, (unsigned) from, (unsigned) to, 0) == 0;
}

int
fds_close_from_except(int first, int keep)
{
	if (keep < first) {
		if (close_range_ok(first, -1))
			return 0;
		keep = -1;
	} else if ((keep == first || close_range_ok(first, keep - 1)) &&
		   close_range_ok(keep + 1, -1)) {
		return 0;
	}
	return proc_fds_walk(first, keep, true);
}

int
fds_close_from(int first)
{
	return fds_close_from_except(first, -1);
}

int
fds_count_from(int first)
{
	return proc_fds_walk(first, -1, false);
}

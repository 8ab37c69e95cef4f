/* cgroup-util.c: helpers the cgroup*.c files share (cgroup-internal.h): parsing cgroupfs
 * text, *at() predicates, mkdir with the test hook, reading cgroup.procs. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sys/stat.h>

#include "../../util/fdutil.h"
#include "../../util/macro.h"
#include "../../util/xalloc.h"
#include "cgroup-internal.h"

void (*cg_test_after_mkdir)(int parent_dirfd, const char *name);
void (*cg_test_before_rmdir)(int parent_dirfd, const char *name);
int (*cg_test_subtree_write)(int dirfd, const char *value);
int cg_test_systemd = -1;
char cg_scope_why[256];
char cg_scope_unit[64];

const char *const cg_names[CG_N] = { "memory", "pids", "cpu", "cpuacct" };

void
cg_sleep_ms(long ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

bool
cg_all_digits(const char *s, size_t len)
{
	if (len == 0)
		return false;
	for (size_t i = 0; i < len; i++)
		if (s[i] < '0' || s[i] > '9')
			return false;
	return true;
}

int
cg_parse_u64(const char *s, size_t len, uint64_t *ret)
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
	if (!cg_all_digits(s, len) || len >= sizeof(buf))
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

bool
cg_exists_at(int dirfd, const char *path)
{
	return faccessat(dirfd, path, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
}

bool
cg_same_inode(int fd_a, int fd_b)
{
	struct stat a, b;

	if (fstat(fd_a, &a) < 0 || fstat(fd_b, &b) < 0)
		return false;
	return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

int
cg_mkdir(int parent, const char *name)
{
	if (mkdirat(parent, name, 0755) < 0)
		return -errno;
	if (cg_test_after_mkdir)
		cg_test_after_mkdir(parent, name);
	return 0;
}

int
cg_read_procs(int dirfd, pid_t **ret)
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

		if (cg_parse_u64(p, l, &v) == 0 && v > 0 && v <= INT32_MAX)
			pids[n++] = (pid_t) v;
		p += l;
		if (*p == '\n')
			p++;
	}
	*ret = pids;
	return n;
}

bool
cg_host_has(const struct ab_cg_host *h, int i)
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

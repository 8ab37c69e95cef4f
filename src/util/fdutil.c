#include "fdutil.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sys/socket.h>

#include "macro.h"
#include "xalloc.h"

int
write_all_deadline(int fd, const void *buf, size_t len, int64_t deadline_ms)
{
	const char *p = buf;

	while (len > 0) {
		struct pollfd pfd = { .fd = fd, .events = POLLOUT };
		int64_t left;
		ssize_t w = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (w < 0 && errno == ENOTSOCK)
			w = write(fd, p, len);
		if (w > 0) {
			p += w;
			len -= (size_t) w;
			continue;
		}
		if (w == 0)
			return -ENOSPC;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN)
			return -errno;
		left = deadline_ms - now_ms();
		if (left <= 0)
			return -ETIMEDOUT;
		if (poll(&pfd, 1, left > INT_MAX ? INT_MAX : (int) left) < 0 && errno != EINTR)
			return -errno;
	}
	return 0;
}

int
write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len > 0) {
		ssize_t w = write(fd, p, len);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (w == 0)
			return -ENOSPC;
		p += w;
		len -= (size_t) w;
	}
	return 0;
}

ssize_t
read_all_capped(int fd, size_t cap, char **ret)
{
	size_t len = 0, size = 4096;
	char *buf = xmalloc(size + 1);

	for (;;) {
		ssize_t r;

		if (len == size) {
			if (size >= cap + 1) {
				free(buf);
				return -EFBIG;
			}
			size = size * 2 > cap + 1 ? cap + 1 : size * 2;
			buf = xrealloc(buf, size + 1);
		}
		r = read(fd, buf + len, size - len);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			r = -errno;
			free(buf);
			return r;
		}
		if (r == 0)
			break;
		len += (size_t) r;
		if (len > cap) {
			free(buf);
			return -EFBIG;
		}
	}
	buf[len] = '\0';
	*ret = buf;
	return (ssize_t) len;
}

ssize_t
read_small_file_at(int dirfd, const char *path, char *buf, size_t size)
{
	cleanup_fd int fd = -1;
	ssize_t r;

	if (size == 0)
		return -EINVAL;
	fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	r = RETRY_EINTR(read(fd, buf, size - 1));
	if (r < 0)
		return -errno;
	buf[r] = '\0';
	while (r > 0 && buf[r - 1] == '\n')
		buf[--r] = '\0';
	return r;
}

int
write_once(int fd, const void *buf, size_t len)
{
	ssize_t w = RETRY_EINTR(write(fd, buf, len));

	if (w < 0)
		return -errno;
	return (size_t) w == len ? 0 : -EIO;
}

int
write_small_file_at(int dirfd, const char *path, const char *s)
{
	cleanup_fd int fd = -1;
	size_t len = strlen(s);

	fd = openat(dirfd, path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	return write_once(fd, s, len);
}

int
fd_set_nonblock(int fd, int on)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0)
		return -errno;
	fl = on ? (fl | O_NONBLOCK) : (fl & ~O_NONBLOCK);
	if (fcntl(fd, F_SETFL, fl) < 0)
		return -errno;
	return 0;
}

static int timing_on; /* set by timing_enable: the settings (spec/cfg.c) know, not util */

void
timing_enable(bool on)
{
	timing_on = on;
}

/* "agentbox: timing WALL ms (cpu CPU ms) WHAT": since the first mark, wall and this
 * process's CPU time (bench/phases.py reads them). */
void
timing_mark(const char *what)
{
	static int64_t t0, c0;
	int64_t now, cpu = 0;
	struct timespec ts;

	if (!timing_on)
		return; /* no clock read: marks sit on the hot path of every run */
	now = now_ns();
	if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) == 0)
		cpu = (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
	if (!t0) {
		t0 = now;
		c0 = cpu;
	}
	fprintf(stderr, "agentbox: timing %7.2f ms (cpu %6.2f ms) %s\n", (double) (now - t0) / 1e6,
		(double) (cpu - c0) / 1e6, what);
}

/* feed.c: the script's stdin streamed from the caller's (feed.h). */
#include "feed.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/socket.h>
#include <sys/stat.h>

#include "../util/xalloc.h"

int
feed_open(struct ab_feed *f, int src, int *ret_sandbox_end)
{
	struct stat st, own;
	int p[2];

	memset(f, 0, sizeof(*f));
	f->src = f->dst = -1;
	if (fstat(src, &st) < 0)
		return -errno;
	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	if (fcntl(p[1], F_SETFL, O_NONBLOCK) < 0) {
		int e = errno;

		(void) close(p[0]);
		(void) close(p[1]);
		return -e;
	}
	f->dst = p[1];
	*ret_sandbox_end = p[0];
	f->buf = xmalloc(FEED_BUF);
	f->src = src;
	if (S_ISSOCK(st.st_mode)) {
		f->src_sock = true;
	} else if (S_ISFIFO(st.st_mode) || (S_ISCHR(st.st_mode) && isatty(src))) {
		/* our own description of the pipe or terminal, non-blocking (the caller's keeps
		 * its flags: its shell shares them) */
		char path[32];
		int nfd;

		snprintf(path, sizeof(path), "/proc/self/fd/%d", src);
		nfd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
		if (nfd >= 0 && fstat(nfd, &own) == 0 && own.st_dev == st.st_dev &&
		    own.st_ino == st.st_ino && own.st_rdev == st.st_rdev) {
			f->src = nfd;
			f->src_own = true;
		} else {
			if (nfd >= 0)
				(void) close(nfd);
			f->src_polled = true; /* e.g. EACCES: another user's pipe */
		}
	}
	return 0;
}

int
feed_src_fd(const struct ab_feed *f)
{
	return f->src >= 0 && f->dst >= 0 && f->len < FEED_BUF ? f->src : -1;
}

int
feed_dst_fd(const struct ab_feed *f)
{
	return f->dst >= 0 && f->len > 0 ? f->dst : -1;
}

static void
src_end(struct ab_feed *f)
{
	if (f->src_own && f->src >= 0)
		(void) close(f->src);
	f->src = -1;
	/* nothing more will come: the script sees EOF once what waits is written */
	if (f->len == 0 && f->dst >= 0) {
		(void) close(f->dst);
		f->dst = -1;
	}
}

void
feed_read(struct ab_feed *f)
{
	size_t room;
	ssize_t n;

	if (feed_src_fd(f) < 0)
		return;
	if (f->off > 0) {
		memmove(f->buf, f->buf + f->off, f->len);
		f->off = 0;
	}
	room = FEED_BUF - f->len;
	/* polled: at most what a pipe hands over whole after POLLIN, and only once */
	if (f->src_polled && room > 4096)
		room = 4096;
	n = f->src_sock ? recv(f->src, f->buf + f->len, room, MSG_DONTWAIT)
			: read(f->src, f->buf + f->len, room);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) { /* the end, or an error (a directory: EISDIR): the end too */
		src_end(f);
		return;
	}
	f->len += (size_t) n;
}

void
feed_write(struct ab_feed *f)
{
	ssize_t n;

	if (feed_dst_fd(f) < 0)
		return;
	n = write(f->dst, f->buf + f->off, f->len);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n < 0) { /* EPIPE: the script closed its stdin, or is gone */
		(void) close(f->dst);
		f->dst = -1;
		f->len = 0;
		src_end(f);
		return;
	}
	f->off += (size_t) n;
	f->len -= (size_t) n;
	f->fed += (uint64_t) n;
	if (f->len == 0) {
		f->off = 0;
		if (f->src < 0) {
			(void) close(f->dst);
			f->dst = -1;
		}
	}
}

void
feed_close(struct ab_feed *f)
{
	if (f->src_own && f->src >= 0)
		(void) close(f->src);
	if (f->dst >= 0)
		(void) close(f->dst);
	f->src = f->dst = -1;
	free(f->buf);
	f->buf = NULL;
	f->len = f->off = 0;
}

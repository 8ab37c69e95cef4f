/* relay.c: the script's output on its way to agentbox's own stdout and stderr. */
#include "relay.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "../util/fdutil.h"
#include "../util/xalloc.h"

static char *
put_esc(char *q, unsigned char c)
{
	static const char hex[] = "0123456789abcdef";

	*q++ = '\\';
	*q++ = 'x';
	*q++ = hex[c >> 4];
	*q++ = hex[c & 0xf];
	return q;
}

/* The second byte a lead byte allows (RFC 3629, section 4): this excludes overlong forms,
 * UTF-16 surrogates and code points past U+10FFFF. */
static bool
second_ok(unsigned char lead, unsigned char c)
{
	switch (lead) {
	case 0xe0:
		return c >= 0xa0 && c <= 0xbf;
	case 0xed:
		return c >= 0x80 && c <= 0x9f;
	case 0xf0:
		return c >= 0x90 && c <= 0xbf;
	case 0xf4:
		return c >= 0x80 && c <= 0x8f;
	default:
		return c >= 0x80 && c <= 0xbf;
	}
}

size_t
ttysan_feed(struct ab_ttysan *ts, const char *in, size_t len, char *out)
{
	char *q = out;

	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char) in[i];

		if (ts->npend > 0) {
			bool cont = ts->npend == 1 ? second_ok(ts->pend[0], c) : (c & 0xc0) == 0x80;

			if (cont) {
				ts->pend[ts->npend++] = c;
				if (ts->npend < ts->need)
					continue;
				if (ts->pend[0] == 0xc2 && ts->pend[1] <= 0x9f) {
					q = put_esc(q, ts->pend[1]); /* C1 control */
				} else {
					memcpy(q, ts->pend, ts->npend);
					q += ts->npend;
				}
				ts->npend = 0;
				continue;
			}
			/* cut short: the held bytes are not UTF-8; c starts afresh */
			q += ttysan_finish(ts, q);
		}
		if (c < 0x80) {
			if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f)
				q = put_esc(q, c);
			else
				*q++ = (char) c;
		} else if (c >= 0xc2 && c <= 0xf4) {
			ts->pend[0] = c;
			ts->npend = 1;
			ts->need = c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
		} else {
			q = put_esc(q, c);
		}
	}
	return (size_t) (q - out);
}

size_t
ttysan_finish(struct ab_ttysan *ts, char *out)
{
	char *q = out;

	for (unsigned i = 0; i < ts->npend; i++)
		q = put_esc(q, ts->pend[i]);
	ts->npend = 0;
	return (size_t) (q - out);
}

/* Where a destination's reader is too slow, a terminal user is told in line; a program
 * reading a pipe is not (the bytes would be mistaken for the script's): the report says it. */
static const char behind_note[] = "\n[agentbox: output stops here: the terminal fell more "
				  "than 1 MiB behind; the report has all of it]\n";

static bool
is_pty_master(int fd)
{
	unsigned n;

	return ioctl(fd, TIOCGPTN, &n) == 0;
}

void
relay_dst_open(struct ab_relay_dst *d, int fd, bool sanitize)
{
	struct stat st, own;
	char path[32];
	int nfd;

	memset(d, 0, sizeof(*d));
	d->caller_fd = fd;
	d->fd = fd;
	d->sanitize = sanitize;
	d->how = AB_RELAY_POLLED;
	if (fstat(fd, &st) < 0) {
		d->stop = AB_RELAY_FAILED;
		d->error = errno;
		d->fd = -1;
		return;
	}
	if (S_ISREG(st.st_mode) || S_ISBLK(st.st_mode)) {
		d->how = AB_RELAY_FILE;
		return;
	}
	if (S_ISSOCK(st.st_mode)) {
		d->how = AB_RELAY_SEND;
		return;
	}
	/* A pipe or a terminal: our own open file description of it, non-blocking, so the
	 * caller's (shared with its shell and siblings) keeps its flags. Not a pty master:
	 * opening /dev/ptmx again would make a new terminal. */
	if (!S_ISFIFO(st.st_mode) && !(S_ISCHR(st.st_mode) && isatty(fd) && !is_pty_master(fd)))
		return;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	nfd = open(path, O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (nfd < 0)
		return; /* e.g. EACCES: a pipe of another user; ENXIO: no reader left */
	if (fstat(nfd, &own) < 0 || own.st_dev != st.st_dev || own.st_ino != st.st_ino ||
	    own.st_rdev != st.st_rdev) {
		(void) close(nfd);
		return;
	}
	d->fd = nfd;
	d->own_fd = true;
	d->how = AB_RELAY_NONBLOCK;
}

bool
relay_same_target(int fd1, int fd2)
{
	struct stat a, b;

	/* regular files are left apart: two descriptions of one file have two offsets */
	return fstat(fd1, &a) == 0 && fstat(fd2, &b) == 0 && !S_ISREG(a.st_mode) &&
	       (a.st_mode & S_IFMT) == (b.st_mode & S_IFMT) && a.st_dev == b.st_dev &&
	       a.st_ino == b.st_ino && a.st_rdev == b.st_rdev;
}

static void
enqueue(struct ab_relay_dst *d, struct ab_relay_src *src, const char *data, size_t len, size_t raw)
{
	if (d->head + d->len + len > d->cap) {
		if (d->head > 0) {
			memmove(d->q, d->q + d->head, d->len);
			d->head = 0;
		}
		if (d->len + len > d->cap) {
			d->cap = d->len + len > 2 * d->cap ? d->len + len : 2 * d->cap;
			d->q = xrealloc(d->q, d->cap);
		}
	}
	memcpy(d->q + d->head + d->len, data, len);
	d->len += len;
	if (d->nseg > d->seg_head && d->seg[d->nseg - 1].src == src) {
		d->seg[d->nseg - 1].len += len;
		d->seg[d->nseg - 1].raw += raw;
		return;
	}
	if (d->nseg == d->seg_cap) {
		if (d->seg_head > 0) {
			memmove(d->seg, d->seg + d->seg_head,
				(d->nseg - d->seg_head) * sizeof(*d->seg));
			d->nseg -= d->seg_head;
			d->seg_head = 0;
		}
		if (d->nseg == d->seg_cap) {
			d->seg_cap = d->seg_cap ? 2 * d->seg_cap : 8;
			d->seg = xrealloc(d->seg, d->seg_cap * sizeof(*d->seg));
		}
	}
	d->seg[d->nseg++] = (struct ab_relay_seg){ src, len, raw };
}

/* n bytes went out. */
static void
consume(struct ab_relay_dst *d, size_t n)
{
	d->head += n;
	d->len -= n;
	if (d->len == 0)
		d->head = 0;
	while (n > 0 && d->seg_head < d->nseg) {
		size_t left = d->seg[d->seg_head].len - d->seg_done;

		if (n < left) {
			d->seg_done += n;
			break;
		}
		n -= left;
		d->seg_head++;
		d->seg_done = 0;
	}
	if (d->seg_head == d->nseg)
		d->seg_head = d->nseg = 0;
}

/* Drops the queue, counting each source's bytes. A sanitised segment that went out in part
 * counts its raw bytes in proportion (exact when nothing was escaped). */
static void
discard(struct ab_relay_dst *d)
{
	for (size_t i = d->seg_head; i < d->nseg; i++) {
		const struct ab_relay_seg *s = &d->seg[i];
		size_t left = s->len - (i == d->seg_head ? d->seg_done : 0);

		if (!s->src || s->len == 0)
			continue;
		s->src->dropped += left == s->len
					   ? s->raw
					   : (uint64_t) ((s->raw * left + s->len - 1) / s->len);
	}
	d->head = d->len = 0;
	d->seg_head = d->nseg = d->seg_done = 0;
}

static void
fail(struct ab_relay_dst *d, int e)
{
	d->stop = AB_RELAY_FAILED;
	d->error = e;
	discard(d);
}

void
relay_write(struct ab_relay_dst *d)
{
	while (d->len > 0) {
		const char *p = d->q + d->head;
		size_t n = d->len;
		ssize_t w;

		switch (d->how) {
		case AB_RELAY_SEND:
			w = send(d->fd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL);
			break;
		case AB_RELAY_POLLED: {
			struct pollfd pfd = { .fd = d->fd, .events = POLLOUT };

			if (poll(&pfd, 1, 0) <= 0)
				return;
			if (n > PIPE_BUF)
				n = PIPE_BUF;
			w = write(d->fd, p, n);
			break;
		}
		case AB_RELAY_NONBLOCK:
		case AB_RELAY_FILE:
		default:
			w = write(d->fd, p, n);
			break;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (w <= 0) {
			fail(d, w < 0 ? errno : ENOSPC);
			return;
		}
		consume(d, (size_t) w);
	}
}

void
relay_push(struct ab_relay_src *src, const char *buf, size_t len)
{
	struct ab_relay_dst *d = src->dst;
	char *clean = NULL;
	const char *data = buf;
	size_t n = len, raw = len;

	if (!d || len == 0)
		return;
	if (d->stop != AB_RELAY_RUNNING) {
		src->dropped += len;
		return;
	}
	if (d->sanitize) {
		unsigned held = src->ts.npend;

		clean = xmalloc(AB_TTYSAN_ROOM(len));
		n = ttysan_feed(&src->ts, buf, len, clean);
		raw = len + held - src->ts.npend; /* the bytes whose sanitised form this is */
		data = clean;
	}
	if (d->len + n > AB_RELAY_QUEUE_MAX) {
		/* The reader is more than the queue behind: stop here for good, so it gets a
		 * clean prefix rather than output with holes in it. */
		src->dropped += raw;
		d->stop = AB_RELAY_BEHIND;
		if (d->sanitize)
			enqueue(d, NULL, behind_note, sizeof(behind_note) - 1, 0);
	} else if (n > 0) {
		enqueue(d, src, data, n, raw);
	}
	free(clean);
	relay_write(d);
}

void
relay_src_end(struct ab_relay_src *src)
{
	struct ab_relay_dst *d = src->dst;
	char out[16];
	size_t held = src->ts.npend, n;

	if (!d || held == 0)
		return;
	n = ttysan_finish(&src->ts, out);
	if (d->stop != AB_RELAY_RUNNING) {
		src->dropped += held;
		return;
	}
	enqueue(d, src, out, n, held);
	relay_write(d);
}

short
relay_events(const struct ab_relay_dst *d)
{
	return d->len > 0 && d->fd >= 0 ? POLLOUT : 0;
}

bool
relay_flush(struct ab_relay_dst *const *d, size_t n, int sigfd, int stall_ms, int max_ms)
{
	int64_t start = now_ms(), progress = start;

	for (;;) {
		struct pollfd pfd[AB_RELAY_MAX_DST + 1];
		size_t before[AB_RELAY_MAX_DST];
		nfds_t np = 0;
		int64_t now = now_ms(), until;

		for (size_t i = 0; i < n && i < AB_RELAY_MAX_DST; i++) {
			before[i] = d[i]->len;
			pfd[np++] = (struct pollfd){ .fd = relay_events(d[i]) ? d[i]->fd : -1,
						     .events = POLLOUT };
		}
		{
			bool queued = false;

			for (size_t i = 0; i < np; i++)
				queued |= pfd[i].fd >= 0;
			if (!queued)
				return true;
		}
		until = progress + stall_ms < start + max_ms ? progress + stall_ms : start + max_ms;
		if (now >= until)
			return false;
		pfd[np++] = (struct pollfd){ .fd = sigfd, .events = POLLIN };
		if (poll(pfd, np, (int) (until - now)) < 0 && errno != EINTR)
			return false;
		if (sigfd >= 0 && (pfd[np - 1].revents & POLLIN)) {
			struct signalfd_siginfo si;

			while (read(sigfd, &si, sizeof(si)) == (ssize_t) sizeof(si))
				if (si.ssi_signo != SIGCHLD)
					return false; /* an interrupt: stop waiting */
		}
		for (size_t i = 0; i + 1 < np; i++) {
			if (!pfd[i].revents)
				continue;
			relay_write(d[i]);
			if (d[i]->len < before[i])
				progress = now_ms();
		}
	}
}

void
relay_dst_close(struct ab_relay_dst *d)
{
	if (d->len > 0) {
		discard(d);
		if (d->stop == AB_RELAY_RUNNING)
			d->stop = AB_RELAY_GAVE_UP;
	}
	free(d->q);
	free(d->seg);
	d->q = NULL;
	d->seg = NULL;
	d->cap = d->seg_cap = 0;
	if (d->own_fd && d->fd >= 0)
		(void) close(d->fd);
	d->fd = -1;
	d->own_fd = false;
}

const char *
relay_stop_reason(const struct ab_relay_dst *d)
{
	switch (d->stop) {
	case AB_RELAY_BEHIND:
		return "its reader fell more than 1 MiB behind";
	case AB_RELAY_FAILED:
		return d->error == EPIPE ? "its reader closed it" : strerror(d->error);
	case AB_RELAY_GAVE_UP:
		return "its reader did not take the rest soon enough after the run";
	case AB_RELAY_RUNNING:
	default:
		return "not stopped";
	}
}

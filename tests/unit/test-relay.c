/* Unit tests for relay.c: the terminal sanitiser, whole and split across reads; the relay
 * queue against readers that do not read, read slowly, or go away. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/socket.h>
#include <sys/wait.h>

#include "src/supervisor/relay.h"
#include "src/util/fdutil.h"
#include "src/util/xalloc.h"
#include "tests/tap.h"

/* Feeds the pieces of in (cut at the offsets in cuts, ascending, then the end) to one
 * stream and returns everything that came out, NUL-terminated, the stream finished. */
static char *
san_split(const char *in, size_t len, const size_t *cuts, size_t ncuts, size_t *ret_len)
{
	struct ab_ttysan ts = { 0 };
	char *out = xmalloc(AB_TTYSAN_ROOM(len) + 16);
	size_t at = 0, o = 0;

	for (size_t i = 0; i <= ncuts; i++) {
		size_t end = i < ncuts ? cuts[i] : len;
		/* an exact-size buffer per piece: the room macro must hold (ASan builds) */
		char *piece = xmalloc(AB_TTYSAN_ROOM(end - at));
		size_t n = ttysan_feed(&ts, in + at, end - at, piece);

		memcpy(out + o, piece, n);
		o += n;
		free(piece);
		at = end;
	}
	o += ttysan_finish(&ts, out + o);
	out[o] = '\0';
	*ret_len = o;
	return out;
}

static char *
san(const char *in, size_t len, size_t *ret_len)
{
	return san_split(in, len, NULL, 0, ret_len);
}

/* Feeds in one byte at a time. */
static char *
san_bytes(const char *in, size_t len, size_t *ret_len)
{
	size_t *cuts = xmalloc((len + 1) * sizeof(*cuts));
	char *out;

	for (size_t i = 0; i < len; i++)
		cuts[i] = i;
	out = san_split(in, len, cuts, len, ret_len);
	free(cuts);
	return out;
}

/* What a terminal may safely receive: well-formed UTF-8 with no C0 control but \n and \t,
 * no DEL and no C1 control. */
static bool
tty_safe(const unsigned char *s, size_t len)
{
	size_t i = 0;

	while (i < len) {
		unsigned char c = s[i];
		uint32_t cp;
		size_t n;

		if (c < 0x80) {
			if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f)
				return false;
			i++;
			continue;
		}
		if ((c & 0xe0) == 0xc0)
			n = 2, cp = c & 0x1f;
		else if ((c & 0xf0) == 0xe0)
			n = 3, cp = c & 0x0f;
		else if ((c & 0xf8) == 0xf0)
			n = 4, cp = c & 0x07;
		else
			return false;
		if (i + n > len)
			return false;
		for (size_t k = 1; k < n; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return false;
			cp = (cp << 6) | (s[i + k] & 0x3f);
		}
		if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
		    cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff) || (cp >= 0x80 && cp <= 0x9f))
			return false;
		i += n;
	}
	return true;
}

static void
expect(const char *in, size_t len, const char *want, const char *what)
{
	size_t l1, l2;
	char *whole = san(in, len, &l1);
	char *bytes = san_bytes(in, len, &l2);

	TAP_STREQ(whole, want, "%s", what);
	TAP_STREQ(bytes, want, "%s, one byte per read", what);
	free(whole);
	free(bytes);
}

#define EXPECT(in, want, what) expect(in, sizeof(in) - 1, want, what)

/* Numbered lines: any prefix of them can be checked. */
static char *
lines(size_t total)
{
	char *b = xmalloc(total);

	for (size_t i = 0; i < total; i += 64)
		snprintf(b + i, 65, "%062zu\n", i / 64);
	return b;
}

/* Reads what the pipe holds now (non-blocking). */
static size_t
drain(int fd, char *buf, size_t size)
{
	size_t got = 0;
	ssize_t n;

	(void) fd_set_nonblock(fd, 1);
	while (got < size && (n = read(fd, buf + got, size - got)) > 0)
		got += (size_t) n;
	return got;
}

/* A reader that holds the pipe and never reads: pushing more than the pipe and the queue
 * hold returns at once, the reader gets a clean prefix, and every byte is accounted for. */
static void
test_stalled_pipe(void)
{
	const size_t total = 3 * AB_RELAY_QUEUE_MAX, chunk = 65536;
	char *data = lines(total), *got = xmalloc(total);
	struct ab_relay_dst d;
	struct ab_relay_src src = { .dst = &d };
	int p[2], fl;
	int64_t t0, ms;
	size_t n;
	bool all;

	if (pipe2(p, O_CLOEXEC) < 0) {
		TAP_OK(0, "pipe2: %s", strerror(errno));
		return;
	}
	relay_dst_open(&d, p[1], false);
	TAP_OK(d.how == AB_RELAY_NONBLOCK && d.own_fd && d.fd != p[1],
	       "a pipe: written through a private non-blocking description (how %d)", d.how);
	fl = fcntl(p[1], F_GETFL);
	TAP_OK(fl >= 0 && !(fl & O_NONBLOCK),
	       "the caller's description of the pipe stays blocking (shared with others)");
	t0 = now_ms();
	for (size_t i = 0; i < total; i += chunk)
		relay_push(&src, data + i, chunk);
	ms = now_ms() - t0;
	TAP_OK(d.stop == AB_RELAY_BEHIND,
	       "3 MiB to a reader that does not read: the relay stops "
	       "(%s), after %" PRId64 " ms",
	       relay_stop_reason(&d), ms);
	TAP_OK(d.len <= AB_RELAY_QUEUE_MAX, "...with at most the queue's 1 MiB queued (%zu)",
	       d.len);
	t0 = now_ms();
	all = relay_flush((struct ab_relay_dst *[]){ &d }, 1, -1, 200, 5000);
	ms = now_ms() - t0;
	TAP_OK(!all && ms >= 150,
	       "the flush gives up after 200 ms without progress (%" PRId64 " ms)", ms);
	relay_dst_close(&d);
	n = drain(p[0], got, total);
	TAP_OK(n > 0 && memcmp(got, data, n) == 0, "the reader got a clean prefix (%zu bytes)", n);
	TAP_OK(n + src.dropped == total, "relayed %zu + dropped %" PRIu64 " = the %zu bytes pushed",
	       n, src.dropped, total);
	(void) close(p[0]);
	(void) close(p[1]);
	free(data);
	free(got);
}

/* The fallback when no private description can be had: poll() for POLLOUT, then at most
 * PIPE_BUF bytes, which a writable pipe takes without waiting. */
static void
test_polled_fallback(void)
{
	const size_t total = 2 * AB_RELAY_QUEUE_MAX;
	char *data = lines(total), *got = xmalloc(total);
	struct ab_relay_dst d;
	struct ab_relay_src src = { .dst = &d };
	int p[2];
	size_t n;

	if (pipe2(p, O_CLOEXEC) < 0) {
		TAP_OK(0, "pipe2: %s", strerror(errno));
		return;
	}
	relay_dst_open(&d, p[1], false);
	if (d.own_fd)
		(void) close(d.fd);
	d.fd = p[1];
	d.own_fd = false;
	d.how = AB_RELAY_POLLED;
	for (size_t i = 0; i < total; i += 65536)
		relay_push(&src, data + i, 65536);
	(void) relay_flush((struct ab_relay_dst *[]){ &d }, 1, -1, 100, 1000);
	relay_dst_close(&d);
	n = drain(p[0], got, total);
	TAP_OK(d.stop == AB_RELAY_BEHIND && n > 0 && memcmp(got, data, n) == 0 &&
		       n + src.dropped == total,
	       "poll() fallback on a pipe that is not read: no wait, a clean prefix of %zu bytes, "
	       "%" PRIu64 " dropped",
	       n, src.dropped);
	(void) close(p[0]);
	(void) close(p[1]);
	free(data);
	free(got);
}

/* A reader that takes everything, slowly: the flush waits while it makes progress. */
static void
test_slow_reader(void)
{
	const size_t total = AB_RELAY_QUEUE_MAX / 2;
	char *data = lines(total);
	struct ab_relay_dst d;
	struct ab_relay_src src = { .dst = &d };
	int p[2], status = -1;
	pid_t pid;
	bool all;

	if (pipe2(p, O_CLOEXEC) < 0) {
		TAP_OK(0, "pipe2: %s", strerror(errno));
		return;
	}
	pid = fork();
	if (pid == 0) {
		char *got = xmalloc(total), buf[16384];
		size_t n = 0;
		ssize_t r;

		(void) close(p[1]);
		while ((r = read(p[0], buf, sizeof(buf))) > 0) {
			if (n + (size_t) r <= total)
				memcpy(got + n, buf, (size_t) r);
			n += (size_t) r;
			usleep(2000); /* ~8 MB/s at most: slower than we push */
		}
		_exit(n == total && memcmp(got, data, n) == 0 ? 0 : 1);
	}
	(void) close(p[0]);
	relay_dst_open(&d, p[1], false);
	for (size_t i = 0; i < total; i += 4096)
		relay_push(&src, data + i, 4096);
	all = relay_flush((struct ab_relay_dst *[]){ &d }, 1, -1, 5000, 60000);
	relay_dst_close(&d);
	(void) close(p[1]);
	(void) waitpid(pid, &status, 0);
	TAP_OK(all && src.dropped == 0 && d.stop == AB_RELAY_RUNNING,
	       "a slow reader: the flush waits while it reads, nothing dropped (%" PRIu64 ")",
	       src.dropped);
	TAP_OK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "...and it got every byte, in order");
	free(data);
}

/* The reader goes away: EPIPE stops the relay (no SIGPIPE), the rest is counted. */
static void
test_reader_gone(void)
{
	struct ab_relay_dst d;
	struct ab_relay_src src = { .dst = &d };
	int p[2];

	if (pipe2(p, O_CLOEXEC) < 0) {
		TAP_OK(0, "pipe2: %s", strerror(errno));
		return;
	}
	relay_dst_open(&d, p[1], false);
	(void) close(p[0]);
	relay_push(&src, "hello\n", 6);
	relay_push(&src, "again\n", 6);
	relay_dst_close(&d);
	TAP_OK(d.stop == AB_RELAY_FAILED && d.error == EPIPE && src.dropped == 12,
	       "the reader closed the pipe: stopped (%s), 12 bytes dropped (%" PRIu64 ")",
	       relay_stop_reason(&d), src.dropped);
	(void) close(p[1]);
}

/* A socket that is never read: send(MSG_DONTWAIT) does not wait either. */
static void
test_stalled_socket(void)
{
	const size_t total = 2 * AB_RELAY_QUEUE_MAX;
	char *data = lines(total);
	struct ab_relay_dst d;
	struct ab_relay_src src = { .dst = &d };
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		TAP_OK(0, "socketpair: %s", strerror(errno));
		return;
	}
	relay_dst_open(&d, sv[0], false);
	for (size_t i = 0; i < total; i += 65536)
		relay_push(&src, data + i, 65536);
	(void) relay_flush((struct ab_relay_dst *[]){ &d }, 1, -1, 100, 1000);
	relay_dst_close(&d);
	TAP_OK(d.how == AB_RELAY_SEND && src.dropped > 0 && src.dropped < total,
	       "a socket that is not read: send(MSG_DONTWAIT), %" PRIu64 " bytes dropped",
	       src.dropped);
	(void) close(sv[0]);
	(void) close(sv[1]);
	free(data);
}

/* A terminal destination sanitises through the queue, state kept across pushes. */
static void
test_sanitised_dst(void)
{
	struct ab_relay_dst d;
	struct ab_relay_src a = { .dst = &d }, b = { .dst = &d };
	char got[256];
	size_t n;
	int p[2];

	if (pipe2(p, O_CLOEXEC) < 0) {
		TAP_OK(0, "pipe2: %s", strerror(errno));
		return;
	}
	relay_dst_open(&d, p[1], true);
	relay_push(&a, "x\xc2", 2);
	relay_push(&b, "\x9b", 1); /* another stream: does not complete a's lead byte */
	relay_push(&a,
		   "\x9b"
		   "1m\n",
		   4);
	relay_push(&b, "\xe2\x82", 2);
	relay_src_end(&b); /* b ends inside a sequence */
	relay_dst_close(&d);
	n = drain(p[0], got, sizeof(got) - 1);
	got[n] = '\0';
	TAP_STREQ(got, "x\\x9b\\x9b1m\n\\xe2\\x82",
		  "two streams into one terminal: C1 split across pushes escaped, per stream");
	TAP_OK(a.dropped == 0 && b.dropped == 0, "...nothing dropped");
	(void) close(p[0]);
	(void) close(p[1]);
}

static void
test_same_target(void)
{
	int p[2], q[2], dupd;
	char path[] = "/tmp/test-relay.XXXXXX";
	int f = mkostemp(path, O_CLOEXEC), f2;

	if (pipe2(p, O_CLOEXEC) < 0 || pipe2(q, O_CLOEXEC) < 0 || f < 0) {
		TAP_OK(0, "pipe2/mkostemp: %s", strerror(errno));
		return;
	}
	dupd = fcntl(p[1], F_DUPFD_CLOEXEC, 0);
	f2 = fcntl(f, F_DUPFD_CLOEXEC, 0);
	TAP_OK(relay_same_target(p[1], dupd), "2>&1 on a pipe: one destination");
	TAP_OK(!relay_same_target(p[1], q[1]), "two pipes: two destinations");
	TAP_OK(!relay_same_target(f, f2), "a regular file: never shared (offsets)");
	(void) unlink(path);
	(void) close(f);
	(void) close(f2);
	(void) close(dupd);
	(void) close(p[0]);
	(void) close(p[1]);
	(void) close(q[0]);
	(void) close(q[1]);
}

int
main(void)
{
	size_t l;
	char *o;

	/* a relay that blocks fails here rather than at the meson timeout */
	(void) signal(SIGPIPE, SIG_IGN);
	alarm(60);

	EXPECT("plain text\n\tindented\n", "plain text\n\tindented\n", "text, \\n and \\t pass");
	EXPECT("a\x1b[2Jb\x07\r\x7f", "a\\x1b[2Jb\\x07\\x0d\\x7f", "C0 controls and DEL escaped");
	EXPECT("x\xc2\x9b"
	       "31m",
	       "x\\x9b31m", "C1 CSI (0xc2 0x9b) escaped as \\x9b");
	EXPECT("\xc2\x80\xc2\x9f", "\\x80\\x9f", "the C1 range ends are escaped");
	EXPECT("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xc2\xa0|",
	       "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xc2\xa0|",
	       "well-formed 2, 3 and 4-byte UTF-8 (and U+00A0) pass unchanged");
	EXPECT("\x9b"
	       "31m",
	       "\\x9b31m", "a raw 0x9b (CSI on an 8-bit terminal) is escaped");
	EXPECT("\xc2"
	       "A",
	       "\\xc2A", "a lead byte cut short by ASCII is escaped, the ASCII kept");
	EXPECT("\xc2\x1b", "\\xc2\\x1b", "a lead byte cut short by ESC: both escaped");
	EXPECT("\xc2\xc2\x9b", "\\xc2\\x9b", "a lead byte cut short by another lead");
	EXPECT("\xc0\x9b\xc1\xbf", "\\xc0\\x9b\\xc1\\xbf", "overlong 2-byte forms escaped");
	EXPECT("\xe0\x80\x9b", "\\xe0\\x80\\x9b", "overlong 3-byte C1 escaped");
	EXPECT("\xed\xa0\x80", "\\xed\\xa0\\x80", "a UTF-16 surrogate escaped");
	EXPECT("\xf4\x90\x80\x80\xff", "\\xf4\\x90\\x80\\x80\\xff",
	       "past U+10FFFF and 0xff escaped");

	/* The bug: 0xc2 and 0x9b in two reads each passed the per-read sanitiser. */
	{
		struct ab_ttysan ts = { 0 };
		char a[AB_TTYSAN_ROOM(1)], b[AB_TTYSAN_ROOM(4)];
		size_t la = ttysan_feed(&ts, "\xc2", 1, a), lb;

		TAP_OK(la == 0 && ts.npend == 1, "split C1: the lead byte 0xc2 is held (%zu out)",
		       la);
		lb = ttysan_feed(&ts,
				 "\x9b"
				 "2J",
				 3, b);
		b[lb] = '\0';
		TAP_STREQ(b, "\\x9b2J", "split C1: the next read completes it and it is escaped");
	}
	{
		struct ab_ttysan ts = { 0 };
		char a[AB_TTYSAN_ROOM(2)], b[16];
		size_t la = ttysan_feed(&ts, "\xe2\x82", 2, a);
		size_t lb = ttysan_finish(&ts, b);

		b[lb] = '\0';
		TAP_OK(la == 0, "a stream ending inside a sequence: nothing out before the end");
		TAP_STREQ(b, "\\xe2\\x82", "...and the held bytes come out escaped at the end");
		TAP_OK(ttysan_finish(&ts, b) == 0, "...once");
	}
	{
		/* held state is per stream: two streams do not complete each other's bytes */
		struct ab_ttysan out = { 0 }, err = { 0 };
		char a[AB_TTYSAN_ROOM(1)], b[AB_TTYSAN_ROOM(1)];

		(void) ttysan_feed(&out, "\xc2", 1, a);
		l = ttysan_feed(&err, "\x9b", 1, b);
		b[l] = '\0';
		TAP_STREQ(b, "\\x9b",
			  "a continuation on another stream does not complete a held lead");
	}

	/* Every pair of bytes, whole and split between two reads: the terminal gets only safe
	 * bytes, and the split changes nothing. */
	{
		unsigned bad = 0, differ = 0;

		for (unsigned a = 0; a < 256; a++) {
			for (unsigned b = 0; b < 256; b++) {
				char in[2] = { (char) a, (char) b };
				size_t cut = 1, lw, ls;
				char *w = san(in, 2, &lw);
				char *s = san_split(in, 2, &cut, 1, &ls);

				bad += !tty_safe((unsigned char *) w, lw);
				differ += lw != ls || memcmp(w, s, lw) != 0;
				free(w);
				free(s);
			}
		}
		TAP_OK(bad == 0, "all 65536 byte pairs: the output is safe for a terminal (%u not)",
		       bad);
		TAP_OK(differ == 0,
		       "all 65536 byte pairs: split between two reads, the same output "
		       "(%u differ)",
		       differ);
	}
	/* Random bytes biased towards UTF-8 leads and C1, cut at random places. */
	{
		unsigned bad = 0, differ = 0;
		static const unsigned char pick[] = { 0xc2, 0x9b, 0x80, 0x9f, 0xe2, 0x82,
						      0xac, 0xf0, 0x9f, 0x1b, 'a',  '\n' };

		srand(13);
		for (int round = 0; round < 2000; round++) {
			unsigned char in[64];
			size_t cuts[8], nc = (size_t) (rand() % 8), lw, ls;

			for (size_t i = 0; i < sizeof(in); i++)
				in[i] = rand() % 3 ? pick[rand() % sizeof(pick)]
						   : (unsigned char) rand();
			for (size_t i = 0; i < nc; i++)
				cuts[i] = (size_t) rand() % sizeof(in);
			for (size_t i = 1; i < nc; i++) /* insertion sort: ascending cuts */
				for (size_t k = i; k > 0 && cuts[k - 1] > cuts[k]; k--) {
					size_t t = cuts[k];

					cuts[k] = cuts[k - 1];
					cuts[k - 1] = t;
				}
			o = san((char *) in, sizeof(in), &lw);
			{
				char *s = san_split((char *) in, sizeof(in), cuts, nc, &ls);

				bad += !tty_safe((unsigned char *) s, ls);
				differ += lw != ls || memcmp(o, s, lw) != 0;
				free(s);
			}
			free(o);
		}
		TAP_OK(bad == 0, "2000 random inputs cut at random: safe for a terminal (%u not)",
		       bad);
		TAP_OK(differ == 0, "2000 random inputs: the cuts change nothing (%u differ)",
		       differ);
	}
	test_stalled_pipe();
	test_polled_fallback();
	test_slow_reader();
	test_reader_gone();
	test_stalled_socket();
	test_sanitised_dst();
	test_same_target();
	return tap_done();
}

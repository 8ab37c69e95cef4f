/* relay.h: the script's output on its way to agentbox's own stdout and stderr.
 *
 * The terminal sanitiser (pure): when a destination is a terminal, control sequences are
 * turned into visible \xNN text (T29). It decodes UTF-8 as a stream: a sequence split across
 * two reads is held until the next read completes it, so a C1 control (U+0080-U+009F, bytes
 * 0xc2 0x80-0x9f) cannot slip through by arriving in two pieces. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What the sanitiser holds between two reads of one stream: the start of a UTF-8 sequence
 * whose end has not arrived yet. Zero it to start a stream. */
struct ab_ttysan {
	unsigned char pend[4];
	unsigned char npend; /* bytes held, 0-3 */
	unsigned char need;  /* the held sequence's full length, 2-4 */
};

/* Room ttysan_feed() may need for len input bytes: each byte becomes at most 4, and up to 3
 * held bytes of the previous read come out first. */
#define AB_TTYSAN_ROOM(len) (4 * ((size_t) (len) + 3))

/* Sanitises len bytes of a stream into out (AB_TTYSAN_ROOM(len) bytes) and returns the
 * length written. Escaped as \xNN: C0 controls but \n and \t, DEL, C1 controls (written as
 * their code, e.g. \x9b), and every byte that is not part of well-formed UTF-8 (stray
 * continuation bytes, overlong leads 0xc0/0xc1, 0xf5-0xff, sequences cut short): an 8-bit
 * terminal would read a raw 0x9b as CSI. A sequence that the input ends inside is held in ts
 * and decided by the next call. */
size_t ttysan_feed(struct ab_ttysan *ts, const char *in, size_t len, char *out);

/* End of the stream: the held bytes (an incomplete sequence) come out escaped. out: at least
 * 12 bytes. Returns the length written. */
size_t ttysan_finish(struct ab_ttysan *ts, char *out);

/* The relay: live copies of the script's stdout and stderr, on agentbox's own stdout and
 * stderr. The supervisor's poll loop enforces the limits, so nothing here may wait for
 * whoever reads agentbox's output: every write is non-blocking, and what the reader has not
 * taken yet waits in a queue of at most AB_RELAY_QUEUE_MAX bytes per destination. When the
 * reader falls further behind than that, the destination takes nothing more for the rest of
 * the run (the reader gets a clean prefix of the output, never one with holes); the capture
 * for the report is not affected. Each source counts the captured bytes it could not pass on.
 *
 * A destination is an fd the caller gave us (1 or 2). O_NONBLOCK cannot be set on it: the
 * flag belongs to the open file description, which the caller's shell and its other children
 * share. How each kind is written without waiting (relay_dst_open()):
 *   pipe, FIFO, terminal: a private open file description of the same pipe or terminal,
 *     opened through /proc/self/fd/N with O_NONBLOCK; the caller's stays as it was.
 *   socket: send(MSG_DONTWAIT), per call.
 *   regular file, block device: write(); the kernel does not wait for a reader there.
 *   otherwise (the reopen was refused, other character devices): poll() for POLLOUT, then
 *     write at most PIPE_BUF bytes, which a writable pipe takes whole. That can still wait
 *     if another process fills the pipe between the poll and the write, or on a terminal
 *     whose room is smaller; it is the fallback only. */

#define AB_RELAY_QUEUE_MAX (1u << 20)
#define AB_RELAY_MAX_DST   4 /* relay_flush() takes at most this many */

enum ab_relay_how {
	AB_RELAY_NONBLOCK, /* our own O_NONBLOCK description of the caller's pipe or terminal */
	AB_RELAY_SEND,     /* a socket: send(MSG_DONTWAIT) */
	AB_RELAY_FILE,     /* regular file or block device */
	AB_RELAY_POLLED,   /* poll() for POLLOUT, then at most PIPE_BUF bytes */
};

enum ab_relay_stop {
	AB_RELAY_RUNNING,
	AB_RELAY_BEHIND,  /* the reader fell more than AB_RELAY_QUEUE_MAX behind */
	AB_RELAY_FAILED,  /* a write failed (errno in error: EPIPE, the reader is gone) */
	AB_RELAY_GAVE_UP, /* the bounded flush after the run ended with bytes still queued */
};

struct ab_relay_src;

struct ab_relay_seg {
	struct ab_relay_src *src;
	size_t len; /* bytes in the queue */
	size_t raw; /* the script's bytes they stand for (more when sanitised) */
};

struct ab_relay_dst {
	int caller_fd; /* the caller's fd this stands for: 1 or 2 */
	int fd;        /* where the bytes go; -1: nowhere */
	bool own_fd;   /* fd is our private description: relay_dst_close() closes it */
	enum ab_relay_how how;
	bool sanitize; /* a terminal: sources feed it through the sanitiser */
	enum ab_relay_stop stop;
	int error;
	char *q; /* queued bytes: q[head, head + len) */
	size_t head, len, cap;
	struct ab_relay_seg *seg; /* who the queued bytes belong to: seg[seg_head, nseg) */
	size_t seg_head, nseg, seg_cap;
	size_t seg_done; /* bytes of seg[seg_head] already written */
};

struct ab_relay_src {
	struct ab_relay_dst *dst; /* NULL: no relay (--quiet) */
	struct ab_ttysan ts;
	uint64_t dropped; /* captured bytes that did not reach the destination */
};

/* Sets up d for the caller's fd; sanitize: it is a terminal. Never fails: a destination that
 * cannot be used (a closed fd) drops what it is given (stop FAILED). */
void relay_dst_open(struct ab_relay_dst *d, int fd, bool sanitize);

/* Whether two of the caller's fds lead to the same pipe, terminal or socket (2>&1): then
 * they share one destination, so the order of stdout and stderr is kept. */
bool relay_same_target(int fd1, int fd2);

/* Queues len captured bytes of src and writes what the destination takes now. */
void relay_push(struct ab_relay_src *src, const char *buf, size_t len);

/* The end of src's stream: the sanitiser's held bytes go out. */
void relay_src_end(struct ab_relay_src *src);

/* Writes what the destination takes now, without waiting. */
void relay_write(struct ab_relay_dst *d);

/* The poll events d waits for: POLLOUT while bytes are queued, else 0. */
short relay_events(const struct ab_relay_dst *d);

/* After the run: writes what is queued while the readers take it, and gives up after
 * stall_ms without progress, after max_ms in all, or when a signal other than SIGCHLD arrives
 * on sigfd (-1: none). Returns true when everything went out. */
bool relay_flush(struct ab_relay_dst *const *d, size_t n, int sigfd, int stall_ms, int max_ms);

/* Counts what is still queued as dropped (stop GAVE_UP), frees the queue, closes our fd. */
void relay_dst_close(struct ab_relay_dst *d);

/* For people: why d stopped relaying. */
const char *relay_stop_reason(const struct ab_relay_dst *d);

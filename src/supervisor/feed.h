/* feed.h: the script's stdin streamed from the caller's (issue 25): `agentbox run --stdin -`,
 * a pipe or file on agentbox's stdin by default, a spec's stdin_fd.
 *
 * The caller's stream never enters the sandbox (T7, T29: a terminal could become the
 * script's controlling tty, a file could be reopened for writing, a directory would open the
 * host through /proc/self/fd/0/..). The supervisor reads it (its fd 0) and writes what it read
 * into a pipe of its own whose read end is the sandbox's fd 0. At most FEED_BUF bytes wait in
 * the supervisor (and a pipe's worth in the pipe): a script that does not read makes the
 * caller's writer wait, as any pipeline does. The caller's end of the stream at EOF closes the
 * pipe (the script sees EOF); the script closing its stdin (EPIPE) stops the feed. Nothing
 * waits for the stream: a stdin that never closes never delays the end of the run, which
 * comes when the sandbox's processes are gone. Never blocks: a pipe, FIFO or terminal is read
 * through a private non-blocking description of it (the caller's shares its flags with the
 * caller's shell), a socket with MSG_DONTWAIT, a file as it is; else one read after poll. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FEED_BUF (64u << 10)

struct ab_feed {
	int src;         /* the stream (ours to close when src_own), -1 once at its end */
	bool src_own;    /* src is a description we opened */
	bool src_sock;   /* recv(MSG_DONTWAIT) */
	bool src_polled; /* one read after POLLIN: neither reopened nor non-blocking */
	int dst;         /* the pipe's write end (O_NONBLOCK), -1 once closed */
	char *buf;
	size_t off, len;
	uint64_t fed; /* bytes written into the pipe */
};

/* Sets up the feed from src (borrowed: our fd 0) and returns, in *ret_sandbox_end, the pipe's
 * read end for the sandbox's fd 0 (the caller's to close). Returns 0 or -errno. */
int feed_open(struct ab_feed *f, int src, int *ret_sandbox_end);

/* poll(2) events to ask for: on src (POLLIN while there is room), on dst (POLLOUT while bytes
 * wait). An fd of -1 when there is nothing to ask. */
int feed_src_fd(const struct ab_feed *f);
int feed_dst_fd(const struct ab_feed *f);

/* src is readable / dst writable: move what can be moved now, never blocking. */
void feed_read(struct ab_feed *f);
void feed_write(struct ab_feed *f);

/* Closes what the feed holds. */
void feed_close(struct ab_feed *f);

/* fdutil.h: fd and clock helpers with stated contracts. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sys/types.h>

#include "clock.h"   /* now_ms, now_ns */
#include "fdclose.h" /* fds_close_from, fds_count_from */
#include "fdpass.h"  /* fd_send, fd_recv */

/* Writes all of buf. Returns 0, or -errno (-ENOSPC on a zero-length write). */
int write_all(int fd, const void *buf, size_t len);

/* One write(2) of all len bytes (a kernel interface file: cgroup.procs, a sysctl), retried on
 * EINTR; a short write is -EIO. write(2) only: async-signal-safe. Returns 0 or -errno. */
int write_once(int fd, const void *buf, size_t len);

/* Writes all of buf to fd, which may be non-blocking: waits for POLLOUT while the reader
 * is behind, until deadline_ms (CLOCK_MONOTONIC, now_ms()). Returns 0, or -errno
 * (-ETIMEDOUT past the deadline, -EPIPE when the reader is gone). */
int write_all_deadline(int fd, const void *buf, size_t len, int64_t deadline_ms);

/* Reads until EOF or cap bytes into a NUL-terminated malloc'd buffer.
 * Returns bytes read (>= 0) and sets *ret, or -errno; -EFBIG when the input exceeds cap. */
ssize_t read_all_capped(int fd, size_t cap, char **ret);

/* Reads a small file (e.g. a cgroup or /proc file) relative to dirfd; trailing newline removed.
 * Returns length or -errno. */
ssize_t read_small_file_at(int dirfd, const char *path, char *buf, size_t size);

/* Writes a short string into an existing file relative to dirfd (O_WRONLY, no create).
 * Returns 0 or -errno. */
int write_small_file_at(int dirfd, const char *path, const char *s);

/* Makes fd blocking (on == false) or non-blocking (on == true). Returns 0 or -errno. */
int fd_set_nonblock(int fd, int on);

/* AGENTBOX_TIMING=1: print "agentbox: timing +N.NN ms what" to stderr (for bench/). */
/* Whether timing_mark prints (AGENTBOX_TIMING; cfg_set and cfg() call it). */
void timing_enable(bool on);
void timing_mark(const char *what);

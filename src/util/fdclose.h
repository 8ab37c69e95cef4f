/* fdclose.h: closing every fd from N up, in a child about to exec. libc only, no allocation:
 * agentbox-init (static, built without the core) links it as well as the core. */
#pragma once

/* Closes every fd >= first except keep (keep < first, e.g. -1: none is kept). close_range(2),
 * falling back (Linux < 5.9) to a /proc/self/fd walk, and without /proc to closing each fd up
 * to 65536. Async-signal-safe enough for a forked child: no allocation, no stdio. Returns 0. */
int fds_close_from_except(int first, int keep);

/* The same with up to 8 fds kept (those below first are ignored). Returns 0. */
int fds_close_from_keep(int first, const int *keep, int nkeep);

/* fds_close_from_except(first, -1). Returns 0. */
int fds_close_from(int first);

/* Marks every fd >= first close-on-exec (close_range(2)'s CLOSE_RANGE_CLOEXEC, falling back
 * to the same walks). Returns 0. */
int fds_cloexec_from(int first);

/* How many fds >= first are open (from /proc/self/fd), or -errno. */
int fds_count_from(int first);

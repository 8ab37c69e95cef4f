/* filter.h: the default seccomp syscall filter, compiled with libseccomp and handed to bwrap as a
 * BPF program by fd (bwrap --seccomp FD). Side effects: memfd, optional on-disk cache. */
#pragma once

#include <stdbool.h>

#include "../spec/options.h"
#include "../util/err.h"

/* Returns a readable fd (O_CLOEXEC, offset 0) holding the raw BPF program (struct sock_filter[],
 * length a multiple of 8) for bwrap's --seccomp, or -errno with err set.
 * cache_dirfd: a private directory (0700, owned by the caller; relative to this fd only) where
 * the compiled program is kept, keyed by policy, libseccomp version and agentbox version; -1
 * disables the cache. A cache entry that is not a regular file owned by the caller, or whose
 * length is not a multiple of 8, is ignored and rewritten. */
int filter_program_fd(enum ab_seccomp_policy p, int cache_dirfd, struct ab_err *err);

/* The cache entry's name for policy p (malloc'd). It carries the policy, the rule table's
 * revision, libseccomp's version and agentbox's version. */
char *filter_cache_name(enum ab_seccomp_policy p);

/* Variants of the program (flags of filter_program_fd_flags; each has its cache entry). */
/* AB_FILTER_NO_HIDDEN_MEM: memfd_create, memfd_secret, shmget, msgget, semget: ENOSYS;
 * F_SETPIPE_SZ over AB_FILTER_PIPE_MAX, SO_SNDBUF, SO_SNDBUFFORCE: EPERM */
#define AB_FILTER_NO_HIDDEN_MEM (1u << 0)
#define AB_FILTER_NO_INOTIFY    (1u << 1) /* inotify_init, inotify_init1: EMFILE */

/* AB_FILTER_NO_HIDDEN_MEM: the largest F_SETPIPE_SZ, a pipe's default size */
#define AB_FILTER_PIPE_MAX 65536

int filter_program_fd_flags(enum ab_seccomp_policy p, unsigned flags, int cache_dirfd,
			    struct ab_err *err);
char *filter_cache_name_flags(enum ab_seccomp_policy p, unsigned flags);

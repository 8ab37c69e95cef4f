/* fdpass.h: fds passed over a unix socket (SCM_RIGHTS). libc only: agentbox-init and the
 * proxy link it without the core. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include <sys/types.h>

/* Sends msg (len >= 1 bytes) on the socket with nfds (at most FD_SEND_MAX) fds attached
 * (SCM_RIGHTS), MSG_NOSIGNAL. Returns 0 or -errno. */
#define FD_SEND_MAX 4
int fd_send(int sock, const void *msg, size_t len, const int *fds, size_t nfds);

/* Receives one message of at most len bytes into buf (flags: MSG_DONTWAIT...) and up to
 * max_fds fds (close-on-exec) into fds; *ret_nfds says how many came. Fds past max_fds, and
 * all of them when the kernel cut the control data (*ret_truncated), are closed, never
 * returned. Returns the bytes read (0 at EOF) or -errno. */
ssize_t fd_recv(int sock, void *buf, size_t len, int flags, int *fds, size_t max_fds,
		size_t *ret_nfds, bool *ret_truncated);

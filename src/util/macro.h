/* macro.h: small macros shared by every module. */
#pragma once

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define UNUSED        __attribute__((unused))

static inline void
freep(void *p)
{
	free(*(void **) p);
}

/* No EINTR retry: on Linux the fd is gone either way (systemd close_nointr). */
static inline void
closep(int *fd)
{
	if (*fd >= 0)
		(void) close(*fd);
}

#define cleanup_free __attribute__((cleanup(freep)))
#define cleanup_fd   __attribute__((cleanup(closep)))

#define steal_fd(fdp)             \
	({                        \
		int _fd = *(fdp); \
		*(fdp) = -1;      \
		_fd;              \
	})

#define steal_ptr(pp)                         \
	({                                    \
		__typeof__(*(pp)) _p = *(pp); \
		*(pp) = NULL;                 \
		_p;                           \
	})

/* Retry a syscall that can return EINTR; never used for close(). */
#define RETRY_EINTR(expr)                         \
	({                                        \
		__typeof__(expr) _r;              \
		do                                \
			_r = (expr);              \
		while (_r < 0 && errno == EINTR); \
		_r;                               \
	})

/* landlock.h: the Landlock layer agentbox-init applies before starting the interpreter. */
#pragma once

#include <stdbool.h>

/* Restricts the calling process and its future children: writes only under the given
 * directories (and to the usual character devices: null, zero, full, random, urandom; with
 * ptys also /dev/tty and /dev/pts, only for a caller whose /dev/pts is a private devpts
 * instance: the sandbox), reads and exec everywhere else the mount namespace shows. With net
 * (ABI >= 4): no TCP bind, and TCP connect only to the ports in connect_ports (0-terminated,
 * may be NULL: none). With scope (ABI >= 6): no abstract-socket connections or signals
 * outside the domain. Returns the ABI in force (> 0) or -errno; *ret_what names the failing
 * step. */
int ab_landlock_apply(const char **writable_dirs, bool net, const unsigned *connect_ports,
		      bool scope, bool ptys, const char **ret_what);

/* The kernel's Landlock ABI, 0 when unavailable. */
int ab_landlock_abi(void);

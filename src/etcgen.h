/* etcgen.h: the sandbox's small generated /etc (never the host's /etc wholesale, T2). */
#pragma once

#include <stdbool.h>

#include <sys/types.h>

#include "util/err.h"
#include "util/strv.h"

/* Host /etc entries bound (read-only in the sandbox) at the same path, when they exist. */
extern const char *const etcgen_host_entries[];

/* Fills the empty directory efd (a small tmpfs, so no host path shows in the sandbox's
 * mountinfo): passwd and group naming the
 * sandbox user (uid/gid AB_SANDBOX_*, HOME=/work), hostname, hosts, nsswitch.conf, localtime
 * (UTC), and each host entry that exists bound onto a mount point of its own (the caller must
 * be in its own mount namespace). With net (`agentbox prepare`), the host's resolv.conf and
 * CA certificates are bound too. Files are owned by the caller; when owner != (uid_t) -1 they
 * are chowned to it. Returns 0 or -errno with err set. */
int etcgen_fill(int efd, uid_t owner, gid_t group, bool net, struct ab_err *err);

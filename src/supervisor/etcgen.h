/* etcgen.h: the sandbox's small generated /etc (never the host's /etc wholesale, T2). */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include <sys/types.h>

#include "../util/err.h"
#include "../util/strv.h"
#include "plan.h"

/* The curated host /etc entries (issue 15), bound read-only at the same path when they exist
 * and pass the checks: configuration interpreters and common packages read, nothing secret
 * (docs/design.md "The sandbox's /etc"). */
extern const char *const etcgen_host_entries[];

/* True when agentbox writes /etc/NAME itself (passwd, group, hostname, hosts,
 * nsswitch.conf, timezone, localtime, os-release, resolv.conf). */
bool etcgen_is_generated(const char *name);

/* True when /etc/NAME is one of the curated entries or inside one of them. */
bool etcgen_is_curated(const char *name);

/* Fills the empty directory efd (a small tmpfs, so no host path shows in the sandbox's
 * mountinfo): passwd and group naming the sandbox user (uid/gid AB_SANDBOX_*, HOME=/work),
 * hostname, hosts, nsswitch.conf, timezone and localtime (UTC), os-release (a link into
 * /usr), then each curated host entry that exists, is readable by every host user and holds
 * no name binds_etc_denied() matches, bound from its fd onto a mount point of its own (the
 * caller must be in its own mount namespace); an entry that fails a check is left out and
 * named in *skipped. With net (`agentbox prepare`), the host's resolv.conf too. Then the n_extra
 * binds in extra (--ro-bind /etc/NAME, checked by binds_add_etc; dest is NAME), from their
 * fds. Files are owned by the caller; when owner != (uid_t) -1 they are chowned to it.
 * cache_dirfd (RUNS/.cache, or -1) keeps what the curated trees' checks rest on, so that an
 * unchanged tree is not walked again (etcgen.c "the trees cache"). Returns 0 or -errno with
 * err set. */
int etcgen_fill(int efd, uid_t owner, gid_t group, bool net, const struct ab_bind *extra,
		size_t n_extra, int cache_dirfd, struct strv *skipped, struct ab_err *err);

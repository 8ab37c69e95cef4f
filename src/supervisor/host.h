/* host.h: what this host can do, probed once per process by running things, not by reading
 * version numbers. Pure modules take a const struct ab_host * so tests can make hosts up. */
#pragma once

#include <limits.h>
#include <stdbool.h>

#include <linux/limits.h>
#include <sys/types.h>

#include "../util/err.h"
#include "cgroup/cgroup.h"

struct ab_host {
	char bwrap_path[PATH_MAX]; /* absolute; "" when bwrap was not found */
	bool bwrap_setuid;
	bool bwrap_runs;         /* a minimal sandbox started (user namespaces work) */
	char bwrap_error[512];   /* why the minimal sandbox failed, when it did */
	bool has_disable_userns; /* `bwrap --disable-userns` worked */
	char disable_error[256]; /* bwrap's words when it did not */
	bool proc_mountable;     /* --proc worked (false inside some containers) */
	char proc_error[256];    /* bwrap's words when it did not */
	bool hostname_ok;        /* --hostname worked (a container's seccomp may refuse
				  * sethostname without CAP_SYS_ADMIN) */
	char hostname_error[256];
	bool probe_cached;             /* the facts above came from the probe cache */
	int landlock_abi;              /* 0 when Landlock is unavailable */
	bool apparmor_restrict_userns; /* kernel.apparmor_restrict_unprivileged_userns = 1 */
	bool is_root;                  /* started with euid 0 */
	bool cap_sys_admin;            /* ... and with CAP_SYS_ADMIN (not a container's root) */
	char container[16]; /* "podman", "docker", "kubernetes", "container" (another), or "" */
	bool wsl;           /* Windows Subsystem for Linux (2) */
	struct ab_cg_host cg;
	char init_path[PATH_MAX]; /* agentbox-init helper, absolute */
};

/* Facts found without starting a sandbox: bwrap (AGENTBOX_BWRAP, /usr/bin/bwrap, PATH) and
 * whether it is setuid, agentbox-init, Landlock's ABI, AppArmor's user-namespace sysctl,
 * cgroups. Returns 0. */
int host_probe_paths(struct ab_host *ret, struct ab_err *err);

/* The fixes for a /proc bwrap cannot mount, and for a refused sethostname (in a container:
 * the engine's exact flags; see contrib/container/run-flags). Static text. */
const char *host_proc_fix(const struct ab_host *h);
const char *host_hostname_fix(const struct ab_host *h);

/* The fix for a host where unprivileged user namespaces do not work (bwrap cannot start a
 * sandbox, or the supervisor cannot make its own namespace): under Ubuntu's AppArmor
 * restriction, the shipped profile and the commands that install it. Static text. */
const char *host_userns_fix(const struct ab_host *h);

/* Starts probe sandboxes (as uid/gid when drop: root callers probe as the sandbox user, the
 * way the real run starts bwrap): fills bwrap_runs, has_disable_userns,
 * proc_mountable and bwrap_error. Returns 0, or -ENOENT when there is no bwrap. */
int host_probe_sandbox(struct ab_host *h, bool drop, uid_t uid, gid_t gid);

/* The same, remembered in cache_dirfd/probe-UID (keyed by the bwrap binary, the boot, the
 * uid and the user-namespace sysctls). Only a working result is cached; a run that then
 * fails in bwrap's setup calls host_probe_forget(). */
int host_probe_sandbox_cached(struct ab_host *h, bool drop, uid_t uid, gid_t gid, int cache_dirfd);
void host_probe_forget(int cache_dirfd, uid_t uid);

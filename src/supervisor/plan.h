/* plan.h: everything decided about one run before anything starts. Decided by plan.c (pure)
 * from the options and the facts run.c probed on the host; staging (workspace.c) fills in
 * the host paths of what it mounted; consumed by bwargv.c (pure) and supervise.c. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include <sys/types.h>

#include "../spec/options.h"
#include "../util/err.h"
#include "../util/strv.h"
#include "host.h"

/* Fixed fd numbers in the bwrap process (the child dup2()s onto them before exec). */
#define AB_FD_ARGS       3 /* bwrap --args: the NUL-separated argv below */
#define AB_FD_SECCOMP    4 /* bwrap --seccomp */
#define AB_FD_STATUS     5 /* agentbox-init writes its status records here */
#define AB_FD_INIT       6 /* agentbox-init, exec'd through /proc/self/fd: no mount, no path */
#define AB_FD_MEMWATCH   7 /* agentbox-init hands the memory watchdog its fds here (memwatch.h) */
#define AB_FD_FIRST_FREE 8

/* Paths inside the sandbox. */
#define AB_SANDBOX_WORK       "/work"
#define AB_SANDBOX_INIT       "/proc/self/fd/6"   /* AB_FD_INIT */
#define AB_SANDBOX_SCRIPT_DIR "/.agentbox/script" /* a script outside --workspace DIR */
#define AB_SANDBOX_UID        1000
#define AB_SANDBOX_GID        1000
#define AB_SANDBOX_USER       "agent"
#define AB_SANDBOX_HOSTNAME   "sandbox"
#define AB_SANDBOX_CACHE      "/tmp/.cache" /* XDG_CACHE_HOME: caches stay out of /work */
#define AB_SANDBOX_PTYS       64            /* ptys a run may have open at once (devpts max=) */

struct ab_bind {
	char *src;   /* host path (the kernel's name for fd; after staging, the staged path) */
	char *dest;  /* sandbox path */
	int fd;      /* O_PATH fd of what was checked: the bind is made from it, never from src */
	bool staged; /* src is already a mount of agentbox's own (bound as is) */
};

struct ab_plan {
	enum ab_lang lang;
	char *interp;             /* absolute interpreter path, the same inside the sandbox */
	char *venv;               /* Python virtualenv (bound read-only, activated), or NULL */
	char *venv_given;         /* the virtualenv asked for (--venv, or --env-dir's), or NULL:
				   * interp_resolve checks it and sets venv */
	char *node_modules_given; /* the node_modules asked for (--node-modules, or --env-dir's) */
	char *script_sandbox;     /* e.g. /work/agent_script.py */
	struct strv script_args;  /* after the script path */
	char *work_src;           /* host path bound read-write at /work */
	char *etc_src;            /* generated /etc (host path) */
	struct ab_bind *ro_binds; /* extra read-only binds (interpreter prefix, venv...) */
	size_t n_ro_binds;
	struct ab_bind *etc_binds; /* --ro-bind /etc/NAME: dest is NAME, bound into the /etc */
	size_t n_etc_binds;
	struct strv env;    /* NAME=VALUE, the sandbox's whole environment */
	bool usr_links[4];  /* /bin /sbin /lib /lib64 are usr/ symlinks on this host */
	bool lib32, libx32; /* /lib32, /libx32 exist as usr/ symlinks */
	bool disable_userns;
	bool no_hostname; /* sethostname is refused here (a container's seccomp): no --hostname */
	bool seccomp;
	bool landlock;       /* agentbox-init applies Landlock */
	bool landlock_net;   /* ... with TCP bind/connect denied (ABI >= 4): --net-strict */
	bool landlock_scope; /* ... with abstract-socket and signal scoping (ABI >= 6) */
	char *tmp_src;       /* host paths of agentbox's tmpfs for /tmp and /dev/shm, each */
	char *shm_src;       /* capped in size and inodes (ws_mount_scratch) */
	char *pts_src;       /* ... and of a devpts instance with max=AB_SANDBOX_PTYS */
	bool memwatch;       /* the memory limit is the supervisor's watchdog (memwatch.h) */
	bool share_net;      /* `agentbox prepare` only: agentbox's (private) network */
	char *rw_bind;       /* `agentbox prepare` only: the environment being built (its path
			      * in the sandbox, writable) */
	char *rw_bind_src;   /* ... and what is bound there: agentbox's tmpfs for it */

	/* `agentbox prepare` only, with landlock_net: TCP connect() may still reach this port,
	 * the registry proxy's in the install's own network namespace (netproxy.h). */
	uint16_t landlock_connect_port;

	/* The nsfs inode of the network namespace agentbox started in: agentbox-init refuses
	 * to run the script in it (AB_NETCHECK_ENV; 0: only the lo-only check). */
	unsigned long long netns_not;

	/* A warm slot (warm.h): the interpreter starts with its hook (Node: --require; Python:
	 * PYTHONPATH, in env), and agentbox-init keeps AB_WARM_FD open for it. */
	bool warm;
	char *spec_pythonpath; /* a warm Python slot: PYTHONPATH as the spec set it (the hook
				* restores it), or NULL */
	/* A session (docs/sessions.md): agentbox-init keeps the library's socket at
	 * AB_SESSION_FD for the driver, which Node runs with --expose-internals. */
	bool session;
};

/* Facts about the host the planner is told, found by run.c (plan.c looks at nothing). */
struct ab_plan_facts {
	unsigned long long netns; /* nsfs inode of agentbox's own network namespace, or 0 */
	bool usr_links[4];        /* /bin /sbin /lib /lib64 are symlinks */
	bool lib32, libx32;       /* /lib32, /libx32 are symlinks */
};

/* plan.c: the decisions, pure (no syscalls, no globals): unit-tested in test-plan.c. Each
 * runs at the point of the run where its facts are known, in the order the refusals were
 * always given in. */

/* The helpers a run needs: bwrap (bwrap_env: AGENTBOX_BWRAP as configured, for the message)
 * and agentbox-init. Returns 0, or -ENOENT with err set. */
int plan_helpers(const struct ab_host *h, const char *bwrap_env, struct ab_err *err);

/* The environment the script runs with, once p->lang is known: --venv / --node-modules, or
 * --env-dir's (env_venv / env_nm: prepare_lookup), which must be of the script's language.
 * Sets p->venv_given and p->node_modules_given. Returns 0 or a usage error. */
int plan_environment(struct ab_plan *p, const struct ab_run_opts *o, const char *env_venv,
		     const char *env_nm, struct ab_err *err);

/* The protection layers, from the options and the probed sandbox (h): refuses what was asked
 * for and cannot be applied (-EPERM / -ENOTSUP with err set); sets no_hostname (a default
 * the caller reports as unapplied) before the refusals that follow it. */
int plan_protections(struct ab_plan *p, const struct ab_run_opts *o, const struct ab_host *h,
		     struct ab_err *err);

/* The rest of the sandbox, once the interpreter and the limits are decided (memwatch:
 * agentbox-init hands over the sandbox's /proc, limitplan.h): the host's /usr links, the
 * network namespace to refuse, a warm slot, the script's arguments and the sandbox's whole
 * environment. */
void plan_sandbox(struct ab_plan *p, const struct ab_run_opts *o, const struct ab_plan_facts *f,
		  bool memwatch);

void plan_done(struct ab_plan *p);
void plan_add_ro_bind(struct ab_plan *p, const char *src, const char *dest);
/* The same, with the O_PATH fd the checks ran on (the plan owns it from now on). */
void plan_add_ro_bind_fd(struct ab_plan *p, int fd, const char *src, const char *dest);

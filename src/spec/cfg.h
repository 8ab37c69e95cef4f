/* cfg.h: the settings agentbox takes from its environment, read once. The library reads them
 * into its context (ab_context_new) and hands them to each supervisor in the request; the
 * supervisor sets them here before anything else; no other module reads the environment. */
#pragma once

#include <jansson.h>
#include <stdbool.h>

struct ab_cfg {
	char *runs_dir;        /* AGENTBOX_RUNS_DIR */
	char *cache_dir;       /* AGENTBOX_CACHE_DIR */
	char *bwrap;           /* AGENTBOX_BWRAP */
	char *init;            /* AGENTBOX_INIT */
	char *netproxy;        /* AGENTBOX_NETPROXY */
	char *supervisor;      /* AGENTBOX_SUPERVISOR (the library only) */
	char *cgroup;          /* AGENTBOX_CGROUP */
	char *keep_runs;       /* AGENTBOX_KEEP_RUNS: kept runs retained (count) */
	char *keep_age;        /* AGENTBOX_KEEP_AGE: kept runs retained (age) */
	char *home;            /* HOME */
	char *path;            /* PATH */
	char *xdg_runtime_dir; /* XDG_RUNTIME_DIR (the systemd user scope) */
	char *dbus_address;    /* DBUS_SESSION_BUS_ADDRESS (likewise) */
	/* The operator's policy for requirements (docs/requirements.md) */
	char *requirements;     /* AGENTBOX_REQUIREMENTS: "allow" (the default) or "deny" */
	char *allow_packages;   /* AGENTBOX_ALLOW_PACKAGES: names, comma-separated; unset: any */
	char *max_requirements; /* AGENTBOX_MAX_REQUIREMENTS: at most this many (default 32) */
	char *install_timeout;  /* AGENTBOX_INSTALL_TIMEOUT: an install's timeout (default 10m) */
	char *index_url;        /* AGENTBOX_INDEX_URL: the package index (fixes it: a spec may
				 * not name another) */
	char *find_links;       /* AGENTBOX_FIND_LINKS: a directory of wheels (likewise) */
	char *cache_max;        /* AGENTBOX_CACHE_MAX: the environment cache's size cap (4G) */
	bool timing;            /* AGENTBOX_TIMING=1 */
	bool no_systemd_scope;  /* AGENTBOX_NO_SYSTEMD_SCOPE */
	/* Tests only, never from the environment nor the request: the /proc the host probe
	 * reads sysctls from (e.g. a fake kernel.apparmor_restrict_unprivileged_userns); NULL is
	 * "/proc". Set with cfg_set() by a unit test. */
	char *proc_root;
};

/* cfg()->proc_root, or "/proc". */
const char *cfg_proc_root(void);

/* The settings in force. Until cfg_set() is called (a program that embeds the core directly,
 * like the unit tests), they are read from the environment once, on first use. */
const struct ab_cfg *cfg(void);

/* Replaces the settings in force with a copy of c. */
void cfg_set(const struct ab_cfg *c);

void cfg_from_env(struct ab_cfg *c);
int cfg_from_json(const json_t *j, struct ab_cfg *c); /* unknown keys ignored; -EINVAL */
json_t *cfg_to_json(const struct ab_cfg *c);
void cfg_copy(struct ab_cfg *dst, const struct ab_cfg *src);
void cfg_done(struct ab_cfg *c);

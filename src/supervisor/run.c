#include "run.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/time.h>
#include <sys/wait.h>

#include "../fs/walk/walk.h"
#include "../init/netcheck.h"
#include "../spec/cfg.h"
#include "../spec/units.h"
#include "../util/fdutil.h"
#include "../util/macro.h"
#include "../util/xalloc.h"
#include "../warm/warm.h"
#include "binds.h"
#include "bwargv.h"
#include "cgroup/cgroup.h"
#include "config.h"
#include "cpuclaim.h"
#include "etcgen.h"
#include "filter.h"
#include "hint.h"
#include "host.h"
#include "interp.h"
#include "limitplan.h"
#include "memwatch.h"
#include "netproxy.h"
#include "plan.h"
#include "prepare.h"
#include "runctx.h"
#include "rundir.h"
#include "supervise.h"

#define AB_DEFAULT_SANDBOX_ID 64000

/* ---- identity ---------------------------------------------------------------------- */

/* Looks a user up in /etc/passwd itself (fgetpwent: no NSS modules to load; the sandbox
 * user is a local system account). Returns true and fills uid/gid when found. */
static bool
passwd_lookup(const char *name, uid_t *ret_uid, gid_t *ret_gid)
{
	FILE *f = fopen("/etc/passwd", "re");
	struct passwd *pw;
	bool found = false;

	if (!f)
		return false;
	while ((pw = fgetpwent(f))) {
		if (strcmp(pw->pw_name, name) == 0) {
			*ret_uid = pw->pw_uid;
			*ret_gid = pw->pw_gid;
			found = true;
			break;
		}
	}
	fclose(f);
	return found;
}

int
run_sandbox_user(const char *spec, uid_t *ret_uid, gid_t *ret_gid, struct ab_err *err)
{
	char *end;
	unsigned long u, g;

	if (!spec) {
		if (!passwd_lookup("agentbox", ret_uid, ret_gid)) {
			*ret_uid = AB_DEFAULT_SANDBOX_ID;
			*ret_gid = AB_DEFAULT_SANDBOX_ID;
		}
	} else if (spec[0] >= '0' && spec[0] <= '9') {
		errno = 0;
		u = strtoul(spec, &end, 10);
		g = u;
		if (*end == ':')
			g = strtoul(end + 1, &end, 10);
		if (errno || *end || u > 0x7fffffffUL || g > 0x7fffffffUL)
			return ab_err_usage(
				       err,
				       "invalid --sandbox-user '%s': expected NAME or UID[:GID]",
				       spec),
			       ab_err_fix(err, "name a user, e.g. --sandbox-user agentbox or "
					       "--sandbox-user 64000:64000");
		*ret_uid = (uid_t) u;
		*ret_gid = (gid_t) g;
	} else if (!passwd_lookup(spec, ret_uid, ret_gid)) {
		ab_err_set(err, -ENOENT, "--sandbox-user '%s' is not in /etc/passwd", spec);
		return ab_err_fix(err, "create it (useradd --system %s) or pass a UID", spec);
	}
	if (*ret_uid == 0 || *ret_gid == 0) {
		ab_err_set(err, -EPERM, "the sandbox user must not be root (uid/gid 0)");
		return ab_err_fix(err, "pass --sandbox-user with an unprivileged user");
	}
	return 0;
}

/* ---- the environment ------------------------------------------------------------------ */

static void
build_env(struct run_ctx *c)
{
	struct strv *e = &c->plan.env;
	const char *path = "/usr/local/bin:/usr/bin:/bin";
	cleanup_free char *interp_dir = xstrdup(c->plan.interp);
	char *slash = strrchr(interp_dir, '/');

	*slash = '\0';
	if (strcmp(interp_dir, "/usr/bin") != 0 && strcmp(interp_dir, "/usr/local/bin") != 0)
		strv_pushf(e, "PATH=%s:%s", interp_dir, path);
	else
		strv_pushf(e, "PATH=%s", path);
	if (c->plan.venv)
		strv_pushf(e, "VIRTUAL_ENV=%s", c->plan.venv);
	strv_push(e, "HOME=" AB_SANDBOX_WORK);
	strv_push(e, "TMPDIR=/tmp");
	strv_push(e, "LANG=C.UTF-8");
	strv_push(e, "PYTHONDONTWRITEBYTECODE=1");
	/* Caches go to the sandbox's /tmp, not into the workspace (HOME), so they are not
	 * listed in the report's files or collected: fontconfig's and every XDG-aware library's
	 * (XDG_CACHE_HOME), matplotlib's font list and config (MPLCONFIGDIR), npm's. */
	strv_push(e, "XDG_CACHE_HOME=" AB_SANDBOX_CACHE);
	strv_push(e, "MPLCONFIGDIR=" AB_SANDBOX_CACHE "/matplotlib");
	strv_push(e, "npm_config_cache=" AB_SANDBOX_CACHE "/npm");
	STRV_FOREACH (kv, &c->o->env) {
		/* a Python slot's hook is found through PYTHONPATH; it restores the spec's */
		if (c->plan.warm && c->plan.lang == AB_LANG_PYTHON &&
		    strncmp(*kv, "PYTHONPATH=", 11) == 0) {
			free(c->py_path_orig);
			c->py_path_orig = xstrdup(*kv + 11);
			continue;
		}
		strv_push(e, *kv);
	}
	if (c->plan.warm && c->plan.lang == AB_LANG_PYTHON)
		strv_pushf(e, "PYTHONPATH=%s%s%s", AB_WARM_DIR, c->py_path_orig ? ":" : "",
			   c->py_path_orig ? c->py_path_orig : "");
}

/* ---- the run ---------------------------------------------------------------------------- */

static int
check_protections(struct run_ctx *c, struct ab_err *err)
{
	struct ab_host *h = &c->host;
	struct ab_record *res = c->res;

	if (!h->bwrap_runs) {
		ab_err_set(err, -EPERM, "bubblewrap cannot create a sandbox here: %s",
			   h->bwrap_error[0] ? h->bwrap_error : "unknown error");
		return ab_err_fix(err, "%s", host_userns_fix(h));
	}
	if (!h->proc_mountable) {
		ab_err_set(err, -EPERM, "bubblewrap cannot mount a fresh /proc here%s%s%s%s%s",
			   h->container[0] ? " (in a " : "", h->container,
			   h->container[0] ? " container)" : "", h->proc_error[0] ? ": " : "",
			   h->proc_error);
		return ab_err_fix(err, "%s", host_proc_fix(h));
	}
	if (!h->has_disable_userns && !c->o->without[AB_PROT_DISABLE_USERNS]) {
		ab_err_set(err, -ENOTSUP,
			   "this bwrap cannot disable nested user namespaces "
			   "(--disable-userns)%s%s",
			   h->disable_error[0] ? ": " : "", h->disable_error);
		return ab_err_fix(err, "install bubblewrap >= 0.8, or pass --without "
				       "disable-userns");
	}
	/* The hostname hides the host's name (T35); the UTS namespace is private either way.
	 * A container's seccomp profile may refuse sethostname: run without, and say so. */
	if (!h->hostname_ok) {
		c->plan.no_hostname = true;
		result_default_unapplied(
			res, "hostname",
			"default hostname not applied: the sandbox keeps this %s's "
			"hostname: bwrap cannot set one here (%s) (fix: %s)",
			h->container[0] ? "container" : "host",
			h->hostname_error[0] ? h->hostname_error : "sethostname refused",
			host_hostname_fix(h));
	}
	if (h->landlock_abi <= 0 && !c->o->without[AB_PROT_LANDLOCK]) {
		ab_err_set(err, -ENOTSUP,
			   "this kernel has no Landlock (needs Linux >= 5.13 with "
			   "CONFIG_SECURITY_LANDLOCK and lsm=landlock)");
		return ab_err_fix(err, "boot with landlock in lsm=, or pass --without landlock");
	}
	c->plan.disable_userns = h->has_disable_userns && !c->o->without[AB_PROT_DISABLE_USERNS];
	c->plan.landlock = h->landlock_abi > 0 && !c->o->without[AB_PROT_LANDLOCK];
	/* The sandbox's own loopback is the script's by default: the network namespace keeps it
	 * off the network (agentbox-init checks it: netcheck.h). --net-strict also denies TCP
	 * bind and connect there. */
	if (c->o->net_strict && !c->o->share_net && (!c->plan.landlock || h->landlock_abi < 4)) {
		ab_err_set(err, -ENOTSUP,
			   "--net-strict needs Landlock ABI 4 (Linux >= 6.7) for its TCP rules; "
			   "this host has %s",
			   c->plan.landlock ? "an older ABI" : "no Landlock in force");
		return ab_err_fix(err, "drop --net-strict: the sandbox's network namespace "
				       "already holds nothing but its own loopback");
	}
	c->plan.landlock_net =
		c->plan.landlock && h->landlock_abi >= 4 && c->o->net_strict && !c->o->share_net;
	if (c->o->netproxy && c->plan.landlock && h->landlock_abi >= 4) {
		/* prepare: TCP connect only to the registry proxy, no bind (netproxy.h) */
		c->plan.landlock_net = true;
		c->plan.landlock_connect_port = AB_NETPROXY_PORT;
	}
	c->plan.landlock_scope = c->plan.landlock && h->landlock_abi >= 6;
	c->plan.share_net = c->o->share_net;
	if (c->o->env_path)
		c->plan.rw_bind = xstrdup(c->o->env_path);
	c->plan.seccomp = !c->o->without[AB_PROT_SECCOMP];
	(void) res;
	return 0;
}

int
run_main(struct ab_run_opts *o, struct ab_record *res, struct ab_err *err)
{
	struct run_ctx c = {
		.o = o,
		.res = res,
		.work_fd = -1,
		.ws_dir_fd = -1,
		.collect_fd = -1,
		.script_fd = -1,
		.seccomp_fd = -1,
		.stdin_fd = -1,
		.warm = { .ctl_fd = -1, .hook_fd = -1, .hook_peer = -1 },
	};
	struct ab_outcome oc = { 0 };
	struct ab_cg_usage usage = { 0 };
	struct ab_cpu_claim cpus = { .nlocks = 0 };
	struct ab_memwatch mw;
	bool pin = false;
	struct strv av = { 0 }, cmd = { 0 };
	cleanup_free char *args = NULL;
	cleanup_free char *root_path = NULL;
	cleanup_free char *env_venv = NULL, *env_nm = NULL, *cache_path = NULL;
	cleanup_fd int cache_fd = -1;
	size_t args_len = 0;
	uint64_t keep_count = 0, keep_age_ms = 0;
	struct timespec ts;
	int r;

	memwatch_init(&mw, 0);
	clock_gettime(CLOCK_REALTIME, &ts);
	res->started_unix_ms = ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
	res->script = xstrdup(o->script);
	rundir_init(&c.rd);
	for (int i = 0; i < 4; i++)
		c.cg.dirfd[i] = c.cg.procs_fd[i] = -1;

	timing_mark("start");
	if (o->slot && warm_refusal(o)) {
		r = ab_err_usage(err, "this spec cannot have a warm slot: %s", warm_refusal(o));
		ab_err_fix(err, "run it cold; docs/warm.md says which specs a slot can serve");
		goto out;
	}
	{
		struct stat st;

		/* the namespace the sandbox must not share (netcheck.h AB_NETCHECK_ENV) */
		if (stat("/proc/self/ns/net", &st) == 0)
			c.plan.netns_not = (unsigned long long) st.st_ino;
	}
	r = host_probe_paths(&c.host, err);
	if (r < 0)
		goto out;
	c.owner_uid = (uid_t) -1;
	c.owner_gid = (gid_t) -1;
	if (c.host.is_root) {
		r = run_sandbox_user(o->sandbox_user, &c.sb_uid, &c.sb_gid, err);
		if (r < 0)
			goto out;
		c.drop = true;
		c.owner_uid = c.sb_uid;
		c.owner_gid = c.sb_gid;
		res->sandbox_host_uid = c.sb_uid;
	} else {
		res->sandbox_host_uid = geteuid();
	}

	timing_mark("host paths probed");
	/* Our own mount namespace first: the workspace tmpfs and the /etc tmpfs live there and
	 * die with us, and every caller path is opened here, in the namespace its mounts are
	 * cloned in (open_tree takes only mounts of the caller's own namespace). */
	/* the script first, with the caller's own permissions (in agentbox's user namespace
	 * it would read even the caller's mode-000 files) */
	r = ws_open_script(&c, err);
	if (r < 0)
		goto out;
	r = ws_enter_mntns(&c, err);
	if (r < 0)
		goto out;
	/* unprivileged, the script shares our uid and its quotas: cap what counts per uid */
	if (!c.host.is_root)
		c.inotify_guard = limits_cap_inotify("/proc") == 0 ? 1 : -1;
	/* prepare: the install's own network namespace; the registry proxy is its way out */
	if (o->netproxy) {
		r = netproxy_enter_netns(o->netproxy, err);
		if (r < 0)
			goto out;
	}
	r = interp_detect_lang(ws_script_is_code(&c) ? "" : o->script, c.script_fd, o->lang,
			       &c.plan.lang, err);
	if (r < 0)
		goto out;
	ws_name_script(&c);
	res->lang = c.plan.lang;
	if (o->env_dir) {
		r = prepare_lookup(o->env_dir, NULL, o->python_path, o->node_path, &env_venv,
				   &env_nm, err);
		if (r < 0)
			goto out;
		if (env_venv && c.plan.lang != AB_LANG_PYTHON) {
			r = ab_err_usage(err,
					 "--env-dir '%s' is a Python environment but the script "
					 "is %s",
					 o->env_dir, lang_name(c.plan.lang));
			ab_err_fix(err, "pass a Node environment (agentbox prepare --node), or "
					"--lang python");
			goto out;
		}
		if (env_nm && c.plan.lang != AB_LANG_NODE) {
			r = ab_err_usage(err,
					 "--env-dir '%s' is a Node environment but the script "
					 "is %s",
					 o->env_dir, lang_name(c.plan.lang));
			ab_err_fix(err, "pass a Python environment (agentbox prepare --python), or "
					"--lang node");
			goto out;
		}
		if (env_venv)
			o->venv = env_venv;
		if (env_nm)
			o->node_modules = env_nm;
	}
	r = interp_resolve(o, c.plan.lang, &c.plan, err);
	if (r < 0)
		goto out;
	res->interpreter = xstrdup(c.plan.interp);
	STRV_FOREACH (spec, &o->ro_binds) {
		r = binds_add_user(&c.plan, *spec, &o->allow_binds, err);
		if (r < 0)
			goto out;
	}
	if (!c.host.bwrap_path[0]) {
		if (cfg()->bwrap) {
			r = ab_err_set(err, -ENOENT,
				       "AGENTBOX_BWRAP='%s' is not an executable bwrap",
				       cfg()->bwrap);
			ab_err_fix(err, "unset AGENTBOX_BWRAP or point it at bwrap");
		} else {
			r = ab_err_set(err, -ENOENT, "bubblewrap (bwrap) is not installed");
			ab_err_fix(err, "apt-get install bubblewrap");
		}
		goto out;
	}
	if (!c.host.init_path[0]) {
		r = ab_err_set(err, -ENOENT,
			       "agentbox-init was not found next to agentbox or in %s",
			       AB_LIBEXECDIR);
		ab_err_fix(err, "reinstall agentbox (meson install), or set AGENTBOX_INIT");
		goto out;
	}
	if (o->stdin_path) {
		r = ws_stdin_memfd(o->stdin_path, o->limits[AB_LIM_DISK].value, &c.stdin_fd, err);
		if (r < 0)
			goto out;
	} else if (o->stdin_data) {
		r = ws_stdin_memfd_data(o->stdin_data, o->stdin_data_len,
					o->limits[AB_LIM_DISK].value, &c.stdin_fd, err);
		if (r < 0)
			goto out;
	}

	timing_mark("interpreter resolved");
	/* The runs root and a fresh run directory. */
	root_path = o->runs_dir ? xstrdup(o->runs_dir) : rundir_default_root(geteuid());
	r = rundir_open_root(root_path, c.host.is_root, &c.rd, err);
	if (r < 0)
		goto out;
	if (o->collect_dir) {
		r = ws_open_collect(&c, err);
		if (r < 0)
			goto out;
	}
	r = rundir_retention(&keep_count, &keep_age_ms, err);
	if (r < 0)
		goto out;
	r = rundir_create(&c.rd, !o->rm, err);
	if (r < 0)
		goto out;
	{
		char own[sizeof(AB_RUN_PREFIX) + sizeof(c.rd.suffix)];

		snprintf(own, sizeof(own), AB_RUN_PREFIX "%s", c.rd.suffix);
		(void) rundir_prune(c.rd.root_fd, own, keep_count, keep_age_ms, 32);
	}
	res->run_id = xstrdup(c.rd.suffix);
	res->run_dir = c.rd.path ? xstrdup(c.rd.path) : NULL;
	res->run_dir_kept = c.rd.path != NULL;

	timing_mark("run dir created");
	/* Probe the sandbox as the sandbox user; the result is cached per bwrap and boot. */
	cache_path = xasprintf("%s/.cache", c.rd.root);
	cache_fd = rundir_open_private(c.rd.root_fd, ".cache", cache_path, err);
	if (cache_fd < 0) {
		r = cache_fd;
		goto out;
	}
	(void) host_probe_sandbox_cached(&c.host, c.drop, c.sb_uid, c.sb_gid, cache_fd);
	r = check_protections(&c, err);
	if (r < 0)
		goto out;
	if (c.host.cg.kind != AB_CG_NONE && !o->without[AB_PROT_CGROUP])
		(void) cg_sweep_stale(&c.host.cg, "/proc");

	timing_mark("sandbox probed");
	r = limits_plan(o, &c.host, o->workspace == NULL, !c.host.is_root || c.root_userns, &c.lp,
			res, err);
	if (r < 0)
		goto out;
	/* agentbox-init hands over the sandbox's /proc for the watchdog, or the socket guard */
	c.plan.memwatch = c.lp.memwatch || c.lp.sockguard;

	if (c.plan.seccomp) {
		c.seccomp_fd = filter_program_fd_flags(
			o->seccomp_policy,
			(c.lp.memwatch ? AB_FILTER_NO_HIDDEN_MEM : 0) |
				(c.inotify_guard < 0 ? AB_FILTER_NO_INOTIFY : 0),
			cache_fd, err);
		if (c.seccomp_fd < 0) {
			r = c.seccomp_fd;
			ab_err_fix(err, "report a bug, or pass --without seccomp");
			goto out;
		}
	}

	timing_mark("seccomp ready");
	if (o->workspace) {
		r = ws_open_workspace(&c, c.rd.root_fd, err);
		if (r < 0)
			goto out;
		r = ws_place_script(&c, err);
		if (r < 0)
			goto out;
		r = ws_mount_dir(&c, err);
		if (r < 0)
			goto out;
		r = ws_hide_token_files(&c, err);
		if (r < 0)
			goto out;
		r = ws_snapshot_workspace(&c, err);
		if (r < 0)
			goto out;
	} else {
		r = ws_mount_workspace(&c, err);
		if (r < 0)
			goto out;
		/* a slot's workspace stays empty until a run takes it (slot.c) */
		r = o->slot ? 0 : ws_copy_inputs(&c, err);
		if (r < 0)
			goto out;
		r = o->slot ? 0 : ws_snapshot_workspace(&c, err);
		if (r < 0)
			goto out;
		c.plan.script_sandbox = xasprintf(AB_SANDBOX_WORK "/%s", c.script_name);
		if (c.rd.path)
			res->workspace = xasprintf("%s/work", c.rd.path);
	}
	c.plan.work_src = xstrdup(c.rd.mnt_work);
	timing_mark("workspace ready");
	/* a slot's interpreter starts without them: the run hands its own over (slot.c) */
	STRV_FOREACH (a, &o->script_args)
		if (!o->slot)
			strv_push(&c.plan.script_args, *a);

	r = ws_mount_etc(&c, err);
	if (r < 0)
		goto out;
	r = ws_mount_scratch(&c, err);
	if (r < 0)
		goto out;
	if (o->env_path) {
		r = ws_mount_env(&c, err);
		if (r < 0)
			goto out;
	}
	{
		struct stat st;

		c.plan.usr_links[0] = lstat("/bin", &st) == 0 && S_ISLNK(st.st_mode);
		c.plan.usr_links[1] = lstat("/sbin", &st) == 0 && S_ISLNK(st.st_mode);
		c.plan.usr_links[2] = lstat("/lib", &st) == 0 && S_ISLNK(st.st_mode);
		c.plan.usr_links[3] = lstat("/lib64", &st) == 0 && S_ISLNK(st.st_mode);
		c.plan.lib32 = lstat("/lib32", &st) == 0 && S_ISLNK(st.st_mode);
		c.plan.libx32 = lstat("/libx32", &st) == 0 && S_ISLNK(st.st_mode);
	}
	c.plan.warm = o->slot != NULL;
	build_env(&c);
	r = ws_stage_ro_binds(&c, err);
	if (r < 0)
		goto out;

	timing_mark("etc generated");
	bwargv_build(&av, &cmd, &c.plan);
	if (cmd.n > 250) {
		r = ab_err_usage(err, "too many script arguments (at most 240)");
		ab_err_fix(err, "pass the rest in a file (--input) or on stdin");
		goto out;
	}
	if (o->dry_run) {
		printf("%s\n", c.host.bwrap_path);
		STRV_FOREACH (w, &av) {
			char *q = bwargv_shell_quote(*w);

			printf("%s\n", q);
			free(q);
		}
		STRV_FOREACH (w, &cmd) {
			char *q = bwargv_shell_quote(*w);

			printf("%s\n", q);
			free(q);
		}
		fflush(stdout);
		res->status = AB_STATUS_DRY_RUN;
		ws_cleanup(&c);
		if (c.rd.path)
			(void) walk_remove_tree(c.rd.root_fd, strrchr(c.rd.path, '/') + 1, NULL);
		res->run_dir_kept = false;
		r = 0;
		goto out;
	}
	args = bwargv_serialize(&av, &args_len);

	timing_mark("argv built");
	if (c.lp.use_cgroup) {
		char name[128];

		cg_run_name(c.rd.suffix, name, sizeof(name));
		r = cg_create(&c.host.cg, name, &c.lp.cg, &c.cg, err);
		if (r < 0) {
			ab_err_fix(err, "%s",
				   "check cgroup delegation (agentbox doctor), or pass "
				   "--without cgroup");
			goto out;
		}
		c.cg_made = true;
	}

	timing_mark("cgroup created");
	if (c.lp.cpu_affinity > 0) {
		r = cpu_claim(c.lp.cpu_affinity, cache_fd, &cpus);
		if (r < 0) {
			r = ab_err_set(err, r, "choose cores for --cpus: %s", strerror(-r));
			goto out;
		}
		pin = r > 0;
	}
	if (c.lp.memwatch) {
		/* the workspace and prepare's environment are tmpfs of ours: they count too
		 * (/tmp and /dev/shm come from agentbox-init) */
		memwatch_init(&mw, c.lp.memwatch_bytes);
		if (c.drop)
			mw.read_uid = c.sb_uid;
		r = c.tmpfs_mounted ? memwatch_add_tmpfs(&mw, c.work_fd) : 0;
		if (r == 0 && o->env_path && c.rd.mnt_env) {
			cleanup_fd int efd =
				open(c.rd.mnt_env, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

			r = efd < 0 ? -errno : memwatch_add_tmpfs(&mw, efd);
		}
		if (r < 0) {
			r = ab_err_set(err, r, "memory watchdog: cannot count the workspace: %s",
				       strerror(-r));
			goto out;
		}
	} else if (c.lp.sockguard && c.cg_made && c.cg.dirfd[0] >= 0) { /* v1: memory */
		memwatch_init(&mw, c.lp.memwatch_bytes);
		r = memwatch_set_cgroup(&mw, c.cg.dirfd[0]);
		if (r < 0) {
			r = ab_err_set(err, r, "memory: cannot watch the run's cgroup: %s",
				       strerror(-r));
			goto out;
		}
	} else if (c.lp.sockguard) {
		c.lp.sockguard = false; /* no memory cgroup made after all (--without cgroup) */
	}
	{
		struct ab_spawn sp = {
			.bwrap_path = c.host.bwrap_path,
			.args_buf = args,
			.args_len = args_len,
			.cmd = strv_array(&cmd),
			.seccomp_fd = c.seccomp_fd,
			.init_path = c.host.init_path,
			.stdin_fd = c.stdin_fd,
			.stdin_feed = o->stdin_fd >= 0,
			.cg = c.cg_made ? &c.cg : NULL,
			.drop = c.drop,
			.drop_uid = c.sb_uid,
			.drop_gid = c.sb_gid,
			.lp = &c.lp,
			.cpus = pin ? &cpus.set : NULL,
			.relay = !o->quiet,
			.relay_to_stderr = o->relay_to_stderr,
			.sanitize_out = isatty(STDOUT_FILENO),
			.sanitize_err = isatty(STDERR_FILENO),
			.inline_bytes = (size_t) o->inline_output,
			.stream_dirfd = c.rd.fd,
			.output_truncate = o->output_truncate,
			.progress = o->progress,
			.watch_fd = o->watch_fd,
			.memwatch = c.lp.memwatch || c.lp.sockguard ? &mw : NULL,
		};

		if (o->slot) {
			r = slot_start(&c, &sp, err);
			if (r < 0)
				goto out;
		}
		clock_gettime(CLOCK_REALTIME, &c.started_rt);
		r = supervise_run(&sp, res, &oc, err);
		cpu_claim_release(&cpus); /* every process of the run is gone */
		if (o->slot) {
			o->slot->state = (int) c.warm.state;
			snprintf(o->slot->failure, sizeof(o->slot->failure), "%s", c.warm.failure);
			if (c.warm.state == AB_WARM_CLAIMED)
				o = c.o; /* the run's own spec from here on (slot.c) */
		}
		if (r < 0)
			goto out;
	}
	if (o->slot && c.warm.state != AB_WARM_CLAIMED) {
		/* no run took the slot: nothing to report, nothing to keep */
		res->run_dir_kept = false;
		o->rm = true;
		r = 0;
		goto out;
	}
	timing_mark("sandbox finished");
	if (c.cg_made)
		(void) cg_read_usage(&c.cg, &usage);
	if (o->slot)
		slot_settle(&c, &oc, c.cg_made ? &usage : NULL);

	if (!oc.started) {
		r = ab_err_set(err, -oc.exec_errno, "could not start bwrap: %s: %s", oc.exec_what,
			       strerror(oc.exec_errno));
		goto out;
	}
	if (oc.init_setup_failed &&
	    strncmp(oc.init_text, AB_NETCHECK_PREFIX, strlen(AB_NETCHECK_PREFIX)) == 0) {
		r = ab_err_set(err, -oc.init_errno,
			       "the sandbox is not isolated from the network: %s", oc.init_text);
		ab_err_fix(err, "nothing ran; check that AGENTBOX_BWRAP is a real bwrap that "
				"unshares the network (agentbox doctor), and report a bug");
		goto out;
	}
	if (oc.init_setup_failed) {
		r = ab_err_set(err, -oc.init_errno, "sandbox hardening failed: %s: %s",
			       oc.init_text, strerror(oc.init_errno));
		ab_err_fix(err,
			   "run `agentbox doctor`; opt out of the failing layer with --without");
		goto out;
	}
	if (!oc.init_started && !oc.timed_out && !oc.interrupted_by) {
		/* bwrap failed before it started our PID 1: its message is on stderr */
		char msg[400];
		size_t n = res->err.len < sizeof(msg) - 1 ? res->err.len : sizeof(msg) - 1;

		memcpy(msg, res->err.buf ? res->err.buf : "", n);
		msg[n] = '\0';
		while (n > 0 && msg[n - 1] == '\n')
			msg[--n] = '\0';
		r = ab_err_set(err, -EIO, "bubblewrap failed to set up the sandbox: %s",
			       n ? msg : "no message");
		host_probe_forget(cache_fd, c.drop ? c.sb_uid : geteuid());
		ab_err_fix(err, "run `agentbox doctor`");
		goto out;
	}
	if (oc.memwatch_error[0] && !oc.timed_out && !oc.interrupted_by) {
		/* never a run with a memory limit nobody watched */
		r = ab_err_set(err, -EIO, "the memory watchdog could not watch the sandbox: %s",
			       oc.memwatch_error);
		ab_err_fix(err, "run `agentbox doctor`; run as root or with a delegated cgroup v2 "
				"so the kernel enforces --memory");
		goto out;
	}
	outcome_interpret(&c, &oc, c.cg_made ? &usage : NULL);
	if (o->slot)
		slot_settle_cpu(&c);
	if (c.lp.memwatch && mw.attached) {
		/* a watchdog that never saw the script measured agentbox-init alone: null, not
		 * that figure (issue 25) */
		res->usage.memory_peak_bytes = mw.saw_script ? (int64_t) mw.peak : -1;
		if (!c.cg_made)
			res->usage.tasks_peak = (int64_t) mw.tasks_peak;
	} else if (c.lp.sockguard && mw.attached &&
		   (int64_t) mw.peak > res->usage.memory_peak_bytes) {
		res->usage.memory_peak_bytes = (int64_t) mw.peak; /* the cgroup's plus sockets */
	}
	if (oc.timed_out || oc.output_limited || oc.cpu_time_limited || oc.interrupted_by ||
	    oc.mem_limited)
		res->kill_to_reaped_ms = oc.kill_to_reaped_ms;
	if (oc.init_exec_failed)
		res->exit_code = oc.init_errno == ENOENT ? AB_EXIT_NOT_FOUND : AB_EXIT_CANNOT_EXEC;
	outcome_record_protections(&c, &oc);
	/* issue 25: a script that failed on a file or module lying next to it on the host */
	if (res->status == AB_STATUS_EXITED && res->exit_code > 0 &&
	    !(o->workspace && c.script_rel)) {
		size_t n = 0;
		cleanup_free char *t = stream_inline_text(&res->err, &n);

		res->hint = hint_for_run(o, t, n);
	}

	timing_mark("interpreted");
	r = ws_collect(&c, err);
	if (r < 0)
		goto out;
	if (o->env_path && res->status == AB_STATUS_EXITED && res->exit_code == 0) {
		r = ws_env_copy_out(&c, err);
		if (r < 0)
			goto out;
		res->env_copied = true;
	}
	r = 0;

	timing_mark("collected");
out:
	cpu_claim_release(&cpus);
	memwatch_done(&mw);
	if (r < 0 && res->n_prot == 0 && c.plan.interp)
		outcome_record_protections(&c, NULL);
	ws_cleanup(&c);
	if (o->rm && c.rd.path && c.rd.root_fd >= 0) {
		timing_mark("removing the run directory");
		if (walk_remove_tree(c.rd.root_fd, strrchr(c.rd.path, '/') + 1, NULL) == 0)
			res->run_dir_kept = false;
		timing_mark("run directory removed");
	}
	if (c.rd.path && res->run_dir_kept && o->workspace == NULL && !res->workspace)
		res->workspace = xasprintf("%s/work", c.rd.path);
	if (res->run_dir_kept && c.rd.fd >= 0)
		res->run_dir_fd = steal_fd(&c.rd.fd);
	timing_mark("cleaned up");
	strv_done(&av);
	strv_done(&cmd);
	plan_done(&c.plan);
	rundir_done(&c.rd);
	if (c.script_fd >= 0)
		(void) close(c.script_fd);
	if (c.seccomp_fd >= 0)
		(void) close(c.seccomp_fd);
	if (c.stdin_fd >= 0)
		(void) close(c.stdin_fd);
	if (c.work_fd >= 0)
		(void) close(c.work_fd);
	if (c.ws_dir_fd >= 0)
		(void) close(c.ws_dir_fd);
	if (c.collect_fd >= 0)
		(void) close(c.collect_fd);
	free(c.script_name);
	free(c.strip_keep);
	free(c.script_rel);
	slot_done(&c);
	return r;
}

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
 * user is a local system account). Read whole first: fgetpwent on a file seeks before
 * every entry, two system calls a line on every root run. Returns true and fills uid/gid
 * when found. */
static bool
passwd_lookup(const char *name, uid_t *ret_uid, gid_t *ret_gid)
{
	cleanup_fd int fd = open("/etc/passwd", O_RDONLY | O_CLOEXEC);
	cleanup_free char *text = NULL;
	ssize_t n = fd < 0 ? -1 : read_all_capped(fd, 1 << 20, &text);
	FILE *f = n > 0 ? fmemopen(text, (size_t) n, "r") : NULL;
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

/* ---- the run ---------------------------------------------------------------------------- */

/* One run as run_main tells it: the context the other modules share (runctx.h), and what only
 * the story holds from one phase to the next. */
struct run {
	struct run_ctx c;
	/* the options the story reads: the caller's, then, once a run took the slot, the
	 * run's own (slot.c) */
	struct ab_run_opts *o;
	struct ab_plan_facts facts;
	int cache_fd;        /* RUNS/.cache: the probe cache, seccomp programs, core claims */
	struct strv av, cmd; /* bwrap's options (through --args) and its command (bwargv.h) */
	struct ab_cpu_claim cpus;
	bool pin; /* cpus holds the cores for --cpus */
	struct ab_memwatch mw;
	struct ab_outcome oc;
	struct ab_cg_usage usage;
	bool unclaimed; /* a slot no run took: nothing to report, nothing to keep */
	/* bwrap started before the staging (run_prestart): its spawn, its command as it was
	 * started with, the handle until supervise_continue or supervise_abandon */
	struct ab_spawn sp;
	char *head; /* bwargv_head, serialized: written before bwrap started */
	size_t head_len;
	struct strv early_cmd;
	struct ab_sup *early;
};

/* A phase returns 0 to go on, RUN_COMPLETE when the run is complete before the sandbox (a dry
 * run) or without one (a slot no run took), or -errno with err set. */
#define RUN_COMPLETE 1

/* What the planner is told about this host: the namespace the sandbox must not share
 * (netcheck.h AB_NETCHECK_ENV), and which of /bin /sbin /lib /lib64 /lib32 /libx32 are
 * symlinks (into /usr). */
static void
probe_plan_facts(struct ab_plan_facts *f)
{
	static const char *const links[] = { "/bin", "/sbin", "/lib", "/lib64" };
	struct stat st;

	if (stat("/proc/self/ns/net", &st) == 0)
		f->netns = (unsigned long long) st.st_ino;
	for (size_t i = 0; i < ARRAY_SIZE(links); i++)
		f->usr_links[i] = lstat(links[i], &st) == 0 && S_ISLNK(st.st_mode);
	f->lib32 = lstat("/lib32", &st) == 0 && S_ISLNK(st.st_mode);
	f->libx32 = lstat("/libx32", &st) == 0 && S_ISLNK(st.st_mode);
}

static void
run_init(struct run *run, struct ab_run_opts *o, struct ab_record *res)
{
	struct timespec ts;

	*run = (struct run) {
		.c = {
			.o = o,
			.res = res,
			.work_fd = -1,
			.cache_fd = -1,
			.ws_dir_fd = -1,
			.collect_fd = -1,
			.script_fd = -1,
			.seccomp_fd = -1,
			.stdin_fd = -1,
			.warm = { .ctl_fd = -1, .hook_fd = -1, .hook_peer = -1 },
		},
		.o = o,
		.cache_fd = -1,
		.cpus = { .nlocks = 0 },
	};
	memwatch_init(&run->mw, 0);
	clock_gettime(CLOCK_REALTIME, &ts);
	res->started_unix_ms = ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
	res->script = xstrdup(o->script);
	rundir_init(&run->c.rd);
	for (int i = 0; i < 4; i++)
		run->c.cg.dirfd[i] = run->c.cg.procs_fd[i] = -1;
}

static void
close_fd(int *fd)
{
	if (*fd >= 0)
		(void) close(*fd);
	*fd = -1;
}

/* Frees what the run held; what it made on the host is run_finish's. */
static void
run_done(struct run *run)
{
	struct run_ctx *c = &run->c;

	strv_done(&run->av);
	strv_done(&run->cmd);
	strv_done(&run->early_cmd);
	free(run->head);
	plan_done(&c->plan);
	rundir_done(&c->rd);
	close_fd(&c->script_fd);
	close_fd(&c->seccomp_fd);
	close_fd(&c->stdin_fd);
	close_fd(&c->work_fd);
	close_fd(&c->ws_dir_fd);
	close_fd(&c->collect_fd);
	free(c->script_name);
	free(c->strip_keep);
	free(c->script_rel);
	slot_done(c);
	close_fd(&run->cache_fd);
}

#define cleanup_run __attribute__((cleanup(run_done)))

/* Refusals that need nothing else, the host's helpers and facts, and who the sandbox runs
 * as. */
static int
run_probe_host(struct run *run, struct ab_err *err)
{
	struct run_ctx *c = &run->c;
	const struct ab_run_opts *o = run->o;
	int r;

	if (o->slot && warm_refusal(o)) {
		r = ab_err_usage(err, "this spec cannot have a warm slot: %s", warm_refusal(o));
		ab_err_fix(err, "run it cold; docs/warm.md says which specs a slot can serve");
		return r;
	}
	probe_plan_facts(&run->facts);
	r = host_probe_paths(&c->host, err);
	if (r < 0)
		return r;
	c->owner_uid = (uid_t) -1;
	c->owner_gid = (gid_t) -1;
	if (c->host.is_root) {
		r = run_sandbox_user(o->sandbox_user, &c->sb_uid, &c->sb_gid, err);
		if (r < 0)
			return r;
		c->drop = true;
		c->owner_uid = c->sb_uid;
		c->owner_gid = c->sb_gid;
		c->res->sandbox_host_uid = c->sb_uid;
	} else {
		c->res->sandbox_host_uid = geteuid();
	}
	timing_mark("host paths probed");
	return 0;
}

/* The script first, with the caller's own permissions (in agentbox's user namespace it would
 * read even the caller's mode-000 files); then our own mount namespace: the workspace tmpfs
 * and the /etc tmpfs live there and die with us, and every caller path is opened here, in
 * the namespace its mounts are cloned in (open_tree takes only mounts of the caller's own
 * namespace). */
static int
run_enter(struct run *run, struct ab_err *err)
{
	struct run_ctx *c = &run->c;
	int r;

	r = ws_open_script(c, err);
	if (r < 0)
		return r;
	r = ws_enter_mntns(c, err);
	if (r < 0)
		return r;
	/* unprivileged, the script shares our uid and its quotas: cap what counts per uid */
	if (!c->host.is_root)
		c->inotify_guard = limits_cap_inotify("/proc") == 0 ? 1 : -1;
	/* prepare: the install's own network namespace; the registry proxy is its way out */
	if (run->o->netproxy) {
		r = netproxy_enter_netns(run->o->netproxy, err);
		if (r < 0)
			return r;
	}
	return 0;
}

/* The script's language, its environment and interpreter, the caller's binds; the helpers the
 * run needs; stdin. */
static int
run_resolve(struct run *run, struct ab_err *err)
{
	struct run_ctx *c = &run->c;
	const struct ab_run_opts *o = run->o;
	cleanup_free char *env_venv = NULL, *env_nm = NULL;
	int r;

	r = interp_detect_lang(ws_script_is_code(c) ? "" : o->script, c->script_fd, o->lang,
			       &c->plan.lang, err);
	if (r < 0)
		return r;
	ws_name_script(c);
	/* a fresh workspace's script is /work/NAME (its bwrap may start before the staging:
	 * run_prestart); --workspace DIR's and a session's are placed by the staging */
	if (!o->workspace && !o->session)
		c->plan.script_sandbox = xasprintf(AB_SANDBOX_WORK "/%s", c->script_name);
	c->res->lang = c->plan.lang;
	if (o->env_dir) {
		r = prepare_lookup(o->env_dir, NULL, o->python_path, o->node_path, &env_venv,
				   &env_nm, err);
		if (r < 0)
			return r;
	}
	r = plan_environment(&c->plan, o, env_venv, env_nm, err);
	if (r < 0)
		return r;
	r = interp_resolve(o, c->plan.lang, &c->plan, err);
	if (r < 0)
		return r;
	c->res->interpreter = xstrdup(c->plan.interp);
	STRV_FOREACH (spec, &o->ro_binds) {
		r = binds_add_user(&c->plan, *spec, &o->allow_binds, err);
		if (r < 0)
			return r;
	}
	r = plan_helpers(&c->host, cfg()->bwrap, err);
	if (r < 0)
		return r;
	if (o->stdin_path)
		r = ws_stdin_memfd(o->stdin_path, o->limits[AB_LIM_DISK].value, &c->stdin_fd, err);
	else if (o->stdin_data)
		r = ws_stdin_memfd_data(o->stdin_data, o->stdin_data_len,
					o->limits[AB_LIM_DISK].value, &c->stdin_fd, err);
	if (r < 0)
		return r;
	timing_mark("interpreter resolved");
	return 0;
}

/* The runs root, --collect's directory, a fresh run directory; old runs pruned. */
static int
run_open_dir(struct run *run, struct ab_err *err)
{
	struct run_ctx *c = &run->c;
	const struct ab_run_opts *o = run->o;
	cleanup_free char *root_path =
		o->runs_dir ? xstrdup(o->runs_dir) : rundir_default_root(geteuid());
	char own[sizeof(AB_RUN_PREFIX) + sizeof(c->rd.suffix)];
	uint64_t keep_count = 0, keep_age_ms = 0;
	int r;

	r = rundir_open_root(root_path, c->host.is_root, &c->rd, err);
	if (r < 0)
		return r;
	if (o->collect_dir) {
		r = ws_open_collect(c, err);
		if (r < 0)
			return r;
	}
	r = rundir_retention(&keep_count, &keep_age_ms, err);
	if (r < 0)
		return r;
	r = rundir_create(&c->rd, !o->rm, err);
	if (r < 0)
		return r;
	snprintf(own, sizeof(own), AB_RUN_PREFIX "%s", c->rd.suffix);
	(void) rundir_prune(c->rd.root_fd, own, keep_count, keep_age_ms, 32);
	c->res->run_id = xstrdup(c->rd.suffix);
	c->res->run_dir = c->rd.path ? xstrdup(c->rd.path) : NULL;
	c->res->run_dir_kept = c->rd.path != NULL;
	timing_mark("run dir created");
	return 0;
}

/* The protection layers for the probed sandbox; a default this host cannot apply is a
 * warning in the report. */
static int
plan_protections_here(struct run_ctx *c, struct ab_err *err)
{
	const struct ab_host *h = &c->host;
	int r = plan_protections(&c->plan, c->o, h, err);

	if (c->plan.no_hostname)
		result_default_unapplied(
			c->res, "hostname",
			"default hostname not applied: the sandbox keeps this %s's "
			"hostname: bwrap cannot set one here (%s) (fix: %s)",
			h->container[0] ? "container" : "host",
			h->hostname_error[0] ? h->hostname_error : "sethostname refused",
			host_hostname_fix(h));
	return r;
}

/* The sandbox probed as the sandbox user (cached per bwrap and boot), and the rest of the
 * plan for it: protections, limits, the seccomp program, the sandbox itself. */
static int
run_plan(struct run *run, struct ab_err *err)
{
	struct run_ctx *c = &run->c;
	const struct ab_run_opts *o = run->o;
	cleanup_free char *cache_path = xasprintf("%s/.cache", c->rd.root);
	int r;

	run->cache_fd = rundir_open_private(c->rd.root_fd, ".cache", cache_path, err);
	if (run->cache_fd < 0)
		return run->cache_fd;
	c->cache_fd = run->cache_fd;
	(void) host_probe_sandbox_cached(&c->host, c->drop, c->sb_uid, c->sb_gid, run->cache_fd);
	r = plan_protections_here(c, err);
	if (r < 0)
		return r;
	if (c->host.cg.kind != AB_CG_NONE && !o->without[AB_PROT_CGROUP])
		(void) cg_sweep_stale(&c->host.cg, "/proc");
	timing_mark("sandbox probed");
	r = limits_plan(o, &c->host, o->workspace == NULL, !c->host.is_root || c->root_userns,
			&c->lp, c->res, err);
	if (r < 0)
		return r;
	if (c->plan.seccomp) {
		c->seccomp_fd = filter_program_fd_flags(
			o->seccomp_policy,
			(c->lp.memwatch ? AB_FILTER_NO_HIDDEN_MEM : 0) |
				(c->inotify_guard < 0 ? AB_FILTER_NO_INOTIFY : 0),
			run->cache_fd, err);
		if (c->seccomp_fd < 0) {
			r = c->seccomp_fd;
			ab_err_fix(err, "report a bug, or pass --without seccomp");
			return r;
		}
	}
	timing_mark("seccomp ready");
	/* agentbox-init hands over the sandbox's /proc for the watchdog, or the socket guard */
	plan_sandbox(&c->plan, o, &run->facts, c->lp.memwatch || c->lp.sockguard);
	return 0;
}

/* --workspace DIR: the script placed in it, mounted as it is with its token files covered,
 * and listed as the script will find it. */
static int
stage_dir_workspace(struct run_ctx *c, struct ab_err *err)
{
	int r = ws_open_workspace(c, c->rd.root_fd, err);

	if (r >= 0)
		r = ws_place_script(c, err);
	if (r >= 0)
		r = ws_mount_dir(c, err);
	if (r >= 0)
		r = ws_hide_token_files(c, err);
	if (r >= 0)
		r = ws_snapshot_workspace(c, err);
	return r;
}

/* A fresh tmpfs workspace with the script and the inputs (a slot's stays empty until a run
 * takes it: slot.c). */
static int
stage_fresh_workspace(struct run_ctx *c, struct ab_err *err)
{
	int r = ws_mount_workspace(c, err);

	if (r >= 0 && !c->o->slot)
		r = ws_copy_inputs(c, err);
	if (r >= 0 && !c->o->slot)
		r = ws_snapshot_workspace(c, err);
	if (r >= 0 && c->o->session)
		r = ws_place_script(c, err); /* the driver, read-only outside /work */
	if (r < 0)
		return r;
	if (c->rd.path)
		c->res->workspace = xasprintf("%s/work", c->rd.path);
	return 0;
}

/* bwrap takes its command from its real argv (bwargv.h). */
static int
cmd_fits(const struct strv *cmd, struct ab_err *err)
{
	int r;

	if (cmd->n <= 250)
		return 0;
	r = ab_err_usage(err, "too many script arguments (at most 240)");
	ab_err_fix(err, "pass the rest in a file (--input) or on stdin");
	return r;
}

/* What the sandbox is made of, staged on RUNS/.mnt (the plan learns the host paths): the
 * workspace, the generated /etc, prepare's environment, the read-only binds; then bwrap's
 * argv. */
static int
run_stage(struct run *run, struct ab_err *err)
{
	struct run_ctx *c = &run->c;
	int r;

	r = run->o->workspace ? stage_dir_workspace(c, err) : stage_fresh_workspace(c, err);
	if (r < 0)
		return r;
	c->plan.work_src = xstrdup(c->rd.mnt_work);
	timing_mark("workspace ready");
	r = ws_mount_etc(c, err);
	if (r >= 0)
		r = ws_mount_scratch(c, err);
	if (r >= 0 && run->o->env_path)
		r = ws_mount_env(c, err);
	if (r >= 0)
		r = ws_stage_ro_binds(c, err);
	if (r < 0)
		return r;
	timing_mark("etc generated");
	bwargv_build(&run->av, &run->cmd, &c->plan);
	return cmd_fits(&run->cmd, err);
}

static void
print_quoted(const struct strv *words)
{
	STRV_FOREACH (w, words) {
		cleanup_free char *q = bwargv_shell_quote(*w);

		printf("%s\n", q);
	}
}

/* --dry-run: bwrap's command line, a shell-quoted word a line; nothing runs, nothing stays. */
static int
run_dry(struct run *run)
{
	struct run_ctx *c = &run->c;

	printf("%s\n", c->host.bwrap_path);
	print_quoted(&run->av);
	print_quoted(&run->cmd);
	fflush(stdout);
	c->res->status = AB_STATUS_DRY_RUN;
	ws_cleanup(c);
	if (c->rd.path)
		(void) walk_remove_tree(c->rd.root_fd, strrchr(c->rd.path, '/') + 1, NULL);
	c->res->run_dir_kept = false;
	return RUN_COMPLETE;
}

/* The memory watchdog (memwatch.h) counts the workspace and prepare's environment, tmpfs of
 * ours, too (/tmp and /dev/shm come from agentbox-init): once they are staged. */
static int
memwatch_count_tmpfs(struct run *run, struct ab_err *err)
{
	struct run_ctx *c = &run->c;
	int r;

	if (!c->lp.memwatch)
		return 0;
	r = c->tmpfs_mounted ? memwatch_add_tmpfs(&run->mw, c->work_fd) : 0;
	if (r == 0 && run->o->env_path && c->rd.mnt_env) {
		cleanup_fd int efd =
			open(c->rd.mnt_env, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

		r = efd < 0 ? -errno : memwatch_add_tmpfs(&run->mw, efd);
	}
	if (r < 0)
		return ab_err_set(err, r, "memory watchdog: cannot count the workspace: %s",
				  strerror(-r));
	return 0;
}

static void
spawn_memwatch(struct run *run)
{
	struct run_ctx *c = &run->c;

	memwatch_init(&run->mw, c->lp.memwatch_bytes);
	run->mw.share_net = c->plan.share_net;
	if (c->drop)
		run->mw.read_uid = c->sb_uid;
}

/* The run's own cgroup, its cores (--cpus) and the memory watchdog (or, with the socket
 * guard, the watch on the run's memory cgroup), when the limits plan asks for them. */
static int
spawn_confine(struct run *run, struct ab_err *err)
{
	struct run_ctx *c = &run->c;
	int r;

	if (c->lp.use_cgroup) {
		char name[128];

		cg_run_name(c->rd.suffix, name, sizeof(name));
		r = cg_create(&c->host.cg, name, &c->lp.cg, &c->cg, err);
		if (r < 0) {
			ab_err_fix(err, "%s",
				   "check cgroup delegation (agentbox doctor), or pass "
				   "--without cgroup");
			return r;
		}
		c->cg_made = true;
	}
	timing_mark("cgroup created");
	if (c->lp.cpu_affinity > 0) {
		r = cpu_claim(c->lp.cpu_affinity, run->cache_fd, &run->cpus);
		if (r < 0)
			return ab_err_set(err, r, "choose cores for --cpus: %s", strerror(-r));
		run->pin = r > 0;
	}
	if (c->lp.memwatch) {
		spawn_memwatch(run);
		return 0;
	}
	if (c->lp.sockguard && c->cg_made && c->cg.dirfd[0] >= 0) { /* v1: memory */
		memwatch_init(&run->mw, c->lp.memwatch_bytes);
		run->mw.share_net = c->plan.share_net;
		r = memwatch_set_cgroup(&run->mw, c->cg.dirfd[0]);
		if (r < 0)
			return ab_err_set(err, r, "memory: cannot watch the run's cgroup: %s",
					  strerror(-r));
	} else if (c->lp.sockguard) {
		c->lp.sockguard = false; /* no memory cgroup made after all (--without cgroup) */
	}
	return 0;
}

static void
fill_spawn(struct run *run, struct ab_spawn *sp, struct strv *cmd)
{
	struct run_ctx *c = &run->c;
	const struct ab_run_opts *o = run->o;

	*sp = (struct ab_spawn){
		.bwrap_path = c->host.bwrap_path,
		.cmd = strv_array(cmd),
		.seccomp_fd = c->seccomp_fd,
		.init_path = c->host.init_path,
		.stdin_fd = c->stdin_fd,
		.stdin_feed = o->stdin_fd >= 0,
		.cg = c->cg_made ? &c->cg : NULL,
		.drop = c->drop,
		.drop_uid = c->sb_uid,
		.drop_gid = c->sb_gid,
		.lp = &c->lp,
		.cpus = run->pin ? &run->cpus.set : NULL,
		.relay = !o->quiet,
		.relay_to_stderr = o->relay_to_stderr,
		.sanitize_out = isatty(STDOUT_FILENO),
		.sanitize_err = isatty(STDERR_FILENO),
		.inline_bytes = (size_t) o->inline_output,
		.stream_dirfd = c->rd.fd,
		.output_truncate = o->output_truncate,
		.progress = o->progress,
		.watch_fd = o->watch_fd,
		.memwatch = c->lp.memwatch || c->lp.sockguard ? &run->mw : NULL,
		.session_fd = o->session ? o->session_fd : -1,
	};
}

/* A plain run in a fresh workspace: its bwrap's command is known now (the interpreter, the
 * script's name in /work, its arguments, agentbox-init's options) and only bwrap's options
 * wait for the staging. Not a warm slot, a session (their scripts and sockets are staged),
 * --workspace DIR (where the script lands is found there) or a dry run. */
static bool
can_prestart(const struct run *run)
{
	const struct ab_run_opts *o = run->o;

	return !o->slot && !o->session && !o->dry_run && !o->workspace;
}

/* bwrap started now, in the run's cgroup, waiting on a pipe for its options: its exec and
 * dynamic loading (about 2.5 ms here) overlap the staging of the workspace and /etc rather
 * than follow it. Its command is checked against bwargv_build's once that has run. */
static int
run_prestart(struct run *run, struct ab_err *err)
{
	struct run_ctx *c = &run->c;
	struct strv head = { 0 };
	int r;

	if (!can_prestart(run))
		return 0;
	bwargv_head(&head, &c->plan);
	run->head = bwargv_serialize(&head, &run->head_len);
	strv_done(&head);
	if (run->head_len > AB_PRESTART_HEAD_MAX)
		return 0; /* a long environment: bwrap starts once everything is staged */
	bwargv_cmd(&run->early_cmd, &c->plan);
	r = cmd_fits(&run->early_cmd, err);
	if (r < 0)
		return r;
	r = spawn_confine(run, err);
	if (r < 0)
		return r;
	fill_spawn(run, &run->sp, &run->early_cmd);
	run->sp.args_buf = run->head;
	run->sp.args_len = run->head_len;
	return supervise_prestart(&run->sp, c->res, &run->oc, &run->early, err);
}

static bool
strv_same(const struct strv *a, const struct strv *b)
{
	if (a->n != b->n)
		return false;
	for (size_t i = 0; i < a->n; i++)
		if (strcmp(a->v[i], b->v[i]) != 0)
			return false;
	return true;
}

/* Starts the sandbox (a slot: waits for a run to take it) and supervises it to its end. */
static int
run_spawn(struct run *run, struct ab_err *err)
{
	struct run_ctx *c = &run->c;
	const struct ab_run_opts *o = run->o;
	size_t args_len = 0;
	cleanup_free char *args = bwargv_serialize(&run->av, &args_len);
	struct ab_spawn sp;
	int r;

	timing_mark("argv built");
	if (run->early) {
		struct ab_sup *early = run->early;

		if (!strv_same(&run->cmd, &run->early_cmd) || args_len < run->head_len ||
		    memcmp(args, run->head, run->head_len) != 0)
			return ab_err_set(err, -EINVAL,
					  "internal: bwrap's command or first options changed "
					  "after its start");
		r = memwatch_count_tmpfs(run, err);
		if (r < 0)
			return r;
		clock_gettime(CLOCK_REALTIME, &c->started_rt);
		run->early = NULL;
		r = supervise_continue(early, args + run->head_len, args_len - run->head_len, err);
	} else {
		r = spawn_confine(run, err);
		if (r >= 0)
			r = memwatch_count_tmpfs(run, err);
		if (r < 0)
			return r;
		fill_spawn(run, &sp, &run->cmd);
		sp.args_buf = args;
		sp.args_len = args_len;
		if (o->slot) {
			r = slot_start(c, &sp, err);
			if (r < 0)
				return r;
		}
		clock_gettime(CLOCK_REALTIME, &c->started_rt);
		r = supervise_run(&sp, c->res, &run->oc, err);
	}
	cpu_claim_release(&run->cpus); /* every process of the run is gone */
	if (o->slot) {
		o->slot->state = (int) c->warm.state;
		snprintf(o->slot->failure, sizeof(o->slot->failure), "%s", c->warm.failure);
		if (c->warm.state == AB_WARM_CLAIMED)
			run->o = c->o; /* the run's own spec from here on (slot.c) */
	}
	if (r < 0)
		return r;
	if (run->o->slot && c->warm.state != AB_WARM_CLAIMED) {
		/* no run took the slot: nothing to report, nothing to keep */
		c->res->run_dir_kept = false;
		run->unclaimed = true;
		return RUN_COMPLETE;
	}
	timing_mark("sandbox finished");
	return 0;
}

/* What agentbox itself failed at around the script (nothing ran, or not as planned): bwrap's
 * start, agentbox-init's hardening, the memory watchdog. */
static int
outcome_failure(struct run *run, struct ab_err *err)
{
	const struct ab_outcome *oc = &run->oc;
	struct ab_record *res = run->c.res;
	int r;

	if (!oc->started)
		return ab_err_set(err, -oc->exec_errno, "could not start bwrap: %s: %s",
				  oc->exec_what, strerror(oc->exec_errno));
	if ((oc->init_setup_failed &&
	     strncmp(oc->init_text, AB_NETCHECK_PREFIX, strlen(AB_NETCHECK_PREFIX)) == 0) ||
	    strncmp(oc->memwatch_error, AB_NETCHECK_PREFIX, strlen(AB_NETCHECK_PREFIX)) == 0) {
		/* agentbox-init's check, or the memory watchdog's when it looked first */
		r = ab_err_set(err, -EPERM, "the sandbox is not isolated from the network: %s",
			       oc->init_setup_failed ? oc->init_text : oc->memwatch_error);
		ab_err_fix(err, "nothing ran; check that AGENTBOX_BWRAP is a real bwrap that "
				"unshares the network (agentbox doctor), and report a bug");
		return r;
	}
	if (oc->init_setup_failed) {
		r = ab_err_set(err, -oc->init_errno, "sandbox hardening failed: %s: %s",
			       oc->init_text, strerror(oc->init_errno));
		ab_err_fix(err,
			   "run `agentbox doctor`; opt out of the failing layer with --without");
		return r;
	}
	if (!oc->init_started && !oc->timed_out && !oc->interrupted_by) {
		/* bwrap failed before it started our PID 1: its message is on stderr */
		char msg[400];
		size_t n = res->err.len < sizeof(msg) - 1 ? res->err.len : sizeof(msg) - 1;

		memcpy(msg, res->err.buf ? res->err.buf : "", n);
		msg[n] = '\0';
		while (n > 0 && msg[n - 1] == '\n')
			msg[--n] = '\0';
		if (n)
			r = ab_err_set(err, -EIO, "bubblewrap failed to set up the sandbox: %s",
				       msg);
		else if (oc->bwrap_reaped && WIFSIGNALED(oc->bwrap_wstatus))
			r = ab_err_set(err, -EIO,
				       "bubblewrap failed to set up the sandbox: no message (it "
				       "was killed by signal %d)",
				       WTERMSIG(oc->bwrap_wstatus));
		else
			r = ab_err_set(err, -EIO,
				       "bubblewrap failed to set up the sandbox: no message (exit "
				       "status %d)",
				       oc->bwrap_reaped ? WEXITSTATUS(oc->bwrap_wstatus) : -1);
		host_probe_forget(run->cache_fd, run->c.drop ? run->c.sb_uid : geteuid());
		ab_err_fix(err, "run `agentbox doctor`");
		return r;
	}
	if (oc->memwatch_error[0] && !oc->timed_out && !oc->interrupted_by) {
		/* never a run with a memory limit nobody watched */
		r = ab_err_set(err, -EIO, "the memory watchdog could not watch the sandbox: %s",
			       oc->memwatch_error);
		ab_err_fix(err, "run `agentbox doctor`; run as root or with a delegated cgroup v2 "
				"so the kernel enforces --memory");
		return r;
	}
	return 0;
}

/* How the run ended, into the record: usage, limits, the protections in force, a hint. */
static int
run_interpret(struct run *run, struct ab_err *err)
{
	struct run_ctx *c = &run->c;
	struct ab_record *res = c->res;
	const struct ab_outcome *oc = &run->oc;
	const struct ab_cg_usage *usage = c->cg_made ? &run->usage : NULL;
	int r;

	if (c->cg_made)
		(void) cg_read_usage(&c->cg, &run->usage);
	if (run->o->slot)
		slot_settle(c, &run->oc, c->cg_made ? &run->usage : NULL);
	r = outcome_failure(run, err);
	if (r < 0)
		return r;
	outcome_interpret(c, oc, usage);
	if (run->o->slot)
		slot_settle_cpu(c);
	if (c->lp.memwatch && run->mw.attached) {
		/* a watchdog that never saw the script measured agentbox-init alone: null, not
		 * that figure (issue 25) */
		res->usage.memory_peak_bytes = run->mw.saw_script ? (int64_t) run->mw.peak : -1;
		if (!c->cg_made)
			res->usage.tasks_peak = (int64_t) run->mw.tasks_peak;
	} else if (c->lp.memwatch && run->mw.ended_first) {
		res->usage.memory_peak_bytes = -1; /* unmeasured: null */
		result_warn(res, "--memory: the run had ended before the memory watchdog could "
				 "read the sandbox's /proc (a run of a few milliseconds on a busy "
				 "machine): its memory was not measured");
	} else if (c->lp.sockguard && run->mw.attached &&
		   (int64_t) run->mw.peak > res->usage.memory_peak_bytes) {
		res->usage.memory_peak_bytes =
			(int64_t) run->mw.peak; /* the cgroup's plus sockets */
	}
	if (oc->timed_out || oc->output_limited || oc->cpu_time_limited || oc->interrupted_by ||
	    oc->mem_limited)
		res->kill_to_reaped_ms = oc->kill_to_reaped_ms;
	if (oc->init_exec_failed)
		res->exit_code = oc->init_errno == ENOENT ? AB_EXIT_NOT_FOUND : AB_EXIT_CANNOT_EXEC;
	outcome_record_protections(c, oc);
	/* issue 25: a script that failed on a file or module lying next to it on the host */
	if (res->status == AB_STATUS_EXITED && res->exit_code > 0 &&
	    !(run->o->workspace && c->script_rel)) {
		size_t n = 0;
		cleanup_free char *t = stream_inline_text(&res->err, &n);

		res->hint = hint_for_run(run->o, t, n);
	}
	timing_mark("interpreted");
	return 0;
}

/* The files: the report's list, --collect, the kept copy; prepare's environment out. */
static int
run_collect(struct run *run, struct ab_err *err)
{
	struct run_ctx *c = &run->c;
	int r;

	r = ws_collect(c, err);
	if (r < 0)
		return r;
	if (run->o->env_path && c->res->status == AB_STATUS_EXITED && c->res->exit_code == 0) {
		r = ws_env_copy_out(c, err);
		if (r < 0)
			return r;
		c->res->env_copied = true;
	}
	timing_mark("collected");
	return 0;
}

/* The end of every run, complete or not (r): the protections for a report that has none
 * yet, the cgroup, the run directory removed or handed over. */
static void
run_finish(struct run *run, int r)
{
	struct run_ctx *c = &run->c;
	struct ab_record *res = c->res;
	const struct ab_run_opts *o = run->o;

	/* a bwrap started for a run that went no further: gone before its cgroup is */
	supervise_abandon(run->early);
	run->early = NULL;
	cpu_claim_release(&run->cpus);
	memwatch_done(&run->mw);
	if (r < 0 && res->n_prot == 0 && c->plan.interp)
		outcome_record_protections(c, NULL);
	ws_cleanup(c);
	if ((o->rm || run->unclaimed) && c->rd.path && c->rd.root_fd >= 0) {
		timing_mark("removing the run directory");
		if (walk_remove_tree(c->rd.root_fd, strrchr(c->rd.path, '/') + 1, NULL) == 0)
			res->run_dir_kept = false;
		timing_mark("run directory removed");
	}
	if (c->rd.path && res->run_dir_kept && o->workspace == NULL && !res->workspace)
		res->workspace = xasprintf("%s/work", c->rd.path);
	if (res->run_dir_kept && c->rd.fd >= 0)
		res->run_dir_fd = steal_fd(&c->rd.fd);
	timing_mark("cleaned up");
}

/* The story of a run: the plan made in steps as its facts come in (the host, the script, the
 * run directory, the probed sandbox), staged, run, interpreted, collected. */
static int
run_story(struct run *run, struct ab_err *err)
{
	int r;

	r = run_probe_host(run, err);
	if (r == 0)
		r = run_enter(run, err);
	if (r == 0)
		r = run_resolve(run, err);
	if (r == 0)
		r = run_open_dir(run, err);
	if (r == 0)
		r = run_plan(run, err);
	if (r == 0)
		r = run_prestart(run, err);
	if (r == 0)
		r = run_stage(run, err);
	if (r == 0 && run->o->dry_run)
		r = run_dry(run);
	if (r == 0)
		r = run_spawn(run, err);
	if (r == 0)
		r = run_interpret(run, err);
	if (r == 0)
		r = run_collect(run, err);
	return r;
}

int
run_main(struct ab_run_opts *o, struct ab_record *res, struct ab_err *err)
{
	cleanup_run struct run run;
	int r;

	run_init(&run, o, res);
	timing_mark("start");
	r = run_story(&run, err);
	run_finish(&run, r);
	return r < 0 ? r : 0;
}

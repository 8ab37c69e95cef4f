/* doctor.c: `agentbox doctor` (doctor_checks, cmds.h): what this host offers, each check with
 * its fix, and the host's class in words (the rows of README "Where it runs"). Runs in a
 * supervisor, in the systemd scope a run would get (supervisor/main.c); the library's ab_probe
 * then makes two real sandbox runs through the path every run takes. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "../spec/record.h"
#include "../util/fdutil.h"
#include "../util/macro.h"
#include "../util/xalloc.h"
#include "cmds.h"
#include "config.h"
#include "filter.h"
#include "host.h"
#include "limitplan.h"
#include "prepare.h"
#include "run.h"
#include "rundir.h"

enum check_state {
	CHECK_OK,
	CHECK_WARN,
	CHECK_FAIL,
};

struct doctor {
	json_t *checks;
	int fails;
};

static void
report_check(struct doctor *d, const char *name, enum check_state st, const char *detail,
	     const char *fix)
{
	static const char *const tag[] = { "ok", "warn", "FAIL" };

	if (st == CHECK_FAIL)
		d->fails++;
	json_array_append_new(d->checks,
			      json_pack("{s:s, s:s, s:s?, s:s?}", "check", name, "result", tag[st],
					"detail", detail, "fix", st == CHECK_OK ? NULL : fix));
}

/* Loads the default filter in a child and checks that keyctl is refused with EPERM. */
static bool
filter_loads(char *detail, size_t size)
{
	struct ab_err err = { 0 };
	cleanup_fd int fd = filter_program_fd(AB_SECCOMP_DEFAULT, -1, &err);
	cleanup_free char *prog = NULL;
	ssize_t n;
	pid_t pid;
	int ws;

	if (fd < 0) {
		snprintf(detail, size, "cannot compile the filter: %s", err.msg);
		return false;
	}
	n = read_all_capped(fd, 1 << 20, &prog);
	if (n <= 0 || n % 8) {
		snprintf(detail, size, "the compiled filter is malformed");
		return false;
	}
	pid = fork();
	if (pid == 0) {
		struct sock_fprog fp = { .len = (unsigned short) (n / 8),
					 .filter = (struct sock_filter *) prog };

		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
		    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fp) < 0)
			_exit(2);
		_exit(syscall(250 /* keyctl */, 0, 0, 0, 0, 0) < 0 && errno == EPERM ? 0 : 3);
	}
	if (pid < 0 || waitpid(pid, &ws, 0) < 0 || !WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
		snprintf(detail, size, "the filter did not load or did not block keyctl");
		return false;
	}
	snprintf(detail, size, "filter loads; %zd instructions", n / 8);
	return true;
}

/* Unprivileged: can the run's own user namespace cap the caller's inotify quota
 * (limitplan.h limits_cap_inotify)? In a child: the same unshare the run makes. 1 capped,
 * 0 not (a read-only /proc/sys: seccomp refuses inotify instead), -1 no user namespace. */
static int
probe_inotify_cap(void)
{
	pid_t pid = fork();
	int ws;

	if (pid == 0) {
		char map[64];
		uid_t uid = geteuid();
		gid_t gid = getegid();

		if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0)
			_exit(2);
		snprintf(map, sizeof(map), "%u %u 1", (unsigned) uid, (unsigned) uid);
		if (write_small_file_at(AT_FDCWD, "/proc/self/setgroups", "deny") < 0 ||
		    write_small_file_at(AT_FDCWD, "/proc/self/uid_map", map) < 0)
			_exit(2);
		snprintf(map, sizeof(map), "%u %u 1", (unsigned) gid, (unsigned) gid);
		if (write_small_file_at(AT_FDCWD, "/proc/self/gid_map", map) < 0)
			_exit(2);
		_exit(limits_cap_inotify("/proc") == 0 ? 0 : 1);
	}
	if (pid < 0 || RETRY_EINTR(waitpid(pid, &ws, 0)) < 0 || !WIFEXITED(ws))
		return -1;
	return WEXITSTATUS(ws) == 0 ? 1 : WEXITSTATUS(ws) == 1 ? 0 : -1;
}

/* Unprivileged, a run probes bwrap from inside the supervisor's own user namespace
 * (run.c: after ws_enter_mntns), where a setuid bwrap's bit means nothing: probe the same way,
 * in a child, so doctor and a run agree. Falls back to probing here. */
static void
probe_like_a_run(struct ab_host *h, bool drop, uid_t uid, gid_t gid)
{
	int p[2], ws;
	pid_t pid;

	if (h->is_root || pipe2(p, O_CLOEXEC) < 0) {
		(void) host_probe_sandbox(h, drop, uid, gid);
		return;
	}
	pid = fork();
	if (pid == 0) {
		char map[64];

		(void) close(p[0]);
		snprintf(map, sizeof(map), "%u %u 1", (unsigned) geteuid(), (unsigned) geteuid());
		if (unshare(CLONE_NEWUSER | CLONE_NEWNS) == 0 &&
		    write_small_file_at(AT_FDCWD, "/proc/self/setgroups", "deny") == 0 &&
		    write_small_file_at(AT_FDCWD, "/proc/self/uid_map", map) == 0) {
			snprintf(map, sizeof(map), "%u %u 1", (unsigned) getegid(),
				 (unsigned) getegid());
			if (write_small_file_at(AT_FDCWD, "/proc/self/gid_map", map) == 0) {
				(void) host_probe_sandbox(h, drop, uid, gid);
				(void) !write(p[1], h, sizeof(*h));
			}
		}
		_exit(0);
	}
	(void) close(p[1]);
	if (pid < 0 || RETRY_EINTR(read(p[0], h, sizeof(*h))) != (ssize_t) sizeof(*h))
		(void) host_probe_sandbox(h, drop, uid, gid); /* no user namespace: as we are */
	(void) close(p[0]);
	if (pid > 0)
		(void) RETRY_EINTR(waitpid(pid, &ws, 0));
}

/* The environments requirements built (issue 28), against their cap. */
static void
doctor_env_cache(struct doctor *d)
{
	json_t *c = NULL;
	char detail[600];
	json_int_t bytes, cap;

	if (prepare_cache_bound(false, &c) < 0 || !c) {
		report_check(d, "envs", CHECK_OK, "no environment cache yet", NULL);
		return;
	}
	bytes = json_integer_value(json_object_get(c, "bytes"));
	cap = json_integer_value(json_object_get(c, "cap_bytes"));
	snprintf(detail, sizeof(detail), "%s: %lld environment%s, %.1f MiB of a %.0f MiB cap",
		 json_string_value(json_object_get(c, "cache_dir")),
		 (long long) json_integer_value(json_object_get(c, "entries")),
		 json_integer_value(json_object_get(c, "entries")) == 1 ? "" : "s",
		 (double) bytes / (1 << 20), (double) cap / (1 << 20));
	report_check(d, "envs", bytes > cap ? CHECK_WARN : CHECK_OK, detail,
		     bytes > cap ? "agentbox gc (or raise AGENTBOX_CACHE_MAX)" : NULL);
	json_decref(c);
}

/* What the kept runs hold, and the retention that bounds them. */
static void
doctor_runs_dir(struct doctor *d)
{
	cleanup_free char *root = rundir_default_root(geteuid());
	cleanup_fd int rfd = open(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	char detail[PATH_MAX + 200], keep[96];
	struct ab_err err = { 0 };
	uint64_t count, age_ms, bytes = 0;
	unsigned runs = 0;
	bool partial = false;

	if (rundir_retention(&count, &age_ms, &err) < 0) {
		report_check(d, "runs", CHECK_WARN, err.msg, err.fix);
		return;
	}
	{
		static const struct {
			uint64_t ms;
			const char *unit;
		} u[] = { { 86400000, "d" },
			  { 3600000, "h" },
			  { 60000, "m" },
			  { 1000, "s" },
			  { 1, "ms" } };
		char age[32] = "";
		size_t i = 0;

		while (age_ms && age_ms % u[i].ms != 0)
			i++;
		if (age_ms)
			snprintf(age, sizeof(age), "%llu%s",
				 (unsigned long long) (age_ms / u[i].ms), u[i].unit);
		if (count == 0 && age_ms == 0)
			snprintf(keep, sizeof(keep), "no retention: runs stay until `agentbox gc`");
		else if (age_ms == 0)
			snprintf(keep, sizeof(keep), "retention: the newest %llu",
				 (unsigned long long) count);
		else if (count == 0)
			snprintf(keep, sizeof(keep), "retention: none older than %s", age);
		else
			snprintf(keep, sizeof(keep),
				 "retention: the newest %llu, none older than %s",
				 (unsigned long long) count, age);
	}
	if (rfd >= 0)
		rundir_usage(rfd, 1000000, &runs, &bytes, &partial);
	snprintf(detail, sizeof(detail), "%s: %u kept run%s, %s%.1f MiB (%s)", root, runs,
		 runs == 1 ? "" : "s", partial ? "over " : "", (double) bytes / (1 << 20), keep);
	report_check(d, "runs", bytes > (2ULL << 30) ? CHECK_WARN : CHECK_OK, detail,
		     bytes > (2ULL << 30)
			     ? "agentbox gc (or lower AGENTBOX_KEEP_RUNS / AGENTBOX_KEEP_AGE)"
			     : NULL);
}

void
doctor_host_class(const struct ab_host *h, char *buf, size_t size)
{
	const char *who = h->is_root ? (h->cap_sys_admin ? "root" : "root without CAP_SYS_ADMIN")
				     : "an unprivileged user";
	const char *cg = h->cg.kind == AB_CG_V2   ? "cgroup v2 (delegated here)"
			 : h->cg.kind == AB_CG_V1 ? "cgroup v1 (writable here)"
			 : h->cg.why[0]           ? "no writable cgroup"
						  : "no cgroup";

	if (strcmp(h->container, "kubernetes") == 0)
		snprintf(buf, size, "%s in a Kubernetes pod, %s", who, cg);
	else if (h->container[0])
		snprintf(buf, size, "%s in a %s container, %s", who,
			 strcmp(h->container, "container") == 0 ? "masked-/proc" : h->container,
			 cg);
	else
		snprintf(buf, size, "%s on %s, %s", who, h->wsl ? "WSL2" : "this machine", cg);
	if (h->bwrap_setuid)
		snprintf(buf + strlen(buf), size - strlen(buf), ", setuid bwrap");
	if (h->apparmor_restrict_userns)
		snprintf(buf + strlen(buf), size - strlen(buf),
			 ", AppArmor restricts user namespaces");
}

int
doctor_checks(json_t **ret, struct ab_err *err)
{
	struct doctor d = { .checks = json_array() };
	struct ab_host h;
	char detail[PATH_MAX + 600], cls[300];
	uid_t uid = getuid();
	gid_t gid = getgid();
	bool drop = false;
	int warns = 0;

	(void) host_probe_paths(&h, err);
	if (h.is_root) {
		if (run_sandbox_user(NULL, &uid, &gid, err) < 0) {
			json_decref(d.checks);
			return err->code;
		}
		drop = true;
	}
	doctor_host_class(&h, cls, sizeof(cls));
	report_check(&d, "host", CHECK_OK, cls, NULL);
	if (!h.bwrap_path[0]) {
		report_check(&d, "bwrap", CHECK_FAIL, "bubblewrap is not installed",
			     "apt-get install bubblewrap");
	} else {
		snprintf(detail, sizeof(detail), "%s%s", h.bwrap_path,
			 !h.bwrap_setuid ? ""
			 : h.is_root
				 ? " is setuid root (as root that changes nothing)"
				 : " is setuid root: agentbox runs it from its own user namespace, "
				   "where the bit means nothing, so it needs unprivileged user "
				   "namespaces like any bwrap");
		report_check(&d, "bwrap", h.bwrap_setuid ? CHECK_WARN : CHECK_OK, detail,
			     "chmod u-s on bwrap where user namespaces are enabled");
		warns += h.bwrap_setuid;
		probe_like_a_run(&h, drop, uid, gid);
		report_check(&d, "user namespaces", h.bwrap_runs ? CHECK_OK : CHECK_FAIL,
			     h.bwrap_runs ? "bwrap starts a sandbox" : h.bwrap_error,
			     host_userns_fix(&h));
		if (h.bwrap_runs) {
			report_check(&d, "proc", h.proc_mountable ? CHECK_OK : CHECK_FAIL,
				     h.proc_mountable ? "a fresh /proc can be mounted"
						      : h.proc_error,
				     host_proc_fix(&h));
			if (h.proc_mountable)
				report_check(&d, "disable-userns",
					     h.has_disable_userns ? CHECK_OK : CHECK_FAIL,
					     h.has_disable_userns
						     ? "nested user namespaces can be disabled"
						     : h.disable_error,
					     "install bubblewrap >= 0.8 (or run with --without "
					     "disable-userns)");
			else
				report_check(&d, "disable-userns", CHECK_WARN, h.disable_error,
					     "fix /proc first");
			warns += !h.proc_mountable;
			report_check(&d, "hostname", h.hostname_ok ? CHECK_OK : CHECK_WARN,
				     h.hostname_ok ? "the sandbox gets its own hostname"
						   : "sethostname is refused here: the sandbox "
						     "would keep this hostname (a warning per run)",
				     host_hostname_fix(&h));
			warns += !h.hostname_ok;
		}
	}
	report_check(
		&d, "apparmor", h.apparmor_restrict_userns && !h.bwrap_runs ? CHECK_FAIL : CHECK_OK,
		!h.apparmor_restrict_userns ? "no AppArmor user-namespace restriction"
		: h.bwrap_runs ? "kernel.apparmor_restrict_unprivileged_userns=1, and bwrap "
				 "may create user namespaces (agentbox's profile, or another)"
			       : "kernel.apparmor_restrict_unprivileged_userns=1: unprivileged "
				 "user namespaces only for profiles that allow them",
		host_userns_fix(&h));
	snprintf(detail, sizeof(detail), "ABI %d", h.landlock_abi);
	report_check(&d, "landlock", h.landlock_abi > 0 ? CHECK_OK : CHECK_FAIL,
		     h.landlock_abi > 0 ? detail : "not available",
		     "boot Linux >= 5.13 with landlock in lsm= (or run with --without landlock)");
	{
		bool ok = filter_loads(detail, sizeof(detail));

		report_check(&d, "seccomp", ok ? CHECK_OK : CHECK_FAIL, detail,
			     "a kernel with CONFIG_SECCOMP_FILTER (or run with --without seccomp)");
	}
	if (h.cg.kind == AB_CG_NONE) {
		report_check(&d, "cgroups", CHECK_WARN, h.cg.why,
			     "run as root; on a cgroup v2 host with systemd agentbox asks systemd "
			     "for a delegated scope per run (the message says why it got none); "
			     "elsewhere set AGENTBOX_CGROUP to a delegated cgroup v2 directory");
		warns++;
	} else {
		snprintf(detail, sizeof(detail), "%s: memory %s, pids %s, cpu %s",
			 h.cg.kind == AB_CG_V2 ? "cgroup v2" : "cgroup v1",
			 h.cg.memory ? "yes" : "no", h.cg.pids ? "yes" : "no",
			 h.cg.cpu ? "yes" : "no");
		report_check(&d, "cgroups", h.cg.memory && h.cg.pids ? CHECK_OK : CHECK_WARN,
			     detail, h.cg.why[0] ? h.cg.why : NULL);
		warns += !(h.cg.memory && h.cg.pids);
	}
	{
		/* what the default limits become here (limitplan.c, pure) */
		struct ab_run_opts o;
		struct ab_record res;
		struct ab_limits_plan lp;
		struct ab_err e = { 0 };
		bool weak;

		run_opts_init(&o);
		result_init(&res, &o);
		(void) limits_plan(&o, &h, true, !h.is_root || !h.cap_sys_admin, &lp, &res, &e);
		weak = !res.limits[AB_LIM_MEMORY].enforced_ok ||
		       !res.limits[AB_LIM_PIDS].enforced_ok ||
		       !res.limits[AB_LIM_CPUS_MILLI].enforced_ok;
		snprintf(detail, sizeof(detail), "memory: %s; pids: %s; cpus: %s",
			 res.limits[AB_LIM_MEMORY].mechanism ?: "not enforced",
			 res.limits[AB_LIM_PIDS].mechanism ?: "not enforced",
			 res.limits[AB_LIM_CPUS_MILLI].mechanism ?: "not enforced");
		report_check(&d, "limits", weak ? CHECK_WARN : CHECK_OK, detail,
			     "a writable cgroup (root on the host, or a delegated cgroup v2) "
			     "enforces all three in the kernel");
		warns += weak;
		result_done(&res);
		run_opts_done(&o);
	}
	if (!h.is_root) {
		int k = probe_inotify_cap();

		report_check(
			&d, "caller quotas",
			k > 0    ? CHECK_OK
			: k == 0 ? CHECK_OK
				 : CHECK_FAIL,
			k > 0    ? "the script shares your uid: a run's inotify instances are "
				   "capped in its own user namespace"
			: k == 0 ? "the script shares your uid; /proc/sys is read-only here, so "
				   "seccomp refuses inotify in the sandbox instead"
				 : "the supervisor cannot make its own user namespace",
			host_userns_fix(&h));
	}
	report_check(&d, "agentbox-init", h.init_path[0] ? CHECK_OK : CHECK_FAIL,
		     h.init_path[0] ? h.init_path : "not found",
		     "meson install, or set AGENTBOX_INIT");
	report_check(&d, "python3", access("/usr/bin/python3", X_OK) == 0 ? CHECK_OK : CHECK_WARN,
		     access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "not installed",
		     "apt-get install python3");
	doctor_runs_dir(&d);
	doctor_env_cache(&d);
	/* the sandbox runs themselves: ab_probe makes them through the library, the path every
	 * run takes (a supervisor of their own, its scope and cgroup), after these checks */
	if (d.fails)
		snprintf(detail, sizeof(detail),
			 "%s: agentbox refuses to run here until the FAIL lines are fixed", cls);
	else if (warns)
		snprintf(detail, sizeof(detail),
			 "%s: runs, every default protection in force; the warn lines say what is "
			 "weaker than on a root host with cgroups, and each run's report says it "
			 "too",
			 cls);
	else
		snprintf(detail, sizeof(detail), "%s: runs, every protection and limit in force",
			 cls);
	*ret = json_pack("{s:s, s:b, s:{s:s, s:s, s:b, s:b, s:b, s:s, s:b, s:b}, s:s, s:o, s:b}",
			 "agentbox_version", AB_VERSION, "as_root", h.is_root, "host", "class", cls,
			 "container", h.container, "wsl", h.wsl, "cap_sys_admin", h.cap_sys_admin,
			 "bwrap_setuid", h.bwrap_setuid, "cgroup",
			 h.cg.kind == AB_CG_V2   ? "v2"
			 : h.cg.kind == AB_CG_V1 ? "v1"
						 : "none",
			 "apparmor_restrict_userns", h.apparmor_restrict_userns, "proc_mountable",
			 h.proc_mountable, "summary", detail, "checks", d.checks, "ok",
			 d.fails == 0);
	return 0;
}

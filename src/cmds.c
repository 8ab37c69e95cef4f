#include "cmds.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "config.h"
#include "filter.h"
#include "host.h"
#include "hostfs.h"
#include "result.h"
#include "run.h"
#include "rundir.h"
#include "units.h"
#include "util/fdutil.h"
#include "util/macro.h"
#include "util/xalloc.h"
#include "walk.h"

/* Splits RUN_DIR into an O_DIRECTORY fd on its parent and its name, and checks that it is a
 * run directory agentbox created: the run-XXXXXX name, not a symlink, the marker inside. */
static int
open_run(const char *path, int *ret_parent, char **ret_name)
{
	struct ab_err err = { 0 };
	cleanup_free char *name = NULL;
	cleanup_fd int ppath = hostfs_open_parent(path, 0, "run directory", &name, &err);
	int pfd;

	if (ppath < 0)
		return ppath;
	pfd = openat(ppath, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (pfd < 0)
		return -errno;
	if (!rundir_is_run(pfd, name)) {
		(void) close(pfd);
		return -EPERM;
	}
	*ret_parent = pfd;
	*ret_name = steal_ptr(&name);
	return 0;
}

int
rm_do(const char *run_dir, struct ab_err *err)
{
	cleanup_free char *name = NULL;
	cleanup_fd int pfd = -1;
	int r;

	if (!run_dir)
		return ab_err_usage(err, "rm: give RUN_DIR");
	r = open_run(run_dir, &pfd, &name);
	if (r == -EPERM) {
		ab_err_set(err, r,
			   "refusing to remove '%s': not a run directory agentbox created (no "
			   "run-XXXXXX name or no %s marker of yours)",
			   run_dir, AB_RUN_MARKER);
		return ab_err_fix(err, "pass a path from a report's run_dir");
	}
	if (r < 0)
		return ab_err_set(err, r, "cannot remove '%s': %s", run_dir, strerror(-r));
	if (rundir_owner_alive(pfd, name))
		return ab_err_set(err, -EBUSY, "'%s' belongs to a run that is still going",
				  run_dir);
	return walk_remove_tree(pfd, name, err);
}

int
gc_do(int64_t older_ms, bool dry, json_t **ret, struct ab_err *err)
{
	cleanup_free char *root = rundir_default_root(geteuid());
	cleanup_fd int rfd = -1;
	json_t *removed = json_array();
	DIR *d;
	struct dirent *de;
	int kept = 0, failed = 0;
	time_t now = time(NULL);

	rfd = open(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (rfd < 0) {
		if (errno == ENOENT) {
			*ret = json_pack("{s:s, s:o, s:i, s:b}", "runs_dir", root, "removed",
					 removed, "kept", 0, "dry_run", dry);
			return 0;
		}
		json_decref(removed);
		return ab_err_set(err, -errno, "cannot open the runs directory '%s': %s", root,
				  strerror(errno));
	}
	d = fdopendir(fcntl(rfd, F_DUPFD_CLOEXEC, 3));
	if (!d) {
		json_decref(removed);
		return ab_err_set(err, -errno, "read the runs directory '%s'", root);
	}
	while ((de = readdir(d))) {
		struct stat st;
		struct ab_err e = { 0 };

		if (!rundir_is_run(rfd, de->d_name))
			continue;
		if (fstatat(rfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (older_ms > 0 && (int64_t) (now - st.st_mtime) * 1000 < older_ms) {
			kept++;
			continue;
		}
		if (rundir_owner_alive(rfd, de->d_name)) {
			kept++;
			continue;
		}
		if (!dry && walk_remove_tree(rfd, de->d_name, &e) < 0) {
			fprintf(stderr, "agentbox: removing %s/%s: %s\n", root, de->d_name, e.msg);
			failed++;
			kept++;
			continue;
		}
		json_array_append_new(removed, json_string(de->d_name));
	}
	closedir(d);
	*ret = json_pack("{s:s, s:o, s:i, s:i, s:b}", "runs_dir", root, "removed", removed, "kept",
			 kept, "failed", failed, "dry_run", dry);
	return 0;
}

int
collect_do(const char *run_dir, const char *dest, json_t **ret, struct ab_err *err)
{
	cleanup_free char *name = NULL;
	cleanup_fd int pfd = -1, wfd = -1, dfd = -1;
	struct ab_manifest m = { 0 };
	/* bounded by totals like a run's own post-run walk (docs/design.md) */
	struct ab_walk_opts wo = {
		.max_entries = 100000,
		.max_file_bytes = 256ULL << 20,
		.max_total_bytes = 1ULL << 30,
		.hash_max_bytes = 64ULL << 20,
		.hash_budget_bytes = 512ULL << 20,
		.max_list_bytes = 8ULL << 20,
		.time_budget_ms = 60000,
		.chown_uid = (uid_t) -1,
		.chown_gid = (gid_t) -1,
		.strip_uid = (uid_t) -1,
	};
	int r;

	if (!run_dir || !dest)
		return ab_err_usage(err, "collect: give RUN_DIR and DIR");
	r = open_run(run_dir, &pfd, &name);
	if (r < 0) {
		ab_err_set(err, r, "'%s' is not a run directory agentbox created%s%s", run_dir,
			   r == -EPERM ? "" : ": ", r == -EPERM ? "" : strerror(-r));
		return ab_err_fix(err, "pass a path from a report's run_dir");
	}
	{
		cleanup_free char *work = xasprintf("%s/work", name);

		wfd = openat(pfd, work, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	}
	if (wfd < 0)
		return ab_err_set(err, -errno, "'%s' has no workspace: %s", run_dir,
				  strerror(errno));
	dfd = hostfs_open_collect(dest, "collect: DIR", pfd, err);
	if (dfd < 0)
		return dfd;
	wo.dst_dirfd = dfd;
	r = walk_tree(wfd, &wo, &m, err);
	if (r < 0)
		return r;
	if (m.truncated_caps) {
		cleanup_free char *caps = walk_caps_text(m.truncated_caps);

		fprintf(stderr,
			"agentbox: collect: %s cut the listing or the copy short (see summary)\n",
			caps);
	}
	*ret = json_pack("{s:s, s:I, s:o, s:o}", "dir", dest, "bytes", (json_int_t) m.copied_bytes,
			 "files", manifest_to_json(&m), "summary", manifest_summary_json(&m));
	manifest_done(&m);
	return 0;
}

/* ---- doctor ------------------------------------------------------------------------- */

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

static int
doctor_run_script(const char *lang, const char *src, char *detail, size_t size)
{
	struct ab_run_opts o;
	struct ab_result res;
	struct ab_err err = { 0 };
	int r, ok;
	pid_t pid;
	int ws, pfd[2];

	if (pipe2(pfd, O_CLOEXEC) < 0)
		return -errno;
	/* In a child: run_main enters its own namespaces; keep doctor's process clean. The
	 * script is code in memory: nothing is written to the host for it. */
	pid = fork();
	if (pid == 0) {
		(void) close(pfd[0]);
		run_opts_init(&o);
		result_init(&res, &o);
		o.quiet = o.rm = true;
		o.code = src;
		o.code_len = strlen(src);
		o.script = "--code";
		if (cli_set_lang(&o, lang, &err) < 0 ||
		    cli_set_limit(&o, AB_LIM_TIMEOUT_MS, "20s", &err) < 0)
			_exit(3);
		r = run_main(&o, &res, &err);
		if (r < 0)
			dprintf(pfd[1], "%s%s%s", err.msg, err.fix[0] ? " (fix: " : "",
				err.fix[0] ? err.fix : "");
		else
			dprintf(pfd[1], "status %s, exit %d, %lld ms",
				result_status_name(res.status), res.exit_code,
				(long long) res.wall_ms);
		ok = r == 0 && res.status == AB_STATUS_EXITED && res.exit_code == 0;
		_exit(ok ? 0 : 1);
	}
	(void) close(pfd[1]);
	{
		ssize_t n = read(pfd[0], detail, size - 1);

		detail[n > 0 ? n : 0] = '\0';
	}
	(void) close(pfd[0]);
	r = (pid > 0 && waitpid(pid, &ws, 0) == pid && WIFEXITED(ws)) ? WEXITSTATUS(ws) : 1;
	return r == 0 ? 0 : -1;
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

int
doctor_checks(json_t **ret, struct ab_err *err)
{
	struct doctor d = { .checks = json_array() };
	struct ab_host h;
	char detail[PATH_MAX + 200];
	uid_t uid = getuid();
	gid_t gid = getgid();
	bool drop = false;

	(void) host_probe_paths(&h, err);
	if (h.is_root) {
		if (run_sandbox_user(NULL, &uid, &gid, err) < 0) {
			json_decref(d.checks);
			return err->code;
		}
		drop = true;
	}
	if (!h.bwrap_path[0]) {
		report_check(&d, "bwrap", CHECK_FAIL, "bubblewrap is not installed",
			     "apt-get install bubblewrap");
	} else {
		snprintf(detail, sizeof(detail), "%s%s", h.bwrap_path,
			 h.bwrap_setuid ? " (setuid: works, but unprivileged user namespaces are "
					  "the supported mode)"
					: "");
		report_check(&d, "bwrap", h.bwrap_setuid ? CHECK_WARN : CHECK_OK, detail,
			     "chmod u-s on bwrap where user namespaces are enabled");
		(void) host_probe_sandbox(&h, drop, uid, gid);
		report_check(&d, "user namespaces", h.bwrap_runs ? CHECK_OK : CHECK_FAIL,
			     h.bwrap_runs ? "bwrap starts a sandbox" : h.bwrap_error,
			     h.apparmor_restrict_userns
				     ? "install contrib/apparmor/agentbox and reload AppArmor"
				     : "sysctl -w user.max_user_namespaces=15000 (and "
				       "kernel.unprivileged_userns_clone=1 where it exists)");
		if (h.bwrap_runs) {
			report_check(
				&d, "disable-userns", h.has_disable_userns ? CHECK_OK : CHECK_FAIL,
				h.has_disable_userns ? "nested user namespaces can be disabled"
						     : "bwrap lacks --disable-userns",
				"install bubblewrap >= 0.8 (or run with --without disable-userns)");
			report_check(&d, "proc", h.proc_mountable ? CHECK_OK : CHECK_FAIL,
				     h.proc_mountable ? "a fresh /proc can be mounted"
						      : "cannot mount /proc (nested container?)",
				     "run outside the container, or give it an unmasked /proc");
		}
	}
	report_check(&d, "apparmor",
		     h.apparmor_restrict_userns && !h.bwrap_runs ? CHECK_FAIL : CHECK_OK,
		     h.apparmor_restrict_userns ? "apparmor_restrict_unprivileged_userns=1"
						: "no AppArmor user-namespace restriction",
		     "install contrib/apparmor/agentbox (see README)");
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
			     "run as root, or under `systemd-run --user --scope -p Delegate=yes`, "
			     "or set AGENTBOX_CGROUP to a delegated cgroup v2 directory");
	} else {
		snprintf(detail, sizeof(detail), "%s: memory %s, pids %s, cpu %s",
			 h.cg.kind == AB_CG_V2 ? "cgroup v2" : "cgroup v1",
			 h.cg.memory ? "yes" : "no", h.cg.pids ? "yes" : "no",
			 h.cg.cpu ? "yes" : "no");
		report_check(&d, "cgroups", h.cg.memory && h.cg.pids ? CHECK_OK : CHECK_WARN,
			     detail, h.cg.why[0] ? h.cg.why : NULL);
	}
	report_check(&d, "agentbox-init", h.init_path[0] ? CHECK_OK : CHECK_FAIL,
		     h.init_path[0] ? h.init_path : "not found",
		     "meson install, or set AGENTBOX_INIT");
	report_check(&d, "python3", access("/usr/bin/python3", X_OK) == 0 ? CHECK_OK : CHECK_WARN,
		     access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "not installed",
		     "apt-get install python3");
	doctor_runs_dir(&d);
	if (d.fails == 0) {
		int r = doctor_run_script("python", "print('ok')\n", detail, sizeof(detail));

		report_check(&d, "sandbox run", r == 0 ? CHECK_OK : CHECK_FAIL, detail,
			     "see the message above");
		r = doctor_run_script("node", "console.log('ok')\n", detail, sizeof(detail));
		report_check(&d, "sandbox run node", r == 0 ? CHECK_OK : CHECK_WARN, detail,
			     "install nodejs, or pass --node PATH");
	}
	*ret = json_pack("{s:s, s:b, s:o, s:b}", "agentbox_version", AB_VERSION, "as_root",
			 h.is_root, "checks", d.checks, "ok", d.fails == 0);
	return 0;
}

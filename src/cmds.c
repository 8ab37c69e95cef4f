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

static int
fail_usage(const char *msg, const char *arg)
{
	fprintf(stderr, "agentbox: %s%s%s\nTry 'agentbox help' for more information.\n", msg,
		arg ? " " : "", arg ? arg : "");
	return 2;
}

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
cmd_rm(int argc, char **argv)
{
	int status = 0;

	if (argc < 2)
		return fail_usage("usage: agentbox rm RUN_DIR...", NULL);
	for (int i = 1; i < argc; i++) {
		struct ab_err err = { 0 };
		cleanup_free char *name = NULL;
		cleanup_fd int pfd = -1;
		int r = open_run(argv[i], &pfd, &name);

		if (r == -EPERM) {
			fprintf(stderr,
				"agentbox: refusing to remove '%s': not a run directory agentbox "
				"created (no run-XXXXXX name or no %s marker) (fix: pass a path "
				"from a report's run_dir)\n",
				argv[i], AB_RUN_MARKER);
			status = AB_EXIT_SETUP;
			continue;
		}
		if (r < 0) {
			fprintf(stderr, "agentbox: cannot remove '%s': %s\n", argv[i],
				strerror(-r));
			status = AB_EXIT_SETUP;
			continue;
		}
		if (rundir_owner_alive(pfd, name)) {
			fprintf(stderr, "agentbox: '%s' belongs to a run that is still going\n",
				argv[i]);
			status = AB_EXIT_SETUP;
			continue;
		}
		if (walk_remove_tree(pfd, name, &err) < 0) {
			fprintf(stderr, "agentbox: removing '%s': %s\n", argv[i], err.msg);
			status = AB_EXIT_SETUP;
		}
	}
	return status;
}

int
cmd_gc(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "older-than", required_argument, NULL, 'o' },
		{ "runs-dir", required_argument, NULL, 'r' },
		{ "dry-run", no_argument, NULL, 'n' },
		{ NULL, 0, NULL, 0 },
	};
	cleanup_free char *root = NULL;
	uint64_t older_ms = 0;
	bool dry = false;
	cleanup_fd int rfd = -1;
	DIR *d;
	struct dirent *de;
	int c, removed = 0, kept = 0, status = 0;
	time_t now = time(NULL);

	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+:", opts, NULL)) != -1) {
		switch (c) {
		case 'o':
			if (units_parse_duration_ms(optarg, &older_ms) < 0)
				return fail_usage(
					"invalid --older-than (expected a duration like 24h, "
					"90m or 3600s):",
					optarg);
			break;
		case 'r':
			free(root);
			root = xstrdup(optarg);
			break;
		case 'n':
			dry = true;
			break;
		default:
			return fail_usage(
				"usage: agentbox gc [--runs-dir DIR] [--older-than DURATION] "
				"[--dry-run]",
				NULL);
		}
	}
	if (!root)
		root = rundir_default_root(geteuid());
	rfd = open(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (rfd < 0) {
		if (errno == ENOENT) {
			printf("removed 0 runs, kept 0\n");
			return 0;
		}
		fprintf(stderr, "agentbox: cannot open the runs directory '%s': %s\n", root,
			strerror(errno));
		return AB_EXIT_SETUP;
	}
	d = fdopendir(fcntl(rfd, F_DUPFD_CLOEXEC, 3));
	if (!d)
		return AB_EXIT_SETUP;
	while ((de = readdir(d))) {
		struct stat st;
		struct ab_err err = { 0 };

		if (!rundir_is_run(rfd, de->d_name))
			continue;
		if (fstatat(rfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if ((uint64_t) (now - st.st_mtime) * 1000 < older_ms ||
		    rundir_owner_alive(rfd, de->d_name)) {
			kept++;
			continue;
		}
		if (dry) {
			printf("would remove %s/%s\n", root, de->d_name);
			removed++;
			continue;
		}
		if (walk_remove_tree(rfd, de->d_name, &err) < 0) {
			fprintf(stderr, "agentbox: removing %s/%s: %s\n", root, de->d_name,
				err.msg);
			status = AB_EXIT_SETUP;
			kept++;
		} else {
			removed++;
		}
	}
	closedir(d);
	printf("%s %d run%s, kept %d\n", dry ? "would remove" : "removed", removed,
	       removed == 1 ? "" : "s", kept);
	return status;
}

int
cmd_collect(int argc, char **argv)
{
	cleanup_free char *name = NULL;
	cleanup_fd int pfd = -1, wfd = -1, dfd = -1;
	struct ab_err err = { 0 };
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
	json_t *out;
	char *text;
	int r;

	if (argc != 3)
		return fail_usage("usage: agentbox collect RUN_DIR DIR", NULL);
	r = open_run(argv[1], &pfd, &name);
	if (r < 0) {
		fprintf(stderr, "agentbox: '%s' is not a run directory agentbox created%s%s\n",
			argv[1], r == -EPERM ? "" : ": ", r == -EPERM ? "" : strerror(-r));
		return AB_EXIT_SETUP;
	}
	{
		cleanup_free char *work = xasprintf("%s/work", name);

		wfd = openat(pfd, work, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	}
	if (wfd < 0) {
		fprintf(stderr, "agentbox: '%s' has no workspace: %s\n", argv[1], strerror(errno));
		return AB_EXIT_SETUP;
	}
	dfd = hostfs_open_collect(argv[2], "collect: DIR", pfd, &err);
	if (dfd < 0) {
		fprintf(stderr, "agentbox: %s%s%s%s\n", err.msg, err.fix[0] ? " (fix: " : "",
			err.fix, err.fix[0] ? ")" : "");
		return AB_EXIT_USAGE;
	}
	wo.dst_dirfd = dfd;
	if (walk_tree(wfd, &wo, &m, &err) < 0) {
		fprintf(stderr, "agentbox: collect: %s\n", err.msg);
		return AB_EXIT_SETUP;
	}
	if (m.truncated_caps) {
		cleanup_free char *caps = walk_caps_text(m.truncated_caps);

		fprintf(stderr,
			"agentbox: collect: %s cut the listing or the copy short (see summary)\n",
			caps);
	}
	out = json_pack("{s:s, s:I, s:o, s:o}", "dir", argv[2], "bytes",
			(json_int_t) m.copied_bytes, "files", manifest_to_json(&m), "summary",
			manifest_summary_json(&m));
	text = json_dumps(out, JSON_INDENT(2) | JSON_SORT_KEYS);
	if (text)
		puts(text);
	free(text);
	json_decref(out);
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
	bool json;
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
					"detail", detail, "fix", fix));
	if (d->json)
		return;
	printf("[%-4s] %-16s %s\n", tag[st], name, detail ? detail : "");
	if (fix && st != CHECK_OK)
		printf("       %-16s fix: %s\n", "", fix);
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
		char *argv[] = { "run",    "--quiet",     "--rm",   "--timeout",  "20s",
				 "--lang", (char *) lang, "--code", (char *) src, NULL };

		(void) close(pfd[0]);
		run_opts_init(&o);
		result_init(&res, &o);
		if (cli_parse_run(9, argv, &o, &err) < 0)
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

int
cmd_doctor(int argc, char **argv)
{
	struct doctor d = { .checks = json_array() };
	struct ab_host h;
	struct ab_err err = { 0 };
	char detail[PATH_MAX + 200];
	uid_t uid = getuid();
	gid_t gid = getgid();
	bool drop = false;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0)
			d.json = true;
		else
			return fail_usage("unknown doctor option:", argv[i]);
	}
	(void) host_probe_paths(&h, &err);
	if (h.is_root) {
		if (run_sandbox_user(NULL, &uid, &gid, &err) < 0) {
			fprintf(stderr, "agentbox: %s\n", err.msg);
			return 1;
		}
		drop = true;
	}
	if (!d.json)
		printf("agentbox %s doctor (%s)\n", AB_VERSION,
		       h.is_root ? "as root: the sandbox runs as an unprivileged uid"
				 : "as an unprivileged user");

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
	if (d.fails == 0) {
		int r = doctor_run_script("python", "print('ok')\n", detail, sizeof(detail));

		report_check(&d, "sandbox run", r == 0 ? CHECK_OK : CHECK_FAIL, detail,
			     "see the message above");
		r = doctor_run_script("node", "console.log('ok')\n", detail, sizeof(detail));
		report_check(&d, "sandbox run node", r == 0 ? CHECK_OK : CHECK_WARN, detail,
			     "install nodejs, or pass --node PATH");
	}
	if (d.json) {
		json_t *o = json_pack("{s:s, s:o, s:b}", "agentbox_version", AB_VERSION, "checks",
				      d.checks, "ok", d.fails == 0);
		char *text = json_dumps(o, JSON_INDENT(2));

		puts(text ? text : "{}");
		free(text);
		json_decref(o);
	} else {
		json_decref(d.checks);
		printf("%s\n", d.fails == 0 ? "agentbox can run sandboxes here."
					    : "agentbox cannot run sandboxes here until the "
					      "failures above are fixed.");
	}
	return d.fails == 0 ? 0 : 1;
}

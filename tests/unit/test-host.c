/* test-host.c: what the host probe reads from /proc, against a fake /proc (issue 18), TAP.
 *
 * Ubuntu 23.10+ restricts unprivileged user namespaces with AppArmor
 * (kernel.apparmor_restrict_unprivileged_userns=1); that sysctl cannot be set on these
 * machines, so the probe reads it from cfg proc_root (a test-only setting, never from the
 * environment) and this test points it at a fake tree:
 *  1. the sysctl at 1, 0, absent: host_probe_paths() sees it, or not;
 *  2. the fix names the shipped profile and the commands that install it;
 *  3. `agentbox doctor` (doctor_checks) on such a host where bwrap cannot start a sandbox
 *     (AGENTBOX_BWRAP pointed at /bin/false): the user-namespace and AppArmor checks fail
 *     with that fix;
 *  4. a run on that host is refused (exit 125) with the same fix.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/stat.h>
#include <sys/wait.h>

#include "config.h"
#include "src/spec/cfg.h"
#include "src/spec/options.h"
#include "src/spec/record.h"
#include "src/supervisor/cmds.h"
#include "src/supervisor/host.h"
#include "src/supervisor/run.h"
#include "src/util/fdutil.h"
#include "src/util/macro.h"
#include "src/util/xalloc.h"
#include "tests/tap.h"

static char tmp[256];

static void
fake_sysctl(const char *value)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/sys/kernel/apparmor_restrict_unprivileged_userns", tmp);
	if (!value) {
		(void) unlink(path);
		return;
	}
	{
		cleanup_fd int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

		if (fd < 0 || write_all(fd, value, strlen(value)) < 0)
			abort();
	}
}

static void
use_cfg(const char *bwrap)
{
	struct ab_cfg c = { 0 };

	c.proc_root = tmp;
	c.bwrap = (char *) bwrap;
	c.init = getenv("AB_INIT"); /* tests/meson.build: the built agentbox-init */
	cfg_set(&c);
}

static bool
has(const char *s, const char *needle)
{
	return s && strstr(s, needle);
}

static json_t *
check_named(json_t *checks, const char *name)
{
	size_t i;
	json_t *c;

	json_array_foreach(checks, i, c)
	{
		if (strcmp(json_string_value(json_object_get(c, "check")), name) == 0)
			return c;
	}
	return NULL;
}

static void
test_probe(void)
{
	struct ab_host h;

	use_cfg(NULL);
	fake_sysctl("1\n");
	(void) host_probe_paths(&h, NULL);
	TAP_OK(h.apparmor_restrict_userns, "fake /proc: restrict_unprivileged_userns=1 is seen");
	fake_sysctl("0\n");
	(void) host_probe_paths(&h, NULL);
	TAP_OK(!h.apparmor_restrict_userns, "fake /proc: =0 is no restriction");
	fake_sysctl(NULL);
	(void) host_probe_paths(&h, NULL);
	TAP_OK(!h.apparmor_restrict_userns, "fake /proc: no such sysctl (not Ubuntu) is none");
	TAP_STREQ(cfg_proc_root(), tmp, "cfg_proc_root is the test's fake /proc");

	h.apparmor_restrict_userns = true;
	TAP_OK(has(host_userns_fix(&h),
		   "sudo install -m 0644 " AB_APPARMOR_PROFILE " /etc/apparmor.d/agentbox") &&
		       has(host_userns_fix(&h),
			   "sudo apparmor_parser -r /etc/apparmor.d/agentbox") &&
		       has(host_userns_fix(&h), "contrib/apparmor/agentbox"),
	       "restricted: the fix installs the shipped profile (%s), with the commands",
	       AB_APPARMOR_PROFILE);
	h.apparmor_restrict_userns = false;
	h.container[0] = '\0'; /* this very machine may carry a /.dockerenv */
	TAP_OK(!has(host_userns_fix(&h), "apparmor") &&
		       has(host_userns_fix(&h), "user.max_user_namespaces"),
	       "not restricted: the fix is the user-namespace sysctls");
	snprintf(h.container, sizeof(h.container), "docker");
	TAP_OK(has(host_userns_fix(&h),
		   "docker run --security-opt seccomp=" AB_CONTAINER_DIR "/seccomp.json"),
	       "in Docker: the fix is a seccomp profile that allows user namespaces");
	TAP_OK(has(host_proc_fix(&h), "docker run --security-opt systempaths=unconfined"),
	       "in Docker: an unmasked /proc is systempaths=unconfined");
	snprintf(h.container, sizeof(h.container), "podman");
	TAP_OK(has(host_proc_fix(&h), "podman run --security-opt unmask=/proc/*"),
	       "in podman: an unmasked /proc is unmask=/proc/*");
	snprintf(h.container, sizeof(h.container), "kubernetes");
	TAP_OK(has(host_proc_fix(&h), "procMount: Unmasked"),
	       "in Kubernetes: the securityContext's procMount: Unmasked");
	TAP_OK(has(host_hostname_fix(&h), "seccomp.json"),
	       "a refused sethostname: the seccomp profile that allows it");
}

static void
test_doctor(void)
{
	struct ab_err err = { 0 };
	json_t *j = NULL, *c;
	int r;

	use_cfg("/bin/false"); /* bwrap that never starts a sandbox, as under the restriction */
	fake_sysctl("1\n");
	r = doctor_checks(&j, &err);
	TAP_OK(r == 0 && j, "doctor runs (%s)", err.msg);
	if (!j)
		return;
	TAP_OK(json_is_false(json_object_get(j, "ok")), "doctor: not ok");
	c = check_named(json_object_get(j, "checks"), "user namespaces");
	TAP_OK(c && strcmp(json_string_value(json_object_get(c, "result")), "FAIL") == 0 &&
		       has(json_string_value(json_object_get(c, "fix")), "apparmor_parser -r"),
	       "doctor: user namespaces FAIL, and the fix installs the AppArmor profile");
	c = check_named(json_object_get(j, "checks"), "apparmor");
	TAP_OK(c && strcmp(json_string_value(json_object_get(c, "result")), "FAIL") == 0 &&
		       has(json_string_value(json_object_get(c, "detail")),
			   "kernel.apparmor_restrict_unprivileged_userns=1") &&
		       has(json_string_value(json_object_get(c, "fix")), AB_APPARMOR_PROFILE),
	       "doctor: apparmor FAIL names the sysctl and the profile");
	c = check_named(json_object_get(j, "checks"), "sandbox run");
	TAP_OK(!c, "doctor: no sandbox run is tried after a failure");
	json_decref(j);

	/* the same host without the restriction: the apparmor check passes, the fix differs */
	fake_sysctl("0\n");
	j = NULL;
	r = doctor_checks(&j, &err);
	c = j ? check_named(json_object_get(j, "checks"), "apparmor") : NULL;
	TAP_OK(r == 0 && c && strcmp(json_string_value(json_object_get(c, "result")), "ok") == 0,
	       "doctor: no restriction, the apparmor check is ok");
	c = j ? check_named(json_object_get(j, "checks"), "user namespaces") : NULL;
	TAP_OK(c && !has(json_string_value(json_object_get(c, "fix")), "apparmor"),
	       "doctor: ... and the user-namespace fix is not AppArmor's");
	json_decref(j);
}

/* A run on the restricted host: refused before anything ran, with the profile's fix. */
static void
test_refusal(void)
{
	char runs[300], msg[2048] = "";
	int p[2], ws = 0;
	pid_t pid;

	use_cfg("/bin/false");
	fake_sysctl("1\n");
	snprintf(runs, sizeof(runs), "%s/runs", tmp);
	/* started as root, the sandbox user must reach the run directory (0711, as rundir.c asks)
	 */
	if ((mkdir(runs, 0711) < 0 && errno != EEXIST) || chmod(tmp, 0711) < 0 ||
	    chmod(runs, 0711) < 0)
		abort();
	if (pipe2(p, O_CLOEXEC) < 0)
		abort();
	pid = fork();
	if (pid == 0) {
		/* run_main enters namespaces of its own: in a child, like doctor does */
		struct ab_run_opts o;
		struct ab_record res;
		struct ab_err err = { 0 };
		int r;

		(void) close(p[0]);
		run_opts_init(&o);
		result_init(&res, &o);
		o.quiet = o.rm = true;
		o.code = "print(1)\n";
		o.code_len = strlen(o.code);
		o.script = "--code";
		o.runs_dir = runs;
		if (cli_set_lang(&o, "python", &err) < 0)
			_exit(3);
		r = run_main(&o, &res, &err);
		dprintf(p[1], "%d\n%s\n%s", r, err.msg, err.fix);
		_exit(r < 0 && err.exit == AB_EXIT_SETUP ? 0 : 1);
	}
	(void) close(p[1]);
	(void) !read(p[0], msg, sizeof(msg) - 1);
	(void) close(p[0]);
	(void) waitpid(pid, &ws, 0);
	TAP_OK(WIFEXITED(ws) && WEXITSTATUS(ws) == 0,
	       "restricted host: the run is refused, exit 125");
	TAP_OK(has(msg, "bubblewrap cannot create a sandbox here"),
	       "restricted host: the message says bwrap cannot create a sandbox");
	TAP_OK(has(msg, "AppArmor restricts unprivileged user namespaces") &&
		       has(msg, "apparmor_parser -r /etc/apparmor.d/agentbox"),
	       "restricted host: the fix names the AppArmor profile and how to install it");
	if (!has(msg, "apparmor_parser") || !has(msg, "bubblewrap cannot")) {
		for (char *q = msg; *q; q++)
			if (*q == '\n')
				*q = ' ';
		printf("#   got: %s\n", msg);
	}
}

int
main(void)
{
	char path[400];

	snprintf(tmp, sizeof(tmp), "/tmp/test-host.XXXXXX");
	if (!mkdtemp(tmp))
		abort();
	snprintf(path, sizeof(path), "%s/sys", tmp);
	(void) mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/sys/kernel", tmp);
	(void) mkdir(path, 0755);
	test_probe();
	test_doctor();
	test_refusal();
	{
		char cmd[600];

		snprintf(cmd, sizeof(cmd), "rm -rf -- '%s'", tmp);
		if (system(cmd) != 0)
			printf("# could not remove %s\n", tmp);
	}
	return tap_done();
}

/* cgroup-scope.c: a delegated systemd scope for this process (cg_enter_scope, cgroup.h).
 *
 * On a systemd host every cgroup belongs to systemd except the subtrees it delegated, so
 * agentbox writes into none of them: it asks systemd, the way `systemd-run --scope` and
 * crun/podman do, for a transient scope with Delegate=yes that holds this process, from the
 * system manager as root and from the user's own manager otherwise. The call goes through
 * busctl (systemd's own D-Bus client; agentbox's binaries are static and link no D-Bus
 * library): StartTransientUnit with PIDs=[this process] queues a job that creates the scope's
 * cgroup and moves the process there, and the kernel's /proc/self/cgroup says when it has.
 * The scope empties, stops and is collected when the supervisor and its run are gone. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <linux/magic.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>

#include "../../spec/cfg.h"
#include "../../util/fdutil.h"
#include "../../util/macro.h"
#include "../../util/proc.h"
#include "cgroup-internal.h"

#define SCOPE_CALL_TIMEOUT_S "10"
#define SCOPE_MOVE_WAIT_MS   5000

static const char *const busctl_paths[] = { "/usr/bin/busctl", "/bin/busctl" };

static void why(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Sets cg_scope_why (truncation is fine: it is a message). */
static void
why(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cg_scope_why, sizeof(cg_scope_why), fmt, ap);
	va_end(ap);
}

/* Does /proc/self/cgroup's v2 line end with "/unit"? */
static bool
in_unit(const char *unit)
{
	char buf[4096], *line;
	ssize_t n = read_small_file_at(AT_FDCWD, "/proc/self/cgroup", buf, sizeof(buf));
	size_t ul = strlen(unit);

	if (n <= 0)
		return false;
	line = strstr(buf, "0::/");
	if (!line)
		return false;
	line[strcspn(line, "\n")] = '\0';
	n = (ssize_t) strlen(line);
	return (size_t) n > ul + 1 && line[n - (ssize_t) ul - 1] == '/' &&
	       strcmp(line + n - ul, unit) == 0;
}

/* The first line of what busctl said, for the message. */
static void
first_line(const char *text, char *out, size_t size)
{
	size_t n = strcspn(text, "\n");

	if (n >= size)
		n = size - 1;
	memcpy(out, text, n);
	out[n] = '\0';
}

/* Runs argv (busctl) with env, stdout to /dev/null, stderr captured in err. Returns its exit
 * status, or -errno. */
static int
run_busctl(const char *path, char *const argv[], char *const env[], char *err, size_t size)
{
	int p[2], ws, devnull;
	size_t got = 0;
	pid_t pid;

	err[0] = '\0';
	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
	pid = devnull < 0 ? -1 : fork();
	if (pid == 0) {
		sigset_t none;

		sigemptyset(&none);
		(void) sigprocmask(SIG_SETMASK, &none, NULL);
		if (dup2(devnull, 0) < 0 || dup2(devnull, 1) < 0 || dup2(p[1], 2) < 0)
			_exit(127);
		execve(path, argv, env);
		_exit(127);
	}
	(void) close(p[1]);
	if (devnull >= 0)
		(void) close(devnull);
	if (pid < 0) {
		(void) close(p[0]);
		return -errno;
	}
	for (;;) {
		char buf[256];
		ssize_t n = RETRY_EINTR(read(p[0], buf, sizeof(buf)));

		if (n <= 0)
			break;
		if (got + 1 < size) {
			size_t k = (size_t) n < size - 1 - got ? (size_t) n : size - 1 - got;

			memcpy(err + got, buf, k);
			got += k;
			err[got] = '\0';
		}
	}
	(void) close(p[0]);
	if (RETRY_EINTR(waitpid(pid, &ws, 0)) < 0)
		return -errno;
	return WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + (WIFSIGNALED(ws) ? WTERMSIG(ws) : 0);
}

int
cg_enter_scope(void)
{
	char unit[64], pidtxt[16], desc[96], bus[300], said[512], busenv[1100], rtenv[300],
		runtime[256];
	const char *busctl = NULL, *manager;
	bool root = geteuid() == 0;
	struct ab_cg_host h;
	struct statfs sf;
	uint32_t rnd = 0;
	int r, waited = 0;

	cg_scope_why[0] = '\0';
	if (cfg()->no_systemd_scope || (cfg()->cgroup && cfg()->cgroup[0]))
		return 0;
	if (statfs(CG_ROOT_DEFAULT, &sf) < 0 || sf.f_type != CGROUP2_SUPER_MAGIC ||
	    access("/run/systemd/system", F_OK) != 0)
		return 0; /* not a systemd host with a cgroup v2 tree */
	if (cg_probe(NULL, NULL, &h) == 0 && h.kind == AB_CG_V2)
		return 0; /* already in a delegated cgroup of its own (or stepped aside in one) */
	for (size_t i = 0; i < ARRAY_SIZE(busctl_paths) && !busctl; i++)
		if (access(busctl_paths[i], X_OK) == 0)
			busctl = busctl_paths[i];
	if (!busctl) {
		why("no busctl to ask systemd for a delegated scope (install systemd's busctl)");
		return 0;
	}
	if (root) {
		manager = "--system";
		snprintf(bus, sizeof(bus), "/run/dbus/system_bus_socket");
		rtenv[0] = busenv[0] = '\0';
	} else {
		manager = "--user";
		if (cfg()->xdg_runtime_dir && cfg()->xdg_runtime_dir[0] == '/' &&
		    strlen(cfg()->xdg_runtime_dir) < sizeof(runtime))
			snprintf(runtime, sizeof(runtime), "%s", cfg()->xdg_runtime_dir);
		else
			snprintf(runtime, sizeof(runtime), "/run/user/%u", (unsigned) geteuid());
		snprintf(bus, sizeof(bus), "%s/bus", runtime);
		snprintf(rtenv, sizeof(rtenv), "XDG_RUNTIME_DIR=%s", runtime);
		if (cfg()->dbus_address && cfg()->dbus_address[0] &&
		    strlen(cfg()->dbus_address) < 1024)
			snprintf(busenv, sizeof(busenv), "DBUS_SESSION_BUS_ADDRESS=%s",
				 cfg()->dbus_address);
		else
			snprintf(busenv, sizeof(busenv), "DBUS_SESSION_BUS_ADDRESS=unix:path=%s",
				 bus);
	}
	if (access(bus, F_OK) != 0 && (root || !cfg()->dbus_address || !cfg()->dbus_address[0])) {
		if (root)
			why("no system bus at %s to ask systemd for a delegated scope", bus);
		else
			why("no systemd user manager for uid %u to ask for a delegated scope "
			    "(no %s; `loginctl enable-linger` starts one without a login)",
			    (unsigned) geteuid(), bus);
		return 0;
	}
	if (getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK) < 0)
		rnd = (uint32_t) time(NULL);
	snprintf(unit, sizeof(unit), "agentbox-%d-%08" PRIx32 ".scope", (int) getpid(), rnd);
	snprintf(pidtxt, sizeof(pidtxt), "%d", (int) getpid());
	snprintf(desc, sizeof(desc), "agentbox supervisor %d", (int) getpid());
	{
		char *argv[] = { (char *) "busctl",
				 (char *) manager,
				 (char *) "--quiet",
				 (char *) "--timeout=" SCOPE_CALL_TIMEOUT_S,
				 (char *) "call",
				 (char *) "org.freedesktop.systemd1",
				 (char *) "/org/freedesktop/systemd1",
				 (char *) "org.freedesktop.systemd1.Manager",
				 (char *) "StartTransientUnit",
				 (char *) "ssa(sv)a(sa(sv))",
				 unit,
				 (char *) "fail",
				 (char *) "4",
				 (char *) "Description",
				 (char *) "s",
				 desc,
				 (char *) "PIDs",
				 (char *) "au",
				 (char *) "1",
				 pidtxt,
				 (char *) "Delegate",
				 (char *) "b",
				 (char *) "true",
				 (char *) "CollectMode",
				 (char *) "s",
				 (char *) "inactive-or-failed",
				 (char *) "0",
				 NULL };
		/* root: PATH and LANG only; a user: its manager's bus too */
		char *env[] = { (char *) "PATH=/usr/bin:/bin", (char *) "LANG=C",
				rtenv[0] ? rtenv : NULL, busenv[0] ? busenv : NULL, NULL };

		r = run_busctl(busctl, argv, env, said, sizeof(said));
	}
	if (r != 0) {
		char line[256];

		first_line(said, line, sizeof(line));
		why("systemd (%s manager) gave no delegated scope: busctl %s", manager + 2,
		    r < 0     ? strerror(-r)
		    : line[0] ? line
			      : "failed");
		return 0;
	}
	/* The job is queued; the scope starts (and takes this process) when it runs. */
	for (long ms = 1; !in_unit(unit); ms = ms * 2 > 50 ? 50 : ms * 2) {
		if (waited >= SCOPE_MOVE_WAIT_MS) {
			why("systemd accepted scope %s but did not move this process into it "
			    "within %d ms",
			    unit, SCOPE_MOVE_WAIT_MS);
			return 0;
		}
		cg_sleep_ms(ms);
		waited += (int) ms;
	}
	snprintf(cg_scope_unit, sizeof(cg_scope_unit), "%s", unit);
	/* step aside into the scope's leaf now, while this process is the only one in it:
	 * whatever it starts before its run (prepare's registry proxy) is born there too */
	(void) cg_probe(NULL, NULL, &h);
	return 1;
}

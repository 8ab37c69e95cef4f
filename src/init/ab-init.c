/* agentbox-init: PID 1 of every agentbox sandbox (bwrap --as-pid-1 execs it).
 *
 *   [AGENTBOX_INIT_NET_CHECK=INO] agentbox-init --status-fd N [--memwatch-fd N] [--landlock
 *                 [--landlock-net] [--landlock-scope] [--landlock-connect PORT]
 *                 [--writable DIR]] [--warm-fd N] -- CMD ARGS...
 *
 * AGENTBOX_INIT_NET_CHECK=INO (in the environment, removed before CMD starts: the script can
 * read /proc/1/cmdline): before anything else, the network namespace must not be the one
 * whose nsfs inode is INO (agentbox's own at start; 0: not checked), and must hold lo and no
 * other interface or route (netcheck.h); otherwise the run is refused. It is what keeps the
 * script off the network while it uses its own loopback freely: --landlock-net (TCP bind and
 * connect denied) is the opt-in strict mode, --net-strict.
 *
 * --landlock-connect PORT (implies --landlock-net) still lets TCP connect() reach PORT: for
 * `agentbox prepare`, the registry proxy listening in the install's own network namespace.
 *
 * --warm-fd N: a warm slot's socket to agentbox (src/warm/warm.h): kept open for CMD alone, whose
 * hook closes it before the script runs; agentbox-init closes its own copy once CMD started.
 *
 * --memwatch-fd N (a unix socket): before anything else, send agentbox's memory watchdog
 * (src/supervisor/memwatch.h) fds on the sandbox's /proc, /tmp and /dev/shm, then close it. Nothing
 * the script runs ever holds that socket.
 *
 * It makes itself non-dumpable (the script, same uid, cannot read its memory, environ or fds),
 * applies Landlock, starts CMD as PID 2, reaps every process that is re-parented to it, and
 * when CMD ends writes CMD's exact wait status and resource usage to the status fd
 * (see proto.h) and exits; the kernel then kills whatever is left in the PID namespace.
 * Before that record it looks for evidence of a file-size limit hit (fsize_scan).
 * As PID 1 it receives no signal from inside the sandbox that it does not handle, and it
 * handles none. Static, no allocation after start, no output but the status records. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "landlock.h"
#include "netcheck.h"
#include "proto.h"
#include "util/fdclose.h"
#include "util/fdpass.h"

static int status_fd = -1;

static void
send_msg(struct ab_init_msg *m)
{
	m->magic = AB_INIT_MAGIC;
	if (status_fd >= 0)
		(void) !write(status_fd, m, sizeof(*m));
}

static _Noreturn void
setup_failed(int err, const char *what)
{
	struct ab_init_msg m = { .kind = AB_INIT_SETUP_FAILED, .err = err };

	strncpy(m.text, what, sizeof(m.text) - 1);
	send_msg(&m);
	_exit(125);
}

/* The file-size scan's bounds: entries looked at in all three trees (the workspace's default
 * --inodes is 16384), and directory levels (one fd and one buffer each). About 2 us per entry
 * on the workspace tmpfs (16,000 files: 33 ms; 250: 0.3 ms), after the script has ended. */
#define SCAN_MAX_ENTRIES 32768
#define SCAN_MAX_DEPTH   16

struct ab_dirent64 {
	uint64_t d_ino;
	int64_t d_off;
	unsigned short d_reclen;
	unsigned char d_type;
	char d_name[];
};

/* Static: no allocation after start. One getdents64 buffer per directory level. */
static char scan_buf[SCAN_MAX_DEPTH][4096];

static bool
changed_since(const struct stat *st, const struct timespec *since)
{
	return st->st_mtim.tv_sec > since->tv_sec ||
	       (st->st_mtim.tv_sec == since->tv_sec && st->st_mtim.tv_nsec >= since->tv_nsec);
}

/* True when the tree under root holds a regular file changed since `since` whose size is at
 * least limit. The tree belongs to the script, whose other processes may still run: never
 * follows a link (O_NOFOLLOW, AT_SYMLINK_NOFOLLOW), never opens anything but directories
 * (O_DIRECTORY: a FIFO fails before it could block), stays on root's filesystem, and stops
 * when *budget entries have been looked at (*budget < 0 then). */
static bool
scan_tree(const char *root, off_t limit, const struct timespec *since, long *budget)
{
	int fds[SCAN_MAX_DEPTH];
	size_t pos[SCAN_MAX_DEPTH], len[SCAN_MAX_DEPTH];
	const int dflags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;
	struct stat st;
	bool hit = false;
	int depth = 0;
	dev_t dev;

	fds[0] = open(root, dflags);
	if (fds[0] < 0)
		return false;
	if (fstat(fds[0], &st) < 0) {
		(void) close(fds[0]);
		return false;
	}
	dev = st.st_dev;
	pos[0] = len[0] = 0;
	while (depth >= 0 && !hit && *budget >= 0) {
		struct ab_dirent64 *de;
		const char *n;
		long got;
		int fd;

		if (pos[depth] >= len[depth]) {
			got = syscall(SYS_getdents64, fds[depth], scan_buf[depth],
				      sizeof(scan_buf[depth]));
			if (got <= 0) {
				(void) close(fds[depth--]);
				continue;
			}
			pos[depth] = 0;
			len[depth] = (size_t) got;
		}
		de = (struct ab_dirent64 *) (scan_buf[depth] + pos[depth]);
		pos[depth] += de->d_reclen;
		n = de->d_name;
		if (n[0] == '.' && (n[1] == '\0' || (n[1] == '.' && n[2] == '\0')))
			continue;
		if (de->d_type != DT_REG && de->d_type != DT_DIR && de->d_type != DT_UNKNOWN)
			continue;
		if (--*budget < 0 || fstatat(fds[depth], n, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    st.st_dev != dev)
			continue;
		if (S_ISREG(st.st_mode)) {
			hit = st.st_size >= limit && changed_since(&st, since);
		} else if (S_ISDIR(st.st_mode) && depth + 1 < SCAN_MAX_DEPTH) {
			fd = openat(fds[depth], n, dflags);
			if (fd >= 0) {
				fds[++depth] = fd;
				pos[depth] = len[depth] = 0;
			}
		}
	}
	while (depth >= 0)
		(void) close(fds[depth--]);
	return hit;
}

/* AB_FSIZE_* bits (proto.h): where a file changed since `since` reached RLIMIT_FSIZE. */
static uint32_t
fsize_scan(const struct timespec *since)
{
	static const struct {
		const char *root;
		uint32_t bit;
	} trees[] = { { "/work", AB_FSIZE_WORK },
		      { "/tmp", AB_FSIZE_TMP },
		      { "/dev/shm", AB_FSIZE_SHM } };
	long budget = SCAN_MAX_ENTRIES;
	struct rlimit rl;
	uint32_t hit = 0;

	if (getrlimit(RLIMIT_FSIZE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY)
		return 0;
	for (size_t i = 0; i < sizeof(trees) / sizeof(trees[0]) && budget >= 0; i++)
		if (scan_tree(trees[i].root, (off_t) rl.rlim_cur, since, &budget))
			hit |= trees[i].bit;
	if (budget < 0)
		hit |= AB_FSIZE_PARTIAL;
	return hit;
}

/* --memwatch-fd: the sandbox's /proc, /tmp and /dev/shm to agentbox, in one message. */
static void
memwatch_send(int sock)
{
	static const char *const paths[] = { "/proc", "/tmp", "/dev/shm" };
	int fds[3];

	for (int i = 0; i < 3; i++) {
		fds[i] = open(paths[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fds[i] < 0)
			setup_failed(errno,
				     "agentbox-init: open the sandbox's /proc, /tmp, /dev/shm "
				     "for the memory watchdog");
	}
	if (fd_send(sock, "M", 1, fds, 3) < 0)
		setup_failed(errno, "agentbox-init: hand the memory watchdog its fds");
	for (int i = 0; i < 3; i++)
		(void) close(fds[i]);
	(void) close(sock);
}

int
main(int argc, char **argv)
{
	const char *writable[8] = { "/work", "/tmp", "/dev/shm", NULL };
	int n_writable = 3;
	bool landlock = false, ll_net = false, ll_scope = false;
	unsigned connect_ports[4] = { 0 };
	unsigned long long netns_not = 0;
	bool net_check = false;
	int n_ports = 0;
	struct ab_init_msg m = { .kind = AB_INIT_STARTED };
	struct timespec since = { 0, 0 };
	int i, abi = 0, memwatch_fd = -1;
	volatile int warm_fd = -1; /* used after vfork */
	pid_t child;
	sigset_t none;

	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--") == 0) {
			i++;
			break;
		} else if (strcmp(argv[i], "--status-fd") == 0 && i + 1 < argc) {
			char *end;
			long fd = strtol(argv[++i], &end, 10);

			if (*end != '\0' || fd < 3 || fd > 1024)
				setup_failed(EINVAL, "agentbox-init: bad --status-fd");
			status_fd = (int) fd;
		} else if (strcmp(argv[i], "--memwatch-fd") == 0 && i + 1 < argc) {
			char *end;
			long fd = strtol(argv[++i], &end, 10);

			if (*end != '\0' || fd < 3 || fd > 1024)
				setup_failed(EINVAL, "agentbox-init: bad --memwatch-fd");
			memwatch_fd = (int) fd;
		} else if (strcmp(argv[i], "--warm-fd") == 0 && i + 1 < argc) {
			char *end;
			long fd = strtol(argv[++i], &end, 10);

			if (*end != '\0' || fd < 3 || fd > 65535)
				setup_failed(EINVAL, "agentbox-init: bad --warm-fd");
			warm_fd = (int) fd;
		} else if (strcmp(argv[i], "--writable") == 0 && i + 1 < argc) {
			if (n_writable >= 7 || argv[i + 1][0] != '/')
				setup_failed(EINVAL, "agentbox-init: bad --writable");
			writable[n_writable++] = argv[++i];
			writable[n_writable] = NULL;
		} else if (strcmp(argv[i], "--landlock") == 0) {
			landlock = true;
		} else if (strcmp(argv[i], "--landlock-net") == 0) {
			ll_net = true;
		} else if (strcmp(argv[i], "--landlock-connect") == 0 && i + 1 < argc) {
			char *end;
			long port = strtol(argv[++i], &end, 10);

			if (*end != '\0' || port < 1 || port > 65535 || n_ports >= 3)
				setup_failed(EINVAL, "agentbox-init: bad --landlock-connect");
			connect_ports[n_ports++] = (unsigned) port;
			ll_net = true;
		} else if (strcmp(argv[i], "--landlock-scope") == 0) {
			ll_scope = true;
		} else {
			setup_failed(EINVAL, "agentbox-init: bad arguments");
		}
	}
	if (i >= argc)
		setup_failed(EINVAL, "agentbox-init: no command");
	{
		const char *v = getenv(AB_NETCHECK_ENV);

		if (v) {
			char *end;

			errno = 0;
			netns_not = strtoull(v, &end, 10);
			if (*end != '\0' || end == v || errno)
				setup_failed(EINVAL, "agentbox-init: bad " AB_NETCHECK_ENV);
			net_check = true;
			if (unsetenv(AB_NETCHECK_ENV) < 0)
				setup_failed(errno, "agentbox-init: unsetenv");
		}
	}
	if (status_fd >= 0 && fcntl(status_fd, F_SETFD, FD_CLOEXEC) < 0)
		setup_failed(errno, "agentbox-init: status fd");
	if (memwatch_fd >= 0 && memwatch_fd != status_fd)
		memwatch_send(memwatch_fd);
	/* Our own binary arrived as an fd (bwrap exec'd /proc/self/fd/N); nothing but 0-2, the
	 * status fd and a warm slot's socket (for the interpreter's hook) may reach CMD. */
	{
		int keep[2] = { status_fd, warm_fd };

		(void) fds_close_from_keep(3, keep, 2);
	}
	if (warm_fd >= 0 && (fcntl(warm_fd, F_GETFD) < 0 || fcntl(warm_fd, F_SETFD, 0) < 0))
		setup_failed(errno ? errno : EBADF, "agentbox-init: the warm slot's socket");

	/* T10/T29: no terminal of the host reaches the script (agentbox gives it /dev/null or a
	 * sealed copy of --stdin and pipes): the terminals it may adopt (TIOCSCTTY) are only the
	 * ptys of its own private /dev/pts. */
	for (int fd = 0; fd <= 2; fd++)
		if (isatty(fd))
			setup_failed(EPERM, "agentbox-init: a terminal on fd 0-2");
	/* T6/T12: not dumpable, so /proc/1/{environ,mem,fd} are closed to the script. */
	if (prctl(PR_SET_DUMPABLE, 0) < 0)
		setup_failed(errno, "prctl(PR_SET_DUMPABLE)");
	if (net_check) {
		char why[sizeof(m.text)];
		size_t pl = sizeof(AB_NETCHECK_PREFIX) - 1;

		memcpy(why, AB_NETCHECK_PREFIX, pl);
		if (ab_netcheck(netns_not, why + pl, sizeof(why) - pl) < 0)
			setup_failed(EPERM, why);
	}
	if (landlock) {
		const char *what = NULL;

		/* ptys: /dev/pts here is the sandbox's own devpts instance */
		abi = ab_landlock_apply(writable, ll_net, connect_ports, ll_scope, true, &what);
		if (abi < 0)
			setup_failed(-abi, what ? what : "landlock");
	}
	m.landlock_abi = abi;

	/* Coarse, like the file timestamps it is compared with: a write right after this has an
	 * mtime no earlier than it. Files agentbox copied in before are older. */
	(void) clock_gettime(CLOCK_REALTIME_COARSE, &since);
	/* vfork: the child only execs (or reports and leaves); no copy of our page tables */
	child = vfork();
	if (child < 0)
		setup_failed(errno, "fork");
	if (child == 0) {
		struct ab_init_msg f = { .kind = AB_INIT_EXEC_FAILED };

		sigemptyset(&none);
		(void) sigprocmask(SIG_SETMASK, &none, NULL);
		execv(argv[i], argv + i);
		f.err = errno;
		send_msg(&f);
		_exit(errno == ENOENT ? 127 : 126);
	}
	if (warm_fd >= 0)
		(void) close(
			warm_fd); /* the interpreter's alone: its end tells agentbox it is gone */
	m.pid = child;
	send_msg(&m);

	for (;;) {
		int ws;
		pid_t w = waitpid(-1, &ws, __WALL);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			_exit(125); /* ECHILD before our child ended cannot happen */
		}
		if (w == child) {
			struct ab_init_msg e = { .kind = AB_INIT_EXITED, .wstatus = ws };
			struct rusage ru;

			if (getrusage(RUSAGE_CHILDREN, &ru) == 0) {
				e.utime_us = ru.ru_utime.tv_sec * 1000000LL + ru.ru_utime.tv_usec;
				e.stime_us = ru.ru_stime.tv_sec * 1000000LL + ru.ru_stime.tv_usec;
				e.maxrss_kib = ru.ru_maxrss;
			}
			e.fsize_hit = fsize_scan(&since);
			send_msg(&e);
			if (WIFEXITED(ws))
				_exit(WEXITSTATUS(ws));
			_exit(128 + WTERMSIG(ws));
		}
	}
}

/* test-fdclose: fds_close_from_except / fds_close_from / fds_count_from / fds_cloexec_from
 * (src/util/fdclose.c),
 * on each of its paths: close_range(2); the /proc/self/fd walk (a seccomp filter makes
 * close_range fail with ENOSYS, as on Linux < 5.9); the brute-force loop (openat fails too, as
 * without /proc). Each case runs in a forked child that reports over a pipe below `first`. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <unistd.h>

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "src/util/fdclose.h"
#include "src/util/macro.h"
#include "tests/tap.h"

#define FIRST    20
#define REPORT   10 /* the child's report pipe: below FIRST, so it survives */
#define BELOW    19 /* an fd below FIRST that must stay open */
#define N_HIGH   5
#define N_CHECKS (N_HIGH + 1)

static const int high[N_HIGH] = { 20, 21, 22, 30, 500 };
static const int two[] = { 500, 21 }; /* keep == -3: fds_close_from_keep with these */

enum path {
	NATIVE,
	PROC_WALK,
	BRUTE
};
static const char *const path_name[] = { "close_range", "/proc/self/fd walk", "brute force" };

struct report {
	int setup_ok; /* the fds are in place and the filter (if any) is in force */
	int count;    /* NATIVE: the fds >= FIRST that fds_count_from sees the setup add; else -1 */
	int ret;      /* what the call returned */
	int open[N_CHECKS];    /* after the call: high[i] open?, then BELOW open? */
	int cloexec[N_CHECKS]; /* the same fds' FD_CLOEXEC (0 for a closed one) */
};

static bool
is_open(int fd)
{
	return fcntl(fd, F_GETFD) >= 0;
}

static bool
is_cloexec(int fd)
{
	int f = fcntl(fd, F_GETFD);

	return f >= 0 && (f & FD_CLOEXEC);
}

/* close_range -> ENOSYS; with brute also openat -> EACCES (no /proc to read). */
static bool
install_filter(bool brute)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_close_range, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_openat, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, brute ? SECCOMP_RET_ERRNO | EACCES : SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = ARRAY_SIZE(f), .filter = f };

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) < 0)
		return false;
	return syscall(SYS_close_range, 9999U, 9999U, 0) < 0 && errno == ENOSYS &&
	       (!brute || (open("/proc/self/fd", O_RDONLY | O_DIRECTORY) < 0 && errno == EACCES));
}

static void
child(enum path p, int keep, int wfd)
{
	struct report r = { .setup_ok = 1, .count = -1 };
	int before = fds_count_from(FIRST); /* inherited ones (a test harness's) */
	int nul = open("/dev/null", O_RDONLY);

	if (nul < 0 || dup2(wfd, REPORT) < 0 || dup2(nul, BELOW) < 0)
		r.setup_ok = 0;
	for (int i = 0; i < N_HIGH; i++)
		if (dup2(nul, high[i]) < 0)
			r.setup_ok = 0;
	/* nothing else >= FIRST: the pipe's own ends and nul are below it */
	if (wfd >= FIRST || nul >= FIRST)
		r.setup_ok = 0;
	if (p == NATIVE)
		r.count = fds_count_from(FIRST) - before;
	if (p != NATIVE && !install_filter(p == BRUTE))
		r.setup_ok = 0;
	r.ret = keep == -2   ? fds_close_from(FIRST)
		: keep == -3 ? fds_close_from_keep(FIRST, two, ARRAY_SIZE(two))
		: keep == -4 ? fds_cloexec_from(FIRST)
			     : fds_close_from_except(FIRST, keep);
	for (int i = 0; i < N_HIGH; i++) {
		r.open[i] = is_open(high[i]);
		r.cloexec[i] = is_cloexec(high[i]);
	}
	r.open[N_HIGH] = is_open(BELOW);
	r.cloexec[N_HIGH] = is_cloexec(BELOW);
	(void) !write(REPORT, &r, sizeof(r));
	_exit(0);
}

/* keep: the fd to keep, -1 none, -2: call fds_close_from() instead, -3: keep both of two[],
 * -4: fds_cloexec_from() (every fd >= first stays open, marked close-on-exec) */
static void
check(enum path p, int keep)
{
	struct report r = { 0 };
	int pfd[2], ws;
	pid_t pid;
	ssize_t n;
	bool want_ok = true;

	if (pipe(pfd) < 0)
		abort();
	pid = fork();
	if (pid < 0)
		abort();
	if (pid == 0) {
		(void) close(pfd[0]);
		child(p, keep, pfd[1]);
	}
	(void) close(pfd[1]);
	n = read(pfd[0], &r, sizeof(r));
	(void) close(pfd[0]);
	(void) waitpid(pid, &ws, 0);
	TAP_OK(n == (ssize_t) sizeof(r) && r.setup_ok, "%s, keep %d: set up", path_name[p], keep);
	if (p == NATIVE)
		TAP_OK(r.count == N_HIGH, "%s, keep %d: fds_count_from counts %d new fds (want %d)",
		       path_name[p], keep, r.count, N_HIGH);
	TAP_OK(r.ret == 0, "%s, keep %d: returns 0", path_name[p], keep);
	if (keep == -4) {
		for (int i = 0; i < N_HIGH; i++)
			if (!r.open[i] || !r.cloexec[i])
				want_ok = false;
		TAP_OK(want_ok, "%s, cloexec: every fd >= %d open and close-on-exec", path_name[p],
		       FIRST);
		TAP_OK(r.open[N_HIGH] && !r.cloexec[N_HIGH],
		       "%s, cloexec: fd %d below first open, not close-on-exec", path_name[p],
		       BELOW);
		return;
	}
	for (int i = 0; i < N_HIGH; i++)
		if (r.open[i] !=
		    (high[i] == keep || (keep == -3 && (high[i] == two[0] || high[i] == two[1]))))
			want_ok = false;
	TAP_OK(want_ok, "%s, keep %d: every fd >= %d closed but the kept one", path_name[p], keep,
	       FIRST);
	TAP_OK(r.open[N_HIGH], "%s, keep %d: fd %d below first stays open", path_name[p], keep,
	       BELOW);
}

int
main(void)
{
	static const int keeps[] = { -2, -1, 20, 21, 500, 7, -3, -4 };

	for (int p = NATIVE; p <= BRUTE; p++)
		for (size_t k = 0; k < ARRAY_SIZE(keeps); k++)
			check((enum path) p, keeps[k]);
	return tap_done();
}

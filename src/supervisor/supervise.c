#include "supervise.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <jansson.h>
#include <nettle/sha2.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <linux/sched.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/time.h>
#include <sys/wait.h>

#include "../init/netcheck.h"
#include "../util/fdclose.h"
#include "../util/fdutil.h"
#include "../util/macro.h"
#include "../util/proc.h"
#include "../util/xalloc.h"
#include "../warm/warm.h"
#include "feed.h"
#include "plan.h"
#include "progress.h"
#include "relay.h"

#ifndef KEYCTL_JOIN_SESSION_KEYRING
#define KEYCTL_JOIN_SESSION_KEYRING 1
#endif

struct child_err {
	int err;
	char what[60];
};

/* In the forked child: report what failed through the error pipe and leave. */
static _Noreturn void
child_fail(int errpipe, const char *what)
{
	struct child_err ce = { .err = errno };

	strncpy(ce.what, what, sizeof(ce.what) - 1);
	(void) !write(errpipe, &ce, sizeof(ce));
	_exit(127);
}

/* Everything between fork and exec. Only async-signal-safe calls. */
static _Noreturn void
child_exec(const struct ab_spawn *sp, bool in_cgroup, int in_fd, int out_w, int err_w, int args_fd,
	   int status_w, int init_fd, int mw_fd, int errpipe, pid_t parent)
{
	int keep[2] = { errpipe, -1 };
	static char *const envp[] = { "PATH=/usr/bin:/bin", NULL };
	char *argv[256];
	sigset_t none;
	int fds[AB_FD_FIRST_FREE];

	sigemptyset(&none);
	proc_reset_signals();
	(void) sigprocmask(SIG_SETMASK, &none, NULL);

	/* cgroup v1 (and v2 without clone3): join now, before bwrap forks anything. On v1
	 * this moves one thread (thread = process here) and costs no RCU grace period. */
	if (sp->cg && !in_cgroup && cg_attach_self(sp->cg) < 0)
		child_fail(errpipe, "join the run's cgroup");
	if (limits_apply_rlimits(sp->lp) < 0)
		child_fail(errpipe, "setrlimit");
	/* T8: a fresh, empty session keyring; the caller's keys stay out of reach. */
	if (syscall(SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, NULL) < 0 && errno != ENOSYS)
		child_fail(errpipe, "join a new session keyring");
	if (sp->drop) {
		/* T30: never run the sandbox as host root. */
		if (setgroups(0, NULL) < 0)
			child_fail(errpipe, "setgroups");
		if (setresgid(sp->drop_gid, sp->drop_gid, sp->drop_gid) < 0)
			child_fail(errpipe, "setresgid");
		if (setresuid(sp->drop_uid, sp->drop_uid, sp->drop_uid) < 0)
			child_fail(errpipe, "setresuid");
		if (getuid() == 0 || geteuid() == 0)
			child_fail(errpipe, "drop root");
	}
	/* After any credential change (which clears it): die with agentbox. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
		child_fail(errpipe, "PR_SET_PDEATHSIG");
	if (getppid() != parent)
		_exit(127);

	/* A session's socket (it may be any low number) to its fixed one first, for the
	 * driver (session.h); --nofile is above it (spec.c). */
	if (sp->session_fd > 2) {
		if (errpipe == AB_WARM_FD || dup2(sp->session_fd, AB_WARM_FD) < 0)
			child_fail(errpipe, "dup2 the session's socket");
		keep[1] = AB_WARM_FD;
	}
	/* Every source fd is >= 10 (F_DUPFD_CLOEXEC in the parent), so dup2 onto 0..5 cannot
	 * clobber another source (minijail's ensure_no_fd_conflict). */
	fds[0] = in_fd;
	fds[1] = out_w;
	fds[2] = err_w;
	fds[AB_FD_ARGS] = args_fd;
	fds[AB_FD_SECCOMP] = sp->seccomp_fd;
	fds[AB_FD_STATUS] = status_w;
	fds[AB_FD_INIT] = init_fd;
	fds[AB_FD_MEMWATCH] = mw_fd;
	for (int i = 0; i < AB_FD_FIRST_FREE; i++) {
		if (fds[i] < 0) {
			/* an unused slot must not keep whatever the caller had there (T7) */
			if (i > 2)
				(void) close(i);
			continue;
		}
		if (dup2(fds[i], i) < 0)
			child_fail(errpipe, "dup2");
	}
	/* A warm slot's socket goes to its fixed number, for the interpreter's hook (warm.h);
	 * --nofile is above it (warm_refusal). */
	if (sp->warm) {
		if (errpipe == AB_WARM_FD || dup2(sp->warm->hook_peer, AB_WARM_FD) < 0)
			child_fail(errpipe, "dup2 the warm slot's socket");
		keep[1] = AB_WARM_FD;
	}
	/* T7: nothing else crosses into the sandbox. The error pipe is CLOEXEC: keep it. */
	if (fcntl(errpipe, F_SETFD, FD_CLOEXEC) < 0)
		child_fail(errpipe, "fcntl");
	(void) fds_close_from_keep(AB_FD_FIRST_FREE, keep, 2);
	argv[0] = "bwrap";
	argv[1] = "--args";
	argv[2] = "3";
	{
		size_t n = 3;

		for (char **w = sp->cmd; *w && n < 255; w++)
			argv[n++] = *w;
		argv[n] = NULL;
	}
	execve(sp->bwrap_path, argv, envp);
	child_fail(errpipe, "execve bwrap");
}

struct stream_state {
	int fd;
	bool capped;            /* kill mode: past --output-limit, no longer read (see over_cap) */
	struct ab_relay_src rs; /* the live copy to our stdout/stderr; rs.dst NULL: none */
	struct ab_stream *s;
	const char *name; /* "stdout" or "stderr": the stream file's name in the run dir */
	int dirfd;        /* the run directory (borrowed), -1: no stream file (--rm) */
	int file_fd;      /* RUN_DIR/name once the stream passed the inline cap, else -1 */
	bool file_failed; /* could not be written: removed, and not tried again */
	struct sha256_ctx sha;
	struct ab_record *res; /* for warnings */
};

/* The stream file could not be written (the host's disk is full...): it goes, the report
 * keeps its excerpt, a warning says why. */
static void
file_fail(struct stream_state *st, int e)
{
	if (st->file_fd >= 0) {
		(void) close(st->file_fd);
		(void) unlinkat(st->dirfd, st->name, 0);
	}
	st->file_fd = -1;
	st->file_failed = true;
	result_warn(st->res,
		    "could not keep the whole of the script's %s in the run directory (%s): %s; "
		    "the report has its first and last bytes only",
		    st->name, st->name, strerror(e));
}

static void
file_write(struct stream_state *st, const char *p, size_t n)
{
	int r;

	if (st->file_fd < 0 || n == 0)
		return;
	sha256_update(&st->sha, n, (const uint8_t *) p);
	r = write_all(st->file_fd, p, n);
	if (r < 0)
		file_fail(st, -r);
}

/* Keeps n captured bytes: inline for the report (stream_keep), and from the first byte past
 * the inline cap on, every captured byte in the stream file, which is created then (in the run
 * directory by its fd: O_EXCL, never through a link, 0600) and given what the inline part
 * held so far. */
static void
capture(struct stream_state *st, const char *p, size_t n)
{
	struct ab_stream *s = st->s;

	if (st->file_fd < 0 && !st->file_failed && st->dirfd >= 0 &&
	    s->captured + n > s->inline_max) {
		st->file_fd = openat(st->dirfd, st->name,
				     O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (st->file_fd < 0) {
			file_fail(st, errno);
		} else {
			sha256_init(&st->sha);
			file_write(st, s->buf, s->len); /* all of it so far: no excerpt yet */
		}
	}
	file_write(st, p, n);
	stream_keep(s, p, n);
}

/* After the run: the stream file is complete (its sha256 for the report), or a warning says
 * what the report's excerpt left out and why it is nowhere else. */
static void
capture_end(struct stream_state *st)
{
	struct ab_stream *s = st->s;

	if (st->file_fd >= 0) {
		uint8_t d[SHA256_DIGEST_SIZE];

		sha256_digest(&st->sha, sizeof(d), d);
		for (size_t i = 0; i < sizeof(d); i++)
			snprintf(s->file_sha256 + 2 * i, 3, "%02x", d[i]);
		if (close(st->file_fd) < 0)
			file_fail(st, errno);
		else
			s->file_kept = true;
		st->file_fd = -1;
	}
	if (s->excerpt && !s->file_kept && st->dirfd < 0)
		result_warn(st->res,
			    "the report has only the first and last bytes of the script's %s "
			    "(%" PRIu64 " captured, --inline-output %zu): with --rm there is no "
			    "run directory to keep the rest in (drop --rm, or raise "
			    "--inline-output)",
			    st->name, s->captured, s->inline_max);
}

/* Whatever a stream still holds open (an error path left the run before capture_end). */
static void
stream_close(struct stream_state *st)
{
	if (st->file_fd >= 0)
		(void) close(st->file_fd);
	st->file_fd = -1;
}

/* Reads what is there, keeps up to cap bytes for the report (inline and in the stream file)
 * and queues them for the relay. Past the cap: with truncate (the default, issue 25) the run
 * goes on, the relay too, and the stream's last bytes go through the report's ring, so the
 * report ends with what the script printed last, and nothing past the cap is kept elsewhere
 * (agentbox holds no more than the ring); with kill returns 1 (stop reading: the caller kills
 * the run). Returns 0 otherwise; closes and sets fd to -1 on EOF. */
static int
pump(struct stream_state *st, uint64_t cap, bool truncate)
{
	/* static, not on the stack: a 64 KiB frame is probed page by page (stack-clash
	 * protection), 16 fresh pages per run even when nothing is printed; here only the bytes
	 * read are touched. The supervisor has one thread and pump is not reentered. */
	static char buf[65536];
	int rounds = 0;

	for (;;) {
		ssize_t n = read(st->fd, buf, sizeof(buf));
		size_t room, take;

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				return 0;
			n = 0; /* treat errors as EOF */
		}
		if (n == 0) {
			(void) close(st->fd);
			st->fd = -1;
			relay_src_end(&st->rs);
			return 0;
		}
		st->s->bytes += (uint64_t) n;
		room = st->s->captured < cap ? (size_t) (cap - st->s->captured) : 0;
		take = (size_t) n < room ? (size_t) n : room;
		if (take > 0)
			capture(st, buf, take);
		if ((size_t) n > take && truncate)
			stream_keep_past_cap(st->s, buf + take, (size_t) n - take);
		relay_push(&st->rs, buf, truncate ? (size_t) n : take); /* never waits */
		if (st->s->bytes > cap) {
			st->s->truncated = true;
			if (!truncate)
				return 1; /* stop reading: the caller kills the run now */
		}
		if (++rounds >= 16)
			return 0; /* back to poll: a fast writer must not starve the loop */
	}
}

/* After the run: what is still queued for our readers goes out while they take it, bounded:
 * RELAY_FLUSH_STALL_MS without progress or RELAY_FLUSH_MAX_MS in all, nothing more after an
 * interrupt. What did not go out is counted in the report, with a warning. */
#define RELAY_FLUSH_STALL_MS 2000
#define RELAY_FLUSH_MAX_MS   10000

static void
relay_wind_up(struct stream_state *so, struct stream_state *se, struct ab_relay_dst **dst,
	      size_t ndst, int sfd, bool interrupted, struct ab_record *res)
{
	struct stream_state *st[] = { so, se };
	static const char *const name[] = { "stdout", "stderr" };

	relay_src_end(&so->rs); /* a stream stopped at the cap: its held bytes */
	relay_src_end(&se->rs);
	capture_end(so);
	capture_end(se);
	if (ndst > 0)
		(void) relay_flush(dst, ndst, sfd, interrupted ? 0 : RELAY_FLUSH_STALL_MS,
				   interrupted ? 0 : RELAY_FLUSH_MAX_MS);
	for (size_t i = 0; i < ndst; i++)
		relay_dst_close(dst[i]);
	for (size_t i = 0; i < ARRAY_SIZE(st); i++) {
		const struct ab_relay_dst *d = st[i]->rs.dst;

		st[i]->s->relayed = d != NULL;
		st[i]->s->relay_dropped = st[i]->rs.dropped;
		if (d && st[i]->rs.dropped > 0)
			result_warn(
				res,
				"%" PRIu64 " of the %" PRIu64 " captured bytes of the script's %s "
				"were not relayed to agentbox's %s: %s (the capture has them all: "
				"%s.text, or %s.file past --inline-output)",
				st[i]->rs.dropped, st[i]->s->captured, name[i],
				d->caller_fd == STDERR_FILENO ? "stderr" : "stdout",
				relay_stop_reason(d), name[i], name[i]);
	}
}

#define READING_TREE_MAX 4096 /* processes of a run looked at in our own /proc */

static size_t tree_pids(pid_t pid, pid_t *out, size_t max);

/* Before agentbox kills the run (issue 25): what its processes used until now. Killed, they
 * are reaped by no parent that would add them up (the wait statuses of a run killed after 1 s
 * of CPU carried 5 ms), so their CPU (their own and their reaped children's) and their peak
 * resident sets are read first: from the sandbox's own /proc when the watchdog has it, else
 * from bwrap's process tree in ours. Once; a reading that fails leaves the wait statuses'. */
static void
reading_before_kill(pid_t bwrap, const struct ab_spawn *sp, struct ab_outcome *oc)
{
	uint64_t ticks = 0, hwm = 0;
	long hz = sysconf(_SC_CLK_TCK);

	if (oc->reading || hz <= 0)
		return;
	if (sp->memwatch && sp->memwatch->attached) {
		if (memwatch_reading(sp->memwatch, &ticks, &hwm) < 0)
			return;
	} else {
		cleanup_free pid_t *pids = xmalloc(READING_TREE_MAX * sizeof(*pids));
		size_t n = tree_pids(bwrap, pids, READING_TREE_MAX);

		for (size_t i = 0; i < n; i++) {
			char path[64], text[4096];
			uint64_t t;
			int64_t h;

			snprintf(path, sizeof(path), "/proc/%d/stat", (int) pids[i]);
			if (read_small_file_at(AT_FDCWD, path, text, sizeof(text)) > 0 &&
			    proc_parse_cpu_ticks(text, &t) == 0)
				ticks += t;
			snprintf(path, sizeof(path), "/proc/%d/status", (int) pids[i]);
			if (read_small_file_at(AT_FDCWD, path, text, sizeof(text)) > 0 &&
			    (h = proc_parse_hwm_kib(text)) > 0 && (uint64_t) h > hwm)
				hwm = (uint64_t) h;
		}
	}
	oc->reading = true;
	oc->reading_cpu_ms = (int64_t) (ticks * 1000 / (uint64_t) hz);
	oc->reading_maxrss_kib = (int64_t) hwm;
}

/* Ends the run, whatever the reason (timeout, CPU time, output cap, interrupt): SIGKILL to
 * bwrap and everything in the run's cgroup (bwrap's --die-with-parent and the PID namespace
 * take the rest, see supervise.h). Once; *kill_at is when, for kill_to_reaped_ms. */
static void
kill_run(pid_t pid, const struct ab_spawn *sp, struct ab_outcome *oc, bool *killed,
	 int64_t *kill_at)
{
	if (*killed)
		return;
	reading_before_kill(pid, sp, oc);
	*kill_at = now_ms();
	(void) kill(pid, SIGKILL);
	if (sp->cg)
		(void) cg_kill(sp->cg);
	*killed = true;
}

/* After kill_run, without a cgroup to kill: SIGKILL to every direct child but bwrap. They
 * are the sandbox's processes re-parented to us (we are their subreaper) because bwrap died
 * before its child had set its parent-death signal: a warm slot let go while bwrap was still
 * building the sandbox leaves its PID 1 running otherwise, and we would wait for it forever.
 * PID 1 of the sandbox's PID namespace takes the rest with it. Reads
 * /proc/self/task/TID/children (CONFIG_PROC_CHILDREN; we are single-threaded). */
static void
kill_orphans(pid_t bwrap)
{
	char path[64], buf[4096];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/self/task/%d/children", (int) getpid());
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	n = read(fd, buf, sizeof(buf) - 1);
	(void) close(fd);
	if (n <= 0)
		return;
	buf[n] = '\0';
	for (char *p = buf, *end; *p; p = end) {
		long child = strtol(p, &end, 10);

		if (end == p)
			break;
		if (child > 1 && child != (long) bwrap)
			(void) kill((pid_t) child, SIGKILL);
	}
}

/* What tmpfs pages the run's memory cgroup holds (memory.stat shmem; v1 total_shmem, its
 * hierarchy's), bytes, or -1: read when the interpreter has ended and PID 1 still lives, so
 * /tmp and /dev/shm are still there. dirfd[0] is the memory cgroup in both versions. */
static int64_t
cg_shmem_bytes(const struct ab_cg *cg)
{
	char buf[8192];
	const char *p;
	ssize_t n;

	if (cg->dirfd[0] < 0)
		return -1;
	n = read_small_file_at(cg->dirfd[0], "memory.stat", buf, sizeof(buf));
	if (n <= 0)
		return -1;
	p = cg->kind == AB_CG_V1 ? strstr(buf, "\ntotal_shmem ") : NULL;
	if (!p)
		p = strncmp(buf, "shmem ", 6) == 0 ? buf : strstr(buf, "\nshmem ");
	if (!p)
		return -1;
	p = strchr(p + 1, ' ');
	return p ? (int64_t) strtoull(p + 1, NULL, 10) : -1;
}

/* A stream passed --output-limit: stop reading it (the writer blocks, or gets EPIPE, instead
 * of flooding on while the kill lands) and kill the run. */
static void
over_cap(struct stream_state *st, struct ab_outcome *oc, pid_t pid, const struct ab_spawn *sp,
	 bool *killed, int64_t *kill_at)
{
	/* Stop reading but keep the pipe open until the run is gone: the writer then blocks
	 * on a full pipe until the SIGKILL lands, instead of getting EPIPE and exiting on its
	 * own first (Python: exit 120), which would race the kill for the status. */
	st->capped = true;
	if (*killed)
		return;
	oc->output_limited = true;
	kill_run(pid, sp, oc, killed, kill_at);
}

static void
add_rusage(struct rusage *acc, const struct rusage *ru)
{
	timeradd(&acc->ru_utime, &ru->ru_utime, &acc->ru_utime);
	timeradd(&acc->ru_stime, &ru->ru_stime, &acc->ru_stime);
	if (ru->ru_maxrss > acc->ru_maxrss)
		acc->ru_maxrss = ru->ru_maxrss;
}

static void
read_status(int *fd, struct ab_outcome *oc)
{
	struct ab_init_msg m;

	for (;;) {
		ssize_t n = read(*fd, &m, sizeof(m));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n <= 0) {
			(void) close(*fd);
			*fd = -1;
			return;
		}
		if ((size_t) n != sizeof(m) || m.magic != AB_INIT_MAGIC)
			continue; /* cannot happen with one write() per record; ignore */
		switch (m.kind) {
		case AB_INIT_STARTED:
			timing_mark("sandbox: init started");
			oc->init_started = true;
			oc->landlock_abi = m.landlock_abi;
			break;
		case AB_INIT_EXEC_FAILED:
			oc->init_exec_failed = true;
			oc->init_errno = m.err;
			break;
		case AB_INIT_EXITED:
			timing_mark("sandbox: script exited");
			oc->script_done = true;
			oc->script_wstatus = m.wstatus;
			oc->fsize_hit = m.fsize_hit;
			break;
		case AB_INIT_SETUP_FAILED:
			oc->init_setup_failed = true;
			oc->init_errno = m.err;
			memcpy(oc->init_text, m.text, sizeof(oc->init_text));
			oc->init_text[sizeof(oc->init_text) - 1] = '\0';
			break;
		default:
			break;
		}
	}
}

/* On cgroup v2, clone3(CLONE_INTO_CGROUP): the child starts life in the run's cgroup, so no
 * migration and no RCU grace period to wait for (Linux 5.7+). Returns the pid (0 in the
 * child), -1 with errno, or -2 when this does not apply (v1, no cgroup, an old kernel): the
 * caller then vforks and the child joins the cgroup itself. */
static pid_t
spawn_into_cgroup(const struct ab_spawn *sp, bool *ret_in_cgroup)
{
	*ret_in_cgroup = false;
	if (sp->cg && sp->cg->kind == AB_CG_V2 && sp->cg->dirfd[0] >= 0) {
		struct clone_args ca = {
			.flags = CLONE_INTO_CGROUP,
			.exit_signal = SIGCHLD,
			.cgroup = (uint64_t) sp->cg->dirfd[0],
		};
		long p = syscall(SYS_clone3, &ca, sizeof(ca));

		if (p >= 0) {
			*ret_in_cgroup = true;
			return (pid_t) p;
		}
		if (errno != ENOSYS && errno != EINVAL && errno != E2BIG && errno != EPERM)
			return -1;
	}
	return -2;
}

/* Closes whichever of the supervisor's pipe ends and streams are still open. */
static void
close_all(int *out_p, int *err_p, int *st_p, int *ep, int *so, int *se)
{
	int *all[] = { &out_p[0], &out_p[1], &err_p[0], &err_p[1], &st_p[0],
		       &st_p[1],  &ep[0],    &ep[1],    so,        se };

	for (size_t i = 0; i < ARRAY_SIZE(all); i++)
		if (*all[i] >= 0)
			(void) close(*all[i]);
}

/* Is fd the null device (1:3)? */
static bool
is_dev_null(int fd)
{
	struct stat st;

	return fstat(fd, &st) == 0 && S_ISCHR(st.st_mode) && major(st.st_rdev) == 1 &&
	       minor(st.st_rdev) == 3;
}

/* The memory watchdog's fds from agentbox-init (the sandbox's /proc, /tmp, /dev/shm), once:
 * attaches the watchdog. Returns 1 attached, 0 nothing there yet, -errno (with why set). */
static int
memwatch_receive(int *sock, struct ab_memwatch *mw, char *why, size_t whysize)
{
	char tag = 0;
	int fds[3] = { -1, -1, -1 };
	size_t nfds = 0;
	ssize_t n;
	int r;

	n = fd_recv(*sock, &tag, 1, MSG_DONTWAIT, fds, 3, &nfds, NULL);
	if (n == -EAGAIN)
		return 0;
	(void) close(*sock);
	*sock = -1;
	if (n != 1 || nfds != 3 || tag != 'M') {
		for (size_t i = 0; i < nfds; i++)
			(void) close(fds[i]);
		snprintf(why, whysize, "agentbox-init did not hand over the sandbox's /proc");
		return -EPROTO;
	}
	r = memwatch_add_tmpfs(mw, fds[1]);
	if (r == 0)
		r = memwatch_add_tmpfs(mw, fds[2]);
	(void) close(fds[1]);
	(void) close(fds[2]);
	if (r == 0)
		r = memwatch_attach(mw, fds[0], now_ms()); /* owns fds[0] from here */
	else
		(void) close(fds[0]);
	if (r == -EXDEV) {
		snprintf(why, whysize, AB_NETCHECK_PREFIX "%s",
			 "the sandbox shares agentbox's own network namespace");
		return r;
	}
	if (r == -ESRCH) {
		/* the whole run was over before we read its /proc (a script of a few ms on a
		 * busy machine): nothing to watch, as for one that ends between two polls */
		mw->ended_first = true;
		return 1;
	}
	if (r < 0) {
		snprintf(why, whysize, "cannot measure the sandbox: %s", strerror(-r));
		return r;
	}
	timing_mark("sandbox: memory watchdog attached");
	return 1;
}

/* ---- warm slots -------------------------------------------------------------------------- */

#define TREE_MAX 256 /* processes of a slot's sandbox looked at (a ready slot has 3 or 4) */

/* pid and the processes below it (from the parent links of one walk of /proc), at most max.
 * Returns how many are in out (out[0] is pid). */
static size_t
tree_pids(pid_t pid, pid_t *out, size_t max)
{
	DIR *d = opendir("/proc");
	pid_t(*links)[2] = NULL;
	size_t n = 0, cap = 0, k = 1;
	struct dirent *de;

	out[0] = pid;
	if (!d)
		return 1;
	while ((de = readdir(d))) {
		char path[64], buf[512], *rp;
		long p = strtol(de->d_name, &rp, 10);
		int ppid = 0;
		ssize_t len;

		if (*rp != '\0' || p <= 0)
			continue;
		snprintf(path, sizeof(path), "/proc/%ld/stat", p);
		len = read_small_file_at(AT_FDCWD, path, buf, sizeof(buf));
		/* "pid (comm) state ppid ...": comm may hold anything, so after its last ')' */
		rp = len > 0 ? memrchr(buf, ')', (size_t) len) : NULL;
		if (!rp || sscanf(rp + 1, " %*c %d", &ppid) != 1)
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 512;
			links = xrealloc(links, cap * sizeof(*links));
		}
		links[n][0] = (pid_t) p;
		links[n][1] = (pid_t) ppid;
		n++;
	}
	closedir(d);
	for (size_t i = 0; i < k; i++)
		for (size_t j = 0; j < n && k < max; j++)
			if (links[j][1] == out[i])
				out[k++] = links[j][0];
	free(links);
	return k;
}

/* The CPU time of every thread of pid (schedstat: ns), 0 when it cannot be read. */
static uint64_t
proc_cpu_ns(pid_t pid)
{
	char path[64];
	DIR *d;
	struct dirent *de;
	uint64_t sum = 0;

	snprintf(path, sizeof(path), "/proc/%d/task", (int) pid);
	d = opendir(path);
	if (!d)
		return 0;
	while ((de = readdir(d))) {
		char file[96], buf[128], *end;
		unsigned long long ns;
		long tid = strtol(de->d_name, &end, 10);

		if (*end != '\0' || tid <= 0)
			continue;
		snprintf(file, sizeof(file), "/proc/%d/task/%ld/schedstat", (int) pid, tid);
		if (read_small_file_at(AT_FDCWD, file, buf, sizeof(buf)) > 0 &&
		    sscanf(buf, "%llu", &ns) == 1)
			sum += ns;
	}
	closedir(d);
	return sum;
}

/* What pid holds in memory, bytes: its proportional share (smaps_rollup Pss), else its
 * resident size; 0 when neither can be read. */
static uint64_t
proc_mem_bytes(pid_t pid)
{
	static const char *const files[][2] = { { "smaps_rollup", "\nPss:" },
						{ "status", "\nVmRSS:" } };
	char buf[4096];

	for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
		char path[64];
		unsigned long long kib;
		const char *p;
		ssize_t n;

		snprintf(path, sizeof(path), "/proc/%d/%s", (int) pid, files[i][0]);
		n = read_small_file_at(AT_FDCWD, path, buf, sizeof(buf));
		p = n > 0 ? strstr(buf, files[i][1]) : NULL;
		if (p && sscanf(p + strlen(files[i][1]), "%llu", &kib) == 1)
			return (uint64_t) kib << 10;
	}
	return 0;
}

/* The slot failed: why (with the tail of what the sandbox wrote to stderr) goes to the
 * library. Returns 1 (the slot ends). */
static int __attribute__((format(printf, 4, 5)))
warm_fail(struct ab_warm *w, const char *tail, size_t tail_len, const char *fmt, ...)
{
	cleanup_free char *text = NULL;
	json_t *msg;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(w->failure, sizeof(w->failure), fmt, ap);
	va_end(ap);
	while (tail_len > 0 && (tail[tail_len - 1] == '\n' || tail[tail_len - 1] == ' '))
		tail_len--;
	if (tail_len > 0 && n >= 0 && (size_t) n < sizeof(w->failure) - 3)
		snprintf(w->failure + n, sizeof(w->failure) - (size_t) n, ": %.*s",
			 (int) (tail_len > 300 ? 300 : tail_len),
			 tail + (tail_len > 300 ? tail_len - 300 : 0));
	w->state = AB_WARM_FAILED;
	msg = json_pack("{s:{s:s%}}", "failed", "message", w->failure, strlen(w->failure));
	text = msg ? json_dumps(msg, JSON_COMPACT) : NULL;
	json_decref(msg);
	if (text)
		(void) send(w->ctl_fd, text, strlen(text), MSG_NOSIGNAL | MSG_DONTWAIT);
	timing_mark("warm: slot failed");
	return 1;
}

static void
ctl_send(struct ab_warm *w, json_t *msg)
{
	cleanup_free char *text = msg ? json_dumps(msg, JSON_COMPACT) : NULL;

	json_decref(msg);
	if (text)
		(void) send(w->ctl_fd, text, strlen(text), MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* The slot's processes: its cgroup's, which bwrap entered before its exec (one read), else
 * bwrap's tree from a walk of all of our /proc (a read per process on the host). */
static size_t
slot_pids(struct ab_cg *cg, pid_t bwrap, pid_t *out, size_t max)
{
	cleanup_free pid_t *listed = NULL;
	int n = cg ? cg_list_procs(cg, &listed) : -EBADF;
	size_t k = 0;

	if (n <= 0)
		return tree_pids(bwrap, out, max);
	for (int i = 0; i < n && k < max; i++)
		if (listed[i] != getpid())
			out[k++] = listed[i];
	return k;
}

/* The interpreter's hook is ready: measure what the slot holds and tell the library. */
static void
warm_ready(struct ab_warm *w, struct ab_cg *cg, pid_t bwrap, int64_t t0)
{
	pid_t pids[TREE_MAX];
	size_t n = slot_pids(cg, bwrap, pids, TREE_MAX);
	json_t *mods = json_array();

	w->state = AB_WARM_READY;
	w->ready_ms = now_ms() - t0;
	w->base_cpu_ns = 0;
	w->memory_bytes = proc_mem_bytes(getpid());
	for (size_t i = 0; i < n; i++) {
		w->base_cpu_ns += proc_cpu_ns(pids[i]);
		w->memory_bytes += proc_mem_bytes(pids[i]);
	}
	STRV_FOREACH (m, &w->modules)
		json_array_append_new(mods, json_string(*m));
	ctl_send(w, json_pack("{s:{s:o, s:I, s:I}}", "ready", "modules", mods, "memory_bytes",
			      (json_int_t) w->memory_bytes, "ready_ms", (json_int_t) w->ready_ms));
	timing_mark("warm: slot ready");
}

/* One message from the library on ctl_fd: a claim, with the fds it carries. Returns 0 when
 * it was taken (the run starts), 1 when the slot ends (the library is gone), 2 when it was
 * declined or ignored (the slot waits on), -errno when taking it failed (err set). */
static int
warm_claim(struct ab_spawn *sp, struct stream_state *so, struct stream_state *se,
	   struct ab_err *err)
{
	struct ab_warm *w = sp->warm;
	char text[4096], why[300] = "";
	int fds[4] = { -1, -1, -1, -1 };
	size_t nfds = 0;
	bool cut = false;
	cleanup_free char *go = NULL;
	size_t go_len = 0;
	json_t *msg;
	ssize_t n;
	int r;

	n = fd_recv(w->ctl_fd, text, sizeof(text) - 1, MSG_DONTWAIT, fds, ARRAY_SIZE(fds), &nfds,
		    &cut);
	if (n == -EAGAIN)
		return 2;
	if (n <= 0)
		return 1; /* EOF: the pool let the slot go */
	text[n] = '\0';
	msg = json_loads(text, 0, NULL);
	if (!json_is_object(json_object_get(msg, "claim")) || cut || w->state != AB_WARM_READY) {
		for (size_t i = 0; i < nfds; i++)
			(void) close(fds[i]);
		json_decref(msg);
		ctl_send(w, json_pack("{s:s}", "declined",
				      w->state != AB_WARM_READY ? "the slot is not ready"
								: "not a claim"));
		return 2;
	}
	r = w->claim(w->ctx, json_object_get(msg, "claim"), fds, nfds, why, sizeof(why));
	json_decref(msg);
	if (r != 0) {
		ctl_send(w, json_pack("{s:s}", "declined", why[0] ? why : "refused"));
		return r < 0 ? ab_err_set(err, r, "warm slot: %s", why) : 2;
	}
	ctl_send(w, json_pack("{s:b}", "accepted", 1));
	w->state = AB_WARM_CLAIMED;
	timing_mark("warm: claimed");
	r = w->prepare(w->ctx, sp, &go, &go_len, err);
	if (r < 0)
		return r;
	/* whatever the interpreter wrote while it started is not the run's */
	for (struct stream_state *st = so; st; st = st == so ? se : NULL) {
		char buf[4096];

		while (st->fd >= 0 && read(st->fd, buf, sizeof(buf)) > 0)
			;
	}
	/* the hook reads it at once, but a message larger than the socket's buffer (a run's
	 * arguments: up to AB_WARM_MSG_MAX) takes more than one write on this non-blocking fd */
	r = write_all_deadline(w->hook_fd, go, go_len, now_ms() + AB_WARM_HANDOVER_MS);
	(void) close(w->hook_fd);
	w->hook_fd = -1;
	if (r < 0)
		return ab_err_set(err, r, "hand the script to the warm slot: %s", strerror(-r));
	timing_mark("warm: handed over");
	return 0;
}

/* A warm slot waits: for its interpreter's hook to be ready, then for a claim. Returns 0 when
 * a claim was taken and prepared (the run starts now), 1 when the slot ends without a run
 * (unused or failed; the caller kills the sandbox), -errno when the claimed run failed to
 * start (err set). */
static int
warm_wait(struct ab_spawn *sp, pid_t pid, int sfd, struct stream_state *so, struct stream_state *se,
	  int *st_fd, int *mw_fd, struct ab_outcome *oc, struct ab_err *err)
{
	struct ab_warm *w = sp->warm;
	cleanup_free char *hbuf = NULL;
	size_t hlen = 0, hcap = 0;
	char tail[1024];
	size_t tail_len = 0;
	int64_t t0 = now_ms();
	int r;

	r = write_all(w->hook_fd, w->config, w->config_len);
	if (r < 0)
		return warm_fail(w, NULL, 0, "send the interpreter's hook its config: %s",
				 strerror(-r));
	(void) fd_set_nonblock(w->hook_fd, 1);
	for (;;) {
		struct pollfd pfd[8];
		int64_t now = now_ms();
		int timeout = -1;
		bool hook_gone = false;

		if (w->state == AB_WARM_STARTING) {
			if (now - t0 >= w->ready_timeout_ms)
				return warm_fail(w, tail, tail_len,
						 "the interpreter was not ready after %lld ms",
						 (long long) w->ready_timeout_ms);
			timeout = (int) (w->ready_timeout_ms - (now - t0));
		}
		pfd[0] = (struct pollfd){ .fd = sfd, .events = POLLIN };
		pfd[1] = (struct pollfd){ .fd = so->fd, .events = POLLIN };
		pfd[2] = (struct pollfd){ .fd = se->fd, .events = POLLIN };
		pfd[3] = (struct pollfd){ .fd = *st_fd, .events = POLLIN };
		pfd[4] = (struct pollfd){ .fd = *mw_fd, .events = POLLIN };
		pfd[5] = (struct pollfd){ .fd = w->hook_fd, .events = POLLIN };
		pfd[6] = (struct pollfd){ .fd = w->ctl_fd, .events = POLLIN };
		pfd[7] = (struct pollfd){ .fd = sp->watch_fd > 2 ? sp->watch_fd : -1,
					  .events = POLLIN };
		if (poll(pfd, ARRAY_SIZE(pfd), timeout) < 0 && errno != EINTR)
			return ab_err_set(err, -errno, "poll");
		if (pfd[0].revents & POLLIN) {
			struct signalfd_siginfo si;

			while (read(sfd, &si, sizeof(si)) == (ssize_t) sizeof(si)) {
				siginfo_t info = { 0 };

				if (si.ssi_signo != SIGCHLD) {
					w->state = AB_WARM_UNUSED;
					return 1;
				}
				if (waitid(P_PID, (id_t) pid, &info, WEXITED | WNOHANG | WNOWAIT) ==
					    0 &&
				    info.si_pid == pid)
					return warm_fail(w, tail, tail_len,
							 "the sandbox ended before it was used");
			}
		}
		/* the interpreter's start-up output is not a run's: kept only for a failure */
		for (int i = 1; i <= 2; i++) {
			struct stream_state *st = i == 1 ? so : se;
			char buf[4096];
			ssize_t n;

			if (!(pfd[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			while ((n = read(st->fd, buf, sizeof(buf))) > 0) {
				size_t keep = (size_t) n < sizeof(tail) ? (size_t) n : sizeof(tail);

				if (tail_len + keep > sizeof(tail)) {
					memmove(tail, tail + (tail_len + keep - sizeof(tail)),
						sizeof(tail) - keep);
					tail_len = sizeof(tail) - keep;
				}
				memcpy(tail + tail_len, buf + (size_t) n - keep, keep);
				tail_len += keep;
			}
			if (n == 0) {
				(void) close(st->fd);
				st->fd = -1;
			}
		}
		if (*mw_fd >= 0 && (pfd[4].revents & (POLLIN | POLLHUP | POLLERR)) &&
		    memwatch_receive(mw_fd, sp->memwatch, oc->memwatch_error,
				     sizeof(oc->memwatch_error)) < 0)
			return warm_fail(w, NULL, 0, "%s", oc->memwatch_error);
		if (*st_fd >= 0 && (pfd[3].revents & (POLLIN | POLLHUP | POLLERR))) {
			read_status(st_fd, oc);
			if (oc->init_setup_failed)
				return warm_fail(w, NULL, 0, "sandbox hardening failed: %s: %s",
						 oc->init_text, strerror(oc->init_errno));
			if (oc->init_exec_failed)
				return warm_fail(w, NULL, 0, "the interpreter could not start: %s",
						 strerror(oc->init_errno));
			if (oc->script_done)
				return warm_fail(w, tail, tail_len,
						 "the interpreter ended before it was used (wait "
						 "status %d)",
						 oc->script_wstatus);
			if (oc->init_started && sp->memwatch && !sp->memwatch->attached &&
			    (*mw_fd < 0 || memwatch_receive(mw_fd, sp->memwatch, oc->memwatch_error,
							    sizeof(oc->memwatch_error)) <= 0))
				return warm_fail(w, NULL, 0, "%s",
						 oc->memwatch_error[0]
							 ? oc->memwatch_error
							 : "agentbox-init started without handing "
							   "over the sandbox's /proc");
		}
		if (w->hook_fd >= 0 && (pfd[5].revents & (POLLIN | POLLHUP | POLLERR))) {
			for (;;) {
				ssize_t n;

				if (hcap - hlen < 4096) {
					hcap = hcap ? 2 * hcap : 8192;
					hbuf = xrealloc(hbuf, hcap);
				}
				n = read(w->hook_fd, hbuf + hlen, hcap - hlen);
				if (n > 0) {
					hlen += (size_t) n;
					if (hlen > AB_WARM_MSG_MAX + 4)
						return warm_fail(w, NULL, 0,
								 "the interpreter's hook sent too "
								 "much");
					continue;
				}
				hook_gone = n == 0 || errno != EAGAIN;
				break;
			}
			for (;;) {
				struct strv f = { 0 };
				ssize_t used = warm_msg_parse(hbuf, hlen, AB_WARM_MSG_MAX, &f);

				if (used == 0)
					break;
				if (used < 0 || f.n == 0 || w->state != AB_WARM_STARTING) {
					strv_done(&f);
					return warm_fail(
						w, NULL, 0,
						"the interpreter's hook broke the protocol");
				}
				memmove(hbuf, hbuf + used, hlen - (size_t) used);
				hlen -= (size_t) used;
				if (strcmp(f.v[0], "ready") == 0) {
					for (size_t i = 1; i < f.n; i++)
						strv_push(&w->modules, f.v[i]);
					strv_done(&f);
					warm_ready(w, sp->cg, pid, t0);
					continue;
				}
				r = warm_fail(w, tail, tail_len, "%s",
					      f.n > 1 && strcmp(f.v[0], "error") == 0
						      ? f.v[1]
						      : "the interpreter's hook failed");
				strv_done(&f);
				return r;
			}
			if (hook_gone)
				return warm_fail(w, tail, tail_len,
						 "the interpreter ended before it was used");
		}
		if (pfd[7].revents & (POLLIN | POLLHUP | POLLERR)) {
			w->state = AB_WARM_UNUSED; /* whoever started us is gone */
			return 1;
		}
		if (pfd[6].revents & (POLLIN | POLLHUP | POLLERR)) {
			r = warm_claim(sp, so, se, err);
			if (r == 1)
				w->state = AB_WARM_UNUSED;
			if (r != 2)
				return r;
		}
	}
}

/* Each stream's inline part: --inline-output, and with truncate never more than the
 * --output-limit that bounds what is kept of a stream, its tail included. */
static size_t
inline_cap(const struct ab_spawn *sp)
{
	if (sp->output_truncate && sp->lp->output_bytes < sp->inline_bytes)
		return (size_t) sp->lp->output_bytes;
	return sp->inline_bytes;
}

static int
dup_high(int fd)
{
	return fd < 0 ? -1 : fcntl(fd, F_DUPFD_CLOEXEC, 10);
}

/* One sandbox under supervision, from its fds to the last reap: what supervise_run's steps
 * share. */
struct sup {
	struct ab_spawn *sp;
	struct ab_record *res;
	struct ab_outcome *oc;
	/* for the child, each moved high (dup_high) so that its dup2()s onto the fixed numbers
	 * never clobber one another */
	int args_fd, in_fd, seccomp_hi, init_fd;
	int args_w; /* supervise_prestart: the pipe bwrap reads its arguments from, our end */
	int out_p[2], err_p[2], st_p[2], ep[2], mw_p[2];
	int sfd; /* signalfd: SIGCHLD and the signals that stop a run */
	struct stream_state so, se;
	struct ab_relay_dst dout, derr;
	struct ab_relay_dst *dst[2];
	size_t ndst;
	struct ab_progress prog;
	struct ab_feed feed;
	pid_t pid;
	bool killed, children, end_polled;
	int64_t t0, deadline, kill_at, next_tick;
};

static void
sup_init(struct sup *s, struct ab_spawn *sp, struct ab_record *res, struct ab_outcome *oc)
{
	int dirfd = sp->stream_dirfd > 2 ? sp->stream_dirfd : -1;

	*s = (struct sup){
		.sp = sp,
		.res = res,
		.oc = oc,
		.args_fd = -1,
		.args_w = -1,
		.in_fd = -1,
		.seccomp_hi = -1,
		.init_fd = -1,
		.out_p = { -1, -1 },
		.err_p = { -1, -1 },
		.st_p = { -1, -1 },
		.ep = { -1, -1 },
		.mw_p = { -1, -1 },
		.sfd = -1,
		.so = { .fd = -1,
			.s = &res->out,
			.name = "stdout",
			.dirfd = dirfd,
			.file_fd = -1,
			.res = res },
		.se = { .fd = -1,
			.s = &res->err,
			.name = "stderr",
			.dirfd = dirfd,
			.file_fd = -1,
			.res = res },
		.dout = { .fd = -1 },
		.derr = { .fd = -1 },
		.prog = { .fd = -1 },
		.feed = { .src = -1, .dst = -1 },
		.children = true,
		.kill_at = -1,
	};
	memset(oc, 0, sizeof(*oc));
	oc->tmpfs_end_bytes = oc->tmpfs_peak_bytes = -1;
	res->out.inline_max = res->err.inline_max = inline_cap(sp);
}

static void
sup_kill(struct sup *s)
{
	kill_run(s->pid, s->sp, s->oc, &s->killed, &s->kill_at);
}

/* bwrap's arguments in a memfd (no ARG_MAX limit, nothing in `ps`: T6), or a pipe they are
 * written to later (supervise_prestart); the sandbox's stdin, the seccomp program and
 * agentbox-init, each high. */
static int
sup_open_fds(struct sup *s, bool later, struct ab_err *err)
{
	const struct ab_spawn *sp = s->sp;
	int r;

	if (later) {
		int p[2];

		if (pipe2(p, O_CLOEXEC) < 0)
			return ab_err_set(err, -errno, "pipe2: %s", strerror(errno));
		s->args_fd = p[0];
		s->args_w = p[1];
		/* the head first, before bwrap exists (it fits: supervise.h): whatever ends
		 * this pipe early, bwrap never reads an empty option list */
		if (sp->args_len > AB_PRESTART_HEAD_MAX)
			return ab_err_set(err, -E2BIG, "internal: bwrap's first options too long");
		r = write_all(s->args_w, sp->args_buf, sp->args_len);
		if (r < 0)
			return ab_err_set(err, r, "write bwrap arguments");
	} else {
		s->args_fd = memfd_create("agentbox-bwrap-args", MFD_CLOEXEC);
		if (s->args_fd < 0)
			return ab_err_set(err, -errno, "memfd_create: %s", strerror(errno));
		r = write_all(s->args_fd, sp->args_buf, sp->args_len);
		if (r < 0 || lseek(s->args_fd, 0, SEEK_SET) < 0)
			return ab_err_set(err, r < 0 ? r : -errno, "write bwrap arguments");
	}
	{
		int hi = dup_high(s->args_fd);

		(void) close(s->args_fd);
		s->args_fd = hi;
	}
	if (sp->stdin_feed) {
		int end = -1;

		r = feed_open(&s->feed, STDIN_FILENO, &end);
		if (r < 0)
			return ab_err_set(err, r, "stream stdin into the sandbox: %s",
					  strerror(-r));
		s->in_fd = dup_high(end);
		(void) close(end);
	} else if (sp->stdin_fd >= 0) {
		s->in_fd = dup_high(sp->stdin_fd);
	} else {
		int nul = open("/dev/null", O_RDONLY | O_CLOEXEC);

		s->in_fd = dup_high(nul);
		(void) close(nul);
	}
	s->seccomp_hi = dup_high(sp->seccomp_fd);
	{
		/* agentbox-init is exec'd through /proc/self/fd/AB_FD_INIT: nothing is mounted
		 * for it and its host path shows nowhere in the sandbox (T35) */
		int ifd = open(sp->init_path, O_RDONLY | O_CLOEXEC);

		s->init_fd = dup_high(ifd);
		if (ifd >= 0)
			(void) close(ifd);
		if (s->init_fd < 0)
			return ab_err_set(err, -errno, "open agentbox-init '%s': %s", sp->init_path,
					  strerror(errno));
	}
	if (s->args_fd < 0 || s->in_fd < 0 || (sp->seccomp_fd >= 0 && s->seccomp_hi < 0))
		return ab_err_set(err, -errno, "prepare fds: %s", strerror(errno));
	return 0;
}

/* The output, status and exec-error pipes, and the watchdog's socket, each high. */
static int
sup_open_pipes(struct sup *s, struct ab_err *err)
{
	int *all[] = {
		&s->out_p[0], &s->out_p[1], &s->err_p[0], &s->err_p[1], &s->st_p[0],
		&s->st_p[1],  &s->ep[0],    &s->ep[1],    &s->mw_p[0],  &s->mw_p[1],
	};

	if (pipe2(s->out_p, O_CLOEXEC) < 0 || pipe2(s->err_p, O_CLOEXEC) < 0 ||
	    pipe2(s->st_p, O_CLOEXEC) < 0 || pipe2(s->ep, O_CLOEXEC) < 0)
		return ab_err_set(err, -errno, "pipe2: %s", strerror(errno));
	if (s->sp->memwatch && socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, s->mw_p) < 0)
		return ab_err_set(err, -errno, "socketpair: %s", strerror(errno));
	for (size_t i = 0; i < ARRAY_SIZE(all); i++) {
		int hi;

		if (*all[i] < 0)
			continue;
		hi = dup_high(*all[i]);

		(void) close(*all[i]);
		*all[i] = hi;
		if (hi < 0)
			return ab_err_set(err, -errno, "dup pipes");
	}
	return 0;
}

/* SIGCHLD and the signals that stop a run come through a signalfd. The signals stay blocked
 * to the end: an interrupt then must not cut the report or the cleanup short (main() leaves
 * through exit() anyway). */
static int
sup_block_signals(struct sup *s, struct ab_err *err)
{
	sigset_t mask;

	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGHUP);
	sigaddset(&mask, SIGQUIT);
	if (s->sp->session_fd > 2)
		sigaddset(&mask, SIGUSR1); /* a session: interrupt the cell (sup_interrupt_cell) */
	if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
		return ab_err_set(err, -errno, "sigprocmask");
	s->sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	if (s->sfd < 0)
		return ab_err_set(err, -errno, "signalfd");
	(void) signal(SIGPIPE, SIG_IGN);
	/* PID 1 of the sandbox is re-parented to us if bwrap dies first: we reap it and so
	 * know when the whole run is gone. */
	(void) prctl(PR_SET_CHILD_SUBREAPER, 1);
	return 0;
}

/* Forks the child that becomes bwrap, keeps our ends of the pipes, and learns whether bwrap
 * was exec'd (oc->started). */
static int
sup_start(struct sup *s, struct ab_err *err)
{
	const struct ab_spawn *sp = s->sp;
	struct ab_outcome *oc = s->oc;
	pid_t self = getpid();
	bool joined = false;
	volatile bool in_cgroup; /* across vfork */
	cpu_set_t mine;

	s->t0 = now_ms();
	timing_mark("sandbox: fork");
	/* Pinned runs: pin ourselves on the way to fork, so the child starts on its core
	 * (no migration), and let go again in the parent. */
	if (sp->cpus && (sched_getaffinity(0, sizeof(mine), &mine) < 0 ||
			 sched_setaffinity(0, sizeof(*sp->cpus), sp->cpus) < 0))
		return ab_err_set(err, -errno, "sched_setaffinity: %s", strerror(errno));
	s->pid = spawn_into_cgroup(sp, &joined);
	in_cgroup = joined;
	/* vfork: child_exec only execs (async-signal-safe calls, its own stack frame, never
	 * returns), so no copy of our page tables and no copy-on-write faults; we wait for its
	 * exec, which we did anyway (the error pipe below). */
	if (s->pid == -2)
		s->pid = vfork();
	if (sp->cpus && s->pid != 0)
		(void) sched_setaffinity(0, sizeof(mine), &mine);
	if (s->pid < 0)
		return ab_err_set(err, -errno, "fork: %s", strerror(errno));
	if (s->pid == 0)
		child_exec(sp, in_cgroup, s->in_fd, s->out_p[1], s->err_p[1], s->args_fd,
			   s->st_p[1], s->init_fd, s->mw_p[1], s->ep[1], self);

	(void) close(s->out_p[1]);
	(void) close(s->err_p[1]);
	(void) close(s->st_p[1]);
	(void) close(s->ep[1]);
	/* the sandbox's alone now: a script that closes its stdin is seen to (EPIPE) */
	(void) close(s->in_fd);
	s->in_fd = -1;
	if (sp->warm && sp->warm->hook_peer >= 0) {
		(void) close(sp->warm->hook_peer); /* the sandbox's alone now */
		sp->warm->hook_peer = -1;
	}
	if (s->mw_p[1] >= 0)
		(void) close(s->mw_p[1]);
	s->out_p[1] = s->err_p[1] = s->st_p[1] = s->ep[1] = s->mw_p[1] = -1;
	s->so.fd = s->out_p[0];
	s->se.fd = s->err_p[0];
	s->out_p[0] = s->err_p[0] = -1;
	(void) fd_set_nonblock(s->so.fd, 1);
	(void) fd_set_nonblock(s->se.fd, 1);
	(void) fd_set_nonblock(s->st_p[0], 1);

	/* Did bwrap start? The error pipe is CLOEXEC: EOF without data means exec worked. */
	{
		struct child_err ce;
		ssize_t n = RETRY_EINTR(read(s->ep[0], &ce, sizeof(ce)));

		(void) close(s->ep[0]);
		s->ep[0] = -1;
		if (n == (ssize_t) sizeof(ce)) {
			oc->exec_errno = ce.err;
			snprintf(oc->exec_what, sizeof(oc->exec_what), "%s", ce.what);
		} else {
			oc->started = true;
			timing_mark("sandbox: bwrap exec'd");
		}
	}
	return 0;
}

/* A warm slot waits here for its run (or its end); the run's clock starts when it is handed
 * over. Returns warm_wait's result (0: a run took the slot). */
static int
sup_warm(struct sup *s, struct ab_err *err)
{
	struct ab_spawn *sp = s->sp;
	struct ab_outcome *oc = s->oc;
	int r;

	if (!oc->started) {
		sp->warm->state = AB_WARM_FAILED;
		snprintf(sp->warm->failure, sizeof(sp->warm->failure),
			 "could not start bwrap: %s: %s", oc->exec_what, strerror(oc->exec_errno));
		return 0;
	}
	r = warm_wait(sp, s->pid, s->sfd, &s->so, &s->se, &s->st_p[0], &s->mw_p[0], oc, err);
	if (r != 0)
		sup_kill(s); /* then reaped below, as any run */
	s->res->out.inline_max = s->res->err.inline_max = inline_cap(sp);
	if (sp->memwatch) {
		sp->memwatch->peak = sp->memwatch->tasks_peak = 0;
		sp->memwatch->next_ms = now_ms();
	}
	s->t0 = now_ms();
	return r;
}

/* The live relay: one destination per fd of ours, shared when stdout and stderr lead to the
 * same pipe or terminal (2>&1) so their order is kept. After the fork: the child has no use
 * for our private descriptions. */
static void
sup_relay_open(struct sup *s)
{
	const struct ab_spawn *sp = s->sp;
	/* A destination that is /dev/null is no destination: the library's caller gave none
	 * (the CLI's --report -, whose stdout carries the report alone). That stream is then
	 * not relayed at all (relay_dropped_bytes null). */
	bool to_err = !is_dev_null(STDERR_FILENO);
	bool to_out = !sp->relay_to_stderr && !is_dev_null(STDOUT_FILENO);

	if (to_err) {
		relay_dst_open(&s->derr, STDERR_FILENO, sp->sanitize_err);
		s->dst[s->ndst++] = &s->derr;
		s->se.rs.dst = &s->derr;
	}
	if (sp->relay_to_stderr) {
		s->so.rs.dst = s->se.rs.dst;
	} else if (to_out && to_err && relay_same_target(STDOUT_FILENO, STDERR_FILENO)) {
		s->so.rs.dst = &s->derr;
	} else if (to_out) {
		relay_dst_open(&s->dout, STDOUT_FILENO, sp->sanitize_out);
		s->dst[s->ndst++] = &s->dout;
		s->so.rs.dst = &s->dout;
	}
}

/* The limits the supervisor itself enforces, while the run is alive: the timeout, the
 * cgroup's CPU time, the memory watchdog. */
static void
sup_check_limits(struct sup *s, int64_t now)
{
	const struct ab_spawn *sp = s->sp;
	struct ab_outcome *oc = s->oc;
	const char *why = NULL;

	if (now >= s->deadline) {
		oc->timed_out = true;
		why = "timeout";
	} else if (sp->lp->cg_cpu_time && sp->cg && now >= s->next_tick) {
		struct ab_cg_usage u;

		s->next_tick = now + 50;
		if (cg_read_usage(sp->cg, &u) == 0 && u.valid &&
		    (u.cpu_usec - sp->cg_cpu_base_usec) / 1000 >= sp->lp->cpu_time_ms) {
			oc->cpu_time_limited = true;
			why = "cpu-time";
		}
	}
	if (!why && sp->memwatch && sp->memwatch->attached && now >= sp->memwatch->next_ms) {
		int k = memwatch_poll(sp->memwatch, now);

		if (k > 0) {
			oc->mem_limited = true;
			oc->mem_over_bytes = sp->memwatch->over_bytes;
			why = "memory";
			/* PID 1 first: the kernel ends the namespace at once */
			reading_before_kill(s->pid, sp, oc);
			(void) memwatch_kill(sp->memwatch);
		} else if (k < 0) {
			snprintf(oc->memwatch_error, sizeof(oc->memwatch_error),
				 "the sandbox's /proc cannot be read: %s", strerror(-k));
			why = "memwatch";
		}
	}
	if (why)
		sup_kill(s);
}

/* After the processes are gone: only what is already in the pipes. */
static void
sup_drain(struct sup *s)
{
	const struct ab_spawn *sp = s->sp;

	if (s->so.fd >= 0 && !s->so.capped)
		(void) pump(&s->so, sp->lp->output_bytes, sp->output_truncate);
	if (s->se.fd >= 0 && !s->se.capped)
		(void) pump(&s->se, sp->lp->output_bytes, sp->output_truncate);
	if (s->so.fd >= 0) {
		(void) close(s->so.fd);
		s->so.fd = -1;
	}
	if (s->se.fd >= 0) {
		(void) close(s->se.fd);
		s->se.fd = -1;
	}
}

/* How long poll may wait: to the next deadline, tick, progress line or watchdog poll. */
static int
sup_timeout(const struct sup *s, int64_t now)
{
	const struct ab_spawn *sp = s->sp;
	int64_t until = s->deadline;

	if (s->killed)
		return 100; /* waiting for SIGCHLD */
	if (sp->lp->cg_cpu_time && s->next_tick < until)
		until = s->next_tick;
	if (progress_next(&s->prog) < until)
		until = progress_next(&s->prog);
	if (sp->memwatch && sp->memwatch->attached && sp->memwatch->next_ms < until)
		until = sp->memwatch->next_ms;
	if (until - now > 60000)
		return 60000;
	return until - now < 0 ? 0 : (int) (until - now);
}

/* agentbox-init's status records. */
static void
sup_on_status(struct sup *s)
{
	const struct ab_spawn *sp = s->sp;
	struct ab_outcome *oc = s->oc;

	read_status(&s->st_p[0], oc);
	/* the interpreter ended: the watchdog measures once more, while the sandbox's tmpfs and
	 * any process left still hold what they hold (issue 25: a figure measured at the start
	 * and at the end) */
	if (oc->script_done && !s->end_polled && !s->killed) {
		s->end_polled = true;
		if (sp->memwatch && sp->memwatch->attached)
			(void) memwatch_poll(sp->memwatch, now_ms());
		if (sp->cg)
			oc->tmpfs_end_bytes = cg_shmem_bytes(sp->cg);
	}
	if (oc->init_started && sp->memwatch && !sp->memwatch->attached &&
	    !sp->memwatch->ended_first && !oc->memwatch_error[0]) {
		if (s->mw_p[0] < 0 ||
		    memwatch_receive(&s->mw_p[0], sp->memwatch, oc->memwatch_error,
				     sizeof(oc->memwatch_error)) <= 0) {
			if (!oc->memwatch_error[0])
				snprintf(oc->memwatch_error, sizeof(oc->memwatch_error),
					 "agentbox-init started without handing over the "
					 "sandbox's /proc");
			sup_kill(s);
		}
	}
}

/* The first child listed in /proc/PID/task/PID/children, or -1. */
static pid_t
first_child(pid_t pid)
{
	char path[64], buf[64];
	cleanup_fd int fd = -1;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int) pid, (int) pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	return (pid_t) strtol(buf, NULL, 10) > 0 ? (pid_t) strtol(buf, NULL, 10) : -1;
}

/* A session's SIGUSR1 (the library's ab_session_interrupt): SIGINT to the interpreter, the
 * first child of agentbox-init, bwrap's only child (--as-pid-1). The driver turns it into
 * KeyboardInterrupt (Python) or an interrupted script (Node); whether the cell stopped in time
 * is the library's to judge. */
static void
sup_interrupt_cell(struct sup *s)
{
	pid_t init = s->pid > 0 ? first_child(s->pid) : -1;
	pid_t interp = init > 0 ? first_child(init) : -1;

	if (interp > 0)
		(void) kill(interp, SIGINT);
}

/* SIGINT/SIGTERM/SIGHUP/SIGQUIT: stop the run, then report. A session's SIGUSR1: interrupt
 * its cell. */
static void
sup_on_signals(struct sup *s)
{
	struct signalfd_siginfo si;

	while (read(s->sfd, &si, sizeof(si)) == (ssize_t) sizeof(si)) {
		if (si.ssi_signo == SIGCHLD || s->killed)
			continue;
		if (si.ssi_signo == SIGUSR1) {
			sup_interrupt_cell(s);
			continue;
		}
		s->oc->interrupted_by = (int) si.ssi_signo;
		sup_kill(s);
	}
}

/* Reaps bwrap, and PID 1 if it was re-parented to us; none left: the run is gone. */
static void
sup_reap(struct sup *s)
{
	struct ab_outcome *oc = s->oc;

	for (;;) {
		struct rusage ru;
		int ws;
		pid_t w = wait4(-1, &ws, WNOHANG | __WALL, &ru);

		if (w > 0) {
			add_rusage(&oc->ru, &ru);
			if (w == s->pid) {
				timing_mark("sandbox: bwrap reaped");
				oc->bwrap_reaped = true;
				oc->bwrap_wstatus = ws;
				oc->wall_ms = now_ms() - s->t0;
			}
			continue;
		}
		if (w < 0 && errno == ECHILD) {
			timing_mark("sandbox: no children left");
			s->children = false;
		}
		break;
	}
}

/* The run to its end: output pumped and relayed, stdin fed, status records read, limits and
 * signals answered, processes reaped. Returns 0, or -errno when poll failed. */
static int
sup_loop(struct sup *s, struct ab_err *err)
{
	const struct ab_spawn *sp = s->sp;
	struct ab_outcome *oc = s->oc;
	const uint64_t cap = sp->lp->output_bytes;

	s->deadline = s->t0 + (int64_t) sp->lp->timeout_ms;
	s->next_tick = s->t0 + 50;
	progress_init(&s->prog, sp->progress, s->t0);
	while (s->children || s->so.fd >= 0 || s->se.fd >= 0) {
		struct pollfd pfd[8 + ARRAY_SIZE(s->dst)];
		int watch_at, mw_at, feed_at, nfd = 0;
		int64_t now = now_ms();

		if (!s->killed && s->children)
			sup_check_limits(s, now);
		if (!s->children) {
			sup_drain(s);
			break;
		}
		pfd[nfd++] = (struct pollfd){ .fd = s->sfd, .events = POLLIN };
		pfd[nfd++] =
			(struct pollfd){ .fd = s->so.capped ? -1 : s->so.fd, .events = POLLIN };
		pfd[nfd++] =
			(struct pollfd){ .fd = s->se.capped ? -1 : s->se.fd, .events = POLLIN };
		pfd[nfd++] = (struct pollfd){ .fd = s->st_p[0], .events = POLLIN };
		for (size_t i = 0; i < s->ndst; i++)
			pfd[nfd++] =
				(struct pollfd){ .fd = relay_events(s->dst[i]) ? s->dst[i]->fd : -1,
						 .events = POLLOUT };
		watch_at = nfd;
		pfd[nfd++] =
			(struct pollfd){ .fd = s->killed || sp->watch_fd <= 2 ? -1 : sp->watch_fd,
					 .events = POLLIN };
		mw_at = nfd;
		pfd[nfd++] = (struct pollfd){ .fd = s->mw_p[0], .events = POLLIN };
		feed_at = nfd;
		pfd[nfd++] = (struct pollfd){ .fd = feed_src_fd(&s->feed), .events = POLLIN };
		pfd[nfd++] = (struct pollfd){ .fd = feed_dst_fd(&s->feed), .events = POLLOUT };
		if (poll(pfd, (nfds_t) nfd, sup_timeout(s, now)) < 0 && errno != EINTR)
			return ab_err_set(err, -errno, "poll");
		/* the script's output goes to a clean line */
		if (pfd[1].revents || pfd[2].revents)
			progress_clear(&s->prog);
		if (s->so.fd >= 0 && !s->so.capped &&
		    (pfd[1].revents & (POLLIN | POLLHUP | POLLERR)) &&
		    pump(&s->so, cap, sp->output_truncate))
			over_cap(&s->so, oc, s->pid, sp, &s->killed, &s->kill_at);
		if (s->se.fd >= 0 && !s->se.capped &&
		    (pfd[2].revents & (POLLIN | POLLHUP | POLLERR)) &&
		    pump(&s->se, cap, sp->output_truncate))
			over_cap(&s->se, oc, s->pid, sp, &s->killed, &s->kill_at);
		/* The watchdog's fds are sent before agentbox-init's first status record: take them
		 * first, and a run whose PID 1 started without handing them over is stopped. */
		if (s->mw_p[0] >= 0 && (pfd[mw_at].revents & (POLLIN | POLLHUP | POLLERR)) &&
		    memwatch_receive(&s->mw_p[0], sp->memwatch, oc->memwatch_error,
				     sizeof(oc->memwatch_error)) < 0)
			sup_kill(s);
		if (s->st_p[0] >= 0 && (pfd[3].revents & (POLLIN | POLLHUP | POLLERR)))
			sup_on_status(s);
		for (size_t i = 0; i < s->ndst; i++)
			if (pfd[4 + i].revents)
				relay_write(s->dst[i]);
		/* the caller's stdin into the sandbox's: moved as it comes, never waited for */
		if (pfd[feed_at].revents)
			feed_read(&s->feed);
		if (pfd[feed_at + 1].revents ||
		    (pfd[feed_at].revents && feed_dst_fd(&s->feed) >= 0))
			feed_write(&s->feed);
		if (pfd[watch_at].revents & (POLLIN | POLLHUP | POLLERR)) {
			/* the library's caller went away (nothing is ever written there) */
			oc->interrupted_by = SIGHUP;
			sup_kill(s);
		}
		if (pfd[0].revents & POLLIN)
			sup_on_signals(s);
		if (!s->killed)
			progress_tick(&s->prog, now_ms(), sp->cg);
		else if (!sp->cg && oc->bwrap_reaped)
			kill_orphans(s->pid);
		sup_reap(s);
	}
	return 0;
}

/* The outcome's last figures, and the streams wound up into the record. */
static void
sup_wind_up(struct sup *s)
{
	const struct ab_spawn *sp = s->sp;
	struct ab_outcome *oc = s->oc;

	if (sp->memwatch && sp->memwatch->attached) {
		if (oc->tmpfs_end_bytes < 0)
			oc->tmpfs_end_bytes = (int64_t) sp->memwatch->tmpfs_last;
		oc->tmpfs_peak_bytes = (int64_t) sp->memwatch->tmpfs_peak;
	}
	if (s->st_p[0] >= 0)
		read_status(&s->st_p[0], oc);
	if (!oc->bwrap_reaped)
		oc->wall_ms = now_ms() - s->t0;
	if (s->kill_at >= 0)
		oc->kill_to_reaped_ms = now_ms() - s->kill_at;
	(void) prctl(PR_SET_CHILD_SUBREAPER, 0);
	progress_done(&s->prog);
	relay_wind_up(&s->so, &s->se, s->dst, s->ndst, s->sfd, oc->interrupted_by != 0, s->res);
}

static void
sup_close(struct sup *s)
{
	struct ab_warm *w = s->sp->warm;
	int *fds[] = { &s->args_fd, &s->args_w, &s->in_fd,   &s->seccomp_hi,
		       &s->init_fd, &s->sfd,    &s->mw_p[0], &s->mw_p[1] };

	progress_done(&s->prog);
	close_all(s->out_p, s->err_p, s->st_p, s->ep, &s->so.fd, &s->se.fd);
	feed_close(&s->feed);
	if (w) {
		if (w->hook_fd >= 0)
			(void) close(w->hook_fd);
		if (w->hook_peer >= 0)
			(void) close(w->hook_peer);
		w->hook_fd = w->hook_peer = -1;
	}
	stream_close(&s->so);
	stream_close(&s->se);
	for (size_t i = 0; i < ARRAY_SIZE(fds); i++)
		if (*fds[i] >= 0)
			(void) close(*fds[i]);
}

/* From bwrap's start to the last reap. */
static int
sup_run(struct sup *s, struct ab_err *err)
{
	int r, warm_r = 0;

	if (s->sp->warm)
		warm_r = sup_warm(s, err);
	if (s->sp->relay)
		sup_relay_open(s);
	r = sup_loop(s, err);
	if (warm_r < 0)
		r = warm_r; /* the claimed run could not start: err says why */
	sup_wind_up(s);
	return r;
}

static int
sup_open_and_start(struct sup *s, bool later, struct ab_err *err)
{
	int r = sup_open_fds(s, later, err);

	if (r >= 0)
		r = sup_open_pipes(s, err);
	if (r >= 0)
		r = sup_block_signals(s, err);
	if (r >= 0)
		r = sup_start(s, err);
	return r;
}

int
supervise_run(struct ab_spawn *sp, struct ab_record *res, struct ab_outcome *oc, struct ab_err *err)
{
	struct sup s;
	int r;

	sup_init(&s, sp, res, oc);
	r = sup_open_and_start(&s, false, err);
	if (r >= 0)
		r = sup_run(&s, err);
	sup_close(&s);
	return r;
}

/* supervise_prestart's handle: the supervision under way, on the heap */
struct ab_sup {
	struct sup s;
};

int
supervise_prestart(struct ab_spawn *sp, struct ab_record *res, struct ab_outcome *oc,
		   struct ab_sup **ret, struct ab_err *err)
{
	struct ab_sup *h = xmalloc(sizeof(*h));
	int r;

	sup_init(&h->s, sp, res, oc);
	r = sup_open_and_start(&h->s, true, err);
	if (r < 0) {
		supervise_abandon(h);
		return r;
	}
	*ret = h;
	return 0;
}

int
supervise_continue(struct ab_sup *h, const char *args, size_t len, struct ab_err *err)
{
	struct sup *s = &h->s;
	int r;

	/* the rest of bwrap's options, after the head it has had since its start. A bwrap that
	 * is gone (it could not be exec'd, or was killed) leaves EPIPE here: the loop reaps it
	 * and says why. */
	(void) write_all(s->args_w, args, len);
	(void) close(s->args_w);
	s->args_w = -1;
	s->t0 = now_ms(); /* the run's clock starts with its arguments, as with supervise_run */
	timing_mark("sandbox: arguments sent");
	r = sup_run(s, err);
	sup_close(s);
	free(h);
	return r;
}

void
supervise_abandon(struct ab_sup *h)
{
	struct sup *s = h ? &h->s : NULL;

	if (!s)
		return;
	if (s->pid > 0) {
		/* still reading its arguments (it forks nothing before it has them) */
		(void) kill(s->pid, SIGKILL);
		while (waitpid(s->pid, NULL, __WALL) < 0 && errno == EINTR)
			;
		s->pid = -1;
	}
	if (s->sfd >= 0)
		(void) prctl(PR_SET_CHILD_SUBREAPER, 0);
	sup_close(s);
	free(h);
}

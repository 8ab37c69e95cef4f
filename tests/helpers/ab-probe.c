/* ab-probe: a static multi-command helper that the test suite runs inside real sandboxes.
 *
 *   ab-probe try-syscall NAME...  for each NAME make that syscall with harmless, bad arguments
 *                                 (fd -1, NULL or 1 as a pointer, invalid flags), the way
 *                                 bubblewrap's tests/try-syscall.c does, and print
 *                                 "NAME ERRNO" (e.g. "keyctl EPERM") or "NAME OK". A call that
 *                                 reached the kernel answers with the kernel's errno (EBADF,
 *                                 EFAULT, EINVAL...), so a test can tell "blocked by seccomp"
 *                                 from "reached the kernel". Unknown names print
 *                                 "NAME UNKNOWN" and make the exit status 2.
 *   ab-probe fds                  every open fd number, one per line (via /proc/self/fd)
 *   ab-probe ids                  the Uid, Gid, Cap..., NoNewPrivs and Seccomp lines of
 *                                 /proc/self/status
 *   ab-probe exec-errno PATH      execve(PATH) and print the errno name if it fails
 *
 * The arguments are chosen so that even an unfiltered call made as root changes nothing: every
 * call fails in the kernel before it acts (bad magic, bad flags, a NULL or unmapped pointer),
 * or it only creates an object that is closed at once. Calls that succeed print "OK". The
 * mode probes (chmod_suid, open_creat_plain...) are the exception: they act for real, on
 * empty files in a fresh 0700 directory under /tmp that they remove again.
 *
 * Built static and without sanitizers (tests/meson.build): it must start under any filter and
 * without the host's libraries. One file, glibc only.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* strerrorname_np, memfd_create, CLONE_* */
#endif

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <linux/landlock.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/quota.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

/* A pointer the kernel cannot copy from (page 0 is never mapped). */
#define BAD_PTR ((void *) 1)

#ifndef __X32_SYSCALL_BIT
#define __X32_SYSCALL_BIT 0x40000000
#endif
#ifndef __NR_fchmodat2
#define __NR_fchmodat2 452 /* Linux 6.6; newer than the installed headers */
#endif
#ifndef __NR_open_tree_attr
#define __NR_open_tree_attr 467 /* Linux 6.15; newer than the installed headers */
#endif

extern char **environ;

/* 0 when r is not negative, else errno (read right after the call). */
static int
res(long r)
{
	return r < 0 ? errno : 0;
}

/* Same, for calls that return an fd on success: the fd is closed. */
static int
res_fd(long r)
{
	if (r < 0)
		return errno;
	(void) close((int) r);
	return 0;
}

/* Runs fn in a child and returns its errno (its exit status); for calls that act on the
 * calling process or its session. */
static int
in_child(int (*fn)(void))
{
	pid_t pid = fork();
	int st;

	if (pid < 0)
		return errno;
	if (pid == 0)
		_exit(fn());
	if (waitpid(pid, &st, 0) < 0)
		return errno;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int
do_fork(void)
{
	pid_t pid = fork(); /* glibc: clone(SIGCHLD | CLONE_CHILD_*), no namespace flags */
	int st;

	if (pid < 0)
		return errno;
	if (pid == 0)
		_exit(0);
	if (waitpid(pid, &st, 0) < 0)
		return errno;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : EIO;
}

static void *
thread_main(void *arg)
{
	return arg;
}

static int
do_thread(void)
{
	pthread_t t;
	void *out = NULL;
	int r = pthread_create(&t, NULL, thread_main, &r); /* glibc: clone3, then clone */

	if (r != 0)
		return r;
	return pthread_join(t, &out);
}

static int
vhangup_child(void)
{
	(void) setsid(); /* no controlling tty: an unfiltered vhangup() cannot hang one up */
	return res(syscall(SYS_vhangup));
}

static int
do_vhangup(void)
{
	return in_child(vhangup_child);
}

/* personality(p), then put the old value back if it was changed. */
static int
do_personality(unsigned long p)
{
	long old = syscall(SYS_personality, 0xffffffffUL);
	long r = syscall(SYS_personality, p);
	int e = errno;

	if (r < 0)
		return e;
	if (old >= 0)
		(void) syscall(SYS_personality, (unsigned long) old);
	return 0;
}

/* modify_ldt returns its int result zero-extended (an x86 ABI quirk), so -EINVAL arrives as a
 * large positive value; the filter's -EPERM arrives as an ordinary failure. */
static int
do_modify_ldt(void)
{
	long r = syscall(SYS_modify_ldt, 1, NULL, 0); /* write, wrong size: EINVAL */

	if (r < 0)
		return errno;
	return (int) r < 0 ? -(int) r : 0;
}

static int
do_socketpair(int family)
{
	int sv[2];

	if (socketpair(family, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return errno;
	(void) close(sv[0]);
	(void) close(sv[1]);
	return 0;
}

/* The memory watchdog's calls (issue 24): each really made, and undone when it worked. */
static int
do_sysv(long nr)
{
	long id = syscall(nr, 0 /* IPC_PRIVATE */, 1, 01600 /* IPC_CREAT | 0600 */);

	if (id < 0)
		return errno;
	(void) syscall(nr == SYS_msgget ? SYS_msgctl : SYS_semctl, id, 0, 0 /* IPC_RMID */, 0);
	return 0;
}

static int
do_shmget(void)
{
	long id = syscall(SYS_shmget, 0, 4096, 01600);

	if (id < 0)
		return errno;
	(void) syscall(SYS_shmctl, id, 0 /* IPC_RMID */, NULL);
	return 0;
}

static int
do_setpipe(unsigned long size)
{
	int p[2], r;

	if (pipe2(p, O_CLOEXEC) < 0)
		return errno;
	r = res(syscall(SYS_fcntl, p[1], F_SETPIPE_SZ, size));
	(void) close(p[0]);
	(void) close(p[1]);
	return r;
}

static int
do_sndbuf(int opt)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), v = 1 << 20, r;

	if (fd < 0)
		return errno;
	r = res(setsockopt(fd, SOL_SOCKET, opt, &v, sizeof(v)));
	(void) close(fd);
	return r;
}

/* A family the filter must refuse; the invalid type makes the kernel say EINVAL instead. */
static int
bad_socket(unsigned long family)
{
	return res_fd(syscall(SYS_socket, family, 9999, 0));
}

static int
bad_socketpair(unsigned long family)
{
	int sv[2];

	return res(syscall(SYS_socketpair, family, 9999, 0, sv));
}

/* clone() with flag plus CLONE_THREAD but without CLONE_SIGHAND: the kernel rejects that with
 * EINVAL before it creates anything, so only the filter can answer EPERM. */
static int
bad_clone(unsigned long flag)
{
	return res(syscall(SYS_clone, flag | CLONE_THREAD, 0, 0, 0, 0));
}

static int
do_setrlimit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return errno;
	return res(setrlimit(RLIMIT_NOFILE, &rl));
}

/* The mode probes (issue 12): real calls on real files, each in a fresh 0700 directory under
 * /tmp that the probe removes again. A call that succeeds must have left the permission bits
 * and the sticky bit it asked for (else EIO); the setuid/setgid bits are not checked, since
 * mkdir drops them itself. Without a filter, the _suid/_sgid probes do make such a file (as
 * root: a setuid-root empty file, in a directory only root can enter, for a moment). */
struct scratch {
	char dir[32];
	char path[48];
};

enum {
	NO_FILE,
	MAKE_FILE
};

static int
scratch_begin(struct scratch *s, int make)
{
	int fd;

	snprintf(s->dir, sizeof(s->dir), "/tmp/ab-probe-XXXXXX");
	s->path[0] = '\0';
	if (!mkdtemp(s->dir))
		return errno;
	snprintf(s->path, sizeof(s->path), "%s/f", s->dir);
	if (make == MAKE_FILE) {
		fd = open(s->path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd < 0)
			return errno;
		(void) close(fd);
	}
	return 0;
}

static void
scratch_end(struct scratch *s)
{
	if (unlink(s->path) < 0)
		(void) rmdir(s->path);
	(void) rmdir(s->dir);
}

enum mode_call {
	CALL_CHMOD,
	CALL_FCHMOD,
	CALL_FCHMODAT,
	CALL_FCHMODAT2,
	CALL_CREAT,
	CALL_OPEN_CREAT,
	CALL_OPEN_NOCREAT,
	CALL_OPEN_TMPFILE,
	CALL_OPENAT_CREAT,
	CALL_OPENAT_TMPFILE,
	CALL_MKDIR,
	CALL_MKDIRAT,
	CALL_MKNOD,
	CALL_MKNODAT,
};

/* One mode call with umask 0, so the mode arrives as given. */
static int
do_mode(enum mode_call c, unsigned long mode)
{
	const int cr = O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC;
	const int tmp = O_TMPFILE | O_WRONLY | O_CLOEXEC;
	int pre = c <= CALL_FCHMODAT2 || c == CALL_OPEN_NOCREAT ? MAKE_FILE : NO_FILE;
	int returns_fd = c >= CALL_CREAT && c <= CALL_OPENAT_TMPFILE;
	unsigned long want = c == CALL_OPEN_NOCREAT ? 0600 : mode;
	mode_t old = umask(0);
	struct scratch s;
	struct stat st;
	int e, fd = -1;
	long r = -1;

	e = scratch_begin(&s, pre);
	if (e != 0)
		goto out;
	switch (c) {
	case CALL_CHMOD:
		r = syscall(SYS_chmod, s.path, mode);
		break;
	case CALL_FCHMOD:
		fd = open(s.path, O_RDONLY | O_CLOEXEC);
		r = syscall(SYS_fchmod, fd, mode);
		break;
	case CALL_FCHMODAT:
		r = syscall(SYS_fchmodat, AT_FDCWD, s.path, mode);
		break;
	case CALL_FCHMODAT2:
		r = syscall(__NR_fchmodat2, AT_FDCWD, s.path, mode, 0);
		break;
	case CALL_CREAT:
		r = syscall(SYS_creat, s.path, mode);
		break;
	case CALL_OPEN_CREAT:
		r = syscall(SYS_open, s.path, cr, mode);
		break;
	case CALL_OPEN_NOCREAT:
		r = syscall(SYS_open, s.path, O_RDONLY | O_CLOEXEC, mode);
		break;
	case CALL_OPEN_TMPFILE: /* an unnamed file in the directory: its mode is on the fd */
		r = syscall(SYS_open, s.dir, tmp, mode);
		break;
	case CALL_OPENAT_CREAT:
		r = syscall(SYS_openat, AT_FDCWD, s.path, cr, mode);
		break;
	case CALL_OPENAT_TMPFILE:
		r = syscall(SYS_openat, AT_FDCWD, s.dir, tmp, mode);
		break;
	case CALL_MKDIR:
		r = syscall(SYS_mkdir, s.path, mode);
		break;
	case CALL_MKDIRAT:
		r = syscall(SYS_mkdirat, AT_FDCWD, s.path, mode);
		break;
	case CALL_MKNOD:
		r = syscall(SYS_mknod, s.path, S_IFREG | mode, 0);
		break;
	case CALL_MKNODAT:
		r = syscall(SYS_mknodat, AT_FDCWD, s.path, S_IFREG | mode, 0);
		break;
	}
	if (r < 0) {
		e = errno;
		goto out;
	}
	if (returns_fd)
		fd = (int) r;
	if ((fd >= 0 ? fstat(fd, &st) : lstat(s.path, &st)) < 0)
		e = errno;
	else if ((st.st_mode & 01777) != (want & 01777))
		e = EIO;
out:
	if (fd >= 0)
		(void) close(fd);
	scratch_end(&s);
	(void) umask(old);
	return e;
}

/* getpid through the 32-bit entry point: the filter's arch check must kill us. */
static int
do_i386_getpid(void)
{
	long r = 20; /* __NR_getpid on i386 */

	__asm__ volatile("int $0x80" : "+a"(r) : : "memory", "r8", "r9", "r10", "r11");
	return r < 0 ? (int) -r : 0;
}

struct probe {
	const char *name;
	int (*fn)(void);
};

/* One line per probe; each returns 0 or an errno. */
#define P(name, expr)                 \
	static int probe_##name(void) \
	{                             \
		return (expr);        \
	}

/* Allowed calls. */
P(getpid, res(syscall(SYS_getpid)))
P(fork, do_fork())
P(thread, do_thread())
P(prctl, res(prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0)))
P(wait4, res(syscall(SYS_wait4, -1, NULL, WNOHANG, NULL)))
P(setrlimit, do_setrlimit())
P(landlock_create_ruleset,
  res(syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)))
P(landlock_add_rule, res(syscall(SYS_landlock_add_rule, -1, LANDLOCK_RULE_PATH_BENEATH, NULL, 0)))
P(landlock_restrict_self, res(syscall(SYS_landlock_restrict_self, -1, 0)))
P(memfd_create, res_fd(memfd_create("ab-probe", MFD_CLOEXEC)))
P(pidfd_open, res_fd(syscall(SYS_pidfd_open, getpid(), 0)))
P(ioctl_fionread, res(ioctl(-1, FIONREAD, BAD_PTR)))
P(clone_thread, bad_clone(0))
P(socket_unix, res_fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)))
P(socket_inet, res_fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)))
P(socket_inet6, res_fd(socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0)))
P(socket_inet_badtype, bad_socket(AF_INET))
P(socketpair_unix, do_socketpair(AF_UNIX))
P(socketpair_inet, do_socketpair(AF_INET))
P(personality_query, do_personality(0xffffffffUL))
P(personality_linux, do_personality(0))
P(inotify_init, res_fd(syscall(SYS_inotify_init)))
P(inotify_init1, res_fd(syscall(SYS_inotify_init1, IN_CLOEXEC)))
P(msgget, do_sysv(SYS_msgget))
P(semget, do_sysv(SYS_semget))
P(shmget, do_shmget())
P(setpipe_64k, do_setpipe(65536))
P(setpipe_1m, do_setpipe(1 << 20))
P(setpipe_hi, do_setpipe((1UL << 32) | 4096))
P(sndbuf, do_sndbuf(SO_SNDBUF))
P(sndbufforce, do_sndbuf(SO_SNDBUFFORCE))
P(rcvbuf, do_sndbuf(SO_RCVBUF))
/* Refused families: the filter must answer EAFNOSUPPORT. */
P(socket_unspec, bad_socket(AF_UNSPEC))
P(socket_ax25, bad_socket(AF_AX25))
P(socket_ipx, bad_socket(AF_IPX))
P(socket_appletalk, bad_socket(AF_APPLETALK))
P(socket_x25, bad_socket(AF_X25))
P(socket_key, bad_socket(AF_KEY))
P(socket_netlink, bad_socket(AF_NETLINK))
P(socket_packet, bad_socket(AF_PACKET))
P(socket_rds, bad_socket(AF_RDS))
P(socket_can, bad_socket(AF_CAN))
P(socket_tipc, bad_socket(AF_TIPC))
P(socket_bluetooth, bad_socket(AF_BLUETOOTH))
P(socket_alg, bad_socket(AF_ALG))
P(socket_vsock, bad_socket(AF_VSOCK))
P(socket_xdp, bad_socket(44)) /* AF_XDP */
P(socket_max, bad_socket(AF_MAX))
P(socket_1000, bad_socket(1000))
P(socket_neg, bad_socket((unsigned long) -1L))
P(socket_inet_hi, res_fd(syscall(SYS_socket, (1UL << 32) | AF_INET, SOCK_STREAM, 0)))
P(socketpair_netlink, bad_socketpair(AF_NETLINK))
/* EPERM class. */
P(syslog, res(syscall(SYS_syslog, 9999, NULL, 0)))
P(uselib, res(syscall(SYS_uselib, BAD_PTR)))
P(acct, res(syscall(SYS_acct, BAD_PTR)))
P(modify_ldt, do_modify_ldt())
P(quotactl, res(syscall(SYS_quotactl, QCMD(Q_GETFMT, USRQUOTA), NULL, 0, NULL)))
P(quotactl_fd, res(syscall(SYS_quotactl_fd, -1, 0, 0, NULL)))
P(add_key, res(syscall(SYS_add_key, BAD_PTR, BAD_PTR, NULL, 0, 0)))
P(keyctl, res(syscall(SYS_keyctl, 9999, 0, 0, 0, 0)))
P(request_key, res(syscall(SYS_request_key, BAD_PTR, BAD_PTR, NULL, 0)))
P(move_pages, res(syscall(SYS_move_pages, 0, 0, NULL, NULL, NULL, ~0UL)))
P(mbind, res(syscall(SYS_mbind, NULL, 0, 999, NULL, 0, 0)))
P(get_mempolicy, res(syscall(SYS_get_mempolicy, NULL, NULL, 0, NULL, ~0UL)))
P(set_mempolicy, res(syscall(SYS_set_mempolicy, 999, NULL, 0)))
P(set_mempolicy_home_node, res(syscall(SYS_set_mempolicy_home_node, 0, 0, 0, ~0UL)))
P(migrate_pages, res(syscall(SYS_migrate_pages, 0, 64, BAD_PTR, BAD_PTR)))
P(unshare, res(syscall(SYS_unshare, CLONE_PTRACE))) /* not an unshare flag: EINVAL */
P(setns, res(syscall(SYS_setns, -1, 0)))
P(mount, res(syscall(SYS_mount, NULL, BAD_PTR, NULL, 0, NULL)))
P(umount2, res(syscall(SYS_umount2, BAD_PTR, 0)))
P(pivot_root, res(syscall(SYS_pivot_root, BAD_PTR, BAD_PTR)))
P(chroot, res(syscall(SYS_chroot, BAD_PTR)))
P(perf_event_open, res_fd(syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0)))
P(ptrace, res(syscall(SYS_ptrace, 9999, -1, NULL, NULL)))
P(process_vm_readv, res(syscall(SYS_process_vm_readv, 0, NULL, 0, NULL, 0, 1)))
P(process_vm_writev, res(syscall(SYS_process_vm_writev, 0, NULL, 0, NULL, 0, 1)))
P(kcmp, res(syscall(SYS_kcmp, -1, -1, 9999, 0, 0)))
P(pidfd_getfd, res_fd(syscall(SYS_pidfd_getfd, -1, 0, 0)))
P(userfaultfd, res_fd(syscall(SYS_userfaultfd, ~0U)))
P(bpf, res(syscall(SYS_bpf, 9999, NULL, 0)))
/* Flags outside KEXEC_FLAGS and too many segments: rejected before anything is unloaded. */
P(kexec_load, res(syscall(SYS_kexec_load, 0, 1000, NULL, 0xfff0UL)))
P(kexec_file_load, res(syscall(SYS_kexec_file_load, -1, -1, 0, NULL, ~0UL)))
P(init_module, res(syscall(SYS_init_module, BAD_PTR, 0, BAD_PTR)))
P(finit_module, res(syscall(SYS_finit_module, -1, "", 0)))
P(delete_module, res(syscall(SYS_delete_module, BAD_PTR, 0)))
P(open_by_handle_at, res_fd(syscall(SYS_open_by_handle_at, -1, NULL, 0)))
P(name_to_handle_at, res(syscall(SYS_name_to_handle_at, -1, NULL, NULL, NULL, ~0)))
P(lookup_dcookie, res(syscall(SYS_lookup_dcookie, 0, NULL, 0)))
P(swapon, res(syscall(SYS_swapon, BAD_PTR, ~0)))
P(swapoff, res(syscall(SYS_swapoff, BAD_PTR)))
P(reboot, res(syscall(SYS_reboot, 0, 0, 0, NULL))) /* bad magic: EINVAL */
P(settimeofday, res(syscall(SYS_settimeofday, BAD_PTR, NULL)))
P(clock_settime, res(syscall(SYS_clock_settime, CLOCK_REALTIME, BAD_PTR)))
P(clock_adjtime, res(syscall(SYS_clock_adjtime, CLOCK_REALTIME, BAD_PTR)))
P(adjtimex, res(syscall(SYS_adjtimex, BAD_PTR)))
P(iopl, res(syscall(SYS_iopl, 99)))
P(ioperm, res(syscall(SYS_ioperm, 0x10000UL, 1UL, 1)))
P(vhangup, do_vhangup())
P(nfsservctl, res(syscall(SYS_nfsservctl, 0, NULL, NULL)))
P(fanotify_init, res_fd(syscall(SYS_fanotify_init, ~0U, 0)))
P(personality_rie, do_personality(0x0400000)) /* READ_IMPLIES_EXEC */
P(personality_hi, do_personality(1UL << 32))
P(ioctl_tiocsti, res(ioctl(-1, TIOCSTI, BAD_PTR)))
P(ioctl_tiocsti64, res(syscall(SYS_ioctl, -1, (1UL << 32) | TIOCSTI, BAD_PTR)))
P(ioctl_tiocsctty, res(ioctl(-1, TIOCSCTTY, 0)))
P(ioctl_tiocsctty64, res(syscall(SYS_ioctl, -1, (1UL << 32) | TIOCSCTTY, 0)))
P(ioctl_tioclinux, res(ioctl(-1, TIOCLINUX, BAD_PTR)))
P(ioctl_tioclinux64, res(syscall(SYS_ioctl, -1, (0x123UL << 32) | TIOCLINUX, BAD_PTR)))
P(clone_newuser, bad_clone(CLONE_NEWUSER))
P(clone_newns, bad_clone(CLONE_NEWNS))
P(clone_newpid, bad_clone(CLONE_NEWPID))
P(clone_newnet, bad_clone(CLONE_NEWNET))
P(clone_newuts, bad_clone(CLONE_NEWUTS))
P(clone_newipc, bad_clone(CLONE_NEWIPC))
P(clone_newcgroup, bad_clone(CLONE_NEWCGROUP))
/* strict additions */
P(get_robust_list, res(syscall(SYS_get_robust_list, 0, BAD_PTR, BAD_PTR)))
P(process_madvise, res(syscall(SYS_process_madvise, -1, NULL, 0, 0, 0)))
P(sched_setaffinity, res(syscall(SYS_sched_setaffinity, 0, 8, BAD_PTR)))
/* ENOSYS class. */
P(clone3, res(syscall(SYS_clone3, BAD_PTR, SIZE_MAX)))
P(io_uring_setup, res_fd(syscall(SYS_io_uring_setup, 1, NULL)))
P(io_uring_enter, res(syscall(SYS_io_uring_enter, -1, 0, 0, 0, NULL, 0)))
P(io_uring_register, res(syscall(SYS_io_uring_register, -1, 0, NULL, 0)))
P(open_tree, res_fd(syscall(SYS_open_tree, -1, NULL, ~0U)))
P(open_tree_attr, res_fd(syscall(__NR_open_tree_attr, -1, NULL, ~0U, NULL, 0)))
P(move_mount, res(syscall(SYS_move_mount, -1, NULL, -1, NULL, ~0U)))
P(fsopen, res_fd(syscall(SYS_fsopen, NULL, ~0U)))
P(fsconfig, res(syscall(SYS_fsconfig, -1, 0, NULL, NULL, 0)))
P(fsmount, res_fd(syscall(SYS_fsmount, -1, ~0U, 0)))
P(fspick, res_fd(syscall(SYS_fspick, -1, NULL, ~0U)))
P(mount_setattr, res(syscall(SYS_mount_setattr, -1, NULL, ~0U, NULL, 0)))
/* Setuid/setgid modes (issue 12): EPERM from the filter; plain modes must work. */
P(chmod_suid, do_mode(CALL_CHMOD, 04755))
P(chmod_sgid, do_mode(CALL_CHMOD, 02755))
P(chmod_suid_hi, do_mode(CALL_CHMOD, (1UL << 32) | 04755)) /* the kernel keeps 16 bits */
P(chmod_plain, do_mode(CALL_CHMOD, 0755))
P(chmod_plain_hi, do_mode(CALL_CHMOD, (1UL << 32) | 0755))
P(chmod_sticky, do_mode(CALL_CHMOD, 01777))
P(fchmod_suid, do_mode(CALL_FCHMOD, 04755))
P(fchmod_sgid, do_mode(CALL_FCHMOD, 02755))
P(fchmod_plain, do_mode(CALL_FCHMOD, 0755))
P(fchmodat_suid, do_mode(CALL_FCHMODAT, 04755))
P(fchmodat_sgid, do_mode(CALL_FCHMODAT, 02755))
P(fchmodat_plain, do_mode(CALL_FCHMODAT, 0755))
P(fchmodat2_suid, do_mode(CALL_FCHMODAT2, 04755))
P(fchmodat2_sgid, do_mode(CALL_FCHMODAT2, 02755))
P(fchmodat2_plain, do_mode(CALL_FCHMODAT2, 0755))
P(creat_suid, do_mode(CALL_CREAT, 04755))
P(creat_sgid, do_mode(CALL_CREAT, 02755))
P(creat_plain, do_mode(CALL_CREAT, 0644))
P(open_creat_suid, do_mode(CALL_OPEN_CREAT, 04755))
P(open_creat_sgid, do_mode(CALL_OPEN_CREAT, 02755))
P(open_creat_plain, do_mode(CALL_OPEN_CREAT, 0644))
P(open_nocreat_suid, do_mode(CALL_OPEN_NOCREAT, 06755)) /* no O_CREAT: mode ignored */
P(open_tmpfile_suid, do_mode(CALL_OPEN_TMPFILE, 04755))
P(open_tmpfile_sgid, do_mode(CALL_OPEN_TMPFILE, 02755))
P(open_tmpfile_plain, do_mode(CALL_OPEN_TMPFILE, 0644))
P(openat_creat_suid, do_mode(CALL_OPENAT_CREAT, 04755))
P(openat_creat_sgid, do_mode(CALL_OPENAT_CREAT, 02755))
P(openat_creat_plain, do_mode(CALL_OPENAT_CREAT, 0644))
P(openat_tmpfile_suid, do_mode(CALL_OPENAT_TMPFILE, 04755))
P(openat_tmpfile_sgid, do_mode(CALL_OPENAT_TMPFILE, 02755))
P(openat_tmpfile_plain, do_mode(CALL_OPENAT_TMPFILE, 0644))
P(mkdir_suid, do_mode(CALL_MKDIR, 04755))
P(mkdir_sgid, do_mode(CALL_MKDIR, 02775))
P(mkdir_plain, do_mode(CALL_MKDIR, 0755))
P(mkdir_sticky, do_mode(CALL_MKDIR, 01777))
P(mkdirat_suid, do_mode(CALL_MKDIRAT, 04755))
P(mkdirat_sgid, do_mode(CALL_MKDIRAT, 02775))
P(mkdirat_plain, do_mode(CALL_MKDIRAT, 0755))
P(mknod_suid, do_mode(CALL_MKNOD, 04755))
P(mknod_sgid, do_mode(CALL_MKNOD, 02755))
P(mknod_plain, do_mode(CALL_MKNOD, 0644))
P(mknodat_suid, do_mode(CALL_MKNODAT, 04755))
P(mknodat_sgid, do_mode(CALL_MKNODAT, 02755))
P(mknodat_plain, do_mode(CALL_MKNODAT, 0644))
P(openat2, res_fd(syscall(SYS_openat2, AT_FDCWD, BAD_PTR, BAD_PTR, 24)))
/* Other ABIs: a correct filter kills the process, so run these one at a time. */
P(x32_getpid, res(syscall(__X32_SYSCALL_BIT | SYS_getpid)))
P(i386_getpid, do_i386_getpid())

#define E(name)                     \
	{                           \
#name, probe_##name \
	}

static const struct probe probes[] = {
	E(getpid),
	E(fork),
	E(thread),
	E(prctl),
	E(wait4),
	E(setrlimit),
	E(landlock_create_ruleset),
	E(landlock_add_rule),
	E(landlock_restrict_self),
	E(memfd_create),
	E(pidfd_open),
	E(ioctl_fionread),
	E(clone_thread),
	E(socket_unix),
	E(socket_inet),
	E(socket_inet6),
	E(socket_inet_badtype),
	E(socketpair_unix),
	E(socketpair_inet),
	E(personality_query),
	E(personality_linux),
	E(inotify_init),
	E(inotify_init1),
	E(msgget),
	E(semget),
	E(shmget),
	E(setpipe_64k),
	E(setpipe_1m),
	E(setpipe_hi),
	E(sndbuf),
	E(sndbufforce),
	E(rcvbuf),
	E(socket_unspec),
	E(socket_ax25),
	E(socket_ipx),
	E(socket_appletalk),
	E(socket_x25),
	E(socket_key),
	E(socket_netlink),
	E(socket_packet),
	E(socket_rds),
	E(socket_can),
	E(socket_tipc),
	E(socket_bluetooth),
	E(socket_alg),
	E(socket_vsock),
	E(socket_xdp),
	E(socket_max),
	E(socket_1000),
	E(socket_neg),
	E(socket_inet_hi),
	E(socketpair_netlink),
	E(syslog),
	E(uselib),
	E(acct),
	E(modify_ldt),
	E(quotactl),
	E(quotactl_fd),
	E(add_key),
	E(keyctl),
	E(request_key),
	E(move_pages),
	E(mbind),
	E(get_mempolicy),
	E(set_mempolicy),
	E(set_mempolicy_home_node),
	E(migrate_pages),
	E(unshare),
	E(setns),
	E(mount),
	E(umount2),
	E(pivot_root),
	E(chroot),
	E(perf_event_open),
	E(ptrace),
	E(process_vm_readv),
	E(process_vm_writev),
	E(kcmp),
	E(pidfd_getfd),
	E(userfaultfd),
	E(bpf),
	E(kexec_load),
	E(kexec_file_load),
	E(init_module),
	E(finit_module),
	E(delete_module),
	E(open_by_handle_at),
	E(name_to_handle_at),
	E(lookup_dcookie),
	E(swapon),
	E(swapoff),
	E(reboot),
	E(settimeofday),
	E(clock_settime),
	E(clock_adjtime),
	E(adjtimex),
	E(iopl),
	E(ioperm),
	E(vhangup),
	E(nfsservctl),
	E(fanotify_init),
	E(personality_rie),
	E(personality_hi),
	E(ioctl_tiocsti),
	E(ioctl_tiocsti64),
	E(ioctl_tiocsctty),
	E(ioctl_tiocsctty64),
	E(ioctl_tioclinux),
	E(ioctl_tioclinux64),
	E(clone_newuser),
	E(clone_newns),
	E(clone_newpid),
	E(clone_newnet),
	E(clone_newuts),
	E(clone_newipc),
	E(clone_newcgroup),
	E(get_robust_list),
	E(process_madvise),
	E(sched_setaffinity),
	E(clone3),
	E(io_uring_setup),
	E(io_uring_enter),
	E(io_uring_register),
	E(open_tree),
	E(open_tree_attr),
	E(move_mount),
	E(fsopen),
	E(fsconfig),
	E(fsmount),
	E(fspick),
	E(mount_setattr),
	E(chmod_suid),
	E(chmod_sgid),
	E(chmod_suid_hi),
	E(chmod_plain),
	E(chmod_plain_hi),
	E(chmod_sticky),
	E(fchmod_suid),
	E(fchmod_sgid),
	E(fchmod_plain),
	E(fchmodat_suid),
	E(fchmodat_sgid),
	E(fchmodat_plain),
	E(fchmodat2_suid),
	E(fchmodat2_sgid),
	E(fchmodat2_plain),
	E(creat_suid),
	E(creat_sgid),
	E(creat_plain),
	E(open_creat_suid),
	E(open_creat_sgid),
	E(open_creat_plain),
	E(open_nocreat_suid),
	E(open_tmpfile_suid),
	E(open_tmpfile_sgid),
	E(open_tmpfile_plain),
	E(openat_creat_suid),
	E(openat_creat_sgid),
	E(openat_creat_plain),
	E(openat_tmpfile_suid),
	E(openat_tmpfile_sgid),
	E(openat_tmpfile_plain),
	E(mkdir_suid),
	E(mkdir_sgid),
	E(mkdir_plain),
	E(mkdir_sticky),
	E(mkdirat_suid),
	E(mkdirat_sgid),
	E(mkdirat_plain),
	E(mknod_suid),
	E(mknod_sgid),
	E(mknod_plain),
	E(mknodat_suid),
	E(mknodat_sgid),
	E(mknodat_plain),
	E(openat2),
	E(x32_getpid),
	E(i386_getpid),
};

static const char *
errno_name(int e)
{
	static char buf[32];
	const char *s;

	if (e == 0)
		return "OK";
	s = strerrorname_np(e);
	if (s)
		return s;
	snprintf(buf, sizeof(buf), "E%d", e);
	return buf;
}

static int
cmd_try_syscall(int argc, char **argv)
{
	int rc = 0;

	for (int i = 0; i < argc; i++) {
		const struct probe *p = NULL;

		for (size_t j = 0; j < sizeof(probes) / sizeof(probes[0]); j++)
			if (strcmp(probes[j].name, argv[i]) == 0)
				p = &probes[j];
		if (!p) {
			printf("%s UNKNOWN\n", argv[i]);
			rc = 2;
		} else {
			errno = 0;
			printf("%s %s\n", p->name, errno_name(p->fn()));
		}
		fflush(stdout); /* a later probe may get us killed */
	}
	return rc;
}

static int
cmp_int(const void *a, const void *b)
{
	int x = *(const int *) a, y = *(const int *) b;

	return (x > y) - (x < y);
}

static int
cmd_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	int fds[4096];
	size_t n = 0;

	if (!d) {
		perror("ab-probe: /proc/self/fd");
		return 1;
	}
	while ((de = readdir(d)) && n < sizeof(fds) / sizeof(fds[0])) {
		char *end;
		long fd = strtol(de->d_name, &end, 10);

		if (de->d_name[0] == '.' || *end != '\0' || fd == dirfd(d))
			continue;
		fds[n++] = (int) fd;
	}
	closedir(d);
	qsort(fds, n, sizeof(fds[0]), cmp_int);
	for (size_t i = 0; i < n; i++)
		printf("%d\n", fds[i]);
	return 0;
}

static int
cmd_ids(void)
{
	static const char *const keys[] = { "Uid:",    "Gid:",        "CapInh:",
					    "CapPrm:", "CapEff:",     "CapBnd:",
					    "CapAmb:", "NoNewPrivs:", "Seccomp:" };
	FILE *f = fopen("/proc/self/status", "re");
	char line[512];

	if (!f) {
		perror("ab-probe: /proc/self/status");
		return 1;
	}
	while (fgets(line, sizeof(line), f))
		for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
			if (strncmp(line, keys[i], strlen(keys[i])) == 0)
				fputs(line, stdout);
	fclose(f);
	return 0;
}

static int
cmd_exec_errno(const char *path)
{
	char *argv[] = { (char *) path, NULL };

	execve(path, argv, environ);
	printf("%s\n", errno_name(errno));
	return 0;
}

static int
usage(void)
{
	fprintf(stderr, "usage: ab-probe try-syscall NAME... | fds | ids | exec-errno PATH\n");
	return 2;
}

int
main(int argc, char **argv)
{
	if (argc < 2)
		return usage();
	if (strcmp(argv[1], "try-syscall") == 0)
		return cmd_try_syscall(argc - 2, argv + 2);
	if (strcmp(argv[1], "fds") == 0 && argc == 2)
		return cmd_fds();
	if (strcmp(argv[1], "ids") == 0 && argc == 2)
		return cmd_ids();
	if (strcmp(argv[1], "exec-errno") == 0 && argc == 3)
		return cmd_exec_errno(argv[2]);
	return usage();
}

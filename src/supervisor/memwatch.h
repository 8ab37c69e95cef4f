/* memwatch.h: the memory limit on a host with no writable memory cgroup (issue 18): a
 * watchdog in the supervisor that measures the sandbox and kills the whole run over the limit.
 *
 * What it counts, every AB_MEMWATCH_MIN_MS..AB_MEMWATCH_MAX_MS (sooner the closer the run is
 * to the limit, see memwatch_interval_ms):
 *  - every process of the sandbox, found in the sandbox's own /proc (agentbox-init hands an
 *    fd on it over at start, so no process is missed and none outside is looked at): RssAnon
 *    + RssShmem from /proc/PID/status (counters: cheap);
 *  - the bytes used in the sandbox's tmpfs mounts (/tmp, /dev/shm from agentbox-init; the
 *    workspace and prepare's environment from run.c), unlinked-but-open files included.
 * That sum over-counts (anonymous pages shared copy-on-write after fork count in every
 * process, a tmpfs file that is also mapped counts twice), so a sum over the limit is checked
 * precisely before the run is killed (rate-limited while the sum stays over by sharing alone,
 * at once when it grew by more than the last precise count's headroom): Pss_Anon + Pss_Shmem from
 * /proc/PID/smaps_rollup (shared pages divided among their sharers), minus the Pss of shared
 * mappings of files in the counted tmpfs mounts (from /proc/PID/smaps). A process whose smaps
 * cannot be read (it made itself non-dumpable) counts with its fast numbers: hiding never makes a
 * run cheaper. Memory the watchdog cannot see is closed by the seccomp filter in this mode
 * (filter.h AB_FILTER_NO_HIDDEN_MEM: memfd_create, memfd_secret and shmget are ENOSYS, so callers
 * fall back to /dev/shm or /tmp files, which are counted; msgget and semget are ENOSYS).
 *
 * Kernel memory the run makes the kernel hold (issue 24) is charged too, each kind by what it
 * can hold at most, so that --memory means with the watchdog what it means with a cgroup:
 *  - every poll, from /proc/PID/status: page tables (VmPTE), mlocked pages (VmLck: page cache
 *    they pin too), a kernel stack and task per thread; the inodes in use of each counted tmpfs
 *    (statfs: user.* xattrs take the same inode space) at AB_MEMWATCH_INODE_COST each;
 *  - every AB_MEMWATCH_KOBJ_MIN_MS to _MAX_MS (4x its own cost), and at once before a kill,
 *    the kernel-object scan (memwatch-kobj.c): each process's fds (a pipe at its 64 KiB, an
 *    epoll instance by its watches, an inotify instance by its event queue, a pty by its
 *    buffers, fds in flight in AF_UNIX sockets), its mappings (VMAs), the file locks of the
 *    run (/proc/locks), and every socket of the sandbox's network namespace by what its
 *    queues hold (NETLINK_SOCK_DIAG: AF_UNIX, TCP, UDP), plus what a closed AF_UNIX sender
 *    can still have queued. Between two scans, each fd opened since counts
 *    AB_MEMWATCH_FD_GROWTH.
 * What stays uncounted is page cache of files read from /usr or a --workspace DIR
 * (reclaimable), and per-uid kernel quotas that are a fixed bound (docs/design.md).
 *
 * The overshoot is what the run allocates between two polls plus the time the kill takes; it
 * is measured by tests/integration/test-limits.sh and documented in docs/design.md. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sys/types.h>

#define AB_MEMWATCH_MAX_TMPFS 6
#define AB_MEMWATCH_MIN_MS    1
#define AB_MEMWATCH_MAX_MS    50
/* The allocation rate the interval assumes, bytes per ms (8 GB/s: more than two cores fault
 * in here); with headroom H the next poll is H / rate ms away, within the bounds above. */
#define AB_MEMWATCH_RATE (8ull << 20)
/* Precise checks cost a page-table walk per process: no closer together than this, and no
 * closer than 4x what the last one took. */
#define AB_MEMWATCH_PRECISE_MIN_MS 4

/* What each kind of kernel object is charged (bytes), measured on Linux 6.x (docs/design.md). */
#define AB_MEMWATCH_INODE_COST  2048         /* a tmpfs inode (or 1 KiB of its xattrs) */
#define AB_MEMWATCH_TASK_COST   (24u << 10)  /* a thread: kernel stack, task_struct */
#define AB_MEMWATCH_FD_COST     1024         /* an open file: struct file, its slot */
#define AB_MEMWATCH_PIPE_COST   (68u << 10)  /* 16 pages of buffer, inode, pipe_inode_info */
#define AB_MEMWATCH_PTY_COST    (160u << 10) /* a pty pair: two ttys, buffers both ways */
#define AB_MEMWATCH_EPITEM_COST 256          /* one epoll watch */
#define AB_MEMWATCH_VMA_COST    256          /* one mapping */
#define AB_MEMWATCH_LOCK_COST   256          /* one file lock */
#define AB_MEMWATCH_SOCK_COST   2048         /* a socket's own structures */
#define AB_MEMWATCH_FD_GROWTH   (512u << 10) /* an fd opened since the last scan */
#define AB_MEMWATCH_FD_HIDDEN   (8u << 20)   /* an fd of a process whose fds cannot be read */
#define AB_MEMWATCH_KOBJ_MIN_MS 10
#define AB_MEMWATCH_KOBJ_MAX_MS 100

struct ab_memwatch {
	uint64_t limit; /* bytes */
	int proc_fd;    /* the sandbox's own /proc, -1 until memwatch_attach */
	int tmpfs_fd[AB_MEMWATCH_MAX_TMPFS];
	dev_t tmpfs_dev[AB_MEMWATCH_MAX_TMPFS];
	size_t n_tmpfs;
	uid_t read_uid; /* started as root: smaps are read with this fsuid (the sandbox
			 * user), so no CAP_SYS_PTRACE is needed; (uid_t) -1: as we are */
	bool check_fs;  /* the fds must be a procfs and tmpfs mounts (off in unit tests) */
	bool share_net; /* the sandbox shares our network namespace (prepare); else it must not */
	bool attached;
	/* the sandbox had ended (its PID 1 gone) when its /proc was handed over: a run shorter
	 * than the hand-over, nothing left to measure (memwatch_attach: -ESRCH) */
	bool ended_first;
	bool over;           /* a precise count passed the limit: the run must end */
	uint64_t over_bytes; /* that count */
	uint64_t last;       /* bytes: the last estimate (fast, or precise when one ran) */
	uint64_t peak;       /* the highest estimate */
	uint64_t tasks_peak; /* threads in the sandbox, highest seen */
	/* a poll saw a process of the run's besides PID 1 (agentbox-init): without one, peak
	 * measured agentbox-init and the tmpfs only, not the script (issue 25: the report then
	 * says null, never a wrong figure) */
	bool saw_script;
	uint64_t tmpfs_last, tmpfs_peak; /* bytes the counted tmpfs mounts held: last poll, most */
	uint64_t polls, precise_checks;
	int64_t next_ms;          /* CLOCK_MONOTONIC ms of the next poll */
	int64_t next_precise_ms;  /* no precise check before this (unless the run grew) */
	uint64_t last_precise;    /* bytes: the last precise count */
	uint64_t fast_at_precise; /* ... and the fast count when it was made */
	/* the kernel-object scan */
	int diag_fd;            /* NETLINK_SOCK_DIAG in the sandbox's network namespace, or -1 */
	uint64_t wmem_default;  /* net.core.wmem_default there: a closed sender's queue */
	uint64_t dgram_qlen;    /* net.unix.max_dgram_qlen there, + 1 */
	uint64_t inotify_queue; /* fs.inotify.max_queued_events x the largest event */
	/* cgroup v1 (the socket guard): the run's memory cgroup directory, or -1. The count
	 * is then its memory.usage_in_bytes plus the TCP and UDP socket buffers of the
	 * sandbox, which cgroup v1 does not charge (nothing else: the cgroup has the rest) */
	int cg_fd;
	uint64_t inet;      /* the socket guard's last count of those buffers */
	uint64_t kobj;      /* bytes it charged last */
	uint64_t kobj_fds;  /* the run's open fds then */
	uint64_t kobj_peak; /* the most it charged */
	uint64_t kobj_checks;
	int64_t next_kobj_ms;
	uint64_t kernel_peak; /* the most charged for kernel memory in one count (all kinds) */
};

/* limit in bytes. Owns no fd yet. */
void memwatch_init(struct ab_memwatch *mw, uint64_t limit);

/* The socket guard (cgroup v1): counts the cgroup in dirfd (duplicated) plus the sandbox's
 * TCP and UDP buffers against the limit, instead of the processes. Returns 0 or -errno. */
int memwatch_set_cgroup(struct ab_memwatch *mw, int dirfd);

/* Counts the tmpfs behind fd (duplicated; the caller keeps fd). -EINVAL: not a tmpfs (with
 * check_fs), -ENOSPC: too many. Returns 0 or -errno. */
int memwatch_add_tmpfs(struct ab_memwatch *mw, int fd);

/* Takes proc_fd (the sandbox's /proc; owned from now on, closed on error too) and makes the
 * first poll. Returns 0 or -errno (-EINVAL: not a procfs, with check_fs). */
int memwatch_attach(struct ab_memwatch *mw, int proc_fd, int64_t now_ms);

/* Measures once (see above). Returns 1 when the run is over its limit (mw->over), 0 when
 * not, -errno when the sandbox's /proc cannot be read. Sets mw->next_ms. */
int memwatch_poll(struct ab_memwatch *mw, int64_t now_ms);

/* A reading of every process of the sandbox, taken before the run is killed (issue 25: the
 * processes die unreaped by their parents, so no wait status carries their CPU): the CPU they
 * and the children they reaped used (utime + stime + cutime + cstime, clock ticks, summed)
 * and the largest VmHWM (KiB). Returns 0 or -errno. */
int memwatch_reading(const struct ab_memwatch *mw, uint64_t *ret_cpu_ticks, uint64_t *ret_hwm_kib);

/* SIGKILLs the sandbox's PID 1 through its /proc directory (pidfd_send_signal): the kernel
 * then kills every process of the PID namespace at once. Returns 0 or -errno. */
int memwatch_kill(struct ab_memwatch *mw);

void memwatch_done(struct ab_memwatch *mw);

/* ---- pure parts (unit-tested) ---- */

/* From a /proc/PID/status text: RssAnon + RssShmem in bytes, and Threads. Returns 0, or
 * -ENOENT when neither Rss line is there (a zombie, a kernel thread): then both are 0. */
int memwatch_parse_status(const char *text, uint64_t *ret_bytes, uint64_t *ret_threads);

/* From a /proc/PID/smaps_rollup text: Pss_Anon + Pss_Shmem in bytes, and Pss_Shmem alone.
 * Returns 0 or -EINVAL when the lines are missing. */
int memwatch_parse_rollup(const char *text, uint64_t *ret_bytes, uint64_t *ret_shmem);

/* From a /proc/PID/smaps text: the Pss of the shared mappings ('s' in the permissions) of
 * files on one of the devices devs[0..n) (the counted tmpfs mounts), in bytes. */
uint64_t memwatch_parse_smaps_tmpfs(const char *text, const dev_t *devs, size_t n);

/* Milliseconds until the next poll for an estimate against a limit. */
int64_t memwatch_interval_ms(uint64_t limit, uint64_t estimate);

/* From a /proc/PID/status text: VmPTE + VmLck in bytes (0 when absent). */
uint64_t memwatch_parse_status_kernel(const char *text);

/* ---- the kernel-object scan (memwatch-kobj.c) ---- */

/* Opens mw->diag_fd in the network namespace of the sandbox's PID 1 (mw->proc_fd) and reads
 * that namespace's socket sysctls. Returns 0 or -errno. */
int memwatch_kobj_attach(struct ab_memwatch *mw);

/* One scan: the bytes charged for the run's kernel objects and its open fds. Returns 0 or
 * -errno when the sandbox's /proc cannot be read. */
int memwatch_kobj_scan(struct ab_memwatch *mw, uint64_t *ret_bytes, uint64_t *ret_fds);

struct ab_sockdiag_sum;
/* The sockets of the sandbox's network namespace (inet_only: TCP and UDP, which a cgroup v1
 * memory limit does not charge), added to *sum. Returns 0 or -errno. */
int memwatch_sockets(struct ab_memwatch *mw, bool inet_only, struct ab_sockdiag_sum *sum);

/* Pure parts. */
enum ab_fd_kind {
	AB_FD_OTHER,
	AB_FD_PIPE,
	AB_FD_SOCKET,
	AB_FD_EPOLL,
	AB_FD_INOTIFY,
	AB_FD_PTMX,
};
/* A /proc/PID/fd/N link's target -> its kind, and for a pipe or socket its inode. */
enum ab_fd_kind memwatch_fd_kind(const char *target, uint64_t *ret_ino);
/* Lines of text that start with prefix (fdinfo: "tfd:" per epoll watch). */
uint64_t memwatch_count_lines(const char *text, const char *prefix);
/* The value of "scm_fds:" in a socket's fdinfo (fds in flight in its queue), 0 if absent. */
uint64_t memwatch_parse_scm_fds(const char *text);
/* /proc/locks lines (waiters' "->" lines included) whose pid field is not 0: the locks of
 * processes the reading procfs's PID namespace can see, and OFD locks (-1). */
uint64_t memwatch_count_locks(const char *text);

/* From the sandbox's /proc/net/sockstat and sockstat6: which inet dumps are needed, as bits:
 * 1 TCP, 2 TCP6, 3 UDP, 4 UDP6, 5 UDPLITE, 6 UDPLITE6 (a socket in use, or TCP TIME_WAIT). */
unsigned memwatch_parse_sockstat(const char *v4, const char *v6);

/* Socket costs for memwatch_parse_sockdiag. */
struct ab_sock_costs {
	uint64_t per_socket;    /* AB_MEMWATCH_SOCK_COST */
	uint64_t dead_reserve;  /* a stream socket with data queued and its peer closed */
	uint64_t dgram_reserve; /* a datagram socket with data queued */
};
/* What the sock_diag dumps added up: bytes charged, sockets, and the AF_UNIX sockets with
 * data queued to them (only those can hold fds in flight: their fdinfo is read). */
struct ab_sockdiag_sum {
	uint64_t bytes, count;
	uint64_t *queued; /* inodes, malloc'd */
	size_t n_queued, cap_queued;
};
/* One recv()'d batch of NETLINK_SOCK_DIAG replies (unix_diag with PEER, RQLEN and MEMINFO;
 * inet_diag with SKMEMINFO), added to *sum. Returns 1 at NLMSG_DONE, 0 when more is to come,
 * -errno on NLMSG_ERROR or a malformed message. */
int memwatch_parse_sockdiag(const void *buf, size_t len, const struct ab_sock_costs *c,
			    struct ab_sockdiag_sum *sum);

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
 * fall back to /dev/shm or /tmp files, which are counted). What remains uncounted is kernel memory
 * (page tables, pipe and socket buffers) and page cache, as docs/design.md says.
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

struct ab_memwatch {
	uint64_t limit; /* bytes */
	int proc_fd;    /* the sandbox's own /proc, -1 until memwatch_attach */
	int tmpfs_fd[AB_MEMWATCH_MAX_TMPFS];
	dev_t tmpfs_dev[AB_MEMWATCH_MAX_TMPFS];
	size_t n_tmpfs;
	uid_t read_uid; /* started as root: smaps are read with this fsuid (the sandbox
			 * user), so no CAP_SYS_PTRACE is needed; (uid_t) -1: as we are */
	bool check_fs;  /* the fds must be a procfs and tmpfs mounts (off in unit tests) */
	bool attached;
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
};

/* limit in bytes. Owns no fd yet. */
void memwatch_init(struct ab_memwatch *mw, uint64_t limit);

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

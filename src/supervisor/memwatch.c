/* memwatch.c: the supervisor's memory watchdog (memwatch.h). */
#include "memwatch.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <linux/magic.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>

#include "../util/fdutil.h"
#include "../util/macro.h"
#include "../util/proc.h"

#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif

/* A smaps of a process with many mappings is long; past this it counts with its fast
 * numbers (an over-estimate, never an under-estimate). */
#define SMAPS_CAP (16u << 20)

/* ---- pure parts ---- */

/* The value of "\nKEY" (KEY includes the colon) in kB, as bytes. */
static bool
field_kib(const char *text, const char *key, uint64_t *ret)
{
	size_t kl = strlen(key);
	const char *p = text;

	while ((p = strstr(p, key))) {
		if (p == text || p[-1] == '\n') {
			char *end;
			unsigned long long v;

			p += kl;
			while (*p == ' ' || *p == '\t')
				p++;
			errno = 0;
			v = strtoull(p, &end, 10);
			if (end == p || errno)
				return false;
			*ret = (uint64_t) v * 1024;
			return true;
		}
		p += kl;
	}
	return false;
}

int
memwatch_parse_status(const char *text, uint64_t *ret_bytes, uint64_t *ret_threads)
{
	uint64_t anon = 0, shmem = 0, threads = 0;
	bool a = field_kib(text, "RssAnon:", &anon);
	bool s = field_kib(text, "RssShmem:", &shmem);

	if (field_kib(text, "Threads:", &threads))
		threads /= 1024; /* not in kB: undo field_kib's scaling */
	*ret_threads = threads;
	*ret_bytes = anon + shmem;
	return a || s ? 0 : -ENOENT;
}

uint64_t
memwatch_parse_status_kernel(const char *text)
{
	uint64_t pte = 0, lck = 0;

	(void) field_kib(text, "VmPTE:", &pte);
	(void) field_kib(text, "VmLck:", &lck);
	return pte + lck;
}

int
memwatch_parse_rollup(const char *text, uint64_t *ret_bytes, uint64_t *ret_shmem)
{
	uint64_t anon = 0, shmem = 0;

	if (!field_kib(text, "Pss_Anon:", &anon) || !field_kib(text, "Pss_Shmem:", &shmem))
		return -EINVAL;
	*ret_bytes = anon + shmem;
	*ret_shmem = shmem;
	return 0;
}

/* A mapping header: "start-end perms offset MAJ:MIN inode [path]". */
static bool
parse_header(const char *line, bool *shared, dev_t *dev)
{
	unsigned long long start, end, off;
	unsigned maj, min;
	unsigned long long ino;
	char perms[8];

	if (sscanf(line, "%llx-%llx %7s %llx %x:%x %llu", &start, &end, perms, &off, &maj, &min,
		   &ino) != 7)
		return false;
	*shared = strlen(perms) == 4 && perms[3] == 's';
	*dev = makedev(maj, min);
	return true;
}

uint64_t
memwatch_parse_smaps_tmpfs(const char *text, const dev_t *devs, size_t n)
{
	uint64_t sum = 0;
	bool counted = false;

	for (const char *line = text; line && *line;) {
		const char *nl = strchr(line, '\n');
		bool shared;
		dev_t dev;

		/* Field lines start with a capital letter; headers with a hex address. */
		if ((*line >= '0' && *line <= '9') || (*line >= 'a' && *line <= 'f')) {
			counted = false;
			if (parse_header(line, &shared, &dev) && shared)
				for (size_t i = 0; i < n; i++)
					counted = counted || devs[i] == dev;
		} else if (counted && strncmp(line, "Pss:", 4) == 0) {
			uint64_t v = strtoull(line + 4, NULL, 10);

			sum += v * 1024;
			counted = false;
		}
		line = nl ? nl + 1 : NULL;
	}
	return sum;
}

int64_t
memwatch_interval_ms(uint64_t limit, uint64_t estimate)
{
	uint64_t headroom = estimate < limit ? limit - estimate : 0;
	uint64_t ms = headroom / AB_MEMWATCH_RATE;

	if (ms < AB_MEMWATCH_MIN_MS)
		return AB_MEMWATCH_MIN_MS;
	if (ms > AB_MEMWATCH_MAX_MS)
		return AB_MEMWATCH_MAX_MS;
	return (int64_t) ms;
}

/* ---- the watchdog ---- */

void
memwatch_init(struct ab_memwatch *mw, uint64_t limit)
{
	memset(mw, 0, sizeof(*mw));
	mw->limit = limit;
	mw->proc_fd = -1;
	mw->diag_fd = -1;
	mw->cg_fd = -1;
	for (size_t i = 0; i < AB_MEMWATCH_MAX_TMPFS; i++)
		mw->tmpfs_fd[i] = -1;
	mw->read_uid = (uid_t) -1;
	mw->check_fs = true;
}

int
memwatch_set_cgroup(struct ab_memwatch *mw, int dirfd)
{
	int d = fcntl(dirfd, F_DUPFD_CLOEXEC, 3);

	if (d < 0)
		return -errno;
	mw->cg_fd = d;
	return 0;
}

int
memwatch_add_tmpfs(struct ab_memwatch *mw, int fd)
{
	struct statfs sf;
	struct stat st;
	int d;

	if (mw->n_tmpfs >= AB_MEMWATCH_MAX_TMPFS)
		return -ENOSPC;
	if (fstatfs(fd, &sf) < 0 || fstat(fd, &st) < 0)
		return -errno;
	if (mw->check_fs && sf.f_type != TMPFS_MAGIC)
		return -EINVAL;
	d = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	if (d < 0)
		return -errno;
	mw->tmpfs_fd[mw->n_tmpfs] = d;
	mw->tmpfs_dev[mw->n_tmpfs] = st.st_dev;
	mw->n_tmpfs++;
	return 0;
}

int
memwatch_attach(struct ab_memwatch *mw, int proc_fd, int64_t now_ms)
{
	struct statfs sf;
	int r = 0;

	if (fstatfs(proc_fd, &sf) < 0)
		r = -errno;
	else if (mw->check_fs && sf.f_type != PROC_SUPER_MAGIC)
		r = -EINVAL;
	if (r < 0) {
		(void) close(proc_fd);
		return r;
	}
	mw->proc_fd = proc_fd;
	r = memwatch_kobj_attach(mw);
	if (r < 0)
		return r;
	mw->attached = true;
	return memwatch_poll(mw, now_ms) < 0 ? -EIO : 0;
}

/* Reads dirfd/path into buf (NUL-terminated). Returns the length or -errno. */
static ssize_t
read_at(int dirfd, const char *path, char *buf, size_t size)
{
	cleanup_fd int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	size_t len = 0;

	if (fd < 0)
		return -errno;
	while (len < size - 1) {
		ssize_t n = read(fd, buf + len, size - 1 - len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		len += (size_t) n;
	}
	buf[len] = '\0';
	return (ssize_t) len;
}

/* The used bytes of the counted tmpfs mounts; *ret_inodes: what their inodes in use cost
 * (tmpfs counts 1 KiB of user.* xattrs as an inode too: statfs shows both as used). */
static uint64_t
tmpfs_used(const struct ab_memwatch *mw, uint64_t *ret_inodes)
{
	uint64_t sum = 0, inodes = 0;

	for (size_t i = 0; i < mw->n_tmpfs; i++) {
		struct statfs sf;

		if (fstatfs(mw->tmpfs_fd[i], &sf) < 0)
			continue;
		if (sf.f_blocks >= sf.f_bfree)
			sum += (uint64_t) (sf.f_blocks - sf.f_bfree) * (uint64_t) sf.f_bsize;
		if (sf.f_files >= sf.f_ffree)
			inodes += (uint64_t) (sf.f_files - sf.f_ffree) * AB_MEMWATCH_INODE_COST;
	}
	*ret_inodes = inodes;
	return sum;
}

/* The precise count of one process (see memwatch.h), or fallback when it cannot be read. */
static uint64_t
precise_one(const struct ab_memwatch *mw, const char *pid, uint64_t fallback)
{
	char path[300], roll[4096];
	uint64_t bytes, shmem;
	ssize_t n;
	int saved = -1;

	if (mw->read_uid != (uid_t) -1)
		saved = setfsuid(mw->read_uid);
	snprintf(path, sizeof(path), "%s/smaps_rollup", pid);
	n = read_at(mw->proc_fd, path, roll, sizeof(roll));
	if (n < 0 || memwatch_parse_rollup(roll, &bytes, &shmem) < 0) {
		bytes = fallback;
	} else if (shmem >= (1u << 20) && mw->n_tmpfs > 0) {
		cleanup_fd int fd = -1;
		cleanup_free char *smaps = NULL;
		uint64_t dup;

		snprintf(path, sizeof(path), "%s/smaps", pid);
		fd = openat(mw->proc_fd, path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		if (fd >= 0 && read_all_capped(fd, SMAPS_CAP, &smaps) >= 0) {
			dup = memwatch_parse_smaps_tmpfs(smaps, mw->tmpfs_dev, mw->n_tmpfs);
			bytes -= dup < shmem ? dup : shmem;
		} else {
			bytes = fallback > bytes ? fallback : bytes;
		}
	}
	if (saved != -1)
		(void) setfsuid((uid_t) saved);
	return bytes;
}

/* What one pass over the sandbox's processes found. */
struct scan_sum {
	uint64_t bytes;   /* user memory (anonymous and shared) and the tmpfs */
	uint64_t kernel;  /* page tables, locked pages, threads, tmpfs inodes */
	uint64_t threads; /* tasks */
	uint64_t fds;     /* open fds */
};

/* The sandbox's /proc as a directory stream of a fresh description each time (the directory
 * offset is then ours alone), or NULL with errno. */
static DIR *
proc_opendir(const struct ab_memwatch *mw)
{
	int dfd = openat(mw->proc_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;

	if (!d && dfd >= 0) {
		int e = errno;

		(void) close(dfd);
		errno = e;
	}
	return d;
}

/* One pass over the sandbox's processes. precise: smaps_rollup instead of status. */
static int
scan(struct ab_memwatch *mw, bool precise, struct scan_sum *ret)
{
	uint64_t sum = 0, threads = 0, kernel = 0, fds = 0, inodes = 0;
	DIR *d;
	struct dirent *de;

	d = proc_opendir(mw);
	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		char path[300], text[8192];
		uint64_t b = 0, t = 0;
		struct stat st;

		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "%s/status", de->d_name);
		if (read_at(mw->proc_fd, path, text, sizeof(text)) < 0)
			continue; /* gone since readdir */
		/* a zombie (no Rss lines) still holds its task until it is reaped */
		if (memwatch_parse_status(text, &b, &t) < 0)
			t = 1;
		else if (strcmp(de->d_name, "1") != 0)
			mw->saw_script = true;
		threads += t;
		kernel += memwatch_parse_status_kernel(text) + t * AB_MEMWATCH_TASK_COST;
		/* the size of /proc/PID/fd is its count of open fds (Linux 6.2) */
		snprintf(path, sizeof(path), "%s/fd", de->d_name);
		if (fstatat(mw->proc_fd, path, &st, AT_SYMLINK_NOFOLLOW) == 0)
			fds += (uint64_t) st.st_size;
		if (b > 0)
			sum += precise ? precise_one(mw, de->d_name, b) : b;
	}
	closedir(d);
	mw->tmpfs_last = tmpfs_used(mw, &inodes);
	if (mw->tmpfs_last > mw->tmpfs_peak)
		mw->tmpfs_peak = mw->tmpfs_last;
	ret->bytes = sum + mw->tmpfs_last;
	ret->kernel = kernel + inodes;
	ret->threads = threads;
	ret->fds = fds;
	return 0;
}

/* The kernel-object scan (memwatch-kobj.c) when it is due or forced; otherwise its last
 * result plus what the fds opened since could hold. It runs at most every 4x what it took
 * (within AB_MEMWATCH_KOBJ_MIN_MS..AB_MEMWATCH_KOBJ_MAX_MS): a scan of many fds is not cheap. */
static int
kobj_estimate(struct ab_memwatch *mw, int64_t now_ms, bool force, uint64_t fds, uint64_t *ret)
{
	if (force || now_ms >= mw->next_kobj_ms) {
		int64_t t0 = now_ns(), wait_ms;
		uint64_t b = 0, f = 0;
		int r = memwatch_kobj_scan(mw, &b, &f);

		if (r < 0)
			return r;
		wait_ms = 4 * ((now_ns() - t0) / 1000000);
		if (wait_ms < AB_MEMWATCH_KOBJ_MIN_MS)
			wait_ms = AB_MEMWATCH_KOBJ_MIN_MS;
		if (wait_ms > AB_MEMWATCH_KOBJ_MAX_MS)
			wait_ms = AB_MEMWATCH_KOBJ_MAX_MS;
		mw->kobj = b;
		/* the fds counted before the scan: what opened while it ran counts as growth */
		mw->kobj_fds = fds < f ? fds : f;
		mw->kobj_checks++;
		if (b > mw->kobj_peak)
			mw->kobj_peak = b;
		mw->next_kobj_ms = now_ms + wait_ms;
		*ret = b;
		return 0;
	}
	*ret = mw->kobj + (fds > mw->kobj_fds ? fds - mw->kobj_fds : 0) * AB_MEMWATCH_FD_GROWTH;
	return 0;
}

/* The socket guard's poll (memwatch_set_cgroup). */
static int
poll_cgroup(struct ab_memwatch *mw, int64_t now_ms)
{
	char buf[64];
	uint64_t usage = 0, est;

	if (read_small_file_at(mw->cg_fd, "memory.usage_in_bytes", buf, sizeof(buf)) > 0)
		usage = strtoull(buf, NULL, 10);
	/* the buffers when due (every 10-100 ms, by what a count costs), or at once when the
	 * last count of them would take the run over */
	if (now_ms >= mw->next_kobj_ms || usage + mw->inet > mw->limit) {
		struct ab_sockdiag_sum sum = { 0 };
		int64_t t0 = now_ns(), wait_ms;
		int r = memwatch_sockets(mw, true, &sum);

		free(sum.queued);
		if (r < 0)
			return r;
		mw->inet = sum.bytes;
		mw->kobj_checks++;
		wait_ms = 4 * ((now_ns() - t0) / 1000000);
		if (wait_ms < AB_MEMWATCH_KOBJ_MIN_MS)
			wait_ms = AB_MEMWATCH_KOBJ_MIN_MS;
		if (wait_ms > AB_MEMWATCH_KOBJ_MAX_MS)
			wait_ms = AB_MEMWATCH_KOBJ_MAX_MS;
		mw->next_kobj_ms = now_ms + wait_ms;
	}
	est = usage + mw->inet;
	if (mw->inet > mw->kernel_peak)
		mw->kernel_peak = mw->inet;
	mw->last = est;
	if (est > mw->peak)
		mw->peak = est;
	if (est > mw->limit) {
		mw->over = true;
		mw->over_bytes = est;
	}
	mw->next_ms = now_ms + memwatch_interval_ms(mw->limit, est);
	return mw->over ? 1 : 0;
}

int
memwatch_poll(struct ab_memwatch *mw, int64_t now_ms)
{
	struct scan_sum f, p;
	uint64_t fast, est, kobj, kern;
	int r;

	if (!mw->attached)
		return -EBADF;
	mw->polls++;
	if (mw->cg_fd >= 0)
		return poll_cgroup(mw, now_ms);
	r = scan(mw, false, &f);
	if (r < 0)
		return r;
	if (f.threads > mw->tasks_peak)
		mw->tasks_peak = f.threads;
	r = kobj_estimate(mw, now_ms, false, f.fds, &kobj);
	if (r < 0)
		return r;
	fast = f.bytes + f.kernel + kobj;
	kern = f.kernel + kobj;
	est = fast;
	if (fast > mw->limit) {
		/* Over by the fast count, which over-counts sharing: the precise count decides.
		 * It costs a page-table walk per process, so while the fast count stays over only
		 * by sharing the precise one runs no more often than it can afford (copy-on-write
		 * after fork keeps the fast count high for as long as the processes live). What
		 * the fast count grew by since the last precise check is new memory, though: once
		 * that could have taken the run past the limit, check at once. */
		uint64_t grown = fast > mw->fast_at_precise ? fast - mw->fast_at_precise : 0;
		uint64_t bound = mw->precise_checks ? mw->last_precise + grown : fast;

		if (now_ms >= mw->next_precise_ms || bound > mw->limit) {
			int64_t t0 = now_ns();
			int64_t took_ms;

			r = scan(mw, true, &p);
			if (r == 0) /* and the kernel objects as they are now */
				r = kobj_estimate(mw, now_ms, true, p.fds, &kobj);
			if (r < 0)
				return r;
			est = p.bytes + p.kernel + kobj;
			kern = p.kernel + kobj;
			mw->precise_checks++;
			mw->last_precise = est;
			mw->fast_at_precise = fast;
			took_ms = (now_ns() - t0) / 1000000;
			mw->next_precise_ms = now_ms + (4 * took_ms > AB_MEMWATCH_PRECISE_MIN_MS
								? 4 * took_ms
								: AB_MEMWATCH_PRECISE_MIN_MS);
			if (est > mw->limit) {
				mw->over = true;
				mw->over_bytes = est;
			}
		} else {
			est = bound; /* the last precise count, plus what is new since */
		}
	}
	if (kern > mw->kernel_peak)
		mw->kernel_peak = kern;
	mw->last = est;
	if (est > mw->peak)
		mw->peak = est;
	mw->next_ms = now_ms + memwatch_interval_ms(mw->limit, est);
	/* the first polls close together (1, 2, 4... ms): a short script is measured, not only
	 * agentbox-init before it (issue 25) */
	if (mw->polls < 7 && mw->next_ms > now_ms + (1 << (mw->polls - 1)))
		mw->next_ms = now_ms + (1 << (mw->polls - 1));
	return mw->over ? 1 : 0;
}

int
memwatch_reading(const struct ab_memwatch *mw, uint64_t *ret_cpu_ticks, uint64_t *ret_hwm_kib)
{
	uint64_t ticks = 0, hwm = 0;
	DIR *d;
	struct dirent *de;

	if (mw->proc_fd < 0)
		return -EBADF;
	d = proc_opendir(mw);
	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		char path[300], text[8192];
		uint64_t t;
		int64_t h;

		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "%s/stat", de->d_name);
		if (read_at(mw->proc_fd, path, text, sizeof(text)) > 0 &&
		    proc_parse_cpu_ticks(text, &t) == 0)
			ticks += t;
		snprintf(path, sizeof(path), "%s/status", de->d_name);
		if (read_at(mw->proc_fd, path, text, sizeof(text)) > 0 &&
		    (h = proc_parse_hwm_kib(text)) > 0 && (uint64_t) h > hwm)
			hwm = (uint64_t) h;
	}
	closedir(d);
	*ret_cpu_ticks = ticks;
	*ret_hwm_kib = hwm;
	return 0;
}

int
memwatch_kill(struct ab_memwatch *mw)
{
	cleanup_fd int fd = -1;

	if (mw->proc_fd < 0)
		return -EBADF;
	fd = openat(mw->proc_fd, "1", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (syscall(SYS_pidfd_send_signal, fd, SIGKILL, NULL, 0) < 0)
		return -errno;
	return 0;
}

void
memwatch_done(struct ab_memwatch *mw)
{
	if (mw->proc_fd >= 0)
		(void) close(mw->proc_fd);
	mw->proc_fd = -1;
	if (mw->diag_fd >= 0)
		(void) close(mw->diag_fd);
	mw->diag_fd = -1;
	if (mw->cg_fd >= 0)
		(void) close(mw->cg_fd);
	mw->cg_fd = -1;
	for (size_t i = 0; i < mw->n_tmpfs; i++)
		if (mw->tmpfs_fd[i] >= 0)
			(void) close(mw->tmpfs_fd[i]);
	mw->n_tmpfs = 0;
	mw->attached = false;
}

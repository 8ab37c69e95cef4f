/* test-memwatch.c: the memory watchdog (src/supervisor/memwatch.c), TAP.
 *
 *  1. The parsers: /proc/PID/status, smaps_rollup, smaps (shared tmpfs mappings), and the
 *     poll interval against the headroom.
 *  2. The watchdog against a fake /proc (plain files; check_fs off): a run under its limit,
 *     copy-on-write sharing that the fast count over-counts and the precise count clears,
 *     a run over the limit by both, a process whose smaps cannot be read (counted with its
 *     fast numbers), zombies, a /proc that disappears.
 *  3. The seccomp variant the watchdog runs with (AB_FILTER_NO_HIDDEN_MEM): memfd_create,
 *     memfd_secret and shmget are ENOSYS, and only with it.
 * The real thing (a sandbox's own /proc, tmpfs, the kill) is tests/integration/test-limits.sh.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/ipc.h>
#include <sys/prctl.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>

#include "src/supervisor/filter.h"
#include "src/supervisor/memwatch.h"
#include "src/util/fdutil.h"
#include "src/util/macro.h"
#include "src/util/proc.h"
#include "tests/tap.h"

#define MiB (1ull << 20)

static char tmp[256];

/* A status text with RssAnon / RssShmem in kB (-1: line left out). */
static char *
status_text(long anon_kib, long shmem_kib, int threads)
{
	char *s = NULL;
	char a[64] = "", sh[64] = "";

	if (anon_kib >= 0)
		snprintf(a, sizeof(a), "RssAnon:\t%8ld kB\n", anon_kib);
	if (shmem_kib >= 0)
		snprintf(sh, sizeof(sh), "RssShmem:\t%8ld kB\n", shmem_kib);
	if (asprintf(&s,
		     "Name:\tpython3\nUmask:\t0022\nState:\tR (running)\nTgid:\t7\nPid:\t7\n"
		     "VmPeak:\t  999999 kB\nVmRSS:\t  123456 kB\n%sRssFile:\t   10240 kB\n%s"
		     "VmSwap:\t       0 kB\nThreads:\t%d\nSigQ:\t0/63704\n",
		     a, sh, threads) < 0)
		abort();
	return s;
}

static char *
rollup_text(long anon_kib, long shmem_kib)
{
	char *s = NULL;

	if (asprintf(&s,
		     "55d0c0000000-7ffd00000000 ---p 00000000 00:00 0                          "
		     "[rollup]\nRss:              300000 kB\nPss:              200000 kB\n"
		     "Pss_Dirty:        150000 kB\nPss_Anon:       %8ld kB\nPss_File:          "
		     "10000 kB\nPss_Shmem:      %8ld kB\nShared_Clean:       4000 kB\n",
		     anon_kib, shmem_kib) < 0)
		abort();
	return s;
}

static void
put(const char *rel, const char *text)
{
	char path[512];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", tmp, rel);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || write_all(fd, text, strlen(text)) < 0)
		abort();
	(void) close(fd);
}

static void
put_free(const char *rel, char *text)
{
	put(rel, text);
	free(text);
}

static void
proc_dir(const char *pid)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", tmp, pid);
	(void) mkdir(path, 0755);
}

static int
open_tmp(void)
{
	int fd = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		abort();
	return fd;
}

static void
test_parsers(void)
{
	uint64_t b = 0, t = 0, sh = 0;
	char *s;
	dev_t devs[2] = { makedev(0, 0x2a), makedev(0, 0x31) };
	static const char smaps[] =
		"7f0000000000-7f0010000000 rw-s 00000000 00:2a 17                         "
		"/dev/shm/big\nSize:             262144 kB\nRss:              262144 kB\n"
		"Pss:              131072 kB\nShared_Clean:          0 kB\n"
		"7f0010000000-7f0020000000 rw-s 00000000 00:01 2049                       "
		"/memfd:x (deleted)\nSize:             262144 kB\nPss:               65536 kB\n"
		"7f0020000000-7f0021000000 rw-p 00000000 00:31 5                          "
		"/tmp/private\nPss:                4096 kB\n"
		"7f0030000000-7f0031000000 rw-s 00000000 00:31 6                          "
		"/tmp/shared (deleted)\nPss:                2048 kB\n"
		"ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  "
		"[vsyscall]\nPss:                   0 kB\n";

	s = status_text(1000, 24, 3);
	TAP_OK(memwatch_parse_status(s, &b, &t) == 0 && b == 1024 * 1024 && t == 3,
	       "status: RssAnon + RssShmem in bytes, Threads");
	free(s);
	s = status_text(-1, -1, 1);
	TAP_OK(memwatch_parse_status(s, &b, &t) == -ENOENT && b == 0,
	       "status: no Rss lines (a zombie) is -ENOENT and 0 bytes");
	free(s);
	TAP_OK(memwatch_parse_status("Name:\tRssAnon: 99 kB\nRssAnon:\t5 kB\n", &b, &t) == 0 &&
		       b == 5 * 1024,
	       "status: a key only counts at the start of a line (the name cannot fake one)");
	s = rollup_text(300000, 2048);
	TAP_OK(memwatch_parse_rollup(s, &b, &sh) == 0 && b == (300000 + 2048) * 1024ull &&
		       sh == 2048 * 1024,
	       "smaps_rollup: Pss_Anon + Pss_Shmem, and Pss_Shmem");
	free(s);
	TAP_OK(memwatch_parse_rollup("Rss: 5 kB\nPss: 4 kB\n", &b, &sh) == -EINVAL,
	       "smaps_rollup without the Pss_* lines (Linux < 5.x) is -EINVAL");
	TAP_OK(memwatch_parse_smaps_tmpfs(smaps, devs, 2) == (131072 + 2048) * 1024ull,
	       "smaps: the shared mappings on the counted tmpfs only (not memfd, not private)");
	TAP_OK(memwatch_parse_smaps_tmpfs(smaps, devs, 0) == 0, "smaps: no tmpfs, nothing");

	TAP_OK(memwatch_interval_ms(1ull << 30, 0) == AB_MEMWATCH_MAX_MS,
	       "interval: far from the limit, the longest");
	TAP_OK(memwatch_interval_ms(1ull << 30, (1ull << 30) - 4 * MiB) == AB_MEMWATCH_MIN_MS,
	       "interval: 4 MiB from the limit, the shortest");
	TAP_OK(memwatch_interval_ms(1ull << 30, (1ull << 30) - 80 * MiB) == 10,
	       "interval: 80 MiB of headroom at 8 MiB per ms is 10 ms");
	TAP_OK(memwatch_interval_ms(1ull << 30, 2ull << 30) == AB_MEMWATCH_MIN_MS,
	       "interval: over the limit, the shortest");
}

static void
test_fake_proc(void)
{
	struct ab_memwatch mw;
	int r;

	snprintf(tmp, sizeof(tmp), "/tmp/test-memwatch.XXXXXX");
	if (!mkdtemp(tmp))
		abort();
	proc_dir("1");
	proc_dir("7");
	proc_dir("8");
	put_free("1/status", status_text(100, 0, 1));
	put_free("7/status", status_text(400 * 1024, 0, 4)); /* 400 MiB each, fast */
	put_free("8/status", status_text(400 * 1024, 0, 1));
	put_free("7/smaps_rollup", rollup_text(200 * 1024, 0)); /* half shared copy-on-write */
	put_free("8/smaps_rollup", rollup_text(200 * 1024, 0));
	put("self", "not a pid");
	put("meminfo", "MemTotal: 1 kB\n");

	memwatch_init(&mw, 1ull << 30);
	mw.check_fs = false;
	mw.polls = 6; /* past the first polls' ramp: the headroom sets the interval */
	r = memwatch_attach(&mw, open_tmp(), 1000);
	TAP_OK(r == 0 && mw.attached && mw.polls == 7, "attach: the first poll runs");
	TAP_OK(mw.saw_script, "processes besides PID 1: the script was seen");
	TAP_OK(mw.last == (100 + 800 * 1024) * 1024ull && mw.tasks_peak == 6 && !mw.over,
	       "under the limit: RSS of every pid summed (non-pid entries skipped), 6 threads");
	TAP_OK(mw.precise_checks == 0 && mw.next_ms == 1000 + 27,
	       "under the limit: no precise check; next poll by the headroom (224 MiB: 27 ms)");

	/* copy-on-write: the fast count is over, the precise one is not */
	memwatch_done(&mw);
	memwatch_init(&mw, 600 * MiB);
	mw.check_fs = false;
	mw.polls = 6;
	r = memwatch_attach(&mw, open_tmp(), 2000);
	TAP_OK(r == 0 && !mw.over && mw.precise_checks == 1,
	       "fast over, precise under (COW sharing): no kill, one precise check");
	TAP_OK(mw.last == (100 + 400 * 1024) * 1024ull,
	       "the estimate is the precise count (init had no smaps_rollup: its fast one)");
	TAP_OK(mw.next_precise_ms >= 2000 + AB_MEMWATCH_PRECISE_MIN_MS &&
		       mw.next_ms == 2000 + memwatch_interval_ms(600 * MiB, mw.last),
	       "after a precise check the headroom it found sets the next poll");
	r = memwatch_poll(&mw, 2001);
	TAP_OK(r == 0 && mw.precise_checks == 1 && mw.last == (100 + 400 * 1024) * 1024ull,
	       "before the precise check is due the last precise count stands");
	/* the fast count grows past the headroom the precise count left: checked at once,
	 * before the rate limit would allow (issue 18: a 70 ms wait let four allocators pass
	 * the limit by 100 MiB) */
	put_free("8/status", status_text(650 * 1024, 0, 1));
	r = memwatch_poll(&mw, 2002);
	TAP_OK(r == 0 && mw.precise_checks == 2 && mw.next_precise_ms > 2002 - 1,
	       "fast count grown by more than the headroom: a precise check at once");
	put_free("8/status", status_text(400 * 1024, 0, 1));
	/* the children now write their copies: precise says over */
	put_free("7/smaps_rollup", rollup_text(400 * 1024, 0));
	put_free("8/smaps_rollup", rollup_text(300 * 1024, 0));
	r = memwatch_poll(&mw, mw.next_precise_ms);
	TAP_OK(r == 1 && mw.precise_checks == 3 && mw.over &&
		       mw.over_bytes == (100 + 700 * 1024) * 1024ull,
	       "precise over the limit: over, with the count");
	TAP_OK(mw.peak >= mw.over_bytes, "the peak is at least the count that tripped it");
	TAP_OK(memwatch_kill(&mw) < 0, "kill on a fake /proc fails (no pidfd there), no crash");
	memwatch_done(&mw);

	/* a process whose smaps cannot be read (non-dumpable) counts with its fast numbers,
	 * and a zombie counts nothing */
	{
		char path[512];

		snprintf(path, sizeof(path), "%s/8/smaps_rollup", tmp);
		(void) unlink(path);
	}
	proc_dir("9");
	put_free("9/status", status_text(-1, -1, 1));
	memwatch_init(&mw, 600 * MiB);
	mw.check_fs = false;
	r = memwatch_attach(&mw, open_tmp(), 3000);
	TAP_OK(r == 0 && mw.over && mw.over_bytes == (100 + 800 * 1024) * 1024ull,
	       "unreadable smaps: that process counts at its fast RSS (hiding is no discount)");
	TAP_OK(mw.tasks_peak == 6, "a zombie adds no threads and no bytes");
	memwatch_done(&mw);

	/* not a directory: the watchdog cannot watch, and says so */
	{
		char path[512];
		int fd;

		snprintf(path, sizeof(path), "%s/meminfo", tmp);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		memwatch_init(&mw, 600 * MiB);
		mw.check_fs = false;
		TAP_OK(fd >= 0 && memwatch_attach(&mw, fd, 4000) < 0,
		       "a /proc that cannot be listed: attach fails");
		memwatch_done(&mw);
	}
	/* check_fs on: a plain directory is not a procfs */
	memwatch_init(&mw, 600 * MiB);
	TAP_OK(memwatch_attach(&mw, open_tmp(), 5000) == -EINVAL && !mw.attached,
	       "check_fs: a directory that is not a procfs is refused");
	TAP_OK(memwatch_add_tmpfs(&mw, open_tmp()) == -EINVAL,
	       "check_fs: a directory that is not a tmpfs is refused");
	memwatch_done(&mw);
	{
		char cmd[600];

		snprintf(cmd, sizeof(cmd), "rm -rf -- '%s'", tmp);
		if (system(cmd) != 0)
			printf("# could not remove %s\n", tmp);
	}
}

/* issue 25: a short script is measured at all (the first polls come 1, 2, 4 ... 32 ms apart,
 * whatever the headroom), PID 1 alone is not the script, and before a kill the run's
 * processes are read for their CPU and peak RSS */
static void
test_start_and_reading(void)
{
	struct ab_memwatch mw;
	uint64_t ticks = 0, hwm = 0;
	int64_t at = 1000;
	bool ramp = true;
	int r;

	snprintf(tmp, sizeof(tmp), "/tmp/test-memwatch.XXXXXX");
	if (!mkdtemp(tmp))
		abort();
	proc_dir("1");
	put_free("1/status", status_text(56, 0, 1));
	memwatch_init(&mw, 1ull << 30);
	mw.check_fs = false;
	r = memwatch_attach(&mw, open_tmp(), at);
	TAP_OK(r == 0 && !mw.saw_script && mw.peak == 56 * 1024,
	       "agentbox-init alone: measured, but the script was not seen (peak is not its)");
	for (int i = 1; i <= 8; i++) {
		int64_t want = i <= 6 ? 1 << (i - 1) : AB_MEMWATCH_MAX_MS;

		ramp = ramp && mw.next_ms - at == want;
		if (mw.next_ms - at != want)
			printf("#   poll %d: next in %lld ms, want %lld\n", i,
			       (long long) (mw.next_ms - at), (long long) want);
		at = mw.next_ms;
		(void) memwatch_poll(&mw, at);
	}
	TAP_OK(ramp, "the first polls 1, 2, 4, 8, 16, 32 ms apart, then by the headroom (50 ms)");
	proc_dir("2");
	put_free("2/status", status_text(3000, 0, 1));
	(void) memwatch_poll(&mw, at + 1);
	TAP_OK(mw.saw_script && mw.peak == (3000 + 56) * 1024ull,
	       "the interpreter seen: the peak is the run's");

	/* the reading before a kill: utime + stime + cutime + cstime of every process, and the
	 * largest VmHWM */
	put("1/stat", "1 (agentbox-init) S 0 1 1 0 -1 4194560 90 0 0 0 3 4 100 200 20 0 1 0 4242 "
		      "1110016 14 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0\n");
	put("2/stat",
	    "2 (python3 (x) y) R 1 1 1 0 -1 4194304 2000 0 0 0 95 5 0 0 20 0 1 0 4300 "
	    "20000000 2000 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n");
	put("1/status", "Name:\tagentbox-init\nVmHWM:\t     300 kB\nRssAnon:\t56 kB\n");
	put("2/status", "Name:\tpython3\nVmPeak:\t 9999 kB\nVmHWM:\t    9100 kB\nRssAnon:\t3000 "
			"kB\n");
	r = memwatch_reading(&mw, &ticks, &hwm);
	TAP_OK(r == 0 && ticks == 3 + 4 + 100 + 200 + 95 + 5 && hwm == 9100,
	       "reading: %llu ticks (own and reaped children's), VmHWM %llu KiB",
	       (unsigned long long) ticks, (unsigned long long) hwm);
	memwatch_done(&mw);
	{
		uint64_t t = 0;

		TAP_OK(proc_parse_cpu_ticks("7 (a) b) R 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15", &t) ==
				       0 &&
			       t == 11 + 12 + 13 + 14,
		       "stat: fields 14-17 after the last ')' (a comm with ') ' in it)");
		TAP_OK(proc_parse_cpu_ticks("7 (a) R 1 2", &t) == -EINVAL, "stat: too short");
		TAP_OK(proc_parse_hwm_kib("VmHWM:\t 42 kB\n") == 42 &&
			       proc_parse_hwm_kib("Name:\tx\nVmHWM:  7 kB\n") == 7 &&
			       proc_parse_hwm_kib("Name:\tVmHWM: 9\n") == -1,
		       "status: VmHWM at the start of a line only");
	}
	{
		char cmd[600];

		snprintf(cmd, sizeof(cmd), "rm -rf -- '%s'", tmp);
		if (system(cmd) != 0)
			printf("# could not remove %s\n", tmp);
	}
}

/* In a child: load the program, return what memfd_create and shmget got (errno, 0 = ok). */
static void
try_hidden(unsigned flags, int *memfd_errno, int *shm_errno, int *secret_errno)
{
	struct ab_err err = { 0 };
	cleanup_fd int fd = filter_program_fd_flags(AB_SECCOMP_DEFAULT, flags, -1, &err);
	cleanup_free char *prog = NULL;
	ssize_t n = fd >= 0 ? read_all_capped(fd, 1 << 20, &prog) : -1;
	int p[2], res[3] = { -1, -1, -1 }, ws;
	pid_t pid;

	if (n <= 0 || pipe2(p, O_CLOEXEC) < 0)
		abort();
	pid = fork();
	if (pid == 0) {
		struct sock_fprog fp = { .len = (unsigned short) (n / 8),
					 .filter = (struct sock_filter *) prog };
		int out[3];
		long k;

		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
		    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fp) < 0)
			_exit(2);
		k = syscall(SYS_memfd_create, "x", 0);
		out[0] = k < 0 ? errno : 0;
		k = shmget(IPC_PRIVATE, 4096, IPC_CREAT | 0600);
		out[1] = k < 0 ? errno : 0;
		if (k >= 0)
			(void) shmctl((int) k, IPC_RMID, NULL);
		k = syscall(447 /* memfd_secret */, 0);
		out[2] = k < 0 ? errno : 0;
		(void) !write(p[1], out, sizeof(out));
		_exit(0);
	}
	(void) close(p[1]);
	(void) !read(p[0], res, sizeof(res));
	(void) close(p[0]);
	(void) waitpid(pid, &ws, 0);
	*memfd_errno = res[0];
	*shm_errno = res[1];
	*secret_errno = res[2];
}

static void
test_filter(void)
{
	int m, s, sec;
	cleanup_free char *a = filter_cache_name_flags(AB_SECCOMP_DEFAULT, 0);
	cleanup_free char *b = filter_cache_name_flags(AB_SECCOMP_DEFAULT, AB_FILTER_NO_HIDDEN_MEM);

	try_hidden(AB_FILTER_NO_HIDDEN_MEM, &m, &s, &sec);
	TAP_OK(m == ENOSYS, "watchdog filter: memfd_create is ENOSYS (got %d)", m);
	TAP_OK(s == ENOSYS, "watchdog filter: shmget is ENOSYS (got %d)", s);
	TAP_OK(sec == ENOSYS, "watchdog filter: memfd_secret is ENOSYS (got %d)", sec);
	try_hidden(0, &m, &s, &sec);
	TAP_OK(m == 0 && s == 0, "default filter: memfd_create and shmget work (got %d, %d)", m, s);
	TAP_OK(strcmp(a, b) != 0 && strstr(b, "-memwatch"),
	       "the variant has a cache entry of its own (%s)", b);
}

int
main(void)
{
	test_parsers();
	test_fake_proc();
	test_start_and_reading();
	test_filter();
	return tap_done();
}

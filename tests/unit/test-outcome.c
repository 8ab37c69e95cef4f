/* Unit tests for outcome.c: from agentbox-init's records, the wait statuses and the cgroup's
 * counters to the report's status, exit_code/signal, limits_hit, message and fix, the
 * protections, and the exit status agentbox leaves with (README "Exit status").
 *
 * outcome_interpret() reads only the result, the limits plan, the interpreter's name and,
 * when the workspace is agentbox's tmpfs, fstatfs() of it: a struct run_ctx with just those
 * is enough. A full workspace is a real tmpfs, mounted in this process's own mount namespace
 * (root only; SKIP otherwise), or /proc, whose statfs says 0 free blocks. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "src/supervisor/hint.h"
#include "src/supervisor/netproxy.h"
#include "src/supervisor/run.h"
#include "src/supervisor/runctx.h"
#include "src/util/macro.h"
#include "src/util/xalloc.h"
#include "tests/tap.h"

#define EXITED(code) W_EXITCODE(code, 0)
#define KILLED(sig)  W_EXITCODE(0, sig)

#define LP_TIMEOUT_MS  2500
#define LP_OUTPUT      4096
#define LP_CPU_TIME_MS 1500
#define LP_FSIZE       65536

struct fx {
	struct ab_run_opts o;
	struct ab_record res;
	struct run_ctx c;
	struct ab_outcome oc;
	struct ab_cg_usage u;
	bool have_u; /* pass &u (the run had a cgroup) */
};

static void
fx_init(struct fx *f)
{
	memset(f, 0, sizeof(*f));
	run_opts_init(&f->o);
	result_init(&f->res, &f->o);
	f->c.o = &f->o;
	f->c.res = &f->res;
	f->c.lp.timeout_ms = LP_TIMEOUT_MS;
	f->c.lp.output_bytes = LP_OUTPUT;
	f->c.lp.cpu_time_ms = LP_CPU_TIME_MS;
	f->c.lp.fsize = LP_FSIZE;
	f->c.lp.cpu_s = RLIM_INFINITY;
	f->c.lp.nofile = f->c.lp.nproc = RLIM_INFINITY;
	f->c.plan.interp = xstrdup("/usr/bin/python3");
	f->c.work_fd = f->c.ws_dir_fd = f->c.collect_fd = -1;
	f->c.script_fd = f->c.seccomp_fd = f->c.stdin_fd = -1;
	f->oc.tmpfs_end_bytes = f->oc.tmpfs_peak_bytes = -1; /* not measured */
}

static void
fx_done(struct fx *f)
{
	free(f->c.plan.interp);
	result_done(&f->res);
	run_opts_done(&f->o);
}

/* outcome_interpret, then the exit status as main.c picks it for a run that happened */
static void
fx_run(struct fx *f)
{
	outcome_interpret(&f->c, &f->oc, f->have_u ? &f->u : NULL);
	f->res.agentbox_exit = run_exit_code(&f->res);
}

static void
str_is(const char *got, const char *want, const char *what, const char *name)
{
	if (!want) {
		TAP_OK(got == NULL, "%s: no %s", name, what);
		if (got)
			printf("#   got: '%s'\n", got);
	} else {
		TAP_STREQ(got, want, "%s: %s", name, what);
	}
}

/* Every field the caller sees, for one case. hits: limits_hit joined with ",". */
static void
expect(struct fx *f, const char *name, enum ab_status status, int exit_code, int sig,
       const char *hits, const char *message, const char *fix, int agentbox_exit)
{
	char *joined = strv_join(&f->res.limits_hit, ",");

	TAP_STREQ(result_status_name(f->res.status), result_status_name(status), "%s: status",
		  name);
	TAP_OK(f->res.exit_code == exit_code && f->res.signal == sig, "%s: exit_code %d, signal %d",
	       name, exit_code, sig);
	if (f->res.exit_code != exit_code || f->res.signal != sig)
		printf("#   got: exit_code %d, signal %d\n", f->res.exit_code, f->res.signal);
	TAP_STREQ(joined, hits, "%s: limits_hit [%s]", name, hits);
	str_is(f->res.message, message, "message", name);
	str_is(f->res.fix, fix, "fix", name);
	TAP_OK(f->res.agentbox_exit == agentbox_exit, "%s: agentbox exits %d", name, agentbox_exit);
	if (f->res.agentbox_exit != agentbox_exit)
		printf("#   got: %d\n", f->res.agentbox_exit);
	free(joined);
}

static void
test_exited(void)
{
	struct fx f;

	fx_init(&f);
	f.oc.script_done = true;
	f.oc.script_wstatus = EXITED(0);
	fx_run(&f);
	expect(&f, "exit 0", AB_STATUS_EXITED, 0, 0, "", NULL, NULL, 0);
	fx_done(&f);

	fx_init(&f);
	f.oc.script_done = true;
	f.oc.script_wstatus = EXITED(3);
	f.have_u = true;
	f.u.valid = true;
	fx_run(&f);
	expect(&f, "exit 3", AB_STATUS_EXITED, 3, 0, "", NULL, NULL, 3);
	fx_done(&f);

	/* the script's own `exit 137` is not a kill, whatever the number looks like */
	fx_init(&f);
	f.oc.script_done = true;
	f.oc.script_wstatus = EXITED(137);
	f.have_u = true;
	f.u.valid = true;
	fx_run(&f);
	expect(&f, "script exits 137 on its own", AB_STATUS_EXITED, 137, 0, "", NULL, NULL, 137);
	fx_done(&f);

	/* ... nor is a 124 a timeout */
	fx_init(&f);
	f.oc.script_done = true;
	f.oc.script_wstatus = EXITED(124);
	fx_run(&f);
	expect(&f, "script exits 124 on its own", AB_STATUS_EXITED, 124, 0, "", NULL, NULL, 124);
	fx_done(&f);

	/* a 127 without the dynamic loader's words is the script's own */
	fx_init(&f);
	f.oc.script_done = true;
	f.oc.script_wstatus = EXITED(127);
	f.res.err.buf = xstrdup("sh: 1: frobnicate: not found\n");
	f.res.err.len = strlen(f.res.err.buf);
	fx_run(&f);
	expect(&f, "script exits 127 on its own", AB_STATUS_EXITED, 127, 0, "", NULL, NULL, 127);
	fx_done(&f);
}

static void
test_signaled(void)
{
	struct fx f;

	/* SIGKILL with no cgroup at all: nothing says a limit sent it */
	fx_init(&f);
	f.oc.script_done = true;
	f.oc.script_wstatus = KILLED(SIGKILL);
	fx_run(&f);
	expect(&f, "SIGKILL, no cgroup", AB_STATUS_SIGNALED, -1, SIGKILL, "", NULL, NULL, 137);
	fx_done(&f);

	/* SIGKILL with a cgroup that saw no OOM kill and no refused fork; memory.max events
	 * (reclaim at the limit) are not an OOM kill */
	fx_init(&f);
	f.oc.script_done = true;
	f.oc.script_wstatus = KILLED(SIGKILL);
	f.have_u = true;
	f.u.valid = true;
	f.u.memory_max_events = 12;
	fx_run(&f);
	expect(&f, "SIGKILL, cgroup without evidence", AB_STATUS_SIGNALED, -1, SIGKILL, "", NULL,
	       NULL, 137);
	fx_done(&f);

	/* counters that could not be read are no evidence either */
	fx_init(&f);
	f.oc.script_done = true;
	f.oc.script_wstatus = KILLED(SIGKILL);
	f.have_u = true;
	f.u.valid = false;
	f.u.oom_kills = 1;
	fx_run(&f);
	expect(&f, "SIGKILL, unreadable cgroup counters", AB_STATUS_SIGNALED, -1, SIGKILL, "", NULL,
	       NULL, 137);
	fx_done(&f);

	fx_init(&f);
	f.oc.script_done = true;
	f.oc.script_wstatus = KILLED(SIGSEGV) | WCOREFLAG;
	fx_run(&f);
	expect(&f, "SIGSEGV (core flag)", AB_STATUS_SIGNALED, -1, SIGSEGV, "", NULL, NULL,
	       128 + SIGSEGV);
	fx_done(&f);

	/* SIGXCPU is the CPU-time limit only when RLIMIT_CPU was set */
	fx_init(&f);
	f.oc.script_done = true;
	f.oc.script_wstatus = KILLED(SIGXCPU);
	fx_run(&f);
	expect(&f, "SIGXCPU without --cpu-time", AB_STATUS_SIGNALED, -1, SIGXCPU, "", NULL, NULL,
	       128 + SIGXCPU);
	fx_done(&f);
}

static void
test_timeout(void)
{
	struct fx f;
	char *msg =
		xasprintf("wall-clock limit of %d ms reached; the run was killed", LP_TIMEOUT_MS);

	fx_init(&f);
	f.oc.timed_out = true;
	fx_run(&f);
	expect(&f, "timeout", AB_STATUS_TIMEOUT, -1, SIGKILL, "timeout", msg,
	       "raise --timeout (now 2.5 s), or make the script faster", 124);
	fx_done(&f);

	/* the interpreter had exited; what it left behind ran into the deadline */
	fx_init(&f);
	f.oc.timed_out = true;
	f.oc.script_done = true;
	f.oc.script_wstatus = EXITED(0);
	fx_run(&f);
	expect(&f, "timeout after the script exited 0", AB_STATUS_TIMEOUT, 0, 0, "timeout", msg,
	       "raise --timeout (now 2.5 s), or make the script faster", 124);
	fx_done(&f);

	/* timeout with OOM evidence: the deadline is what ended the run */
	fx_init(&f);
	f.oc.timed_out = true;
	f.have_u = true;
	f.u.valid = true;
	f.u.oom_kills = 2;
	fx_run(&f);
	expect(&f, "timeout + OOM kills", AB_STATUS_TIMEOUT, -1, SIGKILL, "memory,timeout", msg,
	       "raise --timeout (now 2.5 s), or make the script faster", 124);
	TAP_OK(f.res.usage.oom_kills == 2, "timeout + OOM kills: usage.oom_kills 2");
	TAP_OK(f.res.limits_hit.n == 2 && strcmp(f.res.limits_hit.v[0], "memory") == 0 &&
		       strcmp(f.res.limits_hit.v[1], "timeout") == 0,
	       "timeout + OOM kills: limits_hit has memory, then the timeout that ended the run");
	fx_done(&f);

	/* the timeout outranks a refused fork and a SIGXFSZ too */
	fx_init(&f);
	f.oc.timed_out = true;
	f.oc.script_done = true;
	f.oc.script_wstatus = KILLED(SIGXFSZ);
	f.have_u = true;
	f.u.valid = true;
	f.u.pids_max_events = 1;
	fx_run(&f);
	expect(&f, "timeout + pids + SIGXFSZ", AB_STATUS_TIMEOUT, -1, SIGXFSZ, "pids,timeout", msg,
	       "raise --timeout (now 2.5 s), or make the script faster", 124);
	fx_done(&f);
	free(msg);
}

static void
test_limits(void)
{
	struct fx f;
	char *msg;

	/* OOM: the kernel's SIGKILL with the cgroup's oom_kill count as evidence */
	fx_init(&f);
	f.oc.script_done = true;
	f.oc.script_wstatus = KILLED(SIGKILL);
	f.have_u = true;
	f.u.valid = true;
	f.u.oom_kills = 1;
	fx_run(&f);
	expect(&f, "OOM", AB_STATUS_OOM, -1, SIGKILL, "memory",
	       "memory limit reached: 1 process(es) OOM-killed", "raise --memory", 137);
	fx_done(&f);

	/* issue 23: an OOM kill that took agentbox-init too (no status record from it) is
	 * still the kernel's SIGKILL: 137 and oom, never 125 */
	fx_init(&f);
	f.have_u = true;
	f.u.valid = true;
	f.u.oom_kills = 4;
	fx_run(&f);
	expect(&f, "OOM that took agentbox-init", AB_STATUS_OOM, -1, SIGKILL, "memory",
	       "memory limit reached: 4 process(es) OOM-killed", "raise --memory", 137);
	fx_done(&f);

	/* tmpfs caps over the memory limit (issue 15), and tmpfs measured holding most of it
	 * when the interpreter ended (the cgroup's shmem): the message and the fix say so */
	fx_init(&f);
	f.oc.script_done = true;
	f.oc.script_wstatus = KILLED(SIGKILL);
	f.oc.tmpfs_end_bytes = 700 << 20;
	f.have_u = true;
	f.u.valid = true;
	f.u.oom_kills = 1;
	f.c.lp.cg.memory_bytes = 1ULL << 30;
	f.c.lp.tmpfs_workspace = true;
	f.c.lp.work_bytes = 2ULL << 30;
	f.c.lp.tmp_bytes = 128ULL << 20;
	f.c.lp.tmpfs_bytes = (2ULL << 30) + (256ULL << 20);
	f.c.lp.tmpfs_over_memory = true;
	fx_run(&f);
	expect(&f, "OOM, --disk 2G over --memory 1G, tmpfs held 700M", AB_STATUS_OOM, -1, SIGKILL,
	       "memory",
	       "memory limit reached: 1 process(es) OOM-killed; tmpfs pages count against "
	       "--memory 1G, and the workspace (--disk 2G), /tmp and /dev/shm (--tmp-size 128M "
	       "each) may hold 2304M; tmpfs held 700M at the end (the workspace 0K)",
	       "raise --memory above 2304M, or lower --disk or --tmp-size (the workspace, /tmp "
	       "and /dev/shm are RAM and count against it)",
	       137);
	fx_done(&f);

	/* issue 25: the same caps, but tmpfs measured holding next to nothing: the processes
	 * used the memory, and the fix says nothing of --disk or --tmp-size (a list of 10**9
	 * ints under --memory 256M was told to lower --disk while its workspace held 4K) */
	fx_init(&f);
	f.oc.script_done = true;
	f.oc.script_wstatus = KILLED(SIGKILL);
	f.oc.tmpfs_end_bytes = 4096;
	f.have_u = true;
	f.u.valid = true;
	f.u.oom_kills = 1;
	f.c.lp.cg.memory_bytes = 256ULL << 20;
	f.c.lp.tmpfs_workspace = true;
	f.c.lp.work_bytes = 512ULL << 20;
	f.c.lp.tmp_bytes = 128ULL << 20;
	f.c.lp.tmpfs_bytes = 768ULL << 20;
	f.c.lp.tmpfs_over_memory = true;
	fx_run(&f);
	expect(&f, "OOM, caps over --memory 256M, tmpfs held 4K", AB_STATUS_OOM, -1, SIGKILL,
	       "memory",
	       "memory limit reached: 1 process(es) OOM-killed; tmpfs held only 4K, so the "
	       "script's processes used the memory",
	       "raise --memory (now 256M), or have the script hold less in memory", 137);
	fx_done(&f);

	/* ... and with nothing measured, nothing said of tmpfs either */
	fx_init(&f);
	f.oc.script_done = true;
	f.oc.script_wstatus = KILLED(SIGKILL);
	f.have_u = true;
	f.u.valid = true;
	f.u.oom_kills = 1;
	f.c.lp.cg.memory_bytes = 256ULL << 20;
	f.c.lp.tmpfs_bytes = 768ULL << 20;
	f.c.lp.tmpfs_over_memory = true;
	fx_run(&f);
	expect(&f, "OOM, caps over --memory, tmpfs not measured", AB_STATUS_OOM, -1, SIGKILL,
	       "memory", "memory limit reached: 1 process(es) OOM-killed",
	       "raise --memory (now 256M), or have the script hold less in memory", 137);
	fx_done(&f);

	/* the watchdog's largest count of the tmpfs mounts is evidence too */
	fx_init(&f);
	f.oc.mem_limited = true;
	f.oc.mem_over_bytes = 300 << 20;
	f.oc.tmpfs_peak_bytes = 200 << 20;
	f.c.lp.memwatch = true;
	f.c.lp.memwatch_bytes = 256ULL << 20;
	fx_run(&f);
	TAP_OK(f.res.message && strstr(f.res.message, "tmpfs held 200M at the end") &&
		       strstr(f.res.message, "tmpfs pages count against --memory 256M"),
	       "watchdog OOM, tmpfs at 200M of 256M: the message says tmpfs counts (%s)",
	       f.res.message);
	TAP_STREQ(
		f.res.fix,
		"raise --memory, or keep less in /work, /tmp and /dev/shm (they are RAM and count "
		"against it)",
		"watchdog OOM, tmpfs at 200M: the fix names tmpfs");
	fx_done(&f);

	/* the same caps, without an OOM kill: nothing to say */
	fx_init(&f);
	f.oc.script_done = true;
	f.oc.script_wstatus = EXITED(0);
	f.have_u = true;
	f.u.valid = true;
	f.c.lp.cg.memory_bytes = 1ULL << 30;
	f.c.lp.tmpfs_bytes = (2ULL << 30) + (256ULL << 20);
	f.c.lp.tmpfs_over_memory = true;
	fx_run(&f);
	expect(&f, "--disk 2G over --memory 1G, no OOM", AB_STATUS_EXITED, 0, 0, "", NULL, NULL, 0);
	fx_done(&f);

	/* a child was OOM-killed, the script itself exited 1 */
	fx_init(&f);
	f.oc.script_done = true;
	f.oc.script_wstatus = EXITED(1);
	f.have_u = true;
	f.u.valid = true;
	f.u.oom_kills = 3;
	f.u.pids_max_events = 4;
	fx_run(&f);
	expect(&f, "OOM of a child (+ refused forks), script exits 1", AB_STATUS_OOM, 1, 0,
	       "pids,memory", "memory limit reached: 3 process(es) OOM-killed", "raise --memory",
	       1);
	fx_done(&f);

	fx_init(&f);
	f.oc.script_done = true;
	f.oc.script_wstatus = EXITED(1);
	f.have_u = true;
	f.u.valid = true;
	f.u.pids_max_events = 7;
	fx_run(&f);
	expect(&f, "pids", AB_STATUS_PIDS_LIMIT, 1, 0, "pids",
	       "task limit reached: 7 fork(s) refused",
	       "raise --pids, or start fewer processes or threads", 1);
	fx_done(&f);

	/* CPU time: the supervisor's poll of the cgroup killed the run */
	msg = xasprintf("CPU-time limit of %d ms reached", LP_CPU_TIME_MS);
	fx_init(&f);
	f.oc.cpu_time_limited = true;
	f.c.lp.cpu_s = 2;
	fx_run(&f);
	expect(&f, "cpu-time (cgroup poll)", AB_STATUS_CPU_TIME_LIMIT, -1, SIGKILL, "cpu-time", msg,
	       "raise --cpu-time, or make the script do less work", 137);
	fx_done(&f);

	/* ... or, without a cgroup, RLIMIT_CPU's SIGXCPU */
	fx_init(&f);
	f.oc.script_done = true;
	f.oc.script_wstatus = KILLED(SIGXCPU);
	f.c.lp.cpu_s = 2;
	fx_run(&f);
	expect(&f, "cpu-time (SIGXCPU)", AB_STATUS_CPU_TIME_LIMIT, -1, SIGXCPU, "cpu-time", msg,
	       "raise --cpu-time, or make the script do less work", 128 + SIGXCPU);
	fx_done(&f);
	free(msg);

	msg = xasprintf("output passed --output-limit (%d bytes per stream); the run was stopped",
			LP_OUTPUT);
	fx_init(&f);
	f.oc.output_limited = true;
	fx_run(&f);
	expect(&f, "output limit", AB_STATUS_OUTPUT_LIMIT, -1, SIGKILL, "output-limit", msg,
	       "raise --output-limit, or write large output to a file in /work", 137);
	fx_done(&f);

	/* output limit outranks the cgroup's evidence (it is what stopped the run) */
	fx_init(&f);
	f.oc.output_limited = true;
	f.have_u = true;
	f.u.valid = true;
	f.u.oom_kills = 1;
	fx_run(&f);
	expect(&f, "output limit + OOM kills", AB_STATUS_OUTPUT_LIMIT, -1, SIGKILL,
	       "memory,output-limit", msg,
	       "raise --output-limit, or write large output to a file in /work", 137);
	fx_done(&f);
	free(msg);
}

static void
test_file_size(void)
{
	struct fx f;
	char *msg;

	/* SIGXFSZ: only a process that does not ignore it dies of it */
	fx_init(&f);
	f.oc.script_done = true;
	f.oc.script_wstatus = KILLED(SIGXFSZ);
	fx_run(&f);
	expect(&f, "SIGXFSZ", AB_STATUS_FILE_SIZE_LIMIT, -1, SIGXFSZ, "file-size",
	       "a file write went past --file-size (SIGXFSZ)", "raise --file-size", 128 + SIGXFSZ);
	fx_done(&f);

	/* SIGXFSZ and the scan found the file too: one "file-size", the signal's message */
	fx_init(&f);
	f.oc.script_done = true;
	f.oc.script_wstatus = KILLED(SIGXFSZ);
	f.oc.fsize_hit = AB_FSIZE_WORK;
	fx_run(&f);
	expect(&f, "SIGXFSZ + scan", AB_STATUS_FILE_SIZE_LIMIT, -1, SIGXFSZ, "file-size",
	       "a file write went past --file-size (SIGXFSZ)", "raise --file-size", 128 + SIGXFSZ);
	fx_done(&f);

	/* CPython caught the EFBIG and exited 0: only the scan saw it */
	msg = xasprintf("a file in /work reached --file-size (%d bytes): writes past that size "
			"fail with EFBIG",
			LP_FSIZE);
	fx_init(&f);
	f.oc.script_done = true;
	f.oc.script_wstatus = EXITED(0);
	f.oc.fsize_hit = AB_FSIZE_WORK | AB_FSIZE_TMP | AB_FSIZE_SHM;
	fx_run(&f);
	expect(&f, "EFBIG caught, exit 0, file in /work", AB_STATUS_EXITED, 0, 0, "file-size", msg,
	       "raise --file-size", 0);
	fx_done(&f);
	free(msg);

	msg = xasprintf("a file in /tmp reached --file-size (%d bytes): writes past that size "
			"fail with EFBIG",
			LP_FSIZE);
	fx_init(&f);
	f.oc.script_done = true;
	f.oc.script_wstatus = EXITED(1);
	f.oc.fsize_hit = AB_FSIZE_TMP | AB_FSIZE_SHM;
	fx_run(&f);
	expect(&f, "EFBIG, exit 1, file in /tmp", AB_STATUS_EXITED, 1, 0, "file-size", msg,
	       "raise --file-size", 1);
	fx_done(&f);
	free(msg);

	/* killed by something else (SIGTERM from itself): still evidence, message too */
	msg = xasprintf("a file in /dev/shm reached --file-size (%d bytes): writes past that "
			"size fail with EFBIG",
			LP_FSIZE);
	fx_init(&f);
	f.oc.script_done = true;
	f.oc.script_wstatus = KILLED(SIGTERM);
	f.oc.fsize_hit = AB_FSIZE_SHM;
	fx_run(&f);
	expect(&f, "EFBIG, SIGTERM, file in /dev/shm", AB_STATUS_SIGNALED, -1, SIGTERM, "file-size",
	       msg, "raise --file-size", 128 + SIGTERM);
	fx_done(&f);
	free(msg);

	/* another limit explains the run: file-size is added after it, its message stays */
	fx_init(&f);
	f.oc.script_done = true;
	f.oc.script_wstatus = KILLED(SIGKILL);
	f.oc.fsize_hit = AB_FSIZE_TMP;
	f.have_u = true;
	f.u.valid = true;
	f.u.oom_kills = 1;
	fx_run(&f);
	expect(&f, "OOM + scan", AB_STATUS_OOM, -1, SIGKILL, "file-size,memory",
	       "memory limit reached: 1 process(es) OOM-killed", "raise --memory", 137);
	fx_done(&f);

	fx_init(&f);
	f.oc.timed_out = true;
	f.oc.fsize_hit = AB_FSIZE_WORK;
	fx_run(&f);
	msg = xasprintf("wall-clock limit of %d ms reached; the run was killed", LP_TIMEOUT_MS);
	expect(&f, "timeout + scan", AB_STATUS_TIMEOUT, -1, SIGKILL, "file-size,timeout", msg,
	       "raise --timeout (now 2.5 s), or make the script faster", 124);
	fx_done(&f);
	free(msg);

	/* the scan stopped early and found nothing: a warning, no hit */
	fx_init(&f);
	f.oc.script_done = true;
	f.oc.script_wstatus = EXITED(0);
	f.oc.fsize_hit = AB_FSIZE_PARTIAL;
	fx_run(&f);
	expect(&f, "partial scan", AB_STATUS_EXITED, 0, 0, "", NULL, NULL, 0);
	TAP_OK(f.res.warnings.n == 1 && strstr(f.res.warnings.v[0], "entry cap"),
	       "partial scan: a warning says the check stopped at its cap");
	fx_done(&f);

	/* partial and a hit: both */
	fx_init(&f);
	f.oc.script_done = true;
	f.oc.script_wstatus = EXITED(0);
	f.oc.fsize_hit = AB_FSIZE_PARTIAL | AB_FSIZE_WORK;
	fx_run(&f);
	TAP_OK(f.res.warnings.n == 1 && f.res.limits_hit.n == 1,
	       "partial scan with a hit: the warning and file-size");
	fx_done(&f);
}

static void
test_interrupted_exec(void)
{
	struct fx f;

	fx_init(&f);
	f.oc.interrupted_by = SIGINT;
	fx_run(&f);
	expect(&f, "SIGINT", AB_STATUS_INTERRUPTED, -1, SIGKILL, "",
	       "agentbox got INT and stopped the run", NULL, 130);
	fx_done(&f);

	/* an interrupt outranks everything, even a timeout that fired too */
	fx_init(&f);
	f.oc.interrupted_by = SIGTERM;
	f.oc.timed_out = true;
	f.oc.script_done = true;
	f.oc.script_wstatus = EXITED(0);
	f.have_u = true;
	f.u.valid = true;
	f.u.oom_kills = 1;
	fx_run(&f);
	expect(&f, "SIGTERM + timeout + OOM", AB_STATUS_INTERRUPTED, 0, 0, "memory,timeout",
	       "agentbox got TERM and stopped the run", NULL, 130);
	fx_done(&f);

	/* agentbox-init could not exec the interpreter (run.c then sets exit_code 127/126) */
	fx_init(&f);
	f.oc.init_started = true;
	f.oc.init_exec_failed = true;
	f.oc.init_errno = ENOENT;
	fx_run(&f);
	expect(&f, "exec ENOENT", AB_STATUS_EXEC_FAILED, -1, 0, "",
	       "the interpreter '/usr/bin/python3' could not be started in the sandbox: No such "
	       "file or directory",
	       NULL, 126);
	f.res.exit_code = AB_EXIT_NOT_FOUND;
	TAP_OK(run_exit_code(&f.res) == 127, "exec ENOENT: with run.c's exit_code 127, exits 127");
	fx_done(&f);

	fx_init(&f);
	f.oc.init_started = true;
	f.oc.init_exec_failed = true;
	f.oc.init_errno = EACCES;
	fx_run(&f);
	TAP_STREQ(result_status_name(f.res.status), "exec_failed", "exec EACCES: exec_failed");
	TAP_OK(f.res.message && strstr(f.res.message, "Permission denied"),
	       "exec EACCES: the message has the errno");
	f.res.exit_code = AB_EXIT_CANNOT_EXEC;
	TAP_OK(run_exit_code(&f.res) == 126, "exec EACCES: exits 126");
	fx_done(&f);

	/* the loader could not find a library of an interpreter outside /usr */
	fx_init(&f);
	free(f.c.plan.interp);
	f.c.plan.interp = xstrdup("/opt/py/bin/python3");
	f.oc.script_done = true;
	f.oc.script_wstatus = EXITED(127);
	f.res.err.buf = xstrdup("/opt/py/bin/python3: error while loading shared libraries: "
				"libpython3.12.so.1.0: cannot open shared object file: No such "
				"file or directory\n");
	f.res.err.len = strlen(f.res.err.buf);
	fx_run(&f);
	expect(&f, "missing shared library", AB_STATUS_EXEC_FAILED, 127, 0, "",
	       "the interpreter '/opt/py/bin/python3' cannot start in the sandbox: it needs "
	       "'libpython3.12.so.1.0', which is not visible there",
	       "install the library under /usr, or mount its directory with --ro-bind", 127);
	fx_done(&f);

	/* nothing reported, nothing killed: the sandbox never ran the script */
	fx_init(&f);
	f.oc.init_started = true;
	fx_run(&f);
	expect(&f, "no status from PID 1", AB_STATUS_SETUP_ERROR, -1, 0, "", NULL, NULL, 125);
	fx_done(&f);
}

static void
test_usage(void)
{
	struct fx f;

	fx_init(&f);
	f.oc.script_done = true;
	f.oc.wall_ms = 321;
	f.oc.ru.ru_utime = (struct timeval){ 1, 600000 };
	f.oc.ru.ru_stime = (struct timeval){ 0, 700000 };
	f.oc.ru.ru_maxrss = 4096;
	fx_run(&f);
	TAP_OK(f.res.wall_ms == 321 && f.res.max_rss_kib == 4096, "wall_ms and max_rss_kib");
	TAP_OK(f.res.cpu_ms == 2300, "cpu_ms is user + system, microseconds carried (%lld)",
	       (long long) f.res.cpu_ms);
	TAP_OK(f.res.usage.cpu_ms == 2300 && f.res.usage.memory_peak_bytes == -1 &&
		       f.res.usage.oom_kills == -1 && f.res.usage.pids_refused == -1 &&
		       f.res.usage.tasks_peak == -1,
	       "no cgroup: usage.cpu_ms from rusage, the cgroup's counters null");
	fx_done(&f);

	fx_init(&f);
	f.oc.script_done = true;
	f.oc.ru.ru_utime = (struct timeval){ 9, 0 };
	f.have_u = true;
	f.u = (struct ab_cg_usage){ .valid = true,
				    .memory_peak_bytes = 5 << 20,
				    .oom_kills = 0,
				    .pids_max_events = 0,
				    .pids_peak = 6,
				    .cpu_usec = 1234567 };
	fx_run(&f);
	TAP_OK(f.res.usage.memory_peak_bytes == 5 << 20 && f.res.usage.cpu_ms == 1234 &&
		       f.res.usage.oom_kills == 0 && f.res.usage.pids_refused == 0,
	       "cgroup: usage from its counters");
	TAP_OK(f.res.usage.tasks_peak == 5, "cgroup: tasks_peak leaves out bwrap's monitor");
	/* issue 25: what the cgroup counted is the run's CPU; both figures say it */
	TAP_OK(f.res.cpu_ms == 1234 && f.res.cpu_from_cgroup,
	       "cgroup: cpu_ms is the cgroup's count, like usage.cpu_ms (%lld)",
	       (long long) f.res.cpu_ms);
	fx_done(&f);

	/* a cgroup without cpuacct or memory counters: the wait statuses, nulls, never 0 */
	fx_init(&f);
	f.oc.script_done = true;
	f.oc.ru.ru_utime = (struct timeval){ 0, 90000 };
	f.have_u = true;
	f.u = (struct ab_cg_usage){ .valid = true, .pids_peak = 3 };
	fx_run(&f);
	TAP_OK(f.res.cpu_ms == 90 && f.res.usage.cpu_ms == 90 && !f.res.cpu_from_cgroup,
	       "cgroup without cpuacct: cpu_ms from the wait statuses");
	TAP_OK(f.res.usage.memory_peak_bytes == -1,
	       "cgroup without a memory counter: memory_peak_bytes null, not 0");
	fx_done(&f);

	/* issue 25: a run agentbox killed: its processes died unreaped by their parents, so the
	 * wait statuses say 5 ms; the reading taken just before the kill says what they used */
	fx_init(&f);
	f.oc.timed_out = true;
	f.oc.ru.ru_utime = (struct timeval){ 0, 5000 };
	f.oc.ru.ru_maxrss = 1864;
	f.oc.reading = true;
	f.oc.reading_cpu_ms = 980;
	f.oc.reading_maxrss_kib = 9100;
	fx_run(&f);
	TAP_OK(f.res.status == AB_STATUS_TIMEOUT && f.res.cpu_ms == 980 &&
		       f.res.usage.cpu_ms == 980,
	       "killed, no cgroup: cpu_ms and usage.cpu_ms from the reading before the kill (%lld)",
	       (long long) f.res.cpu_ms);
	TAP_OK(f.res.max_rss_kib == 9100, "killed: max_rss_kib from the reading (%lld)",
	       (long long) f.res.max_rss_kib);
	fx_done(&f);
	fx_init(&f);
	f.oc.timed_out = true;
	f.oc.ru.ru_utime = (struct timeval){ 0, 5000 };
	f.oc.reading = true;
	f.oc.reading_cpu_ms = 900;
	f.have_u = true;
	f.u = (struct ab_cg_usage){ .valid = true, .cpu_usec = 1003000 };
	fx_run(&f);
	TAP_OK(f.res.cpu_ms == 1003 && f.res.usage.cpu_ms == 1003,
	       "killed, with a cgroup: its count wins (%lld)", (long long) f.res.cpu_ms);
	fx_done(&f);

	fx_init(&f);
	f.oc.script_done = true;
	f.have_u = true;
	f.u = (struct ab_cg_usage){ .valid = true, .pids_peak = 0 };
	fx_run(&f);
	TAP_OK(f.res.usage.tasks_peak == -1, "cgroup without pids.peak: tasks_peak null");
	fx_done(&f);
}

/* The workspace full: /proc (statfs: 0 free blocks) stands in for a tmpfs at its --disk. */
static void
test_disk_proc(void)
{
	struct fx f;

	fx_init(&f);
	f.oc.script_done = true;
	f.oc.script_wstatus = EXITED(0);
	f.c.tmpfs_mounted = true;
	f.c.work_fd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	fx_run(&f);
	expect(&f, "workspace full (statfs of /proc)", AB_STATUS_DISK_LIMIT, 0, 0, "disk",
	       "the workspace is full (--disk limit reached)", "raise --disk", 0);
	close(f.c.work_fd);
	fx_done(&f);

	/* --workspace DIR is not agentbox's tmpfs: its free space says nothing */
	fx_init(&f);
	f.oc.script_done = true;
	f.oc.script_wstatus = EXITED(0);
	f.c.tmpfs_mounted = false;
	f.c.work_fd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	fx_run(&f);
	expect(&f, "--workspace on a full filesystem", AB_STATUS_EXITED, 0, 0, "", NULL, NULL, 0);
	close(f.c.work_fd);
	fx_done(&f);
}

/* A real tmpfs filled to its size= or nr_inodes=, in a mount namespace of our own. */
static int
full_tmpfs(const char *dir, const char *opts, bool inodes)
{
	char buf[4096], path[4200];
	int fd, i;

	if (mount("agentbox-test", dir, "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0)
		return -1;
	memset(buf, 'x', sizeof(buf));
	if (inodes) {
		for (i = 0; i < 100; i++) {
			snprintf(path, sizeof(path), "%s/f%d", dir, i);
			fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
			if (fd < 0)
				break;
			close(fd);
		}
	} else {
		snprintf(path, sizeof(path), "%s/fill", dir);
		fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		while (fd >= 0 && write(fd, buf, sizeof(buf)) > 0)
			;
		if (fd >= 0)
			close(fd);
	}
	return open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

static void
test_disk_tmpfs(void)
{
	char dir[] = "/tmp/ab-outcome-XXXXXX";
	struct fx f;
	int wfd;

	if (geteuid() != 0 || unshare(CLONE_NEWNS) < 0 ||
	    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 || !mkdtemp(dir)) {
		for (int i = 0; i < 4; i++)
			TAP_SKIP("a full tmpfs needs root (a mount namespace of our own)");
		return;
	}
	wfd = full_tmpfs(dir, "size=64k,nr_inodes=1000", false);
	fx_init(&f);
	f.oc.script_done = true;
	f.oc.script_wstatus = KILLED(SIGKILL);
	f.oc.fsize_hit = AB_FSIZE_WORK;
	f.c.tmpfs_mounted = true;
	f.c.work_fd = wfd;
	fx_run(&f);
	expect(&f, "tmpfs at size=, SIGKILL, file-size scan", AB_STATUS_DISK_LIMIT, -1, SIGKILL,
	       "disk,file-size", "the workspace is full (--disk limit reached)", "raise --disk",
	       137);
	fx_done(&f);

	/* OOM stays the status; the full workspace is added to limits_hit */
	fx_init(&f);
	f.oc.script_done = true;
	f.oc.script_wstatus = KILLED(SIGKILL);
	f.have_u = true;
	f.u.valid = true;
	f.u.oom_kills = 1;
	f.c.tmpfs_mounted = true;
	f.c.work_fd = wfd;
	fx_run(&f);
	expect(&f, "tmpfs at size= + OOM", AB_STATUS_OOM, -1, SIGKILL, "disk,memory",
	       "memory limit reached: 1 process(es) OOM-killed", "raise --memory", 137);
	fx_done(&f);

	/* ... and when the workspace holds a quarter of --memory or more, the message says
	 * that tmpfs counts as memory (issue 15) */
	fx_init(&f);
	f.oc.script_done = true;
	f.oc.script_wstatus = KILLED(SIGKILL);
	f.have_u = true;
	f.u.valid = true;
	f.u.oom_kills = 1;
	f.c.lp.cg.memory_bytes = 256 << 10;
	f.c.tmpfs_mounted = true;
	f.c.work_fd = wfd;
	fx_run(&f);
	expect(&f, "tmpfs holding 1/4 of --memory + OOM", AB_STATUS_OOM, -1, SIGKILL, "disk,memory",
	       "memory limit reached: 1 process(es) OOM-killed; the workspace held 64K at the end, "
	       "and tmpfs pages count against --memory 256K",
	       "raise --memory, or keep less in /work, /tmp and /dev/shm (they are RAM and count "
	       "against it)",
	       137);
	fx_done(&f);
	close(wfd);
	(void) umount2(dir, MNT_DETACH);

	wfd = full_tmpfs(dir, "size=1m,nr_inodes=4", true);
	fx_init(&f);
	f.oc.script_done = true;
	f.oc.script_wstatus = EXITED(1);
	f.c.tmpfs_mounted = true;
	f.c.work_fd = wfd;
	fx_run(&f);
	expect(&f, "tmpfs at nr_inodes=", AB_STATUS_DISK_LIMIT, 1, 0, "inodes",
	       "the workspace is full (--inodes limit reached)", "raise --inodes", 1);
	fx_done(&f);

	fx_init(&f);
	f.oc.timed_out = true;
	f.c.tmpfs_mounted = true;
	f.c.work_fd = wfd;
	fx_run(&f);
	TAP_OK(f.res.status == AB_STATUS_TIMEOUT && f.res.limits_hit.n == 2 &&
		       strcmp(f.res.limits_hit.v[0], "inodes") == 0 &&
		       strcmp(f.res.limits_hit.v[1], "timeout") == 0,
	       "tmpfs at nr_inodes= + timeout: status timeout, limits_hit inodes,timeout");
	fx_done(&f);
	close(wfd);
	(void) umount2(dir, MNT_DETACH);
	(void) rmdir(dir);
}

/* README "Exit status", status by status. */
static void
test_exit_codes(void)
{
	static const struct {
		enum ab_status status;
		int exit_code, signal, want;
		const char *why;
	} cases[] = {
		{ AB_STATUS_EXITED, 0, 0, 0, "exited 0: 0" },
		{ AB_STATUS_EXITED, 42, 0, 42, "exited 42: the script's code" },
		{ AB_STATUS_EXITED, 255, 0, 255, "exited 255: the script's code" },
		{ AB_STATUS_EXITED, 124, 0, 124, "exited 124: ambiguous by design" },
		{ AB_STATUS_EXITED, -1, 0, 125, "exited with no code at all: setup" },
		{ AB_STATUS_SIGNALED, -1, SIGKILL, 137, "signaled KILL: 128+9" },
		{ AB_STATUS_SIGNALED, -1, SIGTERM, 143, "signaled TERM: 128+15" },
		{ AB_STATUS_SIGNALED, -1, SIGSEGV, 139, "signaled SEGV: 128+11" },
		{ AB_STATUS_OOM, -1, SIGKILL, 137, "oom, killed: 137" },
		{ AB_STATUS_OOM, 1, 0, 1, "oom of a child, script exited 1: 1" },
		{ AB_STATUS_PIDS_LIMIT, 1, 0, 1, "pids_limit, script exited 1: 1" },
		{ AB_STATUS_CPU_TIME_LIMIT, -1, SIGXCPU, 152, "cpu_time_limit by SIGXCPU: 152" },
		{ AB_STATUS_CPU_TIME_LIMIT, -1, SIGKILL, 137, "cpu_time_limit by the poll: 137" },
		{ AB_STATUS_DISK_LIMIT, 0, 0, 0, "disk_limit, script exited 0: 0" },
		{ AB_STATUS_FILE_SIZE_LIMIT, -1, SIGXFSZ, 153, "file_size_limit: 128+25" },
		{ AB_STATUS_OUTPUT_LIMIT, -1, SIGKILL, 137, "output_limit: 137" },
		{ AB_STATUS_TIMEOUT, -1, SIGKILL, 124, "timeout: 124" },
		{ AB_STATUS_TIMEOUT, 0, 0, 124, "timeout after the script exited 0: 124" },
		{ AB_STATUS_INTERRUPTED, -1, SIGKILL, 130, "interrupted: 130" },
		{ AB_STATUS_INTERRUPTED, 0, 0, 130, "interrupted after exit 0: 130" },
		{ AB_STATUS_EXEC_FAILED, 127, 0, 127, "exec_failed, not found: 127" },
		{ AB_STATUS_EXEC_FAILED, 126, 0, 126, "exec_failed, cannot execute: 126" },
		{ AB_STATUS_EXEC_FAILED, -1, 0, 126, "exec_failed, no code: 126" },
		{ AB_STATUS_SETUP_ERROR, -1, 0, 125, "setup_error: 125" },
		{ AB_STATUS_SETUP_ERROR, 0, 0, 125, "setup_error whatever the code: 125" },
		{ AB_STATUS_USAGE_ERROR, -1, 0, 2, "usage_error: 2" },
		{ AB_STATUS_DRY_RUN, -1, 0, 0, "dry_run: 0" },
	};
	bool seen[AB_STATUS_COUNT] = { false };
	bool all = true;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct ab_record r;
		int got;

		result_init(&r, NULL);
		r.status = cases[i].status;
		r.exit_code = cases[i].exit_code;
		r.signal = cases[i].signal;
		got = run_exit_code(&r);
		TAP_OK(got == cases[i].want, "run_exit_code: %s", cases[i].why);
		if (got != cases[i].want)
			printf("#   got: %d\n", got);
		seen[cases[i].status] = true;
		result_done(&r);
	}
	for (int s = 0; s < AB_STATUS_COUNT; s++)
		all = all && seen[s];
	TAP_OK(all, "run_exit_code: every status is in the table");
}

static const struct ab_protection *
prot(const struct ab_record *r, const char *name)
{
	for (size_t i = 0; i < r->n_prot; i++)
		if (strcmp(r->prot[i].name, name) == 0)
			return &r->prot[i];
	return NULL;
}

static void
prot_is(const struct ab_record *r, const char *case_name, const char *name, bool enforced,
	const char *detail)
{
	const struct ab_protection *p = prot(r, name);

	TAP_OK(p && p->enforced == enforced, "%s: %s %s", case_name, name,
	       enforced ? "enforced" : "not enforced");
	if (detail)
		TAP_STREQ(p ? p->detail : NULL, detail, "%s: %s detail", case_name, name);
	else
		TAP_OK(p && p->detail == NULL, "%s: %s has no detail", case_name, name);
}

static void
prot_fx(struct fx *f)
{
	fx_init(f);
	f->c.plan.disable_userns = f->c.plan.seccomp = true;
	f->c.plan.landlock = f->c.plan.landlock_net = f->c.plan.landlock_scope = true;
	strv_push(&f->c.plan.env, "PATH=/usr/bin:/bin");
	strv_push(&f->c.plan.env, "HOME=/work");
	f->c.tmpfs_mounted = true;
	f->oc.init_started = true;
	f->oc.landlock_abi = 6;
}

static void
prot_fx_done(struct fx *f)
{
	strv_done(&f->c.plan.env);
	fx_done(f);
}

static void
test_protections(void)
{
	static const char *const order[] = {
		"namespaces",     "network",          "readonly_base", "writable",
		"new_session",    "die_with_parent",  "cap_drop_all",  "clearenv",
		"disable_userns", "seccomp",          "landlock",      "fresh_keyring",
		"no_host_root",   "pid1_nondumpable", "caller_quotas", "cgroup",
	};
	struct ab_netproxy np;
	struct fx f;
	char *s;
	bool in_order;

	/* root, everything on, cgroup v2 */
	prot_fx(&f);
	f.c.host.is_root = true;
	f.c.drop = true;
	f.c.sb_uid = 64000;
	f.c.cg_made = true;
	f.c.host.cg.kind = AB_CG_V2;
	f.c.host.cg.memory = f.c.host.cg.pids = f.c.host.cg.cpu = true;
	snprintf(f.c.host.cg.root, sizeof(f.c.host.cg.root), "/sys/fs/cgroup");
	snprintf(f.c.host.cg.v2_parent, sizeof(f.c.host.cg.v2_parent), "system.slice/a.scope");
	snprintf(f.c.host.cg.how, sizeof(f.c.host.cg.how), "a scope systemd delegated to this run");
	snprintf(f.c.cg.name, sizeof(f.c.cg.name), "run-1-2-abcdef");
	outcome_record_protections(&f.c, &f.oc);
	in_order = f.res.n_prot == sizeof(order) / sizeof(order[0]);
	for (size_t i = 0; in_order && i < f.res.n_prot; i++)
		in_order = strcmp(f.res.prot[i].name, order[i]) == 0;
	TAP_OK(in_order, "protections: the 16 of docs/report-schema.md, in its order");
	in_order = true;
	for (size_t i = 0; i < f.res.n_prot; i++)
		in_order = in_order && f.res.prot[i].enforced;
	TAP_OK(in_order, "all on: every protection enforced");
	prot_is(&f.res, "all on", "namespaces", true, "user, mount, pid, net, ipc, uts, cgroup");
	prot_is(&f.res, "all on", "network", true,
		"own network namespace, checked at start: lo only, no route out; --net-strict: no "
		"TCP bind or connect, loopback included (Landlock)");
	TAP_STREQ(f.res.net_mode, "strict", "all on: sandbox.network.mode strict");
	prot_is(&f.res, "all on", "writable", true, "only /work (capped tmpfs), /tmp and /dev/shm");
	prot_is(&f.res, "all on", "die_with_parent", true, NULL);
	prot_is(&f.res, "all on", "clearenv", true, "2 variables");
	prot_is(&f.res, "all on", "disable_userns", true, NULL);
	prot_is(&f.res, "all on", "seccomp", true, "policy default");
	prot_is(&f.res, "all on", "landlock", true,
		"ABI 6, TCP bind/connect denied, abstract sockets and signals scoped");
	prot_is(&f.res, "all on", "no_host_root", true, "started as root: runs as uid 64000");
	prot_is(&f.res, "all on", "pid1_nondumpable", true, "agentbox-init is PID 1");
	prot_is(&f.res, "all on", "cgroup", true,
		"cgroup v2 /sys/fs/cgroup/system.slice/a.scope/run-1-2-abcdef (a scope systemd "
		"delegated to this run; controllers: memory pids cpu)");
	prot_is(&f.res, "all on", "caller_quotas", true,
		"the script runs as uid 64000: no quota of the caller's is shared");
	prot_fx_done(&f);

	/* unprivileged: the script shares the caller's uid (issue 18) */
	prot_fx(&f);
	f.c.inotify_guard = 1;
	f.c.lp.sigpending = 1024;
	f.c.lp.msgqueue = 262144;
	outcome_record_protections(&f.c, &f.oc);
	prot_is(&f.res, "user, capped", "caller_quotas", true,
		"the script shares your uid: inotify capped at 8 instances and 8192 watches per "
		"run (user namespace limits); pending signals 1024 and POSIX message queues "
		"262144 bytes (rlimits of the run's user namespace); keys refused (seccomp)");
	prot_fx_done(&f);
	prot_fx(&f);
	f.c.inotify_guard = -1;
	outcome_record_protections(&f.c, &f.oc);
	TAP_OK(prot(&f.res, "caller_quotas")->enforced &&
		       strstr(prot(&f.res, "caller_quotas")->detail,
			      "inotify refused (seccomp: this /proc/sys is read-only)"),
	       "user, read-only /proc/sys: inotify refused by seccomp instead");
	prot_fx_done(&f);
	prot_fx(&f);
	f.c.inotify_guard = 1;
	f.c.plan.seccomp = false;
	outcome_record_protections(&f.c, &f.oc);
	prot_is(&f.res, "user, --without seccomp", "caller_quotas", false,
		"--without seccomp: the script can take keys out of your uid's quota");
	prot_fx_done(&f);

	/* unprivileged, opted out of everything it can, --workspace, a refused run (oc NULL) */
	prot_fx(&f);
	f.c.plan.disable_userns = f.c.plan.seccomp = f.c.plan.landlock = false;
	f.o.without[AB_PROT_DISABLE_USERNS] = f.o.without[AB_PROT_SECCOMP] = true;
	f.o.without[AB_PROT_LANDLOCK] = f.o.without[AB_PROT_CGROUP] = true;
	f.o.seccomp_policy = AB_SECCOMP_STRICT;
	f.c.tmpfs_mounted = false;
	strv_done(&f.c.plan.env);
	outcome_record_protections(&f.c, NULL);
	prot_is(&f.res, "opted out", "writable", true,
		"only /work (--workspace bind), /tmp and /dev/shm");
	prot_is(&f.res, "opted out", "clearenv", true, "0 variables");
	prot_is(&f.res, "opted out", "disable_userns", false,
		"opted out with --without disable-userns");
	prot_is(&f.res, "opted out", "seccomp", false,
		"policy strict (opted out with --without seccomp)");
	prot_is(&f.res, "opted out", "landlock", false, "opted out with --without landlock");
	prot_is(&f.res, "opted out", "cgroup", false, "opted out with --without cgroup");
	prot_is(&f.res, "opted out", "pid1_nondumpable", false, "agentbox-init is PID 1");
	s = xasprintf("runs as uid %u", (unsigned) geteuid());
	prot_is(&f.res, "opted out", "no_host_root", true, s);
	free(s);
	prot_fx_done(&f);

	/* what the host lacks, without opting out */
	prot_fx(&f);
	f.c.plan.disable_userns = f.c.plan.landlock = false;
	snprintf(f.c.host.cg.why, sizeof(f.c.host.cg.why), "no delegated cgroup (fix: ...)");
	outcome_record_protections(&f.c, &f.oc);
	prot_is(&f.res, "weak host", "disable_userns", false, "bwrap lacks --disable-userns");
	prot_is(&f.res, "weak host", "landlock", false, "kernel has no Landlock");
	prot_is(&f.res, "weak host", "cgroup", false, "no delegated cgroup (fix: ...)");
	prot_fx_done(&f);

	/* the default: the sandbox's own loopback is the script's (issue 15) */
	prot_fx(&f);
	f.c.plan.landlock_net = false;
	outcome_record_protections(&f.c, &f.oc);
	prot_is(&f.res, "loopback", "network", true,
		"own network namespace, checked at start: lo only, no route out; the script may "
		"use its own loopback (TCP and UDP)");
	TAP_STREQ(f.res.net_mode, "loopback", "loopback: sandbox.network.mode loopback");
	prot_is(&f.res, "loopback", "landlock", true, "ABI 6, abstract sockets and signals scoped");
	prot_fx_done(&f);

	/* Landlock planned but not in force: PID 1 reported ABI 0, or never started */
	prot_fx(&f);
	f.c.plan.landlock_net = f.c.plan.landlock_scope = false;
	f.oc.landlock_abi = 0;
	outcome_record_protections(&f.c, &f.oc);
	prot_is(&f.res, "landlock ABI 0", "landlock", false, "ABI 0");
	prot_fx_done(&f);
	prot_fx(&f);
	f.oc.init_started = false;
	outcome_record_protections(&f.c, &f.oc);
	TAP_OK(!prot(&f.res, "landlock")->enforced && !prot(&f.res, "pid1_nondumpable")->enforced,
	       "PID 1 never started: landlock and pid1_nondumpable not enforced");
	prot_fx_done(&f);

	/* root that did not drop (never happens in run.c): no_host_root says so */
	prot_fx(&f);
	f.c.host.is_root = true;
	f.c.drop = false;
	f.c.cg_made = true;
	f.c.host.cg.kind = AB_CG_V1;
	f.c.host.cg.memory = f.c.host.cg.pids = f.c.host.cg.cpuacct = true;
	snprintf(f.c.host.cg.root, sizeof(f.c.host.cg.root), "/sys/fs/cgroup");
	snprintf(f.c.cg.name, sizeof(f.c.cg.name), "run-1-2-abcdef");
	outcome_record_protections(&f.c, &f.oc);
	TAP_OK(!prot(&f.res, "no_host_root")->enforced, "root without drop: no_host_root false");
	prot_is(&f.res, "root, v1", "cgroup", true,
		"cgroup v1 /sys/fs/cgroup/CONTROLLER/agentbox/run-1-2-abcdef (controllers: memory "
		"pids cpuacct)");
	prot_fx_done(&f);

	/* agentbox prepare: the host's network, or the install's own with the proxy */
	prot_fx(&f);
	f.c.plan.share_net = true;
	f.c.plan.landlock_connect_port = 3128;
	outcome_record_protections(&f.c, &f.oc);
	prot_is(&f.res, "prepare, shared net", "network", false,
		"host network kept (agentbox prepare)");
	prot_is(&f.res, "prepare, shared net", "landlock", true,
		"ABI 6, TCP bind denied, connect only to the registry proxy's port, abstract "
		"sockets and signals scoped");
	prot_fx_done(&f);

	netproxy_init(&np);
	np.netns_ready = true;
	np.detail = xstrdup("own network namespace; only the registry proxy is reachable");
	prot_fx(&f);
	f.c.plan.share_net = true;
	f.o.netproxy = &np;
	outcome_record_protections(&f.c, &f.oc);
	prot_is(&f.res, "prepare, proxy", "network", true,
		"own network namespace; only the registry proxy is reachable");
	TAP_STREQ(f.res.net_mode, "proxy", "prepare, proxy: sandbox.network.mode proxy");
	prot_fx_done(&f);
	free(np.detail);
	np.detail = NULL;
	np.netns_ready = false;
	prot_fx(&f);
	f.o.netproxy = &np;
	outcome_record_protections(&f.c, &f.oc);
	prot_is(&f.res, "prepare, proxy not up", "network", false, "not set up");
	prot_fx_done(&f);
}

/* issue 25: the interpreters' own words for a file or module not found, and the name they
 * name, only when it is a harmless relative name */
static void
test_hint_parse(void)
{
	static const struct {
		const char *text;
		enum ab_hint_kind kind;
		const char *name;
	} cases[] = {
		{ "Traceback (most recent call last):\n  File \"/work/s.py\", line "
		  "1\nFileNotFoundError: "
		  "[Errno 2] No such file or directory: 'data.txt'\n",
		  AB_HINT_FILE, "data.txt" },
		{ "FileNotFoundError: [Errno 2] No such file or directory: '/work/in/x.csv'\n",
		  AB_HINT_FILE, "in/x.csv" },
		{ "FileNotFoundError: [Errno 2] No such file or directory: \"it's.txt\"\n",
		  AB_HINT_FILE, "it's.txt" },
		{ "Error: ENOENT: no such file or directory, open 'data.json'\n    at "
		  "Object.openSync",
		  AB_HINT_FILE, "data.json" },
		{ "ModuleNotFoundError: No module named 'helpers'\n", AB_HINT_PY_MODULE,
		  "helpers" },
		{ "Error: Cannot find module 'lodash'\nRequire stack:\n- /work/app.js\n",
		  AB_HINT_JS_MODULE, "lodash" },
		{ "Error [ERR_MODULE_NOT_FOUND]: Cannot find package 'lodash' imported from "
		  "/work/app.mjs\n",
		  AB_HINT_JS_MODULE, "lodash" },
		{ "Error: Cannot find module './util'\n", AB_HINT_JS_RELATIVE, "util" },
		/* the last one counts: what ended the script */
		{ "No module named 'a'\nduring handling ... No such file or directory: 'b.txt'\n",
		  AB_HINT_FILE, "b.txt" },
		/* never a path outside the workspace, never .., never odd bytes */
		{ "No such file or directory: '/etc/shadow'\n", AB_HINT_NONE, NULL },
		{ "No such file or directory: '../secret'\n", AB_HINT_NONE, NULL },
		{ "No such file or directory: 'a/../../b'\n", AB_HINT_NONE, NULL },
		{ "No such file or directory: 'a b'\n", AB_HINT_NONE, NULL },
		{ "No such file or directory: 'unterminated\n'", AB_HINT_NONE, NULL },
		{ "Traceback: ZeroDivisionError: division by zero\n", AB_HINT_NONE, NULL },
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char name[256] = "";
		enum ab_hint_kind k =
			hint_parse(cases[i].text, strlen(cases[i].text), name, sizeof(name));

		TAP_OK(k == cases[i].kind && (!cases[i].name || strcmp(name, cases[i].name) == 0),
		       "hint_parse %zu: kind %d, name '%s'", i, (int) k, name);
	}
}

int
main(void)
{
	test_hint_parse();
	test_exited();
	test_signaled();
	test_timeout();
	test_limits();
	test_file_size();
	test_interrupted_exec();
	test_usage();
	test_disk_proc();
	test_exit_codes();
	test_protections();
	test_disk_tmpfs(); /* last: it moves this process into a mount namespace of its own */
	return tap_done();
}

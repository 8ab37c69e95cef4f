/* Unit tests for limitplan.c: on made-up hosts (cgroup v1 as root, v2 delegated, none; root
 * or not, which run.c passes on as per_run_userns = !is_root; --workspace or the tmpfs),
 * which mechanism enforces each limit, which defaults become warnings and which explicit
 * limits are refused (setup error: exit 125, with a fix). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/supervisor/limitplan.h"
#include "tests/tap.h"

#define DEFAULT_FIX                                                                           \
	"run as root, or on a cgroup v2 host with systemd (agentbox asks it for a delegated " \
	"scope) or a delegated AGENTBOX_CGROUP"
#define NO_CG_WHY "no delegated cgroup v2: use systemd-run --user --scope -p Delegate=yes"
#define WS_WHY    "--workspace DIR is bound as it is, with no quota"
/* no memory cgroup: the supervisor's watchdog (memwatch.h, issue 18) */
#define MW_MECH                                                                               \
	"agentbox watchdog: RSS and shared memory of every sandbox process plus its tmpfs, "  \
	"and the kernel memory they hold (page tables, threads, fds, pipes, sockets, epoll, " \
	"inotify, ptys, mappings, tmpfs inodes and xattrs), polled every 1-50 ms, SIGKILL "   \
	"over the limit"
#define WS_FIX "drop --workspace and use --input (the workspace is then a capped tmpfs)"

enum host_kind {
	ROOT_V1,     /* root on a cgroup v1 host: every controller */
	ROOT_NONE,   /* root without a usable cgroup (a container) */
	USER_V2,     /* unprivileged, delegated cgroup v2 with every controller */
	USER_V2_PID, /* unprivileged, delegated v2 with only pids */
	USER_NONE,   /* unprivileged, no cgroup */
};

struct fx {
	struct ab_run_opts o;
	struct ab_record res;
	struct ab_host h;
	struct ab_limits_plan lp;
	struct ab_err err;
	bool workspace; /* --workspace DIR: no tmpfs */
	int r;
};

static void
fx_init(struct fx *f, enum host_kind k)
{
	memset(f, 0, sizeof(*f));
	run_opts_init(&f->o);
	result_init(&f->res, &f->o);
	f->h.is_root = k == ROOT_V1 || k == ROOT_NONE;
	switch (k) {
	case ROOT_V1:
		f->h.cg.kind = AB_CG_V1;
		f->h.cg.memory = f->h.cg.pids = f->h.cg.cpu = f->h.cg.cpuacct = true;
		f->h.cg.swap = true;
		break;
	case USER_V2:
		f->h.cg.kind = AB_CG_V2;
		f->h.cg.memory = f->h.cg.pids = f->h.cg.cpu = true;
		f->h.cg.swap = f->h.cg.kill_file = true;
		break;
	case USER_V2_PID:
		f->h.cg.kind = AB_CG_V2;
		f->h.cg.pids = true;
		snprintf(f->h.cg.why, sizeof(f->h.cg.why), "memory, cpu not delegated");
		break;
	case ROOT_NONE:
	case USER_NONE:
		f->h.cg.kind = AB_CG_NONE;
		snprintf(f->h.cg.why, sizeof(f->h.cg.why), NO_CG_WHY);
		break;
	}
}

static void
fx_run(struct fx *f)
{
	/* as run.c calls it */
	f->r = limits_plan(&f->o, &f->h, !f->workspace, !f->h.is_root, &f->lp, &f->res, &f->err);
}

static void
fx_done(struct fx *f)
{
	result_done(&f->res);
	run_opts_done(&f->o);
}

static void
set(struct fx *f, enum ab_limit_id id, uint64_t v)
{
	f->o.limits[id].value = v;
	f->o.limits[id].set = true;
}

/* The report's limits.NAME: mechanism (NULL: not enforced), enforced value, whole_run. */
static void
lim_is(const struct fx *f, const char *c, enum ab_limit_id id, const char *mech, uint64_t enforced,
       bool whole_run)
{
	const struct ab_limit_result *l = &f->res.limits[id];
	const char *name = cli_limit_name(id);

	TAP_OK(l->applies, "%s: %s is reported", c, name);
	if (mech)
		TAP_STREQ(l->mechanism, mech, "%s: %s by %s", c, name, mech);
	else
		TAP_OK(l->mechanism == NULL && l->note && strcmp(l->note, "not enforced") == 0,
		       "%s: %s not enforced", c, name);
	TAP_OK(l->enforced == enforced && l->enforced_ok == whole_run,
	       "%s: %s enforced %llu, whole_run %d", c, name, (unsigned long long) enforced,
	       whole_run);
	if (l->enforced != enforced || l->enforced_ok != whole_run)
		printf("#   got: %llu, %d\n", (unsigned long long) l->enforced, l->enforced_ok);
}

static void
warnings_are(const struct fx *f, const char *c, const char *const *want)
{
	size_t n = 0;

	while (want[n])
		n++;
	TAP_OK(f->res.warnings.n == n, "%s: %zu warning(s)", c, n);
	for (size_t i = 0; i < n && i < f->res.warnings.n; i++)
		TAP_STREQ(f->res.warnings.v[i], want[i], "%s: warning %zu", c, i + 1);
	for (size_t i = n; i < f->res.warnings.n; i++)
		printf("#   extra: '%s'\n", f->res.warnings.v[i]);
	/* issue 25: a default the host cannot apply (cpus, pids: no cgroup) is listed in
	 * defaults_not_applied with its warning; the caller's own choice (--workspace: disk,
	 * inodes) is a plain warning */
	for (size_t i = 0; i < f->res.warnings.n; i++) {
		const char *w = f->res.warnings.v[i];
		bool host = strncmp(w, "default cpus ", 13) == 0 ||
			    strncmp(w, "default pids ", 13) == 0;
		bool listed = false;

		STRV_FOREACH (d, &f->res.defaults_not_applied)
			if (strncmp(w, "default ", 8) == 0 && strncmp(w + 8, *d, strlen(*d)) == 0 &&
			    w[8 + strlen(*d)] == ' ')
				listed = true;
		TAP_OK(listed == host, "%s: warning %zu %s in defaults_not_applied", c, i + 1,
		       host ? "listed" : "not listed");
	}
	TAP_OK(f->res.defaults_not_applied.n <= f->res.warnings.n,
	       "%s: every default not applied has its warning", c);
}

/* The parts that do not depend on the host. */
static void
common(const struct fx *f, const char *c)
{
	TAP_OK(f->lp.timeout_ms == 60000 && f->lp.output_bytes == 1 << 20 &&
		       f->lp.fsize == 256ULL << 20 && f->lp.nofile == 1024 && f->lp.core == 0 &&
		       f->lp.tmp_bytes == 128ULL << 20,
	       "%s: timeout, output, RLIMIT_FSIZE, RLIMIT_NOFILE, no core dumps, /tmp size", c);
	lim_is(f, c, AB_LIM_TIMEOUT_MS, "agentbox monotonic deadline + SIGKILL", 60000, true);
	lim_is(f, c, AB_LIM_TMP_SIZE, "tmpfs size= and nr_inodes= on /tmp and /dev/shm",
	       128ULL << 20, true);
	lim_is(f, c, AB_LIM_FILE_SIZE, "rlimit RLIMIT_FSIZE", 256ULL << 20, true);
	lim_is(f, c, AB_LIM_NOFILE, "rlimit RLIMIT_NOFILE", 1024, true);
	lim_is(f, c, AB_LIM_OUTPUT, "agentbox pipe capture", 1 << 20, true);
	TAP_OK(!f->res.limits[AB_LIM_CPU_TIME_MS].applies && f->lp.cpu_s == RLIM_INFINITY &&
		       f->lp.cpu_time_ms == 0 && !f->lp.cg_cpu_time,
	       "%s: cpu-time off by default: not reported, no RLIMIT_CPU", c);
}

static void
test_root_v1(void)
{
	static const char *const none[] = { NULL };
	struct fx f;

	fx_init(&f, ROOT_V1);
	fx_run(&f);
	TAP_OK(f.r == 0, "root, v1: planned");
	common(&f, "root, v1");
	lim_is(&f, "root, v1", AB_LIM_MEMORY, "cgroup v1 memory.limit_in_bytes (+memsw)", 1 << 30,
	       true);
	lim_is(&f, "root, v1", AB_LIM_PIDS, "cgroup v1 pids.max", 256, true);
	lim_is(&f, "root, v1", AB_LIM_CPUS_MILLI, "cgroup v1 cpu.cfs_quota_us", 1000, true);
	lim_is(&f, "root, v1", AB_LIM_DISK, "tmpfs size= on the workspace", 512ULL << 20, true);
	lim_is(&f, "root, v1", AB_LIM_INODES, "tmpfs nr_inodes= on the workspace", 16384, true);
	TAP_OK(f.lp.use_cgroup && f.lp.cg.memory_bytes == 1 << 30 && f.lp.cg.pids == 257 &&
		       f.lp.cg.cpu_quota_us == 100000 && f.lp.cg.cpu_period_us == 100000,
	       "root, v1: the cgroup gets memory, pids (+1: bwrap's monitor) and the CFS quota");
	TAP_OK(f.lp.nproc == RLIM_INFINITY && f.lp.cpu_affinity == -1,
	       "root, v1: no RLIMIT_NPROC, no affinity fallback");
	TAP_OK(f.lp.tmpfs_workspace && f.lp.work_bytes == 512ULL << 20 && f.lp.work_inodes == 16384,
	       "root, v1: the workspace tmpfs gets --disk and --inodes");
	warnings_are(&f, "root, v1", none);
	fx_done(&f);

	/* explicit values go where the defaults went */
	fx_init(&f, ROOT_V1);
	set(&f, AB_LIM_MEMORY, 64 << 20);
	set(&f, AB_LIM_DISK, 16 << 20); /* tmpfs 16M + 2 x 16M, under --memory: no warning */
	set(&f, AB_LIM_TMP_SIZE, 16 << 20);
	set(&f, AB_LIM_PIDS, 10);
	set(&f, AB_LIM_CPUS_MILLI, 250);
	set(&f, AB_LIM_CPU_TIME_MS, 2500);
	fx_run(&f);
	TAP_OK(f.r == 0 && f.lp.cg.memory_bytes == 64 << 20 && f.lp.cg.pids == 11 &&
		       f.lp.cg.cpu_quota_us == 25000,
	       "root, v1, explicit: memory, pids and cpus in the cgroup");
	lim_is(&f, "root, v1, --cpu-time", AB_LIM_CPU_TIME_MS,
	       "cgroup v1 cpuacct.usage polled + RLIMIT_CPU", 2500, true);
	TAP_OK(f.lp.cg_cpu_time && f.lp.cpu_time_ms == 2500 && f.lp.cpu_s == 3,
	       "root, v1, --cpu-time 2.5s: polled, RLIMIT_CPU 3 s per process as a backstop");
	warnings_are(&f, "root, v1, explicit", none);
	fx_done(&f);

	/* v1 without cpuacct: --cpu-time falls back to RLIMIT_CPU, with a warning */
	fx_init(&f, ROOT_V1);
	f.h.cg.cpuacct = false;
	set(&f, AB_LIM_CPU_TIME_MS, 1000);
	fx_run(&f);
	TAP_OK(f.r == 0 && !f.lp.cg_cpu_time && f.lp.cpu_s == 1,
	       "root, v1 without cpuacct, --cpu-time: RLIMIT_CPU only, not refused");
	lim_is(&f, "root, v1 without cpuacct", AB_LIM_CPU_TIME_MS,
	       "rlimit RLIMIT_CPU (per process)", 1000, false);
	TAP_OK(f.res.warnings.n == 1 && strstr(f.res.warnings.v[0], "per process (RLIMIT_CPU)"),
	       "root, v1 without cpuacct: a warning says --cpu-time is per process");
	fx_done(&f);
}

static void
test_user_v2(void)
{
	static const char *const none[] = { NULL };
	struct fx f;

	fx_init(&f, USER_V2);
	set(&f, AB_LIM_MEMORY, 256 << 20);
	set(&f, AB_LIM_DISK, 64 << 20);
	set(&f, AB_LIM_TMP_SIZE, 64 << 20);
	set(&f, AB_LIM_PIDS, 32);
	set(&f, AB_LIM_CPU_TIME_MS, 100);
	fx_run(&f);
	TAP_OK(f.r == 0, "user, v2, explicit memory and pids: planned");
	lim_is(&f, "user, v2", AB_LIM_MEMORY, "cgroup v2 memory.max, memory.swap.max=0", 256 << 20,
	       true);
	lim_is(&f, "user, v2", AB_LIM_PIDS, "cgroup v2 pids.max", 32, true);
	lim_is(&f, "user, v2", AB_LIM_CPUS_MILLI, "cgroup v2 cpu.max", 1000, true);
	lim_is(&f, "user, v2", AB_LIM_CPU_TIME_MS, "cgroup v2 cpu.stat polled + RLIMIT_CPU", 100,
	       true);
	TAP_OK(f.lp.nproc == RLIM_INFINITY && f.lp.cg.pids == 33 && f.lp.cpu_s == 1,
	       "user, v2: pids in the cgroup, not RLIMIT_NPROC; RLIMIT_CPU rounds up to 1 s");
	warnings_are(&f, "user, v2", none);
	fx_done(&f);

	/* only pids delegated: memory and cpus fall back (defaults: warnings) */
	fx_init(&f, USER_V2_PID);
	fx_run(&f);
	TAP_OK(f.r == 0 && f.lp.use_cgroup, "user, v2 pids only: planned, a cgroup for pids");
	lim_is(&f, "user, v2 pids only", AB_LIM_PIDS, "cgroup v2 pids.max", 256, true);
	lim_is(&f, "user, v2 pids only", AB_LIM_MEMORY, MW_MECH, 1 << 30, true);
	TAP_OK(f.lp.memwatch && f.lp.memwatch_bytes == 1 << 30 && f.lp.cg.memory_bytes == 0,
	       "user, v2 pids only: the watchdog holds memory, the cgroup does not");
	lim_is(&f, "user, v2 pids only", AB_LIM_CPUS_MILLI, "cpu affinity (whole cores)", 1000,
	       false);
	{
		static const char *const w[] = {
			"default cpus limit only approximated: no writable cpu cgroup, so CPU "
			"affinity holds the run to 1 whole core, which the script can change (fix: "
			"memory, cpu not delegated)",
			NULL,
		};

		warnings_are(&f, "user, v2 pids only", w);
	}
	fx_done(&f);

	fx_init(&f, USER_V2_PID);
	set(&f, AB_LIM_MEMORY, 1 << 30);
	fx_run(&f);
	TAP_OK(f.r == 0 && f.lp.memwatch && f.lp.memwatch_bytes == 1 << 30,
	       "user, v2 pids only, explicit --memory: held by the watchdog, not refused");
	fx_done(&f);

	/* --without cgroup on a host that has one: as if there were none */
	fx_init(&f, USER_V2);
	f.o.without[AB_PROT_CGROUP] = true;
	fx_run(&f);
	TAP_OK(f.r == 0 && !f.lp.use_cgroup && f.lp.nproc == 258 && f.lp.cpu_affinity == 1,
	       "user, v2, --without cgroup: no cgroup; RLIMIT_NPROC and affinity");
	lim_is(&f, "user, v2, --without cgroup", AB_LIM_MEMORY, MW_MECH, 1 << 30, true);
	TAP_OK(f.res.warnings.n == 1 && strstr(f.res.warnings.v[0], DEFAULT_FIX),
	       "user, v2, --without cgroup: a warning for cpus, the generic fix");
	fx_done(&f);

	fx_init(&f, USER_V2);
	f.o.without[AB_PROT_CGROUP] = true;
	set(&f, AB_LIM_MEMORY, 256 << 20);
	fx_run(&f);
	TAP_OK(f.r == 0 && f.lp.memwatch && f.lp.memwatch_bytes == 256 << 20,
	       "user, v2, --without cgroup, explicit --memory: held by the watchdog");
	fx_done(&f);

	/* the watchdog's blind spots are closed by seccomp: without it the limit is partial */
	fx_init(&f, USER_NONE);
	f.o.without[AB_PROT_SECCOMP] = true;
	fx_run(&f);
	lim_is(&f, "user, none, --without seccomp", AB_LIM_MEMORY, MW_MECH, 1 << 30, false);
	TAP_OK(f.res.warnings.n == 2 && strstr(f.res.warnings.v[0], "memfd"),
	       "user, none, --without seccomp: the warning names what is not counted");
	fx_done(&f);
}

static void
test_none(void)
{
	struct fx f;
	static const char *const user_w[] = {
		"default cpus limit only approximated: no writable cpu cgroup, so CPU affinity "
		"holds the run to 1 whole core, which the script can change (fix: " NO_CG_WHY ")",
		NULL,
	};
	static const char *const root_w[] = {
		"default pids limit not enforced: no writable pids cgroup (fix: " NO_CG_WHY ")",
		"default cpus limit only approximated: no writable cpu cgroup, so CPU affinity "
		"holds the run to 1 whole core, which the script can change (fix: " NO_CG_WHY ")",
		NULL,
	};

	/* unprivileged, no cgroup: the README's weakest row */
	fx_init(&f, USER_NONE);
	fx_run(&f);
	TAP_OK(f.r == 0 && !f.lp.use_cgroup, "user, none: planned, no cgroup");
	common(&f, "user, none");
	lim_is(&f, "user, none", AB_LIM_MEMORY, MW_MECH, 1 << 30, true);
	TAP_OK(f.res.limits[AB_LIM_MEMORY].note &&
		       strstr(f.res.limits[AB_LIM_MEMORY].note,
			      "Refused in this mode (memory the watchdog could not count): "
			      "memfd_create, memfd_secret, shmget, msgget and semget (ENOSYS), "
			      "F_SETPIPE_SZ above 64 KiB, SO_SNDBUF and SO_SNDBUFFORCE (EPERM)"),
	       "user, none: the memory note lists what seccomp refuses in this mode (issue 24)");
	lim_is(&f, "user, none", AB_LIM_PIDS, "rlimit RLIMIT_NPROC in a per-run user namespace",
	       256, true);
	TAP_STREQ(f.res.limits[AB_LIM_PIDS].note,
		  "hits are not counted: status cannot say pids_limit",
		  "user, none: pids note says hits are not counted");
	TAP_OK(f.lp.nproc == 258, "user, none: RLIMIT_NPROC is --pids + agentbox + bwrap");
	lim_is(&f, "user, none", AB_LIM_CPUS_MILLI, "cpu affinity (whole cores)", 1000, false);
	TAP_OK(f.lp.cpu_affinity == 1, "user, none: pinned to 1 core");
	lim_is(&f, "user, none", AB_LIM_DISK, "tmpfs size= on the workspace", 512ULL << 20, true);
	warnings_are(&f, "user, none", user_w);
	fx_done(&f);

	/* explicit --pids: RLIMIT_NPROC is a whole-run mechanism, so not refused */
	fx_init(&f, USER_NONE);
	set(&f, AB_LIM_PIDS, 5);
	fx_run(&f);
	TAP_OK(f.r == 0 && f.lp.nproc == 7, "user, none, explicit --pids 5: RLIMIT_NPROC 7");
	fx_done(&f);

	/* explicit --memory: the watchdog; --cpus: refused, with the probe's fix */
	fx_init(&f, USER_NONE);
	set(&f, AB_LIM_MEMORY, 64 << 20);
	fx_run(&f);
	TAP_OK(f.r == 0 && f.lp.memwatch && f.lp.memwatch_bytes == 64 << 20,
	       "user, none, explicit --memory: held by the watchdog");
	lim_is(&f, "user, none, explicit --memory", AB_LIM_MEMORY, MW_MECH, 64 << 20, true);
	fx_done(&f);

	fx_init(&f, USER_NONE);
	set(&f, AB_LIM_CPUS_MILLI, 2000);
	fx_run(&f);
	TAP_OK(f.r == -ENOTSUP && f.err.exit == AB_EXIT_SETUP,
	       "user, none, explicit --cpus: refused, exit 125");
	TAP_STREQ(f.err.msg, "cannot enforce --cpus on this host: no writable cpu cgroup",
		  "user, none, explicit --cpus: the message");
	TAP_STREQ(f.err.fix, NO_CG_WHY, "user, none, explicit --cpus: the fix");
	TAP_OK(f.res.warnings.n == 0, "user, none, explicit --cpus: no warning before it");
	fx_done(&f);

	/* no why from the probe: the generic fix */
	fx_init(&f, USER_NONE);
	f.h.cg.why[0] = '\0';
	set(&f, AB_LIM_CPUS_MILLI, 2000);
	fx_run(&f);
	TAP_STREQ(f.err.fix, DEFAULT_FIX, "user, none, no probe reason: the generic fix");
	fx_done(&f);

	/* a default --cpus that is not whole cores is rounded up for the affinity fallback */
	fx_init(&f, USER_NONE);
	f.o.limits[AB_LIM_CPUS_MILLI].value = 1500;
	fx_run(&f);
	TAP_OK(f.lp.cpu_affinity == 2 && f.res.limits[AB_LIM_CPUS_MILLI].enforced == 2000,
	       "user, none, 1.5 cpus: pinned to 2 whole cores");
	fx_done(&f);

	/* --cpu-time without a cgroup: per process, even when explicit */
	fx_init(&f, USER_NONE);
	set(&f, AB_LIM_CPU_TIME_MS, 2001);
	fx_run(&f);
	TAP_OK(f.r == 0 && f.lp.cpu_s == 3 && !f.lp.cg_cpu_time,
	       "user, none, --cpu-time 2001ms: RLIMIT_CPU 3 s, no poll");
	lim_is(&f, "user, none, --cpu-time", AB_LIM_CPU_TIME_MS, "rlimit RLIMIT_CPU (per process)",
	       2001, false);
	TAP_STREQ(f.res.warnings.v[f.res.warnings.n - 1],
		  "--cpu-time is enforced per process (RLIMIT_CPU), not for the run as a whole: no "
		  "cgroup",
		  "user, none, --cpu-time: the warning");
	fx_done(&f);

	/* root without a cgroup: no per-run user namespace, so pids is not enforced either */
	fx_init(&f, ROOT_NONE);
	fx_run(&f);
	TAP_OK(f.r == 0 && f.lp.nproc == RLIM_INFINITY, "root, none: planned, no RLIMIT_NPROC");
	lim_is(&f, "root, none", AB_LIM_PIDS, NULL, 0, false);
	warnings_are(&f, "root, none", root_w);
	fx_done(&f);

	fx_init(&f, ROOT_NONE);
	set(&f, AB_LIM_PIDS, 64);
	fx_run(&f);
	TAP_OK(f.r == -ENOTSUP && f.err.exit == AB_EXIT_SETUP,
	       "root, none, explicit --pids: refused, exit 125");
	TAP_STREQ(f.err.msg, "cannot enforce --pids on this host: no writable pids cgroup",
		  "root, none, explicit --pids: the message");
	fx_done(&f);
}

static void
test_workspace(void)
{
	static const char *const w[] = {
		"default disk limit not enforced: " WS_WHY " (fix: " WS_FIX ")",
		"default inodes limit not enforced: " WS_WHY " (fix: " WS_FIX ")",
		NULL,
	};
	struct fx f;

	fx_init(&f, ROOT_V1);
	f.workspace = true;
	fx_run(&f);
	TAP_OK(f.r == 0 && !f.lp.tmpfs_workspace && f.lp.work_bytes == 0 && f.lp.work_inodes == 0,
	       "--workspace: planned, no workspace tmpfs");
	lim_is(&f, "--workspace", AB_LIM_DISK, NULL, 0, false);
	lim_is(&f, "--workspace", AB_LIM_INODES, NULL, 0, false);
	lim_is(&f, "--workspace", AB_LIM_TMP_SIZE,
	       "tmpfs size= and nr_inodes= on /tmp and /dev/shm", 128ULL << 20, true);
	warnings_are(&f, "--workspace", w);
	fx_done(&f);

	fx_init(&f, USER_V2);
	f.workspace = true;
	set(&f, AB_LIM_DISK, 1 << 20);
	fx_run(&f);
	TAP_OK(f.r == -ENOTSUP && f.err.exit == AB_EXIT_SETUP,
	       "--workspace, explicit --disk: refused, exit 125");
	TAP_STREQ(f.err.msg, "cannot enforce --disk on this host: " WS_WHY,
		  "--workspace, explicit --disk: the message");
	TAP_STREQ(f.err.fix, WS_FIX, "--workspace, explicit --disk: the fix");
	fx_done(&f);

	fx_init(&f, USER_V2);
	f.workspace = true;
	set(&f, AB_LIM_INODES, 100);
	fx_run(&f);
	TAP_OK(f.r == -ENOTSUP, "--workspace, explicit --inodes: refused");
	TAP_STREQ(f.err.msg, "cannot enforce --inodes on this host: " WS_WHY,
		  "--workspace, explicit --inodes: the message");
	fx_done(&f);

	/* without --workspace an explicit --disk is the tmpfs's size */
	fx_init(&f, USER_NONE);
	set(&f, AB_LIM_DISK, 1 << 20);
	set(&f, AB_LIM_INODES, 100);
	fx_run(&f);
	TAP_OK(f.r == 0 && f.lp.work_bytes == 1 << 20 && f.lp.work_inodes == 100,
	       "tmpfs workspace, explicit --disk and --inodes: its size= and nr_inodes=");
	fx_done(&f);

	/* the first refusal wins: --cpus before --disk */
	fx_init(&f, USER_NONE);
	f.workspace = true;
	set(&f, AB_LIM_CPUS_MILLI, 2000);
	set(&f, AB_LIM_DISK, 1 << 20);
	fx_run(&f);
	TAP_OK(f.r == -ENOTSUP && strstr(f.err.msg, "--cpus"),
	       "explicit --cpus and --disk, both unenforceable: --cpus is reported");
	fx_done(&f);
}

/* tmpfs is RAM (issue 15): caps that add up to more than the memory limit in force are a
 * warning at the start, naming each cap and the fix. */
static bool
tmpfs_warned(const struct fx *f)
{
	for (size_t i = 0; i < f->res.warnings.n; i++)
		if (strstr(f->res.warnings.v[i], "held in RAM and counted against --memory"))
			return true;
	return false;
}

static void
test_tmpfs_over_memory(void)
{
	static const char *const want[] = {
		"the workspace (--disk 2G), /tmp and /dev/shm (--tmp-size 128M each) are tmpfs, "
		"held in RAM and counted against --memory: together they may hold 2304M, more "
		"than --memory 1G; a script that fills them is OOM-killed before it sees a full "
		"disk (fix: raise --memory above 2304M, or lower --disk or --tmp-size)",
		NULL,
	};
	static const char *const ws_want[] = {
		"/tmp and /dev/shm (--tmp-size 64M each) are tmpfs, held in RAM and counted "
		"against --memory: together they may hold 128M, more than --memory 100M; a script "
		"that fills them is OOM-killed before it sees a full disk (fix: raise --memory "
		"above 128M, or lower --tmp-size)",
		NULL,
	};
	struct fx f;

	/* the case: --disk 2G --memory 1G */
	fx_init(&f, ROOT_V1);
	set(&f, AB_LIM_MEMORY, 1ULL << 30);
	set(&f, AB_LIM_DISK, 2ULL << 30);
	fx_run(&f);
	TAP_OK(f.r == 0 && f.lp.tmpfs_over_memory && f.lp.tmpfs_bytes == (2ULL << 30) + (256 << 20),
	       "--disk 2G --memory 1G: planned, the tmpfs caps (2304M) are over --memory");
	warnings_are(&f, "--disk 2G --memory 1G", want);
	fx_done(&f);

	/* the same on a delegated v2 cgroup */
	fx_init(&f, USER_V2);
	set(&f, AB_LIM_MEMORY, 1ULL << 30);
	set(&f, AB_LIM_DISK, 2ULL << 30);
	fx_run(&f);
	warnings_are(&f, "user, v2, --disk 2G --memory 1G", want);
	fx_done(&f);

	/* the defaults fit: 512M + 2 x 128M under 1G */
	fx_init(&f, ROOT_V1);
	fx_run(&f);
	TAP_OK(!f.lp.tmpfs_over_memory && f.lp.tmpfs_bytes == 768ULL << 20 && !tmpfs_warned(&f),
	       "defaults: 768M of tmpfs under --memory 1G, no warning");
	fx_done(&f);

	/* exactly the limit is not over it */
	fx_init(&f, ROOT_V1);
	set(&f, AB_LIM_MEMORY, 768ULL << 20);
	fx_run(&f);
	TAP_OK(!f.lp.tmpfs_over_memory && !tmpfs_warned(&f),
	       "--memory 768M, tmpfs caps 768M: not over, no warning");
	fx_done(&f);

	/* --workspace DIR is not tmpfs: only /tmp and /dev/shm count */
	fx_init(&f, ROOT_V1);
	f.workspace = true;
	set(&f, AB_LIM_MEMORY, 100ULL << 20);
	set(&f, AB_LIM_TMP_SIZE, 64ULL << 20);
	fx_run(&f);
	TAP_OK(f.lp.tmpfs_bytes == 128ULL << 20 && f.lp.tmpfs_over_memory,
	       "--workspace: /tmp and /dev/shm only (128M) over --memory 100M");
	TAP_OK(tmpfs_warned(&f), "--workspace: warned");
	for (size_t i = 0; i < f.res.warnings.n; i++)
		if (strstr(f.res.warnings.v[i], "held in RAM"))
			TAP_STREQ(f.res.warnings.v[i], ws_want[0], "--workspace: the warning");
	fx_done(&f);

	/* no memory cgroup: the watchdog holds the run to --memory, and tmpfs pages count
	 * there too (it adds the tmpfs mounts' usage), so the same warning */
	fx_init(&f, USER_NONE);
	set(&f, AB_LIM_DISK, 2ULL << 30);
	fx_run(&f);
	TAP_OK(f.r == 0 && f.lp.memwatch && f.lp.tmpfs_over_memory && tmpfs_warned(&f),
	       "no memory cgroup (the watchdog), --disk 2G: the tmpfs warning");
	fx_done(&f);
}

int
main(void)
{
	test_root_v1();
	test_user_v2();
	test_none();
	test_workspace();
	test_tmpfs_over_memory();
	return tap_done();
}

#include "limitplan.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "../spec/units.h"
#include "../util/fdutil.h"
#include "../util/xalloc.h"

static void
set_limit(struct ab_record *res, enum ab_limit_id id, uint64_t enforced, const char *mechanism,
	  bool whole_run, const char *note)
{
	struct ab_limit_result *l = &res->limits[id];

	l->applies = true;
	l->enforced = enforced;
	l->mechanism = mechanism;
	l->enforced_ok = whole_run;
	free(l->note);
	l->note = note ? xstrdup(note) : NULL;
}

/* An explicit limit without a whole-run mechanism: refuse. A default: warn; one this host
 * cannot apply (host) is also listed in defaults_not_applied (issue 25). */
static int
unenforceable(const struct ab_run_opts *o, enum ab_limit_id id, const char *why, const char *fix,
	      bool host, struct ab_record *res, struct ab_err *err)
{
	if (o->limits[id].set) {
		ab_err_set(err, -ENOTSUP, "cannot enforce --%s on this host: %s",
			   cli_limit_name(id), why);
		return ab_err_fix(err, "%s", fix);
	}
	if (host)
		result_default_unapplied(res, cli_limit_name(id),
					 "default %s limit not enforced: %s (fix: %s)",
					 cli_limit_name(id), why, fix);
	else
		result_warn(res, "default %s limit not enforced: %s (fix: %s)", cli_limit_name(id),
			    why, fix);
	return 0;
}

/* Memory: the cgroup's limit (with v1's socket guard), else the supervisor's watchdog. */
static void
plan_memory(const struct ab_run_opts *o, const struct ab_cg_host *cg, bool cgroup_ok,
	    struct ab_limits_plan *lp, struct ab_record *res)
{
	if (cgroup_ok && cg->memory) {
		lp->use_cgroup = true;
		lp->cg.memory_bytes = o->limits[AB_LIM_MEMORY].value;
		/* v1 charges no TCP or UDP socket buffer (issue 24: 1 GiB of them under
		 * --memory 64M, status exited): agentbox counts them and adds them */
		lp->sockguard = cg->kind == AB_CG_V1;
		lp->memwatch_bytes = lp->sockguard ? lp->cg.memory_bytes : 0;
		set_limit(res, AB_LIM_MEMORY, lp->cg.memory_bytes,
			  cg->kind == AB_CG_V2 ? "cgroup v2 memory.max, memory.swap.max=0"
					       : "cgroup v1 memory.limit_in_bytes (+memsw)",
			  true,
			  lp->sockguard
				  ? "tmpfs and memfd pages (the workspace included) count; TCP and "
				    "UDP socket buffers, which cgroup v1 does not charge, are "
				    "counted "
				    "by agentbox and added (the run is stopped over the limit)"
				  : "tmpfs and memfd pages (the workspace included) count");
	} else {
		/* No memory cgroup (unprivileged without delegation, or a container): the
		 * supervisor's watchdog measures the sandbox and kills the whole run over the
		 * limit (memwatch.h). Its blind spots (memfd, SysV shm) are closed by seccomp;
		 * without seccomp they stay open, and the report says the limit is partial. */
		bool whole = !o->without[AB_PROT_SECCOMP];

		lp->memwatch = true;
		lp->memwatch_bytes = o->limits[AB_LIM_MEMORY].value;
		set_limit(
			res, AB_LIM_MEMORY, lp->memwatch_bytes,
			"agentbox watchdog: RSS and shared memory of every sandbox process plus "
			"its tmpfs, and the kernel memory they hold (page tables, threads, fds, "
			"pipes, sockets, epoll, inotify, ptys, mappings, tmpfs inodes and "
			"xattrs), polled every 1-50 ms, SIGKILL over the limit",
			whole,
			whole ? "no memory cgroup here: a polled limit; a fast allocator can pass "
				"it by what it allocates between two polls (docs/design.md). "
				"Refused in this mode (memory the watchdog could not count): "
				"memfd_create, memfd_secret, shmget, msgget and semget (ENOSYS), "
				"F_SETPIPE_SZ above 64 KiB, SO_SNDBUF and SO_SNDBUFFORCE (EPERM)"
			      : "--without seccomp: memfd, SysV shared memory, message queues and "
				"semaphores are not counted, nor pipes and send buffers past their "
				"defaults");
		if (!whole)
			result_warn(res,
				    "--without seccomp: the memory watchdog cannot see memfd or "
				    "SysV shared memory pages");
	}
}

/* pids: the cgroup, else RLIMIT_NPROC in a per-run user namespace, else not enforced. */
static int
plan_pids(const struct ab_run_opts *o, const struct ab_cg_host *cg, bool cgroup_ok,
	  struct ab_limits_plan *lp, struct ab_record *res, bool per_run_userns, const char *fixbuf,
	  struct ab_err *err)
{
	int r;

	if (cgroup_ok && cg->pids) {
		lp->use_cgroup = true;
		/* --pids counts the tasks in the sandbox (agentbox-init included); bwrap's
		 * monitor outside it is in the cgroup too */
		lp->cg.pids = o->limits[AB_LIM_PIDS].value + 1;
		set_limit(res, AB_LIM_PIDS, o->limits[AB_LIM_PIDS].value,
			  cg->kind == AB_CG_V2 ? "cgroup v2 pids.max" : "cgroup v1 pids.max", true,
			  NULL);
	} else if (per_run_userns) {
		/* RLIMIT_NPROC is charged per user namespace level (Linux 5.14+ ucounts): in
		 * the supervisor's own user namespace it counts only this run's tasks. */
		/* + agentbox and bwrap's monitor, counted in our namespace too */
		lp->nproc = o->limits[AB_LIM_PIDS].value + 2;
		set_limit(res, AB_LIM_PIDS, o->limits[AB_LIM_PIDS].value,
			  "rlimit RLIMIT_NPROC in a per-run user namespace", true,
			  "hits are not counted: status cannot say pids_limit");
	} else {
		r = unenforceable(o, AB_LIM_PIDS, "no writable pids cgroup", fixbuf, true, res,
				  err);
		if (r < 0)
			return r;
		set_limit(res, AB_LIM_PIDS, 0, NULL, false, "not enforced");
	}
	return 0;
}

/* cpus: the cgroup's quota, else (the default only) CPU affinity, said once. */
static int
plan_cpus(const struct ab_run_opts *o, const struct ab_cg_host *cg, bool cgroup_ok,
	  struct ab_limits_plan *lp, struct ab_record *res, const char *fixbuf, struct ab_err *err)
{
	if (cgroup_ok && cg->cpu) {
		lp->use_cgroup = true;
		lp->cg.cpu_period_us = 100000;
		lp->cg.cpu_quota_us = o->limits[AB_LIM_CPUS_MILLI].value * 100;
		set_limit(res, AB_LIM_CPUS_MILLI, o->limits[AB_LIM_CPUS_MILLI].value,
			  cg->kind == AB_CG_V2 ? "cgroup v2 cpu.max" : "cgroup v1 cpu.cfs_quota_us",
			  true, "value in milli-cores");
	} else if (o->limits[AB_LIM_CPUS_MILLI].set) {
		return unenforceable(o, AB_LIM_CPUS_MILLI, "no writable cpu cgroup", fixbuf, true,
				     res, err);
	} else {
		/* the default, approximated: the report says so once, and says the same thing
		 * in limits.cpus (issue 25: never "not enforced" beside an enforced value) */
		lp->cpu_affinity = (int) ((o->limits[AB_LIM_CPUS_MILLI].value + 999) / 1000);
		result_default_unapplied(
			res, "cpus",
			"default cpus limit only approximated: no writable cpu "
			"cgroup, so CPU affinity holds the run to %d whole core%s, "
			"which the script can change (fix: %s)",
			lp->cpu_affinity, lp->cpu_affinity == 1 ? "" : "s", fixbuf);
		set_limit(
			res, AB_LIM_CPUS_MILLI, (uint64_t) lp->cpu_affinity * 1000,
			"cpu affinity (whole cores)", false,
			"fallback: pinned to whole cores; the script can change its own affinity");
	}
	return 0;
}

/* cpu-time (optional): the cgroup's usage polled, with RLIMIT_CPU as a per-process backstop. */
static void
plan_cpu_time(const struct ab_run_opts *o, const struct ab_cg_host *cg, bool cgroup_ok,
	      struct ab_limits_plan *lp, struct ab_record *res)
{
	if (o->limits[AB_LIM_CPU_TIME_MS].value > 0) {
		uint64_t ms = o->limits[AB_LIM_CPU_TIME_MS].value;

		lp->cpu_time_ms = ms;
		lp->cpu_s = (ms + 999) / 1000; /* per-process backstop */
		if (cgroup_ok && (cg->cpuacct || cg->kind == AB_CG_V2)) {
			lp->use_cgroup = true;
			lp->cg_cpu_time = true;
			set_limit(res, AB_LIM_CPU_TIME_MS, ms,
				  cg->kind == AB_CG_V2
					  ? "cgroup v2 cpu.stat polled + RLIMIT_CPU"
					  : "cgroup v1 cpuacct.usage polled + RLIMIT_CPU",
				  true, NULL);
		} else {
			set_limit(res, AB_LIM_CPU_TIME_MS, ms, "rlimit RLIMIT_CPU (per process)",
				  false, "each process gets the whole budget");
			result_warn(res, "--cpu-time is enforced per process (RLIMIT_CPU), not for "
					 "the run as a whole: no cgroup");
		}
	}
}

/* The workspace's bytes and inodes, /tmp and /dev/shm, file size, open files. */
static int
plan_space(const struct ab_run_opts *o, bool tmpfs_workspace, struct ab_limits_plan *lp,
	   struct ab_record *res, struct ab_err *err)
{
	int r;

	lp->tmpfs_workspace = tmpfs_workspace;
	if (tmpfs_workspace) {
		lp->work_bytes = o->limits[AB_LIM_DISK].value;
		lp->work_inodes = o->limits[AB_LIM_INODES].value;
		set_limit(res, AB_LIM_DISK, lp->work_bytes, "tmpfs size= on the workspace", true,
			  "the workspace is RAM: its bytes also count against --memory");
		set_limit(res, AB_LIM_INODES, lp->work_inodes, "tmpfs nr_inodes= on the workspace",
			  true, NULL);
	} else {
		const char *why = "--workspace DIR is bound as it is, with no quota";
		const char *fix = "drop --workspace and use --input (the workspace is then a "
				  "capped tmpfs)";

		r = unenforceable(o, AB_LIM_DISK, why, fix, false, res, err);
		if (r < 0)
			return r;
		r = unenforceable(o, AB_LIM_INODES, why, fix, false, res, err);
		if (r < 0)
			return r;
		set_limit(res, AB_LIM_DISK, 0, NULL, false, "not enforced");
		set_limit(res, AB_LIM_INODES, 0, NULL, false, "not enforced");
	}
	lp->tmp_bytes = o->limits[AB_LIM_TMP_SIZE].value;
	/* tmpfs's own default inode count is one per 8 KiB of the host's RAM; the same ratio,
	 * of --tmp-size, bounds what inodes and their xattrs hold (issue 24) */
	lp->tmp_inodes = lp->tmp_bytes / AB_TMP_BYTES_PER_INODE;
	if (lp->tmp_inodes < AB_TMP_MIN_INODES)
		lp->tmp_inodes = AB_TMP_MIN_INODES;
	set_limit(res, AB_LIM_TMP_SIZE, lp->tmp_bytes,
		  "tmpfs size= and nr_inodes= on /tmp and /dev/shm", true,
		  "each, one inode per 8 KiB; tmpfs pages and inodes also count against --memory");

	/* file size, open files: rlimits are the right tool for these */
	lp->fsize = o->limits[AB_LIM_FILE_SIZE].value;
	set_limit(res, AB_LIM_FILE_SIZE, lp->fsize, "rlimit RLIMIT_FSIZE", true,
		  "bounds every file write, sparse files included");
	lp->nofile = o->limits[AB_LIM_NOFILE].value;
	set_limit(res, AB_LIM_NOFILE, lp->nofile, "rlimit RLIMIT_NOFILE", true, "per process");
	return 0;
}

/* tmpfs is RAM: caps that add up to more than the memory limit in force are said once. */
static void
plan_tmpfs_total(const struct ab_run_opts *o, bool tmpfs_workspace, struct ab_limits_plan *lp,
		 struct ab_record *res)
{
	uint64_t mem_limit;

	/* tmpfs is RAM: its pages are charged to the memory cgroup like any other, so caps that
	 * add up to more than --memory end in an OOM kill, not in ENOSPC (issue 15). */
	lp->tmpfs_bytes = (tmpfs_workspace ? lp->work_bytes : 0) + 2 * lp->tmp_bytes +
			  (o->env_path ? o->env_bytes : 0);
	/* the memory limit in force: the cgroup's, or the watchdog's without one */
	mem_limit = lp->cg.memory_bytes > 0 ? lp->cg.memory_bytes
					    : (lp->memwatch ? lp->memwatch_bytes : 0);
	if (mem_limit > 0 && lp->tmpfs_bytes > mem_limit) {
		char what[200], total[16], mem[16];

		lp->tmpfs_over_memory = true;
		result_warn(res,
			    "%s are tmpfs, held in RAM and counted against --memory: together "
			    "they may hold %s, more than --memory %s; a script that fills them is "
			    "OOM-killed before it sees a full disk (fix: raise --memory above %s, "
			    "or lower %s)",
			    limits_tmpfs_text(lp, o, what, sizeof(what)),
			    units_format_size(lp->tmpfs_bytes, total, sizeof(total)),
			    units_format_size(mem_limit, mem, sizeof(mem)), total,
			    tmpfs_workspace ? "--disk or --tmp-size" : "--tmp-size");
	}
}

int
limits_plan(const struct ab_run_opts *o, const struct ab_host *h, bool tmpfs_workspace,
	    bool per_run_userns, struct ab_limits_plan *lp, struct ab_record *res,
	    struct ab_err *err)
{
	const struct ab_cg_host *cg = &h->cg;
	bool cgroup_ok = cg->kind != AB_CG_NONE && !o->without[AB_PROT_CGROUP];
	char fixbuf[600];
	int r;

	memset(lp, 0, sizeof(*lp));
	lp->fsize = lp->nofile = lp->cpu_s = lp->nproc = RLIM_INFINITY;
	lp->core = 0; /* no core dumps, ever */
	/* per-uid objects (issue 18): the rlimit is also the cap of the sandbox's own user
	 * namespace level, which bwrap creates with it */
	lp->sigpending = 1024;
	lp->msgqueue = 256 << 10;
	/* mlock() pins pages no memory cgroup is charged for when they are page cache of files
	 * the host read first (/usr): per process, issue 24 */
	lp->memlock = AB_MEMLOCK_BYTES;
	lp->cpu_affinity = -1;
	snprintf(fixbuf, sizeof(fixbuf), "%s",
		 cg->why[0] ? cg->why
			    : "run as root, or on a cgroup v2 host with systemd (agentbox asks it "
			      "for a delegated scope) or a delegated AGENTBOX_CGROUP");

	limits_plan_run(o, lp, res);

	plan_memory(o, cg, cgroup_ok, lp, res);
	r = plan_pids(o, cg, cgroup_ok, lp, res, per_run_userns, fixbuf, err);
	if (r == 0)
		r = plan_cpus(o, cg, cgroup_ok, lp, res, fixbuf, err);
	if (r < 0)
		return r;
	plan_cpu_time(o, cg, cgroup_ok, lp, res);
	r = plan_space(o, tmpfs_workspace, lp, res, err);
	if (r < 0)
		return r;
	plan_tmpfs_total(o, tmpfs_workspace, lp, res);
	return 0;
}

void
limits_plan_run(const struct ab_run_opts *o, struct ab_limits_plan *lp, struct ab_record *res)
{
	/* timeout: always ours */
	/* a session: limits.timeout is each cell's (the library's); the run lasts its lifetime */
	lp->timeout_ms = o->session ? o->session_lifetime_ms : o->limits[AB_LIM_TIMEOUT_MS].value;
	set_limit(res, AB_LIM_TIMEOUT_MS, lp->timeout_ms, "agentbox monotonic deadline + SIGKILL",
		  true, NULL);
	lp->output_bytes = o->limits[AB_LIM_OUTPUT].value;
	set_limit(
		res, AB_LIM_OUTPUT, lp->output_bytes, "agentbox pipe capture", true,
		o->output_truncate
			? "per stream; past it the run goes on and the report keeps the "
			  "stream's last bytes, the middle is dropped (--on-output-limit truncate)"
			: "per stream; the run is stopped when a stream passes it "
			  "(--on-output-limit kill)");
}

char *
limits_tmpfs_text(const struct ab_limits_plan *lp, const struct ab_run_opts *o, char *buf,
		  size_t size)
{
	char disk[16], tmp[16], env[16];

	snprintf(buf, size, "%s%s%s/tmp and /dev/shm (--tmp-size %s each)%s%s%s",
		 lp->tmpfs_workspace ? "the workspace (--disk " : "",
		 lp->tmpfs_workspace ? units_format_size(lp->work_bytes, disk, sizeof(disk)) : "",
		 lp->tmpfs_workspace ? "), " : "",
		 units_format_size(lp->tmp_bytes, tmp, sizeof(tmp)),
		 o->env_path ? " and the environment being built (prepare --disk " : "",
		 o->env_path ? units_format_size(o->env_bytes, env, sizeof(env)) : "",
		 o->env_path ? ")" : "");
	return buf;
}

int
limits_apply_rlimits(const struct ab_limits_plan *lp)
{
	struct {
		int res;
		rlim_t v;
	} const table[] = {
		{ RLIMIT_CORE, lp->core },         { RLIMIT_FSIZE, lp->fsize },
		{ RLIMIT_NOFILE, lp->nofile },     { RLIMIT_CPU, lp->cpu_s },
		{ RLIMIT_NPROC, lp->nproc },       { RLIMIT_SIGPENDING, lp->sigpending },
		{ RLIMIT_MSGQUEUE, lp->msgqueue }, { RLIMIT_MEMLOCK, lp->memlock },
	};

	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
		struct rlimit rl;

		if (table[i].v == RLIM_INFINITY)
			continue;
		rl.rlim_cur = table[i].v;
		rl.rlim_max = table[i].v;
		/* RLIMIT_CPU: soft limit sends SIGXCPU, the hard one a second later SIGKILL */
		if (table[i].res == RLIMIT_CPU)
			rl.rlim_max = table[i].v + 1;
		if (setrlimit(table[i].res, &rl) < 0)
			return -errno;
	}
	return 0;
}

int
limits_cap_inotify(const char *proc_root)
{
	char path[PATH_MAX], v[32];
	int r;

	snprintf(path, sizeof(path), "%s/sys/user/max_inotify_instances", proc_root);
	snprintf(v, sizeof(v), "%d", AB_INOTIFY_INSTANCES);
	r = write_small_file_at(AT_FDCWD, path, v);
	if (r < 0)
		return r;
	snprintf(path, sizeof(path), "%s/sys/user/max_inotify_watches", proc_root);
	snprintf(v, sizeof(v), "%d", AB_INOTIFY_WATCHES);
	return write_small_file_at(AT_FDCWD, path, v);
}

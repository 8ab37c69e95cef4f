/* outcome.c: what happened in a run, from agentbox-init's records, bwrap's wait status and
 * the cgroup's counters: the report's status, exit code, usage and protections, and the exit
 * status agentbox leaves with. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/resource.h>
#include <sys/statfs.h>
#include <sys/wait.h>

#include "../spec/units.h"
#include "../util/macro.h"
#include "../util/xalloc.h"
#include "filter.h"
#include "netproxy.h"
#include "run.h"
#include "runctx.h"

static bool
limit_hit(const struct ab_record *res, const char *name)
{
	for (size_t i = 0; i < res->limits_hit.n; i++)
		if (strcmp(res->limits_hit.v[i], name) == 0)
			return true;
	return false;
}

/* A file-size limit hit that no signal showed (issue 13): CPython and Node ignore SIGXFSZ,
 * so the write past --file-size is only an EFBIG, which the script may catch and exit 0.
 * agentbox-init's scan (init/proto.h) is the evidence: a regular file in /work, /tmp or
 * /dev/shm, changed during the run, whose size reached RLIMIT_FSIZE. The status stays what
 * the script did (exited, signaled); limits_hit gets "file-size" and, when nothing else
 * explains the run, the message and fix say which limit and what to do. */
static void
file_size_evidence(struct run_ctx *c, const struct ab_outcome *oc)
{
	struct ab_record *res = c->res;
	unsigned hit = oc->fsize_hit;
	const char *where;

	if (hit & AB_FSIZE_PARTIAL)
		result_warn(res, "the file-size check after the run stopped at its entry cap: a "
				 "file at --file-size further on would not show in limits_hit");
	if (!(hit & (AB_FSIZE_WORK | AB_FSIZE_TMP | AB_FSIZE_SHM)) || limit_hit(res, "file-size"))
		return;
	strv_push(&res->limits_hit, "file-size");
	if (res->message || (res->status != AB_STATUS_EXITED && res->status != AB_STATUS_SIGNALED))
		return;
	where = hit & AB_FSIZE_WORK ? "/work" : hit & AB_FSIZE_TMP ? "/tmp" : "/dev/shm";
	res->message = xasprintf("a file in %s reached --file-size (%llu bytes): writes past "
				 "that size fail with EFBIG",
				 where, (unsigned long long) c->lp.fsize);
	free(res->fix);
	res->fix = xstrdup("raise --file-size");
}

/* --on-output-limit truncate (the default): a stream passed the cap and the run went on (issue
 * 15, 25). The status stays what the script did; limits_hit gets "output-limit"
 * (other_evidence) and, when nothing else explains the run, the message says what was cut. */
static void
truncation_evidence(struct run_ctx *c, const struct ab_outcome *oc)
{
	struct ab_record *res = c->res;
	const char *which = res->out.truncated && res->err.truncated ? "stdout and stderr"
			    : res->out.truncated                     ? "stdout"
								     : "stderr";

	if (oc->output_limited || !(res->out.truncated || res->err.truncated))
		return;
	if (res->message || (res->status != AB_STATUS_EXITED && res->status != AB_STATUS_SIGNALED))
		return;
	res->message =
		xasprintf("%s passed --output-limit (%llu bytes per stream) and the run went "
			  "on: the report keeps the first and the last bytes, the middle past "
			  "the limit was dropped (--on-output-limit truncate)",
			  which, (unsigned long long) c->lp.output_bytes);
	free(res->fix);
	res->fix = xstrdup("raise --output-limit, or write large output to a file in /work");
}

static void
add_hit(struct ab_record *res, const char *name)
{
	if (!limit_hit(res, name))
		strv_push(&res->limits_hit, name);
}

/* Every other limit with evidence that it was reached, whatever ended the run (issue 15): a
 * fork bomb under --pids that then times out has both. */
static void
other_evidence(struct run_ctx *c, const struct ab_outcome *oc, const struct ab_cg_usage *u)
{
	struct ab_record *res = c->res;

	if (u && u->valid && u->pids_max_events > 0)
		add_hit(res, "pids");
	if (u && u->valid && u->oom_kills > 0)
		add_hit(res, "memory");
	if (oc->cpu_time_limited || (u && u->valid && c->lp.cg_cpu_time && c->lp.cpu_time_ms &&
				     u->cpu_usec / 1000 >= c->lp.cpu_time_ms))
		add_hit(res, "cpu-time");
	if (res->out.truncated || res->err.truncated)
		add_hit(res, "output-limit");
	if (oc->timed_out)
		add_hit(res, "timeout");
}

/* The limit of the status is the one that ended the run, so it was reached last: it goes to
 * the end; the others (reached while the run went on) keep their order before it. */
static const char *
status_limit(enum ab_status st)
{
	static const struct {
		enum ab_status st;
		const char *limit;
	} map[] = {
		{ AB_STATUS_TIMEOUT, "timeout" },
		{ AB_STATUS_OOM, "memory" },
		{ AB_STATUS_PIDS_LIMIT, "pids" },
		{ AB_STATUS_CPU_TIME_LIMIT, "cpu-time" },
		{ AB_STATUS_OUTPUT_LIMIT, "output-limit" },
		{ AB_STATUS_FILE_SIZE_LIMIT, "file-size" },
	};

	for (size_t i = 0; i < ARRAY_SIZE(map); i++)
		if (map[i].st == st)
			return map[i].limit;
	return NULL;
}

static void
order_limits_hit(struct ab_record *res)
{
	const char *last = status_limit(res->status);
	struct strv sorted = { 0 };

	if (!last || !limit_hit(res, last))
		return;
	STRV_FOREACH (h, &res->limits_hit)
		if (strcmp(*h, last) != 0)
			strv_push(&sorted, *h);
	strv_push(&sorted, last);
	strv_done(&res->limits_hit);
	res->limits_hit = sorted;
}

/* A measured size for people: "64K", "5.3M", "59M". */
static char *
approx_size(uint64_t bytes, char *buf, size_t size)
{
	if (bytes >= (10ULL << 20))
		snprintf(buf, size, "%lluM", (unsigned long long) ((bytes + (1 << 19)) >> 20));
	else if (bytes >= (1ULL << 20))
		snprintf(buf, size, "%.1fM", (double) bytes / (1 << 20));
	else
		snprintf(buf, size, "%lluK", (unsigned long long) ((bytes + 512) >> 10));
	return buf;
}

/* What the run's tmpfs held, as far as something measured it: the workspace at the end
 * (statfs of agentbox's tmpfs, still mounted; *ret_ws), and all of it (/tmp and /dev/shm too)
 * where the memory cgroup's shmem was read when the interpreter ended, or the watchdog counted
 * the tmpfs mounts (its largest count). -1: nothing measured it. */
static int64_t
tmpfs_seen(struct run_ctx *c, const struct ab_outcome *oc, uint64_t *ret_ws)
{
	int64_t seen = -1;
	struct statfs sf;

	*ret_ws = 0;
	if (c->tmpfs_mounted && c->work_fd >= 0 && fstatfs(c->work_fd, &sf) == 0) {
		*ret_ws = (uint64_t) (sf.f_blocks - sf.f_bfree) * (uint64_t) sf.f_bsize;
		seen = (int64_t) *ret_ws;
	}
	if (oc->tmpfs_end_bytes > seen)
		seen = oc->tmpfs_end_bytes;
	if (oc->tmpfs_peak_bytes > seen)
		seen = oc->tmpfs_peak_bytes;
	return seen;
}

/* Did tmpfs cause the OOM? Only when what it was measured to hold is a real share of the
 * limit (a quarter): its pages count against --memory, and nothing else tells a person that a
 * full workspace ends as an OOM kill rather than ENOSPC. Caps that add up to more than the
 * limit are no evidence by themselves (issue 25: a list of 10**9 ints under --memory 256M was
 * told to lower --disk while its workspace held 4K). */
static bool
tmpfs_caused(struct run_ctx *c, const struct ab_outcome *oc)
{
	uint64_t ws,
		limit = c->lp.cg.memory_bytes > 0 ? c->lp.cg.memory_bytes : c->lp.memwatch_bytes;
	int64_t seen = tmpfs_seen(c, oc, &ws);

	return limit > 0 && seen >= 0 && (uint64_t) seen >= limit / 4;
}

/* An OOM message: what ended the run (the cgroup's OOM kills, or the watchdog's measure), and
 * what tmpfs held, when it was measured: counted against the limit when it was a real share
 * of it (with the caps that let it, when they add up to more than the limit), "only" when it
 * was not. */
static char *
oom_message(struct run_ctx *c, const struct ab_outcome *oc, const char *event)
{
	char what[200], held[16], ws_held[16], total[16], mem[16], line[96];
	uint64_t ws,
		limit = c->lp.cg.memory_bytes > 0 ? c->lp.cg.memory_bytes : c->lp.memwatch_bytes;
	int64_t seen = tmpfs_seen(c, oc, &ws);

	if (seen < 0 || limit == 0)
		return xasprintf("memory limit reached: %s", event);
	units_format_size(limit, mem, sizeof(mem));
	approx_size((uint64_t) seen, held, sizeof(held));
	if (!tmpfs_caused(c, oc))
		return xasprintf("memory limit reached: %s; tmpfs held only %s, so the script's "
				 "processes used the memory",
				 event, held);
	if ((uint64_t) seen > ws + (1 << 20))
		snprintf(line, sizeof(line), "tmpfs held %s at the end (the workspace %s)", held,
			 approx_size(ws, ws_held, sizeof(ws_held)));
	else
		snprintf(line, sizeof(line), "the workspace held %s at the end", held);
	if (c->lp.tmpfs_over_memory)
		return xasprintf("memory limit reached: %s; tmpfs pages count against --memory "
				 "%s, and %s may hold %s; %s",
				 event, mem, limits_tmpfs_text(&c->lp, c->o, what, sizeof(what)),
				 units_format_size(c->lp.tmpfs_bytes, total, sizeof(total)), line);
	return xasprintf("memory limit reached: %s; %s, and tmpfs pages count against --memory %s",
			 event, line, mem);
}

/* Every limit status says how to get past it (issue 15). */
static void
limit_fix(struct run_ctx *c, const struct ab_outcome *oc)
{
	struct ab_record *res = c->res;
	char total[16], mem[16];
	uint64_t limit = c->lp.cg.memory_bytes > 0 ? c->lp.cg.memory_bytes : c->lp.memwatch_bytes;

	if (res->fix)
		return;
	if (res->status == AB_STATUS_TIMEOUT)
		res->fix = xasprintf("raise --timeout (now %.1f s), or make the script faster",
				     (double) c->lp.timeout_ms / 1000.0);
	else if (res->status == AB_STATUS_OOM && tmpfs_caused(c, oc) && c->lp.tmpfs_over_memory)
		res->fix =
			xasprintf("raise --memory above %s, or lower %s (the workspace, /tmp and "
				  "/dev/shm are RAM and count against it)",
				  units_format_size(c->lp.tmpfs_bytes, total, sizeof(total)),
				  c->lp.tmpfs_workspace ? "--disk or --tmp-size" : "--tmp-size");
	else if (res->status == AB_STATUS_OOM && tmpfs_caused(c, oc))
		res->fix = xstrdup("raise --memory, or keep less in /work, /tmp and /dev/shm (they "
				   "are RAM and count against it)");
	else if (res->status == AB_STATUS_OOM && limit > 0)
		res->fix = xasprintf("raise --memory (now %s), or have the script hold less in "
				     "memory",
				     units_format_size(limit, mem, sizeof(mem)));
	else if (res->status == AB_STATUS_OOM)
		res->fix = xstrdup("raise --memory");
	else if (res->status == AB_STATUS_PIDS_LIMIT)
		res->fix = xstrdup("raise --pids, or start fewer processes or threads");
	else if (res->status == AB_STATUS_CPU_TIME_LIMIT)
		res->fix = xstrdup("raise --cpu-time, or make the script do less work");
	else if (res->status == AB_STATUS_OUTPUT_LIMIT)
		res->fix =
			xstrdup("raise --output-limit, or write large output to a file in /work");
	else if (res->status == AB_STATUS_DISK_LIMIT)
		res->fix = xstrdup(limit_hit(res, "inodes") ? "raise --inodes" : "raise --disk");
	else if (res->status == AB_STATUS_FILE_SIZE_LIMIT)
		res->fix = xstrdup("raise --file-size");
}

void
outcome_interpret(struct run_ctx *c, const struct ab_outcome *oc, const struct ab_cg_usage *u)
{
	struct ab_record *res = c->res;
	int ws = oc->script_wstatus;

	res->wall_ms = oc->wall_ms;
	/* CPU from what saw it (issue 25): the run's cgroup counts every process of the run;
	 * else the wait statuses of bwrap and what it reaped, which miss the processes of a run
	 * agentbox killed (reaped by no parent that adds them up): then at least what they had
	 * used just before the kill. The peak RSS likewise. */
	res->cpu_ms = (oc->ru.ru_utime.tv_sec + oc->ru.ru_stime.tv_sec) * 1000LL +
		      (oc->ru.ru_utime.tv_usec + oc->ru.ru_stime.tv_usec) / 1000;
	res->max_rss_kib = oc->ru.ru_maxrss;
	if (oc->reading) {
		if (oc->reading_cpu_ms > res->cpu_ms)
			res->cpu_ms = oc->reading_cpu_ms;
		if (oc->reading_maxrss_kib > res->max_rss_kib)
			res->max_rss_kib = oc->reading_maxrss_kib;
	}
	/* the cgroup counted CPU (0: no cpuacct hierarchy; a run always uses some, bwrap and
	 * agentbox-init start in it) */
	if (u && u->valid && u->cpu_usec > 0) {
		res->cpu_ms = (int64_t) (u->cpu_usec / 1000);
		res->cpu_from_cgroup = true;
	}
	if (oc->script_done) {
		if (WIFEXITED(ws))
			res->exit_code = WEXITSTATUS(ws);
		else if (WIFSIGNALED(ws))
			res->signal = WTERMSIG(ws);
	} else if (oc->timed_out || oc->output_limited || oc->cpu_time_limited ||
		   oc->interrupted_by || oc->mem_limited || (u && u->valid && u->oom_kills > 0)) {
		/* an OOM kill that took agentbox-init itself left no exact status: SIGKILL is
		 * what the kernel sent */
		res->signal = SIGKILL;
	}
	if (u && u->valid) {
		/* 0: not counted here (no memory hierarchy): unknown, never 0 bytes */
		res->usage.memory_peak_bytes =
			u->memory_peak_bytes ? (int64_t) u->memory_peak_bytes : -1;
		res->usage.oom_kills = (int64_t) u->oom_kills;
		res->usage.pids_refused = (int64_t) u->pids_max_events;
		if (u->pids_peak) /* minus bwrap's monitor, which is outside the sandbox */
			res->usage.tasks_peak = (int64_t) u->pids_peak - 1;
	}
	res->usage.cpu_ms = res->cpu_ms; /* the same figure (issue 25: they disagreed) */

	if (oc->interrupted_by) {
		res->status = AB_STATUS_INTERRUPTED;
		res->message = xasprintf("agentbox got %s and stopped the run",
					 sigabbrev_np(oc->interrupted_by)
						 ? sigabbrev_np(oc->interrupted_by)
						 : "a signal");
	} else if (oc->timed_out) {
		res->status = AB_STATUS_TIMEOUT;
		strv_push(&res->limits_hit, "timeout");
		res->message = xasprintf("wall-clock limit of %llu ms reached; the run was killed",
					 (unsigned long long) c->lp.timeout_ms);
	} else if (oc->output_limited) {
		res->status = AB_STATUS_OUTPUT_LIMIT;
		strv_push(&res->limits_hit, "output-limit");
		res->message = xasprintf("output passed --output-limit (%llu bytes per stream); "
					 "the run was stopped",
					 (unsigned long long) c->lp.output_bytes);
	} else if (oc->cpu_time_limited ||
		   (res->signal == SIGXCPU && c->lp.cpu_s != RLIM_INFINITY)) {
		/* Without a cgroup only SIGXCPU is evidence: RLIMIT_CPU is per process, and the
		 * run's summed CPU time says nothing about any one process. */
		res->status = AB_STATUS_CPU_TIME_LIMIT;
		strv_push(&res->limits_hit, "cpu-time");
		res->message = xasprintf("CPU-time limit of %llu ms reached",
					 (unsigned long long) c->lp.cpu_time_ms);
	} else if (oc->mem_limited) {
		char event[240];

		res->status = AB_STATUS_OOM;
		strv_push(&res->limits_hit, "memory");
		if (c->lp.sockguard)
			snprintf(event, sizeof(event),
				 "the cgroup's memory and the TCP and UDP socket buffers (which "
				 "cgroup v1 does not charge) came to %llu bytes against --memory "
				 "%llu, and agentbox killed the run",
				 (unsigned long long) oc->mem_over_bytes,
				 (unsigned long long) c->lp.memwatch_bytes);
		else
			snprintf(
				event, sizeof(event),
				"the watchdog measured %llu bytes against --memory %llu and killed "
				"the run",
				(unsigned long long) oc->mem_over_bytes,
				(unsigned long long) c->lp.memwatch_bytes);
		res->message = oom_message(c, oc, event);
	} else if (u && u->valid && u->oom_kills > 0) {
		char event[64];

		res->status = AB_STATUS_OOM;
		strv_push(&res->limits_hit, "memory");
		snprintf(event, sizeof(event), "%llu process(es) OOM-killed",
			 (unsigned long long) u->oom_kills);
		res->message = oom_message(c, oc, event);
	} else if (u && u->valid && u->pids_max_events > 0) {
		res->status = AB_STATUS_PIDS_LIMIT;
		strv_push(&res->limits_hit, "pids");
		res->message = xasprintf("task limit reached: %llu fork(s) refused",
					 (unsigned long long) u->pids_max_events);
	} else if (res->signal == SIGXFSZ) {
		res->status = AB_STATUS_FILE_SIZE_LIMIT;
		strv_push(&res->limits_hit, "file-size");
		res->message = xstrdup("a file write went past --file-size (SIGXFSZ)");
		res->fix = xstrdup("raise --file-size");
	} else if (oc->init_exec_failed) {
		res->status = AB_STATUS_EXEC_FAILED;
		res->message = xasprintf("the interpreter '%s' could not be started in the "
					 "sandbox: %s",
					 c->plan.interp, strerror(oc->init_errno));
	} else if (oc->script_done && WIFEXITED(ws) && WEXITSTATUS(ws) == 127 && res->err.buf &&
		   memmem(res->err.buf, res->err.len, "error while loading shared libraries", 36)) {
		/* the dynamic loader could not start the interpreter in the sandbox */
		const char *p = memmem(res->err.buf, res->err.len, "libraries: ", 11);
		size_t n = 0;

		if (p) {
			p += 11;
			while (p + n < res->err.buf + res->err.len && p[n] != ':' && p[n] != '\n' &&
			       n < 200)
				n++;
		}
		res->status = AB_STATUS_EXEC_FAILED;
		res->message =
			xasprintf("the interpreter '%s' cannot start in the sandbox: it needs "
				  "'%.*s', which is not visible there",
				  c->plan.interp, (int) n, p ? p : "?");
		res->fix = xstrdup("install the library under /usr, or mount its directory with "
				   "--ro-bind");
	} else if (oc->script_done && WIFSIGNALED(ws)) {
		res->status = AB_STATUS_SIGNALED;
	} else if (oc->script_done) {
		res->status = AB_STATUS_EXITED;
	} else {
		res->status = AB_STATUS_SETUP_ERROR;
	}
	/* The workspace full is evidence even when the script coped with ENOSPC. */
	if (c->tmpfs_mounted) {
		struct statfs sf;

		if (fstatfs(c->work_fd, &sf) == 0 && (sf.f_bfree == 0 || sf.f_ffree == 0)) {
			strv_push(&res->limits_hit, sf.f_bfree == 0 ? "disk" : "inodes");
			if (res->status == AB_STATUS_EXITED || res->status == AB_STATUS_SIGNALED) {
				res->status = AB_STATUS_DISK_LIMIT;
				free(res->message);
				res->message = xasprintf("the workspace is full (%s limit reached)",
							 sf.f_bfree == 0 ? "--disk" : "--inodes");
			}
		}
	}
	file_size_evidence(c, oc);
	truncation_evidence(c, oc);
	other_evidence(c, oc, u);
	order_limits_hit(res);
	limit_fix(c, oc);
}

int
run_exit_code(const struct ab_record *res)
{
	switch (res->status) {
	case AB_STATUS_USAGE_ERROR:
		return AB_EXIT_USAGE;
	case AB_STATUS_SETUP_ERROR:
	case AB_STATUS_DRY_RUN:
		return res->status == AB_STATUS_DRY_RUN ? 0 : AB_EXIT_SETUP;
	case AB_STATUS_TIMEOUT:
		return AB_EXIT_TIMEOUT;
	case AB_STATUS_INTERRUPTED:
		return 130;
	case AB_STATUS_EXEC_FAILED:
		return res->exit_code == AB_EXIT_NOT_FOUND ? AB_EXIT_NOT_FOUND
							   : AB_EXIT_CANNOT_EXEC;
	case AB_STATUS_EXITED:
	case AB_STATUS_SIGNALED:
	case AB_STATUS_OOM:
	case AB_STATUS_PIDS_LIMIT:
	case AB_STATUS_CPU_TIME_LIMIT:
	case AB_STATUS_DISK_LIMIT:
	case AB_STATUS_FILE_SIZE_LIMIT:
	case AB_STATUS_OUTPUT_LIMIT:
	case AB_STATUS_COUNT:
	default:
		if (res->signal > 0)
			return 128 + res->signal;
		if (res->exit_code >= 0)
			return res->exit_code;
		return AB_EXIT_SETUP;
	}
}

void
outcome_record_protections(struct run_ctx *c, const struct ab_outcome *oc)
{
	struct ab_record *r = c->res;
	const struct ab_plan *p = &c->plan;
	const char *ll_net = p->landlock_connect_port ? ", TCP bind denied, connect only to the "
							"registry proxy's port"
			     : p->landlock_net        ? ", TCP bind/connect denied"
						      : "";

	result_protect(r, "namespaces", true, "user, mount, pid, net, ipc, uts, cgroup");
	if (c->o->netproxy) {
		result_protect(r, "network", c->o->netproxy->netns_ready, "%s",
			       c->o->netproxy->detail ? c->o->netproxy->detail : "not set up");
		r->net_mode = "proxy";
	} else if (p->share_net) {
		result_protect(r, "network", false, "host network kept (agentbox prepare)");
	} else if (p->landlock_net) {
		result_protect(
			r, "network", oc && oc->init_started,
			"own network namespace, checked at start: lo only, no route out; "
			"--net-strict: no TCP bind or connect, loopback included (Landlock)");
		r->net_mode = "strict";
	} else {
		result_protect(r, "network", oc && oc->init_started,
			       "own network namespace, checked at start: lo only, no route out; "
			       "the script may use its own loopback (TCP and UDP)");
		r->net_mode = "loopback";
	}
	result_protect(r, "readonly_base", true, "/usr and generated /etc read-only; / read-only");
	if (r->hidden_files.n > 0) {
		cleanup_free char *names = strv_join(&r->hidden_files, ", ");

		result_protect(r, "writable", true,
			       "only /work (--workspace bind), /tmp and /dev/shm; hidden under an "
			       "empty read-only file: %s",
			       names);
	} else {
		result_protect(r, "writable", true, "only /work (%s), /tmp and /dev/shm",
			       c->tmpfs_mounted ? "capped tmpfs" : "--workspace bind");
	}
	result_protect(r, "new_session", true, "no controlling terminal (TIOCSTI)");
	result_protect(r, "die_with_parent", true, NULL);
	result_protect(r, "cap_drop_all", true, NULL);
	/* a Python slot's PYTHONPATH names its hook, which takes it out again (warm.h) */
	result_protect(
		r, "clearenv", true, "%zu variables",
		p->env.n - (p->warm && p->lang == AB_LANG_PYTHON && !p->spec_pythonpath ? 1 : 0));
	result_protect(r, "disable_userns", p->disable_userns,
		       p->disable_userns ? NULL
					 : (c->o->without[AB_PROT_DISABLE_USERNS]
						    ? "opted out with --without disable-userns"
						    : "bwrap lacks --disable-userns"));
	result_protect(r, "seccomp", p->seccomp, "policy %s%s",
		       filter_policy_name(c->o->seccomp_policy),
		       p->seccomp ? "" : " (opted out with --without seccomp)");
	if (p->landlock)
		result_protect(r, "landlock", oc && oc->init_started && oc->landlock_abi > 0,
			       "ABI %d%s%s", oc ? oc->landlock_abi : 0, ll_net,
			       p->landlock_scope ? ", abstract sockets and signals scoped" : "");
	else
		result_protect(r, "landlock", false, "%s",
			       c->o->without[AB_PROT_LANDLOCK] ? "opted out with --without landlock"
							       : "kernel has no Landlock");
	result_protect(r, "fresh_keyring", true, "new anonymous session keyring");
	result_protect(r, "no_host_root", !c->host.is_root || c->drop,
		       c->host.is_root ? "started as root: runs as uid %u" : "runs as uid %u",
		       (unsigned) (c->drop ? c->sb_uid : geteuid()));
	result_protect(r, "pid1_nondumpable", oc && oc->init_started, "agentbox-init is PID 1");
	if (c->host.is_root)
		result_protect(r, "caller_quotas", true,
			       "the script runs as uid %u: no quota of the caller's is shared",
			       (unsigned) c->sb_uid);
	else if (!p->seccomp)
		result_protect(
			r, "caller_quotas", false,
			"--without seccomp: the script can take keys%s out of your uid's quota",
			c->inotify_guard > 0 ? "" : " and inotify instances");
	else if (c->inotify_guard != 0)
		result_protect(
			r, "caller_quotas", true,
			"the script shares your uid: inotify %s; pending signals %llu and "
			"POSIX message queues %llu bytes (rlimits of the run's user "
			"namespace); keys refused (seccomp)",
			c->inotify_guard > 0 ? "capped at 8 instances and 8192 watches per "
					       "run (user namespace limits)"
					     : "refused (seccomp: this /proc/sys is read-only)",
			(unsigned long long) c->lp.sigpending, (unsigned long long) c->lp.msgqueue);
	else
		result_protect(r, "caller_quotas", false, "not set up (the run stopped before)");
	if (c->cg_made) {
		/* where the run was, and how agentbox had the place (doctor shows it) */
		const struct ab_cg_host *g = &c->host.cg;
		char ctl[40];

		snprintf(ctl, sizeof(ctl), "%s%s%s%s", g->memory ? " memory" : "",
			 g->pids ? " pids" : "", g->cpu ? " cpu" : "",
			 g->kind == AB_CG_V1 && g->cpuacct ? " cpuacct" : "");
		if (g->kind == AB_CG_V2)
			result_protect(r, "cgroup", true, "cgroup v2 %s/%s/%s (%s; controllers:%s)",
				       g->root, g->v2_parent, c->cg.name, g->how, ctl);
		else
			result_protect(r, "cgroup", true,
				       "cgroup v1 %s/CONTROLLER/agentbox/%s (controllers:%s)",
				       g->root, c->cg.name, ctl);
	} else {
		result_protect(r, "cgroup", false, "%s",
			       c->o->without[AB_PROT_CGROUP] ? "opted out with --without cgroup"
							     : c->host.cg.why);
	}
}
/* cgroup-usage.c: what a run used, from its cgroup's counters (cg_read_usage). */
#include <errno.h>
#include <string.h>

#include "../../util/fdutil.h"
#include "cgroup-internal.h"

/* Looks up "key value" in a flat-keyed file's text (cpu.stat, memory.events, pids.events,
 * memory.oom_control). Returns 0, -ENOENT when the key is absent, or a parse error. */
static int
kv_find(const char *text, const char *key, uint64_t *ret)
{
	size_t klen = strlen(key);

	for (const char *p = text; *p;) {
		const char *nl = strchr(p, '\n');
		size_t llen = nl ? (size_t) (nl - p) : strlen(p);

		if (llen > klen && strncmp(p, key, klen) == 0 && p[klen] == ' ')
			return cg_parse_u64(p + klen + 1, llen - klen - 1, ret);
		p += llen;
		if (*p == '\n')
			p++;
	}
	return -ENOENT;
}

static int
read_u64_at(int dirfd, const char *file, uint64_t *ret)
{
	char buf[64];
	ssize_t n = read_small_file_at(dirfd, file, buf, sizeof(buf));

	if (n < 0)
		return (int) n;
	return cg_parse_u64(buf, (size_t) n, ret);
}

static int
read_kv_at(int dirfd, const char *file, const char *key, uint64_t *ret)
{
	char buf[4096];
	ssize_t n = read_small_file_at(dirfd, file, buf, sizeof(buf));

	if (n < 0)
		return (int) n;
	return kv_find(buf, key, ret);
}

int
cg_read_usage(struct ab_cg *cg, struct ab_cg_usage *ret)
{
	struct ab_cg_usage u = { 0 };
	bool any = false;
	uint64_t ns;
	char buf[4096];
	int d;

	memset(ret, 0, sizeof(*ret));
	if (!cg || cg->name[0] == '\0')
		return -EBADF;
	if (cg->kind == AB_CG_V2) {
		d = cg->dirfd[0];
		if (d < 0)
			return -EBADF;
		any |= read_u64_at(d, "memory.peak", &u.memory_peak_bytes) == 0;
		if (read_small_file_at(d, "memory.events", buf, sizeof(buf)) >= 0) {
			any |= kv_find(buf, "oom_kill", &u.oom_kills) == 0;
			any |= kv_find(buf, "max", &u.memory_max_events) == 0;
		}
		any |= read_kv_at(d, "pids.events", "max", &u.pids_max_events) == 0;
		any |= read_u64_at(d, "pids.peak", &u.pids_peak) == 0;
		if (read_small_file_at(d, "cpu.stat", buf, sizeof(buf)) >= 0) {
			any |= kv_find(buf, "usage_usec", &u.cpu_usec) == 0;
			any |= kv_find(buf, "throttled_usec", &u.cpu_throttled_usec) == 0;
		}
	} else {
		d = cg->dirfd[CG_MEMORY];
		if (d >= 0) {
			any |= read_u64_at(d, "memory.max_usage_in_bytes", &u.memory_peak_bytes) ==
			       0;
			any |= read_kv_at(d, "memory.oom_control", "oom_kill", &u.oom_kills) == 0;
			/* With memsw == limit the memsw counter is charged first and fails
			 * first, so its failcnt holds the hits: take the larger one. */
			any |= read_u64_at(d, "memory.failcnt", &u.memory_max_events) == 0;
			if (read_u64_at(d, "memory.memsw.failcnt", &ns) == 0 &&
			    ns > u.memory_max_events) {
				u.memory_max_events = ns;
				any = true;
			}
		}
		d = cg->dirfd[CG_PIDS];
		if (d >= 0) {
			any |= read_kv_at(d, "pids.events", "max", &u.pids_max_events) == 0;
			any |= read_u64_at(d, "pids.peak", &u.pids_peak) == 0;
		}
		d = cg->dirfd[CG_CPUACCT];
		if (d >= 0 && read_u64_at(d, "cpuacct.usage", &ns) == 0) {
			u.cpu_usec = ns / 1000;
			any = true;
		}
		d = cg->dirfd[CG_CPU];
		if (d >= 0 && read_kv_at(d, "cpu.stat", "throttled_time", &ns) == 0) {
			u.cpu_throttled_usec = ns / 1000;
			any = true;
		}
	}
	u.valid = any;
	*ret = u;
	return 0;
}

int
cg_reset_peaks(struct ab_cg *cg)
{
	if (!cg || cg->kind != AB_CG_V1 || cg->dirfd[CG_MEMORY] < 0)
		return -EOPNOTSUPP;
	return write_small_file_at(cg->dirfd[CG_MEMORY], "memory.max_usage_in_bytes", "0");
}

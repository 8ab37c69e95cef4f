/* slot.c: run_main as a warm slot (run.h struct ab_slot_opts, warm.h; docs/design.md "Warm
 * slots"). run.c builds the sandbox for the template spec as for any run, minus the workspace's
 * content; supervise.c waits as a slot; the functions here answer a claim (is it this slot's
 * class?), put the claimed run's files in place when it is taken, and take what the slot used
 * before the hand-over off the run's accounts afterwards. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sys/socket.h>
#include <sys/stat.h>

#include "../init/proto.h"
#include "../spec/spec.h"
#include "../util/fdutil.h"
#include "../util/macro.h"
#include "../util/xalloc.h"
#include "../warm/warm.h"
#include "run.h"
#include "runctx.h"

#define SLOT_SPEC_MAX (64u << 20) /* a claim's spec, as the supervisor's request */

/* Reads the claim's spec from its memfd (from offset 0). NULL when it is not JSON. */
static json_t *
read_spec(int fd)
{
	cleanup_free char *text = NULL;
	struct stat st;
	json_error_t je;
	size_t got = 0;

	if (fstat(fd, &st) < 0 || st.st_size <= 0 || (uint64_t) st.st_size > SLOT_SPEC_MAX)
		return NULL;
	text = xmalloc((size_t) st.st_size + 1);
	while (got < (size_t) st.st_size) {
		ssize_t n = pread(fd, text + got, (size_t) st.st_size - got, (off_t) got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return NULL;
		got += (size_t) n;
	}
	return json_loadb(text, got, JSON_REJECT_DUPLICATES, &je);
}

/* Modules the interpreter imported from sys.path before the hand-over whatever the
 * pre-imports: Python's site imports these (and the encodings package) at start. */
static const char *const py_start_modules[] = { "sitecustomize", "usercustomize", "encodings" };

/* name is module m's file or directory (m, m.py, m.cpython-311-x86_64-linux-gnu.so, m.js,
 * m/) for one of the top-level names of modules (a scoped Node package: its scope) */
static bool
names_module(const char *name, const struct strv *modules)
{
	STRV_FOREACH (m, modules) {
		size_t l = strcspn(*m, "./");

		if (strncmp(name, *m, l) == 0 && (name[l] == '\0' || name[l] == '.'))
			return true;
	}
	return false;
}

/* Would the run's inputs put, in a directory of the search path the spec's environment sets
 * (PYTHONPATH, NODE_PATH) under /work, an entry a cold interpreter would import at its start
 * or instead of a pre-imported module? Such a directory is empty when the slot's interpreter
 * starts and holds the inputs only from the hand-over. Returns the entry's name (static
 * buffer) or NULL. */
static const char *
search_path_shadow(const struct ab_run_opts *o, const struct strv *modules)
{
	static char hit[256];
	const char *var = o->lang == AB_LANG_NODE ? "NODE_PATH=" : "PYTHONPATH=";
	struct strv names = { 0 };
	const char *value = NULL;
	const char *found = NULL;

	STRV_FOREACH (kv, &o->env)
		if (strncmp(*kv, var, strlen(var)) == 0)
			value = *kv + strlen(var);
	if (!value || !strstr(value, "/work"))
		return NULL;
	STRV_FOREACH (m, modules)
		strv_push(&names, *m);
	if (o->lang == AB_LANG_PYTHON)
		for (size_t i = 0; i < ARRAY_SIZE(py_start_modules); i++)
			strv_push(&names, py_start_modules[i]);
	if (names.n == 0)
		return NULL;
	for (const char *p = value; p && *p && !found;
	     p = strchr(p, ':') ? strchr(p, ':') + 1 : NULL) {
		size_t len = strcspn(p, ":");
		cleanup_free char *entry = xstrndup(p, len);
		const char *rel;

		if (strcmp(entry, "/work") == 0 || strcmp(entry, "/work/") == 0) {
			rel = "";
		} else if (strncmp(entry, "/work/", 6) == 0) {
			rel = entry + 6;
		} else {
			continue;
		}
		STRV_FOREACH (in, &o->inputs) {
			const char *slash = strrchr(*in, '/');
			const char *base = slash ? slash + 1 : *in;
			size_t first = strcspn(rel, "/");
			cleanup_free char *dir = NULL;
			DIR *d;
			struct dirent *de;

			if (!*rel) { /* the input itself lands in the directory */
				if (names_module(base, &names)) {
					snprintf(hit, sizeof(hit), "%s", base);
					found = hit;
				}
				continue;
			}
			if (strlen(base) != first || strncmp(base, rel, first) != 0)
				continue;
			/* the input is (an ancestor of) the directory: look inside it */
			dir = rel[first] ? xasprintf("%s/%s", *in, rel + first + 1) : xstrdup(*in);
			d = opendir(dir);
			while (d && !found && (de = readdir(d)))
				if (de->d_name[0] != '.' && names_module(de->d_name, &names)) {
					snprintf(hit, sizeof(hit), "%.100s/%.100s", rel,
						 de->d_name);
					found = hit;
				}
			if (d)
				closedir(d);
			if (found)
				break;
		}
	}
	strv_done(&names);
	return found;
}

/* warm->claim: fds are the spec's memfd, then the run's stdout and stderr relay targets. */
static int
slot_claim(void *p, const json_t *msg, int *fds, size_t nfds, char *why, size_t size)
{
	struct run_ctx *c = p;
	struct ab_slot_opts *so = c->o->slot;
	struct ab_run_opts *o2 = NULL;
	struct ab_err e = { 0 };
	json_t *spec = NULL;
	cleanup_free char *key = NULL;
	const char *no = NULL;
	int r = 1;

	(void) msg;
	if (nfds < 3) {
		snprintf(why, size, "the claim carries no spec and relay fds");
		goto out;
	}
	spec = read_spec(fds[0]);
	o2 = xcalloc(1, sizeof(*o2));
	run_opts_init(o2);
	if (!spec || spec_parse(spec, o2, &e) < 0) {
		snprintf(why, size, "the claim's spec: %s", spec ? e.msg : "not JSON");
		goto out;
	}
	key = warm_class_key(spec);
	no = warm_refusal(o2);
	if (!no && (!key || strcmp(key, so->class_key) != 0))
		no = "the spec is not of this slot's class";
	if (no) {
		snprintf(why, size, "%s", no);
		goto out;
	}
	/* a workspace entry a cold interpreter would import or read at its start */
	STRV_FOREACH (in, &o2->inputs) {
		const char *slash = strrchr(*in, '/');
		const char *base = slash ? slash + 1 : *in;

		if (warm_name_shadows(o2->lang, base, &c->warm.modules)) {
			snprintf(why, size,
				 "the input '%s' would shadow a pre-imported module or change the "
				 "interpreter's start",
				 base);
			goto out;
		}
	}
	{
		const char *shadow = search_path_shadow(o2, &c->warm.modules);

		if (shadow) {
			snprintf(
				why, size,
				"the input '%s' on the spec's search path would be imported at the "
				"interpreter's start or shadow a pre-imported module",
				shadow);
			goto out;
		}
	}
	/* taken: the run's relay targets become our stdout and stderr, as a cold run's are */
	if (dup2(fds[1], STDOUT_FILENO) < 0 || dup2(fds[2], STDERR_FILENO) < 0) {
		r = -errno;
		snprintf(why, size, "take the relay fds: %s", strerror(errno));
		goto out;
	}
	so->claimed = steal_ptr(&o2);
	r = 0;
out:
	for (size_t i = 0; i < nfds; i++)
		(void) close(fds[i]);
	json_decref(spec);
	if (o2) {
		run_opts_done(o2);
		free(o2);
	}
	return r;
}

/* warm->prepare: from here the slot is the claimed run. */
static int
slot_prepare(void *p, struct ab_spawn *sp, char **ret_go, size_t *ret_len, struct ab_err *err)
{
	struct run_ctx *c = p;
	struct ab_run_opts *o = c->o->slot->claimed;
	struct ab_record *res = c->res;
	struct strv go = { 0 };
	struct timespec ts;
	int r;

	o->slot = c->o->slot;
	c->o = o;
	res->opts = o;
	res->warm = true;
	clock_gettime(CLOCK_REALTIME, &ts);
	res->started_unix_ms = ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
	/* the code, the inputs and --collect, as a cold run takes them (run.c) */
	if (c->script_fd >= 0)
		(void) close(c->script_fd);
	c->script_fd = -1;
	r = ws_open_script(c, err);
	if (r < 0)
		return r;
	if (o->collect_dir) {
		r = ws_open_collect(c, err);
		if (r < 0)
			return r;
	}
	r = ws_copy_inputs(c, err);
	if (r < 0)
		return r;
	r = ws_snapshot_workspace(c, err);
	if (r < 0)
		return r;
	/* what a file changed from now on is compared with (slot_fsize_recheck) */
	clock_gettime(CLOCK_REALTIME_COARSE, &c->handover_rt);
	limits_plan_run(o, &c->lp, res);
	sp->relay = !o->quiet;
	sp->relay_to_stderr = o->relay_to_stderr;
	sp->sanitize_out = isatty(STDOUT_FILENO);
	sp->sanitize_err = isatty(STDERR_FILENO);
	sp->inline_bytes = (size_t) o->inline_output;
	sp->output_truncate = o->output_truncate;
	sp->progress = o->progress;
	/* the run's accounts start now: what the slot used so far is not the run's */
	if (c->cg_made && cg_read_usage(&c->cg, &c->cg_base) == 0 && c->cg_base.valid) {
		sp->cg_cpu_base_usec = c->cg_base.cpu_usec;
		(void) cg_reset_peaks(&c->cg);
	}
	strv_push(&go, "go");
	STRV_FOREACH (a, &o->script_args)
		strv_push(&go, *a);
	*ret_go = warm_msg_pack((const char *const *) go.v, go.n, ret_len);
	strv_done(&go);
	return 0;
}

int
slot_start(struct run_ctx *c, struct ab_spawn *sp, struct ab_err *err)
{
	struct ab_slot_opts *so = c->o->slot;
	struct strv cfg = { 0 };
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return ab_err_set(err, -errno, "socketpair: %s", strerror(errno));
	c->warm.ctl_fd = so->ctl_fd;
	c->warm.hook_fd = sv[0];
	c->warm.hook_peer = sv[1];
	c->warm.ready_timeout_ms = so->ready_timeout_ms > 0 ? so->ready_timeout_ms : 120000;
	c->warm.claim = slot_claim;
	c->warm.prepare = slot_prepare;
	c->warm.ctx = c;
	/* config, PYTHONPATH as the spec set it (the hook restores it), the pre-imports */
	strv_push(&cfg, "config");
	strv_push(&cfg, c->plan.spec_pythonpath ? "1" : "0");
	strv_push(&cfg, c->plan.spec_pythonpath ? c->plan.spec_pythonpath : "");
	STRV_FOREACH (m, &so->preimport)
		strv_push(&cfg, *m);
	c->warm_config = warm_msg_pack((const char *const *) cfg.v, cfg.n, &c->warm_config_len);
	strv_done(&cfg);
	c->warm.config = c->warm_config;
	c->warm.config_len = c->warm_config_len;
	sp->warm = &c->warm;
	return 0;
}

void
slot_done(struct run_ctx *c)
{
	if (c->warm.hook_fd >= 0)
		(void) close(c->warm.hook_fd);
	if (c->warm.hook_peer >= 0)
		(void) close(c->warm.hook_peer);
	c->warm.hook_fd = c->warm.hook_peer = -1;
	strv_done(&c->warm.modules);
	free(c->warm_config);
	c->warm_config = NULL;
}

/* Regular files under dirfd of at least limit bytes, changed at or after since, that were not
 * in the workspace at the hand-over as they are now (pre: same inode and ctime). Bounded like
 * agentbox-init's scan: *budget entries, 16 levels. */
static bool
big_changed(int dirfd, uint64_t limit, const struct timespec *since, const struct ab_manifest *pre,
	    long *budget, int depth)
{
	DIR *d;
	struct dirent *de;
	bool hit = false;
	int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0 || !(d = fdopendir(fd))) {
		if (fd >= 0)
			(void) close(fd);
		return false;
	}
	while (!hit && --*budget >= 0 && (de = readdir(d))) {
		struct stat st;

		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
		    fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (S_ISDIR(st.st_mode) && depth < 16) {
			int sub = openat(dirfd, de->d_name,
					 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

			if (sub >= 0) {
				hit = big_changed(sub, limit, since, pre, budget, depth + 1);
				(void) close(sub);
			}
			continue;
		}
		if (!S_ISREG(st.st_mode) || (uint64_t) st.st_size < limit ||
		    st.st_mtim.tv_sec < since->tv_sec ||
		    (st.st_mtim.tv_sec == since->tv_sec && st.st_mtim.tv_nsec < since->tv_nsec))
			continue;
		hit = true;
		for (size_t i = 0; pre && i < pre->n && hit; i++)
			if (pre->entries[i].ino == (uint64_t) st.st_ino &&
			    pre->entries[i].ctime.tv_sec == st.st_ctim.tv_sec &&
			    pre->entries[i].ctime.tv_nsec == st.st_ctim.tv_nsec)
				hit = false;
	}
	closedir(d);
	return hit;
}

void
slot_settle(struct run_ctx *c, struct ab_outcome *oc, struct ab_cg_usage *u)
{
	/* agentbox-init compared the workspace's files with when it started the interpreter,
	 * before the inputs were copied in: judge /work again from the hand-over */
	if (oc->fsize_hit & AB_FSIZE_WORK) {
		long budget = 32768;

		if (!big_changed(c->work_fd, c->lp.fsize, &c->handover_rt,
				 c->have_pre ? &c->pre : NULL, &budget, 0))
			oc->fsize_hit &= ~AB_FSIZE_WORK;
	}
	if (u && u->valid && c->cg_base.valid) {
		u->cpu_usec -=
			u->cpu_usec >= c->cg_base.cpu_usec ? c->cg_base.cpu_usec : u->cpu_usec;
		u->oom_kills -= u->oom_kills >= c->cg_base.oom_kills ? c->cg_base.oom_kills : 0;
		u->pids_max_events -= u->pids_max_events >= c->cg_base.pids_max_events
					      ? c->cg_base.pids_max_events
					      : 0;
		u->memory_max_events -= u->memory_max_events >= c->cg_base.memory_max_events
						? c->cg_base.memory_max_events
						: 0;
	}
}

void
slot_settle_cpu(struct run_ctx *c)
{
	int64_t base = (int64_t) (c->warm.base_cpu_ns / 1000000);

	/* the cgroup's count starts at the hand-over already (slot_settle) */
	if (!c->res->cpu_from_cgroup)
		c->res->cpu_ms = c->res->cpu_ms > base ? c->res->cpu_ms - base : 0;
	c->res->usage.cpu_ms = c->res->cpu_ms;
}

/* test-cgroup.c: the per-run cgroup backend (src/cgroup*.c), TAP.
 *
 * Part 1 runs anywhere: fake cgroupfs trees (plain directories and files in a temp dir) for
 * v2 and v1. Plain directories get no interface files on mkdir and refuse rmdir while files
 * are inside, so the module's test hooks populate and empty them (fake_after_mkdir,
 * fake_before_rmdir); both refuse to touch a real cgroupfs.
 * Part 2 runs as root against this host's real cgroups (v1 or v2), under alarm(60): a fork
 * bomb stopped by pids.max, a memory hog OOM-killed by the memory limit, a CPU spinner
 * throttled by the CPU quota, the stale sweep, and (on a hybrid host) cgroup.kill on the
 * controller-less cgroup2 mount. Not root: "ok N # SKIP not root". */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <linux/magic.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <sys/xattr.h>

#include "src/spec/cfg.h"
#include "src/spec/options.h"
#include "src/spec/record.h"
#include "src/supervisor/cgroup/cgroup.h"
#include "src/supervisor/limitplan.h"
#include "src/supervisor/supervise.h"
#include "src/util/fdutil.h"
#include "src/util/macro.h"
#include "src/util/proc.h"
#include "src/util/xalloc.h"
#include "tests/tap.h"

#define MiB           (1024ull * 1024ull)
#define REAL_GROUPS   7 /* TAP lines printed as skips when the real part cannot run */
#define REAL_CG_ROOT  "/sys/fs/cgroup"
#define REAL_UNIFIED  REAL_CG_ROOT "/unified"
#define PY_MEMORY_HOG "b = b'\\x01' * (200 << 20)"

/* AGENTBOX_CGROUP as the supervisor would have it: agentbox reads its environment once
 * (cfg.h), so the cases change the setting itself. */
static void
set_cgroup_cfg(const char *v)
{
	struct ab_cfg c;

	cfg_copy(&c, cfg());
	free(c.cgroup);
	c.cgroup = v ? xstrdup(v) : NULL;
	cfg_set(&c);
	cfg_done(&c);
}

static char tmp[256]; /* the temp dir holding every fake tree */

static void fmt_into(char *buf, size_t size, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void
fmt_into(char *buf, size_t size, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, size, fmt, ap);
	va_end(ap);
}

/* A local string buffer, for paths that must outlive P()'s ring. */
#define STRP(var, ...)  \
	char var[1200]; \
	fmt_into(var, sizeof(var), __VA_ARGS__)

/* ---- small file helpers (test only) ---- */

/* printf into one of 16 rotating buffers: short-lived paths. */
static const char *P(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static const char *
P(const char *fmt, ...)
{
	static char ring[16][1200];
	static int next;
	char *b = ring[next++ % 16];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(b, sizeof(ring[0]), fmt, ap);
	va_end(ap);
	return b;
}

/* Every fake-tree write goes through here or mkdir_p: refuse anything outside tmp. */
static bool
under_tmp(const char *path)
{
	size_t n = strlen(tmp);

	if (n > 0 && strncmp(path, tmp, n) == 0 && path[n] == '/' && !strstr(path, "/../"))
		return true;
	printf("# refusing to write outside the temp dir: '%s'\n", path);
	return false;
}

static void
put(const char *path, const char *content)
{
	int fd;

	if (!under_tmp(path))
		return;
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		printf("# cannot create %s: %s\n", path, strerror(errno));
		return;
	}
	if (write_all(fd, content, strlen(content)) < 0)
		printf("# cannot write %s\n", path);
	(void) close(fd);
}

/* File content without trailing newlines, or "(missing)". */
static const char *
get(const char *path)
{
	static char ring[8][4096];
	static int next;
	char *b = ring[next++ % 8];

	if (read_small_file_at(AT_FDCWD, path, b, sizeof(ring[0])) < 0)
		snprintf(b, sizeof(ring[0]), "(missing)");
	return b;
}

static bool
exists(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0;
}

static void
rm_file(const char *path)
{
	if (under_tmp(path))
		(void) unlink(path);
}

static void
mkdir_p(const char *path)
{
	char buf[1200];

	if (!under_tmp(path))
		return;
	snprintf(buf, sizeof(buf), "%s", path);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		(void) mkdir(buf, 0755);
		*p = '/';
	}
	(void) mkdir(buf, 0755);
}

static bool
is_real_cgroupfs(int fd)
{
	struct statfs sf;

	return fstatfs(fd, &sf) < 0 || sf.f_type == CGROUP_SUPER_MAGIC ||
	       sf.f_type == CGROUP2_SUPER_MAGIC;
}

/* Removes a tree under tmp (never anything else). */
static void
rm_rf_at(int dfd, const char *name)
{
	int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d;
	struct dirent *de;

	if (fd < 0) {
		(void) unlinkat(dfd, name, 0);
		return;
	}
	if (is_real_cgroupfs(fd) || !(d = fdopendir(fd))) {
		(void) close(fd);
		return;
	}
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
			rm_rf_at(dirfd(d), de->d_name);
	(void) closedir(d);
	(void) unlinkat(dfd, name, AT_REMOVEDIR);
}

/* ---- the fake cgroupfs and its hooks ---- */

static const char *fake_skip_file;          /* after_mkdir leaves this file out (failure tests) */
static bool fake_fix_subtree_on_supervisor; /* see test_v2_own_self_move */

/* Plays the kernel on mkdir: the child gets the parent's regular files, empty, except
 * cgroup.controllers, whose content is copied. */
static void
fake_after_mkdir(int parent, const char *name)
{
	int cfd, pfd;
	DIR *d;
	struct dirent *de;

	if (is_real_cgroupfs(parent))
		return;
	if (fake_fix_subtree_on_supervisor && strcmp(name, "agentbox-supervisor") == 0) {
		/* the parent held processes; now that we stepped aside it accepts controllers */
		(void) unlinkat(parent, "cgroup.subtree_control", AT_REMOVEDIR);
		(void) close(openat(parent, "cgroup.subtree_control",
				    O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
	}
	cfd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	pfd = openat(parent, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (cfd < 0 || pfd < 0 || !(d = fdopendir(pfd))) {
		printf("# fake_after_mkdir: cannot open %s\n", name);
		return;
	}
	while ((de = readdir(d))) {
		char buf[512];
		int fd;

		if (de->d_type != DT_REG)
			continue;
		if (fake_skip_file && strcmp(de->d_name, fake_skip_file) == 0)
			continue;
		fd = openat(cfd, de->d_name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd < 0)
			continue;
		if (strcmp(de->d_name, "cgroup.controllers") == 0 &&
		    read_small_file_at(dirfd(d), de->d_name, buf, sizeof(buf)) >= 0)
			(void) !write(fd, buf, strlen(buf));
		(void) close(fd);
	}
	(void) closedir(d);
	(void) close(cfd);
}

/* Plays the kernel on rmdir: drops the interface files. */
static void
fake_before_rmdir(int parent, const char *name)
{
	int cfd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d;
	struct dirent *de;

	if (cfd < 0)
		return;
	if (is_real_cgroupfs(cfd) || !(d = fdopendir(cfd))) {
		(void) close(cfd);
		return;
	}
	while ((de = readdir(d)))
		if (de->d_type == DT_REG)
			(void) unlinkat(dirfd(d), de->d_name, 0);
	(void) closedir(d);
}

static void
hooks_on(void)
{
	cg_test_after_mkdir = fake_after_mkdir;
	cg_test_before_rmdir = fake_before_rmdir;
}

static void
hooks_off(void)
{
	cg_test_after_mkdir = NULL;
	cg_test_before_rmdir = NULL;
}

/* One fake v2 cgroup directory with every interface file the module touches. */
static void
fake_v2_cgroup(const char *path, const char *controllers, const char *procs)
{
	static const char *const files[] = {
		"cgroup.subtree_control",
		"cgroup.kill",
		"cgroup.freeze",
		"memory.max",
		"memory.swap.max",
		"memory.oom.group",
		"memory.peak",
		"memory.events",
		"pids.max",
		"pids.peak",
		"pids.events",
		"cpu.max",
		"cpu.stat",
	};

	STRP(dir, "%s", path); /* path may live in P()'s ring, which the puts below reuse */

	mkdir_p(dir);
	put(P("%s/cgroup.controllers", dir), controllers);
	put(P("%s/cgroup.procs", dir), procs);
	put(P("%s/cgroup.events", dir), "populated 0\nfrozen 0\n");
	for (size_t i = 0; i < ARRAY_SIZE(files); i++)
		put(P("%s/%s", dir, files[i]), "");
}

/* Fake v2 cgroups at root and at every level of rel ("a/b/c"). */
static void
fake_v2_path(const char *root, const char *rel, const char *controllers)
{
	char buf[1024];

	fake_v2_cgroup(root, "cpuset cpu io memory hugetlb pids rdma misc", "");
	snprintf(buf, sizeof(buf), "%s", rel);
	for (char *p = buf;; p++) {
		if (*p == '/' || *p == '\0') {
			char c = *p;

			*p = '\0';
			fake_v2_cgroup(P("%s/%s", root, buf), controllers, "");
			if (c == '\0')
				break;
			*p = c;
		}
	}
}

static void
fake_v1_tree(const char *root, bool memsw)
{
	static const char *const mem[] = { "memory.limit_in_bytes", "memory.swappiness",
					   "memory.max_usage_in_bytes", "memory.oom_control",
					   "memory.failcnt" };

	mkdir_p(P("%s/unified", root));
	put(P("%s/unified/cgroup.controllers", root), "");
	for (int i = 0; i < 4; i++) {
		const char *c = (const char *[]){ "memory", "pids", "cpu", "cpuacct" }[i];

		mkdir_p(P("%s/%s", root, c));
		put(P("%s/%s/cgroup.procs", root, c), "");
		put(P("%s/%s/tasks", root, c), "");
	}
	for (size_t i = 0; i < ARRAY_SIZE(mem); i++)
		put(P("%s/memory/%s", root, mem[i]), "");
	if (memsw)
		put(P("%s/memory/memory.memsw.limit_in_bytes", root), "");
	put(P("%s/pids/pids.max", root), "");
	put(P("%s/pids/pids.events", root), "");
	put(P("%s/pids/pids.peak", root), "");
	put(P("%s/cpu/cpu.cfs_period_us", root), "");
	put(P("%s/cpu/cpu.cfs_quota_us", root), "");
	put(P("%s/cpu/cpu.stat", root), "");
	put(P("%s/cpuacct/cpuacct.usage", root), "");
}

static uint64_t
own_starttime(void)
{
	char buf[2048];
	const char *p;
	unsigned long long v = 0;

	if (read_small_file_at(AT_FDCWD, "/proc/self/stat", buf, sizeof(buf)) < 0)
		return 0;
	p = strrchr(buf, ')');
	/* fields 3..21 skipped, 22 read */
	if (!p || sscanf(p + 1,
			 " %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s "
			 "%*s %llu",
			 &v) != 1)
		return 0;
	return v;
}

static long
pid_max(void)
{
	const char *s = get("/proc/sys/kernel/pid_max");
	long v = strtol(s, NULL, 10);

	return v > 0 ? v : 4194304;
}

static bool
contains(const char *hay, const char *needle)
{
	return hay && strstr(hay, needle) != NULL;
}

/* ---- a faithful fake cgroup2 (issue 18): the kernel's rules, as far as the module meets
 * them. cgroup.subtree_control is a set that only grows, "+x" is refused unless x is in the
 * cgroup's cgroup.controllers (ENOENT) or while a non-root cgroup holds processes (EBUSY, the
 * no-internal-process rule); a new cgroup's cgroup.controllers is its parent's
 * subtree_control, and it gets the interface files of exactly those controllers (memory.*,
 * pids.*, cpu.max; cpu.stat, cgroup.kill, cgroup.freeze, cgroup.events always); moving into a
 * new agentbox-supervisor leaf empties the parent's cgroup.procs. ---- */

static const char *faithful_refuse; /* "+x" refused with EBUSY (a busy controller), or NULL */
static const char *faithful_root;   /* the fake's root directory (no rule for it) */

static bool
word_listed(const char *list, const char *w)
{
	size_t n = strlen(w);

	for (const char *p = list; p && (p = strstr(p, w)); p += n)
		if ((p == list || p[-1] == ' ' || p[-1] == '\n') &&
		    (p[n] == '\0' || p[n] == ' ' || p[n] == '\n'))
			return true;
	return false;
}

static int
faithful_subtree_write(int dfd, const char *value)
{
	static const char *const order[] = { "cpuset", "cpu", "io", "memory", "hugetlb", "pids" };
	char offered[256] = "", cur[256] = "", procs[256] = "", out[256] = "";
	const char *c = value + 1;
	struct stat st, rst;

	if (value[0] != '+')
		return -EINVAL;
	(void) read_small_file_at(dfd, "cgroup.controllers", offered, sizeof(offered));
	(void) read_small_file_at(dfd, "cgroup.subtree_control", cur, sizeof(cur));
	(void) read_small_file_at(dfd, "cgroup.procs", procs, sizeof(procs));
	if (!word_listed(offered, c))
		return -ENOENT;
	if (faithful_refuse && strcmp(faithful_refuse, value) == 0)
		return -EBUSY;
	if (fstat(dfd, &st) == 0 && stat(faithful_root, &rst) == 0 && st.st_ino != rst.st_ino &&
	    procs[0])
		return -EBUSY; /* no internal processes */
	for (size_t i = 0; i < ARRAY_SIZE(order); i++)
		if (strcmp(order[i], c) == 0 || word_listed(cur, order[i]))
			snprintf(out + strlen(out), sizeof(out) - strlen(out), "%s%s",
				 out[0] ? " " : "", order[i]);
	{
		int fd = openat(dfd, "cgroup.subtree_control", O_WRONLY | O_TRUNC | O_CLOEXEC);

		if (fd < 0)
			return -errno;
		(void) !write(fd, out, strlen(out));
		(void) close(fd);
	}
	return 0;
}

static void
faithful_files(const char *dir, const char *controllers)
{
	put(P("%s/cgroup.controllers", dir), controllers);
	put(P("%s/cgroup.subtree_control", dir), "");
	put(P("%s/cgroup.procs", dir), "");
	put(P("%s/cgroup.events", dir), "populated 0\nfrozen 0\n");
	put(P("%s/cgroup.kill", dir), "");
	put(P("%s/cgroup.freeze", dir), "");
	put(P("%s/cpu.stat", dir), "usage_usec 0\n");
	/* written files start empty: the module writes without O_TRUNC, as the kernel wants,
	 * and a plain file would keep the tail of a longer old value */
	if (word_listed(controllers, "memory")) {
		put(P("%s/memory.max", dir), "");
		put(P("%s/memory.swap.max", dir), "");
		put(P("%s/memory.oom.group", dir), "");
		put(P("%s/memory.peak", dir), "0\n");
		put(P("%s/memory.events", dir), "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n");
	}
	if (word_listed(controllers, "pids")) {
		put(P("%s/pids.max", dir), "");
		put(P("%s/pids.peak", dir), "0\n");
		put(P("%s/pids.events", dir), "max 0\n");
	}
	if (word_listed(controllers, "cpu"))
		put(P("%s/cpu.max", dir), "");
}

static void
faithful_after_mkdir(int parent, const char *name)
{
	char sub[256] = "", path[PATH_MAX], self[PATH_MAX];
	ssize_t n;

	if (is_real_cgroupfs(parent))
		return;
	(void) read_small_file_at(parent, "cgroup.subtree_control", sub, sizeof(sub));
	snprintf(self, sizeof(self), "/proc/self/fd/%d", parent);
	n = readlink(self, path, sizeof(path) - 1);
	if (n <= 0)
		return;
	path[n] = '\0';
	STRP(dir, "%s/%s", path, name);
	faithful_files(dir, sub);
	if (strcmp(name, "agentbox-supervisor") == 0)
		put(P("%s/cgroup.procs", path), ""); /* we move there next */
}

/* A systemd-like tree: root offers everything, every level down to rel enables
 * subtree (systemd's Delegate= enables the delegated ones), rel itself is the leaf. */
static void
faithful_tree(const char *root, const char *rel, const char *subtree)
{
	char buf[1024], dir[1200];

	mkdir_p(root);
	faithful_files(root, "cpuset cpu io memory hugetlb pids");
	put(P("%s/cgroup.subtree_control", root), subtree);
	snprintf(buf, sizeof(buf), "%s", rel);
	for (char *p = buf;; p++) {
		if (*p == '/' || *p == '\0') {
			char c = *p;

			*p = '\0';
			fmt_into(dir, sizeof(dir), "%s/%s", root, buf);
			mkdir_p(dir);
			faithful_files(dir, subtree);
			if (c != '\0')
				put(P("%s/cgroup.subtree_control", dir), subtree);
			else
				break;
			*p = c;
		}
	}
}

/* `systemd-run --user --scope -p Delegate=yes agentbox ...` on a cgroup v2 host: the scope
 * holds only agentbox, its controllers are delegated; and the ways a host falls short. */
static void
test_v2_faithful(void)
{
	STRP(root, "%s/v2f", tmp);
	STRP(psc, "%s/psc-faithful", tmp);
	const char *scope = "user.slice/user-1000.slice/user@1000.service/app.slice/run-u7.scope";
	char sd[1300], self[32];
	struct ab_cg_limits l = {
		.memory_bytes = 64 * MiB, .pids = 16, .cpu_quota_us = 50000, .cpu_period_us = 100000
	};
	struct ab_cg_host h;
	struct ab_cg cg;
	struct ab_cg_usage u;
	struct ab_err err = { 0 };
	int r;

	snprintf(self, sizeof(self), "%d\n", (int) getpid());
	cg_test_after_mkdir = faithful_after_mkdir;
	cg_test_subtree_write = faithful_subtree_write;
	faithful_root = root;
	set_cgroup_cfg(NULL);

	faithful_tree(root, scope, "cpu memory pids");
	fmt_into(sd, sizeof(sd), "%s/%s", root, scope);
	put(P("%s/cgroup.procs", sd), self);
	put(psc, P("0::/%s\n", scope));
	r = cg_probe(root, psc, &h);
	TAP_OK(r == 0 && h.kind == AB_CG_V2 && h.memory && h.pids && h.cpu && h.swap && h.kill_file,
	       "faithful v2: a delegated scope holding only us gives every controller ('%s')",
	       h.why);
	TAP_STREQ(get(P("%s/agentbox-supervisor/cgroup.procs", sd)), "0",
		  "faithful v2: we stepped aside into agentbox-supervisor first");
	TAP_STREQ(get(P("%s/cgroup.subtree_control", sd)), "cpu memory pids",
		  "faithful v2: then the scope's subtree_control got all three (a set, in order)");
	TAP_STREQ(h.v2_parent, scope, "faithful v2: runs go in the scope, beside our leaf");
	cg_init(&cg);
	r = cg_create(&h, "run-1-2-faithful", &l, &cg, &err);
	TAP_OK(r == 0, "faithful v2: cg_create (%s)", err.msg);
	STRP(run, "%s/run-1-2-faithful", sd);
	TAP_OK(strcmp(get(P("%s/memory.max", run)), "67108864") == 0 &&
		       strcmp(get(P("%s/memory.swap.max", run)), "0") == 0 &&
		       strcmp(get(P("%s/pids.max", run)), "16") == 0 &&
		       strcmp(get(P("%s/cpu.max", run)), "50000 100000") == 0,
	       "faithful v2: the run's memory.max, memory.swap.max, pids.max, cpu.max");
	/* what the kernel reports after a run that hit both limits */
	put(P("%s/memory.events", run), "low 0\nhigh 0\nmax 9\noom 3\noom_kill 2\n");
	put(P("%s/pids.events", run), "max 41\n");
	put(P("%s/memory.peak", run), "67100000\n");
	r = cg_read_usage(&cg, &u);
	TAP_OK(r == 0 && u.valid && u.oom_kills == 2 && u.memory_max_events == 9 &&
		       u.pids_max_events == 41 && u.memory_peak_bytes == 67100000,
	       "faithful v2: memory.events oom_kill, pids.events max, memory.peak read");
	TAP_OK(cg_kill(&cg) == 0 && strcmp(get(P("%s/cgroup.kill", run)), "1") == 0,
	       "faithful v2: cg_kill writes cgroup.kill");
	put(P("%s/cgroup.kill", run), "");
	TAP_OK(cg_destroy(&cg) == 0 && !exists(run), "faithful v2: the run cgroup is removed");

	/* the kernel refuses one controller (cpu: a realtime task in the subtree): the others
	 * still come through, and the run is made without it */
	faithful_tree(root, "user.slice/rt.scope", "cpu memory pids");
	fmt_into(sd, sizeof(sd), "%s/user.slice/rt.scope", root);
	put(P("%s/cgroup.procs", sd), self);
	put(psc, "0::/user.slice/rt.scope\n");
	faithful_refuse = "+cpu";
	r = cg_probe(root, psc, &h);
	faithful_refuse = NULL;
	TAP_OK(r == 0 && h.kind == AB_CG_V2 && h.memory && h.pids && !h.cpu &&
		       contains(h.why, "cpu"),
	       "faithful v2: one refused controller does not cost the others ('%s')", h.why);
	TAP_STREQ(get(P("%s/cgroup.subtree_control", sd)), "memory pids",
		  "faithful v2: ... memory and pids enabled");
	r = cg_create(&h, "run-1-2-nocpu", &(struct ab_cg_limits){ .memory_bytes = MiB, .pids = 4 },
		      &cg, &err);
	TAP_OK(r == 0 && !exists(P("%s/run-1-2-nocpu/cpu.max", sd)),
	       "faithful v2: the run cgroup has no cpu interface without the controller");
	(void) cg_destroy(&cg);

	/* only memory delegated: pids is not offered to the scope */
	faithful_tree(root, "user.slice/mem.scope", "memory");
	fmt_into(sd, sizeof(sd), "%s/user.slice/mem.scope", root);
	put(P("%s/cgroup.procs", sd), self);
	put(psc, "0::/user.slice/mem.scope\n");
	r = cg_probe(root, psc, &h);
	TAP_OK(r == 0 && h.kind == AB_CG_V2 && h.memory && !h.pids &&
		       contains(h.why, "no usable pids controller"),
	       "faithful v2: memory only delegated: memory yes, pids no, and why ('%s')", h.why);

	/* the scope shares its cgroup with another process: the no-internal-process rule
	 * refuses every controller and nothing is moved */
	faithful_tree(root, "user.slice/busy.scope", "cpu memory pids");
	fmt_into(sd, sizeof(sd), "%s/user.slice/busy.scope", root);
	put(P("%s/cgroup.procs", sd), P("1\n%s", self));
	put(psc, "0::/user.slice/busy.scope\n");
	r = cg_probe(root, psc, &h);
	TAP_OK(r == 0 && h.kind == AB_CG_NONE && contains(h.why, "holds other processes") &&
		       !exists(P("%s/agentbox-supervisor", sd)),
	       "faithful v2: a shared scope: NONE with the fix, nothing moved");

	faithful_root = NULL;
	cg_test_subtree_write = NULL;
	hooks_on(); /* the plain fake of the other cases */
}

/* ---- part 1: fake trees ---- */

static void
test_v2_probe_env(void)
{
	STRP(root, "%s/v2", tmp);
	const char *deleg = "user.slice/user-1000.slice/user@1000.service/app.slice/deleg";
	STRP(psc, "%s/psc-app", tmp);
	struct ab_cg_host h;
	int r;

	fake_v2_path(root, deleg, "memory pids");
	put(psc, "0::/user.slice/user-1000.slice/user@1000.service/app.slice/ab.scope\n");

	set_cgroup_cfg(deleg);
	r = cg_probe(root, psc, &h);
	TAP_OK(r == 0 && h.kind == AB_CG_V2, "v2 env: AGENTBOX_CGROUP (relative) gives V2");
	TAP_STREQ(h.v2_parent, deleg, "v2 env: runs go directly under AGENTBOX_CGROUP");
	TAP_OK(h.memory && h.pids && !h.cpu && h.cpuacct, "v2 env: memory+pids, no cpu");
	TAP_OK(h.swap && h.kill_file, "v2 env: memory.swap.max and cgroup.kill seen");
	TAP_OK(contains(h.why, "no usable cpu controller"),
	       "v2 env: why names the missing cpu: '%s'", h.why);
	TAP_OK(contains(get(P("%s/%s/cgroup.subtree_control", root, deleg)), "+"),
	       "v2 env: controllers enabled in its cgroup.subtree_control");

	set_cgroup_cfg(P("%s/%s", root, deleg));
	r = cg_probe(root, psc, &h);
	TAP_OK(r == 0 && h.kind == AB_CG_V2 && strcmp(h.v2_parent, deleg) == 0,
	       "v2 env: absolute path under root accepted");
	set_cgroup_cfg(P("/%s/", deleg));
	r = cg_probe(root, psc, &h);
	TAP_OK(r == 0 && h.kind == AB_CG_V2 && strcmp(h.v2_parent, deleg) == 0,
	       "v2 env: cgroup path form '/a/b/' accepted");

	set_cgroup_cfg("user.slice/../../etc");
	r = cg_probe(root, psc, &h);
	TAP_OK(r == 0 && h.kind == AB_CG_NONE && contains(h.why, "not a cgroup path"),
	       "v2 env: '..' refused: '%s'", h.why);
	set_cgroup_cfg("user.slice/nope");
	r = cg_probe(root, psc, &h);
	TAP_OK(r == 0 && h.kind == AB_CG_NONE && contains(h.why, "cannot open"),
	       "v2 env: missing cgroup gives NONE: '%s'", h.why);

	fake_v2_cgroup(P("%s/user.slice/cpuonly", root), "cpu io", "");
	set_cgroup_cfg("user.slice/cpuonly");
	r = cg_probe(root, psc, &h);
	TAP_OK(r == 0 && h.kind == AB_CG_NONE && contains(h.why, "neither the memory nor the pids"),
	       "v2 env: missing controllers give NONE: '%s'", h.why);

	/* the common ancestor of our cgroup and the target must accept the move */
	put(P("%s/psc-other", tmp), "0::/other.slice/x.scope\n");
	fake_v2_path(root, "other.slice/x.scope", "memory pids");
	rm_file(P("%s/cgroup.procs", root));
	set_cgroup_cfg(deleg);
	r = cg_probe(root, P("%s/psc-other", tmp), &h);
	TAP_OK(r == 0 && h.kind == AB_CG_NONE && contains(h.why, "processes cannot move"),
	       "v2 env: unwritable common ancestor gives NONE: '%s'", h.why);
	put(P("%s/cgroup.procs", root), "");
	set_cgroup_cfg(NULL);
}

/* Marks a fake cgroup delegated the way systemd does (issue 23): the xattr user.delegate=1
 * (or trusted.delegate=1, root only). Returns false when this filesystem has no user xattrs. */
static bool
mark_delegated(const char *dir, const char *name)
{
	return setxattr(dir, name, "1", 1, 0) == 0;
}

/* The files of a fake cgroup, to show the probe wrote nothing: subtree_control and procs. */
static char *
snapshot(const char *dir)
{
	char *out = NULL;

	if (asprintf(&out, "%s|%s|%d|%d", get(P("%s/cgroup.subtree_control", dir)),
		     get(P("%s/cgroup.procs", dir)), exists(P("%s/agentbox-supervisor", dir)),
		     exists(P("%s/agentbox", dir))) < 0)
		abort();
	return out;
}

/* Is dir as snapshot() saw it before? */
static bool
unchanged(const char *dir, const char *before)
{
	char *now = snapshot(dir);
	bool same = strcmp(now, before) == 0;

	if (!same)
		printf("#   before: %s\n#   now:    %s\n", before, now);
	free(now);
	return same;
}

static void
test_v2_probe_own(void)
{
	STRP(root, "%s/v2own", tmp);
	STRP(psc, "%s/psc-own", tmp);
	char self[32], dir[1200];
	struct ab_cg_host h;
	struct ab_cg cg;
	struct ab_err err = { 0 };
	char *before;
	int r;

	set_cgroup_cfg(NULL);
	snprintf(self, sizeof(self), "%d\n", (int) getpid());
	cg_test_subtree_write = faithful_subtree_write;
	cg_test_after_mkdir = faithful_after_mkdir;
	faithful_root = root;

	/* issue 23: a cgroup systemd manages and did not delegate (root's login session or
	 * service, even holding only us) is never written: not its subtree_control, no leaf */
	cg_test_systemd = 1;
	faithful_tree(root, "system.slice/svc.service", "cpu memory pids");
	fmt_into(dir, sizeof(dir), "%s/system.slice/svc.service", root);
	put(P("%s/cgroup.procs", dir), self);
	put(psc, "0::/system.slice/svc.service\n");
	before = snapshot(dir);
	r = cg_probe(root, psc, &h);
	TAP_OK(r == 0 && h.kind == AB_CG_NONE && contains(h.why, "belongs to systemd") &&
		       contains(h.why, "not delegated"),
	       "v2 own, systemd: an undelegated own cgroup gives NONE: '%s'", h.why);
	TAP_OK(unchanged(dir, before),
	       "v2 own, systemd: ... and nothing in it was written, moved or made");
	free(before);

	/* delegated (user.delegate=1, as systemd >= 253 marks it), holding only us: we step
	 * aside into a leaf, enable the controllers, and runs are sibling leaves */
	faithful_tree(root, "user.slice/deleg.scope", "cpu memory pids");
	fmt_into(dir, sizeof(dir), "%s/user.slice/deleg.scope", root);
	put(P("%s/cgroup.procs", dir), self);
	put(psc, "0::/user.slice/deleg.scope\n");
	if (!mark_delegated(dir, "user.delegate")) {
		TAP_SKIP("v2 own, systemd: this filesystem has no user xattrs to mark delegation");
	} else {
		r = cg_probe(root, psc, &h);
		TAP_OK(r == 0 && h.kind == AB_CG_V2 && h.memory && h.pids && h.cpu,
		       "v2 own, systemd: a delegated scope holding only us gives V2 ('%s')", h.why);
		TAP_STREQ(h.v2_parent, "user.slice/deleg.scope",
			  "v2 own, systemd: runs go directly in the scope, beside our leaf");
		TAP_STREQ(h.how, "a cgroup systemd delegated",
			  "v2 own, systemd: how, for the report");
		TAP_STREQ(get(P("%s/agentbox-supervisor/cgroup.procs", dir)), "0",
			  "v2 own, systemd: we stepped aside into agentbox-supervisor first");
		TAP_STREQ(get(P("%s/cgroup.subtree_control", dir)), "cpu memory pids",
			  "v2 own, systemd: then the scope's subtree_control got the controllers");
		cg_init(&cg);
		r = cg_create(&h, "run-1-2-sibling", &(struct ab_cg_limits){ .pids = 8 }, &cg,
			      &err);
		TAP_OK(r == 0 && strcmp(get(P("%s/run-1-2-sibling/pids.max", dir)), "8") == 0,
		       "v2 own, systemd: the run cgroup is a sibling leaf with its limit (%s)",
		       err.msg);
		(void) cg_destroy(&cg);

		/* the same supervisor probing again (host probe after cg_enter_scope): it is in
		 * its leaf now, and finds the scope ready, writing nothing more */
		put(psc, "0::/user.slice/deleg.scope/agentbox-supervisor\n");
		put(P("%s/cgroup.procs", dir), "");
		put(P("%s/agentbox-supervisor/cgroup.procs", dir), self);
		before = snapshot(dir);
		r = cg_probe(root, psc, &h);
		TAP_OK(r == 0 && h.kind == AB_CG_V2 &&
			       strcmp(h.v2_parent, "user.slice/deleg.scope") == 0,
		       "v2 own, systemd: from the leaf, the scope again ('%s')", h.why);
		TAP_OK(unchanged(dir, before), "v2 own, systemd: ... with no further write");
		free(before);
	}

	/* delegated (trusted.delegate=1, as the system manager marks it; root only), but other
	 * processes share it: left alone */
	faithful_tree(root, "system.slice/busy.scope", "cpu memory pids");
	fmt_into(dir, sizeof(dir), "%s/system.slice/busy.scope", root);
	put(P("%s/cgroup.procs", dir), P("1\n%s", self));
	put(psc, "0::/system.slice/busy.scope\n");
	if (geteuid() != 0 || !mark_delegated(dir, "trusted.delegate")) {
		TAP_SKIP("v2 own, systemd: trusted.delegate needs root and a filesystem with it");
	} else {
		before = snapshot(dir);
		r = cg_probe(root, psc, &h);
		TAP_OK(r == 0 && h.kind == AB_CG_NONE && contains(h.why, "holds other processes") &&
			       contains(h.why, "AGENTBOX_CGROUP"),
		       "v2 own, systemd: a delegated cgroup shared with others gives NONE: '%s'",
		       h.why);
		TAP_OK(unchanged(dir, before), "v2 own, systemd: ... and is not written");
		free(before);
	}

	/* no systemd (a container's cgroup namespace): a writable own cgroup holding only us */
	cg_test_systemd = 0;
	faithful_tree(root, "ctr/app", "cpu memory pids");
	fmt_into(dir, sizeof(dir), "%s/ctr/app", root);
	put(P("%s/cgroup.procs", dir), self);
	put(psc, "0::/ctr/app\n");
	r = cg_probe(root, psc, &h);
	TAP_OK(r == 0 && h.kind == AB_CG_V2 && strcmp(h.v2_parent, "ctr/app") == 0 &&
		       strcmp(h.how, "its own cgroup") == 0,
	       "v2 own, no systemd: own cgroup, runs beside our leaf ('%s')", h.why);
	/* ... holding others too: left alone */
	faithful_tree(root, "ctr/shared", "cpu memory pids");
	fmt_into(dir, sizeof(dir), "%s/ctr/shared", root);
	put(P("%s/cgroup.procs", dir), P("1\n%s", self));
	put(psc, "0::/ctr/shared\n");
	before = snapshot(dir);
	r = cg_probe(root, psc, &h);
	TAP_OK(r == 0 && h.kind == AB_CG_NONE && contains(h.why, "holds other processes") &&
		       unchanged(dir, before),
	       "v2 own, no systemd: a shared own cgroup gives NONE, unwritten: '%s'", h.why);
	free(before);
	/* the namespace's root may hold processes and hand out controllers */
	faithful_tree(root, "x", "cpu memory pids");
	put(P("%s/cgroup.procs", root), P("1\n%s", self));
	put(psc, "0::/\n");
	r = cg_probe(root, psc, &h);
	TAP_OK(r == 0 && h.kind == AB_CG_V2 && strcmp(h.v2_parent, "agentbox") == 0,
	       "v2 own, no systemd: the namespace's root: runs under agentbox/ ('%s')", h.why);
	put(P("%s/cgroup.procs", root), "");

	/* not delegated to this uid (no writable cgroup.procs) */
	fake_v2_path(root, "user.slice/d.scope", "memory pids cpu");
	rm_file(P("%s/user.slice/d.scope/cgroup.procs", root));
	put(psc, "0::/user.slice/d.scope\n");
	r = cg_probe(root, psc, &h);
	TAP_OK(r == 0 && h.kind == AB_CG_NONE && contains(h.why, "not delegated") &&
		       contains(h.why, "delegated scope"),
	       "v2 own: unwritable cgroup gives NONE: '%s'", h.why);

	put(psc, "0::/user.slice/gone.scope (deleted)\n");
	r = cg_probe(root, psc, &h);
	TAP_OK(r == 0 && h.kind == AB_CG_NONE, "v2 own: deleted own cgroup gives NONE: '%s'",
	       h.why);
	put(psc, "12:pids:/\n1:name=systemd:/\n");
	r = cg_probe(root, psc, &h);
	TAP_OK(r == 0 && h.kind == AB_CG_NONE, "v2 own: no 0:: line gives NONE: '%s'", h.why);

	cg_test_systemd = -1;
	faithful_root = NULL;
	cg_test_subtree_write = NULL;
	hooks_on();
}

static void
test_probe_none(void)
{
	struct ab_cg_host h;
	int r;

	/* cgroup2 at root without controllers (bound to v1), and no v1 hierarchies */
	fake_v2_cgroup(P("%s/empty2", tmp), "", "");
	r = cg_probe(P("%s/empty2", tmp), P("%s/psc-own", tmp), &h);
	TAP_OK(r == 0 && h.kind == AB_CG_NONE && contains(h.why, "no memory or pids controller") &&
		       contains(h.why, "no cgroup v1"),
	       "no controllers anywhere gives NONE: '%s'", h.why);
	mkdir_p(P("%s/nothing", tmp));
	r = cg_probe(P("%s/nothing", tmp), NULL, &h);
	TAP_OK(r == 0 && h.kind == AB_CG_NONE && h.why[0], "empty root gives NONE: '%s'", h.why);
	r = cg_probe(P("%s/does-not-exist", tmp), NULL, &h);
	TAP_OK(r == 0 && h.kind == AB_CG_NONE && contains(h.why, "no cgroup filesystem"),
	       "missing root gives NONE: '%s'", h.why);
}

static struct ab_cg_host v2host; /* from test_v2_create, reused by later tests */

static void
test_v2_create(void)
{
	STRP(root, "%s/v2c", tmp);
	char run[1200];
	struct ab_cg_limits l = {
		.memory_bytes = 64 * MiB, .pids = 16, .cpu_quota_us = 50000, .cpu_period_us = 100000
	};
	struct ab_cg cg, cg2;
	struct ab_err err = { 0 };
	struct ab_cg_host nomem;
	int r;

	fake_v2_path(root, "deleg", "memory pids cpu");
	set_cgroup_cfg("deleg");
	r = cg_probe(root, P("%s/psc-own", tmp), &v2host);
	set_cgroup_cfg(NULL);
	TAP_OK(r == 0 && v2host.kind == AB_CG_V2 && v2host.cpu, "v2 create: probe ok ('%s')",
	       v2host.why);

	cg_init(&cg);
	r = cg_create(&v2host, "run-1-2-create", &l, &cg, &err);
	TAP_OK(r == 0, "v2 create: cg_create ok (%s)", err.msg);
	fmt_into(run, sizeof(run), "%s/deleg/run-1-2-create", root);
	TAP_STREQ(get(P("%s/memory.max", run)), "67108864", "v2 create: memory.max");
	TAP_STREQ(get(P("%s/memory.swap.max", run)), "0", "v2 create: memory.swap.max");
	TAP_STREQ(
		get(P("%s/memory.oom.group", run)), "",
		"v2 create: memory.oom.group left at 0 (an OOM kill must not take agentbox-init)");
	TAP_STREQ(get(P("%s/pids.max", run)), "16", "v2 create: pids.max");
	TAP_STREQ(get(P("%s/cpu.max", run)), "50000 100000", "v2 create: cpu.max");
	TAP_OK(cg.kind == AB_CG_V2 && cg.dirfd[0] >= 0 && cg.procs_fd[0] >= 0 && cg.dirfd[1] < 0 &&
		       cg.procs_fd[3] < 0 && strcmp(cg.name, "run-1-2-create") == 0,
	       "v2 create: struct filled");

	TAP_OK(cg_attach_self(&cg) == 0, "v2 attach: cg_attach_self ok");
	TAP_STREQ(get(P("%s/cgroup.procs", run)), "0", "v2 attach: wrote '0' to cgroup.procs");
	put(P("%s/cgroup.procs", run), "");

	memset(&err, 0, sizeof(err));
	r = cg_create(&v2host, "run-1-2-create", &l, &cg2, &err);
	TAP_OK(r == -EEXIST && contains(err.msg, "already exists") && cg2.dirfd[0] == -1 &&
		       cg2.name[0] == '\0',
	       "v2 create: existing directory refused: %s", err.msg);
	const char *bad[] = {
		"",    "../x", ".hidden",
		"a/b", "a b",  "run-0123456789012345678901234567890123456789012345678901234567890"
	};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		memset(&err, 0, sizeof(err));
		r = cg_create(&v2host, bad[i], &l, &cg2, &err);
		TAP_OK(r == -EINVAL, "v2 create: bad name '%s' refused", bad[i]);
	}
	nomem = v2host;
	nomem.memory = false;
	memset(&err, 0, sizeof(err));
	r = cg_create(&nomem, "run-1-2-nomem", &l, &cg2, &err);
	TAP_OK(r == -EOPNOTSUPP && !exists(P("%s/deleg/run-1-2-nomem", root)),
	       "v2 create: memory limit without memory controller refused: %s", err.msg);
	memset(&err, 0, sizeof(err));
	r = cg_create(&v2host, "run-1-2-period",
		      &(struct ab_cg_limits){ .cpu_quota_us = 50000, .cpu_period_us = 10 }, &cg2,
		      &err);
	TAP_OK(r == -EINVAL, "v2 create: silly CPU period refused: %s", err.msg);

	/* a failing write removes what was made, and the message names the file */
	fake_skip_file = "pids.max";
	memset(&err, 0, sizeof(err));
	r = cg_create(&v2host, "run-1-2-fail", &l, &cg2, &err);
	fake_skip_file = NULL;
	TAP_OK(r < 0 && contains(err.msg, "pids.max") && contains(err.msg, "run-1-2-fail"),
	       "v2 create: failure names the file: %s", err.msg);
	TAP_OK(!exists(P("%s/deleg/run-1-2-fail", root)) && cg2.dirfd[0] == -1,
	       "v2 create: failure removed the directory");

	/* usage, from canned files */
	struct ab_cg_usage u;

	put(P("%s/memory.peak", run), "66000000\n");
	put(P("%s/memory.events", run),
	    "low 0\nhigh 0\nmax 7\noom 2\noom_kill 2\noom_group_kill 1\n");
	put(P("%s/pids.events", run), "max 35\n");
	put(P("%s/pids.peak", run), "16\n");
	put(P("%s/cpu.stat", run),
	    "usage_usec 123456\nuser_usec 100000\nsystem_usec 23456\nnr_periods 10\n"
	    "nr_throttled 3\nthrottled_usec 4567\nnr_bursts 0\nburst_usec 0\n");
	r = cg_read_usage(&cg, &u);
	TAP_OK(r == 0 && u.valid, "v2 usage: read");
	TAP_OK(u.memory_peak_bytes == 66000000 && u.oom_kills == 2 && u.memory_max_events == 7,
	       "v2 usage: memory.peak/events (%" PRIu64 " %" PRIu64 " %" PRIu64 ")",
	       u.memory_peak_bytes, u.oom_kills, u.memory_max_events);
	TAP_OK(u.pids_max_events == 35 && u.pids_peak == 16, "v2 usage: pids.events/peak");
	TAP_OK(u.cpu_usec == 123456 && u.cpu_throttled_usec == 4567, "v2 usage: cpu.stat");
	put(P("%s/memory.events", run), "max 1\noom_kill 18446744073709551616\n");
	put(P("%s/pids.events", run), "max 12abc\n");
	put(P("%s/memory.peak", run), "-5\n");
	put(P("%s/cpu.stat", run), "usage_usec\nthrottled_usec  +9\n");
	r = cg_read_usage(&cg, &u);
	TAP_OK(r == 0 && u.oom_kills == 0 && u.memory_max_events == 1 && u.pids_max_events == 0 &&
		       u.memory_peak_bytes == 0 && u.cpu_usec == 0 && u.cpu_throttled_usec == 0,
	       "v2 usage: overflow, junk, signs and missing values are not numbers");

	/* counting and killing never touch a pid outside the run */
	put(P("%s/cgroup.procs", run), "12\n34\n\nabc\n0\n-3\n");
	TAP_OK(cg_count_procs(&cg) == 2, "v2 count: counts only pids");
	{
		cleanup_free pid_t *listed = NULL;
		int n = cg_list_procs(&cg, &listed);

		TAP_OK(n == 2 && listed[0] == 12 && listed[1] == 34,
		       "v2 list: the pids cgroup.procs lists, nothing else (%d)", n);
	}
	put(P("%s/cgroup.procs", run), "");
	TAP_OK(cg_count_procs(&cg) == 0, "v2 count: empty is 0");
	TAP_OK(cg_kill(&cg) == 0, "v2 kill: ok");
	TAP_STREQ(get(P("%s/cgroup.kill", run)), "1", "v2 kill: wrote '1' to cgroup.kill");
	rm_file(P("%s/cgroup.kill", run));
	pid_t bystander = fork();

	if (bystander == 0) {
		sleep(30);
		_exit(0);
	}
	put(P("%s/cgroup.procs", run), P("%d\n%d\n", (int) bystander, (int) getpid()));
	r = cg_kill(&cg);
	TAP_OK(r == -EBUSY && kill(bystander, 0) == 0 && waitpid(bystander, NULL, WNOHANG) == 0,
	       "v2 kill: fallback loop never signals a pid outside the run (r=%d)", r);
	TAP_STREQ(get(P("%s/cgroup.freeze", run)), "0", "v2 kill: fallback froze and thawed");
	(void) kill(bystander, SIGKILL);
	(void) waitpid(bystander, NULL, 0);
	put(P("%s/cgroup.procs", run), "");

	TAP_OK(cg_destroy(&cg) == 0 && !exists(run), "v2 destroy: directory removed");
	TAP_OK(cg.name[0] == '\0' && cg.dirfd[0] == -1 && cg.procs_fd[0] == -1,
	       "v2 destroy: struct reset");
	TAP_OK(cg_destroy(&cg) == 0, "v2 destroy: second call is a no-op");
	TAP_OK(exists(P("%s/deleg", root)), "v2 destroy: parent kept");

	struct ab_cg zero;
	bool stdin_open = fcntl(0, F_GETFD) >= 0;

	memset(&zero, 0, sizeof(zero));
	TAP_OK(cg_destroy(&zero) == 0 && (fcntl(0, F_GETFD) >= 0) == stdin_open &&
		       zero.dirfd[0] == -1,
	       "destroy: zeroed struct is safe (fd 0 untouched)");
	memset(&zero, 0, sizeof(zero));
	{
		pid_t *none = NULL;

		TAP_OK(cg_attach_self(&zero) == -EBADF && cg_count_procs(&zero) == -EBADF &&
			       cg_list_procs(&zero, &none) == -EBADF && !none &&
			       cg_kill(&zero) == 0,
		       "zeroed struct: attach/count/list refuse, kill is a no-op");
	}
}

static void
test_v1_fake(void)
{
	STRP(root, "%s/v1", tmp);
	struct ab_cg_limits l = { .memory_bytes = 64 * MiB, .pids = 16, .cpu_quota_us = 50000 };
	struct ab_cg_host h;
	struct ab_cg cg;
	struct ab_cg_usage u;
	struct ab_err err = { 0 };
	const char *c[4] = { "memory", "pids", "cpu", "cpuacct" };
	int r;

	fake_v1_tree(root, true);
	r = cg_probe(root, P("%s/psc-own", tmp), &h);
	TAP_OK(r == 0 && h.kind == AB_CG_V1, "v1 probe: V1 ('%s')", h.why);
	TAP_OK(h.memory && h.pids && h.cpu && h.cpuacct && h.swap && !h.kill_file &&
		       h.why[0] == '\0',
	       "v1 probe: all four controllers and memsw");
	TAP_OK(exists(P("%s/memory/agentbox", root)) && exists(P("%s/cpuacct/agentbox", root)),
	       "v1 probe: <controller>/agentbox parents created");

	cg_init(&cg);
	r = cg_create(&h, "run-1-2-v1", &l, &cg, &err);
	TAP_OK(r == 0, "v1 create: ok (%s)", err.msg);
#define RUN(ctrl, file) P("%s/%s/agentbox/run-1-2-v1/%s", root, ctrl, file)
	TAP_STREQ(get(RUN("memory", "memory.limit_in_bytes")), "67108864",
		  "v1 create: memory.limit_in_bytes");
	TAP_STREQ(get(RUN("memory", "memory.memsw.limit_in_bytes")), "67108864",
		  "v1 create: memory.memsw.limit_in_bytes");
	TAP_STREQ(get(RUN("memory", "memory.swappiness")), "0", "v1 create: memory.swappiness");
	TAP_STREQ(get(RUN("memory", "memory.oom_control")), "",
		  "v1 create: memory.oom_control untouched");
	TAP_STREQ(get(RUN("pids", "pids.max")), "16", "v1 create: pids.max");
	TAP_STREQ(get(RUN("cpu", "cpu.cfs_period_us")), "100000",
		  "v1 create: cpu.cfs_period_us (default)");
	TAP_STREQ(get(RUN("cpu", "cpu.cfs_quota_us")), "50000", "v1 create: cpu.cfs_quota_us");
	TAP_OK(cg_attach_self(&cg) == 0, "v1 attach: ok");
	bool all0 = true;

	for (int i = 0; i < 4; i++) {
		all0 = all0 && strcmp(get(RUN(c[i], "tasks")), "0") == 0 &&
		       strcmp(get(RUN(c[i], "cgroup.procs")), "") == 0;
		put(RUN(c[i], "tasks"), "");
	}
	/* tasks, not cgroup.procs: moving the calling thread skips the global threadgroup
	 * rwsem and its RCU grace period */
	TAP_OK(all0, "v1 attach: '0' written to all four tasks files (not cgroup.procs)");

	put(RUN("memory", "memory.max_usage_in_bytes"), "67100000\n");
	put(RUN("memory", "memory.oom_control"), "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n");
	put(RUN("memory", "memory.failcnt"), "42\n");
	put(RUN("pids", "pids.events"), "max 9\n");
	put(RUN("pids", "pids.peak"), "16\n");
	put(RUN("cpuacct", "cpuacct.usage"), "2500000123\n");
	put(RUN("cpu", "cpu.stat"), "nr_periods 5\nnr_throttled 2\nthrottled_time 7000999\n");
	r = cg_read_usage(&cg, &u);
	TAP_OK(r == 0 && u.valid && u.memory_peak_bytes == 67100000 && u.oom_kills == 3 &&
		       u.memory_max_events == 42,
	       "v1 usage: memory");
	TAP_OK(u.pids_max_events == 9 && u.pids_peak == 16, "v1 usage: pids");
	TAP_OK(u.cpu_usec == 2500000 && u.cpu_throttled_usec == 7000,
	       "v1 usage: cpuacct.usage and throttled_time, ns to us (%" PRIu64 " %" PRIu64 ")",
	       u.cpu_usec, u.cpu_throttled_usec);
	TAP_OK(cg_count_procs(&cg) == 0, "v1 count: 0");
	TAP_OK(cg_destroy(&cg) == 0, "v1 destroy: ok");
	bool gone = true;

	for (int i = 0; i < 4; i++)
		gone = gone && !exists(P("%s/%s/agentbox/run-1-2-v1", root, c[i])) &&
		       exists(P("%s/%s/agentbox", root, c[i]));
	TAP_OK(gone, "v1 destroy: run dirs gone in all four hierarchies, parents kept");
#undef RUN

	/* no memsw: swap is noted, a memory limit still works */
	fmt_into(root, sizeof(root), "%s/v1nosw", tmp);
	fake_v1_tree(root, false);
	r = cg_probe(root, NULL, &h);
	TAP_OK(r == 0 && h.kind == AB_CG_V1 && !h.swap && contains(h.why, "swap"),
	       "v1 probe: no memsw noted: '%s'", h.why);
	memset(&err, 0, sizeof(err));
	r = cg_create(&h, "run-1-2-nosw", &l, &cg, &err);
	TAP_OK(r == 0 && !exists(P("%s/memory/agentbox/run-1-2-nosw/memory.memsw.limit_in_bytes",
				   root)),
	       "v1 create: works without memsw (%s)", err.msg);
	TAP_OK(cg_destroy(&cg) == 0, "v1 destroy (no memsw): ok");

	/* "cpu,cpuacct" co-mounted, cpu and cpuacct symlinks to it */
	fmt_into(root, sizeof(root), "%s/v1co", tmp);
	fake_v1_tree(root, true);
	if (under_tmp(root)) {
		rm_rf_at(AT_FDCWD, P("%s/cpuacct", root));
		(void) rename(P("%s/cpu", root), P("%s/cpu,cpuacct", root));
		put(P("%s/cpu,cpuacct/cpuacct.usage", root), "");
		if (symlink("cpu,cpuacct", P("%s/cpu", root)) < 0 ||
		    symlink("cpu,cpuacct", P("%s/cpuacct", root)) < 0)
			printf("# symlink: %s\n", strerror(errno));
	}
	r = cg_probe(root, NULL, &h);
	TAP_OK(r == 0 && h.kind == AB_CG_V1 && h.cpu && h.cpuacct, "v1 co-mount: probe ok");
	memset(&err, 0, sizeof(err));
	r = cg_create(&h, "run-1-2-co", &l, &cg, &err);
	struct stat a, b;

	TAP_OK(r == 0 && cg.dirfd[2] >= 0 && cg.dirfd[3] >= 0 && fstat(cg.dirfd[2], &a) == 0 &&
		       fstat(cg.dirfd[3], &b) == 0 && a.st_ino == b.st_ino && cg.procs_fd[3] == -1,
	       "v1 co-mount: one directory for cpu and cpuacct (%s)", err.msg);
	put(P("%s/cpu,cpuacct/agentbox/run-1-2-co/cpuacct.usage", root), "5000\n");
	TAP_OK(cg_read_usage(&cg, &u) == 0 && u.cpu_usec == 5, "v1 co-mount: cpuacct.usage read");
	TAP_OK(cg_destroy(&cg) == 0 && !exists(P("%s/cpu,cpuacct/agentbox/run-1-2-co", root)),
	       "v1 co-mount: destroy removes it");
}

static void
test_names_and_sweep(void)
{
	STRP(root, "%s/v2c", tmp); /* v2host's tree */
	STRP(par, "%s/deleg", root);
	uint64_t st = own_starttime();
	long pmax = pid_max();
	int self = (int) getpid(), r;
	char name[128], small[8];

	cg_run_name("abc", name, sizeof(name));
	TAP_STREQ(name, P("run-%d-%" PRIu64 "-abc", self, st), "run name: pid and starttime");
	TAP_OK(st > 0, "run name: starttime is known (%" PRIu64 ")", st);
	cg_run_name("abc", small, sizeof(small));
	TAP_OK(strlen(small) == 7 && strncmp(small, "run-", 4) == 0, "run name: truncated safely");

	STRP(gone, "run-%ld-5-gone", pmax);                          /* no such pid */
	STRP(recycled, "run-%d-%" PRIu64 "-recycled", self, st + 1); /* our pid, not our start */
	STRP(live, "run-%d-%" PRIu64 "-live", self, st);             /* us */
	STRP(nostart, "run-%d-0-nostart", self); /* unknown start: a live pid counts */
	const char *stale[] = { gone, recycled };
	const char *keep[] = {
		live,         nostart,    "run-12-x",  "run-abc-1-x",
		"run-1-2-",   "run--1-x", "run-0-1-x", "run-99999999999999999999-1-x",
		"run- 7-1-x", "other",
	};
	for (size_t i = 0; i < ARRAY_SIZE(stale); i++)
		fake_v2_cgroup(P("%s/%s", par, stale[i]), "", "");
	for (size_t i = 0; i < ARRAY_SIZE(keep); i++)
		fake_v2_cgroup(P("%s/%s", par, keep[i]), "", "");
	put(P("%s/run-%ld-1-file", par, pmax), "");
	r = cg_sweep_stale(&v2host, "/proc");
	TAP_OK(r == 2, "sweep: two stale runs removed (r=%d)", r);
	for (size_t i = 0; i < ARRAY_SIZE(stale); i++)
		TAP_OK(!exists(P("%s/%s", par, stale[i])), "sweep: '%s' removed", stale[i]);
	for (size_t i = 0; i < ARRAY_SIZE(keep); i++)
		TAP_OK(exists(P("%s/%s", par, keep[i])), "sweep: '%s' kept", keep[i]);
	TAP_OK(exists(P("%s/run-%ld-1-file", par, pmax)), "sweep: a plain file is never touched");

	/* a fake /proc: comm with spaces and parentheses, and an unparsable stat */
	STRP(proc, "%s/proc", tmp);
	struct ab_cg_host h2 = v2host;
	STRP(par2, "%s/deleg2", root);

	fake_v2_cgroup(par2, "memory pids cpu", "");
	snprintf(h2.v2_parent, sizeof(h2.v2_parent), "deleg2");
	mkdir_p(P("%s/4242", proc));
	put(P("%s/4242/stat", proc),
	    "4242 (a) b (c) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 777 1000 "
	    "100 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0\n");
	mkdir_p(P("%s/4243", proc));
	put(P("%s/4243/stat", proc), "4243 (x) S 1 2\n");
	const char *s2[] = { "run-4242-778-z", "run-4244-1-z" };
	const char *k2[] = { "run-4242-777-z", "run-4243-1-z" };

	for (size_t i = 0; i < 2; i++) {
		fake_v2_cgroup(P("%s/%s", par2, s2[i]), "", "");
		fake_v2_cgroup(P("%s/%s", par2, k2[i]), "", "");
	}
	r = cg_sweep_stale(&h2, proc);
	TAP_OK(r == 2 && !exists(P("%s/%s", par2, s2[0])) && !exists(P("%s/%s", par2, s2[1])),
	       "sweep (fake proc): recycled pid and missing pid removed (r=%d)", r);
	TAP_OK(exists(P("%s/%s", par2, k2[0])),
	       "sweep (fake proc): comm '(a) b (c)' parsed, live owner kept");
	TAP_OK(exists(P("%s/%s", par2, k2[1])), "sweep (fake proc): unparsable stat kept");
}

/* ---- part 2: the real host ---- */

static int64_t
cpu_ms_self(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Reaps every child (the run's orphans come back to us: we are a subreaper). */
static void
reap_all(void)
{
	int64_t end = now_ms() + 3000;

	while (now_ms() < end) {
		pid_t p = waitpid(-1, NULL, WNOHANG);

		if (p < 0)
			return; /* ECHILD */
		if (p == 0)
			usleep(10000);
	}
}

/* Whether the cgroup empties within ms. It returns as soon as it does: callers pass a bound
 * generous enough for a loaded machine (the kill is immediate; the exits are not). */
static bool
wait_empty(struct ab_cg *cg, int ms)
{
	int64_t end = now_ms() + ms;

	while (now_ms() < end) {
		if (cg_count_procs(cg) == 0)
			return true;
		usleep(5000);
	}
	return cg_count_procs(cg) == 0;
}

static bool
run_dirs_gone(const struct ab_cg_host *h, const char *name)
{
	const char *c[4] = { "memory", "pids", "cpu", "cpuacct" };

	if (h->kind == AB_CG_V2)
		return !exists(P("%s/%s/%s", h->root, h->v2_parent, name));
	for (int i = 0; i < 4; i++)
		if (exists(P("%s/%s/agentbox/%s", h->root, c[i], name)))
			return false;
	return true;
}

static void
real_pids(const struct ab_cg_host *h)
{
	struct ab_cg_limits l = {
		.memory_bytes = 64 * MiB, .pids = 16, .cpu_quota_us = 50000, .cpu_period_us = 100000
	};
	struct ab_cg cg;
	struct ab_cg_usage u;
	struct ab_err err = { 0 };
	char name[64], buf[64];
	int p[2], n = -1, status = 0, count;
	pid_t pid;

	cg_run_name("pids", name, sizeof(name));
	if (cg_create(h, name, &l, &cg, &err) < 0) {
		TAP_OK(0, "real pids: cg_create: %s", err.msg);
		return;
	}
	if (h->kind == AB_CG_V1) {
		bool ok = read_small_file_at(cg.dirfd[0], "memory.limit_in_bytes", buf,
					     sizeof(buf)) > 0 &&
			  strcmp(buf, "67108864") == 0;

		ok = ok && read_small_file_at(cg.dirfd[1], "pids.max", buf, sizeof(buf)) > 0 &&
		     strcmp(buf, "16") == 0;
		ok = ok &&
		     read_small_file_at(cg.dirfd[2], "cpu.cfs_quota_us", buf, sizeof(buf)) > 0 &&
		     strcmp(buf, "50000") == 0;
		TAP_OK(ok, "real pids: v1 limits read back (64 MiB, 16, 50000/100000)");
	} else {
		bool ok = read_small_file_at(cg.dirfd[0], "pids.max", buf, sizeof(buf)) > 0 &&
			  strcmp(buf, "16") == 0;

		ok = ok && read_small_file_at(cg.dirfd[0], "cpu.max", buf, sizeof(buf)) > 0 &&
		     strcmp(buf, "50000 100000") == 0;
		TAP_OK(ok, "real pids: v2 limits read back");
	}
	if (pipe2(p, O_CLOEXEC) < 0)
		return;
	pid = fork();
	if (pid == 0) {
		int ok = 0;

		(void) close(p[0]);
		if (cg_attach_self(&cg) < 0)
			_exit(100);
		for (int i = 0; i < 50; i++) {
			pid_t c = fork();

			if (c == 0) {
				sleep(5);
				_exit(0);
			}
			if (c > 0)
				ok++;
		}
		(void) !write(p[1], &ok, sizeof(ok));
		pause();
		_exit(0);
	}
	(void) close(p[1]);
	if (read(p[0], &n, sizeof(n)) != sizeof(n))
		n = -1;
	(void) close(p[0]);
	count = cg_count_procs(&cg);
	TAP_OK(n == 15, "real pids: fork bomb stopped at pids.max (%d of 50 forks)", n);
	TAP_OK(count == 16, "real pids: 16 processes in the cgroup (%d)", count);
	TAP_OK(cg_read_usage(&cg, &u) == 0 && u.valid && u.pids_max_events > 0,
	       "real pids: pids.events max = %" PRIu64 ", peak %" PRIu64, u.pids_max_events,
	       u.pids_peak);
	TAP_OK(cg_kill(&cg) == 0, "real pids: cg_kill ok");
	(void) waitpid(pid, &status, 0);
	TAP_OK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "real pids: child SIGKILLed");
	TAP_OK(wait_empty(&cg, 10000), "real pids: cgroup empty after kill");
	reap_all();
	TAP_OK(cg_destroy(&cg) == 0 && run_dirs_gone(h, name), "real pids: destroy removed '%s'",
	       name);
}

static void
real_oom(const struct ab_cg_host *h)
{
	struct ab_cg_limits l = { .memory_bytes = 64 * MiB };
	struct ab_cg cg;
	struct ab_cg_usage u;
	struct ab_err err = { 0 };
	char name[64];
	int status = 0;
	pid_t pid;

	if (access("/usr/bin/python3", X_OK) < 0) {
		tap_n++;
		printf("ok %d # SKIP no /usr/bin/python3 for the memory hog\n", tap_n);
		return;
	}
	cg_run_name("oom", name, sizeof(name));
	if (cg_create(h, name, &l, &cg, &err) < 0) {
		TAP_OK(0, "real oom: cg_create: %s", err.msg);
		return;
	}
	pid = fork();
	if (pid == 0) {
		if (cg_attach_self(&cg) < 0)
			_exit(100);
		/* exec: ASan's shadow memory must not be charged to the run */
		execl("/usr/bin/python3", "python3", "-c", PY_MEMORY_HOG, (char *) NULL);
		_exit(127);
	}
	(void) waitpid(pid, &status, 0);
	TAP_OK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
	       "real oom: 200 MiB hog under 64 MiB is SIGKILLed (status 0x%x)", status);
	TAP_OK(cg_read_usage(&cg, &u) == 0 && u.oom_kills >= 1, "real oom: oom_kills = %" PRIu64,
	       u.oom_kills);
	TAP_OK(u.memory_peak_bytes >= 48 * MiB && u.memory_peak_bytes <= 64 * MiB,
	       "real oom: memory peak %" PRIu64 " bytes, near the 64 MiB limit",
	       u.memory_peak_bytes);
	/* not asserted: v1 kernels >= 6.13 keep no failcnt for memsw, which is the counter that
	 * fails first when memsw == limit, so limit hits can read 0 there */
	printf("# real oom: limit hits = %" PRIu64 "\n", u.memory_max_events);
	if (h->kind == AB_CG_V2)
		TAP_OK(u.memory_max_events > 0, "real oom: memory.events max = %" PRIu64,
		       u.memory_max_events);
	TAP_OK(cg_destroy(&cg) == 0 && run_dirs_gone(h, name), "real oom: destroy removed '%s'",
	       name);
}

/* One key of a flat-keyed cgroup file (cpu.stat): its value, or -1 when absent. */
static int64_t
stat_key(int dirfd, const char *file, const char *key)
{
	char buf[2048];
	size_t kl = strlen(key);

	if (dirfd < 0 || read_small_file_at(dirfd, file, buf, sizeof(buf)) < 0)
		return -1;
	for (const char *p = buf; p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
		if (strncmp(p, key, kl) == 0 && p[kl] == ' ')
			return strtoll(p + kl + 1, NULL, 10);
	return -1;
}

/* The CPU quota, asserted on what the kernel counted rather than on wall time (a wall-time
 * margin flaked under ASan on a loaded machine: 398 ms for ">= 400"). */
static void
real_cpu(const struct ab_cg_host *h)
{
	const int64_t quota_us = 50000;
	struct ab_cg_limits l = { .cpu_quota_us = 50000, .cpu_period_us = 100000 };
	struct ab_cg cg;
	struct ab_cg_usage u;
	struct ab_err err = { 0 };
	char name[64];
	int status = 0, cpu_fd;
	int64_t t0, wall, periods, throttled;
	pid_t pid;

	if (!h->cpu) {
		tap_n++;
		printf("ok %d # SKIP no cpu controller\n", tap_n);
		return;
	}
	cg_run_name("cpu", name, sizeof(name));
	if (cg_create(h, name, &l, &cg, &err) < 0) {
		TAP_OK(0, "real cpu: cg_create: %s", err.msg);
		return;
	}
	t0 = now_ms();
	pid = fork();
	if (pid == 0) {
		/* The work is CPU time, not wall time: a loaded machine only stretches it. The
		 * wall clock is only the child's own safety net. */
		int64_t end = now_ms() + 60000;
		int64_t start;

		if (cg_attach_self(&cg) < 0)
			_exit(100);
		start = cpu_ms_self();
		while (cpu_ms_self() - start < 250 && now_ms() < end)
			;
		_exit(cpu_ms_self() - start >= 250 ? 0 : 2);
	}
	(void) waitpid(pid, &status, 0);
	wall = now_ms() - t0;
	TAP_OK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	       "real cpu: the child spun 250 ms of CPU in the cgroup (status 0x%x, %" PRId64
	       " ms of wall time, not asserted)",
	       status, wall);
	cpu_fd = cg.kind == AB_CG_V2 ? cg.dirfd[0] : cg.dirfd[2];
	periods = stat_key(cpu_fd, "cpu.stat", "nr_periods");
	throttled = stat_key(cpu_fd, "cpu.stat", "nr_throttled");
	/* The child's clock and cpuacct round differently: allow 10 ms. */
	TAP_OK(cg_read_usage(&cg, &u) == 0 && u.valid && u.cpu_usec >= 240000,
	       "real cpu: the cgroup counted %" PRIu64 " us of CPU", u.cpu_usec);
	/* Bandwidth control gives the group at most the quota per period (plus at most a tick
	 * of overrun, which the next period repays) and counts the periods it ran through:
	 * 250 ms at 50 ms per period needs at least 4 periods after the first. A loaded machine
	 * only adds periods, with one exception: a period in which the starved group asked for
	 * no runtime at all stops the period timer, and its restart (with a full quota) is not
	 * counted. One such restart is allowed for: at least 3 periods, at most the quota for
	 * 2 more. Without the quota in force the kernel counts no periods at all. */
	TAP_OK(periods >= 3 && (int64_t) u.cpu_usec <= (periods + 2) * quota_us + 10000,
	       "real cpu: %" PRIu64 " us of CPU over %" PRId64
	       " enforcement periods: no more than the 50 ms quota per period",
	       u.cpu_usec, periods);
	/* How often the quota had to stop it depends on what else the machine runs (a child
	 * that gets under half a CPU is never throttled): only the bookkeeping is asserted. */
	TAP_OK(throttled >= 0 && throttled <= periods &&
		       (throttled > 0 || u.cpu_throttled_usec == 0),
	       "real cpu: throttled in %" PRId64 " of %" PRId64 " periods, %" PRIu64 " us in all",
	       throttled, periods, u.cpu_throttled_usec);
	TAP_OK(cg_destroy(&cg) == 0 && run_dirs_gone(h, name), "real cpu: destroy removed '%s'",
	       name);
}

/* The stale run's owner is a child of ours that dies just before the sweep: until then other
 * agentboxes on this host (tests run two at a time) see a live owner and leave its cgroup
 * alone. Once it is dead, whichever sweep comes first removes the cgroup: ours, or a
 * concurrent agentbox's (the same code). */
static void
real_sweep(const struct ab_cg_host *h)
{
	struct ab_cg stale, live;
	struct ab_err err = { 0 };
	char sname[96], lname[64], path[64], stat_text[2048];
	uint64_t start = 0;
	pid_t owner = fork();
	int r;

	if (owner == 0) {
		pause();
		_exit(0);
	}
	snprintf(path, sizeof(path), "/proc/%d/stat", (int) owner);
	if (owner < 0 || read_small_file_at(AT_FDCWD, path, stat_text, sizeof(stat_text)) <= 0 ||
	    proc_parse_starttime(stat_text, &start) < 0) {
		TAP_OK(0, "real sweep: a child to own the stale run");
		if (owner > 0) {
			(void) kill(owner, SIGKILL);
			(void) waitpid(owner, NULL, 0);
		}
		return;
	}
	snprintf(sname, sizeof(sname), "run-%d-%" PRIu64 "-sweeptest", (int) owner, start);
	cg_run_name("live", lname, sizeof(lname));
	if (cg_create(h, sname, NULL, &stale, &err) < 0 ||
	    cg_create(h, lname, NULL, &live, &err) < 0) {
		TAP_OK(0, "real sweep: cg_create: %s", err.msg);
		cg_destroy(&stale);
		(void) kill(owner, SIGKILL);
		(void) waitpid(owner, NULL, 0);
		return;
	}
	(void) kill(owner, SIGKILL);
	(void) waitpid(owner, NULL, 0);
	r = cg_sweep_stale(h, "/proc");
	TAP_OK(r >= 0 && run_dirs_gone(h, sname) && !run_dirs_gone(h, lname),
	       "real sweep: stale run removed (%d dirs by this sweep), live run kept", r);
	TAP_OK(cg_destroy(&stale) == 0 && cg_destroy(&live) == 0 && run_dirs_gone(h, lname),
	       "real sweep: destroy after sweep is fine");
}

/* A run cgroup on this host's cgroup2 mount (controller-less on a hybrid host) for the real
 * v2 tests: 1 and *cg set; 0 after printing a skip (no writable cgroup2); -1 after a failure. */
static int
real_v2_cgroup(const char *what, const char *tag, char *name, size_t size, struct ab_cg *cg)
{
	struct ab_cg_host h = { .kind = AB_CG_V2, .cpuacct = true, .kill_file = true };
	struct ab_err err = { 0 };
	struct statfs sf;

	if (statfs(REAL_UNIFIED, &sf) < 0 || sf.f_type != CGROUP2_SUPER_MAGIC ||
	    access(REAL_UNIFIED "/cgroup.procs", W_OK) < 0) {
		tap_n++;
		printf("ok %d # SKIP no writable cgroup2 mount at %s\n", tap_n, REAL_UNIFIED);
		return 0;
	}
	(void) mkdir(REAL_UNIFIED "/agentbox", 0755);
	snprintf(h.root, sizeof(h.root), REAL_UNIFIED);
	snprintf(h.v2_parent, sizeof(h.v2_parent), "agentbox");
	cg_run_name(tag, name, size);
	if (cg_create(&h, name, NULL, cg, &err) < 0) {
		TAP_OK(0, "%s: cg_create: %s", what, err.msg);
		return -1;
	}
	return 1;
}

/* cgroup.kill for real, on a hybrid host's controller-less cgroup2 mount. */
static void
real_v2_kill(void)
{
	struct ab_cg cg;
	char name[64];
	int p[2], status = 0, ok = 0, count;
	pid_t pid;

	if (real_v2_cgroup("real v2 kill", "v2kill", name, sizeof(name), &cg) <= 0)
		return;
	if (faccessat(cg.dirfd[0], "cgroup.kill", W_OK, 0) < 0) {
		tap_n++;
		printf("ok %d # SKIP no cgroup.kill (Linux < 5.14)\n", tap_n);
		cg_destroy(&cg);
		return;
	}
	if (pipe2(p, O_CLOEXEC) < 0)
		return;
	pid = fork();
	if (pid == 0) {
		(void) close(p[0]);
		if (cg_attach_self(&cg) < 0)
			_exit(100);
		for (int i = 0; i < 5; i++) {
			if (fork() == 0) {
				sleep(30);
				_exit(0);
			}
		}
		(void) !write(p[1], &ok, sizeof(ok));
		pause();
		_exit(0);
	}
	(void) close(p[1]);
	(void) !read(p[0], &ok, sizeof(ok));
	(void) close(p[0]);
	count = cg_count_procs(&cg);
	TAP_OK(count == 6 && cg_kill(&cg) == 0 && wait_empty(&cg, 10000),
	       "real v2 kill: cgroup.kill emptied the cgroup (%d processes before)", count);
	(void) waitpid(pid, &status, 0);
	reap_all();
	TAP_OK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL && cg_destroy(&cg) == 0 &&
		       !exists(P("%s/agentbox/%s", REAL_UNIFIED, name)),
	       "real v2 kill: child SIGKILLed, cgroup removed");
	(void) rmdir(REAL_UNIFIED "/agentbox"); /* ours, unless another run uses it now */
}

/* supervise.c's spawn on cgroup v2, for real: clone3(CLONE_INTO_CGROUP) creates the child
 * (bwrap in a run; here a script that prints /proc/self/cgroup) inside the run's cgroup, so
 * it never migrates. This host's only cgroup2 mount has no controllers, which is enough. */
static void
real_v2_spawn(void)
{
	struct ab_cg cg;
	struct ab_err err = { 0 };
	struct ab_limits_plan lp;
	struct ab_run_opts o;
	struct ab_record res;
	struct ab_outcome oc = { 0 };
	static char *no_cmd[] = { NULL };
	static const char script[] = "#!/bin/sh\ncat /proc/self/cgroup\n";
	char name[64], want[160], fake[300], dir[] = "/tmp/ab-v2spawn-XXXXXX";
	int fd;
	int r;

	if (real_v2_cgroup("real v2 spawn", "v2spawn", name, sizeof(name), &cg) <= 0)
		return;
	if (!mkdtemp(dir)) {
		TAP_OK(0, "real v2 spawn: mkdtemp: %s", strerror(errno));
		(void) cg_destroy(&cg);
		return;
	}
	snprintf(fake, sizeof(fake), "%s/fake-bwrap", dir);
	/* not put(): that refuses anything outside the fake trees */
	fd = open(fake, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755);
	if (fd < 0 || write_all(fd, script, strlen(script)) < 0 || close(fd) < 0) {
		TAP_OK(0, "real v2 spawn: write %s: %s", fake, strerror(errno));
		(void) cg_destroy(&cg);
		(void) rmdir(dir);
		return;
	}
	memset(&lp, 0, sizeof(lp));
	lp.fsize = lp.nofile = lp.cpu_s = lp.nproc = RLIM_INFINITY;
	lp.cpu_affinity = -1;
	lp.timeout_ms = 20000;
	lp.output_bytes = 1 << 20;
	run_opts_init(&o);
	result_init(&res, &o);
	/* no way in but clone3: the fork fallback would join through this fd */
	(void) close(cg.procs_fd[0]);
	cg.procs_fd[0] = -1;
	{
		struct ab_spawn sp = {
			.bwrap_path = fake,
			.args_buf = "",
			.args_len = 0,
			.cmd = no_cmd,
			.seccomp_fd = -1,
			.init_path = fake,
			.stdin_fd = -1,
			.cg = &cg,
			.lp = &lp,
			.inline_bytes = AB_INLINE_OUTPUT_DEFAULT,
			.stream_dirfd = -1,
		};

		r = supervise_run(&sp, &res, &oc, &err);
	}
	snprintf(want, sizeof(want), "0::/agentbox/%s\n", name);
	TAP_OK(r == 0 && oc.started && res.out.buf &&
		       memmem(res.out.buf, res.out.len, want, strlen(want)),
	       "real v2 spawn: clone3(CLONE_INTO_CGROUP) started the child in 0::/agentbox/%s",
	       name);
	result_done(&res);
	run_opts_done(&o);
	(void) cg_destroy(&cg);
	(void) unlink(fake);
	(void) rmdir(dir);
	(void) rmdir(REAL_UNIFIED "/agentbox"); /* ours, unless another run uses it now */
}

static void
real_tests(void)
{
	struct ab_cg_host h;
	const char *must = getenv("AGENTBOX_MUST_WORK");
	int r;

	if (geteuid() != 0) {
		for (int i = 0; i < REAL_GROUPS; i++) {
			tap_n++;
			printf("ok %d # SKIP not root\n", tap_n);
		}
		return;
	}
	hooks_off();
	set_cgroup_cfg(NULL);
	alarm(60); /* safety net: the default action ends the test */
	(void) prctl(PR_SET_CHILD_SUBREAPER, 1);
	r = cg_probe(NULL, NULL, &h);
	if (r < 0 || h.kind == AB_CG_NONE) {
		if (must && strcmp(must, "1") == 0) {
			TAP_OK(0, "real: no usable cgroups: %s", r < 0 ? strerror(-r) : h.why);
			return;
		}
		for (int i = 0; i < REAL_GROUPS; i++) {
			tap_n++;
			printf("ok %d # SKIP no usable cgroups: %s\n", tap_n,
			       r < 0 ? strerror(-r) : h.why);
		}
		return;
	}
	TAP_OK(1, "real: probe gives %s (memory %d pids %d cpu %d cpuacct %d swap %d) '%s'",
	       h.kind == AB_CG_V1 ? "V1" : "V2", h.memory, h.pids, h.cpu, h.cpuacct, h.swap, h.why);
	r = cg_sweep_stale(&h, "/proc");
	TAP_OK(r >= 0, "real: sweep of leftovers ok (%d removed)", r);
	if (h.memory && h.pids)
		real_pids(&h);
	if (h.memory)
		real_oom(&h);
	real_cpu(&h);
	real_sweep(&h);
	real_v2_kill();
	real_v2_spawn();
	alarm(0);
}

int
main(void)
{
	snprintf(tmp, sizeof(tmp), "/tmp/ab-test-cgroup-XXXXXX");
	if (!mkdtemp(tmp)) {
		TAP_OK(0, "mkdtemp: %s", strerror(errno));
		return tap_done();
	}
	hooks_on();
	test_v2_probe_env();
	test_v2_probe_own();
	test_v2_faithful();
	test_probe_none();
	test_v2_create();
	test_v1_fake();
	test_names_and_sweep();
	hooks_off();
	rm_rf_at(AT_FDCWD, tmp);
	TAP_OK(!exists(tmp), "temp tree removed");

	real_tests();
	return tap_done();
}

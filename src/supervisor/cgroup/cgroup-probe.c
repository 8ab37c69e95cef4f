/* cgroup-probe.c: where this process may make run cgroups (cg_probe): a delegated cgroup v2
 * subtree ($AGENTBOX_CGROUP, or the process's own cgroup), else the cgroup v1 hierarchies.
 * Probing prepares the place: it makes the "agentbox" parents and enables controllers. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/xattr.h>

#include "../../spec/cfg.h"
#include "../../util/fdutil.h"
#include "../../util/macro.h"
#include "cgroup-internal.h"

#define CG_FIX_DELEGATE                                                                          \
	"on a systemd host agentbox gets a delegated scope from systemd for each run (it needs " \
	"busctl and a reachable systemd manager: for a user, its user manager, e.g. "            \
	"`loginctl enable-linger USER`); elsewhere set AGENTBOX_CGROUP to a delegated cgroup "   \
	"that holds no processes"

static void why_add(struct ab_cg_host *h, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void note_printf(char *buf, size_t size, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Appends "; "-separated text to h->why, truncating at its size. */
static void
why_add(struct ab_cg_host *h, const char *fmt, ...)
{
	size_t len = strlen(h->why);
	va_list ap;

	if (len + 3 >= sizeof(h->why))
		return;
	if (len > 0) {
		memcpy(h->why + len, "; ", 3);
		len += 2;
	}
	va_start(ap, fmt);
	vsnprintf(h->why + len, sizeof(h->why) - len, fmt, ap);
	va_end(ap);
}

/* snprintf for messages, where truncation is expected and fine. */
static void
note_printf(char *buf, size_t size, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, size, fmt, ap);
	va_end(ap);
}

/* Is word one of the blank-separated words of list? */
static bool
word_in(const char *list, const char *word)
{
	size_t wlen = strlen(word);

	for (const char *p = list; *p;) {
		size_t n;

		while (*p == ' ' || *p == '\n' || *p == '\t')
			p++;
		n = strcspn(p, " \n\t");
		if (n == wlen && strncmp(p, word, n) == 0)
			return true;
		p += n;
	}
	return false;
}

static bool
writable_at(int dirfd, const char *path)
{
	return faccessat(dirfd, path, W_OK, AT_EACCESS) == 0;
}

/* Makes sure parent/name is a directory (creating it if missing). Returns 0 or -errno. */
static int
cg_ensure_dir(int parent, const char *name)
{
	struct stat st;
	int r;

	/* there after the first run: one stat, and a mkdir only when it is missing */
	if (fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
		return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
	if (errno != ENOENT)
		return -errno;
	r = cg_mkdir(parent, name);
	if (r != -EEXIST)
		return r;
	if (fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

/* Turns an AGENTBOX_CGROUP value or a /proc/self/cgroup path into a path relative to root:
 * no leading or trailing '/', "." for the root cgroup. An absolute path under root loses the
 * root; any other leading '/' is read as a cgroup path ("/user.slice/x"). "." and ".."
 * components are refused. Returns 0 or -EINVAL / -ENAMETOOLONG. */
static int
rel_cgroup_path(const char *root, const char *in, char *out, size_t size)
{
	size_t rlen = strlen(root), len = 0;
	const char *p = in;

	if (strncmp(in, root, rlen) == 0 && (in[rlen] == '/' || in[rlen] == '\0'))
		p = in + rlen;
	out[0] = '\0';
	while (*p) {
		size_t n;

		while (*p == '/')
			p++;
		n = strcspn(p, "/");
		if (n == 0)
			break;
		if ((n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
			return -EINVAL;
		if (len + n + 2 > size)
			return -ENAMETOOLONG;
		if (len > 0)
			out[len++] = '/';
		memcpy(out + len, p, n);
		len += n;
		out[len] = '\0';
		p += n;
	}
	if (len == 0) {
		if (size < 2)
			return -ENAMETOOLONG;
		memcpy(out, ".", 2);
	}
	return 0;
}

/* The process's own cgroup v2 path ("0::/path" in /proc/self/cgroup), relative to root. */
static int
own_v2_cgroup(const char *root, const char *proc_self_cgroup, char *out, size_t size)
{
	cleanup_fd int fd = -1;
	cleanup_free char *buf = NULL;
	ssize_t n;

	fd = open(proc_self_cgroup, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read_all_capped(fd, 65536, &buf);
	if (n < 0)
		return (int) n;
	for (char *line = buf; line && *line;) {
		char *nl = strchr(line, '\n');

		if (nl)
			*nl = '\0';
		if (strncmp(line, "0::", 3) == 0) {
			size_t l = strlen(line);
			const char *del = " (deleted)";

			if (l > strlen(del) && strcmp(line + l - strlen(del), del) == 0)
				return -ENOENT;
			if (line[3] != '/')
				return -EINVAL;
			return rel_cgroup_path(root, line + 3, out, size);
		}
		line = nl ? nl + 1 : NULL;
	}
	return -ENOENT;
}

static bool
host_has_swap(void)
{
	char buf[4096];
	ssize_t n = read_small_file_at(AT_FDCWD, "/proc/swaps", buf, sizeof(buf));

	if (n < 0)
		return true;              /* unknown: assume the worst */
	return strchr(buf, '\n') != NULL; /* anything after the header line */
}

static void
note_swap(struct ab_cg_host *h, const char *file)
{
	if (host_has_swap())
		why_add(h,
			"swap accounting is off (no %s): a run may swap beyond its memory limit; "
			"boot with swapaccount=1",
			file);
	else
		why_add(h, "no swap accounting (no %s), which is fine: this host has no swap",
			file);
}

/* Bit mask (1 << CG_MEMORY | ...) of the v2 controllers we want that cgroup.controllers of
 * dfd offers; the text is copied to list for messages. */
static unsigned
v2_offered(int dfd, char *list, size_t size)
{
	static const int want[] = { CG_MEMORY, CG_PIDS, CG_CPU };
	unsigned mask = 0;

	if (read_small_file_at(dfd, "cgroup.controllers", list, size) < 0)
		list[0] = '\0';
	for (size_t i = 0; i < ARRAY_SIZE(want); i++)
		if (word_in(list, cg_names[want[i]]))
			mask |= 1u << want[i];
	return mask;
}

/* Enables each controller in mask in dfd's cgroup.subtree_control, one write each, so that
 * one refusal (say cpu, with realtime tasks around) does not cost the others. Returns the
 * mask of controllers now enabled; *ret_err gets the first -errno (0 when none failed). */
static unsigned
v2_enable(int dfd, unsigned mask, int *ret_err)
{
	char cur[512], val[32];
	unsigned ok = 0;

	*ret_err = 0;
	if (read_small_file_at(dfd, "cgroup.subtree_control", cur, sizeof(cur)) < 0)
		cur[0] = '\0';
	for (int i = 0; i < CG_N; i++) {
		int r = 0;

		if (!(mask & (1u << i)))
			continue;
		if (!word_in(cur, cg_names[i])) {
			snprintf(val, sizeof(val), "+%s", cg_names[i]);
			r = cg_test_subtree_write
				    ? cg_test_subtree_write(dfd, val)
				    : write_small_file_at(dfd, "cgroup.subtree_control", val);
		}
		if (r == 0)
			ok |= 1u << i;
		else if (*ret_err == 0)
			*ret_err = r;
	}
	return ok;
}

/* Is this process the only one in dfd's cgroup.procs? */
static bool
v2_only_self(int dfd)
{
	cleanup_free pid_t *pids = NULL;
	int n = cg_read_procs(dfd, &pids);

	if (n <= 0)
		return false;
	for (int i = 0; i < n; i++)
		if (pids[i] != getpid())
			return false;
	return true;
}

/* Moves this process into the leaf dfd/agentbox-supervisor. Returns 0 or -errno. */
static int
v2_move_self(int dfd)
{
	cleanup_fd int leaf = -1;
	int r = cg_ensure_dir(dfd, CG_SUPERVISOR);

	if (r < 0)
		return r;
	leaf = openat(dfd, CG_SUPERVISOR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (leaf < 0)
		return -errno;
	return write_small_file_at(leaf, "cgroup.procs", "0");
}

/* Names the first of dfd, its cgroup.procs, its cgroup.subtree_control that we cannot write,
 * or returns NULL when all are writable. */
static const char *
v2_unwritable(int dfd)
{
	if (!writable_at(dfd, "."))
		return "the directory";
	if (!writable_at(dfd, "cgroup.procs"))
		return "cgroup.procs";
	if (!writable_at(dfd, "cgroup.subtree_control"))
		return "cgroup.subtree_control";
	return NULL;
}

/* Fills the flags of a v2 host whose runs go under pfd (relative path rel). */
static void
v2_fill(struct ab_cg_host *h, int pfd, const char *rel, unsigned mask, const char *offered)
{
	h->kind = AB_CG_V2;
	snprintf(h->v2_parent, sizeof(h->v2_parent), "%s", rel);
	h->memory = mask & (1u << CG_MEMORY);
	h->pids = mask & (1u << CG_PIDS);
	h->cpu = mask & (1u << CG_CPU);
	h->cpuacct = true; /* cpu.stat usage_usec is core in v2, with or without cpu */
	h->swap = h->memory && cg_exists_at(pfd, "memory.swap.max");
	h->kill_file = cg_exists_at(pfd, "cgroup.kill");
	if (!h->memory)
		why_add(h,
			"no usable memory controller under '/%s' (cgroup.controllers: '%s'): no "
			"memory limit",
			rel, offered);
	if (!h->pids)
		why_add(h,
			"no usable pids controller under '/%s' (cgroup.controllers: '%s'): no "
			"process limit",
			rel, offered);
	if (!h->cpu)
		why_add(h,
			"no usable cpu controller under '/%s' (cgroup.controllers: '%s'): no CPU "
			"limit",
			rel, offered);
	if (h->memory && !h->swap)
		note_swap(h, "memory.swap.max");
}

/* The longest common ancestor of two relative cgroup paths, by whole components ("." when
 * they share none). */
static void
common_ancestor(const char *a, const char *b, char *out, size_t size)
{
	size_t i = 0, last = 0;

	for (; a[i] && a[i] == b[i]; i++)
		if (a[i] == '/')
			last = i;
	if ((a[i] == '\0' || a[i] == '/') && (b[i] == '\0' || b[i] == '/'))
		last = i;
	if (strcmp(a, ".") == 0 || strcmp(b, ".") == 0 || last == 0 || last >= size)
		last = 0;
	if (last == 0) {
		snprintf(out, size, ".");
		return;
	}
	memcpy(out, a, last);
	out[last] = '\0';
}

/* AGENTBOX_CGROUP=env: runs go directly under it. */
static void
probe_v2_env(struct ab_cg_host *h, int rootfd, const char *env, const char *proc_self_cgroup)
{
	cleanup_fd int dfd = -1;
	char rel[1024], own[1024], anc[1024], offered[256];
	const char *bad;
	unsigned mask;
	int r;

	if (rel_cgroup_path(h->root, env, rel, sizeof(rel)) < 0) {
		why_add(h, "AGENTBOX_CGROUP='%s' is not a cgroup path under %s", env, h->root);
		return;
	}
	dfd = openat(rootfd, rel, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		why_add(h, "AGENTBOX_CGROUP: cannot open %s/%s: %s", h->root, rel, strerror(errno));
		return;
	}
	if ((bad = v2_unwritable(dfd))) {
		why_add(h, "AGENTBOX_CGROUP '/%s' is not delegated to uid %u (%s is not writable)",
			rel, (unsigned) geteuid(), bad);
		return;
	}
	mask = v2_offered(dfd, offered, sizeof(offered));
	if (!(mask & CG_MEM_OR_PIDS)) {
		why_add(h,
			"AGENTBOX_CGROUP '/%s' offers neither the memory nor the pids controller "
			"(cgroup.controllers: '%s'); delegate them to it",
			rel, offered);
		return;
	}
	mask = v2_enable(dfd, mask, &r);
	if (!(mask & CG_MEM_OR_PIDS)) {
		why_add(h,
			"AGENTBOX_CGROUP '/%s': cannot enable controllers in its "
			"cgroup.subtree_control (%s); it must hold no processes of its own",
			rel, strerror(-r));
		return;
	}
	/* Moving a process needs write access to cgroup.procs of the common ancestor of the
	 * source cgroup (ours, where the run's child starts) and the destination. */
	if (own_v2_cgroup(h->root, proc_self_cgroup, own, sizeof(own)) == 0) {
		common_ancestor(own, rel, anc, sizeof(anc));
		strncat(anc, "/cgroup.procs", sizeof(anc) - strlen(anc) - 1);
		if (!writable_at(rootfd, anc)) {
			why_add(h,
				"processes cannot move from '/%s' to AGENTBOX_CGROUP '/%s': "
				"%s is not writable; start agentbox inside the delegated subtree",
				own, rel, anc);
			return;
		}
	}
	v2_fill(h, dfd, rel, mask, offered);
	snprintf(h->how, sizeof(h->how), "AGENTBOX_CGROUP");
}

/* Does systemd manage this cgroup tree (systemd is the init of this mount namespace's world,
 * sd_booted())? Then a cgroup is ours to write only when systemd delegated it. */
static bool
systemd_manages(bool real)
{
	if (cg_test_systemd >= 0)
		return cg_test_systemd > 0;
	return real && access("/run/systemd/system", F_OK) == 0;
}

/* Did systemd delegate dfd's cgroup rel (Delegate=yes)? Either this process asked for it
 * (cg_enter_scope made the scope rel ends in), or systemd marked it: systemd >= 251 sets the
 * xattr trusted.delegate=1 (readable by root) on a cgroup the system manager delegates, and
 * from 253 user.delegate=1 too (user managers: Debian 12's 252 sets neither there). */
static bool
delegated(int dfd, const char *rel)
{
	static const char *const names[] = { "user.delegate", "trusted.delegate" };
	const char *base = strrchr(rel, '/');
	char v[8];

	if (cg_scope_unit[0] && strcmp(base ? base + 1 : rel, cg_scope_unit) == 0)
		return true;
	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		ssize_t n = fgetxattr(dfd, names[i], v, sizeof(v));

		if (n == 1 && v[0] == '1')
			return true;
	}
	return false;
}

/* The process's own cgroup D. Usable when systemd delegated it (or no systemd manages the
 * tree, as in a container's cgroup namespace) and it holds this process alone: then this
 * process steps aside into the leaf D/agentbox-supervisor, enables the controllers in D's
 * subtree_control (legal now: D holds no process) and runs go in sibling leaves D/run-*. A
 * supervisor that already stepped aside finds itself in D/agentbox-supervisor and uses D.
 * D the root of a cgroup namespace (".", which may hold processes): runs go under
 * "agentbox/". Nothing is ever written into a cgroup systemd manages and did not delegate, nor
 * into one that holds other processes. */
static void
probe_v2_own(struct ab_cg_host *h, int rootfd, bool real, const char *proc_self_cgroup)
{
	cleanup_fd int dfd = -1, pfd = -1;
	char rel[1024], offered[256];
	const char *bad, *base;
	bool stepped_aside = false, managed = systemd_manages(real);
	unsigned mask, enabled;
	int r;

	r = own_v2_cgroup(h->root, proc_self_cgroup, rel, sizeof(rel));
	if (r < 0) {
		why_add(h, "cannot find this process's cgroup in %s: %s", proc_self_cgroup,
			strerror(-r));
		return;
	}
	base = strrchr(rel, '/');
	if (base && strcmp(base + 1, CG_SUPERVISOR) == 0) {
		rel[base - rel] = '\0';
		stepped_aside = true;
	}
	dfd = openat(rootfd, rel, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		why_add(h, "cannot open own cgroup %s/%s: %s", h->root, rel, strerror(errno));
		return;
	}
	if (managed && strcmp(rel, ".") != 0 && !delegated(dfd, rel)) {
		why_add(h,
			"own cgroup '/%s' belongs to systemd and is not delegated (no "
			"Delegate=yes), "
			"so agentbox leaves it alone%s%s",
			rel, cg_scope_why[0] ? "; " : "", cg_scope_why[0] ? cg_scope_why : "");
		return;
	}
	if ((bad = v2_unwritable(dfd))) {
		why_add(h, "own cgroup '/%s' is not delegated to uid %u (%s is not writable); %s",
			rel, (unsigned) geteuid(), bad, CG_FIX_DELEGATE);
		return;
	}
	mask = v2_offered(dfd, offered, sizeof(offered));
	if (!(mask & CG_MEM_OR_PIDS)) {
		why_add(h,
			"own cgroup '/%s' offers neither the memory nor the pids controller "
			"(cgroup.controllers: '%s'); %s",
			rel, offered, CG_FIX_DELEGATE);
		return;
	}
	if (strcmp(rel, ".") == 0) {
		/* a namespace's root may hold processes and still hand out controllers */
		enabled = v2_enable(dfd, mask, &r);
		r = enabled & CG_MEM_OR_PIDS ? cg_ensure_dir(dfd, CG_PARENT) : r;
		if (r >= 0) {
			pfd = openat(dfd, CG_PARENT,
				     O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			r = pfd < 0 ? -errno : 0;
			if (pfd >= 0)
				enabled = v2_enable(pfd, enabled, &r);
		}
		if (pfd < 0 || !(enabled & CG_MEM_OR_PIDS)) {
			why_add(h, "cannot prepare '/" CG_PARENT "' for runs: %s", strerror(-r));
			return;
		}
		v2_fill(h, pfd, CG_PARENT, enabled, offered);
		snprintf(h->how, sizeof(h->how), "the cgroup namespace's root");
		return;
	}
	if (!stepped_aside) {
		/* No internal processes: D can hand controllers to its children only once it
		 * holds no process, so this process, the only one, moves into a leaf first. */
		if (!v2_only_self(dfd)) {
			why_add(h,
				"own cgroup '/%s' holds other processes, so it cannot hand "
				"controllers to run cgroups; %s",
				rel, CG_FIX_DELEGATE);
			return;
		}
		r = v2_move_self(dfd);
		if (r < 0) {
			why_add(h, "cannot move into '/%s/" CG_SUPERVISOR "': %s", rel,
				strerror(-r));
			return;
		}
	}
	enabled = v2_enable(dfd, mask, &r);
	if (!(enabled & CG_MEM_OR_PIDS)) {
		why_add(h, "cannot enable controllers in '/%s/cgroup.subtree_control': %s", rel,
			strerror(-r));
		return;
	}
	v2_fill(h, dfd, rel, enabled, offered);
	snprintf(h->how, sizeof(h->how), "%s",
		 !managed           ? "its own cgroup"
		 : cg_scope_unit[0] ? "a scope systemd delegated to this run"
				    : "a cgroup systemd delegated");
}

/* Returns 1 when root is no cgroup v2 hierarchy with controllers (try v1), 0 when decided
 * (h->kind is V2, or NONE with why set), or -errno. v2note gets why v2 was passed over. */
static int
probe_v2(struct ab_cg_host *h, int rootfd, bool real, const char *proc_self_cgroup, char *v2note,
	 size_t size)
{
	char ctrls[512];
	const char *env;
	ssize_t n;

	if (real) {
		struct statfs sf;

		if (fstatfs(rootfd, &sf) < 0)
			return -errno;
		if (sf.f_type != CGROUP2_SUPER_MAGIC) {
			/* hybrid: a cgroup2 mount at unified, usually without controllers */
			n = read_small_file_at(rootfd, "unified/cgroup.controllers", ctrls,
					       sizeof(ctrls));
			if (n >= 0 && !word_in(ctrls, "memory") && !word_in(ctrls, "pids"))
				note_printf(
					v2note, size,
					"the cgroup2 mount at %s/unified has no memory or pids "
					"controller (cgroup.controllers: '%s'; they are bound to "
					"cgroup v1)",
					h->root, ctrls);
			else if (n >= 0)
				note_printf(
					v2note, size,
					"the cgroup2 mount at %s/unified has controllers '%s', but "
					"agentbox uses cgroup v2 only when it is mounted at %s",
					h->root, ctrls, h->root);
			return 1;
		}
	}
	n = read_small_file_at(rootfd, "cgroup.controllers", ctrls, sizeof(ctrls));
	if (n == -ENOENT)
		return 1;
	if (n < 0)
		return (int) n;
	if (!word_in(ctrls, "memory") && !word_in(ctrls, "pids")) {
		note_printf(v2note, size,
			    "the cgroup2 hierarchy at %s has no memory or pids controller "
			    "(cgroup.controllers: '%s'; they are bound to cgroup v1)",
			    h->root, ctrls);
		return 1;
	}
	env = cfg()->cgroup;
	if (env && *env)
		probe_v2_env(h, rootfd, env, proc_self_cgroup);
	else
		probe_v2_own(h, rootfd, real, proc_self_cgroup);
	return 0;
}

static void
probe_v1(struct ab_cg_host *h, int rootfd, bool real)
{
	const char *missing[CG_N] = { NULL };
	bool usable[CG_N] = { false }, any_dir = false, any_usable = false;
	bool swap = false;

	for (int i = 0; i < CG_N; i++) {
		cleanup_fd int hfd = -1;
		int r;

		hfd = openat(rootfd, cg_names[i], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (hfd < 0) {
			missing[i] = "not mounted";
			continue;
		}
		if (real) {
			struct statfs sf;

			if (fstatfs(hfd, &sf) < 0 || sf.f_type != CGROUP_SUPER_MAGIC) {
				missing[i] = "not a cgroup v1 hierarchy";
				continue;
			}
		} else if (!cg_exists_at(hfd, "cgroup.procs")) {
			missing[i] = "not a cgroup v1 hierarchy";
			continue;
		}
		any_dir = true;
		if (!writable_at(hfd, ".") && !writable_at(hfd, CG_PARENT)) {
			missing[i] = "not writable";
			continue;
		}
		r = cg_ensure_dir(hfd, CG_PARENT);
		if (r < 0 || !writable_at(hfd, CG_PARENT)) {
			missing[i] = "cannot create or write " CG_PARENT "/";
			continue;
		}
		if (i == CG_MEMORY)
			swap = cg_exists_at(hfd, "memory.memsw.limit_in_bytes");
		usable[i] = true;
		any_usable = true;
	}
	if (!any_dir) {
		why_add(h, "no cgroup v1 memory, pids, cpu or cpuacct hierarchy under %s", h->root);
		return;
	}
	if (!any_usable) {
		if (geteuid() != 0)
			why_add(h,
				"cgroup v1 hierarchies are writable only by root; run as root or "
				"on a cgroup v2 host with delegation");
		else
			why_add(h, "the cgroup v1 hierarchies under %s are not writable", h->root);
		return;
	}
	if (!usable[CG_MEMORY] && !usable[CG_PIDS]) {
		why_add(h,
			"cgroup v1: neither the memory (%s) nor the pids (%s) hierarchy is usable",
			missing[CG_MEMORY], missing[CG_PIDS]);
		return;
	}
	h->kind = AB_CG_V1;
	h->memory = usable[CG_MEMORY];
	h->pids = usable[CG_PIDS];
	h->cpu = usable[CG_CPU];
	h->cpuacct = usable[CG_CPUACCT];
	h->swap = swap;
	h->kill_file = false;
	snprintf(h->how, sizeof(h->how), "the cgroup v1 hierarchies");
	for (int i = 0; i < CG_N; i++)
		if (!usable[i])
			why_add(h, "cgroup v1 %s: %s (%s)", cg_names[i], missing[i],
				i == CG_MEMORY ? "no memory limit"
				: i == CG_PIDS ? "no process limit"
				: i == CG_CPU  ? "no CPU limit"
					       : "no CPU usage");
	if (h->memory && !h->swap)
		note_swap(h, "memory.memsw.limit_in_bytes");
}

int
cg_probe(const char *root, const char *proc_self_cgroup, struct ab_cg_host *ret)
{
	struct ab_cg_host h;
	cleanup_fd int rootfd = -1;
	char v2note[384] = "";
	bool real;
	int r;

	memset(&h, 0, sizeof(h));
	h.kind = AB_CG_NONE;
	if (!root)
		root = CG_ROOT_DEFAULT;
	if (!proc_self_cgroup)
		proc_self_cgroup = "/proc/self/cgroup";
	real = strcmp(root, CG_ROOT_DEFAULT) == 0;
	if (strlen(root) >= sizeof(h.root) || root[0] != '/')
		return -EINVAL;
	memcpy(h.root, root, strlen(root) + 1);

	rootfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0) {
		if (errno != ENOENT && errno != ENOTDIR)
			return -errno;
		why_add(&h, "no cgroup filesystem at %s", root);
		*ret = h;
		return 0;
	}
	r = probe_v2(&h, rootfd, real, proc_self_cgroup, v2note, sizeof(v2note));
	if (r < 0)
		return r;
	if (r > 0) {
		probe_v1(&h, rootfd, real);
		if (h.kind == AB_CG_NONE && v2note[0]) {
			char v1why[sizeof(h.why)];

			memcpy(v1why, h.why, sizeof(v1why));
			h.why[0] = '\0';
			why_add(&h, "%s", v2note);
			why_add(&h, "%s", v1why);
		}
		if (h.kind == AB_CG_NONE && cfg()->cgroup)
			why_add(&h, "AGENTBOX_CGROUP is ignored: no cgroup v2 controllers here");
	}
	*ret = h;
	return 0;
}

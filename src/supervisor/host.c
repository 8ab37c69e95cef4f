#include "host.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "../init/landlock.h"
#include "../spec/cfg.h"
#include "../util/fdutil.h"
#include "../util/macro.h"
#include "../util/path.h"
#include "../util/strv.h"
#include "../util/xalloc.h"
#include "config.h"

static void
find_init(struct ab_host *h)
{
	const char *env = cfg()->init;
	cleanup_free char *p =
		path_helper(env && access(env, X_OK) == 0 ? env : NULL, "agentbox-init");

	snprintf(h->init_path, sizeof(h->init_path), "%s", p);
	if (access(h->init_path, X_OK) != 0)
		h->init_path[0] = '\0';
}

static bool
has_cap_sys_admin(void)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct data[2] = { { 0 } };

	if (syscall(SYS_capget, &hdr, data) < 0)
		return false;
	return data[CAP_TO_INDEX(CAP_SYS_ADMIN)].effective & CAP_TO_MASK(CAP_SYS_ADMIN);
}

/* Which container (if any) this is, from the marks engines leave, and whether this is WSL.
 * Only for the words of a fix: nothing is decided on it. */
static void
detect_env(struct ab_host *h)
{
	char p[PATH_MAX], buf[256];
	cleanup_free char *mi = NULL;
	cleanup_fd int fd = -1;
	bool masked, overlay_root;

	/* engines mask /proc/kcore (and more) with a bind mount; their root is an overlay */
	snprintf(p, sizeof(p), "%s/self/mountinfo", cfg_proc_root());
	fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || read_all_capped(fd, 1 << 20, &mi) < 0)
		mi = NULL;
	masked = mi && strstr(mi, " /proc/kcore ");
	overlay_root = false;
	for (const char *l = mi; l && *l;) {
		const char *nl = strchr(l, '\n');
		const char *dash = strstr(l, " - ");

		/* "ID PARENT MAJ:MIN ROOT / OPTS ... - FSTYPE ...": the mount on "/" */
		if (dash && (!nl || dash < nl) && strstr(l, " / / ") && strstr(l, " / / ") < dash &&
		    (strncmp(dash, " - overlay ", 11) == 0 ||
		     strncmp(dash, " - fuse-overlayfs ", 18) == 0))
			overlay_root = true;
		l = nl ? nl + 1 : NULL;
	}
	if (access("/var/run/secrets/kubernetes.io", F_OK) == 0)
		snprintf(h->container, sizeof(h->container), "kubernetes");
	else if (access("/run/.containerenv", F_OK) == 0)
		snprintf(h->container, sizeof(h->container), "podman");
	else if (access("/.dockerenv", F_OK) == 0 && (masked || overlay_root))
		snprintf(h->container, sizeof(h->container),
			 "docker"); /* not an image's leftover */
	else if (masked)
		snprintf(h->container, sizeof(h->container), "container");
	snprintf(p, sizeof(p), "%s/sys/kernel/osrelease", cfg_proc_root());
	if (read_small_file_at(AT_FDCWD, p, buf, sizeof(buf)) > 0)
		h->wsl = strcasestr(buf, "microsoft") || strcasestr(buf, "wsl");
}

int
host_probe_paths(struct ab_host *h, struct ab_err *err)
{
	const char *env = cfg()->bwrap;
	struct stat st;
	char buf[16];

	(void) err;
	memset(h, 0, sizeof(*h));
	h->is_root = geteuid() == 0;
	h->cap_sys_admin = h->is_root && has_cap_sys_admin();
	detect_env(h);
	if (env && env[0] == '/')
		snprintf(h->bwrap_path, sizeof(h->bwrap_path), "%s", env);
	else if (access("/usr/bin/bwrap", X_OK) == 0)
		snprintf(h->bwrap_path, sizeof(h->bwrap_path), "/usr/bin/bwrap");
	else {
		cleanup_free char *found = path_search(cfg()->path, "bwrap");

		snprintf(h->bwrap_path, sizeof(h->bwrap_path), "%s", found ? found : "");
	}
	if (h->bwrap_path[0] && stat(h->bwrap_path, &st) == 0)
		h->bwrap_setuid = (st.st_mode & S_ISUID) != 0;
	else
		h->bwrap_path[0] = '\0';
	find_init(h);
	h->landlock_abi = ab_landlock_abi();
	{
		/* Ubuntu 23.10+: unprivileged user namespaces only for AppArmor profiles that
		 * allow them (cfg proc_root: a fake /proc in tests) */
		char p[PATH_MAX];

		snprintf(p, sizeof(p), "%s/sys/kernel/apparmor_restrict_unprivileged_userns",
			 cfg_proc_root());
		if (read_small_file_at(AT_FDCWD, p, buf, sizeof(buf)) > 0)
			h->apparmor_restrict_userns = buf[0] == '1';
	}
	(void) cg_probe(NULL, NULL, &h->cg);
	return 0;
}

const char *
host_userns_fix(const struct ab_host *h)
{
	if (h->apparmor_restrict_userns)
		return "AppArmor restricts unprivileged user namespaces "
		       "(kernel.apparmor_restrict_unprivileged_userns=1): install agentbox's "
		       "profile, "
		       "which lets bwrap and agentbox-supervisor create them and changes nothing "
		       "else: sudo install -m 0644 " AB_APPARMOR_PROFILE
		       " /etc/apparmor.d/agentbox "
		       "&& sudo apparmor_parser -r /etc/apparmor.d/agentbox (the same file is "
		       "contrib/apparmor/agentbox in the source tree); do not turn the restriction "
		       "off";
	if (strcmp(h->container, "docker") == 0)
		return "Docker's default seccomp profile refuses user namespaces to a container "
		       "without CAP_SYS_ADMIN: docker run --security-opt seccomp=" AB_CONTAINER_DIR
		       "/seccomp.json (contrib/container/seccomp.json: the default profile with "
		       "user "
		       "namespaces allowed); never --privileged";
	if (strcmp(h->container, "kubernetes") == 0)
		return "the pod's seccomp profile refuses user namespaces: securityContext."
		       "seccompProfile {type: Localhost, localhostProfile: agentbox.json} with "
		       "contrib/container/seccomp.json on the node (README: Where it runs)";
	if (h->container[0])
		return "this container refuses user namespaces: start it with the flags in "
		       "contrib/container/run-flags (a seccomp profile that allows them), or run "
		       "agentbox outside it";
	return "enable unprivileged user namespaces (sysctl user.max_user_namespaces > 0, and "
	       "kernel.unprivileged_userns_clone=1 where it exists); run `agentbox doctor`";
}

const char *
host_proc_fix(const struct ab_host *h)
{
	if (strcmp(h->container, "podman") == 0)
		return "podman masks parts of /proc, and bwrap may not mount a fresh /proc over a "
		       "masked one: podman run --security-opt unmask=/proc/* (contrib/container/"
		       "run-flags)";
	if (strcmp(h->container, "docker") == 0)
		return "Docker masks parts of /proc, and bwrap may not mount a fresh /proc over a "
		       "masked one: docker run --security-opt systempaths=unconfined";
	if (strcmp(h->container, "kubernetes") == 0)
		return "Kubernetes masks parts of /proc: the container's "
		       "securityContext.procMount: "
		       "Unmasked (with the pod's hostUsers: false; README: Where it runs)";
	return "something masks parts of /proc here (a container?), and bwrap may not mount a "
	       "fresh /proc over it: podman run --security-opt unmask=/proc/*, docker run "
	       "--security-opt systempaths=unconfined, Kubernetes procMount: Unmasked; or run "
	       "agentbox outside the container";
}

const char *
host_hostname_fix(const struct ab_host *h)
{
	(void) h;
	return "the container's seccomp profile refuses sethostname without CAP_SYS_ADMIN: start "
	       "it with --security-opt seccomp=" AB_CONTAINER_DIR "/seccomp.json "
	       "(contrib/container/seccomp.json: the engine's default profile plus sethostname; "
	       "not --cap-add SYS_ADMIN, which widens the whole container and makes a non-root "
	       "bwrap refuse to run)";
}

/* Runs bwrap with extra options and /usr/bin/true, as uid/gid when drop. Captures bwrap's
 * stderr into errbuf. Returns the exit status (0 = worked), or -errno. Bounded at 10 s. */
static int
probe_run(const char *bwrap, const char *const *opts, bool drop, uid_t uid, gid_t gid, char *errbuf,
	  size_t errsize)
{
	static char *const envp[] = { "PATH=/usr/bin:/bin", NULL };
	struct strv av = { 0 };
	int ep[2];
	pid_t pid;
	int ws = 0, r;
	size_t len = 0;
	int64_t deadline;

	strv_push(&av, "bwrap");
	for (const char *const *o = opts; *o; o++)
		strv_push(&av, *o);
	strv_push_n(&av, 11, "--ro-bind", "/usr", "/usr", "--symlink", "usr/lib", "/lib",
		    "--symlink", "usr/lib64", "/lib64", "--symlink", "usr/bin");
	strv_push_n(&av, 3, "/bin", "--", "/usr/bin/true");
	if (pipe2(ep, O_CLOEXEC) < 0) {
		strv_done(&av);
		return -errno;
	}
	pid = fork();
	if (pid < 0) {
		r = -errno;
		strv_done(&av);
		(void) close(ep[0]);
		(void) close(ep[1]);
		return r;
	}
	if (pid == 0) {
		int nul = open("/dev/null", O_RDWR);

		if (nul < 0 || dup2(nul, 0) < 0 || dup2(nul, 1) < 0 || dup2(ep[1], 2) < 0)
			_exit(126);
		if (drop && (setgroups(0, NULL) < 0 || setresgid(gid, gid, gid) < 0 ||
			     setresuid(uid, uid, uid) < 0))
			_exit(126);
		(void) prctl(PR_SET_PDEATHSIG, SIGKILL);
		(void) fds_close_from(3);
		execve(bwrap, strv_array(&av), envp);
		_exit(127);
	}
	(void) close(ep[1]);
	strv_done(&av);
	deadline = now_ms() + 10000;
	errbuf[0] = '\0';
	for (;;) {
		struct pollfd p = { .fd = ep[0], .events = POLLIN };
		int64_t left = deadline - now_ms();
		ssize_t n;

		if (left <= 0 || poll(&p, 1, (int) left) <= 0) {
			(void) kill(pid, SIGKILL);
			break;
		}
		n = read(ep[0], errbuf + len, errsize - 1 - len);
		if (n <= 0)
			break;
		len += (size_t) n;
		if (len >= errsize - 1)
			break;
	}
	errbuf[len] = '\0';
	while (len > 0 && errbuf[len - 1] == '\n')
		errbuf[--len] = '\0';
	(void) close(ep[0]);
	if (RETRY_EINTR(waitpid(pid, &ws, 0)) < 0)
		return -errno;
	if (WIFEXITED(ws))
		return WEXITSTATUS(ws);
	return 128 + WTERMSIG(ws);
}

int
host_probe_sandbox(struct ab_host *h, bool drop, uid_t uid, gid_t gid)
{
	/* Everything a run asks of bwrap that a host may refuse; when that fails, each part on
	 * its own on top of the bare namespaces, so the report and doctor name what is missing
	 * (inside containers several are: /proc masked, sethostname refused by seccomp). */
	static const char *const full[] = { "--unshare-all",
					    "--unshare-user",
					    "--disable-userns",
					    "--die-with-parent",
					    "--hostname",
					    "sandbox",
					    "--proc",
					    "/proc",
					    "--dev",
					    "/dev",
					    "--size",
					    "1048576",
					    "--tmpfs",
					    "/tmp",
					    NULL };
	static const char *const bare[] = { "--unshare-all", "--unshare-user", "--die-with-parent",
					    NULL };
	/* bwrap sets max_user_namespaces through the sandbox's own /proc */
	static const char *const with_disable[] = { "--unshare-all",
						    "--unshare-user",
						    "--die-with-parent",
						    "--proc",
						    "/proc",
						    "--disable-userns",
						    NULL };
	static const char *const with_proc[] = {
		"--unshare-all", "--unshare-user", "--die-with-parent", "--proc", "/proc", NULL
	};
	static const char *const with_hostname[] = { "--unshare-all",     "--unshare-user",
						     "--die-with-parent", "--hostname",
						     "sandbox",           NULL };
	char buf[512];
	int r;

	if (!h->bwrap_path[0])
		return -ENOENT;
	r = probe_run(h->bwrap_path, full, drop, uid, gid, buf, sizeof(buf));
	if (r == 0) {
		h->bwrap_runs = h->has_disable_userns = h->proc_mountable = h->hostname_ok = true;
		return 0;
	}
	snprintf(h->bwrap_error, sizeof(h->bwrap_error), "%s", buf);
	r = probe_run(h->bwrap_path, bare, drop, uid, gid, buf, sizeof(buf));
	if (r != 0) {
		snprintf(h->bwrap_error, sizeof(h->bwrap_error), "%s",
			 buf[0] ? buf : "bwrap failed");
		return 0;
	}
	h->bwrap_runs = true;
	h->proc_mountable =
		probe_run(h->bwrap_path, with_proc, drop, uid, gid, buf, sizeof(buf)) == 0;
	if (!h->proc_mountable) {
		snprintf(h->proc_error, sizeof(h->proc_error), "%.255s", buf);
		snprintf(h->disable_error, sizeof(h->disable_error),
			 "not tested: bwrap needs a fresh /proc for it");
	} else {
		h->has_disable_userns = probe_run(h->bwrap_path, with_disable, drop, uid, gid, buf,
						  sizeof(buf)) == 0;
		if (!h->has_disable_userns)
			snprintf(h->disable_error, sizeof(h->disable_error), "%.255s", buf);
	}
	h->hostname_ok =
		probe_run(h->bwrap_path, with_hostname, drop, uid, gid, buf, sizeof(buf)) == 0;
	if (!h->hostname_ok)
		snprintf(h->hostname_error, sizeof(h->hostname_error), "%.255s", buf);
	return 0;
}

/* The facts a cached probe result depends on: the bwrap binary's identity, this boot, the
 * uid the sandbox runs as, and the sysctls that decide whether user namespaces work. */
static void
probe_key(const struct ab_host *h, uid_t uid, char *buf, size_t size)
{
	char boot[64] = "", maxns[32] = "", clone[32] = "";
	struct stat st = { 0 };

	(void) stat(h->bwrap_path, &st);
	(void) read_small_file_at(AT_FDCWD, "/proc/sys/kernel/random/boot_id", boot, sizeof(boot));
	(void) read_small_file_at(AT_FDCWD, "/proc/sys/user/max_user_namespaces", maxns,
				  sizeof(maxns));
	(void) read_small_file_at(AT_FDCWD, "/proc/sys/kernel/unprivileged_userns_clone", clone,
				  sizeof(clone));
	snprintf(buf, size,
		 "v3 bwrap=%s:%llu:%llu:%lld:%lld boot=%s uid=%u maxns=%s clone=%s aa=%d",
		 h->bwrap_path, (unsigned long long) st.st_dev, (unsigned long long) st.st_ino,
		 (long long) st.st_size, (long long) st.st_mtime, boot, (unsigned) uid, maxns,
		 clone, h->apparmor_restrict_userns);
}

int
host_probe_sandbox_cached(struct ab_host *h, bool drop, uid_t uid, gid_t gid, int cache_dirfd)
{
	char key[PATH_MAX + 256], line[PATH_MAX + 400], name[64];
	cleanup_fd int fd = -1;
	ssize_t n;
	int runs, dis, proc, hn, r;

	if (cache_dirfd < 0 || !h->bwrap_path[0])
		return host_probe_sandbox(h, drop, uid, gid);
	probe_key(h, drop ? uid : geteuid(), key, sizeof(key));
	snprintf(name, sizeof(name), "probe-%u", (unsigned) (drop ? uid : geteuid()));
	n = read_small_file_at(cache_dirfd, name, line, sizeof(line));
	if (n > 0) {
		char *nl = strchr(line, '\n');

		if (nl && (size_t) (nl - line) == strlen(key) &&
		    strncmp(line, key, strlen(key)) == 0 &&
		    sscanf(nl + 1, "runs=%d disable=%d proc=%d hostname=%d", &runs, &dis, &proc,
			   &hn) == 4 &&
		    runs == 1) {
			h->bwrap_runs = true;
			h->has_disable_userns = dis;
			h->proc_mountable = proc;
			h->hostname_ok = hn;
			h->probe_cached = true;
			return 0;
		}
	}
	r = host_probe_sandbox(h, drop, uid, gid);
	if (r < 0 || !h->bwrap_runs)
		return r; /* failures are never cached: the next start probes again */
	snprintf(line, sizeof(line), "%s\nruns=1 disable=%d proc=%d hostname=%d\n", key,
		 h->has_disable_userns, h->proc_mountable, h->hostname_ok);
	{
		char tmp[80];

		snprintf(tmp, sizeof(tmp), "%s.tmp%d", name, (int) getpid());
		fd = openat(cache_dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			    0600);
		if (fd >= 0) {
			if (write_all(fd, line, strlen(line)) == 0)
				(void) renameat(cache_dirfd, tmp, cache_dirfd, name);
			else
				(void) unlinkat(cache_dirfd, tmp, 0);
		}
	}
	return 0;
}

void
host_probe_forget(int cache_dirfd, uid_t uid)
{
	char name[64];

	snprintf(name, sizeof(name), "probe-%u", (unsigned) uid);
	if (cache_dirfd >= 0)
		(void) unlinkat(cache_dirfd, name, 0);
}

/* Unit tests for binds.c (what may be mounted, where) and hostfs.c (how a caller's path
 * becomes one checked fd): the never-mount list on path strings, sandbox destinations, and
 * on a private tree under /tmp: symlinks followed only when root's or the caller's (as root,
 * a link can be given to another uid with lchown; otherwise SKIP), HOSTFS_NOFOLLOW,
 * HOSTFS_LINK_OK, HOSTFS_ANY_LINK, a path through a FIFO or a file, "..", and the refusals
 * by use (workspace, input, collect), --allow-bind and the runs directory. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

#include "src/fs/hostfs.h"
#include "src/supervisor/binds.h"
#include "src/util/macro.h"
#include "src/util/xalloc.h"
#include "tests/tap.h"

#define OTHER_UID 12345
#define THIRD_UID 12346

static char T[] = "/tmp/ab-binds-XXXXXX";
static bool have_mnt;

static char *
tp(const char *rel)
{
	return xasprintf("%s/%s", T, rel);
}

static void
refusal_is(const char *real, const char *home, const char *want)
{
	const char *got = refusal_mount(real, home);

	if (want)
		TAP_STREQ(got, want, "refusal_mount('%s') refuses", real);
	else
		TAP_OK(got == NULL, "refusal_mount('%s') allows", real);
	if (!want && got)
		printf("#   got: '%s'\n", got);
}

#define R_KERNEL  "a kernel, device or runtime directory (sockets, host state)"
#define R_SYSTEM  "a system-wide directory: mount the specific subdirectory you need"
#define R_SECRETS "host secrets under /etc"
#define R_CRED    "a credentials directory or file"
#define R_CREDDIR "a credentials directory"
#define R_HOME    "a home directory: mount the project subdirectory you need"
#define R_ROOTDOT "a dot-directory of root's home"

static void
test_refusal_mount(void)
{
	static const struct {
		const char *path, *want; /* want NULL: allowed */
	} cases[] = {
		{ "/proc", R_KERNEL },
		{ "/proc/1/root", R_KERNEL },
		{ "/sys/fs/cgroup", R_KERNEL },
		{ "/dev/null", R_KERNEL },
		{ "/run/user/1000/bus", R_KERNEL },
		{ "/var/run/docker.sock", R_KERNEL },
		{ "/boot/efi", R_KERNEL },
		{ "/", R_SYSTEM },
		{ "/etc", R_SYSTEM },
		{ "/tmp", R_SYSTEM },
		{ "/var/tmp", R_SYSTEM },
		{ "/home", R_SYSTEM },
		{ "/root", R_SYSTEM },
		{ "/var", R_SYSTEM },
		{ "/etc/shadow", R_SECRETS },
		{ "/etc/gshadow", R_SECRETS },
		{ "/etc/ssh/ssh_host_ed25519_key", R_SECRETS },
		{ "/etc/sudoers.d", R_SECRETS },
		{ "/etc/security/opasswd", R_SECRETS },
		{ "/etc/ssl/private", R_SECRETS },
		{ "/home/alice", R_HOME },
		{ "/nonexistent-ab/.ssh", R_CRED },
		{ "/nonexistent-ab/.ssh/id_ed25519", R_CRED },
		{ "/nonexistent-ab/.gnupg", R_CRED },
		{ "/nonexistent-ab/.aws/credentials", R_CRED },
		{ "/nonexistent-ab/.azure", R_CRED },
		{ "/nonexistent-ab/.kube/config", R_CRED },
		{ "/nonexistent-ab/.docker/config.json", R_CRED },
		{ "/nonexistent-ab/.netrc", R_CRED },
		{ "/nonexistent-ab/.npmrc", R_CRED },
		{ "/nonexistent-ab/.pypirc", R_CRED },
		{ "/nonexistent-ab/.git-credentials", R_CRED },
		{ "/nonexistent-ab/.password-store/x.gpg", R_CRED },
		{ "/home/alice/.ssh", R_CRED },
		{ "/root/.ssh", R_CRED },
		{ "/nonexistent-ab/.config/gcloud", R_CREDDIR },
		{ "/nonexistent-ab/.config/gh/hosts.yml", R_CREDDIR },
		{ "/nonexistent-ab/.config/hub", R_CREDDIR },
		{ "/nonexistent-ab/.local/share/keyrings", R_CREDDIR },
		{ "/root/.bashrc", R_ROOTDOT },
		{ "/root/.cache", R_ROOTDOT },
		/* allowed: near misses of each rule */
		{ "/procfs", NULL },
		{ "/devices-ab", NULL },
		{ "/etc/ssl/certs", NULL },
		{ "/etc/shadow-ab", NULL },
		{ "/home/alice/project", NULL },
		{ "/root/project", NULL },
		{ "/root/.cache/pip", NULL },
		{ "/nonexistent-ab/.sshx", NULL },
		{ "/nonexistent-ab/my.ssh", NULL },
		{ "/nonexistent-ab/.config", NULL },
		{ "/nonexistent-ab/.config/ghost", NULL },
		{ "/nonexistent-ab/ssh", NULL },
		{ "/var/lib/ab", NULL },
		{ "/tmp/ab", NULL },
		{ "/usr", NULL },
		{ "/opt/node-v20", NULL },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		refusal_is(cases[i].path, NULL, cases[i].want);
	refusal_is("/srv/me", "/srv/me",
		   "your home directory: mount the project subdirectory you "
		   "need");
	refusal_is("/srv/me/proj", "/srv/me", NULL);
	refusal_is("/srv/me", "srv/me", NULL); /* a relative $HOME means nothing */
	refusal_is("/srv/me", NULL, NULL);
}

/* issue 25: a project with a token file is a workspace (the run hides the file); one with a
 * credential directory, or a token name that is a directory, is still refused, and so is
 * everything for --ro-bind and --input */
static void
test_workspace_tokens(void)
{
	static const char *const holds = "a directory that holds credentials (e.g. .ssh, .aws)";
	char dir[] = "/tmp/ab-binds-ws-XXXXXX";
	cleanup_free char *npmrc = NULL, *ssh = NULL, *pypi = NULL;
	const char *got;

	if (!mkdtemp(dir)) {
		TAP_OK(0, "mkdtemp for the token file tests");
		return;
	}
	npmrc = xasprintf("%s/.npmrc", dir);
	pypi = xasprintf("%s/.pypirc", dir);
	ssh = xasprintf("%s/.ssh", dir);
	{
		FILE *f = fopen(npmrc, "we");

		if (!f || fputs("package-lock=false\n", f) < 0 || fclose(f) != 0 ||
		    symlink("/nonexistent-ab/.pypirc", pypi) < 0)
			abort();
	}
	got = refusal_workspace(dir, NULL);
	TAP_OK(got == NULL, "workspace with a .npmrc file and a .pypirc link: allowed (%s)",
	       got ? got : "");
	TAP_STREQ(refusal_mount(dir, NULL), holds,
		  "the same directory for --ro-bind or --input: still refused");
	for (const char *const *t = refusal_token_files; *t; t++)
		TAP_OK(refusal_is_token_file(*t), "%s is a token file", *t);
	TAP_OK(!refusal_is_token_file(".ssh") && !refusal_is_token_file(".aws") &&
		       !refusal_is_token_file(".docker") && !refusal_is_token_file("npmrc"),
	       "credential directories are not token files");
	if (mkdir(ssh, 0700) < 0)
		abort();
	TAP_STREQ(refusal_workspace(dir, NULL), holds, "workspace with a .ssh directory: refused");
	(void) rmdir(ssh);
	(void) unlink(npmrc);
	if (mkdir(npmrc, 0700) < 0)
		abort();
	TAP_STREQ(
		refusal_workspace(dir, NULL), holds,
		"workspace with a .npmrc that is a directory: refused (nothing to lay a file on)");
	(void) rmdir(npmrc);
	TAP_STREQ(refusal_workspace(npmrc, NULL), R_CRED,
		  "a token file itself as the workspace: refused");
	TAP_STREQ(refusal_workspace("/home/alice", NULL), R_HOME,
		  "a home directory: still refused");
	(void) unlink(pypi);
	(void) rmdir(dir);
}

static void
bad_dest_is(const char *dest, const char *want)
{
	const char *got = binds_bad_dest(dest);

	if (want)
		TAP_STREQ(got, want, "binds_bad_dest('%s')", dest);
	else
		TAP_OK(got == NULL, "binds_bad_dest('%s'): fine", dest);
	if (!want && got)
		printf("#   got: '%s'\n", got);
}

static void
test_bad_dest(void)
{
	static const char *const norm = "must be a normalized path (no //, ., .., trailing /)";
	static const char *const reserved =
		"is reserved by agentbox (/work, /usr, /etc, /proc, /dev, /tmp...)";
	static const char *const bad_norm[] = { "/a//b", "/a/./b", "/a/../b", "/a/.", "/a/..",
						"/a/",   "/.",     "/..",     "//",   NULL };
	static const char *const bad_res[] = {
		"/work", "/work/x", "/usr",       "/usr/local/lib",
		"/etc",  "/etc/x",  "/proc",      "/dev",
		"/tmp",  "/tmp/x",  "/bin",       "/sbin",
		"/lib",  "/lib64",  "/.agentbox", "/.agentbox/script",
		NULL,
	};
	static const char *const good[] = { "/data",     "/opt/venv", "/workspace", "/usrx",
					    "/etcetera", "/libs",     "/tmpdata",   "/.agent",
					    "/a.b/c",    "/a/..b",    "/a/.b",      NULL };

	bad_dest_is("relative/path", "must be an absolute path");
	bad_dest_is("", "must be an absolute path");
	bad_dest_is("/", "cannot be /");
	for (const char *const *d = bad_norm; *d; d++)
		bad_dest_is(*d, norm);
	for (const char *const *d = bad_res; *d; d++)
		bad_dest_is(*d, reserved);
	for (const char *const *d = good; *d; d++)
		bad_dest_is(*d, NULL);
}

/* Is fd the object at path (lstat: a link is itself)? */
static bool
is(int fd, const char *rel)
{
	struct stat a, b;
	char *p = rel[0] == '/' ? xstrdup(rel) : tp(rel);
	bool ok = fd >= 0 && fstat(fd, &a) == 0 && lstat(p, &b) == 0 && a.st_dev == b.st_dev &&
		  a.st_ino == b.st_ino;

	free(p);
	return ok;
}

/* hostfs_open(T/rel, flags): the fd is the object at T/want, or the call fails with -want_err
 * (and the message contains msg, when given). */
static void
open_is(const char *rel, unsigned flags, const char *want, int want_err, const char *msg)
{
	struct ab_err err = { 0 };
	char *p = rel[0] == '/' ? xstrdup(rel) : tp(rel);
	int fd = hostfs_open(p, flags, "--test", &err);

	if (want) {
		TAP_OK(is(fd, want), "hostfs_open('%s', %#x) reaches %s", rel, flags, want);
		if (fd < 0)
			printf("#   got: %d (%s)\n", fd, err.msg);
	} else {
		TAP_OK(fd == -want_err, "hostfs_open('%s', %#x) fails with %s", rel, flags,
		       strerrorname_np(want_err));
		if (fd != -want_err)
			printf("#   got: %d (%s)\n", fd, err.msg);
		if (msg)
			TAP_OK(strstr(err.msg, msg) != NULL, "... and says '%s'", msg);
		if (msg && !strstr(err.msg, msg))
			printf("#   got: '%s'\n", err.msg);
	}
	if (fd >= 0)
		close(fd);
	free(p);
}

static int
mk(void)
{
	char *p;
	int fd, r = 0;

	if (!mkdtemp(T) || chmod(T, 0755) < 0)
		return -1;
	p = tp("dir");
	r |= mkdir(p, 0755);
	free(p);
	p = tp("dir/sub");
	r |= mkdir(p, 0755);
	free(p);
	p = tp("dir/file");
	fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	r |= fd < 0 ? -1 : close(fd);
	free(p);
	p = tp("fifo");
	r |= mkfifo(p, 0644);
	free(p);
	{
		static const char *const links[][2] = {
			{ "trusted", "dir" }, { "deep", "dir/sub" },  { "tofile", "dir/file" },
			{ "loop1", "loop2" }, { "loop2", "loop1" },   { "dangling", "nope" },
			{ "dir/up", ".." },   { "untrusted", "dir" }, { "l_root", "dir" },
			{ "l_mine", "dir" },  { "l_other", "dir" },
		};

		for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++) {
			p = tp(links[i][0]);
			r |= symlink(links[i][1], p);
			free(p);
		}
		p = tp("dir");
		{
			char *abs = tp("abs");

			r |= symlink(p, abs);
			free(abs);
		}
		free(p);
	}
	{
		static const char *const dirs[] = { "proj",       "holder", "creds",
						    "creds/.ssh", "home",   "runs",
						    "runs/run-x", "mnt",    NULL };

		for (const char *const *d = dirs; *d; d++) {
			p = tp(*d);
			r |= mkdir(p, 0755);
			free(p);
		}
	}
	p = tp("holder/.aws");
	fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	r |= fd < 0 ? -1 : close(fd);
	free(p);
	{
		struct sockaddr_un sa = { .sun_family = AF_UNIX };
		int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

		snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/sock", T);
		r |= s < 0 || bind(s, (struct sockaddr *) &sa, sizeof(sa)) < 0 ? -1 : 0;
		if (s >= 0)
			close(s);
	}
	if (geteuid() == 0) {
		static const struct {
			const char *name;
			uid_t uid;
		} owners[] = { { "untrusted", OTHER_UID },
			       { "l_mine", OTHER_UID },
			       { "l_other", THIRD_UID } };

		for (size_t i = 0; i < sizeof(owners) / sizeof(owners[0]); i++) {
			p = tp(owners[i].name);
			r |= lchown(p, owners[i].uid, owners[i].uid);
			free(p);
		}
		/* a mount point of our own: a tmpfs in this process's mount namespace */
		p = tp("mnt");
		have_mnt = unshare(CLONE_NEWNS) == 0 &&
			   mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0 &&
			   mount("ab-test", p, "tmpfs", MS_NOSUID | MS_NODEV, "size=64k") == 0;
		free(p);
	}
	return r ? -1 : 0;
}

static int
rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void) st;
	(void) flag;
	(void) ftw;
	return remove(path) < 0 ? -1 : 0;
}

static void
cleanup(void)
{
	char *p = tp("mnt");

	if (have_mnt)
		(void) umount2(p, MNT_DETACH);
	free(p);
	(void) nftw(T, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void
test_open(void)
{
	char *p, *q;
	int fd;
	struct ab_err err = { 0 };
	struct stat st;

	open_is("dir/file", 0, "dir/file", 0, NULL);
	open_is("trusted/file", 0, "dir/file", 0, NULL);
	open_is("abs/file", 0, "dir/file", 0, NULL);
	open_is("trusted", 0, "dir", 0, NULL);
	open_is("trusted", HOSTFS_DIR, "dir", 0, NULL);
	open_is("dir/up/dir/file", 0, "dir/file", 0, NULL);

	/* HOSTFS_NOFOLLOW: only the last component, and "name/" still follows */
	open_is("trusted", HOSTFS_NOFOLLOW, NULL, ELOOP, "is a symlink");
	open_is("trusted/", HOSTFS_NOFOLLOW, "dir", 0, NULL);
	open_is("trusted/file", HOSTFS_NOFOLLOW, "dir/file", 0, NULL);
	open_is("tofile", HOSTFS_NOFOLLOW, NULL, ELOOP, NULL);
	p = tp("trusted");
	TAP_OK(hostfs_open(p, HOSTFS_NOFOLLOW, "--t", &err) == -ELOOP &&
		       strcmp(err.fix, "pass the real path it points to") == 0,
	       "HOSTFS_NOFOLLOW: the fix says to pass the real path");
	free(p);

	/* HOSTFS_LINK_OK: the link itself, only as the last component */
	p = tp("trusted");
	fd = hostfs_open(p, HOSTFS_LINK_OK, "--t", &err);
	TAP_OK(fd >= 0 && fstat(fd, &st) == 0 && S_ISLNK(st.st_mode) && is(fd, "trusted"),
	       "HOSTFS_LINK_OK: a link as the last component is returned itself");
	if (fd >= 0)
		close(fd);
	free(p);
	open_is("dangling", HOSTFS_LINK_OK, "dangling", 0, NULL);
	open_is("trusted/file", HOSTFS_LINK_OK, "dir/file", 0, NULL);
	open_is("trusted/", HOSTFS_LINK_OK, "dir", 0, NULL);

	/* a path through something that is not a directory */
	open_is("fifo", 0, "fifo", 0, NULL); /* O_PATH: opening a FIFO never blocks */
	open_is("fifo/x", 0, NULL, ENOTDIR, "'fifo' is not a directory");
	open_is("fifo/", 0, NULL, ENOTDIR, NULL);
	open_is("dir/file/x", 0, NULL, ENOTDIR, "'file' is not a directory");
	open_is("dir/file/", 0, NULL, ENOTDIR, NULL);
	open_is("tofile/", 0, NULL, ENOTDIR, NULL);
	open_is("tofile/x", 0, NULL, ENOTDIR, NULL);
	open_is("dir/file", HOSTFS_DIR, NULL, ENOTDIR, "is not a directory");
	open_is("fifo", HOSTFS_DIR, NULL, ENOTDIR, NULL);

	/* "..": the kernel's meaning, from where a link led, not from its name */
	open_is("dir/sub/../file", 0, "dir/file", 0, NULL);
	open_is("dir/../dir/./file", 0, "dir/file", 0, NULL);
	open_is("deep/../file", 0, "dir/file", 0, NULL); /* not T/file: there is none */
	open_is("deep/..", 0, "dir", 0, NULL);
	open_is("dir/sub/../..", 0, T, 0, NULL);
	q = xasprintf("/../..%s/dir/file", T);
	open_is(q, 0, "dir/file", 0, NULL); /* "/.." is "/" */
	free(q);
	open_is("/..", HOSTFS_DIR, "/", 0, NULL);

	/* what is not there */
	open_is("nope/x", 0, NULL, ENOENT, "'nope' does not exist");
	open_is("dangling", 0, NULL, ENOENT, "'nope' does not exist");
	open_is("dangling/", 0, NULL, ENOENT, NULL);
	open_is("loop1", 0, NULL, ELOOP, "cannot follow");
	open_is("loop1", HOSTFS_ANY_LINK, NULL, ELOOP, NULL);
	p = tp("nope");
	memset(&err, 0, sizeof(err));
	TAP_OK(hostfs_open(p, 0, "--t", &err) == -ENOENT &&
		       strcmp(err.fix, "check the path") == 0 && err.exit == AB_EXIT_SETUP,
	       "ENOENT: the fix says to check the path");
	free(p);
	memset(&err, 0, sizeof(err));
	TAP_OK(hostfs_open("", 0, "--t", &err) == -EINVAL && err.exit == AB_EXIT_USAGE,
	       "an empty path is a usage error");
	memset(&err, 0, sizeof(err));
	TAP_OK(hostfs_open(NULL, 0, "--t", &err) == -EINVAL && err.exit == AB_EXIT_USAGE,
	       "no path is a usage error");
	{
		char name[300];

		memset(name, 'n', sizeof(name) - 1);
		name[sizeof(name) - 1] = '\0';
		open_is(name, 0, NULL, ENAMETOOLONG, "too long");
	}

	/* relative to the cwd */
	{
		int cwd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
		struct ab_err e2 = { 0 };

		if (cwd >= 0 && chdir(T) == 0) {
			fd = hostfs_open("trusted/../dir/file", 0, "--t", &e2);
			TAP_OK(is(fd, "dir/file"), "a relative path starts at the cwd");
			if (fd >= 0)
				close(fd);
			TAP_OK(fchdir(cwd) == 0, "back in the cwd");
		} else {
			TAP_SKIP("cannot chdir to %s", T);
			TAP_SKIP("cannot chdir to %s", T);
		}
		if (cwd >= 0)
			close(cwd);
	}

	/* relative to a directory fd: what etcgen does from the host's /etc */
	{
		struct ab_err e2 = { 0 };
		int top = hostfs_open(T, HOSTFS_DIR, "--t", &e2);

		fd = top >= 0 ? hostfs_open_at(top, "trusted/file", 0, "--t", &e2) : -1;
		TAP_OK(is(fd, "dir/file"), "hostfs_open_at: a relative path starts at the fd");
		if (fd >= 0)
			close(fd);
		fd = top >= 0 ? hostfs_open_at(top, "abs/sub", HOSTFS_DIR, "--t", &e2) : -1;
		TAP_OK(is(fd, "dir/sub"), "hostfs_open_at: an absolute link target starts at /");
		if (fd >= 0)
			close(fd);
		fd = top >= 0 ? hostfs_open_at(top, "tofile", HOSTFS_NOFOLLOW, "--t", &e2) : -1;
		TAP_OK(fd == -ELOOP, "hostfs_open_at: HOSTFS_NOFOLLOW holds (%d)", fd);
		if (fd >= 0)
			close(fd);
		memset(&e2, 0, sizeof(e2)); /* the first error recorded is the one returned */
		fd = top >= 0 ? hostfs_open_at(top, "nope", 0, "--t", &e2) : -1;
		TAP_OK(fd == -ENOENT, "hostfs_open_at: a missing name is ENOENT (%d)", fd);
		if (fd >= 0)
			close(fd);
		if (top >= 0)
			close(top);
	}
}

/* As root: a link another uid owns is refused unless the caller said any link will do. */
static void
test_untrusted(void)
{
	if (geteuid() != 0) {
		for (int i = 0; i < 11; i++)
			TAP_SKIP("a symlink owned by another uid needs root (lchown)");
		return;
	}
	open_is("untrusted/file", 0, NULL, EPERM, "owned by uid 12345");
	{
		struct ab_err err = { 0 };
		int top = hostfs_open(T, HOSTFS_DIR, "--t", &err);
		int fd = top >= 0 ? hostfs_open_at(top, "untrusted/file", 0, "--t", &err) : -1;

		TAP_OK(fd == -EPERM, "hostfs_open_at through the untrusted link: EPERM (%d)", fd);
		if (fd >= 0)
			close(fd);
		if (top >= 0)
			close(top);
	}
	open_is("untrusted/file", 0, NULL, EPERM, "follows only symlinks owned by root or by you");
	open_is("untrusted", 0, NULL, EPERM, NULL);
	open_is("untrusted/", HOSTFS_LINK_OK, NULL, EPERM, NULL);
	open_is("untrusted/file", HOSTFS_LINK_OK, NULL, EPERM, NULL);
	open_is("untrusted/file", HOSTFS_DIR | HOSTFS_NOFOLLOW, NULL, EPERM, NULL);
	open_is("untrusted/file", HOSTFS_ANY_LINK, "dir/file", 0, NULL);
	open_is("untrusted", HOSTFS_LINK_OK, "untrusted", 0, NULL); /* the link, not followed */
	open_is("untrusted", HOSTFS_NOFOLLOW, NULL, ELOOP, NULL);
	{
		struct ab_err err = { 0 };
		char *p = tp("untrusted/file"), *base = NULL;
		int fd = hostfs_open_parent(p, 0, "--report", &base, &err);

		TAP_OK(fd == -EPERM, "hostfs_open_parent through the untrusted link: EPERM");
		if (fd >= 0)
			close(fd);
		free(base);
		free(p);
	}
}

/* Trusted means root's or the caller's: seen from uid OTHER_UID, in a child. */
static void
test_trust_as_user(void)
{
	pid_t pid;
	int ws = 0;

	if (geteuid() != 0) {
		for (int i = 0; i < 3; i++)
			TAP_SKIP("switching to another uid needs root");
		return;
	}
	pid = fork();
	if (pid == 0) {
		struct ab_err err = { 0 };
		static const char *const names[] = { "l_root/file", "l_mine/file", "l_other/file" };
		int bits = 0;

		if (setgroups(0, NULL) < 0 || setresgid(OTHER_UID, OTHER_UID, OTHER_UID) < 0 ||
		    setresuid(OTHER_UID, OTHER_UID, OTHER_UID) < 0)
			_exit(100);
		for (int i = 0; i < 3; i++) {
			char *p = tp(names[i]);
			int fd = hostfs_open(p, 0, "--t", &err);

			if (fd >= 0)
				bits |= 1 << i;
			else if (fd != -EPERM)
				bits |= 1 << (i + 3);
			if (fd >= 0)
				close(fd);
			free(p);
		}
		_exit(bits);
	}
	(void) waitpid(pid, &ws, 0);
	ws = WIFEXITED(ws) ? WEXITSTATUS(ws) : 255;
	TAP_OK(ws != 100 && (ws & 1), "as uid %d: a symlink owned by root is followed", OTHER_UID);
	TAP_OK(ws != 100 && (ws & 2), "as uid %d: its own symlink is followed", OTHER_UID);
	TAP_OK(ws != 100 && !(ws & 4) && !(ws & 0x20),
	       "as uid %d: uid %d's symlink is refused (EPERM)", OTHER_UID, THIRD_UID);
	if (ws == 100 || (ws & 0x38))
		printf("#   child status %#x\n", ws);
}

static void
test_open_parent(void)
{
	static const struct {
		const char *rel, *parent, *base;
	} ok[] = {
		{ "dir/file", "dir", "file" },
		{ "dir/", T, "dir" },
		{ "dir//", T, "dir" },
		{ "trusted/new.json", "dir", "new.json" },
		{ "dir/sub/../new", "dir", "new" },
	};
	static const char *const bad[] = { "dir/.", "dir/..", "/", NULL };

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		struct ab_err err = { 0 };
		char *p = tp(ok[i].rel), *base = NULL;
		int fd = hostfs_open_parent(p, 0, "--report", &base, &err);

		TAP_OK(is(fd, ok[i].parent) && base && strcmp(base, ok[i].base) == 0,
		       "hostfs_open_parent('%s'): %s, '%s'", ok[i].rel, ok[i].parent, ok[i].base);
		if (fd >= 0)
			close(fd);
		free(base);
		free(p);
	}
	for (const char *const *b = bad; *b; b++) {
		struct ab_err err = { 0 };
		char *p = **b == '/' ? xstrdup(*b) : tp(*b), *base = NULL;
		int fd = hostfs_open_parent(p, 0, "--report", &base, &err);

		TAP_OK(fd == -EINVAL && err.exit == AB_EXIT_USAGE && !base,
		       "hostfs_open_parent('%s'): does not name a file (usage error)", *b);
		if (fd >= 0)
			close(fd);
		free(base);
		free(p);
	}
	{
		struct ab_err err = { 0 };
		char *p = tp("fifo/x"), *base = NULL;
		int fd = hostfs_open_parent(p, 0, "--report", &base, &err);

		TAP_OK(fd == -ENOTDIR, "hostfs_open_parent('fifo/x'): ENOTDIR");
		if (fd >= 0)
			close(fd);
		free(base);
		free(p);
	}
}

/* hostfs_refusal for the object at path (absolute, or relative to T). */
static void
refused_as(const char *path, enum hostfs_use use, int runs_fd, const struct strv *allowed,
	   const char *want)
{
	static const char *const uses[] = { "workspace", "input", "collect" };
	struct ab_err err = { 0 };
	char *p = path[0] == '/' ? xstrdup(path) : tp(path);
	int fd = hostfs_open(p, HOSTFS_ANY_LINK, "--t", &err);
	char *real = fd >= 0 ? hostfs_fd_path(fd) : NULL;
	const char *got =
		fd >= 0 ? hostfs_refusal(fd, real, use, runs_fd, allowed) : "(open failed)";

	if (want)
		TAP_STREQ(got, want, "hostfs_refusal('%s' as %s%s) refuses", path, uses[use],
			  allowed ? ", allowed" : "");
	else
		TAP_OK(got == NULL, "hostfs_refusal('%s' as %s%s) allows", path, uses[use],
		       allowed ? ", allowed" : "");
	if (!want && got)
		printf("#   got: '%s'\n", got);
	if (fd >= 0)
		close(fd);
	free(real);
	free(p);
}

static void
test_refusal(void)
{
	static const char *const root = "the root directory /";
	static const char *const sysdir = "a system directory itself";
	static const char *const os = "part of the operating system (/etc, /usr)";
	static const char *const inside = "inside a kernel, device, boot or runtime directory";
	static const char *const kernel = "a kernel, device or runtime directory (sockets, host "
					  "state)";
	static const char *const home = "a home directory itself";
	static const char *const holds = "a directory that holds credentials (e.g. .ssh, .aws)";
	static const char *const runs = "agentbox's runs directory, a directory inside it or one "
					"that holds it";
	struct strv allow_all = { 0 }, allow_root = { 0 }, allow_etc = { 0 };
	char *old_home = getenv("HOME") ? xstrdup(getenv("HOME")) : NULL;
	char *p;
	int runs_fd, fd;

	strv_push(&allow_root, "/");
	strv_push(&allow_etc, "/etc");
	{
		static const char *const a[] = { "home", "holder", "creds/.ssh", "runs/run-x",
						 NULL };

		for (const char *const *x = a; *x; x++) {
			p = tp(*x);
			strv_push(&allow_all, p);
			free(p);
		}
	}
	p = tp("home");
	setenv("HOME", p, 1);
	free(p);

	for (int u = 0; u < 3; u++) {
		refused_as("/", (enum hostfs_use) u, -1, NULL, root);
		refused_as("/", (enum hostfs_use) u, -1, &allow_root, root);
		refused_as("proj", (enum hostfs_use) u, -1, NULL, NULL);
		refused_as("home", (enum hostfs_use) u, -1, NULL, home);
		refused_as("holder", (enum hostfs_use) u, -1, NULL, holds);
		refused_as("holder", (enum hostfs_use) u, -1, &allow_all, NULL);
		refused_as("creds/.ssh", (enum hostfs_use) u, -1, NULL,
			   "a credentials directory or file");
		refused_as("creds/.ssh", (enum hostfs_use) u, -1, &allow_all, NULL);
	}
	/* a home directory: --allow-bind lifts it for what is only read, never for writing */
	refused_as("home", HOSTFS_USE_INPUT, -1, &allow_all, NULL);
	refused_as("home", HOSTFS_USE_WORKSPACE, -1, &allow_all, home);
	refused_as("home", HOSTFS_USE_COLLECT, -1, &allow_all, home);

	/* system directories: read (--ro-bind, --input) by refusal_mount's rules */
	refused_as("/usr", HOSTFS_USE_WORKSPACE, -1, NULL, sysdir);
	refused_as("/usr", HOSTFS_USE_COLLECT, -1, NULL, sysdir);
	refused_as("/usr", HOSTFS_USE_INPUT, -1, NULL, NULL);
	refused_as("/usr/share", HOSTFS_USE_COLLECT, -1, NULL, os);
	refused_as("/usr/share", HOSTFS_USE_INPUT, -1, NULL, NULL);
	refused_as("/etc", HOSTFS_USE_WORKSPACE, -1, &allow_etc, sysdir);
	refused_as("/etc", HOSTFS_USE_INPUT, -1, NULL,
		   "a system-wide directory: mount the specific subdirectory you need");
	refused_as("/etc", HOSTFS_USE_INPUT, -1, &allow_etc, NULL); /* README: lifts all but / */
	refused_as("/tmp", HOSTFS_USE_WORKSPACE, -1, NULL, sysdir);
	refused_as("/proc/sys", HOSTFS_USE_WORKSPACE, -1, NULL, inside);
	refused_as("/proc/sys", HOSTFS_USE_INPUT, -1, NULL, kernel);
	refused_as("/dev/null", HOSTFS_USE_INPUT, -1, NULL, kernel);
	refused_as("sock", HOSTFS_USE_INPUT, -1, NULL, "a socket (host IPC)");

	/* no name for the fd: nothing can be judged by path */
	p = tp("proj");
	fd = open(p, O_PATH | O_CLOEXEC);
	TAP_STREQ(hostfs_refusal(fd, NULL, HOSTFS_USE_INPUT, -1, NULL),
		  "a path agentbox cannot place (is /proc mounted?)",
		  "hostfs_refusal without a name");
	TAP_STREQ(hostfs_refusal(-1, p, HOSTFS_USE_INPUT, -1, NULL),
		  "a path agentbox cannot examine", "hostfs_refusal of a bad fd");
	if (fd >= 0)
		close(fd);
	free(p);

	/* the runs directory, what is in it and what holds it; --allow-bind does not help */
	p = tp("runs");
	runs_fd = open(p, O_PATH | O_DIRECTORY | O_CLOEXEC);
	free(p);
	for (int u = 0; u < 3; u++) {
		refused_as("runs", (enum hostfs_use) u, runs_fd, NULL, runs);
		refused_as("runs/run-x", (enum hostfs_use) u, runs_fd, &allow_all, runs);
		refused_as(T, (enum hostfs_use) u, runs_fd, NULL, runs);
		refused_as("proj", (enum hostfs_use) u, runs_fd, NULL, NULL);
	}
	if (runs_fd >= 0)
		close(runs_fd);

	/* a mount point: not to write into, fine to read */
	if (have_mnt) {
		refused_as("mnt", HOSTFS_USE_WORKSPACE, -1, NULL, "a mount point");
		refused_as("mnt", HOSTFS_USE_COLLECT, -1, NULL, "a mount point");
		refused_as("mnt", HOSTFS_USE_INPUT, -1, NULL, NULL);
	} else {
		for (int i = 0; i < 3; i++)
			TAP_SKIP("a mount point of our own needs root");
	}

	if (old_home)
		setenv("HOME", old_home, 1);
	else
		unsetenv("HOME");
	free(old_home);
	strv_done(&allow_all);
	strv_done(&allow_root);
	strv_done(&allow_etc);
}

static void
test_add_user(void)
{
	struct ab_plan plan = { 0 };
	struct strv allowed = { 0 };
	struct ab_err err = { 0 };
	char *spec;
	int r;

	spec = xasprintf("%s/trusted:/data", T);
	r = binds_add_user(&plan, spec, NULL, &err);
	TAP_OK(r == 0 && plan.n_ro_binds == 1 && strcmp(plan.ro_binds[0].dest, "/data") == 0 &&
		       is(plan.ro_binds[0].fd, "dir"),
	       "--ro-bind LINK:/data: the fd of what the link leads to, at /data");
	free(spec);
	/* without a destination it goes at its own path, and T is under /tmp */
	spec = tp("proj");
	memset(&err, 0, sizeof(err));
	r = binds_add_user(&plan, spec, NULL, &err);
	TAP_OK(r == -EINVAL && err.exit == AB_EXIT_USAGE && strstr(err.msg, spec) &&
		       strstr(err.msg, "reserved"),
	       "--ro-bind /tmp/DIR: at the same path, which /tmp reserves: a usage error");
	free(spec);

	spec = xasprintf("%s/proj:/work/x", T);
	memset(&err, 0, sizeof(err));
	r = binds_add_user(&plan, spec, NULL, &err);
	TAP_OK(r == -EINVAL && err.exit == AB_EXIT_USAGE && strstr(err.msg, "/work/x") &&
		       strstr(err.msg, "reserved"),
	       "--ro-bind DIR:/work/x: a usage error naming the destination");
	free(spec);
	memset(&err, 0, sizeof(err));
	r = binds_add_user(&plan, ":/data", NULL, &err);
	TAP_OK(r == -EINVAL && err.exit == AB_EXIT_USAGE && strstr(err.msg, "HOST[:SANDBOX]"),
	       "--ro-bind :/data: a usage error");

	spec = tp("holder");
	memset(&err, 0, sizeof(err));
	r = binds_add_user(&plan, spec, NULL, &err);
	TAP_OK(r == -EPERM && err.exit == AB_EXIT_SETUP && strstr(err.msg, "refusing to mount") &&
		       strstr(err.fix, "--allow-bind"),
	       "--ro-bind of a directory holding credentials: refused, the fix names --allow-bind");
	strv_push(&allowed, spec);
	free(spec);
	spec = xasprintf("%s/holder:/holder", T);
	memset(&err, 0, sizeof(err));
	r = binds_add_user(&plan, spec, &allowed, &err);
	TAP_OK(r == 0 && plan.n_ro_binds == 4 && is(plan.ro_binds[3].fd, "holder"),
	       "... and allowed with --allow-bind");
	if (r < 0)
		printf("#   got: %d (%s)\n", r, err.msg);
	free(spec);
	strv_done(&allowed);
	plan_done(&plan);
}

/* issue 15: the name rule for host files under /etc, and --ro-bind /etc/NAME end to end on
 * this host's own /etc (files every Debian system has) */
static void
test_etc(void)
{
	static const struct {
		const char *path, *want;
	} names[] = {
		{ "/etc/matplotlibrc", NULL },
		{ "/etc/adduser.conf", NULL },
		{ "/etc/ImageMagick-6/policy.xml", NULL },
		{ "/etc/ssl/certs/ca-certificates.crt", NULL },
		{ "/etc/shadow", "shadow" },
		{ "/etc/gshadow-", "gshadow-" },
		{ "/etc/sudoers.d/90-cloud", "sudoers.d" },
		{ "/etc/ssh/ssh_config", "ssh" },
		{ "/etc/ssl/private/x.pem", "private" },
		{ "/etc/machine-id", "machine-id" },
		{ "/etc/NetworkManager/system-connections/home.nmconnection", "networkmanager" },
		{ "/etc/wireguard/wg0.conf", "wireguard" },
		{ "/etc/apt/auth.conf.d/x.conf", "auth" },
		{ "/etc/krb5.keytab", "key" },
		{ "/etc/ipsec.secrets", "secret" },
		{ "/etc/pip.conf", "pip.conf" },
		{ "/etc/myapp/API_TOKEN", "token" },
		{ "/etc/postfix/sasl_passwd", "passw" },
		{ "ssh/ssh_host_ed25519_key", "ssh" },
	};
	struct ab_plan plan = { 0 };
	struct strv allowed = { 0 };
	struct ab_err err = { 0 };
	int r;

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		const char *got = binds_etc_denied(names[i].path);

		if (names[i].want)
			TAP_STREQ(got, names[i].want, "binds_etc_denied('%s')", names[i].path);
		else
			TAP_OK(got == NULL, "binds_etc_denied('%s') allows", names[i].path);
	}

	r = binds_add_user(&plan, "/etc/adduser.conf", NULL, &err);
	TAP_OK(r == 0 && plan.n_etc_binds == 1 && plan.n_ro_binds == 0 &&
		       strcmp(plan.etc_binds[0].dest, "adduser.conf") == 0 &&
		       plan.etc_binds[0].fd >= 0,
	       "--ro-bind /etc/adduser.conf: one bind into the generated /etc, by fd");
	r = binds_add_user(&plan, "/etc/adduser.conf:/etc/adduser.conf", NULL, &err);
	TAP_OK(r == 0 && plan.n_etc_binds == 1, "... given twice: one bind");
	r = binds_add_user(&plan, "/etc/matplotlibrc", NULL, &err);
	TAP_OK((r == 0 && plan.n_etc_binds == 1) || r == -ENOENT,
	       "--ro-bind of a curated file: nothing more to bind");
	memset(&err, 0, sizeof(err));
	r = binds_add_user(&plan, "/etc/adduser.conf:/opt/a", NULL, &err);
	TAP_OK(r == -EINVAL && err.exit == AB_EXIT_USAGE, "/etc/NAME:/elsewhere: a usage error");
	memset(&err, 0, sizeof(err));
	r = binds_add_user(&plan, "/etc/../etc/adduser.conf", NULL, &err);
	TAP_OK(r == -EINVAL && err.exit == AB_EXIT_USAGE, "/etc/../etc/NAME: a usage error");
	memset(&err, 0, sizeof(err));
	r = binds_add_user(&plan, "/etc/passwd", NULL, &err);
	TAP_OK(r == -EPERM && strstr(err.msg, "agentbox generates"),
	       "/etc/passwd: refused, agentbox generates it");
	memset(&err, 0, sizeof(err));
	r = binds_add_user(&plan, "/etc/shadow", NULL, &err);
	TAP_OK(r == -EPERM && strstr(err.msg, "'shadow'"), "/etc/shadow: refused by its name");
	memset(&err, 0, sizeof(err));
	r = binds_add_user(&plan, "/etc/ssh", NULL, &err);
	TAP_OK(r == -EPERM || r == -ENOENT, "/etc/ssh: refused (or absent)");
	memset(&err, 0, sizeof(err));
	r = binds_add_user(&plan, "/etc/apt", NULL, &err);
	TAP_OK(r == -EPERM && strstr(err.msg, "not a regular file"),
	       "/etc/apt: a directory is refused");
	/* the readability rule, on a file whose name passes: /etc/gshadow is 0640 on Debian */
	strv_push(&allowed, "/etc/gshadow");
	memset(&err, 0, sizeof(err));
	r = binds_add_user(&plan, "/etc/gshadow", &allowed, &err);
	TAP_OK(r == -EPERM && strstr(err.msg, "not readable by every user"),
	       "/etc/gshadow with --allow-bind: still refused, not world-readable");
	TAP_OK(plan.n_etc_binds == 1, "no refused file reached the plan");
	strv_done(&allowed);
	plan_done(&plan);
}

int
main(void)
{
	test_refusal_mount();
	test_workspace_tokens();
	test_bad_dest();
	if (mk() < 0) {
		printf("Bail out! cannot build the test tree under %s: %s\n", T, strerror(errno));
		cleanup();
		return 1;
	}
	test_open();
	test_untrusted();
	test_trust_as_user();
	test_open_parent();
	test_refusal();
	test_add_user();
	test_etc();
	cleanup();
	return tap_done();
}

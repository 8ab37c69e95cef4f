#include "binds.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <sys/stat.h>

#include "hostfs.h"
#include "util/macro.h"
#include "util/xalloc.h"

static const char *const credential_names[] = {
	".ssh",   ".gnupg", ".aws",    ".azure",           ".kube",           ".docker",
	".netrc", ".npmrc", ".pypirc", ".git-credentials", ".password-store", NULL,
};

static const char *const credential_subpaths[] = {
	".config/gcloud", ".config/gh", ".config/hub", ".local/share/keyrings", NULL,
};

static bool
is_or_under(const char *path, const char *top)
{
	size_t l = strlen(top);

	return strncmp(path, top, l) == 0 && (path[l] == '\0' || path[l] == '/');
}

static bool
has_component(const char *path, const char *name)
{
	size_t l = strlen(name);

	for (const char *p = path; (p = strstr(p, name)); p++)
		if (p > path && p[-1] == '/' && (p[l] == '\0' || p[l] == '/'))
			return true;
	return false;
}

const char *
binds_refusal(const char *real, const char *home)
{
	static const char *const never[] = { "/proc",    "/sys",  "/dev", "/run",
					     "/var/run", "/boot", NULL };
	static const char *const exact[] = { "/",     "/etc",  "/tmp", "/var/tmp",
					     "/home", "/root", "/var", NULL };
	static const char *const etc_secrets[] = { "/etc/shadow",      "/etc/gshadow",
						   "/etc/ssh",         "/etc/sudoers",
						   "/etc/sudoers.d",   "/etc/security",
						   "/etc/ssl/private", NULL };
	struct stat st;

	for (const char *const *n = never; *n; n++)
		if (is_or_under(real, *n))
			return "a kernel, device or runtime directory (sockets, host state)";
	for (const char *const *e = exact; *e; e++)
		if (strcmp(real, *e) == 0)
			return "a system-wide directory: mount the specific subdirectory you need";
	for (const char *const *e = etc_secrets; *e; e++)
		if (is_or_under(real, *e))
			return "host secrets under /etc";
	/* /home/NAME itself, and the caller's $HOME */
	if (strncmp(real, "/home/", 6) == 0 && strchr(real + 6, '/') == NULL)
		return "a home directory: mount the project subdirectory you need";
	if (home && home[0] == '/' && strcmp(real, home) == 0)
		return "your home directory: mount the project subdirectory you need";
	for (const char *const *c = credential_names; *c; c++)
		if (has_component(real, *c))
			return "a credentials directory or file";
	for (const char *const *c = credential_subpaths; *c; c++)
		if (has_component(real, *c))
			return "a credentials directory";
	if (is_or_under(real, "/root") && strcmp(real, "/root") != 0 &&
	    strchr(real + strlen("/root/"), '/') == NULL && real[strlen("/root/")] == '.')
		return "a dot-directory of root's home";
	if (lstat(real, &st) == 0) {
		if (S_ISSOCK(st.st_mode))
			return "a socket (host IPC)";
		if (S_ISDIR(st.st_mode)) {
			for (const char *const *c = credential_names; *c; c++) {
				cleanup_free char *child = xasprintf("%s/%s", real, *c);

				if (lstat(child, &st) == 0)
					return "a directory that holds credentials (e.g. .ssh, "
					       ".aws)";
			}
		}
	}
	return NULL;
}

const char *
binds_bad_dest(const char *dest)
{
	static const char *const reserved[] = { "/work", "/usr", "/etc",       "/proc",
						"/dev",  "/tmp", "/.agentbox", "/bin",
						"/sbin", "/lib", "/lib64",     NULL };

	if (dest[0] != '/')
		return "must be an absolute path";
	if (strcmp(dest, "/") == 0)
		return "cannot be /";
	if (strstr(dest, "//") || strstr(dest, "/./") || strstr(dest, "/../") ||
	    (strlen(dest) >= 2 && strcmp(dest + strlen(dest) - 2, "/.") == 0) ||
	    (strlen(dest) >= 3 && strcmp(dest + strlen(dest) - 3, "/..") == 0) ||
	    dest[strlen(dest) - 1] == '/')
		return "must be a normalized path (no //, ., .., trailing /)";
	for (const char *const *r = reserved; *r; r++)
		if (is_or_under(dest, *r))
			return "is reserved by agentbox (/work, /usr, /etc, /proc, /dev, /tmp...)";
	return NULL;
}

int
binds_add_checked(struct ab_plan *p, const char *host, const char *dest, const struct strv *allowed,
		  const char *what, struct ab_err *err)
{
	cleanup_fd int fd = hostfs_open(host, HOSTFS_ANY_LINK, what, err);
	cleanup_free char *real = NULL;
	const char *why;

	if (fd < 0)
		return fd;
	real = hostfs_fd_path(fd);
	why = hostfs_refusal(fd, real, HOSTFS_USE_INPUT, -1, allowed);
	if (why) {
		ab_err_set(err, -EPERM, "refusing to mount '%s' (%s) in the sandbox: %s", host,
			   real ? real : "?", why);
		return ab_err_fix(err,
				  "mount a narrower path, or if you really mean it, add "
				  "--allow-bind '%s'",
				  real ? real : host);
	}
	plan_add_ro_bind_fd(p, steal_fd(&fd), real, dest ? dest : real);
	return 0;
}

int
binds_add_user(struct ab_plan *p, const char *spec, const struct strv *allowed, struct ab_err *err)
{
	cleanup_free char *host = xstrdup(spec);
	char *colon = strchr(host, ':');

	const char *why;
	int r;

	if (colon)
		*colon = '\0';
	if (!host[0])
		return ab_err_usage(err, "invalid --ro-bind '%s': expected HOST[:SANDBOX]", spec);
	r = binds_add_checked(p, host, colon ? colon + 1 : NULL, allowed, "--ro-bind", err);
	if (r < 0)
		return r;
	why = binds_bad_dest(p->ro_binds[p->n_ro_binds - 1].dest);
	if (why)
		return ab_err_usage(err, "invalid --ro-bind destination '%s': it %s",
				    p->ro_binds[p->n_ro_binds - 1].dest, why);
	return 0;
}

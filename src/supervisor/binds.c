#include "binds.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <sys/stat.h>

#include "../fs/hostfs.h"
#include "../fs/refusal.h"
#include "../util/macro.h"
#include "../util/xalloc.h"
#include "etcgen.h"

static bool
is_or_under(const char *path, const char *top)
{
	size_t l = strlen(top);

	return strncmp(path, top, l) == 0 && (path[l] == '\0' || path[l] == '/');
}

/* An absolute path with no "//", "." or ".." component and no trailing "/". */
static bool
is_normalized(const char *p)
{
	size_t l = strlen(p);

	return !(strstr(p, "//") || strstr(p, "/./") || strstr(p, "/../") ||
		 (l >= 2 && strcmp(p + l - 2, "/.") == 0) ||
		 (l >= 3 && strcmp(p + l - 3, "/..") == 0) || p[l - 1] == '/');
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
	if (!is_normalized(dest))
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

/* ---- one file of the host's /etc (issue 15) ------------------------------------------- */

/* Path components under /etc that name or hold secrets, compared case-insensitively: whole
 * names, then substrings. */
static const char *const etc_deny_names[] = {
	"shadow",
	"shadow-",
	"gshadow",
	"gshadow-",
	"passwd-",
	"group-",
	"sudoers",
	"sudoers.d",
	"ssh",
	"security",
	"machine-id",
	"pki",
	"letsencrypt",
	"wireguard",
	"networkmanager",
	"netplan",
	"wpa_supplicant",
	"ppp",
	"openvpn",
	"ipsec.d",
	"libvirt",
	"docker",
	"containers",
	"credstore",
	"credstore.encrypted",
	"pip.conf",
	"cups",
	NULL,
};
static const char *const etc_deny_substrings[] = {
	"key",  "secret", "private", "passw", "shadow", "credential", "token",
	"auth", "pgpass", "netrc",   "npmrc", "pypirc", NULL,
};

const char *
binds_etc_denied(const char *path)
{
	const char *p = path;

	if (strncmp(p, "/etc/", 5) == 0)
		p += 5;
	while (*p) {
		size_t len = strcspn(p, "/");
		char comp[256];

		if (len >= sizeof(comp))
			return "an over-long name";
		for (size_t i = 0; i < len; i++)
			comp[i] = (char) ((p[i] >= 'A' && p[i] <= 'Z') ? p[i] - 'A' + 'a' : p[i]);
		comp[len] = '\0';
		for (const char *const *n = etc_deny_names; *n; n++)
			if (strcmp(comp, *n) == 0)
				return *n;
		for (const char *const *n = etc_deny_substrings; *n; n++)
			if (strstr(comp, *n))
				return *n;
		p += len;
		while (*p == '/')
			p++;
	}
	return NULL;
}

/* True when every directory from /etc down to name's parent lets anyone through (o+x): a
 * world-readable file in a restricted directory (ssl/private is 0710) is not public. */
static bool
etc_dirs_public(const char *name)
{
	cleanup_free char *dir = xstrdup(name);
	char *slash;
	struct stat st;

	while ((slash = strrchr(dir, '/')) && slash > dir) {
		*slash = '\0';
		if (stat(dir, &st) < 0 || !(st.st_mode & S_IXOTH))
			return false;
	}
	return true;
}

int
binds_add_etc(struct ab_plan *p, const char *host, const char *dest, const struct strv *allowed,
	      struct ab_err *err)
{
	cleanup_fd int fd = -1;
	cleanup_free char *real = NULL;
	const char *rel = host + strlen("/etc/"), *why;
	struct stat st;

	if (dest && strcmp(dest, host) != 0)
		return ab_err_usage(err,
				    "invalid --ro-bind '%s:%s': a file of /etc is bound at its own "
				    "path only",
				    host, dest),
		       ab_err_fix(err, "drop ':%s': --ro-bind %s", dest, host);
	if (!is_normalized(host))
		return ab_err_usage(
			       err,
			       "invalid --ro-bind '%s': it must be a normalized path (no //, ., "
			       ".., trailing /)",
			       host),
		       ab_err_fix(err, "write the path without //, . or .. components");
	if (etcgen_is_generated(rel)) {
		ab_err_set(err, -EPERM, "refusing --ro-bind '%s': agentbox generates /etc/%s", host,
			   rel);
		return ab_err_fix(err, "leave it out: the sandbox's own /etc/%s is used", rel);
	}
	fd = hostfs_open(host, 0, "--ro-bind", err);
	if (fd < 0)
		return fd;
	if (etcgen_is_curated(rel))
		return 0; /* already there, read-only, from the same host file */
	for (size_t i = 0; i < p->n_etc_binds; i++)
		if (strcmp(p->etc_binds[i].dest, rel) == 0)
			return 0; /* given twice */
	if (fstat(fd, &st) < 0)
		return ab_err_set(err, -errno, "--ro-bind '%s': %s", host, strerror(errno));
	real = hostfs_fd_path(fd);
	/* the name rule on both names: the one given and the file it leads to */
	why = binds_etc_denied(host);
	if (!why && real && strncmp(real, "/etc/", 5) == 0)
		why = binds_etc_denied(real);
	if (why && !hostfs_is_allowed(&st, allowed)) {
		ab_err_set(err, -EPERM,
			   "refusing --ro-bind '%s': its name matches '%s', which marks secrets "
			   "under /etc",
			   host, why);
		return ab_err_fix(err, "if it really holds no secret, add --allow-bind '%s'", host);
	}
	if (!S_ISREG(st.st_mode)) {
		ab_err_set(err, -EPERM,
			   "refusing --ro-bind '%s': only single files of /etc can be "
			   "bound, and this is not a regular file",
			   host);
		return ab_err_fix(err, "bind the files you need one by one");
	}
	if (!(st.st_mode & S_IROTH) || !etc_dirs_public(host) || (real && !etc_dirs_public(real))) {
		ab_err_set(err, -EPERM,
			   "refusing --ro-bind '%s': not readable by every user of the host, so "
			   "treated as a secret",
			   host);
		return ab_err_fix(err, "copy what the script needs into a file of your own and "
				       "pass that (--input)");
	}
	/* a link out of /etc: the file it reaches is judged like any other bind */
	if (real && strncmp(real, "/etc/", 5) != 0) {
		why = hostfs_refusal(fd, real, HOSTFS_USE_INPUT, -1, allowed);
		if (why) {
			ab_err_set(err, -EPERM, "refusing to mount '%s' (%s) in the sandbox: %s",
				   host, real, why);
			return ab_err_fix(err,
					  "mount a narrower path, or if you really mean it, "
					  "add --allow-bind '%s'",
					  real);
		}
	}
	p->etc_binds = xrealloc(p->etc_binds, (p->n_etc_binds + 1) * sizeof(*p->etc_binds));
	p->etc_binds[p->n_etc_binds] = (struct ab_bind){
		.src = real ? steal_ptr(&real) : xstrdup(host),
		.dest = xstrdup(rel),
		.fd = steal_fd(&fd),
	};
	p->n_etc_binds++;
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
		return ab_err_usage(err, "invalid --ro-bind '%s': expected HOST[:SANDBOX]", spec),
		       ab_err_fix(err, "name the host path: --ro-bind /opt/data or --ro-bind "
				       "/opt/data:/data");
	if (strncmp(host, "/etc/", 5) == 0 && host[5])
		return binds_add_etc(p, host, colon ? colon + 1 : NULL, allowed, err);
	r = binds_add_checked(p, host, colon ? colon + 1 : NULL, allowed, "--ro-bind", err);
	if (r < 0)
		return r;
	why = binds_bad_dest(p->ro_binds[p->n_ro_binds - 1].dest);
	if (why)
		return ab_err_usage(err, "invalid --ro-bind destination '%s': it %s",
				    p->ro_binds[p->n_ro_binds - 1].dest, why),
		       ab_err_fix(err, "mount it somewhere else, e.g. /data or /opt/NAME");
	return 0;
}

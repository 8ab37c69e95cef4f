/* refusal.c: the never-mount rule, pure path checks shared by whatever opens a caller's path
 * (fs/hostfs.c) and whatever mounts one (supervisor/binds.c, supervisor/workspace.c). */
#include "refusal.h"

#include <stdlib.h>
#include <string.h>

#include <sys/stat.h>

#include "../util/macro.h"
#include "../util/xalloc.h"

static const char *const credential_names[] = {
	".ssh",   ".gnupg", ".aws",    ".azure",           ".kube",           ".docker",
	".netrc", ".npmrc", ".pypirc", ".git-credentials", ".password-store", NULL,
};

/* The credential names above that are one file a project commonly holds (npm's and pip's
 * per-project settings), which a --workspace hides rather than refuses (issue 25). */
const char *const refusal_token_files[] = {
	".netrc", ".npmrc", ".pypirc", ".git-credentials", NULL,
};

bool
refusal_is_token_file(const char *name)
{
	for (const char *const *t = refusal_token_files; *t; t++)
		if (strcmp(name, *t) == 0)
			return true;
	return false;
}

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

static const char *
why_refused(const char *real, const char *home, bool tokens_hidden)
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

				if (lstat(child, &st) != 0)
					continue;
				/* a token file of a project (its .npmrc): hidden, not refused;
				 * a link leads nowhere secret in the sandbox's view */
				if (tokens_hidden && refusal_is_token_file(*c) &&
				    (S_ISREG(st.st_mode) || S_ISLNK(st.st_mode)))
					continue;
				return "a directory that holds credentials (e.g. .ssh, .aws)";
			}
		}
	}
	return NULL;
}

const char *
refusal_mount(const char *real, const char *home)
{
	return why_refused(real, home, false);
}

const char *
refusal_workspace(const char *real, const char *home)
{
	return why_refused(real, home, true);
}

/* hint.c: a hint for the common mistakes (hint.h). */
#include "hint.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "../fs/hostfs.h"
#include "../util/macro.h"
#include "../util/xalloc.h"

/* The interpreters' words for "not found", and what follows the name in each. */
static const struct {
	const char *lead;
	enum ab_hint_kind kind;
} patterns[] = {
	{ "No such file or directory: '", AB_HINT_FILE },         /* CPython, repr() of str */
	{ "No such file or directory: \"", AB_HINT_FILE },        /* ... of a name with a ' */
	{ "no such file or directory, open '", AB_HINT_FILE },    /* Node fs */
	{ "no such file or directory, stat '", AB_HINT_FILE },    /* Node fs */
	{ "no such file or directory, scandir '", AB_HINT_FILE }, /* Node fs */
	{ "No module named '", AB_HINT_PY_MODULE },
	{ "Cannot find module '", AB_HINT_JS_MODULE },
	{ "Cannot find package '", AB_HINT_JS_MODULE }, /* ESM: ERR_MODULE_NOT_FOUND */
};

/* Checks a name the script's output gave (hostile): printable ASCII, relative, no "..". */
static bool
name_ok(const char *n)
{
	if (!n[0] || n[0] == '/')
		return false;
	for (const char *p = n; *p; p++)
		if (*p < 0x21 || *p > 0x7e || *p == '\\')
			return false;
	for (const char *p = n; p;) {
		if (strncmp(p, "..", 2) == 0 && (p[2] == '/' || p[2] == '\0'))
			return false;
		p = strchr(p, '/');
		p = p ? p + 1 : NULL;
	}
	return true;
}

enum ab_hint_kind
hint_parse(const char *text, size_t len, char *name, size_t size)
{
	const char *best = NULL;
	enum ab_hint_kind kind = AB_HINT_NONE;
	char quote = '\'';
	size_t n;

	for (size_t i = 0; i < ARRAY_SIZE(patterns); i++) {
		size_t l = strlen(patterns[i].lead);

		for (const char *p = text; p && p + l <= text + len;) {
			p = memmem(p, (size_t) (text + len - p), patterns[i].lead, l);
			if (!p)
				break;
			if (!best || p > best) {
				best = p + l;
				kind = patterns[i].kind;
				quote = patterns[i].lead[l - 1];
			}
			p += l;
		}
	}
	if (!best || size == 0)
		return AB_HINT_NONE;
	for (n = 0; best + n < text + len && best[n] != quote && best[n] != '\n'; n++)
		;
	if (best + n >= text + len || best[n] != quote || n == 0 || n >= size)
		return AB_HINT_NONE;
	/* the workspace is the script's cwd: /work/x and ./x are x */
	if (n >= 6 && strncmp(best, "/work/", 6) == 0)
		best += 6, n -= 6;
	while (n >= 2 && strncmp(best, "./", 2) == 0) {
		best += 2, n -= 2;
		if (kind == AB_HINT_JS_MODULE)
			kind = AB_HINT_JS_RELATIVE;
	}
	memcpy(name, best, n);
	name[n] = '\0';
	if (!name_ok(name))
		return AB_HINT_NONE;
	return kind;
}

/* Does rel exist beneath dirfd (no symlink followed, nothing outside)? */
static bool
exists_beneath(int dirfd, const char *rel)
{
	struct open_how how = { .flags = O_PATH | O_NOFOLLOW | O_CLOEXEC,
				.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
					   RESOLVE_NO_MAGICLINKS };
	long fd = syscall(SYS_openat2, dirfd, rel, &how, sizeof(how));

	if (fd < 0)
		return false;
	(void) close((int) fd);
	return true;
}

/* The name's first component ("data" of "data/x.csv"): what --input would copy. */
static char *
top(const char *name)
{
	const char *slash = strchr(name, '/');

	return slash ? xstrndup(name, (size_t) (slash - name)) : xstrdup(name);
}

/* "'NAME' is next to the script on the host, but only the script is copied into the
 * sandbox: ..." with the way to bring DIR/ENTRY in. */
static char *
input_hint(const struct ab_run_opts *o, const char *dir, const char *name, const char *entry)
{
	const char *sep = strcmp(dir, "/") == 0 ? "" : "/";

	if (o->workspace)
		return xasprintf("'%s' is next to the script on the host, outside the workspace: "
				 "copy %s%s%s into %s",
				 name, dir, sep, entry, o->workspace);
	if (o->flag_words)
		return xasprintf("'%s' is next to the script on the host, but only the script is "
				 "copied into the sandbox: add --input %s%s%s (or run in %s with "
				 "--workspace %s)",
				 name, dir, sep, entry, dir, dir);
	return xasprintf("'%s' is next to the script on the host, but only the script is copied "
			 "into the sandbox: add \"%s%s%s\" to inputs (or run in %s with "
			 "\"workspace\": \"%s\")",
			 name, dir, sep, entry, dir, dir);
}

/* The script tried to install a package, or missed one the sandbox does not have (issue
 * 28): it cannot install there (no network), it can ask for it. name: the module named, or
 * "". */
static char *
requirements_hint(const struct ab_run_opts *o, const char *text, size_t len, const char *name)
{
	static const char *const installs[] = { "externally-managed-environment",
						"pip install",
						"npm install",
						"npm ERR!",
						"npm error",
						"No matching distribution found",
						"Temporary failure in name resolution",
						"getaddrinfo EAI_AGAIN" };
	bool tried = false;
	char pkg[128];

	for (size_t i = 0; i < ARRAY_SIZE(installs) && !tried; i++)
		tried = memmem(text, len, installs[i], strlen(installs[i])) != NULL;
	if (!tried && !name[0])
		return NULL;
	snprintf(pkg, sizeof(pkg), "%s", name[0] ? name : "PACKAGE");
	if (tried)
		return o->flag_words
			       ? xasprintf(
					 "the sandbox has no network, so nothing installs inside "
					 "it: ask for the package before the run with "
					 "--requirement "
					 "%s (agentbox installs it in a sandbox of its own and the "
					 "run uses it offline)",
					 pkg)
			       : xasprintf("the sandbox has no network, so nothing installs inside "
					   "it: ask for the package before the run with "
					   "\"requirements\": [\"%s\"] (agentbox installs it in a "
					   "sandbox of its own and the run uses it offline)",
					   pkg);
	return o->flag_words ? xasprintf("'%s' is not installed in the sandbox: ask for it with "
					 "--requirement %s",
					 pkg, pkg)
			     : xasprintf("'%s' is not installed in the sandbox: ask for it with "
					 "\"requirements\": [\"%s\"]",
					 pkg, pkg);
}

static char *hint_local(const struct ab_run_opts *o, const char *text, size_t len);

char *
hint_for_run(const struct ab_run_opts *o, const char *text, size_t len)
{
	char *h = hint_local(o, text, len);
	char name[256] = "";
	enum ab_hint_kind kind;

	if (h || !text || o->requirements.n > 0)
		return h;
	kind = hint_parse(text, len, name, sizeof(name));
	if (kind == AB_HINT_PY_MODULE)
		name[strcspn(name, ".")] = '\0';
	else if (kind == AB_HINT_JS_MODULE && name[0] != '@')
		name[strcspn(name, "/")] = '\0';
	else
		name[0] = '\0';
	if (!name_ok(name) && name[0])
		name[0] = '\0';
	return requirements_hint(o, text, len, name);
}

/* A file or module the script named that lies next to it on the host. */
static char *
hint_local(const struct ab_run_opts *o, const char *text, size_t len)
{
	struct ab_err err = { 0 };
	cleanup_free char *base = NULL, *dir = NULL, *entry = NULL, *cand = NULL;
	cleanup_fd int dfd = -1;
	char name[256];
	const char *slash;
	enum ab_hint_kind kind;

	/* code has no place on the host; a script inside --workspace DIR sees its neighbours */
	if (o->code || !o->script || !text || strcmp(o->script, "--code") == 0)
		return NULL;
	kind = hint_parse(text, len, name, sizeof(name));
	if (kind == AB_HINT_NONE)
		return NULL;
	dfd = hostfs_open_parent(o->script, 0, "the script", &base, &err);
	if (dfd < 0)
		return NULL;
	slash = strrchr(o->script, '/');
	dir = slash == o->script ? xstrdup("/")
	      : slash            ? xstrndup(o->script, (size_t) (slash - o->script))
				 : xstrdup(".");
	switch (kind) {
	case AB_HINT_FILE:
		entry = top(name);
		if (exists_beneath(dfd, name))
			return input_hint(o, dir, name, entry);
		return NULL;
	case AB_HINT_PY_MODULE:
		/* "pkg.sub": the package pkg, a file pkg.py or a directory pkg */
		name[strcspn(name, ".")] = '\0';
		cand = xasprintf("%s.py", name);
		if (exists_beneath(dfd, cand))
			return input_hint(o, dir, name, cand);
		if (exists_beneath(dfd, name))
			return input_hint(o, dir, name, name);
		for (int i = 0; i < 2; i++) {
			const char *venv = i ? "venv" : ".venv";
			cleanup_free char *cfg = xasprintf("%s/pyvenv.cfg", venv);

			if (exists_beneath(dfd, cfg))
				return o->flag_words ? xasprintf("'%s' may be in the virtualenv "
								 "next to the "
								 "script on the host, which the "
								 "sandbox does "
								 "not see: add --venv %s/%s",
								 name, dir, venv)
						     : xasprintf("'%s' may be in the virtualenv "
								 "next to the "
								 "script on the host, which the "
								 "sandbox does "
								 "not see: set \"venv\": \"%s/%s\"",
								 name, dir, venv);
		}
		return NULL;
	case AB_HINT_JS_RELATIVE: {
		static const char *const ext[] = { "", ".js", ".mjs", ".cjs", ".json" };

		for (size_t i = 0; i < ARRAY_SIZE(ext); i++) {
			free(cand);
			cand = xasprintf("%s%s", name, ext[i]);
			if (exists_beneath(dfd, cand)) {
				free(entry);
				entry = top(cand);
				return input_hint(o, dir, name, entry);
			}
		}
		return NULL;
	}
	case AB_HINT_JS_MODULE:
		/* a package: "lodash", "lodash/fp", "@scope/pkg" */
		if (name[0] == '@') {
			char *s = strchr(name, '/');

			if (s && strchr(s + 1, '/'))
				*strchr(s + 1, '/') = '\0';
		} else {
			name[strcspn(name, "/")] = '\0';
		}
		cand = xasprintf("node_modules/%s", name);
		if (!exists_beneath(dfd, cand))
			return NULL;
		return o->flag_words
			       ? xasprintf("'%s' is in the node_modules next to the script on "
					   "the host, which the sandbox does not see: add "
					   "--node-modules %s/node_modules",
					   name, dir)
			       : xasprintf("'%s' is in the node_modules next to the script on "
					   "the host, which the sandbox does not see: set "
					   "\"node_modules\": \"%s/node_modules\"",
					   name, dir);
	case AB_HINT_NONE:
	default:
		return NULL;
	}
}

#include "interp.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "util/macro.h"
#include "util/xalloc.h"

const char *
interp_lang_name(enum ab_lang lang)
{
	switch (lang) {
	case AB_LANG_PYTHON:
		return "python";
	case AB_LANG_NODE:
		return "node";
	case AB_LANG_AUTO:
	default:
		return "auto";
	}
}

static bool
has_suffix(const char *s, const char *suffix)
{
	size_t ls = strlen(s), lx = strlen(suffix);

	return ls >= lx && strcmp(s + ls - lx, suffix) == 0;
}

int
interp_detect_lang(const char *name, int fd, enum ab_lang forced, enum ab_lang *ret,
		   struct ab_err *err)
{
	char line[257];
	ssize_t n;
	char *nl;

	if (forced != AB_LANG_AUTO) {
		*ret = forced;
		return 0;
	}
	if (has_suffix(name, ".py")) {
		*ret = AB_LANG_PYTHON;
		return 0;
	}
	if (has_suffix(name, ".js") || has_suffix(name, ".mjs") || has_suffix(name, ".cjs")) {
		*ret = AB_LANG_NODE;
		return 0;
	}
	n = pread(fd, line, sizeof(line) - 1, 0);
	if (n < 0)
		return ab_err_set(err, -errno, "read the script's first line: %s", strerror(errno));
	line[n] = '\0';
	nl = strchr(line, '\n');
	if (nl)
		*nl = '\0';
	if (strncmp(line, "#!", 2) == 0) {
		if (strstr(line, "python")) {
			*ret = AB_LANG_PYTHON;
			return 0;
		}
		if (strstr(line, "node")) {
			*ret = AB_LANG_NODE;
			return 0;
		}
	}
	ab_err_usage(err, "cannot tell the language of the script: no .py/.js/.mjs/.cjs "
			  "extension and no python or node shebang");
	return ab_err_fix(err, "pass --lang python or --lang node");
}

/* Looks `name` up in the caller's PATH; returns a malloc'd path or NULL. */
static char *
search_path(const char *name)
{
	const char *path = getenv("PATH");
	char *copy, *save = NULL;

	if (!path || !*path)
		path = "/usr/local/bin:/usr/bin:/bin";
	copy = xstrdup(path);
	for (char *dir = strtok_r(copy, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
		char *cand;

		if (dir[0] != '/')
			continue; /* never a relative PATH entry */
		cand = xasprintf("%s/%s", dir, name);
		if (access(cand, X_OK) == 0) {
			free(copy);
			return cand;
		}
		free(cand);
	}
	free(copy);
	return NULL;
}

int
interp_resolve(const struct ab_run_opts *o, enum ab_lang lang, struct ab_plan *plan,
	       struct ab_err *err)
{
	const char *given = lang == AB_LANG_PYTHON ? o->python_path : o->node_path;
	const char *what = lang == AB_LANG_PYTHON ? "python" : "node";
	cleanup_free char *found = NULL;
	char real[PATH_MAX];
	struct stat st;

	if (!given && lang == AB_LANG_PYTHON)
		given = "/usr/bin/python3";
	if (!given) {
		found = search_path("node");
		if (!found) {
			ab_err_set(err, -ENOENT, "node was not found on PATH");
			err->exit = AB_EXIT_NOT_FOUND;
			return ab_err_fix(err, "install Node.js (apt-get install nodejs) or pass "
					       "--node /path/to/node");
		}
		given = found;
	}
	if (!realpath(given, real)) {
		int e = errno;

		ab_err_set(err, -e, "%s interpreter '%s' not found: %s", what, given, strerror(e));
		err->exit = AB_EXIT_NOT_FOUND;
		return ab_err_fix(err, "%s",
				  lang == AB_LANG_PYTHON
					  ? "apt-get install python3, or pass --python /path/to/python3"
					  : "pass --node /path/to/node");
	}
	if (stat(real, &st) < 0 || !S_ISREG(st.st_mode) || access(real, X_OK) < 0) {
		ab_err_set(err, -EACCES, "%s interpreter '%s' is not an executable file", what,
			   real);
		err->exit = AB_EXIT_CANNOT_EXEC;
		return err->code;
	}
	plan->interp = xstrdup(real);
	if (strncmp(real, "/usr/", 5) != 0) {
		/* Outside /usr (pyenv, nvm, /opt): bind its prefix, the directory above bin/. */
		char *prefix = xstrdup(real);
		char *slash = strrchr(prefix, '/');

		*slash = '\0';
		slash = strrchr(prefix, '/');
		if (slash && slash != prefix && strcmp(slash, "/bin") == 0)
			*slash = '\0';
		if (strcmp(prefix, "") == 0 || strcmp(prefix, "/") == 0 ||
		    strncmp(prefix, "/proc", 5) == 0) {
			free(prefix);
			return ab_err_set(err, -EINVAL,
					  "%s interpreter '%s' has no installation prefix to mount",
					  what, real);
		}
		plan_add_ro_bind(plan, prefix, prefix);
		free(prefix);
	}
	return 0;
}

#include "interp.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/stat.h>
#include <sys/wait.h>

#include "../fs/hostfs.h"
#include "../spec/cfg.h"
#include "../util/fdutil.h"
#include "../util/macro.h"
#include "../util/path.h"
#include "../util/xalloc.h"
#include "binds.h"

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
		/* the interpreter the shebang names: its first word, or the word after env
		 * (and env's own -S/-flags); only its base name counts, not its arguments */
		char *save = NULL, *w = strtok_r(line + 2, " \t\r", &save);
		const char *base;

		while (w) {
			base = strrchr(w, '/') ? strrchr(w, '/') + 1 : w;
			if (strcmp(base, "env") != 0 && w[0] != '-')
				break;
			w = strtok_r(NULL, " \t\r", &save);
		}
		base = !w ? "" : strrchr(w, '/') ? strrchr(w, '/') + 1 : w;
		if (strncmp(base, "python", 6) == 0) {
			*ret = AB_LANG_PYTHON;
			return 0;
		}
		if (strcmp(base, "node") == 0 || strncmp(base, "nodejs", 6) == 0) {
			*ret = AB_LANG_NODE;
			return 0;
		}
	}
	/* code without a file name or a shebang (--code, SCRIPT -): Python, as python3 -c */
	if (name[0] == '\0') {
		*ret = AB_LANG_PYTHON;
		return 0;
	}
	ab_err_usage(err, "cannot tell the language of the script: no .py/.js/.mjs/.cjs "
			  "extension and no python or node shebang");
	return ab_err_fix(err, "pass --lang python or --lang node");
}

/* Is `path` visible in the sandbox: under /usr (the merged-usr links lead there) or under
 * a read-only bind already in the plan? */
static bool
visible_in_sandbox(const struct ab_plan *plan, const char *path)
{
	cleanup_free char *real = hostfs_realpath(path);

	if (!real)
		return false;
	if (strncmp(real, "/usr/", 5) == 0)
		return true;
	for (size_t i = 0; i < plan->n_ro_binds; i++) {
		size_t l = strlen(plan->ro_binds[i].src);

		if (strncmp(real, plan->ro_binds[i].src, l) == 0 && (real[l] == '/' || !real[l]))
			return true;
	}
	return false;
}

/* Adds a read-only bind after the never-mount check (--allow-bind exempts a path). */
static int
add_checked_bind(const struct ab_run_opts *o, struct ab_plan *plan, const char *src,
		 const char *dest, const char *what, struct ab_err *err)
{
	int r = binds_add_checked(plan, src, dest, &o->allow_binds, what, err);

	if (r == -EPERM)
		ab_err_fix(err,
			   "install it under /usr, /opt or a project directory, or add "
			   "--allow-bind '%s'",
			   src);
	return r;
}

/* The shared libraries of an interpreter outside /usr, as the dynamic loader resolves them
 * (`ld.so --list` maps them without running the program). Each one the sandbox would not
 * see is bound read-only at the same path; one the loader cannot find is an error. */
static int
bind_libraries(const struct ab_run_opts *o, struct ab_plan *plan, const char *interp,
	       struct ab_err *err)
{
	static const char *const loaders[] = { "/lib64/ld-linux-x86-64.so.2",
					       "/lib/ld-linux-aarch64.so.1", NULL };
	const char *loader = NULL;
	cleanup_free char *out = NULL;
	int p[2], ws, r = 0;
	pid_t pid;

	for (const char *const *l = loaders; *l && !loader; l++)
		if (access(*l, X_OK) == 0)
			loader = *l;
	if (!loader || pipe2(p, O_CLOEXEC) < 0)
		return 0; /* cannot check: the run itself will say if a library is missing */
	pid = fork();
	if (pid == 0) {
		int nul = open("/dev/null", O_RDWR);

		if (nul < 0 || dup2(nul, 0) < 0 || dup2(p[1], 1) < 0 || dup2(nul, 2) < 0)
			_exit(127);
		execl(loader, loader, "--list", interp, (char *) NULL);
		_exit(127);
	}
	(void) close(p[1]);
	if (pid < 0 || read_all_capped(p[0], 1 << 16, &out) < 0)
		out = NULL;
	(void) close(p[0]);
	if (pid > 0)
		(void) waitpid(pid, &ws, 0);
	if (!out)
		return 0; /* static binary or not ELF: nothing to bind */
	for (char *save = NULL, *line = strtok_r(out, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		char *arrow = strstr(line, "=> ");
		char *path, *end;
		cleanup_free char *real = NULL;

		if (!arrow)
			continue;
		path = arrow + 3;
		if (strncmp(path, "not found", 9) == 0) {
			while (*line == '\t' || *line == ' ')
				line++;
			*strstr(line, " =>") = '\0';
			ab_err_set(err, -ENOENT,
				   "interpreter '%s' needs '%s', which the dynamic "
				   "loader cannot find",
				   interp, line);
			return ab_err_fix(err, "install that library, or fix the interpreter's "
					       "RUNPATH / LD_LIBRARY_PATH");
		}
		end = strstr(path, " (0x");
		if (end)
			*end = '\0';
		if (path[0] != '/' || visible_in_sandbox(plan, path) ||
		    !(real = hostfs_realpath(path)))
			continue;
		r = add_checked_bind(o, plan, real, path, "the interpreter's library", err);
		if (r < 0)
			return r;
	}
	return 0;
}

/* The installation prefix of an interpreter at `real`: the directory above its bin/. */
static char *
install_prefix(const char *real)
{
	char *prefix = xstrdup(real);
	char *slash = strrchr(prefix, '/');

	*slash = '\0';
	slash = strrchr(prefix, '/');
	if (slash && slash != prefix && strcmp(slash, "/bin") == 0)
		*slash = '\0';
	return prefix;
}

static int
bind_outside_usr(const struct ab_run_opts *o, struct ab_plan *plan, const char *real,
		 const char *what, struct ab_err *err)
{
	cleanup_free char *prefix = NULL;
	int r;

	if (strncmp(real, "/usr/", 5) == 0)
		return 0;
	prefix = install_prefix(real);
	if (!prefix[0] || strcmp(prefix, "/") == 0)
		return ab_err_set(err, -EINVAL, "%s '%s' has no installation prefix to mount", what,
				  real);
	if (!visible_in_sandbox(plan, prefix)) {
		r = add_checked_bind(o, plan, prefix, prefix, what, err);
		if (r < 0)
			return r;
	}
	return bind_libraries(o, plan, real, err);
}

/* A virtualenv: DIR/pyvenv.cfg exists. Returns realpath(DIR) or NULL. */
static char *
venv_root(const char *dir)
{
	cleanup_free char *real = hostfs_realpath(dir);
	cleanup_free char *cfg = NULL;

	if (!real)
		return NULL;
	cfg = xasprintf("%s/pyvenv.cfg", real);
	if (access(cfg, R_OK) != 0)
		return NULL;
	return steal_ptr(&real);
}

int
interp_resolve(const struct ab_run_opts *o, enum ab_lang lang, struct ab_plan *plan,
	       struct ab_err *err)
{
	const char *given = lang == AB_LANG_PYTHON ? o->python_path : o->node_path;
	const char *what = lang == AB_LANG_PYTHON ? "python" : "node";
	cleanup_free char *found = NULL;
	cleanup_free char *venv = NULL;
	cleanup_free char *real = NULL;
	struct stat st;
	int r;

	if (lang == AB_LANG_PYTHON && plan->venv_given) {
		venv = venv_root(plan->venv_given);
		if (!venv) {
			ab_err_set(err, -ENOENT,
				   "--venv '%s' is not a virtual environment (no "
				   "pyvenv.cfg)",
				   plan->venv_given);
			return ab_err_fix(err, "create it with python3 -m venv DIR");
		}
	} else if (lang == AB_LANG_PYTHON && given) {
		/* --python VENV/bin/python: use the venv as such, not its base interpreter */
		cleanup_free char *copy = xstrdup(given);
		char *slash = strrchr(copy, '/');

		if (slash) {
			*slash = '\0';
			slash = strrchr(copy, '/');
			if (slash && strcmp(slash, "/bin") == 0) {
				*slash = '\0';
				venv = venv_root(copy[0] ? copy : "/");
			}
		}
	}
	if (venv) {
		cleanup_free char *py = xasprintf("%s/bin/python3", venv);

		if (access(py, X_OK) != 0) {
			free(py);
			py = xasprintf("%s/bin/python", venv);
		}
		if (!(real = hostfs_realpath(py))) {
			ab_err_set(err, -errno, "the virtualenv '%s' has no working bin/python: %s",
				   venv, strerror(errno));
			err->exit = AB_EXIT_NOT_FOUND;
			return ab_err_fix(err, "recreate it with python3 -m venv");
		}
		r = add_checked_bind(o, plan, venv, venv, "the virtualenv", err);
		if (r < 0)
			return r;
		r = bind_outside_usr(o, plan, real, "the virtualenv's base interpreter", err);
		if (r < 0)
			return r;
		plan->interp = xstrdup(py);
		plan->venv = xstrdup(venv);
		return 0;
	}
	if (!given && lang == AB_LANG_PYTHON)
		given = "/usr/bin/python3";
	if (!given) {
		found = path_search(cfg()->path, "node");
		if (!found) {
			ab_err_set(err, -ENOENT, "node was not found on PATH");
			err->exit = AB_EXIT_NOT_FOUND;
			return ab_err_fix(err, "install Node.js (apt-get install nodejs) or pass "
					       "--node /path/to/node");
		}
		given = found;
	}
	if (!(real = hostfs_realpath(given))) {
		int e = errno;

		ab_err_set(err, -e, "%s interpreter '%s' not found: %s", what, given, strerror(e));
		err->exit = AB_EXIT_NOT_FOUND;
		return ab_err_fix(
			err, "%s",
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
	/* the interpreter's own bind (outside /usr) is made from an fd below; this name is
	 * what the sandbox execs, at the same path */
	r = bind_outside_usr(o, plan, real, what, err);
	if (r < 0)
		return r;
	if (lang == AB_LANG_NODE && plan->node_modules_given) {
		cleanup_free char *nm = hostfs_realpath(plan->node_modules_given);

		if (!nm || stat(nm, &st) < 0 || !S_ISDIR(st.st_mode)) {
			ab_err_set(err, -ENOENT, "--node-modules '%s' is not a directory",
				   plan->node_modules_given);
			return ab_err_fix(err, "pass the node_modules directory itself");
		}
		/* /node_modules is the last stop of Node's parent-directory lookup from /work,
		 * for require() and for ESM bare specifiers alike, and it is outside the
		 * workspace (no bind nested in a tree the script controls, T4). */
		r = add_checked_bind(o, plan, nm, "/node_modules", "--node-modules", err);
		if (r < 0)
			return r;
	}
	return 0;
}

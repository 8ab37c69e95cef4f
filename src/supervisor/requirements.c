/* requirements.c: packages on request (requirements.h, docs/requirements.md). The run's
 * requirements become a requirements.txt (Python) or a package.json (Node) in a private
 * directory; prepare (prepare.c) finds the environment they key in the cache or builds it in
 * its install sandbox (its own network namespace, the registry proxy its only way out), in a
 * child process of ours so that nothing of the install (its namespaces, its proxy) stays with
 * the supervisor of the run. The run then mounts the environment read-only, offline as
 * always; the report's pre_run says how it was found. */
#include "requirements.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "../fs/walk/walk.h"
#include "../spec/cfg.h"
#include "../spec/units.h"
#include "../util/clock.h"
#include "../util/fdutil.h"
#include "../util/macro.h"
#include "../util/xalloc.h"
#include "prepare.h"
#include "rundir.h"

#define REQ_MAX_DEFAULT 32

/* The package a requirement names: "requests" of "requests[socks]>=2; python_version>'3'",
 * "@types/node" of "@types/node@^20", "is-number" of "is-number@7.0.0". malloc'd. */
static char *
package_name(const char *req, bool node)
{
	size_t n;

	if (node) {
		const char *at = strchr(req[0] == '@' ? req + 1 : req, '@');

		n = at ? (size_t) (at - req) : strlen(req);
	} else {
		n = strspn(req,
			   "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-");
	}
	return xstrndup(req, n);
}

/* Python names compare as PEP 503 normalises them: case, and runs of -_. as one '-'. */
static bool
same_package(const char *a, const char *b, bool node)
{
	if (node)
		return strcmp(a, b) == 0;
	for (;;) {
		bool sa = *a == '-' || *a == '_' || *a == '.',
		     sb = *b == '-' || *b == '_' || *b == '.';

		if (sa && sb) {
			while (*a == '-' || *a == '_' || *a == '.')
				a++;
			while (*b == '-' || *b == '_' || *b == '.')
				b++;
			continue;
		}
		if ((*a | 0x20) != (*b | 0x20) || (!*a && *b) || (*a && !*b))
			return false;
		if (!*a)
			return true;
		a++;
		b++;
	}
}

/* The operator's rules (cfg: docs/requirements.md "Operator policy"). */
static int
check_policy(const struct ab_run_opts *o, bool node, struct ab_err *err)
{
	const struct ab_cfg *c = cfg();
	uint64_t max = REQ_MAX_DEFAULT;

	if (c->requirements && strcmp(c->requirements, "deny") == 0)
		return ab_err_usage(err, "requirements are not allowed here (the operator's "
					 "requirements=deny)"),
		       ab_err_fix(err, "run without requirements, or ask the operator for an "
				       "environment with the packages (env_dir)");
	if (c->max_requirements && units_parse_count(c->max_requirements, &max) < 0)
		max = REQ_MAX_DEFAULT;
	if (o->requirements.n > max)
		return ab_err_usage(err,
				    "%zu requirements, more than the %llu allowed here "
				    "(the operator's max_requirements)",
				    o->requirements.n, (unsigned long long) max),
		       ab_err_fix(err, "ask for fewer packages");
	if (c->allow_packages && *c->allow_packages) {
		STRV_FOREACH (r, &o->requirements) {
			cleanup_free char *name = package_name(*r, node);
			bool found = false;

			for (const char *p = c->allow_packages; *p && !found;) {
				size_t l = strcspn(p, ", ");
				cleanup_free char *allowed = xstrndup(p, l);

				found = l > 0 && same_package(name, allowed, node);
				p += l;
				p += strspn(p, ", ");
			}
			if (!found)
				return ab_err_usage(err,
						    "the package '%s' is not on this agentbox's "
						    "allow-list (the operator's allow_packages)",
						    name),
				       ab_err_fix(err, "use one of: %s", c->allow_packages);
		}
	}
	if ((c->index_url && o->req_index_url && strcmp(c->index_url, o->req_index_url) != 0) ||
	    (c->find_links && o->req_find_links && strcmp(c->find_links, o->req_find_links) != 0))
		return ab_err_usage(err, "the package index is the operator's here: a spec may not "
					 "name another"),
		       ab_err_fix(err, "leave index out of the spec");
	return 0;
}

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *) a, *(const char *const *) b);
}

/* The file prepare installs from, in dir: its content is the cache key, so it is written in
 * one canonical form (sorted, the index in it). Returns its path (malloc'd) or NULL. */
static char *
write_request_file(const struct ab_run_opts *o, bool node, const char *dir, int dfd,
		   const char *url, const char *links)
{
	const char *file = node ? "package.json" : "requirements.txt";
	cleanup_free char *path = xasprintf("%s/%s", dir, file);
	struct strv sorted = { 0 };
	cleanup_free char *text = NULL;
	int fd;
	bool ok;

	STRV_FOREACH (r, &o->requirements)
		strv_push(&sorted, *r);
	qsort(sorted.v, sorted.n, sizeof(char *), cmp_str);
	if (node) {
		json_t *deps = json_object();
		json_t *pkg = json_pack("{s:s, s:s, s:b, s:s}", "name", "agentbox-requirements",
					"version", "1.0.0", "private", 1, "description",
					url ? url : "the default registry");

		STRV_FOREACH (r, &sorted) {
			cleanup_free char *name = package_name(*r, true);
			const char *range = *r + strlen(name);

			json_object_set_new(deps, name,
					    json_string(*range == '@' ? range + 1 : "*"));
		}
		json_object_set_new(pkg, "dependencies", deps);
		text = json_dumps(pkg, JSON_INDENT(2) | JSON_SORT_KEYS);
		json_decref(pkg);
	} else {
		struct strv lines = { 0 };

		strv_pushf(&lines, "# agentbox requirements; index: %s; find_links: %s",
			   url ? url : "default", links ? links : "none");
		STRV_FOREACH (r, &sorted)
			strv_push(&lines, *r);
		text = strv_join(&lines, "\n");
		strv_done(&lines);
	}
	strv_done(&sorted);
	fd = openat(dfd, file, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	ok = fd >= 0 && text && write_all(fd, text, strlen(text)) == 0 &&
	     write_all(fd, "\n", 1) == 0;
	if (fd >= 0)
		(void) close(fd);
	return ok ? steal_ptr(&path) : NULL;
}

/* The install, or the cache's answer, in a child: its result as JSON on fd out. */
static _Noreturn void
child_prepare(const json_t *req, int out)
{
	struct ab_err e = { 0 };
	json_t *ret = NULL, *msg;
	int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
	int r;

	/* the installer's output is the install report's, never the run's streams */
	if (nul >= 0) {
		(void) dup2(nul, STDOUT_FILENO);
		(void) dup2(nul, STDERR_FILENO);
	}
	r = prepare_do(req, &ret, &e);
	msg = json_pack("{s:o*, s:o*}", "result", ret, "error",
			r < 0 ? json_pack("{s:i, s:i, s:s, s:s}", "code", r, "exit", e.exit,
					  "message", e.msg, "fix", e.fix)
			      : NULL);
	(void) json_dumpfd(msg, out, JSON_COMPACT);
	_exit(0);
}

/* Runs child_prepare and reads its answer; the caller's watch pipe (watch_fd) going away
 * stops it. */
static json_t *
run_prepare(const json_t *req, int watch_fd, struct ab_err *err)
{
	int p[2];
	pid_t pid;
	cleanup_free char *buf = NULL;
	size_t len = 0, cap = 0;
	json_t *ans;

	if (pipe2(p, O_CLOEXEC) < 0)
		return ab_err_set(err, -errno, "pipe: %s", strerror(errno)), NULL;
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		(void) close(p[0]);
		(void) close(p[1]);
		return ab_err_set(err, -errno, "fork: %s", strerror(errno)), NULL;
	}
	if (pid == 0) {
		(void) close(p[0]);
		child_prepare(req, p[1]);
	}
	(void) close(p[1]);
	for (;;) {
		struct pollfd pf[2] = { { .fd = p[0], .events = POLLIN },
					{ .fd = watch_fd, .events = POLLIN } };
		ssize_t n;

		if (poll(pf, watch_fd >= 0 ? 2 : 1, -1) < 0 && errno != EINTR)
			break;
		if (watch_fd >= 0 && (pf[1].revents & (POLLIN | POLLHUP | POLLERR))) {
			(void) kill(pid,
				    SIGKILL); /* its install dies with it (--die-with-parent) */
			break;
		}
		if (!(pf[0].revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		if (cap - len < 65536)
			buf = xrealloc(buf, cap = cap ? 2 * cap : 65536);
		n = read(p[0], buf + len, cap - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t) n;
	}
	(void) close(p[0]);
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
	ans = buf ? json_loadb(buf, len, 0, NULL) : NULL;
	if (!ans)
		ab_err_set(err, -EIO, "the install of the requirements ended without an answer%s",
			   watch_fd >= 0 ? " (or its caller went away)" : "");
	return ans;
}

/* What the environment holds: {name: version} from the installer's own records. */
static json_t *
resolved_versions(const char *env, bool node)
{
	json_t *out = json_object();
	cleanup_free char *base = node ? xasprintf("%s/node_modules", env) : NULL;
	DIR *d;
	struct dirent *de;

	if (!node) {
		cleanup_free char *lib = xasprintf("%s/venv/lib", env);
		DIR *l = opendir(lib);

		while (l && (de = readdir(l)))
			if (strncmp(de->d_name, "python", 6) == 0) {
				free(base);
				base = xasprintf("%s/%s/site-packages", lib, de->d_name);
			}
		if (l)
			closedir(l);
	}
	d = base ? opendir(base) : NULL;
	while (d && (de = readdir(d)) && json_object_size(out) < 512) {
		const char *dot = strstr(de->d_name, ".dist-info");

		if (!node && dot && dot[10] == '\0') {
			cleanup_free char *nv = xstrndup(de->d_name, (size_t) (dot - de->d_name));
			char *dash = strrchr(nv, '-');

			if (dash) {
				*dash = '\0';
				json_object_set_new(out, nv, json_string(dash + 1));
			}
		} else if (node && de->d_name[0] != '.') {
			cleanup_free char *pj = xasprintf("%s/%s/package.json", base, de->d_name);
			json_t *j = json_load_file(pj, 0, NULL);
			const char *v = json_string_value(json_object_get(j, "version"));

			if (v)
				json_object_set_new(out, de->d_name, json_string(v));
			json_decref(j);
		}
	}
	if (d)
		closedir(d);
	return out;
}

/* The install failed: prepare's message, and the installer's last lines (its report's). */
static int
install_failed(const json_t *ans, struct ab_err *err)
{
	const json_t *e = json_object_get(ans, "error");
	const char *tail = json_string_value(json_object_get(
		json_object_get(json_object_get(json_object_get(ans, "result"), "report"),
				"stderr"),
		"text"));
	static const char *const telling[] = {
		"is not in this registry",  "404 Not Found", "No matching distribution",
		"Could not find a version", "ERROR:",        "ETARGET",
		"No matching version"
	};
	char last[900] = "";
	int code = (int) json_integer_value(json_object_get(e, "code"));
	size_t used = 0;
	int r;

	/* the registry's answer: the installer's lines that name what it could not find, else
	 * its last lines */
	for (const char *p = tail; p && *p && used < sizeof(last) - 200;) {
		size_t l = strcspn(p, "\n");

		for (size_t i = 0; i < ARRAY_SIZE(telling); i++)
			if (memmem(p, l, telling[i], strlen(telling[i]))) {
				used += (size_t) snprintf(last + used, sizeof(last) - used,
							  "%s%.*s",
							  used ? " | " : "; the installer said: ",
							  (int) (l > 200 ? 200 : l), p);
				break;
			}
		p += l + (p[l] == '\n');
	}
	if (!used && tail && *tail) {
		const char *p = tail + strlen(tail);
		int lines = 0;

		while (p > tail && lines < 4)
			if (*--p == '\n')
				lines++;
		snprintf(last, sizeof(last), "; the installer's last lines: %.600s",
			 p + (*p == '\n'));
	}
	r = ab_err_set(err, code < 0 ? code : -EIO, "installing the requirements failed: %s%s",
		       json_string_value(json_object_get(e, "message")) ?: "?", last);
	err->exit = (int) json_integer_value(json_object_get(e, "exit")) == AB_EXIT_USAGE
			    ? AB_EXIT_USAGE
			    : (int) json_integer_value(json_object_get(e, "exit")) ?: AB_EXIT_SETUP;
	/* prepare's own fix speaks of its output above, which a run's caller never saw */
	ab_err_fix(err, "%s",
		   code == -EIO ? "check the package names and versions against the registry"
		   : json_string_value(json_object_get(e, "fix")) &&
				   *json_string_value(json_object_get(e, "fix"))
			   ? json_string_value(json_object_get(e, "fix"))
			   : "check the package names and versions against the registry");
	return r;
}

/* The language the requirements are for, before the run resolves it. */
static int
req_language(const struct ab_run_opts *o, bool *node, struct ab_err *err)
{
	const char *s = o->script;
	size_t l = s ? strlen(s) : 0;

	if (o->lang != AB_LANG_AUTO) {
		*node = o->lang == AB_LANG_NODE;
		return 0;
	}
	if (o->code || o->session || (l > 3 && strcmp(s + l - 3, ".py") == 0)) {
		*node = false;
		return 0;
	}
	if (l > 3 && (strcmp(s + l - 3, ".js") == 0 || strcmp(s + l - 4, ".mjs") == 0 ||
		      strcmp(s + l - 4, ".cjs") == 0)) {
		*node = true;
		return 0;
	}
	return ab_err_usage(err, "requirements need the script's language"),
	       ab_err_fix(err, "say it (language / --lang python|node)");
}

int
requirements_resolve(struct ab_run_opts *o, struct ab_record *res, int *ret_lock_fd,
		     struct ab_err *err)
{
	const struct ab_cfg *c = cfg();
	const char *url = o->req_index_url ? o->req_index_url : c->index_url;
	const char *links = o->req_find_links ? o->req_find_links : c->find_links;
	char tmpl[] = "/tmp/agentbox-req-XXXXXX";
	cleanup_free char *reqfile = NULL;
	cleanup_fd int dfd = -1;
	json_t *req, *ans, *result;
	const char *env;
	int64_t t0 = now_ms();
	uint64_t cap = AB_CACHE_MAX_DEFAULT;
	bool node = false;
	int r;

	*ret_lock_fd = -1;
	if (o->requirements.n == 0)
		return 0;
	r = req_language(o, &node, err);
	if (r == 0)
		r = check_policy(o, node, err);
	if (r == 0 && (o->env_dir || o->venv || o->node_modules))
		r = ab_err_usage(err, "requirements cannot be combined with env_dir, venv or "
				      "node_modules"),
		ab_err_fix(err, "give the packages as requirements alone");
	if (r < 0)
		return r;
	if (!mkdtemp(tmpl))
		return ab_err_set(err, -errno, "mkdtemp: %s", strerror(errno));
	/* ours, 0700: everything in it by its fd */
	dfd = open(tmpl, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	reqfile =
		dfd >= 0 ? write_request_file(o, node, tmpl, dfd, url, node ? NULL : links) : NULL;
	if (!reqfile) {
		r = ab_err_set(err, -EIO, "write the requirements for the install");
		goto out;
	}
	req = json_pack("{s:s, s:{s:s}}", node ? "node" : "python", reqfile, "limits", "timeout",
			c->install_timeout ? c->install_timeout : "10m");
	if (node ? o->node_path : o->python_path)
		json_object_set_new(req, "interpreter",
				    json_string(node ? o->node_path : o->python_path));
	if (url)
		json_object_set_new(req, "index_url", json_string(url));
	if (links && !node) {
		json_object_set_new(req, "find_links", json_string(links));
		if (!url)
			json_object_set_new(req, "no_index", json_true());
	}
	ans = run_prepare(req, o->watch_fd, err);
	json_decref(req);
	if (!ans) {
		r = -EIO;
		goto out;
	}
	result = json_object_get(ans, "result");
	env = json_string_value(json_object_get(result, "env_dir"));
	if (json_object_get(ans, "error") || !env) {
		r = install_failed(ans, err);
		json_decref(ans);
		goto out;
	}
	o->env_dir = cli_own(o, env);
	{
		cleanup_free char *marker = xasprintf("%s/" AB_ENV_MARKER, env);
		const char *name = strrchr(env, '/');
		json_t *evict = NULL;
		struct ab_err ignored = { 0 };

		/* in use (eviction passes it by) and just used (least recently used goes first) */
		*ret_lock_fd = open(marker, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		if (*ret_lock_fd >= 0)
			(void) flock(*ret_lock_fd, LOCK_SH);
		(void) utimensat(AT_FDCWD, marker, NULL, AT_SYMLINK_NOFOLLOW);
		if (c->cache_max)
			(void) units_parse_size(c->cache_max, &cap);
		(void) prepare_evict(NULL, cap, name ? name + 1 : NULL, &evict, &ignored);
		res->pre_run = json_pack(
			"{s:o, s:s, s:I, s:s, s:o, s:s?, s:s?, s:o*}", "requirements", json_array(),
			"environment",
			json_is_true(json_object_get(result, "cache_hit")) ? "cached" : "installed",
			"ms", (json_int_t) (now_ms() - t0), "env_dir", env, "resolved",
			resolved_versions(env, node), "index_url", url, "find_links",
			node ? NULL : links, "evicted",
			evict ? json_incref(json_object_get(evict, "evicted")) : NULL);
		STRV_FOREACH (q, &o->requirements)
			json_array_append_new(json_object_get(res->pre_run, "requirements"),
					      json_string(*q));
		json_decref(evict);
	}
	json_decref(ans);
	r = 0;
out:
	if (dfd >= 0) {
		(void) unlinkat(dfd, "requirements.txt", 0);
		(void) unlinkat(dfd, "package.json", 0);
	}
	(void) rmdir(tmpl); /* the directory mkdtemp made for us, empty now */
	return r;
}

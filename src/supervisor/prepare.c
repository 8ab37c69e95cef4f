#include "prepare.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <nettle/sha2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sys/file.h>
#include <sys/stat.h>

#include "../fs/hostfs.h"
#include "../fs/walk/walk.h"
#include "../spec/cfg.h"
#include "../spec/options.h"
#include "../spec/record.h"
#include "../spec/report.h"
#include "../spec/units.h"
#include "../util/fdutil.h"
#include "../util/macro.h"
#include "../util/path.h"
#include "../util/xalloc.h"
#include "netproxy.h"
#include "run.h"
#include "rundir.h"

#define AB_ENV_FORMAT "agentbox-env-1"

/* The drivers run inside the install sandbox, as the "script" of an ordinary run. A failed
 * step is one line naming it and the installer's own exit status, never a traceback: what
 * the installer printed above it is the story. */
static const char py_driver[] =
	"import subprocess, sys\n"
	"env, req, flags = sys.argv[1], sys.argv[2], sys.argv[3:]\n"
	"venv = [sys.executable, '-m', 'venv']\n"
	"pip = []\n"
	"i = 0\n"
	"while i < len(flags):\n"
	"    if flags[i] == '--system-site-packages':\n"
	"        venv.append(flags[i])\n"
	"    elif flags[i] == '--no-index':\n"
	"        pip.append(flags[i])\n"
	"    elif flags[i] in ('--find-links', '--index-url'):\n"
	"        pip += [flags[i], flags[i + 1]]\n"
	"        i += 1\n"
	"    i += 1\n"
	"def step(what, argv):\n"
	"    try:\n"
	"        rc = subprocess.run(argv).returncode\n"
	"    except OSError as e:\n"
	"        print('agentbox: prepare: %s: %s' % (what, e), file=sys.stderr)\n"
	"        sys.exit(127)\n"
	"    if rc != 0:\n"
	"        print('agentbox: prepare: %s exited with status %d' % (what, rc), "
	"file=sys.stderr)\n"
	"        sys.exit(rc if rc > 0 else 1)\n"
	"step('python -m venv', venv + [env + '/venv'])\n"
	"step('pip install', [env + '/venv/bin/python', '-m', 'pip', 'install', '--no-input',\n"
	"     '--disable-pip-version-check', '--no-cache-dir', '-r', req] + pip)\n";

static const char node_driver[] =
	"const { spawnSync } = require('child_process');\n"
	"const fs = require('fs');\n"
	"const [env, lock, registry] = process.argv.slice(2);\n"
	"const cmd = lock === '1' ? 'ci' : 'install';\n"
	"const args = [cmd, '--no-audit', '--no-fund', '--no-update-notifier'];\n"
	"if (registry) args.push('--registry', registry);\n"
	"try {\n"
	"  fs.copyFileSync('package.json', env + '/package.json');\n"
	"  if (lock === '1') fs.copyFileSync('package-lock.json', env + '/package-lock.json');\n"
	"} catch (e) {\n"
	"  console.error('agentbox: prepare: ' + e.message);\n"
	"  process.exit(1);\n"
	"}\n"
	"const r = spawnSync('npm', args, { cwd: env, stdio: 'inherit' });\n"
	"if (r.error) {\n"
	"  console.error('agentbox: prepare: cannot run npm: ' + r.error.message);\n"
	"  process.exit(127);\n"
	"}\n"
	"if (r.status !== 0)\n"
	"  console.error('agentbox: prepare: npm ' + cmd + ' exited with ' +\n"
	"    (r.status === null ? 'signal ' + r.signal : 'status ' + r.status));\n"
	"process.exit(r.status === null ? 1 : r.status);\n";

char *
prepare_default_cache(void)
{
	const char *env = cfg()->cache_dir;
	cleanup_free char *root = NULL;

	if (env && env[0] == '/')
		return xstrdup(env);
	root = rundir_default_root(geteuid());
	return xasprintf("%s/envs", root);
}

/* sha256 of a file's content (O_NOFOLLOW is not used: the caller names its own files). */
static int
hash_file(struct sha256_ctx *h, const char *path)
{
	cleanup_fd int fd = open(path, O_RDONLY | O_CLOEXEC);
	char buf[65536];
	ssize_t n;

	if (fd < 0)
		return -errno;
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		sha256_update(h, (size_t) n, (const uint8_t *) buf);
	return n < 0 ? -errno : 0;
}

static void
hash_str(struct sha256_ctx *h, const char *s)
{
	sha256_update(h, strlen(s) + 1, (const uint8_t *) s);
}

/* The interpreter's identity: its resolved path, size and mtime (no need to run it). */
static int
hash_interpreter(struct sha256_ctx *h, const char *path)
{
	cleanup_free char *real = hostfs_realpath(path);
	char id[PATH_MAX + 64];
	struct stat st;

	if (!real || stat(real, &st) < 0)
		return -errno;
	snprintf(id, sizeof(id), "%s %lld %lld", real, (long long) st.st_size,
		 (long long) st.st_mtime);
	hash_str(h, id);
	return 0;
}

struct env_spec {
	bool python;
	const char *reqs; /* requirements.txt or package.json */
	char *lock;       /* package-lock.json (node), may be NULL */
	const char *interp;
	bool system_site;
};

static int
env_key(const struct env_spec *s, char ret[65], struct ab_err *err)
{
	static const char hex[] = "0123456789abcdef";
	struct sha256_ctx h;
	uint8_t d[SHA256_DIGEST_SIZE];
	int r;

	sha256_init(&h);
	hash_str(&h, AB_ENV_FORMAT);
	hash_str(&h, s->python ? "python" : "node");
	hash_str(&h, s->system_site ? "system-site-packages" : "isolated");
	r = hash_interpreter(&h, s->interp);
	if (r < 0)
		return ab_err_set(err, r, "interpreter '%s': %s", s->interp, strerror(-r));
	r = hash_file(&h, s->reqs);
	if (r < 0)
		return ab_err_set(err, r, "'%s': %s", s->reqs, strerror(-r));
	hash_str(&h, s->lock ? "lock" : "no-lock");
	if (s->lock) {
		r = hash_file(&h, s->lock);
		if (r < 0)
			return ab_err_set(err, r, "'%s': %s", s->lock, strerror(-r));
	}
	sha256_digest(&h, sizeof(d), d);
	for (size_t i = 0; i < 32; i++) {
		ret[2 * i] = hex[d[i] >> 4];
		ret[2 * i + 1] = hex[d[i] & 15];
	}
	ret[64] = '\0';
	return 0;
}

/* A sibling package-lock.json of package.json, if there is one. */
/* node on PATH, as `run` finds it; /usr/bin/node when there is none. */
static char *
default_node(void)
{
	char *n = path_search(cfg()->path, "node");

	return n ? n : xstrdup("/usr/bin/node");
}

static char *
sibling_lock(const char *pkg)
{
	cleanup_free char *copy = xstrdup(pkg);
	char *slash = strrchr(copy, '/');
	char *lock;

	if (slash)
		*slash = '\0';
	lock = slash ? xasprintf("%s/package-lock.json", copy) : xstrdup("package-lock.json");
	if (access(lock, R_OK) == 0)
		return lock;
	free(lock);
	return NULL;
}

/* The environment's content was written by untrusted install scripts: what agentbox mounts
 * from it must be a real directory inside it, not a symlink pointing elsewhere on the host,
 * and a venv's interpreter must still resolve to the interpreter it was prepared with. */
static int
check_env_tree(const char *real, bool python, const char *interp, struct ab_err *err)
{
	cleanup_free char *sub = xasprintf("%s/%s", real, python ? "venv" : "node_modules");
	struct stat st;

	if (lstat(sub, &st) < 0 || !S_ISDIR(st.st_mode)) {
		ab_err_set(err, -EPERM,
			   "the environment '%s' is damaged: '%s' is not a directory "
			   "(a symlink planted by an install script?)",
			   real, sub);
		return ab_err_fix(err, "remove it and run agentbox prepare again");
	}
	if (python) {
		cleanup_free char *py = xasprintf("%s/bin/python3", sub);
		cleanup_free char *a = hostfs_realpath(py);
		cleanup_free char *b = interp ? hostfs_realpath(interp) : NULL;

		if (!a || !b || strcmp(a, b) != 0) {
			ab_err_set(err, -EPERM,
				   "the environment '%s' is damaged: its bin/python3 no "
				   "longer resolves to the interpreter it was prepared with",
				   real);
			return ab_err_fix(err, "remove it and run agentbox prepare again");
		}
	}
	return 0;
}

/* Reads DIR/agentbox-env.json (capped, never through a symlink). */
static int
read_env_marker(const char *dir, char **ret_venv, char **ret_nm, struct ab_err *err)
{
	cleanup_free char *path = xasprintf("%s/" AB_ENV_MARKER, dir);
	cleanup_free char *text = NULL;
	cleanup_fd int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	json_t *j;
	json_error_t je;
	const char *kind;
	cleanup_free char *real = NULL;
	int r;

	if (fd < 0) {
		ab_err_set(err, -errno, "'%s' is not a prepared environment (no %s)", dir,
			   AB_ENV_MARKER);
		return ab_err_fix(err, "run agentbox prepare first");
	}
	if (read_all_capped(fd, 65536, &text) < 0)
		return ab_err_set(err, -EIO, "cannot read '%s'", path);
	j = json_loads(text, 0, &je);
	if (!j)
		return ab_err_set(err, -EINVAL, "'%s' is not valid JSON: %s", path, je.text);
	kind = json_string_value(json_object_get(j, "kind"));
	real = hostfs_realpath(dir);
	if (!real) {
		r = ab_err_set(err, -errno, "'%s': %s", dir, strerror(errno));
		json_decref(j);
		return r;
	}
	if (!kind || (strcmp(kind, "python") != 0 && strcmp(kind, "node") != 0)) {
		json_decref(j);
		return ab_err_set(err, -EINVAL, "'%s' has an unknown kind", path);
	}
	r = check_env_tree(real, strcmp(kind, "python") == 0,
			   json_string_value(json_object_get(j, "interpreter")), err);
	if (r == 0 && strcmp(kind, "python") == 0)
		*ret_venv = xasprintf("%s/venv", real);
	else if (r == 0)
		*ret_nm = xasprintf("%s/node_modules", real);
	json_decref(j);
	return r;
}

static bool
ends_with(const char *s, const char *x)
{
	size_t a = strlen(s), b = strlen(x);

	return a >= b && strcmp(s + a - b, x) == 0;
}

int
prepare_lookup(const char *spec, const char *cache_dir, const char *python, const char *node_path,
	       char **ret_venv, char **ret_nm, struct ab_err *err)
{
	static const char *const variant[] = { "isolated", "--system-site-packages" };
	struct stat st;
	struct env_spec es = { 0 };
	cleanup_free char *cache = cache_dir ? xstrdup(cache_dir) : prepare_default_cache();
	cleanup_free char *node = NULL;
	char *found[2] = { NULL, NULL };
	int nfound = 0;
	char key[65];
	int r = 0;

	if (stat(spec, &st) < 0) {
		ab_err_set(err, -errno, "--env-dir '%s': %s", spec, strerror(errno));
		return ab_err_fix(err, "pass the path agentbox prepare printed");
	}
	if (S_ISDIR(st.st_mode))
		return read_env_marker(spec, ret_venv, ret_nm, err);
	/* A requirements / package file: the environment prepared from it for the interpreter
	 * this run uses, keyed exactly as prepare keys it (--python/--node, else the default). */
	es.python = !(ends_with(spec, "package.json") || ends_with(spec, "package-lock.json"));
	if (es.python) {
		es.reqs = spec;
		es.interp = python ? python : "/usr/bin/python3";
	} else {
		cleanup_free char *copy = xstrdup(spec);
		char *slash = strrchr(copy, '/');
		static char pkg[PATH_MAX];

		if (ends_with(spec, "package-lock.json")) {
			if (slash)
				*slash = '\0';
			snprintf(pkg, sizeof(pkg), "%s/package.json", slash ? copy : ".");
			es.reqs = pkg;
		} else {
			es.reqs = spec;
		}
		es.lock = sibling_lock(es.reqs);
		if (!node_path)
			node_path = node = default_node();
		es.interp = node_path;
	}
	/* Python: the isolated and the --system-site-packages variant both match the file; more
	 * than one prepared is a choice only the caller can make. */
	for (int site = 0; site < (es.python ? 2 : 1); site++) {
		cleanup_free char *dir = NULL;

		es.system_site = site == 1;
		r = env_key(&es, key, err);
		if (r < 0)
			break;
		dir = xasprintf("%s/%.32s", cache, key);
		if (access(dir, F_OK) == 0) {
			found[nfound++] = steal_ptr(&dir);
		}
	}
	free(es.lock);
	if (r < 0) {
		/* the file or the interpreter cannot be read */
	} else if (nfound == 1) {
		r = read_env_marker(found[0], ret_venv, ret_nm, err);
	} else if (nfound == 2) {
		r = ab_err_usage(err,
				 "--env-dir '%s' matches 2 environments prepared from it for %s: "
				 "%s (%s) and %s (%s)",
				 spec, es.interp, found[0], variant[0], found[1], variant[1]);
		ab_err_fix(err, "pass the directory agentbox prepare printed for the one you want: "
				"--env-dir DIR");
	} else {
		r = ab_err_set(err, -ENOENT, "no environment prepared from '%s' for %s in '%s'",
			       spec, es.interp, cache);
		/* an interpreter the run names explicitly is one prepare must be told about */
		if (es.python ? python != NULL : node == NULL)
			ab_err_fix(err, "run agentbox prepare --%s '%s' --interpreter %s first",
				   es.python ? "python" : "node", spec, es.interp);
		else
			ab_err_fix(err, "run agentbox prepare --%s '%s' first",
				   es.python ? "python" : "node", spec);
	}
	free(found[0]);
	free(found[1]);
	return r;
}

/* The marker, written by fd into the environment agentbox is about to publish (its own
 * copy: no install script ever wrote there), O_EXCL|O_NOFOLLOW. */
static int
write_marker(int dfd, const struct env_spec *s, const char *key)
{
	cleanup_fd int fd = -1;
	json_t *j;
	int r;

	fd = openat(dfd, AB_ENV_MARKER, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	j = json_pack("{s:i, s:s, s:s, s:s, s:s, s:s?, s:b, s:I}", "schema_version", 1, "kind",
		      s->python ? "python" : "node", "key", key, "interpreter", s->interp,
		      "requirements", s->reqs, "lock", s->lock, "system_site", s->system_site,
		      "created_unix", (json_int_t) time(NULL));
	r = json_dumpfd(j, fd, JSON_INDENT(2) | JSON_SORT_KEYS);
	json_decref(j);
	return r < 0 ? -EIO : 0;
}

/* The cache directory, opened once and checked like the runs directory: created when missing
 * (the default under the runs root), a real directory owned by the caller and writable by
 * nobody else, or refused with the fix. *ret_path is the kernel's name for it (absolute,
 * symlink-free): environments are built at that path. */
static int
open_cache(const char *given, char **ret_path, struct ab_err *err)
{
	const char *env = cfg()->cache_dir;
	cleanup_fd int fd = -1;
	int r;

	if (!given && env && env[0] == '/')
		given = env;
	if (!given) {
		struct ab_rundir rd;
		cleanup_free char *root = rundir_default_root(geteuid());
		cleanup_free char *display = NULL;

		rundir_init(&rd);
		r = rundir_open_root(root, geteuid() == 0, &rd, err);
		if (r == 0) {
			display = xasprintf("%s/envs", rd.root);
			fd = rundir_open_private(rd.root_fd, "envs", display, err);
		}
		rundir_done(&rd);
		if (r < 0)
			return r;
		if (fd < 0)
			return fd;
	} else {
		cleanup_free char *base = NULL;
		cleanup_fd int parent = hostfs_open_parent(given, 0, "--cache-dir", &base, err);
		cleanup_fd int pdir = -1;

		if (parent < 0)
			return parent;
		pdir = openat(parent, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (pdir < 0)
			return ab_err_set(err, -errno, "--cache-dir '%s': %s", given,
					  strerror(errno));
		fd = rundir_open_private(pdir, base, given, err);
		if (fd < 0)
			return fd;
	}
	*ret_path = hostfs_fd_path(fd);
	if (!*ret_path)
		return ab_err_set(err, -ENOENT,
				  "cannot name the cache directory (is /proc mounted?)");
	return steal_fd(&fd);
}

/* Is `name` in cache_fd an environment agentbox published: a directory of ours (not a link)
 * holding a regular marker? One left by an older agentbox (owned by the sandbox uid) is not. */
static bool
env_published(int cache_fd, const char *name)
{
	cleanup_free char *marker = xasprintf("%s/" AB_ENV_MARKER, name);
	struct stat st;

	return fstatat(cache_fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode) &&
	       st.st_uid == geteuid() && !(st.st_mode & (S_IWGRP | S_IWOTH)) &&
	       fstatat(cache_fd, marker, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode);
}

/* Removes `name` from cache_fd when it is there (by fd, never through a link). */
static int
remove_entry(int cache_fd, const char *name, struct ab_err *err)
{
	struct stat st;

	if (fstatat(cache_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : ab_err_set(err, -errno, "examine '%s'", name);
	if (!S_ISDIR(st.st_mode))
		return unlinkat(cache_fd, name, 0) < 0
			       ? ab_err_set(err, -errno, "remove '%s'", name)
			       : 0;
	return walk_remove_tree(cache_fd, name, err);
}

/* The lock that serialises prepares of one key: NAME.lock in the cache, flock()ed. Its holder
 * unlinks it before closing it (cache_unlock), so none is left behind; a waiter that then gets
 * the lock holds an unlinked file, sees that the name no longer leads to its inode, and opens
 * the name again. Returns the locked fd or -errno with err. */
static int
cache_lock(int cache_fd, const char *cache_path, const char *lockname, struct ab_err *err)
{
	for (;;) {
		cleanup_fd int fd = -1;
		struct stat st, now;

		fd = openat(cache_fd, lockname, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0)
			return ab_err_set(err, -errno, "lock '%s/%s': %s", cache_path, lockname,
					  strerror(errno));
		if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid())
			return ab_err_set(err, -EPERM, "lock '%s/%s': not agentbox's lock file",
					  cache_path, lockname);
		if (RETRY_EINTR(flock(fd, LOCK_EX)) < 0)
			return ab_err_set(err, -errno, "lock '%s/%s': %s", cache_path, lockname,
					  strerror(errno));
		if (fstatat(cache_fd, lockname, &now, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno != ENOENT)
				return ab_err_set(err, -errno, "lock '%s/%s': %s", cache_path,
						  lockname, strerror(errno));
		} else if (now.st_dev == st.st_dev && now.st_ino == st.st_ino) {
			return steal_fd(&fd);
		}
		/* the holder before us removed it (or it was replaced): lock the name anew */
	}
}

/* Ends what cache_lock began: the name goes first, while the lock is still held. */
static void
cache_unlock(int cache_fd, const char *lockname, int *fd)
{
	if (*fd < 0)
		return;
	(void) unlinkat(cache_fd, lockname, 0);
	(void) close(*fd);
	*fd = -1;
}

/* ---- the install's network (netproxy.h) ------------------------------------------------- */

/* The package index the install uses: pypi.org and files.pythonhosted.org for pip, or
 * registry.npmjs.org for npm; --index-url's host instead; none with --no-index. The
 * registry proxy allows these (and each --allow-host), and prepare checks that they answer
 * before it starts the install. */
static void
index_hosts(struct np_policy *p, bool python, bool no_index, const char *index_target)
{
	if (no_index)
		return;
	if (index_target) {
		(void) np_policy_add(p, index_target);
	} else if (python) {
		(void) np_policy_add(p, "pypi.org");
		(void) np_policy_add(p, "files.pythonhosted.org");
	} else {
		(void) np_policy_add(p, "registry.npmjs.org");
	}
}

/* --index-url https://HOST[:PORT][/PATH]: HOST[:PORT] into buf, for the allow-list. No
 * credentials (the URL lands in the install's argv and report) and nothing but HTTPS (the
 * proxy only tunnels). Returns 0 or -EINVAL. */
static int
index_url_target(const char *url, char *buf, size_t size)
{
	struct np_policy one = { 0 };
	const char *a = url + 8;
	size_t n;

	if (strncmp(url, "https://", 8) != 0)
		return -EINVAL;
	for (const char *c = url; *c; c++)
		if ((unsigned char) *c <= 0x20 || *c == 0x7f)
			return -EINVAL;
	n = strcspn(a, "/?#");
	if (n == 0 || n >= size || memchr(a, '@', n))
		return -EINVAL;
	memcpy(buf, a, n);
	buf[n] = '\0';
	return np_policy_add(&one, buf) < 0 ? -EINVAL : 0;
}

/* prepare --report FILE: the install run's report, with what the proxy let through and
 * refused (network_proxy, sandbox.network.refused_connections). */
/* prepare's report: the install run's report, with what the proxy let through and refused
 * (network_proxy, sandbox.network.refused_connections). */
static json_t *
prepare_report(struct ab_record *res, int r, const struct ab_err *err, const struct ab_netproxy *np)
{
	json_t *rep, *net;

	if (r < 0)
		result_set_message(res, err->msg, err->fix);
	res->agentbox_exit = r < 0 ? (err->exit ? err->exit : AB_EXIT_SETUP) : 0;
	rep = report_build(res);
	net = json_object_get(json_object_get(rep, "sandbox"), "network");
	if (net && np->stats_valid)
		json_object_set_new(net, "refused_connections",
				    json_integer((json_int_t) np->refused));
	json_object_set_new(rep, "network_proxy", netproxy_report(np));
	return rep;
}

static const char *
req_str(const json_t *q, const char *key)
{
	return json_string_value(json_object_get(q, key));
}

/* The install run's options: built directly, never through argv. */
static int
install_opts(struct ab_run_opts *o, const struct env_spec *es, const json_t *q, const char *dir,
	     struct ab_err *err)
{
	const json_t *lim = json_object_get(q, "limits");
	const char *find_links = req_str(q, "find_links");
	const char *index_url = req_str(q, "index_url");
	const char *t = json_string_value(json_object_get(lim, "timeout"));
	const char *m = json_string_value(json_object_get(lim, "memory"));
	const char *p = json_string_value(json_object_get(lim, "pids"));
	int r;

	r = cli_set_limit(o, AB_LIM_TIMEOUT_MS, t ? t : "10m", err);
	if (r == 0 && m)
		r = cli_set_limit(o, AB_LIM_MEMORY, m, err);
	if (r == 0 && p)
		r = cli_set_limit(o, AB_LIM_PIDS, p, err);
	/* the environment's tmpfs is RAM too (1536M + the workspace + /tmp: 2304M): a bigger
	 * default above them, not an explicit one (a host
	 * that cannot enforce it warns, as for any default) */
	if (!m)
		o->limits[AB_LIM_MEMORY].value = 3ULL << 30;
	if (r == 0)
		r = cli_set_env(o, "PIP_NO_CACHE_DIR=1", err);
	if (r == 0)
		r = cli_set_env(o, "npm_config_cache=/tmp/npm-cache", err);
	for (size_t i = 0; r == 0 && i < netproxy_env_count(); i++) {
		cleanup_free char *kv = netproxy_env(i);

		r = cli_set_env(o, kv, err);
	}
	if (r == 0)
		r = cli_set_lang(o, es->python ? "python" : "node", err);
	if (r < 0)
		return r;
	o->rm = true;
	o->relay_to_stderr = true;
	if (es->python)
		o->python_path = cli_own(o, es->interp);
	else
		o->node_path = cli_own(o, es->interp);
	strv_push(&o->inputs, es->reqs);
	if (es->python && find_links)
		strv_push(&o->inputs, find_links);
	if (!es->python && es->lock)
		strv_push(&o->inputs, es->lock);
	o->code = es->python ? py_driver : node_driver;
	o->code_len = strlen(o->code);
	o->script = "--code";
	strv_push(&o->script_args, dir);
	if (es->python) {
		const char *base = strrchr(es->reqs, '/');

		strv_push(&o->script_args, base ? base + 1 : es->reqs);
		if (es->system_site)
			strv_push(&o->script_args, "--system-site-packages");
		if (json_is_true(json_object_get(q, "no_index")))
			strv_push(&o->script_args, "--no-index");
		if (find_links) {
			const char *fb = strrchr(find_links, '/');

			strv_push(&o->script_args, "--find-links");
			strv_pushf(&o->script_args, "/work/%s", fb && fb[1] ? fb + 1 : find_links);
		}
		if (index_url)
			strv_push_n(&o->script_args, 2, "--index-url", index_url);
	} else {
		strv_push(&o->script_args, es->lock ? "1" : "0");
		if (index_url)
			strv_push(&o->script_args, index_url);
	}
	return 0;
}

/* The request: what to install (es; *ret_node: the node found on PATH, owned), the install's
 * network (np's policy, and the package index to probe before it), the environment's size
 * cap. Returns 0 or a usage error. */
static int
prepare_request(const json_t *q, struct env_spec *es, char **ret_node, struct ab_netproxy *np,
		struct np_policy *index, uint64_t *env_bytes, struct ab_err *err)
{
	const char *index_url = req_str(q, "index_url");
	bool no_index = json_is_true(json_object_get(q, "no_index"));
	const json_t *hosts = json_object_get(q, "allow_hosts");
	const char *disk = json_string_value(json_object_get(json_object_get(q, "limits"), "disk"));
	char index_target[NP_HOST_MAX + 16];
	size_t i;
	json_t *h;

	es->python = req_str(q, "python") != NULL;
	es->reqs = es->python ? req_str(q, "python") : req_str(q, "node");
	es->interp = req_str(q, "interpreter");
	es->system_site = json_is_true(json_object_get(q, "system_site_packages"));
	if (!es->reqs)
		return ab_err_usage(err, "prepare: give \"python\" or \"node\"");
	json_array_foreach(hosts, i, h)
	{
		if (!json_is_string(h) || np_policy_add(&np->policy, json_string_value(h)) < 0)
			return ab_err_usage(
				err,
				"prepare: --allow-host '%s': expected HOST or HOST:PORT "
				"(at most %d)",
				json_is_string(h) ? json_string_value(h) : "?", NP_MAX_ALLOW);
	}
	if (index_url && index_url_target(index_url, index_target, sizeof(index_target)) < 0)
		return ab_err_usage(
			err,
			"prepare: --index-url '%s': expected https://HOST[:PORT][/PATH] "
			"(no user:password@)",
			index_url);
	/* The install's network: its own namespace, the registry proxy its only way out, to the
	 * package index and each --allow-host. */
	index_hosts(index, es->python, no_index, index_url ? index_target : NULL);
	for (i = 0; i < index->n; i++) {
		char t[NP_HOST_MAX + 16];

		np_format_target(t, sizeof(t), index->allow[i].host, index->allow[i].port);
		if (np_policy_add(&np->policy, t) < 0)
			return ab_err_usage(err, "prepare: more than %d hosts to allow",
					    NP_MAX_ALLOW);
	}
	if (disk && (units_parse_size(disk, env_bytes) < 0 || *env_bytes < (16ULL << 20)))
		return ab_err_usage(err,
				    "prepare: invalid --disk '%s': expected a size of at least 16M "
				    "(e.g. 2G)",
				    disk);
	if (!es->python) {
		es->lock =
			req_str(q, "lock") ? xstrdup(req_str(q, "lock")) : sibling_lock(es->reqs);
		if (!es->interp) {
			*ret_node = default_node();
			es->interp = *ret_node;
		}
	} else if (!es->interp) {
		es->interp = "/usr/bin/python3";
	}
	return 0;
}

/* How the install went (r: run_main's), said once: an index gone after the probe, a failed
 * installer, an environment not copied out or too big for the copy. Returns 0 or -errno. */
static int
install_verdict(int r, const struct ab_record *res, const struct ab_netproxy *np,
		uint64_t env_bytes, struct ab_err *err)
{
	bool failed = res->status != AB_STATUS_EXITED || res->exit_code != 0;

	if (r < 0)
		return r;
	if (failed && np->stats_valid && np->allowed == 0 && np->refused == 0 && np->failed > 0) {
		/* every way out failed to connect: the index went away after the probe */
		const char *f = np->failures.n ? np->failures.v[0] : "no connection succeeded";

		r = ab_err_set(err, -EHOSTUNREACH, "cannot reach the package index: %s",
			       strncmp(f, "CONNECT ", 8) == 0 ? f + 8 : f);
		err->exit = AB_EXIT_UNAVAILABLE;
		ab_err_fix(err, "check this host's network and DNS, then run prepare again");
		return r;
	}
	if (failed) {
		r = ab_err_set(err, -EIO, "the install failed: %s (exit %d)%s%s",
			       result_status_name(res->status), res->exit_code,
			       res->message ? ": " : "", res->message ? res->message : "");
		ab_err_fix(err, "read the installer's output above");
		return r;
	}
	if (!res->env_copied)
		return ab_err_set(err, -EIO, "the environment was not copied out");
	if (json_is_true(json_object_get(res->environment, "truncated"))) {
		r = ab_err_set(err, -EFBIG,
			       "the environment is bigger than agentbox copies "
			       "(400000 entries, %llu MiB)",
			       (unsigned long long) (env_bytes >> 20));
		ab_err_fix(err, "raise prepare --disk, or install fewer packages");
		return r;
	}
	{
		json_int_t skipped =
			json_integer_value(json_object_get(res->environment, "skipped_count"));

		if (skipped > 0)
			fprintf(stderr,
				"agentbox: prepare: %lld entries of the environment were left out "
				"(links pointing outside it, FIFOs, sockets, hard links; see "
				"--report)\n",
				(long long) skipped);
	}
	return 0;
}

/* The install, a run of its own: the environment being built is bound writable at dir and
 * copied out into build_fd; the registry proxy (np) its only way out. Sets *ret_report to
 * its report (also when it failed). Returns 0 or -errno. */
static int
prepare_install(const json_t *q, const struct env_spec *es, const char *dir, int build_fd,
		uint64_t env_bytes, struct ab_netproxy *np, json_t **ret_report, struct ab_err *err)
{
	struct ab_run_opts o;
	struct ab_record res;
	int r;

	run_opts_init(&o);
	result_init(&res, &o);
	r = install_opts(&o, es, q, dir, err);
	if (r == 0) {
		o.share_net = true;
		o.netproxy = np;
		o.env_path = dir;
		o.env_bytes = env_bytes;
		o.env_inodes = 400000;
		o.env_dst_fd = build_fd;
		r = run_main(&o, &res, err);
	}
	if (r < 0)
		res.status = AB_STATUS_SETUP_ERROR;
	netproxy_stop(np);
	r = install_verdict(r, &res, np, env_bytes, err);
	if (np->refused > 0)
		fprintf(stderr,
			"agentbox: prepare: the registry proxy refused %llu connection(s) "
			"(see above)\n",
			(unsigned long long) np->refused);
	*ret_report = prepare_report(&res, r, err, np);
	result_done(&res);
	run_opts_done(&o);
	return r;
}

int
prepare_do(const json_t *q, json_t **ret, struct ab_err *err)
{
	struct env_spec es = { 0 };
	cleanup_free char *node = NULL, *dir = NULL, *cache_path = NULL;
	cleanup_fd int cache_fd = -1, build_fd = -1;
	int lockfd = -1;
	char name[40], build_name[48], lockname[48] = "", key[65];
	const char *index_url = req_str(q, "index_url");
	struct np_policy index = { 0 };
	uint64_t env_bytes = 1536ULL << 20;
	struct ab_netproxy np;
	json_t *report = NULL;
	uid_t owner = (uid_t) -1;
	gid_t group = (gid_t) -1;
	int r;

	*ret = NULL;
	netproxy_init(&np);
	r = prepare_request(q, &es, &node, &np, &index, &env_bytes, err);
	if (r < 0)
		goto out;
	r = env_key(&es, key, err);
	if (r < 0)
		goto out;
	/* Everything in the cache is done relative to its fd, checked once. */
	cache_fd = open_cache(req_str(q, "cache_dir"), &cache_path, err);
	if (cache_fd < 0) {
		r = cache_fd;
		goto out;
	}
	snprintf(name, sizeof(name), "%.32s", key);
	snprintf(build_name, sizeof(build_name), ".build-%.32s", key);
	snprintf(lockname, sizeof(lockname), "%.32s.lock", key);
	dir = xasprintf("%s/%s", cache_path, name);
	lockfd = cache_lock(cache_fd, cache_path, lockname, err);
	if (lockfd < 0) {
		r = lockfd;
		goto out;
	}
	if (env_published(cache_fd, name)) {
		fprintf(stderr, "agentbox: cache hit\n");
		*ret = json_pack("{s:s, s:b, s:n}", "env_dir", dir, "cache_hit", 1, "report");
		r = 0;
		goto out;
	}
	/* What is there instead (a failed build, an environment an older agentbox let the
	 * install write into) is not trusted: gone, then built afresh. */
	r = remove_entry(cache_fd, name, err);
	if (r == 0)
		r = remove_entry(cache_fd, build_name, err);
	if (r < 0)
		goto out;
	if (mkdirat(cache_fd, build_name, 0700) < 0) {
		r = ab_err_set(err, -errno, "create '%s/%s': %s", cache_path, build_name,
			       strerror(errno));
		goto out;
	}
	build_fd = openat(cache_fd, build_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (build_fd < 0) {
		r = ab_err_set(err, -errno, "open '%s/%s'", cache_path, build_name);
		goto out;
	}
	if (geteuid() == 0) {
		/* the registry proxy runs as the sandbox user */
		r = run_sandbox_user(NULL, &owner, &group, err);
		if (r < 0)
			goto fail;
	}
	r = netproxy_start(&np, owner, group, err);
	if (r < 0)
		goto fail;
	/* An index that cannot be reached fails here, in seconds and in one line, rather than
	 * after the installer's retries and with its traceback. */
	if (index.n > 0) {
		r = netproxy_probe(&np, &index, err);
		if (r < 0) {
			ab_err_fix(err, "%s",
				   index_url ? "check that this host reaches --index-url's host"
					     : "check this host's network and DNS; or install "
					       "offline with --no-index --find-links DIR");
			goto fail;
		}
	}

	r = prepare_install(q, &es, dir, build_fd, env_bytes, &np, &report, err);
	if (r < 0)
		goto fail;
	{
		cleanup_free char *built = xasprintf("%s/%s", cache_path, build_name);

		r = check_env_tree(built, es.python, es.interp, err);
	}
	if (r < 0)
		goto fail;
	r = write_marker(build_fd, &es, key);
	if (r < 0) {
		ab_err_set(err, r, "write the environment marker");
		goto fail;
	}
	/* Published in one step: readable by all, writable by its owner only. */
	if (fchmod(build_fd, 0755) < 0 || renameat(cache_fd, build_name, cache_fd, name) < 0) {
		r = ab_err_set(err, -errno, "publish the environment '%s': %s", dir,
			       strerror(errno));
		goto fail;
	}
	*ret = json_pack("{s:s, s:b, s:o}", "env_dir", dir, "cache_hit", 0, "report", report);
	report = NULL;
	r = 0;
	goto out;

fail:
	if (build_fd >= 0)
		(void) walk_remove_tree(cache_fd, build_name, NULL);
	if (report) {
		/* a failed install still says what happened: the error carries the report */
		*ret = json_pack("{s:n, s:b, s:o}", "env_dir", "cache_hit", 0, "report", report);
		report = NULL;
	}
out:
	/* last: everything the lock guards is done (the environment published or removed) */
	if (cache_fd >= 0)
		cache_unlock(cache_fd, lockname, &lockfd);
	json_decref(report);
	netproxy_done(&np);
	free(es.lock);
	return r;
}

/* ---- the cache's bound (requirements.c, agentbox gc) ------------------------------------ */

/* Bytes under dirfd (files' blocks), bounded: at most *budget entries, 32 levels. */
static uint64_t
tree_bytes(int dirfd, long *budget, int depth)
{
	uint64_t sum = 0;
	struct dirent *de;
	DIR *d;
	int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0 || !(d = fdopendir(fd))) {
		if (fd >= 0)
			(void) close(fd);
		return 0;
	}
	while (--*budget >= 0 && (de = readdir(d))) {
		struct stat st;

		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
		    fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		sum += (uint64_t) st.st_blocks * 512;
		if (S_ISDIR(st.st_mode) && depth < 32) {
			int sub = openat(dirfd, de->d_name,
					 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

			if (sub >= 0) {
				sum += tree_bytes(sub, budget, depth + 1);
				(void) close(sub);
			}
		}
	}
	closedir(d);
	return sum;
}

struct env_entry {
	char name[40];
	uint64_t bytes;
	struct timespec used; /* the marker's mtime: touched at each use */
};

static int
by_use(const void *a, const void *b)
{
	const struct env_entry *x = a, *y = b;

	if (x->used.tv_sec != y->used.tv_sec)
		return x->used.tv_sec < y->used.tv_sec ? -1 : 1;
	return x->used.tv_nsec < y->used.tv_nsec ? -1 : x->used.tv_nsec > y->used.tv_nsec;
}

int
prepare_cache_bound(bool evict, json_t **ret)
{
	cleanup_free char *path = prepare_default_cache();
	struct ab_err ignored = { 0 };
	uint64_t cap = AB_CACHE_MAX_DEFAULT;
	struct stat st;
	int r;

	*ret = NULL;
	if (cfg()->cache_max)
		(void) units_parse_size(cfg()->cache_max, &cap);
	if (lstat(path, &st) < 0 || !S_ISDIR(st.st_mode))
		return 0; /* no cache yet */
	r = prepare_evict(path, evict ? cap : UINT64_MAX, NULL, ret, &ignored);
	if (r == 0 && *ret)
		json_object_set_new(*ret, "cap_bytes", json_integer((json_int_t) cap));
	return r;
}

int
prepare_evict(const char *cache_dir, uint64_t cap, const char *keep, json_t **ret,
	      struct ab_err *err)
{
	cleanup_free char *path = NULL;
	cleanup_fd int cfd = open_cache(cache_dir, &path, err);
	struct env_entry *e = NULL;
	size_t n = 0;
	uint64_t total = 0;
	json_t *gone = json_array();
	struct dirent *de;
	DIR *d;
	int dfd;

	*ret = NULL;
	if (cfd < 0) {
		json_decref(gone);
		return cfd;
	}
	dfd = dup(cfd);
	d = dfd >= 0 ? fdopendir(dfd) : NULL;
	if (!d) {
		json_decref(gone);
		return ab_err_set(err, -errno, "read the cache '%s': %s", path, strerror(errno));
	}
	while ((de = readdir(d)) && n < 4096) {
		cleanup_free char *marker = xasprintf("%s/" AB_ENV_MARKER, de->d_name);
		struct stat st;
		long budget = 1000000;
		int sub;

		if (strlen(de->d_name) != 32 || strspn(de->d_name, "0123456789abcdef") != 32 ||
		    !env_published(cfd, de->d_name) ||
		    fstatat(cfd, marker, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		e = xrealloc(e, (n + 1) * sizeof(*e));
		snprintf(e[n].name, sizeof(e[n].name), "%s", de->d_name);
		e[n].used = st.st_mtim;
		sub = openat(cfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		e[n].bytes = sub >= 0 ? tree_bytes(sub, &budget, 0) : 0;
		if (sub >= 0)
			(void) close(sub);
		total += e[n].bytes;
		n++;
	}
	closedir(d);
	qsort(e, n, sizeof(*e), by_use);
	/* the least recently used first, while over the cap; never the one just used, nor one
	 * a run holds (its marker flock()ed shared) or an install of its key holds */
	for (size_t i = 0; i < n && total > cap; i++) {
		cleanup_free char *marker = xasprintf("%s/" AB_ENV_MARKER, e[i].name);
		char lockname[48];
		cleanup_fd int mfd = -1;
		int lfd;

		if (keep && strcmp(e[i].name, keep) == 0)
			continue;
		mfd = openat(cfd, marker, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		if (mfd < 0 || flock(mfd, LOCK_EX | LOCK_NB) < 0)
			continue;
		snprintf(lockname, sizeof(lockname), "%s.lock", e[i].name);
		lfd = openat(cfd, lockname, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (lfd < 0 || flock(lfd, LOCK_EX | LOCK_NB) < 0) {
			if (lfd >= 0)
				(void) close(lfd);
			continue;
		}
		if (remove_entry(cfd, e[i].name, NULL) == 0) {
			total -= e[i].bytes;
			json_array_append_new(gone, json_pack("{s:s, s:I}", "env", e[i].name,
							      "bytes", (json_int_t) e[i].bytes));
		}
		cache_unlock(cfd, lockname, &lfd);
	}
	*ret = json_pack("{s:s, s:I, s:I, s:I, s:o}", "cache_dir", path, "entries",
			 (json_int_t) (n - json_array_size(gone)), "bytes", (json_int_t) total,
			 "cap_bytes", (json_int_t) cap, "evicted", gone);
	free(e);
	return 0;
}

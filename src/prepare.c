#include "prepare.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
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

#include "cli.h"
#include "netproxy.h"
#include "report.h"
#include "result.h"
#include "run.h"
#include "rundir.h"
#include "util/fdutil.h"
#include "util/macro.h"
#include "util/path.h"
#include "util/xalloc.h"
#include "walk.h"

#define AB_ENV_FORMAT "agentbox-env-1"

/* The drivers run inside the install sandbox, as the "script" of an ordinary run. */
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
	"    elif flags[i] == '--find-links':\n"
	"        pip += ['--find-links', flags[i + 1]]\n"
	"        i += 1\n"
	"    i += 1\n"
	"subprocess.run(venv + [env + '/venv'], check=True)\n"
	"subprocess.run([env + '/venv/bin/python', '-m', 'pip', 'install', '--no-input',\n"
	"                '--disable-pip-version-check', '--no-cache-dir', '-r', req] + pip,\n"
	"               check=True)\n";

static const char node_driver[] =
	"const { spawnSync } = require('child_process');\n"
	"const fs = require('fs');\n"
	"const [env, lock] = process.argv.slice(2);\n"
	"fs.copyFileSync('package.json', env + '/package.json');\n"
	"if (lock === '1') fs.copyFileSync('package-lock.json', env + '/package-lock.json');\n"
	"const r = spawnSync('npm', [lock === '1' ? 'ci' : 'install', '--no-audit', '--no-fund',\n"
	"  '--no-update-notifier'], { cwd: env, stdio: 'inherit' });\n"
	"process.exit(r.status === null ? 1 : r.status);\n";

char *
prepare_default_cache(void)
{
	const char *env = getenv("AGENTBOX_CACHE_DIR");
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
	char real[PATH_MAX], id[PATH_MAX + 64];
	struct stat st;

	if (!realpath(path, real) || stat(real, &st) < 0)
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
	char *n = path_search("node");

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
		char a[PATH_MAX], b[PATH_MAX];

		if (!interp || !realpath(py, a) || !realpath(interp, b) || strcmp(a, b) != 0) {
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
	char real[PATH_MAX];
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
	if (!realpath(dir, real)) {
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
prepare_lookup(const char *spec, const char *cache_dir, char **ret_venv, char **ret_nm,
	       struct ab_err *err)
{
	struct stat st;
	struct env_spec es = { 0 };
	cleanup_free char *cache = cache_dir ? xstrdup(cache_dir) : prepare_default_cache();
	cleanup_free char *node = NULL;
	char key[65];
	int r;

	if (stat(spec, &st) < 0) {
		ab_err_set(err, -errno, "--env-dir '%s': %s", spec, strerror(errno));
		return ab_err_fix(err, "pass the path agentbox prepare printed");
	}
	if (S_ISDIR(st.st_mode))
		return read_env_marker(spec, ret_venv, ret_nm, err);
	/* a requirements / package file: find the environment prepared from it */
	es.python = !(ends_with(spec, "package.json") || ends_with(spec, "package-lock.json"));
	if (es.python) {
		es.reqs = spec;
		es.interp = "/usr/bin/python3";
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
		node = default_node();
		es.interp = node;
	}
	for (int site = 0; site < (es.python ? 2 : 1); site++) {
		cleanup_free char *dir = NULL;

		es.system_site = site == 1;
		r = env_key(&es, key, err);
		if (r < 0)
			break;
		dir = xasprintf("%s/%.32s", cache, key);
		if (access(dir, F_OK) == 0) {
			r = read_env_marker(dir, ret_venv, ret_nm, err);
			free(es.lock);
			return r;
		}
		r = 0;
	}
	free(es.lock);
	if (r < 0)
		return r;
	ab_err_set(err, -ENOENT, "no environment prepared from '%s' in '%s'", spec, cache);
	return ab_err_fix(err, "run agentbox prepare --%s '%s' first",
			  es.python ? "python" : "node", spec);
}

/* Written into a directory install scripts controlled: relative to an O_NOFOLLOW dirfd, the
 * temp file created O_EXCL|O_NOFOLLOW (a planted symlink is never written through), then
 * renamed over whatever is at the marker's name. */
static int
write_marker(const char *dir, const struct env_spec *s, const char *key, uid_t owner, gid_t group)
{
	static const char tmp[] = AB_ENV_MARKER ".tmp";
	cleanup_fd int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	cleanup_fd int fd = -1;
	json_t *j;
	int r;

	if (dfd < 0)
		return -errno;
	if (unlinkat(dfd, tmp, 0) < 0 && errno != ENOENT)
		return errno == EISDIR ? -EEXIST : -errno;
	fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	j = json_pack("{s:i, s:s, s:s, s:s, s:s, s:s?, s:b, s:I}", "schema_version", 1, "kind",
		      s->python ? "python" : "node", "key", key, "interpreter", s->interp,
		      "requirements", s->reqs, "lock", s->lock, "system_site", s->system_site,
		      "created_unix", (json_int_t) time(NULL));
	r = json_dumpfd(j, fd, JSON_INDENT(2) | JSON_SORT_KEYS);
	json_decref(j);
	if (r < 0)
		return -EIO;
	if (owner != (uid_t) -1 && fchown(fd, owner, group) < 0)
		return -errno;
	if (renameat(dfd, tmp, dfd, AB_ENV_MARKER) < 0)
		return -errno;
	return 0;
}

/* ---- the install's network (netproxy.h) ------------------------------------------------- */

/* What the install may reach through the registry proxy unless --allow-host adds more: the
 * registries pip and npm use by default; nothing for pip --no-index. */
static void
default_registries(struct np_policy *p, bool python, bool no_index)
{
	if (no_index)
		return;
	if (python) {
		(void) np_policy_add(p, "pypi.org");
		(void) np_policy_add(p, "files.pythonhosted.org");
	} else {
		(void) np_policy_add(p, "registry.npmjs.org");
	}
}

/* prepare --report FILE: the install run's report, with what the proxy let through and
 * refused (network_proxy, sandbox.network.refused_connections). */
static void
write_prepare_report(const char *path, struct ab_result *res, int r, const struct ab_err *err,
		     const struct ab_netproxy *np)
{
	json_t *rep, *net;
	int w;

	if (r < 0)
		result_set_message(res, err->msg, err->fix);
	res->agentbox_exit = r < 0 ? (err->exit ? err->exit : AB_EXIT_SETUP) : 0;
	rep = report_build(res);
	net = json_object_get(json_object_get(rep, "sandbox"), "network");
	if (net && np->stats_valid)
		json_object_set_new(net, "refused_connections",
				    json_integer((json_int_t) np->refused));
	json_object_set_new(rep, "network_proxy", netproxy_report(np));
	w = report_write(path, rep);
	if (w < 0)
		fprintf(stderr, "agentbox: cannot write the report '%s': %s\n", path, strerror(-w));
	json_decref(rep);
}

static void
prepare_usage(void)
{
	fputs("usage: agentbox prepare --python requirements.txt [--system-site-packages]\n"
	      "                        [--find-links DIR] [--no-index] [--interpreter PATH]\n"
	      "       agentbox prepare --node package.json [package-lock.json]\n"
	      "options for both: --cache-dir DIR --timeout DUR --memory SIZE --pids N\n"
	      "                  --report FILE --allow-host HOST[:PORT]\n"
	      "Builds the environment in a sandbox that writes only into the environment, and\n"
	      "prints its path. Same inputs again: a cache hit. The sandbox has its own network:\n"
	      "only HTTPS to the registry (pypi.org and files.pythonhosted.org, or\n"
	      "registry.npmjs.org; none with --no-index) and each --allow-host, through a proxy\n"
	      "that never connects to loopback, private or link-local addresses.\n",
	      stderr);
}

int
cmd_prepare(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "allow-host", required_argument, NULL, 'a' },
		{ "cache-dir", required_argument, NULL, 'c' },
		{ "find-links", required_argument, NULL, 'f' },
		{ "help", no_argument, NULL, 'h' },
		{ "interpreter", required_argument, NULL, 'i' },
		{ "memory", required_argument, NULL, 'm' },
		{ "no-index", no_argument, NULL, 'n' },
		{ "node", required_argument, NULL, 'N' },
		{ "pids", required_argument, NULL, 'p' },
		{ "python", required_argument, NULL, 'P' },
		{ "report", required_argument, NULL, 'r' },
		{ "system-site-packages", no_argument, NULL, 's' },
		{ "timeout", required_argument, NULL, 't' },
		{ NULL, 0, NULL, 0 },
	};
	struct env_spec es = { 0 };
	const char *find_links = NULL, *report = NULL;
	bool no_index = false;
	cleanup_free char *cache = NULL, *node = NULL, *dir = NULL, *tmpdir = NULL, *driver = NULL,
			  *lockarg = NULL;
	struct strv run_argv = { 0 };
	const char *lim_timeout = "10m", *lim_memory = NULL, *lim_pids = NULL;
	struct ab_err err = { 0 };
	struct ab_netproxy np;
	char key[65];
	cleanup_fd int lockfd = -1;
	uid_t owner = (uid_t) -1;
	gid_t group = (gid_t) -1;
	int c, r, code = 0;

	optind = 0;
	opterr = 0;
	netproxy_init(&np);
	while ((c = getopt_long(argc, argv, "+:", opts, NULL)) != -1) {
		switch (c) {
		case 'a':
			if (np_policy_add(&np.policy, optarg) < 0) {
				fprintf(stderr,
					"agentbox: prepare: --allow-host '%s': expected HOST or "
					"HOST:PORT (at most %d)\n",
					optarg, NP_MAX_ALLOW);
				return AB_EXIT_USAGE;
			}
			break;
		case 'c':
			free(cache);
			cache = xstrdup(optarg);
			break;
		case 'f':
			find_links = optarg;
			break;
		case 'h':
			prepare_usage();
			return 0;
		case 'i':
			es.interp = optarg;
			break;
		case 'm':
			lim_memory = optarg;
			break;
		case 'n':
			no_index = true;
			break;
		case 'N':
			es.python = false;
			es.reqs = optarg;
			break;
		case 'p':
			lim_pids = optarg;
			break;
		case 'P':
			es.python = true;
			es.reqs = optarg;
			break;
		case 'r':
			report = optarg;
			break;
		case 's':
			es.system_site = true;
			break;
		case 't':
			lim_timeout = optarg;
			break;
		default:
			prepare_usage();
			return AB_EXIT_USAGE;
		}
	}
	if (!es.reqs) {
		prepare_usage();
		return AB_EXIT_USAGE;
	}
	if (!es.python) {
		if (optind < argc)
			es.lock = xstrdup(argv[optind++]);
		else
			es.lock = sibling_lock(es.reqs);
		if (!es.interp) {
			node = default_node();
			es.interp = node;
		}
	} else if (!es.interp) {
		es.interp = "/usr/bin/python3";
	}
	if (optind < argc) {
		prepare_usage();
		free(es.lock);
		return AB_EXIT_USAGE;
	}

	r = env_key(&es, key, &err);
	if (r < 0)
		goto fail;
	if (!cache)
		cache = prepare_default_cache();
	{
		/* the runs root first (0711 for root), then the cache under it */
		cleanup_free char *parent = xstrdup(cache);
		char *slash = strrchr(parent, '/');

		if (slash && slash != parent) {
			*slash = '\0';
			(void) mkdir(parent, geteuid() == 0 ? 0711 : 0700);
		}
		if (mkdir(cache, geteuid() == 0 ? 0755 : 0700) < 0 && errno != EEXIST) {
			r = ab_err_set(&err, -errno, "create the cache '%s': %s", cache,
				       strerror(errno));
			goto fail;
		}
	}
	dir = xasprintf("%s/%.32s", cache, key);
	{
		cleanup_free char *lockpath = xasprintf("%s/%.32s.lock", cache, key);

		lockfd = open(lockpath, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (lockfd < 0 || flock(lockfd, LOCK_EX) < 0) {
			r = ab_err_set(&err, -errno, "lock '%s': %s", lockpath, strerror(errno));
			goto fail;
		}
	}
	{
		cleanup_free char *marker = xasprintf("%s/" AB_ENV_MARKER, dir);
		cleanup_fd int cfd = open(cache, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		struct stat st;

		if (lstat(marker, &st) == 0 && S_ISREG(st.st_mode)) {
			fprintf(stderr, "agentbox: cache hit\n");
			printf("%s\n", dir);
			free(es.lock);
			return 0;
		}
		/* a half-built environment from a failed or killed prepare: start over */
		if (cfd >= 0 && lstat(dir, &st) == 0) {
			char name[40];

			snprintf(name, sizeof(name), "%.32s", key);
			if (walk_remove_tree(cfd, name, &err) < 0)
				goto fail;
		}
	}
	if (mkdir(dir, 0755) < 0) {
		r = ab_err_set(&err, -errno, "create '%s': %s", dir, strerror(errno));
		goto fail;
	}
	if (geteuid() == 0) {
		/* the install runs as the sandbox user: the environment must be theirs */
		r = run_sandbox_user(NULL, &owner, &group, &err);
		if (r < 0)
			goto fail;
		if (chown(dir, owner, group) < 0) {
			r = ab_err_set(&err, -errno, "chown '%s'", dir);
			goto fail;
		}
	}

	/* The driver script, in a private temp dir. */
	tmpdir = xasprintf("%s/.prepare-XXXXXX", cache);
	if (!mkdtemp(tmpdir)) {
		r = ab_err_set(&err, -errno, "mkdtemp in '%s'", cache);
		goto fail;
	}
	driver = xasprintf("%s/agentbox_prepare.%s", tmpdir, es.python ? "py" : "js");
	{
		cleanup_fd int fd = open(driver, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		const char *src = es.python ? py_driver : node_driver;

		if (fd < 0 || write_all(fd, src, strlen(src)) < 0) {
			r = ab_err_set(&err, -EIO, "write the install driver");
			goto fail;
		}
	}
	(void) chmod(tmpdir, 0755);

	strv_push_n(&run_argv, 5, "run", "--timeout", lim_timeout, "--rm", "--quiet");
	if (lim_memory)
		strv_push_n(&run_argv, 2, "--memory", lim_memory);
	if (lim_pids)
		strv_push_n(&run_argv, 2, "--pids", lim_pids);
	if (report)
		strv_push_n(&run_argv, 2, "--report", report);
	strv_push_n(&run_argv, 2, "--env", "PIP_NO_CACHE_DIR=1");
	strv_push_n(&run_argv, 2, "--env", "npm_config_cache=/tmp/npm-cache");
	/* The install's network: its own namespace, the registry proxy its only way out. */
	default_registries(&np.policy, es.python, no_index);
	r = netproxy_start(&np, owner, group, &err);
	if (r < 0)
		goto fail;
	netproxy_push_env(&run_argv);
	strv_push_n(&run_argv, 2, es.python ? "--python" : "--node", es.interp);
	if (es.python) {
		strv_push_n(&run_argv, 2, "--input", es.reqs);
		if (find_links)
			strv_push_n(&run_argv, 2, "--input", find_links);
	} else {
		strv_push_n(&run_argv, 2, "--input", es.reqs);
		if (es.lock)
			strv_push_n(&run_argv, 2, "--input", es.lock);
	}
	strv_push(&run_argv, driver);
	strv_push(&run_argv, "--");
	strv_push(&run_argv, dir);
	if (es.python) {
		const char *base = strrchr(es.reqs, '/');

		strv_push(&run_argv, base ? base + 1 : es.reqs);
		if (es.system_site)
			strv_push(&run_argv, "--system-site-packages");
		if (no_index)
			strv_push(&run_argv, "--no-index");
		if (find_links) {
			const char *fb = strrchr(find_links, '/');

			strv_push(&run_argv, "--find-links");
			strv_pushf(&run_argv, "/work/%s", fb && fb[1] ? fb + 1 : find_links);
		}
	} else {
		lockarg = xstrdup(es.lock ? "1" : "0");
		strv_push(&run_argv, lockarg);
	}

	{
		struct ab_run_opts o;
		struct ab_result res;

		run_opts_init(&o);
		result_init(&res, &o);
		r = cli_parse_run((int) run_argv.n, strv_array(&run_argv), &o, &err);
		if (r == 0) {
			o.share_net = true;
			o.netproxy = &np;
			o.rw_bind = dir;
			o.relay_to_stderr = true;
			o.quiet = false;
			r = run_main(&o, &res, &err);
		}
		if (r < 0)
			res.status = AB_STATUS_SETUP_ERROR;
		if (r == 0 && (res.status != AB_STATUS_EXITED || res.exit_code != 0)) {
			r = ab_err_set(&err, -EIO, "the install failed: %s (exit %d)%s%s",
				       result_status_name(res.status), res.exit_code,
				       res.message ? ": " : "", res.message ? res.message : "");
			ab_err_fix(&err, "read the installer's output above");
		}
		netproxy_stop(&np);
		if (np.refused > 0)
			fprintf(stderr,
				"agentbox: prepare: the registry proxy refused %llu connection(s) "
				"(see above)\n",
				(unsigned long long) np.refused);
		if (report)
			write_prepare_report(report, &res, r, &err, &np);
		result_done(&res);
		run_opts_done(&o);
	}
	if (r < 0)
		goto fail;
	r = check_env_tree(dir, es.python, es.interp, &err);
	if (r < 0)
		goto fail;
	r = write_marker(dir, &es, key, owner, group);
	if (r < 0) {
		ab_err_set(&err, r, "write the environment marker");
		goto fail;
	}
	printf("%s\n", dir);
	goto out;

fail:
	fprintf(stderr, "agentbox: prepare: %s%s%s%s\n", err.msg, err.fix[0] ? " (fix: " : "",
		err.fix, err.fix[0] ? ")" : "");
	code = err.exit == AB_EXIT_USAGE ? AB_EXIT_USAGE : AB_EXIT_SETUP;
	if (dir && access(dir, F_OK) == 0 && cache) {
		cleanup_fd int cfd = open(cache, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		char name[40];

		snprintf(name, sizeof(name), "%.32s", key);
		if (cfd >= 0)
			(void) walk_remove_tree(cfd, name, NULL);
	}
out:
	netproxy_done(&np);
	if (driver)
		(void) unlink(driver);
	if (tmpdir)
		(void) rmdir(tmpdir);
	strv_done(&run_argv);
	free(es.lock);
	return code;
}

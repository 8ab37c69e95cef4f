/* server.c: `agentbox mcp`, the loop. One thread, one poll(2): stdin (one JSON-RPC message a
 * line, at most --max-message bytes), a signalfd (SIGTERM, SIGINT, SIGHUP: every run is
 * cancelled, then we exit), and per running run its pidfd (ab_run_fd) and, when the call
 * asked for progress, the read ends of the pipes its output is relayed to. Runs start in the
 * order they came while what the runs going hold fits (--max-runs, their memory and pids
 * limits against this host's; not the number of cores: issue 25, start_queued); a call
 * answers when its run ends, or after its soft wait with status "running" (wait_run picks it
 * up), or never when the client cancelled it (notifications/cancelled).
 *
 * State on disk (--state-dir): runs/ (the library's runs directory: every run is kept, so
 * its files can be served, until retention removes it), jobs/ID.json (which run directory
 * a run id names), workspaces/ID/{files,meta.json}, staging/ID (a call's files on their way
 * in). All of it is found again by the next server. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <linux/openat2.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "../fs/hostfs.h"
#include "../spec/spec.h"
#include "../spec/units.h"
#include "../util/fdutil.h"
#include "../util/macro.h"
#include "../util/xalloc.h"
#include "../warm/warm.h"
#include "agentbox/agentbox.h"
#include "input.h"
#include "mcp.h"

#define TAIL_BYTES  512
#define TICK_MS     30000 /* retention and workspace expiry */
#define PROGRESS_MS 1000
#define MAX_PENDING 4096 /* requests waiting for runs */

struct mcp_job {
	struct mcp_job *next;
	char id[MCP_ID_LEN + 1];
	enum {
		JOB_QUEUED,
		JOB_RUNNING
	} state;
	json_t *spec;
	uint64_t mem, tasks; /* what the run may hold: its memory and pids limits */
	ab_run_handle *h;
	int out_r, err_r; /* relayed output (progress), or -1 */
	char tail[TAIL_BYTES];
	size_t tail_len;
	int64_t queued_ms, started_ms;
	bool staged;
	char *workspace;
	bool cancelled; /* cancel_run, notifications/cancelled or shutdown */
	size_t held;    /* bytes its request holds while it is queued (max_pending) */
};

struct mcp_pending {
	struct mcp_pending *next;
	struct mcp_req req; /* id and token owned (incref'd) */
	char job[MCP_ID_LEN + 1];
	bool is_run; /* run_code: cancelling the request cancels the run */
	int64_t since_ms, deadline_ms, last_progress_ms;
	double last_progress;
};

static ab_context *ctx;

/* ---- policy ----------------------------------------------------------------------------- */

/* What runs may hold at once (struct mcp_policy): this host's memory (MemTotal), and half of
 * the tasks it allows this server (kernel.threads-max, and its RLIMIT_NPROC unless root). */
static void
budgets(uint64_t *ret_mem, uint64_t *ret_tasks)
{
	char buf[4096];
	const char *p;
	unsigned long long kib = 0, threads = 0;
	struct rlimit rl;

	*ret_mem = 4ULL << 30;
	if (read_small_file_at(AT_FDCWD, "/proc/meminfo", buf, sizeof(buf)) > 0 &&
	    (p = strstr(buf, "MemTotal:")) && sscanf(p + 9, "%llu", &kib) == 1 && kib > 0)
		*ret_mem = (uint64_t) kib << 10;
	*ret_tasks = 4096;
	if (read_small_file_at(AT_FDCWD, "/proc/sys/kernel/threads-max", buf, sizeof(buf)) > 0 &&
	    sscanf(buf, "%llu", &threads) == 1 && threads > 0)
		*ret_tasks = threads;
	if (geteuid() != 0 && getrlimit(RLIMIT_NPROC, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    rl.rlim_cur < *ret_tasks)
		*ret_tasks = rl.rlim_cur;
	*ret_tasks /= 2;
}

void
mcp_policy_defaults(struct mcp_policy *p)
{
	memset(p, 0, sizeof(*p));
	p->max_running = MCP_MAX_RUNS;
	budgets(&p->mem_budget, &p->tasks_budget);
	p->max_queued = 64;
	p->max_sessions = MCP_MAX_SESSIONS;
	p->allow_python = p->allow_node = true;
	p->keep_runs = 200;
	p->keep_ms = 24ULL * 3600 * 1000;
	p->ws_ttl_ms = 24ULL * 3600 * 1000;
	p->ws_bytes = 256ULL << 20;
	p->max_workspaces = 32;
	p->file_bytes = 8ULL << 20;
	p->files_bytes = 16ULL << 20;
	p->image_bytes = 1ULL << 20;
	p->max_images = 4;
	p->read_bytes = 1ULL << 20;
	p->text_bytes = 64ULL << 10;
	p->wait_ms = 45000;
	p->max_wait_ms = 300000;
	p->max_message = 32ULL << 20;
	p->max_pending = 256ULL << 20;
	/* every result passes through this process: its output is bounded whatever a call asks */
	p->cap_set[AB_LIM_OUTPUT] = true;
	p->cap[AB_LIM_OUTPUT] = 16ULL << 20;
	p->warm_idle_ms = 10ULL * 60 * 1000;
}

static const char usage_text[] =
	"usage: agentbox mcp [OPTIONS]\n"
	"An MCP server over stdio (newline-delimited JSON-RPC): tools run_code, wait_run,\n"
	"cancel_run, list_files, read_file, create_workspace, delete_workspace, sandbox_info,\n"
	"create_session, close_session (docs/mcp.md). The operator's policy:\n"
	"  --state-dir DIR        runs, workspaces, records (default /var/tmp/agentbox-mcp-UID)\n"
	"  --max-runs N           runs at once, at most (default 32); below that a run\n"
	"                         starts while the memory limits of the runs going add\n"
	"                         up to no more than this host's memory and their pids\n"
	"                         limits to half the tasks it allows this server; CPU is\n"
	"                         shared through each run's cpus limit (a sleeping run\n"
	"                         waits for no core); one run alone always starts\n"
	"  --max-queue N          calls waiting for a slot (default 64)\n"
	"  --max-sessions N       live sessions at once (default 4; 0: none); their memory\n"
	"                         and pids limits count against the same budgets as runs\n"
	"  --languages LIST       python,node (default both)\n"
	"  --cap LIMIT=VALUE      the most a call may ask for (timeout=120s, memory=1G, pids=128,\n"
	"                         cpus=1, output-limit=1M, ...); also the default when lower\n"
	"  --env-dir DIR          a dependency environment (agentbox prepare) for every run\n"
	"                         without requirements\n"
	"  --requirements allow|deny  may runs and sessions ask for packages (default allow;\n"
	"                         docs/requirements.md)\n"
	"  --allow-packages LIST  only these packages (names, comma-separated)\n"
	"  --max-requirements N   at most N a call (default 32)\n"
	"  --install-timeout DUR  an install's timeout (default 10m)\n"
	"  --index-url URL        the package index (fixed: calls may not name another)\n"
	"  --find-links DIR       Python: a directory of wheels to install from\n"
	"  --cache-max SIZE       the environment cache's cap (default 4G)\n"
	"  --keep-runs N          keep at most N runs (default 200)\n"
	"  --keep-for DURATION    remove runs older than this (default 24h)\n"
	"  --workspace-ttl DUR    longest workspace lifetime (default 24h)\n"
	"  --workspace-size SIZE  workspace size cap (default 256M)\n"
	"  --max-workspaces N     (default 32)\n"
	"  --file-size SIZE       one file sent with a call (default 8M)\n"
	"  --files-size SIZE      all files of one call (default 16M)\n"
	"  --image-size SIZE      largest image returned inline (default 1M)\n"
	"  --max-images N         images per result (default 4)\n"
	"  --read-size SIZE       read_file / resources/read cap (default 1M)\n"
	"  --text-size SIZE       stdout/stderr text per result (default 64K)\n"
	"  --wait DURATION        default soft wait before \"running\" (default 45s)\n"
	"  --max-wait DURATION    longest soft wait a call may ask (default 300s)\n"
	"  --max-message SIZE     longest JSON-RPC message (default 32M)\n"
	"  --max-pending-bytes SIZE  requests held at once, being read, parsed or queued\n"
	"                         (default 256M); past it a call is answered busy at once\n"
	"  --warm N               warm slots kept ready per language (default 0: none)\n"
	"  --preimport LIST       Python modules each warm slot imports first (numpy,pandas)\n"
	"  --preimport-node LIST  Node packages each warm Node slot requires first\n"
	"  --warm-idle DURATION   let a language's slots go after this long unused (default\n"
	"                         10m; 0: never); the next run refills them\n"
	"  --config FILE          the same settings as a JSON object ({\"max-runs\": 2,\n"
	"                         \"cap\": {\"timeout\": \"60s\"}}); flags after it win\n";

static int
set_size(const char *v, uint64_t *ret)
{
	return units_parse_size(v, ret);
}

static int
set_count(const char *v, int *ret)
{
	uint64_t n;
	int r = units_parse_count(v, &n);

	if (r == 0 && n > INT_MAX)
		r = -ERANGE;
	if (r == 0)
		*ret = (int) n;
	return r;
}

/* one setting by its long name; 0 or a message in msg */
static int
policy_set(struct mcp_policy *p, const char *name, const char *v, char *msg, size_t msg_size)
{
	int r = 0;
	uint64_t u;

	if (strcmp(name, "state-dir") == 0) {
		free(p->state_dir);
		p->state_dir = xstrdup(v);
	} else if (strcmp(name, "max-runs") == 0) {
		r = set_count(v, &p->max_running);
		if (r == 0 && p->max_running < 1)
			r = -ERANGE;
	} else if (strcmp(name, "max-queue") == 0) {
		r = set_count(v, &p->max_queued);
	} else if (strcmp(name, "max-sessions") == 0) {
		r = set_count(v, &p->max_sessions);
	} else if (strcmp(name, "languages") == 0) {
		p->allow_python = strstr(v, "python") != NULL;
		p->allow_node = strstr(v, "node") != NULL;
		if (!p->allow_python && !p->allow_node)
			r = -EINVAL;
	} else if (strcmp(name, "cap") == 0) {
		const char *eq = strchr(v, '=');
		cleanup_free char *lim = eq ? xstrndup(v, (size_t) (eq - v)) : NULL;
		int id = lim ? cli_limit_id(lim) : -1;
		struct ab_run_opts o;
		struct ab_err e = { 0 };

		if (id < 0) {
			snprintf(msg, msg_size,
				 "--cap '%s': expected LIMIT=VALUE with a limit of "
				 "agentbox run (timeout, memory, pids, ...)",
				 v);
			return -EINVAL;
		}
		run_opts_init(&o);
		r = cli_set_limit(&o, (enum ab_limit_id) id, eq + 1, &e);
		if (r == 0) {
			p->cap[id] = o.limits[id].value;
			p->cap_set[id] = true;
		}
		run_opts_done(&o);
		if (r < 0) {
			snprintf(msg, msg_size, "--cap: %s", e.msg);
			return r;
		}
	} else if (strcmp(name, "env-dir") == 0) {
		free(p->env_dir);
		p->env_dir = xstrdup(v);
	} else if (strcmp(name, "requirements") == 0 || strcmp(name, "allow-packages") == 0 ||
		   strcmp(name, "max-requirements") == 0 || strcmp(name, "install-timeout") == 0 ||
		   strcmp(name, "index-url") == 0 || strcmp(name, "find-links") == 0 ||
		   strcmp(name, "cache-max") == 0) {
		cleanup_free char *key = xstrdup(name);
		uint64_t x;

		for (char *c = key; *c; c++)
			if (*c == '-')
				*c = '_';
		if (strcmp(name, "requirements") == 0 && strcmp(v, "allow") != 0 &&
		    strcmp(v, "deny") != 0)
			r = -EINVAL;
		else if (strcmp(name, "max-requirements") == 0)
			r = units_parse_count(v, &x);
		else if (strcmp(name, "install-timeout") == 0)
			r = units_parse_duration_ms(v, &x);
		else if (strcmp(name, "cache-max") == 0)
			r = units_parse_size(v, &x);
		if (r == 0)
			strv_pushf(&p->req_policy, "%s=%s", key, v);
	} else if (strcmp(name, "keep-runs") == 0) {
		r = set_count(v, &p->keep_runs);
	} else if (strcmp(name, "keep-for") == 0) {
		r = units_parse_duration_ms(v, &p->keep_ms);
	} else if (strcmp(name, "workspace-ttl") == 0) {
		r = units_parse_duration_ms(v, &p->ws_ttl_ms);
	} else if (strcmp(name, "workspace-size") == 0) {
		r = set_size(v, &p->ws_bytes);
	} else if (strcmp(name, "max-workspaces") == 0) {
		r = set_count(v, &p->max_workspaces);
	} else if (strcmp(name, "file-size") == 0) {
		r = set_size(v, &p->file_bytes);
	} else if (strcmp(name, "files-size") == 0) {
		r = set_size(v, &p->files_bytes);
	} else if (strcmp(name, "image-size") == 0) {
		r = set_size(v, &p->image_bytes);
	} else if (strcmp(name, "max-images") == 0) {
		r = set_count(v, &p->max_images);
	} else if (strcmp(name, "read-size") == 0) {
		r = set_size(v, &p->read_bytes);
	} else if (strcmp(name, "text-size") == 0) {
		r = set_size(v, &p->text_bytes);
	} else if (strcmp(name, "wait") == 0) {
		r = units_parse_duration_ms(v, &p->wait_ms);
	} else if (strcmp(name, "max-wait") == 0) {
		r = units_parse_duration_ms(v, &p->max_wait_ms);
	} else if (strcmp(name, "warm") == 0) {
		r = set_count(v, &p->warm_slots);
		if (r == 0 && p->warm_slots > 64)
			r = -ERANGE;
	} else if (strcmp(name, "preimport") == 0 || strcmp(name, "preimport-node") == 0) {
		struct strv *sv = &p->preimport[name[9] == '-'];
		enum ab_lang lang = name[9] == '-' ? AB_LANG_NODE : AB_LANG_PYTHON;
		cleanup_free char *copy = xstrdup(v);
		char *save = NULL;

		strv_done(sv);
		for (char *t = strtok_r(copy, ", ", &save); t; t = strtok_r(NULL, ", ", &save)) {
			if (!warm_module_ok(lang, t) || sv->n >= AB_WARM_MAX_MODS) {
				snprintf(msg, msg_size, "--%s: '%s' is not a %s module name", name,
					 t, lang == AB_LANG_NODE ? "Node" : "Python");
				return -EINVAL;
			}
			strv_push(sv, t);
		}
	} else if (strcmp(name, "warm-idle") == 0) {
		r = units_parse_duration_ms(v, &p->warm_idle_ms);
	} else if (strcmp(name, "max-message") == 0) {
		r = set_size(v, &u);
		if (r == 0 && u < 4096)
			r = -ERANGE;
		p->max_message = (size_t) u;
	} else if (strcmp(name, "max-pending-bytes") == 0) {
		r = set_size(v, &u);
		if (r == 0 && u < (1u << 20))
			r = -ERANGE;
		p->max_pending = (size_t) u;
	} else {
		snprintf(msg, msg_size, "unknown setting '%s'", name);
		return -EINVAL;
	}
	if (r < 0)
		snprintf(msg, msg_size, "invalid --%s '%s'", name, v);
	return r;
}

static int
policy_config(struct mcp_policy *p, const char *file, char *msg, size_t msg_size)
{
	json_error_t jerr;
	json_t *j = json_load_file(file, JSON_REJECT_DUPLICATES, &jerr), *v;
	const char *key;
	int r = 0;

	if (!json_is_object(j)) {
		snprintf(msg, msg_size, "--config '%s': %s", file,
			 j ? "not a JSON object" : jerr.text);
		json_decref(j);
		return -EINVAL;
	}
	json_object_foreach(j, key, v)
	{
		char buf[64];
		const char *s = buf;

		if (strcmp(key, "cap") == 0 && json_is_object(v)) {
			const char *lk;
			json_t *lv;

			json_object_foreach(v, lk, lv)
			{
				cleanup_free char *kv = NULL;

				if (json_is_integer(lv))
					kv = xasprintf("%s=%lld", lk,
						       (long long) json_integer_value(lv));
				else
					kv = xasprintf("%s=%s", lk, json_string_value(lv) ?: "");
				if ((r = policy_set(p, "cap", kv, msg, msg_size)) < 0)
					goto out;
			}
			continue;
		}
		if (json_is_string(v))
			s = json_string_value(v);
		else if (json_is_integer(v))
			snprintf(buf, sizeof(buf), "%lld", (long long) json_integer_value(v));
		else if (json_is_array(v) && strncmp(key, "preimport", 9) == 0) {
			cleanup_free char *list = xstrdup("");
			size_t i;
			json_t *e;

			json_array_foreach(v, i, e)
			{
				char *next = xasprintf("%s%s%s", list, i ? "," : "",
						       json_string_value(e) ?: "");

				free(list);
				list = next;
			}
			if ((r = policy_set(p, key, list, msg, msg_size)) < 0)
				goto out;
			continue;
		} else if (json_is_array(v) && strcmp(key, "languages") == 0) {
			size_t i;
			json_t *e;

			buf[0] = '\0';
			json_array_foreach(v, i, e)
			{
				strncat(buf, json_string_value(e) ?: "",
					sizeof(buf) - strlen(buf) - 2);
				strncat(buf, ",", sizeof(buf) - strlen(buf) - 1);
			}
		} else {
			snprintf(msg, msg_size, "--config: '%s' must be a string or a number", key);
			r = -EINVAL;
			goto out;
		}
		if ((r = policy_set(p, key, s, msg, msg_size)) < 0)
			goto out;
	}
out:
	json_decref(j);
	return r;
}

/* ---- state directory -------------------------------------------------------------------- */

static int
open_sub(int dirfd, const char *name, mode_t mode)
{
	if (mkdirat(dirfd, name, mode) < 0 && errno != EEXIST)
		return -errno;
	return openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

/* The paths under the state directory are handed to the library as strings (runs_dir, a
 * call's staged inputs, a workspace's --collect), and the supervisor resolves them again
 * (issue 24). That is sound only while no other user can rename anything on the way: every
 * directory above the state directory must be root's or ours and writable by nobody else,
 * or sticky (/tmp: then nobody else can rename what is ours or root's in it). Checked by fd,
 * from the state directory up to the root. Returns 0, or -EPERM with msg set. */
static int
state_ancestors_safe(int state_fd, const char *name, char *msg, size_t msg_size)
{
	uid_t me = geteuid();
	struct stat child, st;
	int fd = fcntl(state_fd, F_DUPFD_CLOEXEC, 3);

	if (fd < 0 || fstat(fd, &child) < 0)
		goto fail;
	for (int depth = 0; depth < 256; depth++) {
		int up = openat(fd, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

		if (up < 0 || fstat(up, &st) < 0) {
			if (up >= 0)
				(void) close(up);
			goto fail;
		}
		(void) close(fd);
		fd = up;
		if (st.st_dev == child.st_dev && st.st_ino == child.st_ino)
			break; /* the root: its own parent */
		if ((st.st_uid != 0 && st.st_uid != me) ||
		    ((st.st_mode & 022) && !(st.st_mode & S_ISVTX))) {
			cleanup_free char *where = hostfs_fd_path(fd);

			snprintf(
				msg, msg_size,
				"the state directory '%s' is under '%s' (uid %u, mode %04o), which "
				"another user can rename things in: the paths given to each run "
				"would not be safe; use a state directory whose parents only root "
				"or you can write (the default /var/tmp/agentbox-mcp-UID, or one "
				"in your home)",
				name, where ? where : "?", (unsigned) st.st_uid,
				(unsigned) (st.st_mode & 07777));
			(void) close(fd);
			return -EPERM;
		}
		child = st;
	}
	(void) close(fd);
	return 0;
fail:
	if (fd >= 0)
		(void) close(fd);
	snprintf(msg, msg_size, "state directory '%s': cannot check its parents: %s", name,
		 strerror(errno));
	return -EPERM;
}

int
mcp_state_open(struct mcp *m, char *msg, size_t msg_size)
{
	char *real;
	struct stat st;

	if (!m->pol.state_dir)
		m->pol.state_dir = xasprintf("/var/tmp/agentbox-mcp-%u", (unsigned) geteuid());
	/* the state directory itself: ours, private but searchable (a root server's sandbox
	 * user must reach runs/ through it) */
	if (mkdir(m->pol.state_dir, 0711) < 0 && errno != EEXIST)
		goto fail;
	m->state_fd = open(m->pol.state_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (m->state_fd < 0 || fstat(m->state_fd, &st) < 0)
		goto fail;
	if (st.st_uid != geteuid() || (st.st_mode & 022)) {
		snprintf(msg, msg_size,
			 "the state directory '%s' must be yours and not writable by others",
			 m->pol.state_dir);
		return -EPERM;
	}
	/* its canonical name from the fd just checked, not a second resolution of the name */
	if ((real = hostfs_fd_path(m->state_fd))) {
		free(m->pol.state_dir);
		m->pol.state_dir = real;
	}
	if (state_ancestors_safe(m->state_fd, m->pol.state_dir, msg, msg_size) < 0)
		return -EPERM;
	(void) fchmod(m->state_fd, 0711);
	m->runs_fd = open_sub(m->state_fd, "runs", 0711);
	m->jobs_fd = open_sub(m->state_fd, "jobs", 0700);
	m->ws_fd = open_sub(m->state_fd, "workspaces", 0700);
	m->staging_fd = open_sub(m->state_fd, "staging", 0700);
	if (m->runs_fd < 0 || m->jobs_fd < 0 || m->ws_fd < 0 || m->staging_fd < 0)
		goto fail;
	(void) fchmod(m->runs_fd, 0711);
	return 0;
fail:
	snprintf(msg, msg_size, "state directory '%s': %s", m->pol.state_dir, strerror(errno));
	return -errno;
}

/* Removes dirfd/name and everything under it, never following a link. */
static int
rm_rf_at(int dirfd, const char *name, int depth)
{
	struct stat st;
	int fd;
	DIR *d;
	struct dirent *e;

	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISDIR(st.st_mode))
		return unlinkat(dirfd, name, 0) < 0 ? -errno : 0;
	if (depth > 512)
		return -ELOOP;
	fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	(void) fchmod(fd, 0700);
	d = fdopendir(fd);
	if (!d) {
		(void) close(fd);
		return -errno;
	}
	while ((e = readdir(d))) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		(void) rm_rf_at(fd, e->d_name, depth + 1);
	}
	closedir(d);
	return unlinkat(dirfd, name, AT_REMOVEDIR) < 0 ? -errno : 0;
}

void
mcp_staging_remove(struct mcp *m, const char *job_id)
{
	if (m->staging_fd >= 0 && mcp_id_valid(job_id))
		(void) rm_rf_at(m->staging_fd, job_id, 0);
}

int
mcp_write_files(struct mcp *m, int dirfd, json_t *files, char *msg, size_t msg_size)
{
	uint64_t total = 0;
	size_t i;
	json_t *f;

	json_array_foreach(files, i, f)
	{
		const char *path = json_string_value(json_object_get(f, "path"));
		json_t *c = json_object_get(f, "content");
		const char *enc = json_string_value(json_object_get(f, "encoding"));
		cleanup_free unsigned char *bin = NULL;
		const char *data;
		size_t len;
		cleanup_free char *dup = xstrdup(path);
		cleanup_fd int cur = fcntl(dirfd, F_DUPFD_CLOEXEC, 3), fd = -1;
		char *p = dup, *slash;

		if (enc && strcmp(enc, "base64") == 0) {
			bin = mcp_unbase64(json_string_value(c), json_string_length(c),
					   (size_t) m->pol.file_bytes, &len);
			if (!bin) {
				snprintf(msg, msg_size,
					 "files[%zu] '%s': not valid base64, or over the %llu-byte "
					 "cap for one file",
					 i, path, (unsigned long long) m->pol.file_bytes);
				return -EINVAL;
			}
			data = (const char *) bin;
		} else {
			data = json_string_value(c);
			len = json_string_length(c);
		}
		total += len;
		if (len > m->pol.file_bytes || total > m->pol.files_bytes) {
			snprintf(
				msg, msg_size,
				"files[%zu] '%s': over this server's caps (%llu bytes a file, %llu "
				"in all)",
				i, path, (unsigned long long) m->pol.file_bytes,
				(unsigned long long) m->pol.files_bytes);
			return -EFBIG;
		}
		while ((slash = strchr(p, '/'))) {
			int next;

			*slash = '\0';
			if (mkdirat(cur, p, 0755) < 0 && errno != EEXIST)
				goto fail;
			next = openat(cur, p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (next < 0)
				goto fail;
			(void) close(cur);
			cur = next;
			p = slash + 1;
		}
		fd = openat(cur, p, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
		if (fd < 0 || write_all(fd, data, len) < 0)
			goto fail;
		continue;
	fail:
		snprintf(msg, msg_size, "files[%zu] '%s': %s", i, path,
			 errno == EEXIST ? "given twice (or a file where a directory is)"
					 : strerror(errno));
		return -errno;
	}
	return 0;
}

/* A new file (or a truncated old one) of ours, never through a link. */
static int
write_file_at(int dirfd, const char *name, const char *text)
{
	cleanup_fd int fd =
		openat(dirfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);

	if (fd < 0)
		return -errno;
	return write_all(fd, text, strlen(text));
}

/* ---- workspaces ------------------------------------------------------------------------- */

static int
ws_open(struct mcp *m, const char *id)
{
	struct stat st;

	if (!mcp_id_valid(id) || m->ws_fd < 0 ||
	    fstatat(m->ws_fd, id, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode))
		return -ENOENT;
	return 0;
}

static json_t *
ws_meta(struct mcp *m, const char *id)
{
	cleanup_free char *rel = xasprintf("%s/meta.json", id), *text = NULL;
	cleanup_fd int fd = -1;

	if (!mcp_id_valid(id))
		return NULL;
	fd = openat(m->ws_fd, rel, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || read_all_capped(fd, 4096, &text) < 0)
		return NULL;
	return json_loads(text, 0, NULL);
}

int
mcp_ws_create(struct mcp *m, json_t *files, uint64_t ttl_ms, char *id, char *msg, size_t msg_size)
{
	cleanup_fd int wfd = -1, ffd = -1;
	int n = 0, r;
	DIR *d;
	struct dirent *e;
	char meta[128];

	if (m->ws_fd < 0) {
		snprintf(msg, msg_size, "no state directory");
		return -ENOENT;
	}
	d = fdopendir(fcntl(m->ws_fd, F_DUPFD_CLOEXEC, 3));
	if (d) {
		rewinddir(d);
		while ((e = readdir(d)))
			n += mcp_id_valid(e->d_name);
		closedir(d);
	}
	if (n >= m->pol.max_workspaces) {
		snprintf(msg, msg_size,
			 "this server keeps at most %d workspaces: delete_workspace one first",
			 m->pol.max_workspaces);
		return -ENOSPC;
	}
	mcp_id_new(id);
	if (mkdirat(m->ws_fd, id, 0700) < 0) {
		snprintf(msg, msg_size, "create the workspace: %s", strerror(errno));
		return -errno;
	}
	wfd = openat(m->ws_fd, id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (wfd >= 0)
		ffd = open_sub(wfd, "files", 0755);
	snprintf(meta, sizeof(meta), "{\"created_unix_ms\": %lld, \"expires_unix_ms\": %lld}\n",
		 (long long) now_ms(), (long long) (now_ms() + (int64_t) ttl_ms));
	r = ffd < 0 ? -EIO : write_file_at(wfd, "meta.json", meta);
	if (r == 0 && files)
		r = mcp_write_files(m, ffd, files, msg, msg_size);
	else if (r < 0)
		snprintf(msg, msg_size, "create the workspace: %s", strerror(-r));
	if (r < 0)
		(void) rm_rf_at(m->ws_fd, id, 0);
	return r;
}

int
mcp_ws_delete(struct mcp *m, const char *id)
{
	if (ws_open(m, id) < 0)
		return -ENOENT;
	return rm_rf_at(m->ws_fd, id, 0);
}

int
mcp_ws_inputs(struct mcp *m, const char *id, json_t *inputs)
{
	cleanup_free char *rel = xasprintf("%s/files", id);
	json_t *meta = ws_meta(m, id);
	int fd;
	DIR *d;
	struct dirent *e;
	json_t *have = json_object();
	size_t i;
	json_t *in;

	if (!meta || json_integer_value(json_object_get(meta, "expires_unix_ms")) < now_ms()) {
		json_decref(meta);
		json_decref(have);
		return -ENOENT;
	}
	json_decref(meta);
	fd = openat(m->ws_fd, rel, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			(void) close(fd);
		json_decref(have);
		return -ENOENT;
	}
	/* a file the call sends itself wins over the workspace's entry of that name */
	json_array_foreach(inputs, i, in)
	{
		const char *s = strrchr(json_string_value(in), '/');

		json_object_set_new(have, s ? s + 1 : json_string_value(in), json_true());
	}
	while ((e = readdir(d))) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 ||
		    json_object_get(have, e->d_name))
			continue;
		json_array_append_new(inputs, json_sprintf("%s/workspaces/%s/files/%s",
							   m->pol.state_dir, id, e->d_name));
	}
	closedir(d);
	json_decref(have);
	return 0;
}

/* After a run with a workspace: what the run left becomes the workspace (a sanitised copy,
 * never through a link; the script itself is left out), swapped in whole. */
static void
ws_write_back(struct mcp *m, const char *id, const char *run_dir, const char *lang)
{
	cleanup_fd int wfd = -1;
	cleanup_free char *dest = NULL, *out = NULL;
	ab_error *e = NULL;
	json_t *res;
	uint64_t bytes;

	if (ws_open(m, id) < 0 || !run_dir)
		return;
	wfd = openat(m->ws_fd, id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (wfd < 0)
		return;
	(void) rm_rf_at(wfd, "files.new", 0);
	if (mkdirat(wfd, "files.new", 0755) < 0)
		return;
	dest = xasprintf("%s/workspaces/%s/files.new", m->pol.state_dir, id);
	if (ab_collect(ctx, run_dir, dest, &out, &e) < 0) {
		fprintf(stderr, "agentbox mcp: workspace %s: %s\n", id, ab_error_message(e));
		ab_error_free(e);
		(void) rm_rf_at(wfd, "files.new", 0);
		return;
	}
	res = json_loads(out, 0, NULL);
	bytes = (uint64_t) json_integer_value(json_object_get(res, "bytes"));
	json_decref(res);
	if (bytes > m->pol.ws_bytes) {
		fprintf(stderr,
			"agentbox mcp: workspace %s: the run left %llu bytes, over the "
			"%llu-byte cap: the workspace keeps its old content\n",
			id, (unsigned long long) bytes, (unsigned long long) m->pol.ws_bytes);
		(void) rm_rf_at(wfd, "files.new", 0);
		return;
	}
	{
		cleanup_fd int nfd =
			openat(wfd, "files.new", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

		if (nfd >= 0)
			(void) unlinkat(nfd, strcmp(lang, "node") == 0 ? "script.js" : "script.py",
					0);
	}
	if (syscall(SYS_renameat2, wfd, "files.new", wfd, "files", RENAME_EXCHANGE) == 0)
		(void) rm_rf_at(wfd, "files.new", 0);
}

/* ---- runs ------------------------------------------------------------------------------- */

static void
pending_free(struct mcp_pending *p)
{
	json_decref(p->req.id);
	json_decref(p->req.token);
	free(p);
}

static struct mcp_job *
job_find(struct mcp *m, const char *id)
{
	for (struct mcp_job *j = m->jobs; j; j = j->next)
		if (strcmp(j->id, id) == 0)
			return j;
	return NULL;
}

static void
add_pending(struct mcp *m, const struct mcp_req *req, const char *job, bool is_run,
	    uint64_t wait_ms)
{
	struct mcp_pending *p = xcalloc(1, sizeof(*p));

	p->req.id = json_incref(req->id);
	p->req.token = json_incref(req->token);
	p->req.modern = req->modern;
	snprintf(p->job, sizeof(p->job), "%s", job);
	p->is_run = is_run;
	p->since_ms = p->last_progress_ms = now_ms();
	p->deadline_ms = p->since_ms + (int64_t) wait_ms;
	p->next = m->pending;
	m->pending = p;
}

/* requests waiting for runs (run_code, wait_run): bounded, whatever a client sends */
static bool
too_many_waiting(const struct mcp *m)
{
	int n = 0;

	for (const struct mcp_pending *p = m->pending; p; p = p->next)
		if (++n >= MAX_PENDING)
			return true;
	return false;
}

void
mcp_submit(struct mcp *m, const struct mcp_req *req, json_t *spec, const char *job_id, bool staged,
	   const char *workspace, uint64_t wait_ms)
{
	struct mcp_job *j, **tail;

	if (req && m->held_jobs + req->bytes > m->pol.max_pending) {
		/* what the queued runs' requests hold (their code, stdin, arguments) is bounded
		 * whatever the clients send (issue 24) */
		json_decref(spec);
		if (staged)
			mcp_staging_remove(m, job_id);
		mcp_reply(
			m, req,
			mcp_result_error("this server is busy: its queued runs hold %zu bytes "
					 "and this call has %zu (its --max-pending-bytes is %zu); "
					 "try again later",
					 m->held_jobs, req->bytes, m->pol.max_pending));
		return;
	}
	if (m->n_queued >= m->pol.max_queued || too_many_waiting(m)) {
		json_decref(spec);
		if (staged)
			mcp_staging_remove(m, job_id);
		mcp_reply(m, req,
			  mcp_result_error("this server is busy: %d runs going and %d waiting "
					   "(its --max-queue); try again later",
					   m->n_running, m->n_queued));
		return;
	}
	j = xcalloc(1, sizeof(*j));
	snprintf(j->id, sizeof(j->id), "%s", job_id);
	j->spec = spec;
	{
		/* what it will hold, for the admission (start_queued) */
		struct ab_run_opts o;
		struct ab_err e = { 0 };

		run_opts_init(&o);
		(void) spec_parse(spec, &o, &e);
		j->mem = o.limits[AB_LIM_MEMORY].value;
		j->tasks = o.limits[AB_LIM_PIDS].value;
		run_opts_done(&o);
	}
	j->staged = staged;
	j->workspace = workspace ? xstrdup(workspace) : NULL;
	j->out_r = j->err_r = -1;
	j->queued_ms = now_ms();
	j->state = JOB_QUEUED;
	j->held = req ? req->bytes : 0;
	m->held_jobs += j->held;
	for (tail = &m->jobs; *tail; tail = &(*tail)->next)
		;
	*tail = j;
	m->n_queued++;
	if (req && req->id)
		add_pending(m, req, j->id, true, wait_ms);
	fprintf(stderr, "agentbox mcp: run %s queued\n", j->id);
}

bool
mcp_request_in_flight(const struct mcp *m, json_t *req_id)
{
	size_t i;
	json_t *w;

	for (struct mcp_pending *p = m->pending; p; p = p->next)
		if (json_equal(p->req.id, req_id))
			return true;
	json_array_foreach(m->info_waiting, i, w)
	{
		if (json_equal(json_object_get(w, "id"), req_id))
			return true;
	}
	return mcp_session_request_in_flight(m, req_id);
}

static void
job_unlink(struct mcp *m, struct mcp_job *j)
{
	for (struct mcp_job **pp = &m->jobs; *pp; pp = &(*pp)->next)
		if (*pp == j) {
			*pp = j->next;
			break;
		}
}

static void
job_free(struct mcp *m, struct mcp_job *j)
{
	m->held_jobs -= j->held;
	if (j->out_r >= 0)
		(void) close(j->out_r);
	if (j->err_r >= 0)
		(void) close(j->err_r);
	json_decref(j->spec);
	free(j->workspace);
	free(j);
}

/* Sends the result to every request waiting for job (and forgets them). */
static void
answer_waiters(struct mcp *m, const char *job, json_t *result)
{
	struct mcp_pending **pp = &m->pending;

	while (*pp) {
		struct mcp_pending *p = *pp;

		if (strcmp(p->job, job) == 0) {
			*pp = p->next;
			mcp_reply(m, &p->req, json_deep_copy(result));
			pending_free(p);
		} else {
			pp = &p->next;
		}
	}
}

static void
write_record(struct mcp *m, const char *id, json_t *rec)
{
	cleanup_free char *name = xasprintf("%s.json", id), *tmp = xasprintf(".%s.tmp", id);
	char *text = json_dumps(rec, JSON_COMPACT);

	if (text && write_file_at(m->jobs_fd, tmp, text) == 0)
		(void) renameat(m->jobs_fd, tmp, m->jobs_fd, name);
	free(text);
}

static void retention(struct mcp *m);

static void
job_finished(struct mcp *m, struct mcp_job *j, ab_result *res, ab_error *e)
{
	json_t *result, *rec;
	int64_t queue_ms = j->started_ms - j->queued_ms;

	if (res) {
		json_t *rep = json_loads(ab_result_json(res), 0, NULL);
		const char *rd = ab_result_run_dir(res);
		const char *base = rd ? strrchr(rd, '/') : NULL;

		rec = json_pack("{s:s?, s:I, s:I}", "run_dir", base ? base + 1 : NULL, "queue_ms",
				(json_int_t) queue_ms, "finished_unix_ms", (json_int_t) now_ms());
		if (!base)
			json_object_set_new(
				rec, "error",
				json_string(ab_result_message(res) ?: "no run directory"));
		write_record(m, j->id, rec);
		json_decref(rec);
		if (j->workspace && rd)
			ws_write_back(m, j->workspace, rd,
				      json_string_value(json_object_get(j->spec, "language"))
					      ?: "");
		result = rep ? mcp_result_from_report(m, j->id, rep, queue_ms)
			     : mcp_result_error("run %s: unreadable report", j->id);
		json_decref(rep);
		fprintf(stderr, "agentbox mcp: run %s: %s\n", j->id, ab_result_status(res));
		ab_result_free(res);
	} else {
		const char *msg = e ? ab_error_message(e) : "failed";

		rec = json_pack("{s:s, s:I}", "error", msg, "finished_unix_ms",
				(json_int_t) now_ms());
		write_record(m, j->id, rec);
		json_decref(rec);
		result = mcp_result_error("run %s could not run: %s%s%s%s", j->id, msg,
					  e && *ab_error_fix(e) ? " (fix: " : "",
					  e ? ab_error_fix(e) : "",
					  e && *ab_error_fix(e) ? ")" : "");
		fprintf(stderr, "agentbox mcp: run %s: %s\n", j->id, msg);
		ab_error_free(e);
	}
	answer_waiters(m, j->id, result);
	json_decref(result);
	if (j->staged)
		mcp_staging_remove(m, j->id);
	job_unlink(m, j);
	m->n_running--;
	m->mem_running -= j->mem;
	m->tasks_running -= j->tasks;
	job_free(m, j);
	retention(m);
}

static int
relay_pipe(int *r, int *w)
{
	int p[2];

	if (pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0)
		return -errno;
	*r = p[0];
	*w = p[1];
	return 0;
}

static bool
wants_progress(struct mcp *m, const char *job)
{
	for (struct mcp_pending *p = m->pending; p; p = p->next)
		if (strcmp(p->job, job) == 0 && p->req.token)
			return true;
	return false;
}

/* The warm slots (--warm N): a class per allowed language, the spec a run_code of it builds
 * when the call gives only code. */
static int
warm_start(struct mcp *m)
{
	static const char *const langs[2] = { "python", "node" };
	bool allowed[2] = { m->pol.allow_python, m->pol.allow_node };
	ab_error *e = NULL;

	m->pool = ab_pool_new(ctx, &e);
	for (int i = 0; i < 2 && m->pool; i++) {
		json_t *tmpl = allowed[i] ? mcp_spec_template(m, langs[i]) : NULL;
		json_t *opts = json_pack("{s:[], s:I}", "preimport", "idle_ms",
					 (json_int_t) m->pol.warm_idle_ms);
		char *t = tmpl ? json_dumps(tmpl, JSON_COMPACT) : NULL;
		char *o = NULL;
		ab_spec *s = t ? ab_spec_from_json(t, (size_t) -1, &e) : NULL;
		int r = 0;

		STRV_FOREACH (mod, &m->pol.preimport[i])
			json_array_append_new(json_object_get(opts, "preimport"),
					      json_string(*mod));
		o = json_dumps(opts, JSON_COMPACT);
		if (s)
			r = ab_pool_add(m->pool, s, (unsigned) m->pol.warm_slots, o, &e);
		if (r < 0 || (tmpl && !s))
			fprintf(stderr, "agentbox mcp: no warm slots for %s: %s\n", langs[i],
				ab_error_message(e));
		ab_error_free(e);
		e = NULL;
		ab_spec_free(s);
		free(t);
		free(o);
		json_decref(tmpl);
		json_decref(opts);
	}
	if (!m->pool) {
		fprintf(stderr, "agentbox mcp: warm slots: %s\n", ab_error_message(e));
		ab_error_free(e);
		return -EIO;
	}
	fprintf(stderr, "agentbox mcp: %d warm slot(s) per language\n", m->pol.warm_slots);
	return 0;
}

static void
job_start(struct mcp *m, struct mcp_job *j)
{
	int ow = -1, ew = -1;
	bool live = wants_progress(m, j->id);
	ab_error *e = NULL;
	ab_spec *s;

	m->n_queued--;
	m->n_running++;
	m->mem_running += j->mem;
	m->tasks_running += j->tasks;
	j->state = JOB_RUNNING;
	j->started_ms = now_ms();
	if (live && (relay_pipe(&j->out_r, &ow) < 0 || relay_pipe(&j->err_r, &ew) < 0))
		live = false;
	json_object_set_new(j->spec, "quiet", json_boolean(!live));
	s = ab_spec_from_jansson(j->spec, &e); /* no second parse of its code */
	/* in a warm slot of its class when one is ready (ab_pool_run_start), else cold */
	j->h = !s        ? NULL
	       : m->pool ? ab_pool_run_start(m->pool, s, &(ab_io){ live ? ow : -1, live ? ew : -1 },
					     &e)
			 : ab_run_start(ctx, s, &(ab_io){ live ? ow : -1, live ? ew : -1 }, &e);
	ab_spec_free(s);
	/* the run has its own copy from here: its code and stdin leave this process */
	json_object_del(j->spec, "code");
	json_object_del(j->spec, "stdin_data");
	json_object_del(j->spec, "args");
	m->held_jobs -= j->held;
	j->held = 0;
	if (ow >= 0)
		(void) close(ow);
	if (ew >= 0)
		(void) close(ew);
	if (!j->h) {
		job_finished(m, j, NULL, e);
		return;
	}
	fprintf(stderr, "agentbox mcp: run %s started (%d running)\n", j->id, m->n_running);
}

/* Does what j holds fit beside the runs going (struct mcp_policy)? */
static bool
fits(const struct mcp *m, const struct mcp_job *j)
{
	if (m->n_running >= m->pol.max_running)
		return false;
	if (m->n_running == 0)
		return true; /* one run alone, whatever it asks */
	return m->mem_running + j->mem <= m->pol.mem_budget &&
	       m->tasks_running + j->tasks <= m->pol.tasks_budget;
}

bool
mcp_budget_fits(const struct mcp *m, uint64_t mem, uint64_t tasks)
{
	if (m->n_running == 0 && mcp_sessions_count(m) == 0)
		return true; /* one alone, whatever it asks */
	return m->mem_running + mem <= m->pol.mem_budget &&
	       m->tasks_running + tasks <= m->pol.tasks_budget;
}

ab_context *
mcp_context(void)
{
	return ctx;
}

/* Starts the first queued run if it fits (never one behind it: a big run is not starved by
 * small ones passing it). One a turn of the loop: starting a run hands its request (up to
 * megabytes of code) to a supervisor, and the messages that came meanwhile (tools/list, a
 * cancel) are answered between two starts (issue 24). Returns whether the loop should come
 * back at once for the next one. */
static bool
start_queued(struct mcp *m)
{
	for (struct mcp_job *j = m->jobs; j; j = j->next) {
		if (j->state != JOB_QUEUED)
			continue;
		if (!fits(m, j))
			return false;
		job_start(m, j); /* may free j */
		return true;
	}
	return false;
}

/* the run's live output, kept as a short tail for progress messages */
static void
drain(struct mcp_job *j, int *fdp)
{
	char buf[16384];

	for (;;) {
		ssize_t n = read(*fdp, buf, sizeof(buf));

		if (n > 0) {
			size_t k = (size_t) n;

			if (k >= TAIL_BYTES) {
				memcpy(j->tail, buf + k - TAIL_BYTES, TAIL_BYTES);
				j->tail_len = TAIL_BYTES;
			} else {
				size_t keep =
					j->tail_len + k > TAIL_BYTES ? TAIL_BYTES - k : j->tail_len;

				memmove(j->tail, j->tail + j->tail_len - keep, keep);
				memcpy(j->tail + keep, buf, k);
				j->tail_len = keep + k;
			}
			continue;
		}
		if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
			(void) close(*fdp);
			*fdp = -1;
		}
		if (n < 0 && errno == EINTR)
			continue;
		return;
	}
}

int
mcp_cancel_job(struct mcp *m, const char *id)
{
	struct mcp_job *j = mcp_id_valid(id) ? job_find(m, id) : NULL;

	if (!j) {
		cleanup_free char *name = xasprintf("%s.json", id);
		struct stat st;

		return mcp_id_valid(id) && fstatat(m->jobs_fd, name, &st, 0) == 0 ? 0 : -ENOENT;
	}
	j->cancelled = true;
	if (j->state == JOB_RUNNING) {
		(void) ab_run_cancel(j->h);
	} else {
		/* never started: answered now */
		json_t *r = mcp_result_error("run %s was cancelled before it started", j->id);
		json_t *rec = json_pack("{s:s, s:I}", "error", "cancelled before it started",
					"finished_unix_ms", (json_int_t) now_ms());

		write_record(m, j->id, rec);
		json_decref(rec);
		answer_waiters(m, j->id, r);
		json_decref(r);
		if (j->staged)
			mcp_staging_remove(m, j->id);
		job_unlink(m, j);
		m->n_queued--;
		job_free(m, j);
	}
	return 1;
}

void
mcp_cancel_request(struct mcp *m, json_t *req_id)
{
	for (struct mcp_pending **pp = &m->pending; *pp; pp = &(*pp)->next) {
		struct mcp_pending *p = *pp;

		if (!json_equal(p->req.id, req_id))
			continue;
		*pp = p->next; /* no reply for a cancelled request, ever */
		if (p->is_run)
			(void) mcp_cancel_job(m, p->job);
		pending_free(p);
		return;
	}
	(void) mcp_session_cancel_request(m, req_id);
}

void
mcp_wait_job(struct mcp *m, const struct mcp_req *req, const char *job_id, uint64_t wait_ms)
{
	struct mcp_job *j = mcp_id_valid(job_id) ? job_find(m, job_id) : NULL;
	json_t *res;

	if (j && too_many_waiting(m)) {
		mcp_reply(m, req,
			  mcp_result_error("this server has %d requests waiting already; try "
					   "again later",
					   MAX_PENDING));
		return;
	}
	if (j) {
		add_pending(m, req, j->id, false, wait_ms);
		return;
	}
	res = mcp_result_from_record(m, job_id);
	mcp_reply(m, req, res ? res : mcp_result_error("no run '%s' (unknown or removed)", job_id));
}

/* ---- retention -------------------------------------------------------------------------- */

struct rec_ent {
	char id[MCP_ID_LEN + 1];
	int64_t mtime_ms;
};

static int
by_age(const void *a, const void *b)
{
	const struct rec_ent *x = a, *y = b;

	return x->mtime_ms < y->mtime_ms ? 1 : x->mtime_ms > y->mtime_ms ? -1 : 0;
}

static void
remove_run(struct mcp *m, const char *id)
{
	cleanup_free char *name = xasprintf("%s.json", id), *text = NULL;
	cleanup_fd int fd = openat(m->jobs_fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	json_t *rec = NULL;
	const char *rd;

	if (fd >= 0 && read_all_capped(fd, 64 << 10, &text) >= 0)
		rec = json_loads(text, 0, NULL);
	rd = json_string_value(json_object_get(rec, "run_dir"));
	if (rd && strncmp(rd, "run-", 4) == 0 && !strchr(rd, '/')) {
		cleanup_free char *path = xasprintf("%s/runs/%s", m->pol.state_dir, rd);
		ab_error *e = NULL;

		if (ab_rm(ctx, path, &e) < 0) {
			fprintf(stderr, "agentbox mcp: retention: %s\n", ab_error_message(e));
			ab_error_free(e);
		}
	}
	json_decref(rec);
	(void) unlinkat(m->jobs_fd, name, 0);
	fprintf(stderr, "agentbox mcp: retention: run %s removed\n", id);
}

static void
retention(struct mcp *m)
{
	struct rec_ent *v = NULL;
	size_t n = 0, cap = 0;
	int64_t now = now_ms();
	DIR *d;
	struct dirent *e;
	int removed = 0;

	if (m->fuzzing || m->jobs_fd < 0)
		return;
	d = fdopendir(fcntl(m->jobs_fd, F_DUPFD_CLOEXEC, 3));
	if (!d)
		return;
	rewinddir(d);
	while ((e = readdir(d))) {
		size_t l = strlen(e->d_name);
		struct stat st;

		if (l != MCP_ID_LEN + 5 || strcmp(e->d_name + MCP_ID_LEN, ".json") != 0 ||
		    fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (n == cap)
			v = xrealloc(v, (cap = cap ? cap * 2 : 64) * sizeof(*v));
		memcpy(v[n].id, e->d_name, MCP_ID_LEN);
		v[n].id[MCP_ID_LEN] = '\0';
		v[n].mtime_ms = (int64_t) st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000;
		n++;
	}
	closedir(d);
	if (n > 1)
		qsort(v, n, sizeof(*v), by_age);
	for (size_t i = 0; i < n && removed < 50; i++) {
		if ((int) i < m->pol.keep_runs && now - v[i].mtime_ms <= (int64_t) m->pol.keep_ms)
			continue;
		if (job_find(m, v[i].id))
			continue;
		remove_run(m, v[i].id);
		removed++;
	}
	free(v);
}

static void
expire_workspaces(struct mcp *m)
{
	DIR *d = fdopendir(fcntl(m->ws_fd, F_DUPFD_CLOEXEC, 3));
	struct dirent *e;

	if (!d)
		return;
	rewinddir(d);
	while ((e = readdir(d))) {
		json_t *meta;
		bool in_use = false;

		if (!mcp_id_valid(e->d_name))
			continue;
		for (struct mcp_job *j = m->jobs; j; j = j->next)
			in_use |= j->workspace && strcmp(j->workspace, e->d_name) == 0;
		meta = ws_meta(m, e->d_name);
		if (!in_use && (!meta || json_integer_value(json_object_get(
						 meta, "expires_unix_ms")) < now_ms())) {
			fprintf(stderr, "agentbox mcp: workspace %s expired\n", e->d_name);
			(void) rm_rf_at(m->ws_fd, e->d_name, 0);
		}
		json_decref(meta);
	}
	closedir(d);
	/* staging left by a server that died (an hour old: another server may share the state
	 * directory, and its calls' files are on their way in) */
	d = fdopendir(fcntl(m->staging_fd, F_DUPFD_CLOEXEC, 3));
	if (!d)
		return;
	rewinddir(d);
	while ((e = readdir(d))) {
		struct stat st;

		if (mcp_id_valid(e->d_name) && !job_find(m, e->d_name) &&
		    !mcp_session_uses_staging(m, e->d_name) &&
		    fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    now_ms() - (int64_t) st.st_mtim.tv_sec * 1000 > 3600 * 1000)
			(void) rm_rf_at(m->staging_fd, e->d_name, 0);
	}
	closedir(d);
}

/* ---- sandbox_info ------------------------------------------------------------------------ */

static const char py_probe[] =
	"import sys, json\n"
	"try:\n"
	"    import importlib.metadata as md\n"
	"    pk = sorted({'%s==%s' % (d.metadata['Name'], d.version) for d in md.distributions()"
	" if d.metadata['Name']})\n"
	"except Exception:\n"
	"    pk = []\n"
	"print(json.dumps({'version': sys.version.split()[0], 'packages': pk[:3000]}))\n";

static const char node_probe[] =
	"const fs = require('fs'), path = require('path'); const p = new Set();\n"
	"const dirs = (require('module').globalPaths || []).concat(['/usr/lib/node_modules',"
	" '/usr/share/nodejs', '/usr/local/lib/node_modules']);\n"
	"for (const d of dirs) { try { for (const n of fs.readdirSync(d)) {\n"
	"  if (n.startsWith('@')) { for (const s of fs.readdirSync(path.join(d, n))) p.add(n + '/' "
	"+ s); }\n"
	"  else if (!n.startsWith('.')) p.add(n); } } catch (e) {} }\n"
	"console.log(JSON.stringify({version: process.version, packages: [...p].sort().slice(0, "
	"3000)}));\n";

static const char *const info_lang[2] = { "python", "node" };

/* An interpreter probe: a sandboxed run like any other, started here, waited in the loop. */
static ab_run_handle *
probe_start(const char *lang, const char *code)
{
	json_t *spec = json_pack("{s:s, s:s, s:b, s:b, s:{s:s}}", "language", lang, "code", code,
				 "rm", 1, "quiet", 1, "limits", "timeout", "30s");
	char *text = json_dumps(spec, JSON_COMPACT);
	ab_spec *s = text ? ab_spec_from_json(text, (size_t) -1, NULL) : NULL;
	ab_run_handle *h = s ? ab_run_start(ctx, s, NULL, NULL) : NULL;

	ab_spec_free(s);
	free(text);
	json_decref(spec);
	return h;
}

static json_t *
probe_answer(ab_result *res)
{
	json_t *out = NULL;

	if (res && ab_result_exit_code(res) == 0)
		out = json_loads(ab_result_stdout(res, NULL), 0, NULL);
	if (!json_is_object(out)) {
		json_decref(out);
		out = json_pack("{s:s, s:s?}", "error",
				"the interpreter did not start in the sandbox", "status",
				res ? ab_result_status(res) : NULL);
	}
	return out;
}

static json_t *
info_build(struct mcp *m)
{
	json_t *info, *caps = json_object(), *doctor = NULL, *checks;
	struct ab_run_opts o;
	char *text = NULL;

	run_opts_init(&o);
	for (int id = 0; id < AB_LIM_COUNT; id++)
		json_object_set_new(
			caps, cli_limit_name((enum ab_limit_id) id),
			json_pack("{s:I, s:o}", "default",
				  (json_int_t) (m->pol.cap_set[id] && (o.limits[id].value == 0 ||
								       m->pol.cap[id] <
									       o.limits[id].value)
							? m->pol.cap[id]
							: o.limits[id].value),
				  "cap",
				  m->pol.cap_set[id] ? json_integer((json_int_t) m->pol.cap[id])
						     : json_null()));
	run_opts_done(&o);
	if (!m->fuzzing && ab_probe(ctx, &text, NULL) == 0)
		doctor = json_loads(text, 0, NULL);
	free(text);
	checks = json_array();
	{
		size_t i;
		json_t *c;

		json_array_foreach(json_object_get(doctor, "checks"), i, c)
		{
			json_array_append_new(
				checks,
				json_pack("{s:O, s:O, s:O}", "check",
					  json_object_get(c, "check") ?: json_null(), "result",
					  json_object_get(c, "result") ?: json_null(), "detail",
					  json_object_get(c, "detail") ?: json_null()));
		}
	}
	info = json_pack(
		"{s:s, s:b, s:o, s:s, s:s, s:o, s:s, s:{s:i, s:i, s:I, s:I, s:I, s:i, s:I, s:I, "
		"s:I}}",
		"agentbox_version", mcp_server_version(), "sandbox_ok",
		json_is_true(json_object_get(doctor, "ok")), "doctor", checks, "network",
		"none: each run has its own network namespace with loopback only", "filesystem",
		"/work (the workspace, the program's cwd), /tmp and /dev/shm are writable; "
		"/usr and a generated /etc are read-only; nothing else of the host",
		"limit_units",
		json_pack("{s:s, s:s, s:s, s:s, s:s}", "timeout", "ms", "memory", "bytes", "cpus",
			  "milli-cores", "pids", "tasks", "output-limit", "bytes per stream"),
		"limits_note",
		"per limit: default applies when a call gives none; a call may lower, never raise, "
		"the cap",
		"server", "max_runs", m->pol.max_running, "max_queue", m->pol.max_queued,
		"file_bytes", (json_int_t) m->pol.file_bytes, "files_bytes",
		(json_int_t) m->pol.files_bytes, "image_bytes", (json_int_t) m->pol.image_bytes,
		"max_images", m->pol.max_images, "read_bytes", (json_int_t) m->pol.read_bytes,
		"default_wait_ms", (json_int_t) m->pol.wait_ms, "workspace_ttl_ms",
		(json_int_t) m->pol.ws_ttl_ms);
	json_object_set_new(info, "limits", caps);
	/* what may run at once (issue 25): besides max_runs, what the runs going may hold */
	json_object_set_new(json_object_get(info, "server"), "memory_budget_bytes",
			    json_integer((json_int_t) m->pol.mem_budget));
	json_object_set_new(json_object_get(info, "server"), "tasks_budget",
			    json_integer((json_int_t) m->pol.tasks_budget));
	json_object_set(info, "languages", m->info_langs ? m->info_langs : json_object());
	json_decref(doctor);
	return info;
}

/* The warm slots as sandbox_info shows them, live: the operator's settings, and per class
 * the slots ready and the memory they hold (ab_pool_info). */
static json_t *
info_warm(struct mcp *m)
{
	json_t *w = json_pack("{s:i, s:I, s:{s:o, s:o}}", "slots_per_language", m->pol.warm_slots,
			      "idle_ms", (json_int_t) m->pol.warm_idle_ms, "preimport", "python",
			      json_array(), "node", json_array());

	for (int i = 0; i < 2; i++)
		STRV_FOREACH (mod, &m->pol.preimport[i])
			json_array_append_new(json_object_get(json_object_get(w, "preimport"),
							      i ? "node" : "python"),
					      json_string(*mod));
	if (m->pool) {
		char *t = ab_pool_info(m->pool);
		json_t *pi = t ? json_loads(t, 0, NULL) : NULL;
		json_t *classes = json_array();
		size_t i;
		json_t *c;

		free(t);
		json_array_foreach(json_object_get(pi, "classes"), i, c)
		{
			json_t *e = json_deep_copy(c);

			json_object_del(e, "spec"); /* the limits are in "limits" already */
			json_array_append_new(classes, e);
		}
		json_object_set_new(w, "classes", classes);
		json_object_set_new(
			w, "memory_bytes",
			json_integer(json_integer_value(json_object_get(pi, "memory_bytes"))));
		json_decref(pi);
	}
	json_object_set_new(
		w, "note",
		json_string(
			"a run_code whose limits (timeout and output-limit aside), env and stdin "
			"are the defaults runs in a sandbox started before the call, its "
			"pre-imports already imported; it is used once, then replaced"));
	return w;
}

static void
info_reply(struct mcp *m, const struct mcp_req *req, json_t *cached)
{
	json_t *info = json_deep_copy(cached);
	char *text;

	json_object_set_new(info, "warm", info_warm(m));
	json_object_set_new(info, "sessions", mcp_sessions_info(m));
	text = json_dumps(info, JSON_INDENT(1) | JSON_SORT_KEYS);
	mcp_reply(m, req,
		  json_pack("{s:[{s:s, s:s}], s:O}", "content", "type", "text", "text",
			    text ? text : "{}", "structuredContent", info));
	free(text);
	json_decref(info);
}

/* every probe has answered: the info is built once, cached, sent to whoever waits */
static void
info_finish(struct mcp *m)
{
	size_t i;
	json_t *w;

	m->info_cache = info_build(m);
	json_array_foreach(m->info_waiting, i, w)
	{
		struct mcp_req req = { .id = json_object_get(w, "id"),
				       .modern = json_is_true(json_object_get(w, "modern")) };

		info_reply(m, &req, m->info_cache);
	}
	json_decref(m->info_waiting);
	m->info_waiting = NULL;
	json_decref(m->info_langs);
	m->info_langs = NULL;
}

void
mcp_sandbox_info(struct mcp *m, const struct mcp_req *req)
{
	bool allowed[2] = { m->pol.allow_python, m->pol.allow_node };
	bool probing = m->info_runs[0] || m->info_runs[1];

	if (m->info_cache || m->fuzzing) {
		json_t *info = m->info_cache ? json_incref(m->info_cache) : info_build(m);

		info_reply(m, req, info);
		json_decref(info);
		return;
	}
	if (!req->id)
		return;
	if (!m->info_waiting)
		m->info_waiting = json_array();
	json_array_append_new(m->info_waiting,
			      json_pack("{s:O, s:b}", "id", req->id, "modern", req->modern));
	if (probing)
		return;
	m->info_langs = json_object();
	for (int i = 0; i < 2; i++) {
		if (!allowed[i])
			continue;
		m->info_runs[i] = probe_start(info_lang[i], i == 0 ? py_probe : node_probe);
		if (!m->info_runs[i])
			json_object_set_new(m->info_langs, info_lang[i], probe_answer(NULL));
	}
	if (!m->info_runs[0] && !m->info_runs[1])
		info_finish(m);
}

/* a probe whose fd was readable */
static void
info_probe_done(struct mcp *m, int i)
{
	ab_result *res = NULL;

	if (ab_run_wait(m->info_runs[i], &res, NULL) < 0)
		res = NULL;
	m->info_runs[i] = NULL;
	json_object_set_new(m->info_langs, info_lang[i], probe_answer(res));
	ab_result_free(res);
	if (!m->info_runs[0] && !m->info_runs[1])
		info_finish(m);
}

/* ---- the loop ---------------------------------------------------------------------------- */

static void
send_stdout(struct mcp *m, json_t *msg)
{
	char *text = json_dumps(msg, JSON_COMPACT);
	size_t len;

	if (!text)
		return;
	len = strlen(text);
	text = xrealloc(text, len + 2);
	text[len++] = '\n';
	/* whole, in order; a non-blocking stdout (the client's choice) is waited for */
	for (size_t off = 0; off < len && !m->quit;) {
		ssize_t w = write(STDOUT_FILENO, text + off, len - off);

		if (w > 0) {
			off += (size_t) w;
		} else if (w < 0 && errno == EAGAIN) {
			struct pollfd p = { .fd = STDOUT_FILENO, .events = POLLOUT };

			(void) poll(&p, 1, -1);
		} else if (!(w < 0 && errno == EINTR)) {
			fprintf(stderr, "agentbox mcp: stdout: %s: stopping\n",
				w < 0 ? strerror(errno) : "short write");
			m->quit = true;
		}
	}
	free(text);
}

static void
progress(struct mcp *m, struct mcp_pending *p, struct mcp_job *j, int64_t now)
{
	char msg[TAIL_BYTES + 128], tail[TAIL_BYTES + 1];
	double elapsed = (double) (now - p->since_ms) / 1000.0;
	size_t k = 0;

	if (j)
		for (size_t i = 0; i < j->tail_len; i++) {
			unsigned char c = (unsigned char) j->tail[i];

			tail[k++] =
				(c >= 0x20 && c < 0x7f) || c == '\n' || c == '\t' ? (char) c : '?';
		}
	tail[k] = '\0';
	if (!j || j->state == JOB_QUEUED)
		snprintf(msg, sizeof(msg), "queued for %.1f s (a slot frees when a run ends)",
			 elapsed);
	else
		snprintf(msg, sizeof(msg), "running for %.1f s%s%s", elapsed,
			 k ? "; output so far ends with: " : "", tail);
	if (elapsed <= p->last_progress)
		elapsed = p->last_progress + 0.001;
	p->last_progress = elapsed;
	p->last_progress_ms = now;
	mcp_notify(m, "notifications/progress",
		   json_pack("{s:O, s:f, s:s}", "progressToken", p->req.token, "progress", elapsed,
			     "message", msg));
}

/* soft waits that ran out, progress that is due; the next time something is due */
static int64_t
timers(struct mcp *m, int64_t now)
{
	int64_t next = now + TICK_MS;
	struct mcp_pending **pp = &m->pending;

	while (*pp) {
		struct mcp_pending *p = *pp;
		struct mcp_job *j = job_find(m, p->job);

		if (now >= p->deadline_ms) {
			*pp = p->next;
			mcp_reply(m, &p->req,
				  mcp_result_running(p->job,
						     j && j->state == JOB_QUEUED ? "queued"
										 : "running",
						     now - (j ? j->queued_ms : p->since_ms)));
			pending_free(p);
			continue;
		}
		if (p->req.token) {
			if (now - p->last_progress_ms >= PROGRESS_MS)
				progress(m, p, j, now);
			if (p->last_progress_ms + PROGRESS_MS < next)
				next = p->last_progress_ms + PROGRESS_MS;
		}
		if (p->deadline_ms < next)
			next = p->deadline_ms;
		pp = &p->next;
	}
	return next;
}

static void
shutdown_all(struct mcp *m)
{
	struct mcp_job *j;

	mcp_sessions_close_all(m, "the server stopped");
	/* the slots no run took: killed, nothing of them kept */
	ab_pool_free(m->pool);
	m->pool = NULL;
	for (int i = 0; i < 2; i++) {
		if (m->info_runs[i]) {
			(void) ab_run_cancel(m->info_runs[i]);
			(void) ab_run_wait(m->info_runs[i], NULL, NULL);
			m->info_runs[i] = NULL;
		}
	}
	/* queued runs never start; running ones are killed, then reaped and recorded */
	for (j = m->jobs; j; j = j->next)
		if (j->state == JOB_RUNNING)
			(void) ab_run_cancel(j->h);
	while ((j = m->jobs)) {
		if (j->state == JOB_RUNNING) {
			ab_result *res = NULL;
			ab_error *e = NULL;

			if (ab_run_wait(j->h, &res, &e) < 0)
				res = NULL;
			j->h = NULL;
			job_finished(m, j, res, res ? NULL : e);
		} else {
			if (j->staged)
				mcp_staging_remove(m, j->id);
			job_unlink(m, j);
			m->n_queued--;
			job_free(m, j);
		}
	}
}

void
mcp_done(struct mcp *m)
{
	while (m->pending) {
		struct mcp_pending *p = m->pending;

		m->pending = p->next;
		pending_free(p);
	}
	while (m->jobs) {
		struct mcp_job *j = m->jobs;

		m->jobs = j->next;
		job_free(m, j);
	}
	json_decref(m->info_cache);
	json_decref(m->info_langs);
	json_decref(m->info_waiting);
	json_decref(m->session_tombs);
	free(m->version);
	ab_pool_free(m->pool);
	m->pool = NULL;
	free(m->pol.state_dir);
	free(m->pol.env_dir);
	strv_done(&m->pol.req_policy);
	strv_done(&m->pol.preimport[0]);
	strv_done(&m->pol.preimport[1]);
	for (int *fd = &m->state_fd; fd <= &m->staging_fd; fd++)
		if (*fd >= 0)
			(void) close(*fd);
}

/* ---- stdin (src/mcp/input.h) ------------------------------------------------------------ */

struct line_ctx {
	struct mcp *m;
	struct mcp_parser *parser;
	struct mcp_reader *in;
};

/* What the requests being parsed, the queued runs' and the line being read hold. */
static size_t
held_now(struct mcp *m, struct mcp_reader *in, struct mcp_parser *parser)
{
	return m->held_jobs + (parser->running ? mcp_parser_held(parser) : 0) +
	       (in ? mcp_reader_held(in) : 0);
}

/* The most the next line may hold whole: --max-message, or what the byte budget leaves. */
static size_t
line_allow(struct mcp *m, struct mcp_reader *in, struct mcp_parser *parser)
{
	size_t others = held_now(m, NULL, parser), left, allow;

	(void) in;
	left = others < m->pol.max_pending ? m->pol.max_pending - others : 0;
	/* a long line holds up to 4 times its length while the parse thread has it; a short
	 * one (handled at once) gets in while anything is left */
	allow = left / 4;
	if (allow < MCP_INLINE_PARSE)
		allow = left < MCP_INLINE_PARSE ? left : MCP_INLINE_PARSE;
	return allow < m->pol.max_message ? allow : m->pol.max_message;
}

/* A line from the reader: handled now when short, parsed by the parse thread when long (its
 * buffer goes with it), refused from its skeleton when it could not be taken whole. */
static bool
take_line(void *arg, char *text, size_t len, size_t total, bool whole)
{
	struct line_ctx *lc = arg;
	struct mcp *m = lc->m;

	if (!whole) {
		size_t held = held_now(m, NULL, lc->parser);

		fprintf(stderr, "agentbox mcp: a message of %zu bytes refused: %s\n", total,
			total > m->pol.max_message ? "over --max-message"
						   : "over --max-pending-bytes");
		mcp_refuse(m, text, len, total, held);
		return false;
	}
	if (len <= MCP_INLINE_PARSE || !lc->parser->running) {
		mcp_handle_line(m, text, len);
		return false;
	}
	mcp_parser_submit(lc->parser, text, len);
	return true;
}

/* Messages the parse thread has parsed. */
static void
take_parsed(struct mcp *m, struct mcp_parser *parser)
{
	struct mcp_parsed *it;

	while (!m->quit && (it = mcp_parser_take(parser))) {
		json_t *msg = it->msg;

		it->msg = NULL;
		mcp_handle_json(m, msg, it->len, &it->err);
		mcp_parsed_free(it);
	}
}

/* The server's loop state: what poll(2) watches this turn, and who each fd belongs to. */
struct loop {
	int sfd;            /* SIGTERM, SIGINT, SIGHUP */
	bool in_eof;        /* stdin ended: no new calls, the runs are cancelled */
	int64_t next_tick;  /* retention and workspace expiry */
	struct pollfd *pfd; /* [0] stdin, [1] signals, [2] warm slots, then runs, probes, parser */
	struct mcp_job **who; /* the job of each pfd, or NULL */
	size_t n, parsed_at;
	struct mcp_reader in;
	struct mcp_parser parser;
};

/* The command line into m->pol. Returns -1 to go on, else the exit status. */
static int
parse_options(struct mcp *m, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "state-dir", required_argument, NULL, 0 },
		{ "max-runs", required_argument, NULL, 0 },
		{ "max-queue", required_argument, NULL, 0 },
		{ "max-sessions", required_argument, NULL, 0 },
		{ "languages", required_argument, NULL, 0 },
		{ "cap", required_argument, NULL, 0 },
		{ "env-dir", required_argument, NULL, 0 },
		{ "requirements", required_argument, NULL, 0 },
		{ "allow-packages", required_argument, NULL, 0 },
		{ "max-requirements", required_argument, NULL, 0 },
		{ "install-timeout", required_argument, NULL, 0 },
		{ "index-url", required_argument, NULL, 0 },
		{ "find-links", required_argument, NULL, 0 },
		{ "cache-max", required_argument, NULL, 0 },
		{ "keep-runs", required_argument, NULL, 0 },
		{ "keep-for", required_argument, NULL, 0 },
		{ "workspace-ttl", required_argument, NULL, 0 },
		{ "workspace-size", required_argument, NULL, 0 },
		{ "max-workspaces", required_argument, NULL, 0 },
		{ "file-size", required_argument, NULL, 0 },
		{ "files-size", required_argument, NULL, 0 },
		{ "image-size", required_argument, NULL, 0 },
		{ "max-images", required_argument, NULL, 0 },
		{ "read-size", required_argument, NULL, 0 },
		{ "text-size", required_argument, NULL, 0 },
		{ "wait", required_argument, NULL, 0 },
		{ "max-wait", required_argument, NULL, 0 },
		{ "max-message", required_argument, NULL, 0 },
		{ "max-pending-bytes", required_argument, NULL, 0 },
		{ "warm", required_argument, NULL, 0 },
		{ "preimport", required_argument, NULL, 0 },
		{ "preimport-node", required_argument, NULL, 0 },
		{ "warm-idle", required_argument, NULL, 0 },
		{ "config", required_argument, NULL, 0 },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	char msg[600] = "";
	int idx, c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", longopts, &idx)) != -1) {
		int r;

		if (c == 'h') {
			fputs(usage_text, stdout);
			return 0;
		}
		if (c != 0) {
			fputs(usage_text, stderr);
			return 2;
		}
		r = strcmp(longopts[idx].name, "config") == 0
			    ? policy_config(&m->pol, optarg, msg, sizeof(msg))
			    : policy_set(&m->pol, longopts[idx].name, optarg, msg, sizeof(msg));
		if (r < 0) {
			fprintf(stderr, "agentbox mcp: %s\n", msg);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "agentbox mcp: unexpected argument '%s'\n%s", argv[optind],
			usage_text);
		return 2;
	}
	return -1;
}

/* The state directory, the parse thread, the library's context, the warm slots, the signals.
 * Returns -1 to go on, else the exit status. */
static int
server_start(struct mcp *m, struct loop *l)
{
	char msg[600] = "";
	sigset_t set;

	if (mcp_state_open(m, msg, sizeof(msg)) < 0) {
		fprintf(stderr, "agentbox mcp: %s\n", msg);
		return 125;
	}
	mcp_reader_init(&l->in);
	if (mcp_parser_start(&l->parser) < 0) {
		fprintf(stderr, "agentbox mcp: cannot start the parse thread\n");
		return 125;
	}
	ctx = ab_context_new(NULL);
	{
		cleanup_free char *runs = xasprintf("%s/runs", m->pol.state_dir);

		(void) ab_context_set(ctx, "runs_dir", runs);
		/* one retention, the server's (--keep-runs, --keep-for): it removes a run and its
		 * record together, so the library prunes nothing of these runs on its own */
		(void) ab_context_set(ctx, "keep_runs", "0");
		(void) ab_context_set(ctx, "keep_age", "0");
		STRV_FOREACH (kv, &m->pol.req_policy) {
			cleanup_free char *k = xstrndup(*kv, strcspn(*kv, "="));

			(void) ab_context_set(ctx, k, *kv + strlen(k) + 1);
		}
	}
	if (m->pol.warm_slots > 0 && warm_start(m) < 0)
		return 125;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	(void) sigprocmask(SIG_BLOCK, &set, NULL);
	l->sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	signal(SIGPIPE, SIG_IGN);
	fprintf(stderr,
		"agentbox mcp %s: state in %s, at most %d runs at once, while their memory "
		"limits fit in %.1f GiB and their pids limits in %llu tasks\n",
		mcp_server_version(), m->pol.state_dir, m->pol.max_running,
		(double) m->pol.mem_budget / (1 << 30), (unsigned long long) m->pol.tasks_budget);
	retention(m);
	expire_workspaces(m);
	l->next_tick = now_ms() + TICK_MS;
	return -1;
}

/* Starts what can start, runs the timers; returns when poll must wake at the latest. */
static int64_t
loop_deadline(struct mcp *m, struct loop *l, int64_t now)
{
	bool more = start_queued(m);
	int64_t next = timers(m, now), ses = mcp_sessions_timers(m, now);

	if (ses < next)
		next = ses;
	if (more)
		next = now; /* the next queued run, after what came meanwhile */
	if (now >= l->next_tick) {
		retention(m);
		expire_workspaces(m);
		l->next_tick = now + TICK_MS;
	}
	if (l->next_tick < next)
		next = l->next_tick;
	if (m->pool) {
		int w = ab_pool_tick(m->pool);

		if (w >= 0 && now + w < next)
			next = now + w;
	}
	return next;
}

/* What poll watches this turn: stdin, signals, the warm slots, each running job's pidfd and
 * output pipes, sandbox_info's probes, the parse thread. */
static void
loop_pollset(struct mcp *m, struct loop *l)
{
	/* + sandbox_info's probes, the warm slots, the parse thread, the sessions */
	size_t max = 2 + 4 + mcp_sessions_pollset(m, NULL);

	for (struct mcp_job *j = m->jobs; j; j = j->next)
		max += 3;
	l->pfd = xcalloc(max, sizeof(*l->pfd));
	l->who = xcalloc(max, sizeof(*l->who));
	l->n = 0;
	l->pfd[l->n++] = (struct pollfd){ .fd = l->in_eof ? -1 : STDIN_FILENO, .events = POLLIN };
	l->pfd[l->n++] = (struct pollfd){ .fd = l->sfd, .events = POLLIN };
	/* news from a warm slot: the next ab_pool_tick takes it (who[] stays NULL) */
	l->pfd[l->n++] =
		(struct pollfd){ .fd = m->pool ? ab_pool_fd(m->pool) : -1, .events = POLLIN };
	for (struct mcp_job *j = m->jobs; j; j = j->next) {
		if (j->state != JOB_RUNNING)
			continue;
		l->who[l->n] = j;
		l->pfd[l->n++] = (struct pollfd){ .fd = ab_run_fd(j->h), .events = POLLIN };
		if (j->out_r >= 0) {
			l->who[l->n] = j;
			l->pfd[l->n++] = (struct pollfd){ .fd = j->out_r, .events = POLLIN };
		}
		if (j->err_r >= 0) {
			l->who[l->n] = j;
			l->pfd[l->n++] = (struct pollfd){ .fd = j->err_r, .events = POLLIN };
		}
	}
	for (int i = 0; i < 2; i++)
		if (m->info_runs[i])
			l->pfd[l->n++] = (struct pollfd){ .fd = ab_run_fd(m->info_runs[i]),
							  .events = POLLIN };
	l->parsed_at = l->n;
	l->pfd[l->n++] = (struct pollfd){ .fd = l->parser.running ? l->parser.wake[0] : -1,
					  .events = POLLIN };
	/* each session's (stepped every turn: mcp_sessions_step) */
	l->n += mcp_sessions_pollset(m, l->pfd + l->n);
}

/* Runs' output first, then their ends: a run's last words make its last progress. */
static void
loop_jobs(struct mcp *m, struct loop *l)
{
	for (size_t i = 2; i < l->parsed_at; i++) {
		struct mcp_job *j = l->who[i];

		if (!j && i == 2)
			continue; /* the warm slots' fd */
		if (!j) {         /* a sandbox_info probe */
			for (int k = 0; k < 2 && l->pfd[i].revents; k++)
				if (m->info_runs[k] && l->pfd[i].fd == ab_run_fd(m->info_runs[k])) {
					info_probe_done(m, k);
					l->pfd[i].revents = 0;
				}
			continue;
		}
		if (!l->pfd[i].revents || l->pfd[i].fd == ab_run_fd(j->h))
			continue;
		drain(j, l->pfd[i].fd == j->out_r ? &j->out_r : &j->err_r);
	}
	for (size_t i = 2; i < l->parsed_at && !m->quit; i++) {
		struct mcp_job *j = l->who[i];
		ab_result *res = NULL;
		ab_error *e = NULL;

		if (!j || !l->pfd[i].revents || l->pfd[i].fd != ab_run_fd(j->h))
			continue;
		if (j->out_r >= 0)
			drain(j, &j->out_r);
		if (j->err_r >= 0)
			drain(j, &j->err_r);
		if (ab_run_wait(j->h, &res, &e) < 0)
			res = NULL;
		j->h = NULL;
		/* the pending and the job lists change here; who[] keeps pointers to jobs that
		 * may be gone: stop after one and poll again */
		job_finished(m, j, res, res ? NULL : e);
		break;
	}
}

/* The end of stdin: nobody is left to answer; running runs are cancelled, queued ones and
 * pending waits dropped. */
static void
input_ended(struct mcp *m, struct loop *l)
{
	l->in_eof = true;
	fprintf(stderr, "agentbox mcp: end of input: cancelling every run\n");
	mcp_parser_stop(&l->parser);
	/* the client left: its sessions end with it */
	mcp_sessions_close_all(m, "the client disconnected");
	for (struct mcp_job *j = m->jobs; j; j = j->next)
		if (j->state == JOB_RUNNING)
			(void) ab_run_cancel(j->h);
	while (m->pending) {
		struct mcp_pending *p = m->pending;

		m->pending = p->next;
		pending_free(p);
	}
	for (struct mcp_job **pp = &m->jobs; *pp;) {
		struct mcp_job *j = *pp;

		if (j->state == JOB_QUEUED) {
			*pp = j->next;
			if (j->staged)
				mcp_staging_remove(m, j->id);
			m->n_queued--;
			job_free(m, j);
		} else {
			pp = &j->next;
		}
	}
}

/* What came on stdin: fed to the reader, which hands whole lines on (take_line). */
static void
loop_stdin(struct mcp *m, struct loop *l, short revents)
{
	struct line_ctx lc = { .m = m, .parser = &l->parser, .in = &l->in };
	char chunk[65536];
	ssize_t got = revents & POLLNVAL ? 0 : read(STDIN_FILENO, chunk, sizeof(chunk));

	if (got == 0 || (got < 0 && errno != EINTR && errno != EAGAIN))
		input_ended(m, l);
	if (got > 0)
		mcp_reader_feed(&l->in, chunk, (size_t) got, line_allow(m, &l->in, &l->parser),
				take_line, &lc);
}

/* One turn of the loop. Returns false when the server is to stop. */
static bool
loop_turn(struct mcp *m, struct loop *l)
{
	int64_t now = now_ms(), next = loop_deadline(m, l, now);
	int r;

	if (m->quit || (l->in_eof && !m->jobs))
		return false;
	loop_pollset(m, l);
	r = poll(l->pfd, l->n, (int) (next > now ? next - now : 0));
	if (r < 0 && errno != EINTR)
		m->quit = true;
	if (r > 0 && (l->pfd[1].revents & POLLIN)) {
		struct signalfd_siginfo si;

		if (read(l->sfd, &si, sizeof(si)) == (ssize_t) sizeof(si)) {
			fprintf(stderr, "agentbox mcp: signal %u: cancelling every run\n",
				si.ssi_signo);
			m->quit = true;
		}
	}
	if (r > 0)
		loop_jobs(m, l);
	if (r >= 0 && !m->quit)
		mcp_sessions_step(m);
	if (r > 0 && (l->pfd[l->parsed_at].revents & POLLIN) && !m->quit)
		take_parsed(m, &l->parser);
	if (r > 0 && (l->pfd[0].revents & (POLLIN | POLLHUP | POLLERR | POLLNVAL)) && !m->quit)
		loop_stdin(m, l, l->pfd[0].revents);
	free(l->pfd);
	free(l->who);
	l->pfd = NULL;
	l->who = NULL;
	return !m->quit;
}

int
mcp_main(int argc, char **argv)
{
	struct mcp m;
	struct loop l = { .sfd = -1, .parser = { .running = false } };
	int rc;

	/* a closed stdin/stdout/stderr stays taken (/dev/null): no file of ours may land there */
	for (int fd = 0; fd < 3; fd++)
		if (fcntl(fd, F_GETFD) < 0 && open("/dev/null", O_RDWR) != fd)
			return 125;
	mcp_init(&m);
	m.send = send_stdout;
	rc = parse_options(&m, argc, argv);
	if (rc < 0)
		rc = server_start(&m, &l);
	if (rc < 0) {
		while (loop_turn(&m, &l))
			;
		shutdown_all(&m);
		rc = 0;
	}
	mcp_parser_stop(&l.parser);
	mcp_reader_done(&l.in);
	if (l.sfd >= 0)
		(void) close(l.sfd);
	mcp_done(&m);
	ab_context_free(ctx);
	ctx = NULL;
	return rc;
}

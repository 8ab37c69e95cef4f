#include "report.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/stat.h>

#include "../fs/hostfs.h"
#include "../util/fdutil.h"
#include "../util/macro.h"
#include "../util/utf8.h"
#include "../util/xalloc.h"
#include "config.h"
#include "options.h"
#include "words.h"

static const char *const status_names[AB_STATUS_COUNT] = {
	[AB_STATUS_EXITED] = "exited",
	[AB_STATUS_SIGNALED] = "signaled",
	[AB_STATUS_TIMEOUT] = "timeout",
	[AB_STATUS_OOM] = "oom",
	[AB_STATUS_PIDS_LIMIT] = "pids_limit",
	[AB_STATUS_CPU_TIME_LIMIT] = "cpu_time_limit",
	[AB_STATUS_DISK_LIMIT] = "disk_limit",
	[AB_STATUS_FILE_SIZE_LIMIT] = "file_size_limit",
	[AB_STATUS_OUTPUT_LIMIT] = "output_limit",
	[AB_STATUS_EXEC_FAILED] = "exec_failed",
	[AB_STATUS_INTERRUPTED] = "interrupted",
	[AB_STATUS_SETUP_ERROR] = "setup_error",
	[AB_STATUS_USAGE_ERROR] = "usage_error",
	[AB_STATUS_DRY_RUN] = "dry_run",
};

const char *
result_status_name(enum ab_status s)
{
	return s < AB_STATUS_COUNT ? status_names[s] : "unknown";
}

void
result_init(struct ab_record *r, struct ab_run_opts *opts)
{
	memset(r, 0, sizeof(*r));
	r->status = AB_STATUS_SETUP_ERROR;
	r->exit_code = -1;
	r->cpu_ms = -1;
	r->max_rss_kib = -1;
	r->kill_to_reaped_ms = -1;
	r->started_unix_ms = -1; /* null until a run started, never 0 */
	r->wall_ms = -1;
	r->supervisor_max_rss_kib = -1;
	r->supervisor_fds_left = -1;
	r->opts = opts;
	r->usage = (struct ab_usage){ -1, -1, -1, -1, -1, -1, -1 };
	r->sandbox_host_uid = (uid_t) -1;
	r->run_dir_fd = -1;
}

void
result_done(struct ab_record *r)
{
	free(r->out.buf);
	free(r->err.buf);
	free(r->message);
	free(r->fix);
	free(r->hint);
	free(r->run_dir);
	if (r->run_dir_fd >= 0)
		(void) close(r->run_dir_fd);
	free(r->run_id);
	free(r->workspace);
	free(r->script);
	free(r->interpreter);
	json_decref(r->files);
	json_decref(r->files_summary);
	json_decref(r->collected);
	json_decref(r->environment);
	json_decref(r->pre_run);
	json_decref(r->inputs);
	for (int i = 0; i < AB_LIM_COUNT; i++)
		free(r->limits[i].note);
	for (size_t i = 0; i < r->n_prot; i++)
		free(r->prot[i].detail);
	strv_done(&r->warnings);
	strv_done(&r->defaults_not_applied);
	strv_done(&r->hidden_files);
	strv_done(&r->limits_hit);
	memset(r, 0, sizeof(*r));
}

void
result_warn(struct ab_record *r, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	strv_vpushf(&r->warnings, fmt, ap);
	va_end(ap);
}

void
result_default_unapplied(struct ab_record *r, const char *name, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	strv_vpushf(&r->warnings, fmt, ap);
	va_end(ap);
	strv_push(&r->defaults_not_applied, name);
}

void
result_protect(struct ab_record *r, const char *name, bool enforced, const char *fmt, ...)
{
	va_list ap;
	char *s = NULL;

	if (r->n_prot >= ARRAY_SIZE(r->prot))
		return;
	if (fmt) {
		va_start(ap, fmt);
		if (vasprintf(&s, fmt, ap) < 0)
			s = NULL;
		va_end(ap);
	}
	r->prot[r->n_prot++] = (struct ab_protection){ name, enforced, s };
}

void
result_set_message(struct ab_record *r, const char *msg, const char *fix)
{
	free(r->message);
	free(r->fix);
	r->message = msg && *msg ? xstrdup(msg) : NULL;
	r->fix = fix && *fix ? xstrdup(fix) : NULL;
}

static void
keep(struct ab_stream *s, const char *p, size_t n)
{
	size_t head = s->inline_max / 2, ring = s->inline_max - head;

	if (!s->excerpt) {
		size_t room = s->inline_max - s->len, take = n < room ? n : room;

		if (take > 0) {
			if (s->len + take > s->buf_cap) {
				size_t c = s->buf_cap ? 2 * s->buf_cap : 4096;

				while (c < s->len + take)
					c *= 2;
				if (c > s->inline_max)
					c = s->inline_max;
				s->buf = xrealloc(s->buf, c);
				s->buf_cap = c;
			}
			memcpy(s->buf + s->len, p, take);
			s->len += take;
			p += take;
			n -= take;
		}
		if (n == 0)
			return;
		/* past the cap: buf is full, and [head, inline_max) is the ring from now on,
		 * its oldest byte at ring_pos 0 */
		s->excerpt = true;
		s->ring_pos = 0;
	}
	if (ring == 0)
		return;
	if (n >= ring) {
		memcpy(s->buf + head, p + n - ring, ring);
		s->ring_pos = 0;
		return;
	}
	{
		size_t first = ring - s->ring_pos < n ? ring - s->ring_pos : n;

		memcpy(s->buf + head + s->ring_pos, p, first);
		memcpy(s->buf + head, p + first, n - first);
		s->ring_pos = (s->ring_pos + n) % ring;
	}
}

void
stream_keep(struct ab_stream *s, const char *p, size_t n)
{
	s->captured += n;
	keep(s, p, n);
}

char *
stream_inline_text(const struct ab_stream *s, size_t *ret_len)
{
	size_t h = s->inline_max / 2, ring = s->inline_max - h;
	char *t = xmalloc(s->len + 1);

	if (!s->excerpt || ring == 0) {
		memcpy(t, s->buf ? s->buf : "", s->len);
		*ret_len = s->len;
	} else {
		memcpy(t, s->buf, h);
		memcpy(t + h, s->buf + h + s->ring_pos, ring - s->ring_pos);
		memcpy(t + h + ring - s->ring_pos, s->buf + h, s->ring_pos);
		*ret_len = h + ring;
	}
	t[*ret_len] = '\0';
	return t;
}

void
stream_keep_past_cap(struct ab_stream *s, const char *p, size_t n)
{
	s->past_cap += n;
	keep(s, p, n);
}

/* Where to end p[0, len) so that it does not stop inside a UTF-8 sequence: len, or the start
 * of a sequence its last bytes leave incomplete. Like the relay's sanitiser, which holds such
 * a sequence until the next read decides it, an excerpt never splits a character: the cut
 * would otherwise show as U+FFFD and set text_lossy for bytes that are fine. */
static size_t
utf8_end(const char *p, size_t len)
{
	for (size_t k = 1; k <= 3 && k <= len; k++) {
		unsigned char c = (unsigned char) p[len - k];
		size_t need;

		if ((c & 0xc0) == 0x80)
			continue; /* a continuation byte: look further back */
		if (c < 0x80)
			return len;
		need = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
		return need > k ? len - k : len;
	}
	return len;
}

/* Continuation bytes at the start of p (at most 3): the end of a character the cut split. */
static size_t
utf8_start(const char *p, size_t len)
{
	size_t k = 0;

	while (k < 3 && k < len && ((unsigned char) p[k] & 0xc0) == 0x80)
		k++;
	return k;
}

static json_t *
stream_json(const struct ab_stream *s, const char *name, const struct ab_record *r)
{
	size_t head = s->len, tail_len = 0, skip = 0, len, raw_len;
	cleanup_free char *raw = NULL, *path = NULL;
	uint64_t elided = 0, dropped = 0;
	char *text;
	bool lossy;
	json_t *o;

	if (s->file_kept && r->run_dir)
		path = xasprintf("%s/%s", r->run_dir, name);
	if (!s->excerpt) {
		text = utf8_sanitize(s->buf ? s->buf : "", s->len, &len, &lossy);
	} else {
		/* head + a marker line + the ring in order, cut at character boundaries */
		size_t h = s->inline_max / 2, ring = s->inline_max - h;
		cleanup_free char *marker = NULL;
		char *q;

		head = utf8_end(s->buf, h);
		raw = xmalloc(s->inline_max + 1);
		if (ring > 0) { /* --inline-output 0: no buffer at all */
			memcpy(raw, s->buf + h + s->ring_pos, ring - s->ring_pos);
			memcpy(raw + ring - s->ring_pos, s->buf + h, s->ring_pos);
		}
		skip = utf8_start(raw, ring);
		tail_len = ring - skip;
		/* the ring ends where the stream does, or (past the cap with kill) the capture */
		elided = s->captured + s->past_cap - head - tail_len;
		/* past the cap with truncate: what lies between the capture and the tail */
		dropped =
			s->bytes - s->captured - (tail_len < s->past_cap ? tail_len : s->past_cap);
		if (path && dropped > 0)
			marker = xasprintf("%s[agentbox: %" PRIu64
					   " bytes of %s elided here: the first %" PRIu64
					   " bytes are in %s, the %" PRIu64
					   " after them (past the output limit) were dropped]\n",
					   head > 0 && s->buf[head - 1] != '\n' ? "\n" : "", elided,
					   name, s->captured, path, dropped);
		else if (path)
			marker = xasprintf("%s[agentbox: %" PRIu64
					   " bytes of %s elided here; all %" PRIu64
					   " captured bytes are in %s]\n",
					   head > 0 && s->buf[head - 1] != '\n' ? "\n" : "", elided,
					   name, s->captured, path);
		else
			marker = xasprintf(
				"%s[agentbox: %" PRIu64 " bytes of %s elided here and not "
				"kept (see warnings)]\n",
				head > 0 && s->buf[head - 1] != '\n' ? "\n" : "", elided, name);
		raw_len = head + strlen(marker) + tail_len;
		q = xmalloc(raw_len);
		if (head > 0)
			memcpy(q, s->buf, head);
		memcpy(q + head, marker, strlen(marker));
		memcpy(q + head + strlen(marker), raw + skip, tail_len);
		free(raw);
		raw = q;
		text = utf8_sanitize(raw, raw_len, &len, &lossy);
	}
	if (!s->excerpt)
		dropped = s->bytes - s->captured; /* read past the cap and not kept (kill) */
	o = json_pack("{s:I, s:I, s:b, s:s%, s:b, s:o, s:I, s:I, s:I, s:I}", "bytes",
		      (json_int_t) s->bytes, "captured_bytes", (json_int_t) s->captured,
		      "truncated", s->truncated, "text", text, len, "text_lossy", lossy,
		      "relay_dropped_bytes",
		      s->relayed ? json_integer((json_int_t) s->relay_dropped) : json_null(),
		      "head_bytes", (json_int_t) (s->excerpt ? head : s->captured), "tail_bytes",
		      (json_int_t) tail_len, "elided_bytes", (json_int_t) elided, "dropped_bytes",
		      (json_int_t) dropped);
	json_object_set_new(o, "file",
			    path ? json_pack("{s:s, s:I, s:s}", "path", path, "bytes",
					     (json_int_t) s->captured, "sha256", s->file_sha256)
				 : json_null());
	free(text);
	return o;
}

static json_t *
int_or_null(int64_t v)
{
	return v < 0 ? json_null() : json_integer(v);
}

static json_t *
str_or_null(const char *s)
{
	return s ? json_string(s) : json_null();
}

/* Text for people, in the words of the interface that asked for the run (words.h): the
 * command line's flags, or a spec's keys. */
static json_t *
words_json(const struct ab_record *r, const char *s)
{
	cleanup_free char *t = NULL;

	if (!s)
		return json_null();
	if (!r->opts || r->opts->flag_words)
		return json_string(s);
	t = words_for_spec(s);
	return json_string(t);
}

static json_t *
words_strv_json(const struct ab_record *r, const struct strv *sv)
{
	json_t *a = json_array();

	STRV_FOREACH (s, sv)
		json_array_append_new(a, words_json(r, *s));
	return a;
}

static json_t *
limits_json(const struct ab_record *r)
{
	json_t *o = json_object();

	for (int i = 0; i < AB_LIM_COUNT; i++) {
		const struct ab_limit_result *l = &r->limits[i];
		const struct ab_limit *req = r->opts ? &r->opts->limits[i] : NULL;
		json_t *e;

		if (!l->applies)
			continue;
		e = json_pack("{s:o, s:b, s:o, s:o, s:b}", "requested",
			      req ? json_integer((json_int_t) req->value) : json_null(), "explicit",
			      req ? req->set : false, "enforced",
			      l->mechanism ? json_integer((json_int_t) l->enforced) : json_null(),
			      "mechanism", str_or_null(l->mechanism), "whole_run", l->enforced_ok);
		if (l->note)
			json_object_set_new(e, "note", words_json(r, l->note));
		json_object_set_new(o, cli_limit_name((enum ab_limit_id) i), e);
	}
	return o;
}

static json_t *
strv_json(const struct strv *sv)
{
	json_t *a = json_array();

	STRV_FOREACH (s, sv)
		json_array_append_new(a, json_string(*s));
	return a;
}

json_t *
report_build(const struct ab_record *r)
{
	json_t *o = json_object();
	json_t *prot = json_object();
	json_t *usage;

	json_object_set_new(o, "schema_version", json_integer(AB_REPORT_SCHEMA_VERSION));
	json_object_set_new(o, "agentbox_version", json_string(AB_VERSION));
	json_object_set_new(o, "status", json_string(result_status_name(r->status)));
	json_object_set_new(o, "exit_code", int_or_null(r->exit_code));
	json_object_set_new(o, "signal", r->signal > 0 ? json_integer(r->signal) : json_null());
	json_object_set_new(
		o, "signal_name",
		r->signal > 0 ? json_string(sigabbrev_np(r->signal) ? sigabbrev_np(r->signal) : "?")
			      : json_null());
	json_object_set_new(o, "agentbox_exit", json_integer(r->agentbox_exit));
	json_object_set_new(o, "message", words_json(r, r->message));
	json_object_set_new(o, "fix", words_json(r, r->fix));
	json_object_set_new(o, "hint", words_json(r, r->hint));
	json_object_set_new(o, "limits_hit", strv_json(&r->limits_hit));
	json_object_set_new(o, "started_unix_ms", int_or_null(r->started_unix_ms));
	json_object_set_new(o, "wall_ms", int_or_null(r->wall_ms));
	json_object_set_new(o, "cpu_ms", int_or_null(r->cpu_ms));
	json_object_set_new(o, "max_rss_kib", int_or_null(r->max_rss_kib));
	json_object_set_new(o, "kill_to_reaped_ms", int_or_null(r->kill_to_reaped_ms));
	json_object_set_new(o, "agentbox_max_rss_kib", int_or_null(r->supervisor_max_rss_kib));
	json_object_set_new(o, "agentbox_fds_left", int_or_null(r->supervisor_fds_left));
	json_object_set_new(o, "run_id", str_or_null(r->run_id));
	json_object_set_new(o, "warm", json_boolean(r->warm));
	json_object_set_new(o, "script", str_or_null(r->script));
	json_object_set_new(
		o, "lang", r->lang == AB_LANG_AUTO ? json_null() : json_string(lang_name(r->lang)));
	json_object_set_new(o, "interpreter", str_or_null(r->interpreter));
	json_object_set_new(o, "stdout", stream_json(&r->out, "stdout", r));
	json_object_set_new(o, "stderr", stream_json(&r->err, "stderr", r));
	json_object_set_new(o, "run_dir", str_or_null(r->run_dir));
	json_object_set_new(o, "run_dir_kept", json_boolean(r->run_dir_kept));
	json_object_set_new(o, "workspace", str_or_null(r->workspace));
	json_object_set_new(o, "files", r->files ? json_incref(r->files) : json_array());
	if (r->files_summary)
		json_object_set_new(o, "files_summary", json_incref(r->files_summary));
	if (r->inputs)
		json_object_set_new(o, "inputs", json_incref(r->inputs));
	if (r->collected)
		json_object_set_new(o, "collected", json_incref(r->collected));
	if (r->environment)
		json_object_set_new(o, "environment", json_incref(r->environment));
	if (r->pre_run)
		json_object_set_new(o, "pre_run", json_incref(r->pre_run));
	json_object_set_new(o, "limits", limits_json(r));
	usage = json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "memory_peak_bytes",
			  int_or_null(r->usage.memory_peak_bytes), "cpu_ms",
			  int_or_null(r->usage.cpu_ms), "tasks_peak",
			  int_or_null(r->usage.tasks_peak), "workspace_bytes",
			  int_or_null(r->usage.workspace_bytes), "workspace_entries",
			  int_or_null(r->usage.workspace_entries), "oom_kills",
			  int_or_null(r->usage.oom_kills), "pids_refused",
			  int_or_null(r->usage.pids_refused));
	json_object_set_new(o, "usage", usage);
	for (size_t i = 0; i < r->n_prot; i++) {
		json_t *e = json_pack("{s:b}", "enforced", r->prot[i].enforced);

		if (r->prot[i].detail)
			json_object_set_new(e, "detail", words_json(r, r->prot[i].detail));
		if (r->net_mode && strcmp(r->prot[i].name, "network") == 0)
			json_object_set_new(e, "mode", json_string(r->net_mode));
		json_object_set_new(prot, r->prot[i].name, e);
	}
	json_object_set_new(o, "sandbox", prot);
	json_object_set_new(o, "sandbox_host_uid",
			    r->sandbox_host_uid == (uid_t) -1 ? json_null()
							      : json_integer(r->sandbox_host_uid));
	json_object_set_new(o, "workspace_mode",
			    r->workspace_mode ? json_string(r->workspace_mode) : json_null());
	json_object_set_new(o, "warnings", words_strv_json(r, &r->warnings));
	json_object_set_new(o, "defaults_not_applied", strv_json(&r->defaults_not_applied));
	json_object_set_new(o, "hidden_files", strv_json(&r->hidden_files));
	return o;
}

char *
report_dumps(const json_t *report, size_t *ret_len)
{
	char *text = json_dumps(report, JSON_INDENT(2) | JSON_SORT_KEYS);
	size_t len;

	if (!text)
		return NULL;
	len = strlen(text);
	text = xrealloc(text, len + 2);
	text[len++] = '\n';
	text[len] = '\0';
	*ret_len = len;
	return text;
}

int
report_patch_int(char **text, size_t *len, const char *key, int64_t v)
{
	cleanup_free char *needle = xasprintf("\n  \"%s\": ", key);
	char num[32], *at = strstr(*text, needle), *end;
	size_t n, old, off;

	if (!at)
		return -ENOENT;
	at += strlen(needle);
	end = at + strspn(at, "-0123456789nul"); /* a number or null */
	n = v < 0 ? (size_t) snprintf(num, sizeof(num), "null")
		  : (size_t) snprintf(num, sizeof(num), "%jd", (intmax_t) v);
	old = (size_t) (end - at);
	off = (size_t) (at - *text);
	if (n > old) {
		*text = xrealloc(*text, *len + n - old + 1);
		at = *text + off;
		end = at + old;
	}
	memmove(at + n, end, *len - (off + old) + 1); /* the tail and its NUL */
	memcpy(at, num, n);
	*len = *len - old + n;
	return 0;
}

/* Is a link's text one of this process's own fds (/proc/self/fd/N, /proc/PID/fd/N, /dev/fd/N:
 * what /dev/stdout leads to)? Opening it reopens a file the caller gave us. */
static bool
own_fd_link(const char *t)
{
	char self[48];
	size_t n = 0;

	snprintf(self, sizeof(self), "/proc/%d/fd/", (int) getpid());
	if (strncmp(t, "/proc/self/fd/", 14) == 0)
		n = 14;
	else if (strncmp(t, "/dev/fd/", 8) == 0)
		n = 8;
	else if (strncmp(t, self, strlen(self)) == 0)
		n = strlen(self);
	return n > 0 && t[n] && strspn(t + n, "0123456789") == strlen(t + n);
}

/* An existing --report PATH that is not a regular file (a review during issue 24: a rename
 * over /dev/null made it a regular file): a character device or a FIFO is opened and written
 * to, and so is what a chain of links leads to when every link on it is root's or the
 * caller's and every directory on the way is reached by hostfs's trusted walk (a link another
 * user could plant or swap never points agentbox's write elsewhere); a regular file at the
 * end is written over from its start, as a shell's > does. The name itself is never replaced.
 * Returns the fd, or a usage error. */
static int
dest_open_special(int dir, const char *base, const char *path, struct ab_err *err)
{
	cleanup_fd int cur = fcntl(dir, F_DUPFD_CLOEXEC, 3);
	cleanup_free char *name = xstrdup(base);
	struct stat st;
	int fd = -1;

	for (int hop = 0; hop < 16 && fd < 0 && cur >= 0; hop++) {
		char target[PATH_MAX];
		cleanup_free char *abs = NULL, *next = NULL;
		ssize_t n;
		int nd;

		if (fstatat(cur, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			break;
		if (!S_ISLNK(st.st_mode)) {
			if (!S_ISCHR(st.st_mode) && !S_ISFIFO(st.st_mode) && !S_ISREG(st.st_mode)) {
				ab_err_usage(err, "--report '%s' %s not a regular file", path,
					     hop ? "leads to something" : "exists and is");
				return ab_err_fix(err,
						  "pass a new file name, a regular file, a "
						  "character device or a FIFO, or - for stdout");
			}
			/* O_NONBLOCK: a FIFO no one reads is an error now, not a hang */
			fd = openat(cur, name,
				    O_WRONLY | O_NOCTTY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
			break;
		}
		if (st.st_uid != 0 && st.st_uid != geteuid()) {
			ab_err_usage(err,
				     "--report '%s': a symbolic link of another user's (uid %u) "
				     "on the way",
				     path, (unsigned) st.st_uid);
			return ab_err_fix(err, "pass a path of yours, or - for stdout");
		}
		n = readlinkat(cur, name, target, sizeof(target) - 1);
		if (n <= 0)
			break;
		target[n] = '\0';
		if (own_fd_link(target)) {
			fd = open(target, O_WRONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
			break;
		}
		if (target[0] != '/') {
			cleanup_free char *here = hostfs_fd_path(cur);

			if (!here)
				break;
			abs = xasprintf("%s/%s", here, target);
		}
		nd = hostfs_open_parent(abs ? abs : target, 0, "--report", &next, err);
		if (nd < 0) {
			err->exit = AB_EXIT_USAGE;
			return ab_err_fix(err, "pass a path of yours, or - for stdout");
		}
		(void) close(cur);
		cur = nd;
		free(name);
		name = steal_ptr(&next);
	}
	if (fd < 0) {
		ab_err_usage(err, "--report '%s': cannot open it for writing: %s", path,
			     errno == ENXIO ? "a FIFO with no reader"
					    : strerror(errno ? errno : ELOOP));
		return ab_err_fix(err, "pass a file name, or - for stdout");
	}
	if (fstat(fd, &st) < 0 ||
	    !(S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode) || S_ISREG(st.st_mode))) {
		(void) close(fd);
		ab_err_usage(err, "--report '%s' leads to something that is not a file", path);
		return ab_err_fix(err, "pass a file name, or - for stdout");
	}
	(void) fd_set_nonblock(fd, 0);
	return fd;
}

int
report_dest_open(const char *path, struct ab_report_dest *d, struct ab_err *err)
{
	cleanup_fd int parent = -1, dir = -1;
	cleanup_free char *base = NULL;
	struct stat st;

	d->dirfd = -1;
	d->base = NULL;
	d->direct = false;
	d->direct_fd = -1;
	if (strcmp(path, "-") == 0) {
		d->to_stdout = true;
		return 0;
	}
	d->to_stdout = false;
	/* the directory once (only trusted symlinks), then the file relative to it */
	parent = hostfs_open_parent(path, 0, "--report", &base, err);
	if (parent < 0) {
		err->exit = AB_EXIT_USAGE;
		return ab_err_fix(err, "pass --report a file in a directory that exists");
	}
	dir = openat(parent, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dir < 0)
		return ab_err_usage(err, "--report '%s': cannot open its directory: %s", path,
				    strerror(errno));
	if (fstatat(dir, base, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)) {
		ab_err_usage(err, "--report '%s' is a directory", path);
		return ab_err_fix(err, "pass a file name, e.g. '%s/report.json'", path);
	}
	if (fstatat(dir, base, &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISREG(st.st_mode)) {
		int r = dest_open_special(dir, base, path, err);

		if (r < 0)
			return r;
		d->direct = true;
		d->direct_fd = r;
		return 0;
	}
	if (faccessat(dir, ".", W_OK, AT_EACCESS) < 0) {
		ab_err_usage(err, "--report '%s': its directory is not writable: %s", path,
			     strerror(errno));
		return ab_err_fix(err, "pass --report a file in a directory you can write");
	}
	d->dirfd = steal_fd(&dir);
	d->base = steal_ptr(&base);
	return 0;
}

void
report_dest_done(struct ab_report_dest *d)
{
	if (d->direct && d->direct_fd >= 0)
		(void) close(d->direct_fd);
	d->direct = false;
	if (d->dirfd >= 0)
		(void) close(d->dirfd);
	free(d->base);
	d->dirfd = -1;
	d->base = NULL;
}

int
report_write_at(const struct ab_report_dest *d, const char *text, size_t len)
{
	char tmp[64];
	cleanup_fd int fd = -1;
	int r = -EEXIST;

	struct stat st;

	if (d->to_stdout)
		return write_all(STDOUT_FILENO, text, len);
	if (d->direct) {
		/* a regular file a link leads to is written over from its start */
		if (fstat(d->direct_fd, &st) == 0 && S_ISREG(st.st_mode) &&
		    (ftruncate(d->direct_fd, 0) < 0 || lseek(d->direct_fd, 0, SEEK_SET) < 0))
			return -errno;
		return write_all(d->direct_fd, text, len);
	}
	/* what is there now must still be ours to replace: never a device, FIFO or socket put
	 * there since the destination was opened (nor a link: written through when it was there
	 * at the start) */
	if (fstatat(d->dirfd, d->base, &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISREG(st.st_mode))
		return -EPERM;
	/* a fresh temp name beside it (O_EXCL, never through a link), then one renameat */
	for (int i = 0; i < 100 && fd < 0; i++) {
		uint64_t rnd = (uint64_t) now_ns() ^ ((uint64_t) getpid() << 32) ^ (uint64_t) i;

		snprintf(tmp, sizeof(tmp), ".agentbox-report-%016llx.tmp",
			 (unsigned long long) rnd);
		fd = openat(d->dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			    0644);
		if (fd < 0 && errno != EEXIST)
			return -errno;
	}
	if (fd < 0)
		return r;
	r = write_all(fd, text, len);
	if (r == 0 && renameat(d->dirfd, tmp, d->dirfd, d->base) < 0)
		r = -errno;
	if (r < 0)
		(void) unlinkat(d->dirfd, tmp, 0);
	return r;
}

int
report_write(const char *path, const json_t *report)
{
	struct ab_report_dest d;
	struct ab_err err = { 0 };
	cleanup_free char *text = NULL;
	size_t len = 0;
	int r;

	text = report_dumps(report, &len);
	if (!text)
		return -ENOMEM;
	r = report_dest_open(path, &d, &err);
	if (r < 0)
		return r;
	r = report_write_at(&d, text, len);
	report_dest_done(&d);
	return r;
}

/* sessions.c: the server's sessions (docs/mcp.md "Sessions"). A session is one live sandbox
 * of the library's (ab_session_*), started by create_session, fed cells by run_code with its
 * session_id, ended by close_session, by its idle timeout (the library ends it in
 * ab_session_step; it is then closed here and forgotten) or by the client leaving (the end of
 * stdin closes every session). Everything is asynchronous in the server's one loop: each
 * session's fd is polled, every session stepped each turn, its deadline
 * (ab_session_timeout_ms) taken into the poll's timeout.
 *
 * A session's id is the library's (random, 64 bits) and lives in this process's table only:
 * another connection (another server process) cannot name it. One call at a time waits on a
 * session: its create_session until it is ready, or the run_code of its running cell. Live
 * sessions count against --max-sessions and, by their memory and pids limits, against the
 * budgets runs are admitted by (struct mcp_policy). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../spec/spec.h"
#include "../util/clock.h"
#include "../util/macro.h"
#include "../util/xalloc.h"
#include "agentbox/agentbox.h"
#include "mcp.h"

#define PROGRESS_MS 1000
#define MAX_TOMBS   64 /* sessions gone whose end a later call is told */

struct mcp_session {
	struct mcp_session *next;
	ab_session *s;
	char id[40];
	char lang[8];
	char staging[MCP_ID_LEN + 1]; /* its files on their way in ("": none) */
	uint64_t mem, tasks;          /* its limits, counted while it is live */
	bool counted;
	bool creating;      /* its create_session waits for it to be ready */
	bool busy;          /* a cell runs */
	struct mcp_req req; /* the call waiting (id NULL: none, or it was cancelled) */
	int64_t since_ms, last_progress_ms, ended_ms;
	double last_progress;
	uint64_t idle_ms; /* an ended session is forgotten after this long */
};

static void
req_set(struct mcp_req *dst, const struct mcp_req *src)
{
	dst->id = json_incref(src->id);
	dst->token = json_incref(src->token);
	dst->modern = src->modern;
	dst->bytes = 0;
}

static void
req_clear(struct mcp_req *r)
{
	json_decref(r->id);
	json_decref(r->token);
	memset(r, 0, sizeof(*r));
}

/* Answers the call waiting on the session, if any (result taken over). */
static void
answer(struct mcp *m, struct mcp_session *ss, json_t *result)
{
	if (ss->req.id)
		mcp_reply(m, &ss->req, result);
	else
		json_decref(result);
	req_clear(&ss->req);
}

static struct mcp_session *
find(const struct mcp *m, const char *sid)
{
	for (struct mcp_session *ss = m->sessions; ss; ss = ss->next)
		if (sid && strcmp(ss->id, sid) == 0)
			return ss;
	return NULL;
}

static void
count(struct mcp *m, struct mcp_session *ss, bool on)
{
	if (ss->counted == on)
		return;
	ss->counted = on;
	if (on) {
		m->mem_running += ss->mem;
		m->tasks_running += ss->tasks;
	} else {
		m->mem_running -= ss->mem;
		m->tasks_running -= ss->tasks;
	}
}

size_t
mcp_sessions_count(const struct mcp *m)
{
	size_t n = 0;

	for (const struct mcp_session *ss = m->sessions; ss; ss = ss->next)
		n += ss->counted;
	return n;
}

static void
tomb(struct mcp *m, const char *id, const char *why)
{
	if (!m->session_tombs)
		m->session_tombs = json_array();
	if (json_array_size(m->session_tombs) >= MAX_TOMBS)
		json_array_remove(m->session_tombs, 0);
	json_array_append_new(m->session_tombs, json_pack("{s:s, s:s}", "id", id, "why", why));
}

/* Why a call naming sid finds no session: how it went, or that it is not this server's. */
static json_t *
unknown(struct mcp *m, const char *sid)
{
	size_t i;
	json_t *t;

	json_array_foreach(m->session_tombs, i, t)
	{
		if (strcmp(json_string_value(json_object_get(t, "id")) ?: "", sid) == 0)
			return mcp_result_error(
				"session %s is gone: %s; call create_session for a new one", sid,
				json_string_value(json_object_get(t, "why")) ?: "");
	}
	return mcp_result_error("no session '%s' on this server (a session belongs to the "
				"connection that created it; create_session makes one)",
				sid);
}

/* Closes and forgets ss (its report: *ret_report when asked). */
static void
drop(struct mcp *m, struct mcp_session *ss, const char *why, json_t **ret_report)
{
	ab_result *res = NULL;
	ab_error *e = NULL;

	for (struct mcp_session **pp = &m->sessions; *pp; pp = &(*pp)->next)
		if (*pp == ss) {
			*pp = ss->next;
			break;
		}
	count(m, ss, false);
	if (ab_session_close(ss->s, &res, &e) < 0) {
		fprintf(stderr, "agentbox mcp: session %s: %s\n", ss->id, ab_error_message(e));
		ab_error_free(e);
	}
	if (ret_report)
		*ret_report = res ? json_loads(ab_result_json(res), 0, NULL) : NULL;
	ab_result_free(res);
	if (ss->staging[0])
		mcp_staging_remove(m, ss->staging);
	if (why) {
		tomb(m, ss->id, why);
		fprintf(stderr, "agentbox mcp: session %s: %s\n", ss->id, why);
	}
	req_clear(&ss->req);
	free(ss);
}

/* a field of the session's info (ab_session_info), malloc'd */
static char *
info_str(const struct mcp_session *ss, const char *key)
{
	char *text = ab_session_info(ss->s);
	json_t *j = text ? json_loads(text, 0, NULL) : NULL;
	const char *v = json_string_value(json_object_get(j, key));
	char *out = v ? xstrdup(v) : NULL;

	free(text);
	json_decref(j);
	return out;
}

void
mcp_session_create(struct mcp *m, const struct mcp_req *req, json_t *spec, const char *staging)
{
	struct ab_run_opts o;
	struct ab_err pe = { 0 };
	struct mcp_session *ss;
	ab_error *e = NULL;
	ab_spec *s;
	uint64_t mem, tasks;

	run_opts_init(&o);
	(void) spec_parse(spec, &o, &pe);
	mem = o.limits[AB_LIM_MEMORY].value;
	tasks = o.limits[AB_LIM_PIDS].value;
	run_opts_done(&o);
	if (mcp_sessions_count(m) >= (size_t) m->pol.max_sessions) {
		mcp_reply(m, req,
			  mcp_result_error("this server has %zu live sessions, its --max-sessions "
					   "(%d): close_session one first",
					   mcp_sessions_count(m), m->pol.max_sessions));
		goto fail;
	}
	if (!mcp_budget_fits(m, mem, tasks)) {
		mcp_reply(m, req,
			  mcp_result_error("the runs and sessions going hold this server's memory "
					   "or tasks budget: close_session one, ask for lower "
					   "limits, or try again later"));
		goto fail;
	}
	if (m->fuzzing) {
		mcp_reply(m, req, mcp_result_error("no sessions here"));
		goto fail;
	}
	s = ab_spec_from_jansson(spec, &e);
	ss = xcalloc(1, sizeof(*ss));
	ss->s = s ? ab_session_start(mcp_context(), s, &e) : NULL;
	ab_spec_free(s);
	if (!ss->s) {
		const char *fix = e ? ab_error_fix(e) : "";

		mcp_reply(m, req,
			  mcp_result_error("the session could not start: %s%s%s%s",
					   e ? ab_error_message(e) : "out of memory",
					   *fix ? " (fix: " : "", fix, *fix ? ")" : ""));
		ab_error_free(e);
		free(ss);
		goto fail;
	}
	snprintf(ss->id, sizeof(ss->id), "%s", ab_session_id(ss->s));
	snprintf(ss->lang, sizeof(ss->lang), "%s",
		 json_string_value(json_object_get(spec, "language")) ?: "python");
	if (staging)
		snprintf(ss->staging, sizeof(ss->staging), "%s", staging);
	ss->mem = mem;
	ss->tasks = tasks;
	ss->creating = true;
	ss->since_ms = ss->last_progress_ms = now_ms();
	req_set(&ss->req, req);
	count(m, ss, true);
	ss->next = m->sessions;
	m->sessions = ss;
	fprintf(stderr, "agentbox mcp: session %s starting (%zu live)\n", ss->id,
		mcp_sessions_count(m));
	json_decref(spec);
	return;
fail:
	if (staging)
		mcp_staging_remove(m, staging);
	json_decref(spec);
}

/* An ended session, restarted for a call that asked for it. 0, or the call was answered. */
static int
restart(struct mcp *m, const struct mcp_req *req, struct mcp_session *ss)
{
	ab_error *e = NULL;

	if (mcp_sessions_count(m) >= (size_t) m->pol.max_sessions ||
	    !mcp_budget_fits(m, ss->mem, ss->tasks)) {
		mcp_reply(m, req,
			  mcp_result_error("session %s cannot restart now: the server's "
					   "--max-sessions (%d) or budgets are taken; "
					   "close_session another first",
					   ss->id, m->pol.max_sessions));
		return -EBUSY;
	}
	/* waits for the new interpreter (a second or so): calls meanwhile wait too */
	if (ab_session_restart(ss->s, &e) < 0) {
		mcp_reply(m, req,
			  mcp_result_error("session %s could not restart: %s", ss->id,
					   e ? ab_error_message(e) : "failed"));
		ab_error_free(e);
		return -EIO;
	}
	count(m, ss, true);
	fprintf(stderr, "agentbox mcp: session %s restarted\n", ss->id);
	return 0;
}

void
mcp_session_cell(struct mcp *m, const struct mcp_req *req, const char *sid, const char *lang,
		 json_t *code, int64_t timeout_ms, bool want_restart)
{
	struct mcp_session *ss = find(m, sid);
	ab_error *e = NULL;

	if (!ss || ss->creating) {
		mcp_reply(m, req,
			  ss ? mcp_result_error("session %s is still starting", sid)
			     : unknown(m, sid));
		return;
	}
	if (lang && strcmp(lang, ss->lang) != 0) {
		mcp_reply(m, req,
			  mcp_result_error("session %s runs %s, not %s: leave out 'language', or "
					   "create_session a %s session",
					   sid, ss->lang, lang, lang));
		return;
	}
	if (ss->busy) {
		mcp_reply(m, req,
			  mcp_result_error(
				  "session %s is running a cell%s: one cell at a time; wait for "
				  "its result (or cancel that call, which interrupts it)",
				  sid, ss->req.id ? "" : " (a cancelled one, stopping now)"));
		return;
	}
	if (strcmp(ab_session_state(ss->s), "ended") == 0 && want_restart &&
	    restart(m, req, ss) < 0)
		return;
	if (ab_session_cell_start(ss->s, json_string_value(code), json_string_length(code),
				  timeout_ms, &e) < 0) {
		/* an ended session: the fix in this tool's words */
		const char *fix =
			e && ab_error_code(e) == -EPIPE
				? "call create_session for a new session, or run_code with "
				  "\"restart\": true to start this one again (its state is "
				  "then gone)"
			: e ? ab_error_fix(e)
			    : "";

		mcp_reply(m, req,
			  mcp_result_error("%s%s%s%s", e ? ab_error_message(e) : "failed",
					   *fix ? " (fix: " : "", fix, *fix ? ")" : ""));
		ab_error_free(e);
		return;
	}
	ss->busy = true;
	ss->since_ms = ss->last_progress_ms = now_ms();
	ss->last_progress = 0;
	req_set(&ss->req, req);
}

/* close_session's result: what the session did, from its report */
static json_t *
closed_result(const char *sid, json_t *rep, const char *note)
{
	json_t *ses = json_object_get(rep, "session"), *usage = json_object_get(rep, "usage");
	json_int_t cells = json_integer_value(json_object_get(ses, "cells"));
	json_t *cpu = json_object_get(rep, "cpu_ms"), *wall = json_object_get(rep, "wall_ms");
	json_t *peak = json_object_get(usage, "memory_peak_bytes");
	char buf[512];

	snprintf(buf, sizeof(buf),
		 "session %s closed after %lld cell(s)%s%s; CPU %s%.2f s, peak memory %.1f MiB, "
		 "%.1f s in all%s%s",
		 sid, (long long) cells,
		 json_string_value(json_object_get(ses, "ended")) ? "; " : "",
		 json_string_value(json_object_get(ses, "ended")) ?: "",
		 json_is_integer(cpu) ? "" : "not measured ",
		 (double) json_integer_value(cpu) / 1000.0,
		 (double) json_integer_value(peak) / (1 << 20),
		 (double) json_integer_value(wall) / 1000.0, note ? "; " : "", note ? note : "");
	return json_pack(
		"{s:[{s:s, s:s}], s:{s:s, s:b, s:I, s:O, s:O, s:O, s:O, s:O}}", "content", "type",
		"text", "text", buf, "structuredContent", "session_id", sid, "closed", 1, "cells",
		cells, "status", json_object_get(rep, "status") ?: json_null(), "cpu_ms",
		cpu ?: json_null(), "wall_ms", wall ?: json_null(), "memory_peak_bytes",
		peak ?: json_null(), "ended", json_object_get(ses, "ended") ?: json_null());
}

void
mcp_session_close(struct mcp *m, const struct mcp_req *req, const char *sid)
{
	struct mcp_session *ss = find(m, sid);
	const char *note = NULL;
	json_t *rep = NULL;

	if (!ss) {
		mcp_reply(m, req, unknown(m, sid));
		return;
	}
	if (ss->req.id) {
		note = ss->creating ? "it was still starting" : "its running cell was stopped";
		answer(m, ss,
		       mcp_result_error("session %s was closed (close_session) %s", sid,
					ss->creating ? "before it was ready"
						     : "while this cell ran"));
	}
	drop(m, ss, "closed by close_session", &rep);
	mcp_reply(m, req, closed_result(sid, rep, note));
	json_decref(rep);
}

bool
mcp_session_cancel_request(struct mcp *m, json_t *req_id)
{
	for (struct mcp_session *ss = m->sessions; ss; ss = ss->next) {
		if (!ss->req.id || !json_equal(ss->req.id, req_id))
			continue;
		req_clear(&ss->req); /* no reply for a cancelled request, ever */
		if (ss->creating)
			drop(m, ss, "its create_session was cancelled", NULL);
		else
			(void) ab_session_interrupt(ss->s);
		return true;
	}
	return false;
}

bool
mcp_session_request_in_flight(const struct mcp *m, json_t *req_id)
{
	for (const struct mcp_session *ss = m->sessions; ss; ss = ss->next)
		if (ss->req.id && json_equal(ss->req.id, req_id))
			return true;
	return false;
}

bool
mcp_session_uses_staging(const struct mcp *m, const char *staging)
{
	for (const struct mcp_session *ss = m->sessions; ss; ss = ss->next)
		if (strcmp(ss->staging, staging) == 0)
			return true;
	return false;
}

size_t
mcp_sessions_pollset(const struct mcp *m, struct pollfd *pfd)
{
	size_t n = 0;

	for (const struct mcp_session *ss = m->sessions; ss; ss = ss->next, n++)
		if (pfd)
			pfd[n] = (struct pollfd){ .fd = ab_session_fd(ss->s), .events = POLLIN };
	return n;
}

/* create_session's answer, once the session is ready */
static json_t *
ready_result(const struct mcp_session *ss)
{
	char *text = ab_session_info(ss->s);
	json_t *info = text ? json_loads(text, 0, NULL) : NULL, *res;
	char buf[512];

	free(text);
	snprintf(buf, sizeof(buf),
		 "session %s ready (%s %s): run_code with session_id \"%s\" runs code in it, "
		 "keeping variables, imports and files between calls; close_session ends it (it "
		 "ends on its own after %.0f s idle)",
		 ss->id, ss->lang, json_string_value(json_object_get(info, "version")) ?: "",
		 ss->id,
		 (double) json_integer_value(json_object_get(info, "idle_timeout_ms")) / 1000);
	res = json_pack(
		"{s:[{s:s, s:s}], s:{s:s, s:s, s:s, s:s?, s:I, s:I}}", "content", "type", "text",
		"text", buf, "structuredContent", "session_id", ss->id, "language", ss->lang,
		"state", "ready", "version", json_string_value(json_object_get(info, "version")),
		"idle_timeout_ms", json_integer_value(json_object_get(info, "idle_timeout_ms")),
		"max_lifetime_ms", json_integer_value(json_object_get(info, "max_lifetime_ms")));
	json_decref(info);
	return res;
}

/* One session moved on. Returns false when it was dropped. */
static bool
step_one(struct mcp *m, struct mcp_session *ss, int64_t now)
{
	char *cell = NULL;
	ab_error *e = NULL;
	int r = ab_session_step(ss->s, &cell, &e);
	bool ended = strcmp(ab_session_state(ss->s), "ended") == 0;

	ab_error_free(e);
	if (r == 1) {
		ss->busy = false;
		answer(m, ss,
		       cell ? mcp_result_from_cell(m, cell)
			    : mcp_result_error("session %s: the cell's result is lost", ss->id));
		free(cell);
	}
	if (ss->creating && !ended && strcmp(ab_session_state(ss->s), "ready") == 0) {
		ss->creating = false;
		answer(m, ss, ready_result(ss));
		fprintf(stderr, "agentbox mcp: session %s ready\n", ss->id);
	}
	if (!ended)
		return true;
	if (ss->counted) {
		cleanup_free char *why = info_str(ss, "ended");
		char *info = ab_session_info(ss->s);
		json_t *j = info ? json_loads(info, 0, NULL) : NULL;

		free(info);
		ss->idle_ms = (uint64_t) json_integer_value(json_object_get(j, "idle_timeout_ms"));
		json_decref(j);
		count(m, ss, false);
		ss->ended_ms = now;
		ss->busy = false;
		fprintf(stderr, "agentbox mcp: session %s ended: %s\n", ss->id, why ?: "?");
		if (ss->creating) {
			answer(m, ss,
			       mcp_result_error("the session could not start: %s",
						why ?: "it ended"));
			drop(m, ss, NULL, NULL);
			return false;
		}
		if (why && strstr(why, "idle_timeout")) {
			char text[256];

			snprintf(text, sizeof(text), "ended: %s", why);
			drop(m, ss, text, NULL);
			return false;
		}
	}
	/* a crash, its lifetime: kept a while, for the next call to be told (or restart) */
	if (!ss->req.id && now - ss->ended_ms >= (int64_t) ss->idle_ms) {
		cleanup_free char *why = info_str(ss, "ended");
		char text[256];

		snprintf(text, sizeof(text), "ended (%s) and forgotten after its idle_timeout",
			 why ?: "?");
		drop(m, ss, text, NULL);
		return false;
	}
	return true;
}

void
mcp_sessions_step(struct mcp *m)
{
	int64_t now = now_ms();
	struct mcp_session *ss = m->sessions, *next;

	for (; ss && !m->quit; ss = next) {
		next = ss->next;
		(void) step_one(m, ss, now);
	}
}

int64_t
mcp_sessions_timers(struct mcp *m, int64_t now)
{
	int64_t next = INT64_MAX;

	for (struct mcp_session *ss = m->sessions; ss; ss = ss->next) {
		int t = ab_session_timeout_ms(ss->s);

		if (t >= 0 && now + t < next)
			next = now + t;
		if (strcmp(ab_session_state(ss->s), "ended") == 0 && !ss->counted &&
		    ss->ended_ms + (int64_t) ss->idle_ms < next)
			next = ss->ended_ms + (int64_t) ss->idle_ms;
		if (!ss->req.id || !ss->req.token)
			continue;
		if (now - ss->last_progress_ms >= PROGRESS_MS) {
			double elapsed = (double) (now - ss->since_ms) / 1000.0;
			char msg[160];

			if (elapsed <= ss->last_progress)
				elapsed = ss->last_progress + 0.001;
			ss->last_progress = elapsed;
			ss->last_progress_ms = now;
			snprintf(msg, sizeof(msg), "%s %s for %.1f s",
				 ss->creating ? "session starting" : "cell running in session",
				 ss->id, elapsed);
			mcp_notify(m, "notifications/progress",
				   json_pack("{s:O, s:f, s:s}", "progressToken", ss->req.token,
					     "progress", elapsed, "message", msg));
		}
		if (ss->last_progress_ms + PROGRESS_MS < next)
			next = ss->last_progress_ms + PROGRESS_MS;
	}
	return next;
}

void
mcp_sessions_close_all(struct mcp *m, const char *why)
{
	while (m->sessions) {
		struct mcp_session *ss = m->sessions;

		req_clear(&ss->req); /* nobody is left to answer */
		drop(m, ss, why, NULL);
	}
}

json_t *
mcp_sessions_info(const struct mcp *m)
{
	json_t *list = json_array();

	for (const struct mcp_session *ss = m->sessions; ss; ss = ss->next) {
		char *text = ab_session_info(ss->s);
		json_t *j = text ? json_loads(text, 0, NULL) : NULL;
		json_t *e =
			json_pack("{s:s, s:s, s:s, s:I, s:I}", "id", ss->id, "language", ss->lang,
				  "state", ss->creating ? "starting" : ab_session_state(ss->s),
				  "cells", json_integer_value(json_object_get(j, "cells")),
				  "idle_ms", json_integer_value(json_object_get(j, "idle_ms")));

		if (json_object_get(j, "ended"))
			json_object_set(e, "ended", json_object_get(j, "ended"));
		json_array_append_new(list, e);
		json_decref(j);
		free(text);
	}
	return json_pack("{s:i, s:o}", "max_sessions", m->pol.max_sessions, "live", list);
}

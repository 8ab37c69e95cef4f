/* session.c: ab_session_* (docs/sessions.md). A session is one run of agentbox-supervisor
 * whose sandbox runs the session driver (src/session/) instead of a script; this side sends
 * it cells on a socket (the supervisor's fd 6, the sandbox's fd 1000) and reads its answers,
 * and reads the sandbox's stdout and stderr (relayed by the supervisor into pipes of ours),
 * split per cell at the mark the driver writes after each cell.
 *
 * Nothing the driver says decides a cell's status: a cell past its timeout is interrupted
 * from here (SIGUSR1 to the supervisor, which sends SIGINT to the interpreter) and is
 * "timeout" whatever the driver answers; one that does not answer within the grace ends the
 * session; a session whose run ended is "ended", with the supervisor's report saying how.
 * The driver's answer gives only the cell's value, figures and exception, which are the
 * cell's own output and as untrusted as its stdout. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/socket.h>

#include "../spec/options.h"
#include "../spec/spec.h"
#include "../util/clock.h"
#include "../util/fdutil.h"
#include "../util/macro.h"
#include "../util/utf8.h"
#include "../util/xalloc.h"
#include "api-private.h"

#define SES_READY_MS   120000      /* the interpreter's start, at most */
#define SES_GRACE_MS   2000        /* an interrupted cell must answer within this */
#define SES_DRAIN_MS   1000        /* after the answer: the streams' marks */
#define SES_GONE_MS    3000        /* the driver's socket closed: the run must end within this */
#define SES_CLOSE_MS   5000        /* ab_session_close: the interpreter must leave within this */
#define SES_FRAME_MAX  (64u << 20) /* one answer of the driver's (images included) */
#define SES_MARK_BYTES 16

enum ses_state {
	SES_STARTING,
	SES_READY,
	SES_BUSY,
	SES_ENDED
};
static const char *const state_names[] = { "starting", "ready", "busy", "ended" };

/* What one cell printed on one stream: its first half_cap bytes and its last ones. */
struct capture {
	char *head, *tail; /* tail: a ring of half_cap bytes */
	size_t half_cap, hlen, tlen, tpos;
	uint64_t bytes;
};

struct stream {
	const char *name;
	int fd;
	struct capture cell;    /* the running cell's */
	struct capture between; /* printed while no cell ran: the next cell's */
	char carry[64];         /* a possible start of the mark, held back */
	size_t carry_len;
	bool marked; /* the running cell's mark went by */
	bool eof;
};

struct ab_session {
	ab_context *ctx, *own_ctx;
	json_t *spec;     /* the caller's, for a restart */
	json_t *sup_spec; /* what the supervisor runs */
	ab_run_handle *run;
	int sock, epfd;
	struct stream out, err;
	enum ses_state state;
	bool python;
	char id[2 * 8 + 1];
	char *version;
	uint64_t idle_ms, lifetime_ms, cell_timeout_ms, inline_bytes;
	int64_t created, last_used, ready_by, gone_by;
	char *rbuf;
	size_t rlen, rcap;
	bool sock_eof;
	/* the running cell */
	uint64_t cells, cell_id;
	char mark[sizeof("\036agentbox-cell-\036") + 2 * SES_MARK_BYTES];
	size_t mark_len;
	int64_t cell_t0, deadline, grace_by, drain_by;
	const char *stopped; /* "timeout" or "cancelled": we interrupted it */
	json_t *done;        /* the driver's answer */
	bool killed;         /* we stopped the run: the cell did not answer in its grace */
	/* the end */
	char *ended_why;    /* how it ended, said to the caller */
	char *ended_status; /* the report's status */
	ab_result *final;   /* the report, once the run was waited for */
	bool restarted;     /* the next cell's result says the state is gone */
	char *restart_why;
};

static void
hex_encode(const unsigned char *b, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[b[i] >> 4];
		out[2 * i + 1] = digits[b[i] & 15];
	}
	out[2 * n] = '\0';
}

static void
cap_init(struct capture *c, size_t half_cap)
{
	free(c->head);
	free(c->tail);
	*c = (struct capture){ .half_cap = half_cap };
	c->head = xmalloc(half_cap ? half_cap : 1);
	c->tail = xmalloc(half_cap ? half_cap : 1);
}

static void
cap_done(struct capture *c)
{
	free(c->head);
	free(c->tail);
	*c = (struct capture){ 0 };
}

static void
cap_add(struct capture *c, const char *p, size_t n)
{
	c->bytes += n;
	while (n > 0 && c->hlen < c->half_cap) {
		size_t k = c->half_cap - c->hlen < n ? c->half_cap - c->hlen : n;

		memcpy(c->head + c->hlen, p, k);
		c->hlen += k;
		p += k;
		n -= k;
	}
	for (; n > 0 && c->half_cap > 0; p++, n--) {
		c->tail[c->tpos] = *p;
		c->tpos = (c->tpos + 1) % c->half_cap;
		if (c->tlen < c->half_cap)
			c->tlen++;
	}
}

/* {"text", "bytes", "truncated", "elided_bytes", "text_lossy"} as a run's report has them. */
static json_t *
cap_json(const struct capture *c, const char *name)
{
	uint64_t elided = c->bytes - c->hlen - c->tlen;
	size_t len = c->hlen + c->tlen + 128, n = 0, tlen;
	cleanup_free char *raw = xmalloc(len), *text = NULL;
	bool lossy = false;

	memcpy(raw, c->head, c->hlen);
	n = c->hlen;
	if (elided > 0)
		n += (size_t) snprintf(raw + n, len - n,
				       "\n[agentbox: %" PRIu64 " bytes of %s elided here]\n",
				       elided, name);
	for (size_t i = 0; i < c->tlen; i++)
		raw[n++] = c->tail[(c->tpos + c->half_cap - c->tlen + i) % c->half_cap];
	text = utf8_sanitize(raw, n, &tlen, &lossy);
	return json_pack("{s:s%, s:I, s:b, s:I, s:b}", "text", text, tlen, "bytes",
			 (json_int_t) c->bytes, "truncated", elided > 0, "elided_bytes",
			 (json_int_t) elided, "text_lossy", lossy);
}

/* Bytes read from a stream: the running cell's up to its mark, the rest for the next. */
static void
stream_take(struct ab_session *s, struct stream *st, const char *p, size_t n)
{
	bool busy = s->state == SES_BUSY && !st->marked && s->mark_len > 0;
	cleanup_free char *buf = NULL;
	const char *hit;
	size_t len, keep = 0;

	if (!busy) {
		cap_add(&st->between, p, n);
		return;
	}
	len = st->carry_len + n;
	buf = xmalloc(len);
	memcpy(buf, st->carry, st->carry_len);
	memcpy(buf + st->carry_len, p, n);
	st->carry_len = 0;
	hit = memmem(buf, len, s->mark, s->mark_len);
	if (hit) {
		size_t at = (size_t) (hit - buf);

		cap_add(&st->cell, buf, at);
		st->marked = true;
		cap_add(&st->between, buf + at + s->mark_len, len - at - s->mark_len);
		return;
	}
	/* the longest end of buf that begins the mark waits for the next read */
	for (size_t k = s->mark_len - 1; k > 0; k--)
		if (k <= len && memcmp(buf + len - k, s->mark, k) == 0) {
			keep = k;
			break;
		}
	cap_add(&st->cell, buf, len - keep);
	memcpy(st->carry, buf + len - keep, keep);
	st->carry_len = keep;
}

static void
stream_read(struct ab_session *s, struct stream *st)
{
	char buf[65536];

	for (int rounds = 0; st->fd >= 0 && rounds < 64; rounds++) {
		ssize_t n = read(st->fd, buf, sizeof(buf));

		if (n > 0) {
			stream_take(s, st, buf, (size_t) n);
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		(void) epoll_ctl(s->epfd, EPOLL_CTL_DEL, st->fd, NULL);
		(void) close(st->fd);
		st->fd = -1;
		st->eof = true;
	}
}

static int
send_frame(struct ab_session *s, json_t *msg)
{
	cleanup_free char *body = json_dumps(msg, JSON_COMPACT);
	size_t len = body ? strlen(body) : 0;
	unsigned char head[4] = { (unsigned char) len, (unsigned char) (len >> 8),
				  (unsigned char) (len >> 16), (unsigned char) (len >> 24) };
	struct pollfd pfd = { .fd = s->sock, .events = POLLOUT };

	json_decref(msg);
	if (!body)
		return -ENOMEM;
	/* the driver reads a cell as soon as it is idle: blocking here is bounded by that */
	for (size_t off = 0; off < len + 4;) {
		ssize_t n = off < 4 ? send(s->sock, head + off, 4 - off, MSG_NOSIGNAL)
				    : send(s->sock, body + off - 4, len + 4 - off, MSG_NOSIGNAL);

		if (n > 0) {
			off += (size_t) n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN && poll(&pfd, 1, 10000) > 0)
			continue;
		return n < 0 ? -errno : -EPIPE;
	}
	return 0;
}

/* The driver's frames read so far; the first complete one in *ret (NULL: none yet). */
static int
next_frame(struct ab_session *s, json_t **ret)
{
	size_t n;
	json_error_t je;

	*ret = NULL;
	if (s->rlen < 4)
		return 0;
	n = (size_t) (unsigned char) s->rbuf[0] | (size_t) (unsigned char) s->rbuf[1] << 8 |
	    (size_t) (unsigned char) s->rbuf[2] << 16 | (size_t) (unsigned char) s->rbuf[3] << 24;
	if (n > SES_FRAME_MAX)
		return -EPROTO;
	if (s->rlen < 4 + n)
		return 0;
	*ret = json_loadb(s->rbuf + 4, n, 0, &je);
	memmove(s->rbuf, s->rbuf + 4 + n, s->rlen - 4 - n);
	s->rlen -= 4 + n;
	return *ret ? 1 : -EPROTO;
}

static void
sock_read(struct ab_session *s)
{
	for (;;) {
		ssize_t n;

		if (s->rcap - s->rlen < 65536) {
			s->rcap = s->rcap ? 2 * s->rcap : 131072;
			s->rbuf = xrealloc(s->rbuf, s->rcap);
		}
		n = recv(s->sock, s->rbuf + s->rlen, s->rcap - s->rlen, 0);
		if (n > 0) {
			s->rlen += (size_t) n;
			if (s->rlen > SES_FRAME_MAX + 4)
				break; /* next_frame says so */
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0 || errno != EAGAIN) {
			s->sock_eof = true;
			(void) epoll_ctl(s->epfd, EPOLL_CTL_DEL, s->sock, NULL);
		}
		return;
	}
}

/* The run ended (or is being ended): its report, and how the session ended. */
static void
session_reap(struct ab_session *s, const char *why_ours)
{
	ab_error *e = NULL;
	const json_t *rep;
	const char *status, *msg;
	int code, sig, r;

	if (!s->run)
		return;
	r = ab_run_wait(s->run, &s->final, &e);
	/* the run is over: what its streams still hold are its last words; after them nothing of
	 * the streams or the channel may keep the session's fd readable (an ended session is not
	 * stepped: its caller's poll would return at once, for ever) */
	stream_read(s, &s->out);
	stream_read(s, &s->err);
	for (int *fd = &s->out.fd; fd; fd = fd == &s->out.fd ? &s->err.fd : NULL)
		if (*fd >= 0)
			(void) epoll_ctl(s->epfd, EPOLL_CTL_DEL, *fd, NULL);
	if (s->sock >= 0)
		(void) epoll_ctl(s->epfd, EPOLL_CTL_DEL, s->sock, NULL);
	if (r < 0) {
		s->ended_status = xstrdup("failed");
		s->ended_why = xasprintf("agentbox failed: %s", ab_error_message(e));
		ab_error_free(e);
		s->run = NULL;
		s->state = SES_ENDED;
		return;
	}
	s->run = NULL;
	s->state = SES_ENDED;
	status = ab_result_status(s->final);
	s->ended_status = xstrdup(status ? status : "unknown");
	if (why_ours) {
		s->ended_why = xstrdup(why_ours);
		return;
	}
	rep = json_loads(ab_result_json(s->final), 0, NULL);
	msg = json_string_value(json_object_get(rep, "message"));
	if (!msg)
		msg = json_string_value(json_object_get(rep, "summary"));
	code = ab_result_exit_code(s->final);
	sig = ab_result_signal(s->final);
	if (status && strcmp(status, "exited") == 0)
		s->ended_why = xasprintf("the interpreter exited with code %d", code);
	else if (status && strcmp(status, "signaled") == 0)
		s->ended_why = xasprintf("the interpreter was killed by signal %d (%s)", sig,
					 sigabbrev_np(sig) ? sigabbrev_np(sig) : "?");
	else if (status && strcmp(status, "timeout") == 0)
		s->ended_why = xasprintf("the session reached its max_lifetime (%" PRIu64 " s)",
					 s->lifetime_ms / 1000);
	else
		s->ended_why = xasprintf("%s%s%s", status ? status : "it ended", msg ? ": " : "",
					 msg ? msg : "");
	json_decref((json_t *) rep);
}

/* Stops the run (SIGTERM to the supervisor, which kills the sandbox and reports). */
static void
session_kill(struct ab_session *s, const char *why)
{
	if (s->run) {
		(void) ab_run_cancel(s->run);
		session_reap(s, why);
	}
}

static json_t *
session_json(const struct ab_session *s)
{
	json_t *j =
		json_pack("{s:s, s:s, s:s, s:I, s:I, s:I}", "id", s->id, "language",
			  s->python ? "python" : "node", "state", state_names[s->state], "cells",
			  (json_int_t) s->cells, "idle_timeout_ms", (json_int_t) s->idle_ms,
			  "max_lifetime_ms", (json_int_t) s->lifetime_ms);

	if (s->version)
		json_object_set_new(j, "version", json_string(s->version));
	if (s->state == SES_ENDED) {
		json_object_set_new(j, "ended", json_string(s->ended_why ? s->ended_why : "ended"));
		json_object_set_new(j, "report_status",
				    json_string(s->ended_status ? s->ended_status : "unknown"));
	}
	if (s->restarted)
		json_object_set_new(j, "restarted",
				    json_string(s->restart_why ? s->restart_why : "restarted"));
	return j;
}

/* The finished cell as JSON (docs/sessions.md "A cell's result"). */
static char *
cell_result(struct ab_session *s, bool lost)
{
	const json_t *d = s->done;
	const json_t *err = json_object_get(d, "error");
	const char *status;
	json_t *j, *images = json_array();
	char *text;

	if (lost)
		status = "lost";
	else if (s->stopped)
		status = s->stopped;
	else if (json_is_object(err))
		status = "error";
	else
		status = "ok";
	size_t i;
	json_t *im;

	json_array_foreach(json_object_get(d, "images"), i, im)
	{
		if (json_is_string(json_object_get(im, "data")))
			json_array_append_new(images,
					      json_pack("{s:s, s:O}", "mime", "image/png", "data",
							json_object_get(im, "data")));
	}
	j = json_pack("{s:s, s:I, s:s, s:o, s:o, s:O?, s:o, s:O?, s:I}", "schema",
		      "agentbox.cell/1", "id", (json_int_t) s->cell_id, "status", status, "stdout",
		      cap_json(&s->out.cell, "stdout"), "stderr", cap_json(&s->err.cell, "stderr"),
		      "result",
		      json_is_object(json_object_get(d, "value")) ? json_object_get(d, "value")
								  : NULL,
		      "images", images, "error", json_is_object(err) && !lost ? err : NULL,
		      "wall_ms", (json_int_t) (now_ms() - s->cell_t0));
	if (lost)
		json_object_set_new(
			j, "message",
			json_sprintf("the session ended during the cell: %s; its state is gone",
				     s->ended_why ? s->ended_why : "it ended"));
	else if (s->stopped)
		json_object_set_new(
			j, "message",
			json_sprintf("the cell was %s and interrupted; the session and its state "
				     "go on",
				     strcmp(s->stopped, "timeout") == 0 ? "past its timeout"
									: "cancelled"));
	json_object_set_new(j, "session", session_json(s));
	s->restarted = false;
	text = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	return text;
}

static void
cell_reset(struct ab_session *s)
{
	json_decref(s->done);
	s->done = NULL;
	s->stopped = NULL;
	s->mark_len = 0;
	s->out.marked = s->err.marked = false;
	s->out.carry_len = s->err.carry_len = 0;
}

static int
epoll_add(int epfd, int fd)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = fd };

	return fd < 0 ? 0 : epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev);
}

static int
session_launch(struct ab_session *s, ab_error **err)
{
	int sv[2] = { -1, -1 }, op[2] = { -1, -1 }, ep[2] = { -1, -1 };
	ab_io io;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0 ||
	    pipe2(op, O_CLOEXEC) < 0 || pipe2(ep, O_CLOEXEC) < 0) {
		int e = errno;

		for (int i = 0; i < 2; i++) {
			if (sv[i] >= 0)
				(void) close(sv[i]);
			if (op[i] >= 0)
				(void) close(op[i]);
			if (ep[i] >= 0)
				(void) close(ep[i]);
		}
		return api_fail(err, -e, 125, NULL, "start a session: %s", strerror(e));
	}
	io = (ab_io){ .out_fd = op[1], .err_fd = ep[1] };
	{
		json_t *words = json_string("flags");

		s->run = api_start(s->ctx, "run", "spec", s->sup_spec,
				   api_context_flag_words(s->ctx) ? "words" : NULL, words, &io,
				   sv[1], -1, err);
		json_decref(words);
	}
	(void) close(sv[1]);
	(void) close(op[1]);
	(void) close(ep[1]);
	s->sock = sv[0];
	s->out.fd = op[0];
	s->err.fd = ep[0];
	(void) fd_set_nonblock(s->sock, 1);
	(void) fd_set_nonblock(s->out.fd, 1);
	(void) fd_set_nonblock(s->err.fd, 1);
	if (!s->run)
		return -EIO;
	if (epoll_add(s->epfd, s->sock) < 0 || epoll_add(s->epfd, s->out.fd) < 0 ||
	    epoll_add(s->epfd, s->err.fd) < 0 || epoll_add(s->epfd, ab_run_fd(s->run)) < 0)
		return api_fail(err, -errno, 125, NULL, "start a session: epoll: %s",
				strerror(errno));
	cap_init(&s->out.cell, s->inline_bytes / 2);
	cap_init(&s->err.cell, s->inline_bytes / 2);
	cap_init(&s->out.between, s->inline_bytes / 2);
	cap_init(&s->err.between, s->inline_bytes / 2);
	s->state = SES_STARTING;
	s->created = s->last_used = now_ms();
	s->ready_by = s->created + SES_READY_MS;
	s->gone_by = 0;
	s->sock_eof = false;
	s->out.eof = s->err.eof = false;
	return 0;
}

static void
session_unlaunch(struct ab_session *s)
{
	if (s->run) {
		(void) ab_run_cancel(s->run);
		(void) api_finish_quietly(s->run);
		api_run_free(s->run);
		s->run = NULL;
	}
	if (s->sock >= 0) {
		(void) epoll_ctl(s->epfd, EPOLL_CTL_DEL, s->sock, NULL);
		(void) close(s->sock);
	}
	if (s->out.fd >= 0) {
		(void) epoll_ctl(s->epfd, EPOLL_CTL_DEL, s->out.fd, NULL);
		(void) close(s->out.fd);
	}
	if (s->err.fd >= 0) {
		(void) epoll_ctl(s->epfd, EPOLL_CTL_DEL, s->err.fd, NULL);
		(void) close(s->err.fd);
	}
	s->sock = s->out.fd = s->err.fd = -1;
	s->rlen = 0;
	cell_reset(s);
	ab_result_free(s->final);
	s->final = NULL;
	free(s->ended_why);
	free(s->ended_status);
	free(s->version);
	s->ended_why = s->ended_status = s->version = NULL;
}

static void
session_free(ab_session *s)
{
	if (!s)
		return;
	session_unlaunch(s);
	if (s->epfd >= 0)
		(void) close(s->epfd);
	cap_done(&s->out.cell);
	cap_done(&s->err.cell);
	cap_done(&s->out.between);
	cap_done(&s->err.between);
	json_decref(s->spec);
	json_decref(s->sup_spec);
	free(s->rbuf);
	free(s->restart_why);
	ab_context_free(s->own_ctx);
	free(s);
}

AB_EXPORT ab_session *
ab_session_start(ab_context *ctx, const ab_spec *spec, ab_error **err)
{
	struct ab_run_opts o;
	struct ab_err e = { 0 };
	ab_session *s;
	json_t *sup;
	unsigned char rnd[8];
	int r;

	if (!spec)
		return api_fail(err, -EINVAL, 2, "pass a spec (ab_spec_new, ab_spec_from_json)",
				"no spec given"),
		       NULL;
	sup = json_deep_copy(api_spec_json(spec));
	if (!json_object_get(sup, "session"))
		json_object_set_new(sup, "session", json_true());
	/* a session's directory is discarded unless the spec keeps it ("rm": false) */
	if (!json_object_get(sup, "rm"))
		json_object_set_new(sup, "rm", json_true());
	json_object_del(sup, "quiet"); /* its output comes to us through the relay */
	run_opts_init(&o);
	r = spec_parse(sup, &o, &e);
	if (r < 0) {
		run_opts_done(&o);
		json_decref(sup);
		return api_fail_ab(err, &e), NULL;
	}
	s = xcalloc(1, sizeof(*s));
	s->sock = s->out.fd = s->err.fd = -1;
	s->out.name = "stdout";
	s->err.name = "stderr";
	s->python = o.lang != AB_LANG_NODE;
	s->idle_ms = o.session_idle_ms;
	s->lifetime_ms = o.session_lifetime_ms;
	s->cell_timeout_ms = o.limits[AB_LIM_TIMEOUT_MS].value;
	s->inline_bytes = o.inline_output ? o.inline_output : AB_INLINE_OUTPUT_DEFAULT;
	run_opts_done(&o);
	s->spec = json_deep_copy(api_spec_json(spec));
	s->sup_spec = sup;
	s->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t) sizeof(rnd))
		memset(rnd, 0, sizeof(rnd));
	hex_encode(rnd, sizeof(rnd), s->id);
	if (!ctx)
		ctx = s->own_ctx = ab_context_new(err);
	s->ctx = ctx;
	if (!ctx || s->epfd < 0 || session_launch(s, err) < 0) {
		if (s->epfd < 0)
			api_fail(err, -errno, 125, NULL, "epoll_create1: %s", strerror(errno));
		session_free(s);
		return NULL;
	}
	return s;
}

AB_EXPORT int
ab_session_fd(const ab_session *s)
{
	return s ? s->epfd : -1;
}

AB_EXPORT const char *
ab_session_state(const ab_session *s)
{
	return s ? state_names[s->state] : "ended";
}

AB_EXPORT const char *
ab_session_id(const ab_session *s)
{
	return s ? s->id : "";
}

AB_EXPORT int
ab_session_timeout_ms(const ab_session *s)
{
	int64_t now = now_ms(), at = -1;

	if (!s || s->state == SES_ENDED)
		return -1;
#define EARLIER(t) (at = (t) > 0 && (at < 0 || (t) < at) ? (t) : at)
	if (s->state == SES_STARTING)
		EARLIER(s->ready_by);
	if (s->state == SES_READY && s->idle_ms)
		EARLIER(s->last_used + (int64_t) s->idle_ms);
	if (s->state == SES_BUSY) {
		EARLIER(s->done ? s->drain_by : s->stopped ? s->grace_by : s->deadline);
	}
	if (s->gone_by)
		EARLIER(s->gone_by);
#undef EARLIER
	if (at < 0)
		return -1;
	return at <= now ? 0 : at - now > INT32_MAX ? INT32_MAX : (int) (at - now);
}

/* A frame from the driver. */
static void
on_frame(struct ab_session *s, json_t *msg)
{
	json_t *ready = json_object_get(msg, "ready"), *done = json_object_get(msg, "done");

	if (s->state == SES_STARTING && json_is_object(ready)) {
		const char *v = json_string_value(json_object_get(ready, "version"));

		free(s->version);
		s->version = v ? xstrndup(v, 64) : NULL;
		s->state = SES_READY;
		s->last_used = now_ms();
	} else if (s->state == SES_BUSY && !s->done && json_is_object(done) &&
		   (uint64_t) json_integer_value(json_object_get(done, "id")) == s->cell_id) {
		s->done = json_incref(done);
		s->drain_by = now_ms() + SES_DRAIN_MS;
	}
	json_decref(msg);
}

AB_EXPORT int
ab_session_step(ab_session *s, char **ret_cell, ab_error **err)
{
	struct epoll_event ev[8];
	int64_t now;
	bool run_ended;
	json_t *msg;
	int r;

	if (ret_cell)
		*ret_cell = NULL;
	if (!s)
		return api_fail(err, -EINVAL, 2, "pass the session ab_session_start returned",
				"no session given");
	(void) epoll_wait(s->epfd, ev, ARRAY_SIZE(ev), 0);
	if (s->state == SES_ENDED)
		return 0;
	stream_read(s, &s->out);
	stream_read(s, &s->err);
	if (!s->sock_eof)
		sock_read(s);
	while ((r = next_frame(s, &msg)) > 0)
		on_frame(s, msg);
	now = now_ms();
	if (r < 0 && !s->killed) {
		s->killed = true;
		session_kill(s, "the interpreter broke the session's protocol (it was killed)");
	}
	{
		struct pollfd p = { .fd = s->run ? ab_run_fd(s->run) : -1, .events = POLLIN };

		run_ended = s->run && poll(&p, 1, 0) > 0;
	}
	if (s->sock_eof && !run_ended && s->run && !s->gone_by)
		s->gone_by = now + SES_GONE_MS;
	if (s->gone_by && now >= s->gone_by && s->run)
		session_kill(s, "the interpreter closed its channel to agentbox (it was killed)");
	if (run_ended) {
		stream_read(s, &s->out); /* what it printed last, before the report */
		stream_read(s, &s->err);
		session_reap(s, NULL);
	}
	if (s->state == SES_STARTING && now >= s->ready_by)
		session_kill(s, "the interpreter did not start within 120 s");
	if (s->state == SES_READY && s->idle_ms && now - s->last_used >= (int64_t) s->idle_ms) {
		char why[128];

		snprintf(why, sizeof(why), "the session was idle for %" PRIu64 " s (idle_timeout)",
			 s->idle_ms / 1000);
		(void) send(s->sock, "", 0, MSG_NOSIGNAL);
		(void) shutdown(s->sock, SHUT_RDWR); /* the driver leaves on its socket's end */
		session_kill(s, why);
	}
	if (s->state == SES_BUSY && !s->done && !s->stopped && now >= s->deadline) {
		s->stopped = "timeout";
		s->grace_by = now + SES_GRACE_MS;
		(void) ab_run_signal(s->run, SIGUSR1);
	}
	if (s->state == SES_BUSY && !s->done && s->stopped && now >= s->grace_by) {
		char why[160];

		snprintf(why, sizeof(why),
			 "the cell did not stop within %d s of its interrupt; the session was "
			 "killed",
			 SES_GRACE_MS / 1000);
		session_kill(s, why);
	}
	if (s->state == SES_ENDED && s->mark_len) {
		/* the cell that was running is lost */
		if (ret_cell)
			*ret_cell = cell_result(s, true);
		cell_reset(s);
		return 1;
	}
	if (s->state == SES_BUSY && s->done &&
	    ((s->out.marked || s->out.eof) && (s->err.marked || s->err.eof) ? true
									    : now >= s->drain_by)) {
		s->state = SES_READY; /* as the result says */
		if (ret_cell)
			*ret_cell = cell_result(s, false);
		cell_reset(s);
		s->last_used = now_ms();
		return 1;
	}
	return 0;
}

/* Waits (poll on the session's fd) until pred holds or the session ended. */
static int
wait_until(ab_session *s, bool (*pred)(const ab_session *), char **ret_cell, ab_error **err)
{
	for (;;) {
		struct pollfd p = { .fd = s->epfd, .events = POLLIN };
		int r = ab_session_step(s, ret_cell, err);

		if (r != 0 || pred(s) || s->state == SES_ENDED)
			return r;
		(void) poll(&p, 1, ab_session_timeout_ms(s));
	}
}

static bool
is_ready(const ab_session *s)
{
	return s->state == SES_READY;
}

static bool
never(const ab_session *s)
{
	(void) s;
	return false;
}

static int
ended_error(const ab_session *s, ab_error **err)
{
	return api_fail(err, -EPIPE, 2,
			"start a new session (or ask for a restart: its state is then gone)",
			"session %s has ended: %s", s->id,
			s->ended_why ? s->ended_why : "it ended");
}

AB_EXPORT ab_session *
ab_session_new(ab_context *ctx, const ab_spec *spec, ab_error **err)
{
	ab_session *s = ab_session_start(ctx, spec, err);

	if (!s)
		return NULL;
	(void) wait_until(s, is_ready, NULL, err);
	if (s->state != SES_READY) {
		ended_error(s, err);
		session_free(s);
		return NULL;
	}
	return s;
}

AB_EXPORT int
ab_session_cell_start(ab_session *s, const char *code, size_t len, int64_t timeout_ms,
		      ab_error **err)
{
	unsigned char rnd[SES_MARK_BYTES];
	char hex[2 * SES_MARK_BYTES + 1];
	json_t *msg;
	int r;

	if (!s)
		return api_fail(err, -EINVAL, 2, "pass the session ab_session_start returned",
				"no session given");
	if (s->state == SES_STARTING)
		(void) wait_until(s, is_ready, NULL, err);
	if (s->state == SES_ENDED)
		return ended_error(s, err);
	if (s->state == SES_BUSY)
		return api_fail(err, -EBUSY, 2, "wait for the running cell (or interrupt it)",
				"session %s is running a cell", s->id);
	if (!code || len > AB_CODE_MAX)
		return api_fail(err, -EINVAL, 2, "send at most 16 MiB of code a cell",
				"a cell's code is missing or longer than 16 MiB");
	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t) sizeof(rnd))
		return api_fail(err, -errno, 125, NULL, "getrandom: %s", strerror(errno));
	hex_encode(rnd, sizeof(rnd), hex);
	s->mark_len = (size_t) snprintf(s->mark, sizeof(s->mark), "\036agentbox-cell-%s\036", hex);
	/* what was printed between cells opens this cell's output */
	for (struct stream *st = &s->out; st; st = st == &s->out ? &s->err : NULL) {
		struct capture tmp = st->cell;

		st->cell = st->between;
		st->between = tmp;
		cap_init(&st->between, s->inline_bytes / 2);
	}
	s->cell_id = ++s->cells;
	s->cell_t0 = now_ms();
	s->deadline = s->cell_t0 + (timeout_ms > 0 ? timeout_ms : (int64_t) s->cell_timeout_ms);
	msg = json_pack("{s:{s:I, s:s%, s:s}}", "cell", "id", (json_int_t) s->cell_id, "code", code,
			len, "mark", s->mark);
	if (!msg)
		return api_fail(err, -EINVAL, 2, "send the code as UTF-8 text",
				"the cell's code is not valid UTF-8");
	s->state = SES_BUSY;
	r = send_frame(s, msg);
	if (r < 0) {
		/* the driver is gone: the step that follows says how the session ended */
		s->gone_by = now_ms() + SES_GONE_MS;
	}
	return 0;
}

AB_EXPORT int
ab_session_interrupt(ab_session *s)
{
	if (!s || s->state != SES_BUSY || s->done || s->stopped)
		return -EINVAL;
	s->stopped = "cancelled";
	s->grace_by = now_ms() + SES_GRACE_MS;
	return ab_run_signal(s->run, SIGUSR1);
}

AB_EXPORT int
ab_session_run(ab_session *s, const char *code, size_t len, int64_t timeout_ms, char **ret_cell,
	       ab_error **err)
{
	int r = ab_session_cell_start(s, code, len, timeout_ms, err);

	if (r < 0)
		return r;
	r = wait_until(s, never, ret_cell, err);
	return r < 0 ? r : 0;
}

AB_EXPORT char *
ab_session_info(const ab_session *s)
{
	json_t *j;
	char *text;

	if (!s)
		return NULL;
	j = session_json(s);
	json_object_set_new(j, "idle_ms",
			    json_integer(s->state == SES_READY ? now_ms() - s->last_used : 0));
	json_object_set_new(j, "age_ms", json_integer(now_ms() - s->created));
	text = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	return text;
}

AB_EXPORT int
ab_session_restart(ab_session *s, ab_error **err)
{
	char *why;

	if (!s)
		return api_fail(err, -EINVAL, 2, "pass the session ab_session_start returned",
				"no session given");
	if (s->state == SES_BUSY)
		return api_fail(err, -EBUSY, 2, "wait for the running cell (or interrupt it)",
				"session %s is running a cell", s->id);
	if (s->state != SES_ENDED)
		session_kill(s, "restarted by its caller");
	why = xasprintf("a fresh interpreter: the previous one ended (%s); its variables and "
			"files are gone",
			s->ended_why ? s->ended_why : "it ended");
	session_unlaunch(s);
	free(s->restart_why);
	s->restart_why = why;
	s->restarted = true;
	s->killed = false;
	if (session_launch(s, err) < 0)
		return -EIO;
	(void) wait_until(s, is_ready, NULL, err);
	if (s->state != SES_READY)
		return ended_error(s, err);
	return 0;
}

AB_EXPORT int
ab_session_close(ab_session *s, ab_result **ret, ab_error **err)
{
	int64_t until;
	int rc = 0;

	if (ret)
		*ret = NULL;
	if (!s)
		return 0;
	if (s->run) {
		/* the driver leaves on its socket's end; a cell still running is stopped */
		if (s->state == SES_BUSY && !s->done)
			(void) ab_run_signal(s->run, SIGUSR1);
		(void) shutdown(s->sock, SHUT_RDWR);
		until = now_ms() + SES_CLOSE_MS;
		while (s->run && now_ms() < until) {
			struct pollfd p = { .fd = ab_run_fd(s->run), .events = POLLIN };

			stream_read(s, &s->out);
			stream_read(s, &s->err);
			if (poll(&p, 1, 50) > 0)
				session_reap(s, "closed by its caller");
		}
		session_kill(s, "closed by its caller (the interpreter did not leave within 5 s; "
				"it was killed)");
	}
	if (s->final) {
		api_result_annotate(s->final, "session", session_json(s));
		if (ret) {
			*ret = s->final;
			s->final = NULL;
		}
	} else if (s->ended_status && strcmp(s->ended_status, "failed") == 0) {
		rc = api_fail(err, -EIO, 125, NULL, "session %s: %s", s->id,
			      s->ended_why ? s->ended_why : "failed");
	}
	session_free(s);
	return rc;
}

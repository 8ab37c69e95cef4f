/* pool.c: warm slots in a long-lived caller (include/agentbox/agentbox.h "warm slots";
 * docs/api.md, docs/design.md "Warm slots"). A slot is an agentbox-supervisor in slot mode
 * (src/supervisor/main.c) that built one future run's sandbox and waits with the interpreter
 * started; the pool keeps a number of them per class of specs, hands a run to a ready slot of
 * its class (warm) or starts it as ab_run_start would (cold), and replaces each slot it used
 * once that slot's run has ended (struct pool_run). It builds no more sandboxes at once than
 * the caller has CPUs (two at least), counting its runs' first moments (pool_busy).
 *
 * Each slot is a run handle (api-private.h) plus a SOCK_SEQPACKET control socket, its fd 6:
 * the slot says {"ready": {...}} or {"failed": {...}}; a claim is {"claim": {}} with the run's
 * spec (a sealed memfd) and its relay fds, answered {"accepted": true} or {"declined": WHY}.
 * A slot the pool lets go has its watch pipe and control socket closed: it kills its sandbox,
 * keeps nothing, and ends. What the pool does to the calling process: the fds of its slots
 * (four each) and one epoll fd; the supervisors are started and reaped as runs are (api.c). */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "../spec/options.h"
#include "../spec/spec.h"
#include "../util/fdutil.h"
#include "../util/macro.h"
#include "../util/xalloc.h"
#include "../warm/warm.h"
#include "api-private.h"

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

#define POOL_MAX_SLOTS       64    /* slots per class */
#define POOL_CLAIM_WAIT_MS   2000  /* a ready slot answers a claim at once; past this it is dead */
#define POOL_BACKOFF_MAX     60000 /* after failures, a class waits at most this long to retry */
#define POOL_REFILL_MAX_MS   250 /* a used slot's replacement waits for its run at most this long */
#define POOL_BUSY_MS         250 /* a run started from the pool counts as busy for this long */
#define POOL_REFILL_GRACE_MS 5   /* after a run's end, its caller's next run goes first */

enum slot_state {
	SLOT_STARTING,
	SLOT_READY,
	SLOT_DYING, /* let go: its supervisor cleans up; reaped when its pidfd says so */
};

struct pool_class;

struct pool_slot {
	struct pool_class *cls; /* NULL once dying */
	ab_run_handle *h;
	int ctl; /* our end of its control socket; -1 once dying */
	enum slot_state state;
	int64_t started_ms;
	uint64_t memory_bytes; /* what it held when ready */
	int64_t ready_ms;      /* from start to ready */
	struct pool_slot *next;
};

struct pool_class {
	char *key;    /* warm_class_key() of the template */
	json_t *tmpl; /* the template spec */
	json_t *slot; /* the supervisor's "slot" request: {"preimport": [...]} */
	enum ab_lang lang;
	unsigned want;   /* slots to keep */
	int64_t idle_ms; /* let the slots go after this long without a run (0: never) */
	int64_t last_used_ms;
	bool idle;         /* shrunk: no slots until a run of the class comes */
	unsigned failures; /* slots in a row that failed to start or ended unused: back-off */
	bool start_failed; /* the last slot started could not be made ready */
	int64_t retry_at_ms;
	char *last_error;
	uint64_t warm_runs, cold_runs, started, failed, lost;
	struct pool_class *next;
};

/* A run started from the pool (warm or cold), followed until it ends (the caller's handle's
 * fd, dup'd, reads as ended) or until_ms, whichever comes first. Until then:
 * - refill: it took a slot of cls, whose replacement waits. Building a slot takes a core for
 *   tens of ms; on a small machine, doing it while the run is short and under way would slow
 *   that run down by as much (bench/warm).
 * - every one counts as a sandbox at work (pool_busy): with runs back to back a slot built
 *   beside them found the cores taken, and with 2 runs and 2 slots on 2 cores the pool
 *   sustained 0.96x what cold runs do (bench/warm, issue 29).
 * When a tick finds one ended, no slot starts for POOL_REFILL_GRACE_MS (runs_check): a caller
 * with runs back to back starts its next one at once, and that run, not a slot, should get
 * the core. */
struct pool_run {
	struct pool_class *cls; /* NULL: a run of no class */
	bool refill;
	int fd; /* a dup of ab_run_fd of the run: readable once it ended */
	int64_t until_ms;
	struct pool_run *next;
};

struct ab_pool {
	ab_context *ctx;
	ab_context *own_ctx; /* made by ab_pool_new when ctx was NULL */
	int epfd;            /* every slot's control socket and pidfd */
	struct pool_class *classes;
	struct pool_slot *slots;
	struct pool_run *runs;
	unsigned cpus;         /* sandboxes at work at once, at most (pool_busy): 2 or more */
	int64_t hold_until_ms; /* a run just ended: no slot starts before (POOL_REFILL_GRACE_MS) */
	uint64_t unmatched_runs; /* runs of no class (or not for a slot at all): cold */
};

/* ---- slots ------------------------------------------------------------------------------ */

static void
slot_unwatch(ab_pool *p, struct pool_slot *sl)
{
	if (sl->ctl >= 0)
		(void) epoll_ctl(p->epfd, EPOLL_CTL_DEL, sl->ctl, NULL);
}

/* Lets a slot go: its supervisor sees both pipes end, kills its sandbox and ends; it is
 * reaped later (pool_reap) or by ab_pool_free. */
static void
slot_release(ab_pool *p, struct pool_slot *sl)
{
	slot_unwatch(p, sl);
	if (sl->ctl >= 0)
		(void) close(sl->ctl);
	sl->ctl = -1;
	if (sl->h && sl->h->watch_w >= 0) {
		(void) close(sl->h->watch_w);
		sl->h->watch_w = -1;
	}
	sl->cls = NULL;
	sl->state = SLOT_DYING;
}

static void
slot_unlink(ab_pool *p, struct pool_slot *sl)
{
	for (struct pool_slot **pp = &p->slots; *pp; pp = &(*pp)->next)
		if (*pp == sl) {
			*pp = sl->next;
			break;
		}
}

/* Forgets a slot whose supervisor has ended (or whose handle went to a run). */
static void
slot_drop(ab_pool *p, struct pool_slot *sl)
{
	slot_unlink(p, sl);
	slot_unwatch(p, sl);
	if (sl->h) {
		if (sl->h->pidfd >= 0)
			(void) epoll_ctl(p->epfd, EPOLL_CTL_DEL, sl->h->pidfd, NULL);
		(void) api_finish_quietly(sl->h); /* it has ended: no wait */
		api_run_free(sl->h);
	}
	if (sl->ctl >= 0)
		(void) close(sl->ctl);
	free(sl);
}

static unsigned
class_count(const ab_pool *p, const struct pool_class *c, int state)
{
	unsigned n = 0;

	for (const struct pool_slot *sl = p->slots; sl; sl = sl->next)
		if (sl->cls == c && (state < 0 || (int) sl->state == state))
			n++;
	return n;
}

static unsigned
class_refills(const ab_pool *p, const struct pool_class *c)
{
	unsigned n = 0;

	for (const struct pool_run *f = p->runs; f; f = f->next)
		n += f->refill && f->cls == c;
	return n;
}

/* Sandboxes at work for the pool: its slots being built and its runs in their first
 * POOL_BUSY_MS. A slot starts only while this is below the caller's CPUs: a slot built on a
 * core a run needs costs that run as much, and the context switches of more sandboxes than
 * cores cost both (bench/warm). A run that goes on longer stops counting, so long runs hold
 * back no slot for more than that. */
static unsigned
pool_busy(const ab_pool *p)
{
	unsigned n = 0;

	for (const struct pool_slot *sl = p->slots; sl; sl = sl->next)
		n += sl->cls && sl->state == SLOT_STARTING;
	for (const struct pool_run *f = p->runs; f; f = f->next)
		n++;
	return n;
}

static void
run_drop(ab_pool *p, struct pool_run *f)
{
	for (struct pool_run **pp = &p->runs; *pp; pp = &(*pp)->next)
		if (*pp == f) {
			*pp = f->next;
			break;
		}
	if (f->fd >= 0) {
		(void) epoll_ctl(p->epfd, EPOLL_CTL_DEL, f->fd, NULL);
		(void) close(f->fd);
	}
	free(f);
}

/* The run h started from the pool (of class c, or NULL): followed until it ends, at most
 * POOL_BUSY_MS (without an fd to watch: the deadline only). refill: it took a slot of c,
 * whose replacement waits as long. */
static void
run_follow(ab_pool *p, struct pool_class *c, bool refill, const ab_run_handle *h)
{
	struct pool_run *f = xcalloc(1, sizeof(*f));
	struct epoll_event ev = { .events = EPOLLIN };

	f->cls = c;
	f->refill = refill;
	f->fd = ab_run_fd(h) >= 0 ? fcntl(ab_run_fd(h), F_DUPFD_CLOEXEC, 3) : -1;
	f->until_ms = now_ms() + (refill ? POOL_REFILL_MAX_MS : POOL_BUSY_MS);
	ev.data.ptr = f;
	if (f->fd >= 0)
		(void) epoll_ctl(p->epfd, EPOLL_CTL_ADD, f->fd, &ev);
	f->next = p->runs;
	p->runs = f;
}

/* Runs that ended or whose time is up are let go: their classes may start slots. With hold,
 * after the grace of a run that ended: the caller learns of the end from its tick and may
 * start its next run at once. Without (a run starting now is that next run), at once. */
static void
runs_check(ab_pool *p, int64_t now, bool hold)
{
	struct pool_run *next;

	for (struct pool_run *f = p->runs; f; f = next) {
		struct pollfd pfd = { .fd = f->fd, .events = POLLIN };

		next = f->next;
		if (f->fd >= 0 && poll(&pfd, 1, 0) > 0 && pfd.revents && hold)
			p->hold_until_ms = now + POOL_REFILL_GRACE_MS;
		if (now >= f->until_ms || pfd.revents)
			run_drop(p, f);
	}
}

static int
slot_start(ab_pool *p, struct pool_class *c, ab_error **err)
{
	struct pool_slot *sl;
	struct epoll_event ev = { .events = EPOLLIN };
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return api_fail(err, -errno, 125, NULL, "socketpair: %s", strerror(errno));
	sl = xcalloc(1, sizeof(*sl));
	sl->cls = c;
	sl->ctl = sv[0];
	sl->state = SLOT_STARTING;
	sl->started_ms = now_ms();
	sl->h = api_start(p->ctx, "slot", "spec", c->tmpl, "slot", c->slot, NULL, sv[1], -1, err);
	(void) close(sv[1]);
	if (!sl->h) {
		(void) close(sl->ctl);
		free(sl);
		return -EIO;
	}
	ev.data.ptr = sl;
	(void) epoll_ctl(p->epfd, EPOLL_CTL_ADD, sl->ctl, &ev);
	if (sl->h->pidfd >= 0)
		(void) epoll_ctl(p->epfd, EPOLL_CTL_ADD, sl->h->pidfd, &ev);
	sl->next = p->slots;
	p->slots = sl;
	c->started++;
	return 0;
}

/* A slot could not be made ready, or (lost) a ready one ended before a run took it: its
 * replacement waits (1 s, doubling with each such slot in a row, at most a minute), so a
 * class whose slots keep dying costs a slot start a second at most, never a busy loop. */
static void
class_failed(struct pool_class *c, const char *why, bool lost)
{
	int64_t wait = 1000LL << (c->failures < 6 ? c->failures : 6);

	free(c->last_error);
	c->last_error = xstrdup(why    ? why
				: lost ? "a ready slot ended before a run took it"
				       : "the slot ended before it was ready");
	c->failures++;
	if (lost) {
		c->lost++;
	} else {
		c->failed++;
		c->start_failed = true;
	}
	c->retry_at_ms = now_ms() + (wait > POOL_BACKOFF_MAX ? POOL_BACKOFF_MAX : wait);
}

/* sl's supervisor is ending on its own (not let go by the pool, not claimed) */
static void
slot_ended(struct pool_slot *sl, const char *why)
{
	if (!sl->cls)
		return;
	if (sl->state == SLOT_STARTING)
		class_failed(sl->cls, why, false);
	else if (sl->state == SLOT_READY)
		class_failed(sl->cls, why, true);
}

/* Reads what a slot said (non-blocking). */
static void
slot_read(ab_pool *p, struct pool_slot *sl)
{
	char buf[65536];

	while (sl->ctl >= 0) {
		ssize_t n = recv(sl->ctl, buf, sizeof(buf) - 1, MSG_DONTWAIT);
		json_t *m, *v;

		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n <= 0) {
			/* its supervisor closed the socket: it is ending */
			slot_ended(sl, NULL);
			slot_release(p, sl);
			return;
		}
		buf[n] = '\0';
		m = json_loads(buf, 0, NULL);
		if ((v = json_object_get(m, "ready")) && sl->state == SLOT_STARTING && sl->cls) {
			sl->state = SLOT_READY;
			sl->memory_bytes =
				(uint64_t) json_integer_value(json_object_get(v, "memory_bytes"));
			sl->ready_ms = json_integer_value(json_object_get(v, "ready_ms"));
			/* a start that works ends a run of start failures, not of lost slots */
			if (sl->cls->start_failed)
				sl->cls->failures = 0;
			sl->cls->start_failed = false;
		} else if ((v = json_object_get(m, "failed"))) {
			slot_ended(sl, json_string_value(json_object_get(v, "message")));
			slot_release(p, sl);
		}
		json_decref(m);
	}
}

/* Slots whose supervisor ended: reaped and forgotten. */
static void
pool_reap(ab_pool *p)
{
	struct pool_slot *next;

	for (struct pool_slot *sl = p->slots; sl; sl = next) {
		siginfo_t si = { 0 };

		next = sl->next;
		if (!sl->h || sl->h->pidfd < 0 ||
		    waitid(P_PIDFD, (id_t) sl->h->pidfd, &si, WEXITED | WNOHANG | __WALL) < 0 ||
		    si.si_pid == 0)
			continue;
		sl->h->waited = true;
		slot_ended(sl, NULL);
		slot_drop(p, sl);
	}
}

/* Everything that can be done without waiting: read the slots, reap ended ones, let idle
 * classes go, and unless !start, start the slots classes lack. Returns ms until it should run
 * again, or -1. */
static int
pool_work_as(ab_pool *p, bool start)
{
	int64_t now, next = -1;
	struct pool_slot *nsl;

	/* epfd is level-triggered: once what is below is done, nothing in it is readable */
	for (struct pool_slot *sl = p->slots; sl; sl = nsl) {
		nsl = sl->next;
		if (sl->ctl >= 0)
			slot_read(p, sl);
	}
	pool_reap(p);
	now = now_ms();
	runs_check(p, now, start);
	for (struct pool_run *f = p->runs; f; f = f->next)
		if (next < 0 || f->until_ms - now < next)
			next = f->until_ms - now;
	if (start && now < p->hold_until_ms) {
		start = false; /* a run just ended: its caller's next one goes first */
		next = next < 0 || p->hold_until_ms - now < next ? p->hold_until_ms - now : next;
	}
	for (struct pool_class *c = p->classes; c; c = c->next) {
		int64_t at;

		if (!c->idle && c->idle_ms > 0 && now - c->last_used_ms >= c->idle_ms) {
			/* nobody ran anything of this class for a while: the pool shrinks */
			for (struct pool_slot *sl = p->slots; sl; sl = sl->next)
				if (sl->cls == c)
					slot_release(p, sl);
			c->idle = true;
		}
		if (c->idle)
			continue;
		if (c->idle_ms > 0) {
			at = c->last_used_ms + c->idle_ms - now;
			if (next < 0 || at < next)
				next = at;
		}
		if (now < c->retry_at_ms) {
			at = c->retry_at_ms - now;
			if (next < 0 || at < next)
				next = at;
			continue;
		}
		while (start && class_count(p, c, -1) + class_refills(p, c) < c->want &&
		       pool_busy(p) < p->cpus && slot_start(p, c, NULL) == 0)
			;
	}
	for (struct pool_slot *sl = p->slots; sl; sl = sl->next)
		if (sl->state == SLOT_DYING && (next < 0 || next > 100))
			next = 100; /* to reap it */
	return next < 0 ? -1 : next > INT32_MAX ? INT32_MAX : (int) next;
}

static int
pool_work(ab_pool *p)
{
	return pool_work_as(p, true);
}

/* ---- the API ---------------------------------------------------------------------------- */

AB_EXPORT ab_pool *
ab_pool_new(ab_context *ctx, ab_error **err)
{
	ab_pool *p = xcalloc(1, sizeof(*p));

	p->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (p->epfd < 0) {
		api_fail(err, -errno, 125, NULL, "epoll_create1: %s", strerror(errno));
		free(p);
		return NULL;
	}
	if (!ctx) {
		p->own_ctx = ab_context_new(err);
		if (!p->own_ctx) {
			(void) close(p->epfd);
			free(p);
			return NULL;
		}
		ctx = p->own_ctx;
	}
	p->ctx = ctx;
	{
		cpu_set_t set;

		/* with one CPU, two: a slot built beside one run, as before the budget; a
		 * caller that never ticks would otherwise see no slot made again */
		p->cpus = sched_getaffinity(0, sizeof(set), &set) == 0 ? (unsigned) CPU_COUNT(&set)
								       : 1;
		if (p->cpus < 2)
			p->cpus = 2;
	}
	return p;
}

AB_EXPORT int
ab_pool_add(ab_pool *p, const ab_spec *tmpl, unsigned slots, const char *opts_json, ab_error **err)
{
	struct ab_run_opts o;
	struct ab_err e = { 0 };
	const json_t *j = api_spec_json(tmpl);
	json_t *opts = NULL, *pre, *slot;
	struct pool_class *c;
	const char *why, *key;
	json_error_t je;
	size_t i;
	json_t *v;
	int r;

	if (!p || !j)
		return api_fail(err, -EINVAL, 2, "pass the pool ab_pool_new made and a spec",
				"pool: no pool or no template spec");
	if (slots > POOL_MAX_SLOTS)
		return api_fail(err, -EINVAL, 2, "ask for fewer slots",
				"pool: at most %d slots per class", POOL_MAX_SLOTS);
	if (opts_json) {
		opts = json_loads(opts_json, 0, &je);
		if (!json_is_object(opts)) {
			json_decref(opts);
			return api_fail(err, -EINVAL, 2,
					"pass {\"preimport\": [...], \"idle_ms\": N} or NULL",
					"pool: options are not a JSON object");
		}
	}
	json_object_foreach(opts, key, v)
	{
		if (strcmp(key, "preimport") != 0 && strcmp(key, "idle_ms") != 0) {
			/* the message first: key belongs to opts */
			r = api_fail(err, -EINVAL, 2, "use preimport or idle_ms",
				     "pool: unknown option \"%s\"", key);
			json_decref(opts);
			return r;
		}
	}
	run_opts_init(&o);
	r = spec_parse(j, &o, &e);
	why = r < 0 ? NULL : warm_refusal(&o);
	if (r < 0 || why) {
		run_opts_done(&o);
		json_decref(opts);
		return r < 0 ? api_fail_ab(err, &e)
			     : api_fail(err, -EINVAL, 2,
					"run such specs cold (ab_run_start); docs/warm.md says "
					"which specs a slot can serve",
					"pool: no warm slot for this spec: %s", why);
	}
	pre = json_object_get(opts, "preimport");
	if (pre && (!json_is_array(pre) || json_array_size(pre) > AB_WARM_MAX_MODS)) {
		run_opts_done(&o);
		json_decref(opts);
		return api_fail(err, -EINVAL, 2, "list the module names in an array",
				"pool: \"preimport\" must be an array of at most %d names",
				AB_WARM_MAX_MODS);
	}
	json_array_foreach(pre, i, v)
	{
		if (!json_is_string(v) || !warm_module_ok(o.lang, json_string_value(v))) {
			r = api_fail(err, -EINVAL, 2, "name a module as an import statement would",
				     "pool: pre-import '%s' is not a %s module name",
				     json_is_string(v) ? json_string_value(v) : "?",
				     o.lang == AB_LANG_NODE ? "Node" : "Python");
			run_opts_done(&o);
			json_decref(opts);
			return r;
		}
	}
	{
		cleanup_free char *k = warm_class_key(j);

		for (struct pool_class *x = p->classes; x; x = x->next)
			if (strcmp(x->key, k) == 0) {
				run_opts_done(&o);
				json_decref(opts);
				return api_fail(err, -EEXIST, 2, NULL,
						"pool: this class is in the pool already");
			}
	}
	c = xcalloc(1, sizeof(*c));
	c->key = warm_class_key(j);
	c->tmpl = json_deep_copy(j);
	slot = json_object();
	json_object_set_new(slot, "preimport", pre ? json_deep_copy(pre) : json_array());
	c->slot = slot;
	c->lang = o.lang;
	c->want = slots;
	c->idle_ms = json_integer_value(json_object_get(opts, "idle_ms"));
	c->last_used_ms = now_ms();
	run_opts_done(&o);
	json_decref(opts);
	c->next = p->classes;
	p->classes = c;
	(void) pool_work(p);
	return 0;
}

AB_EXPORT int
ab_pool_fd(const ab_pool *p)
{
	return p ? p->epfd : -1;
}

AB_EXPORT int
ab_pool_tick(ab_pool *p)
{
	return p ? pool_work(p) : -1;
}

/* Hands the run to sl. Returns the run's handle, or NULL when the slot did not take it
 * (*declined: it is alive and said no, else it is dead and let go). */
static ab_run_handle *
claim(ab_pool *p, struct pool_slot *sl, const ab_spec *s, const ab_io *io, bool *declined)
{
	cleanup_free char *text = json_dumps(api_spec_json(s), JSON_COMPACT);
	cleanup_fd int mfd = -1, nul = -1;
	static const char msg[] = "{\"claim\":{}}";
	struct pollfd pfd = { .fd = sl->ctl, .events = POLLIN };
	char reply[4096];
	int fds[3];
	json_t *rj;
	ssize_t n;
	ab_run_handle *h;

	*declined = false;
	mfd = memfd_create("agentbox-claim", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	nul = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (!text || mfd < 0 || nul < 0 || write_all(mfd, text, strlen(text)) < 0 ||
	    fcntl(mfd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) < 0)
		return NULL;
	fds[0] = mfd;
	fds[1] = io && io->out_fd >= 0 ? io->out_fd : nul;
	fds[2] = io && io->err_fd >= 0 ? io->err_fd : nul;
	if (fd_send(sl->ctl, msg, sizeof(msg) - 1, fds, 3) < 0)
		goto dead;
	/* a ready slot answers at once; the claim is the only thing it waits for */
	for (;;) {
		int r = RETRY_EINTR(poll(&pfd, 1, POOL_CLAIM_WAIT_MS));

		if (r <= 0)
			goto dead;
		n = RETRY_EINTR(recv(sl->ctl, reply, sizeof(reply) - 1, 0));
		if (n <= 0)
			goto dead;
		reply[n] = '\0';
		rj = json_loads(reply, 0, NULL);
		if (json_is_true(json_object_get(rj, "accepted"))) {
			json_decref(rj);
			break;
		}
		if (json_object_get(rj, "declined")) {
			json_decref(rj);
			*declined = true;
			return NULL;
		}
		json_decref(rj); /* something said before: read on */
	}
	h = sl->h;
	sl->h = NULL;
	if (h->pidfd >= 0)
		(void) epoll_ctl(p->epfd, EPOLL_CTL_DEL, h->pidfd, NULL);
	slot_drop(p, sl);
	return h;
dead:
	slot_ended(sl, "a ready slot did not answer its claim");
	slot_release(p, sl);
	return NULL;
}

AB_EXPORT ab_run_handle *
ab_pool_run_start(ab_pool *p, const ab_spec *s, const ab_io *io, ab_error **err)
{
	struct ab_run_opts o;
	struct ab_err e = { 0 };
	const json_t *j = api_spec_json(s);
	cleanup_free char *key = NULL;
	struct pool_class *c = NULL;
	ab_run_handle *h;
	bool eligible;
	int r;

	if (!p || !j)
		return api_fail(err, -EINVAL, 2, "pass the pool ab_pool_new made and a spec",
				"no pool or no spec given"),
		       NULL;
	run_opts_init(&o);
	r = spec_parse(j, &o, &e);
	eligible = r == 0 && !warm_refusal(&o);
	run_opts_done(&o);
	if (r < 0)
		return api_fail_ab(err, &e), NULL;
	/* which slots are ready; a slot lacking starts after this run did (pool_busy) */
	(void) pool_work_as(p, false);
	if (eligible) {
		key = warm_class_key(j);
		for (c = p->classes; c && strcmp(c->key, key) != 0; c = c->next)
			;
	}
	if (c) {
		struct pool_slot *nsl;
		bool declined = false;

		c->last_used_ms = now_ms();
		if (c->idle) {
			c->idle = false; /* the class is wanted again: refill below */
			c->retry_at_ms = 0;
		}
		for (struct pool_slot *sl = p->slots; sl && !declined; sl = nsl) {
			nsl = sl->next;
			if (sl->cls != c || sl->state != SLOT_READY)
				continue;
			h = claim(p, sl, s, io, &declined);
			if (h) {
				c->warm_runs++;
				c->failures = 0;
				run_follow(p, c, true, h);
				return h;
			}
		}
		c->cold_runs++;
	} else {
		p->unmatched_runs++;
	}
	h = ab_run_start(p->ctx, s, io, err);
	if (h)
		run_follow(p, c, false, h);
	(void) pool_work(p);
	return h;
}

AB_EXPORT int
ab_pool_wait_ready(ab_pool *p, int timeout_ms, ab_error **err)
{
	int64_t end = now_ms() + (timeout_ms < 0 ? 0 : timeout_ms);

	if (!p)
		return api_fail(err, -EINVAL, 2, "pass the pool ab_pool_new made", "no pool given");
	for (;;) {
		int next = pool_work(p);
		bool all = true;
		int64_t left;
		struct pollfd pfd = { .fd = p->epfd, .events = POLLIN };

		for (struct pool_class *c = p->classes; c; c = c->next) {
			if (c->idle || class_count(p, c, SLOT_READY) >= c->want)
				continue;
			all = false;
			if (c->start_failed)
				return api_fail(err, -EIO, 125,
						"see the pool's info (ab_pool_info)",
						"a warm slot failed: %s",
						c->last_error ? c->last_error : "?");
		}
		if (all)
			return 0;
		left = end - now_ms();
		if (left <= 0)
			return api_fail(err, -ETIMEDOUT, 125, NULL,
					"the warm slots were not ready after %d ms", timeout_ms);
		if (next >= 0 && next < left)
			left = next;
		(void) poll(&pfd, 1, (int) (left > 1000 ? 1000 : left));
	}
}

AB_EXPORT char *
ab_pool_info(ab_pool *p)
{
	json_t *classes = json_array(), *o;
	uint64_t total = 0;
	char *text;

	if (!p)
		return NULL;
	(void) pool_work(p);
	for (struct pool_class *c = p->classes; c; c = c->next) {
		uint64_t mem = 0;
		int64_t ready_ms = -1;
		json_t *tmpl = json_loads(c->key, 0, NULL); /* the class: no per-run keys */

		for (struct pool_slot *sl = p->slots; sl; sl = sl->next)
			if (sl->cls == c && sl->state == SLOT_READY) {
				mem += sl->memory_bytes;
				ready_ms = sl->ready_ms;
			}
		total += mem;
		json_array_append_new(
			classes,
			json_pack("{s:o, s:s, s:O, s:i, s:i, s:i, s:I, s:I, s:I, s:b, s:I, s:I, "
				  "s:I, s:I, s:I, s:I, s:o}",
				  "spec", tmpl, "language",
				  c->lang == AB_LANG_NODE ? "node" : "python", "preimport",
				  json_object_get(c->slot, "preimport"), "slots", (int) c->want,
				  "ready", (int) class_count(p, c, SLOT_READY), "starting",
				  (int) class_count(p, c, SLOT_STARTING), "memory_bytes",
				  (json_int_t) mem, "slot_ready_ms", (json_int_t) ready_ms,
				  "idle_ms", (json_int_t) c->idle_ms, "idle", c->idle, "warm_runs",
				  (json_int_t) c->warm_runs, "cold_runs", (json_int_t) c->cold_runs,
				  "slots_started", (json_int_t) c->started, "slots_failed",
				  (json_int_t) c->failed, "slots_lost", (json_int_t) c->lost,
				  "retry_in_ms",
				  (json_int_t) (c->retry_at_ms > now_ms()
							? c->retry_at_ms - now_ms()
							: 0),
				  "last_error",
				  c->last_error ? json_string(c->last_error) : json_null()));
	}
	o = json_pack("{s:o, s:I, s:I}", "classes", classes, "memory_bytes", (json_int_t) total,
		      "other_runs", (json_int_t) p->unmatched_runs);
	text = json_dumps(o, JSON_INDENT(2) | JSON_SORT_KEYS);
	json_decref(o);
	return text;
}

AB_EXPORT void
ab_pool_free(ab_pool *p)
{
	struct pool_class *nc;

	if (!p)
		return;
	for (struct pool_slot *sl = p->slots; sl; sl = sl->next)
		slot_release(p, sl);
	/* each supervisor kills its sandbox and ends: wait for them, so none outlives the pool */
	while (p->slots) {
		struct pool_slot *sl = p->slots;

		if (sl->h)
			(void) api_finish_quietly(sl->h);
		slot_drop(p, sl);
	}
	while (p->runs)
		run_drop(p, p->runs);
	for (struct pool_class *c = p->classes; c; c = nc) {
		nc = c->next;
		free(c->key);
		json_decref(c->tmpl);
		json_decref(c->slot);
		free(c->last_error);
		free(c);
	}
	(void) close(p->epfd);
	ab_context_free(p->own_ctx);
	free(p);
}

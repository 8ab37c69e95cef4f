/* input.c: what `agentbox mcp` reads (issue 24), bounded in bytes.
 *
 * The reader splits stdin into lines (one JSON-RPC message each) and holds a line whole only
 * while it may be taken: at most --max-message bytes, and no more than the byte budget
 * (--max-pending-bytes) leaves. Past that it keeps the line's skeleton instead: the same
 * JSON with every string cut to MCP_SKEL_KEEP bytes, which still carries the id, the method
 * and the tool's name. A refusal then costs no memory and no parse of the whole message,
 * and names the request it refuses. The skeleton is made by following string literals only
 * (quotes, backslash escapes, \u escapes and surrogate pairs, UTF-8 sequences, so a cut
 * never splits one); jansson parses it like any message.
 *
 * jansson parses about 25 MB/s: a message of 15 MiB holds the loop 0.6 s. Lines over
 * MCP_INLINE_PARSE are parsed by a thread of their own (json_loadb, nothing else), so the
 * loop keeps answering other requests meanwhile; their replies may come in another order
 * than their requests, which JSON-RPC allows (ids pair them). */
#include "input.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../util/hex.h"
#include "../util/xalloc.h"

/* ---- the reader (pure) ---- */

void
mcp_reader_init(struct mcp_reader *r)
{
	memset(r, 0, sizeof(*r));
	r->whole = true;
}

void
mcp_reader_done(struct mcp_reader *r)
{
	free(r->buf);
	free(r->skel);
	mcp_reader_init(r);
}

size_t
mcp_reader_held(const struct mcp_reader *r)
{
	return r->cap + r->skel_cap;
}

static void
skel_push(struct mcp_reader *r, char c)
{
	if (r->skel_len >= MCP_SKEL_MAX) {
		r->skel_full = true;
		return;
	}
	if (r->skel_len == r->skel_cap) {
		r->skel_cap = r->skel_cap ? 2 * r->skel_cap : 4096;
		r->skel = xrealloc(r->skel, r->skel_cap);
	}
	r->skel[r->skel_len++] = c;
}

/* One byte of the line into the skeleton. Outside strings everything is kept; inside one,
 * the first MCP_SKEL_KEEP bytes and the closing quote. A string is cut only where a cut
 * leaves valid JSON: not inside an escape, not after a high surrogate, not before a UTF-8
 * continuation byte. */
static void
skel_byte(struct mcp_reader *r, unsigned char c)
{
	if (!r->in_str) {
		if (c == '"') {
			r->in_str = true;
			r->kept = 0;
			r->cutting = r->esc = r->high = false;
			r->hex = 0;
		}
		skel_push(r, (char) c);
		return;
	}
	if (r->cutting) { /* only where the string ends matters now */
		if (r->esc)
			r->esc = false;
		else if (c == '\\')
			r->esc = true;
		else if (c == '"') {
			skel_push(r, '"');
			r->in_str = false;
		}
		return;
	}
	if (!r->esc && r->hex == 0 && c == '"') {
		skel_push(r, '"');
		r->in_str = false;
		return;
	}
	if (r->kept >= MCP_SKEL_KEEP && !r->esc && r->hex == 0 && !r->high && (c & 0xc0) != 0x80) {
		r->cutting = true;
		r->esc = c == '\\';
		return;
	}
	if (r->hex > 0) {
		{
			int v = hex_digit(c);

			r->code = (r->code << 4) | (unsigned) (v < 0 ? 0 : v);
		}
		if (--r->hex == 0)
			r->high = r->code >= 0xd800 && r->code <= 0xdbff;
	} else if (r->esc) {
		r->esc = false;
		if (c == 'u') {
			r->hex = 4;
			r->code = 0;
		}
	} else if (c == '\\') {
		r->esc = true;
	} else {
		r->high = false;
	}
	r->kept++;
	skel_push(r, (char) c);
}

/* The line passed what it may take: from now on only its skeleton. */
static void
to_skeleton(struct mcp_reader *r)
{
	for (size_t i = 0; i < r->len; i++)
		skel_byte(r, (unsigned char) r->buf[i]);
	free(r->buf);
	r->buf = NULL;
	r->len = r->cap = 0;
	r->whole = false;
}

static void
end_line(struct mcp_reader *r, mcp_line_fn fn, void *ctx)
{
	bool taken = false;

	if (r->whole) {
		size_t len = r->len;

		if (len > 0 && r->buf[len - 1] == '\r')
			len--;
		if (len > 0)
			taken = fn(ctx, r->buf, len, r->total, true);
	} else {
		taken = fn(ctx, r->skel_full ? NULL : r->skel, r->skel_full ? 0 : r->skel_len,
			   r->total, false);
	}
	if (taken) { /* the callee owns the buffer now */
		r->buf = NULL;
		r->cap = 0;
	}
	free(r->skel);
	r->skel = NULL;
	r->skel_len = r->skel_cap = 0;
	r->len = r->total = 0;
	r->whole = true;
	r->skel_full = r->in_str = r->esc = r->cutting = r->high = false;
	r->hex = 0;
}

void
mcp_reader_feed(struct mcp_reader *r, const char *data, size_t n, size_t allow, mcp_line_fn fn,
		void *ctx)
{
	while (n > 0) {
		const char *nl = memchr(data, '\n', n);
		size_t k = nl ? (size_t) (nl - data) : n;

		r->total += k;
		if (r->whole && r->total > allow)
			to_skeleton(r);
		if (r->whole) {
			if (r->len + k > r->cap) {
				size_t want = r->cap ? r->cap : 65536;

				while (want < r->len + k)
					want *= 2;
				if (want > allow + 1)
					want = allow + 1;
				r->buf = xrealloc(r->buf, want);
				r->cap = want;
			}
			memcpy(r->buf + r->len, data, k);
			r->len += k;
		} else {
			for (size_t i = 0; i < k; i++)
				skel_byte(r, (unsigned char) data[i]);
		}
		data += k;
		n -= k;
		if (nl) {
			end_line(r, fn, ctx);
			data++;
			n--;
		}
	}
}

/* ---- the parse thread ---- */

static void *
parser_main(void *arg)
{
	struct mcp_parser *p = arg;

	pthread_mutex_lock(&p->mu);
	for (;;) {
		struct mcp_parsed *it;

		while (!p->todo && !p->stop)
			pthread_cond_wait(&p->cv, &p->mu);
		if (p->stop)
			break;
		it = p->todo;
		p->todo = it->next;
		pthread_mutex_unlock(&p->mu);
		it->msg = json_loadb(it->text, it->len, JSON_REJECT_DUPLICATES, &it->err);
		free(it->text);
		it->text = NULL;
		it->next = NULL;
		pthread_mutex_lock(&p->mu);
		*p->done_tail = it;
		p->done_tail = &it->next;
		(void) !write(p->wake[1], "", 1);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

int
mcp_parser_start(struct mcp_parser *p)
{
	sigset_t all, old;
	int r;

	memset(p, 0, sizeof(*p));
	p->done_tail = &p->done;
	if (pipe2(p->wake, O_CLOEXEC | O_NONBLOCK) < 0)
		return -errno;
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	/* jansson seeds its hash function once; before a second thread uses it */
	json_object_seed(0);
	/* every signal is the loop's (its signalfd): the thread starts with them all blocked */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	r = pthread_create(&p->thread, NULL, parser_main, p);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r != 0) {
		(void) close(p->wake[0]);
		(void) close(p->wake[1]);
		p->wake[0] = p->wake[1] = -1;
		return -r;
	}
	p->running = true;
	return 0;
}

void
mcp_parser_submit(struct mcp_parser *p, char *text, size_t len)
{
	struct mcp_parsed *it = xcalloc(1, sizeof(*it)), **tail;

	it->text = text;
	it->len = len;
	pthread_mutex_lock(&p->mu);
	for (tail = &p->todo; *tail; tail = &(*tail)->next)
		;
	*tail = it;
	/* the text, the lexer's buffer for a long string (up to twice it) and the tree */
	p->held += 4 * len;
	pthread_cond_signal(&p->cv);
	pthread_mutex_unlock(&p->mu);
}

struct mcp_parsed *
mcp_parser_take(struct mcp_parser *p)
{
	struct mcp_parsed *it;
	char c;

	while (read(p->wake[0], &c, 1) == 1)
		;
	pthread_mutex_lock(&p->mu);
	it = p->done;
	if (it) {
		p->done = it->next;
		if (!p->done)
			p->done_tail = &p->done;
		p->held -= 4 * it->len;
	}
	pthread_mutex_unlock(&p->mu);
	return it;
}

size_t
mcp_parser_held(struct mcp_parser *p)
{
	size_t h;

	pthread_mutex_lock(&p->mu);
	h = p->held;
	pthread_mutex_unlock(&p->mu);
	return h;
}

void
mcp_parsed_free(struct mcp_parsed *it)
{
	if (!it)
		return;
	json_decref(it->msg);
	free(it->text);
	free(it);
}

void
mcp_parser_stop(struct mcp_parser *p)
{
	struct mcp_parsed *it;

	if (!p->running)
		return;
	pthread_mutex_lock(&p->mu);
	p->stop = true;
	pthread_cond_signal(&p->cv);
	pthread_mutex_unlock(&p->mu);
	pthread_join(p->thread, NULL);
	while ((it = p->todo)) {
		p->todo = it->next;
		mcp_parsed_free(it);
	}
	while ((it = p->done)) {
		p->done = it->next;
		mcp_parsed_free(it);
	}
	(void) close(p->wake[0]);
	(void) close(p->wake[1]);
	pthread_cond_destroy(&p->cv);
	pthread_mutex_destroy(&p->mu);
	p->running = false;
}

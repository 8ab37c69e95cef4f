/* input.h: what `agentbox mcp` reads, bounded in bytes (input.c, issue 24). */
#pragma once

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#define MCP_SKEL_KEEP    256          /* bytes of each string a skeleton keeps */
#define MCP_SKEL_MAX     (1u << 20)   /* a skeleton past this identifies nothing */
#define MCP_INLINE_PARSE (256u << 10) /* longer lines are parsed by the parse thread */

/* A line: text and len (without its newline or a trailing \r), total its bytes as read.
 * whole: text is the line; else text is its skeleton (NULL when even that was too large).
 * Returns true when it keeps text (a whole line's buffer: it frees it itself). */
typedef bool (*mcp_line_fn)(void *ctx, char *text, size_t len, size_t total, bool whole);

struct mcp_reader {
	char *buf; /* the line so far, while it is whole */
	size_t len, cap;
	char *skel; /* its skeleton, once it is not */
	size_t skel_len, skel_cap;
	size_t total; /* bytes of the line so far */
	bool whole;
	bool skel_full; /* the skeleton passed MCP_SKEL_MAX */
	/* where the skeleton is in the JSON text */
	bool in_str, esc, cutting, high;
	unsigned hex, code;
	size_t kept;
};

void mcp_reader_init(struct mcp_reader *r);
void mcp_reader_done(struct mcp_reader *r);
/* Feeds n bytes; calls fn for each line they complete. allow: the most a line may hold whole
 * now (--max-message, or what the byte budget leaves if that is less). */
void mcp_reader_feed(struct mcp_reader *r, const char *data, size_t n, size_t allow, mcp_line_fn fn,
		     void *ctx);
/* Bytes the reader holds now. */
size_t mcp_reader_held(const struct mcp_reader *r);

/* A line parsed by the parse thread. */
struct mcp_parsed {
	struct mcp_parsed *next;
	char *text; /* owned until parsed */
	size_t len;
	json_t *msg; /* NULL: err says why */
	json_error_t err;
};

struct mcp_parser {
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct mcp_parsed *todo, *done, **done_tail;
	int wake[2]; /* a byte on wake[0] for each line parsed */
	size_t held; /* bytes the lines submitted and not taken back may hold (4x their length) */
	bool stop, running;
};

/* Starts the thread. Returns 0 or -errno. */
int mcp_parser_start(struct mcp_parser *p);
/* Hands text (malloc'd, len bytes) to the thread. */
void mcp_parser_submit(struct mcp_parser *p, char *text, size_t len);
/* A parsed line (free with mcp_parsed_free), or NULL when none is ready. Poll wake[0]. */
struct mcp_parsed *mcp_parser_take(struct mcp_parser *p);
size_t mcp_parser_held(struct mcp_parser *p);
void mcp_parsed_free(struct mcp_parsed *it);
/* Stops the thread; lines not taken are dropped. */
void mcp_parser_stop(struct mcp_parser *p);

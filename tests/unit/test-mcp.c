/* Unit tests for the MCP server's pure parts: run ids, paths a client may give, agentbox://
 * URIs, base64, UTF-8, and the message handler itself (JSON-RPC errors, the two protocol
 * eras, notifications never answered), with replies captured instead of written; the stdin
 * reader (a line whole or its skeleton, issue 24) and the refusals it leads to. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "src/mcp/input.h"
#include "src/mcp/mcp.h"
#include "tests/tap.h"

static json_t *sent; /* every message the handler sent */

static void
capture(struct mcp *m, json_t *msg)
{
	(void) m;
	json_array_append(sent, msg);
}

/* Hands line to a fresh-ish server m and returns the one reply (NULL when none or several). */
/* r as text, valid until the next call */
static const char *
json_dumps_tmp(const json_t *r)
{
	static char *text;

	free(text);
	text = json_dumps(r, JSON_COMPACT);
	return text ? text : "";
}

static json_t *
one(struct mcp *m, const char *line)
{
	json_array_clear(sent);
	mcp_handle_line(m, line, strlen(line));
	return json_array_size(sent) == 1 ? json_array_get(sent, 0) : NULL;
}

static int
code_of(json_t *r)
{
	return (int) json_integer_value(json_object_get(json_object_get(r, "error"), "code"));
}

static void
test_helpers(void)
{
	char id[MCP_ID_LEN + 1], id2[MCP_ID_LEN + 1];
	char *path = NULL, *uri;
	size_t n = 0;
	unsigned char *bin;
	char *b;

	mcp_id_new(id);
	mcp_id_new(id2);
	TAP_OK(mcp_id_valid(id) && strcmp(id, id2) != 0,
	       "run ids: 12 of [a-z0-9], fresh each time");
	TAP_OK(!mcp_id_valid("ABCDEFGHIJKL") && !mcp_id_valid("abc") &&
		       !mcp_id_valid("../../etc/pa") && !mcp_id_valid(NULL),
	       "run ids: anything else is not one");

	TAP_OK(mcp_path_ok("a.txt") && mcp_path_ok("d/e/f.png") && mcp_path_ok(".hidden"),
	       "paths: relative ones");
	TAP_OK(!mcp_path_ok("") && !mcp_path_ok("/etc/passwd") && !mcp_path_ok("../x") &&
		       !mcp_path_ok("a/../../x") && !mcp_path_ok("a//b") && !mcp_path_ok("./a") &&
		       !mcp_path_ok("a/") && !mcp_path_ok(".."),
	       "paths: absolute, '..', '.', empty components refused");

	uri = mcp_uri_build(id, "dir/a b%.txt");
	TAP_OK(strstr(uri, "/files/dir/a%20b%25.txt") != NULL, "URI: the path percent-encoded (%s)",
	       uri);
	TAP_OK(mcp_uri_parse(uri, id2, &path) == 0 && strcmp(id2, id) == 0 &&
		       strcmp(path, "dir/a b%.txt") == 0,
	       "URI: parses back to the run id and the path");
	free(path);
	free(uri);
	path = NULL;
	TAP_OK(mcp_uri_parse("agentbox://runs/abcdefabcdef/files/..%2F..%2Fx", id2, &path) < 0 &&
		       mcp_uri_parse("agentbox://runs/abcdefabcdef/files/a%00b", id2, &path) < 0 &&
		       mcp_uri_parse("agentbox://runs/abcdefabcdef/files/%2Fetc", id2, &path) < 0 &&
		       mcp_uri_parse("agentbox://runs/abc/files/x", id2, &path) < 0 &&
		       mcp_uri_parse("file:///etc/passwd", id2, &path) < 0 &&
		       mcp_uri_parse("agentbox://runs/abcdefabcdef/files/%zz", id2, &path) < 0,
	       "URI: traversal (even encoded), NUL, absolute, bad ids and escapes refused");

	b = mcp_base64((const unsigned char *) "hello!?", 7);
	TAP_STREQ(b, "aGVsbG8hPw==", "base64 encodes with padding");
	bin = mcp_unbase64(b, strlen(b), 100, &n);
	TAP_OK(bin && n == 7 && memcmp(bin, "hello!?", 7) == 0, "base64 decodes back");
	free(bin);
	TAP_OK(mcp_unbase64(b, strlen(b), 6, &n) == NULL, "base64: over the cap is refused");
	TAP_OK(mcp_unbase64("a$==", 4, 100, &n) == NULL && mcp_unbase64("a", 1, 100, &n) == NULL,
	       "base64: invalid input is refused");
	free(b);

	TAP_OK(mcp_utf8_valid("h\xc3\xa9", 3) && !mcp_utf8_valid("\xff", 1) &&
		       !mcp_utf8_valid("\xc3", 1) && !mcp_utf8_valid("a\0b", 3) &&
		       !mcp_utf8_valid("\xed\xa0\x80", 3),
	       "UTF-8: valid text only (no NUL, no surrogates, nothing cut)");
	TAP_STREQ(mcp_mime_type("plot.PNG"), "image/png", "MIME type by extension");
	TAP_STREQ(mcp_mime_type("d.x/noext"), "application/octet-stream", "MIME type fallback");
}

static void
test_handler(void)
{
	struct mcp m;
	json_t *r;
	static const char meta[] =
		"\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":"
		"\"2026-07-28\",\"io.modelcontextprotocol/clientCapabilities\":{}}";
	char line[512];

	mcp_init(&m);
	m.fuzzing = true; /* no state directory, no runs */
	m.send = capture;

	r = one(&m, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}");
	TAP_OK(r && code_of(r) == MCP_INVALID_REQUEST, "before initialize: -32600");
	r = one(&m, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}");
	TAP_OK(r && json_is_object(json_object_get(r, "result")), "ping before initialize");
	r = one(&m, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"initialize\",\"params\":"
		    "{\"protocolVersion\":\"2024-11-05\"}}");
	TAP_STREQ(
		json_string_value(json_object_get(json_object_get(r, "result"), "protocolVersion")),
		"2025-11-25", "initialize with a version we do not speak: answered with ours");
	r = one(&m, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/list\"}");
	TAP_OK(r && json_array_size(json_object_get(json_object_get(r, "result"), "tools")) == 10 &&
		       !json_object_get(json_object_get(r, "result"), "resultType"),
	       "tools/list: 10 tools, no resultType in the legacy era");

	r = one(&m, "{\"jsonrpc\":\"2.0\",\"id\":4,");
	TAP_OK(r && code_of(r) == MCP_PARSE_ERROR && json_is_null(json_object_get(r, "id")),
	       "not JSON: -32700, id null");
	r = one(&m, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"ping\",\"id\":5}");
	TAP_OK(r && code_of(r) == MCP_PARSE_ERROR, "duplicate keys: -32700");
	r = one(&m, "[{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"ping\"}]");
	TAP_OK(r && code_of(r) == MCP_INVALID_REQUEST, "a batch: -32600");
	r = one(&m, "{\"jsonrpc\":\"1.0\",\"id\":4,\"method\":\"ping\"}");
	TAP_OK(r && code_of(r) == MCP_INVALID_REQUEST &&
		       json_integer_value(json_object_get(r, "id")) == 4,
	       "jsonrpc 1.0: -32600 with the id");
	r = one(&m, "{\"jsonrpc\":\"2.0\",\"id\":4.5,\"method\":\"ping\"}");
	TAP_OK(r && code_of(r) == MCP_INVALID_REQUEST && json_is_null(json_object_get(r, "id")),
	       "a real-number id: -32600, id null");
	r = one(&m, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"nope\"}");
	TAP_OK(r && code_of(r) == MCP_METHOD_NOT_FOUND, "unknown method: -32601");
	r = one(&m, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/"
		    "call\",\"params\":{\"name\":\"x\"}}");
	TAP_OK(r && code_of(r) == MCP_INVALID_PARAMS, "unknown tool: -32602");
	r = one(&m,
		"{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"resources/read\",\"params\":{\"uri\":"
		"\"agentbox://runs/abcdefabcdef/files/x\"}}");
	TAP_OK(r && code_of(r) == MCP_RESOURCE_NOT_FOUND_LEGACY,
	       "legacy resource not found: -32002");
	TAP_OK(one(&m, "{\"jsonrpc\":\"2.0\",\"method\":\"nope\"}") == NULL &&
		       json_array_size(sent) == 0 &&
		       one(&m, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\","
			       "\"params\":{\"requestId\":99}}") == NULL &&
		       json_array_size(sent) == 0 && one(&m, "{\"method\":7}") == NULL &&
		       json_array_size(sent) == 0,
	       "notifications, known, unknown or malformed, get no reply");
	r = one(&m, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{\"name\":"
		    "\"run_code\",\"arguments\":{\"language\":\"python\",\"code\":\"1\",\"limits\":"
		    "{\"ram\":1}}}}");
	TAP_OK(r && json_is_true(json_object_get(json_object_get(r, "result"), "isError")),
	       "bad tool arguments: a tool result with isError");
	/* sessions (issue 27): their arguments checked on arrival, an unknown id named */
	r = one(&m, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{\"name\":"
		    "\"run_code\",\"arguments\":{\"session_id\":\"abc\",\"code\":\"1\",\"files\":[]"
		    "}}}");
	TAP_OK(r && strstr(json_dumps_tmp(r), "does not apply to a cell"),
	       "run_code with session_id refuses files (they go to create_session)");
	r = one(&m, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{\"name\":"
		    "\"run_code\",\"arguments\":{\"session_id\":\"abc\",\"code\":\"1\"}}}");
	TAP_OK(r && strstr(json_dumps_tmp(r), "no session 'abc' on this server"),
	       "run_code on an unknown session: a tool error naming it");
	r = one(&m, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{\"name\":"
		    "\"close_session\",\"arguments\":{\"session_id\":\"abc\"}}}");
	TAP_OK(r && strstr(json_dumps_tmp(r), "no session 'abc'"),
	       "close_session on an unknown session: a tool error");
	r = one(&m, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{\"name\":"
		    "\"create_session\",\"arguments\":{\"idle_timeout\":\"soon\"}}}");
	TAP_OK(r && strstr(json_dumps_tmp(r), "idle_timeout") &&
		       json_is_true(json_object_get(json_object_get(r, "result"), "isError")),
	       "create_session with an idle_timeout that does not parse: a tool error naming it");

	snprintf(
		line, sizeof(line),
		"{\"jsonrpc\":\"2.0\",\"id\":\"d\",\"method\":\"server/discover\",\"params\":{%s}}",
		meta);
	r = one(&m, line);
	TAP_STREQ(json_string_value(json_object_get(json_object_get(r, "result"), "resultType")),
		  "complete", "server/discover (2026-07-28): resultType complete");
	r = one(&m,
		"{\"jsonrpc\":\"2.0\",\"id\":\"d\",\"method\":\"tools/list\",\"params\":{\"_meta\":"
		"{\"io.modelcontextprotocol/protocolVersion\":\"2099-01-01\","
		"\"io.modelcontextprotocol/clientCapabilities\":{}}}}");
	TAP_OK(r && code_of(r) == MCP_UNSUPPORTED_VERSION, "an unsupported version: -32022");
	snprintf(line, sizeof(line),
		 "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"resources/read\",\"params\":{\"uri\":"
		 "\"agentbox://runs/abcdefabcdef/files/x\",%s}}",
		 meta);
	r = one(&m, line);
	TAP_OK(r && code_of(r) == MCP_INVALID_PARAMS, "modern resource not found: -32602");
	mcp_done(&m);
}

/* What the reader handed over: the last line, whole or its skeleton. */
static struct {
	char *text;
	size_t len, total;
	bool whole, null;
	int lines;
} got;

static bool
take(void *ctx, char *text, size_t len, size_t total, bool whole)
{
	(void) ctx;
	free(got.text);
	got.text = text ? strndup(text, len) : NULL;
	got.null = text == NULL;
	got.len = len;
	got.total = total;
	got.whole = whole;
	got.lines++;
	return false;
}

/* Feeds s in pieces of step bytes. */
static void
feed(struct mcp_reader *r, const char *s, size_t step, size_t allow)
{
	size_t n = strlen(s);

	for (size_t i = 0; i < n; i += step)
		mcp_reader_feed(r, s + i, n - i < step ? n - i : step, allow, take, NULL);
}

/* A JSON-RPC call whose code is pre + n x filler + post, as a line. */
static char *
call_line(const char *id, const char *pre, size_t n, char filler, const char *post)
{
	size_t cap = strlen(pre) + n + strlen(post) + 256;
	char *s = malloc(cap);
	int k;

	if (!s)
		abort();
	k = snprintf(s, cap,
		     "{\"params\":{\"name\":\"run_code\",\"arguments\":{\"language\":\"python\","
		     "\"code\":\"%s",
		     pre);
	memset(s + k, filler, n);
	snprintf(s + k + n, cap - (size_t) k - n,
		 "%s\"}},\"jsonrpc\":\"2.0\",\"id\":%s,\"method\":\"tools/call\"}\n", post, id);
	return s;
}

/* The skeleton parses, keeps id, method and tool name, and its code string starts as given. */
static bool
skeleton_ok(const char *id_json, const char *code_start)
{
	json_t *j = got.text ? json_loads(got.text, 0, NULL) : NULL;
	json_t *want = json_loads(id_json, JSON_DECODE_ANY, NULL);
	const char *code = json_string_value(json_object_get(
		json_object_get(json_object_get(j, "params"), "arguments"), "code"));
	bool ok =
		j && !got.whole && json_equal(json_object_get(j, "id"), want) &&
		strcmp(json_string_value(json_object_get(j, "method")) ?: "", "tools/call") == 0 &&
		strcmp(json_string_value(json_object_get(json_object_get(j, "params"), "name"))
			       ?: "",
		       "run_code") == 0 &&
		code && strncmp(code, code_start, strlen(code_start)) == 0 &&
		strlen(code) <= MCP_SKEL_KEEP + 8;

	json_decref(j);
	json_decref(want);
	return ok;
}

static void
test_reader(void)
{
	struct mcp_reader r;
	char *s;

	mcp_reader_init(&r);
	feed(&r, "{\"a\":1}\r\n{\"b\":\"x\\ny\"}\n", 3, 1000);
	TAP_OK(got.lines == 2 && got.whole && strcmp(got.text, "{\"b\":\"x\\ny\"}") == 0 &&
		       got.total == 12,
	       "reader: lines across reads, whole, without their newline or \\r");
	s = call_line("7", "", 100000, 'x', "");
	feed(&r, s, 4096, 1u << 20);
	TAP_OK(got.whole && got.len == strlen(s) - 1,
	       "reader: a line within what it may hold is whole");
	feed(&r, s, 4096, 50000);
	TAP_OK(skeleton_ok("7", "xxxx") && got.total == strlen(s) - 1 && mcp_reader_held(&r) == 0,
	       "reader: a line over it is its skeleton (id, method, tool; the code cut), and "
	       "nothing "
	       "is held after it");
	free(s);
	/* cuts never split an escape, a surrogate pair or a UTF-8 sequence */
	s = call_line("\"s\"", "", MCP_SKEL_KEEP - 3, 'a', "\\u00e9\\ud83d\\ude00\\\"\\\\ü€𝄞 tail");
	feed(&r, s, 7, 100);
	TAP_OK(skeleton_ok("\"s\"", "aaa"),
	       "reader: a cut at escapes and a surrogate pair is valid JSON");
	free(s);
	for (size_t k = 0; k < 12; k++) {
		char pre[16];

		snprintf(pre, sizeof(pre), "%.*s", (int) (k % 4), "bbb");
		s = call_line("9", pre, MCP_SKEL_KEEP - 6 + k, 'c', "€€𝄞𝄞\\ud834\\udd1e\\\"x");
		feed(&r, s, 1, 100);
		if (!skeleton_ok("9", pre)) {
			TAP_OK(0, "reader: cut %zu bytes into multi-byte characters: '%s'", k,
			       got.text);
			free(s);
			break;
		}
		free(s);
		if (k == 11)
			TAP_OK(1, "reader: cuts at every offset around multi-byte characters and "
				  "escapes "
				  "stay valid JSON");
	}
	s = malloc(MCP_SKEL_MAX + 64);
	memset(s, '[', MCP_SKEL_MAX + 16);
	strcpy(s + MCP_SKEL_MAX + 16, "\n");
	feed(&r, s, 65536, 1000);
	TAP_OK(got.null && !got.whole && got.total == MCP_SKEL_MAX + 16,
	       "reader: a skeleton that would pass %u bytes is none (nothing to answer by)",
	       MCP_SKEL_MAX);
	free(s);
	mcp_reader_done(&r);
	free(got.text);
	got.text = NULL;
}

static void
test_refuse(void)
{
	struct mcp m;
	json_t *r;
	static const char call[] = "{\"jsonrpc\":\"2.0\",\"id\":42,\"method\":\"tools/call\","
				   "\"params\":{\"name\":\"run_code\",\"arguments\":{}}}";

	mcp_init(&m);
	m.fuzzing = true;
	m.send = capture;
	json_array_clear(sent);
	mcp_refuse(&m, call, strlen(call), m.pol.max_message + 1, 0);
	r = json_array_get(sent, 0);
	TAP_OK(json_array_size(sent) == 1 && code_of(r) == MCP_INVALID_REQUEST &&
		       json_integer_value(json_object_get(r, "id")) == 42,
	       "refuse: over --max-message, by its id");
	json_array_clear(sent);
	mcp_refuse(&m, call, strlen(call), 1000, 123);
	r = json_object_get(json_array_get(sent, 0), "result");
	{
		char *text = json_dumps(json_object_get(r, "content"), 0);

		TAP_OK(json_array_size(sent) == 1 && json_is_true(json_object_get(r, "isError")) &&
			       text && strstr(text, "busy"),
		       "refuse: over the byte budget, a tool call is a busy tool error, by its id");
		free(text);
	}
	json_array_clear(sent);
	mcp_refuse(&m, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/x\"}",
		   strlen("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/x\"}"), 1000, 0);
	TAP_OK(json_array_size(sent) == 0, "refuse: a notification is never answered");
	json_array_clear(sent);
	mcp_refuse(&m, NULL, 0, 1000, 0);
	r = json_array_get(sent, 0);
	TAP_OK(json_array_size(sent) == 1 && json_is_null(json_object_get(r, "id")),
	       "refuse: no skeleton, an error with id null");
	mcp_done(&m);
}

int
main(void)
{
	sent = json_array();
	test_helpers();
	test_handler();
	test_reader();
	test_refuse();
	json_decref(sent);
	return tap_done();
}

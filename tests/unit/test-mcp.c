/* Unit tests for the MCP server's pure parts: run ids, paths a client may give, agentbox://
 * URIs, base64, UTF-8, and the message handler itself (JSON-RPC errors, the two protocol
 * eras, notifications never answered), with replies captured instead of written. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

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
	TAP_OK(r && json_array_size(json_object_get(json_object_get(r, "result"), "tools")) == 8 &&
		       !json_object_get(json_object_get(r, "result"), "resultType"),
	       "tools/list: 8 tools, no resultType in the legacy era");

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

int
main(void)
{
	sent = json_array();
	test_helpers();
	test_handler();
	json_decref(sent);
	return tap_done();
}

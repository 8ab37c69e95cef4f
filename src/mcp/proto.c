/* proto.c: the MCP message handler. One line in (one JSON-RPC message), replies out through
 * m->send. JSON-RPC 2.0 as MCP uses it: requests get exactly one reply, notifications none,
 * malformed input the error JSON-RPC names (-32700 parse, -32600 invalid request, -32601
 * unknown method, -32602 invalid params), with id null when the id could not be read.
 *
 * Both protocol eras (docs/mcp.md "Protocol"):
 *  - legacy (2025-06-18, 2025-11-25): `initialize` negotiates the version for the process;
 *    requests other than ping before it are refused.
 *  - modern (2026-07-28): stateless; each request names its version and the client's
 *    capabilities in params._meta; `server/discover`; results carry resultType and the
 *    server's identity. An unsupported version is answered with -32022 and the list. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/xalloc.h"
#include "config.h"
#include "mcp.h"

#define META_VERSION "io.modelcontextprotocol/protocolVersion"
#define META_CAPS    "io.modelcontextprotocol/clientCapabilities"
#define META_SERVER  "io.modelcontextprotocol/serverInfo"

static const char *const legacy_versions[] = { "2025-11-25", "2025-06-18", NULL };
static const char *const modern_versions[] = { "2026-07-28", NULL };

static const char instructions[] =
	"agentbox runs Python and Node code in a sandbox (no network, a private workspace, "
	"limits on time, memory, processes and output). Call sandbox_info first to see the "
	"interpreters, the packages available and the limits. run_code returns the run's "
	"outcome (status tells a timeout from an out-of-memory kill from an output flood), "
	"its output, measured usage and the files it wrote (images inline, others as "
	"agentbox://runs/{run_id}/files/{path} resources; read them with read_file or "
	"resources/read). A run still going after wait_s answers status \"running\": pick it "
	"up with wait_run.";

const char *
mcp_server_version(void)
{
	return AB_VERSION;
}

void
mcp_init(struct mcp *m)
{
	memset(m, 0, sizeof(*m));
	mcp_policy_defaults(&m->pol);
	m->state_fd = m->runs_fd = m->jobs_fd = m->ws_fd = m->staging_fd = -1;
}

static json_t *
server_info(void)
{
	return json_pack("{s:s, s:s, s:s}", "name", "agentbox", "title", "agentbox sandbox",
			 "version", AB_VERSION);
}

static json_t *
capabilities(void)
{
	return json_pack("{s:{s:b}, s:{s:b, s:b}}", "tools", "listChanged", 0, "resources",
			 "subscribe", 0, "listChanged", 0);
}

static void
send_msg(struct mcp *m, json_t *msg)
{
	m->send(m, msg);
	json_decref(msg);
}

void
mcp_reply_error(struct mcp *m, json_t *id, int code, const char *msg, json_t *data)
{
	json_t *e = json_pack("{s:i, s:s}", "code", code, "message", msg);

	if (data)
		json_object_set_new(e, "data", data);
	send_msg(m, json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id ? id : json_null(),
			      "error", e));
}

void
mcp_reply(struct mcp *m, const struct mcp_req *req, json_t *result)
{
	if (!req->id) { /* a notification is never answered */
		json_decref(result);
		return;
	}
	if (req->modern) {
		json_t *meta = json_object_get(result, "_meta");

		json_object_set_new(result, "resultType", json_string("complete"));
		if (!json_is_object(meta)) {
			meta = json_object();
			json_object_set_new(result, "_meta", meta);
		}
		json_object_set_new(meta, META_SERVER, server_info());
	}
	send_msg(m,
		 json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", req->id, "result", result));
}

void
mcp_notify(struct mcp *m, const char *method, json_t *params)
{
	send_msg(m, json_pack("{s:s, s:s, s:o}", "jsonrpc", "2.0", "method", method, "params",
			      params));
}

static bool
in_list(const char *const *list, const char *v)
{
	for (; *list; list++)
		if (strcmp(*list, v) == 0)
			return true;
	return false;
}

static json_t *
all_versions(void)
{
	json_t *a = json_array();

	for (const char *const *v = modern_versions; *v; v++)
		json_array_append_new(a, json_string(*v));
	for (const char *const *v = legacy_versions; *v; v++)
		json_array_append_new(a, json_string(*v));
	return a;
}

/* A result clients may cache (2026-07-28 CacheableResult): "public" when it holds no data
 * of the caller's, "private" when it does (a run's files). */
static json_t *
cacheable_scope(const struct mcp_req *req, json_t *result, int ttl_ms, const char *scope)
{
	if (req->modern) {
		json_object_set_new(result, "ttlMs", json_integer(ttl_ms));
		json_object_set_new(result, "cacheScope", json_string(scope));
	}
	return result;
}

static json_t *
cacheable(const struct mcp_req *req, json_t *result, int ttl_ms)
{
	return cacheable_scope(req, result, ttl_ms, "public");
}

static void
do_initialize(struct mcp *m, const struct mcp_req *req, json_t *params)
{
	const char *want = json_string_value(json_object_get(params, "protocolVersion"));
	const char *ver;

	if (!want) {
		mcp_reply_error(m, req->id, MCP_INVALID_PARAMS,
				"initialize needs params.protocolVersion (a string)", NULL);
		return;
	}
	if (m->initialized) {
		mcp_reply_error(m, req->id, MCP_INVALID_REQUEST, "already initialized", NULL);
		return;
	}
	/* the version asked for when we speak it, else our latest legacy one: the client
	 * decides whether it can use that (2025-11-25 lifecycle, version negotiation) */
	ver = in_list(legacy_versions, want) ? want : legacy_versions[0];
	free(m->version);
	m->version = xstrdup(ver);
	m->initialized = true;
	fprintf(stderr, "agentbox mcp: initialize: client asked for %s, answering %s\n", want, ver);
	mcp_reply(m, req,
		  json_pack("{s:s, s:o, s:o, s:s}", "protocolVersion", ver, "capabilities",
			    capabilities(), "serverInfo", server_info(), "instructions",
			    instructions));
}

static void
do_discover(struct mcp *m, const struct mcp_req *req)
{
	mcp_reply(m, req,
		  cacheable(req,
			    json_pack("{s:o, s:o, s:s}", "supportedVersions", all_versions(),
				      "capabilities", capabilities(), "instructions", instructions),
			    3600 * 1000));
}

static json_t *
templates(void)
{
	return json_pack(
		"[{s:s, s:s, s:s, s:s}]", "uriTemplate", "agentbox://runs/{run_id}/files/{path}",
		"name", "run-file", "title", "A file a run left in its workspace", "description",
		"A regular file from the kept workspace of a run of this server (run_id from "
		"run_code). Served without following links, size-capped; gone once the run is "
		"removed by the server's retention.");
}

static void
do_resources_read(struct mcp *m, const struct mcp_req *req, json_t *params)
{
	const char *uri = json_string_value(json_object_get(params, "uri"));
	char id[MCP_ID_LEN + 1];
	char *path = NULL, *msg = NULL;
	int code = 0;
	json_t *contents;

	if (!uri) {
		mcp_reply_error(m, req->id, MCP_INVALID_PARAMS,
				"resources/read needs params.uri (a string)", NULL);
		return;
	}
	if (mcp_uri_parse(uri, id, &path) < 0) {
		mcp_reply_error(m, req->id,
				req->modern ? MCP_INVALID_PARAMS : MCP_RESOURCE_NOT_FOUND_LEGACY,
				"Resource not found: not an agentbox://runs/{run_id}/files/{path} "
				"URI of this server",
				json_pack("{s:s}", "uri", uri));
		return;
	}
	contents = mcp_read_run_file(m, id, path, 0, m->pol.read_bytes, true, &code, &msg);
	free(path);
	if (!contents) {
		mcp_reply_error(m, req->id,
				code == -ENOENT && !req->modern ? MCP_RESOURCE_NOT_FOUND_LEGACY
								: MCP_INVALID_PARAMS,
				msg ? msg : "Resource not found", json_pack("{s:s}", "uri", uri));
		free(msg);
		return;
	}
	json_object_set_new(contents, "uri", json_string(uri));
	/* a finished run's file does not change; it may be removed by retention */
	mcp_reply(
		m, req,
		cacheable_scope(req, json_pack("{s:[o]}", "contents", contents), 60000, "private"));
}

static void
do_tools_call(struct mcp *m, const struct mcp_req *req, json_t *params)
{
	json_t *name = json_object_get(params, "name"),
	       *args = json_object_get(params, "arguments");

	if (!json_is_string(name)) {
		mcp_reply_error(m, req->id, MCP_INVALID_PARAMS,
				"tools/call needs params.name (a string)", NULL);
		return;
	}
	if (args && !json_is_object(args) && !json_is_null(args)) {
		mcp_reply_error(m, req->id, MCP_INVALID_PARAMS,
				"tools/call params.arguments must be an object", NULL);
		return;
	}
	mcp_tools_call(m, req, json_string_value(name), json_is_object(args) ? args : NULL);
}

static bool
id_ok(const json_t *id)
{
	return json_is_string(id) || json_is_integer(id);
}

static void
handle_notification(struct mcp *m, const char *method, json_t *params)
{
	if (strcmp(method, "notifications/cancelled") == 0) {
		json_t *rid = json_object_get(params, "requestId");

		if (id_ok(rid)) {
			const char *why = json_string_value(json_object_get(params, "reason"));

			fprintf(stderr, "agentbox mcp: request cancelled by the client%s%s\n",
				why ? ": " : "", why ? why : "");
			mcp_cancel_request(m, rid);
		}
	} else if (strcmp(method, "notifications/initialized") == 0) {
		/* nothing to do: requests are served from the initialize reply on */
	}
	/* any other notification is ignored, never answered */
}

void
mcp_handle_line(struct mcp *m, const char *line, size_t len)
{
	json_error_t jerr;
	json_t *msg;

	if (len > m->pol.max_message) {
		mcp_reply_error(m, NULL, MCP_INVALID_REQUEST, "message too large",
				json_pack("{s:I}", "max_bytes", (json_int_t) m->pol.max_message));
		return;
	}
	msg = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
	mcp_handle_json(m, msg, len, &jerr);
}

/* A request the server cannot take (issue 24), known by its skeleton (src/mcp/input.h):
 * answered at once, by its id when the skeleton shows one. */
void
mcp_refuse(struct mcp *m, const char *skel, size_t len, size_t total, size_t held)
{
	json_t *msg = skel ? json_loadb(skel, len, 0, NULL) : NULL;
	json_t *id = json_object_get(msg, "id");
	json_t *params = json_object_get(msg, "params");
	const char *method = json_string_value(json_object_get(msg, "method"));
	struct mcp_req req = { .id = id_ok(id) ? id : NULL };

	if (msg && json_is_object(msg) && !id && method) {
		json_decref(msg); /* a notification: never answered */
		return;
	}
	if (total > m->pol.max_message)
		mcp_reply_error(m, req.id, MCP_INVALID_REQUEST, "message too large",
				json_pack("{s:I, s:I}", "max_bytes",
					  (json_int_t) m->pol.max_message, "bytes",
					  (json_int_t) total));
	else if (req.id && method && strcmp(method, "tools/call") == 0 && json_is_object(params))
		mcp_reply(
			m, &req,
			mcp_result_error("this server is busy: it holds %zu bytes of requests and "
					 "this one has %zu (its --max-pending-bytes is %zu); try "
					 "again later",
					 held, total, m->pol.max_pending));
	else
		mcp_reply_error(m, req.id, MCP_INTERNAL_ERROR, "server busy",
				json_pack("{s:I, s:I}", "held_bytes", (json_int_t) held,
					  "max_pending_bytes", (json_int_t) m->pol.max_pending));
	json_decref(msg);
}

void
mcp_handle_json(struct mcp *m, json_t *msg, size_t bytes, const json_error_t *jerr)
{
	json_t *id, *method_j, *params, *meta;
	struct mcp_req req = { .bytes = bytes };
	const char *method, *ver;

	if (!msg) {
		mcp_reply_error(
			m, NULL, MCP_PARSE_ERROR, "Parse error",
			json_pack("{s:s, s:i}", "detail", jerr->text, "position", jerr->position));
		return;
	}
	if (json_is_array(msg)) {
		mcp_reply_error(m, NULL, MCP_INVALID_REQUEST,
				"Invalid Request: JSON-RPC batches are not supported by MCP", NULL);
		goto out;
	}
	if (!json_is_object(msg)) {
		mcp_reply_error(m, NULL, MCP_INVALID_REQUEST,
				"Invalid Request: a message is a JSON object", NULL);
		goto out;
	}
	id = json_object_get(msg, "id");
	method_j = json_object_get(msg, "method");
	params = json_object_get(msg, "params");
	if (!method_j) {
		/* a response (we send no requests, so there is nothing to match) */
		if (id && (json_object_get(msg, "result") || json_object_get(msg, "error")))
			goto out;
		mcp_reply_error(m, id_ok(id) ? id : NULL, MCP_INVALID_REQUEST,
				"Invalid Request: no method", NULL);
		goto out;
	}
	if (!id) { /* a notification: never answered, whatever is wrong with it */
		if (json_is_string(method_j) && json_is_string(json_object_get(msg, "jsonrpc")) &&
		    (!params || json_is_object(params)))
			handle_notification(m, json_string_value(method_j), params);
		goto out;
	}
	if (!id_ok(id)) {
		mcp_reply_error(m, NULL, MCP_INVALID_REQUEST,
				"Invalid Request: id must be a string or an integer", NULL);
		goto out;
	}
	if (!json_is_string(method_j) ||
	    strcmp(json_string_value(json_object_get(msg, "jsonrpc")) ?: "", "2.0") != 0) {
		mcp_reply_error(m, id, MCP_INVALID_REQUEST,
				"Invalid Request: jsonrpc must be \"2.0\" and method a string",
				NULL);
		goto out;
	}
	if (params && !json_is_object(params)) {
		mcp_reply_error(m, id, MCP_INVALID_PARAMS,
				"Invalid params: params must be an object", NULL);
		goto out;
	}
	if (mcp_request_in_flight(m, id)) {
		mcp_reply_error(m, id, MCP_INVALID_REQUEST,
				"Invalid Request: a request with this id is still in progress",
				NULL);
		goto out;
	}
	method = json_string_value(method_j);
	req.id = id;
	meta = json_object_get(params, "_meta");
	if (meta && !json_is_object(meta)) {
		mcp_reply_error(m, id, MCP_INVALID_PARAMS,
				"Invalid params: _meta must be an object", NULL);
		goto out;
	}
	{
		json_t *tok = json_object_get(meta, "progressToken");

		if (id_ok(tok))
			req.token = tok;
	}
	ver = json_string_value(json_object_get(meta, META_VERSION));
	if (json_object_get(meta, META_VERSION) && strcmp(method, "initialize") != 0) {
		/* the modern era: this request alone says what it speaks */
		if (!ver || !in_list(modern_versions, ver)) {
			mcp_reply_error(
				m, id, MCP_UNSUPPORTED_VERSION, "Unsupported protocol version",
				json_pack("{s:o, s:O}", "supported", all_versions(), "requested",
					  json_object_get(meta, META_VERSION)));
			goto out;
		}
		if (!json_is_object(json_object_get(meta, META_CAPS))) {
			mcp_reply_error(m, id, MCP_INVALID_PARAMS,
					"Invalid params: _meta." META_CAPS " is required", NULL);
			goto out;
		}
		req.modern = true;
	} else if (strcmp(method, "server/discover") == 0) {
		mcp_reply_error(m, id, MCP_INVALID_PARAMS,
				"Invalid params: server/discover needs _meta." META_VERSION
				" and _meta." META_CAPS,
				json_pack("{s:o}", "supported", all_versions()));
		goto out;
	} else if (strcmp(method, "initialize") == 0) {
		do_initialize(m, &req, params);
		goto out;
	} else if (!m->initialized && strcmp(method, "ping") != 0) {
		mcp_reply_error(m, id, MCP_INVALID_REQUEST,
				"Invalid Request: not initialized (send initialize first, or "
				"name protocol version 2026-07-28 in params._meta)",
				NULL);
		goto out;
	}

	if (strcmp(method, "ping") == 0)
		mcp_reply(m, &req, json_object());
	else if (strcmp(method, "server/discover") == 0)
		do_discover(m, &req);
	else if (strcmp(method, "initialize") == 0)
		mcp_reply_error(m, id, MCP_INVALID_REQUEST,
				"initialize is for protocol versions up to 2025-11-25; 2026-07-28 "
				"needs no handshake",
				NULL);
	else if (strcmp(method, "tools/list") == 0)
		mcp_reply(m, &req,
			  cacheable(&req, json_pack("{s:o}", "tools", mcp_tools_list(m)), 60000));
	else if (strcmp(method, "tools/call") == 0)
		do_tools_call(m, &req, params);
	else if (strcmp(method, "resources/list") == 0)
		/* runs' files are reached through the template and run_code's links */
		mcp_reply(m, &req, cacheable(&req, json_pack("{s:[]}", "resources"), 0));
	else if (strcmp(method, "resources/templates/list") == 0)
		mcp_reply(m, &req,
			  cacheable(&req, json_pack("{s:o}", "resourceTemplates", templates()),
				    3600 * 1000));
	else if (strcmp(method, "resources/read") == 0)
		do_resources_read(m, &req, params);
	else
		mcp_reply_error(m, id, MCP_METHOD_NOT_FOUND, "Method not found",
				json_pack("{s:s}", "method", method));
out:
	json_decref(msg);
}

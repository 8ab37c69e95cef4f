/* tools.c: the server's tools (docs/mcp.md "Tools"): their schemas, their arguments checked
 * (a mistake in them is a tool error the model can read and fix, never a crash), run specs
 * built under the operator's policy, and reports turned into results: a short text summary
 * first, images the run made as image blocks, every other file as a resource_link, and the
 * trimmed report as structuredContent (which validates against the tool's outputSchema). */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/stat.h>

#include "../spec/spec.h"
#include "../spec/units.h"
#include "../spec/words.h"
#include "../util/fdutil.h"
#include "../util/macro.h"
#include "../util/strv.h"
#include "../util/xalloc.h"
#include "mcp.h"

#define MAX_LINKS 50 /* resource links per result; list_files has the rest */

/* ---- schemas ---------------------------------------------------------------------------- */

static json_t *
str_schema(const char *desc)
{
	return json_pack("{s:s, s:s}", "type", "string", "description", desc);
}

static json_t *
files_schema(void)
{
	return json_pack(
		"{s:s, s:s, s:{s:s, s:{s:{s:s, s:s}, s:{s:s, s:s}, s:{s:s, s:[s, s], s:s}}, "
		"s:[s, s], s:b}}",
		"type", "array", "description",
		"Files to place in the workspace (/work) before the run.", "items", "type",
		"object", "properties", "path", "type", "string", "description",
		"relative path, e.g. data/in.csv (no '..')", "content", "type", "string",
		"description", "the file's content", "encoding", "type", "string", "enum", "utf-8",
		"base64", "description", "how content is encoded (default utf-8)", "required",
		"path", "content", "additionalProperties", 0);
}

static json_t *
limits_schema(void)
{
	static const char *const names[] = { "timeout",   "memory", "pids",        "cpus",
					     "cpu-time",  "disk",   "inodes",      "tmp-size",
					     "file-size", "nofile", "output-limit" };
	json_t *props = json_object();

	for (size_t i = 0; i < ARRAY_SIZE(names); i++)
		json_object_set_new(props, names[i],
				    json_pack("{s:[s, s]}", "type", "string", "number"));
	return json_pack("{s:s, s:s, s:o, s:b}", "type", "object", "description",
			 "Limits for this run, in agentbox's units (\"30s\", \"256M\", \"1.5\") or "
			 "numbers in the base unit (seconds, bytes, tasks, cores). They can only "
			 "lower the server's caps (sandbox_info lists them).",
			 "properties", props, "additionalProperties", 0);
}

static json_t *
langs(const struct mcp *m)
{
	json_t *a = json_array();

	if (m->pol.allow_python)
		json_array_append_new(a, json_string("python"));
	if (m->pol.allow_node)
		json_array_append_new(a, json_string("node"));
	return a;
}

static json_t *
stream_schema(void)
{
	return json_pack("{s:s, s:{s:{s:s}, s:{s:s}, s:{s:s}, s:{s:s}, s:{s:s}}}", "type", "object",
			 "properties", "text", "type", "string", "bytes", "type", "integer",
			 "captured_bytes", "type", "integer", "truncated", "type", "boolean",
			 "text_truncated", "type", "boolean");
}

static json_t *
nullable(const char *type)
{
	return json_pack("{s:[s, s]}", "type", type, "null");
}

/* run_code and wait_run: the trimmed report, or status "running" with the run id */
static json_t *
run_output_schema(void)
{
	json_t *props = json_pack(
		"{s:{s:s}, s:{s:s, s:s}, s:{s:s}, s:{s:s}, s:o, s:o, s:o, s:o, s:o, s:{s:s, "
		"s:{s:s}}, "
		"s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}",
		"run_id", "type", "string", "status", "type", "string", "description",
		"exited, signaled, timeout, oom, pids_limit, cpu_time_limit, disk_limit, "
		"file_size_limit, output_limit, exec_failed, interrupted, setup_error, "
		"usage_error; running or queued while the run goes on (wait_run)",
		"ok", "type", "boolean", "agentbox_run_id", "type", "string", "exit_code",
		nullable("integer"), "signal", nullable("string"), "message", nullable("string"),
		"fix", nullable("string"), "wall_ms", nullable("integer"), "limits_hit", "type",
		"array", "items", "type", "string", "cpu_ms", nullable("integer"), "queue_ms",
		nullable("integer"), "memory_peak_bytes", nullable("integer"), "stdout",
		stream_schema(), "stderr", stream_schema(), "files",
		json_pack("{s:s, s:{s:s}}", "type", "array", "items", "type", "object"),
		"protections", json_pack("{s:s}", "type", "object"), "warnings",
		json_pack("{s:s, s:{s:s}}", "type", "array", "items", "type", "string"));

	json_object_set_new(props, "elapsed_ms", json_pack("{s:s}", "type", "integer"));
	json_object_set_new(props, "warm",
			    json_pack("{s:s, s:s}", "type", "boolean", "description",
				      "the run took a warm slot: its sandbox and interpreter were "
				      "ready before the call; wall_ms and cpu_ms count from then"));
	json_object_set_new(props, "limits", json_pack("{s:s}", "type", "object"));
	json_object_set_new(props, "files_truncated", json_pack("{s:s}", "type", "boolean"));
	/* a cell of a session (run_code with session_id): the cell's result (docs/sessions.md) */
	json_object_set_new(props, "session_id", json_pack("{s:s}", "type", "string"));
	json_object_set_new(props, "result",
			    json_pack("{s:[s, s], s:s}", "type", "object", "null", "description",
				      "a cell's last expression: text (its repr), html"));
	json_object_set_new(props, "error",
			    json_pack("{s:[s, s], s:s}", "type", "object", "null", "description",
				      "a cell's exception: type, value, traceback"));
	json_object_set_new(props, "images", json_pack("{s:s}", "type", "array"));
	json_object_set_new(props, "session", json_pack("{s:s}", "type", "object"));
	return json_pack("{s:s, s:o, s:[s]}", "type", "object", "properties", props, "required",
			 "status");
}

static json_t *
tool(const char *name, const char *title, const char *desc, json_t *in, json_t *out, bool read_only,
     bool destructive, bool idempotent)
{
	json_t *t = json_pack("{s:s, s:s, s:s, s:o, s:{s:s, s:b, s:b, s:b, s:b}}", "name", name,
			      "title", title, "description", desc, "inputSchema", in, "annotations",
			      "title", title, "readOnlyHint", read_only, "destructiveHint",
			      destructive, "idempotentHint", idempotent, "openWorldHint", 0);

	if (out)
		json_object_set_new(t, "outputSchema", out);
	return t;
}

static json_t *
obj_schema(json_t *props, const char *req1, const char *req2)
{
	json_t *s = json_pack("{s:s, s:o, s:b}", "type", "object", "properties", props,
			      "additionalProperties", 0);

	if (req1)
		json_object_set_new(s, "required",
				    req2 ? json_pack("[s, s]", req1, req2)
					 : json_pack("[s]", req1));
	return s;
}

/* Packages on request (docs/requirements.md). */
static json_t *
requirements_schema(void)
{
	return json_pack("{s:s, s:{s:s}, s:i, s:s}", "type", "array", "items", "type", "string",
			 "maxItems", 256, "description",
			 "packages the code needs, installed before it runs (the sandbox itself "
			 "has no network, so pip/npm install inside fails): pip requirement "
			 "specifiers for Python ('requests==2.31.0', 'pandas'), NAME@RANGE for "
			 "Node ('is-number@7.0.0'). The same set again is served from a cache.");
}

static void
session_tools(const struct mcp *m, json_t *tools)
{
	json_t *dur = json_pack("{s:[s, s]}", "type", "string", "number");
	json_t *in = json_pack(
		"{s:{s:s, s:o, s:s}, s:o, s:o, s:{s:s, s:{s:s}, s:s}, s:o, s:o}", "language",
		"type", "string", "enum", langs(m), "description",
		"the interpreter: python (default) or node", "files", files_schema(), "limits",
		limits_schema(), "env", "type", "object", "additionalProperties", "type", "string",
		"description", "environment variables added to the sandbox's clean environment",
		"idle_timeout", json_deep_copy(dur), "max_lifetime", json_deep_copy(dur));

	json_object_set_new(json_object_get(in, "idle_timeout"), "description",
			    json_string("end the session after this long without a cell "
					"(seconds, or \"10m\"; default 10 minutes)"));
	json_object_set_new(json_object_get(in, "max_lifetime"), "description",
			    json_string("end the session this long after it started, whatever it "
					"does (seconds, or \"1h\"; default 1 hour)"));
	json_object_set_new(json_object_get(in, "limits"), "description",
			    json_string("limits.timeout is each cell's timeout (default 60 s); "
					"memory, pids, disk and the others bind the whole session. "
					"They can only lower the server's caps."));
	json_decref(dur);
	json_object_set_new(in, "requirements", requirements_schema());
	json_array_append_new(
		tools,
		tool("create_session", "Start a session",
		     "Start a live sandbox (no network; limits on memory, processes, disk) with "
		     "one "
		     "Python or Node interpreter kept running in it, for code run cell by cell as "
		     "in a notebook (run_code with the session_id this returns): variables, "
		     "imports "
		     "and the files in /work stay between cells. Ends on close_session, after "
		     "idle_timeout without a cell, or when this client disconnects.",
		     obj_schema(in, NULL, NULL),
		     json_pack("{s:s, s:{s:{s:s}, s:{s:s}, s:{s:s}, s:{s:[s, s]}, s:{s:s}, "
			       "s:{s:s}}, s:[s]}",
			       "type", "object", "properties", "session_id", "type", "string",
			       "language", "type", "string", "state", "type", "string", "version",
			       "type", "string", "null", "idle_timeout_ms", "type", "integer",
			       "max_lifetime_ms", "type", "integer", "required", "session_id"),
		     false, false, false));
	json_array_append_new(
		tools,
		tool("close_session", "Close a session",
		     "End a session: its interpreter and every process in its sandbox are stopped "
		     "and its files discarded. Returns how many cells ran and what it used.",
		     obj_schema(json_pack("{s:o}", "session_id", str_schema("from create_session")),
				"session_id", NULL),
		     json_pack("{s:s, s:{s:{s:s}, s:{s:s}, s:{s:s}}, s:[s]}", "type", "object",
			       "properties", "session_id", "type", "string", "closed", "type",
			       "boolean", "cells", "type", "integer", "required", "session_id"),
		     false, true, true));
}

json_t *
mcp_tools_list(const struct mcp *m)
{
	json_t *tools = json_array();
	json_t *run_in = json_pack(
		"{s:{s:s, s:o, s:s}, s:o, s:o, s:{s:s, s:{s:s}, s:s}, s:o, s:{s:s, "
		"s:{s:s}, s:s}, s:o, s:o, s:{s:s, s:i, s:s}}",
		"language", "type", "string", "enum", langs(m), "description",
		"the interpreter: python (python3) or node; default python, or node for code "
		"that starts with a node shebang",
		"code", str_schema("the program, run as /work/script.py or /work/script.js"),
		"files", files_schema(), "args", "type", "array", "items", "type", "string",
		"description", "the program's arguments", "stdin",
		str_schema("the program's standard input"), "env", "type", "object",
		"additionalProperties", "type", "string", "description",
		"environment variables added to the sandbox's clean environment", "limits",
		limits_schema(), "workspace_id",
		str_schema("a workspace from create_workspace: its files are copied into this "
			   "run's /work, and what the run leaves there is kept in it"),
		"wait_s", "type", "number", "minimum", 0, "description",
		"how long to wait before answering status \"running\" with the run id (then "
		"call wait_run); default: the server's");

	json_object_set_new(run_in, "requirements", requirements_schema());
	json_object_set_new(run_in, "session_id",
			    str_schema("run the code as a cell of this session (create_session): "
				       "its variables, imports and files stay for the next cell; "
				       "only code, limits.timeout and restart apply"));
	json_object_set_new(
		run_in, "restart",
		json_pack("{s:s, s:s}", "type", "boolean", "description",
			  "with session_id: if the session has ended (a crash, its lifetime), "
			  "start it again and run the cell there; its state is then gone"));

	json_array_append_new(
		tools,
		tool("run_code", "Run code in a sandbox",
		     "Run a Python or Node program in an isolated sandbox (no network; only /work, "
		     "/tmp and /dev/shm writable; limits on time, memory, processes, output). "
		     "Returns the outcome (status tells exited from timeout, oom, "
		     "output_limit...), "
		     "exit code, output, measured CPU and memory, and the files the program left "
		     "in /work: images (PNG, JPEG, SVG) inline, every other file as an "
		     "agentbox://runs/{run_id}/files/{path} resource (read_file reads it). "
		     "isError is true when the program failed or hit a limit. With session_id the "
		     "code runs as a cell of that session instead, as in a notebook: the result is "
		     "its output, the value of its last expression, its figures (plt.show()) as "
		     "images and its exception, if any; status ok, error, timeout (interrupted, "
		     "the session goes on) or lost (the session ended).",
		     obj_schema(run_in, "code", NULL), run_output_schema(), false, false, false));
	session_tools(m, tools);
	json_array_append_new(
		tools,
		tool("wait_run", "Wait for a run",
		     "Wait for a run that run_code answered with status \"running\"; returns its "
		     "result like run_code, or \"running\" again after wait_s.",
		     obj_schema(json_pack("{s:o, s:{s:s, s:i}}", "run_id", str_schema("the run id"),
					  "wait_s", "type", "number", "minimum", 0),
				"run_id", NULL),
		     run_output_schema(), true, false, true));
	json_array_append_new(
		tools, tool("cancel_run", "Cancel a run",
			    "Stop a queued or running run (its whole sandbox is killed); the "
			    "call waiting for it answers with status interrupted.",
			    obj_schema(json_pack("{s:o}", "run_id", str_schema("the run id")),
				       "run_id", NULL),
			    json_pack("{s:s, s:{s:{s:s}, s:{s:s}}, s:[s, s]}", "type", "object",
				      "properties", "run_id", "type", "string", "state", "type",
				      "string", "required", "run_id", "state"),
			    false, true, true));
	json_array_append_new(
		tools,
		tool("list_files", "List a run's files",
		     "The files a finished run left in its workspace: path, size, sha256, MIME "
		     "type, agentbox:// URI.",
		     obj_schema(json_pack("{s:o, s:o}", "run_id", str_schema("the run id"),
					  "prefix", str_schema("only paths starting with this")),
				"run_id", NULL),
		     json_pack("{s:s, s:{s:{s:s}, s:{s:s}, s:{s:s}}, s:[s, s]}", "type", "object",
			       "properties", "run_id", "type", "string", "files", "type", "array",
			       "truncated", "type", "boolean", "required", "run_id", "files"),
		     true, false, true));
	json_array_append_new(
		tools,
		tool("read_file", "Read a run's file",
		     "Read part of a file a finished run left (offset and length in bytes; at most "
		     "the server's cap per call). Text comes back as utf-8, anything else base64.",
		     obj_schema(json_pack("{s:o, s:o, s:{s:s, s:i}, s:{s:s, s:i}}", "run_id",
					  str_schema("the run id"), "path",
					  str_schema("relative path in the run's workspace"),
					  "offset", "type", "integer", "minimum", 0, "length",
					  "type", "integer", "minimum", 1),
				"run_id", "path"),
		     json_pack("{s:s, s:{s:{s:s}, s:{s:s}, s:{s:s}, s:{s:s}, s:{s:s}, s:{s:s}, "
			       "s:{s:s}, s:{s:s}, s:{s:s}}, s:[s, s, s]}",
			       "type", "object", "properties", "run_id", "type", "string", "path",
			       "type", "string", "mime_type", "type", "string", "offset", "type",
			       "integer", "length", "type", "integer", "size", "type", "integer",
			       "eof", "type", "boolean", "encoding", "type", "string", "content",
			       "type", "string", "required", "run_id", "path", "content"),
		     true, false, true));
	json_array_append_new(
		tools,
		tool("create_workspace", "Create a workspace",
		     "A directory this server owns, for files that persist between runs: each run "
		     "given its workspace_id gets a copy of it in /work, and what the run leaves "
		     "there becomes the workspace's new content. Expires after ttl_s.",
		     obj_schema(json_pack("{s:o, s:{s:s, s:i}}", "files", files_schema(), "ttl_s",
					  "type", "number", "minimum", 1),
				NULL, NULL),
		     json_pack("{s:s, s:{s:{s:s}, s:{s:s}}, s:[s]}", "type", "object", "properties",
			       "workspace_id", "type", "string", "expires_unix_ms", "type",
			       "integer", "required", "workspace_id"),
		     false, false, false));
	json_array_append_new(
		tools,
		tool("delete_workspace", "Delete a workspace", "Remove a workspace and its files.",
		     obj_schema(json_pack("{s:o}", "workspace_id",
					  str_schema("from create_workspace")),
				"workspace_id", NULL),
		     json_pack("{s:s, s:{s:{s:s}, s:{s:s}}}", "type", "object", "properties",
			       "workspace_id", "type", "string", "deleted", "type", "boolean"),
		     false, true, true));
	json_array_append_new(
		tools,
		tool("sandbox_info", "What the sandbox offers",
		     "Interpreters and their versions, the Python and Node packages a program can "
		     "import, the protections this host enforces (agentbox doctor), \"no "
		     "network\", "
		     "and the server's limit caps. Call it before writing code.",
		     obj_schema(json_object(), NULL, NULL), json_pack("{s:s}", "type", "object"),
		     true, false, true));
	return tools;
}

/* ---- results ---------------------------------------------------------------------------- */

json_t *
mcp_result_error(const char *fmt, ...)
{
	char buf[2048];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	return json_pack("{s:[{s:s, s:s}], s:b}", "content", "type", "text", "text", buf, "isError",
			 1);
}

static json_t *
text_block(const char *s)
{
	return json_pack("{s:s, s:s}", "type", "text", "text", s);
}

json_t *
mcp_result_running(const char *job_id, const char *state, int64_t elapsed_ms)
{
	char buf[512];

	snprintf(buf, sizeof(buf),
		 "run %s is still %s after %.1f s: call wait_run with run_id \"%s\" to get its "
		 "result (or cancel_run to stop it).",
		 job_id, state, (double) elapsed_ms / 1000.0, job_id);
	return json_pack("{s:[o], s:{s:s, s:s, s:b, s:I}, s:b}", "content", text_block(buf),
			 "structuredContent", "run_id", job_id, "status", state, "ok", 0,
			 "elapsed_ms", (json_int_t) elapsed_ms, "isError", 0);
}

/* A stream of the report, its text capped (the head: the model gets the start, the counts
 * say how much more there was). */
static json_t *
trim_stream(const json_t *s, uint64_t cap)
{
	const char *text = json_string_value(json_object_get(s, "text"));
	size_t len = text ? strlen(text) : 0, keep = len;

	if (keep > cap) {
		keep = (size_t) cap;
		while (keep > 0 && ((unsigned char) text[keep] & 0xC0) == 0x80)
			keep--; /* never split a UTF-8 sequence */
	}
	return json_pack("{s:s%, s:I, s:I, s:b, s:b}", "text", text ? text : "", keep, "bytes",
			 json_integer_value(json_object_get(s, "bytes")), "captured_bytes",
			 json_integer_value(json_object_get(s, "captured_bytes")), "truncated",
			 json_is_true(json_object_get(s, "truncated")), "text_truncated",
			 keep < len);
}

/* a manifest path as the report writes it ("\xNN" escapes) back to bytes; NULL if odd */
static char *
unescape_path(const char *p)
{
	char *out = xmalloc(strlen(p) + 1), *o = out;

	for (; *p; p++) {
		if (*p == '\\' && p[1] == 'x' && p[2] && p[3]) {
			char hex[3] = { p[2], p[3], 0 };
			char *end;
			long v = strtol(hex, &end, 16);

			if (*end || v == 0) {
				free(out);
				return NULL;
			}
			*o++ = (char) v;
			p += 3;
		} else {
			*o++ = *p;
		}
	}
	*o = '\0';
	return out;
}

static bool
image_magic(const char *mime, const unsigned char *b, size_t n)
{
	if (strcmp(mime, "image/png") == 0)
		return n > 8 && memcmp(b, "\x89PNG\r\n\x1a\n", 8) == 0;
	if (strcmp(mime, "image/jpeg") == 0)
		return n > 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF;
	if (strcmp(mime, "image/svg+xml") == 0)
		return mcp_utf8_valid((const char *) b, n) && memmem(b, n, "<svg", 4);
	return false;
}

/* An image block from a file beneath the workspace, or NULL (too big, not what it says). */
static json_t *
image_block(int ws, const char *path, const char *mime, uint64_t cap)
{
	struct stat st;
	cleanup_fd int fd = ws >= 0 ? mcp_open_beneath(ws, path, &st) : -1;
	cleanup_free unsigned char *buf = NULL;
	cleanup_free char *b64 = NULL;
	size_t got = 0;

	if (fd < 0 || (uint64_t) st.st_size > cap || st.st_size == 0)
		return NULL;
	buf = xmalloc((size_t) st.st_size);
	while (got < (size_t) st.st_size) {
		ssize_t n = pread(fd, buf + got, (size_t) st.st_size - got, (off_t) got);

		if (n <= 0)
			break;
		got += (size_t) n;
	}
	if (got != (size_t) st.st_size || !image_magic(mime, buf, got))
		return NULL;
	b64 = mcp_base64(buf, got);
	return json_pack("{s:s, s:s, s:s}", "type", "image", "data", b64, "mimeType", mime);
}

static void
fmt_bytes(char *buf, size_t size, double b)
{
	if (b >= 1 << 30)
		snprintf(buf, size, "%.1f GiB", b / (1 << 30));
	else if (b >= 1 << 20)
		snprintf(buf, size, "%.1f MiB", b / (1 << 20));
	else if (b >= 1 << 10)
		snprintf(buf, size, "%.1f KiB", b / (1 << 10));
	else
		snprintf(buf, size, "%.0f B", b);
}

/* the last n bytes of s, starting on a UTF-8 boundary */
static const char *
tail_of(const char *s, size_t n)
{
	size_t len = strlen(s);
	const char *t = len > n ? s + len - n : s;

	while (*t && ((unsigned char) *t & 0xC0) == 0x80)
		t++;
	return t;
}

/* The run's files for structuredContent: every entry but the script, each regular file with
 * its URI; images the run made go into content, links to its results into links. */
static json_t *
result_files(struct mcp *m, const char *job_id, json_t *rep, json_t *content, json_t *links)
{
	const char *lang = json_string_value(json_object_get(rep, "lang"));
	const char *script = lang && strcmp(lang, "node") == 0 ? "script.js" : "script.py";
	cleanup_fd int ws = mcp_run_workspace(m, job_id);
	json_t *files = json_array(), *f;
	int images = 0, n_links = 0;
	size_t i;

	/* files: every regular file but the script, each with its URI */
	json_array_foreach(json_object_get(rep, "files"), i, f)
	{
		const char *path = json_string_value(json_object_get(f, "path"));
		const char *type = json_string_value(json_object_get(f, "type"));
		cleanup_free char *raw = path ? unescape_path(path) : NULL;
		const char *origin = json_string_value(json_object_get(f, "origin"));
		json_t *e;
		const char *mime;

		/* the script itself is not a result; origin says so where the report has it */
		if (!raw || !type ||
		    (origin ? strcmp(origin, "script") == 0 : strcmp(raw, script) == 0))
			continue;
		e = json_pack("{s:s, s:s, s:O}", "path", path, "type", type, "size",
			      json_object_get(f, "size") ?: json_null());
		if (json_object_get(f, "sha256"))
			json_object_set(e, "sha256", json_object_get(f, "sha256"));
		if (strcmp(type, "file") == 0 && mcp_path_ok(raw)) {
			char *uri = mcp_uri_build(job_id, raw);
			json_t *img = NULL;

			mime = mcp_mime_type(raw);
			json_object_set_new(e, "mime_type", json_string(mime));
			json_object_set_new(e, "uri", json_string(uri));
			/* images the run made or changed, not the caller's own coming back */
			if (images < m->pol.max_images &&
			    (!origin || strcmp(origin, "unchanged") != 0) &&
			    (strcmp(mime, "image/png") == 0 || strcmp(mime, "image/jpeg") == 0 ||
			     strcmp(mime, "image/svg+xml") == 0))
				img = image_block(ws, raw, mime, m->pol.image_bytes);
			if (img) {
				images++;
				json_array_append_new(content, img);
			}
			/* dot-directories (caches a library left under HOME=/work) stay in the
			 * manifest, not in the blocks the model reads; so do the caller's own
			 * files the run did not change (issue 25: an uploaded sales.csv came back
			 * beside the results) */
			if (n_links < MAX_LINKS && raw[0] != '.' && !strstr(raw, "/.") &&
			    (!origin || strcmp(origin, "unchanged") != 0)) {
				json_t *l =
					json_pack("{s:s, s:s, s:s, s:s}", "type", "resource_link",
						  "uri", uri, "name", raw, "mimeType", mime);

				if (json_is_integer(json_object_get(f, "size")))
					json_object_set(l, "size", json_object_get(f, "size"));
				json_array_append_new(links, l);
				n_links++;
			}
			free(uri);
		}
		if (json_object_get(f, "flags"))
			json_object_set(e, "flags", json_object_get(f, "flags"));
		if (origin)
			json_object_set_new(e, "origin", json_string(origin));
		json_array_append_new(files, e);
	}
	return files;
}

/* structuredContent: the report's facts an agent acts on. */
static json_t *
result_structured(struct mcp *m, const char *job_id, json_t *rep, int64_t queue_ms, bool ok,
		  json_t *files)
{
	const char *status = json_string_value(json_object_get(rep, "status")) ?: "?";
	json_t *exit_code = json_object_get(rep, "exit_code");
	json_t *usage = json_object_get(rep, "usage");
	json_t *sc, *prot = json_object(), *lim = json_object(), *k;
	const char *key;

	json_object_foreach(json_object_get(rep, "sandbox"), key, k)
	{
		json_object_set_new(prot, key,
				    json_boolean(json_is_true(json_object_get(k, "enforced"))));
	}
	json_object_foreach(json_object_get(rep, "limits"), key, k)
	{
		json_object_set(lim, key, json_object_get(k, "enforced") ?: json_null());
	}

	sc = json_pack("{s:s, s:O, s:s, s:b, s:O, s:O, s:O, s:O, s:O, s:O, s:O}", "run_id", job_id,
		       "agentbox_run_id", json_object_get(rep, "run_id") ?: json_null(), "status",
		       status, "ok", ok, "exit_code", exit_code ?: json_null(), "signal",
		       json_object_get(rep, "signal_name") ?: json_null(), "message",
		       json_object_get(rep, "message") ?: json_null(), "fix",
		       json_object_get(rep, "fix") ?: json_null(), "limits_hit",
		       json_object_get(rep, "limits_hit") ?: json_null(), "wall_ms",
		       json_object_get(rep, "wall_ms") ?: json_null(), "cpu_ms",
		       json_object_get(rep, "cpu_ms") ?: json_null());
	json_object_set_new(sc, "warm", json_boolean(json_is_true(json_object_get(rep, "warm"))));
	if (!json_is_string(json_object_get(sc, "agentbox_run_id")))
		json_object_del(sc, "agentbox_run_id");
	if (!json_is_array(json_object_get(sc, "limits_hit")))
		json_object_set_new(sc, "limits_hit", json_array());
	json_object_set_new(sc, "queue_ms", queue_ms >= 0 ? json_integer(queue_ms) : json_null());
	json_object_set(sc, "memory_peak_bytes",
			json_object_get(usage, "memory_peak_bytes") ?: json_null());
	json_object_set_new(sc, "stdout",
			    trim_stream(json_object_get(rep, "stdout"), m->pol.text_bytes));
	json_object_set_new(sc, "stderr",
			    trim_stream(json_object_get(rep, "stderr"), m->pol.text_bytes));
	json_object_set_new(sc, "files", files);
	json_object_set_new(sc, "files_truncated",
			    json_boolean(json_is_true(json_object_get(
				    json_object_get(rep, "files_summary"), "truncated"))));
	json_object_set_new(sc, "protections", prot);
	json_object_set_new(sc, "limits", lim);
	json_object_set_new(sc, "warnings",
			    json_is_array(json_object_get(rep, "warnings"))
				    ? json_incref(json_object_get(rep, "warnings"))
				    : json_array());

	return sc;
}

/* The text the model reads first: what happened, the figures, the fix, both streams' ends,
 * the files, how many warnings. */
static char *
result_summary(const char *job_id, json_t *rep, json_t *files)
{
	const char *status = json_string_value(json_object_get(rep, "status")) ?: "?";
	json_t *exit_code = json_object_get(rep, "exit_code");
	json_t *usage = json_object_get(rep, "usage");
	char peak[32] = "not measured", cpu[32] = "not measured", line[1024];
	size_t n_files = json_array_size(files), i;
	struct strv sum = { 0 };
	json_t *f;
	char *summary;

	if (json_is_integer(json_object_get(usage, "memory_peak_bytes")))
		fmt_bytes(peak, sizeof(peak),
			  (double) json_integer_value(json_object_get(usage, "memory_peak_bytes")));
	if (strcmp(status, "exited") == 0)
		snprintf(line, sizeof(line), "run %s: exited with code %lld", job_id,
			 (long long) json_integer_value(exit_code));
	else if (strcmp(status, "signaled") == 0)
		snprintf(line, sizeof(line), "run %s: killed by signal %s", job_id,
			 json_string_value(json_object_get(rep, "signal_name")) ?: "?");
	else
		snprintf(line, sizeof(line), "run %s: %s", job_id, status);
	strv_push(&sum, line);
	if (json_is_integer(json_object_get(rep, "wall_ms")) &&
	    strcmp(status, "setup_error") != 0 && strcmp(status, "usage_error") != 0) {
		/* a figure not measured says so (issue 25), never a number */
		if (json_is_integer(json_object_get(rep, "cpu_ms")))
			snprintf(cpu, sizeof(cpu), "%.2f s",
				 (double) json_integer_value(json_object_get(rep, "cpu_ms")) /
					 1000.0);
		strv_pushf(&sum, " in %.2f s (CPU %s, peak memory %s)",
			   (double) json_integer_value(json_object_get(rep, "wall_ms")) / 1000.0,
			   cpu, peak);
	}
	if (json_string_value(json_object_get(rep, "message")))
		strv_pushf(&sum, "\n%s", json_string_value(json_object_get(rep, "message")));
	if (json_string_value(json_object_get(rep, "fix")))
		strv_pushf(&sum, " (fix: %s)", json_string_value(json_object_get(rep, "fix")));
	if (json_string_value(json_object_get(rep, "hint")))
		strv_pushf(&sum, "\nhint: %s", json_string_value(json_object_get(rep, "hint")));
	for (int s = 0; s < 2; s++) {
		const char *name = s ? "stderr" : "stdout";
		json_t *st = json_object_get(rep, name);
		const char *text = json_string_value(json_object_get(st, "text")) ?: "";
		json_int_t bytes = json_integer_value(json_object_get(st, "bytes"));

		if (bytes == 0) {
			strv_pushf(&sum, "\n%s: (empty)", name);
			continue;
		}
		if (strlen(text) > 2000)
			strv_pushf(&sum, "\n%s (%lld bytes%s; the last 2000):\n%s", name,
				   (long long) bytes,
				   json_is_true(json_object_get(st, "truncated")) ? ", truncated"
										  : "",
				   tail_of(text, 2000));
		else
			strv_pushf(&sum, "\n%s (%lld bytes):\n%s", name, (long long) bytes, text);
	}
	if (n_files > 0) {
		size_t shown = 0;

		strv_pushf(&sum,
			   "\nfiles (%zu entries; hidden ones and directories only in "
			   "structuredContent):",
			   n_files);

		json_array_foreach(files, i, f)
		{
			const char *p = json_string_value(json_object_get(f, "path"));

			if (!p || p[0] == '.' || strstr(p, "/.") ||
			    strcmp(json_string_value(json_object_get(f, "type")) ?: "", "dir") == 0)
				continue;
			if (shown++ >= 20) {
				strv_pushf(&sum, " ... (list_files for all)");
				break;
			}
			strv_pushf(&sum, " %s (%lld B)",
				   json_string_value(json_object_get(f, "path")),
				   (long long) json_integer_value(json_object_get(f, "size")));
		}
	}
	/* a default this host cannot apply (defaults_not_applied: cpus without a cgroup...) is
	 * the same on every run: structuredContent.warnings has it, sandbox_info says it once;
	 * the text counts the warnings about this run (issue 25) */
	{
		json_t *defaults = json_object_get(rep, "defaults_not_applied"), *w, *d;
		size_t j, n_warn = 0;

		json_array_foreach(json_object_get(rep, "warnings"), i, w)
		{
			const char *t = json_string_value(w) ?: "";
			bool of_default = false;

			json_array_foreach(defaults, j, d)
			{
				const char *name = json_string_value(d) ?: "";

				if (strncmp(t, "default ", 8) == 0 &&
				    strncmp(t + 8, name, strlen(name)) == 0 &&
				    t[8 + strlen(name)] == ' ')
					of_default = true;
			}
			n_warn += !of_default;
		}
		if (n_warn > 0)
			strv_pushf(&sum, "\nwarnings: %zu (see structuredContent.warnings)",
				   n_warn);
	}
	summary = strv_join(&sum, "");
	strv_done(&sum);
	return summary;
}

json_t *
mcp_result_from_report(struct mcp *m, const char *job_id, json_t *rep, int64_t queue_ms)
{
	const char *status = json_string_value(json_object_get(rep, "status")) ?: "?";
	json_t *exit_code = json_object_get(rep, "exit_code");
	bool ok = strcmp(status, "exited") == 0 && json_integer_value(exit_code) == 0 &&
		  json_is_integer(exit_code);
	json_t *content = json_array(), *links = json_array();
	json_t *files = result_files(m, job_id, rep, content, links);
	json_t *sc = result_structured(m, job_id, rep, queue_ms, ok, files);
	cleanup_free char *summary = result_summary(job_id, rep, files);

	json_array_insert_new(content, 0, text_block(summary));
	json_array_extend(content, links);
	json_decref(links);
	return json_pack("{s:o, s:o, s:b}", "content", content, "structuredContent", sc, "isError",
			 !ok);
}

/* A cell's stream for structuredContent: its text capped (the head) as a run's is. */
static json_t *
cell_stream(const json_t *st, uint64_t cap)
{
	json_t *out = json_deep_copy(st);
	const char *text = json_string_value(json_object_get(st, "text"));
	size_t len = text ? strlen(text) : 0, keep = len;

	if (!out)
		return json_object();
	if (keep > cap) {
		keep = (size_t) cap;
		while (keep > 0 && ((unsigned char) text[keep] & 0xC0) == 0x80)
			keep--;
		json_object_set_new(out, "text", json_stringn(text, keep));
	}
	json_object_set_new(out, "text_truncated", json_boolean(keep < len));
	return out;
}

/* A cell's images as image blocks (PNG checked, within --image-size and --max-images); an
 * image left out keeps its size in structuredContent, not its data. Returns how many. */
static size_t
cell_images(struct mcp *m, json_t *sc, json_t *content)
{
	json_t *images = json_object_get(sc, "images"), *im;
	size_t i, n = 0;

	json_array_foreach(images, i, im)
	{
		const char *data = json_string_value(json_object_get(im, "data"));
		size_t len = 0;
		unsigned char *bin =
			data ? mcp_unbase64(data, strlen(data), m->pol.image_bytes, &len) : NULL;

		if (bin && (int) n < m->pol.max_images && image_magic("image/png", bin, len)) {
			json_array_append_new(content,
					      json_pack("{s:s, s:s, s:s}", "type", "image", "data",
							data, "mimeType", "image/png"));
			n++;
		} else {
			json_object_del(im, "data");
			json_object_set_new(im, "omitted",
					    json_string("not a PNG, over the server's image size "
							"cap, or past its image count cap"));
		}
		free(bin);
	}
	return n;
}

/* the text of a cell's result: what happened, then its output, value and exception */
static char *
cell_summary(json_t *c, size_t n_images)
{
	const char *status = json_string_value(json_object_get(c, "status")) ?: "?";
	json_t *ses = json_object_get(c, "session"), *err = json_object_get(c, "error"), *l;
	const char *res = json_string_value(json_object_get(json_object_get(c, "result"), "text"));
	struct strv sum = { 0 };
	size_t i, n_img = json_array_size(json_object_get(c, "images"));
	char *text;

	strv_pushf(&sum, "cell %lld of session %s: %s in %.2f s",
		   (long long) json_integer_value(json_object_get(c, "id")),
		   json_string_value(json_object_get(ses, "id")) ?: "?", status,
		   (double) json_integer_value(json_object_get(c, "wall_ms")) / 1000.0);
	if (json_string_value(json_object_get(c, "message")))
		strv_pushf(&sum, "\n%s", json_string_value(json_object_get(c, "message")));
	if (strcmp(status, "lost") == 0)
		strv_pushf(&sum, "\nto go on: run_code with \"restart\": true starts this session "
				 "again (empty), or create_session a new one");
	if (json_string_value(json_object_get(ses, "restarted")))
		strv_pushf(&sum, "\nthe session was restarted: %s",
			   json_string_value(json_object_get(ses, "restarted")));
	for (int k = 0; k < 2; k++) {
		json_t *st = json_object_get(c, k ? "stderr" : "stdout");
		const char *t = json_string_value(json_object_get(st, "text")) ?: "";
		json_int_t bytes = json_integer_value(json_object_get(st, "bytes"));

		if (bytes == 0)
			continue;
		if (strlen(t) > 8000)
			strv_pushf(&sum, "\n%s (%lld bytes; the last 8000):\n%s",
				   k ? "stderr" : "stdout", (long long) bytes, tail_of(t, 8000));
		else
			strv_pushf(&sum, "\n%s (%lld bytes):\n%s", k ? "stderr" : "stdout",
				   (long long) bytes, t);
	}
	if (res)
		strv_pushf(&sum, "\nresult: %.8000s%s", res, strlen(res) > 8000 ? " ..." : "");
	if (json_is_object(err)) {
		strv_pushf(&sum, "\n%s: %s",
			   json_string_value(json_object_get(err, "type")) ?: "Error",
			   json_string_value(json_object_get(err, "value")) ?: "");
		if (json_array_size(json_object_get(err, "traceback")) > 0)
			strv_pushf(&sum, "\ntraceback:");
		json_array_foreach(json_object_get(err, "traceback"), i, l)
		{
			if (i < 40)
				strv_pushf(&sum, "\n%.1000s", json_string_value(l) ?: "");
		}
	}
	if (n_img > 0)
		strv_pushf(&sum, "\nimages: %zu (%zu as image blocks)", n_img, n_images);
	text = strv_join(&sum, "");
	strv_done(&sum);
	return text;
}

json_t *
mcp_result_from_cell(struct mcp *m, const char *cell_json)
{
	json_t *c = json_loads(cell_json, 0, NULL), *content = json_array();
	const char *status;
	cleanup_free char *text = NULL;
	size_t n;

	if (!json_is_object(c)) {
		json_decref(c);
		json_decref(content);
		return mcp_result_error("the cell's result is unreadable");
	}
	status = json_string_value(json_object_get(c, "status")) ?: "?";
	for (int k = 0; k < 2; k++) {
		const char *name = k ? "stderr" : "stdout";

		json_object_set_new(c, name,
				    cell_stream(json_object_get(c, name), m->pol.text_bytes));
	}
	json_object_set(c, "session_id",
			json_object_get(json_object_get(c, "session"), "id") ?: json_null());
	n = cell_images(m, c, content);
	text = cell_summary(c, n);
	json_array_insert_new(content, 0, text_block(text));
	return json_pack("{s:o, s:o, s:b}", "content", content, "structuredContent", c, "isError",
			 strcmp(status, "ok") != 0);
}

/* ---- arguments -------------------------------------------------------------------------- */

static json_t *argerr(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static json_t *
argerr(const char *fmt, ...)
{
	char buf[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	return mcp_result_error("invalid arguments: %s", buf);
}

/* only the keys in allowed, each of the type asked: a mistake is a message, NULL when fine */
static json_t *
check_keys(json_t *args, const char *const *allowed)
{
	const char *key;
	json_t *v;

	json_object_foreach(args, key, v)
	{
		const char *const *a;

		for (a = allowed; *a; a++)
			if (strcmp(*a, key) == 0)
				break;
		if (!*a)
			return argerr("unknown argument '%s'", key);
	}
	return NULL;
}

static const char *
get_str(json_t *args, const char *key, bool required, json_t **err)
{
	json_t *v = json_object_get(args, key);

	if (!v && !required)
		return NULL;
	if (!json_is_string(v)) {
		*err = argerr("'%s' must be a string%s", key, required ? " (required)" : "");
		return NULL;
	}
	return json_string_value(v);
}

static bool
get_wait(struct mcp *m, json_t *args, uint64_t *ret, json_t **err)
{
	json_t *v = json_object_get(args, "wait_s");
	double d;

	*ret = m->pol.wait_ms;
	if (!v)
		return true;
	if (!json_is_number(v) || (d = json_number_value(v)) < 0 || d != d) {
		*err = argerr("'wait_s' must be a number of seconds >= 0");
		return false;
	}
	*ret = d * 1000.0 > (double) m->pol.max_wait_ms ? m->pol.max_wait_ms
							: (uint64_t) (d * 1000.0);
	return true;
}

/* limits: the call's (which may only lower the operator's caps) and the caps themselves where
 * they are below the defaults */
static json_t *
build_limits(struct mcp *m, json_t *given, json_t **err)
{
	struct ab_run_opts defaults, o;
	json_t *out = json_object();
	const char *key;
	json_t *v;

	run_opts_init(&defaults);
	run_opts_init(&o);
	if (given && !json_is_object(given)) {
		*err = argerr("'limits' must be an object");
		goto fail;
	}
	json_object_foreach(given, key, v)
	{
		int id = cli_limit_id(key);
		char val[64];
		struct ab_err e = { 0 };

		if (id < 0) {
			*err = argerr("unknown limit '%s' (timeout, memory, pids, cpus, cpu-time, "
				      "disk, inodes, tmp-size, file-size, nofile, output-limit)",
				      key);
			goto fail;
		}
		if (json_is_string(v) && json_string_length(v) < sizeof(val))
			snprintf(val, sizeof(val), "%s", json_string_value(v));
		else if (json_is_integer(v))
			snprintf(val, sizeof(val), "%lld", (long long) json_integer_value(v));
		else if (json_is_real(v))
			snprintf(val, sizeof(val), "%.6f", json_real_value(v));
		else {
			*err = argerr("limit '%s' must be a string like \"30s\" / \"256M\" or a "
				      "number",
				      key);
			goto fail;
		}
		if (cli_set_limit(&o, (enum ab_limit_id) id, val, &e) < 0) {
			words_err_for_spec(&e); /* the call's words: limits.memory, not --memory */
			*err = argerr("%s (fix: %s)", e.msg, e.fix);
			goto fail;
		}
		if (m->pol.cap_set[id] && o.limits[id].value > m->pol.cap[id]) {
			*err = argerr(
				"limit '%s' %s is above this server's cap (%llu in the limit's "
				"base unit: ms, bytes, milli-cores or a count); ask for less",
				key, val, (unsigned long long) m->pol.cap[id]);
			goto fail;
		}
	}
	for (int id = 0; id < AB_LIM_COUNT; id++) {
		uint64_t v64;

		if (o.limits[id].set)
			v64 = o.limits[id].value;
		else if (m->pol.cap_set[id] && (defaults.limits[id].value == 0 ||
						m->pol.cap[id] < defaults.limits[id].value))
			v64 = m->pol.cap[id];
		else
			continue;
		json_object_set_new(out, cli_limit_name((enum ab_limit_id) id),
				    spec_limit_value((enum ab_limit_id) id, v64));
	}
	run_opts_done(&defaults);
	run_opts_done(&o);
	return out;
fail:
	run_opts_done(&defaults);
	run_opts_done(&o);
	json_decref(out);
	return NULL;
}

static json_t *
check_files_arg(struct mcp *m, json_t *files)
{
	size_t i;
	json_t *f;

	if (!files)
		return NULL;
	if (!json_is_array(files))
		return argerr("'files' must be an array of {path, content, encoding}");
	if (json_array_size(files) > 1000)
		return argerr("'files': at most 1000 files");
	json_array_foreach(files, i, f)
	{
		const char *path = json_string_value(json_object_get(f, "path"));
		const char *enc = json_string_value(json_object_get(f, "encoding"));
		static const char *const keys[] = { "path", "content", "encoding", NULL };
		json_t *e;

		if (!json_is_object(f))
			return argerr("files[%zu] must be an object", i);
		if ((e = check_keys(f, keys)))
			return e;
		if (!path || !mcp_path_ok(path))
			return argerr("files[%zu].path must be a relative path without '..' or "
				      "empty components",
				      i);
		if (strcmp(path, "script.py") == 0 || strcmp(path, "script.js") == 0)
			return argerr("files[%zu].path '%s' is the name the code runs under: "
				      "choose another",
				      i, path);
		if (!json_is_string(json_object_get(f, "content")))
			return argerr("files[%zu].content must be a string", i);
		if (json_object_get(f, "encoding") &&
		    (!enc || (strcmp(enc, "utf-8") != 0 && strcmp(enc, "base64") != 0)))
			return argerr("files[%zu].encoding must be utf-8 or base64", i);
	}
	(void) m;
	return NULL;
}

json_t *
mcp_spec_template(struct mcp *m, const char *lang)
{
	json_t *err = NULL, *limits = build_limits(m, NULL, &err), *spec;

	json_decref(err);
	if (!limits)
		return NULL;
	spec = json_pack("{s:s, s:s, s:o}", "language", lang, "code", "", "limits", limits);
	if (m->pol.env_dir)
		json_object_set_new(spec, "env_dir", json_string(m->pol.env_dir));
	return spec;
}

/* The call's files under state/staging/ID, each top-level entry appended to inputs (copied
 * into /work under its name). Returns the staging path, or NULL with *err. */
static char *
stage_files(struct mcp *m, json_t *files, const char *id, json_t *inputs, json_t **err)
{
	cleanup_fd int dfd = -1;
	char msg[512] = "";
	char *staging;
	json_t *names = json_object(), *f;
	size_t i;

	if (m->staging_fd < 0 || mkdirat(m->staging_fd, id, 0700) < 0 ||
	    (dfd = openat(m->staging_fd, id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) <
		    0) {
		*err = mcp_result_error("cannot stage the files: %s", strerror(errno));
		json_decref(names);
		return NULL;
	}
	if (mcp_write_files(m, dfd, files, msg, sizeof(msg)) < 0) {
		*err = argerr("%s", msg);
		json_decref(names);
		mcp_staging_remove(m, id);
		return NULL;
	}
	staging = xasprintf("%s/staging/%s", m->pol.state_dir, id);
	json_array_foreach(files, i, f)
	{
		const char *p = json_string_value(json_object_get(f, "path"));
		const char *slash = strchr(p, '/');
		char *top = slash ? xstrndup(p, (size_t) (slash - p)) : xstrdup(p);

		if (!json_object_get(names, top)) {
			json_object_set_new(names, top, json_true());
			json_array_append_new(inputs, json_sprintf("%s/%s", staging, top));
		}
		free(top);
	}
	json_decref(names);
	return staging;
}

static bool
lang_allowed(struct mcp *m, const char *lang, json_t **err)
{
	if ((strcmp(lang, "python") == 0 && m->pol.allow_python) ||
	    (strcmp(lang, "node") == 0 && m->pol.allow_node))
		return true;
	*err = argerr("language '%s' is not allowed here (allowed: %s%s%s)", lang,
		      m->pol.allow_python ? "python" : "",
		      m->pol.allow_python && m->pol.allow_node ? ", " : "",
		      m->pol.allow_node ? "node" : "");
	return false;
}

/* a duration argument: seconds (a number) or agentbox's units ("10m") */
static json_t *
duration_arg(json_t *v, const char *key, json_t **err)
{
	if (json_is_string(v))
		return json_incref(v);
	if (json_is_number(v) && json_number_value(v) > 0 &&
	    json_number_value(v) <= 7 * 24 * 3600.0)
		return json_sprintf("%.0fms", json_number_value(v) * 1000.0);
	*err = argerr("'%s' must be a number of seconds (up to 7 days) or a duration like "
		      "\"10m\"",
		      key);
	return NULL;
}

static void
create_session(struct mcp *m, const struct mcp_req *req, json_t *args)
{
	static const char *const keys[] = { "language",     "limits",       "env",          "files",
					    "idle_timeout", "max_lifetime", "requirements", NULL };
	json_t *err = NULL, *spec = NULL, *limits, *ses = json_object(), *inputs = json_array();
	json_t *files = json_object_get(args, "files");
	const char *lang;
	char id[MCP_ID_LEN + 1];
	cleanup_free char *staging = NULL;
	ab_error *e = NULL;
	ab_spec *s;

	if ((err = check_keys(args, keys)))
		goto fail;
	lang = get_str(args, "language", false, &err) ?: "python";
	if (err || !lang_allowed(m, lang, &err) || (err = check_files_arg(m, files)))
		goto fail;
	for (int i = 0; i < 2; i++) {
		const char *key = i ? "max_lifetime" : "idle_timeout";
		json_t *v = json_object_get(args, key), *d;

		if (!v)
			continue;
		if (!(d = duration_arg(v, key, &err)))
			goto fail;
		json_object_set_new(ses, key, d);
	}
	if (!(limits = build_limits(m, json_object_get(args, "limits"), &err)))
		goto fail;
	spec = json_pack("{s:s, s:o, s:O}", "language", lang, "limits", limits, "session", ses);
	if (json_object_get(args, "env"))
		json_object_set(spec, "env", json_object_get(args, "env"));
	if (json_object_get(args, "requirements"))
		json_object_set(spec, "requirements", json_object_get(args, "requirements"));
	else if (m->pol.env_dir)
		json_object_set_new(spec, "env_dir", json_string(m->pol.env_dir));
	/* checked now, as the library will: a mistake is the caller's, answered at once */
	if (!(s = ab_spec_from_jansson(spec, &e))) {
		err = argerr("%s%s%s%s", e ? ab_error_message(e) : "out of memory",
			     e && *ab_error_fix(e) ? " (fix: " : "", e ? ab_error_fix(e) : "",
			     e && *ab_error_fix(e) ? ")" : "");
		ab_error_free(e);
		goto fail;
	}
	ab_spec_free(s);
	mcp_id_new(id);
	if (json_array_size(files) > 0) {
		if (!(staging = stage_files(m, files, id, inputs, &err)))
			goto fail;
		json_object_set(spec, "inputs", inputs);
	}
	json_decref(ses);
	json_decref(inputs);
	mcp_session_create(m, req, spec, staging ? id : NULL);
	return;
fail:
	json_decref(ses);
	json_decref(inputs);
	json_decref(spec);
	mcp_reply(m, req, err);
}

/* run_code with session_id: the code runs as a cell of that session */
static void
run_cell(struct mcp *m, const struct mcp_req *req, json_t *args)
{
	static const char *const keys[] = { "session_id", "code",     "restart",
					    "limits",     "language", NULL };
	json_t *err = NULL, *limits = json_object_get(args, "limits");
	json_t *restart = json_object_get(args, "restart"), *v;
	const char *sid, *key, *lang;
	int64_t timeout_ms = 0;

	if ((err = check_keys(args, keys))) {
		const char *k = NULL;

		json_decref(err);
		json_object_foreach(args, k, v)
		{
			for (size_t i = 0; keys[i] && k; i++)
				if (strcmp(keys[i], k) == 0)
					k = NULL;
			if (k)
				break;
		}
		err = argerr("'%s' does not apply to a cell of a session (run_code with "
			     "session_id takes code, limits.timeout and restart; files, env and "
			     "limits are given to create_session)",
			     k ?: "?");
		goto fail;
	}
	sid = get_str(args, "session_id", true, &err);
	lang = err ? NULL : get_str(args, "language", false, &err);
	if (err || !get_str(args, "code", true, &err))
		goto fail;
	if (restart && !json_is_boolean(restart)) {
		err = argerr("'restart' must be true or false");
		goto fail;
	}
	if (limits && !json_is_object(limits)) {
		err = argerr("'limits' must be an object");
		goto fail;
	}
	json_object_foreach(limits, key, v)
	{
		if (strcmp(key, "timeout") != 0) {
			err = argerr("limits.%s does not apply to a cell: a session's limits are "
				     "given to create_session (a cell takes limits.timeout)",
				     key);
			goto fail;
		}
	}
	if (limits && json_object_get(limits, "timeout")) {
		/* checked against the cap as any limit, then read back ("30000ms") */
		json_t *lim = build_limits(m, limits, &err);
		uint64_t ms = 0;

		if (!lim)
			goto fail;
		if (units_parse_duration_ms(
			    json_string_value(json_object_get(lim, "timeout")) ?: "", &ms) == 0)
			timeout_ms = (int64_t) ms;
		json_decref(lim);
	}
	mcp_session_cell(m, req, sid, lang, json_object_get(args, "code"), timeout_ms,
			 json_is_true(restart));
	return;
fail:
	mcp_reply(m, req, err);
}

static void
run_code(struct mcp *m, const struct mcp_req *req, json_t *args)
{
	static const char *const keys[] = { "language", "code",         "files",  "args",
					    "stdin",    "env",          "limits", "workspace_id",
					    "wait_s",   "requirements", NULL };
	json_t *err = NULL, *spec = NULL, *limits, *inputs = json_array();
	const char *lang, *code, *stdin_data, *ws;
	uint64_t wait_ms;
	char job[MCP_ID_LEN + 1];
	cleanup_free char *staging = NULL;
	json_t *files = json_object_get(args, "files");

	if (json_object_get(args, "session_id")) {
		run_cell(m, req, args);
		json_decref(inputs);
		return;
	}
	if ((err = check_keys(args, keys)))
		goto fail;
	lang = get_str(args, "language", false, &err);
	code = err ? NULL : get_str(args, "code", true, &err);
	/* issue 25: Python unless the call or a node shebang says otherwise (as agentbox run) */
	if (!err && !lang)
		lang = strncmp(code, "#!", 2) == 0 && strstr(code, "node") &&
				       strstr(code, "node") < code + strcspn(code, "\n")
			       ? "node"
			       : "python";
	stdin_data = err ? NULL : get_str(args, "stdin", false, &err);
	ws = err ? NULL : get_str(args, "workspace_id", false, &err);
	if (err)
		goto fail;
	if (!lang_allowed(m, lang, &err))
		goto fail;
	if (ws && !mcp_id_valid(ws)) {
		err = argerr("no workspace '%s'", ws);
		goto fail;
	}
	if (!get_wait(m, args, &wait_ms, &err) || (err = check_files_arg(m, files)))
		goto fail;
	limits = build_limits(m, json_object_get(args, "limits"), &err);
	if (!limits)
		goto fail;
	/* the call's own strings, shared, not copied: a call may hold megabytes (issue 24) */
	spec = json_pack("{s:s, s:O, s:o}", "language", lang, "code", json_object_get(args, "code"),
			 "limits", limits);
	/* keep in step with mcp_spec_template: the keys a warm slot's class is made of */
	if (json_object_get(args, "args"))
		json_object_set(spec, "args", json_object_get(args, "args"));
	if (json_object_get(args, "env"))
		json_object_set(spec, "env", json_object_get(args, "env"));
	if (stdin_data)
		json_object_set(spec, "stdin_data", json_object_get(args, "stdin"));
	/* packages on request: their own environment instead of the operator's --env-dir */
	if (json_object_get(args, "requirements"))
		json_object_set(spec, "requirements", json_object_get(args, "requirements"));
	else if (m->pol.env_dir)
		json_object_set_new(spec, "env_dir", json_string(m->pol.env_dir));
	/* checked as the library will check it, now: a wrong type in args or env, code or stdin
	 * larger than a run takes, are the caller's, answered on arrival */
	{
		ab_error *e = NULL;
		ab_spec *s = ab_spec_from_jansson(spec, &e);

		if (!s) {
			err = argerr("%s%s%s%s", e ? ab_error_message(e) : "out of memory",
				     e && *ab_error_fix(e) ? " (fix: " : "",
				     e ? ab_error_fix(e) : "", e && *ab_error_fix(e) ? ")" : "");
			ab_error_free(e);
			goto fail;
		}
		ab_spec_free(s);
	}
	mcp_id_new(job);
	if (json_array_size(files) > 0 && !(staging = stage_files(m, files, job, inputs, &err)))
		goto fail;
	if (ws) {
		int r = mcp_ws_inputs(m, ws, inputs);

		if (r < 0) {
			err = argerr("no workspace '%s' (expired or deleted?)", ws);
			goto fail;
		}
	}
	if (json_array_size(inputs) > 0)
		json_object_set(spec, "inputs", inputs);
	json_decref(inputs);
	inputs = NULL;
	mcp_submit(m, req, spec, job, staging != NULL, ws, wait_ms);
	return;
fail:
	json_decref(spec);
	json_decref(inputs);
	if (staging)
		mcp_staging_remove(m, job); /* nothing will run */
	mcp_reply(m, req, err);
}

static void
list_files(struct mcp *m, const struct mcp_req *req, json_t *args)
{
	static const char *const keys[] = { "run_id", "prefix", NULL };
	json_t *err = NULL, *res, *files, *sc, *out = json_array(), *f;
	const char *id, *prefix;
	size_t i;

	if ((err = check_keys(args, keys))) {
		json_decref(out);
		mcp_reply(m, req, err);
		return;
	}
	id = get_str(args, "run_id", true, &err);
	prefix = err ? NULL : get_str(args, "prefix", false, &err);
	res = err ? NULL : mcp_result_from_record(m, id);
	if (!res) {
		json_decref(out);
		mcp_reply(m, req, err ? err : mcp_result_error("no finished run '%s'", id));
		return;
	}
	sc = json_object_get(res, "structuredContent");
	files = json_object_get(sc, "files");
	json_array_foreach(files, i, f)
	{
		const char *p = json_string_value(json_object_get(f, "path"));

		if (!prefix || (p && strncmp(p, prefix, strlen(prefix)) == 0))
			json_array_append(out, f);
	}
	{
		char buf[128];
		json_t *r;

		snprintf(buf, sizeof(buf), "%zu files in run %s", json_array_size(out), id);
		r = json_pack("{s:[{s:s, s:s}], s:{s:s, s:o, s:b}}", "content", "type", "text",
			      "text", buf, "structuredContent", "run_id", id, "files", out,
			      "truncated", json_is_true(json_object_get(sc, "files_truncated")));
		json_decref(res);
		mcp_reply(m, req, r);
	}
}

static void
read_file(struct mcp *m, const struct mcp_req *req, json_t *args)
{
	static const char *const keys[] = { "run_id", "path", "offset", "length", NULL };
	json_t *err = NULL, *o = json_object_get(args, "offset"),
	       *l = json_object_get(args, "length");
	const char *id, *path;
	uint64_t off = 0, len = m->pol.read_bytes;
	json_t *sc;
	cleanup_free char *msg = NULL;
	int code;

	if ((err = check_keys(args, keys)))
		goto fail;
	id = get_str(args, "run_id", true, &err);
	path = err ? NULL : get_str(args, "path", true, &err);
	if (err)
		goto fail;
	if ((o && (!json_is_integer(o) || json_integer_value(o) < 0)) ||
	    (l && (!json_is_integer(l) || json_integer_value(l) < 1))) {
		err = argerr("offset must be an integer >= 0, length an integer >= 1");
		goto fail;
	}
	if (o)
		off = (uint64_t) json_integer_value(o);
	if (l && (uint64_t) json_integer_value(l) < len)
		len = (uint64_t) json_integer_value(l);
	sc = mcp_read_run_file(m, id, path, off, len, false, &code, &msg);
	if (!sc) {
		err = mcp_result_error("%s", msg ? msg : "cannot read");
		goto fail;
	}
	{
		char buf[256];

		snprintf(buf, sizeof(buf), "%s: bytes %lld..%lld of %lld (%s)%s", path,
			 (long long) json_integer_value(json_object_get(sc, "offset")),
			 (long long) (json_integer_value(json_object_get(sc, "offset")) +
				      json_integer_value(json_object_get(sc, "length"))),
			 (long long) json_integer_value(json_object_get(sc, "size")),
			 json_string_value(json_object_get(sc, "encoding")),
			 json_is_true(json_object_get(sc, "eof")) ? ", to the end" : "");
		mcp_reply(m, req,
			  json_pack("{s:[{s:s, s:s}, {s:s, s:O}], s:o}", "content", "type", "text",
				    "text", buf, "type", "text", "text",
				    json_object_get(sc, "content"), "structuredContent", sc));
	}
	return;
fail:
	mcp_reply(m, req, err);
}

void
mcp_tools_call(struct mcp *m, const struct mcp_req *req, const char *name, json_t *args)
{
	json_t *empty = NULL, *err = NULL;

	if (!args)
		args = empty = json_object();
	if (strcmp(name, "run_code") == 0) {
		run_code(m, req, args);
	} else if (strcmp(name, "wait_run") == 0) {
		static const char *const keys[] = { "run_id", "wait_s", NULL };
		const char *id;
		uint64_t w;

		if (!(err = check_keys(args, keys)) && (id = get_str(args, "run_id", true, &err)) &&
		    get_wait(m, args, &w, &err))
			mcp_wait_job(m, req, id, w);
		else
			mcp_reply(m, req, err);
	} else if (strcmp(name, "cancel_run") == 0) {
		static const char *const keys[] = { "run_id", NULL };
		const char *id;

		if (!(err = check_keys(args, keys)) && (id = get_str(args, "run_id", true, &err))) {
			int r = mcp_cancel_job(m, id);
			char buf[256];

			snprintf(buf, sizeof(buf), "run %s: %s", id,
				 r > 0    ? "cancelling (its sandbox is being killed)"
				 : r == 0 ? "not running (already finished)"
					  : "no such run");
			if (r < 0)
				mcp_reply(m, req, mcp_result_error("%s", buf));
			else
				mcp_reply(m, req,
					  json_pack("{s:[{s:s, s:s}], s:{s:s, s:s}}", "content",
						    "type", "text", "text", buf,
						    "structuredContent", "run_id", id, "state",
						    r > 0 ? "cancelling" : "finished"));
		} else {
			mcp_reply(m, req, err);
		}
	} else if (strcmp(name, "list_files") == 0) {
		list_files(m, req, args);
	} else if (strcmp(name, "read_file") == 0) {
		read_file(m, req, args);
	} else if (strcmp(name, "create_workspace") == 0) {
		static const char *const keys[] = { "files", "ttl_s", NULL };
		json_t *ttl = json_object_get(args, "ttl_s");
		uint64_t ttl_ms = m->pol.ws_ttl_ms;
		char id[MCP_ID_LEN + 1], msg[512] = "";

		if (!(err = check_keys(args, keys)) &&
		    !(err = check_files_arg(m, json_object_get(args, "files"))) && ttl &&
		    (!json_is_number(ttl) || json_number_value(ttl) < 1))
			err = argerr("ttl_s must be a number >= 1");
		if (!err && ttl && json_number_value(ttl) * 1000.0 < (double) ttl_ms)
			ttl_ms = (uint64_t) (json_number_value(ttl) * 1000.0);
		if (!err && mcp_ws_create(m, json_object_get(args, "files"), ttl_ms, id, msg,
					  sizeof(msg)) < 0)
			err = mcp_result_error("%s", msg);
		if (err) {
			mcp_reply(m, req, err);
		} else {
			char buf[128];

			snprintf(buf, sizeof(buf), "workspace %s (expires in %.0f s)", id,
				 (double) ttl_ms / 1000.0);
			mcp_reply(m, req,
				  json_pack("{s:[{s:s, s:s}], s:{s:s, s:I}}", "content", "type",
					    "text", "text", buf, "structuredContent",
					    "workspace_id", id, "expires_unix_ms",
					    (json_int_t) (now_ms() + (int64_t) ttl_ms)));
		}
	} else if (strcmp(name, "delete_workspace") == 0) {
		static const char *const keys[] = { "workspace_id", NULL };
		const char *id;

		if (!(err = check_keys(args, keys)) &&
		    (id = get_str(args, "workspace_id", true, &err))) {
			int r = mcp_ws_delete(m, id);

			if (r < 0)
				mcp_reply(m, req, mcp_result_error("no workspace '%s'", id));
			else
				mcp_reply(m, req,
					  json_pack("{s:[{s:s, s:s}], s:{s:s, s:b}}", "content",
						    "type", "text", "text", "deleted",
						    "structuredContent", "workspace_id", id,
						    "deleted", 1));
		} else {
			mcp_reply(m, req, err);
		}
	} else if (strcmp(name, "create_session") == 0) {
		create_session(m, req, args);
	} else if (strcmp(name, "close_session") == 0) {
		static const char *const keys[] = { "session_id", NULL };
		const char *id;

		if (!(err = check_keys(args, keys)) &&
		    (id = get_str(args, "session_id", true, &err)))
			mcp_session_close(m, req, id);
		else
			mcp_reply(m, req, err);
	} else if (strcmp(name, "sandbox_info") == 0) {
		static const char *const keys[] = { NULL };

		if ((err = check_keys(args, keys)))
			mcp_reply(m, req, err);
		else
			mcp_sandbox_info(m, req);
	} else {
		mcp_reply_error(m, req->id, MCP_INVALID_PARAMS, "Unknown tool",
				json_pack("{s:s}", "name", name));
	}
	json_decref(empty);
}

/* mcp.h: `agentbox mcp`, a Model Context Protocol server over stdio (docs/mcp.md).
 *
 * proto.c   the message handler: one JSON-RPC line in, replies out through a callback.
 *           Pure apart from what the tools it dispatches to do; a libFuzzer target drives it
 *           (tests/fuzz/fuzz-mcp.c).
 * tools.c   the tools: their schemas, their arguments checked, run specs built, reports
 *           turned into tool results.
 * files.c   a kept run's files served safely (openat2 beneath the run's workspace, no
 *           links, size-capped), base64, MIME types, agentbox:// URIs.
 * server.c  the poll loop: stdin, signals, runs (ab_run_start / ab_run_fd / ab_run_wait /
 *           ab_run_cancel), the queue, progress, soft waits, workspaces, retention.
 * sessions.c  sessions (create_session, run_code with session_id, close_session): one live
 *           sandbox each (ab_session_*), stepped in the same loop. */
#pragma once

#include <jansson.h>
#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sys/stat.h>

#include "../spec/options.h"
#include "../util/strv.h"
#include "agentbox/agentbox.h"

#define MCP_ID_LEN       12 /* run and workspace ids: [a-z0-9]{12} */
#define MCP_MAX_RUNS     32 /* the operator's cap on runs at once, by default */
#define MCP_MAX_SESSIONS 4  /* the operator's cap on live sessions, by default */

/* JSON-RPC and MCP error codes */
enum {
	MCP_PARSE_ERROR = -32700,
	MCP_INVALID_REQUEST = -32600,
	MCP_METHOD_NOT_FOUND = -32601,
	MCP_INVALID_PARAMS = -32602,
	MCP_INTERNAL_ERROR = -32603,
	MCP_RESOURCE_NOT_FOUND_LEGACY = -32002, /* 2025-11-25 and earlier */
	MCP_UNSUPPORTED_VERSION = -32022,       /* 2026-07-28 */
};

/* What the operator allows (command line or --config FILE). */
struct mcp_policy {
	char *state_dir; /* runs/, jobs/, workspaces/, staging/ */
	int max_running; /* runs at once, at most (--max-runs; default MCP_MAX_RUNS) */
	/* Below that, a run starts while what the runs going hold fits (issue 25: not the number
	 * of cores, CPU is shared by each run's cpus limit): their memory limits add up to at
	 * most mem_budget (this host's memory), their pids limits to at most tasks_budget (half
	 * of the tasks the host allows this server: threads-max, its RLIMIT_NPROC). One run
	 * alone always starts. */
	uint64_t mem_budget, tasks_budget;
	int max_queued;   /* calls waiting for a slot */
	int max_sessions; /* live sessions at once (--max-sessions; default MCP_MAX_SESSIONS) */
	bool allow_python, allow_node;
	bool cap_set[AB_LIM_COUNT];
	uint64_t cap[AB_LIM_COUNT]; /* in the limit's base unit (ms, bytes, milli-cores...) */
	char *env_dir;              /* a dependency environment mounted into every run */
	/* packages on request (docs/requirements.md): the operator's policy, handed to the
	 * library's context as is (its key: the option's name with '_' for '-') */
	struct strv req_policy; /* "key=value" */
	int keep_runs;          /* retention: at most this many kept runs */
	uint64_t keep_ms;       /* retention: none older than this */
	uint64_t ws_ttl_ms;     /* workspace TTL (default and maximum) */
	uint64_t ws_bytes;      /* workspace size cap */
	int max_workspaces;
	uint64_t file_bytes;  /* one inline file of run_code / create_workspace */
	uint64_t files_bytes; /* all inline files of one call */
	uint64_t image_bytes; /* an image returned as an image block */
	int max_images;       /* image blocks per result */
	uint64_t read_bytes;  /* read_file / resources/read */
	uint64_t text_bytes;  /* stdout/stderr text in a result, per stream */
	uint64_t wait_ms;     /* default soft wait of run_code / wait_run */
	uint64_t max_wait_ms; /* longest soft wait a call may ask for */
	size_t max_message;   /* longest JSON-RPC line */
	size_t max_pending;   /* bytes of requests held at once: read, parsed, queued (issue 24) */
	/* warm slots (docs/mcp.md "Warm slots"): per allowed language, slots kept ready for a
	 * run_code without its own limits (other than timeout and output-limit), env or stdin */
	int warm_slots;           /* per language; 0: none */
	struct strv preimport[2]; /* modules each slot imports first: [0] Python, [1] Node */
	uint64_t warm_idle_ms;    /* let a language's slots go after this long unused; 0: never */
};

struct mcp_job;
struct mcp_pending;
struct mcp_session;

/* One request being answered (its id, progress token, era). */
struct mcp_req {
	json_t *id;    /* NULL for a notification */
	json_t *token; /* progressToken, or NULL */
	bool modern;   /* 2026-07-28: resultType and serverInfo in every result */
	size_t bytes;  /* the message it came in: what a run it queues holds (max_pending) */
};

struct mcp {
	struct mcp_policy pol;
	/* where replies and notifications go (one JSON object each; the callee dumps it) */
	void (*send)(struct mcp *m, json_t *msg);
	void *send_data;
	bool fuzzing;                /* no runs, no probes: the fuzzer drives the handler alone */
	bool initialized;            /* a legacy initialize was answered */
	char *version;               /* the legacy protocol version negotiated */
	int state_fd;                /* the state directory */
	int runs_fd;                 /* state/runs: the library's runs directory */
	int jobs_fd;                 /* state/jobs: one record per run (its run directory) */
	int ws_fd;                   /* state/workspaces */
	int staging_fd;              /* state/staging */
	struct mcp_job *jobs;        /* queued and running */
	struct mcp_pending *pending; /* requests that wait for a run */
	int n_running, n_queued;
	uint64_t mem_running, tasks_running; /* what the runs going hold (their limits) */
	size_t held_jobs;             /* bytes the queued runs' requests hold (max_pending) */
	json_t *info_cache;           /* sandbox_info, computed once */
	ab_run_handle *info_runs[2];  /* its interpreter probes (python, node) while they run */
	json_t *info_langs;           /* what they answered so far */
	json_t *info_waiting;         /* sandbox_info requests waiting: [{id, modern}] */
	ab_pool *pool;                /* the warm slots, or NULL */
	struct mcp_session *sessions; /* this connection's sessions (sessions.c) */
	json_t *session_tombs;        /* [{id, why}]: how the last sessions gone went */
	bool quit;
};

/* proto.c */
void mcp_init(struct mcp *m);
void mcp_done(struct mcp *m);
/* One line from the client (without its newline). Every reply goes through m->send. */
void mcp_handle_line(struct mcp *m, const char *line, size_t len);
/* The same, parsed already (msg taken over; NULL: jerr says why), from a line of bytes. */
void mcp_handle_json(struct mcp *m, json_t *msg, size_t bytes, const json_error_t *jerr);
/* A line not taken (over --max-message, or over the byte budget with held bytes held):
 * answered at once from its skeleton (src/mcp/input.h; NULL: none), total its size. */
void mcp_refuse(struct mcp *m, const char *skel, size_t len, size_t total, size_t held);
void mcp_reply(struct mcp *m, const struct mcp_req *req, json_t *result);
void mcp_reply_error(struct mcp *m, json_t *id, int code, const char *msg, json_t *data);
void mcp_notify(struct mcp *m, const char *method, json_t *params);
const char *mcp_server_version(void);

/* tools.c: tools/call. Either answers at once through mcp_reply / mcp_reply_error or leaves
 * a pending request (a run) behind. */
json_t *mcp_tools_list(const struct mcp *m);
void mcp_tools_call(struct mcp *m, const struct mcp_req *req, const char *name, json_t *args);
/* The spec run_code builds for a call of lang that gives only code (its class is a warm
 * slot's, docs/mcp.md "Warm slots"). */
json_t *mcp_spec_template(struct mcp *m, const char *lang);
/* A finished run's tool result: from its report (or the error that kept it from running). */
json_t *mcp_result_from_report(struct mcp *m, const char *job_id, json_t *report, int64_t queue_ms);
json_t *mcp_result_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
json_t *mcp_result_running(const char *job_id, const char *state, int64_t elapsed_ms);
/* A tool result from a finished job's record on disk; NULL when there is no such run. */
json_t *mcp_result_from_record(struct mcp *m, const char *job_id);

/* files.c */
bool mcp_id_valid(const char *id);
void mcp_id_new(char id[MCP_ID_LEN + 1]);
/* The kept workspace of a run (fd), or a negative errno: -ENOENT for an unknown run. */
int mcp_run_workspace(struct mcp *m, const char *job_id);
/* Opens a regular file beneath the run's workspace: no link on the way, nothing outside, one
 * link count. Returns an fd (st filled) or a negative errno. */
int mcp_open_beneath(int dirfd, const char *path, struct stat *st);
/* A relative path as a client may give it: no "..", no absolute path, no NUL, not empty. */
bool mcp_path_ok(const char *path);
/* agentbox://runs/{id}/files/{path}: parses (percent-decoding the path) or builds. */
int mcp_uri_parse(const char *uri, char id[MCP_ID_LEN + 1], char **ret_path);
char *mcp_uri_build(const char *job_id, const char *path);
const char *mcp_mime_type(const char *path);
char *mcp_base64(const unsigned char *buf, size_t len);
/* Decodes; NULL on invalid input or when the decoded size would be over cap. */
unsigned char *mcp_unbase64(const char *s, size_t len, size_t cap, size_t *ret_len);
/* Reads up to cap bytes at offset of a file beneath the run; *eof when it ends there. */
json_t *mcp_read_run_file(struct mcp *m, const char *job_id, const char *path, uint64_t offset,
			  uint64_t length, bool as_resource, int *ret_code, char **ret_msg);
bool mcp_utf8_valid(const char *s, size_t len);

/* server.c */
void mcp_policy_defaults(struct mcp_policy *p);
/* Opens (creating) the state directory and its parts. 0 or a negative errno, msg set. */
int mcp_state_open(struct mcp *m, char *msg, size_t msg_size);
/* Queues run job_id for req (spec: the run spec, taken over; staged: state/staging/job_id is
 * to be removed afterwards; workspace: a workspace id to write back to, or NULL). Answers
 * req itself when the queue is full. */
void mcp_submit(struct mcp *m, const struct mcp_req *req, json_t *spec, const char *job_id,
		bool staged, const char *workspace, uint64_t wait_ms);
void mcp_staging_remove(struct mcp *m, const char *job_id);
/* Waits for a run (wait_run). Answers at once when it has finished. */
void mcp_wait_job(struct mcp *m, const struct mcp_req *req, const char *job_id, uint64_t wait_ms);
/* cancel_run; notifications/cancelled (by request id: no reply for it). */
int mcp_cancel_job(struct mcp *m, const char *job_id);
void mcp_cancel_request(struct mcp *m, json_t *req_id);
bool mcp_request_in_flight(const struct mcp *m, json_t *req_id);
/* sandbox_info: answered at once from the cache, else once its probes (runs in the loop) end */
void mcp_sandbox_info(struct mcp *m, const struct mcp_req *req);
/* Workspaces: server-owned directories under state/workspaces. */
int mcp_ws_create(struct mcp *m, json_t *files, uint64_t ttl_ms, char *id_out, char *msg,
		  size_t msg_size);
int mcp_ws_delete(struct mcp *m, const char *id);
/* The top-level entries of a workspace's files as spec inputs (paths); -ENOENT if none. */
int mcp_ws_inputs(struct mcp *m, const char *id, json_t *inputs);
/* Writes decoded files (array of {path, content|base64}) beneath dirfd. */
int mcp_write_files(struct mcp *m, int dirfd, json_t *files, char *msg, size_t msg_size);
int mcp_main(int argc, char **argv);
/* The library context every run and session of this server uses. */
ab_context *mcp_context(void);
/* Admission of a session: does what it holds (memory and pids limits) fit beside the runs
 * and sessions going? */
bool mcp_budget_fits(const struct mcp *m, uint64_t mem, uint64_t tasks);

/* sessions.c */
/* create_session: spec (a session spec, taken over; staging: a staging id holding its files
 * or NULL) is started; req is answered once the session is ready, or with why not. */
void mcp_session_create(struct mcp *m, const struct mcp_req *req, json_t *spec,
			const char *staging);
/* run_code with session_id: code (a JSON string) runs as a cell; answered when it ends.
 * lang: the call's language, or NULL; it must be the session's. */
void mcp_session_cell(struct mcp *m, const struct mcp_req *req, const char *sid, const char *lang,
		      json_t *code, int64_t timeout_ms, bool restart);
void mcp_session_close(struct mcp *m, const struct mcp_req *req, const char *sid);
/* notifications/cancelled: interrupts the cell (or drops the starting session) the request
 * waits for; false when it is no session's. */
bool mcp_session_cancel_request(struct mcp *m, json_t *req_id);
bool mcp_session_request_in_flight(const struct mcp *m, json_t *req_id);
bool mcp_session_uses_staging(const struct mcp *m, const char *staging);
size_t mcp_sessions_count(const struct mcp *m);
/* The loop: each session's fd into pfd (returns how many; pfd NULL: only counts), then a step of
 * every session, and when it must wake at the latest (progress, reaping) */
size_t mcp_sessions_pollset(const struct mcp *m, struct pollfd *pfd);
void mcp_sessions_step(struct mcp *m);
int64_t mcp_sessions_timers(struct mcp *m, int64_t now);
/* Closes every session (the client left, or the server stops). */
void mcp_sessions_close_all(struct mcp *m, const char *why);
/* sandbox_info's "sessions" */
json_t *mcp_sessions_info(const struct mcp *m);
/* tools.c: a cell's result (its JSON from the library) as a tool result */
json_t *mcp_result_from_cell(struct mcp *m, const char *cell_json);

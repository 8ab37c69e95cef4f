/* api-private.h: what the agentbox command line and the rest of libagentbox (pool.c) use of
 * api.c beyond the public API. */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include <sys/types.h>

#include "../util/err.h"
#include "agentbox/agentbox.h"

/* What the library exports (libagentbox.map: ab_* alone). */
#define AB_EXPORT __attribute__((visibility("default")))

/* One supervisor started by the library: a run, a command, or a warm slot (pool.c). */
struct ab_run_handle {
	pid_t pid;       /* the intermediate process (see intermediate()); 0 for a run whose
			  * supervisor ran in this process ("supervisor_inline") */
	int pidfd;       /* its pidfd: readable once it, and so the supervisor, has ended
			  * (-1 after an inline run, which has ended before the handle exists) */
	int sup_pidfd;   /* the supervisor's, for signals (-1 once it is gone) */
	int response_fd; /* memfd the supervisor writes its response into */
	int watch_w;     /* our end of the watch pipe: closing it tells the supervisor */
	int inline_exit; /* an inline run's supervisor_main status (ran_inline) */
	bool ran_inline; /* "supervisor_inline": the run is over, its response written */
	bool waited;
};

/* The command line's context: its runs' reports name its flags (--memory), not the spec's
 * keys (limits.memory); words.h. */
/* Sends sig to the run's supervisor (which stops the run and reports the signal). */
/* Sets *err (when err is not NULL) and returns code (negative). */
int api_fail(ab_error **err, int code, int exit, const char *fix, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
int api_fail_ab(ab_error **err, const struct ab_err *e);

/* The spec's JSON object (borrowed). */
const json_t *api_spec_json(const ab_spec *s);

/* Starts `agentbox-supervisor mode` with the request {"config", body_key: body} (and
 * extra_key: extra when extra_key is not NULL); ctl_fd >= 0 becomes its fd 6 (a slot's
 * control socket; the caller keeps its own copy), in_fd >= 0 its fd 0 (a run's stdin_fd;
 * else /dev/null). */
ab_run_handle *api_start(ab_context *ctx, const char *mode, const char *body_key,
			 const json_t *body, const char *extra_key, const json_t *extra,
			 const ab_io *io, int ctl_fd, int in_fd, ab_error **err);
/* The context's: its runs' reports name the command line's flags (words.h). */
bool api_context_flag_words(const ab_context *ctx);
/* Sets key to v (stolen) in the report r holds, its text too. */
void api_result_annotate(ab_result *r, const char *key, json_t *v);

/* Waits for the supervisor to end (blocking), without reading its response. */
int api_finish_quietly(ab_run_handle *r);
/* Closes the handle's fds and frees it (a supervisor still running sees its watch pipe end,
 * stops, and is reaped by its intermediate). */
void api_run_free(ab_run_handle *r);

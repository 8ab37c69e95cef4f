/* requirements.h: packages on request (docs/requirements.md). */
#pragma once

#include "../spec/options.h"
#include "../spec/record.h"
#include "../util/err.h"

/* The run's requirements (o->requirements), under the operator's policy (cfg): the cached
 * environment they key, built first by prepare's install sandbox when it is not there; then
 * o->env_dir names it and res->pre_run says how it was found (cached or installed, the
 * time, the resolved versions). *ret_lock_fd: the environment's marker, flock()ed shared for
 * as long as the run holds it (the cache's eviction passes it by). Nothing to do without
 * requirements. Returns 0, or a usage error (a rule of the operator's, a bad combination),
 * or -errno with err (the install failed: its last lines in the message). */
int requirements_resolve(struct ab_run_opts *o, struct ab_record *res, int *ret_lock_fd,
			 struct ab_err *err);

/* run.h: `agentbox run`, start to finish: check inputs, probe, plan, prepare the run
 * directory and the private mount namespace, start the sandbox, interpret what happened,
 * collect, clean up. */
#pragma once

#include <sys/types.h>

#include "../spec/options.h"
#include "../spec/record.h"
#include "../util/err.h"
#include "../util/strv.h"

/* agentbox-supervisor's slot mode (warm.h; docs/design.md "Warm slots"): run_main builds the
 * sandbox for the template spec it was given, waits as a slot, and runs the spec of the claim
 * that takes it. */
struct ab_slot_opts {
	int ctl_fd;               /* the library's control socket */
	struct strv preimport;    /* modules the interpreter's hook imports before it is ready */
	char *class_key;          /* warm_class_key() of the template: a claim must match it */
	int64_t ready_timeout_ms; /* a slot not ready by then has failed */
	/* results */
	struct ab_run_opts *claimed; /* the run's spec, once a claim was taken (owned) */
	int state;                   /* enum ab_warm_state (supervise.h) at the end */
	char failure[400];           /* why the slot failed, for the library */
};

/* Returns 0 when the sandbox ran (res says how it ended), or -errno with err set when
 * agentbox failed or refused before or around the run (res->status = setup_error). */
int run_main(struct ab_run_opts *o, struct ab_record *res, struct ab_err *err);

/* The unprivileged user a root caller's sandboxes run as: spec (NAME or UID[:GID]), else
 * the user `agentbox` if it exists, else 64000:64000. Never 0. Returns 0 or -errno. */
int run_sandbox_user(const char *spec, uid_t *ret_uid, gid_t *ret_gid, struct ab_err *err);

/* The exit status agentbox leaves with, from a finished result. */
int run_exit_code(const struct ab_record *res);

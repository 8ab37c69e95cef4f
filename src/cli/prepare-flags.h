/* prepare-flags.h: the command line of `agentbox prepare`. */
#pragma once

#include <jansson.h>

#include "../util/err.h"

/* The CLI's `agentbox prepare ARGS` as a request (see ab_prepare in agentbox.h); *ret_report
 * is --report FILE or NULL. Returns 0, 1 for --help (prepare_usage()), or a usage error. */
int prepare_request_from_args(int argc, char **argv, json_t **ret, const char **ret_report,
			      struct ab_err *err);
const char *prepare_usage(void);

/* api-private.h: what the agentbox command line uses of libagentbox beyond the public API. */
#pragma once

#include "agentbox/agentbox.h"

/* Sends sig to the run's supervisor (which stops the run and reports the signal). */
int api_run_signal(ab_run_handle *r, int sig);

/* words.h: a message in the words of the interface that asked (issue 25). agentbox writes its
 * messages and fixes with the command line's flags ("raise --timeout", "add --input FILE");
 * a caller that described the run as a JSON spec (the library, the client packages, the MCP
 * server) reads the same text with the spec's keys ("raise limits.timeout", "add FILE to
 * inputs"). Pure. */
#pragma once

#include "../util/err.h"

/* A malloc'd copy of text with every `agentbox run` flag in it (a word --NAME, not one of
 * `agentbox prepare`'s own) replaced by its spec key: --memory by limits.memory, --input by
 * inputs, --without seccomp by "without": ["seccomp"], --rm by "rm": true... Text without
 * flags comes back unchanged; NULL stays NULL. */
char *words_for_spec(const char *text);

/* The same for an error's message and fix, in place. */
void words_err_for_spec(struct ab_err *err);

/* interp.h: which language a script is, and which interpreter runs it. */
#pragma once

#include "../spec/options.h"
#include "../util/err.h"
#include "plan.h"

/* Language from --lang, else the extension (.py; .js .mjs .cjs), else the shebang line read
 * from the open script fd (pread, first 256 bytes), else, for code given as text (--code, SCRIPT
 * '-', a spec's "code": script_name ""), Python, as `python3 -c` would. Returns 0 or a usage
 * error. */
int interp_detect_lang(const char *script_name, int script_fd, enum ab_lang forced,
		       enum ab_lang *ret, struct ab_err *err);

/* Resolves the interpreter once to an absolute, symlink-free path: --python / --node if
 * given, else /usr/bin/python3 for Python and `node` on the caller's PATH for Node; the
 * virtualenv or node_modules the plan was given (plan_environment) is checked and bound.
 * When it lives outside /usr, adds a read-only bind of its installation prefix to the plan
 * (the directory above its bin/) and records it. Returns 0, or -errno with err set
 * (err->exit = 127 when not found, 126 when not executable). */
int interp_resolve(const struct ab_run_opts *o, enum ab_lang lang, struct ab_plan *plan,
		   struct ab_err *err);

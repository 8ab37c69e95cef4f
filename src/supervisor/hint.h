/* hint.h: a hint for the common mistakes (issue 25): a script that fails because a file or a
 * module it names lies next to it on the host, where the sandbox does not see it (only the
 * script is copied in). The report's `hint` then names the way to bring it in: --input or
 * --workspace for a file or a module of the script's own, --node-modules for a node_modules
 * tree, --venv for a virtualenv. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "../spec/options.h"

enum ab_hint_kind {
	AB_HINT_NONE,
	AB_HINT_FILE,       /* a file the script opened: FileNotFoundError, ENOENT */
	AB_HINT_PY_MODULE,  /* ModuleNotFoundError: No module named 'NAME' */
	AB_HINT_JS_MODULE,  /* Cannot find module / package 'NAME' (bare: node_modules) */
	AB_HINT_JS_RELATIVE /* Cannot find module './NAME' */
};

/* The last "not found" the script's stderr (text, len) reports, by its interpreter's own words,
 * and the name it names (at most size - 1 bytes, NUL-terminated): relative to the workspace
 * (a leading "/work/" or "./" taken off), never absolute, never with a ".." component, only
 * printable ASCII. Pure. */
enum ab_hint_kind hint_parse(const char *text, size_t len, char *name, size_t size);

/* The hint for a run that failed (exit_code != 0) with that stderr: what it named exists next
 * to the script on the host (looked at beneath the script's directory, no symlink followed);
 * or it tried to install a package, or missed a module, which requirements would give it
 * (issue 28). malloc'd, or NULL. In the words of the interface that asked (o->flag_words). */
char *hint_for_run(const struct ab_run_opts *o, const char *stderr_text, size_t len);

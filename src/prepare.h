/* prepare.h: `agentbox prepare`, the install phase. Builds a dependency environment (a
 * Python virtualenv from requirements.txt, or node_modules from package.json and its lock)
 * inside a sandbox that keeps the network but writes only into the environment being built,
 * in a cache directory keyed by the sha256 of the requirements/lock content and the
 * interpreter. `agentbox run --env-dir` then mounts it read-only and runs offline. */
#pragma once

#include <stdbool.h>

#include "plan.h"
#include "util/err.h"

#define AB_ENV_MARKER "agentbox-env.json"

int cmd_prepare(int argc, char **argv);

/* For `run --env-dir X`: X is a prepared environment directory, or the requirements.txt /
 * package.json / package-lock.json it was prepared from (looked up in the cache). Sets
 * *ret_venv (Python) or *ret_node_modules (Node), malloc'd. Returns 0 or -errno with err. */
int prepare_lookup(const char *spec, const char *cache_dir, char **ret_venv,
		   char **ret_node_modules, struct ab_err *err);

/* The default cache directory for environments (malloc'd): $AGENTBOX_CACHE_DIR, else
 * <runs root>/envs. */
char *prepare_default_cache(void);

/* prepare.h: `agentbox prepare`, the install phase. Builds a dependency environment (a
 * Python virtualenv from requirements.txt, or node_modules from package.json and its lock)
 * inside a sandbox that keeps the network but writes only into the environment being built,
 * in a cache directory keyed by the sha256 of the requirements/lock content and the
 * interpreter. `agentbox run --env-dir` then mounts it read-only and runs offline. */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include "../util/err.h"
#include "plan.h"

#define AB_ENV_MARKER "agentbox-env.json"

/* Builds (or finds) the environment a request describes; in the supervisor. *ret:
 * {"env_dir", "cache_hit", "report"}; on a failed install also set (env_dir null) next to
 * the error, so the report is not lost. Returns 0 or -errno with err. */
int prepare_do(const json_t *req, json_t **ret, struct ab_err *err);

/* For `run --env-dir X`: X is a prepared environment directory, or the requirements.txt /
 * package.json / package-lock.json it was prepared from, looked up in the cache for the run's
 * interpreter (python / node: the run's --python / --node, NULL for the default, as prepare
 * keys it). Two Python variants prepared from the file (isolated and --system-site-packages)
 * are a usage error listing both. Sets *ret_venv (Python) or *ret_node_modules (Node),
 * malloc'd. Returns 0 or -errno with err. */
int prepare_lookup(const char *spec, const char *cache_dir, const char *python, const char *node,
		   char **ret_venv, char **ret_node_modules, struct ab_err *err);

/* The default cache directory for environments (malloc'd): $AGENTBOX_CACHE_DIR, else
 * <runs root>/envs. */
char *prepare_default_cache(void);

/* The cache's bound: removes the least recently used environments (the mtime of their
 * marker, which each run that uses one touches) until the cache holds at most cap bytes,
 * never keep (a name, or NULL), one a run holds (its marker flock()ed shared) or one an
 * install of its key holds. *ret: {"cache_dir", "entries", "bytes", "cap_bytes",
 * "evicted": [{"env", "bytes"}]}. cache_dir NULL: the default. Returns 0 or -errno. */
int prepare_evict(const char *cache_dir, uint64_t cap, const char *keep, json_t **ret,
		  struct ab_err *err);

/* For agentbox gc (evict: down to the cap) and doctor (measure only): the default cache's
 * entries and bytes, as prepare_evict says them; *ret NULL when there is no cache. */
int prepare_cache_bound(bool evict, json_t **ret);

/* The cache's default bound (AGENTBOX_CACHE_MAX unset): 4 GiB. */
#define AB_CACHE_MAX_DEFAULT (4ULL << 30)

#include "cfg.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "../util/fdutil.h"
#include "../util/macro.h"
#include "../util/xalloc.h"

#define CFG_STR(key, env, field)                         \
	{                                                \
		key, env, offsetof(struct ab_cfg, field) \
	}
static const struct {
	const char *key, *env;
	size_t off;
} strs[] = {
	CFG_STR("runs_dir", "AGENTBOX_RUNS_DIR", runs_dir),
	CFG_STR("cache_dir", "AGENTBOX_CACHE_DIR", cache_dir),
	CFG_STR("bwrap", "AGENTBOX_BWRAP", bwrap),
	CFG_STR("init", "AGENTBOX_INIT", init),
	CFG_STR("netproxy", "AGENTBOX_NETPROXY", netproxy),
	CFG_STR("supervisor", "AGENTBOX_SUPERVISOR", supervisor),
	CFG_STR("cgroup", "AGENTBOX_CGROUP", cgroup),
	CFG_STR("keep_runs", "AGENTBOX_KEEP_RUNS", keep_runs),
	CFG_STR("keep_age", "AGENTBOX_KEEP_AGE", keep_age),
	CFG_STR("home", "HOME", home),
	CFG_STR("path", "PATH", path),
	CFG_STR("xdg_runtime_dir", "XDG_RUNTIME_DIR", xdg_runtime_dir),
	CFG_STR("dbus_address", "DBUS_SESSION_BUS_ADDRESS", dbus_address),
	CFG_STR("requirements", "AGENTBOX_REQUIREMENTS", requirements),
	CFG_STR("allow_packages", "AGENTBOX_ALLOW_PACKAGES", allow_packages),
	CFG_STR("max_requirements", "AGENTBOX_MAX_REQUIREMENTS", max_requirements),
	CFG_STR("install_timeout", "AGENTBOX_INSTALL_TIMEOUT", install_timeout),
	CFG_STR("index_url", "AGENTBOX_INDEX_URL", index_url),
	CFG_STR("find_links", "AGENTBOX_FIND_LINKS", find_links),
	CFG_STR("cache_max", "AGENTBOX_CACHE_MAX", cache_max),
};
#define CFG_BOOL(key, env, field)                        \
	{                                                \
		key, env, offsetof(struct ab_cfg, field) \
	}
static const struct {
	const char *key, *env;
	size_t off;
} bools[] = {
	CFG_BOOL("timing", "AGENTBOX_TIMING", timing),
	CFG_BOOL("no_systemd_scope", "AGENTBOX_NO_SYSTEMD_SCOPE", no_systemd_scope),
};

#define STR_AT(c, i)  ((char **) ((char *) (c) + strs[i].off))
#define BOOL_AT(c, i) ((bool *) ((char *) (c) + bools[i].off))

static struct ab_cfg current;
static bool current_set;

const struct ab_cfg *
cfg(void)
{
	if (!current_set) {
		cfg_from_env(&current);
		current_set = true;
		timing_enable(current.timing);
	}
	return &current;
}

void
cfg_set(const struct ab_cfg *c)
{
	struct ab_cfg copy;

	cfg_copy(&copy, c);
	if (current_set)
		cfg_done(&current);
	current = copy;
	current_set = true;
	timing_enable(current.timing);
}

void
cfg_from_env(struct ab_cfg *c)
{
	memset(c, 0, sizeof(*c));
	for (size_t i = 0; i < ARRAY_SIZE(strs); i++) {
		const char *v = secure_getenv(strs[i].env);

		/* AGENTBOX_* paths given relative mean nothing to a supervisor elsewhere */
		*STR_AT(c, i) = v && *v ? xstrdup(v) : NULL;
	}
	for (size_t i = 0; i < ARRAY_SIZE(bools); i++) {
		const char *v = secure_getenv(bools[i].env);

		*BOOL_AT(c, i) = v && *v && strcmp(v, "0") != 0;
	}
}

int
cfg_from_json(const json_t *j, struct ab_cfg *c)
{
	memset(c, 0, sizeof(*c));
	if (!json_is_object(j))
		return -EINVAL;
	for (size_t i = 0; i < ARRAY_SIZE(strs); i++) {
		const json_t *v = json_object_get(j, strs[i].key);

		if (json_is_string(v))
			*STR_AT(c, i) = xstrdup(json_string_value(v));
	}
	for (size_t i = 0; i < ARRAY_SIZE(bools); i++)
		*BOOL_AT(c, i) = json_is_true(json_object_get(j, bools[i].key));
	return 0;
}

json_t *
cfg_to_json(const struct ab_cfg *c)
{
	json_t *j = json_object();

	for (size_t i = 0; i < ARRAY_SIZE(strs); i++)
		if (*STR_AT(c, i))
			json_object_set_new(j, strs[i].key, json_string(*STR_AT(c, i)));
	for (size_t i = 0; i < ARRAY_SIZE(bools); i++)
		if (*BOOL_AT(c, i))
			json_object_set_new(j, bools[i].key, json_true());
	return j;
}

void
cfg_copy(struct ab_cfg *dst, const struct ab_cfg *src)
{
	*dst = *src;
	for (size_t i = 0; i < ARRAY_SIZE(strs); i++)
		if (*STR_AT(src, i))
			*STR_AT(dst, i) = xstrdup(*STR_AT(src, i));
	dst->proc_root = src->proc_root ? xstrdup(src->proc_root) : NULL;
}

void
cfg_done(struct ab_cfg *c)
{
	for (size_t i = 0; i < ARRAY_SIZE(strs); i++)
		free(*STR_AT(c, i));
	free(c->proc_root);
	memset(c, 0, sizeof(*c));
}

const char *
cfg_proc_root(void)
{
	return cfg()->proc_root ? cfg()->proc_root : "/proc";
}

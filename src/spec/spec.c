#include "spec.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/macro.h"
#include "../util/xalloc.h"
#include "units.h"
#include "words.h"

/* ---- reading ---------------------------------------------------------------------------- */

static int
want_string(const char *key, const json_t *v, const char **ret, struct ab_err *err)
{
	if (!json_is_string(v))
		return ab_err_usage(err, "spec: \"%s\" must be a string", key);
	if (strlen(json_string_value(v)) != json_string_length(v))
		return ab_err_usage(err, "spec: \"%s\" must not contain NUL characters", key);
	*ret = json_string_value(v);
	return 0;
}

static int
want_bool(const char *key, const json_t *v, bool *ret, struct ab_err *err)
{
	if (!json_is_boolean(v))
		return ab_err_usage(err, "spec: \"%s\" must be true or false", key);
	*ret = json_is_true(v);
	return 0;
}

/* An array of strings, each pushed into sv (after check, when not NULL). */
static int
want_strings(const char *key, const json_t *v, struct ab_run_opts *o, struct strv *sv,
	     int (*check)(struct ab_run_opts *, const char *, struct ab_err *), struct ab_err *err)
{
	size_t i;
	json_t *e;

	if (!json_is_array(v))
		return ab_err_usage(err, "spec: \"%s\" must be an array of strings", key);
	json_array_foreach(v, i, e)
	{
		const char *s;
		int r = want_string(key, e, &s, err);

		if (r < 0)
			return r;
		if (check) {
			r = check(o, s, err);
			if (r < 0)
				return r;
		} else {
			strv_push(sv, s);
		}
	}
	return 0;
}

/* A limit's value as the CLI writes it: a string is taken as it is; a number is in the
 * limit's base unit (seconds, bytes, cores, a count), written out in units the CLI parser
 * reads exactly. */
static int
limit_text(const char *name, int id, const json_t *v, char *buf, size_t size, struct ab_err *err)
{
	double d;

	if (json_is_string(v)) {
		snprintf(buf, size, "%s", json_string_value(v));
		return 0;
	}
	if (!json_is_number(v))
		return ab_err_usage(err, "spec: limits.%s must be a string (\"512M\") or a number",
				    name);
	d = json_number_value(v);
	if (!isfinite(d) || d < 0)
		return ab_err_usage(err, "spec: limits.%s is out of range", name);
	switch (id) {
	case AB_LIM_TIMEOUT_MS:
	case AB_LIM_CPU_TIME_MS:
	case AB_LIM_CPUS_MILLI:
		/* fractional, converted through a double: keep it exact */
		if (d > 1e15)
			return ab_err_usage(err, "spec: limits.%s is out of range", name);
		snprintf(buf, size, id == AB_LIM_CPUS_MILLI ? "%.3f" : "%.0fms",
			 id == AB_LIM_CPUS_MILLI ? d : d * 1000.0);
		break;
	default:
		/* a whole number in the base unit, as spec_build writes any value the CLI took
		 * (a "87092800645.6M" memory is 91323420529806880 bytes) */
		if (!json_is_integer(v))
			return ab_err_usage(err, "spec: limits.%s must be a whole number", name);
		snprintf(buf, size, "%" PRIu64, (uint64_t) json_integer_value(v));
		break;
	}
	return 0;
}

static int
parse_limits(const json_t *v, struct ab_run_opts *o, struct ab_err *err)
{
	const char *name;
	json_t *val;

	if (!json_is_object(v))
		return ab_err_usage(err, "spec: \"limits\" must be an object");
	json_object_foreach((json_t *) v, name, val)
	{
		int id = cli_limit_id(name);
		char text[64];
		int r;

		if (id < 0)
			return ab_err_usage(err, "spec: unknown limit \"%s\"", name),
			       ab_err_fix(err, "use timeout, memory, pids, cpus, cpu-time, disk, "
					       "inodes, tmp-size, file-size, nofile or "
					       "output-limit");
		r = limit_text(name, id, val, text, sizeof(text), err);
		if (r == 0)
			r = cli_set_limit(o, (enum ab_limit_id) id, text, err);
		if (r < 0)
			return r;
	}
	return 0;
}

static int
parse_env_object(const json_t *v, struct ab_run_opts *o, struct ab_err *err)
{
	const char *name;
	json_t *val;

	if (!json_is_object(v))
		return ab_err_usage(err, "spec: \"env\" must be an object of strings");
	json_object_foreach((json_t *) v, name, val)
	{
		cleanup_free char *kv = NULL;
		const char *s;
		int r = want_string("env", val, &s, err);

		if (r < 0)
			return r;
		if (strchr(name, '='))
			return ab_err_usage(err, "spec: env name \"%s\" contains '='", name);
		kv = xasprintf("%s=%s", name, s);
		r = cli_set_env(o, kv, err);
		if (r < 0)
			return r;
	}
	return 0;
}

static int
set_without(struct ab_run_opts *o, const char *s, struct ab_err *err)
{
	return cli_set_without(o, s, err);
}

/* "session": true, or {"idle_timeout": "10m", "max_lifetime": "1h"} (docs/sessions.md). */
static int
parse_session(const json_t *v, struct ab_run_opts *o, struct ab_err *err)
{
	const char *key;
	json_t *e;

	if (json_is_boolean(v)) {
		o->session = json_is_true(v);
		return 0;
	}
	if (!json_is_object(v))
		return ab_err_usage(err, "spec: \"session\" must be true or an object "
					 "({\"idle_timeout\": \"10m\", \"max_lifetime\": \"1h\"})");
	o->session = true;
	json_object_foreach((json_t *) v, key, e)
	{
		bool idle = strcmp(key, "idle_timeout") == 0;
		uint64_t *dst = idle ? &o->session_idle_ms : &o->session_lifetime_ms;
		char text[64];

		if (!idle && strcmp(key, "max_lifetime") != 0)
			return ab_err_usage(err, "spec: unknown key \"session.%s\"", key),
			       ab_err_fix(err, "a session takes idle_timeout and max_lifetime");
		if (json_is_integer(e) && json_integer_value(e) >= 0)
			snprintf(text, sizeof(text), "%" PRIu64 "ms",
				 (uint64_t) json_integer_value(e));
		else if (json_is_string(e))
			snprintf(text, sizeof(text), "%s", json_string_value(e));
		else
			text[0] = '\0';
		if (!text[0] || units_parse_duration_ms(text, dst) < 0 || *dst == 0 ||
		    *dst > 7 * 24 * 3600 * 1000ULL)
			return ab_err_usage(
				err,
				"spec: \"session.%s\" must be a duration from 1ms to 7d "
				"(\"90s\", \"10m\", \"1h\")",
				key);
	}
	return 0;
}

/* String-valued keys that map straight onto an ab_run_opts field. */
#define STR_FIELD(name, field)                            \
	{                                                 \
		name, offsetof(struct ab_run_opts, field) \
	}
static const struct {
	const char *key;
	size_t off;
} str_fields[] = {
	STR_FIELD("script", script),
	STR_FIELD("stdin", stdin_path),
	STR_FIELD("workspace", workspace),
	STR_FIELD("collect", collect_dir),
	STR_FIELD("runs_dir", runs_dir),
	STR_FIELD("python", python_path),
	STR_FIELD("node", node_path),
	STR_FIELD("venv", venv),
	STR_FIELD("node_modules", node_modules),
	STR_FIELD("env_dir", env_dir),
	STR_FIELD("sandbox_user", sandbox_user),
};

static int
parse_key(const char *key, const json_t *v, struct ab_run_opts *o, struct ab_err *err)
{
	const char *s;
	int r;

	for (size_t i = 0; i < ARRAY_SIZE(str_fields); i++) {
		if (strcmp(key, str_fields[i].key) != 0)
			continue;
		r = want_string(key, v, &s, err);
		if (r < 0)
			return r;
		if (!s[0])
			return ab_err_usage(err, "spec: \"%s\" is an empty string", key);
		*(const char **) ((char *) o + str_fields[i].off) = cli_own(o, s);
		return 0;
	}
	if (strcmp(key, "spec_version") == 0) {
		if (!json_is_integer(v) || json_integer_value(v) != AB_SPEC_VERSION)
			return ab_err_usage(err,
					    "spec: spec_version %s is not supported (this "
					    "agentbox reads 1)",
					    json_is_integer(v) ? "other than 1" : "of this type");
		return 0;
	}
	if (strcmp(key, "code") == 0 || strcmp(key, "stdin_data") == 0) {
		bool code = key[0] == 'c';
		char *copy;

		if (!json_is_string(v))
			return ab_err_usage(err, "spec: \"%s\" must be a string", key);
		copy = xmalloc(json_string_length(v) + 1);
		memcpy(copy, json_string_value(v), json_string_length(v) + 1);
		if (code) {
			free(o->code_owned);
			o->code = o->code_owned = copy;
			o->code_len = json_string_length(v);
		} else {
			free(o->stdin_data_owned);
			o->stdin_data = o->stdin_data_owned = copy;
			o->stdin_data_len = json_string_length(v);
		}
		return 0;
	}
	if (strcmp(key, "language") == 0) {
		r = want_string(key, v, &s, err);
		return r < 0 ? r : cli_set_lang(o, s, err);
	}
	if (strcmp(key, "seccomp_policy") == 0) {
		r = want_string(key, v, &s, err);
		if (r == 0 && filter_policy_parse(s, &o->seccomp_policy) < 0)
			r = ab_err_usage(
				err, "spec: \"seccomp_policy\" must be \"default\" or \"strict\"");
		return r;
	}
	if (strcmp(key, "args") == 0)
		return want_strings(key, v, o, &o->script_args, NULL, err);
	if (strcmp(key, "inputs") == 0)
		return want_strings(key, v, o, &o->inputs, NULL, err);
	if (strcmp(key, "ro_binds") == 0)
		return want_strings(key, v, o, &o->ro_binds, NULL, err);
	if (strcmp(key, "allow_binds") == 0)
		return want_strings(key, v, o, &o->allow_binds, NULL, err);
	if (strcmp(key, "without") == 0)
		return want_strings(key, v, o, NULL, set_without, err);
	if (strcmp(key, "env") == 0)
		return parse_env_object(v, o, err);
	if (strcmp(key, "limits") == 0)
		return parse_limits(v, o, err);
	if (strcmp(key, "inline_output") == 0) {
		char text[64];

		if (json_is_integer(v) && json_integer_value(v) >= 0)
			snprintf(text, sizeof(text), "%" PRIu64, (uint64_t) json_integer_value(v));
		else if (json_is_string(v))
			snprintf(text, sizeof(text), "%s", json_string_value(v));
		else
			return ab_err_usage(err, "spec: \"inline_output\" must be a size (\"64K\") "
						 "or a whole number of bytes");
		return cli_set_inline_output(o, text, err);
	}
	if (strcmp(key, "on_output_limit") == 0) {
		r = want_string(key, v, &s, err);
		return r < 0 ? r : cli_set_on_output_limit(o, s, err);
	}
	if (strcmp(key, "stdin_fd") == 0) {
		if (!json_is_integer(v) || json_integer_value(v) < 0 ||
		    json_integer_value(v) > 1000000)
			return ab_err_usage(err, "spec: \"stdin_fd\" must be an open fd number, 0 "
						 "or more"),
			       ab_err_fix(err, "give the number of an fd of the process that "
					       "starts the run, e.g. 0 for its stdin");
		o->stdin_fd = (int) json_integer_value(v);
		return 0;
	}
	if (strcmp(key, "session") == 0)
		return parse_session(v, o, err);
	if (strcmp(key, "requirements") == 0) {
		size_t i;
		json_t *e;

		if (!json_is_array(v))
			return ab_err_usage(err,
					    "spec: \"requirements\" must be a list of strings");
		json_array_foreach(v, i, e)
		{
			if (!json_is_string(e))
				return ab_err_usage(err, "spec: \"requirements\" must be a list of "
							 "strings");
			r = cli_add_requirement(o, json_string_value(e), err);
			if (r < 0)
				return r;
		}
		return 0;
	}
	if (strcmp(key, "index") == 0) {
		const char *k;
		json_t *e;

		if (!json_is_object(v))
			return ab_err_usage(err, "spec: \"index\" must be an object "
						 "({\"url\": ..., \"find_links\": ...})");
		json_object_foreach((json_t *) v, k, e)
		{
			bool url = strcmp(k, "url") == 0;

			if (!url && strcmp(k, "find_links") != 0)
				return ab_err_usage(err, "spec: unknown key \"index.%s\"", k),
				       ab_err_fix(err, "an index takes url and find_links");
			r = want_string(k, e, &s, err);
			if (r < 0)
				return r;
			if (url)
				o->req_index_url = cli_own(o, s);
			else
				o->req_find_links = cli_own(o, s);
		}
		return 0;
	}
	if (strcmp(key, "rm") == 0)
		return want_bool(key, v, &o->rm, err);
	if (strcmp(key, "quiet") == 0)
		return want_bool(key, v, &o->quiet, err);
	if (strcmp(key, "progress") == 0)
		return want_bool(key, v, &o->progress, err);
	if (strcmp(key, "net_strict") == 0)
		return want_bool(key, v, &o->net_strict, err);
	if (strcmp(key, "dry_run") == 0)
		return want_bool(key, v, &o->dry_run, err);
	return ab_err_usage(err, "spec: unknown key \"%s\"", key),
	       ab_err_fix(err, "check its spelling: docs/spec.md lists every key (script, code, "
			       "language, args, stdin, stdin_data, stdin_fd, env, inputs, "
			       "workspace, collect, rm, limits...)");
}

static int
parse_all(const json_t *spec, struct ab_run_opts *o, struct ab_err *err)
{
	const char *key;
	json_t *v;
	int r;

	if (!json_is_object(spec))
		return ab_err_usage(err, "spec: a run spec is a JSON object");
	json_object_foreach((json_t *) spec, key, v)
	{
		r = parse_key(key, v, o, err);
		if (r < 0)
			return r;
	}
	if (o->session) {
		if (o->script || o->code || o->script_args.n)
			return ab_err_usage(err, "spec: a session takes no \"script\", \"code\" "
						 "or \"args\""),
			       ab_err_fix(err,
					  "send the code cell by cell once the session started");
		if (o->stdin_path || o->stdin_data || o->stdin_fd >= 0)
			return ab_err_usage(err, "spec: a session has no stdin"),
			       ab_err_fix(err, "give the data as an input file instead");
		if (o->limits[AB_LIM_NOFILE].value <= 1000)
			return ab_err_usage(err, "spec: a session needs limits.nofile above 1000"),
			       ab_err_fix(err, "raise limits.nofile (the default is 1024)");
		o->script = "--session";
		return cli_check(o, err);
	}
	if (!o->script == !o->code || (o->code && o->script && strcmp(o->script, "--code") != 0))
		return ab_err_usage(err, "spec: give exactly one of \"script\" and \"code\""),
		       ab_err_fix(err, "give \"code\" (the script's text) or \"script\" (its "
				       "path), not both");
	if (o->code)
		o->script = "--code";
	return cli_check(o, err);
}

int
spec_parse(const json_t *spec, struct ab_run_opts *o, struct ab_err *err)
{
	int r = parse_all(spec, o, err);

	/* the checks are the flags' (cli.c); the caller wrote a spec */
	if (r < 0) {
		ab_err_fix(err, "docs/spec.md says what each key takes");
		words_err_for_spec(err);
	}
	return r;
}

int
spec_parse_text(const char *text, size_t len, struct ab_run_opts *o, struct ab_err *err)
{
	json_error_t je;
	json_t *j;
	int r;

	if (len == (size_t) -1)
		len = strlen(text);
	j = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
	if (!j)
		return ab_err_usage(err, "spec: not valid JSON (line %d, column %d): %s", je.line,
				    je.column, je.text),
		       ab_err_fix(err, "send one JSON object (docs/spec.md)");
	r = spec_parse(j, o, err);
	json_decref(j);
	return r;
}

/* ---- writing ---------------------------------------------------------------------------- */

static void
put_str(json_t *o, const char *key, const char *v)
{
	if (v)
		json_object_set_new(o, key, json_string(v));
}

static void
put_strv(json_t *o, const char *key, const struct strv *sv)
{
	json_t *a;

	if (sv->n == 0)
		return;
	a = json_array();
	STRV_FOREACH (s, sv)
		json_array_append_new(a, json_string(*s));
	json_object_set_new(o, key, a);
}

json_t *
spec_limit_value(enum ab_limit_id id, uint64_t v)
{
	char buf[48];

	switch (id) {
	case AB_LIM_TIMEOUT_MS:
	case AB_LIM_CPU_TIME_MS:
		snprintf(buf, sizeof(buf), "%" PRIu64 "ms", v);
		return json_string(buf);
	case AB_LIM_CPUS_MILLI:
		snprintf(buf, sizeof(buf), "%" PRIu64 ".%03" PRIu64, v / 1000, v % 1000);
		return json_string(buf);
	case AB_LIM_MEMORY:
	case AB_LIM_PIDS:
	case AB_LIM_DISK:
	case AB_LIM_INODES:
	case AB_LIM_TMP_SIZE:
	case AB_LIM_FILE_SIZE:
	case AB_LIM_NOFILE:
	case AB_LIM_OUTPUT:
	case AB_LIM_COUNT:
	default:
		return json_integer((json_int_t) v);
	}
}

json_t *
spec_build(const struct ab_run_opts *o)
{
	json_t *j = json_object(), *lim = json_object(), *env = json_object(), *wo = json_array();

	json_object_set_new(j, "spec_version", json_integer(AB_SPEC_VERSION));
	if (o->session) {
		json_t *ses = json_object();

		json_object_set_new(ses, "idle_timeout",
				    json_sprintf("%" PRIu64 "ms", o->session_idle_ms));
		json_object_set_new(ses, "max_lifetime",
				    json_sprintf("%" PRIu64 "ms", o->session_lifetime_ms));
		json_object_set_new(j, "session", ses);
	} else if (o->code) {
		json_object_set_new(j, "code", json_stringn(o->code, o->code_len));
	} else {
		put_str(j, "script", o->script);
	}
	if (o->lang != AB_LANG_AUTO)
		json_object_set_new(j, "language",
				    json_string(o->lang == AB_LANG_PYTHON ? "python" : "node"));
	put_strv(j, "args", &o->script_args);
	for (size_t i = 0; i < ARRAY_SIZE(str_fields); i++) {
		const char *v = *(const char *const *) ((const char *) o + str_fields[i].off);

		if (strcmp(str_fields[i].key, "script") != 0)
			put_str(j, str_fields[i].key, v);
	}
	if (o->stdin_data)
		json_object_set_new(j, "stdin_data",
				    json_stringn(o->stdin_data, o->stdin_data_len));
	if (o->stdin_fd >= 0)
		json_object_set_new(j, "stdin_fd", json_integer(o->stdin_fd));
	STRV_FOREACH (kv, &o->env) {
		const char *eq = strchr(*kv, '=');
		cleanup_free char *name = xstrndup(*kv, (size_t) (eq - *kv));

		json_object_set_new(env, name, json_string(eq + 1));
	}
	if (json_object_size(env))
		json_object_set(j, "env", env);
	put_strv(j, "inputs", &o->inputs);
	put_strv(j, "requirements", &o->requirements);
	if (o->req_index_url || o->req_find_links) {
		json_t *ix = json_object();

		put_str(ix, "url", o->req_index_url);
		put_str(ix, "find_links", o->req_find_links);
		json_object_set_new(j, "index", ix);
	}
	put_strv(j, "ro_binds", &o->ro_binds);
	put_strv(j, "allow_binds", &o->allow_binds);
	for (int i = 0; i < AB_LIM_COUNT; i++)
		if (o->limits[i].set)
			json_object_set_new(
				lim, cli_limit_name((enum ab_limit_id) i),
				spec_limit_value((enum ab_limit_id) i, o->limits[i].value));
	if (json_object_size(lim))
		json_object_set(j, "limits", lim);
	for (int p = 0; p < AB_PROT_COUNT; p++)
		if (o->without[p])
			json_array_append_new(wo, json_string(cli_prot_name((enum ab_prot) p)));
	if (json_array_size(wo))
		json_object_set(j, "without", wo);
	if (o->seccomp_policy != AB_SECCOMP_DEFAULT)
		json_object_set_new(j, "seccomp_policy",
				    json_string(filter_policy_name(o->seccomp_policy)));
	if (o->inline_output_set)
		json_object_set_new(j, "inline_output",
				    json_integer((json_int_t) o->inline_output));
	if (!o->output_truncate)
		json_object_set_new(j, "on_output_limit", json_string("kill"));
	if (o->rm)
		json_object_set_new(j, "rm", json_true());
	if (o->quiet)
		json_object_set_new(j, "quiet", json_true());
	if (o->progress)
		json_object_set_new(j, "progress", json_true());
	if (o->net_strict)
		json_object_set_new(j, "net_strict", json_true());
	if (o->dry_run)
		json_object_set_new(j, "dry_run", json_true());
	json_decref(lim);
	json_decref(env);
	json_decref(wo);
	return j;
}

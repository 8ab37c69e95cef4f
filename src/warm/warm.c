#include "warm.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "../util/macro.h"
#include "../util/xalloc.h"

const char *
warm_refusal(const struct ab_run_opts *o)
{
	if (!o->code)
		return "the spec names a script file (warm slots run `code`)";
	if (o->lang != AB_LANG_PYTHON && o->lang != AB_LANG_NODE)
		return "the spec gives no language";
	if (o->stdin_path || o->stdin_data || o->stdin_fd >= 0)
		return "the run has stdin";
	if (o->workspace)
		return "the run has --workspace DIR";
	if (o->dry_run)
		return "a dry run";
	if (o->session)
		return "a session (its sandbox is its own)";
	/* installed before the run by the run's own supervisor (requirements.c), not a slot's */
	if (o->requirements.n)
		return "requirements";
	/* RLIMIT_CPU, its backstop, would count the interpreter's start and pre-imports */
	if (o->limits[AB_LIM_CPU_TIME_MS].value > 0)
		return "a --cpu-time limit (its rlimit backstop would count the slot's start)";
	if (o->limits[AB_LIM_NOFILE].value <= AB_WARM_FD)
		return "--nofile is not above the slot's hook fd (1000)";
	return NULL;
}

char *
warm_class_key(const json_t *spec)
{
	static const char *const per_run[] = {
		"code",  "args",     "inputs",        "collect",
		"quiet", "progress", "inline_output", "on_output_limit",
	};
	json_t *c, *lim;
	char *key;

	if (!json_is_object(spec))
		return NULL;
	c = json_deep_copy(spec);
	for (size_t i = 0; i < ARRAY_SIZE(per_run); i++)
		json_object_del(c, per_run[i]);
	lim = json_object_get(c, "limits");
	if (json_is_object(lim)) {
		json_object_del(lim, "timeout");
		json_object_del(lim, "output-limit");
		if (json_object_size(lim) == 0)
			json_object_del(c, "limits");
	}
	/* spec_version 1 is the only one, and saying it changes nothing */
	json_object_del(c, "spec_version");
	key = json_dumps(c, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(c);
	return key;
}

static bool
py_ident(const char *s, size_t n)
{
	if (n == 0 || (s[0] >= '0' && s[0] <= '9'))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!(s[i] == '_' || (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
		      (s[i] >= '0' && s[i] <= '9')))
			return false;
	return true;
}

bool
warm_module_ok(enum ab_lang lang, const char *name)
{
	size_t len = strlen(name);

	if (len == 0 || len > 200)
		return false;
	if (lang == AB_LANG_PYTHON) {
		for (const char *p = name;;) {
			const char *dot = strchr(p, '.');
			size_t n = dot ? (size_t) (dot - p) : strlen(p);

			if (!py_ident(p, n))
				return false;
			if (!dot)
				return true;
			p = dot + 1;
		}
	}
	if (lang != AB_LANG_NODE || name[0] == '.' || name[0] == '/' || strstr(name, "..") ||
	    strstr(name, "//"))
		return false;
	for (const char *p = name; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || strchr("@._/-", *p)))
			return false;
	return name[len - 1] != '/';
}

bool
warm_name_shadows(enum ab_lang lang, const char *name, const struct strv *modules)
{
	/* HOME is /work: Python's start adds ~/.local's site-packages when it is there */
	if (lang == AB_LANG_PYTHON && strcmp(name, ".local") == 0)
		return true;
	if (modules->n == 0)
		return false;
	if (lang == AB_LANG_NODE)
		return strcmp(name, "node_modules") == 0;
	STRV_FOREACH (m, modules) {
		size_t l = strlen(*m);

		/* numpy, numpy.py, numpy.pyc, numpy.cpython-311-x86_64-linux-gnu.so, numpy.pth */
		if (strncmp(name, *m, l) == 0 && (name[l] == '\0' || name[l] == '.'))
			return true;
	}
	return false;
}

char *
warm_msg_pack(const char *const *fields, size_t n, size_t *ret_len)
{
	size_t body = 0, off = 4;
	char *buf;

	for (size_t i = 0; i < n; i++)
		body += strlen(fields[i]) + (i > 0);
	buf = xmalloc(4 + body + 1);
	for (int i = 0; i < 4; i++)
		buf[i] = (char) ((body >> (8 * i)) & 0xff);
	for (size_t i = 0; i < n; i++) {
		size_t l = strlen(fields[i]);

		if (i > 0)
			buf[off++] = '\0';
		memcpy(buf + off, fields[i], l);
		off += l;
	}
	*ret_len = off;
	return buf;
}

ssize_t
warm_msg_parse(const char *buf, size_t len, size_t max, struct strv *ret)
{
	uint32_t n = 0;
	const char *p, *end;

	if (len < 4)
		return 0;
	for (int i = 3; i >= 0; i--)
		n = (n << 8) | (uint8_t) buf[i];
	if (n > max)
		return -EPROTO;
	if (len - 4 < n)
		return 0;
	p = buf + 4;
	end = p + n;
	for (;;) {
		const char *nul = memchr(p, '\0', (size_t) (end - p));
		size_t l = nul ? (size_t) (nul - p) : (size_t) (end - p);
		char *f = xstrndup(p, l);

		strv_push(ret, f);
		free(f);
		if (!nul)
			break;
		p = nul + 1;
	}
	return (ssize_t) (4 + n);
}

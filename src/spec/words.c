/* words.c: flags to spec keys in messages (words.h). */
#include "words.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/macro.h"
#include "../util/strv.h"
#include "../util/xalloc.h"

enum word_kind {
	W_KEY,   /* --venv: venv */
	W_LIMIT, /* --memory: limits.memory */
	W_BOOL,  /* --rm: "rm": true */
	W_ENUM,  /* --lang node: "language": "node"; alone: language */
	W_LIST,  /* --without seccomp: "without": ["seccomp"]; alone: without */
};

/* Every flag of `agentbox run` that has a spec key (docs/spec.md); longest first where one
 * is a prefix of another is not needed: a match must end at a word boundary. */
static const struct {
	const char *flag, *key;
	enum word_kind kind;
	const char *values; /* W_ENUM, W_LIST: the values taken along, space-separated */
} words[] = {
	{ "allow-bind", "allow_binds", W_KEY, NULL },
	{ "code", "code", W_KEY, NULL },
	{ "collect", "collect", W_KEY, NULL },
	{ "cpu-time", "cpu-time", W_LIMIT, NULL },
	{ "cpus", "cpus", W_LIMIT, NULL },
	{ "disk", "disk", W_LIMIT, NULL },
	{ "dry-run", "dry_run", W_BOOL, NULL },
	{ "env", "env", W_KEY, NULL },
	{ "env-dir", "env_dir", W_KEY, NULL },
	{ "file-size", "file-size", W_LIMIT, NULL },
	{ "inline-output", "inline_output", W_KEY, NULL },
	{ "inodes", "inodes", W_LIMIT, NULL },
	{ "input", "inputs", W_KEY, NULL },
	{ "lang", "language", W_ENUM, "python node" },
	{ "memory", "memory", W_LIMIT, NULL },
	{ "net-strict", "net_strict", W_BOOL, NULL },
	{ "node", "node", W_KEY, NULL },
	{ "node-modules", "node_modules", W_KEY, NULL },
	{ "nofile", "nofile", W_LIMIT, NULL },
	{ "on-output-limit", "on_output_limit", W_ENUM, "kill truncate" },
	{ "output-limit", "output-limit", W_LIMIT, NULL },
	{ "pids", "pids", W_LIMIT, NULL },
	{ "python", "python", W_KEY, NULL },
	{ "quiet", "quiet", W_BOOL, NULL },
	{ "rm", "rm", W_BOOL, NULL },
	{ "ro-bind", "ro_binds", W_KEY, NULL },
	{ "runs-dir", "runs_dir", W_KEY, NULL },
	{ "sandbox-user", "sandbox_user", W_KEY, NULL },
	{ "seccomp-policy", "seccomp_policy", W_ENUM, "default strict" },
	{ "stdin", "stdin", W_KEY, NULL },
	{ "timeout", "timeout", W_LIMIT, NULL },
	{ "tmp-size", "tmp-size", W_LIMIT, NULL },
	{ "venv", "venv", W_KEY, NULL },
	{ "without", "without", W_LIST, "seccomp landlock disable-userns cgroup" },
	{ "workspace", "workspace", W_KEY, NULL },
};

static bool
word_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '-' || c == '_';
}

/* The length of the value at p (after the flag's space) when it is one of values, else 0. */
static size_t
enum_value(const char *p, const char *values)
{
	size_t n = 0;

	while (word_char(p[n]))
		n++;
	if (n == 0)
		return 0;
	for (const char *v = values; *v;) {
		size_t l = strcspn(v, " ");

		if (l == n && strncmp(v, p, n) == 0)
			return n;
		v += l;
		v += *v == ' ';
	}
	return 0;
}

char *
words_for_spec(const char *text)
{
	struct strv out = { 0 };
	const char *p, *copied;
	char *res;

	if (!text)
		return NULL;
	for (p = copied = text; *p; p++) {
		size_t i, fl = 0, vl = 0;

		if (p[0] != '-' || p[1] != '-' || (p > text && word_char(p[-1])))
			continue;
		/* `agentbox prepare`'s own flags (prepare --disk) are not the run's */
		if (p - text >= 8 && strncmp(p - 8, "prepare ", 8) == 0)
			continue;
		for (i = 0; i < ARRAY_SIZE(words); i++) {
			fl = strlen(words[i].flag);
			if (strncmp(p + 2, words[i].flag, fl) == 0 && !word_char(p[2 + fl]))
				break;
		}
		if (i == ARRAY_SIZE(words))
			continue;
		strv_pushf(&out, "%.*s", (int) (p - copied), copied);
		if (words[i].values && p[2 + fl] == ' ')
			vl = enum_value(p + 3 + fl, words[i].values);
		switch (words[i].kind) {
		case W_LIMIT:
			strv_pushf(&out, "limits.%s", words[i].key);
			break;
		case W_BOOL:
			strv_pushf(&out, "\"%s\": true", words[i].key);
			break;
		case W_ENUM:
		case W_LIST:
			if (vl > 0)
				strv_pushf(&out,
					   words[i].kind == W_LIST ? "\"%s\": [\"%.*s\"]"
								   : "\"%s\": \"%.*s\"",
					   words[i].key, (int) vl, p + 3 + fl);
			else
				strv_push(&out, words[i].key);
			break;
		case W_KEY:
		default:
			strv_push(&out, words[i].key);
			break;
		}
		p += 2 + fl + (vl > 0 ? 1 + vl : 0);
		copied = p;
		p--; /* the loop's p++ */
	}
	strv_push(&out, copied);
	res = strv_join(&out, "");
	strv_done(&out);
	return res;
}

void
words_err_for_spec(struct ab_err *err)
{
	char *m, *f;

	if (!err || err->code == 0)
		return;
	m = words_for_spec(err->msg);
	f = words_for_spec(err->fix);
	snprintf(err->msg, sizeof(err->msg), "%s", m);
	snprintf(err->fix, sizeof(err->fix), "%s", f);
	free(m);
	free(f);
}

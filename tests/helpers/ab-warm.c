/* ab-warm: runs specs cold and through a warm slot (the library's pool, src/lib/pool.c), for
 * tests/integration/test-warm.sh and bench/warm. Built from the library's sources, so it needs
 * no build tree at run time (the user variant runs it from a staged copy).
 *
 *   ab-warm [--preimport M,M] [--idle-ms N] [--only cold|warm|start] [--info FILE] OUTDIR SPEC...
 *
 * For each SPEC file (a run spec, docs/spec.md): OUTDIR/NAME.cold.json is its report from
 * ab_run, OUTDIR/NAME.warm.json its report from ab_pool_run_start once a slot of its class is
 * ready (NAME: the file's base name without .json). One pool serves every spec, with one slot
 * per class. --only start adds each spec's class and runs nothing: the pool is freed while
 * its slots are still being built. --info writes ab_pool_info before the pool is freed. Exit 0 when
 * every run produced a report, 1 otherwise (the reason on stderr). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agentbox/agentbox.h"

static char *
slurp(const char *path)
{
	FILE *f = fopen(path, "re");
	char *buf = NULL;
	size_t len = 0, cap = 0, n;

	if (!f)
		return NULL;
	do {
		if (cap - len < 65536) {
			cap = cap ? 2 * cap : 65536;
			buf = realloc(buf, cap + 1);
			if (!buf)
				abort();
		}
		n = fread(buf + len, 1, cap - len, f);
		len += n;
	} while (n > 0);
	fclose(f);
	buf[len] = '\0';
	return buf;
}

static int
save(const char *dir, const char *name, const char *kind, const char *text)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s.%s.json", dir, name, kind);
	f = fopen(path, "we");
	if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
		perror(path);
		return -1;
	}
	return 0;
}

static const char *
base(const char *path, char *buf, size_t size)
{
	const char *slash = strrchr(path, '/');
	char *dot;

	snprintf(buf, size, "%s", slash ? slash + 1 : path);
	dot = strrchr(buf, '.');
	if (dot && strcmp(dot, ".json") == 0)
		*dot = '\0';
	return buf;
}

/* ["a","b"] from "a,b" */
static char *
preimport_json(const char *list)
{
	size_t n = strlen(list);
	char *out = malloc(2 * n + 32), *q = out;

	if (!out)
		abort();
	q += sprintf(q, "{\"preimport\":[\"");
	for (const char *p = list; *p; p++)
		q += *p == ',' ? sprintf(q, "\",\"") : sprintf(q, "%c", *p);
	sprintf(q, "\"]");
	return out;
}

int
main(int argc, char **argv)
{
	const char *pre = NULL, *only = NULL, *info = NULL, *dir;
	long idle_ms = 0;
	ab_context *ctx;
	ab_pool *pool;
	ab_error *err = NULL;
	int i, rc = 0;

	for (i = 1; i + 1 < argc && strncmp(argv[i], "--", 2) == 0; i += 2) {
		if (strcmp(argv[i], "--preimport") == 0)
			pre = argv[i + 1];
		else if (strcmp(argv[i], "--idle-ms") == 0)
			idle_ms = strtol(argv[i + 1], NULL, 10);
		else if (strcmp(argv[i], "--only") == 0)
			only = argv[i + 1];
		else if (strcmp(argv[i], "--info") == 0)
			info = argv[i + 1];
		else
			break;
	}
	if (argc - i < 2) {
		fprintf(stderr,
			"usage: ab-warm [--preimport M,M] [--idle-ms N] [--only cold|warm|start] "
			"[--info FILE] OUTDIR SPEC...\n");
		return 2;
	}
	dir = argv[i++];
	ctx = ab_context_new(&err);
	pool = ctx ? ab_pool_new(ctx, &err) : NULL;
	if (!pool) {
		fprintf(stderr, "ab-warm: %s\n", ab_error_message(err));
		return 1;
	}
	for (; i < argc; i++) {
		char name[256], *text = slurp(argv[i]), *opts = NULL;
		ab_spec *s = text ? ab_spec_from_json(text, (size_t) -1, &err) : NULL;
		ab_result *res = NULL;
		ab_run_handle *h;

		base(argv[i], name, sizeof(name));
		free(text);
		if (!s) {
			fprintf(stderr, "ab-warm: %s: %s\n", argv[i],
				err ? ab_error_message(err) : strerror(errno));
			ab_error_free(err);
			err = NULL;
			rc = 1;
			continue;
		}
		if (!only || strcmp(only, "cold") == 0) {
			if (ab_run(ctx, s, &res, &err) < 0 ||
			    save(dir, name, "cold", ab_result_json(res)) < 0) {
				fprintf(stderr, "ab-warm: %s cold: %s\n", name,
					ab_error_message(err));
				rc = 1;
			}
			ab_result_free(res);
			res = NULL;
		}
		if (only && strcmp(only, "start") == 0) {
			/* a slot started and let go at once, while its sandbox is being built */
			if (ab_pool_add(pool, s, 1, NULL, &err) < 0 &&
			    ab_error_code(err) != -EEXIST) {
				fprintf(stderr, "ab-warm: %s: %s\n", name, ab_error_message(err));
				rc = 1;
			}
			ab_error_free(err);
			err = NULL;
			ab_spec_free(s);
			continue;
		}
		if (only && strcmp(only, "warm") != 0) {
			ab_spec_free(s);
			continue;
		}
		/* one slot per class: a class already in the pool is -EEXIST, and fine */
		if (pre || idle_ms) {
			char idle[64];
			char *pj = pre ? preimport_json(pre) : NULL;

			snprintf(idle, sizeof(idle), "\"idle_ms\":%ld", idle_ms);
			opts = malloc((pj ? strlen(pj) : 0) + 96);
			if (!opts)
				abort();
			if (pj)
				sprintf(opts, "%s%s%s}", pj, idle_ms ? "," : "",
					idle_ms ? idle : "");
			else
				sprintf(opts, "{%s}", idle);
			free(pj);
		}
		if ((ab_pool_add(pool, s, 1, opts, &err) < 0 && ab_error_code(err) != -EEXIST) ||
		    ab_pool_wait_ready(pool, 60000, &err) < 0) {
			fprintf(stderr, "ab-warm: %s: the slot: %s\n", name, ab_error_message(err));
			ab_error_free(err);
			err = NULL;
			rc = 1;
		} else {
			ab_error_free(err);
			err = NULL;
			h = ab_pool_run_start(pool, s, &(ab_io){ -1, -1 }, &err);
			if (!h || ab_run_wait(h, &res, &err) < 0 ||
			    save(dir, name, "warm", ab_result_json(res)) < 0) {
				fprintf(stderr, "ab-warm: %s warm: %s\n", name,
					ab_error_message(err));
				rc = 1;
			}
			ab_result_free(res);
		}
		free(opts);
		ab_spec_free(s);
	}
	if (info) {
		char *t = ab_pool_info(pool);
		FILE *f = fopen(info, "we");

		if (!t || !f || fputs(t, f) < 0 || fclose(f) != 0)
			rc = 1;
		free(t);
	}
	ab_pool_free(pool);
	ab_context_free(ctx);
	ab_error_free(err);
	return rc;
}

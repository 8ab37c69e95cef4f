#include "strv.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xalloc.h"

static void
strv_grow(struct strv *sv)
{
	if (sv->n + 1 < sv->cap)
		return;
	sv->cap = sv->cap ? sv->cap * 2 : 16;
	sv->v = xrealloc(sv->v, sv->cap * sizeof(char *));
}

static void
strv_take(struct strv *sv, char *s)
{
	strv_grow(sv);
	sv->v[sv->n++] = s;
	sv->v[sv->n] = NULL;
}

void
strv_push(struct strv *sv, const char *s)
{
	strv_take(sv, xstrdup(s));
}

void
strv_vpushf(struct strv *sv, const char *fmt, va_list ap)
{
	char *s = NULL;

	if (vasprintf(&s, fmt, ap) < 0 || !s)
		abort(); /* out of memory, as the x-allocators */
	strv_take(sv, s);
}

void
strv_pushf(struct strv *sv, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	strv_vpushf(sv, fmt, ap);
	va_end(ap);
}

void
strv_push_n(struct strv *sv, size_t count, ...)
{
	va_list ap;

	va_start(ap, count);
	for (size_t i = 0; i < count; i++)
		strv_push(sv, va_arg(ap, const char *));
	va_end(ap);
}

void
strv_done(struct strv *sv)
{
	for (size_t i = 0; i < sv->n; i++)
		free(sv->v[i]);
	free(sv->v);
	sv->v = NULL;
	sv->n = sv->cap = 0;
}

char *
strv_join(const struct strv *sv, const char *sep)
{
	size_t len = 1, seplen = strlen(sep);
	char *out, *p;

	for (size_t i = 0; i < sv->n; i++)
		len += strlen(sv->v[i]) + seplen;
	p = out = xmalloc(len);
	for (size_t i = 0; i < sv->n; i++) {
		size_t l = strlen(sv->v[i]);

		if (i > 0) {
			memcpy(p, sep, seplen);
			p += seplen;
		}
		memcpy(p, sv->v[i], l);
		p += l;
	}
	*p = '\0';
	return out;
}

char **
strv_array(struct strv *sv)
{
	if (!sv->v) {
		strv_grow(sv);
		sv->v[0] = NULL;
	}
	return sv->v;
}

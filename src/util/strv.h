/* strv.h: a growable, always NULL-terminated vector of owned strings. */
#pragma once

#include <stdarg.h>
#include <stddef.h>

struct strv {
	char **v; /* NULL-terminated once anything was pushed; may be NULL when empty */
	size_t n, cap;
};

void strv_push(struct strv *sv, const char *s); /* copies s */
void strv_pushf(struct strv *sv, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void strv_vpushf(struct strv *sv, const char *fmt, va_list ap)
	__attribute__((format(printf, 2, 0)));
void strv_push_n(struct strv *sv, size_t count, ...); /* count copies, each a const char * */
void strv_done(struct strv *sv);                      /* frees contents; sv is empty afterwards */
char *strv_join(const struct strv *sv, const char *sep);
/* The vector as char ** for exec; never NULL (an empty vector yields {NULL}). */
char **strv_array(struct strv *sv);

#define STRV_FOREACH(s, sv) for (char **s = (sv)->v; s && *s; s++)

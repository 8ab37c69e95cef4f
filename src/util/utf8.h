/* utf8.h: text as a report holds it. Pure. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* A copy of buf (len bytes) as valid UTF-8 without NUL, each invalid byte replaced by U+FFFD
 * (*lossy then set). */
char *utf8_sanitize(const char *buf, size_t len, size_t *ret_len, bool *lossy);

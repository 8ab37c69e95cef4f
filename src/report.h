/* report.h: the one JSON report per run (schema documented in docs/report-schema.md). */
#pragma once

#include "result.h"

#define AB_REPORT_SCHEMA_VERSION 1

/* Builds the report object. Pure. */
json_t *report_build(const struct ab_result *r);

/* Writes the report to path ("-" = stdout) atomically (temp file + rename, never through a
 * symlink at path). Returns 0 or -errno. */
int report_write(const char *path, const json_t *report);

/* The report as written: JSON_INDENT(2) | JSON_SORT_KEYS and a final newline. Returns malloc'd
 * text and sets *ret_len, or NULL when out of memory. */
char *report_dumps(const json_t *report, size_t *ret_len);

/* Replaces the value of the top-level key `key` in text (as report_dumps made it) with v, or
 * null when v < 0. Top-level keys are the only ones on a line that starts "\n  \"": nested
 * keys are indented deeper and strings escape their newlines, so no script output or file
 * name can fake one. Pure. Returns 0 or -ENOENT. */
int report_patch_int(char **text, size_t *len, const char *key, int64_t v);

/* report_write for text from report_dumps. */
int report_write_text(const char *path, const char *text, size_t len);

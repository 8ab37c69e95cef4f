/* report.h: the one JSON report per run (schema documented in docs/report-schema.md). */
#pragma once

#include "result.h"

#define AB_REPORT_SCHEMA_VERSION 1

/* Builds the report object. Pure. */
json_t *report_build(const struct ab_result *r);

/* Writes the report to path ("-" = stdout) atomically (temp file + rename, never through a
 * symlink at path). Returns 0 or -errno. */
int report_write(const char *path, const json_t *report);

/* report.h: the one JSON report per run (schema documented in docs/report-schema.md). */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "../util/err.h"
#include "record.h"

#define AB_REPORT_SCHEMA_VERSION 1

/* Builds the report object. Pure. */
json_t *report_build(const struct ab_record *r);

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

/* Where a report goes: stdout, or a file name in a directory opened once (hostfs_open_parent:
 * only trusted symlinks on the way), so the write cannot be redirected later. */
struct ab_report_dest {
	bool to_stdout;
	int dirfd;
	char *base;
	bool direct;   /* PATH is a device or a FIFO (/dev/null, /dev/stdout): written to, */
	int direct_fd; /* through this fd, never replaced */
};

/* Opens the destination of --report PATH ("-" = stdout) before anything runs: its directory
 * must exist and be writable, PATH must not be a directory. A PATH that is a character device
 * or a FIFO, or a link of root's or the caller's (/dev/stdout), is opened and written to (what
 * the link leads to), never replaced: agentbox changes nothing it did not create. Any other
 * kind of file that is not a regular file is refused. Returns 0, or -errno with a usage error (exit
 * 2) and the fix in err. */
int report_dest_open(const char *path, struct ab_report_dest *d, struct ab_err *err);
void report_dest_done(struct ab_report_dest *d);

/* Writes text from report_dumps to d atomically: a fresh temp file beside it (O_EXCL, never
 * through a link), then renameat over the name, which must then be absent or a regular file
 * (-EPERM otherwise); a direct destination is written to. Returns 0 or -errno. */
int report_write_at(const struct ab_report_dest *d, const char *text, size_t len);

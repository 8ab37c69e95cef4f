/* spec.h: the run spec (docs/spec.md) <-> struct ab_run_opts. Pure: no I/O, no syscalls.
 * The CLI builds opts from its flags (cli.c) and turns them into a spec; the library and the
 * supervisor parse a spec into opts with the same setters, so a flag and its spec key are
 * checked the same way. */
#pragma once

#include <jansson.h>

#include "../util/err.h"
#include "options.h"

#define AB_SPEC_VERSION 1

/* Fills o (run_opts_init'ed) from a spec object. Unknown keys, wrong types, values that do not
 * parse: a usage error (exit 2) naming the key. Strings are copied into o. */
int spec_parse(const json_t *spec, struct ab_run_opts *o, struct ab_err *err);

/* The same from text (len (size_t) -1: NUL-terminated). */
int spec_parse_text(const char *text, size_t len, struct ab_run_opts *o, struct ab_err *err);

/* The spec of o: only what differs from the defaults; limits the caller set as explicit
 * values in base units. A new reference. */
json_t *spec_build(const struct ab_run_opts *o);

/* One limit's value (base units) as spec_parse reads it back: "30000ms", "1.500", or a
 * number. A new reference. */
json_t *spec_limit_value(enum ab_limit_id id, uint64_t v);

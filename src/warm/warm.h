/* warm.h: warm slots (docs/design.md "Warm slots"): which runs a slot may take, the class a
 * slot is built for, and the messages of its interpreter hook (src/warm/). Pure: no syscalls;
 * linked into the library (which picks slots) and the supervisor (which checks a claim again).
 *
 * A slot is one future run's sandbox, built to the point where the interpreter waits on a
 * socket for its script. A spec may take a slot when it gives `code` (the script is then
 * always /work/script.py or /work/script.js, the name the slot's interpreter was started
 * with), an explicit language, no stdin, no --workspace DIR and no dry run, and when every
 * other key equals the slot's: the class. The keys that may differ are applied at the
 * hand-over: code, args, inputs, collect, quiet, progress, inline_output, on_output_limit and
 * the timeout and output-limit limits. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include <sys/types.h>

#include "../spec/options.h"
#include "../util/strv.h"

/* The slot's socket in the interpreter (and in bwrap and agentbox-init on the way): high, so
 * the interpreter's own fds are numbered as in a cold run, and closed by the hook before the
 * script starts. A class needs --nofile above it. */
#define AB_WARM_FD       1000
#define AB_WARM_DIR      "/etc/agentbox/warm" /* in every sandbox's generated /etc */
#define AB_WARM_JS_HOOK  AB_WARM_DIR "/hook.js"
#define AB_WARM_MSG_MAX  (1u << 20) /* the longest hook message (the script's arguments) */
#define AB_WARM_MAX_MODS 64         /* pre-imports per slot */
/* how long the hand-over of a claimed run's arguments may wait for the interpreter's hook */
#define AB_WARM_HANDOVER_MS 10000

/* The hooks' sources, embedded at build time (src/warm/embed.py). */
extern const char ab_warm_sitecustomize_py[];
extern const char ab_warm_hook_js[];
/* sitecustomize.py compiled by the build's /usr/bin/python3, checked against the source by
 * hash (PEP 552), and its name under __pycache__ ("sitecustomize.cpython-311.pyc") */
extern const char ab_warm_sitecustomize_py_pyc[];
extern const size_t ab_warm_sitecustomize_py_pyc_len;
extern const char ab_warm_sitecustomize_py_pyc_file[];

/* NULL when a parsed spec may run in a warm slot, else why not (static text). */
const char *warm_refusal(const struct ab_run_opts *o);

/* The class of a spec (JSON object): its canonical text (sorted keys, compact) without the
 * per-run keys above. malloc'd; NULL when spec is not an object. */
char *warm_class_key(const json_t *spec);

/* A pre-import name the hook may import: a dotted Python module name, or a bare Node package
 * name (no path: nothing relative or absolute). */
bool warm_module_ok(enum ab_lang lang, const char *name);

/* Would an entry named `name` at the top of /work make a cold run start differently from the
 * slot: shadow one of the top-level modules the slot pre-imported (Python: NAME, NAME.py,
 * NAME.*.so and the like; Node: a node_modules directory), or be read by the interpreter's
 * own start (Python: .local, the user site directory under HOME=/work)? */
bool warm_name_shadows(enum ab_lang lang, const char *name, const struct strv *modules);

/* A hook message of n fields: u32 little-endian length, then the fields NUL-separated.
 * malloc'd, *ret_len its size. */
char *warm_msg_pack(const char *const *fields, size_t n, size_t *ret_len);

/* One message at the start of buf[0..len): returns the bytes it takes and its fields in ret
 * (appended), 0 when it is not complete yet, -EPROTO when it is longer than max. */
ssize_t warm_msg_parse(const char *buf, size_t len, size_t max, struct strv *ret);

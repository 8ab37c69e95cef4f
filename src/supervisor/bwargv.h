/* bwargv.h: turn a plan into bwrap's argv (the part passed through --args) and the command.
 * Pure: no syscalls, no globals, no logging. Same plan, same argv (golden-tested). */
#pragma once

#include "../util/strv.h"
#include "plan.h"

/* Appends bwrap's options to opts (passed through --args FD: environment values stay out of
 * `ps`), and to cmd "--", agentbox-init, its options, "--", the interpreter and the script
 * with its arguments (bwrap takes the command from its real argv). Every caller-controlled
 * string lands as the value of a fixed option or after "--": none can become a bwrap
 * option (T37). */
void bwargv_build(struct strv *opts, struct strv *cmd, const struct ab_plan *p);
/* The first of bwargv_build's options: the namespaces, the identity, the environment;
 * everything before the first mount, all known before anything is staged. */
void bwargv_head(struct strv *opts, const struct ab_plan *p);
/* bwargv_build's cmd alone: it rests on the plan's interpreter, script, arguments and
 * agentbox-init's options, all known before anything is staged (supervise_prestart). */
void bwargv_cmd(struct strv *cmd, const struct ab_plan *p);

/* Serializes av as NUL-terminated words for bwrap --args. Returns a malloc'd buffer and sets
 * *ret_len. */
char *bwargv_serialize(const struct strv *av, size_t *ret_len);

/* Shell-quotes one word for --dry-run ('...' with ' escaped as '\''). Returns malloc'd. */
char *bwargv_shell_quote(const char *word);

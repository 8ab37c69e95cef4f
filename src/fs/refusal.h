/* refusal.h: what must never be mounted into a sandbox, as pure checks of a resolved path. */
#pragma once

#include <stdbool.h>

/* Why host path `real` (absolute, symlink-free) must not be mounted, or NULL when it may.
 * home: the caller's $HOME (may be NULL). Refused: /, /etc itself and its secrets, /run,
 * /var/run, /proc, /sys, /dev, /boot, /tmp itself, home directories themselves (/home,
 * /root, /home/NAME, $HOME), credential directories anywhere (.ssh, .gnupg, .aws, .azure,
 * .kube, .docker, .config/gcloud, .config/gh, .netrc, .npmrc, .pypirc, .git-credentials),
 * sockets, and any directory that holds one of those credential names directly. Pure but
 * for the lstat of real and of its credential children. */
const char *refusal_mount(const char *real, const char *home);

/* The same for a --workspace DIR (issue 25): a token file DIR holds (refusal_token_files: a
 * project's .npmrc, .pypirc, .netrc, .git-credentials; a regular file or a link) is not a
 * refusal, the run hides it (ws_hide_token_files); credential directories still are. */
const char *refusal_workspace(const char *real, const char *home);

/* The token files a workspace may hold, hidden from the sandbox; NULL-terminated. */
extern const char *const refusal_token_files[];
bool refusal_is_token_file(const char *name);

/* binds.h: what a caller may mount read-only into the sandbox (--ro-bind, --venv,
 * --node-modules, interpreters outside /usr), and what must never be mounted. */
#pragma once

#include <stdbool.h>

#include "../fs/refusal.h"
#include "../util/err.h"
#include "../util/strv.h"
#include "plan.h"

/* Opens HOST once (hostfs_open: only trusted symlinks followed), refuses it when
 * hostfs_refusal() says so (allowed: the --allow-bind paths), and adds a read-only bind of
 * that fd at dest (NULL: the same path) to the plan. what names the option in messages. */
int binds_add_checked(struct ab_plan *p, const char *host, const char *dest,
		      const struct strv *allowed, const char *what, struct ab_err *err);

/* Adds `--ro-bind HOST[:SANDBOX]` to the plan after the checks (binds_add_checked); SANDBOX
 * (default: the same path) must be absolute, normalized, and not /, /work or below, /usr, /etc,
 * /proc, /dev, /tmp, /.agentbox or below. allowed: host paths the caller named with --allow-bind
 * (exempt from refusal_mount). Returns 0 or -errno with err set (a usage error for a bad spec). */
int binds_add_user(struct ab_plan *p, const char *spec, const struct strv *allowed,
		   struct ab_err *err);

/* Checks a sandbox destination path (see above). Returns NULL or the reason. Pure. */
const char *binds_bad_dest(const char *dest);

/* The name rule for host files under /etc (path absolute, or relative to /etc): the deny
 * pattern one of its components matches (case-insensitively: a whole name such as shadow,
 * gshadow, sudoers, ssh, security, machine-id, pki, wireguard, NetworkManager,
 * wpa_supplicant, docker, pip.conf..., or a part such as key, secret, private, passw,
 * credential, token, auth), or NULL. Pure. docs/design.md "The sandbox's /etc". */
const char *binds_etc_denied(const char *path);

/* `--ro-bind /etc/NAME` (issue 15): one non-secret file of the host's /etc, bound read-only
 * at the same path (dest NULL or equal to host) inside the generated /etc. Refused: a name
 * agentbox generates (passwd, hosts...), anything but a regular file, a file not readable by
 * every host user (mode o+r, every directory on the way o+x), a name binds_etc_denied()
 * matches (unless host, or the file it leads to, is on allowed), and a link out of /etc to
 * what hostfs_refusal() refuses. A name of the curated set is accepted as is (already
 * there). Opened once (only root's or the caller's symlinks followed); the plan's etc_binds
 * owns the fd. Returns 0 or -errno with err set. */
int binds_add_etc(struct ab_plan *p, const char *host, const char *dest, const struct strv *allowed,
		  struct ab_err *err);

/* cmds.h: the commands besides `run` and `prepare`, run in the supervisor (agentbox-supervisor)
 * for libagentbox's ab_probe, ab_collect, ab_rm and ab_gc. Each returns 0 with its result as
 * JSON in *ret (where there is one), or -errno with err set. They never print their result:
 * the caller does. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "../util/err.h"

/* Removes one kept run directory: one agentbox made (run-XXXXXX with the caller's marker)
 * whose agentbox is no longer running. */
int rm_do(const char *run_dir, struct ab_err *err);

/* Removes kept runs under the runs directory older than older_ms (0: any age), never one still
 * running. *ret: {"runs_dir", "removed": [names], "kept", "failed", "dry_run"}. */
int gc_do(int64_t older_ms, bool dry, json_t **ret, struct ab_err *err);

/* Copies the regular files and directories a kept run left into dest (created when missing,
 * refused like --collect). *ret: {"dir", "bytes", "files", "summary"}. */
int collect_do(const char *run_dir, const char *dest, json_t **ret, struct ab_err *err);

/* What `agentbox doctor` checks (src/supervisor/doctor.c), each {"check", "result": ok|warn|FAIL,
 * "detail", "fix"}, with two real sandbox runs (Python, Node). *ret: {"agentbox_version",
 * "as_root", "host": {"class", "container", "wsl", "cap_sys_admin", "bwrap_setuid", "cgroup",
 * "apparmor_restrict_userns", "proc_mountable"}, "summary", "checks", "ok"}. */
int doctor_checks(json_t **ret, struct ab_err *err);

struct ab_host;
/* The host's class in words: who (root, root without CAP_SYS_ADMIN, unprivileged), where
 * (this machine, WSL2, a podman/docker/masked-/proc container, a Kubernetes pod), cgroups,
 * setuid bwrap, AppArmor's restriction. Pure. */
void doctor_host_class(const struct ab_host *h, char *buf, size_t size);

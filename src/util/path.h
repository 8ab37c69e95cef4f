/* path.h: looking commands up in PATH. */
#pragma once

/* The first executable NAME in path (a PATH value: the callers pass cfg()->path), or in
 * "/usr/local/bin:/usr/bin:/bin" when it is NULL or empty, skipping relative entries. Returns
 * a malloc'd absolute path, or NULL. */
char *path_search(const char *path, const char *name);

/* Where agentbox's helper NAME (agentbox-init, agentbox-netproxy, agentbox-supervisor) is:
 * configured when it is absolute (AGENTBOX_INIT etc.: the caller decides what an unusable one
 * means), else next to the running program (the build tree) when executable there, else the
 * installed libexec directory. Returns a malloc'd path. */
char *path_helper(const char *configured, const char *name);

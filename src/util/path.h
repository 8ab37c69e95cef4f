/* path.h: looking commands up in PATH. */
#pragma once

/* The first executable NAME in path (a PATH value: the callers pass cfg()->path), or in
 * "/usr/local/bin:/usr/bin:/bin" when it is NULL or empty, skipping relative entries. Returns
 * a malloc'd absolute path, or NULL. */
char *path_search(const char *path, const char *name);

/* path.h: looking commands up in PATH. */
#pragma once

/* The first executable NAME in the caller's PATH ("/usr/local/bin:/usr/bin:/bin" when PATH is
 * unset or empty), skipping relative entries. Returns a malloc'd absolute path, or NULL. */
char *path_search(const char *name);

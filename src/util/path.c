#include "path.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "xalloc.h"

char *
path_search(const char *path, const char *name)
{
	char *copy, *save = NULL;

	if (!path || !*path)
		path = "/usr/local/bin:/usr/bin:/bin";
	copy = xstrdup(path);
	for (char *dir = strtok_r(copy, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
		char *cand;

		if (dir[0] != '/')
			continue; /* never a relative PATH entry */
		cand = xasprintf("%s/%s", dir, name);
		if (access(cand, X_OK) == 0) {
			free(copy);
			return cand;
		}
		free(cand);
	}
	free(copy);
	return NULL;
}

char *
path_helper(const char *configured, const char *name)
{
	char self[PATH_MAX];
	ssize_t n;

	if (configured && configured[0] == '/')
		return xstrdup(configured);
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n > 0) {
		char *slash;

		self[n] = '\0';
		slash = strrchr(self, '/');
		if (slash) {
			char *cand;

			*slash = '\0';
			cand = xasprintf("%s/%s", self, name);
			if (access(cand, X_OK) == 0)
				return cand;
			free(cand);
		}
	}
	return xasprintf("%s/%s", AB_LIBEXECDIR, name);
}

#include "path.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

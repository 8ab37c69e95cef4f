/* walk-origin.c: where each entry of a run's workspace came from (issue 15), against the
 * listing of the same tree taken before the run (ab_walk_opts.origins_from), by path.
 *
 * Content decides, not timestamps: a regular file there before and after is unchanged when
 * its sha256 is the same, whatever its times say (the script can set mtime back; timestamps
 * are coarse on many kernels; a filesystem may not update them for a write through a shared
 * mapping). Only when a sha256 is missing on either side (over the hash size cap or budget, a
 * sparse giant, a hard link, unreadable) does the walk fall back to inode, size, mtime and
 * ctime (which no system call sets at will), and says so (origin_by_metadata). */
#include <stdlib.h>
#include <string.h>

#include "../../util/xalloc.h"
#include "walk-internal.h"

static const char *const origin_names[AB_ORIGIN_COUNT] = {
	[AB_ORIGIN_NONE] = NULL,           [AB_ORIGIN_UNKNOWN] = "unknown",
	[AB_ORIGIN_SCRIPT] = "script",     [AB_ORIGIN_CREATED] = "created",
	[AB_ORIGIN_MODIFIED] = "modified", [AB_ORIGIN_UNCHANGED] = "unchanged",
};

const char *
walk_origin_name(enum ab_entry_origin o)
{
	return o < AB_ORIGIN_COUNT ? origin_names[o] : NULL;
}

static int
path_cmp(const void *a, const void *b)
{
	const struct ab_entry *const *x = a, *const *y = b;

	return strcmp((*x)->path, (*y)->path);
}

void
walk_origin_index(struct walk *w)
{
	const struct ab_manifest *pre = w->o.origins_from;

	if (!pre || pre->n == 0)
		return;
	w->origins = xmalloc(pre->n * sizeof(*w->origins));
	for (size_t i = 0; i < pre->n; i++)
		if (pre->entries[i].path)
			w->origins[w->n_origins++] = &pre->entries[i];
	qsort(w->origins, w->n_origins, sizeof(*w->origins), path_cmp);
}

static bool
ts_eq(struct timespec a, struct timespec b)
{
	return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}

void
walk_origin_set(struct walk *w, struct ab_entry *e)
{
	const struct ab_manifest *pre = w->o.origins_from;
	struct ab_entry key = { .path = e->path };
	const struct ab_entry *kp = &key, *const * hit, *p;
	bool same;

	if (!pre || !e->path)
		return;
	hit = w->n_origins ? bsearch(&kp, w->origins, w->n_origins, sizeof(*w->origins), path_cmp)
			   : NULL;
	if (!hit) {
		/* a cap cut the listing before the run: it may have been there */
		e->origin = pre->truncated ? AB_ORIGIN_UNKNOWN : AB_ORIGIN_CREATED;
		return;
	}
	p = *hit;
	if (p->type != e->type) {
		e->origin = AB_ORIGIN_CREATED; /* another kind of entry in its place */
		return;
	}
	switch (walk_access_of(e->type)) {
	case WALK_READ:
		if (p->sha256[0] && e->sha256[0]) {
			same = strcmp(p->sha256, e->sha256) == 0;
		} else {
			same = p->ino == e->ino && p->size == e->size &&
			       ts_eq(p->mtime, e->mtime) && ts_eq(p->ctime, e->ctime);
			e->origin_by_metadata = true;
		}
		break;
	case WALK_READLINK:
		same = p->link_target && e->link_target &&
		       strcmp(p->link_target, e->link_target) == 0;
		break;
	case WALK_ENTER:
		same = true; /* the directory itself; what it holds has origins of its own */
		break;
	case WALK_STAT_ONLY:
	default:
		/* never opened: the same inode, not changed since */
		same = p->ino == e->ino && ts_eq(p->ctime, e->ctime);
		e->origin_by_metadata = true;
		break;
	}
	e->origin = !same ? AB_ORIGIN_MODIFIED
		    : e->type == AB_ENTRY_FILE && w->o.origin_script &&
				    strcmp(e->path, w->o.origin_script) == 0
			    ? AB_ORIGIN_SCRIPT
			    : AB_ORIGIN_UNCHANGED;
}

/* walk-hash.c: what the walk hashes (the hash size cap and budget), and sha256s reused from
 * an earlier walk of the same tree (hashes_from). */
#include <stdlib.h>
#include <string.h>

#include "../../util/xalloc.h"
#include "walk-internal.h"

void
walk_sha256_hex(struct sha256_ctx *ctx, char out[65])
{
	static const char hex[] = "0123456789abcdef";
	uint8_t d[SHA256_DIGEST_SIZE];

	sha256_digest(ctx, sizeof(d), d);
	for (size_t i = 0; i < sizeof(d); i++) {
		out[2 * i] = hex[d[i] >> 4];
		out[2 * i + 1] = hex[d[i] & 0xf];
	}
	out[64] = '\0';
}

static int
reuse_cmp(const void *a, const void *b)
{
	const struct walk_reuse *x = a, *y = b;

	return x->ino < y->ino ? -1 : x->ino > y->ino;
}

void
walk_reuse_index(struct walk *w)
{
	const struct ab_manifest *hf = w->o.hashes_from;

	for (size_t i = 0; hf && i < hf->n; i++) {
		if (hf->entries[i].type != AB_ENTRY_FILE || !hf->entries[i].sha256[0])
			continue;
		if (w->n_reuse % 1024 == 0)
			w->reuse = xrealloc(w->reuse, (w->n_reuse + 1024) * sizeof(*w->reuse));
		w->reuse[w->n_reuse++] = (struct walk_reuse){ hf->entries[i].ino, i };
	}
	if (w->n_reuse)
		qsort(w->reuse, w->n_reuse, sizeof(*w->reuse), reuse_cmp);
}

/* The sha256 of an unchanged file from hashes_from: same inode, size and ctime. */
static bool
reuse_hash(struct walk *w, struct ab_entry *e)
{
	struct walk_reuse key = { .ino = e->ino }, *r;

	if (!w->n_reuse)
		return false;
	r = bsearch(&key, w->reuse, w->n_reuse, sizeof(*w->reuse), reuse_cmp);
	/* equal inodes are adjacent: find the first */
	while (r && r > w->reuse && r[-1].ino == e->ino)
		r--;
	for (; r && r < w->reuse + w->n_reuse && r->ino == e->ino; r++) {
		const struct ab_entry *o = &w->o.hashes_from->entries[r->idx];

		if (o->size == e->size && o->ctime.tv_sec == e->ctime.tv_sec &&
		    o->ctime.tv_nsec == e->ctime.tv_nsec) {
			memcpy(e->sha256, o->sha256, sizeof(e->sha256));
			w->m.hashes_reused++;
			return true;
		}
	}
	return false;
}

/* Whether to hash a listed regular file, charging the hash budget if so. A file that is not
 * hashed gets a flag saying why. The charge is the allocated blocks, or the apparent size
 * where that is bigger (holes are hashed as zeros); sparse files past WALK_SPARSE_HASH_MAX are
 * not hashed at all, so holes never cost more than that per file. */
bool
walk_hash_wanted(struct walk *w, struct ab_entry *e)
{
	uint64_t cost = e->blocks_bytes > e->size ? e->blocks_bytes : e->size;

	if (e->flags & AB_FLAG_HARDLINK || reuse_hash(w, e))
		return false;
	if (e->flags & AB_FLAG_SPARSE &&
	    (e->size > WALK_SPARSE_HASH_MAX || e->size > w->o.hash_max_bytes)) {
		if (walk_reason_informs(e->reason))
			e->reason = walk_reason_sparse_unhashed;
		return false;
	}
	if (e->size > w->o.hash_max_bytes) {
		walk_entry_mark(e, AB_FLAG_TOO_BIG, walk_reason_hash_too_big);
		return false;
	}
	if (cost > w->o.hash_budget_bytes - w->m.hashed_bytes) {
		walk_entry_mark(e, AB_FLAG_OVER_CAP, walk_reason_hash_budget);
		w->m.truncated_caps |= AB_CAP_HASH;
		return false;
	}
	w->m.hashed_bytes += cost;
	return true;
}

/* walk-json.c: the listing as JSON (manifest_to_json, manifest_summary_json), what it may
 * cost before it is built (the cost model that keeps list_bytes an upper bound), and the
 * names and texts of entry types, flags and caps. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../util/macro.h"
#include "../../util/xalloc.h"
#include "walk-internal.h"

#define WALK_REASON_MAX 100 /* bytes of the longest reason (the cost model's worst case) */

static const char *const type_names[AB_ENTRY_TYPE_COUNT] = {
	[AB_ENTRY_FILE] = "file",         [AB_ENTRY_DIR] = "dir",
	[AB_ENTRY_SYMLINK] = "symlink",   [AB_ENTRY_FIFO] = "fifo",
	[AB_ENTRY_SOCKET] = "socket",     [AB_ENTRY_CHARDEV] = "chardev",
	[AB_ENTRY_BLOCKDEV] = "blockdev", [AB_ENTRY_OTHER] = "other",
};

static const char *const flag_names[AB_FLAG_COUNT] = {
	"symlink", "special",    "setid",    "hardlink", "sparse",
	"too_big", "unreadable", "other_fs", "over_cap", "stripped",
};

/* per enum ab_walk_cap bit: the report's name, and the text of truncated_by */
static const char *const cap_names[AB_CAP_COUNT] = {
	"entries", "depth", "path_length", "manifest_size", "total_bytes", "time", "hash_budget",
};
const char *const walk_cap_texts[AB_CAP_COUNT] = {
	"the entry cap",         "the depth cap",      "the path length cap",
	"the manifest size cap", "the total size cap", "the walk time budget",
	"the hash budget",
};

char *
walk_escape_name(const char *raw)
{
	static const char hex[] = "0123456789abcdef";
	size_t len, j = 0;
	char *out;

	if (!raw)
		return NULL;
	len = strlen(raw);
	out = xmalloc(len * 4 + 1);
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char) raw[i];

		if (c >= 0x20 && c < 0x7f && c != '\\') {
			out[j++] = (char) c;
			continue;
		}
		out[j++] = '\\';
		out[j++] = 'x';
		out[j++] = hex[c >> 4];
		out[j++] = hex[c & 0xf];
	}
	out[j] = '\0';
	return out;
}

const char *
walk_cap_name(enum ab_walk_cap cap)
{
	for (size_t b = 0; b < AB_CAP_COUNT; b++)
		if ((unsigned) cap == 1U << b)
			return cap_names[b];
	return NULL;
}

char *
walk_caps_text(unsigned caps)
{
	char *out = xstrdup(""), *next;
	unsigned left = caps & ((1U << AB_CAP_COUNT) - 1);

	for (size_t b = 0; b < AB_CAP_COUNT; b++) {
		if (!(left & (1U << b)))
			continue;
		left &= ~(1U << b);
		next = xasprintf("%s%s%s", out,
				 !*out  ? ""
				 : left ? ", "
					: " and ",
				 walk_cap_texts[b]);
		free(out);
		out = next;
	}
	return out;
}

static void
obj_set(json_t *obj, const char *key, json_t *value)
{
	/* Every string here is printable ASCII, so only allocation can fail. */
	if (!value || json_object_set_new(obj, key, value) < 0)
		abort();
}

/* Bytes of the JSON string a raw name becomes: walk_escape_name() turns every byte but
 * printable ASCII other than '\' into \xNN, and jansson then writes that '\' as "\\" and a '"'
 * as "\"". */
static uint64_t
raw_str_cost(const char *raw)
{
	uint64_t n = 2;

	for (const unsigned char *c = (const unsigned char *) raw; *c; c++)
		n += *c >= 0x20 && *c < 0x7f && *c != '\\' ? 1 + (*c == '"') : 5;
	return n;
}

/* The same for a static ASCII text (a reason). */
static uint64_t
text_cost(const char *s)
{
	uint64_t n = 2;

	for (; *s; s++)
		n += 1 + (*s == '"' || *s == '\\');
	return n;
}

static uint64_t
digits(uint64_t v)
{
	uint64_t n = 1;

	while (v >= 10) {
		v /= 10;
		n++;
	}
	return n;
}

/* "\n<indent>\"key\": value," */
static uint64_t
key_cost(const char *key, uint64_t value)
{
	return 1 + WALK_JSON_KEY_INDENT + 2 + strlen(key) + 2 + value + 1;
}

/* An upper bound of the bytes e takes in manifest_to_json()'s JSON_INDENT(2) dump, nested as
 * deep as `collected.files` in the report. worst: as if every flag, a sha256, the longest
 * reason and 20-digit sizes were still to come (what an entry may grow to once recorded). */
uint64_t
walk_entry_json_cost(const struct ab_entry *e, bool worst)
{
	uint64_t c = 2 * (1 + WALK_JSON_ITEM_INDENT + 1) + 1, fl = 0;

	c += key_cost("path", raw_str_cost(e->path ? e->path : ""));
	c += key_cost("type",
		      2 + (worst || e->type >= AB_ENTRY_TYPE_COUNT ? 8 /* "blockdev" */
								   : strlen(type_names[e->type])));
	c += key_cost("size", worst ? 20 : digits(e->size));
	c += key_cost("blocks_bytes", worst ? 20 : digits(e->blocks_bytes));
	c += key_cost("mode", 6);
	if (worst || e->sha256[0])
		c += key_cost("sha256", 66);
	if (e->link_target)
		c += key_cost("link_target", raw_str_cost(e->link_target));
	for (size_t b = 0; b < AB_FLAG_COUNT; b++)
		if (worst || e->flags & (1U << b))
			fl += 1 + WALK_JSON_FLAG_INDENT + 2 + strlen(flag_names[b]) + 1;
	if (fl)
		c += key_cost("flags", 1 + fl + 1 + WALK_JSON_KEY_INDENT + 1);
	c += key_cost("collected", 5);
	if (e->origin != AB_ORIGIN_NONE) {
		/* "unchanged" is the longest name; origin_by is "metadata" or absent */
		c += key_cost("origin", 2 + (worst || !walk_origin_name(e->origin)
						     ? 9
						     : strlen(walk_origin_name(e->origin))));
		if (worst || e->origin_by_metadata)
			c += key_cost("origin_by", 2 + 8);
	}
	if (worst)
		c += key_cost("reason", 2 + WALK_REASON_MAX);
	else if (e->reason)
		c += key_cost("reason", text_cost(e->reason));
	return c;
}

json_t *
manifest_to_json(const struct ab_manifest *m)
{
	json_t *arr = json_array();

	if (!arr)
		abort();
	for (size_t i = 0; m && i < m->n; i++) {
		const struct ab_entry *e = &m->entries[i];
		cleanup_free char *path = walk_escape_name(e->path ? e->path : "");
		json_t *o = json_object();
		char mode[16];

		if (!o)
			abort();
		(void) snprintf(mode, sizeof(mode), "%04o", (unsigned) (e->mode & 07777));
		obj_set(o, "path", json_string(path));
		obj_set(o, "type",
			json_string(e->type < AB_ENTRY_TYPE_COUNT ? type_names[e->type] : "other"));
		obj_set(o, "size", json_integer((json_int_t) e->size));
		obj_set(o, "blocks_bytes", json_integer((json_int_t) e->blocks_bytes));
		obj_set(o, "mode", json_string(mode));
		if (e->sha256[0])
			obj_set(o, "sha256", json_string(e->sha256));
		if (e->link_target) {
			cleanup_free char *t = walk_escape_name(e->link_target);

			obj_set(o, "link_target", json_string(t));
		}
		if (e->flags) {
			json_t *flags = json_array();

			if (!flags)
				abort();
			for (size_t b = 0; b < AB_FLAG_COUNT; b++)
				if (e->flags & (1U << b) &&
				    json_array_append_new(flags, json_string(flag_names[b])) < 0)
					abort();
			obj_set(o, "flags", flags);
		}
		obj_set(o, "collected", json_boolean(e->collected));
		if (walk_origin_name(e->origin))
			obj_set(o, "origin", json_string(walk_origin_name(e->origin)));
		if (e->origin != AB_ORIGIN_NONE && e->origin_by_metadata)
			obj_set(o, "origin_by", json_string("metadata"));
		if (e->reason)
			obj_set(o, "reason", json_string(e->reason));
		if (json_array_append_new(arr, o) < 0)
			abort();
	}
	return arr;
}

json_t *
manifest_summary_json(const struct ab_manifest *m)
{
	json_t *o = json_object(), *by = json_array();

	if (!o || !by)
		abort();
	for (size_t b = 0; b < AB_CAP_COUNT; b++)
		if (m->truncated_caps & (1U << b) &&
		    json_array_append_new(by, json_string(cap_names[b])) < 0)
			abort();
	obj_set(o, "listed", json_integer((json_int_t) m->n));
	obj_set(o, "entries", json_integer((json_int_t) m->total_entries));
	obj_set(o, "unlisted", json_integer((json_int_t) m->unlisted));
	obj_set(o, "truncated", json_boolean(m->truncated));
	obj_set(o, "truncated_by", by);
	obj_set(o, "list_bytes", json_integer((json_int_t) m->list_bytes));
	obj_set(o, "hashed_bytes", json_integer((json_int_t) m->hashed_bytes));
	obj_set(o, "hashes_reused", json_integer((json_int_t) m->hashes_reused));
	obj_set(o, "unhashed", json_integer((json_int_t) m->unhashed));
	obj_set(o, "stripped", json_integer((json_int_t) m->stripped));
	obj_set(o, "strip_failed", json_integer((json_int_t) m->strip_failed));
	obj_set(o, "walk_ms", json_integer((json_int_t) m->walk_ms));
	return o;
}

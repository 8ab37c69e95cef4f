#include "units.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* A number as people write it, "<digits>[.<digits>]", kept in integers (no locale-dependent
 * strtod): the fraction keeps up to 9 digits. */
struct number {
	uint64_t whole, frac, frac_scale;
};

/* Reads the number s starts with; *ret_suffix: what follows it, spaces skipped. Returns 0, or
 * -EINVAL (no digits) / -ERANGE (overflow). */
static int
parse_number(const char *s, struct number *n, const char **ret_suffix)
{
	const char *p = s;
	int digits = 0;

	*n = (struct number){ .frac_scale = 1 };
	if (!s || !*s)
		return -EINVAL;
	while (isdigit((unsigned char) *p)) {
		if (n->whole > (UINT64_MAX - 9) / 10)
			return -ERANGE;
		n->whole = n->whole * 10 + (uint64_t) (*p - '0');
		p++;
		digits++;
	}
	if (*p == '.') {
		p++;
		while (isdigit((unsigned char) *p)) {
			if (n->frac_scale < 1000000000ULL) {
				n->frac = n->frac * 10 + (uint64_t) (*p - '0');
				n->frac_scale *= 10;
			}
			p++;
			digits++;
		}
	}
	if (digits == 0)
		return -EINVAL;
	while (*p == ' ')
		p++;
	*ret_suffix = p;
	return 0;
}

/* *ret = n * mult, or -ERANGE. */
static int
scale(const struct number *n, uint64_t mult, uint64_t *ret)
{
	unsigned __int128 v = (unsigned __int128) n->whole * mult +
			      (unsigned __int128) n->frac * mult / n->frac_scale;

	if (v > UINT64_MAX)
		return -ERANGE;
	*ret = (uint64_t) v;
	return 0;
}

/* A suffix, and what one of it is worth in the unit the parser returns. */
struct unit {
	const char *suffix;
	uint64_t mult;
};

/* A number, then one of units' suffixes (any case): *ret = number * mult. */
static int
parse_with_units(const char *s, const struct unit *units, uint64_t *ret)
{
	struct number n;
	const char *suffix;
	int r = parse_number(s, &n, &suffix);

	if (r < 0)
		return r;
	for (const struct unit *u = units; u->suffix; u++)
		if (strcasecmp(suffix, u->suffix) == 0)
			return scale(&n, u->mult, ret);
	return -EINVAL;
}

static const struct unit duration_ms_units[] = {
	{ "", 1000 },       { "s", 1000 },        { "sec", 1000 },      { "ms", 1 },
	{ "m", 60 * 1000 }, { "min", 60 * 1000 }, { "h", 3600 * 1000 }, { "d", 24 * 3600 * 1000 },
	{ NULL, 0 },
};

static const struct unit cpus_milli_units[] = {
	{ "", 1000 },
	{ NULL, 0 },
};

static const struct unit count_units[] = {
	{ "", 1 },
	{ "k", 1000 },
	{ "m", 1000000 },
	{ NULL, 0 },
};

/* What one of a size suffix is worth in bytes: none or "b" is 1; k, m, g and t are powers of
 * 1024, alone or followed by "b" or "ib" ("k", "kb", "kib"); any case. 0: not a size suffix. */
static uint64_t
size_mult(const char *suffix)
{
	static const char multiples[] = "kmgt";
	const char *m = *suffix ? strchr(multiples, tolower((unsigned char) *suffix)) : NULL;
	uint64_t mult = 1;

	if (m) {
		mult <<= 10 * (unsigned) (m - multiples + 1);
		suffix++;
		if (strcasecmp(suffix, "ib") == 0)
			return mult;
	}
	return *suffix == '\0' || strcasecmp(suffix, "b") == 0 ? mult : 0;
}

int
units_parse_size(const char *s, uint64_t *ret_bytes)
{
	struct number n;
	const char *suffix;
	uint64_t mult;
	int r = parse_number(s, &n, &suffix);

	if (r < 0)
		return r;
	mult = size_mult(suffix);
	return mult ? scale(&n, mult, ret_bytes) : -EINVAL;
}

int
units_parse_duration_ms(const char *s, uint64_t *ret_ms)
{
	return parse_with_units(s, duration_ms_units, ret_ms);
}

int
units_parse_cpus_milli(const char *s, uint64_t *ret_milli)
{
	return parse_with_units(s, cpus_milli_units, ret_milli);
}

int
units_parse_count(const char *s, uint64_t *ret)
{
	/* counts are whole: reject fractions that would be silently truncated */
	if (s && strchr(s, '.'))
		return -EINVAL;
	return parse_with_units(s, count_units, ret);
}

char *
units_format_size(uint64_t bytes, char *buf, unsigned size)
{
	static const char suffix[] = "KMGT";
	int i = -1;
	uint64_t v = bytes;

	while (v >= 1024 && v % 1024 == 0 && i < 3) {
		v /= 1024;
		i++;
	}
	if (i < 0)
		snprintf(buf, size, "%llu", (unsigned long long) v);
	else
		snprintf(buf, size, "%llu%c", (unsigned long long) v, suffix[i]);
	return buf;
}

#include "units.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* Parses "<number>[.<fraction>]" then a suffix looked up in table; value = number * mult.
 * Done with integers (no locale-dependent strtod): the fraction keeps up to 9 digits. */
struct unit {
	const char *suffix;
	uint64_t mult;
};

static int
parse_with_units(const char *s, const struct unit *units, uint64_t divisor, uint64_t *ret)
{
	uint64_t whole = 0, frac = 0, frac_scale = 1;
	const char *p = s;
	int digits = 0;

	if (!s || !*s)
		return -EINVAL;
	while (isdigit((unsigned char) *p)) {
		if (whole > (UINT64_MAX - 9) / 10)
			return -ERANGE;
		whole = whole * 10 + (uint64_t) (*p - '0');
		p++;
		digits++;
	}
	if (*p == '.') {
		p++;
		while (isdigit((unsigned char) *p)) {
			if (frac_scale < 1000000000ULL) {
				frac = frac * 10 + (uint64_t) (*p - '0');
				frac_scale *= 10;
			}
			p++;
			digits++;
		}
	}
	if (digits == 0)
		return -EINVAL;
	while (*p == ' ')
		p++;
	for (const struct unit *u = units; u->suffix; u++) {
		unsigned __int128 v;

		if (strcasecmp(p, u->suffix) != 0)
			continue;
		v = (unsigned __int128) whole * u->mult +
		    (unsigned __int128) frac * u->mult / frac_scale;
		v /= divisor;
		if (v > UINT64_MAX)
			return -ERANGE;
		*ret = (uint64_t) v;
		return 0;
	}
	return -EINVAL;
}

int
units_parse_size(const char *s, uint64_t *ret_bytes)
{
	static const struct unit units[] = {
		{ "", 1 },
		{ "b", 1 },
		{ "k", 1ULL << 10 },
		{ "kb", 1ULL << 10 },
		{ "kib", 1ULL << 10 },
		{ "m", 1ULL << 20 },
		{ "mb", 1ULL << 20 },
		{ "mib", 1ULL << 20 },
		{ "g", 1ULL << 30 },
		{ "gb", 1ULL << 30 },
		{ "gib", 1ULL << 30 },
		{ "t", 1ULL << 40 },
		{ "tb", 1ULL << 40 },
		{ "tib", 1ULL << 40 },
		{ NULL, 0 },
	};

	return parse_with_units(s, units, 1, ret_bytes);
}

int
units_parse_duration_ms(const char *s, uint64_t *ret_ms)
{
	static const struct unit units[] = {
		{ "", 1000 },         { "s", 1000 },
		{ "sec", 1000 },      { "ms", 1 },
		{ "m", 60 * 1000 },   { "min", 60 * 1000 },
		{ "h", 3600 * 1000 }, { "d", 24 * 3600 * 1000 },
		{ NULL, 0 },
	};

	return parse_with_units(s, units, 1, ret_ms);
}

int
units_parse_cpus_milli(const char *s, uint64_t *ret_milli)
{
	static const struct unit units[] = {
		{ "", 1000 },
		{ NULL, 0 },
	};

	return parse_with_units(s, units, 1, ret_milli);
}

int
units_parse_count(const char *s, uint64_t *ret)
{
	static const struct unit units[] = {
		{ "", 1 },
		{ "k", 1000 },
		{ "m", 1000000 },
		{ NULL, 0 },
	};
	uint64_t v;
	int r;

	/* counts are whole: reject fractions that would be silently truncated */
	if (s && strchr(s, '.'))
		return -EINVAL;
	r = parse_with_units(s, units, 1, &v);
	if (r < 0)
		return r;
	*ret = v;
	return 0;
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

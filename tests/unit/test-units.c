/* Unit tests for units.c: limits parse as people write them; nonsense is rejected. */
#include <errno.h>

#include "src/spec/units.h"
#include "tests/tap.h"

static void
size_ok(const char *s, uint64_t want)
{
	uint64_t v = 0;
	int r = units_parse_size(s, &v);

	TAP_OK(r == 0 && v == want, "size '%s' = %llu (got r=%d v=%llu)", s,
	       (unsigned long long) want, r, (unsigned long long) v);
}

static void
size_bad(const char *s)
{
	uint64_t v = 0;

	TAP_OK(units_parse_size(s, &v) < 0, "size '%s' rejected", s);
}

static void
dur_ok(const char *s, uint64_t want)
{
	uint64_t v = 0;
	int r = units_parse_duration_ms(s, &v);

	TAP_OK(r == 0 && v == want, "duration '%s' = %llu ms (got %llu)", s,
	       (unsigned long long) want, (unsigned long long) v);
}

int
main(void)
{
	uint64_t v;
	char buf[32];

	size_ok("4096", 4096);
	size_ok("512M", 512ULL << 20);
	size_ok("512m", 512ULL << 20);
	size_ok("2G", 2ULL << 30);
	size_ok("1.5G", 3ULL << 29);
	size_ok("1.5GiB", 3ULL << 29);
	size_ok("100k", 102400);
	size_ok("1T", 1ULL << 40);
	size_ok("10MB", 10ULL << 20);
	size_bad("");
	size_bad("abc");
	size_bad("-1");
	size_bad("12Q");
	size_bad("1.2.3");
	size_bad("M");
	size_bad("99999999999999999999");
	size_bad("20000000T"); /* overflows 64 bits */
	/* every spelling of a binary multiple: alone, with "b", with "ib", in any case */
	size_ok("3b", 3);
	size_ok("2 KiB", 2048);
	size_ok("1kb", 1024);
	size_ok("1mib", 1ULL << 20);
	size_ok("1gB", 1ULL << 30);
	size_ok("1TIB", 1ULL << 40);
	size_bad("1ib");
	size_bad("1ki");
	size_bad("1kibb");
	size_bad("1bb");
	size_bad("1pb");

	dur_ok("90s", 90000);
	dur_ok("60", 60000);
	dur_ok("1.5m", 90000);
	dur_ok("500ms", 500);
	dur_ok("2h", 7200000);
	dur_ok("7d", 604800000);
	dur_ok("0.25", 250);
	TAP_OK(units_parse_duration_ms("5 parsecs", &v) < 0, "duration nonsense rejected");
	TAP_OK(units_parse_duration_ms("-5s", &v) < 0, "negative duration rejected");

	TAP_OK(units_parse_cpus_milli("1.5", &v) == 0 && v == 1500, "1.5 cores = 1500 milli");
	TAP_OK(units_parse_cpus_milli("2", &v) == 0 && v == 2000, "2 cores");
	TAP_OK(units_parse_cpus_milli("0.25", &v) == 0 && v == 250, "0.25 cores");
	TAP_OK(units_parse_cpus_milli("two", &v) < 0, "cores nonsense rejected");
	TAP_OK(units_parse_cpus_milli("1G", &v) < 0, "cores with a size suffix rejected");

	TAP_OK(units_parse_count("256", &v) == 0 && v == 256, "count 256");
	TAP_OK(units_parse_count("16k", &v) == 0 && v == 16000, "count 16k");
	TAP_OK(units_parse_count("1.5", &v) < 0, "fractional count rejected");
	TAP_OK(units_parse_count("x", &v) < 0, "count nonsense rejected");

	TAP_STREQ(units_format_size(512ULL << 20, buf, sizeof(buf)), "512M", "format 512M");
	TAP_STREQ(units_format_size(1ULL << 30, buf, sizeof(buf)), "1G", "format 1G");
	TAP_STREQ(units_format_size(1536 * 1024, buf, sizeof(buf)), "1536K", "format 1536K");
	TAP_STREQ(units_format_size(123, buf, sizeof(buf)), "123", "format 123");
	return tap_done();
}

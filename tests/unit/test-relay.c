/* Unit tests for relay.c: the terminal sanitiser, whole and split across reads. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "src/relay.h"
#include "src/util/xalloc.h"
#include "tests/tap.h"

/* Feeds the pieces of in (cut at the offsets in cuts, ascending, then the end) to one
 * stream and returns everything that came out, NUL-terminated, the stream finished. */
static char *
san_split(const char *in, size_t len, const size_t *cuts, size_t ncuts, size_t *ret_len)
{
	struct ab_ttysan ts = { 0 };
	char *out = xmalloc(AB_TTYSAN_ROOM(len) + 16);
	size_t at = 0, o = 0;

	for (size_t i = 0; i <= ncuts; i++) {
		size_t end = i < ncuts ? cuts[i] : len;
		/* an exact-size buffer per piece: the room macro must hold (ASan builds) */
		char *piece = xmalloc(AB_TTYSAN_ROOM(end - at));
		size_t n = ttysan_feed(&ts, in + at, end - at, piece);

		memcpy(out + o, piece, n);
		o += n;
		free(piece);
		at = end;
	}
	o += ttysan_finish(&ts, out + o);
	out[o] = '\0';
	*ret_len = o;
	return out;
}

static char *
san(const char *in, size_t len, size_t *ret_len)
{
	return san_split(in, len, NULL, 0, ret_len);
}

/* Feeds in one byte at a time. */
static char *
san_bytes(const char *in, size_t len, size_t *ret_len)
{
	size_t *cuts = xmalloc((len + 1) * sizeof(*cuts));
	char *out;

	for (size_t i = 0; i < len; i++)
		cuts[i] = i;
	out = san_split(in, len, cuts, len, ret_len);
	free(cuts);
	return out;
}

/* What a terminal may safely receive: well-formed UTF-8 with no C0 control but \n and \t,
 * no DEL and no C1 control. */
static bool
tty_safe(const unsigned char *s, size_t len)
{
	size_t i = 0;

	while (i < len) {
		unsigned char c = s[i];
		uint32_t cp;
		size_t n;

		if (c < 0x80) {
			if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f)
				return false;
			i++;
			continue;
		}
		if ((c & 0xe0) == 0xc0)
			n = 2, cp = c & 0x1f;
		else if ((c & 0xf0) == 0xe0)
			n = 3, cp = c & 0x0f;
		else if ((c & 0xf8) == 0xf0)
			n = 4, cp = c & 0x07;
		else
			return false;
		if (i + n > len)
			return false;
		for (size_t k = 1; k < n; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return false;
			cp = (cp << 6) | (s[i + k] & 0x3f);
		}
		if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
		    cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff) || (cp >= 0x80 && cp <= 0x9f))
			return false;
		i += n;
	}
	return true;
}

static void
expect(const char *in, size_t len, const char *want, const char *what)
{
	size_t l1, l2;
	char *whole = san(in, len, &l1);
	char *bytes = san_bytes(in, len, &l2);

	TAP_STREQ(whole, want, "%s", what);
	TAP_STREQ(bytes, want, "%s, one byte per read", what);
	free(whole);
	free(bytes);
}

#define EXPECT(in, want, what) expect(in, sizeof(in) - 1, want, what)

int
main(void)
{
	size_t l;
	char *o;

	EXPECT("plain text\n\tindented\n", "plain text\n\tindented\n", "text, \\n and \\t pass");
	EXPECT("a\x1b[2Jb\x07\r\x7f", "a\\x1b[2Jb\\x07\\x0d\\x7f", "C0 controls and DEL escaped");
	EXPECT("x\xc2\x9b"
	       "31m",
	       "x\\x9b31m", "C1 CSI (0xc2 0x9b) escaped as \\x9b");
	EXPECT("\xc2\x80\xc2\x9f", "\\x80\\x9f", "the C1 range ends are escaped");
	EXPECT("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xc2\xa0|",
	       "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xc2\xa0|",
	       "well-formed 2, 3 and 4-byte UTF-8 (and U+00A0) pass unchanged");
	EXPECT("\x9b"
	       "31m",
	       "\\x9b31m", "a raw 0x9b (CSI on an 8-bit terminal) is escaped");
	EXPECT("\xc2"
	       "A",
	       "\\xc2A", "a lead byte cut short by ASCII is escaped, the ASCII kept");
	EXPECT("\xc2\x1b", "\\xc2\\x1b", "a lead byte cut short by ESC: both escaped");
	EXPECT("\xc2\xc2\x9b", "\\xc2\\x9b", "a lead byte cut short by another lead");
	EXPECT("\xc0\x9b\xc1\xbf", "\\xc0\\x9b\\xc1\\xbf", "overlong 2-byte forms escaped");
	EXPECT("\xe0\x80\x9b", "\\xe0\\x80\\x9b", "overlong 3-byte C1 escaped");
	EXPECT("\xed\xa0\x80", "\\xed\\xa0\\x80", "a UTF-16 surrogate escaped");
	EXPECT("\xf4\x90\x80\x80\xff", "\\xf4\\x90\\x80\\x80\\xff",
	       "past U+10FFFF and 0xff escaped");

	/* The bug: 0xc2 and 0x9b in two reads each passed the per-read sanitiser. */
	{
		struct ab_ttysan ts = { 0 };
		char a[AB_TTYSAN_ROOM(1)], b[AB_TTYSAN_ROOM(4)];
		size_t la = ttysan_feed(&ts, "\xc2", 1, a), lb;

		TAP_OK(la == 0 && ts.npend == 1, "split C1: the lead byte 0xc2 is held (%zu out)",
		       la);
		lb = ttysan_feed(&ts,
				 "\x9b"
				 "2J",
				 3, b);
		b[lb] = '\0';
		TAP_STREQ(b, "\\x9b2J", "split C1: the next read completes it and it is escaped");
	}
	{
		struct ab_ttysan ts = { 0 };
		char a[AB_TTYSAN_ROOM(2)], b[16];
		size_t la = ttysan_feed(&ts, "\xe2\x82", 2, a);
		size_t lb = ttysan_finish(&ts, b);

		b[lb] = '\0';
		TAP_OK(la == 0, "a stream ending inside a sequence: nothing out before the end");
		TAP_STREQ(b, "\\xe2\\x82", "...and the held bytes come out escaped at the end");
		TAP_OK(ttysan_finish(&ts, b) == 0, "...once");
	}
	{
		/* held state is per stream: two streams do not complete each other's bytes */
		struct ab_ttysan out = { 0 }, err = { 0 };
		char a[AB_TTYSAN_ROOM(1)], b[AB_TTYSAN_ROOM(1)];

		(void) ttysan_feed(&out, "\xc2", 1, a);
		l = ttysan_feed(&err, "\x9b", 1, b);
		b[l] = '\0';
		TAP_STREQ(b, "\\x9b",
			  "a continuation on another stream does not complete a held lead");
	}

	/* Every pair of bytes, whole and split between two reads: the terminal gets only safe
	 * bytes, and the split changes nothing. */
	{
		unsigned bad = 0, differ = 0;

		for (unsigned a = 0; a < 256; a++) {
			for (unsigned b = 0; b < 256; b++) {
				char in[2] = { (char) a, (char) b };
				size_t cut = 1, lw, ls;
				char *w = san(in, 2, &lw);
				char *s = san_split(in, 2, &cut, 1, &ls);

				bad += !tty_safe((unsigned char *) w, lw);
				differ += lw != ls || memcmp(w, s, lw) != 0;
				free(w);
				free(s);
			}
		}
		TAP_OK(bad == 0, "all 65536 byte pairs: the output is safe for a terminal (%u not)",
		       bad);
		TAP_OK(differ == 0,
		       "all 65536 byte pairs: split between two reads, the same output "
		       "(%u differ)",
		       differ);
	}
	/* Random bytes biased towards UTF-8 leads and C1, cut at random places. */
	{
		unsigned bad = 0, differ = 0;
		static const unsigned char pick[] = { 0xc2, 0x9b, 0x80, 0x9f, 0xe2, 0x82,
						      0xac, 0xf0, 0x9f, 0x1b, 'a',  '\n' };

		srand(13);
		for (int round = 0; round < 2000; round++) {
			unsigned char in[64];
			size_t cuts[8], nc = (size_t) (rand() % 8), lw, ls;

			for (size_t i = 0; i < sizeof(in); i++)
				in[i] = rand() % 3 ? pick[rand() % sizeof(pick)]
						   : (unsigned char) rand();
			for (size_t i = 0; i < nc; i++)
				cuts[i] = (size_t) rand() % sizeof(in);
			for (size_t i = 1; i < nc; i++) /* insertion sort: ascending cuts */
				for (size_t k = i; k > 0 && cuts[k - 1] > cuts[k]; k--) {
					size_t t = cuts[k];

					cuts[k] = cuts[k - 1];
					cuts[k - 1] = t;
				}
			o = san((char *) in, sizeof(in), &lw);
			{
				char *s = san_split((char *) in, sizeof(in), cuts, nc, &ls);

				bad += !tty_safe((unsigned char *) s, ls);
				differ += lw != ls || memcmp(o, s, lw) != 0;
				free(s);
			}
			free(o);
		}
		TAP_OK(bad == 0, "2000 random inputs cut at random: safe for a terminal (%u not)",
		       bad);
		TAP_OK(differ == 0, "2000 random inputs: the cuts change nothing (%u differ)",
		       differ);
	}
	return tap_done();
}

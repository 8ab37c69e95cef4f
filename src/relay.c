/* relay.c: the script's output on its way to agentbox's own stdout and stderr. */
#include "relay.h"

#include <string.h>

static char *
put_esc(char *q, unsigned char c)
{
	static const char hex[] = "0123456789abcdef";

	*q++ = '\\';
	*q++ = 'x';
	*q++ = hex[c >> 4];
	*q++ = hex[c & 0xf];
	return q;
}

/* The second byte a lead byte allows (RFC 3629, section 4): this excludes overlong forms,
 * UTF-16 surrogates and code points past U+10FFFF. */
static bool
second_ok(unsigned char lead, unsigned char c)
{
	switch (lead) {
	case 0xe0:
		return c >= 0xa0 && c <= 0xbf;
	case 0xed:
		return c >= 0x80 && c <= 0x9f;
	case 0xf0:
		return c >= 0x90 && c <= 0xbf;
	case 0xf4:
		return c >= 0x80 && c <= 0x8f;
	default:
		return c >= 0x80 && c <= 0xbf;
	}
}

size_t
ttysan_feed(struct ab_ttysan *ts, const char *in, size_t len, char *out)
{
	char *q = out;

	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char) in[i];

		if (ts->npend > 0) {
			bool cont = ts->npend == 1 ? second_ok(ts->pend[0], c) : (c & 0xc0) == 0x80;

			if (cont) {
				ts->pend[ts->npend++] = c;
				if (ts->npend < ts->need)
					continue;
				if (ts->pend[0] == 0xc2 && ts->pend[1] <= 0x9f) {
					q = put_esc(q, ts->pend[1]); /* C1 control */
				} else {
					memcpy(q, ts->pend, ts->npend);
					q += ts->npend;
				}
				ts->npend = 0;
				continue;
			}
			/* cut short: the held bytes are not UTF-8; c starts afresh */
			q += ttysan_finish(ts, q);
		}
		if (c < 0x80) {
			if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f)
				q = put_esc(q, c);
			else
				*q++ = (char) c;
		} else if (c >= 0xc2 && c <= 0xf4) {
			ts->pend[0] = c;
			ts->npend = 1;
			ts->need = c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
		} else {
			q = put_esc(q, c);
		}
	}
	return (size_t) (q - out);
}

size_t
ttysan_finish(struct ab_ttysan *ts, char *out)
{
	char *q = out;

	for (unsigned i = 0; i < ts->npend; i++)
		q = put_esc(q, ts->pend[i]);
	ts->npend = 0;
	return (size_t) (q - out);
}

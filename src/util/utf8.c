/* utf8.c: text as a report holds it (utf8.h). */
#include "utf8.h"

#include <stdint.h>
#include <string.h>

#include "xalloc.h"

char *
utf8_sanitize(const char *buf, size_t len, size_t *ret_len, bool *lossy)
{
	const unsigned char *s = (const unsigned char *) buf;
	char *out = xmalloc(len * 3 + 1), *q = out;
	size_t i = 0;

	*lossy = false;
	while (i < len) {
		unsigned char c = s[i];
		size_t n = 0;
		uint32_t cp = 0;

		if (c < 0x80)
			n = 1, cp = c;
		else if ((c & 0xE0) == 0xC0)
			n = 2, cp = c & 0x1F;
		else if ((c & 0xF0) == 0xE0)
			n = 3, cp = c & 0x0F;
		else if ((c & 0xF8) == 0xF0)
			n = 4, cp = c & 0x07;
		if (n == 0 || i + n > len)
			goto bad;
		for (size_t k = 1; k < n; k++) {
			if ((s[i + k] & 0xC0) != 0x80)
				goto bad;
			cp = (cp << 6) | (s[i + k] & 0x3F);
		}
		/* overlongs, surrogates, out of range, NUL (jansson rejects embedded NUL) */
		if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
		    cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF) || cp == 0)
			goto bad;
		memcpy(q, s + i, n);
		q += n;
		i += n;
		continue;
	bad:
		memcpy(q, "\xEF\xBF\xBD", 3);
		q += 3;
		i++;
		*lossy = true;
	}
	*q = '\0';
	*ret_len = (size_t) (q - out);
	return out;
}

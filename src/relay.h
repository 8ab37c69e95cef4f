/* relay.h: the script's output on its way to agentbox's own stdout and stderr.
 *
 * The terminal sanitiser (pure): when a destination is a terminal, control sequences are
 * turned into visible \xNN text (T29). It decodes UTF-8 as a stream: a sequence split across
 * two reads is held until the next read completes it, so a C1 control (U+0080-U+009F, bytes
 * 0xc2 0x80-0x9f) cannot slip through by arriving in two pieces. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What the sanitiser holds between two reads of one stream: the start of a UTF-8 sequence
 * whose end has not arrived yet. Zero it to start a stream. */
struct ab_ttysan {
	unsigned char pend[4];
	unsigned char npend; /* bytes held, 0-3 */
	unsigned char need;  /* the held sequence's full length, 2-4 */
};

/* Room ttysan_feed() may need for len input bytes: each byte becomes at most 4, and up to 3
 * held bytes of the previous read come out first. */
#define AB_TTYSAN_ROOM(len) (4 * ((size_t) (len) + 3))

/* Sanitises len bytes of a stream into out (AB_TTYSAN_ROOM(len) bytes) and returns the
 * length written. Escaped as \xNN: C0 controls but \n and \t, DEL, C1 controls (written as
 * their code, e.g. \x9b), and every byte that is not part of well-formed UTF-8 (stray
 * continuation bytes, overlong leads 0xc0/0xc1, 0xf5-0xff, sequences cut short): an 8-bit
 * terminal would read a raw 0x9b as CSI. A sequence that the input ends inside is held in ts
 * and decided by the next call. */
size_t ttysan_feed(struct ab_ttysan *ts, const char *in, size_t len, char *out);

/* End of the stream: the held bytes (an incomplete sequence) come out escaped. out: at least
 * 12 bytes. Returns the length written. */
size_t ttysan_finish(struct ab_ttysan *ts, char *out);

/* progress.h: the live status line of a long run on a terminal ("agentbox: running 12s, cpu
 * 11.8s, peak memory 45.1 MiB"). Only when asked for (spec "progress") and the caller's stderr
 * is a terminal; drawn on stderr through a non-blocking description of our own (a stopped
 * terminal never stalls the supervisor), erased before any of the script's output is relayed,
 * so the script's own stdout and stderr stay exactly what it wrote. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

struct ab_cg;

struct ab_progress {
	int fd;       /* -1: off */
	bool shown;   /* a line is on the terminal now */
	int64_t t0;   /* run start, ms (monotonic) */
	int64_t next; /* when to draw next */
};

#define AB_PROGRESS_AFTER_MS 3000 /* runs shorter than this never show it */
#define AB_PROGRESS_EVERY_MS 1000

void progress_init(struct ab_progress *p, bool want, int64_t t0);
/* The time of the next redraw (for the poll timeout), INT64_MAX when off. */
int64_t progress_next(const struct ab_progress *p);
/* Draws the line if it is due. cg may be NULL (then only the elapsed time). */
void progress_tick(struct ab_progress *p, int64_t now, struct ab_cg *cg);
/* Erases the line if one is shown. */
void progress_clear(struct ab_progress *p);
void progress_done(struct ab_progress *p);

#include "progress.h"

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include "../util/fdutil.h"
#include "cgroup/cgroup.h"

void
progress_init(struct ab_progress *p, bool want, int64_t t0)
{
	p->fd = -1;
	p->shown = false;
	p->t0 = t0;
	p->next = t0 + AB_PROGRESS_AFTER_MS;
	if (!want || !isatty(STDERR_FILENO))
		return;
	/* our own description: O_NONBLOCK on it leaves the caller's terminal fd as it was */
	p->fd = open("/proc/self/fd/2", O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
}

int64_t
progress_next(const struct ab_progress *p)
{
	return p->fd < 0 ? INT64_MAX : p->next;
}

void
progress_tick(struct ab_progress *p, int64_t now, struct ab_cg *cg)
{
	struct ab_cg_usage u = { 0 };
	char line[160];
	int64_t el = now - p->t0;
	int n;

	if (p->fd < 0 || now < p->next)
		return;
	p->next = now + AB_PROGRESS_EVERY_MS;
	n = snprintf(line, sizeof(line), "\r\033[Kagentbox: running %llds",
		     (long long) (el / 1000));
	if (cg && cg_read_usage(cg, &u) == 0 && u.valid) {
		n += snprintf(line + n, sizeof(line) - (size_t) n, ", cpu %.1fs",
			      (double) u.cpu_usec / 1e6);
		if (u.memory_peak_bytes)
			n += snprintf(line + n, sizeof(line) - (size_t) n, ", peak memory %.1f MiB",
				      (double) u.memory_peak_bytes / (1 << 20));
	}
	n += snprintf(line + n, sizeof(line) - (size_t) n, " (^C stops it)");
	/* all or nothing: a partial line is erased by the next \r\033[K anyway */
	if (write(p->fd, line, (size_t) n) > 0)
		p->shown = true;
}

void
progress_clear(struct ab_progress *p)
{
	if (p->fd < 0 || !p->shown)
		return;
	if (write(p->fd, "\r\033[K", 4) == 4)
		p->shown = false;
}

void
progress_done(struct ab_progress *p)
{
	progress_clear(p);
	if (p->fd >= 0)
		(void) close(p->fd);
	p->fd = -1;
}

#include "proc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fdutil.h"

int
proc_parse_starttime(const char *stat, uint64_t *ret)
{
	const char *p = strrchr(stat, ')');
	char *end;
	unsigned long long v;

	if (!p)
		return -EINVAL;
	p++;
	/* after ')': field 3 (state) is the first; starttime is field 22 */
	for (int field = 3; field < 22; field++) {
		p = strchr(p + 1, ' ');
		if (!p)
			return -EINVAL;
	}
	errno = 0;
	v = strtoull(p + 1, &end, 10);
	if (errno || end == p + 1)
		return -EINVAL;
	*ret = v;
	return 0;
}

int
proc_parse_cpu_ticks(const char *stat, uint64_t *ret)
{
	const char *p = strrchr(stat, ')');
	uint64_t sum = 0;

	if (!p)
		return -EINVAL;
	p++;
	/* after ')': field 3 (state) is the first; utime is field 14 */
	for (int field = 3; field < 14; field++) {
		p = strchr(p + 1, ' ');
		if (!p)
			return -EINVAL;
	}
	for (int field = 14; field <= 17; field++) {
		char *end;
		unsigned long long v;

		errno = 0;
		v = strtoull(p + 1, &end, 10);
		if (errno || end == p + 1 || (*end != ' ' && *end != '\0' && *end != '\n'))
			return -EINVAL;
		sum += v;
		p = end;
	}
	*ret = sum;
	return 0;
}

int64_t
proc_parse_hwm_kib(const char *text)
{
	const char *p = strncmp(text, "VmHWM:", 6) == 0 ? text : strstr(text, "\nVmHWM:");

	if (!p)
		return -1;
	p = strchr(p + 1, ':') + 1;
	return strtoll(p, NULL, 10);
}

int
proc_pid_starttime(const char *proc_root, pid_t pid, uint64_t *ret)
{
	char path[4200], buf[1024];
	ssize_t n;

	if (pid == 0)
		snprintf(path, sizeof(path), "%s/self/stat", proc_root);
	else
		snprintf(path, sizeof(path), "%s/%d/stat", proc_root, (int) pid);
	n = read_small_file_at(AT_FDCWD, path, buf, sizeof(buf));
	if (n < 0)
		return n == -ENOENT ? -ESRCH : (int) n;
	return proc_parse_starttime(buf, ret);
}

bool
proc_is_alive(const char *proc_root, pid_t pid, uint64_t starttime)
{
	uint64_t now;

	if (pid <= 0)
		return false;
	if (proc_pid_starttime(proc_root, pid, &now) < 0)
		return false;
	return now == starttime;
}

int64_t
proc_self_peak_rss_kib(void)
{
	char buf[4096];
	const char *p;

	if (read_small_file_at(AT_FDCWD, "/proc/self/status", buf, sizeof(buf)) > 0 &&
	    (p = strstr(buf, "VmHWM:")))
		return strtoll(p + 6, NULL, 10);
	return -1;
}

void
proc_add_stop_signals(sigset_t *set)
{
	sigaddset(set, SIGINT);
	sigaddset(set, SIGTERM);
	sigaddset(set, SIGHUP);
	sigaddset(set, SIGQUIT);
}

/* The 64-bit mask after "\nNAME:\t" in a /proc/PID/status text, or -1 (an all-ones mask:
 * reset everything) when it is missing or does not parse. */
static uint64_t
status_mask(const char *text, const char *name)
{
	const char *p = strstr(text, name);
	uint64_t m = 0;
	int digits = 0;

	if (!p)
		return UINT64_MAX;
	for (p += strlen(name); *p == '\t' || *p == ' '; p++)
		;
	for (; *p && *p != '\n'; p++, digits++) {
		int v = *p >= '0' && *p <= '9'   ? *p - '0'
			: *p >= 'a' && *p <= 'f' ? *p - 'a' + 10
						 : -1;

		if (v < 0 || digits >= 16)
			return UINT64_MAX;
		m = m << 4 | (uint64_t) v;
	}
	return digits ? m : UINT64_MAX;
}

void
proc_reset_signals(void)
{
	struct sigaction dfl = { .sa_handler = SIG_DFL };
	char buf[4096]; /* the text is about 1.5 KiB; one page of stack */
	uint64_t set = UINT64_MAX;
	ssize_t n = -1;
	int fd = open("/proc/thread-self/status", O_RDONLY | O_CLOEXEC | O_NOCTTY);

	if (fd >= 0) {
		n = read(fd, buf, sizeof(buf) - 1);
		(void) close(fd);
	}
	/* the whole text in one read (about 1.5 KiB), or no trust in it */
	if (n > 0 && (size_t) n < sizeof(buf) - 1) {
		buf[n] = '\0';
		set = status_mask(buf, "\nSigIgn:") | status_mask(buf, "\nSigCgt:");
	}
	for (int s = 1; s < NSIG && s <= 64; s++)
		if (set & (UINT64_C(1) << (s - 1)))
			(void) sigaction(s, &dfl, NULL);
}

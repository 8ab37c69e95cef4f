#include "netcheck.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <sys/stat.h>

/* /proc/self/net/dev of a namespace holding only lo is about 450 bytes; a file that does not
 * fit is a namespace with far more than lo. */
static char net_buf[16384];

/* Reads path whole into net_buf (NUL-terminated). Returns its length, -ENOENT when it does
 * not exist, -EFBIG when it does not fit, or -errno. */
static long
read_small(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t len = 0;

	if (fd < 0)
		return -errno;
	for (;;) {
		ssize_t n = read(fd, net_buf + len, sizeof(net_buf) - 1 - len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;

			(void) close(fd);
			return -e;
		}
		if (n == 0)
			break;
		len += (size_t) n;
		if (len == sizeof(net_buf) - 1) {
			(void) close(fd);
			return -EFBIG;
		}
	}
	(void) close(fd);
	net_buf[len] = '\0';
	return (long) len;
}

/* The next line of net_buf from *pos (modified in place: the '\n' becomes NUL), or NULL. */
static char *
next_line(size_t *pos, size_t len)
{
	char *line, *nl;

	if (*pos >= len)
		return NULL;
	line = net_buf + *pos;
	nl = strchr(line, '\n');
	if (nl) {
		*nl = '\0';
		*pos = (size_t) (nl - net_buf) + 1;
	} else {
		*pos = len;
	}
	return line;
}

/* The whitespace-separated field number idx (0-based; -1: the last) of line, copied into out
 * (truncated to outsz - 1; "" when there is no such field). */
static void
field(const char *line, int idx, char *out, size_t outsz)
{
	const char *s = line, *start = NULL, *end = NULL;
	bool found = false;
	size_t n;

	out[0] = '\0';
	for (int i = 0; !found; i++) {
		while (*s == ' ' || *s == '\t')
			s++;
		if (*s == '\0')
			break;
		start = s;
		while (*s && *s != ' ' && *s != '\t')
			s++;
		end = s;
		found = i == idx;
	}
	if (!start || (idx >= 0 && !found))
		return;
	n = (size_t) (end - start) < outsz - 1 ? (size_t) (end - start) : outsz - 1;
	memcpy(out, start, n);
	out[n] = '\0';
}

int
ab_netcheck(unsigned long long not_ino, char *why, size_t whysz)
{
	char name[64];
	struct stat st;
	size_t pos = 0;
	long len;
	char *line;
	int n_lo = 0;

	/* 1. not the namespace agentbox was started in (the host's, or the caller's) */
	if (stat("/proc/self/ns/net", &st) < 0) {
		snprintf(why, whysz, "cannot read the sandbox's network namespace: %s",
			 strerror(errno));
		return -EPERM;
	}
	if (not_ino && (unsigned long long) st.st_ino == not_ino) {
		snprintf(why, whysz, "the sandbox shares agentbox's own network namespace");
		return -EPERM;
	}
	/* 2. interfaces: lo and nothing else ("Inter-|..." and " face |..." head the file) */
	len = read_small("/proc/self/net/dev");
	if (len < 0) {
		snprintf(why, whysz, "cannot list the sandbox's network interfaces: %s",
			 len == -EFBIG ? "too many" : strerror((int) -len));
		return -EPERM;
	}
	(void) next_line(&pos, (size_t) len);
	(void) next_line(&pos, (size_t) len);
	while ((line = next_line(&pos, (size_t) len))) {
		char *colon = strchr(line, ':');

		if (!colon)
			continue;
		*colon = '\0';
		field(line, 0, name, sizeof(name));
		if (strcmp(name, "lo") != 0) {
			snprintf(why, whysz,
				 "the sandbox's network namespace has interface '%s' besides lo",
				 name);
			return -EPERM;
		}
		n_lo++;
	}
	if (n_lo != 1) {
		snprintf(why, whysz, "the sandbox's network namespace has no lo");
		return -EPERM;
	}
	/* 3. routes: every IPv4 and IPv6 route uses lo (a fresh namespace has no IPv4 route in
	 * the main table, and IPv6 ones on lo only). Iface is the first field of
	 * /proc/net/route, the device the last of /proc/net/ipv6_route. */
	for (int v6 = 0; v6 < 2; v6++) {
		len = read_small(v6 ? "/proc/self/net/ipv6_route" : "/proc/self/net/route");
		if (len == -ENOENT)
			continue; /* that protocol is not built in */
		if (len < 0) {
			snprintf(why, whysz, "cannot list the sandbox's routes: %s",
				 len == -EFBIG ? "too many" : strerror((int) -len));
			return -EPERM;
		}
		pos = 0;
		if (!v6)
			(void) next_line(&pos, (size_t) len); /* the header */
		while ((line = next_line(&pos, (size_t) len))) {
			field(line, v6 ? -1 : 0, name, sizeof(name));
			if (name[0] && strcmp(name, "lo") != 0) {
				snprintf(why, whysz,
					 "the sandbox's network namespace has a route through '%s'",
					 name);
				return -EPERM;
			}
		}
	}
	return 0;
}

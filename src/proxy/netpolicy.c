#include "netpolicy.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

static char
lower(char c)
{
	return c >= 'A' && c <= 'Z' ? (char) (c - 'A' + 'a') : c;
}

/* A host as it may appear in a request or on the command line, normalized into out:
 * "[v6]" (brackets dropped; hex digits, ':' and '.', no zone), or a DNS name / IPv4 literal
 * (letters, digits, '-', '_', '.'; no empty label; one trailing dot dropped). */
static int
normalize_host(const char *s, size_t n, char out[NP_HOST_MAX + 1])
{
	size_t o = 0;

	if (n >= 2 && s[0] == '[' && s[n - 1] == ']') {
		bool colon = false;

		if (n - 2 < 2 || n - 2 > 45)
			return -EINVAL;
		for (size_t i = 1; i < n - 1; i++) {
			char c = lower(s[i]);

			if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || c == ':' ||
			      c == '.'))
				return -EINVAL;
			colon |= c == ':';
			out[o++] = c;
		}
		out[o] = '\0';
		return colon ? 0 : -EINVAL;
	}
	if (n > 0 && s[n - 1] == '.')
		n--;
	if (n == 0 || n > NP_HOST_MAX || s[0] == '.' || s[0] == '-')
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		char c = lower(s[i]);

		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || c == '-' || c == '_' ||
		      c == '.'))
			return -EINVAL;
		if (c == '.' && i + 1 < n && s[i + 1] == '.')
			return -EINVAL;
		out[o++] = c;
	}
	out[o] = '\0';
	return 0;
}

static int
parse_port(const char *s, size_t n, uint16_t *ret)
{
	unsigned v = 0;

	if (n == 0 || n > 5)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		v = v * 10 + (unsigned) (s[i] - '0');
	}
	if (v == 0 || v > 65535)
		return -EINVAL;
	*ret = (uint16_t) v;
	return 0;
}

/* "host:port" / "[v6]:port" / (with default_port) "host" / "[v6]" */
static int
parse_target(const char *s, size_t n, int default_port, char host[NP_HOST_MAX + 1], uint16_t *port)
{
	const char *colon = NULL;

	if (n > 0 && s[0] == '[') {
		const char *close = memchr(s, ']', n);

		if (!close)
			return -EINVAL;
		if ((size_t) (close - s) + 1 < n) {
			if (close[1] != ':')
				return -EINVAL;
			colon = close + 1;
		}
	} else {
		colon = memchr(s, ':', n);
		if (colon && memchr(colon + 1, ':', n - (size_t) (colon + 1 - s)))
			return -EINVAL; /* IPv6 without brackets */
	}
	if (!colon) {
		if (default_port <= 0)
			return -EINVAL;
		*port = (uint16_t) default_port;
		return normalize_host(s, n, host);
	}
	if (parse_port(colon + 1, n - (size_t) (colon + 1 - s), port) < 0)
		return -EINVAL;
	return normalize_host(s, (size_t) (colon - s), host);
}

int
np_policy_add(struct np_policy *p, const char *spec)
{
	char host[NP_HOST_MAX + 1];
	uint16_t port;

	if (parse_target(spec, strlen(spec), NP_DEFAULT_PORT, host, &port) < 0)
		return -EINVAL;
	if (np_policy_allows(p, host, port))
		return 0;
	if (p->n >= NP_MAX_ALLOW)
		return -ENOSPC;
	memcpy(p->allow[p->n].host, host, sizeof(host));
	p->allow[p->n].port = port;
	p->n++;
	return 0;
}

bool
np_policy_allows(const struct np_policy *p, const char *host, uint16_t port)
{
	for (size_t i = 0; i < p->n; i++)
		if (p->allow[i].port == port && strcmp(p->allow[i].host, host) == 0)
			return true;
	return false;
}

void
np_format_target(char *buf, size_t size, const char *host, uint16_t port)
{
	snprintf(buf, size, strchr(host, ':') ? "[%s]:%u" : "%s:%u", host, (unsigned) port);
}

enum np_head
np_parse_head(const char *buf, size_t len, char host[NP_HOST_MAX + 1], uint16_t *port,
	      size_t *head_len, const char **why)
{
	static const char method[] = "CONNECT ";
	const size_t ml = sizeof(method) - 1;
	const char *eol = memmem(buf, len, "\r\n", 2);
	const char *target, *sp, *end;
	size_t n;

	/* not a CONNECT: say so as soon as the first bytes show it */
	if (memcmp(buf, method, len < ml ? len : ml) != 0) {
		*why = "only CONNECT requests are allowed";
		return NP_HEAD_BAD;
	}
	if (!eol) {
		*why = "request head too long";
		return len >= NP_HEAD_MAX ? NP_HEAD_BAD : NP_HEAD_INCOMPLETE;
	}
	target = buf + ml;
	sp = memchr(target, ' ', (size_t) (eol - target));
	if (!sp) {
		*why = "malformed request line";
		return NP_HEAD_BAD;
	}
	n = (size_t) (eol - (sp + 1));
	if (n != 8 || (memcmp(sp + 1, "HTTP/1.1", 8) != 0 && memcmp(sp + 1, "HTTP/1.0", 8) != 0)) {
		*why = "malformed request line";
		return NP_HEAD_BAD;
	}
	if (parse_target(target, (size_t) (sp - target), 0, host, port) < 0) {
		*why = "malformed CONNECT target (want host:port)";
		return NP_HEAD_BAD;
	}
	end = memmem(eol, len - (size_t) (eol - buf), "\r\n\r\n", 4);
	if (!end) {
		*why = "request head too long";
		return len >= NP_HEAD_MAX ? NP_HEAD_BAD : NP_HEAD_INCOMPLETE;
	}
	*head_len = (size_t) (end - buf) + 4;
	return NP_HEAD_CONNECT;
}

static const char *
v4_refusal(uint32_t a)
{
	if ((a >> 24) == 0)
		return "unspecified address (0.0.0.0/8)";
	if ((a >> 24) == 127)
		return "loopback address";
	if ((a >> 24) == 10 || (a & 0xfff00000u) == 0xac100000u || (a & 0xffff0000u) == 0xc0a80000u)
		return "private address (RFC 1918)";
	if ((a & 0xffc00000u) == 0x64400000u)
		return "shared address space (100.64.0.0/10, CGNAT)";
	if ((a & 0xffff0000u) == 0xa9fe0000u)
		return "link-local address (169.254.0.0/16, cloud metadata)";
	if ((a & 0xf0000000u) == 0xe0000000u)
		return "multicast address";
	if (a == 0xffffffffu)
		return "broadcast address";
	if ((a & 0xf0000000u) == 0xf0000000u)
		return "reserved address (240.0.0.0/4)";
	return NULL;
}

static uint32_t
be32_at(const uint8_t *b)
{
	return (uint32_t) b[0] << 24 | (uint32_t) b[1] << 16 | (uint32_t) b[2] << 8 | b[3];
}

static bool
all_zero(const uint8_t *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (b[i])
			return false;
	return true;
}

/* The IPv4 address sa is or carries in its mapped form (::ffff:a.b.c.d). */
static bool
as_v4(const struct sockaddr *sa, uint32_t *ret)
{
	if (sa->sa_family == AF_INET) {
		*ret = be32_at((const uint8_t *) &((const struct sockaddr_in *) sa)->sin_addr);
		return true;
	}
	if (sa->sa_family == AF_INET6) {
		const uint8_t *b = ((const struct sockaddr_in6 *) sa)->sin6_addr.s6_addr;

		if (all_zero(b, 10) && b[10] == 0xff && b[11] == 0xff) {
			*ret = be32_at(b + 12);
			return true;
		}
	}
	return false;
}

static const char *
v6_refusal(const uint8_t *b)
{
	static const uint8_t nat64[12] = { 0x00, 0x64, 0xff, 0x9b };

	if (all_zero(b, 16))
		return "unspecified address (::)";
	if (all_zero(b, 15) && b[15] == 1)
		return "loopback address";
	if (all_zero(b, 10) && b[10] == 0xff && b[11] == 0xff)
		return v4_refusal(be32_at(b + 12)); /* IPv4-mapped */
	if (all_zero(b, 12))
		return "IPv4-compatible address (deprecated)";
	if (memcmp(b, nat64, sizeof(nat64)) == 0)
		return v4_refusal(be32_at(b + 12)); /* NAT64 translates to this IPv4 address */
	if (b[0] == 0x00 && b[1] == 0x64 && b[2] == 0xff && b[3] == 0x9b && b[4] == 0x00 &&
	    b[5] == 0x01)
		return "local-use NAT64 address (64:ff9b:1::/48)";
	if (b[0] == 0x20 && b[1] == 0x02)
		return v4_refusal(be32_at(b + 2)); /* 6to4 relays to this IPv4 address */
	if ((b[0] & 0xfe) == 0xfc)
		return "unique local address (fc00::/7)";
	if (b[0] == 0xfe && (b[1] & 0xc0) == 0x80)
		return "link-local address (fe80::/10)";
	if (b[0] == 0xfe && (b[1] & 0xc0) == 0xc0)
		return "site-local address (fec0::/10)";
	if (b[0] == 0xff)
		return "multicast address";
	return NULL;
}

static bool
same_addr(const struct sockaddr *a, const struct sockaddr *b)
{
	uint32_t x, y;

	if (as_v4(a, &x) && as_v4(b, &y))
		return x == y;
	if (a->sa_family == AF_INET6 && b->sa_family == AF_INET6)
		return memcmp(&((const struct sockaddr_in6 *) a)->sin6_addr,
			      &((const struct sockaddr_in6 *) b)->sin6_addr,
			      sizeof(struct in6_addr)) == 0;
	return false;
}

const char *
np_addr_refusal(const struct sockaddr *sa, const struct sockaddr_storage *local, size_t n_local)
{
	const char *why;
	uint32_t a;

	if (sa->sa_family == AF_INET) {
		(void) as_v4(sa, &a);
		why = v4_refusal(a);
	} else if (sa->sa_family == AF_INET6) {
		why = v6_refusal(((const struct sockaddr_in6 *) sa)->sin6_addr.s6_addr);
	} else {
		return "not an IP address";
	}
	if (why)
		return why;
	for (size_t i = 0; i < n_local; i++)
		if (same_addr(sa, (const struct sockaddr *) &local[i]))
			return "an address of this host";
	return NULL;
}

/* netpolicy.h: what the registry proxy of `agentbox prepare` lets through. Pure (no
 * syscalls): agentbox builds the allow-list with it, agentbox-netproxy parses requests and
 * judges addresses with it, and tests/unit/test-netpolicy.c checks both. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sys/socket.h>

#define NP_HOST_MAX     253  /* the longest host name (or address literal) we accept */
#define NP_MAX_ALLOW    32   /* allow-list entries */
#define NP_HEAD_MAX     8192 /* a request head, request line and headers */
#define NP_DEFAULT_PORT 443

struct np_allow {
	char host[NP_HOST_MAX + 1]; /* lower case, no trailing dot, IPv6 without brackets */
	uint16_t port;
};

struct np_policy {
	struct np_allow allow[NP_MAX_ALLOW];
	size_t n;
};

/* Adds "HOST" (port 443) or "HOST:PORT" ("[V6]:PORT") to the allow-list. HOST is a DNS name
 * or an address literal; it is compared as text, case-insensitively. A duplicate is not
 * added twice. Returns 0, -EINVAL when spec is not a host (and port), -ENOSPC when the list
 * is full. */
int np_policy_add(struct np_policy *p, const char *spec);

/* The allow-list has exactly HOST (normalized as np_policy_add does) with PORT. */
bool np_policy_allows(const struct np_policy *p, const char *host, uint16_t port);

/* "host:port" or "[v6]:port" into buf (always NUL-terminated). */
void np_format_target(char *buf, size_t size, const char *host, uint16_t port);

enum np_head {
	NP_HEAD_INCOMPLETE, /* no end of the head yet: read more (len < NP_HEAD_MAX) */
	NP_HEAD_CONNECT,    /* a well-formed CONNECT: host, port and head_len are set */
	NP_HEAD_BAD,        /* anything else: *why says what (a static string) */
};

/* Parses the request head in buf[0..len): `CONNECT host:port HTTP/1.x` CRLF, headers
 * (ignored), CRLF. The host is normalized (lower case, no trailing dot, IPv6 without
 * brackets). A request line that is complete but not a CONNECT is NP_HEAD_BAD at once. */
enum np_head np_parse_head(const char *buf, size_t len, char host[NP_HOST_MAX + 1], uint16_t *port,
			   size_t *head_len, const char **why);

/* Why the proxy must not connect to the address sa (a static string), or NULL when it may:
 * loopback, unspecified, private (RFC 1918, CGNAT 100.64/10, fc00::/7), link-local
 * (169.254/16 with the cloud metadata address, fe80::/10), multicast, broadcast, reserved,
 * IPv4 embedded in IPv6 (mapped, compatible, NAT64, 6to4) judged as IPv4, and any of the
 * host's own addresses in local[0..n_local). */
const char *np_addr_refusal(const struct sockaddr *sa, const struct sockaddr_storage *local,
			    size_t n_local);

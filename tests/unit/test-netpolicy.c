/* Unit tests for netpolicy.c: the registry proxy's allow-list, request parser and address
 * classifier. Every address the proxy must never connect to is refused, in every spelling
 * the resolver can hand back (IPv4, IPv4-mapped, NAT64, 6to4); public addresses pass. */
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include "src/proxy/netpolicy.h"
#include "tests/tap.h"

static struct sockaddr_storage
addr(const char *text)
{
	struct sockaddr_storage ss = { 0 };
	struct sockaddr_in *v4 = (struct sockaddr_in *) &ss;
	struct sockaddr_in6 *v6 = (struct sockaddr_in6 *) &ss;

	if (inet_pton(AF_INET, text, &v4->sin_addr) == 1)
		v4->sin_family = AF_INET;
	else if (inet_pton(AF_INET6, text, &v6->sin6_addr) == 1)
		v6->sin6_family = AF_INET6;
	return ss;
}

static void
refused(const char *text, const char *want_part)
{
	struct sockaddr_storage ss = addr(text);
	const char *why = np_addr_refusal((struct sockaddr *) &ss, NULL, 0);

	TAP_OK(why && strstr(why, want_part), "%s refused as '%s' (got '%s')", text, want_part,
	       why ? why : "(allowed)");
}

static void
allowed(const char *text)
{
	struct sockaddr_storage ss = addr(text);
	const char *why = np_addr_refusal((struct sockaddr *) &ss, NULL, 0);

	TAP_OK(!why, "%s allowed (got '%s')", text, why ? why : "");
}

/* text for a TAP line: control bytes as \xNN, at most 40 bytes */
static const char *
show(const char *text, size_t len)
{
	static char buf[4][200];
	static int k;
	char *q = buf[k = (k + 1) % 4];

	for (size_t i = 0; i < len && i < 40; i++) {
		unsigned char c = (unsigned char) text[i];

		q += c >= 0x20 && c < 0x7f ? sprintf(q, "%c", c) : sprintf(q, "\\x%02x", c);
	}
	*q = '\0';
	return buf[k];
}

/* parse "text" as a whole head; want host:port (formatted) or a BAD reason part */
static void
head_ok(const char *text, const char *want_target, size_t want_len)
{
	char host[NP_HOST_MAX + 1], got[300];
	uint16_t port = 0;
	size_t hl = 0;
	const char *why = NULL;
	enum np_head h = np_parse_head(text, strlen(text), host, &port, &hl, &why);

	if (h == NP_HEAD_CONNECT)
		np_format_target(got, sizeof(got), host, port);
	else
		snprintf(got, sizeof(got), "(%s: %s)", h == NP_HEAD_BAD ? "bad" : "incomplete",
			 why ? why : "");
	TAP_OK(h == NP_HEAD_CONNECT && strcmp(got, want_target) == 0 && hl == want_len,
	       "head '%s' -> %s, %zu bytes (got %s, %zu)", show(text, strlen(text)), want_target,
	       want_len, got, hl);
}

static void
head_bad(const char *text, size_t len, const char *want_part)
{
	char host[NP_HOST_MAX + 1];
	uint16_t port = 0;
	size_t hl = 0;
	const char *why = NULL;
	enum np_head h = np_parse_head(text, len, host, &port, &hl, &why);

	TAP_OK(h == NP_HEAD_BAD && why && strstr(why, want_part),
	       "head '%s' refused: '%s' (got %d '%s')", show(text, len), want_part, (int) h,
	       why ? why : "");
}

static void
head_incomplete(const char *text)
{
	char host[NP_HOST_MAX + 1];
	uint16_t port = 0;
	size_t hl = 0;
	const char *why = NULL;

	TAP_OK(np_parse_head(text, strlen(text), host, &port, &hl, &why) == NP_HEAD_INCOMPLETE,
	       "head '%s' needs more bytes", show(text, strlen(text)));
}

int
main(void)
{
	struct np_policy p = { 0 };
	static char big[NP_HEAD_MAX + 1];

	/* ---- the address classifier ---- */
	refused("127.0.0.1", "loopback");
	refused("127.255.255.254", "loopback");
	refused("::1", "loopback");
	refused("0.0.0.0", "unspecified");
	refused("0.1.2.3", "unspecified");
	refused("::", "unspecified");
	refused("10.0.0.1", "RFC 1918");
	refused("10.255.255.53", "RFC 1918");
	refused("172.16.0.1", "RFC 1918");
	refused("172.31.255.255", "RFC 1918");
	allowed("172.32.0.1");
	allowed("172.15.255.255");
	refused("192.168.1.1", "RFC 1918");
	refused("100.64.0.1", "100.64.0.0/10");
	refused("100.127.255.255", "100.64.0.0/10");
	refused("100.100.100.200", "100.64.0.0/10"); /* Alibaba's metadata service */
	allowed("100.63.255.255");
	allowed("100.128.0.0");
	refused("169.254.169.254", "metadata");
	refused("169.254.0.1", "link-local");
	refused("224.0.0.1", "multicast");
	refused("239.255.255.250", "multicast");
	refused("255.255.255.255", "broadcast");
	refused("240.0.0.1", "reserved");
	refused("fc00::1", "fc00::/7");
	refused("fd00:ec2::254", "fc00::/7"); /* AWS's IPv6 metadata service */
	refused("fd00::2", "fc00::/7");
	refused("fe80::1", "fe80::/10");
	refused("febf::1", "fe80::/10");
	refused("fec0::1", "site-local");
	refused("ff02::1", "multicast");
	/* IPv4 hidden in IPv6 is judged as the IPv4 address */
	refused("::ffff:127.0.0.1", "loopback");
	refused("::ffff:169.254.169.254", "metadata");
	refused("::ffff:10.1.2.3", "RFC 1918");
	allowed("::ffff:104.16.0.1");
	refused("::127.0.0.1", "IPv4-compatible");
	refused("64:ff9b::7f00:1", "loopback");
	refused("64:ff9b::a9fe:a9fe", "metadata");
	allowed("64:ff9b::6810:1");
	refused("64:ff9b:1::1", "NAT64");
	refused("2002:7f00:1::1", "loopback");
	refused("2002:c0a8:101::1", "RFC 1918");
	allowed("2002:6810:1::1");
	/* public addresses, including the documentation ranges this test VM's DNS answers in */
	allowed("104.16.0.1");
	allowed("1.1.1.1");
	allowed("203.0.113.80");
	allowed("192.0.2.1");
	allowed("2606:4700::6810:1");
	{
		struct sockaddr_storage local[2] = { addr("192.0.2.2"), addr("2001:db8::2") };
		struct sockaddr_storage a = addr("192.0.2.2"), b = addr("::ffff:192.0.2.2"),
					c = addr("2001:db8::2"), d = addr("192.0.2.3");
		const char *w;

		w = np_addr_refusal((struct sockaddr *) &a, local, 2);
		TAP_OK(w && strstr(w, "this host"), "the host's own IPv4 address is refused");
		w = np_addr_refusal((struct sockaddr *) &b, local, 2);
		TAP_OK(w && strstr(w, "this host"), "... also IPv4-mapped");
		w = np_addr_refusal((struct sockaddr *) &c, local, 2);
		TAP_OK(w && strstr(w, "this host"), "the host's own IPv6 address is refused");
		TAP_OK(!np_addr_refusal((struct sockaddr *) &d, local, 2),
		       "its neighbour is not the host");
	}
	{
		struct sockaddr_storage u = { .ss_family = AF_UNIX };

		TAP_OK(np_addr_refusal((struct sockaddr *) &u, NULL, 0) != NULL,
		       "a non-IP address is refused");
	}

	/* ---- the allow-list ---- */
	TAP_OK(np_policy_add(&p, "registry.npmjs.org") == 0, "add a name");
	TAP_OK(np_policy_add(&p, "Files.PythonHosted.org.") == 0, "add a name in capitals, dot");
	TAP_OK(np_policy_add(&p, "localhost:8080") == 0, "add name:port");
	TAP_OK(np_policy_add(&p, "[::1]:443") == 0, "add [v6]:port");
	TAP_OK(np_policy_add(&p, "registry.npmjs.org:443") == 0 && p.n == 4,
	       "a duplicate is not added twice (n=%zu)", p.n);
	TAP_OK(np_policy_allows(&p, "registry.npmjs.org", 443), "name allowed on 443");
	TAP_OK(!np_policy_allows(&p, "registry.npmjs.org", 80), "... not on 80");
	TAP_OK(np_policy_allows(&p, "files.pythonhosted.org", 443), "normalized at add");
	TAP_OK(np_policy_allows(&p, "localhost", 8080), "name:port allowed");
	TAP_OK(!np_policy_allows(&p, "localhost", 443), "... only on its port");
	TAP_OK(np_policy_allows(&p, "::1", 443), "v6 literal stored without brackets");
	TAP_OK(!np_policy_allows(&p, "evil.registry.npmjs.org", 443), "no suffix match");
	TAP_OK(!np_policy_allows(&p, "npmjs.org", 443), "no parent match");
	TAP_OK(np_policy_add(&p, "") == -EINVAL, "empty spec refused");
	TAP_OK(np_policy_add(&p, "a..b") == -EINVAL, "empty label refused");
	TAP_OK(np_policy_add(&p, "host:0") == -EINVAL, "port 0 refused");
	TAP_OK(np_policy_add(&p, "host:65536") == -EINVAL, "port 65536 refused");
	TAP_OK(np_policy_add(&p, "host:") == -EINVAL, "empty port refused");
	TAP_OK(np_policy_add(&p, "::1") == -EINVAL, "v6 without brackets refused");
	TAP_OK(np_policy_add(&p, "[fe80::1%eth0]:443") == -EINVAL, "zone id refused");
	TAP_OK(np_policy_add(&p, "http://x") == -EINVAL, "a URL is not a host");
	TAP_OK(np_policy_add(&p, "a b") == -EINVAL, "space refused");
	TAP_OK(np_policy_add(&p, "-x.org") == -EINVAL, "leading dash refused");
	for (int i = (int) p.n; i < NP_MAX_ALLOW; i++) {
		char name[32];

		snprintf(name, sizeof(name), "h%d.example", i);
		(void) np_policy_add(&p, name);
	}
	TAP_OK(np_policy_add(&p, "one-too-many.example") == -ENOSPC, "the list is bounded");

	/* ---- the request parser ---- */
	head_ok("CONNECT registry.npmjs.org:443 HTTP/1.1\r\nHost: registry.npmjs.org:443\r\n\r\n",
		"registry.npmjs.org:443", 73);
	head_ok("CONNECT REGISTRY.npmjs.ORG.:443 HTTP/1.0\r\n\r\n", "registry.npmjs.org:443", 44);
	head_ok("CONNECT [::1]:8080 HTTP/1.1\r\n\r\n", "[::1]:8080", 31);
	head_ok("CONNECT 127.0.0.1:5 HTTP/1.1\r\n\r\n\x16\x03\x01", "127.0.0.1:5", 32);
	head_incomplete("");
	head_incomplete("CONN");
	head_incomplete("CONNECT registry.npmjs.org:443 HTTP/1.1\r\nHost: x\r\n");
	head_bad("GET http://127.0.0.1:5/ HTTP/1.1\r\n\r\n", 35, "only CONNECT");
	head_bad("G", 1, "only CONNECT");
	head_bad("connect x:443 HTTP/1.1\r\n\r\n", 26, "only CONNECT");
	head_bad("\x16\x03\x01\x02\x00", 5, "only CONNECT"); /* a TLS ClientHello */
	head_bad("CONNECT x:443\r\n\r\n", 17, "malformed request line");
	head_bad("CONNECT x:443 HTTP/2.0\r\n\r\n", 26, "malformed request line");
	head_bad("CONNECT x:443 HTTP/1.1 y\r\n\r\n", 28, "malformed request line");
	head_bad("CONNECT x HTTP/1.1\r\n\r\n", 22, "malformed CONNECT target");
	head_bad("CONNECT x:0 HTTP/1.1\r\n\r\n", 24, "malformed CONNECT target");
	head_bad("CONNECT x:99999 HTTP/1.1\r\n\r\n", 28, "malformed CONNECT target");
	head_bad("CONNECT ::1:443 HTTP/1.1\r\n\r\n", 28, "malformed CONNECT target");
	head_bad("CONNECT a/b:443 HTTP/1.1\r\n\r\n", 28, "malformed CONNECT target");
	head_bad("CONNECT :443 HTTP/1.1\r\n\r\n", 25, "malformed CONNECT target");
	head_bad("CONNECT x\0y:443 HTTP/1.1\r\n\r\n", 28, "malformed CONNECT target");
	memcpy(big, "CONNECT ", 8);
	memset(big + 8, 'a', sizeof(big) - 9);
	head_bad(big, NP_HEAD_MAX, "too long");
	memcpy(big, "CONNECT a:1 HTTP/1.1\r\n", 22);
	memset(big + 22, 'h', sizeof(big) - 23);
	head_bad(big, NP_HEAD_MAX, "too long");
	return tap_done();
}

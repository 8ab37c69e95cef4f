/* agentbox-netproxy: the registry proxy of `agentbox prepare`.
 *
 *   agentbox-netproxy --ctl-fd 3 [--user UID:GID] [--allow HOST[:PORT]]...
 *
 * The install sandbox has its own network namespace with only `lo`; the one way out is a TCP
 * listening socket that agentbox created in that namespace and hands to this process, which
 * runs in the host's namespace. Each connection must be `CONNECT host:port HTTP/1.x` for an
 * allow-listed host and port; the name is resolved here, every address that is loopback,
 * private, link-local, multicast or the host's own is skipped (netpolicy.c), and the bytes
 * are spliced both ways with bounded buffers. Anything else gets 403, a line on stderr and a
 * place in the summary. Nothing of the request is forwarded but the tunnel's payload.
 *
 * The control socket (SOCK_SEQPACKET, fd 3) carries text records:
 *   us -> agentbox:  "ready landlock=N" | "error TEXT"     once, after setup
 *   agentbox -> us:  "listen" + SCM_RIGHTS(listening fd)   after it made the namespace
 *   us -> agentbox:  "listening" | "error TEXT"
 *   agentbox: shutdown(SHUT_WR), or it exits (EOF)
 *   us -> agentbox:  "stats allowed=N refused=N failed=N", "refusal TEXT"...,
 *                    "failure TEXT"..., "end"; exit
 * and, before "listen", prepare's check that the package index answers at all:
 *   agentbox -> us:  "probe HOST:PORT"                  an allow-listed target only
 *   us -> agentbox:  "probe-ok HOST:PORT" | "probe-failed HOST:PORT REASON"
 * agentbox double-forks us: we are never its child, so its supervisor (a subreaper waiting
 * for ECHILD) never waits for us, and we end with the control socket.
 *
 * A separate, dynamically linked program: getaddrinfo() needs the host's NSS modules, which a
 * static agentbox cannot load reliably. As root it runs as the sandbox user; it is
 * non-dumpable, and Landlock (when there is some) forbids it every filesystem write and any
 * TCP connect but to the allowed ports and DNS. One thread per connection (at most
 * MAX_CONNS), so a slow resolver or upstream stalls only its own connection. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sys/prctl.h>
#include <sys/socket.h>

#include "init/landlock.h"
#include "proxy/netpolicy.h"
#include "util/clock.h"
#include "util/fdpass.h"

#define CTL_FD          3
#define MAX_CONNS       64
#define MAX_REFUSALS    32
#define MAX_LOCAL       64
#define HEAD_TIMEOUT    10000  /* ms to send the request head */
#define CONNECT_TIMEOUT 10000  /* ms for each upstream address */
#define PROBE_TIMEOUT   5000   /* ms for a probe to connect (agentbox waits a little longer) */
#define IDLE_TIMEOUT    300000 /* ms without a byte either way closes a tunnel */
#define RELAY_BUF       16384  /* per direction */

static struct np_policy policy;
static int wake_fd[2] = { -1, -1 }; /* a thread ended: poll the listener again */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	unsigned long allowed, refused, failed;
	int active;
	size_t n_refusals, n_failures;
	char refusals[MAX_REFUSALS][240];
	char failures[MAX_REFUSALS][240];
} st;

static void
ctl_send(const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	(void) send(CTL_FD, buf, (size_t) n < sizeof(buf) ? (size_t) n : sizeof(buf) - 1,
		    MSG_NOSIGNAL);
}

static _Noreturn void
die(const char *fmt, ...)
{
	char buf[400];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	fprintf(stderr, "agentbox-netproxy: %s\n", buf);
	ctl_send("error %s", buf);
	_exit(1);
}

/* The first line of what the sandbox sent, for a log line and the report: 'quoted',
 * printable ASCII only, at most 80 bytes. */
static void
quote_head(char *out, size_t size, const char *in, size_t len)
{
	size_t o = 0;

	out[o++] = '\'';
	for (size_t i = 0; i < len && i < 80 && o + 2 < size; i++) {
		unsigned char c = (unsigned char) in[i];

		if (c == '\r' || c == '\n')
			break;
		out[o++] = c >= 0x20 && c < 0x7f && c != '\'' ? (char) c : '?';
	}
	out[o++] = '\'';
	out[o] = '\0';
}

static void
write_best_effort(int fd, const char *s, size_t n)
{
	while (n > 0) {
		struct pollfd p = { .fd = fd, .events = POLLOUT };
		ssize_t w = send(fd, s, n, MSG_NOSIGNAL);

		if (w > 0) {
			s += w;
			n -= (size_t) w;
		} else if (w < 0 && errno == EAGAIN && poll(&p, 1, 2000) > 0) {
			continue;
		} else if (w < 0 && errno == EINTR) {
			continue;
		} else {
			return;
		}
	}
}

/* 403 (refused by policy) or 502 (allowed but unreachable), logged and counted. */
static void
answer(int fd, int code, const char *target, const char *why)
{
	char body[512];
	int n;

	n = snprintf(body, sizeof(body),
		     "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nConnection: close\r\n"
		     "\r\nagentbox-netproxy: %s: %s\n",
		     code, code == 403 ? "Forbidden" : "Bad Gateway", target, why);
	if (n > 0)
		write_best_effort(fd, body, (size_t) n < sizeof(body) ? (size_t) n : sizeof(body));
	fprintf(stderr, "agentbox-netproxy: %s %s: %s\n", code == 403 ? "refused" : "failed",
		target, why);
	pthread_mutex_lock(&lock);
	if (code == 403) {
		st.refused++;
		if (st.n_refusals < MAX_REFUSALS)
			snprintf(st.refusals[st.n_refusals++], sizeof(st.refusals[0]), "%s: %s",
				 target, why);
	} else {
		st.failed++;
		if (st.n_failures < MAX_REFUSALS)
			snprintf(st.failures[st.n_failures++], sizeof(st.failures[0]), "%s: %s",
				 target, why);
	}
	pthread_mutex_unlock(&lock);
	/* let the client read the answer before the close (unread input would reset it) */
	(void) shutdown(fd, SHUT_WR);
	for (int64_t end = now_ms() + 1000; now_ms() < end;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		char sink[4096];

		if (poll(&p, 1, (int) (end - now_ms())) <= 0 || read(fd, sink, sizeof(sink)) <= 0)
			break;
	}
}

static size_t
local_addrs(struct sockaddr_storage *out, size_t max)
{
	struct ifaddrs *ifa, *i;
	size_t n = 0;

	if (getifaddrs(&ifa) < 0)
		return 0;
	for (i = ifa; i && n < max; i = i->ifa_next) {
		if (!i->ifa_addr)
			continue;
		if (i->ifa_addr->sa_family == AF_INET)
			memcpy(&out[n++], i->ifa_addr, sizeof(struct sockaddr_in));
		else if (i->ifa_addr->sa_family == AF_INET6)
			memcpy(&out[n++], i->ifa_addr, sizeof(struct sockaddr_in6));
	}
	freeifaddrs(ifa);
	return n;
}

/* A non-blocking connect to one address within ms. Returns the fd or -errno. */
static int
connect_one(const struct addrinfo *ai, int ms)
{
	int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	struct pollfd p;
	int e = 0;
	socklen_t el = sizeof(e);

	if (fd < 0)
		return -errno;
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
		return fd;
	if (errno != EINPROGRESS) {
		e = errno;
		(void) close(fd);
		return -e;
	}
	p = (struct pollfd){ .fd = fd, .events = POLLOUT };
	if (poll(&p, 1, ms) <= 0) {
		(void) close(fd);
		return -ETIMEDOUT;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) < 0 || e != 0) {
		(void) close(fd);
		return -(e ? e : EIO);
	}
	return fd;
}

struct half {
	char buf[RELAY_BUF];
	size_t off, len;
	bool eof; /* the source sent FIN (or failed); forwarded once buf is drained */
	bool shut;
};

/* Moves bytes from src into h, and from h to dst. Returns false on a hard error. */
static bool
pump(int src, int dst, struct half *h, short src_ev, short dst_ev)
{
	if (h->len == 0 && !h->eof && (src_ev & (POLLIN | POLLHUP | POLLERR))) {
		ssize_t n = read(src, h->buf, sizeof(h->buf));

		if (n > 0) {
			h->off = 0;
			h->len = (size_t) n;
		} else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
			h->eof = true;
		}
	}
	if (h->len > 0 && (dst_ev & (POLLOUT | POLLERR | POLLHUP))) {
		ssize_t n = send(dst, h->buf + h->off, h->len, MSG_NOSIGNAL);

		if (n > 0) {
			h->off += (size_t) n;
			h->len -= (size_t) n;
		} else if (n < 0 && errno != EAGAIN && errno != EINTR) {
			return false;
		}
	}
	if (h->eof && h->len == 0 && !h->shut) {
		(void) shutdown(dst, SHUT_WR);
		h->shut = true;
	}
	return true;
}

static void
relay(int a, int b)
{
	struct half *up = calloc(1, sizeof(*up)), *down = calloc(1, sizeof(*down));

	while (up && down && !(up->shut && down->shut)) {
		struct pollfd p[2] = {
			{ .fd = a,
			  .events = (short) ((up->len == 0 && !up->eof ? POLLIN : 0) |
					     (down->len ? POLLOUT : 0)) },
			{ .fd = b,
			  .events = (short) ((down->len == 0 && !down->eof ? POLLIN : 0) |
					     (up->len ? POLLOUT : 0)) },
		};
		int r = poll(p, 2, IDLE_TIMEOUT);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		if (!pump(a, b, up, p[0].revents, p[1].revents) ||
		    !pump(b, a, down, p[1].revents, p[0].revents))
			break;
		/* POLLHUP/POLLERR: that end takes no more bytes; once what it sent is read to
		 * its end, the tunnel is over (and poll would report it forever) */
		if (((p[0].revents & (POLLHUP | POLLERR)) && up->eof) ||
		    ((p[1].revents & (POLLHUP | POLLERR)) && down->eof))
			break;
	}
	free(up);
	free(down);
}

static void
serve(int cfd)
{
	char head[NP_HEAD_MAX], host[NP_HOST_MAX + 1], target[NP_HOST_MAX + 32];
	struct sockaddr_storage local[MAX_LOCAL];
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_ADDRCONFIG | AI_NUMERICSERV };
	struct addrinfo *res = NULL;
	const char *why = NULL, *first_why = NULL;
	char first_addr[INET6_ADDRSTRLEN + 2] = "", portstr[8];
	size_t len = 0, head_len = 0, n_local;
	int64_t deadline = now_ms() + HEAD_TIMEOUT;
	enum np_head h = NP_HEAD_INCOMPLETE;
	uint16_t port = 0;
	int ufd = -1, last_err = 0, r;

	while (h == NP_HEAD_INCOMPLETE) {
		struct pollfd p = { .fd = cfd, .events = POLLIN };
		int64_t left = deadline - now_ms();
		ssize_t n;

		if (left <= 0 || poll(&p, 1, (int) left) <= 0) {
			quote_head(target, sizeof(target), head, len);
			answer(cfd, 403, target, "no complete request in time");
			return;
		}
		n = read(cfd, head + len, sizeof(head) - len);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (n <= 0)
			return; /* the client went away */
		len += (size_t) n;
		h = np_parse_head(head, len, host, &port, &head_len, &why);
	}
	if (h == NP_HEAD_BAD) {
		quote_head(target, sizeof(target), head, len);
		answer(cfd, 403, target, why);
		return;
	}
	memcpy(target, "CONNECT ", 8);
	np_format_target(target + 8, sizeof(target) - 8, host, port);
	if (!np_policy_allows(&policy, host, port)) {
		answer(cfd, 403, target, "not on the allow-list");
		return;
	}
	snprintf(portstr, sizeof(portstr), "%u", (unsigned) port);
	r = getaddrinfo(host, portstr, &hints, &res);
	if (r != 0) {
		answer(cfd, 502, target, r == EAI_SYSTEM ? strerror(errno) : gai_strerror(r));
		return;
	}
	n_local = local_addrs(local, MAX_LOCAL);
	for (struct addrinfo *ai = res; ai && ufd < 0; ai = ai->ai_next) {
		why = np_addr_refusal(ai->ai_addr, local, n_local);
		if (why) {
			if (!first_why) {
				first_why = why;
				(void) getnameinfo(ai->ai_addr, ai->ai_addrlen, first_addr,
						   sizeof(first_addr), NULL, 0, NI_NUMERICHOST);
			}
			continue;
		}
		ufd = connect_one(ai, CONNECT_TIMEOUT);
		if (ufd < 0) {
			last_err = -ufd;
			ufd = -1;
		}
	}
	freeaddrinfo(res);
	if (ufd < 0 && !last_err) {
		char msg[200];

		snprintf(msg, sizeof(msg), "resolves to %s: %s", first_addr,
			 first_why ? first_why : "no usable address");
		answer(cfd, 403, target, msg);
		return;
	}
	if (ufd < 0) {
		answer(cfd, 502, target, strerror(last_err));
		return;
	}
	pthread_mutex_lock(&lock);
	st.allowed++;
	pthread_mutex_unlock(&lock);
	write_best_effort(cfd, "HTTP/1.1 200 Connection established\r\n\r\n", 39);
	if (len > head_len) /* the client did not wait for our answer */
		write_best_effort(ufd, head + head_len, len - head_len);
	relay(cfd, ufd);
	(void) close(ufd);
}

/* prepare's check, before the install starts, that an allow-listed package index answers:
 * the name resolves and a TCP connection opens within PROBE_TIMEOUT. Reachability only: the
 * address policy is applied to the install's own CONNECTs, as always. Nothing is sent. */
struct probe {
	char host[NP_HOST_MAX + 1];
	uint16_t port;
};

static void *
probe_main(void *arg)
{
	struct probe *pr = arg;
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_ADDRCONFIG | AI_NUMERICSERV };
	struct addrinfo *res = NULL;
	char target[NP_HOST_MAX + 32], portstr[8];
	int64_t deadline = now_ms() + PROBE_TIMEOUT;
	int r, fd = -1, last_err = ETIMEDOUT;

	np_format_target(target, sizeof(target), pr->host, pr->port);
	snprintf(portstr, sizeof(portstr), "%u", (unsigned) pr->port);
	r = getaddrinfo(pr->host, portstr, &hints, &res);
	if (r != 0) {
		ctl_send("probe-failed %s %s", target,
			 r == EAI_SYSTEM ? strerror(errno) : gai_strerror(r));
		free(pr);
		return NULL;
	}
	for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
		int64_t left = deadline - now_ms();

		if (left <= 0)
			break;
		fd = connect_one(ai, (int) left);
		if (fd < 0) {
			last_err = -fd;
			fd = -1;
		}
	}
	freeaddrinfo(res);
	if (fd >= 0) {
		(void) close(fd);
		ctl_send("probe-ok %s", target);
	} else {
		ctl_send("probe-failed %s %s", target, strerror(last_err));
	}
	free(pr);
	return NULL;
}

/* "probe HOST:PORT": one detached thread (a resolver can stall). */
static void
probe_start(const char *spec, pthread_attr_t *attr)
{
	static struct np_policy one;
	struct probe *pr;
	pthread_t t;

	memset(&one, 0, sizeof(one));
	if (np_policy_add(&one, spec) < 0 || one.n != 1 ||
	    !np_policy_allows(&policy, one.allow[0].host, one.allow[0].port)) {
		ctl_send("probe-failed %s not on the allow-list", spec);
		return;
	}
	pr = calloc(1, sizeof(*pr));
	if (!pr) {
		ctl_send("probe-failed %s out of memory", spec);
		return;
	}
	memcpy(pr->host, one.allow[0].host, sizeof(pr->host));
	pr->port = one.allow[0].port;
	if (pthread_create(&t, attr, probe_main, pr) != 0) {
		ctl_send("probe-failed %s cannot start a thread", spec);
		free(pr);
	}
}

static void *
conn_main(void *arg)
{
	int fd = (int) (intptr_t) arg;

	serve(fd);
	(void) close(fd);
	pthread_mutex_lock(&lock);
	st.active--;
	pthread_mutex_unlock(&lock);
	(void) !write(wake_fd[1], "x", 1);
	return NULL;
}

static _Noreturn void
finish(void)
{
	pthread_mutex_lock(&lock);
	ctl_send("stats allowed=%lu refused=%lu failed=%lu", st.allowed, st.refused, st.failed);
	for (size_t i = 0; i < st.n_refusals; i++)
		ctl_send("refusal %s", st.refusals[i]);
	for (size_t i = 0; i < st.n_failures; i++)
		ctl_send("failure %s", st.failures[i]);
	ctl_send("end");
	_exit(0); /* ends the connection threads too */
}

/* One control record; a "listen" one carries the listening socket, a "probe" one starts a
 * probe. Returns the listening fd, -1 for none, or -2 at EOF or a broken control socket. */
static int
ctl_recv(pthread_attr_t *attr)
{
	char buf[NP_HOST_MAX + 64];
	size_t nfds = 0;
	int fd = -1;
	ssize_t n = fd_recv(CTL_FD, buf, sizeof(buf) - 1, 0, &fd, 1, &nfds, NULL);

	if (n == -EINTR || n == -EAGAIN)
		return -1;
	if (n <= 0)
		return -2;
	if (nfds == 0)
		fd = -1;
	buf[n] = '\0';
	if (fd < 0 && strncmp(buf, "probe ", 6) == 0) {
		probe_start(buf + 6, attr);
		return -1;
	}
	if (strcmp(buf, "listen") != 0 || fd < 0) {
		if (fd >= 0)
			(void) close(fd);
		ctl_send("error unexpected control record");
		return -1;
	}
	if (fcntl(fd, F_SETFL, O_NONBLOCK) < 0) {
		ctl_send("error fcntl: %s", strerror(errno));
		(void) close(fd);
		return -1;
	}
	ctl_send("listening");
	return fd;
}

static void
drop_privileges(const char *spec)
{
	unsigned long uid, gid;
	char *end;

	uid = strtoul(spec, &end, 10);
	if (*end != ':')
		die("bad --user '%s'", spec);
	gid = strtoul(end + 1, &end, 10);
	if (*end || uid == 0 || gid == 0)
		die("bad --user '%s'", spec);
	if (setgroups(0, NULL) < 0 || setresgid((gid_t) gid, (gid_t) gid, (gid_t) gid) < 0 ||
	    setresuid((uid_t) uid, (uid_t) uid, (uid_t) uid) < 0)
		die("become uid %lu: %s", uid, strerror(errno));
}

static int
apply_landlock(void)
{
	const char *none[] = { NULL }, *what = NULL;
	unsigned ports[NP_MAX_ALLOW + 2] = { 53 };
	size_t n = 1;
	int abi;

	if (ab_landlock_abi() <= 0)
		return 0; /* best effort: the proxy is not the sandbox */
	for (size_t i = 0; i < policy.n; i++) {
		bool seen = false;

		for (size_t k = 0; k < n; k++)
			seen |= ports[k] == policy.allow[i].port;
		if (!seen)
			ports[n++] = policy.allow[i].port;
	}
	ports[n] = 0;
	abi = ab_landlock_apply(none, true, ports, true, false, &what);
	if (abi < 0)
		die("Landlock: %s: %s", what ? what : "?", strerror(-abi));
	return abi;
}

int
main(int argc, char **argv)
{
	const char *user = NULL;
	pthread_attr_t attr;
	int lfd = -1, abi;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--ctl-fd") == 0 && i + 1 < argc) {
			if (strcmp(argv[++i], "3") != 0)
				die("--ctl-fd must be 3");
		} else if (strcmp(argv[i], "--user") == 0 && i + 1 < argc) {
			user = argv[++i];
		} else if (strcmp(argv[i], "--allow") == 0 && i + 1 < argc) {
			if (np_policy_add(&policy, argv[++i]) < 0)
				die("bad --allow '%s'", argv[i]);
		} else {
			die("bad arguments (usage: --ctl-fd 3 [--user UID:GID] [--allow "
			    "HOST[:PORT]]...)");
		}
	}
	if (fcntl(CTL_FD, F_SETFD, FD_CLOEXEC) < 0)
		die("no control socket on fd 3");
	signal(SIGPIPE, SIG_IGN);
	if (user && geteuid() == 0)
		drop_privileges(user);
	/* the sandbox may run as the same uid: no ptrace, no /proc/PID/mem of us */
	if (prctl(PR_SET_DUMPABLE, 0) < 0)
		die("prctl(PR_SET_DUMPABLE): %s", strerror(errno));
	abi = apply_landlock();
	if (pipe2(wake_fd, O_CLOEXEC | O_NONBLOCK) < 0)
		die("pipe2: %s", strerror(errno));
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 256 * 1024);
	ctl_send("ready landlock=%d", abi);

	for (;;) {
		int active;

		pthread_mutex_lock(&lock);
		active = st.active;
		pthread_mutex_unlock(&lock);

		struct pollfd p[3] = {
			{ .fd = CTL_FD, .events = POLLIN },
			{ .fd = wake_fd[0], .events = POLLIN },
			{ .fd = lfd, .events = active < MAX_CONNS ? POLLIN : 0 },
		};

		if (poll(p, lfd >= 0 ? 3 : 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			die("poll: %s", strerror(errno));
		}
		if (p[0].revents) {
			int fd = ctl_recv(&attr);

			if (fd == -2)
				finish();
			if (fd >= 0 && lfd >= 0)
				(void) close(fd);
			else if (fd >= 0)
				lfd = fd;
		}
		if (p[1].revents) {
			char sink[64];

			while (read(wake_fd[0], sink, sizeof(sink)) > 0)
				;
		}
		if (lfd >= 0 && (p[2].revents & POLLIN)) {
			int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
			pthread_t t;

			if (c < 0)
				continue;
			pthread_mutex_lock(&lock);
			st.active++;
			pthread_mutex_unlock(&lock);
			if (pthread_create(&t, &attr, conn_main, (void *) (intptr_t) c) != 0) {
				(void) close(c);
				pthread_mutex_lock(&lock);
				st.active--;
				pthread_mutex_unlock(&lock);
			}
		}
	}
}

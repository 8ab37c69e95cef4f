/* netproxy.c: agentbox's side of the install sandbox's network (see netproxy.h): start the
 * registry proxy, make the network namespace and hand it the listening socket, collect the
 * summary. The proxy itself is src/proxy/ab-netproxy.c. */
#include "netproxy.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "../spec/cfg.h"
#include "../util/fdutil.h"
#include "../util/macro.h"
#include "../util/path.h"
#include "../util/xalloc.h"
#include "config.h"

#define CTL_FD     3    /* the control socket's number in the proxy */
#define CTL_WAIT   5000 /* ms for the proxy to answer a control record */
#define STOP_WAIT  3000 /* ms for its summary */
#define PROBE_WAIT 6000 /* ms for the answers to every probe (the proxy gives up after 5 s) */
#define MAX_REPORT 32   /* refusals kept for the report */

void
netproxy_init(struct ab_netproxy *np)
{
	memset(np, 0, sizeof(*np));
	np->ctl_fd = -1;
}

/* AGENTBOX_NETPROXY, else next to the agentbox binary (the build tree), else libexec. */
static int
find_helper(char *buf, size_t size)
{
	cleanup_free char *p = path_helper(cfg()->netproxy, "agentbox-netproxy");

	snprintf(buf, size, "%s", p);
	return access(buf, X_OK) == 0 ? 0 : -ENOENT;
}

/* One text record from the proxy within ms, NUL-terminated. Returns its length, 0 at EOF,
 * -ETIMEDOUT, or -errno. */
static ssize_t
ctl_read(int fd, char *buf, size_t size, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	int64_t end = now_ms() + ms;
	ssize_t n;

	for (;;) {
		int left = (int) (end - now_ms());
		int r = poll(&p, 1, left > 0 ? left : 0);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return -ETIMEDOUT;
		n = recv(fd, buf, size - 1, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		buf[n] = '\0';
		return n;
	}
}

/* In the forked child: put from on fd to, inherited across exec. */
static int
move_fd(int from, int to)
{
	if (from == to)
		return fcntl(to, F_SETFD, 0);
	return dup2(from, to) < 0 ? -1 : 0;
}

static char *
describe(const struct np_policy *p)
{
	struct strv hosts = { 0 };
	char t[NP_HOST_MAX + 16], *list, *d;

	if (p->n == 0)
		return xstrdup("own network namespace; nothing outside it is reachable (the "
			       "registry proxy allows no host)");
	for (size_t i = 0; i < p->n; i++) {
		np_format_target(t, sizeof(t), p->allow[i].host, p->allow[i].port);
		strv_push(&hosts, t);
	}
	list = strv_join(&hosts, ", ");
	d = xasprintf("own network namespace; only the registry proxy (%s) is reachable", list);
	free(list);
	strv_done(&hosts);
	return d;
}

int
netproxy_start(struct ab_netproxy *np, uid_t uid, gid_t gid, struct ab_err *err)
{
	char helper[PATH_MAX], msg[512];
	struct strv av = { 0 };
	int sv[2];
	pid_t pid;
	ssize_t n;

	if (find_helper(helper, sizeof(helper)) < 0) {
		ab_err_set(err, -ENOENT,
			   "agentbox-netproxy was not found next to agentbox or in %s",
			   AB_LIBEXECDIR);
		return ab_err_fix(err, "reinstall agentbox (meson install), or set "
				       "AGENTBOX_NETPROXY");
	}
	strv_push_n(&av, 3, helper, "--ctl-fd", "3");
	if (uid != (uid_t) -1) {
		strv_push(&av, "--user");
		strv_pushf(&av, "%u:%u", (unsigned) uid, (unsigned) gid);
	}
	for (size_t i = 0; i < np->policy.n; i++) {
		char t[NP_HOST_MAX + 16];

		np_format_target(t, sizeof(t), np->policy.allow[i].host, np->policy.allow[i].port);
		strv_push_n(&av, 2, "--allow", t);
	}
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		strv_done(&av);
		return ab_err_set(err, -errno, "socketpair for the network proxy: %s",
				  strerror(errno));
	}
	pid = fork();
	if (pid < 0) {
		int e = errno;

		(void) close(sv[0]);
		(void) close(sv[1]);
		strv_done(&av);
		return ab_err_set(err, -e, "fork the network proxy: %s", strerror(e));
	}
	if (pid == 0) {
		/* The middle process only makes the proxy an orphan: never our child, so the
		 * supervisor's wait for ECHILD never waits for it. */
		sigset_t none;
		int nul;

		sigemptyset(&none);
		(void) sigprocmask(SIG_SETMASK, &none, NULL);
		if (fork() != 0)
			_exit(0);
		/* its own session: a terminal's ^C is for agentbox, which then ends the proxy
		 * by closing the control socket */
		(void) setsid();
		if (move_fd(sv[1], CTL_FD) < 0)
			_exit(127);
		nul = open("/dev/null", O_RDWR | O_CLOEXEC);
		if (nul < 0 || move_fd(nul, STDIN_FILENO) < 0 || move_fd(nul, STDOUT_FILENO) < 0)
			_exit(127);
		(void) fds_close_from(CTL_FD + 1);
		execv(helper, strv_array(&av));
		_exit(127);
	}
	(void) close(sv[1]);
	(void) RETRY_EINTR(waitpid(pid, NULL, 0));
	strv_done(&av);
	np->ctl_fd = sv[0];
	n = ctl_read(np->ctl_fd, msg, sizeof(msg), CTL_WAIT);
	if (n > 0 && sscanf(msg, "ready landlock=%d", &np->proxy_landlock_abi) == 1) {
		np->detail = describe(&np->policy);
		return 0;
	}
	(void) close(np->ctl_fd);
	np->ctl_fd = -1;
	if (n > 6 && strncmp(msg, "error ", 6) == 0)
		return ab_err_set(err, -EIO, "the network proxy failed: %s", msg + 6);
	ab_err_set(err, n < 0 ? (int) n : -EIO, "the network proxy '%s' did not start%s", helper,
		   n == -ETIMEDOUT ? " in time" : "");
	return ab_err_fix(err, "reinstall agentbox, or set AGENTBOX_NETPROXY");
}

int
netproxy_probe(struct ab_netproxy *np, const struct np_policy *targets, struct ab_err *err)
{
	struct strv failed = { 0 };
	bool answered[NP_MAX_ALLOW] = { false };
	size_t left = targets->n;
	int64_t end = now_ms() + PROBE_WAIT;
	char msg[512], t[NP_HOST_MAX + 16];
	bool gone = false;
	int r = 0;

	if (np->ctl_fd < 0)
		return ab_err_set(err, -EINVAL, "the network proxy is not running");
	for (size_t i = 0; i < targets->n; i++) {
		char rec[NP_HOST_MAX + 32];
		int n;

		np_format_target(t, sizeof(t), targets->allow[i].host, targets->allow[i].port);
		n = snprintf(rec, sizeof(rec), "probe %s", t);
		if (send(np->ctl_fd, rec, (size_t) n, MSG_NOSIGNAL) < 0)
			return ab_err_set(err, -errno, "ask the network proxy: %s",
					  strerror(errno));
	}
	while (left > 0) {
		int64_t ms = end - now_ms();
		ssize_t n = ctl_read(np->ctl_fd, msg, sizeof(msg), ms > 0 ? (int) ms : 0);
		const char *rest = NULL;
		bool ok = false;

		if (n <= 0) {
			/* the proxy exited, or the time is up: named below */
			gone = n == 0;
			break;
		}
		if (strncmp(msg, "probe-ok ", 9) == 0) {
			rest = msg + 9;
			ok = true;
		} else if (strncmp(msg, "probe-failed ", 13) == 0) {
			rest = msg + 13;
		} else {
			continue;
		}
		for (size_t i = 0; i < targets->n; i++) {
			size_t tl;

			np_format_target(t, sizeof(t), targets->allow[i].host,
					 targets->allow[i].port);
			tl = strlen(t);
			if (answered[i] || strncmp(rest, t, tl) != 0 ||
			    (rest[tl] != '\0' && rest[tl] != ' '))
				continue;
			answered[i] = true;
			left--;
			if (!ok)
				strv_pushf(&failed, "%s: %s", t,
					   rest[tl] ? rest + tl + 1 : "failed");
			break;
		}
	}
	for (size_t i = 0; i < targets->n; i++) {
		if (answered[i])
			continue;
		np_format_target(t, sizeof(t), targets->allow[i].host, targets->allow[i].port);
		if (gone)
			strv_pushf(&failed, "%s: the network proxy exited", t);
		else
			strv_pushf(&failed, "%s: no answer within %d s", t, PROBE_WAIT / 1000 - 1);
	}
	if (failed.n > 0) {
		cleanup_free char *list = strv_join(&failed, "; ");

		r = ab_err_set(err, -EHOSTUNREACH, "cannot reach the package index: %s", list);
		err->exit = AB_EXIT_UNAVAILABLE;
	}
	strv_done(&failed);
	return r;
}

static int
loopback_up(struct ab_err *err)
{
	cleanup_fd int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct ifreq ifr = { 0 };

	if (s < 0)
		return ab_err_set(err, -errno, "socket: %s", strerror(errno));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
		return ab_err_set(err, -errno, "SIOCGIFFLAGS lo: %s", strerror(errno));
	ifr.ifr_flags |= IFF_UP;
	if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
		return ab_err_set(err, -errno, "bring lo up in the install's network namespace: %s",
				  strerror(errno));
	return 0;
}

int
netproxy_enter_netns(struct ab_netproxy *np, struct ab_err *err)
{
	struct sockaddr_in sin = { .sin_family = AF_INET,
				   .sin_port = htons(AB_NETPROXY_PORT),
				   .sin_addr = { htonl(INADDR_LOOPBACK) } };
	cleanup_fd int lfd = -1;
	char msg[512];
	ssize_t n;
	int r;

	if (np->ctl_fd < 0)
		return ab_err_set(err, -EINVAL, "the network proxy is not running");
	/* Root: a network namespace of the initial user namespace. Unprivileged: one owned by
	 * the user namespace ws_enter_mntns() made, where we hold CAP_NET_ADMIN; the sandbox's
	 * own user namespace (bwrap's) holds no capability over it either way. */
	if (unshare(CLONE_NEWNET) < 0) {
		ab_err_set(err, -errno, "cannot create a network namespace for the install: %s",
			   strerror(errno));
		return ab_err_fix(err, "run `agentbox doctor`");
	}
	r = loopback_up(err);
	if (r < 0)
		return r;
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0 || bind(lfd, (struct sockaddr *) &sin, sizeof(sin)) < 0 || listen(lfd, 128) < 0)
		return ab_err_set(err, -errno,
				  "listen on 127.0.0.1:%d in the install's network "
				  "namespace: %s",
				  AB_NETPROXY_PORT, strerror(errno));
	r = fd_send(np->ctl_fd, "listen", 6, &lfd, 1);
	if (r < 0)
		return ab_err_set(err, r, "hand the listening socket to the network proxy: %s",
				  strerror(-r));
	n = ctl_read(np->ctl_fd, msg, sizeof(msg), CTL_WAIT);
	if (n <= 0 || strcmp(msg, "listening") != 0)
		return ab_err_set(err, n < 0 ? (int) n : -EIO,
				  "the network proxy did not take the listening socket: %s",
				  n > 0 ? msg : (n == 0 ? "it exited" : strerror((int) -n)));
	/* the proxy holds it now; ours would only keep the port open after the proxy ended */
	np->netns_ready = true;
	return 0;
}

/* pip (requests) reads the first four, npm the npm_config_ ones */
static const char *const proxy_env_names[] = {
	"HTTPS_PROXY",     "https_proxy", "HTTP_PROXY", "http_proxy", "npm_config_https_proxy",
	"npm_config_proxy"
};

size_t
netproxy_env_count(void)
{
	return ARRAY_SIZE(proxy_env_names);
}

char *
netproxy_env(size_t i)
{
	return xasprintf("%s=http://127.0.0.1:%d", proxy_env_names[i], AB_NETPROXY_PORT);
}

void
netproxy_stop(struct ab_netproxy *np)
{
	char msg[512];
	unsigned long a, r, f;

	if (np->ctl_fd < 0)
		return;
	(void) shutdown(np->ctl_fd, SHUT_WR);
	while (ctl_read(np->ctl_fd, msg, sizeof(msg), STOP_WAIT) > 0) {
		if (sscanf(msg, "stats allowed=%lu refused=%lu failed=%lu", &a, &r, &f) == 3) {
			np->allowed = a;
			np->refused = r;
			np->failed = f;
			np->stats_valid = true;
		} else if (strncmp(msg, "refusal ", 8) == 0 && np->refusals.n < MAX_REPORT) {
			strv_push(&np->refusals, msg + 8);
		} else if (strncmp(msg, "failure ", 8) == 0 && np->failures.n < MAX_REPORT) {
			strv_push(&np->failures, msg + 8);
		} else if (strcmp(msg, "end") == 0) {
			break;
		}
	}
	(void) close(np->ctl_fd);
	np->ctl_fd = -1;
}

json_t *
netproxy_report(const struct ab_netproxy *np)
{
	json_t *o = json_object(), *hosts = json_array(), *ref = json_array();
	char t[NP_HOST_MAX + 16];

	for (size_t i = 0; i < np->policy.n; i++) {
		np_format_target(t, sizeof(t), np->policy.allow[i].host, np->policy.allow[i].port);
		json_array_append_new(hosts, json_string(t));
	}
	STRV_FOREACH (s, &np->refusals)
		json_array_append_new(ref, json_string(*s));
	snprintf(t, sizeof(t), "127.0.0.1:%d", AB_NETPROXY_PORT);
	json_object_set_new(o, "listen", json_string(t));
	json_object_set_new(o, "own_network_namespace", json_boolean(np->netns_ready));
	json_object_set_new(o, "allowed_hosts", hosts);
	json_object_set_new(o, "connections_allowed",
			    np->stats_valid ? json_integer((json_int_t) np->allowed) : json_null());
	json_object_set_new(o, "connections_refused",
			    np->stats_valid ? json_integer((json_int_t) np->refused) : json_null());
	json_object_set_new(o, "connections_failed",
			    np->stats_valid ? json_integer((json_int_t) np->failed) : json_null());
	json_object_set_new(o, "refused", ref);
	json_object_set_new(o, "proxy_landlock_abi", json_integer(np->proxy_landlock_abi));
	return o;
}

void
netproxy_done(struct ab_netproxy *np)
{
	if (np->ctl_fd >= 0)
		(void) close(np->ctl_fd);
	free(np->detail);
	strv_done(&np->refusals);
	strv_done(&np->failures);
	netproxy_init(np);
}

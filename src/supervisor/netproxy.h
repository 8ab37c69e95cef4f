/* netproxy.h: the network of `agentbox prepare`'s install sandbox. The install gets its own
 * network namespace with only `lo`; the one way out is AB_NETPROXY_PORT on 127.0.0.1 there,
 * a listening socket that agentbox-netproxy (src/proxy/ab-netproxy.c) serves from the host's
 * namespace: `CONNECT host:port` to the allow-listed registries, never to the host's loopback,
 * private or link-local addresses (netpolicy.h).
 *
 * Order: netproxy_start() in the host namespace (prepare, before run_main), then
 * netproxy_enter_netns() in run_main right after ws_enter_mntns() (agentbox is then in its own
 * user namespace when unprivileged, so it may create a network namespace), then bwrap
 * --share-net shares that namespace with the sandbox. netproxy_stop() after the install
 * collects what the proxy let through and refused. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include <sys/types.h>

#include "../proxy/netpolicy.h"
#include "../util/err.h"
#include "../util/strv.h"

/* Any port would do: the namespace is new and nothing else listens in it. */
#define AB_NETPROXY_PORT 3128

struct ab_netproxy {
	int ctl_fd; /* SOCK_SEQPACKET to agentbox-netproxy; -1 when not running */
	struct np_policy policy;
	int proxy_landlock_abi; /* Landlock in force in the proxy itself (0: none) */
	bool netns_ready;       /* run_main made the namespace and the proxy listens in it */
	char *detail;           /* for the report's sandbox.network */
	bool stats_valid;       /* netproxy_stop() got the proxy's summary */
	uint64_t allowed, refused, failed;
	struct strv refusals; /* "host:port: why", the first few */
	struct strv failures; /* "CONNECT host:port: why" for allowed but unreachable, likewise */
};

void netproxy_init(struct ab_netproxy *np);

/* Starts agentbox-netproxy (AGENTBOX_NETPROXY, next to agentbox, or in libexec) for
 * np->policy, detached (double fork: never a child of ours). A root caller passes the sandbox
 * user's uid/gid for it to run as; otherwise -1. */
int netproxy_start(struct ab_netproxy *np, uid_t uid, gid_t gid, struct ab_err *err);

/* Before the install: does each target (allow-listed "HOST:PORT") resolve and accept a TCP
 * connection, from the proxy, within about 5 s? The probes run at once, in the proxy (which
 * has the host's resolver); nothing is sent over the connections. Returns 0, or -EHOSTUNREACH
 * with err saying which target failed and why (exit status AB_EXIT_UNAVAILABLE). */
int netproxy_probe(struct ab_netproxy *np, const struct np_policy *targets, struct ab_err *err);

/* In agentbox's own (user and) mount namespace: a new network namespace, `lo` up, a listening
 * socket on 127.0.0.1:AB_NETPROXY_PORT handed to the proxy. From here on agentbox and every
 * child it starts are in that namespace. */
int netproxy_enter_netns(struct ab_netproxy *np, struct ab_err *err);

/* The variables that point pip and npm at the proxy: netproxy_env(i) is "NAME=URL",
 * malloc'd, for i < netproxy_env_count(). */
size_t netproxy_env_count(void);
char *netproxy_env(size_t i);

/* Ends the proxy and reads its summary (connections allowed, refused, failed). */
void netproxy_stop(struct ab_netproxy *np);

/* The report's "network_proxy" object. */
json_t *netproxy_report(const struct ab_netproxy *np);

void netproxy_done(struct ab_netproxy *np);

/* netcheck.h: agentbox-init's check that the sandbox's network namespace is a private one
 * with nothing in it but loopback. It is what keeps the sandbox off the network: the
 * script may use its own loopback freely (TCP and UDP, bind, listen, connect), so the
 * namespace itself is verified before the script starts, and the run refused otherwise. */
#pragma once

#include <stddef.h>

/* The variable that hands agentbox-init the inode of the namespace the sandbox must not share
 * (bwrap --setenv; "0": only the lo-only check). Not an argument: /proc/1/cmdline is readable
 * by the script, and the host's namespace inode is no business of its (issue 24). agentbox-init
 * removes it from the environment before it starts the command. */
#define AB_NETCHECK_ENV "AGENTBOX_INIT_NET_CHECK"

/* Prefix of the SETUP_FAILED text of a failed check (run.c gives it its own fix). */
#define AB_NETCHECK_PREFIX "network namespace check: "

/* Checks the calling process's network namespace: its inode is not not_ino (the namespace
 * agentbox started in; 0: skip this part), its only interface is lo (/proc/self/net/dev),
 * and every IPv4 and IPv6 route goes through lo (/proc/self/net/route, ipv6_route).
 * Static buffers, no allocation. Returns 0, or -EPERM with why (whysz bytes) saying what
 * was found. */
int ab_netcheck(unsigned long long not_ino, char *why, size_t whysz);

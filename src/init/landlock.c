#include "landlock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <linux/landlock.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

/* Debian 12's linux-libc-dev (6.1) stops at ABI 3; newer rights are defined here by value
 * (include/uapi/linux/landlock.h). */
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15)
#endif
#ifndef LANDLOCK_ACCESS_NET_BIND_TCP
#define LANDLOCK_ACCESS_NET_BIND_TCP    (1ULL << 0)
#define LANDLOCK_ACCESS_NET_CONNECT_TCP (1ULL << 1)
#endif
#ifndef LANDLOCK_RULE_NET_PORT
#define LANDLOCK_RULE_NET_PORT 2
#endif
#ifndef LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
#define LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0)
#define LANDLOCK_SCOPE_SIGNAL               (1ULL << 1)
#endif
#ifndef LANDLOCK_CREATE_RULESET_VERSION
#define LANDLOCK_CREATE_RULESET_VERSION (1U << 0)
#endif

/* The ruleset attribute as of ABI 6; older kernels get a shorter size. */
struct ab_ruleset_attr {
	uint64_t handled_access_fs;
	uint64_t handled_access_net;
	uint64_t scoped;
};

struct ab_path_beneath {
	uint64_t allowed_access;
	int32_t parent_fd;
} __attribute__((packed));

/* struct landlock_net_port_attr (ABI 4) */
struct ab_net_port {
	uint64_t allowed_access;
	uint64_t port;
};

int
ab_landlock_abi(void)
{
	long v = syscall(__NR_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);

	return v < 0 ? 0 : (int) v;
}

/* Everything that changes the filesystem. Reads and exec stay unhandled (allowed): the mount
 * namespace already decides what is visible, and it is all read-only but these paths. */
static uint64_t
write_rights(int abi)
{
	uint64_t r = LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_REMOVE_DIR |
		     LANDLOCK_ACCESS_FS_REMOVE_FILE | LANDLOCK_ACCESS_FS_MAKE_CHAR |
		     LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_REG |
		     LANDLOCK_ACCESS_FS_MAKE_SOCK | LANDLOCK_ACCESS_FS_MAKE_FIFO |
		     LANDLOCK_ACCESS_FS_MAKE_BLOCK | LANDLOCK_ACCESS_FS_MAKE_SYM;

	if (abi >= 2)
		r |= LANDLOCK_ACCESS_FS_REFER;
	if (abi >= 3)
		r |= LANDLOCK_ACCESS_FS_TRUNCATE;
	return r;
}

static int
add_path(int ruleset, const char *path, uint64_t rights)
{
	struct ab_path_beneath pb = { .allowed_access = rights };
	int fd = open(path, O_PATH | O_CLOEXEC);
	int r = 0;

	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	pb.parent_fd = fd;
	if (syscall(__NR_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &pb, 0) < 0)
		r = -errno;
	(void) close(fd);
	return r;
}

int
ab_landlock_apply(const char **writable_dirs, bool net, const unsigned *connect_ports, bool scope,
		  bool ptys, const char **ret_what)
{
	static const char *const devices[] = { "/dev/null",   "/dev/zero",    "/dev/full",
					       "/dev/random", "/dev/urandom", NULL };
	/* In the sandbox /dev/pts is bwrap's private devpts instance (--dev: newinstance,
	 * /dev/ptmx links to its ptmx): the ptys the script opens itself, never a host
	 * terminal; /dev/tty is the caller's controlling terminal, which after --new-session can
	 * only be one of those. Never for a caller in the host's /dev (agentbox-netproxy). */
	static const char *const pty_devices[] = { "/dev/tty", "/dev/pts", NULL };
	struct ab_ruleset_attr attr = { 0 };
	size_t attr_size = sizeof(uint64_t);
	int abi = ab_landlock_abi();
	int fd, r;

	if (abi <= 0) {
		*ret_what = "Landlock is not available in this kernel";
		return -EOPNOTSUPP;
	}
	attr.handled_access_fs = write_rights(abi);
	if (net && abi >= 4) {
		attr.handled_access_net =
			LANDLOCK_ACCESS_NET_BIND_TCP | LANDLOCK_ACCESS_NET_CONNECT_TCP;
		attr_size = 2 * sizeof(uint64_t);
	}
	if (scope && abi >= 6) {
		attr.scoped = LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | LANDLOCK_SCOPE_SIGNAL;
		attr_size = 3 * sizeof(uint64_t);
	}
	fd = (int) syscall(__NR_landlock_create_ruleset, &attr, attr_size, 0);
	if (fd < 0) {
		*ret_what = "landlock_create_ruleset";
		return -errno;
	}
	for (const char **d = writable_dirs; *d; d++) {
		r = add_path(fd, *d, attr.handled_access_fs);
		if (r < 0) {
			*ret_what = "landlock_add_rule (directory)";
			(void) close(fd);
			return r;
		}
	}
	for (const char *const *d = devices; *d; d++) {
		r = add_path(fd, *d, LANDLOCK_ACCESS_FS_WRITE_FILE);
		if (r < 0) {
			*ret_what = "landlock_add_rule (device)";
			(void) close(fd);
			return r;
		}
	}
	for (const char *const *d = pty_devices; ptys && *d; d++) {
		r = add_path(fd, *d, LANDLOCK_ACCESS_FS_WRITE_FILE);
		if (r < 0) {
			*ret_what = "landlock_add_rule (pty)";
			(void) close(fd);
			return r;
		}
	}
	for (const unsigned *p = connect_ports; net && abi >= 4 && p && *p; p++) {
		struct ab_net_port np = { .allowed_access = LANDLOCK_ACCESS_NET_CONNECT_TCP,
					  .port = *p };

		if (syscall(__NR_landlock_add_rule, fd, LANDLOCK_RULE_NET_PORT, &np, 0) < 0) {
			*ret_what = "landlock_add_rule (TCP port)";
			r = -errno;
			(void) close(fd);
			return r;
		}
	}
	/* bwrap already set no_new_privs; setting it again is harmless and makes this layer
	 * independent of who started us. */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
		*ret_what = "PR_SET_NO_NEW_PRIVS";
		(void) close(fd);
		return -errno;
	}
	if (syscall(__NR_landlock_restrict_self, fd, 0) < 0) {
		*ret_what = "landlock_restrict_self";
		r = -errno;
		(void) close(fd);
		return r;
	}
	(void) close(fd);
	*ret_what = NULL;
	return abi;
}

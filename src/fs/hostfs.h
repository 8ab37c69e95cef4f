/* hostfs.h: paths a caller hands agentbox (--workspace, --input, --ro-bind, --collect,
 * --report, --runs-dir, --cache-dir) are hostile input too. Each is resolved once into an fd,
 * judged by what that fd is (device, inode, owner, mount), and used through the fd from then
 * on: never resolved by name a second time, so a name swapped after the check changes
 * nothing. */
#pragma once

#include <stdbool.h>

#include <sys/stat.h>
#include <sys/types.h>

#include "../util/err.h"
#include "../util/strv.h"

enum hostfs_flags {
	HOSTFS_NOFOLLOW = 1 << 0, /* the last component must not be a symlink */
	HOSTFS_DIR = 1 << 1,      /* the result must be a directory */
	HOSTFS_LINK_OK = 1 << 2,  /* a symlink as the last component: return the link itself */
	HOSTFS_ANY_LINK = 1 << 3, /* follow any symlink (for what agentbox only reads) */
};

/* Opens `path` (absolute, or relative to the cwd) component by component with
 * O_PATH|O_NOFOLLOW. Unless HOSTFS_ANY_LINK, a symlink on the way is followed only when it
 * belongs to root or to the caller (euid): one another user planted, or could swap, is
 * refused, so a local user cannot point agentbox at a tree of their choosing to write in.
 * What agentbox only reads for itself or binds read-only (read-only binds, interpreters) may
 * follow any symlink: the object reached is judged by its fd (hostfs_refusal). --input is not
 * among them: it copies what it reaches to where the script reads it. `what` names the option
 * in messages.
 * Returns an O_PATH|O_CLOEXEC fd, or -errno with err set (ENOENT, ELOOP, ENOTDIR, EPERM for
 * an untrusted symlink). */
int hostfs_open(const char *path, unsigned flags, const char *what, struct ab_err *err);

/* hostfs_open with a relative `path` starting at dirfd (an fd hostfs_open returned, e.g. for
 * /etc): the same rules for every component after it, and an absolute symlink target starts
 * again at /. AT_FDCWD: the cwd. */
int hostfs_open_at(int dirfd, const char *path, unsigned flags, const char *what,
		   struct ab_err *err);

/* Like hostfs_open for the parent directory of `path`; *ret_base is the last component
 * (malloc'd; never "", "." or ".."). For files agentbox creates (--report, --collect DIR). */
int hostfs_open_parent(const char *path, unsigned flags, const char *what, char **ret_base,
		       struct ab_err *err);

/* Opens the object behind the O_PATH fd for I/O (through /proc/self/fd/N: the same inode,
 * never a name). flags as for open(2); O_CLOEXEC is added. Returns an fd or -1 (errno). */
int hostfs_reopen(int fd, int flags);

/* The path the kernel gives the object behind fd (readlink of /proc/self/fd/N): for messages
 * and for the path-shaped rules (credential names). malloc'd; NULL when it cannot say. */
char *hostfs_fd_path(int fd);

/* realpath(3) through hostfs_open (HOSTFS_ANY_LINK): malloc'd, or NULL with
 * errno set. For path logic on names the caller gave; binds are made from fds, not from it. */
char *hostfs_realpath(const char *path);

/* True when fd is the root of a mount (statx STATX_ATTR_MOUNT_ROOT, or its mount id differs
 * from its parent's). */
bool hostfs_is_mount_root(int fd);

/* True when `dir` is `fd` itself or one of its ancestors (compared by device and inode, walking
 * ".." up from fd to /). */
bool hostfs_is_within(int fd, const struct stat *dir);

enum hostfs_use {
	HOSTFS_USE_WORKSPACE, /* bound read-write at /work */
	HOSTFS_USE_INPUT,     /* copied into the workspace (read) */
	HOSTFS_USE_COLLECT,   /* agentbox writes new files into it */
};

/* True when st is the object one of the --allow-bind paths in allowed (may be NULL) leads to
 * (compared by device and inode). */
bool hostfs_is_allowed(const struct stat *st, const struct strv *allowed);

/* Why the object behind fd must not be used as `use` (a phrase: "a mount point"), or NULL
 * when it may. real is hostfs_fd_path(fd) (may be NULL). runs_root_fd is the runs directory
 * (-1: none): anything inside it, or holding it, is refused. allowed are the --allow-bind paths:
 * they lift the credential rules (never /, the system directories, home directories or the runs
 * directory). Refused for every use: /, the system directories themselves (/usr /etc /var
 * /boot /proc /sys /dev /run /home /root /srv /opt /tmp /var/tmp /bin /sbin /lib /lib64 /mnt
 * /media), anything under /proc /sys /dev /run /boot /etc (a collect destination or workspace
 * under /usr too), any user's home directory itself, and what refusal_mount() refuses.
 * A workspace or collect destination must also not be a mount point, and not be or contain
 * the runs directory. */
const char *hostfs_refusal(int fd, const char *real, enum hostfs_use use, int runs_root_fd,
			   const struct strv *allowed);

/* A destination agentbox writes new files into (--collect DIR, `agentbox collect RUN DIR`):
 * its parent opened once (only trusted symlinks), DIR created there when missing (0755),
 * opened O_NOFOLLOW, refused when hostfs_refusal(HOSTFS_USE_COLLECT) says so or when it is
 * not writable. Returns an O_DIRECTORY fd, or -errno with a usage error (exit 2) in err. */
int hostfs_open_collect(const char *dir, const char *what, int runs_root_fd, struct ab_err *err);

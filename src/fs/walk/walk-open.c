/* walk-open.c: opening one name beneath a directory fd without following a symlink or
 * crossing a mount (openat2 RESOLVE_BENEATH and friends, or an O_NOFOLLOW + mount id
 * fallback), and climbing back up by "..", checked against what was recorded on the way
 * down. Shared by walk_tree and walk_remove_tree. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "../../util/fdutil.h"
#include "../../util/macro.h"
#include "walk-internal.h"

#ifndef SYS_openat2
#define SYS_openat2 437 /* the same on every architecture */
#endif

#define WALK_RESOLVE \
	(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV)

bool walk_force_no_openat2;

/* openat2() returned ENOSYS once: Linux < 5.6, or a seccomp filter that hides it. */
static bool openat2_missing;

/* The mount id of fd, or -errno. name_to_handle_at() with no room for the handle still
 * reports the mount id (with EOVERFLOW); filesystems without file handles refuse before that,
 * so /proc/self/fdinfo is the second source. */
static int
mount_id_of(int fd)
{
	union {
		struct file_handle fh;
		char space[sizeof(struct file_handle) + 8];
	} h = { .fh.handle_bytes = 0 };
	char path[64], buf[4096];
	const char *p;
	int id = -1;

	if (name_to_handle_at(fd, "", &h.fh, &id, AT_EMPTY_PATH) == 0 || errno == EOVERFLOW)
		return id;
	(void) snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	if (read_small_file_at(AT_FDCWD, path, buf, sizeof(buf)) < 0)
		return -ENOENT;
	p = strstr(buf, "mnt_id:");
	if (!p || sscanf(p, "mnt_id: %d", &id) != 1 || id < 0)
		return -ENOENT;
	return id;
}

int
walk_open_beneath(int dirfd, const char *name, int flags)
{
	int fd;

	/* openat2() refuses O_PATH with any flag but O_DIRECTORY|O_NOFOLLOW|O_CLOEXEC */
	flags |= O_NOFOLLOW | O_CLOEXEC | (flags & O_PATH ? 0 : O_NOCTTY);
	if (!walk_force_no_openat2 && !openat2_missing) {
		struct open_how how = {
			.flags = (uint64_t) (unsigned) flags,
			.resolve = WALK_RESOLVE,
		};
		long r = RETRY_EINTR(syscall(SYS_openat2, dirfd, name, &how, sizeof(how)));

		if (r >= 0)
			return (int) r;
		if (errno != ENOSYS)
			return -errno;
		openat2_missing = true;
	}
	/* fallback: openat2() needs Linux 5.6. Callers also compare st_dev; the mount id catches
	 * a bind mount of the same filesystem when it can be read. */
	fd = RETRY_EINTR(openat(dirfd, name, flags));
	if (fd < 0)
		return -errno;
	{
		int a = mount_id_of(dirfd), b = a >= 0 ? mount_id_of(fd) : -1;

		if (a >= 0 && b >= 0 && a != b) {
			(void) close(fd);
			return -EXDEV;
		}
	}
	return fd;
}

int
walk_reopen_parent(int dirfd, dev_t dev, ino_t ino)
{
	cleanup_fd int fd = -1;
	struct stat st;

	fd = RETRY_EINTR(openat(dirfd, "..", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISDIR(st.st_mode) || st.st_dev != dev || st.st_ino != ino)
		return -ESTALE;
	return steal_fd(&fd);
}

bool
walk_is_dot_or_dotdot(const char *s)
{
	return s[0] == '.' && (s[1] == '\0' || (s[1] == '.' && s[2] == '\0'));
}

bool
walk_is_fd_exhaustion(int r)
{
	return r == -EMFILE || r == -ENFILE || r == -ENOMEM;
}

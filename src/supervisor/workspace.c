/* workspace.c: everything agentbox does to a run's files on the host side: its private mount
 * namespace, the workspace and /etc tmpfs, staged read-only binds, copying the script and
 * inputs in, --stdin, collecting what the script left, and taking it all down again. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <linux/openat2.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "../fs/hostfs.h"
#include "../fs/walk/walk.h"
#include "../util/fdutil.h"
#include "../util/macro.h"
#include "../util/xalloc.h"
#include "binds.h"
#include "etcgen.h"
#include "runctx.h"
#include "rundir.h"

static int
write_proc_self(const char *file, const char *text)
{
	return write_small_file_at(AT_FDCWD, file, text);
}

/* Root without CAP_SYS_ADMIN (a container's root: podman and Docker drop it): no mount
 * namespace without a user namespace. Ours maps root and the sandbox user to themselves, so
 * the run goes on as a root run (the script still runs as the sandbox user, never as uid 0;
 * cgroups are out of reach anyway). The maps are written by a helper left in the parent
 * namespace, where it still has CAP_SETUID and CAP_SETGID; after unshare we have them only
 * in the new namespace, which is not enough to map more than ourselves. */
static int
enter_root_userns(uid_t sb_uid, gid_t sb_gid, struct ab_err *err)
{
	int go[2], res[2], e = EIO, ws;
	pid_t self = getpid(), pid;
	char c = 'g';

	if (pipe2(go, O_CLOEXEC) < 0)
		return ab_err_set(err, -errno, "pipe2: %s", strerror(errno));
	if (pipe2(res, O_CLOEXEC) < 0) {
		e = errno;
		(void) close(go[0]);
		(void) close(go[1]);
		return ab_err_set(err, -e, "pipe2: %s", strerror(e));
	}
	pid = fork();
	if (pid == 0) {
		char path[64], map[96];
		int r = 0;

		(void) close(go[1]);
		(void) close(res[0]);
		if (read(go[0], &c, 1) != 1)
			_exit(1);
		snprintf(map, sizeof(map), "0 0 1\n%u %u 1\n", (unsigned) sb_uid,
			 (unsigned) sb_uid);
		snprintf(path, sizeof(path), "/proc/%d/uid_map", (int) self);
		r = write_small_file_at(AT_FDCWD, path, map);
		if (r == 0) {
			snprintf(map, sizeof(map), "0 0 1\n%u %u 1\n", (unsigned) sb_gid,
				 (unsigned) sb_gid);
			snprintf(path, sizeof(path), "/proc/%d/gid_map", (int) self);
			r = write_small_file_at(AT_FDCWD, path, map);
		}
		r = -r;
		(void) !write(res[1], &r, sizeof(r));
		_exit(0);
	}
	(void) close(go[0]);
	(void) close(res[1]);
	if (pid < 0) {
		e = errno;
	} else if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0) {
		e = errno;
	} else if (write(go[1], &c, 1) != 1 || read(res[0], &e, sizeof(e)) != sizeof(e)) {
		e = EIO;
	}
	(void) close(go[1]);
	(void) close(res[0]);
	if (pid > 0)
		(void) RETRY_EINTR(waitpid(pid, &ws, 0));
	if (e != 0) {
		ab_err_set(
			err, -e,
			"root without CAP_SYS_ADMIN (a container?): cannot make a user namespace "
			"for the run's mounts: %s",
			strerror(e));
		return ab_err_fix(err,
				  "give the container CAP_SETUID and CAP_SETGID (the engines' "
				  "default) and a seccomp profile that allows user namespaces "
				  "(contrib/container/run-flags), or run agentbox as a non-root "
				  "user in it");
	}
	return 0;
}

/* Root: a private mount namespace (in a container, with a user namespace: see above).
 * Unprivileged: a user namespace mapping only ourselves, plus a mount namespace. Either way
 * our mounts (the workspace tmpfs) die with this process, also when it is SIGKILLed: nothing
 * to unmount, nothing to leak. */
int
ws_enter_mntns(struct run_ctx *c, struct ab_err *err)
{
	char map[64];
	int r;

	if (c->host.is_root) {
		if (unshare(CLONE_NEWNS) < 0) {
			if (errno != EPERM)
				return ab_err_set(err, -errno, "unshare(CLONE_NEWNS): %s",
						  strerror(errno));
			r = enter_root_userns(c->sb_uid, c->sb_gid, err);
			if (r < 0)
				return r;
			c->root_userns = true;
		}
	} else {
		uid_t uid = geteuid();
		gid_t gid = getegid();

		if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0) {
			ab_err_set(err, -errno,
				   "cannot create a user namespace for the workspace: %s",
				   strerror(errno));
			return ab_err_fix(err, "%s", host_userns_fix(&c->host));
		}
		r = write_proc_self("/proc/self/setgroups", "deny");
		if (r == 0) {
			snprintf(map, sizeof(map), "%u %u 1", (unsigned) uid, (unsigned) uid);
			r = write_proc_self("/proc/self/uid_map", map);
		}
		if (r == 0) {
			snprintf(map, sizeof(map), "%u %u 1", (unsigned) gid, (unsigned) gid);
			r = write_proc_self("/proc/self/gid_map", map);
		}
		if (r < 0)
			return ab_err_set(err, r, "map the user namespace: %s", strerror(-r));
	}
	/* Never propagate our mounts back to the host (systemd makes / shared). */
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return ab_err_set(err, -errno, "make mounts private: %s", strerror(errno));
	return 0;
}

int
ws_mount_workspace(struct run_ctx *c, struct ab_err *err)
{
	const char *mnt = c->rd.mnt_work;
	char opts[256];
	uid_t uid = c->drop ? c->sb_uid : geteuid();
	gid_t gid = c->drop ? c->sb_gid : getegid();

	snprintf(opts, sizeof(opts), "size=%llu,nr_inodes=%llu,mode=0700,uid=%u,gid=%u",
		 (unsigned long long) c->lp.work_bytes,
		 (unsigned long long) c->lp.work_inodes + 1, /* +1: the root directory */
		 (unsigned) uid, (unsigned) gid);
	if (mount("agentbox-work", mnt, "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0)
		return ab_err_set(err, -errno, "mount the workspace tmpfs: %s", strerror(errno));
	c->tmpfs_mounted = true;
	c->res->workspace_mode = "tmpfs";
	c->work_fd = open(mnt, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (c->work_fd < 0)
		return ab_err_set(err, -errno, "open the workspace: %s", strerror(errno));
	return 0;
}

/* --collect DIR, before anything runs (hostfs_open_collect). */
int
ws_open_collect(struct run_ctx *c, struct ab_err *err)
{
	int fd = hostfs_open_collect(c->o->collect_dir, "--collect", c->rd.root_fd, err);

	if (fd < 0)
		return fd;
	c->collect_fd = fd;
	return 0;
}

/* --workspace DIR: opened once (only trusted symlinks on the way, DIR itself not a
 * symlink), judged by what the fd is, and used through that fd from then on. */
int
ws_open_workspace(struct run_ctx *c, int runs_root_fd, struct ab_err *err)
{
	const char *dir = c->o->workspace;
	cleanup_free char *real = NULL;
	const char *why;
	struct stat st;
	int fd;

	fd = hostfs_open(dir, HOSTFS_NOFOLLOW | HOSTFS_DIR, "--workspace", err);
	if (fd < 0) {
		/* a symlink, or an untrusted one on the way: a refusal; missing: like a
		 * missing script */
		if (fd == -ELOOP || fd == -EPERM || fd == -ENOTDIR)
			err->exit = AB_EXIT_USAGE;
		return fd;
	}
	c->ws_dir_fd = fd;
	real = hostfs_fd_path(fd);
	why = hostfs_refusal(fd, real, HOSTFS_USE_WORKSPACE, runs_root_fd, &c->o->allow_binds);
	if (why) {
		ab_err_usage(err, "refusing --workspace '%s'%s%s%s: it is %s", dir,
			     real && strcmp(real, dir) ? " (" : "",
			     real && strcmp(real, dir) ? real : "",
			     real && strcmp(real, dir) ? ")" : "", why);
		return ab_err_fix(err, "%s",
				  "pass a project directory of its own (e.g. ~/project/run1), or "
				  "copy files in with --input DIR and out with --collect OUT");
	}
	if (fstat(fd, &st) < 0)
		return ab_err_set(err, -errno, "--workspace '%s': %s", dir, strerror(errno));
	if (!c->host.is_root && st.st_uid != geteuid()) {
		ab_err_usage(err, "--workspace '%s' is owned by uid %u, not by you (uid %u)", dir,
			     (unsigned) st.st_uid, (unsigned) geteuid());
		return ab_err_fix(err, "use a directory you own");
	}
	if (st.st_mode & (S_IWGRP | S_IWOTH)) {
		ab_err_usage(err, "--workspace '%s' is shared: writable by group or others", dir);
		return ab_err_fix(err, "chmod go-w '%s', or use a directory of its own", dir);
	}
	c->ws_owner_uid = st.st_uid;
	c->ws_owner_gid = st.st_gid;
	c->work_fd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (c->work_fd < 0)
		return ab_err_set(err, -errno, "open --workspace '%s': %s", dir, strerror(errno));
	c->res->workspace = real ? steal_ptr(&real) : xstrdup(dir);
	return 0;
}

/* A user namespace for an idmapped mount: a child is created in a new user namespace, we
 * (root) write its maps, keep a handle on the namespace and let the child go. For a mount
 * idmapped with it, an on-disk id `inside` shows as `outside`, and a file created by
 * `outside` is written as `inside` (the map is "inside outside 1").
 * Returns an fd or -errno. */
static int
idmap_userns(uid_t inside_uid, uid_t outside_uid, gid_t inside_gid, gid_t outside_gid)
{
	char path[64], map[64];
	int p[2], fd = -1, r = 0, ws;
	pid_t pid;

	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	pid = (pid_t) syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, NULL, NULL, NULL, NULL);
	if (pid == 0) {
		char b;

		(void) close(p[1]);
		(void) !read(p[0], &b, 1); /* until the parent is done with us */
		_exit(0);
	}
	(void) close(p[0]);
	if (pid < 0) {
		r = -errno;
		(void) close(p[1]);
		return r;
	}
	snprintf(path, sizeof(path), "/proc/%d/uid_map", (int) pid);
	snprintf(map, sizeof(map), "%u %u 1\n", (unsigned) inside_uid, (unsigned) outside_uid);
	r = write_small_file_at(AT_FDCWD, path, map);
	if (r == 0) {
		snprintf(path, sizeof(path), "/proc/%d/gid_map", (int) pid);
		snprintf(map, sizeof(map), "%u %u 1\n", (unsigned) inside_gid,
			 (unsigned) outside_gid);
		r = write_small_file_at(AT_FDCWD, path, map);
	}
	if (r == 0) {
		snprintf(path, sizeof(path), "/proc/%d/ns/user", (int) pid);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			r = -errno;
	}
	(void) close(p[1]);
	while (waitpid(pid, &ws, 0) < 0 && errno == EINTR)
		;
	return r < 0 ? r : fd;
}

/* Mounts --workspace DIR (from its fd) on RUNS/.mnt/work, nosuid and nodev; bwrap binds that
 * at /work. Root callers: an idmapped mount that shows DIR's owner as the sandbox user, so the
 * script's new files belong to DIR's owner on the host and nothing is ever chowned.
 * Unprivileged callers: a plain bind (the sandbox runs as the caller, who owns DIR). */
int
ws_mount_dir(struct run_ctx *c, struct ab_err *err)
{
	struct mount_attr attr = { .attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV };
	cleanup_fd int tfd = -1, mp = -1, userns = -1;
	const char *dir = c->o->workspace;

	/* root: only DIR's own mount (a mount below DIR is not carried into the sandbox, so
	 * it is never writable there without the idmapping); unprivileged: everything the
	 * caller can reach anyway (a non-recursive clone is refused under locked mounts) */
	tfd = open_tree(c->ws_dir_fd, "",
			OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH |
				(c->drop ? 0 : AT_RECURSIVE));
	if (tfd < 0)
		return ab_err_set(err, -errno, "clone the mount of --workspace '%s': %s", dir,
				  strerror(errno));
	if (c->drop) {
		/* on disk DIR's owner, in the sandbox the sandbox user */
		userns = idmap_userns(c->ws_owner_uid, c->sb_uid, c->ws_owner_gid, c->sb_gid);
		if (userns < 0)
			return ab_err_set(err, userns, "create the idmapping for --workspace: %s",
					  strerror(-userns));
		attr.attr_set |= MOUNT_ATTR_IDMAP;
		attr.userns_fd = (uint64_t) userns;
	}
	if (mount_setattr(tfd, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0) {
		int e = errno;

		if (!c->drop)
			return ab_err_set(err, -e, "make --workspace nosuid,nodev: %s",
					  strerror(e));
		if (c->root_userns) {
			/* an idmapped mount needs CAP_SYS_ADMIN where DIR's filesystem was
			 * mounted: a container's root does not have it there */
			ab_err_set(err, -e,
				   "--workspace '%s': root without CAP_SYS_ADMIN (a container's "
				   "root) cannot make the idmapped mount that gives DIR to the "
				   "sandbox user (%s)",
				   dir, strerror(e));
			return ab_err_fix(
				err,
				"copy in and out with --input '%s' --collect OUT, or run "
				"agentbox in the container as DIR's owner (a non-root user)",
				dir);
		}
		ab_err_set(err, -e,
			   "--workspace '%s': this kernel or filesystem cannot make an idmapped "
			   "mount (%s; needs Linux >= 5.12 and a filesystem that supports them: "
			   "ext4, xfs, btrfs, tmpfs from 6.3...)",
			   dir, strerror(e));
		if (c->ws_owner_uid != 0)
			return ab_err_fix(err,
					  "run agentbox as the directory's owner (uid %u), or "
					  "copy in and out with --input '%s' --collect OUT",
					  (unsigned) c->ws_owner_uid, dir);
		return ab_err_fix(err, "copy in and out with --input '%s' --collect OUT", dir);
	}
	mp = open(c->rd.mnt_work, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (mp < 0 ||
	    move_mount(tfd, "", mp, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
		return ab_err_set(err, -errno, "mount --workspace for the sandbox: %s",
				  strerror(errno));
	c->res->workspace_mode = c->drop ? "idmapped" : "bind";
	return 0;
}

/* A project's token files in --workspace DIR (issue 25: refusal_token_files, a .npmrc with
 * `package-lock=false` or with an auth token): the run goes ahead, each one covered in the
 * sandbox by an empty read-only file, mounted over it on RUNS/.mnt/work in our own mount
 * namespace (bwrap binds /work recursively, so the cover comes along; the script cannot
 * unmount it, write it, or rename or remove what is under it). The cover is a file of a tiny
 * tmpfs that has no mount point at all (fsopen/fsmount). Only DIR's own entries: the same
 * scope as the refusal it replaces. Each hidden name goes to the report. */
int
ws_hide_token_files(struct run_ctx *c, struct ab_err *err)
{
	cleanup_fd int fs = -1, mnt = -1, work = -1;
	struct mount_attr ro = { .attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID |
					     MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC };

	for (const char *const *t = refusal_token_files; *t; t++) {
		struct open_how how = { .flags = O_PATH | O_NOFOLLOW | O_CLOEXEC,
					.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
						   RESOLVE_NO_XDEV | RESOLVE_NO_MAGICLINKS };
		cleanup_fd int target = -1, cover = -1;
		struct stat st;
		long fd;

		/* a regular file of DIR's (a link leads nowhere secret in the sandbox) */
		if (fstatat(c->work_fd, *t, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
			continue;
		if (fs < 0) {
			int e = 0;

			fs = fsopen("tmpfs", FSOPEN_CLOEXEC);
			if (fs < 0 || fsconfig(fs, FSCONFIG_SET_STRING, "size", "4k", 0) < 0 ||
			    fsconfig(fs, FSCONFIG_SET_STRING, "nr_inodes", "4", 0) < 0 ||
			    fsconfig(fs, FSCONFIG_SET_STRING, "mode", "0755", 0) < 0 ||
			    fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0 ||
			    (mnt = fsmount(fs, FSMOUNT_CLOEXEC, 0)) < 0)
				e = errno;
			if (!e) {
				int f = openat(mnt, "empty",
					       O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);

				if (f < 0)
					e = errno;
				else
					(void) close(f);
			}
			if (!e) {
				work = open(c->rd.mnt_work,
					    O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
				if (work < 0)
					e = errno;
			}
			if (e) {
				ab_err_set(err, -e,
					   "--workspace '%s' holds %s: cannot cover it for the "
					   "sandbox: "
					   "%s",
					   c->o->workspace, *t, strerror(e));
				return ab_err_fix(err,
						  "move %s out of the directory, or copy in the "
						  "files the script needs with --input",
						  *t);
			}
		}
		fd = syscall(SYS_openat2, work, *t, &how, sizeof(how));
		target = (int) fd;
		cover = open_tree(mnt, "empty", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
		if (target < 0 || cover < 0 ||
		    mount_setattr(cover, "", AT_EMPTY_PATH, &ro, sizeof(ro)) < 0 ||
		    move_mount(cover, "", target, "",
			       MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0) {
			int e = errno;

			ab_err_set(err, -e,
				   "--workspace '%s' holds %s: cannot cover it for the sandbox: %s",
				   c->o->workspace, *t, strerror(e));
			return ab_err_fix(err,
					  "move %s out of the directory, or copy in the files the "
					  "script needs with --input",
					  *t);
		}
		strv_push(&c->res->hidden_files, *t);
	}
	return 0;
}

/* prepare: the environment is built on a tmpfs of its own in our mount namespace, bound
 * read-write at its final path in the sandbox (scripts and shebangs name that path); the host
 * gets only agentbox's sanitised copy (ws_env_copy_out). */
int
ws_mount_env(struct run_ctx *c, struct ab_err *err)
{
	char opts[160];
	uid_t uid = c->drop ? c->sb_uid : geteuid();
	gid_t gid = c->drop ? c->sb_gid : getegid();

	snprintf(opts, sizeof(opts), "size=%llu,nr_inodes=%llu,mode=0755,uid=%u,gid=%u",
		 (unsigned long long) c->o->env_bytes, (unsigned long long) c->o->env_inodes + 1,
		 (unsigned) uid, (unsigned) gid);
	if (mount("agentbox-env", c->rd.mnt_env, "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0)
		return ab_err_set(err, -errno, "mount the environment's tmpfs: %s",
				  strerror(errno));
	c->plan.rw_bind_src = xstrdup(c->rd.mnt_env);
	return 0;
}

/* prepare, after an install that exited 0: copy the environment into env_dst_fd with the
 * walker (regular files, directories, links that stay inside it or point into /usr; special
 * bits and group/other write stripped; created O_EXCL, never through a link; owned by us).
 * What it leaves out is counted in c->env_skipped and listed in the report. */
int
ws_env_copy_out(struct run_ctx *c, struct ab_err *err)
{
	struct ab_walk_opts wo = {
		.max_entries = c->o->env_inodes,
		.max_total_bytes = c->o->env_bytes,
		.hash_max_bytes = 1,
		.time_budget_ms = 10 * 60 * 1000,
		.dst_dirfd = c->o->env_dst_fd,
		.chown_uid = (uid_t) -1,
		.chown_gid = (gid_t) -1,
		.strip_uid = (uid_t) -1,
		.copy_symlinks = true,
	};
	struct ab_manifest m = { 0 };
	cleanup_fd int efd = open(c->rd.mnt_env, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	json_t *skipped;
	int r;

	if (efd < 0)
		return ab_err_set(err, -errno, "open the built environment: %s", strerror(errno));
	r = walk_tree(efd, &wo, &m, err);
	if (r < 0)
		return r;
	skipped = json_array();
	for (size_t i = 0; i < m.n; i++) {
		const struct ab_entry *e = &m.entries[i];

		if (e->collected || e->type == AB_ENTRY_DIR)
			continue;
		c->env_skipped++;
		if (json_array_size(skipped) < 100) {
			cleanup_free char *esc = walk_escape_name(e->path);

			json_array_append_new(
				skipped, json_pack("{s:s, s:s}", "path", esc ? esc : "?", "reason",
						   e->reason ? e->reason : "not copied"));
		}
	}
	if (m.truncated)
		c->env_truncated = true;
	c->res->environment = json_pack(
		"{s:I, s:I, s:I, s:o, s:b}", "bytes", (json_int_t) m.copied_bytes, "entries",
		(json_int_t) m.total_entries, "skipped_count", (json_int_t) c->env_skipped,
		"skipped", skipped, "truncated", m.truncated);
	manifest_done(&m);
	return 0;
}

/* The sandbox's /tmp and /dev/shm, each a tmpfs of ours, and its /dev/pts (issue 24) rather than
 * bwrap's
 * --tmpfs, which takes a size but no nr_inodes: left to the kernel's default (one inode per
 * 8 KiB of the host's RAM), a script could hold about RAM/8 in each as inodes and user.*
 * xattrs (tmpfs charges both to the same inode space), none of it in "used" blocks. The
 * inode cap is the kernel's ratio applied to --tmp-size instead (limits_plan). */
int
ws_mount_scratch(struct run_ctx *c, struct ab_err *err)
{
	const char *mnt[2] = { c->rd.mnt_tmp, c->rd.mnt_shm };
	const char *name[2] = { "agentbox-tmp", "agentbox-shm" };
	uid_t uid = c->drop ? c->sb_uid : geteuid();
	gid_t gid = c->drop ? c->sb_gid : getegid();
	char opts[256];

	snprintf(opts, sizeof(opts), "size=%llu,nr_inodes=%llu,mode=0755,uid=%u,gid=%u",
		 (unsigned long long) c->lp.tmp_bytes, (unsigned long long) c->lp.tmp_inodes,
		 (unsigned) uid, (unsigned) gid);
	for (int i = 0; i < 2; i++)
		if (mount(name[i], mnt[i], "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0)
			return ab_err_set(err, -errno, "mount the sandbox's %s: %s",
					  i == 0 ? "/tmp" : "/dev/shm", strerror(errno));
	c->plan.tmp_src = xstrdup(c->rd.mnt_tmp);
	c->plan.shm_src = xstrdup(c->rd.mnt_shm);
	/* /dev/pts: bwrap's own devpts instance has no max=, so a run could take every pty the
	 * host allows (kernel.pty.max), each two ttys and their buffers, which no memory
	 * cgroup is charged for. An instance of ours caps them. */
	snprintf(opts, sizeof(opts), "newinstance,ptmxmode=0666,mode=0620,max=%u", AB_SANDBOX_PTYS);
	if (mount("devpts", c->rd.mnt_pts, "devpts", MS_NOSUID | MS_NOEXEC, opts) < 0)
		return ab_err_set(err, -errno, "mount the sandbox's /dev/pts: %s", strerror(errno));
	c->plan.pts_src = xstrdup(c->rd.mnt_pts);
	return 0;
}

/* The generated /etc on its own small tmpfs: the sandbox's mountinfo then shows no host
 * path for it (T35), and it disappears with our mount namespace. */
int
ws_mount_etc(struct run_ctx *c, struct ab_err *err)
{
	const char *dir = c->rd.mnt_etc;
	cleanup_fd int efd = -1;
	char opts[128];
	uid_t uid = c->drop ? c->sb_uid : geteuid();
	gid_t gid = c->drop ? c->sb_gid : getegid();
	struct strv skipped = { 0 };
	int r;

	snprintf(opts, sizeof(opts), "size=2m,nr_inodes=256,mode=0755,uid=%u,gid=%u",
		 (unsigned) uid, (unsigned) gid);
	if (mount("agentbox-etc", dir, "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0)
		return ab_err_set(err, -errno, "mount the sandbox /etc: %s", strerror(errno));
	c->etc_mounted = true;
	efd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (efd < 0)
		return ab_err_set(err, -errno, "open the sandbox /etc: %s", strerror(errno));
	c->plan.etc_src = xstrdup(dir);
	r = etcgen_fill(efd, c->owner_uid, c->owner_gid, c->o->share_net, c->plan.etc_binds,
			c->plan.n_etc_binds, c->cache_fd, &skipped, err);
	STRV_FOREACH (s, &skipped)
		result_warn(c->res, "host %s left out of the sandbox's /etc", *s);
	strv_done(&skipped);
	return r;
}

/* Every read-only bind (--ro-bind, an interpreter outside /usr, --venv, --node-modules) is
 * mounted from the fd its checks ran on onto RUNS/.mnt/ro/N, in our own mount namespace, and
 * bwrap binds that: no host path is resolved again after the check, and the sandbox user
 * reaches sources under /root it could not walk to. */
int
ws_stage_ro_binds(struct run_ctx *c, struct ab_err *err)
{
	cleanup_fd int ro = -1;

	if (c->plan.n_ro_binds == 0)
		return 0;
	ro = open(c->rd.mnt_ro, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (ro < 0)
		return ab_err_set(err, -errno, "open '%s': %s", c->rd.mnt_ro, strerror(errno));
	for (size_t i = 0; i < c->plan.n_ro_binds; i++) {
		struct ab_bind *b = &c->plan.ro_binds[i];
		cleanup_fd int tfd = -1, mp = -1;
		char name[32];
		struct stat st;

		if (b->staged)
			continue; /* already a mount of ours (the script's tmpfs) */
		if (b->fd < 0 || fstat(b->fd, &st) < 0)
			return ab_err_set(err, -EBADF, "internal: the bind of '%s' has no fd",
					  b->src);
		snprintf(name, sizeof(name), "%zu", i);
		/* the mountpoint has the source's type: a directory, or an empty file */
		if (S_ISDIR(st.st_mode)) {
			if (mkdirat(ro, name, 0755) < 0 && errno != EEXIST)
				return ab_err_set(err, -errno, "create %s/%s: %s", c->rd.mnt_ro,
						  name, strerror(errno));
		} else {
			int f = openat(ro, name, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);

			if (f < 0)
				return ab_err_set(err, -errno, "create %s/%s: %s", c->rd.mnt_ro,
						  name, strerror(errno));
			(void) close(f);
		}
		mp = openat(ro, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		tfd = open_tree(b->fd, "",
				OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE);
		if (mp < 0 || tfd < 0 ||
		    move_mount(tfd, "", mp, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) <
			    0)
			return ab_err_set(err, -errno, "bind '%s' for the sandbox: %s", b->src,
					  strerror(errno));
		free(b->src);
		b->src = xasprintf("%s/%s", c->rd.mnt_ro, name);
	}
	return 0;
}

/* Code that is not a file (--code TEXT, SCRIPT '-', or given by prepare/doctor): a sealed
 * memfd, so the rest of the run treats it exactly like a script file. */
static int
code_memfd(struct run_ctx *c, struct ab_err *err)
{
	cleanup_free char *buf = NULL;
	const char *code = c->o->code;
	size_t len = c->o->code_len;
	cleanup_fd int mfd = -1;

	if (!code) {
		ssize_t n = read_all_capped(STDIN_FILENO, AB_CODE_MAX, &buf);

		if (n < 0) {
			ab_err_set(err, (int) n, "read the script from stdin: %s",
				   n == -EFBIG ? "more than 16 MiB" : strerror((int) -n));
			return ab_err_fix(err, "pass a script file instead");
		}
		code = buf;
		len = (size_t) n;
	}
	if (len > AB_CODE_MAX)
		return ab_err_usage(err, "--code is longer than 16 MiB"),
		       ab_err_fix(err, "pass a script file");
	mfd = memfd_create("agentbox-script", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (mfd < 0)
		return ab_err_set(err, -errno, "memfd_create: %s", strerror(errno));
	if (write_all(mfd, code, len) < 0 || lseek(mfd, 0, SEEK_SET) < 0 ||
	    fcntl(mfd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) < 0)
		return ab_err_set(err, -errno, "hold the script in memory: %s", strerror(errno));
	c->script_fd = steal_fd(&mfd);
	return 0;
}

bool
ws_script_is_code(const struct run_ctx *c)
{
	return c->o->code || strcmp(c->o->script, "-") == 0;
}

int
ws_open_script(struct run_ctx *c, struct ab_err *err)
{
	const char *s = c->o->script;
	struct stat st;
	int fd;

	if (ws_script_is_code(c))
		return code_memfd(c, err);
	fd = open(s, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;

		if (e == ENOENT) {
			ab_err_set(err, -e, "script '%s' does not exist", s);
			return ab_err_fix(err, "check the path");
		}
		if (e == ELOOP) {
			ab_err_set(err, -e, "script '%s' is a symlink", s);
			return ab_err_fix(err, "pass the file it points to");
		}
		ab_err_set(err, -e, "cannot open script '%s': %s", s, strerror(e));
		return ab_err_fix(err, "make it readable by you");
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		(void) close(fd);
		ab_err_set(err, -EINVAL, "script '%s' is not a regular file", s);
		return ab_err_fix(err, "pass a .py or .js file");
	}
	c->script_fd = fd;
	return 0;
}

static char *
base_name(const char *path)
{
	const char *slash = strrchr(path, '/');
	char *b = xstrdup(slash ? slash + 1 : path);

	return b;
}

void
ws_name_script(struct run_ctx *c)
{
	if (c->o->session)
		c->script_name = xstrdup(c->plan.lang == AB_LANG_NODE ? "agentbox-session.js"
								      : "agentbox-session.py");
	else if (ws_script_is_code(c))
		c->script_name = xstrdup(c->plan.lang == AB_LANG_NODE ? "script.js" : "script.py");
	else
		c->script_name = base_name(c->o->script);
}

/* The script's path relative to --workspace DIR when it is a file inside DIR (the same inode
 * reached from DIR's fd), else NULL. */
static char *
script_inside_workspace(struct run_ctx *c)
{
	struct ab_err ignored = { 0 };
	cleanup_free char *base = NULL, *pdir = NULL, *wdir = NULL;
	cleanup_fd int pfd =
		hostfs_open_parent(c->o->script, HOSTFS_ANY_LINK, "script", &base, &ignored);
	cleanup_fd int again = -1;
	struct stat a, b;
	size_t l;
	char *rel;

	if (pfd < 0)
		return NULL;
	pdir = hostfs_fd_path(pfd);
	wdir = hostfs_fd_path(c->ws_dir_fd);
	if (!pdir || !wdir)
		return NULL;
	l = strlen(wdir);
	if (strcmp(pdir, wdir) == 0)
		rel = xstrdup(base);
	else if (strncmp(pdir, wdir, l) == 0 && pdir[l] == '/')
		rel = xasprintf("%s/%s", pdir + l + 1, base);
	else
		return NULL;
	again = openat(c->ws_dir_fd, rel, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (again < 0 || fstat(again, &a) < 0 || fstat(c->script_fd, &b) < 0 ||
	    a.st_dev != b.st_dev || a.st_ino != b.st_ino) {
		free(rel);
		return NULL;
	}
	return rel;
}

/* --workspace DIR: a SCRIPT inside DIR runs in place. One outside DIR is never copied into
 * it (agentbox adds nothing to a caller's directory): it is copied onto a small tmpfs of its
 * own in our mount namespace, bound read-only at /.agentbox/script/NAME. */
int
ws_place_script(struct run_ctx *c, struct ab_err *err)
{
	char opts[128];
	cleanup_fd int sfd = -1;
	struct stat st;
	int r;

	cleanup_free char *rel = ws_script_is_code(c) ? NULL : script_inside_workspace(c);

	if (rel) {
		c->plan.script_sandbox = xasprintf(AB_SANDBOX_WORK "/%s", rel);
		c->script_rel = steal_ptr(&rel);
		return 0;
	}
	if (fstat(c->script_fd, &st) < 0)
		return ab_err_set(err, -errno, "stat the script: %s", strerror(errno));
	snprintf(opts, sizeof(opts), "size=%llu,nr_inodes=8,mode=0755",
		 (unsigned long long) st.st_size + 65536);
	if (mount("agentbox-script", c->rd.mnt_script, "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0)
		return ab_err_set(err, -errno, "mount the script's tmpfs: %s", strerror(errno));
	sfd = open(c->rd.mnt_script, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (sfd < 0)
		return ab_err_set(err, -errno, "open the script's tmpfs: %s", strerror(errno));
	r = rundir_copy_file(c->script_fd, sfd, c->script_name, (uid_t) -1, (gid_t) -1);
	if (r < 0)
		return ab_err_set(err, r, "copy the script: %s", strerror(-r));
	plan_add_ro_bind(&c->plan, c->rd.mnt_script, AB_SANDBOX_SCRIPT_DIR);
	c->plan.ro_binds[c->plan.n_ro_binds - 1].staged = true;
	c->plan.script_sandbox = xasprintf(AB_SANDBOX_SCRIPT_DIR "/%s", c->script_name);
	return 0;
}

int
ws_copy_inputs(struct run_ctx *c, struct ab_err *err)
{
	uid_t ou = c->owner_uid;
	gid_t og = c->owner_gid;
	int r;

	/* a session's driver is not the caller's: it stays outside /work (ws_place_script) */
	r = c->o->session ? 0 : rundir_copy_file(c->script_fd, c->work_fd, c->script_name, ou, og);
	if (r < 0) {
		ab_err_set(err, r, "copy the script into the workspace: %s", strerror(-r));
		return r == -ENOSPC ? ab_err_fix(err, "raise --disk") : r;
	}
	if (!c->o->session)
		c->script_rel = xstrdup(c->script_name);
	c->res->inputs = json_array();
	STRV_FOREACH (in, &c->o->inputs) {
		cleanup_fd int fd = -1;
		cleanup_free char *name = base_name(*in);
		struct stat st;

		/* Opened once, only trusted symlinks on the way (root's or the caller's: an input
		 * is copied where the script reads it, so another user's symlink could show it
		 * the caller's own files, issue 24); a symlink input itself is reported, never
		 * followed (T25). Copied from this fd, never by name again. */
		fd = hostfs_open(*in, HOSTFS_LINK_OK, "--input", err);
		if (fd < 0) {
			if (fd == -EPERM)
				err->exit = AB_EXIT_USAGE; /* an untrusted symlink on the way */
			return fd;
		}
		if (fstat(fd, &st) < 0)
			return ab_err_set(err, -errno, "--input '%s': %s", *in, strerror(errno));
		if (name[0] == '\0' || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
			return ab_err_usage(err, "--input '%s' has no usable name", *in);
		if (!S_ISLNK(st.st_mode)) {
			cleanup_free char *real = hostfs_fd_path(fd);
			const char *why = hostfs_refusal(fd, real, HOSTFS_USE_INPUT, c->rd.root_fd,
							 &c->o->allow_binds);

			if (why) {
				ab_err_usage(err, "refusing --input '%s'%s%s%s: it is %s", *in,
					     real && strcmp(real, *in) ? " (" : "",
					     real && strcmp(real, *in) ? real : "",
					     real && strcmp(real, *in) ? ")" : "", why);
				return ab_err_fix(err,
						  "copy in only the files the script needs, or if "
						  "you really mean it, add --allow-bind '%s'",
						  real ? real : *in);
			}
		}
		if (S_ISREG(st.st_mode)) {
			cleanup_fd int rfd = hostfs_reopen(fd, O_RDONLY | O_NONBLOCK);

			if (rfd < 0)
				return ab_err_set(err, -errno, "--input '%s': %s", *in,
						  strerror(errno));
			r = rundir_copy_file(rfd, c->work_fd, name, ou, og);
			if (r == -EEXIST)
				return ab_err_usage(err,
						    "--input '%s': the workspace already has "
						    "'%s'",
						    *in, name);
			if (r == -ENOSPC || r == -EFBIG) {
				ab_err_set(err, r, "--input '%s' does not fit in the workspace",
					   *in);
				return ab_err_fix(err, "raise --disk / --inodes");
			}
			if (r < 0)
				return ab_err_set(err, r, "--input '%s': %s", *in, strerror(-r));
			json_array_append_new(c->res->inputs,
					      json_pack("{s:s, s:s, s:I}", "path", *in, "type",
							"file", "bytes", (json_int_t) st.st_size));
		} else if (S_ISDIR(st.st_mode)) {
			cleanup_fd int dfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			struct ab_walk_opts wo = {
				.max_entries = c->o->limits[AB_LIM_INODES].value,
				.max_file_bytes = c->o->limits[AB_LIM_DISK].value,
				.max_total_bytes = c->o->limits[AB_LIM_DISK].value,
				.hash_max_bytes = 1, /* no hashing on the way in */
				.chown_uid = ou,
				.chown_gid = og,
			};
			struct ab_manifest m = { 0 };
			cleanup_fd int sub = -1;
			json_t *skipped;

			if (dfd < 0)
				return ab_err_set(err, -errno, "--input '%s': %s", *in,
						  strerror(errno));
			if (mkdirat(c->work_fd, name, 0755) < 0)
				return ab_err_usage(err,
						    "--input '%s': cannot create '%s' in the "
						    "workspace: %s",
						    *in, name, strerror(errno)),
				       ab_err_fix(err, "give each --input a different name");
			sub = openat(c->work_fd, name,
				     O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (sub < 0 || (ou != (uid_t) -1 && fchown(sub, ou, og) < 0))
				return ab_err_set(err, -errno, "--input '%s'", *in);
			wo.dst_dirfd = sub;
			r = walk_tree(dfd, &wo, &m, err);
			if (r < 0)
				return r;
			skipped = json_array();
			for (size_t i = 0; i < m.n; i++) {
				if (m.entries[i].collected || m.entries[i].type == AB_ENTRY_DIR)
					continue;
				cleanup_free char *esc = walk_escape_name(m.entries[i].path);

				json_array_append_new(
					skipped,
					json_pack("{s:s, s:s}", "path", esc ? esc : "?", "reason",
						  m.entries[i].reason ? m.entries[i].reason
								      : "not copied"));
			}
			json_array_append_new(c->res->inputs,
					      json_pack("{s:s, s:s, s:I, s:I, s:o, s:b}", "path",
							*in, "type", "dir", "bytes",
							(json_int_t) m.copied_bytes, "entries",
							(json_int_t) m.total_entries, "skipped",
							skipped, "truncated", m.truncated));
			if (json_array_size(skipped) > 0)
				result_warn(c->res,
					    "--input '%s': %zu entries not copied (see inputs)",
					    *in, json_array_size(skipped));
			manifest_done(&m);
		} else {
			cleanup_free char *esc = walk_escape_name(*in);

			json_array_append_new(
				c->res->inputs,
				json_pack("{s:s, s:s, s:i, s:i, s:[{s:s, s:s}], s:b}", "path", *in,
					  "type", S_ISLNK(st.st_mode) ? "symlink" : "special",
					  "bytes", 0, "entries", 0, "skipped", "path", esc,
					  "reason", "not a regular file or directory", "truncated",
					  false));
			result_warn(c->res, "--input '%s' is a %s: not copied", *in,
				    S_ISLNK(st.st_mode) ? "symlink" : "special file");
		}
	}
	return 0;
}

/* --stdin FILE: the script gets a sealed in-memory copy, never the caller's fd: a directory fd
 * would open the host filesystem through /proc/self/fd/0/.., a terminal could be taken as a
 * controlling tty, and a file could be reopened for writing (T7, T29). */
int
ws_stdin_memfd(const char *path, uint64_t cap, int *ret, struct ab_err *err)
{
	cleanup_fd int src = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	cleanup_fd int mfd = -1;
	struct stat st;
	char buf[65536];
	uint64_t total = 0;
	ssize_t n;

	if (src < 0) {
		ab_err_set(err, -errno, "--stdin '%s': %s", path, strerror(errno));
		return ab_err_fix(err, "check the path");
	}
	if (fstat(src, &st) < 0 || !S_ISREG(st.st_mode)) {
		ab_err_set(err, -EINVAL, "--stdin '%s' is not a regular file", path);
		return ab_err_fix(err, "write the input to a file and pass that");
	}
	mfd = memfd_create("agentbox-stdin", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (mfd < 0)
		return ab_err_set(err, -errno, "memfd_create: %s", strerror(errno));
	while ((n = read(src, buf, sizeof(buf))) > 0) {
		total += (uint64_t) n;
		if (total > cap) {
			ab_err_set(err, -EFBIG, "--stdin '%s' is bigger than --disk", path);
			return ab_err_fix(err, "raise --disk, or pass the data with --input");
		}
		if (write_all(mfd, buf, (size_t) n) < 0)
			return ab_err_set(err, -errno, "copy --stdin: %s", strerror(errno));
	}
	if (n < 0)
		return ab_err_set(err, -errno, "read --stdin '%s': %s", path, strerror(errno));
	if (lseek(mfd, 0, SEEK_SET) < 0 ||
	    fcntl(mfd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) < 0)
		return ab_err_set(err, -errno, "seal --stdin: %s", strerror(errno));
	*ret = steal_fd(&mfd);
	return 0;
}

/* The spec's stdin_data as the script's stdin: a sealed memfd like --stdin FILE's. */
int
ws_stdin_memfd_data(const char *data, size_t len, uint64_t cap, int *ret, struct ab_err *err)
{
	cleanup_fd int mfd = -1;

	if (len > cap) {
		ab_err_set(err, -EFBIG, "stdin_data is bigger than --disk");
		return ab_err_fix(err, "raise the disk limit, or pass the data with inputs");
	}
	mfd = memfd_create("agentbox-stdin", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (mfd < 0)
		return ab_err_set(err, -errno, "memfd_create: %s", strerror(errno));
	if (write_all(mfd, data, len) < 0)
		return ab_err_set(err, -errno, "copy stdin_data: %s", strerror(errno));
	if (lseek(mfd, 0, SEEK_SET) < 0 ||
	    fcntl(mfd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) < 0)
		return ab_err_set(err, -errno, "seal stdin_data: %s", strerror(errno));
	*ret = steal_fd(&mfd);
	return 0;
}

/* Post-run work runs outside every limit of the run, so it is bounded by totals for the whole
 * run (docs/design.md, "Post-run work is bounded"): one time budget and one hash budget shared
 * by the walk of the workspace and the --collect walk (the first gets half the time when there
 * is a second, so that it cannot starve it), and a listing cap for each. */
#define WS_POST_RUN_MS 60000
#define WS_HASH_BUDGET (512ULL << 20)
#define WS_LIST_BYTES  (8ULL << 20)
#define WS_HASH_MAX    (64ULL << 20)
#define WS_MAX_ENTRIES 100000
/* The caps after which the in-place strip of --workspace DIR sees no more entries (the path
 * length and listing-size caps only stop listing: those entries are still stripped). */
#define WS_STRIP_STOPPED_BY ((unsigned) (AB_CAP_ENTRIES | AB_CAP_DEPTH | AB_CAP_TIME))

/* Says in the warnings what a cap cut from the walk `what`. */
static void
warn_walk(struct ab_record *res, const char *what, const struct ab_manifest *m)
{
	cleanup_free char *caps = walk_caps_text(m->truncated_caps & ~(unsigned) AB_CAP_HASH);

	if (m->truncated)
		result_warn(res,
			    "%s is incomplete: %s stopped it (%ju entries walked but not "
			    "listed; see files_summary)",
			    what, *caps ? caps : "a cap", (uintmax_t) m->unlisted);
	if (m->truncated_caps & AB_CAP_HASH)
		result_warn(res,
			    "%s: the hash budget (%llu MiB a run) is used up: %ju files have "
			    "no sha256 (flag over_cap)",
			    what, WS_HASH_BUDGET >> 20, (uintmax_t) m->unhashed);
}

/* Before the run: what the workspace holds (the script and --input copies in agentbox's tmpfs,
 * or --workspace DIR as the caller left it), hashed, so that every entry of the listing after
 * the run can say where it came from (files[].origin, issue 15). Bounded like the walk after
 * the run (its own hash budget and 64 MiB size cap; files it does not hash are compared by
 * inode, size, mtime and ctime; a sixth of the post-run time budget), and the entry cap:
 * entries a cap left out get origin "unknown". With --workspace DIR it also records which
 * entries already carry setuid/setgid/g+w/o+w bits: after the run those bits stay where they
 * were and are removed wherever the run added them (a strip by ctime alone would also strip
 * a setgid directory the script merely wrote in). */
int
ws_snapshot_workspace(struct run_ctx *c, struct ab_err *err)
{
	struct ab_walk_opts wo = {
		.max_entries = WS_MAX_ENTRIES,
		.hash_max_bytes = WS_HASH_MAX,
		.hash_budget_bytes = WS_HASH_BUDGET,
		/* nothing is serialised: the entry, name and time caps are the ones that bind */
		.max_list_bytes = 256ULL << 20,
		.time_budget_ms = WS_POST_RUN_MS / 6,
		.dst_dirfd = -1,
		.chown_uid = (uid_t) -1,
		.chown_gid = (gid_t) -1,
		.strip_uid = (uid_t) -1,
	};
	struct stat st;
	int r;

	if (c->ws_dir_fd >= 0) {
		if (fstat(c->ws_dir_fd, &st) < 0)
			return ab_err_set(err, -errno, "stat --workspace: %s", strerror(errno));
		c->ws_root_bits = st.st_mode & WALK_STRIP_BITS;
	}
	r = walk_tree(c->work_fd, &wo, &c->pre, err);
	if (r < 0)
		return r;
	c->have_pre = true;
	if (c->ws_dir_fd >= 0) {
		c->strip_keep = walk_strip_keep_list(&c->pre, &c->n_strip_keep);
		if (c->pre.truncated)
			result_warn(c->res,
				    "--workspace holds more than agentbox lists (%ju entries not "
				    "listed): setuid/setgid/g+w/o+w bits on those, where the run "
				    "wrote, are removed afterwards even if they were there before",
				    (uintmax_t) c->pre.unlisted);
	}
	if (c->pre.truncated) {
		cleanup_free char *caps = walk_caps_text(c->pre.truncated_caps);

		result_warn(c->res,
			    "the listing of the workspace before the run is incomplete (%s): "
			    "entries after the run that it did not see have origin \"unknown\"",
			    *caps ? caps : "a cap");
	}
	return 0;
}

/* The workspace directory itself, after the run: the bits the run added to it go (the walk
 * strips everything below it). Through its O_PATH fd, never by name. */
static void
strip_workspace_root(struct run_ctx *c)
{
	struct stat st;
	mode_t bits;
	char p[64];

	if (fstat(c->ws_dir_fd, &st) < 0 || st.st_uid != c->ws_owner_uid)
		return;
	bits = (st.st_mode & WALK_STRIP_BITS) & ~c->ws_root_bits;
	if (!bits)
		return;
	snprintf(p, sizeof(p), "/proc/self/fd/%d", c->ws_dir_fd);
	if (chmod(p, (st.st_mode & 07777) & ~bits) < 0)
		result_warn(c->res,
			    "could not remove mode bits %04o the run set on --workspace: %s",
			    (unsigned) bits, strerror(errno));
}

int
ws_collect(struct run_ctx *c, struct ab_err *err)
{
	int64_t deadline = now_ms() + WS_POST_RUN_MS;
	struct ab_walk_opts wo = {
		.max_entries = WS_MAX_ENTRIES,
		.max_file_bytes = 0,
		.max_total_bytes = 0,
		.hash_max_bytes = WS_HASH_MAX,
		.hash_budget_bytes = WS_HASH_BUDGET,
		.max_list_bytes = WS_LIST_BYTES,
		.time_budget_ms = c->o->collect_dir ? WS_POST_RUN_MS / 2 : WS_POST_RUN_MS,
		.dst_dirfd = -1,
		.chown_uid = (uid_t) -1,
		.chown_gid = (gid_t) -1,
		.strip_uid = (uid_t) -1,
	};
	struct ab_manifest m = { 0 };
	cleanup_fd int keep_fd = -1;
	int r;

	if (c->have_pre) {
		wo.origins_from = &c->pre;
		wo.origin_script = c->script_rel;
	}
	if (c->ws_dir_fd >= 0) {
		/* --workspace DIR: what the run created or changed (ctime) loses the setuid,
		 * setgid, group- and other-write bits it did not have before: the host never
		 * keeps a setuid file or a world-writable directory from a run (issue 12). The
		 * script could write only as DIR's owner (idmapped) or the caller. */
		wo.strip_uid = c->ws_owner_uid;
		wo.strip_since = c->started_rt;
		wo.strip_keep = c->strip_keep;
		wo.n_strip_keep = c->n_strip_keep;
		strip_workspace_root(c);
	}

	if (c->tmpfs_mounted && !c->o->rm) {
		/* the kept copy: run/work, sanitized (regular files and directories only) */
		keep_fd = openat(c->rd.fd, "work", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (keep_fd < 0)
			return ab_err_set(err, -errno, "open %s/work", c->rd.path);
		/* owned by the caller (root's kept runs are root's): nothing a run leaves on
		 * disk belongs to the sandbox uid */
		wo.dst_dirfd = keep_fd;
	}
	r = walk_tree(c->work_fd, &wo, &m, err);
	if (r < 0)
		return r;
	if (m.strip_failed)
		result_warn(c->res,
			    "%ju entries of --workspace keep setuid/setgid/group- or other-write "
			    "bits the run set: agentbox could not remove them (see files)",
			    (uintmax_t) m.strip_failed);
	if (c->ws_dir_fd >= 0 && (m.truncated_caps & WS_STRIP_STOPPED_BY)) {
		/* the entry cap leaves directories unlisted, the depth cap unentered, the time
		 * budget everything after it: the strip never saw those entries, so bits the
		 * run set on them (group/other write; setuid/setgid --without seccomp) stay */
		cleanup_free char *caps = walk_caps_text(m.truncated_caps & WS_STRIP_STOPPED_BY);

		result_warn(c->res,
			    "the removal of the bits the run added in --workspace stopped at %s: "
			    "entries past it may keep setuid/setgid/group- or other-write bits "
			    "the run set (fix: find '%s' -perm /6022, and chmod what the run made)",
			    caps, c->res->workspace ? c->res->workspace : c->o->workspace);
	}
	c->res->files = manifest_to_json(&m);
	c->res->files_summary = manifest_summary_json(&m);
	if (c->have_pre)
		json_object_set_new(c->res->files_summary, "pre_run",
				    manifest_summary_json(&c->pre));
	c->res->usage.workspace_bytes = (int64_t) m.total_bytes;
	c->res->usage.workspace_entries = (int64_t) m.total_entries;
	warn_walk(c->res, "the workspace listing", &m);

	if (c->o->collect_dir) {
		struct ab_walk_opts co = wo;
		struct ab_manifest cm = { 0 };
		int64_t left = deadline - now_ms();
		size_t skipped = 0;

		co.dst_dirfd = c->collect_fd;
		co.chown_uid = (uid_t) -1;
		co.chown_gid = (gid_t) -1;
		co.max_file_bytes = c->o->limits[AB_LIM_FILE_SIZE].value;
		co.max_total_bytes = c->o->limits[AB_LIM_DISK].value;
		/* the same files: take their hashes instead of reading them again, and spend
		 * only what is left of the run's budgets (1 rather than 0, the default) */
		co.hashes_from = &m;
		co.hash_budget_bytes =
			WS_HASH_BUDGET > m.hashed_bytes ? WS_HASH_BUDGET - m.hashed_bytes : 1;
		co.time_budget_ms = left > 0 ? (uint64_t) left : 1;
		r = walk_tree(c->work_fd, &co, &cm, err);
		if (r < 0)
			goto out;
		for (size_t i = 0; i < cm.n; i++)
			if (!cm.entries[i].collected)
				skipped++;
		c->res->collected = json_pack(
			"{s:s, s:I, s:I, s:o, s:o}", "dir", c->o->collect_dir, "bytes",
			(json_int_t) cm.copied_bytes, "skipped_count", (json_int_t) skipped,
			"files", manifest_to_json(&cm), "summary", manifest_summary_json(&cm));
		warn_walk(c->res, "--collect", &cm);
		manifest_done(&cm);
	}
	r = 0;
out:
	manifest_done(&m);
	return r;
}

void
ws_cleanup(struct run_ctx *c)
{
	/* The workspace and /etc tmpfs (and staged --ro-bind sources) stay mounted on RUNS/.mnt
	 * in our own mount namespace until we exit: the namespace goes with us, and one
	 * teardown (one RCU grace period) is cheaper than an umount(2) each. Nothing outside
	 * this process ever sees them. */
	if (c->work_fd >= 0) {
		(void) close(c->work_fd);
		c->work_fd = -1;
	}
	manifest_done(&c->pre);
	c->have_pre = false;
	if (c->cg_made) {
		(void) cg_destroy(&c->cg);
		c->cg_made = false;
	}
}

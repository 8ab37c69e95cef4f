#include "etcgen.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/mount.h>
#include <sys/stat.h>

#include "plan.h"
#include "util/fdutil.h"
#include "util/macro.h"

const char *const etcgen_host_entries[] = {
	"/etc/alternatives", /* Debian's alternatives links in /usr/bin point here */
	"/etc/ld.so.cache",  /* the dynamic linker's cache: faster startup */
	/* Read-only configuration that libraries the scripts import need, and nothing secret:
	 * Debian's matplotlib refuses to import without its matplotlibrc, fontconfig reads
	 * fonts/, Python's mimetypes and others read mime.types. */
	"/etc/matplotlibrc",
	"/etc/fonts",
	"/etc/mime.types",
	NULL,
};

struct etc_file {
	const char *name;
	const char *text;
};

#define STR_(x) #x
#define STR(x)  STR_(x)

/* The sandbox user's passwd and group lines, e.g. "agent:x:1000:1000:sandbox user:/work:..." */
#define PASSWD_AGENT                                                                       \
	AB_SANDBOX_USER                                                                    \
	":x:" STR(AB_SANDBOX_UID) ":" STR(AB_SANDBOX_GID) ":sandbox user:" AB_SANDBOX_WORK \
							  ":/usr/sbin/nologin\n"
#define GROUP_AGENT AB_SANDBOX_USER ":x:" STR(AB_SANDBOX_GID) ":\n"

static const struct etc_file etc_files[] = {
	{ "passwd", "root:x:0:0:root:/nonexistent:/usr/sbin/nologin\n" PASSWD_AGENT
		    "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n" },
	{ "group", "root:x:0:\n" GROUP_AGENT "nogroup:x:65534:\n" },
	{ "hostname", AB_SANDBOX_HOSTNAME "\n" },
	{ "hosts", "127.0.0.1\tlocalhost " AB_SANDBOX_HOSTNAME "\n"
		   "::1\tlocalhost ip6-localhost ip6-loopback\n" },
	{ "nsswitch.conf", "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\n"
			   "networks: files\nprotocols: files\nservices: files\n" },
};

/* Bound from the host only when the sandbox keeps the network (`agentbox prepare`). */
static const char *const net_entries[] = { "/etc/resolv.conf", "/etc/ssl/certs", NULL };

static int
write_file_at(int dirfd, const char *name, const char *text, uid_t owner, gid_t group)
{
	cleanup_fd int fd = -1;
	int r;

	fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	r = write_all(fd, text, strlen(text));
	if (r < 0)
		return r;
	if (owner != (uid_t) -1 && fchown(fd, owner, group) < 0)
		return -errno;
	return 0;
}

static int add_host_entries(int efd, const char *const *entries, struct ab_err *err);

int
etcgen_fill(int efd, uid_t owner, gid_t group, bool net, struct ab_err *err)
{
	int r;

	for (size_t i = 0; i < ARRAY_SIZE(etc_files); i++) {
		r = write_file_at(efd, etc_files[i].name, etc_files[i].text, owner, group);
		if (r < 0)
			return ab_err_set(err, r, "write the sandbox /etc/%s: %s",
					  etc_files[i].name, strerror(-r));
	}
	/* UTC: deterministic, and no host timezone leak. */
	if (symlinkat("/usr/share/zoneinfo/Etc/UTC", efd, "localtime") < 0)
		return ab_err_set(err, -errno, "write the sandbox /etc/localtime: %s",
				  strerror(errno));
	if (!net) {
		r = write_file_at(efd, "resolv.conf", "# no network in the sandbox\n", owner,
				  group);
		if (r < 0)
			return ab_err_set(err, r, "write the sandbox /etc/resolv.conf");
	}
	for (int list = 0; list < 2; list++) {
		const char *const *entries = list == 0 ? etcgen_host_entries : net_entries;

		if (list == 1 && !net)
			break;
		r = add_host_entries(efd, entries, err);
		if (r < 0)
			return r;
	}
	return 0;
}

static int
add_host_entries(int efd, const char *const *entries, struct ab_err *err)
{
	char target[64];
	int r;

	for (const char *const *h = entries; *h; h++) {
		const char *base = *h + strlen("/etc/");
		const char *slash = strchr(base, '/');
		struct stat st;

		if (stat(*h, &st) < 0)
			continue;
		if (slash) {
			/* one level of nesting (ssl/certs): create the parent first */
			cleanup_free char *parent = strndup(base, (size_t) (slash - base));

			if (parent && mkdirat(efd, parent, 0755) < 0 && errno != EEXIST)
				return ab_err_set(err, -errno, "create /etc/%s", parent);
		}
		if (S_ISDIR(st.st_mode)) {
			if (mkdirat(efd, base, 0755) < 0)
				return ab_err_set(err, -errno, "create mount point /etc/%s", base);
		} else if (S_ISREG(st.st_mode)) {
			r = write_file_at(efd, base, "", (uid_t) -1, (gid_t) -1);
			if (r < 0)
				return ab_err_set(err, r, "create mount point /etc/%s", base);
		} else {
			continue;
		}
		/* Bound here, in agentbox's own mount namespace, rather than by bwrap: bwrap's
		 * one recursive --ro-bind of this /etc carries it and makes it read-only, which
		 * costs less than a bwrap --ro-bind (mount, mountinfo parse, remount) each. */
		snprintf(target, sizeof(target), "/proc/self/fd/%d/%s", efd, base);
		if (mount(*h, target, NULL, MS_BIND | MS_REC, NULL) < 0)
			return ab_err_set(err, -errno, "bind %s into the sandbox /etc: %s", *h,
					  strerror(errno));
	}
	return 0;
}

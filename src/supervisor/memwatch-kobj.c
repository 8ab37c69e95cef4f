/* memwatch-kobj.c: the memory watchdog's kernel-object scan (memwatch.h, issue 24).
 *
 * Without a memory cgroup nothing charges the run for what the kernel holds on its behalf.
 * This scan finds those objects through the sandbox's own /proc and its network namespace
 * and charges each by what it can hold at most (the AB_MEMWATCH_*_COST constants):
 *  - per process, its fds (/proc/PID/fd, readlink): every fd AB_MEMWATCH_FD_COST; a pipe
 *    (counted once, by inode) AB_MEMWATCH_PIPE_COST, its 16 pages full (the filter keeps it
 *    from growing: F_SETPIPE_SZ over 64 KiB is EPERM); an epoll instance its watches (the
 *    "tfd:" lines of its fdinfo, or the process's fds if more); an inotify instance its
 *    whole event queue; a pty master AB_MEMWATCH_PTY_COST; a socket the fds in flight in
 *    its queue ("scm_fds:" of its fdinfo), each as a pipe. A process whose fds cannot be
 *    read: each fd AB_MEMWATCH_FD_HIDDEN (hiding never makes a run cheaper);
 *  - per process, its mappings (lines of /proc/PID/maps) at AB_MEMWATCH_VMA_COST;
 *  - the run's file locks (/proc/locks of the sandbox's procfs: pids of other namespaces
 *    read 0) at AB_MEMWATCH_LOCK_COST;
 *  - every socket of the sandbox's network namespace (NETLINK_SOCK_DIAG, a socket the
 *    supervisor opened inside it), by what it holds or may hold before the next scan,
 *    whichever is more: AF_UNIX by what it sent that is still queued (sk_wmem_alloc, skb
 *    truesize) or 1.5 x its sndbuf (net.core.wmem_default: SO_SNDBUF is EPERM in this mode),
 *    plus, for a stream socket whose peer has closed with data still queued to it, the most
 *    that peer could have left (2 x wmem_default), and for a datagram socket with a queue,
 *    max_dgram_qlen + 1 datagrams of that size; TCP and UDP by their queues or their
 *    current buffer sizes (skmeminfo).
 * Every socket, pipe and fd is also charged its own structures. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <sys/fsuid.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "../util/fdutil.h"
#include "../util/macro.h"
#include "../util/xalloc.h"
#include "memwatch.h"

/* /proc/PID/maps of a process past this is counted by what was read (64k mappings is the
 * kernel's default cap, about 4.5 MB of text) */
#define MAPS_CAP (8u << 20)
/* an inotify event as the kernel allocates it at most: its header and a NAME_MAX name */
#define INOTIFY_EVENT_MAX 512

/* ---- pure parts ---- */

enum ab_fd_kind
memwatch_fd_kind(const char *target, uint64_t *ret_ino)
{
	static const struct {
		const char *prefix;
		enum ab_fd_kind kind;
	} ino_kinds[] = { { "pipe:[", AB_FD_PIPE }, { "socket:[", AB_FD_SOCKET } };

	*ret_ino = 0;
	for (size_t i = 0; i < ARRAY_SIZE(ino_kinds); i++) {
		size_t l = strlen(ino_kinds[i].prefix);

		if (strncmp(target, ino_kinds[i].prefix, l) == 0) {
			char *end;
			unsigned long long v = strtoull(target + l, &end, 10);

			if (*end != ']' || end[1] != '\0')
				return AB_FD_OTHER;
			*ret_ino = v;
			return ino_kinds[i].kind;
		}
	}
	if (strcmp(target, "anon_inode:[eventpoll]") == 0)
		return AB_FD_EPOLL;
	if (strcmp(target, "anon_inode:inotify") == 0)
		return AB_FD_INOTIFY;
	/* a pty master: /dev/ptmx opens the devpts instance's own ptmx */
	if (strcmp(target, "/dev/pts/ptmx") == 0 || strcmp(target, "/dev/ptmx") == 0)
		return AB_FD_PTMX;
	return AB_FD_OTHER;
}

uint64_t
memwatch_count_lines(const char *text, const char *prefix)
{
	size_t l = strlen(prefix);
	uint64_t n = 0;

	for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
		if (strncmp(p, prefix, l) == 0)
			n++;
	return n;
}

uint64_t
memwatch_parse_scm_fds(const char *text)
{
	for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
		if (strncmp(p, "scm_fds:", 8) == 0)
			return strtoull(p + 8, NULL, 10);
	return 0;
}

/* The number after "LINE: ... KEY " in text (/proc/net/sockstat), 0 if absent. */
static uint64_t
sockstat_value(const char *text, const char *line, const char *key)
{
	size_t l = strlen(line);

	for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
		const char *k, *nl = strchr(p, '\n');

		if (strncmp(p, line, l) != 0)
			continue;
		k = strstr(p + l, key);
		if (k && (!nl || k < nl))
			return strtoull(k + strlen(key), NULL, 10);
		return 0;
	}
	return 0;
}

unsigned
memwatch_parse_sockstat(const char *v4, const char *v6)
{
	uint64_t tw = sockstat_value(v4, "TCP:", " tw ");
	unsigned need = 0;

	if (sockstat_value(v4, "TCP:", " inuse ") > 0 || tw > 0)
		need |= 1u << 1;
	if (sockstat_value(v6, "TCP6:", " inuse ") > 0 || tw > 0)
		need |= 1u << 2;
	if (sockstat_value(v4, "UDP:", " inuse ") > 0)
		need |= 1u << 3;
	if (sockstat_value(v6, "UDP6:", " inuse ") > 0)
		need |= 1u << 4;
	if (sockstat_value(v4, "UDPLITE:", " inuse ") > 0)
		need |= 1u << 5;
	if (sockstat_value(v6, "UDPLITE6:", " inuse ") > 0)
		need |= 1u << 6;
	return need;
}

/* "N: POSIX  ADVISORY  WRITE PID MAJ:MIN:INO START END", or "N: -> POSIX ..." for a waiter. */
uint64_t
memwatch_count_locks(const char *text)
{
	uint64_t n = 0;

	for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
		char w[5][32];
		int k;

		k = sscanf(p, "%*[^:]: %31s %31s %31s %31s %31s", w[0], w[1], w[2], w[3], w[4]);
		if (k < 4)
			continue;
		/* the pid is the 4th word, the 5th after a waiter's "->" */
		if (strcmp(w[0], "->") == 0 ? (k == 5 && strcmp(w[4], "0") != 0)
					    : strcmp(w[3], "0") != 0)
			n++;
	}
	return n;
}

/* The payload of attribute type of a sock_diag message (after its fixed header of hdr bytes),
 * or NULL. */
static const void *
diag_attr(const struct nlmsghdr *nh, size_t hdr, unsigned short type, size_t *ret_len)
{
	size_t off = NLMSG_HDRLEN + NLMSG_ALIGN(hdr);

	while (off + sizeof(struct nlattr) <= nh->nlmsg_len) {
		const struct nlattr *a = (const void *) ((const char *) nh + off);

		if (a->nla_len < sizeof(*a) || off + a->nla_len > nh->nlmsg_len)
			return NULL;
		if ((a->nla_type & NLA_TYPE_MASK) == type) {
			*ret_len = a->nla_len - NLA_HDRLEN;
			return (const char *) a + NLA_HDRLEN;
		}
		off += NLA_ALIGN(a->nla_len);
	}
	return NULL;
}

static uint64_t
max_u64(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

static uint64_t
meminfo(const void *p, size_t len, int idx)
{
	uint32_t v;

	if (!p || len < (size_t) (idx + 1) * sizeof(uint32_t))
		return 0;
	memcpy(&v, (const char *) p + (size_t) idx * sizeof(uint32_t), sizeof(v));
	return v;
}

int
memwatch_parse_sockdiag(const void *buf, size_t len, const struct ab_sock_costs *c,
			struct ab_sockdiag_sum *sum)
{
	uint64_t *bytes = &sum->bytes;
	size_t off = 0;

	while (off + NLMSG_HDRLEN <= len) {
		const struct nlmsghdr *nh = (const void *) ((const char *) buf + off);
		const void *mi;
		size_t mlen = 0;

		if (nh->nlmsg_len < NLMSG_HDRLEN || off + nh->nlmsg_len > len)
			return -EBADMSG;
		if (nh->nlmsg_type == NLMSG_DONE)
			return 1;
		if (nh->nlmsg_type == NLMSG_ERROR) {
			const struct nlmsgerr *e = NLMSG_DATA(nh);

			if (nh->nlmsg_len < NLMSG_LENGTH(sizeof(*e)))
				return -EBADMSG;
			return e->error < 0 ? e->error : -EPROTO;
		}
		if (nh->nlmsg_type != SOCK_DIAG_BY_FAMILY ||
		    nh->nlmsg_len < NLMSG_LENGTH(sizeof(uint8_t)))
			return -EBADMSG;
		sum->count++;
		*bytes += c->per_socket;
		if (*(const uint8_t *) NLMSG_DATA(nh) == AF_UNIX) {
			const struct unix_diag_msg *m = NLMSG_DATA(nh);
			const void *rq, *peer;
			size_t rlen = 0, plen = 0;
			uint32_t queued = 0, peer_ino = 0;

			if (nh->nlmsg_len < NLMSG_LENGTH(sizeof(*m)))
				return -EBADMSG;
			/* what it has sent that is still queued, or what it may send before the
			 * next scan (sndbuf, and one more skb of up to half of it) */
			mi = diag_attr(nh, sizeof(*m), UNIX_DIAG_MEMINFO, &mlen);
			*bytes += max_u64(meminfo(mi, mlen, SK_MEMINFO_WMEM_ALLOC),
					  meminfo(mi, mlen, SK_MEMINFO_SNDBUF) * 3 / 2);
			rq = diag_attr(nh, sizeof(*m), UNIX_DIAG_RQLEN, &rlen);
			if (rq && rlen >= sizeof(struct unix_diag_rqlen))
				queued = ((const struct unix_diag_rqlen *) rq)->udiag_rqueue;
			peer = diag_attr(nh, sizeof(*m), UNIX_DIAG_PEER, &plen);
			if (peer && plen >= sizeof(uint32_t))
				memcpy(&peer_ino, peer, sizeof(peer_ino));
			/* a listener's rqueue counts embryo connections: each is a socket of its
			 * own in this dump */
			if (queued > 0 && m->udiag_state != TCP_LISTEN) {
				if (m->udiag_type == SOCK_DGRAM)
					*bytes += c->dgram_reserve;
				else if (peer_ino == 0)
					*bytes += c->dead_reserve;
				if (sum->n_queued == sum->cap_queued) {
					sum->cap_queued =
						sum->cap_queued ? 2 * sum->cap_queued : 64;
					sum->queued =
						xrealloc(sum->queued,
							 sum->cap_queued * sizeof(*sum->queued));
				}
				sum->queued[sum->n_queued++] = m->udiag_ino;
			}
		} else {
			const struct inet_diag_msg *m = NLMSG_DATA(nh);

			if (nh->nlmsg_len < NLMSG_LENGTH(sizeof(*m)))
				return -EBADMSG;
			/* its queues, or what its buffers allow now (TCP grows them as it goes) */
			mi = diag_attr(nh, sizeof(*m), INET_DIAG_SKMEMINFO, &mlen);
			*bytes += max_u64(meminfo(mi, mlen, SK_MEMINFO_RMEM_ALLOC) +
						  meminfo(mi, mlen, SK_MEMINFO_WMEM_ALLOC) +
						  meminfo(mi, mlen, SK_MEMINFO_WMEM_QUEUED) +
						  meminfo(mi, mlen, SK_MEMINFO_BACKLOG),
					  meminfo(mi, mlen, SK_MEMINFO_RCVBUF) +
						  meminfo(mi, mlen, SK_MEMINFO_SNDBUF));
		}
		off += NLMSG_ALIGN(nh->nlmsg_len);
	}
	return 0;
}

/* ---- side effects ---- */

/* A NETLINK_SOCK_DIAG socket made inside the network namespace of netns_fd, and that
 * namespace's socket sysctls, read from there (/proc/sys/net is the caller's namespace's).
 * The supervisor joins that namespace for good: it needs no network of its own once the
 * sandbox runs (its pipes and connected sockets do not care), and unprivileged it could not
 * go back to the host's anyway. It may join: unprivileged, it owns the user namespace bwrap
 * made (it created it). No helper process: under --pids, RLIMIT_NPROC counts this run's
 * tasks, and one more could make agentbox-init's fork of the interpreter fail. Returns 0 or
 * -errno. */
static int
diag_open(struct ab_memwatch *mw, int netns_fd)
{
	char buf[64];
	int fd;

	if (setns(netns_fd, CLONE_NEWNET) < 0)
		return -errno;
	fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	if (fd < 0)
		return -errno;
	mw->diag_fd = fd;
	if (read_small_file_at(AT_FDCWD, "/proc/sys/net/core/wmem_default", buf, sizeof(buf)) > 0)
		mw->wmem_default = strtoull(buf, NULL, 10);
	if (read_small_file_at(AT_FDCWD, "/proc/sys/net/unix/max_dgram_qlen", buf, sizeof(buf)) > 0)
		mw->dgram_qlen = strtoull(buf, NULL, 10) + 1;
	return 0;
}

int
memwatch_kobj_attach(struct ab_memwatch *mw)
{
	cleanup_fd int netns = -1;
	char buf[64];

	mw->wmem_default = 212992;
	mw->dgram_qlen = 11;
	mw->inotify_queue = 16384ull * INOTIFY_EVENT_MAX;
	if (read_small_file_at(AT_FDCWD, "/proc/sys/fs/inotify/max_queued_events", buf,
			       sizeof(buf)) > 0)
		mw->inotify_queue = strtoull(buf, NULL, 10) * INOTIFY_EVENT_MAX;
	if (!mw->check_fs)
		return 0; /* unit tests: a fake /proc has no namespaces */
	netns = openat(mw->proc_fd, "1/ns/net", O_RDONLY | O_CLOEXEC);
	if (netns < 0)
		return errno == ENOENT ? -ESRCH : -errno; /* PID 1 gone: the sandbox ended */
	/* the sandbox's network namespace is never ours (agentbox-init checks the same, but
	 * this may come first: a bwrap that shared it gets the same answer either way) */
	{
		struct stat a, b;

		if (!mw->share_net && fstat(netns, &a) == 0 && stat("/proc/self/ns/net", &b) == 0 &&
		    a.st_dev == b.st_dev && a.st_ino == b.st_ino)
			return -EXDEV;
	}
	return diag_open(mw, netns);
}

/* Adds the sockets of one family/protocol: a dump with the memory extensions asked for. */
static int
diag_dump(struct ab_memwatch *mw, uint8_t family, uint8_t protocol, struct ab_sockdiag_sum *sum)
{
	struct {
		struct nlmsghdr nh;
		union {
			struct unix_diag_req u;
			struct inet_diag_req_v2 i;
		} r;
	} req;
	struct ab_sock_costs c = { .per_socket = AB_MEMWATCH_SOCK_COST,
				   .dead_reserve = 2 * mw->wmem_default,
				   .dgram_reserve = mw->dgram_qlen * mw->wmem_default };
	struct sockaddr_nl nl = { .nl_family = AF_NETLINK };
	union {
		char buf[32768];
		struct nlmsghdr align;
	} u;
	size_t rlen = family == AF_UNIX ? sizeof(req.r.u) : sizeof(req.r.i);

	memset(&req, 0, sizeof(req));
	req.nh.nlmsg_len = (uint32_t) NLMSG_LENGTH(rlen);
	req.nh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
	req.nh.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
	if (family == AF_UNIX) {
		req.r.u.sdiag_family = AF_UNIX;
		req.r.u.udiag_states = ~0u;
		req.r.u.udiag_show = UDIAG_SHOW_PEER | UDIAG_SHOW_RQLEN | UDIAG_SHOW_MEMINFO;
	} else {
		req.r.i.sdiag_family = family;
		req.r.i.sdiag_protocol = protocol;
		req.r.i.idiag_ext = 1u << (INET_DIAG_SKMEMINFO - 1);
		req.r.i.idiag_states = ~0u;
	}
	if (sendto(mw->diag_fd, &req, req.nh.nlmsg_len, 0, (struct sockaddr *) &nl, sizeof(nl)) < 0)
		return -errno;
	for (;;) {
		ssize_t n = recv(mw->diag_fd, u.buf, sizeof(u.buf), 0);
		int r;

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EPROTO;
		r = memwatch_parse_sockdiag(u.buf, (size_t) n, &c, sum);
		/* a protocol this kernel has no diag module for: nothing of it to count */
		if (r == -ENOENT || r == -EOPNOTSUPP)
			return 0;
		if (r != 0)
			return r < 0 ? r : 0;
	}
}

static int
u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;

	return x < y ? -1 : x > y;
}

/* An inode set: pushed, then sorted and made unique. */
struct inoset {
	uint64_t *v;
	size_t n, cap;
};

static void
inoset_push(struct inoset *s, uint64_t ino)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 64;
		s->v = xrealloc(s->v, s->cap * sizeof(*s->v));
	}
	s->v[s->n++] = ino;
}

static size_t
inoset_unique(struct inoset *s)
{
	size_t k = 0;

	if (s->n == 0)
		return 0;
	qsort(s->v, s->n, sizeof(*s->v), u64_cmp);
	for (size_t i = 1; i < s->n; i++)
		if (s->v[i] != s->v[k])
			s->v[++k] = s->v[i];
	s->n = k + 1;
	return s->n;
}

static bool
inoset_has(const struct inoset *s, uint64_t ino)
{
	return s->n > 0 && bsearch(&ino, s->v, s->n, sizeof(*s->v), u64_cmp) != NULL;
}

/* Reads dirfd/path (at most cap bytes) into a malloc'd string, or NULL. */
static char *
read_text(int dirfd, const char *path, size_t cap)
{
	cleanup_fd int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	char *text = NULL;

	if (fd < 0)
		return NULL;
	if (read_all_capped(fd, cap, &text) < 0)
		return NULL;
	return text;
}

/* Lines of dirfd/path, read in pieces (a maps file can be megabytes). */
static uint64_t
count_newlines(int dirfd, const char *path)
{
	cleanup_fd int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	char buf[16384];
	uint64_t n = 0, total = 0;
	ssize_t k;

	if (fd < 0)
		return 0;
	while (total < MAPS_CAP && (k = read(fd, buf, sizeof(buf))) > 0) {
		for (ssize_t i = 0; i < k; i++)
			n += buf[i] == '\n';
		total += (uint64_t) k;
	}
	return n;
}

/* One process's fds: charged into *bytes, pipes and sockets noted for the run-wide count.
 * Returns its fds. */
static uint64_t
scan_fds(struct ab_memwatch *mw, const char *pid, struct inoset *pipes, const struct inoset *queued,
	 struct inoset *read_socks, uint64_t *bytes)
{
	char path[600]; /* PID/fdinfo/N: both names of at most NAME_MAX */
	cleanup_fd int dfd = -1;
	uint64_t n = 0, epolls = 0, watches = 0;
	struct stat st;
	DIR *d;
	struct dirent *de;

	snprintf(path, sizeof(path), "%s/fd", pid);
	dfd = openat(mw->proc_fd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	d = dfd >= 0 ? fdopendir(dfd) : NULL;
	if (!d) {
		/* unreadable (non-dumpable, and no capability over it): the worst for each; but
		 * PID 1 is agentbox-init, non-dumpable on purpose, with its few fds known (its
		 * stdio is the interpreter's, the status pipe is drained by the supervisor) */
		if (fstatat(mw->proc_fd, path, &st, AT_SYMLINK_NOFOLLOW) == 0) {
			*bytes += (uint64_t) st.st_size * (strcmp(pid, "1") == 0
								   ? AB_MEMWATCH_FD_COST
								   : AB_MEMWATCH_FD_HIDDEN);
			return (uint64_t) st.st_size;
		}
		return 0;
	}
	dfd = -1; /* d owns it */
	while ((de = readdir(d))) {
		char target[128];
		uint64_t ino = 0;
		ssize_t l;

		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		n++;
		*bytes += AB_MEMWATCH_FD_COST;
		l = readlinkat(dirfd(d), de->d_name, target, sizeof(target) - 1);
		if (l < 0)
			continue; /* closed since readdir */
		target[l] = '\0';
		switch (memwatch_fd_kind(target, &ino)) {
		case AB_FD_PIPE:
			inoset_push(pipes, ino);
			break;
		case AB_FD_SOCKET:
			/* fds in flight in its queue, each as a pipe: only a socket with data
			 * queued to it can hold any (the dump said which), and once per socket */
			if (inoset_has(queued, ino) && !inoset_has(read_socks, ino)) {
				cleanup_free char *info = NULL;

				snprintf(path, sizeof(path), "%s/fdinfo/%s", pid, de->d_name);
				info = read_text(mw->proc_fd, path, 4096);
				if (info)
					*bytes += memwatch_parse_scm_fds(info) *
						  AB_MEMWATCH_PIPE_COST;
				inoset_push(read_socks, ino);
				(void) inoset_unique(read_socks);
			}
			break;
		case AB_FD_EPOLL: {
			cleanup_free char *info = NULL;

			snprintf(path, sizeof(path), "%s/fdinfo/%s", pid, de->d_name);
			info = read_text(mw->proc_fd, path, 64u << 20);
			epolls++;
			if (info)
				watches += memwatch_count_lines(info, "tfd:");
			break;
		}
		case AB_FD_INOTIFY:
			*bytes += mw->inotify_queue;
			break;
		case AB_FD_PTMX:
			*bytes += AB_MEMWATCH_PTY_COST;
			break;
		case AB_FD_OTHER:
		default:
			break;
		}
	}
	closedir(d);
	/* epoll watches: what the instances hold, or what they can come to hold before the
	 * next scan, whichever is more. Each can watch every file of this process: a script
	 * adding watches to many instances faster than their fdinfo can be read (a scan of
	 * millions of tfd lines takes hundreds of ms) is charged at once. */
	if (epolls * n > watches)
		watches = epolls * n;
	*bytes += watches * AB_MEMWATCH_EPITEM_COST;
	return n;
}

/* in the order of memwatch_parse_sockstat's bits */
static const struct {
	uint8_t family, protocol;
} dumps[] = { { AF_UNIX, 0 },
	      { AF_INET, IPPROTO_TCP },
	      { AF_INET6, IPPROTO_TCP },
	      { AF_INET, IPPROTO_UDP },
	      { AF_INET6, IPPROTO_UDP },
	      { AF_INET, IPPROTO_UDPLITE },
	      { AF_INET6, IPPROTO_UDPLITE } };

int
memwatch_sockets(struct ab_memwatch *mw, bool inet_only, struct ab_sockdiag_sum *sum)
{
	char v4[1024], v6[1024];
	unsigned need;
	int r = 0;

	if (mw->diag_fd < 0)
		return 0;
	/* AF_UNIX always (its own table per namespace: cheap); TCP and UDP walk tables shared
	 * by every namespace (milliseconds), so only when this one has any */
	if (read_small_file_at(mw->proc_fd, "1/net/sockstat", v4, sizeof(v4)) < 0)
		v4[0] = '\0';
	if (read_small_file_at(mw->proc_fd, "1/net/sockstat6", v6, sizeof(v6)) < 0)
		v6[0] = '\0';
	need = (inet_only ? 0 : 1u) | memwatch_parse_sockstat(v4, v6);
	for (size_t i = 0; i < ARRAY_SIZE(dumps) && r == 0; i++)
		if (need & (1u << i))
			r = diag_dump(mw, dumps[i].family, dumps[i].protocol, sum);
	return r;
}

int
memwatch_kobj_scan(struct ab_memwatch *mw, uint64_t *ret_bytes, uint64_t *ret_fds)
{
	struct inoset pipes = { 0 }, queued = { 0 }, read_socks = { 0 };
	struct ab_sockdiag_sum sum = { 0 };
	cleanup_fd int dfd = -1;
	cleanup_free char *locks = NULL;
	uint64_t bytes = 0, fds = 0;
	int saved = -1, r;
	DIR *d;
	struct dirent *de;

	/* the sockets first: which have data queued to them says whose fdinfo to read */
	r = memwatch_sockets(mw, false, &sum);
	queued.v = sum.queued;
	queued.n = sum.n_queued;
	queued.cap = sum.cap_queued;
	(void) inoset_unique(&queued);
	if (r < 0)
		goto out;
	bytes = sum.bytes;

	dfd = openat(mw->proc_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	d = dfd >= 0 ? fdopendir(dfd) : NULL;
	if (!d) {
		r = -errno;
		goto out;
	}
	dfd = -1;
	if (mw->read_uid != (uid_t) -1)
		saved = setfsuid(mw->read_uid);
	while ((de = readdir(d))) {
		char path[300];

		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		fds += scan_fds(mw, de->d_name, &pipes, &queued, &read_socks, &bytes);
		snprintf(path, sizeof(path), "%s/maps", de->d_name);
		bytes += count_newlines(mw->proc_fd, path) * AB_MEMWATCH_VMA_COST;
	}
	closedir(d);
	if (saved != -1)
		(void) setfsuid((uid_t) saved);
	bytes += inoset_unique(&pipes) * AB_MEMWATCH_PIPE_COST;
	locks = read_text(mw->proc_fd, "locks", 64u << 20);
	if (locks)
		bytes += memwatch_count_locks(locks) * AB_MEMWATCH_LOCK_COST;
	*ret_bytes = bytes;
	*ret_fds = fds;
out:
	free(pipes.v);
	free(queued.v);
	free(read_socks.v);
	return r;
}

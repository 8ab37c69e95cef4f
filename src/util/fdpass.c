#include "fdpass.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include <sys/socket.h>

#include "macro.h"

int
fd_send(int sock, const void *msg, size_t len, const int *fds, size_t nfds)
{
	union {
		char buf[CMSG_SPACE(FD_SEND_MAX * sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = { .iov_base = (void *) msg, .iov_len = len };
	struct msghdr mh = { .msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = u.buf,
			     .msg_controllen = CMSG_SPACE(nfds * sizeof(int)) };
	struct cmsghdr *cm;

	if (nfds == 0 || nfds > FD_SEND_MAX)
		return -EINVAL;
	memset(u.buf, 0, sizeof(u.buf));
	cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(nfds * sizeof(int));
	memcpy(CMSG_DATA(cm), fds, nfds * sizeof(int));
	return RETRY_EINTR(sendmsg(sock, &mh, MSG_NOSIGNAL)) < 0 ? -errno : 0;
}

ssize_t
fd_recv(int sock, void *buf, size_t len, int flags, int *fds, size_t max_fds, size_t *ret_nfds,
	bool *ret_truncated)
{
	union {
		char buf[CMSG_SPACE(FD_SEND_MAX * sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = { .iov_base = buf, .iov_len = len };
	struct msghdr mh = { .msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = u.buf,
			     .msg_controllen = sizeof(u.buf) };
	bool cut;
	ssize_t n;

	*ret_nfds = 0;
	if (ret_truncated)
		*ret_truncated = false;
	n = RETRY_EINTR(recvmsg(sock, &mh, flags | MSG_CMSG_CLOEXEC));
	if (n < 0)
		return -errno;
	cut = (mh.msg_flags & MSG_CTRUNC) != 0;
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
		size_t k;

		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k; i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
			if (!cut && *ret_nfds < max_fds)
				fds[(*ret_nfds)++] = fd;
			else
				(void) close(fd);
		}
	}
	if (cut) {
		for (size_t i = 0; i < *ret_nfds; i++)
			(void) close(fds[i]);
		*ret_nfds = 0;
		if (ret_truncated)
			*ret_truncated = true;
	}
	return n;
}

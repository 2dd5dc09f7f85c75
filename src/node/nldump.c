/* One netlink dump, its replies walked (see nldump.h). */
#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

#include "nldump.h"

int nldump(int protocol, const void *req, size_t len, int type, size_t min_len,
	   size_t max_bytes, nldump_cb cb, void *data)
{
	union {
		struct nlmsghdr h;
		char b[16384];
	} buf;
	size_t total = 0;
	int fd, rc = -1;

	fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK,
		    protocol);
	if (fd < 0)
		return -1;
	if (send(fd, req, len, 0) != (ssize_t)len)
		goto out;
	while (total < max_bytes) {
		ssize_t n = recv(fd, buf.b, sizeof(buf.b), 0);
		struct nlmsghdr *h;

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			goto out; /* EAGAIN too: a dump never pauses */
		total += (size_t)n;
		for (h = &buf.h; NLMSG_OK(h, n); h = NLMSG_NEXT(h, n)) {
			if (h->nlmsg_type == NLMSG_DONE) {
				rc = 0;
				goto out;
			}
			if (h->nlmsg_type == NLMSG_ERROR)
				goto out;
			if (h->nlmsg_type == type && h->nlmsg_len >= min_len)
				cb(data, h);
		}
	}
	rc = 1;
out:
	close(fd);
	return rc;
}

/* <poll.h> on Windows: WSAPoll, which watches sockets only (crun polls
 * only sockets there). */
#ifndef CRUN_COMPAT_POLL_H
#define CRUN_COMPAT_POLL_H
#include <winsock2.h>
static inline int poll(struct pollfd *fds, unsigned long n, int timeout)
{
	return WSAPoll(fds, n, timeout);
}
#endif

/*
 * One netlink dump (nldump.c): a request sent on a fresh non-blocking
 * netlink socket, its replies handed over one message at a time. Shared by
 * the interface addresses (netif.c, NETLINK_ROUTE) and the TCP sockets of a
 * port (tcptab.c, NETLINK_SOCK_DIAG). Private to libcrun.
 */
#ifndef CRUN_NLDUMP_H
#define CRUN_NLDUMP_H

#include <linux/netlink.h>
#include <stddef.h>

/* One reply message of the dump's type, at least min_len bytes long. */
typedef void (*nldump_cb)(void *data, const struct nlmsghdr *h);

/**
 * Send req (len bytes, an nlmsghdr first) on a netlink socket of protocol
 * and pass each reply of type type and at least min_len bytes (header
 * included) to cb, reading at most max_bytes. The kernel writes a dump's
 * next part as the last one is read, so nothing here waits.
 * Returns 0 at the dump's end, 1 when cut at max_bytes (what came was
 * passed on), -1 when netlink is refused, answers an error or breaks off.
 */
int nldump(int protocol, const void *req, size_t len, int type, size_t min_len,
	   size_t max_bytes, nldump_cb cb, void *data);

#endif

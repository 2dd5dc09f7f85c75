/*
 * This node's network identity as the workers' communication libraries will
 * see it. Gloo (and NCCL's socket setup) bind to the address of the host
 * name unless GLOO_SOCKET_IFNAME names an interface; on many Debian and
 * Ubuntu machines the host name maps to 127.0.1.1, and in containers it may
 * not resolve at all, so workers bind to loopback and other nodes are
 * refused. crun knows which interface reaches the rendezvous host, so it can
 * name the right one before anything fails.
 */
#ifndef CRUN_NETIF_H
#define CRUN_NETIF_H

#include <stddef.h>
#include <sys/socket.h>

enum netif_name_state {
	NETIF_NAME_OK,	     /* resolves to at least one non-loopback address */
	NETIF_NAME_LOOPBACK, /* resolves, but only to loopback addresses */
	NETIF_NAME_UNRESOLVED /* does not resolve */
};

/**
 * How host resolves; addr receives the first address found (or "").
 * Blocking (getaddrinfo): call before the loop runs, not on it.
 */
enum netif_name_state netif_name_state(const char *host, char *addr,
				       size_t len);

/**
 * The local interface and address this machine would use to reach host
 * (no packet is sent: a UDP socket is connected and asked for its address).
 * Returns 0, or a negative error when host does not resolve or no
 * interface holds the chosen address. *loopback is set when it is lo.
 */
int netif_route_to(const char *host, char *ifname, size_t iflen, char *addr,
		   size_t alen, int *loopback);

/**
 * The one interface that is up with a non-loopback IPv4 or IPv6 address
 * (link-local addresses aside), for when the rendezvous host is this
 * machine. Returns 0, or -ENOENT when there are none or several.
 */
int netif_only_interface(char *ifname, size_t iflen, char *addr, size_t alen);

/** Called once per address of this machine, during netif_addrs. */
typedef void (*netif_addr_cb)(void *data, const struct sockaddr *sa);

/**
 * Every IPv4 and IPv6 address of this machine's interfaces, up or not:
 * the kernel's address list alone (RTM_GETADDR; getifaddrs also dumps every
 * link with its statistics), getifaddrs where netlink is refused (or breaks
 * off mid-dump: an address may then come twice). Returns 0, or a negative
 * errno when neither answers.
 */
int netif_addrs(netif_addr_cb cb, void *data);

#endif

/*
 * Host-name and interface checks (see include/crun/netif.h). Everything here
 * is a few local system calls: getaddrinfo of names, a connected but unused
 * UDP socket, getifaddrs, a netlink dump of the addresses. Nothing goes on
 * the wire.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#ifndef _WIN32
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#endif

#include "crun/netif.h"
#ifndef _WIN32
#include "nldump.h"
#endif

static int is_loopback(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)sa)
				  ->sin_addr.s_addr) >>
			24) == 127;
	if (sa->sa_family == AF_INET6) {
		const struct in6_addr *a =
		    &((const struct sockaddr_in6 *)sa)->sin6_addr;

		if (IN6_IS_ADDR_V4MAPPED(a))
			return a->s6_addr[12] == 127;
		return IN6_IS_ADDR_LOOPBACK(a);
	}
	return 0;
}

static void addr_text(const struct sockaddr *sa, char *out, size_t len)
{
	if (getnameinfo(sa,
			sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
						  : sizeof(struct sockaddr_in),
			out, (socklen_t)len, NULL, 0, NI_NUMERICHOST) != 0)
		snprintf(out, len, "?");
}

enum netif_name_state netif_name_state(const char *host, char *addr, size_t len)
{
	struct addrinfo hints, *res = NULL, *ai;
	enum netif_name_state st = NETIF_NAME_LOOPBACK;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	if (addr && len)
		*addr = '\0';
	if (getaddrinfo(host, NULL, &hints, &res) != 0 || res == NULL)
		return NETIF_NAME_UNRESOLVED;
	if (addr && len)
		addr_text(res->ai_addr, addr, len);
	for (ai = res; ai; ai = ai->ai_next)
		if (!is_loopback(ai->ai_addr))
			st = NETIF_NAME_OK;
	freeaddrinfo(res);
	return st;
}

int netif_route_to(const char *host, char *ifname, size_t iflen, char *addr,
		   size_t alen, int *loopback)
{
	struct addrinfo hints, *res = NULL;
	struct sockaddr_storage me;
	socklen_t mlen = sizeof(me);
	struct ifaddrs *ifs = NULL, *i;
	int fd, rc = -ENOENT;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_DGRAM;
	if (getaddrinfo(host, "9", &hints, &res) != 0 || res == NULL)
		return -EHOSTUNREACH;
	fd = socket(res->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, res->ai_addr, res->ai_addrlen) != 0 ||
	    getsockname(fd, (struct sockaddr *)&me, &mlen) != 0) {
		rc = -errno;
		goto out;
	}
	addr_text((struct sockaddr *)&me, addr, alen);
	*loopback = is_loopback((struct sockaddr *)&me);
	if (getifaddrs(&ifs) != 0) {
		rc = -errno;
		goto out;
	}
	for (i = ifs; i; i = i->ifa_next) {
		char a[INET6_ADDRSTRLEN + 8];

		if (i->ifa_addr == NULL ||
		    i->ifa_addr->sa_family != me.ss_family)
			continue;
		addr_text(i->ifa_addr, a, sizeof(a));
		if (strcmp(a, addr) == 0) {
			snprintf(ifname, iflen, "%s", i->ifa_name);
			rc = 0;
			break;
		}
	}
out:
	if (ifs)
		freeifaddrs(ifs);
	if (fd >= 0)
#ifdef _WIN32
		closesocket((SOCKET)fd);
#else
		close(fd);
#endif
	freeaddrinfo(res);
	return rc;
}

int netif_only_interface(char *ifname, size_t iflen, char *addr, size_t alen)
{
	struct ifaddrs *ifs = NULL, *i;
	int n = 0;

	if (getifaddrs(&ifs) != 0)
		return -errno;
	for (i = ifs; i; i = i->ifa_next) {
		const struct sockaddr *sa = i->ifa_addr;

		if (sa == NULL || !(i->ifa_flags & IFF_UP) || is_loopback(sa) ||
		    (sa->sa_family != AF_INET && sa->sa_family != AF_INET6))
			continue;
		if (sa->sa_family == AF_INET6 &&
		    IN6_IS_ADDR_LINKLOCAL(
			&((const struct sockaddr_in6 *)sa)->sin6_addr))
			continue;
		/* Several addresses of one interface are one interface. */
		if (n > 0 && strcmp(ifname, i->ifa_name) == 0)
			continue;
		if (n++ == 0) {
			snprintf(ifname, iflen, "%s", i->ifa_name);
			addr_text(sa, addr, alen);
		}
	}
	freeifaddrs(ifs);
	return n == 1 ? 0 : -ENOENT;
}

#ifdef _WIN32
/* Windows has no netlink: getifaddrs (libuv's list) gives the addresses. */
static int addrs_netlink(netif_addr_cb cb, void *data)
{
	return -1;
}
#else
struct addr_ctx {
	netif_addr_cb cb;
	void *data;
};

/* One RTM_NEWADDR message: its address, as getifaddrs would give it. */
static void addr_of_msg(void *data, const struct nlmsghdr *h)
{
	const struct addr_ctx *c = data;
	const struct ifaddrmsg *m = NLMSG_DATA(h);
	const struct rtattr *a = IFA_RTA(m);
	const void *local = NULL, *address = NULL;
	int len = (int)IFA_PAYLOAD(h);
	size_t want = m->ifa_family == AF_INET ? 4 : 16;

	if (m->ifa_family != AF_INET && m->ifa_family != AF_INET6)
		return;
	for (; RTA_OK(a, len); a = RTA_NEXT(a, len)) {
		if (RTA_PAYLOAD(a) < want)
			continue;
		if (a->rta_type == IFA_LOCAL)
			local = RTA_DATA(a);
		else if (a->rta_type == IFA_ADDRESS)
			address = RTA_DATA(a);
	}
	/* IFA_LOCAL is the interface's own (IFA_ADDRESS is the peer's on a
	 * point-to-point link); IPv6 gives IFA_ADDRESS alone. */
	if (local == NULL)
		local = address;
	if (local == NULL)
		return;
	if (m->ifa_family == AF_INET) {
		struct sockaddr_in in;

		memset(&in, 0, sizeof(in));
		in.sin_family = AF_INET;
		memcpy(&in.sin_addr, local, 4);
		c->cb(c->data, (const struct sockaddr *)&in);
	} else {
		struct sockaddr_in6 in6;

		memset(&in6, 0, sizeof(in6));
		in6.sin6_family = AF_INET6;
		memcpy(&in6.sin6_addr, local, 16);
		if (IN6_IS_ADDR_LINKLOCAL(&in6.sin6_addr))
			in6.sin6_scope_id = m->ifa_index;
		c->cb(c->data, (const struct sockaddr *)&in6);
	}
}

/* The RTM_GETADDR dump; -1 when netlink is refused or breaks off. */
static int addrs_netlink(netif_addr_cb cb, void *data)
{
	struct {
		struct nlmsghdr nlh;
		struct ifaddrmsg ifa;
	} req;
	struct addr_ctx c = {cb, data};

	memset(&req, 0, sizeof(req));
	req.nlh.nlmsg_len = sizeof(req);
	req.nlh.nlmsg_type = RTM_GETADDR;
	req.nlh.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
	req.ifa.ifa_family = AF_UNSPEC;
	return nldump(NETLINK_ROUTE, &req, sizeof(req), RTM_NEWADDR,
		      NLMSG_LENGTH(sizeof(struct ifaddrmsg)), SIZE_MAX,
		      addr_of_msg, &c) == 0
		   ? 0
		   : -1;
}
#endif

int netif_addrs(netif_addr_cb cb, void *data)
{
	struct ifaddrs *ifs = NULL;

	if (addrs_netlink(cb, data) == 0)
		return 0;
	if (getifaddrs(&ifs) != 0)
		return -errno;
	for (struct ifaddrs *i = ifs; i != NULL; i = i->ifa_next)
		if (i->ifa_addr && (i->ifa_addr->sa_family == AF_INET ||
				    i->ifa_addr->sa_family == AF_INET6))
			cb(data, i->ifa_addr);
	freeifaddrs(ifs);
	return 0;
}

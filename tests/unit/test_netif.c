/*
 * Host-name and interface checks on this machine's loopback: a name that
 * maps to 127.x is "loopback", the route to 127.0.0.1 is the loopback
 * interface, and a numeric address resolves without any lookup.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "crun/netif.h"

Test(netif, loopback_names)
{
	char addr[64];

	cr_expect_eq(netif_name_state("127.0.1.1", addr, sizeof(addr)),
		     NETIF_NAME_LOOPBACK);
	cr_expect_str_eq(addr, "127.0.1.1");
	cr_expect_eq(netif_name_state("::1", addr, sizeof(addr)),
		     NETIF_NAME_LOOPBACK);
	cr_expect_eq(netif_name_state("10.1.2.3", addr, sizeof(addr)),
		     NETIF_NAME_OK, "a numeric, non-loopback address");
}

Test(netif, route_to_loopback)
{
	char ifname[64], addr[64];
	int lo = 0;

	cr_assert_eq(netif_route_to("127.0.0.1", ifname, sizeof(ifname), addr,
				    sizeof(addr), &lo),
		     0);
	cr_expect_eq(lo, 1);
	cr_expect_str_eq(addr, "127.0.0.1");
	cr_expect_str_eq(ifname, "lo");
}

/* The addresses as text, sorted by the order they come in: "a b c ". */
struct addr_text {
	char s[4096];
	int n;
};

static void put_addr(struct addr_text *t, const struct sockaddr *sa)
{
	char lit[INET6_ADDRSTRLEN] = "?";
	size_t off = strlen(t->s);

	if (sa->sa_family == AF_INET)
		inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, lit, sizeof(lit));
	else
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, lit,
			  sizeof(lit));
	snprintf(t->s + off, sizeof(t->s) - off, "%s ", lit);
	t->n++;
}

static void on_addr(void *data, const struct sockaddr *sa)
{
	put_addr(data, sa);
}

/* netif_addrs lists what getifaddrs lists, loopback included. */
Test(netif, addrs_are_getifaddrs_addresses)
{
	struct addr_text mine = {"", 0}, theirs = {"", 0};
	struct ifaddrs *ifs, *i;

	cr_assert_eq(netif_addrs(on_addr, &mine), 0);
	cr_assert_eq(getifaddrs(&ifs), 0);
	for (i = ifs; i; i = i->ifa_next)
		if (i->ifa_addr && (i->ifa_addr->sa_family == AF_INET ||
				    i->ifa_addr->sa_family == AF_INET6))
			put_addr(&theirs, i->ifa_addr);
	freeifaddrs(ifs);
	cr_assert_str_eq(mine.s, theirs.s);
	cr_assert(strstr(mine.s, "127.0.0.1 ") != NULL, "%s", mine.s);
}

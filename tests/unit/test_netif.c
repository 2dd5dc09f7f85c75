/*
 * Host-name and interface checks on this machine's loopback: a name that
 * maps to 127.x is "loopback", the route to 127.0.0.1 is the loopback
 * interface, and a numeric address resolves without any lookup.
 */
#include <criterion/criterion.h>
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

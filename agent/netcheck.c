/*
 * Before a multi-node job starts: will the workers' gloo (or NCCL's socket
 * bootstrap) be reachable? Both bind to the address of the host name unless
 * GLOO_SOCKET_IFNAME (NCCL_SOCKET_IFNAME) names an interface. Where the name
 * maps to loopback (127.0.1.1 on many Debian and Ubuntu machines) or does not
 * resolve (containers), they bind to loopback and every other node is
 * refused ("Connection refused" minutes later). The interface that reaches
 * the rendezvous host is the one to use: say so, or set it when asked
 * (--rdzv_conf=set_socket_ifname=true, or =nccl for NCCL_SOCKET_IFNAME too).
 */
#include <stdlib.h>
#include <string.h>

#include "crun/log.h"
#include "netcheck.h"

void netcheck_ifname(const struct crun_cfg *cfg, const char *host,
		     enum netif_name_state st, const char *addr)
{
	char ep[256], ifname[64], via[64];
	const char *why;
	int port, lo = 0, set = cfg->rdzv.set_ifname;

	if (getenv("GLOO_SOCKET_IFNAME") != NULL)
		return; /* the user chose */
	if (st == NETIF_NAME_OK)
		return;
	/* The first endpoint (etcd may list several), without a URL scheme. */
	snprintf(ep, sizeof(ep), "%s",
		 strstr(cfg->rdzv_endpoint, "://")
		     ? strstr(cfg->rdzv_endpoint, "://") + 3
		     : cfg->rdzv_endpoint);
	ep[strcspn(ep, ",/")] = '\0';
	if (cfg_split_endpoint(ep, ep, sizeof(ep), &port) != 0 ||
	    strcmp(ep, "localhost") == 0 || strncmp(ep, "127.", 4) == 0 ||
	    strcmp(ep, "::1") == 0 || strcmp(ep, "[::1]") == 0 ||
	    netif_route_to(ep, ifname, sizeof(ifname), via, sizeof(via), &lo) !=
		0)
		return;
	/*
	 * An endpoint written as loopback is a job on this machine alone.
	 * Else when its name leads to loopback, the rendezvous host is this
	 * machine (its name maps to 127.0.1.1 too): the others reach it
	 * through its only real interface, if it has just one.
	 */
	if (lo &&
	    netif_only_interface(ifname, sizeof(ifname), via, sizeof(via)) != 0)
		return;
	why = st == NETIF_NAME_UNRESOLVED ? "does not resolve"
					  : "resolves to loopback";
	if (set) {
		setenv("GLOO_SOCKET_IFNAME", ifname, 1);
		if (set == 2 && getenv("NCCL_SOCKET_IFNAME") == NULL)
			setenv("NCCL_SOCKET_IFNAME", ifname, 1);
		log_say("host name '%s' %s%s%s: workers get "
			"GLOO_SOCKET_IFNAME=%s%s (the interface of %s, which "
			"reaches the rendezvous host %s)",
			host, why, *addr ? " " : "", addr, ifname,
			set == 2 ? " and NCCL_SOCKET_IFNAME" : "", via, ep);
		return;
	}
	log_say("host name '%s' %s%s%s: gloo will bind there and other nodes "
		"cannot reach this node's workers; set GLOO_SOCKET_IFNAME=%s "
		"(the interface of %s, which reaches the rendezvous host %s) "
		"or pass --rdzv_conf=set_socket_ifname=true",
		host, why, *addr ? " " : "", addr, ifname, via, ep);
}

/*
 * Before a multi-node job starts: will the workers' gloo bind to an address
 * the other nodes reach (netcheck.c)? Private to agent/.
 */
#ifndef CRUN_AGENT_NETCHECK_H
#define CRUN_AGENT_NETCHECK_H

#include "crun/cfg.h"
#include "crun/netif.h"

/**
 * Warn (or set GLOO_SOCKET_IFNAME, when cfg asks) if host's name makes the
 * workers' gloo bind to loopback: st and addr are what netif_name_state
 * found for it. Blocking: before the loop runs.
 */
void netcheck_ifname(const struct crun_cfg *cfg, const char *host,
		     enum netif_name_state st, const char *addr);

#endif

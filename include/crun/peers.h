/*
 * Which peers may connect to the workers' store of a round: PyTorch's
 * TCPStore clients cannot authenticate, so the store is confined instead
 * (--rdzv_conf=store_allow, default "round"). Allowed: loopback, this
 * machine's own interface addresses, and the addresses the round's nodes
 * announced in their descriptors, resolved once when the round forms.
 */
#ifndef CRUN_PEERS_H
#define CRUN_PEERS_H

#include <stddef.h>

struct crun_peers;
struct sockaddr;

/**
 * Resolve a blank-separated list of node addresses (names or literals;
 * NULL for none) into an allow list. A name that does not resolve is left
 * out and named in errmsg (not an error: that node's workers would then
 * be refused, which the log says). 0 or UV_ENOMEM.
 */
int peers_new(const char *addrs, struct crun_peers **out, char *errmsg,
	      size_t errlen);
void peers_free(struct crun_peers *p);

/** Whether sa may connect (a store_allow_cb: data is the crun_peers). */
int peers_allow(void *data, const struct sockaddr *sa);

/** How many addresses the list holds (tests). */
size_t peers_count(const struct crun_peers *p);

#endif

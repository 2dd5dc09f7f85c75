/*
 * Which peers may connect to the workers' store of a round: PyTorch's
 * TCPStore clients cannot authenticate, so the store is confined instead
 * (--rdzv_conf=store_allow, default "round"). Allowed: loopback, this
 * machine's own interface addresses, and the addresses the round's nodes
 * announced in their descriptors (literals: host names are not resolved,
 * they often resolve nowhere, in containers and pods).
 */
#ifndef CRUN_PEERS_H
#define CRUN_PEERS_H

#include <stddef.h>

struct crun_peers;
struct sockaddr;

/**
 * Build an allow list from a list of IPv4 or IPv6 literals separated by
 * blanks or commas (NULL for none). A field that is not a literal (a host
 * name) is left out and named in errmsg (not an error: that node's workers
 * would then be refused, which the log says). No name is resolved: this
 * never blocks. 0 or UV_ENOMEM.
 */
int peers_new(const char *addrs, struct crun_peers **out, char *errmsg,
	      size_t errlen);
void peers_free(struct crun_peers *p);

/**
 * Whether sa may connect (a store_allow_cb: data is the crun_peers). This
 * machine's addresses are read (getifaddrs) the first time a peer is
 * neither loopback nor one of the listed ones.
 */
int peers_allow(void *data, const struct sockaddr *sa);

/**
 * This machine's interface addresses that another host could use (not
 * loopback, not link-local) as literals separated by commas, IPv4 first,
 * as many as fit in len bytes with the NUL. Returns how many; out is ""
 * when there are none.
 */
size_t peers_own_addrs(char *out, size_t len);

/** How many addresses the list holds (tests). */
size_t peers_count(const struct crun_peers *p);

#endif

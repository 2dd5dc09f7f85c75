/*
 * The etcd rendezvous backend: the key-value interface of rdzv.h over an
 * etcd v3 cluster (etcd.h), with no store host. Keys live under
 * "<etcd_prefix>/<run_id>/": "k/<key>" the algorithm's keys (attached to
 * the job's lease), "w/<node>/<key>" a node's marks for what it watches
 * and "n/<node>" its presence (both attached to the node's own lease). A
 * node whose lease expires or is revoked loses its marks: every other node
 * sees the deletes on its watch and hears of it through on_vanish.
 */
#ifndef CRUN_RDZV_ETCD_H
#define CRUN_RDZV_ETCD_H

#include <uv.h>

#include "crun/etcd.h"
#include "crun/rdzv_types.h"

struct crun_rdzv_etcd;

extern const struct rdzv_kv_ops rdzv_etcd_ops;

struct rdzv_etcd_opts {
	const char *endpoints; /* --rdzv_endpoint: see etcd_parse_endpoints */
	int https;	       /* protocol=https */
	const char *cacert, *cert, *key;
	const char *user, *password_file;
	const char *prefix; /* etcd_prefix, "/crun" */
	const char *run_id;
	double lease_ttl;	/* s: a lost node is noticed after this */
	double timeout;		/* s: read_timeout, all endpoints failing */
	struct etcd_limits lim; /* rdzv_conf etcd_*; 0: the defaults */
	/* Only read the job's keys (`crun status`): no lease of this node,
	 * no watch, no job lease created; a job without one is
	 * CRUN_ENOTFOUND. Writes then go to no lease: do not write. */
	int readonly;
	char *errmsg; /* filled on a synchronous error */
	size_t errlen;
};

typedef void (*rdzv_etcd_open_cb)(struct crun_rdzv_etcd *s, int status,
				  void *data);

/**
 * Grant this node's lease, find or create the job's, start the watch. cb
 * runs once (status 0, or an error with rdzv_etcd_errmsg) unless this
 * returns an error (errmsg says why).
 */
int rdzv_etcd_open(uv_loop_t *loop, const struct rdzv_etcd_opts *o,
		   rdzv_etcd_open_cb cb, void *data,
		   struct crun_rdzv_etcd **out);
const char *rdzv_etcd_errmsg(const struct crun_rdzv_etcd *s);

/** One try at one etcd member, in s, for a lease of lease_ttl s: a
 * quarter of it, within 0.5-3 s. */
double rdzv_etcd_attempt(double lease_ttl);

/**
 * Fail pending requests (CRUN_ECANCELED, synchronously), revoke this
 * node's lease (and the job's when no node is left), bounded by a few
 * seconds, close; cb then frees with rdzv_etcd_free.
 */
void rdzv_etcd_close(struct crun_rdzv_etcd *s, void (*cb)(void *data),
		     void *data);
void rdzv_etcd_free(struct crun_rdzv_etcd *s);

#endif

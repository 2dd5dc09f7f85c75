/*
 * The etcd backend's leases (rdzv_etcd_lease.c), a part of the backend
 * (rdzv_etcd.c creates it): this node's lease and the job's, granted or
 * adopted when the backend opens, kept alive every lease_ttl/3, revoked
 * when it closes. It reports through rdzv_etcd_lease.on. Private to
 * libcrun.
 */
#ifndef CRUN_RDZV_ETCD_LEASE_H
#define CRUN_RDZV_ETCD_LEASE_H

#include <stdint.h>
#include <uv.h>

#include "crun/etcd.h"

struct rdzv_etcd_lease_ops {
	/* Opening is over: status 0 (the leases are held, this node's
	 * presence is written) or an error, and why. Once. */
	void (*opened)(void *data, int status, const char *why);
	/* Every lease_ttl/3 after opening, once the keepalives are sent. */
	void (*tick)(void *data);
	/* A lease cannot be kept (the job's expired, etcd failed). */
	void (*fatal)(void *data, int status, const char *why);
	/* rdzv_etcd_lease_revoke is done (whether etcd answered or not). */
	void (*revoked)(void *data);
};

struct rdzv_etcd_lease {
	struct etcd *etcd;
	const char *ns;	 /* the job's keys: "<prefix>/<run_id>/" */
	double ttl;	 /* s: this node's lease */
	double timeout;	 /* s: read_timeout */
	char node[32];	 /* this node's lease ID ("" until granted) */
	char job[32];	 /* the job's lease ID */
	char cand[32];	 /* a job lease granted while opening */
	int64_t rev;	 /* etcd's revision when the job's lease was found */
	int opening;
	int stopped;
	uv_timer_t ka;
	struct rdzv_etcd_lease_ops on;
	void *data;
	void (*closed_cb)(void *data);
};

void rdzv_etcd_lease_init(struct rdzv_etcd_lease *l, uv_loop_t *loop,
			  struct etcd *etcd, const char *ns, double ttl,
			  double timeout, const struct rdzv_etcd_lease_ops *on,
			  void *data);
/*
 * Grant this node's lease, adopt the job's (or create it: the first node,
 * with a create_revision==0 txn) and write this node's presence; readonly:
 * only find the job's lease (none: CRUN_ENOTFOUND). on.opened says how it
 * went.
 */
void rdzv_etcd_lease_open(struct rdzv_etcd_lease *l, int readonly);
/* No more keepalives, nothing more reported but revoked. */
void rdzv_etcd_lease_stop(struct rdzv_etcd_lease *l);
/* Revoke this node's lease, then the job's if no node is left. */
void rdzv_etcd_lease_revoke(struct rdzv_etcd_lease *l);
/* Close the timer (after stop); cb(data) once it is closed. */
void rdzv_etcd_lease_close(struct rdzv_etcd_lease *l, void (*cb)(void *data));

#endif

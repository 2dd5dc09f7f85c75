/*
 * Opening the rendezvous backend --rdzv_backend names, in one place for the
 * agents and `crun status`: which names are accepted (and why etcd-v2 is
 * not), the default ports, etcd prefix and lease, and how the rendezvous
 * options map onto rdzv_store.h's and rdzv_etcd.h's.
 */
#ifndef CRUN_RDZV_BACKEND_H
#define CRUN_RDZV_BACKEND_H

#include <stddef.h>
#include <uv.h>

#include "crun/auth.h"
#include "crun/cfg.h"
#include "crun/rdzv_etcd.h"
#include "crun/rdzv_store.h"

enum rdzv_backend_kind {
	RDZV_BACKEND_C10D,   /* a crun store, hosted by one agent */
	RDZV_BACKEND_STATIC, /* the same, at master_addr:master_port */
	RDZV_BACKEND_ETCD,   /* an etcd cluster (its v3 API) */
};

/* Defaults when the endpoint or rdzv_conf does not say (torchrun's). */
#define RDZV_BACKEND_C10D_PORT 29400
#define RDZV_BACKEND_STATIC_PORT 29500
#define RDZV_BACKEND_ETCD_PREFIX "/crun"
#define RDZV_BACKEND_LEASE_TTL 10.0

/**
 * The backend called name: c10d, static, etcd or its alias etcd-v3.
 * Returns its enum rdzv_backend_kind, or CRUN_EUSAGE with why ("expected
 * ...", or why etcd-v2 is refused and what to use instead).
 */
int rdzv_backend_kind(const char *name, char *why, size_t wlen);

struct rdzv_backend_opts {
	int kind;	      /* enum rdzv_backend_kind */
	const char *endpoint; /* --rdzv_endpoint */
	/* etcd: NULL is torchrun's "none"; store: the job a store this node
	 * hosts serves (rdzv_store_opts' job) */
	const char *run_id;
	/* rdzv_conf: etcd's prefix, TLS, auth, lease and client bounds; NULL
	 * or 0 fields take the defaults above. */
	const struct crun_rdzv_conf *conf;
	int is_host;	/* store: 1 host it, 0 reach it, -1 if it is here */
	int readonly;	/* `crun status`: only read (etcd: no lease) */
	double timeout; /* s: store: keep connecting; etcd: read_timeout */
	const struct crun_store_limits *limits; /* store host's, or NULL */
	const struct crun_auth_key *auth;	/* store: the secret, or NULL */
	char *errmsg; /* filled on a synchronous error */
	size_t errlen;
};

/**
 * Open the backend o names: the store (*rs, then on_store runs once) or
 * etcd (*re, then on_etcd runs once), as rdzv_store_open / rdzv_etcd_open,
 * whose contracts hold. Returns 0 or an error (errmsg says why: an endpoint
 * that is not HOST[:PORT] is CRUN_EUSAGE); then no callback runs.
 */
int rdzv_backend_open(uv_loop_t *loop, const struct rdzv_backend_opts *o,
		      rdzv_store_open_cb on_store, rdzv_etcd_open_cb on_etcd,
		      void *data, struct crun_rdzv_store **rs,
		      struct crun_rdzv_etcd **re);

#endif

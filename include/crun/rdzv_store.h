/*
 * The c10d backend of the rendezvous: the key-value interface of rdzv.h
 * over the crun store, and the choice of which agent hosts that store at the
 * rendezvous endpoint (see rdzv_store.c for the rules).
 */
#ifndef CRUN_RDZV_STORE_H
#define CRUN_RDZV_STORE_H

#include <uv.h>

#include "crun/auth.h"
#include "crun/rdzv_types.h"
#include "crun/store.h"

struct crun_rdzv_store;

/** The operations to hand to rdzv_new, with the crun_rdzv_store as kv. */
extern const struct rdzv_kv_ops rdzv_store_ops;

struct rdzv_store_opts {
	const char *host; /* endpoint host */
	int port;	  /* endpoint port */
	int is_host;	  /* -1: host if the endpoint is this machine */
	int timeout_ms;	  /* keep trying to connect this long */
	const struct crun_store_limits *limits;
	/* The rendezvous secret (auth.h; copied), or NULL: unauthenticated. */
	const struct crun_auth_key *auth;
	/*
	 * The run id written as RDZV_JOB_KEY into the store this node hosts
	 * before it serves anyone (copied), or NULL: the host's job is then
	 * the endpoint's, whoever reaches it first.
	 */
	const char *job;
	char *errmsg; /* filled on a synchronous error */
	size_t errlen;
};

/**
 * status 0: connected (and hosting, if chosen); else see rdzv_store_errmsg.
 * Giving up at the timeout: CRUN_EREFUSED when the last attempt was refused
 * (nothing listens), CRUN_ETIMEDOUT otherwise (no answer).
 */
typedef void (*rdzv_store_open_cb)(struct crun_rdzv_store *s, int status,
				   void *data);
typedef void (*rdzv_store_close_cb)(void *data);

/**
 * Host the store if this agent should, then connect to it. cb runs once
 * unless an error is returned (errmsg says why, e.g. CRUN_EADDRINUSE_OTHER
 * when is_host=true and the port is taken). Close with rdzv_store_close,
 * then free with rdzv_store_free from its callback.
 */
int rdzv_store_open(uv_loop_t *loop, const struct rdzv_store_opts *o,
		    rdzv_store_open_cb cb, void *data,
		    struct crun_rdzv_store **out);

int rdzv_store_is_host(const struct crun_rdzv_store *s);
const char *rdzv_store_errmsg(const struct crun_rdzv_store *s);
struct crun_store_server *rdzv_store_server(const struct crun_rdzv_store *s);

/**
 * One more connection to the store, made as the rendezvous makes its own
 * (the endpoint, the secret): for a stream of another part (the job
 * console). Close it with store_aclient_close.
 */
int rdzv_store_client(struct crun_rdzv_store *s,
		      struct crun_store_aclient **out);

/** Close every connection (failing pending requests) and the server. */
void rdzv_store_close(struct crun_rdzv_store *s, rdzv_store_close_cb cb,
		      void *data);
void rdzv_store_free(struct crun_rdzv_store *s);

/** Whether host names this machine: localhost, hostname, FQDN, a local address.
 */
int rdzv_host_is_local(const char *host);

/** "pid N (comm)" of the process listening on TCP port, or "". */
void rdzv_port_holder(int port, char *out, size_t len);

#endif

/*
 * The store relay: a per-node TCPStore server for the node's workers that
 * forwards their requests over one connection to the round's workers' store
 * (always a crun store), so that store holds one connection per node, not
 * one per rank. PyTorch 1.13 (G0) and 2.x (G3) workers see the same replies,
 * in the same order, as from the store itself; concurrent requests that can
 * be answered by one upstream request (the same key's WAITs and GETs, ADDs
 * to one counter) are combined. See src/store/store_relay.c.
 *
 * Nothing here is thread-safe: a relay belongs to the thread running its
 * loop.
 */
#ifndef CRUN_STORE_RELAY_H
#define CRUN_STORE_RELAY_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "crun/cfg.h"
#include "crun/store.h"

struct crun_store_relay;

struct store_relay_opts {
	const char
	    *up_host; /* the round's workers' store (numeric or a name) */
	int up_port;
	const char *listen_host; /* where this node's workers connect (NULL:
				    "::", dual stack) */
	int listen_port;	 /* 0: any (see store_relay_port) */
	int listen_fd; /* >= 0: serve this bound (listening) TCP socket */
	/* NULL: store_limits_default(). max_key, max_value and max_keys bound
	 * each request as the store does; max_conns bounds the relay's
	 * clients; max_output each client's unsent replies; max_memory all the
	 * relay holds (requests and replies in flight). */
	const struct crun_store_limits *lim;
	/* What one client may cost the relay before it is no longer read
	 * (0: max_output): its requests in flight, counted with the most
	 * their replies can take, its parked waits and its replies not yet
	 * written. A client's share is also at most max_memory divided among
	 * the clients. A frame past store_limits_max_frame, or a partial frame
	 * idle for idle_timeout, closes its client as at the store. */
	size_t max_client_bytes;
	int connect_timeout_ms; /* to reach the store (0: 10000) */
};

/** Called once, from the loop, when the upstream connection is lost (or
 * could not be made): status is its error. Every client was closed. */
typedef void (*store_relay_lost_cb)(struct crun_store_relay *r, int status,
				    void *data);

/**
 * Start a relay on loop: listen (opts->listen_fd, or listen_host:port) and
 * connect to up_host:up_port. Clients may connect at once; their requests go
 * up once the connection is made. lost (may be NULL) runs at most once. On
 * success *out owns its handles: release it with store_relay_close. With
 * listen_fd, the relay owns fd on success, the caller on error.
 */
int store_relay_new(uv_loop_t *loop, const struct store_relay_opts *o,
		    store_relay_lost_cb lost, void *data,
		    struct crun_store_relay **out);

/** The port the relay listens on. */
int store_relay_port(const struct crun_store_relay *r);

struct store_relay_stats {
	uint64_t clients;     /* clients connected now */
	uint64_t requests_in; /* requests received from clients so far */
	uint64_t requests_up; /* requests sent to the store so far */
};

/** Fill st (O(1)). */
void store_relay_stats(const struct crun_store_relay *r,
		       struct store_relay_stats *st);

/**
 * Close the listener, every client and the upstream connection (parked
 * clients get no answer), free r and call cb(data) (may be NULL) once every
 * handle is closed. lost is not called. r must not be used afterwards.
 */
void store_relay_close(struct crun_store_relay *r, store_close_cb cb,
		       void *data);

#endif

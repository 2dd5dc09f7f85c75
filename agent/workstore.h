/*
 * The workers' store of a round, a part of the agent (workstore.c): the
 * agent's own store server on group rank 0's node, confined to the round's
 * nodes, or a free port held for worker rank 0's own TCPStore; and, with
 * store_relay, this node's relay to it. Private to agent/.
 */
#ifndef CRUN_AGENT_WORKSTORE_H
#define CRUN_AGENT_WORKSTORE_H

#include <uv.h>

#include "crun/cfg.h"
#include "crun/peers.h"
#include "crun/store.h"
#include "crun/store_relay.h"
#include "worker.h"

/** The relay lost the workers' store at up ("addr:port"; status why). */
typedef void (*workstore_lost_cb)(void *data, const char *up, int status);

struct torchprobe;

struct workstore {
	uv_loop_t *loop;
	const struct crun_cfg *cfg;
	int multi;	   /* several nodes */
	int worker_hosted; /* their torch cannot use the agent store (no
			      libuv, or older than it): worker rank 0 hosts it */
	int port_fd;	   /* MASTER_PORT held for the round, or -1 */
	struct crun_store_server *server; /* the round's, or NULL */
	struct crun_peers *peers;	  /* who may reach it */
	int survivors; /* the pool's survivors when it was started */
	struct crun_store_relay *relay; /* this node's, or NULL */
	char relay_up[300]; /* the store it relays to: "addr:port" */
	struct torchprobe *probe;     /* asking the workers' torch, or NULL */
	void (*on_torch)(void *data); /* ... says what it accepts */
	workstore_lost_cb on_lost;
	void *data;
};

void workstore_init(struct workstore *ws, uv_loop_t *loop,
		    const struct crun_cfg *cfg, int multi,
		    workstore_lost_cb on_lost, void *data);

/**
 * Start the workers' store of round (on group rank 0): *port, and
 * *by_worker when worker rank 0 hosts it on a port held for it.
 * rdzv_server: the rendezvous store this agent hosts (static shares it),
 * or NULL; rdzv: the rendezvous (its peers may reach the store), or NULL;
 * survivors: workers that outlived SIGKILL so far (pool.h).
 */
int workstore_start(struct workstore *ws, int round,
		    struct crun_store_server *rdzv_server,
		    const struct crun_rdzv *rdzv, int survivors, int *port,
		    int *by_worker);

/** The port held for worker rank 0 is theirs now: let it go. */
void workstore_release_port(struct workstore *ws);

/**
 * With store_relay, start this node's relay to rp's workers' store and point
 * rp (the workers' MASTER_ADDR/MASTER_PORT) at it; 0 or an error.
 */
int workstore_start_relay(struct workstore *ws, struct worker_round *rp);

/** Close this node's relay of the round (if any): its workers are gone. */
void workstore_stop_relay(struct workstore *ws);

/**
 * Python workers on the agent store: does their torch accept its client
 * (torchstore.h), or must worker rank 0 host their store (worker_hosted)?
 * 0: known (cached) or not to be asked: go on now; 1: being asked, and
 * known(data) runs once it is known, unless workstore_close comes first.
 */
int workstore_ask_torch(struct workstore *ws, void (*known)(void *data));

/** Close everything: the relay, the store, the held port, the probe. */
void workstore_close(struct workstore *ws);

#endif

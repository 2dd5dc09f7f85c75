/*
 * The agent on several nodes, a part of the agent (agent.c creates it):
 * the rendezvous backend (the c10d/static store, hosted or reached, or
 * etcd), the rendezvous over it, and how a round that ended here or
 * elsewhere decides the job. It reads and writes the agent's stop record
 * (stop.h) and reports everything else through nodes_ops. Private to
 * agent/.
 */
#ifndef CRUN_AGENT_NODES_H
#define CRUN_AGENT_NODES_H

#include <uv.h>

#include "crun/cfg.h"
#include "crun/rdzv.h"
#include "crun/store.h"
#include "stop.h"

struct events;
struct nodes;

/** What the part reports to the agent; data is nodes_opts.data. */
struct nodes_ops {
	/* The rendezvous runs, or the group re-forms: join the next round. */
	void (*join)(void *data);
	/* Another node (or the store) ended the round; stop->peer holds it
	 * when it was the first end of the round. */
	void (*ended)(void *data, const struct rdzv_end *e);
	/* This node's workers all succeeded and the job is over. */
	void (*succeeded)(void *data);
	/* The round's pending failure report: printed (1) or dropped (0). */
	void (*report)(void *data, int print);
	/* The end: crun exits with status once every handle is closed. */
	void (*finish)(void *data, int status);
	/* rdzv_opts.start_master and on_stacks, passed on. */
	int (*start_master)(void *data, int round, int *port, int *by_worker);
	void (*on_stacks)(void *data, const char *nonce);
};

struct nodes_opts {
	uv_loop_t *loop;
	struct crun_cfg *cfg;
	const char *host;
	int name_unresolved; /* the host name does not resolve */
	struct events *ev;   /* or NULL */
	struct agent_stop *stop;
	const struct nodes_ops *ops;
	void *data;
};

/**
 * Host or reach the rendezvous store (or, with etcd, be one more client of
 * the cluster), then start the rendezvous over it and join: ops->join, or
 * ops->finish(1) when the backend could not be opened. *out is set even on
 * an error (a negative libuv or CRUN_ error, said in one line): close it
 * with nodes_close.
 */
int nodes_start(const struct nodes_opts *o, struct nodes **out);

/**
 * The round is over on this node: nf of its workers failed (status: the
 * root failure's), or none. Decide with the others whether the group
 * re-forms (ops->join), or leave the rendezvous and finish.
 * group_world_size: the round's nodes.
 */
void nodes_round_end(struct nodes *n, int nf, int status,
		     int group_world_size);

/** Close the rendezvous and the backend; n frees itself once closed. */
void nodes_close(struct nodes *n);

/** The rendezvous, once started (NULL before, or with n NULL). */
struct crun_rdzv *nodes_rdzv(const struct nodes *n);

/** The backend's key-value operations and their handle (NULL: none). */
const struct rdzv_kv_ops *nodes_kv(const struct nodes *n, void **kv);

/** The rendezvous store this agent serves to the others, or NULL. */
struct crun_store_server *nodes_store_server(const struct nodes *n);

/**
 * One more connection to the rendezvous store, as the rendezvous' own
 * (CRUN_EUSAGE with etcd: no store).
 */
int nodes_store_client(const struct nodes *n, struct crun_store_aclient **out);

/** A unique run id (torchrun's default "none" makes unrelated jobs collide). */
char *nodes_run_id(const char *host);

#endif

/*
 * Reading a job's state from its rendezvous keys (rdzv.h), as `crun status`
 * does: over the same key-value interface as the agents, like an agent
 * that never joins. Only reads: every key is peeked with a compare-and-set
 * that cannot match (an absent key is not created, a counter not bumped),
 * so any backend of rdzv_kv_ops serves it and the job never notices.
 *
 * Every record is untrusted (rdzv_records.h): a malformed one fails the
 * read with CRUN_EPROTO and a message naming the key.
 */
#ifndef CRUN_RDZV_STATUS_H
#define CRUN_RDZV_STATUS_H

#include <stdint.h>
#include <uv.h>

#include "crun/env.h"
#include "crun/rdzv_types.h"
#include "crun/rdzv_records.h"

struct crun_rdzv_status;

enum rdzv_status_state {
	RDZV_STATUS_FORMING, /* the round is being formed (or re-formed) */
	RDZV_STATUS_RUNNING, /* the round formed and has not ended */
	RDZV_STATUS_ENDED,   /* the job is over (finished, fatal, restarts
				exhausted) but its keys are still there */
};

/* One node of the current round. */
struct rdzv_status_node {
	int index;	/* arrival index in the round (1-based) */
	int group_rank; /* -1 while the round forms */
	struct rdzv_descr d;
	struct crun_ranks ranks; /* valid when group_rank >= 0 */
	int64_t hb;		 /* heartbeat counter, -1: none yet */
	/* Seconds since its heartbeat last moved, as this reader saw it
	 * move; < 0: it did not move within the sampling window. */
	double hb_age;
	int done; /* its workers finished and it left */
	/* --stall_timeout: ms since its ranks last progressed, as it last
	 * wrote ("r<R>/progress/<g>"); -1: not written (detector off). */
	int64_t progress_ms;
};

struct rdzv_status {
	char run_id[256];
	struct rdzv_config config;
	int round;
	enum rdzv_status_state state;
	int64_t restarts;
	int have_params; /* the "params" record was there */
	struct rdzv_params params;
	int joined; /* nodes that joined the current round */
	int nnodes; /* entries of nodes */
	struct rdzv_status_node *nodes;
	/* Running: the nodes that joined after the round closed and wait as
	 * spares (group_rank -1), in arrival order. */
	int nspares;
	struct rdzv_status_node *spares;
	char master_addr[256];
	int master_port; /* 0: not published */
	int end_kind;	 /* 0, or the kind of the round's end record */
	char end_why[512];
	int have_failure;
	struct rdzv_failure failure;
	/* Nodes left out after repeated failures (exclude_after), as the
	 * agents read "excluded": none when excluded_ignored says why not. */
	int nexcluded;
	struct rdzv_exclusion excluded[RDZV_MAX_EXCLUDED];
	char excluded_ignored[200];
	double hb_window; /* seconds the heartbeats were sampled */
};

/* The longest heartbeat sampling window, whatever hb_wait says (s). */
#define RDZV_STATUS_MAX_HB_WAIT 3600.0
/* The window when hb_wait < 0 is at most this (s). */
#define RDZV_STATUS_DEFAULT_HB_WAIT_MAX 10.0

struct rdzv_status_opts {
	const char *run_id; /* NULL: the job the endpoint serves */
	/* Refuse a config announcing more nodes (bounds every read). */
	int max_nodes;
	/*
	 * Sample the heartbeat counters this long at most (s) to see each
	 * move: < 0 means twice the agents' keep_alive interval (from the
	 * params record; 1 s without it; at most
	 * RDZV_STATUS_DEFAULT_HB_WAIT_MAX); 0 skips the sampling.
	 */
	double hb_wait;
};

/**
 * Called once: status 0 with st (valid until rdzv_status_free), or
 * CRUN_ENOTFOUND (no such job), CRUN_EPROTO (a malformed record) or the
 * backend's error, with errmsg a one-line reason.
 */
typedef void (*rdzv_status_cb)(struct crun_rdzv_status *s, int status,
			       const struct rdzv_status *st, const char *errmsg,
			       void *data);

/**
 * Start reading over kv (ops and kv stay the caller's and must outlive
 * the read). cb runs exactly once unless this returns an error. Close kv
 * before rdzv_status_free if the read may still be pending (its requests
 * then fail and are ignored).
 */
int rdzv_status_read(uv_loop_t *loop, const struct rdzv_kv_ops *ops, void *kv,
		     const struct rdzv_status_opts *o, rdzv_status_cb cb,
		     void *data, struct crun_rdzv_status **out);

/** Stop the sampling timer and free s once it is closed. */
void rdzv_status_free(struct crun_rdzv_status *s);

/** "forming", "running" or "ended". */
const char *rdzv_status_state_name(enum rdzv_status_state st);

#endif

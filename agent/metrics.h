/*
 * The agent's metrics server (--metrics_port): /healthz and /metrics over
 * HTTP, for Prometheus and for whatever watches the node. libmicrohttpd
 * answers on a thread of its own, from a snapshot that the loop publishes
 * under a mutex, so no scrape ever waits on the loop nor the loop on a
 * scrape. The text itself comes from pure functions (metrics_render,
 * metrics_health) over one snapshot. Private to agent/.
 */
#ifndef CRUN_METRICS_H
#define CRUN_METRICS_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "crun/rdzv_records.h"

#define METRICS_MAX_OPS 32

/* One store this agent hosts, as /metrics shows it. */
struct metrics_store {
	const char *name; /* "rendezvous" or "workers"; NULL: none */
	size_t conns, keys, memory, waiters;
	int nops;
	const char *op_names[METRICS_MAX_OPS]; /* static strings */
	uint64_t ops[METRICS_MAX_OPS];
};

/* Everything /metrics and /healthz say, copied whole between threads. */
struct metrics_snap {
	char host[256];
	char run_id[128];
	char backend[16];
	const char *state;  /* rendezvous, running, stopping, failed, done */
	const char *reason; /* why it is stopping, or "" */
	double started;	    /* epoch seconds the agent started */
	int formed;	    /* a round has formed (the rank fields hold) */
	int round, generation;
	int group_rank, group_world_size, world_size, base_rank;
	int local_world_size;
	int restarts_used, restarts_left, max_restarts;
	int running, succeeded, failed, stopped; /* workers by state */
	/* Kept by metrics.c itself (metrics_note_*). */
	uint64_t failures, node_losses; /* this node's failed workers */
	uint64_t stalls; /* rounds ended hung (--stall_timeout) */
	double last_failure; /* epoch seconds, 0: none yet (any node) */
	int last_exit_code;
	struct metrics_store stores[2];
	/* Nodes left out after repeated failures (exclude_after). */
	int nexcluded;
	struct rdzv_exclusion excluded[RDZV_MAX_EXCLUDED];
};

/** Whether state answers /healthz with 200 (rendezvous, running). */
int metrics_healthy(const char *state);

/**
 * The Prometheus text exposition (version 0.0.4) of s at wall time now, as
 * a malloc'd string the caller frees (*len its length), or NULL when out
 * of memory. Pure: no I/O, no clock.
 */
char *metrics_render(const struct metrics_snap *s, double now, size_t *len);

/** /healthz's one-line JSON body for s, malloc'd, or NULL. Pure. */
char *metrics_health(const struct metrics_snap *s, double now, size_t *len);

/** Fill ms from srv (NULL: leave ms empty, no store). On the loop. */
struct crun_store_server;
void metrics_store_fill(struct metrics_store *ms, const char *name,
			const struct crun_store_server *srv);

struct metrics;

/** Fill s's fields from the agent (all but the metrics_note_* ones). */
typedef void (*metrics_fill_cb)(void *data, struct metrics_snap *s);

struct metrics_opts {
	const char *addr; /* numeric IPv4 or IPv6 address to bind */
	int port;	  /* 0: a free one (metrics_port tells which) */
	int max_conns;	  /* connections served at once; more wait */
	int idle_timeout; /* seconds before an idle connection is closed */
	metrics_fill_cb fill;
	void *data;
};

/**
 * Listen on o->addr:o->port and serve from a thread of libmicrohttpd's. The
 * loop calls o->fill a few times a second (and at metrics_update) to
 * publish a fresh snapshot. 0 and *out set, or a negative error with a
 * one-line message in errmsg and nothing listening.
 */
int metrics_new(uv_loop_t *loop, const struct metrics_opts *o,
		struct metrics **out, char *errmsg, size_t errlen);

/** The port served (the kernel's choice when 0 was asked for). */
int metrics_port(const struct metrics *m);

/** Publish a snapshot now. A NULL m does nothing, as for every call below. */
void metrics_update(struct metrics *m);

/**
 * A worker failed with exit code code at wall time t: one of this node's
 * (local: counted in crun_worker_failures_total) or another node's (it
 * only becomes the last failure).
 */
void metrics_note_failure(struct metrics *m, int code, double t, int local);

/** Another node of the job was lost. */
void metrics_note_node_lost(struct metrics *m);

/** A round ended because no rank progressed (--stall_timeout). */
void metrics_note_stall(struct metrics *m);

/**
 * Stop serving (the thread is joined, every connection closed), then free m
 * once its timer handle has closed. m must not be used after this call.
 */
void metrics_close(struct metrics *m);

#endif

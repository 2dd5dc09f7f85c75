/*
 * A stuck process-group init, named (--init_warn_after): while the workers
 * initialise, say which ranks on which nodes have not connected to the
 * workers' store, and once all have. Private to agent/.
 */
#ifndef CRUN_INITDIAG_H
#define CRUN_INITDIAG_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "crun/rdzv.h"
#include "crun/store.h"

struct events;
struct initdiag;

/** What one round's diagnosis needs; copied by initdiag_start. */
struct initdiag_round {
	const char *host;	/* this node's name, for messages */
	const char *store_addr; /* MASTER_ADDR */
	int store_port;		/* MASTER_PORT */
	int group_rank, group_world_size;
	int base_rank, nproc, world_size;
	int restart_count; /* TORCHELASTIC_RESTART_COUNT */
	/* Each local rank's pid while it runs, 0 once it exited: read until
	 * initdiag_stop. */
	const pid_t *pids;
	/* Several nodes: the rendezvous store and this round's key prefix
	 * ("crun/<run_id>/r<R>/"); ops NULL alone. */
	const struct rdzv_kv_ops *ops;
	void *kv;
	const char *prefix;
	int read_ms; /* how long a read of a record may wait for it */
	/* The workers' store when this agent hosts it (for the barrier
	 * count), or NULL. */
	struct crun_store_server *wstore;
	/* The nodes' addresses by group rank, blank-separated (rdzv_peers),
	 * or NULL: with wstore, the store's own view of who connected. */
	const char *peers;
};

/**
 * A diagnosis that warns after warn_after seconds (0: never; then every
 * call below does nothing). Lines go through log_say, events to ev (may be
 * NULL). Free with initdiag_close, then initdiag_free once the loop ran dry.
 */
int initdiag_new(uv_loop_t *loop, double warn_after,
		 struct events *ev, struct initdiag **out);

/** The workers of round r started: watch them until initdiag_stop. */
void initdiag_start(struct initdiag *d, const struct initdiag_round *r);

/** The round ends: stop watching (pending replies are ignored). */
void initdiag_stop(struct initdiag *d);

/** Close the timer; initdiag_free after the loop has run dry. */
void initdiag_close(struct initdiag *d);
void initdiag_free(struct initdiag *d);

/* ---- pure parts, exposed for unit tests -------------------------------- */

/**
 * Ranks base + i for every i < n with flags[i] == want, as "0,2-5,9"; at
 * most len - 1 bytes ("..." when cut). Returns how many ranks matched.
 */
int initdiag_ranges(const unsigned char *flags, int n, int base, int want,
		    char *buf, size_t len);

/** A node's record (rdzv_records.h's rdzv_parse_diag) into buf. */
int initdiag_format_record(char *buf, size_t len, int group_rank,
			   int base_rank, int nproc,
			   const unsigned char *connected,
			   const unsigned char *trying, const char *host);

/**
 * The warning line for nmissing ranks (their list in ranks) on host, which
 * cannot reach addr:port after secs seconds; trying: their SYNs go
 * unanswered.
 */
void initdiag_format_missing(char *buf, size_t len, const char *ranks,
			     int nmissing, const char *host, const char *addr,
			     int port, double secs, int trying);

#endif

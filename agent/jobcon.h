/*
 * The job console's link (--console=collapse,job), a part of the console:
 * every agent's collapsed lines reach one console, the one of the agent
 * that hosts the rendezvous store, over that store's own connections (its
 * limits, the rendezvous secret): a sender APPENDs batches of records to
 * its key under JOBCON_PREFIX, and the host's store hands them to the link
 * (store.h's sink) instead of storing them. Each batch is acknowledged (a
 * CHECK answered after it): what a sender could not get acknowledged, or
 * had no room for, it shows on its own console, so a line may be shown
 * twice, never lost, and no worker ever waits for the host.
 *
 * A record is a header line and bytes:
 *   L <fd> <age_ms> <ranks> <plen> <taglen> <len>\n<prefix><line>
 *       a line shown for the job's ranks (ranges.h; "-": no known rank)
 *       with the sender's own prefix (plen bytes, torch's tag in its
 *       last taglen), age_ms after the first of its lines came
 *   D <fd> <ranks>\n
 *       those ranks print no more on fd
 * Private to agent/.
 */
#ifndef CRUN_AGENT_JOBCON_H
#define CRUN_AGENT_JOBCON_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "crun/store.h"

#define JOBCON_PREFIX "crun/console/"
/* The key the host sets: senders wait for it, and CHECK it as their ack. */
#define JOBCON_READY JOBCON_PREFIX "ready"
/* Longest record header (a long rank list still fits). */
#define JOBCON_MAX_HEADER 8192
/* Longest prefix a record may carry (the console's are shorter). */
#define JOBCON_MAX_PREFIX 1024

/* One record, as jobcon_next reads it (pointers into the batch). */
struct jobcon_rec {
	char kind; /* 'L' or 'D' */
	int fd;
	uint64_t age_ms;
	const int *ranks; /* ascending job ranks */
	int n;
	const char *prefix;
	size_t plen, taglen;
	const char *line; /* len bytes */
	size_t len;
};

/**
 * (jobrec.c) The record at *off of the batch p[0..len), with ranks below max_rank
 * (at most cap of them, into ranks; ranks NULL: not read, n 0): 1 and *off
 * past it, 0 at the end, or -1 with a lower-case reason in why (the rest of
 * the batch is not read).
 */
int jobcon_next(const char *p, size_t len, size_t *off, int max_rank,
		int *ranks, int cap, struct jobcon_rec *r, char *why,
		size_t wlen);

/* The host's end: what the sink hands over (embedded in its owner). */
struct jobcon_sink {
	/* A batch from node (its group rank) in round. */
	void (*batch)(void *data, int round, int node, const char *p,
		      size_t len);
	void *data;
	unsigned long bad; /* batches under a key of no node */
};

/**
 * Host: set JOBCON_READY in srv and hand the batches that reach its sink to
 * s from now on (s must outlive srv).
 */
int jobcon_host(struct crun_store_server *srv, struct jobcon_sink *s);

struct jobcon;

/** What a sender's link reports to the console. */
struct jobcon_opts {
	uv_loop_t *loop;
	struct crun_store_aclient *client; /* owned by the link from now on */
	size_t cap;   /* bytes of records waiting or unacknowledged */
	int ready_ms; /* how long to wait for the host's console */
	/* Records the host did not take (whole records): show them here. */
	void (*local)(void *data, const char *p, size_t len);
	void *data;
};

/**
 * Sender: a link over o->client, a client of the rendezvous store that the
 * link closes. Records wait until the host's console is ready. NULL
 * without memory (the client is closed).
 */
struct jobcon *jobcon_new(const struct jobcon_opts *o);

/**
 * This node is node (group rank) of round from now on: records put after
 * this go under its key. A link that had no room takes records again.
 */
void jobcon_round(struct jobcon *j, int round, int node);

/**
 * Queue a record for the host: a line (ranks ascending, each plus base;
 * n 0: no known rank), or with line NULL the end of ranks' output on fd.
 * 0, or -1 when the link is down or has no room: the caller shows it
 * itself (and the rest of the round, so that each rank's lines stay in one
 * place).
 */
int jobcon_put(struct jobcon *j, int fd, uint64_t age_ms, const int *ranks,
	       int n, int base, const char *prefix, size_t plen,
	       size_t taglen, const char *line, size_t len);

/**
 * cb(data) once every record put so far is acknowledged (or given back, or
 * after a moment): the round's lines are on the host's console before its
 * end is told. Not called once jobcon_close is.
 */
void jobcon_drain(struct jobcon *j, void (*cb)(void *data), void *data);

/**
 * Send what waits (once the host is ready), close the client once it is acknowledged (or after a
 * moment: what is unacknowledged then goes to o->local), then free j. j
 * must not be used after.
 */
void jobcon_close(struct jobcon *j);

#endif

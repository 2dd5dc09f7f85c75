/*
 * How a rendezvous round ended, as rdzv.h's end callback gets it: the kind
 * and the numbers the agent acts on (exit status, signal, host), never a
 * sentence for it to parse back. The reason text travels in the end record
 * (rdzv_records.h's rdzv_parse_end); rdzv_end_describe (src/rdzv/rdzv_kit.c,
 * beside the code that reports every end) reads the numbers out of it once,
 * for every receiver.
 */
#ifndef CRUN_RDZV_END_H
#define CRUN_RDZV_END_H

/* Longest host name an end names (rdzv_records.h's RDZV_MAX_FIELD). */
#define RDZV_END_HOST_MAX 255

struct rdzv_end {
	int kind;   /* enum rdzv_end_kind (rdzv.h) */
	int status; /* RDZV_END_FAILURE: the failed worker's exit status, or 0
		     */
	int signal; /* the signal that stopped the node that ended it, or 0 */
	char host[RDZV_END_HOST_MAX +
		  1];	    /* the node that ended it, "" unknown */
	const char *why;    /* the reason as recorded, for logs */
	const char *detail; /* for display: why without its leading status */
};

/**
 * Fill e from an end's kind and reason, as rdzv_end_round's callers write
 * them: "<status> rank R (local rank L) on HOST exited with S" (failure),
 * "HOST left (SIGNAME)" (a node stopped by a signal), "the store host HOST
 * was stopped (SIGNAME)", a joining node's "HOST". why must outlive e.
 */
void rdzv_end_describe(int kind, const char *why, struct rdzv_end *e);

#endif

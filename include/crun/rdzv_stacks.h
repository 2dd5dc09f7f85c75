/*
 * Stacks of a live job on demand (`crun status --stacks`), over the
 * rendezvous keys (rdzv.h) of the job, so any backend carries it:
 *
 *   stacks_req           "<nonce> <round>": a request, the nonce random
 *                        (1..RDZV_STACKS_MAX_NONCE lower-case hex digits)
 *   stacks/<nonce>/<g>   group rank g's answer (rdzv_stacks_answer_parse)
 *
 * (both under "crun/<run_id>/"). Every agent of round <round> peeks
 * stacks_req with each heartbeat (pipelined behind it: no round trip of its
 * own) and acts once per nonce: it takes its ranks' stacks without stopping
 * them (py-spy) and writes its answer. A request for another round is left
 * alone, so the nodes of a later round never answer an old one. The reader
 * waits for the round's nodes' answers, bounded, and names those that did
 * not answer. Every value is untrusted: a request that does not parse is
 * ignored, an answer that does not parse is a one-line error.
 */
#ifndef CRUN_RDZV_STACKS_H
#define CRUN_RDZV_STACKS_H

#include <stddef.h>
#include <uv.h>

#include "crun/rdzv_types.h"

#define RDZV_STACKS_MAX_NONCE 32
/* One node's answer, all its ranks together, is cut to this. */
#define RDZV_STACKS_MAX_ANSWER (256 * 1024)
/* One rank's dump in an answer is cut to this (less with many ranks). */
#define RDZV_STACKS_MAX_DUMP (32 * 1024)
/* Ranks in one answer. */
#define RDZV_STACKS_MAX_RANKS 4096

/** Parse "<nonce> <round>"; 0, or -1 for anything else. */
int rdzv_stacks_req_parse(const char *v, size_t n, char *nonce, size_t nlen,
			  int *round);

/* One rank of an answer (pointers into the parsed value). */
struct rdzv_stacks_rank {
	int rank;
	int taken;	   /* dump is a stack; else a one-line why */
	const char *where; /* pystack_where's label, where_len bytes */
	size_t where_len;
	const char *dump;
	size_t dump_len;
};

/*
 * An answer being built: "crun-stacks 1\n", then for every rank
 * "rank <rank> <taken> <dump bytes> <where>\n<dump>\n".
 */
struct rdzv_stacks_answer {
	char *buf;
	size_t len, cap;
	int nranks;
};

/** Start an empty answer; 0 or UV_ENOMEM. */
int rdzv_stacks_answer_init(struct rdzv_stacks_answer *a);
/**
 * Add a rank: where (one printable line: anything else becomes '?') and its
 * dump, cut at a line's end to dump_cap bytes (and to what is left of the
 * answer's RDZV_STACKS_MAX_ANSWER) with a line saying how much was cut.
 * Returns 0, CRUN_ETOOBIG when not even the rank's header fits any more
 * (nothing added), or UV_ENOMEM.
 */
int rdzv_stacks_answer_add(struct rdzv_stacks_answer *a, int rank, int taken,
			   const char *where, const char *dump, size_t len,
			   size_t dump_cap);
void rdzv_stacks_answer_release(struct rdzv_stacks_answer *a);

/**
 * Parse an answer of n bytes into at most max ranks (r points into v).
 * Returns the number of ranks, or -1 with why (one line) for a value that
 * is not an answer.
 */
int rdzv_stacks_answer_parse(const char *v, size_t n,
			     struct rdzv_stacks_rank *r, int max, char *why,
			     size_t whylen);

/** A new random nonce (hex) into buf (at least 17 bytes). */
void rdzv_stacks_nonce(char *buf, size_t len);

/**
 * Agent side: write this node's answer to the request nonce (under the
 * rendezvous's job prefix, as group rank of the current round). Returns 0
 * or an error (no round running, a nonce that is not one).
 */
int rdzv_stacks_put(struct crun_rdzv *r, const char *nonce, const char *v,
		    size_t n);

#endif

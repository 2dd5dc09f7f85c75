/*
 * Dynamic rendezvous (torchrun's c10d algorithm, redone to be O(N) and
 * clock-free), written against a small key-value interface so that any
 * backend with these operations can carry it: the crun store
 * (rdzv_kv_store) and etcd v3 (rdzv_etcd.h).
 *
 * A round R lives under "crun/<run_id>/r<R>/":
 *   join        counter: a node's ADD gives its arrival index i (1-based)
 *   node/<i>    that node's descriptor (host, address, nproc, role, pid...
 *               and its fingerprint, fingerprint.h, for --env_check)
 *   closed      absent while open, then the number of participants N
 *   assign/<i>  group rank and rank arithmetic of node i, written by the
 *               node that closed the round, in one MULTI_SET
 *   assigned    set once the assignment is written ("ok N" or "abort ...")
 *   master      "addr port" of the workers' store, set by group rank 0
 *   hb/<g>      heartbeat counter of group rank g
 *   end         why the round ended: "F <code> <rank> <host>" a worker
 *               failed, "J <host>" a node waits to join, "D <host>" a node
 *               died, "S" a node succeeded and left, "X <why>" fatal,
 *               "H <why>" the job hung (no rank progressed: --stall_timeout)
 *   end/<g>     set for every participant once "end" is written: what
 *               node g watches, so the store host learns at once when g's
 *               watching connection vanishes (an agent that died)
 *   host/<g>    the host name of group rank g, for messages
 *   addrs       the nodes' addresses by group rank, blank-separated, each
 *               node's "addr,ip,..." literals (its address when that is
 *               one, then the ip= list of its descriptor; its address alone
 *               when it announced none): the workers' store accepts only
 *               them and loopback
 *   envcheck    how the nodes' fingerprints differ, one line per item, or
 *               "-": written with the assignments, printed by every node
 *   done/<g>    node g finished and left: its silence is not a death
 *   finished    counter of nodes whose workers all succeeded
 *   quiet       --stall_timeout: counter of nodes none of whose ranks
 *               progressed for the timeout (the agent's stall.c ADDs +1
 *               and -1); the ADD that reads the node count ends the round
 *   progress/<g>  milliseconds since node g's ranks last progressed
 *   stall/<g>   after an "H" end: where node g's ranks were, one
 *               "<rank> <host> <where>" line each, for the store host's
 *               summary
 * plus "crun/<run_id>/round" (the current round), ".../config" (nnodes and
 * backend, which every node must agree on), ".../restarts" (job-wide count
 * of failure restarts), ".../params" ("max_restarts=N keep_alive_ms=N",
 * set by each agent as it first joins), ".../failure" (the last worker
 * failure: "<round> <unix_ms> <why of its F end>") and "crun/job" (the run
 * id of the endpoint's job: a c10d store host writes its own before it
 * serves anyone, so that the job of the node that hosts the endpoint is the
 * endpoint's). `crun status` reads them (rdzv_status.h).
 * `crun status --stacks` writes ".../stacks_req", which every running node
 * peeks with its heartbeats, and reads the nodes' ".../stacks/<nonce>/<g>"
 * (rdzv_stacks.h).
 *
 * Leaving out a failing node (exclude_after K > 0; rdzv_records.h parses;
 * each <addr> below is "<addr>#<id>", the id this agent drew at start):
 *   r<R>/failed  "<group rank> <host> <addr>" of the node whose failure
 *                ended round R: the node whose "F" end was recorded first
 *                writes it (the end record's text names the host as well)
 *   fails        the history: "<n>" then n times "<round> <host> <addr>",
 *                the failure-ended rounds since the last exclusion, the
 *                latest K kept; updated by the node that ended each one
 *   excluded     "<n>" then n times "<host> <addr> <until> <round> <K>":
 *                nodes left out of the rounds until the epoch second until
 *                (the excluded node's clock), since round R
 *   over         "<kind> <why>" once the job ended ("S" all nodes finished,
 *                else why it stopped), with a copy in over/<host>/<addr>/<R>
 *                for each node left out: what that node waits on, so the
 *                store host sees it vanish (on_vanish) if it goes away
 *   over_seen/<host>/<addr>/<R>  "1" once that node read how the job
 *                ended ("gone": it vanished); the c10d store host waits
 *                (up to close_timeout) for these before it stops serving
 * When the last K failure-ended rounds (other ends neither count nor break
 * the run) all failed first on one node, and the round's other nodes still
 * meet MIN, that node is left out: the next round expects one node fewer,
 * the history starts afresh, and the node sits out as a spare for
 * exclude_for seconds, then takes itself off "excluded" and joins again
 * (a running round with room re-forms to admit it, as for a late node).
 * Below MIN it is not left out (one line says so). The config record gets
 * " exclude=K:S" so that every node agrees on the setting.
 *
 * Joining: ADD join with one peek at closed, expect and end pipelined
 * behind it, then SET node/i (a node that read round R's end joins R+1
 * without reading "round": the ender advanced it first); a participant
 * watches "assigned", reading its assign/i and envcheck with it.
 * Participant i >= MIN arms the last-call timer (at once when i reaches MAX
 * or the count the round expects); when it fires it tries to close:
 * compare-and-set closed absent -> N. The winner reads the N descriptors
 * (one MULTI_GET), orders them (the store host's node first, then by host,
 * address and pid; the static backend by --node_rank), computes prefix sums
 * and writes every node's assignment (one MULTI_SET). Each node then reads only
 * its own key: O(N) operations per round in total, no whole-state
 * compare-and-set loop.
 *
 * Running: every node bumps its heartbeat counter each keep_alive_interval
 * (longer past heartbeat_rate: see rdzv_opts) and reads its successor's; a
 * counter that stops for keep_alive_max_attempt intervals ends the round ("D").
 * A heartbeat whose reply does not come in that time means this node lost the
 * store host. Every node waits on its end/<g> on a second channel, so a failure
 * anywhere stops every node at once, and a node whose agent dies is noticed by
 * the store host as soon as that wait's connection closes
 * (rdzv_kv_ops.on_vanish).
 */
#ifndef CRUN_RDZV_H
#define CRUN_RDZV_H

#include "crun/rdzv_types.h"

/**
 * Create a rendezvous over kv (ops and impl stay owned by the caller and must
 * outlive r). on_end is called for every end of a round this node takes part
 * in, by anyone, for any reason, including this node's own rdzv_end_round.
 */
int rdzv_new(uv_loop_t *loop, const struct rdzv_opts *o,
	     const struct rdzv_kv_ops *ops, void *kv, rdzv_end_cb on_end,
	     struct crun_rdzv **out);

/**
 * Join the next round. cb runs exactly once: status 0 with the result, or
 * CRUN_ERDZV_TIMEOUT (join_timeout passed; errmsg says who was missing),
 * CRUN_ERDZV_CLOSED (the job ended, e.g. restarts exhausted elsewhere),
 * CRUN_ERDZV_LEFT_OUT (this node was left out, or waited as a spare, and
 * the job succeeded without it),
 * CRUN_ERDZV_MISMATCH (another job on this endpoint), or a store error.
 */
int rdzv_next(struct crun_rdzv *r, rdzv_round_cb cb, void *data);

/**
 * End the current round for everyone: kind and why as in the "end" key.
 * For RDZV_END_FAILURE the job-wide restart count goes up by one (only for
 * the node whose end was recorded first). Returns 0 or an error.
 */
int rdzv_end_round(struct crun_rdzv *r, int kind, const char *why);

/**
 * Whether the job may restart after the current round ended with
 * kind: restarts left (job-wide) for failures, no node finished, etc.
 * Sets *ok after reading the job-wide counters; cb runs once.
 */
int rdzv_may_restart(struct crun_rdzv *r, int kind,
		     void (*cb)(struct crun_rdzv *r, int ok, void *data),
		     void *data);

/**
 * This node leaves the job (it was signalled, after ending the round with
 * RDZV_END_DEAD): unlike rdzv_finish it does not count as a node that
 * finished, so the others may re-form without it. cb runs once, after the
 * store has taken every earlier request of ours (including the next round's
 * restart count, when our end was the one recorded), or after close_timeout
 * without its answer (said in one line).
 */
int rdzv_depart(struct crun_rdzv *r,
		void (*cb)(struct crun_rdzv *r, void *data), void *data);

/**
 * This node's workers all succeeded: record it. A node that serves a store
 * the others use (rdzv_serving) then waits until the round ended (every node
 * finished, or the others re-form or stop) and, up to close_timeout more,
 * until every node has left, so nobody loses a store early; cb runs once
 * after that. Any other node waits up to close_timeout for the store to take
 * note.
 */
int rdzv_finish(struct crun_rdzv *r,
		void (*cb)(struct crun_rdzv *r, void *data), void *data);

/**
 * Whether this node serves a store the round's other nodes use: the
 * rendezvous store (rdzv_opts.is_store_host), or, as group rank 0 of a round
 * of several nodes whose workers' store no worker hosts, the workers' store.
 */
int rdzv_serving(const struct crun_rdzv *r);

/**
 * This node lost its connection to node g of the running round (a relay's
 * to the workers' store on group rank 0): unless g finished, the round ends
 * as g's loss (RDZV_END_DEAD, its host named, followed by how: a string
 * that outlives the request), as when g stops answering its heartbeat; the
 * others re-form without it while the minimum holds.
 */
void rdzv_node_lost(struct crun_rdzv *r, int g, const char *how);

/** Job-wide failure restarts so far (as read by rdzv_may_restart). */
int rdzv_restarts(const struct crun_rdzv *r);

/** The rendezvous round this node is in or last took part in. */
int rdzv_round(const struct crun_rdzv *r);

/**
 * The addresses of the current round's nodes as their descriptors give
 * them, blank-separated, by group rank (for the workers' store's allow
 * list); read by group rank 0 only (the node that starts that store), NULL
 * on the others and before the first round. Valid until the next round.
 */
const char *rdzv_peers(const struct crun_rdzv *r);

/**
 * For a node that waited as a spare and then failed its round with
 * CRUN_ERDZV_CLOSED: the job's exit status, as the end it last read recorded
 * it (a failed worker's status, 128 + the signal of a node stopped by one,
 * else 1); 0 if it read none.
 */
int rdzv_job_status(const struct crun_rdzv *r);

/** The last error message (for the agent's one-line report). */
const char *rdzv_errmsg(const struct crun_rdzv *r);

/**
 * The nodes left out of the rounds, as this node last read or wrote
 * "excluded" (at every join, and when it leaves one out): copies up to max
 * entries into x and returns how many there are (0 when the option is off).
 */
int rdzv_excluded(const struct crun_rdzv *r, struct rdzv_exclusion *x, int max);

/** Stop timers and free r (pending callbacks are dropped). */
void rdzv_free(struct crun_rdzv *r);

/**
 * This node's fingerprint (fingerprint.h's wire field, copied): its
 * descriptor is written now if it was waiting for it, and carries it in
 * every later round.
 */
void rdzv_set_fingerprint(struct crun_rdzv *r, const char *fp);

/** Whether the last round failed because env_check=strict refused it. */
int rdzv_env_refused(const struct crun_rdzv *r);

#endif

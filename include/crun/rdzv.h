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

/* The key naming the endpoint's job (its run id). */
#define RDZV_JOB_KEY "crun/job"
/*
 * The longest run id (--rdzv_id), in bytes. The job's keys are named after
 * it ("crun/<run_id>/...", etcd's "<etcd_prefix>/<run_id>/...") in buffers
 * that hold it whole: crun and `crun status` refuse a longer one rather
 * than cut it, as two jobs whose ids were cut alike would share keys.
 */
#define RDZV_ID_MAX 200

#include <stdint.h>
#include <uv.h>

#include "crun/env.h"
#include "crun/rdzv_end.h"
#include "crun/rdzv_records.h"
#include "crun/store.h"

struct crun_rdzv;

/* ---- the key-value interface the algorithm needs ----------------------- */

/** Reply callback: status 0 and r filled (r as in store.h), or an error. */
typedef void (*rdzv_kv_cb)(int status, const struct crun_store_reply *r,
			   void *arg);

/** A reply's number: an ADD's count (the store's), or the value as a
 * decimal (etcd's). */
int64_t rdzv_reply_int(const struct crun_store_reply *rep);

struct rdzv_kv_ops {
	int (*add)(void *kv, const char *key, int64_t delta, rdzv_kv_cb cb,
		   void *arg);
	int (*set)(void *kv, const char *key, const void *v, size_t n,
		   rdzv_kv_cb cb, void *arg);
	int (*compare_set)(void *kv, const char *key, const void *exp,
			   size_t elen, const void *des, size_t dlen,
			   rdzv_kv_cb cb, void *arg);
	/* Wait (up to timeout_ms; -1 forever) for every key, then read them. */
	int (*multi_get)(void *kv, const char *const *keys, size_t n,
			 int timeout_ms, rdzv_kv_cb cb, void *arg);
	/*
	 * Read keys as they are now, without waiting: a missing key reads as
	 * empty (no rendezvous record is ever empty).
	 */
	int (*peek)(void *kv, const char *const *keys, size_t n, rdzv_kv_cb cb,
		    void *arg);
	int (*multi_set)(void *kv, const char *const *keys,
			 const void *const *vals, const size_t *lens, size_t n,
			 rdzv_kv_cb cb, void *arg);
	/*
	 * Wait for keys[0] to exist and read it, with keys[1..n-1] as they are
	 * then (a missing one empty), on a channel of its own so the calls
	 * above keep flowing meanwhile. The reply has value (keys[0]'s) and,
	 * when n > 1, values (all n). One watch at a time.
	 */
	int (*watch)(void *kv, const char *const *keys, size_t n,
		     int timeout_ms, rdzv_kv_cb cb, void *arg);
	/*
	 * Optional (may be NULL): have cb(arg, key, klen) called when a client
	 * vanishes while it watches key, where the backend can tell (the
	 * store host can). cb NULL unregisters.
	 */
	void (*on_vanish)(void *kv,
			  void (*cb)(void *arg, const char *key, size_t klen),
			  void *arg);
};

/* ---- the rendezvous ----------------------------------------------------- */

struct rdzv_opts {
	const char *run_id; /* NULL: adopt the endpoint's job id */
	int min_nodes, max_nodes;
	int static_rank; /* >= 0: static backend with this node rank */
	int max_restarts;
	const char *host; /* this node's name (hostname or --local_addr) */
	const char *addr; /* this node's address for MASTER_ADDR */
	/*
	 * This node's interface addresses, literals separated by commas
	 * (peers_own_addrs), or NULL: announced in the descriptor for the
	 * workers' store's allow list, which resolves no host name.
	 */
	const char *ips;
	/*
	 * This agent's id in the exclusion records (1..RDZV_MAX_ID lower-case
	 * hex digits), or NULL: drawn at random (tests fix it).
	 */
	const char *node_id;
	int is_store_host; /* this node hosts the store: group rank 0 */
	int nproc;
	const char *role;
	double join_timeout, last_call_timeout, close_timeout;
	/*
	 * Nodes the job's first round waits for (0: none), up to
	 * join_timeout rather than last_call_timeout: an allocation's (a
	 * SLURM step's nodes), so that late nodes of a loaded cluster do not
	 * start a job one node short. expect_why says where the count comes
	 * from, for the log.
	 */
	int expect_first;
	const char *expect_why;
	double keep_alive_interval;
	int keep_alive_max_attempt;
	/* A heartbeat unanswered this long: the store is lost (0: interval
	 * x max_attempt). */
	double heartbeat_timeout;
	/*
	 * Heartbeats per second the store host takes from all nodes together
	 * (0: no bound): past keep_alive_interval x rate nodes the interval
	 * grows to nodes / rate. A node that dies still shows at once (its
	 * watch connection closes: on_vanish); only a hung one takes
	 * keep_alive_max_attempt of the longer intervals.
	 */
	double heartbeat_rate;
	/*
	 * Called on the node that becomes group rank 0 of a round, to start
	 * the workers' store for that round; returns 0 and its port.
	 */
	int (*start_master)(void *data, int round, int *port, int *by_worker);
	void *data;
	/*
	 * --env_check (fingerprint.h's CRUN_ENV_CHECK_*): when not off, this
	 * node's descriptor waits (at most fingerprint_wait seconds from
	 * rdzv_new) for rdzv_set_fingerprint, and when this node closes a
	 * round it compares the nodes' fingerprints: warn writes the
	 * differences for every node to print, strict refuses the round.
	 */
	int env_check;
	double fingerprint_wait;
	/* Leaving out a failing node: 0 (off) or K, and the cooldown. */
	int exclude_after;
	double exclude_for;
	/*
	 * Optional: told when a node is left out (readmitted 0) or comes
	 * back (1); self when it is this node. why is one lower-case line.
	 */
	void (*on_exclusion)(void *data, const struct rdzv_exclusion *x,
			     int readmitted, int self, const char *why);
	/*
	 * Optional: a `crun status --stacks` request (rdzv_stacks.h) for the
	 * running round, once per nonce; answer with rdzv_stacks_put.
	 */
	void (*on_stacks)(void *data, const char *nonce);
};

/* What a round gives this node. */
struct rdzv_result {
	int round; /* job-wide generation: TORCHELASTIC_RESTART_COUNT */
	struct crun_ranks ranks;
	char master_addr[256];
	int master_port;
	int master_by_worker; /* worker rank 0 hosts the workers' store */
	char run_id[256];
	/* Lines (each ended by '\n') on how the nodes differ, "" if none;
	 * valid until the next round. */
	const char *env_diff;
};

/* Why a running round ended (argument of rdzv_end_cb). */
enum rdzv_end_kind {
	RDZV_END_FAILURE = 'F', /* a worker failed somewhere: costs a restart */
	RDZV_END_JOIN = 'J',	/* a node waits to join: free restart */
	RDZV_END_DEAD = 'D',	/* a node died or stopped answering */
	RDZV_END_SUCCESS = 'S', /* a node finished: no restart possible */
	RDZV_END_FATAL = 'X',	/* the job cannot go on */
	RDZV_END_LOST = 'L',	/* this node lost the store host */
	RDZV_END_STALL = 'H',	/* no rank progressed (--stall_timeout):
				   costs a restart, as a failure does */
};

/**
 * Called when the current round ends while this node runs workers; e (see
 * rdzv_end.h) is valid during the call only.
 */
typedef void (*rdzv_end_cb)(struct crun_rdzv *r, const struct rdzv_end *e,
			    void *data);
/** Called once a round is formed (status 0) or cannot be (status < 0). */
typedef void (*rdzv_round_cb)(struct crun_rdzv *r, int status,
			      const struct rdzv_result *res, void *data);

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

/*
 * The rendezvous' types (rdzv.h is its interface and says how it works):
 * the key-value interface the algorithm runs on, its options, what a round
 * gives a node and why a round ends. Its own parts (src/rdzv/) and the
 * backends and tools below it use these without the interface above them.
 */
#ifndef CRUN_RDZV_TYPES_H
#define CRUN_RDZV_TYPES_H

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

#include "crun/ranks.h"
#include "crun/rdzv_end.h"
#include "crun/store.h"

struct crun_rdzv;
struct rdzv_exclusion; /* rdzv_records.h */

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

#endif

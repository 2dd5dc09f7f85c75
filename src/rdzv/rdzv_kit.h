/*
 * What the files of the rendezvous share (libuv's internal.h, kept with the
 * kit at the bottom): the state of one rendezvous, the request in flight,
 * and the rdzv__ functions each file offers the ones above it. Nothing
 * outside src/rdzv/ includes it; the public API is include/crun/rdzv.h,
 * whose every call enters rdzv.c.
 *
 * The files, from the top: rdzv.c (the owner: the life cycle, create and
 * free, and the interface, handed to the step it starts), rdzv_join.c
 * (agreeing on the job, joining a round, waiting for the assignment),
 * rdzv_close.c (the node that closes a round reads every descriptor and
 * writes every assignment), rdzv_run.c (heartbeats, nodes that vanish),
 * rdzv_stacks_run.c (answering `crun status --stacks`), rdzv_end.c (the
 * watch on the round's end, ending a round, deciding on a restart,
 * finishing and leaving), rdzv_exclude.c (leaving out a node whose
 * failures keep ending rounds) and rdzv_kit.c (keys, requests and replies,
 * failing or ending a round). Each calls only the files after it; what
 * comes next after a lower file's step is decided above it, through the
 * callbacks in struct crun_rdzv.
 */
#ifndef CRUN_RDZV_KIT_H
#define CRUN_RDZV_KIT_H

#include <stddef.h>
#include <stdint.h>

#include "crun/fingerprint.h"
#include "crun/rdzv_types.h"
#include "crun/rdzv_records.h"
#include "crun/rdzv_stacks.h"

/* An expected value no real key holds: CAS with it reads without writing. */
#define PEEK "\001crun-peek"
#define KEYMAX 512

/*
 * Where the rendezvous is: idle between rounds, joining one, waiting as a
 * spare (or left out), running one, ended (the round, or our finishing),
 * finishing (leaving after success, or departing), or freed.
 */
enum rstate {
	R_IDLE,
	R_JOINING,
	R_WAITING,
	R_RUNNING,
	R_ENDED,
	R_FINISHING,
	R_DONE
};

/*
 * Our last read of the successor's heartbeat counter: answered, asked, or
 * asked and past the bound, to be judged once more after the loop has read
 * its sockets (the reply may be waiting there unread).
 */
enum hb_wait { HB_ANSWERED, HB_ASKED, HB_RECHECK };

struct crun_rdzv {
	uv_loop_t *loop;
	struct rdzv_opts o;
	const struct rdzv_kv_ops *ops;
	void *kv;
	rdzv_end_cb on_end;
	char run_id[256];
	char prefix[300]; /* "crun/<run_id>/", once the job id is agreed */
	char config[200];
	char errmsg[768];
	enum rstate state;
	/* The round (rdzv.c, rdzv_join.c, rdzv_close.c). */
	int round;  /* current round number */
	int index;  /* arrival index in the round */
	int closed; /* participants, once known */
	int expect; /* participants the round expects (0: unknown) */
	int alloc_wait; /* the first round waits for o.expect_first */
	int grank, gworld;
	int deadline_phase; /* 1: join_timeout passed, the store was asked */
	int aborted;	    /* the last round seen aborted while forming */
	int ended;	    /* the round whose recorded end we read, or -1 */
	int nexts;	  /* rdzv_next calls: replies of an earlier one drop */
	int ahead;	  /* the first round's config and number were sent */
	int agreed;	  /* the job and its config are agreed */
	int64_t restarts; /* job-wide failure restarts, last read */
	int env_refused;  /* the round failed for env_check=strict */
	char env_diff[RDZV_MAX_ENVCHECK + 1];
	char *peers; /* the round's node addresses ("r<R>/addrs"), or NULL */
	rdzv_round_cb cb;
	void *cb_data;
	struct rdzv_result res;
	uv_timer_t last_call;
	uv_timer_t deadline;
	int timers; /* initialised timer handles */
	/* This node's descriptor, which may wait for the fingerprint. */
	struct {
		char text[RDZV_MAX_RECORD + 1];
		char fp[FP_MAX_TEXT + 1]; /* the fingerprint field, or "" */
		int fp_wait;		  /* the fingerprint is not ready yet */
		uv_timer_t fp_timer;	  /* the bound on waiting for it */
		int held_round;	 /* round whose descriptor waits, or -1 */
		int held_index;	 /* and its arrival index there */
		int close_after; /* rdzv__try_close waits for that descriptor */
	} descr;
	/* Heartbeats of the running round (rdzv_run.c). */
	struct {
		uv_timer_t timer;
		uint64_t ms;	   /* the interval of this round */
		int succ;	   /* group rank whose heartbeat we watch */
		int64_t succ_last; /* its counter, last read (-1: none yet) */
		int succ_stall;	   /* reads in a row that found it unchanged */
		enum hb_wait wait; /* our read of its counter */
		uint64_t last_reply; /* loop time of the last reply */
		uint64_t tick;	     /* loop time of the last tick */
		uint64_t silence; /* unanswered, our own stalls not counted */
	} hb;
	/* Ending the round and leaving (rdzv_end.c). */
	struct {
		int seen;      /* the round's "end" was read */
		int unwatched; /* rdzv_may_restart took the watch on end/<g> */
		int marked; /* we counted every node finished and marked it */
		int chain;  /* our end's record and restarts still to send */
		int depart_wait; /* rdzv_depart waits for them */
		void (*finish_cb)(struct crun_rdzv *, void *);
		void *finish_data;
		/* The round ended while finishing (rdzv__round_ended). */
		void (*finishing_ended)(struct crun_rdzv *, int kind);
	} end;
	/* Leaving out a failing node (exclude_after > 0, rdzv_exclude.c). */
	struct {
		/* "excluded", as last read: n entries */
		struct rdzv_exclusion list[RDZV_MAX_EXCLUDED];
		int n;
		int known;	 /* list holds a reading of "excluded" */
		int sitting_out; /* this node is left out and waits */
		int tries;	 /* compare-and-set retries of "excluded" */
		int round;     /* the round that left us out (names our keys) */
		int over_kind; /* how the job ended while we sat out */
		char over_why[512];
		/*
		 * Who this node is in those records (rdzv_records.h): its
		 * address, cut to leave room for "#<id>", and the id its agent
		 * drew.
		 */
		char addr[RDZV_MAX_FIELD - RDZV_MAX_ID];
		char id[RDZV_MAX_ID + 1];
		/* The join's: this node may join (afresh: after sitting out). */
		void (*admit)(struct crun_rdzv *r, int afresh);
	} excl;
	/*
	 * A spare whose round ended (rdzv_join.c) lets the nodes that remain,
	 * and the spares that came before it, join the next round first.
	 */
	struct {
		int place;  /* 1: the round's first spare, 2: the next, ... */
		int status; /* the job's status if that end was its last, or
			       0 (no end read since it last waited) */
		char why[512]; /* that end, as recorded */
	} spare;
	/* The last stacks request acted on (rdzv_stacks.c). */
	char stacks_seen[RDZV_STACKS_MAX_NONCE + 1];
};

/* A run id the options allow, or one adopted from the store (shorter than
 * run_id), fits whole in run_id and in "crun/<run_id>/". */
_Static_assert(RDZV_ID_MAX < sizeof(((struct crun_rdzv *)0)->run_id),
	       "RDZV_ID_MAX does not fit run_id");
_Static_assert(sizeof("crun/") + sizeof(((struct crun_rdzv *)0)->run_id) <=
		   sizeof(((struct crun_rdzv *)0)->prefix),
	       "a run id does not fit the key prefix");

/* One request in flight: the round it belongs to, and a step-specific int. */
struct rdzv__op {
	struct crun_rdzv *r;
	int round;
	int arg;
	int n; /* rdzv_end_round: the participants to mark */
	void (*cb)(struct crun_rdzv *, int);
	void *data;
};

/*
 * The files below the owner, each calling only the ones after it here
 * (and reporting up through the callbacks above: end.finishing_ended,
 * excl.admit, the round and end callbacks): rdzv_join.c, rdzv_close.c,
 * rdzv_run.c, rdzv_stacks_run.c, rdzv_end.c, rdzv_exclude.c, rdzv_kit.c.
 */

/* --- rdzv_join.c: agreeing on the job, joining, the descriptor --------- */

/* rdzv_next: join the next round. */
int rdzv__next(struct crun_rdzv *r, rdzv_round_cb cb, void *data);
/* rdzv_set_fingerprint: the descriptor carries fp from now on. */
void rdzv__set_fingerprint(struct crun_rdzv *r, const char *fp);
/* This node's descriptor, from the options and the fingerprint so far. */
void rdzv__descr_build(struct crun_rdzv *r);
/* The fingerprint timer's callback: the descriptor goes without it. */
void rdzv__on_fp_timeout(uv_timer_t *t);

/* --- rdzv_close.c ------------------------------------------------------ */

/* Enough nodes joined: try to close the round (CAS of "closed"). */
void rdzv__try_close(struct crun_rdzv *r);

/* --- rdzv_run.c -------------------------------------------------------- */

/* The round is formed: heartbeats and the watch on our end/<g>. */
void rdzv__start_running(struct crun_rdzv *r);
/* rdzv_node_lost: node g's connection was lost. */
void rdzv__node_lost(struct crun_rdzv *r, int g, const char *how);
/* The store host saw a client vanish while it waited on key k. */
void rdzv__on_vanish(void *arg, const char *k, size_t klen);

/* --- rdzv_stacks_run.c ------------------------------------------------- */

/* Peek the stacks request (with each heartbeat). */
void rdzv__stacks_poll(struct crun_rdzv *r);

/* --- rdzv_end.c: ending a round, restarting, finishing, leaving -------- */

/* rdzv_end_round, rdzv_may_restart, rdzv_serving, rdzv_finish and
 * rdzv_depart (rdzv.h). */
int rdzv__end_round(struct crun_rdzv *r, int kind, const char *why);
int rdzv__may_restart(struct crun_rdzv *r, int kind,
		      void (*cb)(struct crun_rdzv *r, int ok, void *data),
		      void *data);
int rdzv__serving(const struct crun_rdzv *r);
int rdzv__finish(struct crun_rdzv *r,
		 void (*cb)(struct crun_rdzv *r, void *data), void *data);
int rdzv__depart(struct crun_rdzv *r,
		 void (*cb)(struct crun_rdzv *r, void *data), void *data);
/* End a round that is still forming; "assigned" tells its participants. */
void rdzv__abort_round(struct crun_rdzv *r, int kind, const char *why);
/* The reply of the watch on our end/<g> mark: the round ended. */
void rdzv__on_node_end(int status, const struct crun_store_reply *rep,
		       void *arg);
/* The reply to an ADD of "finished": the last one out releases the host. */
void rdzv__on_finished_count(int status, const struct crun_store_reply *rep,
			     void *arg);

/* --- rdzv_exclude.c: leaving out a failing node ------------------------ */

/* Before joining: is this node left out? Then wait; admit(r, afresh) once
 * it may join. */
void rdzv__excl_check(struct crun_rdzv *r,
		      void (*admit)(struct crun_rdzv *r, int afresh));
/* Everyone left: the store host waits for the nodes left out to read "over". */
void rdzv__excl_host_wait(struct crun_rdzv *r);
/* The job is over: say so in "over", for the spares and the nodes left out. */
void rdzv__excl_over(struct crun_rdzv *r, int kind, const char *why);
/* Our failure ended round R: count it, and maybe leave this node out. */
void rdzv__excl_decide(struct crun_rdzv *r, int round, int64_t restarts);

/* --- rdzv_kit.c: keys, requests and replies, failing or ending a round - */

/* Build "crun/<run_id>/<fmt...>" into buf (KEYMAX bytes). */
void rdzv__key(const struct crun_rdzv *r, char *buf, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Watch one key (see rdzv_kv_ops.watch). */
int rdzv__watch1(struct crun_rdzv *r, const char *k, int timeout_ms,
		 rdzv_kv_cb cb, void *arg);
/* A request of the current round (never NULL: aborts without memory). */
struct rdzv__op *rdzv__op_new(struct crun_rdzv *r, int arg);
/* Frees the op; the rendezvous if its reply is still wanted, else NULL. */
struct crun_rdzv *rdzv__op_take(void *arg, int *round, int *a);
/* rdzv__op_take, and n values or the failure reported (then NULL). */
struct crun_rdzv *rdzv__take_values(void *arg, int status,
				    const struct crun_store_reply *rep,
				    size_t n);
/* Value i of a reply as a C string in buf. */
const char *rdzv__reply_str(const struct crun_store_reply *rep, size_t i,
			    char *buf, size_t len);
/* Whether the reply's value is exactly s. */
int rdzv__reply_is(const struct crun_store_reply *rep, const char *s);
/* Stop the last call, heartbeat and deadline timers. */
void rdzv__stop_timers(struct crun_rdzv *r);
/* The round could not be formed: the round callback, once. */
void rdzv__round_fail(struct crun_rdzv *r, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Record k (written by by, or NULL) is malformed: fail or end the round. */
void rdzv__bad_record(struct crun_rdzv *r, const char *k, const char *by,
		      const char *why);
/* A number record in [lo, hi] into *out: 0, or the round failed/ended. */
int rdzv__record_int(struct crun_rdzv *r, const struct crun_store_reply *rep,
		     const char *k, int64_t lo, int64_t hi, int64_t *out);
/* The running round ended: on_end, once (finishing: end.finishing_ended). */
void rdzv__round_ended(struct crun_rdzv *r, int kind, const char *why);
/* A request failed: the store is gone or made no sense. */
void rdzv__store_error(struct crun_rdzv *r, int status);
/* Finishing is over: the finish callback, once. */
void rdzv__finish_done(struct crun_rdzv *r);
/* The deadline timer's callback while finishing: stop waiting. */
void rdzv__on_finish_timeout(uv_timer_t *t);
/* Wall-clock time in milliseconds (exclusions last until an epoch second). */
int64_t rdzv__wall_ms(void);

#endif

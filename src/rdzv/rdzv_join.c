/*
 * Joining a round (rdzv.c has the whole protocol). Happy path: the job id
 * and the config agreed -> "round" read -> ADD join gives this node's
 * arrival index -> its descriptor written (once the fingerprint is ready,
 * bounded by env_check_timeout) -> from MIN nodes on, last call -> the
 * round closes (rdzv_close.c) -> this node reads its assignment -> group
 * rank 0 starts the workers' store and publishes where it is -> running.
 *
 * Failure modes: join_timeout passes (on_deadline names who joined); we
 * came after the round closed (ask it to grow, or wait as a spare); the
 * round was aborted while forming (join the next one); a record that does
 * not parse (the round fails naming the key).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "crun/err.h"
#include "crun/log.h"
#include "crun/rdzv_end.h"
#include "rdzv_kit.h"

static void join_round(struct crun_rdzv *r);
static void join_round_now(struct crun_rdzv *r);
static void deadline_arm(struct crun_rdzv *r);

static void on_deadline_names(int status, const struct crun_store_reply *rep,
			      void *arg)
{
	int round, want;
	struct crun_rdzv *r = rdzv__op_take(arg, &round, &want);
	char names[400] = "";
	size_t n = 0;

	if (r == NULL || r->state != R_JOINING)
		return;
	for (size_t i = 0;
	     status == 0 && i < rep->nvalues && n < sizeof(names) - 64; i++) {
		int h, nr, np, pid;
		char host[256];

		char d[700];

		if (sscanf(rdzv__reply_str(rep, i, d, sizeof(d)),
			   "%d %d %d %d %255s", &h, &nr, &np, &pid, host) == 5)
			n += (size_t)snprintf(names + n, sizeof(names) - n,
					      "%s%s (%d workers)",
					      n ? ", " : "", host, np);
	}
	if (r->alloc_wait && (int)(rep ? rep->nvalues : 0) >= r->o.min_nodes) {
		/* The allocation's nodes did not all come: start without. */
		log_say("round %d: join_timeout (%.0f s) passed with %zu of "
			"the %d nodes of the allocation (%s): starting with "
			"them: %s",
			r->round, r->o.join_timeout, rep->nvalues,
			r->o.expect_first,
			r->o.expect_why ? r->o.expect_why : "",
			*names ? names : "(none readable)");
		r->alloc_wait = 0;
		deadline_arm(r);
		return rdzv__try_close(r);
	}
	if ((int)(rep ? rep->nvalues : 0) >= r->o.min_nodes)
		/* Enough nodes: the round never closed, or we never heard. */
		return rdzv__round_fail(
		    r, CRUN_ERDZV_TIMEOUT,
		    "rendezvous '%s' timed out after %.0f s: %zu nodes "
		    "joined (at least %d needed: %s) but this node never "
		    "received its assignment",
		    r->run_id, r->o.join_timeout, rep->nvalues, r->o.min_nodes,
		    *names ? names : "none readable");
	rdzv__round_fail(
	    r, CRUN_ERDZV_TIMEOUT,
	    "rendezvous '%s' timed out after %.0f s with %zu of at least %d "
	    "nodes: joined %s; still missing %d",
	    r->run_id, r->o.join_timeout, rep ? rep->nvalues : 0,
	    r->o.min_nodes, *names ? names : "(none readable)",
	    r->o.min_nodes - (int)(rep ? rep->nvalues : 0));
}

static void on_deadline_count(int status, const struct crun_store_reply *rep,
			      void *arg)
{
	struct crun_rdzv *r = rdzv__op_take(arg, NULL, NULL);
	char keys[64][KEYMAX];
	const char *kp[64];
	int64_t c;

	if (r == NULL || r->state != R_JOINING)
		return;
	c = status == 0 ? rdzv_reply_int(rep) : 0;
	if (c > 64)
		c = 64;
	for (int i = 0; i < c; i++) {
		rdzv__key(r, keys[i], "r%d/node/%d", r->round, i + 1);
		kp[i] = keys[i];
	}
	if (c <= 0 ||
	    r->ops->multi_get(r->kv, kp, (size_t)c, 2000, on_deadline_names,
			      rdzv__op_new(r, (int)c)))
		on_deadline_names(0, &(struct crun_store_reply){0},
				  rdzv__op_new(r, 0));
}

/* join_timeout passed: name the nodes that joined, then fail. */
static void on_deadline(uv_timer_t *t)
{
	struct crun_rdzv *r = t->data;
	char k[KEYMAX];

	if (r->state != R_JOINING)
		return;
	if (r->deadline_phase++) {
		/* The store did not even answer within 2 s. */
		rdzv__round_fail(
		    r, CRUN_ERDZV_TIMEOUT,
		    "rendezvous '%s' timed out after %.0f s, and the "
		    "rendezvous "
		    "store does not answer",
		    r->run_id, r->o.join_timeout);
		return;
	}
	rdzv__key(r, k, "r%d/join", r->round);
	/* A reachable store answers at once; an unreachable one gets 2 s. */
	uv_timer_start(&r->deadline, on_deadline, 2000, 0);
	if (r->ops->add(r->kv, k, 0, on_deadline_count, rdzv__op_new(r, 0)))
		rdzv__round_fail(r, CRUN_ERDZV_TIMEOUT,
				 "rendezvous '%s' timed out after %.0f s",
				 r->run_id, r->o.join_timeout);
}

static void deadline_arm(struct crun_rdzv *r)
{
	r->deadline_phase = 0;
	uv_timer_start(&r->deadline, on_deadline,
		       (uint64_t)(r->o.join_timeout * 1000), 0);
}

static void on_master(int status, const struct crun_store_reply *rep, void *arg)
{
	struct crun_rdzv *r = rdzv__take_values(arg, status, rep, 1);
	rdzv_round_cb cb;
	char why[200], k[KEYMAX];
	int port;

	if (r == NULL)
		return;
	rdzv__key(r, k, "r%d/master", r->round);
	if (rdzv_parse_master(rep->values[0].base, rep->values[0].len,
			      r->res.master_addr, sizeof(r->res.master_addr),
			      &port, &r->res.master_by_worker, why,
			      sizeof(why)))
		return rdzv__bad_record(r, k, "group rank 0", why);
	r->res.master_port = port;
	r->state = R_RUNNING;
	uv_timer_stop(&r->deadline);
	cb = r->cb;
	r->cb = NULL;
	r->hb.succ_stall = 0;
	r->hb.succ_last = -1;
	r->hb.succ = (r->grank + 1) % r->gworld;
	r->end.seen = 0;
	r->end.unwatched = 0;
	r->end.marked = 0;
	r->hb.last_reply = uv_now(r->loop);
	r->hb.tick = r->hb.last_reply;
	r->hb.silence = 0;
	if (r->hb.wait == HB_RECHECK) /* judged afresh in this round */
		r->hb.wait = HB_ASKED;
	rdzv__start_running(r);
	cb(r, 0, &r->res, r->cb_data);
}

/* Group rank 0 starts the workers' store; everyone reads where it is. */
static void publish_master(struct crun_rdzv *r)
{
	char mk[KEYMAX];
	const char *kp[1] = {mk};

	rdzv__key(r, mk, "r%d/master", r->round);
	if (r->grank == 0) {
		char val[300];
		int port, by_worker = 0,
			  rc = r->o.start_master(r->o.data, r->round, &port,
						 &by_worker);

		if (rc)
			return rdzv__round_fail(
			    r, rc, "cannot start the workers' store: %s",
			    crun_strerror(rc));
		rdzv_format_master(val, sizeof(val), r->o.addr, port,
				   by_worker);
		r->ops->set(r->kv, mk, val, strlen(val), NULL, NULL);
	}
	if (r->ops->multi_get(r->kv, kp, 1, (int)(r->o.join_timeout * 1000),
			      on_master, rdzv__op_new(r, 0)))
		rdzv__store_error(r, CRUN_ECLOSED);
}

/* Group rank 0's copy of the round's addresses (its store's allow list). */
static void got_addrs(struct crun_rdzv *r, const struct crun_store_iov *v)
{
	char mk[KEYMAX], why[200], by[64];

	rdzv__key(r, mk, "r%d/addrs", r->round);
	snprintf(by, sizeof(by), "the node that closed round %d", r->round);
	if (rdzv_parse_addrs(v->base, v->len, r->closed, &r->peers, why,
			     sizeof(why)))
		return rdzv__bad_record(r, mk, by, why);
	publish_master(r);
}

static void on_addrs(int status, const struct crun_store_reply *rep, void *arg)
{
	struct crun_rdzv *r = rdzv__take_values(arg, status, rep, 1);

	if (r != NULL)
		got_addrs(r, &rep->values[0]);
}

/*
 * Our assignment and the round's envcheck lines (and, for the store host,
 * the addresses: NULL if not read yet).
 */
static void got_assignment(struct crun_rdzv *r, const struct crun_store_iov *a,
			   const struct crun_store_iov *e,
			   const struct crun_store_iov *addrs)
{
	struct crun_ranks *k = &r->res.ranks;
	char mk[KEYMAX], why[200], by[64];
	const char *kp[1] = {mk};

	rdzv__key(r, mk, "r%d/assign/%d", r->round, r->index);
	snprintf(by, sizeof(by), "the node that closed round %d", r->round);
	if (rdzv_parse_assign(a->base, a->len, r->closed, r->o.nproc, k, why,
			      sizeof(why)))
		return rdzv__bad_record(r, mk, by, why);
	if (rdzv_parse_envcheck(e->base, e->len, r->env_diff,
				sizeof(r->env_diff), why, sizeof(why))) {
		rdzv__key(r, mk, "r%d/envcheck", r->round);
		return rdzv__bad_record(r, mk, by, why);
	}
	r->res.env_diff = r->env_diff;
	free(r->peers);
	r->peers = NULL;
	r->grank = k->group_rank;
	r->gworld = k->group_world_size;
	r->res.round = r->round;
	snprintf(r->res.run_id, sizeof(r->res.run_id), "%s", r->run_id);
	if (r->grank != 0)
		return publish_master(r);
	/*
	 * Only group rank 0 needs every node's address (the allow list of
	 * the workers' store it starts): N bytes for one node, not for all
	 * N, keeps a round's traffic O(N).
	 */
	if (addrs != NULL)
		return got_addrs(r, addrs);
	rdzv__key(r, mk, "r%d/addrs", r->round);
	if (r->ops->multi_get(r->kv, kp, 1, 10000, on_addrs,
			      rdzv__op_new(r, 0)))
		rdzv__store_error(r, CRUN_ECLOSED);
}

static void on_assignment(int status, const struct crun_store_reply *rep,
			  void *arg)
{
	struct crun_rdzv *r = rdzv__take_values(arg, status, rep, 2);

	if (r != NULL)
		got_assignment(r, &rep->values[0], &rep->values[1], NULL);
}

static void late_or_spare(struct crun_rdzv *r, int closed);

/* The round closed with closed participants: read our assignment. */
static void read_assignment(struct crun_rdzv *r, int closed)
{
	char ak[KEYMAX], ek[KEYMAX];
	const char *kp[2] = {ak, ek};

	r->closed = closed;
	if (r->index > r->closed)
		return late_or_spare(r, r->closed);
	rdzv__key(r, ak, "r%d/assign/%d", r->round, r->index);
	rdzv__key(r, ek, "r%d/envcheck", r->round);
	if (r->ops->multi_get(r->kv, kp, 2, 10000, on_assignment,
			      rdzv__op_new(r, 0)))
		rdzv__store_error(r, CRUN_ECLOSED);
}

static void on_assigned_closed(int status, const struct crun_store_reply *rep,
			       void *arg)
{
	struct crun_rdzv *r = rdzv__op_take(arg, NULL, NULL);
	char ck[KEYMAX];
	int64_t closed;

	if (r == NULL)
		return;
	if (status)
		return rdzv__store_error(r, status);
	rdzv__key(r, ck, "r%d/closed", r->round);
	if (rdzv__record_int(r, rep, ck, 1, r->o.max_nodes, &closed))
		return;
	read_assignment(r, (int)closed);
}

static void on_assigned(int status, const struct crun_store_reply *rep,
			void *arg)
{
	struct crun_rdzv *r = rdzv__op_take(arg, NULL, NULL);
	char ak[KEYMAX], why[160];
	int closed;

	if (r == NULL)
		return;
	if (status == CRUN_ETIMEDOUT)
		return; /* the deadline timer reports it */
	if (status)
		return rdzv__store_error(r, status);
	uv_timer_stop(&r->last_call);
	rdzv__key(r, ak, "r%d/assigned", r->round);
	if (rdzv_parse_assigned(rep->value, rep->len, r->o.max_nodes, &closed,
				why, sizeof(why)))
		return rdzv__bad_record(r, ak, NULL, why);
	/*
	 * "ok N": the closer says how many took part. The watch read our
	 * assignment with it (written before "assigned"), unless we came
	 * too late for the round.
	 */
	if (closed > 0 && r->index <= closed && rep->nvalues >= 3 &&
	    rep->values[1].len > 0) {
		r->closed = closed;
		return got_assignment(r, &rep->values[1], &rep->values[2],
				      rep->nvalues > 3 ? &rep->values[3]
						       : NULL);
	}
	if (closed > 0)
		return read_assignment(r, closed);
	if (closed < 0) {
		if (rep->len > 7 && memcmp(rep->value, "abort X", 7) == 0) {
			r->env_refused =
			    rep->len > 24 &&
			    memcmp(rep->value, "abort X env_check=strict",
				   24) == 0;
			return rdzv__round_fail(r, CRUN_ERDZV_CLOSED, "%.*s",
						(int)rep->len - 8,
						(const char *)rep->value + 8);
		}
		/*
		 * The round was aborted while forming: join the next one,
		 * which whoever aborted it has opened already.
		 */
		r->aborted = r->round;
		return join_round(r);
	}
	/* A plain "ok": did we make it in before it closed? */
	rdzv__key(r, ak, "r%d/closed", r->round);
	if (r->ops->add(r->kv, ak, 0, on_assigned_closed, rdzv__op_new(r, 0)))
		rdzv__store_error(r, CRUN_ECLOSED);
}

static void on_last_call(uv_timer_t *t)
{
	rdzv__try_close(t->data);
}

/* The job's exit status if the end (kind, why) was its last. */
static int end_status(int kind, const char *why)
{
	struct rdzv_end e;

	rdzv_end_describe(kind, why, &e);
	if (kind == RDZV_END_FAILURE && e.status > 0)
		return e.status;
	return e.signal ? 128 + e.signal : 1;
}

/* A spare's turn came (or its bound passed): join the next round. */
static void spare_join(struct crun_rdzv *r)
{
	r->spare.status = 0;
	r->state = R_JOINING;
	deadline_arm(r); /* the whole join_timeout again */
	join_round(r);
}

/*
 * The job's end as a spare learns it, from "over" or the round's "end":
 * a job that succeeded did not need it; one that stopped passes its status
 * on (rdzv_job_status): a spare never turns a job's outcome into another.
 */
static void spare_over(struct crun_rdzv *r, int kind, const char *text)
{
	if (kind == RDZV_END_SUCCESS)
		return rdzv__round_fail(r, CRUN_ERDZV_LEFT_OUT,
					"job finished; this spare (%s) was "
					"not needed",
					r->o.host);
	r->spare.status = end_status(kind, text);
	rdzv__round_fail(r, CRUN_ERDZV_CLOSED,
			 "job stopped (%s) while %s waited as a spare", text,
			 r->o.host);
}

static void on_spare_over(int status, const struct crun_store_reply *rep,
			  void *arg)
{
	struct crun_rdzv *r = rdzv__take_values(arg, status, rep, 1);
	char text[512], why[200], k[KEYMAX];
	int kind;

	if (r == NULL)
		return;
	if (rep->values[0].len == 0)
		return spare_join(r); /* the job goes on */
	if (rdzv_parse_end(rep->values[0].base, rep->values[0].len, &kind, text,
			   sizeof(text), why, sizeof(why))) {
		rdzv__key(r, k, "over");
		return rdzv__bad_record(r, k, NULL, why);
	}
	/* It ended as the round's end said ("over" may not say how). */
	spare_over(r, kind, kind == RDZV_END_SUCCESS ? text : r->spare.why);
}

/* The nodes before us are in the next round, or they are late. */
static void on_spare_turn(int status, const struct crun_store_reply *rep,
			  void *arg)
{
	struct crun_rdzv *r = rdzv__op_take(arg, NULL, NULL);
	char k[KEYMAX];
	const char *kp[1] = {k};

	(void)rep;
	if (r == NULL)
		return;
	if (status == 0)
		return spare_join(r);
	if (status != CRUN_ETIMEDOUT)
		return rdzv__store_error(r, status);
	/* None came: maybe none will, because the job is over. */
	rdzv__key(r, k, "over");
	if (r->ops->peek(r->kv, kp, 1, on_spare_over, rdzv__op_new(r, 0)))
		rdzv__store_error(r, CRUN_ECLOSED);
}

/*
 * How many the next round expects back (its "expect", written before the
 * round moved on): the spare in place P waits for arrival expect + P - 1,
 * so the nodes that remain keep their places and spares come in the order
 * they came, bounded by last_call_timeout (a node that never comes back
 * does not hold the spares out).
 */
static void on_spare_expect(int status, const struct crun_store_reply *rep,
			    void *arg)
{
	struct crun_rdzv *r = rdzv__take_values(arg, status, rep, 1);
	char k[KEYMAX], why[200];
	int64_t expect = 0;
	int wait_for;

	if (r == NULL)
		return;
	if (rep->values[0].len > 0 &&
	    rdzv_parse_int(rep->values[0].base, rep->values[0].len, 0,
			   r->o.max_nodes, &expect, why, sizeof(why))) {
		rdzv__key(r, k, "r%d/expect", r->round + 1);
		return rdzv__bad_record(r, k, NULL, why);
	}
	wait_for = (int)expect + r->spare.place - 1;
	if (wait_for > r->o.max_nodes)
		wait_for = r->o.max_nodes;
	if (expect <= 0 || wait_for <= 0)
		return spare_join(r);
	log_say("round %d ended (%s): %s, spare %d, lets %d node%s join round "
		"%d first (up to %g s)",
		r->round, r->spare.why, r->o.host, r->spare.place, wait_for,
		wait_for == 1 ? "" : "s", r->round + 1, r->o.last_call_timeout);
	rdzv__key(r, k, "r%d/node/%d", r->round + 1, wait_for);
	if (rdzv__watch1(r, k, (int)(r->o.last_call_timeout * 1000) + 1,
			 on_spare_turn, rdzv__op_new(r, 0)))
		rdzv__store_error(r, CRUN_ECLOSED);
}

/*
 * The full round a spare waited on ended (its "end" record says how): when
 * the job is over, the spare ends with it, with the job's outcome (a spare
 * of a job that succeeded exits 0: it must not fail a SLURM job that did
 * not); otherwise there may be room in the next round, after the nodes
 * that remain.
 */
static void on_spare_end(int status, const struct crun_store_reply *rep,
			 void *arg)
{
	struct crun_rdzv *r = rdzv__op_take(arg, NULL, NULL);
	char text[512], why[200], k[KEYMAX];
	const char *kp[1] = {k};
	int kind;

	if (r == NULL)
		return;
	if (status)
		return rdzv__store_error(r, status);
	if (rdzv_parse_end(rep->value, rep->len, &kind, text, sizeof(text), why,
			   sizeof(why))) {
		rdzv__key(r, k, "r%d/end", r->round);
		return rdzv__bad_record(r, k, NULL, why);
	}
	if (kind == RDZV_END_SUCCESS || kind == RDZV_END_FATAL)
		return spare_over(r, kind, text);
	r->spare.place = r->index > r->closed ? r->index - r->closed : 1;
	r->spare.status = end_status(kind, text);
	snprintf(r->spare.why, sizeof(r->spare.why), "%s", text);
	rdzv__key(r, k, "r%d/expect", r->round + 1);
	if (r->ops->peek(r->kv, kp, 1, on_spare_expect, rdzv__op_new(r, 0)))
		rdzv__store_error(r, CRUN_ECLOSED);
}

/* We arrived after round R closed: ask it to grow, or wait as a spare. */
static void late_or_spare(struct crun_rdzv *r, int closed)
{
	char k[KEYMAX];

	if (closed < r->o.max_nodes && r->o.static_rank < 0) {
		/* Room to grow: running nodes restart to admit us. */
		log_say("round %d runs with %d of at most %d nodes: "
			"asking it to re-form to admit %s",
			r->round, closed, r->o.max_nodes, r->o.host);
		rdzv__end_round(r, RDZV_END_JOIN, r->o.host);
		return join_round(r);
	}
	log_say("round %d is full (%d nodes): %s waits as a spare", r->round,
		closed, r->o.host);
	r->state = R_WAITING;
	r->spare.status = 0;
	uv_timer_stop(&r->deadline);
	rdzv__key(r, k, "r%d/end", r->round);
	if (rdzv__watch1(r, k, -1, on_spare_end, rdzv__op_new(r, 0)))
		rdzv__store_error(r, CRUN_ECLOSED);
}

/* A count peeked at (closed, expect): absent is 0, else 0..max_nodes. */
static int peek_count(struct crun_rdzv *r, const struct crun_store_reply *rep,
		      size_t i, const char *what, int *out)
{
	char k[KEYMAX], why[200];
	int64_t v = 0;

	if (rep->values[i].len > 0 &&
	    rdzv_parse_int(rep->values[i].base, rep->values[i].len, 0,
			   r->o.max_nodes, &v, why, sizeof(why))) {
		rdzv__key(r, k, "r%d/%s", r->round, what);
		rdzv__bad_record(r, k, NULL, why);
		return CRUN_EPROTO;
	}
	*out = (int)v;
	return 0;
}

/*
 * MIN nodes are in and MAX is not: wait last_call_timeout for more. The
 * node that made MIN says so, or a lone node of an elastic range (and the
 * first of every larger one) would wait 30 s without a word.
 */
static void last_call_start(struct crun_rdzv *r)
{
	if (r->index == r->o.min_nodes && r->o.last_call_timeout >= 1)
		log_say("round %d: %d of %d-%d nodes have joined: "
			"waiting up to %.0f s for more (last_call_timeout)",
			r->round, r->index, r->o.min_nodes, r->o.max_nodes,
			r->o.last_call_timeout);
	uv_timer_start(&r->last_call, on_last_call,
		       (uint64_t)(r->o.last_call_timeout * 1000), 0);
}

/* After ADD join, one peek: participant, late joiner, or stale round. */
static void on_join_state(int status, const struct crun_store_reply *rep,
			  void *arg)
{
	struct crun_rdzv *r = rdzv__take_values(arg, status, rep, 3);
	char wk[4][KEYMAX];
	const char *kp[4] = {wk[0], wk[1], wk[2], wk[3]};
	int closed;

	if (r == NULL)
		return;
	if (rep->values[2].len > 0) {
		/* The round already ended: the next one is open. */
		return join_round(r);
	}
	if (peek_count(r, rep, 0, "closed", &closed) ||
	    peek_count(r, rep, 1, "expect", &r->expect))
		return;
	r->closed = closed;
	if (closed > 0 && r->index > closed)
		return late_or_spare(r, closed);
	if (r->round == 0 && r->expect == 0 && r->o.expect_first > 0) {
		/* The job's first round: the allocation's nodes are coming. */
		r->expect = r->o.expect_first;
		r->alloc_wait = 1;
	}
	/*
	 * A participant: wait for the assignment, reading ours and the
	 * envcheck lines with it (the store host, likely group rank 0, the
	 * addresses too); close when it is time.
	 */
	rdzv__key(r, wk[0], "r%d/assigned", r->round);
	rdzv__key(r, wk[1], "r%d/assign/%d", r->round, r->index);
	rdzv__key(r, wk[2], "r%d/envcheck", r->round);
	rdzv__key(r, wk[3], "r%d/addrs", r->round);
	if (r->ops->watch(r->kv, kp, r->o.is_store_host ? 4 : 3, -1,
			  on_assigned, rdzv__op_new(r, 0)))
		return rdzv__store_error(r, CRUN_ECLOSED);
	if (r->index >= r->o.min_nodes) {
		if (r->index >= r->o.max_nodes ||
		    (r->expect > 0 && r->index >= r->expect))
			rdzv__try_close(r);
		else if (!r->alloc_wait)
			last_call_start(r);
		else if (r->index == r->o.min_nodes)
			log_say(
			    "round %d: %d of the %d nodes of the allocation "
			    "(%s) have joined: waiting up to %.0f s "
			    "(join_timeout) for the %d missing, not "
			    "last_call_timeout",
			    r->round, r->index, r->o.expect_first,
			    r->o.expect_why ? r->o.expect_why : "",
			    r->o.join_timeout, r->o.expect_first - r->index);
	}
}

/*
 * This node's descriptor, from the options and the fingerprint so far.
 * The ip= list gives way to the rest: as many whole addresses as fit in
 * RDZV_MAX_RECORD.
 */
void rdzv__descr_build(struct crun_rdzv *r)
{
	const struct rdzv_opts *o = &r->o;
	struct rdzv_descr_in d = {
	    .is_host = o->is_store_host ? 1 : 0,
	    .node_rank = o->static_rank >= 0 ? o->static_rank : 0,
	    .nproc = o->nproc,
	    .pid = (int)getpid(),
	    .host = o->host,
	    .addr = o->addr,
	    .role = o->role,
	    .ips = o->ips,
	    .env = r->descr.fp,
	};

	rdzv_format_descr(r->descr.text, sizeof(r->descr.text), &d);
}

/* Write the descriptor that waited for the fingerprint, if still wanted. */
static void descr_flush(struct crun_rdzv *r)
{
	char k[KEYMAX];
	int round = r->descr.held_round, close = r->descr.close_after;

	r->descr.held_round = -1;
	r->descr.close_after = 0;
	if (round < 0 || round != r->round || r->state != R_JOINING)
		return;
	rdzv__key(r, k, "r%d/node/%d", round, r->descr.held_index);
	if (r->ops->set(r->kv, k, r->descr.text, strlen(r->descr.text), NULL,
			NULL))
		return rdzv__store_error(r, CRUN_ECLOSED);
	if (close)
		rdzv__try_close(r);
}

void rdzv__on_fp_timeout(uv_timer_t *t)
{
	struct crun_rdzv *r = t->data;

	if (!r->descr.fp_wait)
		return;
	r->descr.fp_wait = 0;
	log_say("%s's fingerprint was not ready after %.1f s: its "
		"descriptor goes without it (env_check_timeout)",
		r->o.host, r->o.fingerprint_wait);
	descr_flush(r);
}

void rdzv__set_fingerprint(struct crun_rdzv *r, const char *fp)
{
	snprintf(r->descr.fp, sizeof(r->descr.fp), "%s", fp ? fp : "");
	rdzv__descr_build(r);
	r->descr.fp_wait = 0;
	uv_timer_stop(&r->descr.fp_timer);
	descr_flush(r);
}

static void on_join_index(int status, const struct crun_store_reply *rep,
			  void *arg)
{
	struct crun_rdzv *r = rdzv__op_take(arg, NULL, NULL);
	char k[KEYMAX];
	int64_t index;

	if (r == NULL)
		return;
	if (status)
		return rdzv__store_error(r, status);
	rdzv__key(r, k, "r%d/join", r->round);
	if (rdzv__record_int(r, rep, k, 1, INT32_MAX / 2, &index))
		return;
	r->index = (int)index;
	/*
	 * A descriptor still waiting for the fingerprint is written when it
	 * comes (or its bound passes); the closer's read waits for it.
	 */
	if (r->descr.fp_wait) {
		r->descr.held_round = r->round;
		r->descr.held_index = r->index;
		r->descr.close_after = 0;
		return;
	}
	rdzv__key(r, k, "r%d/node/%d", r->round, r->index);
	if (r->ops->set(r->kv, k, r->descr.text, strlen(r->descr.text), NULL,
			NULL))
		rdzv__store_error(r, CRUN_ECLOSED);
}

/*
 * Join round n: take an arrival index and, pipelined behind it, peek at
 * whether the round is closed, how many it expects and whether it ended
 * (answered in order: on_join_index has the index by then).
 */
static void join_at(struct crun_rdzv *r, int n)
{
	char k1[KEYMAX], k2[KEYMAX], k3[KEYMAX], k4[KEYMAX];
	const char *kp[3] = {k2, k3, k4};

	r->round = n;
	r->expect = 0;
	r->alloc_wait = 0;
	r->closed = 0;
	rdzv__key(r, k1, "r%d/join", r->round);
	rdzv__key(r, k2, "r%d/closed", r->round);
	rdzv__key(r, k3, "r%d/expect", r->round);
	rdzv__key(r, k4, "r%d/end", r->round);
	if (r->ops->add(r->kv, k1, 1, on_join_index, rdzv__op_new(r, 0)) ||
	    r->ops->peek(r->kv, kp, 3, on_join_state, rdzv__op_new(r, 0)))
		rdzv__store_error(r, CRUN_ECLOSED);
}

static void on_round_number(int status, const struct crun_store_reply *rep,
			    void *arg)
{
	int next;
	struct crun_rdzv *r = rdzv__op_take(arg, NULL, &next);
	char k[KEYMAX];
	int64_t round;

	if (r == NULL || next != r->nexts || r->state != R_JOINING)
		return;
	if (status)
		return rdzv__store_error(r, status);
	rdzv__key(r, k, "round");
	if (rdzv__record_int(r, rep, k, r->aborted + 1, INT32_MAX - 2, &round))
		return;
	join_at(r, (int)round);
}

/* Ask for the current round (creating round 0); on_round_number joins it. */
static int ask_round(struct crun_rdzv *r)
{
	char k[KEYMAX];

	rdzv__key(r, k, "round");
	return r->ops->compare_set(r->kv, k, "", 0, "0", 1, on_round_number,
				   rdzv__op_new(r, r->nexts));
}

/* Read the current round (creating round 0) and join it. */
static void join_round_now(struct crun_rdzv *r)
{
	r->state = R_JOINING;
	uv_timer_stop(&r->last_call);
	if (r->ended >= 0 && r->ended == r->round && r->round < INT32_MAX - 2) {
		/*
		 * We read round R's end: whoever ended it advanced "round" to
		 * R+1 just before (rdzv_end_round), so join R+1 without asking.
		 * Had R+1 ended too, the peek after joining sends us on.
		 */
		r->ended = -1;
		return join_at(r, r->round + 1);
	}
	if (ask_round(r))
		rdzv__store_error(r, CRUN_ECLOSED);
}

/*
 * What `crun status` cannot learn otherwise: the restart budget and the
 * heartbeat interval this agent runs with (one write as it first joins).
 */
static void write_params(struct crun_rdzv *r)
{
	char k[KEYMAX], v[96];

	rdzv__key(r, k, "params");
	rdzv_format_params(v, sizeof(v), r->o.max_restarts,
			   (long long)(r->o.keep_alive_interval * 1000 >= 1
					   ? r->o.keep_alive_interval * 1000
					   : 1));
	r->ops->set(r->kv, k, v, strlen(v), NULL, NULL);
}

/*
 * The exclusion lets this node join: at once, or after it sat out (then
 * with the whole join_timeout again).
 */
static void on_admitted(struct crun_rdzv *r, int afresh)
{
	if (afresh)
		deadline_arm(r);
	join_round_now(r);
}

/* Join the next round, unless this node is left out of it (see below). */
static void join_round(struct crun_rdzv *r)
{
	r->state = R_JOINING;
	uv_timer_stop(&r->last_call);
	if (r->o.exclude_after > 0)
		return rdzv__excl_check(r, on_admitted);
	join_round_now(r);
}

static void on_config(int status, const struct crun_store_reply *rep, void *arg)
{
	int next;
	struct crun_rdzv *r = rdzv__op_take(arg, NULL, &next);

	if (r == NULL || next != r->nexts || r->state != R_JOINING)
		return;
	if (status)
		return rdzv__store_error(r, status);
	if (!rdzv__reply_is(rep, r->config))
		return rdzv__round_fail(
		    r, CRUN_ERDZV_MISMATCH,
		    "rendezvous '%s' already runs with \"%.*s\"; this node has "
		    "\"%s\": start every node with the same --nnodes, "
		    "backend and crun version (proto=)",
		    r->run_id, (int)rep->len, (const char *)rep->value,
		    r->config);
	r->agreed = 1;
	write_params(r);
	if (!r->ahead) /* else the round's number is the next reply */
		join_round(r);
}

/* Agree on the config: this node's, unless the job has one already. */
static int ask_config(struct crun_rdzv *r)
{
	char k[KEYMAX];

	snprintf(r->prefix, sizeof(r->prefix), "crun/%s/", r->run_id);
	rdzv__key(r, k, "config");
	return r->ops->compare_set(r->kv, k, "", 0, r->config,
				   strlen(r->config), on_config,
				   rdzv__op_new(r, r->nexts));
}

static void on_job_id(int status, const struct crun_store_reply *rep, void *arg)
{
	int next;
	struct crun_rdzv *r = rdzv__op_take(arg, NULL, &next);

	if (r == NULL || next != r->nexts || r->state != R_JOINING)
		return;
	if (status)
		return rdzv__store_error(r, status);
	if (*r->run_id && !rdzv__reply_is(rep, r->run_id))
		return rdzv__round_fail(
		    r, CRUN_ERDZV_MISMATCH,
		    "the rendezvous endpoint serves job '%.*s', not '%s': "
		    "use the same --rdzv_id on every node, or another endpoint",
		    (int)rep->len, (const char *)rep->value, r->run_id);
	if (rep->len == 0 || rep->len >= sizeof(r->run_id) ||
	    memchr(rep->value, '/', rep->len) != NULL)
		return rdzv__round_fail(
		    r, CRUN_EPROTO,
		    "malformed rendezvous record 'crun/job': not "
		    "a job id");
	for (size_t i = 0; i < rep->len; i++)
		if (((const unsigned char *)rep->value)[i] <= 0x20 ||
		    ((const unsigned char *)rep->value)[i] >= 0x7f)
			return rdzv__round_fail(r, CRUN_EPROTO,
						"malformed rendezvous record "
						"'crun/job': not a job id");
	memcpy(r->run_id, rep->value, rep->len);
	r->run_id[rep->len] = '\0';
	if (!r->ahead && ask_config(r))
		rdzv__store_error(r, CRUN_ECLOSED);
}

int rdzv__next(struct crun_rdzv *r, rdzv_round_cb cb, void *data)
{
	int rc;

	if (r->state == R_JOINING || r->state == R_DONE)
		return CRUN_EUSAGE;
	/* From a running round that we ended ourselves: its watch is moot. */
	rdzv__stop_timers(r);
	r->cb = cb;
	r->cb_data = data;
	r->env_refused = 0;
	r->state = R_JOINING;
	deadline_arm(r);
	if (r->agreed) {
		join_round(r);
		return 0;
	}
	/*
	 * First round: agree on the job id (adopt the endpoint's if we have
	 * none). With an id of our own, the config and the round's number are
	 * asked in the same write: the replies come in order, each acted on
	 * only once the one before it agreed (a compare-and-set that finds
	 * its key changes nothing, so a node turned away leaves no trace but
	 * its own job's config and round under the other job's endpoint).
	 */
	r->nexts++;
	r->ahead = 0;
	if (*r->run_id) {
		rc = r->ops->compare_set(r->kv, RDZV_JOB_KEY, "", 0, r->run_id,
					 strlen(r->run_id), on_job_id,
					 rdzv__op_new(r, r->nexts));
		if (rc == 0 && r->o.exclude_after == 0 &&
		    (rc = ask_config(r)) == 0 && (rc = ask_round(r)) == 0)
			r->ahead = 1;
	} else {
		rc = rdzv__watch1(r, RDZV_JOB_KEY,
				  (int)(r->o.join_timeout * 1000), on_job_id,
				  rdzv__op_new(r, r->nexts));
	}
	if (rc) {
		r->state = R_IDLE;
		uv_timer_stop(&r->deadline);
	}
	return rc;
}

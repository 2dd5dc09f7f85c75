/*
 * Ending a round and leaving. Whoever ends round R advances "round" to R+1,
 * CASes the reason into r<R>/end (the first end recorded wins) and marks
 * every participant's end/<g>; the winner counts the job-wide restarts
 * and writes r<R+1>/restarts, which everyone reads before deciding
 * whether to restart (rdzv_may_restart). A node that finished sets its
 * done/<g> mark and counts itself finished and left; the store host
 * serves until every node has left, bounded by close_timeout.
 *
 * Failure modes: the store is gone (nothing to ask: no restart); a node
 * departs before its end's writes are sent (it waits for them); the last
 * node out dies before releasing the store host (rdzv_run.c counts it).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crun/err.h"
#include "crun/log.h"
#include "rdzv_kit.h"

static int mark_ended(struct crun_rdzv *r, int n, const void *v, size_t len);
static void end_chain_done(struct crun_rdzv *r);

/* --- the watch on our end/<g> mark (started by rdzv_run.c) ----------- */

/* The round's "end" value: its first byte is the kind, then the reason. */
static void on_end_value(int status, const struct crun_store_reply *rep,
			 void *arg)
{
	struct crun_rdzv *r = rdzv__op_take(arg, NULL, NULL);
	char text[512], why[200], k[KEYMAX];
	int kind;

	if (r == NULL || status == CRUN_ECANCELED)
		return;
	if (status)
		return rdzv__store_error(r, status);
	if (rep->nvalues != 1)
		return rdzv__store_error(r, CRUN_EPROTO);
	rdzv__key(r, k, "r%d/end", r->round);
	if (rdzv_parse_end(rep->values[0].base, rep->values[0].len, &kind, text,
			   sizeof(text), why, sizeof(why)))
		return rdzv__bad_record(r, k, NULL, why);
	r->ended = r->round;
	rdzv__round_ended(r, kind, text);
}

/* Our end/<g> mark is set: it says why the round ended, or to read "end". */
void rdzv__on_node_end(int status, const struct crun_store_reply *rep,
		       void *arg)
{
	struct crun_rdzv *r = rdzv__op_take(arg, NULL, NULL);
	char k[KEYMAX], text[512], why[200];
	const char *kp[1] = {k};
	int kind;

	if (r == NULL || status == CRUN_ECANCELED)
		return;
	if (status)
		return rdzv__store_error(r, status);
	if (!rdzv__reply_is(rep, "1")) {
		rdzv__key(r, k, "r%d/end/%d", r->round, r->grank);
		if (rdzv_parse_end(rep->value, rep->len, &kind, text,
				   sizeof(text), why, sizeof(why)))
			return rdzv__bad_record(r, k, NULL, why);
		r->ended = r->round;
		return rdzv__round_ended(r, kind, text);
	}
	rdzv__key(r, k, "r%d/end", r->round);
	if (r->ops->multi_get(r->kv, kp, 1, 10000, on_end_value,
			      rdzv__op_new(r, 0)))
		rdzv__store_error(r, CRUN_ECLOSED);
}

/* The job-wide restart count after round R, for everyone deciding on R+1. */
static void on_restart_total(int status, const struct crun_store_reply *rep,
			     void *arg)
{
	struct rdzv__op *o = arg;
	struct crun_rdzv *r = o->r;
	char k[KEYMAX], v[24];

	if (status == 0 && r->state != R_DONE) {
		if (o->arg == RDZV_END_FAILURE && r->o.exclude_after > 0) {
			end_chain_done(r);
			rdzv__excl_decide(r, o->round, rdzv_reply_int(rep));
			free(o);
			return;
		}
		snprintf(v, sizeof(v), "%" PRId64, rdzv_reply_int(rep));
		rdzv__key(r, k, "r%d/restarts", o->round + 1);
		r->ops->set(r->kv, k, v, strlen(v), NULL, NULL);
	}
	end_chain_done(r);
	free(o);
}

/*
 * The reply to our CAS of "end". Only the node whose end was recorded counts
 * (failures cost one). The CAS of "round" cannot tell: a losing CAS is
 * answered with the current value, which is the very round it wanted.
 */
static void on_end_recorded(int status, const struct crun_store_reply *rep,
			    void *arg)
{
	struct rdzv__op *o = arg;
	struct crun_rdzv *r = o->r;
	char k[KEYMAX];

	/*
	 * Mark every participant with the recorded end, ours or the one that
	 * was there first (its writer may have died before marking).
	 */
	if (status == 0)
		mark_ended(r, o->n, rep->value, rep->len);
	if (status == 0 && rdzv__reply_is(rep, o->data) && r->state != R_DONE) {
		struct rdzv__op *t = rdzv__op_new(r, o->arg);

		t->round = o->round;
		rdzv__key(r, k, "restarts");
		if (r->ops->add(r->kv, k,
				o->arg == RDZV_END_FAILURE ||
					o->arg == RDZV_END_STALL
				    ? 1
				    : 0,
				on_restart_total, t)) {
			free(t);
			end_chain_done(r);
		}
	} else {
		end_chain_done(r);
	}
	free(o->data);
	free(o);
}

/*
 * After "end" is written: set every participant's end/<g> (what each one
 * watches) to it, so they all learn it and why, in one MULTI_SET. A long
 * reason is not copied N times: "1" tells them to read "end".
 */
#define END_MARK_MAX 160

static int mark_ended(struct crun_rdzv *r, int n, const void *v, size_t len)
{
	char(*keys)[KEYMAX];
	const char **kp;
	const void **vp;
	size_t *lens;
	int rc = 0;

	if (n <= 0)
		return 0;
	keys = calloc((size_t)n, sizeof(*keys));
	kp = calloc((size_t)n, sizeof(*kp));
	vp = calloc((size_t)n, sizeof(*vp));
	lens = calloc((size_t)n, sizeof(*lens));
	if (!keys || !kp || !vp || !lens)
		abort();
	for (int g = 0; g < n; g++) {
		rdzv__key(r, keys[g], "r%d/end/%d", r->round, g);
		kp[g] = keys[g];
		vp[g] = len > 0 && len <= END_MARK_MAX ? v : "1";
		lens[g] = len > 0 && len <= END_MARK_MAX ? len : 1;
	}
	rc = r->ops->multi_set(r->kv, kp, vp, lens, (size_t)n, NULL, NULL);
	free(keys);
	free(kp);
	free(vp);
	free(lens);
	return rc;
}

int rdzv__end_round(struct crun_rdzv *r, int kind, const char *why)
{
	char k[KEYMAX], cur[16], next[16], val[600], ek[KEYMAX];
	int n = r->state == R_RUNNING || r->state == R_ENDED ? r->gworld
							     : r->closed;
	int expect;
	struct rdzv__op *o = rdzv__op_new(r, kind);
	int rc;

	o->round = r->round;
	expect = kind == RDZV_END_DEAD	 ? n - 1
		 : kind == RDZV_END_JOIN ? n + 1
					 : n;
	if (expect > r->o.max_nodes)
		expect = r->o.max_nodes;
	snprintf(cur, sizeof(cur), "%d", r->round);
	snprintf(next, sizeof(next), "%d", r->round + 1);
	rdzv_format_end(val, sizeof(val), kind, why);
	rdzv__key(r, ek, "r%d/expect", r->round + 1);
	if (kind == RDZV_END_FAILURE) {
		/* The job's last failure, with its time, for `crun status`. */
		uv_timeval64_t tv;
		char fv[700];

		if (uv_gettimeofday(&tv) == 0) {
			rdzv_format_failure(fv, sizeof(fv), r->round,
					    (long long)tv.tv_sec * 1000 +
						tv.tv_usec / 1000,
					    why);
			rdzv__key(r, k, "failure");
			r->ops->set(r->kv, k, fv, strlen(fv), NULL, NULL);
		}
	}
	rdzv__key(r, k, "round");
	/* In order: the next round's expectation, the round, then the reason.
	 */
	if (expect > 0) {
		char e[16];

		snprintf(e, sizeof(e), "%d", expect);
		r->ops->set(r->kv, ek, e, strlen(e), NULL, NULL);
	}
	rc = r->ops->compare_set(r->kv, k, cur, strlen(cur), next, strlen(next),
				 NULL, NULL);
	if (rc) {
		free(o);
		return rc;
	}
	rdzv__key(r, k, "r%d/end", r->round);
	o->data = strdup(val);
	if (o->data == NULL)
		abort();
	o->n = n;
	r->end.chain++;
	rc = r->ops->compare_set(r->kv, k, "", 0, val, strlen(val),
				 on_end_recorded, o);
	if (rc) {
		r->end.chain--;
		free(o->data);
		free(o);
	}
	return rc;
}

/* Abort a round that is still forming; "assigned" tells its participants. */
void rdzv__abort_round(struct crun_rdzv *r, int kind, const char *why)
{
	char k[KEYMAX], val[600];

	rdzv__key(r, k, "r%d/assigned", r->round);
	rdzv_format_abort(val, sizeof(val), kind, why);
	rdzv__end_round(r, kind, why);
	r->ops->set(r->kv, k, val, strlen(val), NULL, NULL);
}

/* rdzv_may_restart's question, asked in two reads. */
struct may {
	struct crun_rdzv *r;
	int kind;
	int64_t restarts;
	void (*cb)(struct crun_rdzv *, int, void *);
	void *data;
};

/* The answer: ok or not (then "over" says so), unless we are done. */
static void may_answer(struct may *m, int ok)
{
	if (!ok && m->r->state != R_DONE)
		rdzv__excl_over(m->r, m->kind, m->r->errmsg);
	if (m->r->state != R_DONE)
		m->cb(m->r, ok, m->data);
	free(m);
}

/*
 * A node lost and too few remain: the spares of the round (the nodes that
 * joined it after it closed) may fill the next one.
 */
static void on_may_spares(int status, const struct crun_store_reply *rep,
			  void *arg)
{
	struct may *m = arg;
	int64_t spares = 0;

	if (status == 0 && m->r->state != R_DONE)
		spares = rdzv_reply_int(rep) - m->r->gworld;
	may_answer(m, spares > 0 &&
			  m->r->gworld - 1 + spares >= m->r->o.min_nodes);
}

static void on_may_finished(int status, const struct crun_store_reply *rep,
			    void *arg)
{
	struct may *m = arg;
	char k[KEYMAX];
	int ok = 0;

	if (status == 0 && m->r->state != R_DONE) {
		int64_t finished = rdzv_reply_int(rep);

		ok = finished == 0;
		if ((m->kind == RDZV_END_FAILURE ||
		     m->kind == RDZV_END_STALL) &&
		    m->restarts > m->r->o.max_restarts)
			ok = 0;
		if (m->kind == RDZV_END_DEAD && m->r->o.static_rank >= 0)
			ok = 0;
		if (m->kind == RDZV_END_SUCCESS || m->kind == RDZV_END_FATAL ||
		    m->kind == RDZV_END_LOST)
			ok = 0;
		if (ok && m->kind == RDZV_END_DEAD &&
		    m->r->gworld - 1 < m->r->o.min_nodes) {
			rdzv__key(m->r, k, "r%d/join", m->r->round);
			if (m->r->ops->add(m->r->kv, k, 0, on_may_spares, m))
				may_answer(m, 0);
			return;
		}
	}
	may_answer(m, ok);
}

static void on_may_restarts(int status, const struct crun_store_reply *rep,
			    void *arg)
{
	struct may *m = arg;
	char k[KEYMAX], why[200];

	rdzv__key(m->r, k, "r%d/restarts", m->r->round + 1);
	if (status == 0 &&
	    rdzv_parse_int(rep->value, rep->len, 0, INT32_MAX, &m->restarts,
			   why, sizeof(why)) != 0) {
		log_msg(LOG_WARN, "crun",
			"malformed rendezvous record '%s': %s: no "
			"restart",
			k, why);
		m->restarts = INT64_MAX;
	} else if (status == 0) {
		m->r->restarts = m->restarts;
	} else {
		m->restarts = INT64_MAX; /* unknown: do not restart */
	}
	rdzv__key(m->r, k, "r%d/finished", m->r->round);
	if (m->r->state == R_DONE ||
	    m->r->ops->add(m->r->kv, k, 0, on_may_finished, m))
		on_may_finished(CRUN_ECLOSED, NULL, m);
}

int rdzv__may_restart(struct crun_rdzv *r, int kind,
		      void (*cb)(struct crun_rdzv *r, int ok, void *data),
		      void *data)
{
	struct may *m = calloc(1, sizeof(*m));
	char k[KEYMAX];
	int rc;

	if (m == NULL)
		return UV_ENOMEM;
	m->r = r;
	m->kind = kind;
	m->cb = cb;
	m->data = data;
	if (kind == RDZV_END_LOST || kind == RDZV_END_FATAL) {
		/*
		 * Without the store there is nothing to ask; a fatal end
		 * (maybe a forged record nobody counted) never restarts.
		 */
		if (kind == RDZV_END_FATAL)
			rdzv__excl_over(r, kind, r->errmsg);
		free(m);
		cb(r, 0, data);
		return 0;
	}
	/*
	 * Written by whoever moved the round on, maybe this very node once its
	 * CAS reply is in: wait on the watch channel so the main channel stays
	 * free for that write.
	 */
	rdzv__key(r, k, "r%d/restarts", r->round + 1);
	r->end.unwatched = 1; /* the one watch channel moves on */
	rc = rdzv__watch1(r, k, 10000, on_may_restarts, m);
	if (rc)
		free(m);
	return rc;
}

static void on_all_left(int status, const struct crun_store_reply *rep,
			void *arg)
{
	struct crun_rdzv *r = arg;

	(void)rep;
	if (status == CRUN_ECANCELED)
		return;
	/* The store host also waits (bounded) for the nodes left out. */
	if (status == 0 && r->o.exclude_after > 0 && r->o.is_store_host)
		return rdzv__excl_host_wait(r);
	rdzv__finish_done(r);
}

/* A node leaving waited close_timeout for the store to take note of it. */
static void on_leave_timeout(uv_timer_t *t)
{
	struct crun_rdzv *r = t->data;

	log_say("the rendezvous store did not answer within "
		"close_timeout (%g s): leaving without its acknowledgement",
		r->o.close_timeout);
	rdzv__finish_done(r);
}

/* A node that serves no store leaves: the store's answer, bounded. */
static void leave_bounded(struct crun_rdzv *r)
{
	if (!rdzv__serving(r))
		uv_timer_start(&r->deadline, on_leave_timeout,
			       (uint64_t)(r->o.close_timeout * 1000), 0);
}

/* The round ended: the others stop and leave; wait for that, bounded. */
static void host_wait_left(struct crun_rdzv *r)
{
	char k[KEYMAX];

	rdzv__key(r, k, "r%d/all_left", r->round);
	uv_timer_start(&r->deadline, rdzv__on_finish_timeout,
		       (uint64_t)(r->o.close_timeout * 1000), 0);
	if (rdzv__watch1(r, k, -1, on_all_left, r))
		rdzv__finish_done(r);
}

void rdzv__on_finished_count(int status, const struct crun_store_reply *rep,
			     void *arg)
{
	struct crun_rdzv *r = arg;
	char k[KEYMAX];

	if (r->state != R_FINISHING)
		return;
	if (status)
		return rdzv__finish_done(r);
	if (rdzv_reply_int(rep) >= r->gworld && !r->end.marked) {
		/*
		 * The last one out: release the store host. Once: the host
		 * counts again as each finished node's connection closes.
		 */
		r->end.marked = 1;
		rdzv__excl_over(r, RDZV_END_SUCCESS, "all nodes finished");
		rdzv__key(r, k, "r%d/all_left", r->round);
		r->ops->set(r->kv, k, "1", 1, NULL, NULL);
		rdzv__key(r, k, "r%d/end", r->round);
		r->ops->compare_set(r->kv, k, "", 0, "S all nodes finished", 20,
				    NULL, NULL);
		mark_ended(r, r->gworld, "1", 1); /* "end" may hold another */
	}
	if (!rdzv__serving(r))
		return rdzv__finish_done(r);
	/*
	 * A store host serves until every node has left: while the round
	 * runs it keeps its heartbeat and its watch on "end" (which the last
	 * node out sets); once the round ended, it waits for the rest to leave.
	 */
	if (r->end.seen)
		host_wait_left(r);
}

static void on_left_count(int status, const struct crun_store_reply *rep,
			  void *arg);

/* Finishing or departing: the round is over for this node. */
/* The round ended while we finish: the store host waits for the others. */
static void finishing_round_ended(struct crun_rdzv *r, int kind)
{
	uv_timer_stop(&r->hb.timer);
	if (kind == RDZV_END_SUCCESS && r->o.exclude_after > 0 &&
	    r->o.is_store_host)
		rdzv__excl_host_wait(r); /* the nodes left out read "over" */
	else if (kind == RDZV_END_SUCCESS || kind == RDZV_END_LOST)
		rdzv__finish_done(r);
	else
		host_wait_left(r);
}

static void finishing_begin(struct crun_rdzv *r,
			    void (*cb)(struct crun_rdzv *r, void *data),
			    void *data)
{
	uv_timer_stop(&r->last_call);
	r->state = R_FINISHING;
	r->round = r->res.round;
	r->end.finish_cb = cb;
	r->end.finish_data = data;
	r->end.finishing_ended = finishing_round_ended;
	leave_bounded(r);
}

int rdzv__serving(const struct crun_rdzv *r)
{
	return r->o.is_store_host ||
	       (r->grank == 0 && r->gworld > 1 && !r->res.master_by_worker);
}

int rdzv__finish(struct crun_rdzv *r,
		 void (*cb)(struct crun_rdzv *r, void *data), void *data)
{
	char k1[KEYMAX], k2[KEYMAX];

	if (!rdzv__serving(r) || r->end.seen)
		uv_timer_stop(&r->hb.timer);
	finishing_begin(r, cb, data);
	/*
	 * A store host waits for the round's end before it stops serving;
	 * if asking whether to restart took its watch on end/<g>, watch it
	 * again (it is set already after a failure: the watch fires at once).
	 */
	if (rdzv__serving(r) && !r->end.seen && r->end.unwatched) {
		r->end.unwatched = 0;
		rdzv__key(r, k1, "r%d/end/%d", r->round, r->grank);
		if (rdzv__watch1(r, k1, -1, rdzv__on_node_end,
				 rdzv__op_new(r, 0)))
			return CRUN_ECLOSED;
	}
	rdzv__key(r, k1, "r%d/done/%d", r->round, r->grank);
	rdzv__key(r, k2, "r%d/finished", r->round);
	if (r->ops->set(r->kv, k1, "1", 1, NULL, NULL))
		return CRUN_ECLOSED;
	rdzv__key(r, k1, "r%d/left", r->round);
	if (r->ops->add(r->kv, k1, 1, on_left_count, r))
		return CRUN_ECLOSED;
	return r->ops->add(r->kv, k2, 1, rdzv__on_finished_count, r);
}

/*
 * Nodes that finished or departed, counted together: the last one out
 * releases the store host (which waits on "all_left").
 */
static void on_left_count(int status, const struct crun_store_reply *rep,
			  void *arg)
{
	struct crun_rdzv *r = arg;
	char k[KEYMAX];

	if (status || r->state != R_FINISHING ||
	    rdzv_reply_int(rep) < r->gworld)
		return;
	rdzv__key(r, k, "r%d/all_left", r->round);
	r->ops->set(r->kv, k, "1", 1, NULL, NULL);
}

static void on_departed(int status, const struct crun_store_reply *rep,
			void *arg)
{
	on_left_count(status, rep, arg);
	if (status != CRUN_ECANCELED)
		rdzv__finish_done(arg);
}

static int depart_now(struct crun_rdzv *r)
{
	char k[KEYMAX];

	/* A round trip behind our "end" writes; not counted as finished. */
	rdzv__key(r, k, "r%d/left", r->round);
	return r->ops->add(r->kv, k, 1, on_departed, r);
}

int rdzv__depart(struct crun_rdzv *r,
		 void (*cb)(struct crun_rdzv *r, void *data), void *data)
{
	uv_timer_stop(&r->hb.timer);
	finishing_begin(r, cb, data);
	/*
	 * If our end was recorded, the others wait for the next round's
	 * restart count, which we write once the store answers our CAS: leave
	 * only after that (or they wait 10 s for it).
	 */
	if (r->end.chain > 0) {
		r->end.depart_wait = 1;
		return 0;
	}
	return depart_now(r);
}

/* Our end's CAS and what follows from it are sent: a departure may go on. */
static void end_chain_done(struct crun_rdzv *r)
{
	if (r->end.chain > 0)
		r->end.chain--;
	if (r->end.chain > 0 || !r->end.depart_wait || r->state != R_FINISHING)
		return;
	r->end.depart_wait = 0;
	if (depart_now(r))
		rdzv__finish_done(r);
}

/* --- the end as the agent gets it (rdzv_end.h) ------------------------ */

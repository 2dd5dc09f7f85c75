/*
 * A running round: every keep_alive_interval each node bumps its own
 * counter r<R>/hb/<g> and reads its successor's, and it watches its own
 * end/<g> mark, which whoever ends the round sets.
 *
 * Failure modes: the successor's counter stops (it is declared dead,
 * unless it left a done/<g> mark: then the next one is watched); our own
 * requests go unanswered (the store is lost); the store host sees a
 * node's connection close while it waits on end/<g> (that node vanished:
 * the round ends at once, not after missed heartbeats).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crun/err.h"
#include "rdzv_kit.h"

static void on_hb_tick(uv_timer_t *t);

static void on_dead_host(int status, const struct crun_store_reply *rep,
			 void *arg)
{
	struct rdzv__op *o = arg;
	struct crun_rdzv *r = o->r;
	char host[256] = "?", why[400];

	if (r->state == R_RUNNING || r->state == R_FINISHING) {
		if (status == 0 && rep->nvalues == 1)
			rdzv__reply_str(rep, 0, host, sizeof(host));
		snprintf(why, sizeof(why), "%s (group rank %d) %s", host,
			 o->arg, (const char *)o->data);
		if (o->round == r->round)
			rdzv__end_round(r, RDZV_END_DEAD, why);
	}
	free(o);
}

/* Node g is gone: end the round, naming its host (read from the store). */
static void declare_dead(struct crun_rdzv *r, int g, const char *how)
{
	char k[KEYMAX];
	const char *kp[1] = {k};
	struct rdzv__op *o = rdzv__op_new(r, g);

	o->data = (void *)how; /* a string literal */
	rdzv__key(r, k, "r%d/host/%d", r->round, g);
	if (r->ops->multi_get(r->kv, kp, 1, 2000, on_dead_host, o))
		free(o);
}

/* Node g's connection was lost: unless it finished, it is gone. */
static void on_lost_done(int status, const struct crun_store_reply *rep,
			 void *arg)
{
	struct rdzv__op *o = arg;
	struct crun_rdzv *r = o->r;
	int g = o->arg;
	const char *how = o->data;

	if (rdzv__op_take(o, NULL, NULL) == NULL ||
	    (r->state != R_RUNNING && r->state != R_FINISHING))
		return;
	if (status)
		return rdzv__store_error(r, status);
	if (rdzv__reply_is(rep, PEEK))
		declare_dead(r, g, how);
}

void rdzv__node_lost(struct crun_rdzv *r, int g, const char *how)
{
	char k[KEYMAX];
	struct rdzv__op *o;

	if ((r->state != R_RUNNING && r->state != R_FINISHING) || g < 0 ||
	    g >= r->gworld || g == r->grank)
		return;
	o = rdzv__op_new(r, g);
	o->data = (void *)how;
	rdzv__key(r, k, "r%d/done/%d", r->round, g);
	if (r->ops->compare_set(r->kv, k, PEEK, strlen(PEEK), "", 0,
				on_lost_done, o))
		rdzv__store_error(r, CRUN_ECLOSED);
}

/* The watched successor stalled: did it finish (then watch the next one)? */
static void on_succ_done(int status, const struct crun_store_reply *rep,
			 void *arg)
{
	struct crun_rdzv *r = rdzv__op_take(arg, NULL, NULL);

	if (r == NULL || (r->state != R_RUNNING && r->state != R_FINISHING))
		return;
	if (status)
		return rdzv__store_error(r, status);
	if (!rdzv__reply_is(rep, PEEK)) {
		/* It left after success: watch the node after it instead. */
		r->hb.succ = (r->hb.succ + 1) % r->gworld;
		r->hb.succ_stall = 0;
		r->hb.succ_last = -1;
		return;
	}
	declare_dead(r, r->hb.succ, "stopped answering");
}

static void on_hb_succ(int status, const struct crun_store_reply *rep,
		       void *arg)
{
	struct crun_rdzv *r = rdzv__op_take(arg, NULL, NULL);
	char k[KEYMAX];
	int64_t v;

	if (r == NULL || (r->state != R_RUNNING && r->state != R_FINISHING))
		return;
	if (status)
		return rdzv__store_error(r, status);
	r->hb.wait = HB_ANSWERED;
	r->hb.silence = 0;
	r->hb.last_reply = uv_now(r->loop);
	v = rdzv_reply_int(rep);
	if (v != r->hb.succ_last) {
		r->hb.succ_stall = 0;
		r->hb.succ_last = v;
		return;
	}
	if (++r->hb.succ_stall < r->o.keep_alive_max_attempt)
		return;
	r->hb.succ_stall = 0;
	rdzv__key(r, k, "r%d/done/%d", r->round, r->hb.succ);
	if (r->ops->compare_set(r->kv, k, PEEK, strlen(PEEK), "", 0,
				on_succ_done, rdzv__op_new(r, 0)))
		rdzv__store_error(r, CRUN_ECLOSED);
}

/*
 * Every keep_alive_interval: bump our counter and read the successor's. A
 * node that finished leaves a done/<g> mark, so its silence is not a death.
 */
static void on_hb_tick(uv_timer_t *t)
{
	struct crun_rdzv *r = t->data;
	uint64_t limit = r->o.heartbeat_timeout > 0
			     ? (uint64_t)(r->o.heartbeat_timeout * 1000)
			     : r->hb.ms * (uint64_t)r->o.keep_alive_max_attempt;
	uint64_t now = uv_now(r->loop), step = now - r->hb.tick;
	char k1[KEYMAX], k2[KEYMAX];

	if (r->state != R_RUNNING && r->state != R_FINISHING)
		return;
	/*
	 * The time since the store's last reply is counted in our own ticks:
	 * a tick that comes late (this process got no CPU, or was stopped)
	 * adds one interval, not the time we were not running to see one.
	 */
	r->hb.tick = now;
	r->hb.silence += step < r->hb.ms ? step : r->hb.ms;
	if (r->hb.wait != HB_ANSWERED && r->hb.silence > limit) {
		char why[256];

		/*
		 * Timers run before the loop reads its sockets: the reply may
		 * be waiting unread. Judge once more after one poll of them.
		 */
		if (r->hb.wait != HB_RECHECK) {
			r->hb.wait = HB_RECHECK;
			uv_timer_start(&r->hb.timer, on_hb_tick, 1, r->hb.ms);
			return;
		}

		snprintf(why, sizeof(why),
			 "no reply from the rendezvous store for %.1f s",
			 (double)(uv_now(r->loop) - r->hb.last_reply) / 1000);
		rdzv__round_ended(r, RDZV_END_LOST, why);
		return;
	}
	if (r->hb.wait == HB_RECHECK)
		r->hb.wait = HB_ASKED;
	rdzv__key(r, k1, "r%d/hb/%d", r->round, r->grank);
	if (r->ops->add(r->kv, k1, 1, NULL, NULL))
		return rdzv__store_error(r, CRUN_ECLOSED);
	rdzv__stacks_poll(r);
	if (r->hb.succ == r->grank)
		return; /* everyone else finished */
	rdzv__key(r, k2, "r%d/hb/%d", r->round, r->hb.succ);
	r->hb.wait = HB_ASKED;
	if (r->ops->add(r->kv, k2, 0, on_hb_succ, rdzv__op_new(r, 0)))
		rdzv__store_error(r, CRUN_ECLOSED);
}

void rdzv__start_running(struct crun_rdzv *r)
{
	char k[KEYMAX];
	double s = r->o.keep_alive_interval;
	uint64_t ms;

	/* Keep the host's heartbeat load to heartbeat_rate at any size. */
	if (r->o.heartbeat_rate > 0 && r->gworld / r->o.heartbeat_rate > s)
		s = r->gworld / r->o.heartbeat_rate;
	ms = (uint64_t)(s * 1000);
	r->hb.ms = ms ? ms : 1;
	/* A key of our own, so the store host can tell when we vanish. */
	rdzv__key(r, k, "r%d/end/%d", r->round, r->grank);
	if (rdzv__watch1(r, k, -1, rdzv__on_node_end, rdzv__op_new(r, 0)))
		return rdzv__store_error(r, CRUN_ECLOSED);
	uv_timer_start(&r->hb.timer, on_hb_tick, ms ? ms : 1, ms ? ms : 1);
}

/*
 * Nodes that vanish, as the store host sees them: a client's connection
 * closed while it waited on its end/<g> mark.
 */
static void on_gone_count(int status, const struct crun_store_reply *rep,
			  void *arg);

/*
 * Node g's connection closed: "end" and its "done/<g>" as they were then,
 * read together.
 */
static void on_vanished(int status, const struct crun_store_reply *rep,
			void *arg)
{
	int g;
	struct crun_rdzv *r = rdzv__op_take(arg, NULL, &g);
	char k[KEYMAX];

	if (r == NULL || status || rep->nvalues != 2 ||
	    (r->state != R_RUNNING && r->state != R_FINISHING))
		return;
	if (rep->values[0].len > 0)
		return; /* the round already ended: leaving is expected */
	if (rep->values[1].len == 0) {
		/*
		 * It never finished, and will never leave by itself. Count
		 * it as left, so that the store host does not wait
		 * close_timeout for it at the end.
		 */
		rdzv__key(r, k, "r%d/left", r->round);
		r->ops->add(r->kv, k, 1, on_gone_count, rdzv__op_new(r, 0));
		return declare_dead(r, g, "disconnected");
	}
	/*
	 * It finished and left. If it was the last one out and died before
	 * its "all_left" and end marks, nobody else would write them: a store
	 * host that finished first would wait for them forever. Count again.
	 */
	if (r->state == R_FINISHING && !r->end.seen && !r->end.marked) {
		rdzv__key(r, k, "r%d/finished", r->round);
		r->ops->add(r->kv, k, 0, rdzv__on_finished_count, r);
	}
}

/* A vanished node counted as left: the last one out releases the host. */
static void on_gone_count(int status, const struct crun_store_reply *rep,
			  void *arg)
{
	struct crun_rdzv *r = rdzv__op_take(arg, NULL, NULL);
	char k[KEYMAX];

	if (r == NULL || status || rdzv_reply_int(rep) < r->gworld)
		return;
	rdzv__key(r, k, "r%d/all_left", r->round);
	r->ops->set(r->kv, k, "1", 1, NULL, NULL);
}

/*
 * The store host saw a client vanish while it waited on "r<R>/end/<g>":
 * node g's agent died or its connection broke. Unless the round already
 * ended or g finished, that node is gone: end the round now rather than
 * after missed heartbeats.
 */
void rdzv__on_vanish(void *arg, const char *k, size_t klen)
{
	struct crun_rdzv *r = arg;
	char buf[KEYMAX], tail[16];
	size_t plen = strlen(r->prefix);
	int round, g;

	if (klen >= sizeof(buf) || klen <= plen ||
	    memcmp(k, r->prefix, plen) != 0)
		return;
	memcpy(buf, k + plen, klen - plen);
	buf[klen - plen] = '\0';
	if (strncmp(buf, "over/", 5) == 0 && r->o.exclude_after > 0) {
		/* A node left out went away: do not wait for it at the end. */
		char ack[KEYMAX];

		rdzv__key(r, ack, "over_seen/%s", buf + 5);
		r->ops->set(r->kv, ack, "gone", 4, NULL, NULL);
		return;
	}
	if (sscanf(buf, "r%d/end/%d%15s", &round, &g, tail) != 2)
		return;
	if (round != r->round || g == r->grank || g < 0 || g >= r->gworld ||
	    (r->state != R_RUNNING && r->state != R_FINISHING))
		return;
	{
		char k2[KEYMAX];
		const char *kp[2] = {buf, k2};

		rdzv__key(r, buf, "r%d/end", r->round);
		rdzv__key(r, k2, "r%d/done/%d", r->round, g);
		r->ops->peek(r->kv, kp, 2, on_vanished, rdzv__op_new(r, g));
	}
}

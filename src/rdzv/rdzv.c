/*
 * The rendezvous algorithm (see rdzv.h for the keys and the protocol).
 *
 * Happy path of one round: job id and config agreed -> round number read ->
 * ADD join gives index i -> descriptor written -> (i >= MIN) last call ->
 * CAS closed 0 -> N -> the closer writes every assignment -> each node reads
 * its own -> group rank 0 starts the workers' store and publishes it ->
 * heartbeats and a watch on "end" until the round ends.
 *
 * Failure modes: a store error or a lost host (every pending reply fails:
 * the round callback or on_end reports it); join_timeout (the deadline timer
 * reports who joined); a node dying while joining (the closer's MULTI_GET
 * of descriptors times out and aborts the round, which everyone retries);
 * heartbeat stalls (the successor's counter stops: "D"; our own replies stop:
 * "L"). Replies that arrive for an old round are recognised by the round
 * number carried in each request and dropped.
 *
 * This file is the owner: the life cycle (rdzv_new, rdzv_free) and the
 * interface of rdzv.h, each call handed to the step it starts. The steps
 * are files of their own, in the order of a round: rdzv_join.c,
 * rdzv_close.c, rdzv_run.c, rdzv_end.c and rdzv_exclude.c, over the kit
 * they all use (rdzv_kit.c); rdzv_kit.h is what they share and says
 * who may call whom.
 */
#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "crun/err.h"
#include "crun/log.h"
#include "crun/rdzv.h"
#include "rdzv_kit.h"

/*
 * The id of this agent in the exclusion records: random, so that several
 * agents on one machine (one host name, one address) are told apart.
 */
static void rdzv_node_id(char *id, size_t len)
{
	unsigned char b[RDZV_MAX_ID / 2];
	size_t n = 0;

	if (getrandom(b, sizeof(b), GRND_NONBLOCK) != (ssize_t)sizeof(b)) {
		uint64_t v = (uint64_t)getpid() << 32 ^
			     (uint64_t)rdzv__wall_ms() ^
			     (uint64_t)(uintptr_t)id;

		memcpy(b, &v, sizeof(b) < sizeof(v) ? sizeof(b) : sizeof(v));
	}
	for (size_t i = 0; i < sizeof(b) && n + 2 < len; i++)
		n += (size_t)snprintf(id + n, len - n, "%02x", b[i]);
}

int rdzv_new(uv_loop_t *loop, const struct rdzv_opts *o,
	     const struct rdzv_kv_ops *ops, void *kv, rdzv_end_cb on_end,
	     struct crun_rdzv **out)
{
	struct crun_rdzv *r = calloc(1, sizeof(*r));

	/* An id is never cut: two jobs would share keys (cfg refuses ids
	 * longer than RDZV_ID_MAX, the store's job record longer than
	 * run_id). */
	assert(o->run_id == NULL || strlen(o->run_id) < sizeof(r->run_id));
	if (r == NULL)
		return UV_ENOMEM;
	r->loop = loop;
	r->o = *o;
	r->ops = ops;
	r->kv = kv;
	r->on_end = on_end;
	r->round = -1;
	r->aborted = -1;
	r->ended = -1;
	snprintf(r->run_id, sizeof(r->run_id), "%s",
		 o->run_id ? o->run_id : "");
	r->descr.held_round = -1;
	snprintf(r->excl.addr, sizeof(r->excl.addr), "%s",
		 o->addr ? o->addr : "");
	if (o->node_id)
		snprintf(r->excl.id, sizeof(r->excl.id), "%s", o->node_id);
	else
		rdzv_node_id(r->excl.id, sizeof(r->excl.id));
	rdzv__descr_build(r);
	/*
	 * Every node must agree on it, exclusion settings included; nodes of
	 * another crun protocol disagree here, at the first request.
	 */
	rdzv_format_config(r->config, sizeof(r->config), o->min_nodes,
			   o->max_nodes,
			   o->static_rank >= 0 ? "static" : "c10d",
			   o->exclude_after, o->exclude_for);
	uv_timer_init(loop, &r->last_call);
	uv_timer_init(loop, &r->hb.timer);
	uv_timer_init(loop, &r->deadline);
	uv_timer_init(loop, &r->descr.fp_timer);
	r->last_call.data = r->hb.timer.data = r->deadline.data = r;
	r->descr.fp_timer.data = r;
	if (o->env_check != CRUN_ENV_CHECK_OFF && o->fingerprint_wait > 0) {
		r->descr.fp_wait = 1;
		uv_timer_start(&r->descr.fp_timer, rdzv__on_fp_timeout,
			       (uint64_t)(o->fingerprint_wait * 1000), 0);
	}
	if (ops->on_vanish)
		ops->on_vanish(kv, rdzv__on_vanish, r);
	*out = r;
	return 0;
}

const char *rdzv_peers(const struct crun_rdzv *r)
{
	return r->peers;
}

int rdzv_job_status(const struct crun_rdzv *r)
{
	return r->spare.status;
}

const char *rdzv_errmsg(const struct crun_rdzv *r)
{
	return r->errmsg;
}

static void rdzv_on_timer_closed(uv_handle_t *h)
{
	struct crun_rdzv *r = h->data;

	if (--r->timers == 0) {
		free(r->peers);
		free(r);
	}
}

void rdzv_free(struct crun_rdzv *r)
{
	if (r->ops->on_vanish)
		r->ops->on_vanish(r->kv, NULL, NULL);
	r->state = R_DONE;
	r->timers = 4;
	uv_close((uv_handle_t *)&r->descr.fp_timer, rdzv_on_timer_closed);
	uv_close((uv_handle_t *)&r->last_call, rdzv_on_timer_closed);
	uv_close((uv_handle_t *)&r->hb.timer, rdzv_on_timer_closed);
	uv_close((uv_handle_t *)&r->deadline, rdzv_on_timer_closed);
}

int rdzv_excluded(const struct crun_rdzv *r, struct rdzv_exclusion *x, int max)
{
	for (int i = 0; i < r->excl.n && i < max; i++)
		x[i] = r->excl.list[i];
	return r->excl.n;
}

int rdzv_round(const struct crun_rdzv *r)
{
	return r->round;
}

int rdzv_restarts(const struct crun_rdzv *r)
{
	return (int)r->restarts;
}

int rdzv_env_refused(const struct crun_rdzv *r)
{
	return r->env_refused;
}

int rdzv_serving(const struct crun_rdzv *r)
{
	return rdzv__serving(r);
}

int rdzv_next(struct crun_rdzv *r, rdzv_round_cb cb, void *data)
{
	return rdzv__next(r, cb, data);
}

void rdzv_set_fingerprint(struct crun_rdzv *r, const char *fp)
{
	rdzv__set_fingerprint(r, fp);
}

void rdzv_node_lost(struct crun_rdzv *r, int g, const char *how)
{
	rdzv__node_lost(r, g, how);
}

int rdzv_end_round(struct crun_rdzv *r, int kind, const char *why)
{
	return rdzv__end_round(r, kind, why);
}

int rdzv_may_restart(struct crun_rdzv *r, int kind,
		     void (*cb)(struct crun_rdzv *r, int ok, void *data),
		     void *data)
{
	return rdzv__may_restart(r, kind, cb, data);
}

int rdzv_finish(struct crun_rdzv *r,
		void (*cb)(struct crun_rdzv *r, void *data), void *data)
{
	return rdzv__finish(r, cb, data);
}

int rdzv_depart(struct crun_rdzv *r,
		void (*cb)(struct crun_rdzv *r, void *data), void *data)
{
	return rdzv__depart(r, cb, data);
}

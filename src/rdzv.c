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
 * The steps are in files of their own, in the order of a round:
 * rdzv_join.c, rdzv_close.c, rdzv_run.c, rdzv_end.c and rdzv_exclude.c
 * (rdzv_internal.h is what they share). This file holds the life cycle
 * (rdzv_new, rdzv_free) and the helpers every step uses: keys, requests
 * and their replies, and failing or ending a round.
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
#include "rdzv_internal.h"

/* Build "crun/<run_id>/<fmt…>" into buf (KEYMAX bytes). */
void rdzv__key(const struct crun_rdzv *r, char *buf, const char *fmt, ...)
{
	va_list ap;
	int n = snprintf(buf, KEYMAX, "%s", r->prefix);

	va_start(ap, fmt);
	vsnprintf(buf + n, KEYMAX - (size_t)n, fmt, ap);
	va_end(ap);
}

/* Watch one key (see rdzv_kv_ops.watch). */
int rdzv__watch1(struct crun_rdzv *r, const char *k, int timeout_ms,
		 rdzv_kv_cb cb, void *arg)
{
	return r->ops->watch(r->kv, &k, 1, timeout_ms, cb, arg);
}

struct rdzv__op *rdzv__op_new(struct crun_rdzv *r, int arg)
{
	struct rdzv__op *o = calloc(1, sizeof(*o));

	if (o == NULL)
		abort();
	o->r = r;
	o->round = r->round;
	o->arg = arg;
	return o;
}

/*
 * Take ownership of a reply's op: returns the rendezvous if the reply is
 * still wanted (same round, not closed), else NULL. Frees the op.
 */
struct crun_rdzv *rdzv__op_take(void *arg, int *round, int *a)
{
	struct rdzv__op *o = arg;
	struct crun_rdzv *r = o->r;

	if (round)
		*round = o->round;
	if (a)
		*a = o->arg;
	if (r->state == R_DONE || o->round != r->round) {
		free(o);
		return NULL;
	}
	free(o);
	return r;
}

/*
 * The reply to a read of n keys, if the round still wants it: else NULL,
 * a failed request reported (n values is the client's promise: fewer is a
 * protocol error).
 */
struct crun_rdzv *rdzv__take_values(void *arg, int status,
				    const struct crun_store_reply *rep,
				    size_t n)
{
	struct crun_rdzv *r = rdzv__op_take(arg, NULL, NULL);

	if (r == NULL)
		return NULL;
	if (status || rep->nvalues != n) {
		rdzv__store_error(r, status ? status : CRUN_EPROTO);
		return NULL;
	}
	return r;
}

int64_t rdzv_reply_int(const struct crun_store_reply *rep)
{
	char buf[32];
	size_t n;

	if (rep->value == NULL)
		return rep->num;
	n = rep->len < sizeof(buf) - 1 ? rep->len : sizeof(buf) - 1;
	memcpy(buf, rep->value, n);
	buf[n] = '\0';
	return strtoll(buf, NULL, 10);
}

/*
 * Copy value i of a reply into buf as a C string: values are (ptr, len)
 * slices of the receive buffer, not NUL-terminated.
 */
const char *rdzv__reply_str(const struct crun_store_reply *rep, size_t i,
			    char *buf, size_t len)
{
	size_t n = rep->values[i].len < len - 1 ? rep->values[i].len : len - 1;

	memcpy(buf, rep->values[i].base, n);
	buf[n] = '\0';
	return buf;
}

int rdzv__reply_is(const struct crun_store_reply *rep, const char *s)
{
	return rep->len == strlen(s) && memcmp(rep->value, s, rep->len) == 0;
}

void rdzv__stop_timers(struct crun_rdzv *r)
{
	uv_timer_stop(&r->last_call);
	uv_timer_stop(&r->hb.timer);
	uv_timer_stop(&r->deadline);
}

/* The round could not be formed: report once through the round callback. */
void rdzv__round_fail(struct crun_rdzv *r, int status, const char *fmt, ...)
{
	rdzv_round_cb cb = r->cb;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(r->errmsg, sizeof(r->errmsg), fmt, ap);
	va_end(ap);
	rdzv__stop_timers(r);
	r->state = R_IDLE;
	r->round = -1; /* drop late replies */
	r->cb = NULL;
	if (cb)
		cb(r, status, NULL, r->cb_data);
}

/*
 * A record read from the store does not parse or is out of range: anyone
 * who reaches the store can write any key. End the round with one message
 * naming the key and, where known, the host that wrote it; never go on
 * with the value.
 */
void rdzv__bad_record(struct crun_rdzv *r, const char *k, const char *by,
		      const char *why)
{
	char msg[700];

	snprintf(msg, sizeof(msg), "malformed rendezvous record '%s'%s%s: %s",
		 k, by ? " written by " : "", by ? by : "", why);
	if (r->state == R_RUNNING || r->state == R_FINISHING) {
		rdzv__round_ended(r, RDZV_END_FATAL, msg);
		/* Finishing, rdzv__round_ended does not report it. */
		if (r->state == R_FINISHING)
			log_msg(LOG_ERROR, "crun", "%s", msg);
	} else {
		rdzv__round_fail(r, CRUN_EPROTO, "%s", msg);
	}
}

/* A counter or number record in [lo, hi]: 0, or the round ended. */
int rdzv__record_int(struct crun_rdzv *r, const struct crun_store_reply *rep,
		     const char *k, int64_t lo, int64_t hi, int64_t *out)
{
	char why[200];

	if (rep->value == NULL) { /* an ADD's reply: the store's own number */
		*out = rep->num;
		if (rep->num >= lo && rep->num <= hi)
			return 0;
		snprintf(why, sizeof(why), "%lld is not in %lld..%lld",
			 (long long)rep->num, (long long)lo, (long long)hi);
		rdzv__bad_record(r, k, NULL, why);
		return CRUN_EPROTO;
	}
	if (rdzv_parse_int(rep->value, rep->len, lo, hi, out, why,
			   sizeof(why)) == 0)
		return 0;
	rdzv__bad_record(r, k, NULL, why);
	return CRUN_EPROTO;
}

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
		rdzv__host_wait_left(r);
}

/*
 * The running round ended (for any reason): tell the agent once, through
 * the one call of its on_end.
 */
void rdzv__round_ended(struct crun_rdzv *r, int kind, const char *why)
{
	struct rdzv_end e;

	r->end.seen = 1;
	if (r->state == R_FINISHING)
		return finishing_round_ended(r, kind);
	if (r->state != R_RUNNING)
		return;
	r->state = R_ENDED;
	rdzv__stop_timers(r);
	snprintf(r->errmsg, sizeof(r->errmsg), "%s", why);
	rdzv_end_describe(kind, why, &e);
	r->on_end(r, &e, r->o.data);
}

/* A store request failed: the host is gone or the reply made no sense. */
void rdzv__store_error(struct crun_rdzv *r, int status)
{
	char why[256];

	snprintf(why, sizeof(why), "lost the rendezvous store: %s",
		 crun_strerror(status));
	if (r->state == R_RUNNING)
		rdzv__round_ended(r, RDZV_END_LOST, why);
	else if (r->state == R_WAITING && r->spare.status > 0)
		/* A spare after the round ended: with its store gone, the
		 * job is over, and ended as that end said. */
		rdzv__round_fail(r, CRUN_ERDZV_CLOSED,
				 "the job stopped (%s) while %s waited as a "
				 "spare; then %s",
				 r->spare.why, r->o.host, why);
	else if (r->state == R_JOINING || r->state == R_WAITING)
		rdzv__round_fail(r, status, "%s", why);
	else if (r->state == R_FINISHING && r->end.finish_cb) {
		r->state = R_ENDED;
		r->end.finish_cb(r, r->end.finish_data);
	}
}

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

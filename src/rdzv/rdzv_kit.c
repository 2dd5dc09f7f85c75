/*
 * The kit every step of the rendezvous uses (rdzv_kit.h): keys,
 * requests and their replies, failing or ending a round, and finishing.
 * It calls no step: where a step decides what comes next, the kit reports
 * through the callbacks the steps leave in struct crun_rdzv (the finish
 * callback, the round and end callbacks, the finishing end).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "crun/cfg.h"
#include "crun/err.h"
#include "crun/log.h"
#include "crun/rdzv_records.h"
#include "rdzv_kit.h"

/* An end names a host as the records carry it. */
_Static_assert(RDZV_END_HOST_MAX == RDZV_MAX_FIELD,
	       "rdzv_end.h's host is a record field");

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

/*
 * The running round ended (for any reason): tell the agent once, through
 * the one call of its on_end.
 */
void rdzv__round_ended(struct crun_rdzv *r, int kind, const char *why)
{
	struct rdzv_end e;

	r->end.seen = 1;
	if (r->state == R_FINISHING)
		return r->end.finishing_ended(r, kind);
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

/* Finishing is over: tell the agent once. */
void rdzv__finish_done(struct crun_rdzv *r)
{
	void (*cb)(struct crun_rdzv *, void *) = r->end.finish_cb;

	if (r->state != R_FINISHING)
		return;
	r->state = R_ENDED;
	rdzv__stop_timers(r);
	r->end.finish_cb = NULL;
	if (cb)
		cb(r, r->end.finish_data);
}

void rdzv__on_finish_timeout(uv_timer_t *t)
{
	rdzv__finish_done(t->data);
}

/* The signal named at the end of why ("... (SIGTERM)"), or 0. */
static int end_signal(const char *why)
{
	const char *open = strrchr(why, '(');
	char name[16];
	int sig, n;

	if (open == NULL || sscanf(open, "(%15[A-Z0-9])", name) != 1 ||
	    cfg_parse_signals(name, &sig, 1, &n) != 0)
		return 0;
	return sig;
}

/* The word before " left (", after "the store host ", before " exited". */
static void end_host(int kind, const char *why, char *host, size_t len)
{
	const char *p = why, *q = NULL;

	*host = '\0';
	if (kind == 'J') {
		q = why + strlen(why);
	} else if (strncmp(why, "the store host ", 15) == 0) {
		p = why + 15;
		q = strstr(p, " was stopped");
	} else if ((q = strstr(why, " left (")) == NULL) {
		p = strstr(why, ") on ");
		p = p ? p + 5 : NULL;
		q = p ? strstr(p, " exited") : NULL;
	}
	if (p && q && q > p && strcspn(p, " ") >= (size_t)(q - p))
		snprintf(host, len, "%.*s", (int)(q - p), p);
}

void rdzv_end_describe(int kind, const char *why, struct rdzv_end *e)
{
	char *rest = NULL;
	long st = 0;

	memset(e, 0, sizeof(*e));
	e->kind = kind;
	e->why = why;
	e->detail = why;
	if (kind == 'F') { /* "<status> rank ...": the status first */
		st = strtol(why, &rest, 10);
		e->status = st > 0 && st < 256 ? (int)st : 0;
		if (rest != why && *rest == ' ')
			e->detail = rest + 1;
	}
	e->signal = end_signal(why);
	end_host(kind, why, e->host, sizeof(e->host));
}

/* Wall-clock time in milliseconds: "until" is in epoch seconds. */
int64_t rdzv__wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

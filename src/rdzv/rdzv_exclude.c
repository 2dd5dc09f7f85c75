/*
 * Leaving out a failing node (exclude_after > 0; see rdzv.h). The node
 * whose failure ended round R appends itself to the history "fails"; once
 * the last exclude_after failure-ended rounds all failed first on it, it
 * adds itself to "excluded" until exclude_for from now, and the next round
 * expects one node fewer. Before joining, each node reads "excluded": a
 * node left out waits as a spare on its own copy of "over" until its
 * cooldown ends (it takes itself off the list and joins) or the job ends.
 *
 * Failure modes: the records are untrusted (a malformed or out-of-range
 * "excluded" is read as empty, a malformed history starts afresh); too
 * many nodes left out for the minimum (the node is not left out, or the
 * job cannot go on); a node left out vanishes (the store host does not
 * wait for it at the end).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "crun/cfg.h"
#include "crun/err.h"
#include "crun/log.h"
#include "rdzv_kit.h"

/* The history holds every failure the largest exclude_after counts. */
_Static_assert(CFG_MAX_EXCLUDE_AFTER == RDZV_MAX_FAILS,
	       "exclude_after's ceiling is not the failure history's size");

static int excl_is_self(const struct crun_rdzv *r, const char *host,
			const char *addr, const char *id)
{
	return strcmp(host, r->o.host) == 0 &&
	       strcmp(addr, r->excl.addr) == 0 && strcmp(id, r->excl.id) == 0;
}

/* Two entries name the same node. */
static int excl_same(const struct rdzv_exclusion *a,
		     const struct rdzv_exclusion *b)
{
	return strcmp(a->host, b->host) == 0 && strcmp(a->addr, b->addr) == 0 &&
	       strcmp(a->id, b->id) == 0;
}

/*
 * "HH:MM:SS UTC" of an epoch second, for messages; with the date when it
 * is not within the next day.
 */
static const char *excl_clock(int64_t t, char *buf, size_t len)
{
	time_t tt = (time_t)t;
	int64_t ahead = t - rdzv__wall_ms() / 1000;
	struct tm tm;

	if (gmtime_r(&tt, &tm) == NULL ||
	    strftime(buf, len,
		     ahead >= 0 && ahead < 86400 ? "%H:%M:%S UTC"
						 : "%Y-%m-%d %H:%M:%S UTC",
		     &tm) == 0)
		snprintf(buf, len, "%lld", (long long)t);
	return buf;
}

/*
 * Parse a read of "excluded" (PEEK: none). Untrusted: a malformed record
 * is named in one line and read as empty, so a forged value can neither
 * crash a node nor keep one out.
 */
static int excl_parse(struct crun_rdzv *r, const struct crun_store_reply *rep,
		      struct rdzv_exclusion *x)
{
	char why[200], k[KEYMAX];
	int n = 0;

	why[0] = '\0';
	if (rep->value == NULL || rdzv__reply_is(rep, PEEK))
		return 0;
	if (rdzv_parse_excluded(rep->value, rep->len, x, RDZV_MAX_EXCLUDED, &n,
				why, sizeof(why)) == 0)
		rdzv_check_excluded(x, n, rdzv__wall_ms() / 1000,
				    r->o.exclude_for, why, sizeof(why));
	if (*why) {
		rdzv__key(r, k, "excluded");
		log_msg(LOG_WARN, "crun",
			"malformed rendezvous record '%s': %s: read as "
			"no node left out",
			k, why);
		return 0;
	}
	return n;
}

static void excl_notify(struct crun_rdzv *r, const struct rdzv_exclusion *x,
			int readmitted, const char *why)
{
	if (r->o.on_exclusion)
		r->o.on_exclusion(r->o.data, x, readmitted,
				  excl_is_self(r, x->host, x->addr, x->id),
				  why);
}

/* A new reading of "excluded": tell about the changes, keep it. */
static void excl_update(struct crun_rdzv *r, const struct rdzv_exclusion *x,
			int n)
{
	char why[300];

	for (int i = 0; r->excl.known && i < n; i++) {
		int seen = 0;

		for (int j = 0; j < r->excl.n && !seen; j++)
			seen = excl_same(&x[i], &r->excl.list[j]);
		if (seen || excl_is_self(r, x[i].host, x[i].addr, x[i].id))
			continue;
		snprintf(why, sizeof(why),
			 "the last %d failure-ended rounds failed first on it",
			 x[i].fails);
		excl_notify(r, &x[i], 0, why);
	}
	for (int j = 0; r->excl.known && j < r->excl.n; j++) {
		int kept = 0;

		for (int i = 0; i < n && !kept; i++)
			kept = excl_same(&x[i], &r->excl.list[j]);
		if (!kept &&
		    !excl_is_self(r, r->excl.list[j].host, r->excl.list[j].addr,
				  r->excl.list[j].id))
			excl_notify(r, &r->excl.list[j], 1,
				    "its cooldown ended");
	}
	memcpy(r->excl.list, x, (size_t)n * sizeof(*x));
	r->excl.n = n;
	r->excl.known = 1;
}

static void excl_readmit(struct crun_rdzv *r);
static void excl_rejoin(struct crun_rdzv *r);
static void excl_check(struct crun_rdzv *r);
static void on_over_seen(int status, const struct crun_store_reply *rep,
			 void *arg);

/* The job ended, or the cooldown did, while this node sat out. */
static void on_sitout_over(int status, const struct crun_store_reply *rep,
			   void *arg)
{
	struct crun_rdzv *r = rdzv__op_take(arg, NULL, NULL);
	char text[512], why[200], k[KEYMAX];
	int kind;

	if (r == NULL || !r->excl.sitting_out || status == CRUN_ECANCELED)
		return;
	if (status == CRUN_ETIMEDOUT) {
		/* Read "excluded" again: readmitted once its time is up. */
		r->state = R_JOINING;
		return excl_check(r);
	}
	if (status)
		return rdzv__store_error(r, status);
	rdzv__key(r, k, "over");
	if (rdzv_parse_end(rep->value, rep->len, &kind, text, sizeof(text), why,
			   sizeof(why))) {
		r->excl.sitting_out = 0;
		return rdzv__bad_record(r, k, NULL, why);
	}
	/* Tell the store host we read it (it waits for that), then go. */
	r->excl.over_kind = kind;
	snprintf(r->excl.over_why, sizeof(r->excl.over_why), "%s", text);
	rdzv__key(r, k, "over_seen/%s/%s#%s/%d", r->o.host, r->excl.addr,
		  r->excl.id, r->excl.round);
	if (r->ops->set(r->kv, k, "1", 1, on_over_seen, rdzv__op_new(r, 0)))
		on_over_seen(0, NULL, rdzv__op_new(r, 0));
}

/* The store host has our acknowledgement of "over": report the end. */
static void on_over_seen(int status, const struct crun_store_reply *rep,
			 void *arg)
{
	struct crun_rdzv *r = rdzv__op_take(arg, NULL, NULL);

	(void)rep;
	(void)status; /* the end is known either way */
	if (r == NULL || !r->excl.sitting_out)
		return;
	r->excl.sitting_out = 0;
	if (r->excl.over_kind == RDZV_END_SUCCESS)
		return rdzv__round_fail(
		    r, CRUN_ERDZV_LEFT_OUT,
		    "the job finished without %s, which was left "
		    "out after repeated failures: %s",
		    r->o.host, r->excl.over_why);
	rdzv__round_fail(r, CRUN_ERDZV_CLOSED,
			 "the job stopped while %s was left out after repeated "
			 "failures: %s",
			 r->o.host, r->excl.over_why);
}

/* This node is left out until x->until: wait as a spare, say why. */
static void excl_sit_out(struct crun_rdzv *r, const struct rdzv_exclusion *x)
{
	char why[400], at[32], k[KEYMAX];
	int64_t left = x->until * 1000 - rdzv__wall_ms();
	int ms = left > INT32_MAX ? INT32_MAX : (int)left;

	r->state = R_WAITING;
	uv_timer_stop(&r->deadline);
	uv_timer_stop(&r->last_call);
	snprintf(why, sizeof(why),
		 "%s is left out until %s (%lld s more): the last %d "
		 "failure-ended rounds (to round %d) failed first on it; it "
		 "waits as a spare",
		 r->o.host, excl_clock(x->until, at, sizeof(at)),
		 (long long)(left + 500) / 1000, x->fails, x->round);
	if (!r->excl.sitting_out) /* said once, not at every re-check */
		excl_notify(r, x, 0, why);
	r->excl.sitting_out = 1;
	r->excl.round = x->round;
	/* Our own copy of "over": the store host can tell if we vanish. */
	rdzv__key(r, k, "over/%s/%s#%s/%d", r->o.host, r->excl.addr, r->excl.id,
		  x->round);
	if (rdzv__watch1(r, k, ms > 0 ? ms : 1, on_sitout_over,
			 rdzv__op_new(r, 0)))
		rdzv__store_error(r, CRUN_ECLOSED);
}

/* How many of the n entries are still left out now. */
static int excl_active(const struct rdzv_exclusion *x, int n)
{
	int64_t now = rdzv__wall_ms();
	int k = 0;

	for (int i = 0; i < n; i++)
		k += x[i].until * 1000 > now;
	return k;
}

/* A count read back ("join", "closed"): absent or malformed is 0. */
static int64_t excl_count(const struct crun_store_iov *v)
{
	char why[120];
	int64_t c = 0;

	if (v->len == 0 ||
	    rdzv_parse_int(v->base, v->len, 0, INT32_MAX, &c, why, sizeof(why)))
		return 0;
	return c;
}

/*
 * More nodes are left out than the range allows: the spares of the round
 * that left this one out (its arrivals past the ones it closed with) may
 * make up the rest, as they did when it was decided. If not (a forged
 * record, or one from a crun that told agents on one machine apart by
 * host and address only), the job cannot go on: say so and end.
 */
static void on_excl_spares(int status, const struct crun_store_reply *rep,
			   void *arg)
{
	struct crun_rdzv *r = rdzv__take_values(arg, status, rep, 2);
	int64_t join, closed, spares = 0;

	if (r == NULL || r->state != R_JOINING)
		return;
	join = excl_count(&rep->values[0]);
	closed = excl_count(&rep->values[1]);
	if (closed > 0 && join > closed)
		spares = join - closed;
	for (int i = 0; i < r->excl.n; i++) {
		const struct rdzv_exclusion *x = &r->excl.list[i];

		if (!excl_is_self(r, x->host, x->addr, x->id))
			continue;
		if (excl_active(r->excl.list, r->excl.n) >
		    r->o.max_nodes - r->o.min_nodes + spares)
			return rdzv__round_fail(
			    r, CRUN_ERDZV_CLOSED,
			    "%d of at most %d nodes are left out of the "
			    "rounds: the others cannot reach the minimum of "
			    "%d, the job cannot go on",
			    excl_active(r->excl.list, r->excl.n),
			    r->o.max_nodes, r->o.min_nodes);
		return excl_sit_out(r, x);
	}
	r->excl.admit(r, 0);
}

static void on_excl_check(int status, const struct crun_store_reply *rep,
			  void *arg)
{
	struct crun_rdzv *r = rdzv__op_take(arg, NULL, NULL);
	struct rdzv_exclusion x[RDZV_MAX_EXCLUDED];
	int n;

	if (r == NULL || r->state != R_JOINING)
		return;
	if (status)
		return rdzv__store_error(r, status);
	n = excl_parse(r, rep, x);
	excl_update(r, x, n);
	for (int i = 0; i < n; i++) {
		if (!excl_is_self(r, x[i].host, x[i].addr, x[i].id))
			continue;
		if (x[i].until * 1000 > rdzv__wall_ms() &&
		    excl_active(x, n) > r->o.max_nodes - r->o.min_nodes) {
			char jk[KEYMAX], ck[KEYMAX];
			const char *kp[2] = {jk, ck};

			rdzv__key(r, jk, "r%d/join", x[i].round);
			rdzv__key(r, ck, "r%d/closed", x[i].round);
			if (r->ops->peek(r->kv, kp, 2, on_excl_spares,
					 rdzv__op_new(r, 0)))
				rdzv__store_error(r, CRUN_ECLOSED);
			return;
		}
		if (x[i].until * 1000 > rdzv__wall_ms())
			return excl_sit_out(r, &x[i]);
		/* Listed, but its time is up (a restarted agent). */
		r->excl.sitting_out = 1;
		return excl_readmit(r);
	}
	if (r->excl.sitting_out) /* taken off the list meanwhile */
		return excl_rejoin(r);
	r->excl.admit(r, 0);
}

/* Before joining: is this node left out? */
static void excl_check(struct crun_rdzv *r)
{
	char k[KEYMAX];

	rdzv__key(r, k, "excluded");
	if (r->ops->compare_set(r->kv, k, PEEK, strlen(PEEK), "", 0,
				on_excl_check, rdzv__op_new(r, 0)))
		rdzv__store_error(r, CRUN_ECLOSED);
}

/* Readmitted: back to joining, with the whole join_timeout again. */
static void excl_rejoin(struct crun_rdzv *r)
{
	r->excl.sitting_out = 0;
	r->state = R_JOINING;
	r->excl.admit(r, 1);
}

static void on_readmit_cas(int status, const struct crun_store_reply *rep,
			   void *arg)
{
	char *want =
	    ((struct rdzv__op *)arg)->data; /* rdzv__op_take frees the op */
	struct crun_rdzv *r = rdzv__op_take(arg, NULL, NULL);
	struct rdzv_exclusion self;

	if (r == NULL || !r->excl.sitting_out) {
		free(want);
		return;
	}
	if (status) {
		free(want);
		return rdzv__store_error(r, status);
	}
	if (!rdzv__reply_is(rep, want) && r->excl.tries++ < 20) {
		/* Someone changed it meanwhile: read it again. */
		free(want);
		return excl_readmit(r);
	}
	free(want);
	for (int i = 0; i < r->excl.n; i++) {
		if (!excl_is_self(r, r->excl.list[i].host, r->excl.list[i].addr,
				  r->excl.list[i].id))
			continue;
		self = r->excl.list[i];
		r->excl.list[i] = r->excl.list[--r->excl.n];
		excl_notify(r, &self, 1,
			    "its cooldown ended: it joins the next round");
		break;
	}
	excl_rejoin(r);
}

static void on_readmit_read(int status, const struct crun_store_reply *rep,
			    void *arg)
{
	struct crun_rdzv *r = rdzv__op_take(arg, NULL, NULL);
	struct rdzv_exclusion x[RDZV_MAX_EXCLUDED];
	char cur[RDZV_MAX_LIST_RECORD + 1], next[RDZV_MAX_LIST_RECORD + 1];
	char k[KEYMAX];
	struct rdzv__op *o;
	size_t clen;
	int n, m = 0;

	if (r == NULL || !r->excl.sitting_out)
		return;
	if (status)
		return rdzv__store_error(r, status);
	if (rep->value == NULL || rdzv__reply_is(rep, PEEK) ||
	    rep->len > RDZV_MAX_LIST_RECORD)
		return excl_rejoin(r); /* nothing to take ourselves off */
	clen = rep->len;
	memcpy(cur, rep->value, clen);
	n = excl_parse(r, rep, x);
	/* The cache keeps our own entry until the write is in. */
	memcpy(r->excl.list, x, (size_t)n * sizeof(*x));
	r->excl.n = n;
	r->excl.known = 1;
	for (int i = 0; i < n; i++)
		if (!excl_is_self(r, x[i].host, x[i].addr, x[i].id))
			x[m++] = x[i];
	rdzv_format_excluded(next, sizeof(next), x, m);
	o = rdzv__op_new(r, 0);
	o->data = strdup(next);
	if (o->data == NULL)
		abort();
	rdzv__key(r, k, "excluded");
	if (r->ops->compare_set(r->kv, k, cur, clen, next, strlen(next),
				on_readmit_cas, o)) {
		free(o->data);
		free(o);
		rdzv__store_error(r, CRUN_ECLOSED);
	}
}

/* The cooldown is over: take this node off "excluded", then join. */
static void excl_readmit(struct crun_rdzv *r)
{
	char k[KEYMAX];

	rdzv__key(r, k, "excluded");
	if (r->ops->compare_set(r->kv, k, PEEK, strlen(PEEK), "", 0,
				on_readmit_read, rdzv__op_new(r, 0)))
		rdzv__store_error(r, CRUN_ECLOSED);
}

static void on_over_acks(int status, const struct crun_store_reply *rep,
			 void *arg)
{
	(void)rep;
	if (status != CRUN_ECANCELED)
		rdzv__finish_done(arg);
}

static void on_host_excluded(int status, const struct crun_store_reply *rep,
			     void *arg)
{
	struct crun_rdzv *r = arg;
	struct rdzv_exclusion x[RDZV_MAX_EXCLUDED];
	char keys[RDZV_MAX_EXCLUDED][KEYMAX];
	const char *kp[RDZV_MAX_EXCLUDED];
	int n;

	if (status || r->state != R_FINISHING)
		return rdzv__finish_done(r);
	n = excl_parse(r, rep, x);
	for (int i = 0; i < n; i++) {
		rdzv__key(r, keys[i], "over_seen/%s/%s#%s/%d", x[i].host,
			  x[i].addr, x[i].id, x[i].round);
		kp[i] = keys[i];
	}
	/* Bounded by close_timeout (the deadline timer runs meanwhile). */
	if (n == 0 || r->ops->multi_get(r->kv, kp, (size_t)n,
					(int)(r->o.close_timeout * 1000),
					on_over_acks, r))
		rdzv__finish_done(r);
}

/*
 * Everyone left: the store host serves on until each node left out has
 * read "over" (else it would learn only that the store went away).
 */
void rdzv__excl_host_wait(struct crun_rdzv *r)
{
	char k[KEYMAX];

	if (!uv_is_active((uv_handle_t *)&r->deadline))
		uv_timer_start(&r->deadline, rdzv__on_finish_timeout,
			       (uint64_t)(r->o.close_timeout * 1000), 0);
	rdzv__key(r, k, "excluded");
	if (r->ops->compare_set(r->kv, k, PEEK, strlen(PEEK), "", 0,
				on_host_excluded, r))
		rdzv__finish_done(r);
}

/*
 * The job is over: say so once in "over", for the spares and the nodes
 * left out.
 */
void rdzv__excl_over(struct crun_rdzv *r, int kind, const char *why)
{
	char k[KEYMAX], val[600];

	if (r->state == R_DONE)
		return;
	rdzv__key(r, k, "over");
	rdzv_format_end(val, sizeof(val), kind, why);
	r->ops->compare_set(r->kv, k, "", 0, val, strlen(val), NULL, NULL);
	/* A copy for each node left out (as of our last join): what it waits
	 * on. */
	for (int i = 0; i < r->excl.n; i++) {
		rdzv__key(r, k, "over/%s/%s#%s/%d", r->excl.list[i].host,
			  r->excl.list[i].addr, r->excl.list[i].id,
			  r->excl.list[i].round);
		r->ops->compare_set(r->kv, k, "", 0, val, strlen(val), NULL,
				    NULL);
	}
}

/*
 * The decision, taken by the node whose failure ended round R (its "F" end
 * was recorded first), before it writes "r<R+1>/restarts": everyone else
 * waits for that record before joining R+1, so they all see its outcome.
 */
struct decide {
	struct crun_rdzv *r;
	int round;
	int64_t restarts;
	int gworld;
	int tries;
	char *want; /* the "excluded" value being written */
	struct rdzv_fail f[RDZV_MAX_FAILS + 1];
	int nf;
};

/* Last step: the restart count of R+1, which lets everyone go on. */
static void decide_done(struct decide *d)
{
	struct crun_rdzv *r = d->r;
	char k[KEYMAX], v[24];

	if (r->state != R_DONE) {
		snprintf(v, sizeof(v), "%" PRId64, d->restarts);
		rdzv__key(r, k, "r%d/restarts", d->round + 1);
		r->ops->set(r->kv, k, v, strlen(v), NULL, NULL);
	}
	free(d->want);
	free(d);
}

/* Write the history "fails" (the n entries from first). */
static void decide_put_fails(struct decide *d, int first, int n)
{
	struct crun_rdzv *r = d->r;
	char buf[RDZV_MAX_LIST_RECORD + 1], k[KEYMAX];

	rdzv_format_fails(buf, sizeof(buf), d->f + first, n);
	rdzv__key(r, k, "fails");
	r->ops->set(r->kv, k, buf, strlen(buf), NULL, NULL);
}

static void decide_read_excluded(struct decide *d);

static void on_decide_excl_cas(int status, const struct crun_store_reply *rep,
			       void *arg)
{
	struct decide *d = arg;
	struct crun_rdzv *r = d->r;
	struct rdzv_exclusion x[RDZV_MAX_EXCLUDED];
	char k[KEYMAX], e[16];
	int n;

	if (status || r->state == R_DONE)
		return decide_done(d);
	if (!rdzv__reply_is(rep, d->want) && d->tries++ < 20)
		return decide_read_excluded(d); /* changed meanwhile */
	/* Left out: the history starts afresh, the next round expects one
	 * node fewer. */
	decide_put_fails(d, 0, 0);
	snprintf(e, sizeof(e), "%d", d->gworld - 1);
	rdzv__key(r, k, "r%d/expect", d->round + 1);
	r->ops->set(r->kv, k, e, strlen(e), NULL, NULL);
	if (rdzv_parse_excluded(d->want, strlen(d->want), x, RDZV_MAX_EXCLUDED,
				&n, NULL, 0))
		n = 0;
	memcpy(r->excl.list, x, (size_t)n * sizeof(*x));
	r->excl.n = n;
	r->excl.known = 1;
	decide_done(d);
}

static void on_decide_excl_read(int status, const struct crun_store_reply *rep,
				void *arg)
{
	struct decide *d = arg;
	struct crun_rdzv *r = d->r;
	struct rdzv_exclusion x[RDZV_MAX_EXCLUDED + 1];
	char buf[RDZV_MAX_LIST_RECORD + 1], k[KEYMAX];
	const char *cur = "";
	size_t clen = 0;
	int n, m = 0;

	if (status || r->state == R_DONE)
		return decide_done(d);
	n = excl_parse(r, rep, x);
	if (rep->value && !rdzv__reply_is(rep, PEEK)) {
		cur = rep->value;
		clen = rep->len;
	}
	for (int i = 0; i < n; i++)
		if (!excl_is_self(r, x[i].host, x[i].addr, x[i].id))
			x[m++] = x[i];
	if (m >= RDZV_MAX_EXCLUDED) {
		log_say("%s is not left out: %d nodes are left out "
			"already (at most %d)",
			r->o.host, m, RDZV_MAX_EXCLUDED);
		decide_put_fails(d, 0, d->nf);
		return decide_done(d);
	}
	snprintf(x[m].host, sizeof(x[m].host), "%s", r->o.host);
	snprintf(x[m].addr, sizeof(x[m].addr), "%s", r->excl.addr);
	snprintf(x[m].id, sizeof(x[m].id), "%s", r->excl.id);
	/* Rounded up: the cooldown is never shorter than exclude_for. */
	x[m].until =
	    (rdzv__wall_ms() + (int64_t)(r->o.exclude_for * 1000) + 999) / 1000;
	x[m].round = d->round;
	x[m].fails = r->o.exclude_after;
	rdzv_format_excluded(buf, sizeof(buf), x, m + 1);
	free(d->want);
	d->want = strdup(buf);
	if (d->want == NULL)
		abort();
	rdzv__key(r, k, "excluded");
	/* From what we read (a missing key: from nothing). */
	if (r->ops->compare_set(r->kv, k, cur, clen, buf, strlen(buf),
				on_decide_excl_cas, d))
		decide_done(d);
}

static void decide_read_excluded(struct decide *d)
{
	struct crun_rdzv *r = d->r;
	char k[KEYMAX];

	rdzv__key(r, k, "excluded");
	if (r->ops->compare_set(r->kv, k, PEEK, strlen(PEEK), "", 0,
				on_decide_excl_read, d))
		decide_done(d);
}

/* Too few would remain without the failing node: unless spares wait. */
static void on_decide_spares(int status, const struct crun_store_reply *rep,
			     void *arg)
{
	struct decide *d = arg;
	struct crun_rdzv *r = d->r;
	int64_t spares = 0;

	if (status == 0 && r->state != R_DONE)
		spares = rdzv_reply_int(rep) - d->gworld;
	if (spares > 0 && d->gworld - 1 + spares >= r->o.min_nodes)
		return decide_read_excluded(d);
	log_say("%s is not left out although the last %d failure-ended rounds "
		"failed first on it: %d node%s would remain, below the minimum "
		"of %d, and no spare waits to make it up",
		r->o.host, r->o.exclude_after, d->gworld - 1,
		d->gworld - 1 == 1 ? "" : "s", r->o.min_nodes);
	decide_put_fails(d, 0, d->nf);
	decide_done(d);
}

static void on_decide_fails(int status, const struct crun_store_reply *rep,
			    void *arg)
{
	struct decide *d = arg;
	struct crun_rdzv *r = d->r;
	int k = r->o.exclude_after, first, same = 0;
	char why[200], key_[KEYMAX];

	if (status || r->state == R_DONE)
		return decide_done(d);
	d->nf = 0;
	if (rep->value && !rdzv__reply_is(rep, PEEK) &&
	    rdzv_parse_fails(rep->value, rep->len, d->f, RDZV_MAX_FAILS, &d->nf,
			     why, sizeof(why))) {
		rdzv__key(r, key_, "fails");
		log_msg(LOG_WARN, "crun",
			"malformed rendezvous record '%s': %s: the "
			"failure history starts afresh",
			key_, why);
		d->nf = 0;
	}
	/* A history from a later round (forged or stale) is dropped. */
	if (d->nf > 0 && d->f[d->nf - 1].round >= d->round)
		d->nf = 0;
	d->f[d->nf].round = d->round;
	snprintf(d->f[d->nf].host, sizeof(d->f[0].host), "%s", r->o.host);
	snprintf(d->f[d->nf].addr, sizeof(d->f[0].addr), "%s", r->excl.addr);
	snprintf(d->f[d->nf].id, sizeof(d->f[0].id), "%s", r->excl.id);
	d->nf++;
	first = d->nf > k ? d->nf - k : 0;
	memmove(d->f, d->f + first, (size_t)(d->nf - first) * sizeof(d->f[0]));
	d->nf -= first;
	for (int i = 0; i < d->nf; i++)
		same += excl_is_self(r, d->f[i].host, d->f[i].addr, d->f[i].id);
	if (same < k) {
		decide_put_fails(d, 0, d->nf);
		return decide_done(d);
	}
	if (d->gworld - 1 < r->o.min_nodes) {
		/* The round's spares may make up the minimum. */
		rdzv__key(r, key_, "r%d/join", d->round);
		if (r->ops->add(r->kv, key_, 0, on_decide_spares, d))
			decide_done(d);
		return;
	}
	decide_read_excluded(d);
}

void rdzv__excl_decide(struct crun_rdzv *r, int round, int64_t restarts)
{
	struct decide *d = calloc(1, sizeof(*d));
	char k[KEYMAX], v[600];

	if (d == NULL)
		abort();
	d->r = r;
	d->round = round;
	d->restarts = restarts;
	d->gworld = r->gworld;
	/* Who ended round R: attribution for status and metrics. */
	rdzv__key(r, k, "r%d/failed", round);
	snprintf(v, sizeof(v), "%d %s %s#%s", r->grank, r->o.host, r->excl.addr,
		 r->excl.id);
	r->ops->set(r->kv, k, v, strlen(v), NULL, NULL);
	rdzv__key(r, k, "fails");
	if (r->ops->compare_set(r->kv, k, PEEK, strlen(PEEK), "", 0,
				on_decide_fails, d))
		decide_done(d);
}

void rdzv__excl_check(struct crun_rdzv *r,
		      void (*admit)(struct crun_rdzv *r, int afresh))
{
	r->excl.admit = admit;
	excl_check(r);
}

/*
 * The etcd rendezvous backend (see rdzv_etcd.h for the key layout).
 *
 * Happy path: open grants the node's lease, adopts the job's lease (the
 * first node creates it with a create_revision==0 txn) and opens one watch
 * on the job's keys. The algorithm's requests run one at a time, in call
 * order, as TCPStore's pipelined requests do: ADD is a txn compared on the
 * key's mod_revision (the failure branch returns the current value, so a
 * loser retries at once), COMPARE_SET a txn compared on the value (or on
 * absence), MULTI_GET a txn of ranges that, when keys are missing, waits
 * for their PUT events and reads again (a peek reads once, missing keys
 * empty). WATCH does the same on a channel of
 * its own, and first puts this node's mark for the key. A PUT seen while
 * such a read is out makes it read again (the watch and the read use two
 * connections, so the read may predate the PUT). A timer refreshes both
 * leases every lease_ttl/3.
 *
 * Failure modes: etcd.c fails requests over between endpoints; a request no
 * endpoint answers within the timeout fails this backend for good (one
 * line naming the endpoints, then every request fails). The watch stream
 * is reopened from the last revision seen (from now, re-reading every
 * waiter, when that revision was compacted), and on the new endpoint after
 * a failover. A watch that etcd ends, cancels or never confirms is
 * reopened after pauses (doubling, up to 2 s); after read_timeout of that
 * the backend fails, saying what etcd did. A node lease that expired is
 * granted again (the others already saw this node vanish); the job's lease
 * expiring is fatal. Closing revokes this node's lease (the job's too when
 * this node is the last one), bounded by CLOSE_MS.
 *
 * This file owns the backend: its state, the operations on the main and
 * watch channels, opening and closing. Two parts report to it by
 * callback: the leases (rdzv_etcd_lease.c) and the watch stream
 * (rdzv_etcd_watch.c).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "crun/err.h"
#include "crun/log.h"
#include "crun/rdzv_etcd.h"
#include "rdzv_etcd_lease.h"
#include "rdzv_etcd_watch.h"

#define CHUNK 64      /* operations per txn (etcd allows 128) */
#define CLOSE_MS 3000 /* revoking at exit, at most */
#define CACHE_MAX 512
#define LEASE_MIN_S 2 /* the shortest lease_ttl that survives a failover */

enum optype { OP_ADD, OP_SET, OP_CAS, OP_MGET, OP_MSET, OP_WATCH };

struct kop {
	struct crun_rdzv_etcd *s;
	struct kop *next;
	enum optype type;
	char **keys; /* etcd keys */
	char **vals;
	size_t *lens;
	size_t n;
	int64_t delta;
	int timeout_ms;
	int absent; /* CAS: expected "" means absent */
	int have;   /* ADD: cur and rev known */
	int64_t cur, rev;
	char token[48]; /* ADD: "<node>:<seq>", written beside the sum */
	int fails;	/* ADD: compares lost */
	size_t pos;	/* MGET/MSET: keys done */
	size_t chunk0;	/* MGET: first key of the txn out */
	char **got;	/* MGET: values read */
	size_t *glen;
	size_t need; /* MGET: the first keys that must exist (0: a peek) */
	int missing; /* MGET: of those, keys absent in this pass */
	int dirty;   /* MGET: a wanted key was put during this pass */
	int waiting; /* for a PUT event on one of keys */
	int inflight;
	int dead; /* completed or cancelled while a call was out */
	int started;
	rdzv_kv_cb cb;
	void *arg;
};

struct cache {
	struct cache *next;
	char *key;
	int64_t val, rev;
};

struct crun_rdzv_etcd {
	uv_loop_t *loop;
	struct etcd *etcd;
	char ns[512]; /* "<prefix>/<run_id>/" */
	struct rdzv_etcd_lease lease;
	struct rdzv_etcd_watch watch;
	struct kop *head, *tail; /* the main channel */
	struct kop *w;		 /* the watch channel */
	uv_timer_t mtimer, wtimer, btimer;
	int handles; /* closing: handles and parts not yet closed */
	int failed;
	int closing;
	int kicking, rekick;
	int close_started;
	int calls_out;	    /* the operations' calls not yet answered */
	int revoke_pending; /* closing: revoke once they are */
	struct cache *cache;
	int ncache;
	unsigned seq; /* ADDs so far */
	void (*vanish_cb)(void *, const char *, size_t);
	void *vanish_arg;
	rdzv_etcd_open_cb open_cb;
	void *open_data;
	void (*close_cb)(void *);
	void *close_data;
	char errmsg[1200];
};

/* etcd_prefix (at most 200 bytes, cfg_rdzv.c) and a run id the options
 * allow fit ns whole. */
_Static_assert(200 + sizeof("/") + RDZV_ID_MAX + sizeof("/") <=
		   sizeof(((struct crun_rdzv_etcd *)0)->ns),
	       "etcd_prefix and a run id do not fit ns");

static void step(struct kop *o);
static void reply(struct kop *o, int status, const struct crun_store_reply *r);
static void kick(struct crun_rdzv_etcd *s);

static char *xstrdup(const char *p)
{
	char *d = strdup(p);

	if (d == NULL)
		abort();
	return d;
}

static char *ekey(const struct crun_rdzv_etcd *s, const char *k)
{
	size_t n = strlen(s->ns) + strlen(k) + 3;
	char *b = malloc(n);

	if (b == NULL)
		abort();
	snprintf(b, n, "%sk/%s", s->ns, k);
	return b;
}

static struct kop *op_new(struct crun_rdzv_etcd *s, enum optype t, size_t n,
			  rdzv_kv_cb cb, void *arg)
{
	struct kop *o = calloc(1, sizeof(*o));

	if (o == NULL)
		abort();
	o->s = s;
	o->type = t;
	o->n = n;
	/* One slot more: COMPARE_SET keeps the expected value there. */
	o->keys = calloc(n + 1, sizeof(*o->keys));
	o->vals = calloc(n + 1, sizeof(*o->vals));
	o->lens = calloc(n + 1, sizeof(*o->lens));
	if (!o->keys || !o->vals || !o->lens)
		abort();
	o->cb = cb;
	o->arg = arg;
	return o;
}

static void got_free(struct kop *o)
{
	for (size_t i = 0; o->got && i < o->n; i++)
		free(o->got[i]);
	free(o->got);
	free(o->glen);
	o->got = NULL;
	o->glen = NULL;
}

static void op_free(struct kop *o)
{
	for (size_t i = 0; i <= o->n; i++) {
		free(o->keys[i]);
		free(o->vals[i]);
	}
	free(o->keys);
	free(o->vals);
	free(o->lens);
	got_free(o);
	free(o);
}

static struct cache *cache_find(struct crun_rdzv_etcd *s, const char *k)
{
	for (struct cache *c = s->cache; c; c = c->next)
		if (strcmp(c->key, k) == 0)
			return c;
	return NULL;
}

static void cache_clear(struct crun_rdzv_etcd *s)
{
	while (s->cache) {
		struct cache *c = s->cache;

		s->cache = c->next;
		free(c->key);
		free(c);
	}
	s->ncache = 0;
}

static void cache_put(struct crun_rdzv_etcd *s, const char *k, int64_t val,
		      int64_t rev)
{
	struct cache *c = cache_find(s, k);

	if (c == NULL) {
		if (s->ncache >= CACHE_MAX)
			cache_clear(s);
		c = calloc(1, sizeof(*c));
		if (c == NULL)
			abort();
		c->key = xstrdup(k);
		c->next = s->cache;
		s->cache = c;
		s->ncache++;
	}
	c->val = val;
	c->rev = rev;
}

static void cache_drop(struct crun_rdzv_etcd *s, const char *k)
{
	for (struct cache **p = &s->cache; *p; p = &(*p)->next) {
		if (strcmp((*p)->key, k) == 0) {
			struct cache *c = *p;

			*p = c->next;
			free(c->key);
			free(c);
			s->ncache--;
			return;
		}
	}
}

static void reply(struct kop *o, int status, const struct crun_store_reply *r)
{
	struct crun_rdzv_etcd *s = o->s;
	rdzv_kv_cb cb = o->cb;
	void *arg = o->arg;

	if (o->type == OP_WATCH) {
		if (s->w == o) {
			s->w = NULL;
			uv_timer_stop(&s->wtimer);
		}
	} else if (s->head == o) {
		s->head = o->next;
		if (s->tail == o)
			s->tail = NULL;
		uv_timer_stop(&s->mtimer);
	}
	o->cb = NULL;
	o->dead = 1;
	/* Held through the callback: r may point into the op. */
	o->inflight++;
	if (cb)
		cb(status, r, arg);
	if (o->type != OP_WATCH)
		kick(s);
	if (--o->inflight == 0)
		op_free(o);
}

static void reply_value(struct kop *o, const void *v, size_t n)
{
	struct crun_store_reply r;

	memset(&r, 0, sizeof(r));
	r.value = v;
	r.len = n;
	reply(o, 0, &r);
}

/* This backend cannot go on: say why once, fail everything. */
static void fail_all(struct crun_rdzv_etcd *s, int status, const char *why)
{
	if (!s->failed && !s->closing) {
		snprintf(s->errmsg, sizeof(s->errmsg), "%s", why);
		log_say("%s", why);
	}
	s->failed = status;
	rdzv_etcd_watch_stop(&s->watch);
	rdzv_etcd_lease_stop(&s->lease);
	while (s->head)
		reply(s->head, status, NULL);
	if (s->w)
		reply(s->w, status, NULL);
}

/*
 * Account for a finished call: NULL when the op no longer wants it (then
 * freed if it was the last call out).
 */
static struct kop *call_back(void *arg)
{
	struct kop *o = arg;
	struct crun_rdzv_etcd *s = o->s;

	o->inflight--;
	if (--s->calls_out == 0 && s->revoke_pending) {
		s->revoke_pending = 0;
		rdzv_etcd_lease_revoke(&s->lease);
	}
	if (o->dead) {
		if (o->inflight == 0)
			op_free(o);
		return NULL;
	}
	return o;
}

static int call(struct kop *o, const char *path, json_t *body, etcd_cb cb)
{
	int rc = etcd_call(o->s->etcd, path, body, cb, o);

	if (rc == 0) {
		o->inflight++;
		o->s->calls_out++;
	}
	return rc;
}

/* A call failed: fatal unless etcd itself refused it (then just this op). */
static void op_error(struct kop *o, int status, json_t *resp)
{
	struct crun_rdzv_etcd *s = o->s;

	if (status == CRUN_ECANCELED)
		return reply(o, status, NULL);
	if (resp == NULL)
		return fail_all(s, status, etcd_errmsg(s->etcd));
	if (etcd_int(resp, "code") == 5 &&
	    strstr(etcd_errmsg(s->etcd), "lease"))
		return fail_all(s, status,
				"the job's etcd lease expired (etcd did not "
				"answer for longer than its TTL)");
	log_say("%s", etcd_errmsg(s->etcd));
	reply(o, status, NULL);
}

static void on_backoff(uv_timer_t *t)
{
	struct crun_rdzv_etcd *s = t->data;

	if (s->head && s->head->type == OP_ADD && !s->head->inflight)
		step(s->head);
}

static void on_add(int status, json_t *resp, void *arg)
{
	struct kop *o = call_back(arg);
	struct crun_rdzv_etcd *s;
	struct crun_store_reply r;
	char *v = NULL;
	size_t n;

	if (o == NULL)
		return;
	s = o->s;
	if (status)
		return op_error(o, status, resp);
	if (o->delta == 0 && !o->have) {
		/* A read; an absent key is created with 0, as TCPStore does. */
		if (etcd_kv_first(resp, &v, &n, NULL)) {
			memset(&r, 0, sizeof(r));
			r.num = strtoll(v, NULL, 10);
			free(v);
			return reply(o, 0, &r);
		}
		o->have = 1;
		o->cur = o->rev = 0;
		return step(o);
	}
	if (o->have && json_is_true(json_object_get(resp, "succeeded"))) {
		int64_t num = o->cur + o->delta;

		cache_put(
		    s, o->keys[0], num,
		    etcd_int(json_object_get(resp, "header"), "revision"));
		memset(&r, 0, sizeof(r));
		r.num = num;
		return reply(o, 0, &r);
	}
	/* A first read, or the key moved on: retry from its current state. */
	if (o->have)
		resp = etcd_txn_resp(resp, 0, "response_range");
	o->have = 1;
	o->cur = 0;
	o->rev = 0;
	if (etcd_kv_first(resp, &v, &n, &o->rev)) {
		const char *t = strchr(v, ' ');

		o->cur = strtoll(v, NULL, 10);
		if (*o->token && t && strcmp(t + 1, o->token) == 0) {
			/*
			 * Our own write: etcd applied a try whose answer was
			 * lost, and the retry found it done.
			 */
			free(v);
			cache_put(s, o->keys[0], o->cur, o->rev);
			memset(&r, 0, sizeof(r));
			r.num = o->cur;
			return reply(o, 0, &r);
		}
	}
	free(v);
	if (o->delta == 0) {
		/* Created by someone else meanwhile: that is the value. */
		memset(&r, 0, sizeof(r));
		r.num = o->cur;
		return reply(o, 0, &r);
	}
	if (o->fails++ == 0)
		return step(o);
	/*
	 * Lost the race again: back off a random while (up to 2^fails ms,
	 * at most 64), so N nodes adding at once cost O(N) writes, not
	 * O(N^2).
	 */
	uv_timer_start(
	    &s->btimer, on_backoff,
	    (uint64_t)(rand() % (1 << (o->fails < 6 ? o->fails : 6))), 0);
}

static void on_set(int status, json_t *resp, void *arg)
{
	struct kop *o = call_back(arg);
	struct crun_store_reply r;

	if (o == NULL)
		return;
	if (status)
		return op_error(o, status, resp);
	memset(&r, 0, sizeof(r));
	reply(o, 0, &r);
}

static void on_cas(int status, json_t *resp, void *arg)
{
	struct kop *o = call_back(arg);
	char *v = NULL;
	size_t n;

	if (o == NULL)
		return;
	if (status)
		return op_error(o, status, resp);
	if (json_is_true(json_object_get(resp, "succeeded")))
		return reply_value(o, o->vals[0], o->lens[0]);
	if (!etcd_kv_first(etcd_txn_resp(resp, 0, "response_range"), &v, &n,
			   NULL))
		/* Absent, expected something: echoed, as PyTorch does. */
		return reply_value(o, o->vals[1], o->lens[1]);
	reply_value(o, v, n);
	free(v);
}

static void on_mset(int status, json_t *resp, void *arg)
{
	struct kop *o = call_back(arg);
	struct crun_store_reply r;

	if (o == NULL)
		return;
	if (status)
		return op_error(o, status, resp);
	if (o->pos < o->n)
		return step(o);
	memset(&r, 0, sizeof(r));
	reply(o, 0, &r);
}

/* Every key read: reply, or wait for the missing ones to appear. */
static void mget_pass_done(struct kop *o)
{
	struct crun_store_iov *iov;
	struct crun_store_reply r;

	if (o->missing && o->dirty) {
		o->pos = o->n; /* a new pass */
		return step(o);
	}
	if (o->missing) {
		o->waiting = 1;
		return;
	}
	if (o->type == OP_WATCH && o->n == 1)
		return reply_value(o, o->got[0], o->glen[0]);
	iov = calloc(o->n ? o->n : 1, sizeof(*iov));
	if (iov == NULL)
		abort();
	for (size_t i = 0; i < o->n; i++) {
		iov[i].base = o->got[i];
		iov[i].len = o->glen[i];
	}
	memset(&r, 0, sizeof(r));
	r.nvalues = o->n;
	r.values = iov;
	if (o->type == OP_WATCH) { /* the watched key's value first */
		r.value = o->got[0];
		r.len = o->glen[0];
	}
	reply(o, 0, &r);
	free(iov);
}

static void on_mget(int status, json_t *resp, void *arg)
{
	struct kop *o = call_back(arg);
	size_t i0;

	if (o == NULL)
		return;
	if (status)
		return op_error(o, status, resp);
	i0 = o->chunk0;
	for (size_t i = i0; i < o->pos; i++) {
		json_t *rr = etcd_txn_resp(resp, i - i0, "response_range");

		free(o->got[i]);
		o->got[i] = NULL;
		o->glen[i] = 0;
		if (!etcd_kv_first(rr, &o->got[i], &o->glen[i], NULL) &&
		    i < o->need)
			o->missing++;
	}
	if (o->pos < o->n)
		return step(o);
	mget_pass_done(o);
}

static void on_mtimer(uv_timer_t *t)
{
	struct crun_rdzv_etcd *s = t->data;

	if (s->head)
		reply(s->head, CRUN_ETIMEDOUT, NULL);
}

static void on_wtimer(uv_timer_t *t)
{
	struct crun_rdzv_etcd *s = t->data;

	if (s->w)
		reply(s->w, CRUN_ETIMEDOUT, NULL);
}

/* The next request of op o. */
static void step(struct kop *o)
{
	struct crun_rdzv_etcd *s = o->s;
	const char *lease = s->lease.job;
	json_t *b = NULL;
	const char *path = "/v3/kv/txn";
	etcd_cb cb = NULL;
	char num[96];
	int rc;

	o->waiting = 0;
	switch (o->type) {
	case OP_ADD:
		if (o->delta == 0 && !o->have) {
			b = etcd_range_req(o->keys[0], NULL);
			path = "/v3/kv/range";
		} else if (!o->have) {
			struct cache *c = cache_find(s, o->keys[0]);

			if (c) {
				o->have = 1;
				o->cur = c->val;
				o->rev = c->rev;
			} else {
				b = etcd_range_req(o->keys[0], NULL);
				path = "/v3/kv/range";
			}
		}
		if (b == NULL) {
			/* The sum, and who wrote it (see on_add). */
			if (o->delta && !*o->token)
				snprintf(o->token, sizeof(o->token), "%s:%u",
					 s->lease.node, ++s->seq);
			snprintf(num, sizeof(num), "%" PRId64 "%s%s",
				 o->cur + o->delta, *o->token ? " " : "",
				 o->token);
			b = etcd_txn_mod(o->keys[0], o->rev, num, strlen(num),
					 lease);
		}
		cb = on_add;
		break;
	case OP_SET:
		cache_drop(s, o->keys[0]);
		b = etcd_put_req(o->keys[0], o->vals[0], o->lens[0], lease);
		path = "/v3/kv/put";
		cb = on_set;
		break;
	case OP_CAS:
		cache_drop(s, o->keys[0]);
		b = etcd_txn_cas(o->keys[0], o->absent, o->vals[1], o->lens[1],
				 o->vals[0], o->lens[0], lease);
		cb = on_cas;
		break;
	case OP_MSET: {
		size_t k = o->n - o->pos < CHUNK ? o->n - o->pos : CHUNK;

		for (size_t i = o->pos; i < o->pos + k; i++)
			cache_drop(s, o->keys[i]);
		b = etcd_txn_puts((const char *const *)o->keys + o->pos,
				  (const void *const *)o->vals + o->pos,
				  o->lens + o->pos, k, lease);
		o->pos += k;
		cb = on_mset;
		break;
	}
	case OP_MGET:
	case OP_WATCH: {
		size_t k;

		if (o->pos >= o->n) { /* a new pass */
			o->pos = 0;
			o->missing = 0;
			o->dirty = 0;
		}
		if (o->got == NULL) {
			o->got = calloc(o->n, sizeof(*o->got));
			o->glen = calloc(o->n, sizeof(*o->glen));
			if (!o->got || !o->glen)
				abort();
		}
		k = o->n - o->pos < CHUNK ? o->n - o->pos : CHUNK;
		b = etcd_txn_ranges((const char *const *)o->keys + o->pos, k);
		o->chunk0 = o->pos;
		o->pos += k;
		cb = on_mget;
		break;
	}
	}
	rc = call(o, path, b, cb);
	if (rc)
		reply(o, rc, NULL);
}

/* Start the head of the main channel if it is idle. */
static void kick(struct crun_rdzv_etcd *s)
{
	struct kop *o;

	if (s->kicking) {
		s->rekick = 1;
		return;
	}
	s->kicking = 1;
	do {
		s->rekick = 0;
		o = s->head;
		if (o == NULL || o->inflight || o->waiting || o->started)
			continue;
		o->started = 1;
		if (o->type == OP_MGET && o->timeout_ms >= 0)
			uv_timer_start(&s->mtimer, on_mtimer,
				       (uint64_t)o->timeout_ms, 0);
		step(o);
	} while (s->rekick);
	s->kicking = 0;
}

static int enqueue(struct crun_rdzv_etcd *s, struct kop *o)
{
	if (s->failed || s->closing) {
		op_free(o);
		return CRUN_ECLOSED;
	}
	if (s->tail)
		s->tail->next = o;
	else
		s->head = o;
	s->tail = o;
	if (s->head == o)
		kick(s);
	return 0;
}

static int kv_add(void *kv, const char *key, int64_t delta, rdzv_kv_cb cb,
		  void *arg)
{
	struct crun_rdzv_etcd *s = kv;
	struct kop *o = op_new(s, OP_ADD, 1, cb, arg);

	o->keys[0] = ekey(s, key);
	o->delta = delta;
	return enqueue(s, o);
}

static char *dupn(const void *v, size_t n)
{
	char *b = malloc(n + 1);

	if (b == NULL)
		abort();
	if (n)
		memcpy(b, v, n);
	b[n] = '\0';
	return b;
}

static int kv_set(void *kv, const char *key, const void *v, size_t n,
		  rdzv_kv_cb cb, void *arg)
{
	struct crun_rdzv_etcd *s = kv;
	struct kop *o = op_new(s, OP_SET, 1, cb, arg);

	o->keys[0] = ekey(s, key);
	o->vals[0] = dupn(v, n);
	o->lens[0] = n;
	return enqueue(s, o);
}

static int kv_compare_set(void *kv, const char *key, const void *exp,
			  size_t elen, const void *des, size_t dlen,
			  rdzv_kv_cb cb, void *arg)
{
	struct crun_rdzv_etcd *s = kv;
	struct kop *o = op_new(s, OP_CAS, 1, cb, arg);

	o->keys[0] = ekey(s, key);
	o->vals[0] = dupn(des, dlen);
	o->lens[0] = dlen;
	o->vals[1] = dupn(exp, elen);
	o->lens[1] = elen;
	o->absent = elen == 0;
	return enqueue(s, o);
}

/* A MULTI_GET that waits (up to timeout_ms) for its first need keys. */
static int mget(struct crun_rdzv_etcd *s, const char *const *keys, size_t n,
		size_t need, int timeout_ms, rdzv_kv_cb cb, void *arg)
{
	struct kop *o = op_new(s, OP_MGET, n, cb, arg);

	for (size_t i = 0; i < n; i++)
		o->keys[i] = ekey(s, keys[i]);
	o->need = need;
	o->timeout_ms = timeout_ms;
	return enqueue(s, o);
}

static int kv_multi_get(void *kv, const char *const *keys, size_t n,
			int timeout_ms, rdzv_kv_cb cb, void *arg)
{
	return mget(kv, keys, n, n, timeout_ms, cb, arg);
}

/* A multi_get that reads once: missing keys come back empty. */
static int kv_peek(void *kv, const char *const *keys, size_t n, rdzv_kv_cb cb,
		   void *arg)
{
	return mget(kv, keys, n, 0, -1, cb, arg);
}

static int kv_multi_set(void *kv, const char *const *keys,
			const void *const *vals, const size_t *lens, size_t n,
			rdzv_kv_cb cb, void *arg)
{
	struct crun_rdzv_etcd *s = kv;
	struct kop *o = op_new(s, OP_MSET, n, cb, arg);

	for (size_t i = 0; i < n; i++) {
		o->keys[i] = ekey(s, keys[i]);
		o->vals[i] = dupn(vals[i], lens[i]);
		o->lens[i] = lens[i];
	}
	return enqueue(s, o);
}

static void on_mark(int status, json_t *resp, void *arg)
{
	struct crun_rdzv_etcd *s = arg;

	if (status && status != CRUN_ECANCELED && resp == NULL)
		fail_all(s, status, etcd_errmsg(s->etcd));
}

/*
 * A new watch replaces the one outstanding (which fails with
 * CRUN_ECANCELED). This node's mark for the key goes first, attached to
 * its lease: if the node dies, the mark goes, and the others hear of it.
 */
static int kv_watch(void *kv, const char *const *keys, size_t nk,
		    int timeout_ms, rdzv_kv_cb cb, void *arg)
{
	const char *key = keys[0];
	struct crun_rdzv_etcd *s = kv;
	struct kop *o;
	char *mk;
	size_t n;
	int rc;

	if (s->failed || s->closing)
		return CRUN_ECLOSED;
	if (s->w)
		reply(s->w, CRUN_ECANCELED, NULL);
	n = strlen(s->ns) + strlen(s->lease.node) + strlen(key) + 4;
	mk = malloc(n);
	if (mk == NULL)
		abort();
	snprintf(mk, n, "%sw/%s/%s", s->ns, s->lease.node, key);
	rc = etcd_call(s->etcd, "/v3/kv/put",
		       etcd_put_req(mk, "1", 1, s->lease.node), on_mark, s);
	free(mk);
	if (rc)
		return rc;
	o = op_new(s, OP_WATCH, nk, cb, arg);
	for (size_t i = 0; i < nk; i++)
		o->keys[i] = ekey(s, keys[i]);
	o->need = 1;
	o->timeout_ms = timeout_ms;
	s->w = o;
	if (timeout_ms >= 0)
		uv_timer_start(&s->wtimer, on_wtimer, (uint64_t)timeout_ms, 0);
	step(o);
	return 0;
}

static void kv_on_vanish(void *kv, void (*cb)(void *, const char *, size_t),
			 void *arg)
{
	struct crun_rdzv_etcd *s = kv;

	s->vanish_cb = cb;
	s->vanish_arg = arg;
}

/* ---- What the parts report ------------------------------------------- */

/*
 * A PUT of k: read again if o waits for it. If o is reading right now, its
 * answer may predate the PUT (the watch and the read are two connections):
 * mark it, so a pass that found keys missing reads once more.
 */
static int wants(struct kop *o, const char *k)
{
	if (o == NULL || (o->type != OP_MGET && o->type != OP_WATCH) || o->dead)
		return 0;
	for (size_t i = 0; i < o->n; i++) {
		if (strcmp(o->keys[i], k) != 0)
			continue;
		if (o->waiting)
			return 1;
		o->dirty = 1;
		return 0;
	}
	return 0;
}

static void on_watch_put(void *data, const char *k)
{
	struct crun_rdzv_etcd *s = data;

	if (wants(s->head, k))
		step(s->head);
	if (wants(s->w, k))
		step(s->w);
}

/* A node's mark went (key "<ns>w/<node>/<key>"): that node vanished. */
static void on_watch_deleted(void *data, const char *k)
{
	struct crun_rdzv_etcd *s = data;
	const char *p = k + strlen(s->ns), *slash;

	if (strncmp(p, "w/", 2) == 0 && (slash = strchr(p + 2, '/')) != NULL &&
	    s->vanish_cb &&
	    strncmp(p + 2, s->lease.node, (size_t)(slash - p - 2)) != 0)
		s->vanish_cb(s->vanish_arg, slash + 1, strlen(slash + 1));
}

/* Something changed, or may have: every waiter reads again. */
static void on_watch_recheck(void *data)
{
	struct crun_rdzv_etcd *s = data;

	if (s->head && s->head->waiting)
		step(s->head);
	if (s->w && s->w->waiting)
		step(s->w);
}

static void on_part_fatal(void *data, int status, const char *why)
{
	fail_all(data, status, why);
}

static void on_lease_opened(void *data, int status, const char *why)
{
	struct crun_rdzv_etcd *s = data;
	rdzv_etcd_open_cb cb = s->open_cb;

	s->open_cb = NULL;
	if (status) {
		s->failed = status;
		snprintf(s->errmsg, sizeof(s->errmsg), "%s", why);
	} else if (!s->closing && *s->lease.node) {
		rdzv_etcd_watch_start(&s->watch, s->lease.rev);
	}
	if (cb)
		cb(s, status, s->open_data);
}

static void on_lease_tick(void *data)
{
	struct crun_rdzv_etcd *s = data;

	rdzv_etcd_watch_check(&s->watch);
}

static void close_now(struct crun_rdzv_etcd *s);

static void on_lease_revoked(void *data)
{
	close_now(data);
}

static const struct rdzv_etcd_watch_ops watch_ops = {
    .put = on_watch_put,
    .deleted = on_watch_deleted,
    .recheck = on_watch_recheck,
    .fatal = on_part_fatal,
};

static const struct rdzv_etcd_lease_ops lease_ops = {
    .opened = on_lease_opened,
    .tick = on_lease_tick,
    .fatal = on_part_fatal,
    .revoked = on_lease_revoked,
};

/* ---- Opening and closing --------------------------------------------- */

double rdzv_etcd_attempt(double lease_ttl)
{
	double a = lease_ttl / 4;

	return a < 0.5 ? 0.5 : a > 3 ? 3 : a;
}

static int read_password(const char *path, char *out, size_t len, char *errmsg,
			 size_t errlen)
{
	FILE *fp = fopen(path, "r");
	size_t n;

	if (fp == NULL) {
		snprintf(errmsg, errlen, "cannot read password_file '%s': %s",
			 path, strerror(errno));
		return CRUN_ECONFIG;
	}
	n = fread(out, 1, len - 1, fp);
	fclose(fp);
	out[n] = '\0';
	out[strcspn(out, "\r\n")] = '\0';
	return 0;
}

int rdzv_etcd_open(uv_loop_t *loop, const struct rdzv_etcd_opts *o,
		   rdzv_etcd_open_cb cb, void *data,
		   struct crun_rdzv_etcd **out)
{
	struct crun_rdzv_etcd *s = calloc(1, sizeof(*s));
	struct etcd_opts eo;
	char pw[256] = "";
	double ttl, timeout;
	int rc;

	if (s == NULL)
		return UV_ENOMEM;
	if (o->password_file && *o->password_file &&
	    (rc = read_password(o->password_file, pw, sizeof(pw), o->errmsg,
				o->errlen))) {
		free(s);
		return rc;
	}
	memset(&eo, 0, sizeof(eo));
	eo.endpoints = o->endpoints;
	eo.https = o->https;
	eo.cacert = o->cacert;
	eo.cert = o->cert;
	eo.key = o->key;
	eo.user = o->user;
	eo.password = pw;
	eo.timeout = o->timeout;
	eo.lim = o->lim;
	/* A hung member must not cost this node its lease: a keepalive
	 * (every lease_ttl/3) that waits lease_ttl/4 on it, then fails over,
	 * lands in time. */
	eo.attempt = rdzv_etcd_attempt(o->lease_ttl > 0 ? o->lease_ttl : 10);
	rc = etcd_new(loop, &eo, o->errmsg, o->errlen, &s->etcd);
	memset(pw, 0, sizeof(pw));
	if (rc) {
		free(s);
		return rc;
	}
	s->loop = loop;
	ttl = o->lease_ttl > 0 ? o->lease_ttl : 10;
	if (!o->readonly && ttl < LEASE_MIN_S)
		log_warn(
		    "lease_ttl=%g s may not survive a failover "
		    "between etcd members (a keepalive every %.1f s, %.1f s "
		    "on a hung member): this node may be counted lost; use "
		    "lease_ttl=%d or more",
		    ttl, ttl / 3, eo.attempt, LEASE_MIN_S);
	timeout = o->timeout > 0 ? o->timeout : 60;
	snprintf(s->ns, sizeof(s->ns), "%s/%s/", o->prefix ? o->prefix : "",
		 o->run_id);
	uv_timer_init(loop, &s->mtimer);
	uv_timer_init(loop, &s->wtimer);
	uv_timer_init(loop, &s->btimer);
	s->mtimer.data = s->wtimer.data = s->btimer.data = s;
	srand((unsigned)uv_hrtime() ^ (unsigned)getpid());
	rdzv_etcd_lease_init(&s->lease, loop, s->etcd, s->ns, ttl, timeout,
			     &lease_ops, s);
	rdzv_etcd_watch_init(&s->watch, loop, s->etcd, s->ns, timeout,
			     &watch_ops, s);
	s->open_cb = cb;
	s->open_data = data;
	*out = s;
	rdzv_etcd_lease_open(&s->lease, o->readonly);
	return 0;
}

const char *rdzv_etcd_errmsg(const struct crun_rdzv_etcd *s)
{
	return s->errmsg;
}

static void on_etcd_closed(void *data)
{
	struct crun_rdzv_etcd *s = data;

	if (s->close_cb)
		s->close_cb(s->close_data);
}

static void on_closed(void *data)
{
	struct crun_rdzv_etcd *s = data;

	if (--s->handles == 0)
		etcd_close(s->etcd, on_etcd_closed, s);
}

static void on_timer_closed(uv_handle_t *h)
{
	on_closed(h->data);
}

static void close_now(struct crun_rdzv_etcd *s)
{
	if (s->close_started)
		return;
	s->close_started = 1;
	s->handles = 5;
	uv_close((uv_handle_t *)&s->btimer, on_timer_closed);
	uv_close((uv_handle_t *)&s->mtimer, on_timer_closed);
	uv_close((uv_handle_t *)&s->wtimer, on_timer_closed);
	rdzv_etcd_watch_close(&s->watch, on_closed);
	rdzv_etcd_lease_close(&s->lease, on_closed);
}

static void on_close_timeout(uv_timer_t *t)
{
	close_now(t->data);
}

void rdzv_etcd_close(struct crun_rdzv_etcd *s, void (*cb)(void *data),
		     void *data)
{
	s->close_cb = cb;
	s->close_data = data;
	/* Pending requests fail now, while their owners still exist. */
	while (s->head)
		reply(s->head, CRUN_ECANCELED, NULL);
	if (s->w)
		reply(s->w, CRUN_ECANCELED, NULL);
	s->closing = 1;
	s->open_cb = NULL;
	rdzv_etcd_watch_stop(&s->watch);
	rdzv_etcd_lease_stop(&s->lease);
	if (!*s->lease.node || s->failed)
		return close_now(s);
	uv_timer_start(&s->mtimer, on_close_timeout, CLOSE_MS, 0);
	/*
	 * Writes already sent (a last one out's end marks, the "over" of
	 * the nodes left out) land before this node's lease goes: with it
	 * the job's keys may go, and a close would abort them.
	 */
	if (s->calls_out > 0)
		s->revoke_pending = 1;
	else
		rdzv_etcd_lease_revoke(&s->lease);
}

void rdzv_etcd_free(struct crun_rdzv_etcd *s)
{
	if (s == NULL)
		return;
	cache_clear(s);
	rdzv_etcd_watch_free(&s->watch);
	etcd_free(s->etcd);
	free(s);
}

const struct rdzv_kv_ops rdzv_etcd_ops = {
    .add = kv_add,
    .set = kv_set,
    .compare_set = kv_compare_set,
    .multi_get = kv_multi_get,
    .peek = kv_peek,
    .multi_set = kv_multi_set,
    .watch = kv_watch,
    .on_vanish = kv_on_vanish,
};

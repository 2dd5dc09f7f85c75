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
 * expiring is fatal.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "crun/err.h"
#include "crun/etcd.h"
#include "crun/log.h"
#include "crun/rdzv_etcd.h"

#define CHUNK 64      /* operations per txn (etcd allows 128) */
#define CLOSE_MS 3000 /* revoking at exit, at most */
#define CACHE_MAX 512
#define LEASE_MIN_S 2 /* the shortest lease_ttl that survives a failover */
#define WATCH_STABLE_MS 5000 /* a watch that lived this long worked */
#define CREATED_MS 2000	     /* etcd confirms a new watch within this */

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
	char ns[512];  /* "<prefix>/<run_id>/" */
	char node[32]; /* this node's lease ID */
	char job[32];  /* the job's lease ID */
	char cand[32]; /* a job lease we granted while opening */
	double ttl, timeout;
	struct kop *head, *tail; /* the main channel */
	struct kop *w;		 /* the watch channel */
	uv_timer_t mtimer, wtimer, ka, restart, btimer;
	int timers;
	struct etcd_req *stream;
	int64_t rev;	  /* last revision seen on the watch */
	uint64_t wopened; /* loop time the watch was last opened */
	uint64_t wsince;  /* first of the watch's ends in a row (0: none) */
	int wtries;	  /* its ends in a row */
	int wcreated;	  /* etcd confirmed the watch open now */
	int reopen;	  /* the stream must be replaced */
	unsigned stream_failovers;
	int failed;
	int closing;
	int opening;
	int kicking, rekick;
	int close_started;
	int calls_out;	    /* the operations' calls not yet answered */
	int revoke_pending; /* closing: revoke once they are */
	int readonly;	    /* rdzv_etcd_opts.readonly */
	json_t *pending;    /* watch messages not yet handled */
	uv_timer_t evtimer;
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

static void kick(struct crun_rdzv_etcd *s);
static void step(struct kop *o);
static void watch_open(struct crun_rdzv_etcd *s);
static void on_restart(uv_timer_t *t);
static void watch_retry(struct crun_rdzv_etcd *s, const char *why,
			int may_give_up);

/* --- small helpers ------------------------------------------------------ */

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

/* --- replies ------------------------------------------------------------ */

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
	while (s->head)
		reply(s->head, status, NULL);
	if (s->w)
		reply(s->w, status, NULL);
}

/*
 * Account for a finished call: NULL when the op no longer wants it (then
 * freed if it was the last call out).
 */
static void revoke_node(struct crun_rdzv_etcd *s);

static struct kop *call_back(void *arg)
{
	struct kop *o = arg;
	struct crun_rdzv_etcd *s = o->s;

	o->inflight--;
	if (--s->calls_out == 0 && s->revoke_pending) {
		s->revoke_pending = 0;
		revoke_node(s);
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

static json_t *txn_resp(json_t *resp, size_t i, const char *kind)
{
	return json_object_get(
	    json_array_get(json_object_get(resp, "responses"), i), kind);
}

/* --- the main channel --------------------------------------------------- */

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
		resp = txn_resp(resp, 0, "response_range");
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
	if (!etcd_kv_first(txn_resp(resp, 0, "response_range"), &v, &n, NULL))
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
		json_t *rr = txn_resp(resp, i - i0, "response_range");

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
	const char *lease = s->job;
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
					 s->node, ++s->seq);
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

/* --- the operations ----------------------------------------------------- */

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
	n = strlen(s->ns) + strlen(s->node) + strlen(key) + 4;
	mk = malloc(n);
	if (mk == NULL)
		abort();
	snprintf(mk, n, "%sw/%s/%s", s->ns, s->node, key);
	rc = etcd_call(s->etcd, "/v3/kv/put", etcd_put_req(mk, "1", 1, s->node),
		       on_mark, s);
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

/* --- the watch stream --------------------------------------------------- */

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

/* Something changed, or may have: every waiter reads again. */
static void recheck_all(struct crun_rdzv_etcd *s)
{
	if (s->head && s->head->waiting)
		step(s->head);
	if (s->w && s->w->waiting)
		step(s->w);
}

static void on_event(struct crun_rdzv_etcd *s, json_t *ev)
{
	json_t *kv = json_object_get(ev, "kv");
	const char *type = json_string_value(json_object_get(ev, "type"));
	size_t nslen = strlen(s->ns), klen;
	char *k = NULL;
	int64_t rev = etcd_int(kv, "mod_revision");

	if (rev > s->rev)
		s->rev = rev;
	if (etcd_unb64(json_object_get(kv, "key"), &k, &klen))
		return;
	if (klen <= nslen + 2 || memcmp(k, s->ns, nslen) != 0)
		goto out;
	if (type && strcmp(type, "DELETE") == 0) {
		/* A node's mark went: that node vanished (or left). */
		const char *p = k + nslen, *slash;

		if (strncmp(p, "w/", 2) == 0 &&
		    (slash = strchr(p + 2, '/')) != NULL && s->vanish_cb &&
		    strncmp(p + 2, s->node, (size_t)(slash - p - 2)) != 0)
			s->vanish_cb(s->vanish_arg, slash + 1,
				     strlen(slash + 1));
		goto out;
	}
	if (wants(s->head, k))
		step(s->head);
	if (wants(s->w, k))
		step(s->w);
out:
	free(k);
}

static void handle_msg(struct crun_rdzv_etcd *s, json_t *msg)
{
	json_t *res = json_object_get(msg, "result"), *evs, *ev;
	int64_t hrev;
	size_t i;

	if (res == NULL)
		return; /* an error: the stream ends and is reopened */
	hrev = etcd_int(json_object_get(res, "header"), "revision");
	if (etcd_int(res, "compact_revision") > 0) {
		/*
		 * Compacted past us: watch again from the oldest revision
		 * etcd still has and read every wait again, so a PUT lands
		 * in the reads or in the new watch.
		 */
		int64_t c = etcd_int(res, "compact_revision");

		log_say("etcd compacted past revision %lld of this "
			"node's watch; reading every wait again",
			(long long)s->rev + 1);
		s->rev = c - 1;
		s->reopen = 1;
		uv_timer_start(&s->restart, on_restart, 0, 0);
		recheck_all(s);
		return;
	}
	if (json_is_true(json_object_get(res, "canceled"))) {
		const char *why =
		    json_string_value(json_object_get(res, "cancel_reason"));
		char m[300];

		snprintf(m, sizeof(m), "etcd canceled this node's watch (%s)",
			 why && *why ? why : "no reason given");
		s->reopen = 1;
		watch_retry(s, m, 1);
		recheck_all(s);
		return;
	}
	if (json_is_true(json_object_get(res, "created")))
		s->wcreated = 1;
	if (json_is_true(json_object_get(res, "created")) && s->rev == 0 &&
	    hrev > 0)
		s->rev = hrev;
	evs = json_object_get(res, "events");
	if (json_array_size(evs))
		s->wtries = 0, s->wsince = 0; /* the watch works */
	json_array_foreach(evs, i, ev) on_event(s, ev);
}

static void on_evtimer(uv_timer_t *t)
{
	struct crun_rdzv_etcd *s = t->data;
	json_t *q = s->pending, *m;
	size_t i;

	s->pending = json_array();
	json_array_foreach(q, i, m)
	{
		if (s->closing || s->failed)
			break;
		handle_msg(s, m);
	}
	json_decref(q);
}

/*
 * Called from inside curl's write callback, where the transfers must not
 * change: handled from the loop instead.
 */
static void on_watch_msg(json_t *msg, void *arg)
{
	struct crun_rdzv_etcd *s = arg;

	json_array_append(s->pending, msg);
	if (!uv_is_active((uv_handle_t *)&s->evtimer))
		uv_timer_start(&s->evtimer, on_evtimer, 0, 0);
}

static void on_restart(uv_timer_t *t)
{
	struct crun_rdzv_etcd *s = t->data;

	if (s->closing || s->failed)
		return;
	if (s->stream && s->reopen) {
		etcd_req_cancel(s->stream);
		s->stream = NULL;
	}
	s->reopen = 0;
	if (s->stream == NULL)
		watch_open(s);
}

static void on_watch_end(int status, json_t *resp, void *arg)
{
	struct crun_rdzv_etcd *s = arg;
	char m[1200];

	(void)resp;
	s->stream = NULL;
	if (status != CRUN_ECANCELED && json_array_size(s->pending)) {
		/* Its last messages first (they may say why it ended). */
		uv_timer_stop(&s->evtimer);
		on_evtimer(&s->evtimer);
	}
	if (status == CRUN_ECANCELED || s->closing || s->failed ||
	    (s->reopen && uv_is_active((uv_handle_t *)&s->restart)))
		return; /* (a cancel already set the reopening) */
	/* Reopen from where we were, after a pause. */
	snprintf(m, sizeof(m), "this node's etcd watch ended (%s)",
		 status ? etcd_errmsg(s->etcd) : "closed by etcd");
	/* No answer at all: the other requests tell (naming endpoints). */
	watch_retry(s, m, status != CRUN_EETCD);
}

/*
 * The watch ended or was canceled (why): open it again after a pause that
 * doubles; saying why once for each run of ends, and giving up (fatal)
 * once they went on for the timeout. A watch that lived a while before
 * ending starts a new run.
 */
static void watch_retry(struct crun_rdzv_etcd *s, const char *why,
			int may_give_up)
{
	uint64_t now = uv_now(s->loop);
	char m[1400];

	if (s->wsince == 0 || now - s->wopened >= WATCH_STABLE_MS) {
		s->wsince = now;
		s->wtries = 0;
		log_say("%s; opening it again", why);
	}
	if (may_give_up && now - s->wsince >= (uint64_t)(s->timeout * 1000)) {
		snprintf(m, sizeof(m), "%s, again and again for %.0f s", why,
			 s->timeout);
		return fail_all(s, CRUN_EETCD, m);
	}
	uv_timer_start(&s->restart, on_restart,
		       etcd_backoff_ms(etcd_limits(s->etcd), s->wtries++), 0);
}

static void watch_open(struct crun_rdzv_etcd *s)
{
	int rc;

	s->wopened = uv_now(s->loop);
	s->wcreated = 0;
	s->stream_failovers = etcd_failovers(s->etcd);
	rc = etcd_stream(s->etcd, "/v3/watch",
			 etcd_watch_req(s->ns, s->rev ? s->rev + 1 : 0),
			 on_watch_msg, on_watch_end, s, &s->stream);
	if (rc)
		s->stream = NULL;
}

/* --- leases ------------------------------------------------------------- */

static void grant_node(struct crun_rdzv_etcd *s);

static void on_ka(int status, json_t *resp, void *arg)
{
	struct crun_rdzv_etcd *s = arg;
	json_t *res = json_object_get(resp, "result");
	const char *id = json_string_value(json_object_get(res, "ID"));

	if (status == CRUN_ECANCELED || s->closing)
		return;
	if (status)
		return fail_all(s, status, etcd_errmsg(s->etcd));
	if (etcd_int(res, "TTL") > 0)
		return;
	if (id && strcmp(id, s->job) == 0)
		return fail_all(s, CRUN_EETCD,
				"the job's etcd lease expired (etcd did not "
				"answer for longer than its TTL)");
	if (id && strcmp(id, s->node) == 0) {
		log_say("this node's etcd lease expired (the others "
			"count it as lost); taking a new one");
		grant_node(s);
	}
}

static void keepalive(struct crun_rdzv_etcd *s, const char *id)
{
	if (*id)
		etcd_call(s->etcd, "/v3/lease/keepalive",
			  json_pack("{s:s}", "ID", id), on_ka, s);
}

static void on_ka_tick(uv_timer_t *t)
{
	struct crun_rdzv_etcd *s = t->data;

	if (s->failed || s->closing)
		return;
	keepalive(s, s->node);
	keepalive(s, s->job);
	if (s->stream && !s->wcreated &&
	    uv_now(s->loop) - s->wopened >= CREATED_MS) {
		/* Without it this node would never see the others' writes. */
		etcd_req_cancel(s->stream);
		s->stream = NULL;
		return watch_retry(s,
				   "etcd accepted this node's watch but never "
				   "confirmed it (no answer in 2 s)",
				   1);
	}
	/* After a failover the watch moves to the endpoint that answers. */
	if (s->stream && etcd_failovers(s->etcd) != s->stream_failovers) {
		etcd_req_cancel(s->stream);
		s->stream = NULL;
		watch_open(s);
	}
}

static void open_done(struct crun_rdzv_etcd *s, int status, const char *why)
{
	rdzv_etcd_open_cb cb = s->open_cb;

	s->open_cb = NULL;
	s->opening = 0;
	if (status) {
		s->failed = status;
		snprintf(s->errmsg, sizeof(s->errmsg), "%s", why);
	}
	if (cb)
		cb(s, status, s->open_data);
}

static void on_alive(int status, json_t *resp, void *arg)
{
	struct crun_rdzv_etcd *s = arg;

	if (status == CRUN_ECANCELED)
		return;
	if (s->opening && status && etcd_int(resp, "code") == 5) {
		/* The lease expired before we used it (etcd is slow): again. */
		return grant_node(s);
	}
	if (s->opening) {
		if (status)
			return open_done(s, status, etcd_errmsg(s->etcd));
		if (s->stream == NULL)
			watch_open(s);
		uv_timer_start(&s->ka, on_ka_tick,
			       (uint64_t)(s->ttl * 1000 / 3),
			       (uint64_t)(s->ttl * 1000 / 3));
		open_done(s, 0, "");
	}
}

static void put_alive(struct crun_rdzv_etcd *s)
{
	char k[600];

	snprintf(k, sizeof(k), "%sn/%s", s->ns, s->node);
	if (etcd_call(s->etcd, "/v3/kv/put", etcd_put_req(k, "1", 1, s->node),
		      on_alive, s) &&
	    s->opening)
		open_done(s, CRUN_EETCD, "cannot reach etcd");
}

static void on_job_lease(int status, json_t *resp, void *arg)
{
	struct crun_rdzv_etcd *s = arg;
	char *v = NULL;
	size_t n;

	if (status == CRUN_ECANCELED)
		return;
	if (status)
		return open_done(s, status, etcd_errmsg(s->etcd));
	if (s->rev == 0)
		s->rev = etcd_int(json_object_get(resp, "header"), "revision");
	if (json_is_true(json_object_get(resp, "succeeded"))) {
		snprintf(s->job, sizeof(s->job), "%s", s->cand);
	} else if (etcd_kv_first(txn_resp(resp, 0, "response_range"), &v, &n,
				 NULL)) {
		/* Another node made it first: use theirs. */
		snprintf(s->job, sizeof(s->job), "%s", v);
		etcd_call(s->etcd, "/v3/lease/revoke",
			  json_pack("{s:s}", "ID", s->cand), NULL, NULL);
		free(v);
	}
	*s->cand = '\0';
	put_alive(s);
}

static void on_job_grant(int status, json_t *resp, void *arg)
{
	struct crun_rdzv_etcd *s = arg;
	const char *id = json_string_value(json_object_get(resp, "ID"));
	char k[600];

	if (status == CRUN_ECANCELED)
		return;
	if (status || id == NULL)
		return open_done(s, status ? status : CRUN_EPROTO,
				 etcd_errmsg(s->etcd));
	snprintf(s->cand, sizeof(s->cand), "%s", id);
	snprintf(k, sizeof(k), "%slease", s->ns);
	if (etcd_call(s->etcd, "/v3/kv/txn",
		      etcd_txn_cas(k, 1, "", 0, id, strlen(id), id),
		      on_job_lease, s))
		open_done(s, CRUN_EETCD, "cannot reach etcd");
}

static void on_job_read(int status, json_t *resp, void *arg)
{
	struct crun_rdzv_etcd *s = arg;
	char ttl[32], *v = NULL;
	size_t n;

	if (status == CRUN_ECANCELED)
		return;
	if (status)
		return open_done(s, status, etcd_errmsg(s->etcd));
	if (etcd_kv_first(resp, &v, &n, NULL)) {
		snprintf(s->job, sizeof(s->job), "%s", v);
		free(v);
		if (s->rev == 0)
			s->rev = etcd_int(json_object_get(resp, "header"),
					  "revision");
		return put_alive(s);
	}
	/* The first node: the job's lease outlives any node and an outage
	 * of read_timeout. */
	snprintf(ttl, sizeof(ttl), "%.0f",
		 s->ttl * 3 > s->timeout + s->ttl ? s->ttl * 3
						  : s->timeout + s->ttl);
	if (etcd_call(s->etcd, "/v3/lease/grant",
		      json_pack("{s:s}", "TTL", ttl), on_job_grant, s))
		open_done(s, CRUN_EETCD, "cannot reach etcd");
}

static void on_node_grant(int status, json_t *resp, void *arg)
{
	struct crun_rdzv_etcd *s = arg;
	const char *id = json_string_value(json_object_get(resp, "ID"));
	char k[600];

	if (status == CRUN_ECANCELED)
		return;
	if (status || id == NULL) {
		if (s->opening)
			return open_done(s, status ? status : CRUN_EPROTO,
					 etcd_errmsg(s->etcd));
		return fail_all(s, status ? status : CRUN_EPROTO,
				etcd_errmsg(s->etcd));
	}
	snprintf(s->node, sizeof(s->node), "%s", id);
	if (!s->opening || *s->job)
		return put_alive(s);
	/* Most nodes find the job's lease there already: one read. */
	snprintf(k, sizeof(k), "%slease", s->ns);
	if (etcd_call(s->etcd, "/v3/kv/range", etcd_range_req(k, NULL),
		      on_job_read, s))
		open_done(s, CRUN_EETCD, "cannot reach etcd");
}

/* Read-only: the job's lease tells whether the job exists. */
static void on_ro_job_read(int status, json_t *resp, void *arg)
{
	struct crun_rdzv_etcd *s = arg;
	char *v = NULL;
	size_t n;

	if (status == CRUN_ECANCELED)
		return;
	if (status)
		return open_done(s, status, etcd_errmsg(s->etcd));
	if (!etcd_kv_first(resp, &v, &n, NULL))
		return open_done(s, CRUN_ENOTFOUND,
				 "no job under this etcd prefix and run id");
	snprintf(s->job, sizeof(s->job), "%s", v);
	free(v);
	open_done(s, 0, "");
}

static void grant_node(struct crun_rdzv_etcd *s)
{
	char ttl[32];
	int rc;

	snprintf(ttl, sizeof(ttl), "%.0f", s->ttl);
	rc = etcd_call(s->etcd, "/v3/lease/grant",
		       json_pack("{s:s}", "TTL", ttl), on_node_grant, s);
	if (rc && s->opening)
		open_done(s, rc, "cannot reach etcd");
}

/* --- open and close ----------------------------------------------------- */

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
	s->ttl = o->lease_ttl > 0 ? o->lease_ttl : 10;
	if (!o->readonly && s->ttl < LEASE_MIN_S)
		log_warn(
		    "lease_ttl=%g s may not survive a failover "
		    "between etcd members (a keepalive every %.1f s, %.1f s "
		    "on a hung member): this node may be counted lost; use "
		    "lease_ttl=%d or more",
		    s->ttl, s->ttl / 3, eo.attempt, LEASE_MIN_S);
	s->timeout = o->timeout > 0 ? o->timeout : 60;
	snprintf(s->ns, sizeof(s->ns), "%s/%s/", o->prefix ? o->prefix : "",
		 o->run_id);
	uv_timer_init(loop, &s->mtimer);
	uv_timer_init(loop, &s->wtimer);
	uv_timer_init(loop, &s->ka);
	uv_timer_init(loop, &s->restart);
	uv_timer_init(loop, &s->evtimer);
	uv_timer_init(loop, &s->btimer);
	s->btimer.data = s;
	srand((unsigned)uv_hrtime() ^ (unsigned)getpid());
	s->mtimer.data = s->wtimer.data = s->ka.data = s->restart.data = s;
	s->evtimer.data = s;
	s->pending = json_array();
	s->open_cb = cb;
	s->open_data = data;
	s->opening = 1;
	s->readonly = o->readonly;
	if (s->readonly) {
		char k[600];

		snprintf(k, sizeof(k), "%slease", s->ns);
		rc = etcd_call(s->etcd, "/v3/kv/range", etcd_range_req(k, NULL),
			       on_ro_job_read, s);
		if (rc)
			open_done(s, rc, "cannot reach etcd");
	} else {
		grant_node(s);
	}
	*out = s;
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

static void on_timer_closed(uv_handle_t *h)
{
	struct crun_rdzv_etcd *s = h->data;

	if (--s->timers == 0)
		etcd_close(s->etcd, on_etcd_closed, s);
}

static void close_now(struct crun_rdzv_etcd *s)
{
	if (s->close_started)
		return;
	s->close_started = 1;
	s->timers = 6;
	uv_close((uv_handle_t *)&s->btimer, on_timer_closed);
	uv_close((uv_handle_t *)&s->evtimer, on_timer_closed);
	uv_close((uv_handle_t *)&s->mtimer, on_timer_closed);
	uv_close((uv_handle_t *)&s->wtimer, on_timer_closed);
	uv_close((uv_handle_t *)&s->ka, on_timer_closed);
	uv_close((uv_handle_t *)&s->restart, on_timer_closed);
}

static void on_close_timeout(uv_timer_t *t)
{
	close_now(t->data);
}

static void on_job_revoked(int status, json_t *resp, void *arg)
{
	(void)status;
	(void)resp;
	if (status != CRUN_ECANCELED)
		close_now(arg);
}

/* Any node left? If not, the job's keys go with its lease now. */
static void on_nodes_left(int status, json_t *resp, void *arg)
{
	struct crun_rdzv_etcd *s = arg;

	if (status == CRUN_ECANCELED)
		return;
	if (status == 0 && etcd_int(resp, "count") == 0 && *s->job &&
	    etcd_call(s->etcd, "/v3/lease/revoke",
		      json_pack("{s:s}", "ID", s->job), on_job_revoked, s) == 0)
		return;
	close_now(s);
}

static void on_node_revoked(int status, json_t *resp, void *arg)
{
	struct crun_rdzv_etcd *s = arg;
	char k[600], end[600];
	json_t *b;

	(void)resp;
	if (status == CRUN_ECANCELED)
		return;
	snprintf(k, sizeof(k), "%sn/", s->ns);
	etcd_prefix_end(k, end, sizeof(end));
	b = etcd_range_req(k, end);
	json_object_set_new(b, "count_only", json_true());
	if (etcd_call(s->etcd, "/v3/kv/range", b, on_nodes_left, s))
		close_now(s);
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
	if (s->stream) {
		etcd_req_cancel(s->stream);
		s->stream = NULL;
	}
	uv_timer_stop(&s->ka);
	uv_timer_stop(&s->restart);
	if (!*s->node || s->failed)
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
		revoke_node(s);
}

/* Closing: this node's lease goes, then maybe the job's (bounded). */
static void revoke_node(struct crun_rdzv_etcd *s)
{
	if (etcd_call(s->etcd, "/v3/lease/revoke",
		      json_pack("{s:s}", "ID", s->node), on_node_revoked, s))
		close_now(s);
}

void rdzv_etcd_free(struct crun_rdzv_etcd *s)
{
	if (s == NULL)
		return;
	cache_clear(s);
	json_decref(s->pending);
	etcd_free(s->etcd);
	free(s);
}

/*
 * The rendezvous algorithm (src/rdzv.c) without sockets: an in-memory
 * key-value store implements struct rdzv_kv_ops for several simulated nodes
 * on one loop, and each test drives one rdzv per node through a scenario:
 * a round forming with the right ranks, last call, roles, mismatches, join
 * timeouts, failure restarts, late joiners and spares, heartbeats, and the
 * static backend.
 *
 * The fake mirrors the async store client the real backend uses: every
 * reply comes back from the loop, never from inside the call; requests of
 * one client run in call order, and a multi_get that waits for its keys
 * holds back the requests queued after it (the real client sends nothing
 * after a WAIT until its answer is in). Each client has a separate watch
 * channel where a new watch cancels the previous one. Waits are woken by
 * writes and time out through one uv timer.
 *
 * Every test has the same .timeout: with mixed values Criterion's runner
 * (BoxFort's timeout list) leaks 48 bytes, which fails the ASan build.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "crun/err.h"
#include "crun/rdzv.h"

/* ---- the in-memory store ------------------------------------------------ */

struct fentry {
	struct fentry *next;
	char *key;
	char *val;
	size_t len;
};

enum freq_type { F_ADD, F_SET, F_CAS, F_MGET, F_MSET, F_WATCH };

struct freq {
	struct freq *next;
	enum freq_type type;
	uint64_t seq;
	uint64_t deadline;	/* loop time; 0: none */
	int canceled;
	char **keys;
	char **vals;
	size_t *lens;
	size_t n;
	int64_t delta;
	char *exp, *des;
	size_t elen, dlen;
	rdzv_kv_cb cb;
	void *arg;
};

struct fkv;

/* One node's connection pair: a main queue and a watch channel. */
struct fcli {
	struct fkv *s;
	struct freq *head, *tail;	/* main channel */
	struct freq *whead, *wtail;	/* watch channel: all but the last canceled */
	int closed;
};

#define FKV_MAXCLI 16

struct fkv {
	uv_loop_t *loop;
	struct fentry *map;
	struct fcli cli[FKV_MAXCLI];
	int ncli;
	uv_timer_t timer;
	uint64_t seq;
	int in_pump;
	int dirty;
	int closed;
	int frozen;	/* a silent store: requests queue, nothing is answered */
	int warp;	/* > 0: waits of 5 s or more run this many times faster */
	uint64_t nops;
};

static void fkv_kick(struct fkv *s);
static void fkv_on_timer(uv_timer_t *t);

static struct fentry *fkv_find(struct fkv *s, const char *key)
{
	for (struct fentry *e = s->map; e; e = e->next)
		if (strcmp(e->key, key) == 0)
			return e;
	return NULL;
}

static char *dupn(const void *p, size_t n)
{
	char *d = malloc(n + 1);

	cr_assert_not_null(d);
	if (n)
		memcpy(d, p, n);
	d[n] = '\0';
	return d;
}

static void fkv_put(struct fkv *s, const char *key, const void *v, size_t n)
{
	struct fentry *e = fkv_find(s, key);

	if (e == NULL) {
		e = calloc(1, sizeof(*e));
		cr_assert_not_null(e);
		e->key = dupn(key, strlen(key));
		e->next = s->map;
		s->map = e;
	} else {
		free(e->val);
	}
	e->val = dupn(v, n);
	e->len = n;
	s->dirty = 1; /* wakes waiters */
}

/* Test access to the map: the value of key or NULL. */
static const char *fkv_get(struct fkv *s, const char *key)
{
	struct fentry *e = fkv_find(s, key);

	return e ? e->val : NULL;
}

static void freq_free(struct freq *q)
{
	for (size_t i = 0; i < q->n; i++) {
		free(q->keys[i]);
		if (q->vals)
			free(q->vals[i]);
	}
	free(q->keys);
	free(q->vals);
	free(q->lens);
	free(q->exp);
	free(q->des);
	free(q);
}

static struct freq *freq_new(struct fcli *c, enum freq_type t, size_t n, int timeout_ms,
			     rdzv_kv_cb cb, void *arg)
{
	struct freq *q = calloc(1, sizeof(*q));

	cr_assert_not_null(q);
	q->type = t;
	q->seq = c->s->seq++;
	q->n = n;
	q->keys = calloc(n ? n : 1, sizeof(*q->keys));
	cr_assert_not_null(q->keys);
	q->cb = cb;
	q->arg = arg;
	if (c->s->warp > 0 && timeout_ms >= 5000)
		timeout_ms /= c->s->warp;
	if (timeout_ms >= 0)
		q->deadline = uv_now(c->s->loop) + (uint64_t)timeout_ms + (timeout_ms == 0);
	c->s->nops++;
	return q;
}

static void fcli_push(struct fcli *c, struct freq *q)
{
	if (c->tail)
		c->tail->next = q;
	else
		c->head = q;
	c->tail = q;
	fkv_kick(c->s);
}

static void fcli_wpush(struct fcli *c, struct freq *q)
{
	for (struct freq *p = c->whead; p; p = p->next)
		p->canceled = 1;
	if (c->wtail)
		c->wtail->next = q;
	else
		c->whead = q;
	c->wtail = q;
	fkv_kick(c->s);
}

static int fkv_add(void *kv, const char *key, int64_t delta, rdzv_kv_cb cb, void *arg)
{
	struct fcli *c = kv;
	struct freq *q;

	if (c->closed)
		return CRUN_ECLOSED;
	q = freq_new(c, F_ADD, 1, -1, cb, arg);
	q->keys[0] = dupn(key, strlen(key));
	q->delta = delta;
	fcli_push(c, q);
	return 0;
}

static int fkv_set(void *kv, const char *key, const void *v, size_t n, rdzv_kv_cb cb,
		   void *arg)
{
	struct fcli *c = kv;
	struct freq *q;

	if (c->closed)
		return CRUN_ECLOSED;
	q = freq_new(c, F_SET, 1, -1, cb, arg);
	q->keys[0] = dupn(key, strlen(key));
	q->des = dupn(v, n);
	q->dlen = n;
	fcli_push(c, q);
	return 0;
}

static int fkv_compare_set(void *kv, const char *key, const void *exp, size_t elen,
			   const void *des, size_t dlen, rdzv_kv_cb cb, void *arg)
{
	struct fcli *c = kv;
	struct freq *q;

	if (c->closed)
		return CRUN_ECLOSED;
	q = freq_new(c, F_CAS, 1, -1, cb, arg);
	q->keys[0] = dupn(key, strlen(key));
	q->exp = dupn(exp, elen);
	q->elen = elen;
	q->des = dupn(des, dlen);
	q->dlen = dlen;
	fcli_push(c, q);
	return 0;
}

static int fkv_multi_get(void *kv, const char *const *keys, size_t n, int timeout_ms,
			 rdzv_kv_cb cb, void *arg)
{
	struct fcli *c = kv;
	struct freq *q;

	if (c->closed)
		return CRUN_ECLOSED;
	q = freq_new(c, F_MGET, n, timeout_ms, cb, arg);
	for (size_t i = 0; i < n; i++)
		q->keys[i] = dupn(keys[i], strlen(keys[i]));
	fcli_push(c, q);
	return 0;
}

static int fkv_multi_set(void *kv, const char *const *keys, const void *const *vals,
			 const size_t *lens, size_t n, rdzv_kv_cb cb, void *arg)
{
	struct fcli *c = kv;
	struct freq *q;

	if (c->closed)
		return CRUN_ECLOSED;
	q = freq_new(c, F_MSET, n, -1, cb, arg);
	q->vals = calloc(n ? n : 1, sizeof(*q->vals));
	q->lens = calloc(n ? n : 1, sizeof(*q->lens));
	cr_assert(q->vals && q->lens);
	for (size_t i = 0; i < n; i++) {
		q->keys[i] = dupn(keys[i], strlen(keys[i]));
		q->vals[i] = dupn(vals[i], lens[i]);
		q->lens[i] = lens[i];
	}
	fcli_push(c, q);
	return 0;
}

static int fkv_watch(void *kv, const char *key, int timeout_ms, rdzv_kv_cb cb, void *arg)
{
	struct fcli *c = kv;
	struct freq *q;

	if (c->closed)
		return CRUN_ECLOSED;
	q = freq_new(c, F_WATCH, 1, timeout_ms, cb, arg);
	q->keys[0] = dupn(key, strlen(key));
	fcli_wpush(c, q);
	return 0;
}

static const struct rdzv_kv_ops fkv_ops = {
	.add = fkv_add,
	.set = fkv_set,
	.compare_set = fkv_compare_set,
	.multi_get = fkv_multi_get,
	.multi_set = fkv_multi_set,
	.watch = fkv_watch,
};

static void reply(struct freq *q, int status, const struct crun_store_reply *rep)
{
	if (q->cb)
		q->cb(status, status ? NULL : rep, q->arg);
	freq_free(q);
}

static int all_present(struct fkv *s, const struct freq *q)
{
	for (size_t i = 0; i < q->n; i++)
		if (fkv_find(s, q->keys[i]) == NULL)
			return 0;
	return 1;
}

/* Run one main-channel request against the map and reply. */
static void fkv_exec(struct fkv *s, struct freq *q)
{
	struct crun_store_reply rep = {0};
	struct fentry *e;
	char num[32];

	switch (q->type) {
	case F_ADD: {
		int64_t v = q->delta;

		e = fkv_find(s, q->keys[0]);
		if (e)
			v += strtoll(e->val, NULL, 10);
		snprintf(num, sizeof(num), "%lld", (long long)v);
		fkv_put(s, q->keys[0], num, strlen(num));
		rep.num = v;
		return reply(q, 0, &rep);
	}
	case F_SET:
		fkv_put(s, q->keys[0], q->des, q->dlen);
		return reply(q, 0, &rep);
	case F_CAS: {
		char *cur;

		e = fkv_find(s, q->keys[0]);
		if (e == NULL) {
			if (q->elen == 0) {
				fkv_put(s, q->keys[0], q->des, q->dlen);
				rep.value = q->des;
				rep.len = q->dlen;
			} else {
				rep.value = q->exp;
				rep.len = q->elen;
			}
			return reply(q, 0, &rep);
		}
		if (e->len == q->elen && memcmp(e->val, q->exp, q->elen) == 0) {
			fkv_put(s, q->keys[0], q->des, q->dlen);
			rep.value = q->des;
			rep.len = q->dlen;
			return reply(q, 0, &rep);
		}
		/* A copy: the callback may write the key and free e->val. */
		cur = dupn(e->val, e->len);
		rep.value = cur;
		rep.len = e->len;
		reply(q, 0, &rep);
		free(cur);
		return;
	}
	case F_MSET:
		for (size_t i = 0; i < q->n; i++)
			fkv_put(s, q->keys[i], q->vals[i], q->lens[i]);
		return reply(q, 0, &rep);
	case F_MGET:
	case F_WATCH: {
		size_t n = q->n;
		struct crun_store_iov *iov = calloc(n ? n : 1, sizeof(*iov));
		char **copies = calloc(n ? n : 1, sizeof(*copies));

		cr_assert(iov && copies);
		for (size_t i = 0; i < q->n; i++) {
			e = fkv_find(s, q->keys[i]);
			copies[i] = dupn(e->val, e->len);
			iov[i].base = copies[i];
			iov[i].len = e->len;
		}
		if (q->type == F_WATCH) {
			rep.value = copies[0];
			rep.len = iov[0].len;
		} else {
			rep.values = iov;
			rep.nvalues = q->n;
		}
		reply(q, 0, &rep); /* frees q */
		for (size_t i = 0; i < n; i++)
			free(copies[i]);
		free(copies);
		free(iov);
		return;
	}
	}
}

/* Serve what is ready. Requests made by the callbacks wait for the next pass. */
static void fkv_pump(struct fkv *s)
{
	uint64_t limit = s->seq, now = uv_now(s->loop), next = 0;
	int progress;

	if (s->frozen)
		return;
	s->in_pump = 1;
	do {
		progress = 0;
		s->dirty = 0;
		for (int i = 0; i < s->ncli; i++) {
			struct fcli *c = &s->cli[i];
			struct freq *q;

			while ((q = c->head) != NULL && q->seq < limit) {
				int ready = q->type != F_MGET || all_present(s, q);
				int late = q->deadline && now >= q->deadline;

				if (!ready && !late)
					break;
				c->head = q->next;
				if (c->head == NULL)
					c->tail = NULL;
				progress = 1;
				if (ready)
					fkv_exec(s, q);
				else
					reply(q, CRUN_ETIMEDOUT, NULL);
			}
			for (struct freq **pp = &c->whead; (q = *pp) != NULL;) {
				int ready = all_present(s, q);
				int late = q->deadline && now >= q->deadline;

				if (q->seq >= limit || (!q->canceled && !ready && !late)) {
					pp = &q->next;
					continue;
				}
				*pp = q->next;
				if (c->wtail == q) {
					c->wtail = NULL;
					for (struct freq *p = c->whead; p; p = p->next)
						c->wtail = p;
				}
				progress = 1;
				if (q->canceled)
					reply(q, CRUN_ECANCELED, NULL);
				else if (ready)
					fkv_exec(s, q);
				else
					reply(q, CRUN_ETIMEDOUT, NULL);
				pp = &c->whead; /* the callback may have changed the list */
			}
		}
	} while (progress || s->dirty);
	s->in_pump = 0;
	if (s->closed)
		return;
	if (s->seq > limit) {
		uv_timer_start(&s->timer, fkv_on_timer, 0, 0);
		return;
	}
	/* Nothing new: sleep until the first deadline of what still waits. */
	for (int i = 0; i < s->ncli; i++) {
		struct fcli *c = &s->cli[i];

		if (c->head && c->head->deadline && (!next || c->head->deadline < next))
			next = c->head->deadline;
		for (struct freq *q = c->whead; q; q = q->next)
			if (q->deadline && (!next || q->deadline < next))
				next = q->deadline;
	}
	if (next)
		uv_timer_start(&s->timer, fkv_on_timer, next > now ? next - now : 0, 0);
	else
		uv_timer_stop(&s->timer);
}

static void fkv_on_timer(uv_timer_t *t)
{
	fkv_pump(t->data);
}

static void fkv_kick(struct fkv *s)
{
	if (!s->in_pump && !s->closed)
		uv_timer_start(&s->timer, fkv_on_timer, 0, 0);
}

static void fkv_init(struct fkv *s, uv_loop_t *loop)
{
	memset(s, 0, sizeof(*s));
	s->loop = loop;
	cr_assert_eq(uv_timer_init(loop, &s->timer), 0);
	s->timer.data = s;
}

static struct fcli *fkv_client(struct fkv *s)
{
	struct fcli *c;

	cr_assert_lt(s->ncli, FKV_MAXCLI);
	c = &s->cli[s->ncli++];
	c->s = s;
	return c;
}

/*
 * Close one client: every pending request fails with CRUN_ECANCELED at
 * once (as store_aclient_close does), and later requests get CRUN_ECLOSED.
 */
static void fcli_close(struct fcli *c)
{
	struct freq *q;

	if (c->closed)
		return;
	c->closed = 1;
	while ((q = c->head) != NULL) {
		c->head = q->next;
		if (c->head == NULL)
			c->tail = NULL;
		reply(q, CRUN_ECANCELED, NULL);
	}
	while ((q = c->whead) != NULL) {
		c->whead = q->next;
		if (c->whead == NULL)
			c->wtail = NULL;
		reply(q, CRUN_ECANCELED, NULL);
	}
}

/* Close every client, then the timer; the map is freed by fkv_free. */
static void fkv_close(struct fkv *s)
{
	for (int i = 0; i < s->ncli; i++)
		fcli_close(&s->cli[i]);
	s->closed = 1;
	uv_close((uv_handle_t *)&s->timer, NULL);
}

static void fkv_free(struct fkv *s)
{
	struct fentry *e;

	while ((e = s->map) != NULL) {
		s->map = e->next;
		free(e->key);
		free(e->val);
		free(e);
	}
}

/* ---- the simulated nodes ------------------------------------------------ */

#define MAXNODES 8

struct node {
	struct world *w;
	int id;
	char host[16], addr[32], role[32];
	struct rdzv_opts o;
	struct fcli *kv;
	struct crun_rdzv *r;
	int alive;
	/* round callback */
	int nround;
	int status;
	struct rdzv_result res;
	char errmsg[768];
	uint64_t round_at;
	/* on_end */
	int nend;
	int end_kind;
	char end_why[512];
	uint64_t end_at;
	/* rdzv_may_restart, rdzv_finish */
	int nmay, may_ok;
	int nfinish;
	int masters;	/* start_master calls */
};

struct world {
	uv_loop_t loop;
	struct fkv kv;
	struct node n[MAXNODES];
	int nn;
	uv_timer_t guard;
	uv_timer_t tick;	/* wakes uv_run so run_until sees its predicate */
	int expired;
};

static struct world W;

static int on_start_master(void *data, int round, int *port)
{
	struct node *n = data;

	n->masters++;
	*port = 29500 + 10 * n->id + round;
	return 0;
}

static void on_end(struct crun_rdzv *r, int kind, const char *why, void *data)
{
	struct node *n = data;

	(void)r;
	n->nend++;
	n->end_kind = kind;
	n->end_at = uv_now(&n->w->loop);
	snprintf(n->end_why, sizeof(n->end_why), "%s", why);
}

static void on_round(struct crun_rdzv *r, int status, const struct rdzv_result *res,
		     void *data)
{
	struct node *n = data;

	n->nround++;
	n->status = status;
	n->round_at = uv_now(&n->w->loop);
	if (status == 0)
		n->res = *res;
	else
		memset(&n->res, 0, sizeof(n->res));
	snprintf(n->errmsg, sizeof(n->errmsg), "%s", rdzv_errmsg(r));
}

static void on_may(struct crun_rdzv *r, int ok, void *data)
{
	struct node *n = data;

	(void)r;
	n->nmay++;
	n->may_ok = ok;
}

static void on_finish(struct crun_rdzv *r, void *data)
{
	struct node *n = data;

	(void)r;
	n->nfinish++;
}

static void world_init(void)
{
	memset(&W, 0, sizeof(W));
	cr_assert_eq(uv_loop_init(&W.loop), 0);
	fkv_init(&W.kv, &W.loop);
	cr_assert_eq(uv_timer_init(&W.loop, &W.guard), 0);
	cr_assert_eq(uv_timer_init(&W.loop, &W.tick), 0);
}

/* Defaults shared by every test: small timeouts so the suite runs fast. */
static struct node *node_add(int id, int nproc, int store_host, int min, int max)
{
	struct node *n = &W.n[W.nn++];

	cr_assert_leq(W.nn, MAXNODES);
	n->w = &W;
	n->id = id;
	snprintf(n->host, sizeof(n->host), "n%d", id);
	snprintf(n->addr, sizeof(n->addr), "10.0.0.%d", id);
	snprintf(n->role, sizeof(n->role), "default");
	n->o.run_id = "job1";
	n->o.min_nodes = min;
	n->o.max_nodes = max;
	n->o.static_rank = -1;
	n->o.max_restarts = 1;
	n->o.host = n->host;
	n->o.addr = n->addr;
	n->o.is_store_host = store_host;
	n->o.nproc = nproc;
	n->o.role = n->role;
	n->o.join_timeout = 1.0;
	n->o.last_call_timeout = 0.2;
	n->o.close_timeout = 0.3;
	n->o.keep_alive_interval = 0.05;
	n->o.keep_alive_max_attempt = 3;
	n->o.start_master = on_start_master;
	n->o.data = n;
	n->kv = fkv_client(&W.kv);
	n->status = 1;
	return n;
}

/* Create the rdzv (opts are final now) and join its first round. */
static void node_start(struct node *n)
{
	cr_assert_eq(rdzv_new(&W.loop, &n->o, &fkv_ops, n->kv, on_end, &n->r), 0);
	n->alive = 1;
	cr_assert_eq(rdzv_next(n->r, on_round, n), 0);
}

static void node_next(struct node *n)
{
	n->nround = 0;
	n->status = 1;
	cr_assert_eq(rdzv_next(n->r, on_round, n), 0);
}

/* The node stops dead: its rdzv goes and so does its store connection. */
static void node_kill(struct node *n)
{
	if (!n->alive)
		return;
	n->alive = 0;
	rdzv_free(n->r);
	fcli_close(n->kv);
}

static void on_guard(uv_timer_t *t)
{
	(void)t;
	W.expired = 1;
}

static void on_tick(uv_timer_t *t)
{
	(void)t;
}

/* Run the loop until pred() holds or ms pass; returns pred(). */
static int run_until(int (*pred)(void), int ms)
{
	W.expired = 0;
	uv_timer_start(&W.guard, on_guard, (uint64_t)ms, 0);
	uv_timer_start(&W.tick, on_tick, 2, 2);
	while (!(pred && pred()) && !W.expired)
		uv_run(&W.loop, UV_RUN_ONCE);
	uv_timer_stop(&W.guard);
	uv_timer_stop(&W.tick);
	return pred ? pred() : 1;
}

/* Run the loop for ms, whatever happens. */
static void run_for(int ms)
{
	run_until(NULL, ms);
}

static int all_rounds(void)
{
	for (int i = 0; i < W.nn; i++)
		if (W.n[i].alive && W.n[i].nround == 0)
			return 0;
	return 1;
}

static int all_ends(void)
{
	for (int i = 0; i < W.nn; i++)
		if (W.n[i].alive && W.n[i].nend == 0)
			return 0;
	return 1;
}

static int all_mays(void)
{
	for (int i = 0; i < W.nn; i++)
		if (W.n[i].alive && W.n[i].nend && W.n[i].nmay == 0)
			return 0;
	return 1;
}

/* Free everything, drain the loop and check that it closes cleanly. */
static void world_close(void)
{
	for (int i = 0; i < W.nn; i++)
		node_kill(&W.n[i]);
	fkv_close(&W.kv);
	uv_close((uv_handle_t *)&W.guard, NULL);
	uv_close((uv_handle_t *)&W.tick, NULL);
	cr_assert_eq(uv_run(&W.loop, UV_RUN_DEFAULT), 0);
	cr_assert_eq(uv_loop_close(&W.loop), 0);
	fkv_free(&W.kv);
}

static void start_all(void)
{
	for (int i = 0; i < W.nn; i++)
		node_start(&W.n[i]);
}

static void assert_formed(struct node *n, int round, int grank, int gworld, int base,
			  int world)
{
	cr_assert_eq(n->nround, 1, "%s: %d round callbacks", n->host, n->nround);
	cr_assert_eq(n->status, 0, "%s: status %s (%s)", n->host, crun_err_name(n->status),
		     n->errmsg);
	cr_assert_eq(n->res.round, round, "%s: round %d", n->host, n->res.round);
	cr_assert_eq(n->res.ranks.group_rank, grank, "%s: group rank %d, want %d", n->host,
		     n->res.ranks.group_rank, grank);
	cr_assert_eq(n->res.ranks.group_world_size, gworld);
	cr_assert_eq(n->res.ranks.base_rank, base, "%s: base rank %d, want %d", n->host,
		     n->res.ranks.base_rank, base);
	cr_assert_eq(n->res.ranks.world_size, world);
	cr_assert_eq(n->res.ranks.local_world_size, n->o.nproc);
}

/* ---- the fake itself ---------------------------------------------------- */

struct cbrec {
	int n;
	int status[8];
	char val[8][64];
};

static void rec_cb(int status, const struct crun_store_reply *r, void *arg)
{
	struct cbrec *c = arg;

	c->status[c->n] = status;
	if (status == 0 && r->value)
		snprintf(c->val[c->n], sizeof(c->val[0]), "%.*s", (int)r->len,
			 (const char *)r->value);
	else if (status == 0 && r->nvalues)
		snprintf(c->val[c->n], sizeof(c->val[0]), "%zu:%.*s", r->nvalues,
			 (int)r->values[0].len, (const char *)r->values[0].base);
	else if (status == 0)
		snprintf(c->val[c->n], sizeof(c->val[0]), "%lld", (long long)r->num);
	c->n++;
}

static struct cbrec REC;

static int rec4(void)
{
	return REC.n >= 4;
}

Test(rdzv_fake, semantics_async_and_cancel, .timeout = 10)
{
	struct fcli *a, *b;
	const char *k[1] = {"k"};

	world_init();
	memset(&REC, 0, sizeof(REC));
	a = fkv_client(&W.kv);
	b = fkv_client(&W.kv);
	/* CAS on a missing key: empty expected stores, non-empty does not. */
	cr_assert_eq(fkv_compare_set(a, "x", "e", 1, "d", 1, rec_cb, &REC), 0);
	cr_assert_eq(fkv_compare_set(a, "y", "", 0, "d", 1, rec_cb, &REC), 0);
	cr_assert_eq(fkv_add(a, "c", 5, rec_cb, &REC), 0);
	/* Held back by the wait, like the real client. */
	cr_assert_eq(fkv_multi_get(a, k, 1, 2000, rec_cb, &REC), 0);
	cr_assert_eq(fkv_add(a, "c", 1, rec_cb, &REC), 0);
	cr_assert_eq(REC.n, 0, "replies must not come from inside the call");
	run_for(30);
	cr_assert_eq(REC.n, 3);
	cr_assert_str_eq(REC.val[0], "e");
	cr_assert_str_eq(REC.val[1], "d");
	cr_assert_str_eq(REC.val[2], "5");
	cr_assert_null(fkv_get(&W.kv, "x"));
	cr_assert_eq(fkv_set(b, "k", "v", 1, NULL, NULL), 0);
	cr_assert(run_until(rec4, 1000));
	cr_assert_str_eq(REC.val[3], "1:v");
	run_for(20);
	cr_assert_str_eq(REC.val[4], "6");
	/* A new watch cancels the previous one. */
	memset(&REC, 0, sizeof(REC));
	cr_assert_eq(fkv_watch(a, "w1", -1, rec_cb, &REC), 0);
	cr_assert_eq(fkv_watch(a, "w2", 50, rec_cb, &REC), 0);
	run_for(100);
	cr_assert_eq(REC.n, 2);
	cr_assert_eq(REC.status[0], CRUN_ECANCELED);
	cr_assert_eq(REC.status[1], CRUN_ETIMEDOUT);
	/* Close cancels what is pending. */
	cr_assert_eq(fkv_watch(a, "w3", -1, rec_cb, &REC), 0);
	cr_assert_eq(fkv_multi_get(a, k + 0, 1, -1, rec_cb, &REC), 0);
	const char *k2[1] = {"never"};
	cr_assert_eq(fkv_multi_get(b, k2, 1, -1, rec_cb, &REC), 0);
	fkv_close(&W.kv);
	cr_assert_eq(REC.n, 5);
	for (int i = 2; i < 5; i++)
		cr_assert_eq(REC.status[i], CRUN_ECANCELED);
	cr_assert_eq(fkv_add(a, "c", 1, rec_cb, &REC), CRUN_ECLOSED);
	uv_close((uv_handle_t *)&W.guard, NULL);
	uv_close((uv_handle_t *)&W.tick, NULL);
	cr_assert_eq(uv_run(&W.loop, UV_RUN_DEFAULT), 0);
	cr_assert_eq(uv_loop_close(&W.loop), 0);
	fkv_free(&W.kv);
}

/* ---- forming a round ---------------------------------------------------- */

Test(rdzv, three_nodes_form, .timeout = 10)
{
	struct node *n1, *n2, *n3;

	world_init();
	/* Arrival order n1, n2, n3; n3 hosts the store, so it is group rank 0. */
	n1 = node_add(1, 2, 0, 3, 3);
	n2 = node_add(2, 1, 0, 3, 3);
	n3 = node_add(3, 4, 1, 3, 3);
	start_all();
	cr_assert(run_until(all_rounds, 2000), "the round did not form");
	assert_formed(n3, 0, 0, 3, 0, 7);
	assert_formed(n1, 0, 1, 3, 4, 7);
	assert_formed(n2, 0, 2, 3, 6, 7);
	for (int i = 0; i < 3; i++) {
		struct node *n = &W.n[i];

		cr_assert_eq(n->res.ranks.base_role_rank, n->res.ranks.base_rank);
		cr_assert_eq(n->res.ranks.role_world_size, 7);
		cr_assert_str_eq(n->res.master_addr, "10.0.0.3", "%s: master %s", n->host,
				 n->res.master_addr);
		cr_assert_eq(n->res.master_port, 29530);
		cr_assert_str_eq(n->res.run_id, "job1");
	}
	cr_assert_eq(n3->masters, 1);
	cr_assert_eq(n1->masters + n2->masters, 0);
	/* The round keeps running: heartbeats flow, nobody ends it. */
	run_for(300);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(W.n[i].nend, 0, "%s: end %c %s", W.n[i].host, W.n[i].end_kind,
			     W.n[i].end_why);
	cr_assert_not_null(fkv_get(&W.kv, "crun/job1/r0/hb/2"));
	world_close();
}

Test(rdzv, last_call_with_fewer_than_max, .timeout = 10)
{
	struct node *n1, *n2;
	uint64_t t0;

	world_init();
	n1 = node_add(1, 1, 1, 2, 3);
	n2 = node_add(2, 1, 0, 2, 3);
	t0 = uv_now(&W.loop);
	start_all();
	run_for(120);
	cr_assert_eq(n1->nround + n2->nround, 0, "closed before the last call");
	cr_assert(run_until(all_rounds, 2000));
	assert_formed(n1, 0, 0, 2, 0, 2);
	assert_formed(n2, 0, 1, 2, 1, 2);
	cr_assert_geq(n1->round_at - t0, 190, "formed after %llu ms",
		      (unsigned long long)(n1->round_at - t0));
	cr_assert_lt(n1->round_at - t0, 800);
	world_close();
}

Test(rdzv, max_nodes_close_at_once, .timeout = 10)
{
	uint64_t t0;

	world_init();
	node_add(1, 1, 1, 2, 3);
	node_add(2, 1, 0, 2, 3);
	node_add(3, 1, 0, 2, 3);
	t0 = uv_now(&W.loop);
	start_all();
	cr_assert(run_until(all_rounds, 2000));
	for (int i = 0; i < 3; i++) {
		assert_formed(&W.n[i], 0, i, 3, i, 3);
		cr_assert_lt(W.n[i].round_at - t0, 150, "%s formed after %llu ms", W.n[i].host,
			     (unsigned long long)(W.n[i].round_at - t0));
	}
	world_close();
}

Test(rdzv, roles_interleaved, .timeout = 10)
{
	static const char *roles[] = {"trainer", "reader", "trainer", "reader"};
	static const int nproc[] = {2, 1, 3, 1};
	/* Expected, in group-rank order n1..n4. */
	static const int base[] = {0, 2, 3, 6}, rbase[] = {0, 0, 2, 1}, rworld[] = {5, 2, 5, 2};

	world_init();
	for (int i = 0; i < 4; i++) {
		struct node *n = node_add(i + 1, nproc[i], i == 0, 4, 4);

		snprintf(n->role, sizeof(n->role), "%s", roles[i]);
	}
	/* Join in reverse so arrival order is not the answer. */
	for (int i = 3; i >= 0; i--)
		node_start(&W.n[i]);
	cr_assert(run_until(all_rounds, 2000));
	for (int i = 0; i < 4; i++) {
		struct node *n = &W.n[i];

		assert_formed(n, 0, i, 4, base[i], 7);
		cr_assert_eq(n->res.ranks.base_role_rank, rbase[i], "%s: role rank %d", n->host,
			     n->res.ranks.base_role_rank);
		cr_assert_eq(n->res.ranks.role_world_size, rworld[i]);
	}
	world_close();
}

/* ---- mismatches ---------------------------------------------------------- */

static struct node *FIRST;

static int first_joined(void)
{
	return fkv_get(&W.kv, "crun/job1/r0/join") != NULL;
}

static int second_done(void)
{
	return W.n[1].nround > 0;
}

Test(rdzv, mismatch_nnodes, .timeout = 10)
{
	struct node *b;

	world_init();
	FIRST = node_add(1, 1, 1, 2, 2);
	b = node_add(2, 1, 0, 3, 3);
	node_start(FIRST);
	cr_assert(run_until(first_joined, 1000));
	node_start(b);
	cr_assert(run_until(second_done, 1000));
	cr_assert_eq(b->status, CRUN_ERDZV_MISMATCH, "status %s", crun_err_name(b->status));
	cr_assert(strstr(b->errmsg, "nnodes=2:2") && strstr(b->errmsg, "nnodes=3:3"), "%s",
		  b->errmsg);
	cr_assert_eq(FIRST->nround, 0, "first: %s", FIRST->errmsg);
	world_close();
}

Test(rdzv, mismatch_run_id, .timeout = 10)
{
	struct node *b;

	world_init();
	FIRST = node_add(1, 1, 1, 2, 2);
	b = node_add(2, 1, 0, 2, 2);
	b->o.run_id = "job2";
	node_start(FIRST);
	cr_assert(run_until(first_joined, 1000));
	node_start(b);
	cr_assert(run_until(second_done, 1000));
	cr_assert_eq(b->status, CRUN_ERDZV_MISMATCH, "status %s", crun_err_name(b->status));
	cr_assert(strstr(b->errmsg, "'job1'") && strstr(b->errmsg, "'job2'"), "%s", b->errmsg);
	world_close();
}

Test(rdzv, null_run_id_adopts_the_job, .timeout = 10)
{
	struct node *a, *b;

	world_init();
	a = node_add(1, 1, 1, 2, 2);
	b = node_add(2, 1, 0, 2, 2);
	b->o.run_id = NULL;
	/* The node without an id may even come first: it waits for the job id. */
	node_start(b);
	run_for(50);
	node_start(a);
	cr_assert(run_until(all_rounds, 2000));
	assert_formed(a, 0, 0, 2, 0, 2);
	assert_formed(b, 0, 1, 2, 1, 2);
	cr_assert_str_eq(b->res.run_id, "job1");
	world_close();
}

/* ---- join timeout -------------------------------------------------------- */

Test(rdzv, join_timeout_names_who_joined, .timeout = 10)
{
	uint64_t t0;

	world_init();
	node_add(1, 4, 1, 3, 3);
	node_add(2, 2, 0, 3, 3);
	t0 = uv_now(&W.loop);
	start_all();
	cr_assert(run_until(all_rounds, 4000));
	for (int i = 0; i < 2; i++) {
		struct node *n = &W.n[i];

		cr_assert_eq(n->status, CRUN_ERDZV_TIMEOUT, "%s: %s", n->host,
			     crun_err_name(n->status));
		cr_assert_geq(n->round_at - t0, 950);
		cr_assert(strstr(n->errmsg, "n1 (4 workers)") && strstr(n->errmsg, "n2 (2 workers)"),
			  "%s", n->errmsg);
		cr_assert(strstr(n->errmsg, "still missing 1"), "%s", n->errmsg);
	}
	world_close();
}

/* ---- ending and restarting ---------------------------------------------- */

static void may_all(int kind)
{
	for (int i = 0; i < W.nn; i++) {
		W.n[i].nmay = 0;
		W.n[i].may_ok = -1;
		/* Only nodes whose round ended ask (as the agent does). */
		if (W.n[i].alive && W.n[i].nend)
			cr_assert_eq(rdzv_may_restart(W.n[i].r, kind, on_may, &W.n[i]), 0);
	}
	cr_assert(run_until(all_mays, 2000), "rdzv_may_restart did not answer");
}

static void clear_ends(void)
{
	for (int i = 0; i < W.nn; i++) {
		W.n[i].nend = 0;
		W.n[i].end_kind = 0;
		W.n[i].end_why[0] = '\0';
	}
}

Test(rdzv, failure_restarts_then_exhausts, .timeout = 10)
{
	world_init();
	node_add(1, 4, 1, 3, 3);
	node_add(2, 2, 0, 3, 3);
	node_add(3, 1, 0, 3, 3);
	start_all();
	cr_assert(run_until(all_rounds, 2000));
	for (int round = 0; round < 2; round++) {
		clear_ends();
		cr_assert_eq(rdzv_end_round(W.n[1].r, RDZV_END_FAILURE, "1 3 n2"), 0);
		cr_assert(run_until(all_ends, 1000), "round %d: not every node saw the end", round);
		for (int i = 0; i < 3; i++) {
			cr_assert_eq(W.n[i].nend, 1, "%s: %d ends", W.n[i].host, W.n[i].nend);
			cr_assert_eq(W.n[i].end_kind, 'F', "%s: end %c", W.n[i].host,
				     W.n[i].end_kind);
			cr_assert_str_eq(W.n[i].end_why, "1 3 n2");
		}
		may_all(RDZV_END_FAILURE);
		for (int i = 0; i < 3; i++) {
			cr_assert_eq(W.n[i].may_ok, round == 0, "round %d, %s: may_restart %d",
				     round, W.n[i].host, W.n[i].may_ok);
			cr_assert_eq(rdzv_restarts(W.n[i].r), round + 1);
		}
		if (round == 1)
			break;
		for (int i = 0; i < 3; i++)
			node_next(&W.n[i]);
		cr_assert(run_until(all_rounds, 2000), "round 1 did not form");
		assert_formed(&W.n[0], 1, 0, 3, 0, 7);
		assert_formed(&W.n[1], 1, 1, 3, 4, 7);
		assert_formed(&W.n[2], 1, 2, 3, 6, 7);
		cr_assert_eq(W.n[0].res.master_port, 29511);
	}
	world_close();
}

/*
 * Two workers fail on two nodes at the same moment: the round ends once,
 * and it costs one restart, not two ("only for the node whose end was
 * recorded first").
 */
Test(rdzv, simultaneous_failures_cost_one_restart, .timeout = 10)
{
	world_init();
	node_add(1, 1, 1, 3, 3);
	node_add(2, 1, 0, 3, 3);
	node_add(3, 1, 0, 3, 3);
	start_all();
	cr_assert(run_until(all_rounds, 2000));
	cr_assert_eq(rdzv_end_round(W.n[1].r, RDZV_END_FAILURE, "1 1 n2"), 0);
	cr_assert_eq(rdzv_end_round(W.n[2].r, RDZV_END_FAILURE, "1 2 n3"), 0);
	cr_assert(run_until(all_ends, 1000));
	for (int i = 0; i < 3; i++)
		cr_assert_str_eq(W.n[i].end_why, W.n[0].end_why);
	may_all(RDZV_END_FAILURE);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(rdzv_restarts(W.n[i].r), 1, "%s: %d restarts after one failed round",
			     W.n[i].host, rdzv_restarts(W.n[i].r));
	cr_assert_str_eq(fkv_get(&W.kv, "crun/job1/restarts"), "1");
	world_close();
}

static int first_two_ended(void)
{
	return W.n[0].nend && W.n[1].nend;
}

static int first_ended(void)
{
	return W.n[0].nend > 0;
}

Test(rdzv, late_node_triggers_join, .timeout = 10)
{
	struct node *n3;

	world_init();
	node_add(1, 1, 1, 2, 3);
	node_add(2, 1, 0, 2, 3);
	n3 = node_add(3, 1, 0, 2, 3);
	node_start(&W.n[0]);
	node_start(&W.n[1]);
	/* all_rounds skips nodes not started yet (alive == 0). */
	cr_assert(run_until(all_rounds, 2000));
	assert_formed(&W.n[0], 0, 0, 2, 0, 2);
	node_start(n3);
	cr_assert(run_until(first_two_ended, 1000), "the late node did not end the round");
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(W.n[i].end_kind, 'J', "%s: end %c", W.n[i].host, W.n[i].end_kind);
		cr_assert_str_eq(W.n[i].end_why, "n3");
	}
	cr_assert_eq(n3->nround, 0);
	may_all(RDZV_END_JOIN);
	for (int i = 0; i < 2; i++)
		cr_assert_eq(W.n[i].may_ok, 1, "%s: may_restart %d", W.n[i].host, W.n[i].may_ok);
	cr_assert_eq(rdzv_restarts(W.n[0].r), 0, "a join must not cost a restart");
	node_next(&W.n[0]);
	node_next(&W.n[1]);
	cr_assert(run_until(all_rounds, 2000), "round 1 did not form");
	for (int i = 0; i < 3; i++)
		assert_formed(&W.n[i], 1, i, 3, i, 3);
	world_close();
}

static int third_joined(void)
{
	return fkv_get(&W.kv, "crun/job1/r0/node/3") != NULL;
}

Test(rdzv, late_node_waits_as_spare_when_full, .timeout = 10)
{
	struct node *n3;
	int in = 0;

	world_init();
	node_add(1, 1, 1, 2, 2);
	node_add(2, 1, 0, 2, 2);
	n3 = node_add(3, 1, 0, 2, 2);
	node_start(&W.n[0]);
	node_start(&W.n[1]);
	cr_assert(run_until(all_rounds, 2000));
	node_start(n3);
	cr_assert(run_until(third_joined, 1000));
	/* Past the join timeout: a spare neither fails nor disturbs the round. */
	run_for(1300);
	cr_assert_eq(n3->nround, 0, "spare got %s: %s", crun_err_name(n3->status), n3->errmsg);
	cr_assert_eq(W.n[0].nend + W.n[1].nend, 0, "end %c %s", W.n[0].end_kind,
		     W.n[0].end_why);
	/* The round fails: the spare takes a place in the next one. */
	cr_assert_eq(rdzv_end_round(W.n[0].r, RDZV_END_FAILURE, "1 0 n1"), 0);
	cr_assert(run_until(first_two_ended, 1000));
	cr_assert_eq(n3->nround, 0);
	may_all(RDZV_END_FAILURE);
	cr_assert_eq(W.n[0].may_ok, 1);
	node_next(&W.n[0]);
	node_next(&W.n[1]);
	run_for(600);
	cr_assert_eq(n3->nround, 1, "the spare did not join round 1");
	cr_assert_eq(n3->status, 0, "%s: %s", crun_err_name(n3->status), n3->errmsg);
	cr_assert_eq(n3->res.round, 1);
	for (int i = 0; i < 3; i++)
		in += W.n[i].nround == 1 && W.n[i].status == 0;
	cr_assert_eq(in, 2, "round 1 has %d nodes", in);
	world_close();
}

/* ---- heartbeats ----------------------------------------------------------- */

static int others_ended(void)
{
	for (int i = 0; i < W.nn; i++)
		if (W.n[i].alive && W.n[i].nend == 0)
			return 0;
	return 1;
}

Test(rdzv, dead_node_detected, .timeout = 10)
{
	struct node *dead;
	uint64_t t0;

	world_init();
	node_add(1, 1, 1, 3, 3);
	node_add(2, 1, 0, 3, 3);
	node_add(3, 1, 0, 3, 3);
	start_all();
	cr_assert(run_until(all_rounds, 2000));
	run_for(200); /* heartbeats established */
	dead = &W.n[1];
	cr_assert_eq(dead->res.ranks.group_rank, 1);
	t0 = uv_now(&W.loop);
	node_kill(dead);
	/* 0.05 s x 3 attempts, plus a tick or two of slack. */
	cr_assert(run_until(others_ended, 1000), "the dead node went unnoticed");
	for (int i = 0; i < 3; i += 2) {
		struct node *n = &W.n[i];

		cr_assert_eq(n->end_kind, 'D', "%s: end %c %s", n->host, n->end_kind, n->end_why);
		cr_assert(strstr(n->end_why, "n2"), "%s: %s", n->host, n->end_why);
		cr_assert_leq(n->end_at - t0, 350, "%s: noticed after %llu ms", n->host,
			      (unsigned long long)(n->end_at - t0));
	}
	may_all(RDZV_END_DEAD);
	/* 2 nodes are left of min 3: no restart. */
	cr_assert_eq(W.n[0].may_ok, 0);
	world_close();
}

Test(rdzv, finished_node_is_not_dead, .timeout = 10)
{
	struct node *done;

	world_init();
	node_add(1, 1, 1, 3, 3);
	node_add(2, 1, 0, 3, 3);
	node_add(3, 1, 0, 3, 3);
	start_all();
	cr_assert(run_until(all_rounds, 2000));
	run_for(100);
	done = &W.n[1];
	cr_assert_eq(rdzv_finish(done->r, on_finish, done), 0);
	run_for(700);
	cr_assert_eq(done->nfinish, 1);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(W.n[i].nend, 0, "%s: end %c %s", W.n[i].host, W.n[i].end_kind,
			     W.n[i].end_why);
	/* Its successor is still watched through it: a death after it is seen. */
	node_kill(&W.n[2]);
	cr_assert(run_until(first_ended, 1000), "n3's death went unnoticed");
	cr_assert_eq(W.n[0].end_kind, 'D', "end %c %s", W.n[0].end_kind, W.n[0].end_why);
	world_close();
}

static int all_finished_alive(void)
{
	for (int i = 0; i < W.nn; i++)
		if (W.n[i].alive && W.n[i].nfinish == 0)
			return 0;
	return 1;
}

static int all_finished(void)
{
	for (int i = 0; i < W.nn; i++)
		if (W.n[i].nfinish == 0)
			return 0;
	return 1;
}

Test(rdzv, everyone_finishes, .timeout = 10)
{
	world_init();
	node_add(1, 1, 1, 2, 2);
	node_add(2, 1, 0, 2, 2);
	start_all();
	cr_assert(run_until(all_rounds, 2000));
	/* The store host first: it waits for the other one before leaving. */
	cr_assert_eq(rdzv_finish(W.n[0].r, on_finish, &W.n[0]), 0);
	run_for(100);
	cr_assert_eq(W.n[0].nfinish, 0, "the store host left before the others");
	cr_assert_eq(rdzv_finish(W.n[1].r, on_finish, &W.n[1]), 0);
	cr_assert(run_until(all_finished, 1000));
	cr_assert_str_eq(fkv_get(&W.kv, "crun/job1/r0/finished"), "2");
	world_close();
}

/* ---- static backend ------------------------------------------------------ */

Test(rdzv, static_orders_by_node_rank, .timeout = 10)
{
	static const int rank[] = {2, 0, 1};

	world_init();
	for (int i = 0; i < 3; i++) {
		struct node *n = node_add(i + 1, 1, i == 0, 3, 3);

		n->o.static_rank = rank[i];
	}
	start_all();
	cr_assert(run_until(all_rounds, 2000));
	for (int i = 0; i < 3; i++)
		assert_formed(&W.n[i], 0, rank[i], 3, rank[i], 3);
	cr_assert_str_eq(W.n[0].res.master_addr, "10.0.0.2");
	cr_assert_str_eq(fkv_get(&W.kv, "crun/job1/config"), "nnodes=3:3 backend=static");
	world_close();
}

Test(rdzv, static_duplicate_rank_is_fatal, .timeout = 10)
{
	world_init();
	for (int i = 0; i < 2; i++) {
		struct node *n = node_add(i + 1, 1, i == 0, 2, 2);

		n->o.static_rank = 0;
	}
	start_all();
	cr_assert(run_until(all_rounds, 2000));
	for (int i = 0; i < 2; i++) {
		struct node *n = &W.n[i];

		cr_assert_eq(n->status, CRUN_ERDZV_CLOSED, "%s: %s (%s)", n->host,
			     crun_err_name(n->status), n->errmsg);
		cr_assert(strstr(n->errmsg, "node ranks 0..1"), "%s", n->errmsg);
	}
	world_close();
}

/* ---- failure branches (issue 15, item 5) ---------------------------------- */

static int first_round(void)
{
	return W.n[0].nround > 0;
}

Test(rdzv, store_lost_while_joining, .timeout = 10)
{
	world_init();
	node_add(1, 1, 1, 2, 2);
	start_all();
	run_for(100); /* joined, waiting for a second node */
	cr_assert_eq(W.n[0].nround, 0);
	fcli_close(W.n[0].kv);
	cr_assert(run_until(first_round, 1000), "a lost store while joining went unnoticed");
	cr_assert_neq(W.n[0].status, 0);
	cr_assert(strstr(W.n[0].errmsg, "lost the rendezvous store"), "%s", W.n[0].errmsg);
	world_close();
}

Test(rdzv, store_silent_at_join_deadline, .timeout = 10)
{
	uint64_t t0;

	world_init();
	node_add(1, 1, 1, 2, 2);
	t0 = uv_now(&W.loop);
	start_all();
	run_for(100);
	W.kv.frozen = 1; /* connected, but nothing answers any more */
	cr_assert(run_until(first_round, 5000), "no verdict from a silent store");
	cr_assert_eq(W.n[0].status, CRUN_ERDZV_TIMEOUT, "%s", crun_err_name(W.n[0].status));
	cr_assert(strstr(W.n[0].errmsg, "store does not answer"), "%s", W.n[0].errmsg);
	/* join_timeout (1 s), then 2 s for the store's answer. */
	cr_assert_geq(W.n[0].round_at - t0, 2900);
	W.kv.frozen = 0;
	world_close();
}

Test(rdzv, static_node_death_is_not_restarted, .timeout = 10)
{
	world_init();
	/* Three static nodes with MIN 2: two remain, enough for c10d to
	 * re-form, but static ranks cannot be re-assigned. */
	for (int i = 0; i < 3; i++) {
		struct node *n = node_add(i + 1, 1, i == 0, 2, 3);

		n->o.static_rank = i;
	}
	start_all();
	cr_assert(run_until(all_rounds, 2000));
	run_for(200);
	node_kill(&W.n[2]);
	cr_assert(run_until(others_ended, 1000), "the dead static node went unnoticed");
	cr_assert_eq(W.n[0].end_kind, 'D', "end %c %s", W.n[0].end_kind, W.n[0].end_why);
	may_all(RDZV_END_DEAD);
	cr_assert_eq(W.n[0].may_ok, 0, "a static job re-formed without a node");
	cr_assert_eq(W.n[1].may_ok, 0);
	world_close();
}

Test(rdzv, host_stops_waiting_after_close_timeout, .timeout = 10)
{
	uint64_t t0;

	world_init();
	node_add(1, 1, 1, 2, 2);
	node_add(2, 1, 0, 2, 2);
	start_all();
	cr_assert(run_until(all_rounds, 2000));
	run_for(100);
	node_kill(&W.n[1]); /* it never leaves the round properly */
	cr_assert(run_until(first_ended, 1000));
	t0 = uv_now(&W.loop);
	cr_assert_eq(rdzv_finish(W.n[0].r, on_finish, &W.n[0]), 0);
	run_for(150);
	cr_assert_eq(W.n[0].nfinish, 0, "the store host left at once");
	cr_assert(run_until(all_finished_alive, 2000), "the store host waits forever");
	/* close_timeout is 0.3 s. */
	cr_assert_geq(uv_now(&W.loop) - t0, 280);
	cr_assert_leq(uv_now(&W.loop) - t0, 1000);
	world_close();
}

static int ghost_round_aborted(void)
{
	const char *v = fkv_get(&W.kv, "crun/job1/r0/assigned");

	return v != NULL && strncmp(v, "abort ", 6) == 0;
}

Test(rdzv, node_joined_but_never_described, .timeout = 10)
{
	const char *v;

	world_init();
	W.kv.warp = 50; /* the closer's 10 s wait for descriptors: 0.2 s */
	/* A ghost took join index 1 of round 0 and died before describing
	 * itself: the round closes with 2 joined, one descriptor missing. */
	fkv_put(&W.kv, "crun/job1/round", "0", 1);
	fkv_put(&W.kv, "crun/job1/r0/join", "1", 1);
	node_add(1, 1, 1, 2, 2);
	start_all();
	cr_assert(run_until(ghost_round_aborted, 900), "a missing descriptor hangs the round");
	v = fkv_get(&W.kv, "crun/job1/r0/assigned");
	cr_assert_str_eq(v, "abort D a node joined but never described itself");
	/* The node goes on to the next round and, alone, times out there. */
	cr_assert(run_until(first_round, 3000));
	cr_assert_eq(W.n[0].status, CRUN_ERDZV_TIMEOUT, "%s", crun_err_name(W.n[0].status));
	world_close();
}

/* ---- crun status: reading a job without joining (rdzv_status.h) --------- */

#include "crun/rdzv_status.h"

struct sread {
	int done, status;
	struct rdzv_status st;
	struct rdzv_status_node nodes[MAXNODES];
	char errmsg[900];
	uint64_t ops_before; /* W.kv.nops when the read started */
	int wrote;	     /* the map changed while reading (it must not) */
};

static struct sread SR;

static void on_sread(struct crun_rdzv_status *s, int status, const struct rdzv_status *st,
		     const char *errmsg, void *data)
{
	(void)s;
	(void)data;
	SR.done = 1;
	SR.status = status;
	snprintf(SR.errmsg, sizeof(SR.errmsg), "%s", errmsg);
	if (st) {
		SR.st = *st;
		cr_assert_leq(st->nnodes, MAXNODES);
		if (st->nnodes > 0)
			memcpy(SR.nodes, st->nodes,
			       (size_t)st->nnodes * sizeof(*st->nodes));
		SR.st.nodes = SR.nodes;
	}
}

static int sread_done(void)
{
	return SR.done;
}

/* Remove key from the map (the fake has no DELETE_KEY). */
static void fkv_del(struct fkv *s, const char *key)
{
	for (struct fentry **p = &s->map; *p; p = &(*p)->next) {
		if (strcmp((*p)->key, key) == 0) {
			struct fentry *e = *p;

			*p = e->next;
			free(e->key);
			free(e->val);
			free(e);
			return;
		}
	}
}

/*
 * The reader's view of the store: only compare-and-sets whose expected
 * value is not empty (they can match no real key: reads). Anything that
 * could write fails the test.
 */
static int ro_add(void *kv, const char *key, int64_t delta, rdzv_kv_cb cb, void *arg)
{
	(void)kv, (void)delta, (void)cb, (void)arg;
	cr_assert_fail("the reader added to '%s'", key);
	return -1;
}

static int ro_set(void *kv, const char *key, const void *v, size_t n, rdzv_kv_cb cb,
		  void *arg)
{
	(void)kv, (void)v, (void)n, (void)cb, (void)arg;
	cr_assert_fail("the reader set '%s'", key);
	return -1;
}

static int ro_compare_set(void *kv, const char *key, const void *exp, size_t elen,
			  const void *des, size_t dlen, rdzv_kv_cb cb, void *arg)
{
	cr_assert_gt(elen, 0, "the reader's CAS of '%s' could create it", key);
	cr_assert(elen > 1 && ((const char *)exp)[0] == '\001',
		  "the reader's CAS of '%s' could match a value", key);
	return fkv_compare_set(kv, key, exp, elen, des, dlen, cb, arg);
}

static int ro_multi_set(void *kv, const char *const *keys, const void *const *vals,
			const size_t *lens, size_t n, rdzv_kv_cb cb, void *arg)
{
	(void)kv, (void)vals, (void)lens, (void)n, (void)cb, (void)arg;
	cr_assert_fail("the reader set '%s'", keys[0]);
	return -1;
}

static const struct rdzv_kv_ops ro_ops = {
    .add = ro_add,
    .set = ro_set,
    .compare_set = ro_compare_set,
    .multi_get = fkv_multi_get,
    .multi_set = ro_multi_set,
    .watch = fkv_watch,
};

/* Read the job over a client of its own, like `crun status`. */
static void status_read(const char *run_id, double hb_wait)
{
	struct rdzv_status_opts o = {.run_id = run_id, .max_nodes = 64, .hb_wait = hb_wait};
	struct crun_rdzv_status *s;
	struct fcli *c = fkv_client(&W.kv);

	memset(&SR, 0, sizeof(SR));
	cr_assert_eq(rdzv_status_read(&W.loop, &ro_ops, c, &o, on_sread, NULL, &s), 0);
	cr_assert(run_until(sread_done, 3000), "the status read never finished");
	fcli_close(c);
	rdzv_status_free(s);
}

Test(rdzv_status, running_round_then_failure, .timeout = 10)
{
	world_init();
	node_add(1, 2, 1, 2, 2);
	node_add(2, 1, 0, 2, 2);
	start_all();
	cr_assert(run_until(all_rounds, 2000));

	/* Nothing of another job; and the job itself, heartbeats seen. */
	status_read("other", 0);
	cr_assert_eq(SR.status, CRUN_ENOTFOUND, "%s", crun_err_name(SR.status));
	cr_assert(strstr(SR.errmsg, "it serves job 'job1'"), "%s", SR.errmsg);
	status_read("job1", 0.5);
	cr_assert_eq(SR.status, 0, "%s: %s", crun_err_name(SR.status), SR.errmsg);
	cr_assert_str_eq(SR.st.run_id, "job1");
	cr_assert_eq(SR.st.state, RDZV_STATUS_RUNNING);
	cr_assert_eq(SR.st.round, 0);
	cr_assert_eq(SR.st.restarts, 0);
	cr_assert(SR.st.have_params);
	cr_assert_eq(SR.st.params.max_restarts, 1);
	cr_assert_eq(SR.st.params.keep_alive_ms, 50);
	cr_assert_eq(SR.st.nnodes, 2);
	cr_assert_eq(SR.st.master_port, 29510);
	cr_assert_not(SR.st.have_failure);
	for (int g = 0; g < 2; g++) {
		struct rdzv_status_node *n = &SR.nodes[g];

		cr_assert_eq(n->group_rank, g);
		cr_assert_str_eq(n->d.host, g == 0 ? "n1" : "n2");
		cr_assert_eq(n->d.nproc, g == 0 ? 2 : 1);
		cr_assert_eq(n->ranks.base_rank, g == 0 ? 0 : 2);
		cr_assert_eq(n->ranks.world_size, 3);
		/* Beating every 50 ms: seen moving within the 0.5 s window. */
		cr_assert(n->hb_age >= 0 && n->hb_age < 0.3, "%s: age %f", n->d.host, n->hb_age);
		cr_assert_gt(n->hb, 0);
	}

	/* A worker fails on n2: the failure is recorded with its round. */
	clear_ends();
	cr_assert_eq(rdzv_end_round(W.n[1].r, RDZV_END_FAILURE,
				    "3 rank 2 (local rank 0) on n2 exited with 3"),
		     0);
	cr_assert(run_until(all_ends, 1000));
	may_all(RDZV_END_FAILURE);
	for (int i = 0; i < 2; i++)
		node_next(&W.n[i]);
	cr_assert(run_until(all_rounds, 2000), "round 1 did not form");
	status_read(NULL, 0.5); /* no run id: the endpoint's job */
	cr_assert_eq(SR.status, 0, "%s: %s", crun_err_name(SR.status), SR.errmsg);
	cr_assert_eq(SR.st.round, 1);
	cr_assert_eq(SR.st.restarts, 1);
	cr_assert_eq(SR.st.state, RDZV_STATUS_RUNNING);
	cr_assert(SR.st.have_failure);
	cr_assert_eq(SR.st.failure.round, 0);
	cr_assert_eq(SR.st.failure.rank, 2);
	cr_assert_eq(SR.st.failure.exit_code, 3);
	cr_assert_str_eq(SR.st.failure.host, "n2");
	cr_assert_gt(SR.st.failure.unix_ms, 1600000000000LL);

	/* A node that stops beating is shown stalled, within the window. */
	node_kill(&W.n[1]);
	status_read("job1", 0.3);
	cr_assert_eq(SR.status, 0, "%s: %s", crun_err_name(SR.status), SR.errmsg);
	/* Read before n1 notices (3 missed beats): still running. */
	cr_assert_eq(SR.st.state, RDZV_STATUS_RUNNING);
	cr_assert_eq(SR.st.nnodes, 2);
	cr_assert_geq(SR.nodes[0].hb_age, 0, "the live node's heartbeat did not move");
	cr_assert_lt(SR.nodes[1].hb_age, 0, "a dead node's heartbeat moved");
	cr_assert_geq(SR.st.hb_window, 0.3);
	world_close();
}

Test(rdzv_status, forming_and_malformed_records, .timeout = 10)
{
	world_init();
	/* Nothing at all on the endpoint. */
	status_read(NULL, 0);
	cr_assert_eq(SR.status, CRUN_ENOTFOUND);
	/* One node of two joined: the round forms, its node is listed. */
	node_add(1, 2, 1, 2, 2);
	start_all();
	run_for(100);
	status_read("job1", 0);
	cr_assert_eq(SR.status, 0, "%s: %s", crun_err_name(SR.status), SR.errmsg);
	cr_assert_eq(SR.st.state, RDZV_STATUS_FORMING);
	cr_assert_eq(SR.st.joined, 1);
	cr_assert_eq(SR.st.nnodes, 1);
	cr_assert_eq(SR.nodes[0].group_rank, -1);
	cr_assert_str_eq(SR.nodes[0].d.host, "n1");

	/* Forged records: an error naming the key, never a crash. */
	static const struct {
		const char *key, *val, *want;
	} bad[] = {
	    {"crun/job1/config", "nnodes=0:2 backend=c10d", "'crun/job1/config'"},
	    {"crun/job1/config", "nnodes=1:99999999 backend=c10d", "'crun/job1/config'"},
	    {"crun/job1/round", "-1", "'crun/job1/round'"},
	    {"crun/job1/restarts", "lots", "'crun/job1/restarts'"},
	    {"crun/job1/params", "max_restarts=1", "keep_alive_ms= missing"},
	    {"crun/job1/failure", "0 1 3 rank 2 (local rank 0) on h exited with 4",
	     "exit codes 3 and 4 differ"},
	    {"crun/job1/r0/join", "99999999999999999999", "'crun/job1/r0/join'"},
	    {"crun/job1/r0/node/1", "1 0 0 1 h a r", "nproc"},
	    {"crun/job1/r0/end", "Q what", "unknown end kind"},
	    {"crun/job", "a/b", "'crun/job': not a job id"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *old = fkv_get(&W.kv, bad[i].key);
		char *keep = old ? strdup(old) : NULL;

		fkv_put(&W.kv, bad[i].key, bad[i].val, strlen(bad[i].val));
		status_read(NULL, 0);
		cr_assert_eq(SR.status, CRUN_EPROTO, "%s=%s: %s (%s)", bad[i].key, bad[i].val,
			     crun_err_name(SR.status), SR.errmsg);
		cr_assert(strstr(SR.errmsg, bad[i].want), "%s=%s: '%s' lacks '%s'", bad[i].key,
			  bad[i].val, SR.errmsg, bad[i].want);
		if (keep)
			fkv_put(&W.kv, bad[i].key, keep, strlen(keep));
		else
			fkv_del(&W.kv, bad[i].key);
		free(keep);
	}
	world_close();
}

Test(rdzv_status, ended_when_restarts_exhausted_or_all_finished, .timeout = 10)
{
	world_init();
	node_add(1, 1, 1, 2, 2);
	node_add(2, 1, 0, 2, 2);
	start_all();
	cr_assert(run_until(all_rounds, 2000));
	/* Two failures with max_restarts=1: nobody forms round 2. */
	for (int round = 0; round < 2; round++) {
		clear_ends();
		cr_assert_eq(rdzv_end_round(W.n[1].r, RDZV_END_FAILURE,
					    "1 rank 1 (local rank 0) on n2 exited with 1"),
			     0);
		cr_assert(run_until(all_ends, 1000));
		may_all(RDZV_END_FAILURE);
		if (round == 0) {
			for (int i = 0; i < 2; i++)
				node_next(&W.n[i]);
			cr_assert(run_until(all_rounds, 2000));
			status_read("job1", 0);
			cr_assert_eq(SR.st.state, RDZV_STATUS_RUNNING);
		}
	}
	status_read("job1", 0);
	cr_assert_eq(SR.status, 0, "%s: %s", crun_err_name(SR.status), SR.errmsg);
	cr_assert_eq(SR.st.round, 2);
	cr_assert_eq(SR.st.restarts, 2);
	cr_assert_eq(SR.st.state, RDZV_STATUS_ENDED, "state %s",
		     rdzv_status_state_name(SR.st.state));
	cr_assert_eq(SR.st.failure.round, 1);
	world_close();

	/* Every node finished: the round's end says so. */
	world_init();
	node_add(1, 1, 1, 2, 2);
	node_add(2, 1, 0, 2, 2);
	start_all();
	cr_assert(run_until(all_rounds, 2000));
	for (int i = 0; i < 2; i++)
		cr_assert_eq(rdzv_finish(W.n[i].r, on_finish, &W.n[i]), 0);
	run_for(200);
	status_read("job1", 0);
	cr_assert_eq(SR.status, 0, "%s: %s", crun_err_name(SR.status), SR.errmsg);
	cr_assert_eq(SR.st.state, RDZV_STATUS_ENDED, "state %s",
		     rdzv_status_state_name(SR.st.state));
	cr_assert_eq(SR.st.end_kind, 'S');
	world_close();
}

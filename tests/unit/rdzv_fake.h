/*
 * The rendezvous tests' fake (test_rdzv.c, test_rdzv_exclude.c): an
 * in-memory key-value store implementing struct rdzv_kv_ops for several
 * simulated nodes on one loop, and the nodes themselves. See test_rdzv.c's
 * opening comment for how it mirrors the async store client.
 */
#ifndef CRUN_TEST_RDZV_FAKE_H
#define CRUN_TEST_RDZV_FAKE_H

/* Each test file uses most of these helpers, not all. */
#pragma GCC diagnostic ignored "-Wunused-function"

/* ---- the in-memory store ------------------------------------------------ */

struct fentry {
	struct fentry *next;
	char *key;
	char *val;
	size_t len;
};

enum freq_type { F_ADD, F_SET, F_CAS, F_MGET, F_PEEK, F_MSET, F_WATCH };

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
	void (*vanish_cb)(void *arg, const char *key, size_t klen);
	void *vanish_arg;
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
	/* The client whose vanish hook (rdzv_kv_ops.on_vanish) hears of a
	 * client closed while it watches, as the store host's does (NULL: no
	 * client's). */
	struct fcli *vanish_to;
	uint64_t nops;
	/* Requests naming a key that starts with spy_key (only multi_gets if
	 * spy_mget) are counted in spied. */
	const char *spy_key;
	int spy_mget;
	int spied;
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

static void fkv_spy(struct fkv *s, const struct freq *q)
{
	if (s->spy_mget && q->type != F_MGET)
		return;
	for (size_t i = 0; s->spy_key && i < q->n; i++)
		if (q->keys[i] && strncmp(q->keys[i], s->spy_key, strlen(s->spy_key)) == 0)
			s->spied++;
}

static void fcli_push(struct fcli *c, struct freq *q)
{
	fkv_spy(c->s, q);
	if (c->tail)
		c->tail->next = q;
	else
		c->head = q;
	c->tail = q;
	fkv_kick(c->s);
}

static void fcli_wpush(struct fcli *c, struct freq *q)
{
	fkv_spy(c->s, q);
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

/* A read that does not wait: missing keys come back empty. */
static int fkv_peek(void *kv, const char *const *keys, size_t n, rdzv_kv_cb cb, void *arg)
{
	struct fcli *c = kv;
	struct freq *q;

	if (c->closed)
		return CRUN_ECLOSED;
	q = freq_new(c, F_PEEK, n, -1, cb, arg);
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

static int fkv_watch(void *kv, const char *const *keys, size_t n, int timeout_ms,
		     rdzv_kv_cb cb, void *arg)
{
	struct fcli *c = kv;
	struct freq *q;

	if (c->closed)
		return CRUN_ECLOSED;
	q = freq_new(c, F_WATCH, n, timeout_ms, cb, arg);
	for (size_t i = 0; i < n; i++)
		q->keys[i] = dupn(keys[i], strlen(keys[i]));
	fcli_wpush(c, q);
	return 0;
}

static void fkv_on_vanish(void *kv, void (*cb)(void *, const char *, size_t), void *arg)
{
	struct fcli *c = kv;

	c->vanish_cb = cb;
	c->vanish_arg = arg;
}

static const struct rdzv_kv_ops fkv_ops = {
	.add = fkv_add,
	.set = fkv_set,
	.compare_set = fkv_compare_set,
	.multi_get = fkv_multi_get,
	.peek = fkv_peek,
	.multi_set = fkv_multi_set,
	.watch = fkv_watch,
	.on_vanish = fkv_on_vanish,
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
	case F_PEEK:
	case F_WATCH: {
		size_t n = q->n;
		struct crun_store_iov *iov = calloc(n ? n : 1, sizeof(*iov));
		char **copies = calloc(n ? n : 1, sizeof(*copies));

		cr_assert(iov && copies);
		for (size_t i = 0; i < q->n; i++) {
			e = fkv_find(s, q->keys[i]);
			copies[i] = e ? dupn(e->val, e->len) : dupn("", 0);
			iov[i].base = copies[i];
			iov[i].len = e ? e->len : 0;
		}
		if (q->type == F_WATCH) {
			rep.value = copies[0];
			rep.len = iov[0].len;
		}
		if (q->type != F_WATCH || q->n > 1) {
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
				int ready = fkv_find(s, q->keys[0]) != NULL;
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
	struct fcli *h = c->s->vanish_to;
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
		if (!q->canceled && h && h != c && !h->closed && h->vanish_cb)
			h->vanish_cb(h->vanish_arg, q->keys[0], strlen(q->keys[0]));
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
	char host[16], addr[32], role[32], nid[12];
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
	/* on_exclusion */
	int nexcl, nreadmit, self_excl, self_readmit;
	char excl_why[512];
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

static int on_start_master(void *data, int round, int *port, int *by_worker)
{
	struct node *n = data;

	n->masters++;
	*port = 29500 + 10 * n->id + round;
	return 0;
}

static void on_end(struct crun_rdzv *r, const struct rdzv_end *e, void *data)
{
	struct node *n = data;

	(void)r;
	n->nend++;
	n->end_kind = e->kind;
	n->end_at = uv_now(&n->w->loop);
	snprintf(n->end_why, sizeof(n->end_why), "%s", e->why);
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
	snprintf(n->nid, sizeof(n->nid), "%x", id);
	n->o.node_id = n->nid;
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

/* Every node whose round ended asks rdzv_may_restart; wait for the answers. */
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

#endif

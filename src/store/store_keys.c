/*
 * The store's keyspace: one flat map from keys to entries holds values,
 * the connections waiting on each key, libuv-style queues and G0 watchers
 * (store_internal.h has the structs). Everything an entry holds is charged
 * to srv->mem and none of it grows past max_memory; an entry is freed as
 * soon as nothing refers to it (store__entry_gc).
 *
 * Waiting: a WAIT whose keys are not all present becomes a waiter holding one
 * registration per missing key (a duplicate key counts twice); each
 * registration is appended to its entry's list, so lists are oldest first.
 * Creating the key takes the whole list, decrements each waiter and answers
 * those that reach zero. A QUEUE_PUSH makes its key present for one waiter:
 * it walks the list oldest first, decrementing each, until one waiter is
 * answered (a waiter on [q, x] is counted and passed over, as PyTorch's libuv
 * server does), so blocked pops on one queue are served FIFO. A closed
 * connection or CANCEL_WAIT unlinks its registrations in O(keys).
 *
 * WAIT_GET (crun only, opcode 0x64, for crun's own rendezvous clients): a
 * WAIT whose answer is STOP_WAITING followed by the MULTI_GET reply of its
 * keys, one request instead of two. Parked, the waiter keeps a copy of the
 * key list (counted in memory); when woken, a reply that would pass
 * max_output or max_memory closes the connection instead. WAIT_FIRST_GET
 * (0x65) is the same waiting for the first key only (the others are read
 * as they are then, a missing key empty): what a rendezvous node waits on,
 * with what it will read next.
 *
 * BARRIER (crun's G3 extra, and the libuv server's): the key is an arrival
 * counter, incremented like ADD; the caller is answered when the counter
 * reaches the world size, and then every pending party is released. Chosen
 * deliberately: a plain WAIT on a barrier key returns as soon as the key
 * exists, that is at the first arrival (the key is a counter, as ADD makes
 * it); a SET on the key of a pending barrier replaces the counter, wakes plain
 * waiters and releases no barrier party: parties are released only by a
 * BARRIER whose increment (of the SET value, read like ADD) reaches the world
 * size, and a value that is not a number makes that BARRIER fail and close
 * its connection, like ADD.
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crun/err.h"
#include "store_internal.h"

/* Bytes charged per entry besides its key and value: the struct, malloc's
 * header and its share of the bucket array. */
#define STORE_ENTRY_OVERHEAD (sizeof(struct store_entry) + 32)

/* ---- Entries ----------------------------------------------------------- */

/* The entry for key, or NULL. */
struct store_entry *store__find(struct crun_store_server *srv, const void *key,
				size_t klen)
{
	struct map_node *n =
	    map_find(&srv->map, key, klen, map_hash(key, klen));

	return n != NULL ? (struct store_entry *)n : NULL;
}

/* The entry for key, created empty if needed; NULL with *err on failure. */
struct store_entry *store__get_entry(struct crun_store_server *srv,
				     const void *key, size_t klen, int *err)
{
	uint64_t h = map_hash(key, klen);
	struct map_node *n = map_find(&srv->map, key, klen, h);
	struct store_entry *e;

	if (n != NULL)
		return (struct store_entry *)n;
	if (srv->mem + klen + STORE_ENTRY_OVERHEAD > srv->lim.max_memory) {
		*err = CRUN_ETOOBIG;
		return NULL;
	}
	e = calloc(1, sizeof(*e) + klen);
	if (e == NULL) {
		*err = UV_ENOMEM;
		return NULL;
	}
	if (klen > 0)
		memcpy(e->key, key, klen);
	e->klen = klen;
	e->node.key = e->key;
	e->node.klen = klen;
	e->node.hash = h;
	if (map_insert(&srv->map, &e->node) != 0) {
		free(e);
		*err = UV_ENOMEM;
		return NULL;
	}
	srv->mem += klen + STORE_ENTRY_OVERHEAD;
	return e;
}

/* Free e if nothing refers to it any more. */
void store__entry_gc(struct crun_store_server *srv, struct store_entry *e)
{
	if (e->has_value || e->qlen > 0 || e->waiters.head != NULL ||
	    e->bwaiters.head != NULL || e->watches != NULL)
		return;
	map_remove(&srv->map, &e->node);
	srv->nfreed++;
	srv->mem -= e->klen + STORE_ENTRY_OVERHEAD;
	free(e->val);
	free(e);
}

/* c's cached entry if it is key's (see store_conn.hit), else NULL. */
static struct store_entry *store_conn_cached(const struct store_conn *c,
					     const void *key, size_t klen)
{
	if (c->hit_gen != c->srv->nfreed)
		return NULL;
	for (int i = 0; i < 2; i++) {
		struct store_entry *e = c->hit[i];

		if (e != NULL && e->klen == klen &&
		    (klen == 0 || memcmp(e->key, key, klen) == 0))
			return e;
	}
	return NULL;
}

/* Remember e, just looked up for c, in front of c's cache. */
static void store_conn_remember(struct store_conn *c, struct store_entry *e)
{
	if (c->hit_gen != c->srv->nfreed) {
		c->hit[1] = NULL;
		c->hit_gen = c->srv->nfreed;
	} else {
		c->hit[1] = c->hit[0];
	}
	c->hit[0] = e;
}

/* store__find for one of c's requests, through c's cache. */
struct store_entry *store__conn_find(struct store_conn *c, const void *key,
				     size_t klen)
{
	struct store_entry *e = store_conn_cached(c, key, klen);

	if (e == NULL && (e = store__find(c->srv, key, klen)) != NULL)
		store_conn_remember(c, e);
	return e;
}

/* store__get_entry for one of c's requests, through c's cache. */
struct store_entry *store__conn_get_entry(struct store_conn *c, const void *key,
					  size_t klen, int *err)
{
	struct store_entry *e = store_conn_cached(c, key, klen);

	if (e == NULL && (e = store__get_entry(c->srv, key, klen, err)) != NULL)
		store_conn_remember(c, e);
	return e;
}

/*
 * Push a WATCH_KEY notification to every watcher of e. A watcher that would
 * pass its share (store__conn_share: it does not read) or max_memory is
 * closed instead.
 */
void store__notify(struct store_entry *e, unsigned kind, const void *old,
		   size_t olen, const void *new, size_t nlen)
{
	struct store_watch *w;
	size_t n = 1 + 8 + e->klen + 8 + olen + 8 + nlen;

	for (w = e->watches; w != NULL; w = w->enext) {
		if (w->c->closing || w->c->doom != NULL)
			continue;
		if (!store__conn_fits(w->c, n)) {
			store__conn_doom(w->c, "watch notifications would pass "
					       "its share of max-output or "
					       "max-memory");
			continue;
		}
		store_buf_u8(&w->c->out, kind);
		store_buf_str(&w->c->out, e->key, e->klen);
		store_buf_str(&w->c->out, old, olen);
		store_buf_str(&w->c->out, new, nlen);
		store__conn_account(w->c);
		store__conn_dirty(w->c);
	}
}

/*
 * Give e the value a||b (b may be empty), charging memory. 0, CRUN_ETOOBIG
 * past max_value or max_memory, or UV_ENOMEM; e is unchanged on error.
 */
int store__entry_set(struct crun_store_server *srv, struct store_entry *e,
		     const void *a, size_t alen, const void *b, size_t blen)
{
	size_t nlen = alen + blen, oldlen = e->has_value ? e->vlen : 0;
	unsigned char *v = NULL;

	if (nlen > srv->lim.max_value ||
	    srv->mem - oldlen + nlen > srv->lim.max_memory)
		return CRUN_ETOOBIG;
	/* Same length and nobody watching (a counter's next value, a key
	 * set again): overwrite in place, no allocation. */
	if (nlen == oldlen && nlen > 0 && e->watches == NULL && a != e->val) {
		memcpy(e->val, a, alen);
		if (blen > 0)
			memcpy(e->val + alen, b, blen);
		return 0;
	}
	if (nlen > 0) {
		v = malloc(nlen);
		if (v == NULL)
			return UV_ENOMEM;
		if (alen > 0)
			memcpy(v, a, alen);
		if (blen > 0)
			memcpy(v + alen, b, blen);
	}
	if (e->watches != NULL)
		store__notify(
		    e, e->has_value ? STORE_WATCH_UPDATED : STORE_WATCH_CREATED,
		    e->val, oldlen, v, nlen);
	free(e->val);
	srv->mem = srv->mem - oldlen + nlen;
	if (!e->has_value) {
		srv->nkeys++;
		srv->keybytes += e->klen;
	}
	e->val = v;
	e->vlen = nlen;
	e->has_value = 1;
	return 0;
}

/* ---- Waiters ----------------------------------------------------------- */

/* The list r is (or goes) in. */
static struct store_reglist *store_reg_list(struct store_reg *r)
{
	return r->barrier ? &r->e->bwaiters : &r->e->waiters;
}

/* Append r (its e and barrier set) to its entry's list. */
static void store_reg_link(struct store_reg *r)
{
	struct store_reglist *l = store_reg_list(r);

	r->next = NULL;
	r->prev = l->tail;
	if (l->tail != NULL)
		l->tail->next = r;
	else
		l->head = r;
	l->tail = r;
}

/* Unlink r from its entry's list. */
static void store_reg_unlink(struct store_reg *r)
{
	struct store_reglist *l = store_reg_list(r);

	if (r->prev != NULL)
		r->prev->next = r->next;
	else
		l->head = r->next;
	if (r->next != NULL)
		r->next->prev = r->prev;
	else
		l->tail = r->prev;
	r->e = NULL;
	r->prev = r->next = NULL;
}

/* Unlink w from its connection, uncharge and free it (regs are unlinked). */
static void store_waiter_free(struct store_waiter *w)
{
	struct store_conn *c = w->c;

	if (w->prev != NULL)
		w->prev->next = w->next;
	else
		c->waiters = w->next;
	if (w->next != NULL)
		w->next->prev = w->prev;
	c->srv->mem -= w->bytes;
	c->srv->nwaiters--;
	free(w);
}

/* Append a value reply: the entry's value, or empty when it has none. */
void store__reply_value(struct store_conn *c, const struct store_entry *e)
{
	if (e != NULL && e->has_value)
		store_buf_str(&c->out, e->val, e->vlen);
	else
		store_buf_u64(&c->out, 0);
}

/* The size of the MULTI_GET reply to a key list, as things stand. */
size_t store__values_size(struct crun_store_server *srv, const unsigned char *p,
			  size_t len)
{
	const unsigned char *end = p + len, *k;
	const struct store_entry *e;
	size_t klen, n = 0;

	while (store_wire_next_str(&p, end, &k, &klen)) {
		e = store__find(srv, k, klen);
		n += 8 + (e != NULL ? e->vlen : 0);
	}
	return n;
}

/* Append the MULTI_GET reply to a key list. */
void store__reply_values(struct store_conn *c, const unsigned char *p,
			 size_t len)
{
	const unsigned char *end = p + len, *k;
	size_t klen;

	while (store_wire_next_str(&p, end, &k, &klen))
		store__reply_value(c, store__find(c->srv, k, klen));
}

/* WAIT_GET's reply once its keys exist: STOP_WAITING, then the values. */
void store__reply_wait_get(struct store_conn *c, const unsigned char *p,
			   size_t len)
{
	store_buf_u8(&c->out, STORE_STOP_WAITING);
	store__reply_values(c, p, len);
}

/*
 * Count one registration of w as satisfied; answer and free w at zero.
 * Returns 1 if w was answered (and is freed).
 */
static int store_waiter_hit(struct store_waiter *w, int one)
{
	struct store_conn *c = w->c;

	assert(w->missing > 0);
	if (--w->missing > 0)
		return 0;
	if (!c->closing && c->doom == NULL) {
		if (w->tagged) {
			store_buf_u8(&c->out, one ? STORE_TAG_ANSWER_ONE
						  : STORE_TAG_ANSWER);
			store_buf_u64(&c->out, w->tag);
		} else if (w->list == NULL)
			store_buf_u8(&c->out, STORE_STOP_WAITING);
		else if (!store__conn_fits(
			     c, 1 + store__values_size(c->srv, w->list,
						       w->list_len)))
			store__conn_doom(c,
					 "wait_get reply would pass its "
					 "share of max-output or max-memory");
		else
			store__reply_wait_get(c, w->list, w->list_len);
		store__conn_account(c);
		store__conn_dirty(c);
	}
	store_waiter_free(w);
	return 1;
}

/*
 * Wake the registrations of l oldest first: all of them, or (one) only until
 * a waiter is answered.
 */
void store__wake_list(struct store_reglist *l, int one)
{
	struct store_reg *r;

	while ((r = l->head) != NULL) {
		struct store_waiter *w = r->w;

		if (one && w->count > 1 && w->missing == 1) {
			/* One of a relay's identical waits is answered; the
			 * others keep its place at the head. */
			w->count--;
			if (!w->c->closing && w->c->doom == NULL) {
				store_buf_u8(&w->c->out, STORE_TAG_ANSWER_ONE);
				store_buf_u64(&w->c->out, w->tag);
				store__conn_account(w->c);
				store__conn_dirty(w->c);
			}
			return;
		}
		store_reg_unlink(r);
		if (store_waiter_hit(w, one) && one)
			return;
	}
}

void store__wake(struct store_entry *e)
{
	if (e->waiters.head != NULL)
		store__wake_list(&e->waiters, 0);
}

/* Drop every parked WAIT/BARRIER of c, without answering. */
/* Drop w's registrations and free it. */
static void store_waiter_cancel(struct store_waiter *w)
{
	struct crun_store_server *srv = w->c->srv;
	struct store_entry *e;
	size_t i;

	for (i = 0; i < w->nregs; i++) {
		e = w->regs[i].e;
		if (e == NULL)
			continue;
		store_reg_unlink(&w->regs[i]);
		store__entry_gc(srv, e);
	}
	store_waiter_free(w);
}

void store__conn_cancel_waits(struct store_conn *c)
{
	while (c->waiters != NULL)
		store_waiter_cancel(c->waiters);
}

/* CANCEL_TAG: take n of c's tagged wait tag back (nothing if it was
 * answered), dropping it with its last. O(waits). */
void store__conn_cancel_tag(struct store_conn *c, uint64_t tag, uint32_t n)
{
	struct store_waiter *w;

	for (w = c->waiters; w != NULL; w = w->next)
		if (w->tagged && w->tag == tag) {
			if (w->count > n)
				w->count -= n;
			else
				store_waiter_cancel(w);
			return;
		}
}

/*
 * Park a waiter for c with one registration per missing key of the request
 * (its one key for a barrier). The waiter is charged to srv->mem.
 */
int store__park(struct store_conn *c, const struct store_req *req,
		size_t missing, int barrier)
{
	struct crun_store_server *srv = c->srv;
	const unsigned char *p = req->list, *end = req->list + req->list_len;
	const unsigned char *k;
	struct store_waiter *w;
	struct store_entry *e;
	struct store_reg *r;
	size_t klen, i = 0, bytes;
	int err = 0, values = req->op == STORE_OP_WAIT_GET ||
			      req->op == STORE_OP_WAIT_FIRST_GET;

	bytes = sizeof(*w) + missing * sizeof(w->regs[0]);
	if (values)
		bytes += req->list_len;
	if (srv->mem + bytes > srv->lim.max_memory)
		return CRUN_ETOOBIG;
	w = calloc(1, bytes);
	if (w == NULL)
		return UV_ENOMEM;
	if (values) {
		w->list = (unsigned char *)&w->regs[missing];
		w->list_len = req->list_len;
		memcpy(&w->regs[missing], req->list, req->list_len);
	}
	w->c = c;
	w->tagged = req->op == STORE_OP_WAIT_TAG;
	w->tag = (uint64_t)req->num;
	w->count = w->tagged ? req->u32 : 1;
	w->nregs = missing;
	w->missing = missing;
	w->bytes = bytes;
	srv->mem += bytes;
	srv->nwaiters++;
	w->next = c->waiters;
	if (c->waiters != NULL)
		c->waiters->prev = w;
	c->waiters = w;
	for (;;) {
		if (barrier) {
			if (i == 1)
				break;
			k = req->key;
			klen = req->key_len;
		} else if (i == missing ||
			   !store_wire_next_str(&p, end, &k, &klen)) {
			break; /* WAIT_FIRST_GET: its first key is all */
		}
		e = store__get_entry(srv, k, klen, &err);
		if (e == NULL)
			break;
		if (!barrier && store__present(e))
			continue;
		r = &w->regs[i++];
		r->w = w;
		r->e = e;
		r->barrier = barrier;
		store_reg_link(r);
	}
	if (err != 0) {
		/* Undo: drop this waiter's registrations so far. */
		for (size_t j = 0; j < i; j++) {
			e = w->regs[j].e;
			store_reg_unlink(&w->regs[j]);
			store__entry_gc(srv, e);
		}
		store_waiter_free(w);
	}
	return err;
}

/* ---- Counters and watches ---------------------------------------------- */

/* Store the decimal text of v at e. */
static int store_set_int(struct crun_store_server *srv, struct store_entry *e,
			 int64_t v)
{
	char num[24], *p = num + sizeof(num);
	uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;

	/* By hand: snprintf was a third of an ADD's cost. */
	do
		*--p = (char)('0' + u % 10);
	while ((u /= 10) != 0);
	if (v < 0)
		*--p = '-';
	return store__entry_set(srv, e, p, (size_t)(num + sizeof(num) - p),
				NULL, 0);
}

/* ADD delta to the counter at e: like std::stoll on the old value. */
int store__do_add(struct crun_store_server *srv, struct store_entry *e,
		  int64_t delta, int64_t *out, char *errmsg, size_t errlen)
{
	int64_t old = 0;
	int rc;

	if (e->has_value && store_wire_parse_int(e->val, e->vlen, &old) != 0) {
		snprintf(
		    errmsg, errlen, "value of key \"%.*s\" is not a number",
		    (int)(e->klen > 64 ? 64 : e->klen), (const char *)e->key);
		return CRUN_EPROTO;
	}
	/* Wrap like the two's complement hardware PyTorch runs on. */
	*out = (int64_t)((uint64_t)old + (uint64_t)delta);
	rc = store_set_int(srv, e, *out);
	return rc;
}

/* Register c as a watcher of key (G0 WATCH_KEY). */
int store__watch(struct store_conn *c, const struct store_req *req)
{
	struct store_entry *e;
	struct store_watch *w;
	int err = 0;

	e = store__get_entry(c->srv, req->key, req->key_len, &err);
	if (e == NULL)
		return err;
	w = NULL;
	if (c->srv->mem + sizeof(*w) > c->srv->lim.max_memory)
		err = CRUN_ETOOBIG;
	else if ((w = calloc(1, sizeof(*w))) == NULL)
		err = UV_ENOMEM;
	if (err != 0) {
		store__entry_gc(c->srv, e);
		return err;
	}
	c->srv->mem += sizeof(*w);
	c->srv->nwatches++;
	w->c = c;
	w->e = e;
	w->enext = e->watches;
	if (e->watches != NULL)
		e->watches->eprev = w;
	e->watches = w;
	w->cnext = c->watches;
	c->watches = w;
	store_buf_u8(&c->out, STORE_WATCH_REGISTERED);
	return 0;
}

/* Remove every watch of c. */
void store__conn_unwatch(struct store_conn *c)
{
	struct store_watch *w;

	while ((w = c->watches) != NULL) {
		c->watches = w->cnext;
		if (w->eprev != NULL)
			w->eprev->enext = w->enext;
		else
			w->e->watches = w->enext;
		if (w->enext != NULL)
			w->enext->eprev = w->eprev;
		store__entry_gc(c->srv, w->e);
		free(w);
		c->srv->mem -= sizeof(*w);
		c->srv->nwatches--;
	}
}

/* Free every entry and the map. */
void store__free_entries(struct crun_store_server *srv)
{
	struct map_iter it = {0};
	struct map_node *n;
	struct store_entry *e;
	struct store_qitem *q;

	while ((n = map_next(&srv->map, &it)) != NULL) {
		e = (struct store_entry *)n;
		while ((q = e->qhead) != NULL) {
			e->qhead = q->next;
			free(q);
		}
		free(e->val);
		free(e);
	}
	map_release(&srv->map);
}

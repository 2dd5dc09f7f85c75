/*
 * The async store client's requests (store_aclient.c runs them): each
 * public call encodes its frames (a WAIT first for a get, multi_get or
 * wait; one WAIT_GET instead, from a crun store) into a request and
 * queues it, and the background watch keeps one WAIT_GET of its keys
 * queued last.
 */
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "crun/err.h"
#include "crun/store.h"
#include "store_aclient_internal.h"

/* A new request of kind, or NULL (*err set) if c takes no more. */
static struct store_areq *store_areq_new(struct crun_store_aclient *c,
					 enum store_areply kind,
					 store_reply_cb cb, void *data,
					 int *err)
{
	struct store_areq *r;

	if (c->closing || c->state == AS_FAILED) {
		*err = CRUN_ECLOSED;
		return NULL;
	}
	r = calloc(1, sizeof(*r));
	if (r == NULL) {
		*err = UV_ENOMEM;
		return NULL;
	}
	r->kind = kind;
	r->cb = cb;
	r->data = data;
	r->timeout_ms = -1;
	store_buf_init(&r->wait);
	store_buf_init(&r->main);
	return r;
}

/* Queue r (its frames encoded) and send what can be sent. */
static int store_areq_submit(struct crun_store_aclient *c, struct store_areq *r)
{
	if (r->wait.oom || r->main.oom) {
		store_aclient__free_req(r);
		return UV_ENOMEM;
	}
	store_aclient__enqueue(c, r);
	store_aclient__pump(c);
	return 0;
}

/*
 * Encode a WAIT on keys into r->wait: for a get or multi_get from a crun
 * store, a WAIT_GET, whose answer brings the values (no main frame is sent).
 */
static void store_areq_wait(struct crun_store_aclient *c, struct store_areq *r,
			    const char *const *keys, size_t n, int timeout_ms)
{
	size_t i;

	r->has_wait = 1;
	r->wait_get = c->use_wait_get && r->kind != AR_NONE;
	r->timeout_ms = timeout_ms;
	store_buf_op(&r->wait, STORE_GEN_G3,
		     !r->wait_get    ? STORE_OP_WAIT
		     : r->first_only ? STORE_OP_WAIT_FIRST_GET
				     : STORE_OP_WAIT_GET);
	store_buf_u64(&r->wait, n);
	for (i = 0; i < n; i++)
		store_buf_str(&r->wait, keys[i], strlen(keys[i]));
}

/* A one-key request: op, key, then optional value(s). */
static int store_aclient_simple(struct crun_store_aclient *c, enum store_op op,
				enum store_areply kind, const char *key,
				const void *v1, size_t l1, const void *v2,
				size_t l2, int nvals, store_reply_cb cb,
				void *data)
{
	struct store_areq *r;
	int err = 0;

	r = store_areq_new(c, kind, cb, data, &err);
	if (r == NULL)
		return err;
	store_buf_op(&r->main, STORE_GEN_G3, op);
	if (key != NULL)
		store_buf_str(&r->main, key, strlen(key));
	if (nvals >= 1)
		store_buf_str(&r->main, v1, l1);
	if (nvals >= 2)
		store_buf_str(&r->main, v2, l2);
	return store_areq_submit(c, r);
}

int store_aclient_set(struct crun_store_aclient *c, const char *key,
		      const void *val, size_t len, store_reply_cb cb,
		      void *data)
{
	return store_aclient_simple(c, STORE_OP_SET, AR_NONE, key, val, len,
				    NULL, 0, 1, cb, data);
}

int store_aclient_append(struct crun_store_aclient *c, const char *key,
			 const void *val, size_t len, store_reply_cb cb,
			 void *data)
{
	return store_aclient_simple(c, STORE_OP_APPEND, AR_NONE, key, val, len,
				    NULL, 0, 1, cb, data);
}

int store_aclient_compare_set(struct crun_store_aclient *c, const char *key,
			      const void *expected, size_t elen,
			      const void *desired, size_t dlen,
			      store_reply_cb cb, void *data)
{
	return store_aclient_simple(c, STORE_OP_COMPARE_SET, AR_BYTES, key,
				    expected, elen, desired, dlen, 2, cb, data);
}

int store_aclient_delete_key(struct crun_store_aclient *c, const char *key,
			     store_reply_cb cb, void *data)
{
	return store_aclient_simple(c, STORE_OP_DELETE_KEY, AR_U64, key, NULL,
				    0, NULL, 0, 0, cb, data);
}

int store_aclient_num_keys(struct crun_store_aclient *c, store_reply_cb cb,
			   void *data)
{
	return store_aclient_simple(c, STORE_OP_GETNUMKEYS, AR_U64, NULL, NULL,
				    0, NULL, 0, 0, cb, data);
}

int store_aclient_add(struct crun_store_aclient *c, const char *key,
		      int64_t delta, store_reply_cb cb, void *data)
{
	struct store_areq *r;
	int err = 0;

	r = store_areq_new(c, AR_U64, cb, data, &err);
	if (r == NULL)
		return err;
	store_buf_op(&r->main, STORE_GEN_G3, STORE_OP_ADD);
	store_buf_str(&r->main, key, strlen(key));
	store_buf_u64(&r->main, (uint64_t)delta);
	return store_areq_submit(c, r);
}

int store_aclient_get(struct crun_store_aclient *c, const char *key,
		      int timeout_ms, store_reply_cb cb, void *data)
{
	struct store_areq *r;
	int err = 0;

	r = store_areq_new(c, AR_BYTES, cb, data, &err);
	if (r == NULL)
		return err;
	store_areq_wait(c, r, &key, 1, timeout_ms);
	if (!r->wait_get) {
		store_buf_op(&r->main, STORE_GEN_G3, STORE_OP_GET);
		store_buf_str(&r->main, key, strlen(key));
	}
	return store_areq_submit(c, r);
}

int store_aclient_wait(struct crun_store_aclient *c, const char *const *keys,
		       size_t n, int timeout_ms, store_reply_cb cb, void *data)
{
	struct store_areq *r;
	int err = 0;

	r = store_areq_new(c, AR_NONE, cb, data, &err);
	if (r == NULL)
		return err;
	store_areq_wait(c, r, keys, n, timeout_ms);
	return store_areq_submit(c, r);
}

int store_aclient_check(struct crun_store_aclient *c, const char *const *keys,
			size_t n, store_reply_cb cb, void *data)
{
	struct store_areq *r;
	size_t i;
	int err = 0;

	r = store_areq_new(c, AR_U8, cb, data, &err);
	if (r == NULL)
		return err;
	store_buf_op(&r->main, STORE_GEN_G3, STORE_OP_CHECK);
	store_buf_u64(&r->main, n);
	for (i = 0; i < n; i++)
		store_buf_str(&r->main, keys[i], strlen(keys[i]));
	return store_areq_submit(c, r);
}

/* A MULTI_GET, after a wait (up to timeout_ms) on its keys if wait. */
static int store_aclient_mget(struct crun_store_aclient *c,
			      const char *const *keys, size_t n, int wait,
			      int timeout_ms, store_reply_cb cb, void *data)
{
	struct store_areq *r;
	size_t i;
	int err = 0;

	r = store_areq_new(c, AR_NBYTES, cb, data, &err);
	if (r == NULL)
		return err;
	r->n = n;
	if (wait)
		store_areq_wait(c, r, keys, n, timeout_ms);
	if (!r->wait_get) {
		store_buf_op(&r->main, STORE_GEN_G3, STORE_OP_MULTI_GET);
		store_buf_u64(&r->main, n);
		for (i = 0; i < n; i++)
			store_buf_str(&r->main, keys[i], strlen(keys[i]));
	}
	return store_areq_submit(c, r);
}

int store_aclient_multi_get(struct crun_store_aclient *c,
			    const char *const *keys, size_t n, int timeout_ms,
			    store_reply_cb cb, void *data)
{
	return store_aclient_mget(c, keys, n, 1, timeout_ms, cb, data);
}

int store_aclient_peek(struct crun_store_aclient *c, const char *const *keys,
		       size_t n, store_reply_cb cb, void *data)
{
	return store_aclient_mget(c, keys, n, 0, -1, cb, data);
}

int store_aclient_multi_set(struct crun_store_aclient *c,
			    const char *const *keys, const void *const *vals,
			    const size_t *lens, size_t n, store_reply_cb cb,
			    void *data)
{
	struct store_areq *r;
	size_t i;
	int err = 0;

	r = store_areq_new(c, AR_NONE, cb, data, &err);
	if (r == NULL)
		return err;
	store_buf_op(&r->main, STORE_GEN_G3, STORE_OP_MULTI_SET);
	store_buf_u64(&r->main, n);
	for (i = 0; i < n; i++) {
		store_buf_str(&r->main, keys[i], strlen(keys[i]));
		store_buf_str(&r->main, vals[i], lens[i]);
	}
	return store_areq_submit(c, r);
}

/* A WAIT_GET of the watch's keys, queued last (not sent), or NULL. */
static struct store_areq *queue_watch(struct crun_store_aclient *c)
{
	struct store_areq *r;
	int err = 0;

	r = store_areq_new(c, c->nwkeys > 1 ? AR_NBYTES : AR_BYTES, NULL, NULL,
			   &err);
	if (r == NULL)
		return NULL;
	r->bg = 1;
	r->wgen = c->wgen;
	r->n = c->nwkeys;
	r->first_only = c->nwkeys > 1;
	store_areq_wait(c, r, (const char *const *)c->wkeys, c->nwkeys, -1);
	if (r->wait.oom) {
		store_aclient__free_req(r);
		return NULL;
	}
	store_aclient__enqueue(c, r);
	c->wnext = r;
	return r;
}

int store_aclient_watch_keys(struct crun_store_aclient *c,
			     const char *const *keys, size_t n,
			     store_reply_cb cb, void *data)
{
	char **k;

	if (!c->use_wait_get || n == 0)
		return CRUN_EUSAGE;
	if (c->closing || c->state == AS_FAILED)
		return CRUN_ECLOSED;
	if ((k = calloc(n, sizeof(*k))) == NULL)
		return UV_ENOMEM;
	for (size_t i = 0; i < n; i++) {
		if ((k[i] = strdup(keys[i])) == NULL) {
			while (i > 0)
				free(k[--i]);
			free(k);
			return UV_ENOMEM;
		}
	}
	store_aclient_unwatch(c, CRUN_ECANCELED);
	store_aclient__free_wkeys(c);
	c->wkeys = k;
	c->nwkeys = n;
	c->wgen++;
	c->wqueue = queue_watch;
	if (queue_watch(c) == NULL)
		return UV_ENOMEM;
	c->wlive = 1;
	c->wcb = cb;
	c->wdata = data;
	store_aclient__pump(c);
	return 0;
}

int store_aclient_watch(struct crun_store_aclient *c, const char *key,
			store_reply_cb cb, void *data)
{
	return store_aclient_watch_keys(c, &key, 1, cb, data);
}

void store_aclient_unwatch(struct crun_store_aclient *c, int status)
{
	int rc;

	if (!c->wlive)
		return;
	c->wlive = 0;
	/* Its incarnations are answered (or dropped unsent) in silence. */
	if (c->parked != NULL && (rc = store_aclient__cancel(c, c->parked)))
		store_aclient__fail(c, rc);
	if (c->wcb != NULL)
		c->wcb(c, status, NULL, c->wdata);
}

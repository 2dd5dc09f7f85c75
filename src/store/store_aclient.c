/*
 * The async store client, for code on a libuv loop (the agent's
 * rendezvous). It speaks G3 to a crun store or a PyTorch >= 2.2 server.
 *
 * Happy path: resolve the host once; connect to its first address; send
 * VALIDATE (and, with a rendezvous secret, run the AUTH exchange of auth.h:
 * our nonce, the server's challenge checked, our proof) and a PING and wait
 * for the nonce's echo; then send queued requests in order, pipelined,
 * and match replies to requests first-in first-out (replies carry no tags).
 * A WAIT (alone, or the first half of a get or multi_get) stops the pipeline
 * until it is answered, because the server answers later requests at once
 * and the WAIT's byte only when its keys exist. Told that the server is a
 * crun store (store_aclient_use_wait_get), a get or multi_get is one
 * WAIT_GET, answered with STOP_WAITING and the values together. Requests
 * without a reply (set, append, multi_set) complete when everything before them
 * has, so callbacks run in call order. The frames written in one loop
 * iteration are corked and sent together (uv_try_write, the rest by
 * uv_write) from a prepare handle, just before the loop next waits: a
 * node's pipelined requests cost one send and one packet.
 *
 * Failure modes: a connect that fails (refused, reset, unreachable, or
 * closed before validation) moves on to the host's next address at once: a
 * name may resolve to ::1 before 127.0.0.1 and the server listen on one of
 * them only. Once every address has failed with an error worth retrying,
 * the first is tried again after a backoff (50 ms doubling to 1 s), until
 * the deadline; then the connect callback and every queued request get
 * CRUN_ETIMEDOUT. A server that fails the secret's challenge, or closes
 * instead of answering it or our proof, fails the connect with CRUN_EAUTH
 * at once (no retry). A WAIT
 * whose timer fires sends CANCEL_WAIT and reads WAIT_CANCELED, after a
 * STOP_WAITING if the key won the race, then fails with CRUN_ETIMEDOUT (a
 * WAIT_GET that won the race succeeds, its WAIT_CANCELED passed over). A
 * lost connection fails every pending request with its libuv error; close
 * fails them with CRUN_ECANCELED. Memory is freed only once every handle
 * (the socket, the one timer, the prepare handle) is closed.
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "crun/auth.h"
#include "crun/err.h"
#include "crun/store.h"
#include "store_aclient_internal.h"

static void store_aclient_attempt(struct crun_store_aclient *c);
static void store_aclient_drain(struct crun_store_aclient *c);
static int store_aclient_prove(struct crun_store_aclient *c);

/* Free a request. */
void store_aclient__free_req(struct store_areq *r)
{
	store_buf_release(&r->wait);
	store_buf_release(&r->main);
	free(r);
}

void store_aclient__free_wkeys(struct crun_store_aclient *c)
{
	for (size_t i = 0; i < c->nwkeys; i++)
		free(c->wkeys[i]);
	free(c->wkeys);
	c->wkeys = NULL;
	c->nwkeys = 0;
}

/* Free c and call its close callback once both handles are closed. */
static void store_aclient_maybe_free(struct crun_store_aclient *c)
{
	store_close_cb cb;
	void *data;

	if (!c->closing || c->nhandles > 0)
		return;
	cb = c->close_cb;
	data = c->close_data;
	store_buf_release(&c->in);
	store_buf_release(&c->cork);
	store_aclient__free_wkeys(c);
	free(c->addrs);
	free(c);
	if (cb != NULL)
		cb(data);
}

/* A handle of c is closed. */
static void store_aclient_on_close(uv_handle_t *h)
{
	struct crun_store_aclient *c = h->data;

	c->nhandles--;
	if (h == (uv_handle_t *)&c->tcp && !c->closing &&
	    c->state == AS_CONNECTING) {
		/* A failed attempt's socket is gone: retry after the backoff.
		 */
		store_aclient_attempt(c);
		return;
	}
	store_aclient_maybe_free(c);
}

/* Close the socket (a later attempt re-initialises it). */
static void store_aclient_close_tcp(struct crun_store_aclient *c)
{
	c->cork.len = 0; /* its requests fail with the connection */
	uv_prepare_stop(&c->flush);
	if (!c->tcp_open)
		return;
	c->tcp_open = 0;
	uv_close((uv_handle_t *)&c->tcp, store_aclient_on_close);
}

/* Take the head request off the queue, without a callback. */
static struct store_areq *store_aclient_pop(struct crun_store_aclient *c)
{
	struct store_areq *r = c->head;

	c->head = r->next;
	if (c->head == NULL)
		c->tail = NULL;
	if (c->send_next == r)
		c->send_next = r->next;
	if (c->blocked == r) {
		c->blocked = NULL;
		uv_timer_stop(&c->timer);
	}
	if (c->raced == r) {
		c->raced = NULL;
		c->skip_canceled = 1;
	}
	if (c->parked == r)
		c->parked = NULL;
	if (c->wnext == r)
		c->wnext = NULL;
	return r;
}

/* Pop the head request and run its callback with status and r. */
static void store_aclient_complete(struct crun_store_aclient *c, int status,
				   const struct crun_store_reply *rep)
{
	struct store_areq *r = store_aclient_pop(c);
	store_reply_cb cb = r->cb;
	void *data = r->data;

	if (r->bg) {
		/*
		 * The watch's first answer goes to its callback; answers of
		 * incarnations replaced go nowhere, nor do the errors of one
		 * taken back: its successor, after the requests that took it
		 * back, fails in its turn (callbacks stay in call order).
		 */
		cb = NULL;
		if (c->wlive && r->wgen == c->wgen &&
		    (status == 0 || !r->taken)) {
			c->wlive = 0;
			cb = c->wcb;
			data = c->wdata;
		}
	}
	if (cb != NULL)
		cb(c, status, status == 0 ? rep : NULL, data);
	store_aclient__free_req(r);
}

/* Fail every pending request with err. */
static void store_aclient_fail_all(struct crun_store_aclient *c, int err)
{
	while (c->head != NULL)
		store_aclient_complete(c, err, NULL);
}

/* Report the end of connecting (once). */
static void store_aclient_connected(struct crun_store_aclient *c, int status)
{
	store_aclient_connect_cb cb = c->connect_cb;

	c->connect_cb = NULL;
	if (cb != NULL)
		cb(c, status, c->connect_data);
}

/* A write finished. */
static void store_aclient_on_write(uv_write_t *req, int status)
{
	struct store_awrite *w = (struct store_awrite *)req;
	struct crun_store_aclient *c = w->c;

	free(w);
	if (c->closing)
		return;
	if (status < 0 && status != UV_ECANCELED)
		store_aclient__fail(c, status);
	else if (c->state == AS_READY)
		store_aclient_drain(c); /* writes finish in order */
}

/*
 * Write b to the socket: what the kernel takes at once goes by uv_try_write
 * (a uv_write costs an epoll_ctl to stop watching for POLLOUT afterwards),
 * a copy of the rest by uv_write, behind which later tries wait. A request
 * that completes when written (no reply, a callback to run) always takes
 * uv_write: its completion is the write callback.
 */
static int store_aclient_send(struct crun_store_aclient *c,
			      const struct store_buf *b, int direct)
{
	struct store_awrite *w;
	uv_buf_t small[2], *ub = small;
	const unsigned char *p = b->data;
	size_t len = b->len, nb;
	int rc;

	if (b->oom)
		return UV_ENOMEM;
	if (direct && len <= UINT32_MAX) {
		uv_buf_t one = uv_buf_init((char *)p, (unsigned)len);

		rc = uv_try_write((uv_stream_t *)&c->tcp, &one, 1);
		if (rc >= 0 && (size_t)rc == len)
			return 0;
		if (rc < 0 && rc != UV_EAGAIN)
			return rc;
		if (rc > 0) {
			p += rc;
			len -= (size_t)rc;
		}
	}
	nb = store_wire_npieces(len);
	w = malloc(sizeof(*w) + len);
	if (nb > 2)
		ub = malloc(nb * sizeof(*ub));
	if (w == NULL || ub == NULL) {
		free(w);
		if (ub != small)
			free(ub);
		return UV_ENOMEM;
	}
	w->c = c;
	memcpy(w->data, p, len);
	/* uv_buf_t lengths are 32-bit: a request past 4 GiB goes in pieces. */
	store_wire_slices(ub, nb, w->data, len);
	rc = uv_write(&w->req, (uv_stream_t *)&c->tcp, ub, (unsigned)nb,
		      store_aclient_on_write);
	if (ub != small)
		free(ub);
	if (rc != 0)
		free(w);
	return rc;
}

/* Send what is corked: 0 or an error. */
static int store_aclient_uncork(struct crun_store_aclient *c)
{
	int rc;

	uv_prepare_stop(&c->flush);
	if (c->cork.len == 0)
		return 0;
	rc = store_aclient_send(c, &c->cork, 1);
	c->cork.len = 0;
	if (c->cork.cap > 65536 || c->cork.oom) /* a large frame went */
		store_buf_release(&c->cork);
	return rc;
}

static void store_aclient_on_flush(uv_prepare_t *h)
{
	struct crun_store_aclient *c = h->data;
	int rc = store_aclient_uncork(c);

	if (rc != 0)
		store_aclient__fail(c, rc);
}

/*
 * Queue b's frame: what is written in one loop iteration goes out in one
 * send before the loop waits. A request that completes when written (not
 * direct) is sent now, behind what is corked.
 */
static int store_aclient_write_as(struct crun_store_aclient *c,
				  const struct store_buf *b, int direct)
{
	int rc;

	if (b->oom)
		return UV_ENOMEM;
	if (!direct)
		return (rc = store_aclient_uncork(c)) != 0
			   ? rc
			   : store_aclient_send(c, b, 0);
	store_buf_put(&c->cork, b->data, b->len);
	if (c->cork.oom)
		return UV_ENOMEM;
	uv_prepare_start(&c->flush, store_aclient_on_flush);
	return 0;
}

static int store_aclient_write(struct crun_store_aclient *c,
			       const struct store_buf *b)
{
	return store_aclient_write_as(c, b, 1);
}

/* Queue r last (unsent). */
void store_aclient__enqueue(struct crun_store_aclient *c, struct store_areq *r)
{
	if (c->tail != NULL)
		c->tail->next = r;
	else
		c->head = r;
	c->tail = r;
	if (c->send_next == NULL)
		c->send_next = r;
}

/* Send CANCEL_WAIT for r, the one WAIT parked on the server: 0 or an error. */
int store_aclient__cancel(struct crun_store_aclient *c, struct store_areq *r)
{
	struct store_buf b;
	int rc;

	r->canceling = 1;
	if (c->parked == r)
		c->parked = NULL;
	store_buf_init(&b);
	store_buf_op(&b, STORE_GEN_G3, STORE_OP_CANCEL_WAIT);
	rc = store_aclient_write(c, &b);
	store_buf_release(&b);
	return rc;
}

/* The WAIT at the head of the pipeline timed out: cancel it. */
static void store_aclient_on_wait_timeout(uv_timer_t *t)
{
	struct crun_store_aclient *c = t->data;
	int rc;

	if (c->blocked == NULL || c->blocked->canceling)
		return;
	rc = store_aclient__cancel(c, c->blocked);
	if (rc != 0)
		store_aclient__fail(c, rc);
}

/* Put r (queued, unsent) last in the queue, or free it. */
static void store_aclient_requeue(struct crun_store_aclient *c,
				  struct store_areq *r, int keep)
{
	struct store_areq **pp = &c->head, *prev = NULL;

	while (*pp != r) {
		prev = *pp;
		pp = &(*pp)->next;
	}
	*pp = r->next;
	if (c->tail == r)
		c->tail = prev;
	if (c->send_next == r)
		c->send_next = r->next;
	if (!keep) {
		if (c->wnext == r)
			c->wnext = NULL;
		store_aclient__free_req(r);
		return;
	}
	r->next = NULL;
	store_aclient__enqueue(c, r);
}

/* Send queued requests up to the next WAIT. */
void store_aclient__pump(struct crun_store_aclient *c)
{
	struct store_areq *r;
	int rc;

	while (c->state == AS_READY && c->blocked == NULL &&
	       (r = c->send_next) != NULL) {
		/*
		 * The background watch goes last, when nothing follows it;
		 * one of a watch replaced or answered is not sent at all.
		 */
		if (r->bg && (!c->wlive || r->wgen != c->wgen)) {
			store_aclient_requeue(c, r, 0);
			continue;
		}
		if (r->bg && r->next != NULL) {
			store_aclient_requeue(c, r, 1);
			continue;
		}
		/*
		 * Requests after a parked WAIT would be answered before it,
		 * so the watch's WAIT_GET is taken back first (the server
		 * answers CANCEL_WAIT in order) and a new one goes after them.
		 */
		if (c->parked != NULL) {
			/* The successor first: whatever fails next, it is in
			 * the queue to report it. */
			if (c->wlive && c->wnext == NULL &&
			    c->wqueue(c) == NULL) {
				store_aclient__fail(c, UV_ENOMEM);
				return;
			}
			c->parked->taken = c->wlive;
			rc = store_aclient__cancel(c, c->parked);
			if (rc != 0) {
				store_aclient__fail(c, rc);
				return;
			}
		}
		c->send_next = r->next;
		if (r->has_wait && r->phase == 0 && r->bg) {
			rc = store_aclient_write(c, &r->wait);
			c->parked = r;
			c->wnext = NULL;
		} else if (r->has_wait && r->phase == 0) {
			rc = store_aclient_write(c, &r->wait);
			c->blocked = r;
			if (rc == 0 && r->timeout_ms >= 0)
				uv_timer_start(&c->timer,
					       store_aclient_on_wait_timeout,
					       (uint64_t)r->timeout_ms, 0);
		} else {
			rc = store_aclient_write_as(
			    c, &r->main, r->kind != AR_NONE || r->cb == NULL);
		}
		if (rc != 0) {
			store_aclient__fail(c, rc);
			return;
		}
		r->sent = 1;
	}
}

/* Complete the no-reply requests at the head that have been written. */
static void store_aclient_drain(struct crun_store_aclient *c)
{
	struct crun_store_reply rep;

	memset(&rep, 0, sizeof(rep));
	while (!c->closing && c->head != NULL && c->head->sent &&
	       !c->head->has_wait && c->head->kind == AR_NONE)
		store_aclient_complete(c, 0, &rep);
}

/*
 * Parse the head request's reply from c->in: the bytes consumed (0: need
 * more) or a negative error.
 */
static ssize_t store_aclient_parse(struct crun_store_aclient *c)
{
	struct store_areq *r = c->head;
	const unsigned char *p = c->in.data, *end = c->in.data + c->in.len;
	struct crun_store_reply rep;
	struct crun_store_iov *iov = NULL;
	uint64_t n;
	size_t i;
	int rc;

	memset(&rep, 0, sizeof(rep));
	if (r->has_wait && r->phase == 0) {
		if (p[0] == STORE_STOP_WAITING && r->canceling && r->wait_get) {
			/* Won the race: the values, then WAIT_CANCELED. */
			r->phase = 1;
			c->raced = r;
			return 1;
		}
		if (p[0] == STORE_STOP_WAITING && r->canceling) {
			r->canceling =
			    2; /* won the race; WAIT_CANCELED follows */
			return 1;
		}
		if (p[0] == STORE_WAIT_CANCELED && r->canceling && r->bg) {
			store_aclient__free_req(
			    store_aclient_pop(c)); /* taken back */
			return 1;
		}
		if (p[0] == STORE_WAIT_CANCELED && r->canceling) {
			store_aclient_complete(c, CRUN_ETIMEDOUT, NULL);
			return 1;
		}
		if (p[0] != STORE_STOP_WAITING)
			return CRUN_EPROTO;
		if (c->blocked == r) {
			uv_timer_stop(&c->timer);
			c->blocked = NULL;
		}
		if (r->kind == AR_NONE) {
			store_aclient_complete(c, 0, &rep);
		} else {
			r->phase = 1;
			if (!r->wait_get &&
			    (rc = store_aclient_write(c, &r->main)) != 0)
				return rc;
		}
		return 1;
	}
	switch (r->kind) {
	case AR_U8:
		if (p[0] > STORE_NOT_READY)
			return CRUN_EPROTO;
		rep.ready = p[0] == STORE_READY;
		store_aclient_complete(c, 0, &rep);
		return 1;
	case AR_U64:
		if (end - p < 8)
			return 0;
		rep.num = (int64_t)store_wire_u64(p);
		store_aclient_complete(c, 0, &rep);
		return 8;
	case AR_BYTES:
		if (end - p < 8)
			return 0;
		n = store_wire_u64(p);
		if (n > (uint64_t)(end - p) - 8)
			return 0;
		rep.value = p + 8;
		rep.len = (size_t)n;
		store_aclient_complete(c, 0, &rep);
		return (ssize_t)(8 + n);
	case AR_NBYTES:
		/* Check the whole reply is in before building the array. */
		for (i = 0; i < r->n; i++) {
			if (end - p < 8)
				return 0;
			n = store_wire_u64(p);
			if (n > (uint64_t)(end - p) - 8)
				return 0;
			p += 8 + n;
		}
		iov = calloc(r->n ? r->n : 1, sizeof(*iov));
		if (iov == NULL)
			return UV_ENOMEM;
		for (p = c->in.data, i = 0; i < r->n; i++) {
			iov[i].len = (size_t)store_wire_u64(p);
			iov[i].base = p + 8;
			p += 8 + iov[i].len;
		}
		rep.values = iov;
		rep.nvalues = r->n;
		if (r->bg && r->n > 0) { /* the watched key's value first */
			rep.value = iov[0].base;
			rep.len = iov[0].len;
		}
		store_aclient_complete(c, 0, &rep);
		free(iov);
		return p - c->in.data;
	case AR_NONE:
	default:
		return CRUN_EPROTO;
	}
}

/* Consume every complete reply in c->in. */
static void store_aclient_process(struct crun_store_aclient *c)
{
	ssize_t used;

	for (;;) {
		store_aclient_drain(c);
		if (c->closing || c->state != AS_READY || c->in.len == 0)
			break;
		if (c->skip_canceled) {
			if (c->in.data[0] != STORE_WAIT_CANCELED) {
				store_aclient__fail(c, CRUN_EPROTO);
				return;
			}
			c->skip_canceled = 0;
			used = 1;
		} else if (c->head == NULL || !c->head->sent) {
			store_aclient__fail(c, CRUN_EPROTO);
			return;
		} else {
			used = store_aclient_parse(c);
		}
		if (used < 0) {
			store_aclient__fail(c, (int)used);
			return;
		}
		if (used == 0)
			break;
		memmove(c->in.data, c->in.data + used,
			c->in.len - (size_t)used);
		c->in.len -= (size_t)used;
	}
	if (!c->closing && c->state == AS_READY)
		store_aclient__pump(c);
}

/* The connection failed for good: fail everything pending with err. */
void store_aclient__fail(struct crun_store_aclient *c, int err)
{
	if (c->state == AS_FAILED)
		return;
	c->state = AS_FAILED;
	uv_timer_stop(&c->timer);
	store_aclient_close_tcp(c);
	store_aclient_connected(c, err);
	store_aclient_fail_all(c, err);
}

/* Whether a connect-time error is worth another attempt. */
static int store_aclient_retryable(int err)
{
	return err == UV_ECONNREFUSED || err == UV_ECONNRESET ||
	       err == UV_ETIMEDOUT || err == UV_EOF || err == UV_ENETUNREACH ||
	       err == UV_EHOSTUNREACH || err == UV_ECONNABORTED ||
	       err == UV_EPIPE;
}

/*
 * A connect-phase error: the host's next address at once, whatever the
 * error (an address family the machine lacks is no reason to stop); after
 * the last one, the first again after the backoff if err is worth a retry,
 * until the deadline; else fail.
 */
static void store_aclient_retry(struct crun_store_aclient *c, int err)
{
	int next = c->cur + 1 < c->naddrs;

	c->last_err = err;
	if ((!next && !store_aclient_retryable(err)) ||
	    uv_now(c->loop) + (next ? 0 : c->backoff) > c->deadline) {
		store_aclient__fail(
		    c, store_aclient_retryable(err) ? CRUN_ETIMEDOUT : err);
		return;
	}
	c->state = AS_CONNECTING;
	store_aclient_close_tcp(c); /* on_close schedules the next attempt */
}

static void store_aclient_on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
	struct crun_store_aclient *c = h->data;

	if (store_buf_reserve(&c->in, 65536) != 0) {
		*buf = uv_buf_init(NULL, 0);
		return;
	}
	*buf = uv_buf_init((char *)c->in.data + c->in.len,
			   (unsigned)(c->in.cap - c->in.len));
}

/* Bytes from the server. */
static void store_aclient_on_read(uv_stream_t *s, ssize_t nread,
				  const uv_buf_t *buf)
{
	struct crun_store_aclient *c = s->data;

	if (c->closing)
		return;
	if (nread < 0) {
		if (c->state == AS_AUTHING ||
		    (c->state == AS_VALIDATING && c->proved))
			store_aclient__fail(c, CRUN_EAUTH);
		else if (c->state == AS_VALIDATING)
			store_aclient_retry(c, (int)nread);
		else
			store_aclient__fail(c, (int)nread);
		return;
	}
	c->in.len += (size_t)nread;
	if (c->state == AS_AUTHING) {
		if (c->in.len < CRUN_AUTH_CHALLENGE_LEN)
			return;
		if (store_aclient_prove(c) != 0)
			return;
	}
	if (c->state == AS_VALIDATING) {
		if (c->in.len < 4)
			return;
		if (store_wire_u32(c->in.data) != c->nonce) {
			store_aclient__fail(c, store_wire_u32(c->in.data) ==
						       CRUN_AUTH_NEEDED
						   ? CRUN_EAUTH
						   : CRUN_EPROTO);
			return;
		}
		memmove(c->in.data, c->in.data + 4, c->in.len - 4);
		c->in.len -= 4;
		c->state = AS_READY;
		store_aclient_connected(c, 0);
		if (c->closing)
			return;
	}
	store_aclient_process(c);
}

/*
 * The server's challenge is in: check it, then send our proof and the PING
 * that ends validation. 0, or the connect failed.
 */
static int store_aclient_prove(struct crun_store_aclient *c)
{
	unsigned char proof[CRUN_AUTH_MAC_LEN];
	struct store_buf b;
	int rc;

	if (auth_client_answer(&c->key, &c->hs, c->in.data, proof) != 0) {
		store_aclient__fail(c, CRUN_EAUTH);
		return CRUN_EAUTH;
	}
	memmove(c->in.data, c->in.data + CRUN_AUTH_CHALLENGE_LEN,
		c->in.len - CRUN_AUTH_CHALLENGE_LEN);
	c->in.len -= CRUN_AUTH_CHALLENGE_LEN;
	store_buf_init(&b);
	store_buf_op(&b, STORE_GEN_G3, STORE_OP_AUTH);
	store_buf_str(&b, proof, sizeof(proof));
	store_buf_op(&b, STORE_GEN_G3, STORE_OP_PING);
	store_buf_u32(&b, c->nonce);
	rc = store_aclient_write(c, &b);
	store_buf_release(&b);
	if (rc != 0) {
		store_aclient__fail(c, rc);
		return rc;
	}
	c->proved = 1;
	c->state = AS_VALIDATING;
	return 0;
}

void store_aclient_set_auth(struct crun_store_aclient *c,
			    const struct crun_auth_key *key)
{
	c->has_key = key != NULL;
	if (key != NULL)
		c->key = *key;
}

/* TCP connected: validate, then wait for the PING echo. */
static void store_aclient_on_connect(uv_connect_t *req, int status)
{
	struct crun_store_aclient *c = req->data;
	struct store_buf b;
	int rc;

	if (c->closing || c->state != AS_CONNECTING)
		return;
	if (status < 0) {
		store_aclient_retry(c, status);
		return;
	}
	uv_tcp_nodelay(&c->tcp, 1);
	c->state = AS_VALIDATING;
	c->proved = 0;
	c->in.len = 0;
	store_buf_init(&b);
	store_buf_op(&b, STORE_GEN_G3, STORE_OP_VALIDATE);
	store_buf_u32(&b, STORE_WIRE_MAGIC);
	if (c->has_key) {
		unsigned char nc[CRUN_AUTH_NONCE_LEN];

		auth_client_hello(&c->hs, nc);
		store_buf_op(&b, STORE_GEN_G3, STORE_OP_AUTH);
		store_buf_str(&b, nc, sizeof(nc));
		c->state = AS_AUTHING;
	} else {
		store_buf_op(&b, STORE_GEN_G3, STORE_OP_PING);
		store_buf_u32(&b, c->nonce);
	}
	rc = store_aclient_write(c, &b);
	store_buf_release(&b);
	if (rc == 0)
		rc = uv_read_start((uv_stream_t *)&c->tcp,
				   store_aclient_on_alloc,
				   store_aclient_on_read);
	if (rc != 0)
		store_aclient_retry(c, rc);
}

/* The backoff is over: open a socket and connect. */
static void store_aclient_on_backoff(uv_timer_t *t)
{
	struct crun_store_aclient *c = t->data;
	int rc;

	uv_tcp_init(c->loop, &c->tcp);
	c->tcp.data = c;
	c->tcp_open = 1;
	c->nhandles++;
	c->conn_req.data = c;
	rc = uv_tcp_connect(&c->conn_req, &c->tcp,
			    (const struct sockaddr *)&c->addrs[c->cur],
			    store_aclient_on_connect);
	if (rc != 0)
		store_aclient_retry(c, rc);
}

/*
 * Schedule the next attempt: at once the first time and for each next
 * address, then from the first address again with backoff.
 */
static void store_aclient_attempt(struct crun_store_aclient *c)
{
	uint64_t delay = 0;

	if (c->state == AS_CONNECTING && ++c->cur == c->naddrs) {
		/*
		 * Every address failed. Jittered (between half and all of the
		 * backoff), so that many agents waiting for one host do not
		 * knock in lockstep.
		 */
		c->cur = 0;
		c->jitter = c->jitter * 1103515245u + 12345u;
		delay =
		    c->backoff / 2 + (c->jitter >> 8) % (c->backoff / 2 + 1);
		c->backoff = c->backoff * 2 > 1000 ? 1000 : c->backoff * 2;
	}
	c->state = AS_CONNECTING;
	uv_timer_start(&c->timer, store_aclient_on_backoff, delay, 0);
}

/*
 * Fill c->addrs with host's addresses: an address as it is, a name resolved
 * now (blocking, once; /etc/hosts or DNS), every address it has in the
 * resolver's order. 0 or an error.
 */
static int store_aclient_resolve(struct crun_store_aclient *c, uv_loop_t *loop,
				 const char *host, int port)
{
	struct sockaddr_storage ss;
	struct addrinfo hints, *ai;
	uv_getaddrinfo_t gai;
	char pstr[16];
	size_t n = 0;
	int rc;

	if (uv_ip4_addr(host, port, (struct sockaddr_in *)&ss) == 0 ||
	    uv_ip6_addr(host, port, (struct sockaddr_in6 *)&ss) == 0) {
		if ((c->addrs = malloc(sizeof(*c->addrs))) == NULL)
			return UV_ENOMEM;
		c->addrs[0] = ss;
		c->naddrs = 1;
		return 0;
	}
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	snprintf(pstr, sizeof(pstr), "%d", port);
	rc = uv_getaddrinfo(loop, &gai, NULL, host, pstr, &hints);
	if (rc != 0)
		return rc;
	for (ai = gai.addrinfo; ai != NULL; ai = ai->ai_next)
		n++;
	c->addrs = calloc(n, sizeof(*c->addrs)); /* n >= 1 on success */
	for (ai = gai.addrinfo; c->addrs != NULL && ai != NULL;
	     ai = ai->ai_next)
		memcpy(&c->addrs[c->naddrs++], ai->ai_addr, ai->ai_addrlen);
	uv_freeaddrinfo(gai.addrinfo);
	return c->addrs != NULL ? 0 : UV_ENOMEM;
}

int store_aclient_new(uv_loop_t *loop, const char *host, int port,
		      int timeout_ms, store_aclient_connect_cb cb, void *data,
		      struct crun_store_aclient **out)
{
	struct crun_store_aclient *c;
	int rc;

	if (port <= 0 || port > 65535)
		return UV_EINVAL;
	c = calloc(1, sizeof(*c));
	if (c == NULL)
		return UV_ENOMEM;
	rc = store_aclient_resolve(c, loop, host != NULL ? host : "127.0.0.1",
				   port);
	if (rc != 0) {
		free(c->addrs);
		free(c);
		return rc;
	}
	c->loop = loop;
	c->connect_cb = cb;
	c->connect_data = data;
	c->backoff = 50;
	c->nonce = (uint32_t)getpid() ^ (uint32_t)(uintptr_t)c;
	c->jitter = c->nonce ^ (uint32_t)uv_hrtime();
	c->deadline =
	    timeout_ms < 0 ? UINT64_MAX : uv_now(loop) + (uint64_t)timeout_ms;
	c->state = AS_RESOLVED;
	store_buf_init(&c->in);
	store_buf_init(&c->cork);
	uv_timer_init(loop, &c->timer);
	c->timer.data = c;
	uv_prepare_init(loop, &c->flush);
	c->flush.data = c;
	c->nhandles = 2;
	store_aclient_attempt(c);
	*out = c;
	return 0;
}

void store_aclient_close(struct crun_store_aclient *c, store_close_cb cb,
			 void *data)
{
	assert(!c->closing);
	/* Frames written before closing still go (corked until the loop turns).
	 */
	if (c->tcp_open && c->state == AS_READY)
		store_aclient_uncork(c);
	c->closing = 1;
	c->close_cb = cb;
	c->close_data = data;
	store_aclient_connected(c, CRUN_ECANCELED);
	store_aclient_fail_all(c, CRUN_ECANCELED);
	store_aclient_close_tcp(c);
	uv_close((uv_handle_t *)&c->timer, store_aclient_on_close);
	uv_close((uv_handle_t *)&c->flush, store_aclient_on_close);
}

void store_aclient_use_wait_get(struct crun_store_aclient *c)
{
	c->use_wait_get = 1;
}

int store_aclient_last_error(const struct crun_store_aclient *c)
{
	return c->last_err;
}

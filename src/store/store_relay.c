/*
 * The store relay (include/crun/store_relay.h): a TCPStore server for one
 * node's workers that forwards their requests over ONE connection to the
 * round's workers' store, a crun store.
 *
 * Happy path: the relay connects, validates (VALIDATE, PING) and sends a
 * WAIT_TAG with no keys, which makes the connection "tagged"
 * (store_wire.h): every request is then answered in order behind a mark
 * byte, an error by an error mark instead of a closed connection, and a
 * WAIT_TAG whenever its keys exist by its tag. A worker's frame is decoded
 * in its own generation (G0 for PyTorch 1.13, G3 for 2.x) and re-sent in G3;
 * a WAIT becomes a WAIT_TAG, so that one worker's parked wait holds back
 * nobody: requests keep flowing on the same connection while any number of
 * waits are parked there. Each request with a reply holds a slot in its
 * client's FIFO, filled when the store's answer comes, and the FIFO is
 * written out in order, so a client sees its replies in the order the store
 * produced them. A WAIT's slot is filled by its tag's answer; once an
 * in-order reply sent after it arrives first, the wait is known to be
 * parked on the store and its slot leaves the FIFO (its answer will come
 * whenever it comes, as the store would have sent it).
 *
 * Combining: requests read in one loop iteration are held until the loop is
 * about to wait (a prepare handle), then sent together. Until then, a
 * client's GET or WAIT joins a held one of the same key (list), and its ADD
 * joins a held ADD of the same key (one ADD of their sum; the store's
 * answer v gives the i-th its v - sum + d_1 + ... + d_i, as if they had
 * run back to back). That is safe because the requests joined are
 * concurrent: none was answered before the others were sent, and a request
 * joins only if its client has nothing held after the request it joins (a
 * client's own order is kept). A WAIT answered by a QUEUE_PUSH (present for
 * one waiter) releases its first client only; the others wait again.
 *
 * Failure modes: each of the store's addresses is tried in turn (a name
 * may resolve to ::1 before 127.0.0.1 and the store listen on one of them
 * only), all of them again every 100 ms while the last refuses, until the
 * connect timeout. A store that cannot be reached, or a connection that
 * breaks, calls lost once and closes every client (their parked waits end
 * with the connection: a worker never waits forever on a relay); new
 * clients are then closed at once. A client's bad frame closes that client,
 * as the store would; a request the store refused (ADD of a non-number,
 * max_memory) closes its client when its turn in the FIFO comes. A client
 * that closes drops its parked waits (CANCEL_TAG when it was the last one
 * waiting). A 2.x CANCEL_WAIT is answered after a PING through the store,
 * so that a wait answered before it is answered first, as the store does.
 * A request the store would close the connection for never goes up (the
 * connection is every client's): a frame past store_limits_max_frame closes
 * its client here, as does a partial frame or unsent replies idle for
 * idle_timeout; a reply the store refuses (past max_output) comes back as an
 * error mark and closes its client when its turn comes.
 *
 * Every buffer is bounded: a frame by the store's limits, and what a client
 * costs by its share (max_client_bytes, and max_memory divided among the
 * clients). A request costs its bytes, its slot and the most its reply can
 * take (the store refuses a reply past max_output) from when it is taken
 * until its reply is written out, a parked wait until it is answered; a
 * request that would take a client past its share waits, unparsed, and the
 * client is not read until it is down to half its share (one with nothing
 * owed may always take one request, as at the store).
 */
#include <assert.h>
#include <errno.h>
#include <netdb.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "crun/err.h"
#include "crun/log.h"
#include "crun/store.h"
#include "crun/store_relay.h"
#include "store_relay_req.h"

struct relay_write {
	uv_write_t req;
	struct relay_client *cl; /* NULL: the upstream connection */
	struct crun_store_relay *r;
	size_t len;
	unsigned char data[];
};

struct crun_store_relay {
	uv_loop_t *loop;
	struct relay_reqs q; /* the requests (store_relay_req.h) */
	uv_tcp_t listener;
	uv_tcp_t up;
	uv_connect_t conn_req;
	uv_timer_t timer; /* connect retries */
	uv_timer_t tick;  /* the clients' idle check */
	uv_prepare_t flush;
	/* The store's addresses in the resolver's order; up_addrs[up_cur] is
	 * tried. */
	struct sockaddr_storage *up_addrs;
	size_t up_naddrs, up_cur;
	struct crun_store_limits lim;
	int up_open;
	uint64_t deadline;
	int port;
	size_t up_queued;
	struct store_relay_stats st;
	store_relay_lost_cb lost;
	void *lost_data;
	int lost_called;
	unsigned nhandles;
	store_close_cb close_cb;
	void *close_data;
};

static void relay_on_flush(uv_prepare_t *h);
static void relay_client_flush(struct relay_client *cl);
static void relay_lose_up(struct crun_store_relay *r, int err);

/* The relay whose requests' part cl's belong to. */
static struct crun_store_relay *relay_of(const struct relay_client *cl)
{
	return (
	    struct crun_store_relay *)((char *)cl->q -
				       offsetof(struct crun_store_relay, q));
}

static void relay_kick(struct crun_store_relay *r)
{
	uv_prepare_start(&r->flush, relay_on_flush);
}

/* ---- Client connections ------------------------------------------------- */

static void relay_on_handle_close(uv_handle_t *h);

static void relay_client_on_close(uv_handle_t *h)
{
	struct relay_client *cl = h->data;
	struct crun_store_relay *r = relay_of(cl);

	store_buf_release(&cl->in);
	store_buf_release(&cl->out);
	free(cl);
	relay_on_handle_close((uv_handle_t *)&r->listener);
}

/*
 * Close cl: its slots are orphaned (their replies go nowhere), its parked
 * waits dropped (CANCEL_TAG where it was the last one waiting).
 */
static void client_close(struct relay_client *cl, const char *why)
{
	struct crun_store_relay *r = relay_of(cl);
	struct relay_wait *w, *wnext;
	struct relay_slot *s, *next;

	if (cl->closing)
		return;
	cl->closing = 1;
	if (why != NULL && !r->q.closing && r->q.state != RS_LOST)
		log_msg(LOG_INFO, "crun relay", "client closed: %s", why);
	for (w = r->q.waits; w != NULL; w = wnext) {
		wnext = w->next;
		for (s = w->slots; s != NULL; s = next) {
			next = s->onext;
			if (s->cl != cl)
				continue;
			relay_req_wait_drop_slot(&r->q, w, s);
			relay_req_slot_maybe_free(s);
		}
		if (!r->q.closing && r->q.state != RS_LOST)
			relay_req_wait_release(&r->q, w);
	}
	for (s = cl->head; s != NULL; s = next) {
		next = s->next;
		s->cl = NULL;
		s->infifo = 0;
		relay_req_slot_maybe_free(s);
	}
	cl->head = cl->tail = NULL;
	if (cl->dirty) { /* off the flush's list: it is freed before */
		struct relay_client **pp = &r->q.dirty;

		while (*pp != cl)
			pp = &(*pp)->dirty_next;
		*pp = cl->dirty_next;
		cl->dirty = 0;
	}
	if (cl->prev != NULL)
		cl->prev->next = cl->next;
	else
		r->q.clients = cl->next;
	if (cl->next != NULL)
		cl->next->prev = cl->prev;
	r->q.nclients--;
	r->st.clients = r->q.nclients;
	uv_close((uv_handle_t *)&cl->tcp, relay_client_on_close);
}

static void relay_client_on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
	struct relay_client *cl = h->data;

	if (store_buf_reserve(&cl->in, 65536) != 0) {
		*buf = uv_buf_init(NULL, 0);
		return;
	}
	*buf = uv_buf_init((char *)cl->in.data + cl->in.len,
			   (unsigned)(cl->in.cap - cl->in.len));
}

/*
 * Run the whole requests cl has sent, then stop reading it while it is over
 * its share or a request waits for room in it. Its unfinished request is
 * bounded as at the store: past store_limits_max_frame, cl is closed.
 */
static void relay_client_take(struct relay_client *cl)
{
	struct crun_store_relay *r = relay_of(cl);
	char msg[128];

	relay_req_client_parse(cl);
	if (cl->closing)
		return;
	if (cl->in.len > r->q.max_frame) {
		snprintf(msg, sizeof(msg),
			 "request larger than %zu bytes (2 * max-value + "
			 "max-key-size + 64)",
			 r->q.max_frame);
		client_close(cl, msg);
		return;
	}
	if (!cl->paused && (cl->stalled || relay_req_client_owed(cl) >
					       relay_req_client_share(cl))) {
		cl->paused = 1;
		uv_read_stop((uv_stream_t *)&cl->tcp);
	}
}

static void relay_client_on_read(uv_stream_t *st, ssize_t nread,
				 const uv_buf_t *buf)
{
	struct relay_client *cl = st->data;

	if (cl->closing)
		return;
	if (nread < 0) {
		client_close(cl,
			     nread == UV_EOF ? NULL : uv_strerror((int)nread));
		return;
	}
	if (nread > 0)
		cl->since = uv_now(relay_of(cl)->loop);
	cl->in.len += (size_t)nread;
	relay_client_take(cl);
}

/*
 * Read a paused client again once it is down to half its share, or, when a
 * request waits in its input for room, once it owes nothing but its parked
 * waits (relay_client_cost lets it take one then).
 */
static void relay_client_maybe_resume(struct relay_client *cl)
{
	size_t owed = relay_req_client_owed(cl);

	if (cl->closing || !cl->paused ||
	    (owed > relay_req_client_share(cl) / 2 &&
	     !(cl->stalled && owed == cl->wait_held)))
		return;
	cl->paused = 0;
	cl->stalled = 0;
	uv_read_start((uv_stream_t *)&cl->tcp, relay_client_on_alloc,
		      relay_client_on_read);
	relay_client_take(cl); /* what waited in its input */
}

static void relay_client_on_write(uv_write_t *req, int status)
{
	struct relay_write *wr = (struct relay_write *)req;
	struct relay_client *cl = wr->cl;

	cl->queued -= wr->len;
	free(wr);
	if (status == 0)
		cl->since = uv_now(relay_of(cl)->loop);
	if (status < 0 && !cl->closing)
		client_close(cl, uv_strerror(status));
	else
		relay_client_maybe_resume(cl);
}

/* Write what cl has to say, and read it again if it is under its share. */
static void relay_client_flush(struct relay_client *cl)
{
	struct relay_write *wr;
	uv_buf_t b;
	int rc;

	cl->dirty = 0;
	if (cl->closing)
		return;
	if (cl->out.len > 0) {
		b = uv_buf_init((char *)cl->out.data, (unsigned)cl->out.len);
		rc = uv_try_write((uv_stream_t *)&cl->tcp, &b, 1);
		if (rc == UV_EAGAIN)
			rc = 0;
		if (rc < 0) {
			client_close(cl, uv_strerror(rc));
			return;
		}
		if ((size_t)rc < cl->out.len) {
			size_t n = cl->out.len - (size_t)rc;

			wr = malloc(sizeof(*wr) + n);
			if (wr == NULL) {
				client_close(cl, "out of memory");
				return;
			}
			wr->cl = cl;
			wr->len = n;
			memcpy(wr->data, cl->out.data + rc, n);
			b = uv_buf_init((char *)wr->data, (unsigned)n);
			rc = uv_write(&wr->req, (uv_stream_t *)&cl->tcp, &b, 1,
				      relay_client_on_write);
			if (rc != 0) {
				free(wr);
				client_close(cl, uv_strerror(rc));
				return;
			}
			cl->queued += n;
		}
		cl->out.len = 0;
		if (cl->out.cap > 65536)
			store_buf_release(&cl->out);
	}
	relay_client_maybe_resume(cl);
}

static void relay_on_connection(uv_stream_t *ls, int status)
{
	struct crun_store_relay *r = ls->data;
	struct relay_client *cl;

	if (status < 0 || r->q.closing)
		return;
	cl = calloc(1, sizeof(*cl));
	if (cl == NULL)
		return;
	cl->q = &r->q;
	cl->since = uv_now(r->loop);
	uv_tcp_init(r->loop, &cl->tcp);
	cl->tcp.data = cl;
	r->nhandles++;
	store_buf_init(&cl->in);
	store_buf_init(&cl->out);
	cl->next = r->q.clients;
	if (r->q.clients != NULL)
		r->q.clients->prev = cl;
	r->q.clients = cl;
	r->q.nclients++;
	r->st.clients = r->q.nclients;
	if (uv_accept(ls, (uv_stream_t *)&cl->tcp) != 0) {
		client_close(cl, "accept failed");
		return;
	}
	if (r->q.state == RS_LOST) {
		client_close(cl, NULL); /* the store is gone */
		return;
	}
	if (r->q.nclients > r->lim.max_conns) {
		client_close(cl, "over max-conns");
		return;
	}
	uv_tcp_nodelay(&cl->tcp, 1);
	uv_read_start((uv_stream_t *)&cl->tcp, relay_client_on_alloc,
		      relay_client_on_read);
}

/* ---- The upstream connection -------------------------------------------- */

static void relay_up_on_write(uv_write_t *req, int status)
{
	struct relay_write *wr = (struct relay_write *)req;
	struct crun_store_relay *r = wr->r;

	r->up_queued -= wr->len;
	free(wr);
	if (status < 0 && status != UV_ECANCELED)
		relay_lose_up(r, status);
}

/* Send r->q.up_out: 0 or an error. */
static int relay_up_send(struct crun_store_relay *r)
{
	struct relay_write *wr;
	uv_buf_t b;
	size_t n;
	int rc;

	if (r->q.up_out.len == 0)
		return 0;
	if (r->q.up_out.oom)
		return UV_ENOMEM;
	rc = 0;
	if (r->up_queued == 0) {
		b = uv_buf_init((char *)r->q.up_out.data,
				(unsigned)r->q.up_out.len);
		rc = uv_try_write((uv_stream_t *)&r->up, &b, 1);
		if (rc == UV_EAGAIN)
			rc = 0;
		if (rc < 0)
			return rc;
	}
	n = r->q.up_out.len - (size_t)rc;
	if (n > 0) {
		wr = malloc(sizeof(*wr) + n);
		if (wr == NULL)
			return UV_ENOMEM;
		wr->r = r;
		wr->cl = NULL;
		wr->len = n;
		memcpy(wr->data, r->q.up_out.data + rc, n);
		b = uv_buf_init((char *)wr->data, (unsigned)n);
		rc = uv_write(&wr->req, (uv_stream_t *)&r->up, &b, 1,
			      relay_up_on_write);
		if (rc != 0) {
			free(wr);
			return rc;
		}
		r->up_queued += n;
	}
	r->q.up_out.len = 0;
	if (r->q.up_out.cap > 65536)
		store_buf_release(&r->q.up_out);
	return 0;
}

/* Before the loop waits: send what is held, write to the clients. */
static void relay_on_flush(uv_prepare_t *h)
{
	struct crun_store_relay *r = h->data;
	struct relay_client *cl;
	int rc;

	uv_prepare_stop(h);
	/* A client read again here may hold new requests: they go now, not
	 * after the loop's next wake-up. */
	do {
		if (r->q.state == RS_READY && r->q.held_head != NULL) {
			relay_req_send_held(&r->q);
			rc = relay_up_send(r);
			if (rc != 0)
				relay_lose_up(r, rc);
		}
		while ((cl = r->q.dirty) != NULL) {
			r->q.dirty = cl->dirty_next;
			relay_client_flush(cl);
		}
	} while (r->q.state == RS_READY && r->q.held_head != NULL);
}

/*
 * The idle check, as at the store: close a client that has held a partial
 * request or unsent replies for idle_timeout seconds without progress (no
 * byte read, no write completed, no request taken). Parked waits, and
 * requests waiting for the store's answers, are not idleness.
 */
static void relay_on_tick(uv_timer_t *t)
{
	struct crun_store_relay *r = t->data;
	uint64_t now = uv_now(r->loop);
	uint64_t limit = (uint64_t)r->lim.idle_timeout * 1000;
	struct relay_client *cl, *next;
	char msg[128];

	for (cl = r->q.clients; cl != NULL; cl = next) {
		int partial = cl->in.len > 0 && !cl->paused;

		next = cl->next;
		if (!partial && cl->out.len == 0 && cl->queued == 0)
			continue;
		if (now - cl->since < limit)
			continue;
		snprintf(msg, sizeof(msg),
			 "no progress for idle-timeout %zu s with %s pending",
			 r->lim.idle_timeout,
			 partial ? "a partial request" : "unsent replies");
		client_close(cl, msg);
	}
}

static void relay_up_on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
	struct crun_store_relay *r = h->data;

	if (r->q.up_in.len > r->lim.max_output + 64 ||
	    store_buf_reserve(&r->q.up_in, 65536) != 0) {
		*buf = uv_buf_init(NULL, 0);
		return;
	}
	*buf = uv_buf_init((char *)r->q.up_in.data + r->q.up_in.len,
			   (unsigned)(r->q.up_in.cap - r->q.up_in.len));
}

static void relay_up_on_read(uv_stream_t *st, ssize_t nread,
			     const uv_buf_t *buf)
{
	struct crun_store_relay *r = st->data;

	if (r->q.closing || r->q.state == RS_LOST)
		return;
	if (nread < 0) {
		relay_lose_up(r, (int)nread);
		return;
	}
	r->q.up_in.len += (size_t)nread;
	if (r->q.state == RS_VALIDATING) {
		/* The PING's echo, then the tagging WAIT_TAG's answer. */
		if (r->q.up_in.len < 13)
			return;
		if (store_wire_u32(r->q.up_in.data) != r->q.nonce ||
		    r->q.up_in.data[4] != STORE_TAG_ANSWER ||
		    store_wire_u64(r->q.up_in.data + 5) != 0) {
			relay_lose_up(r, CRUN_EPROTO);
			return;
		}
		memmove(r->q.up_in.data, r->q.up_in.data + 13,
			r->q.up_in.len - 13);
		r->q.up_in.len -= 13;
		r->q.state = RS_READY;
		relay_kick(r);
	}
	relay_req_up_process(&r->q);
}

/* The wait before the store's addresses are all tried again. */
#define RELAY_RETRY_MS 100
/* Period of the idle check, at most (the store's). */
#define RELAY_TICK_MS 1000

static void relay_connect(struct crun_store_relay *r);

static void relay_up_on_tcp_close(uv_handle_t *h)
{
	struct crun_store_relay *r = h->data;

	r->nhandles--;
	if (!r->q.closing && r->q.state == RS_CONNECTING) {
		relay_connect(r); /* a retry, after its delay */
		return;
	}
	relay_on_handle_close(h);
}

/*
 * A connect to the store's current address failed: its next address at
 * once, whatever the error (an address family the machine lacks is no
 * reason to stop); after the last, the first again in 100 ms if the store
 * refused (it may not be up yet) and the deadline allows; else it is lost.
 */
static void relay_up_retry(struct crun_store_relay *r, int err)
{
	int next = r->up_cur + 1 < r->up_naddrs;

	if ((!next && err != UV_ECONNREFUSED) ||
	    uv_now(r->loop) + (next ? 0 : RELAY_RETRY_MS) >= r->deadline) {
		relay_lose_up(r, err);
		return;
	}
	r->up_open = 0;
	uv_close((uv_handle_t *)&r->up, relay_up_on_tcp_close);
}

static void relay_up_on_connect(uv_connect_t *req, int status)
{
	struct crun_store_relay *r = req->data;
	struct store_buf b;
	int rc;

	if (r->q.closing || r->q.state != RS_CONNECTING)
		return;
	if (status < 0) {
		relay_up_retry(r, status);
		return;
	}
	uv_tcp_nodelay(&r->up, 1);
	r->q.state = RS_VALIDATING;
	store_buf_init(&b);
	store_buf_op(&b, STORE_GEN_G3, STORE_OP_VALIDATE);
	store_buf_u32(&b, STORE_WIRE_MAGIC);
	store_buf_op(&b, STORE_GEN_G3, STORE_OP_PING);
	store_buf_u32(&b, r->q.nonce);
	store_buf_op(&b, STORE_GEN_G3, STORE_OP_WAIT_TAG);
	store_buf_u64(&b, 0); /* tag 0 */
	store_buf_u64(&b, 1); /* one wait */
	store_buf_u64(&b, 0); /* no keys: answered at once */
	store_buf_put(&r->q.up_out, b.data, b.len);
	store_buf_release(&b);
	rc = relay_up_send(r);
	if (rc == 0)
		rc = uv_read_start((uv_stream_t *)&r->up, relay_up_on_alloc,
				   relay_up_on_read);
	if (rc != 0)
		relay_lose_up(r, rc);
}

static void relay_on_retry(uv_timer_t *t)
{
	struct crun_store_relay *r = t->data;
	int rc;

	uv_tcp_init(r->loop, &r->up);
	r->up.data = r;
	r->up_open = 1;
	r->nhandles++;
	r->conn_req.data = r;
	rc = uv_tcp_connect(&r->conn_req, &r->up,
			    (const struct sockaddr *)&r->up_addrs[r->up_cur],
			    relay_up_on_connect);
	if (rc != 0)
		relay_up_retry(r, rc);
}

/* After a failed connect: the next address now, or the first in 100 ms. */
static void relay_connect(struct crun_store_relay *r)
{
	uint64_t delay = 0;

	if (++r->up_cur == r->up_naddrs) {
		r->up_cur = 0;
		delay = RELAY_RETRY_MS;
	}
	uv_timer_start(&r->timer, relay_on_retry, delay, 0);
}

/*
 * The store is lost: close every client (their waits end with their
 * connections), and call lost once.
 */
static void relay_lose_up(struct crun_store_relay *r, int err)
{

	if (r->q.state == RS_LOST || r->q.closing)
		return;
	r->q.state = RS_LOST;
	uv_timer_stop(&r->timer);
	if (r->up_open) {
		r->up_open = 0;
		uv_close((uv_handle_t *)&r->up, relay_up_on_tcp_close);
	}
	while (r->q.clients != NULL)
		client_close(r->q.clients, NULL);
	relay_req_drop_all(&r->q);
	if (!r->lost_called && r->lost != NULL) {
		r->lost_called = 1;
		r->lost(r, err, r->lost_data);
	}
}

/* What the requests' part reports (relay_reqs.on). */
static void relay_on_kick(void *data)
{
	relay_kick(data);
}

static void relay_on_client_bad(void *data, struct relay_client *cl,
				const char *why)
{
	(void)data;
	client_close(cl, why);
}

static void relay_on_up_lost(void *data, int err)
{
	relay_lose_up(data, err);
}

/* ---- Life cycle --------------------------------------------------------- */

static void relay_on_handle_close(uv_handle_t *h)
{
	struct crun_store_relay *r = h->data;
	store_close_cb cb;
	void *data;

	if (h != (uv_handle_t *)&r->up)
		r->nhandles--;
	if (!r->q.closing || r->nhandles > 0)
		return;
	cb = r->close_cb;
	data = r->close_data;
	store_buf_release(&r->q.up_in);
	store_buf_release(&r->q.up_out);
	free(r->up_addrs);
	free(r);
	if (cb != NULL)
		cb(data);
}

/* Fill r->up_addrs: the store's address, or every address of its name. */
static int relay_resolve(struct crun_store_relay *r, const char *host, int port)
{
	struct sockaddr_storage ss;
	struct addrinfo hints, *res = NULL, *ai;
	char pstr[16];
	size_t n = 0;
	int rc;

	if (port <= 0 || port > 65535)
		return UV_EINVAL;
	if (host == NULL || host[0] == '\0')
		host = "127.0.0.1";
	if (uv_ip4_addr(host, port, (struct sockaddr_in *)&ss) == 0 ||
	    uv_ip6_addr(host, port, (struct sockaddr_in6 *)&ss) == 0) {
		if ((r->up_addrs = malloc(sizeof(*r->up_addrs))) == NULL)
			return UV_ENOMEM;
		r->up_addrs[0] = ss;
		r->up_naddrs = 1;
		return 0;
	}
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	snprintf(pstr, sizeof(pstr), "%d", port);
	rc = getaddrinfo(host, pstr, &hints, &res);
	if (rc != 0)
		return rc == EAI_SYSTEM ? -errno : UV_EAI_NONAME;
	for (ai = res; ai != NULL; ai = ai->ai_next)
		n++;
	r->up_addrs = calloc(n, sizeof(*r->up_addrs)); /* n >= 1 on success */
	for (ai = res; r->up_addrs != NULL && ai != NULL; ai = ai->ai_next)
		memcpy(&r->up_addrs[r->up_naddrs++], ai->ai_addr,
		       ai->ai_addrlen);
	freeaddrinfo(res);
	return r->up_addrs != NULL ? 0 : UV_ENOMEM;
}

static int relay_listen(struct crun_store_relay *r,
			const struct store_relay_opts *o)
{
	struct sockaddr_storage ss;
	int len = sizeof(ss), rc;
	const char *host = o->listen_host;

	if (o->listen_fd >= 0) {
		/* A copy: the caller's fd stays theirs until this succeeds. */
		int fd = dup(o->listen_fd);

		rc = fd < 0 ? -errno : uv_tcp_open(&r->listener, fd);
		if (rc != 0 && fd >= 0)
			close(fd);
	} else if (host == NULL || host[0] == '\0' || strcmp(host, "::") == 0) {
		uv_ip6_addr("::", o->listen_port, (struct sockaddr_in6 *)&ss);
		rc = uv_tcp_bind(&r->listener, (struct sockaddr *)&ss, 0);
		if (rc == UV_EAFNOSUPPORT || rc == UV_EADDRNOTAVAIL) {
			uv_ip4_addr("0.0.0.0", o->listen_port,
				    (struct sockaddr_in *)&ss);
			rc = uv_tcp_bind(&r->listener, (struct sockaddr *)&ss,
					 0);
		}
	} else if (uv_ip4_addr(host, o->listen_port,
			       (struct sockaddr_in *)&ss) == 0 ||
		   uv_ip6_addr(host, o->listen_port,
			       (struct sockaddr_in6 *)&ss) == 0) {
		rc = uv_tcp_bind(&r->listener, (struct sockaddr *)&ss, 0);
	} else {
		rc = UV_EINVAL;
	}
	if (rc == 0)
		rc = uv_listen((uv_stream_t *)&r->listener, 4096,
			       relay_on_connection);
	if (rc == 0)
		rc = uv_tcp_getsockname(&r->listener, (struct sockaddr *)&ss,
					&len);
	if (rc == 0)
		r->port = ntohs(ss.ss_family == AF_INET6
				    ? ((struct sockaddr_in6 *)&ss)->sin6_port
				    : ((struct sockaddr_in *)&ss)->sin_port);
	return rc;
}

int store_relay_new(uv_loop_t *loop, const struct store_relay_opts *o,
		    store_relay_lost_cb lost, void *data,
		    struct crun_store_relay **out)
{
	struct crun_store_relay *r = calloc(1, sizeof(*r));
	int rc;

	if (r == NULL)
		return UV_ENOMEM;
	r->loop = loop;
	r->q.loop = loop;
	r->q.lim = &r->lim;
	r->q.st = &r->st;
	r->q.on.kick = relay_on_kick;
	r->q.on.client_bad = relay_on_client_bad;
	r->q.on.up_lost = relay_on_up_lost;
	r->q.data = r;
	if (o->lim != NULL)
		r->lim = *o->lim;
	else
		store_limits_default(&r->lim);
	r->q.max_frame = store_limits_max_frame(&r->lim);
	r->q.max_client =
	    o->max_client_bytes ? o->max_client_bytes : r->lim.max_output;
	r->lost = lost;
	r->lost_data = data;
	r->q.nonce = (uint32_t)getpid() ^ (uint32_t)(uintptr_t)r;
	r->deadline = uv_now(loop) + (uint64_t)(o->connect_timeout_ms > 0
						    ? o->connect_timeout_ms
						    : 10000);
	store_buf_init(&r->q.up_in);
	store_buf_init(&r->q.up_out);
	rc = relay_resolve(r, o->up_host, o->up_port);
	if (rc != 0) {
		free(r->up_addrs);
		free(r);
		return rc;
	}
	uv_tcp_init(loop, &r->listener);
	r->listener.data = r;
	uv_timer_init(loop, &r->timer);
	r->timer.data = r;
	uv_timer_init(loop, &r->tick);
	r->tick.data = r;
	uv_prepare_init(loop, &r->flush);
	r->flush.data = r;
	r->nhandles = 4;
	rc = relay_listen(r, o);
	if (rc != 0) {
		r->q.closing = 1;
		uv_close((uv_handle_t *)&r->listener, relay_on_handle_close);
		uv_close((uv_handle_t *)&r->timer, relay_on_handle_close);
		uv_close((uv_handle_t *)&r->tick, relay_on_handle_close);
		uv_close((uv_handle_t *)&r->flush, relay_on_handle_close);
		return rc;
	}
	if (r->lim.idle_timeout > 0) {
		uint64_t ms = (uint64_t)r->lim.idle_timeout * 1000 / 2;

		ms = ms < RELAY_TICK_MS ? ms : RELAY_TICK_MS;
		uv_timer_start(&r->tick, relay_on_tick, ms, ms);
		uv_unref((uv_handle_t *)&r->tick); /* never keeps a loop up */
	}
	if (o->listen_fd >= 0)
		close(o->listen_fd); /* the relay serves its copy */
	r->q.state = RS_CONNECTING;
	uv_timer_start(&r->timer, relay_on_retry, 0, 0);
	*out = r;
	return 0;
}

int store_relay_port(const struct crun_store_relay *r)
{
	return r->port;
}

void store_relay_stats(const struct crun_store_relay *r,
		       struct store_relay_stats *st)
{
	*st = r->st;
}

void store_relay_close(struct crun_store_relay *r, store_close_cb cb,
		       void *data)
{

	assert(!r->q.closing);
	r->q.closing = 1;
	r->close_cb = cb;
	r->close_data = data;
	while (r->q.clients != NULL)
		client_close(r->q.clients, NULL);
	relay_req_drop_all(&r->q);
	if (r->up_open) {
		r->up_open = 0;
		uv_close((uv_handle_t *)&r->up, relay_up_on_tcp_close);
	}
	uv_close((uv_handle_t *)&r->listener, relay_on_handle_close);
	uv_close((uv_handle_t *)&r->timer, relay_on_handle_close);
	uv_close((uv_handle_t *)&r->tick, relay_on_handle_close);
	uv_close((uv_handle_t *)&r->flush, relay_on_handle_close);
}

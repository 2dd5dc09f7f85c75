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
 * Failure modes: a store that cannot be reached, or a connection that
 * breaks, calls lost once and closes every client (their parked waits end
 * with the connection: a worker never waits forever on a relay); new
 * clients are then closed at once. A client's bad frame closes that client,
 * as the store would; a request the store refused (ADD of a non-number,
 * max_memory) closes its client when its turn in the FIFO comes. A client
 * that closes drops its parked waits (CANCEL_TAG when it was the last one
 * waiting). A 2.x CANCEL_WAIT is answered after a PING through the store,
 * so that a wait answered before it is answered first, as the store does.
 * Every buffer is bounded: a frame by the store's limits, a client's bytes
 * in flight by its share (max_client_bytes, and max_memory divided among the
 * clients); a client over its share is not read until its replies drain.
 */
#include <assert.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "crun/err.h"
#include "crun/log.h"
#include "crun/store.h"
#include "crun/store_relay.h"
#include "store_wire.h"

/* What the store's in-order reply to a request looks like. */
enum relay_kind {
	RK_NONE,   /* the mark alone (SET, APPEND, MULTI_SET, QUEUE_PUSH) */
	RK_U8,	   /* CHECK */
	RK_U32,	   /* PING */
	RK_U64,	   /* ADD, DELETE_KEY, GETNUMKEYS, QUEUE_LEN */
	RK_BYTES,  /* GET, COMPARE_SET */
	RK_NBYTES, /* MULTI_GET: n values */
	RK_QPOP,   /* QUEUE_POP: a length, then a value if it was > 0 */
	RK_LIST,   /* LIST_KEYS: a count, then that many strings */
	RK_WAIT,   /* a WAIT_TAG: no in-order reply, answered by its tag */
	RK_CANCEL  /* CANCEL_TAG: the mark alone, nobody's */
};

enum relay_state { RS_CONNECTING, RS_VALIDATING, RS_READY, RS_LOST };

struct relay_client;
struct relay_wait;

/* One reply a client is due, in its FIFO. */
struct relay_slot {
	struct relay_slot *next;  /* in the client's FIFO */
	struct relay_slot *onext; /* in its owner's list (request or wait) */
	struct relay_client *cl;
	struct relay_wait *w; /* a WAIT's slot, until answered or dropped */
	int64_t delta;	      /* an ADD's own delta */
	size_t bytes;	      /* counted in its client's held */
	int infifo, inowner;
	int filled;
	int detached; /* a WAIT parked on the store: answered out of order */
	int noreply;  /* fills with nothing (SET...): only an error shows */
	int close;    /* the store refused the request: close the client */
	int cancel;   /* a CANCEL_WAIT's WAIT_CANCELED, after its fence */
	struct store_buf reply;
};

/* One request to the store: held, then sent and awaiting its reply. */
struct relay_up {
	struct relay_up *next;
	uint64_t pos; /* its place among the requests ever held */
	enum store_op op;
	enum relay_kind kind;
	uint64_t n; /* MULTI_GET's values */
	struct store_buf frame;
	size_t klen;		   /* GET/ADD: the key at frame.data + 9 */
	int64_t sum;		   /* ADD: the deltas joined */
	struct relay_client *last; /* the client of the last slot joined */
	struct relay_wait *w;	   /* RK_WAIT */
	struct relay_slot *slots, *slots_tail;
};

/* A WAIT_TAG: the clients' slots that its answer fills. */
struct relay_wait {
	struct relay_wait *prev, *next; /* r->waits */
	uint64_t tag;
	uint64_t seq; /* in-order requests sent before it */
	int sent, decided;
	int held;	       /* its request is still held (may be joined) */
	struct store_buf list; /* u64 count + the keys, as on the wire */
	struct relay_slot *slots, *slots_tail;
};

struct relay_client {
	uv_tcp_t tcp;
	struct crun_store_relay *r;
	struct relay_client *prev, *next; /* r->clients */
	struct relay_client *dirty_next;
	enum store_gen gen;
	struct store_buf in;
	struct store_wire_resume rs;
	struct store_buf out;
	size_t queued; /* bytes in uv_writes */
	size_t held;   /* bytes of its requests held or in flight */
	struct relay_slot *head, *tail;
	uint64_t last_seq; /* the place of its last request held */
	int dirty, paused, closing;
};

struct relay_write {
	uv_write_t req;
	struct relay_client *cl; /* NULL: the upstream connection */
	struct crun_store_relay *r;
	size_t len;
	unsigned char data[];
};

struct crun_store_relay {
	uv_loop_t *loop;
	uv_tcp_t listener;
	uv_tcp_t up;
	uv_connect_t conn_req;
	uv_timer_t timer; /* connect retries */
	uv_prepare_t flush;
	struct sockaddr_storage up_addr;
	struct crun_store_limits lim;
	size_t max_client;
	enum relay_state state;
	int up_open;
	uint64_t deadline;
	uint32_t nonce;
	int port;
	struct store_buf up_in;
	struct store_buf up_out;
	size_t up_queued;
	/* Requests held (not sent yet), then sent and awaiting replies. */
	struct relay_up *held_head, *held_tail;
	struct relay_up *sent_head, *sent_tail;
	uint64_t nheld; /* requests ever held: a held one's position */
	uint64_t up_sent, up_recv;
	struct relay_wait *waits;
	size_t undecided;
	uint64_t next_tag;
	struct relay_client *clients;
	size_t nclients;
	struct relay_client *dirty;
	size_t mem;
	struct store_relay_stats st;
	store_relay_lost_cb lost;
	void *lost_data;
	int lost_called;
	unsigned nhandles;
	int closing;
	store_close_cb close_cb;
	void *close_data;
};

static void relay_up_lost(struct crun_store_relay *r, int err);
static void relay_on_flush(uv_prepare_t *h);
static struct relay_up *relay_up_new(enum store_op op, enum relay_kind kind);
static void relay_hold(struct crun_store_relay *r, struct relay_up *u);

/* Have the flush run before the loop next waits. */
static void relay_kick(struct crun_store_relay *r)
{
	uv_prepare_start(&r->flush, relay_on_flush);
}
static void relay_client_close(struct relay_client *cl, const char *why);
static void relay_client_flush(struct relay_client *cl);

/* ---- Slots -------------------------------------------------------------- */

static void relay_slot_maybe_free(struct relay_slot *s)
{
	if (s->infifo || s->inowner)
		return;
	store_buf_release(&s->reply);
	free(s);
}

/* A new slot, last in cl's FIFO. */
static struct relay_slot *relay_slot_new(struct relay_client *cl)
{
	struct relay_slot *s = calloc(1, sizeof(*s));

	if (s == NULL)
		return NULL;
	s->cl = cl;
	s->infifo = 1;
	store_buf_init(&s->reply);
	if (cl->tail != NULL)
		cl->tail->next = s;
	else
		cl->head = s;
	cl->tail = s;
	return s;
}

static void relay_client_dirty(struct relay_client *cl)
{
	if (cl->dirty || cl->closing)
		return;
	cl->dirty = 1;
	cl->dirty_next = cl->r->dirty;
	cl->r->dirty = cl;
	relay_kick(cl->r);
}

/* Move cl's FIFO into its output while its head is done. */
static void relay_client_drain(struct relay_client *cl)
{
	struct relay_slot *s;

	while (!cl->closing && (s = cl->head) != NULL) {
		if (s->filled && s->close) {
			relay_client_close(cl, "the store refused a request");
			return;
		}
		if (s->filled) {
			store_buf_put(&cl->out, s->reply.data, s->reply.len);
			cl->held -= s->bytes;
			s->bytes = 0;
		} else if (!s->detached)
			break;
		cl->head = s->next;
		if (cl->head == NULL)
			cl->tail = NULL;
		s->infifo = 0;
		relay_slot_maybe_free(s);
	}
	relay_client_dirty(cl);
}

/* s's reply is in (p, n), or an error (close). */
static void relay_slot_fill(struct relay_slot *s, const void *p, size_t n,
			    int close)
{
	struct relay_client *cl = s->cl;

	if (cl == NULL || cl->closing)
		return; /* its client is gone */
	cl->held -= s->bytes;
	s->bytes = 0;
	if (!s->infifo) { /* a detached WAIT: out of order */
		if (close)
			relay_client_close(cl, "the store refused a wait");
		else {
			store_buf_put(&cl->out, p, n);
			relay_client_dirty(cl);
		}
		return;
	}
	s->filled = 1;
	s->close = close;
	if (!s->noreply && !close) {
		store_buf_put(&s->reply, p, n);
		s->bytes = n; /* until it is written out */
		cl->held += n;
	}
	relay_client_drain(cl);
}

/* ---- Waits -------------------------------------------------------------- */

static struct relay_wait *relay_wait_new(struct crun_store_relay *r,
					 const unsigned char *list, size_t len,
					 uint64_t n)
{
	struct relay_wait *w = calloc(1, sizeof(*w));

	if (w == NULL)
		return NULL;
	store_buf_init(&w->list);
	store_buf_u64(&w->list, n);
	store_buf_put(&w->list, list, len);
	if (w->list.oom) {
		store_buf_release(&w->list);
		free(w);
		return NULL;
	}
	w->tag = ++r->next_tag;
	w->next = r->waits;
	if (r->waits != NULL)
		r->waits->prev = w;
	r->waits = w;
	return w;
}

static void relay_wait_free(struct crun_store_relay *r, struct relay_wait *w)
{
	if (w->prev != NULL)
		w->prev->next = w->next;
	else
		r->waits = w->next;
	if (w->next != NULL)
		w->next->prev = w->prev;
	if (w->sent && !w->decided)
		r->undecided--;
	store_buf_release(&w->list);
	free(w);
}

/* w has no client left: cancel it on the store (if sent) and free it. */
static void relay_wait_release(struct crun_store_relay *r, struct relay_wait *w)
{
	struct relay_up *u;

	if (w->slots != NULL || w->held)
		return; /* a held one is freed by its answer */
	if (w->sent && r->state == RS_READY && !r->closing &&
	    (u = relay_up_new(STORE_OP_CANCEL_TAG, RK_CANCEL)) != NULL) {
		store_buf_op(&u->frame, STORE_GEN_G3, STORE_OP_CANCEL_TAG);
		store_buf_u64(&u->frame, w->tag);
		relay_hold(r, u);
	}
	relay_wait_free(r, w);
}

static void relay_wait_add_slot(struct relay_wait *w, struct relay_slot *s)
{
	s->w = w;
	s->inowner = 1;
	s->onext = NULL;
	if (w->slots_tail != NULL)
		w->slots_tail->onext = s;
	else
		w->slots = s;
	w->slots_tail = s;
}

/* Take s off its wait (which it leaves empty or not). */
static void relay_wait_drop_slot(struct relay_wait *w, struct relay_slot *s)
{
	struct relay_slot **pp = &w->slots, *prev = NULL;

	while (*pp != NULL && *pp != s) {
		prev = *pp;
		pp = &(*pp)->onext;
	}
	if (*pp == NULL)
		return;
	*pp = s->onext;
	if (w->slots_tail == s)
		w->slots_tail = prev;
	s->w = NULL;
	s->inowner = 0;
}

/* ---- Requests to the store ---------------------------------------------- */

static struct relay_up *relay_up_new(enum store_op op, enum relay_kind kind)
{
	struct relay_up *u = calloc(1, sizeof(*u));

	if (u == NULL)
		return NULL;
	u->op = op;
	u->kind = kind;
	store_buf_init(&u->frame);
	return u;
}

static void relay_up_free(struct relay_up *u)
{
	struct relay_slot *s, *next;

	for (s = u->slots; s != NULL; s = next) {
		next = s->onext;
		s->inowner = 0;
		relay_slot_maybe_free(s);
	}
	store_buf_release(&u->frame);
	free(u);
}

static void relay_up_add_slot(struct relay_up *u, struct relay_slot *s)
{
	s->inowner = 1;
	if (u->slots_tail != NULL)
		u->slots_tail->onext = s;
	else
		u->slots = s;
	u->slots_tail = s;
	u->last = s->cl;
}

/* Hold u until the flush (last). */
static void relay_hold(struct crun_store_relay *r, struct relay_up *u)
{
	if (r->held_tail != NULL)
		r->held_tail->next = u;
	else
		r->held_head = u;
	r->held_tail = u;
	u->pos = ++r->nheld;
	relay_kick(r);
}

/*
 * A held request of kind op on the same key (or list) that cl may join: its
 * own requests all come before it (none held after it).
 */
static struct relay_up *relay_joinable(struct crun_store_relay *r,
				       struct relay_client *cl,
				       enum store_op op,
				       const unsigned char *key, size_t klen)
{
	struct relay_up *u;

	for (u = r->held_head; u != NULL; u = u->next) {
		if (u->op != op || u->pos < cl->last_seq)
			continue;
		if (op == STORE_OP_WAIT && u->w != NULL && u->w->held &&
		    u->w->list.len == klen &&
		    memcmp(u->w->list.data, key, klen) == 0)
			return u;
		if (op != STORE_OP_WAIT && u->klen == klen &&
		    memcmp(u->frame.data + 1, key, klen) == 0)
			return u;
	}
	return NULL;
}

/* ---- Client requests ---------------------------------------------------- */

/* What a client's op becomes upstream (RK_WAIT: a WAIT_TAG; -1: not
 * relayed). */
static int relay_kind_of(enum store_op op)
{
	switch (op) {
	case STORE_OP_SET:
	case STORE_OP_APPEND:
	case STORE_OP_MULTI_SET:
	case STORE_OP_QUEUE_PUSH:
		return RK_NONE;
	case STORE_OP_CHECK:
		return RK_U8;
	case STORE_OP_PING:
		return RK_U32;
	case STORE_OP_ADD:
	case STORE_OP_DELETE_KEY:
	case STORE_OP_GETNUMKEYS:
	case STORE_OP_QUEUE_LEN:
		return RK_U64;
	case STORE_OP_GET:
	case STORE_OP_COMPARE_SET:
		return RK_BYTES;
	case STORE_OP_MULTI_GET:
		return RK_NBYTES;
	case STORE_OP_QUEUE_POP:
		return RK_QPOP;
	case STORE_OP_LIST_KEYS:
		return RK_LIST;
	case STORE_OP_WAIT:
		return RK_WAIT;
	default:
		return -1;
	}
}

/* A WAIT from cl: join a held one of the same keys, or hold a WAIT_TAG. */
static int relay_client_wait(struct relay_client *cl,
			     const struct store_req *req)
{
	struct crun_store_relay *r = cl->r;
	struct store_buf key;
	struct relay_slot *s;
	struct relay_up *u;
	struct relay_wait *w;

	store_buf_init(&key);
	store_buf_u64(&key, req->n);
	store_buf_put(&key, req->list, req->list_len);
	if (key.oom)
		return UV_ENOMEM;
	u = relay_joinable(r, cl, STORE_OP_WAIT, key.data, key.len);
	store_buf_release(&key);
	if ((s = relay_slot_new(cl)) == NULL)
		return UV_ENOMEM;
	if (u != NULL) {
		relay_wait_add_slot(u->w, s);
		cl->last_seq = u->pos;
		return 0;
	}
	u = relay_up_new(STORE_OP_WAIT, RK_WAIT);
	w = u != NULL ? relay_wait_new(r, req->list, req->list_len, req->n)
		      : NULL;
	if (w == NULL) {
		free(u);
		return UV_ENOMEM; /* s stays: the client is closed */
	}
	w->held = 1;
	u->w = w;
	relay_wait_add_slot(w, s);
	relay_hold(r, u);
	cl->last_seq = r->nheld;
	return 0;
}

/*
 * A CANCEL_WAIT from cl: cancel upstream the waits only cl holds, and
 * answer WAIT_CANCELED after a PING through the store (a fence: a wait
 * answered before it is answered first).
 */
static int relay_client_cancel(struct relay_client *cl)
{
	struct crun_store_relay *r = cl->r;
	struct relay_slot *fs;
	struct relay_up *u;

	u = relay_up_new(STORE_OP_PING, RK_U32);
	fs = u != NULL ? relay_slot_new(cl) : NULL;
	if (fs == NULL) {
		free(u);
		return UV_ENOMEM;
	}
	fs->cancel = 1;
	store_buf_op(&u->frame, STORE_GEN_G3, STORE_OP_PING);
	store_buf_u32(&u->frame, r->nonce);
	relay_up_add_slot(u, fs);
	relay_hold(r, u);
	cl->last_seq = r->nheld;
	return 0;
}

/* Handle one decoded request of cl (frame f, used bytes): 0 or an error. */
static int relay_client_request(struct relay_client *cl,
				const struct store_req *req,
				const unsigned char *f, size_t used)
{
	struct crun_store_relay *r = cl->r;
	int kind = relay_kind_of(req->op);
	struct relay_slot *s;
	struct relay_up *u = NULL;

	r->st.requests_in++;
	if (req->op == STORE_OP_VALIDATE)
		return 0; /* the relay's own connection is validated */
	if (req->op == STORE_OP_CANCEL_WAIT)
		return relay_client_cancel(cl);
	if (kind < 0)
		return CRUN_EPROTO;
	if (kind == RK_WAIT)
		return relay_client_wait(cl, req);
	if (req->op == STORE_OP_GET || req->op == STORE_OP_ADD) {
		struct store_buf k;

		store_buf_init(&k);
		store_buf_str(&k, req->key, req->key_len);
		if (k.oom)
			return UV_ENOMEM;
		u = relay_joinable(r, cl, req->op, k.data, k.len);
		store_buf_release(&k);
		/* Not past INT64's range, and only deltas of one sign: the
		 * partial sums then stay between the old value and the new. */
		if (u != NULL && req->op == STORE_OP_ADD &&
		    ((u->sum < 0) != (req->num < 0) ||
		     (req->num > 0 && u->sum > INT64_MAX - req->num) ||
		     (req->num < 0 && u->sum < INT64_MIN - req->num)))
			u = NULL;
	}
	if ((s = relay_slot_new(cl)) == NULL)
		return UV_ENOMEM;
	s->noreply = kind == RK_NONE;
	s->delta = req->num;
	s->bytes = used;
	cl->held += used;
	if (u != NULL) {
		u->sum += req->num;
		relay_up_add_slot(u, s);
		cl->last_seq = u->pos;
		return 0;
	}
	if ((u = relay_up_new(req->op, (enum relay_kind)kind)) == NULL)
		return UV_ENOMEM;
	u->n = req->n;
	u->sum = req->num;
	/* The same fields in every generation: only the opcode changes. */
	store_buf_op(&u->frame, STORE_GEN_G3, req->op);
	store_buf_put(&u->frame, f + 1, used - 1);
	if (u->frame.oom) {
		relay_up_free(u);
		return UV_ENOMEM;
	}
	if (req->op == STORE_OP_GET || req->op == STORE_OP_ADD)
		u->klen = 8 + req->key_len;
	relay_up_add_slot(u, s);
	relay_hold(r, u);
	cl->last_seq = r->nheld;
	return 0;
}

/* This client's share of the relay's memory. */
static size_t relay_client_share(const struct relay_client *cl)
{
	const struct crun_store_relay *r = cl->r;
	size_t share = r->lim.max_memory / (r->nclients ? r->nclients : 1);

	return share < r->max_client ? share : r->max_client;
}

/* Decode and handle every whole frame in cl->in. */
static void relay_client_parse(struct relay_client *cl)
{
	struct store_req req;
	char errmsg[256];
	size_t off = 0, used;
	int rc;

	while (!cl->closing && off < cl->in.len) {
		errmsg[0] = '\0';
		rc = store_wire_decode(cl->in.data + off, cl->in.len - off,
				       &cl->gen, &cl->r->lim, &cl->rs, &req,
				       &used, errmsg, sizeof(errmsg));
		if (rc == STORE_WIRE_NEED_MORE)
			break;
		if (rc < 0) {
			relay_client_close(cl, errmsg);
			return;
		}
		rc = relay_client_request(cl, &req, cl->in.data + off, used);
		if (rc != 0) {
			snprintf(errmsg, sizeof(errmsg), "%s: %s",
				 store_wire_op_name(req.op),
				 rc == CRUN_EPROTO ? "not relayed"
						   : crun_strerror(rc));
			relay_client_close(cl, errmsg);
			return;
		}
		off += used;
	}
	if (off > 0) {
		memmove(cl->in.data, cl->in.data + off, cl->in.len - off);
		cl->in.len -= off;
	}
}

/* ---- Client connections ------------------------------------------------- */

static void relay_on_handle_close(uv_handle_t *h);

static void relay_client_on_close(uv_handle_t *h)
{
	struct relay_client *cl = h->data;
	struct crun_store_relay *r = cl->r;

	store_buf_release(&cl->in);
	store_buf_release(&cl->out);
	free(cl);
	relay_on_handle_close((uv_handle_t *)&r->listener);
}

/*
 * Close cl: its slots are orphaned (their replies go nowhere), its parked
 * waits dropped (CANCEL_TAG where it was the last one waiting).
 */
static void relay_client_close(struct relay_client *cl, const char *why)
{
	struct crun_store_relay *r = cl->r;
	struct relay_wait *w, *wnext;
	struct relay_slot *s, *next;

	if (cl->closing)
		return;
	cl->closing = 1;
	if (why != NULL && !r->closing && r->state != RS_LOST)
		log_msg(LOG_INFO, "crun relay", "client closed: %s", why);
	for (w = r->waits; w != NULL; w = wnext) {
		wnext = w->next;
		for (s = w->slots; s != NULL; s = next) {
			next = s->onext;
			if (s->cl != cl)
				continue;
			relay_wait_drop_slot(w, s);
			relay_slot_maybe_free(s);
		}
		if (!r->closing && r->state != RS_LOST)
			relay_wait_release(r, w);
	}
	for (s = cl->head; s != NULL; s = next) {
		next = s->next;
		s->cl = NULL;
		s->infifo = 0;
		relay_slot_maybe_free(s);
	}
	cl->head = cl->tail = NULL;
	if (cl->dirty) { /* off the flush's list: it is freed before */
		struct relay_client **pp = &r->dirty;

		while (*pp != cl)
			pp = &(*pp)->dirty_next;
		*pp = cl->dirty_next;
		cl->dirty = 0;
	}
	if (cl->prev != NULL)
		cl->prev->next = cl->next;
	else
		r->clients = cl->next;
	if (cl->next != NULL)
		cl->next->prev = cl->prev;
	r->nclients--;
	r->st.clients = r->nclients;
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

static void relay_client_on_read(uv_stream_t *st, ssize_t nread,
				 const uv_buf_t *buf)
{
	struct relay_client *cl = st->data;

	if (cl->closing)
		return;
	if (nread < 0) {
		relay_client_close(
		    cl, nread == UV_EOF ? NULL : uv_strerror((int)nread));
		return;
	}
	cl->in.len += (size_t)nread;
	relay_client_parse(cl);
	if (!cl->closing && cl->in.len + cl->held > relay_client_share(cl) &&
	    !cl->paused) {
		cl->paused = 1;
		uv_read_stop(st);
	}
}

static void relay_client_on_write(uv_write_t *req, int status)
{
	struct relay_write *wr = (struct relay_write *)req;
	struct relay_client *cl = wr->cl;

	cl->queued -= wr->len;
	free(wr);
	if (status < 0 && !cl->closing)
		relay_client_close(cl, uv_strerror(status));
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
			relay_client_close(cl, uv_strerror(rc));
			return;
		}
		if ((size_t)rc < cl->out.len) {
			size_t n = cl->out.len - (size_t)rc;

			wr = malloc(sizeof(*wr) + n);
			if (wr == NULL) {
				relay_client_close(cl, "out of memory");
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
				relay_client_close(cl, uv_strerror(rc));
				return;
			}
			cl->queued += n;
		}
		cl->out.len = 0;
		if (cl->out.cap > 65536)
			store_buf_release(&cl->out);
	}
	if (cl->paused &&
	    cl->in.len + cl->held + cl->queued <= relay_client_share(cl) / 2) {
		cl->paused = 0;
		uv_read_start((uv_stream_t *)&cl->tcp, relay_client_on_alloc,
			      relay_client_on_read);
	}
}

static void relay_on_connection(uv_stream_t *ls, int status)
{
	struct crun_store_relay *r = ls->data;
	struct relay_client *cl;

	if (status < 0 || r->closing)
		return;
	cl = calloc(1, sizeof(*cl));
	if (cl == NULL)
		return;
	cl->r = r;
	uv_tcp_init(r->loop, &cl->tcp);
	cl->tcp.data = cl;
	r->nhandles++;
	store_buf_init(&cl->in);
	store_buf_init(&cl->out);
	cl->next = r->clients;
	if (r->clients != NULL)
		r->clients->prev = cl;
	r->clients = cl;
	r->nclients++;
	r->st.clients = r->nclients;
	if (uv_accept(ls, (uv_stream_t *)&cl->tcp) != 0) {
		relay_client_close(cl, "accept failed");
		return;
	}
	if (r->state == RS_LOST) {
		relay_client_close(cl, NULL); /* the store is gone */
		return;
	}
	if (r->nclients > r->lim.max_conns) {
		relay_client_close(cl, "over max-conns");
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
		relay_up_lost(r, status);
}

/* Send r->up_out: 0 or an error. */
static int relay_up_send(struct crun_store_relay *r)
{
	struct relay_write *wr;
	uv_buf_t b;
	size_t n;
	int rc;

	if (r->up_out.len == 0)
		return 0;
	if (r->up_out.oom)
		return UV_ENOMEM;
	rc = 0;
	if (r->up_queued == 0) {
		b = uv_buf_init((char *)r->up_out.data,
				(unsigned)r->up_out.len);
		rc = uv_try_write((uv_stream_t *)&r->up, &b, 1);
		if (rc == UV_EAGAIN)
			rc = 0;
		if (rc < 0)
			return rc;
	}
	n = r->up_out.len - (size_t)rc;
	if (n > 0) {
		wr = malloc(sizeof(*wr) + n);
		if (wr == NULL)
			return UV_ENOMEM;
		wr->r = r;
		wr->cl = NULL;
		wr->len = n;
		memcpy(wr->data, r->up_out.data + rc, n);
		b = uv_buf_init((char *)wr->data, (unsigned)n);
		rc = uv_write(&wr->req, (uv_stream_t *)&r->up, &b, 1,
			      relay_up_on_write);
		if (rc != 0) {
			free(wr);
			return rc;
		}
		r->up_queued += n;
	}
	r->up_out.len = 0;
	if (r->up_out.cap > 65536)
		store_buf_release(&r->up_out);
	return 0;
}

/* Encode the held requests into up_out, in order. */
static void relay_send_held(struct crun_store_relay *r)
{
	struct relay_up *u;

	while ((u = r->held_head) != NULL) {
		r->held_head = u->next;
		if (r->held_head == NULL)
			r->held_tail = NULL;
		u->next = NULL;
		r->st.requests_up++;
		if (u->kind == RK_WAIT) {
			struct relay_wait *w = u->w;

			store_buf_op(&r->up_out, STORE_GEN_G3,
				     STORE_OP_WAIT_TAG);
			store_buf_u64(&r->up_out, w->tag);
			store_buf_put(&r->up_out, w->list.data, w->list.len);
			w->held = 0;
			w->sent = 1;
			w->seq = r->up_sent;
			r->undecided++;
			u->w = NULL;
			relay_up_free(u);
			continue;
		}
		if (u->op == STORE_OP_ADD) /* the joined deltas' sum */
			for (int i = 0; i < 8; i++)
				u->frame.data[1 + u->klen + i] =
				    (unsigned char)((uint64_t)u->sum >>
						    (8 * i));
		store_buf_put(&r->up_out, u->frame.data, u->frame.len);
		store_buf_release(&u->frame);
		r->up_sent++;
		if (r->sent_tail != NULL)
			r->sent_tail->next = u;
		else
			r->sent_head = u;
		r->sent_tail = u;
	}
}

/* Before the loop waits: send what is held, write to the clients. */
static void relay_on_flush(uv_prepare_t *h)
{
	struct crun_store_relay *r = h->data;
	struct relay_client *cl;
	int rc;

	uv_prepare_stop(h);
	if (r->state == RS_READY && r->held_head != NULL) {
		relay_send_held(r);
		rc = relay_up_send(r);
		if (rc != 0)
			relay_up_lost(r, rc);
	}
	while ((cl = r->dirty) != NULL) {
		r->dirty = cl->dirty_next;
		relay_client_flush(cl);
	}
}

/* The length of a reply of kind u at p[0..len) (0: not all in yet). */
static size_t relay_reply_len(const struct relay_up *u, const unsigned char *p,
			      size_t len)
{
	size_t off = 0;
	uint64_t n, i, count;

	switch (u->kind) {
	case RK_NONE:
	case RK_CANCEL:
		return 0;
	case RK_U8:
		return len >= 1 ? 1 : 0;
	case RK_U32:
		return len >= 4 ? 4 : 0;
	case RK_U64:
		return len >= 8 ? 8 : 0;
	case RK_QPOP:
		if (len < 8)
			return 0;
		if (store_wire_u64(p) == 0)
			return 8;
		off = 8;
		count = 1;
		break;
	case RK_LIST:
		if (len < 8)
			return 0;
		count = store_wire_u64(p);
		off = 8;
		break;
	case RK_NBYTES:
		count = u->n;
		break;
	case RK_BYTES:
	default:
		count = 1;
		break;
	}
	for (i = 0; i < count; i++) {
		if (len - off < 8)
			return 0;
		n = store_wire_u64(p + off);
		if (n > len - off - 8)
			return 0;
		off += 8 + (size_t)n;
	}
	return off;
}

/* Every WAIT_TAG sent before the in-order reply just in is parked. */
static void relay_decide(struct crun_store_relay *r)
{
	struct relay_wait *w;
	struct relay_slot *s;
	struct relay_client *cl, *next;
	int any = 0;

	if (r->undecided == 0)
		return;
	for (w = r->waits; w != NULL; w = w->next) {
		if (!w->sent || w->decided || w->seq >= r->up_recv)
			continue;
		w->decided = 1;
		r->undecided--;
		for (s = w->slots; s != NULL; s = s->onext)
			s->detached = 1;
		any = 1;
	}
	/* Then drain (which may close a client, and free waits). */
	for (cl = any ? r->clients : NULL; cl != NULL; cl = next) {
		next = cl->next;
		relay_client_drain(cl);
	}
}

/* The head request's reply (p, n; err: refused) is in: answer its slots. */
static void relay_answer(struct crun_store_relay *r, const unsigned char *p,
			 size_t n, int err)
{
	struct relay_up *u = r->sent_head;
	struct relay_slot *s;
	unsigned char num[8];
	int64_t v;

	r->sent_head = u->next;
	if (r->sent_head == NULL)
		r->sent_tail = NULL;
	r->up_recv++;
	relay_decide(r);
	v = u->op == STORE_OP_ADD && !err ? (int64_t)store_wire_u64(p) - u->sum
					  : 0;
	for (s = u->slots; s != NULL; s = s->onext) {
		if (s->cancel && !err) {
			struct relay_wait *w, *wn;
			struct relay_slot *t, *tn;
			unsigned char c = STORE_WAIT_CANCELED;

			/* The fence is through: drop cl's waits left. */
			for (w = r->waits; w != NULL && s->cl; w = wn) {
				wn = w->next;
				for (t = w->slots; t != NULL; t = tn) {
					tn = t->onext;
					if (t->cl != s->cl)
						continue;
					relay_wait_drop_slot(w, t);
					t->detached = 1;
					relay_slot_maybe_free(t);
				}
				relay_wait_release(r, w);
			}
			relay_slot_fill(s, &c, 1, 0);
		} else if (u->op == STORE_OP_ADD && !err) {
			v += s->delta;
			for (int i = 0; i < 8; i++)
				num[i] =
				    (unsigned char)((uint64_t)v >> (8 * i));
			relay_slot_fill(s, num, 8, 0);
		} else {
			relay_slot_fill(s, p, n, err);
		}
	}
	relay_up_free(u);
}

/* A tag's answer (one: a QUEUE_PUSH's, for its first client only). */
static void relay_tag_answer(struct crun_store_relay *r, uint64_t tag, int one,
			     int failed)
{
	struct relay_wait *w;
	struct relay_slot *s, *list, *next;
	unsigned char c = STORE_STOP_WAITING;

	for (w = r->waits; w != NULL && w->tag != tag; w = w->next)
		;
	if (w == NULL || w->slots == NULL)
		return; /* canceled: nobody waits for it now */
	/* Take the slots answered off w first: filling one may close its
	 * client, which walks and frees waits. */
	list = w->slots;
	if (one) {
		w->slots = list->onext;
		list->onext = NULL;
		if (w->slots == NULL)
			w->slots_tail = NULL;
	} else {
		w->slots = w->slots_tail = NULL;
	}
	for (s = list; s != NULL; s = s->onext)
		s->w = NULL; /* still owned (inowner) by this list */
	if (w->slots != NULL) {
		/* The others wait again, behind whoever waits now. */
		struct relay_up *u = relay_up_new(STORE_OP_WAIT, RK_WAIT);

		if (w->sent && !w->decided)
			r->undecided--;
		w->tag = ++r->next_tag;
		w->sent = w->decided = 0;
		w->held = 0; /* not joinable: its clients came earlier */
		if (u != NULL) {
			u->w = w;
			relay_hold(r, u);
		}
	} else {
		relay_wait_free(r, w);
	}
	for (s = list; s != NULL; s = next) {
		next = s->onext;
		relay_slot_fill(s, &c, 1, failed);
		s->inowner = 0;
		relay_slot_maybe_free(s);
	}
}

/* Consume every whole message in up_in. */
static void relay_up_process(struct crun_store_relay *r)
{
	const unsigned char *p;
	size_t off = 0, len, n;

	while (r->state == RS_READY && off < r->up_in.len) {
		p = r->up_in.data + off;
		len = r->up_in.len - off;
		if (p[0] == STORE_TAG_ANSWER || p[0] == STORE_TAG_ANSWER_ONE ||
		    p[0] == STORE_TAG_FAILED) {
			if (len < 9)
				break;
			off += 9;
			relay_tag_answer(r, store_wire_u64(p + 1),
					 p[0] == STORE_TAG_ANSWER_ONE,
					 p[0] == STORE_TAG_FAILED);
			continue;
		}
		if ((p[0] != STORE_TAG_REPLY && p[0] != STORE_TAG_ERROR) ||
		    r->sent_head == NULL) {
			relay_up_lost(r, CRUN_EPROTO);
			return;
		}
		if (p[0] == STORE_TAG_ERROR) {
			off += 1;
			relay_answer(r, NULL, 0, 1);
			continue;
		}
		n = relay_reply_len(r->sent_head, p + 1, len - 1);
		if (n == 0 && r->sent_head->kind != RK_NONE &&
		    r->sent_head->kind != RK_CANCEL)
			break;
		off += 1 + n;
		relay_answer(r, p + 1, n, 0);
	}
	if (off > 0 && r->state == RS_READY) {
		memmove(r->up_in.data, r->up_in.data + off, r->up_in.len - off);
		r->up_in.len -= off;
	}
}

static void relay_up_on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
	struct crun_store_relay *r = h->data;

	if (r->up_in.len > r->lim.max_output + 64 ||
	    store_buf_reserve(&r->up_in, 65536) != 0) {
		*buf = uv_buf_init(NULL, 0);
		return;
	}
	*buf = uv_buf_init((char *)r->up_in.data + r->up_in.len,
			   (unsigned)(r->up_in.cap - r->up_in.len));
}

static void relay_up_on_read(uv_stream_t *st, ssize_t nread,
			     const uv_buf_t *buf)
{
	struct crun_store_relay *r = st->data;

	if (r->closing || r->state == RS_LOST)
		return;
	if (nread < 0) {
		relay_up_lost(r, (int)nread);
		return;
	}
	r->up_in.len += (size_t)nread;
	if (r->state == RS_VALIDATING) {
		/* The PING's echo, then the tagging WAIT_TAG's answer. */
		if (r->up_in.len < 13)
			return;
		if (store_wire_u32(r->up_in.data) != r->nonce ||
		    r->up_in.data[4] != STORE_TAG_ANSWER ||
		    store_wire_u64(r->up_in.data + 5) != 0) {
			relay_up_lost(r, CRUN_EPROTO);
			return;
		}
		memmove(r->up_in.data, r->up_in.data + 13, r->up_in.len - 13);
		r->up_in.len -= 13;
		r->state = RS_READY;
		relay_kick(r);
	}
	relay_up_process(r);
}

static void relay_connect(struct crun_store_relay *r);

static void relay_up_on_tcp_close(uv_handle_t *h)
{
	struct crun_store_relay *r = h->data;

	r->nhandles--;
	if (!r->closing && r->state == RS_CONNECTING) {
		relay_connect(r); /* a retry, after its delay */
		return;
	}
	relay_on_handle_close(h);
}

static void relay_up_on_connect(uv_connect_t *req, int status)
{
	struct crun_store_relay *r = req->data;
	struct store_buf b;
	int rc;

	if (r->closing || r->state != RS_CONNECTING)
		return;
	if (status < 0) {
		if (status == UV_ECONNREFUSED &&
		    uv_now(r->loop) + 100 < r->deadline) {
			r->up_open = 0;
			uv_close((uv_handle_t *)&r->up, relay_up_on_tcp_close);
			return;
		}
		relay_up_lost(r, status);
		return;
	}
	uv_tcp_nodelay(&r->up, 1);
	r->state = RS_VALIDATING;
	store_buf_init(&b);
	store_buf_op(&b, STORE_GEN_G3, STORE_OP_VALIDATE);
	store_buf_u32(&b, STORE_WIRE_MAGIC);
	store_buf_op(&b, STORE_GEN_G3, STORE_OP_PING);
	store_buf_u32(&b, r->nonce);
	store_buf_op(&b, STORE_GEN_G3, STORE_OP_WAIT_TAG);
	store_buf_u64(&b, 0); /* tag 0 */
	store_buf_u64(&b, 0); /* no keys: answered at once */
	store_buf_put(&r->up_out, b.data, b.len);
	store_buf_release(&b);
	rc = relay_up_send(r);
	if (rc == 0)
		rc = uv_read_start((uv_stream_t *)&r->up, relay_up_on_alloc,
				   relay_up_on_read);
	if (rc != 0)
		relay_up_lost(r, rc);
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
			    (const struct sockaddr *)&r->up_addr,
			    relay_up_on_connect);
	if (rc != 0)
		relay_up_lost(r, rc);
}

/* Connect now the first time, after 100 ms on a retry. */
static void relay_connect(struct crun_store_relay *r)
{
	static const uint64_t delay = 100;

	uv_timer_start(&r->timer, relay_on_retry, delay, 0);
}

/*
 * The store is lost: close every client (their waits end with their
 * connections), and call lost once.
 */
static void relay_up_lost(struct crun_store_relay *r, int err)
{
	struct relay_up *u;

	if (r->state == RS_LOST || r->closing)
		return;
	r->state = RS_LOST;
	uv_timer_stop(&r->timer);
	if (r->up_open) {
		r->up_open = 0;
		uv_close((uv_handle_t *)&r->up, relay_up_on_tcp_close);
	}
	while (r->clients != NULL)
		relay_client_close(r->clients, NULL);
	while ((u = r->held_head) != NULL) {
		r->held_head = u->next;
		relay_up_free(u);
	}
	r->held_tail = NULL;
	while ((u = r->sent_head) != NULL) {
		r->sent_head = u->next;
		relay_up_free(u);
	}
	r->sent_tail = NULL;
	while (r->waits != NULL)
		relay_wait_free(r, r->waits);
	log_warn("store relay: lost the workers' store: %s",
		 crun_strerror(err));
	if (!r->lost_called && r->lost != NULL) {
		r->lost_called = 1;
		r->lost(r, err, r->lost_data);
	}
}

/* ---- Life cycle --------------------------------------------------------- */

static void relay_on_handle_close(uv_handle_t *h)
{
	struct crun_store_relay *r = h->data;
	store_close_cb cb;
	void *data;

	if (h != (uv_handle_t *)&r->up)
		r->nhandles--;
	if (!r->closing || r->nhandles > 0)
		return;
	cb = r->close_cb;
	data = r->close_data;
	store_buf_release(&r->up_in);
	store_buf_release(&r->up_out);
	free(r);
	if (cb != NULL)
		cb(data);
}

static int relay_resolve(struct crun_store_relay *r, const char *host, int port)
{
	struct addrinfo hints, *ai = NULL;
	char pstr[16];
	int rc;

	if (port <= 0 || port > 65535)
		return UV_EINVAL;
	if (host == NULL || host[0] == '\0')
		host = "127.0.0.1";
	if (uv_ip4_addr(host, port, (struct sockaddr_in *)&r->up_addr) == 0 ||
	    uv_ip6_addr(host, port, (struct sockaddr_in6 *)&r->up_addr) == 0)
		return 0;
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	snprintf(pstr, sizeof(pstr), "%d", port);
	rc = getaddrinfo(host, pstr, &hints, &ai);
	if (rc != 0)
		return rc == EAI_SYSTEM ? -errno : UV_EAI_NONAME;
	memcpy(&r->up_addr, ai->ai_addr, ai->ai_addrlen);
	freeaddrinfo(ai);
	return 0;
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
	if (o->lim != NULL)
		r->lim = *o->lim;
	else
		store_limits_default(&r->lim);
	r->max_client =
	    o->max_client_bytes ? o->max_client_bytes : r->lim.max_output;
	r->lost = lost;
	r->lost_data = data;
	r->nonce = (uint32_t)getpid() ^ (uint32_t)(uintptr_t)r;
	r->deadline = uv_now(loop) + (uint64_t)(o->connect_timeout_ms > 0
						    ? o->connect_timeout_ms
						    : 10000);
	store_buf_init(&r->up_in);
	store_buf_init(&r->up_out);
	rc = relay_resolve(r, o->up_host, o->up_port);
	if (rc != 0) {
		free(r);
		return rc;
	}
	uv_tcp_init(loop, &r->listener);
	r->listener.data = r;
	uv_timer_init(loop, &r->timer);
	r->timer.data = r;
	uv_prepare_init(loop, &r->flush);
	r->flush.data = r;
	r->nhandles = 3;
	rc = relay_listen(r, o);
	if (rc != 0) {
		r->closing = 1;
		uv_close((uv_handle_t *)&r->listener, relay_on_handle_close);
		uv_close((uv_handle_t *)&r->timer, relay_on_handle_close);
		uv_close((uv_handle_t *)&r->flush, relay_on_handle_close);
		return rc;
	}
	if (o->listen_fd >= 0)
		close(o->listen_fd); /* the relay serves its copy */
	r->state = RS_CONNECTING;
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
	struct relay_up *u;

	assert(!r->closing);
	r->closing = 1;
	r->close_cb = cb;
	r->close_data = data;
	while (r->clients != NULL)
		relay_client_close(r->clients, NULL);
	while ((u = r->held_head) != NULL) {
		r->held_head = u->next;
		relay_up_free(u);
	}
	while ((u = r->sent_head) != NULL) {
		r->sent_head = u->next;
		relay_up_free(u);
	}
	while (r->waits != NULL)
		relay_wait_free(r, r->waits);
	if (r->up_open) {
		r->up_open = 0;
		uv_close((uv_handle_t *)&r->up, relay_up_on_tcp_close);
	}
	uv_close((uv_handle_t *)&r->listener, relay_on_handle_close);
	uv_close((uv_handle_t *)&r->timer, relay_on_handle_close);
	uv_close((uv_handle_t *)&r->flush, relay_on_handle_close);
}

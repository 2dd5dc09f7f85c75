/*
 * The store relay's requests (store_relay.c has the design): each client's
 * FIFO of replies due, the WAIT_TAGs and who waits on each, the requests held
 * for the next send (where concurrent ones are combined), and the store's
 * answers, which fill the slots.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "crun/err.h"
#include "store_relay_req.h"

/* Held requests a new one looks through for one to join. */
#define RELAY_JOIN_SCAN 64

static struct relay_up *relay_up_new(enum store_op op, enum relay_kind kind);
static void relay_hold(struct relay_reqs *q, struct relay_up *u);

/* ---- Slots -------------------------------------------------------------- */

void relay_req_slot_maybe_free(struct relay_slot *s)
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
	cl->dirty_next = cl->q->dirty;
	cl->q->dirty = cl;
	cl->q->on.kick(cl->q->data);
}

/* s no longer costs its client what it was counted for. */
static void relay_slot_unhold(struct relay_slot *s)
{
	s->cl->held -= s->bytes;
	if (s->waiting)
		s->cl->wait_held -= s->bytes;
	s->waiting = 0;
	s->bytes = 0;
}

/* Move cl's FIFO into its output while its head is done. */
static void relay_client_drain(struct relay_client *cl)
{
	struct relay_slot *s;

	while (!cl->closing && (s = cl->head) != NULL) {
		if (s->filled && s->close) {
			cl->q->on.client_bad(cl->q->data, cl,
					     "the store refused a request");
			return;
		}
		if (s->filled) {
			store_buf_put(&cl->out, s->reply.data, s->reply.len);
			relay_slot_unhold(s);
		} else if (!s->detached)
			break;
		cl->head = s->next;
		if (cl->head == NULL)
			cl->tail = NULL;
		s->infifo = 0;
		relay_req_slot_maybe_free(s);
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
	relay_slot_unhold(s);
	if (!s->infifo) { /* a detached WAIT: out of order */
		if (close)
			cl->q->on.client_bad(cl->q->data, cl,
					     "the store refused a wait");
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

static struct relay_wait *relay_wait_new(struct relay_reqs *q,
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
	w->tag = ++q->next_tag;
	w->next = q->waits;
	if (q->waits != NULL)
		q->waits->prev = w;
	q->waits = w;
	return w;
}

void relay_req_wait_free(struct relay_reqs *q, struct relay_wait *w)
{
	if (w->prev != NULL)
		w->prev->next = w->next;
	else
		q->waits = w->next;
	if (w->next != NULL)
		w->next->prev = w->prev;
	if (w->sent && !w->decided)
		q->undecided--;
	store_buf_release(&w->list);
	free(w);
}

/* Free w once no client is left on it (each left with a CANCEL_TAG). */
void relay_req_wait_release(struct relay_reqs *q, struct relay_wait *w)
{
	if (w->slots != NULL || w->held)
		return; /* a held one is dropped when the held are sent */
	relay_req_wait_free(q, w);
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
void relay_req_wait_drop_slot(struct relay_reqs *q, struct relay_wait *w,
			      struct relay_slot *s)
{
	struct relay_slot **pp = &w->slots, *prev = NULL;
	struct relay_up *u;

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
	if (s->cl != NULL) /* its client no longer waits: not its cost */
		relay_slot_unhold(s);
	/* One fewer of the identical waits the store holds for w. */
	if (w->sent && q->state == RS_READY && !q->closing &&
	    (u = relay_up_new(STORE_OP_CANCEL_TAG, RK_CANCEL)) != NULL) {
		store_buf_op(&u->frame, STORE_GEN_G3, STORE_OP_CANCEL_TAG);
		store_buf_u64(&u->frame, w->tag);
		store_buf_u64(&u->frame, 1);
		relay_hold(q, u);
	}
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
		relay_req_slot_maybe_free(s);
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
static void relay_hold(struct relay_reqs *q, struct relay_up *u)
{
	if (q->held_tail != NULL)
		q->held_tail->next = u;
	else
		q->held_head = u;
	q->held_tail = u;
	u->pos = ++q->nheld;
	q->on.kick(q->data);
}

/*
 * A held request of kind op on the same key (or list) that cl may join: its
 * own requests all come before it (none held after it).
 */
static struct relay_up *relay_joinable(struct relay_reqs *q,
				       struct relay_client *cl,
				       enum store_op op,
				       const unsigned char *key, size_t klen)
{
	struct relay_up *u;

	int scanned = 0;

	/* A bounded look (a client pipelining thousands of GETs must not
	 * make each one walk all the others): combining is an optimisation. */
	for (u = q->held_head; u != NULL && scanned++ < RELAY_JOIN_SCAN;
	     u = u->next) {
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
			     const struct store_req *req, size_t cost)
{
	struct relay_reqs *q = cl->q;
	struct store_buf key;
	struct relay_slot *s;
	struct relay_up *u;
	struct relay_wait *w;

	store_buf_init(&key);
	store_buf_u64(&key, req->n);
	store_buf_put(&key, req->list, req->list_len);
	if (key.oom)
		return UV_ENOMEM;
	u = relay_joinable(q, cl, STORE_OP_WAIT, key.data, key.len);
	store_buf_release(&key);
	if ((s = relay_slot_new(cl)) == NULL)
		return UV_ENOMEM;
	s->bytes = cost; /* until it is answered or dropped */
	s->waiting = 1;
	cl->held += cost;
	cl->wait_held += cost;
	if (u != NULL) {
		relay_wait_add_slot(u->w, s);
		cl->last_seq = u->pos;
		return 0;
	}
	u = relay_up_new(STORE_OP_WAIT, RK_WAIT);
	w = u != NULL ? relay_wait_new(q, req->list, req->list_len, req->n)
		      : NULL;
	if (w == NULL) {
		free(u);
		return UV_ENOMEM; /* s stays: the client is closed */
	}
	w->held = 1;
	u->w = w;
	relay_wait_add_slot(w, s);
	relay_hold(q, u);
	cl->last_seq = q->nheld;
	return 0;
}

/*
 * A CANCEL_WAIT from cl: cancel upstream the waits only cl holds, and
 * answer WAIT_CANCELED after a PING through the store (a fence: a wait
 * answered before it is answered first).
 */
static int relay_client_cancel(struct relay_client *cl, size_t cost)
{
	struct relay_reqs *q = cl->q;
	struct relay_slot *fs;
	struct relay_up *u;

	u = relay_up_new(STORE_OP_PING, RK_U32);
	fs = u != NULL ? relay_slot_new(cl) : NULL;
	if (fs == NULL) {
		free(u);
		return UV_ENOMEM;
	}
	fs->cancel = 1;
	fs->bytes = cost;
	cl->held += cost;
	store_buf_op(&u->frame, STORE_GEN_G3, STORE_OP_PING);
	store_buf_u32(&u->frame, q->nonce);
	relay_up_add_slot(u, fs);
	relay_hold(q, u);
	cl->last_seq = q->nheld;
	return 0;
}

/*
 * Handle one decoded request of cl (frame f, used bytes; cost counted in
 * cl->held until its reply is in): 0 or an error.
 */
static int relay_client_request(struct relay_client *cl,
				const struct store_req *req,
				const unsigned char *f, size_t used,
				size_t cost)
{
	struct relay_reqs *q = cl->q;
	int kind = relay_kind_of(req->op);
	struct relay_slot *s;
	struct relay_up *u = NULL;

	q->st->requests_in++;
	if (req->op == STORE_OP_VALIDATE)
		return 0; /* the relay's own connection is validated */
	if (req->op == STORE_OP_CANCEL_WAIT)
		return relay_client_cancel(cl, cost);
	if (kind < 0)
		return CRUN_EPROTO;
	if (kind == RK_WAIT)
		return relay_client_wait(cl, req, cost);
	if (req->op == STORE_OP_GET || req->op == STORE_OP_ADD) {
		struct store_buf k;

		store_buf_init(&k);
		store_buf_str(&k, req->key, req->key_len);
		if (k.oom)
			return UV_ENOMEM;
		u = relay_joinable(q, cl, req->op, k.data, k.len);
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
	s->bytes = cost;
	cl->held += cost;
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
	relay_hold(q, u);
	cl->last_seq = q->nheld;
	return 0;
}

/*
 * The most the store's reply to a request of kind can take (it refuses a
 * reply larger than max_output), so that a client's requests in flight are
 * counted in its share before their answers come.
 */
static size_t relay_reply_bound(const struct relay_reqs *q, int kind)
{
	size_t v = q->lim->max_value < q->lim->max_output ? q->lim->max_value
							  : q->lim->max_output;

	switch (kind) {
	case RK_U8:
	case RK_WAIT:
		return 1;
	case RK_U32:
		return 4;
	case RK_U64:
		return 8;
	case RK_BYTES:
		return 8 + v;
	case RK_QPOP:
		return 16 + v;
	case RK_NBYTES:
	case RK_LIST:
		return q->lim->max_output;
	default:
		return 0;
	}
}

/*
 * What taking req (used bytes) costs cl: its bytes, its slot and the most
 * its reply can take; 0 when that does not fit in cl's share now. A client
 * that owes nothing but its parked waits may always take one request other
 * than a WAIT, as at the store (where a wait never holds back the requests
 * after it): a wait may never be answered, and its client's next request
 * is not to wait for it.
 */
static size_t relay_client_cost(struct relay_client *cl,
				const struct store_req *req, size_t used)
{
	int kind =
	    req->op == STORE_OP_CANCEL_WAIT ? RK_U8 : relay_kind_of(req->op);
	size_t cost =
	    used + sizeof(struct relay_slot) + relay_reply_bound(cl->q, kind);
	size_t owed = relay_req_client_owed(cl);

	if (owed > 0 && owed + cost > relay_req_client_share(cl) &&
	    (kind == RK_WAIT || owed > cl->wait_held))
		return 0;
	return cost;
}

/* This client's share of the relay's memory. */
size_t relay_req_client_share(const struct relay_client *cl)
{
	const struct relay_reqs *q = cl->q;
	size_t share = q->lim->max_memory / (q->nclients ? q->nclients : 1);

	return share < q->max_client ? share : q->max_client;
}

/* Decode and handle every whole frame in cl->in. */
void relay_req_client_parse(struct relay_client *cl)
{
	struct relay_reqs *q = cl->q;
	struct store_req req;
	char errmsg[256];
	size_t off = 0, used, cost;
	int rc;

	while (!cl->closing && off < cl->in.len) {
		errmsg[0] = '\0';
		rc = store_wire_decode(cl->in.data + off, cl->in.len - off,
				       &cl->gen, cl->q->lim, &cl->rs, &req,
				       &used, errmsg, sizeof(errmsg));
		if (rc == STORE_WIRE_NEED_MORE)
			break;
		if (rc < 0) {
			q->on.client_bad(q->data, cl, errmsg);
			return;
		}
		/* What the store would close the connection for never goes
		 * up: the relay's connection is every client's. */
		if (used > q->max_frame) {
			snprintf(errmsg, sizeof(errmsg),
				 "request larger than %zu bytes (2 * max-value "
				 "+ max-key-size + 64)",
				 q->max_frame);
			q->on.client_bad(q->data, cl, errmsg);
			return;
		}
		if ((cost = relay_client_cost(cl, &req, used)) == 0) {
			cl->stalled = 1; /* read again as its replies drain */
			break;
		}
		cl->since = uv_now(q->loop);
		rc = relay_client_request(cl, &req, cl->in.data + off, used,
					  cost);
		if (rc != 0) {
			snprintf(errmsg, sizeof(errmsg), "%s: %s",
				 store_wire_op_name(req.op),
				 rc == CRUN_EPROTO ? "not relayed"
						   : crun_strerror(rc));
			q->on.client_bad(q->data, cl, errmsg);
			return;
		}
		off += used;
	}
	if (off > 0) {
		memmove(cl->in.data, cl->in.data + off, cl->in.len - off);
		cl->in.len -= off;
	}
}

/* ---- The store's answers ---------------------------------------------- */

/* Encode the held requests into up_out, in order. */
void relay_req_send_held(struct relay_reqs *q)
{
	struct relay_up *u;

	while ((u = q->held_head) != NULL) {
		q->held_head = u->next;
		if (q->held_head == NULL)
			q->held_tail = NULL;
		u->next = NULL;
		q->st->requests_up++;
		if (u->kind == RK_WAIT && u->w->slots == NULL) {
			/* Its clients left before it went: nothing to send. */
			u->w->held = 0;
			relay_req_wait_free(q, u->w);
			u->w = NULL;
			relay_up_free(u);
			continue;
		}
		if (u->kind == RK_WAIT) {
			struct relay_wait *w = u->w;
			uint64_t n = 0;

			for (struct relay_slot *s = w->slots; s; s = s->onext)
				n++;
			store_buf_op(&q->up_out, STORE_GEN_G3,
				     STORE_OP_WAIT_TAG);
			store_buf_u64(&q->up_out, w->tag);
			store_buf_u64(&q->up_out, n); /* the clients joined */
			store_buf_put(&q->up_out, w->list.data, w->list.len);
			w->held = 0;
			w->sent = 1;
			w->seq = q->up_sent;
			q->undecided++;
			u->w = NULL;
			relay_up_free(u);
			continue;
		}
		if (u->op == STORE_OP_ADD) /* the joined deltas' sum */
			for (int i = 0; i < 8; i++)
				u->frame.data[1 + u->klen + i] =
				    (unsigned char)((uint64_t)u->sum >>
						    (8 * i));
		store_buf_put(&q->up_out, u->frame.data, u->frame.len);
		store_buf_release(&u->frame);
		q->up_sent++;
		if (q->sent_tail != NULL)
			q->sent_tail->next = u;
		else
			q->sent_head = u;
		q->sent_tail = u;
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
static void relay_decide(struct relay_reqs *q)
{
	struct relay_wait *w;
	struct relay_slot *s;
	struct relay_client *cl, *next;
	int any = 0;

	if (q->undecided == 0)
		return;
	for (w = q->waits; w != NULL; w = w->next) {
		if (!w->sent || w->decided || w->seq >= q->up_recv)
			continue;
		w->decided = 1;
		q->undecided--;
		for (s = w->slots; s != NULL; s = s->onext)
			s->detached = 1;
		any = 1;
	}
	/* Then drain (which may close a client, and free waits). */
	for (cl = any ? q->clients : NULL; cl != NULL; cl = next) {
		next = cl->next;
		relay_client_drain(cl);
	}
}

/* The head request's reply (p, n; err: refused) is in: answer its slots. */
static void relay_answer(struct relay_reqs *q, const unsigned char *p, size_t n,
			 int err)
{
	struct relay_up *u = q->sent_head;
	struct relay_slot *s;
	unsigned char num[8];
	int64_t v;

	q->sent_head = u->next;
	if (q->sent_head == NULL)
		q->sent_tail = NULL;
	q->up_recv++;
	relay_decide(q);
	v = u->op == STORE_OP_ADD && !err ? (int64_t)store_wire_u64(p) - u->sum
					  : 0;
	for (s = u->slots; s != NULL; s = s->onext) {
		if (s->cancel && !err) {
			struct relay_wait *w, *wn;
			struct relay_slot *t, *tn;
			unsigned char c = STORE_WAIT_CANCELED;

			/* The fence is through: drop cl's waits left. */
			for (w = q->waits; w != NULL && s->cl; w = wn) {
				wn = w->next;
				for (t = w->slots; t != NULL; t = tn) {
					tn = t->onext;
					if (t->cl != s->cl)
						continue;
					relay_req_wait_drop_slot(q, w, t);
					t->detached = 1;
					relay_req_slot_maybe_free(t);
				}
				relay_req_wait_release(q, w);
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
static void relay_tag_answer(struct relay_reqs *q, uint64_t tag, int one,
			     int failed)
{
	struct relay_wait *w;
	struct relay_slot *s, *list, *next;
	unsigned char c = STORE_STOP_WAITING;

	for (w = q->waits; w != NULL && w->tag != tag; w = w->next)
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
	/* After a QUEUE_PUSH's answer the others still wait on the store,
	 * in their place. */
	if (w->slots == NULL)
		relay_req_wait_free(q, w);
	for (s = list; s != NULL; s = next) {
		next = s->onext;
		relay_slot_fill(s, &c, 1, failed);
		s->inowner = 0;
		relay_req_slot_maybe_free(s);
	}
}

/* Consume every whole message in up_in. */
void relay_req_up_process(struct relay_reqs *q)
{
	const unsigned char *p;
	size_t off = 0, len, n;

	while (q->state == RS_READY && off < q->up_in.len) {
		p = q->up_in.data + off;
		len = q->up_in.len - off;
		if (p[0] == STORE_TAG_ANSWER || p[0] == STORE_TAG_ANSWER_ONE ||
		    p[0] == STORE_TAG_FAILED) {
			if (len < 9)
				break;
			off += 9;
			relay_tag_answer(q, store_wire_u64(p + 1),
					 p[0] == STORE_TAG_ANSWER_ONE,
					 p[0] == STORE_TAG_FAILED);
			continue;
		}
		if ((p[0] != STORE_TAG_REPLY && p[0] != STORE_TAG_ERROR) ||
		    q->sent_head == NULL) {
			q->on.up_lost(q->data, CRUN_EPROTO);
			return;
		}
		if (p[0] == STORE_TAG_ERROR) {
			off += 1;
			relay_answer(q, NULL, 0, 1);
			continue;
		}
		n = relay_reply_len(q->sent_head, p + 1, len - 1);
		if (n == 0 && q->sent_head->kind != RK_NONE &&
		    q->sent_head->kind != RK_CANCEL)
			break;
		off += 1 + n;
		relay_answer(q, p + 1, n, 0);
	}
	if (off > 0 && q->state == RS_READY) {
		memmove(q->up_in.data, q->up_in.data + off, q->up_in.len - off);
		q->up_in.len -= off;
	}
}

void relay_req_drop_all(struct relay_reqs *q)
{
	struct relay_up *u;

	while ((u = q->held_head) != NULL) {
		q->held_head = u->next;
		relay_up_free(u);
	}
	q->held_tail = NULL;
	while ((u = q->sent_head) != NULL) {
		q->sent_head = u->next;
		relay_up_free(u);
	}
	q->sent_tail = NULL;
	while (q->waits != NULL)
		relay_req_wait_free(q, q->waits);
}

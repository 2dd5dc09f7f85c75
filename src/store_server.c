/*
 * The store server: PyTorch's TCPStore semantics on a libuv loop, for both
 * wire generations at once (each connection is G0 or G3 from its first five
 * bytes, see store_wire.c). One flat map from keys to entries holds values,
 * the connections waiting on each key, libuv-style queues and G0 watchers.
 *
 * Reading: libuv reads into one shared 64 KiB buffer and requests are
 * decoded in place; only an unfinished frame is copied into the connection's
 * own buffer, which is bounded (a frame larger than 2 * max_value + max_key +
 * 64 closes the connection). A list frame arriving in pieces keeps its parse
 * position (store_wire_resume), so it is walked once, not once per read.
 *
 * Writing: replies accumulate in each connection's output buffer while one
 * read callback runs (a SET can wake thousands of waiters), and every
 * connection touched is flushed once at the end of the callback with
 * uv_try_write, the rest going through uv_write. Before a request runs, the
 * size of its reply is known (MULTI_GET and LIST_KEYS add up their values and
 * keys first): a reply larger than max_output is refused, and a connection
 * whose unsent replies would pass its share stops being read (backpressure:
 * its unparsed bytes wait in its input buffer) until the kernel has taken
 * half of them. A connection's share is max_output, but at most half of
 * max_memory divided among the connections that have unsent replies, so
 * that clients which pipeline without reading leave room for everyone
 * else's replies; a connection with nothing unsent may always take one
 * reply. Pushed output (WATCH_KEY notifications) that would pass a
 * connection's share closes that connection instead.
 *
 * Memory: srv->mem counts everything a client can make the process hold:
 * keys, values, queue items, entries, input and output buffers (by their
 * capacity, including buffers handed to uv_write), waiters and watches; none
 * grows past max_memory. A connection that holds a partial frame or unsent
 * replies while nothing moves (no byte read, no write completed) for
 * idle_timeout seconds is closed (one periodic timer looks). Every refusal
 * closes the connection and logs one line naming the peer and the limit, at
 * most STORE_LOG_BURST lines a second (the rest are counted). No path scans all
 * keys except LIST_KEYS and closing the server; the timer scans connections
 * once a second.
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
 *
 * Errors on the wire have no reply: like PyTorch's servers, a bad request
 * closes that one connection, here with a logged reason. Where PyTorch's
 * legacy and libuv servers differ, this one behaves like libuv: GET of a
 * missing key answers an empty value, and COMPARE_SET wakes the key's waiters
 * (whenever the key exists afterwards; libuv also wakes them when nothing was
 * stored, which would end a WAIT on a key that is still missing).
 */
#include <arpa/inet.h>
#include <netdb.h>
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include <uv.h>

#include "crun/auth.h"
#include "crun/err.h"
#include "crun/map.h"
#include "crun/store.h"
#include "store_fanout.h"
#include "store_wire.h"

#define STORE_RBUF_SIZE 65536
/* Lines about closed connections logged per second, at most. */
#define STORE_LOG_BURST 10
/* Period of the idle check, at most. */
#define STORE_TICK_MS 1000
/* Bytes charged per entry besides its key and value: the struct, malloc's
 * header and its share of the bucket array. */
#define STORE_ENTRY_OVERHEAD (sizeof(struct store_entry) + 32)
/* Idle buffers larger than this are freed. */
#define STORE_KEEP_BUF 16384

struct store_conn;
struct store_waiter;

/* One registration of a waiter on one key. */
struct store_reg {
	struct store_waiter *w;
	struct store_entry *e; /* NULL once woken */
	struct store_reg *prev, *next;
	int barrier; /* linked into e->bwaiters, not e->waiters */
};

/* An entry's registrations, oldest first. */
struct store_reglist {
	struct store_reg *head, *tail;
};

/* A parked WAIT (or BARRIER): answered when missing drops to zero. */
struct store_waiter {
	struct store_conn *c;
	struct store_waiter *prev, *next; /* in c->waiters */
	size_t missing;
	size_t nregs;
	size_t bytes; /* charged to srv->mem */
	/* WAIT_GET: its key list (after regs), read into the reply. */
	const unsigned char *list;
	size_t list_len;
	struct store_reg regs[];
};

/* A G0 WATCH_KEY subscription. */
struct store_watch {
	struct store_conn *c;
	struct store_entry *e;
	struct store_watch *eprev, *enext; /* in e->watches */
	struct store_watch *cnext;	   /* in c->watches */
};

/* One element of a queue. */
struct store_qitem {
	struct store_qitem *next;
	size_t len;
	unsigned char data[];
};

/* A key: its value if it has one, and whoever waits on or watches it. */
struct store_entry {
	struct map_node node;
	unsigned char *val;
	size_t vlen;
	int has_value;
	struct store_reglist waiters;
	struct store_reglist bwaiters;
	struct store_watch *watches;
	struct store_qitem *qhead, *qtail;
	size_t qlen;
	size_t klen;
	unsigned char key[];
};

/* One client connection. */
struct store_conn {
	uv_tcp_t tcp;
	struct crun_store_server *srv;
	enum store_gen gen;
	struct store_buf in;  /* an unfinished frame, or unparsed requests */
	struct store_buf out; /* replies not yet handed to the kernel */
	struct store_wire_resume rs; /* progress into the frame in `in` */
	size_t queued;		     /* bytes in pending uv_write requests */
	size_t qcap;		     /* their buffers' capacity */
	size_t charged;	  /* in.cap + out.cap + qcap, as counted in srv->mem */
	uint64_t since;	  /* uv_now of its last progress (idle check) */
	const char *doom; /* close at the next flush, for this reason */
	struct store_waiter *waiters;
	struct store_watch *watches;
	struct store_conn *prev, *next; /* srv->conns */
	struct store_conn *dirty_next;
	int dirty;
	int paused; /* not reading: too many unsent replies */
	int busy;   /* has unsent replies (counted in srv->nbusy) */
	int nobufs; /* the last read buffer was refused by max_memory */
	int closing;
	int authed;		/* passed the rendezvous secret (auth.h) */
	struct crun_auth_hs hs; /* that handshake, while it runs */
	/* The entries of this connection's last two single-key requests,
	 * valid while no entry has been freed since (hit_gen == srv->nfreed):
	 * a client's set(k), get(k) (SET, WAIT, GET of k) and add(n) hash each
	 * key once. */
	struct store_entry *hit[2];
	uint64_t hit_gen;
	struct store_conn *reap_next; /* srv->reap */
};

/* A uv_write of a connection's output that try_write could not finish. */
struct store_wreq {
	uv_write_t req;
	struct store_conn *c;
	size_t len;
	size_t cap;
	unsigned char *data; /* the output buffer, handed over whole */
};

struct crun_store_server {
	uv_loop_t *loop;
	uv_tcp_t listener;
	struct crun_store_limits lim;
	size_t max_frame; /* largest request buffered */
	struct map map;
	size_t nkeys;	 /* entries with a value */
	uint64_t nfreed; /* entries freed so far (store_conn_find) */
	size_t keybytes; /* their keys' bytes (LIST_KEYS's reply) */
	size_t mem;	 /* bytes charged against lim.max_memory */
	size_t nwaiters, nwatches;
	uv_timer_t tick;	   /* the idle check */
	uv_check_t reaper;	   /* closes srv->reap after each poll */
	struct store_conn *reap;   /* closed connections awaiting uv_close */
	uint64_t log_at;	   /* uv_now when the log window opened */
	unsigned log_lines;	   /* close lines logged in this window */
	unsigned long log_skipped; /* closes not logged since */
	struct store_conn *conns;
	size_t nconns;
	size_t nbusy; /* connections with unsent replies */
	struct store_conn *dirty;
	size_t ndirty;		     /* connections on the dirty list */
	struct store_fanout *fanout; /* its helper thread, once needed */
	unsigned nhandles; /* listener and connections not yet closed */
	int closing;
	int quiet;
	int port;
	unsigned long refused; /* connections over max_conns */
	store_close_cb close_cb;
	void *close_data;
	store_vanish_cb vanish_cb;
	void *vanish_data;
	int has_key; /* clients must prove the secret (auth.h) */
	struct crun_auth_key key;
	store_allow_cb allow; /* which peers may connect (NULL: any) */
	void *allow_data;
	unsigned long turned_away; /* connections refused by auth or allow */
	uint64_t ops[STORE_OP__COUNT]; /* requests run, by kind (metrics) */
	unsigned char rbuf[STORE_RBUF_SIZE];
};

/* The store's one log helper: "crun store: <message>" on stderr. */
static void store_log(const struct crun_store_server *srv, const char *fmt, ...)
{
	char line[512];
	va_list ap;

	if (srv != NULL && srv->quiet)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	fprintf(stderr, "crun store: %s\n", line);
}

void store_limits_default(struct crun_store_limits *lim)
{
	lim->max_key = CRUN_STORE_MAX_KEY;
	lim->max_value = CRUN_STORE_MAX_VALUE;
	lim->max_keys = CRUN_STORE_MAX_KEYS;
	lim->max_memory = CRUN_STORE_MAX_MEMORY;
	lim->max_conns = CRUN_STORE_MAX_CONNS;
	lim->max_output = CRUN_STORE_MAX_OUTPUT;
	lim->idle_timeout = CRUN_STORE_IDLE_TIMEOUT;
}

/* ---- Entries ----------------------------------------------------------- */

/* The entry for key, or NULL. */
static struct store_entry *store_find(struct crun_store_server *srv,
				      const void *key, size_t klen)
{
	struct map_node *n =
	    map_find(&srv->map, key, klen, map_hash(key, klen));

	return n != NULL ? (struct store_entry *)n : NULL;
}

/* The entry for key, created empty if needed; NULL with *err on failure. */
static struct store_entry *store_get_entry(struct crun_store_server *srv,
					   const void *key, size_t klen,
					   int *err)
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
static void store_entry_gc(struct crun_store_server *srv, struct store_entry *e)
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

/* store_find for one of c's requests, through c's cache. */
static struct store_entry *store_conn_find(struct store_conn *c,
					   const void *key, size_t klen)
{
	struct store_entry *e = store_conn_cached(c, key, klen);

	if (e == NULL && (e = store_find(c->srv, key, klen)) != NULL)
		store_conn_remember(c, e);
	return e;
}

/* store_get_entry for one of c's requests, through c's cache. */
static struct store_entry *store_conn_get_entry(struct store_conn *c,
						const void *key, size_t klen,
						int *err)
{
	struct store_entry *e = store_conn_cached(c, key, klen);

	if (e == NULL && (e = store_get_entry(c->srv, key, klen, err)) != NULL)
		store_conn_remember(c, e);
	return e;
}

/* Mark c as having output to flush at the end of this callback. */
static void store_conn_dirty(struct store_conn *c)
{
	if (c->dirty)
		return;
	c->dirty = 1;
	c->dirty_next = c->srv->dirty;
	c->srv->dirty = c;
	c->srv->ndirty++;
}

static void store_conn_account(struct store_conn *c);

/*
 * The unsent replies c may hold: max_output, but no more than its share of
 * half of max_memory among the connections that have unsent replies (c
 * included), so that clients that do not read cannot take the memory the
 * others need for theirs.
 */
static size_t store_conn_share(const struct store_conn *c)
{
	const struct crun_store_server *srv = c->srv;
	size_t share = srv->lim.max_memory / 2 / (srv->nbusy + !c->busy);

	return share < srv->lim.max_output ? share : srv->lim.max_output;
}

/*
 * Whether c may get n more bytes of output now: its unsent replies stay
 * within max_output and, unless it has none, the buffers that hold them
 * within its share (store_conn_share); the process stays within max_memory.
 */
static int store_conn_fits(const struct store_conn *c, size_t n)
{
	const struct crun_store_server *srv = c->srv;
	size_t cap = store_buf_grown_cap(&c->out, n);
	/* srv->mem counts c's buffers as of its last store_conn_account. */
	size_t mem = srv->mem - c->charged + c->in.cap + c->qcap;
	size_t pending = c->out.len + c->queued;

	return pending + n <= srv->lim.max_output && cap != SIZE_MAX &&
	       (pending == 0 || cap + c->qcap <= store_conn_share(c)) &&
	       mem + cap <= srv->lim.max_memory;
}

/* Have c closed at the next flush (not now: a list may be walking it). */
static void store_conn_doom(struct store_conn *c, const char *why)
{
	if (c->doom == NULL)
		c->doom = why;
	store_conn_dirty(c);
}

/*
 * Push a WATCH_KEY notification to every watcher of e. A watcher that would
 * pass its share (store_conn_share: it does not read) or max_memory is
 * closed instead.
 */
static void store_notify(struct store_entry *e, unsigned kind, const void *old,
			 size_t olen, const void *new, size_t nlen)
{
	struct store_watch *w;
	size_t n = 1 + 8 + e->klen + 8 + olen + 8 + nlen;

	for (w = e->watches; w != NULL; w = w->enext) {
		if (w->c->closing || w->c->doom != NULL)
			continue;
		if (!store_conn_fits(w->c, n)) {
			store_conn_doom(w->c, "watch notifications would pass "
					      "its share of max-output or "
					      "max-memory");
			continue;
		}
		store_buf_u8(&w->c->out, kind);
		store_buf_str(&w->c->out, e->key, e->klen);
		store_buf_str(&w->c->out, old, olen);
		store_buf_str(&w->c->out, new, nlen);
		store_conn_account(w->c);
		store_conn_dirty(w->c);
	}
}

/*
 * Give e the value a||b (b may be empty), charging memory. 0, CRUN_ETOOBIG
 * past max_value or max_memory, or UV_ENOMEM; e is unchanged on error.
 */
static int store_entry_set(struct crun_store_server *srv, struct store_entry *e,
			   const void *a, size_t alen, const void *b,
			   size_t blen)
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
		store_notify(
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
static void store_reply_value(struct store_conn *c, const struct store_entry *e)
{
	if (e != NULL && e->has_value)
		store_buf_str(&c->out, e->val, e->vlen);
	else
		store_buf_u64(&c->out, 0);
}

/* The size of the MULTI_GET reply to a key list, as things stand. */
static size_t store_values_size(struct crun_store_server *srv,
				const unsigned char *p, size_t len)
{
	const unsigned char *end = p + len, *k;
	const struct store_entry *e;
	size_t klen, n = 0;

	while (store_wire_next_str(&p, end, &k, &klen)) {
		e = store_find(srv, k, klen);
		n += 8 + (e != NULL ? e->vlen : 0);
	}
	return n;
}

/* Append the MULTI_GET reply to a key list. */
static void store_reply_values(struct store_conn *c, const unsigned char *p,
			       size_t len)
{
	const unsigned char *end = p + len, *k;
	size_t klen;

	while (store_wire_next_str(&p, end, &k, &klen))
		store_reply_value(c, store_find(c->srv, k, klen));
}

/* WAIT_GET's reply once its keys exist: STOP_WAITING, then the values. */
static void store_reply_wait_get(struct store_conn *c, const unsigned char *p,
				 size_t len)
{
	store_buf_u8(&c->out, STORE_STOP_WAITING);
	store_reply_values(c, p, len);
}

/*
 * Count one registration of w as satisfied; answer and free w at zero.
 * Returns 1 if w was answered (and is freed).
 */
static int store_waiter_hit(struct store_waiter *w)
{
	struct store_conn *c = w->c;

	assert(w->missing > 0);
	if (--w->missing > 0)
		return 0;
	if (!c->closing && c->doom == NULL) {
		if (w->list == NULL)
			store_buf_u8(&c->out, STORE_STOP_WAITING);
		else if (!store_conn_fits(c,
					  1 + store_values_size(c->srv, w->list,
								w->list_len)))
			store_conn_doom(c, "wait_get reply would pass its "
					   "share of max-output or max-memory");
		else
			store_reply_wait_get(c, w->list, w->list_len);
		store_conn_account(c);
		store_conn_dirty(c);
	}
	store_waiter_free(w);
	return 1;
}

/*
 * Wake the registrations of l oldest first: all of them, or (one) only until
 * a waiter is answered.
 */
static void store_wake_list(struct store_reglist *l, int one)
{
	struct store_reg *r;

	while ((r = l->head) != NULL) {
		store_reg_unlink(r);
		if (store_waiter_hit(r->w) && one)
			return;
	}
}

/* The key now exists: answer whoever waited for it. */
static void store_wake(struct store_entry *e)
{
	if (e->waiters.head != NULL)
		store_wake_list(&e->waiters, 0);
}

/* Drop every parked WAIT/BARRIER of c, without answering. */
static void store_conn_cancel_waits(struct store_conn *c)
{
	struct crun_store_server *srv = c->srv;
	struct store_entry *e;
	size_t i;

	while (c->waiters != NULL) {
		struct store_waiter *w = c->waiters;

		for (i = 0; i < w->nregs; i++) {
			e = w->regs[i].e;
			if (e == NULL)
				continue;
			store_reg_unlink(&w->regs[i]);
			store_entry_gc(srv, e);
		}
		store_waiter_free(w);
	}
}

/* Whether a WAIT/CHECK on e is satisfied (a non-empty queue counts). */
static int store_present(const struct store_entry *e)
{
	return e != NULL && (e->has_value || e->qlen > 0);
}

/*
 * Park a waiter for c with one registration per missing key of the request
 * (its one key for a barrier). The waiter is charged to srv->mem.
 */
static int store_park(struct store_conn *c, const struct store_req *req,
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
		e = store_get_entry(srv, k, klen, &err);
		if (e == NULL)
			break;
		if (!barrier && store_present(e))
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
			store_entry_gc(srv, e);
		}
		store_waiter_free(w);
	}
	return err;
}

/* ---- Requests ---------------------------------------------------------- */

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
	return store_entry_set(srv, e, p, (size_t)(num + sizeof(num) - p), NULL,
			       0);
}

/* ADD delta to the counter at e: like std::stoll on the old value. */
static int store_do_add(struct crun_store_server *srv, struct store_entry *e,
			int64_t delta, int64_t *out, char *errmsg,
			size_t errlen)
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
static int store_watch(struct store_conn *c, const struct store_req *req)
{
	struct store_entry *e;
	struct store_watch *w;
	int err = 0;

	e = store_get_entry(c->srv, req->key, req->key_len, &err);
	if (e == NULL)
		return err;
	w = NULL;
	if (c->srv->mem + sizeof(*w) > c->srv->lim.max_memory)
		err = CRUN_ETOOBIG;
	else if ((w = calloc(1, sizeof(*w))) == NULL)
		err = UV_ENOMEM;
	if (err != 0) {
		store_entry_gc(c->srv, e);
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
static void store_conn_unwatch(struct store_conn *c)
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
		store_entry_gc(c->srv, w->e);
		free(w);
		c->srv->mem -= sizeof(*w);
		c->srv->nwatches--;
	}
}

/*
 * The size of req's reply (an upper bound), known before it runs, so that
 * fan-out replies (MULTI_GET, LIST_KEYS) are counted before they are built.
 * A GET's entry is left in *hit, so that running it looks nothing up again.
 */
static size_t store_reply_size(struct store_conn *c,
			       const struct store_req *req,
			       struct store_entry **hit)
{
	struct crun_store_server *srv = c->srv;
	const struct store_entry *e;
	size_t n;

	switch (req->op) {
	case STORE_OP_GET:
		*hit = store_conn_find(c, req->key, req->key_len);
		return 8 + (*hit != NULL ? (*hit)->vlen : 0);
	case STORE_OP_COMPARE_SET:
		e = store_find(srv, req->key, req->key_len);
		n = e != NULL ? e->vlen : 0;
		n = n > req->val_len ? n : req->val_len;
		return 8 + (n > req->val2_len ? n : req->val2_len);
	case STORE_OP_MULTI_GET:
		return store_values_size(srv, req->list, req->list_len);
	case STORE_OP_WAIT_GET: /* answered now or, parked, checked then */
	case STORE_OP_WAIT_FIRST_GET:
		return 1 + store_values_size(srv, req->list, req->list_len);
	case STORE_OP_QUEUE_POP:
		e = store_find(srv, req->key, req->key_len);
		return 16 + (e != NULL && e->qhead != NULL ? e->qhead->len : 0);
	case STORE_OP_LIST_KEYS:
		return 8 + 8 * srv->nkeys + srv->keybytes;
	default:
		return 8; /* a number, a status byte, a ping's nonce, nothing */
	}
}

/* Handle one decoded request from c; a negative return closes c. */
static int store_exec(struct store_conn *c, const struct store_req *req,
		      struct store_entry *hit, char *errmsg, size_t errlen)
{
	struct crun_store_server *srv = c->srv;
	const unsigned char *p, *end, *k, *v;
	struct store_entry *e;
	struct store_qitem *q;
	size_t klen, vlen, missing;
	int64_t num;
	int err = 0;

	srv->ops[req->op]++; /* the decoder yields known kinds only */
	switch (req->op) {
	case STORE_OP_VALIDATE: /* the decoder checked the magic */
		return 0;
	case STORE_OP_PING:
		store_buf_u32(&c->out, req->u32);
		return 0;
	case STORE_OP_SET:
	case STORE_OP_APPEND:
		e = store_conn_get_entry(c, req->key, req->key_len, &err);
		if (e == NULL)
			break;
		if (req->op == STORE_OP_APPEND && e->has_value)
			err = store_entry_set(srv, e, e->val, e->vlen, req->val,
					      req->val_len);
		else
			err = store_entry_set(srv, e, req->val, req->val_len,
					      NULL, 0);
		if (err != 0) {
			store_entry_gc(srv, e);
			break;
		}
		store_wake(e);
		return 0;
	case STORE_OP_GET:
		store_reply_value(c, hit);
		return 0;
	case STORE_OP_ADD:
		e = store_conn_get_entry(c, req->key, req->key_len, &err);
		if (e == NULL)
			break;
		err = store_do_add(srv, e, req->num, &num, errmsg, errlen);
		if (err != 0) {
			store_entry_gc(srv, e);
			return err;
		}
		store_buf_u64(&c->out, (uint64_t)num);
		store_wake(e);
		return 0;
	case STORE_OP_COMPARE_SET:
		e = store_find(srv, req->key, req->key_len);
		if (!(e != NULL && e->has_value) && req->val_len > 0) {
			/* Missing key, expected not empty: PyTorch echoes it.
			 */
			store_buf_str(&c->out, req->val, req->val_len);
			return 0;
		}
		if (e == NULL || !e->has_value ||
		    (e->vlen == req->val_len &&
		     (e->vlen == 0 ||
		      memcmp(e->val, req->val, e->vlen) == 0))) {
			if (e == NULL)
				e = store_get_entry(srv, req->key, req->key_len,
						    &err);
			if (e != NULL)
				err = store_entry_set(srv, e, req->val2,
						      req->val2_len, NULL, 0);
			if (err != 0) {
				if (e != NULL)
					store_entry_gc(srv, e);
				break;
			}
		}
		store_reply_value(c, e);
		store_wake(e);
		return 0;
	case STORE_OP_CHECK:
	case STORE_OP_WAIT:
	case STORE_OP_WAIT_GET:
	case STORE_OP_WAIT_FIRST_GET:
		missing = 0;
		p = req->list;
		end = p + req->list_len;
		while (store_wire_next_str(&p, end, &k, &klen)) {
			if (!store_present(store_conn_find(c, k, klen)))
				missing++;
			if (req->op == STORE_OP_WAIT_FIRST_GET)
				break;
		}
		if (req->op == STORE_OP_CHECK) {
			store_buf_u8(&c->out,
				     missing ? STORE_NOT_READY : STORE_READY);
			return 0;
		}
		if (missing == 0 && req->op != STORE_OP_WAIT) {
			store_reply_wait_get(c, req->list, req->list_len);
			return 0;
		}
		if (missing == 0) {
			store_buf_u8(&c->out, STORE_STOP_WAITING);
			return 0;
		}
		err = store_park(c, req, missing, 0);
		break;
	case STORE_OP_GETNUMKEYS:
		store_buf_u64(&c->out, (uint64_t)srv->nkeys);
		return 0;
	case STORE_OP_DELETE_KEY:
		e = store_find(srv, req->key, req->key_len);
		if (e == NULL || !e->has_value) {
			store_buf_u64(&c->out, 0);
			return 0;
		}
		if (e->watches != NULL)
			store_notify(e, STORE_WATCH_DELETED, e->val, e->vlen,
				     NULL, 0);
		srv->mem -= e->vlen;
		srv->nkeys--;
		srv->keybytes -= e->klen;
		free(e->val);
		e->val = NULL;
		e->vlen = 0;
		e->has_value = 0;
		store_entry_gc(srv, e);
		store_buf_u64(&c->out, 1);
		return 0;
	case STORE_OP_WATCH_KEY:
		err = store_watch(c, req);
		break;
	case STORE_OP_MULTI_GET:
		store_reply_values(c, req->list, req->list_len);
		return 0;
	case STORE_OP_MULTI_SET:
		p = req->list;
		end = p + req->list_len;
		while (err == 0 && store_wire_next_str(&p, end, &k, &klen)) {
			store_wire_next_str(&p, end, &v, &vlen);
			e = store_get_entry(srv, k, klen, &err);
			if (e == NULL)
				break;
			err = store_entry_set(srv, e, v, vlen, NULL, 0);
			if (err != 0)
				store_entry_gc(srv, e);
			else
				store_wake(e);
		}
		break;
	case STORE_OP_CANCEL_WAIT:
		store_conn_cancel_waits(c);
		store_buf_u8(&c->out, STORE_WAIT_CANCELED);
		return 0;
	case STORE_OP_QUEUE_PUSH:
		e = store_get_entry(srv, req->key, req->key_len, &err);
		if (e == NULL)
			break;
		if (srv->mem + req->val_len + sizeof(*q) >
			srv->lim.max_memory ||
		    (q = malloc(sizeof(*q) + req->val_len)) == NULL) {
			err = srv->mem + req->val_len + sizeof(*q) >
				      srv->lim.max_memory
				  ? CRUN_ETOOBIG
				  : UV_ENOMEM;
			store_entry_gc(srv, e);
			break;
		}
		q->next = NULL;
		q->len = req->val_len;
		if (req->val_len > 0)
			memcpy(q->data, req->val, req->val_len);
		if (e->qtail != NULL)
			e->qtail->next = q;
		else
			e->qhead = q;
		e->qtail = q;
		e->qlen++;
		srv->mem += req->val_len + sizeof(*q);
		/* Present for one waiter: the oldest one it completes. */
		if (e->waiters.head != NULL)
			store_wake_list(&e->waiters, 1);
		return 0;
	case STORE_OP_QUEUE_POP:
		e = store_find(srv, req->key, req->key_len);
		store_buf_u64(&c->out, e != NULL ? e->qlen : 0);
		if (e == NULL || e->qlen == 0)
			return 0;
		q = e->qhead;
		e->qhead = q->next;
		if (e->qhead == NULL)
			e->qtail = NULL;
		e->qlen--;
		srv->mem -= q->len + sizeof(*q);
		store_buf_str(&c->out, q->data, q->len);
		free(q);
		store_entry_gc(srv, e);
		return 0;
	case STORE_OP_QUEUE_LEN:
		e = store_find(srv, req->key, req->key_len);
		store_buf_u64(&c->out, e != NULL ? e->qlen : 0);
		return 0;
	case STORE_OP_LIST_KEYS: {
		struct map_iter it = {0};
		struct map_node *n;

		store_buf_u64(&c->out, srv->nkeys);
		while ((n = map_next(&srv->map, &it)) != NULL)
			if (((struct store_entry *)n)->has_value)
				store_buf_str(&c->out, n->key, n->klen);
		return 0;
	}
	case STORE_OP_BARRIER:
		e = store_get_entry(srv, req->key, req->key_len, &err);
		if (e == NULL)
			break;
		err = store_do_add(srv, e, 1, &num, errmsg, errlen);
		if (err != 0) {
			store_entry_gc(srv, e);
			return err;
		}
		store_wake(e);
		if (num >= req->num) {
			store_buf_u8(&c->out, STORE_STOP_WAITING);
			if (e->bwaiters.head != NULL)
				store_wake_list(&e->bwaiters, 0);
			return 0;
		}
		err = store_park(c, req, 1, 1);
		break;
	default:
		err = CRUN_EPROTO;
		break;
	}
	if (err == CRUN_ETOOBIG)
		snprintf(errmsg, errlen,
			 "%s refused: it would pass max-memory %zu (%zu bytes "
			 "used) or max-value %zu",
			 store_wire_op_name(req->op), srv->lim.max_memory,
			 srv->mem, srv->lim.max_value);
	else if (err != 0)
		snprintf(errmsg, errlen, "%s failed: %s",
			 store_wire_op_name(req->op), crun_strerror(err));
	return err;
}

/* ---- Connections ------------------------------------------------------- */

static void store_server_maybe_free(struct crun_store_server *srv);
static void store_flush_dirty(struct crun_store_server *srv);

/* Bring srv->mem and srv->nbusy up to date with what c holds now. */
static void store_conn_account(struct store_conn *c)
{
	size_t now = c->in.cap + c->out.cap + c->qcap;
	int busy = !c->closing && c->out.len + c->queued > 0;

	c->srv->mem = c->srv->mem - c->charged + now;
	c->charged = now;
	c->srv->nbusy = c->srv->nbusy - (size_t)c->busy + (size_t)busy;
	c->busy = busy;
}

/* Free c once its handle is closed (its writes have been cancelled). */
static void store_on_conn_close(uv_handle_t *h)
{
	struct store_conn *c = h->data;
	struct crun_store_server *srv = c->srv;

	store_buf_release(&c->in);
	store_buf_release(&c->out);
	store_conn_account(c);
	free(c);
	srv->nhandles--;
	store_server_maybe_free(srv);
}

/* Tell the owner which keys a vanishing client was still waiting on. */
static void store_conn_report_vanished(struct store_conn *c)
{
	struct crun_store_server *srv = c->srv;
	struct store_waiter *w;

	for (w = c->waiters; w != NULL; w = w->next)
		for (size_t i = 0; i < w->nregs; i++)
			if (w->regs[i].e != NULL)
				srv->vanish_cb(srv->vanish_data,
					       (const char *)w->regs[i].e->key,
					       w->regs[i].e->klen);
}

/* c's peer address as text ("?" if unknown). */
static void store_conn_peer(struct store_conn *c, char *addr, size_t len)
{
	struct sockaddr_storage ss;
	int sl = sizeof(ss);

	snprintf(addr, len, "?");
	if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &sl) != 0)
		return;
	if (ss.ss_family == AF_INET6)
		uv_ip6_name((struct sockaddr_in6 *)&ss, addr, len);
	else
		uv_ip4_name((struct sockaddr_in *)&ss, addr, len);
	/* An IPv4 peer of a dual-stack socket reads better without ::ffff:. */
	if (strncmp(addr, "::ffff:", 7) == 0 && strchr(addr + 7, '.') != NULL)
		memmove(addr, addr + 7, strlen(addr + 7) + 1);
}

/*
 * Close c, logging why unless reason is NULL. At most STORE_LOG_BURST lines
 * a second are logged (a flood of hostile connections must not flood the
 * log); the next line logged says how many were not.
 */
/* Close the handles of the connections closed since the last poll. */
static void store_reap(struct crun_store_server *srv)
{
	struct store_conn *c;

	while ((c = srv->reap) != NULL) {
		srv->reap = c->reap_next;
		uv_close((uv_handle_t *)&c->tcp, store_on_conn_close);
	}
}

static void store_on_listener_close(uv_handle_t *h);

static void store_on_reap(uv_check_t *h)
{
	struct crun_store_server *srv = h->data;

	store_reap(srv);
	uv_check_stop(h);
	if (srv->closing)
		uv_close((uv_handle_t *)h, store_on_listener_close);
}

static void store_conn_close(struct store_conn *c, const char *reason)
{
	struct crun_store_server *srv = c->srv;
	char addr[INET6_ADDRSTRLEN];
	uint64_t now;

	if (c->closing)
		return;
	c->closing = 1;
	store_conn_account(c); /* no longer busy */
	if (reason != NULL && !srv->quiet) {
		now = uv_now(srv->loop);
		if (srv->log_at == 0 || now - srv->log_at >= 1000) {
			srv->log_at = now != 0 ? now : 1;
			srv->log_lines = 0;
		}
		if (srv->log_lines < STORE_LOG_BURST) {
			store_conn_peer(c, addr, sizeof(addr));
			if (srv->log_skipped > 0)
				store_log(srv,
					  "closing connection from %s: %s "
					  "(and %lu more not logged)",
					  addr, reason, srv->log_skipped);
			else
				store_log(srv, "closing connection from %s: %s",
					  addr, reason);
			srv->log_lines++;
			srv->log_skipped = 0;
		} else {
			srv->log_skipped++;
		}
	}
	if (srv->vanish_cb != NULL && !srv->closing)
		store_conn_report_vanished(c);
	store_conn_cancel_waits(c);
	store_conn_unwatch(c);
	uv_read_stop((uv_stream_t *)&c->tcp);
	if (c->prev != NULL)
		c->prev->next = c->next;
	else
		srv->conns = c->next;
	if (c->next != NULL)
		c->next->prev = c->prev;
	srv->nconns--;
	/* The handle itself is closed after this poll (store_on_reap):
	 * libuv's uv_close in the middle of a poll walks that poll's whole
	 * event array, which made a mass disconnect quadratic. */
	c->reap_next = srv->reap;
	srv->reap = c;
	uv_check_start(&srv->reaper, store_on_reap);
}

/* Stop reading c until its replies drain (see store_conn_resume). */
static void store_conn_pause(struct store_conn *c)
{
	if (c->paused)
		return;
	c->paused = 1;
	uv_read_stop((uv_stream_t *)&c->tcp);
}

/*
 * Whether req may run on c now. No if its reply alone passes max_output or
 * max_memory (c is closed), or if c must first drain what it has (c is
 * paused: the request stays in its input).
 */
static int store_conn_room(struct store_conn *c, const struct store_req *req,
			   struct store_entry **hit)
{
	struct crun_store_server *srv = c->srv;
	size_t r = store_reply_size(c, req, hit);
	size_t pending = c->out.len + c->queued;
	char msg[200];

	if (store_conn_fits(c, r))
		return 1;
	if (pending > 0) {
		store_conn_pause(c);
		return 0;
	}
	if (r > srv->lim.max_output)
		snprintf(msg, sizeof(msg),
			 "%s reply of %zu bytes exceeds max-output %zu",
			 store_wire_op_name(req->op), r, srv->lim.max_output);
	else
		snprintf(msg, sizeof(msg),
			 "%s reply of %zu bytes would pass max-memory %zu "
			 "(%zu bytes used)",
			 store_wire_op_name(req->op), r, srv->lim.max_memory,
			 srv->mem);
	store_conn_close(c, msg);
	return 0;
}

static int store_conn_gate(struct store_conn *c, const struct store_req *req,
			   char *errmsg, size_t errlen);

/*
 * Decode and run requests in buf[0..len) while c has room for their
 * replies; returns the bytes consumed.
 */
static size_t store_conn_parse(struct store_conn *c, const unsigned char *buf,
			       size_t len)
{
	struct store_req req;
	char errmsg[256];
	size_t off = 0, used;
	int rc;

	while (!c->closing && !c->paused && c->doom == NULL && off < len) {
		struct store_entry *hit = NULL;

		errmsg[0] = '\0';
		rc = store_wire_decode(buf + off, len - off, &c->gen,
				       &c->srv->lim, &c->rs, &req, &used,
				       errmsg, sizeof(errmsg));
		if (rc == STORE_WIRE_NEED_MORE)
			break;
		if (rc < 0) {
			store_conn_close(c, errmsg);
			break;
		}
		/* Per-request gates (room for the reply; an auth check
		 * before a connection's first command) sit here, before
		 * anything runs. */
		if (!store_conn_room(c, &req, &hit))
			break;
		/* With a secret, nothing runs before the client proves it. */
		rc = store_conn_gate(c, &req, errmsg, sizeof(errmsg));
		if (rc == 0)
			rc = store_exec(c, &req, hit, errmsg, sizeof(errmsg));
		store_conn_account(c);
		if (rc < 0) {
			store_conn_close(c, rc == CRUN_EAUTH ? NULL : errmsg);
			break;
		}
		off += used;
	}
	if (off > 0)
		c->since = uv_now(c->srv->loop);
	if (!c->closing && c->out.len > 0)
		store_conn_dirty(c);
	return off;
}

/* Drop the first used bytes of c's input buffer. */
static void store_conn_consume(struct store_conn *c, size_t used)
{
	if (used > 0) {
		memmove(c->in.data, c->in.data + used, c->in.len - used);
		c->in.len -= used;
	}
	if (c->in.len == 0 && c->in.cap > STORE_KEEP_BUF)
		store_buf_release(&c->in);
}

static void store_on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf);
static void store_on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);

/*
 * c's replies have drained (their buffers to half of its share): run the
 * requests waiting
 * in its input, and read again unless that paused it anew.
 */
static void store_conn_resume(struct store_conn *c)
{
	size_t used;

	if (!c->paused || c->closing ||
	    (c->out.len + c->queued > 0 &&
	     c->out.cap + c->qcap > store_conn_share(c) / 2))
		return;
	c->paused = 0;
	used = store_conn_parse(c, c->in.data, c->in.len);
	store_conn_consume(c, used);
	store_conn_account(c);
	if (!c->closing && !c->paused &&
	    uv_read_start((uv_stream_t *)&c->tcp, store_on_alloc,
			  store_on_read) != 0)
		store_conn_close(c, "cannot read from connection");
}

/* A queued write finished: free it; close c on error, else maybe resume. */
static void store_on_write(uv_write_t *req, int status)
{
	struct store_wreq *w = (struct store_wreq *)req;
	struct store_conn *c = w->c;
	struct crun_store_server *srv = c->srv;

	c->queued -= w->len;
	c->qcap -= w->cap;
	free(w->data);
	free(w);
	store_conn_account(c);
	if (c->closing)
		return;
	if (status < 0) {
		store_conn_close(c, NULL);
		return;
	}
	c->since = uv_now(srv->loop);
	store_conn_resume(c);
	store_flush_dirty(srv);
}

/*
 * Hand c's output to the kernel: try_write, then uv_write for the rest.
 * Lengths stay size_t throughout; a buffer is split into pieces below 4 GiB.
 */
static void store_conn_flush(struct store_conn *c)
{
	uv_buf_t small[4], *bufs = small;
	struct store_wreq *w;
	size_t nb, off = 0;
	int n;

	if (c->closing)
		return;
	if (c->doom != NULL) {
		store_conn_close(c, c->doom);
		return;
	}
	if (c->out.len == 0)
		goto done;
	if (c->out.oom) {
		store_conn_close(c, "out of memory for replies");
		return;
	}
	nb = store_wire_npieces(c->out.len);
	if (nb > 4 && (bufs = malloc(nb * sizeof(*bufs))) == NULL) {
		store_conn_close(c, "out of memory for replies");
		return;
	}
	if (c->queued == 0) {
		store_wire_slices(bufs, nb, c->out.data, c->out.len);
		n = uv_try_write((uv_stream_t *)&c->tcp, bufs, (unsigned)nb);
		if (n < 0 && n != UV_EAGAIN) {
			if (bufs != small)
				free(bufs);
			store_conn_close(c, NULL);
			return;
		}
		off = n > 0 ? (size_t)n : 0;
		if (off == c->out.len) {
			if (bufs != small)
				free(bufs);
			c->out.len = 0;
			if (c->out.cap > STORE_KEEP_BUF)
				store_buf_release(&c->out);
			c->since = uv_now(c->srv->loop);
			goto done;
		}
		nb = store_wire_npieces(c->out.len - off);
	}
	w = malloc(sizeof(*w));
	if (w == NULL) {
		if (bufs != small)
			free(bufs);
		store_conn_close(c, "out of memory for replies");
		return;
	}
	w->c = c;
	w->len = c->out.len - off;
	w->cap = c->out.cap;
	w->data = c->out.data;
	store_buf_init(&c->out);
	store_wire_slices(bufs, nb, w->data + off, w->len);
	n = uv_write(&w->req, (uv_stream_t *)&c->tcp, bufs, (unsigned)nb,
		     store_on_write);
	if (bufs != small)
		free(bufs);
	if (n != 0) {
		free(w->data);
		free(w);
		store_conn_account(c);
		store_conn_close(c, NULL);
		return;
	}
	c->queued += w->len;
	c->qcap += w->cap;
done:
	store_conn_account(c);
	store_conn_resume(c);
}

/* n bytes of c's output went out (store_fanout): drop them from it. */
static void store_conn_sent(struct store_conn *c, size_t n)
{
	memmove(c->out.data, c->out.data + n, c->out.len - n);
	c->out.len -= n;
	c->since = uv_now(c->srv->loop);
	if (c->out.len == 0 && c->out.cap > STORE_KEEP_BUF)
		store_buf_release(&c->out);
}

/*
 * Flush every connection that got output during this callback. Many at
 * once (a key thousands wait on was set): the first sends of those with
 * nothing queued are spread over two threads (store_fanout.c). Nothing
 * runs a callback until every one of those sends is done and taken off
 * its connection's output, so a close (and whatever its callbacks do to
 * other connections) only ever sees consistent buffers.
 */
static void store_flush_dirty(struct crun_store_server *srv)
{
	struct store_fan_item *it = NULL;
	struct store_conn *c, *rest = NULL;
	size_t n = 0, cap = srv->ndirty;
	uv_os_fd_t fd;

	if (cap >= STORE_FANOUT_MIN && (it = malloc(cap * sizeof(*it)))) {
		while ((c = srv->dirty) != NULL && n < cap) {
			srv->dirty = c->dirty_next;
			if (!c->closing && c->doom == NULL && !c->out.oom &&
			    c->out.len > 0 && c->queued == 0 &&
			    c->out.len <= STORE_WIRE_PIECE &&
			    uv_fileno((uv_handle_t *)&c->tcp, &fd) == 0) {
				c->dirty = 0;
				it[n++] =
				    (struct store_fan_item){.conn = c,
							    .fd = fd,
							    .data = c->out.data,
							    .len = c->out.len};
			} else {
				c->dirty_next = rest;
				rest = c;
			}
		}
		while ((c = rest) != NULL) {
			rest = c->dirty_next;
			c->dirty_next = srv->dirty;
			srv->dirty = c;
		}
		store_fanout_send(&srv->fanout, it, n);
		for (size_t i = 0; i < n; i++)
			if (it[i].rc > 0)
				store_conn_sent(it[i].conn, (size_t)it[i].rc);
		for (size_t i = 0; i < n; i++) {
			c = it[i].conn;
			if (it[i].rc < 0 && it[i].rc != UV_EAGAIN)
				store_conn_close(c, NULL);
			else
				store_conn_flush(c);
		}
		free(it);
	}
	while ((c = srv->dirty) != NULL) {
		srv->dirty = c->dirty_next;
		c->dirty = 0;
		store_conn_flush(c);
	}
	srv->ndirty = 0;
}

static int store_conn_auth(struct store_conn *c, const struct store_req *req,
			   char *errmsg, size_t errlen);

/*
 * One line naming a peer turned away by the secret or the allowed
 * addresses, even from a quiet store: the first 20, then every 1000th.
 */
static void store_log_refusal(struct store_conn *c, const char *why)
{
	char addr[INET6_ADDRSTRLEN];
	unsigned long n = c->srv->turned_away++;

	if (n >= 20 && n % 1000 != 0)
		return;
	store_conn_peer(c, addr, sizeof(addr));
	store_log(NULL, "refusing connection from %s: %s (%lu so far)", addr,
		  why, n + 1);
}

/*
 * The gate before a request is dispatched (auth.h): with a secret, only
 * VALIDATE and the AUTH exchange pass until the client has proved it.
 * Returns 0 to dispatch req, 1 if handled here, or CRUN_EAUTH (logged
 * here) to close c.
 */
static int store_conn_gate(struct store_conn *c, const struct store_req *req,
			   char *errmsg, size_t errlen)
{
	int rc = store_conn_auth(c, req, errmsg, errlen);

	if (rc < 0)
		store_log_refusal(c, errmsg);
	return rc;
}

static int store_conn_auth(struct store_conn *c, const struct store_req *req,
			   char *errmsg, size_t errlen)
{
	struct crun_store_server *srv = c->srv;
	unsigned char out[CRUN_AUTH_CHALLENGE_LEN];

	if (req->op != STORE_OP_AUTH) {
		if (!srv->has_key || c->authed || req->op == STORE_OP_VALIDATE)
			return 0;
		if (req->op == STORE_OP_PING) { /* best effort, see auth.h */
			unsigned char m[4] = {CRUN_AUTH_NEEDED & 0xff,
					      (CRUN_AUTH_NEEDED >> 8) & 0xff,
					      (CRUN_AUTH_NEEDED >> 16) & 0xff,
					      CRUN_AUTH_NEEDED >> 24};
			uv_buf_t b = uv_buf_init((char *)m, sizeof(m));

			uv_try_write((uv_stream_t *)&c->tcp, &b, 1);
		}
		snprintf(errmsg, errlen,
			 "%s before authentication: refused (this store needs "
			 "the rendezvous secret)",
			 store_wire_op_name(req->op));
		return CRUN_EAUTH;
	}
	if (!srv->has_key) {
		snprintf(errmsg, errlen,
			 "client offers the rendezvous secret, but this store "
			 "has none");
		return CRUN_EAUTH;
	}
	if (c->hs.step == 0 &&
	    auth_server_challenge(&srv->key, &c->hs, req->val, req->val_len,
				  out) == 0) {
		store_buf_put(&c->out, out, sizeof(out));
		return 1;
	}
	if (c->hs.step == 1 &&
	    auth_server_check(&srv->key, &c->hs, req->val, req->val_len) == 0) {
		c->authed = 1;
		return 1;
	}
	snprintf(errmsg, errlen,
		 "authentication failed: the client does not know the "
		 "rendezvous secret");
	return CRUN_EAUTH;
}

void store_server_set_auth(struct crun_store_server *srv,
			   const struct crun_auth_key *key)
{
	srv->has_key = key != NULL;
	if (key != NULL)
		srv->key = *key;
}

void store_server_set_allow(struct crun_store_server *srv, store_allow_cb cb,
			    void *data)
{
	srv->allow = cb;
	srv->allow_data = data;
}

/*
 * libuv wants a buffer: the shared one, or the tail of c's partial frame
 * (none if growing it would pass max_memory: the read then fails ENOBUFS).
 */
static void store_on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
	struct store_conn *c = h->data;
	struct crun_store_server *srv = c->srv;
	size_t cap, room;

	if (c->in.len == 0) {
		*buf = uv_buf_init((char *)srv->rbuf, STORE_RBUF_SIZE);
		return;
	}
	cap = store_buf_grown_cap(&c->in, STORE_RBUF_SIZE);
	if (cap == SIZE_MAX ||
	    srv->mem + (cap - c->in.cap) > srv->lim.max_memory ||
	    store_buf_reserve(&c->in, STORE_RBUF_SIZE) != 0) {
		c->nobufs = cap == SIZE_MAX || !c->in.oom;
		*buf = uv_buf_init(NULL, 0);
		return;
	}
	store_conn_account(c);
	room = c->in.cap - c->in.len;
	*buf = uv_buf_init(
	    (char *)c->in.data + c->in.len,
	    (unsigned int)(room < STORE_WIRE_PIECE ? room : STORE_WIRE_PIECE));
}

/* Keep the unparsed tail rest[0..n) of a shared-buffer read in c->in. */
static void store_conn_keep(struct store_conn *c, const unsigned char *rest,
			    size_t n)
{
	struct crun_store_server *srv = c->srv;
	char msg[160];
	size_t cap = store_buf_grown_cap(&c->in, n);

	if (cap == SIZE_MAX ||
	    srv->mem + (cap - c->in.cap) > srv->lim.max_memory) {
		snprintf(msg, sizeof(msg),
			 "a partial request would pass max-memory %zu (%zu "
			 "bytes used)",
			 srv->lim.max_memory, srv->mem);
		store_conn_close(c, msg);
		return;
	}
	store_buf_put(&c->in, rest, n);
	store_conn_account(c);
}

/* Bytes arrived on c: parse whole frames, keep the rest, flush replies. */
static void store_on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
	struct store_conn *c = s->data;
	struct crun_store_server *srv = c->srv;
	char msg[160];
	size_t used;

	if (nread == UV_ENOBUFS) {
		if (c->nobufs)
			snprintf(msg, sizeof(msg),
				 "a partial request would pass max-memory %zu "
				 "(%zu bytes used)",
				 srv->lim.max_memory, srv->mem);
		else
			snprintf(msg, sizeof(msg),
				 "out of memory for a request");
		store_conn_close(c, msg);
		store_flush_dirty(srv);
		return;
	}
	if (nread < 0) {
		if (srv->has_key && !c->authed && c->hs.step == 1)
			store_log_refusal(c, "left during authentication "
					     "(it does not know the secret)");
		store_conn_close(c,
				 NULL); /* EOF or reset: clients just leave */
		store_flush_dirty(srv);
		return;
	}
	if (nread == 0)
		return;
	c->since = uv_now(srv->loop); /* bytes in: not stalled */
	if (buf->base == (char *)srv->rbuf) {
		used = store_conn_parse(c, srv->rbuf, (size_t)nread);
		if (!c->closing && used < (size_t)nread)
			store_conn_keep(c, srv->rbuf + used,
					(size_t)nread - used);
	} else {
		c->in.len += (size_t)nread;
		used = store_conn_parse(c, c->in.data, c->in.len);
		store_conn_consume(c, used);
		store_conn_account(c);
	}
	if (!c->closing && c->in.oom)
		store_conn_close(c, "out of memory for a request");
	if (!c->closing && !c->paused && c->in.len > srv->max_frame) {
		snprintf(msg, sizeof(msg),
			 "request larger than %zu bytes (2 * max-value + "
			 "max-key-size + 64)",
			 srv->max_frame);
		store_conn_close(c, msg);
	}
	store_flush_dirty(srv);
}

/*
 * The idle check: close connections that have held a partial frame or
 * unsent replies for idle_timeout seconds without progress (no byte read,
 * no write completed): a stalled peer, or one that does not read. Parked
 * WAITs and watches alone are not idleness.
 */
static void store_on_tick(uv_timer_t *t)
{
	struct crun_store_server *srv = t->data;
	uint64_t now = uv_now(srv->loop);
	uint64_t limit = (uint64_t)srv->lim.idle_timeout * 1000;
	struct store_conn *c, *next;
	char msg[128];

	for (c = srv->conns; c != NULL; c = next) {
		/* With a secret, a silent connection that never proved it
		 * would otherwise hold a connection slot for ever. */
		int unproven = srv->has_key && !c->authed;

		next = c->next;
		if (!unproven && c->in.len == 0 && c->out.len == 0 &&
		    c->queued == 0)
			continue;
		if (now - c->since < limit)
			continue;
		if (unproven)
			snprintf(msg, sizeof(msg),
				 "not authenticated within idle-timeout %zu s",
				 srv->lim.idle_timeout);
		else
			snprintf(msg, sizeof(msg),
				 "no progress for idle-timeout %zu s with %s "
				 "pending",
				 srv->lim.idle_timeout,
				 c->in.len > 0 && !c->paused
				     ? "a partial request"
				     : "unsent replies");
		store_conn_close(c, msg);
	}
	store_flush_dirty(srv);
}

/* A client connected: accept it (or turn it away past max_conns). */
static void store_on_connection(uv_stream_t *ls, int status)
{
	struct crun_store_server *srv = ls->data;
	struct store_conn *c;
	int rc;

	if (status < 0) {
		store_log(srv, "accept failed: %s", uv_strerror(status));
		return;
	}
	c = calloc(1, sizeof(*c));
	if (c == NULL)
		return;
	c->srv = srv;
	c->since = uv_now(srv->loop);
	store_buf_init(&c->in);
	store_buf_init(&c->out);
	uv_tcp_init(srv->loop, &c->tcp);
	c->tcp.data = c;
	srv->nhandles++;
	/* Link first so that store_conn_close can unlink on any path. */
	c->next = srv->conns;
	if (srv->conns != NULL)
		srv->conns->prev = c;
	srv->conns = c;
	srv->nconns++;
	rc = uv_accept(ls, (uv_stream_t *)&c->tcp);
	if (rc != 0) {
		store_log(srv, "accept failed: %s", uv_strerror(rc));
		store_conn_close(c, NULL);
		return;
	}
	/* Accept-time checks (max_conns, an address filter) close c here. */
	if (srv->nconns > srv->lim.max_conns) {
		if (srv->refused++ % 1000 == 0)
			store_log(srv,
				  "refusing connections beyond max-conns %zu "
				  "(%lu so far)",
				  srv->lim.max_conns, srv->refused);
		store_conn_close(c, NULL);
		return;
	}
	if (srv->allow != NULL) {
		struct sockaddr_storage ss;
		int n = sizeof(ss);

		if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &n) !=
			0 ||
		    !srv->allow(srv->allow_data,
				(const struct sockaddr *)&ss)) {
			store_log_refusal(c, "not a node of this round");
			store_conn_close(c, NULL);
			return;
		}
	}
	uv_tcp_nodelay(&c->tcp, 1);
	rc = uv_read_start((uv_stream_t *)&c->tcp, store_on_alloc,
			   store_on_read);
	if (rc != 0)
		store_conn_close(c, "cannot read from connection");
}

/* ---- Server lifecycle -------------------------------------------------- */

/* somaxconn, the largest backlog the kernel grants. */
static int store_backlog(void)
{
	FILE *f = fopen("/proc/sys/net/core/somaxconn", "r");
	int n = 0;

	if (f != NULL) {
		if (fscanf(f, "%d", &n) != 1)
			n = 0;
		fclose(f);
	}
	return n > 0 ? n : 4096;
}

/* Raise RLIMIT_NOFILE's soft limit to the hard one (thousands of clients). */
static void store_raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &rl);
	}
}

/* Allocate a server with its listener initialised but not bound. */
static struct crun_store_server *
store_server_alloc(uv_loop_t *loop, const struct crun_store_limits *lim)
{
	struct crun_store_server *srv = calloc(1, sizeof(*srv));

	if (srv == NULL)
		return NULL;
	srv->loop = loop;
	if (lim != NULL)
		srv->lim = *lim;
	else
		store_limits_default(&srv->lim);
	srv->max_frame = 2 * srv->lim.max_value + srv->lim.max_key + 64;
	map_init(&srv->map);
	uv_tcp_init(loop, &srv->listener);
	srv->listener.data = srv;
	uv_timer_init(loop, &srv->tick);
	srv->tick.data = srv;
	uv_check_init(loop, &srv->reaper);
	srv->reaper.data = srv;
	srv->nhandles = 3;
	store_raise_nofile();
	return srv;
}

/* Start listening and record the port; 0 or an error. */
static int store_server_listen(struct crun_store_server *srv)
{
	struct sockaddr_storage ss;
	int len = sizeof(ss), rc;

	rc = uv_listen((uv_stream_t *)&srv->listener, store_backlog(),
		       store_on_connection);
	if (rc != 0)
		return rc;
	if (srv->lim.idle_timeout > 0) {
		uint64_t ms = (uint64_t)srv->lim.idle_timeout * 1000 / 2;

		ms = ms < STORE_TICK_MS ? ms : STORE_TICK_MS;
		uv_timer_start(&srv->tick, store_on_tick, ms, ms);
		uv_unref((uv_handle_t *)&srv->tick); /* never keeps a loop up */
	}
	rc = uv_tcp_getsockname(&srv->listener, (struct sockaddr *)&ss, &len);
	if (rc != 0)
		return rc;
	srv->port = ntohs(ss.ss_family == AF_INET6
			      ? ((struct sockaddr_in6 *)&ss)->sin6_port
			      : ((struct sockaddr_in *)&ss)->sin_port);
	return 0;
}

/* Close callback of a server that failed to start: free it after both. */
static void store_on_failed_close(uv_handle_t *h)
{
	struct crun_store_server *srv = h->data;

	if (--srv->nhandles == 0)
		free(srv);
}

/* Close the listener and timer of a server that failed to start. */
static void store_server_abandon(struct crun_store_server *srv)
{
	uv_close((uv_handle_t *)&srv->listener, store_on_failed_close);
	uv_close((uv_handle_t *)&srv->tick, store_on_failed_close);
	uv_close((uv_handle_t *)&srv->reaper, store_on_failed_close);
}

/* Bind the listener to host:port (see store_server_new). */
static int store_server_bind(struct crun_store_server *srv, const char *host,
			     int port)
{
	struct sockaddr_storage ss;
	struct addrinfo hints, *ai = NULL;
	char pstr[16];
	int rc;

	if (host == NULL || host[0] == '\0' || strcmp(host, "::") == 0 ||
	    strcmp(host, "0.0.0.0") == 0 || strcmp(host, "*") == 0) {
		uv_ip6_addr("::", port, (struct sockaddr_in6 *)&ss);
		rc = uv_tcp_bind(&srv->listener, (struct sockaddr *)&ss, 0);
		if (rc == UV_EAFNOSUPPORT || rc == UV_EADDRNOTAVAIL) {
			uv_ip4_addr("0.0.0.0", port, (struct sockaddr_in *)&ss);
			rc = uv_tcp_bind(&srv->listener, (struct sockaddr *)&ss,
					 0);
		}
		return rc;
	}
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE;
	snprintf(pstr, sizeof(pstr), "%d", port);
	rc = getaddrinfo(host, pstr, &hints, &ai);
	if (rc != 0)
		return rc == EAI_SYSTEM ? -errno : UV_EAI_NONAME;
	rc = uv_tcp_bind(&srv->listener, ai->ai_addr, 0);
	freeaddrinfo(ai);
	return rc;
}

int store_server_new(uv_loop_t *loop, const char *host, int port,
		     const struct crun_store_limits *lim,
		     struct crun_store_server **out)
{
	struct crun_store_server *srv;
	int rc;

	if (port < 0 || port > 65535)
		return UV_EINVAL;
	srv = store_server_alloc(loop, lim);
	if (srv == NULL)
		return UV_ENOMEM;
	rc = store_server_bind(srv, host, port);
	if (rc == 0)
		rc = store_server_listen(srv);
	if (rc != 0)
		goto fail;
	*out = srv;
	return 0;
fail:
	store_server_abandon(srv);
	return rc;
}

int store_server_new_fd(uv_loop_t *loop, int fd,
			const struct crun_store_limits *lim,
			struct crun_store_server **out)
{
	struct crun_store_server *srv;
	int fd2, rc;

	/* Work on a duplicate so that the caller keeps fd if anything fails. */
	fd2 = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (fd2 < 0)
		return -errno;
	srv = store_server_alloc(loop, lim);
	if (srv == NULL) {
		close(fd2);
		return UV_ENOMEM;
	}
	rc = uv_tcp_open(&srv->listener, fd2);
	if (rc != 0) {
		close(fd2);
		goto fail;
	}
	rc = store_server_listen(srv);
	if (rc != 0)
		goto fail; /* the handle owns fd2 and closes it */
	close(fd);
	*out = srv;
	return 0;
fail:
	store_server_abandon(srv);
	return rc;
}

int store_server_port(const struct crun_store_server *srv)
{
	return srv->port;
}

void store_server_set_quiet(struct crun_store_server *srv, int quiet)
{
	srv->quiet = quiet;
}

void store_server_on_vanish(struct crun_store_server *srv, store_vanish_cb cb,
			    void *data)
{
	srv->vanish_cb = cb;
	srv->vanish_data = data;
}

size_t store_server_nconns(const struct crun_store_server *srv)
{
	return srv->nconns;
}

size_t store_server_peers(const struct crun_store_server *srv,
			  struct sockaddr_storage *out, size_t max)
{
	const struct store_conn *c;
	size_t n = 0;

	for (c = srv->conns; c != NULL && n < max; c = c->next) {
		int len = (int)sizeof(*out);

		if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&out[n],
				       &len) == 0)
			n++;
	}
	return n;
}

void store_server_stats(const struct crun_store_server *srv,
			struct crun_store_stats *st)
{
	const struct store_conn *c;

	memset(st, 0, sizeof(*st));
	st->conns = srv->nconns;
	st->waiters = srv->nwaiters;
	st->watches = srv->nwatches;
	st->memory = srv->mem;
	st->keys = srv->nkeys;
	for (c = srv->conns; c != NULL; c = c->next)
		st->paused += c->paused != 0;
}

uint64_t store_server_ops(const struct crun_store_server *srv, int i,
			  const char **name)
{
	if (i < 0 || i >= STORE_OP__COUNT) {
		*name = NULL;
		return 0;
	}
	*name = store_wire_op_name((enum store_op)i);
	return srv->ops[i];
}

/* Free every entry and the map. */
static void store_free_entries(struct crun_store_server *srv)
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

/* Free srv and call its close callback once every handle is closed. */
static void store_server_maybe_free(struct crun_store_server *srv)
{
	store_close_cb cb;
	void *data;

	if (!srv->closing || srv->nhandles > 0)
		return;
	cb = srv->close_cb;
	data = srv->close_data;
	store_free_entries(srv);
	store_fanout_free(srv->fanout);
	free(srv);
	if (cb != NULL)
		cb(data);
}

/* The listener, the timer or the reaper is closed. */
static void store_on_listener_close(uv_handle_t *h)
{
	struct crun_store_server *srv = h->data;

	srv->nhandles--;
	store_server_maybe_free(srv);
}

void store_server_close(struct crun_store_server *srv, store_close_cb cb,
			void *data)
{
	assert(!srv->closing);
	srv->closing = 1;
	srv->close_cb = cb;
	srv->close_data = data;
	while (srv->conns != NULL)
		store_conn_close(srv->conns, NULL);
	srv->dirty = NULL;
	srv->ndirty = 0;
	uv_close((uv_handle_t *)&srv->listener, store_on_listener_close);
	uv_close((uv_handle_t *)&srv->tick, store_on_listener_close);
	/* The reaper closes itself after the connections (store_on_reap). */
	if (srv->reap == NULL)
		uv_close((uv_handle_t *)&srv->reaper, store_on_listener_close);
}

/* ---- In-process access ------------------------------------------------- */

int store_server_set(struct crun_store_server *srv, const char *key,
		     const void *val, size_t len)
{
	struct store_entry *e;
	int err = 0;

	e = store_get_entry(srv, key, strlen(key), &err);
	if (e == NULL)
		return err;
	err = store_entry_set(srv, e, val, len, NULL, 0);
	if (err != 0) {
		store_entry_gc(srv, e);
		return err;
	}
	store_wake(e);
	store_flush_dirty(srv);
	return 0;
}

int store_server_get(struct crun_store_server *srv, const char *key,
		     const void **val, size_t *len)
{
	struct store_entry *e = store_find(srv, key, strlen(key));

	if (e == NULL || !e->has_value)
		return CRUN_ENOTFOUND;
	*val = e->val != NULL ? (const void *)e->val : (const void *)"";
	*len = e->vlen;
	return 0;
}

int store_server_add(struct crun_store_server *srv, const char *key,
		     int64_t delta, int64_t *result)
{
	struct store_entry *e;
	char errmsg[128];
	int64_t v;
	int err = 0;

	e = store_get_entry(srv, key, strlen(key), &err);
	if (e == NULL)
		return err;
	err = store_do_add(srv, e, delta, &v, errmsg, sizeof(errmsg));
	if (err != 0) {
		store_entry_gc(srv, e);
		return err;
	}
	store_wake(e);
	store_flush_dirty(srv);
	if (result != NULL)
		*result = v;
	return 0;
}

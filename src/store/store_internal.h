/*
 * The store server's private header, shared by its files (libuv's
 * internal.h): the server, its connections and its keyspace, and the
 * store__ helpers each file offers the files above it. Private to libcrun.
 *
 * From the top down (each calls only the files below it; what happens
 * below is told up through this struct's handle_closed):
 *
 *   store_server.c  the owner: the server's life cycle (listen, close),
 *                   accessors, in-process access
 *   store_conn.c    connections: accept, auth and allow, reading into
 *                   bounded buffers, replies and backpressure, idle timeout
 *   store_cmd.c     the command table: one function per operation
 *   store_keys.c    the keyspace: entries, values, counters, queues,
 *                   watches, and the waiters parked on missing keys
 *
 * A connection's room for replies (store__conn_fits) and its accounting
 * are inline here: the keyspace needs them to push output, below the
 * connections' file.
 */
#ifndef CRUN_STORE_INTERNAL_H
#define CRUN_STORE_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "crun/auth.h"
#include "crun/log.h"
#include "crun/map.h"
#include "crun/store.h"
#include "store_wire.h"

/* The shared read buffer (store_conn.c). */
#define STORE_RBUF_SIZE 65536

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
	int tagged; /* WAIT_TAG: answered STORE_TAG_ANSWER and tag */
	uint64_t tag;
	uint32_t count; /* WAIT_TAG: the identical waits it stands for */
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
	int tagged; /* sent a WAIT_TAG: replies are marked (store_wire.h) */
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
	uint64_t nfreed; /* entries freed so far (store__conn_find) */
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
	/* One of them is closed (store_server.c's, set when it starts). */
	void (*handle_closed)(struct crun_store_server *srv);
	int closing;
	int quiet;
	int port;
	unsigned long refused; /* connections over max_conns */
	store_close_cb close_cb;
	void *close_data;
	store_vanish_cb vanish_cb;
	void *vanish_data;
	store_sink_cb sink_cb; /* keys under sink_prefix go to it, unstored */
	char *sink_prefix;
	void *sink_data;
	int has_key; /* clients must prove the secret (auth.h) */
	struct crun_auth_key key;
	store_allow_cb allow; /* which peers may connect (NULL: any) */
	void *allow_data;
	unsigned long turned_away; /* connections refused by auth or allow */
	uint64_t ops[STORE_OP__COUNT]; /* requests run, by kind (metrics) */
	/* STORE_RBUF_SIZE bytes, malloc'd: not zeroed, so its pages are
	 * touched only when a read fills them. */
	unsigned char *rbuf;
};

/* "crun store: <message>" through log.h, unless srv is quiet; a NULL srv
 * always says it. Every line it says is about a peer or a connection
 * turned away or lost. */
__attribute__((format(printf, 2, 3))) static inline void
store__log(const struct crun_store_server *srv, const char *fmt, ...)
{
	va_list ap;

	if (srv != NULL && srv->quiet)
		return;
	va_start(ap, fmt);
	log_vmsg(LOG_WARN, "crun store", fmt, ap);
	va_end(ap);
}

/* ---- store_conn.c ------------------------------------------------------ */

void store__on_connection(uv_stream_t *ls, int status);
void store__on_tick(uv_timer_t *t);
void store__conn_close(struct store_conn *c, const char *reason);
void store__flush_dirty(struct crun_store_server *srv);

/* Bring srv->mem and srv->nbusy up to date with what c holds now. */
static inline void store__conn_account(struct store_conn *c)
{
	size_t now = c->in.cap + c->out.cap + c->qcap;
	int busy = !c->closing && c->out.len + c->queued > 0;

	c->srv->mem = c->srv->mem - c->charged + now;
	c->charged = now;
	c->srv->nbusy = c->srv->nbusy - (size_t)c->busy + (size_t)busy;
	c->busy = busy;
}

/* Mark c as having output to flush at the end of this callback. */
static inline void store__conn_dirty(struct store_conn *c)
{
	if (c->dirty)
		return;
	c->dirty = 1;
	c->dirty_next = c->srv->dirty;
	c->srv->dirty = c;
	c->srv->ndirty++;
}

/*
 * The unsent replies c may hold: max_output, but no more than its share of
 * half of max_memory among the connections that have unsent replies (c
 * included), so that clients that do not read cannot take the memory the
 * others need for theirs.
 */
static inline size_t store__conn_share(const struct store_conn *c)
{
	const struct crun_store_server *srv = c->srv;
	size_t share = srv->lim.max_memory / 2 / (srv->nbusy + !c->busy);

	return share < srv->lim.max_output ? share : srv->lim.max_output;
}

/*
 * Whether c may get n more bytes of output now: its unsent replies stay
 * within max_output and, unless it has none, the buffers that hold them
 * within its share (store__conn_share); the process stays within
 * max_memory.
 */
static inline int store__conn_fits(const struct store_conn *c, size_t n)
{
	const struct crun_store_server *srv = c->srv;
	size_t cap = store_buf_grown_cap(&c->out, n);
	/* srv->mem counts c's buffers as of its last store__conn_account. */
	size_t mem = srv->mem - c->charged + c->in.cap + c->qcap;
	size_t pending = c->out.len + c->queued;

	return pending + n <= srv->lim.max_output && cap != SIZE_MAX &&
	       (pending == 0 || cap + c->qcap <= store__conn_share(c)) &&
	       mem + cap <= srv->lim.max_memory;
}

/* Have c closed at the next flush (not now: a list may be walking it). */
static inline void store__conn_doom(struct store_conn *c, const char *why)
{
	if (c->doom == NULL)
		c->doom = why;
	store__conn_dirty(c);
}

/* ---- store_cmd.c ------------------------------------------------------- */

/* What the server knows of one operation (store_cmd.c's table). */
struct store_cmd {
	const char *name; /* in messages and metrics (store_server_ops) */
	/* Run req for c; 0, 1 (nothing more to say), or a negative code
	 * (errmsg says why, unless left empty: then store__exec does). */
	int (*proc)(struct store_conn *c, const struct store_req *req,
		    struct store_entry *hit, char *errmsg, size_t errlen);
	/* An upper bound of the reply's size, before it runs (NULL: 8). */
	size_t (*size)(struct store_conn *c, const struct store_req *req,
		       struct store_entry **hit);
	unsigned flags; /* STORE_CMD_* */
};

/* Runs before the client has proved the rendezvous secret. */
#define STORE_CMD_PREAUTH 1u

/* The operations, indexed by enum store_op (the wire decoder checked
 * each request's fields, and yields known kinds only). */
extern const struct store_cmd store__cmds[STORE_OP__COUNT];

size_t store__reply_size(struct store_conn *c, const struct store_req *req,
			 struct store_entry **hit);
int store__exec(struct store_conn *c, const struct store_req *req,
		struct store_entry *hit, char *errmsg, size_t errlen);

/* ---- store_keys.c ------------------------------------------------------ */

struct store_entry *store__find(struct crun_store_server *srv, const void *key,
				size_t klen);
struct store_entry *store__get_entry(struct crun_store_server *srv,
				     const void *key, size_t klen, int *err);
void store__entry_gc(struct crun_store_server *srv, struct store_entry *e);
struct store_entry *store__conn_find(struct store_conn *c, const void *key,
				     size_t klen);
struct store_entry *store__conn_get_entry(struct store_conn *c,
					  const void *key, size_t klen,
					  int *err);
int store__entry_set(struct crun_store_server *srv, struct store_entry *e,
		     const void *a, size_t alen, const void *b, size_t blen);
int store__do_add(struct crun_store_server *srv, struct store_entry *e,
		  int64_t delta, int64_t *out, char *errmsg, size_t errlen);
void store__notify(struct store_entry *e, unsigned kind, const void *old,
		   size_t olen, const void *new, size_t nlen);
void store__reply_value(struct store_conn *c, const struct store_entry *e);
size_t store__values_size(struct crun_store_server *srv,
			  const unsigned char *p, size_t len);
void store__reply_values(struct store_conn *c, const unsigned char *p,
			 size_t len);
void store__reply_wait_get(struct store_conn *c, const unsigned char *p,
			   size_t len);
void store__wake_list(struct store_reglist *l, int one);
/* The key now exists: answer whoever waited for it. */
void store__wake(struct store_entry *e);
int store__park(struct store_conn *c, const struct store_req *req,
		size_t missing, int barrier);
void store__conn_cancel_waits(struct store_conn *c);
void store__conn_cancel_tag(struct store_conn *c, uint64_t tag, uint32_t n);
int store__watch(struct store_conn *c, const struct store_req *req);
void store__conn_unwatch(struct store_conn *c);
void store__free_entries(struct crun_store_server *srv);


/* Whether a WAIT/CHECK on e is satisfied (a non-empty queue counts). */
static inline int store__present(const struct store_entry *e)
{
	return e != NULL && (e->has_value || e->qlen > 0);
}

#endif

/*
 * The store relay's requests (store_relay_req.c), a part of the relay
 * (store_relay.c creates it): each worker's reply FIFO, the waits,
 * combining, and the store's answers. The relay owns the connections and
 * fills up_in and writes up_out; the part reports to it through
 * relay_reqs.on. Private to libcrun.
 */
#ifndef CRUN_STORE_RELAY_REQ_H
#define CRUN_STORE_RELAY_REQ_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

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
	int waiting;  /* bytes is a parked WAIT's cost (its client's wait_held) */
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
	struct relay_wait *prev, *next; /* q->waits */
	uint64_t tag;
	uint64_t seq; /* in-order requests sent before it */
	int sent, decided;
	int held;	       /* its request is still held (may be joined) */
	struct store_buf list; /* u64 count + the keys, as on the wire */
	struct relay_slot *slots, *slots_tail;
};

struct relay_client {
	uv_tcp_t tcp;
	struct relay_reqs *q;
	struct relay_client *prev, *next; /* q->clients */
	struct relay_client *dirty_next;
	enum store_gen gen;
	struct store_buf in;
	struct store_wire_resume rs;
	struct store_buf out;
	size_t queued; /* bytes in uv_writes */
	/* What it costs the relay now: its requests held or in flight (their
	 * bytes, their slots and the most their replies can take), its parked
	 * waits and its replies not yet written out. */
	size_t held;
	size_t wait_held; /* the part of held that its parked waits cost */
	struct relay_slot *head, *tail;
	uint64_t last_seq; /* the place of its last request held */
	uint64_t since;	   /* uv_now of its last progress (idle check) */
	int dirty, paused, closing;
	int stalled; /* a whole request waits in in for room in its share */
};

/* The requests' state: the relay embeds it and sets its first fields. */
struct relay_reqs {
	uv_loop_t *loop;
	const struct crun_store_limits *lim;
	size_t max_frame;  /* store_limits_max_frame(lim) */
	size_t max_client; /* one client's share at most */
	uint32_t nonce;	   /* the relay's, in every request it sends */
	struct store_relay_stats *st;
	/* What the part reports to the relay (data): work to flush before the
	 * loop waits, a client to close (why; NULL: quietly), the store's
	 * connection lost. */
	struct {
		void (*kick)(void *data);
		void (*client_bad)(void *data, struct relay_client *cl,
				   const char *why);
		void (*up_lost)(void *data, int err);
	} on;
	void *data;
	/* Written by the relay, read here. */
	enum relay_state state;
	int closing;
	struct store_buf up_in;	 /* the store's replies, as read */
	struct store_buf up_out; /* requests for the store, to write */
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
};

void relay_req_slot_maybe_free(struct relay_slot *s);
void relay_req_wait_free(struct relay_reqs *q, struct relay_wait *w);
void relay_req_wait_release(struct relay_reqs *q, struct relay_wait *w);
void relay_req_wait_drop_slot(struct relay_reqs *q, struct relay_wait *w,
			      struct relay_slot *s);
size_t relay_req_client_share(const struct relay_client *cl);
/* What cl costs the relay besides its unparsed input. */
static inline size_t relay_req_client_owed(const struct relay_client *cl)
{
	return cl->held + cl->out.len + cl->queued;
}
void relay_req_client_parse(struct relay_client *cl);
void relay_req_send_held(struct relay_reqs *q);
void relay_req_up_process(struct relay_reqs *q);
/** Every request held or sent, and every wait, dropped (the store is
 * lost, or the relay closes). */
void relay_req_drop_all(struct relay_reqs *q);

#endif

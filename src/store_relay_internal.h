/*
 * The store relay's private header (store_relay.c, the connections: the
 * workers', the store's, the life cycle; store_relay_req.c, the requests:
 * each worker's reply FIFO, the waits, combining, and the store's answers).
 * Private to libcrun.
 */
#ifndef CRUN_STORE_RELAY_INTERNAL_H
#define CRUN_STORE_RELAY_INTERNAL_H

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

struct relay_write {
	uv_write_t req;
	struct relay_client *cl; /* NULL: the upstream connection */
	struct crun_store_relay *r;
	size_t len;
	unsigned char data[];
};

struct crun_store_relay {
	uv_loop_t *loop;
	/* What the requests' part (store_relay_req.c) reports to the relay,
	 * given by store_relay_new: work to flush before the loop waits, a
	 * client to close (why; NULL: quietly), the store's connection lost. */
	struct {
		void (*kick)(struct crun_store_relay *r);
		void (*client_bad)(struct relay_client *cl, const char *why);
		void (*up_lost)(struct crun_store_relay *r, int err);
	} on;
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
	size_t max_frame; /* store_limits_max_frame(&lim) */
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

void store_relay__slot_maybe_free(struct relay_slot *s);
void store_relay__wait_free(struct crun_store_relay *r, struct relay_wait *w);
void store_relay__wait_release(struct crun_store_relay *r,
			       struct relay_wait *w);
void store_relay__wait_drop_slot(struct crun_store_relay *r,
				 struct relay_wait *w, struct relay_slot *s);
void store_relay__up_free(struct relay_up *u);
size_t store_relay__client_share(const struct relay_client *cl);
/* What cl costs the relay besides its unparsed input. */
static inline size_t store_relay__client_owed(const struct relay_client *cl)
{
	return cl->held + cl->out.len + cl->queued;
}
void store_relay__client_parse(struct relay_client *cl);
void store_relay__send_held(struct crun_store_relay *r);
void store_relay__up_process(struct crun_store_relay *r);

#endif

/*
 * The async store client's private header, shared by store_aclient.c (the
 * connection, the pipeline and the replies) and store_areq.c (the requests:
 * their frames, and the background watch). Private to libcrun.
 */
#ifndef CRUN_STORE_ACLIENT_INTERNAL_H
#define CRUN_STORE_ACLIENT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "crun/auth.h"
#include "crun/store.h"
#include "store_wire.h"

/* What the main frame's reply looks like. */
enum store_areply { AR_NONE, AR_U8, AR_U64, AR_BYTES, AR_NBYTES };

enum store_astate {
	AS_RESOLVED,
	AS_CONNECTING,
	AS_AUTHING, /* our AUTH nonce sent; the server's challenge due */
	AS_VALIDATING,
	AS_READY,
	AS_FAILED
};

/* One queued request. */
struct store_areq {
	struct store_areq *next;
	enum store_areply kind;
	int has_wait; /* a WAIT frame goes first */
	int wait_get; /* that WAIT is a WAIT_GET: its reply brings the values */
	int first_only; /* a WAIT_FIRST_GET: it waits for its first key */
	int phase;	/* 0: the WAIT is pending; 1: the main frame */
	int sent;	/* the current phase's frame is written */
	int canceling;	/* CANCEL_WAIT sent */
	int bg;		/* an incarnation of the background watch */
	int taken;	/* taken back for other requests: a successor follows */
	unsigned wgen;	/* of that watch */
	int timeout_ms;
	size_t n; /* values in a MULTI_GET reply */
	store_reply_cb cb;
	void *data;
	struct store_buf wait;
	struct store_buf main;
};

/* A uv_write with its own copy of the bytes. */
struct store_awrite {
	uv_write_t req;
	struct crun_store_aclient *c;
	unsigned char data[];
};

struct crun_store_aclient {
	uv_loop_t *loop;
	uv_tcp_t tcp;
	uv_timer_t timer; /* connect backoff, then the WAIT timeout */
	uv_connect_t conn_req;
	/* The host's addresses in the resolver's order; addrs[cur] is tried. */
	struct sockaddr_storage *addrs;
	size_t naddrs, cur;
	enum store_astate state;
	int tcp_open; /* tcp is initialised and not being closed */
	unsigned nhandles;
	/* Frames written in this loop iteration, sent together before the
	 * loop next waits (one send for a node's pipelined requests). */
	struct store_buf cork;
	uv_prepare_t flush;
	int closing;
	uint64_t deadline; /* of the connect, on the loop's clock */
	unsigned backoff;
	int last_err;
	uint32_t jitter; /* state of the backoff's pseudo-random jitter */
	uint32_t nonce;
	store_aclient_connect_cb connect_cb;
	void *connect_data;
	store_close_cb close_cb;
	void *close_data;
	struct store_areq *head, *tail;
	struct store_areq *send_next; /* first request not yet written */
	struct store_areq *blocked;   /* a WAIT holding the pipeline */
	struct store_buf in;
	int use_wait_get;	  /* the server is a crun store */
	struct store_areq *raced; /* a WAIT_GET answered as it was canceled */
	int skip_canceled;	  /* a WAIT_CANCELED byte to pass over */
	/* The background watch (store_aclient_watch). */
	struct store_areq *parked; /* its WAIT_GET, sent last: nothing after */
	struct store_areq *wnext;  /* its WAIT_GET queued, not sent yet */
	char **wkeys;		   /* its keys: it waits for the first */
	size_t nwkeys;
	unsigned wgen; /* bumped by each new watch */
	int wlive;     /* its callback is still due */
	/* Queue the watch's next WAIT_GET last (not sent), or NULL: given by
	 * store_areq.c, which words the requests, with the watch. */
	struct store_areq *(*wqueue)(struct crun_store_aclient *c);
	store_reply_cb wcb;
	void *wdata;
	int has_key; /* run the AUTH exchange (auth.h) on connect */
	int proved;  /* our AUTH proof is sent on this connection */
	struct crun_auth_key key;
	struct crun_auth_hs hs;
};

/* ---- store_aclient.c --------------------------------------------------- */

void store_aclient__free_req(struct store_areq *r);
/* Queue r last (unsent). */
void store_aclient__enqueue(struct crun_store_aclient *c,
			    struct store_areq *r);
/* Send queued requests up to the next WAIT. */
void store_aclient__pump(struct crun_store_aclient *c);
/* Send CANCEL_WAIT for r, the one WAIT parked on the server: 0 or an error. */
int store_aclient__cancel(struct crun_store_aclient *c, struct store_areq *r);
/* The connection failed for good: fail everything pending with err. */
void store_aclient__fail(struct crun_store_aclient *c, int err);
void store_aclient__free_wkeys(struct crun_store_aclient *c);

#endif

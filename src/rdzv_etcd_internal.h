/*
 * What the files of the etcd backend share: the backend's state, one
 * operation of the algorithm (struct kop) and the rdzv_etcd__ helpers.
 * rdzv_etcd.c runs the operations on the main channel, rdzv_etcd_watch.c
 * keeps the watch stream that wakes waiting reads, rdzv_etcd_lease.c holds
 * the leases and opens and closes the backend. Only those files include it.
 */
#ifndef CRUN_RDZV_ETCD_INTERNAL_H
#define CRUN_RDZV_ETCD_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "crun/etcd.h"
#include "crun/rdzv_etcd.h"

#define CHUNK 64      /* operations per txn (etcd allows 128) */
#define CLOSE_MS 3000 /* revoking at exit, at most */
#define CACHE_MAX 512
#define LEASE_MIN_S 2 /* the shortest lease_ttl that survives a failover */
#define WATCH_STABLE_MS 5000 /* a watch that lived this long worked */
#define CREATED_MS 2000	     /* etcd confirms a new watch within this */

enum optype { OP_ADD, OP_SET, OP_CAS, OP_MGET, OP_MSET, OP_WATCH };

struct kop {
	struct crun_rdzv_etcd *s;
	struct kop *next;
	enum optype type;
	char **keys; /* etcd keys */
	char **vals;
	size_t *lens;
	size_t n;
	int64_t delta;
	int timeout_ms;
	int absent; /* CAS: expected "" means absent */
	int have;   /* ADD: cur and rev known */
	int64_t cur, rev;
	char token[48]; /* ADD: "<node>:<seq>", written beside the sum */
	int fails;	/* ADD: compares lost */
	size_t pos;	/* MGET/MSET: keys done */
	size_t chunk0;	/* MGET: first key of the txn out */
	char **got;	/* MGET: values read */
	size_t *glen;
	size_t need; /* MGET: the first keys that must exist (0: a peek) */
	int missing; /* MGET: of those, keys absent in this pass */
	int dirty;   /* MGET: a wanted key was put during this pass */
	int waiting; /* for a PUT event on one of keys */
	int inflight;
	int dead; /* completed or cancelled while a call was out */
	int started;
	rdzv_kv_cb cb;
	void *arg;
};

struct cache {
	struct cache *next;
	char *key;
	int64_t val, rev;
};

struct crun_rdzv_etcd {
	uv_loop_t *loop;
	struct etcd *etcd;
	char ns[512];  /* "<prefix>/<run_id>/" */
	char node[32]; /* this node's lease ID */
	char job[32];  /* the job's lease ID */
	char cand[32]; /* a job lease we granted while opening */
	double ttl, timeout;
	struct kop *head, *tail; /* the main channel */
	struct kop *w;		 /* the watch channel */
	uv_timer_t mtimer, wtimer, ka, restart, btimer;
	int timers;
	struct etcd_req *stream;
	int64_t rev;	  /* last revision seen on the watch */
	uint64_t wopened; /* loop time the watch was last opened */
	uint64_t wsince;  /* first of the watch's ends in a row (0: none) */
	int wtries;	  /* its ends in a row */
	int wcreated;	  /* etcd confirmed the watch open now */
	int reopen;	  /* the stream must be replaced */
	unsigned stream_failovers;
	int failed;
	int closing;
	int opening;
	int kicking, rekick;
	int close_started;
	int calls_out;	    /* the operations' calls not yet answered */
	int revoke_pending; /* closing: revoke once they are */
	int readonly;	    /* rdzv_etcd_opts.readonly */
	json_t *pending;    /* watch messages not yet handled */
	uv_timer_t evtimer;
	struct cache *cache;
	int ncache;
	unsigned seq; /* ADDs so far */
	void (*vanish_cb)(void *, const char *, size_t);
	void *vanish_arg;
	rdzv_etcd_open_cb open_cb;
	void *open_data;
	void (*close_cb)(void *);
	void *close_data;
	char errmsg[1200];
};

/* etcd_prefix (at most 200 bytes, cfg_rdzv.c) and a run id the options
 * allow fit ns whole. */
_Static_assert(200 + sizeof("/") + RDZV_ID_MAX + sizeof("/") <=
		   sizeof(((struct crun_rdzv_etcd *)0)->ns),
	       "etcd_prefix and a run id do not fit ns");

/* --- rdzv_etcd.c: the main channel and the operations ------------------ */

/* Forget every cached counter (the watch missed events). */
void rdzv_etcd__cache_clear(struct crun_rdzv_etcd *s);
/* Complete an operation: its callback, then the next one on its channel. */
void rdzv_etcd__reply(struct kop *o, int status,
		      const struct crun_store_reply *r);
/* The backend failed for good: say why once, fail every operation. */
void rdzv_etcd__fail_all(struct crun_rdzv_etcd *s, int status, const char *why);
/* The i-th response of a txn, if it is of that kind ("response_range"). */
json_t *rdzv_etcd__txn_resp(json_t *resp, size_t i, const char *kind);
/* Send an operation's next txn (or, a read that waits, wait for a PUT). */
void rdzv_etcd__step(struct kop *o);

/* --- rdzv_etcd_watch.c ------------------------------------------------- */

/* The restart timer's callback: open the watch again. */
void rdzv_etcd__on_restart(uv_timer_t *t);
/* The watch ended for why: reopen after a pause, or give up (may_give_up). */
void rdzv_etcd__watch_retry(struct crun_rdzv_etcd *s, const char *why,
			    int may_give_up);
/* Open the watch stream on the job's keys, from the last revision seen. */
void rdzv_etcd__watch_open(struct crun_rdzv_etcd *s);

/* --- rdzv_etcd_lease.c ------------------------------------------------- */

/* Closing: revoke this node's lease (its marks go: the others see it leave). */
void rdzv_etcd__revoke_node(struct crun_rdzv_etcd *s);

#endif

/*
 * The rendezvous algorithm (see rdzv.h for the keys and the protocol).
 *
 * Happy path of one round: job id and config agreed -> round number read ->
 * ADD join gives index i -> descriptor written -> (i >= MIN) last call ->
 * CAS closed 0 -> N -> the closer writes every assignment -> each node reads
 * its own -> group rank 0 starts the workers' store and publishes it ->
 * heartbeats and a watch on "end" until the round ends.
 *
 * Failure modes: a store error or a lost host (every pending reply fails:
 * the round callback or on_end reports it); join_timeout (the deadline timer
 * reports who joined); a node dying while joining (the closer's MULTI_GET
 * of descriptors times out and aborts the round, which everyone retries);
 * heartbeat stalls (the successor's counter stops: "D"; our own replies stop:
 * "L"). Replies that arrive for an old round are recognised by the round
 * number carried in each request and dropped.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "crun/err.h"
#include "crun/fingerprint.h"
#include "crun/rdzv.h"
#include "crun/rdzv_records.h"

/* An expected value no real key holds: CAS with it reads without writing. */
#define PEEK "\001crun-peek"
#define KEYMAX 512

enum rstate {
	R_IDLE,
	R_JOINING,
	R_WAITING,
	R_RUNNING,
	R_ENDED,
	R_FINISHING,
	R_DONE
};

struct crun_rdzv {
	uv_loop_t *loop;
	struct rdzv_opts o;
	const struct rdzv_kv_ops *ops;
	void *kv;
	rdzv_end_cb on_end;
	char run_id[256];
	char prefix[300];
	char descr[RDZV_MAX_RECORD + 1];
	char fp[FP_MAX_TEXT + 1]; /* this node's fingerprint field, or "" */
	int fp_wait;		  /* the descriptor waits for the fingerprint */
	int fp_pending;		  /* round whose descriptor waits, or -1 */
	int fp_index;		  /* and its arrival index there */
	int fp_close;		  /* try_close waits for that descriptor */
	char env_diff[RDZV_MAX_ENVCHECK + 1];
	int env_refused;
	char config[200];
	char errmsg[768];
	enum rstate state;
	int round;  /* current round number */
	int index;  /* arrival index in the round */
	int closed; /* participants, once known */
	int expect; /* participants the round expects (0: unknown) */
	int grank, gworld;
	int64_t succ_last;
	int succ_stall;
	uint64_t last_reply; /* loop time of the last heartbeat reply */
	int hb_pending;
	int hb_recheck;	     /* the bound passed: look again after reading */
	uint64_t hb_tick;    /* loop time of the last heartbeat tick */
	uint64_t hb_silence; /* unanswered, our own stalls not counted */
	uint64_t hb_ms;	     /* the heartbeat interval of this round */
	uv_timer_t last_call;
	uv_timer_t hb;
	uv_timer_t deadline;
	uv_timer_t fp_timer; /* the bound on waiting for the fingerprint */
	int timers;	     /* initialised timer handles */
	int end_chain;	     /* our end's record and restarts still to send */
	int depart_wait;     /* rdzv_depart waits for them */
	int deadline_phase;
	int64_t restarts;  /* job-wide failure restarts, last read */
	int succ;	   /* group rank whose heartbeat we watch */
	int end_seen;	   /* the round's "end" was read */
	int end_unwatched; /* rdzv_may_restart took the watch on end/<g> */
	int aborted;	   /* the last round seen aborted while forming */
	int ended;	   /* the round whose recorded end we read, or -1 */
	rdzv_round_cb cb;
	void *cb_data;
	void (*finish_cb)(struct crun_rdzv *, void *);
	void *finish_data;
	struct rdzv_result res;
	char *peers; /* the round's node addresses ("r<R>/addrs"), or NULL */
	/* Leaving out a failing node (exclude_after > 0). */
	struct rdzv_exclusion excl[RDZV_MAX_EXCLUDED]; /* as last read */
	int nexcl;
	int excl_known;	 /* excl holds a reading of "excluded" */
	int sitting_out; /* this node is left out and waits */
	int excl_tries;	 /* compare-and-set retries of "excluded" */
	int excl_round;	 /* the round that left us out (names our keys) */
	int over_kind;	 /* how the job ended while we sat out */
	/*
	 * Who this node is in those records (rdzv_records.h): its address,
	 * cut to leave room for "#<id>", and the id its agent drew.
	 */
	char xaddr[RDZV_MAX_FIELD - RDZV_MAX_ID];
	char id[RDZV_MAX_ID + 1];
	char over_why[512];
};

/* One request in flight: the round it belongs to, and a step-specific int. */
struct op {
	struct crun_rdzv *r;
	int round;
	int arg;
	int n; /* rdzv_end_round: the participants to mark */
	void (*cb)(struct crun_rdzv *, int);
	void *data;
};

static void join_round(struct crun_rdzv *r);
static void try_close(struct crun_rdzv *r);
static void start_running(struct crun_rdzv *r);
static void on_deadline(uv_timer_t *t);
static void on_node_end(int status, const struct crun_store_reply *rep,
			void *arg);
static int mark_ended(struct crun_rdzv *r, int n, const void *v, size_t len);

static void key(const struct crun_rdzv *r, char *buf, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Build "crun/<run_id>/<fmt…>" into buf (KEYMAX bytes). */
static void key(const struct crun_rdzv *r, char *buf, const char *fmt, ...)
{
	va_list ap;
	int n = snprintf(buf, KEYMAX, "%s", r->prefix);

	va_start(ap, fmt);
	vsnprintf(buf + n, KEYMAX - (size_t)n, fmt, ap);
	va_end(ap);
}

/* Watch one key (see rdzv_kv_ops.watch). */
static int watch1(struct crun_rdzv *r, const char *k, int timeout_ms,
		  rdzv_kv_cb cb, void *arg)
{
	return r->ops->watch(r->kv, &k, 1, timeout_ms, cb, arg);
}

static struct op *op_new(struct crun_rdzv *r, int arg)
{
	struct op *o = calloc(1, sizeof(*o));

	if (o == NULL)
		abort();
	o->r = r;
	o->round = r->round;
	o->arg = arg;
	return o;
}

/*
 * Take ownership of a reply's op: returns the rendezvous if the reply is
 * still wanted (same round, not closed), else NULL. Frees the op.
 */
static struct crun_rdzv *op_take(void *arg, int *round, int *a)
{
	struct op *o = arg;
	struct crun_rdzv *r = o->r;

	if (round)
		*round = o->round;
	if (a)
		*a = o->arg;
	if (r->state == R_DONE || o->round != r->round) {
		free(o);
		return NULL;
	}
	free(o);
	return r;
}

static void store_error(struct crun_rdzv *r, int status);

/*
 * The reply to a read of n keys, if the round still wants it: else NULL,
 * a failed request reported (n values is the client's promise: fewer is a
 * protocol error).
 */
static struct crun_rdzv *
take_values(void *arg, int status, const struct crun_store_reply *rep, size_t n)
{
	struct crun_rdzv *r = op_take(arg, NULL, NULL);

	if (r == NULL)
		return NULL;
	if (status || rep->nvalues != n) {
		store_error(r, status ? status : CRUN_EPROTO);
		return NULL;
	}
	return r;
}

static int64_t reply_int(const struct crun_store_reply *rep)
{
	char buf[32];
	size_t n;

	if (rep->value == NULL)
		return rep->num;
	n = rep->len < sizeof(buf) - 1 ? rep->len : sizeof(buf) - 1;
	memcpy(buf, rep->value, n);
	buf[n] = '\0';
	return strtoll(buf, NULL, 10);
}

/*
 * Copy value i of a reply into buf as a C string: values are (ptr, len)
 * slices of the receive buffer, not NUL-terminated.
 */
static const char *reply_str(const struct crun_store_reply *rep, size_t i,
			     char *buf, size_t len)
{
	size_t n = rep->values[i].len < len - 1 ? rep->values[i].len : len - 1;

	memcpy(buf, rep->values[i].base, n);
	buf[n] = '\0';
	return buf;
}

static int reply_is(const struct crun_store_reply *rep, const char *s)
{
	return rep->len == strlen(s) && memcmp(rep->value, s, rep->len) == 0;
}

static void stop_timers(struct crun_rdzv *r)
{
	uv_timer_stop(&r->last_call);
	uv_timer_stop(&r->hb);
	uv_timer_stop(&r->deadline);
}

/* The round could not be formed: report once through the round callback. */
static void round_fail(struct crun_rdzv *r, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void round_fail(struct crun_rdzv *r, int status, const char *fmt, ...)
{
	rdzv_round_cb cb = r->cb;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(r->errmsg, sizeof(r->errmsg), fmt, ap);
	va_end(ap);
	stop_timers(r);
	r->state = R_IDLE;
	r->round = -1; /* drop late replies */
	r->cb = NULL;
	if (cb)
		cb(r, status, NULL, r->cb_data);
}

/*
 * A record read from the store does not parse or is out of range: anyone
 * who reaches the store can write any key. End the round with one message
 * naming the key and, where known, the host that wrote it; never go on
 * with the value.
 */
static void round_ended(struct crun_rdzv *r, int kind, const char *why);
static void bad_record(struct crun_rdzv *r, const char *k, const char *by,
		       const char *why)
{
	char msg[700];

	snprintf(msg, sizeof(msg), "malformed rendezvous record '%s'%s%s: %s",
		 k, by ? " written by " : "", by ? by : "", why);
	if (r->state == R_RUNNING || r->state == R_FINISHING) {
		round_ended(r, RDZV_END_FATAL, msg);
		if (r->state == R_FINISHING) /* not reported by round_ended */
			fprintf(stderr, "crun: %s\n", msg);
	} else {
		round_fail(r, CRUN_EPROTO, "%s", msg);
	}
}

/* A counter or number record in [lo, hi]: 0, or the round ended. */
static int record_int(struct crun_rdzv *r, const struct crun_store_reply *rep,
		      const char *k, int64_t lo, int64_t hi, int64_t *out)
{
	char why[200];

	if (rep->value == NULL) { /* an ADD's reply: the store's own number */
		*out = rep->num;
		if (rep->num >= lo && rep->num <= hi)
			return 0;
		snprintf(why, sizeof(why), "%lld is not in %lld..%lld",
			 (long long)rep->num, (long long)lo, (long long)hi);
		bad_record(r, k, NULL, why);
		return CRUN_EPROTO;
	}
	if (rdzv_parse_int(rep->value, rep->len, lo, hi, out, why,
			   sizeof(why)) == 0)
		return 0;
	bad_record(r, k, NULL, why);
	return CRUN_EPROTO;
}

/* The running round ended (for any reason): tell the agent once. */
static void host_wait_left(struct crun_rdzv *r);
static void finish_done(struct crun_rdzv *r);
static void excl_host_wait(struct crun_rdzv *r);

static void round_ended(struct crun_rdzv *r, int kind, const char *why)
{
	struct rdzv_end e;

	r->end_seen = 1;
	if (r->state == R_FINISHING) {
		/* The store host, done itself, waits for the others to leave.
		 */
		uv_timer_stop(&r->hb);
		if (kind == RDZV_END_SUCCESS && r->o.exclude_after > 0 &&
		    r->o.is_store_host)
			excl_host_wait(r); /* the nodes left out read "over" */
		else if (kind == RDZV_END_SUCCESS || kind == RDZV_END_LOST)
			finish_done(r);
		else
			host_wait_left(r);
		return;
	}
	if (r->state != R_RUNNING)
		return;
	r->state = R_ENDED;
	stop_timers(r);
	snprintf(r->errmsg, sizeof(r->errmsg), "%s", why);
	rdzv_end_describe(kind, why, &e);
	r->on_end(r, &e, r->o.data);
}

/* A store request failed: the host is gone or the reply made no sense. */
static void store_error(struct crun_rdzv *r, int status)
{
	char why[256];

	snprintf(why, sizeof(why), "lost the rendezvous store: %s",
		 crun_strerror(status));
	if (r->state == R_RUNNING)
		round_ended(r, RDZV_END_LOST, why);
	else if (r->state == R_JOINING || r->state == R_WAITING)
		round_fail(r, status, "%s", why);
	else if (r->state == R_FINISHING && r->finish_cb) {
		r->state = R_ENDED;
		r->finish_cb(r, r->finish_data);
	}
}

/* --- joining ------------------------------------------------------------ */

static void on_deadline_names(int status, const struct crun_store_reply *rep,
			      void *arg)
{
	int round, want;
	struct crun_rdzv *r = op_take(arg, &round, &want);
	char names[400] = "";
	size_t n = 0;

	if (r == NULL || r->state != R_JOINING)
		return;
	for (size_t i = 0;
	     status == 0 && i < rep->nvalues && n < sizeof(names) - 64; i++) {
		int h, nr, np, pid;
		char host[256];

		char d[700];

		if (sscanf(reply_str(rep, i, d, sizeof(d)), "%d %d %d %d %255s",
			   &h, &nr, &np, &pid, host) == 5)
			n += (size_t)snprintf(names + n, sizeof(names) - n,
					      "%s%s (%d workers)",
					      n ? ", " : "", host, np);
	}
	if ((int)(rep ? rep->nvalues : 0) >= r->o.min_nodes)
		/* Enough nodes: the round never closed, or we never heard. */
		return round_fail(
		    r, CRUN_ERDZV_TIMEOUT,
		    "rendezvous '%s' timed out after %.0f s: %zu nodes "
		    "joined (at least %d needed: %s) but this node never "
		    "received its assignment",
		    r->run_id, r->o.join_timeout, rep->nvalues, r->o.min_nodes,
		    *names ? names : "none readable");
	round_fail(
	    r, CRUN_ERDZV_TIMEOUT,
	    "rendezvous '%s' timed out after %.0f s with %zu of at least %d "
	    "nodes: joined %s; still missing %d",
	    r->run_id, r->o.join_timeout, rep ? rep->nvalues : 0,
	    r->o.min_nodes, *names ? names : "(none readable)",
	    r->o.min_nodes - (int)(rep ? rep->nvalues : 0));
}

static void on_deadline_count(int status, const struct crun_store_reply *rep,
			      void *arg)
{
	struct crun_rdzv *r = op_take(arg, NULL, NULL);
	char keys[64][KEYMAX];
	const char *kp[64];
	int64_t c;

	if (r == NULL || r->state != R_JOINING)
		return;
	c = status == 0 ? reply_int(rep) : 0;
	if (c > 64)
		c = 64;
	for (int i = 0; i < c; i++) {
		key(r, keys[i], "r%d/node/%d", r->round, i + 1);
		kp[i] = keys[i];
	}
	if (c <= 0 || r->ops->multi_get(r->kv, kp, (size_t)c, 2000,
					on_deadline_names, op_new(r, (int)c)))
		on_deadline_names(0, &(struct crun_store_reply){0},
				  op_new(r, 0));
}

/* join_timeout passed: name the nodes that joined, then fail. */
static void on_deadline(uv_timer_t *t)
{
	struct crun_rdzv *r = t->data;
	char k[KEYMAX];

	if (r->state != R_JOINING)
		return;
	if (r->deadline_phase++) {
		/* The store did not even answer within 2 s. */
		round_fail(r, CRUN_ERDZV_TIMEOUT,
			   "rendezvous '%s' timed out after %.0f s, and the "
			   "rendezvous "
			   "store does not answer",
			   r->run_id, r->o.join_timeout);
		return;
	}
	key(r, k, "r%d/join", r->round);
	/* A reachable store answers at once; an unreachable one gets 2 s. */
	uv_timer_start(&r->deadline, on_deadline, 2000, 0);
	if (r->ops->add(r->kv, k, 0, on_deadline_count, op_new(r, 0)))
		round_fail(r, CRUN_ERDZV_TIMEOUT,
			   "rendezvous '%s' timed out after %.0f s", r->run_id,
			   r->o.join_timeout);
}

static void on_master(int status, const struct crun_store_reply *rep, void *arg)
{
	struct crun_rdzv *r = take_values(arg, status, rep, 1);
	rdzv_round_cb cb;
	char why[200], k[KEYMAX];
	int port;

	if (r == NULL)
		return;
	key(r, k, "r%d/master", r->round);
	if (rdzv_parse_master(rep->values[0].base, rep->values[0].len,
			      r->res.master_addr, sizeof(r->res.master_addr),
			      &port, why, sizeof(why)))
		return bad_record(r, k, "group rank 0", why);
	r->res.master_port = port;
	r->state = R_RUNNING;
	uv_timer_stop(&r->deadline);
	cb = r->cb;
	r->cb = NULL;
	r->succ_stall = 0;
	r->succ_last = -1;
	r->succ = (r->grank + 1) % r->gworld;
	r->end_seen = 0;
	r->end_unwatched = 0;
	r->last_reply = uv_now(r->loop);
	r->hb_tick = r->last_reply;
	r->hb_silence = 0;
	r->hb_recheck = 0;
	start_running(r);
	cb(r, 0, &r->res, r->cb_data);
}

/* Group rank 0 starts the workers' store; everyone reads where it is. */
static void publish_master(struct crun_rdzv *r)
{
	char mk[KEYMAX];
	const char *kp[1] = {mk};

	key(r, mk, "r%d/master", r->round);
	if (r->grank == 0) {
		char val[300];
		int port, rc = r->o.start_master(r->o.data, r->round, &port);

		if (rc)
			return round_fail(r, rc,
					  "cannot start the workers' store: %s",
					  crun_strerror(rc));
		snprintf(val, sizeof(val), "%s %d", r->o.addr, port);
		r->ops->set(r->kv, mk, val, strlen(val), NULL, NULL);
	}
	if (r->ops->multi_get(r->kv, kp, 1, (int)(r->o.join_timeout * 1000),
			      on_master, op_new(r, 0)))
		store_error(r, CRUN_ECLOSED);
}

/* Group rank 0's copy of the round's addresses (its store's allow list). */
static void got_addrs(struct crun_rdzv *r, const struct crun_store_iov *v)
{
	char mk[KEYMAX], why[200], by[64];

	key(r, mk, "r%d/addrs", r->round);
	snprintf(by, sizeof(by), "the node that closed round %d", r->round);
	if (rdzv_parse_addrs(v->base, v->len, r->closed, &r->peers, why,
			     sizeof(why)))
		return bad_record(r, mk, by, why);
	publish_master(r);
}

static void on_addrs(int status, const struct crun_store_reply *rep, void *arg)
{
	struct crun_rdzv *r = take_values(arg, status, rep, 1);

	if (r != NULL)
		got_addrs(r, &rep->values[0]);
}

/*
 * Our assignment and the round's envcheck lines (and, for the store host,
 * the addresses: NULL if not read yet).
 */
static void got_assignment(struct crun_rdzv *r, const struct crun_store_iov *a,
			   const struct crun_store_iov *e,
			   const struct crun_store_iov *addrs)
{
	struct crun_ranks *k = &r->res.ranks;
	char mk[KEYMAX], why[200], by[64];
	const char *kp[1] = {mk};

	key(r, mk, "r%d/assign/%d", r->round, r->index);
	snprintf(by, sizeof(by), "the node that closed round %d", r->round);
	if (rdzv_parse_assign(a->base, a->len, r->closed, r->o.nproc, k, why,
			      sizeof(why)))
		return bad_record(r, mk, by, why);
	if (rdzv_parse_envcheck(e->base, e->len, r->env_diff,
				sizeof(r->env_diff), why, sizeof(why))) {
		key(r, mk, "r%d/envcheck", r->round);
		return bad_record(r, mk, by, why);
	}
	r->res.env_diff = r->env_diff;
	free(r->peers);
	r->peers = NULL;
	r->grank = k->group_rank;
	r->gworld = k->group_world_size;
	r->res.round = r->round;
	snprintf(r->res.run_id, sizeof(r->res.run_id), "%s", r->run_id);
	if (r->grank != 0)
		return publish_master(r);
	/*
	 * Only group rank 0 needs every node's address (the allow list of
	 * the workers' store it starts): N bytes for one node, not for all
	 * N, keeps a round's traffic O(N).
	 */
	if (addrs != NULL)
		return got_addrs(r, addrs);
	key(r, mk, "r%d/addrs", r->round);
	if (r->ops->multi_get(r->kv, kp, 1, 10000, on_addrs, op_new(r, 0)))
		store_error(r, CRUN_ECLOSED);
}

static void on_assignment(int status, const struct crun_store_reply *rep,
			  void *arg)
{
	struct crun_rdzv *r = take_values(arg, status, rep, 2);

	if (r != NULL)
		got_assignment(r, &rep->values[0], &rep->values[1], NULL);
}

static void late_or_spare(struct crun_rdzv *r, int closed);

/* The round closed with closed participants: read our assignment. */
static void read_assignment(struct crun_rdzv *r, int closed)
{
	char ak[KEYMAX], ek[KEYMAX];
	const char *kp[2] = {ak, ek};

	r->closed = closed;
	if (r->index > r->closed)
		return late_or_spare(r, r->closed);
	key(r, ak, "r%d/assign/%d", r->round, r->index);
	key(r, ek, "r%d/envcheck", r->round);
	if (r->ops->multi_get(r->kv, kp, 2, 10000, on_assignment, op_new(r, 0)))
		store_error(r, CRUN_ECLOSED);
}

static void on_assigned_closed(int status, const struct crun_store_reply *rep,
			       void *arg)
{
	struct crun_rdzv *r = op_take(arg, NULL, NULL);
	char ck[KEYMAX];
	int64_t closed;

	if (r == NULL)
		return;
	if (status)
		return store_error(r, status);
	key(r, ck, "r%d/closed", r->round);
	if (record_int(r, rep, ck, 1, r->o.max_nodes, &closed))
		return;
	read_assignment(r, (int)closed);
}

static void on_assigned(int status, const struct crun_store_reply *rep,
			void *arg)
{
	struct crun_rdzv *r = op_take(arg, NULL, NULL);
	char ak[KEYMAX], why[160];
	int closed;

	if (r == NULL)
		return;
	if (status == CRUN_ETIMEDOUT)
		return; /* the deadline timer reports it */
	if (status)
		return store_error(r, status);
	uv_timer_stop(&r->last_call);
	key(r, ak, "r%d/assigned", r->round);
	if (rdzv_parse_assigned(rep->value, rep->len, r->o.max_nodes, &closed,
				why, sizeof(why)))
		return bad_record(r, ak, NULL, why);
	/*
	 * "ok N": the closer says how many took part. The watch read our
	 * assignment with it (written before "assigned"), unless we came
	 * too late for the round.
	 */
	if (closed > 0 && r->index <= closed && rep->nvalues >= 3 &&
	    rep->values[1].len > 0) {
		r->closed = closed;
		return got_assignment(r, &rep->values[1], &rep->values[2],
				      rep->nvalues > 3 ? &rep->values[3]
						       : NULL);
	}
	if (closed > 0)
		return read_assignment(r, closed);
	if (closed < 0) {
		if (rep->len > 7 && memcmp(rep->value, "abort X", 7) == 0) {
			r->env_refused =
			    rep->len > 24 &&
			    memcmp(rep->value, "abort X env_check=strict",
				   24) == 0;
			return round_fail(r, CRUN_ERDZV_CLOSED, "%.*s",
					  (int)rep->len - 8,
					  (const char *)rep->value + 8);
		}
		/*
		 * The round was aborted while forming: join the next one,
		 * which whoever aborted it has opened already.
		 */
		r->aborted = r->round;
		return join_round(r);
	}
	/* A plain "ok": did we make it in before it closed? */
	key(r, ak, "r%d/closed", r->round);
	if (r->ops->add(r->kv, ak, 0, on_assigned_closed, op_new(r, 0)))
		store_error(r, CRUN_ECLOSED);
}

struct nd {
	int index;
	int is_host;
	int pid;
	int nproc;
	int node_rank;
	char host[256];
	char addr[256];
	char role[128];
	char ips[RDZV_MAX_FIELD + 1];
	struct crun_fingerprint fp;
};

/*
 * Descriptor order: node rank (static; all 0 for c10d), the store host
 * first, then host, address and pid.
 */
static int nd_cmp(const void *x, const void *y)
{
	const struct nd *a = x, *b = y;
	int c;

	if (a->node_rank != b->node_rank)
		return a->node_rank < b->node_rank ? -1 : 1;
	if (a->is_host != b->is_host)
		return b->is_host - a->is_host;
	if ((c = strcmp(a->host, b->host)) != 0)
		return c;
	if ((c = strcmp(a->addr, b->addr)) != 0)
		return c;
	return (a->pid > b->pid) - (a->pid < b->pid);
}

/* Order pointers to node descriptions by host name. */
static int nd_host_cmp(const void *x, const void *y)
{
	const struct nd *const *a = x, *const *b = y;

	return strcmp((*a)->host, (*b)->host);
}

/* End round R before it formed (a node vanished while joining). */
static void abort_round(struct crun_rdzv *r, int kind, const char *why);

/* The store took our refusal: fail with it (whatever our watch sees). */
static void on_env_refused(int status, const struct crun_store_reply *rep,
			   void *arg)
{
	struct crun_rdzv *r = op_take(arg, NULL, NULL);

	(void)status;
	(void)rep;
	if (r == NULL || r->state != R_JOINING)
		return;
	r->env_refused = 1;
	round_fail(r, CRUN_ERDZV_CLOSED, "%s", r->env_diff);
}

/*
 * env_check=strict: abort the round as abort_round does, and fail this
 * node with the message as soon as the store has it, so that the closer
 * says why even when the store host, told first, is gone before our own
 * watch on "assigned" replies.
 */
static void env_refuse(struct crun_rdzv *r, const char *msg)
{
	char k[KEYMAX], val[600];

	snprintf(r->env_diff, sizeof(r->env_diff), "%s", msg);
	key(r, k, "r%d/assigned", r->round);
	snprintf(val, sizeof(val), "abort %c %s", RDZV_END_FATAL, msg);
	rdzv_end_round(r, RDZV_END_FATAL, msg);
	if (r->ops->set(r->kv, k, val, strlen(val), on_env_refused,
			op_new(r, 0)))
		store_error(r, CRUN_ECLOSED);
}

/*
 * The closer compares the nodes' fingerprints (in group-rank order): the
 * record r<R>/envcheck gets the lines ("-": none) into *env (malloc'd).
 * Under env_check=strict, differences abort the round instead (returns -1).
 */
static int env_compare(struct crun_rdzv *r, const struct nd *v, int n,
		       char *envk, char **env, size_t *elen)
{
	const char **hosts = calloc((size_t)n, sizeof(*hosts));
	char(*labels)[RDZV_MAX_FIELD * 2 + 4] =
	    calloc((size_t)n, sizeof(*labels));
	struct crun_fingerprint *fps = calloc((size_t)n, sizeof(*fps));
	const struct nd **byhost = calloc((size_t)n, sizeof(*byhost));
	char *dup = calloc((size_t)n, 1);
	char *lines = malloc(RDZV_MAX_ENVCHECK + 1);
	int k = 0;

	if (!hosts || !labels || !fps || !byhost || !dup || !lines)
		abort();
	key(r, envk, "r%d/envcheck", r->round);
	/* Nodes are named by host; by "host (address)" where hosts repeat. */
	for (int i = 0; i < n; i++)
		byhost[i] = &v[i];
	qsort(byhost, (size_t)n, sizeof(*byhost), nd_host_cmp);
	for (int i = 1; i < n; i++)
		if (strcmp(byhost[i - 1]->host, byhost[i]->host) == 0)
			dup[byhost[i - 1] - v] = dup[byhost[i] - v] = 1;
	for (int i = 0; i < n; i++) {
		snprintf(labels[i], sizeof(labels[i]),
			 dup[i] ? "%s (%s)" : "%s", v[i].host, v[i].addr);
		hosts[i] = labels[i];
		fps[i] = v[i].fp;
	}
	free(byhost);
	free(dup);
	if (r->o.env_check != CRUN_ENV_CHECK_OFF)
		k = fingerprint_compare(hosts, fps, n, lines,
					RDZV_MAX_ENVCHECK + 1);
	free(hosts);
	free(labels);
	free(fps);
	if (k > 0 && r->o.env_check == CRUN_ENV_CHECK_STRICT) {
		char msg[580]; /* "abort X <msg>" fits abort_round's 600 */
		size_t m;

		/* One line for the "end" record (at most RDZV_MAX_RECORD). */
		for (char *p = lines; *p; p++)
			if (*p == '\n')
				*p = p[1] ? ';' : '\0';
		m = (size_t)snprintf(msg, sizeof(msg),
				     "env_check=strict refused round %d: %s",
				     r->round, lines);
		if (m >= sizeof(msg))
			memcpy(msg + sizeof(msg) - 4, "...", 4);
		free(lines);
		env_refuse(r, msg);
		return -1;
	}
	if (k == 0)
		snprintf(lines, RDZV_MAX_ENVCHECK + 1, "-");
	*env = lines;
	*elen = strlen(lines);
	return 0;
}

/* Whether s is an IPv4 or IPv6 literal. */
static int is_literal(const char *s)
{
	unsigned char bin[16];

	return inet_pton(AF_INET, s, bin) == 1 ||
	       inet_pton(AF_INET6, s, bin) == 1;
}

/* The closer: read all N descriptors, order them, write every assignment. */
static void on_descriptors(int status, const struct crun_store_reply *rep,
			   void *arg)
{
	int n;
	struct crun_rdzv *r = op_take(arg, NULL, &n);
	struct nd *v;
	struct crun_node_info *info;
	struct crun_ranks *rks;
	/* The keys, packed (KEYMAX each would be 1 KiB per node). */
	size_t ks = strlen(r->prefix) + 40;
	char *keys, (*vals)[96], k[KEYMAX];
	const char **kp;
	const void **vp;
	size_t *lens, alen = 0;
	int64_t total = 0;
	char *addrs = NULL, *env = NULL, envk[KEYMAX], okv[24];
	size_t elen = 0;

	if (r == NULL)
		return;
	if (status == CRUN_ETIMEDOUT)
		return abort_round(r, RDZV_END_DEAD,
				   "a node joined but never described itself");
	if (status)
		return store_error(r, status);
	v = calloc((size_t)n, sizeof(*v));
	info = calloc((size_t)n, sizeof(*info));
	rks = calloc((size_t)n, sizeof(*rks));
	/* Every assignment, and every host name by group rank (for messages).
	 */
	keys = malloc((2 * (size_t)n + 1) * ks);
	vals = calloc(2 * (size_t)n, sizeof(*vals));
	kp = calloc(2 * (size_t)n + 2, sizeof(*kp));
	vp = calloc(2 * (size_t)n + 2, sizeof(*vp));
	lens = calloc(2 * (size_t)n + 2, sizeof(*lens));
	addrs = calloc((size_t)n, RDZV_MAX_ADDRS_FIELD + 1);
	if (!v || !info || !rks || !keys || !vals || !kp || !vp || !lens ||
	    !addrs)
		abort();
	for (int i = 0; i < n; i++) {
		struct rdzv_descr d;
		char why[200], msg[1200];

		v[i].index = i + 1;
		d.host[0] = '\0';
		if (i < (int)rep->nvalues &&
		    rdzv_parse_descr(rep->values[i].base, rep->values[i].len,
				     r->o.max_nodes, &d, why,
				     sizeof(why)) == 0) {
			v[i].node_rank = d.node_rank;
			v[i].is_host = d.is_host;
			v[i].pid = d.pid;
			v[i].nproc = d.nproc;
			memcpy(v[i].host, d.host, sizeof(v[i].host));
			memcpy(v[i].addr, d.addr, sizeof(v[i].addr));
			memcpy(v[i].role, d.role, sizeof(v[i].role));
			memcpy(v[i].ips, d.ips, sizeof(v[i].ips));
			v[i].fp = d.fp;
			total += d.nproc;
			continue;
		}
		if (i >= (int)rep->nvalues)
			snprintf(why, sizeof(why), "no value");
		key(r, k, "r%d/node/%d", r->round, i + 1);
		snprintf(msg, sizeof(msg),
			 "malformed rendezvous record '%s'%s%s: %s", k,
			 *d.host ? " written by " : "", d.host, why);
		fprintf(stderr, "crun: %s\n", msg);
		abort_round(r, RDZV_END_FATAL, msg);
		goto out;
	}
	if (total > INT32_MAX) {
		abort_round(r, RDZV_END_FATAL,
			    "the nodes' descriptors add up to more than "
			    "2^31 workers");
		goto out;
	}
	qsort(v, (size_t)n, sizeof(*v), nd_cmp);
	if (r->o.static_rank >= 0) {
		for (int i = 0; i < n; i++) {
			if (v[i].node_rank != i) {
				char why[600];

				snprintf(why, sizeof(why),
					 "static rendezvous needs node ranks "
					 "0..%d once each; "
					 "found %d at position %d (host %s)",
					 n - 1, v[i].node_rank, i, v[i].host);
				abort_round(r, RDZV_END_FATAL, why);
				goto out;
			}
		}
	}
	if (env_compare(r, v, n, envk, &env, &elen))
		goto out;
	for (int i = 0; i < n; i++) {
		info[i].role = v[i].role;
		info[i].local_world_size = v[i].nproc;
	}
	if (env_compute_all_ranks(info, n, rks) != 0)
		abort();
	for (int g = 0; g < n; g++) {
		const struct crun_ranks *rk = &rks[g];

		snprintf(keys + g * ks, ks, "%sr%d/assign/%d", r->prefix,
			 r->round, v[g].index);
		snprintf(vals[g], sizeof(vals[g]), "%d %d %d %d %d %d %d", g, n,
			 rk->base_rank, rk->world_size, rk->base_role_rank,
			 rk->role_world_size, rk->local_world_size);
		kp[g] = keys + g * ks;
		vp[g] = vals[g];
		lens[g] = strlen(vals[g]);
		snprintf(keys + (n + g) * ks, ks, "%sr%d/host/%d", r->prefix,
			 r->round, g);
		kp[n + g] = keys + (n + g) * ks;
		vp[n + g] = v[g].host;
		lens[n + g] = strlen(v[g].host);
	}
	/*
	 * The nodes' addresses, for the workers' store's allow list: literals
	 * only (host names may resolve nowhere), the address when it is one.
	 */
	for (int g = 0; g < n; g++) {
		size_t cap = (size_t)n * (RDZV_MAX_ADDRS_FIELD + 1) - alen;
		int lit = is_literal(v[g].addr);

		alen += (size_t)snprintf(addrs + alen, cap, "%s%s%s%s",
					 g ? " " : "",
					 lit || !*v[g].ips ? v[g].addr : "",
					 lit && *v[g].ips ? "," : "", v[g].ips);
	}
	snprintf(keys + 2 * n * ks, ks, "%sr%d/addrs", r->prefix, r->round);
	kp[2 * n] = keys + 2 * n * ks;
	vp[2 * n] = addrs;
	lens[2 * n] = alen;
	/* What differs between the nodes, for every node to print. */
	kp[2 * n + 1] = envk;
	vp[2 * n + 1] = env;
	lens[2 * n + 1] = elen;
	r->ops->multi_set(r->kv, kp, vp, lens, 2 * (size_t)n + 2, NULL, NULL);
	key(r, k, "r%d/assigned", r->round);
	snprintf(okv, sizeof(okv), "ok %d", n);
	r->ops->set(r->kv, k, okv, strlen(okv), NULL, NULL);
out:
	free(v);
	free(info);
	free(rks);
	free(addrs);
	free(env);
	free(keys);
	free(vals);
	free(kp);
	free(vp);
	free(lens);
}

static void on_close_cas(int status, const struct crun_store_reply *rep,
			 void *arg)
{
	int n;
	struct crun_rdzv *r = op_take(arg, NULL, &n);
	char want[16], (*keys)[KEYMAX];
	const char **kp;

	if (r == NULL)
		return;
	if (status)
		return store_error(r, status);
	snprintf(want, sizeof(want), "%d", n);
	if (!reply_is(rep, want))
		return; /* someone else closed it (with another count) */
	keys = calloc((size_t)n, sizeof(*keys));
	kp = calloc((size_t)n, sizeof(*kp));
	if (!keys || !kp)
		abort();
	for (int i = 0; i < n; i++) {
		key(r, keys[i], "r%d/node/%d", r->round, i + 1);
		kp[i] = keys[i];
	}
	if (r->ops->multi_get(r->kv, kp, (size_t)n, 10000, on_descriptors,
			      op_new(r, n)))
		store_error(r, CRUN_ECLOSED);
	free(keys);
	free(kp);
}

static void on_close_count(int status, const struct crun_store_reply *rep,
			   void *arg)
{
	struct crun_rdzv *r = op_take(arg, NULL, NULL);
	char k[KEYMAX], want[16];
	int64_t c;

	if (r == NULL)
		return;
	if (status)
		return store_error(r, status);
	c = reply_int(rep);
	if (c > r->o.max_nodes)
		c = r->o.max_nodes;
	if (c < r->o.min_nodes)
		return;
	snprintf(want, sizeof(want), "%d", (int)c);
	key(r, k, "r%d/closed", r->round);
	if (r->ops->compare_set(r->kv, k, "", 0, want, strlen(want),
				on_close_cas, op_new(r, (int)c)))
		store_error(r, CRUN_ECLOSED);
}

static void try_close(struct crun_rdzv *r)
{
	char k[KEYMAX];

	if (r->state != R_JOINING)
		return;
	/*
	 * Our own descriptor still waits for the fingerprint: the closer's
	 * read of the descriptors would wait for it on the connection that
	 * must carry it. descr_flush closes once it is written.
	 */
	if (r->fp_pending == r->round) {
		r->fp_close = 1;
		return;
	}
	key(r, k, "r%d/join", r->round);
	if (r->ops->add(r->kv, k, 0, on_close_count, op_new(r, 0)))
		store_error(r, CRUN_ECLOSED);
}

static void on_last_call(uv_timer_t *t)
{
	try_close(t->data);
}

static void on_spare_end(int status, const struct crun_store_reply *rep,
			 void *arg)
{
	struct crun_rdzv *r = op_take(arg, NULL, NULL);

	(void)rep;
	if (r == NULL)
		return;
	if (status)
		return store_error(r, status);
	/* The full round ended: there may be room for us in the next one,
	 * which gets the whole join_timeout again. */
	r->state = R_JOINING;
	r->deadline_phase = 0;
	uv_timer_start(&r->deadline, on_deadline,
		       (uint64_t)(r->o.join_timeout * 1000), 0);
	join_round(r);
}

/* We arrived after round R closed: ask it to grow, or wait as a spare. */
static void late_or_spare(struct crun_rdzv *r, int closed)
{
	char k[KEYMAX];

	if (closed < r->o.max_nodes && r->o.static_rank < 0) {
		/* Room to grow: running nodes restart to admit us. */
		fprintf(stderr,
			"crun: round %d runs with %d of at most %d nodes: "
			"asking it to re-form to admit %s\n",
			r->round, closed, r->o.max_nodes, r->o.host);
		rdzv_end_round(r, RDZV_END_JOIN, r->o.host);
		return join_round(r);
	}
	fprintf(stderr,
		"crun: round %d is full (%d nodes): %s waits as a spare\n",
		r->round, closed, r->o.host);
	r->state = R_WAITING;
	uv_timer_stop(&r->deadline);
	key(r, k, "r%d/end", r->round);
	if (watch1(r, k, -1, on_spare_end, op_new(r, 0)))
		store_error(r, CRUN_ECLOSED);
}

/* A count peeked at (closed, expect): absent is 0, else 0..max_nodes. */
static int peek_count(struct crun_rdzv *r, const struct crun_store_reply *rep,
		      size_t i, const char *what, int *out)
{
	char k[KEYMAX], why[200];
	int64_t v = 0;

	if (rep->values[i].len > 0 &&
	    rdzv_parse_int(rep->values[i].base, rep->values[i].len, 0,
			   r->o.max_nodes, &v, why, sizeof(why))) {
		key(r, k, "r%d/%s", r->round, what);
		bad_record(r, k, NULL, why);
		return CRUN_EPROTO;
	}
	*out = (int)v;
	return 0;
}

/*
 * MIN nodes are in and MAX is not: wait last_call_timeout for more. The
 * node that made MIN says so, or a lone node of an elastic range (and the
 * first of every larger one) would wait 30 s without a word.
 */
static void last_call_start(struct crun_rdzv *r)
{
	if (r->index == r->o.min_nodes && r->o.last_call_timeout >= 1)
		fprintf(stderr,
			"crun: round %d: %d of %d-%d nodes have joined: "
			"waiting up to %.0f s for more (last_call_timeout)\n",
			r->round, r->index, r->o.min_nodes, r->o.max_nodes,
			r->o.last_call_timeout);
	uv_timer_start(&r->last_call, on_last_call,
		       (uint64_t)(r->o.last_call_timeout * 1000), 0);
}

/* After ADD join, one peek: participant, late joiner, or stale round. */
static void on_join_state(int status, const struct crun_store_reply *rep,
			  void *arg)
{
	struct crun_rdzv *r = take_values(arg, status, rep, 3);
	char wk[4][KEYMAX];
	const char *kp[4] = {wk[0], wk[1], wk[2], wk[3]};
	int closed;

	if (r == NULL)
		return;
	if (rep->values[2].len > 0) {
		/* The round already ended: the next one is open. */
		return join_round(r);
	}
	if (peek_count(r, rep, 0, "closed", &closed) ||
	    peek_count(r, rep, 1, "expect", &r->expect))
		return;
	r->closed = closed;
	if (closed > 0 && r->index > closed)
		return late_or_spare(r, closed);
	/*
	 * A participant: wait for the assignment, reading ours and the
	 * envcheck lines with it (the store host, likely group rank 0, the
	 * addresses too); close when it is time.
	 */
	key(r, wk[0], "r%d/assigned", r->round);
	key(r, wk[1], "r%d/assign/%d", r->round, r->index);
	key(r, wk[2], "r%d/envcheck", r->round);
	key(r, wk[3], "r%d/addrs", r->round);
	if (r->ops->watch(r->kv, kp, r->o.is_store_host ? 4 : 3, -1,
			  on_assigned, op_new(r, 0)))
		return store_error(r, CRUN_ECLOSED);
	if (r->index >= r->o.min_nodes) {
		if (r->index >= r->o.max_nodes ||
		    (r->expect > 0 && r->index >= r->expect))
			try_close(r);
		else
			last_call_start(r);
	}
}

/*
 * This node's descriptor, from the options and the fingerprint so far.
 * The ip= list gives way to the rest: as many whole addresses as fit in
 * RDZV_MAX_RECORD.
 */
static void descr_build(struct crun_rdzv *r)
{
	const struct rdzv_opts *o = &r->o;
	const char *ips = o->ips ? o->ips : "";
	int base, room, n = (int)strlen(ips);

	base = snprintf(
	    NULL, 0, "%d %d %d %d %s %s %s%s%s", o->is_store_host ? 1 : 0,
	    o->static_rank >= 0 ? o->static_rank : 0, o->nproc, (int)getpid(),
	    o->host, o->addr, o->role, *r->fp ? " env=" : "", r->fp);
	room = RDZV_MAX_RECORD - base - 4; /* " ip=" */
	while (n > room) {
		const char *c = memrchr(ips, ',', (size_t)n);

		n = c ? (int)(c - ips) : 0;
	}
	snprintf(r->descr, sizeof(r->descr), "%d %d %d %d %s %s %s%s%.*s%s%s",
		 o->is_store_host ? 1 : 0,
		 o->static_rank >= 0 ? o->static_rank : 0, o->nproc,
		 (int)getpid(), o->host, o->addr, o->role, n > 0 ? " ip=" : "",
		 n, ips, *r->fp ? " env=" : "", r->fp);
}

/* Write the descriptor that waited for the fingerprint, if still wanted. */
static void descr_flush(struct crun_rdzv *r)
{
	char k[KEYMAX];
	int round = r->fp_pending, close = r->fp_close;

	r->fp_pending = -1;
	r->fp_close = 0;
	if (round < 0 || round != r->round || r->state != R_JOINING)
		return;
	key(r, k, "r%d/node/%d", round, r->fp_index);
	if (r->ops->set(r->kv, k, r->descr, strlen(r->descr), NULL, NULL))
		return store_error(r, CRUN_ECLOSED);
	if (close)
		try_close(r);
}

static void on_fp_timeout(uv_timer_t *t)
{
	struct crun_rdzv *r = t->data;

	if (!r->fp_wait)
		return;
	r->fp_wait = 0;
	fprintf(stderr,
		"crun: %s's fingerprint was not ready after %.1f s: its "
		"descriptor goes without it (env_check_timeout)\n",
		r->o.host, r->o.fingerprint_wait);
	descr_flush(r);
}

void rdzv_set_fingerprint(struct crun_rdzv *r, const char *fp)
{
	snprintf(r->fp, sizeof(r->fp), "%s", fp ? fp : "");
	descr_build(r);
	r->fp_wait = 0;
	uv_timer_stop(&r->fp_timer);
	descr_flush(r);
}

int rdzv_env_refused(const struct crun_rdzv *r)
{
	return r->env_refused;
}

static void on_join_index(int status, const struct crun_store_reply *rep,
			  void *arg)
{
	struct crun_rdzv *r = op_take(arg, NULL, NULL);
	char k[KEYMAX];
	int64_t index;

	if (r == NULL)
		return;
	if (status)
		return store_error(r, status);
	key(r, k, "r%d/join", r->round);
	if (record_int(r, rep, k, 1, INT32_MAX / 2, &index))
		return;
	r->index = (int)index;
	/*
	 * A descriptor still waiting for the fingerprint is written when it
	 * comes (or its bound passes); the closer's read waits for it.
	 */
	if (r->fp_wait) {
		r->fp_pending = r->round;
		r->fp_index = r->index;
		r->fp_close = 0;
		return;
	}
	key(r, k, "r%d/node/%d", r->round, r->index);
	if (r->ops->set(r->kv, k, r->descr, strlen(r->descr), NULL, NULL))
		store_error(r, CRUN_ECLOSED);
}

/*
 * Join round n: take an arrival index and, pipelined behind it, peek at
 * whether the round is closed, how many it expects and whether it ended
 * (answered in order: on_join_index has the index by then).
 */
static void join_at(struct crun_rdzv *r, int n)
{
	char k1[KEYMAX], k2[KEYMAX], k3[KEYMAX], k4[KEYMAX];
	const char *kp[3] = {k2, k3, k4};

	r->round = n;
	r->expect = 0;
	r->closed = 0;
	key(r, k1, "r%d/join", r->round);
	key(r, k2, "r%d/closed", r->round);
	key(r, k3, "r%d/expect", r->round);
	key(r, k4, "r%d/end", r->round);
	if (r->ops->add(r->kv, k1, 1, on_join_index, op_new(r, 0)) ||
	    r->ops->peek(r->kv, kp, 3, on_join_state, op_new(r, 0)))
		store_error(r, CRUN_ECLOSED);
}

static void on_round_number(int status, const struct crun_store_reply *rep,
			    void *arg)
{
	struct crun_rdzv *r = op_take(arg, NULL, NULL);
	char k[KEYMAX];
	int64_t round;

	if (r == NULL)
		return;
	if (status)
		return store_error(r, status);
	key(r, k, "round");
	if (record_int(r, rep, k, r->aborted + 1, INT32_MAX - 2, &round))
		return;
	join_at(r, (int)round);
}

static void excl_check(struct crun_rdzv *r);

/* Read the current round (creating round 0) and join it. */
static void join_round_now(struct crun_rdzv *r)
{
	char k[KEYMAX];

	r->state = R_JOINING;
	uv_timer_stop(&r->last_call);
	if (r->ended >= 0 && r->ended == r->round && r->round < INT32_MAX - 2) {
		/*
		 * We read round R's end: whoever ended it advanced "round" to
		 * R+1 just before (rdzv_end_round), so join R+1 without asking.
		 * Had R+1 ended too, the peek after joining sends us on.
		 */
		r->ended = -1;
		return join_at(r, r->round + 1);
	}
	key(r, k, "round");
	if (r->ops->compare_set(r->kv, k, "", 0, "0", 1, on_round_number,
				op_new(r, 0)))
		store_error(r, CRUN_ECLOSED);
}

/*
 * What `crun status` cannot learn otherwise: the restart budget and the
 * heartbeat interval this agent runs with (one write as it first joins).
 */
static void write_params(struct crun_rdzv *r)
{
	char k[KEYMAX], v[96];

	key(r, k, "params");
	snprintf(v, sizeof(v), "max_restarts=%d keep_alive_ms=%lld",
		 r->o.max_restarts,
		 (long long)(r->o.keep_alive_interval * 1000 >= 1
				 ? r->o.keep_alive_interval * 1000
				 : 1));
	r->ops->set(r->kv, k, v, strlen(v), NULL, NULL);
}

/* Join the next round, unless this node is left out of it (see below). */
static void join_round(struct crun_rdzv *r)
{
	r->state = R_JOINING;
	uv_timer_stop(&r->last_call);
	if (r->o.exclude_after > 0)
		return excl_check(r);
	join_round_now(r);
}

static void on_config(int status, const struct crun_store_reply *rep, void *arg)
{
	struct crun_rdzv *r = op_take(arg, NULL, NULL);

	if (r == NULL)
		return;
	if (status)
		return store_error(r, status);
	if (!reply_is(rep, r->config))
		return round_fail(
		    r, CRUN_ERDZV_MISMATCH,
		    "rendezvous '%s' already runs with \"%.*s\"; this node has "
		    "\"%s\": start every node with the same --nnodes, "
		    "backend and crun version (proto=)",
		    r->run_id, (int)rep->len, (const char *)rep->value,
		    r->config);
	write_params(r);
	join_round(r);
}

static void check_config(struct crun_rdzv *r)
{
	char k[KEYMAX];

	snprintf(r->prefix, sizeof(r->prefix), "crun/%s/", r->run_id);
	key(r, k, "config");
	if (r->ops->compare_set(r->kv, k, "", 0, r->config, strlen(r->config),
				on_config, op_new(r, 0)))
		store_error(r, CRUN_ECLOSED);
}

static void on_job_id(int status, const struct crun_store_reply *rep, void *arg)
{
	struct crun_rdzv *r = op_take(arg, NULL, NULL);

	if (r == NULL)
		return;
	if (status)
		return store_error(r, status);
	if (*r->run_id && !reply_is(rep, r->run_id))
		return round_fail(
		    r, CRUN_ERDZV_MISMATCH,
		    "the rendezvous endpoint serves job '%.*s', not '%s': "
		    "use the same --rdzv_id on every node, or another endpoint",
		    (int)rep->len, (const char *)rep->value, r->run_id);
	if (rep->len == 0 || rep->len >= sizeof(r->run_id) ||
	    memchr(rep->value, '/', rep->len) != NULL)
		return round_fail(r, CRUN_EPROTO,
				  "malformed rendezvous record 'crun/job': not "
				  "a job id");
	for (size_t i = 0; i < rep->len; i++)
		if (((const unsigned char *)rep->value)[i] <= 0x20 ||
		    ((const unsigned char *)rep->value)[i] >= 0x7f)
			return round_fail(r, CRUN_EPROTO,
					  "malformed rendezvous record "
					  "'crun/job': not a job id");
	memcpy(r->run_id, rep->value, rep->len);
	r->run_id[rep->len] = '\0';
	check_config(r);
}

int rdzv_next(struct crun_rdzv *r, rdzv_round_cb cb, void *data)
{
	int rc;

	if (r->state == R_JOINING || r->state == R_DONE)
		return CRUN_EUSAGE;
	/* From a running round that we ended ourselves: its watch is moot. */
	stop_timers(r);
	r->cb = cb;
	r->cb_data = data;
	r->env_refused = 0;
	r->state = R_JOINING;
	r->deadline_phase = 0;
	uv_timer_start(&r->deadline, on_deadline,
		       (uint64_t)(r->o.join_timeout * 1000), 0);
	if (*r->prefix) {
		join_round(r);
		return 0;
	}
	/* First round: agree on the job id (adopt the endpoint's if we have
	 * none). */
	if (*r->run_id)
		rc = r->ops->compare_set(r->kv, "crun/job", "", 0, r->run_id,
					 strlen(r->run_id), on_job_id,
					 op_new(r, 0));
	else
		rc = watch1(r, "crun/job", (int)(r->o.join_timeout * 1000),
			    on_job_id, op_new(r, 0));
	if (rc) {
		r->state = R_IDLE;
		uv_timer_stop(&r->deadline);
	}
	return rc;
}

/* --- running ------------------------------------------------------------ */

/* The round's "end" value: its first byte is the kind, then the reason. */
static void on_end_value(int status, const struct crun_store_reply *rep,
			 void *arg)
{
	struct crun_rdzv *r = op_take(arg, NULL, NULL);
	char text[512], why[200], k[KEYMAX];
	int kind;

	if (r == NULL || status == CRUN_ECANCELED)
		return;
	if (status)
		return store_error(r, status);
	if (rep->nvalues != 1)
		return store_error(r, CRUN_EPROTO);
	key(r, k, "r%d/end", r->round);
	if (rdzv_parse_end(rep->values[0].base, rep->values[0].len, &kind, text,
			   sizeof(text), why, sizeof(why)))
		return bad_record(r, k, NULL, why);
	r->ended = r->round;
	round_ended(r, kind, text);
}

/* Our end/<g> mark is set: it says why the round ended, or to read "end". */
static void on_node_end(int status, const struct crun_store_reply *rep,
			void *arg)
{
	struct crun_rdzv *r = op_take(arg, NULL, NULL);
	char k[KEYMAX], text[512], why[200];
	const char *kp[1] = {k};
	int kind;

	if (r == NULL || status == CRUN_ECANCELED)
		return;
	if (status)
		return store_error(r, status);
	if (!reply_is(rep, "1")) {
		key(r, k, "r%d/end/%d", r->round, r->grank);
		if (rdzv_parse_end(rep->value, rep->len, &kind, text,
				   sizeof(text), why, sizeof(why)))
			return bad_record(r, k, NULL, why);
		r->ended = r->round;
		return round_ended(r, kind, text);
	}
	key(r, k, "r%d/end", r->round);
	if (r->ops->multi_get(r->kv, kp, 1, 10000, on_end_value, op_new(r, 0)))
		store_error(r, CRUN_ECLOSED);
}

static void on_hb_tick(uv_timer_t *t);

static void on_dead_host(int status, const struct crun_store_reply *rep,
			 void *arg)
{
	struct op *o = arg;
	struct crun_rdzv *r = o->r;
	char host[256] = "?", why[400];

	if (r->state == R_RUNNING || r->state == R_FINISHING) {
		if (status == 0 && rep->nvalues == 1)
			reply_str(rep, 0, host, sizeof(host));
		snprintf(why, sizeof(why), "%s (group rank %d) %s", host,
			 o->arg, (const char *)o->data);
		if (o->round == r->round)
			rdzv_end_round(r, RDZV_END_DEAD, why);
	}
	free(o);
}

/* Node g is gone: end the round, naming its host (read from the store). */
static void declare_dead(struct crun_rdzv *r, int g, const char *how)
{
	char k[KEYMAX];
	const char *kp[1] = {k};
	struct op *o = op_new(r, g);

	o->data = (void *)how; /* a string literal */
	key(r, k, "r%d/host/%d", r->round, g);
	if (r->ops->multi_get(r->kv, kp, 1, 2000, on_dead_host, o))
		free(o);
}

/* The watched successor stalled: did it finish (then watch the next one)? */
static void on_succ_done(int status, const struct crun_store_reply *rep,
			 void *arg)
{
	struct crun_rdzv *r = op_take(arg, NULL, NULL);

	if (r == NULL || (r->state != R_RUNNING && r->state != R_FINISHING))
		return;
	if (status)
		return store_error(r, status);
	if (!reply_is(rep, PEEK)) {
		/* It left after success: watch the node after it instead. */
		r->succ = (r->succ + 1) % r->gworld;
		r->succ_stall = 0;
		r->succ_last = -1;
		return;
	}
	declare_dead(r, r->succ, "stopped answering");
}

static void on_hb_succ(int status, const struct crun_store_reply *rep,
		       void *arg)
{
	struct crun_rdzv *r = op_take(arg, NULL, NULL);
	char k[KEYMAX];
	int64_t v;

	if (r == NULL || (r->state != R_RUNNING && r->state != R_FINISHING))
		return;
	if (status)
		return store_error(r, status);
	r->hb_pending = 0;
	r->hb_silence = 0;
	r->last_reply = uv_now(r->loop);
	v = reply_int(rep);
	if (v != r->succ_last) {
		r->succ_stall = 0;
		r->succ_last = v;
		return;
	}
	if (++r->succ_stall < r->o.keep_alive_max_attempt)
		return;
	r->succ_stall = 0;
	key(r, k, "r%d/done/%d", r->round, r->succ);
	if (r->ops->compare_set(r->kv, k, PEEK, strlen(PEEK), "", 0,
				on_succ_done, op_new(r, 0)))
		store_error(r, CRUN_ECLOSED);
}

/*
 * Every keep_alive_interval: bump our counter and read the successor's. A
 * node that finished leaves a done/<g> mark, so its silence is not a death.
 */
static void on_hb_tick(uv_timer_t *t)
{
	struct crun_rdzv *r = t->data;
	uint64_t limit = r->o.heartbeat_timeout > 0
			     ? (uint64_t)(r->o.heartbeat_timeout * 1000)
			     : r->hb_ms * (uint64_t)r->o.keep_alive_max_attempt;
	uint64_t now = uv_now(r->loop), step = now - r->hb_tick;
	char k1[KEYMAX], k2[KEYMAX];

	if (r->state != R_RUNNING && r->state != R_FINISHING)
		return;
	/*
	 * The time since the store's last reply is counted in our own ticks:
	 * a tick that comes late (this process got no CPU, or was stopped)
	 * adds one interval, not the time we were not running to see one.
	 */
	r->hb_tick = now;
	r->hb_silence += step < r->hb_ms ? step : r->hb_ms;
	if (r->hb_pending && r->hb_silence > limit) {
		char why[256];

		/*
		 * Timers run before the loop reads its sockets: the reply may
		 * be waiting unread. Judge once more after one poll of them.
		 */
		if (!r->hb_recheck) {
			r->hb_recheck = 1;
			uv_timer_start(&r->hb, on_hb_tick, 1, r->hb_ms);
			return;
		}

		snprintf(why, sizeof(why),
			 "no reply from the rendezvous store for %.1f s",
			 (double)(uv_now(r->loop) - r->last_reply) / 1000);
		round_ended(r, RDZV_END_LOST, why);
		return;
	}
	r->hb_recheck = 0;
	key(r, k1, "r%d/hb/%d", r->round, r->grank);
	if (r->ops->add(r->kv, k1, 1, NULL, NULL))
		return store_error(r, CRUN_ECLOSED);
	if (r->succ == r->grank)
		return; /* everyone else finished */
	key(r, k2, "r%d/hb/%d", r->round, r->succ);
	r->hb_pending = 1;
	if (r->ops->add(r->kv, k2, 0, on_hb_succ, op_new(r, 0)))
		store_error(r, CRUN_ECLOSED);
}

static void start_running(struct crun_rdzv *r)
{
	char k[KEYMAX];
	double s = r->o.keep_alive_interval;
	uint64_t ms;

	/* Keep the host's heartbeat load to heartbeat_rate at any size. */
	if (r->o.heartbeat_rate > 0 && r->gworld / r->o.heartbeat_rate > s)
		s = r->gworld / r->o.heartbeat_rate;
	ms = (uint64_t)(s * 1000);
	r->hb_ms = ms ? ms : 1;
	/* A key of our own, so the store host can tell when we vanish. */
	key(r, k, "r%d/end/%d", r->round, r->grank);
	if (watch1(r, k, -1, on_node_end, op_new(r, 0)))
		return store_error(r, CRUN_ECLOSED);
	uv_timer_start(&r->hb, on_hb_tick, ms ? ms : 1, ms ? ms : 1);
}

/* --- ending ------------------------------------------------------------- */

static void excl_decide(struct crun_rdzv *r, int round, int64_t restarts);
static void end_chain_done(struct crun_rdzv *r);

/* The job-wide restart count after round R, for everyone deciding on R+1. */
static void on_restart_total(int status, const struct crun_store_reply *rep,
			     void *arg)
{
	struct op *o = arg;
	struct crun_rdzv *r = o->r;
	char k[KEYMAX], v[24];

	if (status == 0 && r->state != R_DONE) {
		if (o->arg == RDZV_END_FAILURE && r->o.exclude_after > 0) {
			end_chain_done(r);
			excl_decide(r, o->round, reply_int(rep));
			free(o);
			return;
		}
		snprintf(v, sizeof(v), "%" PRId64, reply_int(rep));
		key(r, k, "r%d/restarts", o->round + 1);
		r->ops->set(r->kv, k, v, strlen(v), NULL, NULL);
	}
	end_chain_done(r);
	free(o);
}

/*
 * The reply to our CAS of "end". Only the node whose end was recorded counts
 * (failures cost one). The CAS of "round" cannot tell: a losing CAS is
 * answered with the current value, which is the very round it wanted.
 */
static void on_end_recorded(int status, const struct crun_store_reply *rep,
			    void *arg)
{
	struct op *o = arg;
	struct crun_rdzv *r = o->r;
	char k[KEYMAX];

	/*
	 * Mark every participant with the recorded end, ours or the one that
	 * was there first (its writer may have died before marking).
	 */
	if (status == 0)
		mark_ended(r, o->n, rep->value, rep->len);
	if (status == 0 && reply_is(rep, o->data) && r->state != R_DONE) {
		struct op *t = op_new(r, o->arg);

		t->round = o->round;
		key(r, k, "restarts");
		if (r->ops->add(r->kv, k, o->arg == RDZV_END_FAILURE ? 1 : 0,
				on_restart_total, t)) {
			free(t);
			end_chain_done(r);
		}
	} else {
		end_chain_done(r);
	}
	free(o->data);
	free(o);
}

/*
 * After "end" is written: set every participant's end/<g> (what each one
 * watches) to it, so they all learn it and why, in one MULTI_SET. A long
 * reason is not copied N times: "1" tells them to read "end".
 */
#define END_MARK_MAX 160

static int mark_ended(struct crun_rdzv *r, int n, const void *v, size_t len)
{
	char(*keys)[KEYMAX];
	const char **kp;
	const void **vp;
	size_t *lens;
	int rc = 0;

	if (n <= 0)
		return 0;
	keys = calloc((size_t)n, sizeof(*keys));
	kp = calloc((size_t)n, sizeof(*kp));
	vp = calloc((size_t)n, sizeof(*vp));
	lens = calloc((size_t)n, sizeof(*lens));
	if (!keys || !kp || !vp || !lens)
		abort();
	for (int g = 0; g < n; g++) {
		key(r, keys[g], "r%d/end/%d", r->round, g);
		kp[g] = keys[g];
		vp[g] = len > 0 && len <= END_MARK_MAX ? v : "1";
		lens[g] = len > 0 && len <= END_MARK_MAX ? len : 1;
	}
	rc = r->ops->multi_set(r->kv, kp, vp, lens, (size_t)n, NULL, NULL);
	free(keys);
	free(kp);
	free(vp);
	free(lens);
	return rc;
}

int rdzv_end_round(struct crun_rdzv *r, int kind, const char *why)
{
	char k[KEYMAX], cur[16], next[16], val[600], ek[KEYMAX];
	int n = r->state == R_RUNNING || r->state == R_ENDED ? r->gworld
							     : r->closed;
	int expect;
	struct op *o = op_new(r, kind);
	int rc;

	o->round = r->round;
	expect = kind == RDZV_END_DEAD	 ? n - 1
		 : kind == RDZV_END_JOIN ? n + 1
					 : n;
	if (expect > r->o.max_nodes)
		expect = r->o.max_nodes;
	snprintf(cur, sizeof(cur), "%d", r->round);
	snprintf(next, sizeof(next), "%d", r->round + 1);
	snprintf(val, sizeof(val), "%c %s", kind, why);
	key(r, ek, "r%d/expect", r->round + 1);
	if (kind == RDZV_END_FAILURE) {
		/* The job's last failure, with its time, for `crun status`. */
		uv_timeval64_t tv;
		char fv[700];

		if (uv_gettimeofday(&tv) == 0) {
			snprintf(fv, sizeof(fv), "%d %lld %s", r->round,
				 (long long)tv.tv_sec * 1000 +
				     tv.tv_usec / 1000,
				 why);
			key(r, k, "failure");
			r->ops->set(r->kv, k, fv, strlen(fv), NULL, NULL);
		}
	}
	key(r, k, "round");
	/* In order: the next round's expectation, the round, then the reason.
	 */
	if (expect > 0) {
		char e[16];

		snprintf(e, sizeof(e), "%d", expect);
		r->ops->set(r->kv, ek, e, strlen(e), NULL, NULL);
	}
	rc = r->ops->compare_set(r->kv, k, cur, strlen(cur), next, strlen(next),
				 NULL, NULL);
	if (rc) {
		free(o);
		return rc;
	}
	key(r, k, "r%d/end", r->round);
	o->data = strdup(val);
	if (o->data == NULL)
		abort();
	o->n = n;
	r->end_chain++;
	rc = r->ops->compare_set(r->kv, k, "", 0, val, strlen(val),
				 on_end_recorded, o);
	if (rc) {
		r->end_chain--;
		free(o->data);
		free(o);
	}
	return rc;
}

/* Abort a round that is still forming; "assigned" tells its participants. */
static void abort_round(struct crun_rdzv *r, int kind, const char *why)
{
	char k[KEYMAX], val[600];

	key(r, k, "r%d/assigned", r->round);
	snprintf(val, sizeof(val), "abort %c %s", kind, why);
	rdzv_end_round(r, kind, why);
	r->ops->set(r->kv, k, val, strlen(val), NULL, NULL);
}

static void excl_over(struct crun_rdzv *r, int kind, const char *why);

struct may {
	struct crun_rdzv *r;
	int kind;
	int64_t restarts;
	void (*cb)(struct crun_rdzv *, int, void *);
	void *data;
};

static void on_may_finished(int status, const struct crun_store_reply *rep,
			    void *arg)
{
	struct may *m = arg;
	int ok = 0;

	if (status == 0 && m->r->state != R_DONE) {
		int64_t finished = reply_int(rep);

		ok = finished == 0;
		if (m->kind == RDZV_END_FAILURE &&
		    m->restarts > m->r->o.max_restarts)
			ok = 0;
		if (m->kind == RDZV_END_DEAD &&
		    m->r->gworld - 1 < m->r->o.min_nodes)
			ok = 0;
		if (m->kind == RDZV_END_DEAD && m->r->o.static_rank >= 0)
			ok = 0;
		if (m->kind == RDZV_END_SUCCESS || m->kind == RDZV_END_FATAL ||
		    m->kind == RDZV_END_LOST)
			ok = 0;
		if (!ok)
			excl_over(m->r, m->kind, m->r->errmsg);
	}
	if (m->r->state != R_DONE)
		m->cb(m->r, ok, m->data);
	free(m);
}

static void on_may_restarts(int status, const struct crun_store_reply *rep,
			    void *arg)
{
	struct may *m = arg;
	char k[KEYMAX], why[200];

	key(m->r, k, "r%d/restarts", m->r->round + 1);
	if (status == 0 &&
	    rdzv_parse_int(rep->value, rep->len, 0, INT32_MAX, &m->restarts,
			   why, sizeof(why)) != 0) {
		fprintf(stderr,
			"crun: malformed rendezvous record '%s': %s: no "
			"restart\n",
			k, why);
		m->restarts = INT64_MAX;
	} else if (status == 0) {
		m->r->restarts = m->restarts;
	} else {
		m->restarts = INT64_MAX; /* unknown: do not restart */
	}
	key(m->r, k, "r%d/finished", m->r->round);
	if (m->r->state == R_DONE ||
	    m->r->ops->add(m->r->kv, k, 0, on_may_finished, m))
		on_may_finished(CRUN_ECLOSED, NULL, m);
}

int rdzv_may_restart(struct crun_rdzv *r, int kind,
		     void (*cb)(struct crun_rdzv *r, int ok, void *data),
		     void *data)
{
	struct may *m = calloc(1, sizeof(*m));
	char k[KEYMAX];
	int rc;

	if (m == NULL)
		return UV_ENOMEM;
	m->r = r;
	m->kind = kind;
	m->cb = cb;
	m->data = data;
	if (kind == RDZV_END_LOST || kind == RDZV_END_FATAL) {
		/*
		 * Without the store there is nothing to ask; a fatal end
		 * (maybe a forged record nobody counted) never restarts.
		 */
		if (kind == RDZV_END_FATAL)
			excl_over(r, kind, r->errmsg);
		free(m);
		cb(r, 0, data);
		return 0;
	}
	/*
	 * Written by whoever moved the round on, maybe this very node once its
	 * CAS reply is in: wait on the watch channel so the main channel stays
	 * free for that write.
	 */
	key(r, k, "r%d/restarts", r->round + 1);
	r->end_unwatched = 1; /* the one watch channel moves on */
	rc = watch1(r, k, 10000, on_may_restarts, m);
	if (rc)
		free(m);
	return rc;
}

/* Finishing is over: tell the agent once. */
static void finish_done(struct crun_rdzv *r)
{
	void (*cb)(struct crun_rdzv *, void *) = r->finish_cb;

	if (r->state != R_FINISHING)
		return;
	r->state = R_ENDED;
	stop_timers(r);
	r->finish_cb = NULL;
	if (cb)
		cb(r, r->finish_data);
}

static void on_all_left(int status, const struct crun_store_reply *rep,
			void *arg)
{
	struct crun_rdzv *r = arg;

	(void)rep;
	if (status == CRUN_ECANCELED)
		return;
	/* The store host also waits (bounded) for the nodes left out. */
	if (status == 0 && r->o.exclude_after > 0 && r->o.is_store_host)
		return excl_host_wait(r);
	finish_done(r);
}

static void on_finish_timeout(uv_timer_t *t)
{
	finish_done(t->data);
}

/* A node leaving waited close_timeout for the store to take note of it. */
static void on_leave_timeout(uv_timer_t *t)
{
	struct crun_rdzv *r = t->data;

	fprintf(stderr,
		"crun: the rendezvous store did not answer within "
		"close_timeout (%g s): leaving without its acknowledgement\n",
		r->o.close_timeout);
	finish_done(r);
}

/* A node that is not the store host leaves: the store's answer, bounded. */
static void leave_bounded(struct crun_rdzv *r)
{
	if (!r->o.is_store_host)
		uv_timer_start(&r->deadline, on_leave_timeout,
			       (uint64_t)(r->o.close_timeout * 1000), 0);
}

/* The round ended: the others stop and leave; wait for that, bounded. */
static void host_wait_left(struct crun_rdzv *r)
{
	char k[KEYMAX];

	key(r, k, "r%d/all_left", r->round);
	uv_timer_start(&r->deadline, on_finish_timeout,
		       (uint64_t)(r->o.close_timeout * 1000), 0);
	if (watch1(r, k, -1, on_all_left, r))
		finish_done(r);
}

static void on_finished_count(int status, const struct crun_store_reply *rep,
			      void *arg)
{
	struct crun_rdzv *r = arg;
	char k[KEYMAX];

	if (r->state != R_FINISHING)
		return;
	if (status)
		return finish_done(r);
	if (reply_int(rep) >= r->gworld) {
		/* The last one out: release the store host. */
		excl_over(r, RDZV_END_SUCCESS, "all nodes finished");
		key(r, k, "r%d/all_left", r->round);
		r->ops->set(r->kv, k, "1", 1, NULL, NULL);
		key(r, k, "r%d/end", r->round);
		r->ops->compare_set(r->kv, k, "", 0, "S all nodes finished", 20,
				    NULL, NULL);
		mark_ended(r, r->gworld, "1", 1); /* "end" may hold another */
	}
	if (!r->o.is_store_host)
		return finish_done(r);
	/*
	 * The store host serves until every node has left: while the round
	 * runs it keeps its heartbeat and its watch on "end" (which the last
	 * node out sets); once the round ended, it waits for the rest to leave.
	 */
	if (r->end_seen)
		host_wait_left(r);
}

static void on_left_count(int status, const struct crun_store_reply *rep,
			  void *arg);

int rdzv_finish(struct crun_rdzv *r,
		void (*cb)(struct crun_rdzv *r, void *data), void *data)
{
	char k1[KEYMAX], k2[KEYMAX];

	if (!r->o.is_store_host || r->end_seen)
		uv_timer_stop(&r->hb);
	uv_timer_stop(&r->last_call);
	r->state = R_FINISHING;
	r->round = r->res.round;
	r->finish_cb = cb;
	r->finish_data = data;
	leave_bounded(r);
	/*
	 * The store host waits for the round's end before it stops serving;
	 * if asking whether to restart took its watch on end/<g>, watch it
	 * again (it is set already after a failure: the watch fires at once).
	 */
	if (r->o.is_store_host && !r->end_seen && r->end_unwatched) {
		r->end_unwatched = 0;
		key(r, k1, "r%d/end/%d", r->round, r->grank);
		if (watch1(r, k1, -1, on_node_end, op_new(r, 0)))
			return CRUN_ECLOSED;
	}
	key(r, k1, "r%d/done/%d", r->round, r->grank);
	key(r, k2, "r%d/finished", r->round);
	if (r->ops->set(r->kv, k1, "1", 1, NULL, NULL))
		return CRUN_ECLOSED;
	key(r, k1, "r%d/left", r->round);
	if (r->ops->add(r->kv, k1, 1, on_left_count, r))
		return CRUN_ECLOSED;
	return r->ops->add(r->kv, k2, 1, on_finished_count, r);
}

/*
 * Nodes that finished or departed, counted together: the last one out
 * releases the store host (which waits on "all_left").
 */
static void on_left_count(int status, const struct crun_store_reply *rep,
			  void *arg)
{
	struct crun_rdzv *r = arg;
	char k[KEYMAX];

	if (status || r->state != R_FINISHING || reply_int(rep) < r->gworld)
		return;
	key(r, k, "r%d/all_left", r->round);
	r->ops->set(r->kv, k, "1", 1, NULL, NULL);
}

static void on_departed(int status, const struct crun_store_reply *rep,
			void *arg)
{
	on_left_count(status, rep, arg);
	if (status != CRUN_ECANCELED)
		finish_done(arg);
}

static int depart_now(struct crun_rdzv *r)
{
	char k[KEYMAX];

	/* A round trip behind our "end" writes; not counted as finished. */
	key(r, k, "r%d/left", r->round);
	return r->ops->add(r->kv, k, 1, on_departed, r);
}

int rdzv_depart(struct crun_rdzv *r,
		void (*cb)(struct crun_rdzv *r, void *data), void *data)
{
	uv_timer_stop(&r->hb);
	uv_timer_stop(&r->last_call);
	r->state = R_FINISHING;
	r->round = r->res.round;
	r->finish_cb = cb;
	r->finish_data = data;
	leave_bounded(r);
	/*
	 * If our end was recorded, the others wait for the next round's
	 * restart count, which we write once the store answers our CAS: leave
	 * only after that (or they wait 10 s for it).
	 */
	if (r->end_chain > 0) {
		r->depart_wait = 1;
		return 0;
	}
	return depart_now(r);
}

/* Our end's CAS and what follows from it are sent: a departure may go on. */
static void end_chain_done(struct crun_rdzv *r)
{
	if (r->end_chain > 0)
		r->end_chain--;
	if (r->end_chain > 0 || !r->depart_wait || r->state != R_FINISHING)
		return;
	r->depart_wait = 0;
	if (depart_now(r))
		finish_done(r);
}

/* --- vanished nodes (store host only) ---------------------------------- */

static void on_gone_count(int status, const struct crun_store_reply *rep,
			  void *arg);

static void on_vanished_done(int status, const struct crun_store_reply *rep,
			     void *arg)
{
	int g;
	struct crun_rdzv *r = op_take(arg, NULL, &g);

	if (r == NULL || status ||
	    (r->state != R_RUNNING && r->state != R_FINISHING))
		return;
	if (reply_is(rep, PEEK)) {
		char k[KEYMAX];

		/*
		 * Its connection closed: it will never leave by itself. Count
		 * it as left, so that the store host does not wait
		 * close_timeout for it at the end.
		 */
		key(r, k, "r%d/left", r->round);
		r->ops->add(r->kv, k, 1, on_gone_count, op_new(r, 0));
		return declare_dead(r, g, "disconnected");
	}
	/*
	 * It finished and left. If it was the last one out and died before
	 * its "all_left" and end marks, nobody else would write them: a store
	 * host that finished first would wait for them forever. Count again.
	 */
	if (r->state == R_FINISHING && !r->end_seen) {
		char k[KEYMAX];

		key(r, k, "r%d/finished", r->round);
		r->ops->add(r->kv, k, 0, on_finished_count, r);
	}
}

/* A vanished node counted as left: the last one out releases the host. */
static void on_gone_count(int status, const struct crun_store_reply *rep,
			  void *arg)
{
	struct crun_rdzv *r = op_take(arg, NULL, NULL);
	char k[KEYMAX];

	if (r == NULL || status || reply_int(rep) < r->gworld)
		return;
	key(r, k, "r%d/all_left", r->round);
	r->ops->set(r->kv, k, "1", 1, NULL, NULL);
}

static void on_vanished_end(int status, const struct crun_store_reply *rep,
			    void *arg)
{
	int g;
	struct crun_rdzv *r = op_take(arg, NULL, &g);
	char k[KEYMAX];

	if (r == NULL || status || !reply_is(rep, PEEK))
		return; /* the round already ended: leaving is expected */
	key(r, k, "r%d/done/%d", r->round, g);
	r->ops->compare_set(r->kv, k, PEEK, strlen(PEEK), "", 0,
			    on_vanished_done, op_new(r, g));
}

/*
 * The store host saw a client vanish while it waited on "r<R>/end/<g>":
 * node g's agent died or its connection broke. Unless the round already
 * ended or g finished, that node is gone: end the round now rather than
 * after missed heartbeats.
 */
static void rdzv_on_vanish(void *arg, const char *k, size_t klen)
{
	struct crun_rdzv *r = arg;
	char buf[KEYMAX], tail[16];
	size_t plen = strlen(r->prefix);
	int round, g;

	if (klen >= sizeof(buf) || klen <= plen ||
	    memcmp(k, r->prefix, plen) != 0)
		return;
	memcpy(buf, k + plen, klen - plen);
	buf[klen - plen] = '\0';
	if (strncmp(buf, "over/", 5) == 0 && r->o.exclude_after > 0) {
		/* A node left out went away: do not wait for it at the end. */
		char ack[KEYMAX];

		key(r, ack, "over_seen/%s", buf + 5);
		r->ops->set(r->kv, ack, "gone", 4, NULL, NULL);
		return;
	}
	if (sscanf(buf, "r%d/end/%d%15s", &round, &g, tail) != 2)
		return;
	if (round != r->round || g == r->grank || g < 0 || g >= r->gworld ||
	    (r->state != R_RUNNING && r->state != R_FINISHING))
		return;
	key(r, buf, "r%d/end", r->round);
	r->ops->compare_set(r->kv, buf, PEEK, strlen(PEEK), "", 0,
			    on_vanished_end, op_new(r, g));
}

/* --- leaving out a failing node (exclude_after > 0; see rdzv.h) ------- */

/* Wall-clock time in milliseconds: "until" is in epoch seconds. */
static int64_t wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int excl_is_self(const struct crun_rdzv *r, const char *host,
			const char *addr, const char *id)
{
	return strcmp(host, r->o.host) == 0 && strcmp(addr, r->xaddr) == 0 &&
	       strcmp(id, r->id) == 0;
}

/* Two entries name the same node. */
static int excl_same(const struct rdzv_exclusion *a,
		     const struct rdzv_exclusion *b)
{
	return strcmp(a->host, b->host) == 0 && strcmp(a->addr, b->addr) == 0 &&
	       strcmp(a->id, b->id) == 0;
}

/*
 * "HH:MM:SS UTC" of an epoch second, for messages; with the date when it
 * is not within the next day.
 */
static const char *excl_clock(int64_t t, char *buf, size_t len)
{
	time_t tt = (time_t)t;
	int64_t ahead = t - wall_ms() / 1000;
	struct tm tm;

	if (gmtime_r(&tt, &tm) == NULL ||
	    strftime(buf, len,
		     ahead >= 0 && ahead < 86400 ? "%H:%M:%S UTC"
						 : "%Y-%m-%d %H:%M:%S UTC",
		     &tm) == 0)
		snprintf(buf, len, "%lld", (long long)t);
	return buf;
}

/* Format the exclusions as the "excluded" record. */
static size_t excl_format(const struct rdzv_exclusion *x, int n, char *buf,
			  size_t len)
{
	size_t o = (size_t)snprintf(buf, len, "%d", n);

	for (int i = 0; i < n && o < len; i++)
		o += (size_t)snprintf(buf + o, len - o, " %s %s%s%s %lld %d %d",
				      x[i].host, x[i].addr, *x[i].id ? "#" : "",
				      x[i].id, (long long)x[i].until,
				      x[i].round, x[i].fails);
	return o < len ? o : len - 1;
}

/*
 * An entry's until can lie at most exclude_for ahead (rounded up, and
 * EXCL_SKEW_S for the clocks of other nodes): a later one is forged, or
 * from a job with other settings. why gets the reason, or "".
 */
#define EXCL_SKEW_S 60
static void excl_in_range(const struct crun_rdzv *r,
			  const struct rdzv_exclusion *x, int n, char *why,
			  size_t wlen)
{
	int64_t now = wall_ms() / 1000,
		max = now + (int64_t)r->o.exclude_for + 1 + EXCL_SKEW_S;

	why[0] = '\0';
	for (int i = 0; i < n; i++)
		if (x[i].until > max) {
			snprintf(
			    why, wlen,
			    "%.64s (%.64s) is left out %lld s ahead, more than "
			    "exclude_for=%g s allows",
			    x[i].host, x[i].addr, (long long)(x[i].until - now),
			    r->o.exclude_for);
			return;
		}
}

/*
 * Parse a read of "excluded" (PEEK: none). Untrusted: a malformed record
 * is named in one line and read as empty, so a forged value can neither
 * crash a node nor keep one out.
 */
static int excl_parse(struct crun_rdzv *r, const struct crun_store_reply *rep,
		      struct rdzv_exclusion *x)
{
	char why[200], k[KEYMAX];
	int n = 0;

	why[0] = '\0';
	if (rep->value == NULL || reply_is(rep, PEEK))
		return 0;
	if (rdzv_parse_excluded(rep->value, rep->len, x, RDZV_MAX_EXCLUDED, &n,
				why, sizeof(why)) == 0)
		excl_in_range(r, x, n, why, sizeof(why));
	if (*why) {
		key(r, k, "excluded");
		fprintf(stderr,
			"crun: malformed rendezvous record '%s': %s: read as "
			"no node left out\n",
			k, why);
		return 0;
	}
	return n;
}

static void excl_notify(struct crun_rdzv *r, const struct rdzv_exclusion *x,
			int readmitted, const char *why)
{
	if (r->o.on_exclusion)
		r->o.on_exclusion(r->o.data, x, readmitted,
				  excl_is_self(r, x->host, x->addr, x->id),
				  why);
}

/* A new reading of "excluded": tell about the changes, keep it. */
static void excl_update(struct crun_rdzv *r, const struct rdzv_exclusion *x,
			int n)
{
	char why[300];

	for (int i = 0; r->excl_known && i < n; i++) {
		int seen = 0;

		for (int j = 0; j < r->nexcl && !seen; j++)
			seen = excl_same(&x[i], &r->excl[j]);
		if (seen || excl_is_self(r, x[i].host, x[i].addr, x[i].id))
			continue;
		snprintf(why, sizeof(why),
			 "the last %d failure-ended rounds failed first on it",
			 x[i].fails);
		excl_notify(r, &x[i], 0, why);
	}
	for (int j = 0; r->excl_known && j < r->nexcl; j++) {
		int kept = 0;

		for (int i = 0; i < n && !kept; i++)
			kept = excl_same(&x[i], &r->excl[j]);
		if (!kept && !excl_is_self(r, r->excl[j].host, r->excl[j].addr,
					   r->excl[j].id))
			excl_notify(r, &r->excl[j], 1, "its cooldown ended");
	}
	memcpy(r->excl, x, (size_t)n * sizeof(*x));
	r->nexcl = n;
	r->excl_known = 1;
}

static void excl_readmit(struct crun_rdzv *r);
static void excl_rejoin(struct crun_rdzv *r);
static void on_over_seen(int status, const struct crun_store_reply *rep,
			 void *arg);

/* The job ended, or the cooldown did, while this node sat out. */
static void on_sitout_over(int status, const struct crun_store_reply *rep,
			   void *arg)
{
	struct crun_rdzv *r = op_take(arg, NULL, NULL);
	char text[512], why[200], k[KEYMAX];
	int kind;

	if (r == NULL || !r->sitting_out || status == CRUN_ECANCELED)
		return;
	if (status == CRUN_ETIMEDOUT) {
		/* Read "excluded" again: readmitted once its time is up. */
		r->state = R_JOINING;
		return excl_check(r);
	}
	if (status)
		return store_error(r, status);
	key(r, k, "over");
	if (rdzv_parse_end(rep->value, rep->len, &kind, text, sizeof(text), why,
			   sizeof(why))) {
		r->sitting_out = 0;
		return bad_record(r, k, NULL, why);
	}
	/* Tell the store host we read it (it waits for that), then go. */
	r->over_kind = kind;
	snprintf(r->over_why, sizeof(r->over_why), "%s", text);
	key(r, k, "over_seen/%s/%s#%s/%d", r->o.host, r->xaddr, r->id,
	    r->excl_round);
	if (r->ops->set(r->kv, k, "1", 1, on_over_seen, op_new(r, 0)))
		on_over_seen(0, NULL, op_new(r, 0));
}

/* The store host has our acknowledgement of "over": report the end. */
static void on_over_seen(int status, const struct crun_store_reply *rep,
			 void *arg)
{
	struct crun_rdzv *r = op_take(arg, NULL, NULL);

	(void)rep;
	(void)status; /* the end is known either way */
	if (r == NULL || !r->sitting_out)
		return;
	r->sitting_out = 0;
	if (r->over_kind == RDZV_END_SUCCESS)
		return round_fail(r, CRUN_ERDZV_LEFT_OUT,
				  "the job finished without %s, which was left "
				  "out after repeated failures: %s",
				  r->o.host, r->over_why);
	round_fail(r, CRUN_ERDZV_CLOSED,
		   "the job stopped while %s was left out after repeated "
		   "failures: %s",
		   r->o.host, r->over_why);
}

/* This node is left out until x->until: wait as a spare, say why. */
static void excl_sit_out(struct crun_rdzv *r, const struct rdzv_exclusion *x)
{
	char why[400], at[32], k[KEYMAX];
	int64_t left = x->until * 1000 - wall_ms();
	int ms = left > INT32_MAX ? INT32_MAX : (int)left;

	r->state = R_WAITING;
	uv_timer_stop(&r->deadline);
	uv_timer_stop(&r->last_call);
	snprintf(why, sizeof(why),
		 "%s is left out until %s (%lld s more): the last %d "
		 "failure-ended rounds (to round %d) failed first on it; it "
		 "waits as a spare",
		 r->o.host, excl_clock(x->until, at, sizeof(at)),
		 (long long)(left + 500) / 1000, x->fails, x->round);
	if (!r->sitting_out) /* said once, not at every re-check */
		excl_notify(r, x, 0, why);
	r->sitting_out = 1;
	r->excl_round = x->round;
	/* Our own copy of "over": the store host can tell if we vanish. */
	key(r, k, "over/%s/%s#%s/%d", r->o.host, r->xaddr, r->id, x->round);
	if (watch1(r, k, ms > 0 ? ms : 1, on_sitout_over, op_new(r, 0)))
		store_error(r, CRUN_ECLOSED);
}

/* How many of the n entries are still left out now. */
static int excl_active(const struct rdzv_exclusion *x, int n)
{
	int64_t now = wall_ms();
	int k = 0;

	for (int i = 0; i < n; i++)
		k += x[i].until * 1000 > now;
	return k;
}

static void on_excl_check(int status, const struct crun_store_reply *rep,
			  void *arg)
{
	struct crun_rdzv *r = op_take(arg, NULL, NULL);
	struct rdzv_exclusion x[RDZV_MAX_EXCLUDED];
	int n;

	if (r == NULL || r->state != R_JOINING)
		return;
	if (status)
		return store_error(r, status);
	n = excl_parse(r, rep, x);
	excl_update(r, x, n);
	for (int i = 0; i < n; i++) {
		if (!excl_is_self(r, x[i].host, x[i].addr, x[i].id))
			continue;
		if (x[i].until * 1000 > wall_ms() &&
		    excl_active(x, n) > r->o.max_nodes - r->o.min_nodes)
			return round_fail(
			    r, CRUN_ERDZV_CLOSED,
			    "%d of at most %d nodes are left out of the "
			    "rounds: the others cannot reach the minimum of "
			    "%d, the job cannot go on",
			    excl_active(x, n), r->o.max_nodes, r->o.min_nodes);
		if (x[i].until * 1000 > wall_ms())
			return excl_sit_out(r, &x[i]);
		/* Listed, but its time is up (a restarted agent). */
		r->sitting_out = 1;
		return excl_readmit(r);
	}
	if (r->sitting_out) /* taken off the list meanwhile */
		return excl_rejoin(r);
	join_round_now(r);
}

/* Before joining: is this node left out? */
static void excl_check(struct crun_rdzv *r)
{
	char k[KEYMAX];

	key(r, k, "excluded");
	if (r->ops->compare_set(r->kv, k, PEEK, strlen(PEEK), "", 0,
				on_excl_check, op_new(r, 0)))
		store_error(r, CRUN_ECLOSED);
}

/* Readmitted: back to joining, with the whole join_timeout again. */
static void excl_rejoin(struct crun_rdzv *r)
{
	r->sitting_out = 0;
	r->state = R_JOINING;
	r->deadline_phase = 0;
	uv_timer_start(&r->deadline, on_deadline,
		       (uint64_t)(r->o.join_timeout * 1000), 0);
	join_round_now(r);
}

static void on_readmit_cas(int status, const struct crun_store_reply *rep,
			   void *arg)
{
	char *want = ((struct op *)arg)->data; /* op_take frees the op */
	struct crun_rdzv *r = op_take(arg, NULL, NULL);
	struct rdzv_exclusion self;

	if (r == NULL || !r->sitting_out) {
		free(want);
		return;
	}
	if (status) {
		free(want);
		return store_error(r, status);
	}
	if (!reply_is(rep, want) && r->excl_tries++ < 20) {
		/* Someone changed it meanwhile: read it again. */
		free(want);
		return excl_readmit(r);
	}
	free(want);
	for (int i = 0; i < r->nexcl; i++) {
		if (!excl_is_self(r, r->excl[i].host, r->excl[i].addr,
				  r->excl[i].id))
			continue;
		self = r->excl[i];
		r->excl[i] = r->excl[--r->nexcl];
		excl_notify(r, &self, 1,
			    "its cooldown ended: it joins the next round");
		break;
	}
	excl_rejoin(r);
}

static void on_readmit_read(int status, const struct crun_store_reply *rep,
			    void *arg)
{
	struct crun_rdzv *r = op_take(arg, NULL, NULL);
	struct rdzv_exclusion x[RDZV_MAX_EXCLUDED];
	char cur[RDZV_MAX_LIST_RECORD + 1], next[RDZV_MAX_LIST_RECORD + 1];
	char k[KEYMAX];
	struct op *o;
	size_t clen;
	int n, m = 0;

	if (r == NULL || !r->sitting_out)
		return;
	if (status)
		return store_error(r, status);
	if (rep->value == NULL || reply_is(rep, PEEK) ||
	    rep->len > RDZV_MAX_LIST_RECORD)
		return excl_rejoin(r); /* nothing to take ourselves off */
	clen = rep->len;
	memcpy(cur, rep->value, clen);
	n = excl_parse(r, rep, x);
	/* The cache keeps our own entry until the write is in. */
	memcpy(r->excl, x, (size_t)n * sizeof(*x));
	r->nexcl = n;
	r->excl_known = 1;
	for (int i = 0; i < n; i++)
		if (!excl_is_self(r, x[i].host, x[i].addr, x[i].id))
			x[m++] = x[i];
	excl_format(x, m, next, sizeof(next));
	o = op_new(r, 0);
	o->data = strdup(next);
	if (o->data == NULL)
		abort();
	key(r, k, "excluded");
	if (r->ops->compare_set(r->kv, k, cur, clen, next, strlen(next),
				on_readmit_cas, o)) {
		free(o->data);
		free(o);
		store_error(r, CRUN_ECLOSED);
	}
}

/* The cooldown is over: take this node off "excluded", then join. */
static void excl_readmit(struct crun_rdzv *r)
{
	char k[KEYMAX];

	key(r, k, "excluded");
	if (r->ops->compare_set(r->kv, k, PEEK, strlen(PEEK), "", 0,
				on_readmit_read, op_new(r, 0)))
		store_error(r, CRUN_ECLOSED);
}

static void on_over_acks(int status, const struct crun_store_reply *rep,
			 void *arg)
{
	(void)rep;
	if (status != CRUN_ECANCELED)
		finish_done(arg);
}

static void on_host_excluded(int status, const struct crun_store_reply *rep,
			     void *arg)
{
	struct crun_rdzv *r = arg;
	struct rdzv_exclusion x[RDZV_MAX_EXCLUDED];
	char keys[RDZV_MAX_EXCLUDED][KEYMAX];
	const char *kp[RDZV_MAX_EXCLUDED];
	int n;

	if (status || r->state != R_FINISHING)
		return finish_done(r);
	n = excl_parse(r, rep, x);
	for (int i = 0; i < n; i++) {
		key(r, keys[i], "over_seen/%s/%s#%s/%d", x[i].host, x[i].addr,
		    x[i].id, x[i].round);
		kp[i] = keys[i];
	}
	/* Bounded by close_timeout (the deadline timer runs meanwhile). */
	if (n == 0 || r->ops->multi_get(r->kv, kp, (size_t)n,
					(int)(r->o.close_timeout * 1000),
					on_over_acks, r))
		finish_done(r);
}

/*
 * Everyone left: the store host serves on until each node left out has
 * read "over" (else it would learn only that the store went away).
 */
static void on_finish_timeout(uv_timer_t *t);

static void excl_host_wait(struct crun_rdzv *r)
{
	char k[KEYMAX];

	if (!uv_is_active((uv_handle_t *)&r->deadline))
		uv_timer_start(&r->deadline, on_finish_timeout,
			       (uint64_t)(r->o.close_timeout * 1000), 0);
	key(r, k, "excluded");
	if (r->ops->compare_set(r->kv, k, PEEK, strlen(PEEK), "", 0,
				on_host_excluded, r))
		finish_done(r);
}

/* The job is over: say so once in "over", for the nodes left out. */
static void excl_over(struct crun_rdzv *r, int kind, const char *why)
{
	char k[KEYMAX], val[600];

	if (r->o.exclude_after <= 0 || r->state == R_DONE)
		return;
	key(r, k, "over");
	snprintf(val, sizeof(val), "%c %s", kind, why);
	r->ops->compare_set(r->kv, k, "", 0, val, strlen(val), NULL, NULL);
	/* A copy for each node left out (as of our last join): what it waits
	 * on. */
	for (int i = 0; i < r->nexcl; i++) {
		key(r, k, "over/%s/%s#%s/%d", r->excl[i].host, r->excl[i].addr,
		    r->excl[i].id, r->excl[i].round);
		r->ops->compare_set(r->kv, k, "", 0, val, strlen(val), NULL,
				    NULL);
	}
}

/*
 * The decision, taken by the node whose failure ended round R (its "F" end
 * was recorded first), before it writes "r<R+1>/restarts": everyone else
 * waits for that record before joining R+1, so they all see its outcome.
 */
struct decide {
	struct crun_rdzv *r;
	int round;
	int64_t restarts;
	int gworld;
	int tries;
	char *want; /* the "excluded" value being written */
	struct rdzv_fail f[RDZV_MAX_FAILS + 1];
	int nf;
};

/* Last step: the restart count of R+1, which lets everyone go on. */
static void decide_done(struct decide *d)
{
	struct crun_rdzv *r = d->r;
	char k[KEYMAX], v[24];

	if (r->state != R_DONE) {
		snprintf(v, sizeof(v), "%" PRId64, d->restarts);
		key(r, k, "r%d/restarts", d->round + 1);
		r->ops->set(r->kv, k, v, strlen(v), NULL, NULL);
	}
	free(d->want);
	free(d);
}

/* Write the history "fails" (the n entries from first). */
static void decide_put_fails(struct decide *d, int first, int n)
{
	struct crun_rdzv *r = d->r;
	char buf[RDZV_MAX_LIST_RECORD + 1], k[KEYMAX];
	size_t o = (size_t)snprintf(buf, sizeof(buf), "%d", n);

	for (int i = first; i < first + n && o < sizeof(buf); i++)
		o += (size_t)snprintf(buf + o, sizeof(buf) - o, " %d %s %s%s%s",
				      d->f[i].round, d->f[i].host, d->f[i].addr,
				      *d->f[i].id ? "#" : "", d->f[i].id);
	key(r, k, "fails");
	r->ops->set(r->kv, k, buf, strlen(buf), NULL, NULL);
}

static void decide_read_excluded(struct decide *d);

static void on_decide_excl_cas(int status, const struct crun_store_reply *rep,
			       void *arg)
{
	struct decide *d = arg;
	struct crun_rdzv *r = d->r;
	struct rdzv_exclusion x[RDZV_MAX_EXCLUDED];
	char k[KEYMAX], e[16];
	int n;

	if (status || r->state == R_DONE)
		return decide_done(d);
	if (!reply_is(rep, d->want) && d->tries++ < 20)
		return decide_read_excluded(d); /* changed meanwhile */
	/* Left out: the history starts afresh, the next round expects one
	 * node fewer. */
	decide_put_fails(d, 0, 0);
	snprintf(e, sizeof(e), "%d", d->gworld - 1);
	key(r, k, "r%d/expect", d->round + 1);
	r->ops->set(r->kv, k, e, strlen(e), NULL, NULL);
	if (rdzv_parse_excluded(d->want, strlen(d->want), x, RDZV_MAX_EXCLUDED,
				&n, NULL, 0))
		n = 0;
	memcpy(r->excl, x, (size_t)n * sizeof(*x));
	r->nexcl = n;
	r->excl_known = 1;
	decide_done(d);
}

static void on_decide_excl_read(int status, const struct crun_store_reply *rep,
				void *arg)
{
	struct decide *d = arg;
	struct crun_rdzv *r = d->r;
	struct rdzv_exclusion x[RDZV_MAX_EXCLUDED + 1];
	char buf[RDZV_MAX_LIST_RECORD + 1], k[KEYMAX];
	const char *cur = "";
	size_t clen = 0;
	int n, m = 0;

	if (status || r->state == R_DONE)
		return decide_done(d);
	n = excl_parse(r, rep, x);
	if (rep->value && !reply_is(rep, PEEK)) {
		cur = rep->value;
		clen = rep->len;
	}
	for (int i = 0; i < n; i++)
		if (!excl_is_self(r, x[i].host, x[i].addr, x[i].id))
			x[m++] = x[i];
	if (m >= RDZV_MAX_EXCLUDED) {
		fprintf(stderr,
			"crun: %s is not left out: %d nodes are left out "
			"already (at most %d)\n",
			r->o.host, m, RDZV_MAX_EXCLUDED);
		decide_put_fails(d, 0, d->nf);
		return decide_done(d);
	}
	snprintf(x[m].host, sizeof(x[m].host), "%s", r->o.host);
	snprintf(x[m].addr, sizeof(x[m].addr), "%s", r->xaddr);
	snprintf(x[m].id, sizeof(x[m].id), "%s", r->id);
	/* Rounded up: the cooldown is never shorter than exclude_for. */
	x[m].until =
	    (wall_ms() + (int64_t)(r->o.exclude_for * 1000) + 999) / 1000;
	x[m].round = d->round;
	x[m].fails = r->o.exclude_after;
	excl_format(x, m + 1, buf, sizeof(buf));
	free(d->want);
	d->want = strdup(buf);
	if (d->want == NULL)
		abort();
	key(r, k, "excluded");
	/* From what we read (a missing key: from nothing). */
	if (r->ops->compare_set(r->kv, k, cur, clen, buf, strlen(buf),
				on_decide_excl_cas, d))
		decide_done(d);
}

static void decide_read_excluded(struct decide *d)
{
	struct crun_rdzv *r = d->r;
	char k[KEYMAX];

	key(r, k, "excluded");
	if (r->ops->compare_set(r->kv, k, PEEK, strlen(PEEK), "", 0,
				on_decide_excl_read, d))
		decide_done(d);
}

static void on_decide_fails(int status, const struct crun_store_reply *rep,
			    void *arg)
{
	struct decide *d = arg;
	struct crun_rdzv *r = d->r;
	int k = r->o.exclude_after, first, same = 0;
	char why[200], key_[KEYMAX];

	if (status || r->state == R_DONE)
		return decide_done(d);
	d->nf = 0;
	if (rep->value && !reply_is(rep, PEEK) &&
	    rdzv_parse_fails(rep->value, rep->len, d->f, RDZV_MAX_FAILS, &d->nf,
			     why, sizeof(why))) {
		key(r, key_, "fails");
		fprintf(stderr,
			"crun: malformed rendezvous record '%s': %s: the "
			"failure history starts afresh\n",
			key_, why);
		d->nf = 0;
	}
	/* A history from a later round (forged or stale) is dropped. */
	if (d->nf > 0 && d->f[d->nf - 1].round >= d->round)
		d->nf = 0;
	d->f[d->nf].round = d->round;
	snprintf(d->f[d->nf].host, sizeof(d->f[0].host), "%s", r->o.host);
	snprintf(d->f[d->nf].addr, sizeof(d->f[0].addr), "%s", r->xaddr);
	snprintf(d->f[d->nf].id, sizeof(d->f[0].id), "%s", r->id);
	d->nf++;
	first = d->nf > k ? d->nf - k : 0;
	memmove(d->f, d->f + first, (size_t)(d->nf - first) * sizeof(d->f[0]));
	d->nf -= first;
	for (int i = 0; i < d->nf; i++)
		same += excl_is_self(r, d->f[i].host, d->f[i].addr, d->f[i].id);
	if (same < k) {
		decide_put_fails(d, 0, d->nf);
		return decide_done(d);
	}
	if (d->gworld - 1 < r->o.min_nodes) {
		fprintf(stderr,
			"crun: %s is not left out although the last %d "
			"failure-ended rounds failed first on it: %d node%s "
			"would remain, below the minimum of %d\n",
			r->o.host, k, d->gworld - 1,
			d->gworld - 1 == 1 ? "" : "s", r->o.min_nodes);
		decide_put_fails(d, 0, d->nf);
		return decide_done(d);
	}
	decide_read_excluded(d);
}

static void excl_decide(struct crun_rdzv *r, int round, int64_t restarts)
{
	struct decide *d = calloc(1, sizeof(*d));
	char k[KEYMAX], v[600];

	if (d == NULL)
		abort();
	d->r = r;
	d->round = round;
	d->restarts = restarts;
	d->gworld = r->gworld;
	/* Who ended round R: attribution for status and metrics. */
	key(r, k, "r%d/failed", round);
	snprintf(v, sizeof(v), "%d %s %s#%s", r->grank, r->o.host, r->xaddr,
		 r->id);
	r->ops->set(r->kv, k, v, strlen(v), NULL, NULL);
	key(r, k, "fails");
	if (r->ops->compare_set(r->kv, k, PEEK, strlen(PEEK), "", 0,
				on_decide_fails, d))
		decide_done(d);
}

/* --- life cycle --------------------------------------------------------- */

/*
 * The id of this agent in the exclusion records: random, so that several
 * agents on one machine (one host name, one address) are told apart.
 */
static void rdzv_node_id(char *id, size_t len)
{
	unsigned char b[RDZV_MAX_ID / 2];
	size_t n = 0;

	if (getrandom(b, sizeof(b), GRND_NONBLOCK) != (ssize_t)sizeof(b)) {
		uint64_t v = (uint64_t)getpid() << 32 ^ (uint64_t)wall_ms() ^
			     (uint64_t)(uintptr_t)id;

		memcpy(b, &v, sizeof(b) < sizeof(v) ? sizeof(b) : sizeof(v));
	}
	for (size_t i = 0; i < sizeof(b) && n + 2 < len; i++)
		n += (size_t)snprintf(id + n, len - n, "%02x", b[i]);
}

int rdzv_new(uv_loop_t *loop, const struct rdzv_opts *o,
	     const struct rdzv_kv_ops *ops, void *kv, rdzv_end_cb on_end,
	     struct crun_rdzv **out)
{
	struct crun_rdzv *r = calloc(1, sizeof(*r));

	if (r == NULL)
		return UV_ENOMEM;
	r->loop = loop;
	r->o = *o;
	r->ops = ops;
	r->kv = kv;
	r->on_end = on_end;
	r->round = -1;
	r->aborted = -1;
	r->ended = -1;
	snprintf(r->run_id, sizeof(r->run_id), "%s",
		 o->run_id ? o->run_id : "");
	r->fp_pending = -1;
	snprintf(r->xaddr, sizeof(r->xaddr), "%s", o->addr ? o->addr : "");
	if (o->node_id)
		snprintf(r->id, sizeof(r->id), "%s", o->node_id);
	else
		rdzv_node_id(r->id, sizeof(r->id));
	descr_build(r);
	snprintf(r->config, sizeof(r->config), "nnodes=%d:%d backend=%s",
		 o->min_nodes, o->max_nodes,
		 o->static_rank >= 0 ? "static" : "c10d");
	if (o->exclude_after > 0) /* every node must agree on it too */
		snprintf(r->config + strlen(r->config),
			 sizeof(r->config) - strlen(r->config),
			 " exclude=%d:%g", o->exclude_after, o->exclude_for);
	/* Nodes of another crun protocol disagree here, at the first request.
	 */
	snprintf(r->config + strlen(r->config),
		 sizeof(r->config) - strlen(r->config), " proto=%d",
		 RDZV_PROTO);
	uv_timer_init(loop, &r->last_call);
	uv_timer_init(loop, &r->hb);
	uv_timer_init(loop, &r->deadline);
	uv_timer_init(loop, &r->fp_timer);
	r->last_call.data = r->hb.data = r->deadline.data = r;
	r->fp_timer.data = r;
	if (o->env_check != CRUN_ENV_CHECK_OFF && o->fingerprint_wait > 0) {
		r->fp_wait = 1;
		uv_timer_start(&r->fp_timer, on_fp_timeout,
			       (uint64_t)(o->fingerprint_wait * 1000), 0);
	}
	if (ops->on_vanish)
		ops->on_vanish(kv, rdzv_on_vanish, r);
	*out = r;
	return 0;
}

const char *rdzv_peers(const struct crun_rdzv *r)
{
	return r->peers;
}

const char *rdzv_errmsg(const struct crun_rdzv *r)
{
	return r->errmsg;
}

static void rdzv_on_timer_closed(uv_handle_t *h)
{
	struct crun_rdzv *r = h->data;

	if (--r->timers == 0) {
		free(r->peers);
		free(r);
	}
}

void rdzv_free(struct crun_rdzv *r)
{
	if (r->ops->on_vanish)
		r->ops->on_vanish(r->kv, NULL, NULL);
	r->state = R_DONE;
	r->timers = 4;
	uv_close((uv_handle_t *)&r->fp_timer, rdzv_on_timer_closed);
	uv_close((uv_handle_t *)&r->last_call, rdzv_on_timer_closed);
	uv_close((uv_handle_t *)&r->hb, rdzv_on_timer_closed);
	uv_close((uv_handle_t *)&r->deadline, rdzv_on_timer_closed);
}

int rdzv_excluded(const struct crun_rdzv *r, struct rdzv_exclusion *x, int max)
{
	for (int i = 0; i < r->nexcl && i < max; i++)
		x[i] = r->excl[i];
	return r->nexcl;
}

int rdzv_round(const struct crun_rdzv *r)
{
	return r->round;
}

int rdzv_restarts(const struct crun_rdzv *r)
{
	return (int)r->restarts;
}

/*
 * A job's state read from its rendezvous keys (see rdzv_status.h).
 *
 * Happy path, in batches of pipelined peeks (a compare-and-set whose
 * expected value no key holds: it answers the value, or the expected value
 * itself when the key is absent, and never writes): "crun/job" -> the
 * job's config, round, restarts, params and last failure -> the round's
 * join count, closed count, assignment flag, end and master -> every
 * node's descriptor (and assignment) -> while the round runs, each node's
 * done mark and heartbeat counter, sampled again every poll interval until
 * every counter has moved or the window passed (one read per node per
 * interval; a counter that moved gives its age on this reader's clock, so
 * no clocks are compared).
 *
 * Failure modes: "crun/job" absent or naming another job, or no config
 * (CRUN_ENOTFOUND); a request failing (the backend's status, e.g. the
 * store gone); a record that does not parse or is out of range
 * (CRUN_EPROTO, naming the key). Each ends the read through the callback,
 * once.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "crun/err.h"
#include "crun/rdzv_status.h"

/* An expected value no real key holds (as rdzv.c's): a read. */
#define PEEK "\001crun-peek"
#define KEYMAX 512

/* One value read: absent, or a bounded copy. */
struct slot {
	char *v;
	size_t len;
	int present;
};

struct crun_rdzv_status {
	uv_loop_t *loop;
	const struct rdzv_kv_ops *ops;
	void *kv;
	struct rdzv_status_opts o;
	rdzv_status_cb cb;
	void *data;
	char prefix[300];
	struct rdzv_status st;
	struct slot *slots;
	size_t nslots;
	int pending;
	int err;
	unsigned gen; /* batch number: replies of an older batch are late */
	int done;
	void (*next)(struct crun_rdzv_status *s);
	uv_timer_t timer;
	uint64_t hb_start;   /* loop time of the first heartbeat sample */
	uint64_t *hb_seen;   /* loop time each counter was seen to move, 0 */
	int64_t *hb_first;   /* the first sample of each counter */
	int *hb_slot;	     /* node of each heartbeat slot */
	uint64_t hb_wait_ms; /* the sampling window */
	uint64_t hb_poll_ms;
	/* Descriptors to read by arrival index: a forming round's (0 up to the
	 * join counter), or a running one's spares (past its closed count). */
	int form_n;
	int form_next; /* the next one to read */
	char errmsg[900];
};

struct req {
	struct crun_rdzv_status *s;
	unsigned gen;
	size_t idx;
};

static void finish(struct crun_rdzv_status *s, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* End the read: report once. */
static void finish(struct crun_rdzv_status *s, int status, const char *fmt, ...)
{
	va_list ap;

	if (s->done)
		return;
	s->done = 1;
	s->gen++;
	uv_timer_stop(&s->timer);
	if (fmt != NULL) {
		va_start(ap, fmt);
		vsnprintf(s->errmsg, sizeof(s->errmsg), fmt, ap);
		va_end(ap);
	}
	s->cb(s, status, status ? NULL : &s->st, s->errmsg, s->data);
}

/* A record did not parse: name the key. */
static void bad(struct crun_rdzv_status *s, const char *k, const char *why)
{
	finish(s, CRUN_EPROTO, "malformed rendezvous record '%s%s': %s",
	       strncmp(k, "crun/", 5) == 0 ? "" : s->prefix, k, why);
}

static void slots_clear(struct crun_rdzv_status *s)
{
	for (size_t i = 0; i < s->nslots; i++)
		free(s->slots[i].v);
	free(s->slots);
	s->slots = NULL;
	s->nslots = 0;
}

/* A new batch of n reads; then() runs when every reply is in. */
static void batch_begin(struct crun_rdzv_status *s, size_t n,
			void (*then)(struct crun_rdzv_status *))
{
	slots_clear(s);
	s->slots = calloc(n ? n : 1, sizeof(*s->slots));
	if (s->slots == NULL)
		abort();
	s->nslots = n;
	s->gen++;
	s->err = 0;
	s->pending = 1; /* held until batch_end: no early completion */
	s->next = then;
}

static void batch_step(struct crun_rdzv_status *s)
{
	if (--s->pending > 0 || s->done)
		return;
	if (s->err)
		return finish(s, s->err, "lost the rendezvous store: %s",
			      crun_strerror(s->err));
	s->next(s);
}

static void batch_end(struct crun_rdzv_status *s)
{
	batch_step(s);
}

static void on_peek(int status, const struct crun_store_reply *rep, void *arg)
{
	struct req *q = arg;
	struct crun_rdzv_status *s = q->s;
	struct slot *sl;
	size_t n;

	if (q->gen != s->gen || s->done) {
		free(q);
		return;
	}
	sl = &s->slots[q->idx];
	free(q);
	if (status) {
		if (!s->err)
			s->err = status;
	} else if (rep->value == NULL ||
		   (rep->len == strlen(PEEK) &&
		    memcmp(rep->value, PEEK, rep->len) == 0)) {
		sl->present = 0;
	} else {
		/* One byte past the largest record: the parser says so. */
		n = rep->len > RDZV_MAX_RECORD + 1 ? RDZV_MAX_RECORD + 1
						   : rep->len;
		sl->v = malloc(n + 1);
		if (sl->v == NULL)
			abort();
		memcpy(sl->v, rep->value, n);
		sl->v[n] = '\0';
		sl->len = n;
		sl->present = 1;
	}
	batch_step(s);
}

/* Read key (under the job's prefix unless it starts with "crun/"). */
static void peek(struct crun_rdzv_status *s, size_t idx, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void peek(struct crun_rdzv_status *s, size_t idx, const char *fmt, ...)
{
	char k[KEYMAX];
	struct req *q;
	va_list ap;
	int n = 0;

	if (strncmp(fmt, "crun/", 5) != 0)
		n = snprintf(k, sizeof(k), "%s", s->prefix);
	va_start(ap, fmt);
	vsnprintf(k + n, sizeof(k) - (size_t)n, fmt, ap);
	va_end(ap);
	q = calloc(1, sizeof(*q));
	if (q == NULL)
		abort();
	q->s = s;
	q->gen = s->gen;
	q->idx = idx;
	s->pending++;
	if (s->ops->compare_set(s->kv, k, PEEK, strlen(PEEK), "", 0, on_peek,
				q) != 0) {
		free(q);
		s->pending--;
		if (!s->err)
			s->err = CRUN_ECLOSED;
	}
}

/* Slot i as a counter (absent: 0); 0, or the read ended. */
static int slot_counter(struct crun_rdzv_status *s, size_t i, const char *k,
			int64_t *out)
{
	char why[200];

	*out = 0;
	if (!s->slots[i].present)
		return 0;
	if (rdzv_parse_counter(s->slots[i].v, s->slots[i].len, out, why,
			       sizeof(why)) == 0)
		return 0;
	bad(s, k, why);
	return CRUN_EPROTO;
}

/* ---- heartbeats ---------------------------------------------------------
 *
 * All that this reader knows of the heartbeat mechanism (rdzv.h: node g of
 * round R bumps the counter "r<R>/hb/<g>" every keep_alive interval) is in
 * hb_peek and hb_value: a backend or algorithm that beats otherwise only
 * changes these two.
 */

static void hb_peek(struct crun_rdzv_status *s, size_t slot, int g)
{
	peek(s, slot, "r%d/hb/%d", s->st.round, g);
}

/* The counter of node g read into slot: 0 and *v (-1: none yet). */
static int hb_value(struct crun_rdzv_status *s, size_t slot, int g, int64_t *v)
{
	char k[64];

	snprintf(k, sizeof(k), "r%d/hb/%d", s->st.round, g);
	if (slot_counter(s, slot, k, v))
		return CRUN_EPROTO;
	if (!s->slots[slot].present)
		*v = -1;
	return 0;
}

static void hb_sample(struct crun_rdzv_status *s);
static void forming_read(struct crun_rdzv_status *s);

static void hb_done(struct crun_rdzv_status *s)
{
	uint64_t now = uv_now(s->loop);

	s->st.hb_window = (double)(now - s->hb_start) / 1000;
	for (int i = 0; i < s->st.nnodes; i++)
		s->st.nodes[i].hb_age =
		    s->hb_seen[i] ? (double)(now - s->hb_seen[i]) / 1000 : -1;
	if (s->form_next < s->form_n)
		return forming_read(s); /* the spares */
	finish(s, 0, NULL);
}

static void on_hb_timer(uv_timer_t *t)
{
	hb_sample(t->data);
}

/* A sample is in: note the counters that moved; again, or done. */
static void hb_got(struct crun_rdzv_status *s)
{
	uint64_t now = uv_now(s->loop);
	int waiting = 0;

	for (size_t i = 0; i < s->nslots; i++) {
		int n = s->hb_slot[i];
		struct rdzv_status_node *nd = &s->st.nodes[n];
		int64_t v;

		if (hb_value(s, i, nd->group_rank, &v))
			return;
		if (s->hb_first[n] == INT64_MIN) {
			s->hb_first[n] = v;
			nd->hb = v;
		} else if (v != s->hb_first[n] && !s->hb_seen[n]) {
			s->hb_seen[n] = now;
			nd->hb = v;
		}
	}
	for (int i = 0; i < s->st.nnodes; i++)
		if (!s->st.nodes[i].done && !s->hb_seen[i])
			waiting = 1;
	if (!waiting || now - s->hb_start >= s->hb_wait_ms)
		return hb_done(s);
	uv_timer_start(&s->timer, on_hb_timer, s->hb_poll_ms, 0);
}

/* Read the counters not yet seen moving (all of them the first time). */
static void hb_sample(struct crun_rdzv_status *s)
{
	size_t n = 0, k = 0;

	for (int i = 0; i < s->st.nnodes; i++)
		if (!s->st.nodes[i].done && !s->hb_seen[i])
			n++;
	batch_begin(s, n, hb_got);
	free(s->hb_slot);
	s->hb_slot = calloc(n ? n : 1, sizeof(*s->hb_slot));
	if (s->hb_slot == NULL)
		abort();
	for (int i = 0; i < s->st.nnodes; i++) {
		if (s->st.nodes[i].done || s->hb_seen[i])
			continue;
		s->hb_slot[k] = i;
		hb_peek(s, k++, s->st.nodes[i].group_rank);
	}
	batch_end(s);
}

/* ---- the round's nodes ------------------------------------------------- */

static void on_done_marks(struct crun_rdzv_status *s)
{
	double w = s->o.hb_wait;
	int derived = w < 0;

	for (int i = 0; i < s->st.nnodes; i++) {
		struct slot *p = &s->slots[2 * i + 1];
		int64_t v;

		s->st.nodes[i].done = s->slots[2 * i].present;
		/* Only a well-formed age is shown; anyone can write it. */
		s->st.nodes[i].progress_ms =
		    p->present && rdzv_parse_int(p->v, p->len, 0, INT64_MAX, &v,
						 NULL, 0) == 0
			? v
			: -1;
	}
	if (w < 0)
		w = s->st.have_params
			? 2.0 * s->st.params.keep_alive_ms / 1000 + 0.2
			: 1.0;
	if (derived && w > RDZV_STATUS_DEFAULT_HB_WAIT_MAX)
		w = RDZV_STATUS_DEFAULT_HB_WAIT_MAX;
	if (w > RDZV_STATUS_MAX_HB_WAIT)
		w = RDZV_STATUS_MAX_HB_WAIT;
	s->hb_wait_ms = (uint64_t)(w * 1000);
	s->hb_poll_ms =
	    s->st.have_params ? (uint64_t)s->st.params.keep_alive_ms / 5 : 100;
	if (s->hb_poll_ms < 20)
		s->hb_poll_ms = 20;
	if (s->hb_poll_ms > 250)
		s->hb_poll_ms = 250;
	s->hb_seen = calloc((size_t)s->st.nnodes + 1, sizeof(*s->hb_seen));
	s->hb_first = calloc((size_t)s->st.nnodes + 1, sizeof(*s->hb_first));
	if (s->hb_seen == NULL || s->hb_first == NULL)
		abort();
	for (int i = 0; i < s->st.nnodes; i++)
		s->hb_first[i] = INT64_MIN;
	s->hb_start = uv_now(s->loop);
	hb_sample(s); /* the first sample; the window bounds the rest */
}

static int node_cmp(const void *x, const void *y)
{
	const struct rdzv_status_node *a = x, *b = y;

	if (a->group_rank != b->group_rank)
		return a->group_rank < b->group_rank ? -1 : 1;
	return a->index < b->index ? -1 : a->index > b->index;
}

static void on_nodes(struct crun_rdzv_status *s)
{
	int running = s->st.state == RDZV_STATUS_RUNNING;
	int n = s->st.nnodes, kept = 0;
	char k[64], why[200];

	for (int i = 0; i < n; i++) {
		struct rdzv_status_node *nd = &s->st.nodes[kept];
		struct slot *d = &s->slots[running ? 2 * i : i];

		memset(nd, 0, sizeof(*nd));
		nd->index = i + 1;
		nd->group_rank = -1;
		nd->hb = -1;
		nd->hb_age = -1;
		nd->progress_ms = -1;
		snprintf(k, sizeof(k), "r%d/node/%d", s->st.round, i + 1);
		if (!d->present) {
			if (running)
				return bad(s, k, "no value");
			continue; /* joined, not described yet */
		}
		if (rdzv_parse_descr(d->v, d->len, s->st.config.max_nodes,
				     &nd->d, why, sizeof(why)))
			return bad(s, k, why);
		if (running) {
			struct slot *a = &s->slots[2 * i + 1];

			snprintf(k, sizeof(k), "r%d/assign/%d", s->st.round,
				 i + 1);
			if (!a->present)
				return bad(s, k, "no value");
			if (rdzv_parse_assign(a->v, a->len, n, nd->d.nproc,
					      &nd->ranks, why, sizeof(why)))
				return bad(s, k, why);
			nd->group_rank = nd->ranks.group_rank;
		}
		kept++;
	}
	s->st.nnodes = kept;
	if (!running)
		return finish(s, 0, NULL);
	qsort(s->st.nodes, (size_t)kept, sizeof(*s->st.nodes), node_cmp);
	for (int i = 0; i < kept; i++)
		if (s->st.nodes[i].group_rank != i) {
			snprintf(k, sizeof(k), "r%d/assign/%d", s->st.round,
				 s->st.nodes[i].index);
			return bad(s, k, "group ranks not 0..N-1 once each");
		}
	batch_begin(s, 2 * (size_t)kept, on_done_marks);
	for (int g = 0; g < kept; g++) {
		peek(s, 2 * (size_t)g, "r%d/done/%d", s->st.round, g);
		peek(s, 2 * (size_t)g + 1, "r%d/progress/%d", s->st.round, g);
	}
	batch_end(s);
}

/*
 * A forming round, or the spares of a running one (arrival indexes past
 * the closed count): the join counter says how many arrived, but anyone
 * can write it (a forged 1M cost 400 MB and 8 s). Descriptors are read
 * FORM_CHUNK at a time, kept only when present, and the read stops at a
 * chunk without any: memory follows the nodes that described themselves.
 */
#define FORM_CHUNK 256

static void on_forming(struct crun_rdzv_status *s);

static void forming_read(struct crun_rdzv_status *s)
{
	int m = s->form_n - s->form_next;

	if (m > FORM_CHUNK)
		m = FORM_CHUNK;
	if (m <= 0)
		return finish(s, 0, NULL);
	batch_begin(s, (size_t)m, on_forming);
	for (int i = 0; i < m; i++)
		peek(s, (size_t)i, "r%d/node/%d", s->st.round,
		     s->form_next + i + 1);
	batch_end(s);
}

static void on_forming(struct crun_rdzv_status *s)
{
	struct rdzv_status *st = &s->st;
	int spares = st->state == RDZV_STATUS_RUNNING;
	struct rdzv_status_node **arr = spares ? &st->spares : &st->nodes;
	int *narr = spares ? &st->nspares : &st->nnodes;
	size_t m = s->nslots;
	int present = 0;
	struct rdzv_status_node *nn;
	char k[64], why[200];

	for (size_t i = 0; i < m; i++)
		present += s->slots[i].present;
	nn = realloc(*arr, ((size_t)*narr + (size_t)present + 1) * sizeof(*nn));
	if (nn == NULL)
		abort();
	*arr = nn;
	for (size_t i = 0; i < m; i++) {
		struct rdzv_status_node *nd = &nn[*narr];
		struct slot *d = &s->slots[i];

		if (!d->present)
			continue; /* joined, not described yet */
		memset(nd, 0, sizeof(*nd));
		nd->index = s->form_next + (int)i + 1;
		nd->group_rank = -1;
		nd->hb = -1;
		nd->hb_age = -1;
		nd->progress_ms = -1;
		snprintf(k, sizeof(k), "r%d/node/%d", st->round, nd->index);
		if (rdzv_parse_descr(d->v, d->len, st->config.max_nodes, &nd->d,
				     why, sizeof(why)))
			return bad(s, k, why);
		(*narr)++;
	}
	memset(&nn[*narr], 0, sizeof(*nn));
	s->form_next += (int)m;
	if (present == 0)
		return finish(s, 0, NULL); /* no node wrote these */
	forming_read(s);
}

/* ---- the round ---------------------------------------------------------- */

enum { R_JOIN, R_CLOSED, R_ASSIGNED, R_END, R_MASTER, R_NSLOTS };

static void on_round(struct crun_rdzv_status *s)
{
	struct rdzv_status *st = &s->st;
	char k[64], why[200];
	int64_t joined, closed;
	struct slot *sl = s->slots;
	int ok = 0, n, closed_by;

	snprintf(k, sizeof(k), "r%d/join", st->round);
	if (slot_counter(s, R_JOIN, k, &joined))
		return;
	snprintf(k, sizeof(k), "r%d/closed", st->round);
	if (slot_counter(s, R_CLOSED, k, &closed))
		return;
	if (closed > st->config.max_nodes) {
		snprintf(why, sizeof(why), "%lld is not in 0..%d",
			 (long long)closed, st->config.max_nodes);
		return bad(s, k, why);
	}
	st->joined = joined > INT32_MAX ? INT32_MAX : (int)joined;
	if (sl[R_ASSIGNED].present) {
		snprintf(k, sizeof(k), "r%d/assigned", st->round);
		if (rdzv_parse_assigned(sl[R_ASSIGNED].v, sl[R_ASSIGNED].len,
					st->config.max_nodes, &closed_by, why,
					sizeof(why)))
			return bad(s, k, why);
		ok = closed_by >= 0;
	}
	if (sl[R_END].present) {
		snprintf(k, sizeof(k), "r%d/end", st->round);
		if (rdzv_parse_end(sl[R_END].v, sl[R_END].len, &st->end_kind,
				   st->end_why, sizeof(st->end_why), why,
				   sizeof(why)))
			return bad(s, k, why);
	}
	if (sl[R_MASTER].present) {
		snprintf(k, sizeof(k), "r%d/master", st->round);
		if (rdzv_parse_master(sl[R_MASTER].v, sl[R_MASTER].len,
				      st->master_addr, sizeof(st->master_addr),
				      &st->master_port, NULL, why, sizeof(why)))
			return bad(s, k, why);
	}
	if (st->end_kind == RDZV_END_SUCCESS || st->end_kind == RDZV_END_FATAL)
		st->state = RDZV_STATUS_ENDED;
	else if (st->end_kind == 0 && ok && closed > 0)
		st->state = RDZV_STATUS_RUNNING;
	else if (st->have_params && st->restarts > st->params.max_restarts)
		st->state = RDZV_STATUS_ENDED; /* nobody restarts any more */
	else
		st->state = RDZV_STATUS_FORMING;
	if (st->state == RDZV_STATUS_ENDED)
		return finish(s, 0, NULL);
	n = st->state == RDZV_STATUS_RUNNING ? (int)closed
	    : joined > st->config.max_nodes  ? st->config.max_nodes
					     : (int)joined;
	if (st->state == RDZV_STATUS_FORMING) {
		s->form_n = n;
		s->form_next = 0;
		st->nnodes = 0;
		st->nodes = calloc(1, sizeof(*st->nodes));
		if (st->nodes == NULL)
			abort();
		return forming_read(s);
	}
	/* Running: the nodes that joined after it closed are read last. */
	s->form_next = n;
	s->form_n = st->joined;
	st->nnodes = n;
	st->nodes = calloc((size_t)n + 1, sizeof(*st->nodes));
	if (st->nodes == NULL)
		abort();
	if (st->state == RDZV_STATUS_RUNNING) {
		batch_begin(s, 2 * (size_t)n, on_nodes);
		for (int i = 0; i < n; i++) {
			peek(s, 2 * (size_t)i, "r%d/node/%d", st->round, i + 1);
			peek(s, 2 * (size_t)i + 1, "r%d/assign/%d", st->round,
			     i + 1);
		}
	} else {
		batch_begin(s, (size_t)n, on_nodes);
		for (int i = 0; i < n; i++)
			peek(s, (size_t)i, "r%d/node/%d", st->round, i + 1);
	}
	batch_end(s);
}

/* ---- the job ------------------------------------------------------------ */

enum {
	J_CONFIG,
	J_ROUND,
	J_RESTARTS,
	J_PARAMS,
	J_FAILURE,
	J_EXCLUDED,
	J_NSLOTS
};

/*
 * The agents read "excluded" only with exclude_after on, and as no node
 * left out when an entry ends later than exclude_for allows (forged, or
 * from a job with other settings): show what they act on.
 */
static void excluded_as_agents_read(struct rdzv_status *st)
{
	size_t len = sizeof(st->excluded_ignored);

	if (st->nexcluded == 0)
		return;
	if (st->config.exclude_after == 0)
		snprintf(st->excluded_ignored, len,
			 "the job's config leaves no node out");
	else if (rdzv_check_excluded(
		     st->excluded, st->nexcluded, (int64_t)time(NULL),
		     st->config.exclude_for, st->excluded_ignored, len) == 0)
		return;
	st->nexcluded = 0;
}

static void on_job_keys(struct crun_rdzv_status *s)
{
	struct rdzv_status *st = &s->st;
	struct slot *sl = s->slots;
	char why[200];
	int64_t round;

	if (!sl[J_CONFIG].present)
		return finish(s, CRUN_ENOTFOUND,
			      "job '%s' has no rendezvous configuration yet",
			      st->run_id);
	if (rdzv_parse_config(sl[J_CONFIG].v, sl[J_CONFIG].len, s->o.max_nodes,
			      &st->config, why, sizeof(why)))
		return bad(s, "config", why);
	round = 0;
	if (sl[J_ROUND].present &&
	    rdzv_parse_int(sl[J_ROUND].v, sl[J_ROUND].len, 0, INT32_MAX - 2,
			   &round, why, sizeof(why)))
		return bad(s, "round", why);
	st->round = (int)round;
	if (slot_counter(s, J_RESTARTS, "restarts", &st->restarts))
		return;
	if (sl[J_PARAMS].present) {
		if (rdzv_parse_params(sl[J_PARAMS].v, sl[J_PARAMS].len,
				      &st->params, why, sizeof(why)))
			return bad(s, "params", why);
		st->have_params = 1;
	}
	if (sl[J_FAILURE].present) {
		if (rdzv_parse_failure(sl[J_FAILURE].v, sl[J_FAILURE].len,
				       &st->failure, why, sizeof(why)))
			return bad(s, "failure", why);
		st->have_failure = 1;
	}
	if (sl[J_EXCLUDED].present &&
	    rdzv_parse_excluded(sl[J_EXCLUDED].v, sl[J_EXCLUDED].len,
				st->excluded, RDZV_MAX_EXCLUDED, &st->nexcluded,
				why, sizeof(why)))
		return bad(s, "excluded", why);
	excluded_as_agents_read(st);
	batch_begin(s, R_NSLOTS, on_round);
	peek(s, R_JOIN, "r%d/join", st->round);
	peek(s, R_CLOSED, "r%d/closed", st->round);
	peek(s, R_ASSIGNED, "r%d/assigned", st->round);
	peek(s, R_END, "r%d/end", st->round);
	peek(s, R_MASTER, "r%d/master", st->round);
	batch_end(s);
}

static void on_job(struct crun_rdzv_status *s)
{
	struct slot *j = &s->slots[0];

	if (!j->present) {
		if (s->o.run_id != NULL)
			return finish(s, CRUN_ENOTFOUND,
				      "no job '%s' on this endpoint (no crun "
				      "rendezvous there)",
				      s->o.run_id);
		return finish(s, CRUN_ENOTFOUND,
			      "no crun job on this endpoint");
	}
	if (j->len == 0 || j->len >= sizeof(s->st.run_id) ||
	    memchr(j->v, '/', j->len) != NULL)
		return bad(s, "crun/job", "not a job id");
	for (size_t i = 0; i < j->len; i++)
		if ((unsigned char)j->v[i] <= 0x20 ||
		    (unsigned char)j->v[i] >= 0x7f)
			return bad(s, "crun/job", "not a job id");
	if (s->o.run_id != NULL && strcmp(s->o.run_id, j->v) != 0)
		return finish(s, CRUN_ENOTFOUND,
			      "no job '%s' on this endpoint: it serves job "
			      "'%s'",
			      s->o.run_id, j->v);
	memcpy(s->st.run_id, j->v, j->len + 1);
	snprintf(s->prefix, sizeof(s->prefix), "crun/%s/", s->st.run_id);
	batch_begin(s, J_NSLOTS, on_job_keys);
	peek(s, J_CONFIG, "config");
	peek(s, J_ROUND, "round");
	peek(s, J_RESTARTS, "restarts");
	peek(s, J_PARAMS, "params");
	peek(s, J_FAILURE, "failure");
	peek(s, J_EXCLUDED, "excluded");
	batch_end(s);
}

/* ---- life cycle --------------------------------------------------------- */

int rdzv_status_read(uv_loop_t *loop, const struct rdzv_kv_ops *ops, void *kv,
		     const struct rdzv_status_opts *o, rdzv_status_cb cb,
		     void *data, struct crun_rdzv_status **out)
{
	struct crun_rdzv_status *s = calloc(1, sizeof(*s));

	if (s == NULL)
		return UV_ENOMEM;
	s->loop = loop;
	s->ops = ops;
	s->kv = kv;
	s->o = *o;
	if (s->o.max_nodes <= 0)
		s->o.max_nodes = 1 << 20;
	s->cb = cb;
	s->data = data;
	uv_timer_init(loop, &s->timer);
	s->timer.data = s;
	*out = s;
	batch_begin(s, 1, on_job);
	peek(s, 0, "crun/job");
	batch_end(s);
	return 0;
}

static void on_timer_closed(uv_handle_t *h)
{
	struct crun_rdzv_status *s = h->data;

	slots_clear(s);
	free(s->st.nodes);
	free(s->st.spares);
	free(s->hb_seen);
	free(s->hb_first);
	free(s->hb_slot);
	free(s);
}

void rdzv_status_free(struct crun_rdzv_status *s)
{
	if (s == NULL)
		return;
	s->done = 1;
	s->gen++;
	uv_timer_stop(&s->timer);
	uv_close((uv_handle_t *)&s->timer, on_timer_closed);
}

const char *rdzv_status_state_name(enum rdzv_status_state st)
{
	switch (st) {
	case RDZV_STATUS_FORMING:
		return "forming";
	case RDZV_STATUS_RUNNING:
		return "running";
	case RDZV_STATUS_ENDED:
		return "ended";
	}
	return "?";
}

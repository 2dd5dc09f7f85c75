/*
 * The job console's link (jobcon.h): records, the host's sink, a sender.
 *
 * A sender keeps its records in batches, in order: the one being filled
 * (its key fixed when it began, so a round's records never go under the
 * next round's key) and the ones cut before it. One batch at a time is out:
 * an APPEND to its key and a CHECK of JOBCON_READY behind it on the same
 * connection, whose answer says the host has taken the batch. What waits
 * and what is out is bounded by the cap; past it, or once the connection
 * fails, every batch not acknowledged goes back to the console, in order.
 *
 * The host reads the records with jobcon_next (jobrec.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crun/err.h"
#include "crun/log.h"
#include "crun/ranges.h"
#include "jobcon.h"

/* A batch is cut at this size, so that the host's turn stays short. */
#define BATCH_MAX 65536
/* How long a closing sender waits for its last acknowledgement (ms). */
#define LINGER_MS 2000
/*
 * How long a record may wait for others to share its batch (ms): a batch
 * a line costs the host a wakeup a line; this is far below any window.
 */
#define GATHER_MS 5

/* ---- the host ----------------------------------------------------------- */

/* A batch under "<prefix><round>/<node>": handed to the console. */
static void on_sink(void *data, const char *key, size_t klen, const void *val,
		    size_t vlen)
{
	struct jobcon_sink *s = data;
	size_t i = strlen(JOBCON_PREFIX);
	long part[2] = {0, 0};

	for (int k = 0; k < 2; k++) {
		size_t from = i;

		while (i < klen && key[i] >= '0' && key[i] <= '9' &&
		       part[k] < 100000000)
			part[k] = part[k] * 10 + (key[i++] - '0');
		if (i == from || (k == 0 && (i >= klen || key[i++] != '/'))) {
			part[0] = -1;
			break;
		}
	}
	if (part[0] < 0 || i != klen) {
		if (s->bad++ < 3)
			log_say("the job console dropped %zu bytes under a key "
				"of no node: '%.*s'",
				vlen, (int)(klen > 64 ? 64 : klen), key);
		return;
	}
	s->batch(s->data, (int)part[0], (int)part[1], val, vlen);
}

int jobcon_host(struct crun_store_server *srv, struct jobcon_sink *s)
{
	int rc = store_server_set(srv, JOBCON_READY, "1", 1);

	if (rc == 0)
		store_server_on_sink(srv, JOBCON_PREFIX, on_sink, s);
	return rc;
}

/* ---- a sender ----------------------------------------------------------- */

struct batch {
	struct batch *next;
	char key[64];
	size_t len, cap;
	char *data;
};

struct jobcon {
	struct jobcon_opts o;
	uv_timer_t linger;
	uv_timer_t gather; /* the batch being filled goes when it fires */
	struct batch *head, *tail; /* oldest first; head is out when out */
	size_t bytes;		   /* of every batch */
	char key[64];		   /* the round's */
	int out;		   /* head is sent, not yet acknowledged */
	int ready;		   /* the host's console answered */
	int lost;		   /* the connection failed: for good */
	int full;		   /* no room: until the next round */
	int closing;
	int timers_closed;
	void (*drained)(void *data); /* jobcon_drain's, until it is */
	void *drained_data;
};

/* Nothing waits for the host any more (or it is out of reach): say so. */
static void link_drained(struct jobcon *j)
{
	void (*cb)(void *) = j->drained;

	if (cb == NULL || j->closing)
		return;
	j->drained = NULL;
	uv_timer_stop(&j->linger);
	cb(j->drained_data);
}

static void batch_free(struct batch *b)
{
	free(b->data);
	free(b);
}

/* Every batch not acknowledged goes back to the console, in order. */
static void link_give_back(struct jobcon *j)
{
	struct batch *b;

	while ((b = j->head) != NULL) {
		j->head = b->next;
		if (b->len)
			j->o.local(j->o.data, b->data, b->len);
		batch_free(b);
	}
	j->tail = NULL;
	j->bytes = 0;
	j->out = 0;
	link_drained(j);
}

static void link_on_closed(void *data)
{
	struct jobcon *j = data;

	link_give_back(j); /* cancelled ones */
	free(j);
}

static void link_on_timer_closed(uv_handle_t *h)
{
	struct jobcon *j = h->data;

	if (j->timers_closed++ == 0)
		return; /* the other one is still closing */
	store_aclient_close(j->o.client, link_on_closed, j);
}

static void link_finish(struct jobcon *j)
{
	if (uv_is_closing((uv_handle_t *)&j->linger))
		return;
	uv_close((uv_handle_t *)&j->linger, link_on_timer_closed);
	uv_close((uv_handle_t *)&j->gather, link_on_timer_closed);
}

/* The host is out of reach for good (what says how): give everything back. */
static void link_lose(struct jobcon *j, int status, const char *what)
{
	if (!j->lost)
		log_say("%s (%s): this node shows its own lines", what,
			crun_strerror(status));
	j->lost = 1;
	link_give_back(j);
	if (j->closing)
		link_finish(j);
}

static void link_send_head(struct jobcon *j);

static void link_on_ack(struct crun_store_aclient *c, int status,
			const struct crun_store_reply *r, void *data)
{
	struct jobcon *j = data;
	struct batch *b = j->head;

	(void)c;
	(void)r;
	if (status) {
		if (status != CRUN_ECANCELED)
			link_lose(j, status, "the job console is out of reach");
		return;
	}
	if (!j->out)
		return; /* given back already (the linger ran out) */
	j->out = 0;
	j->head = b->next;
	if (j->head == NULL)
		j->tail = NULL;
	j->bytes -= b->len;
	batch_free(b);
	link_send_head(j);
}

/* Send the oldest batch, unless one is out or nothing waits. */
static void link_send_head(struct jobcon *j)
{
	static const char *const ready[1] = {JOBCON_READY};
	struct batch *b = j->head;
	int rc;

	if (b == NULL && j->closing)
		return link_finish(j);
	if (b == NULL)
		return link_drained(j);
	if (j->out || !j->ready || j->lost)
		return;
	if (b == j->tail && !j->closing && !j->drained &&
	    b->len < BATCH_MAX / 2 && uv_is_active((uv_handle_t *)&j->gather))
		return; /* still gathering */
	rc = store_aclient_append(j->o.client, b->key, b->data, b->len, NULL,
				  NULL);
	if (rc == 0)
		rc = store_aclient_check(j->o.client, ready, 1, link_on_ack, j);
	if (rc)
		return link_lose(j, rc, "the job console is out of reach");
	j->out = 1;
}

static void link_on_ready(struct crun_store_aclient *c, int status,
			  const struct crun_store_reply *r, void *data)
{
	struct jobcon *j = data;

	(void)c;
	(void)r;
	if (status == CRUN_ECANCELED)
		return;
	if (status)
		return link_lose(j, status, "no job console answered");
	j->ready = 1;
	link_send_head(j);
}

struct jobcon *jobcon_new(const struct jobcon_opts *o)
{
	static const char *const ready[1] = {JOBCON_READY};
	struct jobcon *j = calloc(1, sizeof(*j));

	if (j == NULL) {
		store_aclient_close(o->client, NULL, NULL);
		return NULL;
	}
	j->o = *o;
	uv_timer_init(o->loop, &j->linger);
	uv_timer_init(o->loop, &j->gather);
	j->linger.data = j;
	j->gather.data = j;
	snprintf(j->key, sizeof(j->key), "%s0/0", JOBCON_PREFIX);
	if (store_aclient_wait(o->client, ready, 1, o->ready_ms, link_on_ready,
			       j)) {
		log_say("no job console: this node shows its own lines");
		j->lost = 1;
	}
	return j;
}

static void link_on_gather(uv_timer_t *t)
{
	link_send_head(t->data);
}

/* Begin a new batch under the round's key. */
static struct batch *batch_new(struct jobcon *j)
{
	struct batch *b = calloc(1, sizeof(*b));

	if (b == NULL)
		return NULL;
	snprintf(b->key, sizeof(b->key), "%s", j->key);
	if (j->tail)
		j->tail->next = b;
	else
		j->head = b;
	j->tail = b;
	return b;
}

void jobcon_round(struct jobcon *j, int round, int node)
{
	snprintf(j->key, sizeof(j->key), "%s%d/%d", JOBCON_PREFIX, round, node);
	j->full = 0; /* the old round's records keep their key */
}

int jobcon_put(struct jobcon *j, int fd, uint64_t age_ms, const int *ranks,
	       int n, int base, const char *prefix, size_t plen, size_t taglen,
	       const char *line, size_t len)
{
	char head[JOBCON_MAX_HEADER];
	size_t k, need;
	struct batch *b = j->tail;

	if (j->lost || j->full || j->closing)
		return -1;
	k = (size_t)snprintf(head, sizeof(head), line ? "L %d %llu " : "D %d ",
			     fd, (unsigned long long)age_ms);
	if (n == 0)
		head[k++] = '-';
	else
		k += ranges_format(ranks, n, base, head + k, sizeof(head) - k);
	if (plen > JOBCON_MAX_PREFIX)
		plen = JOBCON_MAX_PREFIX, taglen = 0;
	if (k < sizeof(head) && line)
		k += (size_t)snprintf(head + k, sizeof(head) - k,
				      " %zu %zu %zu", plen, taglen, len);
	if (k + 1 >= sizeof(head))
		return -1; /* a rank list past any header: shown here */
	head[k++] = '\n';
	need = k + (line ? plen + len : 0);
	if (j->bytes + need > j->o.cap) {
		if (!j->full)
			log_say("the job console takes no more for now (%zu "
				"bytes wait for it): this node shows its own "
				"lines until the next round",
				j->bytes);
		j->full = 1;
		return -1;
	}
	if (b == NULL || (j->out && b == j->head) ||
	    b->len + need > BATCH_MAX || strcmp(b->key, j->key) != 0) {
		b = batch_new(j);
		uv_timer_start(&j->gather, link_on_gather, GATHER_MS, 0);
	}
	if (b == NULL)
		return -1;
	if (b->len + need > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		char *p;

		while (cap < b->len + need)
			cap *= 2;
		if ((p = realloc(b->data, cap)) == NULL)
			return -1;
		b->data = p;
		b->cap = cap;
	}
	memcpy(b->data + b->len, head, k);
	if (line) {
		memcpy(b->data + b->len + k, prefix, plen);
		memcpy(b->data + b->len + k + plen, line, len);
	}
	b->len += need;
	j->bytes += need;
	link_send_head(j);
	return 0;
}

static void link_on_drain_timeout(uv_timer_t *t)
{
	link_drained(t->data);
}

void jobcon_drain(struct jobcon *j, void (*cb)(void *data), void *data)
{
	j->drained = cb;
	j->drained_data = data;
	if (j->lost || (j->ready && j->head == NULL))
		return link_drained(j);
	uv_timer_start(&j->linger, link_on_drain_timeout, LINGER_MS, 0);
	link_send_head(j); /* no more gathering */
}

static void link_on_linger(uv_timer_t *t)
{
	struct jobcon *j = t->data;

	if (!j->ready)
		log_say("no job console answered before the end: this node "
			"shows its own lines");
	link_give_back(j);
	link_finish(j);
}

void jobcon_close(struct jobcon *j)
{
	j->closing = 1; /* a drain still waiting is not told */
	if (j->lost || (j->ready && j->head == NULL)) {
		link_give_back(j);
		return link_finish(j);
	}
	uv_timer_start(&j->linger, link_on_linger, LINGER_MS, 0);
	link_send_head(j);
}

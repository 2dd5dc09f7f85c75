/*
 * The job-wide stall detector (see stall.h).
 *
 * Happy path: once a second the detector samples this node's workers
 * (progress.c) and keeps the age of the node's last progress: the time
 * since any of its ranks last progressed. Alone, an age of --stall_timeout
 * means the job is hung. On several nodes each node ADDs +1 to the round's
 * counter "r<R>/quiet" when its age reaches the timeout and -1 when one of
 * its ranks progresses again; the store orders the ADDs, so exactly the
 * ADD that brings the counter to the round's node count finds every node
 * quiet at once, and its node says the job is hung (it then ends the
 * round: nodes.c). A rank 0 busy writing a checkpoint keeps its node
 * off the counter, so ranks waiting for it in a barrier are no hang. Every
 * report_every seconds each node also writes its age to
 * "r<R>/progress/<g>" (milliseconds), for `crun status`; all of these
 * writes are pipelined, no reply waited for.
 *
 * Failure modes: a reply of an earlier round (or after stall_stop) is
 * ignored (gen); a failed ADD leaves the counter where the store has it,
 * and this node says nothing (the heartbeats judge the store); a node
 * whose workers all succeeded stays counted as quiet, so the others can
 * still be found hung; the work per tick is one scan of /proc, bounded by
 * PROGRESS_MAX_PROCS.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "crun/err.h"
#include "progress.h"
#include "stall.h"

#define TICK_MS 1000
#define MAX_RANKS 4096

struct stall {
	uv_loop_t *loop;
	uint64_t timeout_ms;
	char root[256];
	stall_hung_cb cb;
	void *data;
	uv_timer_t timer;
	int timer_open;
	int closing;
	int active;
	unsigned gen; /* bumped by every start and stop */

	struct stall_round r;
	char prefix[512];
	struct progress_rank ranks[MAX_RANKS];
	pid_t pids[MAX_RANKS];
	struct progress_sample samples[MAX_RANKS];
	uint64_t start_ms, last_tick_ms, last_report_ms;
	uint64_t since_ms; /* the node's last progress (loop time) */
	int quiet;	   /* counted in r<R>/quiet */
	int fired;	   /* cb ran this round */
};

/* ---- pure parts --------------------------------------------------------- */

int stall_quiet_step(int quiet, uint64_t age_ms, uint64_t timeout_ms,
		     int *delta)
{
	int now = age_ms >= timeout_ms;

	*delta = now == quiet ? 0 : now ? 1 : -1;
	return now;
}

int stall_is_hung(int delta, int64_t count, int nodes)
{
	/* Only a node going quiet can complete the count: an ADD of -1 that
	 * reads N back is impossible, one of 0 only reads. */
	return delta > 0 && nodes > 0 && count >= nodes;
}

/* ---- the detector ------------------------------------------------------- */

struct stall_op {
	struct stall *s;
	unsigned gen;
	int delta;
};

static void fire(struct stall *s)
{
	char why[128];

	if (s->fired)
		return;
	s->fired = 1;
	snprintf(why, sizeof(why), "no rank progressed for %g s",
		 (double)s->timeout_ms / 1000);
	s->cb(s, why, s->data);
}

static void on_quiet_count(int status, const struct crun_store_reply *rep,
			   void *arg)
{
	struct stall_op *o = arg;
	struct stall *s = o->s;

	if (status == 0 && o->gen == s->gen && s->active && !s->closing &&
	    stall_is_hung(o->delta, rdzv_reply_int(rep), s->r.group_world_size))
		fire(s);
	free(o);
}

static void add_quiet(struct stall *s, int delta)
{
	char k[600];
	struct stall_op *o;

	if (s->r.ops == NULL)
		return;
	o = malloc(sizeof(*o));
	if (o == NULL)
		return;
	o->s = s;
	o->gen = s->gen;
	o->delta = delta;
	snprintf(k, sizeof(k), "%squiet", s->prefix);
	if (s->r.ops->add(s->r.kv, k, delta, on_quiet_count, o))
		free(o);
}

static void report_age(struct stall *s, uint64_t age)
{
	char k[600], v[24];

	if (s->r.ops == NULL)
		return;
	snprintf(k, sizeof(k), "%sprogress/%d", s->prefix, s->r.group_rank);
	snprintf(v, sizeof(v), "%" PRIu64, age);
	s->r.ops->set(s->r.kv, k, v, strlen(v), NULL, NULL);
}

static void on_tick(uv_timer_t *t)
{
	struct stall *s = t->data;
	uint64_t now = uv_now(s->loop), elapsed = now - s->last_tick_ms;
	long hz = sysconf(_SC_CLK_TCK);
	int n = s->r.nproc, delta, quiet;

	if (!s->active)
		return;
	s->last_tick_ms = now;
	for (int i = 0; i < n; i++)
		s->pids[i] = s->r.pids[i];
	progress_scan(s->root, s->pids, (size_t)n, s->samples);
	for (int i = 0; i < n; i++)
		if (s->pids[i] > 0 &&
		    progress_note(&s->ranks[i], &s->samples[i], now, elapsed,
				  hz))
			s->since_ms = now;
	quiet = stall_quiet_step(s->quiet, now - s->since_ms, s->timeout_ms,
				 &delta);
	s->quiet = quiet;
	if (s->r.ops == NULL && quiet)
		fire(s);
	else if (delta)
		add_quiet(s, delta);
	if (s->r.ops && (delta || now - s->last_report_ms >=
				      (uint64_t)(s->r.report_every * 1000))) {
		s->last_report_ms = now;
		report_age(s, now - s->since_ms);
	}
}

int stall_new(uv_loop_t *loop, double timeout, const char *proc_root,
	      stall_hung_cb cb, void *data, struct stall **out)
{
	struct stall *s = calloc(1, sizeof(*s));

	*out = NULL;
	if (s == NULL)
		return UV_ENOMEM;
	s->loop = loop;
	s->timeout_ms = (uint64_t)(timeout * 1000);
	snprintf(s->root, sizeof(s->root), "%s", proc_root);
	s->cb = cb;
	s->data = data;
	if (timeout > 0) {
		uv_timer_init(loop, &s->timer);
		s->timer.data = s;
		s->timer_open = 1;
	}
	*out = s;
	return 0;
}

void stall_start(struct stall *s, const struct stall_round *r)
{
	if (s == NULL || !s->timer_open || s->closing)
		return;
	stall_stop(s, 0);
	s->r = *r;
	if (s->r.nproc > MAX_RANKS)
		s->r.nproc = MAX_RANKS;
	snprintf(s->prefix, sizeof(s->prefix), "%s",
		 r->prefix ? r->prefix : "");
	s->r.prefix = s->prefix;
	memset(s->ranks, 0, sizeof(s->ranks));
	s->start_ms = s->last_tick_ms = s->last_report_ms = s->since_ms =
	    uv_now(s->loop);
	s->quiet = 0;
	s->fired = 0;
	s->active = 1;
	uv_timer_start(&s->timer, on_tick, TICK_MS, TICK_MS);
}

void stall_stop(struct stall *s, int finished)
{
	if (s == NULL || !s->active)
		return;
	if (finished && !s->quiet && !s->fired)
		add_quiet(s, 1);
	s->active = 0;
	s->gen++;
	uv_timer_stop(&s->timer);
}

uint64_t stall_age_ms(const struct stall *s)
{
	return s && s->active ? uv_now(s->loop) - s->since_ms : 0;
}

void stall_close(struct stall *s)
{
	if (s == NULL || s->closing)
		return;
	stall_stop(s, 0);
	s->closing = 1;
	if (s->timer_open)
		uv_close((uv_handle_t *)&s->timer, NULL);
}

void stall_free(struct stall *s)
{
	free(s);
}

/*
 * The workers of one round, as a pool (pool.h).
 *
 * Happy path: pool_start starts n workers; each worker's exit is passed on
 * (on_exit), and when the last one is done (exited, pipes and group closed)
 * on_done runs; the owner judges the round and calls pool_end.
 *
 * Failure modes: a worker that cannot start counts as exited with 127 and
 * the ranks after it, never started, as stopped; workers that outstay the
 * stop signal get SIGKILL after --shutdown_timeout (the kill timer), once
 * their stacks are taken (stacks.c, at most --stack_timeout); a worker
 * still there POOL_STUCK_MS after SIGKILL (uninterruptible sleep) is named
 * and given up on, so the round ends without it. With --checkpoint_grace a
 * rank writing a checkpoint gets the stop signal once it is done (grace.c
 * reports it), and the kill timer starts from the last one.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crun/log.h"
#include "console.h"
#include "pool.h"
#include "crun/stacks.h"

/* How long after SIGKILL a worker still there is given up on. */
#define POOL_STUCK_MS 5000
/* The stderr lines searched for a faulthandler dump. */
#define POOL_DUMP_LINES 400

static void pool_on_kill_timer(uv_timer_t *t);

/* The shutdown timeout, from now. */
static void pool_arm_kill(struct pool *p)
{
	uv_timer_start(&p->kill_timer, pool_on_kill_timer,
		       (uint64_t)(p->shutdown_timeout * 1000), 0);
}

/* A rank held for its checkpoint is let go: its stop signal now. */
static void pool_on_grace_release(void *data, int i, int timed_out)
{
	struct pool *p = data;

	if (timed_out)
		log_say("rank %d is still writing its checkpoint after "
			"--checkpoint_grace=%g s: stopping it",
			p->base_rank + i, p->grace.seconds);
	else
		log_say("rank %d finished writing its checkpoint: stopping it",
			p->base_rank + i);
	worker_signal(&p->w[i], p->stop_sig);
	if (p->grace.nheld == 0)
		pool_arm_kill(p);
}

static void pool_on_worker_exit(struct worker *w, void *data)
{
	struct pool *p = data;

	p->pids[w->local_rank] = 0;
	if (grace_holds(&p->grace, w->local_rank)) {
		grace_forget(&p->grace, w->local_rank);
		if (p->grace.nheld == 0)
			pool_arm_kill(p);
	}
	if (p->stacks && p->stack_of[w->local_rank] >= 0) {
		/* faulthandler's dump, if it was asked for one, is there. */
		char *end = worker_stderr_end(w, POOL_DUMP_LINES);

		/* Its SIGABRT was how the kill took its stack: it died of
		 * the SIGKILL crun was sending (137, as without stacks). */
		if (stacks_exited(p->stacks, (size_t)p->stack_of[w->local_rank],
				  end, end ? strlen(end) : 0) &&
		    w->signal == SIGABRT) {
			w->signal = SIGKILL;
			w->status = 128 + SIGKILL;
		}
		free(end);
	}
	p->on_exit(p, w, p->data);
}

static void pool_on_worker_done(struct worker *w, void *data)
{
	struct pool *p = data;

	(void)w;
	if (++p->ndone == p->n)
		p->on_done(p, p->data);
}

int pool_init(struct pool *p, const struct worker_ctx *ctx,
	      pool_exit_cb on_exit, pool_started_cb on_started,
	      pool_done_cb on_done, void *data)
{
	memset(p, 0, sizeof(*p));
	p->wctx = *ctx;
	p->wctx.on_exit = pool_on_worker_exit;
	p->wctx.on_done = pool_on_worker_done;
	p->wctx.data = p;
	p->shutdown_timeout = ctx->cfg->shutdown_timeout;
	p->stack_timeout = ctx->cfg->stack_timeout;
	p->on_exit = on_exit;
	p->on_started = on_started;
	p->on_done = on_done;
	p->data = data;
	p->kill_timer.data = p;
	p->stuck_timer.data = p;
	return uv_timer_init(ctx->loop, &p->kill_timer) ||
	       uv_timer_init(ctx->loop, &p->stuck_timer) ||
	       grace_init(&p->grace, ctx->loop, ctx->cfg->checkpoint_grace,
			  pool_on_grace_release, p);
}

void pool_close(struct pool *p)
{
	stacks_free(p->stacks);
	p->stacks = NULL;
	uv_close((uv_handle_t *)&p->kill_timer, NULL);
	uv_close((uv_handle_t *)&p->stuck_timer, NULL);
	grace_close(&p->grace);
}

static void pool_alloc(struct pool *p, int n)
{
	p->n = n;
	p->ndone = 0;
	p->w = calloc((size_t)n, sizeof(*p->w));
	p->pids = calloc((size_t)n, sizeof(*p->pids));
	p->stack_of = calloc((size_t)n, sizeof(*p->stack_of));
	p->kill_after = calloc((size_t)n, 1);
	p->killed = calloc((size_t)n, 1);
	p->markers = calloc((size_t)n, sizeof(*p->markers));
	if (p->w == NULL || p->pids == NULL || p->stack_of == NULL ||
	    p->kill_after == NULL || p->killed == NULL || p->markers == NULL)
		abort();
	p->kill_all = 0;
	for (int i = 0; i < n; i++)
		p->stack_of[i] = -1;
}

/*
 * Local rank i cannot start (its log directory, pipes, fds or exec failed):
 * it failed like a worker that exited 127, so the round ends on every node
 * and restarts are spent job-wide. Ranks after i count as stopped, not as
 * failed: never started, or begun and cancelled (done once their handles
 * are closed).
 */
static void pool_start_failed(struct pool *p, int i)
{
	struct worker *f = &p->w[i];
	int later = 0;

	if (f->ctx == NULL) { /* worker_start_begin never ran for it */
		worker_init(f, &p->wctx, i);
		worker_fail(f);
	}
	for (int k = i + 1; k < p->n; k++) {
		struct worker *w = &p->w[k];

		if (w->ctx == NULL) {
			worker_init(w, &p->wctx, k);
			worker_fail(w);
		}
		w->stopped = 1;
		later += w->handles > 0;
	}
	p->on_exit(p, f, p->data);
	p->ndone += p->n - i - 1 - later + (f->handles == 0);
	if (p->ndone == p->n)
		p->on_done(p, p->data);
}

/*
 * Every worker is forked before any exec is waited for (the guards set up
 * and exec on the other cores meanwhile); then each exec's outcome is read
 * in local-rank order, so the first rank that cannot start is the one said,
 * and the ones after it that did start are stopped at once.
 */
int pool_start(struct pool *p, int n, const struct worker_round *r)
{
	char errmsg[512], why[512] = "";
	int begun = 0, failed = -1;

	pool_alloc(p, n);
	p->base_rank = r->ranks.base_rank;
	if (p->wctx.console)
		console_set_ranks(p->wctx.console, n);
	for (; begun < n; begun++) {
		if (worker_start_begin(&p->w[begun], &p->wctx, begun, r, why,
				       sizeof(why))) {
			failed = begun;
			break;
		}
	}
	for (int i = 0; i < begun; i++) {
		if (failed >= 0 && failed < i) {
			worker_start_cancel(&p->w[i]);
		} else if (worker_start_end(&p->w[i], errmsg, sizeof(errmsg)) ==
			   0) {
			p->pids[i] = p->w[i].pid;
			p->on_started(p, &p->w[i], p->data);
		} else {
			snprintf(why, sizeof(why), "%s", errmsg);
			if (failed >= 0)
				p->w[failed].stopped = 1;
			failed = i;
		}
	}
	if (failed < 0)
		return 0;
	log_say("%s", why);
	pool_start_failed(p, failed);
	return -1;
}

void pool_fail(struct pool *p, int n)
{
	pool_alloc(p, n);
	pool_start_failed(p, 0);
}

static int pool_rank(const struct pool *p, const struct worker *w)
{
	return p->base_rank + w->local_rank;
}

/* Whoever is still there POOL_STUCK_MS after SIGKILL cannot be killed. */
static void pool_on_stuck_timer(uv_timer_t *t)
{
	struct pool *p = t->data;

	for (int i = 0; i < p->n; i++) {
		struct worker *w = &p->w[i];
		char line[300];

		if (w->proc == NULL || w->exited || !p->killed[i])
			continue;
		stacks_describe_unkillable(pool_rank(p, w), w->pid, line,
					   sizeof(line));
		log_say("%s: giving up on it (the round ends without it)",
			line);
		p->survivors++;
		worker_abandon(w);
	}
}

/* SIGKILL was sent: every worker it was sent to gets POOL_STUCK_MS. */
static void pool_armed_kill(struct pool *p)
{
	uv_timer_start(&p->stuck_timer, pool_on_stuck_timer, POOL_STUCK_MS, 0);
}

void pool_signal(struct pool *p, int sig)
{
	for (int i = 0; i < p->n; i++) {
		if (sig == SIGKILL && p->w[i].proc)
			p->killed[i] = 1;
		worker_signal(&p->w[i], sig);
	}
	if (sig == SIGKILL)
		pool_armed_kill(p);
}

/* SIGKILL every rank marked kill_after, now that its stack is taken. */
static void pool_kill_marked(struct pool *p)
{
	for (int i = 0; i < p->n; i++) {
		struct worker *w = &p->w[i];

		if (!p->kill_after[i])
			continue;
		p->kill_after[i] = 0;
		if (w->proc)
			p->killed[i] = 1;
		if (p->kill_all)
			worker_signal(w, SIGKILL);
		else
			worker_kill(w);
	}
	pool_armed_kill(p);
}

/* Show rank i's stack (when its own stderr did not) and keep it. */
static void pool_show_stack(struct pool *p, struct worker *w, size_t k)
{
	const char *src = stacks_source(p->stacks, k);
	size_t len;
	const char *text = stacks_text(p->stacks, k, &len);
	char head[200];
	int n;

	free(w->stacks);
	w->stacks = strdup(text);
	if (src == NULL) {
		log_say("no stack of rank %d: %s", pool_rank(p, w), text);
		return;
	}
	log_say("stack of rank %d (pid %d) before SIGKILL, from %s%s",
		pool_rank(p, w), (int)w->pid, src,
		strcmp(src, "faulthandler") == 0 ? " (above, on its stderr)"
						 : ":");
	if (strcmp(src, "faulthandler") == 0)
		return;
	n = snprintf(head, sizeof(head), "--- stack of rank %d (pid %d), %s\n",
		     pool_rank(p, w), (int)w->pid, src);
	worker_inject(w, head, (size_t)n);
	worker_inject(w, text, len);
	if (len > 0 && text[len - 1] != '\n')
		worker_inject(w, "\n", 1);
	n = snprintf(head, sizeof(head), "--- end of stack of rank %d\n",
		     pool_rank(p, w));
	worker_inject(w, head, (size_t)n);
}

static void pool_on_stacks(struct stacks *s, void *data)
{
	struct pool *p = data;

	for (int i = 0; i < p->n; i++)
		if (p->stack_of[i] >= 0) {
			pool_show_stack(p, &p->w[i], (size_t)p->stack_of[i]);
			p->stack_of[i] = -1;
		}
	stacks_free(s);
	p->stacks = NULL;
	pool_kill_marked(p);
}

void pool_kill_stacks(struct pool *p, int local_rank)
{
	struct stacks_proc *sp;
	size_t n = 0;

	if (local_rank >= p->n)
		return;
	if (local_rank < 0)
		p->kill_all = 1;
	for (int i = 0; i < p->n; i++)
		if ((local_rank < 0 || i == local_rank) && p->w[i].proc)
			p->kill_after[i] = 1;
	if (p->stacks) /* being taken: the kill follows */
		return;
	sp = calloc((size_t)p->n, sizeof(*sp));
	for (int i = 0; sp && i < p->n; i++) {
		p->stack_of[i] = -1;
		if (!p->kill_after[i])
			continue;
		p->stack_of[i] = (int)n;
		sp[n].pid = p->w[i].pid;
		sp[n++].python = p->w[i].python;
	}
	if (sp == NULL || n == 0 || p->stack_timeout <= 0 ||
	    stacks_start(p->wctx.loop, sp, n, STACKS_BEFORE_KILL,
			 p->stack_timeout, pool_on_stacks, p, &p->stacks)) {
		for (int i = 0; i < p->n; i++)
			p->stack_of[i] = -1;
		p->stacks = NULL;
		pool_kill_marked(p);
	} else {
		log_say("taking the stack%s of %zu worker%s before SIGKILL (at "
			"most %g s)",
			n == 1 ? "" : "s", n, n == 1 ? "" : "s",
			p->stack_timeout);
	}
	free(sp);
}

static void pool_on_kill_timer(uv_timer_t *t)
{
	struct pool *p = t->data;

	log_say("workers still running %.0f s after the stop signal: sending "
		"SIGKILL",
		p->shutdown_timeout);
	pool_kill_stacks(p, -1);
}

void pool_stop(struct pool *p, int sig)
{
	int held = 0;

	if (sig > 0 && sig != SIGKILL) {
		for (int i = 0; i < p->n; i++)
			p->markers[i] = p->w[i].proc ? p->w[i].ckpt_file : NULL;
		held = grace_hold(&p->grace, p->markers, p->n);
	}
	p->stop_sig = sig;
	if (held == 0) {
		pool_signal(p, sig);
		pool_arm_kill(p);
		return;
	}
	for (int i = 0; i < p->n; i++)
		if (!grace_holds(&p->grace, i))
			worker_signal(&p->w[i], sig);
	log_say("%d rank%s writing a checkpoint: %s stop signal waits until "
		"it is written, at most %g s (--checkpoint_grace)",
		held, held == 1 ? " is" : "s are", held == 1 ? "its" : "their",
		p->grace.seconds);
}

void pool_winch(struct pool *p)
{
	for (int i = 0; i < p->n; i++)
		worker_winch(&p->w[i]);
}

void pool_end(struct pool *p)
{
	grace_end(&p->grace);
	uv_timer_stop(&p->kill_timer);
	uv_timer_stop(&p->stuck_timer);
	stacks_free(p->stacks);
	p->stacks = NULL;
	for (int i = 0; i < p->n; i++)
		worker_release(&p->w[i]);
	free(p->w);
	free(p->pids);
	free(p->stack_of);
	free(p->kill_after);
	free(p->killed);
	free(p->markers);
	p->markers = NULL;
	p->w = NULL;
	p->pids = NULL;
	p->stack_of = NULL;
	p->kill_after = p->killed = NULL;
	p->n = p->ndone = 0;
}

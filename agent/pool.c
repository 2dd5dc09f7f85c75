/*
 * The workers of one round, as a pool (pool.h).
 *
 * Happy path: pool_start starts n workers; each worker's exit is passed on
 * (on_exit), and when the last one is done (exited, pipes and group closed)
 * on_done runs; the owner judges the round and calls pool_end.
 *
 * Failure modes: a worker that cannot start counts as exited with 127 and
 * the ranks after it, never started, as stopped; workers that outstay the
 * stop signal get SIGKILL after --shutdown_timeout (the kill timer).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crun/log.h"
#include "pool.h"

static void pool_on_worker_exit(struct worker *w, void *data)
{
	struct pool *p = data;

	p->pids[w->local_rank] = 0;
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
	p->on_exit = on_exit;
	p->on_started = on_started;
	p->on_done = on_done;
	p->data = data;
	p->kill_timer.data = p;
	return uv_timer_init(ctx->loop, &p->kill_timer);
}

void pool_close(struct pool *p)
{
	uv_close((uv_handle_t *)&p->kill_timer, NULL);
}

static void pool_alloc(struct pool *p, int n)
{
	p->n = n;
	p->ndone = 0;
	p->w = calloc((size_t)n, sizeof(*p->w));
	p->pids = calloc((size_t)n, sizeof(*p->pids));
	if (p->w == NULL || p->pids == NULL)
		abort();
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

void pool_signal(struct pool *p, int sig)
{
	for (int i = 0; i < p->n; i++)
		worker_signal(&p->w[i], sig);
}

static void pool_on_kill_timer(uv_timer_t *t)
{
	struct pool *p = t->data;

	log_say("workers still running %.0f s after the stop signal: sending "
		"SIGKILL",
		p->shutdown_timeout);
	pool_signal(p, SIGKILL);
}

void pool_stop(struct pool *p, int sig)
{
	pool_signal(p, sig);
	uv_timer_start(&p->kill_timer, pool_on_kill_timer,
		       (uint64_t)(p->shutdown_timeout * 1000), 0);
}

void pool_winch(struct pool *p)
{
	for (int i = 0; i < p->n; i++)
		worker_winch(&p->w[i]);
}

void pool_end(struct pool *p)
{
	uv_timer_stop(&p->kill_timer);
	for (int i = 0; i < p->n; i++)
		worker_release(&p->w[i]);
	free(p->w);
	free(p->pids);
	p->w = NULL;
	p->pids = NULL;
	p->n = p->ndone = 0;
}

/*
 * The workers of one round (pool.c): started together, signalled together,
 * SIGKILLed together when they outstay the shutdown timeout, and counted
 * until every one is done. The pool reports to its owner through the
 * callbacks it was created with, as each worker reports to the pool.
 * Private to agent/.
 */
#ifndef CRUN_AGENT_POOL_H
#define CRUN_AGENT_POOL_H

#include "grace.h"
#include "worker.h"

struct pool;
struct stacks;

/** A worker of the round exited (or could not start: status 127). */
typedef void (*pool_exit_cb)(struct pool *p, struct worker *w, void *data);
/** A worker started (its pid is known). */
typedef void (*pool_started_cb)(struct pool *p, struct worker *w, void *data);
/** Every worker of the round is done: judge the round, then pool_end. */
typedef void (*pool_done_cb)(struct pool *p, void *data);

struct pool {
	struct worker *w; /* n workers of the round, NULL between rounds */
	int n, ndone;
	int base_rank; /* the global rank of local rank 0 */
	pid_t *pids; /* each worker's pid while it runs, 0 once it exited */
	uv_timer_t kill_timer;
	double shutdown_timeout;
	double stack_timeout; /* 0: SIGKILL without taking stacks first */
	struct stacks *stacks; /* being taken before a kill, or NULL */
	int *stack_of;	       /* local rank -> its index there, -1 */
	char *kill_after;      /* local ranks to SIGKILL once they are taken */
	char *killed;	       /* local ranks SIGKILL was sent to */
	int kill_all;	       /* the kill is the stop's (workers stopped) */
	uv_timer_t stuck_timer; /* SIGKILL sent: who is still there then */
	int survivors; /* workers that outlived SIGKILL, in every round */
	struct grace grace;	/* --checkpoint_grace: ranks let finish */
	const char **markers;	/* per local rank, for grace_hold */
	int stop_sig;		/* the stop's signal, for ranks held */
	struct worker_ctx wctx; /* each worker's, reporting to the pool */
	pool_exit_cb on_exit;
	pool_started_cb on_started;
	pool_done_cb on_done;
	void *data;
};

/*
 * Set up p on ctx's loop: ctx's callbacks are replaced by the pool's, which
 * call on_exit / on_started / on_done with data. Returns 0 or a libuv error.
 */
int pool_init(struct pool *p, const struct worker_ctx *ctx,
	      pool_exit_cb on_exit, pool_started_cb on_started,
	      pool_done_cb on_done, void *data);

/** Close the kill timer (the loop then runs dry once the rest is closed). */
void pool_close(struct pool *p);

/**
 * Start n workers for round r: all forked, then each exec's outcome read in
 * local-rank order. A worker that cannot start fails the round like one that
 * exited 127 (its line said); the ranks after it count as done and stopped,
 * not as failed (those whose exec had succeeded are SIGKILLed and reaped
 * first, their output dropped). on_done may run before this returns.
 * Returns 0 if all started, else -1.
 */
int pool_start(struct pool *p, int n, const struct worker_round *r);

/** A round of n workers of which none can start (no log directory). */
void pool_fail(struct pool *p, int n);

/** Send sig to every worker (and what is left of exited ones' groups). */
void pool_signal(struct pool *p, int sig);

/**
 * Stop the round: sig now, SIGKILL after the shutdown timeout. With
 * --checkpoint_grace, a rank writing a checkpoint (grace.h) gets sig once it
 * is done, at most the grace later; the shutdown timeout then counts from
 * the last rank let go.
 */
void pool_stop(struct pool *p, int sig);

/**
 * SIGKILL local rank local_rank (-1: every running worker, which the stop
 * signal has already marked stopped) after taking its stack (stacks.h),
 * for at most --stack_timeout; the stack goes to the console, its stderr
 * tail and w->stacks (the failure report). A single rank killed so counts
 * as failed, not as stopped. A worker still there STUCK_MS after SIGKILL is
 * named (its state and wait channel) and given up on (worker_abandon).
 */
void pool_kill_stacks(struct pool *p, int local_rank);

/** The console's window size changed: tell every worker's terminal. */
void pool_winch(struct pool *p);

/** After on_done: release every worker; the pool is empty again. */
void pool_end(struct pool *p);

#endif

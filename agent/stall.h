/*
 * The job-wide stall detector (--stall_timeout, stall.c): the job is hung
 * when no rank on any node made progress (progress.h) for the timeout.
 * Private to agent/.
 */
#ifndef CRUN_AGENT_STALL_H
#define CRUN_AGENT_STALL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "crun/rdzv.h"

struct stall;

/** The job is hung: why is one line ("no rank progressed for 5 s"). */
typedef void (*stall_hung_cb)(struct stall *s, const char *why, void *data);

/** What one round's detector needs; copied by stall_start. */
struct stall_round {
	/* Each local rank's pid while it runs, 0 once it exited: read each
	 * tick until stall_stop. */
	const pid_t *pids;
	int nproc;
	/* Several nodes: the rendezvous store and this round's key prefix
	 * ("crun/<run_id>/r<R>/"); ops NULL alone. */
	const struct rdzv_kv_ops *ops;
	void *kv;
	const char *prefix;
	int group_rank, group_world_size;
	double report_every; /* s between this node's progress records */
};

/**
 * A detector with timeout seconds (0: off, and every call below does
 * nothing) over proc_root ("/proc"; tests fake it). cb runs at most once a
 * round. Free with stall_close, then stall_free once the loop ran dry.
 */
int stall_new(uv_loop_t *loop, double timeout, const char *proc_root,
	      stall_hung_cb cb, void *data, struct stall **out);

/** The workers of a round started: sample them once a second. */
void stall_start(struct stall *s, const struct stall_round *r);

/**
 * The round ends here (pending replies are ignored). finished: this
 * node's workers all succeeded, so it counts as quiet from now on (the
 * others can still be found hung).
 */
void stall_stop(struct stall *s, int finished);

/** Milliseconds since this node's ranks last progressed (0: not running). */
uint64_t stall_age_ms(const struct stall *s);

void stall_close(struct stall *s);
void stall_free(struct stall *s);

/* ---- pure parts, exposed for unit tests -------------------------------- */

/**
 * A node that was quiet (or not) and whose ranks last progressed age_ms
 * ago: whether it is quiet now, and in *delta what to ADD to the round's
 * quiet counter (+1 it went quiet, -1 it progressed again, else 0).
 */
int stall_quiet_step(int quiet, uint64_t age_ms, uint64_t timeout_ms,
		     int *delta);

/**
 * The quiet counter's value after our ADD of delta, on a round of nodes:
 * whether this ADD is the one that found the whole job quiet.
 */
int stall_is_hung(int delta, int64_t count, int nodes);

#endif

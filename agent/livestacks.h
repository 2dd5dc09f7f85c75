/*
 * `crun status --stacks` on this node, a part of the agent (livestacks.c):
 * the live stacks of the running workers (py-spy only: nothing is signalled
 * or stopped), each labelled with where the training script is, written as
 * one bounded answer to the rendezvous. Private to agent/.
 */
#ifndef CRUN_AGENT_LIVESTACKS_H
#define CRUN_AGENT_LIVESTACKS_H

#include <sys/types.h>
#include <uv.h>

#include "crun/cfg.h"
#include "crun/rdzv.h"

struct livestacks;

/** The answer is written (or could not be): ls is freed after cb returns. */
typedef void (*livestacks_done_cb)(struct livestacks *ls, void *data);

/**
 * Take the stacks of the n workers whose pids are given (0: exited, skipped;
 * rank base_rank + i) and answer request nonce through rdzv. cb runs once,
 * from the loop, never before livestacks_start returns. 0, or an error
 * (nothing started, cb never runs).
 */
int livestacks_start(uv_loop_t *loop, const struct crun_cfg *cfg,
		     const pid_t *pids, int n, int base_rank,
		     struct crun_rdzv *rdzv, const char *nonce,
		     livestacks_done_cb cb, void *data, struct livestacks **out);

/** Abandon it: its answer is never written and cb never runs. */
void livestacks_free(struct livestacks *ls);

#endif

/*
 * `crun status --stacks` (status_stacks.c): ask every agent of the running
 * round for its ranks' live stacks (rdzv_stacks.h) and print them grouped.
 */
#ifndef CRUN_STATUS_STACKS_H
#define CRUN_STATUS_STACKS_H

#include <uv.h>

#include "crun/rdzv.h"
#include "crun/rdzv_status.h"

struct status_stacks;

/** Done: rc is crun status's exit status (0 every node answered). */
typedef void (*status_stacks_cb)(struct status_stacks *ss, int rc, void *data);

/**
 * Write a request for st's round over kv, wait up to wait_s for the
 * answers of the round's nodes (those that did not finish), print them
 * (JSON when json) and call cb once. st is copied from as needed. Returns
 * 0, or an error (cb never runs). Close kv before status_stacks_free if
 * requests may be pending (they then fail and are ignored).
 */
int status_stacks_run(uv_loop_t *loop, const struct rdzv_kv_ops *ops, void *kv,
		      const struct rdzv_status *st, int json, double wait_s,
		      status_stacks_cb cb, void *data,
		      struct status_stacks **out);

/** Stop the poll timer and free ss once it is closed. */
void status_stacks_free(struct status_stacks *ss);

#endif

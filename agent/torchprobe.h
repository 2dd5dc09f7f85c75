/*
 * Ask the workers' interpreter, on the loop, which workers' store its torch
 * accepts (include/crun/torchstore.h): `python -c TORCHSTORE_PROBE` as a
 * child process, its output read through a pipe, bounded in bytes and in
 * time. Private to agent/.
 */
#ifndef CRUN_AGENT_TORCHPROBE_H
#define CRUN_AGENT_TORCHPROBE_H

#include <uv.h>

#include "crun/torchstore.h"

struct torchprobe;

/** The answer (TORCHSTORE_UNKNOWN with why when there is none). */
typedef void (*torchprobe_cb)(const struct torchstore *ts, void *data);

/**
 * Run python's probe with the agent's environment and directory, killed
 * after timeout_s. 0: cb runs exactly once, unless torchprobe_close comes
 * first (then never); else an error and cb never runs.
 */
int torchprobe_start(uv_loop_t *loop, const char *python, double timeout_s,
		     torchprobe_cb cb, void *data, struct torchprobe **out);

/** Stop it (the child is killed) and free it once its handles closed. */
void torchprobe_close(struct torchprobe *p);

#endif

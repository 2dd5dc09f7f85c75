/*
 * The per-node agent: one libuv loop that runs rounds of "meet the other
 * nodes, start the worker group, watch it, stop it" until the job succeeds,
 * fails for good, or is told to stop. agent.c holds the state machine; the
 * leaves it drives (pool.h, worker.h, group.h, initdiag.h, ...) each have a
 * header of their own and never include this one. Private to the agent's
 * own files.
 */
#ifndef CRUN_AGENT_H
#define CRUN_AGENT_H

#include "agent_run.h"

#endif

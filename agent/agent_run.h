/*
 * The agent's one public entry: what launcher/main.c calls once the command
 * line is parsed. Everything else of agent/ is private to it.
 */
#ifndef CRUN_AGENT_RUN_H
#define CRUN_AGENT_RUN_H

#include "crun/cfg.h"

/** Run the agent for cfg until the job ends; returns crun's exit status. */
int agent_run(struct crun_cfg *cfg);

#endif

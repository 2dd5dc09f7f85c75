/*
 * The agent's file-descriptor budget (nofile.c). Private to agent/.
 */
#ifndef CRUN_AGENT_NOFILE_H
#define CRUN_AGENT_NOFILE_H

#include <stddef.h>

#include "crun/cfg.h"

/**
 * Raise RLIMIT_NOFILE's soft limit to the hard one and cap cfg's store
 * connections below it, with a reserve for the workers. Returns the cap;
 * note gets a warning line when fds are scarce, else "".
 */
size_t nofile_budget(struct crun_cfg *cfg, char *note, size_t len);

#endif

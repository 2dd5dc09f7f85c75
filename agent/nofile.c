/*
 * The agent's file-descriptor budget. The agent, the stores it serves (the
 * rendezvous store on the host, the workers' store of each round) and the
 * pipes and log files of its workers share one fd table: a store that
 * accepts connections until RLIMIT_NOFILE runs out leaves no fd for the
 * next worker's pipes. So at start the soft limit is raised to the hard one,
 * and each store's connection limit is capped so that both stores together
 * stay below it with a reserve for the workers and the agent itself.
 *
 * Failure modes: the hard limit is tiny (prlimit --nofile=64): the cap has
 * a floor (a few connections per store) and a line says how few fds there
 * are; a worker that still cannot get its fds fails like any worker that
 * cannot start (the round ends on every node).
 */
#include <stdio.h>
#include <sys/resource.h>

#include "nofile.h"

/* fds one worker needs at once: pipes, log files, spawn and guard pipes. */
#define NOFILE_PER_WORKER 12
/* fds of the agent itself: loop, signals, stdio, its own store clients. */
#define NOFILE_AGENT 40
/* Connections each store is always allowed. */
#define NOFILE_MIN_CONNS 8

size_t nofile_budget(struct crun_cfg *cfg, char *note, size_t len)
{
	struct rlimit rl;
	size_t limit, reserve, cap;

	*note = '\0';
	if (getrlimit(RLIMIT_NOFILE, &rl))
		return cfg->store.max_conns;
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl))
			getrlimit(RLIMIT_NOFILE, &rl);
	}
	limit = rl.rlim_cur == RLIM_INFINITY ? (size_t)1 << 20
					     : (size_t)rl.rlim_cur;
	reserve =
	    NOFILE_AGENT + (size_t)cfg->nproc_per_node * NOFILE_PER_WORKER;
	/* Two stores (rendezvous and workers') share what is left. */
	cap = limit > reserve ? (limit - reserve) / 2 : 0;
	if (cap < NOFILE_MIN_CONNS) {
		snprintf(note, len,
			 "only %zu file descriptors (RLIMIT_NOFILE) for %d "
			 "worker%s and the stores: raise it with ulimit -n",
			 limit, cfg->nproc_per_node,
			 cfg->nproc_per_node == 1 ? "" : "s");
		cap = NOFILE_MIN_CONNS;
	}
	if (cfg->store.max_conns > cap)
		cfg->store.max_conns = cap;
	return cfg->store.max_conns;
}

/*
 * Worker environments: the agent's own environment plus the torchrun worker
 * contract, built completely before a worker is spawned. Also the rank
 * arithmetic that turns a rendezvous result (each node's role and local world
 * size, in group-rank order) into the numbers the contract exports.
 */
#ifndef CRUN_ENV_H
#define CRUN_ENV_H

#include <stddef.h>

#include "crun/ranks.h"

/* A growable NULL-terminated "NAME=VALUE" array (an envp). */
struct crun_env {
	char **v;
	int n, cap;
};

/** Copy envp (NULL: nothing) into e. */
int env_init(struct crun_env *e, char *const *envp);
void env_release(struct crun_env *e);

/** Set NAME to VALUE, replacing any earlier value. */
int env_set(struct crun_env *e, const char *name, const char *value);

/** Set NAME=VALUE from a "NAME=VALUE" string. */
int env_put(struct crun_env *e, const char *assignment);

/** The value of NAME, or NULL. */
const char *env_get(const struct crun_env *e, const char *name);

/** One node of a rendezvous round, in group-rank order. */
struct crun_node_info {
	const char *role;
	int local_world_size;
};

/**
 * Prefix sums over nodes[0..n): RANK = sum of local world sizes of nodes with
 * a lower group rank; ROLE_RANK the same over nodes of the same role.
 */
void env_compute_ranks(const struct crun_node_info *nodes, int n,
		       int group_rank, struct crun_ranks *out);

/**
 * env_compute_ranks for every group rank at once: out[g] for g in [0, n),
 * in O(n log n) (the closer of a 16K-node round). 0, or -1 out of memory.
 */
int env_compute_all_ranks(const struct crun_node_info *nodes, int n,
			  struct crun_ranks *out);

/** Everything one worker's contract needs besides the ranks. */
struct crun_worker_ctx {
	const char *role;
	int local_rank;
	const char *master_addr;
	int master_port;
	int restart_count, max_restarts;
	const char *run_id;
	int use_agent_store;
	int no_libuv;		/* USE_LIBUV=0: their torch has no libuv */
	const char *error_file; /* may be NULL */
	int nproc;		/* for OMP_NUM_THREADS */
};

/** Add the worker contract (spec section 2) to e. */
int env_add_contract(struct crun_env *e, const struct crun_ranks *r,
		     const struct crun_worker_ctx *w);

#endif

/*
 * What a rendezvous round gives one node's workers (the rank numbers of the
 * torchrun contract): the rendezvous fills it, env.h computes and exports
 * it. A type alone, below both.
 */
#ifndef CRUN_RANKS_H
#define CRUN_RANKS_H

/** What the contract says about one node's workers. */
struct crun_ranks {
	int group_rank, group_world_size;
	int base_rank; /* RANK of local rank 0 */
	int world_size;
	int base_role_rank; /* ROLE_RANK of local rank 0 */
	int role_world_size;
	int local_world_size;
};

#endif

/*
 * What crun derives from a SLURM environment:
 * node count, node rank, rendezvous id and endpoint, workers per node, each
 * with a one-line reason for --print-config, plus warnings for the known
 * pitfalls. Pure: it reads an envp array, never getenv, and does no I/O, so
 * every case is a unit test.
 *
 * The intended launch is one crun per node inside an srun step:
 *     srun --ntasks-per-node=1 scripts/crun-slurm train.py
 * so inside a step the step's own task layout describes the crun processes,
 * not the workers; the workers per node come from the GPUs, or from the
 * job's layout saved by scripts/crun.sbatch in CRUN_SLURM_TASKS_PER_NODE
 * before srun replaced SLURM_TASKS_PER_NODE with the step's.
 */
#ifndef CRUN_SLURM_H
#define CRUN_SLURM_H

#include <stddef.h>

#include "crun/hostlist.h"

/*
 * The endpoint port is CRUN_SLURM_PORT_BASE + job id % CRUN_SLURM_PORT_SPAN,
 * i.e. 20000..29999: unprivileged, below Linux's ephemeral range (32768+, so
 * an outgoing connection never holds it), clear of Slurm's 6817-6819, and
 * (job ids being sequential) two jobs sharing a node collide only if their
 * ids differ by a multiple of 10000. Override with --rdzv_endpoint.
 */
#define CRUN_SLURM_PORT_BASE 20000
#define CRUN_SLURM_PORT_SPAN 10000

#define CRUN_SLURM_WHY 192  /* bytes of one reason, with its NUL */
#define CRUN_SLURM_WARN 256 /* bytes of one warning, with its NUL */
#define CRUN_SLURM_MAX_WARN 8

struct crun_slurm {
	int in_slurm; /* SLURM_JOB_ID, and SLURM_STEP_ID or SLURM_PROCID */
	int in_step;  /* inside an srun step (SLURM_STEP_ID) */

	char job_id[24]; /* SLURM_JOB_ID: also the rendezvous id */
	int nnodes;	 /* nodes of the step (or job) */
	int node_rank;	 /* SLURM_NODEID, 0 outside a step */
	int local_task;	 /* SLURM_LOCALID: crun task index on this node */
	int tasks_here;	 /* crun tasks on this node in this step (0: unknown) */
	int ntasks;	 /* SLURM_STEP_NUM_TASKS in a step (0: unknown) */

	char host[HOSTLIST_MAX_NAME + 1]; /* first node of the step or job */
	int port; /* derived from the job id, see above */
	char endpoint[HOSTLIST_MAX_NAME + 8]; /* "host:port" */

	char nproc_spec[16]; /* "4" or "cpu" */
	int nproc;	     /* the number in nproc_spec, 0 for "cpu" */

	/* Why each value, for --print-config ("SLURM_GPUS_ON_NODE=4"). */
	char why_nnodes[CRUN_SLURM_WHY];
	char why_node_rank[CRUN_SLURM_WHY];
	char why_rdzv_id[CRUN_SLURM_WHY];
	char why_endpoint[CRUN_SLURM_WHY];
	char why_nproc[CRUN_SLURM_WHY];

	/* Pitfalls detected (spec C4), one line each, lower case. */
	int nwarn;
	char warn[CRUN_SLURM_MAX_WARN][CRUN_SLURM_WARN];
};

/**
 * Read the SLURM variables in envp (a NULL-terminated "NAME=VALUE" array,
 * not modified, not kept) into *out, which needs no release.
 *
 * Not inside SLURM (no job id, or neither a step id nor a task rank): returns
 * 0 with out->in_slurm == 0 and nothing else set. Inside: returns 0 with every
 * field and reason set, and out->warn[0..nwarn) for each pitfall found; or
 * CRUN_ECONFIG with a one-line errmsg naming the variable when one crun needs
 * is missing or malformed ("SLURM_JOB_NODELIST: column 3: ...").
 */
int slurm_detect(char **envp, struct crun_slurm *out, char *errmsg,
		 size_t errlen);

/**
 * The count for node index (0-based) in a Slurm per-node list such as
 * SLURM_TASKS_PER_NODE or SLURM_JOB_CPUS_PER_NODE: "2(x3),1" means 2, 2, 2, 1.
 * Returns 0 and sets *count; CRUN_ECONFIG when s is malformed (numbers must
 * be non-negative, repeats positive); CRUN_ENOTFOUND when the list is shorter
 * than index + 1.
 */
int slurm_per_node(const char *s, int index, int *count);

/** The endpoint port for job id (see CRUN_SLURM_PORT_BASE). */
int slurm_port(unsigned long job_id);

#endif

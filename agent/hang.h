/*
 * A hung job, explained (--stall_timeout), a part of the agent: once the
 * detector (stall.h) found no rank progressing and the agent marked the
 * group stopping, hang.c names where each rank is, says it in one line
 * (alone, or on the store host for the whole job), and reports back.
 * Private to agent/.
 */
#ifndef CRUN_AGENT_HANG_H
#define CRUN_AGENT_HANG_H

#include <stddef.h>
#include <sys/types.h>
#include <uv.h>

#include "crun/rdzv.h"

struct events;
struct hang;

/** The report is said: the workers of generation gen may be signalled. */
typedef void (*hang_done_cb)(int gen, void *data);

/** What a report needs of the agent; copied by hang_start. */
struct hang_opts {
	uv_loop_t *loop;
	const char *host;   /* this node, named in its record */
	const char *script; /* the training script's path (NULL: -m, any) */
	int python;	    /* the workers are Python (py-spy, faulthandler) */
	struct events *ev;  /* crun.job.hang_summary, or NULL */
	hang_done_cb on_done;
	void *data;
};

/** The round that hung; copied by hang_start. */
struct hang_round {
	const pid_t *pids; /* each local rank's pid, 0 once it exited */
	int nproc;
	int base_rank;
	int gen; /* the generation, passed back to on_done */
	/* Several nodes: the rendezvous' records; ops NULL alone. */
	const struct rdzv_kv_ops *ops;
	void *kv;
	const char *run_id;
	int round; /* the rendezvous round: names the records' keys */
	int group_rank, group_world_size, world_size;
};

/**
 * Take every running rank's stack (a stopped rank is named as stopped),
 * reduce each to where it is in the script, and say the summary: alone at
 * once; on several nodes each node writes its record and the store host
 * (group rank 0) waits for every node's, bounded, and says the line for
 * the job. *out is set first; on_done runs once (maybe before hang_start
 * returns, when no rank is left to dump). A negative libuv error: nothing
 * started, on_done never runs.
 */
int hang_start(const struct hang_opts *o, const struct hang_round *r,
	       struct hang **out);

/** Local rank local_rank exited while its stack was taken: its stderr. */
void hang_exited(struct hang *h, int local_rank, const char *tail,
		 size_t len);

/** The agent finishes: the report is dropped, on_done never runs. */
void hang_close(struct hang *h);

#endif

/*
 * The agent's side of --env_check (see include/crun/fingerprint.h): start
 * computing this node's fingerprint as the agent starts, hand it to the
 * rendezvous when both exist, and say what the closer of a round found.
 * Private to agent/.
 */
#ifndef CRUN_AGENT_ENVCHECK_H
#define CRUN_AGENT_ENVCHECK_H

#include <uv.h>

#include "crun/cfg.h"
#include "crun/fingerprint.h"
#include "crun/rdzv.h"
#include "events.h"

struct envcheck {
	struct crun_rdzv *rdzv; /* the rendezvous, once it exists */
	struct crun_fingerprint fp;
	int state; /* 0 not computed, 1 computing, 2 ready */
	struct crun_fp_read *read; /* while computing */
	const char *python;	   /* the workers' interpreter, or NULL */
	double abandon_after;	   /* seconds: the read's deadline */
};

/** Start computing the fingerprint (nothing when env_check is off). */
void envcheck_start(struct envcheck *ec, uv_loop_t *loop,
		    const struct crun_cfg *cfg);

/** The wait to put in rdzv_opts.fingerprint_wait (0: none). */
double envcheck_wait(const struct envcheck *ec, const struct crun_cfg *cfg);

/** The rendezvous exists (r) or is gone (NULL: a pending read is dropped). */
void envcheck_attach(struct envcheck *ec, struct crun_rdzv *r);

/**
 * A round formed (res) or failed (res NULL): print one line per difference
 * and log an "crun.env_check" event, when there is something to say.
 */
void envcheck_report(struct events *ev, struct crun_rdzv *r,
		     const struct rdzv_result *res, int mode);

#endif

/*
 * `crun status --stacks` on this node (rdzv_stacks.h): the rendezvous saw a
 * request with a heartbeat; take the live stacks of this node's running
 * workers (stacks.h, py-spy only: nothing is signalled or stopped), label
 * each with where the training script is (pystack.h), and write one bounded
 * answer for the reader.
 *
 * Failure modes: a request while one is being taken replaces it (the older
 * reader gets no answer from this node and says so); no py-spy (each rank's
 * text says so in one line); the round ends first (the answer is dropped:
 * rdzv_stacks_put refuses a round that is not running).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "nodes.h"
#include "crun/err.h"
#include "crun/pystack.h"
#include "crun/rdzv_stacks.h"
#include "stacks.h"

/* py-spy gets this long for all of a node's ranks together (s). */
#define AGENT_STACKS_TIMEOUT 10.0

struct agent_stacks {
	struct agent *a;
	struct stacks *s;
	char nonce[RDZV_STACKS_MAX_NONCE + 1];
	int n;
	int *ranks;	  /* global rank of each process dumped */
	char script[256]; /* what pystack_where looks for, "" for none */
};

static void agent_stacks_free(struct agent_stacks *as)
{
	if (as == NULL)
		return;
	if (as->s != NULL)
		stacks_free(as->s);
	free(as->ranks);
	free(as);
}

/* The training script's name as its frames show it, or "". */
static void agent_stacks_script(const struct crun_cfg *cfg, char *out,
				size_t len)
{
	const char *s = cfg->argc > 0 ? cfg->argv[0] : NULL, *dot;

	out[0] = '\0';
	if (s == NULL || cfg->no_python)
		return;
	if (!cfg->module) {
		snprintf(out, len, "%s", s);
		return;
	}
	/* -m pkg.train runs pkg/train.py. */
	dot = strrchr(s, '.');
	snprintf(out, len, "%s.py", dot ? dot + 1 : s);
}

static void agent_stacks_on_done(struct stacks *s, void *data)
{
	struct agent_stacks *as = data;
	struct agent *a = as->a;
	struct rdzv_stacks_answer ans;
	size_t cap = RDZV_STACKS_MAX_DUMP;
	int rc = 0, ntaken = 0;

	if (as->n > 0 && (RDZV_STACKS_MAX_ANSWER / 2) / (size_t)as->n < cap)
		cap = (RDZV_STACKS_MAX_ANSWER / 2) / (size_t)as->n;
	if (rdzv_stacks_answer_init(&ans) != 0)
		goto out;
	for (int i = 0; i < as->n && rc == 0; i++) {
		size_t len = 0;
		const char *text = stacks_text(s, (size_t)i, &len);
		int taken = stacks_taken(s, (size_t)i);
		char where[256] = "?";

		if (taken && pystack_where(text, len, as->script, where,
					   sizeof(where)) != 0)
			snprintf(where, sizeof(where), "?");
		rc = rdzv_stacks_answer_add(&ans, as->ranks[i], taken, where,
					    text, len, cap);
		ntaken += taken && rc == 0;
	}
	if (rc == CRUN_ETOOBIG) {
		/* The ranks that fit are worth more than no answer. */
		log_warn("the stacks of ranks past rank %d did not fit in "
			 "one answer",
			 as->ranks[ans.nranks > 0 ? ans.nranks - 1 : 0]);
		rc = 0;
	}
	if (rc == 0 && nodes_rdzv(a->nodes) != NULL &&
	    rdzv_stacks_put(nodes_rdzv(a->nodes), as->nonce, ans.buf,
			    ans.len) == 0)
		log_msg(LOG_INFO, "crun",
			"crun status --stacks: the live stacks of %d of %d "
			"rank(s) sent",
			ntaken, as->n);
	rdzv_stacks_answer_release(&ans);
out:
	/* Freed from within its callback, which stacks.h allows. */
	if (a->stacks == as)
		a->stacks = NULL;
	agent_stacks_free(as);
}

void agent__on_stacks(void *data, const char *nonce)
{
	struct agent *a = data;
	struct agent_stacks *as;
	struct stacks_proc *procs = NULL;
	int python = a->cfg->python != NULL && !a->cfg->no_python, n = 0;

	if (a->state != A_RUNNING || a->pool.w == NULL || a->pool.n <= 0)
		return;
	agent__stacks_close(a);
	as = calloc(1, sizeof(*as));
	procs = calloc((size_t)a->pool.n, sizeof(*procs));
	if (as == NULL || procs == NULL ||
	    (as->ranks = calloc((size_t)a->pool.n, sizeof(int))) == NULL)
		goto fail;
	as->a = a;
	snprintf(as->nonce, sizeof(as->nonce), "%s", nonce);
	agent_stacks_script(a->cfg, as->script, sizeof(as->script));
	for (int i = 0; i < a->pool.n; i++) {
		if (a->pool.pids[i] <= 0)
			continue; /* exited: nothing to dump */
		procs[n].pid = a->pool.pids[i];
		procs[n].python = python;
		as->ranks[n++] = a->res.ranks.base_rank + i;
	}
	as->n = n;
	if (n == 0 || stacks_start(&a->loop, procs, (size_t)n, STACKS_LIVE,
				   AGENT_STACKS_TIMEOUT, agent_stacks_on_done,
				   as, &as->s) != 0)
		goto fail;
	a->stacks = as;
	free(procs);
	return;
fail:
	log_warn("cannot take the stacks crun status asked for");
	free(procs);
	agent_stacks_free(as);
}

void agent__stacks_close(struct agent *a)
{
	agent_stacks_free(a->stacks);
	a->stacks = NULL;
}

/*
 * `crun status --stacks` on this node (livestacks.h, rdzv_stacks.h): the
 * rendezvous saw a
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

#include "crun/err.h"
#include "crun/log.h"
#include "crun/pystack.h"
#include "crun/rdzv_stacks.h"
#include "livestacks.h"
#include "crun/stacks.h"

/* py-spy gets this long for all of a node's ranks together (s). */
#define AGENT_STACKS_TIMEOUT 10.0

struct livestacks {
	struct crun_rdzv *rdzv;
	livestacks_done_cb cb;
	void *data;
	struct stacks *s;
	char nonce[RDZV_STACKS_MAX_NONCE + 1];
	int n;
	int *ranks;	  /* global rank of each process dumped */
	char script[256]; /* what pystack_where looks for, "" for none */
};

void livestacks_free(struct livestacks *as)
{
	if (as == NULL)
		return;
	if (as->s != NULL)
		stacks_free(as->s);
	free(as->ranks);
	free(as);
}

/* The training script's name as its frames show it, or "". */
static void script_of(const struct crun_cfg *cfg, char *out, size_t len)
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

static void on_stacks(struct stacks *s, void *data)
{
	struct livestacks *as = data;
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
	if (rc == 0 &&
	    rdzv_stacks_put(as->rdzv, as->nonce, ans.buf, ans.len) == 0)
		log_msg(LOG_INFO, "crun",
			"crun status --stacks: the live stacks of %d of %d "
			"rank(s) sent",
			ntaken, as->n);
	rdzv_stacks_answer_release(&ans);
out:
	as->cb(as, as->data);
	/* Freed from within its callback, which stacks.h allows. */
	livestacks_free(as);
}

int livestacks_start(uv_loop_t *loop, const struct crun_cfg *cfg,
		     const pid_t *pids, int n, int base_rank,
		     struct crun_rdzv *rdzv, const char *nonce,
		     livestacks_done_cb cb, void *data, struct livestacks **out)
{
	struct livestacks *as = calloc(1, sizeof(*as));
	struct stacks_proc *procs = calloc((size_t)n + 1, sizeof(*procs));
	int python = cfg->python != NULL && !cfg->no_python, k = 0;

	*out = NULL;
	if (as == NULL || procs == NULL ||
	    (as->ranks = calloc((size_t)n + 1, sizeof(int))) == NULL)
		goto fail;
	as->rdzv = rdzv;
	as->cb = cb;
	as->data = data;
	snprintf(as->nonce, sizeof(as->nonce), "%s", nonce);
	script_of(cfg, as->script, sizeof(as->script));
	for (int i = 0; i < n; i++) {
		if (pids[i] <= 0)
			continue; /* exited: nothing to dump */
		procs[k].pid = pids[i];
		procs[k].python = python;
		as->ranks[k++] = base_rank + i;
	}
	as->n = k;
	if (k == 0 ||
	    stacks_start(loop, procs, (size_t)k, STACKS_LIVE,
			 AGENT_STACKS_TIMEOUT, on_stacks, as, &as->s) != 0)
		goto fail;
	free(procs);
	*out = as;
	return 0;
fail:
	free(procs);
	livestacks_free(as);
	return UV_ENOMEM;
}

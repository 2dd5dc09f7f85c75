/*
 * Stacks on demand, the agent's side (see rdzv_stacks.h).
 *
 * Happy path: each heartbeat tick also peeks "stacks_req" (pipelined behind
 * the heartbeat's own requests); a value naming this round with a nonce not
 * seen before calls rdzv_opts.on_stacks once, and the agent later writes its
 * answer with rdzv_stacks_put. Failure modes: the peek fails (ignored: the
 * heartbeat's own requests report a lost store), the value is garbage or
 * names another round (ignored), the round ends before the answer
 * (rdzv_stacks_put refuses; the reader names the node as not answering).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crun/err.h"
#include "crun/rdzv_stacks.h"
#include "rdzv_kit.h"

static void on_stacks_req(int status, const struct crun_store_reply *rep,
			  void *arg)
{
	struct crun_rdzv *r = rdzv__op_take(arg, NULL, NULL);
	char nonce[RDZV_STACKS_MAX_NONCE + 1];
	int round;

	if (r == NULL || status || rep == NULL || rep->nvalues != 1 ||
	    r->o.on_stacks == NULL ||
	    (r->state != R_RUNNING && r->state != R_FINISHING))
		return;
	if (rdzv_stacks_req_parse(rep->values[0].base, rep->values[0].len,
				  nonce, sizeof(nonce), &round) ||
	    round != r->round || strcmp(nonce, r->stacks_seen) == 0)
		return;
	snprintf(r->stacks_seen, sizeof(r->stacks_seen), "%s", nonce);
	r->o.on_stacks(r->o.data, nonce);
}

void rdzv__stacks_poll(struct crun_rdzv *r)
{
	char k[KEYMAX];
	const char *kp[1] = {k};
	struct rdzv__op *o;

	if (r->o.on_stacks == NULL)
		return;
	rdzv__key(r, k, "stacks_req");
	o = rdzv__op_new(r, 0);
	if (r->ops->peek(r->kv, kp, 1, on_stacks_req, o))
		free(o);
}

int rdzv_stacks_put(struct crun_rdzv *r, const char *nonce, const char *v,
		    size_t n)
{
	char k[KEYMAX], check[RDZV_STACKS_MAX_NONCE + 1];
	char req[RDZV_STACKS_MAX_NONCE + 8];
	int round;

	/* A nonce as the request parser takes it, nothing else in a key. */
	snprintf(req, sizeof(req), "%.*s 0", RDZV_STACKS_MAX_NONCE + 1, nonce);
	if (rdzv_stacks_req_parse(req, strlen(req), check, sizeof(check),
				  &round) != 0 ||
	    r->grank < 0 || (r->state != R_RUNNING && r->state != R_FINISHING))
		return CRUN_ECLOSED;
	rdzv__key(r, k, "stacks/%s/%d", nonce, r->grank);
	return r->ops->set(r->kv, k, v, n, NULL, NULL);
}

/*
 * A hung job, explained (--stall_timeout): the detector (stall.c) finds no
 * rank progressing; this part names where each rank is (hang.h).
 *
 * Happy path: alone, the detector's callback goes straight to the agent's
 * stop for a stall; on several nodes the node whose ADD found every node
 * quiet ends the round with an "H" end, and every node (that one too)
 * reaches it from its end callback. There the agent marks the group
 * stopping (nothing signalled yet: its workers are "stopped", not failed,
 * whatever the dump does to them) and calls hang_start: every rank's stack
 * is taken
 * (stacks.h, before a kill: py-spy, else faulthandler), and reduced to
 * where it is in the training script (pystack_where). Alone, the summary
 * line is said at once; on several nodes each node writes its ranks'
 * places to "r<R>/stall/<g>", and the store host (group rank 0) waits for
 * every node's record, bounded, and says the one line for the whole job.
 * Then on_done: the agent sends the workers SIGTERM (SIGKILL after
 * --shutdown_timeout, timed from the hang), and the round's outcome is a
 * failure restart.
 *
 * Failure modes: a dump that does not finish is abandoned after
 * STALL_STACKS_S (its rank is "?"); a stopped rank (SIGSTOP) is not asked
 * for one (it could not answer) and is named as stopped; a node whose record
 * does not come within STALL_COLLECT_MS is summed up from what came (its ranks
 * missing from the line, which says how many nodes did not answer); a record
 * that does not parse (the store is reachable by others) counts as missing.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crun/rdzv_records.h"
#include "crun/err.h"
#include "crun/log.h"
#include "crun/pystack.h"
#include "events.h"
#include "hang.h"
#include "crun/stacks.h"

/* A stack dump that takes longer is abandoned (its rank is "?"). */
#define STALL_STACKS_S 5.0
/* The store host waits this long for every node's record. */
#define STALL_COLLECT_MS 8000
/* The summary line's bound. */
#define STALL_SUMMARY_MAX 1024

struct hang {
	struct hang_opts o;
	struct hang_round r;
	char *host, *script, *run_id; /* o's and r's strings, owned */
	int peeked; /* the store host stopped waiting and read what came */
	int closed; /* hang_close ran while the records were read */
	struct stacks *stacks; /* being taken, or NULL */
	int *local;	       /* the local rank of each entry */
	int n;
	int nstack; /* entries [0, nstack) have stacks taken; the rest are
		       stopped ranks, named as such */
	struct rdzv_stall_rank ranks[]; /* this node's running ranks */
};

static void stall_key(const struct hang *h, char *k, size_t len, int g)
{
	snprintf(k, len, "crun/%s/r%d/stall/%d", h->run_id, h->r.round, g);
}

/* The summary of n ranks (host per rank), said in one line. */
static void say_summary(struct hang *h, const struct rdzv_stall_rank *r,
			const char *const *hosts, int n, int missing)
{
	struct pystack_rank *p = calloc((size_t)n + 1, sizeof(*p));
	char line[STALL_SUMMARY_MAX] = "";

	if (p == NULL)
		return;
	for (int i = 0; i < n; i++) {
		p[i].rank = r[i].rank;
		p[i].where = r[i].where;
		p[i].host = hosts ? hosts[i] : NULL;
	}
	pystack_summary(p, (size_t)n, line, sizeof(line));
	if (missing)
		log_say("hang: %s (%d node%s did not say where %s ranks were)",
			line, missing, missing == 1 ? "" : "s",
			missing == 1 ? "its" : "their");
	else
		log_say("hang: %s", line);
	events_emitf(h->o.ev, "crun.job.hang_summary", "{s:s, s:i}", "summary",
		     line, "nodes_missing", missing);
	free(p);
}

static void hang_free(struct hang *h)
{
	free(h->host);
	free(h->script);
	free(h->run_id);
	free(h->local);
	free(h);
}

/* Every stack is in and reported: now the workers may be signalled. */
static void hang_done(struct hang *h)
{
	if (!h->closed)
		h->o.on_done(h->r.gen, h->o.data);
	hang_free(h);
}

static int read_records(struct hang *h);

/* The store host read every node's record (or the bound passed). */
static void on_records(int status, const struct crun_store_reply *rep,
		       void *arg)
{
	struct hang *h = arg;
	int nodes = h->r.group_world_size, total = 0, missing = 0;
	int max = h->r.world_size;
	struct rdzv_stall_rank *all = calloc((size_t)max + 1, sizeof(*all));
	char(*hosts)[RDZV_MAX_FIELD + 1] =
	    calloc((size_t)nodes + 1, sizeof(*hosts));
	const char **hp = calloc((size_t)max + 1, sizeof(*hp));

	if (status && status != CRUN_ECANCELED && !h->peeked && !h->closed) {
		/* Some node did not answer in time: read what came. */
		h->peeked = 1;
		if (read_records(h) == 0)
			goto keep;
	}
	if (all == NULL || hosts == NULL || hp == NULL || h->closed)
		goto out;
	for (int g = 0; g < nodes; g++) {
		const struct crun_store_iov *v =
		    status == 0 && rep->nvalues == (size_t)nodes
			? &rep->values[g]
			: NULL;
		char why[200];
		int n = 0;

		if (v == NULL || v->len == 0 ||
		    rdzv_parse_stall(v->base, v->len, hosts[g],
				     sizeof(hosts[g]), all + total, max - total,
				     &n, why, sizeof(why))) {
			missing++;
			continue;
		}
		for (int i = 0; i < n; i++)
			hp[total + i] = hosts[g];
		total += n;
	}
	say_summary(h, all, hp, total, missing);
out:
	hang_done(h);
keep:
	free(all);
	free(hosts);
	free(hp);
}

/* Every node's record: waited for (bounded), or once peeked as it is. */
static int read_records(struct hang *h)
{
	int nodes = h->r.group_world_size, rc = 0;
	char(*keys)[600] = calloc((size_t)nodes, sizeof(*keys));
	const char **kp = calloc((size_t)nodes, sizeof(*kp));

	if (keys == NULL || kp == NULL)
		rc = UV_ENOMEM;
	for (int g = 0; rc == 0 && g < nodes; g++) {
		stall_key(h, keys[g], sizeof(keys[g]), g);
		kp[g] = keys[g];
	}
	if (rc == 0 && h->peeked)
		rc = h->r.ops->peek(h->r.kv, kp, (size_t)nodes, on_records, h);
	else if (rc == 0)
		rc = h->r.ops->multi_get(h->r.kv, kp, (size_t)nodes,
					 STALL_COLLECT_MS, on_records, h);
	free(keys);
	free(kp);
	return rc;
}

/*
 * Several nodes: write this node's record; the store host reads every
 * node's, waiting for the missing ones (peek after the bound).
 */
static int publish(struct hang *h)
{
	int rc;
	char k[600], *buf = malloc(RDZV_MAX_LIST_RECORD + 1);
	size_t len;

	if (buf == NULL)
		return -1;
	len = rdzv_format_stall(buf, RDZV_MAX_LIST_RECORD + 1, h->host,
				h->ranks, h->n);
	stall_key(h, k, sizeof(k), h->r.group_rank);
	rc = h->r.ops->set(h->r.kv, k, buf, len, NULL, NULL);
	free(buf);
	if (rc || h->r.group_rank != 0)
		return -1;
	return read_records(h);
}

static void on_stacks(struct stacks *s, void *data)
{
	struct hang *h = data;

	for (int i = 0; i < h->nstack && s; i++) {
		size_t len = 0;
		const char *text = stacks_text(s, (size_t)i, &len);

		if (!stacks_taken(s, (size_t)i) ||
		    pystack_where(text, len, h->script, h->ranks[i].where,
				  sizeof(h->ranks[i].where)))
			snprintf(h->ranks[i].where, sizeof(h->ranks[i].where),
				 "?");
	}
	if (s)
		stacks_free(s);
	h->stacks = NULL;
	if (h->r.ops == NULL) {
		say_summary(h, h->ranks, NULL, h->n, 0);
		return hang_done(h);
	}
	if (publish(h))
		hang_done(h); /* not the store host: its summary says ours */
}

static char *dup_or_null(const char *s, int *err)
{
	char *d = s ? strdup(s) : NULL;

	if (s && d == NULL)
		*err = 1;
	return d;
}

int hang_start(const struct hang_opts *o, const struct hang_round *r,
	       struct hang **out)
{
	struct stacks_proc *p = NULL;
	struct hang *h = NULL;
	int n = r->nproc, err = 0;

	*out = NULL;
	h = calloc(1, sizeof(*h) + (size_t)n * sizeof(h->ranks[0]));
	p = calloc((size_t)n + 1, sizeof(*p));
	if (h == NULL || p == NULL ||
	    (h->local = calloc((size_t)n + 1, sizeof(int))) == NULL)
		goto fail;
	h->o = *o;
	h->r = *r;
	h->host = dup_or_null(o->host, &err);
	h->script = dup_or_null(o->script, &err);
	h->run_id = dup_or_null(r->run_id, &err);
	h->r.pids = NULL; /* read below only */
	if (err)
		goto fail;
	/*
	 * Only the ranks still running: pid 0 would be our own group. A
	 * stopped rank (SIGSTOP, or a debugger's stop) can give no stack
	 * before it is continued: it is named as stopped, after the others,
	 * and their stacks do not wait for it.
	 */
	for (int pass = 0; pass < 2; pass++) {
		for (int i = 0; i < n; i++) {
			struct stacks_pstate st;
			int stopped;

			if (r->pids[i] <= 0)
				continue;
			stopped = stacks_proc_state(r->pids[i], &st) == 0 &&
				  (st.state == 'T' || st.state == 't');
			if (stopped != pass)
				continue;
			if (stopped)
				snprintf(h->ranks[h->n].where,
					 sizeof(h->ranks[h->n].where),
					 "the stopped state (%c: no stack "
					 "taken)",
					 st.state);
			p[h->n].pid = r->pids[i];
			p[h->n].python = o->python;
			h->ranks[h->n].rank = r->base_rank + i;
			h->local[h->n] = i;
			h->n++;
		}
		if (pass == 0)
			h->nstack = h->n;
	}
	*out = h;
	if (h->nstack == 0) {
		/* Nothing left to dump: say so with the others. */
		free(p);
		on_stacks(NULL, h);
		return 0;
	}
	if (stacks_start(o->loop, p, (size_t)h->nstack, STACKS_BEFORE_KILL,
			 STALL_STACKS_S, on_stacks, h, &h->stacks))
		goto fail;
	free(p);
	return 0;
fail:
	*out = NULL;
	free(p);
	if (h)
		hang_free(h);
	return UV_ENOMEM;
}

void hang_exited(struct hang *h, int local_rank, const char *tail, size_t len)
{
	for (int i = 0; h && h->stacks && i < h->nstack; i++)
		if (h->local[i] == local_rank)
			stacks_exited(h->stacks, (size_t)i, tail, len);
}

void hang_close(struct hang *h)
{
	if (h == NULL)
		return;
	if (h->stacks) {
		/* stacks_free drops its callback: the report goes with it. */
		stacks_free(h->stacks);
		hang_free(h);
		return;
	}
	h->closed = 1; /* the records' reply frees it */
}

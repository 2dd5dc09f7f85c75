/*
 * A hung job, explained (--stall_timeout): the detector (stall.c) finds no
 * rank progressing; this file names where each rank is and ends the round.
 *
 * Happy path: alone, the detector's callback goes straight to
 * agent__stall_stop; on several nodes the node whose ADD found every node
 * quiet ends the round with an "H" end, and every node (that one too)
 * reaches agent__stall_stop from its end callback. There the group is
 * marked stopping (nothing signalled yet: its workers are "stopped", not
 * failed, whatever the dump does to them), every rank's stack is taken
 * (stacks.h, before a kill: py-spy, else faulthandler), and reduced to
 * where it is in the training script (pystack_where). Alone, the summary
 * line is said at once; on several nodes each node writes its ranks'
 * places to "r<R>/stall/<g>", and the store host (group rank 0) waits for
 * every node's record, bounded, and says the one line for the whole job.
 * Then the workers get SIGTERM (SIGKILL after --shutdown_timeout, timed
 * from the hang) and the round's outcome is a failure restart.
 *
 * Failure modes: a dump that does not finish is abandoned after
 * STALL_STACKS_S (its rank is "?"); a stopped rank (SIGSTOP) is not asked
 * for one (it could not answer) and is named as stopped; a node whose record
 * does not come within STALL_COLLECT_MS is summed up from what came (its ranks
 * missing from the line, which says how many nodes did not answer); a record
 * that does not parse (the store is reachable by others) counts as missing.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crun/err.h"
#include "crun/pystack.h"
#include "crun/rdzv_store.h"
#include "crun/rdzv_etcd.h"
#include "agent.h"
#include "events.h"
#include "metrics.h"
#include "stacks.h"
#include "stall.h"

/* A stack dump that takes longer is abandoned (its rank is "?"). */
#define STALL_STACKS_S 5.0
/* The store host waits this long for every node's record. */
#define STALL_COLLECT_MS 8000
/* The summary line's bound. */
#define STALL_SUMMARY_MAX 1024

/* The hang being reported: what the stacks' callback needs. */
struct hang {
	struct agent *a;
	int round;  /* the rendezvous round (names the keys) */
	int gen;    /* the generation: the workers to signal after */
	int peeked; /* the store host stopped waiting and read what came */
	struct stacks *stacks; /* being taken, or NULL */
	int *local;	       /* the local rank of each entry */
	int n;
	int nstack; /* entries [0, nstack) have stacks taken; the rest are
		       stopped ranks, named as such */
	struct rdzv_stall_rank ranks[]; /* this node's running ranks */
};

static const struct rdzv_kv_ops *kv_ops(const struct agent *a, void **kv)
{
	*kv = a->rs ? (void *)a->rs : (void *)a->re;
	return a->rs ? &rdzv_store_ops : a->re ? &rdzv_etcd_ops : NULL;
}

static void stall_key(const struct agent *a, int round, char *k, size_t len,
		      const char *what, int g)
{
	snprintf(k, len, "crun/%s/r%d/%s/%d", a->res.run_id, round, what, g);
}

static void on_hung(struct stall *s, const char *why, void *data)
{
	struct agent *a = data;

	(void)s;
	if (a->state != A_RUNNING)
		return;
	if (a->multi) {
		char text[200];

		/* The end's reason names it for `crun status` and the logs. */
		snprintf(text, sizeof(text), "stall: %s", why);
		rdzv_end_round(a->rdzv, RDZV_END_STALL, text);
	} else
		agent__stall_stop(a, why);
}

int agent__stall_new(struct agent *a)
{
	return stall_new(&a->loop, a->cfg->stall_timeout, "/proc", on_hung, a,
			 &a->stall);
}

void agent__stall_start(struct agent *a)
{
	struct stall_round r;
	char prefix[300];

	memset(&r, 0, sizeof(r));
	r.pids = a->pool.pids;
	r.nproc = a->pool.n;
	if (a->multi && a->rdzv) {
		r.ops = kv_ops(a, &r.kv);
		snprintf(prefix, sizeof(prefix), "crun/%s/r%d/", a->res.run_id,
			 rdzv_round(a->rdzv));
		r.prefix = prefix;
		r.group_rank = a->res.ranks.group_rank;
		r.group_world_size = a->res.ranks.group_world_size;
		r.report_every = a->cfg->rdzv.keep_alive_interval;
	}
	stall_start(a->stall, &r);
}

/* The summary of n ranks (host per rank), said in one line. */
static void say_summary(struct agent *a, const struct rdzv_stall_rank *r,
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
	events_emitf(a->ev, "crun.job.hang_summary", "{s:s, s:i}", "summary",
		     line, "nodes_missing", missing);
	free(p);
}

/* Every stack is in and reported: now the workers may be signalled. */
static void hang_done(struct hang *h)
{
	struct agent *a = h->a;

	if (a->state == A_STOPPING && a->pool.n > 0 && a->res.round == h->gen)
		pool_signal(&a->pool, SIGTERM);
	if (a->hang == h)
		a->hang = NULL;
	free(h->local);
	free(h);
}

static int read_records(struct hang *h);

/* The store host read every node's record (or the bound passed). */
static void on_records(int status, const struct crun_store_reply *rep,
		       void *arg)
{
	struct hang *h = arg;
	int nodes = h->a->res.ranks.group_world_size, total = 0, missing = 0;
	int max = h->a->res.ranks.world_size;
	struct rdzv_stall_rank *all = calloc((size_t)max + 1, sizeof(*all));
	char(*hosts)[RDZV_MAX_FIELD + 1] =
	    calloc((size_t)nodes + 1, sizeof(*hosts));
	const char **hp = calloc((size_t)max + 1, sizeof(*hp));

	if (status && status != CRUN_ECANCELED && !h->peeked &&
	    h->a->state != A_DONE) {
		/* Some node did not answer in time: read what came. */
		h->peeked = 1;
		if (read_records(h) == 0)
			goto keep;
	}
	if (all == NULL || hosts == NULL || hp == NULL || h->a->state == A_DONE)
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
	say_summary(h->a, all, hp, total, missing);
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
	struct agent *a = h->a;
	void *kv;
	const struct rdzv_kv_ops *ops = kv_ops(a, &kv);
	int nodes = a->res.ranks.group_world_size, rc = 0;
	char(*keys)[600] = calloc((size_t)nodes, sizeof(*keys));
	const char **kp = calloc((size_t)nodes, sizeof(*kp));

	if (ops == NULL || keys == NULL || kp == NULL)
		rc = UV_ENOMEM;
	for (int g = 0; rc == 0 && g < nodes; g++) {
		stall_key(a, h->round, keys[g], sizeof(keys[g]), "stall", g);
		kp[g] = keys[g];
	}
	if (rc == 0 && h->peeked)
		rc = ops->peek(kv, kp, (size_t)nodes, on_records, h);
	else if (rc == 0)
		rc = ops->multi_get(kv, kp, (size_t)nodes, STALL_COLLECT_MS,
				    on_records, h);
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
	struct agent *a = h->a;
	void *kv;
	const struct rdzv_kv_ops *ops = kv_ops(a, &kv);
	int rc;
	char k[600], *buf = malloc(RDZV_MAX_LIST_RECORD + 1);
	size_t len;

	if (ops == NULL || buf == NULL) {
		free(buf);
		return -1;
	}
	len = rdzv_format_stall(buf, RDZV_MAX_LIST_RECORD + 1, a->host,
				h->ranks, h->n);
	stall_key(a, h->round, k, sizeof(k), "stall", a->res.ranks.group_rank);
	rc = ops->set(kv, k, buf, len, NULL, NULL);
	free(buf);
	if (rc || a->res.ranks.group_rank != 0)
		return -1;
	return read_records(h);
}

static void on_stacks(struct stacks *s, void *data)
{
	struct hang *h = data;
	struct agent *a = h->a;
	const char *script = a->cfg->argc > 0 ? a->cfg->argv[0] : NULL;

	for (int i = 0; i < h->nstack && s; i++) {
		size_t len = 0;
		const char *text = stacks_text(s, (size_t)i, &len);

		if (!stacks_taken(s, (size_t)i) ||
		    pystack_where(text, len, a->cfg->module ? NULL : script,
				  h->ranks[i].where, sizeof(h->ranks[i].where)))
			snprintf(h->ranks[i].where, sizeof(h->ranks[i].where),
				 "?");
	}
	if (s)
		stacks_free(s);
	h->stacks = NULL;
	if (a->state == A_DONE) {
		hang_done(h);
		return;
	}
	if (!a->multi) {
		say_summary(a, h->ranks, NULL, h->n, 0);
		return hang_done(h);
	}
	if (publish(h))
		hang_done(h); /* not the store host: its summary says ours */
}

void agent__stall_stop(struct agent *a, const char *why)
{
	struct stacks_proc *p = NULL;
	struct hang *h = NULL;
	int n = a->pool.n, python = !a->cfg->no_python;

	if (a->state != A_RUNNING)
		return;
	if (strncmp(why, "stall: ", 7) == 0)
		why += 7;
	log_say("job hung: %s; taking every rank's stack", why);
	events_emitf(a->ev, "crun.job.hung", "{s:s}", "reason", why);
	metrics_note_stall(a->metrics);
	/*
	 * Stopping, but nothing signalled yet: a worker the dump kills
	 * (faulthandler) counts as stopped, not failed.
	 */
	agent__stop_group(a, a->multi ? STOP_PEER : STOP_STALL, 0);
	h = calloc(1, sizeof(*h) + (size_t)n * sizeof(h->ranks[0]));
	p = calloc((size_t)n + 1, sizeof(*p));
	if (h == NULL || p == NULL ||
	    (h->local = calloc((size_t)n + 1, sizeof(int))) == NULL)
		goto fail;
	h->a = a;
	h->round = a->multi && a->rdzv ? rdzv_round(a->rdzv) : 0;
	h->gen = a->res.round;
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

			if (a->pool.pids[i] <= 0)
				continue;
			stopped =
			    stacks_proc_state(a->pool.pids[i], &st) == 0 &&
			    (st.state == 'T' || st.state == 't');
			if (stopped != pass)
				continue;
			if (stopped)
				snprintf(h->ranks[h->n].where,
					 sizeof(h->ranks[h->n].where),
					 "the stopped state (%c: no stack "
					 "taken)",
					 st.state);
			p[h->n].pid = a->pool.pids[i];
			p[h->n].python = python;
			h->ranks[h->n].rank = a->round.ranks.base_rank + i;
			h->local[h->n] = i;
			h->n++;
		}
		if (pass == 0)
			h->nstack = h->n;
	}
	if (h->nstack == 0) {
		/* Nothing left to dump: say so with the others. */
		on_stacks(NULL, h);
		goto out;
	}
	if (stacks_start(&a->loop, p, (size_t)h->nstack, STACKS_BEFORE_KILL,
			 STALL_STACKS_S, on_stacks, h, &h->stacks))
		goto fail;
	a->hang = h;
out:
	free(p);
	return;
fail:
	free(p);
	if (h)
		free(h->local);
	free(h);
	pool_signal(&a->pool, SIGTERM);
}

void agent__stall_exited(struct agent *a, int local_rank, const char *tail,
			 size_t len)
{
	struct hang *h = a->hang;

	for (int i = 0; h && h->stacks && i < h->nstack; i++)
		if (h->local[i] == local_rank)
			stacks_exited(h->stacks, (size_t)i, tail, len);
}

void agent__stall_close(struct agent *a)
{
	struct hang *h = a->hang;

	stall_close(a->stall);
	if (h && h->stacks) {
		/* stacks_free drops its callback: the report goes with it. */
		stacks_free(h->stacks);
		h->stacks = NULL;
		a->hang = NULL;
		free(h->local);
		free(h);
	}
}

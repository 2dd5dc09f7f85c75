/*
 * `crun status --stacks`: the live stacks of a running job's ranks, asked of
 * every agent through the rendezvous keys (rdzv_stacks.h) and printed
 * grouped: one line (pystack_summary) of where the ranks are, then each
 * distinct stack once with the ranks that share it.
 *
 * Happy path: write "stacks_req" = "<nonce> <round>"; every agent sees it
 * with its next heartbeat, takes its ranks' stacks with py-spy (nothing is
 * stopped) and writes "stacks/<nonce>/<group rank>"; this polls the answers
 * it lacks every POLL_MS until every node of the round that has not
 * finished answered, prints, and blanks the answers it read (they would
 * otherwise stay in the store for the job's life).
 *
 * Failure modes: the request cannot be written (exit 3); nodes that do not
 * answer within the wait are named (exit 3, what came is printed); an
 * answer that does not parse, or is larger than an answer can be, is one
 * line naming the node (exit 3); a node without py-spy answers with one
 * line saying so. Every byte of an answer is untrusted: what is printed is
 * printable ASCII (and newlines) only.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crun/err.h"
#include "crun/log.h"
#include "crun/pystack.h"
#include "crun/rdzv_stacks.h"
#include "status_stacks.h"

#define POLL_MS 250
#define KEYMAX 512
/* Answers asked for in one peek. */
#define POLL_CHUNK 64

struct ss_node {
	int grank;
	char host[256];
	int want; /* it runs workers: an answer is expected */
	int got;
	char *v; /* its answer (NULL: none yet) */
	size_t len;
	int too_big;
};

/* One rank of an answer, sanitized. */
struct ss_rank {
	int rank, taken;
	int grank; /* its node's */
	const char *host;
	char *where;
	char *dump;
	char *key; /* the stack without ids: what equal stacks share */
};

struct ss_group {
	size_t first, n; /* ranks[first .. first + n) after sorting */
	int rank;	 /* the lowest of them */
};

struct status_stacks {
	uv_loop_t *loop;
	const struct rdzv_kv_ops *ops;
	void *kv;
	int json;
	status_stacks_cb cb;
	void *data;
	char prefix[300];
	char run_id[256];
	int round;
	char nonce[RDZV_STACKS_MAX_NONCE + 1];
	struct ss_node *nodes;
	int nnodes;
	uv_timer_t timer;
	uint64_t started, wait_ms;
	int polling; /* a peek is out */
	int blanks;  /* answers being blanked */
	int reported, done, rc;
	char *req; /* the request's value, kept until it is written */
};

struct ss_poll {
	struct status_stacks *ss;
	int n;
	int idx[POLL_CHUNK];
	char keys[POLL_CHUNK][KEYMAX];
};

static void ss_finish(struct status_stacks *ss)
{
	if (ss->done || ss->blanks > 0)
		return;
	ss->done = 1;
	uv_timer_stop(&ss->timer);
	ss->cb(ss, ss->rc, ss->data);
}

/* A copy of s[0..n) with only printable ASCII, newlines and tabs. */
static char *clean(const char *s, size_t n)
{
	char *o = malloc(n + 1);

	if (o == NULL)
		abort();
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		o[i] = (c >= 0x20 && c < 0x7f) || c == '\n' || c == '\t'
			   ? (char)c
			   : '?';
	}
	o[n] = '\0';
	return o;
}

/*
 * The stack without what differs between processes in the same place:
 * py-spy's "Process"/"Python" lines, thread ids and states, blank lines.
 */
static char *stack_key(const char *d)
{
	size_t n = strlen(d), k = 0;
	char *o = malloc(n + 1);

	if (o == NULL)
		abort();
	while (*d) {
		size_t len = strcspn(d, "\n");
		const char *name;

		if (len == 0 || strncmp(d, "Process ", 8) == 0 ||
		    strncmp(d, "Python v", 8) == 0) {
			/* skipped */
		} else if (strncmp(d, "Thread ", 7) == 0 ||
			   strncmp(d, "Current thread ", 15) == 0) {
			name = memchr(d, '"', len);
			memcpy(o + k, "Thread ", 7);
			k += 7;
			if (name != NULL) {
				memcpy(o + k, name, len - (size_t)(name - d));
				k += len - (size_t)(name - d);
			}
			o[k++] = '\n';
		} else {
			memcpy(o + k, d, len);
			k += len;
			o[k++] = '\n';
		}
		d += len + (d[len] == '\n');
	}
	o[k] = '\0';
	return o;
}

static int cmp_rank_key(const void *a, const void *b)
{
	const struct ss_rank *x = a, *y = b;
	int c = strcmp(x->where, y->where);

	if (c == 0)
		c = strcmp(x->key, y->key);
	if (c == 0)
		c = (x->rank > y->rank) - (x->rank < y->rank);
	return c;
}

static int cmp_group(const void *a, const void *b)
{
	const struct ss_group *x = a, *y = b;

	if (x->n != y->n)
		return x->n > y->n ? -1 : 1;
	return (x->rank > y->rank) - (x->rank < y->rank);
}

/* "0-2,4" of n sorted ranks r[i].rank, into buf (cut with "..."). */
static void ranks_text(const struct ss_rank *r, size_t n, char *buf, size_t len)
{
	size_t at = 0, i = 0;

	buf[0] = '\0';
	while (i < n && at + 32 < len) {
		int lo = r[i].rank, hi = lo;

		while (i + 1 < n && r[i + 1].rank == hi + 1)
			hi = r[++i].rank;
		i++;
		at += (size_t)snprintf(buf + at, len - at,
				       lo == hi ? "%s%d" : "%s%d-%d",
				       at ? "," : "", lo, hi);
	}
	if (i < n)
		snprintf(buf + at, len - at, ",...");
}

/* The hosts of n ranks, each once, "n1, n2" (cut with "..."). */
static void hosts_text(const struct ss_rank *r, size_t n, char *buf, size_t len)
{
	size_t at = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		size_t j;

		for (j = 0; j < i; j++)
			if (strcmp(r[j].host, r[i].host) == 0)
				break;
		if (j < i)
			continue;
		if (at + strlen(r[i].host) + 8 >= len) {
			snprintf(buf + at, len - at, ", ...");
			return;
		}
		at += (size_t)snprintf(buf + at, len - at, "%s%s",
				       at ? ", " : "", r[i].host);
	}
}

/* The answers read, parsed into ranks; errors are printed or collected. */
struct ss_parsed {
	struct ss_rank *ranks;
	size_t n;
	json_t *errors; /* one line each */
};

/* One line about node nd: "<host> (group rank <g>)<what>". */
static void parsed_error(struct status_stacks *ss, struct ss_parsed *p,
			 const struct ss_node *nd, const char *what)
{
	char line[700], *c;

	snprintf(line, sizeof(line), "%s (group rank %d)%s", nd->host,
		 nd->grank, what);
	c = clean(line, strlen(line));
	json_array_append_new(p->errors, json_string(c));
	free(c);
	ss->rc = 3;
}

static void ss_parse(struct status_stacks *ss, struct ss_parsed *p)
{
	struct rdzv_stacks_rank *tmp =
	    calloc(RDZV_STACKS_MAX_RANKS, sizeof(*tmp));
	size_t cap = 0;

	p->ranks = NULL;
	p->n = 0;
	p->errors = json_array();
	if (tmp == NULL)
		abort();
	for (int i = 0; i < ss->nnodes; i++) {
		struct ss_node *nd = &ss->nodes[i];
		char why[200];
		int k;

		if (!nd->want)
			continue;
		if (!nd->got) {
			snprintf(why, sizeof(why),
				 " did not answer within %.1f s",
				 (double)ss->wait_ms / 1000);
			parsed_error(ss, p, nd, why);
			continue;
		}
		if (nd->too_big) {
			parsed_error(ss, p, nd,
				     ": malformed stacks answer: larger than "
				     "an answer may be");
			continue;
		}
		k = rdzv_stacks_answer_parse(nd->v, nd->len, tmp,
					     RDZV_STACKS_MAX_RANKS, why,
					     sizeof(why));
		if (k < 0) {
			char what[300];

			snprintf(what, sizeof(what),
				 ": malformed stacks answer: %s", why);
			parsed_error(ss, p, nd, what);
			continue;
		}
		if (p->n + (size_t)k > cap) {
			cap = (p->n + (size_t)k) * 2;
			p->ranks = realloc(p->ranks, cap * sizeof(*p->ranks));
			if (p->ranks == NULL)
				abort();
		}
		for (int j = 0; j < k; j++) {
			struct ss_rank *r = &p->ranks[p->n++];

			r->rank = tmp[j].rank;
			r->taken = tmp[j].taken;
			r->host = nd->host;
			r->grank = nd->grank;
			r->where = clean(tmp[j].where, tmp[j].where_len);
			r->dump = clean(tmp[j].dump, tmp[j].dump_len);
			r->key = r->taken ? stack_key(r->dump) : strdup("");
			if (r->key == NULL)
				abort();
		}
	}
	free(tmp);
}

static void parsed_release(struct ss_parsed *p)
{
	for (size_t i = 0; i < p->n; i++) {
		free(p->ranks[i].where);
		free(p->ranks[i].dump);
		free(p->ranks[i].key);
	}
	free(p->ranks);
	json_decref(p->errors);
}

/* Group the taken stacks (sorting p->ranks: taken ones first). */
static size_t ss_group(struct ss_parsed *p, struct ss_group **out,
		       size_t *ntaken)
{
	struct ss_group *g = calloc(p->n ? p->n : 1, sizeof(*g));
	size_t ng = 0, t = 0;

	if (g == NULL)
		abort();
	/* The taken ones to the front. */
	for (size_t i = 0; i < p->n; i++)
		if (p->ranks[i].taken) {
			struct ss_rank x = p->ranks[t];

			p->ranks[t++] = p->ranks[i];
			p->ranks[i] = x;
		}
	qsort(p->ranks, t, sizeof(*p->ranks), cmp_rank_key);
	for (size_t i = 0; i < t; i++) {
		if (i == 0 ||
		    strcmp(p->ranks[i].where, p->ranks[i - 1].where) != 0 ||
		    strcmp(p->ranks[i].key, p->ranks[i - 1].key) != 0)
			g[ng++] = (struct ss_group){
			    .first = i, .n = 0, .rank = p->ranks[i].rank};
		g[ng - 1].n++;
	}
	qsort(g, ng, sizeof(*g), cmp_group);
	*out = g;
	*ntaken = t;
	return ng;
}

static char *ss_summary(const struct ss_parsed *p, size_t ntaken)
{
	struct pystack_rank *pr = calloc(ntaken ? ntaken : 1, sizeof(*pr));
	char *line = malloc(1024);

	if (pr == NULL || line == NULL)
		abort();
	for (size_t i = 0; i < ntaken; i++)
		pr[i] = (struct pystack_rank){
		    p->ranks[i].rank, p->ranks[i].where, p->ranks[i].host};
	if (pystack_summary(pr, ntaken, line, 1024) != 0)
		snprintf(line, 1024, "?");
	free(pr);
	return line;
}

static int answered(const struct status_stacks *ss, int *asked)
{
	int n = 0;

	*asked = 0;
	for (int i = 0; i < ss->nnodes; i++) {
		*asked += ss->nodes[i].want;
		n += ss->nodes[i].want && ss->nodes[i].got;
	}
	return n;
}

/* The ranks without a stack: one line for each node. */
static void print_untaken(const struct ss_parsed *p, size_t ntaken)
{
	for (size_t i = ntaken; i < p->n; i++) {
		const struct ss_rank *r = &p->ranks[i];
		size_t j, n = 0;

		for (j = ntaken; j < i; j++)
			if (p->ranks[j].grank == r->grank)
				break;
		if (j < i)
			continue; /* said with this node's first */
		for (j = i; j < p->n; j++)
			n += p->ranks[j].grank == r->grank;
		printf("%s (group rank %d): no stack for %zu rank(s), e.g. "
		       "rank %d: %.*s\n",
		       r->host, r->grank, n, r->rank,
		       (int)strcspn(r->dump, "\n"), r->dump);
	}
}

static void ss_print_text(struct status_stacks *ss, struct ss_parsed *p,
			  struct ss_group *g, size_t ng, size_t ntaken)
{
	char ranks[512], hosts[512];
	char *sum = ss_summary(p, ntaken);
	int asked, got = answered(ss, &asked);
	size_t i;

	printf("stacks of job '%s', round %d: %d of %d node(s) answered\n",
	       ss->run_id, ss->round, got, asked);
	printf("%s\n", ntaken ? sum : "no stacks taken");
	for (i = 0; i < ng; i++) {
		const struct ss_rank *r = &p->ranks[g[i].first];

		ranks_text(r, g[i].n, ranks, sizeof(ranks));
		hosts_text(r, g[i].n, hosts, sizeof(hosts));
		printf("\n--- %s %s (%s): %s\n", g[i].n == 1 ? "rank" : "ranks",
		       ranks, hosts, r->where);
		fputs(r->dump, stdout);
		if (*r->dump && r->dump[strlen(r->dump) - 1] != '\n')
			fputc('\n', stdout);
	}
	if (ng > 0)
		fputc('\n', stdout);
	print_untaken(p, ntaken);
	for (i = 0; i < json_array_size(p->errors); i++)
		log_msg(LOG_ERROR, "crun status", "%s",
			json_string_value(json_array_get(p->errors, i)));
	free(sum);
}

static void ss_print_json(struct status_stacks *ss, struct ss_parsed *p,
			  struct ss_group *g, size_t ng, size_t ntaken)
{
	json_t *o = json_object(), *groups = json_array(),
	       *ranks = json_array();
	json_t *missing = json_array();
	char *sum = ss_summary(p, ntaken);
	int asked, got = answered(ss, &asked);
	size_t i;

	json_object_set_new(o, "run_id", json_string(ss->run_id));
	json_object_set_new(o, "round", json_integer(ss->round));
	json_object_set_new(o, "nodes_asked", json_integer(asked));
	json_object_set_new(o, "nodes_answered", json_integer(got));
	json_object_set_new(o, "summary", json_string(sum));
	for (i = 0; i < ng; i++) {
		const struct ss_rank *r = &p->ranks[g[i].first];
		json_t *rk = json_array(), *hs = json_array();

		for (size_t j = 0; j < g[i].n; j++) {
			size_t k;

			json_array_append_new(rk, json_integer(r[j].rank));
			for (k = 0; k < j; k++)
				if (strcmp(r[k].host, r[j].host) == 0)
					break;
			if (k == j)
				json_array_append_new(hs,
						      json_string(r[j].host));
		}
		json_array_append_new(groups,
				      json_pack("{s:s, s:o, s:o, s:s}", "where",
						r->where, "ranks", rk, "hosts",
						hs, "stack", r->dump));
	}
	for (i = 0; i < p->n; i++) {
		const struct ss_rank *r = &p->ranks[i];

		json_array_append_new(
		    ranks,
		    json_pack("{s:i, s:s, s:b, s:s, s:s}", "rank", r->rank,
			      "host", r->host, "taken", r->taken, "where",
			      r->where, r->taken ? "stack" : "why", r->dump));
	}
	for (i = 0; i < (size_t)ss->nnodes; i++)
		if (ss->nodes[i].want && !ss->nodes[i].got)
			json_array_append_new(
			    missing, json_pack("{s:i, s:s}", "group_rank",
					       ss->nodes[i].grank, "host",
					       ss->nodes[i].host));
	json_object_set_new(o, "groups", groups);
	json_object_set_new(o, "ranks", ranks);
	json_object_set_new(o, "not_answered", missing);
	json_object_set(o, "errors", p->errors);
	json_dumpf(o, stdout, JSON_COMPACT);
	fputc('\n', stdout);
	json_decref(o);
	free(sum);
}

static void on_blanked(int status, const struct crun_store_reply *rep,
		       void *arg)
{
	struct status_stacks *ss = arg;

	(void)status;
	(void)rep;
	ss->blanks--;
	ss_finish(ss);
}

/* Print what came, then blank the answers read. */
static void ss_report(struct status_stacks *ss)
{
	struct ss_parsed p;
	struct ss_group *g = NULL;
	size_t ng, ntaken = 0;
	char k[KEYMAX];

	if (ss->reported)
		return;
	ss->reported = 1;
	uv_timer_stop(&ss->timer);
	ss_parse(ss, &p);
	ng = ss_group(&p, &g, &ntaken);
	if (ss->json)
		ss_print_json(ss, &p, g, ng, ntaken);
	else
		ss_print_text(ss, &p, g, ng, ntaken);
	fflush(stdout);
	free(g);
	parsed_release(&p);
	for (int i = 0; i < ss->nnodes; i++) {
		if (!ss->nodes[i].got)
			continue;
		snprintf(k, sizeof(k), "%sstacks/%s/%d", ss->prefix, ss->nonce,
			 ss->nodes[i].grank);
		ss->blanks++;
		if (ss->ops->set(ss->kv, k, "-", 1, on_blanked, ss) != 0)
			ss->blanks--;
	}
	ss_finish(ss);
}

static int all_in(const struct status_stacks *ss)
{
	for (int i = 0; i < ss->nnodes; i++)
		if (ss->nodes[i].want && !ss->nodes[i].got)
			return 0;
	return 1;
}

static void on_poll(int status, const struct crun_store_reply *rep, void *arg)
{
	struct ss_poll *q = arg;
	struct status_stacks *ss = q->ss;

	ss->polling = 0;
	if (status != 0 && !ss->reported) {
		/* The store is gone or refuses: say so, print what came. */
		log_msg(LOG_ERROR, "crun status",
			"reading the stacks answers: %s",
			crun_strerror(status));
		ss->rc = 3;
		free(q);
		return ss_report(ss);
	}
	if (status == 0 && !ss->reported && rep->nvalues == (size_t)q->n) {
		for (int i = 0; i < q->n; i++) {
			struct ss_node *nd = &ss->nodes[q->idx[i]];
			const struct crun_store_iov *v = &rep->values[i];

			if (v->len == 0)
				continue;
			nd->got = 1;
			if (v->len > RDZV_STACKS_MAX_ANSWER) {
				nd->too_big = 1;
				continue;
			}
			nd->v = malloc(v->len);
			if (nd->v == NULL)
				abort();
			memcpy(nd->v, v->base, v->len);
			nd->len = v->len;
		}
		if (all_in(ss))
			ss_report(ss);
	}
	free(q);
}

static void ss_poll(struct status_stacks *ss)
{
	struct ss_poll *q;
	const char *kp[POLL_CHUNK];

	if (ss->polling || ss->reported)
		return;
	q = calloc(1, sizeof(*q));
	if (q == NULL)
		abort();
	q->ss = ss;
	for (int i = 0; i < ss->nnodes && q->n < POLL_CHUNK; i++) {
		if (!ss->nodes[i].want || ss->nodes[i].got)
			continue;
		snprintf(q->keys[q->n], KEYMAX, "%sstacks/%s/%d", ss->prefix,
			 ss->nonce, ss->nodes[i].grank);
		kp[q->n] = q->keys[q->n];
		q->idx[q->n++] = i;
	}
	if (q->n == 0) {
		free(q);
		return ss_report(ss);
	}
	ss->polling = 1;
	if (ss->ops->peek(ss->kv, kp, (size_t)q->n, on_poll, q) != 0) {
		ss->polling = 0;
		free(q);
	}
}

static void on_timer(uv_timer_t *t)
{
	struct status_stacks *ss = t->data;

	if (uv_now(ss->loop) - ss->started >= ss->wait_ms) {
		ss->rc = 3;
		return ss_report(ss);
	}
	ss_poll(ss);
}

static void on_req_set(int status, const struct crun_store_reply *rep,
		       void *arg)
{
	struct status_stacks *ss = arg;

	(void)rep;
	free(ss->req);
	ss->req = NULL;
	if (ss->reported)
		return;
	if (status) {
		log_msg(LOG_ERROR, "crun status",
			"cannot write the stacks request: %s",
			crun_strerror(status));
		ss->rc = 3;
		ss->reported = 1;
		return ss_finish(ss);
	}
	ss->started = uv_now(ss->loop);
	uv_timer_start(&ss->timer, on_timer, POLL_MS, POLL_MS);
}

int status_stacks_run(uv_loop_t *loop, const struct rdzv_kv_ops *ops, void *kv,
		      const struct rdzv_status *st, int json, double wait_s,
		      status_stacks_cb cb, void *data,
		      struct status_stacks **out)
{
	struct status_stacks *ss = calloc(1, sizeof(*ss));
	char k[KEYMAX];
	int rc;

	*out = NULL;
	if (ss == NULL)
		return UV_ENOMEM;
	ss->nodes =
	    calloc(st->nnodes ? (size_t)st->nnodes : 1, sizeof(*ss->nodes));
	ss->req = malloc(64);
	if (ss->nodes == NULL || ss->req == NULL) {
		free(ss->nodes);
		free(ss->req);
		free(ss);
		return UV_ENOMEM;
	}
	ss->loop = loop;
	ss->ops = ops;
	ss->kv = kv;
	ss->json = json;
	ss->cb = cb;
	ss->data = data;
	ss->round = st->round;
	ss->wait_ms = (uint64_t)(wait_s * 1000);
	snprintf(ss->run_id, sizeof(ss->run_id), "%s", st->run_id);
	snprintf(ss->prefix, sizeof(ss->prefix), "crun/%s/", st->run_id);
	for (int i = 0; i < st->nnodes; i++) {
		struct ss_node *nd = &ss->nodes[i];

		nd->grank = st->nodes[i].group_rank;
		snprintf(nd->host, sizeof(nd->host), "%s", st->nodes[i].d.host);
		nd->want = nd->grank >= 0 && !st->nodes[i].done;
	}
	ss->nnodes = st->nnodes;
	uv_timer_init(loop, &ss->timer);
	ss->timer.data = ss;
	rdzv_stacks_nonce(ss->nonce, sizeof(ss->nonce));
	snprintf(ss->req, 64, "%s %d", ss->nonce, ss->round);
	snprintf(k, sizeof(k), "%sstacks_req", ss->prefix);
	rc = ops->set(kv, k, ss->req, strlen(ss->req), on_req_set, ss);
	if (rc) {
		ss->reported = ss->done = 1;
		status_stacks_free(ss);
		return rc;
	}
	*out = ss;
	return 0;
}

static void on_timer_closed(uv_handle_t *h)
{
	struct status_stacks *ss = h->data;

	for (int i = 0; i < ss->nnodes; i++)
		free(ss->nodes[i].v);
	free(ss->nodes);
	free(ss->req);
	free(ss);
}

void status_stacks_free(struct status_stacks *ss)
{
	if (ss == NULL)
		return;
	uv_timer_stop(&ss->timer);
	uv_close((uv_handle_t *)&ss->timer, on_timer_closed);
}

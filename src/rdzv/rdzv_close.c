/*
 * Closing a round: the node whose CAS of "closed" wins reads the N
 * descriptors, orders them (node rank, the store host first, host,
 * address, pid), compares the fingerprints (env_check) and writes every
 * assignment, the host names by group rank, the addresses and the
 * envcheck lines in one MULTI_SET, then "assigned".
 *
 * Failure modes: a descriptor never written (its node died while joining:
 * the read times out and the round is aborted, and everyone joins the
 * next); a malformed descriptor or impossible static ranks (the round is
 * aborted as fatal); env_check=strict and the nodes differ (refused).
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crun/err.h"
#include "crun/log.h"
#include "rdzv_kit.h"

struct nd {
	int index;
	int is_host;
	int pid;
	int nproc;
	int node_rank;
	char host[256];
	char addr[256];
	char role[128];
	char ips[RDZV_MAX_FIELD + 1];
	struct crun_fingerprint fp;
};

/*
 * Descriptor order: node rank (static; all 0 for c10d), the store host
 * first, then host, address and pid.
 */
static int nd_cmp(const void *x, const void *y)
{
	const struct nd *a = x, *b = y;
	int c;

	if (a->node_rank != b->node_rank)
		return a->node_rank < b->node_rank ? -1 : 1;
	if (a->is_host != b->is_host)
		return b->is_host - a->is_host;
	if ((c = strcmp(a->host, b->host)) != 0)
		return c;
	if ((c = strcmp(a->addr, b->addr)) != 0)
		return c;
	return (a->pid > b->pid) - (a->pid < b->pid);
}

/* Order pointers to node descriptions by host name. */
static int nd_host_cmp(const void *x, const void *y)
{
	const struct nd *const *a = x, *const *b = y;

	return strcmp((*a)->host, (*b)->host);
}

/* The store took our refusal: fail with it (whatever our watch sees). */
static void on_env_refused(int status, const struct crun_store_reply *rep,
			   void *arg)
{
	struct crun_rdzv *r = rdzv__op_take(arg, NULL, NULL);

	(void)status;
	(void)rep;
	if (r == NULL || r->state != R_JOINING)
		return;
	r->env_refused = 1;
	rdzv__round_fail(r, CRUN_ERDZV_CLOSED, "%s", r->env_diff);
}

/*
 * env_check=strict: abort the round as rdzv__abort_round does, and fail this
 * node with the message as soon as the store has it, so that the closer
 * says why even when the store host, told first, is gone before our own
 * watch on "assigned" replies.
 */
static void env_refuse(struct crun_rdzv *r, const char *msg)
{
	char k[KEYMAX], val[600];

	snprintf(r->env_diff, sizeof(r->env_diff), "%s", msg);
	rdzv__key(r, k, "r%d/assigned", r->round);
	rdzv_format_abort(val, sizeof(val), RDZV_END_FATAL, msg);
	rdzv__end_round(r, RDZV_END_FATAL, msg);
	if (r->ops->set(r->kv, k, val, strlen(val), on_env_refused,
			rdzv__op_new(r, 0)))
		rdzv__store_error(r, CRUN_ECLOSED);
}

/*
 * The closer compares the nodes' fingerprints (in group-rank order): the
 * record r<R>/envcheck gets the lines ("-": none) into *env (malloc'd).
 * Under env_check=strict, differences abort the round instead (returns -1).
 */
static int env_compare(struct crun_rdzv *r, const struct nd *v, int n,
		       char *envk, char **env, size_t *elen)
{
	const char **hosts = calloc((size_t)n, sizeof(*hosts));
	char(*labels)[RDZV_MAX_FIELD * 2 + 4] =
	    calloc((size_t)n, sizeof(*labels));
	struct crun_fingerprint *fps = calloc((size_t)n, sizeof(*fps));
	const struct nd **byhost = calloc((size_t)n, sizeof(*byhost));
	char *dup = calloc((size_t)n, 1);
	char *lines = malloc(RDZV_MAX_ENVCHECK + 1);
	int k = 0;

	if (!hosts || !labels || !fps || !byhost || !dup || !lines)
		abort();
	rdzv__key(r, envk, "r%d/envcheck", r->round);
	/* Nodes are named by host; by "host (address)" where hosts repeat. */
	for (int i = 0; i < n; i++)
		byhost[i] = &v[i];
	qsort(byhost, (size_t)n, sizeof(*byhost), nd_host_cmp);
	for (int i = 1; i < n; i++)
		if (strcmp(byhost[i - 1]->host, byhost[i]->host) == 0)
			dup[byhost[i - 1] - v] = dup[byhost[i] - v] = 1;
	for (int i = 0; i < n; i++) {
		snprintf(labels[i], sizeof(labels[i]),
			 dup[i] ? "%s (%s)" : "%s", v[i].host, v[i].addr);
		hosts[i] = labels[i];
		fps[i] = v[i].fp;
	}
	free(byhost);
	free(dup);
	if (r->o.env_check != CRUN_ENV_CHECK_OFF)
		k = fingerprint_compare(hosts, fps, n, lines,
					RDZV_MAX_ENVCHECK + 1);
	free(hosts);
	free(labels);
	free(fps);
	if (k > 0 && r->o.env_check == CRUN_ENV_CHECK_STRICT) {
		char
		    msg[580]; /* "abort X <msg>" fits rdzv__abort_round's 600 */
		size_t m;

		/* One line for the "end" record (at most RDZV_MAX_RECORD). */
		for (char *p = lines; *p; p++)
			if (*p == '\n')
				*p = p[1] ? ';' : '\0';
		m = (size_t)snprintf(msg, sizeof(msg),
				     "env_check=strict refused round %d: %s",
				     r->round, lines);
		if (m >= sizeof(msg))
			memcpy(msg + sizeof(msg) - 4, "...", 4);
		free(lines);
		env_refuse(r, msg);
		return -1;
	}
	if (k == 0)
		snprintf(lines, RDZV_MAX_ENVCHECK + 1, "-");
	*env = lines;
	*elen = strlen(lines);
	return 0;
}

/* Whether s is an IPv4 or IPv6 literal. */
static int is_literal(const char *s)
{
	unsigned char bin[16];

	return inet_pton(AF_INET, s, bin) == 1 ||
	       inet_pton(AF_INET6, s, bin) == 1;
}

/*
 * The n descriptors of a reply into v, in arrival order: 0, or -1 with the
 * round aborted (a descriptor missing or malformed, too many workers).
 */
static int descr_read(struct crun_rdzv *r, const struct crun_store_reply *rep,
		      struct nd *v, int n)
{
	int64_t total = 0;
	char k[KEYMAX];

	for (int i = 0; i < n; i++) {
		struct rdzv_descr d;
		char why[200], msg[1200];

		v[i].index = i + 1;
		d.host[0] = '\0';
		if (i < (int)rep->nvalues &&
		    rdzv_parse_descr(rep->values[i].base, rep->values[i].len,
				     r->o.max_nodes, &d, why,
				     sizeof(why)) == 0) {
			v[i].node_rank = d.node_rank;
			v[i].is_host = d.is_host;
			v[i].pid = d.pid;
			v[i].nproc = d.nproc;
			memcpy(v[i].host, d.host, sizeof(v[i].host));
			memcpy(v[i].addr, d.addr, sizeof(v[i].addr));
			memcpy(v[i].role, d.role, sizeof(v[i].role));
			memcpy(v[i].ips, d.ips, sizeof(v[i].ips));
			v[i].fp = d.fp;
			total += d.nproc;
			continue;
		}
		if (i >= (int)rep->nvalues)
			snprintf(why, sizeof(why), "no value");
		rdzv__key(r, k, "r%d/node/%d", r->round, i + 1);
		snprintf(msg, sizeof(msg),
			 "malformed rendezvous record '%s'%s%s: %s", k,
			 *d.host ? " written by " : "", d.host, why);
		log_msg(LOG_ERROR, "crun", "%s", msg);
		rdzv__abort_round(r, RDZV_END_FATAL, msg);
		return -1;
	}
	if (total > INT32_MAX) {
		rdzv__abort_round(r, RDZV_END_FATAL,
				  "the nodes' descriptors add up to more than "
				  "2^31 workers");
		return -1;
	}
	return 0;
}

/* Static rendezvous, v in order: node ranks 0..n-1 once each, or abort. */
static int static_ranks_check(struct crun_rdzv *r, const struct nd *v, int n)
{
	char why[600];

	if (r->o.static_rank < 0)
		return 0;
	for (int i = 0; i < n; i++) {
		if (v[i].node_rank == i)
			continue;
		snprintf(why, sizeof(why),
			 "static rendezvous needs node ranks 0..%d once each; "
			 "found %d at position %d (host %s)",
			 n - 1, v[i].node_rank, i, v[i].host);
		rdzv__abort_round(r, RDZV_END_FATAL, why);
		return -1;
	}
	return 0;
}

/*
 * The nodes' addresses, for the workers' store's allow list: literals only
 * (host names may resolve nowhere), the address when it is one. addrs has
 * room for n fields; returns the record's length.
 */
static size_t addrs_format(const struct nd *v, int n, char *addrs)
{
	size_t alen = 0;

	for (int g = 0; g < n; g++) {
		size_t cap = (size_t)n * (RDZV_MAX_ADDRS_FIELD + 1) - alen;
		int lit = is_literal(v[g].addr);

		alen += (size_t)snprintf(addrs + alen, cap, "%s%s%s%s",
					 g ? " " : "",
					 lit || !*v[g].ips ? v[g].addr : "",
					 lit && *v[g].ips ? "," : "", v[g].ips);
	}
	return alen;
}

/*
 * v in group-rank order: write every assignment, every host name by group
 * rank (for messages), the addresses and the envcheck lines in one
 * MULTI_SET, then "assigned", which the participants watch.
 */
static void assign_all(struct crun_rdzv *r, const struct nd *v, int n,
		       const char *envk, const char *env, size_t elen)
{
	/* The keys, packed (KEYMAX each would be 1 KiB per node). */
	size_t ks = strlen(r->prefix) + 40, m = 2 * (size_t)n + 2;
	struct crun_node_info *info = calloc((size_t)n, sizeof(*info));
	struct crun_ranks *rks = calloc((size_t)n, sizeof(*rks));
	char *keys = malloc((2 * (size_t)n + 1) * ks);
	char(*vals)[96] = calloc(2 * (size_t)n, sizeof(*vals));
	const char **kp = calloc(m, sizeof(*kp));
	const void **vp = calloc(m, sizeof(*vp));
	size_t *lens = calloc(m, sizeof(*lens));
	char *addrs = calloc((size_t)n, RDZV_MAX_ADDRS_FIELD + 1);
	char k[KEYMAX], okv[24];

	if (!info || !rks || !keys || !vals || !kp || !vp || !lens || !addrs)
		abort();
	for (int i = 0; i < n; i++) {
		info[i].role = v[i].role;
		info[i].local_world_size = v[i].nproc;
	}
	if (env_compute_all_ranks(info, n, rks) != 0)
		abort();
	for (int g = 0; g < n; g++) {
		snprintf(keys + g * ks, ks, "%sr%d/assign/%d", r->prefix,
			 r->round, v[g].index);
		lens[g] = rdzv_format_assign(vals[g], sizeof(vals[g]), &rks[g]);
		kp[g] = keys + g * ks;
		vp[g] = vals[g];
		snprintf(keys + (n + g) * ks, ks, "%sr%d/host/%d", r->prefix,
			 r->round, g);
		kp[n + g] = keys + (n + g) * ks;
		vp[n + g] = v[g].host;
		lens[n + g] = strlen(v[g].host);
	}
	snprintf(keys + 2 * n * ks, ks, "%sr%d/addrs", r->prefix, r->round);
	kp[2 * n] = keys + 2 * n * ks;
	vp[2 * n] = addrs;
	lens[2 * n] = addrs_format(v, n, addrs);
	/* What differs between the nodes, for every node to print. */
	kp[2 * n + 1] = envk;
	vp[2 * n + 1] = env;
	lens[2 * n + 1] = elen;
	r->ops->multi_set(r->kv, kp, vp, lens, m, NULL, NULL);
	rdzv__key(r, k, "r%d/assigned", r->round);
	rdzv_format_assigned(okv, sizeof(okv), n);
	r->ops->set(r->kv, k, okv, strlen(okv), NULL, NULL);
	free(info);
	free(rks);
	free(addrs);
	free(keys);
	free(vals);
	free(kp);
	free(vp);
	free(lens);
}

/* The closer: read all N descriptors, order them, write every assignment. */
static void on_descriptors(int status, const struct crun_store_reply *rep,
			   void *arg)
{
	int n;
	struct crun_rdzv *r = rdzv__op_take(arg, NULL, &n);
	char *env = NULL, envk[KEYMAX];
	size_t elen = 0;
	struct nd *v;

	if (r == NULL)
		return;
	if (status == CRUN_ETIMEDOUT)
		return rdzv__abort_round(
		    r, RDZV_END_DEAD,
		    "a node joined but never described itself");
	if (status)
		return rdzv__store_error(r, status);
	v = calloc((size_t)n, sizeof(*v));
	if (v == NULL)
		abort();
	if (descr_read(r, rep, v, n) == 0) {
		qsort(v, (size_t)n, sizeof(*v), nd_cmp);
		if (static_ranks_check(r, v, n) == 0 &&
		    env_compare(r, v, n, envk, &env, &elen) == 0)
			assign_all(r, v, n, envk, env, elen);
	}
	free(v);
	free(env);
}

static void on_close_cas(int status, const struct crun_store_reply *rep,
			 void *arg)
{
	int n;
	struct crun_rdzv *r = rdzv__op_take(arg, NULL, &n);
	char want[16], (*keys)[KEYMAX];
	const char **kp;

	if (r == NULL)
		return;
	if (status)
		return rdzv__store_error(r, status);
	snprintf(want, sizeof(want), "%d", n);
	if (!rdzv__reply_is(rep, want))
		return; /* someone else closed it (with another count) */
	keys = calloc((size_t)n, sizeof(*keys));
	kp = calloc((size_t)n, sizeof(*kp));
	if (!keys || !kp)
		abort();
	for (int i = 0; i < n; i++) {
		rdzv__key(r, keys[i], "r%d/node/%d", r->round, i + 1);
		kp[i] = keys[i];
	}
	if (r->ops->multi_get(r->kv, kp, (size_t)n, 10000, on_descriptors,
			      rdzv__op_new(r, n)))
		rdzv__store_error(r, CRUN_ECLOSED);
	free(keys);
	free(kp);
}

static void on_close_count(int status, const struct crun_store_reply *rep,
			   void *arg)
{
	struct crun_rdzv *r = rdzv__op_take(arg, NULL, NULL);
	char k[KEYMAX], want[16];
	int64_t c;

	if (r == NULL)
		return;
	if (status)
		return rdzv__store_error(r, status);
	c = rdzv_reply_int(rep);
	if (c > r->o.max_nodes)
		c = r->o.max_nodes;
	if (c < r->o.min_nodes)
		return;
	snprintf(want, sizeof(want), "%d", (int)c);
	rdzv__key(r, k, "r%d/closed", r->round);
	if (r->ops->compare_set(r->kv, k, "", 0, want, strlen(want),
				on_close_cas, rdzv__op_new(r, (int)c)))
		rdzv__store_error(r, CRUN_ECLOSED);
}

void rdzv__try_close(struct crun_rdzv *r)
{
	char k[KEYMAX];

	if (r->state != R_JOINING)
		return;
	/*
	 * Our own descriptor still waits for the fingerprint: the closer's
	 * read of the descriptors would wait for it on the connection that
	 * must carry it. descr_flush closes once it is written.
	 */
	if (r->descr.held_round == r->round) {
		r->descr.close_after = 1;
		return;
	}
	rdzv__key(r, k, "r%d/join", r->round);
	if (r->ops->add(r->kv, k, 0, on_close_count, rdzv__op_new(r, 0)))
		rdzv__store_error(r, CRUN_ECLOSED);
}

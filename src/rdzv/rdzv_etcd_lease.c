/*
 * The etcd backend's leases. Opening grants the node's lease, adopts the
 * job's (the first node creates it with a create_revision==0 txn) and
 * writes the node's presence; a timer refreshes both leases every
 * lease_ttl/3. Revoking takes the node's lease, then the job's too when
 * this node was the last one.
 *
 * Failure modes: the node's lease expired (granted again: the others
 * already saw this node vanish); the job's lease expired, or a keepalive
 * failed (fatal); etcd does not answer while revoking (the backend's close
 * bounds it).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crun/err.h"
#include "crun/log.h"
#include "rdzv_etcd_lease.h"

static void grant_node(struct rdzv_etcd_lease *l);

static void on_ka(int status, json_t *resp, void *arg)
{
	struct rdzv_etcd_lease *l = arg;
	json_t *res = json_object_get(resp, "result");
	const char *id = json_string_value(json_object_get(res, "ID"));

	if (status == CRUN_ECANCELED || l->stopped)
		return;
	if (status)
		return l->on.fatal(l->data, status, etcd_errmsg(l->etcd));
	if (etcd_int(res, "TTL") > 0)
		return;
	if (id && strcmp(id, l->job) == 0)
		return l->on.fatal(l->data, CRUN_EETCD,
				   "the job's etcd lease expired (etcd did not "
				   "answer for longer than its TTL)");
	if (id && strcmp(id, l->node) == 0) {
		log_say("this node's etcd lease expired (the others "
			"count it as lost); taking a new one");
		grant_node(l);
	}
}

static void keepalive(struct rdzv_etcd_lease *l, const char *id)
{
	if (*id)
		etcd_call(l->etcd, "/v3/lease/keepalive",
			  json_pack("{s:s}", "ID", id), on_ka, l);
}

static void on_ka_tick(uv_timer_t *t)
{
	struct rdzv_etcd_lease *l = t->data;

	if (l->stopped)
		return;
	keepalive(l, l->node);
	keepalive(l, l->job);
	l->on.tick(l->data);
}

static void open_done(struct rdzv_etcd_lease *l, int status, const char *why)
{
	l->opening = 0;
	l->on.opened(l->data, status, why);
}

static void on_alive(int status, json_t *resp, void *arg)
{
	struct rdzv_etcd_lease *l = arg;

	if (status == CRUN_ECANCELED || !l->opening)
		return;
	if (status && etcd_int(resp, "code") == 5) {
		/* The lease expired before we used it (etcd is slow): again. */
		return grant_node(l);
	}
	if (status)
		return open_done(l, status, etcd_errmsg(l->etcd));
	if (!l->stopped)
		uv_timer_start(&l->ka, on_ka_tick,
			       (uint64_t)(l->ttl * 1000 / 3),
			       (uint64_t)(l->ttl * 1000 / 3));
	open_done(l, 0, "");
}

static void put_alive(struct rdzv_etcd_lease *l)
{
	char k[600];

	snprintf(k, sizeof(k), "%sn/%s", l->ns, l->node);
	if (etcd_call(l->etcd, "/v3/kv/put", etcd_put_req(k, "1", 1, l->node),
		      on_alive, l) &&
	    l->opening)
		open_done(l, CRUN_EETCD, "cannot reach etcd");
}

static void on_job_lease(int status, json_t *resp, void *arg)
{
	struct rdzv_etcd_lease *l = arg;
	char *v = NULL;
	size_t n;

	if (status == CRUN_ECANCELED)
		return;
	if (status)
		return open_done(l, status, etcd_errmsg(l->etcd));
	if (l->rev == 0)
		l->rev = etcd_int(json_object_get(resp, "header"), "revision");
	if (json_is_true(json_object_get(resp, "succeeded"))) {
		snprintf(l->job, sizeof(l->job), "%s", l->cand);
	} else if (etcd_kv_first(etcd_txn_resp(resp, 0, "response_range"), &v,
				 &n, NULL)) {
		/* Another node made it first: use theirs. */
		snprintf(l->job, sizeof(l->job), "%s", v);
		etcd_call(l->etcd, "/v3/lease/revoke",
			  json_pack("{s:s}", "ID", l->cand), NULL, NULL);
		free(v);
	}
	*l->cand = '\0';
	put_alive(l);
}

static void on_job_grant(int status, json_t *resp, void *arg)
{
	struct rdzv_etcd_lease *l = arg;
	const char *id = json_string_value(json_object_get(resp, "ID"));
	char k[600];

	if (status == CRUN_ECANCELED)
		return;
	if (status || id == NULL)
		return open_done(l, status ? status : CRUN_EPROTO,
				 etcd_errmsg(l->etcd));
	snprintf(l->cand, sizeof(l->cand), "%s", id);
	snprintf(k, sizeof(k), "%slease", l->ns);
	if (etcd_call(l->etcd, "/v3/kv/txn",
		      etcd_txn_cas(k, 1, "", 0, id, strlen(id), id),
		      on_job_lease, l))
		open_done(l, CRUN_EETCD, "cannot reach etcd");
}

static void on_job_read(int status, json_t *resp, void *arg)
{
	struct rdzv_etcd_lease *l = arg;
	char ttl[32], *v = NULL;
	size_t n;

	if (status == CRUN_ECANCELED)
		return;
	if (status)
		return open_done(l, status, etcd_errmsg(l->etcd));
	if (etcd_kv_first(resp, &v, &n, NULL)) {
		snprintf(l->job, sizeof(l->job), "%s", v);
		free(v);
		if (l->rev == 0)
			l->rev = etcd_int(json_object_get(resp, "header"),
					  "revision");
		return put_alive(l);
	}
	/* The first node: the job's lease outlives any node and an outage
	 * of read_timeout. */
	snprintf(ttl, sizeof(ttl), "%.0f",
		 l->ttl * 3 > l->timeout + l->ttl ? l->ttl * 3
						  : l->timeout + l->ttl);
	if (etcd_call(l->etcd, "/v3/lease/grant",
		      json_pack("{s:s}", "TTL", ttl), on_job_grant, l))
		open_done(l, CRUN_EETCD, "cannot reach etcd");
}

static void on_node_grant(int status, json_t *resp, void *arg)
{
	struct rdzv_etcd_lease *l = arg;
	const char *id = json_string_value(json_object_get(resp, "ID"));
	char k[600];

	if (status == CRUN_ECANCELED)
		return;
	if (status || id == NULL) {
		if (l->opening)
			return open_done(l, status ? status : CRUN_EPROTO,
					 etcd_errmsg(l->etcd));
		if (!l->stopped)
			l->on.fatal(l->data, status ? status : CRUN_EPROTO,
				    etcd_errmsg(l->etcd));
		return;
	}
	snprintf(l->node, sizeof(l->node), "%s", id);
	if (!l->opening || *l->job)
		return put_alive(l);
	/* Most nodes find the job's lease there already: one read. */
	snprintf(k, sizeof(k), "%slease", l->ns);
	if (etcd_call(l->etcd, "/v3/kv/range", etcd_range_req(k, NULL),
		      on_job_read, l))
		open_done(l, CRUN_EETCD, "cannot reach etcd");
}

/* Read-only: the job's lease tells whether the job exists. */
static void on_ro_job_read(int status, json_t *resp, void *arg)
{
	struct rdzv_etcd_lease *l = arg;
	char *v = NULL;
	size_t n;

	if (status == CRUN_ECANCELED)
		return;
	if (status)
		return open_done(l, status, etcd_errmsg(l->etcd));
	if (!etcd_kv_first(resp, &v, &n, NULL))
		return open_done(l, CRUN_ENOTFOUND,
				 "no job under this etcd prefix and run id");
	snprintf(l->job, sizeof(l->job), "%s", v);
	free(v);
	open_done(l, 0, "");
}

static void grant_node(struct rdzv_etcd_lease *l)
{
	char ttl[32];
	int rc;

	snprintf(ttl, sizeof(ttl), "%.0f", l->ttl);
	rc = etcd_call(l->etcd, "/v3/lease/grant",
		       json_pack("{s:s}", "TTL", ttl), on_node_grant, l);
	if (rc && l->opening)
		open_done(l, rc, "cannot reach etcd");
}

void rdzv_etcd_lease_init(struct rdzv_etcd_lease *l, uv_loop_t *loop,
			  struct etcd *etcd, const char *ns, double ttl,
			  double timeout, const struct rdzv_etcd_lease_ops *on,
			  void *data)
{
	memset(l, 0, sizeof(*l));
	l->etcd = etcd;
	l->ns = ns;
	l->ttl = ttl;
	l->timeout = timeout;
	l->on = *on;
	l->data = data;
	uv_timer_init(loop, &l->ka);
	l->ka.data = l;
}

void rdzv_etcd_lease_open(struct rdzv_etcd_lease *l, int readonly)
{
	char k[600];
	int rc;

	l->opening = 1;
	if (!readonly)
		return grant_node(l);
	snprintf(k, sizeof(k), "%slease", l->ns);
	rc = etcd_call(l->etcd, "/v3/kv/range", etcd_range_req(k, NULL),
		       on_ro_job_read, l);
	if (rc)
		open_done(l, rc, "cannot reach etcd");
}

void rdzv_etcd_lease_stop(struct rdzv_etcd_lease *l)
{
	l->stopped = 1;
	uv_timer_stop(&l->ka);
}

static void on_job_revoked(int status, json_t *resp, void *arg)
{
	struct rdzv_etcd_lease *l = arg;

	(void)resp;
	if (status != CRUN_ECANCELED)
		l->on.revoked(l->data);
}

/* Any node left? If not, the job's keys go with its lease now. */
static void on_nodes_left(int status, json_t *resp, void *arg)
{
	struct rdzv_etcd_lease *l = arg;

	if (status == CRUN_ECANCELED)
		return;
	if (status == 0 && etcd_int(resp, "count") == 0 && *l->job &&
	    etcd_call(l->etcd, "/v3/lease/revoke",
		      json_pack("{s:s}", "ID", l->job), on_job_revoked, l) == 0)
		return;
	l->on.revoked(l->data);
}

static void on_node_revoked(int status, json_t *resp, void *arg)
{
	struct rdzv_etcd_lease *l = arg;
	char k[600], end[600];
	json_t *b;

	(void)resp;
	if (status == CRUN_ECANCELED)
		return;
	snprintf(k, sizeof(k), "%sn/", l->ns);
	etcd_prefix_end(k, end, sizeof(end));
	b = etcd_range_req(k, end);
	json_object_set_new(b, "count_only", json_true());
	if (etcd_call(l->etcd, "/v3/kv/range", b, on_nodes_left, l))
		l->on.revoked(l->data);
}

void rdzv_etcd_lease_revoke(struct rdzv_etcd_lease *l)
{
	if (etcd_call(l->etcd, "/v3/lease/revoke",
		      json_pack("{s:s}", "ID", l->node), on_node_revoked, l))
		l->on.revoked(l->data);
}

static void on_ka_closed(uv_handle_t *h)
{
	struct rdzv_etcd_lease *l = h->data;

	l->closed_cb(l->data);
}

void rdzv_etcd_lease_close(struct rdzv_etcd_lease *l, void (*cb)(void *data))
{
	rdzv_etcd_lease_stop(l);
	l->closed_cb = cb;
	uv_close((uv_handle_t *)&l->ka, on_ka_closed);
}

/*
 * The etcd backend's leases, and opening and closing it. Opening grants
 * the node's lease, adopts the job's (the first node creates it with a
 * create_revision==0 txn) and opens the watch; a timer refreshes both
 * leases every lease_ttl/3. Closing revokes the node's lease (the job's
 * too when this node is the last one), bounded by CLOSE_MS.
 *
 * Failure modes: the node's lease expired (granted again: the others
 * already saw this node vanish); the job's lease expired (fatal); etcd does
 * not answer while closing (the handles close anyway, after CLOSE_MS).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "crun/err.h"
#include "crun/log.h"
#include "rdzv_etcd_internal.h"

static void grant_node(struct crun_rdzv_etcd *s);

static void on_ka(int status, json_t *resp, void *arg)
{
	struct crun_rdzv_etcd *s = arg;
	json_t *res = json_object_get(resp, "result");
	const char *id = json_string_value(json_object_get(res, "ID"));

	if (status == CRUN_ECANCELED || s->closing)
		return;
	if (status)
		return rdzv_etcd__fail_all(s, status, etcd_errmsg(s->etcd));
	if (etcd_int(res, "TTL") > 0)
		return;
	if (id && strcmp(id, s->job) == 0)
		return rdzv_etcd__fail_all(
		    s, CRUN_EETCD,
		    "the job's etcd lease expired (etcd did not "
		    "answer for longer than its TTL)");
	if (id && strcmp(id, s->node) == 0) {
		log_say("this node's etcd lease expired (the others "
			"count it as lost); taking a new one");
		grant_node(s);
	}
}

static void keepalive(struct crun_rdzv_etcd *s, const char *id)
{
	if (*id)
		etcd_call(s->etcd, "/v3/lease/keepalive",
			  json_pack("{s:s}", "ID", id), on_ka, s);
}

static void on_ka_tick(uv_timer_t *t)
{
	struct crun_rdzv_etcd *s = t->data;

	if (s->failed || s->closing)
		return;
	keepalive(s, s->node);
	keepalive(s, s->job);
	if (s->stream && !s->wcreated &&
	    uv_now(s->loop) - s->wopened >= CREATED_MS) {
		/* Without it this node would never see the others' writes. */
		etcd_req_cancel(s->stream);
		s->stream = NULL;
		return rdzv_etcd__watch_retry(
		    s,
		    "etcd accepted this node's watch but never "
		    "confirmed it (no answer in 2 s)",
		    1);
	}
	/* After a failover the watch moves to the endpoint that answers. */
	if (s->stream && etcd_failovers(s->etcd) != s->stream_failovers) {
		etcd_req_cancel(s->stream);
		s->stream = NULL;
		rdzv_etcd__watch_open(s);
	}
}

static void open_done(struct crun_rdzv_etcd *s, int status, const char *why)
{
	rdzv_etcd_open_cb cb = s->open_cb;

	s->open_cb = NULL;
	s->opening = 0;
	if (status) {
		s->failed = status;
		snprintf(s->errmsg, sizeof(s->errmsg), "%s", why);
	}
	if (cb)
		cb(s, status, s->open_data);
}

static void on_alive(int status, json_t *resp, void *arg)
{
	struct crun_rdzv_etcd *s = arg;

	if (status == CRUN_ECANCELED)
		return;
	if (s->opening && status && etcd_int(resp, "code") == 5) {
		/* The lease expired before we used it (etcd is slow): again. */
		return grant_node(s);
	}
	if (s->opening) {
		if (status)
			return open_done(s, status, etcd_errmsg(s->etcd));
		if (s->stream == NULL)
			rdzv_etcd__watch_open(s);
		uv_timer_start(&s->ka, on_ka_tick,
			       (uint64_t)(s->ttl * 1000 / 3),
			       (uint64_t)(s->ttl * 1000 / 3));
		open_done(s, 0, "");
	}
}

static void put_alive(struct crun_rdzv_etcd *s)
{
	char k[600];

	snprintf(k, sizeof(k), "%sn/%s", s->ns, s->node);
	if (etcd_call(s->etcd, "/v3/kv/put", etcd_put_req(k, "1", 1, s->node),
		      on_alive, s) &&
	    s->opening)
		open_done(s, CRUN_EETCD, "cannot reach etcd");
}

static void on_job_lease(int status, json_t *resp, void *arg)
{
	struct crun_rdzv_etcd *s = arg;
	char *v = NULL;
	size_t n;

	if (status == CRUN_ECANCELED)
		return;
	if (status)
		return open_done(s, status, etcd_errmsg(s->etcd));
	if (s->rev == 0)
		s->rev = etcd_int(json_object_get(resp, "header"), "revision");
	if (json_is_true(json_object_get(resp, "succeeded"))) {
		snprintf(s->job, sizeof(s->job), "%s", s->cand);
	} else if (etcd_kv_first(rdzv_etcd__txn_resp(resp, 0, "response_range"),
				 &v, &n, NULL)) {
		/* Another node made it first: use theirs. */
		snprintf(s->job, sizeof(s->job), "%s", v);
		etcd_call(s->etcd, "/v3/lease/revoke",
			  json_pack("{s:s}", "ID", s->cand), NULL, NULL);
		free(v);
	}
	*s->cand = '\0';
	put_alive(s);
}

static void on_job_grant(int status, json_t *resp, void *arg)
{
	struct crun_rdzv_etcd *s = arg;
	const char *id = json_string_value(json_object_get(resp, "ID"));
	char k[600];

	if (status == CRUN_ECANCELED)
		return;
	if (status || id == NULL)
		return open_done(s, status ? status : CRUN_EPROTO,
				 etcd_errmsg(s->etcd));
	snprintf(s->cand, sizeof(s->cand), "%s", id);
	snprintf(k, sizeof(k), "%slease", s->ns);
	if (etcd_call(s->etcd, "/v3/kv/txn",
		      etcd_txn_cas(k, 1, "", 0, id, strlen(id), id),
		      on_job_lease, s))
		open_done(s, CRUN_EETCD, "cannot reach etcd");
}

static void on_job_read(int status, json_t *resp, void *arg)
{
	struct crun_rdzv_etcd *s = arg;
	char ttl[32], *v = NULL;
	size_t n;

	if (status == CRUN_ECANCELED)
		return;
	if (status)
		return open_done(s, status, etcd_errmsg(s->etcd));
	if (etcd_kv_first(resp, &v, &n, NULL)) {
		snprintf(s->job, sizeof(s->job), "%s", v);
		free(v);
		if (s->rev == 0)
			s->rev = etcd_int(json_object_get(resp, "header"),
					  "revision");
		return put_alive(s);
	}
	/* The first node: the job's lease outlives any node and an outage
	 * of read_timeout. */
	snprintf(ttl, sizeof(ttl), "%.0f",
		 s->ttl * 3 > s->timeout + s->ttl ? s->ttl * 3
						  : s->timeout + s->ttl);
	if (etcd_call(s->etcd, "/v3/lease/grant",
		      json_pack("{s:s}", "TTL", ttl), on_job_grant, s))
		open_done(s, CRUN_EETCD, "cannot reach etcd");
}

static void on_node_grant(int status, json_t *resp, void *arg)
{
	struct crun_rdzv_etcd *s = arg;
	const char *id = json_string_value(json_object_get(resp, "ID"));
	char k[600];

	if (status == CRUN_ECANCELED)
		return;
	if (status || id == NULL) {
		if (s->opening)
			return open_done(s, status ? status : CRUN_EPROTO,
					 etcd_errmsg(s->etcd));
		return rdzv_etcd__fail_all(s, status ? status : CRUN_EPROTO,
					   etcd_errmsg(s->etcd));
	}
	snprintf(s->node, sizeof(s->node), "%s", id);
	if (!s->opening || *s->job)
		return put_alive(s);
	/* Most nodes find the job's lease there already: one read. */
	snprintf(k, sizeof(k), "%slease", s->ns);
	if (etcd_call(s->etcd, "/v3/kv/range", etcd_range_req(k, NULL),
		      on_job_read, s))
		open_done(s, CRUN_EETCD, "cannot reach etcd");
}

/* Read-only: the job's lease tells whether the job exists. */
static void on_ro_job_read(int status, json_t *resp, void *arg)
{
	struct crun_rdzv_etcd *s = arg;
	char *v = NULL;
	size_t n;

	if (status == CRUN_ECANCELED)
		return;
	if (status)
		return open_done(s, status, etcd_errmsg(s->etcd));
	if (!etcd_kv_first(resp, &v, &n, NULL))
		return open_done(s, CRUN_ENOTFOUND,
				 "no job under this etcd prefix and run id");
	snprintf(s->job, sizeof(s->job), "%s", v);
	free(v);
	open_done(s, 0, "");
}

static void grant_node(struct crun_rdzv_etcd *s)
{
	char ttl[32];
	int rc;

	snprintf(ttl, sizeof(ttl), "%.0f", s->ttl);
	rc = etcd_call(s->etcd, "/v3/lease/grant",
		       json_pack("{s:s}", "TTL", ttl), on_node_grant, s);
	if (rc && s->opening)
		open_done(s, rc, "cannot reach etcd");
}

double rdzv_etcd_attempt(double lease_ttl)
{
	double a = lease_ttl / 4;

	return a < 0.5 ? 0.5 : a > 3 ? 3 : a;
}

static int read_password(const char *path, char *out, size_t len, char *errmsg,
			 size_t errlen)
{
	FILE *fp = fopen(path, "r");
	size_t n;

	if (fp == NULL) {
		snprintf(errmsg, errlen, "cannot read password_file '%s': %s",
			 path, strerror(errno));
		return CRUN_ECONFIG;
	}
	n = fread(out, 1, len - 1, fp);
	fclose(fp);
	out[n] = '\0';
	out[strcspn(out, "\r\n")] = '\0';
	return 0;
}

int rdzv_etcd_open(uv_loop_t *loop, const struct rdzv_etcd_opts *o,
		   rdzv_etcd_open_cb cb, void *data,
		   struct crun_rdzv_etcd **out)
{
	struct crun_rdzv_etcd *s = calloc(1, sizeof(*s));
	struct etcd_opts eo;
	char pw[256] = "";
	int rc;

	if (s == NULL)
		return UV_ENOMEM;
	if (o->password_file && *o->password_file &&
	    (rc = read_password(o->password_file, pw, sizeof(pw), o->errmsg,
				o->errlen))) {
		free(s);
		return rc;
	}
	memset(&eo, 0, sizeof(eo));
	eo.endpoints = o->endpoints;
	eo.https = o->https;
	eo.cacert = o->cacert;
	eo.cert = o->cert;
	eo.key = o->key;
	eo.user = o->user;
	eo.password = pw;
	eo.timeout = o->timeout;
	eo.lim = o->lim;
	/* A hung member must not cost this node its lease: a keepalive
	 * (every lease_ttl/3) that waits lease_ttl/4 on it, then fails over,
	 * lands in time. */
	eo.attempt = rdzv_etcd_attempt(o->lease_ttl > 0 ? o->lease_ttl : 10);
	rc = etcd_new(loop, &eo, o->errmsg, o->errlen, &s->etcd);
	memset(pw, 0, sizeof(pw));
	if (rc) {
		free(s);
		return rc;
	}
	s->loop = loop;
	s->ttl = o->lease_ttl > 0 ? o->lease_ttl : 10;
	if (!o->readonly && s->ttl < LEASE_MIN_S)
		log_warn(
		    "lease_ttl=%g s may not survive a failover "
		    "between etcd members (a keepalive every %.1f s, %.1f s "
		    "on a hung member): this node may be counted lost; use "
		    "lease_ttl=%d or more",
		    s->ttl, s->ttl / 3, eo.attempt, LEASE_MIN_S);
	s->timeout = o->timeout > 0 ? o->timeout : 60;
	snprintf(s->ns, sizeof(s->ns), "%s/%s/", o->prefix ? o->prefix : "",
		 o->run_id);
	uv_timer_init(loop, &s->mtimer);
	uv_timer_init(loop, &s->wtimer);
	uv_timer_init(loop, &s->ka);
	uv_timer_init(loop, &s->restart);
	uv_timer_init(loop, &s->evtimer);
	uv_timer_init(loop, &s->btimer);
	s->btimer.data = s;
	srand((unsigned)uv_hrtime() ^ (unsigned)getpid());
	s->mtimer.data = s->wtimer.data = s->ka.data = s->restart.data = s;
	s->evtimer.data = s;
	s->pending = json_array();
	s->open_cb = cb;
	s->open_data = data;
	s->opening = 1;
	s->readonly = o->readonly;
	if (s->readonly) {
		char k[600];

		snprintf(k, sizeof(k), "%slease", s->ns);
		rc = etcd_call(s->etcd, "/v3/kv/range", etcd_range_req(k, NULL),
			       on_ro_job_read, s);
		if (rc)
			open_done(s, rc, "cannot reach etcd");
	} else {
		grant_node(s);
	}
	*out = s;
	return 0;
}

const char *rdzv_etcd_errmsg(const struct crun_rdzv_etcd *s)
{
	return s->errmsg;
}

static void on_etcd_closed(void *data)
{
	struct crun_rdzv_etcd *s = data;

	if (s->close_cb)
		s->close_cb(s->close_data);
}

static void on_timer_closed(uv_handle_t *h)
{
	struct crun_rdzv_etcd *s = h->data;

	if (--s->timers == 0)
		etcd_close(s->etcd, on_etcd_closed, s);
}

static void close_now(struct crun_rdzv_etcd *s)
{
	if (s->close_started)
		return;
	s->close_started = 1;
	s->timers = 6;
	uv_close((uv_handle_t *)&s->btimer, on_timer_closed);
	uv_close((uv_handle_t *)&s->evtimer, on_timer_closed);
	uv_close((uv_handle_t *)&s->mtimer, on_timer_closed);
	uv_close((uv_handle_t *)&s->wtimer, on_timer_closed);
	uv_close((uv_handle_t *)&s->ka, on_timer_closed);
	uv_close((uv_handle_t *)&s->restart, on_timer_closed);
}

static void on_close_timeout(uv_timer_t *t)
{
	close_now(t->data);
}

static void on_job_revoked(int status, json_t *resp, void *arg)
{
	(void)status;
	(void)resp;
	if (status != CRUN_ECANCELED)
		close_now(arg);
}

/* Any node left? If not, the job's keys go with its lease now. */
static void on_nodes_left(int status, json_t *resp, void *arg)
{
	struct crun_rdzv_etcd *s = arg;

	if (status == CRUN_ECANCELED)
		return;
	if (status == 0 && etcd_int(resp, "count") == 0 && *s->job &&
	    etcd_call(s->etcd, "/v3/lease/revoke",
		      json_pack("{s:s}", "ID", s->job), on_job_revoked, s) == 0)
		return;
	close_now(s);
}

static void on_node_revoked(int status, json_t *resp, void *arg)
{
	struct crun_rdzv_etcd *s = arg;
	char k[600], end[600];
	json_t *b;

	(void)resp;
	if (status == CRUN_ECANCELED)
		return;
	snprintf(k, sizeof(k), "%sn/", s->ns);
	etcd_prefix_end(k, end, sizeof(end));
	b = etcd_range_req(k, end);
	json_object_set_new(b, "count_only", json_true());
	if (etcd_call(s->etcd, "/v3/kv/range", b, on_nodes_left, s))
		close_now(s);
}

void rdzv_etcd_close(struct crun_rdzv_etcd *s, void (*cb)(void *data),
		     void *data)
{
	s->close_cb = cb;
	s->close_data = data;
	/* Pending requests fail now, while their owners still exist. */
	while (s->head)
		rdzv_etcd__reply(s->head, CRUN_ECANCELED, NULL);
	if (s->w)
		rdzv_etcd__reply(s->w, CRUN_ECANCELED, NULL);
	s->closing = 1;
	s->open_cb = NULL;
	if (s->stream) {
		etcd_req_cancel(s->stream);
		s->stream = NULL;
	}
	uv_timer_stop(&s->ka);
	uv_timer_stop(&s->restart);
	if (!*s->node || s->failed)
		return close_now(s);
	uv_timer_start(&s->mtimer, on_close_timeout, CLOSE_MS, 0);
	/*
	 * Writes already sent (a last one out's end marks, the "over" of
	 * the nodes left out) land before this node's lease goes: with it
	 * the job's keys may go, and a close would abort them.
	 */
	if (s->calls_out > 0)
		s->revoke_pending = 1;
	else
		rdzv_etcd__revoke_node(s);
}

/* Closing: this node's lease goes, then maybe the job's (bounded). */
void rdzv_etcd__revoke_node(struct crun_rdzv_etcd *s)
{
	if (etcd_call(s->etcd, "/v3/lease/revoke",
		      json_pack("{s:s}", "ID", s->node), on_node_revoked, s))
		close_now(s);
}

void rdzv_etcd_free(struct crun_rdzv_etcd *s)
{
	if (s == NULL)
		return;
	rdzv_etcd__cache_clear(s);
	json_decref(s->pending);
	etcd_free(s->etcd);
	free(s);
}

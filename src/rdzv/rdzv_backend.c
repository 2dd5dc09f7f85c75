/*
 * The rendezvous backend by name (rdzv_backend.h): the agents and `crun
 * status` open it through here, so both accept the same names, default to
 * the same ports, prefix and lease, and pass rdzv_conf on the same way.
 */
#include <stdio.h>
#include <string.h>

#include "crun/err.h"
#include "crun/rdzv_backend.h"

int rdzv_backend_kind(const char *name, char *why, size_t wlen)
{
	if (strcmp(name, "c10d") == 0)
		return RDZV_BACKEND_C10D;
	if (strcmp(name, "static") == 0)
		return RDZV_BACKEND_STATIC;
	if (strcmp(name, "etcd") == 0 || strcmp(name, "etcd-v3") == 0)
		return RDZV_BACKEND_ETCD;
	snprintf(why, wlen, "%s",
		 strcmp(name, "etcd-v2") == 0
		     ? "etcd-v2 speaks etcd's v2 API, which etcd 3.4 turns off "
		       "and 3.6 removes; use --rdzv_backend=etcd (the v3 API) "
		       "with the same endpoints"
		     : "expected static, c10d or etcd (alias etcd-v3)");
	return CRUN_EUSAGE;
}

/* etcd: every agent is a client of the cluster; nobody hosts anything. */
static int open_etcd(uv_loop_t *loop, const struct rdzv_backend_opts *o,
		     rdzv_etcd_open_cb cb, void *data,
		     struct crun_rdzv_etcd **re)
{
	const struct crun_rdzv_conf *c = o->conf;
	struct rdzv_etcd_opts eo;

	memset(&eo, 0, sizeof(eo));
	eo.endpoints = o->endpoint;
	eo.https = c->https;
	eo.cacert = c->cacert;
	eo.cert = c->cert;
	eo.key = c->key;
	eo.user = c->user;
	eo.password_file = c->password_file;
	eo.prefix = c->etcd_prefix ? c->etcd_prefix : RDZV_BACKEND_ETCD_PREFIX;
	eo.run_id = o->run_id ? o->run_id : "none";
	eo.lease_ttl = c->lease_ttl > 0 ? c->lease_ttl : RDZV_BACKEND_LEASE_TTL;
	eo.timeout = o->timeout;
	cfg_etcd_limits(c, &eo.lim);
	eo.readonly = o->readonly;
	eo.errmsg = o->errmsg;
	eo.errlen = o->errlen;
	return rdzv_etcd_open(loop, &eo, cb, data, re);
}

int rdzv_backend_open(uv_loop_t *loop, const struct rdzv_backend_opts *o,
		      rdzv_store_open_cb on_store, rdzv_etcd_open_cb on_etcd,
		      void *data, struct crun_rdzv_store **rs,
		      struct crun_rdzv_etcd **re)
{
	static const struct crun_rdzv_conf none;
	struct rdzv_backend_opts eo = *o;
	struct rdzv_store_opts so;
	char host[256];
	int port;

	if (eo.conf == NULL)
		eo.conf = &none;
	if (o->kind == RDZV_BACKEND_ETCD)
		return open_etcd(loop, &eo, on_etcd, data, re);
	if (cfg_split_endpoint(o->endpoint, host, sizeof(host), &port)) {
		snprintf(o->errmsg, o->errlen,
			 "invalid --rdzv_endpoint \"%s\": expected HOST[:PORT]",
			 o->endpoint);
		return CRUN_EUSAGE;
	}
	memset(&so, 0, sizeof(so));
	so.host = host;
	so.port = port >= 0			   ? port
		  : o->kind == RDZV_BACKEND_STATIC ? RDZV_BACKEND_STATIC_PORT
						   : RDZV_BACKEND_C10D_PORT;
	so.is_host = o->is_host;
	so.timeout_ms = (int)(1000 * o->timeout);
	so.limits = o->limits;
	so.auth = o->auth;
	so.job = o->run_id;
	so.errmsg = o->errmsg;
	so.errlen = o->errlen;
	return rdzv_store_open(loop, &so, on_store, data, rs);
}

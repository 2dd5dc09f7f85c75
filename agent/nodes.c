/*
 * The agent on several nodes (nodes.h): open the rendezvous backend (the
 * c10d/static store, hosted or reached, or etcd), start the rendezvous over it,
 * and act on how rounds end elsewhere. A worker failure anywhere ends the round
 * on every node; whether the group re-forms is decided job-wide
 * (rdzv_may_restart); a node stopped by a signal departs (the others
 * re-form while MIN holds) rather than ending the job, except the store
 * host, which ends it and serves the store until the others have left.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include <sodium.h>

#include "crun/rdzv_records.h"
#include "crun/auth.h"
#include "crun/err.h"
#include "crun/netif.h"
#include "crun/peers.h"
#include "crun/log.h"
#include "crun/rdzv_backend.h"
#include "crun/rdzv_etcd.h"
#include "crun/rdzv_store.h"
#include "envcheck.h"
#include "events.h"
#include "nodes.h"

struct nodes {
	struct nodes_opts o; /* o.stop, o.cfg: the agent's */
	struct crun_rdzv_store *rs;
	struct crun_rdzv_etcd *re; /* --rdzv_backend=etcd: no store host */
	struct crun_rdzv *rdzv;
	char *job_if_host;  /* without --rdzv_id: the run id, if we host */
	struct envcheck ec; /* --env_check: this node's fingerprint */
	char addr[256];	    /* this node's address for MASTER_ADDR */
	char ips[RDZV_MAX_FIELD + 1]; /* its interface addresses (peers.h) */
	int group_world_size;	      /* the round's, as it ended */
	int closing;
};

/* A word for an end kind, for the event log. */
static const char *rdzv_end_name(int kind)
{
	switch (kind) {
	case RDZV_END_FAILURE:
		return "failure";
	case RDZV_END_JOIN:
		return "node joining";
	case RDZV_END_DEAD:
		return "node lost";
	case RDZV_END_SUCCESS:
		return "node finished";
	case RDZV_END_FATAL:
		return "fatal";
	case RDZV_END_LOST:
		return "store lost";
	case RDZV_END_STALL:
		return "stall";
	}
	return "?";
}

/* Another node (or the store) ended the round: record it, report it. */
static void nodes_on_rdzv_end(struct crun_rdzv *r, const struct rdzv_end *e,
			      void *data)
{
	struct nodes *n = data;
	int kind = e->kind;
	const char *why = e->why;

	(void)r;
	events_emitf(n->o.ev, "crun.rdzv.ended", "{s:s, s:s}", "kind",
		     rdzv_end_name(kind), "reason", why);
	if (kind == RDZV_END_DEAD || kind == RDZV_END_JOIN)
		events_emitf(n->o.ev,
			     kind == RDZV_END_DEAD ? "crun.node.lost"
						   : "crun.node.joining",
			     "{s:s}", "reason", why);
	if (n->o.stop->peer.kind == 0) {
		struct peer_end *p = &n->o.stop->peer;

		p->kind = kind;
		p->status = e->status;
		p->signal = e->signal;
		snprintf(p->why, sizeof(p->why), "%s", why);
		snprintf(p->detail, sizeof(p->detail), "%s", e->detail);
	}
	n->o.ops->ended(n->o.data, e);
}

static int nodes_hosts_store(const struct nodes *n)
{
	return n->rs && rdzv_store_is_host(n->rs);
}

static void nodes_on_left(struct crun_rdzv *r, void *data)
{
	struct nodes *n = data;

	(void)r;
	n->o.ops->finish(n->o.data, n->o.stop->exit_status);
}

/* Leave the rendezvous (others learn we are done), then exit with status. */
static void nodes_leave(struct nodes *n, int status)
{
	n->o.stop->exit_status = status;
	n->o.stop->leaving = 1;
	if (rdzv_finish(n->rdzv, nodes_on_left, n))
		n->o.ops->finish(n->o.data, status);
}

/* A node stopped by a signal passes its signal's status on; else 1. */
static int peer_exit_status(const struct peer_end *p)
{
	return p->signal ? 128 + p->signal : 1;
}

static void nodes_on_may_restart(struct crun_rdzv *r, int ok, void *data)
{
	struct nodes *n = data;
	struct agent_stop *stop = n->o.stop;
	const struct crun_cfg *cfg = n->o.cfg;
	int kind = stop->peer.kind, status;

	if (ok) {
		events_emitf(n->o.ev, "crun.group.restarting", "{s:s, s:i}",
			     "after",
			     kind == RDZV_END_FAILURE ? "failure"
			     : kind == RDZV_END_STALL ? "stall"
						      : "membership",
			     "restarts_used", rdzv_restarts(r));
		n->o.ops->report(n->o.data, 0);
		if (kind == RDZV_END_FAILURE || kind == RDZV_END_STALL)
			log_say(
			    "re-forming the group: restart %d of %d after %s",
			    rdzv_restarts(r), cfg->max_restarts,
			    kind == RDZV_END_STALL ? "the job hung"
						   : "a worker failure");
		else if (kind == RDZV_END_DEAD &&
			 n->group_world_size - 1 < cfg->nnodes_min)
			log_say("re-forming the group (%s; a spare takes its "
				"place); no restart is spent",
				stop->peer.why);
		else
			log_say(
			    "re-forming the group (%s); no restart is spent",
			    kind == RDZV_END_JOIN ? "a new node joins"
						  : stop->peer.why);
		stop->peer.kind = 0;
		n->o.ops->join(n->o.data);
		return;
	}
	n->o.ops->report(n->o.data, 1);
	if (kind == RDZV_END_FAILURE) {
		/* The job's failure status: ours if we failed, else the peer's.
		 */
		status =
		    stop->own_status ? stop->own_status : stop->peer.status;
		if (status <= 0)
			status = 1;
		/* Restarts left, yet refused: a node had already finished. */
		log_say(
		    "job failed: %s; %s (--max_restarts=%d); exiting with "
		    "status %d",
		    stop->peer.detail,
		    rdzv_restarts(r) > cfg->max_restarts
			? "no restarts left"
			: "it cannot restart: another node already finished",
		    cfg->max_restarts, status);
	} else if (kind == RDZV_END_STALL) {
		status = 1;
		log_say(
		    "job failed: it hung (%s); %s (--max_restarts=%d); "
		    "exiting with status 1",
		    stop->peer.detail,
		    rdzv_restarts(r) > cfg->max_restarts
			? "no restarts left"
			: "it cannot restart: another node already finished",
		    cfg->max_restarts);
	} else if (kind == RDZV_END_SUCCESS) {
		status = 1;
		log_say("cannot restart: another node already finished");
	} else if (kind == RDZV_END_DEAD) {
		int left = n->group_world_size - 1;

		/* A signalled node passes its signal's status on. */
		status = peer_exit_status(&stop->peer);
		if (strcmp(cfg->rdzv_backend, "static") == 0)
			log_say("job stopped: %s; the static backend cannot "
				"re-form without it",
				stop->peer.why);
		else if (left < cfg->nnodes_min)
			log_say(
			    "job stopped: %s; %d node%s remain%s, below the "
			    "minimum of %d, and no spare waits to make it up",
			    stop->peer.why, left, left == 1 ? "" : "s",
			    left == 1 ? "s" : "", cfg->nnodes_min);
		else
			log_say(
			    "job stopped: %s; another node already finished",
			    stop->peer.why);
	} else {
		/* The store host stopped by a signal passes it on too. */
		status = peer_exit_status(&stop->peer);
		log_say("job stopped: %s", stop->peer.why);
	}
	if (kind == RDZV_END_LOST)
		n->o.ops->finish(n->o.data, status);
	else
		nodes_leave(n, status);
}

void nodes_round_end(struct nodes *n, int nf, int status, int group_world_size)
{
	struct agent_stop *stop = n->o.stop;
	char why[300];

	n->group_world_size = group_world_size;
	if (stop->reason == STOP_SIGNAL || stop->signal) {
		/*
		 * A departure, not the end of the job: the others re-form
		 * without us while MIN holds (a node loss, no restart spent).
		 * The store host cannot leave that way: it ends the job and
		 * serves the store until the others have left. A node that
		 * was signalled after another ended the round leaves too.
		 */
		if (nodes_hosts_store(n)) {
			snprintf(why, sizeof(why),
				 "the store host %s was stopped (%s)",
				 n->o.host, cfg_signame(stop->signal));
			rdzv_end_round(n->rdzv, RDZV_END_FATAL, why);
			nodes_leave(n, 128 + stop->signal);
			return;
		}
		if (stop->reason == STOP_SIGNAL) {
			snprintf(why, sizeof(why), "%s left (%s)", n->o.host,
				 cfg_signame(stop->signal));
			rdzv_end_round(n->rdzv, RDZV_END_DEAD, why);
		}
		stop->exit_status = 128 + stop->signal;
		if (rdzv_depart(n->rdzv, nodes_on_left, n))
			n->o.ops->finish(n->o.data, stop->exit_status);
		return;
	}
	if (nf == 0 && stop->reason == STOP_NONE) {
		n->o.ops->succeeded(n->o.data);
		nodes_leave(n, 0);
		return;
	}
	if (nf > 0)
		stop->own_status = status;
	if (stop->peer.kind == 0) {
		/* Our own failure; the watch reports it too, maybe later. */
		stop->peer.kind = RDZV_END_FAILURE;
		stop->peer.status = status;
		stop->peer.signal = 0;
		snprintf(stop->peer.why, sizeof(stop->peer.why),
			 "%d rank %d on %s", status, stop->failed_rank,
			 n->o.host);
		snprintf(stop->peer.detail, sizeof(stop->peer.detail),
			 "rank %d on %s", stop->failed_rank, n->o.host);
	}
	if (rdzv_may_restart(n->rdzv, stop->peer.kind, nodes_on_may_restart, n))
		nodes_on_may_restart(n->rdzv, 0, n);
}

/* The backend closed: n goes once nothing of it is left. */
static void nodes_maybe_free(struct nodes *n)
{
	if (n->rs || n->re)
		return;
	free(n->job_if_host);
	free(n);
}

static void nodes_on_rs_closed(void *data)
{
	struct nodes *n = data;

	rdzv_store_free(n->rs);
	n->rs = NULL;
	nodes_maybe_free(n);
}

static void nodes_on_re_closed(void *data)
{
	struct nodes *n = data;

	rdzv_etcd_free(n->re);
	n->re = NULL;
	nodes_maybe_free(n);
}

void nodes_close(struct nodes *n)
{
	if (n == NULL || n->closing)
		return;
	n->closing = 1;
	/* The rendezvous first: the store's pending replies then find it done.
	 */
	envcheck_attach(&n->ec, NULL); /* a read still going is dropped */
	if (n->rdzv) {
		rdzv_free(n->rdzv);
		n->rdzv = NULL;
	}
	if (n->rs)
		rdzv_store_close(n->rs, nodes_on_rs_closed, n);
	if (n->re)
		rdzv_etcd_close(n->re, nodes_on_re_closed, n);
	nodes_maybe_free(n);
}

struct crun_rdzv *nodes_rdzv(const struct nodes *n)
{
	return n ? n->rdzv : NULL;
}

const struct rdzv_kv_ops *nodes_kv(const struct nodes *n, void **kv)
{
	*kv = n == NULL ? NULL : n->rs ? (void *)n->rs : (void *)n->re;
	return n == NULL ? NULL
	       : n->rs	 ? &rdzv_store_ops
	       : n->re	 ? &rdzv_etcd_ops
			 : NULL;
}

struct crun_store_server *nodes_store_server(const struct nodes *n)
{
	return n && n->rs ? rdzv_store_server(n->rs) : NULL;
}

int nodes_store_client(const struct nodes *n, struct crun_store_aclient **out)
{
	return n && n->rs ? rdzv_store_client(n->rs, out) : CRUN_EUSAGE;
}

/* A node was left out of the rounds, or came back: one line, one event. */
static void nodes_on_exclusion(void *data, const struct rdzv_exclusion *x,
			       int readmitted, int self, const char *why)
{
	struct nodes *n = data;

	if (self)
		log_say("%s", why);
	else
		log_say("%s (%s) %s: %s", x->host, x->addr,
			readmitted ? "is back in the rounds"
				   : "is left out of the next rounds",
			why);
	events_emitf(
	    n->o.ev, readmitted ? "crun.node.readmitted" : "crun.node.excluded",
	    "{s:s, s:s, s:s, s:I, s:i, s:b}", "node_host", x->host, "node_addr",
	    x->addr, "reason", why, "until", (json_int_t)x->until,
	    "since_round", x->round, "self", self);
}

/* The backend is open: start the rendezvous over it. */
static int nodes_start_master(void *data, int round, int *port, int *by_worker)
{
	struct nodes *n = data;

	return n->o.ops->start_master(n->o.data, round, port, by_worker);
}

static void nodes_on_stacks(void *data, const char *nonce)
{
	struct nodes *n = data;

	n->o.ops->on_stacks(n->o.data, nonce);
}

static void nodes_rdzv_begin(struct nodes *n, const struct rdzv_kv_ops *ops,
			     void *kv, int is_host)
{
	struct crun_cfg *cfg = n->o.cfg;
	struct rdzv_opts o;
	int rc;

	if (is_host && cfg->rdzv_id == NULL) {
		/* The id the store was seeded with. */
		cfg->rdzv_id = n->job_if_host;
		n->job_if_host = NULL;
	}
	snprintf(n->addr, sizeof(n->addr), "%s",
		 cfg->local_addr ? cfg->local_addr : n->o.host);
	if (is_host && !cfg->local_addr) {
		char h[256];
		int port;

		/* Others reach the host the way they reach the endpoint. */
		if (cfg_split_endpoint(cfg->rdzv_endpoint, h, sizeof(h),
				       &port) == 0)
			snprintf(n->addr, sizeof(n->addr), "%s", h);
	}
	peers_own_addrs(n->ips, sizeof(n->ips));
	/*
	 * A name that does not resolve (containers, pods) cannot be the
	 * MASTER_ADDR of other hosts' workers: this node's first address is.
	 */
	if (!is_host && !cfg->local_addr && n->o.name_unresolved && *n->ips)
		snprintf(n->addr, sizeof(n->addr), "%.*s",
			 (int)strcspn(n->ips, ","), n->ips);
	memset(&o, 0, sizeof(o));
	o.run_id = cfg->rdzv_id;
	o.min_nodes = cfg->nnodes_min;
	o.max_nodes = cfg->nnodes_max;
	o.static_rank =
	    strcmp(cfg->rdzv_backend, "static") == 0 ? cfg->node_rank : -1;
	o.max_restarts = cfg->max_restarts;
	o.host = n->o.host;
	o.addr = n->addr;
	o.ips = n->ips;
	o.is_store_host = is_host;
	o.nproc = cfg->nproc_per_node;
	o.role = cfg->role;
	o.join_timeout = cfg->rdzv.join_timeout;
	o.last_call_timeout = cfg->rdzv.last_call_timeout;
	o.close_timeout = cfg->rdzv.close_timeout;
	if (cfg->slurm_agents > cfg->nnodes_min && o.static_rank < 0) {
		o.expect_first = cfg->slurm_agents < cfg->nnodes_max
				     ? cfg->slurm_agents
				     : cfg->nnodes_max;
		o.expect_why = cfg->slurm_agents_why;
	}
	o.keep_alive_interval = cfg->rdzv.keep_alive_interval;
	o.keep_alive_max_attempt = cfg->rdzv.keep_alive_max_attempt;
	o.heartbeat_timeout = cfg->rdzv.heartbeat_timeout;
	o.heartbeat_rate = (double)cfg->rdzv.heartbeat_rate;
	/* torchrun's static and etcd backends wait `timeout` for everyone. */
	if ((o.static_rank >= 0 || n->re) && cfg->rdzv.timeout > 0)
		o.join_timeout = cfg->rdzv.timeout;
	else if (cfg->rdzv.timeout > 0)
		log_say("rdzv_conf timeout is for the static and etcd backends "
			"(torchrun's "
			"c10d ignores it too); c10d waits join_timeout=%g s",
			cfg->rdzv.join_timeout);
	o.start_master = nodes_start_master;
	o.data = n;
	o.env_check = cfg->env_check;
	o.fingerprint_wait = envcheck_wait(&n->ec, cfg);
	o.exclude_after = cfg->rdzv.exclude_after;
	o.exclude_for = cfg->rdzv.exclude_for;
	o.on_exclusion = nodes_on_exclusion;
	o.on_stacks = nodes_on_stacks;
	if (n->re) {
		/*
		 * Node loss shows as lease expiry; missed heartbeat replies
		 * only mean etcd is failing over, which etcd.c rides out for
		 * read_timeout: they must not end the job before that.
		 */
		double span = cfg->rdzv.read_timeout + cfg->rdzv.lease_ttl;
		int tries = (int)(span / (o.keep_alive_interval > 0
					      ? o.keep_alive_interval
					      : 1)) +
			    1;

		if (tries > o.keep_alive_max_attempt)
			o.keep_alive_max_attempt = tries;
		if (o.heartbeat_timeout > 0 && o.heartbeat_timeout < span)
			o.heartbeat_timeout = span;
	}
	rc = rdzv_new(n->o.loop, &o, ops, kv, nodes_on_rdzv_end, &n->rdzv);
	if (rc) {
		log_say("cannot start the rendezvous: %s", crun_strerror(rc));
		n->o.ops->finish(n->o.data, 1);
		return;
	}
	envcheck_attach(&n->ec, n->rdzv);
	n->o.ops->join(n->o.data);
}

static void nodes_on_rs_open(struct crun_rdzv_store *rs, int status, void *data)
{
	struct nodes *n = data;

	if (status) {
		log_say("%s", rdzv_store_errmsg(rs));
		n->o.ops->finish(n->o.data, 1);
		return;
	}
	nodes_rdzv_begin(n, &rdzv_store_ops, rs, rdzv_store_is_host(rs));
}

static void nodes_on_re_open(struct crun_rdzv_etcd *re, int status, void *data)
{
	struct nodes *n = data;

	if (status) {
		log_say("%s", rdzv_etcd_errmsg(re));
		n->o.ops->finish(n->o.data, 1);
		return;
	}
	nodes_rdzv_begin(n, &rdzv_etcd_ops, re, 0);
}

/*
 * Multi-node: host or reach the rendezvous store (or, with etcd, be one more
 * client of the cluster), then join rounds (nodes_on_rs_open/re_open).
 */
int nodes_start(const struct nodes_opts *no, struct nodes **out)
{
	struct crun_cfg *cfg = no->cfg;
	struct nodes *n = calloc(1, sizeof(*n));
	struct rdzv_backend_opts o;
	struct crun_auth_key key;
	char host[256], errmsg[512] = "", why[256];
	int port, rc,
	    kind = rdzv_backend_kind(cfg->rdzv_backend, why, sizeof(why));

	*out = n;
	if (n == NULL)
		return UV_ENOMEM;
	n->o = *no;
	/* Computed while the backend opens (envcheck.h). */
	envcheck_start(&n->ec, n->o.loop, cfg);
	memset(&o, 0, sizeof(o));
	o.kind = kind;
	o.endpoint = cfg->rdzv_endpoint;
	o.conf = &cfg->rdzv;
	o.errmsg = errmsg;
	o.errlen = sizeof(errmsg);
	if (kind == RDZV_BACKEND_ETCD) {
		if (*cfg->rdzv_endpoint == '\0') {
			log_say("--rdzv_backend=etcd needs "
				"--rdzv_endpoint=HOST[:PORT],... naming etcd "
				"members");
			return CRUN_EUSAGE;
		}
		if (cfg->rdzv_id == NULL)
			cfg->rdzv_id = strdup("none"); /* torchrun's default */
		if (cfg->rdzv.secret_file)
			log_say("secret_file guards c10d's store; etcd is "
				"guarded by its own auth and TLS (user, "
				"password_file, cacert, cert, key)");
		o.run_id = cfg->rdzv_id;
		o.timeout = cfg->rdzv.read_timeout;
		rc = rdzv_backend_open(n->o.loop, &o, NULL, nodes_on_re_open, n,
				       NULL, &n->re);
		if (rc)
			log_say("%s", *errmsg ? errmsg : crun_strerror(rc));
		return rc;
	}
	if (kind < 0 || *cfg->rdzv_endpoint == '\0' ||
	    cfg_split_endpoint(cfg->rdzv_endpoint, host, sizeof(host), &port)) {
		log_say("multi-node runs need --rdzv_endpoint=HOST[:PORT] "
			"(c10d) or "
			"--master_addr/--master_port (static)");
		return CRUN_EUSAGE;
	}
	o.is_host = cfg->rdzv.is_host;
	if (o.is_host < 0 && kind == RDZV_BACKEND_STATIC)
		o.is_host = cfg->node_rank == 0;
	/* As torchrun's TCPStore client: give up reaching the host after
	 * read_timeout (and never later than the join deadline). */
	o.timeout = cfg->rdzv.read_timeout < cfg->rdzv.join_timeout
			? cfg->rdzv.read_timeout
			: cfg->rdzv.join_timeout;
	o.limits = &cfg->store;
	/* Without --rdzv_id the job is the host's: a fresh id if it is us. */
	if (cfg->rdzv_id == NULL &&
	    (n->job_if_host = nodes_run_id(n->o.host)) == NULL)
		return UV_ENOMEM;
	o.run_id = cfg->rdzv_id ? cfg->rdzv_id : n->job_if_host;
	if (cfg->rdzv.secret_file) { /* the rendezvous secret (auth.h) */
		rc = auth_key_load(cfg->rdzv.secret_file, &key, errmsg,
				   sizeof(errmsg));
		if (rc) {
			log_say("%s", errmsg);
			return CRUN_ECONFIG;
		}
		o.auth = &key;
	}
	rc = rdzv_backend_open(n->o.loop, &o, nodes_on_rs_open, NULL, n, &n->rs,
			       NULL);
	sodium_memzero(&key, sizeof(key));
	if (rc)
		log_say("%s", *errmsg ? errmsg : crun_strerror(rc));
	return rc;
}

/* A unique run id: torchrun's default "none" makes unrelated jobs collide. */
char *nodes_run_id(const char *host)
{
	unsigned char rnd[6];
	char buf[128];

	memset(rnd, 0, sizeof(rnd));
	if (getrandom(rnd, sizeof(rnd), GRND_NONBLOCK) != (ssize_t)sizeof(rnd))
		rnd[0] = (unsigned char)getpid();
	snprintf(buf, sizeof(buf), "crun-%.32s-%02x%02x%02x%02x%02x%02x", host,
		 rnd[0], rnd[1], rnd[2], rnd[3], rnd[4], rnd[5]);
	return strdup(buf);
}

/*
 * The agent on several nodes: open the rendezvous backend (the c10d/static
 * store, hosted or reached, or etcd), start the rendezvous over it, and act
 * on how rounds end elsewhere. A worker failure anywhere ends the round on
 * every node; whether the group re-forms is decided job-wide
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

#include "crun/auth.h"
#include "crun/err.h"
#include "crun/netif.h"
#include "crun/rdzv_backend.h"
#include "agent.h"
#include "envcheck.h"
#include "events.h"
#include "metrics.h"

/*
 * The signal to stop our workers with when another node ended the round: a
 * node that left because it was signalled (its end names SIGUSR1) passes its
 * signal on, if we forward that one too, so a preemption warning reaches every
 * worker whichever node heard it first; otherwise SIGTERM.
 */
static int peer_signal(const struct agent *a, const struct rdzv_end *e)
{
	int sig = e->signal;

	for (int i = 0; i < a->cfg->nsignals && sig; i++)
		if (a->cfg->signals[i] == sig)
			return sig;
	return SIGTERM;
}

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

/* Another node (or the store) ended the round: stop our workers too. */
static void agent_on_rdzv_end(struct crun_rdzv *r, const struct rdzv_end *e,
			      void *data)
{
	struct agent *a = data;
	int kind = e->kind;
	const char *why = e->why;

	(void)r;
	events_emitf(a->ev, "crun.rdzv.ended", "{s:s, s:s}", "kind",
		     rdzv_end_name(kind), "reason", why);
	if (kind == RDZV_END_DEAD)
		metrics_note_node_lost(a->metrics);
	if (kind == RDZV_END_FAILURE)
		metrics_note_failure(a->metrics, e->status, worker_wall_time(),
				     0);
	if (kind == RDZV_END_DEAD || kind == RDZV_END_JOIN)
		events_emitf(a->ev,
			     kind == RDZV_END_DEAD ? "crun.node.lost"
						   : "crun.node.joining",
			     "{s:s}", "reason", why);
	if (a->stop.peer.kind == 0) {
		struct peer_end *p = &a->stop.peer;

		p->kind = kind;
		p->status = e->status;
		p->signal = e->signal;
		snprintf(p->why, sizeof(p->why), "%s", why);
		snprintf(p->detail, sizeof(p->detail), "%s", e->detail);
	}
	if (kind == RDZV_END_STALL) {
		/* Every node names where its ranks are, then stops them. */
		agent__stall_stop(a, why);
	} else if (a->state == A_RUNNING) {
		log_say("round %d ended: %s", a->res.round,
			kind == RDZV_END_FAILURE
			    ? "a worker failed on another node"
			    : why);
		agent__stop_group(a, STOP_PEER, peer_signal(a, e));
	}
}

int agent__hosts_store(const struct agent *a)
{
	return a->rs && rdzv_store_is_host(a->rs);
}

static void agent_on_left(struct crun_rdzv *r, void *data)
{
	struct agent *a = data;

	(void)r;
	agent__finish(a, a->stop.exit_status);
}

/* Leave the rendezvous (others learn we are done), then exit with status. */
static void agent_leave(struct agent *a, int status)
{
	a->stop.exit_status = status;
	a->stop.leaving = 1;
	if (rdzv_finish(a->rdzv, agent_on_left, a))
		agent__finish(a, status);
}

/* A node stopped by a signal passes its signal's status on; else 1. */
static int peer_exit_status(const struct peer_end *p)
{
	return p->signal ? 128 + p->signal : 1;
}

static void agent_on_may_restart(struct crun_rdzv *r, int ok, void *data)
{
	struct agent *a = data;
	int kind = a->stop.peer.kind, status;

	if (ok) {
		events_emitf(a->ev, "crun.group.restarting", "{s:s, s:i}",
			     "after",
			     kind == RDZV_END_FAILURE ? "failure"
			     : kind == RDZV_END_STALL ? "stall"
						      : "membership",
			     "restarts_used", rdzv_restarts(r));
		agent__drop_report(a, 0);
		if (kind == RDZV_END_FAILURE || kind == RDZV_END_STALL)
			log_say(
			    "re-forming the group: restart %d of %d after %s",
			    rdzv_restarts(r), a->cfg->max_restarts,
			    kind == RDZV_END_STALL ? "the job hung"
						   : "a worker failure");
		else
			log_say(
			    "re-forming the group (%s); no restart is spent",
			    kind == RDZV_END_JOIN ? "a new node joins"
						  : a->stop.peer.why);
		a->stop.peer.kind = 0;
		agent__round_start(a);
		return;
	}
	agent__drop_report(a, 1);
	if (kind == RDZV_END_FAILURE) {
		/* The job's failure status: ours if we failed, else the peer's.
		 */
		status = a->stop.own_status ? a->stop.own_status
					    : a->stop.peer.status;
		if (status <= 0)
			status = 1;
		/* Restarts left, yet refused: a node had already finished. */
		log_say(
		    "job failed: %s; %s (--max_restarts=%d); exiting with "
		    "status %d",
		    a->stop.peer.detail,
		    rdzv_restarts(r) > a->cfg->max_restarts
			? "no restarts left"
			: "it cannot restart: another node already finished",
		    a->cfg->max_restarts, status);
	} else if (kind == RDZV_END_STALL) {
		status = 1;
		log_say(
		    "job failed: it hung (%s); %s (--max_restarts=%d); "
		    "exiting with status 1",
		    a->stop.peer.detail,
		    rdzv_restarts(r) > a->cfg->max_restarts
			? "no restarts left"
			: "it cannot restart: another node already finished",
		    a->cfg->max_restarts);
	} else if (kind == RDZV_END_SUCCESS) {
		status = 1;
		log_say("cannot restart: another node already finished");
	} else if (kind == RDZV_END_DEAD) {
		int left = a->res.ranks.group_world_size - 1;

		/* A signalled node passes its signal's status on. */
		status = peer_exit_status(&a->stop.peer);
		if (strcmp(a->cfg->rdzv_backend, "static") == 0)
			log_say("job stopped: %s; the static backend cannot "
				"re-form without it",
				a->stop.peer.why);
		else if (left < a->cfg->nnodes_min)
			log_say(
			    "job stopped: %s; %d node%s remain%s, below the "
			    "minimum of %d",
			    a->stop.peer.why, left, left == 1 ? "" : "s",
			    left == 1 ? "s" : "", a->cfg->nnodes_min);
		else
			log_say(
			    "job stopped: %s; another node already finished",
			    a->stop.peer.why);
	} else {
		/* The store host stopped by a signal passes it on too. */
		status = peer_exit_status(&a->stop.peer);
		log_say("job stopped: %s", a->stop.peer.why);
	}
	if (kind == RDZV_END_LOST)
		agent__finish(a, status);
	else
		agent_leave(a, status);
}

void agent__multi_round_end(struct agent *a, int nf, int status)
{
	char why[300];

	if (a->stop.reason == STOP_SIGNAL || a->stop.signal) {
		/*
		 * A departure, not the end of the job: the others re-form
		 * without us while MIN holds (a node loss, no restart spent).
		 * The store host cannot leave that way: it ends the job and
		 * serves the store until the others have left. A node that
		 * was signalled after another ended the round leaves too.
		 */
		if (agent__hosts_store(a)) {
			snprintf(why, sizeof(why),
				 "the store host %s was stopped (%s)", a->host,
				 cfg_signame(a->stop.signal));
			rdzv_end_round(a->rdzv, RDZV_END_FATAL, why);
			agent_leave(a, 128 + a->stop.signal);
			return;
		}
		if (a->stop.reason == STOP_SIGNAL) {
			snprintf(why, sizeof(why), "%s left (%s)", a->host,
				 cfg_signame(a->stop.signal));
			rdzv_end_round(a->rdzv, RDZV_END_DEAD, why);
		}
		a->stop.exit_status = 128 + a->stop.signal;
		if (rdzv_depart(a->rdzv, agent_on_left, a))
			agent__finish(a, a->stop.exit_status);
		return;
	}
	if (nf == 0 && a->stop.reason == STOP_NONE) {
		agent__say_success(a);
		agent_leave(a, 0);
		return;
	}
	if (nf > 0)
		a->stop.own_status = status;
	if (a->stop.peer.kind == 0) {
		/* Our own failure; the watch reports it too, maybe later. */
		a->stop.peer.kind = RDZV_END_FAILURE;
		a->stop.peer.status = status;
		a->stop.peer.signal = 0;
		snprintf(a->stop.peer.why, sizeof(a->stop.peer.why),
			 "%d rank %d on %s", status, a->stop.failed_rank,
			 a->host);
		snprintf(a->stop.peer.detail, sizeof(a->stop.peer.detail),
			 "rank %d on %s", a->stop.failed_rank, a->host);
	}
	if (rdzv_may_restart(a->rdzv, a->stop.peer.kind, agent_on_may_restart,
			     a))
		agent_on_may_restart(a->rdzv, 0, a);
}

static void agent_on_rs_closed(void *data)
{
	struct agent *a = data;

	rdzv_store_free(a->rs);
	a->rs = NULL;
}

static void agent_on_re_closed(void *data)
{
	struct agent *a = data;

	rdzv_etcd_free(a->re);
	a->re = NULL;
}

/* Close the rendezvous and the backend it runs over. */
void agent__close_backend(struct agent *a)
{
	/* The rendezvous first: the store's pending replies then find it done.
	 */
	agent__stacks_close(a);
	if (a->rdzv) {
		envcheck_attach(&a->ec, NULL);
		rdzv_free(a->rdzv);
		a->rdzv = NULL;
	}
	if (a->rs)
		rdzv_store_close(a->rs, agent_on_rs_closed, a);
	if (a->re)
		rdzv_etcd_close(a->re, agent_on_re_closed, a);
}

/* A node was left out of the rounds, or came back: one line, one event. */
static void agent_on_exclusion(void *data, const struct rdzv_exclusion *x,
			       int readmitted, int self, const char *why)
{
	struct agent *a = data;

	if (self)
		log_say("%s", why);
	else
		log_say("%s (%s) %s: %s", x->host, x->addr,
			readmitted ? "is back in the rounds"
				   : "is left out of the next rounds",
			why);
	events_emitf(
	    a->ev, readmitted ? "crun.node.readmitted" : "crun.node.excluded",
	    "{s:s, s:s, s:s, s:I, s:i, s:b}", "node_host", x->host, "node_addr",
	    x->addr, "reason", why, "until", (json_int_t)x->until,
	    "since_round", x->round, "self", self);
}

/* The backend is open: start the rendezvous over it. */
static void agent_rdzv_begin(struct agent *a, const struct rdzv_kv_ops *ops,
			     void *kv, int is_host)
{
	struct crun_cfg *cfg = a->cfg;
	struct rdzv_opts o;
	int rc;

	if (is_host && cfg->rdzv_id == NULL) {
		/* The id the store was seeded with. */
		cfg->rdzv_id = a->job_if_host;
		a->job_if_host = NULL;
	}
	snprintf(a->addr, sizeof(a->addr), "%s",
		 cfg->local_addr ? cfg->local_addr : a->host);
	if (is_host && !cfg->local_addr) {
		char h[256];
		int port;

		/* Others reach the host the way they reach the endpoint. */
		if (cfg_split_endpoint(cfg->rdzv_endpoint, h, sizeof(h),
				       &port) == 0)
			snprintf(a->addr, sizeof(a->addr), "%s", h);
	}
	peers_own_addrs(a->ips, sizeof(a->ips));
	/*
	 * A name that does not resolve (containers, pods) cannot be the
	 * MASTER_ADDR of other hosts' workers: this node's first address is.
	 */
	if (!is_host && !cfg->local_addr && a->name_unresolved && *a->ips)
		snprintf(a->addr, sizeof(a->addr), "%.*s",
			 (int)strcspn(a->ips, ","), a->ips);
	memset(&o, 0, sizeof(o));
	o.run_id = cfg->rdzv_id;
	o.min_nodes = cfg->nnodes_min;
	o.max_nodes = cfg->nnodes_max;
	o.static_rank =
	    strcmp(cfg->rdzv_backend, "static") == 0 ? cfg->node_rank : -1;
	o.max_restarts = cfg->max_restarts;
	o.host = a->host;
	o.addr = a->addr;
	o.ips = a->ips;
	o.is_store_host = is_host;
	o.nproc = cfg->nproc_per_node;
	o.role = cfg->role;
	o.join_timeout = cfg->rdzv.join_timeout;
	o.last_call_timeout = cfg->rdzv.last_call_timeout;
	o.close_timeout = cfg->rdzv.close_timeout;
	o.keep_alive_interval = cfg->rdzv.keep_alive_interval;
	o.keep_alive_max_attempt = cfg->rdzv.keep_alive_max_attempt;
	o.heartbeat_timeout = cfg->rdzv.heartbeat_timeout;
	o.heartbeat_rate = (double)cfg->rdzv.heartbeat_rate;
	/* torchrun's static and etcd backends wait `timeout` for everyone. */
	if ((o.static_rank >= 0 || a->re) && cfg->rdzv.timeout > 0)
		o.join_timeout = cfg->rdzv.timeout;
	else if (cfg->rdzv.timeout > 0)
		log_say("rdzv_conf timeout is for the static and etcd backends "
			"(torchrun's "
			"c10d ignores it too); c10d waits join_timeout=%g s",
			cfg->rdzv.join_timeout);
	o.start_master = agent__start_master;
	o.data = a;
	o.env_check = cfg->env_check;
	o.fingerprint_wait = envcheck_wait(&a->ec, cfg);
	o.exclude_after = cfg->rdzv.exclude_after;
	o.exclude_for = cfg->rdzv.exclude_for;
	o.on_exclusion = agent_on_exclusion;
	o.on_stacks = agent__on_stacks;
	if (a->re) {
		/*
		 * Node loss shows as lease expiry; missed heartbeat replies
		 * only mean etcd is failing over, which etcd.c rides out for
		 * read_timeout: they must not end the job before that.
		 */
		double span = cfg->rdzv.read_timeout + cfg->rdzv.lease_ttl;
		int n = (int)(span / (o.keep_alive_interval > 0
					  ? o.keep_alive_interval
					  : 1)) +
			1;

		if (n > o.keep_alive_max_attempt)
			o.keep_alive_max_attempt = n;
		if (o.heartbeat_timeout > 0 && o.heartbeat_timeout < span)
			o.heartbeat_timeout = span;
	}
	rc = rdzv_new(&a->loop, &o, ops, kv, agent_on_rdzv_end, &a->rdzv);
	if (rc) {
		log_say("cannot start the rendezvous: %s", crun_strerror(rc));
		agent__finish(a, 1);
		return;
	}
	envcheck_attach(&a->ec, a->rdzv);
	agent__round_start(a);
}

static void agent_on_rs_open(struct crun_rdzv_store *rs, int status, void *data)
{
	struct agent *a = data;

	if (status) {
		log_say("%s", rdzv_store_errmsg(rs));
		agent__finish(a, 1);
		return;
	}
	agent_rdzv_begin(a, &rdzv_store_ops, rs, rdzv_store_is_host(rs));
}

static void agent_on_re_open(struct crun_rdzv_etcd *re, int status, void *data)
{
	struct agent *a = data;

	if (status) {
		log_say("%s", rdzv_etcd_errmsg(re));
		agent__finish(a, 1);
		return;
	}
	agent_rdzv_begin(a, &rdzv_etcd_ops, re, 0);
}

/*
 * Multi-node: host or reach the rendezvous store (or, with etcd, be one more
 * client of the cluster), then join rounds (agent_on_rs_open/re_open).
 */
int agent__multi_start(struct agent *a)
{
	struct crun_cfg *cfg = a->cfg;
	struct rdzv_backend_opts o;
	struct crun_auth_key key;
	char host[256], errmsg[512] = "", why[256];
	int port, rc,
	    kind = rdzv_backend_kind(cfg->rdzv_backend, why, sizeof(why));

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
		rc = rdzv_backend_open(&a->loop, &o, NULL, agent_on_re_open, a,
				       NULL, &a->re);
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
	    (a->job_if_host = agent__run_id(a->host)) == NULL)
		return UV_ENOMEM;
	o.run_id = cfg->rdzv_id ? cfg->rdzv_id : a->job_if_host;
	if (cfg->rdzv.secret_file) { /* the rendezvous secret (auth.h) */
		rc = auth_key_load(cfg->rdzv.secret_file, &key, errmsg,
				   sizeof(errmsg));
		if (rc) {
			log_say("%s", errmsg);
			return CRUN_ECONFIG;
		}
		o.auth = &key;
	}
	rc = rdzv_backend_open(&a->loop, &o, agent_on_rs_open, NULL, a, &a->rs,
			       NULL);
	sodium_memzero(&key, sizeof(key));
	if (rc)
		log_say("%s", *errmsg ? errmsg : crun_strerror(rc));
	return rc;
}

/* A unique run id: torchrun's default "none" makes unrelated jobs collide. */
char *agent__run_id(const char *host)
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

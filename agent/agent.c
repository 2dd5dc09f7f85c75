/*
 * The agent: the owner of the worker-group lifecycle of one node, on one
 * libuv loop.
 *
 *   ROUND ──(rendezvous done)──> RUNNING ──(a worker fails, a signal, a
 *   membership change)──> STOPPING ──(every worker reaped)──> ROUND or DONE
 *
 * RUNNING ends on the first worker failure: the agent sends the stop signal
 * to every worker's process group and arms a timer that sends SIGKILL after
 * --shutdown_timeout. When the last worker is reaped the round is judged:
 * restart (a fresh round, TORCHELASTIC_RESTART_COUNT + 1) while restarts are
 * left, else print the root cause and exit with the failed worker's status.
 * Signals only record intent and start the same stop sequence; a second
 * SIGINT escalates to SIGKILL at once. A worker that cannot start fails the
 * round like one that exited 127. On several nodes, a node stopped by a
 * signal departs (the others re-form while MIN holds) rather than ending the
 * job (nodes.c); a store host whose workers are done keeps serving the
 * others through a warning (SIGUSR1), not through SIGTERM, SIGINT, SIGHUP or
 * SIGQUIT.
 *
 * This file alone holds the state machine and struct agent. Its parts and
 * leaves, each with its own header, struct and prefix, are called downward
 * only and report back through the callbacks they were created with:
 *
 *   nodes.c      several nodes: the rendezvous backend, the rendezvous, how
 *                a round that ended decides the job (stop.h: the record it
 *                shares with this file)
 *   workstore.c  the workers' store of a round (its port, who may reach
 *                it, whether their torch accepts it), this node's relay
 *   logs.c       log directories, failure reports, the error file, the
 *                console as log.h's sink
 *   hang.c       a hung job (--stall_timeout): every rank's place, said once
 *   livestacks.c `crun status --stacks`: this node's live stacks, answered
 *   pool.c       the workers of a round: start, signal, kill timer, done
 *                count; worker.c one worker, stream.c one output stream,
 *                group.c a worker's process group after it exited
 *   stacks.c     workers' stacks (py-spy, faulthandler, /proc)
 *   initdiag.c   which ranks do not reach the workers' store, and why
 *   envcheck.c   this node's environment fingerprint (--env_check)
 *   stall.c      whether any rank progresses (progress.c: from /proc)
 *   metrics.c, events.c, filetimer.c, console.c, netcheck.c, nofile.c,
 *   torchprobe.c
 *
 * agent_run.h is the one entry the launcher calls.
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "crun/binding.h"
#include "crun/cfg.h"
#include "crun/err.h"
#include "crun/log.h"
#include "crun/netif.h"
#include "crun/rdzv.h"
#include "crun/rdzv_etcd.h"
#include "crun/report.h"
#include "agent_run.h"
#include "console.h"
#include "envcheck.h"
#include "events.h"
#include "filetimer.h"
#include "hang.h"
#include "initdiag.h"
#include "livestacks.h"
#include "logs.h"
#include "metrics.h"
#include "netcheck.h"
#include "nodes.h"
#include "nofile.h"
#include "pool.h"
#include "stall.h"
#include "stop.h"
#include "workstore.h"

struct agent {
	uv_loop_t loop;
	struct crun_cfg *cfg;
	char host[256];
	int multi;	     /* several nodes */
	int name_unresolved; /* the host name does not resolve */
	double started;
	struct crun_procs *procs;
	struct crun_binding_plan *binding; /* NULL: workers inherit ours */
	struct console *console; /* our stdout and stderr, never blocking */
	struct {
		uv_signal_t h[33]; /* those forwarded to the workers */
		int n;
		uv_signal_t winch; /* the console's window size changed */
	} sig;
	enum agent_state state;
	struct agent_stop stop;
	int restart_count;	   /* alone: the restarts spent */
	struct rdzv_result res;	   /* the round's ranks and store */
	struct worker_round round; /* ... as its workers get them */
	struct pool pool;	   /* the round's workers */
	struct nodes *nodes;	   /* several nodes (nodes.h), or NULL */
	struct workstore ws; /* the workers' store of the round, the relay */
	struct logs logs;    /* log directories, failure reports (logs.h) */
	/* What watches the job, each from its option, or NULL. */
	struct {
		struct events *ev;	   /* --event_log */
		struct metrics *metrics;   /* --metrics_port */
		struct initdiag *diag;	   /* --init_warn_after */
		struct stall *stall;	   /* --stall_timeout */
		struct hang *hang;	   /* a hang being reported */
		struct livestacks *stacks; /* crun status --stacks, answering */
		struct filetimer *ft;	   /* TORCHELASTIC_ENABLE_FILE_TIMER */
	} watch;
};

/* Console bytes queued for a slow reader (--console_buffer's default). */
#define CONSOLE_LIMIT (4u << 20)
/* At exit, how long a console reader may take no byte before crun gives up. */
#define CONSOLE_STALL_MS 10000

static int agent_start_metrics(struct agent *a);
static void agent_round_start(struct agent *a);
static void agent_finish(struct agent *a, int status);
static int agent_start_master(void *data, int round, int *port, int *by_worker);
static void agent_on_relay_lost(void *data, const char *up, int status);

/* Each worker's cpus and memory nodes, said and logged as it starts. */
static void agent_report_binding(struct agent *a, int i, int rank)
{
	const struct crun_binding *b;
	char line[512];

	if (a->binding == NULL || i >= a->binding->n)
		return;
	b = &a->binding->w[i];
	if (a->cfg->verbose) {
		binding_describe(a->binding, i, line, sizeof(line));
		log_say("rank %d %s", rank, line);
	}
	events_emitf(a->watch.ev, "crun.worker_binding",
		     "{s:i, s:i, s:s, s:s, s:s, s:s, s:i, s:b}", "local_rank",
		     i, "rank", rank, "mode",
		     binding_mode_name(a->binding->mode), "cpus", b->cpus_list,
		     "numa", b->nodes_list, "memory", binding_mpol_name(b),
		     "gpu", b->gpu, "fallback", b->fallback);
}

/* --- stopping ----------------------------------------------------------- */

/* Stop the running group: sig now, SIGKILL after the shutdown timeout. */
static void agent_stop_group(struct agent *a, enum stop_reason why, int sig)
{
	if (a->state != A_RUNNING)
		return;
	initdiag_stop(a->watch.diag);
	stall_stop(a->watch.stall, 0);
	a->state = A_STOPPING;
	a->stop.reason = why;
	events_emitf(a->watch.ev, "crun.group.stopping", "{s:s, s:s}", "reason",
		     why == STOP_FAILURE  ? "worker failed"
		     : why == STOP_SIGNAL ? "signal"
		     : why == STOP_STALL  ? "stall"
					  : "round ended elsewhere",
		     /* 0: SIGTERM once the stacks are taken */
		     "signal", cfg_signame(sig ? sig : SIGTERM));
	pool_stop(&a->pool, sig);
}

static void agent_on_winch(uv_signal_t *h, int sig)
{
	struct agent *a = h->data;

	pool_winch(&a->pool);
}

/* torchrun's default signals to handle ask to stop; others (SIGUSR1) warn. */
static int asks_to_stop(int sig)
{
	return sig == SIGTERM || sig == SIGINT || sig == SIGHUP ||
	       sig == SIGQUIT || PROC_FROM_CONSOLE(sig);
}

static void agent_on_signal(uv_signal_t *h, int sig)
{
	struct agent *a = h->data;
	int first;

	if (a->state == A_DONE)
		return;
	if (sig == SIGINT && a->stop.sigint_seen && a->pool.n > 0) {
		log_say("second SIGINT: killing the workers now");
		pool_signal(&a->pool, SIGKILL);
		return;
	}
	if (sig == SIGINT)
		a->stop.sigint_seen = 1;
	first = a->stop.signal == 0;
	if (first)
		a->stop.signal = sig;
	if (a->state == A_RUNNING && !a->stop.leaving) {
		log_say("received %s: %s", cfg_signame(sig),
			PROC_FROM_CONSOLE(sig)
			    ? "the workers have it from the console too"
			    : "forwarding it to the workers");
		agent_stop_group(a, STOP_SIGNAL, sig);
	} else if (a->state == A_STOPPING && a->pool.n > 0) {
		pool_signal(&a->pool, sig);
	} else if (a->stop.leaving && nodes_rdzv(a->nodes) &&
		   rdzv_serving(nodes_rdzv(a->nodes)) && !asks_to_stop(sig)) {
		/* A warning (SLURM's --signal=USR1@T reaches every process of
		 * the step, a worker possibly before its crun): the others
		 * still need the store to pass theirs on. */
		if (first)
			a->stop.exit_status = 128 + sig;
		log_say("received %s while the other nodes finish: serving the "
			"store until they have left (at most close_timeout, "
			"%g s, after this node's workers ended)",
			cfg_signame(sig), a->cfg->rdzv.close_timeout);
	} else if (a->state == A_STOPPING || a->stop.leaving) {
		/* Workers gone, waiting for other nodes to leave: stop waiting.
		 */
		log_say(
		    "received %s while waiting for the other nodes to leave: "
		    "exiting",
		    cfg_signame(sig));
		agent_finish(a, 128 + a->stop.signal);
	} else {
		log_say("received %s before the workers started: exiting",
			cfg_signame(sig));
		agent_finish(a, 128 + sig);
	}
}

/* --- a hung job (stall.h finds it, hang.h names it) --------------------- */

/* The hang is reported: now the workers of generation gen may be stopped. */
static void agent_on_hang_done(int gen, void *data)
{
	struct agent *a = data;

	a->watch.hang = NULL;
	if (a->state == A_STOPPING && a->pool.n > 0 && a->res.round == gen)
		pool_signal(&a->pool, SIGTERM);
}

/*
 * The job is hung (why: one line): mark the group stopping without a
 * signal (a worker the dump kills counts as stopped, not failed), take
 * every rank's stack, and signal the workers once the hang is said.
 */
static void agent_stall_stop(struct agent *a, const char *why)
{
	struct crun_rdzv *rdzv = nodes_rdzv(a->nodes);
	const char *script = a->cfg->argc > 0 ? a->cfg->argv[0] : NULL;
	struct hang_opts o = {&a->loop,
			      a->host,
			      a->cfg->module ? NULL : script,
			      !a->cfg->no_python,
			      a->watch.ev,
			      agent_on_hang_done,
			      a};
	struct hang_round r;

	if (a->state != A_RUNNING)
		return;
	if (strncmp(why, "stall: ", 7) == 0)
		why += 7;
	log_say("job hung: %s; taking every rank's stack", why);
	events_emitf(a->watch.ev, "crun.job.hung", "{s:s}", "reason", why);
	metrics_note_stall(a->watch.metrics);
	agent_stop_group(a, a->multi ? STOP_PEER : STOP_STALL, 0);
	memset(&r, 0, sizeof(r));
	r.pids = a->pool.pids;
	r.nproc = a->pool.n;
	r.base_rank = a->round.ranks.base_rank;
	r.gen = a->res.round;
	if (a->multi && rdzv) {
		r.ops = nodes_kv(a->nodes, &r.kv);
		r.run_id = a->res.run_id;
		r.round = rdzv_round(rdzv);
		r.group_rank = a->res.ranks.group_rank;
		r.group_world_size = a->res.ranks.group_world_size;
		r.world_size = a->res.ranks.world_size;
	}
	if (hang_start(&o, &r, &a->watch.hang))
		pool_signal(&a->pool, SIGTERM);
}

/* The detector found no rank progressing: alone, stop; else end the round
 * for every node (each one then reaches agent_stall_stop). */
static void agent_on_hung(struct stall *s, const char *why, void *data)
{
	struct agent *a = data;
	char text[200];

	(void)s;
	if (a->state != A_RUNNING)
		return;
	if (!a->multi)
		return agent_stall_stop(a, why);
	/* The end's reason names it for `crun status` and the logs. */
	snprintf(text, sizeof(text), "stall: %s", why);
	rdzv_end_round(nodes_rdzv(a->nodes), RDZV_END_STALL, text);
}

/* The round's workers started: watch their progress. */
static void agent_stall_start(struct agent *a)
{
	struct crun_rdzv *rdzv = nodes_rdzv(a->nodes);
	struct stall_round r;
	char prefix[300];

	memset(&r, 0, sizeof(r));
	r.pids = a->pool.pids;
	r.nproc = a->pool.n;
	if (a->multi && rdzv) {
		r.ops = nodes_kv(a->nodes, &r.kv);
		snprintf(prefix, sizeof(prefix), "crun/%s/r%d/", a->res.run_id,
			 rdzv_round(rdzv));
		r.prefix = prefix;
		r.group_rank = a->res.ranks.group_rank;
		r.group_world_size = a->res.ranks.group_world_size;
		r.report_every = a->cfg->rdzv.keep_alive_interval;
	}
	stall_start(a->watch.stall, &r);
}

/* --- rounds ------------------------------------------------------------- */

static void agent_on_worker_exit(struct pool *p, struct worker *w, void *data)
{
	struct agent *a = data;
	char why[400];

	events_emitf(a->watch.ev,
		     w->status == 0 ? "torchelastic.worker.status.SUCCEEDED"
		     : w->stopped && w->signal
			 ? "torchelastic.worker.status.STOPPED"
			 : "torchelastic.worker.status.FAILED",
		     "{s:i, s:i, s:i, s:i, s:s?}", "local_rank", w->local_rank,
		     "rank", a->round.ranks.base_rank + w->local_rank, "pid",
		     (int)w->pid, "exitcode", w->status, "signal",
		     w->signal ? cfg_signame(w->signal) : NULL);
	if (a->watch.hang) {
		/* faulthandler's dump is the end of its stderr */
		char *t = (worker_tail_from_file(w), tail_lines(&w->tail, 400));

		hang_exited(a->watch.hang, w->local_rank, t, t ? strlen(t) : 0);
		free(t);
	}
	if (w->status != 0 && !w->stopped)
		metrics_note_failure(a->watch.metrics, w->status, w->exit_time,
				     1);
	if (a->state != A_RUNNING || w->status == 0)
		return;
	agent_stop_group(a, STOP_FAILURE, SIGTERM);
	if (a->multi) {
		/* Every node stops now, not after a collective times out. */
		snprintf(why, sizeof(why),
			 "%d rank %d (local rank %d) on %s exited with %d",
			 w->status, a->round.ranks.base_rank + w->local_rank,
			 w->local_rank, a->host, w->status);
		rdzv_end_round(nodes_rdzv(a->nodes), RDZV_END_FAILURE, why);
	}
}

/* One summary line after every worker of this node succeeded. */
static void agent_say_success(struct agent *a)
{
	log_say(
	    "%d worker%s of %s succeeded (ranks %d-%d of %d, generation %d, "
	    "%.2f s)",
	    a->cfg->nproc_per_node, a->cfg->nproc_per_node == 1 ? "" : "s",
	    a->host, a->round.ranks.base_rank,
	    a->round.ranks.base_rank + a->round.ranks.local_world_size - 1,
	    a->round.ranks.world_size, a->round.restart_count,
	    worker_wall_time() - a->started);
}

static void agent_on_console_drained(void *data);

static void agent_round_end(struct agent *a)
{
	const struct crun_failure *f;
	int nf, root = 0, status = 0, restart;

	initdiag_stop(a->watch.diag);
	workstore_release_port(&a->ws);
	/*
	 * The failures are kept until it is known whether the group restarts
	 * (on several nodes that is a job-wide decision); logs_drop_report
	 * prints them if it does not.
	 */
	nf = logs_collect(&a->logs, &a->pool, &a->round.ranks, &root);
	f = a->logs.pending;
	/* A node whose workers all succeeded stays counted as quiet. */
	stall_stop(a->watch.stall, nf == 0 && a->stop.reason == STOP_NONE);
	restart = !a->multi &&
		  ((nf > 0 && a->stop.reason == STOP_FAILURE) ||
		   a->stop.reason == STOP_STALL) &&
		  a->restart_count < a->cfg->max_restarts;
	if (nf > 0) {
		status = f[root].exitcode;
		a->stop.failed_rank = f[root].rank;
	}
	if (restart && a->stop.reason == STOP_STALL) {
		a->restart_count++;
		log_say("the worker group hung; restarting it (restart %d of "
			"%d)",
			a->restart_count, a->cfg->max_restarts);
		events_emitf(a->watch.ev, "crun.group.restarting", "{s:s, s:i}",
			     "after", "stall", "restarts_used",
			     a->restart_count);
		logs_drop_report(&a->logs, 0);
	} else if (restart) {
		a->restart_count++;
		log_say("rank %d (local rank %d, pid %d) failed with exit code "
			"%d%s%s; "
			"restarting the worker group (restart %d of %d)",
			f[root].rank, f[root].local_rank, (int)f[root].pid,
			status, f[root].signal ? ", " : "",
			f[root].signal ? cfg_signame(f[root].signal) : "",
			a->restart_count, a->cfg->max_restarts);
		events_emitf(a->watch.ev, "crun.group.restarting", "{s:s, s:i}",
			     "after", "failure", "restarts_used",
			     a->restart_count);
		logs_drop_report(&a->logs, 0);
	} else if (!a->multi) {
		logs_drop_report(&a->logs, 1);
	}
	if (a->watch.ft)
		filetimer_clear(a->watch.ft);
	pool_end(&a->pool);
	workstore_stop_relay(&a->ws); /* its workers are gone */

	if (!a->multi) {
		if (a->stop.reason == STOP_SIGNAL)
			agent_finish(a, 128 + a->stop.signal);
		else if (restart)
			agent_round_start(a);
		else if (a->stop.reason == STOP_STALL) {
			log_say("worker group hung; no restarts left "
				"(--max_restarts=%d); exiting with status 1",
				a->cfg->max_restarts);
			agent_finish(a, 1);
		} else if (nf > 0) {
			log_say(
			    "worker group failed; exiting with status %d (that "
			    "of rank %d)",
			    status, a->stop.failed_rank);
			agent_finish(a, status);
		} else {
			agent_say_success(a);
			agent_finish(a, 0);
		}
		return;
	}
	/* The round's lines reach the job's console before its end is told. */
	console_job_drain(a->console, agent_on_console_drained, a);
}

/* This node's round is over: tell the others (nodes.h). */
static void agent_on_console_drained(void *data)
{
	struct agent *a = data;
	int status = 0;

	for (int i = 0; i < a->logs.npending; i++)
		if (a->logs.pending[i].rank == a->stop.failed_rank)
			status = a->logs.pending[i].exitcode;
	nodes_round_end(a->nodes, a->logs.npending, status,
			a->res.ranks.group_world_size);
}

/* The last worker of the round is done: judge the round. */
static void agent_on_pool_done(struct pool *p, void *data)
{
	(void)p;
	agent_round_end(data);
}

/* Name the ranks that do not reach the workers' store (initdiag.h). */
static void agent_diag_start(struct agent *a)
{
	const struct rdzv_result *res = &a->res;
	struct crun_rdzv *rdzv = nodes_rdzv(a->nodes);
	struct initdiag_round r;
	char prefix[300];

	memset(&r, 0, sizeof(r));
	r.host = a->host;
	r.store_addr = a->round.master_addr;
	r.store_port = a->round.master_port;
	r.group_rank = res->ranks.group_rank;
	r.group_world_size = res->ranks.group_world_size;
	r.base_rank = res->ranks.base_rank;
	r.nproc = a->pool.n;
	r.world_size = res->ranks.world_size;
	r.restart_count = a->round.restart_count;
	r.pids = a->pool.pids;
	r.ops = nodes_kv(a->nodes, &r.kv);
	snprintf(prefix, sizeof(prefix), "crun/%s/r%d/", res->run_id,
		 rdzv ? rdzv_round(rdzv) : 0);
	r.prefix = prefix;
	/* A record not there yet blocks the rendezvous channel this long. */
	r.read_ms = r.ops == &rdzv_etcd_ops ? 1000 : 500;
	r.wstore = a->ws.server;
	r.peers = rdzv ? rdzv_peers(rdzv) : NULL;
	initdiag_start(a->watch.diag, &r);
	agent_stall_start(a);
}

/* A worker of the round started: say so, and where it is bound. */
static void agent_on_worker_started(struct pool *p, struct worker *w,
				    void *data)
{
	struct agent *a = data;
	int rank = a->round.ranks.base_rank + w->local_rank;

	(void)p;
	events_emitf(a->watch.ev, "crun.worker.started", "{s:i, s:i, s:i}",
		     "local_rank", w->local_rank, "rank", rank, "pid",
		     (int)w->pid);
	agent_report_binding(a, w->local_rank, rank);
}

/* A round is formed: start this node's workers with its result. */
/* --console=collapse,job: found once (the store host's), told each round. */
static void agent_console_job(struct agent *a, const struct rdzv_result *res)
{
	struct crun_store_aclient *client = NULL;
	const struct crun_ranks *k = &res->ranks;

	if (console_job_pending(a->console) &&
	    console_job_host(a->console, nodes_store_server(a->nodes)) == 1)
		console_job_send(
		    a->console,
		    nodes_store_client(a->nodes, &client) ? NULL : client);
	console_job_round(a->console, res->round, k->group_rank,
			  k->group_world_size, k->base_rank, k->world_size);
}

static void agent_round_ready(struct agent *a, const struct rdzv_result *res)
{
	struct crun_cfg *cfg = a->cfg;
	struct worker_round *rp = &a->round;

	memset(rp, 0, sizeof(*rp));
	rp->ranks = res->ranks;
	rp->restart_count = res->round;
	rp->master_addr = res->master_addr;
	rp->master_port = res->master_port;
	/* Only this node's torch decides whether its workers may take the
	 * agent store's path to a store the agent hosts (torchstore.h); a
	 * client without it reaches that store the same: ranks != 0 here. */
	rp->use_agent_store_host = !res->master_by_worker;
	rp->use_agent_store = rp->use_agent_store_host && !a->ws.worker_hosted;
	rp->no_libuv = a->ws.worker_hosted;
	a->state = A_RUNNING;
	a->stop.reason = STOP_NONE;
	/* No log directory: no worker can start (the messages are out). */
	if ((a->multi && !a->logs.ready && logs_setup(&a->logs)) ||
	    logs_attempt(&a->logs, res->round)) {
		pool_fail(&a->pool, cfg->nproc_per_node);
		return;
	}
	rp->attempt_dir = a->logs.attempt_dir;
	rp->error_prefix = a->logs.attempt_prefix;
	if (workstore_start_relay(&a->ws, rp)) {
		log_say("cannot start the store relay");
		pool_fail(&a->pool, cfg->nproc_per_node);
		return;
	}
	if (a->multi)
		log_say(
		    "round %d: group rank %d of %d, ranks %d-%d of %d, store "
		    "%s:%d%s",
		    res->round, res->ranks.group_rank,
		    res->ranks.group_world_size, res->ranks.base_rank,
		    res->ranks.base_rank + res->ranks.local_world_size - 1,
		    res->ranks.world_size, res->master_addr, res->master_port,
		    res->master_by_worker ? " (worker rank 0's)" : "");

	if (a->multi)
		agent_console_job(a, res);
	if (pool_start(&a->pool, cfg->nproc_per_node, rp) == 0)
		agent_diag_start(a);
}

static void agent_on_round(struct crun_rdzv *r, int status,
			   const struct rdzv_result *res, void *data)
{
	struct agent *a = data;

	if (a->state == A_DONE)
		return;
	if (status == CRUN_ERDZV_LEFT_OUT) {
		/* Left out for failing, or a spare not needed: the job
		 * succeeded without us. */
		log_say("%s; exiting with status 0", rdzv_errmsg(r));
		agent_finish(a, 0);
		return;
	}
	if (status == CRUN_ERDZV_CLOSED && rdzv_job_status(r) > 0) {
		/* A spare of a job that stopped: the job's status. */
		log_say("%s; exiting with status %d", rdzv_errmsg(r),
			rdzv_job_status(r));
		agent_finish(a, rdzv_job_status(r));
		return;
	}
	if (status) {
		envcheck_report(a->watch.ev, r, NULL, a->cfg->env_check);
		log_say("%s", rdzv_errmsg(r));
		agent_finish(a, 1);
		return;
	}
	a->res = *res;
	if (a->cfg->rdzv_id == NULL || strcmp(a->cfg->rdzv_id, res->run_id)) {
		free(a->cfg->rdzv_id);
		a->cfg->rdzv_id = strdup(res->run_id);
	}
	events_context(a->watch.ev, res->run_id, rdzv_round(r), res->round);
	envcheck_report(a->watch.ev, r, res, a->cfg->env_check);
	events_emitf(
	    a->watch.ev, "crun.rdzv.closed", "{s:i, s:i, s:i, s:i, s:s, s:i}",
	    "group_rank", res->ranks.group_rank, "group_world_size",
	    res->ranks.group_world_size, "world_size", res->ranks.world_size,
	    "base_rank", res->ranks.base_rank, "master_addr", res->master_addr,
	    "master_port", res->master_port);
	agent_round_ready(a, &a->res);
}

/* Meet the other nodes (or, alone, just be group rank 0 of one). */
static void agent_round_start(struct agent *a)
{
	struct crun_cfg *cfg = a->cfg;
	struct crun_node_info self = {cfg->role, cfg->nproc_per_node};
	struct rdzv_result *res = &a->res;
	int rc;

	a->state = A_ROUND;
	a->stop.reason = STOP_NONE;
	if (a->multi) {
		events_emit(a->watch.ev, "crun.rdzv.joining", NULL);
		rc = rdzv_next(nodes_rdzv(a->nodes), agent_on_round, a);
		if (rc) {
			log_say("cannot join the rendezvous: %s",
				crun_strerror(rc));
			agent_finish(a, 1);
		}
		return;
	}
	memset(res, 0, sizeof(*res));
	env_compute_ranks(&self, 1, 0, &res->ranks);
	res->round = a->restart_count;
	snprintf(res->master_addr, sizeof(res->master_addr), "%s",
		 cfg->local_addr			    ? cfg->local_addr
		 : strcmp(cfg->rdzv_backend, "static") == 0 ? cfg->master_addr
							    : "127.0.0.1");
	rc = agent_start_master(a, res->round, &res->master_port,
				&res->master_by_worker);
	if (rc) {
		log_say("cannot start the workers' store: %s",
			crun_strerror(rc));
		agent_finish(a, 1);
		return;
	}
	events_context(a->watch.ev, cfg->rdzv_id, res->round, res->round);
	agent_round_ready(a, res);
}

/* --- start and finish --------------------------------------------------- */

/* Close every handle; the loop then runs dry and agent_run returns. */
static void agent_finish(struct agent *a, int status)
{
	if (a->state == A_DONE)
		return;
	a->state = A_DONE;
	a->stop.exit_status = status;
	events_emitf(a->watch.ev, "crun.agent.exited", "{s:i}", "status",
		     status);
	metrics_close(a->watch.metrics);
	a->watch.metrics = NULL;
	if (status != 0)
		logs_write_error_file(&a->logs, status);
	logs_drop_report(&a->logs, 0);
	for (int i = 0; i < a->sig.n; i++)
		uv_close((uv_handle_t *)&a->sig.h[i], NULL);
	uv_close((uv_handle_t *)&a->sig.winch, NULL);
	pool_close(&a->pool);
	if (a->console)
		console_close(a->console);
	procs_close(a->procs, NULL, NULL);
	a->procs = NULL;
	filetimer_close(a->watch.ft);
	a->watch.ft = NULL;
	initdiag_close(a->watch.diag);
	stall_close(a->watch.stall);
	hang_close(a->watch.hang);
	a->watch.hang = NULL;
	workstore_close(&a->ws);
	livestacks_free(a->watch.stacks);
	a->watch.stacks = NULL;
	nodes_close(a->nodes);
	a->nodes = NULL;
}

/* The watchdog may signal only our workers and their process groups. */
static int agent_owns_pid(void *data, pid_t pid, int *rank)
{
	struct agent *a = data;
	pid_t pg = getpgid(pid);

	for (int i = 0; i < a->pool.n; i++) {
		struct worker *w = &a->pool.w[i];

		if (w->proc && (w->pid == pid || w->pid == pg)) {
			*rank = a->round.ranks.base_rank + w->local_rank;
			return 1;
		}
	}
	return 0;
}

/* An expired FileTimer's SIGKILL: the worker's stack first (pool.h). */
static void agent_watchdog_kill(void *data, pid_t pid, int rank)
{
	struct agent *a = data;
	int lr = rank - a->round.ranks.base_rank;

	if (lr >= 0 && lr < a->pool.n && a->pool.w[lr].pid == pid)
		pool_kill_stacks(&a->pool, lr);
	else
		kill(pid, SIGKILL); /* one of its group: as torch does */
}

/*
 * torchrun's FileTimer watchdog, when crun's environment asks for it: the
 * workers find the FIFO in TORCHELASTIC_TIMER_FILE.
 */
static int agent_start_watchdog(struct agent *a)
{
	const char *on = getenv("TORCHELASTIC_ENABLE_FILE_TIMER");
	char errmsg[512];

	if (on == NULL || strcmp(on, "1") != 0)
		return 0;
	if (filetimer_new(&a->loop, getenv("TORCHELASTIC_TIMER_FILE"),
			  agent_owns_pid, a, &a->watch.ft, errmsg,
			  sizeof(errmsg))) {
		log_say("%s", errmsg);
		return -1;
	}
	filetimer_set_kill(a->watch.ft, agent_watchdog_kill);
	setenv("TORCHELASTIC_TIMER_FILE", filetimer_path(a->watch.ft), 1);
	return 0;
}

/* Whether the job file's [env] gives the workers name. */
static int agent_env_sets(const struct crun_cfg *cfg, const char *name)
{
	size_t n = strlen(name);

	for (int i = 0; i < cfg->nenv; i++)
		if (strncmp(cfg->env[i], name, n) == 0 && cfg->env[i][n] == '=')
			return 1;
	return 0;
}

/* Before the loop: the host, the fd budget, the run id, the binding plan. */
static int agent_prepare(struct agent *a, struct crun_cfg *cfg)
{
	memset(a, 0, sizeof(*a));
	a->cfg = cfg;
	a->started = worker_wall_time();
	if (gethostname(a->host, sizeof(a->host) - 1))
		snprintf(a->host, sizeof(a->host), "localhost");
	a->multi = cfg->nnodes_max > 1;
	logs_init(&a->logs, cfg, a->host);
	workstore_init(&a->ws, &a->loop, cfg, a->multi, agent_on_relay_lost, a);
	{
		char note[256];

		nofile_budget(cfg, note, sizeof(note));
		if (*note)
			log_say("%s", note);
	}
	if (cfg->rdzv_id == NULL && !a->multi)
		cfg->rdzv_id = nodes_run_id(a->host);
	if (cfg->bind_mode != CRUN_BIND_NONE) {
		char errmsg[512];

		/* Before any fork: the children only apply it. */
		if (binding_plan_system(cfg->bind_mode, cfg->nproc_per_node,
					&a->binding, errmsg, sizeof(errmsg))) {
			log_say("%s", errmsg);
			return -1;
		}
		if (cfg->verbose)
			log_say("binding: %s from %s",
				binding_mode_name(a->binding->mode),
				a->binding->source);
		for (char *p = a->binding->notes, *nl; (nl = strchr(p, '\n'));
		     p = nl + 1)
			log_say("binding: %.*s", (int)(nl - p), p);
	}
	return 0;
}

/* The loop and the handles every round shares: signals, console, pool. */
static int agent_open_handles(struct agent *a)
{
	const struct crun_cfg *cfg = a->cfg;
	struct worker_ctx wctx;
	int rc;

	rc = uv_loop_init(&a->loop);
	if (rc) {
		log_say("cannot start the event loop: %s", crun_strerror(rc));
		return -1;
	}
	uv_signal_init(&a->loop, &a->sig.winch);
	a->sig.winch.data = a;
	uv_signal_start(&a->sig.winch, agent_on_winch, SIGWINCH);
	uv_unref((uv_handle_t *)&a->sig.winch);
	if (console_new(&a->loop,
			cfg->console_buffer ? cfg->console_buffer
					    : CONSOLE_LIMIT,
			&a->console) == 0)
		logs_set_console(a->console);
	if (a->console && cfg->console_collapse &&
	    console_collapse(a->console,
			     (uint64_t)(cfg->console_window * 1000 + 0.5),
			     cfg->console_hold, cfg->role, cfg->console_job))
		log_say("--console=collapse: out of memory; lines are shown "
			"as they come");
	rc = procs_new(&a->loop, &a->procs);
	if (rc) {
		log_say("cannot watch child processes: %s", crun_strerror(rc));
		return -1;
	}
	wctx.loop = &a->loop;
	wctx.procs = a->procs;
	wctx.console = a->console;
	wctx.cfg = cfg;
	wctx.binding = a->binding;
	wctx.envp = NULL; /* ours, with what setenv adds below */
	pool_init(&a->pool, &wctx, agent_on_worker_exit,
		  agent_on_worker_started, agent_on_pool_done, a);
	for (int i = 0; i < cfg->nsignals + (PROC_CONSOLE_BREAK != 0); i++) {
		int sig =
		    i < cfg->nsignals ? cfg->signals[i] : PROC_CONSOLE_BREAK;

		uv_signal_init(&a->loop, &a->sig.h[a->sig.n]);
		a->sig.h[a->sig.n].data = a;
		if (uv_signal_start(&a->sig.h[a->sig.n], agent_on_signal,
				    sig) == 0)
			a->sig.n++;
		else
			uv_close((uv_handle_t *)&a->sig.h[a->sig.n], NULL);
	}
	/* Workers inherit this (torchrun exports it to the agent's env too). */
	setenv("TORCHELASTIC_SIGNALS_TO_HANDLE", cfg->signals_str, 1);
	if (getenv("OMP_NUM_THREADS") == NULL &&
	    !agent_env_sets(cfg, "OMP_NUM_THREADS") && cfg->nproc_per_node > 1)
		log_say(
		    "setting OMP_NUM_THREADS=1 for each worker (unset, and %d "
		    "workers "
		    "share this node); set it yourself to tune",
		    cfg->nproc_per_node);
	return 0;
}

/* --- the workers' store (workstore.h reports here) ---------------------- */

/* rdzv_opts.start_master, and alone: the workers' store of round. */
static int agent_start_master(void *data, int round, int *port, int *by_worker)
{
	struct agent *a = data;

	return workstore_start(&a->ws, round, nodes_store_server(a->nodes),
			       nodes_rdzv(a->nodes), a->pool.survivors, port,
			       by_worker);
}

/*
 * The relay lost the workers' store, which group rank 0 serves: as when that
 * node stops answering its heartbeat, the round ends as its loss unless it
 * finished (it then served until the end, and the workers finish as they
 * would without the relay: a worker that still asks the store finds its
 * connection closed).
 */
static void agent_on_relay_lost(void *data, const char *up, int status)
{
	struct agent *a = data;

	if (a->state != A_RUNNING || a->stop.reason != STOP_NONE)
		return;
	log_say("this node's store relay lost the workers' store at %s (%s): "
		"unless group rank 0 finished, the round ends as its loss",
		up, crun_strerror(status));
	rdzv_node_lost(nodes_rdzv(a->nodes), 0,
		       "lost: a node's store relay lost its workers' store");
}

/* --- several nodes (nodes.h reports here) ------------------------------- */

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

/* Another node (or the store) ended the round: stop our workers too. */
static void agent_on_nodes_ended(void *data, const struct rdzv_end *e)
{
	struct agent *a = data;

	if (e->kind == RDZV_END_DEAD)
		metrics_note_node_lost(a->watch.metrics);
	if (e->kind == RDZV_END_FAILURE)
		metrics_note_failure(a->watch.metrics, e->status,
				     worker_wall_time(), 0);
	if (e->kind == RDZV_END_STALL) {
		/* Every node names where its ranks are, then stops them. */
		agent_stall_stop(a, e->why);
	} else if (a->state == A_RUNNING) {
		log_say("round %d ended: %s", a->res.round,
			e->kind == RDZV_END_FAILURE
			    ? "a worker failed on another node"
			    : e->why);
		agent_stop_group(a, STOP_PEER, peer_signal(a, e));
	}
}

static void agent_on_nodes_join(void *data)
{
	agent_round_start(data);
}

static void agent_on_nodes_succeeded(void *data)
{
	agent_say_success(data);
}

static void agent_on_nodes_report(void *data, int print)
{
	struct agent *a = data;

	logs_drop_report(&a->logs, print);
}

static void agent_on_nodes_finish(void *data, int status)
{
	agent_finish(data, status);
}

static void agent_on_livestacks(struct livestacks *ls, void *data)
{
	struct agent *a = data;

	if (a->watch.stacks == ls)
		a->watch.stacks = NULL;
}

/* rdzv_opts.on_stacks: take this node's live stacks and answer. */
static void agent_on_stacks(void *data, const char *nonce)
{
	struct agent *a = data;

	if (a->state != A_RUNNING || a->pool.w == NULL || a->pool.n <= 0)
		return;
	/* A request while one is being taken replaces it. */
	livestacks_free(a->watch.stacks);
	a->watch.stacks = NULL;
	if (livestacks_start(&a->loop, a->cfg, a->pool.pids, a->pool.n,
			     a->res.ranks.base_rank, nodes_rdzv(a->nodes),
			     nonce, agent_on_livestacks, a, &a->watch.stacks))
		log_warn("cannot take the stacks crun status asked for");
}

static const struct nodes_ops agent_nodes_ops = {
    agent_on_nodes_join,   agent_on_nodes_ended,  agent_on_nodes_succeeded,
    agent_on_nodes_report, agent_on_nodes_finish, agent_start_master,
    agent_on_stacks};

/* The first round (alone), or the backend and its first round. */
static void agent_begin_rounds(struct agent *a)
{
	struct crun_cfg *cfg = a->cfg;

	if (a->multi) {
		struct nodes_opts o = {
		    &a->loop,	 cfg,	   a->host,	     a->name_unresolved,
		    a->watch.ev, &a->stop, &agent_nodes_ops, a};

		if (nodes_start(&o, &a->nodes))
			agent_finish(a, 1);
	} else if (logs_setup(&a->logs) == 0) {
		agent_round_start(a);
	} else {
		agent_finish(a, 1);
	}
}

/* The workers' torch is known (workstore_ask_torch): go on. */
static void agent_on_torch(void *data)
{
	struct agent *a = data;

	if (a->state != A_DONE)
		agent_begin_rounds(a);
}

/* Open what the options ask for, then the first round (or the backend). */
static void agent_begin(struct agent *a)
{
	struct crun_cfg *cfg = a->cfg;

	if (cfg->event_log) {
		char errmsg[512];

		if (events_open(cfg->event_log, a->host, &a->watch.ev, errmsg,
				sizeof(errmsg))) {
			log_say("%s", errmsg);
			agent_finish(a, 1);
		}
		events_context(a->watch.ev, cfg->rdzv_id, -1, -1);
		events_emitf(a->watch.ev, "crun.agent.started",
			     "{s:i, s:i, s:i, s:s, s:i}", "nnodes_min",
			     cfg->nnodes_min, "nnodes_max", cfg->nnodes_max,
			     "nproc_per_node", cfg->nproc_per_node, "backend",
			     cfg->rdzv_backend, "pid", (int)getpid());
	}
	if (initdiag_new(&a->loop, cfg->init_warn_after, a->watch.ev,
			 &a->watch.diag) ||
	    stall_new(&a->loop, cfg->stall_timeout, "/proc", agent_on_hung, a,
		      &a->watch.stall))
		agent_finish(a, 1);
	if (a->multi && a->state != A_DONE) {
		char first[64];
		enum netif_name_state st;

		/* Blocking (getaddrinfo): before the loop runs. */
		st = netif_name_state(a->host, first, sizeof(first));
		a->name_unresolved = st == NETIF_NAME_UNRESOLVED;
		netcheck_ifname(cfg, a->host, st, first);
	}
	if (a->state == A_DONE) {
		/* the event log could not be opened */
	} else if (agent_start_metrics(a) || agent_start_watchdog(a)) {
		agent_finish(a, 1);
	} else if (!workstore_ask_torch(&a->ws, agent_on_torch)) {
		agent_begin_rounds(a);
	}
}

static int agent_run_loop(struct crun_cfg *cfg)
{
	struct agent a;
	int rc;

	if (agent_prepare(&a, cfg) || agent_open_handles(&a))
		return 1;
	agent_begin(&a);
	uv_run(&a.loop, UV_RUN_DEFAULT);
	rc = uv_loop_close(&a.loop);
	if (rc)
		log_say("internal error: event loop closed with handles open");
	/*
	 * What a slow reader has not taken yet, bounded: then we exit (at
	 * once, nearly, when a signal stopped us). Our signal handlers are
	 * gone: another signal now ends crun.
	 */
	logs_set_console(NULL);
	console_free(a.console, a.stop.signal ? 1000 : CONSOLE_STALL_MS);

	logs_remove(&a.logs, a.stop.exit_status);
	initdiag_free(a.watch.diag);
	stall_free(a.watch.stall);
	events_close(a.watch.ev);
	binding_plan_free(a.binding);
	logs_free(&a.logs);
	return a.stop.exit_status;
}

int agent_run(struct crun_cfg *cfg)
{
	int rc;

	log_set_sink(logs_on_log, NULL);
	rc = agent_run_loop(cfg);
	log_set_sink(NULL, NULL);
	return rc;
}

/* --- metrics (metrics.c) ------------------------------------------------ */

/* What /metrics and /healthz show, read on the loop a few times a second. */
static void agent_metrics_fill(void *data, struct metrics_snap *s)
{
	static const char *const states[] = {"rendezvous", "running",
					     "stopping", "done"};
	struct agent *a = data;
	const struct crun_ranks *rk = &a->res.ranks;
	struct crun_rdzv *rdzv = nodes_rdzv(a->nodes);
	struct crun_store_server *srv[2] = {nodes_store_server(a->nodes),
					    a->ws.server};
	int failing = a->stop.reason == STOP_FAILURE ||
		      a->stop.peer.kind == RDZV_END_FAILURE;
	int stalled =
	    a->stop.reason == STOP_STALL || a->stop.peer.kind == RDZV_END_STALL;

	snprintf(s->host, sizeof(s->host), "%s", a->host);
	snprintf(s->run_id, sizeof(s->run_id), "%s",
		 a->cfg->rdzv_id ? a->cfg->rdzv_id : "");
	snprintf(s->backend, sizeof(s->backend), "%s", a->cfg->rdzv_backend);
	s->state = a->state == A_STOPPING && (failing || stalled)
		       ? "failed"
		       : states[a->state];
	s->reason = a->state != A_STOPPING	    ? ""
		    : stalled			    ? "stall"
		    : failing			    ? "worker failed"
		    : a->stop.reason == STOP_SIGNAL ? "signal"
						    : "round ended elsewhere";
	s->started = a->started;
	s->formed = a->multi ? rdzv && a->res.ranks.world_size > 0
			     : a->res.ranks.world_size > 0;
	s->round = a->multi && rdzv ? rdzv_round(rdzv) : a->res.round;
	s->generation = a->res.round;
	s->group_rank = rk->group_rank;
	s->group_world_size = rk->group_world_size;
	s->world_size = rk->world_size;
	s->base_rank = rk->base_rank;
	s->local_world_size = rk->local_world_size;
	s->max_restarts = a->cfg->max_restarts;
	s->restarts_used =
	    a->multi && rdzv ? rdzv_restarts(rdzv) : a->restart_count;
	s->restarts_left = s->max_restarts > s->restarts_used
			       ? s->max_restarts - s->restarts_used
			       : 0;
	for (int i = 0; i < a->pool.n && a->pool.w; i++) {
		const struct worker *w = &a->pool.w[i];

		if (!w->exited)
			s->running++;
		else if (w->status == 0)
			s->succeeded++;
		else if (w->stopped)
			s->stopped++;
		else
			s->failed++;
	}
	metrics_store_fill(&s->stores[0], "rendezvous", srv[0]);
	metrics_store_fill(&s->stores[1], "workers", srv[1]);
	if (a->multi && rdzv)
		s->nexcluded =
		    rdzv_excluded(rdzv, s->excluded, RDZV_MAX_EXCLUDED);
	if (s->nexcluded > RDZV_MAX_EXCLUDED)
		s->nexcluded = RDZV_MAX_EXCLUDED;
}

/* --metrics_port: serve /metrics and /healthz; say where (tests read it). */
static int agent_start_metrics(struct agent *a)
{
	const struct crun_cfg *cfg = a->cfg;
	struct metrics_opts o = {
	    cfg->metrics_addr,	    cfg->metrics_port,
	    cfg->metrics_max_conns, cfg->metrics_idle_timeout,
	    agent_metrics_fill,	    a};
	char errmsg[512], url[320];

	if (cfg->metrics_port < 0)
		return 0;
	if (metrics_new(&a->loop, &o, &a->watch.metrics, errmsg,
			sizeof(errmsg))) {
		log_say("%s", errmsg);
		return -1;
	}
	snprintf(url, sizeof(url),
		 strchr(cfg->metrics_addr, ':') ? "http://[%s]:%d"
						: "http://%s:%d",
		 cfg->metrics_addr, metrics_port(a->watch.metrics));
	log_say("metrics on %s/metrics, health on %s/healthz", url, url);
	events_emitf(a->watch.ev, "crun.metrics.listening", "{s:s, s:i, s:s}",
		     "addr", cfg->metrics_addr, "port",
		     metrics_port(a->watch.metrics), "url", url);
	return 0;
}

/*
 * The worker-group lifecycle of one node, on one libuv loop.
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
 * job. Worker process groups after exit live in group.c, the console in
 * console.c, the fd budget in nofile.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <ftw.h>
#include <sodium.h>
#include <stdarg.h>

#include "crun/auth.h"
#include "crun/err.h"
#include "crun/log.h"
#include "crun/netif.h"
#include "crun/peers.h"
#include "crun/rdzv.h"
#include "crun/rdzv_etcd.h"
#include "crun/rdzv_store.h"
#include "crun/report.h"
#include "crun/store.h"
#include "agent.h"
#include "console.h"
#include "envcheck.h"
#include "events.h"
#include "filetimer.h"
#include "initdiag.h"
#include "metrics.h"
#include "netcheck.h"
#include "nofile.h"
#include "pool.h"

extern char **environ;

/* Console bytes queued for a slow reader (--console_buffer's default). */
#define CONSOLE_LIMIT (4u << 20)
/* At exit, how long a console reader may take no byte before crun gives up. */
#define CONSOLE_STALL_MS 10000

enum agent_state { A_ROUND, A_RUNNING, A_STOPPING, A_DONE };
enum stop_reason { STOP_NONE, STOP_FAILURE, STOP_SIGNAL, STOP_PEER };

/* How the round ended elsewhere (rdzv_end_cb), or by our own failure. */
struct peer_end {
	int kind; /* enum rdzv_end_kind, 0: not ended elsewhere */
	int status, signal;
	char why[512];	  /* as recorded, for logs */
	char detail[512]; /* for display: why without its leading status */
};

/* Why the agent stops, and with which status: one place for all of it. */
struct agent_stop {
	enum stop_reason reason; /* why the running group stops, this round */
	int signal;		 /* the first signal received, 0: none */
	int sigint_seen;	 /* a second SIGINT escalates to SIGKILL */
	int leaving;	/* the group is over: waiting for the others to leave */
	int own_status; /* the root failure's status on this node */
	int failed_rank; /* its rank */
	int exit_status; /* crun's exit status once decided */
	struct peer_end peer;
};

struct agent {
	uv_loop_t loop;
	struct crun_cfg *cfg;
	struct envcheck ec; /* --env_check: this node's fingerprint */
	struct crun_procs *procs;
	uv_signal_t sigs[32];
	int nsigs;
	uv_signal_t winch; /* the console's window size changed */
	char host[256];
	char *log_root;	  /* <log_dir>/<run_id>, NULL: no files */
	int log_root_tmp; /* we made it up: remove after success */
	int log_kept;	  /* ... unless --redirects/--tee wrote files there */
	char *attempt_dir;
	int restart_count;
	int restarts_left;
	enum agent_state state;
	struct agent_stop stop;
	struct pool pool; /* the round's workers */
	int port_fd;	  /* MASTER_PORT held for the round */
	struct worker_round round;

	/* Multi-node: the rendezvous and the store it runs over. */
	int multi;
	struct crun_rdzv_store *rs;
	struct crun_rdzv_etcd *re; /* --rdzv_backend=etcd: no store host */
	struct crun_rdzv *rdzv;
	struct rdzv_result res;
	char addr[256];		      /* this node's address for MASTER_ADDR */
	char ips[RDZV_MAX_FIELD + 1]; /* its interface addresses (peers.h) */
	int name_unresolved;	      /* the host name does not resolve */
	struct crun_failure *pending_report;
	int npending;
	int error_file_done; /* TORCHELASTIC_ERROR_FILE written */
	char report_path[PATH_MAX];

	struct filetimer *ft;	 /* TORCHELASTIC_ENABLE_FILE_TIMER's watchdog */
	struct events *ev;	 /* --event_log, or NULL */
	struct metrics *metrics; /* --metrics_port, or NULL */
	struct initdiag *diag;	 /* --init_warn_after */
	struct console *console; /* our stdout and stderr, never blocking */

	/* The workers' store of the current round (agent store mode). */
	struct crun_store_server *wstore;
	struct crun_peers *peers; /* who may reach it (store_allow=round) */
	int logs_ready;
	double started;
	struct crun_binding_plan *binding; /* NULL: workers inherit ours */
};

static void agent_round_start(struct agent *a);
static void agent_finish(struct agent *a, int status);
static void agent_drop_report(struct agent *a, int print);
static int reserve_port(struct agent *a, int *port);
static int agent_setup_logs(struct agent *a);
static char *make_run_id(const char *host);
static int agent_start_metrics(struct agent *a);

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
	events_emit(a->ev, "crun.worker_binding",
		    json_pack("{s:i, s:i, s:s, s:s, s:s, s:s, s:i, s:b}",
			      "local_rank", i, "rank", rank, "mode",
			      binding_mode_name(a->binding->mode), "cpus",
			      b->cpus_list, "numa", b->nodes_list, "memory",
			      binding_mpol_name(b), "gpu", b->gpu, "fallback",
			      b->fallback));
}

/*
 * The console of the running agent, the sink of every "crun: ..." line
 * (log.h), libcrun's included; NULL before it exists and after it is freed
 * (then lines go straight out).
 */
static struct console *the_console;

/* Write whole bytes to the console; the agent is its only writer. */
static void agent_console(int fd, const char *line, size_t len)
{
	if (the_console) {
		console_write(the_console, fd, line, len);
		return;
	}
	while (len > 0) {
		ssize_t n = write(fd, line, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return; /* console gone: keep running, files still work
				 */
		line += n;
		len -= (size_t)n;
	}
}

/* The last line crun said: why it stops, for the launcher's error file. */
static char last_said[LOG_LINE_MAX];

/* log.h's sink while the agent runs: every line, on the console's stderr. */
static void agent_on_log(void *data, enum log_level level, const char *line,
			 size_t len, const char *msg)
{
	(void)data;
	(void)level;
	(void)msg;
	snprintf(last_said, sizeof(last_said), "%.*s", (int)(len - 1), line);
	agent_console(2, line, len);
}

/*
 * When crun's own environment names TORCHELASTIC_ERROR_FILE (a scheduler
 * asks for the launcher's root cause, as torchrun writes it), write it once:
 * the root failure of this node when there is one, else why crun stops.
 */
static void agent_write_error_file(struct agent *a, int status)
{
	const char *path = getenv("TORCHELASTIC_ERROR_FILE");
	const struct crun_failure *root = NULL;
	char why[1200];

	if (a->error_file_done || path == NULL || *path == '\0')
		return;
	a->error_file_done = 1;
	snprintf(why, sizeof(why), "%s", last_said);
	if (a->npending > 0) {
		root = &a->pending_report[report_root(a->pending_report,
						      a->npending)];
		snprintf(why, sizeof(why),
			 "ChildFailedError: %s: rank %d (local rank %d, pid "
			 "%d) on %s exited with %d%s%s",
			 a->cfg->argv[0], root->rank, root->local_rank,
			 (int)root->pid, root->host, root->exitcode,
			 root->signal ? ", " : "",
			 root->signal ? cfg_signame(root->signal) : "");
		status = root->exitcode;
	}
	if (report_write_error_file(path, root, why, status))
		log_say("cannot write the error file '%s'", path);
}

/* --- stopping ----------------------------------------------------------- */

/* Stop the running group: sig now, SIGKILL after the shutdown timeout. */
static void agent_stop_group(struct agent *a, enum stop_reason why, int sig)
{
	if (a->state != A_RUNNING)
		return;
	initdiag_stop(a->diag);
	a->state = A_STOPPING;
	a->stop.reason = why;
	events_emit(a->ev, "crun.group.stopping",
		    json_pack("{s:s, s:s}", "reason",
			      why == STOP_FAILURE  ? "worker failed"
			      : why == STOP_SIGNAL ? "signal"
						   : "round ended elsewhere",
			      "signal", cfg_signame(sig)));
	pool_stop(&a->pool, sig);
}

static void agent_on_winch(uv_signal_t *h, int sig)
{
	struct agent *a = h->data;

	pool_winch(&a->pool);
}

static void agent_on_signal(uv_signal_t *h, int sig)
{
	struct agent *a = h->data;

	if (a->state == A_DONE)
		return;
	if (sig == SIGINT && a->stop.sigint_seen) {
		log_say("second SIGINT: killing the workers now");
		pool_signal(&a->pool, SIGKILL);
		return;
	}
	if (sig == SIGINT)
		a->stop.sigint_seen = 1;
	if (a->stop.signal == 0)
		a->stop.signal = sig;
	if (a->state == A_RUNNING && !a->stop.leaving) {
		log_say("received %s: forwarding it to the workers",
			cfg_signame(sig));
		agent_stop_group(a, STOP_SIGNAL, sig);
	} else if (a->state == A_STOPPING && a->pool.n > 0) {
		pool_signal(&a->pool, sig);
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

/* --- rounds ------------------------------------------------------------- */

static void agent_on_worker_exit(struct pool *p, struct worker *w, void *data)
{
	struct agent *a = data;
	char why[400];

	events_emit(
	    a->ev,
	    w->status == 0	      ? "torchelastic.worker.status.SUCCEEDED"
	    : w->stopped && w->signal ? "torchelastic.worker.status.STOPPED"
				      : "torchelastic.worker.status.FAILED",
	    json_pack("{s:i, s:i, s:i, s:i, s:s?}", "local_rank", w->local_rank,
		      "rank", a->round.ranks.base_rank + w->local_rank, "pid",
		      (int)w->pid, "exitcode", w->status, "signal",
		      w->signal ? cfg_signame(w->signal) : NULL));
	if (w->status != 0 && !w->stopped)
		metrics_note_failure(a->metrics, w->status, w->exit_time, 1);
	if (a->state != A_RUNNING || w->status == 0)
		return;
	agent_stop_group(a, STOP_FAILURE, SIGTERM);
	if (a->multi) {
		/* Every node stops now, not after a collective times out. */
		snprintf(why, sizeof(why),
			 "%d rank %d (local rank %d) on %s exited with %d",
			 w->status, a->round.ranks.base_rank + w->local_rank,
			 w->local_rank, a->host, w->status);
		rdzv_end_round(a->rdzv, RDZV_END_FAILURE, why);
	}
}

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
	events_emit(a->ev, "crun.rdzv.ended",
		    json_pack("{s:s, s:s}", "kind", rdzv_end_name(kind),
			      "reason", why));
	if (kind == RDZV_END_DEAD)
		metrics_note_node_lost(a->metrics);
	if (kind == RDZV_END_FAILURE)
		metrics_note_failure(a->metrics, e->status, worker_wall_time(),
				     0);
	if (kind == RDZV_END_DEAD || kind == RDZV_END_JOIN)
		events_emit(a->ev,
			    kind == RDZV_END_DEAD ? "crun.node.lost"
						  : "crun.node.joining",
			    json_pack("{s:s}", "reason", why));
	if (a->stop.peer.kind == 0) {
		struct peer_end *p = &a->stop.peer;

		p->kind = kind;
		p->status = e->status;
		p->signal = e->signal;
		snprintf(p->why, sizeof(p->why), "%s", why);
		snprintf(p->detail, sizeof(p->detail), "%s", e->detail);
	}
	if (a->state == A_RUNNING) {
		log_say("round %d ended: %s", a->res.round,
			kind == RDZV_END_FAILURE
			    ? "a worker failed on another node"
			    : why);
		agent_stop_group(a, STOP_PEER, peer_signal(a, e));
	}
}

/* Collect the failures of the round that just ended; returns how many. */
static int agent_collect_failures(struct agent *a, struct crun_failure **out)
{
	struct crun_failure *f = calloc((size_t)a->pool.n, sizeof(*f));
	int n = 0;

	for (int i = 0; i < a->pool.n && f; i++) {
		struct worker *w = &a->pool.w[i];
		struct crun_failure *x = &f[n];

		/* Workers the agent stopped were terminated, not failed. */
		if (w->status == 0 || w->stopped)
			continue;
		x->local_rank = w->local_rank;
		x->group_rank = a->round.ranks.group_rank;
		x->rank = a->round.ranks.base_rank + w->local_rank;
		x->pid = w->pid;
		snprintf(x->host, sizeof(x->host), "%s", a->host);
		x->exitcode = w->status;
		x->signal = w->signal;
		x->time = w->exit_time;
		if (w->error_file == NULL ||
		    failure_read_error_file(x, w->error_file) != 0) {
			/* stderr that went straight to its file: read its end.
			 */
			worker_tail_from_file(w);
			x->traceback = tail_lines(&w->tail, 20);
		}
		n++;
	}
	*out = f;
	return n;
}

static void agent_drop_report(struct agent *a, int print)
{
	if (a->pending_report && print) {
		char *text = NULL;
		size_t len = 0;
		FILE *fp = open_memstream(&text, &len);

		/* Through the console, which never blocks. */
		if (fp) {
			report_print(fp, a->cfg->argv[0], a->pending_report,
				     a->npending);
			fclose(fp);
			agent_console(2, text, len);
		}
		free(text);
		agent_write_error_file(a, 1);
		if (*a->report_path)
			log_say("failure report saved to %s", a->report_path);
	}
	for (int i = 0; i < a->npending; i++)
		failure_release(&a->pending_report[i]);
	free(a->pending_report);
	a->pending_report = NULL;
	a->npending = 0;
}

static void agent_on_left(struct crun_rdzv *r, void *data)
{
	struct agent *a = data;

	(void)r;
	agent_finish(a, a->stop.exit_status);
}

/* Leave the rendezvous (others learn we are done), then exit with status. */
static void agent_leave(struct agent *a, int status)
{
	a->stop.exit_status = status;
	a->stop.leaving = 1;
	if (rdzv_finish(a->rdzv, agent_on_left, a))
		agent_finish(a, status);
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
		events_emit(a->ev, "crun.group.restarting",
			    json_pack("{s:s, s:i}", "after",
				      kind == RDZV_END_FAILURE ? "failure"
							       : "membership",
				      "restarts_used", rdzv_restarts(r)));
		agent_drop_report(a, 0);
		if (kind == RDZV_END_FAILURE)
			log_say(
			    "re-forming the group: restart %d of %d after a "
			    "worker failure",
			    rdzv_restarts(r), a->cfg->max_restarts);
		else
			log_say(
			    "re-forming the group (%s); no restart is spent",
			    kind == RDZV_END_JOIN ? "a new node joins"
						  : a->stop.peer.why);
		a->stop.peer.kind = 0;
		agent_round_start(a);
		return;
	}
	agent_drop_report(a, 1);
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
		agent_finish(a, status);
	else
		agent_leave(a, status);
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

static void agent_multi_round_end(struct agent *a, int nf, int status)
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
		if (a->rs && rdzv_store_is_host(a->rs)) {
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
			agent_finish(a, a->stop.exit_status);
		return;
	}
	if (nf == 0 && a->stop.reason == STOP_NONE) {
		agent_say_success(a);
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

static void agent_round_end(struct agent *a)
{
	struct crun_failure *f = NULL;
	const char *ep = a->cfg->argv[0];
	char path[PATH_MAX] = "";
	int nf, root = 0, status = 0, restart;

	initdiag_stop(a->diag);
	if (a->port_fd >= 0) {
		close(a->port_fd);
		a->port_fd = -1;
	}
	nf = agent_collect_failures(a, &f);
	restart = !a->multi && nf > 0 && a->stop.reason == STOP_FAILURE &&
		  a->restarts_left > 0;
	if (nf > 0) {
		root = report_root(f, nf);
		status = f[root].exitcode;
		if (a->attempt_dir) {
			snprintf(path, sizeof(path), "%s/failures.json",
				 a->attempt_dir);
			report_write_json(path, ep, f, nf);
		}
	}
	/*
	 * The failures are kept until it is known whether the group restarts
	 * (on several nodes that is a job-wide decision); agent_drop_report
	 * prints them if it does not.
	 */
	agent_drop_report(a, 0);
	if (nf > 0) {
		a->stop.failed_rank = f[root].rank;
		a->pending_report = f;
		a->npending = nf;
		snprintf(a->report_path, sizeof(a->report_path), "%s", path);
	} else {
		free(f);
	}
	if (restart) {
		a->restarts_left--;
		a->restart_count++;
		log_say("rank %d (local rank %d, pid %d) failed with exit code "
			"%d%s%s; "
			"restarting the worker group (restart %d of %d)",
			f[root].rank, f[root].local_rank, (int)f[root].pid,
			status, f[root].signal ? ", " : "",
			f[root].signal ? cfg_signame(f[root].signal) : "",
			a->restart_count, a->cfg->max_restarts);
		events_emit(a->ev, "crun.group.restarting",
			    json_pack("{s:s, s:i}", "after", "failure",
				      "restarts_used", a->restart_count));
		agent_drop_report(a, 0);
	} else if (!a->multi) {
		agent_drop_report(a, 1);
	}
	if (a->ft)
		filetimer_clear(a->ft);
	pool_end(&a->pool);

	if (!a->multi) {
		if (a->stop.reason == STOP_SIGNAL)
			agent_finish(a, 128 + a->stop.signal);
		else if (restart)
			agent_round_start(a);
		else if (nf > 0) {
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
	agent_multi_round_end(a, nf, status);
}

/* The last worker of the round is done: judge the round. */
static void agent_on_pool_done(struct pool *p, void *data)
{
	(void)p;
	agent_round_end(data);
}

/*
 * Hold a free TCP port for MASTER_PORT until the round ends. The socket is
 * bound with SO_REUSEADDR but never listens, so worker rank 0's TCPStore
 * (which also sets SO_REUSEADDR) can bind and listen on it, while nothing
 * else can take the port in between.
 */
static int reserve_port(struct agent *a, int *port)
{
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);
	int one = 1, fd;

	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_ANY);
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(fd, (struct sockaddr *)&sin, sizeof(sin)) ||
	    getsockname(fd, (struct sockaddr *)&sin, &len)) {
		int err = -errno;

		close(fd);
		return err;
	}
	a->port_fd = fd;
	*port = ntohs(sin.sin_port);
	return 0;
}

/* Create <log_root>/attempt_<n>; a directory that exists is never reused. */
static int make_attempt_dir(struct agent *a, int generation)
{
	char path[PATH_MAX];

	free(a->attempt_dir);
	a->attempt_dir = NULL;
	if (a->log_root == NULL)
		return 0;
	snprintf(path, sizeof(path), "%s/attempt_%d", a->log_root, generation);
	for (int k = 1; mkdir(path, 0755) != 0; k++) {
		if (errno != EEXIST || k > 1000) {
			log_say("cannot create log directory '%s': %s", path,
				strerror(errno));
			return -errno;
		}
		snprintf(path, sizeof(path), "%s/attempt_%d.%d", a->log_root,
			 generation, k);
	}
	a->attempt_dir = strdup(path);
	return 0;
}

/*
 * PyTorch's clients cannot authenticate: the workers' store accepts only
 * loopback, this machine's addresses and the round's nodes (peers.h),
 * unless --rdzv_conf=store_allow=any.
 */
static int agent_confine_store(struct agent *a)
{
	char why[512];
	int rc;

	peers_free(a->peers);
	a->peers = NULL;
	if (a->cfg->rdzv.store_allow_any)
		return 0;
	rc = peers_new(a->multi && a->rdzv ? rdzv_peers(a->rdzv) : NULL,
		       &a->peers, why, sizeof(why));
	if (rc)
		return rc;
	if (*why)
		log_say("workers' store: %s: their workers will be refused",
			why);
	store_server_set_allow(a->wstore, peers_allow, a->peers);
	return 0;
}

/*
 * Start the workers' store of a round (called on group rank 0): a fresh
 * keyspace per round serves PyTorch versions that prefix /worker/attempt_<n>
 * and those that expect a new store per attempt alike. Without the agent
 * store, hold a free port for worker rank 0's own TCPStore instead.
 */
static int agent_start_master(void *data, int round, int *port)
{
	struct agent *a = data;
	const struct crun_cfg *cfg = a->cfg;
	struct crun_store_server *rs = a->rs ? rdzv_store_server(a->rs) : NULL;
	/*
	 * Alone, --master_port names the workers' store; with several nodes
	 * rdzv_conf store_port does (firewalls that open one port), else the
	 * workers get a free port of their own.
	 */
	int want = !a->multi && cfg->master_port >= 0 ? cfg->master_port
		   : a->multi			      ? cfg->rdzv.store_port
						      : 0,
	    rc;

	if (a->wstore) {
		/* The previous round's workers are gone; so is their store. */
		store_server_close(a->wstore, NULL, NULL);
		a->wstore = NULL;
	}
	if (!cfg->agent_store)
		return reserve_port(a, port);
	/*
	 * The static backend on several nodes, as torchrun's: the workers use
	 * the store on --master_port itself (PyTorch keeps each generation's
	 * keys under /worker/attempt_<n>). Not behind a rendezvous secret,
	 * which PyTorch's clients cannot prove: then they get a store of
	 * their own, said once.
	 */
	if (a->multi && strcmp(cfg->rdzv_backend, "static") == 0 && want == 0 &&
	    rs != NULL) {
		if (cfg->rdzv.secret_file == NULL) {
			*port = store_server_port(rs);
			return 0;
		}
		if (round == 0)
			log_say("the workers' store cannot share --master_port "
				"with "
				"a rendezvous secret (PyTorch's clients cannot "
				"prove it): it gets a port of its own (pin one "
				"with "
				"--rdzv_conf=store_port=P)");
	}
	rc = store_server_new(&a->loop, NULL, want, &a->cfg->store, &a->wstore);
	if (rc)
		return rc;
	store_server_set_quiet(a->wstore, 1);
	*port = store_server_port(a->wstore);
	return agent_confine_store(a);
}

/* Name the ranks that do not reach the workers' store (initdiag.h). */
static void agent_diag_start(struct agent *a)
{
	const struct rdzv_result *res = &a->res;
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
	r.ops = a->rs ? &rdzv_store_ops : a->re ? &rdzv_etcd_ops : NULL;
	r.kv = a->rs ? (void *)a->rs : (void *)a->re;
	snprintf(prefix, sizeof(prefix), "crun/%s/r%d/", res->run_id,
		 a->rdzv ? rdzv_round(a->rdzv) : 0);
	r.prefix = prefix;
	/* A record not there yet blocks the rendezvous channel this long. */
	r.read_ms = a->re ? 1000 : 500;
	r.wstore = a->wstore;
	r.peers = a->rdzv ? rdzv_peers(a->rdzv) : NULL;
	initdiag_start(a->diag, &r);
}

/* A worker of the round started: say so, and where it is bound. */
static void agent_on_worker_started(struct pool *p, struct worker *w,
				    void *data)
{
	struct agent *a = data;
	int rank = a->round.ranks.base_rank + w->local_rank;

	(void)p;
	events_emit(a->ev, "crun.worker.started",
		    json_pack("{s:i, s:i, s:i}", "local_rank", w->local_rank,
			      "rank", rank, "pid", (int)w->pid));
	agent_report_binding(a, w->local_rank, rank);
}

/* A round is formed: start this node's workers with its result. */
static void agent_round_ready(struct agent *a, const struct rdzv_result *res)
{
	struct crun_cfg *cfg = a->cfg;
	struct worker_round *rp = &a->round;

	memset(rp, 0, sizeof(*rp));
	rp->ranks = res->ranks;
	rp->restart_count = res->round;
	rp->master_addr = res->master_addr;
	rp->master_port = res->master_port;
	rp->use_agent_store = cfg->agent_store;
	a->state = A_RUNNING;
	a->stop.reason = STOP_NONE;
	/* No log directory: no worker can start (the messages are out). */
	if ((a->multi && !a->logs_ready && agent_setup_logs(a)) ||
	    make_attempt_dir(a, res->round)) {
		pool_fail(&a->pool, cfg->nproc_per_node);
		return;
	}
	a->logs_ready = 1;
	rp->attempt_dir = a->attempt_dir;
	if (a->multi)
		log_say(
		    "round %d: group rank %d of %d, ranks %d-%d of %d, store "
		    "%s:%d",
		    res->round, res->ranks.group_rank,
		    res->ranks.group_world_size, res->ranks.base_rank,
		    res->ranks.base_rank + res->ranks.local_world_size - 1,
		    res->ranks.world_size, res->master_addr, res->master_port);

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
		/* Left out for failing, and the job succeeded without us. */
		log_say("%s; exiting with status 0", rdzv_errmsg(r));
		agent_finish(a, 0);
		return;
	}
	if (status) {
		envcheck_report(a->ev, r, NULL, a->cfg->env_check);
		log_say("%s", rdzv_errmsg(r));
		agent_finish(a, 1);
		return;
	}
	a->res = *res;
	if (a->cfg->rdzv_id == NULL || strcmp(a->cfg->rdzv_id, res->run_id)) {
		free(a->cfg->rdzv_id);
		a->cfg->rdzv_id = strdup(res->run_id);
	}
	events_context(a->ev, res->run_id, rdzv_round(r), res->round);
	envcheck_report(a->ev, r, res, a->cfg->env_check);
	events_emit(a->ev, "crun.rdzv.closed",
		    json_pack("{s:i, s:i, s:i, s:i, s:s, s:i}", "group_rank",
			      res->ranks.group_rank, "group_world_size",
			      res->ranks.group_world_size, "world_size",
			      res->ranks.world_size, "base_rank",
			      res->ranks.base_rank, "master_addr",
			      res->master_addr, "master_port",
			      res->master_port));
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
		events_emit(a->ev, "crun.rdzv.joining", NULL);
		rc = rdzv_next(a->rdzv, agent_on_round, a);
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
	if (a->port_fd >= 0) {
		close(a->port_fd);
		a->port_fd = -1;
	}
	rc = agent_start_master(a, res->round, &res->master_port);
	if (rc) {
		log_say("cannot start the workers' store: %s",
			crun_strerror(rc));
		agent_finish(a, 1);
		return;
	}
	events_context(a->ev, cfg->rdzv_id, res->round, res->round);
	agent_round_ready(a, res);
}

/* --- start and finish --------------------------------------------------- */

static int rm_entry(const char *path, const struct stat *st, int flag,
		    struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
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

/* Close every handle; the loop then runs dry and agent_run returns. */
static void agent_finish(struct agent *a, int status)
{
	if (a->state == A_DONE)
		return;
	a->state = A_DONE;
	a->stop.exit_status = status;
	events_emit(a->ev, "crun.agent.exited",
		    json_pack("{s:i}", "status", status));
	metrics_close(a->metrics);
	a->metrics = NULL;
	if (status != 0)
		agent_write_error_file(a, status);
	agent_drop_report(a, 0);
	for (int i = 0; i < a->nsigs; i++)
		uv_close((uv_handle_t *)&a->sigs[i], NULL);
	uv_close((uv_handle_t *)&a->winch, NULL);
	pool_close(&a->pool);
	if (a->console)
		console_close(a->console);
	procs_close(a->procs, NULL, NULL);
	a->procs = NULL;
	filetimer_close(a->ft);
	a->ft = NULL;
	initdiag_close(a->diag);
	if (a->port_fd >= 0) {
		close(a->port_fd);
		a->port_fd = -1;
	}
	if (a->wstore) {
		store_server_close(a->wstore, NULL, NULL);
		a->wstore = NULL;
	}
	peers_free(a->peers);
	a->peers = NULL;
	/* The rendezvous first: the store's pending replies then find it done.
	 */
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
	events_emit(a->ev,
		    readmitted ? "crun.node.readmitted" : "crun.node.excluded",
		    json_pack("{s:s, s:s, s:s, s:I, s:i, s:b}", "node_host",
			      x->host, "node_addr", x->addr, "reason", why,
			      "until", (json_int_t)x->until, "since_round",
			      x->round, "self", self));
}

/* The backend is open: start the rendezvous over it. */
static void agent_rdzv_begin(struct agent *a, const struct rdzv_kv_ops *ops,
			     void *kv, int is_host)
{
	struct crun_cfg *cfg = a->cfg;
	struct rdzv_opts o;
	int rc;

	if (is_host && cfg->rdzv_id == NULL)
		cfg->rdzv_id = make_run_id(a->host);
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
	o.start_master = agent_start_master;
	o.data = a;
	o.env_check = cfg->env_check;
	o.fingerprint_wait = envcheck_wait(&a->ec, cfg);
	o.exclude_after = cfg->rdzv.exclude_after;
	o.exclude_for = cfg->rdzv.exclude_for;
	o.on_exclusion = agent_on_exclusion;
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
		agent_finish(a, 1);
		return;
	}
	envcheck_attach(&a->ec, a->rdzv);
	agent_round_start(a);
}

static void agent_on_rs_open(struct crun_rdzv_store *rs, int status, void *data)
{
	struct agent *a = data;

	if (status) {
		log_say("%s", rdzv_store_errmsg(rs));
		agent_finish(a, 1);
		return;
	}
	agent_rdzv_begin(a, &rdzv_store_ops, rs, rdzv_store_is_host(rs));
}

static void agent_on_re_open(struct crun_rdzv_etcd *re, int status, void *data)
{
	struct agent *a = data;

	if (status) {
		log_say("%s", rdzv_etcd_errmsg(re));
		agent_finish(a, 1);
		return;
	}
	agent_rdzv_begin(a, &rdzv_etcd_ops, re, 0);
}

/* etcd: every agent is a client of the cluster; nobody hosts anything. */
static int agent_etcd_start(struct agent *a)
{
	struct crun_cfg *cfg = a->cfg;
	struct rdzv_etcd_opts o;
	char errmsg[512] = "";
	int rc;

	if (*cfg->rdzv_endpoint == '\0') {
		log_say(
		    "--rdzv_backend=etcd needs --rdzv_endpoint=HOST[:PORT],... "
		    "naming etcd members");
		return CRUN_EUSAGE;
	}
	if (cfg->rdzv_id == NULL)
		cfg->rdzv_id = strdup("none"); /* torchrun's default */
	if (cfg->rdzv.secret_file)
		log_say(
		    "secret_file guards c10d's store; etcd is guarded by its "
		    "own auth and TLS (user, password_file, cacert, cert, "
		    "key)");
	memset(&o, 0, sizeof(o));
	o.endpoints = cfg->rdzv_endpoint;
	o.https = cfg->rdzv.https;
	o.cacert = cfg->rdzv.cacert;
	o.cert = cfg->rdzv.cert;
	o.key = cfg->rdzv.key;
	o.user = cfg->rdzv.user;
	o.password_file = cfg->rdzv.password_file;
	o.prefix = cfg->rdzv.etcd_prefix;
	o.run_id = cfg->rdzv_id;
	o.lease_ttl = cfg->rdzv.lease_ttl;
	o.timeout = cfg->rdzv.read_timeout;
	o.lim.turn_bytes = cfg->rdzv.etcd_turn_bytes;
	o.lim.turn_msgs = cfg->rdzv.etcd_turn_messages;
	o.lim.max_message = cfg->rdzv.etcd_max_message;
	o.lim.max_json_items = cfg->rdzv.etcd_max_json_items;
	o.lim.backoff_ms = (unsigned)(cfg->rdzv.etcd_backoff * 1000 + 0.5);
	o.lim.backoff_max_ms =
	    (unsigned)(cfg->rdzv.etcd_backoff_max * 1000 + 0.5);
	o.errmsg = errmsg;
	o.errlen = sizeof(errmsg);
	rc = rdzv_etcd_open(&a->loop, &o, agent_on_re_open, a, &a->re);
	if (rc)
		log_say("%s", *errmsg ? errmsg : crun_strerror(rc));
	return rc;
}

/* Multi-node: host or reach the rendezvous store, then join rounds. */
static int agent_multi_start(struct agent *a)
{
	struct crun_cfg *cfg = a->cfg;
	struct rdzv_store_opts o;
	struct crun_auth_key key;
	char host[256], errmsg[512] = "";
	int port, rc, is_static = strcmp(cfg->rdzv_backend, "static") == 0;

	if (strcmp(cfg->rdzv_backend, "etcd") == 0)
		return agent_etcd_start(a);
	if (*cfg->rdzv_endpoint == '\0' ||
	    cfg_split_endpoint(cfg->rdzv_endpoint, host, sizeof(host), &port)) {
		log_say(
		    "multi-node runs need --rdzv_endpoint=HOST[:PORT] (c10d) "
		    "or "
		    "--master_addr/--master_port (static)");
		return CRUN_EUSAGE;
	}
	memset(&o, 0, sizeof(o));
	o.host = host;
	o.port = port >= 0 ? port : is_static ? 29500 : 29400;
	o.is_host = cfg->rdzv.is_host;
	if (o.is_host < 0 && is_static)
		o.is_host = cfg->node_rank == 0;
	/* As torchrun's TCPStore client: give up reaching the host after
	 * read_timeout (and never later than the join deadline). */
	o.timeout_ms =
	    (int)(1000 * (cfg->rdzv.read_timeout < cfg->rdzv.join_timeout
			      ? cfg->rdzv.read_timeout
			      : cfg->rdzv.join_timeout));
	o.limits = &cfg->store;
	o.errmsg = errmsg;
	o.errlen = sizeof(errmsg);
	if (cfg->rdzv.secret_file) { /* the rendezvous secret (auth.h) */
		rc = auth_key_load(cfg->rdzv.secret_file, &key, errmsg,
				   sizeof(errmsg));
		if (rc) {
			log_say("%s", errmsg);
			return CRUN_ECONFIG;
		}
		o.auth = &key;
	}
	rc = rdzv_store_open(&a->loop, &o, agent_on_rs_open, a, &a->rs);
	sodium_memzero(&key, sizeof(key));
	if (rc)
		log_say("%s", *errmsg ? errmsg : crun_strerror(rc));
	return rc;
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
			  agent_owns_pid, a, &a->ft, errmsg, sizeof(errmsg))) {
		log_say("%s", errmsg);
		return -1;
	}
	setenv("TORCHELASTIC_TIMER_FILE", filetimer_path(a->ft), 1);
	return 0;
}

/* A unique run id: torchrun's default "none" makes unrelated jobs collide. */
static char *make_run_id(const char *host)
{
	unsigned char rnd[6];
	char buf[128];
	int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);

	memset(rnd, 0, sizeof(rnd));
	if (fd >= 0) {
		if (read(fd, rnd, sizeof(rnd)) < 0)
			rnd[0] = (unsigned char)getpid();
		close(fd);
	}
	snprintf(buf, sizeof(buf), "crun-%.32s-%02x%02x%02x%02x%02x%02x", host,
		 rnd[0], rnd[1], rnd[2], rnd[3], rnd[4], rnd[5]);
	return strdup(buf);
}

static int agent_setup_logs(struct agent *a)
{
	const char *dir = a->cfg->log_dir;
	char path[PATH_MAX];

	if (dir && strcmp(dir, "/dev/null") == 0)
		return 0; /* no files at all, as newer torchrun */
	if (dir == NULL) {
		const char *tmp = getenv("TMPDIR");

		snprintf(path, sizeof(path), "%s/crun_XXXXXX",
			 tmp && *tmp ? tmp : "/tmp");
		if (mkdtemp(path) == NULL) {
			log_say("cannot create a log directory in '%s': %s",
				tmp && *tmp ? tmp : "/tmp", strerror(errno));
			return -errno;
		}
		a->log_root_tmp = 1;
		dir = path;
		for (int i = 0; i < a->cfg->nproc_per_node; i++)
			a->log_kept |= cfg_std_for(&a->cfg->redirects, i) |
				       cfg_std_for(&a->cfg->tee, i);
	} else if (mkdir(dir, 0755) && errno != EEXIST) {
		log_say("cannot create log directory '%s': %s", dir,
			strerror(errno));
		return -errno;
	}
	/*
	 * <dir>/<run_id>_<random>, as torchrun: reruns of a job with a fixed
	 * --rdzv_id, and nodes sharing one log_dir, never mix their files.
	 */
	a->log_root = malloc(strlen(dir) + strlen(a->cfg->rdzv_id) + 9);
	snprintf(a->log_root, strlen(dir) + strlen(a->cfg->rdzv_id) + 9,
		 "%s/%s_XXXXXX", dir, a->cfg->rdzv_id);
	if (mkdtemp(a->log_root) == NULL || chmod(a->log_root, 0755)) {
		log_say("cannot create log directory '%s': %s", a->log_root,
			strerror(errno));
		return -errno;
	}
	if (a->log_root_tmp && a->log_kept)
		log_say("worker logs go to %s (no --log_dir given)",
			a->log_root);
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

static int agent_run_loop(struct crun_cfg *cfg)
{
	struct worker_ctx wctx;
	struct agent a;
	int rc;

	memset(&a, 0, sizeof(a));
	a.cfg = cfg;
	a.started = worker_wall_time();
	a.port_fd = -1;
	a.restarts_left = cfg->max_restarts;
	if (gethostname(a.host, sizeof(a.host) - 1))
		snprintf(a.host, sizeof(a.host), "localhost");
	a.multi = cfg->nnodes_max > 1;
	{
		char note[256];

		nofile_budget(cfg, note, sizeof(note));
		if (*note)
			log_say("%s", note);
	}
	if (cfg->rdzv_id == NULL && !a.multi)
		cfg->rdzv_id = make_run_id(a.host);
	if (cfg->bind_mode != CRUN_BIND_NONE) {
		char errmsg[512];

		/* Before any fork: the children only apply it. */
		if (binding_plan_system(cfg->bind_mode, cfg->nproc_per_node,
					&a.binding, errmsg, sizeof(errmsg))) {
			log_say("%s", errmsg);
			return 1;
		}
		if (cfg->verbose)
			log_say("binding: %s from %s",
				binding_mode_name(a.binding->mode),
				a.binding->source);
		for (char *p = a.binding->notes, *nl; (nl = strchr(p, '\n'));
		     p = nl + 1)
			log_say("binding: %.*s", (int)(nl - p), p);
	}

	rc = uv_loop_init(&a.loop);
	if (rc) {
		log_say("cannot start the event loop: %s", crun_strerror(rc));
		return 1;
	}
	uv_signal_init(&a.loop, &a.winch);
	a.winch.data = &a;
	uv_signal_start(&a.winch, agent_on_winch, SIGWINCH);
	uv_unref((uv_handle_t *)&a.winch);
	if (console_new(&a.loop,
			cfg->console_buffer ? cfg->console_buffer
					    : CONSOLE_LIMIT,
			&a.console) == 0)
		the_console = a.console;
	rc = procs_new(&a.loop, &a.procs);
	if (rc) {
		log_say("cannot watch child processes: %s", crun_strerror(rc));
		return 1;
	}
	wctx.loop = &a.loop;
	wctx.procs = a.procs;
	wctx.console = a.console;
	wctx.cfg = cfg;
	wctx.binding = a.binding;
	wctx.environ = environ;
	pool_init(&a.pool, &wctx, agent_on_worker_exit, agent_on_worker_started,
		  agent_on_pool_done, &a);
	for (int i = 0; i < cfg->nsignals; i++) {
		uv_signal_init(&a.loop, &a.sigs[a.nsigs]);
		a.sigs[a.nsigs].data = &a;
		if (uv_signal_start(&a.sigs[a.nsigs], agent_on_signal,
				    cfg->signals[i]) == 0)
			a.nsigs++;
		else
			uv_close((uv_handle_t *)&a.sigs[a.nsigs], NULL);
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

	if (cfg->event_log) {
		char errmsg[512];

		if (events_open(cfg->event_log, a.host, &a.ev, errmsg,
				sizeof(errmsg))) {
			log_say("%s", errmsg);
			agent_finish(&a, 1);
		}
		events_context(a.ev, cfg->rdzv_id, -1, -1);
		events_emit(a.ev, "crun.agent.started",
			    json_pack("{s:i, s:i, s:i, s:s, s:i}", "nnodes_min",
				      cfg->nnodes_min, "nnodes_max",
				      cfg->nnodes_max, "nproc_per_node",
				      cfg->nproc_per_node, "backend",
				      cfg->rdzv_backend, "pid", (int)getpid()));
	}
	if (initdiag_new(&a.loop, cfg->init_warn_after, a.ev, &a.diag))
		agent_finish(&a, 1);
	if (a.multi && a.state != A_DONE) {
		char first[64];

		/* Blocking (getaddrinfo): before the loop runs. */
		a.name_unresolved =
		    netif_name_state(a.host, first, sizeof(first)) ==
		    NETIF_NAME_UNRESOLVED;
		netcheck_ifname(cfg, a.host);
	}
	if (a.state == A_DONE) {
		/* the event log could not be opened */
	} else if (agent_start_metrics(&a)) {
		agent_finish(&a, 1);
	} else if (agent_start_watchdog(&a)) {
		agent_finish(&a, 1);
	} else if (a.multi) {
		envcheck_start(&a.ec, &a.loop, cfg);
		if (agent_multi_start(&a))
			agent_finish(&a, 1);
	} else if (agent_setup_logs(&a) == 0) {
		agent_round_start(&a);
	} else {
		agent_finish(&a, 1);
	}

	uv_run(&a.loop, UV_RUN_DEFAULT);
	rc = uv_loop_close(&a.loop);
	if (rc)
		log_say("internal error: event loop closed with handles open");
	/*
	 * What a slow reader has not taken yet, bounded: then we exit (at
	 * once, nearly, when a signal stopped us). Our signal handlers are
	 * gone: another signal now ends crun.
	 */
	the_console = NULL;
	console_free(a.console, a.stop.signal ? 1000 : CONSOLE_STALL_MS);

	/* A log directory crun invented is removed after a success. */
	if (a.log_root_tmp && !a.log_kept && a.stop.exit_status == 0 &&
	    a.log_root) {
		char *parent = strdup(a.log_root);

		nftw(a.log_root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
		if (parent && strrchr(parent, '/')) {
			*strrchr(parent, '/') = '\0';
			rmdir(parent);
		}
		free(parent);
	}
	initdiag_free(a.diag);
	events_close(a.ev);
	binding_plan_free(a.binding);
	free(a.log_root);
	free(a.attempt_dir);
	return a.stop.exit_status;
}

int agent_run(struct crun_cfg *cfg)
{
	int rc;

	log_set_sink(agent_on_log, NULL);
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
	struct crun_store_server *srv[2] = {a->rs && rdzv_store_is_host(a->rs)
						? rdzv_store_server(a->rs)
						: NULL,
					    a->wstore};
	int failing = a->stop.reason == STOP_FAILURE ||
		      a->stop.peer.kind == RDZV_END_FAILURE;

	snprintf(s->host, sizeof(s->host), "%s", a->host);
	snprintf(s->run_id, sizeof(s->run_id), "%s",
		 a->cfg->rdzv_id ? a->cfg->rdzv_id : "");
	snprintf(s->backend, sizeof(s->backend), "%s", a->cfg->rdzv_backend);
	s->state =
	    a->state == A_STOPPING && failing ? "failed" : states[a->state];
	s->reason = a->state != A_STOPPING	    ? ""
		    : failing			    ? "worker failed"
		    : a->stop.reason == STOP_SIGNAL ? "signal"
						    : "round ended elsewhere";
	s->started = a->started;
	s->formed = a->multi ? a->rdzv && a->res.ranks.world_size > 0
			     : a->res.ranks.world_size > 0;
	s->round = a->multi && a->rdzv ? rdzv_round(a->rdzv) : a->res.round;
	s->generation = a->res.round;
	s->group_rank = rk->group_rank;
	s->group_world_size = rk->group_world_size;
	s->world_size = rk->world_size;
	s->base_rank = rk->base_rank;
	s->local_world_size = rk->local_world_size;
	s->max_restarts = a->cfg->max_restarts;
	s->restarts_used =
	    a->multi && a->rdzv ? rdzv_restarts(a->rdzv) : a->restart_count;
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
	if (a->multi && a->rdzv)
		s->nexcluded =
		    rdzv_excluded(a->rdzv, s->excluded, RDZV_MAX_EXCLUDED);
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
	if (metrics_new(&a->loop, &o, &a->metrics, errmsg, sizeof(errmsg))) {
		log_say("%s", errmsg);
		return -1;
	}
	snprintf(url, sizeof(url),
		 strchr(cfg->metrics_addr, ':') ? "http://[%s]:%d"
						: "http://%s:%d",
		 cfg->metrics_addr, metrics_port(a->metrics));
	log_say("metrics on %s/metrics, health on %s/healthz", url, url);
	events_emit(a->ev, "crun.metrics.listening",
		    json_pack("{s:s, s:i, s:s}", "addr", cfg->metrics_addr,
			      "port", metrics_port(a->metrics), "url", url));
	return 0;
}

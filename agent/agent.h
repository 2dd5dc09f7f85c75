/*
 * The agent's own state, shared by its core files (and only by them: its
 * parts and the leaves under it, nodes.h, hang.h, pool.h, worker.h,
 * initdiag.h, metrics.h, ..., never include this header).
 *
 *   agent.c        the owner: the ROUND / RUNNING / STOPPING / DONE
 *                  machine, signals, the agent's start and finish
 *   agent_store.c  the workers' store of a round (its port, who may reach it)
 *   agent_logs.c   log directories, failure reports, the error file and the
 *                  console as log.h's sink
 *   agent_stacks.c `crun status --stacks`: this node's live stacks, answered
 *
 * The parts and leaves, each with its own header, struct and prefix, called
 * downward only and reporting back through the callbacks they were created
 * with:
 *
 *   nodes.c    several nodes: the rendezvous backend, the rendezvous, how
 *              a round that ended decides the job (stop.h: the record it
 *              shares with agent.c)
 *   hang.c     a hung job (--stall_timeout): every rank's place, said once
 *   pool.c     the workers of a round: start, signal, kill timer, done count
 *   worker.c   one worker: argv, environment, spawn, where its output goes
 *   stream.c   one output stream: pipe, tee file, console lines, tail
 *   group.c    a worker's process group after the worker exited
 *   stacks.c   workers' stacks before a kill (py-spy, faulthandler, /proc)
 *   initdiag.c which ranks do not reach the workers' store, and why
 *   envcheck.c this node's environment fingerprint (--env_check)
 *   stall.c    whether any rank progresses (progress.c: from /proc)
 *   metrics.c, events.c, filetimer.c, console.c, netcheck.c, nofile.c
 *
 * Functions shared by the core files are agent__name (libuv's uv__ style).
 */
#ifndef CRUN_AGENT_H
#define CRUN_AGENT_H

#include <limits.h>
#include <uv.h>

#include "crun/binding.h"
#include "crun/cfg.h"
#include "crun/log.h"
#include "crun/peers.h"
#include "crun/rdzv.h"
#include "crun/report.h"
#include "crun/store.h"
#include "agent_run.h"
#include "envcheck.h"
#include "pool.h"
#include "stop.h"

struct agent_stacks;
struct console;
struct events;
struct filetimer;
struct initdiag;
struct metrics;
struct nodes;
struct hang;
struct stall;

struct torchprobe;

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
	char *log_tag;	  /* scratch files only: <log_root>/<log_tag>.* */
	int log_private;  /* ... in a directory of the run's own */
	char **scratch;	  /* with log_tag: every attempt's prefix, named so */
	int nscratch;
	char *attempt_dir;    /* <log_root>/attempt_<n>, NULL with log_tag */
	char *attempt_prefix; /* what the attempt's file names start with */
	int restart_count;
	int restarts_left;
	enum agent_state state;
	struct agent_stop stop;
	struct pool pool; /* the round's workers */
	int port_fd;	  /* MASTER_PORT held for the round */
	struct worker_round round;

	/* Multi-node: the rendezvous and the backend it runs over. */
	int multi;
	struct nodes *nodes; /* nodes.h */
	struct rdzv_result res;
	int name_unresolved; /* the host name does not resolve */
	struct crun_failure *pending_report;
	int npending;
	int error_file_done; /* TORCHELASTIC_ERROR_FILE written */
	char report_path[PATH_MAX];

	struct filetimer *ft;	 /* TORCHELASTIC_ENABLE_FILE_TIMER's watchdog */
	struct events *ev;	 /* --event_log, or NULL */
	struct metrics *metrics; /* --metrics_port, or NULL */
	struct initdiag *diag;	 /* --init_warn_after */
	struct stall *stall;	 /* --stall_timeout */
	struct hang *hang;	 /* a hang being reported (hang.h) */
	struct console *console; /* our stdout and stderr, never blocking */

	/* The workers' store of the current round (agent store mode). */
	struct crun_store_server *wstore;
	struct crun_peers *peers; /* who may reach it (store_allow=round) */
	int store_survivors; /* pool.survivors when it was started */
	/* This node's relay to the round's workers' store (store_relay). */
	struct crun_store_relay *relay;
	char relay_up[300]; /* the workers' store it relays to: "addr:port" */
	int logs_ready;
	double started;
	struct crun_binding_plan *binding; /* NULL: workers inherit ours */
	struct torchprobe *probe; /* asking the workers' torch, or NULL */
	int worker_store; /* their torch cannot use the agent store (no libuv,
			     or older than it): worker rank 0 hosts it */
	struct agent_stacks *stacks; /* a `crun status --stacks` being taken */
};

/* agent_store.c */
/** rdzv_opts.start_master: the workers' store of round (or a free port). */
int agent__start_master(void *data, int round, int *port, int *by_worker);
/**
 * With store_relay, start this node's relay to rp's workers' store and point
 * rp (the workers' MASTER_ADDR/MASTER_PORT) at it; 0 or an error.
 */
int agent__start_relay(struct agent *a, struct worker_round *rp);
/** Close this node's relay of the round (if any). */
void agent__stop_relay(struct agent *a);

/* agent_stacks.c */
/** rdzv_opts.on_stacks: take this node's live stacks and answer. */
void agent__on_stacks(void *data, const char *nonce);
/** Abandon the stacks being taken (their answer is never written). */
void agent__stacks_close(struct agent *a);

/* agent_logs.c */
/** log.h's sink while the agent runs: every line, on the console. */
void agent__on_log(void *data, enum log_level level, const char *line,
		   size_t len, const char *msg);
/** The console lines go to from now on (NULL: straight to the fds). */
void agent__set_console(struct console *c);
/** $TMPDIR/crun-<uid>, the user's own (made if need be): 0, or an error. */
int agent__user_dir(char *path, size_t len);
int agent__setup_logs(struct agent *a);
/**
 * Name the files of attempt <generation>: create <log_root>/attempt_<n>/
 * (a directory that exists is never reused), or, for scratch files only,
 * the prefix <log_root>/<log_tag>.attempt_<n>. of its error files.
 */
int agent__attempt_dir(struct agent *a, int generation);
/** Collect the failures of the round that just ended; returns how many. */
int agent__collect_failures(struct agent *a, struct crun_failure **out);
/** Print (print != 0) and forget the round's pending failure report. */
void agent__drop_report(struct agent *a, int print);
/** TORCHELASTIC_ERROR_FILE of crun's own environment, written once. */
void agent__write_error_file(struct agent *a, int status);
/** A log directory crun invented is removed after a success. */
void agent__remove_logs(struct agent *a);

#endif

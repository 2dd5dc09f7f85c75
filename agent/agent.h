/*
 * The per-node agent: one libuv loop that runs rounds of "meet the other
 * nodes, start the worker group, watch it, stop it" until the job succeeds,
 * fails for good, or is told to stop. worker.c holds one worker (its process
 * and output streams); agent.c the group's lifecycle. Private to agent/.
 */
#ifndef CRUN_AGENT_H
#define CRUN_AGENT_H

#include <uv.h>

#include "crun/binding.h"
#include "crun/cfg.h"
#include "crun/env.h"
#include "crun/linebuf.h"
#include "crun/proc.h"
#include "crun/tail.h"
#include "agent_run.h"

struct agent;

/* One output stream of a worker: a pipe the agent reads, or nothing. */
struct wstream {
	struct worker *w;
	uv_pipe_t pipe;
	int open;		/* the pipe handle is initialised */
	int console_fd;		/* 1, 2, or -1: not on the console */
	int file_fd;		/* tee copy, or -1 */
	int is_err;
	int pty;		/* the worker writes to a pseudo-terminal */
	struct crun_linebuf lb;
	int filter_fd;		/* <attempt>/filtered_std*.log, or -1 */
	struct crun_linebuf flb; /* lines for the duplicate filters */
};

/* The worker's process group once the worker has exited (group.c). */
struct wgroup {
	uv_timer_t timer;
	int active; /* the timer handle is open */
	int killed; /* SIGKILL sent */
	uint64_t deadline;
	struct crun_proc *rest; /* the worker's proc until its leftovers in
				   other groups are gone too (proc.h) */
};

struct worker {
	struct agent *a;
	int local_rank;
	struct crun_proc *proc;
	pid_t pid;
	int exited, status, signal;
	int stopped;		/* the agent signalled it */
	double exit_time;
	int handles;		/* open uv handles (pipes), its proc */
	struct wstream out, err;
	struct crun_tail tail;	/* last bytes of stderr */
	char *dir;		/* <attempt>/<local_rank>, or NULL */
	char *stderr_file;	/* stderr.log when stderr goes only there */
	char *error_file;
	struct wgroup grp;
};

/** Everything the workers of one round need to know. */
struct round {
	struct crun_ranks ranks;
	const char *master_addr;
	int master_port;
	int use_agent_store;
	int restart_count;
	const char *attempt_dir; /* NULL: no log files */
};

/** Start local_rank's worker for round r; 0 or a negative error. */
int worker_start(struct agent *a, struct worker *w, int local_rank,
		 const struct round *r, char *errmsg, size_t errlen);

/** Send sig to the worker's process group if it is still running. */
void worker_signal(struct worker *w, int sig);

/** The console's window size changed: pass it on to w's terminals. */
void worker_winch(struct worker *w);

/** Release what the worker holds once it has exited and its pipes closed. */
void worker_release(struct worker *w);

/** One of the worker's handles closed; done once all are and it exited. */
void worker_handle_closed(struct worker *w);

/** After the worker exited: stop what is left of its process group. */
void group_reap(struct worker *w);

/** Send sig to what is left of an exited worker's process group. */
void group_signal(struct worker *w, int sig);

/* Called by worker.c. */
void agent_on_worker_exit(struct agent *a, struct worker *w);
void agent_on_worker_done(struct agent *a, struct worker *w);

/* Agent internals worker.c needs. */
const struct crun_cfg *agent_cfg(const struct agent *a);
/** The workers' binding plan (binding.h), or NULL: no binding. */
const struct crun_binding_plan *agent_binding(const struct agent *a);
struct crun_procs *agent_procs(const struct agent *a);
uv_loop_t *agent_loop(const struct agent *a);

/** Wall-clock time in epoch seconds (for reports, not for timeouts). */
double agent_wall_time(void);
char **agent_base_env(const struct agent *a);

/** The agent's console (console.h), for batching worker lines. */
struct console *agent_con(const struct agent *a);

/**
 * Raise RLIMIT_NOFILE's soft limit to the hard one and cap cfg's store
 * connections below it, with a reserve for the workers (nofile.c). Returns
 * the cap; note gets a warning line when fds are scarce, else "".
 */
size_t nofile_budget(struct crun_cfg *cfg, char *note, size_t len);

/**
 * Multi-node: warn (or set GLOO_SOCKET_IFNAME, when asked) if host's name
 * makes the workers' gloo bind to loopback. Blocking: before the loop runs.
 */
void agent_check_ifname(struct agent *a, const char *host);

#endif

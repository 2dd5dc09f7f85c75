/*
 * One worker (worker.c): its command line and environment, its process and
 * its two output streams. It is created with a small context (the loop, the
 * process registry, the console, the configuration, the binding plan, the
 * base environment) and reports to its owner through that context's
 * callbacks: it never reaches into the agent. Private to agent/.
 */
#ifndef CRUN_AGENT_WORKER_H
#define CRUN_AGENT_WORKER_H

#include <uv.h>

#include "crun/binding.h"
#include "crun/cfg.h"
#include "crun/env.h"
#include "crun/linebuf.h"
#include "crun/proc.h"
#include "crun/tail.h"
#include "group.h"
#include "stream.h"

struct console;
struct worker;

/** The worker's process exited (its pipes drained): status and signal set. */
typedef void (*worker_exit_cb)(struct worker *w, void *data);
/** The worker exited and every handle it held is closed. */
typedef void (*worker_done_cb)(struct worker *w, void *data);

/* What every worker of the agent gets; it must outlive them. */
struct worker_ctx {
	uv_loop_t *loop;
	struct crun_procs *procs; /* proc.h: spawns and watches */
	struct console *console;  /* console.h: the agent's stdout/stderr */
	const struct crun_cfg *cfg;
	const struct crun_binding_plan *binding; /* NULL: inherit ours */
	/* The workers' base environment; NULL: crun's own, as it is when
	 * each worker starts (setenv may move it meanwhile). */
	char **envp;
	worker_exit_cb on_exit;
	worker_done_cb on_done;
	void *data;
};

/** Everything the workers of one round need to know. */
struct worker_round {
	struct crun_ranks ranks;
	const char *master_addr;
	int master_port;
	int use_agent_store;	   /* TORCHELASTIC_USE_AGENT_STORE */
	int use_agent_store_host;  /* the agent hosts it (maybe not ours) */
	int no_libuv;		   /* their torch refuses libuv: USE_LIBUV=0 */
	int restart_count;
	const char *attempt_dir;  /* NULL: no log files, no rank directories */
	const char *error_prefix; /* without attempt_dir: <prefix><rank>.error.json */
};

struct worker {
	const struct worker_ctx *ctx;
	int local_rank;
	struct crun_proc *proc;
	struct crun_proc *starting; /* begun, its exec's outcome not read */
	char *prog;		    /* argv[0] meanwhile, for the message */
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
	char *ckpt_file; /* $CRUN_CHECKPOINT_FILE (grace.h), or NULL */
	struct wgroup grp;	/* its process group after it exited */
	struct crun_proc *rest; /* its proc until its leftovers in other
				   groups are gone too (proc.h) */
	int python;	/* it runs a Python interpreter */
	int abandoned;	/* it survived SIGKILL: given up on */
	char *stacks;	/* its stack, taken before it was killed */
};

/** Wall-clock time in epoch seconds (for reports, not for timeouts). */
double worker_wall_time(void);

/** Zero w and give it ctx and its local rank; nothing is open yet. */
void worker_init(struct worker *w, const struct worker_ctx *ctx,
		 int local_rank);

/**
 * Start local_rank's worker for round r, in two halves (proc.h's
 * proc_spawn_begin/end) so that a round's workers start at once: begin sets
 * everything up and forks, end waits for the exec. Each returns 0 or a
 * negative error (errmsg set); on error the worker counts as exited with 127
 * (worker_fail) and its on_done comes once its handles are closed (at once
 * if none was open). A begun worker that is not wanted any more (an earlier
 * rank failed) goes to worker_start_cancel instead of end: it counts as
 * exited and stopped, never as failed.
 */
int worker_start_begin(struct worker *w, const struct worker_ctx *ctx,
		       int local_rank, const struct worker_round *r,
		       char *errmsg, size_t errlen);
int worker_start_end(struct worker *w, char *errmsg, size_t errlen);
void worker_start_cancel(struct worker *w);

/** w never ran: it counts as exited with 127, at this time. */
void worker_fail(struct worker *w);

/** Send sig to the worker's process group if it is still running. */
void worker_signal(struct worker *w, int sig);

/** SIGKILL to the worker's group, as a failure (not marked stopped). */
void worker_kill(struct worker *w);

/**
 * The worker survived SIGKILL (state D): stop waiting for it. It counts as
 * exited by SIGKILL (on_exit, then on_done once its pipes are closed); its
 * process is left to the kernel (proc_abandon).
 */
void worker_abandon(struct worker *w);

/**
 * Show text (a stack crun took of the worker) as if the worker had written
 * it to its stderr: on the console with its prefix, in its tee file and its
 * stderr tail.
 */
void worker_inject(struct worker *w, const char *text, size_t len);

/** The last lines of w's stderr (the caller frees), or NULL. */
char *worker_stderr_end(struct worker *w, int max_lines);

/** The console's window size changed: pass it on to w's terminals. */
void worker_winch(struct worker *w);

/** Read the end of stderr.log into the tail when stderr went only there. */
void worker_tail_from_file(struct worker *w);

/** A scratch error file's name, <prefix><local_rank>.error.json (malloc'd). */
char *worker_error_file(const char *prefix, int local_rank);

/** Release what the worker holds once it has exited and its pipes closed. */
void worker_release(struct worker *w);

#endif

/*
 * Child processes on a libuv loop, the way git's run-command and libuv's
 * uv_spawn do it, plus what uv_spawn cannot do: the child gets a parent-death
 * signal (so workers die with their agent, even when the agent is SIGKILLed)
 * and its own process group (so a signal reaches the worker's whole tree).
 * Exits arrive as events: one SIGCHLD watcher per registry reaps registered
 * children with waitpid(pid, WNOHANG); nothing polls. Each child runs under
 * a tiny guard process (a fork of the caller that never execs) that is a
 * child subreaper: when the caller is SIGKILLed, the guard SIGKILLs the
 * child's process group and every descendant handed to it, so grandchildren
 * do not outlive the caller either. When the child exits, its exit is
 * reported at once, and the guard stops what it left behind (SIGTERM, then
 * SIGKILL after rest_grace_ms), in whatever session or process group; the
 * proc ends when nothing of it is left. The guard exits with the child's
 * status.
 */
#ifndef CRUN_PROC_H
#define CRUN_PROC_H

#include <sched.h>
#include <sys/types.h>
#include <uv.h>

struct crun_procs;
struct crun_proc;

/**
 * Called once when the child has exited. status is the exit code, or 128+N
 * when the child died of signal N (term_signal is then N, otherwise 0). The
 * crun_proc stays valid until done_cb: proc_kill then signals what the child
 * left behind.
 */
typedef void (*proc_exit_cb)(struct crun_proc *p, int status, int term_signal);

/**
 * Called once after exit_cb, when everything the child left behind (its
 * descendants, in any session or process group) is gone too. After the
 * callback the crun_proc is freed.
 */
typedef void (*proc_done_cb)(struct crun_proc *p);

struct proc_opts {
	char **argv;	 /* argv[0] is looked up in PATH if it has no '/' */
	char **envp;	 /* the complete environment; NULL: inherit */
	const char *cwd; /* NULL: inherit */
	int fd_in, fd_out,
	    fd_err; /* child's 0/1/2; -1: /dev/null for 0, inherit for 1/2 */
	int pdeath_signal; /* sent to the child when crun dies; 0: SIGKILL */
	int own_group;	   /* 1: setpgid(0, 0) in the child */
	/* Binding, applied in the child before exec (binding.h). A refusal
	 * fails the spawn with CRUN_ECPUBIND or CRUN_EMEMBIND. */
	const cpu_set_t *cpus;		 /* sched_setaffinity; NULL: inherit */
	int mpol;			 /* set_mempolicy mode; 0: inherit */
	const unsigned long *mpol_nodes; /* its nodemask */
	unsigned long mpol_maxnode;	 /* bits in mpol_nodes */
	int mpol_first;			 /* MPOL_PREFERRED fallback node */
	/* What the child leaves behind gets SIGTERM at its exit, SIGKILL
	 * this much later (0: at once). */
	int rest_grace_ms;
	proc_exit_cb exit_cb;
	proc_done_cb done_cb; /* NULL: none */
	void *data;
};

/** Create a registry on loop; it owns the SIGCHLD watcher. */
int procs_new(uv_loop_t *loop, struct crun_procs **out);

/**
 * Close the registry once every proc has ended (procs_live 0: done_cb ran,
 * not only exit_cb); cb (may be NULL) runs when its handle is closed and the
 * registry freed. Live children are not signalled: stop them first
 * (procs_kill_all).
 */
void procs_close(struct crun_procs *r, void (*cb)(void *), void *arg);

/**
 * Fork and exec opts->argv. Returns 0 with *out set (owned by the registry
 * until done_cb returns), or a negative error, e.g. UV_ENOENT when the
 * program cannot be executed; on error exit_cb never runs. The caller keeps
 * ownership of its fds and may close them after the call.
 */
int proc_spawn(struct crun_procs *r, const struct proc_opts *opts,
	       struct crun_proc **out);

/**
 * proc_spawn in two halves, so that several children start at once: begin
 * forks the guard and returns at once (the caller may close its fds then);
 * end waits for the exec's outcome and returns what proc_spawn would (p is
 * freed on error). A begun proc the caller no longer wants goes to
 * proc_spawn_cancel instead: its child, if the exec succeeded, is SIGKILLed
 * and its guard reaped before it returns; exit_cb never runs.
 */
int proc_spawn_begin(struct crun_procs *r, const struct proc_opts *opts,
		     struct crun_proc **out);
int proc_spawn_end(struct crun_proc *p);
void proc_spawn_cancel(struct crun_proc *p);

/*
 * Signals that reach the workers from the console itself, not from crun:
 * on Windows Ctrl-C and Ctrl-Break go to every process of the console, so
 * proc_kill has nothing to send for them (and Ctrl-Break, which Linux has
 * not, is one more signal the agent watches there).
 */
#ifdef _WIN32
#define PROC_FROM_CONSOLE(sig) ((sig) == SIGINT || (sig) == SIGBREAK)
#define PROC_CONSOLE_BREAK SIGBREAK
#else
#define PROC_FROM_CONSOLE(sig) 0
#define PROC_CONSOLE_BREAK 0
#endif

/**
 * Send sig to the child's process group (or to the child alone); once the
 * child has exited, to what it left behind (SIGKILL: stop it now). SIGTERM,
 * SIGINT, SIGHUP and SIGQUIT are followed by SIGCONT, so that a stopped
 * child acts on them.
 */
int proc_kill(struct crun_proc *p, int sig);

/**
 * Give up on a child that SIGKILL does not stop (a process in
 * uninterruptible sleep): exit_cb and done_cb never run, procs_live no
 * longer counts it, and should it ever die it is reaped and freed quietly.
 */
void proc_abandon(struct crun_proc *p);

/** Signal every live child of the registry (their groups). */
void procs_kill_all(struct crun_procs *r, int sig);

/** Number of procs not yet ended (done_cb not yet run). */
int procs_live(const struct crun_procs *r);

/** The child's pid (also its process group with own_group), not the guard's. */
pid_t proc_pid(const struct crun_proc *p);
void *proc_data(const struct crun_proc *p);

#endif

/*
 * Child processes on Windows (include/crun/proc.h; proc.c is Linux's).
 * Windows has no fork, no process groups of the POSIX kind, no signals to
 * send and no subreaper; its answer to all of them is the Job Object.
 *
 * Happy path: each child is started with uv_spawn and put at once into a
 * job of its own that kills every process in it when its last handle
 * closes (JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE). crun holds that handle, and
 * every process the child starts is born in the job: the job is the
 * child's "process group" (proc_kill ends the whole tree with
 * TerminateJobObject), and when crun ends, even killed, Windows closes the
 * handle and nothing of the tree outlives it. The child's exit arrives as
 * libuv's exit callback; what it left behind is ended rest_grace_ms later,
 * and the proc is done.
 *
 * Failure modes: a process the child starts in the instant between its
 * start and its joining the job is not in the job (uv_spawn cannot start
 * a child suspended); a job that cannot be made or joined leaves the child
 * on its own, killed alone. Signals: SIGINT and SIGBREAK are the console's
 * Ctrl-C and Ctrl-Break, which reach every process of crun's console, the
 * workers too: nothing is sent (the agent's grace, then SIGKILL, follows as
 * for a forwarded signal). SIGKILL, SIGTERM, SIGQUIT and SIGHUP end the
 * tree (Windows cannot ask a process to stop but through its console); 0
 * asks whether it lives; any other is UV_ENOSYS. The exit of a tree ended
 * that way reads as death by that signal (128+N), as on Linux. Binding
 * (cpus, mpol) is refused; the parent-death signal is the job's closing.
 */
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "crun/err.h"
#include "crun/proc.h"

struct crun_procs {
	uv_loop_t *loop;
	uv_timer_t handle; /* for procs_close's callback */
	struct crun_proc *list; /* every proc not yet done */
	int live;
	int closing;
	void (*close_cb)(void *);
	void *close_arg;
};

struct crun_proc {
	struct crun_procs *r;
	struct crun_proc *next, **prev; /* in r->list until done */
	uv_process_t proc;
	uv_timer_t grace; /* what it left behind, after its exit */
	HANDLE job;	  /* its tree */
	proc_exit_cb exit_cb;
	proc_done_cb done_cb;
	void *data;
	int rest_grace_ms;
	int spawn_rc;  /* proc_spawn_begin's outcome, for proc_spawn_end */
	int killed;    /* the signal that ended the tree, or 0 */
	int exited;    /* exit_cb ran (or will not: quiet) */
	int quiet;     /* cancelled or abandoned: no callbacks */
	int handles;   /* open libuv handles */
	int done;      /* done_cb ran (or will not) */
	int counted;   /* in r->live */
};

/* A job that kills everything in it when its last handle closes. */
static HANDLE procs_job_new(void)
{
	JOBOBJECT_EXTENDED_LIMIT_INFORMATION li;
	HANDLE job = CreateJobObjectW(NULL, NULL);

	if (job == NULL)
		return NULL;
	memset(&li, 0, sizeof(li));
	li.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE;
	if (!SetInformationJobObject(job, JobObjectExtendedLimitInformation,
				     &li, sizeof(li))) {
		CloseHandle(job);
		return NULL;
	}
	return job;
}

static void procs_on_close(uv_handle_t *h)
{
	struct crun_procs *r = h->data;
	void (*cb)(void *) = r->close_cb;
	void *arg = r->close_arg;

	free(r);
	if (cb)
		cb(arg);
}

/* The registry goes once closing and nothing lives. */
static void procs_maybe_close(struct crun_procs *r)
{
	if (r->closing == 1 && r->live == 0) {
		r->closing = 2;
		uv_close((uv_handle_t *)&r->handle, procs_on_close);
	}
}

int procs_new(uv_loop_t *loop, struct crun_procs **out)
{
	struct crun_procs *r = calloc(1, sizeof(*r));

	if (r == NULL)
		return UV_ENOMEM;
	r->loop = loop;
	uv_timer_init(loop, &r->handle);
	r->handle.data = r;
	*out = r;
	return 0;
}

void procs_close(struct crun_procs *r, void (*cb)(void *), void *arg)
{
	r->close_cb = cb;
	r->close_arg = arg;
	r->closing = 1;
	procs_maybe_close(r);
}

/* Free p once its handles are closed and it is done. */
static void proc_on_handle_close(uv_handle_t *h)
{
	struct crun_proc *p = h->data;

	if (--p->handles == 0) {
		if (p->job != NULL)
			CloseHandle(p->job);
		free(p);
	}
}

/* Nothing of it is left: done_cb, and the proc goes. */
static void proc_finish(struct crun_proc *p)
{
	struct crun_procs *r = p->r;

	if (p->done)
		return;
	p->done = 1;
	*p->prev = p->next;
	if (p->next != NULL)
		p->next->prev = p->prev;
	if (p->job != NULL)
		TerminateJobObject(p->job, 128 + SIGKILL);
	if (!p->quiet && p->done_cb)
		p->done_cb(p);
	if (p->counted) {
		p->counted = 0;
		r->live--;
	}
	uv_close((uv_handle_t *)&p->proc, proc_on_handle_close);
	uv_close((uv_handle_t *)&p->grace, proc_on_handle_close);
	procs_maybe_close(r);
}

static void proc_on_grace(uv_timer_t *t)
{
	proc_finish(t->data);
}

/* Processes of the tree still running (0 when the job cannot say). */
static unsigned long proc_left(const struct crun_proc *p)
{
	JOBOBJECT_BASIC_ACCOUNTING_INFORMATION ai;

	if (p->job == NULL ||
	    !QueryInformationJobObject(p->job,
				       JobObjectBasicAccountingInformation,
				       &ai, sizeof(ai), NULL))
		return 0;
	return ai.ActiveProcesses;
}

static void proc_on_exit(uv_process_t *h, int64_t status, int term_signal)
{
	struct crun_proc *p = h->data;
	int st = (int)status, sig = 0;

	if (p->killed) {
		sig = p->killed;
		st = 128 + sig;
	}
	p->exited = 1;
	if (!p->quiet && p->exit_cb)
		p->exit_cb(p, st, sig);
	if (proc_left(p) == 0 || p->rest_grace_ms <= 0)
		proc_finish(p);
	else
		uv_timer_start(&p->grace, proc_on_grace,
			       (uint64_t)p->rest_grace_ms, 0);
}

/* The child's stdio: fd, or NUL for 0 and the inherited 1 and 2 at -1. */
static void proc_stdio(uv_stdio_container_t *io, int fd, int i)
{
	if (fd < 0 && i == 0) {
		io->flags = UV_IGNORE;
		return;
	}
	io->flags = UV_INHERIT_FD;
	io->data.fd = fd < 0 ? i : fd;
}

int proc_spawn_begin(struct crun_procs *r, const struct proc_opts *opts,
		     struct crun_proc **out)
{
	uv_process_options_t o;
	uv_stdio_container_t io[3];
	struct crun_proc *p;
	int rc;

	if (opts->cpus != NULL || opts->mpol != 0)
		return UV_ENOSYS;
	p = calloc(1, sizeof(*p));
	if (p == NULL)
		return UV_ENOMEM;
	p->r = r;
	p->exit_cb = opts->exit_cb;
	p->done_cb = opts->done_cb;
	p->data = opts->data;
	p->rest_grace_ms = opts->rest_grace_ms;
	memset(&o, 0, sizeof(o));
	proc_stdio(&io[0], opts->fd_in, 0);
	proc_stdio(&io[1], opts->fd_out, 1);
	proc_stdio(&io[2], opts->fd_err, 2);
	o.file = opts->argv[0];
	o.args = opts->argv;
	o.env = opts->envp;
	o.cwd = opts->cwd;
	o.stdio = io;
	o.stdio_count = 3;
	o.exit_cb = proc_on_exit;
	o.flags = UV_PROCESS_WINDOWS_HIDE;
	p->proc.data = p;
	rc = uv_spawn(r->loop, &p->proc, &o);
	if (rc != 0) {
		p->spawn_rc = rc;
		*out = p;
		return 0;
	}
	uv_timer_init(r->loop, &p->grace);
	p->grace.data = p;
	p->handles = 2;
	p->job = procs_job_new();
	if (p->job != NULL && !AssignProcessToJobObject(p->job,
							p->proc.process_handle)) {
		CloseHandle(p->job);
		p->job = NULL;
	}
	p->counted = 1;
	r->live++;
	p->next = r->list;
	p->prev = &r->list;
	if (r->list != NULL)
		r->list->prev = &p->next;
	r->list = p;
	*out = p;
	return 0;
}

static void proc_on_failed_close(uv_handle_t *h)
{
	free(h->data);
}

int proc_spawn_end(struct crun_proc *p)
{
	int rc = p->spawn_rc;

	/* (libuv's handle of a failed spawn is closed all the same) */
	if (rc != 0)
		uv_close((uv_handle_t *)&p->proc, proc_on_failed_close);
	return rc;
}

int proc_spawn(struct crun_procs *r, const struct proc_opts *opts,
	       struct crun_proc **out)
{
	int rc = proc_spawn_begin(r, opts, out);

	return rc != 0 ? rc : proc_spawn_end(*out);
}

void proc_spawn_cancel(struct crun_proc *p)
{
	if (p->spawn_rc != 0) {
		proc_spawn_end(p);
		return;
	}
	p->quiet = 1;
	proc_kill(p, SIGKILL);
}

int proc_kill(struct crun_proc *p, int sig)
{
	if (p->done)
		return UV_ESRCH;
	if (PROC_FROM_CONSOLE(sig))
		return 0; /* the console gave it to the worker too */
	switch (sig) {
	case 0:
		return p->exited && proc_left(p) == 0 ? UV_ESRCH : 0;
	case SIGKILL:
	case SIGTERM:
	case SIGQUIT:
	case SIGHUP:
		break;
	default:
		return UV_ENOSYS;
	}
	if (!p->exited && !p->killed)
		p->killed = sig;
	if (p->job != NULL && TerminateJobObject(p->job, 128 + (UINT)sig))
		return 0;
	return p->exited ? 0 : uv_process_kill(&p->proc, SIGKILL);
}

void proc_abandon(struct crun_proc *p)
{
	p->quiet = 1;
	if (p->counted) {
		p->counted = 0;
		p->r->live--;
	}
	procs_maybe_close(p->r);
}

void procs_kill_all(struct crun_procs *r, int sig)
{
	for (struct crun_proc *p = r->list; p != NULL; p = p->next)
		proc_kill(p, sig);
}

int procs_live(const struct crun_procs *r)
{
	return r->live;
}

pid_t proc_pid(const struct crun_proc *p)
{
	return (pid_t)p->proc.pid;
}

void *proc_data(const struct crun_proc *p)
{
	return p->data;
}

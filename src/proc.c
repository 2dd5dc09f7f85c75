/*
 * Process spawning with a parent-death signal and a process group per child.
 *
 * Happy path: proc_spawn forks; the child resets signal dispositions and the
 * mask, sets PR_SET_PDEATHSIG, checks its parent is still the agent (the
 * agent may have died between fork and prctl), joins a new process group,
 * wires fds 0/1/2 and execs. The parent learns the exec's outcome from a
 * close-on-exec pipe: EOF means exec succeeded, four bytes are the child's
 * errno. Exits are picked up by the registry's SIGCHLD watcher.
 *
 * Failure modes: fork or pipe fails (no child, error returned); exec fails
 * (child exits 127 after reporting errno; it is reaped right here and the
 * error returned, so exit_cb never runs for it).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "crun/err.h"
#include "crun/proc.h"

struct crun_proc {
	struct crun_procs *reg;
	struct crun_proc *next;
	pid_t pid;
	int own_group;
	proc_exit_cb exit_cb;
	void *data;
};

struct crun_procs {
	uv_signal_t sigchld;
	struct crun_proc *head;
	int live;
	int closing;
	void (*close_cb)(void *);
	void *close_arg;
};

/* Reap every registered child that has exited; runs on each SIGCHLD. */
static void procs_on_sigchld(uv_signal_t *h, int signum)
{
	struct crun_procs *r = h->data;
	struct crun_proc **pp = &r->head;

	(void)signum;
	while (*pp) {
		struct crun_proc *p = *pp;
		int st, status, sig = 0;
		pid_t w;

		do
			w = waitpid(p->pid, &st, WNOHANG);
		while (w < 0 && errno == EINTR);
		if (w == 0 || (w < 0 && errno != ECHILD)) {
			pp = &p->next;
			continue;
		}
		if (w < 0)
			status = 127; /* someone else reaped it; cannot happen
					 here */
		else if (WIFSIGNALED(st)) {
			sig = WTERMSIG(st);
			status = 128 + sig;
		} else
			status = WEXITSTATUS(st);
		*pp = p->next;
		r->live--;
		p->exit_cb(p, status, sig);
		free(p);
	}
}

int procs_new(uv_loop_t *loop, struct crun_procs **out)
{
	struct crun_procs *r = calloc(1, sizeof(*r));
	int rc;

	if (r == NULL)
		return UV_ENOMEM;
	rc = uv_signal_init(loop, &r->sigchld);
	if (rc == 0)
		rc = uv_signal_start(&r->sigchld, procs_on_sigchld, SIGCHLD);
	if (rc) {
		free(r);
		return rc;
	}
	r->sigchld.data = r;
	/* A worker that exits while the agent writes to its pipe must not kill
	 * the agent; children get SIGPIPE back before exec. */
	signal(SIGPIPE, SIG_IGN);
	*out = r;
	return 0;
}

static void procs_on_close(uv_handle_t *h)
{
	struct crun_procs *r = h->data;

	if (r->close_cb)
		r->close_cb(r->close_arg);
	free(r);
}

void procs_close(struct crun_procs *r, void (*cb)(void *), void *arg)
{
	r->closing = 1;
	r->close_cb = cb;
	r->close_arg = arg;
	uv_close((uv_handle_t *)&r->sigchld, procs_on_close);
}

/* In the child, between fork and exec: only async-signal-safe calls. */
static void child(const struct proc_opts *o, pid_t parent, int errfd)
{
	sigset_t none;
	int err, sig, fds[3] = {o->fd_in, o->fd_out, o->fd_err};

	for (sig = 1; sig < NSIG; sig++)
		signal(sig, SIG_DFL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if (prctl(PR_SET_PDEATHSIG,
		  o->pdeath_signal ? o->pdeath_signal : SIGKILL))
		goto fail;
	/* The agent died before prctl: the death signal would never come. */
	if (getppid() != parent)
		_exit(127);
	if (o->own_group && setpgid(0, 0))
		goto fail;
	if (fds[0] < 0)
		fds[0] = open("/dev/null", O_RDONLY | O_CLOEXEC);
	/* Move the fds above 2 first so dup2 never clobbers one we need. */
	for (int i = 0; i < 3; i++) {
		if (fds[i] >= 0 && fds[i] < 3) {
			fds[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 3);
			if (fds[i] < 0)
				goto fail;
		}
	}
	for (int i = 0; i < 3; i++)
		if (fds[i] >= 0 && dup2(fds[i], i) < 0)
			goto fail;
	if (o->cwd && chdir(o->cwd))
		goto fail;
	if (o->envp)
		execvpe(o->argv[0], o->argv, o->envp);
	else
		execvp(o->argv[0], o->argv);
fail:
	err = errno;
	if (write(errfd, &err, sizeof(err)) < 0)
		_exit(127);
	_exit(127);
}

int proc_spawn(struct crun_procs *r, const struct proc_opts *o,
	       struct crun_proc **out)
{
	struct crun_proc *p;
	int pipefd[2] = {-1, -1}, err = 0, rc;
	pid_t parent = getpid(), pid;
	ssize_t n;

	if (r->closing)
		return CRUN_ECLOSED;
	p = calloc(1, sizeof(*p));
	if (p == NULL)
		return UV_ENOMEM;
	if (pipe2(pipefd, O_CLOEXEC)) {
		rc = -errno;
		goto fail;
	}
	pid = fork();
	if (pid < 0) {
		rc = -errno;
		goto fail;
	}
	if (pid == 0)
		child(o, parent, pipefd[1]);
	/* Also from the parent, so the group exists before anyone signals it.
	 */
	if (o->own_group)
		setpgid(pid, pid);
	close(pipefd[1]);
	pipefd[1] = -1;
	do
		n = read(pipefd[0], &err, sizeof(err));
	while (n < 0 && errno == EINTR);
	close(pipefd[0]);
	pipefd[0] = -1;
	if (n == sizeof(err)) {
		/* exec failed: collect the child now so nobody waits for it. */
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		rc = -err;
		goto fail;
	}
	p->reg = r;
	p->pid = pid;
	p->own_group = o->own_group;
	p->exit_cb = o->exit_cb;
	p->data = o->data;
	p->next = r->head;
	r->head = p;
	r->live++;
	*out = p;
	return 0;
fail:
	if (pipefd[0] >= 0)
		close(pipefd[0]);
	if (pipefd[1] >= 0)
		close(pipefd[1]);
	free(p);
	return rc;
}

int proc_kill(struct crun_proc *p, int sig)
{
	int rc = p->own_group ? kill(-p->pid, sig) : kill(p->pid, sig);

	/* The group may be gone while the leader is a zombie: try it alone. */
	if (rc && p->own_group)
		rc = kill(p->pid, sig);
	return rc ? -errno : 0;
}

void procs_kill_all(struct crun_procs *r, int sig)
{
	struct crun_proc *p;

	for (p = r->head; p; p = p->next)
		proc_kill(p, sig);
}

int procs_live(const struct crun_procs *r)
{
	return r->live;
}

pid_t proc_pid(const struct crun_proc *p)
{
	return p->pid;
}

void *proc_data(const struct crun_proc *p)
{
	return p->data;
}

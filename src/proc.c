/*
 * Process spawning with a parent-death signal and a process group per child,
 * behind a tiny guard process.
 *
 * Happy path: proc_spawn forks the guard; the guard resets signal
 * dispositions, sets its parent-death signal (GUARD_DEATH_SIG), checks the
 * agent is still its parent, makes itself a child subreaper and forks the
 * child proper. The child unblocks every signal, sets PR_SET_PDEATHSIG
 * (relative to the guard), joins a new process group of its own, wires fds
 * 0/1/2 and execs. The guard learns the exec's outcome from a close-on-exec
 * pipe (EOF: exec succeeded, four bytes: the child's errno) and tells the
 * agent {errno, child pid} on another. The guard then closes every fd, waits
 * for the child, reaps the orphaned descendants that are handed to it as
 * subreaper, and exits with the child's status (dying of the same signal
 * when the child was killed), so the registry's SIGCHLD watcher sees the
 * child's own status.
 *
 * Why a guard: PR_SET_PDEATHSIG reaches only the direct child. When the agent
 * is SIGKILLed, the guard gets GUARD_DEATH_SIG and SIGKILLs the child's
 * process group and then every process reparented to it (descendants whose
 * parents died, including ones that called setsid), until it has no child
 * left. It needs no privileges. It does not cover descendants that escape
 * the subtree (a double fork through another subreaper) or that are still
 * alive after the guard exits (the guard exits with the child: the agent
 * kills the child's group then; see worker.c).
 *
 * Failure modes: fork or pipe fails (no child, error returned); exec fails
 * (child exits 127 after reporting errno; the guard passes the errno on and
 * exits; it is reaped right here and the error returned, so exit_cb never
 * runs for it); the cpu binding or memory policy is refused (the child
 * exits 127 after reporting CRUN_ECPUBIND or CRUN_EMEMBIND: the spawn fails
 * with that code, never a worker running unbound).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/mempolicy.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "crun/binding.h"
#include "crun/err.h"
#include "crun/proc.h"

/* The guard's parent-death signal; it never reaches the child's group. */
#define GUARD_DEATH_SIG (SIGRTMIN + 2)

struct crun_proc {
	struct crun_procs *reg;
	struct crun_proc *next;
	pid_t pid;  /* the guard: what the registry reaps */
	pid_t wpid; /* the child proper: its pid and process group */
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

/* Write all of buf to fd (async-signal-safe); 0 or -1. */
static int write_all(int fd, const void *buf, size_t n)
{
	const char *p = buf;

	while (n > 0) {
		ssize_t k = write(fd, p, n);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

/* The child proper, between fork and exec: only async-signal-safe calls. */
static void child(const struct proc_opts *o, pid_t guard, int errfd)
{
	sigset_t none;
	int err, fds[3] = {o->fd_in, o->fd_out, o->fd_err};

	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if (prctl(PR_SET_PDEATHSIG,
		  o->pdeath_signal ? o->pdeath_signal : SIGKILL))
		goto fail;
	/* The guard died before prctl: the death signal would never come. */
	if (getppid() != guard)
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
	if (o->cpus && sched_setaffinity(0, sizeof(*o->cpus), o->cpus)) {
		err = -CRUN_ECPUBIND;
		goto report;
	}
	if (o->mpol && syscall(SYS_set_mempolicy, o->mpol, o->mpol_nodes,
			       o->mpol_maxnode + 1)) {
		/* MPOL_PREFERRED_MANY needs Linux 5.15: prefer the first. */
		unsigned long one[CRUN_BIND_NODE_WORDS] = {0};
		int bits = 8 * (int)sizeof(long);

		if (o->mpol != MPOL_PREFERRED_MANY || o->mpol_first < 0 ||
		    o->mpol_first >= CRUN_BIND_MAX_NODES) {
			err = -CRUN_EMEMBIND;
			goto report;
		}
		one[o->mpol_first / bits] = 1UL << (o->mpol_first % bits);
		if (syscall(SYS_set_mempolicy, MPOL_PREFERRED, one,
			    (unsigned long)CRUN_BIND_MAX_NODES + 1)) {
			err = -CRUN_EMEMBIND;
			goto report;
		}
	}
	if (o->envp)
		execvpe(o->argv[0], o->argv, o->envp);
	else
		execvp(o->argv[0], o->argv);
fail:
	err = errno;
report:
	if (write(errfd, &err, sizeof(err)) < 0)
		_exit(127);
	_exit(127);
}

/* SIGKILL pid's process group and the guard's children, until none is left. */
static void guard_kill_all(pid_t pgid)
{
	char path[64], buf[4096];

	kill(-pgid, SIGKILL);
	/* Bounded: each pass kills every process handed to us so far. */
	for (int pass = 0; pass < 1000; pass++) {
		int fd, n = 0;
		long pid = 0, len;
		char *q;

		/* Our children: the group and whatever was reparented to us. */
		q = path;
		memcpy(q, "/proc/self/task/", 16);
		q += 16;
		len = (long)syscall(SYS_gettid);
		{
			char num[24];
			int k = 0;

			do
				num[k++] = (char)('0' + len % 10);
			while ((len /= 10) > 0);
			while (k > 0)
				*q++ = num[--k];
		}
		memcpy(q, "/children", 10);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd >= 0) {
			n = (int)read(fd, buf, sizeof(buf) - 1);
			close(fd);
		}
		for (int i = 0; i < n; i++) {
			if (buf[i] >= '0' && buf[i] <= '9') {
				pid = pid * 10 + (buf[i] - '0');
				continue;
			}
			if (pid > 0) {
				kill((pid_t)pid, SIGKILL);
				kill(-(pid_t)pid, SIGKILL);
			}
			pid = 0;
		}
		kill(-pgid, SIGKILL);
		/* Reap one (blocking: SIGKILL is never ignored); none: done. */
		if (waitpid(-1, NULL, 0) < 0 && errno == ECHILD)
			return;
	}
}

/* Exit the way the child did: its code, or death by its signal. */
static void guard_exit_as(int st)
{
	struct rlimit none = {0, 0};
	sigset_t set;
	int sig;

	if (!WIFSIGNALED(st))
		_exit(WIFEXITED(st) ? WEXITSTATUS(st) : 127);
	sig = WTERMSIG(st);
	setrlimit(RLIMIT_CORE, &none); /* the child dumped its core, not us */
	signal(sig, SIG_DFL);
	sigemptyset(&set);
	sigaddset(&set, sig);
	sigprocmask(SIG_UNBLOCK, &set, NULL);
	kill(getpid(), sig);
	_exit(128 + sig);
}

/*
 * The guard, in the fork of the agent (never execs: async-signal-safe calls
 * only). Tells the agent {errno, child pid} on errfd, then waits.
 */
static void guard(const struct proc_opts *o, pid_t parent, int errfd)
{
	sigset_t all, want;
	int pipefd[2], msg[2] = {0, 0}, st, sig;
	pid_t wpid = -1, got, self = getpid();
	ssize_t n;

	for (sig = 1; sig < NSIG; sig++)
		signal(sig, SIG_DFL);
	/* Everything stays pending; sigwaitinfo takes what we care for. */
	sigfillset(&all);
	sigprocmask(SIG_SETMASK, &all, NULL);
	if (prctl(PR_SET_PDEATHSIG, GUARD_DEATH_SIG) ||
	    prctl(PR_SET_CHILD_SUBREAPER, 1) || pipe2(pipefd, O_CLOEXEC)) {
		msg[0] = errno;
		goto report;
	}
	/* The agent died before prctl: the death signal would never come. */
	if (getppid() != parent)
		_exit(127);
	/*
	 * vfork: the guard waits for the exec anyway, and copying its page
	 * tables for a process that execs at once was a third of a worker's
	 * start. The child shares our memory until then: child() only makes
	 * system calls and writes its own stack (signals are all blocked or
	 * SIG_DFL here, so no handler can run on it).
	 */
	wpid = vfork();
	if (wpid < 0) {
		msg[0] = errno;
		goto report;
	}
	if (wpid == 0) {
		close(errfd);
		close(pipefd[0]);
		child(o, self, pipefd[1]);
	}
	if (o->own_group)
		setpgid(wpid, wpid);
	close(pipefd[1]);
	do
		n = read(pipefd[0], &msg[0], sizeof(msg[0]));
	while (n < 0 && errno == EINTR);
	close(pipefd[0]);
	if (n != (ssize_t)sizeof(msg[0]))
		msg[0] = 0;
	msg[1] = (int)wpid;
report:
	if (write_all(errfd, msg, sizeof(msg)))
		_exit(127);
	/* Hold nothing of the agent's: its pipes must see EOF with the child.
	 */
	syscall(SYS_close_range, 0U, ~0U, 0U);
	if (msg[0])
		_exit(127); /* the agent reaps us; a failed child, if any,
			       is reparented to init and reaped there */
	sigemptyset(&want);
	sigaddset(&want, SIGCHLD);
	sigaddset(&want, GUARD_DEATH_SIG);
	for (;;) {
		while ((got = waitpid(-1, &st, WNOHANG)) > 0)
			if (got == wpid)
				guard_exit_as(st);
		sig = sigwaitinfo(&want, NULL);
		if (sig == GUARD_DEATH_SIG && getppid() != parent) {
			guard_kill_all(wpid);
			_exit(128 + SIGKILL);
		}
	}
}

int proc_spawn(struct crun_procs *r, const struct proc_opts *o,
	       struct crun_proc **out)
{
	struct crun_proc *p;
	int pipefd[2] = {-1, -1}, msg[2] = {0, 0}, rc;
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
	if (pid == 0) {
		close(pipefd[0]);
		guard(o, parent, pipefd[1]);
	}
	close(pipefd[1]);
	pipefd[1] = -1;
	do
		n = read(pipefd[0], msg, sizeof(msg));
	while (n < 0 && errno == EINTR);
	close(pipefd[0]);
	pipefd[0] = -1;
	if (n != (ssize_t)sizeof(msg) || msg[0] != 0 || msg[1] <= 0) {
		/* exec failed: collect the guard now so nobody waits for it. */
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		rc = n == (ssize_t)sizeof(msg) && msg[0] ? -msg[0] : UV_EIO;
		goto fail;
	}
	p->reg = r;
	p->pid = pid;
	p->wpid = msg[1];
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
	int rc = p->own_group ? kill(-p->wpid, sig) : kill(p->wpid, sig);

	/* The group may be gone while the leader is a zombie: try it alone. */
	if (rc && p->own_group)
		rc = kill(p->wpid, sig);
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
	return p->wpid;
}

void *proc_data(const struct crun_proc *p)
{
	return p->data;
}

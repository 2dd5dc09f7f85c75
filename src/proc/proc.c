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
 * agent {errno, child pid} on another. The guard then closes every fd and
 * waits for the child. When the child exits, the guard writes its status to
 * a page it shares with the agent and sends the agent SIGCHLD: the exit is
 * reported at once (exit_cb). Whatever the child left behind is by then the
 * guard's (it is their subreaper, whatever their session or process group):
 * the guard sends them SIGTERM (each as it is handed over), SIGKILL after
 * the grace the caller gave, reaps them, and exits with the child's status
 * (dying of the same signal when the child was killed). Its reaping is the
 * proc's end (done_cb): nothing of the child is left.
 *
 * Why a guard: PR_SET_PDEATHSIG reaches only the direct child. When the agent
 * is SIGKILLed, the guard gets GUARD_DEATH_SIG and SIGKILLs the child's
 * process group and then every process reparented to it (descendants whose
 * parents died, including ones that called setsid), until it has no child
 * left. It needs no privileges. It does not cover descendants that escape
 * the subtree (a double fork through another subreaper).
 *
 * Failure modes: fork or pipe fails (no child, error returned); exec fails
 * (child exits 127 after reporting errno; the guard passes the errno on and
 * exits; it is reaped right here and the error returned, so exit_cb never
 * runs for it); the cpu binding or memory policy is refused (the child
 * exits 127 after reporting CRUN_ECPUBIND or CRUN_EMEMBIND: the spawn fails
 * with that code, never a worker running unbound); a leftover stuck in the
 * kernel survives SIGKILL (the guard gives up on it after REST_KILL_WAIT_MS
 * and exits: the proc ends all the same).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/mempolicy.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "crun/binding.h"
#include "crun/err.h"
#include "crun/proc.h"

/* The guard's parent-death signal; it never reaches the child's group. */
#define GUARD_DEATH_SIG (SIGRTMIN + 2)
/* The agent asks the guard to pass a signal (its value) to the leftovers. */
#define GUARD_PASS_SIG (SIGRTMIN + 3)
/* How long the guard waits for SIGKILLed leftovers before it gives up. */
#define REST_KILL_WAIT_MS 5000
/* The guard looks for newly handed-over leftovers this often. */
#define REST_SCAN_MS 50
/* Leftovers told SIGTERM are remembered (more are told again: harmless). */
#define REST_MAX_TOLD 4096

/* The page a guard shares with the agent: the child's end, once it came. */
struct proc_shared {
	int exited; /* 1 once status is set (written last, atomically) */
	int status; /* the child's wait status */
};

struct crun_proc {
	struct crun_procs *reg;
	struct crun_proc *next;
	pid_t pid;     /* the guard: what the registry reaps */
	pid_t wpid;    /* the child proper: its pid and process group */
	int report_fd; /* the guard's report, until proc_spawn_end reads it */
	int own_group;
	int exited;    /* exit_cb has run */
	int abandoned; /* proc_abandon: no callbacks, not counted */
	struct proc_shared *sh;
	proc_exit_cb exit_cb;
	proc_done_cb done_cb;
	void *data;
};

/* exit_cb's status and signal from a wait status. */
/*
 * fork without the atfork handlers: glibc's _Fork (2.34 on); before it, the
 * clone system call that _Fork makes (the wheel's build targets glibc 2.28).
 * Either way the child makes only async-signal-safe calls until it execs.
 */
static pid_t fork_bare(void)
{
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 34)
	return _Fork();
#else
	return (pid_t)syscall(SYS_clone, (long)SIGCHLD, 0L, 0L, 0L, 0L);
#endif
}

static void decode_status(int st, int *status, int *sig)
{
	*sig = 0;
	if (WIFSIGNALED(st)) {
		*sig = WTERMSIG(st);
		*status = 128 + *sig;
	} else
		*status = WIFEXITED(st) ? WEXITSTATUS(st) : 127;
}

/* Report the child's exit once: from the shared page, or from the guard's. */
static void proc_report_exit(struct crun_proc *p, int st)
{
	int status, sig;

	if (p->exited)
		return;
	p->exited = 1;
	decode_status(st, &status, &sig);
	p->exit_cb(p, status, sig);
}

struct crun_procs {
	uv_signal_t sigchld;
	struct crun_proc *head;
	int live;
	int closing;
	void (*close_cb)(void *);
	void *close_arg;
};

/*
 * Report every registered child that has exited, and end every proc whose
 * guard has exited (reaped); runs on each SIGCHLD.
 */
static void procs_on_sigchld(uv_signal_t *h, int signum)
{
	struct crun_procs *r = h->data;
	struct crun_proc **pp = &r->head;

	(void)signum;
	while (*pp) {
		struct crun_proc *p = *pp;
		int st;
		pid_t w;

		if (!p->exited &&
		    __atomic_load_n(&p->sh->exited, __ATOMIC_ACQUIRE))
			proc_report_exit(p, p->sh->status);
		do
			w = waitpid(p->pid, &st, WNOHANG);
		while (w < 0 && errno == EINTR);
		if (w == 0 || (w < 0 && errno != ECHILD)) {
			pp = &p->next;
			continue;
		}
		if (w < 0)
			st = 127 << 8; /* someone else reaped it; cannot happen
					  here */
		/* The guard exits as the child did, so its status stands in
		 * when the child's never came (the guard was killed). */
		proc_report_exit(p, st);
		*pp = p->next;
		if (!p->abandoned)
			r->live--;
		if (p->done_cb)
			p->done_cb(p);
		munmap(p->sh, sizeof(*p->sh));
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

	/* Nobody holds an abandoned proc any more: forget it. */
	for (struct crun_proc **pp = &r->head; *pp;) {
		struct crun_proc *p = *pp;

		if (!p->abandoned) {
			pp = &p->next;
			continue;
		}
		*pp = p->next;
		munmap(p->sh, sizeof(*p->sh));
		free(p);
	}

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

/* Monotonic milliseconds (async-signal-safe). */
static long long guard_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static pid_t told[REST_MAX_TOLD];
static int ntold;

/* Has pid been told SIGTERM already? Remembers it if not (while room). */
static int guard_told(pid_t pid)
{
	for (int i = 0; i < ntold; i++)
		if (told[i] == pid)
			return 1;
	if (ntold < REST_MAX_TOLD)
		told[ntold++] = pid;
	return 0;
}

/*
 * Send sig to each of the guard's children, the ones handed to it as
 * subreaper included, and to the groups they lead; with SIGTERM each is told
 * once, and the child's own group (wpid) is left to the agent, which stops
 * it itself. Returns how many children there are (zombies included: they
 * are reaped next).
 */
static int guard_signal_children(int sig, pid_t wpid)
{
	char path[64], buf[4096], num[24], *q;
	long len, pid = 0;
	int fd, n, k = 0, count = 0;

	/* Our children: /proc/self/task/<tid>/children, read whole. */
	q = path;
	memcpy(q, "/proc/self/task/", 16);
	q += 16;
	len = (long)syscall(SYS_gettid);
	do
		num[k++] = (char)('0' + len % 10);
	while ((len /= 10) > 0);
	while (k > 0)
		*q++ = num[--k];
	memcpy(q, "/children", 10);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 1; /* cannot tell: assume some */
	while ((n = (int)read(fd, buf, sizeof(buf))) > 0 ||
	       (n < 0 && errno == EINTR)) {
		for (int i = 0; i < n; i++) {
			if (buf[i] >= '0' && buf[i] <= '9') {
				pid = pid * 10 + (buf[i] - '0');
				continue;
			}
			if (pid <= 0)
				continue;
			count++;
			if (sig == SIGTERM) {
				if (getpgid((pid_t)pid) != wpid &&
				    !guard_told((pid_t)pid))
					kill((pid_t)pid, sig);
			} else {
				kill((pid_t)pid, sig);
				kill(-(pid_t)pid, sig);
			}
			pid = 0;
		}
	}
	close(fd);
	return count;
}

/*
 * The child exited with wait status st: stop what it left behind with sig
 * (SIGTERM, then SIGKILL after grace_ms, or at once when the agent dies or
 * asks; or SIGKILL from the start), then exit as the child did. Bounded: a
 * leftover that survives SIGKILL for REST_KILL_WAIT_MS is given up on.
 * tell: the agent has yet to hear of the child's exit: SIGCHLD now when
 * leftovers make it wait (without any, our own exit tells it).
 */
static void guard_end(pid_t parent, pid_t wpid, int st, int sig, int grace_ms,
		      int tell)
{
	long long deadline =
	    guard_now_ms() + (sig == SIGKILL ? REST_KILL_WAIT_MS : grace_ms);
	sigset_t want;

	sigemptyset(&want);
	sigaddset(&want, SIGCHLD);
	sigaddset(&want, GUARD_DEATH_SIG);
	sigaddset(&want, GUARD_PASS_SIG);
	for (;;) {
		struct timespec ts;
		siginfo_t si;
		long long left;
		pid_t w;
		int got;

		while ((w = waitpid(-1, NULL, WNOHANG)) > 0)
			;
		if (sig == SIGKILL)
			kill(-wpid, SIGKILL);
		/* No child at all: every descendant is gone (each has a
		 * parent in the subtree, or was handed to us). */
		if (w < 0 && errno == ECHILD)
			break;
		if (tell) {
			kill(parent, SIGCHLD);
			tell = 0;
		}
		if (guard_signal_children(sig, wpid) == 0)
			break;
		left = deadline - guard_now_ms();
		if (left <= 0) {
			if (sig == SIGKILL)
				break; /* stuck in the kernel: give up */
			sig = SIGKILL;
			deadline = guard_now_ms() + REST_KILL_WAIT_MS;
			continue;
		}
		if (left > REST_SCAN_MS)
			left = REST_SCAN_MS;
		ts.tv_sec = 0;
		ts.tv_nsec = (long)left * 1000000;
		got = sigtimedwait(&want, &si, &ts);
		if ((got == GUARD_DEATH_SIG && getppid() != parent) ||
		    (got == GUARD_PASS_SIG &&
		     si.si_value.sival_int == SIGKILL)) {
			if (sig != SIGKILL)
				deadline = guard_now_ms() + REST_KILL_WAIT_MS;
			sig = SIGKILL;
		} else if (got == GUARD_PASS_SIG) {
			guard_signal_children(si.si_value.sival_int, 0);
		}
	}
	guard_exit_as(st);
}

/*
 * The guard, in the fork of the agent (never execs: async-signal-safe calls
 * only). Tells the agent {errno, child pid} on errfd, then waits.
 */
static void guard(const struct proc_opts *o, struct proc_shared *sh,
		  pid_t parent, int errfd)
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
	/*
	 * Without the subreaper (EINVAL: qemu-user does not emulate it) the
	 * worker still runs under its guard; only the processes it orphans go
	 * to init instead of the guard.
	 */
	if (prctl(PR_SET_PDEATHSIG, GUARD_DEATH_SIG) ||
	    (prctl(PR_SET_CHILD_SUBREAPER, 1) && errno != EINVAL) ||
	    pipe2(pipefd, O_CLOEXEC)) {
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
		while ((got = waitpid(-1, &st, WNOHANG)) > 0) {
			if (got != wpid)
				continue;
			sh->status = st;
			__atomic_store_n(&sh->exited, 1, __ATOMIC_RELEASE);
			guard_end(parent, wpid, st, SIGTERM, o->rest_grace_ms,
				  1);
		}
		sig = sigwaitinfo(&want, NULL);
		if (sig == GUARD_DEATH_SIG && getppid() != parent) {
			kill(-wpid, SIGKILL);
			guard_end(parent, wpid, SIGKILL, SIGKILL, 0, 0);
		}
	}
}

int proc_spawn_begin(struct crun_procs *r, const struct proc_opts *o,
		     struct crun_proc **out)
{
	struct crun_proc *p;
	int pipefd[2] = {-1, -1}, rc;
	pid_t parent = getpid(), pid;

	if (r->closing)
		return CRUN_ECLOSED;
	p = calloc(1, sizeof(*p));
	if (p == NULL)
		return UV_ENOMEM;
	p->sh = mmap(NULL, sizeof(*p->sh), PROT_READ | PROT_WRITE,
		     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (p->sh == MAP_FAILED) {
		p->sh = NULL;
		rc = -errno;
		goto fail;
	}
	if (pipe2(pipefd, O_CLOEXEC)) {
		rc = -errno;
		goto fail;
	}
	/*
	 * fork_bare: no atfork handlers. The guard makes only async-signal-safe
	 * calls (no malloc, no stdio, no libuv), so it needs none of their
	 * resets, and the agent skips libuv's signal pipe made anew in each
	 * child, and glibc's locking of every malloc arena around the fork.
	 */
	pid = fork_bare();
	if (pid < 0) {
		rc = -errno;
		goto fail;
	}
	if (pid == 0) {
		close(pipefd[0]);
		guard(o, p->sh, parent, pipefd[1]);
	}
	close(pipefd[1]);
	p->reg = r;
	p->pid = pid;
	p->report_fd = pipefd[0];
	p->own_group = o->own_group;
	p->exit_cb = o->exit_cb;
	p->done_cb = o->done_cb;
	p->data = o->data;
	*out = p;
	return 0;
fail:
	if (pipefd[0] >= 0)
		close(pipefd[0]);
	if (pipefd[1] >= 0)
		close(pipefd[1]);
	if (p->sh)
		munmap(p->sh, sizeof(*p->sh));
	free(p);
	return rc;
}

/* The guard's report {errno, child pid}: 0, or the exec's error (the guard
 * reaped, p freed). */
static int proc_read_report(struct crun_proc *p)
{
	int msg[2] = {0, 0}, rc;
	ssize_t n;

	do
		n = read(p->report_fd, msg, sizeof(msg));
	while (n < 0 && errno == EINTR);
	close(p->report_fd);
	p->report_fd = -1;
	if (n != (ssize_t)sizeof(msg) || msg[0] != 0 || msg[1] <= 0) {
		/* exec failed: collect the guard now so nobody waits for it. */
		while (waitpid(p->pid, NULL, 0) < 0 && errno == EINTR)
			;
		rc = n == (ssize_t)sizeof(msg) && msg[0] ? -msg[0] : UV_EIO;
		munmap(p->sh, sizeof(*p->sh));
		free(p);
		return rc;
	}
	p->wpid = msg[1];
	return 0;
}

int proc_spawn_end(struct crun_proc *p)
{
	struct crun_procs *r = p->reg;
	int rc = proc_read_report(p);

	if (rc)
		return rc;
	p->next = r->head;
	r->head = p;
	r->live++;
	return 0;
}

void proc_spawn_cancel(struct crun_proc *p)
{
	if (proc_read_report(p))
		return;
	/* The child runs: stop it, and the guard ends with it. */
	kill(-p->wpid, SIGKILL);
	kill(p->wpid, SIGKILL);
	while (waitpid(p->pid, NULL, 0) < 0 && errno == EINTR)
		;
	munmap(p->sh, sizeof(*p->sh));
	free(p);
}

int proc_spawn(struct crun_procs *r, const struct proc_opts *o,
	       struct crun_proc **out)
{
	struct crun_proc *p;
	int rc = proc_spawn_begin(r, o, &p);

	if (rc == 0 && (rc = proc_spawn_end(p)) == 0)
		*out = p;
	return rc;
}

int proc_kill(struct crun_proc *p, int sig)
{
	int rc;

	if (p->exited) {
		/* The guard passes it to the child's leftovers. */
		union sigval v = {.sival_int = sig};

		return sigqueue(p->pid, GUARD_PASS_SIG, v) ? -errno : 0;
	}
	rc = p->own_group ? kill(-p->wpid, sig) : kill(p->wpid, sig);

	/* The group may be gone while the leader is a zombie: try it alone. */
	if (rc && p->own_group)
		rc = kill(p->wpid, sig);
	if (rc)
		return -errno;
	/*
	 * A stopped process (SIGSTOP, ^Z) leaves a termination request
	 * pending until it is continued, so the stop would wait out the whole
	 * shutdown timeout for SIGKILL. Continue it after the request, as a
	 * shell's kill of a stopped job, systemd and slurmstepd do: it acts
	 * on the signal at once (SIGCONT does nothing to a running process).
	 */
	if (sig == SIGTERM || sig == SIGINT || sig == SIGHUP || sig == SIGQUIT)
		kill(p->own_group ? -p->wpid : p->wpid, SIGCONT);
	return 0;
}

static void proc_on_abandoned_exit(struct crun_proc *p, int status, int sig)
{
	(void)p;
	(void)status;
	(void)sig;
}

void proc_abandon(struct crun_proc *p)
{
	if (p->abandoned)
		return;
	p->abandoned = 1;
	p->exit_cb = proc_on_abandoned_exit;
	p->done_cb = NULL;
	p->data = NULL;
	p->reg->live--;
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

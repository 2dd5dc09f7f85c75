/*
 * Process spawning behind the guard (src/proc/proc.c): the exit status is the
 * child's own (codes and deaths by signal alike), proc_pid is the child's
 * pid and process group, exec failures come back as errors, the guard
 * takes the child's descendants down when its parent dies, and a stopped
 * child acts on SIGTERM.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "crun/err.h"
#include "crun/proc.h"

/* argv strings must be writable (-Wwrite-strings); the test process ends soon. */
#define S(x) ((char *)(x)) /* argv is char *[]; nothing to free */

static int got_status = -1, got_signal = -1;
static pid_t got_pid;

static void on_exit_cb(struct crun_proc *p, int status, int sig)
{
	got_pid = proc_pid(p);
	got_status = status;
	got_signal = sig;
}

/* Run argv to completion on a fresh loop; returns its crun status. */
static int run(char **argv, pid_t *pid)
{
	uv_loop_t loop;
	struct crun_procs *r;
	struct crun_proc *p;
	struct proc_opts o;

	cr_assert_eq(uv_loop_init(&loop), 0);
	cr_assert_eq(procs_new(&loop, &r), 0);
	memset(&o, 0, sizeof(o));
	o.argv = argv;
	o.fd_in = o.fd_out = o.fd_err = -1;
	o.own_group = 1;
	o.exit_cb = on_exit_cb;
	got_status = got_signal = -1;
	cr_assert_eq(proc_spawn(r, &o, &p), 0);
	*pid = proc_pid(p);
	/* A child that has already died and been reaped has no group left. */
	errno = 0;
	cr_assert(getpgid(*pid) == *pid || errno == ESRCH,
		  "the child leads its own group");
	while (got_status < 0 || procs_live(r) > 0)
		uv_run(&loop, UV_RUN_ONCE);
	procs_close(r, NULL, NULL);
	uv_run(&loop, UV_RUN_DEFAULT);
	cr_assert_eq(uv_loop_close(&loop), 0);
	return got_status;
}

Test(proc, exit_code_passes_through_the_guard, .timeout = 10)
{
	char *argv[] = {S("/bin/sh"), S("-c"), S("exit 7"), NULL};
	pid_t pid;

	cr_assert_eq(run(argv, &pid), 7);
	cr_assert_eq(got_signal, 0);
	cr_assert_eq(got_pid, pid);
}

Test(proc, death_by_signal_passes_through_the_guard, .timeout = 10)
{
	char *argv[] = {S("/bin/sh"), S("-c"), S("kill -KILL $$"), NULL};
	pid_t pid;

	cr_assert_eq(run(argv, &pid), 128 + SIGKILL);
	cr_assert_eq(got_signal, SIGKILL);
}

Test(proc, exec_failure_is_an_error, .timeout = 10)
{
	uv_loop_t loop;
	struct crun_procs *r;
	struct crun_proc *p = NULL;
	struct proc_opts o;
	char *argv[] = {S("/nonexistent/program"), NULL};

	cr_assert_eq(uv_loop_init(&loop), 0);
	cr_assert_eq(procs_new(&loop, &r), 0);
	memset(&o, 0, sizeof(o));
	o.argv = argv;
	o.fd_in = o.fd_out = o.fd_err = -1;
	o.own_group = 1;
	o.exit_cb = on_exit_cb;
	cr_assert_eq(proc_spawn(r, &o, &p), UV_ENOENT);
	cr_assert_eq(procs_live(r), 0);
	procs_close(r, NULL, NULL);
	uv_run(&loop, UV_RUN_DEFAULT);
	cr_assert_eq(uv_loop_close(&loop), 0);
}

/* Is a non-zombie process with this pid alive? */
static int alive(pid_t pid)
{
	char path[64], buf[512], *p, st;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (f == NULL)
		return 0;
	st = 'Z';
	if (fgets(buf, sizeof(buf), f) && (p = strrchr(buf, ')')) != NULL)
		st = p[2];
	fclose(f);
	return st != 'Z';
}

/*
 * The spawner is SIGKILLed: its guard kills the child, a grandchild in the
 * child's group and one that called setsid.
 */
Test(proc, grandchildren_die_with_a_killed_spawner, .timeout = 20)
{
	int fds[2];
	pid_t spawner, pids[3];
	FILE *f;

	cr_assert_eq(pipe(fds), 0);
	spawner = fork();
	cr_assert_geq(spawner, 0);
	if (spawner == 0) {
		uv_loop_t loop;
		struct crun_procs *r;
		struct crun_proc *p;
		struct proc_opts o;
		char *argv[] = {S("/bin/sh"), S("-c"),
				S("sleep 100 & echo $!; setsid sleep 100 & "
				  "echo $!; echo $$; wait"),
				NULL};

		close(fds[0]);
		uv_loop_init(&loop);
		procs_new(&loop, &r);
		memset(&o, 0, sizeof(o));
		o.argv = argv;
		o.fd_in = o.fd_err = -1;
		o.fd_out = fds[1];
		o.own_group = 1;
		o.exit_cb = on_exit_cb;
		if (proc_spawn(r, &o, &p))
			_exit(1);
		uv_run(&loop, UV_RUN_DEFAULT);
		_exit(0);
	}
	close(fds[1]);
	f = fdopen(fds[0], "r");
	for (int i = 0; i < 3; i++)
		cr_assert_eq(fscanf(f, "%d", &pids[i]), 1);
	fclose(f);
	for (int i = 0; i < 3; i++)
		cr_assert(alive(pids[i]));
	kill(spawner, SIGKILL);
	waitpid(spawner, NULL, 0);
	for (int i = 0; i < 3; i++) {
		int n, survived;

		for (n = 0; n < 100 && alive(pids[i]); n++)
			usleep(50000);
		survived = alive(pids[i]);
		if (survived) /* leave nothing behind, even failing */
			for (int k = 0; k < 3; k++)
				kill(pids[k], SIGKILL);
		cr_assert(!survived, "pid %d outlived the spawner",
			  (int)pids[i]);
	}
}

static int got_done;

static void on_done_cb(struct crun_proc *p)
{
	(void)p;
	got_done = 1;
}

/*
 * The child exits 0 and leaves a process in a session of its own that
 * ignores SIGTERM: the exit is reported at once, and the proc ends (done_cb)
 * only once the guard has SIGKILLed the leftover after the grace.
 */
Test(proc, leftovers_in_other_sessions_are_stopped_before_done, .timeout = 20)
{
	uv_loop_t loop;
	struct crun_procs *r;
	struct crun_proc *p;
	struct proc_opts o;
	char *argv[] = {S("/bin/sh"), S("-c"),
			S("setsid sh -c 'trap \"\" TERM; exec sleep 100' & "
			  "echo $!; exit 0"),
			NULL};
	int fds[2];
	pid_t left;
	FILE *f;

	cr_assert_eq(pipe(fds), 0);
	cr_assert_eq(uv_loop_init(&loop), 0);
	cr_assert_eq(procs_new(&loop, &r), 0);
	memset(&o, 0, sizeof(o));
	o.argv = argv;
	o.fd_in = o.fd_err = -1;
	o.fd_out = fds[1];
	o.own_group = 1;
	o.rest_grace_ms = 1000;
	o.exit_cb = on_exit_cb;
	o.done_cb = on_done_cb;
	got_status = got_signal = -1;
	got_done = 0;
	cr_assert_eq(proc_spawn(r, &o, &p), 0);
	close(fds[1]);
	f = fdopen(fds[0], "r");
	cr_assert_eq(fscanf(f, "%d", &left), 1);
	fclose(f);
	while (got_status < 0)
		uv_run(&loop, UV_RUN_ONCE);
	cr_assert_eq(got_status, 0);
	cr_assert(!got_done, "done before the leftover was stopped");
	cr_assert_eq(procs_live(r), 1);
	while (!got_done)
		uv_run(&loop, UV_RUN_ONCE);
	cr_assert(!alive(left), "pid %d outlived its proc", (int)left);
	cr_assert_eq(procs_live(r), 0);
	procs_close(r, NULL, NULL);
	uv_run(&loop, UV_RUN_DEFAULT);
	cr_assert_eq(uv_loop_close(&loop), 0);
}

/* pid's state letter in /proc/PID/stat, '?' when it is gone. */
static char state_of(pid_t pid)
{
	char path[64], buf[512], *p, st = '?';
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (f == NULL)
		return st;
	if (fgets(buf, sizeof(buf), f) && (p = strrchr(buf, ')')) != NULL)
		st = p[2];
	fclose(f);
	return st;
}

/*
 * A child that stopped itself (SIGSTOP) would keep SIGTERM pending until
 * continued: proc_kill follows it with SIGCONT, so the child is running
 * again when proc_kill returns and dies of the SIGTERM.
 */
Test(proc, sigterm_reaches_a_stopped_child, .timeout = 20)
{
	uv_loop_t loop;
	struct crun_procs *r;
	struct crun_proc *p;
	struct proc_opts o;
	char *argv[] = {S("/bin/sh"), S("-c"),
			S("kill -STOP $$; exec sleep 100"), NULL};
	pid_t pid;

	cr_assert_eq(uv_loop_init(&loop), 0);
	cr_assert_eq(procs_new(&loop, &r), 0);
	memset(&o, 0, sizeof(o));
	o.argv = argv;
	o.fd_in = o.fd_out = o.fd_err = -1;
	o.own_group = 1;
	o.exit_cb = on_exit_cb;
	got_status = got_signal = -1;
	cr_assert_eq(proc_spawn(r, &o, &p), 0);
	pid = proc_pid(p);
	/* Bounded by the test's timeout: the child stops itself. */
	while (state_of(pid) != 'T')
		usleep(10000);
	cr_assert_eq(proc_kill(p, SIGTERM), 0);
	cr_assert_neq(state_of(pid), 'T', "still stopped after proc_kill");
	while (got_status < 0 || procs_live(r) > 0)
		uv_run(&loop, UV_RUN_ONCE);
	cr_assert_eq(got_signal, SIGTERM);
	cr_assert_eq(got_status, 128 + SIGTERM);
	procs_close(r, NULL, NULL);
	uv_run(&loop, UV_RUN_DEFAULT);
	cr_assert_eq(uv_loop_close(&loop), 0);
}

/*
 * Workers' stacks (src/proc/stacks.c, compiled in here to reach its static
 * reader of /proc): /proc read through a fake tree (a process in state D,
 * one gone, garbage and oversized files), and the dumps' bounds: a py-spy
 * that does not finish, one that fails, a faulthandler dump that never
 * comes, a stopped process that is asked for none.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../src/proc/stacks.c"

static char root[PATH_MAX];

/* A fake /proc of this test's own, removed at the end. */
static void fake_root(void)
{
	snprintf(root, sizeof(root), "/tmp/crun_test_stacks.%d", (int)getpid());
	mkdir(root, 0755);
	stacks_set_proc_root(root);
}

static void fake_rm(void)
{
	char cmd[PATH_MAX + 16];

	snprintf(cmd, sizeof(cmd), "/bin/rm -rf %s", root);
	cr_assert_eq(system(cmd), 0);
	stacks_set_proc_root(NULL);
}

static void fake_file(pid_t pid, const char *name, const char *data, size_t n)
{
	char path[PATH_MAX + 64];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%d", root, (int)pid);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/%d/%s", root, (int)pid, name);
	f = fopen(path, "w");
	cr_assert_not_null(f);
	cr_assert_eq(fwrite(data, 1, n, f), n);
	fclose(f);
}

static void fake_str(pid_t pid, const char *name, const char *s)
{
	fake_file(pid, name, s, strlen(s));
}

Test(stacks, d_state_is_named_with_its_wait_channel)
{
	struct stacks_pstate st;
	char line[256];

	fake_root();
	fake_str(4242, "stat", "4242 (python3) D 1 4242 4242 0 -1 4194560\n");
	fake_str(4242, "wchan", "__refrigerator");
	cr_assert_eq(stacks_proc_state(4242, &st), 0);
	cr_assert_eq(st.state, 'D');
	cr_assert_str_eq(st.comm, "python3");
	cr_assert_str_eq(st.wchan, "__refrigerator");
	cr_assert_eq(stacks_describe_unkillable(5, 4242, line, sizeof(line)),
		     'D');
	cr_assert_str_eq(line, "rank 5 (pid 4242) is in uninterruptible sleep "
			       "in `__refrigerator`, it cannot be killed");
	fake_rm();
}

Test(stacks, vanished_and_garbage_stat)
{
	struct stacks_pstate st;
	char line[256];

	fake_root();
	cr_assert_eq(stacks_proc_state(77, &st), UV_ESRCH);
	cr_assert_eq(st.state, '?');
	cr_assert_eq(stacks_describe_unkillable(3, 77, line, sizeof(line)),
		     '?');
	cr_assert_str_eq(line, "rank 3 (pid 77) is gone");
	/* No parentheses, a state that is no letter, an empty file. */
	fake_str(78, "stat", "78 python3 D 1 2 3\n");
	cr_assert_eq(stacks_proc_state(78, &st), UV_ESRCH);
	fake_str(79, "stat", "79 (x) \x01 1 2 3\n");
	cr_assert_eq(stacks_proc_state(79, &st), UV_ESRCH);
	fake_str(80, "stat", "");
	cr_assert_eq(stacks_proc_state(80, &st), UV_ESRCH);
	fake_str(81, "stat", "81 (a) b) S 1\n"); /* comm "a) b" */
	cr_assert_eq(stacks_proc_state(81, &st), 0);
	cr_assert_eq(st.state, 'S');
	cr_assert_str_eq(st.comm, "a) b");
	cr_assert_str_eq(st.wchan, "");
	fake_rm();
}

Test(stacks, oversized_and_unprintable_proc_files_are_bounded)
{
	static char big[1 << 20];
	struct stacks_pstate st;
	char line[512];

	fake_root();
	memset(big, 'w', sizeof(big));
	fake_file(90, "wchan", big, sizeof(big));
	fake_str(90, "stat", "90 (evil\x1b[2J\x07name) D 1 2\n");
	cr_assert_eq(stacks_proc_state(90, &st), 0);
	cr_assert_eq(strlen(st.wchan), sizeof(st.wchan) - 1);
	cr_assert_str_eq(st.comm, "evil?[2J?name");
	stacks_describe_unkillable(0, 90, line, sizeof(line));
	cr_assert_lt(strlen(line), sizeof(line) - 1);
	/* A stat line longer than is read is cut, not overrun. */
	memset(big, '(', sizeof(big));
	fake_file(91, "stat", big, sizeof(big));
	cr_assert_eq(stacks_proc_state(91, &st), UV_ESRCH);
	fake_rm();
}

static int ndone;

static void on_done(struct stacks *s, void *data)
{
	(void)s;
	(void)data;
	ndone++;
}

/* Run loop until cb ran (bounded by the test's timeout), then free s. */
static void run_until_done(uv_loop_t *loop, struct stacks *s)
{
	while (ndone == 0)
		uv_run(loop, UV_RUN_ONCE);
	cr_assert_eq(ndone, 1);
	(void)s;
}

static void close_loop(uv_loop_t *loop, struct stacks *s)
{
	stacks_free(s);
	uv_run(loop, UV_RUN_DEFAULT);
	cr_assert_eq(uv_loop_close(loop), 0);
}

Test(stacks, non_python_gets_its_kernel_wait_bounded, .timeout = 20)
{
	static char big[64 * 1024];
	uv_loop_t loop;
	struct stacks *s;
	struct stacks_proc p[3] = {{1001, 0}, {1002, 1}, {1003, 0}};
	const char *t;
	size_t len;

	fake_root();
	fake_str(1001, "stat", "1001 (fake_worker) S 1 1001\n");
	fake_str(1001, "wchan", "do_nanosleep");
	for (size_t i = 0; i + 20 < sizeof(big); i += 20)
		memcpy(big + i, "[<0>] hrtimer_nano\n\x01", 20);
	fake_file(1001, "stack", big, sizeof(big));
	/* A Python worker in D: neither py-spy nor a signal reaches it. */
	fake_str(1002, "stat", "1002 (python3) D 1 1002\n");
	fake_str(1002, "wchan", "__refrigerator");
	ndone = 0;
	cr_assert_eq(uv_loop_init(&loop), 0);
	cr_assert_eq(stacks_start(&loop, p, 3, STACKS_BEFORE_KILL, 5, on_done,
				  NULL, &s),
		     0);
	cr_assert_eq(ndone, 0, "cb ran before stacks_start returned");
	run_until_done(&loop, s);
	t = stacks_text(s, 0, &len);
	cr_assert(stacks_taken(s, 0));
	cr_assert_not_null(strstr(t, "wchan `do_nanosleep`"), "%s", t);
	cr_assert_not_null(strstr(t, "  [<0>] hrtimer_nano\n"), "%s", t);
	cr_assert_null(strchr(t, '\x01'));
	/* Each kernel line gains an indent of two. */
	cr_assert_leq(len, 2 * STACKS_PROC_READ + 256);
	t = stacks_text(s, 1, NULL);
	cr_assert_not_null(strstr(t, "state D"), "%s", t);
	cr_assert_not_null(strstr(t, "`__refrigerator`"), "%s", t);
	cr_assert(!stacks_taken(s, 2));
	cr_assert_str_eq(stacks_text(s, 2, NULL), "pid 1003 is gone");
	close_loop(&loop, s);
	fake_rm();
}

/* A child that ignores SIGABRT and SIGTERM, as a worker stuck hard. */
static pid_t stubborn_child(void)
{
	pid_t pid = fork();

	cr_assert_geq(pid, 0);
	if (pid == 0) {
		/* A failed assertion must not leave it behind. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		signal(SIGABRT, SIG_IGN);
		signal(SIGTERM, SIG_IGN);
		for (;;)
			pause();
	}
	return pid;
}

static void reap(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

/* A fake /proc entry for a real pid: a Python worker with faulthandler. */
static void fake_python(pid_t pid)
{
	static const char env[] = "HOME=/x\0PYTHONFAULTHANDLER=1\0";
	char stat[64];

	snprintf(stat, sizeof(stat), "%d (python3) S 1 %d\n", (int)pid,
		 (int)pid);
	fake_str(pid, "stat", stat);
	fake_file(pid, "environ", env, sizeof(env) - 1);
	fake_file(pid, "cmdline", "python3\0-u\0x.py\0", 16);
}

Test(stacks, faulthandler_dump_is_taken_from_the_tail, .timeout = 20)
{
	static const char tail[] =
	    "a line of the worker\nFatal Python error: Aborted\n\n"
	    "Current thread 0x1 (most recent call first):\n"
	    "  File \"x.py\", line 3 in hang_here\n";
	uv_loop_t loop;
	struct stacks *s;
	struct stacks_proc p[1];
	pid_t pid = fork();
	int status;

	cr_assert_geq(pid, 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		pause();
		_exit(0);
	}
	fake_root();
	fake_python(pid);
	setenv("PATH", "/nonexistent", 1);
	p[0].pid = pid;
	p[0].python = 1;
	ndone = 0;
	cr_assert_eq(uv_loop_init(&loop), 0);
	cr_assert_eq(stacks_start(&loop, p, 1, STACKS_BEFORE_KILL, 10,
				  on_done, NULL, &s),
		     0);
	/* It got SIGABRT (faulthandler's signal), nothing else. */
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
	stacks_exited(s, 0, tail, sizeof(tail) - 1);
	run_until_done(&loop, s);
	cr_assert(stacks_taken(s, 0));
	cr_assert_str_eq(stacks_text(s, 0, NULL), tail + 21);
	close_loop(&loop, s);
	fake_rm();
}

Test(stacks, faulthandler_that_never_dumps_is_abandoned, .timeout = 20)
{
	uv_loop_t loop;
	struct stacks *s;
	struct stacks_proc p[1];
	pid_t pid = stubborn_child();
	uint64_t t0;

	fake_root();
	fake_python(pid);
	setenv("PATH", "/nonexistent", 1);
	p[0].pid = pid;
	p[0].python = 1;
	ndone = 0;
	cr_assert_eq(uv_loop_init(&loop), 0);
	t0 = uv_hrtime();
	cr_assert_eq(stacks_start(&loop, p, 1, STACKS_BEFORE_KILL, 0.3,
				  on_done, NULL, &s),
		     0);
	run_until_done(&loop, s);
	cr_assert_geq(uv_hrtime() - t0, 250 * 1000000ull);
	cr_assert(!stacks_taken(s, 0));
	cr_assert_not_null(
	    strstr(stacks_text(s, 0, NULL), "abandoned: no faulthandler"));
	/* A late exit changes nothing. */
	stacks_exited(s, 0, "Fatal Python error", 18);
	cr_assert(!stacks_taken(s, 0));
	close_loop(&loop, s);
	reap(pid);
	fake_rm();
}

/* A py-spy of the test's own in dir: a shell script with body. */
static void fake_spy(const char *dir, const char *body)
{
	char path[PATH_MAX + 16];
	FILE *f;

	snprintf(path, sizeof(path), "%s/py-spy", dir);
	f = fopen(path, "w");
	cr_assert_not_null(f);
	fprintf(f, "#!/bin/sh\n%s\n", body);
	fclose(f);
	chmod(path, 0755);
	setenv("PATH", dir, 1);
}

Test(stacks, pyspy_output_is_the_stack_and_bounded, .timeout = 20)
{
	uv_loop_t loop;
	struct stacks *s;
	struct stacks_proc p[2];
	pid_t pid = stubborn_child();
	size_t len;

	fake_root();
	fake_python(pid);
	/* The args it got, then more than a text holds. */
	fake_spy(root, "echo \"$@\"; echo '    hang_here (x.py:3)'; "
		       "/usr/bin/head -c 200000 /dev/zero | /usr/bin/tr '\\0' x");
	p[0].pid = pid;
	p[0].python = 1;
	p[1] = p[0];
	ndone = 0;
	cr_assert_eq(uv_loop_init(&loop), 0);
	cr_assert_eq(stacks_start(&loop, p, 2, STACKS_LIVE, 10, on_done, NULL,
				  &s),
		     0);
	run_until_done(&loop, s);
	for (int i = 0; i < 2; i++) {
		const char *t = stacks_text(s, (size_t)i, &len);
		char want[64];

		snprintf(want, sizeof(want), "dump --pid %d\n", (int)pid);
		cr_assert(stacks_taken(s, (size_t)i), "%s", t);
		cr_assert_eq(strncmp(t, want, strlen(want)), 0, "%.80s", t);
		cr_assert_not_null(strstr(t, "hang_here (x.py:3)"));
		cr_assert_leq(len, STACKS_MAX_TEXT + 16);
		cr_assert_str_eq(t + len - 10, "... (cut)\n");
	}
	close_loop(&loop, s);
	/* A live dump never signals: the child is still there. */
	cr_assert_eq(kill(pid, 0), 0);
	reap(pid);
	fake_rm();
}

Test(stacks, pyspy_that_hangs_is_killed_and_abandoned, .timeout = 20)
{
	uv_loop_t loop;
	struct stacks *s;
	struct stacks_proc p[1];
	pid_t pid = stubborn_child();

	fake_root();
	fake_python(pid);
	fake_spy(root, "exec /bin/sleep 100");
	p[0].pid = pid;
	p[0].python = 1;
	ndone = 0;
	cr_assert_eq(uv_loop_init(&loop), 0);
	cr_assert_eq(stacks_start(&loop, p, 1, STACKS_BEFORE_KILL, 0.3,
				  on_done, NULL, &s),
		     0);
	run_until_done(&loop, s);
	cr_assert_not_null(strstr(stacks_text(s, 0, NULL),
				  "abandoned: py-spy did not finish"));
	/* The loop runs dry: the py-spy child was killed and reaped. */
	close_loop(&loop, s);
	reap(pid);
	fake_rm();
}

Test(stacks, pyspy_failure_falls_back_before_a_kill, .timeout = 20)
{
	static const char tail[] = "Fatal Python error: Aborted\n";
	uv_loop_t loop;
	struct stacks *s;
	struct stacks_proc p[2];
	pid_t pid = fork();

	cr_assert_geq(pid, 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		pause();
		_exit(0);
	}
	fake_root();
	fake_python(pid);
	fake_spy(root, "echo 'Error: Permission Denied' >&2; exit 1");
	p[0].pid = pid;
	p[0].python = 1;
	ndone = 0;
	cr_assert_eq(uv_loop_init(&loop), 0);
	cr_assert_eq(stacks_start(&loop, p, 1, STACKS_BEFORE_KILL, 10,
				  on_done, NULL, &s),
		     0);
	/* py-spy failed: faulthandler's SIGABRT follows. */
	while (waitpid(pid, NULL, WNOHANG) != pid) {
		uv_run(&loop, UV_RUN_NOWAIT);
		usleep(1000);
	}
	stacks_exited(s, 0, tail, sizeof(tail) - 1);
	run_until_done(&loop, s);
	cr_assert_str_eq(stacks_text(s, 0, NULL), tail);
	close_loop(&loop, s);
	/* Live, the failure is the answer. */
	pid = stubborn_child();
	fake_python(pid);
	p[0].pid = p[1].pid = pid;
	p[0].python = 1;
	p[1].python = 1;
	ndone = 0;
	cr_assert_eq(uv_loop_init(&loop), 0);
	cr_assert_eq(stacks_start(&loop, p, 1, STACKS_LIVE, 10, on_done, NULL,
				  &s),
		     0);
	run_until_done(&loop, s);
	cr_assert(!stacks_taken(s, 0));
	cr_assert_not_null(strstr(stacks_text(s, 0, NULL),
				  "py-spy failed: Error: Permission Denied"));
	close_loop(&loop, s);
	reap(pid);
	fake_rm();
}

Test(stacks, live_without_pyspy_says_so, .timeout = 20)
{
	uv_loop_t loop;
	struct stacks *s;
	struct stacks_proc p[1];
	pid_t pid = stubborn_child();

	fake_root();
	fake_python(pid);
	setenv("PATH", "/nonexistent", 1);
	p[0].pid = pid;
	p[0].python = 1;
	ndone = 0;
	cr_assert_eq(uv_loop_init(&loop), 0);
	cr_assert_eq(stacks_start(&loop, p, 1, STACKS_LIVE, 10, on_done, NULL,
				  &s),
		     0);
	run_until_done(&loop, s);
	cr_assert(!stacks_taken(s, 0));
	cr_assert_not_null(strstr(stacks_text(s, 0, NULL), "without py-spy"));
	close_loop(&loop, s);
	cr_assert_eq(kill(pid, 0), 0);
	reap(pid);
	fake_rm();
}

/* A real child stopped by SIGSTOP, as a worker that stopped itself. */
static pid_t stopped_child(void)
{
	pid_t pid = fork();
	int st;

	cr_assert_geq(pid, 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		raise(SIGSTOP);
		for (;;)
			pause();
	}
	cr_assert_eq(waitpid(pid, &st, WUNTRACED), pid);
	cr_assert(WIFSTOPPED(st));
	return pid;
}

/* Whether sig waits in pid's pending sets (the real /proc's status). */
static int pending(pid_t pid, int sig)
{
	char path[64], line[256];
	unsigned long long mask = 0, m;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	cr_assert_not_null(f);
	while (fgets(line, sizeof(line), f))
		if ((sscanf(line, "SigPnd: %llx", &m) == 1 ||
		     sscanf(line, "ShdPnd: %llx", &m) == 1))
			mask |= m;
	fclose(f);
	return (mask >> (sig - 1)) & 1;
}

/*
 * A stopped Python worker (SIGSTOP: T; a tracer's stop: t) could answer
 * neither py-spy nor faulthandler before it is continued: neither is
 * asked (no py-spy run, no SIGABRT left pending), its state comes from
 * /proc at once.
 */
Test(stacks, stopped_process_is_asked_for_no_dump, .timeout = 20)
{
	uv_loop_t loop;
	struct stacks *s;
	struct stacks_proc p[2];
	pid_t pid[2] = {stopped_child(), stopped_child()};
	const char *letters = "Tt",
		   *want[2] = {"is stopped (state T)", "is stopped by a tracer "
						       "(state t)"};
	char stat[64], ran[PATH_MAX + 16], body[PATH_MAX + 64];

	fake_root();
	snprintf(ran, sizeof(ran), "%s/spy_ran", root);
	snprintf(body, sizeof(body), "/usr/bin/touch %s; exit 1", ran);
	fake_spy(root, body);
	for (int i = 0; i < 2; i++) {
		fake_python(pid[i]);
		snprintf(stat, sizeof(stat), "%d (python3) %c 1 %d\n",
			 (int)pid[i], letters[i], (int)pid[i]);
		fake_str(pid[i], "stat", stat);
		p[i].pid = pid[i];
		p[i].python = 1;
	}
	ndone = 0;
	cr_assert_eq(uv_loop_init(&loop), 0);
	cr_assert_eq(stacks_start(&loop, p, 2, STACKS_BEFORE_KILL, 0.5, on_done,
				  NULL, &s),
		     0);
	run_until_done(&loop, s);
	for (int i = 0; i < 2; i++) {
		const char *t = stacks_text(s, (size_t)i, NULL);

		cr_assert(stacks_taken(s, (size_t)i), "%s", t);
		cr_assert_str_eq(stacks_source(s, (size_t)i), "/proc");
		cr_assert_not_null(strstr(t, want[i]), "%s", t);
		cr_assert(!pending(pid[i], SIGABRT),
			  "pid %d was sent faulthandler's SIGABRT",
			  (int)pid[i]);
	}
	close_loop(&loop, s);
	cr_assert_neq(access(ran, F_OK), 0, "py-spy was run");
	for (int i = 0; i < 2; i++)
		reap(pid[i]);
	fake_rm();
}

Test(stacks, free_before_cb_kills_pyspy, .timeout = 20)
{
	uv_loop_t loop;
	struct stacks *s;
	struct stacks_proc p[1];
	pid_t pid = stubborn_child();

	fake_root();
	fake_python(pid);
	fake_spy(root, "exec /bin/sleep 100");
	p[0].pid = pid;
	p[0].python = 1;
	ndone = 0;
	cr_assert_eq(uv_loop_init(&loop), 0);
	cr_assert_eq(stacks_start(&loop, p, 1, STACKS_BEFORE_KILL, 100,
				  on_done, NULL, &s),
		     0);
	uv_run(&loop, UV_RUN_NOWAIT);
	close_loop(&loop, s);
	cr_assert_eq(ndone, 0);
	reap(pid);
	fake_rm();
}

/*
 * The stall detector (agent/progress.c and agent/stall.c, compiled in
 * here: they are private to agent/): /proc's stat and io parsed, hostile
 * bytes refused, a scan of a fake /proc summing each worker's process
 * tree, the progress thresholds, the quiet counter's steps, and two
 * detectors sharing one counter on a real loop: a node whose rank keeps
 * working holds the hang off, and the job is hung once it stops too.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../agent/progress.c"
#include "../../agent/stall.c"

#define S(lit) lit, sizeof(lit) - 1

/* A /proc/PID/stat line: pgrp, session and the four CPU times. */
static void stat_line(char *buf, size_t len, int pid, const char *comm,
		      int pgrp, int sid, long ut, long st, long cut, long cst)
{
	snprintf(buf, len,
		 "%d (%s) S 1 %d %d 0 -1 4194560 100 0 0 0 %ld %ld %ld %ld 20 "
		 "0 3 0 12345 1000000 200 18446744073709551615 1 1 0 0 0 0 0 "
		 "0 0 0 0 0 17 1 0 0 0 0 0\n",
		 pid, comm, pgrp, sid, ut, st, cut, cst);
}

Test(progress, parse_stat, .timeout = 20)
{
	char buf[512];
	pid_t pg, sid;
	uint64_t t;

	stat_line(buf, sizeof(buf), 42, "python3", 40, 40, 7, 3, 2, 1);
	cr_assert_eq(progress_parse_stat(buf, strlen(buf), &pg, &sid, &t), 0);
	cr_assert_eq(pg, 40);
	cr_assert_eq(sid, 40);
	cr_assert_eq(t, 13);
	/* A command name with blanks and parentheses: fields follow the
	 * last ')'. */
	stat_line(buf, sizeof(buf), 43, "a) (b c) 9 9 9", 41, 5, 1, 1, 0, 0);
	cr_assert_eq(progress_parse_stat(buf, strlen(buf), &pg, &sid, &t), 0);
	cr_assert_eq(pg, 41);
	cr_assert_eq(sid, 5);
	cr_assert_eq(t, 2);
}

Test(progress, parse_stat_hostile, .timeout = 20)
{
	char buf[512];
	pid_t pg = 0, sid = 0;
	uint64_t t = 0;

	cr_assert_eq(progress_parse_stat(S(""), &pg, &sid, &t), -1);
	cr_assert_eq(
	    progress_parse_stat(S("42 python3 S 1 2 3"), &pg, &sid, &t), -1,
	    "no ')'");
	cr_assert_eq(progress_parse_stat(S("42 (x) S 1 40 40 0 -1 4 1 0 0 0"),
					 &pg, &sid, &t),
		     -1, "cut before the times");
	stat_line(buf, sizeof(buf), 42, "x", 40, 40, -5, 0, 0, 0);
	cr_assert_eq(progress_parse_stat(buf, strlen(buf), &pg, &sid, &t), -1,
		     "a negative time");
	cr_assert_eq(
	    progress_parse_stat(
		S("42 (x) S 1 40 40 0 -1 4 1 0 0 0 99999999999999999999 0 0 0"),
		&pg, &sid, &t),
	    -1, "a time that overflows");
	cr_assert_eq(
	    progress_parse_stat(S("42 (x) S 1 40 40 0 -1 4 1 0 0 0 1x 0 0 0"),
				&pg, &sid, &t),
	    -1, "a time that is not a number");
	stat_line(buf, sizeof(buf), 42, "x", 0, 40, 1, 0, 0, 0);
	cr_assert_eq(progress_parse_stat(buf, strlen(buf), &pg, &sid, &t), -1,
		     "process group 0");
	stat_line(buf, sizeof(buf), 42, "x", 40, 40, (1L << 62), 0, 0, 0);
	cr_assert_eq(progress_parse_stat(buf, strlen(buf), &pg, &sid, &t), -1,
		     "a time past 2^62 (the sum could wrap)");
}

Test(progress, parse_io, .timeout = 20)
{
	cr_assert_eq(progress_parse_io(S("rchar: 100\nwchar: 23\nsyscr: 5\n"
					 "read_bytes: 4096\n")),
		     123);
	cr_assert_eq(progress_parse_io(S("wchar: 7")), 7, "no newline");
	cr_assert_eq(progress_parse_io(S("rchar: -4\nwchar: x\n")), 0);
	cr_assert_eq(progress_parse_io(S("rchar: 99999999999999999999\n")), 0);
	cr_assert_eq(progress_parse_io(S("rchar 5\nrchar:\n")), 0);
	cr_assert_eq(progress_parse_io(S("")), 0);
}

/* ---- a fake /proc ------------------------------------------------------- */

static char root[64];

static void fake_proc(int pid, int pgrp, int sid, long ticks, long io)
{
	char dir[128], path[192], buf[512];
	FILE *f;

	snprintf(dir, sizeof(dir), "%s/%d", root, pid);
	mkdir(dir, 0700);
	snprintf(path, sizeof(path), "%s/stat", dir);
	stat_line(buf, sizeof(buf), pid, "w", pgrp, sid, ticks, 0, 0, 0);
	f = fopen(path, "w");
	cr_assert(f);
	fputs(buf, f);
	fclose(f);
	if (io < 0)
		return;
	snprintf(path, sizeof(path), "%s/io", dir);
	f = fopen(path, "w");
	cr_assert(f);
	fprintf(f, "rchar: %ld\nwchar: 0\n", io);
	fclose(f);
}

static void write_file(const char *rel, const char *text)
{
	char path[192];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	f = fopen(path, "w");
	cr_assert(f);
	fputs(text, f);
	fclose(f);
}

static void make_root(void)
{
	snprintf(root, sizeof(root), "/tmp/crun-progress-XXXXXX");
	cr_assert(mkdtemp(root));
}

static void rm_root(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	cr_assert_eq(system(cmd), 0);
}

/* root/PID/task/TID/children: the children that thread forked. */
static void fake_children(int pid, int tid, const char *kids)
{
	char path[192];

	snprintf(path, sizeof(path), "%s/%d/task", root, pid);
	mkdir(path, 0700);
	snprintf(path, sizeof(path), "%s/%d/task/%d", root, pid, tid);
	mkdir(path, 0700);
	snprintf(path, sizeof(path), "%d/task/%d/children", pid, tid);
	write_file(path, kids);
}

/* Guard 90 parents worker 100 and a leftover of its; guard 190 worker 200. */
static void fake_job(void)
{
	char dir[128];

	fake_proc(90, 1, 1, 1000, 1000); /* a guard: not a worker's */
	fake_children(90, 90, "100 103 ");
	fake_proc(100, 100, 100, 10, 1000); /* worker 100 */
	fake_children(100, 100, "101 ");
	fake_children(100, 105, "102 "); /* forked by another thread */
	fake_proc(101, 100, 100, 5, 24); /* its child, same group */
	fake_children(101, 101, "");
	fake_proc(102, 102, 100, 1, -1); /* its own group, same session */
	fake_proc(103, 100, 100, 2, 0);	 /* orphaned, handed to the guard */
	fake_proc(190, 1, 1, 1000, 1000);
	fake_children(190, 190, "200 400");
	fake_proc(200, 200, 200, 7, 3); /* worker 200 */
	/* Hostile or odd entries count nothing. */
	snprintf(dir, sizeof(dir), "%s/400", root);
	mkdir(dir, 0700);
	write_file("400/stat", "400 (evil S 1 100 100 garbage");
	snprintf(dir, sizeof(dir), "%s/self", root);
	mkdir(dir, 0700);
	write_file("notapid", "x");
}

/* fake_proc with the parent set, for the workers (the guard roots them). */
static void fake_worker(int pid, int ppid, long ticks, long io)
{
	char path[192], buf[512], *p;
	FILE *f;

	fake_proc(pid, pid, pid, ticks, io);
	snprintf(path, sizeof(path), "%s/%d/stat", root, pid);
	stat_line(buf, sizeof(buf), pid, "w", pid, pid, ticks, 0, 0, 0);
	p = strstr(buf, ") S 1 ");
	cr_assert(p);
	f = fopen(path, "w");
	cr_assert(f);
	fprintf(f, "%.*s) S %d%s", (int)(p - buf), buf, ppid, p + 5);
	fclose(f);
}

Test(progress, scan_sums_each_tree, .init = make_root, .fini = rm_root,
     .timeout = 20)
{
	pid_t pg[3] = {100, 200, 0};
	struct progress_sample s[3];

	fake_job();
	fake_worker(100, 90, 10, 1000);
	fake_worker(200, 190, 7, 3);
	cr_assert_eq(progress_scan(root, pg, 3, s), 5);
	cr_assert_eq(s[0].cpu_ticks, 18);
	cr_assert_eq(s[0].io_bytes, 1024);
	cr_assert_eq(s[0].nproc, 4);
	cr_assert_eq(s[1].cpu_ticks, 7);
	cr_assert_eq(s[1].io_bytes, 3);
	cr_assert_eq(s[2].nproc, 0, "pgid 0 matches nothing");
	cr_assert_lt(progress_scan("/nonexistent-proc", pg, 3, s), 0);
	cr_assert_eq(s[0].cpu_ticks, 0, "zeroed when root is not there");
}

/*
 * Processes outside the workers' trees are never read, even ones that
 * claim a worker's group: a host's other processes cost the scan nothing.
 */
Test(progress, scan_reads_only_the_job, .init = make_root, .fini = rm_root,
     .timeout = 20)
{
	pid_t pg[2] = {100, 200};
	struct progress_sample s[2];

	fake_job();
	fake_worker(100, 90, 10, 1000);
	fake_worker(200, 190, 7, 3);
	fake_proc(300, 300, 300, 99, 99);   /* not ours */
	fake_proc(301, 100, 100, 500, 500); /* not in the tree: not read */
	fake_proc(302, 200, 200, 500, 500);
	cr_assert_eq(progress_scan(root, pg, 2, s), 5);
	cr_assert_eq(s[0].cpu_ticks, 18);
	cr_assert_eq(s[0].nproc, 4);
	cr_assert_eq(s[1].cpu_ticks, 7);
	cr_assert_eq(s[1].nproc, 1);
}

/* Without children files (CONFIG_PROC_CHILDREN off) all of root is read. */
Test(progress, scan_without_children_files, .init = make_root, .fini = rm_root,
     .timeout = 20)
{
	pid_t pg[2] = {100, 200};
	struct progress_sample s[2];
	char path[192];

	fake_proc(100, 100, 100, 10, 1000);
	snprintf(path, sizeof(path), "%s/100/task", root);
	mkdir(path, 0700);
	snprintf(path, sizeof(path), "%s/100/task/100", root);
	mkdir(path, 0700);
	fake_proc(101, 100, 100, 5, 24);
	fake_proc(200, 200, 200, 7, 3);
	fake_proc(300, 300, 300, 99, 99);
	cr_assert_eq(progress_scan(root, pg, 2, s), 3);
	cr_assert_eq(s[0].cpu_ticks, 15);
	cr_assert_eq(s[0].nproc, 2);
	cr_assert_eq(s[1].cpu_ticks, 7);
}

Test(progress, thresholds, .timeout = 20)
{
	struct progress_rank r;
	struct progress_sample s = {100, 0, 1};

	memset(&r, 0, sizeof(r));
	cr_assert_eq(progress_note(&r, &s, 1000, 1000, 100), 1, "first look");
	/* 4 ticks in a second at 100 Hz: 40 ms, below 50 ms a second. */
	s.cpu_ticks += 4;
	cr_assert_eq(progress_note(&r, &s, 2000, 1000, 100), 0);
	cr_assert_eq(r.since_ms, 1000);
	s.cpu_ticks += 5;
	cr_assert_eq(progress_note(&r, &s, 3000, 1000, 100), 1);
	cr_assert_eq(r.since_ms, 3000);
	/* The same 5 ticks over a late tick of 2 s: below the rate. */
	s.cpu_ticks += 5;
	cr_assert_eq(progress_note(&r, &s, 5000, 2000, 100), 0);
	/* I/O: 64 KiB a second moves it, 60 KiB does not. */
	s.io_bytes += 60 << 10;
	cr_assert_eq(progress_note(&r, &s, 6000, 1000, 100), 0);
	s.io_bytes += 64 << 10;
	cr_assert_eq(progress_note(&r, &s, 7000, 1000, 100), 1);
	/* The tree changed: a process started or exited. */
	s.nproc = 2;
	cr_assert_eq(progress_note(&r, &s, 8000, 1000, 100), 1);
	s.nproc = 1;
	s.cpu_ticks -= 50;
	cr_assert_eq(progress_note(&r, &s, 9000, 1000, 100), 1);
	cr_assert_eq(progress_note(&r, &s, 10000, 1000, 100), 0);
}

Test(stall, quiet_steps, .timeout = 20)
{
	int d;

	cr_assert_eq(stall_quiet_step(0, 4999, 5000, &d), 0);
	cr_assert_eq(d, 0);
	cr_assert_eq(stall_quiet_step(0, 5000, 5000, &d), 1);
	cr_assert_eq(d, 1, "went quiet: +1");
	cr_assert_eq(stall_quiet_step(1, 9000, 5000, &d), 1);
	cr_assert_eq(d, 0, "still quiet: counted once");
	cr_assert_eq(stall_quiet_step(1, 0, 5000, &d), 0);
	cr_assert_eq(d, -1, "progressed again: -1");
	cr_assert_eq(stall_is_hung(1, 3, 3), 1);
	cr_assert_eq(stall_is_hung(1, 2, 3), 0, "one node still works");
	cr_assert_eq(stall_is_hung(-1, 3, 3), 0, "only going quiet completes");
	cr_assert_eq(stall_is_hung(1, 1, 0), 0);
}

/* ---- two detectors sharing one counter on a real loop -------------------- */

static int64_t counter;
static int nadds, hung[2];
static uv_loop_t *tloop;

static int fake_add(void *kv, const char *key, int64_t delta, rdzv_kv_cb cb,
		    void *arg)
{
	struct crun_store_reply rep;

	(void)kv;
	cr_assert(strstr(key, "r3/quiet") != NULL, "the round's key: %s", key);
	counter += delta;
	nadds++;
	memset(&rep, 0, sizeof(rep));
	rep.num = counter;
	cb(0, &rep, arg);
	return 0;
}

static int fake_set(void *kv, const char *key, const void *v, size_t n,
		    rdzv_kv_cb cb, void *arg)
{
	(void)kv;
	(void)v;
	(void)n;
	(void)cb;
	(void)arg;
	cr_assert(strstr(key, "r3/progress/") != NULL, "%s", key);
	return 0;
}

static const struct rdzv_kv_ops fake_ops = {.add = fake_add, .set = fake_set};

static void on_hung_test(struct stall *s, const char *why, void *data)
{
	(void)s;
	cr_assert_str_eq(why, "no rank progressed for 2 s");
	hung[(intptr_t)data]++;
	uv_stop(tloop);
}

static long busy_ticks;
static int busy_until_ms = 4500;

/* Node 1's rank works (100 ticks a second) until busy_until_ms. */
static void on_work(uv_timer_t *t)
{
	if (uv_now(tloop) - *(uint64_t *)t->data < (uint64_t)busy_until_ms) {
		busy_ticks += 30;
		fake_proc(200, 200, 200, busy_ticks, 0);
	}
}

Test(stall, job_hung_only_when_every_node_is_quiet, .init = make_root,
     .fini = rm_root, .timeout = 30)
{
	uv_loop_t loop;
	struct stall *s[2];
	pid_t pids0[1] = {100}, pids1[1] = {200};
	struct stall_round r;
	uv_timer_t work;
	uint64_t t0;

	tloop = &loop;
	cr_assert_eq(uv_loop_init(&loop), 0);
	fake_proc(100, 100, 100, 10, 0);
	fake_proc(200, 200, 200, 10, 0);
	for (intptr_t i = 0; i < 2; i++)
		cr_assert_eq(
		    stall_new(&loop, 2.0, root, on_hung_test, (void *)i, &s[i]),
		    0);
	memset(&r, 0, sizeof(r));
	r.ops = &fake_ops;
	r.prefix = "crun/j/r3/";
	r.group_world_size = 2;
	r.report_every = 1;
	r.nproc = 1;
	r.pids = pids0;
	r.group_rank = 0;
	stall_start(s[0], &r);
	r.pids = pids1;
	r.group_rank = 1;
	stall_start(s[1], &r);
	t0 = uv_now(&loop);
	uv_timer_init(&loop, &work);
	work.data = &t0;
	uv_timer_start(&work, on_work, 100, 100);
	uv_run(&loop, UV_RUN_DEFAULT);
	/* Node 0 went quiet after 2 s; node 1 worked until 4.5 s, then was
	 * quiet for 2 s more: hung at ~6.5 s, found by node 1's ADD. */
	cr_assert_eq(hung[0] + hung[1], 1, "one node found the hang");
	cr_assert_eq(hung[1], 1, "the last node to go quiet");
	cr_assert_geq(uv_now(&loop) - t0, 6000, "not before node 1 stopped");
	cr_assert_leq(uv_now(&loop) - t0, 8500);
	cr_assert_eq(counter, 2);
	cr_assert_geq(stall_age_ms(s[0]), 4000);
	uv_timer_stop(&work);
	uv_close((uv_handle_t *)&work, NULL);
	for (int i = 0; i < 2; i++)
		stall_close(s[i]);
	uv_run(&loop, UV_RUN_DEFAULT);
	cr_assert_eq(uv_loop_close(&loop), 0);
	for (int i = 0; i < 2; i++)
		stall_free(s[i]);
}

Test(stall, alone_and_off, .init = make_root, .fini = rm_root, .timeout = 20)
{
	uv_loop_t loop;
	struct stall *s, *off;
	pid_t pids[2] = {100, 0};
	struct stall_round r;
	uint64_t t0;

	tloop = &loop;
	hung[0] = 0;
	cr_assert_eq(uv_loop_init(&loop), 0);
	fake_proc(100, 100, 100, 10, 0);
	cr_assert_eq(stall_new(&loop, 2.0, root, on_hung_test, NULL, &s), 0);
	cr_assert_eq(stall_new(&loop, 0, root, on_hung_test, NULL, &off), 0);
	memset(&r, 0, sizeof(r));
	r.pids = pids;
	r.nproc = 2; /* one rank already exited: it counts as quiet */
	stall_start(s, &r);
	stall_start(off, &r);
	t0 = uv_now(&loop);
	uv_run(&loop, UV_RUN_DEFAULT);
	cr_assert_eq(hung[0], 1);
	cr_assert_geq(uv_now(&loop) - t0, 2000);
	cr_assert_leq(uv_now(&loop) - t0, 4000);
	cr_assert_eq(stall_age_ms(off), 0, "off: never runs");
	stall_close(s);
	stall_close(off);
	uv_run(&loop, UV_RUN_DEFAULT);
	cr_assert_eq(uv_loop_close(&loop), 0);
	stall_free(s);
	stall_free(off);
}

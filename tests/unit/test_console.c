/*
 * The agent's console (agent/console.c, compiled in here: it is private to
 * agent/): a reader that stops reading never blocks a write, lines beyond
 * the bound are dropped whole and counted in a notice, and what does reach
 * the reader is whole lines in order.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../../agent/collapse.c"
#include "../../agent/jobcon.c"
#include "../../agent/jobrec.c"
#include "../../agent/console.c"

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* fd 1 becomes the write end of a small pipe; returns the read end. */
static int stdout_to_pipe(void)
{
	int p[2];

	cr_assert_eq(pipe(p), 0);
	fcntl(p[1], F_SETPIPE_SZ, 4096);
	cr_assert_eq(dup2(p[1], 1), 1);
	close(p[1]);
	return p[0];
}

Test(console, stalled_reader_never_blocks, .timeout = 20)
{
	uv_loop_t loop;
	struct console *c;
	char line[64], buf[65536], *all = NULL;
	size_t len = 0, cap = 0;
	unsigned long long dropped = 0;
	int rfd, n, got = 0, expect = 0;
	double t0;

	uv_loop_init(&loop);
	rfd = stdout_to_pipe();
	cr_assert_eq(console_new(&loop, 16384, &c), 0);
	/* 20000 lines into a 4 KiB pipe nobody reads: no write may block. */
	t0 = now();
	for (int i = 0; i < 20000; i++) {
		n = snprintf(line, sizeof(line), "line %d of the test\n", i);
		console_write(c, 1, line, (size_t)n);
	}
	cr_assert_lt(now() - t0, 5.0, "writes blocked on a stalled reader");
	/* The reader wakes up: run the loop until the queue is written. */
	fcntl(rfd, F_SETFL, O_NONBLOCK);
	for (int idle = 0; idle < 200;) {
		ssize_t k = read(rfd, buf, sizeof(buf));

		if (k > 0) {
			if (len + (size_t)k > cap) {
				cap = (len + (size_t)k) * 2;
				all = realloc(all, cap + 1);
			}
			memcpy(all + len, buf, (size_t)k);
			len += (size_t)k;
			idle = 0;
		} else {
			idle++;
			usleep(2000);
		}
		uv_run(&loop, UV_RUN_NOWAIT);
	}
	cr_assert_not_null(all);
	all[len] = '\0';
	for (char *l = all, *nl; (nl = strchr(l, '\n')) != NULL; l = nl + 1) {
		int i;
		unsigned long long d, b;

		*nl = '\0';
		if (sscanf(l, "crun: dropped %llu lines (%llu bytes)", &d,
			   &b) == 2) {
			dropped += d;
			continue;
		}
		cr_assert_eq(sscanf(l, "line %d of the test", &i), 1,
			     "a split or mixed line: '%s'", l);
		cr_assert_geq(i, expect, "lines out of order");
		expect = i + 1;
		got++;
	}
	cr_assert_gt(dropped, 0, "nothing dropped beyond a 16 KiB bound");
	cr_assert_eq(got + (int)dropped, 20000,
		     "lines shown (%d) + dropped (%llu) != lines written", got,
		     dropped);
	console_close(c);
	uv_run(&loop, UV_RUN_DEFAULT);
	cr_assert_eq(uv_loop_close(&loop), 0);
	console_free(c, 100);
	free(all);
}

Test(console, gone_reader_is_dropped, .timeout = 10)
{
	uv_loop_t loop;
	struct console *c;
	int rfd;

	uv_loop_init(&loop);
	rfd = stdout_to_pipe();
	close(rfd);
	signal(SIGPIPE, SIG_IGN);
	cr_assert_eq(console_new(&loop, 1024, &c), 0);
	for (int i = 0; i < 1000; i++)
		console_write(c, 1, "x\n", 2);
	cr_assert_eq(c->out[0].len, 0, "nothing queued for a reader gone");
	console_close(c);
	uv_run(&loop, UV_RUN_DEFAULT);
	cr_assert_eq(uv_loop_close(&loop), 0);
	console_free(c, 100);
}

/*
 * The job's console on the host: a batch whose lines times their ranks
 * times the job's ranks pass the work bound is collapsed up to the bound,
 * then written as it came ("n<node>:" and the node's prefix), every line
 * once and in order: what waited goes out first.
 */
Test(console, a_batch_past_its_work_bound_is_written_as_it_came, .timeout = 60)
{
	uv_loop_t loop;
	struct console *c;
	struct collapse_opts o = {10000, 1 << 26, "", job_on_shown, NULL, NULL};
	char batch[8192], *out, want[64];
	size_t k = 0, n;
	FILE *f = tmpfile();
	const char *at;

	cr_assert_not_null(f);
	fflush(stdout);
	cr_assert_eq(dup2(fileno(f), 1), 1);
	uv_loop_init(&loop);
	cr_assert_eq(console_new(&loop, 1 << 20, &c), 0);
	cr_assert_eq(console_collapse(c, 10000, 1 << 26, "default", 1), 0);
	o.data = c;
	c->job.col = collapse_new(&loop, &o);
	console_job_round(c, 0, 0, 2, 0, 4096);
	for (int i = 0; i < 40; i++) /* 2049 x 4096 of work each */
		k += (size_t)snprintf(batch + k, sizeof(batch) - k,
				      "L 1 0 0-2047 4 0 %d\n[x]:line %d\n",
				      i < 10 ? 7 : 8, i);
	job_on_batch(c, 0, 1, batch, k);
	console_close(c);
	uv_run(&loop, UV_RUN_DEFAULT);
	console_free(c, 1000);
	n = (size_t)ftell(f);
	cr_assert_gt(n, 0);
	out = calloc(1, n + 1);
	rewind(f);
	cr_assert_eq(fread(out, 1, n, f), n);
	at = out;
	cr_assert(strstr(out, "n1:[0-2047]:line 6\n") && strstr(out, "n1:[x]:line 7\n"));
	for (int i = 0; i < 40; i++) {
		/* collapsed while within the bound, then as it came */
		int within = (uint64_t)(i + 1) * 2049 * 4096 <= JOB_BATCH_WORK;

		snprintf(want, sizeof(want), "%sline %d\n",
			 within ? "n1:[0-2047]:" : "n1:[x]:", i);
		at = strstr(at, want);
		cr_assert_not_null(at, "'%s' missing or out of order in:\n%s", want, out);
	}
	free(out);
	fclose(f);
	uv_loop_close(&loop);
}

/*
 * The FileTimer server's ranges (agent/filetimer.c, compiled in here as
 * test_filetimer does) at their edges: pid 1..INT_MAX, signal -64..64, a
 * scope of at most 255 bytes, 4096 timers, the one timer armed at most an
 * hour ahead, and an expiry acted on once it passes (waited for, bounded).
 * Each bound is taken; one past it is refused with a notice.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../../agent/filetimer.c"

static int owns_all(void *data, pid_t pid, int *rank)
{
	(void)data;
	(void)pid;
	*rank = 0;
	return 1;
}

static uv_loop_t loop;
static struct filetimer *ft;
static int wfd = -1;

static void start(void)
{
	char err[256] = "";

	cr_assert_eq(uv_loop_init(&loop), 0);
	cr_assert_eq(filetimer_new(&loop, NULL, owns_all, NULL, &ft, err,
				   sizeof(err)),
		     0, "%s", err);
	wfd = open(filetimer_path(ft), O_WRONLY | O_NONBLOCK);
	cr_assert_geq(wfd, 0);
}

static void stop(void)
{
	close(wfd);
	filetimer_close(ft);
	uv_run(&loop, UV_RUN_DEFAULT);
	cr_assert_eq(uv_loop_close(&loop), 0);
}

/* Write one request line, running the loop while the FIFO is full. */
static void put(const char *line)
{
	size_t len = strlen(line), off = 0;

	while (off < len) {
		ssize_t n = write(wfd, line + off, len - off);

		if (n > 0)
			off += (size_t)n;
		else if (n < 0 && errno == EAGAIN)
			uv_run(&loop, UV_RUN_NOWAIT);
		else
			cr_assert_fail("write: %s", strerror(errno));
	}
}

/* Run the loop (bounded) until ft holds n timers and has noted notes. */
static void settle(int n, int notes)
{
	for (int i = 0; i < 5000 && (ft->n != n || ft->notices != notes); i++) {
		uv_run(&loop, UV_RUN_NOWAIT);
		usleep(1000);
	}
	cr_assert_eq(ft->n, n, "timers: %d, want %d", ft->n, n);
	cr_assert_eq(ft->notices, notes, "notices: %d, want %d", ft->notices,
		     notes);
}

static const char *req(long long pid, const char *scope, double exp, int sig)
{
	static char line[1024];

	snprintf(line, sizeof(line),
		 "{\"pid\": %lld, \"scope_id\": \"%s\", \"expiration_time\": "
		 "%.3f, \"signal\": %d}\n",
		 pid, scope, exp, sig);
	return line;
}

static const char *run_of(char c, size_t n)
{
	static char s[512];

	memset(s, c, n);
	s[n] = '\0';
	return s;
}

Test(limits_filetimer, request_ranges, .timeout = 60)
{
	double far = now_epoch() + 600;
	int n = 0, notes = 0;

	start();
	/* pid 1..INT_MAX */
	put(req(1, "p1", far, 0));
	settle(++n, notes);
	put(req(2147483647LL, "pmax", far, 0));
	settle(++n, notes);
	put(req(0, "p0", far, 0));
	settle(n, ++notes);
	put(req(2147483648LL, "pbig", far, 0));
	settle(n, ++notes);
	/* signal -64..64 */
	put(req(1, "s64", far, 64));
	settle(++n, notes);
	put(req(1, "s-64", far, -64));
	settle(++n, notes);
	put(req(1, "s65", far, 65));
	settle(n, ++notes);
	put(req(1, "s-65", far, -65));
	settle(n, ++notes);
	/* scope: 255 bytes, not 256 */
	put(req(1, run_of('a', 255), far, 0));
	settle(++n, notes);
	cr_assert_eq(strlen(ft->t[n - 1].scope), 255);
	put(req(1, run_of('b', 256), far, 0));
	settle(n, ++notes);
	stop();
}

Test(limits_filetimer, max_timers, .timeout = 120)
{
	double far = now_epoch() + 600;
	char scope[32];
	int notes = 0;

	start();
	for (int i = 0; i < MAX_TIMERS; i++) {
		snprintf(scope, sizeof(scope), "t%d", i);
		put(req(1, scope, far, 0));
	}
	settle(MAX_TIMERS, notes);
	cr_assert_eq(MAX_TIMERS, 4096);
	/* One more is refused; setting one already held is not. */
	put(req(1, "one-more", far, 0));
	settle(MAX_TIMERS, ++notes);
	put(req(1, "t7", far + 5, 0));
	for (int i = 0; i < 5000 && ft->t[7].expires != far + 5; i++) {
		uv_run(&loop, UV_RUN_NOWAIT);
		usleep(1000);
	}
	settle(MAX_TIMERS, notes);
	/* A release makes room again. */
	put(req(1, "t8", -1, 0));
	settle(MAX_TIMERS - 1, notes);
	put(req(1, "one-more", far, 0));
	settle(MAX_TIMERS, notes);
	stop();
}

Test(limits_filetimer, armed_at_most_an_hour, .timeout = 30)
{
	start();
	/* Just under the hour: armed for it. */
	put(req(1, "under", now_epoch() + 3500, 0));
	settle(1, 0);
	cr_assert_geq(uv_timer_get_due_in(&ft->timer), 3490 * 1000);
	cr_assert_leq(uv_timer_get_due_in(&ft->timer), 3501 * 1000);
	put(req(1, "under", -1, 0));
	settle(0, 0);
	/* Two hours ahead: armed for the hour (then looked at again). */
	put(req(1, "over", now_epoch() + 7200, 0));
	settle(1, 0);
	cr_assert_leq(uv_timer_get_due_in(&ft->timer), 3600 * 1000 + 1);
	cr_assert_geq(uv_timer_get_due_in(&ft->timer), 3590 * 1000);
	stop();
}

/* An expiry 0.5 s ahead is acted on after it (the timer dropped), within a
 * bound that holds on a loaded machine, and not before; one 5 s ahead is
 * left alone meanwhile. */
Test(limits_filetimer, expiry_acted_on_after_it, .timeout = 30)
{
	double t0, exp;

	start();
	t0 = now_epoch();
	/* Whole milliseconds, as req() writes them: a value rounded down on
	 * the wire would be due up to 0.5 ms before the one compared here. */
	exp = ceil((t0 + 0.5) * 1000) / 1000;
	put(req(1, "soon", exp, 0));
	put(req(2, "later", t0 + 5, 0)); /* another pid: not dropped with it */
	settle(2, 0);
	cr_assert_lt(now_epoch(), exp, "the request took 0.5 s to be read");
	for (int i = 0; i < 10000 && ft->n != 1; i++) {
		uv_run(&loop, UV_RUN_ONCE);
		if (ft->n != 1)
			cr_assert_lt(now_epoch(), exp + 10,
				     "not acted on within 10 s");
	}
	cr_assert_eq(ft->n, 1);
	cr_assert_geq(now_epoch(), exp, "acted on before its expiration");
	/* The later one is still held, not acted on early with it. */
	cr_assert_str_eq(ft->t[0].scope, "later");
	cr_assert_lt(now_epoch(), t0 + 5, "the machine stalled for 4.5 s");
	stop();
}

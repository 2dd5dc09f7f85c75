/*
 * The console's collapse (agent/collapse.c, compiled in here: it is private
 * to agent/): lines several ranks print alike shown once with their ranks,
 * at once when every printing rank has it, else when the window passes;
 * each rank's order kept; lines of one rank with their own prefix; partial
 * and carriage-return lines shown as they come; a flooding rank past its
 * share shown uncollapsed while the others still collapse; no line waits
 * longer than the window, whatever the order of arrival.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../agent/collapse.c"

#define MAXOUT 4096

/* What the collapse showed, one entry a line. */
static struct shown {
	int fd;
	char prefix[64];
	char line[128];
	uint64_t at; /* loop time when shown */
} out[MAXOUT];
static int nout;
static uv_loop_t loop;

static void on_emit(const struct collapse_shown *s, void *data)
{
	(void)data;
	cr_assert_lt(nout, MAXOUT);
	out[nout].fd = s->fd;
	snprintf(out[nout].prefix, sizeof(out[nout].prefix), "%.*s",
		 (int)s->plen, s->prefix);
	snprintf(out[nout].line, sizeof(out[nout].line), "%.*s", (int)s->len,
		 s->line);
	out[nout].at = uv_now(&loop);
	nout++;
}

static struct collapse *make(int nranks, uint64_t window_ms, size_t cap)
{
	struct collapse_opts o = {window_ms, cap, "default", on_emit, NULL, NULL};
	struct collapse *c;

	nout = 0;
	cr_assert_eq(uv_loop_init(&loop), 0);
	c = collapse_new(&loop, &o);
	cr_assert_not_null(c);
	collapse_ranks(c, nranks);
	for (int r = 0; r < nranks; r++) {
		collapse_rank_open(c, 1, r);
		collapse_rank_open(c, 2, r);
	}
	return c;
}

static void put(struct collapse *c, int fd, int r, const char *line)
{
	char prefix[32];

	snprintf(prefix, sizeof(prefix), "[default%d]:", r);
	collapse_line(c, fd, r, prefix, strlen(prefix), line, strlen(line));
}

/* Whether rank r is among the ranks of a shown prefix ("[default0-2,5]:"). */
static int names(const char *prefix, int r)
{
	const char *q = prefix + strlen("[default");

	while (*q >= '0' && *q <= '9') {
		int a = atoi(q), b = a;

		while (*q >= '0' && *q <= '9')
			q++;
		if (*q == '-') {
			b = atoi(++q);
			while (*q >= '0' && *q <= '9')
				q++;
		}
		if (r >= a && r <= b)
			return 1;
		if (*q == ',')
			q++;
	}
	return 0;
}

/* Lines waiting in the collapse now. */
static size_t waiting(const struct collapse *c)
{
	size_t n = 0;

	for (int i = 0; i < 2; i++)
		for (const struct cline *x = c->lane[i].oldest; x; x = x->next)
			n++;
	return n;
}

static void finish(struct collapse *c)
{
	collapse_free(c);
	uv_run(&loop, UV_RUN_DEFAULT);
	cr_assert_eq(uv_loop_close(&loop), 0);
}

static void expect(int i, const char *prefix, const char *line)
{
	cr_assert_lt(i, nout, "line %d (%s%s) was not shown", i, prefix, line);
	cr_assert_str_eq(out[i].prefix, prefix, "line %d", i);
	cr_assert_str_eq(out[i].line, line, "line %d", i);
}

Test(collapse, all_ranks_alike_shown_once_at_once)
{
	struct collapse *c = make(4, 10000, 1 << 20);

	for (int r = 0; r < 4; r++) {
		cr_assert_eq(nout, 0, "shown before every rank printed it");
		put(c, 1, r, "Epoch 1\n");
	}
	/* At the fourth rank's line, not at the window's end. */
	cr_assert_eq(nout, 1);
	expect(0, "[default0-3]:", "Epoch 1\n");
	finish(c);
}

Test(collapse, one_rank_alone_keeps_its_prefix_after_the_window)
{
	struct collapse *c = make(4, 50, 1 << 20);
	uint64_t t0 = uv_now(&loop);

	put(c, 1, 2, "rank two only\n");
	cr_assert_eq(nout, 0);
	uv_run(&loop, UV_RUN_DEFAULT);
	cr_assert_eq(nout, 1);
	expect(0, "[default2]:", "rank two only\n");
	cr_assert_geq(out[0].at - t0, 50, "shown %llu ms after",
		      (unsigned long long)(out[0].at - t0));
	finish(c);
}

/*
 * A traceback every rank prints, but rank 3's last line differs: the common
 * lines once, the last line once for ranks 0-2 and once for rank 3 (the one
 * that stands out).
 */
Test(collapse, the_rank_whose_traceback_differs_stands_out)
{
	struct collapse *c = make(4, 50, 1 << 20);
	const char *tb[] = {"Traceback (most recent call last):\n",
			    "  File \"train.py\", line 9, in <module>\n"};

	for (int r = 0; r < 4; r++) {
		put(c, 2, r, tb[0]);
		put(c, 2, r, tb[1]);
		put(c, 2, r, r == 3 ? "KeyError: 'x'\n" : "ValueError: nan\n");
	}
	uv_run(&loop, UV_RUN_DEFAULT);
	cr_assert_eq(nout, 4);
	expect(0, "[default0-3]:", tb[0]);
	expect(1, "[default0-3]:", tb[1]);
	/* Both differing lines are shown: which first does not matter. */
	for (int i = 2; i < 4; i++)
		if (strcmp(out[i].prefix, "[default3]:") == 0)
			expect(i, "[default3]:", "KeyError: 'x'\n");
		else
			expect(i, "[default0-2]:", "ValueError: nan\n");
	for (int i = 0; i < 4; i++)
		cr_assert_eq(out[i].fd, 2);
	finish(c);
}

/*
 * torch's own "[rank<N>]: " before each line of a rank's traceback tells
 * twins apart only by the rank: they collapse (the console's prefix names
 * the ranks), and a line shown for one rank keeps it.
 */
Test(collapse, torch_rank_tags_do_not_keep_twins_apart)
{
	struct collapse *c = make(2, 10000, 1 << 20);

	put(c, 2, 0, "[rank0]: Traceback (most recent call last):\n");
	put(c, 2, 1, "[rank1]: Traceback (most recent call last):\n");
	cr_assert_eq(nout, 1);
	expect(0, "[default0-1]:", "Traceback (most recent call last):\n");
	put(c, 2, 1, "[rank12]: KeyError: 'x'\n");
	put(c, 2, 0, "[rank] not a tag\n");
	collapse_flush(c);
	cr_assert_eq(nout, 3);
	/* two ranks' own lines: in either order */
	for (int i = 1; i < 3; i++)
		if (strcmp(out[i].prefix, "[default0]:") == 0)
			expect(i, "[default0]:", "[rank] not a tag\n");
		else
			expect(i, "[default1]:[rank12]: ", "KeyError: 'x'\n");
	finish(c);
}

/*
 * Each rank prints a line of its own between lines alike: its own line goes
 * out once every rank has printed, without it, the line that follows it
 * (no twin can come any more), not at the window's end.
 */
Test(collapse, own_lines_go_out_once_every_rank_is_past_them)
{
	struct collapse *c = make(3, 10000, 1 << 20);

	for (int r = 0; r < 3; r++) {
		char own[32];

		snprintf(own, sizeof(own), "loss of rank %d\n", r);
		put(c, 1, r, own);
		put(c, 1, r, "step 1 done\n");
	}
	cr_assert_eq(nout, 4, "%d lines shown before the window", nout);
	for (int r = 0; r < 3; r++) {
		char p[32], own[32];

		snprintf(p, sizeof(p), "[default%d]:", r);
		snprintf(own, sizeof(own), "loss of rank %d\n", r);
		expect(r, p, own);
	}
	expect(3, "[default0-2]:", "step 1 done\n");
	finish(c);
}

/*
 * Ranks 1 and 3 hold the twins of ranks 0 and 2's "a" behind lines of
 * their own: the others are past "a" only when they no longer hold it, so
 * "a" waits and then goes out once for all four.
 */
Test(collapse, a_twin_behind_another_line_still_collapses)
{
	struct collapse *c = make(4, 10000, 1 << 20);
	const char *lines[4][4] = {{"a\n", "b\n"},
				   {"x\n", "a\n", "b\n"},
				   {"a\n", "b\n"},
				   {"y\n", "x\n", "a\n", "b\n"}};

	for (int r = 3; r >= 0; r--)
		for (int i = 0; i < 4 && lines[r][i]; i++)
			put(c, 1, r, lines[r][i]);
	cr_assert_eq(nout, 0, "\"%s\" shown before its twins came",
		     nout ? out[0].line : "");
	collapse_flush(c);
	cr_assert_eq(nout, 4);
	expect(0, "[default3]:", "y\n");
	expect(1, "[default1,3]:", "x\n");
	expect(2, "[default0-3]:", "a\n");
	expect(3, "[default0-3]:", "b\n");
	finish(c);
}

/* Each rank's lines come out in its order, whatever its twins do. */
Test(collapse, each_ranks_order_is_kept)
{
	struct collapse *c = make(2, 30, 1 << 20);

	put(c, 1, 0, "a\n");
	put(c, 1, 0, "b\n");
	put(c, 1, 1, "b\n"); /* rank 1 prints b before a */
	put(c, 1, 1, "a\n");
	uv_run(&loop, UV_RUN_DEFAULT);
	for (int r = 0; r < 2; r++) {
		int seen = 0;

		for (int i = 0; i < nout; i++)
			if (names(out[i].prefix, r)) {
				cr_assert_lt(seen, 2);
				cr_assert_eq(out[i].line[0],
					     (r == 0 ? "ab" : "ba")[seen]);
				seen++;
			}
		cr_assert_eq(seen, 2, "rank %d: %d lines", r, seen);
	}
	finish(c);
}

/* A progress bar redrawn with \r, and a terminal's partial line. */
Test(collapse, carriage_returns_and_partial_lines_go_as_they_come)
{
	struct collapse *c = make(2, 10000, 1 << 20);

	put(c, 2, 0, "start\n");
	put(c, 2, 0, "10%|#   |\r20%|##  |\n");
	/* rank 0's waiting line first, then the bar, at once */
	cr_assert_eq(nout, 2);
	expect(0, "[default0]:", "start\n");
	expect(1, "[default0]:", "10%|#   |\r20%|##  |\n");
	put(c, 2, 1, "30%|###");
	cr_assert_eq(nout, 3);
	expect(2, "[default1]:", "30%|###");
	finish(c);
}

/* A rank done printing no longer holds its twins back. */
Test(collapse, a_rank_that_closed_is_not_waited_for)
{
	struct collapse *c = make(3, 10000, 1 << 20);

	put(c, 1, 0, "x\n");
	put(c, 1, 1, "x\n");
	cr_assert_eq(nout, 0);
	collapse_rank_done(c, 1, 2);
	cr_assert_eq(nout, 1);
	expect(0, "[default0-1]:", "x\n");
	finish(c);
}

/* o.done: a rank's end told once its last waiting line is out, as a line. */
static void on_done(int fd, int r, void *data)
{
	(void)data;
	cr_assert_lt(nout, MAXOUT);
	out[nout].fd = fd;
	snprintf(out[nout].prefix, sizeof(out[nout].prefix), "done");
	snprintf(out[nout].line, sizeof(out[nout].line), "%d", r);
	nout++;
}

/*
 * A closed rank's end is told after its waiting lines are shown (the job's
 * console must not stop waiting for it before), at once when none wait,
 * and for a flooding rank too.
 */
Test(collapse, a_ranks_end_is_told_after_its_lines)
{
	struct collapse *c = make(3, 10000, 3000);
	char line[64];

	c->o.done = on_done;
	put(c, 1, 0, "x\n");
	collapse_rank_done(c, 1, 0);
	cr_assert_eq(nout, 0, "told while its line waits");
	put(c, 1, 1, "x\n");
	put(c, 1, 2, "x\n");
	expect(0, "[default0-2]:", "x\n");
	expect(1, "done", "0");
	collapse_rank_done(c, 2, 1); /* nothing waits on fd 2 */
	expect(2, "done", "1");
	cr_assert_eq(out[2].fd, 2);
	for (int i = 0; i < 300; i++) { /* rank 2 floods, then closes */
		snprintf(line, sizeof(line), "flood %d\n", i);
		put(c, 1, 2, line);
	}
	collapse_rank_done(c, 1, 2);
	collapse_flush(c);
	expect(nout - 1, "done", "2");
	collapse_rank_done(c, 1, 2); /* twice: told once */
	expect(nout - 1, "done", "2");
	cr_assert_str_neq(out[nout - 2].prefix, "done");
	finish(c);
}

/*
 * Rank 0 floods: past its share of the cap its lines are shown as they
 * come, in order, while ranks 1 and 2 still collapse; what waits never
 * passes the cap.
 */
Test(collapse, a_flooding_rank_is_shown_uncollapsed)
{
	size_t cap = 3000, peak = 0;
	struct collapse *c = make(3, 10000, cap);
	char line[64];

	for (int i = 0; i < 500; i++) {
		snprintf(line, sizeof(line), "flood %d\n", i);
		put(c, 1, 0, line);
		cr_assert_leq(c->lane[0].bytes, cap);
		if (waiting(c) > peak)
			peak = waiting(c);
	}
	for (int i = 0; i < nout; i++) {
		snprintf(line, sizeof(line), "flood %d\n", i);
		expect(i, "[default0]:", line);
	}
	cr_assert_gt(nout, 400, "the flood waits: %d of 500 shown", nout);
	put(c, 1, 1, "together\n");
	put(c, 1, 2, "together\n");
	/* rank 0 no longer counts for the twins: it floods */
	collapse_flush(c);
	expect(nout - 1, "[default1-2]:", "together\n");
	cr_assert_leq(peak * 8, cap, "held %zu lines", peak);
	finish(c);
}

/*
 * The loop ran its due timers at a loop time of at least since: no line
 * whose window had passed by then still waits.
 */
static void assert_nothing_overdue(struct collapse *c, uint64_t window,
				   uint64_t since)
{
	for (int i = 0; i < 2; i++)
		for (struct cline *x = c->lane[i].oldest; x; x = x->next)
			cr_assert_gt(x->t + window, since,
				     "a line of rank %d waits %llu ms", x->rank,
				     (unsigned long long)(since - x->t));
}

/*
 * Random lines of 4 ranks on a loop with a 20 ms window: every line is shown
 * exactly once, each rank's in order, and whenever the loop has run its due
 * timers no line waits past its window (as of the time they ran).
 */
Test(collapse, no_line_waits_longer_than_the_window)
{
	struct collapse *c = make(4, 20, 1 << 20);
	int sent[4] = {0}, got[4] = {0};
	unsigned seed = 7;

	for (int step = 0; step < 400; step++) {
		int r = (int)((seed = seed * 1103515245 + 12345) >> 16) % 4;
		char line[32];

		if (sent[r] == 64)
			continue;
		/* a third of the lines differ by rank, the rest do not */
		snprintf(line, sizeof(line), "%d:%d\n", sent[r]++,
			 (seed >> 8) % 3 == 0 ? r : -1);
		put(c, 1, r, line);
		if (step % 7 == 0) {
			uint64_t since;

			uv_sleep(3);
			uv_update_time(&loop);
			since = uv_now(&loop);
			uv_run(&loop, UV_RUN_NOWAIT);
			assert_nothing_overdue(c, 20, since);
		}
	}
	uv_run(&loop, UV_RUN_DEFAULT);
	for (int i = 0; i < nout; i++) {
		int seq = atoi(out[i].line), any = 0;

		for (int r = 0; r < 4; r++) {
			if (!names(out[i].prefix, r))
				continue;
			any = 1;
			cr_assert_eq(seq, got[r], "rank %d out of order", r);
			got[r]++;
		}
		cr_assert(any, "no rank in %s", out[i].prefix);
	}
	for (int r = 0; r < 4; r++)
		cr_assert_eq(got[r], sent[r], "rank %d: %d of %d shown", r,
			     got[r], sent[r]);
	finish(c);
}

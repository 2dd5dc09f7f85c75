/*
 * The stderr ring kept for failure reports: wrap-around, the last N lines,
 * a line cut by the ring's start dropped, a write larger than the ring, and
 * nothing written giving NULL.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crun/tail.h"

static struct crun_tail t;
static char *got;

static void teardown(void)
{
	tail_release(&t);
	free(got);
	got = NULL;
}

TestSuite(tail, .fini = teardown);

static void put(const char *s)
{
	tail_write(&t, s, strlen(s));
}

static void expect_lines(int max, const char *want)
{
	free(got);
	got = tail_lines(&t, max);
	cr_assert_not_null(got, "tail_lines(%d) gave NULL, want '%s'", max, want);
	cr_expect_str_eq(got, want, "tail_lines(%d)", max);
}

Test(tail, empty_is_null)
{
	cr_assert_eq(tail_init(&t, 64), 0);
	cr_expect_null(tail_lines(&t, 10));
	tail_write(&t, "x", 0);
	cr_expect_null(tail_lines(&t, 10));
}

Test(tail, last_lines)
{
	cr_assert_eq(tail_init(&t, 64), 0);
	put("1\n2\n3\n4\n");
	expect_lines(2, "3\n4\n");
	expect_lines(1, "4\n");
	expect_lines(4, "1\n2\n3\n4\n");
	expect_lines(10, "1\n2\n3\n4\n");
}

Test(tail, unterminated_last_line_counts)
{
	cr_assert_eq(tail_init(&t, 64), 0);
	put("1\n2\n3");
	expect_lines(2, "2\n3");
	expect_lines(1, "3");
}

Test(tail, pieces_make_lines)
{
	cr_assert_eq(tail_init(&t, 64), 0);
	put("Trace");
	put("back:\n  File \"x\"");
	put(", line 1\nValueError: boom\n");
	expect_lines(2, "  File \"x\", line 1\nValueError: boom\n");
}

Test(tail, wrap_around_drops_cut_line)
{
	cr_assert_eq(tail_init(&t, 16), 0);
	put("aaaa\nbbbb\ncccc\n");	/* 15 bytes: nothing lost yet */
	expect_lines(10, "aaaa\nbbbb\ncccc\n");
	put("dddd\n");			/* 20 bytes: "aaa" gone, "a\n" is a cut line */
	expect_lines(10, "bbbb\ncccc\ndddd\n");
	expect_lines(2, "cccc\ndddd\n");
}

Test(tail, exactly_full_keeps_everything)
{
	cr_assert_eq(tail_init(&t, 10), 0);
	put("abcd\nefgh\n");
	expect_lines(10, "abcd\nefgh\n");
}

Test(tail, many_wraps)
{
	char line[32], want[128];

	cr_assert_eq(tail_init(&t, 50), 0);
	for (int i = 0; i < 1000; i++) {
		snprintf(line, sizeof(line), "line %d\n", i);
		put(line);
	}
	expect_lines(3, "line 997\nline 998\nline 999\n");
	/* The ring holds 50 bytes: "line 99x\n" is 9, so 5 whole lines fit
	 * after a cut one. */
	snprintf(want, sizeof(want), "line 995\nline 996\nline 997\nline 998\nline 999\n");
	expect_lines(100, want);
}

Test(tail, huge_single_write)
{
	size_t n = 1 << 20, at = 0;
	char *big = malloc(n + 32);
	int i = 0;

	while (at < n)
		at += (size_t)snprintf(big + at, 32, "line %06d\n", i++);
	cr_assert_eq(tail_init(&t, 4096), 0);
	put("before\n");
	tail_write(&t, big, at);
	{
		char want[64];

		snprintf(want, sizeof(want), "line %06d\nline %06d\n", i - 2, i - 1);
		expect_lines(2, want);
	}
	/* Everything kept is whole lines from the end of the write. */
	free(got);
	got = tail_lines(&t, 100000);
	cr_assert_not_null(got);
	cr_expect_eq(got[strlen(got) - 1], '\n');
	cr_expect_eq(strncmp(got, "line ", 5), 0, "starts at a whole line: '%.12s'", got);
	cr_expect_leq(strlen(got), 4096);
	cr_expect_gt(strlen(got), 4096 - 12);
	/* And writing on after a huge write continues in order. */
	put("after\n");
	{
		char want[64];

		snprintf(want, sizeof(want), "line %06d\nafter\n", i - 1);
		expect_lines(2, want);
	}
	free(big);
}

Test(tail, single_line_longer_than_ring)
{
	char big[100];

	memset(big, 'x', sizeof(big));
	cr_assert_eq(tail_init(&t, 16), 0);
	tail_write(&t, big, sizeof(big));
	put("\nlast\n");
	expect_lines(5, "last\n");
}

/*
 * Log-line framing: whatever pieces the bytes arrive in, a linebuf emits
 * whole lines, each with its prefix, long lines cut at the limit with a
 * newline added, binary bytes unchanged, and a trailing partial line on
 * flush.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crun/linebuf.h"

/* Every emitted line, concatenated, plus where each one starts. */
struct sink {
	char *text;
	size_t len, cap;
	size_t start[4096];
	size_t nlines;
};

static struct sink sink;
static struct crun_linebuf lb;

static void on_line(void *ctx, const char *line, size_t len)
{
	struct sink *s = ctx;

	cr_assert_gt(len, 0);
	cr_assert_eq(line[len - 1], '\n', "an emitted line ends in a newline");
	cr_assert_null(memchr(line, '\n', len - 1), "one line per emit");
	cr_assert_lt(s->nlines, sizeof(s->start) / sizeof(s->start[0]));
	if (s->len + len > s->cap) {
		s->cap = (s->len + len) * 2;
		s->text = realloc(s->text, s->cap);
		cr_assert_not_null(s->text);
	}
	s->start[s->nlines++] = s->len;
	memcpy(s->text + s->len, line, len);
	s->len += len;
}

static void teardown(void)
{
	linebuf_release(&lb);
	free(sink.text);
	memset(&sink, 0, sizeof(sink));
}

TestSuite(linebuf, .fini = teardown);

/* Line i as emitted (with prefix and newline); len in *n. */
static const char *line_at(size_t i, size_t *n)
{
	size_t end = i + 1 < sink.nlines ? sink.start[i + 1] : sink.len;

	cr_assert_lt(i, sink.nlines);
	*n = end - sink.start[i];
	return sink.text + sink.start[i];
}

static void expect_line(size_t i, const char *want)
{
	size_t n;
	const char *got = line_at(i, &n);

	cr_expect_eq(n, strlen(want), "line %zu: '%.*s', want '%s'", i, (int)n, got, want);
	cr_expect_eq(memcmp(got, want, n < strlen(want) ? n : strlen(want)), 0,
		     "line %zu: '%.*s', want '%s'", i, (int)n, got, want);
}

static void feed(const char *s)
{
	linebuf_feed(&lb, s, strlen(s), on_line, &sink);
}

Test(linebuf, whole_lines)
{
	cr_assert_eq(linebuf_init(&lb, "[default0]:", 1024), 0);
	feed("hello\n");
	cr_assert_eq(sink.nlines, 1);
	expect_line(0, "[default0]:hello\n");
}

Test(linebuf, partial_lines_one_byte_at_a_time)
{
	const char *text = "first line\nsecond\n\nthird";

	cr_assert_eq(linebuf_init(&lb, "[r1]:", 1024), 0);
	for (const char *p = text; *p; p++)
		linebuf_feed(&lb, p, 1, on_line, &sink);
	cr_assert_eq(sink.nlines, 3);
	expect_line(0, "[r1]:first line\n");
	expect_line(1, "[r1]:second\n");
	expect_line(2, "[r1]:\n");
	linebuf_flush(&lb, on_line, &sink);
	cr_assert_eq(sink.nlines, 4);
	expect_line(3, "[r1]:third\n");
}

Test(linebuf, partial_lines_across_feeds)
{
	cr_assert_eq(linebuf_init(&lb, "P:", 1024), 0);
	feed("ab");
	cr_expect_eq(sink.nlines, 0, "nothing until the newline");
	feed("c\nde");
	cr_assert_eq(sink.nlines, 1);
	feed("f\ngh\ni");
	cr_assert_eq(sink.nlines, 3);
	expect_line(0, "P:abc\n");
	expect_line(1, "P:def\n");
	expect_line(2, "P:gh\n");
	linebuf_flush(&lb, on_line, &sink);
	expect_line(3, "P:i\n");
}

Test(linebuf, many_lines_in_one_feed)
{
	char *big = malloc(1000 * 16), want[32];
	size_t at = 0;

	cr_assert_eq(linebuf_init(&lb, "[x]:", 64), 0);
	for (int i = 0; i < 1000; i++)
		at += (size_t)snprintf(big + at, 16, "line %d\n", i);
	linebuf_feed(&lb, big, at, on_line, &sink);
	cr_assert_eq(sink.nlines, 1000);
	for (int i = 0; i < 1000; i++) {
		snprintf(want, sizeof(want), "[x]:line %d\n", i);
		expect_line((size_t)i, want);
	}
	free(big);
}

Test(linebuf, long_line_cut_with_prefix_on_each_piece)
{
	cr_assert_eq(linebuf_init(&lb, "[p]:", 8), 0);
	feed("abcdefghijklmnopqrst\nshort\n");
	cr_assert_eq(sink.nlines, 4);
	expect_line(0, "[p]:abcdefgh\n");
	expect_line(1, "[p]:ijklmnop\n");
	expect_line(2, "[p]:qrst\n");
	expect_line(3, "[p]:short\n");
}

Test(linebuf, long_line_cut_across_feeds)
{
	cr_assert_eq(linebuf_init(&lb, "[p]:", 4), 0);
	for (const char *p = "0123456789\n"; *p; p++)
		linebuf_feed(&lb, p, 1, on_line, &sink);
	cr_assert_eq(sink.nlines, 3);
	expect_line(0, "[p]:0123\n");
	expect_line(1, "[p]:4567\n");
	expect_line(2, "[p]:89\n");
}

/* A line of exactly the limit is one line, not a line and an empty one. */
Test(linebuf, line_of_exactly_the_limit)
{
	cr_assert_eq(linebuf_init(&lb, "[p]:", 8), 0);
	feed("abcdefgh\nnext\n");
	cr_assert_eq(sink.nlines, 2, "got %zu lines", sink.nlines);
	expect_line(0, "[p]:abcdefgh\n");
	expect_line(1, "[p]:next\n");

	/* The same with the newline in the next read. */
	feed("12345678");
	feed("\nz\n");
	cr_assert_eq(sink.nlines, 4, "got %zu lines", sink.nlines);
	expect_line(2, "[p]:12345678\n");
	expect_line(3, "[p]:z\n");

	/* And with 16 bytes: two full pieces, no empty third. */
	feed("ABCDEFGHIJKLMNOP\n");
	cr_assert_eq(sink.nlines, 6, "got %zu lines", sink.nlines);
	expect_line(4, "[p]:ABCDEFGH\n");
	expect_line(5, "[p]:IJKLMNOP\n");

	/* A full piece pending at end of stream is flushed once. */
	feed("abcdefgh");
	linebuf_flush(&lb, on_line, &sink);
	cr_assert_eq(sink.nlines, 7, "got %zu lines", sink.nlines);
	expect_line(6, "[p]:abcdefgh\n");
}

Test(linebuf, binary_bytes_pass_unchanged)
{
	static const char data[] = "a\0b\xff\x01\r\x7f\n\0\n";
	size_t n;
	const char *got;

	cr_assert_eq(linebuf_init(&lb, "[b]:", 64), 0);
	linebuf_feed(&lb, data, sizeof(data) - 1, on_line, &sink);
	cr_assert_eq(sink.nlines, 2);
	got = line_at(0, &n);
	cr_assert_eq(n, 4 + 8);
	cr_expect_eq(memcmp(got, "[b]:a\0b\xff\x01\r\x7f\n", n), 0);
	got = line_at(1, &n);
	cr_assert_eq(n, 4 + 2);
	cr_expect_eq(memcmp(got, "[b]:\0\n", n), 0);
}

Test(linebuf, flush)
{
	cr_assert_eq(linebuf_init(&lb, "[f]:", 64), 0);
	linebuf_flush(&lb, on_line, &sink);
	cr_expect_eq(sink.nlines, 0, "nothing pending: nothing emitted");
	feed("done\n");
	linebuf_flush(&lb, on_line, &sink);
	cr_expect_eq(sink.nlines, 1, "a finished line is not emitted again");
	feed("tail without newline");
	linebuf_flush(&lb, on_line, &sink);
	cr_assert_eq(sink.nlines, 2);
	expect_line(1, "[f]:tail without newline\n");
	linebuf_flush(&lb, on_line, &sink);
	cr_expect_eq(sink.nlines, 2, "flush twice emits once");
	/* The buffer is usable after a flush. */
	feed("again\n");
	cr_assert_eq(sink.nlines, 3);
	expect_line(2, "[f]:again\n");
}

Test(linebuf, empty_prefix)
{
	cr_assert_eq(linebuf_init(&lb, "", 4), 0);
	feed("one\ntwo\nlonger\n\n");
	cr_assert_eq(sink.nlines, 5);
	expect_line(0, "one\n");
	expect_line(1, "two\n");
	expect_line(2, "long\n");
	expect_line(3, "er\n");
	expect_line(4, "\n");
}

Test(linebuf, prefix_is_copied)
{
	char prefix[] = "[mine]:";

	cr_assert_eq(linebuf_init(&lb, prefix, 64), 0);
	prefix[1] = 'X';
	feed("x\n");
	expect_line(0, "[mine]:x\n");
}

/* Random split points never change the output. */
Test(linebuf, random_splits)
{
	char text[4096], *want = NULL;
	size_t wlen = 0;

	srand(42);
	for (size_t i = 0; i < sizeof(text); i++)
		text[i] = (rand() % 10 == 0) ? '\n' : (char)('a' + rand() % 26);
	cr_assert_eq(linebuf_init(&lb, "[r]:", 16), 0);
	linebuf_feed(&lb, text, sizeof(text), on_line, &sink);
	linebuf_flush(&lb, on_line, &sink);
	want = malloc(sink.len);
	memcpy(want, sink.text, sink.len);
	wlen = sink.len;
	for (int round = 0; round < 20; round++) {
		size_t at = 0;

		sink.len = 0;
		sink.nlines = 0;
		while (at < sizeof(text)) {
			size_t k = 1 + (size_t)rand() % 40;

			if (k > sizeof(text) - at)
				k = sizeof(text) - at;
			linebuf_feed(&lb, text + at, k, on_line, &sink);
			at += k;
		}
		linebuf_flush(&lb, on_line, &sink);
		cr_assert_eq(sink.len, wlen, "round %d", round);
		cr_assert_eq(memcmp(sink.text, want, wlen), 0, "round %d", round);
	}
	free(want);
}

/* Terminal mode: pieces as they come (no newline needed), in order. */
static char term[1024];
static size_t tlen;

static void on_piece(void *ctx, const char *p, size_t len)
{
	(void)ctx;
	cr_assert_lt(tlen + len, sizeof(term));
	memcpy(term + tlen, p, len);
	tlen += len;
	term[tlen] = '\0';
}

Test(linebuf, terminal_mode_passes_partial_lines_at_once)
{
	tlen = 0;
	cr_assert_eq(linebuf_init(&lb, "[w0]:", 64), 0);
	linebuf_set_partial(&lb, 1);
	linebuf_feed(&lb, "\r 10%", 5, on_piece, NULL);
	cr_expect_str_eq(term, "[w0]:\r[w0]: 10%", "shown before any newline");
	linebuf_feed(&lb, "\r 50%", 5, on_piece, NULL);
	cr_expect_str_eq(term, "[w0]:\r[w0]: 10%\r[w0]: 50%",
			 "a redraw gets its prefix back, the line no second one");
	linebuf_feed(&lb, "\r100%\nnext line\n", 16, on_piece, NULL);
	cr_expect_str_eq(term,
			 "[w0]:\r[w0]: 10%\r[w0]: 50%\r[w0]:100%\n[w0]:next "
			 "line\n");
	size_t mark = tlen;

	linebuf_feed(&lb, "tail\r", 5, on_piece, NULL);
	linebuf_feed(&lb, "over", 4, on_piece, NULL);
	cr_expect_str_eq(term + mark, "[w0]:tail\r[w0]:over",
			 "a carriage return that ends a read still re-prefixes");
	linebuf_flush(&lb, on_piece, NULL);
	cr_expect_eq(term[tlen - 1], '\n', "flush ends the open line");
	cr_expect_str_eq(term + mark, "[w0]:tail\r[w0]:over\n");
}

Test(linebuf, terminal_mode_without_prefix_keeps_bytes)
{
	tlen = 0;
	cr_assert_eq(linebuf_init(&lb, "", 64), 0);
	linebuf_set_partial(&lb, 1);
	linebuf_feed(&lb, "a\rb", 3, on_piece, NULL);
	linebuf_feed(&lb, "c\r\nd\n", 5, on_piece, NULL);
	cr_expect_str_eq(term, "a\rbc\r\nd\n");
}

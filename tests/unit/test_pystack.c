/*
 * pystack_where on real py-spy 0.4.3 and faulthandler (CPython 3.11) dumps
 * (tests/data/pystack/, with the scripts that made them), on multi-thread
 * dumps in both formats, on cut and hostile dumps; pystack_summary's
 * grouping, ranges, hosts, order and bounds.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crun/err.h"
#include "crun/pystack.h"

#define DATA "tests/data/pystack/"

/* Read a data file whole; *len its size. */
static char *slurp(const char *name, size_t *len)
{
	FILE *f = fopen(name, "rb");
	char *buf;
	long n;

	cr_assert_not_null(f, "opening %s", name);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc((size_t)n + 1);
	cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	buf[n] = '\0';
	*len = (size_t)n;
	return buf;
}

static void expect_file(const char *name, const char *script,
			const char *want)
{
	char out[256];
	size_t len;
	char *dump = slurp(name, &len);
	int rc = pystack_where(dump, len, script, out, sizeof(out));

	cr_expect_eq(rc, 0, "%s: %s", name, crun_err_name(rc));
	cr_expect_str_eq(out, want, "%s (%s): got '%s', want '%s'", name,
			 script ? script : "NULL", out, want);
	free(dump);
}

static void expect_text(const char *dump, const char *script, int want_rc,
			const char *want)
{
	char out[256];
	int rc = pystack_where(dump, strlen(dump), script, out, sizeof(out));

	cr_expect_eq(rc, want_rc, "got %s, want %s", crun_err_name(rc),
		     crun_err_name(want_rc));
	cr_expect_str_eq(out, want, "got '%s', want '%s'", out, want);
}

Test(pystack, pyspy_main_thread_first)
{
	/* The loader thread's frames are in train.py too: MainThread wins. */
	/* all_reduce is train.py's own, asleep in C: it calls no frame. */
	expect_file(DATA "pyspy_threads.txt", "train.py",
		    "all_reduce (train.py:7)");
	expect_file(DATA "pyspy_threads.txt", "/tmp/ps/train.py",
		    "all_reduce (train.py:7)");
	expect_file(DATA "pyspy_threads.txt", NULL, "all_reduce (train.py:7)");
	/* A file only another thread has: that thread is searched next. */
	expect_file(DATA "pyspy_threads.txt", "threading.py",
		    "wait_loader (threading.py:982)");
}

Test(pystack, pyspy_wrapper_stepped_over)
{
	/* train() called fakedist.all_reduce through a decorator's wrapper. */
	expect_file(DATA "pyspy_wrapper.txt", "train2.py",
		    "all_reduce (train2.py:6)");
	expect_file(DATA "pyspy_full.txt", "train2.py",
		    "all_reduce (train2.py:6)");
	expect_file(DATA "pyspy_full.txt", "/tmp/ps/train2.py",
		    "all_reduce (train2.py:6)");
	expect_file(DATA "pyspy_locals.txt", "train2.py",
		    "all_reduce (train2.py:6)");
	/* The library's own innermost frame calls nothing. */
	expect_file(DATA "pyspy_wrapper.txt", "fakedist.py",
		    "all_reduce (fakedist.py:9)");
}

Test(pystack, pyspy_script_calls_nothing)
{
	expect_file(DATA "pyspy_active.txt", "spin.py", "spin (spin.py:2)");
	expect_file(DATA "pyspy_active.txt", "other.py", "?");
}

Test(pystack, faulthandler)
{
	expect_file(DATA "fh_threads.txt", "train.py",
		    "all_reduce (train.py:7)");
	expect_file(DATA "fh_abort.txt", "train2.py",
		    "all_reduce (train2.py:6)");
	expect_file(DATA "fh_abort.txt", "/tmp/ps/train2.py",
		    "all_reduce (train2.py:6)");
	/* No "Current thread": the main thread by its <module> frame. */
	expect_file(DATA "fh_later.txt", "train3.py", "barrier (train3.py:9)");
}

Test(pystack, faulthandler_current_thread_not_main)
{
	/* The signal went to the loader thread, which also runs train3.py:
	 * the main thread (outermost <module>) is still the one chosen. */
	expect_file(DATA "fh_current_not_main.txt", "train3.py",
		    "barrier (train3.py:9)");
	/* Without <module> anywhere, the "Current thread". */
	expect_text("Thread 0x1 (most recent call first):\n"
		    "  File \"a.py\", line 1 in f\n"
		    "Current thread 0x2 (most recent call first):\n"
		    "  File \"a.py\", line 2 in g\n",
		    "a.py", 0, "g (a.py:2)");
	/* Neither: the last thread listed (the oldest). */
	expect_text("Thread 0x1 (most recent call first):\n"
		    "  File \"a.py\", line 1 in f\n"
		    "Thread 0x2 (most recent call first):\n"
		    "  File \"a.py\", line 2 in g\n",
		    "a.py", 0, "g (a.py:2)");
	/* A single-thread dump (all_threads=False). */
	expect_text("Stack (most recent call first):\n"
		    "  File \"/x/lib.py\", line 3 in wait\n"
		    "  File \"/x/train.py\", line 37 in step\n",
		    "train.py", 0, "wait (train.py:37)");
}

Test(pystack, not_a_dump)
{
	expect_text("", "train.py", CRUN_EPROTO, "?");
	expect_text("garbage\n\n\x01\x02", "train.py", CRUN_EPROTO, "?");
	/* py-spy's "Caused by" lines look like frames, but no thread. */
	expect_text("    0: Permission denied (os error 13)\n", "x", CRUN_EPROTO,
		    "?");
	cr_expect_eq(pystack_where(NULL, 0, "x", (char[8]){0}, 8), CRUN_EPROTO);
}

Test(pystack, pyspy_error_is_eproto)
{
	char out[32];
	size_t len;
	char *dump = slurp(DATA "pyspy_error.txt", &len);

	cr_expect_eq(pystack_where(dump, len, "train.py", out, sizeof(out)),
		     CRUN_EPROTO);
	free(dump);
}

Test(pystack, truncated)
{
	size_t len;
	char *dump = slurp(DATA "pyspy_threads.txt", &len);
	char out[64];

	/* Every prefix parses without harm; once the script's frame is in,
	 * its label is there (the called frame is the line before). */
	for (size_t n = 0; n <= len; n++) {
		int rc = pystack_where(dump, n, "train.py", out, sizeof(out));

		cr_assert(rc == 0 || rc == CRUN_EPROTO, "prefix %zu: %d", n,
			  rc);
		cr_assert(strlen(out) < sizeof(out));
	}
	/* Cut in the middle of a frame line: the cut line is no frame (a
	 * wrong line number would mislead), the whole ones before it count. */
	{
		const char *at = strstr(dump, "    step (train.py:9)");
		size_t n = (size_t)(at - dump) + strlen("    step (train.py:");

		cr_expect_eq(pystack_where(dump, n, "train.py", out,
					   sizeof(out)),
			     0);
		cr_expect_str_eq(out, "all_reduce (train.py:7)");
	}
	free(dump);
}

Test(pystack, small_out_is_cut)
{
	size_t len;
	char *dump = slurp(DATA "pyspy_threads.txt", &len);
	char out[12];

	cr_expect_eq(pystack_where(dump, len, "train.py", out, sizeof(out)),
		     0);
	cr_expect_str_eq(out, "all_redu...");
	cr_expect_eq(pystack_where(dump, len, "train.py", out, 1), 0);
	cr_expect_str_eq(out, "");
	cr_expect_eq(pystack_where(dump, len, "train.py", out, 3), 0);
	cr_expect_str_eq(out, "..");
	free(dump);
}

Test(pystack, hostile_names)
{
	char big[2 * PYSTACK_MAX_NAME + 64], out[1024];
	char dump[4 * PYSTACK_MAX_NAME + 256];

	/* Control bytes never reach a terminal. */
	expect_text("Thread 1 (idle): \"MainThread\"\n"
		    "    \x1b[2Jf\x7f (t.py:1)\n",
		    "t.py", 0, "?[2Jf? (t.py:1)");
	/* CRLF line ends. */
	expect_text("Thread 1 (idle): \"MainThread\"\r\n"
		    "    f (t.py:1)\r\n",
		    "t.py", 0, "f (t.py:1)");
	/* A name longer than the cap is cut to it. */
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	snprintf(dump, sizeof(dump),
		 "Thread 1 (idle): \"MainThread\"\n    %s (t.py:1)\n", big);
	cr_expect_eq(pystack_where(dump, strlen(dump), "t.py", out,
				   sizeof(out)),
		     0);
	cr_expect_eq(strlen(out), PYSTACK_MAX_NAME + strlen(" (t.py:1)"));
	/* Huge line numbers are no line numbers. */
	expect_text("Thread 1 (idle): \"MainThread\"\n"
		    "    f (t.py:99999999999999999999)\n",
		    "t.py", 0, "?");
	/* A NUL inside the dump is just a byte. */
	{
		const char d[] = "Thread 1 (idle): \"MainThread\"\n"
				 "    f\0g (t.py:4)\n";

		cr_expect_eq(pystack_where(d, sizeof(d) - 1, "t.py", out,
					   sizeof(out)),
			     0);
		cr_expect_str_eq(out, "f?g (t.py:4)");
	}
}

Test(pystack, many_threads_and_frames_bounded)
{
	size_t cap = 64 * 1024 * 20, len = 0;
	char *dump = malloc(cap), out[128];

	/* Past PYSTACK_MAX_THREADS threads and PYSTACK_MAX_FRAMES frames
	 * the rest is ignored: the script's frame beyond them is not found. */
	for (int t = 0; t < PYSTACK_MAX_THREADS + 10; t++) {
		len += (size_t)snprintf(dump + len, cap - len,
					"Thread %d (idle): \"T%d\"\n", t + 1,
					t);
		for (int f = 0; f < 40; f++)
			len += (size_t)snprintf(dump + len, cap - len,
						"    f%d (lib.py:%d)\n", f, f);
	}
	len += (size_t)snprintf(dump + len, cap - len,
				"    late (train.py:1)\n");
	cr_assert_lt(len, cap);
	cr_expect_eq(pystack_where(dump, len, "train.py", out, sizeof(out)),
		     0);
	cr_expect_str_eq(out, "?");
	cr_expect_eq(pystack_where(dump, len, "lib.py", out, sizeof(out)), 0);
	cr_expect_str_eq(out, "f0 (lib.py:0)");
	free(dump);
}

/* ---- pystack_summary ---- */

static void expect_summary(const struct pystack_rank *r, size_t n,
			   size_t outlen, const char *want)
{
	char *out = malloc(outlen);

	cr_assert_eq(pystack_summary(r, n, out, outlen), 0);
	cr_expect_str_eq(out, want, "got '%s', want '%s'", out, want);
	cr_expect_lt(strlen(out), outlen);
	free(out);
}

Test(pystack, summary_issue_example)
{
	const char *ar = "all_reduce (train.py:41)", *w = "wait (train.py:37)";
	struct pystack_rank r[] = {
	    {7, ar, "n2"}, {0, ar, "n1"}, {1, ar, "n1"}, {2, ar, "n1"},
	    {3, w, "n2"},  {4, ar, "n2"}, {5, ar, "n2"}, {6, ar, "n2"},
	};

	expect_summary(r, 8, 256,
		       "ranks 0-2,4-7 in all_reduce (train.py:41); rank 3 in "
		       "wait (train.py:37) on n2");
}

Test(pystack, summary_order_hosts_nulls)
{
	struct pystack_rank r[] = {
	    {5, "b", NULL}, {1, "a", "h"}, {2, "a", "h"},
	    {0, "c", "x"},  {4, NULL, ""}, {4, NULL, ""},
	};

	/* Equal sizes: the lowest rank first; NULL where is "?"; a repeated
	 * rank counts once; an empty host is no host. */
	expect_summary(r, 6, 256,
		       "ranks 1-2 in a on h; rank 4 in ?; rank 0 in c on x; "
		       "rank 5 in b");
	expect_summary(r, 0, 16, "");
	{
		struct pystack_rank neg[] = {{-1, "a", NULL},
					     {2147483647, "a", NULL},
					     {-2147483647 - 1, "a", NULL}};

		expect_summary(neg, 3, 256,
			       "ranks -2147483648,-1,2147483647 in a");
	}
}

Test(pystack, summary_bounded)
{
	enum { N = 5000 };
	struct pystack_rank *r = calloc(N, sizeof(*r));
	char wheres[N][32], out[200];

	/* Every rank in a place of its own: groups past the line are
	 * counted. */
	for (int i = 0; i < N; i++) {
		snprintf(wheres[i], sizeof(wheres[i]), "f%d (t.py:%d)", i, i);
		r[i] = (struct pystack_rank){i, wheres[i], NULL};
	}
	cr_assert_eq(pystack_summary(r, N, out, sizeof(out)), 0);
	cr_expect_lt(strlen(out), sizeof(out));
	cr_expect(strstr(out, "rank 0 in f0 (t.py:0); rank 1 in") == out, "%s",
		  out);
	cr_expect(strstr(out, "more") != NULL &&
		      strstr(out, "; ...and 49") != NULL,
		  "%s", out);
	/* One scattered group: its rank list is cut, the where stays. */
	for (int i = 0; i < N; i++)
		r[i] = (struct pystack_rank){2 * i, "x (t.py:1)", "h"};
	cr_assert_eq(pystack_summary(r, N, out, sizeof(out)), 0);
	cr_expect(strstr(out, "ranks 0,2,4,") == out, "%s", out);
	cr_expect(strstr(out, ",... (5000 ranks) in x (t.py:1) on h") != NULL,
		  "%s", out);
	/* A line too short for anything is cut, still terminated. */
	cr_assert_eq(pystack_summary(r, N, out, 10), 0);
	cr_expect_str_eq(out, "ranks ...");
	free(r);
}

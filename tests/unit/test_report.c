/*
 * Failure reports (spec section 6): reading torchelastic error files in both
 * the nested and the flat schema, missing and malformed files, choosing the
 * root cause, the printed block in torchrun's layout, and the JSON report
 * read back with jansson.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "crun/err.h"
#include "crun/report.h"

static char dir[64];
static char path[128];
static struct crun_failure fs[4];
static char *out;

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/crun-report-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/error.json", dir);
	memset(fs, 0, sizeof(fs));
	/* Times print in local time; make it UTC so they can be checked. */
	setenv("TZ", "UTC", 1);
	tzset();
}

static void teardown(void)
{
	for (size_t i = 0; i < sizeof(fs) / sizeof(fs[0]); i++)
		failure_release(&fs[i]);
	free(out);
	out = NULL;
	unlink(path);
	rmdir(dir);
}

TestSuite(report, .init = setup, .fini = teardown);

static void write_file(const char *text)
{
	FILE *fp = fopen(path, "w");

	cr_assert_not_null(fp);
	fputs(text, fp);
	fclose(fp);
}

/* --- error files ------------------------------------------------------------ */

Test(report, nested_schema)
{
	write_file("{\"message\": {\"message\": \"ValueError: boom\", \"extraInfo\": "
		   "{\"py_callstack\": \"Traceback (most recent call last):\\n  File "
		   "\\\"train.py\\\", line 3\\nValueError: boom\\n\", "
		   "\"timestamp\": \"1700000000\"}}}");
	fs[0].time = 5;
	cr_assert_eq(failure_read_error_file(&fs[0], path), 0);
	cr_assert_not_null(fs[0].message);
	cr_expect_str_eq(fs[0].message, "ValueError: boom");
	cr_assert_not_null(fs[0].traceback);
	cr_expect_str_eq(fs[0].traceback, "Traceback (most recent call last):\n  File "
					  "\"train.py\", line 3\nValueError: boom\n");
	cr_expect_eq(fs[0].time, 1700000000.0);
	cr_assert_not_null(fs[0].error_file);
	cr_expect_str_eq(fs[0].error_file, path);
}

Test(report, nested_schema_with_error_code)
{
	/* torchrun copies the root cause into its own file with errorCode. */
	write_file("{\"message\": {\"message\": \"RuntimeError: x\", \"errorCode\": 1, "
		   "\"extraInfo\": {\"py_callstack\": \"tb\", \"timestamp\": \"1700000001\"}}}");
	cr_assert_eq(failure_read_error_file(&fs[0], path), 0);
	cr_expect_str_eq(fs[0].message, "RuntimeError: x");
	cr_expect_str_eq(fs[0].traceback, "tb");
	cr_expect_eq(fs[0].time, 1700000001.0);
}

Test(report, flat_schema)
{
	write_file("{\"message\": \"something failed\", \"timestamp\": 1700000000}");
	fs[0].time = 5;
	cr_assert_eq(failure_read_error_file(&fs[0], path), 0);
	cr_assert_not_null(fs[0].message);
	cr_expect_str_eq(fs[0].message, "something failed");
	cr_expect_null(fs[0].traceback);
	cr_expect_eq(fs[0].time, 1700000000.0);
	cr_expect_str_eq(fs[0].error_file, path);
}

Test(report, no_timestamp_keeps_detection_time)
{
	write_file("{\"message\": \"no time here\"}");
	fs[0].time = 1234.5;
	cr_assert_eq(failure_read_error_file(&fs[0], path), 0);
	cr_expect_eq(fs[0].time, 1234.5);
	cr_expect_str_eq(fs[0].message, "no time here");
}

Test(report, missing_file)
{
	fs[0].time = 7;
	cr_expect_lt(failure_read_error_file(&fs[0], "/nonexistent/crun/error.json"), 0);
	cr_expect_null(fs[0].message);
	cr_expect_null(fs[0].traceback);
	cr_expect_null(fs[0].error_file);
	cr_expect_eq(fs[0].time, 7);
}

Test(report, malformed_files)
{
	static const char *const bad[] = {
		"", "{not json", "[1, 2]", "{\"message\": 5}", "{\"other\": \"x\"}",
		"\"just a string\"", "{\"message\": [\"a\"]}",
	};

	for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
		write_file(bad[k]);
		fs[0].time = 7;
		cr_expect_lt(failure_read_error_file(&fs[0], path), 0, "'%s' accepted", bad[k]);
		cr_expect_null(fs[0].message, "'%s'", bad[k]);
		cr_expect_null(fs[0].error_file, "'%s'", bad[k]);
		cr_expect_eq(fs[0].time, 7);
		failure_release(&fs[0]);
	}
}

/* --- root cause ----------------------------------------------------------- */

Test(report, root_is_earliest)
{
	const double times[] = {5, 3, 3, 9};

	for (int i = 0; i < 4; i++)
		fs[i].time = times[i];
	cr_expect_eq(report_root(fs, 4), 1, "smallest time, first on ties");
	cr_expect_eq(report_root(fs, 1), 0);
	fs[3].time = 1;
	cr_expect_eq(report_root(fs, 4), 3);
}

/* --- printed block --------------------------------------------------------- */

static void fill(struct crun_failure *f, int rank, double t)
{
	f->rank = rank;
	f->local_rank = rank % 2;
	f->group_rank = rank / 2;
	f->pid = 1000 + rank;
	snprintf(f->host, sizeof(f->host), "node%d.example", rank / 2);
	f->exitcode = 1;
	f->time = t;
}

static char *print_block(const char *entry, int n)
{
	size_t len = 0;
	char *text = NULL;
	FILE *fp = open_memstream(&text, &len);

	cr_assert_not_null(fp);
	report_print(fp, entry, fs, n);
	fclose(fp);
	return text;
}

/* The n-th line of text (0-based), copied into buf. */
static const char *nth_line(const char *text, int n, char *buf, size_t len)
{
	const char *p = text;

	for (int i = 0; i < n && p; i++) {
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	cr_assert_not_null(p, "no line %d in:\n%s", n, text);
	snprintf(buf, len, "%.*s", (int)strcspn(p, "\n"), p);
	return buf;
}

static void expect_has(const char *text, const char *needle)
{
	cr_expect_not_null(strstr(text, needle), "no '%s' in:\n%s", needle, text);
}

Test(report, one_failure_layout)
{
	char line[256], eq[61], dash[61];

	fill(&fs[0], 3, 1700000000);
	fs[0].exitcode = 128 + SIGSEGV;
	fs[0].signal = SIGSEGV;
	fs[0].traceback = strdup("Fatal Python error: Segmentation fault\n  File \"x.py\"");
	out = print_block("train.py", 1);

	memset(eq, '=', 60);
	eq[60] = '\0';
	memset(dash, '-', 60);
	dash[60] = '\0';
	cr_expect_str_eq(nth_line(out, 0, line, sizeof(line)), eq);
	cr_expect_str_eq(nth_line(out, 1, line, sizeof(line)), "train.py FAILED");
	cr_expect_str_eq(nth_line(out, 2, line, sizeof(line)), dash);
	cr_expect_str_eq(nth_line(out, 3, line, sizeof(line)), "Failures:");
	cr_expect_str_eq(nth_line(out, 4, line, sizeof(line)), "  <NO_OTHER_FAILURES>");
	cr_expect_str_eq(nth_line(out, 5, line, sizeof(line)), dash);
	cr_expect_str_eq(nth_line(out, 6, line, sizeof(line)),
			 "Root Cause (first observed failure):");
	cr_expect_str_eq(nth_line(out, 7, line, sizeof(line)), "[0]:");
	expect_has(out, "  time      : 2023-11-14_22:13:20\n");
	expect_has(out, "  host      : node1.example\n");
	expect_has(out, "  rank      : 3 (local_rank: 1)\n");
	expect_has(out, "SIGSEGV");
	expect_has(out, "exitcode  : 139 (pid: 1003");
	expect_has(out, "  error_file: <N/A>\n");
	/* stderr tail shown, every line indented */
	expect_has(out, "\n    Fatal Python error: Segmentation fault\n      File \"x.py\"\n");
	/* closing rule is the last line */
	cr_expect_eq(out[strlen(out) - 1], '\n');
	cr_expect_str_eq(out + strlen(out) - 61, "============================================================\n");
}

Test(report, root_cause_and_others)
{
	fill(&fs[0], 0, 1700000050);
	fill(&fs[1], 1, 1700000010);
	fs[1].error_file = strdup("/logs/attempt_0/1/error.json");
	fs[1].message = strdup("ValueError: boom");
	fs[1].traceback = strdup("Traceback:\nValueError: boom");
	fill(&fs[2], 2, 1700000030);
	fs[2].exitcode = 128 + SIGKILL;
	fs[2].signal = SIGKILL;
	out = print_block("/usr/bin/my_binary", 3);

	expect_has(out, "/usr/bin/my_binary FAILED\n");
	cr_expect_null(strstr(out, "<NO_OTHER_FAILURES>"));
	{
		const char *fail = strstr(out, "Failures:\n");
		const char *root = strstr(out, "Root Cause (first observed failure):\n");

		cr_assert_not_null(fail);
		cr_assert_not_null(root);
		cr_assert_lt(fail, root);
		/* The root cause is rank 1 (earliest), printed after the header. */
		cr_expect_not_null(strstr(root, "[0]:\n"));
		cr_expect_not_null(strstr(root, "rank      : 1 (local_rank: 1)"));
		cr_expect_not_null(strstr(root, "error_file: /logs/attempt_0/1/error.json"));
		cr_expect_not_null(strstr(root, "ValueError: boom"));
		/* The others, numbered from 1, before it. */
		cr_expect_lt(strstr(out, "[1]:\n"), root);
		cr_expect_lt(strstr(out, "[2]:\n"), root);
		cr_expect_lt(strstr(out, "rank      : 0 (local_rank: 0)"), root);
		cr_expect_lt(strstr(out, "SIGKILL"), root);
		cr_expect_null(strstr(root, "rank      : 0 ("));
	}
}

Test(report, exit_without_signal_or_output)
{
	fill(&fs[0], 0, 1700000000);
	fs[0].exitcode = 3;
	out = print_block("train.py", 1);
	expect_has(out, "exitcode  : 3 (pid: 1000)\n");
	cr_expect_null(strstr(out, "signal"));
	expect_has(out, "error_file: <N/A>");
}

/* --- JSON ------------------------------------------------------------------ */

Test(report, json_round_trip)
{
	json_error_t jerr;
	json_t *root, *arr, *o;

	fill(&fs[0], 0, 1700000050.25);
	fs[0].exitcode = 128 + SIGSEGV;
	fs[0].signal = SIGSEGV;
	fs[0].traceback = strdup("last\nlines");
	fill(&fs[1], 1, 1700000010);
	fs[1].error_file = strdup("/logs/1/error.json");
	fs[1].message = strdup("ValueError: \"quoted\" \\ boom");
	cr_assert_eq(report_write_json(path, "train.py", fs, 2), 0);

	root = json_load_file(path, 0, &jerr);
	cr_assert_not_null(root, "%s", jerr.text);
	cr_expect_str_eq(json_string_value(json_object_get(root, "entrypoint")), "train.py");
	cr_expect_eq(json_integer_value(json_object_get(root, "root_cause")), 1);
	arr = json_object_get(root, "failures");
	cr_assert(json_is_array(arr));
	cr_assert_eq(json_array_size(arr), 2);

	o = json_array_get(arr, 0);
	cr_expect_eq(json_integer_value(json_object_get(o, "rank")), 0);
	cr_expect_eq(json_integer_value(json_object_get(o, "local_rank")), 0);
	cr_expect_eq(json_integer_value(json_object_get(o, "group_rank")), 0);
	cr_expect_eq(json_integer_value(json_object_get(o, "pid")), 1000);
	cr_expect_str_eq(json_string_value(json_object_get(o, "host")), "node0.example");
	cr_expect_eq(json_integer_value(json_object_get(o, "exitcode")), 139);
	cr_expect_eq(json_integer_value(json_object_get(o, "signal")), SIGSEGV);
	cr_expect_str_eq(json_string_value(json_object_get(o, "signal_name")), "SIGSEGV");
	cr_expect_eq(json_number_value(json_object_get(o, "time")), 1700000050.25);
	cr_expect(json_is_null(json_object_get(o, "error_file")));
	cr_expect(json_is_null(json_object_get(o, "message")));
	cr_expect_str_eq(json_string_value(json_object_get(o, "traceback")), "last\nlines");

	o = json_array_get(arr, 1);
	cr_expect_eq(json_integer_value(json_object_get(o, "rank")), 1);
	cr_expect_eq(json_integer_value(json_object_get(o, "signal")), 0);
	cr_expect_null(json_object_get(o, "signal_name"));
	cr_expect_str_eq(json_string_value(json_object_get(o, "error_file")), "/logs/1/error.json");
	cr_expect_str_eq(json_string_value(json_object_get(o, "message")),
			 "ValueError: \"quoted\" \\ boom");
	cr_expect(json_is_null(json_object_get(o, "traceback")));
	json_decref(root);
}

/* A stderr tail is arbitrary bytes; the report must still carry it. */
Test(report, json_keeps_non_utf8_traceback)
{
	json_error_t jerr;
	json_t *root, *o;

	fill(&fs[0], 0, 1700000000);
	fs[0].traceback = strdup("bad byte \xff here, h\xc3\xa9 \xe2\x82 ok\n");
	cr_assert_eq(report_write_json(path, "train.py", fs, 1), 0);
	root = json_load_file(path, 0, &jerr);
	cr_assert_not_null(root, "%s", jerr.text);
	o = json_array_get(json_object_get(root, "failures"), 0);
	cr_assert_not_null(o, "the failure is in the report");
	cr_assert(json_is_string(json_object_get(o, "traceback")),
		  "traceback dropped for non-UTF-8 bytes");
	/* Bad bytes become '?', valid multi-byte characters stay. */
	cr_expect_str_eq(json_string_value(json_object_get(o, "traceback")),
			 "bad byte ? here, h\xc3\xa9 ?? ok\n");
	json_decref(root);
}

Test(report, json_unwritable_path)
{
	fill(&fs[0], 0, 1);
	cr_expect_lt(report_write_json("/nonexistent/dir/report.json", "x", fs, 1), 0);
}

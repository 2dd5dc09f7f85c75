/*
 * The log sink: lines are "<prefix>: <message>\n", handed whole to the
 * installed sink with the message apart, cut at LOG_LINE_MAX with the
 * newline kept, and back on stderr once the sink is removed.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "crun/log.h"

static char got_line[2 * LOG_LINE_MAX], got_msg[2 * LOG_LINE_MAX];
static size_t got_len;
static enum log_level got_level;
static int calls;

static void on_line(void *data, enum log_level level, const char *line,
		    size_t len, const char *msg)
{
	cr_assert_eq(data, &calls);
	calls++;
	got_level = level;
	got_len = len;
	memcpy(got_line, line, len);
	got_line[len] = '\0';
	strcpy(got_msg, msg);
}

static void setup(void)
{
	calls = 0;
	log_set_sink(on_line, &calls);
}

static void teardown(void)
{
	log_set_sink(NULL, NULL);
}

TestSuite(log, .init = setup, .fini = teardown);

Test(log, line_and_message)
{
	log_say("round %d of %s", 3, "job");
	cr_assert_eq(calls, 1);
	cr_assert_str_eq(got_line, "crun: round 3 of job\n");
	cr_assert_eq(got_len, strlen(got_line));
	cr_assert_str_eq(got_msg, "round 3 of job");
	cr_assert_eq(got_level, LOG_INFO);
}

Test(log, warning_and_prefix)
{
	log_warn("low on fds");
	cr_assert_str_eq(got_line, "crun: warning: low on fds\n");
	cr_assert_str_eq(got_msg, "low on fds");
	cr_assert_eq(got_level, LOG_WARN);
	log_msg(LOG_ERROR, "crun store", "closing %s", "x");
	cr_assert_str_eq(got_line, "crun store: closing x\n");
	cr_assert_eq(got_level, LOG_ERROR);
}

Test(log, long_line_cut_with_newline)
{
	char big[3 * LOG_LINE_MAX];

	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	log_say("%s", big);
	cr_assert_eq(got_len, LOG_LINE_MAX - 1);
	cr_assert_eq(got_line[got_len - 1], '\n');
	cr_assert_eq(strlen(got_msg), got_len - 1 - strlen("crun: "));
}

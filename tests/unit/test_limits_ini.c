/*
 * The job file's ${} expansion bounds at their edges (src/cfg/cfg_ini.c): a value
 * that expands to exactly --config_max_value bytes loads, one byte more is
 * refused naming config_max_value; the values of a file expanding to
 * exactly --config_max_expansion bytes load, one more is refused naming
 * config_max_expansion. At the defaults (1 MiB, 4 MiB) and at values set by
 * the options.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "crun/cfg.h"
#include "crun/err.h"

static struct crun_cfg cfg;
static char err[1024], path[64];

/* Load text as the job file with argv opts (NULL-ended) and X=<n bytes>. */
static int load(const char *text, const char *opt, size_t n)
{
	char *x = malloc(n + 3), *envp[] = {x, NULL};
	char *argv[] = {(char *)"crun", (char *)opt, (char *)"--config", path,
			NULL};
	int argc = 4, done = 0, rc;
	FILE *f;

	snprintf(path, sizeof(path), "/tmp/crun-limits-ini-%d.ini",
		 (int)getpid());
	f = fopen(path, "w");
	cr_assert_not_null(f);
	fputs(text, f);
	fclose(f);
	memset(x, 'a', n + 2);
	memcpy(x, "X=", 2);
	x[n + 2] = '\0';
	if (opt == NULL) {
		argv[1] = argv[2];
		argv[2] = argv[3];
		argv[3] = NULL;
		argc = 3;
	}
	cfg_init(&cfg);
	err[0] = '\0';
	rc = cfg_parse_args(&cfg, argc, argv, &done, err, sizeof(err));
	if (rc == 0)
		rc = cfg_apply_env(&cfg, envp);
	if (rc == 0)
		rc = cfg_load_job(&cfg, envp, err, sizeof(err));
	cfg_release(&cfg);
	unlink(path);
	free(x);
	return rc;
}

static const char one[] = "[job]\nentrypoint = x\nargs = ${X}\n";
static const char four[] = "[job]\nentrypoint = ${X}\nargs = ${X}\n"
			   "[env]\nA = ${X}\nB = ${X}\n";

static void value_edge(const char *opt, size_t max)
{
	char want[160];

	cr_assert_eq(load(one, opt, max), 0, "%s", err);
	cr_assert_eq(load(one, opt, max + 1), CRUN_EUSAGE);
	snprintf(want, sizeof(want),
		 "args: value longer than %zu bytes after ${} expansion "
		 "(config_max_value)",
		 max);
	cr_assert_not_null(strstr(err, want), "%s", err);
}

Test(limits_ini, value_default, .timeout = 30) { value_edge(NULL, 1u << 20); }

Test(limits_ini, value_set, .timeout = 30)
{
	value_edge("--config_max_value=1K", 1024);
}

/* Four values of X: the file's values are 4 * |X| bytes. */
static void expansion_edge(const char *opt, size_t max)
{
	char want[160];

	cr_assert_eq(load(four, opt, max / 4), 0, "%s", err);
	cr_assert_eq(load(four, opt, max / 4 + 1), CRUN_EUSAGE);
	snprintf(want, sizeof(want),
		 "the job file's values pass %zu bytes after ${} expansion "
		 "(config_max_expansion)",
		 max);
	cr_assert_not_null(strstr(err, want), "%s", err);
}

Test(limits_ini, expansion_default, .timeout = 30)
{
	expansion_edge("--config_max_value=2M", 4u << 20);
}

Test(limits_ini, expansion_set, .timeout = 30)
{
	expansion_edge("--config_max_expansion=4K", 4096);
}

/* text padded with comment lines of 99 bytes (and one shorter) to n bytes. */
static char *padded_file(size_t n)
{
	static const char head[] = "[job]\nentrypoint = x\n";
	char *s = malloc(n + 1);
	size_t k = strlen(head);

	memcpy(s, head, k);
	while (k < n) {
		size_t line = n - k > 100 ? 100 : n - k;

		if (line < 2) { /* a lone byte: a blank line */
			s[k++] = '\n';
			continue;
		}
		memset(s + k, 'c', line);
		s[k] = '#';
		s[k + line - 1] = '\n';
		k += line;
	}
	s[n] = '\0';
	return s;
}

/* The job file itself: 1 MiB is read, one byte more is refused. */
Test(limits_ini, file_size, .timeout = 30)
{
	char *s = padded_file(1u << 20);

	cr_assert_eq(load(s, NULL, 1), 0, "%s", err);
	free(s);
	s = padded_file((1u << 20) + 1);
	cr_assert_eq(load(s, NULL, 1), CRUN_EUSAGE);
	cr_assert_not_null(strstr(err, "job file larger than 1024 KiB"), "%s",
			   err);
	free(s);
}

/* The job file with a comment line of n characters (its newline apart). */
static char *long_line(size_t n)
{
	static const char head[] = "[job]\nentrypoint = x\n";
	size_t k = strlen(head);
	char *s = malloc(k + n + 2);

	memcpy(s, head, k);
	memset(s + k, 'c', n);
	s[k] = '#';
	s[k + n] = '\n';
	s[k + n + 1] = '\0';
	return s;
}

/*
 * One line: the longest the parser takes (the number its refusal names:
 * libinih's line buffer) is read; one character more is refused.
 */
Test(limits_ini, line_length, .timeout = 30)
{
	char *s = long_line(65000), *p;
	int max;

	/* The bound, from the refusal of a line far past it. */
	cr_assert_eq(load(s, NULL, 1), CRUN_EUSAGE);
	free(s);
	p = strstr(err, "line too long (over ");
	cr_assert_not_null(p, "%s", err);
	max = atoi(p + strlen("line too long (over "));
	cr_assert(max > 10 && max < 65000, "%s", err);
	s = long_line((size_t)max);
	cr_assert_eq(load(s, NULL, 1), 0, "a line of %d: %s", max, err);
	free(s);
	s = long_line((size_t)max + 1);
	cr_assert_eq(load(s, NULL, 1), CRUN_EUSAGE);
	cr_assert_not_null(strstr(err, "line too long"), "%s", err);
	free(s);
}

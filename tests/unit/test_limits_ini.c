/*
 * The job file's ${} expansion bounds at their edges (src/cfg_ini.c): a value
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
	rc = cfg_parse_args(&cfg, argc, argv, envp, &done, err, sizeof(err));
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

/*
 * Option bounds that are not a range of the option table (test_limits_opts
 * has those): store_max_output against store_max_value_size, and
 * --nproc_per_node's 1..CRUN_MAX_LOCAL_RANKS, each at its edges.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "crun/cfg.h"
#include "crun/err.h"

static struct crun_cfg cfg;
static char err[1024];

/* Parse "crun <opts...> x.py" and finalize: 0 or the error. */
static int parse(const char *a, const char *b)
{
	char *argv[5] = {(char *)"crun"}, *envp[] = {NULL};
	int argc = 1, done = 0, rc;

	if (a != NULL)
		argv[argc++] = (char *)a;
	if (b != NULL)
		argv[argc++] = (char *)b;
	argv[argc++] = (char *)"x.py";
	argv[argc] = NULL;
	cfg_init(&cfg);
	err[0] = '\0';
	rc = cfg_parse_args(&cfg, argc, argv, &done, err, sizeof(err));
	if (rc == 0)
		rc = cfg_apply_env(&cfg, envp);
	if (rc == 0)
		rc = cfg_load_job(&cfg, envp, err, sizeof(err));
	if (rc == 0)
		rc = cfg_finalize(&cfg, err, sizeof(err));
	return rc;
}

/* store_max_output holds one reply of the largest value: value + 64. */
Test(limits_cfg, output_holds_one_value, .timeout = 10)
{
	cr_assert_eq(parse("--store_max_value_size=1000",
			   "--store_max_output=1064"),
		     0, "%s", err);
	cr_assert_eq(cfg.store.max_output, 1064);
	cfg_release(&cfg);
	cr_assert_eq(parse("--store_max_value_size=1000",
			   "--store_max_output=1063"),
		     CRUN_EUSAGE);
	cr_assert_not_null(strstr(err, "must be at least "
				       "store_max_value_size + 64"),
			   "%s", err);
	cfg_release(&cfg);
}

/* Local ranks: 1..CRUN_MAX_LOCAL_RANKS workers per node. */
Test(limits_cfg, nproc_per_node, .timeout = 10)
{
	cr_assert_eq(parse("--nproc_per_node=1024", NULL), 0, "%s", err);
	cr_assert_eq(cfg.nproc_per_node, CRUN_MAX_LOCAL_RANKS);
	cfg_release(&cfg);
	cr_assert_eq(parse("--nproc_per_node=1", NULL), 0, "%s", err);
	cr_assert_eq(cfg.nproc_per_node, 1);
	cfg_release(&cfg);
	cr_assert_eq(parse("--nproc_per_node=1025", NULL), CRUN_EUSAGE);
	cr_assert_not_null(strstr(err, "expected a count 1..1024"), "%s", err);
	cfg_release(&cfg);
	cr_assert_eq(parse("--nproc_per_node=0", NULL), CRUN_EUSAGE);
	cfg_release(&cfg);
}

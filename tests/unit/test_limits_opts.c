/*
 * Limits in the option tables (src/cfg/cfg_opts.h): every ranged option and
 * rdzv_conf key at both edges of its range (the bound accepted, one past it
 * refused with a message naming the option or key and the bound), the etcd
 * bounds that were constants (etcd_max_body, etcd_attempt_timeout,
 * etcd_connect_timeout) and what reaches the etcd client, and the limits
 * table of --help, crun(1) and the README, printed from the same tables.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crun/cfg.h"
#include "crun/err.h"
#include "crun/etcd.h"
#include "crun/hostlist.h"
#include "../../src/cfg/cfg_opts.h"

static struct crun_cfg cfg;
static char errbuf[512];

static void setup(void)
{
	cfg_init(&cfg);
	errbuf[0] = '\0';
}

static void teardown(void)
{
	cfg_release(&cfg);
}

TestSuite(cfg_limits, .init = setup, .fini = teardown);

static void reset(void)
{
	cfg_release(&cfg);
	cfg_init(&cfg);
	errbuf[0] = '\0';
}

/* crun ARGS... through every step the launcher runs (no environment). */
static int run_list(const char *const *args)
{
	char *argv[16], *noenv[] = {NULL};
	int argc = 0, done = 0, rc;

	argv[argc++] = (char *)"crun";
	for (int i = 0; args[i]; i++)
		argv[argc++] = (char *)args[i];
	argv[argc] = NULL;
	reset();
	rc = cfg_parse_args(&cfg, argc, argv, &done, errbuf, sizeof(errbuf));
	if (rc == 0 && !done)
		rc = cfg_apply_env(&cfg, noenv);
	if (rc == 0 && !done)
		rc = cfg_load_job(&cfg, noenv, errbuf, sizeof(errbuf));
	if (rc == 0 && !done)
		rc = cfg_finalize(&cfg, errbuf, sizeof(errbuf));
	return rc;
}

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})
#define RUN_OK(...)                                                            \
	cr_assert_eq(run_list(ARGS(__VA_ARGS__)), 0, "%s", errbuf)
/* Refused as a usage error with a one-line message holding want. */
#define USAGE_ERR(want, ...)                                                   \
	do {                                                                   \
		cr_expect_eq(run_list(ARGS(__VA_ARGS__)), CRUN_EUSAGE);        \
		cr_expect_null(strchr(errbuf, '\n'), "%s", errbuf);            \
		cr_expect_not_null(strstr(errbuf, want), "'%s' lacks '%s'",    \
				   errbuf, want);                              \
	} while (0)

/*
 * The etcd bounds that were constants: the answer cap, one attempt and one
 * connect. Defaults from the table; each at its edges, the bytes one
 * exactly (4096 and 1G accepted, one byte outside refused naming the range
 * and the key), and what reaches the etcd client.
 */
Test(cfg_limits, rdzv_conf_etcd_body_and_attempts)
{
	struct etcd_limits lim;

	RUN_OK("train.py");
	cr_expect_eq(cfg.rdzv.etcd_max_body, 64u << 20);
	cr_expect_eq(cfg.rdzv.etcd_attempt_timeout, 3);
	cr_expect_eq(cfg.rdzv.etcd_connect_timeout, 1);
	cfg_etcd_limits(&cfg.rdzv, &lim);
	cr_expect_eq(lim.max_body, 64u << 20);
	cr_expect_eq(lim.attempt_ms, 3000);
	cr_expect_eq(lim.connect_ms, 1000);
	cr_expect_eq(lim.turn_bytes, 256u << 10);
	cr_expect_eq(lim.backoff_max_ms, 2000);
	reset();
	RUN_OK("--rdzv_conf=etcd_max_body=4096,etcd_attempt_timeout=0.5,"
		      "etcd_connect_timeout=0.25", "train.py");
	cr_expect_eq(cfg.rdzv.etcd_max_body, 4096);
	cfg_etcd_limits(&cfg.rdzv, &lim);
	cr_expect_eq(lim.attempt_ms, 500);
	cr_expect_eq(lim.connect_ms, 250);
	reset();
	RUN_OK("--rdzv_conf=etcd_max_body=1G", "train.py");
	cr_expect_eq(cfg.rdzv.etcd_max_body, 1u << 30);
	USAGE_ERR("'4095' for 'etcd_max_body' is out of range "
		  "(4096..1073741824 bytes)",
		  "--rdzv_conf=etcd_max_body=4095", "train.py");
	USAGE_ERR("'1073741825' for 'etcd_max_body' is out of range "
		  "(4096..1073741824 bytes)",
		  "--rdzv_conf=etcd_max_body=1073741825", "train.py");
	USAGE_ERR("'3601' for 'etcd_attempt_timeout' is out of range "
		  "(0.001..3600 seconds)",
		  "--rdzv_conf=etcd_attempt_timeout=3601", "train.py");
	USAGE_ERR("invalid value '0' for 'etcd_connect_timeout'",
		  "--rdzv_conf=etcd_connect_timeout=0", "train.py");
}

/* --help's Limits section and --print-limits come from the same tables. */
Test(cfg_limits, limits_listed_from_the_tables)
{
	char *text = NULL;
	size_t len = 0;
	FILE *fp = open_memstream(&text, &len);

	cfg__print_limits(fp, "markdown");
	fclose(fp);
	cr_assert_not_null(strstr(text, "| Limit | Default | Set with |\n"));
	cr_expect_not_null(strstr(text, "| largest key the store accepts | 8K "
					"bytes | `--store_max_key_size`, "
					"`CRUN_STORE_MAX_KEY_SIZE` |\n"),
			   "%s", text);
	cr_expect_not_null(strstr(text, "| names in one SLURM hostlist | 1048576 "
					"| fixed |\n"),
			   "%s", text);
	cr_expect_not_null(strstr(text, "| live FileTimer timers (more are "
					"refused) | 4096 | fixed |\n"),
			   "%s", text);
	cr_expect_not_null(strstr(text, "| largest request the store reads | 2 x "
					"store_max_value_size + "
					"store_max_key_size + 64 bytes | "
					"derived |\n"),
			   "%s", text);
	cr_expect_not_null(strstr(text, "| largest etcd answer | 64M bytes | "
					"`--rdzv_conf=etcd_max_body=` |\n"),
			   "%s", text);
	/* Every limit of both tables, and nothing else. */
	int rows = 0, want = 0;
	for (char *p = text; (p = strchr(p, '\n')); p++)
		rows++;
	for (int i = 0; i < CFG_NOPTS; i++)
		want += (cfg_opts[i].flags & CFG_F_LIMIT) != 0;
	for (int i = 0; i < cfg_nrdzv_keys; i++)
		want += (cfg_rdzv_keys[i].flags & CFG_F_LIMIT) != 0;
#define X(...) want++;
	CFG_FIXED_LIMITS(X)
	CFG_DERIVED_LIMITS(X)
#undef X
	cr_expect_eq(rows, want + 2, "%d rows for %d limits", rows, want);
	cr_expect_geq(want, 20);
	free(text);
	text = NULL;

	USAGE_ERR("argument --print-limits: expected markdown or man",
		  "--print-limits=html");
}


/* Convert text as option id's value; CRUN_EUSAGE and errbuf when refused. */
static int convert_as(int id, const char *text)
{
	reset();
	cfg_set(&cfg, id, text, CRUN_SRC_CLI, cfg_opts[id].name);
	return cfg__convert(&cfg, id, errbuf, sizeof(errbuf));
}

#define CONVERT_OK(id, text)                                                   \
	cr_expect_eq(convert_as(id, text), 0, "--%s=%s: %s",                   \
		     cfg_opts[id].name, text, errbuf)
#define CONVERT_BAD(id, text, want)                                            \
	do {                                                                   \
		cr_expect_eq(convert_as(id, text), CRUN_EUSAGE,                \
			     "--%s=%s accepted", cfg_opts[id].name, text);    \
		cr_expect_not_null(strstr(errbuf, cfg_opts[id].name), "%s",    \
				   errbuf);                                    \
		cr_expect_not_null(strstr(errbuf, want), "%s lacks '%s'",      \
				   errbuf, want);                              \
	} while (0)

/*
 * Every range of the option table at its edges: the bound itself is
 * accepted, one past it refused with a message naming the option and the
 * bound.
 */
Test(cfg_limits, every_option_range_at_its_edges)
{
	char v[64], w[96];
	int n = 0;

	for (int id = 0; id < CFG_NOPTS; id++) {
		const struct cfg_opt *o = &cfg_opts[id];

		switch (o->conv) {
		case CFG_C_INT:
			snprintf(w, sizeof(w), "expected an integer in %ld..%ld",
				 (long)o->lo, (long)o->hi);
			snprintf(v, sizeof(v), "%ld", (long)o->hi);
			CONVERT_OK(id, v);
			snprintf(v, sizeof(v), "%ld", (long)o->hi + 1);
			CONVERT_BAD(id, v, w);
			snprintf(v, sizeof(v), "%ld", (long)o->lo);
			CONVERT_OK(id, v);
			snprintf(v, sizeof(v), "%ld", (long)o->lo - 1);
			CONVERT_BAD(id, v, w);
			n++;
			break;
		case CFG_C_SIZE:
			snprintf(w, sizeof(w), "out of range (at most %zu)",
				 (size_t)o->hi);
			snprintf(v, sizeof(v), "%zu", (size_t)o->hi);
			CONVERT_OK(id, v);
			cr_expect_eq(*(size_t *)(void *)((char *)&cfg + o->field),
				     (size_t)o->hi, "--%s", o->name);
			snprintf(v, sizeof(v), "%zu", (size_t)o->hi + 1);
			/* 1T is cfg_parse_size's own bound. */
			CONVERT_BAD(id, v,
				    o->hi >= 1099511627776.0 ? "expected a size"
							     : w);
			CONVERT_OK(id, "1");
			CONVERT_BAD(id, "0", "expected a size");
			n++;
			break;
		case CFG_C_SECS:
			snprintf(w, sizeof(w), "out of range (at most %.0f seconds)",
				 o->hi);
			snprintf(v, sizeof(v), "%.0f", o->hi);
			CONVERT_OK(id, v);
			snprintf(v, sizeof(v), "%.3f", o->hi + 0.001);
			CONVERT_BAD(id, v, w);
			if (o->flags & CFG_F_POSITIVE)
				CONVERT_BAD(id, "0", "expected a number > 0");
			else
				CONVERT_OK(id, "0");
			n++;
			break;
		}
	}
	cr_expect_geq(n, 20, "%d ranged options", n);
}

/* The same for every ranged rdzv_conf key. */
Test(cfg_limits, every_rdzv_conf_range_at_its_edges)
{
	struct crun_rdzv_conf c;
	char text[128], why[256];
	int n = 0;

	for (int i = 0; i < cfg_nrdzv_keys; i++) {
		const struct cfg_rdzv_key *k = &cfg_rdzv_keys[i];
		const char *ok[2] = {NULL, NULL}, *bad[2] = {NULL, NULL};
		char a[32], b[32], x[32], y[32], want[128];

		switch (k->kind) {
		case R_DUR:
			snprintf(a, sizeof(a), "%.0f", k->hi);
			snprintf(b, sizeof(b), "0.001");
			snprintf(x, sizeof(x), "%.3f", k->hi + 0.001);
			snprintf(y, sizeof(y), "0.0009");
			snprintf(want, sizeof(want),
				 "out of range (0.001..%.0f seconds)", k->hi);
			break;
		case R_BYTES:
			snprintf(a, sizeof(a), "%lu", (unsigned long)k->hi);
			snprintf(b, sizeof(b), "%lu", (unsigned long)k->lo);
			snprintf(x, sizeof(x), "%lu", (unsigned long)k->hi + 1);
			snprintf(y, sizeof(y), "%lu", (unsigned long)k->lo - 1);
			snprintf(want, sizeof(want),
				 "out of range (%lu..%lu bytes)",
				 (unsigned long)k->lo, (unsigned long)k->hi);
			break;
		case R_COUNT:
		case R_INT:
			snprintf(a, sizeof(a), "%ld", (long)k->hi);
			snprintf(b, sizeof(b), "%ld", (long)k->lo);
			snprintf(x, sizeof(x), "%ld", (long)k->hi + 1);
			snprintf(y, sizeof(y), "%ld", (long)k->lo - 1);
			if (k->kind == R_COUNT)
				snprintf(want, sizeof(want),
					 "is not a count in %ld..%ld",
					 (long)k->lo, (long)k->hi);
			else
				snprintf(want, sizeof(want), "invalid value");
			break;
		default:
			continue;
		}
		ok[0] = a, ok[1] = b, bad[0] = x, bad[1] = y;
		for (int j = 0; j < 2; j++) {
			cfg_rdzv_conf_init(&c);
			snprintf(text, sizeof(text), "%s=%s", k->key, ok[j]);
			cr_expect_eq(cfg_parse_rdzv_conf(text, &c, why, sizeof(why)),
				     0, "%s: %s", text, why);
			cfg_rdzv_conf_release(&c);
			cfg_rdzv_conf_init(&c);
			snprintf(text, sizeof(text), "%s=%s", k->key, bad[j]);
			why[0] = '\0';
			cr_expect_eq(cfg_parse_rdzv_conf(text, &c, why, sizeof(why)),
				     CRUN_EUSAGE, "%s accepted", text);
			cr_expect_not_null(strstr(why, k->key), "%s", why);
			/* "0.0009" and "-1" are not numbers the kind takes:
			 * "invalid value" or the range, either names the key. */
			if (j == 0)
				cr_expect_not_null(strstr(why, want),
						   "%s: '%s' lacks '%s'", text,
						   why, want);
			cfg_rdzv_conf_release(&c);
		}
		n++;
	}
	cr_expect_geq(n, 20, "%d ranged keys", n);
}

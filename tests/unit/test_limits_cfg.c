/*
 * The ranges of the options that set crun's limits (src/cfg.c) at their
 * edges: the largest (and smallest) value each accepts is taken and
 * reaches the field the limit is read from; one past it is a usage error
 * naming the option and its range. One table: option, field, bounds.
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
	rc = cfg_parse_args(&cfg, argc, argv, envp, &done, err, sizeof(err));
	if (rc == 0)
		rc = cfg_finalize(&cfg, err, sizeof(err));
	return rc;
}

struct size_opt {
	const char *name;
	unsigned long long hi;
	size_t (*get)(void);
	const char *extra; /* an option the edge needs beside it */
	const char *want;  /* the refusal, when not "out of range" */
};

static size_t key(void) { return cfg.store.max_key; }
static size_t value(void) { return cfg.store.max_value; }
static size_t keys(void) { return cfg.store.max_keys; }
static size_t memory(void) { return cfg.store.max_memory; }
static size_t conns(void) { return cfg.store.max_conns; }
static size_t output(void) { return cfg.store.max_output; }
static size_t idle(void) { return cfg.store.idle_timeout; }
static size_t console(void) { return cfg.console_buffer; }
static size_t ini_value(void) { return cfg.ini_max_value; }
static size_t ini_expansion(void) { return cfg.ini_max_expansion; }

static const struct size_opt sizes[] = {
    {"store_max_key_size", 1ULL << 30, key, NULL, NULL},
    {"store_max_value_size", 1ULL << 34, value, "--store_max_output=1099511627776", NULL},
    {"store_max_keys", 1ULL << 24, keys, NULL, NULL},
    /* 1 TiB is also where every size stops parsing. */
    {"store_max_memory", 1ULL << 40, memory, NULL, "expected a size like"},
    {"store_max_conns", 1ULL << 20, conns, NULL, NULL},
    {"store_max_output", 1ULL << 40, output, NULL, "expected a size like"},
    {"store_idle_timeout", 365ULL * 24 * 3600, idle, NULL, NULL},
    {"console_buffer", 1ULL << 30, console, NULL, NULL},
    {"config_max_value", 1ULL << 30, ini_value, NULL, NULL},
    {"config_max_expansion", 1ULL << 30, ini_expansion, NULL, NULL},
};

Test(limits_cfg, size_options, .timeout = 30)
{
	for (size_t i = 0; i < sizeof(sizes) / sizeof(*sizes); i++) {
		const struct size_opt *o = &sizes[i];
		char opt[128], want[128];

		snprintf(opt, sizeof(opt), "--%s=%llu", o->name, o->hi);
		cr_assert_eq(parse(opt, o->extra), 0, "%s: %s", opt, err);
		cr_assert_eq(o->get(), o->hi, "%s: got %zu", opt, o->get());
		cfg_release(&cfg);
		snprintf(opt, sizeof(opt), "--%s=%llu", o->name, o->hi + 1);
		cr_assert_eq(parse(opt, o->extra), CRUN_EUSAGE, "%s accepted",
			     opt);
		snprintf(want, sizeof(want), "out of range (at most %llu)",
			 o->hi);
		if (o->want != NULL)
			snprintf(want, sizeof(want), "%s", o->want);
		cr_assert_not_null(strstr(err, o->name), "%s: %s", opt, err);
		cr_assert_not_null(strstr(err, want), "%s: %s", opt, err);
		cfg_release(&cfg);
	}
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

struct int_opt {
	const char *name;
	long lo, hi;
	int *field;
};

Test(limits_cfg, metrics_options, .timeout = 10)
{
	const struct int_opt ints[] = {
	    {"metrics_max_conns", 1, 65536, &cfg.metrics_max_conns},
	    {"metrics_idle_timeout", 1, 86400, &cfg.metrics_idle_timeout},
	};

	for (size_t i = 0; i < sizeof(ints) / sizeof(*ints); i++) {
		const struct int_opt *o = &ints[i];
		long ok[] = {o->lo, o->hi}, bad[] = {o->lo - 1, o->hi + 1};
		char opt[128], want[128];

		for (int k = 0; k < 2; k++) {
			snprintf(opt, sizeof(opt), "--%s=%ld", o->name, ok[k]);
			cr_assert_eq(parse(opt, NULL), 0, "%s: %s", opt, err);
			cr_assert_eq(*o->field, ok[k], "%s", opt);
			cfg_release(&cfg);
			snprintf(opt, sizeof(opt), "--%s=%ld", o->name, bad[k]);
			cr_assert_eq(parse(opt, NULL), CRUN_EUSAGE,
				     "%s accepted", opt);
			snprintf(want, sizeof(want),
				 "expected an integer in %ld..%ld", o->lo,
				 o->hi);
			cr_assert_not_null(strstr(err, want), "%s: %s", opt,
					   err);
			cfg_release(&cfg);
		}
	}
}

/* rdzv_conf keys that bound the etcd client and the heartbeats. */
struct conf_key {
	const char *key;
	const char *lo, *hi, *below, *above;
	const char *want; /* in the refusal */
};

static const struct conf_key conf_keys[] = {
    {"etcd_turn_bytes", "4096", "1073741824", "4095", "1073741825",
     "out of range (4096..1073741824 bytes)"},
    {"etcd_max_message", "4096", "1073741824", "4095", "1073741825",
     "out of range (4096..1073741824 bytes)"},
    {"etcd_max_json_items", "1", "100000000", "0", "100000001",
     "is not a count in 1..100000000"},
    {"etcd_turn_messages", "1", "100000000", "0", "100000001",
     "is not a count in 1..100000000"},
    {"exclude_after", "0", "32", "-1", "33",
     "is not a count in 0..32 (0: off)"},
    {"keep_alive_max_attempt", "1", "1000000", "0", "1000001",
     "keep_alive_max_attempt"},
    {"keep_alive_interval", "0.001", "3600", "0.0009", "3601",
     "out of range (0.001..3600 seconds)"},
    {"heartbeat_timeout", "0.001", "31536000", "0.0009", "31536001",
     "out of range (0.001..31536000 seconds)"},
    {"etcd_backoff", "0.001", "60", "0.0009", "61",
     "out of range (0.001..60 seconds)"},
    {"etcd_backoff_max", "0.001", "600", "0.0009", "601",
     "out of range (0.001..600 seconds)"},
};

Test(limits_cfg, rdzv_conf_keys, .timeout = 10)
{
	for (size_t i = 0; i < sizeof(conf_keys) / sizeof(*conf_keys); i++) {
		const struct conf_key *c = &conf_keys[i];
		const char *ok[] = {c->lo, c->hi}, *bad[] = {c->below, c->above};

		for (int k = 0; k < 2; k++) {
			struct crun_rdzv_conf conf;
			char s[128];

			memset(&conf, 0, sizeof(conf));
			snprintf(s, sizeof(s), "%s=%s", c->key, ok[k]);
			cr_assert_eq(cfg_parse_rdzv_conf(s, &conf, err,
							 sizeof(err)),
				     0, "%s: %s", s, err);
			cfg_rdzv_conf_release(&conf);
			memset(&conf, 0, sizeof(conf));
			snprintf(s, sizeof(s), "%s=%s", c->key, bad[k]);
			cr_assert_neq(cfg_parse_rdzv_conf(s, &conf, err,
							  sizeof(err)),
				      0, "%s accepted", s);
			cr_assert_not_null(strstr(err, c->want), "%s: %s", s,
					   err);
			cfg_rdzv_conf_release(&conf);
		}
	}
}

/* The values reach the fields the limits are read from. */
Test(limits_cfg, rdzv_conf_fields, .timeout = 10)
{
	struct crun_rdzv_conf conf;

	memset(&conf, 0, sizeof(conf));
	cr_assert_eq(cfg_parse_rdzv_conf("etcd_turn_bytes=1073741824,"
					 "etcd_max_message=4096,"
					 "etcd_max_json_items=100000000,"
					 "etcd_turn_messages=1,"
					 "keep_alive_max_attempt=1000000",
					 &conf, err, sizeof(err)),
		     0, "%s", err);
	cr_assert_eq(conf.etcd_turn_bytes, 1073741824);
	cr_assert_eq(conf.etcd_max_message, 4096);
	cr_assert_eq(conf.etcd_max_json_items, 100000000);
	cr_assert_eq(conf.etcd_turn_messages, 1);
	cr_assert_eq(conf.keep_alive_max_attempt, 1000000);
	cfg_rdzv_conf_release(&conf);
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

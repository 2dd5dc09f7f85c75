/*
 * The launch configuration against torchrun's command line (spec section 1):
 * every option of the table in both spellings and both value forms, short
 * options, unique-prefix abbreviations, the script's arguments passed
 * verbatim, PET_* and CRUN_* fallbacks, precedence between sources, usage
 * errors that name the flag and the value, and the resolution of
 * --nproc_per_node cpu/gpu/auto. Job files (cfg_ini.c) are not covered here.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crun/cfg.h"
#include "crun/log.h"
#include "crun/err.h"
#include "crun/rdzv.h"
#include "crun/store.h"
#include "../../src/cfg/cfg_opts.h"

#define MAX_ARGS 64

static struct crun_cfg cfg;
static char errbuf[512];
static int done;
static char *noenv[] = {NULL};
static char gpu_dir[64];
static int gpu_n;
static char **envs[32];
static int nenvs;

/* Remove the fake /proc/driver/nvidia/gpus made by make_gpus, if any. */
static void remove_gpus(void)
{
	char path[128];

	if (gpu_dir[0] == '\0')
		return;
	for (int i = 0; i < gpu_n; i++) {
		snprintf(path, sizeof(path), "%s/0000:%02x:00.0", gpu_dir, i);
		rmdir(path);
	}
	rmdir(gpu_dir);
	gpu_dir[0] = '\0';
	gpu_n = 0;
}

static void setup(void)
{
	cfg_init(&cfg);
	errbuf[0] = '\0';
	done = -1;
	/* Tests must not see the GPUs or the settings of the machine. */
	unsetenv("CUDA_VISIBLE_DEVICES");
	setenv("CRUN_NVIDIA_PROC", "/nonexistent/crun-test-no-gpus", 1);
	setenv("CRUN_SYSFS", "/nonexistent/crun-test-no-sysfs", 1);
}

static void teardown(void)
{
	cfg_release(&cfg);
	remove_gpus();
	for (int i = 0; i < nenvs; i++) {
		for (char **p = envs[i]; *p; p++)
			free(*p);
		free(envs[i]);
	}
	nenvs = 0;
}

TestSuite(cfg, .init = setup, .fini = teardown);

/* Point cfg_gpu_count at a temporary directory holding n GPU entries. */
static void make_gpus(int n)
{
	char path[128];

	remove_gpus();
	snprintf(gpu_dir, sizeof(gpu_dir), "/tmp/crun-gpus-XXXXXX");
	cr_assert_not_null(mkdtemp(gpu_dir));
	for (int i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "%s/0000:%02x:00.0", gpu_dir, i);
		cr_assert_eq(mkdir(path, 0700), 0);
		gpu_n++;
	}
	setenv("CRUN_NVIDIA_PROC", gpu_dir, 1);
}

/* A NULL-ended, writable copy of list, freed at teardown. */
static char **env_list(const char *const *list)
{
	char **v;
	int n = 0;

	while (list[n])
		n++;
	cr_assert_lt(nenvs, (int)(sizeof(envs) / sizeof(envs[0])));
	v = calloc((size_t)n + 1, sizeof(char *));
	for (int i = 0; i < n; i++)
		v[i] = strdup(list[i]);
	envs[nenvs++] = v;
	return v;
}

#define ENV(...) env_list((const char *const[]){__VA_ARGS__, NULL})

/* Start over with a fresh configuration (for loops inside one test). */
static void reset(void)
{
	cfg_release(&cfg);
	cfg_init(&cfg);
	errbuf[0] = '\0';
	done = -1;
}

/* Join args for assertion messages. */
static const char *show(const char *const *args)
{
	static char buf[1024];
	size_t at = 0;

	buf[0] = '\0';
	for (int i = 0; args[i] && at < sizeof(buf); i++)
		at += (size_t)snprintf(buf + at, sizeof(buf) - at, "%s'%s'",
				       i ? " " : "", args[i]);
	return buf;
}

/* cfg_parse_args on "crun args..." with envp. */
static int parse_list(char **envp, const char *const *args)
{
	char *argv[MAX_ARGS + 2];
	int argc = 0, rc;

	argv[argc++] = strdup("crun");
	for (int i = 0; args[i]; i++) {
		cr_assert_lt(argc, MAX_ARGS);
		argv[argc++] = strdup(args[i]);
	}
	argv[argc] = NULL;
	rc = cfg_parse_args(&cfg, argc, argv, &done, errbuf, sizeof(errbuf));
	if (rc == 0 && !done)
		rc = cfg_apply_env(&cfg, envp);
	if (rc == 0 && !done)
		rc = cfg_load_job(&cfg, envp, errbuf, sizeof(errbuf));
	for (int i = 0; i < argc; i++)
		free(argv[i]);
	return rc;
}

/* Parse, then finalize unless parsing failed or --help/--version ran. */
static int run_list(char **envp, const char *const *args)
{
	int rc = parse_list(envp, args);

	if (rc == 0 && done == 0)
		rc = cfg_finalize(&cfg, errbuf, sizeof(errbuf));
	return rc;
}

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})
#define PARSE(envp, ...) parse_list(envp, ARGS(__VA_ARGS__))
#define RUN(envp, ...) run_list(envp, ARGS(__VA_ARGS__))

/* Expect a successful parse+finalize of args. */
#define RUN_OK(envp, ...)                                                      \
	do {                                                                   \
		int rc_ = RUN(envp, __VA_ARGS__);                              \
		cr_assert_eq(rc_, 0, "%s: %s (%s)", show(ARGS(__VA_ARGS__)),   \
			     errbuf, crun_err_name(rc_));                      \
	} while (0)

static void expect_raw(int id, const char *want, int src)
{
	cr_assert_not_null(cfg.raw[id], "option '%s' not set (want '%s')",
			   cfg_opts[id].name, want);
	cr_expect_str_eq(cfg.raw[id], want, "option '%s'", cfg_opts[id].name);
	cr_expect_eq(cfg.src[id], src, "option '%s' source %d, want %d",
		     cfg_opts[id].name, cfg.src[id], src);
}

/*
 * Expect args (parsed and finalized with envp) to fail with CRUN_EUSAGE and
 * a one-line message containing each non-NULL needle.
 */
static void usage_err_list(char **envp, const char *const *args,
			   const char *n1, const char *n2)
{
	int rc;

	reset();
	rc = run_list(envp, args);
	cr_expect_eq(rc, CRUN_EUSAGE, "%s: got %s, want CRUN_EUSAGE (%s)",
		     show(args), crun_err_name(rc), errbuf);
	cr_expect_neq(errbuf[0], '\0', "%s: no message", show(args));
	cr_expect_null(strchr(errbuf, '\n'), "%s: message not one line: '%s'",
		       show(args), errbuf);
	if (n1)
		cr_expect_not_null(strstr(errbuf, n1), "%s: '%s' lacks '%s'",
				   show(args), errbuf, n1);
	if (n2)
		cr_expect_not_null(strstr(errbuf, n2), "%s: '%s' lacks '%s'",
				   show(args), errbuf, n2);
}

#define USAGE_ERR(n1, n2, ...) usage_err_list(noenv, ARGS(__VA_ARGS__), n1, n2)
#define USAGE_ERR_ENV(envp, n1, n2, ...)                                       \
	usage_err_list(envp, ARGS(__VA_ARGS__), n1, n2)

/* A valid value for every non-boolean option, as text. */
static const char *sample_value(int id)
{
	switch (id) {
	case CFG_nnodes: return "2:4";
	case CFG_nproc_per_node: return "3";
	case CFG_rdzv_backend: return "c10d";
	case CFG_rdzv_endpoint: return "host.example:1234";
	case CFG_rdzv_id: return "job42";
	case CFG_rdzv_conf: return "join_timeout=60,read_timeout=7";
	case CFG_max_restarts: return "2";
	case CFG_monitor_interval: return "0.5";
	case CFG_start_method: return "fork";
	case CFG_role: return "trainer";
	case CFG_log_dir: return "/tmp/crun-logs";
	case CFG_redirects: return "3";
	case CFG_tee: return "0:1,1:2";
	case CFG_local_ranks_filter: return "0,2";
	case CFG_node_rank: return "1";
	case CFG_master_addr: return "10.0.0.1";
	case CFG_master_port: return "1234";
	case CFG_local_addr: return "node7";
	case CFG_shutdown_timeout: return "5";
	case CFG_signals_to_handle: return "SIGTERM,SIGUSR1";
	case CFG_store_max_key_size: return "1K";
	case CFG_store_max_value_size: return "2M";
	case CFG_store_max_keys: return "100";
	case CFG_store_max_memory: return "1G";
	case CFG_store_max_conns: return "10";
	case CFG_store_max_output: return "16M";
	case CFG_store_idle_timeout: return "20";
	case CFG_console_buffer: return "1M";
	case CFG_console: return "collapse";
	case CFG_console_window: return "0.5";
	case CFG_console_hold: return "1M";
	case CFG_config: return "job.ini";
	case CFG_config_max_value: return "2M";
	case CFG_config_max_expansion: return "8M";
	case CFG_config_max_bytes: return "2M";
	default: return "value";
	}
}

/* "nproc_per_node" -> "nproc-per-node" */
static void dash_name(const char *name, char *out, size_t len)
{
	size_t i;

	for (i = 0; name[i] && i + 1 < len; i++)
		out[i] = name[i] == '_' ? '-' : name[i];
	out[i] = '\0';
}

/* --config loads a job file, which this suite does not cover: only check
 * that the flag itself was taken. */
static void check_parse_rc(int id, int rc, const char *what)
{
	if (id == CFG_config)
		return;
	cr_expect_eq(rc, 0, "%s: %s (%s)", what, errbuf, crun_err_name(rc));
	cr_expect_eq(done, 0, "%s: done set", what);
}

/* --- every option, every spelling -------------------------------------- */

Test(cfg, every_option_both_spellings_both_forms)
{
	char name[64], a[160], what[200];

	cr_assert_gt(CFG_NOPTS, 30);
	for (int i = 0; i < CFG_NOPTS; i++) {
		const struct cfg_opt *o = &cfg_opts[i];

		cr_assert_eq(o->id, i, "table row %d has id %d", i, o->id);
		for (int dash = 0; dash < 2; dash++) {
			if (dash)
				dash_name(o->name, name, sizeof(name));
			else
				snprintf(name, sizeof(name), "%s", o->name);
			if (o->type == CFG_T_BOOL) {
				reset();
				snprintf(a, sizeof(a), "--%s", name);
				snprintf(what, sizeof(what), "%s", a);
				check_parse_rc(i, PARSE(noenv, a, "train.py"), what);
				expect_raw(i, "1", CRUN_SRC_CLI);
				continue;
			}
			/* --opt=value */
			reset();
			snprintf(a, sizeof(a), "--%s=%s", name, sample_value(i));
			snprintf(what, sizeof(what), "%s", a);
			check_parse_rc(i, PARSE(noenv, a, "train.py"), what);
			expect_raw(i, sample_value(i), CRUN_SRC_CLI);
			cr_expect_not_null(cfg.origin[i]);
			if (cfg.origin[i])
				cr_expect_not_null(strstr(cfg.origin[i], o->name),
						   "%s: origin '%s'", what, cfg.origin[i]);
			if (i != CFG_config) {
				cr_assert_eq(cfg.argc, 1, "%s", what);
				cr_expect_str_eq(cfg.argv[0], "train.py");
			}
			/* --opt value */
			reset();
			snprintf(a, sizeof(a), "--%s", name);
			snprintf(what, sizeof(what), "%s %s", a, sample_value(i));
			check_parse_rc(i, PARSE(noenv, a, sample_value(i), "train.py"), what);
			expect_raw(i, sample_value(i), CRUN_SRC_CLI);
			if (i != CFG_config) {
				cr_assert_eq(cfg.argc, 1, "%s", what);
				cr_expect_str_eq(cfg.argv[0], "train.py");
			}
		}
	}
}

Test(cfg, every_option_finalizes_to_typed_fields)
{
	RUN_OK(noenv, "--nnodes=2:4", "--nproc-per-node", "3", "--rdzv_backend=c10d",
	       "--rdzv-endpoint=[::1]:1234", "--rdzv_id=job42",
	       "--rdzv_conf=join_timeout=60, read_timeout = 7,keep_alive_max_attempt=4",
	       "--max_restarts=2", "--monitor-interval=0.5", "--start_method=fork",
	       "--role=trainer", "-m", "--run_path", "--log_dir=/tmp/crun-logs",
	       "-r3", "-t", "0:1,1:2", "--local-ranks-filter=0,2", "--node_rank=1",
	       "--master_addr=10.0.0.1", "--master_port=1234", "--local_addr=node7",
	       "--shutdown-timeout=5", "--signals_to_handle=SIGTERM,usr1,10",
	       "--no-agent-store", "--store_max_key_size=1K",
	       "--store-max-value-size=2M", "--store_max_keys=100",
	       "--store_max_memory=1g", "--store_max_conns=10", "--slurm",
	       "--print_config", "train.py", "a");
	cr_expect_eq(cfg.nnodes_min, 2);
	cr_expect_eq(cfg.nnodes_max, 4);
	cr_expect_eq(cfg.nproc_per_node, 3);
	cr_expect_str_eq(cfg.nproc_spec, "3");
	cr_expect_str_eq(cfg.rdzv_backend, "c10d");
	cr_expect_str_eq(cfg.rdzv_endpoint, "[::1]:1234");
	cr_expect_str_eq(cfg.rdzv_id, "job42");
	cr_expect_eq(cfg.rdzv.join_timeout, 60);
	cr_expect_eq(cfg.rdzv.read_timeout, 7);
	cr_expect_eq(cfg.rdzv.keep_alive_max_attempt, 4);
	cr_expect_eq(cfg.max_restarts, 2);
	cr_expect_eq(cfg.monitor_interval, 0.5);
	cr_expect_str_eq(cfg.start_method, "fork");
	cr_expect_str_eq(cfg.role, "trainer");
	cr_expect_eq(cfg.module, 1);
	cr_expect_eq(cfg.no_python, 0);
	cr_expect_eq(cfg.run_path, 1);
	cr_expect_str_eq(cfg.log_dir, "/tmp/crun-logs");
	cr_expect_eq(cfg_std_for(&cfg.redirects, 0), CRUN_STD_ALL);
	cr_expect_eq(cfg_std_for(&cfg.redirects, 5), CRUN_STD_ALL);
	cr_expect_eq(cfg_std_for(&cfg.tee, 0), CRUN_STD_OUT);
	cr_expect_eq(cfg_std_for(&cfg.tee, 1), CRUN_STD_ERR);
	cr_expect_eq(cfg_std_for(&cfg.tee, 2), CRUN_STD_NONE);
	cr_expect_eq(cfg.nfilter, 2);
	cr_expect_eq(cfg.node_rank, 1);
	cr_expect_str_eq(cfg.master_addr, "10.0.0.1");
	cr_expect_eq(cfg.master_port, 1234);
	cr_expect_str_eq(cfg.local_addr, "node7");
	cr_expect_eq(cfg.shutdown_timeout, 5);
	cr_assert_eq(cfg.nsignals, 3);
	cr_expect_eq(cfg.signals[0], SIGTERM);
	cr_expect_eq(cfg.signals[1], SIGUSR1);
	cr_expect_eq(cfg.signals[2], 10);
	cr_expect_eq(cfg.agent_store, 0);
	cr_expect_eq(cfg.store.max_key, 1024);
	cr_expect_eq(cfg.store.max_value, 2u << 20);
	cr_expect_eq(cfg.store.max_keys, 100);
	cr_expect_eq(cfg.store.max_memory, (size_t)1 << 30);
	cr_expect_eq(cfg.store.max_conns, 10);
	cr_expect_eq(cfg.slurm, 1);
	cr_expect_eq(cfg.print_config, 1);
	cr_assert_eq(cfg.argc, 2);
	cr_expect_str_eq(cfg.argv[0], "train.py");
	cr_expect_str_eq(cfg.argv[1], "a");
	cr_expect_null(cfg.argv[2]);
}

Test(cfg, defaults_match_torchrun)
{
	RUN_OK(noenv, "train.py");
	cr_expect_eq(cfg.nnodes_min, 1);
	cr_expect_eq(cfg.nnodes_max, 1);
	cr_expect_eq(cfg.nproc_per_node, 1);
	cr_expect_str_eq(cfg.rdzv_backend, "static");
	/* static with no endpoint meets at master_addr:master_port */
	cr_expect_str_eq(cfg.rdzv_endpoint, "127.0.0.1:29500");
	cr_expect_eq(cfg.src[CFG_rdzv_endpoint], CRUN_SRC_DERIVED);
	cr_expect_eq(cfg.max_restarts, 0);
	cr_expect_str_eq(cfg.start_method, "spawn");
	cr_expect_str_eq(cfg.role, "default");
	cr_expect_eq(cfg.module, 0);
	cr_expect_eq(cfg.no_python, 0);
	cr_expect_eq(cfg.standalone, 0);
	cr_expect_eq(cfg_std_for(&cfg.redirects, 0), 0);
	cr_expect_eq(cfg_std_for(&cfg.tee, 0), 0);
	cr_expect_eq(cfg.node_rank, 0);
	cr_expect_str_eq(cfg.master_addr, "127.0.0.1");
	cr_expect_eq(cfg.master_port, -1);
	cr_expect_eq(cfg.shutdown_timeout, 30);
	cr_assert_eq(cfg.nsignals, 4);
	cr_expect_eq(cfg.signals[0], SIGTERM);
	cr_expect_eq(cfg.signals[1], SIGINT);
	cr_expect_eq(cfg.signals[2], SIGHUP);
	cr_expect_eq(cfg.signals[3], SIGQUIT);
	cr_expect_eq(cfg.agent_store, 1);
	/* Unset: the static backend then waits join_timeout (torchrun's
	 * LaunchConfig injects 900; crun keeps one knob for the wait). */
	cr_expect_eq(cfg.rdzv.timeout, 0);
	cr_expect_eq(cfg.rdzv.join_timeout, 600);
	cr_expect_eq(cfg.rdzv.last_call_timeout, 30);
	cr_expect_eq(cfg.rdzv.is_host, -1);
	cr_expect_null(cfg.local_ranks_filter);
	cr_expect_eq(cfg.src[CFG_nnodes], CRUN_SRC_DEFAULT);
}

/* The option table's store defaults are the store's own (one set of limits). */
Test(cfg, store_limit_defaults_are_the_stores)
{
	struct crun_store_limits d;

	store_limits_default(&d);
	RUN_OK(noenv, "crun", "/bin/true");
	cr_assert_eq(cfg.store.max_key, d.max_key);
	cr_assert_eq(cfg.store.max_value, d.max_value);
	cr_assert_eq(cfg.store.max_keys, d.max_keys);
	cr_assert_eq(cfg.store.max_memory, d.max_memory);
	cr_assert_eq(cfg.store.max_conns, d.max_conns);
	cr_assert_eq(cfg.store.max_output, d.max_output);
	cr_assert_eq(cfg.store.idle_timeout, d.idle_timeout);
	cr_assert_eq(cfg_parse_size("64k", &d.max_key), 0);
	cr_assert_eq(d.max_key, 65536);
	cr_assert_neq(cfg_parse_size("0", &d.max_key), 0);
	cr_assert_neq(cfg_parse_size("5T", &d.max_key), 0);
}

Test(cfg, boolean_rejects_explicit_value)
{
	USAGE_ERR("standalone", "1", "--standalone=1", "train.py");
	USAGE_ERR("module", "yes", "--module=yes", "train.py");
}

Test(cfg, missing_value)
{
	USAGE_ERR("nnodes", NULL, "--nnodes");
	USAGE_ERR("redirects", NULL, "-r");
	USAGE_ERR("tee", NULL, "-t");
}

/* --- short options ------------------------------------------------------ */

Test(cfg, short_options)
{
	cr_assert_eq(PARSE(noenv, "-m", "-r", "3", "-t2", "pkg.mod"), 0, "%s", errbuf);
	expect_raw(CFG_module, "1", CRUN_SRC_CLI);
	expect_raw(CFG_redirects, "3", CRUN_SRC_CLI);
	expect_raw(CFG_tee, "2", CRUN_SRC_CLI);
	cr_assert_eq(cfg.argc, 1);
	cr_expect_str_eq(cfg.argv[0], "pkg.mod");

	reset();
	RUN_OK(noenv, "-r3", "-t", "0:1,1:3", "train.py");
	cr_expect_eq(cfg_std_for(&cfg.redirects, 7), 3);
	cr_expect_eq(cfg_std_for(&cfg.tee, 1), 3);

	reset();
	RUN_OK(noenv, "-r0:2,1:1", "train.py");
	cr_expect_eq(cfg_std_for(&cfg.redirects, 0), 2);
	cr_expect_eq(cfg_std_for(&cfg.redirects, 1), 1);
	cr_expect_eq(cfg_std_for(&cfg.redirects, 2), 0);
}

Test(cfg, short_option_errors)
{
	USAGE_ERR("-x", NULL, "-x", "train.py");
	USAGE_ERR("-mx", NULL, "-mx", "train.py");
	USAGE_ERR("redirects", "0:4", "-r0:4", "train.py");
}

/* --- abbreviations ------------------------------------------------------ */

Test(cfg, unique_prefixes)
{
	cr_assert_eq(PARSE(noenv, "--nproc", "4", "--nnod=2", "--mod", "--ro=x",
			   "--stand", "--max-re=5", "--node-r", "1", "--log_d=/tmp/l",
			   "--shut=3", "train.py"),
		     0, "%s", errbuf);
	expect_raw(CFG_nproc_per_node, "4", CRUN_SRC_CLI);
	expect_raw(CFG_nnodes, "2", CRUN_SRC_CLI);
	expect_raw(CFG_module, "1", CRUN_SRC_CLI);
	expect_raw(CFG_role, "x", CRUN_SRC_CLI);
	expect_raw(CFG_standalone, "1", CRUN_SRC_CLI);
	expect_raw(CFG_max_restarts, "5", CRUN_SRC_CLI);
	expect_raw(CFG_node_rank, "1", CRUN_SRC_CLI);
	expect_raw(CFG_log_dir, "/tmp/l", CRUN_SRC_CLI);
	expect_raw(CFG_shutdown_timeout, "3", CRUN_SRC_CLI);
	/* A dash-spelled prefix of an underscore name. */
	reset();
	cr_assert_eq(PARSE(noenv, "--nproc-per=2", "train.py"), 0, "%s", errbuf);
	expect_raw(CFG_nproc_per_node, "2", CRUN_SRC_CLI);
}

Test(cfg, ambiguous_prefixes)
{
	USAGE_ERR("ambiguous", "--rdzv", "--rdzv=x", "train.py");
	USAGE_ERR("ambiguous", "--no", "--no", "train.py");
	USAGE_ERR("ambiguous", "--master", "--master", "x", "train.py");
	USAGE_ERR("ambiguous", "--local", "--local=1", "train.py");
	USAGE_ERR("ambiguous", "--store-max", "--store-max=1", "train.py");
	USAGE_ERR("ambiguous", "--m", "--m", "train.py");
}

Test(cfg, unknown_flags)
{
	USAGE_ERR("unrecognized", "--bogus", "--bogus", "train.py");
	USAGE_ERR("unrecognized", "--bogus", "--bogus=3", "train.py");
	USAGE_ERR("unrecognized", "--nnodesx", "--nnodesx=3", "train.py");
	USAGE_ERR("unrecognized", "-q", "-q", "train.py");
}

/* --- entrypoint --------------------------------------------------------- */

Test(cfg, entrypoint_args_verbatim)
{
	static const char *const want[] = {"train.py", "--nnodes=9", "-m", "--help",
					   "--", "-r3", "", "--version", NULL};

	cr_assert_eq(PARSE(noenv, "-r", "1", "train.py", "--nnodes=9", "-m", "--help",
			   "--", "-r3", "", "--version"),
		     0, "%s", errbuf);
	cr_expect_eq(done, 0, "--help after the script is the script's");
	cr_expect_null(cfg.raw[CFG_nnodes]);
	cr_expect_null(cfg.raw[CFG_module]);
	expect_raw(CFG_redirects, "1", CRUN_SRC_CLI);
	cr_assert_eq(cfg.argc, 8);
	for (int i = 0; want[i]; i++)
		cr_expect_str_eq(cfg.argv[i], want[i], "argv[%d]", i);
	cr_expect_null(cfg.argv[8]);
}

Test(cfg, double_dash_separator)
{
	cr_assert_eq(PARSE(noenv, "--nnodes", "1", "--", "train.py", "--nnodes", "2"), 0,
		     "%s", errbuf);
	expect_raw(CFG_nnodes, "1", CRUN_SRC_CLI);
	cr_assert_eq(cfg.argc, 3);
	cr_expect_str_eq(cfg.argv[0], "train.py");
	cr_expect_str_eq(cfg.argv[1], "--nnodes");
	cr_expect_str_eq(cfg.argv[2], "2");

	/* After --, even a dash-led name is the script. */
	reset();
	cr_assert_eq(PARSE(noenv, "--", "--weird", "-m"), 0, "%s", errbuf);
	cr_assert_eq(cfg.argc, 2);
	cr_expect_str_eq(cfg.argv[0], "--weird");
	cr_expect_str_eq(cfg.argv[1], "-m");
	cr_expect_null(cfg.raw[CFG_module]);

	/* A lone "-" is a positional (a script on stdin). */
	reset();
	cr_assert_eq(PARSE(noenv, "-", "x"), 0, "%s", errbuf);
	cr_assert_eq(cfg.argc, 2);
	cr_expect_str_eq(cfg.argv[0], "-");
}

Test(cfg, missing_entrypoint)
{
	USAGE_ERR("training_script", NULL, "--nnodes=1");
	USAGE_ERR("training_script", NULL, "--nnodes=1", "--");
}

/* --- environment -------------------------------------------------------- */

/* "PET_" + upper(name) */
static void env_var(const struct cfg_opt *o, char *buf, size_t len)
{
	size_t n = (size_t)snprintf(buf, len, "%s_", o->env == CFG_ENV_CRUN ? "CRUN" : "PET");

	for (size_t i = 0; o->name[i] && n + 1 < len; i++)
		buf[n++] = (char)(o->name[i] >= 'a' && o->name[i] <= 'z'
					  ? o->name[i] - 'a' + 'A' : o->name[i]);
	buf[n] = '\0';
}

Test(cfg, every_env_fallback)
{
	char var[80], assign[200], *envp[3];

	for (int i = 0; i < CFG_NOPTS; i++) {
		const struct cfg_opt *o = &cfg_opts[i];
		const char *v = o->type == CFG_T_BOOL ? "1" : sample_value(i);

		if (o->env == CFG_ENV_NONE)
			continue;
		reset();
		env_var(o, var, sizeof(var));
		snprintf(assign, sizeof(assign), "%s=%s", var, v);
		envp[0] = assign;
		envp[1] = NULL;
		check_parse_rc(i, PARSE(envp, "train.py"), assign);
		expect_raw(i, v, CRUN_SRC_ENV);
		if (cfg.origin[i])
			cr_expect_str_eq(cfg.origin[i], var);
	}
}

Test(cfg, env_prefix_belongs_to_its_options)
{
	char **envp = ENV("CRUN_NNODES=4", "PET_NO_AGENT_STORE=1", "PET_PRINT_CONFIG=1",
			"CRUN_PRINT_CONFIG=1", "PET_NNODES_X=5", "XPET_NNODES=6",
			"PET_NNODE=7");

	RUN_OK(envp, "train.py");
	cr_expect_eq(cfg.nnodes_max, 1);
	cr_expect_eq(cfg.agent_store, 1);
	cr_expect_eq(cfg.print_config, 0);
}

Test(cfg, cli_beats_env)
{
	char **envp = ENV("PET_NNODES=4", "PET_NPROC_PER_NODE=8", "PET_RDZV_BACKEND=c10d");

	RUN_OK(envp, "--nnodes", "2", "train.py");
	cr_expect_eq(cfg.nnodes_max, 2);
	cr_expect_eq(cfg.src[CFG_nnodes], CRUN_SRC_CLI);
	cr_expect_eq(cfg.nproc_per_node, 8);
	cr_expect_eq(cfg.src[CFG_nproc_per_node], CRUN_SRC_ENV);
}

Test(cfg, empty_env_value_ignored)
{
	char **envp = ENV("PET_NNODES=", "PET_ROLE=", "PET_MAX_RESTARTS=");

	RUN_OK(envp, "train.py");
	cr_expect_eq(cfg.nnodes_max, 1);
	cr_expect_eq(cfg.src[CFG_nnodes], CRUN_SRC_DEFAULT);
	cr_expect_str_eq(cfg.role, "default");
	cr_expect_eq(cfg.max_restarts, 0);
}

Test(cfg, env_flags_are_integers)
{
	char **on = ENV("PET_STANDALONE=1", "PET_NO_PYTHON=1");
	char **off = ENV("PET_STANDALONE=0", "PET_MODULE=0");
	char **junk = ENV("PET_STANDALONE=maybe");

	RUN_OK(on, "train");
	cr_expect_eq(cfg.standalone, 1);
	cr_expect_eq(cfg.no_python, 1);
	reset();
	RUN_OK(off, "train.py");
	cr_expect_eq(cfg.standalone, 0);
	cr_expect_eq(cfg.module, 0);
	USAGE_ERR_ENV(junk, "PET_STANDALONE", "maybe", "train.py");
}

Test(cfg, env_errors_name_the_variable)
{
	char **nproc = ENV("PET_NPROC_PER_NODE=zero");
	char **nnodes = ENV("PET_NNODES=0");
	char **size = ENV("CRUN_STORE_MAX_KEYS=lots");

	USAGE_ERR_ENV(nproc, "PET_NPROC_PER_NODE", "zero", "train.py");
	USAGE_ERR_ENV(nnodes, "PET_NNODES", "'0'", "train.py");
	USAGE_ERR_ENV(size, "CRUN_STORE_MAX_KEYS", "lots", "train.py");
}

Test(cfg, crun_env_for_crun_options)
{
	char **envp = ENV("CRUN_NO_AGENT_STORE=1", "CRUN_STORE_MAX_KEY_SIZE=2K",
			"CRUN_STORE_MAX_CONNS=7", "CRUN_SLURM=0");

	RUN_OK(envp, "train.py");
	cr_expect_eq(cfg.agent_store, 0);
	cr_expect_eq(cfg.store.max_key, 2048);
	cr_expect_eq(cfg.store.max_conns, 7);
	cr_expect_eq(cfg.slurm, 0);
	cr_expect_eq(cfg.src[CFG_slurm], CRUN_SRC_ENV);
}

/* --- precedence ---------------------------------------------------------- */

Test(cfg, cfg_set_precedence)
{
	int id = CFG_role;

	cr_expect_eq(cfg_set(&cfg, id, "file", CRUN_SRC_FILE, "job.ini:3"), 1);
	cr_expect_eq(cfg_set(&cfg, id, "default", CRUN_SRC_DEFAULT, "role"), 0);
	cr_expect_eq(cfg_set(&cfg, id, "derived", CRUN_SRC_DERIVED, "x"), 0);
	expect_raw(id, "file", CRUN_SRC_FILE);
	cr_expect_str_eq(cfg.origin[id], "job.ini:3");
	cr_expect_eq(cfg_set(&cfg, id, "env", CRUN_SRC_ENV, "PET_ROLE"), 1);
	cr_expect_eq(cfg_set(&cfg, id, "file2", CRUN_SRC_FILE, "job.ini:9"), 0);
	expect_raw(id, "env", CRUN_SRC_ENV);
	cr_expect_str_eq(cfg.origin[id], "PET_ROLE");
	cr_expect_eq(cfg_set(&cfg, id, "cli", CRUN_SRC_CLI, "argument --role"), 1);
	cr_expect_eq(cfg_set(&cfg, id, "env2", CRUN_SRC_ENV, "PET_ROLE"), 0);
	expect_raw(id, "cli", CRUN_SRC_CLI);
	/* Within one source the later value wins, as with a repeated flag. */
	cr_expect_eq(cfg_set(&cfg, id, "cli2", CRUN_SRC_CLI, "argument --role"), 1);
	expect_raw(id, "cli2", CRUN_SRC_CLI);
	cr_expect_str_eq(cfg.origin[id], "argument --role");

	/* File values lose to the environment and the command line at finalize. */
	reset();
	cfg_set(&cfg, CFG_nnodes, "3", CRUN_SRC_FILE, "job.ini:1");
	cfg_set(&cfg, CFG_rdzv_backend, "c10d", CRUN_SRC_FILE, "job.ini:2");
	cfg_set(&cfg, CFG_max_restarts, "4", CRUN_SRC_FILE, "job.ini:3");
	{
		char **envp = ENV("PET_NNODES=2");

		RUN_OK(envp, "--max_restarts=1", "train.py");
	}
	cr_expect_eq(cfg.nnodes_max, 2);
	cr_expect_eq(cfg.max_restarts, 1);
	cr_expect_str_eq(cfg.rdzv_backend, "c10d");
	cr_expect_eq(cfg.src[CFG_rdzv_backend], CRUN_SRC_FILE);
}

Test(cfg, repeated_flag_last_wins)
{
	RUN_OK(noenv, "--nnodes=2", "--nnodes", "3", "--rdzv_backend=c10d", "train.py");
	cr_expect_eq(cfg.nnodes_max, 3);
}

Test(cfg, static_endpoint_derived_from_master)
{
	RUN_OK(noenv, "--master_addr=10.1.2.3", "--master_port=1234", "train.py");
	cr_expect_str_eq(cfg.rdzv_endpoint, "10.1.2.3:1234");
	cr_expect_eq(cfg.src[CFG_rdzv_endpoint], CRUN_SRC_DERIVED);
	reset();
	RUN_OK(noenv, "--master_addr=::1", "train.py");
	cr_expect_str_eq(cfg.rdzv_endpoint, "[::1]:29500");
	reset();
	RUN_OK(noenv, "--rdzv_endpoint=h:5", "--master_port=1234", "train.py");
	cr_expect_str_eq(cfg.rdzv_endpoint, "h:5");
	cr_expect_eq(cfg.src[CFG_rdzv_endpoint], CRUN_SRC_CLI);
}

Test(cfg, standalone)
{
	RUN_OK(noenv, "--standalone", "train.py");
	cr_expect_eq(cfg.standalone, 1);
	cr_expect_str_eq(cfg.rdzv_backend, "c10d");
	cr_expect_str_eq(cfg.rdzv_endpoint, "localhost:0");
	cr_expect_null(cfg.rdzv_id, "a fresh id is made by the agent");
	cr_expect_eq(cfg.nnodes_max, 1);
}

/* torchrun: "--standalone" overrides explicit --rdzv_* flags. */
Test(cfg, standalone_overrides_rdzv_flags)
{
	RUN_OK(noenv, "--standalone", "--rdzv_backend=static",
	       "--rdzv_endpoint=other:9", "--rdzv_id=fixed", "train.py");
	cr_expect_str_eq(cfg.rdzv_backend, "c10d");
	cr_expect_str_eq(cfg.rdzv_endpoint, "localhost:0");
	cr_expect_null(cfg.rdzv_id);
}

/* --- help and version ---------------------------------------------------- */

/* Run PARSE with stdout captured; returns the text (caller frees). */
static char *capture_parse(const char *const *args, int *rc)
{
	FILE *tmp = tmpfile();
	int saved;
	long n;
	char *text;

	cr_assert_not_null(tmp);
	fflush(stdout);
	saved = dup(1);
	dup2(fileno(tmp), 1);
	*rc = parse_list(noenv, args);
	fflush(stdout);
	dup2(saved, 1);
	close(saved);
	n = lseek(fileno(tmp), 0, SEEK_END);
	cr_assert_geq(n, 0);
	text = calloc(1, (size_t)n + 1);
	lseek(fileno(tmp), 0, SEEK_SET);
	cr_assert_eq(read(fileno(tmp), text, (size_t)n), n);
	fclose(tmp);
	return text;
}

Test(cfg, help_sets_done)
{
	static const char *const forms[][3] = {{"--help", NULL, NULL},
					       {"-h", NULL, NULL},
					       {"--nnodes=2", "--help", NULL}};

	for (size_t k = 0; k < sizeof(forms) / sizeof(forms[0]); k++) {
		int rc;
		char *out;

		reset();
		out = capture_parse(forms[k], &rc);
		cr_expect_eq(rc, 0);
		cr_expect_eq(done, 1, "%s", show(forms[k]));
		cr_expect_not_null(strstr(out, "usage: crun"), "help text: %s", out);
		/* every option with help text is listed */
		for (int i = 0; i < CFG_NOPTS; i++) {
			char needle[80];

			if (cfg_opts[i].help == NULL)
				continue;
			snprintf(needle, sizeof(needle), "--%s", cfg_opts[i].name);
			cr_expect_not_null(strstr(out, needle), "help lacks %s", needle);
		}
		free(out);
	}
}

Test(cfg, version_sets_done)
{
	int rc;
	char *out = capture_parse(ARGS("--version"), &rc);

	cr_expect_eq(rc, 0);
	cr_expect_eq(done, 1);
	cr_expect_str_eq(out, "crun " CRUN_VERSION "\n");
	free(out);
}

/* --- usage errors --------------------------------------------------------- */

Test(cfg, bad_nnodes)
{
	USAGE_ERR("nnodes", "'0'", "--nnodes=0", "train.py");
	USAGE_ERR("nnodes", "3:2", "--nnodes=3:2", "--rdzv_backend=c10d", "train.py");
	USAGE_ERR("nnodes", "1:2:3", "--nnodes=1:2:3", "--rdzv_backend=c10d", "train.py");
	USAGE_ERR("nnodes", "0:2", "--nnodes=0:2", "--rdzv_backend=c10d", "train.py");
	USAGE_ERR("nnodes", "x", "--nnodes", "x", "train.py");
	USAGE_ERR("nnodes", "''", "--nnodes=", "train.py");
	USAGE_ERR("nnodes", "-1", "--nnodes=-1", "train.py");
	/* The static backend needs a fixed size. */
	USAGE_ERR("nnodes", "1:2", "--nnodes=1:2", "train.py");
}

Test(cfg, bad_nproc)
{
	USAGE_ERR("nproc_per_node", "'x'", "--nproc_per_node=x", "train.py");
	USAGE_ERR("nproc_per_node", "'0'", "--nproc-per-node=0", "train.py");
	USAGE_ERR("nproc_per_node", "-2", "--nproc_per_node", "-2", "train.py");
	USAGE_ERR("nproc_per_node", "1025", "--nproc_per_node=1025", "train.py");
	USAGE_ERR("nproc_per_node", "4x", "--nproc_per_node=4x", "train.py");
}

Test(cfg, bad_redirect_maps)
{
	static const char *const bad[] = {"0:4", "x", "0:1,", ":1", "4", "0:", "0:1:2",
					  "0;1", "1,2", ""};
	char a[64], want[64];

	for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
		snprintf(a, sizeof(a), "--redirects=%s", bad[k]);
		snprintf(want, sizeof(want), "'%s'", bad[k]);
		usage_err_list(noenv, ARGS(a, "train.py"), "redirects", want);
		snprintf(a, sizeof(a), "--tee=%s", bad[k]);
		usage_err_list(noenv, ARGS(a, "train.py"), "tee", want);
	}
}

Test(cfg, bad_rdzv_conf)
{
	USAGE_ERR("rdzv_conf", "join_timeout", "--rdzv_conf=join_timeout=", "train.py");
	USAGE_ERR("rdzv_conf", "abc", "--rdzv_conf", "join_timeout=abc", "train.py");
	USAGE_ERR("rdzv_conf", "read_timeout", "--rdzv_conf=read_timeout=0", "train.py");
	USAGE_ERR("rdzv_conf", "=5", "--rdzv_conf==5", "train.py");
	USAGE_ERR("rdzv_conf", "nokey", "--rdzv_conf=nokey", "train.py");
	USAGE_ERR("rdzv_conf", "file", "--rdzv_conf=store_type=file", "train.py");
	{
		char **envp = ENV("PET_RDZV_CONF=last_call_timeout=x");

		USAGE_ERR_ENV(envp, "PET_RDZV_CONF", "last_call_timeout", "train.py");
	}
}

/* The etcd client's bounds: defaults, values, and values out of range. */
Test(cfg, rdzv_conf_etcd_limits)
{
	RUN_OK(noenv, "train.py");
	cr_expect_eq(cfg.rdzv.etcd_turn_bytes, 256u << 10);
	cr_expect_eq(cfg.rdzv.etcd_turn_messages, 128);
	cr_expect_eq(cfg.rdzv.etcd_max_message, 8u << 20);
	cr_expect_eq(cfg.rdzv.etcd_max_json_items, 65536);
	cr_expect_eq(cfg.rdzv.etcd_backoff, 0.1);
	cr_expect_eq(cfg.rdzv.etcd_backoff_max, 2);
	reset();
	RUN_OK(noenv,
	       "--rdzv_conf=etcd_turn_bytes=64K,etcd_turn_messages=7,"
	       "etcd_max_message=1M,etcd_max_json_items=99,"
	       "etcd_backoff=0.25,etcd_backoff_max=5",
	       "train.py");
	cr_expect_eq(cfg.rdzv.etcd_turn_bytes, 64u << 10);
	cr_expect_eq(cfg.rdzv.etcd_turn_messages, 7);
	cr_expect_eq(cfg.rdzv.etcd_max_message, 1u << 20);
	cr_expect_eq(cfg.rdzv.etcd_max_json_items, 99);
	cr_expect_eq(cfg.rdzv.etcd_backoff, 0.25);
	cr_expect_eq(cfg.rdzv.etcd_backoff_max, 5);
	USAGE_ERR("etcd_backoff", "range", "--rdzv_conf=etcd_backoff=61", "train.py");
	USAGE_ERR("etcd_backoff", "'0'", "--rdzv_conf=etcd_backoff=0", "train.py");
	USAGE_ERR("etcd_backoff_max", "x", "--rdzv_conf=etcd_backoff_max=x", "train.py");
	USAGE_ERR("etcd_turn_bytes", "range", "--rdzv_conf=etcd_turn_bytes=1", "train.py");
	USAGE_ERR("etcd_turn_bytes", "2G", "--rdzv_conf=etcd_turn_bytes=2G", "train.py");
	USAGE_ERR("etcd_max_message", "x", "--rdzv_conf=etcd_max_message=x", "train.py");
	USAGE_ERR("etcd_max_message", "0", "--rdzv_conf=etcd_max_message=0", "train.py");
	USAGE_ERR("etcd_turn_messages", "0", "--rdzv_conf=etcd_turn_messages=0", "train.py");
	USAGE_ERR("etcd_max_json_items", "-1", "--rdzv_conf=etcd_max_json_items=-1",
		  "train.py");
	USAGE_ERR("etcd_max_json_items", "1e9", "--rdzv_conf=etcd_max_json_items=1e9",
		  "train.py");
}

Test(cfg, bad_rdzv_endpoint)
{
	USAGE_ERR("rdzv_endpoint", "host:99999", "--rdzv_backend=c10d",
		  "--rdzv_endpoint=host:99999", "train.py");
	USAGE_ERR("rdzv_endpoint", "host:-1", "--rdzv_backend=c10d",
		  "--rdzv_endpoint=host:-1", "train.py");
	USAGE_ERR("rdzv_endpoint", "host:x", "--rdzv_backend=c10d",
		  "--rdzv_endpoint=host:x", "train.py");
	USAGE_ERR("rdzv_endpoint", "[::1", "--rdzv_backend=c10d",
		  "--rdzv_endpoint=[::1", "train.py");
	USAGE_ERR("rdzv_endpoint", "a b", "--rdzv_backend=c10d",
		  "--rdzv_endpoint=a b:1", "train.py");
	USAGE_ERR("master_port", "65536", "--master_port=65536", "train.py");
}

Test(cfg, bad_signals)
{
	USAGE_ERR("signals_to_handle", "SIGKILL", "--signals_to_handle=SIGKILL", "train.py");
	USAGE_ERR("signals_to_handle", "SIGTERM,junk", "--signals-to-handle=SIGTERM,junk",
		  "train.py");
	USAGE_ERR("signals_to_handle", "SIGSTOP", "--signals_to_handle=SIGSTOP", "train.py");
	USAGE_ERR("signals_to_handle", "'9'", "--signals_to_handle=9", "train.py");
	USAGE_ERR("signals_to_handle", "''", "--signals_to_handle=", "train.py");
}

Test(cfg, bad_combinations)
{
	USAGE_ERR("module", "no_python", "-m", "--no_python", "train.py");
	USAGE_ERR("module", "no_python", "--no-python", "--module", "train.py");
	USAGE_ERR("nnodes", "'2'", "--standalone", "--nnodes=2", "train.py");
	USAGE_ERR("node_rank", "'2'", "--nnodes=2", "--node_rank=2", "train.py");
}

#define LONG128                                                                \
	"rrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrr"     \
	"rrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrr"

Test(cfg, bad_other_values)
{
	USAGE_ERR("max_restarts", "-1", "--max_restarts=-1", "train.py");
	USAGE_ERR("monitor_interval", "'0'", "--monitor_interval=0", "train.py");
	USAGE_ERR("start_method", "thread", "--start_method=thread", "train.py");
	USAGE_ERR("rdzv_backend", "zookeeper", "--rdzv_backend=zookeeper", "train.py");
	USAGE_ERR("shutdown_timeout", "-1", "--shutdown_timeout=-1", "train.py");
	USAGE_ERR("local_ranks_filter", "a", "--local_ranks_filter=a", "train.py");
	USAGE_ERR("store_max_key_size", "'0'", "--store_max_key_size=0", "train.py");
	USAGE_ERR("store_max_memory", "1T", "--store_max_memory=1T", "train.py");
	USAGE_ERR("role", "longer than 127 bytes",
		  "--role=" LONG128, "train.py");
	USAGE_ERR("node_rank", "x", "--node_rank=x", "train.py");
}

/*
 * The job's keys are named after --rdzv_id: an id of RDZV_ID_MAX bytes is
 * taken whole, one byte more is refused (never cut, which let two jobs
 * share keys), from the command line and the environment alike.
 */
Test(cfg, rdzv_id_at_most_rdzv_id_max)
{
	char flag[RDZV_ID_MAX + 32], env[RDZV_ID_MAX + 32], want[64];
	char id[RDZV_ID_MAX + 2];

	memset(id, 'j', RDZV_ID_MAX);
	id[RDZV_ID_MAX] = '\0';
	snprintf(flag, sizeof(flag), "--rdzv_id=%s", id);
	RUN_OK(noenv, "--rdzv_backend=c10d", "--rdzv_endpoint=h:29400", flag,
	       "train.py");
	cr_expect_str_eq(cfg.rdzv_id, id);
	cr_expect_eq(strlen(cfg.rdzv_id), RDZV_ID_MAX);

	id[RDZV_ID_MAX] = 'k';
	id[RDZV_ID_MAX + 1] = '\0';
	snprintf(flag, sizeof(flag), "--rdzv_id=%s", id);
	snprintf(want, sizeof(want), "(%d bytes): at most %d bytes",
		 RDZV_ID_MAX + 1, RDZV_ID_MAX);
	USAGE_ERR("argument --rdzv_id: invalid value 'jjj", want,
		  "--rdzv_backend=c10d", "--rdzv_endpoint=h:29400", flag,
		  "train.py");
	cr_expect_null(strstr(errbuf, id), "the whole id echoed: %s", errbuf);
	snprintf(env, sizeof(env), "PET_RDZV_ID=%s", id);
	USAGE_ERR_ENV(ENV(env), "PET_RDZV_ID: invalid value", want,
		      "--rdzv_backend=etcd", "--rdzv_endpoint=h:2379",
		      "train.py");
	/* --help states the bound */
	snprintf(want, sizeof(want), "at most %d bytes", RDZV_ID_MAX);
	cr_expect_not_null(strstr(cfg_opts[CFG_rdzv_id].help, want), "%s",
			   cfg_opts[CFG_rdzv_id].help);
}

/* --- nproc resolution ----------------------------------------------------- */

Test(cfg, nproc_cpu)
{
	RUN_OK(noenv, "--nproc_per_node=cpu", "train.py");
	cr_expect_eq(cfg.nproc_per_node, (int)sysconf(_SC_NPROCESSORS_ONLN));
	cr_expect_str_eq(cfg.nproc_spec, "cpu");
}

Test(cfg, gpu_count_from_proc)
{
	cr_expect_eq(cfg_gpu_count(), 0, "no directory: no GPUs");
	make_gpus(0);
	cr_expect_eq(cfg_gpu_count(), 0);
	make_gpus(3);
	cr_expect_eq(cfg_gpu_count(), 3);
}

Test(cfg, gpu_count_honours_cuda_visible_devices)
{
	make_gpus(2);
	setenv("CUDA_VISIBLE_DEVICES", "1,0", 1);
	cr_expect_eq(cfg_gpu_count(), 2);
	setenv("CUDA_VISIBLE_DEVICES", "1", 1);
	cr_expect_eq(cfg_gpu_count(), 1);
	setenv("CUDA_VISIBLE_DEVICES", "0,7", 1);
	cr_expect_eq(cfg_gpu_count(), 1, "stops at the first invalid entry");
	setenv("CUDA_VISIBLE_DEVICES", "7,0", 1);
	cr_expect_eq(cfg_gpu_count(), 0);
	setenv("CUDA_VISIBLE_DEVICES", "", 1);
	cr_expect_eq(cfg_gpu_count(), 0);
	setenv("CUDA_VISIBLE_DEVICES", "-1", 1);
	cr_expect_eq(cfg_gpu_count(), 0);
	setenv("CUDA_VISIBLE_DEVICES",
	       "GPU-8932f937-d72c-4106-c12f-20bd9faed9f6,GPU-0c5a12ab-2f3e-4b2d-9a7c-111111111111",
	       1);
	cr_expect_eq(cfg_gpu_count(), 2);
	setenv("CUDA_VISIBLE_DEVICES", "MIG-GPU-8932f937/1/0", 1);
	cr_expect_eq(cfg_gpu_count(), 1);
}

Test(cfg, nproc_gpu)
{
	make_gpus(2);
	RUN_OK(noenv, "--nproc_per_node=gpu", "train.py");
	cr_expect_eq(cfg.nproc_per_node, 2);
	reset();
	setenv("CUDA_VISIBLE_DEVICES", "1", 1);
	RUN_OK(noenv, "--nproc_per_node=gpu", "train.py");
	cr_expect_eq(cfg.nproc_per_node, 1);
}

Test(cfg, nproc_gpu_without_gpu_is_an_error)
{
	USAGE_ERR("nproc_per_node", "gpu", "--nproc_per_node=gpu", "train.py");
	make_gpus(2);
	setenv("CUDA_VISIBLE_DEVICES", "", 1);
	USAGE_ERR("nproc_per_node", "gpu", "--nproc_per_node=gpu", "train.py");
}

Test(cfg, nproc_auto)
{
	RUN_OK(noenv, "--nproc_per_node=auto", "train.py");
	cr_expect_eq(cfg.nproc_per_node, (int)sysconf(_SC_NPROCESSORS_ONLN));
	reset();
	make_gpus(2);
	RUN_OK(noenv, "--nproc_per_node=auto", "train.py");
	cr_expect_eq(cfg.nproc_per_node, 2);
}

/* --- helpers ------------------------------------------------------------- */

Test(cfg, parse_std)
{
	struct crun_std_spec s;

	cr_assert_eq(cfg_parse_std("0", &s), 0);
	cr_expect_eq(cfg_std_for(&s, 0), 0);
	for (int v = 0; v <= 3; v++) {
		char buf[16];

		snprintf(buf, sizeof(buf), "%d", v);
		cr_assert_eq(cfg_parse_std(buf, &s), 0);
		cr_expect_eq(s.nmap, 0);
		cr_expect_eq(cfg_std_for(&s, 0), v);
		cr_expect_eq(cfg_std_for(&s, 100), v);
	}
	cr_assert_eq(cfg_parse_std("0:1,1:2,3:3", &s), 0);
	cr_expect_eq(s.nmap, 3);
	cr_expect_eq(cfg_std_for(&s, 0), CRUN_STD_OUT);
	cr_expect_eq(cfg_std_for(&s, 1), CRUN_STD_ERR);
	cr_expect_eq(cfg_std_for(&s, 2), CRUN_STD_NONE, "ranks not named get 0");
	cr_expect_eq(cfg_std_for(&s, 3), CRUN_STD_ALL);
	cr_assert_eq(cfg_parse_std("12:3", &s), 0);
	cr_expect_eq(cfg_std_for(&s, 12), 3);
	cr_expect_eq(cfg_std_for(&s, 1), 0);
	/* A repeated rank: the last one wins, as in a Python dict. */
	cr_assert_eq(cfg_parse_std("0:1,0:2", &s), 0);
	cr_expect_eq(cfg_std_for(&s, 0), 2);

	static const char *const bad[] = {"0:4", "x", "0:1,", ":1", "4", "-1", "",
					  "0:", "0:12", "1024:1", "0:1,,1:1", " 1"};
	for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++)
		cr_expect_eq(cfg_parse_std(bad[k], &s), CRUN_EUSAGE, "'%s' accepted",
			     bad[k]);
}

Test(cfg, parse_signals)
{
	int sigs[8], n = -1;

	cr_assert_eq(cfg_parse_signals("SIGTERM,SIGINT,SIGHUP,SIGQUIT", sigs, 8, &n), 0);
	cr_assert_eq(n, 4);
	cr_expect_eq(sigs[0], SIGTERM);
	cr_expect_eq(sigs[3], SIGQUIT);
	cr_assert_eq(cfg_parse_signals(" usr1 , SIGUSR2,term,15", sigs, 8, &n), 0);
	cr_assert_eq(n, 4);
	cr_expect_eq(sigs[0], SIGUSR1);
	cr_expect_eq(sigs[1], SIGUSR2);
	cr_expect_eq(sigs[2], SIGTERM);
	cr_expect_eq(sigs[3], 15);

	static const char *const bad[] = {"SIGKILL", "KILL", "9", "SIGSTOP", "19",
					  "SIGCHLD", "junk", "SIGTERM,junk", "",
					  ",", "0", "65", "SIGTERM, ,SIGINT"};
	for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++)
		cr_expect_eq(cfg_parse_signals(bad[k], sigs, 8, &n), CRUN_EUSAGE,
			     "'%s' accepted", bad[k]);
	cr_expect_eq(cfg_parse_signals("TERM,INT,HUP", sigs, 2, &n), CRUN_EUSAGE,
		     "more than max");
}

Test(cfg, signame)
{
	cr_expect_str_eq(cfg_signame(SIGTERM), "SIGTERM");
	cr_expect_str_eq(cfg_signame(SIGSEGV), "SIGSEGV");
	cr_expect_str_eq(cfg_signame(SIGKILL), "SIGKILL");
	cr_expect_str_eq(cfg_signame(70), "SIG70");
}

static void endpoint_ok(const char *ep, const char *host, int port)
{
	char h[64] = "";
	int p = -2;

	cr_expect_eq(cfg_split_endpoint(ep, h, sizeof(h), &p), 0, "'%s' rejected", ep);
	cr_expect_str_eq(h, host, "'%s'", ep);
	cr_expect_eq(p, port, "'%s' port %d", ep, p);
}

Test(cfg, split_endpoint)
{
	char h[64];
	int p;

	endpoint_ok("localhost", "localhost", -1);
	endpoint_ok("localhost:29400", "localhost", 29400);
	endpoint_ok("node-1.example.com:0", "node-1.example.com", 0);
	endpoint_ok("10.0.0.1:65535", "10.0.0.1", 65535);
	endpoint_ok("[::1]:29400", "::1", 29400);
	endpoint_ok("[::1]", "::1", -1);
	endpoint_ok("[fe80::1%eth0]:80", "fe80::1%eth0", 80);
	endpoint_ok("::1", "::1", -1);
	endpoint_ok("2001:db8::7", "2001:db8::7", -1);

	static const char *const bad[] = {"", ":29400", "host:", "host:65536", "host:-1",
					  "host:x", "[::1", "[::1]x", "[::1]:", "[]:1",
					  "a b", "host/x:1"};
	for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++)
		cr_expect_eq(cfg_split_endpoint(bad[k], h, sizeof(h), &p), CRUN_EUSAGE,
			     "'%s' accepted", bad[k]);
	/* Host longer than the caller's buffer. */
	cr_expect_eq(cfg_split_endpoint("abcdefgh:1", h, 8, &p), CRUN_EUSAGE);
	cr_expect_eq(cfg_split_endpoint("abcdefg:1", h, 8, &p), 0);
}

static void conf_init(struct crun_rdzv_conf *c)
{
	memset(c, 0, sizeof(*c));
	c->join_timeout = c->last_call_timeout = c->close_timeout = -1;
	c->read_timeout = c->heartbeat_timeout = c->keep_alive_interval = -1;
	c->keep_alive_max_attempt = -1;
	c->timeout = -1;
	c->is_host = -1;
}

static void conf_free(struct crun_rdzv_conf *c)
{
	free(c->store_type);
	free(c->local_addr);
	free(c->unknown);
	c->store_type = c->local_addr = c->unknown = NULL;
}

Test(cfg, parse_rdzv_conf)
{
	struct crun_rdzv_conf c;
	char e[512] = "";

	conf_init(&c);
	cr_assert_eq(cfg_parse_rdzv_conf(" join_timeout = 10 ,last_call_timeout=1.5,"
					 "close_timeout=3,read_timeout=4,heartbeat_timeout=5,"
					 "keep_alive_interval=0.25,keep_alive_max_attempt=6,"
					 "timeout=7,is_host=yes,store_type=tcp,"
					 "local_addr=a=b,rank=3,use_libuv=1",
					 &c, e, sizeof(e)),
		     0, "%s", e);
	cr_expect_eq(c.join_timeout, 10);
	cr_expect_eq(c.last_call_timeout, 1.5);
	cr_expect_eq(c.close_timeout, 3);
	cr_expect_eq(c.read_timeout, 4);
	cr_expect_eq(c.heartbeat_timeout, 5);
	cr_expect_eq(c.keep_alive_interval, 0.25);
	cr_expect_eq(c.keep_alive_max_attempt, 6);
	cr_expect_eq(c.timeout, 7);
	cr_expect_eq(c.is_host, 1);
	cr_expect_str_eq(c.store_type, "tcp");
	cr_expect_str_eq(c.local_addr, "a=b");
	conf_free(&c);

	conf_init(&c);
	cr_assert_eq(cfg_parse_rdzv_conf("is_host=f", &c, e, sizeof(e)), 0);
	cr_expect_eq(c.is_host, 0);
	cr_expect_eq(c.join_timeout, -1, "untouched keys keep their value");
	cr_assert_eq(cfg_parse_rdzv_conf("", &c, e, sizeof(e)), 0);
	cr_expect_null(c.unknown);
	conf_free(&c);

	/* Unknown keys pass, as torchrun's handlers ignore them; each named
	 * once, the known ones beside them still read. */
	conf_init(&c);
	cr_assert_eq(cfg_parse_rdzv_conf("bogus=1,join_timeout=9,bog=2,bogus=3",
					 &c, e, sizeof(e)),
		     0, "%s", e);
	cr_expect_str_eq(c.unknown, "bogus,bog");
	cr_expect_eq(c.join_timeout, 9);
	conf_free(&c);

	static const char *const bad[][2] = {
		{"bogus", "bogus"},	       {"join_timeout=", "join_timeout"},
		{"join_timeout=abc", "abc"},   {"join_timeout=-1", "-1"},
		{"read_timeout=0", "read_timeout"}, {"=5", "empty"},
		{"keep_alive_max_attempt=0", "keep_alive_max_attempt"},
		{"keep_alive_max_attempt=1.5", "1.5"}, {"is_host=maybe", "maybe"},
		{"store_type=file", "file"},   {"timeout", "timeout"},
		{"join_timeout=inf", "inf"},   {"join_timeout=nan", "nan"},
	};
	for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
		conf_init(&c);
		e[0] = '\0';
		cr_expect_eq(cfg_parse_rdzv_conf(bad[k][0], &c, e, sizeof(e)), CRUN_EUSAGE,
			     "'%s' accepted", bad[k][0]);
		cr_expect_not_null(strstr(e, bad[k][1]), "'%s': message '%s'", bad[k][0], e);
		cr_expect_null(strchr(e, '\n'));
		conf_free(&c);
	}
}

/* store_relay: true, false or auto; auto (-1) by default. */
Test(cfg, parse_rdzv_conf_store_relay)
{
	static const char *const in[] = {"store_relay=true", "store_relay=0",
					 "store_relay=auto"};
	static const int want[] = {1, 0, -1};
	struct crun_rdzv_conf c;
	char e[512] = "";

	cfg_rdzv_conf_init(&c);
	cr_expect_eq(c.store_relay, -1, "the default is auto");
	cfg_rdzv_conf_release(&c);
	for (int i = 0; i < 3; i++) {
		cfg_rdzv_conf_init(&c);
		c.store_relay = 7;
		cr_assert_eq(cfg_parse_rdzv_conf(in[i], &c, e, sizeof(e)), 0,
			     "%s", e);
		cr_expect_eq(c.store_relay, want[i], "%s", in[i]);
		cfg_rdzv_conf_release(&c);
	}
	cfg_rdzv_conf_init(&c);
	cr_expect_eq(cfg_parse_rdzv_conf("store_relay=sometimes", &c, e,
					 sizeof(e)),
		     CRUN_EUSAGE);
	cr_expect_not_null(strstr(e, "sometimes"), "%s", e);
	cfg_rdzv_conf_release(&c);
}

Test(cfg, parse_nnodes_and_bool)
{
	int lo, hi, b;

	cr_assert_eq(cfg_parse_nnodes("4", &lo, &hi), 0);
	cr_expect(lo == 4 && hi == 4);
	cr_assert_eq(cfg_parse_nnodes("1:8", &lo, &hi), 0);
	cr_expect(lo == 1 && hi == 8);
	cr_assert_eq(cfg_parse_nnodes("3:3", &lo, &hi), 0);
	static const char *const bad[] = {"0", "3:2", "1:2:3", "", ":", "1:", ":2", "x",
					  "-1", "0:1", "1.5"};
	for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++)
		cr_expect_eq(cfg_parse_nnodes(bad[k], &lo, &hi), CRUN_EUSAGE,
			     "'%s' accepted", bad[k]);

	static const char *const yes[] = {"1", "true", "True", "t", "yes", "y", "on"};
	static const char *const no[] = {"0", "false", "FALSE", "f", "no", "n", "off"};
	for (size_t k = 0; k < sizeof(yes) / sizeof(yes[0]); k++) {
		cr_expect_eq(cfg_parse_bool(yes[k], &b), 0);
		cr_expect_eq(b, 1, "%s", yes[k]);
		cr_expect_eq(cfg_parse_bool(no[k], &b), 0);
		cr_expect_eq(b, 0, "%s", no[k]);
	}
	cr_expect_neq(cfg_parse_bool("2", &b), 0);
	cr_expect_neq(cfg_parse_bool("", &b), 0);
}

Test(cfg, rank_on_console)
{
	RUN_OK(noenv, "train.py");
	for (int r = 0; r < 8; r++)
		cr_expect(cfg_rank_on_console(&cfg, r), "no filter: rank %d", r);
	reset();
	RUN_OK(noenv, "--local_ranks_filter=0,2", "train.py");
	cr_expect(cfg_rank_on_console(&cfg, 0));
	cr_expect_not(cfg_rank_on_console(&cfg, 1));
	cr_expect(cfg_rank_on_console(&cfg, 2));
	cr_expect_not(cfg_rank_on_console(&cfg, 3));
	reset();
	RUN_OK(noenv, "--local-ranks-filter=", "train.py");
	cr_expect(cfg_rank_on_console(&cfg, 5), "empty filter: every rank");
	reset();
	RUN_OK(noenv, "--local_ranks_filter=3,0,1,2,4,5,6,7,8,9", "train.py");
	cr_expect_eq(cfg.nfilter, 10);
	cr_expect(cfg_rank_on_console(&cfg, 9));
	cr_expect_not(cfg_rank_on_console(&cfg, 10));
}

/* cfg_notices' lines, as its log sink receives them. */
static char noticed[2048];

static void notice_sink(void *data, enum log_level level, const char *line,
			size_t len, const char *msg)
{
	size_t have = strlen(noticed);

	(void)data, (void)level, (void)msg;
	if (have + len < sizeof(noticed))
		memcpy(noticed + have, line, len + 1);
}

static const char *notices_of(const struct crun_cfg *c)
{
	noticed[0] = '\0';
	log_set_sink(notice_sink, NULL);
	cfg_notices(c);
	log_set_sink(NULL, NULL);
	return noticed;
}

/* torchrun ignores rdzv_conf keys it does not know: so does crun, with one
 * line for each naming where it came from. */
Test(cfg, unknown_rdzv_conf_keys_noticed)
{
	char **envp = ENV("PET_RDZV_CONF=x_key=1");
	const char *text;

	RUN_OK(noenv, "--rdzv_conf=alpha=1,join_timeout=7,beta=x", "train.py");
	cr_expect_eq(cfg.rdzv.join_timeout, 7);
	cr_expect_str_eq(notices_of(&cfg),
			 "crun: argument --rdzv_conf: unknown rdzv_conf key "
			 "'alpha' ignored (as torchrun does)\n"
			 "crun: argument --rdzv_conf: unknown rdzv_conf key "
			 "'beta' ignored (as torchrun does)\n");

	reset();
	RUN_OK(envp, "train.py");
	text = notices_of(&cfg);
	cr_expect_not_null(strstr(text, "PET_RDZV_CONF: unknown rdzv_conf key 'x_key'"), "%s", text);

	reset();
	RUN_OK(noenv, "--rdzv_conf=join_timeout=7", "train.py");
	cr_expect_str_eq(notices_of(&cfg), "", "no unknown key, no line");
}

/* torchrun 2.x fails on a --logs_specs name or an --event_log_handler it
 * does not have; crun refuses them before any worker starts. */
Test(cfg, logs_specs_and_event_handler_names)
{
	RUN_OK(noenv, "--logs_specs=default", "--event_log_handler=null", "train.py");
	RUN_OK(noenv, "--event_log_handler=console", "train.py");
	RUN_OK(noenv, "--event-log-handler=dynamic_rendezvous", "train.py");
	USAGE_ERR("logs_specs", "'custom'", "--logs_specs=custom", "train.py");
	USAGE_ERR("logs_specs", "'x'", "--logs-specs", "x", "train.py");
	USAGE_ERR("event_log_handler", "'bogus'", "--event_log_handler=bogus", "train.py");
}

Test(cfg, print_shows_sources)
{
	char **envp = ENV("PET_MAX_RESTARTS=3");
	char *text = NULL;
	size_t len = 0;
	FILE *fp = open_memstream(&text, &len);

	RUN_OK(envp, "--nnodes=1", "train.py", "x");
	cfg_print(&cfg, fp);
	fclose(fp);
	cr_expect_not_null(strstr(text, "command line (argument --nnodes)"), "%s", text);
	cr_expect_not_null(strstr(text, "environment (PET_MAX_RESTARTS)"), "%s", text);
	cr_expect_not_null(strstr(text, "= train.py x\n"), "%s", text);
	free(text);
}

/* Command lines tools write, read as torchrun 2.14 reads them. */
Test(cfg, torchrun_214_command_lines)
{
	/* One "--" among the positionals goes: after the script or module,
	 * or the one that ends the options; any later one stays. */
	RUN_OK(noenv, "-m", "train", "--", "--depth=26");
	cr_assert_eq(cfg.argc, 2);
	cr_expect_str_eq(cfg.argv[1], "--depth=26");
	reset();
	RUN_OK(noenv, "--", "train.py", "--", "x");
	cr_assert_eq(cfg.argc, 3);
	cr_expect_str_eq(cfg.argv[1], "--");
	reset();
	RUN_OK(noenv, "train.py", "--a", "--", "x");
	cr_assert_eq(cfg.argc, 4);
	cr_expect_str_eq(cfg.argv[2], "--");
	/* TorchX's dist.ddp: --role ''. */
	reset();
	RUN_OK(noenv, "--role", "", "--tee", "3", "train.py");
	cr_expect_str_eq(cfg.role, "");
	/* torchtitan: --local-ranks-filter -1 shows no rank. */
	reset();
	RUN_OK(noenv, "--nproc_per_node=2", "--local-ranks-filter", "-1",
	       "train.py");
	cr_expect(!cfg_rank_on_console(&cfg, 0) &&
		  !cfg_rank_on_console(&cfg, 1));
	/* Quotes no shell removed: around the value, an item, a value. */
	reset();
	RUN_OK(noenv, "--rdzv_conf='join_timeout=5,last_call_timeout=1'",
	       "train.py");
	cr_expect_eq(cfg.rdzv.join_timeout, 5);
	cr_expect_eq(cfg.rdzv.last_call_timeout, 1);
	cr_expect(cfg.rdzv.quoted);
	reset();
	RUN_OK(noenv, "--rdzv_conf=\"join_timeout=6\",read_timeout='7'",
	       "train.py");
	cr_expect_eq(cfg.rdzv.join_timeout, 6);
	cr_expect_eq(cfg.rdzv.read_timeout, 7);
	reset();
	RUN_OK(noenv, "--rdzv_conf=join_timeout=8", "train.py");
	cr_expect(!cfg.rdzv.quoted);
	USAGE_ERR("rdzv_conf", "'5''", "--rdzv_conf='join_timeout=5''",
		  "train.py");
	/* The static endpoint's port is MASTER_PORT, unless one is given. */
	reset();
	RUN_OK(noenv, "--rdzv_backend=static",
	       "--rdzv_endpoint=localhost:29123", "train.py");
	cr_expect_eq(cfg.master_port, 29123);
	reset();
	RUN_OK(noenv, "--rdzv_backend=static", "--master_port=29124",
	       "--rdzv_endpoint=localhost:29123", "train.py");
	cr_expect_eq(cfg.master_port, 29124);
	reset();
	RUN_OK(noenv, "train.py");
	cr_expect_eq(cfg.master_port, -1);
	/* --log-line-prefix-template, then PET_LOG_LINE_PREFIX_TEMPLATE. */
	reset();
	RUN_OK(ENV("PET_LOG_LINE_PREFIX_TEMPLATE=env"),
	       "--log-line-prefix-template",
	       "${hostname}:${rank}: ", "train.py");
	cr_expect_str_eq(cfg.log_line_prefix_template, "${hostname}:${rank}: ");
	reset();
	RUN_OK(ENV("PET_LOG_LINE_PREFIX_TEMPLATE=env"), "train.py");
	cr_expect_str_eq(cfg.log_line_prefix_template, "env");
	/* --print-completion SHELL: parsed, and done. */
	reset();
	cr_assert_eq(PARSE(noenv, "--print-completion", "zsh"), 0);
	cr_expect(done);
	cr_expect_str_eq(cfg.print_completion, "zsh");
	reset();
	cr_assert_eq(PARSE(noenv, "--print_completion=tcsh"), 0);
	cr_expect_str_eq(cfg.print_completion, "tcsh");
	USAGE_ERR("print-completion", "choose from bash, zsh, tcsh",
		  "--print-completion", "fish");
	USAGE_ERR("print-completion", "''", "--print-completion");
}

/*
 * cfg_apply_slurm (src/cfg/cfg_slurm.c): SLURM step environments -> derived
 * values, user values winning over them (command line, PET_*, job file),
 * automatic vs explicit --slurm, --slurm=0 / CRUN_SLURM=0, and the errors.
 * Each case runs the launcher's sequence: cfg_parse_args, cfg_apply_slurm,
 * cfg_finalize. The environments are trimmed copies of what Slurm 22.05 set
 * in tests/integration/slurm_single.sh.
 */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "crun/cfg.h"
#include "crun/err.h"
#include "../../src/cfg/cfg_opts.h"

#define ENV_MAX 64

static struct crun_cfg cfg;
static char errbuf[512];
static int done;
static char *envv[ENV_MAX + 1];
static char envbuf[ENV_MAX][256];

static void setup(void)
{
	cfg_init(&cfg);
	errbuf[0] = '\0';
	done = -1;
}

static void teardown(void)
{
	cfg_release(&cfg);
}

TestSuite(cfg_slurm, .init = setup, .fini = teardown);

/* Node 2 of `srun -N2 --ntasks-per-node=1` inside `sbatch -N2 -n3`. */
static const char *const step2[] = {
	"SLURM_JOB_ID=4242",	      "SLURM_JOB_NODELIST=n[1-2]",
	"SLURM_JOB_NUM_NODES=2",      "SLURM_NNODES=2",
	"SLURM_STEP_ID=0",	      "SLURM_STEP_NODELIST=n[1-2]",
	"SLURM_STEP_NUM_NODES=2",     "SLURM_STEP_TASKS_PER_NODE=1(x2)",
	"SLURM_TASKS_PER_NODE=1(x2)", "SLURM_NODEID=1",
	"SLURM_PROCID=1",	      "SLURM_LOCALID=0",
	"SLURMD_NODENAME=n2",	      "CRUN_SLURM_TASKS_PER_NODE=2,1",
	NULL};

/* base, then overrides ("NAME=" alone removes NAME). */
static char **env_of(const char *const *base, const char *const *over)
{
	int n = 0;

	for (; base && *base; base++)
		snprintf(envbuf[n++], sizeof(envbuf[0]), "%s", *base);
	for (; over && *over; over++) {
		size_t nl = strcspn(*over, "=");
		int i;

		for (i = 0; i < n; i++)
			if (strncmp(envbuf[i], *over, nl + 1) == 0)
				break;
		if ((*over)[nl + 1] == '\0') {
			if (i < n) {
				memmove(envbuf[i], envbuf[i + 1], (size_t)(n - i - 1) * sizeof(envbuf[0]));
				n--;
			}
			continue;
		}
		cr_assert_lt(n, ENV_MAX);
		snprintf(envbuf[i], sizeof(envbuf[0]), "%s", *over);
		if (i == n)
			n++;
	}
	for (int i = 0; i < n; i++)
		envv[i] = envbuf[i];
	envv[n] = NULL;
	return envv;
}

/* parse, apply SLURM, finalize: as launcher/main.c does. */
static int run_list(char **envp, const char *const *args)
{
	char *argv[ENV_MAX + 2];
	int argc = 0, rc;

	argv[argc++] = strdup("crun");
	for (int i = 0; args[i]; i++)
		argv[argc++] = strdup(args[i]);
	argv[argc] = NULL;
	rc = cfg_parse_args(&cfg, argc, argv, &done, errbuf, sizeof(errbuf));
	if (rc == 0 && !done)
		rc = cfg_apply_env(&cfg, envp);
	if (rc == 0 && !done)
		rc = cfg_load_job(&cfg, envp, errbuf, sizeof(errbuf));
	if (rc == 0 && !done)
		rc = cfg_apply_slurm(&cfg, envp, errbuf, sizeof(errbuf));
	if (rc == 0 && !done)
		rc = cfg_finalize(&cfg, errbuf, sizeof(errbuf));
	for (int i = 0; i < argc; i++)
		free(argv[i]);
	return rc;
}

#define L(...) ((const char *const[]){__VA_ARGS__, NULL})
#define ENV(...) env_of(step2, L(__VA_ARGS__))
#define RUN(envp, ...) run_list(envp, L(__VA_ARGS__))
#define OK(envp, ...) cr_assert_eq(RUN(envp, __VA_ARGS__), 0, "error: %s", errbuf)

static void expect_val(int id, const char *v, int src)
{
	cr_assert_not_null(cfg.raw[id], "%s unset", cfg_opts[id].name);
	cr_expect_str_eq(cfg.raw[id], v, "%s", cfg_opts[id].name);
	cr_expect_eq(cfg.src[id], src, "%s: source %d, want %d", cfg_opts[id].name,
		     cfg.src[id], src);
}

static void expect_why(int id, const char *part)
{
	cr_assert_not_null(cfg.origin[id]);
	cr_expect(strstr(cfg.origin[id], part) != NULL, "%s: origin '%s' lacks '%s'",
		  cfg_opts[id].name, cfg.origin[id], part);
}

/* --- derived values ------------------------------------------------------ */

Test(cfg_slurm, auto_in_step_derives_everything)
{
	cr_redirect_stderr();
	OK(ENV("X=1"), "train.py");
	expect_val(CFG_nnodes, "2", CRUN_SRC_DERIVED);
	expect_why(CFG_nnodes, "SLURM_STEP_NUM_NODES=2");
	expect_val(CFG_rdzv_id, "4242", CRUN_SRC_DERIVED);
	expect_why(CFG_rdzv_id, "SLURM_JOB_ID=4242");
	expect_val(CFG_rdzv_backend, "c10d", CRUN_SRC_DERIVED);
	expect_val(CFG_rdzv_endpoint, "n1:24242", CRUN_SRC_DERIVED);
	expect_why(CFG_rdzv_endpoint, "first node");
	/* The job's layout 2,1: this is node n2, entry 1. */
	expect_val(CFG_nproc_per_node, "1", CRUN_SRC_DERIVED);
	expect_why(CFG_nproc_per_node, "CRUN_SLURM_TASKS_PER_NODE");
	expect_val(CFG_slurm, "1", CRUN_SRC_DERIVED);
	expect_val(CFG_signals_to_handle, "SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1",
		   CRUN_SRC_DERIVED);
	cr_expect_eq(cfg.nnodes_min, 2);
	cr_expect_eq(cfg.nnodes_max, 2);
	cr_expect_eq(cfg.nproc_per_node, 1);
	cr_expect_str_eq(cfg.rdzv_id, "4242");
	cr_expect_str_eq(cfg.rdzv_endpoint, "n1:24242");
	cr_expect_eq(cfg.slurm, 1);
	cr_assert_eq(cfg.nsignals, 5);
	cr_expect_eq(cfg.signals[4], SIGUSR1);
	fflush(stderr);
	cr_expect_stderr_eq_str("crun: SLURM job 4242, node 1 of 2: --nnodes=2 "
				"--nproc_per_node=1 --rdzv_backend=c10d "
				"--rdzv_endpoint=n1:24242 --rdzv_id=4242 (automatic "
				"inside an srun step; --slurm=0 turns it off; "
				"--print-config shows why)\n");
}

Test(cfg_slurm, first_node_gets_its_layout_entry)
{
	cr_redirect_stderr();
	OK(ENV("SLURM_NODEID=0", "SLURM_PROCID=0", "SLURMD_NODENAME=n1"), "train.py");
	cr_expect_eq(cfg.nproc_per_node, 2);
}

Test(cfg_slurm, gpus_win_over_the_layout)
{
	cr_redirect_stderr();
	OK(ENV("SLURM_GPUS_ON_NODE=4"), "--slurm", "train.py");
	expect_val(CFG_nproc_per_node, "4", CRUN_SRC_DERIVED);
	expect_why(CFG_nproc_per_node, "SLURM_GPUS_ON_NODE=4");
}

Test(cfg_slurm, no_layout_no_gpu_is_cpu)
{
	cr_redirect_stderr();
	OK(ENV("CRUN_SLURM_TASKS_PER_NODE="), "train.py");
	expect_val(CFG_nproc_per_node, "cpu", CRUN_SRC_DERIVED);
	cr_expect_gt(cfg.nproc_per_node, 0);
}

Test(cfg_slurm, port_follows_the_job_id)
{
	cr_redirect_stderr();
	OK(ENV("SLURM_JOB_ID=123456"), "train.py");
	expect_val(CFG_rdzv_endpoint, "n1:23456", CRUN_SRC_DERIVED);
	expect_val(CFG_rdzv_id, "123456", CRUN_SRC_DERIVED);
}

Test(cfg_slurm, print_config_shows_derived_why)
{
	char buf[8192];
	FILE *fp;
	size_t n;

	cr_redirect_stderr();
	OK(ENV("X=1"), "--print-config");
	fp = tmpfile();
	cr_assert_not_null(fp);
	cfg_print(&cfg, fp);
	rewind(fp);
	n = fread(buf, 1, sizeof(buf) - 1, fp);
	buf[n] = '\0';
	fclose(fp);
	cr_expect(strstr(buf, "# derived (slurm: SLURM_JOB_ID=4242)") != NULL, "%s", buf);
	cr_expect(strstr(buf, "# derived (slurm: SLURM_STEP_NUM_NODES=2)") != NULL, "%s", buf);
}

/* --- user values win ----------------------------------------------------- */

Test(cfg_slurm, explicit_slurm_keeps_cli_values)
{
	cr_redirect_stderr();
	OK(ENV("X=1"), "--slurm", "--nproc_per_node=3", "--rdzv_endpoint=head:7000",
	   "--rdzv_id=mine", "--signals_to_handle=SIGTERM", "train.py");
	expect_val(CFG_nproc_per_node, "3", CRUN_SRC_CLI);
	expect_val(CFG_rdzv_endpoint, "head:7000", CRUN_SRC_CLI);
	expect_val(CFG_rdzv_id, "mine", CRUN_SRC_CLI);
	expect_val(CFG_signals_to_handle, "SIGTERM", CRUN_SRC_CLI);
	/* The rest still comes from SLURM. */
	expect_val(CFG_nnodes, "2", CRUN_SRC_DERIVED);
	expect_val(CFG_rdzv_backend, "c10d", CRUN_SRC_DERIVED);
	expect_val(CFG_slurm, "1", CRUN_SRC_CLI);
	cr_expect_eq(cfg.nproc_per_node, 3);
}

Test(cfg_slurm, explicit_slurm_keeps_env_values)
{
	cr_redirect_stderr();
	OK(ENV("PET_NPROC_PER_NODE=5", "PET_NNODES=1:2"), "--slurm", "train.py");
	expect_val(CFG_nproc_per_node, "5", CRUN_SRC_ENV);
	expect_val(CFG_nnodes, "1:2", CRUN_SRC_ENV);
	expect_val(CFG_rdzv_id, "4242", CRUN_SRC_DERIVED);
}

Test(cfg_slurm, explicit_slurm_with_static_backend)
{
	cr_redirect_stderr();
	OK(ENV("X=1"), "--slurm", "--rdzv_backend=static", "train.py");
	expect_val(CFG_node_rank, "1", CRUN_SRC_DERIVED);
	expect_val(CFG_master_addr, "n1", CRUN_SRC_DERIVED);
	expect_val(CFG_master_port, "24242", CRUN_SRC_DERIVED);
	cr_expect_eq(cfg.node_rank, 1);
	cr_expect_str_eq(cfg.rdzv_endpoint, "n1:24242");
	cr_expect_str_eq(cfg.rdzv_backend, "static");
}

/* --- auto vs explicit ---------------------------------------------------- */

Test(cfg_slurm, auto_stays_off_with_multi_node_options)
{
	static const char *const flags[] = {
		"--nnodes=2",	       "--rdzv_backend=c10d", "--rdzv_endpoint=h:1",
		"--node_rank=0",       "--master_addr=h",     "--master_port=1234",
		"--standalone",
	};

	for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++) {
		cfg_release(&cfg);
		cfg_init(&cfg);
		cr_assert_eq(RUN(ENV("X=1"), flags[i], "train.py"), 0, "%s: %s", flags[i], errbuf);
		cr_expect_neq(cfg.src[CFG_rdzv_id], CRUN_SRC_DERIVED, "%s", flags[i]);
		cr_expect_null(cfg.rdzv_id, "%s", flags[i]);
		cr_expect_neq(cfg.slurm, 1, "%s", flags[i]);
	}
}

/* With --nnodes given (auto mode off), the step's nodes are still known:
 * the first round waits for them. Not in a batch shell. */
Test(cfg_slurm, step_nodes_known_with_nnodes_given)
{
	OK(ENV("X=1"), "--nnodes=1:4", "--rdzv_backend=c10d", "--rdzv_endpoint=h:1", "train.py");
	cr_expect_eq(cfg.slurm_agents, 2);
	cr_expect(strstr(cfg.slurm_agents_why, "SLURM_STEP_NUM_NODES=2") != NULL, "%s",
		  cfg.slurm_agents_why);
	cfg_release(&cfg);
	cfg_init(&cfg);
	OK(ENV("SLURM_STEP_ID=", "SLURM_STEP_NODELIST=", "SLURM_STEP_NUM_NODES=",
	       "SLURM_STEP_TASKS_PER_NODE="),
	   "--nnodes=1:4", "--rdzv_backend=c10d", "--rdzv_endpoint=h:1", "train.py");
	cr_expect_eq(cfg.slurm_agents, 0);
	/* Two crun tasks on each of the 2 nodes: 4 agents. */
	cfg_release(&cfg);
	cfg_init(&cfg);
	OK(ENV("SLURM_STEP_NUM_TASKS=4", "SLURM_STEP_TASKS_PER_NODE=2(x2)"), "--nnodes=1:4",
	   "--rdzv_backend=c10d", "--rdzv_endpoint=h:1", "train.py");
	cr_expect_eq(cfg.slurm_agents, 4);
	cr_expect_str_eq(cfg.slurm_agents_why, "SLURM_STEP_NUM_TASKS=4");
}

Test(cfg_slurm, auto_stays_off_with_env_or_file_options)
{
	cr_assert_eq(RUN(ENV("PET_RDZV_ENDPOINT=h:1"), "train.py"), 0, "%s", errbuf);
	cr_expect_null(cfg.rdzv_id);
	cr_expect_str_eq(cfg.rdzv_backend, "static");
}

Test(cfg_slurm, auto_only_inside_a_step)
{
	/* The batch shell: SLURM_PROCID set, no step id. */
	OK(ENV("SLURM_STEP_ID=", "SLURM_STEP_NODELIST=", "SLURM_STEP_NUM_NODES=",
	       "SLURM_STEP_TASKS_PER_NODE="),
	   "train.py");
	cr_expect_null(cfg.rdzv_id);
	cr_expect_eq(cfg.nnodes_max, 1);
}

Test(cfg_slurm, explicit_in_batch_shell_warns)
{
	cr_redirect_stderr();
	OK(ENV("SLURM_STEP_ID=", "SLURM_STEP_NODELIST=", "SLURM_STEP_NUM_NODES=",
	       "SLURM_STEP_TASKS_PER_NODE=", "SLURM_NODEID=0", "SLURM_PROCID=0"),
	   "--slurm", "train.py");
	cr_expect_eq(cfg.nnodes_max, 2);
	fflush(stderr);
	cr_expect_stderr_neq_str("");
}

Test(cfg_slurm, off_by_flag_or_env)
{
	OK(ENV("X=1"), "--slurm=0", "train.py");
	cr_expect_null(cfg.rdzv_id);
	cr_expect_eq(cfg.slurm, 0);
	cr_expect_eq(cfg.nnodes_max, 1);

	cfg_release(&cfg);
	cfg_init(&cfg);
	OK(ENV("CRUN_SLURM=0"), "train.py");
	cr_expect_null(cfg.rdzv_id);
	cr_expect_eq(cfg.slurm, 0);

	/* The command line beats the environment. */
	cfg_release(&cfg);
	cfg_init(&cfg);
	cr_redirect_stderr();
	OK(ENV("CRUN_SLURM=0"), "--slurm", "train.py");
	cr_expect_str_eq(cfg.rdzv_id, "4242");
}

Test(cfg_slurm, nothing_outside_slurm)
{
	char *none[] = {NULL};

	OK(none, "train.py");
	cr_expect_null(cfg.rdzv_id);
	cr_expect_eq(cfg.slurm, -1);
	cr_expect_str_eq(cfg.signals_str, "SIGTERM,SIGINT,SIGHUP,SIGQUIT");
}

/* --- warnings and errors ------------------------------------------------- */

Test(cfg_slurm, pitfalls_are_printed_one_line_each)
{
	char buf[4096];
	FILE *err;
	size_t n;
	int lines = 0;

	cr_redirect_stderr();
	OK(ENV("SLURM_STEP_TASKS_PER_NODE=2(x2)", "SLURM_GPUS_ON_NODE=4",
	       "SLURM_GPUS_PER_TASK=1", "CUDA_VISIBLE_DEVICES=1"),
	   "train.py");
	fflush(stderr);
	err = cr_get_redirected_stderr();
	n = fread(buf, 1, sizeof(buf) - 1, err);
	buf[n] = '\0';
	for (char *p = buf; (p = strstr(p, "crun: warning: ")) != NULL; p++)
		lines++;
	cr_expect_eq(lines, 3, "%s", buf);
	cr_expect(strstr(buf, "2 crun tasks run on this node") != NULL, "%s", buf);
	cr_expect(strstr(buf, "GPUs are bound per task") != NULL, "%s", buf);
	cr_expect_eq(cfg.nproc_per_node, 1);
}

Test(cfg_slurm, explicit_outside_slurm_is_an_error)
{
	char *none[] = {NULL};

	cr_expect_eq(RUN(none, "--slurm", "train.py"), CRUN_EUSAGE);
	cr_expect(strstr(errbuf, "--slurm: not inside a SLURM job") != NULL, "%s", errbuf);
}

Test(cfg_slurm, bad_values_are_errors)
{
	cr_expect_eq(RUN(ENV("X=1"), "--slurm=maybe", "train.py"), CRUN_EUSAGE);
	cr_expect(strstr(errbuf, "argument --slurm: invalid value 'maybe'") != NULL, "%s",
		  errbuf);

	cfg_release(&cfg);
	cfg_init(&cfg);
	cr_expect_eq(RUN(ENV("CRUN_SLURM=perhaps"), "train.py"), CRUN_EUSAGE);
	cr_expect(strstr(errbuf, "CRUN_SLURM: invalid value 'perhaps'") != NULL, "%s", errbuf);

	cfg_release(&cfg);
	cfg_init(&cfg);
	cr_expect_eq(RUN(ENV("SLURM_STEP_NODELIST=n[2-1]"), "--slurm", "train.py"),
		     CRUN_EUSAGE);
	cr_expect(strstr(errbuf, "--slurm: SLURM_STEP_NODELIST") != NULL, "%s", errbuf);

	cfg_release(&cfg);
	cfg_init(&cfg);
	cr_redirect_stderr();
	cr_expect_eq(RUN(ENV("X=1"), "--slurm", "--standalone", "train.py"), CRUN_EUSAGE);
	cr_expect(strstr(errbuf, "--standalone") != NULL, "%s", errbuf);
}

Test(cfg_slurm, malformed_env_in_auto_mode_is_ignored)
{
	cr_redirect_stderr();
	OK(ENV("SLURM_NODEID=7"), "train.py");
	cr_expect_null(cfg.rdzv_id);
	cr_expect_eq(cfg.nnodes_max, 1);
}

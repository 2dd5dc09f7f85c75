/*
 * INI job files: every section and key reaches the option it names (aliases
 * included), every loading error carries its file:line, precedence is
 * command line > environment > job file > default, ${VAR} expansion, [env],
 * shell-like args, and how command-line positionals replace the file's
 * entrypoint and args. Job files are written to a fresh temporary directory.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "crun/cfg.h"
#include "crun/err.h"
#include "crun/rdzv.h"
#include "../../src/cfg/cfg_opts.h"

static char dir[64];
static char path[128];
static char err[1024];
static struct crun_cfg cfg;

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/crun-test-ini-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/job.ini", dir);
	cfg_init(&cfg);
	err[0] = '\0';
}

static void teardown(void)
{
	cfg_release(&cfg);
	unlink(path);
	rmdir(dir);
}

TestSuite(cfg_ini, .init = setup, .fini = teardown, .timeout = 10);

static void write_file(const char *text)
{
	FILE *fp = fopen(path, "w");

	cr_assert_not_null(fp);
	fputs(text, fp);
	fclose(fp);
}

/*
 * Write text as the job file and parse a command line: args is a
 * NULL-terminated list where "@" stands for the job file's path. With
 * args == NULL the command line is `crun --config FILE`.
 */
static int run(const char *text, const char *const *args, char **envp)
{
	static const char *const dflt[] = {"--config", "@", NULL};
	char *argv[32];
	char *noenv[] = {NULL};
	int argc = 0, done = 0, rc;

	write_file(text);
	argv[argc++] = (char *)"crun";
	for (const char *const *a = args ? args : dflt; *a; a++)
		argv[argc++] = strcmp(*a, "@") == 0 ? path : (char *)*a;
	argv[argc] = NULL;
	rc = cfg_parse_args(&cfg, argc, argv, &done, err, sizeof(err));
	if (rc == 0 && !done)
		rc = cfg_apply_env(&cfg, envp ? envp : noenv);
	if (rc == 0 && !done)
		rc = cfg_load_job(&cfg, envp ? envp : noenv, err, sizeof(err));
	cr_assert_eq(done, 0);
	return rc;
}

/* Parse, then finalize; both must succeed. */
static void load_ok(const char *text, const char *const *args, char **envp)
{
	int rc = run(text, args, envp);

	cr_assert_eq(rc, 0, "loading failed: %s\n--- file:\n%s", err, text);
	rc = cfg_finalize(&cfg, err, sizeof(err));
	cr_assert_eq(rc, 0, "finalize failed: %s\n--- file:\n%s", err, text);
}

/* Loading must fail with "FILE:LINE: " followed by a message holding want. */
static void load_bad(const char *text, int line, const char *want)
{
	char prefix[200];
	int rc = run(text, NULL, NULL);

	cr_assert_eq(rc, CRUN_EUSAGE, "no error for:\n%s", text);
	snprintf(prefix, sizeof(prefix), "%s:%d: ", path, line);
	cr_assert(strncmp(err, prefix, strlen(prefix)) == 0,
		  "error '%s' does not start with '%s'", err, prefix);
	cr_assert_not_null(strstr(err, want), "error '%s' lacks '%s'", err, want);
}

/* name as a job file in path's directory names it: next to the file. */
static const char *beside(const char *name)
{
	static char buf[256];

	snprintf(buf, sizeof(buf), "%.*s/%s",
		 (int)(strrchr(path, '/') - path), path, name);
	return buf;
}

static void expect_opt(int id, const char *value, int line, const char *key)
{
	char origin[256];

	snprintf(origin, sizeof(origin), "%s:%d: %s", path, line, key);
	cr_expect_str_eq(cfg.raw[id], value, "%s", cfg_opts[id].name);
	cr_expect_eq(cfg.src[id], CRUN_SRC_FILE, "%s: source %d",
		     cfg_opts[id].name, cfg.src[id]);
	cr_expect_str_eq(cfg.origin[id], origin);
}

/* A value that passes finalize for each option (defaults where possible). */
static const char *sample(int id)
{
	switch (id) {
	case CFG_nnodes: return "1";
	case CFG_nproc_per_node: return "3";
	case CFG_rdzv_backend: return "c10d";
	case CFG_rdzv_endpoint: return "localhost:29400";
	case CFG_rdzv_id: return "job42";
	case CFG_rdzv_conf: return "join_timeout=7";
	case CFG_max_restarts: return "5";
	case CFG_monitor_interval: return "0.5";
	case CFG_start_method: return "fork";
	case CFG_role: return "trainer";
	case CFG_log_dir: return "/tmp/logs";
	case CFG_redirects: return "3";
	case CFG_tee: return "0:1,1:2";
	case CFG_local_ranks_filter: return "0,1";
	case CFG_node_rank: return "0";
	case CFG_master_addr: return "10.0.0.1";
	case CFG_master_port: return "29501";
	case CFG_local_addr: return "10.0.0.2";
	case CFG_env_check: return "strict";
	case CFG_env_check_timeout: return "1";
	case CFG_shutdown_timeout: return "12";
	case CFG_checkpoint_grace: return "60";
	case CFG_stack_timeout: return "7";
	case CFG_store_probe_timeout: return "9";
	case CFG_signals_to_handle: return "SIGTERM,SIGUSR1";
	case CFG_store_max_key_size: return "1K";
	case CFG_store_max_value_size: return "2M";
	case CFG_store_max_keys: return "100";
	case CFG_store_max_memory: return "3G";
	case CFG_store_max_conns: return "10";
	case CFG_store_max_output: return "16M";
	case CFG_store_idle_timeout: return "20";
	case CFG_numa_binding: return "socket";
	case CFG_cpu_bind: return "auto";
	case CFG_duplicate_stdout_filters: return "loss";
	case CFG_duplicate_stderr_filters: return "warn";
	case CFG_logs_specs: return "default";
	case CFG_event_log_handler: return "console";
	case CFG_console_buffer: return "1M";
	case CFG_console: return "collapse";
	case CFG_console_window: return "0.5";
	case CFG_console_hold: return "1M";
	case CFG_metrics_port: return "9400";
	case CFG_metrics_addr: return "127.0.0.1";
	case CFG_metrics_max_conns: return "8";
	case CFG_metrics_idle_timeout: return "5";
	case CFG_init_warn_after: return "7";
	case CFG_stall_timeout: return "9";
	case CFG_log_line_prefix_template: return "[r]:";
	}
	return "true"; /* booleans */
}

/* Every option of the table, in its own section, both spellings. */
Test(cfg_ini, every_option_key)
{
	for (int id = 0; id < CFG_NOPTS; id++) {
		const struct cfg_opt *o = &cfg_opts[id];
		char text[512], dashed[64];

		if (cfg_opts[id].flags & CFG_F_NOFILE)
			continue; /* refused inside a job file, tested below */
		for (int spell = 0; spell < 2; spell++) {
			snprintf(dashed, sizeof(dashed), "%s", o->name);
			for (char *p = dashed; spell && *p; p++)
				if (*p == '_')
					*p = '-';
			snprintf(text, sizeof(text),
				 "[%s]\n%s = %s\n%s", o->section, dashed, sample(id),
				 strcmp(o->section, "job") == 0
					 ? "entrypoint = /bin/true\n"
					 : "[job]\nentrypoint = /bin/true\n");
			cfg_release(&cfg);
			cfg_init(&cfg);
			load_ok(text, NULL, NULL);
			expect_opt(id, sample(id), 2, dashed);
		}
	}
}

Test(cfg_ini, job_section)
{
	load_ok("# a training job\n"
		"[job]\n"
		"entrypoint = train.py\n"
		"args = --lr 0.1 \"a b\" 'c d' e\\ f\n"
		"nnodes = 1\n"
		"nproc_per_node = 4\n"
		"max_restarts = 3\n"
		"role = trainer\n"
		"no-python = yes\n"
		"shutdown_timeout = 5\n"
		"slurm = off\n",
		NULL, NULL);
	cr_assert_eq(cfg.argc, 6);
	cr_expect_str_eq(cfg.argv[0], beside("train.py"));
	cr_expect_str_eq(cfg.argv[1], "--lr");
	cr_expect_str_eq(cfg.argv[2], "0.1");
	cr_expect_str_eq(cfg.argv[3], "a b");
	cr_expect_str_eq(cfg.argv[4], "c d");
	cr_expect_str_eq(cfg.argv[5], "e f");
	cr_expect_null(cfg.argv[6]);
	cr_expect_eq(cfg.nproc_per_node, 4);
	cr_expect_eq(cfg.max_restarts, 3);
	cr_expect_str_eq(cfg.role, "trainer");
	cr_expect_eq(cfg.no_python, 1);
	cr_expect_eq(cfg.shutdown_timeout, 5);
	cr_expect_eq(cfg.slurm, 0);
	expect_opt(CFG_no_python, "yes", 9, "no-python");
}

Test(cfg_ini, torchrun_spellings_of_the_entrypoint)
{
	load_ok("[job]\ntraining_script = run.sh\ntraining_script_args = x y\n",
		NULL, NULL);
	cr_assert_eq(cfg.argc, 3);
	cr_expect_str_eq(cfg.argv[0], "run.sh");
	cr_expect_str_eq(cfg.argv[2], "y");
}

Test(cfg_ini, long_args_continue_on_indented_lines)
{
	load_ok("[job]\n"
		"entrypoint = train.py\n"
		"args = --a 1\n"
		"    --b 2   ; a comment\n"
		"\t--c \"x y\"\n"
		"nnodes = 1\n",
		NULL, NULL);
	cr_assert_eq(cfg.argc, 7);
	cr_expect_str_eq(cfg.argv[3], "--b");
	cr_expect_str_eq(cfg.argv[4], "2");
	cr_expect_str_eq(cfg.argv[6], "x y");
	expect_opt(CFG_nnodes, "1", 6, "nnodes");
}

Test(cfg_ini, rendezvous_section_and_aliases)
{
	load_ok("[job]\n"
		"entrypoint = /bin/true\n"
		"nnodes = 2:4\n"
		"[rendezvous]\n"
		"backend = c10d\n"
		"endpoint = node0:29400\n"
		"id = job-${JOB:-7}\n"
		"local_addr = 10.1.1.1\n",
		NULL, NULL);
	expect_opt(CFG_rdzv_backend, "c10d", 5, "backend");
	expect_opt(CFG_rdzv_endpoint, "node0:29400", 6, "endpoint");
	expect_opt(CFG_rdzv_id, "job-7", 7, "id");
	expect_opt(CFG_local_addr, "10.1.1.1", 8, "local_addr");
	cr_expect_eq(cfg.nnodes_min, 2);
	cr_expect_eq(cfg.nnodes_max, 4);
	cr_expect_str_eq(cfg.rdzv_id, "job-7");
}

Test(cfg_ini, rdzv_section_alias)
{
	load_ok("[rdzv]\nrdzv_backend = c10d\n[job]\nentrypoint = x\n", NULL, NULL);
	expect_opt(CFG_rdzv_backend, "c10d", 2, "rdzv_backend");
}

/* store_relay in a job file, as --rdzv_conf=store_relay does. */
Test(cfg_ini, rdzv_store_relay)
{
	load_ok("[job]\nentrypoint = /bin/true\n[rendezvous]\n"
		"store_relay = true\n",
		NULL, NULL);
	cr_expect_str_eq(cfg.raw[CFG_rdzv_conf], "store_relay=true");
	cr_expect_eq(cfg.rdzv.store_relay, 1);
}

/* Each rdzv_conf key is a key of [rendezvous], merged into rdzv_conf. */
Test(cfg_ini, rdzv_conf_keys)
{
	load_ok("[job]\n"
		"entrypoint = /bin/true\n"
		"[rendezvous]\n"
		"backend = c10d\n"
		"endpoint = localhost\n"
		"conf = join_timeout=100,read_timeout=9\n"
		"join-timeout = 11\n"
		"last_call_timeout = 12\n"
		"close_timeout = 13\n"
		"heartbeat_timeout = 14\n"
		"keep_alive_interval = 0.25\n"
		"keep_alive_max_attempt = 6\n"
		"is_host = false\n"
		"store_type = tcp\n"
		"timeout = 15\n",
		NULL, NULL);
	cr_expect_str_eq(cfg.raw[CFG_rdzv_conf],
			 "join_timeout=100,read_timeout=9,join_timeout=11,"
			 "last_call_timeout=12,close_timeout=13,heartbeat_timeout=14,"
			 "keep_alive_interval=0.25,keep_alive_max_attempt=6,"
			 "is_host=false,store_type=tcp,timeout=15");
	cr_expect_eq(cfg.src[CFG_rdzv_conf], CRUN_SRC_FILE);
	/* The single key wins over the same key inside conf. */
	cr_expect_eq(cfg.rdzv.join_timeout, 11);
	cr_expect_eq(cfg.rdzv.read_timeout, 9);
	cr_expect_eq(cfg.rdzv.last_call_timeout, 12);
	cr_expect_eq(cfg.rdzv.close_timeout, 13);
	cr_expect_eq(cfg.rdzv.heartbeat_timeout, 14);
	cr_expect_eq(cfg.rdzv.keep_alive_interval, 0.25);
	cr_expect_eq(cfg.rdzv.keep_alive_max_attempt, 6);
	cr_expect_eq(cfg.rdzv.is_host, 0);
	cr_expect_str_eq(cfg.rdzv.store_type, "tcp");
	cr_expect_eq(cfg.rdzv.timeout, 15);
	{
		char origin[200];

		snprintf(origin, sizeof(origin), "%s:6: conf", path);
		cr_expect_str_eq(cfg.origin[CFG_rdzv_conf], origin);
	}
}

/* The etcd client's bounds are keys of [rendezvous] too. */
Test(cfg_ini, rdzv_etcd_limit_keys)
{
	load_ok("[job]\n"
		"entrypoint = /bin/true\n"
		"[rendezvous]\n"
		"etcd_max_message = 1M\n"
		"etcd_max_json_items = 500\n"
		"etcd_turn_bytes = 8K\n"
		"etcd_turn_messages = 3\n"
		"etcd_backoff = 0.5\n"
		"etcd_backoff_max = 4\n",
		NULL, NULL);
	cr_expect_eq(cfg.rdzv.etcd_backoff, 0.5);
	cr_expect_eq(cfg.rdzv.etcd_backoff_max, 4);
	cr_expect_eq(cfg.rdzv.etcd_max_message, 1u << 20);
	cr_expect_eq(cfg.rdzv.etcd_max_json_items, 500);
	cr_expect_eq(cfg.rdzv.etcd_turn_bytes, 8u << 10);
	cr_expect_eq(cfg.rdzv.etcd_turn_messages, 3);
}

Test(cfg_ini, logs_section_and_aliases)
{
	load_ok("[job]\nentrypoint = x\nnproc_per_node = 4\n"
		"[logs]\n"
		"dir = /tmp/l\n"
		"redirects = 3\n"
		"tee = 0:1\n"
		"filter = 0,2\n",
		NULL, NULL);
	expect_opt(CFG_log_dir, "/tmp/l", 5, "dir");
	expect_opt(CFG_redirects, "3", 6, "redirects");
	expect_opt(CFG_tee, "0:1", 7, "tee");
	expect_opt(CFG_local_ranks_filter, "0,2", 8, "filter");
	cr_expect_eq(cfg.redirects.all, 3);
	cr_expect_eq(cfg.nfilter, 2);
	cr_expect_eq(cfg_rank_on_console(&cfg, 1), 0);
}

Test(cfg_ini, store_section_and_aliases)
{
	load_ok("[job]\nentrypoint = x\n"
		"[store]\n"
		"max_key_size = 1K\n"
		"store-max-value-size = 2M\n"
		"max_keys = 5\n"
		"max_memory = 1M\n"
		"max_conns = 9\n"
		"no_agent_store = true\n",
		NULL, NULL);
	expect_opt(CFG_store_max_key_size, "1K", 4, "max_key_size");
	expect_opt(CFG_store_max_value_size, "2M", 5, "store-max-value-size");
	cr_expect_eq(cfg.store.max_key, 1024);
	cr_expect_eq(cfg.store.max_value, 2u << 20);
	cr_expect_eq(cfg.store.max_keys, 5);
	cr_expect_eq(cfg.store.max_memory, 1u << 20);
	cr_expect_eq(cfg.store.max_conns, 9);
	cr_expect_eq(cfg.agent_store, 0);
}

Test(cfg_ini, keys_and_sections_ignore_case)
{
	load_ok("[JOB]\nEntryPoint = x\nNNODES = 1\n", NULL, NULL);
	expect_opt(CFG_nnodes, "1", 3, "NNODES");
}

Test(cfg_ini, env_section)
{
	char *envp[] = {(char *)"USER_X=from-agent", NULL};

	load_ok("[job]\nentrypoint = x\n"
		"[env]\n"
		"NCCL_DEBUG = INFO\n"
		"Mixed_Case = keeps case\n"
		"EMPTY =\n"
		"FROM = ${USER_X}/y\n"
		"URL = http://h:1/a=b\n",
		NULL, envp);
	cr_assert_eq(cfg.nenv, 5);
	cr_expect_str_eq(cfg.env[0], "NCCL_DEBUG=INFO");
	cr_expect_str_eq(cfg.env[1], "Mixed_Case=keeps case");
	cr_expect_str_eq(cfg.env[2], "EMPTY=");
	cr_expect_str_eq(cfg.env[3], "FROM=from-agent/y");
	cr_expect_str_eq(cfg.env[4], "URL=http://h:1/a=b");
	cr_expect_null(cfg.env[5]);
}

Test(cfg_ini, expansion)
{
	char *envp[] = {(char *)"NODES=3", (char *)"EMPTY=", (char *)"DIR=/data",
			NULL};

	load_ok("[job]\n"
		"entrypoint = ${DIR}/train.py\n"
		"args = --cost $$5 ${MISSING:-a b} x${EMPTY:-dflt}y ${EMPTY}z\n"
		"nnodes = ${NODES}\n"
		"[logs]\n"
		"dir = ${LOGS:-/tmp/crun-logs}\n"
		"filter = ${NOTSET:-}\n",
		NULL, envp);
	cr_assert_eq(cfg.argc, 7);
	cr_expect_str_eq(cfg.argv[0], "/data/train.py");
	cr_expect_str_eq(cfg.argv[1], "--cost");
	cr_expect_str_eq(cfg.argv[2], "$5");
	cr_expect_str_eq(cfg.argv[3], "a");
	cr_expect_str_eq(cfg.argv[4], "b");
	cr_expect_str_eq(cfg.argv[5], "xdflty");
	cr_expect_str_eq(cfg.argv[6], "z");
	expect_opt(CFG_nnodes, "3", 4, "nnodes");
	expect_opt(CFG_log_dir, "/tmp/crun-logs", 6, "dir");
	/* An empty value leaves the option at its default. */
	cr_expect_eq(cfg.src[CFG_local_ranks_filter], CRUN_SRC_DEFAULT);
}

Test(cfg_ini, inline_comments_and_bom)
{
	load_ok("\xEF\xBB\xBF; comment\n"
		"# another\n"
		"[job]  ; the job\n"
		"entrypoint = x ; inline\n"
		"nproc_per_node = 2\n",
		NULL, NULL);
	cr_expect_str_eq(cfg.argv[0], "x");
	cr_expect_eq(cfg.nproc_per_node, 2);
}

/* --- precedence --------------------------------------------------------- */

static const char prec_file[] = "[job]\n"
				"entrypoint = x\n"
				"nproc_per_node = 2\n"
				"max_restarts = 2\n"
				"role = file\n"
				"[logs]\n"
				"tee = 2\n";

Test(cfg_ini, cli_over_env_over_file_over_default)
{
	static const char *const args[] = {"--nproc_per_node", "4", "--config",
					   "@", NULL};
	char *envp[] = {(char *)"PET_NPROC_PER_NODE=3",
			(char *)"PET_MAX_RESTARTS=1", NULL};

	load_ok(prec_file, args, envp);
	cr_expect_eq(cfg.nproc_per_node, 4);
	cr_expect_eq(cfg.src[CFG_nproc_per_node], CRUN_SRC_CLI);
	cr_expect_str_eq(cfg.origin[CFG_nproc_per_node], "argument --nproc_per_node");
	cr_expect_eq(cfg.max_restarts, 1);
	cr_expect_eq(cfg.src[CFG_max_restarts], CRUN_SRC_ENV);
	cr_expect_str_eq(cfg.origin[CFG_max_restarts], "PET_MAX_RESTARTS");
	cr_expect_str_eq(cfg.role, "file");
	expect_opt(CFG_role, "file", 5, "role");
	cr_expect_eq(cfg.tee.all, 2);
	cr_expect_eq(cfg.src[CFG_redirects], CRUN_SRC_DEFAULT);
	cr_expect_eq(cfg.redirects.all, 0);
}

Test(cfg_ini, env_beats_file_even_if_the_file_is_given_first)
{
	static const char *const args[] = {"--config", "@", "--max_restarts=9",
					   NULL};
	char *envp[] = {(char *)"PET_ROLE=envrole", NULL};

	load_ok(prec_file, args, envp);
	cr_expect_eq(cfg.max_restarts, 9);
	cr_expect_str_eq(cfg.role, "envrole");
}

Test(cfg_ini, crun_env_variables_beat_the_file)
{
	char *envp[] = {(char *)"CRUN_STORE_MAX_KEYS=77", NULL};

	load_ok("[job]\nentrypoint = x\n[store]\nmax_keys = 5\n", NULL, envp);
	cr_expect_eq(cfg.store.max_keys, 77);
	cr_expect_eq(cfg.src[CFG_store_max_keys], CRUN_SRC_ENV);
}

/* --- entrypoint and args from the command line -------------------------- */

Test(cfg_ini, job_file_positional_extra_args_replace_args)
{
	static const char *const args[] = {"--nnodes=1", "@", "--lr", "0.5", NULL};

	load_ok("[job]\nentrypoint = train.py\nargs = --lr 0.1 --epochs 3\n",
		args, NULL);
	cr_assert_eq(cfg.argc, 3);
	cr_expect_str_eq(cfg.argv[0], beside("train.py"));
	cr_expect_str_eq(cfg.argv[1], "--lr");
	cr_expect_str_eq(cfg.argv[2], "0.5");
	cr_expect_null(cfg.argv[3]);
	cr_expect_eq(cfg.src[CFG_config], CRUN_SRC_CLI);
}

Test(cfg_ini, job_file_positional_without_extras_keeps_args)
{
	static const char *const args[] = {"@", NULL};

	load_ok("[job]\nentrypoint = train.py\nargs = --lr 0.1\n", args, NULL);
	cr_assert_eq(cfg.argc, 3);
	cr_expect_str_eq(cfg.argv[2], "0.1");
}

Test(cfg_ini, job_file_without_entrypoint_runs_the_extras)
{
	static const char *const args[] = {"@", "run.py", "-v", NULL};

	load_ok("[job]\nnproc_per_node = 2\n", args, NULL);
	cr_assert_eq(cfg.argc, 2);
	cr_expect_str_eq(cfg.argv[0], "run.py");
	cr_expect_str_eq(cfg.argv[1], "-v");
}

Test(cfg_ini, cli_entrypoint_replaces_entrypoint_and_args)
{
	static const char *const args[] = {"--config", "@", "/bin/echo", "hi", NULL};

	load_ok("[job]\nentrypoint = train.py\nargs = --lr 0.1\nnproc_per_node = 2\n",
		args, NULL);
	cr_assert_eq(cfg.argc, 2);
	cr_expect_str_eq(cfg.argv[0], "/bin/echo");
	cr_expect_str_eq(cfg.argv[1], "hi");
	cr_expect_eq(cfg.nproc_per_node, 2);
}

/* --- values finalize rejects name the file and line --------------------- */

Test(cfg_ini, bad_value_names_file_line_and_key)
{
	char want[300];

	cr_assert_eq(run("[job]\nentrypoint = x\n\n; nodes\nnproc-per-node = 2\n"
			 "max_restarts = 1\nnnodes = 0\n",
			 NULL, NULL),
		     0, "%s", err);
	cr_assert_eq(cfg_finalize(&cfg, err, sizeof(err)), CRUN_EUSAGE);
	snprintf(want, sizeof(want), "%s:7: nnodes: invalid value '0': ", path);
	cr_expect(strncmp(err, want, strlen(want)) == 0, "got '%s'", err);
}

Test(cfg_ini, bad_bool_names_file_line_and_key)
{
	char want[300];

	cr_assert_eq(run("[job]\nentrypoint = x\nstandalone = maybe\n", NULL, NULL), 0);
	cr_assert_eq(cfg_finalize(&cfg, err, sizeof(err)), CRUN_EUSAGE);
	snprintf(want, sizeof(want), "%s:3: standalone: invalid value 'maybe'", path);
	cr_expect(strncmp(err, want, strlen(want)) == 0, "got '%s'", err);
}

/* An id joined from continuation lines is held to RDZV_ID_MAX too. */
Test(cfg_ini, long_rdzv_id_names_file_line_and_key)
{
	char text[RDZV_ID_MAX + 64], want[300];

	snprintf(text, sizeof(text),
		 "[job]\nentrypoint = x\n[rendezvous]\nid = %0*d\n  %0*d\n",
		 RDZV_ID_MAX / 2, 7, RDZV_ID_MAX / 2, 8);
	cr_assert_eq(run(text, NULL, NULL), 0, "%s", err);
	cr_assert_eq(cfg_finalize(&cfg, err, sizeof(err)), CRUN_EUSAGE);
	snprintf(want, sizeof(want), "%s:4: id: invalid value '000", path);
	cr_expect(strncmp(err, want, strlen(want)) == 0, "got '%s'", err);
	snprintf(want, sizeof(want), "(%d bytes): at most %d bytes",
		 RDZV_ID_MAX + 1, RDZV_ID_MAX);
	cr_expect_not_null(strstr(err, want), "got '%s'", err);
}

Test(cfg_ini, bad_file_value_hidden_by_the_command_line)
{
	static const char *const args[] = {"--nnodes=1", "--config", "@", NULL};

	load_ok("[job]\nentrypoint = x\nnnodes = 0\n", args, NULL);
	cr_expect_eq(cfg.nnodes_max, 1);
}

/* --- loading errors: file:line: message --------------------------------- */

Test(cfg_ini, error_unknown_section)
{
	load_bad("[job]\nentrypoint = x\n[jobs]\nnnodes = 1\n", 3,
		 "unknown section [jobs] (known: job, rendezvous, logs, store, env)");
}

Test(cfg_ini, error_unknown_section_without_keys)
{
	load_bad("[job]\nentrypoint = x\n\n[extra]\n", 4, "unknown section [extra]");
}

Test(cfg_ini, error_duplicate_section)
{
	load_bad("[job]\nentrypoint = x\n[logs]\ndir = /tmp\n[job]\nnnodes = 1\n", 5,
		 "duplicate section [job] (first at line 1)");
}

Test(cfg_ini, error_duplicate_section_through_alias)
{
	load_bad("[rendezvous]\nbackend = c10d\n[rdzv]\n", 3,
		 "duplicate section [rendezvous] (first at line 1)");
}

Test(cfg_ini, error_unterminated_section)
{
	load_bad("[job\nentrypoint = x\n", 1, "unterminated section header '[job'");
}

Test(cfg_ini, error_unknown_key)
{
	load_bad("[job]\nentrypoint = x\nnnode = 2\n", 3,
		 "unknown key 'nnode' in [job] (did you mean 'nnodes'?)");
}

Test(cfg_ini, error_unknown_key_without_hint)
{
	load_bad("[logs]\n\ncolour = red\n", 3, "unknown key 'colour' in [logs]");
}

Test(cfg_ini, error_unknown_key_with_odd_characters)
{
	load_bad("[job]\nentry.point = x\n", 2, "unknown key 'entry.point' in [job]");
}

Test(cfg_ini, error_key_in_wrong_section)
{
	load_bad("[job]\nentrypoint = x\n[rendezvous]\nnnodes = 2\n", 4,
		 "key 'nnodes' belongs in [job], not [rendezvous]");
}

Test(cfg_ini, error_conf_key_in_wrong_section)
{
	load_bad("[job]\njoin_timeout = 2\n", 2,
		 "key 'join_timeout' belongs in [rendezvous], not [job]");
}

Test(cfg_ini, error_args_in_wrong_section)
{
	load_bad("[logs]\nargs = -v\n", 2, "key 'args' belongs in [job], not [logs]");
}

Test(cfg_ini, error_config_inside_a_job_file)
{
	load_bad("[job]\nconfig = other.ini\n", 2,
		 "'config' cannot be set inside a job file");
}

Test(cfg_ini, error_duplicate_key)
{
	load_bad("[job]\nnnodes = 1\nentrypoint = x\nnnodes = 2\n", 4,
		 "duplicate key 'nnodes' (first set at line 2)");
}

Test(cfg_ini, error_duplicate_key_through_spelling)
{
	load_bad("[rendezvous]\nrdzv_backend = c10d\nbackend = static\n", 3,
		 "duplicate key 'backend' (already set at line 2 as 'rdzv_backend')");
}

Test(cfg_ini, error_duplicate_key_dash_spelling)
{
	load_bad("[job]\nnproc_per_node = 1\nnproc-per-node = 2\n", 3,
		 "duplicate key 'nproc-per-node' (already set at line 2 as "
		 "'nproc_per_node')");
}

Test(cfg_ini, error_duplicate_conf_key)
{
	load_bad("[rendezvous]\njoin_timeout = 1\njoin-timeout = 2\n", 3,
		 "duplicate key 'join-timeout'");
}

Test(cfg_ini, error_duplicate_entrypoint)
{
	load_bad("[job]\nentrypoint = a\ntraining_script = b\n", 3,
		 "duplicate key 'training_script' (already set at line 2 as "
		 "'entrypoint')");
}

Test(cfg_ini, error_duplicate_env)
{
	load_bad("[env]\nA = 1\nB = 2\nA = 3\n", 4,
		 "duplicate key 'A' (first set at line 2)");
}

Test(cfg_ini, error_key_outside_a_section)
{
	load_bad("; top\nnnodes = 2\n[job]\n", 2,
		 "key 'nnodes' outside a section (start with [job])");
}

Test(cfg_ini, error_malformed_line)
{
	load_bad("[job]\nentrypoint = x\njust some words\n", 3,
		 "malformed line 'just some words': expected 'key = value' or "
		 "'[section]'");
}

Test(cfg_ini, error_missing_key_name)
{
	load_bad("[job]\n= 3\n", 2, "missing key name before '='");
}

Test(cfg_ini, error_line_too_long)
{
	char text[600];

	snprintf(text, sizeof(text), "[job]\nentrypoint = x\nargs = %0400d\n", 0);
	load_bad(text, 3, "line too long");
}

Test(cfg_ini, error_first_error_wins)
{
	load_bad("[job]\nbogus = 1\n[nope]\nalso wrong\n", 2, "unknown key 'bogus'");
}

Test(cfg_ini, error_undefined_variable)
{
	load_bad("[job]\nentrypoint = x\n[logs]\ndir = ${NO_SUCH_VAR}/logs\n", 4,
		 "dir: undefined variable 'NO_SUCH_VAR' (set it, or write "
		 "${NO_SUCH_VAR:-default})");
}

Test(cfg_ini, error_bare_dollar)
{
	load_bad("[job]\nentrypoint = x\nargs = $HOME\n", 3,
		 "args: '$' must start ${NAME} or ${NAME:-default}; write $$ for a "
		 "literal '$'");
}

Test(cfg_ini, error_trailing_dollar)
{
	load_bad("[env]\nA = cost$\n", 2, "A: '$' must start ${NAME}");
}

Test(cfg_ini, error_unterminated_variable)
{
	load_bad("[job]\nentrypoint = ${HOME\n", 2,
		 "entrypoint: unterminated '${' in '${HOME'");
}

Test(cfg_ini, error_bad_variable_syntax)
{
	load_bad("[job]\nentrypoint = ${A-b}\n", 2,
		 "entrypoint: bad variable reference '${A-b}': expected ${NAME} or "
		 "${NAME:-default}");
}

Test(cfg_ini, error_empty_variable_name)
{
	load_bad("[job]\nentrypoint = ${}\n", 2, "bad variable reference '${}'");
}

Test(cfg_ini, error_unbalanced_quotes)
{
	load_bad("[job]\nentrypoint = x\nargs = --name \"a b\n", 3,
		 "args: unbalanced quotes in '--name \"a b'");
}

Test(cfg_ini, error_entrypoint_with_arguments)
{
	load_bad("[job]\nentrypoint = train.py --lr 1\n", 2,
		 "entrypoint: expected one program, got 'train.py --lr 1' (put its "
		 "arguments in 'args')");
}

Test(cfg_ini, error_args_without_entrypoint)
{
	load_bad("[job]\nnnodes = 1\nargs = -v\n", 3,
		 "args: no entrypoint to pass them to (set 'entrypoint' in [job])");
}

Test(cfg_ini, error_bad_conf_value)
{
	load_bad("[rendezvous]\nbackend = c10d\njoin_timeout = soon\n", 3,
		 "rdzv_conf: invalid value 'soon' for 'join_timeout'");
}

/* rdzv_conf text is torchrun's: an unknown key in it passes (cfg_notices
 * names it); a key of the file's own sections must still be known. */
Test(cfg_ini, unknown_conf_key_in_conf_text)
{
	load_ok("[job]\nentrypoint = x\n[rendezvous]\nconf = bogus=1,join_timeout=8\n", NULL, NULL);
	cr_expect_str_eq(cfg.rdzv.unknown, "bogus");
	cr_expect_eq(cfg.rdzv.join_timeout, 8);
	cfg_release(&cfg);
	cfg_init(&cfg);
	load_bad("[rendezvous]\nbogus = 1\n", 2, "unknown key 'bogus'");
	load_bad("[rendezvous]\n\nconf = join_timeout=x\n", 3,
		 "rdzv_conf: invalid value 'x' for 'join_timeout'");
	cfg_release(&cfg);
	cfg_init(&cfg);
}

Test(cfg_ini, error_conf_key_value_with_comma)
{
	load_bad("[rendezvous]\nstore_type = tcp,x=1\n", 2,
		 "store_type: a value cannot contain ','");
}

Test(cfg_ini, error_env_bad_name)
{
	load_bad("[env]\nGOOD = 1\n9BAD = 2\n", 3, "invalid variable name '9BAD' in [env]");
}

Test(cfg_ini, error_env_contract_variable)
{
	load_bad("[env]\nRANK = 3\n", 2,
		 "'RANK' is set by crun for each worker; [env] cannot change it");
}

Test(cfg_ini, error_env_torchelastic_variable)
{
	load_bad("[env]\nTORCHELASTIC_RUN_ID = x\n", 2, "'TORCHELASTIC_RUN_ID' is set by crun");
}

Test(cfg_ini, error_leaves_cfg_untouched)
{
	cr_assert_eq(run("[job]\nnnodes = 2\nentrypoint = x\n[env]\nA=1\nbad key\n",
			 NULL, NULL),
		     CRUN_EUSAGE);
	cr_expect_null(cfg.raw[CFG_nnodes]);
	cr_expect_eq(cfg.nenv, 0);
	cr_expect_eq(cfg.argc, 0);
}

Test(cfg_ini, error_unreadable_file)
{
	char want[300];
	char *argv[] = {(char *)"crun", (char *)"--config", path, NULL};
	char *noenv[] = {NULL};
	int done = 0;

	cr_assert_eq(cfg_parse_args(&cfg, 3, argv, &done, err, sizeof(err)), 0);
	cr_assert_eq(cfg_load_job(&cfg, noenv, err, sizeof(err)), CRUN_EUSAGE);
	snprintf(want, sizeof(want), "%s: cannot open job file: No such file or directory",
		 path);
	cr_expect_str_eq(err, want);
}

Test(cfg_ini, error_directory)
{
	char *argv[] = {(char *)"crun", (char *)"--config", dir, NULL};
	char *noenv[] = {NULL};
	int done = 0;

	cr_assert_eq(cfg_parse_args(&cfg, 3, argv, &done, err, sizeof(err)), 0);
	cr_assert_eq(cfg_load_job(&cfg, noenv, err, sizeof(err)), CRUN_EUSAGE);
	cr_expect_not_null(strstr(err, "cannot read job file: Is a directory"), "%s", err);
}

Test(cfg_ini, empty_file_is_fine)
{
	static const char *const args[] = {"--config", "@", "/bin/true", NULL};

	load_ok("", args, NULL);
	cr_expect_str_eq(cfg.argv[0], "/bin/true");
}

Test(cfg_ini, print_config_shows_file_origins)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *fp;
	char want[300];

	load_ok("[job]\nentrypoint = x\nnproc_per_node = 3\n", NULL, NULL);
	fp = open_memstream(&buf, &len);
	cfg_print(&cfg, fp);
	fclose(fp);
	snprintf(want, sizeof(want), "# job file (%s:3: nproc_per_node)", path);
	cr_expect_not_null(strstr(buf, want), "%s", buf);
	free(buf);
}

/* Scripts resolve next to the job file; programs on PATH, absolute paths
 * and modules stay as written. */
Test(cfg_ini, entrypoint_relative_to_the_job_file)
{
	load_ok("[job]\nentrypoint = ../examples/train.py\n", NULL, NULL);
	cr_expect_str_eq(cfg.argv[0], beside("../examples/train.py"));
	cfg_release(&cfg);
	cfg_init(&cfg);
	load_ok("[job]\nentrypoint = sub/run.sh\n", NULL, NULL);
	cr_expect_str_eq(cfg.argv[0], beside("sub/run.sh"));
	cfg_release(&cfg);
	cfg_init(&cfg);
	load_ok("[job]\nentrypoint = torchrun\n", NULL, NULL);
	cr_expect_str_eq(cfg.argv[0], "torchrun");
	cfg_release(&cfg);
	cfg_init(&cfg);
	load_ok("[job]\nentrypoint = /opt/x/train.py\n", NULL, NULL);
	cr_expect_str_eq(cfg.argv[0], "/opt/x/train.py");
	cfg_release(&cfg);
	cfg_init(&cfg);
	load_ok("[job]\nentrypoint = pkg.train\nmodule = true\n", NULL, NULL);
	cr_expect_str_eq(cfg.argv[0], "pkg.train");
}

/*
 * ${X} expansion is bounded: per value (--config_max_value, 1 MiB) and for
 * the whole file (--config_max_expansion, 4 MiB), each failing with the
 * file:line and the limit rather than growing without end (a 576 KB file of
 * ${X} with a 20 KB X took 4.4 GB).
 */
static char *big_x_env[2];

static void expansion_bad(const char *text, int line, const char *want)
{
	char prefix[200];
	static char x[2 + 20000 + 1];
	int rc;

	memset(x, 'a', sizeof(x) - 1);
	memcpy(x, "X=", 2);
	x[sizeof(x) - 1] = '\0';
	big_x_env[0] = x;
	rc = run(text, NULL, big_x_env);
	cr_assert_eq(rc, CRUN_EUSAGE, "no error for %zu bytes of job file",
		     strlen(text));
	snprintf(prefix, sizeof(prefix), "%s:%d: ", path, line);
	cr_assert(strncmp(err, prefix, strlen(prefix)) == 0,
		  "error '%s' does not start with '%s'", err, prefix);
	cr_assert_not_null(strstr(err, want), "error '%s' lacks '%s'", err, want);
}

/* n indented lines of 20 "${X}" each, after "KEY =" on one line. */
static void put_refs(char *text, size_t cap, const char *key, int n)
{
	size_t len = strlen(text);

	len += (size_t)snprintf(text + len, cap - len, "%s =\n", key);
	for (int i = 0; i < n; i++) {
		len += (size_t)snprintf(text + len, cap - len, " ");
		for (int j = 0; j < 20; j++)
			len += (size_t)snprintf(text + len, cap - len, "${X}");
		len += (size_t)snprintf(text + len, cap - len, "\n");
	}
}

Test(cfg_ini, error_expanded_value_too_long)
{
	static char text[16384];

	/* 60 x 20 KB = 1.2 MB in one value. */
	snprintf(text, sizeof(text), "[job]\nentrypoint = x\n");
	put_refs(text, sizeof(text), "args", 3);
	expansion_bad(text, 3, "args: value longer than 1048576 bytes after "
			       "${} expansion (config_max_value)");
}

Test(cfg_ini, error_expansion_too_large)
{
	static char text[65536];
	char key[16];

	/* Five values of 50 x 20 KB (under 1 MiB each), 5 MB in all: the
	 * fifth passes 4 MiB. */
	snprintf(text, sizeof(text), "[job]\nentrypoint = x\n[env]\n");
	for (int i = 1; i <= 5; i++) {
		snprintf(key, sizeof(key), "V%d", i);
		put_refs(text, sizeof(text), key, 2);
		strcat(text, " ${X}${X}${X}${X}${X}${X}${X}${X}${X}${X}\n");
	}
	expansion_bad(text, 4 + 4 * 4,
		      "V5: the job file's values pass 4194304 bytes after ${} "
		      "expansion (config_max_expansion)");
}

static void again(void)
{
	cfg_release(&cfg);
	cfg_init(&cfg);
	err[0] = '\0';
}

/* The bounds are options (and CRUN_ variables) read before the file. */
Test(cfg_ini, expansion_bounds_are_options)
{
	static const char text[] = "[job]\nentrypoint = x\nargs = ${X}\n"
				   "[env]\nA = ${X}\nB = ${X}\n";
	static const char *const small[] = {"--config_max_value=1K", "--config",
					    "@", NULL};
	static const char *const bad[] = {"--config_max_value=1x", "--config",
					  "@", NULL};
	static const char *const big[] = {"--config_max_expansion=2G",
					  "--config", "@", NULL};
	char xv[2 + 2000 + 1], *envp[3] = {xv, NULL, NULL};

	memset(xv, 'a', sizeof(xv) - 1);
	memcpy(xv, "X=", 2);
	xv[sizeof(xv) - 1] = '\0';
	/* 2000 bytes per value, 6000 in all: fine by default. Each run
	 * starts from a fresh cfg (again()). */
	cr_assert_eq(run(text, NULL, envp), 0, "%s", err);
	again();
	cr_assert_eq(run(text, small, envp), CRUN_EUSAGE);
	cr_expect_not_null(strstr(err, "args: value longer than 1024 bytes"),
			   "%s", err);
	cr_expect_not_null(strstr(err, "config_max_value"), "%s", err);
	again();
	envp[1] = (char *)"CRUN_CONFIG_MAX_EXPANSION=5000";
	cr_assert_eq(run(text, NULL, envp), CRUN_EUSAGE);
	cr_expect_not_null(strstr(err, "B: the job file's values pass 5000 "
				       "bytes after ${} expansion "
				       "(config_max_expansion)"),
			   "%s", err);
	again();
	envp[1] = NULL;
	cr_assert_eq(run(text, bad, envp), CRUN_EUSAGE);
	cr_expect_not_null(strstr(err, "config_max_value"), "%s", err);
	cr_expect_not_null(strstr(err, "'1x'"), "%s", err);
	cr_expect_null(strchr(err, '\n'), "%s", err);
	again();
	cr_assert_eq(run(text, big, envp), CRUN_EUSAGE);
	cr_expect_not_null(strstr(err, "config_max_expansion"), "%s", err);
	cr_expect_not_null(strstr(err, "out of range"), "%s", err);
	again();
	envp[1] = (char *)"CRUN_CONFIG_MAX_VALUE=0";
	cr_assert_eq(run(text, NULL, envp), CRUN_EUSAGE);
	cr_expect_not_null(strstr(err, "CRUN_CONFIG_MAX_VALUE"), "%s", err);
	again();
	/* A file cannot lift its own bounds. */
	load_bad("[job]\nentrypoint = x\nconfig_max_value = 1G\n", 3,
		 "'config_max_value' cannot be set inside a job file");
}

/* A job file of exactly n bytes: a [job] section padded with comments. */
static char *sized_text(size_t n)
{
	static const char head[] = "[job]\nentrypoint = /bin/true\n";
	char *t = malloc(n + 1);
	size_t at = strlen(head);

	cr_assert(t != NULL && n > at + 2);
	memcpy(t, head, at);
	while (at < n) {
		/* Comment lines; a last line of one byte is a blank line. */
		size_t line = n - at > 100 ? 100 : n - at;

		memset(t + at, 'a', line);
		t[at] = '#';
		t[at + line - 1] = '\n';
		at += line;
	}
	t[n] = '\0';
	cr_assert_eq(strlen(t), n);
	return t;
}

/* --config_max_bytes: a file of exactly the bound is read, one byte more is
 * refused with a message naming the bound and the option; the default
 * (1 MiB) the same way. */
Test(cfg_ini, file_size_bound)
{
	static const char *const opt[] = {"--config_max_bytes=4000", "--config",
					  "@", NULL};
	char want[300], *t;

	t = sized_text(4000);
	cr_assert_eq(run(t, opt, NULL), 0, "%s", err);
	free(t);
	again();
	t = sized_text(4001);
	cr_assert_eq(run(t, opt, NULL), CRUN_EUSAGE);
	snprintf(want, sizeof(want),
		 "%s: job file larger than 4000 bytes (config_max_bytes)",
		 path);
	cr_expect_str_eq(err, want);
	free(t);

	again();
	t = sized_text(1024 * 1024);
	cr_assert_eq(run(t, NULL, NULL), 0, "%s", err);
	free(t);
	again();
	t = sized_text(1024 * 1024 + 1);
	cr_assert_eq(run(t, NULL, NULL), CRUN_EUSAGE);
	snprintf(want, sizeof(want),
		 "%s: job file larger than 1024 KiB (config_max_bytes)", path);
	cr_expect_str_eq(err, want);
	free(t);

	/* From the environment too, and never from the file itself. */
	again();
	{
		char *envp[] = {(char *)"CRUN_CONFIG_MAX_BYTES=2K", NULL};

		t = sized_text(2049);
		cr_assert_eq(run(t, NULL, envp), CRUN_EUSAGE);
		cr_expect_not_null(strstr(err, "larger than 2 KiB "
					       "(config_max_bytes)"),
				   "%s", err);
		free(t);
	}
	again();
	load_bad("[job]\nconfig_max_bytes = 2M\n", 2,
		 "'config_max_bytes' cannot be set inside a job file");
}

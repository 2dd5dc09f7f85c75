/*
 * The crun command: parse and validate the command line, then hand over to
 * the agent (or to a subcommand such as `crun store`). Usage errors exit 2
 * with one line naming the option and the value.
 */
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crun/binding.h"
#include "crun/cfg.h"
#include "crun/err.h"
#include "crun/log.h"
#include "crun/fingerprint.h"
#include "crun/pyexec.h"
#include "../agent/agent_run.h"
#include "launcher.h"

extern char **environ;

static int usage_error(const char *msg)
{
	log_msg(LOG_ERROR, "crun", "error: %s (see crun --help)", msg);
	return 2;
}

#ifdef _WIN32
/* A path names a folder (C:\\x, .\\x, x/y) rather than a command. */
#define IS_PATH(s) (strpbrk((s), "/\\:") != NULL)
#define PATH_SEP ";"
/* What Windows tries after a command's name, as its shell does. */
static const char *const exec_ext[] = {"", ".exe", ".com", ".bat", ".cmd"};
#else
#define IS_PATH(s) (strchr((s), '/') != NULL)
#define PATH_SEP ":"
static const char *const exec_ext[] = {""};
#endif

/* Is buf, or buf with one of exec_ext, a program file? */
static int program_file(const char *file)
{
	char buf[PATH_MAX];
	struct stat st;

	for (size_t i = 0; i < sizeof(exec_ext) / sizeof(exec_ext[0]); i++) {
		snprintf(buf, sizeof(buf), "%s%s", file, exec_ext[i]);
		if (access(buf, X_OK) == 0 && stat(buf, &st) == 0 &&
		    S_ISREG(st.st_mode))
			return 1;
	}
	return 0;
}

/* Is cmd executable, directly or through PATH? */
static int executable(const char *cmd)
{
	const char *path = getenv("PATH");
	char buf[PATH_MAX];

	if (IS_PATH(cmd))
		return program_file(cmd);
	if (path == NULL)
		path = "/usr/local/bin:/usr/bin:/bin";
	while (*path) {
		size_t n = strcspn(path, PATH_SEP);

		snprintf(buf, sizeof(buf), "%.*s/%s", (int)(n ? n : 1),
			 n ? path : ".", cmd);
		if (program_file(buf))
			return 1;
		path += n + (path[n] == *PATH_SEP);
	}
	return 0;
}

/*
 * Whether the workers run under Python: -m, a .py script, or (as torchrun
 * does for any script) a file that is readable but not executable; a binary
 * or an executable script runs directly. Returns 1, 0, or -1 with msg set
 * when the entrypoint does not exist: a usage error found before anything
 * starts.
 */
static int runs_python(const struct crun_cfg *cfg, char *msg, size_t len)
{
	const char *ep = cfg->argv[0];
	size_t n = strlen(ep);
	struct stat st;

	if (cfg->module && !cfg->no_python)
		return 1;
	if (!cfg->no_python && n > 3 && strcmp(ep + n - 3, ".py") == 0) {
		if (access(ep, R_OK) != 0) {
			snprintf(msg, len, "training_script '%s': no such file",
				 ep);
			return -1;
		}
		return 1;
	}
	if (executable(ep))
		return 0;
	if (!cfg->no_python && IS_PATH(ep) && stat(ep, &st) == 0 &&
	    S_ISREG(st.st_mode) && access(ep, R_OK) == 0)
		return 1;
	snprintf(msg, len, "training_script '%s': %s", ep,
		 IS_PATH(ep) ? "not an executable file"
			     : "command not found in PATH");
	return -1;
}

/* Decide how workers run; choose and announce the interpreter once. */
static int setup_entrypoint(struct crun_cfg *cfg, int announce, char *msg,
			    size_t len)
{
	struct crun_pyexec px;
	int py = runs_python(cfg, msg, len);

	if (py <= 0)
		return py;
	pyexec_choose(environ, 10000, &px);
	cfg->python = strdup(px.path);
	cfg->python_why = strdup(px.why);
	if (announce && px.probed)
		log_msg(LOG_INFO, "crun", "python workers run under %s (%s)",
			px.path, px.why);
	return 0;
}

/* --print-config: the binding each local rank would get, and why. */
static int print_binding(const struct crun_cfg *cfg)
{
	struct crun_binding_plan *plan;
	char msg[512], line[512];

	if (cfg->bind_mode == CRUN_BIND_NONE)
		return 0;
	if (binding_plan_system(cfg->bind_mode, cfg->nproc_per_node, &plan, msg,
				sizeof(msg))) {
		log_msg(LOG_ERROR, "crun", "%s", msg);
		return 1;
	}
	printf("%-24s = %s from %s\n", "binding (resolved)",
	       binding_mode_name(plan->mode), plan->source);
	for (int i = 0; i < plan->n; i++) {
		binding_describe(plan, i, line, sizeof(line));
		printf("binding: %s\n", line);
	}
	for (char *p = plan->notes, *nl; (nl = strchr(p, '\n')); p = nl + 1)
		printf("binding note: %.*s\n", (int)(nl - p), p);
	binding_plan_free(plan);
	return 0;
}

/* --print-config: this node's fingerprint, as its descriptor carries it. */
static void print_fingerprint(const struct crun_cfg *cfg)
{
	struct crun_fingerprint fp;
	char text[FP_MAX_TEXT + 1];
	double t = cfg->env_check_timeout > 1 ? cfg->env_check_timeout : 1;

	if (cfg->env_check == CRUN_ENV_CHECK_OFF) {
		printf("%-24s = %-28s # env_check=off\n", "fingerprint", "");
		return;
	}
	fingerprint_collect(cfg->python, environ, (int)(t * 1000), &fp);
	fingerprint_format(&fp, text, sizeof(text));
	printf("%-24s = %-28s # %s\n", "fingerprint", text,
	       cfg->python ? "driver; torch, cuda, nccl of the python above"
			   : "driver (not a python entrypoint)");
}

int main(int argc, char **argv)
{
	struct crun_cfg cfg;
	char msg[1024];
	int done = 0, rc;

	/* Before any socket exists: a peer that hangs up must cost an EPIPE,
	 * never the process (the agent's stores, `crun store`, the clients). */
	signal(SIGPIPE, SIG_IGN);
#ifdef _WIN32
	/* Where crun keeps its files is $TMPDIR, there as here (Python's
	 * tempfile reads it first there too): the user's TEMP unless set. */
	if (getenv("TMPDIR") == NULL && getenv("TEMP") != NULL)
		setenv("TMPDIR", getenv("TEMP"), 0);
#endif
	if (argc > 1 && strcmp(argv[1], "store") == 0)
		return cmd_store_main(argc - 1, argv + 1);
	if (argc > 1 && strcmp(argv[1], "status") == 0)
		return cmd_status_main(argc - 1, argv + 1);

	cfg_init(&cfg);
	/* The steps in order (cfg.h): the job file's name and bounds may come
	 * from the command line or the environment. */
	rc = cfg_parse_args(&cfg, argc, argv, &done, msg, sizeof(msg));
	if (rc == 0 && !done)
		rc = cfg_apply_env(&cfg, environ);
	if (rc == 0 && !done)
		rc = cfg_load_job(&cfg, environ, msg, sizeof(msg));
	if (rc == 0 && !done)
		rc = cfg_apply_slurm(&cfg, environ, msg, sizeof(msg));
	if (rc == 0 && !done)
		rc = cfg_finalize(&cfg, msg, sizeof(msg));
	if (rc) {
		cfg_release(&cfg);
		return usage_error(msg);
	}
	if (done) {
		rc = cfg.print_completion
			 ? completion_print(stdout, cfg.print_completion)
			 : 0;
		cfg_release(&cfg);
		return rc;
	}
	if (cfg.argc > 0 &&
	    setup_entrypoint(&cfg, !cfg.print_config, msg, sizeof(msg))) {
		cfg_release(&cfg);
		return usage_error(msg);
	}
	if (cfg.print_config) {
		cfg_print(&cfg, stdout);
		rc = print_binding(&cfg);
		print_fingerprint(&cfg);
		cfg_release(&cfg);
		return rc;
	}
	cfg_notices(&cfg);
	rc = agent_run(&cfg);
	cfg_release(&cfg);
	return rc;
}

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

#include "crun/cfg.h"
#include "crun/err.h"
#include "../agent/agent.h"
#include "launcher.h"

extern char **environ;

static int usage_error(const char *msg)
{
	fprintf(stderr, "crun: error: %s (see crun --help)\n", msg);
	return 2;
}

/* Is cmd executable, directly or through PATH? */
static int executable(const char *cmd)
{
	const char *path = getenv("PATH");
	char buf[PATH_MAX];

	if (strchr(cmd, '/'))
		return access(cmd, X_OK) == 0;
	if (path == NULL)
		path = "/usr/local/bin:/usr/bin:/bin";
	while (*path) {
		size_t n = strcspn(path, ":");
		struct stat st;

		snprintf(buf, sizeof(buf), "%.*s/%s", (int)(n ? n : 1),
			 n ? path : ".", cmd);
		if (access(buf, X_OK) == 0 && stat(buf, &st) == 0 &&
		    S_ISREG(st.st_mode))
			return 1;
		path += n + (path[n] == ':');
	}
	return 0;
}

/* A missing entrypoint is a usage error, found before anything starts. */
static int check_entrypoint(const struct crun_cfg *cfg, char *msg, size_t len)
{
	const char *ep = cfg->argv[0];
	size_t n = strlen(ep);
	int python = !cfg->no_python &&
		     (cfg->module || (n > 3 && strcmp(ep + n - 3, ".py") == 0));

	if (cfg->module)
		return 0;
	if (python) {
		if (access(ep, R_OK) != 0) {
			snprintf(msg, len, "training_script '%s': no such file",
				 ep);
			return -1;
		}
		return 0;
	}
	if (!executable(ep)) {
		snprintf(msg, len, "training_script '%s': %s", ep,
			 strchr(ep, '/') ? "not an executable file"
					 : "command not found in PATH");
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct crun_cfg cfg;
	char msg[1024];
	int done = 0, rc;

	/* Before any socket exists: a peer that hangs up must cost an EPIPE,
	 * never the process (the agent's stores, `crun store`, the clients). */
	signal(SIGPIPE, SIG_IGN);
	if (argc > 1 && strcmp(argv[1], "store") == 0)
		return cmd_store_main(argc - 1, argv + 1);

	cfg_init(&cfg);
	rc = cfg_parse_args(&cfg, argc, argv, NULL, &done, msg, sizeof(msg));
	if (rc == 0 && !done)
		rc = cfg_apply_slurm(&cfg, environ, msg, sizeof(msg));
	if (rc == 0 && !done)
		rc = cfg_finalize(&cfg, msg, sizeof(msg));
	if (rc) {
		cfg_release(&cfg);
		return usage_error(msg);
	}
	if (done) {
		cfg_release(&cfg);
		return 0;
	}
	if (cfg.print_config) {
		cfg_print(&cfg, stdout);
		cfg_release(&cfg);
		return 0;
	}
	if (check_entrypoint(&cfg, msg, sizeof(msg))) {
		cfg_release(&cfg);
		return usage_error(msg);
	}
	rc = agent_run(&cfg);
	cfg_release(&cfg);
	return rc;
}

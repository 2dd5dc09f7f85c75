/*
 * libFuzzer target for the command line (src/cfg/cfg.c): the input is split at
 * NUL bytes into arguments after "crun", parsed with an empty environment,
 * then finalized. A usage error must come with a one-line message. --help
 * and --version write to stdout: run with -close_fd_mask=1.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "crun/cfg.h"
#include "crun/err.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAXARGS 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char *envp[] = {NULL};
	char *argv[MAXARGS + 2], *buf, err[1024];
	struct crun_cfg cfg;
	int argc = 1, done = 0, rc;
	size_t i, start = 0;

	if (size > 4096)
		return 0;
	buf = malloc(size + 1);
	if (buf == NULL)
		return 0;
	memcpy(buf, data, size);
	buf[size] = '\0';
	argv[0] = "crun";
	for (i = 0; i <= size && argc <= MAXARGS; i++)
		if (buf[i] == '\0') {
			argv[argc++] = buf + start;
			start = i + 1;
		}
	argv[argc] = NULL;
	cfg_init(&cfg);
	err[0] = '\0';
	rc = cfg_parse_args(&cfg, argc, argv, &done, err, sizeof(err));
	if (rc == 0 && !done)
		rc = cfg_apply_env(&cfg, envp);
	if (rc == 0 && !done)
		rc = cfg_finalize(&cfg, err, sizeof(err));
	if (rc != 0 && (err[0] == '\0' || strchr(err, '\n') != NULL))
		abort();
	cfg_release(&cfg);
	free(buf);
	return 0;
}

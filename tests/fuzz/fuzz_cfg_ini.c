/*
 * libFuzzer target for the INI job-file loader (src/cfg/cfg_ini.c) and the
 * checks after it (cfg_finalize). The input is a job file's bytes, written
 * to an in-memory file (memfd, opened by its /proc path: no disk I/O per
 * run, which would make this target 100 times slower); ${VAR} expansion sees a
 * small fixed environment. A failure must come with a one-line message.
 */
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "crun/cfg.h"
#include "crun/err.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char path[64];
static int fd = -1;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char *envp[] = {"HOME=/nonexistent", "N=2", "EMPTY=", NULL};
	struct crun_cfg cfg;
	char err[1024];
	int rc;

	if (size > 8192)
		return 0;
	if (fd < 0) {
		fd = memfd_create("crun-fuzz.ini", 0);
		if (fd < 0)
			abort();
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	}
	if (ftruncate(fd, 0) != 0 ||
	    pwrite(fd, data, size, 0) != (ssize_t)size)
		abort();
	cfg_init(&cfg);
	err[0] = '\0';
	rc = cfg_load_ini(&cfg, path, envp, err, sizeof(err));
	if (rc == 0)
		rc = cfg_finalize(&cfg, err, sizeof(err));
	if (rc != 0 && (err[0] == '\0' || strchr(err, '\n') != NULL))
		abort(); /* every failure says why, in one line */
	cfg_release(&cfg);
	return 0;
}

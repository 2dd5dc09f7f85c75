/*
 * The crun command on Windows (make windows): what runs there so far.
 * `crun store` serves the TCPStore wire as on Linux: a torch built without
 * libuv (every Windows wheel since 2.4) connects to it with use_libuv=False
 * and never meets the libuv error. `crun status` reads a job's rendezvous
 * (c10d or etcd) with the same code as on Linux. The agent (launching
 * workers) does not build for Windows yet: asking for it says so in one
 * line and exits 2, before anything starts.
 */
#include <stdio.h>
#include <string.h>

#include "crun/log.h"
#include "launcher.h"

static const char win_usage[] =
    "usage: crun store --port P [--host H] [options]   (see crun store "
    "--help)\n"
    "       crun status --rdzv_endpoint=H:P [options]   (see crun status "
    "--help)\n"
    "       crun --version\n"
    "\n"
    "This is crun for Windows. It runs the TCPStore-compatible store\n"
    "(`crun store`) and reads running jobs (`crun status`); launching\n"
    "workers is on Linux only for now.\n";

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "store") == 0)
		return cmd_store_main(argc - 1, argv + 1);
	if (argc > 1 && strcmp(argv[1], "status") == 0)
		return cmd_status_main(argc - 1, argv + 1);
	if (argc == 2 && strcmp(argv[1], "--version") == 0) {
		printf("crun %s (windows)\n", CRUN_VERSION);
		return 0;
	}
	if (argc == 2 &&
	    (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
		fputs(win_usage, stdout);
		return 0;
	}
	if (argc < 2) {
		log_msg(LOG_ERROR, "crun", "error: no command (see crun --help)");
		return 2;
	}
	log_msg(LOG_ERROR, "crun",
		"error: \"%s\": this Windows build runs only `crun store` "
		"and `crun status`; launching workers needs crun on Linux for "
		"now (see crun --help)",
		argv[1]);
	return 2;
}

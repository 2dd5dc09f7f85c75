/*
 * Subcommands of the crun binary. main.c dispatches on argv[1]; each
 * subcommand lives in its own file (tmux's one file per command).
 */
#ifndef CRUN_LAUNCHER_H
#define CRUN_LAUNCHER_H

/** `crun store [--host H] --port P …`: run the store alone in the foreground. */
int cmd_store_main(int argc, char **argv);

/** `crun status --rdzv_endpoint=H:P …`: show a running job, exit 0/1/2/3. */
int cmd_status_main(int argc, char **argv);

#endif

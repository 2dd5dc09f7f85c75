/*
 * Subcommands of the crun binary. main.c dispatches on argv[1]; each
 * subcommand lives in its own file (tmux's one file per command).
 */
#ifndef CRUN_LAUNCHER_H
#define CRUN_LAUNCHER_H

/** `crun store [--host H] --port P …`: run the store alone in the foreground. */
int cmd_store_main(int argc, char **argv);

#endif

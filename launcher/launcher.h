/*
 * Subcommands of the crun binary. main.c dispatches on argv[1]; each
 * subcommand lives in its own file (tmux's one file per command).
 */
#ifndef CRUN_LAUNCHER_H
#define CRUN_LAUNCHER_H

#include <stdio.h>

struct option;

/** `crun store [--host H] --port P …`: run the store alone in the foreground.
 */
int cmd_store_main(int argc, char **argv);

/** `crun status --rdzv_endpoint=H:P …`: show a running job, exit 0/1/2/3. */
int cmd_status_main(int argc, char **argv);

/** The long options of `crun store` and `crun status` (getopt's, ending
 * with an all-NULL entry): what they parse, and what completion offers. */
const struct option *cmd_store_options(void);
const struct option *cmd_status_options(void);

/** `crun --print-completion SHELL`: a completion script for bash, zsh or
 * tcsh, from the option tables (cfg's, store's, status's). 0, or 2 for an
 * unknown shell. */
int completion_print(FILE *fp, const char *shell);

#endif

/*
 * Where the agent writes, a part of the agent (logs.c): the run's log
 * directory and each attempt's, the round's failure report, the error file
 * a scheduler asks for, and the console as log.h's sink. Private to
 * agent/.
 */
#ifndef CRUN_AGENT_LOGS_H
#define CRUN_AGENT_LOGS_H

#include <limits.h>
#include <stddef.h>

#include "crun/cfg.h"
#include "crun/env.h"
#include "crun/log.h"
#include "crun/report.h"
#include "pool.h"

struct console;

struct logs {
	const struct crun_cfg *cfg;
	const char *host;
	char *root;	  /* <log_dir>/<run_id>, NULL: no files */
	int root_tmp;	  /* we made it up: remove after success */
	int kept;	  /* ... unless --redirects/--tee wrote files there */
	char *tag;	  /* scratch files only: <root>/<tag>.* */
	int private_dir;  /* ... in a directory of the run's own */
	char **scratch;	  /* with tag: every attempt's prefix, named so */
	int nscratch;
	int ready;	      /* logs_setup succeeded */
	char *attempt_dir;    /* <root>/attempt_<n>, NULL with tag */
	char *attempt_prefix; /* what the attempt's file names start with */
	/* The round's failures, kept until it is known whether the group
	 * restarts (on several nodes a job-wide decision). */
	struct crun_failure *pending;
	int npending;
	char report_path[PATH_MAX]; /* its failures.json, or "" */
	int error_file_done;	    /* TORCHELASTIC_ERROR_FILE written */
};

void logs_init(struct logs *l, const struct crun_cfg *cfg, const char *host);

/** The run's log directory (or scratch prefix); 0, or an error said. */
int logs_setup(struct logs *l);

/**
 * Name the files of attempt <generation>: create <root>/attempt_<n>/ (a
 * directory that exists is never reused), or, for scratch files only, the
 * prefix <root>/<tag>.attempt_<n>. of its error files.
 */
int logs_attempt(struct logs *l, int generation);

/**
 * The failures of the round that just ended (pool p, its ranks rk), saved to
 * the attempt's failures.json and kept in l->pending until logs_drop_report;
 * returns how many; *root is the root failure's index (report.h) when there
 * are any.
 */
int logs_collect(struct logs *l, const struct pool *p,
		 const struct crun_ranks *rk, int *root);

/** Print (print != 0) and forget the round's kept failure report. */
void logs_drop_report(struct logs *l, int print);

/** TORCHELASTIC_ERROR_FILE of crun's own environment, written once. */
void logs_write_error_file(struct logs *l, int status);

/** After the run: a log directory crun invented goes after a success. */
void logs_remove(struct logs *l, int exit_status);

void logs_free(struct logs *l);

/** log.h's sink while the agent runs: every line, on the console. */
void logs_on_log(void *data, enum log_level level, const char *line,
		 size_t len, const char *msg);

/** The console lines go to from now on (NULL: straight to the fds). */
void logs_set_console(struct console *c);

/** $TMPDIR/crun-<uid>, the user's own (made if need be): 0, or an error. */
int logs_user_dir(char *path, size_t len);

#endif

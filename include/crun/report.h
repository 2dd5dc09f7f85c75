/*
 * Failure reports: what failed, where, and why, without any change to user
 * code. A report entry carries the worker's identity, its exit code or
 * signal, the time, and either the content of the error file it wrote
 * (torchelastic's error.json schema) or the last lines of its stderr. The
 * report prints as one block in torchrun's layout and saves as JSON.
 */
#ifndef CRUN_REPORT_H
#define CRUN_REPORT_H

#include <stdio.h>
#include <sys/types.h>

struct crun_failure {
	int rank, local_rank, group_rank;
	pid_t pid;
	char host[256];
	int exitcode;	  /* 128+N for signal N */
	int signal;	  /* 0 when the worker exited */
	double time;	  /* epoch seconds: error file's, else detection */
	char *error_file; /* path, or NULL when none was written */
	char *message;	  /* error file's message, or NULL */
	char *traceback;  /* error file's py_callstack, else stderr tail */
	char *stacks;	  /* its stack, taken before crun killed it, or NULL */
};

void failure_release(struct crun_failure *f);

/**
 * Read a torchelastic error file into f->message, f->traceback and f->time.
 * Both the nested {"message": {"message", "extraInfo": {"py_callstack",
 * "timestamp"}}} and the flat {"message", "timestamp"} forms are accepted.
 * Returns 0, or a negative error if the file is missing or not that JSON.
 */
int failure_read_error_file(struct crun_failure *f, const char *path);

/** Index of the root cause: the failure observed first (ties: lowest). */
int report_root(const struct crun_failure *f, int n);

/** Print the failure block (torchrun's layout) for the entrypoint name. */
void report_print(FILE *fp, const char *entrypoint,
		  const struct crun_failure *f, int n);

/** Write the failures as JSON ({"entrypoint", "root_cause", "failures"}). */
int report_write_json(const char *path, const char *entrypoint,
		      const struct crun_failure *f, int n);

/**
 * Write the launcher's error file (torchrun does this when its own
 * TORCHELASTIC_ERROR_FILE is set, for schedulers): the root worker's error
 * file with "errorCode" set to its exit code when root has one, else a file in
 * the same schema whose message is why (root's stderr tail, if any, as the
 * callstack). root may be NULL (the job failed elsewhere, or before any worker
 * ran). Written to a temporary name and renamed. Returns 0 or an error.
 */
int report_write_error_file(const char *path, const struct crun_failure *root,
			    const char *why, int code);

#endif

/*
 * The Python interpreter that runs a job's Python workers (.py scripts and
 * -m modules), chosen once at start as torchrun would, but robust to a PATH
 * whose first python3 cannot import torch (a pyenv shim, a venv without
 * torch): $PYTHON_EXEC (torchrun's variable), else $PYTHON, else the first of
 * the PATH's python3 and the interpreter of the `torchrun` script on PATH
 * that can import torch (asked without importing it), else the first python3.
 */
#ifndef CRUN_PYEXEC_H
#define CRUN_PYEXEC_H

#include <limits.h>
#include <stddef.h>

struct crun_pyexec {
	char path[PATH_MAX]; /* what argv[0] of a Python worker is */
	char why[768];	     /* one clause: where it came from and why */
	int probed; /* chosen by asking interpreters (not a variable) */
};

/**
 * Choose the interpreter from envp's PYTHON_EXEC, PYTHON and PATH. Asks at
 * most a few interpreters whether they can find torch, each bounded by
 * timeout_ms. Always fills *out (falling back to "python3").
 */
void pyexec_choose(char **envp, int timeout_ms, struct crun_pyexec *out);

/**
 * Whether interpreter interp can find the torch package (without importing
 * it): 1 yes, 0 no (or it did not answer within timeout_ms, or cannot run).
 */
int pyexec_has_torch(const char *interp, char **envp, int timeout_ms);

/**
 * Run interp with argv (argv[0] included) and envp, stdin and stderr on
 * /dev/null, and collect at most len-1 bytes of its stdout into out
 * (NUL-terminated), killing it after timeout_ms. Blocking: call it off the
 * loop. 0 when it exited with status 0, else -1.
 */
int pyexec_output(const char *interp, char *const argv[], char **envp,
		  int timeout_ms, char *out, size_t len);

#endif

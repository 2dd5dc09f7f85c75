/*
 * The server side of torchelastic's FileTimer watchdog, on the agent's loop.
 * With TORCHELASTIC_ENABLE_FILE_TIMER=1 in crun's environment, the agent
 * makes a FIFO (TORCHELASTIC_TIMER_FILE, or a fresh name), gives its path to
 * the workers, and reads the JSON requests torch's FileTimerClient writes
 * there: {"version": 1, "pid", "scope_id", "expiration_time" (epoch seconds;
 * negative: release), "signal"}. A timer that expires sends its signal to
 * its pid, as torchrun's FileTimerServer does, but only to a process of this
 * agent's worker groups: a request naming any other pid is refused.
 * Private to agent/.
 */
#ifndef CRUN_FILETIMER_H
#define CRUN_FILETIMER_H

#include <sys/types.h>
#include <uv.h>

struct filetimer;

/** Whether pid belongs to one of the agent's workers; sets *rank if so. */
typedef int (*filetimer_owns_cb)(void *data, pid_t pid, int *rank);

/**
 * Create the FIFO at path (NULL: a fresh name under $TMPDIR) and start
 * reading it on loop. Returns 0 or a negative error (errmsg says why).
 */
int filetimer_new(uv_loop_t *loop, const char *path, filetimer_owns_cb owns,
		  void *data, struct filetimer **out, char *errmsg,
		  size_t errlen);

/**
 * Who sends an expired timer's SIGKILL (so that its owner can take the
 * worker's stack first); without one, the server sends it itself. Other
 * signals are always sent by the server.
 */
typedef void (*filetimer_kill_cb)(void *data, pid_t pid, int rank);

/** Let kill (with filetimer_new's data) send the SIGKILLs from now on. */
void filetimer_set_kill(struct filetimer *ft, filetimer_kill_cb kill_cb);

/** The FIFO's path, for the workers' TORCHELASTIC_TIMER_FILE. */
const char *filetimer_path(const struct filetimer *ft);

/** Forget every timer (the worker group is gone). */
void filetimer_clear(struct filetimer *ft);

/** Stop, remove the FIFO, and free ft once its handles are closed. */
void filetimer_close(struct filetimer *ft);

#endif

/*
 * A worker's stack (stacks.c), taken before crun kills it or while it runs:
 * py-spy's dump of every Python thread when py-spy is found, else the
 * standard library's faulthandler (before a kill only: it dumps to the
 * worker's stderr and the worker dies), else the kernel's view of where the
 * process waits (/proc/PID/wchan and /proc/PID/stack). Nothing here blocks
 * the loop: py-spy runs as a child with bounded output and every dump is
 * abandoned after a timeout. The agent's hang report and live stacks use it;
 * pystack.h reads what it returns.
 */
#ifndef CRUN_STACKS_H
#define CRUN_STACKS_H

#include <stddef.h>
#include <sys/types.h>
#include <uv.h>

struct stacks;

/* python: the process runs a Python interpreter */
struct stacks_proc {
	pid_t pid;
	int python;
};

enum stacks_mode { STACKS_BEFORE_KILL, STACKS_LIVE };

/** Every stack is taken or abandoned; stacks_text may be read now. */
typedef void (*stacks_done_cb)(struct stacks *s, void *data);

/* The longest text kept for one process (a longer dump is cut, and says so). */
#define STACKS_MAX_TEXT (64 * 1024)

/**
 * Take the stacks of n processes at once, asynchronously on loop; cb once,
 * when all are done or abandoned after timeout_s (one line says which were
 * abandoned). LIVE: py-spy only, nothing is signalled (without py-spy,
 * stacks_text says so in one line; a non-Python process gets its wait
 * channel, which signals nothing either). BEFORE_KILL: py-spy when found,
 * else faulthandler (SIGABRT to a Python worker whose environment has
 * PYTHONFAULTHANDLER set: it dumps all threads to its stderr and dies; its
 * owner then hands that stderr over with stacks_exited), else (non-Python,
 * or a process in uninterruptible sleep) /proc/PID/wchan and
 * /proc/PID/stack. p is copied. Returns 0 with *out set (cb runs later,
 * from the loop, never before stacks_start returns), or a negative libuv
 * error (then cb never runs and *out is NULL).
 */
int stacks_start(uv_loop_t *loop, const struct stacks_proc *p, size_t n,
		 enum stacks_mode mode, double timeout_s, stacks_done_cb cb,
		 void *data, struct stacks **out);

/**
 * The process p[i] exited: tail is the end of its stderr (len bytes, need
 * not be NUL-terminated), where faulthandler wrote its dump. Only a
 * faulthandler dump waiting for that exit takes it; otherwise (py-spy or
 * /proc already answered, or after cb) this does nothing, so the owner may
 * call it for every exit. Returns 1 when stacks sent p[i] faulthandler's
 * SIGABRT (a death by it is the kill's), else 0.
 */
int stacks_exited(struct stacks *s, size_t i, const char *tail, size_t len);

/**
 * After cb: the text taken for p[i] (NUL-terminated; at most
 * STACKS_MAX_TEXT bytes and a line saying it was cut), or a one-line why.
 * len (may be NULL) receives its length.
 */
const char *stacks_text(const struct stacks *s, size_t i, size_t *len);

/** Whether p[i]'s text is a stack (1) or a one-line why (0). After cb. */
int stacks_taken(const struct stacks *s, size_t i);

/**
 * How p[i]'s stack was taken: "py-spy", "faulthandler" (the text is what
 * the process wrote to its own stderr: its owner has shown it already) or
 * "/proc"; NULL when the text is a why. After cb.
 */
const char *stacks_source(const struct stacks *s, size_t i);

/**
 * Release s (also before cb: pending dumps are abandoned and cb never
 * runs; also from within cb). Its py-spy children are killed and s is freed
 * once their handles are closed.
 */
void stacks_free(struct stacks *s);

/*
 * A process as /proc tells it, read through a root that a test can point
 * at a fake tree. Every byte read there is untrusted: bounded, and shown
 * with anything unprintable replaced.
 */
struct stacks_pstate {
	char state;	/* /proc/PID/stat's state letter, '?' when unknown */
	char comm[64];	/* its command name */
	char wchan[64]; /* /proc/PID/wchan, "" when none or unreadable */
};

/** The /proc root read from now on (default "/proc"); for tests. */
void stacks_set_proc_root(const char *root);

/**
 * Read pid's state, command name and wait channel. Returns 0, or
 * UV_ESRCH when the process is gone (or its stat cannot be read or
 * parsed: then st->state is '?').
 */
int stacks_proc_state(pid_t pid, struct stacks_pstate *st);

/**
 * One line naming a process that SIGKILL did not stop, into out (len):
 * "rank R (pid P) is in uninterruptible sleep in `wchan`, it cannot be
 * killed" for state D, else what its state is. Returns st.state ('?' when
 * the process is gone: then out says it is gone).
 */
char stacks_describe_unkillable(int rank, pid_t pid, char *out, size_t len);

#endif

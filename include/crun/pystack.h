/*
 * Where a Python process is, from a text dump of its stacks, and one line
 * that groups many ranks by it: "ranks 0-2,4-7 in all_reduce (train.py:41);
 * rank 3 in wait (train.py:37) on n2".
 *
 * Two dump formats are read, both as their tools write them:
 *   - py-spy 0.4 `dump`: "Thread 21689 (idle): \"MainThread\"" then one
 *     frame a line, innermost first, "    func (file.py:12)" (py-spy writes
 *     the script's basename, or the full path with --full-filenames; the
 *     deeper-indented lines of --locals are skipped);
 *   - CPython's faulthandler (3.8 to 3.13): "Current thread 0x... (most
 *     recent call first):" or "Thread 0x... (...):" or "Stack (most recent
 *     call first):", then "  File \"x.py\", line 41 in func", innermost
 *     first.
 * Every byte is untrusted (it comes from a worker's stderr or from another
 * machine through the store): lines are bounded, anything that is not a
 * thread header or a frame is skipped, and what is copied out is printable
 * ASCII only (any other byte becomes '?').
 */
#ifndef CRUN_PYSTACK_H
#define CRUN_PYSTACK_H

#include <stddef.h>

/* Bounds on what one dump may cost: frames past these are ignored. */
#define PYSTACK_MAX_FRAMES 4096
#define PYSTACK_MAX_THREADS 256
/* Bytes of a function or file name kept in a label. */
#define PYSTACK_MAX_NAME 128

/**
 * The innermost frame of `script` (a path or a basename: frames match on
 * the file's basename, since py-spy shortens paths) in `dump` (len bytes,
 * need not be NUL-terminated), written to out as "all_reduce (train.py:41)":
 * the function the script's innermost frame called, then that frame's
 * file:line. The function is the script's own when it calls nothing. A
 * called frame with a decorator's generic name ("wrapper", "inner", "_fn",
 * torch's "_call_impl", ...) is stepped over towards the frame it wraps,
 * which is the function the script named. With script NULL or "", the
 * innermost frame itself. "?" when the script is on no thread's stack.
 *
 * The thread: the main thread first, then the others in dump order, the
 * first whose stack holds the script winning. py-spy names the main thread
 * "MainThread" (the first thread when no thread has that name). faulthandler
 * names no thread: its "Current thread" is the one that took the signal,
 * which is the main thread for a signal sent by kill() only while the main
 * thread does not block it, and the faulting thread for a crash; so the
 * main thread is the one whose outermost frame is "<module>" (a thread
 * started by threading begins in _bootstrap), then the "Current thread",
 * then the last one listed (faulthandler lists the newest thread first).
 *
 * out (outlen > 0) always holds a NUL-terminated label, cut with "..." when
 * it does not fit. Returns 0; CRUN_EPROTO for a dump with no thread header
 * (an error message from py-spy, garbage); UV_ENOMEM.
 */
int pystack_where(const char *dump, size_t len, const char *script, char *out,
		  size_t outlen);

/* One rank and where it is (NULL is "?"); host may be NULL. */
struct pystack_rank {
	int rank;
	const char *where;
	const char *host;
};

/**
 * Group the n ranks of r by where into one line: "ranks 0-2,4-7 in
 * all_reduce (train.py:41); rank 3 in wait (train.py:37) on n2". A group is
 * followed by "on HOST" when all its ranks gave that one host. The largest
 * group comes first (ties: the lowest rank first); ranks are sorted, a
 * repeated rank counts once, and runs are written as ranges. A group's rank
 * list longer than a fair share of outlen ends in ",... (N ranks)"; groups
 * that do not fit are "...and N more". out (outlen > 0) is always
 * NUL-terminated; n == 0 gives "". Returns 0 or UV_ENOMEM.
 */
int pystack_summary(const struct pystack_rank *r, size_t n, char *out,
		    size_t outlen);

#endif

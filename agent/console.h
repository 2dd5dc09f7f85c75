/*
 * The agent's console: what the agent writes to its own stdout and stderr
 * (worker lines it relays, its "crun: " lines, failure reports) goes through
 * here, so that a reader that stops reading never blocks the agent's loop.
 * Private to agent/.
 */
#ifndef CRUN_AGENT_CONSOLE_H
#define CRUN_AGENT_CONSOLE_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

struct console;

/**
 * Create the console of fds 1 and 2 on loop. A pipe or socket is made
 * non-blocking (its flags are restored by console_free); at most limit bytes
 * wait per output, beyond which whole writes are dropped and counted. A
 * terminal or file stays blocking (it does not stall for long).
 */
int console_new(uv_loop_t *loop, size_t limit, struct console **out);

/** Queue len bytes (whole lines) for fd 1 or 2; write nothing yet. */
void console_put(struct console *c, int fd, const char *data, size_t len);

/** Write what is queued for fd as far as it goes without blocking. */
void console_flush(struct console *c, int fd);

/**
 * Write whole lines (data ends with a newline), each after prefix (plen
 * bytes, 0: none). Unprefixed with nothing queued: straight from data in
 * one write(2), no copy, and what the fd does not take is queued (the line
 * it cut whole). Otherwise each line is queued as console_put queues it
 * (prefix and line copied once) and the queue written. Lines are never
 * split or mixed either way.
 */
void console_write_lines(struct console *c, int fd, const char *prefix,
			 size_t plen, const char *data, size_t len);

/** console_put and console_flush in one. */
void console_write(struct console *c, int fd, const char *data, size_t len);

/**
 * --console=collapse: from now on the lines given by console_rank_line that
 * several local ranks print alike are shown once, prefixed "[<role><ranks>]:"
 * (collapse.h: at most window_ms late, at most cap bytes waiting).
 */
int console_collapse(struct console *c, uint64_t window_ms, size_t cap,
		     const char *role);

/** Whether console_collapse is on (workers' lines then go by rank). */
int console_collapsing(const struct console *c);

/** A round of n local ranks begins (what still waits is written). */
void console_set_ranks(struct console *c, int n);

/** Rank r's stream for fd reaches the console (its lines go by rank). */
void console_rank_open(struct console *c, int fd, int rank);

/**
 * One line of local rank r for fd, with r's own prefix (plen bytes): to the
 * collapse, or written as console_write_lines would.
 */
void console_rank_line(struct console *c, int fd, int rank,
		       const char *prefix, size_t plen, const char *line,
		       size_t len);

/** Rank r's stream for fd closed: its waiting lines are written. */
void console_rank_done(struct console *c, int fd, int rank);

/** Stop watching the fds (closes the loop handles); queued bytes stay. */
void console_close(struct console *c);

/**
 * After the loop has run dry: write what is still queued while the reader
 * takes some of it at least every stall_ms (a reader stalled longer loses the
 * rest, so crun still exits), restore the fds' flags and free c.
 */
void console_free(struct console *c, int stall_ms);

#endif

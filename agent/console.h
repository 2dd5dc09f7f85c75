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

#include "crun/store.h"

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
 * (collapse.h: at most window_ms late, at most cap bytes waiting). With job
 * (--console=collapse,job) they go on to the job's console once
 * console_job_host or console_job_send says where it is.
 */
int console_collapse(struct console *c, uint64_t window_ms, size_t cap,
		     const char *role, int job);

/**
 * Whether the job's console is still to be found (once: the caller then
 * calls console_job_host, and console_job_send if that returns 1).
 */
int console_job_pending(struct console *c);

/**
 * The job's console is this one, if the agent hosts the rendezvous store
 * srv (else 1 is returned): the lines of every node's ranks alike are
 * shown once, prefixed by their job ranks ("[0-15]:", "n3:[24-31]:" when
 * they are one node's, "n3:[27]:" for one rank's own line). 0, or an error
 * (said in one line: each node then shows its own lines).
 */
int console_job_host(struct console *c, struct crun_store_server *srv);

/**
 * The job's console is the host's: this node's collapsed lines go there
 * over client (a connection to the rendezvous store, the console's from
 * now on), and are written here when they cannot (jobcon.h). client NULL:
 * there is no store to reach it by (etcd), as one line says.
 */
void console_job_send(struct console *c, struct crun_store_aclient *client);

/**
 * cb(data) once this node's lines so far are on the job's console (or
 * written here): at once without a link to it, at most a moment later
 * with one. Not called if the console closes first.
 */
void console_job_drain(struct console *c, void (*cb)(void *data), void *data);

/**
 * A round begins: this node is node (group rank) of nnodes, its local rank
 * 0 is job rank base of world. Call before the round's console_set_ranks.
 */
int console_job_round(struct console *c, int round, int node, int nnodes,
		      int base, int world);

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

/*
 * One output stream of a worker (stream.c): a pipe the agent reads, or
 * nothing (the worker writes straight to a file or /dev/null). Where its
 * bytes go is decided by its owner (worker.c) before stream_open; the
 * stream only carries them there and says when its pipe is closed.
 * Private to agent/.
 */
#ifndef CRUN_AGENT_STREAM_H
#define CRUN_AGENT_STREAM_H

#include <uv.h>

#include "crun/linebuf.h"
#include "crun/tail.h"

struct console;
struct wstream;

/** The stream's pipe handle is closed (after EOF, or stream_finish). */
typedef void (*stream_closed_cb)(struct wstream *s, void *data);

struct wstream {
	uv_pipe_t pipe;
	int open;	/* the pipe handle is initialised */
	int console_fd; /* 1, 2, or -1: not on the console */
	int file_fd;	/* tee copy, or -1 */
	int is_err;
	int pty; /* the worker writes to a pseudo-terminal */
	struct crun_linebuf lb;
	struct console *console; /* where console_fd's lines are queued */
	int by_rank;		 /* lines go by rank (console_rank_line) */
	int rank;		 /* the worker's local rank */
	int filter_fd;		 /* <attempt>/filtered_std*.log, or -1 */
	struct crun_linebuf flb; /* lines for the duplicate filters */
	char **filters;		 /* lines holding one go to filter_fd */
	int nfilters;
	struct crun_tail *tail; /* fed every byte, or NULL */
	stream_closed_cb closed_cb;
	void *data;
};

/** Zero s: no pipe, no fds (-1). */
void stream_init(struct wstream *s, int is_err);

/**
 * Read fd (the pipe's or pty's reading end) on loop from now on. On error
 * before the handle opened, s->open stays 0 and fd is still the caller's;
 * once s->open is 1, cb(s, data) runs exactly once, when the handle closes.
 */
int stream_open(struct wstream *s, uv_loop_t *loop, int fd,
		stream_closed_cb cb, void *data);

/** Route n bytes that did not come from the pipe as if they had. */
void stream_inject(struct wstream *s, const char *data, size_t n);

/** The writer exited: read what is in the pipe now, and no more. */
void stream_drain(struct wstream *s);

/** Flush partial lines and close the pipe (closed_cb follows). */
void stream_finish(struct wstream *s);

/** Close the stream's files and free its line buffers (after closed_cb). */
void stream_release(struct wstream *s);

#endif

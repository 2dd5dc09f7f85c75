/*
 * A bounded ring of the last bytes of a stream: the agent keeps each
 * worker's recent stderr so a failure report can show the traceback even
 * when the worker wrote no error file.
 */
#ifndef CRUN_TAIL_H
#define CRUN_TAIL_H

#include <stddef.h>

struct crun_tail {
	char *buf;
	size_t cap;   /* bytes kept */
	size_t pos;   /* next write position */
	size_t total; /* bytes ever written (saturating is fine) */
};

int tail_init(struct crun_tail *t, size_t cap);
void tail_release(struct crun_tail *t);
void tail_write(struct crun_tail *t, const char *data, size_t n);

/**
 * Copy the last max_lines whole lines (oldest first) into a new
 * NUL-terminated string the caller frees. A line cut by the ring's start is
 * dropped. Returns NULL when nothing was written.
 */
char *tail_lines(const struct crun_tail *t, int max_lines);

#endif

/*
 * The console's collapse (console.h, --console=collapse): the lines that
 * several local ranks print alike are shown once, prefixed by the ranks that
 * printed them ("[default0-3,5-7]:"), as soon as every rank printed the line
 * or its window passed. A line printed by one rank only keeps that rank's
 * own prefix. Each rank's lines keep their order; no line waits longer than
 * the window; at most cap bytes of lines wait, each rank's share cap / ranks,
 * and a rank past its share is shown as it comes (one line says so).
 * A part of the console, which creates it and writes what it reports.
 * Private to agent/.
 */
#ifndef CRUN_AGENT_COLLAPSE_H
#define CRUN_AGENT_COLLAPSE_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

struct collapse;

/*
 * One line for the console's fd (1 or 2): prefix (plen bytes) then line
 * (len bytes, its newline included when it has one), shown for ranks[0..n)
 * (sorted; n 0 when the line's rank is not one of the round's). The prefix
 * is "[<role><ranks>]:" for several ranks, else the one rank's own prefix
 * and, in its last taglen bytes, torch's "[rank<N>]: " the line had. t is
 * when the oldest of the lines came (loop time, ms).
 */
struct collapse_shown {
	int fd;
	const int *ranks;
	int n;
	const char *prefix;
	size_t plen, taglen;
	const char *line;
	size_t len;
	uint64_t t;
};

typedef void (*collapse_emit_cb)(const struct collapse_shown *s, void *data);

struct collapse_opts {
	uint64_t window_ms; /* the longest a line waits for its twins */
	size_t cap;	    /* bytes of lines held at once, all ranks */
	const char *role;   /* the collapsed prefix: "[<role><ranks>]:" */
	collapse_emit_cb emit;
	/* Optional: rank r, done on fd, has no line waiting any more. */
	void (*done)(int fd, int r, void *data);
	void *data;
};

/** Create a collapse on loop (o->role is copied). NULL without memory. */
struct collapse *collapse_new(uv_loop_t *loop, const struct collapse_opts *o);

/** A round with n local ranks begins: what still waits is shown. */
void collapse_ranks(struct collapse *c, int n);

/**
 * Rank r prints on fd (its stream reaches the console): a line waits for
 * its twins from r, until collapse_rank_done.
 */
void collapse_rank_open(struct collapse *c, int fd, int r);

/**
 * A line of local rank r on fd, with that rank's own prefix (used when the
 * line is shown for r alone). A line without a newline (a terminal's partial
 * line) or with a carriage return (a progress bar redrawn in place) is shown
 * at once for r alone, after r's waiting lines; so is the rest of a partial
 * line (plen 0: no prefix, it continues what was shown).
 */
void collapse_line(struct collapse *c, int fd, int r, const char *prefix,
		   size_t plen, const char *line, size_t len);

/** collapse_line of a line that came at loop time t (ms), not now. */
void collapse_line_at(struct collapse *c, int fd, int r, const char *prefix,
		      size_t plen, const char *line, size_t len, uint64_t t);

/**
 * Rank r's fd closed: it no longer counts; its waiting lines are shown as
 * their twins come or their window passes, and then o->done is told.
 */
void collapse_rank_done(struct collapse *c, int fd, int r);

/** Show everything that waits, now. */
void collapse_flush(struct collapse *c);

/** Show what waits, close the timer and free c once it is closed. */
void collapse_free(struct collapse *c);

#endif

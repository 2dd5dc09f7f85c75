/*
 * Line framing for worker output. Bytes from a pipe arrive in arbitrary
 * pieces; a linebuf hands them back as whole lines, each with the caller's
 * prefix, so that one write per line keeps lines from different workers from
 * ever being split or interleaved. A line longer than the limit is cut into
 * limit-sized pieces, each ended with a newline; binary bytes pass unchanged.
 */
#ifndef CRUN_LINEBUF_H
#define CRUN_LINEBUF_H

#include <stddef.h>

/** Receives one whole line (ending in '\n'), prefix included. */
typedef void (*linebuf_emit_cb)(void *ctx, const char *line, size_t len);

struct crun_linebuf {
	char *buf;   /* prefix, then the pending partial line */
	size_t plen; /* prefix length */
	size_t len;  /* bytes used, prefix included */
	size_t max;  /* longest line body before it is cut */
	int partial; /* terminal mode: pass partial lines through at once */
	int open;    /* terminal mode: a partial line was emitted already */
	int cr;	     /* terminal mode: and it ended with a carriage return */
};

/** Set up lb with a prefix (copied; may be "") and a line limit (> 0). */
int linebuf_init(struct crun_linebuf *lb, const char *prefix, size_t max);

void linebuf_release(struct crun_linebuf *lb);

/**
 * Terminal mode, for a console that is a terminal: what a feed leaves
 * pending is emitted at once instead of waiting for its newline, so progress
 * bars ("\r 40%") redraw as they come; the rest of that line follows without
 * a second prefix, and after a carriage return inside a line the prefix is
 * written again (the cursor went back to its start). Lines of different
 * workers can then meet on one terminal line, as without crun.
 */
void linebuf_set_partial(struct crun_linebuf *lb, int on);

/** Feed n bytes; calls emit once per complete (or cut) line. */
void linebuf_feed(struct crun_linebuf *lb, const char *data, size_t n,
		  linebuf_emit_cb emit, void *ctx);

/** At end of stream: emit a pending partial line with a newline added. */
void linebuf_flush(struct crun_linebuf *lb, linebuf_emit_cb emit, void *ctx);

#endif

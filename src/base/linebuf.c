/*
 * Line framing for worker output (see linebuf.h). The buffer holds the prefix
 * followed by the partial line, so a finished line is emitted straight from
 * it with no copy; lines found whole inside one read are copied once.
 */
#include <stdlib.h>
#include <string.h>

#include "crun/err.h"
#include "crun/linebuf.h"

int linebuf_init(struct crun_linebuf *lb, const char *prefix, size_t max)
{
	lb->partial = lb->open = lb->cr = 0;
	lb->plen = strlen(prefix);
	lb->max = max;
	lb->len = lb->plen;
	lb->buf = malloc(lb->plen + max + 1);
	if (lb->buf == NULL)
		return CRUN_ETOOBIG;
	memcpy(lb->buf, prefix, lb->plen);
	return 0;
}

void linebuf_release(struct crun_linebuf *lb)
{
	free(lb->buf);
	lb->buf = NULL;
}

void linebuf_set_partial(struct crun_linebuf *lb, int on)
{
	lb->partial = on;
}

/*
 * Terminal mode: emit buf[from, len) (the prefix first when from is 0), with
 * the prefix again after every carriage return that a character follows.
 */
static void emit_terminal(struct crun_linebuf *lb, size_t from,
			  linebuf_emit_cb emit, void *ctx)
{
	size_t start = from, i = from > lb->plen ? from : lb->plen;

	/* The last piece ended with '\r': this one starts at column 0. */
	if (lb->cr && from == lb->plen && lb->plen > 0 && lb->len > from &&
	    lb->buf[from] != '\n')
		emit(ctx, lb->buf, lb->plen);
	lb->cr = lb->len > from && lb->buf[lb->len - 1] == '\r';
	for (; i + 1 < lb->len; i++) {
		if (lb->buf[i] != '\r' || lb->buf[i + 1] == '\n' ||
		    lb->plen == 0)
			continue;
		emit(ctx, lb->buf + start, i + 1 - start);
		emit(ctx, lb->buf, lb->plen);
		start = i + 1;
	}
	if (lb->len > start)
		emit(ctx, lb->buf + start, lb->len - start);
}

/* Emit what is pending plus a newline, then start a new line. */
static void emit_pending(struct crun_linebuf *lb, linebuf_emit_cb emit,
			 void *ctx)
{
	lb->buf[lb->len++] = '\n';
	if (lb->partial)
		emit_terminal(lb, lb->open ? lb->plen : 0, emit, ctx);
	else
		emit(ctx, lb->buf, lb->len);
	lb->open = 0;
	lb->len = lb->plen;
}

void linebuf_feed(struct crun_linebuf *lb, const char *data, size_t n,
		  linebuf_emit_cb emit, void *ctx)
{
	while (n > 0) {
		size_t room = lb->max - (lb->len - lb->plen);
		size_t take = n < room ? n : room;
		const char *nl;

		/*
		 * Full: cut here, unless the line ends right here anyway (a
		 * line of exactly max bytes is one line, not one plus an empty
		 * one). The cut waits for the next byte so that a newline
		 * arriving in the next read is not mistaken for an empty line.
		 */
		if (room == 0) {
			if (*data == '\n') {
				data++;
				n--;
			}
			emit_pending(lb, emit, ctx);
			continue;
		}
		nl = memchr(data, '\n', take);
		if (nl) {
			take = (size_t)(nl - data);
			memcpy(lb->buf + lb->len, data, take);
			lb->len += take;
			emit_pending(lb, emit, ctx);
			data += take + 1;
			n -= take + 1;
			continue;
		}
		memcpy(lb->buf + lb->len, data, take);
		lb->len += take;
		data += take;
		n -= take;
	}
	if (lb->partial && lb->len > lb->plen) {
		emit_terminal(lb, lb->open ? lb->plen : 0, emit, ctx);
		lb->open = 1;
		lb->len = lb->plen;
	}
}

void linebuf_flush(struct crun_linebuf *lb, linebuf_emit_cb emit, void *ctx)
{
	if (lb->len > lb->plen || lb->open)
		emit_pending(lb, emit, ctx);
}

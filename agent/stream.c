/*
 * One output stream of a worker (stream.h): the pipe the agent reads, its
 * bytes copied raw to the tee file, framed into whole lines for the console
 * (written one batch of whole lines at a time, so lines from different
 * workers never mix) and for the duplicate filters' file, and fed to the
 * stderr tail (with --console=collapse the console takes its lines one by
 * one, with its rank). At the writer's exit it is drained of what is
 * already in it, never more, so a grandchild that keeps writing cannot hold
 * the agent.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#ifndef _WIN32
#include <sys/ioctl.h>
#endif
#include <unistd.h>

#include "console.h"
#include "stream.h"

static char readbuf[64 * 1024];

static void stream_on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
	(void)h;
	(void)hint;
	/* One loop thread consumes each read before the next alloc. */
	buf->base = readbuf;
	buf->len = sizeof(readbuf);
}

static void stream_on_line(void *ctx, const char *line, size_t len)
{
	struct wstream *s = ctx;

	/* Queued only: stream_consume writes the whole batch at once. */
	console_put(s->console, s->console_fd, line, len);
}

/*
 * With --console=collapse each line goes to the console by rank, its
 * prefix apart. A terminal's partial line comes in pieces: the first
 * starts with the prefix, the rest of it does not (prefix length 0).
 */
static void stream_on_rank_line(void *ctx, const char *line, size_t len)
{
	struct wstream *s = ctx;
	size_t plen = line == s->lb.buf ? s->lb.plen : 0;

	console_rank_line(s->console, s->console_fd, s->rank, line, plen,
			  line + plen, len - plen);
}

/* A line holding one of the duplicate filters is copied to their file. */
static void stream_on_filter_line(void *ctx, const char *line, size_t len)
{
	struct wstream *s = ctx;
	size_t plen = s->flb.plen;

	for (int i = 0; i < s->nfilters; i++)
		if (memmem(line + plen, len - plen, s->filters[i],
			   strlen(s->filters[i]))) {
			/* O_APPEND: one write per line, whole among ranks. */
			if (write(s->filter_fd, line, len) < 0)
				return; /* a full disk must not stop the job */
			return;
		}
}

/*
 * The console's part of a chunk no longer than a line may be: the line an
 * earlier chunk began ends through the line buffer; the whole lines after
 * it (none can reach the cut length) go out as one batch from data itself;
 * what follows the last newline waits in the line buffer.
 */
static void stream_console(struct wstream *s, const char *data, size_t n)
{
	const char *nl, *last;
	size_t k;

	if (s->lb.len > s->lb.plen) {
		nl = memchr(data, '\n', n);
		k = nl ? (size_t)(nl + 1 - data) : n;
		linebuf_feed(&s->lb, data, k, stream_on_line, s);
		console_flush(s->console, s->console_fd);
		data += k;
		n -= k;
	}
	last = n ? memrchr(data, '\n', n) : NULL;
	if (last) {
		k = (size_t)(last + 1 - data);
		console_write_lines(s->console, s->console_fd, s->lb.buf,
				    s->lb.plen, data, k);
		data += k;
		n -= k;
	}
	if (n) {
		linebuf_feed(&s->lb, data, n, stream_on_line, s);
		console_flush(s->console, s->console_fd);
	}
}

/* Route one chunk of a stream's bytes to its tee file, console and tail. */
static void stream_consume(struct wstream *s, const char *data, size_t n)
{
	if (s->file_fd >= 0) {
		size_t off = 0;

		while (off < n) {
			ssize_t k = write(s->file_fd, data + off, n - off);

			if (k < 0 && errno == EINTR)
				continue;
			if (k <= 0)
				break; /* a full disk must not stop the job */
			off += (size_t)k;
		}
	}
	if (s->console_fd >= 0 && s->by_rank)
		linebuf_feed(&s->lb, data, n, stream_on_rank_line, s);
	else if (s->console_fd >= 0 && !s->lb.partial && n <= s->lb.max)
		stream_console(s, data, n);
	else if (s->console_fd >= 0) {
		linebuf_feed(&s->lb, data, n, stream_on_line, s);
		console_flush(s->console, s->console_fd);
	}
	if (s->filter_fd >= 0)
		linebuf_feed(&s->flb, data, n, stream_on_filter_line, s);
	if (s->tail)
		tail_write(s->tail, data, n);
}

void stream_inject(struct wstream *s, const char *data, size_t n)
{
	stream_consume(s, data, n);
}

static void stream_on_close(uv_handle_t *h)
{
	struct wstream *s = h->data;

	s->closed_cb(s, s->data);
}

void stream_finish(struct wstream *s)
{
	if (!s->open || uv_is_closing((uv_handle_t *)&s->pipe))
		return;
	if (s->console_fd >= 0 && s->by_rank) {
		linebuf_flush(&s->lb, stream_on_rank_line, s);
		console_rank_done(s->console, s->console_fd, s->rank);
	} else if (s->console_fd >= 0) {
		linebuf_flush(&s->lb, stream_on_line, s);
		console_flush(s->console, s->console_fd);
	}
	if (s->filter_fd >= 0)
		linebuf_flush(&s->flb, stream_on_filter_line, s);
	uv_close((uv_handle_t *)&s->pipe, stream_on_close);
}

static void stream_on_read(uv_stream_t *h, ssize_t n, const uv_buf_t *buf)
{
	struct wstream *s = h->data;

	if (n > 0)
		stream_consume(s, buf->base, (size_t)n);
	else if (n < 0)
		stream_finish(s); /* EOF or error: nothing more will come */
}

/*
 * Read what is in the pipe now; the writer has exited. Bounded by the bytes
 * queued at this moment: a grandchild still writing gets EPIPE afterwards.
 */
#ifdef _WIN32
void stream_drain(struct wstream *s)
{
	/* (worker.c waits for EOF there instead) */
}
#else
void stream_drain(struct wstream *s)
{
	uv_os_fd_t fd;
	ssize_t n;
	int avail = 0;
	size_t left;

	if (!s->open || uv_is_closing((uv_handle_t *)&s->pipe) ||
	    uv_fileno((uv_handle_t *)&s->pipe, &fd))
		return;
	if (ioctl(fd, FIONREAD, &avail) || avail < 0)
		avail = (int)sizeof(readbuf);
	for (left = (size_t)avail; left > 0;) {
		n = read(fd, readbuf,
			 left < sizeof(readbuf) ? left : sizeof(readbuf));
		if (n > 0) {
			stream_consume(s, readbuf, (size_t)n);
			left -= (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		break;
	}
}
#endif

void stream_init(struct wstream *s, int is_err)
{
	memset(s, 0, sizeof(*s));
	s->is_err = is_err;
	s->console_fd = s->file_fd = s->filter_fd = -1;
}

int stream_open(struct wstream *s, uv_loop_t *loop, int fd, stream_closed_cb cb,
		void *data)
{
	int rc = uv_pipe_init(loop, &s->pipe, 0);

	if (rc == 0)
		rc = uv_pipe_open(&s->pipe, fd);
	if (rc)
		return rc; /* not open: the caller still owns fd */
	s->open = 1;
	s->pipe.data = s;
	s->closed_cb = cb;
	s->data = data;
	return uv_read_start((uv_stream_t *)&s->pipe, stream_on_alloc,
			     stream_on_read);
}

void stream_release(struct wstream *s)
{
	if (s->file_fd >= 0)
		close(s->file_fd);
	if (s->filter_fd >= 0)
		close(s->filter_fd);
	if (s->flb.buf)
		linebuf_release(&s->flb);
	if (s->lb.buf)
		linebuf_release(&s->lb);
	s->file_fd = s->filter_fd = -1;
}

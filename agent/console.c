/*
 * The agent's console output, buffered and never blocking.
 *
 * Happy path: console_write appends to the output's queue and writes it at
 * once; the reader keeps up, the queue is empty again and nothing waits. A
 * batch of whole lines goes out in one write(2).
 *
 * Failure modes: the reader stalls (a full pipe: EAGAIN): the rest stays
 * queued and a uv_poll_t on the fd writes it when the fd is writable again;
 * a write that would take the queue past the limit is dropped whole (lines
 * are never split), and once the queue drains a notice says how many lines
 * and bytes were dropped. The reader is gone (EPIPE or another error):
 * everything queued and to come is discarded. fds 1 and 2 that share one
 * pipe share one queue, so lines of the two never interleave.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "collapse.h"
#include "console.h"

struct cout {
	struct console *c;
	int fd;
	int restore_flags; /* original flags, or -1: untouched */
	char *buf;
	size_t len, cap;
	int dead; /* the reader is gone */
	int polling;
	int poll_init;
	uv_poll_t poll;
	unsigned long long drop_lines, drop_bytes;
};

struct console {
	uv_loop_t *loop;
	size_t limit;
	struct cout out[2];	   /* fd 1, fd 2 */
	int shared;		   /* fd 2 uses out[0] */
	struct collapse *collapse; /* --console=collapse, or NULL */
};

static struct cout *console_out(struct console *c, int fd)
{
	return fd == 2 && !c->shared ? &c->out[1] : &c->out[0];
}

/* Make fd non-blocking if it is a pipe or socket; remember its flags. */
static void cout_init(struct console *c, struct cout *o, int fd)
{
	struct stat st;
	int fl;

	o->c = c;
	o->fd = fd;
	o->restore_flags = -1;
	if (fstat(fd, &st) || !(S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)))
		return;
	fl = fcntl(fd, F_GETFL);
	if (fl < 0 || (fl & O_NONBLOCK))
		return;
	if (fcntl(fd, F_SETFL, fl | O_NONBLOCK) == 0)
		o->restore_flags = fl;
}

int console_new(uv_loop_t *loop, size_t limit, struct console **out)
{
	struct console *c = calloc(1, sizeof(*c));
	struct stat a, b;

	if (c == NULL)
		return UV_ENOMEM;
	c->loop = loop;
	c->limit = limit;
	c->shared = fstat(1, &a) == 0 && fstat(2, &b) == 0 &&
		    a.st_dev == b.st_dev && a.st_ino == b.st_ino &&
		    (S_ISFIFO(a.st_mode) || S_ISSOCK(a.st_mode));
	cout_init(c, &c->out[0], 1);
	if (!c->shared)
		cout_init(c, &c->out[1], 2);
	*out = c;
	return 0;
}

static int cout_append(struct cout *o, const char *data, size_t len)
{
	if (o->len + len > o->cap) {
		size_t cap = o->cap ? o->cap : 4096;
		char *p;

		while (cap < o->len + len)
			cap *= 2;
		p = realloc(o->buf, cap);
		if (p == NULL)
			return -1;
		o->buf = p;
		o->cap = cap;
	}
	memcpy(o->buf + o->len, data, len);
	o->len += len;
	return 0;
}

static void cout_drop(struct cout *o, const char *data, size_t len)
{
	o->drop_bytes += len;
	for (size_t i = 0; i < len; i++)
		o->drop_lines += data[i] == '\n';
}

/* Queue prefix + line as one line, or drop it whole (over the limit). */
static void cout_put(struct console *c, struct cout *o, const char *prefix,
		     size_t plen, const char *data, size_t len)
{
	if (o->dead || plen + len == 0)
		return;
	/* Within the limit, or nothing queued: a blocking fd never queues. */
	if ((o->len + plen + len > c->limit && o->len > 0) ||
	    (o->drop_bytes > 0 && o->len > 0) ||
	    (plen && cout_append(o, prefix, plen)) ||
	    cout_append(o, data, len)) {
		cout_drop(o, prefix, plen);
		cout_drop(o, data, len);
	}
}

void console_put(struct console *c, int fd, const char *data, size_t len)
{
	cout_put(c, console_out(c, fd), NULL, 0, data, len);
}

static void cout_on_writable(uv_poll_t *h, int status, int events);

/* Write the queue; 1 if it is empty now, 0 if the fd is full. */
static int cout_write(struct cout *o)
{
	size_t off = 0;

	while (off < o->len) {
		ssize_t n = write(o->fd, o->buf + off, o->len - off);

		if (n > 0) {
			off += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		o->dead = 1; /* the reader is gone: files still get it all */
		off = o->len;
	}
	if (off > 0 && off < o->len)
		memmove(o->buf, o->buf + off, o->len - off);
	o->len -= off;
	return o->len == 0;
}

static void cout_flush(struct cout *o)
{
	char note[160];
	int n;

	while (cout_write(o)) {
		if (o->drop_bytes == 0 || o->dead)
			break;
		n = snprintf(note, sizeof(note),
			     "crun: dropped %llu line%s (%llu bytes) of "
			     "console output: its reader was too slow\n",
			     o->drop_lines, o->drop_lines == 1 ? "" : "s",
			     o->drop_bytes);
		o->drop_lines = o->drop_bytes = 0;
		if (cout_append(o, note, (size_t)n))
			break;
	}
	if (o->len == 0 || o->dead) {
		if (o->polling) {
			uv_poll_stop(&o->poll);
			o->polling = 0;
		}
		return;
	}
	if (o->polling || o->c->loop == NULL)
		return;
	if (!o->poll_init) {
		if (uv_poll_init(o->c->loop, &o->poll, o->fd))
			return; /* cannot watch it: the next write retries */
		o->poll.data = o;
		o->poll_init = 1;
	}
	if (uv_poll_start(&o->poll, UV_WRITABLE, cout_on_writable) == 0)
		o->polling = 1;
}

static void cout_on_writable(uv_poll_t *h, int status, int events)
{
	struct cout *o = h->data;

	(void)events;
	if (status < 0)
		o->dead = 1;
	uv_poll_stop(h);
	o->polling = 0;
	cout_flush(o);
}

/* Queue each whole line of data[0..len) after prefix, as console_put. */
static void cout_put_lines(struct console *c, struct cout *o,
			   const char *prefix, size_t plen, const char *data,
			   size_t len)
{
	const char *end = data + len;

	while (data < end) {
		const char *nl = memchr(data, '\n', (size_t)(end - data));
		size_t k = nl ? (size_t)(nl + 1 - data) : (size_t)(end - data);

		cout_put(c, o, prefix, plen, data, k);
		data += k;
	}
}

/*
 * A short write of n bytes of the lines [p, end): the line it cut is queued
 * whole, whatever the limit (it is half out already), and the lines after
 * it are queued as console_put queues them.
 */
static void cout_queue_rest(struct console *c, struct cout *o, const char *p,
			    const char *end, size_t n)
{
	const char *nl = memchr(p + n, '\n', (size_t)(end - p) - n);

	if (n > 0 && nl) {
		if (cout_append(o, p + n, (size_t)(nl + 1 - p) - n))
			return;
		p = nl + 1;
	}
	cout_put_lines(c, o, NULL, 0, p, (size_t)(end - p));
}

void console_write_lines(struct console *c, int fd, const char *prefix,
			 size_t plen, const char *data, size_t len)
{
	struct cout *o = console_out(c, fd);
	ssize_t n;

	if (o->dead || len == 0)
		return;
	if (plen > 0 || o->len > 0 || o->drop_bytes > 0) {
		/*
		 * Behind the queue (in order, after it), or prefixed: one copy
		 * of each line into the queue and one write beat a writev of
		 * two small pieces a line.
		 */
		cout_put_lines(c, o, prefix, plen, data, len);
		cout_flush(o);
		return;
	}
	/* Nothing queued, no prefix: straight from data. */
	do
		n = write(o->fd, data, len);
	while (n < 0 && errno == EINTR);
	if (n == (ssize_t)len)
		return;
	if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
		o->dead = 1; /* the reader is gone */
		return;
	}
	cout_queue_rest(c, o, data, data + len, n < 0 ? 0 : (size_t)n);
	cout_flush(o);
}

void console_flush(struct console *c, int fd)
{
	cout_flush(console_out(c, fd));
}

void console_write(struct console *c, int fd, const char *data, size_t len)
{
	console_put(c, fd, data, len);
	console_flush(c, fd);
}

/*
 * A line the collapse shows: prefix and line queued as one, as a prefixed
 * batch is; a bare prefix (a terminal's redrawn line begins) by itself.
 */
static void console_on_collapsed(int fd, const char *prefix, size_t plen,
				 const char *line, size_t len, void *data)
{
	if (len == 0)
		console_write_lines(data, fd, NULL, 0, prefix, plen);
	else
		console_write_lines(data, fd, prefix, plen, line, len);
}

int console_collapse(struct console *c, uint64_t window_ms, size_t cap,
		     const char *role)
{
	struct collapse_opts o = {window_ms, cap, role, console_on_collapsed,
				  c};

	c->collapse = collapse_new(c->loop, &o);
	return c->collapse ? 0 : UV_ENOMEM;
}

int console_collapsing(const struct console *c)
{
	return c && c->collapse != NULL;
}

void console_set_ranks(struct console *c, int n)
{
	if (c->collapse)
		collapse_ranks(c->collapse, n);
}

void console_rank_open(struct console *c, int fd, int rank)
{
	if (c->collapse)
		collapse_rank_open(c->collapse, fd, rank);
}

void console_rank_line(struct console *c, int fd, int rank, const char *prefix,
		       size_t plen, const char *line, size_t len)
{
	if (c->collapse)
		collapse_line(c->collapse, fd, rank, prefix, plen, line, len);
	else
		console_on_collapsed(fd, prefix, plen, line, len, c);
}

void console_rank_done(struct console *c, int fd, int rank)
{
	if (c->collapse)
		collapse_rank_done(c->collapse, fd, rank);
}

void console_close(struct console *c)
{
	if (c->collapse) {
		collapse_free(c->collapse); /* what waits is queued */
		c->collapse = NULL;
	}
	for (int i = 0; i < 2; i++) {
		struct cout *o = &c->out[i];

		if (o->poll_init) {
			uv_close((uv_handle_t *)&o->poll, NULL);
			o->poll_init = o->polling = 0;
		}
	}
	c->loop = NULL;
}

void console_free(struct console *c, int stall_ms)
{
	if (c == NULL)
		return;
	for (int i = 0; i < 2; i++) {
		struct cout *o = &c->out[i];

		if (o->fd == 0)
			continue; /* fd 2 shares out[0] */
		for (;;) {
			struct pollfd p = {o->fd, POLLOUT, 0};
			int n;

			cout_flush(o);
			if (o->len == 0 || o->dead)
				break;
			/* Wait while the reader makes progress; a reader
			 * stalled for stall_ms loses the rest. */
			n = poll(&p, 1, stall_ms);
			if (n == 0 || (n < 0 && errno != EINTR))
				break;
		}
		if (o->restore_flags >= 0)
			fcntl(o->fd, F_SETFL, o->restore_flags);
		free(o->buf);
	}
	free(c);
}

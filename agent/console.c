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
 *
 * With --console=collapse the workers' lines go through the node's
 * collapse (collapse.c) first. With --console=collapse,job what it shows
 * goes on: on the agent that hosts the rendezvous store, into a second
 * collapse over the job's ranks, fed also by the other nodes' batches
 * (jobcon.c's sink); on every other agent, into the link to it, and here
 * when the link cannot take it.
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
#include "crun/log.h"
#include "jobcon.h"

/* Ranks past which the job's console shows each node's lines as they come. */
#define JOB_MAX_RANKS 4096
/* How long a node waits for the job's console to be ready (ms). */
#define JOB_READY_MS 5000
/*
 * The work of one batch on the host: its lines times their ranks times the
 * job's ranks (what collapsing a line of one rank may cost). Past it, the
 * rest of the batch is written as its node collapsed it, so that no batch
 * (a peer's, under the store's frame limit) holds the loop for long.
 */
#define JOB_BATCH_WORK (1u << 26)

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
	struct {		   /* --console=collapse,job */
		int on;
		int asked;		 /* console_job_pending said yes */
		int local;		 /* this round's lines stay here */
		struct collapse *col;	 /* the host's: the job's ranks */
		struct jobcon_sink sink; /* the host's */
		struct jobcon *link;	 /* another node's */
		int *node_of;		 /* the host's: each rank's node */
		int *ranks;		 /* a record's ranks */
		int round, node, nnodes, base, world;
		size_t cap;
		uint64_t window_ms;
		unsigned long bad; /* records dropped */
	} job;
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
#ifdef _WIN32
	/* Windows' pipes have no O_NONBLOCK: the console writes block there
	 * (a stalled reader stalls the agent, as torchrun's own print does). */
	(void)fl;
	return;
#endif
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

/* A shown line: prefix and line queued as one; a bare prefix by itself. */
static void write_shown(struct console *c, int fd, const char *prefix,
			size_t plen, const char *line, size_t len)
{
	if (len == 0)
		console_write_lines(c, fd, NULL, 0, prefix, plen);
	else
		console_write_lines(c, fd, prefix, plen, line, len);
}

/* "n<node>:" and a node's own prefix before its line, uncollapsed. */
static void write_node_line(struct console *c, int node, int fd,
			    const char *prefix, size_t plen, const char *line,
			    size_t len)
{
	char p[1100];
	size_t k = (size_t)snprintf(p, sizeof(p), "n%d:", node);

	if (plen > sizeof(p) - k)
		plen = sizeof(p) - k;
	memcpy(p + k, prefix, plen);
	write_shown(c, fd, p, k + plen, line, len);
}

/* A line of the job's collapse: "n<k>:" before ranks all of one node. */
static void job_on_shown(const struct collapse_shown *s, void *data)
{
	struct console *c = data;
	int a = s->n > 1 ? c->job.node_of[s->ranks[0]] : -1;

	if (a >= 0 && c->job.nnodes > 1 &&
	    a == c->job.node_of[s->ranks[s->n - 1]])
		write_node_line(c, a, s->fd, s->prefix, s->plen, s->line,
				s->len);
	else
		write_shown(c, s->fd, s->prefix, s->plen, s->line, s->len);
}

/*
 * Lines of node's job ranks r[0..n) into the job's collapse, each with the
 * prefix it has when shown alone ("n3:[27]:"; none when plen is 0: it
 * continues a line).
 */
static void job_feed(struct console *c, int node, int fd, const int *r, int n,
		     size_t plen, const char *line, size_t len, uint64_t t)
{
	char prefix[64];

	for (int i = 0; i < n; i++) {
		size_t k = 0;

		if (plen && c->job.nnodes > 1)
			k = (size_t)snprintf(prefix, sizeof(prefix),
					     "n%d:[%d]:", node, r[i]);
		else if (plen)
			k = (size_t)snprintf(prefix, sizeof(prefix),
					     "[%d]:", r[i]);
		c->job.node_of[r[i]] = node;
		collapse_line_at(c->job.col, fd, r[i], prefix, k, line, len, t);
	}
}

/* Whether the job's collapse takes lines of round. */
static int job_collapses(const struct console *c, int round)
{
	return c->job.col && round == c->job.round &&
	       c->job.world <= JOB_MAX_RANKS;
}

/* The host's own lines: local ranks to job ranks, torch's tag kept. */
static void job_feed_own(struct console *c, const struct collapse_shown *s)
{
	char *tagged = NULL;
	const char *line = s->line;
	int *r = c->job.ranks;

	if (!job_collapses(c, c->job.round))
		return write_node_line(c, c->job.node, s->fd, s->prefix,
				       s->plen, s->line, s->len);
	if (s->taglen) {
		if ((tagged = malloc(s->taglen + s->len)) == NULL)
			return write_shown(c, s->fd, s->prefix, s->plen,
					   s->line, s->len);
		memcpy(tagged, s->prefix + s->plen - s->taglen, s->taglen);
		memcpy(tagged + s->taglen, s->line, s->len);
		line = tagged;
	}
	for (int i = 0; i < s->n; i++)
		r[i] = c->job.base + s->ranks[i];
	job_feed(c, c->job.node, s->fd, r, s->n, s->plen, line,
		 s->len + s->taglen, s->t);
	free(tagged);
}

/*
 * A line the node's collapse shows: written here, or on to the job's
 * console (the host's collapse, or the link to it). A line the link cannot
 * take is written here, and so is the rest of the round's.
 */
static void console_on_collapsed(const struct collapse_shown *s, void *data)
{
	struct console *c = data;

	if (c->job.on && s->n > 0 && !c->job.local &&
	    s->ranks[s->n - 1] + c->job.base < c->job.world) {
		if (c->job.col)
			return job_feed_own(c, s);
		if (c->job.link &&
		    jobcon_put(c->job.link, s->fd, uv_now(c->loop) - s->t,
			       s->ranks, s->n, c->job.base, s->prefix, s->plen,
			       s->taglen, s->line, s->len) == 0)
			return;
		c->job.local = c->job.link != NULL;
	}
	write_shown(c, s->fd, s->prefix, s->plen, s->line, s->len);
}

/* A batch of node's records in round reached the host's sink. */
static void job_on_batch(void *data, int round, int node, const char *p,
			 size_t len)
{
	struct console *c = data;
	int collapses = job_collapses(c, round), rc;
	uint64_t now = c->loop ? uv_now(c->loop) : 0, work = 0;
	struct jobcon_rec r;
	size_t off = 0;
	char why[128];

	while ((rc = jobcon_next(p, len, &off, c->job.world,
				 collapses ? c->job.ranks : NULL, c->job.world,
				 &r, why, sizeof(why))) == 1) {
		work += (uint64_t)(r.n + 1) * (uint64_t)c->job.world;
		if (collapses && work > JOB_BATCH_WORK) {
			collapse_flush(c->job.col); /* what waits goes first */
			collapses = 0;		    /* the rest: as it came */
		}
		if (r.kind == 'D') {
			for (int i = 0; collapses && i < r.n; i++)
				collapse_rank_done(c->job.col, r.fd,
						   r.ranks[i]);
		} else if (!collapses || r.n == 0) {
			write_node_line(c, node, r.fd, r.prefix, r.plen, r.line,
					r.len);
		} else {
			job_feed(c, node, r.fd, r.ranks, r.n, r.plen,
				 r.line - r.taglen, r.len + r.taglen,
				 now - (r.age_ms < now ? r.age_ms : now));
		}
	}
	if (rc < 0 && c->job.bad++ < 3)
		log_say("the job console dropped the rest of a batch of node "
			"%d: %s",
			node, why);
}

/* A sender's records the host did not take: written here, as they were. */
static void job_on_local(void *data, const char *p, size_t len)
{
	struct console *c = data;
	struct jobcon_rec r;
	size_t off = 0;
	char why[128];

	while (jobcon_next(p, len, &off, INT32_MAX, NULL, 0, &r, why,
			   sizeof(why)) == 1)
		if (r.kind == 'L')
			write_shown(c, r.fd, r.prefix, r.plen, r.line, r.len);
}

/*
 * A local rank done printing on fd, once the node's collapse has shown its
 * lines: the job's console stops waiting for it.
 */
static void console_on_done(int fd, int rank, void *data)
{
	struct console *c = data;
	int r = c->job.base + rank;

	if (!c->job.on || r >= c->job.world || c->job.local)
		return;
	if (job_collapses(c, c->job.round))
		collapse_rank_done(c->job.col, fd, r);
	else if (c->job.link)
		jobcon_put(c->job.link, fd, 0, &rank, 1, c->job.base, NULL, 0,
			   0, NULL, 0);
}

int console_collapse(struct console *c, uint64_t window_ms, size_t cap,
		     const char *role, int job)
{
	struct collapse_opts o = {
	    window_ms, cap, role, console_on_collapsed, console_on_done, c};

	c->collapse = collapse_new(c->loop, &o);
	c->job.on = job && c->collapse;
	c->job.cap = cap;
	c->job.window_ms = window_ms;
	return c->collapse ? 0 : UV_ENOMEM;
}

int console_job_pending(struct console *c)
{
	int yes = c && c->job.on && !c->job.asked;

	if (yes)
		c->job.asked = 1;
	return yes;
}

int console_job_host(struct console *c, struct crun_store_server *srv)
{
	struct collapse_opts o = {c->job.window_ms, c->job.cap, "",
				  job_on_shown,	    NULL,	c};

	if (srv == NULL)
		return 1;
	if ((c->job.col = collapse_new(c->loop, &o)) != NULL) {
		c->job.sink.batch = job_on_batch;
		c->job.sink.data = c;
		if (jobcon_host(srv, &c->job.sink) == 0)
			return 0;
		collapse_free(c->job.col);
		c->job.col = NULL;
	}
	log_say("--console=collapse,job: out of memory; each node shows its "
		"own lines");
	return UV_ENOMEM;
}

void console_job_send(struct console *c, struct crun_store_aclient *client)
{
	struct jobcon_opts o = {c->loop,      client,	    c->job.cap,
				JOB_READY_MS, job_on_local, c};

	if (client == NULL)
		log_say(
		    "--console=collapse,job: etcd has no store to carry the "
		    "lines; each node shows its own");
	else if ((c->job.link = jobcon_new(&o)) == NULL)
		log_say(
		    "--console=collapse,job: out of memory; each node shows "
		    "its own lines");
}

void console_job_drain(struct console *c, void (*cb)(void *data), void *data)
{
	if (c && c->collapse)
		collapse_flush(c->collapse);
	if (c && c->job.link)
		jobcon_drain(c->job.link, cb, data);
	else
		cb(data);
}

int console_job_round(struct console *c, int round, int node, int nnodes,
		      int base, int world)
{
	int *r, *nd;

	if (c == NULL || !c->job.on)
		return 0;
	collapse_flush(c->collapse); /* the old round's lines, as they were */
	r = realloc(c->job.ranks,
		    sizeof(int) * (size_t)(world > 0 ? world : 1));
	if (r)
		c->job.ranks = r;
	nd = realloc(c->job.node_of,
		     sizeof(int) * (size_t)(world > 0 ? world : 1));
	if (nd)
		c->job.node_of = nd;
	if (r == NULL || nd == NULL)
		world = 0; /* every line is then written here */
	c->job.round = round;
	c->job.node = node;
	c->job.nnodes = nnodes;
	c->job.base = base;
	c->job.world = world;
	c->job.local = 0;
	if (c->job.link)
		jobcon_round(c->job.link, round, node);
	if (c->job.col == NULL)
		return 0;
	if (world > JOB_MAX_RANKS) {
		log_say("the job console collapses jobs of at most %d ranks: "
			"it shows each node's lines as the node collapsed them",
			JOB_MAX_RANKS);
		world = 0;
	}
	collapse_ranks(c->job.col, world);
	for (int i = 0; i < world; i++) {
		collapse_rank_open(c->job.col, 1, i);
		collapse_rank_open(c->job.col, 2, i);
		c->job.node_of[i] = -1;
	}
	return 0;
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
		write_shown(c, fd, prefix, plen, line, len);
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
	if (c->job.col) {
		collapse_free(c->job.col); /* later batches: as they come */
		c->job.col = NULL;
	}
	if (c->job.link) {
		jobcon_close(c->job.link); /* it ends before the loop does */
		c->job.link = NULL;
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
	free(c->job.ranks);
	free(c->job.node_of);
	free(c);
}

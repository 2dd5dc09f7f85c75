/*
 * store_load: the store benchmark's load generator and its do-nothing floor
 * server. It speaks the TCPStore wire protocol itself and never uses
 * libcrun's store client, so the same bytes go to crun's store, to
 * PyTorch's own TCPStore server and to the floor.
 *
 * One process, one thread, one epoll set; sockets are non-blocking and every
 * buffer is bounded. Three modes:
 *
 *   mix         C connections, each with exactly one round trip in flight,
 *               repeat the cycle  set(k) ; get(k) ; add(n, 1)  on a per-client
 *               key k and counter n, the way the 1.13 Python client issues
 *               them: set is SET (no reply), get is WAIT[k] then GET k, add is
 *               ADD.  SET and the following WAIT leave in one write, as the
 *               real client's pipelining does.  One cycle is therefore
 *               4 requests, 3 round trips and 3 ops: an "op" is one store API
 *               call (set, get, add), counted when its last reply arrives
 *               (set when the WAIT that follows it is answered).  The same
 *               definition is used for every server.  The generator
 *               busy-polls (epoll_wait with a zero timeout, --busy 0 to
 *               sleep) so that its own wake-ups add no latency: with one
 *               client a sleeping generator made the figure swing 3x with
 *               the scheduler's placement of the two processes.
 *   storm       N clients connect at once; each sends ADD(barrier, 1) and,
 *               once answered, WAIT[go].  When an ADD reply reaches N (or,
 *               against the floor server, which stores nothing, when every
 *               live client has its ADD answered) a separate control
 *               connection SETs go.  Time runs from the first connect() to
 *               the last WAIT reply.  Refused, reset or timed-out connections
 *               are counted, never retried.  Against a 127.x server the
 *               clients are spread over several source addresses (see
 *               storm_sources) so the generator's own port allocation stays
 *               linear.
 *   null-server the floor: answers every request at once with a reply of the
 *               right shape and stores nothing (SET: nothing; GET: empty
 *               value; ADD: the delta; WAIT: 00 at once; ...).  It tells G0
 *               and G3 apart per connection from the VALIDATE magic.
 *
 * Output is one "key=value" line per result, for tests/bench/store_bench.sh.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "crun/banned.h"

#define G3_MAGIC 0x3C85F7CEu
#define MAX_EVENTS 1024
#define NULL_MAX_FIELD (64u << 20) /* the floor server closes above this */
#define NULL_MAX_BUF (128u << 20)

/* Opcodes of the two generations the generator can speak (spec §2). */
enum op { OP_SET, OP_GET, OP_ADD, OP_WAIT };

static int g3_mode;

/** Return the wire opcode of op in the selected generation. */
static unsigned char opcode(enum op op)
{
	static const unsigned char g0[] = {0, 2, 3, 5};
	return (unsigned char)(g0[op] + (g3_mode ? 1 : 0));
}

/** Return the monotonic clock in seconds. */
static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---------------------------------------------------------------- buffers */

/* A growable byte buffer; every user checks its own bound before growing. */
struct buf {
	unsigned char *p;
	size_t len, cap;
};

/** Make room for n more bytes in b, or exit: allocation failure is fatal here. */
static void buf_reserve(struct buf *b, size_t n)
{
	if (b->len + n <= b->cap)
		return;
	size_t cap = b->cap ? b->cap : 256;
	while (cap < b->len + n)
		cap *= 2;
	unsigned char *p = realloc(b->p, cap);
	if (!p) {
		fprintf(stderr, "store_load: out of memory\n");
		exit(2);
	}
	b->p = p;
	b->cap = cap;
}

/** Append n bytes to b. */
static void buf_add(struct buf *b, const void *data, size_t n)
{
	buf_reserve(b, n);
	memcpy(b->p + b->len, data, n);
	b->len += n;
}

/** Drop the first n bytes of b. */
static void buf_consume(struct buf *b, size_t n)
{
	memmove(b->p, b->p + n, b->len - n);
	b->len -= n;
}

/** Free b's storage. */
static void buf_release(struct buf *b)
{
	free(b->p);
	b->p = NULL;
	b->len = b->cap = 0;
}

/** Append a u8. */
static void put_u8(struct buf *b, unsigned v)
{
	unsigned char c = (unsigned char)v;
	buf_add(b, &c, 1);
}

/** Append a u64 in little-endian order, whatever the host order. */
static void put_u64(struct buf *b, uint64_t v)
{
	unsigned char c[8];
	for (int i = 0; i < 8; i++)
		c[i] = (unsigned char)(v >> (8 * i));
	buf_add(b, c, 8);
}

/** Append a u32 in little-endian order. */
static void put_u32(struct buf *b, uint32_t v)
{
	unsigned char c[4];
	for (int i = 0; i < 4; i++)
		c[i] = (unsigned char)(v >> (8 * i));
	buf_add(b, c, 4);
}

/** Append a str/bytes field: u64 length then the bytes. */
static void put_str(struct buf *b, const void *s, size_t n)
{
	put_u64(b, n);
	buf_add(b, s, n);
}

/** Read a little-endian u64 from p. */
static uint64_t get_u64(const unsigned char *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

/* ----------------------------------------------------------- socket setup */

/** Raise RLIMIT_NOFILE's soft limit to the hard limit; return the new soft limit. */
static rlim_t raise_nofile(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return 1024;
	rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
	getrlimit(RLIMIT_NOFILE, &rl);
	return rl.rlim_cur;
}

/** Resolve host:port numerically into ss; return 0 or -1. */
static int resolve(const char *host, int port, struct sockaddr_storage *ss, socklen_t *sslen)
{
	struct addrinfo hints, *res = NULL;
	char ps[16];
	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICSERV;
	snprintf(ps, sizeof(ps), "%d", port);
	int rc = getaddrinfo(host, ps, &hints, &res);
	if (rc != 0) {
		fprintf(stderr, "store_load: cannot resolve '%s': %s\n", host, gai_strerror(rc));
		return -1;
	}
	memcpy(ss, res->ai_addr, res->ai_addrlen);
	*sslen = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}

/** Set O_NONBLOCK and TCP_NODELAY on fd. */
static void tune_fd(int fd)
{
	int one = 1;
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/** Close fd with a reset, so that thousands of runs leave no TIME_WAIT behind. */
static void close_rst(int fd)
{
	struct linger lg = {1, 0};
	setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	close(fd);
}

/** Write n bytes at p to a non-blocking fd, retrying briefly on EAGAIN; -1 on error. */
static int write_all(int fd, const unsigned char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN) {
			struct timespec ts = {0, 100000};
			nanosleep(&ts, NULL);
			continue;
		}
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/** Open a blocking-connected, then non-blocking, socket to ss; -1 on error. */
static int connect_now(const struct sockaddr_storage *ss, socklen_t sslen)
{
	int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (connect(fd, (const struct sockaddr *)ss, sslen) != 0) {
		close(fd);
		return -1;
	}
	tune_fd(fd);
	return fd;
}

/** Send the G3 VALIDATE frame when speaking G3 (no reply comes back). */
static void put_validate(struct buf *b)
{
	if (!g3_mode)
		return;
	put_u8(b, 0);
	put_u32(b, G3_MAGIC);
}

/* ------------------------------------------------------------- options */

struct opts {
	const char *host;
	int port;
	int clients;
	double seconds;
	double warmup;
	int runs;
	double timeout;
	int batch;
	int value_size;
	int sources;
	int busy;
};

/** Parse a decimal integer option value or exit with a message. */
static long num_arg(const char *name, const char *s)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < 0) {
		fprintf(stderr, "store_load: bad value for %s: '%s'\n", name, s);
		exit(2);
	}
	return v;
}

/** Parse a non-negative real option value or exit with a message. */
static double real_arg(const char *name, const char *s)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || *end || v < 0) {
		fprintf(stderr, "store_load: bad value for %s: '%s'\n", name, s);
		exit(2);
	}
	return v;
}

/** Print usage to f. */
static void usage(FILE *f)
{
	fprintf(f, "usage: store_load mix --port P [--host H] [--clients C] [--seconds S]\n"
		   "                      [--runs R] [--warmup S] [--value-size B] [--busy 0|1]\n"
		   "                      [--proto g0|g3]\n"
		   "       store_load storm --port P [--host H] --clients N [--timeout S]\n"
		   "                      [--batch B] [--sources K] [--proto g0|g3]\n"
		   "       store_load null-server --port P [--host H]\n"
		   "\n"
		   "mix: one op = one store API call of the cycle set(k); get(k) = WAIT[k]+GET k;\n"
		   "add(n, 1): 4 requests, 3 round trips, 3 ops. Prints the median of R runs.\n"
		   "storm: N clients ADD a barrier then WAIT on a go key that a control\n"
		   "connection SETs when the barrier reaches N; prints wall time and failures.\n"
		   "null-server: the floor, answers every request at once, stores nothing.\n");
}

/** Parse argv after the mode into o; exit on a bad option. */
static void parse_opts(int argc, char **argv, struct opts *o)
{
	o->host = "127.0.0.1";
	o->port = -1;
	o->clients = 16;
	o->seconds = 3;
	o->warmup = 0.5;
	o->runs = 1;
	o->timeout = 60;
	o->batch = 256;
	o->value_size = 16;
	o->sources = -1;
	o->busy = 1;
	for (int i = 2; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			exit(0);
		}
		if (i + 1 >= argc) {
			fprintf(stderr, "store_load: option '%s' needs a value\n", a);
			exit(2);
		}
		const char *v = argv[++i];
		if (!strcmp(a, "--host"))
			o->host = v;
		else if (!strcmp(a, "--port"))
			o->port = (int)num_arg(a, v);
		else if (!strcmp(a, "--clients"))
			o->clients = (int)num_arg(a, v);
		else if (!strcmp(a, "--seconds"))
			o->seconds = real_arg(a, v);
		else if (!strcmp(a, "--warmup"))
			o->warmup = real_arg(a, v);
		else if (!strcmp(a, "--runs"))
			o->runs = (int)num_arg(a, v);
		else if (!strcmp(a, "--timeout"))
			o->timeout = real_arg(a, v);
		else if (!strcmp(a, "--batch"))
			o->batch = (int)num_arg(a, v);
		else if (!strcmp(a, "--busy"))
			o->busy = (int)num_arg(a, v);
		else if (!strcmp(a, "--sources"))
			o->sources = (int)num_arg(a, v);
		else if (!strcmp(a, "--value-size"))
			o->value_size = (int)num_arg(a, v);
		else if (!strcmp(a, "--proto")) {
			if (!strcmp(v, "g0"))
				g3_mode = 0;
			else if (!strcmp(v, "g3"))
				g3_mode = 1;
			else {
				fprintf(stderr, "store_load: unknown protocol '%s' (g0 or g3)\n", v);
				exit(2);
			}
		} else {
			fprintf(stderr, "store_load: unknown option '%s'\n", a);
			usage(stderr);
			exit(2);
		}
	}
	if (o->port <= 0 || o->port > 65535) {
		fprintf(stderr, "store_load: --port is required (1-65535)\n");
		exit(2);
	}
	if (o->clients < 1 || o->runs < 1 || o->batch < 1 || o->value_size > 4096) {
		fprintf(stderr, "store_load: --clients, --runs and --batch must be >= 1, "
				"--value-size <= 4096\n");
		exit(2);
	}
}

/** Exit if fewer than need descriptors can be opened. */
static void check_nofile(long need)
{
	rlim_t lim = raise_nofile();
	if ((rlim_t)need > lim) {
		fprintf(stderr, "store_load: need %ld descriptors, RLIMIT_NOFILE allows %llu\n",
			need, (unsigned long long)lim);
		exit(2);
	}
}

/* ------------------------------------------------------------------ mix */

/* One mix client: its socket, its place in the cycle, its pending reply. */
struct mix_client {
	int fd;
	int phase; /* 0: WAIT reply due, 1: GET reply due, 2: ADD reply due */
	size_t inlen;
	unsigned char in[4096 + 64];
	struct buf key, ctr; /* the encoded str fields of k and n */
};

static unsigned char value_bytes[4096];

/** Build and send the request(s) of c's current phase; -1 on a write error. */
static int mix_send(struct mix_client *c, int value_size)
{
	unsigned char tmp[4096 + 128];
	struct buf b = {tmp, 0, sizeof(tmp)};
	switch (c->phase) {
	case 0: /* set(k, v), then the WAIT half of get(k) */
		put_u8(&b, opcode(OP_SET));
		buf_add(&b, c->key.p, c->key.len);
		put_str(&b, value_bytes, (size_t)value_size);
		put_u8(&b, opcode(OP_WAIT));
		put_u64(&b, 1);
		buf_add(&b, c->key.p, c->key.len);
		break;
	case 1:
		put_u8(&b, opcode(OP_GET));
		buf_add(&b, c->key.p, c->key.len);
		break;
	default:
		put_u8(&b, opcode(OP_ADD));
		buf_add(&b, c->ctr.p, c->ctr.len);
		put_u64(&b, 1);
		break;
	}
	/* tmp is large enough for every frame, so buf_add never reallocates it. */
	return write_all(c->fd, b.p, b.len);
}

/** Return the length of the reply due in c->in, 0 if incomplete, -1 if malformed. */
static long mix_reply_len(const struct mix_client *c)
{
	switch (c->phase) {
	case 0:
		if (c->inlen < 1)
			return 0;
		return c->in[0] == 0 ? 1 : -1;
	case 1: {
		if (c->inlen < 8)
			return 0;
		uint64_t n = get_u64(c->in);
		if (n > sizeof(c->in) - 8)
			return -1;
		return c->inlen >= 8 + n ? (long)(8 + n) : 0;
	}
	default:
		return c->inlen >= 8 ? 8 : 0;
	}
}

/** Run the mix benchmark; return the process exit status. */
static int run_mix(const struct opts *o)
{
	struct sockaddr_storage ss;
	socklen_t sslen;
	int ep = -1, status = 1;
	struct mix_client *cl = NULL;
	double *rates = NULL;
	long long *counts = NULL;
	char name[64];

	check_nofile(o->clients + 16L);
	if (resolve(o->host, o->port, &ss, &sslen) != 0)
		return 2;
	memset(value_bytes, 'v', sizeof(value_bytes));
	cl = calloc((size_t)o->clients, sizeof(*cl));
	rates = calloc((size_t)o->runs, sizeof(*rates));
	counts = calloc((size_t)o->runs, sizeof(*counts));
	if (!cl || !rates || !counts)
		goto fail;
	for (int i = 0; i < o->clients; i++)
		cl[i].fd = -1;
	ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0)
		goto fail;

	/* Connect every client first, so that only steady state is measured. */
	unsigned tag = (unsigned)getpid();
	for (int i = 0; i < o->clients; i++) {
		struct mix_client *c = &cl[i];
		c->fd = connect_now(&ss, sslen);
		if (c->fd < 0) {
			fprintf(stderr, "store_load: mix: connect to %s:%d: %s\n", o->host, o->port,
				strerror(errno));
			goto fail;
		}
		int n = snprintf(name, sizeof(name), "/bench/%u/k%d", tag, i);
		put_str(&c->key, name, (size_t)n);
		n = snprintf(name, sizeof(name), "/bench/%u/n%d", tag, i);
		put_str(&c->ctr, name, (size_t)n);
		struct buf v = {0};
		put_validate(&v);
		if (v.len && write_all(c->fd, v.p, v.len) != 0)
			goto fail;
		buf_release(&v);
		struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
		if (epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev) != 0)
			goto fail;
	}
	for (int i = 0; i < o->clients; i++)
		if (mix_send(&cl[i], o->value_size) != 0)
			goto fail;

	long long ops = 0;
	double t0 = now();
	double window_start = t0 + o->warmup;
	double window_end = window_start + o->seconds;
	long long ops_at_start = -1;
	int run = 0;
	struct epoll_event evs[MAX_EVENTS];
	for (;;) {
		double t = now();
		if (ops_at_start < 0 && t >= window_start) {
			ops_at_start = ops;
			window_start = t;
			window_end = t + o->seconds;
		}
		if (ops_at_start >= 0 && t >= window_end) {
			counts[run] = ops - ops_at_start;
			rates[run] = (double)counts[run] / (t - window_start);
			printf("mix-run clients=%d proto=%s run=%d ops=%lld seconds=%.3f ops_per_s=%.0f\n",
			       o->clients, g3_mode ? "g3" : "g0", run + 1, counts[run],
			       t - window_start, rates[run]);
			fflush(stdout);
			if (++run == o->runs)
				break;
			ops_at_start = ops;
			window_start = t;
			window_end = t + o->seconds;
		}
		int n = epoll_wait(ep, evs, MAX_EVENTS, o->busy ? 0 : 100);
		if (n < 0 && errno != EINTR)
			goto fail;
		for (int i = 0; i < n; i++) {
			struct mix_client *c = evs[i].data.ptr;
			ssize_t r = read(c->fd, c->in + c->inlen, sizeof(c->in) - c->inlen);
			if (r < 0 && (errno == EAGAIN || errno == EINTR))
				continue;
			if (r <= 0) {
				fprintf(stderr, "store_load: mix: server closed a connection (%s)\n",
					r == 0 ? "eof" : strerror(errno));
				goto fail;
			}
			c->inlen += (size_t)r;
			long len = mix_reply_len(c);
			if (len == 0)
				continue;
			if (len < 0 || (size_t)len != c->inlen) {
				fprintf(stderr, "store_load: mix: unexpected reply bytes in phase %d\n",
					c->phase);
				goto fail;
			}
			c->inlen = 0;
			ops++;
			c->phase = (c->phase + 1) % 3;
			if (mix_send(c, o->value_size) != 0) {
				fprintf(stderr, "store_load: mix: write: %s\n", strerror(errno));
				goto fail;
			}
		}
	}

	/* Median of the runs (runs are few, so a simple sort is enough). */
	for (int i = 1; i < o->runs; i++)
		for (int j = i; j > 0 && rates[j] < rates[j - 1]; j--) {
			double t = rates[j];
			rates[j] = rates[j - 1];
			rates[j - 1] = t;
			long long u = counts[j];
			counts[j] = counts[j - 1];
			counts[j - 1] = u;
		}
	printf("mix clients=%d proto=%s runs=%d seconds=%g ops=%lld ops_per_s=%.0f "
	       "rtt_per_s=%.0f reqs_per_s=%.0f\n",
	       o->clients, g3_mode ? "g3" : "g0", o->runs, o->seconds, counts[o->runs / 2],
	       rates[o->runs / 2], rates[o->runs / 2], rates[o->runs / 2] * 4 / 3);
	status = 0;
fail:
	if (status != 0)
		printf("mix clients=%d proto=%s error=1\n", o->clients, g3_mode ? "g3" : "g0");
	if (cl) {
		for (int i = 0; i < o->clients; i++) {
			if (cl[i].fd >= 0)
				close_rst(cl[i].fd);
			buf_release(&cl[i].key);
			buf_release(&cl[i].ctr);
		}
	}
	if (ep >= 0)
		close(ep);
	free(cl);
	free(rates);
	free(counts);
	return status;
}

/* ---------------------------------------------------------------- storm */

enum storm_state { ST_IDLE, ST_CONNECTING, ST_ADD_SENT, ST_WAIT_SENT, ST_DONE, ST_FAILED };

/* One storm client; fd doubles as its index-free identity in epoll. */
struct storm_client {
	int fd;
	unsigned char state;
	unsigned char inlen;
	unsigned char in[16];
};

/* The storm's counters, shared by the event handlers. */
struct storm {
	int n;
	long acks;  /* ADD replies received */
	long done;  /* WAIT replies received */
	long failed, refused, reset, other;
	long connected;
	int64_t max_add;
	int go_sent;
	double t_connected, t_acked, t_go;
	int ctl;
	int nsrc; /* source addresses the clients are spread over, 0 = any */
	struct storm_client *clients;
	struct buf go_frame;
	struct buf add_frame, wait_frame;
	const char *first_error;
};

/** Mark c failed with errno err, classify it, and close it. */
static void storm_fail(struct storm *s, struct storm_client *c, int err)
{
	if (c->state == ST_DONE || c->state == ST_FAILED)
		return;
	c->state = ST_FAILED;
	s->failed++;
	if (err == ECONNREFUSED)
		s->refused++;
	else if (err == ECONNRESET || err == EPIPE || err == 0)
		s->reset++;
	else
		s->other++;
	if (!s->first_error)
		s->first_error = err ? strerror(err) : "eof";
	close_rst(c->fd);
	c->fd = -1;
}

/** Send go once the barrier is full (see the file comment for the rule). */
static void storm_maybe_go(struct storm *s, double t)
{
	if (s->go_sent)
		return;
	if (s->max_add < s->n && s->acks + s->failed < s->n)
		return;
	if (s->acks == 0)
		return;
	s->go_sent = 1;
	s->t_acked = t;
	if (write_all(s->ctl, s->go_frame.p, s->go_frame.len) != 0) {
		fprintf(stderr, "store_load: storm: control connection write failed\n");
		exit(1);
	}
	s->t_go = now();
}

/** Handle one epoll event for storm client c. */
static void storm_event(struct storm *s, int ep, struct storm_client *c, uint32_t events)
{
	if (c->state == ST_CONNECTING) {
		int err = 0;
		socklen_t len = sizeof(err);
		if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
			err = errno;
		if (err == 0 && (events & (EPOLLERR | EPOLLHUP)))
			err = ECONNRESET;
		if (err) {
			storm_fail(s, c, err);
			return;
		}
		if (!(events & EPOLLOUT))
			return;
		s->connected++;
		if (s->connected + s->failed == s->n)
			s->t_connected = now();
		struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
		epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
		if (write_all(c->fd, s->add_frame.p, s->add_frame.len) != 0) {
			storm_fail(s, c, errno);
			return;
		}
		c->state = ST_ADD_SENT;
		return;
	}
	ssize_t r = read(c->fd, c->in + c->inlen, sizeof(c->in) - c->inlen);
	if (r < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (r <= 0) {
		storm_fail(s, c, r == 0 ? 0 : errno);
		return;
	}
	c->inlen = (unsigned char)(c->inlen + r);
	if (c->state == ST_ADD_SENT) {
		if (c->inlen < 8)
			return;
		if (c->inlen > 8) {
			storm_fail(s, c, EPROTO);
			return;
		}
		int64_t v = (int64_t)get_u64(c->in);
		if (v > s->max_add)
			s->max_add = v;
		s->acks++;
		c->inlen = 0;
		if (write_all(c->fd, s->wait_frame.p, s->wait_frame.len) != 0) {
			storm_fail(s, c, errno);
			return;
		}
		c->state = ST_WAIT_SENT;
		storm_maybe_go(s, now());
	} else if (c->state == ST_WAIT_SENT) {
		if (c->inlen != 1 || c->in[0] != 0) {
			storm_fail(s, c, EPROTO);
			return;
		}
		c->state = ST_DONE;
		s->done++;
	}
}

/*
 * Linux gives connect() only the even half of ip_local_port_range (about
 * 14,000 ports by default) before it falls back to a slow search of the odd
 * half, which makes one source address quadratic past ~14k connections to one
 * server port. Real storms come from many hosts, so against an IPv4 loopback
 * server the clients are spread over source addresses 127.0.0.1..127.0.0.K
 * (IP_BIND_ADDRESS_NO_PORT keeps the port choice at connect time).
 */
static int storm_sources(const struct sockaddr_storage *ss, int n, int want)
{
	if (ss->ss_family != AF_INET)
		return 0;
	const struct sockaddr_in *sin = (const struct sockaddr_in *)ss;
	if ((ntohl(sin->sin_addr.s_addr) >> 24) != 127)
		return 0;
	if (want >= 0)
		return want;
	return (n + 4095) / 4096;
}

/** Bind fd to source address 127.0.0.(1 + i % nsrc), port chosen at connect. */
static int storm_bind_source(int fd, int i, int nsrc)
{
	int one = 1;
	struct sockaddr_in src;
	if (nsrc <= 1)
		return 0;
	setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one));
	memset(&src, 0, sizeof(src));
	src.sin_family = AF_INET;
	src.sin_addr.s_addr = htonl((127u << 24) + 1u + (unsigned)(i % nsrc));
	return bind(fd, (struct sockaddr *)&src, sizeof(src));
}

/** Start the non-blocking connect of client c; failures are counted at once. */
static void storm_connect(struct storm *s, int ep, struct storm_client *c,
			  const struct sockaddr_storage *ss, socklen_t sslen)
{
	c->fd = socket(ss->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (c->fd < 0) {
		s->failed++;
		s->other++;
		if (!s->first_error)
			s->first_error = strerror(errno);
		c->state = ST_FAILED;
		return;
	}
	int one = 1;
	setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	c->state = ST_CONNECTING;
	if (storm_bind_source(c->fd, (int)(c - s->clients), s->nsrc) != 0) {
		storm_fail(s, c, errno);
		return;
	}
	if (connect(c->fd, (const struct sockaddr *)ss, sslen) != 0 && errno != EINPROGRESS) {
		storm_fail(s, c, errno);
		return;
	}
	struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT, .data.ptr = c};
	if (epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev) != 0) {
		storm_fail(s, c, errno);
		return;
	}
}

/** Run the connect storm; return the process exit status. */
static int run_storm(const struct opts *o)
{
	struct sockaddr_storage ss;
	socklen_t sslen;
	struct storm s;
	struct storm_client *cl = NULL;
	int ep = -1, status = 1;
	char name[96];

	memset(&s, 0, sizeof(s));
	s.n = o->clients;
	s.ctl = -1;
	check_nofile(o->clients + 16L);
	if (resolve(o->host, o->port, &ss, &sslen) != 0)
		return 2;
	cl = calloc((size_t)o->clients, sizeof(*cl));
	if (!cl)
		goto fail;
	for (int i = 0; i < o->clients; i++)
		cl[i].fd = -1;
	s.clients = cl;
	s.nsrc = storm_sources(&ss, s.n, o->sources);
	ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0)
		goto fail;

	/* Keys unique per run, so a reused server cannot pre-fill the barrier. */
	unsigned tag = (unsigned)getpid() ^ (unsigned)time(NULL);
	int nb = snprintf(name, sizeof(name), "/storm/%u/barrier", tag);
	/* A G3 client validates first; one buffer per client keeps it one write. */
	put_validate(&s.add_frame);
	put_u8(&s.add_frame, opcode(OP_ADD));
	put_str(&s.add_frame, name, (size_t)nb);
	put_u64(&s.add_frame, 1);
	int ng = snprintf(name, sizeof(name), "/storm/%u/go", tag);
	put_u8(&s.wait_frame, opcode(OP_WAIT));
	put_u64(&s.wait_frame, 1);
	put_str(&s.wait_frame, name, (size_t)ng);
	put_validate(&s.go_frame);
	put_u8(&s.go_frame, opcode(OP_SET));
	put_str(&s.go_frame, name, (size_t)ng);
	put_str(&s.go_frame, "1", 1);

	/* The control connection is up before the clock starts. */
	s.ctl = connect_now(&ss, sslen);
	if (s.ctl < 0) {
		fprintf(stderr, "store_load: storm: control connect to %s:%d: %s\n", o->host,
			o->port, strerror(errno));
		goto fail;
	}

	double t0 = now();
	double deadline = t0 + o->timeout;
	int next = 0;
	struct epoll_event evs[MAX_EVENTS];
	while (s.done + s.failed < s.n) {
		/* Start connects in batches, serving ready sockets in between. */
		int stop = next + o->batch < s.n ? next + o->batch : s.n;
		for (; next < stop; next++)
			storm_connect(&s, ep, &cl[next], &ss, sslen);
		if (next == s.n && s.t_connected == 0 && s.connected + s.failed == s.n)
			s.t_connected = now();
		storm_maybe_go(&s, now());
		int n = epoll_wait(ep, evs, MAX_EVENTS, next < s.n ? 0 : 50);
		if (n < 0 && errno != EINTR)
			goto fail;
		for (int i = 0; i < n; i++)
			storm_event(&s, ep, evs[i].data.ptr, evs[i].events);
		if (now() > deadline)
			break;
	}
	double t1 = now();
	long unfinished = s.n - s.done - s.failed;
	printf("storm clients=%d proto=%s seconds=%.3f failed=%ld refused=%ld reset=%ld "
	       "other=%ld unfinished=%ld connected_s=%.3f barrier_s=%.3f max_add=%" PRId64
	       " sources=%d%s%s\n",
	       s.n, g3_mode ? "g3" : "g0", t1 - t0, s.failed, s.refused, s.reset, s.other,
	       unfinished, s.t_connected > 0 ? s.t_connected - t0 : -1.0,
	       s.t_acked > 0 ? s.t_acked - t0 : -1.0, s.max_add, s.nsrc,
	       s.first_error ? " first_error=" : "", s.first_error ? s.first_error : "");
	if (s.first_error)
		fprintf(stderr, "store_load: storm: first failure: %s\n", s.first_error);
	status = (s.failed == 0 && unfinished == 0) ? 0 : 1;
fail:
	if (status != 0 && s.ctl < 0)
		printf("storm clients=%d proto=%s error=1\n", o->clients, g3_mode ? "g3" : "g0");
	if (cl)
		for (int i = 0; i < o->clients; i++)
			if (cl[i].fd >= 0)
				close_rst(cl[i].fd);
	if (s.ctl >= 0)
		close_rst(s.ctl);
	if (ep >= 0)
		close(ep);
	buf_release(&s.add_frame);
	buf_release(&s.wait_frame);
	buf_release(&s.go_frame);
	free(cl);
	return status;
}

/* ---------------------------------------------------------- null server */

/* One floor-server connection: leftover input and unsent output. */
struct nconn {
	int fd;
	int proto; /* -1 not known yet, 0 G0, 3 G3 */
	int want_out;
	struct buf in, out;
};

/* A read cursor over a candidate frame. */
struct cur {
	const unsigned char *p;
	size_t n, off;
};

/** Take n bytes from c; 0 if they are not all there yet. */
static int cur_take(struct cur *c, size_t n)
{
	if (c->n - c->off < n)
		return 0;
	c->off += n;
	return 1;
}

/** Take a u64 into *v; 0 if incomplete. */
static int cur_u64(struct cur *c, uint64_t *v)
{
	if (c->n - c->off < 8)
		return 0;
	*v = get_u64(c->p + c->off);
	c->off += 8;
	return 1;
}

/** Take a str field; 0 if incomplete, -1 if over the floor's bound. */
static int cur_str(struct cur *c)
{
	uint64_t len;
	if (!cur_u64(c, &len))
		return 0;
	if (len > NULL_MAX_FIELD)
		return -1;
	return cur_take(c, (size_t)len);
}

/** Take a key list, returning its count in *cnt; 0 incomplete, -1 too big. */
static int cur_keys(struct cur *c, uint64_t *cnt)
{
	if (!cur_u64(c, cnt))
		return 0;
	if (*cnt > (1u << 20))
		return -1;
	for (uint64_t i = 0; i < *cnt; i++) {
		int r = cur_str(c);
		if (r <= 0)
			return r;
	}
	return 1;
}

/*
 * Parse one frame at p[0..n) and append its reply to out. Return the frame
 * length, 0 if more bytes are needed, -1 for an unknown opcode or a field
 * beyond the bound. Opcodes are normalised to G0 numbering for G3 peers.
 */
static long null_frame(int proto, const unsigned char *p, size_t n, struct buf *out)
{
	struct cur c = {p, n, 0};
	uint64_t cnt = 0;
	int r = 1;
	if (n < 1)
		return 0;
	int q = p[0];
	c.off = 1;
	if (proto == 3) {
		/* G3: VALIDATE 0, PING 13, and ops 1..8 are G0's 0..8 minus WATCH_KEY. */
		switch (q) {
		case 0:
			return cur_take(&c, 4) ? 5 : 0;
		case 9: /* APPEND */
		case 14: /* QUEUE_PUSH */
			r = cur_str(&c);
			if (r > 0)
				r = cur_str(&c);
			return r > 0 ? (long)c.off : r;
		case 10: /* MULTI_GET */
			r = cur_keys(&c, &cnt);
			if (r <= 0)
				return r;
			for (uint64_t i = 0; i < cnt; i++)
				put_u64(out, 0);
			return (long)c.off;
		case 11: /* MULTI_SET */
			if (!cur_u64(&c, &cnt))
				return 0;
			if (cnt > (1u << 20))
				return -1;
			for (uint64_t i = 0; i < cnt * 2; i++) {
				r = cur_str(&c);
				if (r <= 0)
					return r;
			}
			return (long)c.off;
		case 12: /* CANCEL_WAIT */
			put_u8(out, 1);
			return 1;
		case 13: /* PING: echo the nonce */
			if (!cur_take(&c, 4))
				return 0;
			buf_add(out, p + 1, 4);
			return 5;
		case 15: /* QUEUE_POP: empty queue */
		case 16: /* QUEUE_LEN */
			r = cur_str(&c);
			if (r <= 0)
				return r;
			put_u64(out, 0);
			return (long)c.off;
		case 17: /* LIST_KEYS */
			put_u64(out, 0);
			return 1;
		case 18: /* BARRIER */
			r = cur_str(&c);
			if (r <= 0)
				return r;
			if (!cur_take(&c, 8))
				return 0;
			put_u8(out, 0);
			return (long)c.off;
		default:
			if (q < 1 || q > 8)
				return -1;
			q = q == 8 ? 8 : q - 1;
		}
	}
	switch (q) {
	case 0: /* SET: no reply */
		r = cur_str(&c);
		if (r > 0)
			r = cur_str(&c);
		return r > 0 ? (long)c.off : r;
	case 1: /* COMPARE_SET: an empty current value */
		r = cur_str(&c);
		if (r > 0)
			r = cur_str(&c);
		if (r > 0)
			r = cur_str(&c);
		if (r <= 0)
			return r;
		put_u64(out, 0);
		return (long)c.off;
	case 2: /* GET: an empty value */
		r = cur_str(&c);
		if (r <= 0)
			return r;
		put_u64(out, 0);
		return (long)c.off;
	case 3: { /* ADD: the delta, as if the key had been missing */
		r = cur_str(&c);
		if (r <= 0)
			return r;
		size_t at = c.off;
		if (!cur_take(&c, 8))
			return 0;
		buf_add(out, p + at, 8);
		return (long)c.off;
	}
	case 4: /* CHECK: READY */
	case 5: /* WAIT: STOP_WAITING at once */
		r = cur_keys(&c, &cnt);
		if (r <= 0)
			return r;
		put_u8(out, 0);
		return (long)c.off;
	case 6: /* GETNUMKEYS */
		put_u64(out, 0);
		return 1;
	case 7: /* WATCH_KEY: KEY_CALLBACK_REGISTERED */
		r = cur_str(&c);
		if (r <= 0)
			return r;
		put_u8(out, 3);
		return (long)c.off;
	case 8: /* DELETE_KEY: not there */
		r = cur_str(&c);
		if (r <= 0)
			return r;
		put_u64(out, 0);
		return (long)c.off;
	default:
		return -1;
	}
}

/** Close a floor connection and free it. */
static void nconn_free(struct nconn *c)
{
	close(c->fd);
	buf_release(&c->in);
	buf_release(&c->out);
	free(c);
}

/** Flush c->out; toggle EPOLLOUT as needed; -1 if the peer is gone. */
static int nconn_flush(int ep, struct nconn *c)
{
	while (c->out.len > 0) {
		ssize_t w = write(c->fd, c->out.p, c->out.len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN)
			break;
		if (w < 0)
			return -1;
		buf_consume(&c->out, (size_t)w);
	}
	int want = c->out.len > 0;
	if (want != c->want_out) {
		struct epoll_event ev = {.events = EPOLLIN | (want ? EPOLLOUT : 0), .data.ptr = c};
		epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
		c->want_out = want;
	}
	return 0;
}

/** Parse every whole frame in p[0..n); return bytes used or -1 to close. */
static long nconn_parse(struct nconn *c, const unsigned char *p, size_t n)
{
	size_t off = 0;
	while (off < n) {
		if (c->proto < 0) {
			/* G3 starts with VALIDATE: 00 ce f7 85 3c. */
			static const unsigned char magic[5] = {0x00, 0xce, 0xf7, 0x85, 0x3c};
			size_t k = n - off < 5 ? n - off : 5;
			if (memcmp(p + off, magic, k) != 0)
				c->proto = 0;
			else if (k < 5)
				return (long)off;
			else
				c->proto = 3;
		}
		long r = null_frame(c->proto, p + off, n - off, &c->out);
		if (r < 0)
			return -1;
		if (r == 0)
			break;
		off += (size_t)r;
	}
	return (long)off;
}

/** Serve readable data on c; -1 if it must be closed. */
static int nconn_read(int ep, struct nconn *c)
{
	static unsigned char scratch[1 << 16];
	for (;;) {
		ssize_t r = read(c->fd, scratch, sizeof(scratch));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && errno == EAGAIN)
			break;
		if (r <= 0)
			return -1;
		const unsigned char *p = scratch;
		size_t n = (size_t)r;
		if (c->in.len > 0) {
			if (c->in.len + n > NULL_MAX_BUF)
				return -1;
			buf_add(&c->in, scratch, n);
			p = c->in.p;
			n = c->in.len;
		}
		long used = nconn_parse(c, p, n);
		if (used < 0)
			return -1;
		if (p == scratch) {
			if ((size_t)used < n)
				buf_add(&c->in, p + used, n - (size_t)used);
		} else {
			buf_consume(&c->in, (size_t)used);
		}
		if ((size_t)r < sizeof(scratch))
			break;
	}
	return nconn_flush(ep, c);
}

/* A tag for the listening socket in epoll's data pointer. */
static int listen_tag;

/** Run the floor server forever; return an exit status only on setup failure. */
static int run_null_server(const struct opts *o)
{
	struct sockaddr_storage ss;
	socklen_t sslen;
	int one = 1;

	raise_nofile();
	signal(SIGPIPE, SIG_IGN);
	if (resolve(o->host, o->port, &ss, &sslen) != 0)
		return 2;
	int lfd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (lfd < 0)
		return 2;
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (struct sockaddr *)&ss, sslen) != 0 || listen(lfd, 65535) != 0) {
		fprintf(stderr, "store_load: null-server: bind %s:%d: %s\n", o->host, o->port,
			strerror(errno));
		return 2;
	}
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event lev = {.events = EPOLLIN, .data.ptr = &listen_tag};
	epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &lev);
	fprintf(stderr, "store_load null-server: listening on %s:%d\n", o->host, o->port);

	struct epoll_event evs[MAX_EVENTS];
	for (;;) {
		int n = epoll_wait(ep, evs, MAX_EVENTS, -1);
		if (n < 0 && errno != EINTR)
			return 1;
		for (int i = 0; i < n; i++) {
			if (evs[i].data.ptr == &listen_tag) {
				for (;;) {
					int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
					if (fd < 0)
						break;
					setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
					struct nconn *c = calloc(1, sizeof(*c));
					if (!c) {
						close(fd);
						continue;
					}
					c->fd = fd;
					c->proto = -1;
					struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
					if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0)
						nconn_free(c);
				}
				continue;
			}
			struct nconn *c = evs[i].data.ptr;
			int rc = 0;
			if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))
				rc = nconn_read(ep, c);
			else if (evs[i].events & EPOLLOUT)
				rc = nconn_flush(ep, c);
			if (rc != 0)
				nconn_free(c); /* close() also removes it from epoll */
		}
	}
}

int main(int argc, char **argv)
{
	struct opts o;
	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	signal(SIGPIPE, SIG_IGN);
	parse_opts(argc, argv, &o);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!strcmp(argv[1], "mix"))
		return run_mix(&o);
	if (!strcmp(argv[1], "storm"))
		return run_storm(&o);
	if (!strcmp(argv[1], "null-server"))
		return run_null_server(&o);
	fprintf(stderr, "store_load: unknown mode '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}

/*
 * The store relay (src/store/store_relay.c) on a real loop, with a real crun store
 * upstream, driven from a second thread by raw sockets speaking both
 * protocol generations:
 *
 * - a differential test: seeded random operation sequences from clients on
 *   three "nodes" (three relays in this process) give byte for byte the
 *   replies the same sequence gets straight from a store (the seed is
 *   printed on a failure, and CRUN_RELAY_SEED replays one), and the same
 *   with what the store refuses by closing the sender mixed in (a value past
 *   max_value, a key past max_key, an unknown operation, a MULTI_GET reply
 *   past max_output; sent by G3 clients while a wait of theirs is parked
 *   too): the relay closes that client alone, at once, as the store does;
 * - combining: concurrent ADDs to one key are one upstream ADD, each client
 *   getting a distinct result; concurrent WAITs and GETs of one key are one
 *   upstream request each;
 * - a client that disconnects with a parked wait drops the store's waiter
 *   and leaves the others alone;
 * - a lost store calls lost and closes every client, parked ones included;
 * - a store named by a host name whose first address refuses (::1 before
 *   127.0.0.1, the store on 127.0.0.1 only) is reached at the next one;
 * - the store holds one connection per relay however many clients it has;
 * - a client's request the store would close its connection for (a frame
 *   past 2 * max_value + max_key + 64, a MULTI_GET reply past max_output, a
 *   partial frame idle past idle_timeout) closes that client only, the
 *   relay's connection and its other clients carry on;
 * - a client that floods GETs of a large value or WAITs on a key never set
 *   without reading is paused with the process's heap bounded (mallinfo2),
 *   and gets every reply once it reads.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <malloc.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include "crun/err.h"
#include "crun/store.h"
#include "crun/store_relay.h"
#include "../../src/store/store_wire.h"
#include "hosts_private.h"

#define NRELAYS 3

typedef const char *(*scenario_fn)(void);

struct world {
	uv_loop_t loop;
	uv_async_t call;
	struct crun_store_server *direct; /* the store without relays */
	struct crun_store_server *up;	  /* the relays' store */
	struct crun_store_relay *relay[NRELAYS];
	int direct_port, relay_port[NRELAYS];
	int lost[NRELAYS], lost_status[NRELAYS];
	const char *result;
	scenario_fn fn;
	pthread_t th;
	int finished;
};

static struct world W;
static size_t relay_max_client; /* the relays' max_client_bytes (0: default) */
static struct crun_store_limits *world_lim;	/* every store's and relay's */
static const char *relay_up_host = "127.0.0.1"; /* how relays name the store */
static char fail_buf[512];

/* ---- Running things on the loop thread --------------------------------- */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static void (*call_fn)(void *);
static void *call_arg;
static int call_seq, call_done_seq;
static int paused, release_pause;

static void on_call(uv_async_t *a)
{
	pthread_mutex_lock(&mu);
	while (call_done_seq < call_seq) {
		void (*fn)(void *) = call_fn;
		void *arg = call_arg;

		pthread_mutex_unlock(&mu);
		fn(arg);
		pthread_mutex_lock(&mu);
		call_done_seq = call_seq;
		pthread_cond_broadcast(&cv);
	}
	pthread_mutex_unlock(&mu);
}

/* Run fn(arg) on the loop thread and wait until it returns. */
static void on_loop(void (*fn)(void *), void *arg)
{
	pthread_mutex_lock(&mu);
	call_fn = fn;
	call_arg = arg;
	call_seq++;
	uv_async_send(&W.call);
	while (call_done_seq < call_seq)
		pthread_cond_wait(&cv, &mu);
	pthread_mutex_unlock(&mu);
}

/* The loop thread stops (in a callback) until resume(): whatever the test
 * writes meanwhile is read in one loop iteration. */
static void pause_fn(void *arg)
{
	pthread_mutex_lock(&mu);
	paused = 1;
	pthread_cond_broadcast(&cv);
	while (!release_pause)
		pthread_cond_wait(&cv, &mu);
	release_pause = 0;
	paused = 0;
	pthread_mutex_unlock(&mu);
}

static void *pause_thread(void *arg)
{
	on_loop(pause_fn, NULL);
	return NULL;
}

static pthread_t pause_th;

static void pause_loop(void)
{
	pthread_create(&pause_th, NULL, pause_thread, NULL);
	pthread_mutex_lock(&mu);
	while (!paused)
		pthread_cond_wait(&cv, &mu);
	pthread_mutex_unlock(&mu);
}

static void resume_loop(void)
{
	usleep(20 * 1000); /* let loopback deliver what was written */
	pthread_mutex_lock(&mu);
	release_pause = 1;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
	pthread_join(pause_th, NULL);
}

struct snap {
	struct crun_store_stats up;
	struct store_relay_stats relay[NRELAYS];
	size_t up_conns;
};

static void snap_fn(void *arg)
{
	struct snap *s = arg;

	store_server_stats(W.up, &s->up);
	s->up_conns = store_server_nconns(W.up);
	for (int i = 0; i < NRELAYS; i++)
		if (W.relay[i] != NULL)
			store_relay_stats(W.relay[i], &s->relay[i]);
}

static struct snap snap(void)
{
	struct snap s;

	memset(&s, 0, sizeof(s));
	on_loop(snap_fn, &s);
	return s;
}

static void on_lost(struct crun_store_relay *r, int status, void *data)
{
	int i = (int)(intptr_t)data;

	W.lost[i] = 1;
	W.lost_status[i] = status;
}

static void finish_fn(void *arg)
{
	for (int i = 0; i < NRELAYS; i++)
		if (W.relay[i] != NULL)
			store_relay_close(W.relay[i], NULL, NULL);
	if (W.up != NULL)
		store_server_close(W.up, NULL, NULL);
	store_server_close(W.direct, NULL, NULL);
	uv_close((uv_handle_t *)&W.call, NULL);
}

static void *scenario_main(void *arg)
{
	W.result = W.fn();
	on_loop(finish_fn, NULL);
	return NULL;
}

/* Run fn against a fresh direct store and a store behind NRELAYS relays. */
static void run(scenario_fn fn)
{
	struct store_relay_opts o;

	memset(&W, 0, sizeof(W));
	cr_assert_eq(uv_loop_init(&W.loop), 0);
	cr_assert_eq(
	    store_server_new(&W.loop, "127.0.0.1", 0, world_lim, &W.direct), 0);
	cr_assert_eq(
	    store_server_new(&W.loop, "127.0.0.1", 0, world_lim, &W.up), 0);
	store_server_set_quiet(W.direct, 1);
	store_server_set_quiet(W.up, 1);
	W.direct_port = store_server_port(W.direct);
	for (int i = 0; i < NRELAYS; i++) {
		memset(&o, 0, sizeof(o));
		o.up_host = relay_up_host;
		o.up_port = store_server_port(W.up);
		o.listen_host = "127.0.0.1";
		o.listen_fd = -1;
		o.max_client_bytes = relay_max_client;
		o.lim = world_lim;
		cr_assert_eq(store_relay_new(&W.loop, &o, on_lost,
					     (void *)(intptr_t)i, &W.relay[i]),
			     0);
		W.relay_port[i] = store_relay_port(W.relay[i]);
	}
	uv_async_init(&W.loop, &W.call, on_call);
	W.fn = fn;
	pthread_create(&W.th, NULL, scenario_main, NULL);
	uv_run(&W.loop, UV_RUN_DEFAULT);
	pthread_join(W.th, NULL);
	cr_assert_eq(uv_loop_close(&W.loop), 0);
	cr_assert_null(W.result, "%s", W.result);
}

/* ---- Raw clients ------------------------------------------------------- */

struct rc {
	int fd;
	enum store_gen gen;
	int port;
};

static int rc_open(struct rc *c, int port, enum store_gen gen)
{
	struct sockaddr_in sa;
	int one = 1;

	c->port = port;
	c->gen = gen;
	c->fd = socket(AF_INET, SOCK_STREAM, 0);
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
		return -1;
	setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (gen == STORE_GEN_G3) {
		unsigned char v[5] = {0x00, 0xce, 0xf7, 0x85, 0x3c};

		if (write(c->fd, v, 5) != 5)
			return -1;
	}
	return 0;
}

static void rc_close(struct rc *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
}

static int rc_send(struct rc *c, const struct store_buf *b)
{
	return write(c->fd, b->data, b->len) == (ssize_t)b->len ? 0 : -1;
}

/* Read exactly n bytes (5 s at most): 0, or -1 on EOF or a timeout. */
static int rc_read(struct rc *c, void *out, size_t n)
{
	size_t got = 0;

	while (got < n) {
		struct pollfd p = {.fd = c->fd, .events = POLLIN};
		ssize_t k;

		if (poll(&p, 1, 5000) <= 0)
			return -2;
		k = read(c->fd, (char *)out + got, n - got);
		if (k <= 0)
			return -1;
		got += (size_t)k;
	}
	return 0;
}

/* Whether nothing is readable within ms. */
static int rc_quiet(struct rc *c, int ms)
{
	struct pollfd p = {.fd = c->fd, .events = POLLIN};

	return poll(&p, 1, ms) == 0;
}

static void b_op(struct store_buf *b, const struct rc *c, enum store_op op)
{
	store_buf_op(b, c->gen, op);
}

/* A key list of n keys. */
static void b_keys(struct store_buf *b, const char *const *k, size_t n)
{
	store_buf_u64(b, n);
	for (size_t i = 0; i < n; i++)
		store_buf_str(b, k[i], strlen(k[i]));
}

/* ---- The differential test --------------------------------------------- */

#define NCLIENTS 6
#define NSTEPS 300

static uint64_t rng_state;

static uint32_t rnd(uint32_t n)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (uint32_t)(rng_state % n);
}

static const char *const keys[] = {"/a", "/b", "/c", "/n"};
static const char *const vals[] = {"1", "x", "", "22", "-3"};
static const char *const probe_key[] = {"/never-set"};

struct log {
	char *s;
	size_t len, cap;
};

static void logf_(struct log *l, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void logf_(struct log *l, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (l == NULL)
		return;
	if (l->cap - l->len < 512) {
		l->cap = l->cap * 2 + 4096;
		l->s = realloc(l->s, l->cap);
	}
	va_start(ap, fmt);
	n = vsnprintf(l->s + l->len, l->cap - l->len, fmt, ap);
	va_end(ap);
	l->len += (size_t)n;
}

static void log_hex(struct log *l, const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		logf_(l, "%02x", p[i]);
	logf_(l, "\n");
}

/* Read one reply of the shape op has: logged; -1 if the client is closed. */
static int read_reply(struct rc *c, enum store_op op, uint64_t nvals,
		      struct log *l)
{
	unsigned char buf[4096], len8[8];
	size_t off = 0, n;
	uint64_t count = 1, i;

	switch (op) {
	case STORE_OP_CHECK:
		n = 1;
		break;
	case STORE_OP_PING:
		n = 4;
		break;
	case STORE_OP_ADD:
	case STORE_OP_GETNUMKEYS:
	case STORE_OP_DELETE_KEY:
	case STORE_OP_QUEUE_LEN:
		n = 8;
		break;
	default:
		n = 0;
	}
	if (n > 0) {
		if (rc_read(c, buf, n) != 0)
			return -1;
		log_hex(l, buf, n);
		return 0;
	}
	if (op == STORE_OP_MULTI_GET)
		count = nvals;
	if (op == STORE_OP_QUEUE_POP) {
		if (rc_read(c, len8, 8) != 0)
			return -1;
		memcpy(buf, len8, 8);
		off = 8;
		count = store_wire_u64(len8) > 0;
	}
	for (i = 0; i < count; i++) {
		if (rc_read(c, len8, 8) != 0)
			return -1;
		n = (size_t)store_wire_u64(len8);
		if (n > sizeof(buf) - off - 8)
			return -1;
		memcpy(buf + off, len8, 8);
		if (rc_read(c, buf + off + 8, n) != 0)
			return -1;
		off += 8 + n;
	}
	log_hex(l, buf, off);
	return 0;
}

/* A CHECK of a key nobody sets: 01, after a 00 if a parked wait was
 * answered before it. 1 if woken, 0 if not, -1 closed. */
static int probe(struct rc *c, int parked, struct log *l)
{
	struct store_buf b;
	unsigned char x;
	int woken = 0;

	store_buf_init(&b);
	b_op(&b, c, STORE_OP_CHECK);
	b_keys(&b, probe_key, 1);
	rc_send(c, &b);
	store_buf_release(&b);
	if (rc_read(c, &x, 1) != 0)
		return -1;
	if (x == 0 && parked) {
		woken = 1;
		if (rc_read(c, &x, 1) != 0)
			return -1;
	}
	if (x != 1)
		return -1;
	logf_(l, "%s\n", woken ? "woken" : "probe");
	return woken;
}

struct cstate {
	struct rc c;
	int parked;
};

/*
 * With refusals, the script also sends what the store refuses by closing the
 * sender's connection (world_lim small): a value past max_value, a key past
 * max_key, an unknown operation, a MULTI_GET whose reply passes max_output.
 * A refusal is logged as the sender's connection closing, or as the answer
 * it got instead: the relay must close that client alone, as the store does.
 */
static int refusal(struct rc *c, uint32_t which, struct log *l)
{
	static const char *const big[] = {"/big", "/big", "/big", "/big"};
	struct store_buf b;
	unsigned char x[8];
	size_t n = (world_lim->max_value > world_lim->max_key
			? world_lim->max_value
			: world_lim->max_key) +
		   1;
	char *v = malloc(n);
	int rc;

	memset(v, 'v', n);
	store_buf_init(&b);
	switch (which) {
	case 0:
		logf_(l, "set of %zu bytes ", world_lim->max_value + 1);
		b_op(&b, c, STORE_OP_SET);
		store_buf_str(&b, "/r", 2);
		store_buf_str(&b, v, world_lim->max_value + 1);
		break;
	case 1:
		logf_(l, "get of a %zu-byte key ", world_lim->max_key + 1);
		b_op(&b, c, STORE_OP_GET);
		store_buf_str(&b, v, world_lim->max_key + 1);
		break;
	case 2:
		logf_(l, "op 0x7e ");
		store_buf_u8(&b, 0x7e); /* no generation's operation */
		store_buf_str(&b, "/r", 2);
		break;
	default:
		/* A value of max_value, then a reply of 4 x 4 of them. */
		logf_(l, "multi_get of %zu bytes ",
		      16 * (world_lim->max_value + 8));
		b_op(&b, c, STORE_OP_SET);
		store_buf_str(&b, "/big", 4);
		store_buf_str(&b, v, world_lim->max_value);
		rc = rc_send(c, &b);
		store_buf_release(&b);
		if (rc != 0 || probe(c, 0, NULL) != 0) {
			free(v);
			return -1;
		}
		b_op(&b, c, STORE_OP_MULTI_GET);
		store_buf_u64(&b, 16);
		for (int i = 0; i < 16; i++)
			store_buf_str(&b, big[i % 4], 4);
		break;
	}
	free(v);
	rc = rc_send(c, &b);
	store_buf_release(&b);
	if (rc == 0)
		rc = rc_read(c, x, 1);
	if (rc == 0)
		logf_(l, "answered %02x\n", x[0]);
	else
		logf_(l, "%s\n", rc == -1 ? "closed" : "no answer");
	return -1; /* a new connection, whatever it got */
}

/* Run the seeded script with client i on port ports[i]; log everything. */
static const char *script(const int *ports, uint64_t seed, int refusals,
			  struct log *l)
{
	struct cstate cs[NCLIENTS];
	struct store_buf b;
	int i, step;

	rng_state = seed * 2654435761u + 1;
	for (i = 0; i < NCLIENTS; i++) {
		cs[i].parked = 0;
		if (rc_open(&cs[i].c, ports[i],
			    i % 2 ? STORE_GEN_G3 : STORE_GEN_G0) != 0)
			return "connect failed";
	}
	for (step = 0; step < NSTEPS; step++) {
		struct cstate *s = &cs[rnd(NCLIENTS)];
		struct rc *c = &s->c;
		int g3 = c->gen == STORE_GEN_G3, rc = 0, sync = 0;
		uint32_t what = rnd((g3 ? 17 : 13) + (refusals ? 4 : 0));
		const char *k = keys[rnd(4)], *v = vals[rnd(5)];
		const char *kk[2] = {keys[rnd(4)], keys[rnd(4)]};
		enum store_op op = STORE_OP_CHECK;

		logf_(l, "%d c%d: ", step, (int)(s - cs));
		store_buf_init(&b);
		/* A G3 client may send while its wait is parked. */
		if (what >= (g3 ? 17u : 13u) && (g3 || !s->parked)) {
			rc = refusal(c, what - (g3 ? 17 : 13), l);
			goto after;
		}
		if (s->parked) {
			/* A parked client cancels (G3) or hangs up. */
			if (g3 && rnd(2)) {
				unsigned char x;

				b_op(&b, c, STORE_OP_CANCEL_WAIT);
				rc_send(c, &b);
				rc = rc_read(c, &x, 1);
				logf_(l, "cancel %02x\n", x);
				s->parked = 0;
			} else {
				logf_(l, "hang up\n");
				rc = -1;
			}
			goto after;
		}
		switch (what) {
		case 0:
		case 1:
			op = STORE_OP_SET;
			b_op(&b, c, op);
			store_buf_str(&b, k, strlen(k));
			store_buf_str(&b, v, strlen(v));
			sync = 1;
			break;
		case 2:
			op = STORE_OP_GET;
			b_op(&b, c, op);
			store_buf_str(&b, k, strlen(k));
			break;
		case 3:
		case 4:
			op = STORE_OP_ADD;
			b_op(&b, c, op);
			store_buf_str(&b, k, strlen(k));
			store_buf_u64(&b, (uint64_t)(int64_t)((int)rnd(4) - 1));
			break;
		case 5:
			op = STORE_OP_COMPARE_SET;
			b_op(&b, c, op);
			store_buf_str(&b, k, strlen(k));
			store_buf_str(&b, v, strlen(v));
			v = vals[rnd(5)];
			store_buf_str(&b, v, strlen(v));
			break;
		case 6:
			op = STORE_OP_CHECK;
			b_op(&b, c, op);
			b_keys(&b, kk, 1 + rnd(2));
			break;
		case 7:
		case 8:
			op = STORE_OP_WAIT;
			b_op(&b, c, op);
			b_keys(&b, kk, 1 + rnd(2));
			break;
		case 9:
			op = STORE_OP_GETNUMKEYS;
			b_op(&b, c, op);
			break;
		case 10:
			op = STORE_OP_DELETE_KEY;
			b_op(&b, c, op);
			store_buf_str(&b, k, strlen(k));
			break;
		case 11:
			op = STORE_OP_MULTI_GET;
			b_op(&b, c, op);
			b_keys(&b, kk, 2);
			break;
		case 12:
			op = rnd(2) ? STORE_OP_APPEND : STORE_OP_MULTI_SET;
			b_op(&b, c, op);
			if (op == STORE_OP_APPEND) {
				store_buf_str(&b, k, strlen(k));
			} else {
				store_buf_u64(&b, 1);
				store_buf_str(&b, k, strlen(k));
			}
			store_buf_str(&b, v, strlen(v));
			sync = 1;
			break;
		case 13:
			op = STORE_OP_QUEUE_PUSH;
			b_op(&b, c, op);
			store_buf_str(&b, "/q", 2);
			store_buf_str(&b, v, strlen(v));
			sync = 1;
			break;
		case 14:
			op = STORE_OP_QUEUE_POP;
			b_op(&b, c, op);
			store_buf_str(&b, "/q", 2);
			break;
		case 15:
			op = STORE_OP_QUEUE_LEN;
			b_op(&b, c, op);
			store_buf_str(&b, "/q", 2);
			break;
		default:
			op = STORE_OP_WAIT; /* a blocking pop's first half */
			b_op(&b, c, op);
			b_keys(&b, (const char *const[]){"/q"}, 1);
			break;
		}
		logf_(l, "%s ", store_wire_op_name(op));
		rc = rc_send(c, &b);
		if (rc == 0 && op == STORE_OP_WAIT) {
			s->parked = 1;
			logf_(l, "\n");
		} else if (rc == 0 && sync) {
			rc = probe(c, 0, l) < 0 ? -1 : 0;
		} else if (rc == 0) {
			rc = read_reply(c, op, 2, l);
		}
	after:
		store_buf_release(&b);
		if (rc != 0) {
			logf_(l, "c%d closed\n", (int)(s - cs));
			rc_close(c);
			s->parked = 0;
			if (rc_open(c, c->port, c->gen) != 0)
				return "reconnect failed";
		}
		/* Settle: every parked client learns whether it was woken. */
		for (i = 0; i < NCLIENTS; i++) {
			if (!cs[i].parked)
				continue;
			logf_(l, "  c%d ", i);
			rc = probe(&cs[i].c, 1, l);
			if (rc < 0) {
				logf_(l, "closed\n");
				rc_close(&cs[i].c);
				if (rc_open(&cs[i].c, cs[i].c.port,
					    cs[i].c.gen) != 0)
					return "reconnect failed";
			}
			if (rc != 0)
				cs[i].parked = 0;
		}
	}
	for (i = 0; i < NCLIENTS; i++)
		rc_close(&cs[i].c);
	return NULL;
}

static int with_refusals;

static const char *differential(void)
{
	const char *env = getenv("CRUN_RELAY_SEED");
	uint64_t first = env != NULL ? strtoull(env, NULL, 0) : 1;
	int nseeds = env != NULL ? 1 : 4;
	int dports[NCLIENTS], rports[NCLIENTS];
	const char *err;

	for (int i = 0; i < NCLIENTS; i++) {
		dports[i] = W.direct_port;
		rports[i] = W.relay_port[i % NRELAYS];
	}
	for (uint64_t seed = first; seed < first + (uint64_t)nseeds; seed++) {
		struct log a = {0}, r = {0};
		size_t at = 0;

		/* Each seed uses its own key namespace: prefix by seed. */
		err = script(dports, seed, with_refusals, &a);
		if (err == NULL)
			err = script(rports, seed, with_refusals, &r);
		if (err == NULL &&
		    (a.len != r.len || memcmp(a.s, r.s, a.len) != 0)) {
			while (at < a.len && at < r.len && a.s[at] == r.s[at])
				at++;
			while (at > 0 && a.s[at - 1] != '\n')
				at--;
			snprintf(
			    fail_buf, sizeof(fail_buf),
			    "seed %llu (CRUN_RELAY_SEED=%llu): relay "
			    "differs from the store at:\n direct: %.160s\n "
			    "relay:  %.160s",
			    (unsigned long long)seed, (unsigned long long)seed,
			    a.s + at, r.s + at);
			err = fail_buf;
		}
		free(a.s);
		free(r.s);
		if (err != NULL) {
			fprintf(stderr, "test_store_relay: seed %llu\n",
				(unsigned long long)seed);
			return err;
		}
		/* The next seed starts from this one's keyspace in both
		 * worlds alike: the two stores saw the same operations. */
	}
	return NULL;
}

Test(store_relay, differential, .timeout = 120)
{
	run(differential);
}

static struct crun_store_limits lim_refuse;

/* The same with what the store refuses mixed in (small limits). */
Test(store_relay, differential_refusals, .timeout = 120)
{
	store_limits_default(&lim_refuse);
	lim_refuse.max_value = 512;
	lim_refuse.max_key = 64;
	lim_refuse.max_output = 4096;
	world_lim = &lim_refuse;
	with_refusals = 1;
	run(differential);
}

/* ---- Combining --------------------------------------------------------- */

#define CHECKF(cond, ...)                                                      \
	do {                                                                   \
		if (!(cond)) {                                                 \
			int n_ = snprintf(fail_buf, sizeof(fail_buf),          \
					  "%s:%d: %s: ", __FILE__, __LINE__,   \
					  #cond);                              \
			snprintf(fail_buf + n_, sizeof(fail_buf) - (size_t)n_, \
				 __VA_ARGS__);                                 \
			return fail_buf;                                       \
		}                                                              \
	} while (0)

#define NC 8

static const char *combine(void)
{
	struct rc c[NC], setter;
	struct store_buf b;
	unsigned char out[16];
	int seen[NC + 1] = {0};
	struct snap s0, s1;
	int i;

	for (i = 0; i < NC; i++)
		CHECKF(rc_open(&c[i], W.relay_port[0],
			       i % 2 ? STORE_GEN_G3 : STORE_GEN_G0) == 0,
		       "connect");
	CHECKF(rc_open(&setter, W.relay_port[1], STORE_GEN_G3) == 0, "connect");
	/* Make sure every connection is accepted and validated. */
	for (i = 0; i < NC; i++)
		CHECKF(probe(&c[i], 0, NULL) == 0, "probe %d", i);

	/* NC concurrent ADDs of 1: one upstream ADD, results 1..NC. */
	s0 = snap();
	pause_loop();
	for (i = 0; i < NC; i++) {
		store_buf_init(&b);
		b_op(&b, &c[i], STORE_OP_ADD);
		store_buf_str(&b, "/barrier", 8);
		store_buf_u64(&b, 1);
		rc_send(&c[i], &b);
		store_buf_release(&b);
	}
	resume_loop();
	for (i = 0; i < NC; i++) {
		int64_t v;

		CHECKF(rc_read(&c[i], out, 8) == 0, "add reply %d", i);
		v = (int64_t)store_wire_u64(out);
		CHECKF(v >= 1 && v <= NC && !seen[v], "result %lld",
		       (long long)v);
		seen[v] = 1;
	}
	s1 = snap();
	CHECKF(s1.relay[0].requests_up - s0.relay[0].requests_up == 1,
	       "%llu upstream requests for %d adds",
	       (unsigned long long)(s1.relay[0].requests_up -
				    s0.relay[0].requests_up),
	       NC);
	CHECKF(s1.relay[0].requests_in - s0.relay[0].requests_in == NC,
	       "requests in");

	/* NC concurrent WAITs on one missing key: one upstream WAIT_TAG. */
	s0 = snap();
	pause_loop();
	for (i = 0; i < NC; i++) {
		store_buf_init(&b);
		b_op(&b, &c[i], STORE_OP_WAIT);
		b_keys(&b, (const char *const[]){"/k"}, 1);
		rc_send(&c[i], &b);
		store_buf_release(&b);
	}
	resume_loop();
	for (i = 0; i < NC; i++)
		CHECKF(rc_quiet(&c[i], 0), "wait %d answered early", i);
	/* The store holds one waiter for all of them. */
	for (int t = 0; t < 200 && snap().up.waiters != 1; t++)
		usleep(10000);
	s1 = snap();
	CHECKF(s1.up.waiters == 1, "%zu waiters on the store", s1.up.waiters);
	CHECKF(s1.relay[0].requests_up - s0.relay[0].requests_up == 1,
	       "%llu upstream requests for %d waits",
	       (unsigned long long)(s1.relay[0].requests_up -
				    s0.relay[0].requests_up),
	       NC);
	store_buf_init(&b);
	b_op(&b, &setter, STORE_OP_SET);
	store_buf_str(&b, "/k", 2);
	store_buf_str(&b, "addr", 4);
	rc_send(&setter, &b);
	store_buf_release(&b);
	for (i = 0; i < NC; i++) {
		CHECKF(rc_read(&c[i], out, 1) == 0 && out[0] == 0, "wake %d",
		       i);
	}
	/* Then their GETs, at once: one upstream GET. */
	s0 = snap();
	pause_loop();
	for (i = 0; i < NC; i++) {
		store_buf_init(&b);
		b_op(&b, &c[i], STORE_OP_GET);
		store_buf_str(&b, "/k", 2);
		rc_send(&c[i], &b);
		store_buf_release(&b);
	}
	resume_loop();
	for (i = 0; i < NC; i++) {
		CHECKF(rc_read(&c[i], out, 12) == 0 &&
			   store_wire_u64(out) == 4 &&
			   memcmp(out + 8, "addr", 4) == 0,
		       "get %d", i);
	}
	s1 = snap();
	CHECKF(s1.relay[0].requests_up - s0.relay[0].requests_up == 1,
	       "%llu upstream requests for %d gets",
	       (unsigned long long)(s1.relay[0].requests_up -
				    s0.relay[0].requests_up),
	       NC);
	/* One connection per relay, however many clients. */
	CHECKF(s1.up_conns == NRELAYS, "%zu connections", s1.up_conns);
	CHECKF(s1.relay[0].clients == NC, "%llu clients",
	       (unsigned long long)s1.relay[0].clients);
	for (i = 0; i < NC; i++)
		rc_close(&c[i]);
	rc_close(&setter);
	return NULL;
}

Test(store_relay, combine, .timeout = 60)
{
	run(combine);
}

/*
 * A client's own order survives combining: its ADD does not join a held ADD
 * placed before its own SET of the same key (it would skip the SET).
 */
static const char *combine_keeps_order(void)
{
	struct rc c, d;
	struct store_buf b;
	unsigned char out[8];
	int64_t dv, c1, c2;

	CHECKF(rc_open(&c, W.relay_port[0], STORE_GEN_G3) == 0, "connect");
	CHECKF(rc_open(&d, W.relay_port[0], STORE_GEN_G0) == 0, "connect");
	CHECKF(probe(&c, 0, NULL) == 0 && probe(&d, 0, NULL) == 0, "probe");
	pause_loop();
	store_buf_init(&b);
	b_op(&b, &d, STORE_OP_ADD);
	store_buf_str(&b, "/k", 2);
	store_buf_u64(&b, 1);
	rc_send(&d, &b);
	store_buf_release(&b);
	usleep(20 * 1000); /* d's ADD is read first */
	store_buf_init(&b);
	b_op(&b, &c, STORE_OP_ADD);
	store_buf_str(&b, "/k", 2);
	store_buf_u64(&b, 1);
	b_op(&b, &c, STORE_OP_SET);
	store_buf_str(&b, "/k", 2);
	store_buf_str(&b, "100", 3);
	b_op(&b, &c, STORE_OP_ADD);
	store_buf_str(&b, "/k", 2);
	store_buf_u64(&b, 1);
	rc_send(&c, &b);
	store_buf_release(&b);
	resume_loop();
	CHECKF(rc_read(&d, out, 8) == 0, "d's add");
	dv = (int64_t)store_wire_u64(out);
	CHECKF(rc_read(&c, out, 8) == 0, "c's first add");
	c1 = (int64_t)store_wire_u64(out);
	CHECKF(rc_read(&c, out, 8) == 0, "c's second add");
	c2 = (int64_t)store_wire_u64(out);
	CHECKF(dv + c1 == 3 && c2 == 101, "d %lld, c %lld then %lld",
	       (long long)dv, (long long)c1, (long long)c2);
	rc_close(&c);
	rc_close(&d);
	return NULL;
}

/*
 * Concurrent blocking pops' WAITs on one queue are one upstream wait, but a
 * QUEUE_PUSH is present for one waiter only: each push wakes one client,
 * as the store alone would.
 */
static const char *combine_queue(void)
{
	struct rc c[3], p;
	struct store_buf b;
	int i, push, woken;

	for (i = 0; i < 3; i++)
		CHECKF(rc_open(&c[i], W.relay_port[0], STORE_GEN_G3) == 0,
		       "connect");
	CHECKF(rc_open(&p, W.relay_port[1], STORE_GEN_G3) == 0, "connect");
	for (i = 0; i < 3; i++)
		CHECKF(probe(&c[i], 0, NULL) == 0, "probe");
	pause_loop();
	for (i = 0; i < 3; i++) {
		store_buf_init(&b);
		b_op(&b, &c[i], STORE_OP_WAIT);
		b_keys(&b, (const char *const[]){"/q"}, 1);
		rc_send(&c[i], &b);
		store_buf_release(&b);
	}
	resume_loop();
	for (int t = 0; t < 200 && snap().up.waiters != 1; t++)
		usleep(10000);
	CHECKF(snap().up.waiters == 1, "the waits were not combined");
	int parked[3] = {1, 1, 1};
	for (push = 1; push <= 3; push++) {
		store_buf_init(&b);
		b_op(&b, &p, STORE_OP_QUEUE_PUSH);
		store_buf_str(&b, "/q", 2);
		store_buf_str(&b, "item", 4);
		rc_send(&p, &b);
		store_buf_release(&b);
		CHECKF(probe(&p, 0, NULL) == 0, "push %d", push);
		woken = 0;
		for (i = 0; i < 3; i++) {
			int w;

			if (!parked[i])
				continue;
			w = probe(&c[i], 1, NULL);
			CHECKF(w >= 0, "client %d closed", i);
			if (w) {
				parked[i] = 0;
				woken++;
			}
		}
		CHECKF(woken == 1, "push %d woke %d clients", push, woken);
	}
	for (i = 0; i < 3; i++)
		rc_close(&c[i]);
	rc_close(&p);
	return NULL;
}

Test(store_relay, combine_queue, .timeout = 30)
{
	run(combine_queue);
}

Test(store_relay, combine_keeps_order, .timeout = 30)
{
	run(combine_keeps_order);
}

/*
 * A client's ADD that fails (not a number) closes that client only, as the
 * store would; its neighbour's ADD joined to it fails the same way, and a
 * third client on the same relay carries on.
 */
static const char *bad_add(void)
{
	struct rc a, c;
	struct store_buf b;
	unsigned char out[16];

	CHECKF(rc_open(&a, W.relay_port[0], STORE_GEN_G0) == 0, "connect");
	CHECKF(rc_open(&c, W.relay_port[0], STORE_GEN_G3) == 0, "connect");
	store_buf_init(&b);
	b_op(&b, &a, STORE_OP_SET);
	store_buf_str(&b, "/s", 2);
	store_buf_str(&b, "abc", 3);
	b_op(&b, &a, STORE_OP_ADD);
	store_buf_str(&b, "/s", 2);
	store_buf_u64(&b, 1);
	rc_send(&a, &b);
	store_buf_release(&b);
	CHECKF(rc_read(&a, out, 1) == -1, "bad add not closed");
	store_buf_init(&b);
	b_op(&b, &c, STORE_OP_ADD);
	store_buf_str(&b, "/ok", 3);
	store_buf_u64(&b, 2);
	rc_send(&c, &b);
	store_buf_release(&b);
	CHECKF(rc_read(&c, out, 8) == 0 && store_wire_u64(out) == 2, "add");
	CHECKF(snap().up_conns == NRELAYS, "the relay's connection was cut");
	rc_close(&a);
	rc_close(&c);
	return NULL;
}

Test(store_relay, bad_add, .timeout = 30)
{
	run(bad_add);
}

/* ---- Bounds ------------------------------------------------------------ */

#define BIG (256u << 10)
#define NGETS 200

/*
 * A client that asks and does not read is read no more once its replies
 * pass its share (max_client_bytes): the relay holds a bounded amount for
 * it, and its neighbour on the same relay is served meanwhile; once it
 * reads, every reply comes, in order.
 */
static const char *slow_reader(void)
{
	struct rc setter, b, c;
	struct store_buf f;
	unsigned char hdr[8], *buf = malloc(BIG);
	struct snap s0, s1;
	uint64_t in;

	CHECKF(buf != NULL, "malloc");
	memset(buf, 'v', BIG);
	CHECKF(rc_open(&setter, W.relay_port[1], STORE_GEN_G3) == 0, "connect");
	CHECKF(rc_open(&b, W.relay_port[0], STORE_GEN_G3) == 0, "connect");
	CHECKF(rc_open(&c, W.relay_port[0], STORE_GEN_G0) == 0, "connect");
	store_buf_init(&f);
	b_op(&f, &setter, STORE_OP_SET);
	store_buf_str(&f, "/big", 4);
	store_buf_str(&f, buf, BIG);
	b_op(&f, &setter, STORE_OP_SET);
	store_buf_str(&f, "/small", 6);
	store_buf_str(&f, "s", 1);
	rc_send(&setter, &f);
	store_buf_release(&f);
	CHECKF(probe(&setter, 0, NULL) == 0, "set");
	CHECKF(probe(&b, 0, NULL) == 0 && probe(&c, 0, NULL) == 0, "probe");
	s0 = snap();
	for (int i = 0; i < NGETS / 5; i++) {
		store_buf_init(&f);
		for (int k = 0; k < 5; k++) {
			b_op(&f, &b, STORE_OP_GET);
			store_buf_str(&f, "/big", 4);
		}
		rc_send(&b, &f);
		store_buf_release(&f);
		usleep(5000);
	}
	/* c is served while b is stalled. */
	store_buf_init(&f);
	b_op(&f, &c, STORE_OP_GET);
	store_buf_str(&f, "/small", 6);
	rc_send(&c, &f);
	store_buf_release(&f);
	CHECKF(rc_read(&c, hdr, 8) == 0 && store_wire_u64(hdr) == 1 &&
		   rc_read(&c, hdr, 1) == 0 && hdr[0] == 's',
	       "c's get");
	s1 = snap();
	in = s1.relay[0].requests_in - s0.relay[0].requests_in;
	CHECKF(in < NGETS, "all %llu of b's requests were read: no bound",
	       (unsigned long long)in);
	for (int i = 0; i < NGETS; i++) {
		CHECKF(rc_read(&b, hdr, 8) == 0 && store_wire_u64(hdr) == BIG,
		       "reply %d", i);
		CHECKF(rc_read(&b, buf, BIG) == 0 && buf[0] == 'v' &&
			   buf[BIG - 1] == 'v',
		       "value %d", i);
	}
	s1 = snap();
	CHECKF(s1.relay[0].requests_in - s0.relay[0].requests_in == NGETS + 1,
	       "requests in");
	free(buf);
	rc_close(&setter);
	rc_close(&b);
	rc_close(&c);
	return NULL;
}

Test(store_relay, slow_reader, .timeout = 60)
{
	relay_max_client = 1u << 20;
	run(slow_reader);
}

/* ---- Disconnects and loss ---------------------------------------------- */

static const char *disconnect_parked(void)
{
	struct rc a, bcl, setter;
	struct store_buf b;
	unsigned char out[16];

	CHECKF(rc_open(&a, W.relay_port[0], STORE_GEN_G0) == 0, "connect");
	CHECKF(rc_open(&bcl, W.relay_port[0], STORE_GEN_G3) == 0, "connect");
	CHECKF(rc_open(&setter, W.relay_port[2], STORE_GEN_G3) == 0, "connect");
	/* a and b park on different keys, a then hangs up. */
	store_buf_init(&b);
	b_op(&b, &a, STORE_OP_WAIT);
	b_keys(&b, (const char *const[]){"/x"}, 1);
	rc_send(&a, &b);
	store_buf_release(&b);
	store_buf_init(&b);
	b_op(&b, &bcl, STORE_OP_WAIT);
	b_keys(&b, (const char *const[]){"/y"}, 1);
	rc_send(&bcl, &b);
	store_buf_release(&b);
	for (int t = 0; t < 200 && snap().up.waiters != 2; t++)
		usleep(10000);
	CHECKF(snap().up.waiters == 2, "waiters %zu", snap().up.waiters);
	rc_close(&a);
	for (int t = 0; t < 200 && snap().up.waiters != 1; t++)
		usleep(10000);
	CHECKF(snap().up.waiters == 1, "the store still waits for a: %zu",
	       snap().up.waiters);
	/* b still works: its wait is answered when /y appears. */
	store_buf_init(&b);
	b_op(&b, &setter, STORE_OP_SET);
	store_buf_str(&b, "/x", 2);
	store_buf_str(&b, "1", 1);
	b_op(&b, &setter, STORE_OP_SET);
	store_buf_str(&b, "/y", 2);
	store_buf_str(&b, "1", 1);
	rc_send(&setter, &b);
	store_buf_release(&b);
	CHECKF(rc_read(&bcl, out, 1) == 0 && out[0] == 0, "b not woken");
	CHECKF(probe(&bcl, 0, NULL) == 0, "b after");
	rc_close(&bcl);
	rc_close(&setter);
	return NULL;
}

Test(store_relay, disconnect_parked, .timeout = 30)
{
	run(disconnect_parked);
}

static void close_up_fn(void *arg)
{
	store_server_close(W.up, NULL, NULL);
	W.up = NULL;
}

static int all_lost;

static void lost_check_fn(void *arg)
{
	all_lost = 1;
	for (int i = 0; i < NRELAYS; i++)
		all_lost &= W.lost[i] && W.lost_status[i] != 0;
}

static const char *upstream_loss(void)
{
	struct rc a, c, late;
	struct store_buf b;
	unsigned char out[16];

	CHECKF(rc_open(&a, W.relay_port[0], STORE_GEN_G0) == 0, "connect");
	CHECKF(rc_open(&c, W.relay_port[1], STORE_GEN_G3) == 0, "connect");
	store_buf_init(&b);
	b_op(&b, &a, STORE_OP_WAIT);
	b_keys(&b, (const char *const[]){"/never"}, 1);
	rc_send(&a, &b);
	store_buf_release(&b);
	CHECKF(probe(&c, 0, NULL) == 0, "c");
	on_loop(close_up_fn, NULL);
	/* The parked client and the idle one are both closed. */
	CHECKF(rc_read(&a, out, 1) == -1, "parked client not closed");
	CHECKF(rc_read(&c, out, 1) == -1, "idle client not closed");
	for (int t = 0; t < 200; t++) {
		on_loop(lost_check_fn, NULL);
		if (all_lost)
			break;
		usleep(10000);
	}
	CHECKF(all_lost, "lost not called on every relay");
	/* A client arriving later is closed at once. */
	CHECKF(rc_open(&late, W.relay_port[0], STORE_GEN_G3) == 0, "connect");
	CHECKF(rc_read(&late, out, 1) == -1, "late client not closed");
	rc_close(&a);
	rc_close(&c);
	rc_close(&late);
	return NULL;
}

Test(store_relay, upstream_loss, .timeout = 30)
{
	run(upstream_loss);
}

/* Every relay answers through the store, which it reached. */
static const char *through_a_name(void)
{
	struct rc c;

	for (int i = 0; i < NRELAYS; i++) {
		CHECKF(rc_open(&c, W.relay_port[i], STORE_GEN_G3) == 0,
		       "connect");
		CHECKF(probe(&c, 0, NULL) == 0, "relay %d did not answer", i);
		rc_close(&c);
	}
	CHECKF(snap().up_conns == NRELAYS, "the store has %zu connections",
	       snap().up_conns);
	return NULL;
}

/*
 * The relays name the store localhost, ::1 first then 127.0.0.1 (a private
 * /etc/hosts, as Debian's), and the store listens on 127.0.0.1 only: ::1
 * refuses, each relay moves on to 127.0.0.1.
 */
Test(store_relay, up_host_v6_first, .timeout = 30)
{
	char why[256];

	if (hosts_v6_first("localhost", why, sizeof(why)) != 0)
		cr_skip_test("%s", why);
	relay_up_host = "localhost";
	run(through_a_name);
}

/* ---- A client's bad request closes that client only -------------------- */

/* Write p[0..n) to c whatever happens to it (no SIGPIPE). */
static void rc_send_raw(struct rc *c, const void *p, size_t n)
{
	size_t off = 0;

	while (off < n) {
		ssize_t k =
		    send(c->fd, (const char *)p + off, n - off, MSG_NOSIGNAL);

		if (k <= 0)
			return;
		off += (size_t)k;
	}
}

/* A MULTI_SET frame of n pairs, each value vlen bytes of 'm'. */
static void b_multi_set(struct store_buf *b, const struct rc *c, int n,
			size_t vlen)
{
	unsigned char *v = malloc(vlen);

	memset(v, 'm', vlen);
	b_op(b, c, STORE_OP_MULTI_SET);
	store_buf_u64(b, (uint64_t)n);
	for (int i = 0; i < n; i++) {
		store_buf_str(b, "/ms", 3);
		store_buf_str(b, v, vlen);
	}
	free(v);
}

/* c (on relay 0) was closed; relay 0's other clients and relay 1 work. */
static const char *others_unhurt(struct rc *bad, const char *what)
{
	struct rc c, d;
	struct store_buf b;
	unsigned char out[8];

	CHECKF(rc_read(bad, out, 1) == -1, "%s: its sender was not closed",
	       what);
	CHECKF(W.lost[0] == 0, "%s: relay 0 lost the store", what);
	CHECKF(snap().up_conns == NRELAYS, "%s: the store has %zu connections",
	       what, snap().up_conns);
	CHECKF(rc_open(&c, W.relay_port[0], STORE_GEN_G3) == 0, "connect");
	CHECKF(rc_open(&d, W.relay_port[1], STORE_GEN_G0) == 0, "connect");
	store_buf_init(&b);
	b_op(&b, &c, STORE_OP_ADD);
	store_buf_str(&b, "/after", 6);
	store_buf_u64(&b, 5);
	rc_send(&c, &b);
	store_buf_release(&b);
	CHECKF(rc_read(&c, out, 8) == 0 && store_wire_u64(out) == 5,
	       "%s: relay 0's next client", what);
	CHECKF(probe(&d, 0, NULL) == 0, "%s: relay 1's client", what);
	rc_close(&c);
	rc_close(&d);
	return NULL;
}

/*
 * A MULTI_SET frame longer than 2 * max_value + max_key + 64 (each value
 * within max_value): the store closes the sender's connection; the relay
 * must not forward it (the store would cut the relay's connection) and must
 * close its sender itself, also when the frame is larger than the sender's
 * share (it would otherwise wait, paused, for ever).
 */
static const char *oversized_frame(void)
{
	struct rc a, e;
	struct store_buf b;
	const char *why;

	CHECKF(rc_open(&e, W.relay_port[0], STORE_GEN_G3) == 0, "connect");
	CHECKF(probe(&e, 0, NULL) == 0, "probe");
	CHECKF(rc_open(&a, W.relay_port[0], STORE_GEN_G3) == 0, "connect");
	store_buf_init(&b);
	b_multi_set(&b, &a, 3, world_lim->max_value - 1024);
	rc_send_raw(&a, b.data, b.len);
	store_buf_release(&b);
	why = others_unhurt(&a, "multi_set frame");
	if (why == NULL)
		CHECKF(probe(&e, 0, NULL) == 0, "relay 0's first client");
	rc_close(&a);
	rc_close(&e);
	return why;
}

static struct crun_store_limits lim_small;

/* The relay reads the frame whole (its share is max_output). */
Test(store_relay, oversized_frame, .timeout = 60)
{
	store_limits_default(&lim_small);
	lim_small.max_value = 64u << 10;
	world_lim = &lim_small;
	run(oversized_frame);
}

/* The frame is larger than the sender's share. */
Test(store_relay, oversized_frame_small_share, .timeout = 60)
{
	store_limits_default(&lim_small);
	lim_small.max_value = 256u << 10;
	lim_small.max_output = 256u << 10;
	world_lim = &lim_small;
	run(oversized_frame);
}

/*
 * A MULTI_GET whose reply would pass max_output: the store closes the
 * sender's connection; through the relay, that client only.
 */
static const char *oversized_reply(void)
{
	static const char *const two[] = {"/v", "/v"};
	struct rc a, s;
	struct store_buf b;
	size_t vlen = world_lim->max_output * 3 / 4;
	unsigned char *v = malloc(vlen);

	memset(v, 'v', vlen);
	CHECKF(rc_open(&s, W.relay_port[1], STORE_GEN_G3) == 0, "connect");
	store_buf_init(&b);
	b_op(&b, &s, STORE_OP_SET);
	store_buf_str(&b, "/v", 2);
	store_buf_str(&b, v, vlen);
	rc_send(&s, &b);
	store_buf_release(&b);
	free(v);
	CHECKF(probe(&s, 0, NULL) == 0, "set");
	CHECKF(rc_open(&a, W.relay_port[0], STORE_GEN_G3) == 0, "connect");
	store_buf_init(&b);
	b_op(&b, &a, STORE_OP_MULTI_GET);
	b_keys(&b, two, 2);
	rc_send(&a, &b);
	store_buf_release(&b);
	rc_close(&s);
	return others_unhurt(&a, "multi_get reply");
}

Test(store_relay, oversized_reply, .timeout = 60)
{
	store_limits_default(&lim_small);
	lim_small.max_output = 256u << 10;
	world_lim = &lim_small;
	run(oversized_reply);
}

/* A partial frame, then nothing: closed after idle_timeout, as at the
 * store. */
static const char *idle_partial(void)
{
	struct rc a, d;
	struct store_buf b;
	unsigned char x;
	const char *why;

	CHECKF(rc_open(&d, W.direct_port, STORE_GEN_G3) == 0, "connect");
	CHECKF(rc_open(&a, W.relay_port[0], STORE_GEN_G3) == 0, "connect");
	store_buf_init(&b);
	b_op(&b, &a, STORE_OP_SET);
	store_buf_str(&b, "/idle", 5);
	store_buf_u64(&b, 100); /* a value of 100 bytes, never sent */
	rc_send(&a, &b);
	rc_send(&d, &b);
	store_buf_release(&b);
	CHECKF(rc_read(&d, &x, 1) == -1, "the store kept it");
	CHECKF(rc_read(&a, &x, 1) == -1, "the relay kept it");
	why = others_unhurt(&a, "idle partial frame");
	rc_close(&a);
	rc_close(&d);
	return why;
}

Test(store_relay, idle_partial, .timeout = 60)
{
	store_limits_default(&lim_small);
	lim_small.idle_timeout = 1;
	world_lim = &lim_small;
	run(idle_partial);
}

/* ---- A client's flood is paused, the relay's memory bounded ------------ */

/* Bytes the process has allocated. */
static size_t heap_used(void)
{
	struct mallinfo2 m = mallinfo2();

	return m.uordblks + m.hblkhd;
}

#define FLOOD_VAL (100u << 10)
#define FLOOD_GETS 4000
/* Growth of the heap allowed while a client floods (its share is 1 MiB). */
#define FLOOD_HEAP (8u << 20)

/*
 * 4,000 GETs of one 100 KiB value in one write, not read: the relay (which
 * combines them) must not copy the value 4,000 times; the client is paused
 * near its share, and gets every reply once it reads.
 */
static const char *get_flood(void)
{
	struct rc a, s;
	struct store_buf b, f;
	unsigned char *v = malloc(FLOOD_VAL), hdr[8];
	size_t base, grown;
	struct snap s0, s1;

	CHECKF(v != NULL, "malloc");
	memset(v, 'g', FLOOD_VAL);
	CHECKF(rc_open(&s, W.relay_port[1], STORE_GEN_G3) == 0, "connect");
	CHECKF(rc_open(&a, W.relay_port[0], STORE_GEN_G3) == 0, "connect");
	store_buf_init(&b);
	b_op(&b, &s, STORE_OP_SET);
	store_buf_str(&b, "/g", 2);
	store_buf_str(&b, v, FLOOD_VAL);
	rc_send(&s, &b);
	store_buf_release(&b);
	CHECKF(probe(&s, 0, NULL) == 0 && probe(&a, 0, NULL) == 0, "set");
	store_buf_init(&f);
	for (int i = 0; i < FLOOD_GETS; i++) {
		b_op(&f, &a, STORE_OP_GET);
		store_buf_str(&f, "/g", 2);
	}
	s0 = snap();
	base = heap_used();
	rc_send(&a, &f);
	usleep(500 * 1000);
	grown = heap_used() - base;
	if (heap_used() < base)
		grown = 0;
	s1 = snap();
	store_buf_release(&f);
	CHECKF(grown < FLOOD_HEAP, "the heap grew by %zu bytes", grown);
	CHECKF(s1.relay[0].requests_in - s0.relay[0].requests_in < FLOOD_GETS,
	       "every GET was taken: the client was not paused");
	for (int i = 0; i < FLOOD_GETS; i++) {
		CHECKF(rc_read(&a, hdr, 8) == 0 &&
			   store_wire_u64(hdr) == FLOOD_VAL,
		       "reply %d", i);
		CHECKF(rc_read(&a, v, FLOOD_VAL) == 0 && v[0] == 'g' &&
			   v[FLOOD_VAL - 1] == 'g',
		       "value %d", i);
	}
	CHECKF(probe(&s, 0, NULL) == 0, "relay 1's client");
	free(v);
	rc_close(&a);
	rc_close(&s);
	return NULL;
}

Test(store_relay, get_flood, .timeout = 120)
{
	relay_max_client = 1u << 20;
	run(get_flood);
}

#define FLOOD_WAITS 300000

/*
 * WAITs on a key never set, as fast as the client can write: parked waits
 * count in its share, so it is paused with the heap bounded; once another
 * client sets the key, every wait it sent is answered.
 */
static const char *wait_flood(void)
{
	static const char *const k[] = {"/never"};
	struct rc a, s;
	struct store_buf f, b;
	size_t frame, off = 0, base, grown, nsent;
	unsigned char *got;
	struct snap s0, s1;

	CHECKF(rc_open(&s, W.relay_port[0], STORE_GEN_G3) == 0, "connect");
	CHECKF(rc_open(&a, W.relay_port[0], STORE_GEN_G3) == 0, "connect");
	CHECKF(probe(&a, 0, NULL) == 0, "probe");
	store_buf_init(&f);
	for (int i = 0; i < FLOOD_WAITS; i++) {
		b_op(&f, &a, STORE_OP_WAIT);
		b_keys(&f, k, 1);
	}
	frame = f.len / FLOOD_WAITS;
	got = malloc(FLOOD_WAITS);
	CHECKF(got != NULL && !f.oom, "malloc");
	s0 = snap();
	base = heap_used();
	while (off < f.len) {
		struct pollfd p = {.fd = a.fd, .events = POLLOUT};
		ssize_t n;

		if (poll(&p, 1, 500) <= 0)
			break; /* the relay reads it no more */
		n = send(a.fd, f.data + off, f.len - off,
			 MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0 && errno != EAGAIN)
			break;
		if (n > 0)
			off += (size_t)n;
	}
	usleep(300 * 1000); /* the relay takes what it has read */
	grown = heap_used() - base;
	if (heap_used() < base)
		grown = 0;
	s1 = snap();
	CHECKF(grown < FLOOD_HEAP, "the heap grew by %zu bytes", grown);
	CHECKF(s1.relay[0].requests_in - s0.relay[0].requests_in < FLOOD_WAITS,
	       "every WAIT was taken: the client was not paused");
	/* Finish the frame cut in the middle, then wake them all. */
	nsent = (off + frame - 1) / frame;
	rc_send_raw(&a, f.data + off, nsent * frame - off);
	store_buf_release(&f);
	store_buf_init(&b);
	b_op(&b, &s, STORE_OP_SET);
	store_buf_str(&b, "/never", 6);
	store_buf_str(&b, "x", 1);
	rc_send(&s, &b);
	store_buf_release(&b);
	CHECKF(probe(&s, 0, NULL) == 0, "relay 0's other client");
	CHECKF(rc_read(&a, got, nsent) == 0, "%zu waits not all answered",
	       nsent);
	for (size_t i = 0; i < nsent; i++)
		CHECKF(got[i] == STORE_STOP_WAITING, "wait %zu", i);
	CHECKF(rc_quiet(&a, 100), "more answers than waits");
	free(got);
	rc_close(&a);
	rc_close(&s);
	return NULL;
}

Test(store_relay, wait_flood, .timeout = 120)
{
	relay_max_client = 1u << 20;
	run(wait_flood);
}

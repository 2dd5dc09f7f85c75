/*
 * The store server's limits at their edges (include/crun/store.h): a key,
 * a value, a request's keys and a reply of exactly the limit are served and
 * read back; one byte (or key) more closes that connection with the logged
 * reason naming the limit, and another client is served throughout. Each
 * limit at its default where that is cheap (key, value, keys per request)
 * and at a value set through crun_store_limits (what the --store_max_*
 * options fill). max_memory is pinned through the in-process API, where no
 * connection buffer blurs the count; idle_timeout by waiting for the close
 * with a bound (no sleep decides the verdict).
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "crun/err.h"
#include "crun/store.h"

typedef const char *(*scenario_fn)(int port);

struct fixture {
	uv_loop_t loop;
	uv_async_t done, ask;
	struct crun_store_server *srv;
	scenario_fn fn;
	int port;
	const char *result;
	pthread_t th;
};

static char fail_buf[512];
static struct crun_store_limits lim; /* the running server's */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static struct crun_store_stats snap;
static int seq;
static struct fixture *cur;
static char log_path[64];

#define CHECK(cond)                                                            \
	do {                                                                   \
		if (!(cond)) {                                                 \
			snprintf(fail_buf, sizeof(fail_buf), "%s:%d: %s",      \
				 __FILE__, __LINE__, #cond);                   \
			return fail_buf;                                       \
		}                                                              \
	} while (0)
#define CHECK_RC(expr, want)                                                   \
	do {                                                                   \
		int rc_ = (expr);                                              \
		if (rc_ != (want)) {                                           \
			snprintf(fail_buf, sizeof(fail_buf),                   \
				 "%s:%d: %s = %s, want %s", __FILE__,          \
				 __LINE__, #expr, crun_err_name(rc_),          \
				 crun_err_name(want));                         \
			return fail_buf;                                       \
		}                                                              \
	} while (0)

static void on_ask(uv_async_t *a)
{
	struct fixture *f = a->data;

	pthread_mutex_lock(&mu);
	store_server_stats(f->srv, &snap);
	seq++;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
}

static struct crun_store_stats get_stats(void)
{
	struct crun_store_stats st;
	int s;

	pthread_mutex_lock(&mu);
	s = seq;
	uv_async_send(&cur->ask);
	while (seq == s)
		pthread_cond_wait(&cv, &mu);
	st = snap;
	pthread_mutex_unlock(&mu);
	return st;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *scenario_thread(void *arg)
{
	struct fixture *f = arg;

	f->result = f->fn(f->port);
	uv_async_send(&f->done);
	return NULL;
}

static void on_done(uv_async_t *a)
{
	struct fixture *f = a->data;

	store_server_close(f->srv, NULL, NULL);
	uv_close((uv_handle_t *)&f->done, NULL);
	uv_close((uv_handle_t *)&f->ask, NULL);
}

/* Whether the server has logged a line containing frag. */
static int log_has(const char *frag)
{
	static char buf[1 << 16];
	size_t n;
	FILE *f = fopen(log_path, "r");

	if (f == NULL)
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	return strstr(buf, frag) != NULL;
}

/* Run fn against a fresh server with the limits in lim, its log captured. */
static void run_scenario(scenario_fn fn)
{
	struct fixture f;
	int saved, logfd;

	memset(&f, 0, sizeof(f));
	cr_assert_eq(uv_loop_init(&f.loop), 0);
	cr_assert_eq(store_server_new(&f.loop, "127.0.0.1", 0, &lim, &f.srv),
		     0);
	snprintf(log_path, sizeof(log_path), "/tmp/crun-test-limits-%d.log",
		 (int)getpid());
	saved = dup(2);
	logfd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	cr_assert(saved >= 0 && logfd >= 0);
	dup2(logfd, 2);
	close(logfd);
	f.port = store_server_port(f.srv);
	f.fn = fn;
	uv_async_init(&f.loop, &f.done, on_done);
	f.done.data = &f;
	uv_async_init(&f.loop, &f.ask, on_ask);
	f.ask.data = &f;
	cur = &f;
	cr_assert_eq(pthread_create(&f.th, NULL, scenario_thread, &f), 0);
	uv_run(&f.loop, UV_RUN_DEFAULT);
	pthread_join(f.th, NULL);
	dup2(saved, 2);
	close(saved);
	unlink(log_path);
	cr_assert_eq(uv_loop_close(&f.loop), 0);
	cr_assert_null(f.result, "%s", f.result);
}

static int raw_connect(int port)
{
	struct sockaddr_in sa;
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Whether the server closed fd within ms (EOF or reset). */
static int raw_closed(int fd, int ms)
{
	struct pollfd pfd = {fd, POLLIN, 0};
	unsigned char b;

	if (poll(&pfd, 1, ms) <= 0)
		return 0;
	return recv(fd, &b, 1, 0) <= 0;
}

/* A key of n bytes ("/kkk..."), malloc'd. */
static char *key_of(size_t n, char c)
{
	char *k = malloc(n + 1);

	memset(k, c, n);
	k[0] = '/';
	k[n] = '\0';
	return k;
}

/* The good client is still served: its key reads back. */
static const char *still_served(struct crun_store_client *good)
{
	void *v;
	size_t len;

	CHECK_RC(store_get(good, "/good", 5000, &v, &len), 0);
	CHECK(len == 4 && memcmp(v, "good", 4) == 0);
	free(v);
	return NULL;
}

/* ---- max_key ------------------------------------------------------------ */

static const char *key_edge(int port)
{
	struct crun_store_client *good, *c;
	char *k = key_of(lim.max_key, 'k'), *k1 = key_of(lim.max_key + 1, 'k');
	char want[128];
	const char *r = NULL;
	void *v;
	size_t len;
	int64_t n;

	CHECK_RC(store_connect("127.0.0.1", port, 5000, &good), 0);
	CHECK_RC(store_set(good, "/good", "good", 4), 0);
	/* Exactly max_key: stored and read back under that key. */
	CHECK_RC(store_set(good, k, "v", 1), 0);
	CHECK_RC(store_get(good, k, 5000, &v, &len), 0);
	CHECK(len == 1 && memcmp(v, "v", 1) == 0);
	free(v);
	/* One byte more: that connection is closed, with the reason. */
	CHECK_RC(store_connect("127.0.0.1", port, 5000, &c), 0);
	store_set(c, k1, "v", 1);
	CHECK(store_num_keys(c, &n) != 0);
	store_close(c);
	snprintf(want, sizeof(want), "key of %zu bytes exceeds the limit of %zu",
		 lim.max_key + 1, lim.max_key);
	CHECK(log_has(want));
	r = still_served(good);
	if (r == NULL) {
		CHECK_RC(store_num_keys(good, &n), 0);
		CHECK(n == 2);
	}
	store_close(good);
	free(k);
	free(k1);
	return r;
}

Test(limits_store, key_default, .timeout = 60)
{
	store_limits_default(&lim);
	cr_assert_eq(lim.max_key, 8192);
	run_scenario(key_edge);
}

Test(limits_store, key_set, .timeout = 60)
{
	store_limits_default(&lim);
	lim.max_key = 16;
	run_scenario(key_edge);
}

/* ---- max_value (SET, and APPEND's result) ------------------------------- */

static const char *value_edge(int port)
{
	struct crun_store_client *good, *c;
	char *val = malloc(lim.max_value + 1), want[160];
	void *v;
	size_t len;
	int64_t n;

	memset(val, 'x', lim.max_value + 1);
	val[lim.max_value - 1] = 'E';
	CHECK_RC(store_connect("127.0.0.1", port, 10000, &good), 0);
	CHECK_RC(store_set(good, "/good", "good", 4), 0);
	CHECK_RC(store_set(good, "/v", val, lim.max_value), 0);
	CHECK_RC(store_get(good, "/v", 10000, &v, &len), 0);
	CHECK(len == lim.max_value && memcmp(v, val, len) == 0);
	free(v);
	CHECK_RC(store_connect("127.0.0.1", port, 10000, &c), 0);
	store_set(c, "/v1", val, lim.max_value + 1);
	CHECK(store_num_keys(c, &n) != 0);
	store_close(c);
	snprintf(want, sizeof(want),
		 "value of %zu bytes exceeds the limit of %zu",
		 lim.max_value + 1, lim.max_value);
	CHECK(log_has(want));
	/* APPEND up to max_value is served; one byte past it is refused. */
	CHECK_RC(store_set(good, "/a", val, lim.max_value - 1), 0);
	CHECK_RC(store_append(good, "/a", "Z", 1), 0);
	CHECK_RC(store_get(good, "/a", 10000, &v, &len), 0);
	CHECK(len == lim.max_value && ((char *)v)[len - 1] == 'Z');
	free(v);
	CHECK_RC(store_connect("127.0.0.1", port, 10000, &c), 0);
	store_append(c, "/a", "Z", 1);
	CHECK(store_num_keys(c, &n) != 0);
	store_close(c);
	snprintf(want, sizeof(want), "or max-value %zu", lim.max_value);
	CHECK(log_has("append refused") && log_has(want));
	/* The refused APPEND left the value as it was. */
	CHECK_RC(store_get(good, "/a", 10000, &v, &len), 0);
	CHECK(len == lim.max_value);
	free(v);
	free(val);
	{
		const char *r = still_served(good);

		store_close(good);
		return r;
	}
}

Test(limits_store, value_default, .timeout = 120)
{
	store_limits_default(&lim);
	cr_assert_eq(lim.max_value, 8u << 20);
	run_scenario(value_edge);
}

Test(limits_store, value_set, .timeout = 60)
{
	store_limits_default(&lim);
	lim.max_value = 100;
	run_scenario(value_edge);
}

/* ---- max_keys (CHECK, WAIT, MULTI_GET) ---------------------------------- */

static const char *keys_edge(int port)
{
	struct crun_store_client *good, *c;
	size_t n = lim.max_keys;
	const char **keys = malloc((n + 1) * sizeof(*keys));
	void **vals = malloc(n * sizeof(*vals));
	size_t *lens = malloc(n * sizeof(*lens));
	char want[128];
	int ready;
	int64_t nk;

	for (size_t i = 0; i <= n; i++)
		keys[i] = "/good";
	CHECK_RC(store_connect("127.0.0.1", port, 10000, &good), 0);
	CHECK_RC(store_set(good, "/good", "good", 4), 0);
	CHECK_RC(store_check(good, keys, n, &ready), 0);
	CHECK(ready == 1);
	CHECK_RC(store_wait(good, keys, n, 10000), 0);
	CHECK_RC(store_multi_get(good, keys, n, 10000, vals, lens), 0);
	CHECK(lens[0] == 4 && lens[n - 1] == 4 &&
	      memcmp(vals[n - 1], "good", 4) == 0);
	for (size_t i = 0; i < n; i++)
		free(vals[i]);
	/* One key more, in each kind of request. */
	for (int kind = 0; kind < 2; kind++) {
		CHECK_RC(store_connect("127.0.0.1", port, 10000, &c), 0);
		if (kind == 0)
			store_check(c, keys, n + 1, &ready);
		else
			store_wait(c, keys, n + 1, 10000);
		CHECK(store_num_keys(c, &nk) != 0);
		store_close(c);
	}
	snprintf(want, sizeof(want),
		 "%zu keys in one request exceed the limit of %zu", n + 1, n);
	CHECK(log_has(want));
	free(keys);
	free(vals);
	free(lens);
	store_close(good);
	CHECK(get_stats().conns == 0 || get_stats().conns == 1);
	return NULL;
}

Test(limits_store, keys_default, .timeout = 120)
{
	store_limits_default(&lim);
	cr_assert_eq(lim.max_keys, 128u << 10);
	run_scenario(keys_edge);
}

Test(limits_store, keys_set, .timeout = 60)
{
	store_limits_default(&lim);
	lim.max_keys = 5;
	run_scenario(keys_edge);
}

/* ---- max_output: a reply of exactly max_output is sent ------------------ */

static const char *output_edge(int port)
{
	struct crun_store_client *good, *c;
	size_t vlen = lim.max_output - 8; /* a G3 GET reply: u64 + value */
	char *val = malloc(vlen + 1), want[128];
	void *v;
	size_t len;

	memset(val, 'o', vlen + 1);
	CHECK_RC(store_connect("127.0.0.1", port, 10000, &good), 0);
	CHECK_RC(store_set(good, "/good", "good", 4), 0);
	CHECK_RC(store_set(good, "/o", val, vlen), 0);
	CHECK_RC(store_set(good, "/o1", val, vlen + 1), 0);
	CHECK_RC(store_get(good, "/o", 10000, &v, &len), 0);
	CHECK(len == vlen && memcmp(v, val, vlen) == 0);
	free(v);
	CHECK_RC(store_connect("127.0.0.1", port, 10000, &c), 0);
	CHECK(store_get(c, "/o1", 10000, &v, &len) != 0);
	store_close(c);
	snprintf(want, sizeof(want), "reply of %zu bytes exceeds max-output %zu",
		 lim.max_output + 1, lim.max_output);
	CHECK(log_has(want));
	free(val);
	{
		const char *r = still_served(good);

		store_close(good);
		return r;
	}
}

Test(limits_store, output_set, .timeout = 60)
{
	store_limits_default(&lim);
	cr_assert_eq(lim.max_output, 64u << 20);
	lim.max_output = 4096;
	run_scenario(output_edge);
}

/*
 * At the default max_output (64 MiB) no single value reaches it (values
 * stop at 8 MiB): a MULTI_GET of eight does. Its reply is 8 bytes a value
 * plus the values: seven of 8 MiB and one of 8 MiB - 64 make 64 MiB
 * exactly; one byte more is refused.
 */
static const char *output_default_edge(int port)
{
	static const char *keys[] = {"/m0", "/m1", "/m2", "/m3",
				     "/m4", "/m5", "/m6", "/m7"};
	size_t big = 8u << 20, last = big - 64;
	struct crun_store_client *good, *c;
	char *val = malloc(big), want[128];
	void *vals[8];
	size_t lens[8], total = 0;

	memset(val, 'o', big);
	CHECK_RC(store_connect("127.0.0.1", port, 10000, &good), 0);
	CHECK_RC(store_set(good, "/good", "good", 4), 0);
	for (int i = 0; i < 7; i++)
		CHECK_RC(store_set(good, keys[i], val, big), 0);
	CHECK_RC(store_set(good, keys[7], val, last), 0);
	CHECK_RC(store_multi_get(good, keys, 8, 30000, vals, lens), 0);
	for (int i = 0; i < 8; i++) {
		total += 8 + lens[i];
		free(vals[i]);
	}
	CHECK(total == lim.max_output);
	CHECK_RC(store_set(good, keys[7], val, last + 1), 0);
	/* SET has no reply: a round trip on the same connection makes sure
	 * the store took it before another connection reads it. */
	CHECK_RC(store_add(good, "/synced", 1, NULL), 0);
	CHECK_RC(store_connect("127.0.0.1", port, 10000, &c), 0);
	CHECK(store_multi_get(c, keys, 8, 30000, vals, lens) != 0);
	store_close(c);
	snprintf(want, sizeof(want), "reply of %zu bytes exceeds max-output %zu",
		 lim.max_output + 1, lim.max_output);
	CHECK(log_has(want));
	free(val);
	{
		const char *r = still_served(good);

		store_close(good);
		return r;
	}
}

Test(limits_store, output_default, .timeout = 120)
{
	store_limits_default(&lim);
	run_scenario(output_default_edge);
}

/* ---- max_conns ---------------------------------------------------------- */

static const char *conns_edge(int port)
{
	struct crun_store_client *c[8];
	size_t n = lim.max_conns, i;
	int fd;
	int64_t k;

	for (i = 0; i < n; i++)
		CHECK_RC(store_connect("127.0.0.1", port, 5000, &c[i]), 0);
	for (i = 0; i < n; i++)
		CHECK_RC(store_set(c[i], "/good", "good", 4), 0);
	/* Connection max_conns + 1 is closed at once. */
	fd = raw_connect(port);
	CHECK(fd >= 0 && raw_closed(fd, 5000));
	close(fd);
	CHECK(log_has("refusing connections beyond max-conns"));
	for (i = 0; i < n; i++)
		CHECK(still_served(c[i]) == NULL);
	/* A slot given back is taken again. */
	store_close(c[0]);
	for (int t = 0; t < 500 && get_stats().conns != n - 1; t++)
		usleep(10 * 1000);
	CHECK(get_stats().conns == n - 1);
	CHECK_RC(store_connect("127.0.0.1", port, 5000, &c[0]), 0);
	CHECK_RC(store_num_keys(c[0], &k), 0);
	for (i = 0; i < n; i++)
		store_close(c[i]);
	return NULL;
}

Test(limits_store, conns_set, .timeout = 60)
{
	store_limits_default(&lim);
	cr_assert_eq(lim.max_conns, 65536);
	lim.max_conns = 4;
	run_scenario(conns_edge);
}

/* ---- idle_timeout ------------------------------------------------------- */

/*
 * A partial request held without progress is closed once idle_timeout has
 * passed: not before (the connection is seen open past 80% of it), and
 * within the check's period (half the timeout) plus a margin for a loaded
 * machine, well short of twice the timeout. A parked WAIT is not idleness.
 */
static const char *idle_edge(int port)
{
	double t0, t, limit = (double)lim.idle_timeout;
	struct crun_store_client *good;
	int fd, wfd;
	static const char wait_w[] =
	    "\x05\x01\0\0\0\0\0\0\0\x02\0\0\0\0\0\0\0/w";

	CHECK_RC(store_connect("127.0.0.1", port, 5000, &good), 0);
	CHECK_RC(store_set(good, "/good", "good", 4), 0);
	wfd = raw_connect(port); /* G0 WAIT on /w, parked throughout */
	CHECK(wfd >= 0);
	CHECK(send(wfd, wait_w, sizeof(wait_w) - 1, 0) ==
	      (ssize_t)sizeof(wait_w) - 1);
	fd = raw_connect(port);
	CHECK(fd >= 0);
	CHECK(send(fd, "\x02\x05\0", 3, 0) == 3); /* a GET cut short */
	t0 = now_s();
	while (get_stats().waiters != 1 && now_s() - t0 < 5)
		usleep(10 * 1000);
	CHECK(get_stats().waiters == 1);
	/* Open at 80% of the timeout. */
	CHECK(!raw_closed(fd, (int)(limit * 800) - (int)((now_s() - t0) * 1000)));
	CHECK(now_s() - t0 >= 0.8 * limit);
	/* Closed by 1.5 x the timeout plus a margin, short of 2 x. */
	CHECK(raw_closed(fd, (int)(limit * 1950) - (int)((now_s() - t0) * 1000)));
	t = now_s() - t0;
	CHECK(t >= 0.95 * limit && t < 1.95 * limit);
	close(fd);
	{
		char want[96];

		snprintf(want, sizeof(want),
			 "no progress for idle-timeout %zu s with a partial "
			 "request pending",
			 lim.idle_timeout);
		CHECK(log_has(want));
	}
	/* The waiter was not idle: it is still parked, and gets its reply. */
	CHECK(get_stats().waiters == 1);
	CHECK_RC(store_set(good, "/w", "1", 1), 0);
	{
		unsigned char b = 9;
		struct pollfd pfd = {wfd, POLLIN, 0};

		CHECK(poll(&pfd, 1, 5000) == 1 && recv(wfd, &b, 1, 0) == 1 &&
		      b == 0);
	}
	close(wfd);
	{
		const char *r = still_served(good);

		store_close(good);
		return r;
	}
}

Test(limits_store, idle_set, .timeout = 60)
{
	store_limits_default(&lim);
	cr_assert_eq(lim.idle_timeout, 30);
	lim.idle_timeout = 4; /* closed in 4..6 s: the check runs every 2 s */
	run_scenario(idle_edge);
}

/* ---- the largest partial request held ----------------------------------- */

/*
 * A G0 MULTI_SET of 4 pairs of 60-byte values (legal one by one) is 321
 * bytes, past 2 * 64 + 16 + 64 = 208: its first 208 bytes are held, the
 * 209th closes the connection with the reason.
 */
static const char *frame_edge(int port)
{
	size_t max = 2 * lim.max_value + lim.max_key + 64, off = 0;
	unsigned char frame[400];
	char want[96];
	int fd;

	frame[off++] = 0x0b;
	memcpy(frame + off, "\x04\0\0\0\0\0\0\0", 8);
	off += 8;
	for (int i = 0; i < 4; i++) {
		memcpy(frame + off, "\x02\0\0\0\0\0\0\0/k\x3c\0\0\0\0\0\0\0",
		       18);
		off += 18;
		memset(frame + off, 'v', 60);
		off += 60;
	}
	CHECK(off > max + 1);
	fd = raw_connect(port);
	CHECK(fd >= 0);
	CHECK(send(fd, frame, max, 0) == (ssize_t)max);
	CHECK(!raw_closed(fd, 1000));
	CHECK(get_stats().conns == 1);
	CHECK(send(fd, frame + max, 1, 0) == 1);
	CHECK(raw_closed(fd, 5000));
	close(fd);
	snprintf(want, sizeof(want), "request larger than %zu bytes", max);
	CHECK(log_has(want));
	return NULL;
}

Test(limits_store, frame_set, .timeout = 30)
{
	store_limits_default(&lim);
	lim.max_key = 16;
	lim.max_value = 64;
	run_scenario(frame_edge);
}

/* ---- max_memory, in process --------------------------------------------- */

/*
 * Through store_server_set no connection buffer is counted: the entries
 * alone fill max_memory to the byte. The overhead of an entry is measured
 * first, so the test does not copy the server's constant.
 */
Test(limits_store, memory_set, .timeout = 30)
{
	struct crun_store_server *srv;
	struct crun_store_stats st;
	uv_loop_t loop;
	size_t m0, m1, ovh, room;
	char *val;
	const void *v;
	size_t len;

	store_limits_default(&lim);
	lim.max_memory = 64 * 1024;
	cr_assert_eq(uv_loop_init(&loop), 0);
	cr_assert_eq(store_server_new(&loop, "127.0.0.1", 0, &lim, &srv), 0);
	store_server_set_quiet(srv, 1);
	store_server_stats(srv, &st);
	m0 = st.memory;
	cr_assert_eq(store_server_set(srv, "/a", "x", 1), 0);
	store_server_stats(srv, &st);
	m1 = st.memory;
	cr_assert(m1 > m0 + 3);
	ovh = m1 - m0 - 2 - 1; /* key "/a", value "x" */
	room = lim.max_memory - m1;
	cr_assert(room > 2 + ovh + 1);
	val = malloc(room);
	memset(val, 'm', room);
	/* One byte past max_memory: refused, nothing stored. */
	cr_assert_eq(store_server_set(srv, "/b", val, room - 2 - ovh + 1),
		     CRUN_ETOOBIG);
	store_server_stats(srv, &st);
	cr_assert_eq(st.memory, m1);
	cr_assert_eq(st.keys, 1);
	cr_assert_eq(store_server_get(srv, "/b", &v, &len), CRUN_ENOTFOUND);
	/* Exactly max_memory: stored and read back. */
	cr_assert_eq(store_server_set(srv, "/b", val, room - 2 - ovh), 0);
	store_server_stats(srv, &st);
	cr_assert_eq(st.memory, lim.max_memory);
	cr_assert_eq(store_server_get(srv, "/b", &v, &len), 0);
	cr_assert_eq(len, room - 2 - ovh);
	cr_assert(memcmp(v, val, len) == 0);
	/* Growing a value by one byte at the limit is refused, and leaves it. */
	cr_assert_eq(store_server_set(srv, "/b", val, room - 2 - ovh + 1),
		     CRUN_ETOOBIG);
	cr_assert_eq(store_server_get(srv, "/b", &v, &len), 0);
	cr_assert_eq(len, room - 2 - ovh);
	/* A new entry needs its key and overhead: with exactly that much
	 * room an empty value fits, and nothing more does. */
	cr_assert_eq(store_server_set(srv, "/b", val,
				      room - 2 - ovh - (2 + ovh)),
		     0);
	cr_assert_eq(store_server_set(srv, "/c", "", 0), 0);
	store_server_stats(srv, &st);
	cr_assert_eq(st.memory, lim.max_memory);
	cr_assert_eq(st.keys, 3);
	cr_assert_eq(store_server_set(srv, "/c", "y", 1), CRUN_ETOOBIG);
	cr_assert_eq(store_server_set(srv, "/d", "", 0), CRUN_ETOOBIG);
	free(val);
	store_server_close(srv, NULL, NULL);
	uv_run(&loop, UV_RUN_DEFAULT);
	cr_assert_eq(uv_loop_close(&loop), 0);
}

Test(limits_store, memory_default, .timeout = 10)
{
	store_limits_default(&lim);
	cr_assert_eq(lim.max_memory, (size_t)1 << 30);
}

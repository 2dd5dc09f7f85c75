/*
 * The store server on a real loop, driven by libcrun's blocking client (and
 * raw sockets for hand-made frames) from a second thread: every operation in
 * both generations, waits with many waiters, waiters that vanish or time out,
 * COMPARE_SET's cases, and limits that close only the offending connection.
 * The scenario thread reports a failure as a message; the loop thread closes
 * the server and asserts that the loop closed cleanly.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include "crun/err.h"
#include "crun/store.h"
#include "../../src/store/store_internal.h"

/* A scenario returns NULL or a failure message (static or from fail_buf). */
typedef const char *(*scenario_fn)(int port);

struct fixture {
	uv_loop_t loop;
	uv_async_t done;
	uv_async_t ask; /* the scenario wants a stats snapshot */
	struct crun_store_server *srv;
	scenario_fn fn;
	int port;
	const char *result;
	pthread_t th;
};

static __thread char fail_buf[256];

/*
 * Server stats for the scenario thread, taken on the loop thread: the
 * scenario asks through an async handle and waits for the answer.
 */
static pthread_mutex_t stats_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t stats_cv = PTHREAD_COND_INITIALIZER;
static struct crun_store_stats stats_snap;
static int stats_seq;
static struct fixture *cur_fixture;

static void on_ask(uv_async_t *a)
{
	struct fixture *f = a->data;

	pthread_mutex_lock(&stats_mu);
	store_server_stats(f->srv, &stats_snap);
	stats_seq++;
	pthread_cond_broadcast(&stats_cv);
	pthread_mutex_unlock(&stats_mu);
}

/* A snapshot of the running server's stats (from the scenario thread). */
static struct crun_store_stats get_stats(void)
{
	struct crun_store_stats st;
	int seq;

	pthread_mutex_lock(&stats_mu);
	seq = stats_seq;
	uv_async_send(&cur_fixture->ask);
	while (stats_seq == seq)
		pthread_cond_wait(&stats_cv, &stats_mu);
	st = stats_snap;
	pthread_mutex_unlock(&stats_mu);
	return st;
}

/* Poll the stats every 10 ms for up to ms until FIELD OP VALUE holds. */
#define WAIT_STATS(field, op, value, ms)                                       \
	do {                                                                   \
		int n_ = (ms) / 10;                                            \
		while (!(get_stats().field op(value)) && n_-- > 0)             \
			usleep(10 * 1000);                                     \
		if (!(get_stats().field op(value))) {                          \
			snprintf(fail_buf, sizeof(fail_buf),                   \
				 "%s:%d: stats." #field " " #op " " #value     \
				 " not reached in %d ms (%zu)",                \
				 __FILE__, __LINE__, (ms),                     \
				 get_stats().field);                           \
			return fail_buf;                                       \
		}                                                              \
	} while (0)

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

/*
 * With capture_log set, run_scenario leaves the server's log on and sends
 * stderr to a file that log_has searches, so that a scenario can check the
 * reason a connection was closed for.
 */
static int capture_log;
static char log_path[64];

/* Whether the server has logged a line containing frag. */
static int log_has(const char *frag)
{
	char buf[16384];
	size_t n;
	FILE *f = fopen(log_path, "r");

	if (f == NULL)
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	return strstr(buf, frag) != NULL;
}

/* With vanish_hook set, keys reported by store_server_on_vanish collect
 * here ("key;" each), under stats_mu. */
static int vanish_hook;
static char vanished[256];

static void on_vanish(void *data, const char *key, size_t klen)
{
	size_t n;

	(void)data;
	pthread_mutex_lock(&stats_mu);
	n = strlen(vanished);
	snprintf(vanished + n, sizeof(vanished) - n, "%.*s;", (int)klen, key);
	pthread_mutex_unlock(&stats_mu);
}

/* Whether the vanish callback has reported want ("key;..."). */
static int vanished_is(const char *want)
{
	int eq;

	pthread_mutex_lock(&stats_mu);
	eq = strcmp(vanished, want) == 0;
	pthread_mutex_unlock(&stats_mu);
	return eq;
}

/* Run fn against a fresh server with lim (NULL: defaults). */
static void run_scenario(scenario_fn fn, const struct crun_store_limits *lim)
{
	struct fixture f;
	int saved = -1, logfd;

	memset(&f, 0, sizeof(f));
	cr_assert_eq(uv_loop_init(&f.loop), 0);
	cr_assert_eq(store_server_new(&f.loop, "127.0.0.1", 0, lim, &f.srv), 0);
	store_server_set_quiet(f.srv, !capture_log);
	if (vanish_hook)
		store_server_on_vanish(f.srv, on_vanish, NULL);
	if (capture_log) {
		snprintf(log_path, sizeof(log_path), "/tmp/crun-test-store-%d.log",
			 (int)getpid());
		saved = dup(2);
		logfd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		cr_assert(saved >= 0 && logfd >= 0);
		dup2(logfd, 2);
		close(logfd);
	}
	f.port = store_server_port(f.srv);
	cr_assert(f.port > 0);
	f.fn = fn;
	uv_async_init(&f.loop, &f.done, on_done);
	f.done.data = &f;
	uv_async_init(&f.loop, &f.ask, on_ask);
	f.ask.data = &f;
	cur_fixture = &f;
	cr_assert_eq(pthread_create(&f.th, NULL, scenario_thread, &f), 0);
	uv_run(&f.loop, UV_RUN_DEFAULT);
	pthread_join(f.th, NULL);
	if (capture_log) {
		dup2(saved, 2);
		close(saved);
		unlink(log_path);
	}
	cr_assert_eq(uv_loop_close(&f.loop), 0);
	cr_assert_null(f.result, "%s", f.result);
}

static int vals_eq(const void *v, size_t len, const char *want)
{
	return len == strlen(want) && memcmp(v, want, len) == 0;
}

/* Every operation through one client of generation flags. */
static const char *ops(int port, int flags)
{
	struct crun_store_client *c;
	const char *keys[] = {"/a", "/b"};
	const void *vs[] = {"1", ""};
	size_t lens[] = {1, 0}, len, glens[2];
	void *v, *gv[2];
	int64_t n;
	int ready, del;

	CHECK_RC(store_connect_ex("127.0.0.1", port, 5000, flags, &c), 0);
	CHECK_RC(store_set(c, "/key1", "val1", 4), 0);
	CHECK_RC(store_get(c, "/key1", -1, &v, &len), 0);
	CHECK(vals_eq(v, len, "val1"));
	free(v);
	CHECK_RC(store_add(c, "/cnt", 5, &n), 0);
	CHECK(n == 5);
	CHECK_RC(store_add(c, "/cnt", -2, &n), 0);
	CHECK(n == 3);
	CHECK_RC(store_get(c, "/cnt", -1, &v, &len), 0);
	CHECK(vals_eq(v, len, "3"));
	free(v);
	/* COMPARE_SET: missing+empty, mismatch, match, missing+expected. */
	CHECK_RC(store_compare_set(c, "/cs", "", 0, "first", 5, &v, &len), 0);
	CHECK(vals_eq(v, len, "first"));
	free(v);
	CHECK_RC(store_compare_set(c, "/cs", "wrong", 5, "x", 1, &v, &len), 0);
	CHECK(vals_eq(v, len, "first"));
	free(v);
	CHECK_RC(store_compare_set(c, "/cs", "first", 5, "second", 6, &v, &len), 0);
	CHECK(vals_eq(v, len, "second"));
	free(v);
	CHECK_RC(store_compare_set(c, "/nokey2", "exp", 3, "des", 3, &v, &len), 0);
	CHECK(vals_eq(v, len, "exp"));
	free(v);
	CHECK_RC(store_check(c, (const char *[]){"/nokey2"}, 1, &ready), 0);
	CHECK(ready == 0);
	CHECK_RC(store_check(c, (const char *[]){"/key1", "/cnt"}, 2, &ready), 0);
	CHECK(ready == 1);
	CHECK_RC(store_check(c, NULL, 0, &ready), 0);
	CHECK(ready == 1);
	CHECK_RC(store_wait(c, (const char *[]){"/key1", "/cnt"}, 2, -1), 0);
	CHECK_RC(store_num_keys(c, &n), 0);
	CHECK(n == 3);
	CHECK_RC(store_delete_key(c, "/key1", &del), 0);
	CHECK(del == 1);
	CHECK_RC(store_delete_key(c, "/key1", &del), 0);
	CHECK(del == 0);
	CHECK_RC(store_append(c, "/ap", "ab", 2), 0);
	CHECK_RC(store_append(c, "/ap", "cd", 2), 0);
	CHECK_RC(store_get(c, "/ap", -1, &v, &len), 0);
	CHECK(vals_eq(v, len, "abcd"));
	free(v);
	CHECK_RC(store_multi_set(c, keys, vs, lens, 2), 0);
	CHECK_RC(store_multi_get(c, keys, 2, -1, gv, glens), 0);
	CHECK(vals_eq(gv[0], glens[0], "1") && vals_eq(gv[1], glens[1], ""));
	free(gv[0]);
	free(gv[1]);
	/* Binary values with NUL bytes. */
	CHECK_RC(store_set(c, "/bin", "\0\1\2\377", 4), 0);
	CHECK_RC(store_get(c, "/bin", -1, &v, &len), 0);
	CHECK(len == 4 && memcmp(v, "\0\1\2\377", 4) == 0);
	free(v);
	/* ADD parses like stoll and stores decimal. */
	CHECK_RC(store_set(c, "/n", "12abc", 5), 0);
	CHECK_RC(store_add(c, "/n", 1, &n), 0);
	CHECK(n == 13);
	CHECK_RC(store_get(c, "/n", -1, &v, &len), 0);
	CHECK(vals_eq(v, len, "13"));
	free(v);
	/* A wait that times out leaves the connection usable. */
	CHECK_RC(store_wait(c, (const char *[]){"/never"}, 1, 200), CRUN_ETIMEDOUT);
	CHECK_RC(store_get(c, "/cnt", 100, &v, &len), 0);
	CHECK(vals_eq(v, len, "3"));
	free(v);
	CHECK_RC(store_set(c, "/never", "late", 4), 0);
	CHECK_RC(store_add(c, "/cnt", 0, &n), 0);
	CHECK(n == 3);
	store_close(c);
	return NULL;
}

static const char *ops_g3(int port) { return ops(port, 0); }
static const char *ops_g0(int port) { return ops(port, CRUN_STORE_G0); }

Test(store_server, ops_g3, .timeout = 30) { run_scenario(ops_g3, NULL); }

/*
 * The command table (store_cmd.c) has a row for every operation, named as
 * the wire names it (the metrics and the log lines use the table's name),
 * and only VALIDATE and AUTH pass before authentication. AUTH alone has no
 * function: the auth gate answers it.
 */
Test(store_server, command_table)
{
	for (int i = 0; i < STORE_OP__COUNT; i++) {
		const struct store_cmd *cmd = &store__cmds[i];
		int preauth = i == STORE_OP_VALIDATE || i == STORE_OP_AUTH;

		cr_assert_not_null(cmd->name, "op %d has no row", i);
		cr_assert_str_eq(cmd->name, store_wire_op_name((enum store_op)i));
		cr_assert_eq(cmd->proc == NULL, i == STORE_OP_AUTH, "%s",
			     cmd->name);
		cr_assert_eq((cmd->flags & STORE_CMD_PREAUTH) != 0, preauth,
			     "%s", cmd->name);
	}
}
Test(store_server, ops_g0, .timeout = 30) { run_scenario(ops_g0, NULL); }

/*
 * A connection remembers the entries of its last two keys: two keys in
 * turn, each deleted (by this connection or another) and written again,
 * always read back as written last.
 */
static const char *key_cache(int port)
{
	struct crun_store_client *c, *o;
	char want[16];
	void *v;
	size_t len;
	int del;

	CHECK_RC(store_connect_ex("127.0.0.1", port, 5000, 0, &c), 0);
	CHECK_RC(store_connect_ex("127.0.0.1", port, 5000, 0, &o), 0);
	for (int i = 0; i < 6; i++) {
		const char *k = i % 2 ? "/kb" : "/ka";

		snprintf(want, sizeof(want), "v%d", i);
		CHECK_RC(store_set(c, k, want, strlen(want)), 0);
		CHECK_RC(store_get(c, "/ka", -1, &v, &len), 0);
		free(v);
		CHECK_RC(store_get(c, k, -1, &v, &len), 0);
		CHECK(vals_eq(v, len, want));
		free(v);
		CHECK_RC(store_delete_key(i % 3 ? o : c, k, &del), 0);
		CHECK(del == 1);
		CHECK_RC(store_set(o, k, "again", 5), 0);
		CHECK_RC(store_get(c, k, -1, &v, &len), 0);
		CHECK(vals_eq(v, len, "again"));
		free(v);
	}
	store_close(o);
	store_close(c);
	return NULL;
}

Test(store_server, key_cache, .timeout = 30) { run_scenario(key_cache, NULL); }

/* A waiter thread: waits for "/go" and records the value. */
struct waiter_arg {
	int port;
	int flags;
	int rc;
	char val[16];
};

static void *waiter_main(void *p)
{
	struct waiter_arg *w = p;
	struct crun_store_client *c;
	void *v;
	size_t len;

	w->rc = store_connect_ex("127.0.0.1", w->port, 5000, w->flags, &c);
	if (w->rc != 0)
		return NULL;
	w->rc = store_get(c, "/go", 10000, &v, &len);
	if (w->rc == 0) {
		snprintf(w->val, sizeof(w->val), "%.*s", (int)len, (char *)v);
		free(v);
	}
	store_close(c);
	return NULL;
}

/* Eight waiters (both generations) on one key, released by one SET. */
static const char *many_waiters(int port)
{
	struct waiter_arg w[8];
	pthread_t th[8];
	struct crun_store_client *c;
	int i;

	for (i = 0; i < 8; i++) {
		w[i].port = port;
		w[i].flags = i % 2 ? CRUN_STORE_G0 : 0;
		w[i].rc = -1;
		pthread_create(&th[i], NULL, waiter_main, &w[i]);
	}
	CHECK_RC(store_connect("127.0.0.1", port, 5000, &c), 0);
	WAIT_STATS(waiters, ==, 8, 5000);
	CHECK_RC(store_set(c, "/go", "yes", 3), 0);
	for (i = 0; i < 8; i++) {
		pthread_join(th[i], NULL);
		CHECK_RC(w[i].rc, 0);
		CHECK(strcmp(w[i].val, "yes") == 0);
	}
	store_close(c);
	return NULL;
}

Test(store_server, many_waiters, .timeout = 30) { run_scenario(many_waiters, NULL); }

/* A raw connection to the server (rcvbuf > 0: that small a receive buffer). */
static int raw_connect_rcvbuf(int port, int rcvbuf)
{
	struct sockaddr_in sa;
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (rcvbuf > 0)
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
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

static int raw_connect(int port) { return raw_connect_rcvbuf(port, 0); }

/* Read n bytes within ms: n, 0 on EOF/reset, -1 on timeout. */
static int raw_read(int fd, void *buf, size_t n, int ms)
{
	struct pollfd pfd = {fd, POLLIN, 0};
	size_t got = 0;
	ssize_t r;

	while (got < n) {
		if (poll(&pfd, 1, ms) <= 0)
			return -1;
		r = recv(fd, (char *)buf + got, n - got, 0);
		if (r <= 0)
			return 0;
		got += (size_t)r;
	}
	return (int)got;
}

/* Waiters that vanish, duplicate keys, multi-key waits, COMPARE_SET waking. */
static const char *vanished_waiter(int port)
{
	/* G0 WAIT ['/k1'] and WAIT ['/dup','/dup'] and WAIT ['/viacas']. */
	static const char wait_k1[] = "\x05\x01\0\0\0\0\0\0\0\x03\0\0\0\0\0\0\0/k1";
	static const char wait_dup[] = "\x05\x02\0\0\0\0\0\0\0\x04\0\0\0\0\0\0\0/dup\x04\0\0\0\0\0\0\0/dup";
	static const char wait_cas[] = "\x05\x01\0\0\0\0\0\0\0\x07\0\0\0\0\0\0\0/viacas";
	struct crun_store_client *c;
	unsigned char b[8];
	void *v;
	size_t len;
	int fd1, fd2, fd3, i;

	fd1 = raw_connect(port);
	fd2 = raw_connect(port);
	fd3 = raw_connect(port);
	CHECK(fd1 >= 0 && fd2 >= 0 && fd3 >= 0);
	CHECK(send(fd1, wait_k1, sizeof(wait_k1) - 1, 0) > 0);
	CHECK(send(fd2, wait_dup, sizeof(wait_dup) - 1, 0) > 0);
	CHECK(send(fd3, wait_cas, sizeof(wait_cas) - 1, 0) > 0);
	WAIT_STATS(waiters, ==, 3, 5000);
	close(fd1); /* vanishes mid-wait */
	CHECK_RC(store_connect("127.0.0.1", port, 5000, &c), 0);
	for (i = 0; i < 100; i++) /* churn while the dead waiter is dropped */
		CHECK_RC(store_add(c, "/churn", 1, NULL), 0);
	CHECK_RC(store_set(c, "/k1", "1", 1), 0);
	CHECK_RC(store_get(c, "/k1", 1000, &v, &len), 0);
	free(v);
	CHECK(raw_read(fd2, b, 1, 100) == -1);
	CHECK_RC(store_set(c, "/dup", "d", 1), 0);
	CHECK(raw_read(fd2, b, 1, 2000) == 1 && b[0] == 0);
	CHECK(raw_read(fd3, b, 1, 100) == -1);
	CHECK_RC(store_compare_set(c, "/viacas", "", 0, "c", 1, &v, &len), 0);
	free(v);
	CHECK(raw_read(fd3, b, 1, 2000) == 1 && b[0] == 0); /* libuv wakes */
	close(fd2);
	close(fd3);
	store_close(c);
	return NULL;
}

Test(store_server, vanished_waiter, .timeout = 30) { run_scenario(vanished_waiter, NULL); }

/* G3 extras by hand: PING echo, CANCEL_WAIT, queues, barrier, list_keys. */
static const char *g3_extras(int port)
{
	static const char hello[] = "\x00\xce\xf7\x85\x3c\x0d\x92\x10\0\0";
	static const char wait_x[] = "\x06\x01\0\0\0\0\0\0\0\x02\0\0\0\0\0\0\0/x";
	static const char cancel[] = "\x0c";
	static const char push[] = "\x0e\x02\0\0\0\0\0\0\0/q\x01\0\0\0\0\0\0\0A";
	static const char pop[] = "\x0f\x02\0\0\0\0\0\0\0/q";
	static const char qlen[] = "\x10\x02\0\0\0\0\0\0\0/q";
	static const char barrier[] = "\x12\x02\0\0\0\0\0\0\0/b\x02\0\0\0\0\0\0\0";
	static const char list[] = "\x11";
	unsigned char b[64];
	int fd, fd2;

	fd = raw_connect(port);
	fd2 = raw_connect(port);
	CHECK(fd >= 0 && fd2 >= 0);
	CHECK(send(fd, hello, 10, 0) == 10);
	CHECK(raw_read(fd, b, 4, 2000) == 4 && memcmp(b, "\x92\x10\0\0", 4) == 0);
	CHECK(send(fd, wait_x, sizeof(wait_x) - 1, 0) > 0);
	CHECK(raw_read(fd, b, 1, 100) == -1);
	CHECK(send(fd, cancel, 1, 0) == 1);
	CHECK(raw_read(fd, b, 1, 2000) == 1 && b[0] == 1);
	/* A blocking pop waits on the queue's key; a push satisfies it. */
	CHECK(send(fd2, hello, 10, 0) == 10);
	CHECK(raw_read(fd2, b, 4, 2000) == 4);
	CHECK(send(fd2, "\x06\x01\0\0\0\0\0\0\0\x02\0\0\0\0\0\0\0/q", 19, 0) == 19);
	CHECK(send(fd, push, sizeof(push) - 1, 0) > 0);
	CHECK(raw_read(fd2, b, 1, 2000) == 1 && b[0] == 0);
	CHECK(send(fd, qlen, sizeof(qlen) - 1, 0) > 0);
	CHECK(raw_read(fd, b, 8, 2000) == 8 && b[0] == 1);
	CHECK(send(fd, pop, sizeof(pop) - 1, 0) > 0);
	CHECK(raw_read(fd, b, 17, 2000) == 17 && b[0] == 1 && b[8] == 1 && b[16] == 'A');
	CHECK(send(fd, pop, sizeof(pop) - 1, 0) > 0);
	CHECK(raw_read(fd, b, 8, 2000) == 8 && b[0] == 0);
	/* Barrier of 2: the first is parked, the second releases both. */
	CHECK(send(fd, barrier, sizeof(barrier) - 1, 0) > 0);
	CHECK(raw_read(fd, b, 1, 100) == -1);
	CHECK(send(fd2, barrier, sizeof(barrier) - 1, 0) > 0);
	CHECK(raw_read(fd2, b, 1, 2000) == 1 && b[0] == 0);
	CHECK(raw_read(fd, b, 1, 2000) == 1 && b[0] == 0);
	/* LIST_KEYS: only "/b" has a value (the queue is not a key). */
	CHECK(send(fd, list, 1, 0) == 1);
	CHECK(raw_read(fd, b, 8 + 8 + 2, 2000) == 18 && b[0] == 1 && b[16] == '/' && b[17] == 'b');
	close(fd);
	close(fd2);
	return NULL;
}

Test(store_server, g3_extras, .timeout = 30) { run_scenario(g3_extras, NULL); }

/* Whether the server closed fd (EOF or reset within 2 s). */
static int raw_closed(int fd)
{
	unsigned char b;

	return raw_read(fd, &b, 1, 2000) == 0;
}

/* Each limit and bad request closes only its connection. */
static const char *limits(int port)
{
	struct crun_store_client *good, *c;
	char big[256];
	void *v;
	size_t len;
	int64_t n;
	int fd, i;

	memset(big, 'x', sizeof(big));
	CHECK_RC(store_connect("127.0.0.1", port, 5000, &good), 0);
	CHECK_RC(store_set(good, "/ok", "1", 1), 0);

	/* Key too long. */
	fd = raw_connect(port);
	CHECK(send(fd, "\x00\x11\0\0\0\0\0\0\0", 9, 0) == 9);
	CHECK(raw_closed(fd));
	close(fd);
	/* Value too long: the client sees the connection go. */
	CHECK_RC(store_connect("127.0.0.1", port, 5000, &c), 0);
	CHECK_RC(store_set(c, "/v", big, 65), 0);
	CHECK(store_num_keys(c, &n) != 0);
	store_close(c);
	/* Too many keys in a WAIT. */
	fd = raw_connect(port);
	CHECK(send(fd, "\x05\x05\0\0\0\0\0\0\0", 9, 0) == 9);
	CHECK(raw_closed(fd));
	close(fd);
	/* Unknown opcode, and ADD on a value that is not a number. */
	fd = raw_connect(port);
	CHECK(send(fd, "\xff", 1, 0) == 1);
	CHECK(raw_closed(fd));
	close(fd);
	CHECK_RC(store_connect_ex("127.0.0.1", port, 5000, CRUN_STORE_G0, &c), 0);
	CHECK_RC(store_set(c, "/t", "abc", 3), 0);
	CHECK(store_add(c, "/t", 1, &n) != 0);
	store_close(c);
	/* The store's memory: 4096 bytes, each entry costs at least 64. */
	CHECK_RC(store_connect("127.0.0.1", port, 5000, &c), 0);
	for (i = 0; i < 100; i++) {
		char k[16];

		snprintf(k, sizeof(k), "/m%d", i);
		if (store_set(c, k, big, 60) != 0)
			break;
		if (store_add(c, "/cnt", 0, &n) != 0)
			break;
	}
	/* The loop ended on the memory limit, not on any failure. */
	CHECK(i < 100);
	CHECK(log_has("refused: it would pass max-memory 4096"));
	store_close(c);
	/* Through all that, the good client was undisturbed. */
	CHECK_RC(store_get(good, "/t", 1000, &v, &len), 0);
	CHECK(vals_eq(v, len, "abc"));
	free(v);
	CHECK_RC(store_get(good, "/ok", 1000, &v, &len), 0);
	free(v);
	store_close(good);
	return NULL;
}

Test(store_server, limits, .timeout = 30)
{
	struct crun_store_limits lim = {16, 64, 4, 4096, 100, 1 << 20, 30};

	capture_log = 1;
	run_scenario(limits, &lim);
}

/* Connections beyond max_conns are closed; the others keep working. */
static const char *max_conns(int port)
{
	struct crun_store_client *c[3];
	int fd, i;

	for (i = 0; i < 3; i++)
		CHECK_RC(store_connect("127.0.0.1", port, 5000, &c[i]), 0);
	fd = raw_connect(port);
	CHECK(fd >= 0 && raw_closed(fd));
	close(fd);
	for (i = 0; i < 3; i++) {
		CHECK_RC(store_set(c[i], "/k", "v", 1), 0);
		CHECK_RC(store_add(c[i], "/n", 1, NULL), 0);
		store_close(c[i]);
	}
	return NULL;
}

Test(store_server, max_conns, .timeout = 30)
{
	struct crun_store_limits lim;

	store_limits_default(&lim);
	lim.max_conns = 3;
	run_scenario(max_conns, &lim);
}

/* Requests split into single bytes and glued back to back. */
static const char *fragments(int port)
{
	/* SET /p='1' + GET /p in one write (probe capture), then byte by byte. */
	static const unsigned char two[] = {
		0x00, 0x02, 0, 0, 0, 0, 0, 0, 0, '/', 'p', 0x01, 0, 0, 0, 0, 0, 0, 0, '1',
		0x02, 0x02, 0, 0, 0, 0, 0, 0, 0, '/', 'p'};
	unsigned char b[9];
	size_t i;
	int fd = raw_connect(port);

	CHECK(fd >= 0);
	CHECK(send(fd, two, sizeof(two), 0) == (ssize_t)sizeof(two));
	CHECK(raw_read(fd, b, 9, 2000) == 9 && b[0] == 1 && b[8] == '1');
	for (i = 0; i < sizeof(two); i++) {
		CHECK(send(fd, two + i, 1, 0) == 1);
		usleep(1000);
	}
	CHECK(raw_read(fd, b, 9, 2000) == 9 && b[0] == 1 && b[8] == '1');
	close(fd);
	return NULL;
}

Test(store_server, fragments, .timeout = 30) { run_scenario(fragments, NULL); }

/* The in-process API and a server adopting a bound fd. */
static void on_closed(void *data)
{
	*(int *)data = 1;
}

Test(store_server, in_process_and_fd, .timeout = 30)
{
	struct crun_store_server *srv;
	struct sockaddr_in sa;
	socklen_t sl = sizeof(sa);
	uv_loop_t loop;
	const void *v;
	size_t len;
	int64_t n;
	int fd, closed = 0;

	fd = socket(AF_INET, SOCK_STREAM, 0);
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	cr_assert_eq(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
	uv_loop_init(&loop);
	cr_assert_eq(store_server_new_fd(&loop, fd, NULL, &srv), 0);
	cr_assert_eq(store_server_port(srv), ntohs(sa.sin_port));
	cr_assert_eq(store_server_get(srv, "k", &v, &len), CRUN_ENOTFOUND);
	cr_assert_eq(store_server_set(srv, "k", "v", 1), 0);
	cr_assert_eq(store_server_get(srv, "k", &v, &len), 0);
	cr_assert(len == 1 && memcmp(v, "v", 1) == 0);
	cr_assert_eq(store_server_add(srv, "n", 7, &n), 0);
	cr_assert_eq(n, 7);
	cr_assert_eq(store_server_add(srv, "k", 1, &n), CRUN_EPROTO);
	store_server_close(srv, on_closed, &closed);
	uv_run(&loop, UV_RUN_DEFAULT);
	cr_assert(closed);
	cr_assert_eq(uv_loop_close(&loop), 0);
}

/* A request frame larger than 2 * max_value + max_key + 64 closes. */
static const char *oversized(int port)
{
	unsigned char frame[400];
	size_t off = 0;
	int fd;

	/* G0 MULTI_SET of 4 pairs, each value 60 bytes (legal one by one):
	 * 9 + 4 * (8 + 2 + 8 + 60) = 321 bytes, past 2 * 64 + 16 + 64. */
	frame[off++] = 0x0b;
	memcpy(frame + off, "\x04\0\0\0\0\0\0\0", 8);
	off += 8;
	for (int i = 0; i < 4; i++) {
		memcpy(frame + off, "\x02\0\0\0\0\0\0\0/k\x3c\0\0\0\0\0\0\0", 18);
		off += 18;
		memset(frame + off, 'v', 60);
		off += 60;
	}
	fd = raw_connect(port);
	CHECK(fd >= 0);
	/* All but the last byte: the server must not wait for the rest. */
	CHECK(send(fd, frame, off - 1, 0) == (ssize_t)(off - 1));
	CHECK(raw_closed(fd));
	close(fd);
	CHECK(log_has("request larger than 208 bytes"));
	return NULL;
}

Test(store_server, oversized_request, .timeout = 30)
{
	struct crun_store_limits lim = {16, 64, 4, 1 << 20, 100, 1 << 20, 30};

	capture_log = 1;
	run_scenario(oversized, &lim);
}

/* G0 WATCH_KEY: registration, then created / updated / deleted pushes. */
static const char *watch_key(int port)
{
	static const char watch[] = "\x07\x02\0\0\0\0\0\0\0/w";
	struct crun_store_client *c;
	unsigned char b[64];
	int fd, del;

	fd = raw_connect(port);
	CHECK(fd >= 0);
	CHECK(send(fd, watch, sizeof(watch) - 1, 0) == sizeof(watch) - 1);
	CHECK(raw_read(fd, b, 1, 2000) == 1 && b[0] == 3); /* registered */
	WAIT_STATS(watches, ==, 1, 5000);
	CHECK_RC(store_connect_ex("127.0.0.1", port, 5000, CRUN_STORE_G0, &c), 0);
	CHECK_RC(store_set(c, "/w", "one", 3), 0);
	/* kind 1 (created), key, old "", new "one" */
	CHECK(raw_read(fd, b, 1 + 10 + 8 + 11, 2000) == 30);
	CHECK(b[0] == 1 && memcmp(b + 1, "\x02\0\0\0\0\0\0\0/w", 10) == 0);
	CHECK(memcmp(b + 11, "\0\0\0\0\0\0\0\0\x03\0\0\0\0\0\0\0one", 19) == 0);
	CHECK_RC(store_set(c, "/w", "two", 3), 0);
	/* kind 0 (updated), old "one", new "two" */
	CHECK(raw_read(fd, b, 1 + 10 + 11 + 11, 2000) == 33);
	CHECK(b[0] == 0 &&
	      memcmp(b + 11, "\x03\0\0\0\0\0\0\0one\x03\0\0\0\0\0\0\0two", 22) == 0);
	CHECK_RC(store_delete_key(c, "/w", &del), 0);
	CHECK(del == 1);
	/* kind 2 (deleted), old "two", new "" */
	CHECK(raw_read(fd, b, 1 + 10 + 11 + 8, 2000) == 30);
	CHECK(b[0] == 2 &&
	      memcmp(b + 11, "\x03\0\0\0\0\0\0\0two\0\0\0\0\0\0\0\0", 19) == 0);
	/* Closing the watcher drops its registration. */
	close(fd);
	WAIT_STATS(watches, ==, 0, 5000);
	store_close(c);
	return NULL;
}

Test(store_server, watch_key, .timeout = 30) { run_scenario(watch_key, NULL); }

/*
 * A key 300 connections wait on is set: their replies go out in one pass
 * over two threads (store_fanout.c). Every waiter gets its byte; one that
 * hung up just before, and one whose earlier replies are still queued
 * behind a full socket (sent after them, in order), disturb nobody.
 */
#define MASS 300
static const char *mass_wake(int port)
{
	static const char wait_mw[] = "\x05\x01\0\0\0\0\0\0\0\x03\0\0\0\0\0\0\0/mw";
	static const char get[] = "\x02\x02\0\0\0\0\0\0\0/v";
	static char big[16384], req[11 * 20 + sizeof(wait_mw) - 1];
	static unsigned char in[20 * (8 + sizeof(big)) + 1];
	struct crun_store_client *c;
	int fd[MASS], slow;
	unsigned char b;
	void *v;
	size_t len;

	memset(big, 'b', sizeof(big));
	CHECK_RC(store_connect("127.0.0.1", port, 5000, &c), 0);
	CHECK_RC(store_set(c, "/v", big, sizeof(big)), 0);
	for (int i = 0; i < MASS; i++) {
		fd[i] = raw_connect(port);
		CHECK(fd[i] >= 0);
		CHECK(send(fd[i], wait_mw, sizeof(wait_mw) - 1, MSG_NOSIGNAL) ==
		      (ssize_t)sizeof(wait_mw) - 1);
	}
	/* 20 GETs of 16 KiB unread, then the WAIT: its replies queue. */
	slow = raw_connect_rcvbuf(port, 4096);
	CHECK(slow >= 0);
	for (int i = 0; i < 20; i++)
		memcpy(req + 11 * i, get, 11);
	memcpy(req + 11 * 20, wait_mw, sizeof(wait_mw) - 1);
	CHECK(send(slow, req, sizeof(req), MSG_NOSIGNAL) == (ssize_t)sizeof(req));
	WAIT_STATS(waiters, ==, MASS + 1, 5000);
	close(fd[0]);
	CHECK_RC(store_set(c, "/mw", "go", 2), 0);
	for (int i = 1; i < MASS; i++) {
		CHECK(raw_read(fd[i], &b, 1, 5000) == 1);
		CHECK(b == 0);
		close(fd[i]);
	}
	CHECK(raw_read(slow, in, sizeof(in), 5000) == (int)sizeof(in));
	CHECK(in[0] == 0 && in[8] == 'b' && in[sizeof(in) - 1] == 0);
	close(slow);
	CHECK_RC(store_get(c, "/v", 1000, &v, &len), 0);
	CHECK(len == sizeof(big));
	free(v);
	store_close(c);
	return NULL;
}

Test(store_server, mass_wake, .timeout = 30) { run_scenario(mass_wake, NULL); }

/*
 * A client that pipelines GETs of a 16 KiB value and never reads: the
 * server stops reading it once max_output (64 KiB) of replies are unsent
 * (backpressure, memory stays bounded), serves others meanwhile, and closes
 * it after idle_timeout without progress.
 */
static const char *unread_replies(int port)
{
	static const char get[] = "\x02\x02\0\0\0\0\0\0\0/v";
	struct crun_store_client *c;
	struct crun_store_stats st;
	static char big[16384], req[11 * 2000];
	int fd, i;
	void *v;
	size_t len;

	memset(big, 'b', sizeof(big));
	CHECK_RC(store_connect("127.0.0.1", port, 5000, &c), 0);
	CHECK_RC(store_set(c, "/v", big, sizeof(big)), 0);
	fd = raw_connect_rcvbuf(port, 4096);
	CHECK(fd >= 0);
	for (i = 0; i < 2000; i++)
		memcpy(req + 11 * i, get, 11);
	CHECK(send(fd, req, sizeof(req), MSG_NOSIGNAL) == (ssize_t)sizeof(req));
	WAIT_STATS(paused, ==, 1, 5000);
	/* 2000 replies would be 32 MiB: at most 64 KiB + one reply queued. */
	st = get_stats();
	CHECK(st.memory < 64 * 1024 + 4 * sizeof(big) + 65536 + 8192);
	/* Others are served meanwhile. */
	CHECK_RC(store_get(c, "/v", 1000, &v, &len), 0);
	CHECK(len == sizeof(big));
	free(v);
	/* No progress for idle_timeout (1 s): closed. */
	WAIT_STATS(conns, ==, 1, 5000);
	CHECK(log_has("no progress for idle-timeout 1 s with unsent replies"));
	close(fd);
	store_close(c);
	return NULL;
}

Test(store_server, unread_replies, .timeout = 30)
{
	struct crun_store_limits lim;

	store_limits_default(&lim);
	lim.max_output = 64 * 1024;
	lim.idle_timeout = 1;
	capture_log = 1;
	run_scenario(unread_replies, &lim);
}

/*
 * Four 256 KiB values, max_memory 8 MiB and max_output at its default
 * (64 MiB, far above max_memory): a client pipelining 200 GETs of them (50
 * MiB of replies) without reading is paused at its share (half of
 * max_memory), not at the ceiling, so another client's GET of a value is
 * still answered; once it reads, it gets all 200 replies in order.
 */
static const char *unread_share(int port)
{
	enum { VLEN = 256 * 1024, NGET = 200 };
	static char val[VLEN], req[11 * NGET], got[8 + VLEN];
	char get[] = "\x02\x02\0\0\0\0\0\0\0/0", key[] = "/0";
	struct crun_store_client *c;
	int fd, i;
	void *v;
	size_t len;

	CHECK_RC(store_connect("127.0.0.1", port, 5000, &c), 0);
	for (i = 0; i < 4; i++) {
		memset(val, 'a' + i, sizeof(val));
		key[1] = (char)('0' + i);
		CHECK_RC(store_set(c, key, val, sizeof(val)), 0);
	}
	CHECK_RC(store_get(c, "/3", 5000, &v, &len), 0); /* the SETs are in */
	free(v);
	fd = raw_connect_rcvbuf(port, 4096);
	CHECK(fd >= 0);
	for (i = 0; i < NGET; i++) {
		get[10] = (char)('0' + i % 4);
		memcpy(req + 11 * i, get, 11);
	}
	CHECK(send(fd, req, sizeof(req), MSG_NOSIGNAL) == (ssize_t)sizeof(req));
	WAIT_STATS(paused, ==, 1, 5000);
	/* The values, its share and one reply over it, buffers. */
	CHECK(get_stats().memory < 4 * (VLEN + 64) + (4u << 20) + 2 * VLEN +
				       4 * 65536);
	CHECK_RC(store_get(c, "/3", 5000, &v, &len), 0);
	CHECK(len == VLEN && ((char *)v)[VLEN - 1] == 'd');
	free(v);
	CHECK(get_stats().conns == 2);
	for (i = 0; i < NGET; i++) {
		CHECK(raw_read(fd, got, sizeof(got), 5000) == (int)sizeof(got));
		CHECK(got[0] == 0 && got[1] == 0 && got[2] == 4); /* 256 KiB */
		CHECK(got[8] == 'a' + i % 4 && got[8 + VLEN - 1] == 'a' + i % 4);
	}
	WAIT_STATS(paused, ==, 0, 5000);
	close(fd);
	store_close(c);
	return NULL;
}

Test(store_server, unread_share, .timeout = 60)
{
	struct crun_store_limits lim;

	store_limits_default(&lim);
	lim.max_memory = 8u << 20;
	capture_log = 1;
	run_scenario(unread_share, &lim);
}

/* Parked waiters are charged to max_memory, and given back on close. */
static const char *waiter_accounting(int port)
{
	static const char hello[] = "\x00\xce\xf7\x85\x3c";
	static unsigned char frame[9 + 1000 * 14 + 8];
	size_t off = 0, m0;
	int fd;

	m0 = get_stats().memory;
	frame[off++] = 0x06; /* G3 WAIT */
	memcpy(frame + off, "\xe8\x03\0\0\0\0\0\0", 8); /* 1000 keys */
	off += 8;
	for (int i = 0; i < 1000; i++) {
		memcpy(frame + off, "\x06\0\0\0\0\0\0\0", 8);
		off += 8;
		char k[16];

		snprintf(k, sizeof(k), "/a%04d", i % 10000);
		memcpy(frame + off, k, 6);
		off += 6;
	}
	fd = raw_connect(port);
	CHECK(fd >= 0);
	CHECK(send(fd, hello, 5, 0) == 5);
	CHECK(send(fd, frame, off, 0) == (ssize_t)off);
	WAIT_STATS(waiters, ==, 1, 5000);
	/* 1000 registrations and 1000 entries of 6-byte keys at least. */
	CHECK(get_stats().memory >= m0 + 1000 * (32 + 6 + 64));
	close(fd);
	WAIT_STATS(waiters, ==, 0, 5000);
	WAIT_STATS(conns, ==, 0, 5000);
	CHECK(get_stats().memory == m0);
	return NULL;
}

Test(store_server, waiter_accounting, .timeout = 30)
{
	run_scenario(waiter_accounting, NULL);
}

/* A server raises RLIMIT_NOFILE's soft limit to the hard one. */
Test(store_server, raises_open_file_limit, .timeout = 30)
{
	struct crun_store_server *srv;
	struct rlimit rl;
	uv_loop_t loop;

	cr_assert_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
	if (rl.rlim_max < 128)
		cr_skip_test("hard open-file limit %lu too low to test",
			     (unsigned long)rl.rlim_max);
	rl.rlim_cur = 64;
	cr_assert_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
	uv_loop_init(&loop);
	cr_assert_eq(store_server_new(&loop, "127.0.0.1", 0, NULL, &srv), 0);
	cr_assert_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
	cr_assert_eq(rl.rlim_cur, rl.rlim_max);
	store_server_close(srv, NULL, NULL);
	uv_run(&loop, UV_RUN_DEFAULT);
	cr_assert_eq(uv_loop_close(&loop), 0);
}

/*
 * BARRIER semantics chosen for the libuv server's extra (see the opening
 * comment of store_keys.c): a plain WAIT on a barrier key returns at the
 * first arrival; a SET on the key of a pending barrier releases no party.
 */
static const char *barrier_semantics(int port)
{
	static const char hello[] = "\x00\xce\xf7\x85\x3c";
	static const char barrier[] = "\x12\x02\0\0\0\0\0\0\0/b\x03\0\0\0\0\0\0\0";
	static const char wait_b[] = "\x06\x01\0\0\0\0\0\0\0\x02\0\0\0\0\0\0\0/b";
	static const char set_b[] = "\x01\x02\0\0\0\0\0\0\0/b\x01\0\0\0\0\0\0\0" "1";
	int a, w, s, b, c;
	unsigned char r;

	a = raw_connect(port);
	w = raw_connect(port);
	s = raw_connect(port);
	b = raw_connect(port);
	c = raw_connect(port);
	CHECK(a >= 0 && w >= 0 && s >= 0 && b >= 0 && c >= 0);
	CHECK(send(a, hello, 5, 0) == 5 && send(w, hello, 5, 0) == 5 &&
	      send(s, hello, 5, 0) == 5 && send(b, hello, 5, 0) == 5 &&
	      send(c, hello, 5, 0) == 5);
	CHECK(send(a, barrier, sizeof(barrier) - 1, 0) > 0);
	WAIT_STATS(waiters, ==, 1, 5000);
	/* The key exists from the first arrival: a plain WAIT returns. */
	CHECK(send(w, wait_b, sizeof(wait_b) - 1, 0) > 0);
	CHECK(raw_read(w, &r, 1, 2000) == 1 && r == 0);
	/* A SET on the pending barrier's key releases nobody. */
	CHECK(send(s, set_b, sizeof(set_b) - 1, 0) > 0);
	CHECK(send(s, "\x0d\x01\0\0\0", 5, 0) == 5); /* PING: the SET is done */
	CHECK(raw_read(s, &r, 1, 2000) == 1);
	CHECK(raw_read(a, &r, 1, 100) == -1);
	CHECK(get_stats().waiters == 1);
	/* Arrivals 2 and 3 (counting on from the SET value 1) release all. */
	CHECK(send(b, barrier, sizeof(barrier) - 1, 0) > 0);
	WAIT_STATS(waiters, ==, 2, 5000);
	CHECK(send(c, barrier, sizeof(barrier) - 1, 0) > 0);
	CHECK(raw_read(c, &r, 1, 2000) == 1 && r == 0);
	CHECK(raw_read(a, &r, 1, 2000) == 1 && r == 0);
	CHECK(raw_read(b, &r, 1, 2000) == 1 && r == 0);
	close(a);
	close(w);
	close(s);
	close(b);
	close(c);
	return NULL;
}

Test(store_server, barrier_semantics, .timeout = 30)
{
	run_scenario(barrier_semantics, NULL);
}

/*
 * store_server_on_vanish: a client that closes while waiting reports the
 * keys it still waited on (not the ones already there, not a clean client).
 */
static const char *vanish(int port)
{
	/* G0 WAIT ['/here', '/gone'] */
	static const char wait2[] = "\x05\x02\0\0\0\0\0\0\0\x05\0\0\0\0\0\0\0/here"
				    "\x05\0\0\0\0\0\0\0/gone";
	struct crun_store_client *c;
	int fd, i;

	CHECK_RC(store_connect("127.0.0.1", port, 5000, &c), 0);
	CHECK_RC(store_set(c, "/here", "1", 1), 0);
	store_close(c); /* a clean client waited on nothing */
	fd = raw_connect(port);
	CHECK(fd >= 0);
	CHECK(send(fd, wait2, sizeof(wait2) - 1, 0) == sizeof(wait2) - 1);
	WAIT_STATS(waiters, ==, 1, 5000);
	close(fd);
	for (i = 0; i < 500 && !vanished_is("/gone;"); i++)
		usleep(10 * 1000);
	CHECK(vanished_is("/gone;"));
	return NULL;
}

Test(store_server, vanish_reports_keys, .timeout = 30)
{
	vanish_hook = 1;
	run_scenario(vanish, NULL);
}

/*
 * crun's WAIT_GET: answered at once when the keys exist (STOP_WAITING, then
 * the values as MULTI_GET sends them), else parked with its key list (counted
 * in memory) and answered when the last key comes; CANCEL_WAIT drops it.
 */
static const char *wait_get(int port)
{
	static const char hello[] = "\x00\xce\xf7\x85\x3c\x0d\x92\x10\0\0";
	static const char wg_p[] = "\x64\x01\0\0\0\0\0\0\0\x02\0\0\0\0\0\0\0/p";
	static const char wg_pm[] = "\x64\x02\0\0\0\0\0\0\0\x02\0\0\0\0\0\0\0/p"
				    "\x02\0\0\0\0\0\0\0/m";
	static const char wg_never[] = "\x64\x01\0\0\0\0\0\0\0\x06\0\0\0\0\0\0\0/never";
	struct crun_store_client *c;
	unsigned char b[64];
	size_t m0;
	int fd;

	CHECK_RC(store_connect("127.0.0.1", port, 5000, &c), 0);
	CHECK_RC(store_set(c, "/p", "P", 1), 0);
	fd = raw_connect(port);
	CHECK(fd >= 0);
	CHECK(send(fd, hello, 10, 0) == 10);
	CHECK(raw_read(fd, b, 4, 2000) == 4);
	CHECK(send(fd, wg_p, sizeof(wg_p) - 1, 0) > 0);
	CHECK(raw_read(fd, b, 10, 2000) == 10 && memcmp(b, "\0\x01\0\0\0\0\0\0\0P", 10) == 0);
	m0 = get_stats().memory;
	CHECK(send(fd, wg_pm, sizeof(wg_pm) - 1, 0) > 0);
	WAIT_STATS(waiters, ==, 1, 5000);
	CHECK(get_stats().memory >= m0 + sizeof(wg_pm) - 10);
	CHECK(raw_read(fd, b, 1, 100) == -1);
	CHECK_RC(store_set(c, "/m", "MM", 2), 0);
	CHECK(raw_read(fd, b, 20, 2000) == 20 &&
	      memcmp(b, "\0\x01\0\0\0\0\0\0\0P\x02\0\0\0\0\0\0\0MM", 20) == 0);
	WAIT_STATS(waiters, ==, 0, 5000);
	CHECK(send(fd, wg_never, sizeof(wg_never) - 1, 0) > 0);
	WAIT_STATS(waiters, ==, 1, 5000);
	CHECK(send(fd, "\x0c", 1, 0) == 1);
	CHECK(raw_read(fd, b, 1, 2000) == 1 && b[0] == 1);
	WAIT_STATS(waiters, ==, 0, 5000);
	close(fd);
	store_close(c);
	return NULL;
}

Test(store_server, wait_get, .timeout = 30) { run_scenario(wait_get, NULL); }

/*
 * crun's WAIT_FIRST_GET: waits for its first key only; the others are read
 * as they are when it comes (a missing one empty).
 */
static const char *wait_first_get(int port)
{
	static const char hello[] = "\x00\xce\xf7\x85\x3c\x0d\x92\x10\0\0";
	static const char wf[] = "\x65\x03\0\0\0\0\0\0\0\x02\0\0\0\0\0\0\0/a"
				 "\x02\0\0\0\0\0\0\0/p\x02\0\0\0\0\0\0\0/m";
	struct crun_store_client *c;
	unsigned char b[64];
	int fd;

	CHECK_RC(store_connect("127.0.0.1", port, 5000, &c), 0);
	CHECK_RC(store_set(c, "/p", "P", 1), 0);
	fd = raw_connect(port);
	CHECK(fd >= 0);
	CHECK(send(fd, hello, 10, 0) == 10);
	CHECK(raw_read(fd, b, 4, 2000) == 4);
	/* Parked on /a, though /m is missing too: one registration. */
	CHECK(send(fd, wf, sizeof(wf) - 1, 0) > 0);
	WAIT_STATS(waiters, ==, 1, 5000);
	CHECK(raw_read(fd, b, 1, 100) == -1);
	CHECK_RC(store_set(c, "/a", "AA", 2), 0);
	CHECK(raw_read(fd, b, 28, 2000) == 28 &&
	      memcmp(b, "\0\x02\0\0\0\0\0\0\0AA\x01\0\0\0\0\0\0\0P\0\0\0\0\0\0\0\0",
		     28) == 0);
	WAIT_STATS(waiters, ==, 0, 5000);
	/* /a exists now: answered at once, /m still empty. */
	CHECK(send(fd, wf, sizeof(wf) - 1, 0) > 0);
	CHECK(raw_read(fd, b, 28, 2000) == 28 && b[0] == 0 && b[9] == 'A');
	close(fd);
	store_close(c);
	return NULL;
}

Test(store_server, wait_first_get, .timeout = 30) { run_scenario(wait_first_get, NULL); }

/*
 * A parked WAIT_GET whose values outgrow max_output by the time they exist
 * closes its connection when woken (it is not answered in part); an
 * immediate one too large is refused like MULTI_GET. Others go on.
 */
static const char *wait_get_limit(int port)
{
	static const char hello[] = "\x00\xce\xf7\x85\x3c";
	static const char wg_big[] = "\x64\x01\0\0\0\0\0\0\0\x04\0\0\0\0\0\0\0/big";
	struct crun_store_client *c;
	char big[6000];
	void *v;
	size_t len;
	int fd;

	memset(big, 'x', sizeof(big));
	CHECK_RC(store_connect("127.0.0.1", port, 5000, &c), 0);
	fd = raw_connect(port);
	CHECK(fd >= 0);
	CHECK(send(fd, hello, 5, 0) == 5);
	CHECK(send(fd, wg_big, sizeof(wg_big) - 1, 0) > 0);
	WAIT_STATS(waiters, ==, 1, 5000);
	CHECK_RC(store_set(c, "/big", big, sizeof(big)), 0);
	CHECK(raw_closed(fd));
	close(fd);
	CHECK(log_has("wait_get reply would pass its share of max-output"));
	fd = raw_connect(port);
	CHECK(fd >= 0);
	CHECK(send(fd, hello, 5, 0) == 5);
	CHECK(send(fd, wg_big, sizeof(wg_big) - 1, 0) > 0);
	CHECK(raw_closed(fd));
	close(fd);
	CHECK(log_has("wait_get reply of 6009 bytes exceeds max-output 4096"));
	CHECK_RC(store_set(c, "/small", "s", 1), 0);
	CHECK_RC(store_get(c, "/small", 1000, &v, &len), 0);
	CHECK(vals_eq(v, len, "s"));
	free(v);
	store_close(c);
	return NULL;
}

Test(store_server, wait_get_limit, .timeout = 30)
{
	struct crun_store_limits lim;

	store_limits_default(&lim);
	lim.max_output = 4096;
	capture_log = 1;
	run_scenario(wait_get_limit, &lim);
}

/*
 * The async store client against the store server on one loop: every
 * request type with its callback order, a wait that times out (CANCEL_WAIT)
 * and one released by the server's owner, connect retries until a late
 * server appears or the deadline passes, a host name whose first address
 * refuses (::1 before 127.0.0.1, the server on 127.0.0.1 only), and close
 * failing what is pending.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include "crun/err.h"
#include "crun/store.h"
#include "hosts_private.h"

/* Shared state of one test. */
struct t {
	uv_loop_t loop;
	struct crun_store_server *srv;
	struct crun_store_aclient *c;
	uv_timer_t timer;
	int port;
	int connect_status;
	char log[2048];		/* "name:status:result;" per callback */
	int ncb;
};

static struct t T;

/* A callback's data: the name logged for it. */
#define NM(s) ((void *)(s))

static void logf_(const char *name, int status, const char *res)
{
	size_t n = strlen(T.log);

	snprintf(T.log + n, sizeof(T.log) - n, "%s:%s:%s;", name,
		 status == 0 ? "ok" : crun_err_name(status), res);
	T.ncb++;
}

static void on_reply(struct crun_store_aclient *c, int status,
		     const struct crun_store_reply *r, void *data)
{
	const char *name = data;
	char res[256] = "";
	size_t i, n;

	if (status == 0) {
		if (r->value != NULL)
			snprintf(res, sizeof(res), "%.*s", (int)r->len, (const char *)r->value);
		else if (r->nvalues > 0)
			for (i = 0; i < r->nvalues; i++) {
				n = strlen(res);
				snprintf(res + n, sizeof(res) - n, "[%.*s]",
					 (int)r->values[i].len, (const char *)r->values[i].base);
			}
		else if (strcmp(name, "check") == 0)
			snprintf(res, sizeof(res), "%d", r->ready);
		else
			snprintf(res, sizeof(res), "%lld", (long long)r->num);
	}
	logf_(name, status, res);
}

static void on_connect(struct crun_store_aclient *c, int status, void *data)
{
	T.connect_status = status;
	logf_("connect", status, "");
}

static void on_server_closed(void *data) { (void)data; }

/* The last callback of a test closes everything. */
static void close_all(struct crun_store_aclient *c, int status,
		      const struct crun_store_reply *r, void *data)
{
	on_reply(c, status, r, data);
	store_aclient_close(T.c, NULL, NULL);
	if (T.srv != NULL)
		store_server_close(T.srv, on_server_closed, NULL);
	if (!uv_is_closing((uv_handle_t *)&T.timer))
		uv_close((uv_handle_t *)&T.timer, NULL);
}

static void setup(int with_server)
{
	memset(&T, 0, sizeof(T));
	cr_assert_eq(uv_loop_init(&T.loop), 0);
	uv_timer_init(&T.loop, &T.timer);
	if (with_server) {
		cr_assert_eq(store_server_new(&T.loop, "127.0.0.1", 0, NULL, &T.srv), 0);
		store_server_set_quiet(T.srv, 1);
		T.port = store_server_port(T.srv);
	}
}

static void finish(void)
{
	uv_run(&T.loop, UV_RUN_DEFAULT);
	cr_assert_eq(uv_loop_close(&T.loop), 0);
}

/* Every request type, plain or with crun's WAIT_GET for gets. */
static void every_request(int wait_get)
{
	const char *keys[] = {"a", "b"};
	const void *vals[] = {"1", "22"};
	size_t lens[] = {1, 2};

	setup(1);
	cr_assert_eq(store_aclient_new(&T.loop, "127.0.0.1", T.port, 5000, on_connect, NULL, &T.c), 0);
	if (wait_get)
		store_aclient_use_wait_get(T.c);
	/* Queued before the connection is up. */
	cr_assert_eq(store_aclient_set(T.c, "k", "v", 1, on_reply, NM("set")), 0);
	cr_assert_eq(store_aclient_get(T.c, "k", 1000, on_reply, NM("get")), 0);
	cr_assert_eq(store_aclient_add(T.c, "n", 5, on_reply, NM("add")), 0);
	cr_assert_eq(store_aclient_add(T.c, "n", -2, on_reply, NM("add")), 0);
	cr_assert_eq(store_aclient_compare_set(T.c, "cs", "", 0, "first", 5, on_reply, NM("cas")), 0);
	cr_assert_eq(store_aclient_compare_set(T.c, "cs", "x", 1, "y", 1, on_reply, NM("cas")), 0);
	cr_assert_eq(store_aclient_compare_set(T.c, "none", "e", 1, "d", 1, on_reply, NM("cas")), 0);
	cr_assert_eq(store_aclient_check(T.c, keys, 2, on_reply, NM("check")), 0);
	cr_assert_eq(store_aclient_multi_set(T.c, keys, vals, lens, 2, on_reply, NM("mset")), 0);
	cr_assert_eq(store_aclient_check(T.c, keys, 2, on_reply, NM("check")), 0);
	cr_assert_eq(store_aclient_multi_get(T.c, keys, 2, 1000, on_reply, NM("mget")), 0);
	/* A peek does not wait: a missing key reads empty. */
	cr_assert_eq(store_aclient_peek(T.c, (const char *[]){"a", "never", "b"}, 3, on_reply,
					NM("peek")),
		     0);
	cr_assert_eq(store_aclient_append(T.c, "a", "+", 1, NULL, NULL), 0);
	cr_assert_eq(store_aclient_get(T.c, "a", 1000, on_reply, NM("get")), 0);
	cr_assert_eq(store_aclient_wait(T.c, keys, 2, 1000, on_reply, NM("wait")), 0);
	cr_assert_eq(store_aclient_wait(T.c, (const char *[]){"never"}, 1, 100, on_reply, NM("wait")), 0);
	cr_assert_eq(store_aclient_get(T.c, "never", 100, on_reply, NM("get")), 0);
	cr_assert_eq(store_aclient_delete_key(T.c, "k", on_reply, NM("del")), 0);
	cr_assert_eq(store_aclient_delete_key(T.c, "k", on_reply, NM("del")), 0);
	cr_assert_eq(store_aclient_num_keys(T.c, close_all, NM("num")), 0);
	finish();
	cr_assert_str_eq(T.log,
			 "connect:ok:;set:ok:0;get:ok:v;add:ok:5;add:ok:3;cas:ok:first;"
			 "cas:ok:first;cas:ok:e;check:ok:0;mset:ok:0;check:ok:1;"
			 "mget:ok:[1][22];peek:ok:[1][][22];get:ok:1+;wait:ok:0;"
			 "wait:CRUN_ETIMEDOUT:;"
			 "get:CRUN_ETIMEDOUT:;del:ok:1;del:ok:0;num:ok:4;");
}

Test(store_aclient, every_request_in_order, .timeout = 20) { every_request(0); }
Test(store_aclient, every_request_wait_get, .timeout = 20) { every_request(1); }

/* The server's owner sets the key the client waits for. */
static void set_go(uv_timer_t *t)
{
	cr_assert_eq(store_server_set(T.srv, "go", "now", 3), 0);
}

static void wait_released(void)
{
	setup(1);
	cr_assert_eq(store_aclient_new(&T.loop, "localhost", T.port, 5000, on_connect, NULL, &T.c), 0);
	cr_assert_eq(store_aclient_get(T.c, "go", -1, on_reply, NM("get")), 0);
	cr_assert_eq(store_aclient_add(T.c, "after", 1, close_all, NM("add")), 0);
	uv_timer_start(&T.timer, set_go, 200, 0);
	finish();
	cr_assert_str_eq(T.log, "connect:ok:;get:ok:now;add:ok:1;");
}

Test(store_aclient, wait_released, .timeout = 20) { wait_released(); }

/*
 * localhost is ::1 first, then 127.0.0.1 (a private /etc/hosts, as Debian's),
 * and the server listens on 127.0.0.1 only: ::1 refuses, the client moves on.
 */
static void localhost_v6_first(void)
{
	char why[256];

	if (hosts_v6_first("localhost", why, sizeof(why)) != 0)
		cr_skip_test("%s", why);
}

Test(store_aclient, wait_released_v6_first, .timeout = 20)
{
	localhost_v6_first();
	wait_released();
}

/* Start the server late, on the port the client keeps trying. */
static void start_server(uv_timer_t *t)
{
	cr_assert_eq(store_server_new(&T.loop, "127.0.0.1", T.port, NULL, &T.srv), 0);
	store_server_set_quiet(T.srv, 1);
}

Test(store_aclient, connect_retries, .timeout = 20)
{
	struct crun_store_server *tmp;

	setup(0);
	/* Find a free port, then free it. */
	cr_assert_eq(store_server_new(&T.loop, "127.0.0.1", 0, NULL, &tmp), 0);
	T.port = store_server_port(tmp);
	store_server_close(tmp, NULL, NULL);
	uv_run(&T.loop, UV_RUN_NOWAIT);
	cr_assert_eq(store_aclient_new(&T.loop, "127.0.0.1", T.port, 5000, on_connect, NULL, &T.c), 0);
	cr_assert_eq(store_aclient_add(T.c, "x", 2, close_all, NM("add")), 0);
	uv_timer_start(&T.timer, start_server, 300, 0);
	finish();
	cr_assert_str_eq(T.log, "connect:ok:;add:ok:2;");
}

/* A late server, both addresses refusing until then: all are tried again. */
Test(store_aclient, connect_retries_v6_first, .timeout = 20)
{
	struct crun_store_server *tmp;

	localhost_v6_first();
	setup(0);
	cr_assert_eq(store_server_new(&T.loop, "127.0.0.1", 0, NULL, &tmp), 0);
	T.port = store_server_port(tmp);
	store_server_close(tmp, NULL, NULL);
	uv_run(&T.loop, UV_RUN_NOWAIT);
	cr_assert_eq(store_aclient_new(&T.loop, "localhost", T.port, 5000, on_connect, NULL, &T.c), 0);
	cr_assert_eq(store_aclient_add(T.c, "x", 2, close_all, NM("add")), 0);
	uv_timer_start(&T.timer, start_server, 300, 0);
	finish();
	cr_assert_str_eq(T.log, "connect:ok:;add:ok:2;");
}

static void close_client(uv_timer_t *t)
{
	store_aclient_close(T.c, NULL, NULL);
	if (T.srv != NULL)
		store_server_close(T.srv, NULL, NULL);
	uv_close((uv_handle_t *)&T.timer, NULL);
}

/* After the connect failed for good: a new request is refused at once. */
static int late_rc = -1;
static void refuse_then_close(uv_timer_t *t)
{
	late_rc = store_aclient_add(T.c, "y", 1, on_reply, NM("late"));
	close_client(t);
}

Test(store_aclient, connect_deadline, .timeout = 20)
{
	struct crun_store_server *tmp;

	setup(0);
	cr_assert_eq(store_server_new(&T.loop, "127.0.0.1", 0, NULL, &tmp), 0);
	T.port = store_server_port(tmp);
	store_server_close(tmp, NULL, NULL);
	uv_run(&T.loop, UV_RUN_NOWAIT);
	cr_assert_eq(store_aclient_new(&T.loop, "127.0.0.1", T.port, 300, on_connect, NULL, &T.c), 0);
	cr_assert_eq(store_aclient_add(T.c, "x", 2, on_reply, NM("add")), 0);
	uv_timer_start(&T.timer, refuse_then_close, 1500, 0);
	finish();
	cr_assert_str_eq(T.log, "connect:CRUN_ETIMEDOUT:;add:CRUN_ETIMEDOUT:;");
	/* After the failure requests are refused at once (no callback). */
	cr_assert_eq(late_rc, CRUN_ECLOSED, "a request after the failed connect returned %d", late_rc);
}

Test(store_aclient, close_cancels_pending, .timeout = 20)
{
	setup(1);
	cr_assert_eq(store_aclient_new(&T.loop, "127.0.0.1", T.port, 5000, on_connect, NULL, &T.c), 0);
	cr_assert_eq(store_aclient_get(T.c, "never", -1, on_reply, NM("get")), 0);
	cr_assert_eq(store_aclient_add(T.c, "x", 1, on_reply, NM("add")), 0);
	uv_timer_start(&T.timer, close_client, 200, 0);
	finish();
	cr_assert_str_eq(T.log, "connect:ok:;get:CRUN_ECANCELED:;add:CRUN_ECANCELED:;");
}

/* The server goes away under a pending request. */
static void kill_server(uv_timer_t *t)
{
	store_server_close(T.srv, NULL, NULL);
	T.srv = NULL;
}

static void after_loss(struct crun_store_aclient *c, int status,
		       const struct crun_store_reply *r, void *data)
{
	on_reply(c, status, r, data);
	cr_assert_eq(store_aclient_add(T.c, "y", 1, on_reply, NM("late")), CRUN_ECLOSED);
	store_aclient_close(T.c, NULL, NULL);
	uv_close((uv_handle_t *)&T.timer, NULL);
}

Test(store_aclient, lost_connection, .timeout = 20)
{
	setup(1);
	cr_assert_eq(store_aclient_new(&T.loop, "127.0.0.1", T.port, 5000, on_connect, NULL, &T.c), 0);
	cr_assert_eq(store_aclient_get(T.c, "never", -1, after_loss, NM("get")), 0);
	uv_timer_start(&T.timer, kill_server, 200, 0);
	finish();
	cr_assert_str_eq(T.log, "connect:ok:;get:EOF:;");
}

/*
 * Requests larger than the socket takes at once: what uv_try_write leaves
 * goes by uv_write, and every later request waits behind it, so values and
 * replies stay whole and in order whether a frame went directly, in two
 * parts or queued.
 */
static char big1[6 << 20], big2[6 << 20];

static void on_big(struct crun_store_aclient *c, int status,
		   const struct crun_store_reply *r, void *data)
{
	const char *want = strcmp(data, "big1") == 0 ? big1 : big2;
	char res[64];

	snprintf(res, sizeof(res), "%s",
		 status == 0 && r->len == sizeof(big1) &&
			 memcmp(r->value, want, r->len) == 0
		     ? "same"
		     : "differs");
	logf_(data, status, res);
}

static void send_big(struct crun_store_aclient *c, int status, void *data)
{
	on_connect(c, status, data);
	/* Connected and idle: these frames are tried directly. */
	cr_assert_eq(store_aclient_set(T.c, "b1", big1, sizeof(big1), NULL, NULL), 0);
	cr_assert_eq(store_aclient_add(T.c, "n", 1, on_reply, NM("add")), 0);
	cr_assert_eq(store_aclient_set(T.c, "b2", big2, sizeof(big2), on_reply, NM("set")), 0);
	cr_assert_eq(store_aclient_add(T.c, "n", 1, on_reply, NM("add")), 0);
	cr_assert_eq(store_aclient_get(T.c, "b1", 5000, on_big, NM("big1")), 0);
	cr_assert_eq(store_aclient_get(T.c, "b2", 5000, on_big, NM("big2")), 0);
	cr_assert_eq(store_aclient_add(T.c, "n", 1, close_all, NM("add")), 0);
}

Test(store_aclient, large_frames_stay_in_order, .timeout = 30)
{
	for (size_t i = 0; i < sizeof(big1); i++) {
		big1[i] = (char)(i * 7 + 1);
		big2[i] = (char)(i * 13 + 5);
	}
	setup(1);
	cr_assert_eq(store_aclient_new(&T.loop, "127.0.0.1", T.port, 5000, send_big, NULL, &T.c), 0);
	finish();
	cr_assert_str_eq(T.log, "connect:ok:;add:ok:1;set:ok:0;add:ok:2;"
				"big1:ok:same;big2:ok:same;add:ok:3;");
}

/*
 * The race of a WAIT_GET's timeout: the server answered (STOP_WAITING and
 * the value) before it read our CANCEL_WAIT, so WAIT_CANCELED follows the
 * value. The get succeeds, and that byte is not taken for the start of the
 * next reply. A scripted server thread plays the crun store.
 */
struct fake {
	int lfd, port;
	char got[64]; /* what the script saw, for the assertion */
	pthread_t th;
};

/* Listen on a free loopback port (f->port) and run script there. */
static void fake_start(struct fake *f, void *(*script)(void *))
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t sl = sizeof(sa);

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	f->lfd = socket(AF_INET, SOCK_STREAM, 0);
	cr_assert(f->lfd >= 0);
	cr_assert_eq(bind(f->lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	cr_assert_eq(listen(f->lfd, 1), 0);
	cr_assert_eq(getsockname(f->lfd, (struct sockaddr *)&sa, &sl), 0);
	f->port = ntohs(sa.sin_port);
	cr_assert_eq(pthread_create(&f->th, NULL, script, f), 0);
}

static void fake_stop(struct fake *f)
{
	pthread_join(f->th, NULL);
	close(f->lfd);
}

static int read_n(int fd, unsigned char *b, size_t n)
{
	size_t got = 0;

	while (got < n) {
		ssize_t r = read(fd, b + got, n - got);

		if (r <= 0)
			return -1;
		got += (size_t)r;
	}
	return 0;
}

static void *fake_main(void *arg)
{
	struct fake *f = arg;
	unsigned char b[64];
	int fd = accept(f->lfd, NULL, NULL);

	/* VALIDATE (5 bytes) and PING (5): echo the nonce. */
	if (fd < 0 || read_n(fd, b, 10) != 0 || write(fd, b + 6, 4) != 4)
		goto out;
	/* WAIT_GET ["k"]: opcode, count, one string. */
	if (read_n(fd, b, 18) != 0)
		goto out;
	snprintf(f->got, sizeof(f->got), "op=%02x", b[0]);
	/* Answer only once the client has given up and canceled. */
	if (read_n(fd, b, 1) != 0 || b[0] != 0x0c)
		goto out;
	if (write(fd, "\0\x01\0\0\0\0\0\0\0v\x01", 11) != 11)
		goto out;
	/* ADD "n" 5: answer 42. */
	if (read_n(fd, b, 18) != 0 || b[0] != 0x04)
		goto out;
	if (write(fd, "\x2a\0\0\0\0\0\0\0", 8) != 8)
		goto out;
	strcat(f->got, " done");
	read_n(fd, b, 1); /* until the client closes */
out:
	if (fd >= 0)
		close(fd);
	return NULL;
}

Test(store_aclient, wait_get_answered_as_canceled, .timeout = 20)
{
	struct fake f = {0};

	fake_start(&f, fake_main);
	setup(0);
	cr_assert_eq(store_aclient_new(&T.loop, "127.0.0.1", f.port, 5000, on_connect, NULL, &T.c), 0);
	store_aclient_use_wait_get(T.c);
	cr_assert_eq(store_aclient_get(T.c, "k", 50, on_reply, NM("get")), 0);
	cr_assert_eq(store_aclient_add(T.c, "n", 5, close_all, NM("add")), 0);
	finish();
	fake_stop(&f);
	cr_assert_str_eq(f.got, "op=64 done");
	cr_assert_str_eq(T.log, "connect:ok:;get:ok:v;add:ok:42;");
}

/*
 * Requests made in one callback go out together when the loop turns: none
 * of their bytes before the callback returns, then all of them in one
 * send (one read on the server gets the three frames).
 */
static int cork_go[2], cork_seen[2];

static void *cork_main(void *arg)
{
	struct fake *f = arg;
	unsigned char b[256];
	struct pollfd pf;
	char c;
	ssize_t n;
	int fd = accept(f->lfd, NULL, NULL);

	if (fd < 0 || read_n(fd, b, 10) != 0 || write(fd, b + 6, 4) != 4)
		goto out;
	/* Told the client queued its requests: nothing may be here yet. */
	if (read(cork_go[0], &c, 1) != 1)
		goto out;
	n = recv(fd, b, sizeof(b), MSG_DONTWAIT);
	snprintf(f->got, sizeof(f->got), "early=%zd", n);
	if (write(cork_seen[1], "k", 1) != 1)
		goto out;
	pf.fd = fd;
	pf.events = POLLIN;
	if (poll(&pf, 1, 5000) != 1 || (n = recv(fd, b, sizeof(b), 0)) <= 0)
		goto out;
	snprintf(f->got + strlen(f->got), sizeof(f->got) - strlen(f->got), " then=%zd", n);
	for (int i = 0; i < 3; i++)
		if (write(fd, "\x07\0\0\0\0\0\0\0", 8) != 8)
			goto out;
	read_n(fd, b, 1); /* until the client closes */
out:
	if (fd >= 0)
		close(fd);
	return NULL;
}

static void cork_connected(struct crun_store_aclient *c, int status, void *data)
{
	char k;

	on_connect(c, status, data);
	cr_assert_eq(store_aclient_add(c, "a", 1, on_reply, NM("add")), 0);
	cr_assert_eq(store_aclient_add(c, "b", 1, on_reply, NM("add")), 0);
	cr_assert_eq(store_aclient_add(c, "c", 1, close_all, NM("add")), 0);
	cr_assert_eq(write(cork_go[1], "g", 1), 1);
	cr_assert_eq(read(cork_seen[0], &k, 1), 1);
}

Test(store_aclient, one_send_per_loop_turn, .timeout = 20)
{
	struct fake f = {0};

	cr_assert_eq(pipe(cork_go), 0);
	cr_assert_eq(pipe(cork_seen), 0);
	fake_start(&f, cork_main);
	setup(0);
	cr_assert_eq(store_aclient_new(&T.loop, "127.0.0.1", f.port, 5000, cork_connected, NULL,
				       &T.c),
		     0);
	finish();
	fake_stop(&f);
	/* Nothing before the callback returned (EAGAIN), then 3 ADDs of 18. */
	cr_assert_str_eq(f.got, "early=-1 then=54");
	cr_assert_str_eq(T.log, "connect:ok:;add:ok:7;add:ok:7;add:ok:7;");
}

/* A set written just before closing still reaches the server. */
static void set_then_close(struct crun_store_aclient *c, int status, void *data)
{
	on_connect(c, status, data);
	cr_assert_eq(store_aclient_set(c, "last", "words", 5, NULL, NULL), 0);
	store_aclient_close(c, NULL, NULL);
}

/* Every 10 ms until the set is in, up to 5 s. */
static void check_last(uv_timer_t *t)
{
	static int tries;
	const void *v = NULL;
	size_t n = 0;

	if (store_server_get(T.srv, "last", &v, &n) != 0 && ++tries < 500)
		return;
	cr_assert_eq(store_server_get(T.srv, "last", &v, &n), 0, "the set never arrived");
	cr_assert_eq(n, 5);
	cr_assert_eq(memcmp(v, "words", 5), 0);
	store_server_close(T.srv, on_server_closed, NULL);
	uv_close((uv_handle_t *)&T.timer, NULL);
}

Test(store_aclient, close_sends_what_was_written, .timeout = 20)
{
	setup(1);
	cr_assert_eq(store_aclient_new(&T.loop, "127.0.0.1", T.port, 5000, set_then_close, NULL,
				       &T.c),
		     0);
	uv_timer_start(&T.timer, check_last, 10, 10);
	finish();
	cr_assert_str_eq(T.log, "connect:ok:;");
}

/* ---- the background watch ------------------------------------------- */

static size_t srv_waiters(void)
{
	struct crun_store_stats st;

	store_server_stats(T.srv, &st);
	return st.waiters;
}

static char vanished[64];

static void on_vanish_key(void *data, const char *key, size_t klen)
{
	(void)data;
	snprintf(vanished, sizeof(vanished), "%.*s", (int)klen, key);
}

static int step;

/* Connect to the test's server as to a crun store, then run the loop. */
static void run_crun_client(store_aclient_connect_cb cb)
{
	step = 0;
	cr_assert_eq(store_aclient_new(&T.loop, "127.0.0.1", T.port, 5000, cb, NULL, &T.c), 0);
	store_aclient_use_wait_get(T.c);
	finish();
}

/* Connected: watch key, then run steps every 100 ms. */
static void watch_then(struct crun_store_aclient *c, int status, const char *key,
		       const char *name, uv_timer_cb steps)
{
	on_connect(c, status, NULL);
	cr_assert_eq(store_aclient_watch(T.c, key, on_reply, (void *)name), 0);
	uv_timer_start(&T.timer, steps, 100, 0);
}

/*
 * Requests flow while the watch waits: each takes the watch's WAIT_GET
 * back and sends it again after, so the server holds one parked waiter
 * whenever the connection is idle; the client's own SET of the key then
 * fires it, in order with the other callbacks.
 */
static void watch_steps(uv_timer_t *t)
{
	switch (step++) {
	case 0: /* idle: the watch is parked */
		cr_assert_eq(srv_waiters(), 1);
		cr_assert_eq(store_aclient_add(T.c, "n", 1, on_reply, NM("add")), 0);
		cr_assert_eq(store_aclient_set(T.c, "s", "v", 1, NULL, NULL), 0);
		cr_assert_eq(store_aclient_get(T.c, "s", 1000, on_reply, NM("get")), 0);
		break;
	case 1: /* idle again: parked again, nothing fired */
		cr_assert_eq(srv_waiters(), 1);
		cr_assert_eq(store_aclient_set(T.c, "w", "fired", 5, NULL, NULL), 0);
		cr_assert_eq(store_aclient_add(T.c, "n", 1, on_reply, NM("add")), 0);
		break;
	case 2:
		cr_assert_eq(srv_waiters(), 0);
		/* A watch on a key that is there fires at once. */
		cr_assert_eq(store_aclient_watch(T.c, "s", on_reply, NM("watch")), 0);
		cr_assert_eq(store_aclient_add(T.c, "n", 1, on_reply, NM("add")), 0);
		break;
	default:
		cr_assert_eq(srv_waiters(), 0);
		cr_assert_eq(store_aclient_num_keys(T.c, close_all, NM("keys")), 0);
		return;
	}
	uv_timer_start(t, watch_steps, 100, 0);
}

static void watch_connected(struct crun_store_aclient *c, int status, void *data)
{
	watch_then(c, status, "w", "watch", watch_steps);
}

Test(store_aclient, watch_beside_requests, .timeout = 20)
{
	setup(1);
	run_crun_client(watch_connected);
	cr_assert_str_eq(T.log, "connect:ok:;add:ok:1;get:ok:v;watch:ok:fired;add:ok:2;"
				"watch:ok:v;add:ok:3;keys:ok:3;");
}

/*
 * A new watch replaces the old (CRUN_ECANCELED), unwatch ends one with the
 * status given; answers of the incarnations taken back go nowhere, and the
 * connection stays in step. A client that vanishes while watching is
 * reported with the key it watched (what the rendezvous host relies on).
 */
static void replace_steps(uv_timer_t *t)
{
	switch (step++) {
	case 0:
		cr_assert_eq(srv_waiters(), 1);
		cr_assert_eq(store_aclient_watch(T.c, "b", on_reply, NM("b")), 0);
		cr_assert_eq(store_aclient_set(T.c, "a", "A", 1, NULL, NULL), 0);
		break;
	case 1:
		cr_assert_eq(srv_waiters(), 1);
		store_aclient_unwatch(T.c, CRUN_ETIMEDOUT);
		cr_assert_eq(store_aclient_set(T.c, "b", "B", 1, NULL, NULL), 0);
		cr_assert_eq(store_aclient_add(T.c, "n", 7, on_reply, NM("add")), 0);
		break;
	case 2:
		cr_assert_eq(srv_waiters(), 0);
		cr_assert_eq(store_aclient_watch(T.c, "end/3", on_reply, NM("end3")), 0);
		cr_assert_eq(store_aclient_add(T.c, "n", 1, on_reply, NM("add")), 0);
		break;
	case 3:
		cr_assert_eq(srv_waiters(), 1);
		store_aclient_close(T.c, NULL, NULL);
		break;
	default:
		cr_assert_str_eq(vanished, "end/3");
		store_server_close(T.srv, on_server_closed, NULL);
		uv_close((uv_handle_t *)&T.timer, NULL);
		return;
	}
	uv_timer_start(t, replace_steps, 100, 0);
}

static void replace_connected(struct crun_store_aclient *c, int status, void *data)
{
	watch_then(c, status, "a", "a", replace_steps);
}

/*
 * A watch of several keys waits for the first and reads the others as they
 * are then (a missing one empty), beside other requests.
 */
static void set_a(uv_timer_t *t)
{
	cr_assert_eq(store_server_set(T.srv, "a", "A", 1), 0);
}

static void on_watch_keys(struct crun_store_aclient *c, int status,
			  const struct crun_store_reply *r, void *data)
{
	cr_assert_eq(status, 0);
	cr_assert_eq(r->len, 1);
	cr_assert_eq(memcmp(r->value, "A", 1), 0);
	cr_assert_eq(r->nvalues, 3);
	cr_assert_eq(r->values[1].len, 2);
	cr_assert_eq(memcmp(r->values[1].base, "BB", 2), 0);
	cr_assert_eq(r->values[2].len, 0);
	close_all(c, status, r, data);
}

Test(store_aclient, watch_keys_reads_the_rest, .timeout = 20)
{
	setup(1);
	cr_assert_eq(store_aclient_new(&T.loop, "127.0.0.1", T.port, 5000, on_connect, NULL, &T.c), 0);
	store_aclient_use_wait_get(T.c);
	cr_assert_eq(store_aclient_watch_keys(T.c, NULL, 0, on_reply, NM("none")), CRUN_EUSAGE);
	cr_assert_eq(store_aclient_set(T.c, "b", "BB", 2, NULL, NULL), 0);
	cr_assert_eq(store_aclient_watch_keys(T.c, (const char *[]){"a", "b", "c"}, 3,
					      on_watch_keys, NM("watch")),
		     0);
	cr_assert_eq(store_aclient_add(T.c, "n", 1, on_reply, NM("add")), 0);
	uv_timer_start(&T.timer, set_a, 200, 0);
	finish();
	cr_assert_str_eq(T.log, "connect:ok:;add:ok:1;watch:ok:A;");
}

Test(store_aclient, watch_replaced_and_vanished, .timeout = 20)
{
	setup(1);
	vanished[0] = '\0';
	store_server_on_vanish(T.srv, on_vanish_key, NULL);
	run_crun_client(replace_connected);
	cr_assert_str_eq(T.log, "connect:ok:;a:CRUN_ECANCELED:;b:CRUN_ETIMEDOUT:;add:ok:7;"
				"add:ok:8;end3:CRUN_ECANCELED:;");
}

/* A plain TCPStore client has no watch: it needs WAIT_GET. */
Test(store_aclient, watch_needs_a_crun_store, .timeout = 20)
{
	setup(1);
	cr_assert_eq(store_aclient_new(&T.loop, "127.0.0.1", T.port, 5000, on_connect, NULL, &T.c), 0);
	cr_assert_eq(store_aclient_watch(T.c, "w", on_reply, NM("watch")), CRUN_EUSAGE);
	store_aclient_close(T.c, NULL, NULL);
	store_server_close(T.srv, on_server_closed, NULL);
	uv_close((uv_handle_t *)&T.timer, NULL);
	finish();
}

/*
 * A watch whose callback (run while one of its incarnations is still parked)
 * sets up the next watch: one WAIT_GET of it is queued at a time, sent last.
 * (Two queued incarnations once took turns at the tail for ever.)
 */
static void renew_end(uv_timer_t *t)
{
	(void)t;
	store_aclient_unwatch(T.c, CRUN_ECANCELED);
	cr_assert_eq(store_aclient_num_keys(T.c, close_all, NM("keys")), 0);
}

static void on_e(struct crun_store_aclient *c, int status,
		 const struct crun_store_reply *r, void *data)
{
	on_reply(c, status, r, data);
	cr_assert_eq(store_aclient_watch(T.c, "x", on_reply, NM("x")), 0);
	cr_assert_eq(store_aclient_add(T.c, "n", 1, on_reply, NM("add")), 0);
	uv_timer_start(&T.timer, renew_end, 100, 0);
}

static void renew_connected(struct crun_store_aclient *c, int status, void *data)
{
	on_connect(c, status, data);
	cr_assert_eq(store_aclient_set(T.c, "e", "E", 1, NULL, NULL), 0);
	cr_assert_eq(store_aclient_watch(T.c, "e", on_e, NM("e")), 0);
	cr_assert_eq(store_aclient_add(T.c, "n", 1, on_reply, NM("add")), 0);
	cr_assert_eq(store_aclient_add(T.c, "n", 1, on_reply, NM("add")), 0);
}

Test(store_aclient, watch_renewed_from_its_callback, .timeout = 20)
{
	setup(1);
	run_crun_client(renew_connected);
	cr_assert_str_eq(T.log, "connect:ok:;e:ok:E;add:ok:1;add:ok:2;add:ok:3;x:CRUN_ECANCELED:;"
				"keys:ok:2;");
}

/*
 * The connection fails while the watch was taken back for two requests: the
 * requests' callbacks run first, then the watch's (call order), once each.
 */
static void fail_steps(uv_timer_t *t)
{
	(void)t;
	cr_assert_eq(srv_waiters(), 1);
	cr_assert_eq(store_aclient_set(T.c, "s", "v", 1, on_reply, NM("set")), 0);
	cr_assert_eq(store_aclient_add(T.c, "n", 1, on_reply, NM("add")), 0);
	store_server_close(T.srv, on_server_closed, NULL);
	T.srv = NULL;
	uv_close((uv_handle_t *)&T.timer, NULL);
}

static void on_watch_failed(struct crun_store_aclient *c, int status,
			    const struct crun_store_reply *r, void *data)
{
	on_reply(c, status, r, data);
	store_aclient_close(T.c, NULL, NULL);
}

static void fail_connected(struct crun_store_aclient *c, int status, void *data)
{
	on_connect(c, status, data);
	cr_assert_eq(store_aclient_watch(T.c, "w", on_watch_failed, NM("watch")), 0);
	uv_timer_start(&T.timer, fail_steps, 100, 0);
}

Test(store_aclient, watch_fails_after_the_requests_that_took_it_back, .timeout = 20)
{
	const char *set, *add, *watch;

	setup(1);
	run_crun_client(fail_connected);
	set = strstr(T.log, ";set:");
	add = strstr(T.log, ";add:");
	watch = strstr(T.log, ";watch:");
	cr_assert(set && add && watch && set < add && add < watch && T.ncb == 4, "%s", T.log);
	cr_assert_null(strstr(T.log, ":ok:0;"), "%s", T.log);
}

/*
 * The connection is reset while the watch is parked, and the CANCEL_WAIT
 * that takes the watch back for a request is the write that fails: the
 * watch still gets its callback (with the error), once, after the request's.
 */
static volatile int fake_reset;

static void *reset_main(void *arg)
{
	struct fake *f = arg;
	struct linger lg = {1, 0};
	unsigned char b[64];
	int fd = accept(f->lfd, NULL, NULL);

	if (fd < 0 || read_n(fd, b, 10) != 0 || write(fd, b + 6, 4) != 4 ||
	    read_n(fd, b, 18) != 0) /* the watch's WAIT_GET */
		goto out;
	snprintf(f->got, sizeof(f->got), "op=%02x", b[0]);
	setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)); /* RST */
out:
	if (fd >= 0)
		close(fd);
	fake_reset = 1;
	return NULL;
}

static void reset_step(uv_timer_t *t)
{
	(void)t;
	/* The loop does not look at the socket before the request is made. */
	for (int i = 0; i < 200 && !fake_reset; i++)
		usleep(10000);
	usleep(100000);
	cr_assert_eq(store_aclient_add(T.c, "n", 1, on_reply, NM("add")), 0);
	uv_close((uv_handle_t *)&T.timer, NULL);
}

static void reset_connected(struct crun_store_aclient *c, int status, void *data)
{
	on_connect(c, status, data);
	cr_assert_eq(store_aclient_watch(T.c, "w", on_watch_failed, NM("watch")), 0);
	/* Timers run before the loop polls again: the reset is not read. */
	uv_timer_start(&T.timer, reset_step, 0, 0);
}

Test(store_aclient, watch_reported_when_taking_it_back_fails, .timeout = 20)
{
	struct fake f = {0};

	fake_start(&f, reset_main);
	setup(0);
	T.port = f.port;
	run_crun_client(reset_connected);
	fake_stop(&f);
	cr_assert_str_eq(f.got, "op=64");
	cr_assert(strstr(T.log, ";add:") && strstr(T.log, ";watch:") &&
		      strstr(T.log, ";add:") < strstr(T.log, ";watch:") && T.ncb == 3,
		  "%s", T.log);
}

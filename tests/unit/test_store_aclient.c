/*
 * The async store client against the store server on one loop: every
 * request type with its callback order, a wait that times out (CANCEL_WAIT)
 * and one released by the server's owner, connect retries until a late
 * server appears or the deadline passes, and close failing what is pending.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include "crun/err.h"
#include "crun/store.h"

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
			 "mget:ok:[1][22];get:ok:1+;wait:ok:0;wait:CRUN_ETIMEDOUT:;"
			 "get:CRUN_ETIMEDOUT:;del:ok:1;del:ok:0;num:ok:4;");
}

Test(store_aclient, every_request_in_order, .timeout = 20) { every_request(0); }
Test(store_aclient, every_request_wait_get, .timeout = 20) { every_request(1); }

/* The server's owner sets the key the client waits for. */
static void set_go(uv_timer_t *t)
{
	cr_assert_eq(store_server_set(T.srv, "go", "now", 3), 0);
}

Test(store_aclient, wait_released, .timeout = 20)
{
	setup(1);
	cr_assert_eq(store_aclient_new(&T.loop, "localhost", T.port, 5000, on_connect, NULL, &T.c), 0);
	cr_assert_eq(store_aclient_get(T.c, "go", -1, on_reply, NM("get")), 0);
	cr_assert_eq(store_aclient_add(T.c, "after", 1, close_all, NM("add")), 0);
	uv_timer_start(&T.timer, set_go, 200, 0);
	finish();
	cr_assert_str_eq(T.log, "connect:ok:;get:ok:now;add:ok:1;");
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
};

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
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t sl = sizeof(sa);
	struct fake f = {0};
	pthread_t th;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	f.lfd = socket(AF_INET, SOCK_STREAM, 0);
	cr_assert(f.lfd >= 0);
	cr_assert_eq(bind(f.lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	cr_assert_eq(listen(f.lfd, 1), 0);
	cr_assert_eq(getsockname(f.lfd, (struct sockaddr *)&sa, &sl), 0);
	cr_assert_eq(pthread_create(&th, NULL, fake_main, &f), 0);
	setup(0);
	cr_assert_eq(store_aclient_new(&T.loop, "127.0.0.1", ntohs(sa.sin_port), 5000, on_connect, NULL, &T.c), 0);
	store_aclient_use_wait_get(T.c);
	cr_assert_eq(store_aclient_get(T.c, "k", 50, on_reply, NM("get")), 0);
	cr_assert_eq(store_aclient_add(T.c, "n", 5, close_all, NM("add")), 0);
	finish();
	pthread_join(th, NULL);
	close(f.lfd);
	cr_assert_str_eq(f.got, "op=64 done");
	cr_assert_str_eq(T.log, "connect:ok:;get:ok:v;add:ok:42;");
}

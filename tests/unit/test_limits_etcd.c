/*
 * The etcd client's bounds (src/http/etcd.c) at their edges, against a fake
 * etcd on a thread that answers each request with a canned body: an answer
 * of etcd_max_json_items JSON values (objects, strings or numbers alike) is
 * parsed, one more is refused naming the key, and a real range of 9000
 * keys fits the default; a watch message of etcd_max_message bytes is
 * handed on, one byte more fails the watch naming the key
 * (test_limits_etcd_body pins etcd_max_body). Defaults and values set by the
 * rdzv_conf keys, the limits filled from the rdzv_conf table as the agent's
 * are.
 */
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "crun/cfg.h"
#include "crun/err.h"
#include "crun/etcd.h"

/* ---- the fake etcd ------------------------------------------------------ */

static int lfd = -1, port;
static pthread_t th;
static char *body;	 /* what the next answers carry */
static size_t body_len;
static int streaming;	 /* answer without a length, then close */
static volatile int quit;

static void send_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t k = send(fd, p, n, MSG_NOSIGNAL);

		if (k <= 0)
			return;
		p += k;
		n -= (size_t)k;
	}
}

/* Read a request's head and its Content-Length body. */
static int read_request(int fd)
{
	char buf[65536];
	size_t len = 0;
	char *end, *cl;
	size_t need;

	for (;;) {
		ssize_t k = recv(fd, buf + len, sizeof(buf) - 1 - len, 0);

		if (k <= 0)
			return -1;
		len += (size_t)k;
		buf[len] = '\0';
		if ((end = strstr(buf, "\r\n\r\n")) != NULL)
			break;
	}
	cl = strcasestr(buf, "content-length:");
	need = (size_t)(end + 4 - buf) + (cl ? strtoul(cl + 15, NULL, 10) : 0);
	while (len < need) {
		ssize_t k = recv(fd, buf, sizeof(buf), 0);

		if (k <= 0)
			return -1;
		len += (size_t)k;
	}
	return 0;
}

static void *serve(void *arg)
{
	(void)arg;
	while (!quit) {
		struct pollfd pfd = {lfd, POLLIN, 0};
		char head[256];
		int fd;

		if (poll(&pfd, 1, 100) <= 0)
			continue;
		fd = accept(lfd, NULL, NULL);
		if (fd < 0)
			continue;
		if (read_request(fd) == 0) {
			if (streaming)
				snprintf(head, sizeof(head),
					 "HTTP/1.1 200 OK\r\nContent-Type: "
					 "application/json\r\nConnection: "
					 "close\r\n\r\n");
			else
				snprintf(head, sizeof(head),
					 "HTTP/1.1 200 OK\r\nContent-Type: "
					 "application/json\r\nContent-Length: "
					 "%zu\r\nConnection: close\r\n\r\n",
					 body_len);
			send_all(fd, head, strlen(head));
			send_all(fd, body, body_len);
		}
		close(fd);
	}
	return NULL;
}

static void fake_start(void)
{
	struct sockaddr_in sa;
	socklen_t sl = sizeof(sa);

	lfd = socket(AF_INET, SOCK_STREAM, 0);
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert_eq(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	cr_assert_eq(listen(lfd, 16), 0);
	cr_assert_eq(getsockname(lfd, (struct sockaddr *)&sa, &sl), 0);
	port = ntohs(sa.sin_port);
	quit = 0;
	cr_assert_eq(pthread_create(&th, NULL, serve, NULL), 0);
}

static void fake_stop(void)
{
	quit = 1;
	pthread_join(th, NULL);
	close(lfd);
	free(body);
	body = NULL;
}

/* ---- the client ---------------------------------------------------------- */

struct result {
	int done, status, msgs;
	size_t last_len;
};

static void on_reply(int status, json_t *resp, void *arg)
{
	struct result *r = arg;

	(void)resp;
	r->done = 1;
	r->status = status;
}

static void on_msg(json_t *msg, void *arg)
{
	struct result *r = arg;

	r->msgs++;
	r->last_len = json_string_length(json_object_get(msg, "x"));
}

static uv_loop_t loop;
static struct etcd *e;
static char errmsg[512];

/* A client whose limits come from the rdzv_conf text conf (NULL: the
 * defaults), as the agent's do. */
static void client_new(const char *conf)
{
	char ep[64], err[256] = "";
	struct crun_rdzv_conf rc;
	struct etcd_opts o;

	memset(&o, 0, sizeof(o));
	snprintf(ep, sizeof(ep), "127.0.0.1:%d", port);
	o.endpoints = ep;
	o.timeout = 3;
	cfg_rdzv_conf_init(&rc);
	if (conf != NULL)
		cr_assert_eq(cfg_parse_rdzv_conf(conf, &rc, err, sizeof(err)),
			     0, "%s", err);
	cfg_etcd_limits(&rc, &o.lim);
	cfg_rdzv_conf_release(&rc);
	cr_assert_eq(uv_loop_init(&loop), 0);
	cr_assert_eq(etcd_new(&loop, &o, err, sizeof(err), &e), 0, "%s", err);
}

static void on_closed(void *data)
{
	(void)data;
	etcd_free(e);
}

static void client_free(void)
{
	etcd_close(e, on_closed, NULL);
	uv_run(&loop, UV_RUN_DEFAULT);
	cr_assert_eq(uv_loop_close(&loop), 0);
}

/* One call answered with body b; its status (errmsg: the client's). */
static int call(const char *b, size_t n)
{
	struct result r = {0};

	free(body);
	body = malloc(n + 1);
	memcpy(body, b, n);
	body_len = n;
	streaming = 0;
	cr_assert_eq(etcd_call(e, "/v3/kv/range", json_object(), on_reply, &r),
		     0);
	while (!r.done)
		uv_run(&loop, UV_RUN_ONCE);
	snprintf(errmsg, sizeof(errmsg), "%s", etcd_errmsg(e));
	return r.status;
}

/* One watch whose stream is the line b; messages handed on, end status. */
static int watch(const char *b, size_t n, int *msgs)
{
	struct result r = {0};
	struct etcd_req *q;

	free(body);
	body = malloc(n + 1);
	memcpy(body, b, n);
	body_len = n;
	streaming = 1;
	cr_assert_eq(etcd_stream(e, "/v3/watch", json_object(), on_msg,
				 on_reply, &r, &q),
		     0);
	while (!r.done)
		uv_run(&loop, UV_RUN_ONCE);
	snprintf(errmsg, sizeof(errmsg), "%s", etcd_errmsg(e));
	*msgs = r.msgs;
	return r.status;
}

/* {"a":[item,item,...]}: n values in all (an object, as etcd answers). */
static char *values_of(size_t n, const char *item, size_t *len)
{
	size_t il = strlen(item);
	char *s = malloc((il + 1) * n + 16);
	size_t k = 0;

	cr_assert(n >= 2);
	k += (size_t)sprintf(s, "{\"a\":[");
	for (size_t i = 2; i < n; i++) {
		if (i > 2)
			s[k++] = ',';
		memcpy(s + k, item, il);
		k += il;
	}
	memcpy(s + k, "]}", 3);
	*len = k + 2;
	return s;
}

/*
 * An answer of exactly max values of item is parsed; one more is refused
 * before parsing, naming etcd_max_json_items.
 */
static void json_items_edge(const char *conf, size_t max, const char *item)
{
	size_t len;
	char *s;

	fake_start();
	client_new(conf);
	s = values_of(max, item, &len);
	cr_assert_eq(call(s, len), 0, "%s", errmsg);
	free(s);
	s = values_of(max + 1, item, &len);
	cr_assert_eq(call(s, len), CRUN_EPROTO, "%zu values of %s parsed",
		     max + 1, item);
	cr_assert_not_null(strstr(errmsg, "more than etcd_max_json_items "
					  "JSON values"),
			   "%s", errmsg);
	free(s);
	client_free();
	fake_stop();
}

Test(limits_etcd, json_items_default, .timeout = 60)
{
	json_items_edge(NULL, 65536, "{}");
}

Test(limits_etcd, json_items_set, .timeout = 60)
{
	json_items_edge("etcd_max_json_items=5", 5, "{}");
}

/* Strings cost jansson as much as objects: "" items count the same. */
Test(limits_etcd, json_items_strings, .timeout = 60)
{
	json_items_edge(NULL, 65536, "\"\"");
}

Test(limits_etcd, json_items_scalars, .timeout = 60)
{
	json_items_edge("etcd_max_json_items=100", 100, "0");
	json_items_edge("etcd_max_json_items=100", 100, "null");
	json_items_edge("etcd_max_json_items=100", 100, "-1.5e3");
}

/* Escaped quotes and brackets inside a string leave it one value. */
Test(limits_etcd, json_items_escaped_strings, .timeout = 60)
{
	json_items_edge("etcd_max_json_items=50", 50, "\"\\\"]}[{\\\\\"");
}

/*
 * A range of 9000 keys as etcd answers it (each kv with its key, value,
 * revisions, version and lease) is parsed within the default.
 */
Test(limits_etcd, json_items_default_takes_a_real_range, .timeout = 60)
{
	json_t *r = json_object(), *kvs = json_array();
	char *s;

	json_object_set_new(r, "header",
			    json_pack("{s:s,s:s,s:s,s:s}", "cluster_id", "1",
				      "member_id", "2", "revision", "9000",
				      "raft_term", "3"));
	for (int i = 0; i < 9000; i++)
		json_array_append_new(
		    kvs, json_pack("{s:s,s:s,s:s,s:s,s:s,s:s}", "key",
				   "L2pvYi9rL3JhbmsvMTIz", "create_revision",
				   "42", "mod_revision", "4242", "version", "1",
				   "value", "MTAuMC4wLjE6Mjk1MDA=", "lease",
				   "7587869204571551234"));
	json_object_set_new(r, "kvs", kvs);
	json_object_set_new(r, "count", json_string("9000"));
	s = json_dumps(r, JSON_COMPACT);
	json_decref(r);
	fake_start();
	client_new(NULL);
	cr_assert_eq(call(s, strlen(s)), 0, "%s", errmsg);
	free(s);
	client_free();
	fake_stop();
}

/* {"x":"aaa..."} of n bytes in all. */
static char *object_of(size_t n)
{
	char *s = malloc(n + 2);

	cr_assert(n >= 8);
	memcpy(s, "{\"x\":\"", 6);
	memset(s + 6, 'a', n - 8);
	memcpy(s + n - 2, "\"}", 2);
	s[n] = '\0';
	return s;
}

/*
 * A watch message of exactly max bytes (its newline apart) is handed on;
 * one byte more fails the watch, naming etcd_max_message.
 */
static void message_edge(const char *conf, size_t max)
{
	char *s;
	int msgs;

	fake_start();
	client_new(conf);
	s = object_of(max); /* and its newline */
	s[max] = '\n';
	cr_assert_eq(watch(s, max + 1, &msgs), 0, "%s", errmsg);
	cr_assert_eq(msgs, 1, "the message of %zu bytes was not handed on",
		     max);
	free(s);
	s = object_of(max + 1);
	s[max + 1] = '\n';
	cr_assert_neq(watch(s, max + 2, &msgs), 0);
	cr_assert_eq(msgs, 0);
	cr_assert_not_null(strstr(errmsg, "etcd_max_message"), "%s", errmsg);
	free(s);
	client_free();
	fake_stop();
}

Test(limits_etcd, message_default, .timeout = 60)
{
	message_edge(NULL, 8u << 20);
}

Test(limits_etcd, message_set, .timeout = 60)
{
	message_edge("etcd_max_message=4096", 4096);
}

/*
 * The etcd client's answer cap (rdzv_conf etcd_max_body) at its edge: a
 * loopback HTTP server answers every request with a JSON body of exactly N
 * bytes; an answer of max_body bytes is served, one byte more is refused
 * with a message naming the key, for the default (64 MiB) and for a value
 * set by the key. The limits come from the rdzv_conf table, as the agent's.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "crun/cfg.h"
#include "crun/err.h"
#include "crun/etcd.h"

struct srv {
	uv_tcp_t tcp;
	size_t body; /* bytes of every answer's body */
	char *resp;  /* the whole answer, built once */
	size_t resp_len;
	int conns; /* connections accepted: one per attempt */
	int port;
};

struct conn {
	uv_tcp_t tcp;
	struct srv *s;
	char head[8192];
	size_t n;
	int answered;
	uv_write_t w;
};

static void on_conn_closed(uv_handle_t *h)
{
	struct conn *c = h->data;

	free(c);
}

static void on_written(uv_write_t *w, int status)
{
	struct conn *c = w->data;

	/* The client may have hung up first (a refused answer). */
	if (!uv_is_closing((uv_handle_t *)&c->tcp))
		uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
	struct conn *c = h->data;

	buf->base = c->head + c->n;
	buf->len = sizeof(c->head) - 1 - c->n;
	if (buf->len == 0) /* a long body: keep reading, not keeping it */
		buf->base = c->head, buf->len = sizeof(c->head) - 1, c->n = 0;
}

/* {"x":"aaa..."} of exactly n bytes (n >= 9). */
static char *json_of(size_t n)
{
	char *b = malloc(n + 1);

	cr_assert(b != NULL && n >= 9);
	memcpy(b, "{\"x\":\"", 6);
	memset(b + 6, 'a', n - 8);
	memcpy(b + n - 2, "\"}", 3);
	return b;
}

static void on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
	struct conn *c = st->data;
	uv_buf_t b;

	if (nread < 0) {
		if (!uv_is_closing((uv_handle_t *)st))
			uv_close((uv_handle_t *)st, on_conn_closed);
		return;
	}
	c->n += (size_t)nread;
	c->head[c->n] = '\0';
	if (c->answered || strstr(c->head, "\r\n\r\n") == NULL)
		return;
	c->answered = 1;
	b = uv_buf_init(c->s->resp, (unsigned)c->s->resp_len);
	c->w.data = c;
	uv_write(&c->w, st, &b, 1, on_written);
}

/* An HTTP 200 with a JSON body of exactly s->body bytes. */
static void build_answer(struct srv *s)
{
	char hdr[200], *j = json_of(s->body);
	size_t hl;

	hl = (size_t)snprintf(hdr, sizeof(hdr),
			      "HTTP/1.1 200 OK\r\nContent-Type: "
			      "application/json\r\nContent-Length: %zu\r\n"
			      "Connection: close\r\n\r\n",
			      s->body);
	s->resp = malloc(hl + s->body);
	cr_assert_not_null(s->resp);
	memcpy(s->resp, hdr, hl);
	memcpy(s->resp + hl, j, s->body);
	s->resp_len = hl + s->body;
	free(j);
}

static void on_connection(uv_stream_t *server, int status)
{
	struct srv *s = server->data;
	struct conn *c = calloc(1, sizeof(*c));

	cr_assert(status == 0 && c != NULL);
	c->s = s;
	s->conns++;
	uv_tcp_init(server->loop, &c->tcp);
	c->tcp.data = c;
	cr_assert_eq(uv_accept(server, (uv_stream_t *)&c->tcp), 0);
	uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

struct result {
	int done, status;
};

static void on_answer(int status, json_t *resp, void *arg)
{
	struct result *r = arg;

	r->done = 1;
	r->status = status;
}

static void on_closed(void *data)
{
	*(int *)data = 1;
}

/*
 * One request to a server answering `body` bytes, with rdzv_conf text conf
 * (or the defaults), for at most timeout s (a refused answer is retried
 * until then); returns the status, copies the client's error and counts
 * the attempts.
 */
static int ask(size_t body, const char *conf, double timeout, char *why,
	       size_t whylen, int *attempts)
{
	struct crun_rdzv_conf rc;
	struct etcd_opts o;
	struct sockaddr_in sa;
	struct sockaddr_storage name;
	int namelen = sizeof(name), closed = 0;
	struct result r = {0, 0};
	struct srv s;
	struct etcd *e;
	uv_loop_t loop;
	char ep[64], err[256];

	cr_assert_eq(uv_loop_init(&loop), 0);
	memset(&s, 0, sizeof(s));
	s.body = body;
	build_answer(&s);
	uv_tcp_init(&loop, &s.tcp);
	s.tcp.data = &s;
	uv_ip4_addr("127.0.0.1", 0, &sa);
	cr_assert_eq(uv_tcp_bind(&s.tcp, (struct sockaddr *)&sa, 0), 0);
	cr_assert_eq(uv_listen((uv_stream_t *)&s.tcp, 16, on_connection), 0);
	uv_tcp_getsockname(&s.tcp, (struct sockaddr *)&name, &namelen);
	s.port = ntohs(((struct sockaddr_in *)&name)->sin_port);
	snprintf(ep, sizeof(ep), "127.0.0.1:%d", s.port);

	cfg_rdzv_conf_init(&rc);
	if (conf)
		cr_assert_eq(cfg_parse_rdzv_conf(conf, &rc, err, sizeof(err)),
			     0, "%s", err);
	memset(&o, 0, sizeof(o));
	o.endpoints = ep;
	o.timeout = timeout;
	cfg_etcd_limits(&rc, &o.lim);
	cfg_rdzv_conf_release(&rc);
	cr_assert_eq(etcd_new(&loop, &o, err, sizeof(err), &e), 0, "%s", err);
	cr_assert_eq(etcd_call(e, "/v3/kv/range",
			       etcd_range_req("k", NULL), on_answer, &r),
		     0);
	while (!r.done)
		uv_run(&loop, UV_RUN_ONCE);
	snprintf(why, whylen, "%s", etcd_errmsg(e));
	etcd_close(e, on_closed, &closed);
	while (!closed)
		uv_run(&loop, UV_RUN_ONCE);
	etcd_free(e);
	uv_close((uv_handle_t *)&s.tcp, NULL);
	uv_run(&loop, UV_RUN_DEFAULT);
	cr_assert_eq(uv_loop_close(&loop), 0);
	free(s.resp);
	if (attempts)
		*attempts = s.conns;
	return r.status;
}

Test(etcd_limits, max_body_set_by_its_key)
{
	char why[1200];

	cr_expect_eq(ask(4096, "etcd_max_body=4096", 10, why, sizeof(why), NULL),
		     0, "an answer of exactly etcd_max_body: %s", why);
	/* Refused at once, then retried until the timeout: each retry is
	 * refused the same way, so the last error is the refusal. */
	cr_expect_eq(ask(4097, "etcd_max_body=4096", 0.5, why, sizeof(why),
			 NULL),
		     CRUN_EETCD);
	cr_expect_not_null(strstr(why, "an answer over etcd_max_body"), "%s",
			   why);
	cr_expect_eq(ask(4096, "etcd_max_body=4K", 10, why, sizeof(why), NULL),
		     0, "%s", why);
}

/*
 * The default, 64 MiB: served when exactly that (in one attempt), refused
 * one byte over. A 64 MiB transfer may be what the deadline cuts short on a
 * loaded machine, so the refusal is seen as the retries it causes, and the
 * message is checked above, at a bound that takes no time to reach.
 */
Test(etcd_limits, max_body_default_64m, .timeout = 120)
{
	char why[1200];
	int attempts = 0;

	cr_expect_eq(ask(64u << 20, NULL, 60, why, sizeof(why), &attempts), 0,
		     "an answer of exactly 64 MiB: %s", why);
	cr_expect_eq(attempts, 1);
	cr_expect_eq(ask((64u << 20) + 1, NULL, 5, why, sizeof(why), &attempts),
		     CRUN_EETCD);
	cr_expect_geq(attempts, 2, "an answer over 64 MiB was not retried");
}

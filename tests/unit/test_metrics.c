/*
 * The agent's metrics (agent/metrics.c, compiled in here: it is private to
 * agent/): the Prometheus text a snapshot renders to (families declared
 * once, before their samples, contiguous; labels escaped; optional series
 * only when they mean something), /healthz's JSON and status, and the
 * server itself on a loopback port: routes, methods, a busy port, clients
 * that dribble.
 */
#include <criterion/criterion.h>
#include <curl/curl.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../agent/metrics.c"
#include "crun/store.h"

static void snap_full(struct metrics_snap *s)
{
	memset(s, 0, sizeof(*s));
	snprintf(s->host, sizeof(s->host), "n\"1\\x\ny");
	snprintf(s->run_id, sizeof(s->run_id), "job7");
	snprintf(s->backend, sizeof(s->backend), "c10d");
	s->state = "running";
	s->reason = "";
	s->started = 1000;
	s->formed = 1;
	s->round = 3;
	s->generation = 2;
	s->group_rank = 1;
	s->group_world_size = 2;
	s->world_size = 4;
	s->base_rank = 2;
	s->local_world_size = 2;
	s->restarts_used = 1;
	s->restarts_left = 2;
	s->max_restarts = 3;
	s->running = 2;
	s->failed = 1;
	s->failures = 5;
	s->node_losses = 1;
	s->stalls = 2;
	s->last_failure = 1500;
	s->last_exit_code = 139;
	s->stores[0].name = "rendezvous";
	s->stores[0].conns = 3;
	s->stores[0].keys = 11;
	s->stores[0].memory = 4096;
	s->stores[0].nops = 2;
	s->stores[0].op_names[0] = "set";
	s->stores[0].ops[0] = 7;
	s->stores[0].op_names[1] = "get";
	s->stores[0].ops[1] = 9;
	s->stores[1].name = "workers";
	s->stores[1].keys = 1;
	s->stores[1].nops = 1;
	s->stores[1].op_names[0] = "set";
	s->stores[1].ops[0] = 1;
}

/* Whether text holds line as a whole line. */
static int has_line(const char *text, const char *line)
{
	size_t n = strlen(line);

	for (const char *p = text; (p = strstr(p, line)) != NULL; p++)
		if ((p == text || p[-1] == '\n') && p[n] == '\n')
			return 1;
	return 0;
}

/*
 * The format's structure: each family's TYPE once, after its HELP and
 * before its samples, and every sample of a family in one block.
 */
static void check_structure(const char *text)
{
	char *copy = strdup(text), *save = NULL, *line;
	char seen[64][64], cur[64] = "";
	int nseen = 0, samples = 0;

	for (line = strtok_r(copy, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		char name[64];

		if (strncmp(line, "# HELP ", 7) == 0)
			continue;
		if (sscanf(line, "# TYPE %63s", name) == 1) {
			for (int i = 0; i < nseen; i++)
				cr_assert_str_neq(seen[i], name,
						  "%s declared twice", name);
			cr_assert_lt(nseen, 64);
			snprintf(seen[nseen++], 64, "%s", name);
			snprintf(cur, sizeof(cur), "%s", name);
			cr_assert(strstr(text, "# HELP ") != NULL);
			continue;
		}
		cr_assert_neq(line[0], '#', "stray comment: %s", line);
		cr_assert_eq(sscanf(line, "%63[a-z_]", name), 1, "%s", line);
		cr_assert_str_eq(name, cur, "sample %s outside its family %s",
				 line, cur);
		cr_assert(strncmp(name, "crun_", 5) == 0);
		samples++;
	}
	cr_assert_gt(samples, 10);
	free(copy);
}

Test(metrics, render_full)
{
	struct metrics_snap s;
	size_t len = 0;
	char *t;

	snap_full(&s);
	t = metrics_render(&s, 1512.5, &len);
	cr_assert_not_null(t);
	cr_assert_eq(len, strlen(t));
	check_structure(t);
	cr_assert(has_line(t, "crun_agent_info{host=\"n\\\"1\\\\x\\ny\","
			      "run_id=\"job7\",backend=\"c10d\",version=\"" CRUN_VERSION
			      "\"} 1"),
		  "%s", t);
	cr_assert(has_line(t, "crun_agent_state{state=\"running\"} 1"));
	cr_assert(has_line(t, "crun_agent_state{state=\"stopping\"} 0"));
	cr_assert(has_line(t, "crun_agent_healthy 1"));
	cr_assert(has_line(t, "crun_workers{state=\"running\"} 2"));
	cr_assert(has_line(t, "crun_workers{state=\"failed\"} 1"));
	cr_assert(has_line(t, "crun_restarts_total 1"));
	cr_assert(has_line(t, "crun_restarts_left 2"));
	cr_assert(has_line(t, "crun_rdzv_round 3"));
	cr_assert(has_line(t, "crun_rdzv_generation 2"));
	cr_assert(has_line(t, "crun_group_rank 1"));
	cr_assert(has_line(t, "crun_group_world_size 2"));
	cr_assert(has_line(t, "crun_world_size 4"));
	cr_assert(has_line(t, "crun_node_losses_total 1"));
	cr_assert(has_line(t, "crun_stalls_total 2"));
	cr_assert(has_line(t, "crun_worker_failures_total 5"));
	cr_assert(has_line(t, "crun_last_failure_age_seconds 12.5"), "%s", t);
	cr_assert(has_line(t, "crun_last_failure_exit_code 139"));
	cr_assert(has_line(t, "crun_store_keys{store=\"rendezvous\"} 11"));
	cr_assert(has_line(t, "crun_store_keys{store=\"workers\"} 1"));
	cr_assert(has_line(t, "crun_store_memory_bytes{store=\"rendezvous\"} "
			      "4096"));
	cr_assert(has_line(t, "crun_store_operations_total{store=\"rendezvous\""
			      ",op=\"get\"} 9"));
	cr_assert(has_line(t, "crun_store_operations_total{store=\"workers\","
			      "op=\"set\"} 1"));
	cr_assert(has_line(t, "# TYPE crun_store_operations_total counter"));
	free(t);
}

Test(metrics, render_optional_series)
{
	struct metrics_snap s;
	size_t len;
	char *t;

	snap_full(&s);
	s.formed = 0;
	s.last_failure = 0;
	s.stores[0].name = s.stores[1].name = NULL;
	s.state = "stopping";
	t = metrics_render(&s, 2000, &len);
	cr_assert_not_null(t);
	check_structure(t);
	/* No round yet: no ranks; no failure: no age; no store: none. */
	cr_assert_null(strstr(t, "crun_group_rank"));
	cr_assert_null(strstr(t, "crun_rdzv_round"));
	cr_assert_null(strstr(t, "crun_last_failure"));
	cr_assert_null(strstr(t, "crun_store_"));
	cr_assert(has_line(t, "crun_agent_healthy 0"));
	cr_assert(has_line(t, "crun_agent_state{state=\"stopping\"} 1"));
	cr_assert(has_line(t, "crun_worker_failures_total 5"));
	free(t);
}

Test(metrics, healthy_states)
{
	cr_assert(metrics_healthy("rendezvous"));
	cr_assert(metrics_healthy("running"));
	cr_assert_not(metrics_healthy("stopping"));
	cr_assert_not(metrics_healthy("failed"));
	cr_assert_not(metrics_healthy("done"));
	cr_assert_not(metrics_healthy(NULL));
}

Test(metrics, health_json)
{
	struct metrics_snap s;
	json_error_t err;
	json_t *o;
	size_t len;
	char *t;

	snap_full(&s);
	s.state = "failed";
	s.reason = "worker failed";
	t = metrics_health(&s, 1502, &len);
	cr_assert_not_null(t);
	cr_assert_eq(len, strlen(t));
	/* One line. */
	cr_assert_eq(strchr(t, '\n'), t + len - 1);
	o = json_loads(t, 0, &err);
	cr_assert_not_null(o, "%s: %s", t, err.text);
	cr_assert_str_eq(json_string_value(json_object_get(o, "status")),
			 "failed");
	cr_assert(json_is_false(json_object_get(o, "healthy")));
	cr_assert_str_eq(json_string_value(json_object_get(o, "reason")),
			 "worker failed");
	cr_assert_eq(json_integer_value(json_object_get(o, "round")), 3);
	cr_assert_eq(json_integer_value(json_object_get(o, "generation")), 2);
	cr_assert_eq(json_integer_value(json_object_get(o, "group_rank")), 1);
	cr_assert_eq(json_integer_value(json_object_get(o, "restarts_left")),
		     2);
	cr_assert_float_eq(
	    json_real_value(json_object_get(o, "last_failure_age")), 2.0, 1e-9);
	json_decref(o);
	free(t);
}

/* ---- The server on loopback ------------------------------------------- */

static const char *fill_state = "running";
static int fills;

static void fill(void *data, struct metrics_snap *s)
{
	(void)data;
	fills++;
	snprintf(s->host, sizeof(s->host), "h");
	s->state = fill_state;
	s->reason = "";
}

static size_t sink(char *p, size_t sz, size_t n, void *data)
{
	FILE *fp = data;

	return fwrite(p, sz, n, fp);
}

/* GET (or method) url; returns the status, body in *body (malloc'd). */
static long http(const char *method, const char *url, char **body)
{
	CURL *c = curl_easy_init();
	size_t n = 0;
	FILE *fp = open_memstream(body, &n);
	long code = -1;

	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, fp);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
	if (curl_easy_perform(c) == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
	curl_easy_cleanup(c);
	fclose(fp);
	return code;
}

Test(metrics, server_routes, .timeout = 30)
{
	struct metrics_opts o = {"127.0.0.1", 0, 8, 5, fill, NULL};
	struct metrics *m = NULL, *m2 = NULL;
	uv_loop_t loop;
	char url[128], err[256] = "", *body = NULL;

	cr_assert_eq(uv_loop_init(&loop), 0);
	cr_assert_eq(metrics_new(&loop, &o, &m, err, sizeof(err)), 0, "%s",
		     err);
	cr_assert_gt(metrics_port(m), 0);
	cr_assert_gt(fills, 0, "a snapshot is published before serving");

	snprintf(url, sizeof(url), "http://127.0.0.1:%d/healthz",
		 metrics_port(m));
	cr_assert_eq(http("GET", url, &body), 200);
	cr_assert_not_null(strstr(body, "\"status\":\"running\""), "%s", body);
	free(body);

	fill_state = "stopping";
	metrics_update(m);
	cr_assert_eq(http("GET", url, &body), 503);
	cr_assert_not_null(strstr(body, "\"status\":\"stopping\""), "%s",
			   body);
	free(body);

	cr_assert_eq(http("POST", url, &body), 405);
	free(body);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/nothing",
		 metrics_port(m));
	cr_assert_eq(http("GET", url, &body), 404);
	free(body);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/metrics",
		 metrics_port(m));
	cr_assert_eq(http("GET", url, &body), 200);
	cr_assert(has_line(body, "crun_agent_state{state=\"stopping\"} 1"),
		  "%s", body);
	free(body);

	/* The same port again: one line naming it, nothing listening. */
	o.port = metrics_port(m);
	cr_assert_neq(metrics_new(&loop, &o, &m2, err, sizeof(err)), 0);
	cr_assert_not_null(strstr(err, "cannot serve metrics on '127.0.0.1:"),
			   "%s", err);
	cr_assert_not_null(strstr(err, "in use"), "%s", err);
	cr_assert_null(m2);

	o.addr = "300.1.2.3";
	o.port = 0;
	cr_assert_eq(metrics_new(&loop, &o, &m2, err, sizeof(err)),
		     CRUN_ECONFIG);
	cr_assert_not_null(strstr(err, "--metrics_addr '300.1.2.3'"),
			   "%s", err);

	metrics_close(m);
	uv_run(&loop, UV_RUN_DEFAULT);
	cr_assert_eq(uv_loop_close(&loop), 0);
}

/* ---- The store's operation counters (store_server_ops) ---------------- */

struct store_thread {
	uv_loop_t loop;
	uv_async_t stop;
	struct crun_store_server *srv;
	int kinds; /* store_server_ops's answers, read on the loop */
	const char *names[64];
	uint64_t ops[64];
	struct metrics_store ms, none;
};

static void on_stop(uv_async_t *h)
{
	struct store_thread *st = h->data;

	for (st->kinds = 0; st->kinds < 64; st->kinds++) {
		st->ops[st->kinds] =
		    store_server_ops(st->srv, st->kinds, &st->names[st->kinds]);
		if (st->names[st->kinds] == NULL)
			break;
	}
	cr_assert_eq(store_server_ops(st->srv, -1, &st->names[63]), 0);
	cr_assert_null(st->names[63]);
	metrics_store_fill(&st->ms, "workers", st->srv);
	metrics_store_fill(&st->none, "rendezvous", NULL);
	store_server_close(st->srv, NULL, NULL);
	uv_close((uv_handle_t *)h, NULL);
}

static void *run_loop(void *data)
{
	struct store_thread *st = data;

	uv_run(&st->loop, UV_RUN_DEFAULT);
	return NULL;
}

static uint64_t ops_of(const struct store_thread *st, const char *op)
{
	for (int i = 0; i < st->kinds; i++)
		if (strcmp(st->names[i], op) == 0)
			return st->ops[i];
	cr_assert_fail("no operation named %s", op);
	return 0;
}

Test(metrics, store_ops_by_kind, .timeout = 30)
{
	struct store_thread st;
	struct crun_store_client *c = NULL;
	pthread_t th;
	void *val;
	size_t len;

	memset(&st, 0, sizeof(st));
	cr_assert_eq(uv_loop_init(&st.loop), 0);
	cr_assert_eq(store_server_new(&st.loop, "127.0.0.1", 0, NULL, &st.srv),
		     0);
	store_server_set_quiet(st.srv, 1);
	uv_async_init(&st.loop, &st.stop, on_stop);
	st.stop.data = &st;
	cr_assert_eq(pthread_create(&th, NULL, run_loop, &st), 0);
	cr_assert_eq(store_connect("127.0.0.1", store_server_port(st.srv),
				   5000, &c),
		     0);
	cr_assert_eq(store_set(c, "k", "1", 1), 0);
	cr_assert_eq(store_set(c, "k2", "2", 1), 0);
	cr_assert_eq(store_add(c, "n", 5, NULL), 0);
	cr_assert_eq(store_get(c, "k", 1000, &val, &len), 0);
	free(val);
	store_close(c);
	uv_async_send(&st.stop);
	pthread_join(th, NULL);
	cr_assert_eq(ops_of(&st, "set"), 2);
	cr_assert_eq(ops_of(&st, "add"), 1);
	cr_assert_eq(ops_of(&st, "get"), 1);
	cr_assert_eq(ops_of(&st, "validate"), 1);
	cr_assert_eq(ops_of(&st, "delete_key"), 0);
	cr_assert_gt(st.kinds, 15);
	cr_assert_leq(st.kinds, METRICS_MAX_OPS, "metrics.c holds them all");
	/* What /metrics shows of it. */
	cr_assert_str_eq(st.ms.name, "workers");
	cr_assert_eq(st.ms.keys, 3);
	cr_assert_gt(st.ms.memory, 0);
	cr_assert_eq(st.ms.nops, st.kinds);
	for (int i = 0; i < st.kinds; i++) {
		cr_assert_str_eq(st.ms.op_names[i], st.names[i]);
		cr_assert_eq(st.ms.ops[i], st.ops[i]);
	}
	cr_assert_null(st.none.name);
	cr_assert_eq(uv_loop_close(&st.loop), 0);
}

/* ---- Clients that dribble ----------------------------------------------- */

struct dribble_loop {
	uv_loop_t loop;
	uv_async_t stop;
	struct metrics *m;
};

static void dribble_on_stop(uv_async_t *h)
{
	struct dribble_loop *d = h->data;

	metrics_close(d->m);
	uv_close((uv_handle_t *)h, NULL);
}

static void *dribble_run(void *data)
{
	struct dribble_loop *d = data;

	uv_run(&d->loop, UV_RUN_DEFAULT);
	return NULL;
}

/* Whether the server has closed fd (EOF or an error; not just quiet). */
static int peer_closed(int fd)
{
	char b[256];
	ssize_t n = recv(fd, b, sizeof(b), MSG_DONTWAIT);

	return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

/*
 * max_conns clients each send one header byte every 300 ms, which restarts
 * libmicrohttpd's own timeout every time: each must still be closed once
 * its request has not come in whole within idle_timeout (2 s), and /healthz
 * must then answer.
 */
Test(metrics, dribblers_closed, .timeout = 30)
{
	enum { N = 4 };
	struct metrics_opts o = {"127.0.0.1", 0, N, 2, fill, NULL};
	static const char req[] = "GET /healthz HTTP/1.1\r\nX-Slow: ";
	struct dribble_loop d;
	struct sockaddr_in sa;
	char err[256] = "", url[128], *body = NULL;
	int fd[N], open_n = N, sent = 0;
	pthread_t th;

	fill_state = "running";
	memset(&d, 0, sizeof(d));
	cr_assert_eq(uv_loop_init(&d.loop), 0);
	cr_assert_eq(metrics_new(&d.loop, &o, &d.m, err, sizeof(err)), 0,
		     "%s", err);
	uv_async_init(&d.loop, &d.stop, dribble_on_stop);
	d.stop.data = &d;
	cr_assert_eq(pthread_create(&th, NULL, dribble_run, &d), 0);
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)metrics_port(d.m));
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	for (int i = 0; i < N; i++) {
		fd[i] = socket(AF_INET, SOCK_STREAM, 0);
		cr_assert_eq(connect(fd[i], (struct sockaddr *)&sa, sizeof(sa)),
			     0);
	}
	/* Up to 8 s (4 x idle_timeout): one byte each per 300 ms. */
	for (int t = 0; t < 8000 / 300 && open_n > 0; t++) {
		char c = sent < (int)sizeof(req) - 1 ? req[sent] : 'a';

		sent++;
		open_n = 0;
		for (int i = 0; i < N; i++) {
			if (fd[i] < 0)
				continue;
			if (peer_closed(fd[i]) ||
			    send(fd[i], &c, 1, MSG_NOSIGNAL) != 1) {
				close(fd[i]);
				fd[i] = -1;
				continue;
			}
			open_n++;
		}
		usleep(300 * 1000);
	}
	for (int i = 0; i < N; i++)
		if (fd[i] >= 0)
			close(fd[i]);
	cr_expect_eq(open_n, 0,
		     "%d of %d dribbling clients still open after 8 s "
		     "(idle_timeout 2 s)",
		     open_n, N);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/healthz",
		 metrics_port(d.m));
	cr_expect_eq(http("GET", url, &body), 200);
	free(body);
	uv_async_send(&d.stop);
	pthread_join(th, NULL);
	cr_assert_eq(uv_loop_close(&d.loop), 0);
}

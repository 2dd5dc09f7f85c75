/*
 * The metrics server's bounds (agent/metrics.c, compiled in here as
 * test_metrics does) at their edges: max_conns connections are each served,
 * the one past them is not served while they are held and is taken once
 * a slot is given back; a connection whose request has not come in whole is kept for
 * 80% of idle_timeout and closed before twice it (waited for, bounded),
 * even while it dribbles bytes. At the defaults of --metrics_max_conns and
 * --metrics_idle_timeout (as the option table gives them) and set values.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../../agent/metrics.c"
#include "crun/cfg.h"

static void fill(void *data, struct metrics_snap *s)
{
	(void)data;
	snprintf(s->host, sizeof(s->host), "h");
	s->state = "running";
	s->reason = "";
}

struct srv {
	uv_loop_t loop;
	uv_async_t stop;
	struct metrics *m;
	pthread_t th;
};

static void on_stop(uv_async_t *h)
{
	struct srv *s = h->data;

	metrics_close(s->m);
	uv_close((uv_handle_t *)h, NULL);
}

static void *loop_run(void *data)
{
	struct srv *s = data;

	uv_run(&s->loop, UV_RUN_DEFAULT);
	return NULL;
}

/* A server with max_conns and idle_timeout, its loop on a thread. */
static void start(struct srv *s, int max_conns, int idle)
{
	struct metrics_opts o = {"127.0.0.1", 0, max_conns, idle, fill, NULL};
	char err[256] = "";

	memset(s, 0, sizeof(*s));
	cr_assert_eq(uv_loop_init(&s->loop), 0);
	cr_assert_eq(metrics_new(&s->loop, &o, &s->m, err, sizeof(err)), 0,
		     "%s", err);
	uv_async_init(&s->loop, &s->stop, on_stop);
	s->stop.data = s;
	cr_assert_eq(pthread_create(&s->th, NULL, loop_run, s), 0);
}

static void stop(struct srv *s)
{
	uv_async_send(&s->stop);
	pthread_join(s->th, NULL);
	cr_assert_eq(uv_loop_close(&s->loop), 0);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int dial(struct srv *s)
{
	struct sockaddr_in sa;
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)metrics_port(s->m));
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

/* Connections the server holds (its notify callback's list). */
static int held(struct srv *s)
{
	int n = 0;

	pthread_mutex_lock(&s->m->conns_lock);
	for (struct metrics_conn *mc = s->m->conns; mc != NULL; mc = mc->next)
		n++;
	pthread_mutex_unlock(&s->m->conns_lock);
	return n;
}

static void wait_held(struct srv *s, int n)
{
	for (int i = 0; i < 1000 && held(s) != n; i++)
		usleep(10 * 1000);
	cr_assert_eq(held(s), n, "the server holds %d connections, want %d",
		     held(s), n);
}

/* Whether fd is closed by the server within ms (EOF or reset). */
static int closed_within(int fd, int ms)
{
	struct pollfd pfd = {fd, POLLIN, 0};
	char b[512];

	if (ms < 0)
		ms = 0;
	if (poll(&pfd, 1, ms) <= 0)
		return 0;
	return recv(fd, b, sizeof(b), 0) <= 0;
}

/* A whole /healthz request on fd answers 200 (then the server closes). */
static void served(int fd)
{
	static const char req[] = "GET /healthz HTTP/1.0\r\n\r\n";
	char buf[4096];
	size_t len = 0;
	ssize_t n;

	cr_assert_eq(send(fd, req, sizeof(req) - 1, MSG_NOSIGNAL),
		     (ssize_t)sizeof(req) - 1);
	while (len < sizeof(buf) - 1) {
		struct pollfd pfd = {fd, POLLIN, 0};

		cr_assert_eq(poll(&pfd, 1, 10000), 1, "no answer in 10 s");
		n = recv(fd, buf + len, sizeof(buf) - 1 - len, 0);
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	buf[len] = '\0';
	cr_assert(strncmp(buf, "HTTP/1.0 200", 12) == 0 ||
		      strncmp(buf, "HTTP/1.1 200", 12) == 0,
		  "answer '%.40s'", buf);
}

/* Read an answer to a request already sent on fd: 200. */
static void answered(int fd)
{
	char buf[4096];
	size_t len = 0;
	ssize_t n;

	while (len < sizeof(buf) - 1) {
		struct pollfd pfd = {fd, POLLIN, 0};

		cr_assert_eq(poll(&pfd, 1, 10000), 1, "no answer in 10 s");
		n = recv(fd, buf + len, sizeof(buf) - 1 - len, 0);
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	buf[len] = '\0';
	cr_assert(strncmp(buf, "HTTP/1.0 200", 12) == 0 ||
		      strncmp(buf, "HTTP/1.1 200", 12) == 0,
		  "answer '%.40s'", buf);
}

/*
 * n connections are held; connection n + 1 is not served while they are
 * (libmicrohttpd leaves it in the listen backlog), and is taken and
 * answered once one of the n goes.
 */
static void conns_edge(int n)
{
	static const char req[] = "GET /healthz HTTP/1.0\r\n\r\n";
	struct srv s;
	int *fd = calloc((size_t)n, sizeof(*fd)), extra;
	struct pollfd pfd;

	start(&s, n, 30);
	for (int i = 0; i < n; i++)
		fd[i] = dial(&s);
	wait_held(&s, n);
	extra = dial(&s);
	cr_assert_eq(send(extra, req, sizeof(req) - 1, MSG_NOSIGNAL),
		     (ssize_t)sizeof(req) - 1);
	pfd = (struct pollfd){extra, POLLIN, 0};
	cr_assert_eq(poll(&pfd, 1, 1000), 0,
		     "connection %d was answered beside %d held", n + 1, n);
	cr_assert_eq(held(&s), n);
	/* One of the n is served and goes: the extra one is taken. */
	served(fd[0]);
	close(fd[0]);
	answered(extra);
	close(extra);
	for (int i = 1; i < n; i++) {
		served(fd[i]);
		close(fd[i]);
	}
	stop(&s);
	free(fd);
}

/* The defaults of the option table. */
static struct crun_cfg cfg;

static void load_defaults(void)
{
	char *argv[] = {(char *)"crun", (char *)"x.py", NULL};
	char *envp[] = {NULL};
	char err[512];
	int done = 0;

	cfg_init(&cfg);
	cr_assert_eq(cfg_parse_args(&cfg, 2, argv, &done, err, sizeof(err)),
		     0, "%s", err);
	cr_assert_eq(cfg_apply_env(&cfg, envp), 0);
	cr_assert_eq(cfg_finalize(&cfg, err, sizeof(err)), 0, "%s", err);
}

Test(limits_metrics, conns_default, .timeout = 60)
{
	load_defaults();
	cr_assert_eq(cfg.metrics_max_conns, 32);
	conns_edge(cfg.metrics_max_conns);
	cfg_release(&cfg);
}

Test(limits_metrics, conns_set, .timeout = 60) { conns_edge(3); }

/*
 * A connection that sends a partial request, then one byte every 300 ms
 * (restarting libmicrohttpd's own timeout each time): open at 80% of
 * idle_timeout, closed before twice it.
 */
static void idle_edge(int idle)
{
	static const char part[] = "GET /healthz HTTP/1.1\r\nX-Slow: ";
	struct srv s;
	double t0, t;
	int fd, closed = 0;

	start(&s, 4, idle);
	t0 = now_s();
	fd = dial(&s);
	cr_assert_eq(send(fd, part, sizeof(part) - 1, MSG_NOSIGNAL),
		     (ssize_t)sizeof(part) - 1);
	while (!closed && (t = now_s() - t0) < 2.0 * idle) {
		closed = closed_within(fd, 300);
		if (!closed && send(fd, "a", 1, MSG_NOSIGNAL) != 1)
			closed = 1;
		if (!closed)
			continue;
		t = now_s() - t0;
	}
	t = now_s() - t0;
	cr_assert(closed, "still open after %.1f s (idle_timeout %d s)", t,
		  idle);
	cr_assert_geq(t, 0.8 * idle, "closed after %.2f s (idle_timeout %d s)",
		      t, idle);
	cr_assert_lt(t, 1.95 * idle, "closed after %.2f s (idle_timeout %d s)",
		     t, idle);
	close(fd);
	/* The server still answers. */
	fd = dial(&s);
	served(fd);
	close(fd);
	stop(&s);
}

Test(limits_metrics, idle_default, .timeout = 60)
{
	load_defaults();
	cr_assert_eq(cfg.metrics_idle_timeout, 10);
	idle_edge(cfg.metrics_idle_timeout);
	cfg_release(&cfg);
}

Test(limits_metrics, idle_set, .timeout = 60) { idle_edge(3); }

/*
 * rdzv_store_open giving up: a refused endpoint (nothing listens) and a
 * silent one (accepts, never answers) end with distinct codes, which crun
 * status turns into exit 1 and 3.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include "crun/err.h"
#include "crun/peers.h"
#include "crun/rdzv_backend.h"
#include "crun/rdzv_store.h"

struct run {
	int status, done, closed;
};

static void on_open(struct crun_rdzv_store *s, int status, void *data)
{
	struct run *r = data;

	r->status = status;
	r->done = 1;
}

static void on_closed(void *data)
{
	((struct run *)data)->closed = 1;
}

/* Never accepted: the connection is made and never answered. */
static void on_connection(uv_stream_t *server, int status)
{
}

/* A loopback port: listening (silent) when keep, else closed (refused). */
static int loopback_port(uv_loop_t *loop, uv_tcp_t *t, int keep)
{
	struct sockaddr_in a;
	struct sockaddr_storage got;
	int len = sizeof(got);

	uv_ip4_addr("127.0.0.1", 0, &a);
	cr_assert_eq(uv_tcp_init(loop, t), 0);
	cr_assert_eq(uv_tcp_bind(t, (const struct sockaddr *)&a, 0), 0);
	if (keep)
		cr_assert_eq(uv_listen((uv_stream_t *)t, 8, on_connection), 0);
	cr_assert_eq(uv_tcp_getsockname(t, (struct sockaddr *)&got, &len), 0);
	if (!keep)
		uv_close((uv_handle_t *)t, NULL);
	return ntohs(((struct sockaddr_in *)&got)->sin_port);
}

/* Open the rendezvous store of 127.0.0.1:port on loop. */
static struct crun_rdzv_store *open_on(uv_loop_t *loop, int port, int is_host,
				       int timeout_ms, struct run *r)
{
	static struct crun_store_limits lim;
	struct rdzv_store_opts o;
	struct crun_rdzv_store *s = NULL;
	char errmsg[256] = "";

	store_limits_default(&lim);
	memset(&o, 0, sizeof(o));
	o.host = "127.0.0.1";
	o.port = port;
	o.is_host = is_host;
	o.timeout_ms = timeout_ms;
	o.limits = &lim;
	o.errmsg = errmsg;
	o.errlen = sizeof(errmsg);
	cr_assert_eq(rdzv_store_open(loop, &o, on_open, r, &s), 0, "%s",
		     errmsg);
	return s;
}

static int open_status(int silent)
{
	uv_loop_t loop;
	uv_tcp_t t;
	struct crun_rdzv_store *s;
	struct run r = {0, 0, 0};

	cr_assert_eq(uv_loop_init(&loop), 0);
	s = open_on(&loop, loopback_port(&loop, &t, silent), 0, 1500, &r);
	while (!r.done && uv_run(&loop, UV_RUN_ONCE))
		;
	cr_assert(r.done);
	rdzv_store_close(s, on_closed, &r);
	while (!r.closed && uv_run(&loop, UV_RUN_ONCE))
		;
	rdzv_store_free(s);
	if (silent)
		uv_close((uv_handle_t *)&t, NULL);
	uv_run(&loop, UV_RUN_DEFAULT);
	uv_loop_close(&loop);
	return r.status;
}

Test(rdzv_store_open, refused_and_silent_endpoints_have_distinct_codes,
     .timeout = 30)
{
	int refused = open_status(0), silent = open_status(1);

	cr_expect_eq(refused, CRUN_EREFUSED, "refused: %s",
		     crun_err_name(refused));
	cr_expect_neq(silent, CRUN_EREFUSED, "silent: %s",
		      crun_err_name(silent));
	cr_expect_neq(silent, 0);
}

/* Every walk over /proc's processes in this process (rdzv_store.c's). */
static int proc_walks;

DIR *opendir(const char *path)
{
	static DIR *(*real)(const char *);

	if (real == NULL)
		*(void **)&real = dlsym(RTLD_NEXT, "opendir");
	if (strcmp(path, "/proc") == 0)
		proc_walks++;
	return real(path);
}

/* Every read of the host's TCP table (/proc/net/tcp*) in this process. */
static int tcp_table_reads;

FILE *fopen(const char *path, const char *mode)
{
	static FILE *(*real)(const char *, const char *);

	if (real == NULL)
		*(void **)&real = dlsym(RTLD_NEXT, "fopen");
	if (strncmp(path, "/proc/net/tcp", 13) == 0)
		tcp_table_reads++;
	return real(path, mode);
}

static void on_stop(uv_timer_t *t)
{
	uv_stop(t->loop);
}

/*
 * An agent that should host the store but finds its port held by a silent
 * crun (a store host too busy to answer: a loaded machine of many agents)
 * names the holder once, not at every tick: each naming reads the host's
 * TCP table and scans every process's descriptors.
 */
Test(rdzv_store_open, silent_crun_holder_is_named_once, .timeout = 30)
{
	uv_loop_t loop;
	uv_tcp_t t;
	uv_timer_t stop;
	struct crun_rdzv_store *s;
	struct run r = {0, 0, 0};

	/* The holder (this process) looks like a crun. */
	cr_assert_eq(prctl(PR_SET_NAME, "crun"), 0);
	cr_assert_eq(uv_loop_init(&loop), 0);
	/* Local: would host, but the port is taken. */
	s = open_on(&loop, loopback_port(&loop, &t, 1), -1, 60000, &r);
	/* Ticks 1 to 6: silent from the 3rd on. */
	uv_timer_init(&loop, &stop);
	uv_timer_start(&stop, on_stop, 6500, 0);
	uv_run(&loop, UV_RUN_DEFAULT);
	cr_expect_not(r.done, "gave up on a crun holder: %s",
		      crun_err_name(r.status));
	cr_expect_eq(proc_walks, 1, "the holder was named %d times",
		     proc_walks);
	rdzv_store_close(s, on_closed, &r);
	while (!r.closed && uv_run(&loop, UV_RUN_ONCE))
		;
	rdzv_store_free(s);
	uv_close((uv_handle_t *)&t, NULL);
	uv_close((uv_handle_t *)&stop, NULL);
	uv_run(&loop, UV_RUN_DEFAULT);
	uv_loop_close(&loop);
}

/* Which endpoints this machine hosts: loopback, its names, its addresses. */
Test(rdzv_store_open, host_is_local, .timeout = 10)
{
	char own[256], name[256];

	cr_expect(rdzv_host_is_local("127.0.0.1"));
	cr_expect(rdzv_host_is_local("127.3.2.1"));
	cr_expect(rdzv_host_is_local("::1"));
	cr_expect(rdzv_host_is_local("localhost"));
	cr_assert_eq(gethostname(name, sizeof(name)), 0);
	cr_expect(rdzv_host_is_local(name));
	cr_expect_not(rdzv_host_is_local("192.0.2.77"));
	cr_expect_not(rdzv_host_is_local("2001:db8::77"));
	/* An interface address of ours (no loopback among them). */
	cr_assert_gt(peers_own_addrs(own, sizeof(own)), 0,
		     "this test needs an address other than loopback");
	*strchrnul(own, ',') = '\0';
	cr_expect(rdzv_host_is_local(own), "%s", own);
}

static char cas_got[64];
static int cas_done;

static void on_cas(struct crun_store_aclient *c, int status,
		   const struct crun_store_reply *rep, void *data)
{
	if (status == 0)
		snprintf(cas_got, sizeof(cas_got), "%.*s", (int)rep->len,
			 (const char *)rep->value);
	cas_done = 1;
}

static void on_connected(struct crun_store_aclient *c, int status, void *data)
{
}

/*
 * Two jobs on one endpoint: the store host's job is the endpoint's, even
 * when the other job's first request is the first the store serves (a
 * client that reaches the port before the host's own rendezvous asks).
 */
Test(rdzv_store_open, the_host_s_job_is_the_endpoint_s, .timeout = 30)
{
	uv_loop_t loop;
	uv_tcp_t t;
	struct crun_store_limits lim;
	struct rdzv_backend_opts bo;
	struct crun_rdzv_store *s = NULL;
	struct crun_store_aclient *c = NULL;
	struct run r = {0, 0, 0};
	char endpoint[64], errmsg[256] = "";
	int port;

	cr_assert_eq(uv_loop_init(&loop), 0);
	port = loopback_port(&loop, &t, 0);
	snprintf(endpoint, sizeof(endpoint), "127.0.0.1:%d", port);
	store_limits_default(&lim);
	memset(&bo, 0, sizeof(bo));
	bo.kind = RDZV_BACKEND_C10D;
	bo.endpoint = endpoint;
	bo.run_id = "first";
	bo.is_host = 1;
	bo.timeout = 10;
	bo.limits = &lim;
	bo.errmsg = errmsg;
	bo.errlen = sizeof(errmsg);
	cr_assert_eq(rdzv_backend_open(&loop, &bo, on_open, NULL, &r, &s, NULL),
		     0, "%s", errmsg);
	/* Queued before the loop turns once: the first request served. */
	cr_assert_eq(store_aclient_new(&loop, "127.0.0.1", port, 5000,
				       on_connected, NULL, &c),
		     0);
	cr_assert_eq(store_aclient_compare_set(c, "crun/job", "", 0, "second",
					       6, on_cas, NULL),
		     0);
	while (!cas_done && uv_run(&loop, UV_RUN_ONCE))
		;
	cr_expect_str_eq(cas_got, "first");
	store_aclient_close(c, NULL, NULL);
	rdzv_store_close(s, on_closed, &r);
	while (!r.closed && uv_run(&loop, UV_RUN_ONCE))
		;
	rdzv_store_free(s);
	uv_run(&loop, UV_RUN_DEFAULT);
	uv_loop_close(&loop);
}

/*
 * The process listening on a port is named, from sock_diag's listeners: not
 * by reading the host's whole TCP table (thousands of TIME_WAIT rows after
 * a large job, read by a store host before it served anyone).
 */
Test(rdzv_store_open, port_holder_is_named, .timeout = 10)
{
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);
	char who[128], want[64];
	int ls = socket(AF_INET, SOCK_STREAM, 0);

	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert_eq(bind(ls, (struct sockaddr *)&sin, sizeof(sin)), 0);
	cr_assert_eq(listen(ls, 1), 0);
	cr_assert_eq(getsockname(ls, (struct sockaddr *)&sin, &len), 0);
	tcp_table_reads = 0;
	rdzv_port_holder(ntohs(sin.sin_port), who, sizeof(who));
	snprintf(want, sizeof(want), "pid %d (", (int)getpid());
	cr_assert(strncmp(who, want, strlen(want)) == 0, "named '%s'", who);
	cr_assert_eq(tcp_table_reads, 0, "the TCP table read %d times", tcp_table_reads);
	close(ls);
	rdzv_port_holder(ntohs(sin.sin_port), who, sizeof(who));
	cr_assert_str_eq(who, "");
}

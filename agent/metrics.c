/*
 * The metrics server: /healthz and /metrics for each agent (--metrics_port).
 *
 * Happy path: metrics_new binds and listens itself (so a busy port or a bad
 * address is one clear line before anything runs), hands the socket to a
 * libmicrohttpd daemon with its own polling thread, and starts the module's
 * one timer. Every METRICS_TICK_MS the loop asks the agent to fill a
 * snapshot (struct metrics_snap: plain data, no pointers into the agent but
 * static strings) and copies it under the mutex; the daemon's thread copies
 * it out under the same mutex and renders text from the copy. Neither side
 * ever holds the mutex for more than a struct copy, so a scrape never waits
 * on the loop and the loop never waits on a scrape.
 *
 * Failure modes: the port is taken or the address does not resolve (an
 * error from metrics_new, nothing listening); a client that connects and
 * says nothing is closed after idle_timeout seconds by libmicrohttpd, and
 * one whose request is not in whole idle_timeout seconds after it connected
 * (or after its previous request), a dribbler, by the tick; clients
 * beyond max_conns (the daemon's CONNECTION_LIMIT) are not served until a
 * slot is given back (they wait in the listen backlog), and
 * each connection's memory is bounded (CONNECTION_MEMORY_LIMIT: an
 * oversized request line or header gets an error reply and a close);
 * garbage gets libmicrohttpd's 400; methods other than GET and HEAD get 405;
 * rendering out of memory answers 500. None of it reaches the agent's loop.
 * metrics_close joins the thread (closing every connection) before freeing.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <microhttpd.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "crun/err.h"
#include "crun/store.h"
#include "metrics.h"

/* How often the loop publishes a fresh snapshot. */
#define METRICS_TICK_MS 250
/* Bytes one connection may hold for its request (headers and all). */
#define METRICS_CONN_MEMORY 16384

#ifndef CRUN_VERSION
#define CRUN_VERSION "?"
#endif

/*
 * One client connection, from libmicrohttpd's STARTED notice to its CLOSED
 * one: the time by which its next request must have arrived whole.
 */
struct metrics_conn {
	struct metrics_conn *prev, *next; /* metrics.conns */
	int fd;
	int shut;	   /* its deadline passed: shut down */
	uint64_t deadline; /* CLOCK_MONOTONIC ms */
};

struct metrics {
	uv_timer_t tick;
	struct MHD_Daemon *daemon;
	int port;
	metrics_fill_cb fill;
	void *data;
	/* Kept on the loop (metrics_note_*), copied into each snapshot. */
	uint64_t failures, node_losses, stalls;
	double last_failure;
	int last_exit_code;
	pthread_mutex_t lock; /* guards pub */
	struct metrics_snap pub;
	/* The open connections (guarded by conns_lock): libmicrohttpd's own
	 * timeout restarts on every byte, so a client dribbling one header
	 * byte now and then would hold a slot for ever; the tick shuts down
	 * those whose request is not in whole by their deadline. */
	pthread_mutex_t conns_lock;
	struct metrics_conn *conns;
	uint64_t idle_ms;
};

static uint64_t metrics_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static const char *const metrics_states[] = {"rendezvous", "running",
					     "stopping", "failed", "done"};

int metrics_healthy(const char *state)
{
	return state != NULL && (strcmp(state, "rendezvous") == 0 ||
				 strcmp(state, "running") == 0);
}

/* ---- Rendering (pure) ------------------------------------------------- */

/* A label value with \, " and newlines escaped, as the format asks. */
static void put_label(FILE *fp, const char *s)
{
	for (; s && *s; s++) {
		if (*s == '\\')
			fputs("\\\\", fp);
		else if (*s == '"')
			fputs("\\\"", fp);
		else if (*s == '\n')
			fputs("\\n", fp);
		else
			fputc(*s, fp);
	}
}

/* The HELP and TYPE lines of one metric family. */
static void family(FILE *fp, const char *name, const char *type,
		   const char *help)
{
	fprintf(fp, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A family with one sample and no labels. */
static void single(FILE *fp, const char *name, const char *type,
		   const char *help, double v)
{
	family(fp, name, type, help);
	fprintf(fp, "%s %.17g\n", name, v);
}

/* One family with a sample per store this agent hosts. */
static void store_family(FILE *fp, const struct metrics_snap *s,
			 const char *name, const char *help, size_t which)
{
	family(fp, name, "gauge", help);
	for (int i = 0; i < 2; i++) {
		const struct metrics_store *st = &s->stores[i];
		size_t v = which == 0	? st->conns
			   : which == 1 ? st->keys
			   : which == 2 ? st->memory
					: st->waiters;

		if (st->name)
			fprintf(fp, "%s{store=\"%s\"} %zu\n", name, st->name,
				v);
	}
}

char *metrics_render(const struct metrics_snap *s, double now, size_t *len)
{
	char *text = NULL;
	size_t n = 0;
	FILE *fp = open_memstream(&text, &n);
	int has_store = s->stores[0].name || s->stores[1].name;

	if (fp == NULL)
		return NULL;
	family(fp, "crun_agent_info", "gauge",
	       "The agent: host, run id, rendezvous backend and version.");
	fputs("crun_agent_info{host=\"", fp);
	put_label(fp, s->host);
	fputs("\",run_id=\"", fp);
	put_label(fp, s->run_id);
	fputs("\",backend=\"", fp);
	put_label(fp, s->backend);
	fputs("\",version=\"" CRUN_VERSION "\"} 1\n", fp);
	single(fp, "crun_agent_start_time_seconds", "gauge",
	       "When the agent started, in seconds since the epoch.",
	       s->started);
	family(fp, "crun_agent_state", "gauge",
	       "1 for the agent's state: rendezvous, running, stopping, "
	       "failed (stopping after a worker failure) or done.");
	for (size_t i = 0; i < sizeof(metrics_states) / sizeof(*metrics_states);
	     i++)
		fprintf(fp, "crun_agent_state{state=\"%s\"} %d\n",
			metrics_states[i],
			s->state && strcmp(s->state, metrics_states[i]) == 0);
	single(fp, "crun_agent_healthy", "gauge",
	       "1 while /healthz answers 200 (rendezvous or running).",
	       metrics_healthy(s->state));
	family(fp, "crun_workers", "gauge",
	       "This node's workers of the current round, by state.");
	fprintf(fp,
		"crun_workers{state=\"running\"} %d\n"
		"crun_workers{state=\"succeeded\"} %d\n"
		"crun_workers{state=\"failed\"} %d\n"
		"crun_workers{state=\"stopped\"} %d\n",
		s->running, s->succeeded, s->failed, s->stopped);
	single(fp, "crun_restarts_total", "counter",
	       "Worker-group restarts used (job-wide on several nodes).",
	       s->restarts_used);
	single(fp, "crun_restarts_left", "gauge",
	       "Worker-group restarts left before the job fails.",
	       s->restarts_left);
	single(fp, "crun_max_restarts", "gauge", "--max_restarts.",
	       s->max_restarts);
	if (s->formed) {
		single(fp, "crun_rdzv_round", "gauge",
		       "The rendezvous round this node last joined.", s->round);
		single(fp, "crun_rdzv_generation", "gauge",
		       "The group's generation (TORCHELASTIC_RESTART_COUNT).",
		       s->generation);
		single(fp, "crun_group_rank", "gauge",
		       "This node's rank in the group (GROUP_RANK).",
		       s->group_rank);
		single(fp, "crun_group_world_size", "gauge",
		       "Nodes in the group.", s->group_world_size);
		single(fp, "crun_world_size", "gauge",
		       "Workers in the group (WORLD_SIZE).", s->world_size);
		single(fp, "crun_local_world_size", "gauge",
		       "Workers on this node (LOCAL_WORLD_SIZE).",
		       s->local_world_size);
		single(fp, "crun_base_rank", "gauge",
		       "RANK of this node's local rank 0.", s->base_rank);
	}
	single(fp, "crun_nodes_excluded", "gauge",
	       "Nodes left out after repeated failures (exclude_after).",
	       s->nexcluded);
	if (s->nexcluded > 0) {
		family(fp, "crun_node_excluded_until_seconds", "gauge",
		       "When a left-out node may rejoin, in seconds since the "
		       "epoch.");
		for (int i = 0; i < s->nexcluded; i++) {
			fputs("crun_node_excluded_until_seconds{host=\"", fp);
			put_label(fp, s->excluded[i].host);
			fputs("\",addr=\"", fp);
			put_label(fp, s->excluded[i].addr);
			fprintf(fp, "\"} %lld\n",
				(long long)s->excluded[i].until);
		}
	}
	single(fp, "crun_node_losses_total", "counter",
	       "Rounds ended by the loss of another node.",
	       (double)s->node_losses);
	single(fp, "crun_worker_failures_total", "counter",
	       "Workers of this node that failed.", (double)s->failures);
	single(fp, "crun_stalls_total", "counter",
	       "Rounds ended because no rank progressed (--stall_timeout).",
	       (double)s->stalls);
	if (s->last_failure > 0) {
		double age = now - s->last_failure;

		single(fp, "crun_last_failure_age_seconds", "gauge",
		       "Seconds since the last worker failure of the job "
		       "(on any node).",
		       age > 0 ? age : 0);
		single(fp, "crun_last_failure_timestamp_seconds", "gauge",
		       "When that failure happened or was reported here "
		       "(epoch seconds).",
		       s->last_failure);
		single(fp, "crun_last_failure_exit_code", "gauge",
		       "The exit code of that failure (128 + signal when "
		       "killed).",
		       s->last_exit_code);
	}
	if (has_store) {
		store_family(fp, s, "crun_store_connections",
			     "Open connections to a store this agent hosts.",
			     0);
		store_family(fp, s, "crun_store_keys", "Keys with a value.", 1);
		store_family(fp, s, "crun_store_memory_bytes",
			     "Bytes held (keys, values, buffers), counted "
			     "against --store_max_memory.",
			     2);
		store_family(fp, s, "crun_store_waiters",
			     "Requests parked in WAIT or BARRIER.", 3);
		family(fp, "crun_store_operations_total", "counter",
		       "Requests a store served, by operation.");
		for (int i = 0; i < 2; i++) {
			const struct metrics_store *st = &s->stores[i];

			for (int k = 0; st->name && k < st->nops; k++)
				fprintf(fp,
					"crun_store_operations_total{store="
					"\"%s\",op=\"%s\"} %llu\n",
					st->name, st->op_names[k],
					(unsigned long long)st->ops[k]);
		}
	}
	if (fclose(fp) != 0) {
		free(text);
		return NULL;
	}
	*len = n;
	return text;
}

char *metrics_health(const struct metrics_snap *s, double now, size_t *len)
{
	json_t *o = json_pack(
	    "{s:s, s:b, s:s, s:s, s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:i}",
	    "status", s->state ? s->state : "?", "healthy",
	    metrics_healthy(s->state), "reason", s->reason ? s->reason : "",
	    "host", s->host, "run_id", s->run_id, "round",
	    s->formed ? s->round : -1, "generation",
	    s->formed ? s->generation : -1, "group_rank",
	    s->formed ? s->group_rank : -1, "group_world_size",
	    s->formed ? s->group_world_size : 0, "workers_running", s->running,
	    "restarts_used", s->restarts_used, "restarts_left",
	    s->restarts_left);
	char *text, *out;
	size_t n;

	if (o == NULL)
		return NULL;
	if (s->last_failure > 0)
		json_object_set_new(
		    o, "last_failure_age",
		    json_real(floor((now - s->last_failure) * 1000) / 1000));
	text = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	if (text == NULL)
		return NULL;
	/* One line, newline-terminated, in memory plain free() releases. */
	n = strlen(text);
	out = malloc(n + 2);
	if (out) {
		memcpy(out, text, n);
		out[n] = '\n';
		out[n + 1] = '\0';
		*len = n + 1;
	}
	free(text);
	return out;
}

/* ---- The server (libmicrohttpd's thread) ------------------------------ */

static double wall_time(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Queue body (malloc'd, or NULL: 500) with code and content type. */
static enum MHD_Result reply(struct MHD_Connection *conn, unsigned code,
			     char *body, size_t len, const char *ctype)
{
	static char oom[] = "out of memory\n";
	struct MHD_Response *r;
	enum MHD_Result ret;

	if (body == NULL) {
		code = MHD_HTTP_INTERNAL_SERVER_ERROR;
		r = MHD_create_response_from_buffer(strlen(oom), oom,
						    MHD_RESPMEM_PERSISTENT);
		ctype = "text/plain";
	} else {
		r = MHD_create_response_from_buffer(len, body,
						    MHD_RESPMEM_MUST_FREE);
	}
	if (r == NULL) {
		free(body);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
	MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	if (code == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
	ret = MHD_queue_response(conn, code, r);
	MHD_destroy_response(r);
	return ret;
}

static char *dup_text(const char *s, size_t *len)
{
	*len = strlen(s);
	return strdup(s);
}

/*
 * A connection opened or closed, on the daemon's thread. Its socket is
 * closed only after CLOSED, so the tick never shuts down a reused fd.
 */
static void metrics_on_conn(void *cls, struct MHD_Connection *conn,
			    void **socket_context,
			    enum MHD_ConnectionNotificationCode toe)
{
	struct metrics *m = cls;
	struct metrics_conn *mc = *socket_context;
	const union MHD_ConnectionInfo *ci;

	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		ci = MHD_get_connection_info(conn,
					     MHD_CONNECTION_INFO_CONNECTION_FD);
		if (ci == NULL || (mc = calloc(1, sizeof(*mc))) == NULL)
			return; /* only libmicrohttpd's timeout then */
		mc->fd = ci->connect_fd;
		mc->deadline = metrics_now_ms() + m->idle_ms;
		pthread_mutex_lock(&m->conns_lock);
		mc->next = m->conns;
		if (m->conns != NULL)
			m->conns->prev = mc;
		m->conns = mc;
		pthread_mutex_unlock(&m->conns_lock);
		*socket_context = mc;
		return;
	}
	if (mc == NULL)
		return;
	pthread_mutex_lock(&m->conns_lock);
	if (mc->prev != NULL)
		mc->prev->next = mc->next;
	else
		m->conns = mc->next;
	if (mc->next != NULL)
		mc->next->prev = mc->prev;
	pthread_mutex_unlock(&m->conns_lock);
	free(mc);
	*socket_context = NULL;
}

/* A request arrived whole on conn: the next one has idle_timeout again. */
static void metrics_conn_renew(struct metrics *m, struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	struct metrics_conn *mc = ci != NULL ? ci->socket_context : NULL;

	if (mc == NULL)
		return;
	pthread_mutex_lock(&m->conns_lock);
	mc->deadline = metrics_now_ms() + m->idle_ms;
	pthread_mutex_unlock(&m->conns_lock);
}

/* On the loop: shut down the connections past their deadline (at most
 * max_conns of them; libmicrohttpd then sees the end and closes them). */
static void metrics_reap(struct metrics *m)
{
	uint64_t now = metrics_now_ms();
	struct metrics_conn *mc;

	pthread_mutex_lock(&m->conns_lock);
	for (mc = m->conns; mc != NULL; mc = mc->next)
		if (!mc->shut && now >= mc->deadline) {
			shutdown(mc->fd, SHUT_RDWR);
			mc->shut = 1;
		}
	pthread_mutex_unlock(&m->conns_lock);
}

/* One request, on the daemon's thread: answer from the published copy. */
static enum MHD_Result
metrics_on_request(void *cls, struct MHD_Connection *conn, const char *url,
		   const char *method, const char *version,
		   const char *upload_data, size_t *upload_size, void **req_cls)
{
	struct metrics *m = cls;
	struct metrics_snap s;
	size_t len = 0;
	char *body;

	(void)version;
	(void)upload_data;
	(void)upload_size;
	(void)req_cls;
	metrics_conn_renew(m, conn);
	if (strcmp(method, MHD_HTTP_METHOD_GET) &&
	    strcmp(method, MHD_HTTP_METHOD_HEAD))
		return reply(conn, MHD_HTTP_METHOD_NOT_ALLOWED,
			     dup_text("only GET and HEAD\n", &len), len,
			     "text/plain");
	pthread_mutex_lock(&m->lock);
	s = m->pub;
	pthread_mutex_unlock(&m->lock);
	if (strcmp(url, "/metrics") == 0) {
		body = metrics_render(&s, wall_time(), &len);
		return reply(conn, MHD_HTTP_OK, body, len,
			     "text/plain; version=0.0.4; charset=utf-8");
	}
	if (strcmp(url, "/healthz") == 0) {
		body = metrics_health(&s, wall_time(), &len);
		return reply(conn,
			     metrics_healthy(s.state)
				 ? MHD_HTTP_OK
				 : MHD_HTTP_SERVICE_UNAVAILABLE,
			     body, len, "application/json");
	}
	if (strcmp(url, "/") == 0)
		return reply(conn, MHD_HTTP_OK,
			     dup_text("crun agent: /metrics /healthz\n", &len),
			     len, "text/plain");
	return reply(conn, MHD_HTTP_NOT_FOUND, dup_text("not found\n", &len),
		     len, "text/plain");
}

/* ---- The loop side ---------------------------------------------------- */

void metrics_store_fill(struct metrics_store *ms, const char *name,
			const struct crun_store_server *srv)
{
	struct crun_store_stats st;
	const char *op;
	uint64_t n;

	if (srv == NULL)
		return;
	store_server_stats(srv, &st);
	ms->name = name;
	ms->conns = st.conns;
	ms->keys = st.keys;
	ms->memory = st.memory;
	ms->waiters = st.waiters;
	for (ms->nops = 0; ms->nops < METRICS_MAX_OPS; ms->nops++) {
		n = store_server_ops(srv, ms->nops, &op);
		if (op == NULL)
			break;
		ms->op_names[ms->nops] = op;
		ms->ops[ms->nops] = n;
	}
}

void metrics_update(struct metrics *m)
{
	struct metrics_snap s;

	if (m == NULL)
		return;
	memset(&s, 0, sizeof(s));
	m->fill(m->data, &s);
	s.failures = m->failures;
	s.node_losses = m->node_losses;
	s.stalls = m->stalls;
	s.last_failure = m->last_failure;
	s.last_exit_code = m->last_exit_code;
	pthread_mutex_lock(&m->lock);
	m->pub = s;
	pthread_mutex_unlock(&m->lock);
}

static void metrics_on_tick(uv_timer_t *t)
{
	metrics_update(t->data);
	metrics_reap(t->data);
}

void metrics_note_failure(struct metrics *m, int code, double t, int local)
{
	if (m == NULL)
		return;
	m->failures += local != 0;
	m->last_failure = t;
	m->last_exit_code = code;
	metrics_update(m);
}

void metrics_note_node_lost(struct metrics *m)
{
	if (m == NULL)
		return;
	m->node_losses++;
	metrics_update(m);
}

void metrics_note_stall(struct metrics *m)
{
	if (m == NULL)
		return;
	m->stalls++;
	metrics_update(m);
}

int metrics_port(const struct metrics *m)
{
	return m->port;
}

/* Bind and listen on addr:port; the socket, or a negative error. */
static int metrics_listen(const char *addr, int port, int *family, int *bound,
			  char *errmsg, size_t errlen)
{
	struct addrinfo hints, *ai = NULL;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char service[16];
	int fd = -1, one = 1, rc;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE | AI_NUMERICHOST;
	snprintf(service, sizeof(service), "%d", port);
	rc = getaddrinfo(addr, service, &hints, &ai);
	if (rc) {
		snprintf(errmsg, errlen, "--metrics_addr '%s': %s", addr,
			 gai_strerror(rc));
		return CRUN_ECONFIG;
	}
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, (const void *)&one,
		       sizeof(one)) ||
	    bind(fd, ai->ai_addr, ai->ai_addrlen) || listen(fd, 64) ||
	    getsockname(fd, (struct sockaddr *)&ss, &sl)) {
		rc = -errno;
		snprintf(errmsg, errlen, "cannot serve metrics on '%s:%d': %s",
			 addr, port, strerror(errno));
		goto fail;
	}
	*family = ai->ai_family;
	*bound = ntohs(ss.ss_family == AF_INET6
			   ? ((struct sockaddr_in6 *)&ss)->sin6_port
			   : ((struct sockaddr_in *)&ss)->sin_port);
	freeaddrinfo(ai);
	return fd;
fail:
	if (fd >= 0)
		close(fd);
	freeaddrinfo(ai);
	return rc;
}

int metrics_new(uv_loop_t *loop, const struct metrics_opts *o,
		struct metrics **out, char *errmsg, size_t errlen)
{
	struct metrics *m = calloc(1, sizeof(*m));
	sigset_t all, old;
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO;
	int fd = -1, family = AF_INET, rc;

	if (m == NULL)
		return UV_ENOMEM;
	m->fill = o->fill;
	m->data = o->data;
	fd =
	    metrics_listen(o->addr, o->port, &family, &m->port, errmsg, errlen);
	if (fd < 0) {
		rc = fd;
		goto fail;
	}
	if (family == AF_INET6)
		flags |= MHD_USE_IPv6;
	pthread_mutex_init(&m->lock, NULL);
	pthread_mutex_init(&m->conns_lock, NULL);
	m->idle_ms = (uint64_t)o->idle_timeout * 1000;
	metrics_update(m);
	/* The daemon's thread takes no signal: they belong to the loop. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	m->daemon = MHD_start_daemon(
	    flags, 0, NULL, NULL, metrics_on_request, m,
	    MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_LIMIT,
	    (unsigned)o->max_conns, MHD_OPTION_CONNECTION_TIMEOUT,
	    (unsigned)o->idle_timeout, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
	    (size_t)METRICS_CONN_MEMORY, MHD_OPTION_NOTIFY_CONNECTION,
	    metrics_on_conn, m, MHD_OPTION_END);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (m->daemon == NULL) {
		snprintf(errmsg, errlen,
			 "cannot start the metrics server on '%s:%d'", o->addr,
			 m->port);
		rc = UV_EIO;
		pthread_mutex_destroy(&m->lock);
		pthread_mutex_destroy(&m->conns_lock);
		goto fail;
	}
	uv_timer_init(loop, &m->tick);
	m->tick.data = m;
	uv_timer_start(&m->tick, metrics_on_tick, METRICS_TICK_MS,
		       METRICS_TICK_MS);
	*out = m;
	return 0;
fail:
	if (fd >= 0)
		close(fd);
	free(m);
	return rc;
}

static void metrics_on_closed(uv_handle_t *h)
{
	struct metrics *m = h->data;

	pthread_mutex_destroy(&m->lock);
	pthread_mutex_destroy(&m->conns_lock);
	free(m);
}

void metrics_close(struct metrics *m)
{
	if (m == NULL)
		return;
	/* Joins the daemon's thread: no request runs after this. */
	MHD_stop_daemon(m->daemon);
	m->daemon = NULL;
	uv_close((uv_handle_t *)&m->tick, metrics_on_closed);
}

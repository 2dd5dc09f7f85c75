/*
 * The store server: PyTorch's TCPStore semantics on a libuv loop, for both
 * wire generations at once (each connection is G0 or G3 from its first five
 * bytes, see store_wire.c). One flat map from keys to entries holds values,
 * the connections waiting on each key, libuv-style queues and G0 watchers.
 *
 * The server is four files around one private header (store_internal.h),
 * each calling only the ones after it: this one, the owner (its life
 * cycle, its accessors, in-process access), store_conn.c (connections,
 * backpressure, auth), store_cmd.c (one function per operation, in a table
 * indexed by opcode) and store_keys.c (the keyspace and the waiters). A
 * connection's handle closing is told back through srv->handle_closed.
 */
#include <arpa/inet.h>
#include <netdb.h>
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include <uv.h>

#include "crun/err.h"
#include "store_fanout.h"
#include "store_internal.h"

/* Period of the idle check, at most. */
#define STORE_TICK_MS 1000

void store_limits_default(struct crun_store_limits *lim)
{
	lim->max_key = CRUN_STORE_MAX_KEY;
	lim->max_value = CRUN_STORE_MAX_VALUE;
	lim->max_keys = CRUN_STORE_MAX_KEYS;
	lim->max_memory = CRUN_STORE_MAX_MEMORY;
	lim->max_conns = CRUN_STORE_MAX_CONNS;
	lim->max_output = CRUN_STORE_MAX_OUTPUT;
	lim->idle_timeout = CRUN_STORE_IDLE_TIMEOUT;
}

size_t store_limits_max_frame(const struct crun_store_limits *lim)
{
	return 2 * lim->max_value + lim->max_key + 64;
}

/* ---- Server lifecycle -------------------------------------------------- */

/* Raise RLIMIT_NOFILE's soft limit to the hard one (thousands of clients). */
static void store_raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &rl);
	}
}

static void store_server_handle_closed(struct crun_store_server *srv);

/* Allocate a server with its listener initialised but not bound. */
static struct crun_store_server *
store_server_alloc(uv_loop_t *loop, const struct crun_store_limits *lim)
{
	struct crun_store_server *srv = calloc(1, sizeof(*srv));

	if (srv == NULL)
		return NULL;
	if ((srv->rbuf = malloc(STORE_RBUF_SIZE)) == NULL) {
		free(srv);
		return NULL;
	}
	srv->loop = loop;
	if (lim != NULL)
		srv->lim = *lim;
	else
		store_limits_default(&srv->lim);
	srv->max_frame = store_limits_max_frame(&srv->lim);
	map_init(&srv->map);
	uv_tcp_init(loop, &srv->listener);
	srv->listener.data = srv;
	uv_timer_init(loop, &srv->tick);
	srv->tick.data = srv;
	uv_check_init(loop, &srv->reaper);
	srv->reaper.data = srv;
	srv->nhandles = 3;
	srv->handle_closed = store_server_handle_closed;
	store_raise_nofile();
	return srv;
}

/* Start listening and record the port; 0 or an error. */
static int store_server_listen(struct crun_store_server *srv)
{
	struct sockaddr_storage ss;
	int len = sizeof(ss), rc;

	/* The kernel caps the backlog at net.core.somaxconn: the most it
	 * grants. */
	rc = uv_listen((uv_stream_t *)&srv->listener, INT_MAX,
		       store__on_connection);
	if (rc != 0)
		return rc;
	if (srv->lim.idle_timeout > 0) {
		uint64_t ms = (uint64_t)srv->lim.idle_timeout * 1000 / 2;

		ms = ms < STORE_TICK_MS ? ms : STORE_TICK_MS;
		uv_timer_start(&srv->tick, store__on_tick, ms, ms);
		uv_unref((uv_handle_t *)&srv->tick); /* never keeps a loop up */
	}
	rc = uv_tcp_getsockname(&srv->listener, (struct sockaddr *)&ss, &len);
	if (rc != 0)
		return rc;
	srv->port = ntohs(ss.ss_family == AF_INET6
			      ? ((struct sockaddr_in6 *)&ss)->sin6_port
			      : ((struct sockaddr_in *)&ss)->sin_port);
	return 0;
}

/* Close callback of a server that failed to start: free it after both. */
static void store_on_failed_close(uv_handle_t *h)
{
	struct crun_store_server *srv = h->data;

	if (--srv->nhandles == 0) {
		free(srv->rbuf);
		free(srv);
	}
}

/* Close the listener and timer of a server that failed to start. */
static void store_server_abandon(struct crun_store_server *srv)
{
	uv_close((uv_handle_t *)&srv->listener, store_on_failed_close);
	uv_close((uv_handle_t *)&srv->tick, store_on_failed_close);
	uv_close((uv_handle_t *)&srv->reaper, store_on_failed_close);
}

/* Bind the listener to host:port (see store_server_new). */
static int store_server_bind(struct crun_store_server *srv, const char *host,
			     int port)
{
	struct sockaddr_storage ss;
	struct addrinfo hints, *ai = NULL;
	char pstr[16];
	int rc;

	if (host == NULL || host[0] == '\0' || strcmp(host, "::") == 0 ||
	    strcmp(host, "0.0.0.0") == 0 || strcmp(host, "*") == 0) {
		uv_ip6_addr("::", port, (struct sockaddr_in6 *)&ss);
		rc = uv_tcp_bind(&srv->listener, (struct sockaddr *)&ss, 0);
		if (rc == UV_EAFNOSUPPORT || rc == UV_EADDRNOTAVAIL) {
			uv_ip4_addr("0.0.0.0", port, (struct sockaddr_in *)&ss);
			rc = uv_tcp_bind(&srv->listener, (struct sockaddr *)&ss,
					 0);
		}
		return rc;
	}
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE;
	snprintf(pstr, sizeof(pstr), "%d", port);
	rc = getaddrinfo(host, pstr, &hints, &ai);
	if (rc != 0)
		return rc == EAI_SYSTEM ? -errno : UV_EAI_NONAME;
	rc = uv_tcp_bind(&srv->listener, ai->ai_addr, 0);
	freeaddrinfo(ai);
	return rc;
}

int store_server_new(uv_loop_t *loop, const char *host, int port,
		     const struct crun_store_limits *lim,
		     struct crun_store_server **out)
{
	struct crun_store_server *srv;
	int rc;

	if (port < 0 || port > 65535)
		return UV_EINVAL;
	srv = store_server_alloc(loop, lim);
	if (srv == NULL)
		return UV_ENOMEM;
	rc = store_server_bind(srv, host, port);
	if (rc == 0)
		rc = store_server_listen(srv);
	if (rc != 0)
		goto fail;
	*out = srv;
	return 0;
fail:
	store_server_abandon(srv);
	return rc;
}

#ifdef _WIN32
int store_server_new_fd(uv_loop_t *loop, int fd,
			const struct crun_store_limits *lim,
			struct crun_store_server **out)
{
	return UV_ENOTSUP;
}
#else
int store_server_new_fd(uv_loop_t *loop, int fd,
			const struct crun_store_limits *lim,
			struct crun_store_server **out)
{
	struct crun_store_server *srv;
	int fd2, rc;

	/* Work on a duplicate so that the caller keeps fd if anything fails. */
	fd2 = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (fd2 < 0)
		return -errno;
	srv = store_server_alloc(loop, lim);
	if (srv == NULL) {
		close(fd2);
		return UV_ENOMEM;
	}
	rc = uv_tcp_open(&srv->listener, fd2);
	if (rc != 0) {
		close(fd2);
		goto fail;
	}
	rc = store_server_listen(srv);
	if (rc != 0)
		goto fail; /* the handle owns fd2 and closes it */
	close(fd);
	*out = srv;
	return 0;
fail:
	store_server_abandon(srv);
	return rc;
}
#endif

int store_server_port(const struct crun_store_server *srv)
{
	return srv->port;
}

void store_server_set_quiet(struct crun_store_server *srv, int quiet)
{
	srv->quiet = quiet;
}

void store_server_on_vanish(struct crun_store_server *srv, store_vanish_cb cb,
			    void *data)
{
	srv->vanish_cb = cb;
	srv->vanish_data = data;
}

void store_server_on_sink(struct crun_store_server *srv, const char *prefix,
			  store_sink_cb cb, void *data)
{
	free(srv->sink_prefix);
	srv->sink_prefix = cb ? strdup(prefix) : NULL;
	srv->sink_cb = srv->sink_prefix ? cb : NULL;
	srv->sink_data = data;
}

size_t store_server_nconns(const struct crun_store_server *srv)
{
	return srv->nconns;
}

size_t store_server_peers(const struct crun_store_server *srv,
			  struct sockaddr_storage *out, size_t max)
{
	const struct store_conn *c;
	size_t n = 0;

	for (c = srv->conns; c != NULL && n < max; c = c->next) {
		int len = (int)sizeof(*out);

		if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&out[n],
				       &len) == 0)
			n++;
	}
	return n;
}

void store_server_stats(const struct crun_store_server *srv,
			struct crun_store_stats *st)
{
	const struct store_conn *c;

	memset(st, 0, sizeof(*st));
	st->conns = srv->nconns;
	st->waiters = srv->nwaiters;
	st->watches = srv->nwatches;
	st->memory = srv->mem;
	st->keys = srv->nkeys;
	for (c = srv->conns; c != NULL; c = c->next)
		st->paused += c->paused != 0;
}

uint64_t store_server_ops(const struct crun_store_server *srv, int i,
			  const char **name)
{
	if (i < 0 || i >= STORE_OP__COUNT) {
		*name = NULL;
		return 0;
	}
	*name = store__cmds[i].name;
	return srv->ops[i];
}

/* Free srv and call its close callback once every handle is closed. */
static void store_server_maybe_free(struct crun_store_server *srv)
{
	store_close_cb cb;
	void *data;

	if (!srv->closing || srv->nhandles > 0)
		return;
	cb = srv->close_cb;
	data = srv->close_data;
	store__free_entries(srv);
	store_fanout_free(srv->fanout);
	free(srv->sink_prefix);
	free(srv->rbuf);
	free(srv);
	if (cb != NULL)
		cb(data);
}

/* A handle is closed: the listener, the timer, the reaper, a connection. */
static void store_server_handle_closed(struct crun_store_server *srv)
{
	srv->nhandles--;
	store_server_maybe_free(srv);
}

static void store_on_listener_close(uv_handle_t *h)
{
	store_server_handle_closed(h->data);
}

void store_server_close(struct crun_store_server *srv, store_close_cb cb,
			void *data)
{
	assert(!srv->closing);
	srv->closing = 1;
	srv->close_cb = cb;
	srv->close_data = data;
	while (srv->conns != NULL)
		store__conn_close(srv->conns, NULL);
	srv->dirty = NULL;
	srv->ndirty = 0;
	uv_close((uv_handle_t *)&srv->listener, store_on_listener_close);
	uv_close((uv_handle_t *)&srv->tick, store_on_listener_close);
	/* The reaper closes itself after the connections (store_on_reap). */
	if (srv->reap == NULL)
		uv_close((uv_handle_t *)&srv->reaper, store_on_listener_close);
}

/* ---- In-process access ------------------------------------------------- */

int store_server_set(struct crun_store_server *srv, const char *key,
		     const void *val, size_t len)
{
	struct store_entry *e;
	int err = 0;

	e = store__get_entry(srv, key, strlen(key), &err);
	if (e == NULL)
		return err;
	err = store__entry_set(srv, e, val, len, NULL, 0);
	if (err != 0) {
		store__entry_gc(srv, e);
		return err;
	}
	store__wake(e);
	store__flush_dirty(srv);
	return 0;
}

int store_server_get(struct crun_store_server *srv, const char *key,
		     const void **val, size_t *len)
{
	struct store_entry *e = store__find(srv, key, strlen(key));

	if (e == NULL || !e->has_value)
		return CRUN_ENOTFOUND;
	*val = e->val != NULL ? (const void *)e->val : (const void *)"";
	*len = e->vlen;
	return 0;
}

int store_server_add(struct crun_store_server *srv, const char *key,
		     int64_t delta, int64_t *result)
{
	struct store_entry *e;
	char errmsg[128];
	int64_t v;
	int err = 0;

	e = store__get_entry(srv, key, strlen(key), &err);
	if (e == NULL)
		return err;
	err = store__do_add(srv, e, delta, &v, errmsg, sizeof(errmsg));
	if (err != 0) {
		store__entry_gc(srv, e);
		return err;
	}
	store__wake(e);
	store__flush_dirty(srv);
	if (result != NULL)
		*result = v;
	return 0;
}

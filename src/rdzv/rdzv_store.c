/*
 * The c10d rendezvous backend: the rendezvous key-value interface over the
 * crun store, and the choice of which agent hosts that store.
 *
 * Happy path: the agent whose address matches the endpoint host (or
 * is_host=true) binds the endpoint port and serves the store on its own
 * loop; every agent (the host too, over loopback) opens one connection,
 * which carries its pipelined requests and its one watch (the aclient's
 * background watch: a WAIT_GET taken back and sent again around other
 * requests), so the host holds one descriptor per node.
 *
 * With a rendezvous secret (auth.h) the server makes every client prove it
 * and every client makes the server prove it; without one, the host says
 * once that anyone who reaches the port can take part.
 *
 * Failure modes: the port is taken (by this job's store: join as a client;
 * by anything else: CRUN_EADDRINUSE_OTHER, with the holder named when /proc
 * tells); the host never answers (connect retries with backoff until the
 * join timeout, with a progress line every 5 s).
 */
#include <arpa/inet.h>
#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "crun/err.h"
#include "crun/log.h"
#include "crun/peers.h"
#include "crun/rdzv_store.h"
#include "crun/tcptab.h"

struct crun_rdzv_store {
	uv_loop_t *loop;
	char host[256];
	int port;
	int timeout_ms;
	int opened; /* the store was reached once: see new_client */
	struct crun_store_server *server; /* when this agent hosts */
	struct crun_store_aclient *main;
	uv_timer_t progress;
	uv_timer_t wtimer; /* the watch's timeout */
	uint64_t started;
	int connected;
	int closing;
	int pending_close;
	const struct crun_store_limits *limits;
	store_vanish_cb vanish_cb;
	void *vanish_arg;
	int would_host; /* should host, but the port was taken */
	int ticks, bad_ticks;
	int silent_ticks; /* seconds connected without an answer */
	int holder_seen;  /* the silent holder was named once: crun */
	rdzv_store_open_cb open_cb;
	void *open_data;
	rdzv_store_close_cb close_cb;
	void *close_data;
	int has_key;
	struct crun_auth_key key;
	char job[256]; /* seeded into a store we host, or "" */
	char errmsg[512];
};

/* A server of ours: quiet, secret, and watched for vanishing clients. */
static void setup_server(struct crun_rdzv_store *s)
{
	static int warned;

	store_server_set_quiet(s->server, 1);
	/* Before the loop serves anyone: our job is the endpoint's. */
	if (*s->job &&
	    store_server_set(s->server, RDZV_JOB_KEY, s->job, strlen(s->job)))
		log_say("cannot write the job id into the rendezvous store");
	if (s->has_key)
		store_server_set_auth(s->server, &s->key);
	else if (!warned++)
		log_msg(LOG_WARN, "crun",
			"the rendezvous on port %d is unauthenticated "
			"(it listens on every address): anyone who reaches "
			"it can join, stop or read this job; set "
			"--rdzv_conf=secret_file=PATH",
			store_server_port(s->server));
}

/* A client of ours, with the secret if there is one. */
/*
 * Until the store has been reached, a connection waits for the host as long
 * as opening may (it may start later than us). Once reached, a host that
 * refuses a new connection is gone: give up after
 * RECONNECT_MS, not after the join deadline.
 */
#define RECONNECT_MS 3000

static int new_client(struct crun_rdzv_store *s, store_aclient_connect_cb cb,
		      void *data, struct crun_store_aclient **out)
{
	int ms = s->opened && s->timeout_ms > RECONNECT_MS ? RECONNECT_MS
							   : s->timeout_ms;
	int rc =
	    store_aclient_new(s->loop, s->host, s->port, ms, cb, data, out);

	if (rc != 0)
		return rc;
	if (s->has_key)
		store_aclient_set_auth(*out, &s->key);
	/* The rendezvous store is always crun's (an agent, or crun store). */
	store_aclient_use_wait_get(*out);
	return 0;
}

/* A request's callback and argument, between the store and the algorithm. */
struct kvreq {
	rdzv_kv_cb cb;
	void *arg;
	struct crun_rdzv_store *s; /* a watch's store, else NULL */
};

static void kv_on_reply(struct crun_store_aclient *c, int status,
			const struct crun_store_reply *r, void *data)
{
	struct kvreq *q = data;

	if (q->s != NULL)
		uv_timer_stop(&q->s->wtimer);
	if (q->cb)
		q->cb(status, r, q->arg);
	free(q);
}

static struct kvreq *kvreq(rdzv_kv_cb cb, void *arg)
{
	struct kvreq *q = malloc(sizeof(*q));

	if (q == NULL)
		abort();
	q->cb = cb;
	q->arg = arg;
	q->s = NULL;
	return q;
}

/*
 * Submit through fn; on a synchronous error the request is freed. Closing
 * fails what is pending, and a callback may ask again: CRUN_ECLOSED then.
 */
#define SUBMIT(call)                                                           \
	do {                                                                   \
		struct kvreq *q;                                               \
		if (s->main == NULL)                                           \
			return CRUN_ECLOSED;                                   \
		q = kvreq(cb, arg);                                            \
		int rc_ = (call);                                              \
		if (rc_)                                                       \
			free(q);                                               \
		return rc_;                                                    \
	} while (0)

static int kv_add(void *kv, const char *key, int64_t delta, rdzv_kv_cb cb,
		  void *arg)
{
	struct crun_rdzv_store *s = kv;

	SUBMIT(store_aclient_add(s->main, key, delta, kv_on_reply, q));
}

static int kv_set(void *kv, const char *key, const void *v, size_t n,
		  rdzv_kv_cb cb, void *arg)
{
	struct crun_rdzv_store *s = kv;

	if (cb == NULL)
		return s->main
			   ? store_aclient_set(s->main, key, v, n, NULL, NULL)
			   : CRUN_ECLOSED;
	SUBMIT(store_aclient_set(s->main, key, v, n, kv_on_reply, q));
}

static int kv_compare_set(void *kv, const char *key, const void *exp,
			  size_t elen, const void *des, size_t dlen,
			  rdzv_kv_cb cb, void *arg)
{
	struct crun_rdzv_store *s = kv;

	SUBMIT(store_aclient_compare_set(s->main, key, exp, elen, des, dlen,
					 kv_on_reply, q));
}

static int kv_multi_get(void *kv, const char *const *keys, size_t n,
			int timeout_ms, rdzv_kv_cb cb, void *arg)
{
	struct crun_rdzv_store *s = kv;

	SUBMIT(store_aclient_multi_get(s->main, keys, n, timeout_ms,
				       kv_on_reply, q));
}

static int kv_peek(void *kv, const char *const *keys, size_t n, rdzv_kv_cb cb,
		   void *arg)
{
	struct crun_rdzv_store *s = kv;

	SUBMIT(store_aclient_peek(s->main, keys, n, kv_on_reply, q));
}

static int kv_multi_set(void *kv, const char *const *keys,
			const void *const *vals, const size_t *lens, size_t n,
			rdzv_kv_cb cb, void *arg)
{
	struct crun_rdzv_store *s = kv;

	if (cb == NULL)
		return s->main ? store_aclient_multi_set(s->main, keys, vals,
							 lens, n, NULL, NULL)
			       : CRUN_ECLOSED;
	SUBMIT(store_aclient_multi_set(s->main, keys, vals, lens, n,
				       kv_on_reply, q));
}

static void close_client(struct crun_rdzv_store *s,
			 struct crun_store_aclient **slot);

/* One of the clients, the server or the timer is closed. */
static void on_client_closed(void *data)
{
	struct crun_rdzv_store *s = data;

	if (--s->pending_close == 0 && s->closing && s->close_cb)
		s->close_cb(s->close_data);
}

/*
 * Close *slot's client. The slot is cleared first: closing fails pending
 * requests at once, and their callbacks may close this store again.
 */
static void close_client(struct crun_rdzv_store *s,
			 struct crun_store_aclient **slot)
{
	struct crun_store_aclient *c = *slot;

	if (c == NULL)
		return;
	*slot = NULL;
	s->pending_close++;
	store_aclient_close(c, on_client_closed, s);
}

static void on_watch_timeout(uv_timer_t *t)
{
	struct crun_rdzv_store *s = t->data;

	if (s->main != NULL)
		store_aclient_unwatch(s->main, CRUN_ETIMEDOUT);
}

/* A new watch replaces the one outstanding (which fails CRUN_ECANCELED). */
static int kv_watch(void *kv, const char *const *keys, size_t n, int timeout_ms,
		    rdzv_kv_cb cb, void *arg)
{
	struct crun_rdzv_store *s = kv;
	struct kvreq *q;
	int rc;

	if (s->main == NULL)
		return CRUN_ECLOSED;
	q = kvreq(cb, arg);
	q->s = s;
	rc = store_aclient_watch_keys(s->main, keys, n, kv_on_reply, q);
	if (rc) {
		free(q);
		return rc;
	}
	if (timeout_ms >= 0)
		uv_timer_start(&s->wtimer, on_watch_timeout,
			       (uint64_t)timeout_ms, 0);
	return 0;
}

/* The store host learns at once which node's connection broke mid-watch. */
static void kv_on_vanish(void *kv, void (*cb)(void *, const char *, size_t),
			 void *arg)
{
	struct crun_rdzv_store *s = kv;

	s->vanish_cb = cb;
	s->vanish_arg = arg;
	if (s->server)
		store_server_on_vanish(s->server, cb, arg);
}

const struct rdzv_kv_ops rdzv_store_ops = {
    .add = kv_add,
    .set = kv_set,
    .compare_set = kv_compare_set,
    .multi_get = kv_multi_get,
    .peek = kv_peek,
    .multi_set = kv_multi_set,
    .watch = kv_watch,
    .on_vanish = kv_on_vanish,
};

/* --- who hosts ---------------------------------------------------------- */

int rdzv_host_is_local(const char *host)
{
	struct addrinfo hints, *res = NULL, *ai;
	struct crun_peers *own;
	char name[256];
	int local = 0;

	if (strcmp(host, "localhost") == 0)
		return 1;
	if (gethostname(name, sizeof(name)) == 0 &&
	    (strcmp(name, host) == 0 ||
	     (strncmp(host, name, strlen(name)) == 0 &&
	      host[strlen(name)] == '.')))
		return 1;
	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	if (getaddrinfo(host, NULL, &hints, &res) != 0)
		return 0;
	/* An empty allow list passes loopback and this machine's addresses
	 * (read only for an address that is not loopback). */
	if (peers_new(NULL, &own, NULL, 0) == 0) {
		for (ai = res; ai && !local; ai = ai->ai_next)
			local = peers_allow(own, ai->ai_addr);
		peers_free(own);
	}
	freeaddrinfo(res);
	return local;
}

struct listener {
	int port, specific;
	unsigned long inode;
};

/* tcptab_cb: the first socket listening on the port (specific: not on the
 * wildcard address, :: or 0.0.0.0). */
static void on_listener(void *data, const struct tcptab_row *t)
{
	struct listener *l = data;
	int wildcard = 1;

	if (l->inode || t->state != 10 /* LISTEN */ || t->local_port != l->port)
		return;
	for (int i = 0; i < 16; i++)
		if (t->local[i] &&
		    !((i == 10 || i == 11) && t->local[i] == 0xff))
			wildcard = 0;
	if (l->specific && wildcard)
		return; /* the wildcard: ours */
	l->inode = (unsigned long)t->inode;
}

/* Rows of /proc/net/tcp{,6} read at most, where sock_diag is missing. */
#define LISTENER_MAX_ROWS (1 << 20)

/*
 * The inode of a socket listening on TCP port, or 0. specific: only one
 * bound to a specific address (not the wildcard). From sock_diag, which
 * lists the listening sockets alone (/proc/net/tcp lists every socket of
 * the host, thousands in TIME_WAIT after a large job).
 */
static unsigned long port_listener_inode(int port, int specific)
{
	static const int families[] = {AF_INET, AF_INET6};
	static const char *tables[] = {"/proc/net/tcp", "/proc/net/tcp6"};
	struct listener l = {port, specific, 0};

	for (size_t t = 0; t < 2 && l.inode == 0; t++)
		if (tcptab_dump_port(families[t], port, TCPTAB_LISTENING,
				     1 << 16, on_listener, &l))
			tcptab_read(tables[t], LISTENER_MAX_ROWS, on_listener,
				    &l);
	return l.inode;
}

/* Descriptors socket_holder looks at, at most. */
#define HOLDER_MAX_FDS 32768

/*
 * Name the process holding socket inode ("pid N (comm)"), or "" (also when
 * it is not among the first HOLDER_MAX_FDS descriptors of the host's
 * processes: the scan runs on the loop, and is bounded).
 */
static void socket_holder(unsigned long inode, char *out, size_t len)
{
	char link[64], target[64];
	DIR *proc;
	struct dirent *p;
	long budget = HOLDER_MAX_FDS;

	*out = '\0';
	if (inode == 0)
		return;
	snprintf(target, sizeof(target), "socket:[%lu]", inode);
	proc = opendir("/proc");
	while (proc && budget > 0 && (p = readdir(proc)) != NULL &&
	       *out == '\0') {
		char fdpath[300];
		DIR *fds;
		struct dirent *f;

		if (p->d_name[0] < '0' || p->d_name[0] > '9')
			continue;
		snprintf(fdpath, sizeof(fdpath), "/proc/%s/fd", p->d_name);
		fds = opendir(fdpath);
		while (fds && budget-- > 0 && (f = readdir(fds)) != NULL) {
			char path[600];
			ssize_t n;

			snprintf(path, sizeof(path), "%s/%s", fdpath,
				 f->d_name);
			n = readlink(path, link, sizeof(link) - 1);
			if (n <= 0)
				continue;
			link[n] = '\0';
			if (strcmp(link, target) == 0) {
				char comm[64] = "?", cpath[300];
				FILE *fp;

				snprintf(cpath, sizeof(cpath), "/proc/%s/comm",
					 p->d_name);
				fp = fopen(cpath, "r");
				if (fp) {
					if (fgets(comm, sizeof(comm), fp))
						comm[strcspn(comm, "\n")] =
						    '\0';
					fclose(fp);
				}
				snprintf(out, len, "pid %s (%s)", p->d_name,
					 comm);
				break;
			}
		}
		if (fds)
			closedir(fds);
	}
	if (proc)
		closedir(proc);
}

/* Name the process listening on TCP port (from /proc), or "" if unknown. */
void rdzv_port_holder(int port, char *out, size_t len)
{
	socket_holder(port_listener_inode(port, 0), out, len);
}

/* --- open and close ----------------------------------------------------- */

static void finish_open(struct crun_rdzv_store *s, int status)
{
	rdzv_store_open_cb cb = s->open_cb;

	uv_timer_stop(&s->progress);
	s->open_cb = NULL;
	s->opened = status == 0;
	if (cb)
		cb(s, status, s->open_data);
}

static void main_on_connect(struct crun_store_aclient *c, int status,
			    void *data);

/* Fail opening with errmsg already set: stop the client, report once. */
static void open_fail(struct crun_rdzv_store *s, int status)
{
	close_client(s, &s->main);
	finish_open(s, status);
}

/*
 * Once a second while connecting: is the endpoint port held by something
 * that is not a crun store? A listener that hangs up on our handshake is
 * one; so is a port we could not bind (guessing we should host) that nobody
 * listens on: then try the bind again, in case it was only briefly taken.
 */
static void on_progress(uv_timer_t *t)
{
	struct crun_rdzv_store *s = t->data;
	int err = store_aclient_last_error(s->main), rc;
	uint64_t elapsed,
	    timeout = (uint64_t)(s->timeout_ms > 0 ? s->timeout_ms : 0);
	char who[128];

	s->ticks++;
	/*
	 * Connected at TCP level but never answered (no error yet): a silent
	 * program holds the port. A local holder that is not crun is named
	 * after 3 s; whatever it is, we give up at the join timeout.
	 */
	if (!s->connected && err == 0)
		s->silent_ticks++;
	else
		s->silent_ticks = 0;
	elapsed = uv_now(s->loop) - s->started;
	/*
	 * Named once: on a host of many agents whose store is slow to answer
	 * (a loaded machine), every waiting agent scanning /proc every second
	 * would keep it loaded.
	 */
	if (s->silent_ticks >= 3 &&
	    ((s->would_host && !s->holder_seen) || elapsed >= timeout)) {
		rdzv_port_holder(s->port, who, sizeof(who));
		s->holder_seen = 1;
		if ((*who && !strstr(who, "(crun)")) || elapsed >= timeout) {
			snprintf(
			    s->errmsg, sizeof(s->errmsg),
			    "port %d of %.200s is held by another program%s%s "
			    "that accepts connections but never answers "
			    "as a crun store: pick a free port for "
			    "--rdzv_endpoint",
			    s->port, s->host, *who ? ", " : "", who);
			return open_fail(s, CRUN_EADDRINUSE_OTHER);
		}
	}
	if (elapsed >= timeout) {
		snprintf(s->errmsg, sizeof(s->errmsg),
			 "could not reach the rendezvous host %.200s:%d within "
			 "%.0f s (%s): check that the first node runs crun "
			 "with this --rdzv_endpoint and that the port is open "
			 "between the nodes",
			 s->host, s->port, (double)timeout / 1000,
			 err ? crun_strerror(err) : "no answer");
		return open_fail(s, err == UV_ECONNREFUSED ? CRUN_EREFUSED
							   : CRUN_ETIMEDOUT);
	}
	if (err == UV_EOF || err == UV_ECONNRESET || err == CRUN_EPROTO)
		s->bad_ticks++;
	else if (s->would_host && err == UV_ECONNREFUSED) {
		rc = store_server_new(s->loop, NULL, s->port, s->limits,
				      &s->server);
		if (rc == 0) {
			setup_server(s);
			if (s->vanish_cb)
				store_server_on_vanish(s->server, s->vanish_cb,
						       s->vanish_arg);
			s->would_host = 0;
			return; /* the client's next attempt finds our server */
		}
		s->bad_ticks++;
	} else {
		s->bad_ticks = 0;
	}
	if (s->bad_ticks >= 3) {
		rdzv_port_holder(s->port, who, sizeof(who));
		snprintf(s->errmsg, sizeof(s->errmsg),
			 "port %d of %s is in use by another program%s%s that "
			 "is not a crun "
			 "store (%s): pick a free port for --rdzv_endpoint",
			 s->port, s->host, *who ? ", " : "", who,
			 err ? crun_strerror(err) : "no answer");
		return open_fail(s, CRUN_EADDRINUSE_OTHER);
	}
	if (s->ticks % 5)
		return;
	log_say("waiting for rendezvous host %s:%d (%s), %.0f s of %.0f s",
		s->host, s->port, err ? crun_strerror(err) : "no answer yet",
		(double)(uv_now(s->loop) - s->started) / 1000,
		(double)s->timeout_ms / 1000);
}

static void main_on_connect(struct crun_store_aclient *c, int status,
			    void *data)
{
	struct crun_rdzv_store *s = data;

	if (status == CRUN_ECANCELED)
		return;
	if (status == 0) {
		s->connected = 1;
		return finish_open(s, 0);
	}
	if (status == CRUN_ETIMEDOUT) {
		int err = store_aclient_last_error(c);

		snprintf(s->errmsg, sizeof(s->errmsg),
			 "could not reach the rendezvous host %s:%d within "
			 "%.0f s (%s): check "
			 "that the first node runs crun with this "
			 "--rdzv_endpoint and that "
			 "the port is open between the nodes",
			 s->host, s->port, (double)s->timeout_ms / 1000,
			 err ? crun_strerror(err) : "no answer");
		if (err == UV_ECONNREFUSED)
			status = CRUN_EREFUSED;
	} else if (status == CRUN_EAUTH) {
		snprintf(s->errmsg, sizeof(s->errmsg),
			 "the rendezvous host %s:%d %s: every node needs the "
			 "same --rdzv_conf=secret_file",
			 s->host, s->port,
			 s->has_key ? "does not prove this node's secret "
				      "(another secret, or none)"
				    : "wants a secret this node lacks");
	} else if (status == CRUN_EPROTO || status == UV_EOF ||
		   status == UV_ECONNRESET) {
		char who[128];

		rdzv_port_holder(s->port, who, sizeof(who));
		snprintf(s->errmsg, sizeof(s->errmsg),
			 "%s:%d answers, but not as a crun store%s%s: pick a "
			 "free port for "
			 "--rdzv_endpoint",
			 s->host, s->port, *who ? "; it is held by " : "", who);
		status = CRUN_EADDRINUSE_OTHER;
	} else {
		snprintf(s->errmsg, sizeof(s->errmsg),
			 "cannot reach the rendezvous host %s:%d: %s", s->host,
			 s->port, crun_strerror(status));
	}
	finish_open(s, status);
}

static void on_aborted_closed(uv_handle_t *h)
{
	struct crun_rdzv_store *s = h->data;

	if (--s->pending_close == 0)
		free(s);
}

int rdzv_store_open(uv_loop_t *loop, const struct rdzv_store_opts *o,
		    rdzv_store_open_cb cb, void *data,
		    struct crun_rdzv_store **out)
{
	struct crun_rdzv_store *s = calloc(1, sizeof(*s));
	int host = o->is_host, rc;

	if (s == NULL)
		return UV_ENOMEM;
	s->loop = loop;
	snprintf(s->host, sizeof(s->host), "%s", o->host);
	if (o->job && strlen(o->job) < sizeof(s->job))
		memcpy(s->job, o->job, strlen(o->job) + 1);
	s->port = o->port;
	s->timeout_ms = o->timeout_ms;
	s->open_cb = cb;
	s->open_data = data;
	s->limits = o->limits;
	s->has_key = o->auth != NULL;
	if (o->auth != NULL)
		s->key = *o->auth;
	if (host < 0)
		host = rdzv_host_is_local(o->host);
	if (host) {
		rc = store_server_new(loop, NULL, o->port, o->limits,
				      &s->server);
		if (rc == 0) {
			char who[128];
			unsigned long other;

			setup_server(s);
			s->port = store_server_port(s->server);
			/* Talk to our own server over loopback. */
			snprintf(s->host, sizeof(s->host), "127.0.0.1");
			/*
			 * We hold the wildcard; a program bound to one
			 * address only (127.0.0.1:P) takes the connections to
			 * that address, ours and the other nodes' alike.
			 */
			other = port_listener_inode(s->port, 1);
			if (other) {
				socket_holder(other, who, sizeof(who));
				snprintf(o->errmsg, o->errlen,
					 "port %d is also held by another "
					 "program%s%s, bound to one address: "
					 "connections to the endpoint would "
					 "reach it, not this store; pick a "
					 "free port for --rdzv_endpoint",
					 s->port, *who ? ", " : "", who);
				store_server_close(s->server, NULL, NULL);
				free(s);
				return CRUN_EADDRINUSE_OTHER;
			}
		} else if (rc != UV_EADDRINUSE || o->is_host == 1) {
			char who[128] = "";

			if (rc == UV_EADDRINUSE)
				rdzv_port_holder(o->port, who, sizeof(who));
			snprintf(s->errmsg, sizeof(s->errmsg),
				 "cannot serve the rendezvous store on port "
				 "%d: %s%s%s",
				 o->port, crun_strerror(rc),
				 *who ? "; held by " : "", who);
			snprintf(o->errmsg, o->errlen, "%s", s->errmsg);
			free(s);
			return rc == UV_EADDRINUSE ? CRUN_EADDRINUSE_OTHER : rc;
		}
		/* EADDRINUSE with is_host guessed: another agent of this
		 * machine hosts it (several agents on one host): be a client,
		 * and find out if the holder is no crun store (on_progress). */
		s->would_host = s->server == NULL;
	}
	uv_timer_init(loop, &s->progress);
	s->progress.data = s;
	uv_timer_init(loop, &s->wtimer);
	s->wtimer.data = s;
	s->started = uv_now(loop);
	rc = new_client(s, main_on_connect, s, &s->main);
	if (rc) {
		snprintf(o->errmsg, o->errlen, "cannot connect to %s:%d: %s",
			 s->host, s->port, crun_strerror(rc));
		if (s->server)
			store_server_close(s->server, NULL, NULL);
		/* s goes once the loop has let go of its timers. */
		s->pending_close = 2;
		uv_close((uv_handle_t *)&s->progress, on_aborted_closed);
		uv_close((uv_handle_t *)&s->wtimer, on_aborted_closed);
		return rc;
	}
	uv_timer_start(&s->progress, on_progress, 1000, 1000);
	*out = s;
	return 0;
}

int rdzv_store_is_host(const struct crun_rdzv_store *s)
{
	return s->server != NULL;
}

const char *rdzv_store_errmsg(const struct crun_rdzv_store *s)
{
	return s->errmsg;
}

struct crun_store_server *rdzv_store_server(const struct crun_rdzv_store *s)
{
	return s->server;
}

int rdzv_store_client(struct crun_rdzv_store *s,
		      struct crun_store_aclient **out)
{
	return new_client(s, NULL, NULL, out);
}

static void on_progress_closed(uv_handle_t *h)
{
	on_client_closed(h->data);
}

void rdzv_store_close(struct crun_rdzv_store *s, rdzv_store_close_cb cb,
		      void *data)
{
	assert(!s->closing);
	s->closing = 1;
	s->close_cb = cb;
	s->close_data = data;
	s->pending_close += 2; /* the timers */
	close_client(s, &s->main);
	if (s->server) {
		struct crun_store_server *srv = s->server;

		s->server = NULL;
		s->pending_close++;
		store_server_close(srv, on_client_closed, s);
	}
	uv_close((uv_handle_t *)&s->progress, on_progress_closed);
	uv_close((uv_handle_t *)&s->wtimer, on_progress_closed);
}

void rdzv_store_free(struct crun_rdzv_store *s)
{
	free(s);
}

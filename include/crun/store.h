/*
 * The crun store: a key-value server wire-compatible with PyTorch's TCPStore
 * (both protocol generations: G0 for PyTorch <= 1.13, G3+ for 2.2 and later,
 * told apart per connection), a blocking client for C programs, and an async
 * client for code that runs on a libuv loop (the agent's rendezvous).
 *
 * Keys are NUL-terminated strings on the C side (the wire allows any bytes;
 * PyTorch only ever sends UTF-8). Values are byte strings given as (ptr, len);
 * an empty value is legal and distinct from a missing key.
 *
 * Every function returns 0 or a negative code from crun/err.h (libuv codes
 * pass through). Nothing here is thread-safe: a server or async client belongs
 * to the thread running its loop, a blocking client to one thread at a time.
 */
#ifndef CRUN_STORE_H
#define CRUN_STORE_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

struct crun_store_server;
struct crun_store_client;
struct crun_store_aclient;

/* Limits of a store server (store_server_new; the options store_*). */
struct crun_store_limits {
	size_t max_key;	   /* bytes per key */
	size_t max_value;  /* bytes per value */
	size_t max_keys;   /* keys in one request */
	size_t max_memory; /* total bytes of keys and values */
	size_t max_conns;  /* concurrent connections */
	size_t max_output; /* unsent reply bytes per connection */
	size_t
	    idle_timeout; /* seconds a stalled connection is kept (0: ever) */
};

/* Defaults of store_limits_default(). The first three are PyTorch's libuv
 * server's. */
#define CRUN_STORE_MAX_KEY (8u << 10)	 /* 8 KiB per key */
#define CRUN_STORE_MAX_VALUE (8u << 20)	 /* 8 MiB per value */
#define CRUN_STORE_MAX_KEYS (128u << 10) /* keys in one WAIT/CHECK/MULTI_* */
#define CRUN_STORE_MAX_MEMORY ((size_t)1 << 30) /* 1 GiB of keys and values */
#define CRUN_STORE_MAX_CONNS 65536u		/* concurrent connections */
#define CRUN_STORE_MAX_OUTPUT (64u << 20) /* unsent replies per connection */
#define CRUN_STORE_IDLE_TIMEOUT 30u	  /* seconds without progress */

/** Called once an object that owns libuv handles is closed and freed. */
typedef void (*store_close_cb)(void *data);

/**
 * Fill lim with the defaults above. A request that breaks a limit closes that
 * one connection (with a logged reason); so does a request larger than
 * 2 * max_value + max_key + 64 bytes (no legal single-value request is), a
 * reply larger than max_output, and anything that would take the process past
 * max_memory (which counts keys, values, queue items, waiters, watches and
 * every connection's input and output buffers). A client whose unsent replies
 * reach its share (max_output, but at most half of max_memory divided among
 * the connections with unsent replies) is not read until they drain; one
 * that holds a partial
 * request or unsent replies for idle_timeout seconds without progress is
 * closed. A connection accepted beyond max_conns is closed at once.
 */
void store_limits_default(struct crun_store_limits *lim);

/**
 * The longest request a store reads under lim: 2 * max_value + max_key + 64
 * bytes (no legal single-value request is longer). A connection holding a
 * longer unfinished request is closed; the relay refuses a longer frame
 * before forwarding it.
 */
size_t store_limits_max_frame(const struct crun_store_limits *lim);

/* ---- Server ------------------------------------------------------------ */

/**
 * Create a server listening on host:port on loop. host NULL, "", "::" or
 * "0.0.0.0" binds "::" dual stack (falling back to 0.0.0.0 without IPv6);
 * anything else is resolved and its first address bound. port 0 lets the
 * kernel choose (see store_server_port). lim NULL means the defaults; it is
 * copied. The backlog is /proc/sys/net/core/somaxconn, and RLIMIT_NOFILE's
 * soft limit is raised to the hard limit. One server is one keyspace.
 *
 * On success *out owns a listening handle on loop: release it with
 * store_server_close. On error *out is untouched and nothing is listening,
 * but a handle may still be closing: run the loop before uv_loop_close.
 */
int store_server_new(uv_loop_t *loop, const char *host, int port,
		     const struct crun_store_limits *lim,
		     struct crun_store_server **out);

/**
 * Like store_server_new, but adopt fd, a TCP socket already bound (and
 * possibly listening), so a caller can reserve its port without a race. On
 * success the server owns fd; on error the caller still does. UV_ENOTSUP on
 * Windows.
 */
int store_server_new_fd(uv_loop_t *loop, int fd,
			const struct crun_store_limits *lim,
			struct crun_store_server **out);

/** The port the server listens on (the chosen one if created with port 0). */
int store_server_port(const struct crun_store_server *srv);

/** Silence (1) or restore (0) the server's log lines about closed connections.
 */
void store_server_set_quiet(struct crun_store_server *srv, int quiet);

/** Called with a key (not NUL-terminated) a closing client still waited on. */
typedef void (*store_vanish_cb)(void *data, const char *key, size_t klen);

/**
 * Have cb called, from the loop, for every key that a client connection was
 * still waiting on when it closed (a crashed peer, a cut connection), but not
 * when the server itself closes. The rendezvous uses it to learn at once that
 * a node is gone. cb must not close the server.
 */
void store_server_on_vanish(struct crun_store_server *srv, store_vanish_cb cb,
			    void *data);

/** A value written to a key of the sink (not NUL-terminated, either). */
typedef void (*store_sink_cb)(void *data, const char *key, size_t klen,
			      const void *val, size_t vlen);

/**
 * Hand every SET and APPEND of a key that begins with prefix to cb, from the
 * loop, instead of storing it (the request is answered as usual): a stream
 * from the clients to the server's owner, under the server's limits, secret
 * and allow list. prefix is copied; NULL cb: none. cb must not close the
 * server.
 */
void store_server_on_sink(struct crun_store_server *srv, const char *prefix,
			  store_sink_cb cb, void *data);

/** Connections open right now. */
size_t store_server_nconns(const struct crun_store_server *srv);

/**
 * The peer addresses of at most max open connections into out, for
 * diagnostics (who has connected; O(connections)). Returns how many.
 */
size_t store_server_peers(const struct crun_store_server *srv,
			  struct sockaddr_storage *out, size_t max);

/* A snapshot of a server's state, for tests and diagnostics. */
struct crun_store_stats {
	size_t conns;	/* open connections */
	size_t paused;	/* connections not read until their replies drain */
	size_t waiters; /* parked WAITs and BARRIERs */
	size_t watches; /* WATCH_KEY registrations */
	size_t keys;	/* keys with a value */
	size_t memory;	/* bytes counted against max_memory */
};

/** Fill st from srv (O(connections)). */
void store_server_stats(const struct crun_store_server *srv,
			struct crun_store_stats *st);

/**
 * Requests of kind i run so far (for metrics), for i = 0, 1, ... while
 * *name is set to the kind's lower-case name (static storage); past the last
 * kind *name is NULL and 0 is returned. O(1).
 */
uint64_t store_server_ops(const struct crun_store_server *srv, int i,
			  const char **name);

/**
 * Close the listener and every connection (waiters get no reply), then free
 * the server and call cb(data) (cb may be NULL) from the loop once every
 * handle is closed. srv must not be used after this call.
 */
void store_server_close(struct crun_store_server *srv, store_close_cb cb,
			void *data);

/**
 * In-process access for the server's owner, without a socket. set stores a
 * copy and wakes waiters like a client's SET; it fails with CRUN_ETOOBIG past
 * max_memory. get returns 0 and a pointer into the store (valid until the key
 * next changes) or CRUN_ENOTFOUND. add behaves like the ADD request
 * (CRUN_EPROTO if the value is not a number).
 */
int store_server_set(struct crun_store_server *srv, const char *key,
		     const void *val, size_t len);
int store_server_get(struct crun_store_server *srv, const char *key,
		     const void **val, size_t *len);
int store_server_add(struct crun_store_server *srv, const char *key,
		     int64_t delta, int64_t *result);

/* ---- Blocking client --------------------------------------------------- */

/* Flags of store_connect_ex. CRUN_STORE_G0: speak PyTorch <= 1.13's
 * protocol (no VALIDATE, no PING). */
#define CRUN_STORE_G0 1

/**
 * Connect to a store, retrying a refused or unreachable connection with
 * backoff (10 ms doubling to 1 s) until timeout_ms has passed (CRUN_ETIMEDOUT
 * then, or the resolver's error at once). Speaks G3 (VALIDATE, then a PING
 * that must echo). timeout_ms also becomes the default timeout of each call
 * (see store_set_timeout); -1 means none. Free *out with store_close.
 */
int store_connect(const char *host, int port, int timeout_ms,
		  struct crun_store_client **out);

/** store_connect with flags (CRUN_STORE_G0). */
int store_connect_ex(const char *host, int port, int timeout_ms, int flags,
		     struct crun_store_client **out);

/** Close the connection and free c (NULL is a no-op). */
void store_close(struct crun_store_client *c);

/** Timeout of every later call that takes none, in ms (-1: none). */
void store_set_timeout(struct crun_store_client *c, int timeout_ms);

/*
 * The calls below return 0, CRUN_ETIMEDOUT, CRUN_EPROTO (a reply that makes
 * no sense), a libuv code for a network error (UV_EOF when the server closed
 * the connection, as PyTorch's server does on a bad request), or CRUN_ECLOSED
 * once an earlier error has broken the connection. Only a timed-out
 * store_wait or store_get leaves the connection usable: in G3 the client
 * sends CANCEL_WAIT and consumes the late answer if the key won the race; in
 * G0, which has no cancel, it reconnects so that a late answer cannot be read
 * as the reply to a later request.
 *
 * Returned values are malloc'd, NUL-terminated past len for convenience, and
 * owned by the caller (free()).
 */

/** SET key = val. */
int store_set(struct crun_store_client *c, const char *key, const void *val,
	      size_t len);

/** Wait up to timeout_ms (-1: the client's default) for key, then GET it. */
int store_get(struct crun_store_client *c, const char *key, int timeout_ms,
	      void **val, size_t *len);

/** ADD delta to the decimal counter at key; *result (may be NULL) gets the sum.
 */
int store_add(struct crun_store_client *c, const char *key, int64_t delta,
	      int64_t *result);

/**
 * COMPARE_SET: replace key's value by desired if it equals expected (a missing
 * key matches an empty expected). *cur gets the server's reply: desired if it
 * was stored, else the current value (or expected itself if the key is
 * missing, as PyTorch's servers reply).
 */
int store_compare_set(struct crun_store_client *c, const char *key,
		      const void *expected, size_t elen, const void *desired,
		      size_t dlen, void **cur, size_t *curlen);

/** CHECK: *ready = 1 if every key exists, else 0. Never blocks on the server.
 */
int store_check(struct crun_store_client *c, const char *const *keys, size_t n,
		int *ready);

/** WAIT until every key exists, or CRUN_ETIMEDOUT after timeout_ms (-1:
 * default). */
int store_wait(struct crun_store_client *c, const char *const *keys, size_t n,
	       int timeout_ms);

/** DELETE_KEY: *deleted (may be NULL) = 1 if the key existed. */
int store_delete_key(struct crun_store_client *c, const char *key,
		     int *deleted);

/** GETNUMKEYS: number of keys in the server's map. */
int store_num_keys(struct crun_store_client *c, int64_t *n);

/** APPEND val to key's value, creating it (G3 servers and PyTorch 2.x only). */
int store_append(struct crun_store_client *c, const char *key, const void *val,
		 size_t len);

/**
 * Wait for all keys (timeout as store_wait), then MULTI_GET them: vals[i] and
 * lens[i] (arrays of n supplied by the caller) get malloc'd copies. On error
 * nothing is left allocated. In G0 this is a WAIT followed by n GETs.
 */
int store_multi_get(struct crun_store_client *c, const char *const *keys,
		    size_t n, int timeout_ms, void **vals, size_t *lens);

/** MULTI_SET keys[i] = (vals[i], lens[i]) (n SETs in G0). */
int store_multi_set(struct crun_store_client *c, const char *const *keys,
		    const void *const *vals, const size_t *lens, size_t n);

/* ---- Async client (on a libuv loop) ------------------------------------ */

/*
 * A reply, valid only during the callback. Unlike the blocking client's,
 * these values are slices of the receive buffer: NOT NUL-terminated; copy
 * them (with their length) before treating them as strings.
 */
struct crun_store_iov {
	const void *base;
	size_t len;
};

struct crun_store_reply {
	const void *value; /* get, compare_set */
	size_t len;
	int64_t num;	/* add: the sum; delete_key: 1/0; num_keys */
	int ready;	/* check */
	size_t nvalues; /* multi_get */
	const struct crun_store_iov *values;
};

/**
 * Connection callback: status 0 once connected and validated, else
 * CRUN_ETIMEDOUT (deadline passed), CRUN_ECANCELED (closed first) or an error.
 * After a failed connect the client only accepts store_aclient_close.
 */
typedef void (*store_aclient_connect_cb)(struct crun_store_aclient *c,
					 int status, void *data);

/** Request callback: status 0 and r filled, or an error (r is NULL then). */
typedef void (*store_reply_cb)(struct crun_store_aclient *c, int status,
			       const struct crun_store_reply *r, void *data);

/**
 * Start connecting to host:port (numeric or resolvable) on loop, retrying
 * refused connections with backoff (50 ms doubling to 1 s) until timeout_ms
 * has passed. Speaks G3 (a crun or PyTorch >= 2.2 server). cb runs exactly
 * once unless this returns an error. Requests may be queued before the
 * connection is up; they are sent once it is. Free *out with
 * store_aclient_close, whatever happened.
 */
int store_aclient_new(uv_loop_t *loop, const char *host, int port,
		      int timeout_ms, store_aclient_connect_cb cb, void *data,
		      struct crun_store_aclient **out);

/*
 * Requests. Each copies its arguments, returns 0 and later runs cb exactly
 * once, or returns an error (CRUN_ECLOSED once the client failed or is
 * closing, UV_ENOMEM, CRUN_ETOOBIG) and never runs cb. Requests are sent in
 * call order and pipelined, except that nothing is sent after a wait (or the
 * wait half of a get) until its answer is in: the server answers a WAIT only
 * when its keys exist, and replies carry no tags. Callbacks run in call
 * order. A lost connection fails every pending request with its libuv error;
 * store_aclient_close fails them with CRUN_ECANCELED. cb may be NULL for set,
 * append and multi_set.
 */
int store_aclient_set(struct crun_store_aclient *c, const char *key,
		      const void *val, size_t len, store_reply_cb cb,
		      void *data);
/** Wait up to timeout_ms (-1: forever) for key, then get it. */
int store_aclient_get(struct crun_store_aclient *c, const char *key,
		      int timeout_ms, store_reply_cb cb, void *data);
int store_aclient_add(struct crun_store_aclient *c, const char *key,
		      int64_t delta, store_reply_cb cb, void *data);
int store_aclient_compare_set(struct crun_store_aclient *c, const char *key,
			      const void *expected, size_t elen,
			      const void *desired, size_t dlen,
			      store_reply_cb cb, void *data);
/** CRUN_ETIMEDOUT after timeout_ms (-1: forever); sends CANCEL_WAIT. */
int store_aclient_wait(struct crun_store_aclient *c, const char *const *keys,
		       size_t n, int timeout_ms, store_reply_cb cb, void *data);
int store_aclient_check(struct crun_store_aclient *c, const char *const *keys,
			size_t n, store_reply_cb cb, void *data);
int store_aclient_delete_key(struct crun_store_aclient *c, const char *key,
			     store_reply_cb cb, void *data);
int store_aclient_num_keys(struct crun_store_aclient *c, store_reply_cb cb,
			   void *data);
int store_aclient_append(struct crun_store_aclient *c, const char *key,
			 const void *val, size_t len, store_reply_cb cb,
			 void *data);
/** Wait up to timeout_ms for every key, then MULTI_GET them. */
int store_aclient_multi_get(struct crun_store_aclient *c,
			    const char *const *keys, size_t n, int timeout_ms,
			    store_reply_cb cb, void *data);
/**
 * MULTI_GET the keys as they are now, without waiting: a crun store (like
 * PyTorch's libuv server) answers a missing key with an empty value.
 */
int store_aclient_peek(struct crun_store_aclient *c, const char *const *keys,
		       size_t n, store_reply_cb cb, void *data);
int store_aclient_multi_set(struct crun_store_aclient *c,
			    const char *const *keys, const void *const *vals,
			    const size_t *lens, size_t n, store_reply_cb cb,
			    void *data);

/**
 * The server is a crun store: gets and multi_gets wait and read in one
 * request (crun's WAIT_GET) instead of a WAIT and then a read, one round
 * trip each. A PyTorch server would close the connection. Call before the
 * first request.
 */
void store_aclient_use_wait_get(struct crun_store_aclient *c);

/**
 * The background watch (a crun store only: needs store_aclient_use_wait_get):
 * wait for key to exist and read it, while every other request keeps
 * flowing on this same connection. Its WAIT_GET is sent whenever nothing
 * else is pending; a request made while it is parked takes it back first
 * (CANCEL_WAIT, answered in order) and sends it again after. cb runs once:
 * with the value, an error, or the status given to store_aclient_unwatch.
 * One watch at a time: a new one replaces the old (CRUN_ECANCELED).
 * Returns 0, CRUN_EUSAGE (not a crun store), CRUN_ECLOSED or UV_ENOMEM.
 */
int store_aclient_watch(struct crun_store_aclient *c, const char *key,
			store_reply_cb cb, void *data);

/**
 * A watch of keys[0] whose answer also reads keys[1..n-1] as they are when
 * keys[0] appears (a missing one empty; crun's WAIT_FIRST_GET): the reply
 * has value (keys[0]'s) and values (all n).
 */
int store_aclient_watch_keys(struct crun_store_aclient *c,
			     const char *const *keys, size_t n,
			     store_reply_cb cb, void *data);

/** Give up the watch: its callback runs now with status (if still due). */
void store_aclient_unwatch(struct crun_store_aclient *c, int status);

/** The last connect-time error (0 if none): why a connect is still retrying. */
int store_aclient_last_error(const struct crun_store_aclient *c);

/**
 * Fail every pending request (and a pending connect) with CRUN_ECANCELED,
 * close the connection, free c and then call cb(data) (may be NULL) from the
 * loop. Safe to call from any callback of c; c must not be used afterwards.
 */
void store_aclient_close(struct crun_store_aclient *c, store_close_cb cb,
			 void *data);

#endif

/*
 * A client of etcd's v3 JSON gateway (POST /v3/...) on the libuv loop,
 * over libcurl: endpoint failover, the auth token, TLS, and the JSON and
 * base64 encoding of keys, values, txns and watches. Keys and values are base64
 * on the wire; int64 fields come back as JSON strings and zero values are left
 * out.
 */
#ifndef CRUN_ETCD_H
#define CRUN_ETCD_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

struct etcd;
struct etcd_req;

#define ETCD_MAX_ENDPOINTS 16

/*
 * A client's bounds: rdzv_conf's etcd_* keys (cfg_etcd_limits), whose
 * defaults are in src/cfg/cfg_opts.h. Every field must be set.
 */
struct etcd_limits {
	size_t turn_bytes;	 /* bytes a transfer takes per loop turn */
	unsigned turn_msgs;	 /* stream messages per loop turn */
	size_t max_message;	 /* one stream (watch) message */
	size_t max_body;	 /* one answer */
	size_t max_json_items;	 /* JSON values per answer */
	unsigned backoff_ms;	 /* the first pause before a retry */
	unsigned backoff_max_ms; /* the longest (doubling in between) */
	unsigned attempt_ms;	 /* one try at one endpoint, at most */
	unsigned connect_ms;	 /* connecting to one endpoint, at most */
};

struct etcd_opts {
	const char *endpoints; /* "h1:2379,https://h2:2379,...": see below */
	int https;	       /* scheme for bare host[:port] entries */
	const char *cacert, *cert, *key; /* TLS files, or NULL */
	const char *user;		 /* etcd auth, or NULL */
	const char *password;
	double timeout; /* s: give up once no endpoint answered this long */
	double attempt; /* s: one try at one endpoint (0, or above
			 * lim.attempt_ms: lim.attempt_ms) */
	struct etcd_limits lim;
};

/**
 * Split "h1:2379,http://h2,..." into URLs ("http://h1:2379"): bare entries
 * get the scheme (https when https) and port 2379 when none is given.
 * Returns the count (1..max) or CRUN_EUSAGE with errmsg naming the entry.
 */
int etcd_parse_endpoints(const char *list, int https, char (*urls)[300],
			 int max, char *errmsg, size_t errlen);

int etcd_new(uv_loop_t *loop, const struct etcd_opts *o, char *errmsg,
	     size_t errlen, struct etcd **out);

/**
 * Reply: status 0 and the JSON body of an HTTP 200; CRUN_EETCD and, when
 * etcd answered with an error, that error's JSON (its "code" is gRPC's: 5
 * not found, 3 invalid argument...; etcd_errmsg says why); CRUN_ECANCELED
 * when the client closed first. resp is borrowed for the callback only.
 */
typedef void (*etcd_cb)(int status, json_t *resp, void *arg);

/**
 * POST body (stolen) to path ("/v3/kv/range"), failing over between the
 * endpoints until one answers, for up to timeout. cb runs exactly once
 * unless this returns an error.
 */
int etcd_call(struct etcd *e, const char *path, json_t *body, etcd_cb cb,
	      void *arg);

/** A streaming call (watch): msg_cb per newline-delimited message. */
typedef void (*etcd_msg_cb)(json_t *msg, void *arg);

/**
 * Open a stream (one attempt at the current endpoint, no time limit); end
 * runs once when it ends for any reason (status 0: closed by the server;
 * CRUN_EPROTO: etcd answered with an error; CRUN_EETCD: no answer, the
 * connection failed), unless cancelled with etcd_req_cancel first.
 */
int etcd_stream(struct etcd *e, const char *path, json_t *body, etcd_msg_cb msg,
		etcd_cb end, void *arg, struct etcd_req **out);
void etcd_req_cancel(struct etcd_req *q);

/** The endpoint requests go to now, and the last error message. */
const char *etcd_endpoint(const struct etcd *e);
const char *etcd_errmsg(const struct etcd *e);
/** Bumped every time requests fail over to another endpoint. */
unsigned etcd_failovers(const struct etcd *e);

/** Fail every request (CRUN_ECANCELED), close, then cb; free in cb. */
void etcd_close(struct etcd *e, void (*cb)(void *data), void *data);
void etcd_free(struct etcd *e);

/* --- encoding (exposed for the unit tests) ------------------------------ */

/** Base64 (standard alphabet, padded) of n bytes as a JSON string. */
json_t *etcd_b64(const void *p, size_t n);
/** Decode a base64 JSON string into a malloc'd NUL-terminated buffer. */
int etcd_unb64(const json_t *s, char **out, size_t *len);
/** An int64 field that etcd sends as a string, a number, or leaves out. */
int64_t etcd_int(const json_t *obj, const char *field);
/** The pause before retry number retries+1: lim's backoff_ms doubling, at
 * most its backoff_max_ms. */
uint64_t etcd_backoff_ms(const struct etcd_limits *lim, int retries);
/** The client's bounds. */
const struct etcd_limits *etcd_limits(const struct etcd *e);
/** JSON values in p[0..n): objects, arrays, strings that are not an
 * object's keys, numbers, true, false and null; counted up to stop + 1. */
size_t etcd_json_nodes(const char *p, size_t n, size_t stop);
/** The end of the range of every key under prefix (last byte + 1). */
int etcd_prefix_end(const char *prefix, char *out, size_t len);

/** {"key":b64, "value":b64, "lease":"ID"} (lease NULL or "0": none). */
json_t *etcd_put_req(const char *key, const void *v, size_t n,
		     const char *lease);
/** {"key":b64} plus "range_end" when range_end is not NULL. */
json_t *etcd_range_req(const char *key, const char *range_end);

/**
 * Compare-and-set in one txn, with the current kv in the failure branch:
 * when absent, the key must not exist (create_revision 0), else its value
 * must be exp; then put des.
 */
json_t *etcd_txn_cas(const char *key, int absent, const void *exp, size_t elen,
		     const void *des, size_t dlen, const char *lease);
/** Put v if the key's mod_revision is still rev (0: absent). */
json_t *etcd_txn_mod(const char *key, int64_t rev, const void *v, size_t n,
		     const char *lease);
/** A txn of ranges (reads) or of puts (writes, lease as in put). */
json_t *etcd_txn_ranges(const char *const *keys, size_t n);
json_t *etcd_txn_puts(const char *const *keys, const void *const *vals,
		      const size_t *lens, size_t n, const char *lease);
/** {"create_request":{key, range_end (prefix), start_revision}}. */
json_t *etcd_watch_req(const char *prefix, int64_t start_rev);

/**
 * The kv (key, value, mod_revision) in a range response (the first one),
 * or a txn's failure-branch range (responses[i].response_range). Returns 1
 * and fills the outputs (value malloc'd) when found, 0 when absent.
 */
int etcd_kv_first(const json_t *range_resp, char **value, size_t *vlen,
		  int64_t *mod_rev);
/** The i-th response of a txn, if it is of that kind ("response_range"). */
json_t *etcd_txn_resp(const json_t *resp, size_t i, const char *kind);

#endif

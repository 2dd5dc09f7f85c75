/*
 * The etcd v3 JSON gateway client.
 *
 * Happy path: etcd_call serialises the body once, POSTs it to the current
 * endpoint through curl_uv, parses the JSON answer and hands it to the
 * callback. With user set, the first request authenticates
 * (/v3/auth/authenticate) and every request carries the token in the
 * Authorization header.
 *
 * Failure modes: a transfer that fails (refused, reset, no answer within
 * the attempt timeout) or that etcd answers "unavailable" (no leader,
 * leader changed) moves every later request to the next endpoint and is
 * retried there; after each full turn of the list it pauses (etcd_backoff,
 * 100 ms, doubling up to etcd_backoff_max, 2 s). A request no endpoint answered
 * within the timeout fails with CRUN_EETCD and a message naming the endpoints
 * tried. "Too many requests" (HTTP 429, code 8) is retried after such pauses up
 * to the timeout. An expired token (gRPC code 16) authenticates again and
 * retries; a new token refused again is retried after pauses, up to the
 * timeout; a refused password fails every request waiting for the token.
 * Other etcd errors go to the caller as they are.
 *
 * Bounds (struct etcd_limits, rdzv_conf etcd_*): one transfer takes at
 * most turn_bytes and turn_msgs per loop turn (then it is paused until the
 * next turn), an answer at most max_body, a stream message max_message,
 * and neither is parsed when it holds more than max_json_items JSON values
 * (objects, arrays, strings, numbers, true, false, null).
 */
#include <assert.h>
#include <ctype.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crun/curl_uv.h"
#include "crun/err.h"
#include "crun/etcd.h"

/* The limits' defaults are rdzv_conf's (src/cfg/cfg_opts.h, etcd_*).
 * max_json_items: JSON values in one answer or message: parsed, each costs
 * ~30 times the 3 bytes of "{}," or "\"\",", whatever the value; a kv as etcd
 * sends it is 7 values, so the default still takes a range of ~9000 keys.
 * turn_*: what one transfer may take in one loop turn; the rest waits (paused)
 * for the next turn, so a fast stream cannot hold up timers and signals. */

struct etcd {
	uv_loop_t *loop;
	struct curl_uv *cu;
	char urls[ETCD_MAX_ENDPOINTS][300];
	int n;
	int cur; /* the endpoint requests go to */
	unsigned failovers;
	char cacert[512], cert[512], key[512];
	char user[256], password[256];
	char *token;		 /* "Authorization" header, once known */
	unsigned token_gen;	 /* bumped with every new token */
	struct curl_slist *hdrs; /* with the token */
	int authing;		 /* an authenticate call is out */
	struct etcd_req *reqs;	 /* every request, in any state */
	uv_timer_t tick;	 /* retries after a pause */
	uv_idle_t turn;		 /* the next loop turn: budgets renewed */
	double timeout;
	uint64_t attempt_ms;	/* one try at one endpoint */
	struct etcd_limits lim; /* defaults filled in */
	int closing;
	void (*close_cb)(void *);
	void *close_data;
	char errmsg[1024];
};

enum qstate { Q_RUNNING, Q_PAUSED, Q_AUTH };

struct etcd_req {
	struct etcd *e;
	struct etcd_req *next, **pprev;
	char path[64];
	char *body;
	CURL *easy;
	enum qstate state;
	int ep;		    /* endpoint of the running attempt */
	int tried;	    /* endpoints tried in this turn */
	int retries;	    /* pauses so far (each twice the last) */
	unsigned token_gen; /* of the token the attempt carried */
	uint64_t started;   /* loop time of the first attempt */
	uint64_t due;	    /* paused until */
	int is_auth;	    /* the authenticate call itself */
	etcd_cb cb;
	etcd_msg_cb msg; /* streams only */
	void *arg;
	char *buf;
	size_t len, cap;
	size_t scanned; /* streams: bytes of buf known to hold no newline */
	size_t taken;	/* bytes taken in this loop turn */
	unsigned nmsgs; /* stream messages handed on in this loop turn */
	int paused;	/* the transfer waits for the next turn */
	const char *refused; /* why on_write refused the answer */
	char lasterr[256];
};

static void req_start(struct etcd_req *q);

/* --- encoding ----------------------------------------------------------- */

json_t *etcd_b64(const void *p, size_t n)
{
	size_t cap =
	    sodium_base64_ENCODED_LEN(n, sodium_base64_VARIANT_ORIGINAL);
	char *s = malloc(cap);
	json_t *j;

	if (s == NULL)
		return NULL;
	sodium_bin2base64(s, cap, p, n, sodium_base64_VARIANT_ORIGINAL);
	j = json_string(s);
	free(s);
	return j;
}

int etcd_unb64(const json_t *s, char **out, size_t *len)
{
	const char *txt = json_string_value(s);
	size_t n, cap;
	char *b;

	if (txt == NULL)
		return CRUN_EPROTO;
	n = strlen(txt);
	cap = n / 4 * 3 + 3;
	b = malloc(cap + 1);
	if (b == NULL)
		return UV_ENOMEM;
	if (sodium_base642bin((unsigned char *)b, cap, txt, n, NULL, len, NULL,
			      sodium_base64_VARIANT_ORIGINAL) != 0) {
		free(b);
		return CRUN_EPROTO;
	}
	b[*len] = '\0';
	*out = b;
	return 0;
}

int64_t etcd_int(const json_t *obj, const char *field)
{
	json_t *v = json_object_get(obj, field);

	if (json_is_integer(v))
		return (int64_t)json_integer_value(v);
	if (json_is_string(v))
		return strtoll(json_string_value(v), NULL, 10);
	return 0;
}

int etcd_prefix_end(const char *prefix, char *out, size_t len)
{
	size_t n = strlen(prefix);

	if (n == 0 || n >= len)
		return CRUN_EUSAGE;
	memcpy(out, prefix, n + 1);
	while (n > 0 && (unsigned char)out[n - 1] == 0xff)
		out[--n] = '\0';
	if (n == 0)
		return CRUN_EUSAGE;
	out[n - 1] = (char)((unsigned char)out[n - 1] + 1);
	return 0;
}

static json_t *b64s(const char *s)
{
	return etcd_b64(s, strlen(s));
}

json_t *etcd_put_req(const char *key, const void *v, size_t n,
		     const char *lease)
{
	json_t *o = json_object();

	json_object_set_new(o, "key", b64s(key));
	json_object_set_new(o, "value", etcd_b64(v, n));
	if (lease && strcmp(lease, "0"))
		json_object_set_new(o, "lease", json_string(lease));
	return o;
}

json_t *etcd_range_req(const char *key, const char *range_end)
{
	json_t *o = json_object();

	json_object_set_new(o, "key", b64s(key));
	if (range_end)
		json_object_set_new(o, "range_end", b64s(range_end));
	return o;
}

static json_t *op(const char *kind, json_t *req)
{
	json_t *o = json_object();

	json_object_set_new(o, kind, req);
	return o;
}

static json_t *txn(json_t *cmp, json_t *success, json_t *failure)
{
	json_t *t = json_object();

	json_object_set_new(t, "compare", cmp ? cmp : json_array());
	json_object_set_new(t, "success", success ? success : json_array());
	json_object_set_new(t, "failure", failure ? failure : json_array());
	return t;
}

json_t *etcd_txn_cas(const char *key, int absent, const void *exp, size_t elen,
		     const void *des, size_t dlen, const char *lease)
{
	json_t *c = json_object();

	json_object_set_new(c, "key", b64s(key));
	json_object_set_new(c, "result", json_string("EQUAL"));
	if (absent) {
		json_object_set_new(c, "target", json_string("CREATE"));
		json_object_set_new(c, "create_revision", json_string("0"));
	} else {
		json_object_set_new(c, "target", json_string("VALUE"));
		json_object_set_new(c, "value", etcd_b64(exp, elen));
	}
	return txn(
	    json_pack("[o]", c),
	    json_pack("[o]",
		      op("request_put", etcd_put_req(key, des, dlen, lease))),
	    json_pack("[o]", op("request_range", etcd_range_req(key, NULL))));
}

json_t *etcd_txn_mod(const char *key, int64_t rev, const void *v, size_t n,
		     const char *lease)
{
	json_t *c = json_object();
	char r[32];

	snprintf(r, sizeof(r), "%lld", (long long)rev);
	json_object_set_new(c, "key", b64s(key));
	json_object_set_new(c, "result", json_string("EQUAL"));
	json_object_set_new(c, "target", json_string("MOD"));
	json_object_set_new(c, "mod_revision", json_string(r));
	return txn(
	    json_pack("[o]", c),
	    json_pack("[o]", op("request_put", etcd_put_req(key, v, n, lease))),
	    json_pack("[o]", op("request_range", etcd_range_req(key, NULL))));
}

json_t *etcd_txn_ranges(const char *const *keys, size_t n)
{
	json_t *ops = json_array();

	for (size_t i = 0; i < n; i++)
		json_array_append_new(
		    ops, op("request_range", etcd_range_req(keys[i], NULL)));
	return txn(NULL, ops, NULL);
}

json_t *etcd_txn_puts(const char *const *keys, const void *const *vals,
		      const size_t *lens, size_t n, const char *lease)
{
	json_t *ops = json_array();

	for (size_t i = 0; i < n; i++)
		json_array_append_new(
		    ops, op("request_put",
			    etcd_put_req(keys[i], vals[i], lens[i], lease)));
	return txn(NULL, ops, NULL);
}

json_t *etcd_watch_req(const char *prefix, int64_t start_rev)
{
	char end[600], r[32];
	json_t *c = etcd_range_req(prefix, NULL);

	if (etcd_prefix_end(prefix, end, sizeof(end)) == 0)
		json_object_set_new(c, "range_end", b64s(end));
	if (start_rev > 0) {
		snprintf(r, sizeof(r), "%lld", (long long)start_rev);
		json_object_set_new(c, "start_revision", json_string(r));
	}
	return op("create_request", c);
}

int etcd_kv_first(const json_t *range_resp, char **value, size_t *vlen,
		  int64_t *mod_rev)
{
	json_t *kv = json_array_get(json_object_get(range_resp, "kvs"), 0);

	if (kv == NULL)
		return 0;
	if (mod_rev)
		*mod_rev = etcd_int(kv, "mod_revision");
	if (value) {
		json_t *v = json_object_get(kv, "value");

		if (v == NULL) { /* an empty value is left out */
			*value = calloc(1, 1);
			*vlen = 0;
		} else if (etcd_unb64(v, value, vlen)) {
			return 0;
		}
	}
	return 1;
}

json_t *etcd_txn_resp(const json_t *resp, size_t i, const char *kind)
{
	return json_object_get(
	    json_array_get(json_object_get(resp, "responses"), i), kind);
}

int etcd_parse_endpoints(const char *list, int https, char (*urls)[300],
			 int max, char *errmsg, size_t errlen)
{
	char *copy = strdup(list), *tok, *save = NULL;
	int n = 0, rc = 0;

	if (copy == NULL)
		return UV_ENOMEM;
	for (tok = strtok_r(copy, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		const char *hostpart = tok, *p;
		int has_scheme = 0, has_port = 0;
		size_t k;

		while (isspace((unsigned char)*tok))
			tok++;
		k = strlen(tok);
		while (k > 0 && (isspace((unsigned char)tok[k - 1]) ||
				 tok[k - 1] == '/'))
			tok[--k] = '\0';
		if (strncmp(tok, "http://", 7) == 0)
			hostpart = tok + 7, has_scheme = 1;
		else if (strncmp(tok, "https://", 8) == 0)
			hostpart = tok + 8, has_scheme = 1;
		else
			hostpart = tok;
		p = hostpart[0] == '[' ? strchr(hostpart, ']') : hostpart;
		if (*hostpart == '\0' || p == NULL || strchr(hostpart, '/') ||
		    strstr(tok, "://") !=
			(has_scheme ? strchr(tok, ':') : NULL)) {
			rc = CRUN_EUSAGE;
			break;
		}
		if (strchr(p, ':')) {
			char *end;
			long port = strtol(strrchr(p, ':') + 1, &end, 10);

			if (*end || port <= 0 || port > 65535 ||
			    end == strrchr(p, ':') + 1) {
				rc = CRUN_EUSAGE;
				break;
			}
			has_port = 1;
		}
		if (n == max) {
			snprintf(errmsg, errlen,
				 "too many etcd endpoints (at most %d)", max);
			free(copy);
			return CRUN_EUSAGE;
		}
		snprintf(urls[n++], 300, "%s%s%s",
			 has_scheme ? ""
			 : https    ? "https://"
				    : "http://",
			 tok, has_port ? "" : ":2379");
	}
	if (rc == 0 && n == 0)
		rc = CRUN_EUSAGE, tok = copy;
	if (rc)
		snprintf(errmsg, errlen,
			 "bad etcd endpoint '%s': expected HOST[:PORT] or "
			 "http(s)://HOST[:PORT], comma-separated",
			 tok ? tok : list);
	free(copy);
	return rc ? rc : n;
}

/* Whether c may appear in a number or in true, false or null. */
static int scalar_char(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || c == '-' ||
	       c == '+' || c == '.' || c == 'E';
}

/*
 * Every value counts: jansson spends ~90 bytes on each, so "" costs as
 * much as {} and an answer of 3-byte items inflates ~30 times whatever
 * they are. A string is a value unless a ':' follows it (an object's key:
 * each key comes with a value, which counts), so it is decided at the
 * next byte that is not white space.
 */
size_t etcd_json_nodes(const char *p, size_t n, size_t stop)
{
	size_t k = 0;
	int in_str = 0, in_scalar = 0, str_done = 0;

	for (size_t i = 0; i < n && k <= stop; i++) {
		char c = p[i];

		if (in_str) {
			if (c == '\\')
				i++;
			else if (c == '"')
				in_str = 0, str_done = 1;
			continue;
		}
		if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
			in_scalar = 0;
			continue;
		}
		if (str_done && c != ':')
			k++;
		str_done = 0;
		if (c == '"') {
			in_str = 1;
		} else if (c == '{' || c == '[') {
			k++;
		} else if (scalar_char(c)) {
			k += !in_scalar;
			in_scalar = 1;
			continue;
		}
		in_scalar = 0;
	}
	return k + (size_t)str_done;
}

/* Parse p unless it holds more than max JSON values. */
static json_t *parse_bounded(const char *p, size_t n, size_t max, int *toobig)
{
	*toobig = etcd_json_nodes(p, n, max) > max;
	return *toobig ? NULL : json_loadb(p, n, 0, NULL);
}

#define TOO_MANY_NODES                                                         \
	"more than etcd_max_json_items JSON values (etcd sends far fewer)"

/* --- requests ----------------------------------------------------------- */

static void on_turn(uv_idle_t *t);
static void req_failover(struct etcd_req *q, const char *why);

/*
 * Budgets are renewed at the next loop turn: an idle handle runs once a
 * turn (a 0 ms timer restarted from its own callback would run again in
 * the same turn), and the poll in between does not block.
 */
static void next_turn(struct etcd *e)
{
	if (!e->closing)
		uv_idle_start(&e->turn, on_turn);
}

static int over_budget(const struct etcd_req *q)
{
	return q->taken >= q->e->lim.turn_bytes ||
	       q->nmsgs >= q->e->lim.turn_msgs;
}

/*
 * Hand on the complete lines of a stream, within this turn's budget. Bytes
 * scanned once are never scanned again (a huge line costs its length).
 */
static void stream_lines(struct etcd_req *q)
{
	size_t off = 0; /* the start of the next line */
	char *nl;

	while (q->nmsgs < q->e->lim.turn_msgs && !q->refused &&
	       (nl = memchr(q->buf + q->scanned, '\n', q->len - q->scanned))) {
		size_t end = (size_t)(nl - q->buf);
		int toobig;
		json_t *m = parse_bounded(q->buf + off, end - off,
					  q->e->lim.max_json_items, &toobig);

		if (toobig)
			q->refused = "a watch message with " TOO_MANY_NODES;

		off = q->scanned = end + 1;
		q->nmsgs++;
		if (m) {
			q->msg(m, q->arg);
			json_decref(m);
		}
	}
	if (q->nmsgs < q->e->lim.turn_msgs)
		q->scanned = q->len;
	if (off) {
		memmove(q->buf, q->buf + off, q->len - off);
		q->len -= off;
		q->scanned -= off;
		q->buf[q->len] = '\0';
	}
}

static size_t on_write(char *p, size_t size, size_t nmemb, void *arg)
{
	struct etcd_req *q = arg;
	size_t n = size * nmemb;

	next_turn(q->e);
	if (over_budget(q)) {
		/* curl keeps p and hands it again once unpaused. */
		q->paused = 1;
		return CURL_WRITEFUNC_PAUSE;
	}
	/* An answer of max_body bytes is read; so is a watch message of
	 * max_message bytes, its newline beside it. */
	if (q->len + n >
	    (q->msg ? q->e->lim.max_message + 1 : q->e->lim.max_body)) {
		q->refused = q->msg ? "a watch message over etcd_max_message"
				    : "an answer over etcd_max_body";
		return 0;
	}
	if (q->len + n + 1 > q->cap) {
		size_t cap = (q->cap ? q->cap * 2 : 4096);
		char *b;

		while (cap < q->len + n + 1)
			cap *= 2;
		b = realloc(q->buf, cap);
		if (b == NULL)
			return 0;
		q->buf = b;
		q->cap = cap;
	}
	memcpy(q->buf + q->len, p, n);
	q->len += n;
	q->buf[q->len] = '\0';
	q->taken += n;
	if (q->msg)
		stream_lines(q);
	return q->refused ? 0 : n;
}

/* A new loop turn: new budgets; lines left over first, then curl again. */
static void on_turn(uv_idle_t *t)
{
	struct etcd *e = t->data;
	struct etcd_req *q, *next;

	uv_idle_stop(t);
	for (q = e->reqs; q; q = next) {
		next = q->next;
		q->taken = 0;
		q->nmsgs = 0;
		if (q->msg && q->len && !q->refused)
			stream_lines(q);
		if (q->refused && q->msg) {
			req_failover(q, q->refused); /* a stream: it ends */
		} else if (over_budget(q)) {
			next_turn(e);
		} else if (q->paused && q->easy) {
			q->paused = 0;
			/* May call on_write at once (and pause again). */
			curl_easy_pause(q->easy, CURLPAUSE_CONT);
		}
	}
}

static void req_unlink(struct etcd_req *q)
{
	*q->pprev = q->next;
	if (q->next)
		q->next->pprev = q->pprev;
}

static void req_free(struct etcd_req *q)
{
	req_unlink(q);
	if (q->easy) {
		curl_uv_remove(q->e->cu, q->easy);
		curl_easy_cleanup(q->easy);
	}
	free(q->body);
	free(q->buf);
	free(q);
}

/* Report and free. */
static void req_done(struct etcd_req *q, int status, json_t *resp)
{
	etcd_cb cb = q->cb;
	void *arg = q->arg;

	req_free(q);
	if (cb)
		cb(status, resp, arg);
}

static void on_tick(uv_timer_t *t);

static void pause_req(struct etcd_req *q, uint64_t ms)
{
	struct etcd *e = q->e;

	q->state = Q_PAUSED;
	q->due = uv_now(e->loop) + ms;
	if (!uv_is_active((uv_handle_t *)&e->tick))
		uv_timer_start(&e->tick, on_tick, 50, 50);
}

static void authenticate(struct etcd *e);

/* Wait for a token, authenticating if nobody does yet. */
static void wait_auth(struct etcd_req *q)
{
	q->state = Q_AUTH;
	authenticate(q->e);
}

uint64_t etcd_backoff_ms(const struct etcd_limits *lim, int retries)
{
	uint64_t ms = lim->backoff_ms, hi = lim->backoff_max_ms;

	while (retries-- > 0 && ms < hi)
		ms *= 2;
	return ms < hi ? ms : hi;
}

const struct etcd_limits *etcd_limits(const struct etcd *e)
{
	return &e->lim;
}

static int past_deadline(const struct etcd_req *q)
{
	return uv_now(q->e->loop) - q->started >=
	       (uint64_t)(q->e->timeout * 1000);
}

/*
 * etcd answered at q->ep that it cannot serve q now (why): try again after
 * a pause that doubles each time, until the timeout, then fail q saying so.
 */
static void req_retry(struct etcd_req *q, const char *why)
{
	struct etcd *e = q->e;

	if (past_deadline(q)) {
		snprintf(e->errmsg, sizeof(e->errmsg),
			 "etcd at %s: %s (retried for %.0f s)", e->urls[q->ep],
			 why, e->timeout);
		return req_done(q, CRUN_EETCD, NULL);
	}
	pause_req(q, etcd_backoff_ms(&q->e->lim, q->retries++));
}

/* The attempt at q->ep failed with why: next endpoint, or give up. */
static void req_failover(struct etcd_req *q, const char *why)
{
	struct etcd *e = q->e;
	uint64_t now = uv_now(e->loop);

	snprintf(q->lasterr, sizeof(q->lasterr), "%.120s: %.120s",
		 e->urls[q->ep], why);
	if (e->cur == q->ep && e->n > 1) {
		e->cur = (e->cur + 1) % e->n;
		e->failovers++;
	}
	if (q->msg || now - q->started >= (uint64_t)(e->timeout * 1000)) {
		if (!q->msg) {
			size_t k;

			k = (size_t)snprintf(e->errmsg, sizeof(e->errmsg),
					     "no etcd endpoint answered within "
					     "%.0f s (tried ",
					     e->timeout);
			for (int i = 0; i < e->n && k < sizeof(e->errmsg); i++)
				k += (size_t)snprintf(
				    e->errmsg + k, sizeof(e->errmsg) - k,
				    "%s%s", i ? ", " : "", e->urls[i]);
			if (k < sizeof(e->errmsg))
				snprintf(e->errmsg + k, sizeof(e->errmsg) - k,
					 "); last error: %s", q->lasterr);
		} else {
			snprintf(e->errmsg, sizeof(e->errmsg), "%s",
				 q->lasterr);
		}
		return req_done(q, CRUN_EETCD, NULL);
	}
	if (++q->tried >= e->n) {
		q->tried = 0;
		return pause_req(q, etcd_backoff_ms(&q->e->lim, q->retries++));
	}
	req_start(q);
}

static void on_done(CURL *easy, CURLcode res, void *arg)
{
	struct etcd_req *q = arg;
	struct etcd *e = q->e;
	long http = 0;
	json_t *j = NULL, *err;
	int code, toobig;

	curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &http);
	if (q->msg) {
		/* A stream ended. */
		if (res != CURLE_OK)
			return req_failover(q, q->refused
						   ? q->refused
						   : curl_easy_strerror(res));
		if (http != 200) {
			json_t *m = json_loads(q->buf ? q->buf : "", 0, NULL);
			const char *why =
			    json_string_value(json_object_get(m, "message"));

			snprintf(e->errmsg, sizeof(e->errmsg),
				 "etcd at %s: HTTP %ld %s", e->urls[q->ep],
				 http, why ? why : "");
			json_decref(m);
		}
		return req_done(q, http == 200 ? 0 : CRUN_EPROTO, NULL);
	}
	if (res != CURLE_OK)
		return req_failover(q, q->refused ? q->refused
						  : curl_easy_strerror(res));
	j = parse_bounded(q->buf ? q->buf : "", q->len, e->lim.max_json_items,
			  &toobig);
	if (toobig) {
		snprintf(
		    e->errmsg, sizeof(e->errmsg),
		    "etcd at %s: an answer of %zu bytes with " TOO_MANY_NODES,
		    e->urls[q->ep], q->len);
		return req_done(q, CRUN_EPROTO, NULL);
	}
	if (http == 200 && j) {
		req_done(q, 0, j);
		json_decref(j);
		return;
	}
	err = j;
	code = (int)json_integer_value(json_object_get(err, "code"));
	if (http == 429 || code == 8) {
		/* ResourceExhausted ("too many requests"): slow down. */
		char why[300];

		snprintf(
		    why, sizeof(why), "%s",
		    json_string_value(json_object_get(err, "message"))
			? json_string_value(json_object_get(err, "message"))
			: "too many requests");
		json_decref(j);
		return req_retry(q, why);
	}
	if (http >= 500 || code == 14 || (j == NULL && http != 404)) {
		char why[300];

		snprintf(
		    why, sizeof(why), "HTTP %ld %s", http,
		    json_string_value(json_object_get(err, "message"))
			? json_string_value(json_object_get(err, "message"))
			: "");
		json_decref(j);
		return req_failover(q, why);
	}
	if (code == 16 && !q->is_auth && *e->user) {
		/*
		 * The token expired: get a new one (unless another request
		 * did), then try again; a fresh token refused again means
		 * pauses, doubling, up to the timeout (each authenticate is
		 * a bcrypt check on etcd's side).
		 */
		json_decref(j);
		if (q->token_gen != e->token_gen)
			return req_start(q);
		free(e->token);
		e->token = NULL;
		if (q->retries == 0 && !past_deadline(q)) {
			q->retries++;
			return wait_auth(q);
		}
		return req_retry(q, "every new auth token is refused (invalid "
				    "auth token)");
	}
	snprintf(e->errmsg, sizeof(e->errmsg), "etcd at %s: %s%s",
		 e->urls[q->ep],
		 json_string_value(json_object_get(err, "message"))
		     ? json_string_value(json_object_get(err, "message"))
		     : "no answer",
		 !*e->user && (code == 16 || strstr(q->buf ? q->buf : "",
						    "user name is empty"))
		     ? " (it wants a user: set user and password_file in "
		       "--rdzv_conf)"
		     : "");
	req_done(q, CRUN_EETCD, err);
	json_decref(j);
}

static void req_start(struct etcd_req *q)
{
	struct etcd *e = q->e;
	char url[400];
	uint64_t left;
	int rc;

	if (!q->is_auth && *e->user && e->token == NULL)
		return wait_auth(q);
	if (q->easy) {
		curl_uv_remove(e->cu, q->easy);
		curl_easy_cleanup(q->easy);
	}
	q->len = q->scanned = 0;
	q->paused = 0;
	q->refused = NULL;
	q->state = Q_RUNNING;
	q->ep = e->cur;
	q->easy = curl_easy_init();
	if (q->easy == NULL)
		return req_done(q, UV_ENOMEM, NULL);
	snprintf(url, sizeof(url), "%s%s", e->urls[q->ep], q->path);
	curl_easy_setopt(q->easy, CURLOPT_URL, url);
	curl_easy_setopt(q->easy, CURLOPT_POSTFIELDS, q->body);
	curl_easy_setopt(q->easy, CURLOPT_WRITEFUNCTION, on_write);
	curl_easy_setopt(q->easy, CURLOPT_WRITEDATA, q);
	curl_easy_setopt(q->easy, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(q->easy, CURLOPT_CONNECTTIMEOUT_MS,
			 (long)(e->attempt_ms < e->lim.connect_ms
				    ? e->attempt_ms
				    : e->lim.connect_ms));
	if (!q->msg) {
		left = (uint64_t)(e->timeout * 1000) -
		       (uv_now(e->loop) - q->started);
		if (left > e->attempt_ms || left == 0)
			left = e->attempt_ms;
		curl_easy_setopt(q->easy, CURLOPT_TIMEOUT_MS, (long)left);
	} else {
		/* A silent watch is normal; a dead peer resets it. */
		curl_easy_setopt(q->easy, CURLOPT_TCP_KEEPALIVE, 1L);
		curl_easy_setopt(q->easy, CURLOPT_TCP_KEEPIDLE, 2L);
		curl_easy_setopt(q->easy, CURLOPT_TCP_KEEPINTVL, 1L);
	}
	if (*e->cacert)
		curl_easy_setopt(q->easy, CURLOPT_CAINFO, e->cacert);
	if (*e->cert)
		curl_easy_setopt(q->easy, CURLOPT_SSLCERT, e->cert);
	if (*e->key)
		curl_easy_setopt(q->easy, CURLOPT_SSLKEY, e->key);
	if (!q->is_auth && e->hdrs)
		curl_easy_setopt(q->easy, CURLOPT_HTTPHEADER, e->hdrs);
	q->token_gen = e->token_gen;
	rc = curl_uv_add(e->cu, q->easy, on_done, q);
	if (rc)
		req_done(q, rc, NULL);
}

static void on_tick(uv_timer_t *t)
{
	struct etcd *e = t->data;
	uint64_t now = uv_now(e->loop);
	int waiting = 0;
	struct etcd_req *q, *next;

	for (q = e->reqs; q; q = next) {
		next = q->next;
		if (q->state != Q_PAUSED)
			continue;
		if (q->due <= now)
			req_start(q);
		else
			waiting = 1;
	}
	if (!waiting) {
		for (q = e->reqs; q; q = q->next)
			if (q->state == Q_PAUSED)
				waiting = 1;
		if (!waiting)
			uv_timer_stop(&e->tick);
	}
}

static struct etcd_req *req_new(struct etcd *e, const char *path, json_t *body)
{
	struct etcd_req *q = calloc(1, sizeof(*q));

	if (q == NULL) {
		json_decref(body);
		return NULL;
	}
	q->e = e;
	snprintf(q->path, sizeof(q->path), "%s", path);
	q->body = json_dumps(body, JSON_COMPACT);
	json_decref(body);
	if (q->body == NULL) {
		free(q);
		return NULL;
	}
	q->started = uv_now(e->loop);
	q->next = e->reqs;
	q->pprev = &e->reqs;
	if (e->reqs)
		e->reqs->pprev = &q->next;
	e->reqs = q;
	return q;
}

/* Requests that waited for the token go now (or fail with the auth). */
static void on_auth(int status, json_t *resp, void *arg)
{
	struct etcd *e = arg;
	const char *tok = json_string_value(json_object_get(resp, "token"));
	struct etcd_req *q, *next;
	char h[1200];
	int failed = 0;

	e->authing = 0;
	if (e->closing)
		return;
	if (status == 0 && tok) {
		free(e->token);
		e->token = strdup(tok);
		e->token_gen++;
		curl_slist_free_all(e->hdrs);
		snprintf(h, sizeof(h), "Authorization: %s", tok);
		e->hdrs = curl_slist_append(NULL, h);
	} else {
		char why[600];

		snprintf(why, sizeof(why), "%.500s", e->errmsg);
		snprintf(e->errmsg, sizeof(e->errmsg),
			 "etcd refused user '%s' (%s): check the user and "
			 "password_file",
			 e->user,
			 strstr(why, ": ") && status == CRUN_EETCD && resp
			     ? strstr(why, ": ") + 2
			     : why);
		failed = 1;
	}
	for (q = e->reqs; q; q = next) {
		next = q->next;
		if (q->state != Q_AUTH)
			continue;
		if (failed)
			req_done(q, CRUN_EETCD, NULL);
		else
			req_start(q);
	}
}

static void authenticate(struct etcd *e)
{
	json_t *b;
	struct etcd_req *q;

	if (e->authing)
		return;
	b = json_pack("{s:s, s:s}", "name", e->user, "password", e->password);
	q = req_new(e, "/v3/auth/authenticate", b);
	if (q == NULL)
		return;
	e->authing = 1;
	q->is_auth = 1;
	q->cb = on_auth;
	q->arg = e;
	req_start(q);
}

/* Start a request (msg NULL) or a stream; *out, if given, is its handle. */
static int etcd_start(struct etcd *e, const char *path, json_t *body,
		      etcd_msg_cb msg, etcd_cb cb, void *arg,
		      struct etcd_req **out)
{
	struct etcd_req *q;

	if (e->closing) {
		json_decref(body);
		return CRUN_ECLOSED;
	}
	q = req_new(e, path, body);
	if (q == NULL)
		return UV_ENOMEM;
	q->cb = cb;
	q->msg = msg;
	q->arg = arg;
	if (out)
		*out = q;
	req_start(q);
	return 0;
}

int etcd_call(struct etcd *e, const char *path, json_t *body, etcd_cb cb,
	      void *arg)
{
	return etcd_start(e, path, body, NULL, cb, arg, NULL);
}

int etcd_stream(struct etcd *e, const char *path, json_t *body, etcd_msg_cb msg,
		etcd_cb end, void *arg, struct etcd_req **out)
{
	return etcd_start(e, path, body, msg, end, arg, out);
}

void etcd_req_cancel(struct etcd_req *q)
{
	req_free(q);
}

const char *etcd_endpoint(const struct etcd *e)
{
	return e->urls[e->cur];
}

const char *etcd_errmsg(const struct etcd *e)
{
	return e->errmsg;
}

unsigned etcd_failovers(const struct etcd *e)
{
	return e->failovers;
}

int etcd_new(uv_loop_t *loop, const struct etcd_opts *o, char *errmsg,
	     size_t errlen, struct etcd **out)
{
	struct etcd *e;
	int rc;

	/* Every bound is given: cfg_etcd_limits fills them (rdzv_conf). */
	assert(o->lim.turn_bytes && o->lim.turn_msgs && o->lim.max_message &&
	       o->lim.max_body && o->lim.max_json_items && o->lim.backoff_ms &&
	       o->lim.backoff_max_ms && o->lim.attempt_ms && o->lim.connect_ms);
	e = calloc(1, sizeof(*e));
	if (e == NULL)
		return UV_ENOMEM;
	if (sodium_init() < 0) {
		free(e);
		return UV_ENOMEM;
	}
	curl_global_init(CURL_GLOBAL_DEFAULT);
	rc = etcd_parse_endpoints(o->endpoints, o->https, e->urls,
				  ETCD_MAX_ENDPOINTS, errmsg, errlen);
	if (rc < 0) {
		free(e);
		return rc;
	}
	e->n = rc;
	e->loop = loop;
	e->timeout = o->timeout > 0 ? o->timeout : 60;
	e->lim = o->lim;
	/* etcd_attempt_timeout bounds the caller's own choice. */
	e->attempt_ms = e->lim.attempt_ms;
	if (o->attempt > 0 && o->attempt * 1000 < e->attempt_ms)
		e->attempt_ms = (uint64_t)(o->attempt * 1000);
	snprintf(e->cacert, sizeof(e->cacert), "%s",
		 o->cacert ? o->cacert : "");
	snprintf(e->cert, sizeof(e->cert), "%s", o->cert ? o->cert : "");
	snprintf(e->key, sizeof(e->key), "%s", o->key ? o->key : "");
	snprintf(e->user, sizeof(e->user), "%s", o->user ? o->user : "");
	snprintf(e->password, sizeof(e->password), "%s",
		 o->password ? o->password : "");
	rc = curl_uv_new(loop, &e->cu);
	if (rc) {
		free(e);
		return rc;
	}
	uv_timer_init(loop, &e->tick);
	e->tick.data = e;
	uv_idle_init(loop, &e->turn);
	e->turn.data = e;
	*out = e;
	return 0;
}

static void on_cu_closed(void *data)
{
	struct etcd *e = data;

	if (e->close_cb)
		e->close_cb(e->close_data);
}

static void on_turn_closed(uv_handle_t *h)
{
	struct etcd *e = h->data;

	curl_uv_close(e->cu, on_cu_closed, e);
}

static void on_tick_closed(uv_handle_t *h)
{
	struct etcd *e = h->data;

	uv_close((uv_handle_t *)&e->turn, on_turn_closed);
}

void etcd_close(struct etcd *e, void (*cb)(void *data), void *data)
{
	assert(!e->closing);
	e->closing = 1;
	e->close_cb = cb;
	e->close_data = data;
	while (e->reqs)
		req_done(e->reqs, CRUN_ECANCELED, NULL);
	uv_close((uv_handle_t *)&e->tick, on_tick_closed);
}

void etcd_free(struct etcd *e)
{
	if (e == NULL)
		return;
	curl_uv_free(e->cu);
	curl_slist_free_all(e->hdrs);
	free(e->token);
	sodium_memzero(e->password, sizeof(e->password));
	free(e);
}

/*
 * Parsers of the rendezvous records (see rdzv_records.h). A record is split
 * into blank-separated fields by a cursor over (bytes, length); each number
 * is parsed with its range, so nothing downstream sees a world of 0, a rank
 * outside its world, or a sum that overflows. Failure modes: any syntax or
 * range error returns CRUN_EPROTO with a one-line reason naming the field.
 * The writers, at the end, format each record the way its parser reads it.
 */
#include <arpa/inet.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "crun/err.h"
#include "crun/rdzv_records.h"

struct cur {
	const char *p, *end;
};

static int reason(char *why, size_t wlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int reason(char *why, size_t wlen, const char *fmt, ...)
{
	va_list ap;

	if (why != NULL && wlen > 0) {
		va_start(ap, fmt);
		vsnprintf(why, wlen, fmt, ap);
		va_end(ap);
	}
	return CRUN_EPROTO;
}

static int is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* The next blank-separated field, or 0 if none is left. */
static size_t cur_field(struct cur *c, const char **f)
{
	const char *s;

	while (c->p < c->end && is_blank(*c->p))
		c->p++;
	s = c->p;
	while (c->p < c->end && !is_blank(*c->p))
		c->p++;
	*f = s;
	return (size_t)(c->p - s);
}

static int cur_done(struct cur *c)
{
	while (c->p < c->end && is_blank(*c->p))
		c->p++;
	return c->p == c->end;
}

/* Decimal digits with an optional sign, in [lo, hi]. */
static int field_int(const char *f, size_t n, int64_t lo, int64_t hi,
		     int64_t *out)
{
	int neg = 0;
	uint64_t v = 0, lim;
	size_t i = 0;

	if (n > 0 && (f[0] == '-' || f[0] == '+'))
		neg = f[i++] == '-';
	if (i == n)
		return -1;
	lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
	for (; i < n; i++) {
		if (f[i] < '0' || f[i] > '9')
			return -1;
		if (v > (lim - (uint64_t)(f[i] - '0')) / 10)
			return -1;
		v = v * 10 + (uint64_t)(f[i] - '0');
	}
	if (neg)
		*out = v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v;
	else
		*out = (int64_t)v;
	return *out < lo || *out > hi ? -1 : 0;
}

/* The next field as an int in [lo, hi]; what names it in the reason. */
static int next_int(struct cur *c, const char *what, int64_t lo, int64_t hi,
		    int *out, char *why, size_t wlen)
{
	const char *f;
	size_t n = cur_field(c, &f);
	int64_t v;

	if (n == 0)
		return reason(why, wlen, "%s missing", what);
	if (field_int(f, n, lo, hi, &v) != 0)
		return reason(
		    why, wlen, "%s '%.*s' is not a number in %lld..%lld", what,
		    (int)(n > 32 ? 32 : n), f, (long long)lo, (long long)hi);
	*out = (int)v;
	return 0;
}

/* The next field as a printable string of 1..size-1 bytes. */
static int next_str(struct cur *c, const char *what, char *dst, size_t size,
		    char *why, size_t wlen)
{
	const char *f;
	size_t n = cur_field(c, &f);

	if (n == 0)
		return reason(why, wlen, "%s missing", what);
	if (n >= size)
		return reason(why, wlen, "%s longer than %zu bytes", what,
			      size - 1);
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)f[i] < 0x21 || (unsigned char)f[i] == 0x7f)
			return reason(why, wlen, "%s has a control character",
				      what);
	memcpy(dst, f, n);
	dst[n] = '\0';
	return 0;
}

static int hexval(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

/*
 * The role field: "-" for an empty role (TorchX passes --role ''), else the
 * role with blanks, control bytes and '%' as %XX (and a role "-" as %2D).
 */
static int next_role(struct cur *c, char *dst, size_t size, char *why,
		     size_t wlen)
{
	const char *f;
	size_t n = cur_field(c, &f), k = 0;

	if (n == 0)
		return reason(why, wlen, "role missing");
	if (n == 1 && f[0] == '-') {
		dst[0] = '\0';
		return 0;
	}
	for (size_t i = 0; i < n; i++) {
		int v = (unsigned char)f[i], hi, lo;

		if (v < 0x21 || v == 0x7f)
			return reason(why, wlen,
				      "role has a control character");
		if (v == '%') {
			hi = i + 2 < n ? hexval(f[i + 1]) : -1;
			lo = i + 2 < n ? hexval(f[i + 2]) : -1;
			if (hi < 0 || lo < 0 || (v = hi * 16 + lo) == 0)
				return reason(why, wlen,
					      "role has a bad %%-escape");
			i += 2;
		}
		if (k + 1 >= size)
			return reason(why, wlen, "role longer than %zu bytes",
				      size - 1);
		dst[k++] = (char)v;
	}
	dst[k] = '\0';
	return 0;
}

/* role as the descriptor's role field (next_role reads it back). */
static void role_field(const char *role, char *out, size_t len)
{
	size_t k = 0;

	if (*role == '\0' || strcmp(role, "-") == 0) {
		snprintf(out, len, "%s", *role ? "%2D" : "-");
		return;
	}
	for (; *role && k + 4 <= len; role++) {
		unsigned char v = (unsigned char)*role;

		if (v < 0x21 || v == 0x7f || v == '%')
			k += (size_t)snprintf(out + k, len - k, "%%%02X", v);
		else
			out[k++] = (char)v;
	}
	out[k] = '\0';
}

/* A node's "<addr>[#<id>]" field (rdzv_records.h): split at the last '#'. */
static int next_node(struct cur *c, char *addr, size_t asize, char *id,
		     char *why, size_t wlen)
{
	char *h;
	int rc;

	if ((rc = next_str(c, "address", addr, asize, why, wlen)) != 0)
		return rc;
	id[0] = '\0';
	if ((h = strrchr(addr, '#')) == NULL)
		return 0;
	if (h == addr || strlen(h + 1) == 0 || strlen(h + 1) > RDZV_MAX_ID ||
	    strspn(h + 1, "0123456789abcdef") != strlen(h + 1))
		return reason(why, wlen,
			      "node '%.64s' is not <address>#<id of 1..%d hex "
			      "digits>",
			      addr, RDZV_MAX_ID);
	memcpy(id, h + 1, strlen(h + 1) + 1);
	*h = '\0';
	return 0;
}

static int check_len(size_t len, char *why, size_t wlen)
{
	if (len == 0)
		return reason(why, wlen, "empty record");
	if (len > RDZV_MAX_RECORD)
		return reason(why, wlen, "record of %zu bytes (at most %d)",
			      len, RDZV_MAX_RECORD);
	return 0;
}

int rdzv_parse_assigned(const void *p, size_t len, int max_nodes, int *closed,
			char *why, size_t wlen)
{
	const char *s = p;
	int64_t n;

	if (len == 2 && memcmp(s, "ok", 2) == 0) {
		*closed = 0;
		return 0;
	}
	if (len > 3 && memcmp(s, "ok ", 3) == 0) {
		if (rdzv_parse_int(s + 3, len - 3, 1, max_nodes, &n, why, wlen))
			return CRUN_EPROTO;
		*closed = (int)n;
		return 0;
	}
	if (len >= 6 && memcmp(s, "abort ", 6) == 0) {
		*closed = -1;
		return 0;
	}
	return reason(why, wlen, "neither \"ok [N]\" nor \"abort ...\"");
}

int rdzv_parse_int(const void *p, size_t len, int64_t lo, int64_t hi,
		   int64_t *out, char *why, size_t wlen)
{
	struct cur c = {p, (const char *)p + len};
	const char *f;
	size_t n;

	if (check_len(len, why, wlen))
		return CRUN_EPROTO;
	n = cur_field(&c, &f);
	if (n == 0 || !cur_done(&c) || field_int(f, n, lo, hi, out) != 0)
		return reason(why, wlen, "'%.*s' is not a number in %lld..%lld",
			      (int)(len > 32 ? 32 : len), (const char *)p,
			      (long long)lo, (long long)hi);
	return 0;
}

/* A descriptor's "ip=" list: comma-separated IPv4 or IPv6 literals. */
static int parse_ips(const char *f, size_t n, char *out, char *why, size_t wlen)
{
	size_t i = 0;

	if (n == 0 || n > RDZV_MAX_FIELD)
		return reason(why, wlen, "ip= list of %zu bytes (1..%d)", n,
			      RDZV_MAX_FIELD);
	while (i <= n) {
		size_t e = i;
		char lit[INET6_ADDRSTRLEN];
		unsigned char bin[16];

		while (e < n && f[e] != ',')
			e++;
		if (e - i == 0 || e - i >= sizeof(lit))
			return reason(why, wlen,
				      "ip= list '%.*s' has an empty "
				      "or overlong field",
				      (int)(n > 64 ? 64 : n), f);
		memcpy(lit, f + i, e - i);
		lit[e - i] = '\0';
		if (inet_pton(AF_INET, lit, bin) != 1 &&
		    inet_pton(AF_INET6, lit, bin) != 1)
			return reason(why, wlen,
				      "ip= field '%s' is not an address", lit);
		i = e + 1;
	}
	memcpy(out, f, n);
	out[n] = '\0';
	return 0;
}

int rdzv_parse_descr(const void *p, size_t len, int max_nodes,
		     struct rdzv_descr *d, char *why, size_t wlen)
{
	struct cur c = {p, (const char *)p + len};
	char tmp[RDZV_MAX_FIELD + 1];
	int rc;

	memset(d, 0, sizeof(*d));
	if (check_len(len, why, wlen))
		return CRUN_EPROTO;
	/* The host first, for the message, if the record gets that far. */
	{
		struct cur h = c;
		const char *f;

		for (int i = 0; i < 4; i++)
			cur_field(&h, &f);
		if (next_str(&h, "host", tmp, sizeof(tmp), NULL, 0) == 0)
			memcpy(d->host, tmp, sizeof(d->host));
	}
	if ((rc = next_int(&c, "store-host flag", 0, 1, &d->is_host, why,
			   wlen)) ||
	    (rc = next_int(&c, "node rank", 0, max_nodes - 1, &d->node_rank,
			   why, wlen)) ||
	    (rc = next_int(&c, "nproc", 1, RDZV_MAX_NPROC, &d->nproc, why,
			   wlen)) ||
	    (rc = next_int(&c, "pid", 0, INT32_MAX, &d->pid, why, wlen)) ||
	    (rc = next_str(&c, "host", d->host, sizeof(d->host), why, wlen)) ||
	    (rc = next_str(&c, "address", d->addr, sizeof(d->addr), why,
			   wlen)) ||
	    (rc = next_role(&c, d->role, sizeof(d->role), why, wlen)))
		return rc;
	if (!cur_done(&c)) {
		struct cur ip = c;
		const char *f;
		size_t n = cur_field(&ip, &f);

		if (n >= 3 && memcmp(f, "ip=", 3) == 0) {
			if ((rc = parse_ips(f + 3, n - 3, d->ips, why, wlen)))
				return rc;
			c = ip;
		}
	}
	if (!cur_done(&c)) {
		const char *f;
		size_t n = cur_field(&c, &f);

		if (n < 4 || memcmp(f, "env=", 4) != 0)
			return reason(why, wlen,
				      "trailing field '%.*s' after the role "
				      "(not env=...)",
				      (int)(n > 32 ? 32 : n), f);
		if ((rc = fingerprint_parse(f + 4, n - 4, &d->fp, why, wlen)))
			return rc;
	}
	if (!cur_done(&c))
		return reason(why, wlen,
			      "trailing fields after the fingerprint");
	return 0;
}

int rdzv_parse_assign(const void *p, size_t len, int nodes, int nproc,
		      struct crun_ranks *k, char *why, size_t wlen)
{
	struct cur c = {p, (const char *)p + len};
	int64_t wmax = (int64_t)nodes * RDZV_MAX_NPROC;
	int rc;

	if (check_len(len, why, wlen))
		return CRUN_EPROTO;
	if (wmax > INT32_MAX)
		wmax = INT32_MAX;
	if (nodes < 1)
		return reason(why, wlen, "round of %d nodes", nodes);
	if ((rc = next_int(&c, "group rank", 0, nodes - 1, &k->group_rank, why,
			   wlen)) ||
	    (rc = next_int(&c, "group world size", nodes, nodes,
			   &k->group_world_size, why, wlen)) ||
	    (rc = next_int(&c, "base rank", 0, wmax - 1, &k->base_rank, why,
			   wlen)) ||
	    (rc = next_int(&c, "world size", 1, wmax, &k->world_size, why,
			   wlen)) ||
	    (rc = next_int(&c, "base role rank", 0, wmax - 1,
			   &k->base_role_rank, why, wlen)) ||
	    (rc = next_int(&c, "role world size", 1, wmax, &k->role_world_size,
			   why, wlen)) ||
	    (rc = next_int(&c, "local world size", nproc, nproc,
			   &k->local_world_size, why, wlen)))
		return rc;
	if (!cur_done(&c))
		return reason(why, wlen, "trailing fields");
	if ((int64_t)k->base_rank + k->local_world_size > k->world_size)
		return reason(why, wlen, "ranks %d..%d outside a world of %d",
			      k->base_rank,
			      k->base_rank + k->local_world_size - 1,
			      k->world_size);
	if ((int64_t)k->base_role_rank + k->local_world_size >
		k->role_world_size ||
	    k->role_world_size > k->world_size)
		return reason(why, wlen,
			      "role ranks %d..%d outside a role world of %d",
			      k->base_role_rank,
			      k->base_role_rank + k->local_world_size - 1,
			      k->role_world_size);
	return 0;
}

int rdzv_parse_master(const void *p, size_t len, char *addr, size_t alen,
		      int *port, int *by_worker, char *why, size_t wlen)
{
	struct cur c = {p, (const char *)p + len};
	const char *f;
	size_t n;
	int rc;

	if (check_len(len, why, wlen))
		return CRUN_EPROTO;
	if ((rc = next_str(&c, "address", addr, alen, why, wlen)) ||
	    (rc = next_int(&c, "port", 1, 65535, port, why, wlen)))
		return rc;
	n = cur_field(&c, &f);
	if (by_worker)
		*by_worker = n > 0;
	if (n > 0 && (n != 6 || memcmp(f, "worker", 6) != 0))
		return reason(why, wlen,
			      "'%.*s' after the port is not 'worker'",
			      (int)(n > 32 ? 32 : n), f);
	if (!cur_done(&c))
		return reason(why, wlen, "trailing fields after the port");
	return 0;
}

int rdzv_parse_end(const void *p, size_t len, int *kind, char *text,
		   size_t tlen, char *why, size_t wlen)
{
	const char *s = p;
	size_t n;

	if (check_len(len, why, wlen))
		return CRUN_EPROTO;
	if (strchr("FJDSXH", s[0]) == NULL || s[0] == '\0' ||
	    (len > 1 && s[1] != ' '))
		return reason(why, wlen, "unknown end kind '%c'",
			      s[0] >= 0x20 && s[0] < 0x7f ? s[0] : '?');
	*kind = s[0];
	n = len > 2 ? len - 2 : 0;
	if (n >= tlen)
		n = tlen - 1;
	for (size_t i = 0; i < n; i++)
		text[i] =
		    (s[2 + i] >= 0x20 && s[2 + i] < 0x7f) ? s[2 + i] : '?';
	text[n] = '\0';
	return 0;
}

int rdzv_parse_addrs(const void *p, size_t len, int nodes, char **out,
		     char *why, size_t wlen)
{
	struct cur c = {p, (const char *)p + len};
	char field[RDZV_MAX_ADDRS_FIELD + 1];
	char *copy;
	int rc;

	*out = NULL;
	if (len == 0 || nodes < 1 ||
	    len > (size_t)nodes * (RDZV_MAX_ADDRS_FIELD + 1))
		return reason(why, wlen, "%zu bytes for %d addresses", len,
			      nodes);
	for (int i = 0; i < nodes; i++)
		if ((rc = next_str(&c, "address", field, sizeof(field), why,
				   wlen)) != 0)
			return rc;
	if (!cur_done(&c))
		return reason(why, wlen, "more than %d addresses", nodes);
	copy = malloc(len + 1);
	if (copy == NULL)
		return UV_ENOMEM;
	memcpy(copy, p, len);
	copy[len] = '\0';
	*out = copy;
	return 0;
}

int rdzv_parse_counter(const void *p, size_t len, int64_t *out, char *why,
		       size_t wlen)
{
	struct cur c = {p, (const char *)p + len};
	const char *f;
	size_t n;

	if (check_len(len, why, wlen))
		return CRUN_EPROTO;
	n = cur_field(&c, &f);
	if (n == 0 || field_int(f, n, 0, INT64_MAX, out) != 0)
		return reason(why, wlen, "counter '%.*s' is not a number >= 0",
			      (int)(len > 32 ? 32 : len), (const char *)p);
	/* etcd's "N token": one printable word of who added last. */
	n = cur_field(&c, &f);
	if (n > 0 && (n > 64 || !cur_done(&c)))
		return reason(why, wlen, "counter with trailing fields");
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)f[i] < 0x21 || (unsigned char)f[i] >= 0x7f)
			return reason(why, wlen,
				      "counter has a control character");
	return 0;
}

/* The next field must be exactly word. */
static int next_word(struct cur *c, const char *word, char *why, size_t wlen)
{
	const char *f;
	size_t n = cur_field(c, &f);

	if (n != strlen(word) || memcmp(f, word, n) != 0)
		return reason(why, wlen, "expected '%s', found '%.*s'", word,
			      (int)(n > 32 ? 32 : n), f);
	return 0;
}

/* The next field as "name=<int in lo..hi>". */
static int next_named_int(struct cur *c, const char *name, int64_t lo,
			  int64_t hi, int *out, char *why, size_t wlen)
{
	const char *f;
	size_t n = cur_field(c, &f), k = strlen(name);
	int64_t v;

	if (n <= k + 1 || memcmp(f, name, k) != 0 || f[k] != '=')
		return reason(why, wlen, "%s= missing", name);
	if (field_int(f + k + 1, n - k - 1, lo, hi, &v) != 0)
		return reason(why, wlen,
			      "%s '%.*s' is not a number in %lld..%lld", name,
			      (int)(n - k - 1 > 32 ? 32 : n - k - 1), f + k + 1,
			      (long long)lo, (long long)hi);
	*out = (int)v;
	return 0;
}

/* s[0..n) as a number of seconds as %g prints it (finite, >= 0). */
static int seconds_field(const char *s, size_t n, double *out)
{
	char buf[33], *end;

	if (n == 0 || n >= sizeof(buf))
		return -1;
	for (size_t i = 0; i < n; i++)
		if (strchr("0123456789.e+-", s[i]) == NULL || s[i] == '\0')
			return -1;
	memcpy(buf, s, n);
	buf[n] = '\0';
	*out = strtod(buf, &end);
	return *end != '\0' || !(*out >= 0 && *out <= 1e300) ? -1 : 0;
}

int rdzv_parse_config(const void *p, size_t len, int max_nodes,
		      struct rdzv_config *out, char *why, size_t wlen)
{
	struct cur c = {p, (const char *)p + len};
	const char *f, *colon;
	size_t n;
	int64_t lo, hi, k = 0;
	double secs = 0;

	if (check_len(len, why, wlen))
		return CRUN_EPROTO;
	n = cur_field(&c, &f);
	colon = n > 7 ? memchr(f, ':', n) : NULL;
	if (n <= 7 || memcmp(f, "nnodes=", 7) != 0 || colon == NULL ||
	    field_int(f + 7, (size_t)(colon - f - 7), 1, max_nodes, &lo) ||
	    field_int(colon + 1, (size_t)(f + n - colon - 1), lo, max_nodes,
		      &hi))
		return reason(why, wlen,
			      "expected nnodes=MIN:MAX with 1 <= MIN <= MAX "
			      "<= %d",
			      max_nodes);
	n = cur_field(&c, &f);
	if (n <= 8 || memcmp(f, "backend=", 8) != 0 ||
	    next_str(&(struct cur){f + 8, f + n}, "backend", out->backend,
		     sizeof(out->backend), why, wlen))
		return reason(why, wlen, "expected backend=NAME");
	/* With exclude_after on, rdzv.c adds "exclude=K:S" (K 1..32, S the
	 * cooldown in seconds, as %g prints it); then "proto=P". */
	n = cur_field(&c, &f);
	if (n > 0 && (n <= 6 || memcmp(f, "proto=", 6) != 0)) {
		colon = n > 8 ? memchr(f, ':', n) : NULL;
		if (n <= 8 || memcmp(f, "exclude=", 8) != 0 || colon == NULL ||
		    field_int(f + 8, (size_t)(colon - f - 8), 1, 32, &k) ||
		    seconds_field(colon + 1, (size_t)(f + n - colon - 1),
				  &secs))
			return reason(why, wlen,
				      "expected exclude=K:SECONDS after the "
				      "backend");
		n = cur_field(&c, &f);
	}
	if (n > 0) {
		int64_t proto;

		if (n <= 6 || memcmp(f, "proto=", 6) != 0 ||
		    field_int(f + 6, n - 6, 1, 999, &proto))
			return reason(why, wlen, "expected proto=1..999 last");
	}
	if (!cur_done(&c))
		return reason(why, wlen, "trailing fields after the backend");
	out->min_nodes = (int)lo;
	out->max_nodes = (int)hi;
	out->exclude_after = (int)k;
	out->exclude_for = secs;
	return 0;
}

int rdzv_parse_params(const void *p, size_t len, struct rdzv_params *out,
		      char *why, size_t wlen)
{
	struct cur c = {p, (const char *)p + len};
	int rc;

	if (check_len(len, why, wlen))
		return CRUN_EPROTO;
	if ((rc = next_named_int(&c, "max_restarts", 0, INT32_MAX,
				 &out->max_restarts, why, wlen)) ||
	    (rc = next_named_int(&c, "keep_alive_ms", 1, 3600000,
				 &out->keep_alive_ms, why, wlen)))
		return rc;
	if (!cur_done(&c))
		return reason(why, wlen, "trailing fields");
	return 0;
}

int rdzv_parse_failure(const void *p, size_t len, struct rdzv_failure *f,
		       char *why, size_t wlen)
{
	struct cur c = {p, (const char *)p + len};
	const char *fl;
	size_t n;
	int64_t ms;
	int rc, again;

	memset(f, 0, sizeof(*f));
	if (check_len(len, why, wlen))
		return CRUN_EPROTO;
	if ((rc = next_int(&c, "round", 0, INT32_MAX, &f->round, why, wlen)))
		return rc;
	n = cur_field(&c, &fl);
	/* Up to the year 9999: a time, not any number. */
	if (n == 0 || field_int(fl, n, 0, 253402300799999LL, &ms) != 0)
		return reason(why, wlen, "time '%.*s' is not in ms since 1970",
			      (int)(n > 32 ? 32 : n), fl);
	f->unix_ms = ms;
	if ((rc = next_int(&c, "exit code", -255, 255, &f->exit_code, why,
			   wlen)) ||
	    (rc = next_word(&c, "rank", why, wlen)) ||
	    (rc =
		 next_int(&c, "rank", 0, INT32_MAX - 1, &f->rank, why, wlen)) ||
	    (rc = next_word(&c, "(local", why, wlen)) ||
	    (rc = next_word(&c, "rank", why, wlen)))
		return rc;
	n = cur_field(&c, &fl);
	if (n < 2 || fl[n - 1] != ')' ||
	    field_int(fl, n - 1, 0, RDZV_MAX_NPROC - 1, &ms) != 0)
		return reason(why, wlen,
			      "local rank '%.*s' is not a number in "
			      "0..%d followed by ')'",
			      (int)(n > 32 ? 32 : n), fl, RDZV_MAX_NPROC - 1);
	f->local_rank = (int)ms;
	if ((rc = next_word(&c, "on", why, wlen)) ||
	    (rc = next_str(&c, "host", f->host, sizeof(f->host), why, wlen)) ||
	    (rc = next_word(&c, "exited", why, wlen)) ||
	    (rc = next_word(&c, "with", why, wlen)) ||
	    (rc = next_int(&c, "exit code", -255, 255, &again, why, wlen)))
		return rc;
	if (again != f->exit_code)
		return reason(why, wlen, "exit codes %d and %d differ",
			      f->exit_code, again);
	if (!cur_done(&c))
		return reason(why, wlen, "trailing fields");
	return 0;
}

int rdzv_parse_envcheck(const void *p, size_t len, char *text, size_t tlen,
			char *why, size_t wlen)
{
	const unsigned char *s = p;
	int lines = 0;

	if (len == 0)
		return reason(why, wlen, "empty record");
	if (len > RDZV_MAX_ENVCHECK || len >= tlen)
		return reason(why, wlen, "record of %zu bytes (at most %d)",
			      len, RDZV_MAX_ENVCHECK);
	if (len == 1 && s[0] == '-') {
		text[0] = '\0';
		return 0;
	}
	for (size_t i = 0; i < len; i++) {
		if (s[i] == '\n') {
			if ((i == 0 || s[i - 1] == '\n'))
				return reason(why, wlen, "an empty line");
			if (++lines > 16)
				return reason(why, wlen, "more than 16 lines");
		} else if (s[i] < 0x20 || s[i] >= 0x7f) {
			return reason(why, wlen,
				      "a byte outside printable ASCII at "
				      "offset %zu",
				      i);
		}
	}
	if (s[len - 1] != '\n')
		return reason(why, wlen, "last line not ended by a newline");
	memcpy(text, p, len);
	text[len] = '\0';
	return 0;
}

/* A hex mask of exactly ceil(nproc / 4) digits into one flag per rank. */
static int next_mask(struct cur *c, const char *what, int nproc,
		     unsigned char *flags, char *why, size_t wlen)
{
	const char *f;
	size_t n = cur_field(c, &f), want = ((size_t)nproc + 3) / 4;

	if (n == 0)
		return reason(why, wlen, "%s mask missing", what);
	if (n != want)
		return reason(why, wlen,
			      "%s mask of %zu digits for %d ranks (want %zu)",
			      what, n, nproc, want);
	for (size_t i = 0; i < n; i++) {
		int v;

		if (f[i] >= '0' && f[i] <= '9')
			v = f[i] - '0';
		else if (f[i] >= 'a' && f[i] <= 'f')
			v = f[i] - 'a' + 10;
		else
			return reason(why, wlen, "%s mask has '%c'", what,
				      f[i] > 0x20 && f[i] < 0x7f ? f[i] : '?');
		for (int b = 0; b < 4; b++) {
			size_t r = i * 4 + (size_t)b;

			if (r >= (size_t)nproc && (v >> b & 1))
				return reason(why, wlen,
					      "%s mask names local rank %zu "
					      "of %d",
					      what, r, nproc);
			if (r < (size_t)nproc)
				flags[r] = (unsigned char)(v >> b & 1);
		}
	}
	return 0;
}

int rdzv_parse_diag(const void *p, size_t len, int nodes, int world,
		    struct rdzv_diag *d, char *why, size_t wlen)
{
	struct cur c = {p, (const char *)p + len};
	int rc;

	memset(d, 0, sizeof(*d));
	if (check_len(len, why, wlen))
		return CRUN_EPROTO;
	if (nodes < 1 || world < 1)
		return reason(why, wlen, "round of %d nodes and %d ranks",
			      nodes, world);
	if ((rc = next_int(&c, "group rank", 0, nodes - 1, &d->group_rank, why,
			   wlen)) ||
	    (rc = next_int(&c, "base rank", 0, world - 1, &d->base_rank, why,
			   wlen)) ||
	    (rc = next_int(&c, "nproc", 1,
			   world < RDZV_DIAG_MAX_NPROC ? world
						       : RDZV_DIAG_MAX_NPROC,
			   &d->nproc, why, wlen)))
		return rc;
	if ((int64_t)d->base_rank + d->nproc > world)
		return reason(why, wlen, "ranks %d..%d outside a world of %d",
			      d->base_rank, d->base_rank + d->nproc - 1, world);
	if ((rc = next_mask(&c, "connected", d->nproc, d->connected, why,
			    wlen)) ||
	    (rc = next_mask(&c, "trying", d->nproc, d->trying, why, wlen)) ||
	    (rc = next_str(&c, "host", d->host, sizeof(d->host), why, wlen)))
		return rc;
	if (!cur_done(&c))
		return reason(why, wlen, "trailing fields after the host");
	return 0;
}

/* The count that opens a list record, with the record's length checked. */
static int list_count(struct cur *c, size_t len, int max, int *n, char *why,
		      size_t wlen)
{
	if (len == 0)
		return reason(why, wlen, "empty record");
	if (len > RDZV_MAX_LIST_RECORD)
		return reason(why, wlen, "record of %zu bytes (at most %d)",
			      len, RDZV_MAX_LIST_RECORD);
	return next_int(c, "count", 0, max, n, why, wlen);
}

int rdzv_parse_fails(const void *p, size_t len, struct rdzv_fail *f, int max,
		     int *n, char *why, size_t wlen)
{
	struct cur c = {p, (const char *)p + len};
	int rc, count;

	*n = 0;
	if (max > RDZV_MAX_FAILS)
		max = RDZV_MAX_FAILS;
	if ((rc = list_count(&c, len, max, &count, why, wlen)) != 0)
		return rc;
	for (int i = 0; i < count; i++) {
		if ((rc = next_int(&c, "round", 0, INT32_MAX, &f[i].round, why,
				   wlen)) ||
		    (rc = next_str(&c, "host", f[i].host, sizeof(f[i].host),
				   why, wlen)) ||
		    (rc = next_node(&c, f[i].addr, sizeof(f[i].addr), f[i].id,
				    why, wlen)))
			return rc;
		if (i > 0 && f[i].round <= f[i - 1].round)
			return reason(why, wlen,
				      "round %d after round %d: not in order",
				      f[i].round, f[i - 1].round);
	}
	if (!cur_done(&c))
		return reason(why, wlen, "more than %d entries", count);
	*n = count;
	return 0;
}

int rdzv_parse_excluded(const void *p, size_t len, struct rdzv_exclusion *x,
			int max, int *n, char *why, size_t wlen)
{
	struct cur c = {p, (const char *)p + len};
	int rc, count;

	*n = 0;
	if (max > RDZV_MAX_EXCLUDED)
		max = RDZV_MAX_EXCLUDED;
	if ((rc = list_count(&c, len, max, &count, why, wlen)) != 0)
		return rc;
	for (int i = 0; i < count; i++) {
		const char *fp;
		size_t fn;

		if ((rc = next_str(&c, "host", x[i].host, sizeof(x[i].host),
				   why, wlen)) ||
		    (rc = next_node(&c, x[i].addr, sizeof(x[i].addr), x[i].id,
				    why, wlen)))
			return rc;
		fn = cur_field(&c, &fp);
		if (fn == 0 ||
		    field_int(fp, fn, 0, (int64_t)1 << 40, &x[i].until) != 0)
			return reason(why, wlen,
				      "until '%.*s' is not a time in 0..2^40",
				      (int)(fn > 32 ? 32 : fn), fp);
		if ((rc = next_int(&c, "round", 0, INT32_MAX, &x[i].round, why,
				   wlen)) ||
		    (rc = next_int(&c, "failures", 1, RDZV_MAX_FAILS,
				   &x[i].fails, why, wlen)))
			return rc;
		for (int j = 0; j < i; j++)
			if (strcmp(x[j].host, x[i].host) == 0 &&
			    strcmp(x[j].addr, x[i].addr) == 0 &&
			    strcmp(x[j].id, x[i].id) == 0)
				return reason(why, wlen, "%s %s listed twice",
					      x[i].host, x[i].addr);
	}
	if (!cur_done(&c))
		return reason(why, wlen, "more than %d entries", count);
	*n = count;
	return 0;
}

int rdzv_check_excluded(const struct rdzv_exclusion *x, int n, int64_t now,
			double exclude_for, char *why, size_t wlen)
{
	/* In doubles: a forged exclude_for may be near any size. */
	double max = (double)now + exclude_for + 1 + RDZV_EXCLUDE_SKEW_S;

	for (int i = 0; i < n; i++)
		if ((double)x[i].until > max)
			return reason(why, wlen,
				      "%.64s (%.64s) is left out %lld s ahead, "
				      "more than exclude_for=%g s allows",
				      x[i].host, x[i].addr,
				      (long long)(x[i].until - now),
				      exclude_for);
	return 0;
}

int rdzv_parse_stall(const void *p, size_t len, char *host, size_t hlen,
		     struct rdzv_stall_rank *r, int max, int *n, char *why,
		     size_t wlen)
{
	struct cur c = {p, (const char *)p + len};
	int rc, count;

	*n = 0;
	if ((rc = next_str(&c, "host", host, hlen, why, wlen)) ||
	    (rc = list_count(&c, len, max, &count, why, wlen)))
		return rc;
	for (int i = 0; i < count; i++) {
		const char *f, *eol;
		size_t wn;

		if ((rc = next_int(&c, "rank", 0, INT32_MAX - 1, &r[i].rank,
				   why, wlen)))
			return rc;
		/* The rest of the line, without its leading blanks. */
		while (c.p < c.end && *c.p == ' ')
			c.p++;
		f = c.p;
		eol = memchr(f, '\n', (size_t)(c.end - f));
		c.p = eol ? eol : c.end;
		wn = (size_t)(c.p - f);
		if (wn == 0 || wn > RDZV_MAX_STALL_WHERE)
			return reason(why, wlen,
				      "where of rank %d is %zu bytes (1..%d)",
				      r[i].rank, wn, RDZV_MAX_STALL_WHERE);
		for (size_t k = 0; k < wn; k++)
			if ((unsigned char)f[k] < 0x20 ||
			    (unsigned char)f[k] >= 0x7f)
				return reason(why, wlen,
					      "where of rank %d has a control "
					      "character",
					      r[i].rank);
		memcpy(r[i].where, f, wn);
		r[i].where[wn] = '\0';
	}
	if (!cur_done(&c))
		return reason(why, wlen, "more than %d ranks", count);
	*n = count;
	return 0;
}

/*
 * The writers. Each formats what its parser above reads back; the algorithm
 * writes no record by hand. Like snprintf they cut what does not fit, but
 * return the length written (at most len - 1), never the length wanted.
 */
static size_t written(int n, size_t len)
{
	if (n < 0)
		return 0;
	return (size_t)n < len ? (size_t)n : len - 1;
}

size_t rdzv_format_descr(char *buf, size_t len, const struct rdzv_descr_in *d)
{
	const char *ips = d->ips ? d->ips : "";
	const char *env = d->env ? d->env : "";
	char role[3 * sizeof(((struct rdzv_descr *)0)->role)];
	int base, room, n = (int)strlen(ips);

	role_field(d->role, role, sizeof(role));
	/* The ip= list gives way: as many whole addresses as fit. */
	base = snprintf(NULL, 0, "%d %d %d %d %s %s %s%s%s", d->is_host,
			d->node_rank, d->nproc, d->pid, d->host, d->addr, role,
			*env ? " env=" : "", env);
	room = RDZV_MAX_RECORD - base - 4; /* " ip=" */
	while (n > room) {
		const char *c = memrchr(ips, ',', (size_t)n);

		n = c ? (int)(c - ips) : 0;
	}
	return written(snprintf(buf, len, "%d %d %d %d %s %s %s%s%.*s%s%s",
				d->is_host, d->node_rank, d->nproc, d->pid,
				d->host, d->addr, role, n > 0 ? " ip=" : "", n,
				ips, *env ? " env=" : "", env),
		       len);
}

size_t rdzv_format_assign(char *buf, size_t len, const struct crun_ranks *k)
{
	return written(snprintf(buf, len, "%d %d %d %d %d %d %d", k->group_rank,
				k->group_world_size, k->base_rank,
				k->world_size, k->base_role_rank,
				k->role_world_size, k->local_world_size),
		       len);
}

size_t rdzv_format_assigned(char *buf, size_t len, int closed)
{
	return written(snprintf(buf, len, "ok %d", closed), len);
}

size_t rdzv_format_abort(char *buf, size_t len, int kind, const char *why)
{
	return written(snprintf(buf, len, "abort %c %s", kind, why), len);
}

size_t rdzv_format_master(char *buf, size_t len, const char *addr, int port,
			  int by_worker)
{
	return written(snprintf(buf, len, "%s %d%s", addr, port,
				by_worker ? " worker" : ""),
		       len);
}

size_t rdzv_format_end(char *buf, size_t len, int kind, const char *why)
{
	return written(snprintf(buf, len, "%c %s", kind, why), len);
}

size_t rdzv_format_config(char *buf, size_t len, int min, int max,
			  const char *backend, int exclude_after,
			  double exclude_for)
{
	size_t n = written(
	    snprintf(buf, len, "nnodes=%d:%d backend=%s", min, max, backend),
	    len);

	if (exclude_after > 0)
		n += written(snprintf(buf + n, len - n, " exclude=%d:%g",
				      exclude_after, exclude_for),
			     len - n);
	return n + written(snprintf(buf + n, len - n, " proto=%d", RDZV_PROTO),
			   len - n);
}

size_t rdzv_format_params(char *buf, size_t len, int max_restarts,
			  long long keep_alive_ms)
{
	return written(snprintf(buf, len, "max_restarts=%d keep_alive_ms=%lld",
				max_restarts, keep_alive_ms),
		       len);
}

size_t rdzv_format_failure(char *buf, size_t len, int round, int64_t unix_ms,
			   const char *why)
{
	return written(
	    snprintf(buf, len, "%d %lld %s", round, (long long)unix_ms, why),
	    len);
}

size_t rdzv_format_fails(char *buf, size_t len, const struct rdzv_fail *f,
			 int n)
{
	size_t o = (size_t)snprintf(buf, len, "%d", n);

	for (int i = 0; i < n && o < len; i++)
		o += (size_t)snprintf(buf + o, len - o, " %d %s %s%s%s",
				      f[i].round, f[i].host, f[i].addr,
				      *f[i].id ? "#" : "", f[i].id);
	return o < len ? o : len - 1;
}

size_t rdzv_format_excluded(char *buf, size_t len,
			    const struct rdzv_exclusion *x, int n)
{
	size_t o = (size_t)snprintf(buf, len, "%d", n);

	for (int i = 0; i < n && o < len; i++)
		o += (size_t)snprintf(buf + o, len - o, " %s %s%s%s %lld %d %d",
				      x[i].host, x[i].addr, *x[i].id ? "#" : "",
				      x[i].id, (long long)x[i].until,
				      x[i].round, x[i].fails);
	return o < len ? o : len - 1;
}

size_t rdzv_format_stall(char *buf, size_t len, const char *host,
			 const struct rdzv_stall_rank *r, int n)
{
	size_t o = written(snprintf(buf, len, "%s %d", host, n), len);

	for (int i = 0; i < n && o + 1 < len; i++)
		o += written(snprintf(buf + o, len - o, "\n%d %s", r[i].rank,
				      r[i].where),
			     len - o);
	return o;
}

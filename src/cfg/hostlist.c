/*
 * Slurm hostlist expansion and compression (see include/crun/hostlist.h for
 * the grammar).
 *
 * Expansion makes two passes over the text and never stores the ranges. The
 * first pass validates each token, counts its names and the exact bytes they
 * need, and records where each bracket group starts; the second pass walks
 * the groups like an odometer (the last group turning fastest), re-reading
 * range items from the text, and writes the names into a single allocation:
 * the pointer array followed by the strings. So the memory used is what the
 * result needs, the caps are checked before anything is allocated, and one
 * free() releases everything.
 */
#include <assert.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "crun/err.h"
#include "crun/hostlist.h"

/* One "[...]" in a token, plus the literal text just before it. */
struct hl_group {
	const char *lit; /* text between the previous ']' and '[' */
	size_t litlen;
	const char *items; /* first character after '[' */
	uint64_t count;	   /* names the group expands to */
	uint64_t digits;   /* bytes of all its numbers, summed */
	size_t maxdigits;  /* bytes of its longest number */

	/* Odometer state for the second pass. */
	const char *next; /* the ',' or ']' after the current item */
	uint64_t val, hi;
	int width;
};

/* One top-level token: groups, then the text after the last ']'. */
struct hl_token {
	const char *start, *end;
	int ngroups;
	struct hl_group g[HOSTLIST_MAX_GROUPS];
	const char *tail;
	size_t taillen;
	uint64_t count; /* names */
	uint64_t bytes; /* bytes of all names, without NULs */
};

static int hl_is_sep(char c)
{
	return c == ',' || c == ' ' || c == '\t' || c == '\n';
}

static int hl_is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* Number of decimal digits of v (1 for 0). */
static int hl_ndigits(uint64_t v)
{
	int d = 1;

	while (v >= 10) {
		v /= 10;
		d++;
	}
	return d;
}

/* Write v zero-padded to width into p; return the bytes written. */
static size_t hl_fmt(char *p, uint64_t v, int width)
{
	char tmp[24];
	int n = 0;

	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v > 0);
	while (n < width)
		tmp[n++] = '0';
	for (int i = 0; i < n; i++)
		p[i] = tmp[n - 1 - i];
	return (size_t)n;
}

/* Bytes of every number lo..hi printed at width: split at powers of ten. */
static uint64_t hl_digit_bytes(uint64_t lo, uint64_t hi, int width)
{
	uint64_t sum = 0, from = lo;

	while (from <= hi) {
		int d = hl_ndigits(from);
		uint64_t top = 9; /* largest number with d digits */

		for (int i = 1; i < d; i++)
			top = top * 10 + 9;
		if (top > hi)
			top = hi;
		sum += (top - from + 1) * (uint64_t)(d > width ? d : width);
		from = top + 1;
	}
	return sum;
}

/*
 * Format an error: "column C: <what> in '<token>'", the token cut to a
 * readable length. col is 0-based here, printed 1-based.
 */
static int hl_err(char *errmsg, size_t errlen, int code, size_t col,
		  const struct hl_token *t, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

static int hl_err(char *errmsg, size_t errlen, int code, size_t col,
		  const struct hl_token *t, const char *fmt, ...)
{
	char what[160];
	va_list ap;
	int tlen;

	if (errmsg == NULL || errlen == 0)
		return code;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	tlen = (int)(t->end - t->start);
	if (tlen > 48)
		snprintf(errmsg, errlen, "column %zu: %s in '%.45s...'",
			 col + 1, what, t->start);
	else
		snprintf(errmsg, errlen, "column %zu: %s in '%.*s'", col + 1,
			 what, tlen, t->start);
	return code;
}

/* A character as it can be shown inside quotes. */
static const char *hl_show(char c, char buf[8])
{
	if (c >= 0x20 && c < 0x7f)
		snprintf(buf, 8, "%c", c);
	else
		snprintf(buf, 8, "\\x%02x", (unsigned char)c);
	return buf;
}

/*
 * Parse a decimal bound at *p: at most HOSTLIST_MAX_DIGITS digits. Sets *len
 * to the digits read (0 if *p is not a digit) and advances *p.
 */
static uint64_t hl_number(const char **p, int *len)
{
	uint64_t v = 0;
	int n = 0;

	while (hl_is_digit(**p) && n <= HOSTLIST_MAX_DIGITS) {
		v = v * 10 + (uint64_t)(**p - '0');
		(*p)++;
		n++;
	}
	*len = n;
	return v;
}

/*
 * Read one item "N" or "LO-HI" at p, already validated. Sets the group's
 * odometer to its first number and returns the ',' or ']' after it.
 */
static const char *hl_load_item(struct hl_group *g, const char *p)
{
	int len;

	g->val = hl_number(&p, &len);
	g->width = len;
	g->hi = g->val;
	if (*p == '-') {
		p++;
		g->hi = hl_number(&p, &len);
	}
	g->next = p;
	return p;
}

/*
 * Validate the range list after '[' at *pp (list is the whole input, for
 * columns), fill g's count and digit bytes, and leave *pp after the ']'.
 */
static int hl_parse_group(const char *list, const char **pp, struct hl_token *t,
			  struct hl_group *g, char *errmsg, size_t errlen)
{
	const char *open = *pp - 1, *p = *pp;
	size_t nitems = 0;
	char cb[8];

	g->items = p;
	g->count = 0;
	g->digits = 0;
	g->maxdigits = 0;
	if (*p == ']')
		return hl_err(errmsg, errlen, CRUN_ECONFIG, (size_t)(p - list),
			      t, "empty range list");
	for (;;) {
		const char *lo_at = p, *hi_at;
		uint64_t lo, hi;
		int lolen, hilen, maxd;

		lo = hl_number(&p, &lolen);
		if (lolen == 0) {
			if (*p == '\0')
				return hl_err(errmsg, errlen, CRUN_ECONFIG,
					      (size_t)(open - list), t,
					      "unterminated '['");
			return hl_err(
			    errmsg, errlen, CRUN_ECONFIG, (size_t)(p - list), t,
			    "expected a number, got '%s'", hl_show(*p, cb));
		}
		if (lolen > HOSTLIST_MAX_DIGITS)
			return hl_err(errmsg, errlen, CRUN_ECONFIG,
				      (size_t)(lo_at - list), t,
				      "number longer than %d digits",
				      HOSTLIST_MAX_DIGITS);
		hi = lo;
		if (*p == '-') {
			p++;
			hi_at = p;
			hi = hl_number(&p, &hilen);
			if (hilen == 0) {
				if (*p == '\0')
					return hl_err(errmsg, errlen,
						      CRUN_ECONFIG,
						      (size_t)(open - list), t,
						      "unterminated '['");
				return hl_err(errmsg, errlen, CRUN_ECONFIG,
					      (size_t)(p - list), t,
					      "expected a number after '-', "
					      "got '%s'",
					      hl_show(*p, cb));
			}
			if (hilen > HOSTLIST_MAX_DIGITS)
				return hl_err(errmsg, errlen, CRUN_ECONFIG,
					      (size_t)(hi_at - list), t,
					      "number longer than %d digits",
					      HOSTLIST_MAX_DIGITS);
			if (lo > hi)
				return hl_err(errmsg, errlen, CRUN_ECONFIG,
					      (size_t)(lo_at - list), t,
					      "descending range '%.*s'",
					      (int)(p - lo_at), lo_at);
			if (hi - lo >= HOSTLIST_MAX_RANGE)
				return hl_err(errmsg, errlen, CRUN_ECONFIG,
					      (size_t)(lo_at - list), t,
					      "range '%.*s' holds more than %d "
					      "names",
					      (int)(p - lo_at), lo_at,
					      HOSTLIST_MAX_RANGE);
		}
		if (++nitems > HOSTLIST_MAX_RANGES)
			return hl_err(errmsg, errlen, CRUN_ECONFIG,
				      (size_t)(lo_at - list), t,
				      "more than %d ranges in one '[...]'",
				      HOSTLIST_MAX_RANGES);
		g->count += hi - lo + 1;
		g->digits += hl_digit_bytes(lo, hi, lolen);
		maxd = hl_ndigits(hi);
		if (maxd < lolen)
			maxd = lolen;
		if ((size_t)maxd > g->maxdigits)
			g->maxdigits = (size_t)maxd;

		if (*p == ']') {
			*pp = p + 1;
			return 0;
		}
		if (*p == ',') {
			p++;
			if (*p == ',' || *p == ']')
				return hl_err(errmsg, errlen, CRUN_ECONFIG,
					      (size_t)(p - list), t,
					      "empty item in range list");
			continue;
		}
		if (*p == '\0')
			return hl_err(errmsg, errlen, CRUN_ECONFIG,
				      (size_t)(open - list), t,
				      "unterminated '['");
		if (*p == '[')
			return hl_err(errmsg, errlen, CRUN_ECONFIG,
				      (size_t)(p - list), t, "nested '['");
		return hl_err(errmsg, errlen, CRUN_ECONFIG, (size_t)(p - list),
			      t, "unexpected '%s' in range list",
			      hl_show(*p, cb));
	}
}

/*
 * Validate the token at *pp (not a separator, not the end), fill t, and
 * leave *pp at the separator or NUL after it.
 */
static int hl_parse_token(const char *list, const char **pp, struct hl_token *t,
			  char *errmsg, size_t errlen)
{
	const char *p = *pp, *lit = p;
	uint64_t count = 1, bytes, lits = 0;
	size_t maxlen = 0;
	int rc;

	/* Find the token's end first so messages can quote it whole. */
	t->start = p;
	for (int depth = 0; *p != '\0' && (depth > 0 || !hl_is_sep(*p)); p++) {
		if (*p == '[')
			depth = 1;
		else if (*p == ']')
			depth = 0;
	}
	t->end = p;
	t->ngroups = 0;

	for (p = t->start; p < t->end;) {
		struct hl_group *g;

		if (*p == ']')
			return hl_err(errmsg, errlen, CRUN_ECONFIG,
				      (size_t)(p - list), t, "unmatched ']'");
		if (*p != '[') {
			p++;
			continue;
		}
		if (t->ngroups == HOSTLIST_MAX_GROUPS)
			return hl_err(
			    errmsg, errlen, CRUN_ECONFIG, (size_t)(p - list), t,
			    "more than %d '[...]' groups", HOSTLIST_MAX_GROUPS);
		g = &t->g[t->ngroups++];
		g->lit = lit;
		g->litlen = (size_t)(p - lit);
		lits += g->litlen;
		maxlen += g->litlen;
		p++;
		rc = hl_parse_group(list, &p, t, g, errmsg, errlen);
		if (rc != 0)
			return rc;
		maxlen += g->maxdigits;
		lit = p;
	}
	t->tail = lit;
	t->taillen = (size_t)(t->end - lit);
	lits += t->taillen;
	maxlen += t->taillen;

	/* Counts: prefix groups first (Slurm's cap), then the last one. */
	for (int i = 0; i < t->ngroups; i++) {
		count *= t->g[i].count; /* <= 2^20 * 2^34: no overflow */
		if (i < t->ngroups - 1 && count > HOSTLIST_MAX_PREFIX)
			return hl_err(errmsg, errlen, CRUN_ECONFIG,
				      (size_t)(t->start - list), t,
				      "groups before the last '[' expand to "
				      "more than %d names",
				      HOSTLIST_MAX_PREFIX);
		if (count > HOSTLIST_MAX_HOSTS)
			return hl_err(errmsg, errlen, CRUN_ETOOBIG,
				      (size_t)(t->start - list), t,
				      "more than %d names", HOSTLIST_MAX_HOSTS);
	}
	if (maxlen > HOSTLIST_MAX_NAME)
		return hl_err(errmsg, errlen, CRUN_ETOOBIG,
			      (size_t)(t->start - list), t,
			      "a name longer than %d bytes", HOSTLIST_MAX_NAME);

	/* Each group's numbers appear count / group count times each. */
	bytes = count * lits;
	for (int i = 0; i < t->ngroups; i++)
		bytes += t->g[i].digits * (count / t->g[i].count);
	t->count = count;
	t->bytes = bytes;
	*pp = t->end;
	return 0;
}

/* Write every name of t at *pp, storing pointers at names[0..count). */
static void hl_write_token(struct hl_token *t, char **names, char **pp)
{
	char *p = *pp;

	for (int i = 0; i < t->ngroups; i++)
		hl_load_item(&t->g[i], t->g[i].items);
	for (uint64_t k = 0; k < t->count; k++) {
		int i;

		names[k] = p;
		for (i = 0; i < t->ngroups; i++) {
			memcpy(p, t->g[i].lit, t->g[i].litlen);
			p += t->g[i].litlen;
			p += hl_fmt(p, t->g[i].val, t->g[i].width);
		}
		memcpy(p, t->tail, t->taillen);
		p += t->taillen;
		*p++ = '\0';

		/* Turn the odometer: the last group first, carry leftwards. */
		for (i = t->ngroups - 1; i >= 0; i--) {
			struct hl_group *g = &t->g[i];

			if (g->val < g->hi) {
				g->val++;
				break;
			}
			if (*g->next == ',') {
				hl_load_item(g, g->next + 1);
				break;
			}
			hl_load_item(g, g->items);
		}
	}
	*pp = p;
}

int hostlist_expand(const char *list, char ***hosts, size_t *n, char *errmsg,
		    size_t errlen)
{
	struct hl_token t;
	const char *p;
	uint64_t count = 0, bytes = 0;
	char **names = NULL, *str;
	size_t k = 0;
	int rc;

	assert(list != NULL && hosts != NULL && n != NULL);
	*hosts = NULL;
	*n = 0;
	if (errmsg != NULL && errlen > 0)
		errmsg[0] = '\0';

	/* Pass 1: validate, count names and bytes. */
	for (p = list; *p != '\0';) {
		if (hl_is_sep(*p)) {
			p++;
			continue;
		}
		rc = hl_parse_token(list, &p, &t, errmsg, errlen);
		if (rc != 0)
			return rc;
		count += t.count;
		bytes += t.bytes + t.count;
		if (count > HOSTLIST_MAX_HOSTS) {
			if (errmsg != NULL && errlen > 0)
				snprintf(
				    errmsg, errlen,
				    "hostlist expands to more than %d names",
				    HOSTLIST_MAX_HOSTS);
			return CRUN_ETOOBIG;
		}
	}

	/* Pass 2: one block, the pointer array then the strings. */
	names = malloc((size_t)(count + 1) * sizeof(*names) + (size_t)bytes);
	if (names == NULL)
		return UV_ENOMEM;
	str = (char *)(names + count + 1);
	for (p = list; *p != '\0';) {
		if (hl_is_sep(*p)) {
			p++;
			continue;
		}
		rc = hl_parse_token(list, &p, &t, NULL, 0);
		assert(rc == 0);
		hl_write_token(&t, names + k, &str);
		k += (size_t)t.count;
	}
	assert(k == count);
	assert(str == (char *)(names + count + 1) + bytes);
	names[k] = NULL;
	*hosts = names;
	*n = k;
	return 0;
}

void hostlist_free(char **hosts)
{
	free(hosts);
}

/* A growable string for the compressor (curl's dynbuf, minus the cap). */
struct hl_buf {
	char *s;
	size_t len, cap;
};

static int hl_put(struct hl_buf *b, const char *s, size_t len)
{
	if (b->len + len + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 64;
		char *ns;

		while (cap < b->len + len + 1)
			cap *= 2;
		ns = realloc(b->s, cap);
		if (ns == NULL)
			return UV_ENOMEM;
		b->s = ns;
		b->cap = cap;
	}
	memcpy(b->s + b->len, s, len);
	b->len += len;
	b->s[b->len] = '\0';
	return 0;
}

/*
 * Split name into a prefix and its trailing digits. Returns the number of
 * digits (0 if the name does not end in 1..HOSTLIST_MAX_DIGITS digits, in
 * which case it is written as it is) and their value in *val.
 */
static size_t hl_split(const char *name, size_t len, uint64_t *val)
{
	size_t d = 0;

	while (d < len && hl_is_digit(name[len - 1 - d]))
		d++;
	if (d == 0 || d > HOSTLIST_MAX_DIGITS)
		return 0;
	*val = 0;
	for (size_t i = len - d; i < len; i++)
		*val = *val * 10 + (uint64_t)(name[i] - '0');
	return d;
}

/* Whether v printed at width is exactly the digits s[0..len). */
static int hl_prints_as(uint64_t v, int width, const char *s, size_t len)
{
	char tmp[24];

	return hl_fmt(tmp, v, width) == len && memcmp(tmp, s, len) == 0;
}

static int hl_check_name(const char *name, size_t i, char *errmsg,
			 size_t errlen)
{
	size_t len = strlen(name);
	const char *bad;

	if (len == 0 || len > HOSTLIST_MAX_NAME) {
		if (errmsg != NULL && errlen > 0)
			snprintf(errmsg, errlen, "host %zu: name %s", i + 1,
				 len == 0 ? "is empty" : "is too long");
		return CRUN_ECONFIG;
	}
	bad = strpbrk(name, ",[] \t\n");
	if (bad != NULL) {
		char cb[8];

		if (errmsg != NULL && errlen > 0)
			snprintf(
			    errmsg, errlen,
			    "host %zu: '%s' in a name cannot be written in "
			    "a hostlist",
			    i + 1, hl_show(*bad, cb));
		return CRUN_ECONFIG;
	}
	return 0;
}

int hostlist_compress(char *const *hosts, size_t n, char **out, char *errmsg,
		      size_t errlen)
{
	struct hl_buf b = {NULL, 0, 0};
	char num[24];
	size_t i = 0;
	int rc;

	assert(out != NULL && (hosts != NULL || n == 0));
	*out = NULL;
	for (size_t k = 0; k < n; k++) {
		rc = hl_check_name(hosts[k], k, errmsg, errlen);
		if (rc != 0)
			return rc;
	}
	rc = hl_put(&b, "", 0);
	while (rc == 0 && i < n) {
		const char *name = hosts[i];
		size_t len = strlen(name), plen, d, nranges = 0, j;
		uint64_t v;

		if (i > 0)
			rc = hl_put(&b, ",", 1);
		d = hl_split(name, len, &v);
		if (rc != 0)
			break;
		if (d == 0) {
			rc = hl_put(&b, name, len);
			i++;
			continue;
		}
		plen = len - d;

		/*
		 * Gather the run of names sharing this prefix; a range grows
		 * while the next number is one more and prints at its width.
		 * One name alone is written as it is.
		 */
		j = i + 1;
		if (j < n) {
			const char *nx = hosts[j];
			size_t nlen = strlen(nx);
			uint64_t nv;

			if (!(nlen > plen && memcmp(nx, name, plen) == 0 &&
			      hl_split(nx, nlen, &nv) == nlen - plen))
				j = i + 1; /* a group of one */
			else
				j = n; /* decide below */
		}
		if (j == i + 1) {
			rc = hl_put(&b, name, len);
			i++;
			continue;
		}

		rc = hl_put(&b, name, plen);
		if (rc == 0)
			rc = hl_put(&b, "[", 1);
		while (rc == 0 && i < n && nranges < HOSTLIST_MAX_RANGES) {
			const char *h = hosts[i];
			size_t hlen = strlen(h), hd;
			uint64_t lo, hi, nv;
			int width;

			if (!(hlen > plen && memcmp(h, name, plen) == 0))
				break;
			hd = hl_split(h, hlen, &lo);
			if (hd != hlen - plen)
				break;
			width = (int)hd;
			hi = lo;
			for (i++; i < n && hi - lo + 1 < HOSTLIST_MAX_RANGE;
			     i++) {
				const char *x = hosts[i];
				size_t xlen = strlen(x);

				if (!(xlen > plen &&
				      memcmp(x, name, plen) == 0))
					break;
				if (hl_split(x, xlen, &nv) != xlen - plen ||
				    nv != hi + 1 ||
				    !hl_prints_as(nv, width, x + plen,
						  xlen - plen))
					break;
				hi = nv;
			}
			if (nranges++ > 0)
				rc = hl_put(&b, ",", 1);
			if (rc == 0)
				rc = hl_put(&b, h + plen, hd);
			if (rc == 0 && hi != lo) {
				size_t nl = hl_fmt(num + 1, hi, width);

				num[0] = '-';
				rc = hl_put(&b, num, nl + 1);
			}
		}
		if (rc == 0)
			rc = hl_put(&b, "]", 1);
	}
	if (rc != 0) {
		free(b.s);
		return rc;
	}
	*out = b.s;
	return 0;
}

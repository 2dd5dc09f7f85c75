/*
 * Reading py-spy and faulthandler dumps (see pystack.h). One pass splits the
 * dump into threads and frames, pointing into the dump (nothing is copied
 * until the label is written); a second step picks the thread and the frame.
 * Both tools write one frame a line, innermost first, so a thread is its
 * header line and the frame lines that follow it.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "crun/err.h"
#include "crun/pystack.h"

struct frame {
	const char *func, *file;
	size_t funclen, filelen;
	long line; /* -1: none given */
};

struct thread {
	size_t first, n; /* frames[first .. first + n) */
	int named_main;	 /* py-spy: "MainThread" */
	int current;	 /* faulthandler: "Current thread" */
	int pyspy;
};

struct dump {
	struct frame *frames;
	size_t nframes;
	struct thread threads[PYSTACK_MAX_THREADS];
	size_t nthreads;
};

/* A bounded writer: what does not fit is cut, ending in "...". */
struct out {
	char *buf;
	size_t cap, len;
	int cut;
};

static void out_init(struct out *o, char *buf, size_t cap)
{
	o->buf = buf;
	o->cap = cap;
	o->len = 0;
	o->cut = 0;
	buf[0] = '\0';
}

/* Append n bytes, each byte outside printable ASCII as '?'. */
static void out_put(struct out *o, const char *s, size_t n)
{
	for (size_t i = 0; i < n && !o->cut; i++) {
		unsigned char c = (unsigned char)s[i];

		if (o->len + 1 >= o->cap) {
			o->cut = 1;
			break;
		}
		o->buf[o->len++] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
	}
	o->buf[o->len] = '\0';
	if (o->cut) {
		/* Mark the cut where there is room for it. */
		size_t m = o->cap - 1 < 3 ? o->cap - 1 : 3;

		memset(o->buf + o->cap - 1 - m, '.', m);
	}
}

static void out_str(struct out *o, const char *s)
{
	out_put(o, s, strlen(s));
}

static int starts(const char *s, size_t n, const char *prefix)
{
	size_t k = strlen(prefix);

	return n >= k && memcmp(s, prefix, k) == 0;
}

/* The last occurrence of needle in s[0..n), or NULL. */
static const char *find_last(const char *s, size_t n, const char *needle)
{
	size_t k = strlen(needle);

	if (n < k)
		return NULL;
	for (size_t i = n - k + 1; i-- > 0;)
		if (memcmp(s + i, needle, k) == 0)
			return s + i;
	return NULL;
}

/* Digits s[0..n) as a line number (at most 9 of them), or -1. */
static long parse_line(const char *s, size_t n)
{
	long v = 0;

	if (n == 0 || n > 9)
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	return v;
}

/* faulthandler: `  File "x.py", line 41 in func`. */
static int parse_fh_frame(const char *s, size_t n, struct frame *f)
{
	const char *q, *in, *end = s + n;

	if (!starts(s, n, "  File \""))
		return 0;
	s += 8;
	q = find_last(s, (size_t)(end - s), "\", line ");
	if (q == NULL)
		return 0;
	f->file = s;
	f->filelen = (size_t)(q - s);
	q += 8;
	in = find_last(q, (size_t)(end - q), " in ");
	if (in == NULL)
		return 0;
	f->line = parse_line(q, (size_t)(in - q));
	f->func = in + 4;
	f->funclen = (size_t)(end - f->func);
	return 1;
}

/* py-spy: `    func (file.py:12)`, exactly four spaces in. */
static int parse_spy_frame(const char *s, size_t n, struct frame *f)
{
	const char *open, *colon, *end = s + n;

	if (!starts(s, n, "    ") || n < 8 || s[4] == ' ' || s[n - 1] != ')')
		return 0;
	s += 4;
	open = find_last(s, (size_t)(end - s), " (");
	if (open == NULL || open == s)
		return 0;
	f->func = s;
	f->funclen = (size_t)(open - s);
	f->file = open + 2;
	f->filelen = (size_t)(end - 1 - f->file);
	f->line = -1;
	colon = find_last(f->file, f->filelen, ":");
	if (colon != NULL) {
		long line =
		    parse_line(colon + 1, (size_t)(end - 1 - colon - 1));

		if (line >= 0) {
			f->line = line;
			f->filelen = (size_t)(colon - f->file);
		}
	}
	return 1;
}

/* A thread header opens a new thread; returns 0 for any other line. */
static int parse_header(const char *s, size_t n, struct thread *t)
{
	memset(t, 0, sizeof(*t));
	if (starts(s, n, "Current thread 0x")) {
		t->current = 1;
		return 1;
	}
	if (starts(s, n, "Stack (most recent call first):"))
		return 1;
	if (!starts(s, n, "Thread ") || n < 8 || s[7] < '0' || s[7] > '9')
		return 0;
	if (find_last(s, n, "(most recent call first):") != NULL)
		return 1;
	/* py-spy: Thread 21689 (idle): "MainThread" (the name optional). */
	t->pyspy = 1;
	t->named_main =
	    n >= 12 && memcmp(s + n - 12, "\"MainThread\"", 12) == 0;
	return 1;
}

/* Split the dump into threads and frames. */
static int dump_parse(struct dump *d, const char *s, size_t len)
{
	const char *end = s + len;
	struct thread *cur = NULL;

	d->frames = malloc(PYSTACK_MAX_FRAMES * sizeof(*d->frames));
	if (d->frames == NULL)
		return UV_ENOMEM;
	d->nframes = 0;
	d->nthreads = 0;
	while (s < end) {
		const char *nl = memchr(s, '\n', (size_t)(end - s));
		size_t n = (size_t)((nl ? nl : end) - s);
		struct thread t;
		struct frame f;

		if (n > 0 && s[n - 1] == '\r')
			n--;
		if (parse_header(s, n, &t)) {
			cur = NULL;
			if (d->nthreads < PYSTACK_MAX_THREADS) {
				cur = &d->threads[d->nthreads++];
				*cur = t;
				cur->first = d->nframes;
			}
		} else if (cur != NULL && d->nframes < PYSTACK_MAX_FRAMES &&
			   (cur->pyspy ? parse_spy_frame(s, n, &f)
				       : parse_fh_frame(s, n, &f))) {
			d->frames[d->nframes++] = f;
			cur->n++;
		}
		s += n;
		while (s < end && *s != '\n')
			s++; /* the '\r' dropped above */
		if (s < end)
			s++;
	}
	return d->nthreads > 0 ? 0 : CRUN_EPROTO;
}

/* The index of the main thread (see pystack.h for why). */
static size_t main_thread(const struct dump *d)
{
	size_t i, current = d->nthreads;

	if (d->threads[0].pyspy) {
		for (i = 0; i < d->nthreads; i++)
			if (d->threads[i].named_main)
				return i;
		return 0;
	}
	for (i = 0; i < d->nthreads; i++) {
		const struct thread *t = &d->threads[i];
		const struct frame *outer;

		if (t->current && current == d->nthreads)
			current = i;
		if (t->n == 0)
			continue;
		outer = &d->frames[t->first + t->n - 1];
		if (outer->funclen == 8 &&
		    memcmp(outer->func, "<module>", 8) == 0)
			return i;
	}
	return current < d->nthreads ? current : d->nthreads - 1;
}

/* The basename of s[0..n). */
static const char *base(const char *s, size_t n, size_t *blen)
{
	const char *slash = find_last(s, n, "/");
	const char *b = slash ? slash + 1 : s;

	*blen = (size_t)(s + n - b);
	return b;
}

/* Whether a function name is a decorator's inner function: the last part
 * of a qualified name ("_exception_logger.<locals>.wrapper"). */
static int is_wrapper(const struct frame *f)
{
	static const char *const names[] = {
	    "wrapper", "wrapped",	   "inner",	 "_inner",
	    "_fn",     "decorate_context", "_call_impl", "_wrapped_call_impl"};
	const char *dot = find_last(f->func, f->funclen, ".");
	const char *name = dot ? dot + 1 : f->func;
	size_t n = (size_t)(f->func + f->funclen - name);

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strlen(names[i]) == n && memcmp(names[i], name, n) == 0)
			return 1;
	return 0;
}

/* Append a function name, without py-spy's "outer.<locals>." prefix. */
static void put_func(struct out *o, const struct frame *f)
{
	const char *name = f->func, *loc;
	size_t n = f->funclen;

	loc = find_last(name, n, ".<locals>.");
	if (loc != NULL) {
		n -= (size_t)(loc + 10 - name);
		name = loc + 10;
	}
	out_put(o, name, n < PYSTACK_MAX_NAME ? n : PYSTACK_MAX_NAME);
}

/* Write the label of frame `at` (the script's), called into `callee`. */
static void put_label(struct out *o, const struct frame *callee,
		      const struct frame *at)
{
	char num[24];
	size_t blen, k = 0;
	const char *b = base(at->file, at->filelen, &blen);
	long line = at->line;

	put_func(o, callee);
	out_str(o, " (");
	out_put(o, b, blen < PYSTACK_MAX_NAME ? blen : PYSTACK_MAX_NAME);
	if (line >= 0) {
		/* Digits backwards, then forwards: no printf on hostile text.
		 */
		char rev[24];

		do
			rev[k++] = (char)('0' + line % 10);
		while ((line /= 10) > 0);
		num[0] = ':';
		for (size_t i = 0; i < k; i++)
			num[i + 1] = rev[k - 1 - i];
		out_put(o, num, k + 1);
	}
	out_str(o, ")");
}

/* Find the script in thread t and write its label; 0 when not there. */
static int where_in(const struct dump *d, const struct thread *t,
		    const char *script, struct out *o)
{
	const struct frame *f = d->frames + t->first;
	size_t slen = 0, i, c;
	const char *sb = NULL;

	if (t->n == 0)
		return 0;
	if (script == NULL || script[0] == '\0') {
		put_label(o, &f[0], &f[0]);
		return 1;
	}
	sb = base(script, strlen(script), &slen);
	for (i = 0; i < t->n; i++) {
		size_t blen;
		const char *b = base(f[i].file, f[i].filelen, &blen);

		if (blen == slen && memcmp(b, sb, slen) == 0)
			break;
	}
	if (i == t->n)
		return 0;
	c = i;
	if (c > 0) {
		c--;
		while (c > 0 && is_wrapper(&f[c]))
			c--;
	}
	put_label(o, &f[c], &f[i]);
	return 1;
}

int pystack_where(const char *dump, size_t len, const char *script, char *out,
		  size_t outlen)
{
	struct dump *d;
	struct out o;
	size_t m;
	int rc;

	assert(out != NULL && outlen > 0);
	out_init(&o, out, outlen);
	out_str(&o, "?");
	d = malloc(sizeof(*d));
	if (d == NULL)
		return UV_ENOMEM;
	rc = dump_parse(d, dump != NULL ? dump : "", dump != NULL ? len : 0);
	if (rc != 0)
		goto done;
	m = main_thread(d);
	out_init(&o, out, outlen);
	if (where_in(d, &d->threads[m], script, &o))
		goto done;
	for (size_t i = 0; i < d->nthreads; i++)
		if (i != m && where_in(d, &d->threads[i], script, &o))
			goto done;
	out_str(&o, "?");
done:
	free(d->frames);
	free(d);
	return rc;
}

/* ---- pystack_summary ---- */

struct group {
	size_t first, n; /* idx[first .. first + n): sorted by rank */
	int min_rank;
};

static const char *where_of(const struct pystack_rank *r)
{
	return r->where != NULL ? r->where : "?";
}

/* By where, then by rank. */
static int cmp_rank(const void *a, const void *b)
{
	const struct pystack_rank *x = *(const struct pystack_rank *const *)a;
	const struct pystack_rank *y = *(const struct pystack_rank *const *)b;
	int c = strcmp(where_of(x), where_of(y));

	if (c != 0)
		return c;
	return (x->rank > y->rank) - (x->rank < y->rank);
}

/* Largest first, then the lowest rank first. */
static int cmp_group(const void *a, const void *b)
{
	const struct group *x = a, *y = b;

	if (x->n != y->n)
		return x->n > y->n ? -1 : 1;
	return (x->min_rank > y->min_rank) - (x->min_rank < y->min_rank);
}

static void put_int(struct out *o, long long v)
{
	char rev[24], num[24];
	size_t k = 0, n = 0;
	unsigned long long u =
	    v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;

	do
		rev[k++] = (char)('0' + u % 10);
	while ((u /= 10) > 0);
	if (v < 0)
		num[n++] = '-';
	while (k > 0)
		num[n++] = rev[--k];
	out_put(o, num, n);
}

/*
 * Write one group, "ranks 0-2,4 in where on host", into buf (cap bytes),
 * its rank list cut past list_cap bytes. Returns the group's length.
 */
static size_t put_group(const struct pystack_rank *r, const size_t *idx,
			const struct group *g, char *buf, size_t cap,
			size_t list_cap)
{
	struct out o;
	const char *host = r[idx[g->first]].host;
	size_t distinct = 0, i = 0;

	out_init(&o, buf, cap);
	for (size_t k = 0; k < g->n; k++)
		if (k == 0 ||
		    r[idx[g->first + k]].rank != r[idx[g->first + k - 1]].rank)
			distinct++;
	out_str(&o, distinct == 1 ? "rank " : "ranks ");
	while (i < g->n) {
		int lo = r[idx[g->first + i]].rank, hi = lo;

		/* A run of consecutive ranks (repeats included). */
		while (i + 1 < g->n) {
			int next = r[idx[g->first + i + 1]].rank;

			if (next != hi && (hi == 2147483647 || next != hi + 1))
				break;
			hi = next;
			i++;
		}
		i++;
		put_int(&o, lo);
		if (hi != lo) {
			out_str(&o, "-");
			put_int(&o, hi);
		}
		if (i < g->n && o.len > list_cap) {
			out_str(&o, ",... (");
			put_int(&o, (long long)distinct);
			out_str(&o, " ranks)");
			break;
		}
		if (i < g->n)
			out_str(&o, ",");
	}
	out_str(&o, " in ");
	out_str(&o, where_of(&r[idx[g->first]]));
	for (size_t k = 1; k < g->n && host != NULL; k++) {
		const char *h = r[idx[g->first + k]].host;

		if (h == NULL || strcmp(h, host) != 0)
			host = NULL;
	}
	if (host != NULL && host[0] != '\0') {
		out_str(&o, " on ");
		out_str(&o, host);
	}
	return o.len;
}

int pystack_summary(const struct pystack_rank *r, size_t n, char *out,
		    size_t outlen)
{
	size_t *idx = NULL, ngroups = 0, i, list_cap;
	const struct pystack_rank **sorted = NULL;
	struct group *groups = NULL;
	char *one = NULL;
	struct out o;
	int rc = UV_ENOMEM;

	assert(out != NULL && outlen > 0);
	out_init(&o, out, outlen);
	if (n == 0)
		return 0;
	idx = malloc(n * sizeof(*idx));
	sorted = malloc(n * sizeof(*sorted));
	groups = malloc(n * sizeof(*groups));
	one = malloc(outlen);
	if (idx == NULL || sorted == NULL || groups == NULL || one == NULL)
		goto fail;
	for (i = 0; i < n; i++)
		sorted[i] = &r[i];
	qsort(sorted, n, sizeof(*sorted), cmp_rank);
	for (i = 0; i < n; i++)
		idx[i] = (size_t)(sorted[i] - r);
	for (i = 0; i < n; i++) {
		if (i == 0 ||
		    strcmp(where_of(&r[idx[i]]), where_of(&r[idx[i - 1]])) != 0)
			groups[ngroups++] = (struct group){
			    .first = i, .n = 0, .min_rank = r[idx[i]].rank};
		groups[ngroups - 1].n++;
	}
	qsort(groups, ngroups, sizeof(*groups), cmp_group);
	/* A rank list may take a third of the line, so that a scattered
	 * group still leaves room for its where and the groups after it. */
	list_cap = outlen / 3 > 16 ? outlen / 3 : 16;
	for (i = 0; i < ngroups; i++) {
		size_t len =
		    put_group(r, idx, &groups[i], one, outlen, list_cap);
		/* Room left for "; ...and N more" after this group. */
		size_t tail = i + 1 < ngroups ? 32 : 0;

		if (i > 0 && o.len + 2 + len + tail >= outlen)
			break;
		if (i > 0)
			out_str(&o, "; ");
		out_put(&o, one, len);
	}
	if (i < ngroups) {
		out_str(&o, "; ...and ");
		put_int(&o, (long long)(ngroups - i));
		out_str(&o, " more");
	}
	rc = 0;
fail:
	free(one);
	free(groups);
	free(sorted);
	free(idx);
	return rc;
}

/*
 * The job console's records (jobcon.h): every byte of a batch is untrusted
 * on the host, so jobcon_next checks each field, bounds every length by
 * what the batch holds, and names the first thing wrong. Pure: no loop, no
 * allocation (tests/fuzz/fuzz_jobcon_records.c).
 */
#include <stdio.h>
#include <string.h>

#include "crun/ranges.h"
#include "jobcon.h"

/* The blank-separated field at *i of h[0..n): its bytes, or NULL. */
static const char *field(const char *h, size_t n, size_t *i, size_t *flen)
{
	const char *f = h + *i;
	const char *sp;

	if (*i >= n)
		return NULL;
	sp = memchr(f, ' ', n - *i);
	*flen = sp ? (size_t)(sp - f) : n - *i;
	*i += *flen + (sp != NULL);
	return *flen ? f : NULL;
}

/* A decimal field in [0, max]: 0, or -1 (why says which). */
static int num_field(const char *h, size_t n, size_t *i, uint64_t max,
		     const char *what, uint64_t *out, char *why, size_t wlen)
{
	size_t flen;
	const char *f = field(h, n, i, &flen);
	uint64_t v = 0;

	for (size_t k = 0; f && k < flen; k++) {
		uint64_t d = (uint64_t)(f[k] - '0');

		if (f[k] < '0' || f[k] > '9' || d > max || v > (max - d) / 10)
			f = NULL;
		else
			v = v * 10 + d;
	}
	if (f == NULL) {
		snprintf(why, wlen, "no %s in [0, %llu]", what,
			 (unsigned long long)max);
		return -1;
	}
	*out = v;
	return 0;
}

int jobcon_next(const char *p, size_t len, size_t *off, int max_rank,
		int *ranks, int cap, struct jobcon_rec *r, char *why,
		size_t wlen)
{
	const char *h = p + *off, *nl, *f;
	size_t n, i = 2, flen, rest = len - *off;
	uint64_t fd, v[4];

	if (rest == 0)
		return 0;
	nl = memchr(h, '\n',
		    rest < JOBCON_MAX_HEADER ? rest : JOBCON_MAX_HEADER);
	if (nl == NULL) {
		snprintf(why, wlen, "a record header without its end");
		return -1;
	}
	n = (size_t)(nl - h);
	memset(r, 0, sizeof(*r));
	r->kind = h[0];
	if (n < 2 || (h[0] != 'L' && h[0] != 'D') || h[1] != ' ') {
		snprintf(why, wlen, "an unknown record '%c'",
			 h[0] >= 0x20 && h[0] < 0x7f ? h[0] : '?');
		return -1;
	}
	if (num_field(h, n, &i, 2, "fd", &fd, why, wlen) ||
	    (fd == 0 && snprintf(why, wlen, "fd 0") > 0) ||
	    (r->kind == 'L' &&
	     num_field(h, n, &i, 3600000, "age", &v[0], why, wlen)))
		return -1;
	r->fd = (int)fd;
	r->age_ms = r->kind == 'L' ? v[0] : 0;
	if ((f = field(h, n, &i, &flen)) == NULL) {
		snprintf(why, wlen, "no ranks");
		return -1;
	}
	if (ranks && !(flen == 1 && *f == '-') &&
	    ranges_parse(f, flen, max_rank - 1, ranks, cap, &r->n, why, wlen))
		return -1;
	r->ranks = ranks;
	if (r->kind == 'D') {
		if (i < n || (ranks && r->n == 0)) {
			snprintf(why, wlen, "a malformed end record");
			return -1;
		}
		*off += n + 1;
		return 1;
	}
	if (num_field(h, n, &i, JOBCON_MAX_PREFIX, "prefix length", &v[1], why,
		      wlen) ||
	    num_field(h, n, &i, v[1], "tag length", &v[2], why, wlen) ||
	    num_field(h, n, &i, rest - n - 1, "line length", &v[3], why, wlen))
		return -1;
	if (i < n || v[1] + v[3] > rest - n - 1) {
		snprintf(why, wlen, "a record longer than its batch");
		return -1;
	}
	r->prefix = nl + 1;
	r->plen = v[1];
	r->taglen = v[2];
	r->line = r->prefix + r->plen;
	r->len = v[3];
	*off += n + 1 + v[1] + v[3];
	return 1;
}

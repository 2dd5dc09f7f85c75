/*
 * The records of stacks on demand (see rdzv_stacks.h): the request and the
 * answers, built and parsed with no I/O, so they are unit-tested and fuzzed
 * alone. The agent's side of the exchange is rdzv_stacks_run.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "crun/err.h"
#include "crun/rdzv_stacks.h"

static int is_nonce(const char *s, size_t n)
{
	if (n == 0 || n > RDZV_STACKS_MAX_NONCE)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') ||
		      (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return 1;
}

/* Decimal digits s[0..n) as a non-negative int (at most 9 digits), or -1. */
static long small_num(const char *s, size_t n)
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

int rdzv_stacks_req_parse(const char *v, size_t n, char *nonce, size_t nlen,
			  int *round)
{
	/* etcd's peek gives a missing key as no bytes at all (NULL). */
	const char *sp = n ? memchr(v, ' ', n) : NULL;
	long r;

	if (sp == NULL || !is_nonce(v, (size_t)(sp - v)) ||
	    (size_t)(sp - v) >= nlen)
		return -1;
	r = small_num(sp + 1, (size_t)(v + n - sp - 1));
	if (r < 0)
		return -1;
	memcpy(nonce, v, (size_t)(sp - v));
	nonce[sp - v] = '\0';
	*round = (int)r;
	return 0;
}

void rdzv_stacks_nonce(char *buf, size_t len)
{
	unsigned char b[8];
	size_t i;

	if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b)) {
		uint64_t t = uv_hrtime() ^ ((uint64_t)getpid() << 32);

		memcpy(b, &t, sizeof(b));
	}
	for (i = 0; i < sizeof(b) && 2 * i + 2 < len; i++)
		snprintf(buf + 2 * i, 3, "%02x", b[i]);
	buf[2 * i] = '\0';
}

/* ---- answers ---- */

static const char answer_magic[] = "crun-stacks 1\n";

static int answer_grow(struct rdzv_stacks_answer *a, size_t more)
{
	size_t cap = a->cap;
	char *b;

	if (a->len + more + 1 <= a->cap)
		return 0;
	while (cap < a->len + more + 1)
		cap = cap ? 2 * cap : 4096;
	b = realloc(a->buf, cap);
	if (b == NULL)
		return UV_ENOMEM;
	a->buf = b;
	a->cap = cap;
	return 0;
}

int rdzv_stacks_answer_init(struct rdzv_stacks_answer *a)
{
	memset(a, 0, sizeof(*a));
	if (answer_grow(a, sizeof(answer_magic)))
		return UV_ENOMEM;
	memcpy(a->buf, answer_magic, sizeof(answer_magic));
	a->len = sizeof(answer_magic) - 1;
	return 0;
}

void rdzv_stacks_answer_release(struct rdzv_stacks_answer *a)
{
	free(a->buf);
	memset(a, 0, sizeof(*a));
}

int rdzv_stacks_answer_add(struct rdzv_stacks_answer *a, int rank, int taken,
			   const char *where, const char *dump, size_t len,
			   size_t dump_cap)
{
	char head[96], cut[96] = "";
	size_t wlen = where ? strlen(where) : 0, fixed, keep;
	int h;

	if (wlen > 512)
		wlen = 512;
	/* This rank's header, its where, its cut line and newlines. */
	fixed = 32 + wlen + sizeof(cut) + 2;
	if (a->len + fixed > RDZV_STACKS_MAX_ANSWER)
		return CRUN_ETOOBIG;
	if (dump_cap > RDZV_STACKS_MAX_ANSWER - a->len - fixed)
		dump_cap = RDZV_STACKS_MAX_ANSWER - a->len - fixed;
	keep = len;
	if (keep > dump_cap) {
		keep = dump_cap;
		/* Cut at a line's end, so no frame is half there. */
		while (keep > 0 && dump[keep - 1] != '\n')
			keep--;
		snprintf(cut, sizeof(cut), "[... %zu more bytes cut]\n",
			 len - keep);
	}
	h = snprintf(head, sizeof(head), "rank %d %d %zu ", rank, taken ? 1 : 0,
		     keep + strlen(cut));
	if (answer_grow(a, (size_t)h + wlen + 1 + keep + strlen(cut) + 1))
		return UV_ENOMEM;
	memcpy(a->buf + a->len, head, (size_t)h);
	a->len += (size_t)h;
	for (size_t i = 0; i < wlen; i++) {
		unsigned char c = (unsigned char)where[i];

		a->buf[a->len++] = c >= 0x20 && c < 0x7f ? (char)c : '?';
	}
	a->buf[a->len++] = '\n';
	memcpy(a->buf + a->len, dump, keep);
	a->len += keep;
	memcpy(a->buf + a->len, cut, strlen(cut));
	a->len += strlen(cut);
	a->buf[a->len++] = '\n';
	a->buf[a->len] = '\0';
	a->nranks++;
	return 0;
}

int rdzv_stacks_answer_parse(const char *v, size_t n,
			     struct rdzv_stacks_rank *r, int max, char *why,
			     size_t whylen)
{
	const char *p = v, *end = v + n;
	size_t mlen = sizeof(answer_magic) - 1;
	int k = 0;

	if (n > RDZV_STACKS_MAX_ANSWER) {
		snprintf(why, whylen, "%zu bytes, more than an answer's %d", n,
			 RDZV_STACKS_MAX_ANSWER);
		return -1;
	}
	if (n < mlen || memcmp(v, answer_magic, mlen) != 0) {
		snprintf(why, whylen, "not a stacks answer");
		return -1;
	}
	p += mlen;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		long rank, taken, dlen;
		char line[96];
		int used = 0;
		const char *w;

		if (nl == NULL || k >= max || k >= RDZV_STACKS_MAX_RANKS)
			goto bad;
		/* "rank <rank> <taken> <len> <where>" */
		if ((size_t)(nl - p) < 5 || memcmp(p, "rank ", 5) != 0)
			goto bad;
		snprintf(line, sizeof(line), "%.*s",
			 (int)((size_t)(nl - p) < 95 ? nl - p : 95), p);
		if (line[5] < '0' || line[5] > '9' ||
		    sscanf(line + 5, "%9ld %1ld %7ld %n", &rank, &taken, &dlen,
			   &used) != 3 ||
		    used == 0 || (taken != 0 && taken != 1) || dlen < 0)
			goto bad;
		w = p + 5 + used;
		if (w > nl)
			goto bad;
		if ((size_t)(end - nl - 1) < (size_t)dlen + 1 ||
		    nl[1 + dlen] != '\n')
			goto bad;
		r[k].rank = (int)rank;
		r[k].taken = (int)taken;
		r[k].where = w;
		r[k].where_len = (size_t)(nl - w);
		r[k].dump = nl + 1;
		r[k].dump_len = (size_t)dlen;
		k++;
		p = nl + 1 + dlen + 1;
	}
	return k;
bad:
	snprintf(why, whylen, "rank entry %d does not parse", k + 1);
	return -1;
}

/*
 * Rank lists (ranges.h). The parser reads untrusted bytes (a peer's
 * record): every number is bounded before it is used, the ranges must
 * ascend (so a list can name each rank once), and what it expands to is
 * bounded by cap before anything is written.
 */
#include <stdio.h>

#include "crun/ranges.h"

size_t ranges_format(const int *r, int n, int base, char *out, size_t len)
{
	size_t k = 0;

	if (len > 0)
		*out = '\0';
	for (int i = 0; i < n;) {
		int j = i, w;

		while (j + 1 < n && r[j + 1] == r[j] + 1)
			j++;
		w = snprintf(out + (k < len ? k : len), k < len ? len - k : 0,
			     j > i ? "%s%d-%d" : "%s%d", i ? "," : "",
			     r[i] + base, r[j] + base);
		k += (size_t)(w > 0 ? w : 0);
		i = j + 1;
	}
	return k;
}

/* A decimal in [0, max] at s[*i..len): 0, or -1 (why filled). */
static int number(const char *s, size_t len, size_t *i, int max, int *out,
		  char *why, size_t wlen)
{
	long v = 0;
	size_t from = *i;

	while (*i < len && s[*i] >= '0' && s[*i] <= '9') {
		v = v * 10 + (s[*i] - '0');
		if (v > max) {
			snprintf(why, wlen, "rank past %d", max);
			return -1;
		}
		(*i)++;
	}
	if (*i == from) {
		snprintf(why, wlen, "a rank expected at byte %zu", from);
		return -1;
	}
	*out = (int)v;
	return 0;
}

int ranges_parse(const char *s, size_t len, int max, int *out, int cap, int *n,
		 char *why, size_t wlen)
{
	size_t i = 0;
	int a, b, last = -1;

	*n = 0;
	if (len == 0) {
		snprintf(why, wlen, "an empty rank list");
		return -1;
	}
	while (i < len) {
		if (number(s, len, &i, max, &a, why, wlen))
			return -1;
		b = a;
		if (i < len && s[i] == '-' &&
		    (i++, number(s, len, &i, max, &b, why, wlen)))
			return -1;
		if (a <= last || b < a) {
			snprintf(why, wlen, "ranks not ascending at %d", a);
			return -1;
		}
		if (b - a >= cap - *n) {
			snprintf(why, wlen, "more than %d ranks", cap);
			return -1;
		}
		for (int r = a; r <= b; r++)
			out[(*n)++] = r;
		last = b;
		if (i < len && (s[i] != ',' || i + 1 == len)) {
			snprintf(why, wlen, "'%c' in a rank list",
				 s[i] >= 0x20 && s[i] < 0x7f ? s[i] : '?');
			return -1;
		}
		i += i < len;
	}
	return 0;
}

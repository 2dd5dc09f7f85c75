/*
 * The bounded ring behind crun_tail (see tail.h): a fixed buffer written
 * circularly, so a worker that prints gigabytes costs the agent cap bytes.
 */
#include <stdlib.h>
#include <string.h>

#include "crun/err.h"
#include "crun/tail.h"

int tail_init(struct crun_tail *t, size_t cap)
{
	memset(t, 0, sizeof(*t));
	t->buf = malloc(cap);
	if (t->buf == NULL)
		return CRUN_ETOOBIG;
	t->cap = cap;
	return 0;
}

void tail_release(struct crun_tail *t)
{
	free(t->buf);
	t->buf = NULL;
}

void tail_write(struct crun_tail *t, const char *data, size_t n)
{
	if (n >= t->cap) {
		data += n - t->cap;
		t->total += n - t->cap;
		n = t->cap;
	}
	while (n > 0) {
		size_t k = t->cap - t->pos < n ? t->cap - t->pos : n;

		memcpy(t->buf + t->pos, data, k);
		t->pos = (t->pos + k) % t->cap;
		t->total += k;
		data += k;
		n -= k;
	}
}

char *tail_lines(const struct crun_tail *t, int max_lines)
{
	size_t have = t->total < t->cap ? t->total : t->cap;
	size_t start = t->total < t->cap ? 0 : t->pos, i, from = 0;
	char *lin, *out;
	int lines = 0;

	if (have == 0)
		return NULL;
	lin = malloc(have + 1);
	if (lin == NULL)
		return NULL;
	for (i = 0; i < have; i++)
		lin[i] = t->buf[(start + i) % t->cap];
	lin[have] = '\0';
	/* Skip a line the ring cut in half. */
	if (t->total > t->cap) {
		char *nl = memchr(lin, '\n', have);

		from = nl ? (size_t)(nl - lin) + 1 : 0;
	}
	/* Walk back max_lines newlines (ignoring a final one). */
	i = have;
	if (i > from && lin[i - 1] == '\n')
		i--;
	while (i > from) {
		if (lin[i - 1] == '\n' && ++lines == max_lines)
			break;
		i--;
	}
	out = strdup(lin + i);
	free(lin);
	return out;
}

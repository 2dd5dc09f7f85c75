/*
 * The job console's records (agent/jobrec.c) as the store host reads a
 * peer's batch: every record read lies inside the batch, its ranks ascend
 * inside the world, and the reader always ends (at the end, or at the first
 * bad record).
 */
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../agent/jobcon.h"

#define WORLD 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *p = malloc(size ? size : 1); /* exact size: ASAN sees overreads */
	int ranks[WORLD];
	struct jobcon_rec r;
	size_t off = 0, last;
	char why[128];

	memcpy(p, data, size);
	for (;;) {
		last = off;
		if (jobcon_next(p, size, &off, WORLD, ranks, WORLD, &r, why,
				sizeof(why)) != 1)
			break;
		assert(off > last && off <= size);
		for (int i = 0; i < r.n; i++)
			assert(ranks[i] >= 0 && ranks[i] < WORLD &&
			       (i == 0 || ranks[i] > ranks[i - 1]));
		if (r.kind == 'L')
			assert(r.line + r.len <= p + size &&
			       r.prefix + r.plen == r.line && r.taglen <= r.plen);
	}
	free(p);
	return 0;
}

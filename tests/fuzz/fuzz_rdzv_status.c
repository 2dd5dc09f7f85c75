/*
 * libFuzzer target for the records `crun status` reads beyond the agents'
 * own (src/rdzv/rdzv_records.c): counters, the job's config, the agents' params
 * and the last failure. The first byte picks the parser; the rest is the
 * record. Whatever a parser accepts must be inside the ranges it promises.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "crun/err.h"
#include "crun/rdzv_records.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char why[256];
	struct rdzv_config cf;
	struct rdzv_params pa;
	struct rdzv_failure f;
	int64_t v;

	if (size < 1)
		return 0;
	data++;
	size--;
	switch (data[-1] & 3) {
	case 0:
		if (rdzv_parse_counter(data, size, &v, why, sizeof(why)) == 0 &&
		    v < 0)
			abort();
		break;
	case 1:
		if (rdzv_parse_config(data, size, 64, &cf, why, sizeof(why)) == 0 &&
		    (cf.min_nodes < 1 || cf.max_nodes < cf.min_nodes ||
		     cf.max_nodes > 64 || !*cf.backend ||
		     strlen(cf.backend) >= sizeof(cf.backend) ||
		     cf.exclude_after < 0 || cf.exclude_after > 32 ||
		     !(cf.exclude_for >= 0)))
			abort();
		break;
	case 2:
		if (rdzv_parse_params(data, size, &pa, why, sizeof(why)) == 0 &&
		    (pa.max_restarts < 0 || pa.keep_alive_ms < 1 ||
		     pa.keep_alive_ms > 3600000))
			abort();
		break;
	default:
		if (rdzv_parse_failure(data, size, &f, why, sizeof(why)) == 0 &&
		    (f.round < 0 || f.unix_ms < 0 || f.rank < 0 ||
		     f.local_rank < 0 || f.local_rank >= RDZV_MAX_NPROC ||
		     !*f.host))
			abort();
		break;
	}
	return 0;
}

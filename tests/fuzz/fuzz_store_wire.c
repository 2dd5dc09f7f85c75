/*
 * libFuzzer target for the store's frame decoder. The input is a byte
 * stream as one connection would send it; the first byte picks how it is
 * fed (whole, or in pieces of 1..8 bytes) and whether the generation is
 * decided by the stream (auto) or fixed. Every decoded request must have
 * consumed bytes inside the buffer, its strings must lie inside the frame,
 * and decoding a stream in pieces (resuming list frames where the last
 * call stopped, as the server does) must give the same requests as decoding
 * it whole.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "crun/err.h"
#include "store/store_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const struct crun_store_limits fuzz_lim = {4096, 65536, 64, 1 << 20, 16, 1 << 20, 30};

/* Decode a whole stream; return the number of requests, ops in ops[]. */
static size_t fuzz_decode_all(const uint8_t *d, size_t n, enum store_gen gen,
			      size_t step, int *ops, size_t maxops, int *err)
{
	struct store_wire_resume rs = {0, 0};
	struct store_req r;
	size_t off = 0, avail = 0, used, k = 0;
	const unsigned char *p, *s, *end;
	char msg[128];
	size_t slen;
	int rc;

	*err = 0;
	for (;;) {
		avail = step == 0 ? n : (avail + step > n ? n : avail + step);
		for (;;) {
			rc = store_wire_decode(d + off, avail - off, &gen, &fuzz_lim,
					       &rs, &r, &used, msg, sizeof(msg));
			if (rc != STORE_WIRE_OK)
				break;
			if (used == 0 || off + used > avail)
				abort();
			if (r.key != NULL &&
			    (r.key < d + off || r.key + r.key_len > d + off + used))
				abort();
			if (r.list != NULL) {
				p = r.list;
				end = r.list + r.list_len;
				if (end > d + off + used)
					abort();
				while (store_wire_next_str(&p, end, &s, &slen))
					if (s + slen > end)
						abort();
			}
			if (k < maxops)
				ops[k] = (int)r.op;
			k++;
			off += used;
		}
		if (rc < 0) {
			*err = rc;
			return k;
		}
		if (avail == n)
			return k;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int ops1[64], ops2[64], e1, e2;
	enum store_gen gen;
	size_t n1, n2, step;
	int64_t v;

	if (size < 1)
		return 0;
	step = (data[0] & 7) + 1;
	gen = (data[0] >> 3) % 3 == 0 ? STORE_GEN_UNKNOWN
	      : (data[0] >> 3) % 3 == 1 ? STORE_GEN_G0 : STORE_GEN_G3;
	data++;
	size--;
	n1 = fuzz_decode_all(data, size, gen, 0, ops1, 64, &e1);
	n2 = fuzz_decode_all(data, size, gen, step, ops2, 64, &e2);
	if (n1 != n2 || e1 != e2 ||
	    memcmp(ops1, ops2, sizeof(int) * (n1 < 64 ? n1 : 64)) != 0)
		abort();
	store_wire_parse_int(data, size, &v);
	return 0;
}

/*
 * libFuzzer target for the stack dump reader (src/proc/pystack.c). The input is
 * a dump, as a worker or another machine could send it; its label, found
 * for a script named by the input's first line, must be NUL-terminated
 * printable ASCII within the buffer, and feeding the labels of the dump's
 * prefixes to pystack_summary must give a bounded line too. The same bytes
 * are read as a stacks answer and request (rdzv_stacks.h), as `crun status
 * --stacks` and the agents read them from the store: every rank parsed
 * must lie within the input.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "crun/err.h"
#include "crun/pystack.h"
#include "crun/rdzv_stacks.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_RANKS 8

static void check_text(const char *s, size_t cap)
{
	size_t n = strnlen(s, cap);

	if (n == cap)
		abort();
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] >= 0x7f)
			abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char script[64] = "", labels[FUZZ_RANKS][96], line[160];
	const char *dump = (const char *)data;
	const char *nl = memchr(data, '\n', size);
	struct pystack_rank r[FUZZ_RANKS];
	size_t k;

	/* The first line names the script (when short enough). */
	if (nl != NULL && (size_t)(nl - dump) < sizeof(script)) {
		memcpy(script, dump, (size_t)(nl - dump));
		script[nl - dump] = '\0';
	}
	for (k = 0; k < FUZZ_RANKS; k++) {
		size_t n = size * (k + 1) / FUZZ_RANKS;
		int rc = pystack_where(dump, n, script, labels[k],
				       sizeof(labels[k]));

		if (rc != 0 && rc != CRUN_EPROTO)
			abort();
		check_text(labels[k], sizeof(labels[k]));
		r[k] = (struct pystack_rank){(int)(k * 3 % 5), labels[k],
					     k % 2 ? "n1" : NULL};
	}
	if (pystack_summary(r, FUZZ_RANKS, line, sizeof(line)) != 0)
		abort();
	check_text(line, sizeof(line));
	{
		struct rdzv_stacks_rank sr[16];
		char why[128], nonce[RDZV_STACKS_MAX_NONCE + 1];
		int n = rdzv_stacks_answer_parse(dump, size, sr, 16, why,
						 sizeof(why)),
		    round;

		if (n < 0 && (why[0] == '\0' || strchr(why, '\n')))
			abort();
		for (int i = 0; i < n; i++)
			if (sr[i].where < dump || sr[i].dump < dump ||
			    sr[i].where + sr[i].where_len > dump + size ||
			    sr[i].dump + sr[i].dump_len > dump + size ||
			    memchr(sr[i].where, '\n', sr[i].where_len))
				abort();
		if (rdzv_stacks_req_parse(dump, size, nonce, sizeof(nonce),
					  &round) == 0 &&
		    (strlen(nonce) == 0 || round < 0))
			abort();
	}
	return 0;
}

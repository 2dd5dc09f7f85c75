/*
 * libFuzzer target for the Slurm hostlist expander (src/cfg/hostlist.c). The
 * input is a hostlist; what expands must compress back to a list that
 * expands to the very same names, in order. The round trip is checked up
 * to FUZZ_COMPRESS_MAX names: hostlist_compress of ~800k names takes over
 * 10 s (it is for messages; the expander is the target here).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "crun/err.h"
#include "crun/hostlist.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_COMPRESS_MAX 4096

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *list, **hosts = NULL, **again = NULL, *packed = NULL;
	char err[256];
	size_t n = 0, m = 0;

	if (size > 4096)
		return 0;
	list = malloc(size + 1);
	if (list == NULL)
		return 0;
	memcpy(list, data, size);
	list[size] = '\0';
	if (hostlist_expand(list, &hosts, &n, err, sizeof(err)) == 0) {
		if (hosts == NULL || hosts[n] != NULL)
			abort();
		if (n <= FUZZ_COMPRESS_MAX &&
		    hostlist_compress(hosts, n, &packed, err, sizeof(err)) ==
			0) {
			if (hostlist_expand(packed, &again, &m, err,
					    sizeof(err)) != 0 ||
			    m != n)
				abort();
			for (size_t i = 0; i < n; i++)
				if (strcmp(hosts[i], again[i]) != 0)
					abort();
			hostlist_free(again);
			free(packed);
		}
		hostlist_free(hosts);
	} else if (hosts != NULL || n != 0 || err[0] == '\0') {
		abort();
	}
	free(list);
	return 0;
}

/*
 * Lists of ranks as ranges, "0-3,5,7-9": how the console names the ranks a
 * collapsed line stands for, and how the job console's records carry them.
 */
#ifndef CRUN_RANGES_H
#define CRUN_RANGES_H

#include <stddef.h>

/**
 * "0-3,5,7-9" from the ascending ints r[0..n), each plus base, into out
 * (len bytes, NUL-terminated when len > 0). Like snprintf, returns the
 * length the whole list needs: at least len means it was cut.
 */
size_t ranges_format(const int *r, int n, int base, char *out, size_t len);

/**
 * The list s[0..len) (not NUL-terminated): ascending ranges "a" or "a-b"
 * joined by commas, each rank in [0, max], at most cap of them in all,
 * written to out[0..*n). 0, or -1 with a lower-case reason in why.
 */
int ranges_parse(const char *s, size_t len, int max, int *out, int cap, int *n,
		 char *why, size_t wlen);

#endif

/*
 * Slurm hostlists: "gpu[01-04,07],rack[1-2]-n[1-2]x" <-> a list of names.
 *
 * The grammar is Slurm 23.11's (src/common/hostlist.c), so that crun reads
 * every SLURM_JOB_NODELIST a real controller can write:
 *   - tokens are separated by ',', ' ', tab or newline outside brackets;
 *   - "[...]" holds comma-separated items "N" or "LO-HI" (decimal, LO <= HI);
 *     the names are printed with the width of LO ("[01-10]" gives 01..10,
 *     "[1-03]" gives 1 2 3);
 *   - a token may hold several bracket groups, expanded as a Cartesian
 *     product with the leftmost group varying slowest, and text after the
 *     last ']' is a suffix ("cpu-a[1-3]x");
 *   - order and duplicates are kept, bracket-free tokens pass unchanged.
 * Unlike `scontrol show hostnames`, which prints a bogus name and exits 0, an
 * invalid list is an error with a message naming what is wrong and where.
 */
#ifndef CRUN_HOSTLIST_H
#define CRUN_HOSTLIST_H

#include <stddef.h>

/* Slurm's caps (hostlist.c MAX_RANGE, MAX_RANGES, the prefix cap). */
#define HOSTLIST_MAX_RANGE 65536	 /* names in one LO-HI range */
#define HOSTLIST_MAX_RANGES (256 * 1024) /* items in one bracket group */
#define HOSTLIST_MAX_PREFIX 65536 /* names from the groups before the last */

/* crun's own limits, which bound memory on hostile input. */
#define HOSTLIST_MAX_HOSTS (1024 * 1024) /* names in one list */
#define HOSTLIST_MAX_NAME 255		 /* bytes in one name (a DNS name) */
#define HOSTLIST_MAX_GROUPS 16		 /* bracket groups in one token */
#define HOSTLIST_MAX_DIGITS 18		 /* digits in one bound */

/**
 * Expand list into *hosts, a NULL-terminated array of *n names in list
 * order. The array and its strings are one allocation owned by the caller:
 * release it with hostlist_free(). An empty list (or one made only of
 * separators) gives *n == 0 and a one-element array holding NULL.
 *
 * Returns 0; CRUN_ECONFIG for a list that is not valid Slurm syntax or that
 * breaks Slurm's caps; CRUN_ETOOBIG when it would exceed HOSTLIST_MAX_HOSTS
 * or HOSTLIST_MAX_NAME; UV_ENOMEM. On error *hosts is NULL, *n is 0 and
 * errmsg (if not NULL) holds one line such as
 * "column 5: descending range '3-1' in 'x[3-1]'".
 */
int hostlist_expand(const char *list, char ***hosts, size_t *n, char *errmsg,
		    size_t errlen);

/** Free an array returned by hostlist_expand() (NULL is fine). */
void hostlist_free(char **hosts);

/**
 * Compress n names into a Slurm hostlist in *out (caller frees), so that
 * hostlist_expand(*out) gives back exactly the same names in the same order,
 * duplicates included. Like Slurm, consecutive names with the same prefix
 * share one bracket group, and a range only grows while the next number
 * prints at the range's width: "n1,n2,n3,n5,n09,n10,gpu01,gpu02,gpu4" gives
 * "n[1-3,5,09-10],gpu[01-02,4]". Only trailing digits are numbered; other
 * names are written as they are.
 *
 * Returns 0; CRUN_ECONFIG (with errmsg) when a name is empty, longer than
 * HOSTLIST_MAX_NAME or holds a character a hostlist cannot carry (',', '[',
 * ']', space, tab, newline); UV_ENOMEM.
 */
int hostlist_compress(char *const *hosts, size_t n, char **out, char *errmsg,
		      size_t errlen);

#endif

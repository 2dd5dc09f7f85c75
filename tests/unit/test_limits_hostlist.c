/*
 * Hostlist caps (include/crun/hostlist.h) at their edges, beside
 * test_hostlist's: the bound itself expands, one past it is refused with
 * the message naming the cap.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crun/err.h"
#include "crun/hostlist.h"

static size_t expand_n(const char *list, char *err, size_t elen)
{
	char **hosts = NULL;
	size_t n = 0;
	int rc = hostlist_expand(list, &hosts, &n, err, elen);

	cr_assert_eq(rc, 0, "'%.60s': %s", list, err);
	hostlist_free(hosts);
	return n;
}

static void refused(const char *list, int code, const char *needle)
{
	char err[256] = "", **hosts = NULL;
	size_t n = 0;

	cr_assert_eq(hostlist_expand(list, &hosts, &n, err, sizeof(err)), code,
		     "'%.60s': %s", list, err);
	cr_assert(strstr(err, needle) != NULL, "'%s' lacks '%s'", err, needle);
}

Test(limits_hostlist, prefix_groups, .timeout = 30)
{
	char err[256];

	/* 65536 names before the last group expand; 65537 do not. */
	cr_assert_eq(expand_n("a[0-65535]b[1]", err, sizeof(err)), 65536);
	refused("a[0-65535,70000]b[1]", CRUN_ECONFIG,
		"groups before the last '[' expand to more than 65536 names");
}

Test(limits_hostlist, total_names, .timeout = 60)
{
	char err[256];

	/* HOSTLIST_MAX_HOSTS in one token, and across tokens. */
	cr_assert_eq(expand_n("a[0-15]b[0-65535]", err, sizeof(err)),
		     HOSTLIST_MAX_HOSTS);
	/* refused by the token's own count, before the list's */
	refused("a[0-15]b[0-65535,70000]", CRUN_ETOOBIG,
		"column 1: more than 1048576 names in");
	cr_assert_eq(expand_n("a[0-14]b[0-65535],c[0-65535]", err, sizeof(err)),
		     HOSTLIST_MAX_HOSTS);
	refused("a[0-14]b[0-65535],c[0-65535],d", CRUN_ETOOBIG,
		"hostlist expands to more than 1048576 names");
}

Test(limits_hostlist, digits_and_groups, .timeout = 10)
{
	char err[256];

	cr_assert_eq(expand_n("n[123456789012345678]", err, sizeof(err)), 1);
	cr_assert_eq(expand_n("n[123456789012345670-123456789012345678]", err,
			      sizeof(err)),
		     9);
	refused("n[1234567890123456789]", CRUN_ECONFIG,
		"number longer than 18 digits");
	refused("n[1-1234567890123456789]", CRUN_ECONFIG,
		"number longer than 18 digits");
	/* 16 bracket groups, then 17. */
	cr_assert_eq(expand_n("a[1]b[1]c[1]d[1]e[1]f[1]g[1]h[1]i[1]j[1]k[1]l[1]"
			      "m[1]n[1]o[1]p[1]",
			      err, sizeof(err)),
		     1);
	refused("a[1]b[1]c[1]d[1]e[1]f[1]g[1]h[1]i[1]j[1]k[1]l[1]m[1]n[1]o[1]"
		"p[1]q[1]",
		CRUN_ECONFIG, "more than 16 '[...]' groups");
	/* One range of 65536 names, then 65537. */
	cr_assert_eq(expand_n("n[1-65536]", err, sizeof(err)), 65536);
	refused("n[1-65537]", CRUN_ECONFIG, "holds more than 65536 names");
}

/* Compressing keeps to the caps expansion takes: a range of at most 65536
 * names, at most 262144 items in one group; the output expands back. */
static void compress_round_trip(size_t n, size_t step, const char *want_prefix)
{
	char **names = malloc(n * sizeof(*names)), *out = NULL, err[256] = "";
	char **back = NULL;
	size_t nb = 0;

	for (size_t i = 0; i < n; i++) {
		names[i] = malloc(16);
		snprintf(names[i], 16, "n%zu", i * step);
	}
	cr_assert_eq(hostlist_compress(names, n, &out, err, sizeof(err)), 0,
		     "%s", err);
	cr_assert(strncmp(out, want_prefix, strlen(want_prefix)) == 0,
		  "'%.60s' does not start with '%s'", out, want_prefix);
	cr_assert_eq(hostlist_expand(out, &back, &nb, err, sizeof(err)), 0,
		     "'%.60s': %s", out, err);
	cr_assert_eq(nb, n);
	for (size_t i = 0; i < n; i++) {
		cr_assert_str_eq(back[i], names[i]);
		free(names[i]);
	}
	hostlist_free(back);
	free(names);
	free(out);
}

Test(limits_hostlist, compress_caps, .timeout = 60)
{
	compress_round_trip(65536, 1, "n[0-65535]");
	compress_round_trip(65537, 1, "n[0-65535,65536]");
	/* 262144 single names in one group, the next one in a second. */
	compress_round_trip(262145, 2, "n[0,2,4");
}

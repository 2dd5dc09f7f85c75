/*
 * Hostlist expansion against the table in the SLURM spec (checked with Slurm
 * 22.05's scontrol; suffixes follow 23.11), more valid and invalid lists,
 * Slurm's caps, compression, and an expand(compress(x)) == x property test
 * over random host sets.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crun/err.h"
#include "crun/hostlist.h"

/* Expand list and join the names with single spaces. */
static char *expand_joined(const char *list)
{
	char err[256] = "", **hosts = NULL, *out;
	size_t n = 0, len = 1, at = 0;
	int rc = hostlist_expand(list, &hosts, &n, err, sizeof(err));

	cr_assert_eq(rc, 0, "expanding '%s': %s (%s)", list, err,
		     crun_err_name(rc));
	cr_assert_null(hosts[n]);
	for (size_t i = 0; i < n; i++)
		len += strlen(hosts[i]) + 1;
	out = malloc(len);
	out[0] = '\0';
	for (size_t i = 0; i < n; i++)
		at += (size_t)snprintf(out + at, len - at, "%s%s", i ? " " : "",
				       hosts[i]);
	hostlist_free(hosts);
	return out;
}

static void expect(const char *list, const char *want)
{
	char *got = expand_joined(list);

	cr_expect_str_eq(got, want, "'%s' gave '%s', want '%s'", list, got,
			 want);
	free(got);
}

/* Expect list to fail with code and a message containing each needle. */
static void expect_err(const char *list, int code, const char *needle,
		       const char *needle2)
{
	char err[256] = "", **hosts = (char **)1;
	size_t n = 7;
	int rc = hostlist_expand(list, &hosts, &n, err, sizeof(err));

	cr_expect_eq(rc, code, "'%s': got %s, want %s (%s)", list,
		     crun_err_name(rc), crun_err_name(code), err);
	cr_expect_null(hosts);
	cr_expect_eq(n, 0);
	cr_expect_neq(err[0], '\0', "'%s': no message", list);
	cr_expect_null(strchr(err, '\n'), "one line: '%s'", err);
	if (needle)
		cr_expect(strstr(err, needle) != NULL,
			  "'%s': message '%s' lacks '%s'", list, err, needle);
	if (needle2)
		cr_expect(strstr(err, needle2) != NULL,
			  "'%s': message '%s' lacks '%s'", list, err, needle2);
}

/* The spec's table (section C2), 23.11 grammar. */
Test(hostlist, spec_table)
{
	expect("gpu[01-04,07],cpu-a[1-3]x",
	       "gpu01 gpu02 gpu03 gpu04 gpu07 cpu-a1x cpu-a2x cpu-a3x");
	expect("rack[1-2]-n[01-02]", "rack1-n01 rack1-n02 rack2-n01 rack2-n02");
	expect("tux[9-11]", "tux9 tux10 tux11");
	expect("tux[09-11]", "tux09 tux10 tux11");
	expect("node[1-3],node5 node[7-8]", "node1 node2 node3 node5 node7 node8");
	expect("gpu[01-02],gpu[01-02]", "gpu01 gpu02 gpu01 gpu02");
	expect_err("x[3-1]", CRUN_ECONFIG, "descending range '3-1'", "column 3");
	/* The boundary: one less than the start is descending too. */
	expect_err("x[2-1]", CRUN_ECONFIG, "descending range '2-1'", "column 3");
	expect_err("n[a-c]", CRUN_ECONFIG, "expected a number", "column 3");
	expect_err("n[0-65536]", CRUN_ECONFIG, "more than 65536", "column 3");
	expect_err("n[1-2]]", CRUN_ECONFIG, "unmatched ']'", "column 7");
	expect_err("h[1-2", CRUN_ECONFIG, "unterminated '['", "column 2");
}

Test(hostlist, padding)
{
	expect("n[001-3]", "n001 n002 n003");
	expect("n[1-03]", "n1 n2 n3");
	expect("n[0-2]", "n0 n1 n2");
	expect("n[00-02]", "n00 n01 n02");
	expect("n[98-101]", "n98 n99 n100 n101");
	expect("n[098-101]", "n098 n099 n100 n101");
	expect("n[7]", "n7");
	expect("n[007]", "n007");
	expect("n[0]", "n0");
	expect("n[5,3,1]", "n5 n3 n1");
	expect("n[1-2,01-02]", "n1 n2 n01 n02");
	expect("n[9-10,010]", "n9 n10 n010");
}

Test(hostlist, separators_and_plain)
{
	expect("", "");
	expect(" , ,\t\n", "");
	expect("a", "a");
	expect("a,b c\td\ne", "a b c d e");
	expect(",,a,,b,,", "a b");
	expect("node-1.example.com", "node-1.example.com");
	expect("a,a,a", "a a a");
	expect("[1-3]", "1 2 3");
	expect("[1-2][1-2]", "11 12 21 22");
	expect("n[1,2],m[3]", "n1 n2 m3");
	expect("n[1-2] m[3-4]", "n1 n2 m3 m4");
	expect("x-[1-2]-y", "x-1-y x-2-y");
	expect("n[1-2].ib", "n1.ib n2.ib");
}

Test(hostlist, several_groups)
{
	expect("a[1-2]b[3-4]c", "a1b3c a1b4c a2b3c a2b4c");
	expect("r[1-2]c[1-2]n[1-2]",
	       "r1c1n1 r1c1n2 r1c2n1 r1c2n2 r2c1n1 r2c1n2 r2c2n1 r2c2n2");
	expect("r[2,1]n[3,1-2]", "r2n3 r2n1 r2n2 r1n3 r1n1 r1n2");
	expect("r[01-02]-[1-3]", "r01-1 r01-2 r01-3 r02-1 r02-2 r02-3");
	expect("a[1]b[2]c[3]d", "a1b2c3d");
}

Test(hostlist, invalid)
{
	expect_err("n[]", CRUN_ECONFIG, "empty range list", "column 3");
	expect_err("n[1-]", CRUN_ECONFIG, "after '-'", "column 5");
	expect_err("n[-3]", CRUN_ECONFIG, "expected a number, got '-'", NULL);
	expect_err("n[1,,2]", CRUN_ECONFIG, "empty item", "column 5");
	expect_err("n[1,]", CRUN_ECONFIG, "empty item", "column 5");
	expect_err("n[,1]", CRUN_ECONFIG, "expected a number, got ','", NULL);
	expect_err("n[1-2-3]", CRUN_ECONFIG, "unexpected '-'", "column 6");
	expect_err("n[1 2]", CRUN_ECONFIG, "unexpected ' '", "column 4");
	expect_err("n[1[2]]", CRUN_ECONFIG, "nested '['", "column 4");
	expect_err("n]1", CRUN_ECONFIG, "unmatched ']'", "column 2");
	expect_err("ok,n[", CRUN_ECONFIG, "unterminated '['", "column 5");
	expect_err("ok,n[1", CRUN_ECONFIG, "unterminated '['", "column 5");
	expect_err("n[1-", CRUN_ECONFIG, "unterminated '['", "column 2");
	expect_err("n[1,", CRUN_ECONFIG, "unterminated", NULL);
	expect_err("n[x]", CRUN_ECONFIG, "got 'x'", NULL);
	expect_err("n[+1]", CRUN_ECONFIG, "got '+'", NULL);
	expect_err("n[1\x01]", CRUN_ECONFIG, "'\\x01'", NULL);
	expect_err("n[1234567890123456789]", CRUN_ECONFIG, "longer than 18",
		   NULL);
	expect_err("n[1-1234567890123456789]", CRUN_ECONFIG,
		   "longer than 18", "column 5");
	expect_err("good[1-2],bad[2-1]", CRUN_ECONFIG, "in 'bad[2-1]'",
		   "column 15");
	expect_err("a[1]b[1]c[1]d[1]e[1]f[1]g[1]h[1]i[1]j[1]k[1]l[1]m[1]n[1]"
		   "o[1]p[1]q[1]",
		   CRUN_ECONFIG, "more than 16", NULL);
}

Test(hostlist, caps)
{
	char err[256], **hosts;
	size_t n;

	/* One range holds up to 65,536 names. */
	cr_assert_eq(hostlist_expand("n[0-65535]", &hosts, &n, err, sizeof(err)),
		     0, "%s", err);
	cr_expect_eq(n, 65536);
	cr_expect_str_eq(hosts[0], "n0");
	cr_expect_str_eq(hosts[65535], "n65535");
	hostlist_free(hosts);
	cr_assert_eq(hostlist_expand("n[00001-65536]", &hosts, &n, err,
				     sizeof(err)),
		     0, "%s", err);
	cr_expect_str_eq(hosts[65535], "n65536");
	hostlist_free(hosts);
	expect_err("n[1-65537]", CRUN_ECONFIG, "more than 65536", NULL);

	/* Groups before the last are capped at 64K names (Slurm). */
	cr_assert_eq(hostlist_expand("a[0-255]b[0-255]c[1-2]", &hosts, &n,
				     err, sizeof(err)),
		     0, "%s", err);
	cr_expect_eq(n, 131072);
	cr_expect_str_eq(hosts[131071], "a255b255c2");
	hostlist_free(hosts);
	expect_err("a[0-256]b[0-255]c[1]", CRUN_ECONFIG,
		   "groups before the last", NULL);

	/* crun's own bound on the total. */
	expect_err("a[0-15]b[0-65535],c", CRUN_ETOOBIG, "more than", NULL);
	expect_err("a[0-65535],b[0-65535],c[0-65535],d[0-65535],e[0-65535],"
		   "f[0-65535],g[0-65535],h[0-65535],i[0-65535],j[0-65535],"
		   "k[0-65535],l[0-65535],m[0-65535],n[0-65535],o[0-65535],"
		   "p[0-65535],q[0]",
		   CRUN_ETOOBIG, "more than", NULL);
}

Test(hostlist, many_ranges_in_one_group)
{
	/* 256K single-number items is Slurm's limit; one more fails. */
	size_t cap = (size_t)HOSTLIST_MAX_RANGES + 1, len = 0;
	char *s = malloc(cap * 8 + 8), err[256], **hosts;
	size_t n;

	len += (size_t)snprintf(s, 8, "n[");
	for (size_t i = 0; i < cap - 1; i++)
		len += (size_t)snprintf(s + len, 8, "%s%zu", i ? "," : "",
					i % 1000);
	memcpy(s + len, "]", 2);
	cr_assert_eq(hostlist_expand(s, &hosts, &n, err, sizeof(err)), 0, "%s",
		     err);
	cr_expect_eq(n, HOSTLIST_MAX_RANGES);
	cr_expect_str_eq(hosts[1001], "n1");
	hostlist_free(hosts);
	memcpy(s + len, ",1]", 4);
	expect_err(s, CRUN_ECONFIG, "more than 262144 ranges", NULL);
	free(s);
}

Test(hostlist, name_length)
{
	char list[400], err[256], **hosts;
	size_t n;

	memset(list, 'a', 254);
	memcpy(list + 254, "[1-9]", 6);
	cr_assert_eq(hostlist_expand(list, &hosts, &n, err, sizeof(err)), 0,
		     "%s", err);
	cr_expect_eq(strlen(hosts[8]), 255);
	hostlist_free(hosts);
	memcpy(list + 254, "[1-10]", 7);
	expect_err(list, CRUN_ETOOBIG, "longer than 255", NULL);
}

Test(hostlist, errmsg_is_bounded)
{
	char err[12], **hosts;
	size_t n;

	cr_expect_eq(hostlist_expand("x[3-1]", &hosts, &n, err, sizeof(err)),
		     CRUN_ECONFIG);
	cr_expect_eq(strlen(err), sizeof(err) - 1);
	cr_expect_eq(hostlist_expand("x[3-1]", &hosts, &n, NULL, 0),
		     CRUN_ECONFIG);
}

static void expect_compress(const char *joined, const char *want)
{
	char *copy = strdup(joined), *names[64], *out = NULL, err[256] = "";
	size_t n = 0;
	char *back;

	for (char *tok = strtok(copy, " "); tok; tok = strtok(NULL, " "))
		names[n++] = tok;
	cr_assert_eq(hostlist_compress(names, n, &out, err, sizeof(err)), 0,
		     "%s", err);
	cr_expect_str_eq(out, want, "compress '%s' gave '%s', want '%s'",
			 joined, out, want);
	back = expand_joined(out);
	cr_expect_str_eq(back, joined);
	free(back);
	free(out);
	free(copy);
}

Test(hostlist, compress)
{
	/* Slurm's example from the spec. */
	expect_compress("n1 n2 n3 n5 n09 n10 gpu01 gpu02 gpu4",
			"n[1-3,5,09-10],gpu[01-02,4]");
	expect_compress("tux9 tux10 tux11", "tux[9-11]");
	expect_compress("tux09 tux10 tux11", "tux[09-11]");
	expect_compress("n1", "n1");
	expect_compress("n01", "n01");
	expect_compress("a b c", "a,b,c");
	expect_compress("n1 n1 n1", "n[1,1,1]");
	expect_compress("n3 n2 n1", "n[3,2,1]");
	expect_compress("n1 m1 n2", "n1,m1,n2");
	expect_compress("n9 n010", "n[9,010]");
	expect_compress("n99 n100 n0100", "n[99-100,0100]");
	expect_compress("1 2 3", "[1-3]");
	expect_compress("cpu-a1x cpu-a2x", "cpu-a1x,cpu-a2x");
	expect_compress("rack1-n01 rack1-n02", "rack1-n[01-02]");
	expect_compress("n1 n2 x n3", "n[1-2],x,n3");
	expect_compress("n1234567890123456789 n1",
			"n1234567890123456789,n1");
}

Test(hostlist, compress_empty_and_bad)
{
	char *out = NULL, err[256];
	char ok[] = "ok", comma[] = "a,b", empty[] = "", bracket[] = "n[1]";
	char *bad1[] = { ok, comma };
	char *bad2[] = { empty };
	char *bad3[] = { bracket };

	cr_assert_eq(hostlist_compress(NULL, 0, &out, err, sizeof(err)), 0);
	cr_expect_str_eq(out, "");
	free(out);
	cr_expect_eq(hostlist_compress(bad1, 2, &out, err, sizeof(err)),
		     CRUN_ECONFIG);
	cr_expect(strstr(err, "host 2") != NULL, "%s", err);
	cr_expect_null(out);
	cr_expect_eq(hostlist_compress(bad2, 1, &out, err, sizeof(err)),
		     CRUN_ECONFIG);
	cr_expect_eq(hostlist_compress(bad3, 1, &out, err, sizeof(err)),
		     CRUN_ECONFIG);
}

Test(hostlist, compress_splits_long_ranges)
{
	size_t n = 70000;
	char **names = malloc(n * sizeof(*names)), *out, err[256], **back;
	size_t nb;

	for (size_t i = 0; i < n; i++) {
		names[i] = malloc(16);
		snprintf(names[i], 16, "n%zu", i);
	}
	cr_assert_eq(hostlist_compress(names, n, &out, err, sizeof(err)), 0);
	cr_expect_str_eq(out, "n[0-65535,65536-69999]");
	cr_assert_eq(hostlist_expand(out, &back, &nb, err, sizeof(err)), 0,
		     "%s", err);
	cr_assert_eq(nb, n);
	for (size_t i = 0; i < n; i++)
		cr_assert_str_eq(back[i], names[i]);
	hostlist_free(back);
	free(out);
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

/* A small deterministic generator so failures reproduce (xorshift64*). */
static unsigned long long rng_state = 0x9e3779b97f4a7c15ULL;

static unsigned rnd(unsigned bound)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return (unsigned)((rng_state * 2685821657736338717ULL) >> 33) % bound;
}

/* A random host name drawn from a few prefixes, widths and suffixes. */
static void random_name(char *buf, size_t len, unsigned run_base,
			unsigned k)
{
	static const char *prefixes[] = { "n", "gpu", "rack1-n", "", "a.b-",
					  "x" };
	static const char *suffixes[] = { "", "", "", "x", ".ib" };
	const char *pre = prefixes[rnd(6)];
	unsigned width = rnd(4), num = run_base + k;

	switch (rnd(8)) {
	case 0: /* no number at all */
		snprintf(buf, len, "%s%s", pre[0] ? pre : "h", "name");
		break;
	case 1: /* a suffix: written literally */
		snprintf(buf, len, "%s%0*u%s", pre, (int)width, num,
			 suffixes[rnd(5)]);
		break;
	default:
		snprintf(buf, len, "%s%0*u", pre, (int)width, num);
		break;
	}
}

Test(hostlist, property_roundtrip)
{
	char err[256];

	for (int iter = 0; iter < 3000; iter++) {
		size_t n = rnd(60), nb;
		char **names = calloc(n + 1, sizeof(*names)), *out, **back;
		unsigned base = rnd(3) == 0 ? rnd(100000) : rnd(20);

		for (size_t i = 0; i < n; i++) {
			names[i] = malloc(64);
			/* Mostly consecutive runs, some jumps and repeats. */
			if (rnd(5) == 0)
				base = rnd(1200);
			random_name(names[i], 64, base, rnd(4) == 0 ? 0 : 1);
			base += rnd(3) == 0 ? 0 : 1;
		}
		cr_assert_eq(hostlist_compress(names, n, &out, err, sizeof(err)),
			     0, "iter %d: %s", iter, err);
		cr_assert_eq(hostlist_expand(out, &back, &nb, err, sizeof(err)),
			     0, "iter %d: '%s': %s", iter, out, err);
		cr_assert_eq(nb, n, "iter %d: '%s' gave %zu names, want %zu",
			     iter, out, nb, n);
		for (size_t i = 0; i < n; i++)
			cr_assert_str_eq(back[i], names[i],
					 "iter %d: '%s' name %zu", iter, out, i);
		hostlist_free(back);
		free(out);
		for (size_t i = 0; i < n; i++)
			free(names[i]);
		free(names);
	}
}

/* Same-prefix runs only (the shape Slurm writes), so groups get large. */
Test(hostlist, property_roundtrip_runs)
{
	char err[256];

	for (int iter = 0; iter < 2000; iter++) {
		size_t n = 1 + rnd(200), nb;
		char **names = calloc(n, sizeof(*names)), *out, **back;
		unsigned v = rnd(1000);
		int width = (int)rnd(5);

		for (size_t i = 0; i < n; i++) {
			names[i] = malloc(32);
			snprintf(names[i], 32, "node%0*u", width, v);
			switch (rnd(10)) {
			case 0: v += 2 + rnd(50); break;
			case 1: width = (int)rnd(5); break;
			case 2: break; /* a duplicate */
			case 3: v = v > 5 ? v - 5 : 0; break;
			default: v++; break;
			}
		}
		cr_assert_eq(hostlist_compress(names, n, &out, err, sizeof(err)),
			     0, "%s", err);
		cr_assert_eq(hostlist_expand(out, &back, &nb, err, sizeof(err)),
			     0, "'%s': %s", out, err);
		cr_assert_eq(nb, n);
		for (size_t i = 0; i < n; i++)
			cr_assert_str_eq(back[i], names[i], "'%s' name %zu",
					 out, i);
		hostlist_free(back);
		free(out);
		for (size_t i = 0; i < n; i++)
			free(names[i]);
		free(names);
	}
}

/* Expanding then compressing a valid list and expanding again is stable. */
Test(hostlist, property_expand_compress_expand)
{
	static const char *lists[] = {
		"gpu[01-04,07],cpu-a[1-3]x", "rack[1-2]-n[01-02]",
		"tux[9-11],tux[09-11]",	     "n[1-3,5,09-10],gpu[01-02,4]",
		"[1-3],a,b[1-2]c",	     "n[5,3,1-2],n[1-2]",
	};

	for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++) {
		char err[256], **a, **b, *c;
		size_t na, nb;

		cr_assert_eq(hostlist_expand(lists[i], &a, &na, err, sizeof(err)),
			     0);
		cr_assert_eq(hostlist_compress(a, na, &c, err, sizeof(err)), 0);
		cr_assert_eq(hostlist_expand(c, &b, &nb, err, sizeof(err)), 0);
		cr_assert_eq(na, nb, "%s -> %s", lists[i], c);
		for (size_t k = 0; k < na; k++)
			cr_assert_str_eq(a[k], b[k]);
		hostlist_free(a);
		hostlist_free(b);
		free(c);
	}
}

/*
 * Random strings over the grammar's alphabet: expansion either succeeds, and
 * then compress and expand again give the same names, or fails with a
 * message; never a crash (run it under make asan).
 */
Test(hostlist, property_random_text)
{
	static const char alpha[] = "n0129[]-, x\t";
	char text[40], err[256];
	int ok = 0;

	for (int iter = 0; iter < 20000; iter++) {
		size_t len = rnd(sizeof(text) - 1), n, nb;
		char **hosts, **back, *c;
		int rc;

		for (size_t i = 0; i < len; i++)
			text[i] = alpha[rnd(sizeof(alpha) - 1)];
		text[len] = '\0';
		err[0] = '\0';
		rc = hostlist_expand(text, &hosts, &n, err, sizeof(err));
		if (rc != 0) {
			cr_assert(rc == CRUN_ECONFIG || rc == CRUN_ETOOBIG,
				  "'%s': %s", text, crun_err_name(rc));
			cr_assert_neq(err[0], '\0', "'%s': no message", text);
			continue;
		}
		ok++;
		cr_assert_eq(hostlist_compress(hosts, n, &c, err, sizeof(err)),
			     0, "'%s': %s", text, err);
		cr_assert_eq(hostlist_expand(c, &back, &nb, err, sizeof(err)),
			     0, "'%s' -> '%s': %s", text, c, err);
		cr_assert_eq(nb, n, "'%s' -> '%s'", text, c);
		for (size_t i = 0; i < n; i++)
			cr_assert_str_eq(back[i], hosts[i], "'%s' -> '%s'",
					 text, c);
		hostlist_free(hosts);
		hostlist_free(back);
		free(c);
	}
	cr_expect_gt(ok, 1000, "too few valid lists generated (%d)", ok);
}

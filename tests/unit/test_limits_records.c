/*
 * Every range of the rendezvous record parsers (src/rdzv/rdzv_records.c) at its
 * edge: the bound itself is accepted and read back, one past it is refused
 * with a reason that names the field and the bound. A parser that lets one
 * more through (a `>` turned `>=`, a bound doubled or ignored) fails here;
 * tests/mutate/mutations.txt holds those mutations.
 */
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crun/err.h"
#include "crun/rdzv_records.h"

static char why[512];

/* A record from a format (into a static buffer, so a test can keep one). */
static const char *rec(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static const char *rec(const char *fmt, ...)
{
	static char buf[8][32768];
	static unsigned next;
	char *b = buf[next++ % 8];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(b, sizeof(buf[0]), fmt, ap);
	va_end(ap);
	return b;
}

/* n bytes of c, NUL-terminated (a static buffer per slot). */
static const char *run_of(int slot, char c, size_t n)
{
	static char buf[4][32768];

	cr_assert(n < sizeof(buf[0]));
	memset(buf[slot], c, n);
	buf[slot][n] = '\0';
	return buf[slot];
}

#define S(x) (x), strlen(x)
/* The reason of the last refusal contains frag. */
#define WHY_HAS(frag) cr_assert(strstr(why, (frag)) != NULL, "reason '%s' lacks '%s'", why, (frag))

/* Blanks around a number are allowed: pad it to exactly len bytes. */
static const char *padded(const char *num, size_t len)
{
	static char buf[2][4096];
	static unsigned next;
	char *b = buf[next++ % 2];
	size_t n = strlen(num);

	if (len >= sizeof(buf[0]) || n > len) {
		cr_assert_fail("cannot pad %zu bytes to %zu", n, len);
		return "";
	}
	memset(b, ' ', len - n);
	memcpy(b + len - n, num, n + 1);
	return b;
}

Test(limits_records, record_length, .timeout = 10)
{
	int64_t v;

	cr_assert_eq(rdzv_parse_int(S(padded("7", RDZV_MAX_RECORD)), 0, 9, &v, why, sizeof(why)), 0, "%s",
		     why);
	cr_assert_eq(v, 7);
	cr_assert_eq(rdzv_parse_int(S(padded("7", RDZV_MAX_RECORD + 1)), 0, 9, &v, why, sizeof(why)),
		     CRUN_EPROTO);
	WHY_HAS("record of 1025 bytes (at most 1024)");
}

Test(limits_records, int_bounds, .timeout = 10)
{
	int64_t v;

	cr_assert_eq(rdzv_parse_int(S("100"), 0, 100, &v, why, sizeof(why)), 0);
	cr_assert_eq(v, 100);
	cr_assert_eq(rdzv_parse_int(S("-5"), -5, 5, &v, why, sizeof(why)), 0);
	cr_assert_eq(v, -5);
	cr_assert_eq(rdzv_parse_int(S("-6"), -5, 5, &v, why, sizeof(why)), CRUN_EPROTO);
	WHY_HAS("-5..5");
	cr_assert_eq(rdzv_parse_int(S("9223372036854775807"), 0, INT64_MAX, &v, why, sizeof(why)), 0);
	cr_assert_eq(v, INT64_MAX);
	cr_assert_eq(rdzv_parse_int(S("9223372036854775808"), 0, INT64_MAX, &v, why, sizeof(why)),
		     CRUN_EPROTO);
	cr_assert_eq(rdzv_parse_int(S("-9223372036854775809"), INT64_MIN, 0, &v, why, sizeof(why)),
		     CRUN_EPROTO);
}

Test(limits_records, descriptor_numbers, .timeout = 10)
{
	struct rdzv_descr d;

	/* store-host flag 0..1 */
	cr_assert_eq(rdzv_parse_descr(S("1 0 1 1 h a r"), 8, &d, why, sizeof(why)), 0, "%s", why);
	cr_assert_eq(rdzv_parse_descr(S("2 0 1 1 h a r"), 8, &d, why, sizeof(why)), CRUN_EPROTO);
	WHY_HAS("store-host flag '2' is not a number in 0..1");
	/* node rank 0..max_nodes-1 */
	cr_assert_eq(rdzv_parse_descr(S("0 7 1 1 h a r"), 8, &d, why, sizeof(why)), 0, "%s", why);
	cr_assert_eq(d.node_rank, 7);
	cr_assert_eq(rdzv_parse_descr(S("0 8 1 1 h a r"), 8, &d, why, sizeof(why)), CRUN_EPROTO);
	WHY_HAS("node rank '8' is not a number in 0..7");
	/* nproc 1..RDZV_MAX_NPROC */
	cr_assert_eq(rdzv_parse_descr(S(rec("0 0 %d 1 h a r", RDZV_MAX_NPROC)), 8, &d, why, sizeof(why)), 0,
		     "%s", why);
	cr_assert_eq(d.nproc, RDZV_MAX_NPROC);
	cr_assert_eq(rdzv_parse_descr(S(rec("0 0 %d 1 h a r", RDZV_MAX_NPROC + 1)), 8, &d, why, sizeof(why)),
		     CRUN_EPROTO);
	WHY_HAS("nproc '65537' is not a number in 1..65536");
	/* pid 0..INT32_MAX */
	cr_assert_eq(rdzv_parse_descr(S("0 0 1 2147483647 h a r"), 8, &d, why, sizeof(why)), 0, "%s", why);
	cr_assert_eq(d.pid, 2147483647);
	cr_assert_eq(rdzv_parse_descr(S("0 0 1 2147483648 h a r"), 8, &d, why, sizeof(why)), CRUN_EPROTO);
	WHY_HAS("pid '2147483648' is not a number in 0..2147483647");
}

Test(limits_records, descriptor_fields, .timeout = 10)
{
	struct rdzv_descr d;
	const char *h = run_of(0, 'h', RDZV_MAX_FIELD);
	const char *h1 = run_of(1, 'h', RDZV_MAX_FIELD + 1);
	const char *ips, *ips1;

	cr_assert_eq(rdzv_parse_descr(S(rec("0 0 1 1 %s a r", h)), 8, &d, why, sizeof(why)), 0, "%s", why);
	cr_assert_str_eq(d.host, h);
	cr_assert_eq(rdzv_parse_descr(S(rec("0 0 1 1 %s a r", h1)), 8, &d, why, sizeof(why)), CRUN_EPROTO);
	WHY_HAS("host longer than 255 bytes");
	cr_assert_eq(rdzv_parse_descr(S(rec("0 0 1 1 h %s r", h)), 8, &d, why, sizeof(why)), 0, "%s", why);
	cr_assert_str_eq(d.addr, h);
	cr_assert_eq(rdzv_parse_descr(S(rec("0 0 1 1 h %s r", h1)), 8, &d, why, sizeof(why)), CRUN_EPROTO);
	WHY_HAS("address longer than 255 bytes");
	/* role: at most sizeof(role) - 1 = 127 bytes */
	cr_assert_eq(rdzv_parse_descr(S(rec("0 0 1 1 h a %s", run_of(2, 'r', 127))), 8, &d, why, sizeof(why)),
		     0, "%s", why);
	cr_assert_eq(strlen(d.role), 127);
	cr_assert_eq(rdzv_parse_descr(S(rec("0 0 1 1 h a %s", run_of(2, 'r', 128))), 8, &d, why, sizeof(why)),
		     CRUN_EPROTO);
	WHY_HAS("role longer than 127 bytes");
	/* ip= list: 1..RDZV_MAX_FIELD bytes (IPv4 literals, the last one as
	 * wide as it takes to land on 255 bytes exactly). */
	{
		static char l[300];
		size_t n;

		n = 0;
		while (n + 8 + 7 <= RDZV_MAX_FIELD)
			n += (size_t)sprintf(l + n, "1.2.3.4,");
		/* the rest: an IPv4 literal of the remaining width (7..15) */
		{
			size_t rest = RDZV_MAX_FIELD - n;
			const char *lit[] = {"1.2.3.4", "11.2.3.4", "11.22.3.4", "11.22.33.4",
					     "11.22.33.44", "111.22.33.44", "111.222.33.44",
					     "111.222.133.44", "111.222.133.144"};

			cr_assert(rest >= 7 && rest <= 15, "rest %zu", rest);
			n += (size_t)sprintf(l + n, "%s", lit[rest - 7]);
		}
		cr_assert_eq(n, RDZV_MAX_FIELD);
		ips = rec("%s", l);
		ips1 = rec("%s,1.2.3.4", l);
	}
	cr_assert_eq(rdzv_parse_descr(S(rec("0 0 1 1 h a r ip=%s", ips)), 8, &d, why, sizeof(why)), 0, "%s",
		     why);
	cr_assert_str_eq(d.ips, ips);
	cr_assert_eq(rdzv_parse_descr(S(rec("0 0 1 1 h a r ip=%s", ips1)), 8, &d, why, sizeof(why)),
		     CRUN_EPROTO);
	WHY_HAS("ip= list of 263 bytes (1..255)");
}

Test(limits_records, assignment_world, .timeout = 10)
{
	struct crun_ranks k;

	/* One node: the world is at most RDZV_MAX_NPROC ranks. */
	cr_assert_eq(rdzv_parse_assign(S("0 1 0 65536 0 65536 65536"), 1, 65536, &k, why, sizeof(why)), 0,
		     "%s", why);
	cr_assert_eq(k.world_size, 65536);
	cr_assert_eq(rdzv_parse_assign(S("0 1 0 65537 0 65537 65537"), 1, 65537, &k, why, sizeof(why)),
		     CRUN_EPROTO);
	cr_assert(strncmp(why, "world size '65537' is not a number in 1..65536", 46) == 0, "%s", why);
	/* base rank up to world - 1 (a node of one worker at the end) */
	cr_assert_eq(rdzv_parse_assign(S("1 2 65535 65536 65535 65536 1"), 2, 1, &k, why, sizeof(why)), 0,
		     "%s", why);
	cr_assert_eq(k.base_rank, 65535);
	cr_assert_eq(rdzv_parse_assign(S("1 2 65536 65536 0 65536 1"), 2, 1, &k, why, sizeof(why)),
		     CRUN_EPROTO);
	WHY_HAS("ranks 65536..65536 outside a world of 65536");
	/* The world of many nodes stops at INT32_MAX. */
	cr_assert_eq(rdzv_parse_assign(S("0 40000 0 2147483647 0 2147483647 1"), 40000, 1, &k, why,
				       sizeof(why)),
		     0, "%s", why);
	cr_assert_eq(rdzv_parse_assign(S("0 40000 0 2147483648 0 2147483647 1"), 40000, 1, &k, why,
				       sizeof(why)),
		     CRUN_EPROTO);
	/* 32768 nodes of RDZV_MAX_NPROC: exactly 2^31 ranks, one past it. */
	cr_assert_eq(rdzv_parse_assign(S("0 32768 0 2147483647 0 2147483647 1"),
				       32768, 1, &k, why, sizeof(why)),
		     0, "%s", why);
	cr_assert_eq(rdzv_parse_assign(S("0 32768 0 2147483648 0 2147483647 1"),
				       32768, 1, &k, why, sizeof(why)),
		     CRUN_EPROTO);
	WHY_HAS("world size '2147483648' is not a number in 1..2147483647");
	/* group rank 0..nodes-1, role world within the world */
	cr_assert_eq(rdzv_parse_assign(S("2 3 2 3 2 3 1"), 3, 1, &k, why, sizeof(why)), 0, "%s", why);
	cr_assert_eq(rdzv_parse_assign(S("3 3 2 3 2 3 1"), 3, 1, &k, why, sizeof(why)), CRUN_EPROTO);
	WHY_HAS("group rank '3' is not a number in 0..2");
	cr_assert_eq(rdzv_parse_assign(S("2 3 2 3 3 3 1"), 3, 1, &k, why, sizeof(why)), CRUN_EPROTO);
	WHY_HAS("role ranks 3..3 outside a role world of 3");
	cr_assert_eq(rdzv_parse_assign(S("2 3 2 3 2 4 1"), 3, 1, &k, why, sizeof(why)), CRUN_EPROTO);
}

Test(limits_records, assigned_and_master, .timeout = 10)
{
	char addr[RDZV_MAX_FIELD + 1];
	int closed, port;

	cr_assert_eq(rdzv_parse_assigned(S("ok 4"), 4, &closed, why, sizeof(why)), 0);
	cr_assert_eq(closed, 4);
	cr_assert_eq(rdzv_parse_assigned(S("ok 1"), 4, &closed, why, sizeof(why)), 0);
	cr_assert_eq(closed, 1);
	cr_assert_eq(rdzv_parse_assigned(S("ok 5"), 4, &closed, why, sizeof(why)), CRUN_EPROTO);
	WHY_HAS("1..4");
	cr_assert_eq(rdzv_parse_master(S("a 65535"), addr, sizeof(addr), &port, NULL, why, sizeof(why)), 0);
	cr_assert_eq(port, 65535);
	cr_assert_eq(rdzv_parse_master(S("a 1"), addr, sizeof(addr), &port, NULL, why, sizeof(why)), 0);
	cr_assert_eq(port, 1);
	cr_assert_eq(rdzv_parse_master(S("a 65536"), addr, sizeof(addr), &port, NULL, why, sizeof(why)),
		     CRUN_EPROTO);
	WHY_HAS("port '65536' is not a number in 1..65535");
	cr_assert_eq(rdzv_parse_master(S(rec("%s 9", run_of(0, 'a', RDZV_MAX_FIELD))), addr, sizeof(addr),
				       &port, NULL, why, sizeof(why)),
		     0, "%s", why);
	cr_assert_eq(rdzv_parse_master(S(rec("%s 9", run_of(0, 'a', RDZV_MAX_FIELD + 1))), addr,
				       sizeof(addr), &port, NULL, why, sizeof(why)),
		     CRUN_EPROTO);
	WHY_HAS("address longer than 255 bytes");
}

Test(limits_records, addresses, .timeout = 10)
{
	const char *f = run_of(0, 'a', RDZV_MAX_ADDRS_FIELD);
	const char *f1 = run_of(1, 'a', RDZV_MAX_ADDRS_FIELD + 1);
	char *out = NULL;

	/* Two nodes, the largest fields: 2 * 511 + 1 bytes. */
	cr_assert_eq(rdzv_parse_addrs(S(rec("%s %s", f, f)), 2, &out, why, sizeof(why)), 0, "%s", why);
	cr_assert_eq(strlen(out), 2 * RDZV_MAX_ADDRS_FIELD + 1);
	free(out);
	cr_assert_eq(rdzv_parse_addrs(S(rec("%s %s", f, f1)), 2, &out, why, sizeof(why)), CRUN_EPROTO);
	WHY_HAS("address longer than 511 bytes");
	/* The whole record: at most nodes * (field + 1) bytes. */
	cr_assert_eq(rdzv_parse_addrs(S(rec("%s %s ", f, f)), 2, &out, why, sizeof(why)), 0, "%s", why);
	free(out);
	cr_assert_eq(rdzv_parse_addrs(S(rec("%s %s  ", f, f)), 2, &out, why, sizeof(why)), CRUN_EPROTO);
	WHY_HAS("1025 bytes for 2 addresses");
	cr_assert_eq(rdzv_parse_addrs(S("a b c"), 2, &out, why, sizeof(why)), CRUN_EPROTO);
	WHY_HAS("more than 2 addresses");
}

Test(limits_records, counter, .timeout = 10)
{
	int64_t v;

	cr_assert_eq(rdzv_parse_counter(S("9223372036854775807"), &v, why, sizeof(why)), 0);
	cr_assert_eq(v, INT64_MAX);
	cr_assert_eq(rdzv_parse_counter(S("9223372036854775808"), &v, why, sizeof(why)), CRUN_EPROTO);
	WHY_HAS("is not a number >= 0");
	cr_assert_eq(rdzv_parse_counter(S("0"), &v, why, sizeof(why)), 0);
	cr_assert_eq(rdzv_parse_counter(S("-1"), &v, why, sizeof(why)), CRUN_EPROTO);
	/* etcd's token: at most 64 bytes */
	cr_assert_eq(rdzv_parse_counter(S(rec("5 %s", run_of(0, 't', 64))), &v, why, sizeof(why)), 0, "%s",
		     why);
	cr_assert_eq(v, 5);
	cr_assert_eq(rdzv_parse_counter(S(rec("5 %s", run_of(0, 't', 65))), &v, why, sizeof(why)),
		     CRUN_EPROTO);
	WHY_HAS("counter with trailing fields");
}

Test(limits_records, config, .timeout = 10)
{
	struct rdzv_config cf;

#define CONFIG(s) rdzv_parse_config(S(s), 64, &cf, why, sizeof(why))
	cr_assert_eq(CONFIG("nnodes=64:64 backend=c10d"), 0, "%s", why);
	cr_assert_eq(cf.min_nodes, 64);
	cr_assert_eq(cf.max_nodes, 64);
	cr_assert_eq(CONFIG("nnodes=65:65 backend=c10d"), CRUN_EPROTO);
	WHY_HAS("1 <= MIN <= MAX <= 64");
	cr_assert_eq(CONFIG("nnodes=1:64 backend=c10d"), 0, "%s", why);
	cr_assert_eq(CONFIG("nnodes=1:65 backend=c10d"), CRUN_EPROTO);
	cr_assert_eq(CONFIG("nnodes=0:1 backend=c10d"), CRUN_EPROTO);
	cr_assert_eq(CONFIG("nnodes=3:3 backend=c10d"), 0, "%s", why);
	cr_assert_eq(CONFIG("nnodes=3:2 backend=c10d"), CRUN_EPROTO);
	/* the backend: at most sizeof(backend) - 1 bytes */
	cr_assert_eq(CONFIG(rec("nnodes=1:2 backend=%s", run_of(0, 'b', 31))), 0, "%s", why);
	cr_assert_eq(strlen(cf.backend), 31);
	cr_assert_eq(CONFIG(rec("nnodes=1:2 backend=%s", run_of(0, 'b', 32))), CRUN_EPROTO);
	WHY_HAS("expected backend=NAME");
	/* exclude=K:S, K 1..32, S at most 32 characters */
	cr_assert_eq(CONFIG("nnodes=1:2 backend=c10d exclude=32:5"), 0, "%s", why);
	cr_assert_eq(CONFIG("nnodes=1:2 backend=c10d exclude=1:5"), 0, "%s", why);
	cr_assert_eq(CONFIG("nnodes=1:2 backend=c10d exclude=33:5"), CRUN_EPROTO);
	WHY_HAS("expected exclude=K:SECONDS after the backend");
	cr_assert_eq(CONFIG(rec("nnodes=1:2 backend=c10d exclude=2:%s", run_of(0, '1', 32))), 0, "%s", why);
	cr_assert_float_eq(cf.exclude_for, 1.111111e31, 1e25);
	cr_assert_eq(CONFIG(rec("nnodes=1:2 backend=c10d exclude=2:%s", run_of(0, '1', 33))), CRUN_EPROTO);
	/* proto=1..999 */
	cr_assert_eq(CONFIG("nnodes=1:2 backend=c10d proto=999"), 0, "%s", why);
	cr_assert_eq(CONFIG("nnodes=1:2 backend=c10d proto=1"), 0, "%s", why);
	cr_assert_eq(CONFIG("nnodes=1:2 backend=c10d proto=1000"), CRUN_EPROTO);
	WHY_HAS("expected proto=1..999 last");
#undef CONFIG
}

Test(limits_records, params, .timeout = 10)
{
	struct rdzv_params pa;

	cr_assert_eq(rdzv_parse_params(S("max_restarts=2147483647 keep_alive_ms=3600000"), &pa, why,
				       sizeof(why)),
		     0, "%s", why);
	cr_assert_eq(pa.max_restarts, 2147483647);
	cr_assert_eq(pa.keep_alive_ms, 3600000);
	cr_assert_eq(rdzv_parse_params(S("max_restarts=0 keep_alive_ms=1"), &pa, why, sizeof(why)), 0, "%s",
		     why);
	cr_assert_eq(rdzv_parse_params(S("max_restarts=2147483648 keep_alive_ms=1"), &pa, why, sizeof(why)),
		     CRUN_EPROTO);
	WHY_HAS("max_restarts '2147483648' is not a number in 0..2147483647");
	cr_assert_eq(rdzv_parse_params(S("max_restarts=0 keep_alive_ms=3600001"), &pa, why, sizeof(why)),
		     CRUN_EPROTO);
	WHY_HAS("keep_alive_ms '3600001' is not a number in 1..3600000");
}

/* "<round> <ms> <code> rank <r> (local rank <l>) on <host> exited with <code>" */
static int failure(int64_t round, int64_t ms, int code, int64_t rank, int64_t local,
		   struct rdzv_failure *f)
{
	const char *s = rec("%lld %lld %d rank %lld (local rank %lld) on h exited with %d", (long long)round,
			    (long long)ms, code, (long long)rank, (long long)local, code);

	return rdzv_parse_failure(S(s), f, why, sizeof(why));
}

Test(limits_records, failure, .timeout = 10)
{
	struct rdzv_failure f;

	cr_assert_eq(failure(2147483647, 253402300799999LL, 255, 2147483646, 65535, &f), 0, "%s", why);
	cr_assert_eq(f.round, 2147483647);
	cr_assert_eq(f.unix_ms, 253402300799999LL);
	cr_assert_eq(f.exit_code, 255);
	cr_assert_eq(f.rank, 2147483646);
	cr_assert_eq(f.local_rank, 65535);
	cr_assert_eq(failure(0, 0, -255, 0, 0, &f), 0, "%s", why);
	cr_assert_eq(f.exit_code, -255);
	cr_assert_eq(failure(2147483648LL, 1, 1, 0, 0, &f), CRUN_EPROTO);
	WHY_HAS("round '2147483648' is not a number in 0..2147483647");
	cr_assert_eq(failure(1, 253402300800000LL, 1, 0, 0, &f), CRUN_EPROTO);
	WHY_HAS("is not in ms since 1970");
	cr_assert_eq(failure(1, 1, 256, 0, 0, &f), CRUN_EPROTO);
	WHY_HAS("exit code '256' is not a number in -255..255");
	cr_assert_eq(failure(1, 1, -256, 0, 0, &f), CRUN_EPROTO);
	cr_assert_eq(failure(1, 1, 1, 2147483647, 0, &f), CRUN_EPROTO);
	WHY_HAS("rank '2147483647' is not a number in 0..2147483646");
	cr_assert_eq(failure(1, 1, 1, 0, 65536, &f), CRUN_EPROTO);
	WHY_HAS("is not a number in 0..65535 followed by ')'");
}

Test(limits_records, envcheck, .timeout = 10)
{
	static char text[RDZV_MAX_ENVCHECK + 2], r[RDZV_MAX_ENVCHECK + 2];
	size_t n = 0;

	/* 16 lines of 256 bytes: exactly RDZV_MAX_ENVCHECK. */
	for (int i = 0; i < 16; i++) {
		memset(r + n, 'a' + i, 255);
		r[n + 255] = '\n';
		n += 256;
	}
	cr_assert_eq(n, RDZV_MAX_ENVCHECK);
	cr_assert_eq(rdzv_parse_envcheck(r, n, text, sizeof(text), why, sizeof(why)), 0, "%s", why);
	cr_assert_eq(strlen(text), RDZV_MAX_ENVCHECK);
	r[n - 1] = 'x';
	r[n] = '\n';
	cr_assert_eq(rdzv_parse_envcheck(r, n + 1, text, sizeof(text), why, sizeof(why)), CRUN_EPROTO);
	WHY_HAS("record of 4097 bytes (at most 4096)");
	/* 16 lines ok, 17 refused (short ones). */
	cr_assert_eq(rdzv_parse_envcheck(S("a\na\na\na\na\na\na\na\na\na\na\na\na\na\na\na\n"), text,
					 sizeof(text), why, sizeof(why)),
		     0, "%s", why);
	cr_assert_eq(rdzv_parse_envcheck(S("a\na\na\na\na\na\na\na\na\na\na\na\na\na\na\na\na\n"), text,
					 sizeof(text), why, sizeof(why)),
		     CRUN_EPROTO);
	WHY_HAS("more than 16 lines");
}

Test(limits_records, diag, .timeout = 10)
{
	static struct rdzv_diag d;
	const char *m = run_of(0, '0', RDZV_DIAG_MAX_NPROC / 4);
	const char *m1 = run_of(1, '0', RDZV_DIAG_MAX_NPROC / 4 + 1);

	cr_assert_eq(rdzv_parse_diag(S(rec("1 1024 1024 %s %s h", m, m)), 2, 2048, &d, why, sizeof(why)), 0,
		     "%s", why);
	cr_assert_eq(d.nproc, RDZV_DIAG_MAX_NPROC);
	cr_assert_eq(rdzv_parse_diag(S(rec("1 1023 1025 %s %s h", m1, m1)), 2, 2048, &d, why, sizeof(why)),
		     CRUN_EPROTO);
	WHY_HAS("nproc '1025' is not a number in 1..1024");
	/* nproc at most the world, ranks inside it, group rank below nodes */
	cr_assert_eq(rdzv_parse_diag(S("0 0 3 0 0 h"), 1, 3, &d, why, sizeof(why)), 0, "%s", why);
	cr_assert_eq(rdzv_parse_diag(S("0 0 4 0 0 h"), 1, 3, &d, why, sizeof(why)), CRUN_EPROTO);
	WHY_HAS("nproc '4' is not a number in 1..3");
	cr_assert_eq(rdzv_parse_diag(S("0 1 2 0 0 h"), 1, 3, &d, why, sizeof(why)), 0, "%s", why);
	cr_assert_eq(rdzv_parse_diag(S("0 2 2 0 0 h"), 1, 3, &d, why, sizeof(why)), CRUN_EPROTO);
	WHY_HAS("ranks 2..3 outside a world of 3");
	cr_assert_eq(rdzv_parse_diag(S("1 0 1 0 0 h"), 1, 3, &d, why, sizeof(why)), CRUN_EPROTO);
	WHY_HAS("group rank '1' is not a number in 0..0");
	/* masks: a bit past nproc is refused */
	cr_assert_eq(rdzv_parse_diag(S("0 0 3 4 0 h"), 1, 3, &d, why, sizeof(why)), 0, "%s", why);
	cr_assert(d.connected[2]);
	cr_assert_eq(rdzv_parse_diag(S("0 0 3 8 0 h"), 1, 3, &d, why, sizeof(why)), CRUN_EPROTO);
	WHY_HAS("connected mask names local rank 3 of 3");
}

Test(limits_records, list_records, .timeout = 10)
{
	static struct rdzv_fail f[RDZV_MAX_FAILS + 1];
	static struct rdzv_exclusion x[RDZV_MAX_EXCLUDED + 1];
	static char r[RDZV_MAX_LIST_RECORD + 2];
	int n;

	/* the record's length: "0" and blanks up to the cap */
	memset(r, ' ', sizeof(r));
	r[0] = '0';
	cr_assert_eq(rdzv_parse_fails(r, RDZV_MAX_LIST_RECORD, f, 4, &n, why, sizeof(why)), 0, "%s", why);
	cr_assert_eq(rdzv_parse_fails(r, RDZV_MAX_LIST_RECORD + 1, f, 4, &n, why, sizeof(why)), CRUN_EPROTO);
	WHY_HAS("record of 20001 bytes (at most 20000)");
	cr_assert_eq(rdzv_parse_excluded(r, RDZV_MAX_LIST_RECORD, x, 4, &n, why, sizeof(why)), 0, "%s", why);
	cr_assert_eq(rdzv_parse_excluded(r, RDZV_MAX_LIST_RECORD + 1, x, 4, &n, why, sizeof(why)),
		     CRUN_EPROTO);
	/* the count: 0..max, max capped at RDZV_MAX_FAILS */
	{
		char *p = r;

		for (int i = 0; i <= RDZV_MAX_FAILS; i++) {
			p = r + sprintf(r, "%d", i + 1);
			for (int j = 0; j <= i; j++)
				p += sprintf(p, " %d h a#%x", j, j);
			if (i == 1) {
				cr_assert_eq(rdzv_parse_fails(S(r), f, 2, &n, why, sizeof(why)), 0, "%s", why);
				cr_assert_eq(n, 2);
			}
			if (i == 2) {
				cr_assert_eq(rdzv_parse_fails(S(r), f, 2, &n, why, sizeof(why)), CRUN_EPROTO);
				WHY_HAS("count '3' is not a number in 0..2");
			}
		}
		/* now r holds RDZV_MAX_FAILS + 1 entries: past the cap, for a
		 * max just past it and far past it */
		cr_assert_eq(rdzv_parse_fails(S(r), f, 1000, &n, why, sizeof(why)), CRUN_EPROTO);
		WHY_HAS("count '33' is not a number in 0..32");
		cr_assert_eq(rdzv_parse_fails(S(r), f, RDZV_MAX_FAILS + 1, &n, why, sizeof(why)),
			     CRUN_EPROTO);
		WHY_HAS("count '33' is not a number in 0..32");
		p = r + sprintf(r, "%d", RDZV_MAX_FAILS);
		for (int j = 0; j < RDZV_MAX_FAILS; j++)
			p += sprintf(p, " %d h a#%x", j, j);
		cr_assert_eq(rdzv_parse_fails(S(r), f, 1000, &n, why, sizeof(why)), 0, "%s", why);
		cr_assert_eq(n, RDZV_MAX_FAILS);
		/* exclusions likewise */
		p = r + sprintf(r, "%d", RDZV_MAX_EXCLUDED + 1);
		for (int j = 0; j <= RDZV_MAX_EXCLUDED; j++)
			p += sprintf(p, " h a#%x 5 1 1", j);
		cr_assert_eq(rdzv_parse_excluded(S(r), x, 1000, &n, why, sizeof(why)), CRUN_EPROTO);
		WHY_HAS("count '33' is not a number in 0..32");
		cr_assert_eq(rdzv_parse_excluded(S(r), x, RDZV_MAX_EXCLUDED + 1, &n, why, sizeof(why)),
			     CRUN_EPROTO);
		WHY_HAS("count '33' is not a number in 0..32");
		p = r + sprintf(r, "%d", RDZV_MAX_EXCLUDED);
		for (int j = 0; j < RDZV_MAX_EXCLUDED; j++)
			p += sprintf(p, " h a#%x 5 1 1", j);
		cr_assert_eq(rdzv_parse_excluded(S(r), x, 1000, &n, why, sizeof(why)), 0, "%s", why);
		cr_assert_eq(n, RDZV_MAX_EXCLUDED);
	}
}

Test(limits_records, exclusion_fields, .timeout = 10)
{
	struct rdzv_exclusion x[2];
	struct rdzv_fail f[2];
	int n;

	/* until 0..2^40, round 0..INT32_MAX, failures 1..RDZV_MAX_FAILS */
	cr_assert_eq(rdzv_parse_excluded(S("1 h a 1099511627776 2147483647 32"), x, 2, &n, why, sizeof(why)), 0,
		     "%s", why);
	cr_assert_eq(x[0].until, (int64_t)1 << 40);
	cr_assert_eq(x[0].round, 2147483647);
	cr_assert_eq(x[0].fails, 32);
	cr_assert_eq(rdzv_parse_excluded(S("1 h a 1099511627777 1 1"), x, 2, &n, why, sizeof(why)),
		     CRUN_EPROTO);
	WHY_HAS("until '1099511627777' is not a time in 0..2^40");
	cr_assert_eq(rdzv_parse_excluded(S("1 h a 5 2147483648 1"), x, 2, &n, why, sizeof(why)), CRUN_EPROTO);
	WHY_HAS("round '2147483648' is not a number in 0..2147483647");
	cr_assert_eq(rdzv_parse_excluded(S("1 h a 5 1 33"), x, 2, &n, why, sizeof(why)), CRUN_EPROTO);
	WHY_HAS("failures '33' is not a number in 1..32");
	cr_assert_eq(rdzv_parse_excluded(S("1 h a 5 1 1"), x, 2, &n, why, sizeof(why)), 0, "%s", why);
	cr_assert_eq(rdzv_parse_excluded(S("1 h a 5 1 0"), x, 2, &n, why, sizeof(why)), CRUN_EPROTO);
	/* the node id: 1..RDZV_MAX_ID hex digits */
	cr_assert_eq(rdzv_parse_fails(S(rec("1 7 h a#%s", run_of(0, 'f', RDZV_MAX_ID))), f, 2, &n, why,
				      sizeof(why)),
		     0, "%s", why);
	cr_assert_eq(strlen(f[0].id), RDZV_MAX_ID);
	cr_assert_eq(rdzv_parse_fails(S(rec("1 7 h a#%s", run_of(0, 'f', RDZV_MAX_ID + 1))), f, 2, &n, why,
				      sizeof(why)),
		     CRUN_EPROTO);
	WHY_HAS("<id of 1..16 hex digits>");
	cr_assert_eq(rdzv_parse_fails(S("1 2147483647 h a"), f, 2, &n, why, sizeof(why)), 0, "%s", why);
	cr_assert_eq(rdzv_parse_fails(S("1 2147483648 h a"), f, 2, &n, why, sizeof(why)), CRUN_EPROTO);
	WHY_HAS("round '2147483648' is not a number in 0..2147483647");
}

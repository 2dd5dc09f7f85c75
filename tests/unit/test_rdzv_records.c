/*
 * The rendezvous record parsers (src/rdzv/rdzv_records.c): every record from the
 * store is untrusted, so each parser must accept what rdzv.c writes and
 * refuse, with a reason naming the field, what would break the arithmetic.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "crun/err.h"
#include "crun/rdzv_records.h"

#define S(x) x, strlen(x)

Test(rdzv_records, int_ranges, .timeout = 10)
{
	int64_t v;
	char why[200];

	cr_assert_eq(rdzv_parse_int(S(" 42 "), 0, 100, &v, why, sizeof(why)),
		     0);
	cr_assert_eq(v, 42);
	cr_assert_eq(rdzv_parse_int(S("101"), 0, 100, &v, why, sizeof(why)),
		     CRUN_EPROTO);
	cr_assert(strstr(why, "0..100") != NULL, "%s", why);
	cr_assert_eq(rdzv_parse_int(S("4x"), 0, 100, &v, why, sizeof(why)),
		     CRUN_EPROTO);
	cr_assert_eq(rdzv_parse_int(S("-"), -5, 5, &v, why, sizeof(why)),
		     CRUN_EPROTO);
	cr_assert_eq(rdzv_parse_int(S("99999999999999999999"), 0, INT64_MAX,
				    &v, why, sizeof(why)),
		     CRUN_EPROTO);
	cr_assert_eq(rdzv_parse_int(S("-9223372036854775808"), INT64_MIN, 0,
				    &v, why, sizeof(why)),
		     0);
	cr_assert_eq(v, INT64_MIN);
	cr_assert_eq(rdzv_parse_int("", 0, 0, 1, &v, why, sizeof(why)),
		     CRUN_EPROTO);
	cr_assert_eq(rdzv_parse_int(S("1 2"), 0, 9, &v, why, sizeof(why)),
		     CRUN_EPROTO);
}

/* Any role survives the record: empty (TorchX's --role ''), blanks, '%'. */
Test(rdzv_records, descriptor_roles, .timeout = 10)
{
	static const char *const roles[] = {"",	 "-",	"trainer", "a b",
					    "50%", "%2D", "x\ty", "-a-"};
	struct rdzv_descr_in in = {0, 1, 2, 3, "h", "10.0.0.1", NULL, NULL, ""};
	struct rdzv_descr d;
	char buf[RDZV_MAX_RECORD + 1], why[200];

	for (size_t i = 0; i < sizeof(roles) / sizeof(roles[0]); i++) {
		in.role = roles[i];
		rdzv_format_descr(buf, sizeof(buf), &in);
		cr_assert_eq(rdzv_parse_descr(buf, strlen(buf), 8, &d, why,
					      sizeof(why)),
			     0, "'%s' as '%s': %s", roles[i], buf, why);
		cr_assert_str_eq(d.role, roles[i], "written as '%s'", buf);
	}
	/* Bad escapes, and an escaped NUL, are refused. */
	static const char *const bad[] = {"0 0 1 1 h a %", "0 0 1 1 h a %4",
					  "0 0 1 1 h a %zz", "0 0 1 1 h a %00"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert_eq(rdzv_parse_descr(bad[i], strlen(bad[i]), 8, &d,
					      why, sizeof(why)),
			     CRUN_EPROTO, "%s", bad[i]);
}

Test(rdzv_records, descriptor, .timeout = 10)
{
	struct rdzv_descr d;
	char why[200];

	cr_assert_eq(rdzv_parse_descr(S("1 0 4 123 node-a 10.0.0.1 trainer"),
				      8, &d, why, sizeof(why)),
		     0, "%s", why);
	cr_assert_eq(d.is_host, 1);
	cr_assert_eq(d.nproc, 4);
	cr_assert_str_eq(d.host, "node-a");
	cr_assert_str_eq(d.addr, "10.0.0.1");
	cr_assert_str_eq(d.role, "trainer");
	/* nproc 0, and the host is still named for the message. */
	cr_assert_eq(rdzv_parse_descr(S("0 0 0 1 evil 10.0.0.9 r"), 8, &d,
				      why, sizeof(why)),
		     CRUN_EPROTO);
	cr_assert_str_eq(d.host, "evil");
	cr_assert(strstr(why, "nproc") != NULL, "%s", why);
	/* node rank beyond max_nodes, missing fields, trailing fields. */
	cr_assert_eq(rdzv_parse_descr(S("0 8 1 1 h a r"), 8, &d, why,
				      sizeof(why)),
		     CRUN_EPROTO);
	cr_assert_eq(rdzv_parse_descr(S("0 0 1 1 h a"), 8, &d, why,
				      sizeof(why)),
		     CRUN_EPROTO);
	cr_assert_eq(rdzv_parse_descr(S("0 0 1 1 h a r x"), 8, &d, why,
				      sizeof(why)),
		     CRUN_EPROTO);
	/* A control byte inside the host name. */
	cr_assert_eq(rdzv_parse_descr("0 0 1 1 h\001 a r", 15, 8, &d, why,
				      sizeof(why)),
		     CRUN_EPROTO);
}

Test(rdzv_records, descriptor_addresses, .timeout = 10)
{
	struct rdzv_descr d;
	char why[200];

	/* The node's own addresses, before the fingerprint or alone. */
	cr_assert_eq(rdzv_parse_descr(S("0 0 1 7 pod-b pod-b r "
					"ip=10.1.0.2,2001:db8::2"),
				      8, &d, why, sizeof(why)),
		     0, "%s", why);
	cr_assert_str_eq(d.ips, "10.1.0.2,2001:db8::2");
	cr_assert_eq(rdzv_parse_descr(S("0 0 1 7 pod-b pod-b r"), 8, &d, why,
				      sizeof(why)),
		     0, "%s", why);
	cr_assert_str_eq(d.ips, "");
	/* Names, empty fields and junk are refused: nothing gets resolved. */
	cr_assert_eq(rdzv_parse_descr(S("0 0 1 7 h a r ip=pod-b"), 8, &d,
				      why, sizeof(why)),
		     CRUN_EPROTO);
	cr_assert(strstr(why, "pod-b") != NULL, "%s", why);
	cr_assert_eq(rdzv_parse_descr(S("0 0 1 7 h a r ip=10.0.0.1,"), 8, &d,
				      why, sizeof(why)),
		     CRUN_EPROTO);
	cr_assert_eq(rdzv_parse_descr(S("0 0 1 7 h a r ip="), 8, &d, why,
				      sizeof(why)),
		     CRUN_EPROTO);
}

Test(rdzv_records, assignment, .timeout = 10)
{
	struct crun_ranks k;
	char why[200];

	cr_assert_eq(rdzv_parse_assign(S("1 3 4 7 4 7 2"), 3, 2, &k, why,
				       sizeof(why)),
		     0, "%s", why);
	cr_assert_eq(k.group_rank, 1);
	cr_assert_eq(k.world_size, 7);
	/* A record that would divide by zero: group world size 0. */
	cr_assert_eq(rdzv_parse_assign(S("0 0 0 0 0 0 0"), 1, 1, &k, why,
				       sizeof(why)),
		     CRUN_EPROTO);
	cr_assert(strstr(why, "group world size") != NULL, "%s", why);
	/* A world size other than the round's participants. */
	cr_assert_eq(rdzv_parse_assign(S("0 2 0 1 0 1 1"), 1, 1, &k, why,
				       sizeof(why)),
		     CRUN_EPROTO);
	/* Group rank outside the group. */
	cr_assert_eq(rdzv_parse_assign(S("3 3 0 9 0 9 3"), 3, 3, &k, why,
				       sizeof(why)),
		     CRUN_EPROTO);
	/* Ranks past the world. */
	cr_assert_eq(rdzv_parse_assign(S("0 1 5 6 0 6 2"), 1, 2, &k, why,
				       sizeof(why)),
		     CRUN_EPROTO);
	cr_assert(strstr(why, "outside a world") != NULL, "%s", why);
	/* A local world size that is not this node's nproc. */
	cr_assert_eq(rdzv_parse_assign(S("0 1 0 4 0 4 4"), 1, 2, &k, why,
				       sizeof(why)),
		     CRUN_EPROTO);
	/* Role world larger than the world. */
	cr_assert_eq(rdzv_parse_assign(S("0 1 0 2 0 3 2"), 1, 2, &k, why,
				       sizeof(why)),
		     CRUN_EPROTO);
	/* Overflowing numbers. */
	cr_assert_eq(rdzv_parse_assign(S("0 1 2147483647 2147483647 0 1 1"), 1,
				       1, &k, why, sizeof(why)),
		     CRUN_EPROTO);
	cr_assert_eq(rdzv_parse_assign(S("0 1 0 1 0 1 1"), 0, 1, &k, why,
				       sizeof(why)),
		     CRUN_EPROTO);
}

Test(rdzv_records, master_and_end, .timeout = 10)
{
	char addr[64], text[32], why[200];
	int port, kind;

	cr_assert_eq(rdzv_parse_master(S("10.0.0.1 29500"), addr, sizeof(addr),
				       &port, NULL, why, sizeof(why)),
		     0);
	cr_assert_str_eq(addr, "10.0.0.1");
	cr_assert_eq(port, 29500);
	cr_assert_eq(rdzv_parse_master(S("10.0.0.1 0"), addr, sizeof(addr),
				       &port, NULL, why, sizeof(why)),
		     CRUN_EPROTO);
	cr_assert_eq(rdzv_parse_master(S("10.0.0.1 70000"), addr,
				       sizeof(addr), &port, NULL, why, sizeof(why)),
		     CRUN_EPROTO);
	cr_assert_eq(rdzv_parse_master(S("10.0.0.1"), addr, sizeof(addr),
				       &port, NULL, why, sizeof(why)),
		     CRUN_EPROTO);
	cr_assert_eq(rdzv_parse_end(S("F 1 3 node-b"), &kind, text,
				    sizeof(text), why, sizeof(why)),
		     0);
	cr_assert_eq(kind, 'F');
	cr_assert_str_eq(text, "1 3 node-b");
	cr_assert_eq(rdzv_parse_end(S("S"), &kind, text, sizeof(text), why,
				    sizeof(why)),
		     0);
	cr_assert_eq(rdzv_parse_end(S("H stall: nothing for 5 s"),
				    &kind, text, sizeof(text), why,
				    sizeof(why)),
		     0);
	cr_assert_eq(kind, 'H');
	cr_assert_str_eq(text, "stall: nothing for 5 s");
	cr_assert_eq(rdzv_parse_end(S("Q what"), &kind, text, sizeof(text),
				    why, sizeof(why)),
		     CRUN_EPROTO);
	cr_assert_eq(rdzv_parse_end(S("Fx"), &kind, text, sizeof(text), why,
				    sizeof(why)),
		     CRUN_EPROTO);
	cr_assert_eq(rdzv_parse_end("", 0, &kind, text, sizeof(text), why,
				    sizeof(why)),
		     CRUN_EPROTO);
	/* A long reason is cut to the buffer, control bytes replaced. */
	cr_assert_eq(rdzv_parse_end(S("X \033[2J and a very long reason text"),
				    &kind, text, sizeof(text), why,
				    sizeof(why)),
		     0);
	cr_assert_eq(strlen(text), sizeof(text) - 1);
	cr_assert_eq(text[0], '?');
}

Test(rdzv_records, status_records, .timeout = 10)
{
	char why[200];
	struct rdzv_config cf;
	struct rdzv_params pa;
	struct rdzv_failure f;
	int64_t v;

	/* Counters: the crun store's "N", etcd's "N token". */
	cr_assert_eq(rdzv_parse_counter(S("42"), &v, why, sizeof(why)), 0);
	cr_assert_eq(v, 42);
	cr_assert_eq(rdzv_parse_counter(S("7 6f2a:3"), &v, why, sizeof(why)), 0);
	cr_assert_eq(v, 7);
	cr_assert_eq(rdzv_parse_counter(S("-1"), &v, why, sizeof(why)), CRUN_EPROTO);
	cr_assert_eq(rdzv_parse_counter(S("7 a b"), &v, why, sizeof(why)), CRUN_EPROTO);
	cr_assert_eq(rdzv_parse_counter(S("99999999999999999999"), &v, why, sizeof(why)),
		     CRUN_EPROTO);
	/* The job's config. */
	cr_assert_eq(rdzv_parse_config(S("nnodes=1:4 backend=c10d"), 64, &cf, why, sizeof(why)),
		     0);
	cr_assert_eq(cf.min_nodes, 1);
	cr_assert_eq(cf.max_nodes, 4);
	cr_assert_str_eq(cf.backend, "c10d");
	cr_assert_eq(cf.exclude_after, 0);
	cr_assert_eq(rdzv_parse_config(S("nnodes=3:2 backend=c10d"), 64, &cf, why, sizeof(why)),
		     CRUN_EPROTO);
	cr_assert_eq(rdzv_parse_config(S("nnodes=1:65 backend=c10d"), 64, &cf, why, sizeof(why)),
		     CRUN_EPROTO);
	cr_assert_eq(rdzv_parse_config(S("nnodes=1:2"), 64, &cf, why, sizeof(why)),
		     CRUN_EPROTO);
	/* The agents' params. */
	cr_assert_eq(rdzv_parse_params(S("max_restarts=3 keep_alive_ms=500"), &pa, why,
				       sizeof(why)),
		     0);
	cr_assert_eq(pa.max_restarts, 3);
	cr_assert_eq(pa.keep_alive_ms, 500);
	cr_assert_eq(rdzv_parse_params(S("max_restarts=3 keep_alive_ms=0"), &pa, why,
				       sizeof(why)),
		     CRUN_EPROTO);
	cr_assert(strstr(why, "keep_alive_ms"), "%s", why);
	cr_assert_eq(rdzv_parse_params(S("keep_alive_ms=5 max_restarts=3"), &pa, why,
				       sizeof(why)),
		     CRUN_EPROTO);
	/* The last failure: what rdzv_end_round writes from the agent's why. */
	cr_assert_eq(rdzv_parse_failure(S("2 1764570000123 137 rank 5 (local rank 1) on "
					  "node7 exited with 137"),
					&f, why, sizeof(why)),
		     0, "%s", why);
	cr_assert_eq(f.round, 2);
	cr_assert_eq(f.unix_ms, 1764570000123LL);
	cr_assert_eq(f.exit_code, 137);
	cr_assert_eq(f.rank, 5);
	cr_assert_eq(f.local_rank, 1);
	cr_assert_str_eq(f.host, "node7");
	cr_assert_eq(rdzv_parse_failure(S("2 1764570000123 1 3 n2"), &f, why, sizeof(why)),
		     CRUN_EPROTO);
	cr_assert_eq(rdzv_parse_failure(S("2 -5 1 rank 5 (local rank 1) on h exited with 1"),
					&f, why, sizeof(why)),
		     CRUN_EPROTO);
	cr_assert_eq(rdzv_parse_failure(S("2 5 1 rank 5 (local rank 1 on h exited with 1"),
					&f, why, sizeof(why)),
		     CRUN_EPROTO);
	cr_assert_eq(rdzv_parse_failure(S("2 5 1 rank 5 (local rank 1) on h exited with 1 x"),
					&f, why, sizeof(why)),
		     CRUN_EPROTO);
}

/* exclude_after's "exclude=K:S" after the backend, then "proto=P". */
Test(rdzv_records, config_exclude_field)
{
	const char *good[] = {"nnodes=2:3 backend=c10d exclude=2:300",
			      "nnodes=1:1 backend=etcd exclude=32:0.5",
			      "nnodes=2:3 backend=c10d exclude=2:300 proto=2",
			      "nnodes=1:4 backend=c10d proto=999"};
	const char *bad[] = {"nnodes=2:3 backend=c10d exclude=0:300",
			     "nnodes=2:3 backend=c10d proto=0",
			     "nnodes=2:3 backend=c10d proto=x",
			     "nnodes=2:3 backend=c10d proto=2 exclude=2:300",
			     "nnodes=2:3 backend=c10d proto=2 proto=2",
			     "nnodes=2:3 backend=c10d exclude=2:",
			     "nnodes=2:3 backend=c10d exclude=2:abc",
			     "nnodes=2:3 backend=c10d exclude=2:1-2",
			     "nnodes=2:3 backend=c10d exclude=2:-1",
			     "nnodes=2:3 backend=c10d exclude=2:1e999",
			     "nnodes=2:3 backend=c10d exclude=2",
			     "nnodes=2:3 backend=c10d other=1",
			     "nnodes=2:3 backend=c10d exclude=2:1 x"};
	struct rdzv_config cf;
	char why[200];

	for (size_t i = 0; i < sizeof(good) / sizeof(*good); i++)
		cr_assert_eq(rdzv_parse_config(good[i], strlen(good[i]), 100,
					       &cf, why,
					       sizeof(why)),
			     0, "%s: %s", good[i], why);
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
		cr_assert_neq(rdzv_parse_config(bad[i], strlen(bad[i]), 100,
						&cf, why,
						sizeof(why)),
			      0, "%s accepted", bad[i]);
}

/* "assigned": "ok N", a plain "ok" (older closers), "abort ...". */
Test(rdzv_records, assigned)
{
	char why[200];
	int closed;

	cr_assert_eq(rdzv_parse_assigned(S("ok 3"), 4, &closed, why, sizeof(why)), 0);
	cr_assert_eq(closed, 3);
	cr_assert_eq(rdzv_parse_assigned(S("ok"), 4, &closed, why, sizeof(why)), 0);
	cr_assert_eq(closed, 0);
	cr_assert_eq(rdzv_parse_assigned(S("abort D gone"), 4, &closed, why, sizeof(why)), 0);
	cr_assert_eq(closed, -1);
	cr_assert_eq(rdzv_parse_assigned(S("ok 5"), 4, &closed, why, sizeof(why)), CRUN_EPROTO);
	cr_assert_eq(rdzv_parse_assigned(S("ok 0"), 4, &closed, why, sizeof(why)), CRUN_EPROTO);
	cr_assert_eq(rdzv_parse_assigned(S("ok x"), 4, &closed, why, sizeof(why)), CRUN_EPROTO);
	cr_assert_eq(rdzv_parse_assigned(S("maybe"), 4, &closed, why, sizeof(why)), CRUN_EPROTO);
	cr_assert(strstr(why, "neither"), "%s", why);
}

/*
 * The writers: each record as the nodes have always written it (the bytes
 * are the protocol), and read back by its parser.
 */
Test(rdzv_records, writers_round_trip, .timeout = 10)
{
	struct rdzv_descr_in in = {1, 0, 4, 123, "node-a", "10.0.0.1",
				   "trainer", "10.0.0.1,fd00::1", ""};
	struct crun_ranks k = {1, 2, 4, 8, 4, 8, 4}, k2;
	struct rdzv_fail f[2] = {{3, "h1", "10.0.0.1", "ab12"},
				 {4, "h2", "10.0.0.2", ""}},
			 f2[2];
	struct rdzv_exclusion x[1] = {{"h3", "10.0.0.3", "cd", 1900000000, 5,
				       2}},
			      x2[1];
	struct rdzv_descr d;
	struct rdzv_params pa;
	char buf[RDZV_MAX_RECORD + 1], why[200], text[64];
	struct rdzv_config cf;
	int n, kind;

	n = (int)rdzv_format_descr(buf, sizeof(buf), &in);
	cr_assert_str_eq(buf, "1 0 4 123 node-a 10.0.0.1 trainer "
			      "ip=10.0.0.1,fd00::1");
	cr_assert_eq(n, (int)strlen(buf));
	cr_assert_eq(rdzv_parse_descr(buf, strlen(buf), 8, &d, why,
				      sizeof(why)),
		     0, "%s", why);
	cr_assert_str_eq(d.ips, "10.0.0.1,fd00::1");
	rdzv_format_assign(buf, sizeof(buf), &k);
	cr_assert_str_eq(buf, "1 2 4 8 4 8 4");
	cr_assert_eq(rdzv_parse_assign(buf, strlen(buf), 2, 4, &k2, why,
				       sizeof(why)),
		     0, "%s", why);
	cr_assert_eq(memcmp(&k, &k2, sizeof(k)), 0);
	rdzv_format_assigned(buf, sizeof(buf), 3);
	cr_assert_str_eq(buf, "ok 3");
	rdzv_format_abort(buf, sizeof(buf), 'D', "n2 (group rank 1) gone");
	cr_assert_str_eq(buf, "abort D n2 (group rank 1) gone");
	cr_assert_eq(rdzv_parse_assigned(buf, strlen(buf), 4, &n, why,
					 sizeof(why)),
		     0);
	cr_assert_eq(n, -1);
	rdzv_format_master(buf, sizeof(buf), "10.0.0.1", 29500, 0);
	cr_assert_str_eq(buf, "10.0.0.1 29500");
	rdzv_format_end(buf, sizeof(buf), 'F', "rank 3 exited with 1");
	cr_assert_eq(rdzv_parse_end(buf, strlen(buf), &kind, text, sizeof(text),
				    why, sizeof(why)),
		     0);
	cr_assert_eq(kind, 'F');
	cr_assert_str_eq(text, "rank 3 exited with 1");
	rdzv_format_config(buf, sizeof(buf), 1, 4, "c10d", 0, 0);
	cr_assert_str_eq(buf, "nnodes=1:4 backend=c10d proto=3");
	rdzv_format_config(buf, sizeof(buf), 2, 3, "static", 2, 0.5);
	cr_assert_str_eq(buf, "nnodes=2:3 backend=static exclude=2:0.5 proto=3");
	cr_assert_eq(rdzv_parse_config(buf, strlen(buf), 8, &cf, why, sizeof(why)),
		     0, "%s", why);
	cr_assert_eq(cf.min_nodes + cf.max_nodes, 5);
	cr_assert_eq(cf.exclude_after, 2);
	cr_assert_float_eq(cf.exclude_for, 0.5, 1e-9);
	rdzv_format_params(buf, sizeof(buf), 3, 500);
	cr_assert_eq(rdzv_parse_params(buf, strlen(buf), &pa, why, sizeof(why)),
		     0, "%s", why);
	cr_assert_eq(pa.max_restarts + pa.keep_alive_ms, 503);
	rdzv_format_failure(buf, sizeof(buf), 2, 1764570000123LL,
			    "137 rank 5 (local rank 1) on node7 exited with "
			    "137");
	cr_assert_str_eq(buf, "2 1764570000123 137 rank 5 (local rank 1) on "
			      "node7 exited with 137");
	rdzv_format_fails(buf, sizeof(buf), f, 2);
	cr_assert_str_eq(buf, "2 3 h1 10.0.0.1#ab12 4 h2 10.0.0.2");
	cr_assert_eq(rdzv_parse_fails(buf, strlen(buf), f2, 2, &n, why,
				      sizeof(why)),
		     0, "%s", why);
	cr_assert_eq(n, 2);
	cr_assert_str_eq(f2[0].id, "ab12");
	cr_assert_str_eq(f2[1].addr, "10.0.0.2");
	rdzv_format_excluded(buf, sizeof(buf), x, 1);
	cr_assert_str_eq(buf, "1 h3 10.0.0.3#cd 1900000000 5 2");
	cr_assert_eq(rdzv_parse_excluded(buf, strlen(buf), x2, 1, &n, why,
					 sizeof(why)),
		     0, "%s", why);
	cr_assert_eq(x2[0].until, 1900000000);
	cr_assert_eq(x2[0].fails, 2);
}

/* A descriptor keeps to RDZV_MAX_RECORD: the ip= list loses whole entries. */
Test(rdzv_records, writer_descriptor_cut, .timeout = 10)
{
	char ips[4000], buf[2 * RDZV_MAX_RECORD], small[8];
	struct rdzv_descr_in in = {0, 0, 1, 1, "h", "10.0.0.1", "r", ips,
				   "fp"};
	size_t o = 0, n;

	for (int i = 0; i < 250; i++)
		o += (size_t)snprintf(ips + o, sizeof(ips) - o, "%s10.1.%d.%d",
				      i ? "," : "", i / 200, i % 200);
	n = rdzv_format_descr(buf, sizeof(buf), &in);
	cr_assert_leq(n, RDZV_MAX_RECORD);
	cr_assert_eq(n, strlen(buf));
	cr_assert(strstr(buf, " env=fp") != NULL, "%s", buf);
	cr_assert(strstr(buf, ", env=") == NULL, "%s", buf);
	cr_assert(n > RDZV_MAX_RECORD - 16, "%zu: whole entries only", n);
	/* Cut like snprintf, the length written returned. */
	cr_assert_eq(rdzv_format_end(small, sizeof(small), 'F', "long reason"),
		     sizeof(small) - 1);
	cr_assert_str_eq(small, "F long ");
}

/* A node's stall record (agent/hang.c): written, read back. */
Test(rdzv_records, stall_roundtrip, .timeout = 10)
{
	struct rdzv_stall_rank in[2] = {{2, "all_reduce (train.py:41)"},
					{3, "wait (train.py:37)"}};
	struct rdzv_stall_rank out[4];
	char buf[512], host[64], why[200];
	size_t len;
	int n = -1;

	len = rdzv_format_stall(buf, sizeof(buf), "n2", in, 2);
	cr_assert_str_eq(buf, "n2 2\n2 all_reduce (train.py:41)\n3 wait "
			      "(train.py:37)");
	cr_assert_eq(rdzv_parse_stall(buf, len, host, sizeof(host), out, 4,
				      &n, why, sizeof(why)),
		     0, "%s", why);
	cr_assert_eq(n, 2);
	cr_assert_str_eq(host, "n2");
	cr_assert_eq(out[1].rank, 3);
	cr_assert_str_eq(out[0].where, "all_reduce (train.py:41)");
	cr_assert_str_eq(out[1].where, "wait (train.py:37)");
	len = rdzv_format_stall(buf, sizeof(buf), "n1", in, 0);
	cr_assert_eq(rdzv_parse_stall(buf, len, host, sizeof(host), out, 4,
				      &n, why, sizeof(why)),
		     0);
	cr_assert_eq(n, 0);
}

Test(rdzv_records, stall_hostile, .timeout = 10)
{
	struct rdzv_stall_rank out[2];
	char host[64], why[200], big[RDZV_MAX_LIST_RECORD + 8];
	int n = 7;

	cr_assert_eq(rdzv_parse_stall(S("n1 3\n0 a\n1 b\n2 c"), host,
				      sizeof(host), out, 2, &n, why,
				      sizeof(why)),
		     CRUN_EPROTO, "more ranks than room");
	cr_assert_eq(n, 0);
	cr_assert_eq(rdzv_parse_stall(S("n1 2\n0 a"), host, sizeof(host), out,
				      2, &n, why, sizeof(why)),
		     CRUN_EPROTO, "fewer lines than said");
	cr_assert_eq(rdzv_parse_stall(S("n1 1\n0 a\n1 b"), host,
				      sizeof(host), out, 2, &n, why,
				      sizeof(why)),
		     CRUN_EPROTO, "trailing lines");
	cr_assert_eq(rdzv_parse_stall(S("n1 1\n-1 a"), host, sizeof(host),
				      out, 2, &n, why, sizeof(why)),
		     CRUN_EPROTO, "a negative rank");
	cr_assert_eq(rdzv_parse_stall(S("n1 1\n0 \033[2J"), host,
				      sizeof(host), out, 2, &n, why,
				      sizeof(why)),
		     CRUN_EPROTO, "a control byte");
	cr_assert(strstr(why, "control") != NULL, "%s", why);
	cr_assert_eq(rdzv_parse_stall(S("n1 1\n0 "), host, sizeof(host), out,
				      2, &n, why, sizeof(why)),
		     CRUN_EPROTO, "an empty place");
	memset(big, 'x', sizeof(big));
	memcpy(big, "n1 1\n0 ", 7);
	cr_assert_eq(rdzv_parse_stall(big, 7 + RDZV_MAX_STALL_WHERE + 1, host,
				      sizeof(host), out, 2, &n, why,
				      sizeof(why)),
		     CRUN_EPROTO, "a place too long");
	cr_assert_eq(rdzv_parse_stall(big, sizeof(big), host, sizeof(host),
				      out, 2, &n, why, sizeof(why)),
		     CRUN_EPROTO, "a record too long");
	cr_assert_eq(rdzv_parse_stall("", 0, host, sizeof(host), out, 2, &n,
				      why, sizeof(why)),
		     CRUN_EPROTO);
}

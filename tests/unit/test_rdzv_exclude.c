/*
 * Leaving out a failing node (rdzv.c, exclude_after / exclude_for) without
 * sockets: the in-memory store and simulated nodes of rdzv_fake.h (shared
 * with test_rdzv.c), each test driving one rdzv per node
 * through failure-ended rounds and checking who sits out, the records in
 * the store, the callbacks, and how a node left out ends or comes back.
 *
 * Every test has the same .timeout (see test_rdzv.c).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uv.h>

#include "crun/rdzv_records.h"
#include "crun/err.h"
#include "crun/rdzv.h"

#include "rdzv_fake.h"

/* ---- the exclusion tests -------------------------------------------------- */

static void on_exclusion(void *data, const struct rdzv_exclusion *x, int readmitted, int self,
			 const char *why)
{
	struct node *n = data;

	(void)x;
	if (readmitted) {
		n->nreadmit++;
		n->self_readmit += self;
	} else {
		n->nexcl++;
		n->self_excl += self;
	}
	snprintf(n->excl_why, sizeof(n->excl_why), "%s", why);
}

/* Nodes 1..nodes (node 1 hosts the store), leaving out after k failures. */
static void excl_world(int nodes, int min, int max, int k, double cooldown, int restarts)
{
	world_init();
	for (int i = 0; i < nodes; i++) {
		struct node *n = node_add(i + 1, 1, i == 0, min, max);

		n->o.exclude_after = k;
		n->o.exclude_for = cooldown;
		n->o.max_restarts = restarts;
		n->o.on_exclusion = on_exclusion;
	}
}

/* Node `who` (0-based) fails: the round ends, everyone asks to restart. */
static void fail_round(int who, int want_ok)
{
	char why[64];

	clear_ends();
	snprintf(why, sizeof(why), "3 rank %d on %s", who, W.n[who].host);
	cr_assert_eq(rdzv_end_round(W.n[who].r, RDZV_END_FAILURE, why), 0);
	cr_assert(run_until(all_ends, 2000), "not every node saw the end");
	may_all(RDZV_END_FAILURE);
	for (int i = 0; i < W.nn; i++)
		if (W.n[i].alive && W.n[i].nend)
			cr_assert_eq(W.n[i].may_ok, want_ok, "%s: may_restart %d", W.n[i].host,
				     W.n[i].may_ok);
}

static void next_all(void)
{
	for (int i = 0; i < W.nn; i++)
		if (W.n[i].alive)
			node_next(&W.n[i]);
}

static int first_two_rounds(void)
{
	return W.n[0].nround && W.n[1].nround;
}

/* Start the world; n3 fails rounds 0 and 1 and n1, n2 form round 2 without it. */
static void leave_out_n3(void)
{
	start_all();
	cr_assert(run_until(all_rounds, 2000));
	for (int i = 0; i < 2; i++) {
		fail_round(2, 1);
		next_all();
		if (i == 0)
			cr_assert(run_until(all_rounds, 2000));
	}
	cr_assert(run_until(first_two_rounds, 2000));
}

static const char *kv(const char *k)
{
	const char *v = fkv_get(&W.kv, k);

	return v ? v : "(none)";
}

Test(rdzv_exclude, left_out_after_k_failures, .timeout = 10)
{
	struct node *bad;
	struct rdzv_exclusion x[4];
	int64_t t0 = (int64_t)time(NULL);

	excl_world(3, 2, 3, 2, 60, 3);
	/* A long last call: a round of 2 that waited for it would show. */
	for (int i = 0; i < 3; i++)
		W.n[i].o.last_call_timeout = 1.5;
	bad = &W.n[2];
	start_all();
	cr_assert(run_until(all_rounds, 2000));
	fail_round(2, 1);
	cr_assert_str_eq(kv("crun/job1/r0/failed"), "2 n3 10.0.0.3#3");
	cr_assert_str_eq(kv("crun/job1/fails"), "1 0 n3 10.0.0.3#3");
	cr_assert_null(fkv_get(&W.kv, "crun/job1/excluded"), "left out after one failure");
	next_all();
	cr_assert(run_until(all_rounds, 2000));
	assert_formed(bad, 1, 2, 3, 2, 3);
	fail_round(2, 1);
	/* The second failure in a row on n3: it is left out, the history restarts. */
	cr_assert_str_eq(kv("crun/job1/r1/failed"), "2 n3 10.0.0.3#3");
	cr_assert_str_eq(kv("crun/job1/fails"), "0");
	cr_assert_str_eq(kv("crun/job1/r2/expect"), "2");
	{
		const char *e = kv("crun/job1/excluded");
		long long until;
		int round, k;
		char host[16], addr[32];

		cr_assert_eq(sscanf(e, "1 %15s %31s %lld %d %d", host, addr, &until, &round, &k), 5,
			     "excluded: %s", e);
		cr_assert_str_eq(host, "n3");
		cr_assert_str_eq(addr, "10.0.0.3#3");
		cr_assert(until >= t0 + 60 && until <= t0 + 62, "until %lld, now %lld", until,
			  (long long)t0);
		cr_assert_eq(round, 1);
		cr_assert_eq(k, 2);
	}
	next_all();
	cr_assert(run_until(first_two_rounds, 3000), "n1 and n2 did not form round 2");
	assert_formed(&W.n[0], 2, 0, 2, 0, 2);
	assert_formed(&W.n[1], 2, 1, 2, 1, 2);
	/* The round expected two nodes: it closed at once, not after last call. */
	cr_assert_lt(W.n[1].round_at - W.n[1].end_at, 1000, "formed %llu ms after the end",
		     (unsigned long long)(W.n[1].round_at - W.n[1].end_at));
	run_for(300);
	cr_assert_eq(bad->nround, 0, "n3 got a round: %s", bad->errmsg);
	cr_assert_eq(bad->self_excl, 1, "n3 told %d times", bad->self_excl);
	cr_assert(strstr(bad->excl_why, "n3 is left out until") &&
		      strstr(bad->excl_why, "the last 2 failure-ended rounds (to round 1)") &&
		      strstr(bad->excl_why, "waits as a spare"),
		  "%s", bad->excl_why);
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(W.n[i].nexcl, 1, "%s: %d exclusions told", W.n[i].host, W.n[i].nexcl);
		cr_assert_eq(W.n[i].self_excl, 0);
		cr_assert_eq(rdzv_excluded(W.n[i].r, x, 4), 1);
		cr_assert_str_eq(x[0].host, "n3");
		cr_assert_eq(x[0].fails, 2);
	}
	cr_assert_eq(rdzv_restarts(W.n[0].r), 2);
	world_close();
}

static int first_two_ended(void)
{
	return W.n[0].nend && W.n[1].nend;
}

static int second_done(void)
{
	return W.n[1].nround > 0;
}

static int bad_round(void)
{
	return W.n[2].nround > 0;
}

/* The others finish: the node left out hears it and ends, "left out". */
Test(rdzv_exclude, left_out_node_ends_with_the_job, .timeout = 10)
{
	struct node *bad;

	excl_world(3, 2, 3, 2, 60, 3);
	bad = &W.n[2];
	leave_out_n3();
	cr_assert_eq(bad->nround, 0);
	for (int i = 0; i < 2; i++)
		cr_assert_eq(rdzv_finish(W.n[i].r, on_finish, &W.n[i]), 0);
	cr_assert(run_until(bad_round, 2000), "n3 never heard the job ended");
	cr_assert_eq(bad->status, CRUN_ERDZV_LEFT_OUT, "status %s: %s", crun_err_name(bad->status),
		     bad->errmsg);
	cr_assert(strstr(bad->errmsg, "the job finished without n3") &&
		      strstr(bad->errmsg, "all nodes finished"),
		  "%s", bad->errmsg);
	cr_assert_str_eq(kv("crun/job1/over"), "S all nodes finished");
	cr_assert_str_eq(kv("crun/job1/over/n3/10.0.0.3#3/1"), "S all nodes finished");
	cr_assert_str_eq(kv("crun/job1/over_seen/n3/10.0.0.3#3/1"), "1");
	world_close();
}

/*
 * Several agents on one machine: n2 and n3 announce the same host name and
 * address, told apart only by their ids. n3 fails twice: it alone sits out.
 */
Test(rdzv_exclude, same_host_and_address, .timeout = 10)
{
	struct node *bad;

	excl_world(3, 2, 3, 2, 60, 3);
	for (int i = 1; i < 3; i++) {
		snprintf(W.n[i].host, sizeof(W.n[i].host), "vm");
		snprintf(W.n[i].addr, sizeof(W.n[i].addr), "vm");
	}
	bad = &W.n[2];
	leave_out_n3();
	cr_assert_eq(bad->nround, 0);
	cr_assert_eq(bad->self_excl, 1);
	cr_assert_eq(W.n[1].self_excl, 0, "n2 took n3's exclusion for its own");
	assert_formed(&W.n[1], 2, 1, 2, 1, 2);
	cr_assert(strncmp(kv("crun/job1/excluded"), "1 vm vm#3 ", 10) == 0, "%s",
		  kv("crun/job1/excluded"));
	world_close();
}

/*
 * Records that leave too few nodes (forged, or from a crun that told
 * agents on one machine apart by host and address only): a node that
 * finds itself left out with the others below MIN ends, saying why.
 */
Test(rdzv_exclude, too_many_left_out_ends, .timeout = 10)
{
	char ex[200];
	long long until = (long long)time(NULL) + 60;

	excl_world(2, 2, 3, 2, 60, 3);
	snprintf(ex, sizeof(ex), "2 n1 10.0.0.1#1 %lld 1 2 n2 10.0.0.2#2 %lld 1 2", until,
		 until);
	fkv_put(&W.kv, "crun/job1/excluded", ex, strlen(ex));
	start_all();
	cr_assert(run_until(all_rounds, 2000), "nodes left out below MIN waited");
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(W.n[i].status, CRUN_ERDZV_CLOSED, "%s: %s", W.n[i].host,
			     crun_err_name(W.n[i].status));
		cr_assert(strstr(W.n[i].errmsg, "2 of at most 3 nodes are left out") &&
			      strstr(W.n[i].errmsg, "minimum of 2"),
			  "%s", W.n[i].errmsg);
	}
	world_close();
}

/* The job fails for good while a node sits out: it ends too, not "left out". */
Test(rdzv_exclude, left_out_node_ends_when_the_job_fails, .timeout = 10)
{
	struct node *bad;

	excl_world(3, 2, 3, 2, 60, 2);
	bad = &W.n[2];
	leave_out_n3();
	/* n1 fails now: the third restart is one too many. */
	clear_ends();
	cr_assert_eq(rdzv_end_round(W.n[0].r, RDZV_END_FAILURE, "3 rank 0 on n1"), 0);
	cr_assert(run_until(first_two_ended, 2000));
	for (int i = 0; i < 2; i++) {
		W.n[i].nmay = 0;
		cr_assert_eq(rdzv_may_restart(W.n[i].r, RDZV_END_FAILURE, on_may, &W.n[i]), 0);
	}
	cr_assert(run_until(bad_round, 2000), "n3 never heard the job ended");
	cr_assert_eq(W.n[0].may_ok, 0);
	cr_assert_eq(bad->status, CRUN_ERDZV_CLOSED, "status %s: %s", crun_err_name(bad->status),
		     bad->errmsg);
	cr_assert(strstr(bad->errmsg, "the job stopped while n3 was left out") &&
		      strstr(bad->errmsg, "rank 0 on n1"),
		  "%s", bad->errmsg);
	world_close();
}


/* After the cooldown the node comes back: the round of 2 re-forms with 3. */
Test(rdzv_exclude, readmitted_after_the_cooldown, .timeout = 10)
{
	struct node *bad;
	struct rdzv_exclusion x[4];
	uint64_t t0;

	excl_world(3, 2, 3, 2, 1, 3);
	bad = &W.n[2];
	leave_out_n3();
	t0 = uv_now(&W.loop);
	clear_ends();
	if (!run_until(first_two_ended, 4000)) {
		for (struct fentry *e = W.kv.map; e; e = e->next)
			fprintf(stderr, "%s = %s\n", e->key, e->val);
		cr_assert(0, "n3 never came back: n1 %d/%d n2 %d/%d", W.n[0].nend, W.n[0].nround, W.n[1].nend, W.n[1].nround);
	}
	cr_assert_leq(uv_now(&W.loop) - t0, 3500, "back after %llu ms",
		      (unsigned long long)(uv_now(&W.loop) - t0));
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(W.n[i].end_kind, 'J', "%s: end %c %s", W.n[i].host, W.n[i].end_kind,
			     W.n[i].end_why);
		cr_assert_str_eq(W.n[i].end_why, "n3");
	}
	cr_assert_eq(bad->self_readmit, 1);
	cr_assert(strstr(bad->excl_why, "its cooldown ended"), "%s", bad->excl_why);
	cr_assert_str_eq(kv("crun/job1/excluded"), "0");
	may_all(RDZV_END_JOIN);
	/* n3 is joining already: it asked to join round 3 (the next one). */
	node_next(&W.n[0]);
	node_next(&W.n[1]);
	cr_assert(run_until(all_rounds, 2000));
	for (int i = 0; i < 3; i++)
		assert_formed(&W.n[i], 3, i, 3, i, 3);
	cr_assert_eq(rdzv_restarts(W.n[0].r), 2, "a readmission must not cost a restart");
	/* The others learnt it when they joined round 3. */
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(W.n[i].nreadmit, 1, "%s: %d readmissions told", W.n[i].host,
			     W.n[i].nreadmit);
		cr_assert_eq(rdzv_excluded(W.n[i].r, x, 4), 0);
	}
	world_close();
}

/* Failures on different nodes: no run of K, nobody is left out. */
Test(rdzv_exclude, another_node_breaks_the_run, .timeout = 10)
{
	excl_world(3, 2, 3, 2, 60, 5);
	start_all();
	cr_assert(run_until(all_rounds, 2000));
	fail_round(2, 1);
	next_all();
	cr_assert(run_until(all_rounds, 2000));
	fail_round(1, 1);
	cr_assert_str_eq(kv("crun/job1/fails"), "2 0 n3 10.0.0.3#3 1 n2 10.0.0.2#2");
	next_all();
	cr_assert(run_until(all_rounds, 2000));
	fail_round(2, 1);
	cr_assert_str_eq(kv("crun/job1/fails"), "2 1 n2 10.0.0.2#2 2 n3 10.0.0.3#3");
	cr_assert_null(fkv_get(&W.kv, "crun/job1/excluded"));
	next_all();
	cr_assert(run_until(all_rounds, 2000));
	for (int i = 0; i < 3; i++) {
		assert_formed(&W.n[i], 3, i, 3, i, 3);
		cr_assert_eq(W.n[i].nexcl, 0);
	}
	world_close();
}

/* Leaving the node out would break MIN: it stays, the history goes on. */
Test(rdzv_exclude, not_below_min, .timeout = 10)
{
	excl_world(3, 3, 3, 2, 60, 5);
	start_all();
	cr_assert(run_until(all_rounds, 2000));
	for (int i = 0; i < 2; i++) {
		fail_round(2, 1);
		next_all();
		cr_assert(run_until(all_rounds, 2000), "round %d did not form with n3", i + 1);
	}
	for (int i = 0; i < 3; i++)
		assert_formed(&W.n[i], 2, i, 3, i, 3);
	cr_assert_null(fkv_get(&W.kv, "crun/job1/excluded"));
	cr_assert_str_eq(kv("crun/job1/fails"), "2 0 n3 10.0.0.3#3 1 n3 10.0.0.3#3");
	world_close();
}

static int r0_spare(void)
{
	return fkv_get(&W.kv, "crun/job1/r0/node/3") != NULL;
}

static int n1_n3_rounds(void)
{
	return W.n[0].nround && W.n[2].nround;
}

/* n2 (of n1, n2 and the spare n3) fails round `round`; n1 and n2 go on. */
static void n2_fails(int round, int want_ok)
{
	char why[64];

	clear_ends();
	snprintf(why, sizeof(why), "3 rank 1 on n2");
	cr_assert_eq(rdzv_end_round(W.n[1].r, RDZV_END_FAILURE, why), 0);
	cr_assert(run_until(first_two_ended, 2000), "round %d: the end went unseen", round);
	may_all(RDZV_END_FAILURE);
	cr_assert_eq(W.n[0].may_ok, want_ok);
	node_next(&W.n[0]);
	node_next(&W.n[1]);
}

/*
 * --nnodes=2 with a spare: the node whose failures keep ending rounds is
 * left out although one node alone would be below MIN, because the spare
 * makes it up; the spare takes its place and the node left out waits (it
 * does not end as "the others cannot reach the minimum").
 */
Test(rdzv_exclude, left_out_with_a_spare_in_its_place, .timeout = 10)
{
	excl_world(3, 2, 2, 2, 60, 5);
	node_start(&W.n[0]);
	node_start(&W.n[1]);
	cr_assert(run_until(first_two_rounds, 2000));
	node_start(&W.n[2]);
	cr_assert(run_until(r0_spare, 1000));
	n2_fails(0, 1);
	cr_assert(run_until(first_two_rounds, 2000), "round 1 did not form");
	cr_assert_null(fkv_get(&W.kv, "crun/job1/excluded"), "left out after one failure");
	n2_fails(1, 1);
	cr_assert(strncmp(kv("crun/job1/excluded"), "1 n2 ", 5) == 0, "%s",
		  kv("crun/job1/excluded"));
	cr_assert(run_until(n1_n3_rounds, 3000), "n1 and the spare n3 did not form round 2");
	assert_formed(&W.n[0], 2, 0, 2, 0, 2);
	assert_formed(&W.n[2], 2, 1, 2, 1, 2);
	run_for(300);
	cr_assert_eq(W.n[1].nround, 0, "n2 ended: %s", W.n[1].errmsg);
	cr_assert_eq(W.n[1].self_excl, 1);
	world_close();
}

/* Off by default: no record beyond the base protocol's. */
Test(rdzv_exclude, off_writes_nothing, .timeout = 10)
{
	excl_world(3, 2, 3, 0, 60, 5);
	start_all();
	cr_assert(run_until(all_rounds, 2000));
	for (int i = 0; i < 2; i++) {
		fail_round(2, 1);
		next_all();
		cr_assert(run_until(all_rounds, 2000));
	}
	for (int i = 0; i < 3; i++)
		assert_formed(&W.n[i], 2, i, 3, i, 3);
	cr_assert_null(fkv_get(&W.kv, "crun/job1/fails"));
	cr_assert_null(fkv_get(&W.kv, "crun/job1/r0/failed"));
	cr_assert_str_eq(kv("crun/job1/config"), "nnodes=2:3 backend=c10d proto=3");
	world_close();
}

/* Every node must agree on the setting. */
Test(rdzv_exclude, setting_mismatch, .timeout = 10)
{
	struct node *b;

	excl_world(2, 2, 2, 2, 60, 1);
	b = &W.n[1];
	b->o.exclude_after = 3;
	node_start(&W.n[0]);
	run_for(50);
	node_start(b);
	cr_assert(run_until(second_done, 1000));
	cr_assert_eq(b->status, CRUN_ERDZV_MISMATCH, "status %s", crun_err_name(b->status));
	cr_assert(strstr(b->errmsg, "exclude=2:60") && strstr(b->errmsg, "exclude=3:60"), "%s",
		  b->errmsg);
	world_close();
}

/* Forged records: named, read as empty; nobody is kept out by garbage. */
Test(rdzv_exclude, forged_records_are_ignored, .timeout = 10)
{
	const char *ex = "1 n3 10.0.0.3 99999999999999999999 1 2", *fa = "5 junk";

	excl_world(3, 2, 3, 2, 60, 5);
	fkv_put(&W.kv, "crun/job1/excluded", ex, strlen(ex));
	fkv_put(&W.kv, "crun/job1/fails", fa, strlen(fa));
	start_all();
	cr_assert(run_until(all_rounds, 2000), "a forged record kept a node out");
	for (int i = 0; i < 3; i++)
		assert_formed(&W.n[i], 0, i, 3, i, 3);
	fail_round(2, 1);
	cr_assert_str_eq(kv("crun/job1/fails"), "1 0 n3 10.0.0.3#3");
	world_close();
}

/*
 * A well-formed entry whose until lies far beyond exclude_for (2^40 with
 * exclude_for=60): forged, read as no node left out, n3 joins round 0.
 */
Test(rdzv_exclude, until_beyond_exclude_for_is_ignored, .timeout = 10)
{
	const char *ex = "1 n3 10.0.0.3#3 1099511627776 1 2";

	excl_world(3, 2, 3, 2, 60, 5);
	fkv_put(&W.kv, "crun/job1/excluded", ex, strlen(ex));
	start_all();
	cr_assert(run_until(all_rounds, 2000), "a far until kept n3 out");
	for (int i = 0; i < 3; i++)
		assert_formed(&W.n[i], 0, i, 3, i, 3);
	cr_assert_eq(W.n[2].self_excl, 0);
	world_close();
}

/* ---- the parsers ----------------------------------------------------------- */

#define S2(s) s, strlen(s)

Test(rdzv_exclude_records, fails)
{
	struct rdzv_fail f[RDZV_MAX_FAILS];
	char why[200];
	int n;
	const char *ok = "2 4 h1 10.0.0.1 7 h2 10.0.0.2";

	cr_assert_eq(rdzv_parse_fails(ok, strlen(ok), f, RDZV_MAX_FAILS, &n, why, sizeof(why)), 0,
		     "%s", why);
	cr_assert_eq(n, 2);
	cr_assert_eq(f[1].round, 7);
	cr_assert_str_eq(f[1].host, "h2");
	cr_assert_eq(rdzv_parse_fails("0", 1, f, 4, &n, why, sizeof(why)), 0);
	cr_assert_eq(n, 0);
	static const struct {
		const char *rec, *why;
	} bad[] = {
	    {"", "empty record"},
	    {"3 1 h a", "round missing"},
	    {"1 1 h a extra", "more than 1 entries"},
	    {"2 5 h a 4 h a", "not in order"},
	    {"33", "count '33' is not a number in 0..32"},
	    {"-1", "count"},
	    {"1 x h a", "round 'x'"},
	    {"1 1 h", "address missing"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_assert_eq(rdzv_parse_fails(bad[i].rec, strlen(bad[i].rec), f, RDZV_MAX_FAILS,
					      &n, why, sizeof(why)),
			     CRUN_EPROTO, "'%s' accepted", bad[i].rec);
		cr_assert(strstr(why, bad[i].why), "'%s': %s", bad[i].rec, why);
		cr_assert_eq(n, 0);
	}
}

Test(rdzv_exclude_records, excluded)
{
	struct rdzv_exclusion x[RDZV_MAX_EXCLUDED];
	char why[200], big[RDZV_MAX_LIST_RECORD + 2];
	int n;
	const char *ok = "2 h1 10.0.0.1 1800000000 3 2 h2 10.0.0.2 1800000001 4 32";

	cr_assert_eq(
	    rdzv_parse_excluded(ok, strlen(ok), x, RDZV_MAX_EXCLUDED, &n, why, sizeof(why)), 0,
	    "%s", why);
	cr_assert_eq(n, 2);
	cr_assert_eq(x[0].until, 1800000000);
	cr_assert_eq(x[1].fails, 32);
	/* Two agents on one machine: one host, one address, two ids. */
	cr_assert_eq(rdzv_parse_excluded(S2("2 vm vm#0a1 1 1 1 vm vm#0a2 1 1 1"), x,
					 RDZV_MAX_EXCLUDED, &n, why, sizeof(why)),
		     0, "%s", why);
	cr_assert_str_eq(x[1].addr, "vm");
	cr_assert_str_eq(x[1].id, "0a2");
	static const struct {
		const char *rec, *why;
	} bad[] = {
	    {"1 h a 1 1 0", "failures '0'"},
	    {"1 h a 1 1 33", "failures '33'"},
	    {"1 h a -1 1 1", "until '-1'"},
	    {"1 h a 99999999999999 1 1", "until"},
	    {"2 h a 1 1 1 h a 2 2 2", "listed twice"},
	    {"1 h a 1 -2 1", "round '-2'"},
	    {"1 h\001 a 1 1 1", "control character"},
	    {"1 h a#XY 1 1 1", "is not <address>#<id"},
	    {"1 h #ab 1 1 1", "is not <address>#<id"},
	    {"1 h a# 1 1 1", "is not <address>#<id"},
	    {"2 h a#1 1 1 1 h a#1 2 2 2", "listed twice"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_assert_eq(rdzv_parse_excluded(bad[i].rec, strlen(bad[i].rec), x,
						 RDZV_MAX_EXCLUDED, &n, why, sizeof(why)),
			     CRUN_EPROTO, "'%s' accepted", bad[i].rec);
		cr_assert(strstr(why, bad[i].why), "'%s': %s", bad[i].rec, why);
	}
	memset(big, ' ', sizeof(big));
	big[0] = '0';
	cr_assert_eq(rdzv_parse_excluded(big, sizeof(big), x, RDZV_MAX_EXCLUDED, &n, why,
					 sizeof(why)),
		     CRUN_EPROTO);
	cr_assert(strstr(why, "bytes (at most"), "%s", why);
}

/* ---- the options ----------------------------------------------------------- */

#include "crun/cfg.h"

Test(rdzv_exclude_cfg, rdzv_conf_keys)
{
	struct crun_rdzv_conf c;
	char err[400];

	memset(&c, 0, sizeof(c));
	cr_assert_eq(cfg_parse_rdzv_conf("exclude_after=3,exclude_for=2.5", &c, err, sizeof(err)),
		     0, "%s", err);
	cr_assert_eq(c.exclude_after, 3);
	cr_assert_float_eq(c.exclude_for, 2.5, 1e-9);
	cr_assert_eq(cfg_parse_rdzv_conf("exclude_after=0", &c, err, sizeof(err)), 0);
	cr_assert_eq(c.exclude_after, 0);
	cr_assert_neq(cfg_parse_rdzv_conf("exclude_after=33", &c, err, sizeof(err)), 0);
	cr_assert(strstr(err, "'33' for 'exclude_after' is not a count in 0..32"), "%s", err);
	cr_assert_neq(cfg_parse_rdzv_conf("exclude_after=two", &c, err, sizeof(err)), 0);
	cr_assert_neq(cfg_parse_rdzv_conf("exclude_for=0", &c, err, sizeof(err)), 0);
	cr_assert(strstr(err, "exclude_for"), "%s", err);
	cr_assert_neq(cfg_parse_rdzv_conf("exclude_for=400000000", &c, err, sizeof(err)), 0);
	cr_assert(strstr(err, "out of range"), "%s", err);
	cfg_rdzv_conf_release(&c);
}

/*
 * The stacks request and answer records (rdzv_stacks.h): round trips, cuts
 * that keep within the bounds, and hostile values refused with one line;
 * and the agents' side over the rendezvous fake (rdzv_fake.h): a request
 * for the running round reaches every node once per nonce, through the
 * heartbeat, and its answer lands under the node's group rank.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "crun/err.h"
#include "crun/rdzv.h"
#include "crun/rdzv_stacks.h"

#include "rdzv_fake.h"

Test(rdzv_stacks, request)
{
	char nonce[RDZV_STACKS_MAX_NONCE + 1];
	int round = -1;

	cr_assert_eq(rdzv_stacks_req_parse("0a1b 3", 6, nonce, sizeof(nonce),
					   &round),
		     0);
	cr_expect_str_eq(nonce, "0a1b");
	cr_expect_eq(round, 3);
	/* Garbage, upper case, a missing or huge round, a long nonce. */
	static const char *const bad[] = {
	    "",	    "x",       "0A1B 3", "0a1b",	   "0a1b ", "0a1b -1",
	    " 3",   "0a1b 3x", "0a1b 1234567890", "0a1b  3",
	    "0123456789abcdef0123456789abcdef0 1"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_expect_eq(rdzv_stacks_req_parse(bad[i], strlen(bad[i]),
						   nonce, sizeof(nonce),
						   &round),
			     -1, "'%s' parsed", bad[i]);
	/* No request yet: etcd reads a missing key as NULL, 0. */
	cr_expect_eq(rdzv_stacks_req_parse(NULL, 0, nonce, sizeof(nonce),
					   &round),
		     -1);
	/* A nonce that does not fit the caller's buffer. */
	cr_expect_eq(rdzv_stacks_req_parse("abcdef 1", 8, nonce, 4, &round),
		     -1);
}

Test(rdzv_stacks, nonce)
{
	char a[RDZV_STACKS_MAX_NONCE + 1], b[RDZV_STACKS_MAX_NONCE + 1];
	char req[64], back[RDZV_STACKS_MAX_NONCE + 1];
	int round;

	rdzv_stacks_nonce(a, sizeof(a));
	rdzv_stacks_nonce(b, sizeof(b));
	cr_expect_eq(strlen(a), 16);
	cr_expect_str_neq(a, b);
	snprintf(req, sizeof(req), "%s 7", a);
	cr_expect_eq(
	    rdzv_stacks_req_parse(req, strlen(req), back, sizeof(back), &round),
	    0);
	cr_expect_str_eq(back, a);
}

Test(rdzv_stacks, answer_round_trip)
{
	struct rdzv_stacks_answer a;
	struct rdzv_stacks_rank r[4];
	const char *d0 = "Thread 1 (idle): \"MainThread\"\n    f (t.py:1)\n";
	char why[128];
	int n;

	cr_assert_eq(rdzv_stacks_answer_init(&a), 0);
	cr_assert_eq(rdzv_stacks_answer_add(&a, 4, 1, "f (t.py:1)", d0,
					    strlen(d0), 4096),
		     0);
	/* A where with a newline and a control byte: one clean line. */
	cr_assert_eq(rdzv_stacks_answer_add(&a, 5, 0, "a\nb\x1b", "no py-spy",
					    9, 4096),
		     0);
	n = rdzv_stacks_answer_parse(a.buf, a.len, r, 4, why, sizeof(why));
	cr_assert_eq(n, 2, "%s", why);
	cr_expect_eq(r[0].rank, 4);
	cr_expect_eq(r[0].taken, 1);
	cr_expect_eq(r[0].where_len, strlen("f (t.py:1)"));
	cr_expect_eq(memcmp(r[0].where, "f (t.py:1)", r[0].where_len), 0);
	cr_expect_eq(r[0].dump_len, strlen(d0));
	cr_expect_eq(memcmp(r[0].dump, d0, r[0].dump_len), 0);
	cr_expect_eq(r[1].rank, 5);
	cr_expect_eq(r[1].taken, 0);
	cr_expect_eq(memcmp(r[1].where, "a?b?", 4), 0);
	cr_expect_eq(r[1].dump_len, 9);
	/* Fewer slots than ranks: refused, not overrun. */
	cr_expect_eq(rdzv_stacks_answer_parse(a.buf, a.len, r, 1, why,
					      sizeof(why)),
		     -1);
	rdzv_stacks_answer_release(&a);
}

Test(rdzv_stacks, answer_cut)
{
	struct rdzv_stacks_answer a;
	struct rdzv_stacks_rank r[1];
	char *big = malloc(100000), why[128];
	int n;

	for (size_t i = 0; i < 100000; i++)
		big[i] = i % 20 == 19 ? '\n' : 'x';
	cr_assert_eq(rdzv_stacks_answer_init(&a), 0);
	cr_assert_eq(rdzv_stacks_answer_add(&a, 0, 1, "w", big, 100000, 1000),
		     0);
	n = rdzv_stacks_answer_parse(a.buf, a.len, r, 1, why, sizeof(why));
	cr_assert_eq(n, 1, "%s", why);
	/* Cut at a line's end within the cap, and said. */
	cr_expect_leq(r[0].dump_len, 1000 + 64);
	cr_expect(strstr(r[0].dump, "[... 99000 more bytes cut]") != NULL);
	rdzv_stacks_answer_release(&a);
	/* Many ranks, each given its share (as the agent does): all fit. */
	cr_assert_eq(rdzv_stacks_answer_init(&a), 0);
	for (int k = 0; k < 64; k++)
		cr_assert_eq(rdzv_stacks_answer_add(&a, k, 1, "w", big, 100000,
						    RDZV_STACKS_MAX_ANSWER / 2 /
							64),
			     0);
	cr_expect_leq(a.len, RDZV_STACKS_MAX_ANSWER, "%zu", a.len);
	cr_expect_eq(a.nranks, 64);
	/* Past the share, dumps shrink to what is left; past the bound, not
	 * even a header: refused, nothing added. */
	for (int k = 0; k < 100000 && a.nranks < 100000; k++) {
		size_t before = a.len;
		int rc = rdzv_stacks_answer_add(&a, k, 1, "w", big, 100000,
						RDZV_STACKS_MAX_DUMP);

		if (rc != 0) {
			cr_expect_eq(rc, CRUN_ETOOBIG);
			cr_expect_eq(a.len, before);
			break;
		}
	}
	cr_expect_leq(a.len, RDZV_STACKS_MAX_ANSWER);
	rdzv_stacks_answer_release(&a);
	free(big);
}

static void expect_bad(const char *v, size_t n, const char *needle)
{
	struct rdzv_stacks_rank r[4];
	char why[128] = "";

	cr_expect_eq(rdzv_stacks_answer_parse(v, n, r, 4, why, sizeof(why)),
		     -1, "'%.*s' parsed", (int)n, v);
	cr_expect(strstr(why, needle) != NULL, "why '%s', want '%s'", why,
		  needle);
	cr_expect_null(strchr(why, '\n'));
}

Test(rdzv_stacks, answer_hostile)
{
	char *huge;

	expect_bad("", 0, "not a stacks answer");
	expect_bad("garbage", 7, "not a stacks answer");
	expect_bad("crun-stacks 1\nrank x 1 0 w\n\n", 28, "rank entry 1");
	expect_bad("crun-stacks 1\nrank 1 2 0 w\n\n", 28, "rank entry 1");
	expect_bad("crun-stacks 1\nrank -1 1 0 w\n\n", 29, "rank entry 1");
	/* A length past the end, or not followed by its newline. */
	expect_bad("crun-stacks 1\nrank 1 1 99 w\nabc\n", 32, "rank entry 1");
	expect_bad("crun-stacks 1\nrank 1 1 1 w\nabc\n", 31, "rank entry 1");
	expect_bad("crun-stacks 1\nrank 1 1 0 w\n\nrank", 33, "rank entry 2");
	huge = calloc(1, RDZV_STACKS_MAX_ANSWER + 8192);
	memcpy(huge, "crun-stacks 1\n", 14);
	expect_bad(huge, RDZV_STACKS_MAX_ANSWER + 1, "more than");
	free(huge);
}

/* ---- the agents' side, over the fake ---- */

static int asked[MAXNODES];
static char last_nonce[MAXNODES][RDZV_STACKS_MAX_NONCE + 1];

/* rdzv_opts.on_stacks: answer at once with the node's host name. */
static void on_stacks(void *data, const char *nonce)
{
	struct node *n = data;
	int i = (int)(n - W.n);

	asked[i]++;
	snprintf(last_nonce[i], sizeof(last_nonce[i]), "%s", nonce);
	cr_assert_eq(rdzv_stacks_put(n->r, nonce, n->host, strlen(n->host)),
		     0);
}

static int both_asked_once(void)
{
	return asked[0] == 1 && asked[1] == 1;
}

static int both_asked_twice(void)
{
	return asked[0] == 2 && asked[1] == 2;
}

static void request(const char *v)
{
	fkv_put(&W.kv, "crun/job1/stacks_req", v, strlen(v));
}

Test(rdzv_stacks, agents_answer_once_per_nonce, .timeout = 10)
{
	const char *a0, *a1;

	memset(asked, 0, sizeof(asked));
	world_init();
	for (int i = 0; i < 2; i++)
		node_add(i + 1, 1, i == 0, 2, 2)->o.on_stacks = on_stacks;
	start_all();
	cr_assert(run_until(all_rounds, 2000));
	run_for(100);
	cr_expect_eq(asked[0] + asked[1], 0, "asked before any request");
	/* Another round's request, and garbage: nobody acts. */
	request("abc 1");
	run_for(200);
	request("ABC 0");
	run_for(200);
	request("abc");
	run_for(200);
	cr_expect_eq(asked[0] + asked[1], 0, "a request not for this round");
	/* This round's: every node once, even over many heartbeats. */
	request("abc 0");
	cr_assert(run_until(both_asked_once, 1000), "asked %d, %d", asked[0],
		  asked[1]);
	run_for(300);
	cr_expect(both_asked_once(), "asked again: %d, %d", asked[0], asked[1]);
	cr_expect_str_eq(last_nonce[0], "abc");
	a0 = fkv_get(&W.kv, "crun/job1/stacks/abc/0");
	a1 = fkv_get(&W.kv, "crun/job1/stacks/abc/1");
	cr_assert(a0 != NULL && a1 != NULL, "answers missing");
	cr_expect_str_eq(a0, W.n[0].res.ranks.group_rank == 0 ? "n1" : "n2");
	cr_expect_str_eq(a1, W.n[0].res.ranks.group_rank == 0 ? "n2" : "n1");
	/* A new nonce: asked again. */
	request("d0d0 0");
	cr_assert(run_until(both_asked_twice, 1000));
	cr_expect_str_eq(last_nonce[1], "d0d0");
	/* A nonce that is not one never becomes a key. */
	cr_expect_eq(rdzv_stacks_put(W.n[0].r, "../x", "v", 1), CRUN_ECLOSED);
	cr_expect_eq(rdzv_stacks_put(W.n[0].r, "", "v", 1), CRUN_ECLOSED);
	world_close();
}

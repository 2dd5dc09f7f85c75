/*
 * The rendezvous algorithm (src/rdzv/rdzv.c) without sockets: an in-memory
 * key-value store implements struct rdzv_kv_ops for several simulated nodes
 * on one loop, and each test drives one rdzv per node through a scenario:
 * a round forming with the right ranks, last call, roles, mismatches, join
 * timeouts, failure restarts, late joiners and spares, heartbeats, and the
 * static backend.
 *
 * The fake mirrors the async store client the real backend uses: every
 * reply comes back from the loop, never from inside the call; requests of
 * one client run in call order, and a multi_get that waits for its keys
 * holds back the requests queued after it (the real client sends nothing
 * after a WAIT until its answer is in). Each client has a separate watch
 * channel where a new watch cancels the previous one. Waits are woken by
 * writes and time out through one uv timer.
 *
 * Every test has the same .timeout: with mixed values Criterion's runner
 * (BoxFort's timeout list) leaks 48 bytes, which fails the ASan build.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "crun/err.h"
#include "crun/rdzv.h"

#include "rdzv_fake.h"

/* ---- the fake itself ---------------------------------------------------- */

struct cbrec {
	int n;
	int status[8];
	char val[8][64];
};

static void rec_cb(int status, const struct crun_store_reply *r, void *arg)
{
	struct cbrec *c = arg;

	c->status[c->n] = status;
	if (status == 0 && r->value)
		snprintf(c->val[c->n], sizeof(c->val[0]), "%.*s", (int)r->len,
			 (const char *)r->value);
	else if (status == 0 && r->nvalues)
		snprintf(c->val[c->n], sizeof(c->val[0]), "%zu:%.*s", r->nvalues,
			 (int)r->values[0].len, (const char *)r->values[0].base);
	else if (status == 0)
		snprintf(c->val[c->n], sizeof(c->val[0]), "%lld", (long long)r->num);
	c->n++;
}

static struct cbrec REC;

static int rec4(void)
{
	return REC.n >= 4;
}

Test(rdzv_fake, semantics_async_and_cancel, .timeout = 10)
{
	struct fcli *a, *b;
	const char *k[1] = {"k"};

	world_init();
	memset(&REC, 0, sizeof(REC));
	a = fkv_client(&W.kv);
	b = fkv_client(&W.kv);
	/* CAS on a missing key: empty expected stores, non-empty does not. */
	cr_assert_eq(fkv_compare_set(a, "x", "e", 1, "d", 1, rec_cb, &REC), 0);
	cr_assert_eq(fkv_compare_set(a, "y", "", 0, "d", 1, rec_cb, &REC), 0);
	cr_assert_eq(fkv_add(a, "c", 5, rec_cb, &REC), 0);
	/* Held back by the wait, like the real client. */
	cr_assert_eq(fkv_multi_get(a, k, 1, 2000, rec_cb, &REC), 0);
	cr_assert_eq(fkv_add(a, "c", 1, rec_cb, &REC), 0);
	cr_assert_eq(REC.n, 0, "replies must not come from inside the call");
	run_for(30);
	cr_assert_eq(REC.n, 3);
	cr_assert_str_eq(REC.val[0], "e");
	cr_assert_str_eq(REC.val[1], "d");
	cr_assert_str_eq(REC.val[2], "5");
	cr_assert_null(fkv_get(&W.kv, "x"));
	cr_assert_eq(fkv_set(b, "k", "v", 1, NULL, NULL), 0);
	cr_assert(run_until(rec4, 1000));
	cr_assert_str_eq(REC.val[3], "1:v");
	run_for(20);
	cr_assert_str_eq(REC.val[4], "6");
	/* A new watch cancels the previous one. */
	memset(&REC, 0, sizeof(REC));
	cr_assert_eq(fkv_watch(a, (const char *[]){"w1"}, 1, -1, rec_cb, &REC), 0);
	cr_assert_eq(fkv_watch(a, (const char *[]){"w2"}, 1, 50, rec_cb, &REC), 0);
	run_for(100);
	cr_assert_eq(REC.n, 2);
	cr_assert_eq(REC.status[0], CRUN_ECANCELED);
	cr_assert_eq(REC.status[1], CRUN_ETIMEDOUT);
	/* Close cancels what is pending. */
	cr_assert_eq(fkv_watch(a, (const char *[]){"w3"}, 1, -1, rec_cb, &REC), 0);
	cr_assert_eq(fkv_multi_get(a, k + 0, 1, -1, rec_cb, &REC), 0);
	const char *k2[1] = {"never"};
	cr_assert_eq(fkv_multi_get(b, k2, 1, -1, rec_cb, &REC), 0);
	fkv_close(&W.kv);
	cr_assert_eq(REC.n, 5);
	for (int i = 2; i < 5; i++)
		cr_assert_eq(REC.status[i], CRUN_ECANCELED);
	cr_assert_eq(fkv_add(a, "c", 1, rec_cb, &REC), CRUN_ECLOSED);
	uv_close((uv_handle_t *)&W.guard, NULL);
	uv_close((uv_handle_t *)&W.tick, NULL);
	cr_assert_eq(uv_run(&W.loop, UV_RUN_DEFAULT), 0);
	cr_assert_eq(uv_loop_close(&W.loop), 0);
	fkv_free(&W.kv);
}

/* ---- forming a round ---------------------------------------------------- */

Test(rdzv, three_nodes_form, .timeout = 10)
{
	struct node *n1, *n2, *n3;

	world_init();
	/* Arrival order n1, n2, n3; n3 hosts the store, so it is group rank 0. */
	n1 = node_add(1, 2, 0, 3, 3);
	n2 = node_add(2, 1, 0, 3, 3);
	n3 = node_add(3, 4, 1, 3, 3);
	start_all();
	cr_assert(run_until(all_rounds, 2000), "the round did not form");
	assert_formed(n3, 0, 0, 3, 0, 7);
	assert_formed(n1, 0, 1, 3, 4, 7);
	assert_formed(n2, 0, 2, 3, 6, 7);
	for (int i = 0; i < 3; i++) {
		struct node *n = &W.n[i];

		cr_assert_eq(n->res.ranks.base_role_rank, n->res.ranks.base_rank);
		cr_assert_eq(n->res.ranks.role_world_size, 7);
		cr_assert_str_eq(n->res.master_addr, "10.0.0.3", "%s: master %s", n->host,
				 n->res.master_addr);
		cr_assert_eq(n->res.master_port, 29530);
		cr_assert_str_eq(n->res.run_id, "job1");
	}
	cr_assert_eq(n3->masters, 1);
	cr_assert_eq(n1->masters + n2->masters, 0);
	/* The round keeps running: heartbeats flow, nobody ends it. */
	run_for(300);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(W.n[i].nend, 0, "%s: end %c %s", W.n[i].host, W.n[i].end_kind,
			     W.n[i].end_why);
	cr_assert_not_null(fkv_get(&W.kv, "crun/job1/r0/hb/2"));
	world_close();
}

Test(rdzv, last_call_with_fewer_than_max, .timeout = 10)
{
	struct node *n1, *n2;
	uint64_t t0;

	world_init();
	n1 = node_add(1, 1, 1, 2, 3);
	n2 = node_add(2, 1, 0, 2, 3);
	t0 = uv_now(&W.loop);
	start_all();
	run_for(120);
	cr_assert_eq(n1->nround + n2->nround, 0, "closed before the last call");
	cr_assert(run_until(all_rounds, 2000));
	assert_formed(n1, 0, 0, 2, 0, 2);
	assert_formed(n2, 0, 1, 2, 1, 2);
	cr_assert_geq(n1->round_at - t0, 190, "formed after %llu ms",
		      (unsigned long long)(n1->round_at - t0));
	cr_assert_lt(n1->round_at - t0, 800);
	world_close();
}

Test(rdzv, max_nodes_close_at_once, .timeout = 10)
{
	uint64_t t0;

	world_init();
	node_add(1, 1, 1, 2, 3);
	node_add(2, 1, 0, 2, 3);
	node_add(3, 1, 0, 2, 3);
	t0 = uv_now(&W.loop);
	start_all();
	cr_assert(run_until(all_rounds, 2000));
	for (int i = 0; i < 3; i++) {
		assert_formed(&W.n[i], 0, i, 3, i, 3);
		cr_assert_lt(W.n[i].round_at - t0, 150, "%s formed after %llu ms", W.n[i].host,
			     (unsigned long long)(W.n[i].round_at - t0));
	}
	world_close();
}

Test(rdzv, roles_interleaved, .timeout = 10)
{
	static const char *roles[] = {"trainer", "reader", "trainer", "reader"};
	static const int nproc[] = {2, 1, 3, 1};
	/* Expected, in group-rank order n1..n4. */
	static const int base[] = {0, 2, 3, 6}, rbase[] = {0, 0, 2, 1}, rworld[] = {5, 2, 5, 2};

	world_init();
	for (int i = 0; i < 4; i++) {
		struct node *n = node_add(i + 1, nproc[i], i == 0, 4, 4);

		snprintf(n->role, sizeof(n->role), "%s", roles[i]);
	}
	/* Join in reverse so arrival order is not the answer. */
	for (int i = 3; i >= 0; i--)
		node_start(&W.n[i]);
	cr_assert(run_until(all_rounds, 2000));
	for (int i = 0; i < 4; i++) {
		struct node *n = &W.n[i];

		assert_formed(n, 0, i, 4, base[i], 7);
		cr_assert_eq(n->res.ranks.base_role_rank, rbase[i], "%s: role rank %d", n->host,
			     n->res.ranks.base_role_rank);
		cr_assert_eq(n->res.ranks.role_world_size, rworld[i]);
	}
	world_close();
}

/* ---- mismatches ---------------------------------------------------------- */

static struct node *FIRST;

static int first_joined(void)
{
	return fkv_get(&W.kv, "crun/job1/r0/join") != NULL;
}

static int second_done(void)
{
	return W.n[1].nround > 0;
}

Test(rdzv, mismatch_nnodes, .timeout = 10)
{
	struct node *b;

	world_init();
	FIRST = node_add(1, 1, 1, 2, 2);
	b = node_add(2, 1, 0, 3, 3);
	b->o.max_restarts = 7; /* its params would show */
	node_start(FIRST);
	cr_assert(run_until(first_joined, 1000));
	node_start(b);
	cr_assert(run_until(second_done, 1000));
	cr_assert_eq(b->status, CRUN_ERDZV_MISMATCH, "status %s", crun_err_name(b->status));
	cr_assert(strstr(b->errmsg, "nnodes=2:2") && strstr(b->errmsg, "nnodes=3:3"), "%s",
		  b->errmsg);
	cr_assert_eq(FIRST->nround, 0, "first: %s", FIRST->errmsg);
	/* Turned away before it joined: its config and round asked in the
	 * same write as the job changed nothing. */
	cr_assert_str_eq(fkv_get(&W.kv, "crun/job1/r0/join"), "1");
	cr_assert_str_eq(fkv_get(&W.kv, "crun/job1/params"), "max_restarts=1 keep_alive_ms=50");
	world_close();
}

static int first_round(void);

/* A node of an older crun (no proto= in its config) meets a newer one. */
Test(rdzv, mismatch_protocol, .timeout = 10)
{
	struct node *a;

	world_init();
	fkv_put(&W.kv, "crun/job", "job1", 4);
	fkv_put(&W.kv, "crun/job1/config", "nnodes=2:2 backend=c10d", 23);
	a = node_add(1, 1, 0, 2, 2);
	node_start(a);
	cr_assert(run_until(first_round, 1000));
	cr_assert_eq(a->status, CRUN_ERDZV_MISMATCH, "status %s", crun_err_name(a->status));
	cr_assert(strstr(a->errmsg, "\"nnodes=2:2 backend=c10d\"") &&
		      strstr(a->errmsg, "proto=3") && strstr(a->errmsg, "crun version"),
		  "%s", a->errmsg);
	world_close();
}

Test(rdzv, mismatch_run_id, .timeout = 10)
{
	struct node *b;

	world_init();
	FIRST = node_add(1, 1, 1, 2, 2);
	b = node_add(2, 1, 0, 2, 2);
	b->o.run_id = "job2";
	node_start(FIRST);
	cr_assert(run_until(first_joined, 1000));
	node_start(b);
	cr_assert(run_until(second_done, 1000));
	cr_assert_eq(b->status, CRUN_ERDZV_MISMATCH, "status %s", crun_err_name(b->status));
	cr_assert(strstr(b->errmsg, "'job1'") && strstr(b->errmsg, "'job2'"), "%s", b->errmsg);
	cr_assert_null(fkv_get(&W.kv, "crun/job2/params"));
	cr_assert_null(fkv_get(&W.kv, "crun/job2/r0/join"));
	world_close();
}

/*
 * With a run id, a node's first requests (the job, the config, the round's
 * number) go out together, before any reply: one round trip, not three.
 */
Test(rdzv, first_requests_go_together, .timeout = 10)
{
	struct node *a;

	world_init();
	a = node_add(1, 1, 1, 1, 1);
	node_start(a);
	cr_assert_eq(W.kv.nops, 3, "%llu requests before the loop turned",
		     (unsigned long long)W.kv.nops);
	cr_assert(run_until(first_round, 1000));
	cr_assert_eq(a->status, 0, "%s", a->errmsg);
	world_close();
}

Test(rdzv, null_run_id_adopts_the_job, .timeout = 10)
{
	struct node *a, *b;

	world_init();
	a = node_add(1, 1, 1, 2, 2);
	b = node_add(2, 1, 0, 2, 2);
	b->o.run_id = NULL;
	/* The node without an id may even come first: it waits for the job id. */
	node_start(b);
	run_for(50);
	node_start(a);
	cr_assert(run_until(all_rounds, 2000));
	assert_formed(a, 0, 0, 2, 0, 2);
	assert_formed(b, 0, 1, 2, 1, 2);
	cr_assert_str_eq(b->res.run_id, "job1");
	world_close();
}

/* ---- join timeout -------------------------------------------------------- */

Test(rdzv, join_timeout_names_who_joined, .timeout = 10)
{
	uint64_t t0;

	world_init();
	node_add(1, 4, 1, 3, 3);
	node_add(2, 2, 0, 3, 3);
	t0 = uv_now(&W.loop);
	start_all();
	cr_assert(run_until(all_rounds, 4000));
	for (int i = 0; i < 2; i++) {
		struct node *n = &W.n[i];

		cr_assert_eq(n->status, CRUN_ERDZV_TIMEOUT, "%s: %s", n->host,
			     crun_err_name(n->status));
		cr_assert_geq(n->round_at - t0, 950);
		cr_assert(strstr(n->errmsg, "n1 (4 workers)") && strstr(n->errmsg, "n2 (2 workers)"),
			  "%s", n->errmsg);
		cr_assert(strstr(n->errmsg, "still missing 1"), "%s", n->errmsg);
	}
	world_close();
}

/* Enough nodes joined but the round never closed (here: the last call
 * outlasts join_timeout): the message says so, not "still missing 0". */
Test(rdzv, join_timeout_with_enough_nodes_says_so, .timeout = 10)
{
	world_init();
	node_add(1, 1, 1, 2, 3);
	node_add(2, 1, 0, 2, 3);
	W.n[0].o.last_call_timeout = W.n[1].o.last_call_timeout = 5.0;
	start_all();
	cr_assert(run_until(all_rounds, 4000));
	for (int i = 0; i < 2; i++) {
		struct node *n = &W.n[i];

		cr_assert_eq(n->status, CRUN_ERDZV_TIMEOUT, "%s: %s", n->host,
			     crun_err_name(n->status));
		cr_assert(strstr(n->errmsg, "2 nodes joined (at least 2 needed"),
			  "%s", n->errmsg);
		cr_assert(!strstr(n->errmsg, "still missing"), "%s", n->errmsg);
	}
	world_close();
}

/* ---- ending and restarting ---------------------------------------------- */

Test(rdzv, failure_restarts_then_exhausts, .timeout = 10)
{
	world_init();
	node_add(1, 4, 1, 3, 3);
	node_add(2, 2, 0, 3, 3);
	node_add(3, 1, 0, 3, 3);
	start_all();
	cr_assert(run_until(all_rounds, 2000));
	for (int round = 0; round < 2; round++) {
		clear_ends();
		cr_assert_eq(rdzv_end_round(W.n[1].r, RDZV_END_FAILURE, "1 3 n2"), 0);
		cr_assert(run_until(all_ends, 1000), "round %d: not every node saw the end", round);
		for (int i = 0; i < 3; i++) {
			cr_assert_eq(W.n[i].nend, 1, "%s: %d ends", W.n[i].host, W.n[i].nend);
			cr_assert_eq(W.n[i].end_kind, 'F', "%s: end %c", W.n[i].host,
				     W.n[i].end_kind);
			cr_assert_str_eq(W.n[i].end_why, "1 3 n2");
		}
		may_all(RDZV_END_FAILURE);
		for (int i = 0; i < 3; i++) {
			cr_assert_eq(W.n[i].may_ok, round == 0, "round %d, %s: may_restart %d",
				     round, W.n[i].host, W.n[i].may_ok);
			cr_assert_eq(rdzv_restarts(W.n[i].r), round + 1);
		}
		if (round == 1)
			break;
		for (int i = 0; i < 3; i++)
			node_next(&W.n[i]);
		cr_assert(run_until(all_rounds, 2000), "round 1 did not form");
		assert_formed(&W.n[0], 1, 0, 3, 0, 7);
		assert_formed(&W.n[1], 1, 1, 3, 4, 7);
		assert_formed(&W.n[2], 1, 2, 3, 6, 7);
		cr_assert_eq(W.n[0].res.master_port, 29511);
	}
	world_close();
}

/*
 * A hang (--stall_timeout: the agent's "H" end) costs a restart as a
 * failure does, and ends the job once the restarts are spent.
 */
Test(rdzv, stall_restarts_then_exhausts, .timeout = 10)
{
	world_init();
	node_add(1, 2, 1, 2, 2);
	node_add(2, 2, 0, 2, 2);
	start_all();
	cr_assert(run_until(all_rounds, 2000));
	for (int round = 0; round < 2; round++) {
		clear_ends();
		cr_assert_eq(rdzv_end_round(W.n[1].r, RDZV_END_STALL,
					    "stall: no rank progressed for 5 s"),
			     0);
		cr_assert(run_until(all_ends, 1000), "round %d: no end", round);
		for (int i = 0; i < 2; i++) {
			cr_assert_eq(W.n[i].end_kind, 'H', "%s: end %c",
				     W.n[i].host, W.n[i].end_kind);
			cr_assert_str_eq(W.n[i].end_why,
					 "stall: no rank progressed for 5 s");
		}
		may_all(RDZV_END_STALL);
		for (int i = 0; i < 2; i++) {
			cr_assert_eq(W.n[i].may_ok, round == 0,
				     "round %d, %s: may_restart %d", round,
				     W.n[i].host, W.n[i].may_ok);
			cr_assert_eq(rdzv_restarts(W.n[i].r), round + 1);
		}
		if (round == 1)
			break;
		for (int i = 0; i < 2; i++)
			node_next(&W.n[i]);
		cr_assert(run_until(all_rounds, 2000), "round 1 did not form");
	}
	world_close();
}

/*
 * Two workers fail on two nodes at the same moment: the round ends once,
 * and it costs one restart, not two ("only for the node whose end was
 * recorded first").
 */
Test(rdzv, simultaneous_failures_cost_one_restart, .timeout = 10)
{
	world_init();
	node_add(1, 1, 1, 3, 3);
	node_add(2, 1, 0, 3, 3);
	node_add(3, 1, 0, 3, 3);
	start_all();
	cr_assert(run_until(all_rounds, 2000));
	cr_assert_eq(rdzv_end_round(W.n[1].r, RDZV_END_FAILURE, "1 1 n2"), 0);
	cr_assert_eq(rdzv_end_round(W.n[2].r, RDZV_END_FAILURE, "1 2 n3"), 0);
	cr_assert(run_until(all_ends, 1000));
	for (int i = 0; i < 3; i++) {
		char k[64];

		cr_assert_str_eq(W.n[i].end_why, W.n[0].end_why);
		/* Each mark carries the end recorded first, whoever wrote it. */
		snprintf(k, sizeof(k), "crun/job1/r0/end/%d", i);
		cr_assert_str_eq(fkv_get(&W.kv, k), fkv_get(&W.kv, "crun/job1/r0/end"));
	}
	may_all(RDZV_END_FAILURE);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(rdzv_restarts(W.n[i].r), 1, "%s: %d restarts after one failed round",
			     W.n[i].host, rdzv_restarts(W.n[i].r));
	cr_assert_str_eq(fkv_get(&W.kv, "crun/job1/restarts"), "1");
	world_close();
}

/*
 * After reading round R's end a node joins R+1 without reading "round"
 * (the ender advanced it first); if R+1 ended as well, its peek after
 * joining finds that and it reads "round" then.
 */
Test(rdzv, reform_joins_the_next_round_unasked, .timeout = 10)
{
	world_init();
	node_add(1, 1, 1, 2, 2);
	node_add(2, 1, 0, 2, 2);
	start_all();
	cr_assert(run_until(all_rounds, 2000));
	cr_assert_eq(rdzv_end_round(W.n[1].r, RDZV_END_FAILURE, "1 1 n2"), 0);
	cr_assert(run_until(all_ends, 1000));
	cr_assert_str_eq(fkv_get(&W.kv, "crun/job1/round"), "1");
	W.kv.spy_key = "crun/job1/round";
	for (int i = 0; i < 2; i++)
		node_next(&W.n[i]);
	cr_assert(run_until(all_rounds, 2000), "round 1 did not form");
	cr_assert_eq(W.kv.spied, 0, "%d requests on \"round\"", W.kv.spied);
	assert_formed(&W.n[0], 1, 0, 2, 0, 2);
	assert_formed(&W.n[1], 1, 1, 2, 1, 2);

	/* Round 2 ends; meanwhile round 3 was opened and ended too. */
	clear_ends();
	cr_assert_eq(rdzv_end_round(W.n[1].r, RDZV_END_FAILURE, "1 1 n2"), 0);
	cr_assert(run_until(all_ends, 1000));
	fkv_put(&W.kv, "crun/job1/r2/end", "D n9 gone", 9);
	fkv_put(&W.kv, "crun/job1/round", "3", 1);
	W.kv.spied = 0;
	for (int i = 0; i < 2; i++)
		node_next(&W.n[i]);
	cr_assert(run_until(all_rounds, 2000), "round 3 did not form");
	cr_assert_eq(W.kv.spied, 2, "%d requests on \"round\"", W.kv.spied);
	assert_formed(&W.n[0], 3, 0, 2, 0, 2);
	assert_formed(&W.n[1], 3, 1, 2, 1, 2);
	world_close();
}

/*
 * The watch on "assigned" reads each node's assignment with it, and the
 * store host's (group rank 0's) copy of the addresses: nobody reads them
 * on their own.
 */
Test(rdzv, assignment_read_with_the_watch, .timeout = 10)
{
	world_init();
	node_add(1, 2, 1, 3, 3);
	node_add(2, 1, 0, 3, 3);
	node_add(3, 4, 0, 3, 3);
	W.kv.spy_mget = 1;
	W.kv.spy_key = "crun/job1/r0/assign/";
	start_all();
	cr_assert(run_until(all_rounds, 2000));
	cr_assert_eq(W.kv.spied, 0, "%d reads of assignments", W.kv.spied);
	cr_assert_eq(W.n[0].res.ranks.group_rank, 0);
	cr_assert_eq(W.n[0].res.ranks.world_size, 7);
	W.kv.spy_key = "crun/job1/r0/addrs";
	cr_assert_eq(rdzv_end_round(W.n[2].r, RDZV_END_FAILURE, "1 1 n3"), 0);
	cr_assert(run_until(all_ends, 1000));
	W.kv.spy_key = "crun/job1/r1/";
	for (int i = 0; i < 3; i++)
		node_next(&W.n[i]);
	cr_assert(run_until(all_rounds, 2000), "round 1 did not form");
	/* The only reads: the closer's of the 3 descriptors, each node's of
	 * the master address (counted per key). */
	cr_assert_eq(W.kv.spied, 6, "%d keys read in round 1", W.kv.spied);
	assert_formed(&W.n[0], 1, 0, 3, 0, 7);
	world_close();
}

/* A reason too long to copy into every mark: the marks say "read end". */
Test(rdzv, long_end_reason_is_read_from_end, .timeout = 10)
{
	char why[400];

	memset(why, 'x', sizeof(why) - 1);
	why[sizeof(why) - 1] = '\0';
	memcpy(why, "1 1 n2 ", 7);
	world_init();
	node_add(1, 1, 1, 2, 2);
	node_add(2, 1, 0, 2, 2);
	start_all();
	cr_assert(run_until(all_rounds, 2000));
	cr_assert_eq(rdzv_end_round(W.n[1].r, RDZV_END_FAILURE, why), 0);
	cr_assert(run_until(all_ends, 1000));
	cr_assert_str_eq(fkv_get(&W.kv, "crun/job1/r0/end/0"), "1");
	for (int i = 0; i < 2; i++)
		cr_assert_str_eq(W.n[i].end_why, why);
	world_close();
}

static int first_two_ended(void)
{
	return W.n[0].nend && W.n[1].nend;
}

static int first_ended(void)
{
	return W.n[0].nend > 0;
}

Test(rdzv, late_node_triggers_join, .timeout = 10)
{
	struct node *n3;

	world_init();
	node_add(1, 1, 1, 2, 3);
	node_add(2, 1, 0, 2, 3);
	n3 = node_add(3, 1, 0, 2, 3);
	node_start(&W.n[0]);
	node_start(&W.n[1]);
	/* all_rounds skips nodes not started yet (alive == 0). */
	cr_assert(run_until(all_rounds, 2000));
	assert_formed(&W.n[0], 0, 0, 2, 0, 2);
	node_start(n3);
	cr_assert(run_until(first_two_ended, 1000), "the late node did not end the round");
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(W.n[i].end_kind, 'J', "%s: end %c", W.n[i].host, W.n[i].end_kind);
		cr_assert_str_eq(W.n[i].end_why, "n3");
	}
	cr_assert_eq(n3->nround, 0);
	may_all(RDZV_END_JOIN);
	for (int i = 0; i < 2; i++)
		cr_assert_eq(W.n[i].may_ok, 1, "%s: may_restart %d", W.n[i].host, W.n[i].may_ok);
	cr_assert_eq(rdzv_restarts(W.n[0].r), 0, "a join must not cost a restart");
	node_next(&W.n[0]);
	node_next(&W.n[1]);
	cr_assert(run_until(all_rounds, 2000), "round 1 did not form");
	for (int i = 0; i < 3; i++)
		assert_formed(&W.n[i], 1, i, 3, i, 3);
	world_close();
}

static int third_joined(void)
{
	return fkv_get(&W.kv, "crun/job1/r0/node/3") != NULL;
}

/* Round 0 of n1 and n2 is full (--nnodes=2) when n3 joins: n3 waits. */
static struct node *spare_world(void)
{
	struct node *n3;

	world_init();
	node_add(1, 1, 1, 2, 2);
	node_add(2, 1, 0, 2, 2);
	n3 = node_add(3, 1, 0, 2, 2);
	node_start(&W.n[0]);
	node_start(&W.n[1]);
	cr_assert(run_until(all_rounds, 2000));
	node_start(n3);
	cr_assert(run_until(third_joined, 1000));
	return n3;
}

static int round1_full(void)
{
	return fkv_get(&W.kv, "crun/job1/r1/node/3") != NULL && W.n[0].nround &&
	       W.n[1].nround;
}

Test(rdzv, late_node_waits_as_spare_when_full, .timeout = 10)
{
	struct node *n3;

	n3 = spare_world();
	/* Past the join timeout: a spare neither fails nor disturbs the round. */
	run_for(1300);
	cr_assert_eq(n3->nround, 0, "spare got %s: %s", crun_err_name(n3->status), n3->errmsg);
	cr_assert_eq(W.n[0].nend + W.n[1].nend, 0, "end %c %s", W.n[0].end_kind,
		     W.n[0].end_why);
	/*
	 * The round fails: the nodes that remain keep their places in round 1
	 * (the spare lets them join first, though they come later), and the
	 * spare waits there again.
	 */
	cr_assert_eq(rdzv_end_round(W.n[0].r, RDZV_END_FAILURE, "1 0 n1"), 0);
	cr_assert(run_until(first_two_ended, 1000));
	cr_assert_eq(n3->nround, 0);
	run_for(100); /* the spare is waiting for them by now */
	cr_assert_null(fkv_get(&W.kv, "crun/job1/r1/node/1"), "the spare came first");
	may_all(RDZV_END_FAILURE);
	cr_assert_eq(W.n[0].may_ok, 1);
	node_next(&W.n[0]);
	node_next(&W.n[1]);
	cr_assert(run_until(round1_full, 1000), "round 1 did not form, then take the spare");
	for (int i = 0; i < 2; i++)
		assert_formed(&W.n[i], 1, i, 2, i, 2);
	run_for(100);
	cr_assert_eq(n3->nround, 0, "the spare took a place: %s", n3->errmsg);
	world_close();
}

static int n1_n3_formed(void)
{
	return W.n[0].nround && W.n[2].nround;
}

/*
 * A node of a full round is lost, leaving fewer than the minimum: the
 * spare takes its place in the next round, as a node change (no restart
 * spent), behind the node that remains.
 */
Test(rdzv, spare_takes_a_lost_nodes_place, .timeout = 10)
{
	struct node *n3;

	n3 = spare_world();
	run_for(200); /* heartbeats established */
	node_kill(&W.n[1]);
	cr_assert(run_until(first_ended, 1000), "the lost node went unnoticed");
	cr_assert_eq(W.n[0].end_kind, 'D', "end %c %s", W.n[0].end_kind, W.n[0].end_why);
	may_all(RDZV_END_DEAD);
	cr_assert_eq(W.n[0].may_ok, 1, "1 node and 1 spare of min 2: no re-forming");
	cr_assert_eq(rdzv_restarts(W.n[0].r), 0, "a node change cost a restart");
	node_next(&W.n[0]);
	cr_assert(run_until(n1_n3_formed, 1500), "round 1 did not form with the spare");
	assert_formed(&W.n[0], 1, 0, 2, 0, 2);
	assert_formed(n3, 1, 1, 2, 1, 2);
	world_close();
}

static int spare_done(void)
{
	return W.n[2].nround > 0;
}

/*
 * The job fails for good (restarts exhausted) while a spare waits: the
 * spare exits with the job's status (the failed worker's, 3), read from
 * "over" once no node came back within last_call_timeout.
 */
Test(rdzv, spare_ends_with_the_status_of_a_failed_job, .timeout = 10)
{
	struct node *n3;

	n3 = spare_world();
	cr_assert_eq(rdzv_end_round(W.n[0].r, RDZV_END_FAILURE, "2 rank 0 on n1"), 0);
	cr_assert(run_until(first_two_ended, 1000));
	may_all(RDZV_END_FAILURE);
	cr_assert_eq(W.n[0].may_ok, 1);
	clear_ends();
	node_next(&W.n[0]);
	node_next(&W.n[1]);
	cr_assert(run_until(round1_full, 1000));
	cr_assert_eq(rdzv_end_round(W.n[1].r, RDZV_END_FAILURE, "3 rank 1 on n2"), 0);
	cr_assert(run_until(first_two_ended, 1000));
	may_all(RDZV_END_FAILURE);
	cr_assert_eq(W.n[0].may_ok, 0, "a second failure with max_restarts=1 restarted");
	cr_assert_eq(n3->nround, 0, "the spare ended before the job was over");
	cr_assert(run_until(spare_done, 1000), "the spare never learned the job was over");
	cr_assert_eq(n3->status, CRUN_ERDZV_CLOSED, "%s: %s", crun_err_name(n3->status),
		     n3->errmsg);
	cr_assert(strstr(n3->errmsg, "3 rank 1 on n2"), "%s", n3->errmsg);
	cr_assert_eq(rdzv_job_status(n3->r), 3);
	cr_assert_null(fkv_get(&W.kv, "crun/job1/r2/node/1"), "a node joined round 2");
	world_close();
}

/* n nodes of --nnodes=2:3 in an allocation of 3 (SLURM's nodes). */
static void alloc_world(int nodes)
{
	world_init();
	for (int i = 0; i < nodes; i++) {
		struct node *n = node_add(i + 1, 1, i == 0, 2, 3);

		n->o.expect_first = 3;
		n->o.expect_why = "SLURM_STEP_NUM_NODES=3";
	}
}

/*
 * The first round waits for the allocation's nodes, not last_call_timeout
 * (0.2 s): a late third node is in round 0, with no re-forming for it.
 */
Test(rdzv, first_round_waits_for_the_allocation, .timeout = 10)
{
	alloc_world(3);
	node_start(&W.n[0]);
	node_start(&W.n[1]);
	run_for(600);
	cr_assert_eq(W.n[0].nround + W.n[1].nround, 0, "round 0 formed without the third node");
	node_start(&W.n[2]);
	cr_assert(run_until(all_rounds, 1000));
	for (int i = 0; i < 3; i++)
		assert_formed(&W.n[i], 0, i, 3, i, 3);
	world_close();
}

/* A node of the allocation that never comes: round 0 starts without it
 * once join_timeout (1 s) has passed, with the nodes that came. */
Test(rdzv, first_round_starts_without_a_missing_node_at_join_timeout, .timeout = 10)
{
	uint64_t t0;

	alloc_world(2); /* the third never comes */
	t0 = uv_now(&W.loop);
	start_all();
	cr_assert(run_until(all_rounds, 2500), "round 0 never formed");
	cr_assert_geq(uv_now(&W.loop) - t0, 950, "formed after %llu ms, before join_timeout",
		      (unsigned long long)(uv_now(&W.loop) - t0));
	for (int i = 0; i < 2; i++)
		assert_formed(&W.n[i], 0, i, 2, i, 2);
	world_close();
}

/*
 * The job finishes while a spare waits: the spare ends with it, told that
 * it was not needed (CRUN_ERDZV_LEFT_OUT: the agent exits 0), instead of
 * joining a next round on a store about to close.
 */
Test(rdzv, spare_ends_when_the_job_finishes, .timeout = 10)
{
	struct node *n3;

	n3 = spare_world();
	run_for(100);
	cr_assert_eq(n3->nround, 0);
	cr_assert_eq(rdzv_finish(W.n[1].r, on_finish, &W.n[1]), 0);
	cr_assert_eq(rdzv_finish(W.n[0].r, on_finish, &W.n[0]), 0);
	run_for(300);
	cr_assert_eq(n3->nround, 1, "the spare was not told the job finished");
	cr_assert_eq(n3->status, CRUN_ERDZV_LEFT_OUT, "%s: %s", crun_err_name(n3->status),
		     n3->errmsg);
	cr_assert(strstr(n3->errmsg, "job finished; this spare (n3) was not needed"), "%s",
		  n3->errmsg);
	cr_assert_null(fkv_get(&W.kv, "crun/job1/r1/node/3"), "the spare joined a round 1");
	world_close();
}

/* A job stopped for good (an X end) ends its spares too, as failed. */
Test(rdzv, spare_ends_when_the_job_stops, .timeout = 10)
{
	struct node *n3;

	n3 = spare_world();
	cr_assert_eq(rdzv_end_round(W.n[0].r, RDZV_END_FATAL, "bad config on n1"), 0);
	cr_assert(run_until(first_two_ended, 1000));
	run_for(300);
	cr_assert_eq(n3->nround, 1);
	cr_assert_eq(n3->status, CRUN_ERDZV_CLOSED, "%s: %s", crun_err_name(n3->status),
		     n3->errmsg);
	cr_assert(strstr(n3->errmsg, "bad config on n1"), "%s", n3->errmsg);
	world_close();
}

/* ---- heartbeats ----------------------------------------------------------- */

static int others_ended(void)
{
	for (int i = 0; i < W.nn; i++)
		if (W.n[i].alive && W.n[i].nend == 0)
			return 0;
	return 1;
}

Test(rdzv, dead_node_detected, .timeout = 10)
{
	struct node *dead;
	uint64_t t0;

	world_init();
	node_add(1, 1, 1, 3, 3);
	node_add(2, 1, 0, 3, 3);
	node_add(3, 1, 0, 3, 3);
	start_all();
	cr_assert(run_until(all_rounds, 2000));
	run_for(200); /* heartbeats established */
	dead = &W.n[1];
	cr_assert_eq(dead->res.ranks.group_rank, 1);
	t0 = uv_now(&W.loop);
	node_kill(dead);
	/* 0.05 s x 3 attempts, plus a tick or two of slack. */
	cr_assert(run_until(others_ended, 1000), "the dead node went unnoticed");
	for (int i = 0; i < 3; i += 2) {
		struct node *n = &W.n[i];

		cr_assert_eq(n->end_kind, 'D', "%s: end %c %s", n->host, n->end_kind, n->end_why);
		cr_assert(strstr(n->end_why, "n2"), "%s: %s", n->host, n->end_why);
		cr_assert_leq(n->end_at - t0, 350, "%s: noticed after %llu ms", n->host,
			      (unsigned long long)(n->end_at - t0));
	}
	may_all(RDZV_END_DEAD);
	/* 2 nodes are left of min 3: no restart. */
	cr_assert_eq(W.n[0].may_ok, 0);
	world_close();
}

/* nodes nodes (n1 the store host) formed into round 0 with MIN..MAX. */
static void world_formed(int nodes, int min, int max)
{
	world_init();
	for (int i = 0; i < nodes; i++)
		node_add(i + 1, 1, i == 0, min, max);
	start_all();
	cr_assert(run_until(all_rounds, 2000));
}

/* A store host that stops answering (SIGSTOP, a frozen machine) is given up. */
Test(rdzv, silent_store_ends_the_round, .timeout = 10)
{
	uint64_t t0;

	world_formed(2, 2, 2);
	run_for(200); /* heartbeats established */
	t0 = uv_now(&W.loop);
	W.kv.frozen = 1;
	cr_assert(run_until(others_ended, 2000), "a silent store went unnoticed");
	for (int i = 0; i < 2; i++) {
		struct node *n = &W.n[i];

		cr_assert_eq(n->end_kind, 'L', "%s: end %c %s", n->host, n->end_kind, n->end_why);
		cr_assert(strstr(n->end_why, "no reply from the rendezvous store"), "%s",
			  n->end_why);
		/* 3 intervals of 0.05 s after the first unanswered one. */
		cr_assert_geq(n->end_at - t0, 150, "%s: after %llu ms", n->host,
			      (unsigned long long)(n->end_at - t0));
		cr_assert_leq(n->end_at - t0, 400, "%s: after %llu ms", n->host,
			      (unsigned long long)(n->end_at - t0));
	}
	W.kv.frozen = 0;
	world_close();
}

/*
 * A node that got no CPU for a while (a saturated machine, SIGSTOP and
 * SIGCONT) finds the store's replies waiting when it runs again: the time
 * it was not running is not the store's silence.
 */
Test(rdzv, own_stall_is_not_the_store_silence, .timeout = 10)
{
	world_formed(2, 2, 2);
	run_for(200);
	W.kv.frozen = 1;
	run_for(60); /* a heartbeat waits for its reply */
	usleep(600 * 1000); /* the loop stalls: 12 intervals */
	uv_update_time(&W.loop);
	/* The replies come in after the timers that fell due meanwhile. */
	W.kv.frozen = 0;
	fkv_kick(&W.kv);
	run_for(300);
	for (int i = 0; i < 2; i++)
		cr_assert_eq(W.n[i].nend, 0, "%s: end %c %s", W.n[i].host, W.n[i].end_kind,
			     W.n[i].end_why);
	world_close();
}

Test(rdzv, finished_node_is_not_dead, .timeout = 10)
{
	struct node *done;

	world_init();
	node_add(1, 1, 1, 3, 3);
	node_add(2, 1, 0, 3, 3);
	node_add(3, 1, 0, 3, 3);
	start_all();
	cr_assert(run_until(all_rounds, 2000));
	run_for(100);
	done = &W.n[1];
	cr_assert_eq(rdzv_finish(done->r, on_finish, done), 0);
	run_for(700);
	cr_assert_eq(done->nfinish, 1);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(W.n[i].nend, 0, "%s: end %c %s", W.n[i].host, W.n[i].end_kind,
			     W.n[i].end_why);
	/* Its successor is still watched through it: a death after it is seen. */
	node_kill(&W.n[2]);
	cr_assert(run_until(first_ended, 1000), "n3's death went unnoticed");
	cr_assert_eq(W.n[0].end_kind, 'D', "end %c %s", W.n[0].end_kind, W.n[0].end_why);
	world_close();
}

static int all_finished_alive(void)
{
	for (int i = 0; i < W.nn; i++)
		if (W.n[i].alive && W.n[i].nfinish == 0)
			return 0;
	return 1;
}

static int all_finished(void)
{
	for (int i = 0; i < W.nn; i++)
		if (W.n[i].nfinish == 0)
			return 0;
	return 1;
}

Test(rdzv, everyone_finishes, .timeout = 10)
{
	world_init();
	node_add(1, 1, 1, 2, 2);
	node_add(2, 1, 0, 2, 2);
	start_all();
	cr_assert(run_until(all_rounds, 2000));
	/* The store host first: it waits for the other one before leaving. */
	cr_assert_eq(rdzv_finish(W.n[0].r, on_finish, &W.n[0]), 0);
	run_for(100);
	cr_assert_eq(W.n[0].nfinish, 0, "the store host left before the others");
	cr_assert_eq(rdzv_finish(W.n[1].r, on_finish, &W.n[1]), 0);
	cr_assert(run_until(all_finished, 1000));
	cr_assert_str_eq(fkv_get(&W.kv, "crun/job1/r0/finished"), "2");
	world_close();
}

/*
 * The rendezvous store is elsewhere (a standalone `crun store`, etcd): no
 * node hosts it, but group rank 0 serves the workers' store the others use.
 * Finished first, it waits for the round's end, past close_timeout, as the
 * rendezvous store host does.
 */
Test(rdzv, workers_store_host_serves_until_the_end, .timeout = 10)
{
	world_init();
	node_add(1, 1, 0, 2, 2);
	node_add(2, 1, 0, 2, 2);
	start_all();
	cr_assert(run_until(all_rounds, 2000));
	cr_assert_eq(W.n[0].res.ranks.group_rank, 0);
	cr_assert(rdzv_serving(W.n[0].r));
	cr_assert_not(rdzv_serving(W.n[1].r));
	cr_assert_eq(rdzv_finish(W.n[0].r, on_finish, &W.n[0]), 0);
	run_for(600); /* twice close_timeout */
	cr_assert_eq(W.n[0].nfinish, 0, "group rank 0 stopped serving the workers' store first");
	cr_assert_eq(W.n[1].nend, 0, "end %c %s", W.n[1].end_kind, W.n[1].end_why);
	cr_assert_eq(rdzv_finish(W.n[1].r, on_finish, &W.n[1]), 0);
	cr_assert(run_until(all_finished, 1000));
	world_close();
}

/* A worker-hosted workers' store (worker rank 0's): nobody waits for it. */
static int by_worker_master(void *data, int round, int *port, int *by_worker)
{
	on_start_master(data, round, port, by_worker);
	*by_worker = 1;
	return 0;
}

Test(rdzv, worker_hosted_store_needs_no_serving, .timeout = 10)
{
	world_init();
	node_add(1, 1, 0, 2, 2)->o.start_master = by_worker_master;
	node_add(2, 1, 0, 2, 2)->o.start_master = by_worker_master;
	start_all();
	cr_assert(run_until(all_rounds, 2000));
	cr_assert(W.n[0].res.master_by_worker);
	cr_assert_not(rdzv_serving(W.n[0].r));
	cr_assert_eq(rdzv_finish(W.n[0].r, on_finish, &W.n[0]), 0);
	run_for(100);
	cr_assert_eq(W.n[0].nfinish, 1);
	world_close();
}

/*
 * A node lost its connection to group rank 0 (its store relay saw the
 * workers' store close): the round ends as that node's loss, at once, on
 * every node; once group rank 0 finished, the same report ends nothing.
 */
Test(rdzv, node_lost_ends_the_round_unless_it_finished, .timeout = 10)
{
	world_formed(3, 2, 3);
	run_for(100);
	rdzv_node_lost(W.n[1].r, 0, "lost: a relay lost its store");
	rdzv_node_lost(W.n[1].r, 1, "ignored: this node itself");
	cr_assert(run_until(others_ended, 150), "the lost node went unnoticed");
	for (int i = 0; i < 3; i++) {
		cr_assert_eq(W.n[i].end_kind, 'D', "%s: end %c %s", W.n[i].host,
			     W.n[i].end_kind, W.n[i].end_why);
		cr_assert_str_eq(W.n[i].end_why, "n1 (group rank 0) lost: a relay lost its store");
	}
	world_close();

	world_formed(3, 2, 3);
	run_for(100);
	cr_assert_eq(rdzv_finish(W.n[0].r, on_finish, &W.n[0]), 0);
	run_for(100);
	rdzv_node_lost(W.n[1].r, 0, "lost: a relay lost its store");
	rdzv_node_lost(W.n[2].r, 7, "ignored: no such node");
	run_for(300);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(W.n[i].nend, 0, "%s: end %c %s", W.n[i].host, W.n[i].end_kind,
			     W.n[i].end_why);
	world_close();
}

/*
 * The last node out died between counting itself finished and writing the
 * marks that release the store host, which had finished first: the host
 * sees it vanish (its done mark set) and releases itself.
 */
/*
 * n nodes formed; the store host finishes first and waits; every other node
 * then writes what rdzv_finish writes before its marks ("done/<g>", and the
 * counts at n), and dies: the host hears each vanish.
 */
static void others_finish_and_die_after_the_host(int n)
{
	char k[64], v[16];

	world_formed(n, n, n);
	W.kv.vanish_to = W.n[0].kv;
	cr_assert_eq(rdzv_finish(W.n[0].r, on_finish, &W.n[0]), 0);
	run_for(100);
	cr_assert_eq(W.n[0].nfinish, 0, "the store host left before the others");
	for (int g = 1; g < n; g++) {
		snprintf(k, sizeof(k), "crun/job1/r0/done/%d", g);
		fkv_put(&W.kv, k, "1", 1);
	}
	snprintf(v, sizeof(v), "%d", n);
	fkv_put(&W.kv, "crun/job1/r0/left", v, strlen(v));
	fkv_put(&W.kv, "crun/job1/r0/finished", v, strlen(v));
	W.kv.spy_key = "crun/job1/r0/end/";
	W.kv.spied = 0;
	for (int g = 1; g < n; g++)
		node_kill(&W.n[g]);
}

Test(rdzv, last_one_out_dies_before_its_marks, .timeout = 10)
{
	others_finish_and_die_after_the_host(2);
	cr_assert(run_until(all_finished_alive, 1000), "the store host waits for marks that never come");
	cr_assert_str_eq(fkv_get(&W.kv, "crun/job1/r0/all_left"), "1");
	cr_assert_str_eq(fkv_get(&W.kv, "crun/job1/r0/end"), "S all nodes finished");
	world_close();
}

/*
 * Every other node finished after the store host, and their connections
 * close one by one: the host counts again at each (the last one out may have
 * died before its marks), but marks the nodes' ends once, not once per
 * departure (1024 nodes leaving were a million marks).
 */
Test(rdzv, departures_after_the_host_mark_the_ends_once, .timeout = 10)
{
	others_finish_and_die_after_the_host(4);
	cr_assert(run_until(all_finished_alive, 1000), "the store host never left");
	cr_assert_str_eq(fkv_get(&W.kv, "crun/job1/r0/end"), "S all nodes finished");
	cr_assert_leq(W.kv.spied, 4, "%d end marks written for 4 nodes", W.kv.spied);
	world_close();
}

/* A node leaving on a signal: was the next round's restart count there? */
static int depart_saw_restarts = -1;

static void on_depart(struct crun_rdzv *r, void *data)
{
	depart_saw_restarts = fkv_get(&W.kv, "crun/job1/r1/restarts") != NULL;
	on_finish(r, data);
}

static int third_left(void)
{
	return W.n[2].nfinish > 0;
}

/*
 * A node that ends the round by leaving (SIGTERM) is the one whose end is
 * recorded: the others wait for the restart count it writes next, so it
 * must not be gone before that.
 */
Test(rdzv, departure_writes_the_restart_count_first, .timeout = 10)
{
	struct node *n3;

	world_formed(3, 2, 3);
	run_for(100);
	n3 = &W.n[2];
	cr_assert_eq(rdzv_end_round(n3->r, RDZV_END_DEAD, "n3 left (SIGTERM)"), 0);
	cr_assert_eq(rdzv_depart(n3->r, on_depart, n3), 0);
	cr_assert(run_until(third_left, 1000), "the departure never completed");
	cr_assert_eq(depart_saw_restarts, 1, "it left before writing r1/restarts");
	cr_assert_str_eq(fkv_get(&W.kv, "crun/job1/r0/end"), "D n3 left (SIGTERM)");
	world_close();
}

static int leavers_left(void)
{
	return W.n[1].nfinish > 0 && W.n[2].nfinish > 0;
}

/* A node leaving waits for the store's answer only up to close_timeout. */
Test(rdzv, silent_store_does_not_hold_a_leaving_node, .timeout = 10)
{
	uint64_t t0;

	world_formed(3, 2, 3);
	run_for(100);
	W.kv.frozen = 1;
	t0 = uv_now(&W.loop);
	cr_assert_eq(rdzv_finish(W.n[1].r, on_finish, &W.n[1]), 0);
	cr_assert_eq(rdzv_end_round(W.n[2].r, RDZV_END_DEAD, "n3 left (SIGTERM)"), 0);
	cr_assert_eq(rdzv_depart(W.n[2].r, on_finish, &W.n[2]), 0);
	cr_assert(run_until(leavers_left, 2000), "a leaving node waits for a silent store");
	/* close_timeout is 0.3 s. */
	cr_assert_geq(uv_now(&W.loop) - t0, 300);
	W.kv.frozen = 0;
	world_close();
}

/* ---- static backend ------------------------------------------------------ */

Test(rdzv, static_orders_by_node_rank, .timeout = 10)
{
	static const int rank[] = {2, 0, 1};

	world_init();
	for (int i = 0; i < 3; i++) {
		struct node *n = node_add(i + 1, 1, i == 0, 3, 3);

		n->o.static_rank = rank[i];
	}
	start_all();
	cr_assert(run_until(all_rounds, 2000));
	for (int i = 0; i < 3; i++)
		assert_formed(&W.n[i], 0, rank[i], 3, rank[i], 3);
	cr_assert_str_eq(W.n[0].res.master_addr, "10.0.0.2");
	cr_assert_str_eq(fkv_get(&W.kv, "crun/job1/config"), "nnodes=3:3 backend=static proto=3");
	world_close();
}

Test(rdzv, static_duplicate_rank_is_fatal, .timeout = 10)
{
	world_init();
	for (int i = 0; i < 2; i++) {
		struct node *n = node_add(i + 1, 1, i == 0, 2, 2);

		n->o.static_rank = 0;
	}
	start_all();
	cr_assert(run_until(all_rounds, 2000));
	for (int i = 0; i < 2; i++) {
		struct node *n = &W.n[i];

		cr_assert_eq(n->status, CRUN_ERDZV_CLOSED, "%s: %s (%s)", n->host,
			     crun_err_name(n->status), n->errmsg);
		cr_assert(strstr(n->errmsg, "node ranks 0..1"), "%s", n->errmsg);
	}
	world_close();
}

/* ---- failure branches ----------------------------------------------------- */

static int first_round(void)
{
	return W.n[0].nround > 0;
}

Test(rdzv, store_lost_while_joining, .timeout = 10)
{
	world_init();
	node_add(1, 1, 1, 2, 2);
	start_all();
	run_for(100); /* joined, waiting for a second node */
	cr_assert_eq(W.n[0].nround, 0);
	fcli_close(W.n[0].kv);
	cr_assert(run_until(first_round, 1000), "a lost store while joining went unnoticed");
	cr_assert_neq(W.n[0].status, 0);
	cr_assert(strstr(W.n[0].errmsg, "lost the rendezvous store"), "%s", W.n[0].errmsg);
	world_close();
}

Test(rdzv, store_silent_at_join_deadline, .timeout = 10)
{
	uint64_t t0;

	world_init();
	node_add(1, 1, 1, 2, 2);
	t0 = uv_now(&W.loop);
	start_all();
	run_for(100);
	W.kv.frozen = 1; /* connected, but nothing answers any more */
	cr_assert(run_until(first_round, 5000), "no verdict from a silent store");
	cr_assert_eq(W.n[0].status, CRUN_ERDZV_TIMEOUT, "%s", crun_err_name(W.n[0].status));
	cr_assert(strstr(W.n[0].errmsg, "store does not answer"), "%s", W.n[0].errmsg);
	/* join_timeout (1 s), then 2 s for the store's answer. */
	cr_assert_geq(W.n[0].round_at - t0, 2900);
	W.kv.frozen = 0;
	world_close();
}

Test(rdzv, static_node_death_is_not_restarted, .timeout = 10)
{
	world_init();
	/* Three static nodes with MIN 2: two remain, enough for c10d to
	 * re-form, but static ranks cannot be re-assigned. */
	for (int i = 0; i < 3; i++) {
		struct node *n = node_add(i + 1, 1, i == 0, 2, 3);

		n->o.static_rank = i;
	}
	start_all();
	cr_assert(run_until(all_rounds, 2000));
	run_for(200);
	node_kill(&W.n[2]);
	cr_assert(run_until(others_ended, 1000), "the dead static node went unnoticed");
	cr_assert_eq(W.n[0].end_kind, 'D', "end %c %s", W.n[0].end_kind, W.n[0].end_why);
	may_all(RDZV_END_DEAD);
	cr_assert_eq(W.n[0].may_ok, 0, "a static job re-formed without a node");
	cr_assert_eq(W.n[1].may_ok, 0);
	world_close();
}

Test(rdzv, host_stops_waiting_after_close_timeout, .timeout = 10)
{
	uint64_t t0;

	world_init();
	node_add(1, 1, 1, 2, 2);
	node_add(2, 1, 0, 2, 2);
	start_all();
	cr_assert(run_until(all_rounds, 2000));
	run_for(100);
	node_kill(&W.n[1]); /* it never leaves the round properly */
	cr_assert(run_until(first_ended, 1000));
	t0 = uv_now(&W.loop);
	cr_assert_eq(rdzv_finish(W.n[0].r, on_finish, &W.n[0]), 0);
	run_for(150);
	cr_assert_eq(W.n[0].nfinish, 0, "the store host left at once");
	cr_assert(run_until(all_finished_alive, 2000), "the store host waits forever");
	/* close_timeout is 0.3 s. */
	cr_assert_geq(uv_now(&W.loop) - t0, 280);
	cr_assert_leq(uv_now(&W.loop) - t0, 1000);
	world_close();
}

static int ghost_round_aborted(void)
{
	const char *v = fkv_get(&W.kv, "crun/job1/r0/assigned");

	return v != NULL && strncmp(v, "abort ", 6) == 0;
}

Test(rdzv, node_joined_but_never_described, .timeout = 10)
{
	const char *v;

	world_init();
	W.kv.warp = 50; /* the closer's 10 s wait for descriptors: 0.2 s */
	/* A ghost took join index 1 of round 0 and died before describing
	 * itself: the round closes with 2 joined, one descriptor missing. */
	fkv_put(&W.kv, "crun/job1/round", "0", 1);
	fkv_put(&W.kv, "crun/job1/r0/join", "1", 1);
	node_add(1, 1, 1, 2, 2);
	start_all();
	cr_assert(run_until(ghost_round_aborted, 900), "a missing descriptor hangs the round");
	v = fkv_get(&W.kv, "crun/job1/r0/assigned");
	cr_assert_str_eq(v, "abort D a node joined but never described itself");
	/* The node goes on to the next round and, alone, times out there. */
	cr_assert(run_until(first_round, 3000));
	cr_assert_eq(W.n[0].status, CRUN_ERDZV_TIMEOUT, "%s", crun_err_name(W.n[0].status));
	world_close();
}

/* ---- crun status: reading a job without joining (rdzv_status.h) --------- */

#include "crun/rdzv_status.h"

struct sread {
	int done, status;
	struct rdzv_status st;
	struct rdzv_status_node nodes[MAXNODES];
	char errmsg[900];
	uint64_t ops_before; /* W.kv.nops when the read started */
	int wrote;	     /* the map changed while reading (it must not) */
};

static struct sread SR;

static void on_sread(struct crun_rdzv_status *s, int status, const struct rdzv_status *st,
		     const char *errmsg, void *data)
{
	(void)s;
	(void)data;
	SR.done = 1;
	SR.status = status;
	snprintf(SR.errmsg, sizeof(SR.errmsg), "%s", errmsg);
	if (st) {
		SR.st = *st;
		cr_assert_leq(st->nnodes, MAXNODES);
		if (st->nnodes > 0)
			memcpy(SR.nodes, st->nodes,
			       (size_t)st->nnodes * sizeof(*st->nodes));
		SR.st.nodes = SR.nodes;
	}
}

static int sread_done(void)
{
	return SR.done;
}

/* Remove key from the map (the fake has no DELETE_KEY). */
static void fkv_del(struct fkv *s, const char *key)
{
	for (struct fentry **p = &s->map; *p; p = &(*p)->next) {
		if (strcmp((*p)->key, key) == 0) {
			struct fentry *e = *p;

			*p = e->next;
			free(e->key);
			free(e->val);
			free(e);
			return;
		}
	}
}

/*
 * The reader's view of the store: only compare-and-sets whose expected
 * value is not empty (they can match no real key: reads). Anything that
 * could write fails the test.
 */
static int ro_add(void *kv, const char *key, int64_t delta, rdzv_kv_cb cb, void *arg)
{
	(void)kv, (void)delta, (void)cb, (void)arg;
	cr_assert_fail("the reader added to '%s'", key);
	return -1;
}

static int ro_set(void *kv, const char *key, const void *v, size_t n, rdzv_kv_cb cb,
		  void *arg)
{
	(void)kv, (void)v, (void)n, (void)cb, (void)arg;
	cr_assert_fail("the reader set '%s'", key);
	return -1;
}

static int ro_compare_set(void *kv, const char *key, const void *exp, size_t elen,
			  const void *des, size_t dlen, rdzv_kv_cb cb, void *arg)
{
	cr_assert_gt(elen, 0, "the reader's CAS of '%s' could create it", key);
	cr_assert(elen > 1 && ((const char *)exp)[0] == '\001',
		  "the reader's CAS of '%s' could match a value", key);
	return fkv_compare_set(kv, key, exp, elen, des, dlen, cb, arg);
}

static int ro_multi_set(void *kv, const char *const *keys, const void *const *vals,
			const size_t *lens, size_t n, rdzv_kv_cb cb, void *arg)
{
	(void)kv, (void)vals, (void)lens, (void)n, (void)cb, (void)arg;
	cr_assert_fail("the reader set '%s'", keys[0]);
	return -1;
}

static const struct rdzv_kv_ops ro_ops = {
    .add = ro_add,
    .set = ro_set,
    .compare_set = ro_compare_set,
    .multi_get = fkv_multi_get,
    .peek = fkv_peek,
    .multi_set = ro_multi_set,
    .watch = fkv_watch,
};

/* Read the job over a client of its own, like `crun status`. */
static void status_read(const char *run_id, double hb_wait)
{
	struct rdzv_status_opts o = {.run_id = run_id, .max_nodes = 64, .hb_wait = hb_wait};
	struct crun_rdzv_status *s;
	struct fcli *c = fkv_client(&W.kv);

	memset(&SR, 0, sizeof(SR));
	cr_assert_eq(rdzv_status_read(&W.loop, &ro_ops, c, &o, on_sread, NULL, &s), 0);
	cr_assert(run_until(sread_done, 3000), "the status read never finished");
	fcli_close(c);
	rdzv_status_free(s);
}

Test(rdzv_status, running_round_then_failure, .timeout = 10)
{
	world_init();
	node_add(1, 2, 1, 2, 2);
	node_add(2, 1, 0, 2, 2);
	start_all();
	cr_assert(run_until(all_rounds, 2000));

	/* Nothing of another job; and the job itself, heartbeats seen. */
	status_read("other", 0);
	cr_assert_eq(SR.status, CRUN_ENOTFOUND, "%s", crun_err_name(SR.status));
	cr_assert(strstr(SR.errmsg, "it serves job 'job1'"), "%s", SR.errmsg);
	status_read("job1", 0.5);
	cr_assert_eq(SR.status, 0, "%s: %s", crun_err_name(SR.status), SR.errmsg);
	cr_assert_str_eq(SR.st.run_id, "job1");
	cr_assert_eq(SR.st.state, RDZV_STATUS_RUNNING);
	cr_assert_eq(SR.st.round, 0);
	cr_assert_eq(SR.st.restarts, 0);
	cr_assert(SR.st.have_params);
	cr_assert_eq(SR.st.params.max_restarts, 1);
	cr_assert_eq(SR.st.params.keep_alive_ms, 50);
	cr_assert_eq(SR.st.nnodes, 2);
	cr_assert_eq(SR.st.master_port, 29510);
	cr_assert_not(SR.st.have_failure);
	for (int g = 0; g < 2; g++) {
		struct rdzv_status_node *n = &SR.nodes[g];

		cr_assert_eq(n->group_rank, g);
		cr_assert_str_eq(n->d.host, g == 0 ? "n1" : "n2");
		cr_assert_eq(n->d.nproc, g == 0 ? 2 : 1);
		cr_assert_eq(n->ranks.base_rank, g == 0 ? 0 : 2);
		cr_assert_eq(n->ranks.world_size, 3);
		/* Beating every 50 ms: seen moving within the 0.5 s window. */
		cr_assert(n->hb_age >= 0 && n->hb_age < 0.3, "%s: age %f", n->d.host, n->hb_age);
		cr_assert_gt(n->hb, 0);
	}

	/* A worker fails on n2: the failure is recorded with its round. */
	clear_ends();
	cr_assert_eq(rdzv_end_round(W.n[1].r, RDZV_END_FAILURE,
				    "3 rank 2 (local rank 0) on n2 exited with 3"),
		     0);
	cr_assert(run_until(all_ends, 1000));
	may_all(RDZV_END_FAILURE);
	for (int i = 0; i < 2; i++)
		node_next(&W.n[i]);
	cr_assert(run_until(all_rounds, 2000), "round 1 did not form");
	status_read(NULL, 0.5); /* no run id: the endpoint's job */
	cr_assert_eq(SR.status, 0, "%s: %s", crun_err_name(SR.status), SR.errmsg);
	cr_assert_eq(SR.st.round, 1);
	cr_assert_eq(SR.st.restarts, 1);
	cr_assert_eq(SR.st.state, RDZV_STATUS_RUNNING);
	cr_assert(SR.st.have_failure);
	cr_assert_eq(SR.st.failure.round, 0);
	cr_assert_eq(SR.st.failure.rank, 2);
	cr_assert_eq(SR.st.failure.exit_code, 3);
	cr_assert_str_eq(SR.st.failure.host, "n2");
	cr_assert_gt(SR.st.failure.unix_ms, 1600000000000LL);

	/* A node that stops beating is shown stalled, within the window. */
	node_kill(&W.n[1]);
	status_read("job1", 0.3);
	cr_assert_eq(SR.status, 0, "%s: %s", crun_err_name(SR.status), SR.errmsg);
	/* Read before n1 notices (3 missed beats): still running. */
	cr_assert_eq(SR.st.state, RDZV_STATUS_RUNNING);
	cr_assert_eq(SR.st.nnodes, 2);
	cr_assert_geq(SR.nodes[0].hb_age, 0, "the live node's heartbeat did not move");
	cr_assert_lt(SR.nodes[1].hb_age, 0, "a dead node's heartbeat moved");
	cr_assert_geq(SR.st.hb_window, 0.3);
	world_close();
}

Test(rdzv_status, forming_and_malformed_records, .timeout = 10)
{
	world_init();
	/* Nothing at all on the endpoint. */
	status_read(NULL, 0);
	cr_assert_eq(SR.status, CRUN_ENOTFOUND);
	/* One node of two joined: the round forms, its node is listed. */
	node_add(1, 2, 1, 2, 2);
	start_all();
	run_for(100);
	status_read("job1", 0);
	cr_assert_eq(SR.status, 0, "%s: %s", crun_err_name(SR.status), SR.errmsg);
	cr_assert_eq(SR.st.state, RDZV_STATUS_FORMING);
	cr_assert_eq(SR.st.joined, 1);
	cr_assert_eq(SR.st.nnodes, 1);
	cr_assert_eq(SR.nodes[0].group_rank, -1);
	cr_assert_str_eq(SR.nodes[0].d.host, "n1");

	/* Forged records: an error naming the key, never a crash. */
	static const struct {
		const char *key, *val, *want;
	} bad[] = {
	    {"crun/job1/config", "nnodes=0:2 backend=c10d", "'crun/job1/config'"},
	    {"crun/job1/config", "nnodes=1:99999999 backend=c10d", "'crun/job1/config'"},
	    {"crun/job1/round", "-1", "'crun/job1/round'"},
	    {"crun/job1/restarts", "lots", "'crun/job1/restarts'"},
	    {"crun/job1/params", "max_restarts=1", "keep_alive_ms= missing"},
	    {"crun/job1/failure", "0 1 3 rank 2 (local rank 0) on h exited with 4",
	     "exit codes 3 and 4 differ"},
	    {"crun/job1/r0/join", "99999999999999999999", "'crun/job1/r0/join'"},
	    {"crun/job1/r0/node/1", "1 0 0 1 h a r", "nproc"},
	    {"crun/job1/r0/end", "Q what", "unknown end kind"},
	    {"crun/job", "a/b", "'crun/job': not a job id"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *old = fkv_get(&W.kv, bad[i].key);
		char *keep = old ? strdup(old) : NULL;

		fkv_put(&W.kv, bad[i].key, bad[i].val, strlen(bad[i].val));
		status_read(NULL, 0);
		cr_assert_eq(SR.status, CRUN_EPROTO, "%s=%s: %s (%s)", bad[i].key, bad[i].val,
			     crun_err_name(SR.status), SR.errmsg);
		cr_assert(strstr(SR.errmsg, bad[i].want), "%s=%s: '%s' lacks '%s'", bad[i].key,
			  bad[i].val, SR.errmsg, bad[i].want);
		if (keep)
			fkv_put(&W.kv, bad[i].key, keep, strlen(keep));
		else
			fkv_del(&W.kv, bad[i].key);
		free(keep);
	}
	world_close();
}

/* Put an "excluded" record naming n9 until now + ahead seconds, and read. */
static void status_excluded(long long ahead)
{
	char ex[128];

	snprintf(ex, sizeof(ex), "1 n9 10.0.0.9#9 %lld 0 2", (long long)time(NULL) + ahead);
	fkv_put(&W.kv, "crun/job1/excluded", ex, strlen(ex));
	status_read("job1", 0);
	cr_assert_eq(SR.status, 0, "%s: %s", crun_err_name(SR.status), SR.errmsg);
}

/* Two nodes of job1 in round 0, leaving out after k failures. */
static void status_world(int k, double cooldown)
{
	world_init();
	for (int i = 0; i < 2; i++) {
		struct node *n = node_add(i + 1, 1, i == 0, 2, 2);

		n->o.exclude_after = k;
		n->o.exclude_for = cooldown;
	}
	start_all();
	cr_assert(run_until(all_rounds, 2000));
}

/* "excluded" shown as the agents read it: with exclusion on, an entry
 * within exclude_for; as none (with why) when the job leaves no node out. */
Test(rdzv_status, excluded_only_when_the_job_leaves_nodes_out, .timeout = 10)
{
	status_world(2, 60);
	status_excluded(30);
	cr_assert_eq(SR.st.config.exclude_after, 2);
	cr_assert_eq(SR.st.nexcluded, 1, "%s", SR.st.excluded_ignored);
	cr_assert_str_eq(SR.st.excluded[0].host, "n9");
	cr_assert_str_eq(SR.st.excluded_ignored, "");
	world_close();

	status_world(0, 0);
	status_excluded(30);
	cr_assert_eq(SR.st.nexcluded, 0);
	cr_assert(strstr(SR.st.excluded_ignored, "the job's config leaves no node out"), "%s",
		  SR.st.excluded_ignored);
	world_close();
}

/* An entry ending later than exclude_for allows (forged): the agents read
 * no node left out (rdzv_exclude's until_beyond_exclude_for_is_ignored);
 * so does the status, naming the entry. */
Test(rdzv_status, excluded_beyond_exclude_for_is_none, .timeout = 10)
{
	status_world(2, 60);
	status_excluded(60 + 61 + 5);
	cr_assert_eq(SR.st.nexcluded, 0);
	cr_assert(strstr(SR.st.excluded_ignored, "n9 (10.0.0.9) is left out 12") &&
			  strstr(SR.st.excluded_ignored,
				 " s ahead, more than exclude_for=60 s allows"),
		  "%s", SR.st.excluded_ignored);
	/* Within exclude_for and the clocks' leeway: shown. */
	status_excluded(60 + 61 - 2);
	cr_assert_eq(SR.st.nexcluded, 1, "%s", SR.st.excluded_ignored);
	world_close();
}

Test(rdzv_status, ended_when_restarts_exhausted_or_all_finished, .timeout = 10)
{
	world_init();
	node_add(1, 1, 1, 2, 2);
	node_add(2, 1, 0, 2, 2);
	start_all();
	cr_assert(run_until(all_rounds, 2000));
	/* Two failures with max_restarts=1: nobody forms round 2. */
	for (int round = 0; round < 2; round++) {
		clear_ends();
		cr_assert_eq(rdzv_end_round(W.n[1].r, RDZV_END_FAILURE,
					    "1 rank 1 (local rank 0) on n2 exited with 1"),
			     0);
		cr_assert(run_until(all_ends, 1000));
		may_all(RDZV_END_FAILURE);
		if (round == 0) {
			for (int i = 0; i < 2; i++)
				node_next(&W.n[i]);
			cr_assert(run_until(all_rounds, 2000));
			status_read("job1", 0);
			cr_assert_eq(SR.st.state, RDZV_STATUS_RUNNING);
		}
	}
	status_read("job1", 0);
	cr_assert_eq(SR.status, 0, "%s: %s", crun_err_name(SR.status), SR.errmsg);
	cr_assert_eq(SR.st.round, 2);
	cr_assert_eq(SR.st.restarts, 2);
	cr_assert_eq(SR.st.state, RDZV_STATUS_ENDED, "state %s",
		     rdzv_status_state_name(SR.st.state));
	cr_assert_eq(SR.st.failure.round, 1);
	world_close();

	/* Every node finished: the round's end says so. */
	world_init();
	node_add(1, 1, 1, 2, 2);
	node_add(2, 1, 0, 2, 2);
	start_all();
	cr_assert(run_until(all_rounds, 2000));
	for (int i = 0; i < 2; i++)
		cr_assert_eq(rdzv_finish(W.n[i].r, on_finish, &W.n[i]), 0);
	run_for(200);
	status_read("job1", 0);
	cr_assert_eq(SR.status, 0, "%s: %s", crun_err_name(SR.status), SR.errmsg);
	cr_assert_eq(SR.st.state, RDZV_STATUS_ENDED, "state %s",
		     rdzv_status_state_name(SR.st.state));
	cr_assert_eq(SR.st.end_kind, 'S');
	world_close();
}

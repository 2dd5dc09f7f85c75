/*
 * Worker environments (spec section 2): the envp container replaces rather
 * than duplicates, the rank arithmetic over heterogeneous nodes and
 * interleaved roles, and the exact names and value formats of the torchrun
 * worker contract, including the variables that an inherited value wins.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crun/env.h"
#include "crun/err.h"

static struct crun_env env;

static void setup(void)
{
	cr_assert_eq(env_init(&env, NULL), 0);
}

static void teardown(void)
{
	env_release(&env);
}

TestSuite(env, .init = setup, .fini = teardown);

/* Entries of e whose name is name (must be exactly 1 everywhere). */
static int count_name(const struct crun_env *e, const char *name)
{
	size_t len = strlen(name);
	int n = 0;

	for (int i = 0; i < e->n; i++)
		if (strncmp(e->v[i], name, len) == 0 && e->v[i][len] == '=')
			n++;
	return n;
}

static void expect_var(const char *name, const char *want)
{
	const char *got = env_get(&env, name);

	cr_assert_not_null(got, "%s unset, want '%s'", name, want);
	cr_expect_str_eq(got, want, "%s", name);
	cr_expect_eq(count_name(&env, name), 1, "%s appears %d times", name,
		     count_name(&env, name));
}

/* The array is NULL-terminated and has exactly n entries. */
static void expect_well_formed(const struct crun_env *e)
{
	cr_assert_not_null(e->v);
	for (int i = 0; i < e->n; i++)
		cr_expect_not_null(e->v[i]);
	cr_expect_null(e->v[e->n]);
}

Test(env, init_copies_envp)
{
	char a[] = "A=1", b[] = "B=two=2", noeq[] = "JUNK", dup[] = "A=3", empty[] = "E=";
	char *envp[] = {a, b, noeq, dup, empty, NULL};

	env_release(&env);
	cr_assert_eq(env_init(&env, envp), 0);
	expect_well_formed(&env);
	cr_expect_eq(env.n, 3, "A once, B, E; JUNK dropped");
	expect_var("A", "3");
	expect_var("B", "two=2");
	expect_var("E", "");
	cr_expect_null(env_get(&env, "JUNK"));
	/* A copy: changing the source changes nothing. */
	a[2] = '9';
	b[2] = 'X';
	expect_var("B", "two=2");
	cr_expect_neq(env.v[0], a);
}

Test(env, init_null_is_empty)
{
	expect_well_formed(&env);
	cr_expect_eq(env.n, 0);
	cr_expect_null(env_get(&env, "PATH"));
}

Test(env, set_replaces)
{
	cr_assert_eq(env_set(&env, "X", "1"), 0);
	cr_assert_eq(env_set(&env, "XY", "2"), 0);
	cr_assert_eq(env_set(&env, "X", "3"), 0);
	cr_expect_eq(env.n, 2);
	expect_var("X", "3");
	expect_var("XY", "2");
	cr_assert_eq(env_put(&env, "X=4=5"), 0);
	expect_var("X", "4=5");
	cr_assert_eq(env_put(&env, "XY="), 0);
	expect_var("XY", "");
	cr_expect_eq(env.n, 2);
	expect_well_formed(&env);
	/* A prefix of a name is not that name. */
	cr_expect_null(env_get(&env, "XYZ"));
	cr_expect_null(env_get(&env, "Y"));
	cr_expect_null(env_get(&env, ""));
}

Test(env, put_rejects_malformed)
{
	cr_expect_eq(env_put(&env, "NOEQ"), CRUN_EUSAGE);
	cr_expect_eq(env_put(&env, "=value"), CRUN_EUSAGE);
	cr_expect_eq(env.n, 0);
}

Test(env, grows)
{
	char name[32], val[32];

	for (int i = 0; i < 1000; i++) {
		snprintf(name, sizeof(name), "V%d", i);
		snprintf(val, sizeof(val), "%d", i * 7);
		cr_assert_eq(env_set(&env, name, val), 0);
	}
	for (int i = 0; i < 1000; i += 3) {
		snprintf(name, sizeof(name), "V%d", i);
		cr_assert_eq(env_set(&env, name, "again"), 0);
	}
	cr_expect_eq(env.n, 1000);
	expect_well_formed(&env);
	expect_var("V998", "6986");
	expect_var("V999", "again");
	expect_var("V3", "again");
	expect_var("V4", "28");
}

/* --- ranks ---------------------------------------------------------------- */

Test(env, ranks_heterogeneous_nodes)
{
	const struct crun_node_info nodes[] = {{"default", 4}, {"default", 2}, {"default", 1}};
	const int base[] = {0, 4, 6};
	struct crun_ranks r;

	for (int g = 0; g < 3; g++) {
		env_compute_ranks(nodes, 3, g, &r);
		cr_expect_eq(r.group_rank, g);
		cr_expect_eq(r.group_world_size, 3);
		cr_expect_eq(r.base_rank, base[g], "node %d base %d", g, r.base_rank);
		cr_expect_eq(r.world_size, 7);
		cr_expect_eq(r.local_world_size, nodes[g].local_world_size);
		/* One role: ROLE_RANK == RANK, ROLE_WORLD_SIZE == WORLD_SIZE. */
		cr_expect_eq(r.base_role_rank, base[g]);
		cr_expect_eq(r.role_world_size, 7);
	}
}

Test(env, ranks_two_roles_interleaved)
{
	const struct crun_node_info nodes[] = {
		{"trainer", 2}, {"reader", 3}, {"trainer", 4}, {"reader", 1}, {"trainer", 1}};
	const int base[] = {0, 2, 5, 9, 10};
	const int role_base[] = {0, 0, 2, 3, 6};
	const int role_world[] = {7, 4, 7, 4, 7};
	struct crun_ranks r;

	for (int g = 0; g < 5; g++) {
		env_compute_ranks(nodes, 5, g, &r);
		cr_expect_eq(r.base_rank, base[g], "node %d", g);
		cr_expect_eq(r.world_size, 11);
		cr_expect_eq(r.group_world_size, 5);
		cr_expect_eq(r.base_role_rank, role_base[g], "node %d role rank %d", g,
			     r.base_role_rank);
		cr_expect_eq(r.role_world_size, role_world[g], "node %d", g);
	}
}

/* The closer's all-at-once version agrees with the per-node one. */
Test(env, all_ranks_match_per_node)
{
	static const char *roles[] = {"trainer", "reader", "eval"};
	struct crun_node_info nodes[257];
	struct crun_ranks all[257], one;
	unsigned seed = 12345;

	for (int n = 0; n <= 257; n += 37) {
		for (int g = 0; g < n; g++) {
			seed = seed * 1103515245u + 12345u;
			nodes[g].role = roles[(seed >> 16) % 3];
			nodes[g].local_world_size = 1 + (int)((seed >> 8) % 8);
		}
		cr_assert_eq(env_compute_all_ranks(nodes, n, all), 0);
		for (int g = 0; g < n; g++) {
			env_compute_ranks(nodes, n, g, &one);
			cr_expect_eq(memcmp(&one, &all[g], sizeof(one)), 0,
				     "n %d node %d: rank %d/%d role rank %d/%d", n, g,
				     all[g].base_rank, one.base_rank, all[g].base_role_rank,
				     one.base_role_rank);
		}
	}
}

/* A node whose role string lives elsewhere still matches by content. */
Test(env, ranks_compare_roles_by_content)
{
	char a[] = "default", b[] = "default";
	const struct crun_node_info nodes[] = {{a, 2}, {b, 3}};
	struct crun_ranks r;

	env_compute_ranks(nodes, 2, 1, &r);
	cr_expect_eq(r.base_role_rank, 2);
	cr_expect_eq(r.role_world_size, 5);
}

/* --- the contract ----------------------------------------------------------- */

static const struct crun_node_info three[] = {{"default", 4}, {"default", 2}, {"default", 1}};

static struct crun_worker_ctx ctx(int local_rank)
{
	struct crun_worker_ctx w = {
		.role = "default",
		.local_rank = local_rank,
		.master_addr = "10.0.0.1",
		.master_port = 29500,
		.restart_count = 2,
		.max_restarts = 3,
		.run_id = "job42",
		.use_agent_store = 1,
		.error_file = "/tmp/logs/attempt_2/1/error.json",
		.nproc = 2,
	};
	return w;
}

Test(env, contract_exact_values)
{
	struct crun_ranks r;
	struct crun_worker_ctx w = ctx(1);

	env_compute_ranks(three, 3, 1, &r);
	cr_assert_eq(env_add_contract(&env, &r, &w), 0);
	expect_well_formed(&env);
	expect_var("LOCAL_RANK", "1");
	expect_var("RANK", "5");
	expect_var("GROUP_RANK", "1");
	expect_var("ROLE_RANK", "5");
	expect_var("ROLE_NAME", "default");
	expect_var("LOCAL_WORLD_SIZE", "2");
	expect_var("WORLD_SIZE", "7");
	expect_var("GROUP_WORLD_SIZE", "3");
	expect_var("ROLE_WORLD_SIZE", "7");
	expect_var("MASTER_ADDR", "10.0.0.1");
	expect_var("MASTER_PORT", "29500");
	expect_var("TORCHELASTIC_RESTART_COUNT", "2");
	expect_var("TORCHELASTIC_MAX_RESTARTS", "3");
	expect_var("TORCHELASTIC_RUN_ID", "job42");
	expect_var("TORCHELASTIC_USE_AGENT_STORE", "True");
	expect_var("TORCHELASTIC_ERROR_FILE", "/tmp/logs/attempt_2/1/error.json");
	cr_expect_null(env_get(&env, "NCCL_ASYNC_ERROR_HANDLING"),
		       "the deprecated name is not set (PyTorch >= 2.2 warns)");
	expect_var("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1");
	expect_var("OMP_NUM_THREADS", "1");
}

Test(env, contract_false_and_no_error_file)
{
	struct crun_ranks r;
	struct crun_worker_ctx w = ctx(0);

	w.use_agent_store = 0;
	w.error_file = NULL;
	w.master_port = 0;
	w.restart_count = 0;
	env_compute_ranks(three, 3, 0, &r);
	cr_assert_eq(env_add_contract(&env, &r, &w), 0);
	expect_var("TORCHELASTIC_USE_AGENT_STORE", "False");
	expect_var("TORCHELASTIC_ERROR_FILE", "");
	expect_var("MASTER_PORT", "0");
	expect_var("TORCHELASTIC_RESTART_COUNT", "0");
	expect_var("RANK", "0");
}

Test(env, contract_roles)
{
	const struct crun_node_info nodes[] = {{"trainer", 2}, {"reader", 3}, {"trainer", 4}};
	struct crun_ranks r;
	struct crun_worker_ctx w = ctx(3);

	w.role = "trainer";
	env_compute_ranks(nodes, 3, 2, &r);
	cr_assert_eq(env_add_contract(&env, &r, &w), 0);
	expect_var("RANK", "8");
	expect_var("ROLE_RANK", "5");
	expect_var("ROLE_NAME", "trainer");
	expect_var("ROLE_WORLD_SIZE", "6");
	expect_var("WORLD_SIZE", "9");
	expect_var("LOCAL_WORLD_SIZE", "4");
}

/* A restart rebuilds the contract over the same env: values replaced. */
Test(env, contract_twice_replaces)
{
	struct crun_ranks r;
	struct crun_worker_ctx w = ctx(0);
	int n;

	env_compute_ranks(three, 3, 0, &r);
	cr_assert_eq(env_add_contract(&env, &r, &w), 0);
	n = env.n;
	w.restart_count = 3;
	w.master_port = 1234;
	cr_assert_eq(env_add_contract(&env, &r, &w), 0);
	cr_expect_eq(env.n, n);
	expect_var("TORCHELASTIC_RESTART_COUNT", "3");
	expect_var("MASTER_PORT", "1234");
	expect_well_formed(&env);
}

Test(env, contract_overrides_inherited_ranks)
{
	char rank[] = "RANK=99", ws[] = "WORLD_SIZE=1", path[] = "PATH=/bin";
	char *envp[] = {rank, ws, path, NULL};
	struct crun_ranks r;
	struct crun_worker_ctx w = ctx(0);

	env_release(&env);
	cr_assert_eq(env_init(&env, envp), 0);
	env_compute_ranks(three, 3, 2, &r);
	cr_assert_eq(env_add_contract(&env, &r, &w), 0);
	expect_var("RANK", "6");
	expect_var("WORLD_SIZE", "7");
	expect_var("PATH", "/bin");
}

Test(env, nccl_inherited_value_kept)
{
	char a[] = "NCCL_ASYNC_ERROR_HANDLING=0", b[] = "TORCH_NCCL_ASYNC_ERROR_HANDLING=3";
	char *envp[] = {a, b, NULL};
	struct crun_ranks r;
	struct crun_worker_ctx w = ctx(0);

	env_release(&env);
	cr_assert_eq(env_init(&env, envp), 0);
	env_compute_ranks(three, 3, 0, &r);
	cr_assert_eq(env_add_contract(&env, &r, &w), 0);
	expect_var("NCCL_ASYNC_ERROR_HANDLING", "0");
	expect_var("TORCH_NCCL_ASYNC_ERROR_HANDLING", "3");
}

Test(env, omp_num_threads)
{
	struct crun_ranks r;
	struct crun_worker_ctx w = ctx(0);
	char omp[] = "OMP_NUM_THREADS=8";
	char *envp[] = {omp, NULL};

	env_compute_ranks(three, 3, 0, &r);

	/* Unset and nproc > 1: set to 1. */
	w.nproc = 4;
	cr_assert_eq(env_add_contract(&env, &r, &w), 0);
	expect_var("OMP_NUM_THREADS", "1");

	/* Unset and one worker: left unset. */
	env_release(&env);
	cr_assert_eq(env_init(&env, NULL), 0);
	w.nproc = 1;
	cr_assert_eq(env_add_contract(&env, &r, &w), 0);
	cr_expect_null(env_get(&env, "OMP_NUM_THREADS"));

	/* Inherited: kept. */
	env_release(&env);
	cr_assert_eq(env_init(&env, envp), 0);
	w.nproc = 4;
	cr_assert_eq(env_add_contract(&env, &r, &w), 0);
	expect_var("OMP_NUM_THREADS", "8");
}

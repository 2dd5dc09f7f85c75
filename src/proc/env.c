/*
 * Worker environments and rank arithmetic (see env.h). The contract's value
 * formats follow torchrun exactly: decimal integers, "True"/"False".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "crun/env.h"
#include "crun/err.h"

static int env_grow(struct crun_env *e)
{
	char **v;
	int cap;

	if (e->n + 1 < e->cap)
		return 0;
	cap = e->cap ? e->cap * 2 : 64;
	v = realloc(e->v, sizeof(char *) * (size_t)cap);
	if (v == NULL)
		return UV_ENOMEM;
	e->v = v;
	e->cap = cap;
	return 0;
}

int env_init(struct crun_env *e, char *const *envp)
{
	memset(e, 0, sizeof(*e));
	if (env_grow(e))
		return UV_ENOMEM;
	e->v[0] = NULL;
	for (; envp && *envp; envp++)
		if (strchr(*envp, '=') && env_put(e, *envp))
			return UV_ENOMEM;
	return 0;
}

void env_release(struct crun_env *e)
{
	for (int i = 0; i < e->n; i++)
		free(e->v[i]);
	free(e->v);
	memset(e, 0, sizeof(*e));
}

static int env_find(const struct crun_env *e, const char *name, size_t len)
{
	for (int i = 0; i < e->n; i++)
		/* The first byte rules out most names without a call. */
		if ((len == 0 || e->v[i][0] == name[0]) &&
		    strncmp(e->v[i], name, len) == 0 && e->v[i][len] == '=')
			return i;
	return -1;
}

/* Put s ("NAME=value", malloc'd, NAME len bytes long), which e now owns. */
static int env_take(struct crun_env *e, char *s, size_t len)
{
	int i = env_find(e, s, len);

	if (i >= 0) {
		free(e->v[i]);
		e->v[i] = s;
		return 0;
	}
	if (env_grow(e)) {
		free(s);
		return UV_ENOMEM;
	}
	e->v[e->n++] = s;
	e->v[e->n] = NULL;
	return 0;
}

int env_put(struct crun_env *e, const char *assignment)
{
	const char *eq = strchr(assignment, '=');
	char *copy;

	if (eq == NULL || eq == assignment)
		return CRUN_EUSAGE;
	copy = strdup(assignment);
	if (copy == NULL)
		return UV_ENOMEM;
	return env_take(e, copy, (size_t)(eq - assignment));
}

int env_set(struct crun_env *e, const char *name, const char *value)
{
	size_t ln = strlen(name), lv = strlen(value);
	char *s = malloc(ln + lv + 2);

	if (s == NULL)
		return UV_ENOMEM;
	memcpy(s, name, ln);
	s[ln] = '=';
	memcpy(s + ln + 1, value, lv + 1);
	return env_take(e, s, ln);
}

const char *env_get(const struct crun_env *e, const char *name)
{
	size_t len = strlen(name);
	int i = env_find(e, name, len);

	return i < 0 ? NULL : e->v[i] + len + 1;
}

void env_compute_ranks(const struct crun_node_info *nodes, int n,
		       int group_rank, struct crun_ranks *out)
{
	const char *role = nodes[group_rank].role;

	memset(out, 0, sizeof(*out));
	out->group_rank = group_rank;
	out->group_world_size = n;
	out->local_world_size = nodes[group_rank].local_world_size;
	for (int i = 0; i < n; i++) {
		int same = strcmp(nodes[i].role, role) == 0;

		out->world_size += nodes[i].local_world_size;
		if (i < group_rank)
			out->base_rank += nodes[i].local_world_size;
		if (same) {
			out->role_world_size += nodes[i].local_world_size;
			if (i < group_rank)
				out->base_role_rank +=
				    nodes[i].local_world_size;
		}
	}
}

/* A group rank and its role, to order the nodes by role. */
struct role_ix {
	const char *role;
	int g;
};

static int role_ix_cmp(const void *x, const void *y)
{
	const struct role_ix *a = x, *b = y;
	int c = strcmp(a->role, b->role);

	return c != 0 ? c : (a->g > b->g) - (a->g < b->g);
}

int env_compute_all_ranks(const struct crun_node_info *nodes, int n,
			  struct crun_ranks *out)
{
	struct role_ix *ix = calloc(n > 0 ? (size_t)n : 1, sizeof(*ix));
	int base = 0, world = 0;

	if (ix == NULL)
		return -1;
	for (int g = 0; g < n; g++)
		world += nodes[g].local_world_size;
	for (int g = 0; g < n; g++) {
		memset(&out[g], 0, sizeof(out[g]));
		out[g].group_rank = g;
		out[g].group_world_size = n;
		out[g].local_world_size = nodes[g].local_world_size;
		out[g].world_size = world;
		out[g].base_rank = base;
		base += nodes[g].local_world_size;
		ix[g].role = nodes[g].role;
		ix[g].g = g;
	}
	qsort(ix, (size_t)n, sizeof(*ix), role_ix_cmp);
	for (int i = 0, j; i < n; i = j) {
		int sum = 0;

		for (j = i; j < n && strcmp(ix[j].role, ix[i].role) == 0; j++) {
			out[ix[j].g].base_role_rank = sum;
			sum += nodes[ix[j].g].local_world_size;
		}
		for (int k = i; k < j; k++)
			out[ix[k].g].role_world_size = sum;
	}
	free(ix);
	return 0;
}

static int set_int(struct crun_env *e, const char *name, long v)
{
	char buf[24], *p = buf + sizeof(buf);
	unsigned long u = v < 0 ? -(unsigned long)v : (unsigned long)v;

	/* By hand: a worker's environment has a dozen numbers. */
	*--p = '\0';
	do
		*--p = (char)('0' + u % 10);
	while ((u /= 10) > 0);
	if (v < 0)
		*--p = '-';
	return env_set(e, name, p);
}

int env_add_contract(struct crun_env *e, const struct crun_ranks *r,
		     const struct crun_worker_ctx *w)
{
	int rc = 0;

	rc |= set_int(e, "LOCAL_RANK", w->local_rank);
	rc |= set_int(e, "RANK", r->base_rank + w->local_rank);
	rc |= set_int(e, "GROUP_RANK", r->group_rank);
	rc |= set_int(e, "ROLE_RANK", r->base_role_rank + w->local_rank);
	rc |= env_set(e, "ROLE_NAME", w->role);
	rc |= set_int(e, "LOCAL_WORLD_SIZE", r->local_world_size);
	rc |= set_int(e, "WORLD_SIZE", r->world_size);
	rc |= set_int(e, "GROUP_WORLD_SIZE", r->group_world_size);
	rc |= set_int(e, "ROLE_WORLD_SIZE", r->role_world_size);
	rc |= env_set(e, "MASTER_ADDR", w->master_addr);
	rc |= set_int(e, "MASTER_PORT", w->master_port);
	rc |= set_int(e, "TORCHELASTIC_RESTART_COUNT", w->restart_count);
	rc |= set_int(e, "TORCHELASTIC_MAX_RESTARTS", w->max_restarts);
	rc |= env_set(e, "TORCHELASTIC_RUN_ID", w->run_id);
	rc |= env_set(e, "TORCHELASTIC_USE_AGENT_STORE",
		      w->use_agent_store ? "True" : "False");
	rc |= env_set(e, "TORCHELASTIC_ERROR_FILE",
		      w->error_file ? w->error_file : "");
	/* env:// reads it for every client and rank 0's server: a torch
	 * without libuv accepts only 0, whatever the user's shell says. */
	if (w->no_libuv)
		rc |= env_set(e, "USE_LIBUV", "0");
	/*
	 * Inherited values win; otherwise turn async error handling on, under
	 * its current name only, as torchrun 2.x: PyTorch >= 2.2 warns on
	 * every rank about the deprecated NCCL_ASYNC_ERROR_HANDLING.
	 */
	if (env_get(e, "TORCH_NCCL_ASYNC_ERROR_HANDLING") == NULL)
		rc |= env_set(e, "TORCH_NCCL_ASYNC_ERROR_HANDLING", "1");
	if (env_get(e, "OMP_NUM_THREADS") == NULL && w->nproc > 1)
		rc |= env_set(e, "OMP_NUM_THREADS", "1");
	return rc ? UV_ENOMEM : 0;
}

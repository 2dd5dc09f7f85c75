/*
 * libFuzzer target for the rendezvous record parsers (src/rdzv/rdzv_records.c):
 * every value an agent reads from the store. The first byte picks the
 * parser and the round size; the rest is the record. Whatever a parser
 * accepts must hold the invariants rdzv.c relies on (no world of 0, ranks
 * inside their worlds, ports in range, one address per node, fingerprint
 * values of the wire's character set, "assigned" counts in 0..max_nodes
 * (or -1, aborted), env-check lines of printable ASCII, the failure history
 * in round order, exclusions in range, stall records of printable places).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "crun/err.h"
#include "crun/rdzv_records.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/*
 * A role read back from a descriptor (it may be empty: TorchX passes
 * --role '') is written and read again unchanged.
 */
static int role_round_trips(const struct rdzv_descr *d, int nodes)
{
	char buf[RDZV_MAX_RECORD + 1], why[256];
	struct rdzv_descr_in in = {.is_host = 0,
				   .node_rank = d->node_rank,
				   .nproc = d->nproc,
				   .pid = d->pid,
				   .host = d->host,
				   .addr = d->addr,
				   .role = d->role};
	struct rdzv_descr back;
	size_t n = rdzv_format_descr(buf, sizeof(buf), &in);

	return n + 1 < sizeof(buf) &&
	       rdzv_parse_descr(buf, n, nodes, &back, why, sizeof(why)) == 0 &&
	       strcmp(back.role, d->role) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char why[256], addr[256], text[512], env[RDZV_MAX_ENVCHECK + 1];
	struct rdzv_descr d;
	struct crun_ranks k;
	int64_t v;
	int port, kind, nodes, closed;
	char *peers = NULL;

	if (size < 1)
		return 0;
	nodes = 1 + (data[0] >> 3) % 16;
	data++;
	size--;
	switch (data[-1] & 7) {
	case 0:
		if (rdzv_parse_int(data, size, -5, 1000, &v, why,
				   sizeof(why)) == 0 &&
		    (v < -5 || v > 1000))
			abort();
		break;
	case 1:
		if (rdzv_parse_descr(data, size, nodes, &d, why,
				     sizeof(why)) == 0 &&
		    (d.nproc < 1 || d.nproc > RDZV_MAX_NPROC ||
		     d.node_rank < 0 || d.node_rank >= nodes || !*d.host ||
		     !*d.addr || !role_round_trips(&d, nodes)))
			abort();
		break;
	case 2:
		if (rdzv_parse_assign(data, size, nodes, 1 + nodes % 4, &k,
				      why, sizeof(why)) == 0 &&
		    (k.group_world_size != nodes || k.group_rank < 0 ||
		     k.group_rank >= nodes || k.world_size < 1 ||
		     k.base_rank < 0 ||
		     (int64_t)k.base_rank + k.local_world_size >
			 k.world_size ||
		     k.role_world_size < 1 || k.role_world_size > k.world_size))
			abort();
		break;
	case 3: /* the master record, and "assigned" */
		if (rdzv_parse_master(data, size, addr, sizeof(addr), &port, NULL,
				      why, sizeof(why)) == 0 &&
		    (port < 1 || port > 65535 || !*addr))
			abort();
		if (rdzv_parse_assigned(data, size, nodes, &closed, why,
					sizeof(why)) == 0 &&
		    (closed < -1 || closed > nodes))
			abort();
		break;
	case 4:
		if (rdzv_parse_end(data, size, &kind, text, sizeof(text), why,
				   sizeof(why)) == 0 &&
		    (strchr("FJDSXH", kind) == NULL || kind == 0 ||
		     strlen(text) >= sizeof(text)))
			abort();
		break;
	case 5:
		if (rdzv_parse_descr(data, size, nodes, &d, why,
				     sizeof(why)) == 0)
			for (int i = 0; i < FP_NITEMS; i++)
				for (const char *c = d.fp.v[i]; *c; c++)
					if (strchr("._+~-", *c) == NULL &&
					    !(*c >= '0' && *c <= '9') &&
					    !(*c >= 'a' && *c <= 'z') &&
					    !(*c >= 'A' && *c <= 'Z'))
						abort();
		if (rdzv_parse_envcheck(data, size, env, sizeof(env), why,
					sizeof(why)) == 0)
			for (const char *c = env; *c; c++)
				if ((*c < 0x20 && *c != '\n') || *c == 0x7f)
					abort();
		break;
	case 6: { /* an init-diagnosis record (agent/initdiag.c) */
		static struct rdzv_diag g;

		if (rdzv_parse_diag(data, size, nodes, 4 * nodes, &g, why,
				    sizeof(why)) == 0 &&
		    (g.group_rank < 0 || g.group_rank >= nodes ||
		     g.nproc < 1 || g.base_rank < 0 ||
		     g.base_rank + g.nproc > 4 * nodes || !*g.host))
			abort();
		break;
	}
	case 7: { /* exclude_after's failure history and exclusions; a
		   node's stall record (agent/hang.c) */
		struct rdzv_fail f[RDZV_MAX_FAILS];
		struct rdzv_exclusion x[RDZV_MAX_EXCLUDED];
		static struct rdzv_stall_rank sr[64];
		int n;

		if (rdzv_parse_stall(data, size, addr, sizeof(addr), sr, 64, &n,
				     why, sizeof(why)) == 0) {
			if (n < 0 || n > 64 || !*addr)
				abort();
			for (int i = 0; i < n; i++) {
				size_t wl = strlen(sr[i].where);

				if (sr[i].rank < 0 || wl == 0 ||
				    wl > RDZV_MAX_STALL_WHERE)
					abort();
				for (size_t c = 0; c < wl; c++)
					if (sr[i].where[c] < 0x20 ||
					    sr[i].where[c] == 0x7f)
						abort();
			}
		}

		if (rdzv_parse_fails(data, size, f, RDZV_MAX_FAILS, &n, why,
				     sizeof(why)) == 0) {
			if (n < 0 || n > RDZV_MAX_FAILS)
				abort();
			for (int i = 0; i < n; i++)
				if (f[i].round < 0 || !*f[i].host ||
				    !*f[i].addr ||
				    (i > 0 && f[i].round <= f[i - 1].round))
					abort();
		}
		if (rdzv_parse_excluded(data, size, x, RDZV_MAX_EXCLUDED, &n,
					why, sizeof(why)) == 0) {
			if (n < 0 || n > RDZV_MAX_EXCLUDED)
				abort();
			for (int i = 0; i < n; i++)
				if (x[i].until < 0 || x[i].round < 0 ||
				    x[i].fails < 1 ||
				    x[i].fails > RDZV_MAX_FAILS || !*x[i].host)
					abort();
		}
		break;
	}
	default:
		if (rdzv_parse_addrs(data, size, nodes, &peers, why,
				     sizeof(why)) == 0) {
			if (peers == NULL || strlen(peers) != size)
				abort();
			free(peers);
		}
		break;
	}
	return 0;
}

/*
 * Where each worker runs: a CPU set and a memory policy per local rank,
 * computed with hwloc from the GPUs' PCI locality (when the node has at
 * least as many GPUs as workers) or from the NUMA layout otherwise, always
 * inside the mask the agent started with (a SLURM cpuset, taskset).
 *
 * Modes, torchrun 2.8's --numa-binding names and meanings, plus crun's
 * --cpu_bind=auto:
 *
 *   node          the CPUs of the worker's NUMA node; memory preferred there
 *   socket        the CPUs of the node's socket; memory preferred on its nodes
 *   exclusive     the node's physical cores split among its visible GPUs
 *                 (the lowest get one extra); memory preferred on the node
 *   core-complex  one last-level-cache complex of the node per GPU (largest
 *                 first, round robin); memory preferred on the node
 *   auto          the cores of the worker's node split fairly among the
 *                 workers on that node; the memory policy is left alone
 *
 * The plan is computed in the agent, before any fork; the child applies it
 * between fork and exec (proc.h's cpus/mpol options).
 */
#ifndef CRUN_BINDING_H
#define CRUN_BINDING_H

#include <sched.h>
#include <stddef.h>

enum crun_bind_mode {
	CRUN_BIND_NONE,
	CRUN_BIND_NODE,
	CRUN_BIND_SOCKET,
	CRUN_BIND_EXCLUSIVE,
	CRUN_BIND_CORE_COMPLEX,
	CRUN_BIND_AUTO
};

/* Memory nodes a plan can name (set_mempolicy's nodemask). */
#define CRUN_BIND_MAX_NODES 1024
#define CRUN_BIND_NODE_WORDS (CRUN_BIND_MAX_NODES / (8 * sizeof(unsigned long)))

/** One worker's binding. */
struct crun_binding {
	int local_rank;
	int gpu;	     /* GPU index it follows, -1: the NUMA layout */
	char gpu_busid[16];  /* its PCI address, "" without a GPU */
	int numa;	     /* the NUMA node (os index) it belongs to */
	cpu_set_t cpus;	     /* what sched_setaffinity gets */
	char cpus_list[256]; /* the same as a list: "0-7,16-23" */
	int mpol;	     /* 0: leave it; MPOL_PREFERRED(_MANY) */
	unsigned long nodes[CRUN_BIND_NODE_WORDS]; /* the policy's nodes */
	int first_node;	     /* MPOL_PREFERRED fallback of _MANY */
	char nodes_list[64]; /* the NUMA node(s), as a list */
	int fallback;	     /* 1: the starting mask (nothing inside it) */
};

struct crun_binding_plan {
	enum crun_bind_mode mode;
	int n;			/* workers */
	struct crun_binding *w; /* n of them, by local rank */
	char source[128];	/* "4 GPUs by PCI locality", "NUMA layout" */
	char notes[1024];	/* warnings, one per line, or "" */
};

/** Where the plan's inputs come from; NULL fields: this system. */
struct crun_binding_src {
	const char *xml;       /* hwloc XML export (else HWLOC_XMLFILE) */
	const char *synthetic; /* hwloc synthetic description */
	const char *mask;      /* CPUs usable ("0-7"); else our affinity */
	const char *mems;      /* memory nodes usable; else the kernel's */
	const char *visible;   /* CUDA_VISIBLE_DEVICES-style list, or NULL */
};

/** The mode named by --numa_binding / --cpu_bind values; -1: unknown. */
int binding_mode_parse(const char *numa_binding, const char *cpu_bind);

/** "node", "socket", ..., "auto", "none". */
const char *binding_mode_name(enum crun_bind_mode mode);

/**
 * Compute the binding of n workers. 0 with *out set (free it with
 * binding_plan_free), or a negative error with a one-line errmsg (an
 * unreadable topology, a bad mask, fewer cores than GPUs for exclusive).
 */
int binding_plan_new(enum crun_bind_mode mode, int n,
		     const struct crun_binding_src *src,
		     struct crun_binding_plan **out, char *errmsg,
		     size_t errlen);

/**
 * The plan for this system: hwloc's topology (HWLOC_XMLFILE and
 * HWLOC_SYNTHETIC are honoured), our cpu affinity (CRUN_BINDING_MASK, a
 * list, replaces it: to plan for another node's mask) and the GPU
 * visibility list (CUDA_VISIBLE_DEVICES, else HIP_/ROCR_VISIBLE_DEVICES).
 */
int binding_plan_system(enum crun_bind_mode mode, int n,
			struct crun_binding_plan **out, char *errmsg,
			size_t errlen);

void binding_plan_free(struct crun_binding_plan *plan);

/** "preferred", "preferred-many" or "unchanged". */
const char *binding_mpol_name(const struct crun_binding *b);

/** One line for a worker: "local rank 0: cpus 0-7 numa 0 (gpu 0 ...)". */
void binding_describe(const struct crun_binding_plan *plan, int local_rank,
		      char *buf, size_t len);

#endif

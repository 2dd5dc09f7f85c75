/*
 * The binding plan over hwloc topologies that are not this machine: the
 * synthetic 2 sockets x 2 NUMA nodes x 8 cores, and XML exports with GPUs on
 * given NUMA nodes (tests/data/hwloc/, made by gen.py with lstopo), for
 * every mode, a restricted starting mask, restricted memory nodes, a GPU
 * visibility list and a topology without NUMA information.
 */
#include <criterion/criterion.h>
#include <linux/mempolicy.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crun/binding.h"
#include "crun/err.h"
#include "crun/proc.h"

#define DATA "tests/data/hwloc/"
#define SYN_2S2N8C "pack:2 group:2 [numa] l3:2 core:4 pu:2"

static struct crun_binding_plan *plan;
static char err[512];

static void teardown(void)
{
	binding_plan_free(plan);
	plan = NULL;
}

TestSuite(binding, .fini = teardown);

/* Plan n workers in mode; src fields default to "everything usable". */
static int make(enum crun_bind_mode mode, int n, const char *xml,
		const char *syn, const char *mask, const char *mems,
		const char *visible)
{
	struct crun_binding_src src = {xml, syn, mask ? mask : "0-1023",
				       mems ? mems : "0-63", visible};

	err[0] = '\0';
	binding_plan_free(plan);
	plan = NULL;
	return binding_plan_new(mode, n, &src, &plan, err, sizeof(err));
}

/* Each worker's cpus, as "list|list|...". */
static const char *cpus(void)
{
	static char buf[1024];

	buf[0] = '\0';
	for (int i = 0; i < plan->n; i++) {
		if (i)
			strcat(buf, "|");
		strcat(buf, plan->w[i].cpus_list);
	}
	return buf;
}

static const char *nodes(void)
{
	static char buf[1024];

	buf[0] = '\0';
	for (int i = 0; i < plan->n; i++) {
		if (i)
			strcat(buf, "|");
		strcat(buf, plan->w[i].nodes_list);
	}
	return buf;
}

Test(binding, mode_names)
{
	cr_assert_eq(binding_mode_parse("node", NULL), CRUN_BIND_NODE);
	cr_assert_eq(binding_mode_parse("socket", "none"), CRUN_BIND_SOCKET);
	cr_assert_eq(binding_mode_parse("exclusive", NULL),
		     CRUN_BIND_EXCLUSIVE);
	cr_assert_eq(binding_mode_parse("core-complex", NULL),
		     CRUN_BIND_CORE_COMPLEX);
	cr_assert_eq(binding_mode_parse("core_complex", NULL), -1);
	cr_assert_eq(binding_mode_parse(NULL, "auto"), CRUN_BIND_AUTO);
	cr_assert_eq(binding_mode_parse(NULL, "none"), CRUN_BIND_NONE);
	cr_assert_eq(binding_mode_parse(NULL, NULL), CRUN_BIND_NONE);
	cr_assert_eq(binding_mode_parse(NULL, "yes"), -1);
	cr_assert_str_eq(binding_mode_name(CRUN_BIND_CORE_COMPLEX),
			 "core-complex");
}

/* No GPU: ranks fill the NUMA nodes in blocks. */
Test(binding, synthetic_node)
{
	cr_assert_eq(make(CRUN_BIND_NODE, 4, NULL, SYN_2S2N8C, 0, 0, 0), 0,
		     "%s", err);
	cr_assert_str_eq(cpus(), "0-15|16-31|32-47|48-63");
	cr_assert_str_eq(nodes(), "0|1|2|3");
	for (int i = 0; i < 4; i++) {
		cr_assert_eq(plan->w[i].mpol, MPOL_PREFERRED);
		cr_assert_eq(plan->w[i].gpu, -1);
		cr_assert_eq(plan->w[i].nodes[0], 1UL << i);
		cr_assert_eq(CPU_COUNT(&plan->w[i].cpus), 16);
		cr_assert(CPU_ISSET(16 * i, &plan->w[i].cpus));
		cr_assert(!CPU_ISSET(16 * i + 16, &plan->w[i].cpus));
	}
	cr_assert_str_eq(plan->notes, "");
	cr_assert(strstr(plan->source, "NUMA layout"));
}

Test(binding, synthetic_socket)
{
	cr_assert_eq(make(CRUN_BIND_SOCKET, 4, NULL, SYN_2S2N8C, 0, 0, 0), 0,
		     "%s", err);
	cr_assert_str_eq(cpus(), "0-31|0-31|32-63|32-63");
	cr_assert_str_eq(nodes(), "0-1|0-1|2-3|2-3");
	cr_assert_eq(plan->w[2].mpol, MPOL_PREFERRED_MANY);
	cr_assert_eq(plan->w[2].nodes[0], 0xcUL);
	cr_assert_eq(plan->w[2].first_node, 2);
}

/* Two workers a node share its 8 cores (2 PUs each): 4 cores apiece. */
Test(binding, synthetic_exclusive_smt)
{
	cr_assert_eq(make(CRUN_BIND_EXCLUSIVE, 8, NULL, SYN_2S2N8C, 0, 0, 0),
		     0, "%s", err);
	cr_assert_str_eq(cpus(),
			 "0-7|8-15|16-23|24-31|32-39|40-47|48-55|56-63");
	cr_assert_str_eq(nodes(), "0|0|1|1|2|2|3|3");
}

/* Three a node: 8 cores split 3, 3, 2 (the lowest get the extra one). */
Test(binding, synthetic_exclusive_uneven)
{
	cr_assert_eq(make(CRUN_BIND_EXCLUSIVE, 12, NULL, SYN_2S2N8C, 0, 0, 0),
		     0, "%s", err);
	cr_assert_str_eq(plan->w[0].cpus_list, "0-5");
	cr_assert_str_eq(plan->w[1].cpus_list, "6-11");
	cr_assert_str_eq(plan->w[2].cpus_list, "12-15");
	cr_assert_str_eq(plan->w[11].cpus_list, "60-63");
}

Test(binding, synthetic_core_complex)
{
	cr_assert_eq(
	    make(CRUN_BIND_CORE_COMPLEX, 8, NULL, SYN_2S2N8C, 0, 0, 0), 0,
	    "%s", err);
	cr_assert_str_eq(cpus(),
			 "0-7|8-15|16-23|24-31|32-39|40-47|48-55|56-63");
}

/* auto never touches the memory policy. */
Test(binding, synthetic_auto)
{
	cr_assert_eq(make(CRUN_BIND_AUTO, 6, NULL, SYN_2S2N8C, 0, 0, 0), 0,
		     "%s", err);
	cr_assert_str_eq(cpus(), "0-7|8-15|16-31|32-39|40-47|48-63");
	for (int i = 0; i < 6; i++)
		cr_assert_eq(plan->w[i].mpol, 0);
}

/* More workers than cores: auto splits PUs, then shares them. */
Test(binding, auto_more_workers_than_cores)
{
	cr_assert_eq(make(CRUN_BIND_AUTO, 3, NULL, "core:1 pu:2", 0, 0, 0), 0,
		     "%s", err);
	cr_assert_str_eq(cpus(), "0|1|0");
	cr_assert_eq(make(CRUN_BIND_AUTO, 2, NULL, "core:1 pu:2", 0, 0, 0), 0,
		     "%s", err);
	cr_assert_str_eq(cpus(), "0|1");
}

/* The 8-GPU node: GPUs in PCI order (not the XML's), the BMC's VGA left
 * out, each rank on its GPU's node. */
Test(binding, gpus_node)
{
	cr_assert_eq(make(CRUN_BIND_NODE, 8, DATA "8gpu.xml", 0, 0, 0, 0), 0,
		     "%s", err);
	cr_assert_str_eq(plan->source, "8 GPUs by PCI locality");
	cr_assert_str_eq(cpus(),
			 "0-7|0-7|8-15|8-15|16-23|16-23|24-31|24-31");
	cr_assert_str_eq(nodes(), "0|0|1|1|2|2|3|3");
	cr_assert_str_eq(plan->w[0].gpu_busid, "0000:07:00.0");
	cr_assert_str_eq(plan->w[1].gpu_busid, "0000:0f:00.0");
	cr_assert_str_eq(plan->w[7].gpu_busid, "0000:bd:00.0");
	cr_assert_eq(plan->w[5].gpu, 5);
}

Test(binding, gpus_socket)
{
	cr_assert_eq(make(CRUN_BIND_SOCKET, 8, DATA "8gpu.xml", 0, 0, 0, 0),
		     0, "%s", err);
	cr_assert_str_eq(cpus(),
			 "0-15|0-15|0-15|0-15|16-31|16-31|16-31|16-31");
	cr_assert_str_eq(nodes(), "0-1|0-1|0-1|0-1|2-3|2-3|2-3|2-3");
}

Test(binding, gpus_exclusive)
{
	cr_assert_eq(
	    make(CRUN_BIND_EXCLUSIVE, 8, DATA "8gpu.xml", 0, 0, 0, 0), 0,
	    "%s", err);
	cr_assert_str_eq(cpus(),
			 "0-3|4-7|8-11|12-15|16-19|20-23|24-27|28-31");
	cr_assert_eq(plan->w[3].mpol, MPOL_PREFERRED);
	cr_assert_eq(plan->w[3].nodes[0], 2UL);
}

/* exclusive splits among the node's visible GPUs even when fewer workers
 * run (torchrun counts every visible GPU), in ordinal order. */
Test(binding, gpus_exclusive_counts_gpus)
{
	cr_assert_eq(make(CRUN_BIND_EXCLUSIVE, 1, DATA "8gpu.xml", 0, 0, 0, 0),
		     0, "%s", err);
	cr_assert_str_eq(cpus(), "0-3"); /* GPU 1 is visible, idle */
	cr_assert_eq(make(CRUN_BIND_EXCLUSIVE, 2, DATA "8gpu.xml", 0, 0, 0,
			  "1,0"),
		     0, "%s", err);
	cr_assert_str_eq(cpus(), "0-3|4-7"); /* ordinal 0 is GPU 1 */
	cr_assert_eq(plan->w[0].gpu, 1);
	cr_assert_eq(make(CRUN_BIND_EXCLUSIVE, 1, DATA "8gpu.xml", 0, 0, 0,
			  "1"),
		     0, "%s", err);
	cr_assert_str_eq(cpus(), "0-7"); /* GPU 1 alone in the plan */
	cr_assert_eq(make(CRUN_BIND_EXCLUSIVE, 2, DATA "8gpu.xml", 0, 0, 0,
			  "0,1"),
		     0, "%s", err);
	cr_assert_str_eq(cpus(), "0-3|4-7");
}

Test(binding, gpus_core_complex)
{
	cr_assert_eq(
	    make(CRUN_BIND_CORE_COMPLEX, 8, DATA "8gpu.xml", 0, 0, 0, 0), 0,
	    "%s", err);
	cr_assert_str_eq(cpus(),
			 "0-3|4-7|8-11|12-15|16-19|20-23|24-27|28-31");
}

/* Complexes go largest first: with 0-1 outside the mask, L3 #1 (4-7) is
 * the first GPU's, the rest of L3 #0 (2-3) the second's. */
Test(binding, gpus_core_complex_largest_first)
{
	cr_assert_eq(make(CRUN_BIND_CORE_COMPLEX, 2, DATA "8gpu.xml", 0,
			  "2-31", 0, 0),
		     0, "%s", err);
	cr_assert_str_eq(cpus(), "4-7|2-3");
}

Test(binding, gpus_auto)
{
	cr_assert_eq(make(CRUN_BIND_AUTO, 8, DATA "8gpu.xml", 0, 0, 0, 0), 0,
		     "%s", err);
	cr_assert_str_eq(cpus(),
			 "0-3|4-7|8-11|12-15|16-19|20-23|24-27|28-31");
	cr_assert_eq(plan->w[0].mpol, 0);
}

/* auto splits among the workers on the node, not the GPUs. */
Test(binding, gpus_auto_counts_workers)
{
	cr_assert_eq(make(CRUN_BIND_AUTO, 1, DATA "8gpu.xml", 0, 0, 0, "1"),
		     0, "%s", err);
	cr_assert_str_eq(cpus(), "0-7");
}

Test(binding, visible_list)
{
	cr_assert_eq(make(CRUN_BIND_NODE, 2, DATA "8gpu.xml", 0, 0, 0, "6,7"),
		     0, "%s", err);
	cr_assert_str_eq(cpus(), "24-31|24-31");
	cr_assert_eq(plan->w[0].gpu, 6);
	/* UUIDs: PCI order, with a note. */
	cr_assert_eq(make(CRUN_BIND_NODE, 2, DATA "8gpu.xml", 0, 0, 0,
			  "GPU-8a1b,GPU-77"),
		     0, "%s", err);
	cr_assert_str_eq(cpus(), "0-7|0-7");
	cr_assert(strstr(plan->notes, "CUDA_VISIBLE_DEVICES"));
	/* Empty: no GPU is visible, the NUMA layout. */
	cr_assert_eq(make(CRUN_BIND_NODE, 2, DATA "8gpu.xml", 0, 0, 0, ""), 0,
		     "%s", err);
	cr_assert_eq(plan->w[0].gpu, -1);
	cr_assert_str_eq(cpus(), "0-7|16-23");
}

/* Fewer GPUs than workers: the NUMA layout, said in a note. */
Test(binding, more_workers_than_gpus)
{
	cr_assert_eq(make(CRUN_BIND_NODE, 16, DATA "8gpu.xml", 0, 0, 0, 0), 0,
		     "%s", err);
	cr_assert_eq(plan->w[0].gpu, -1);
	cr_assert(strstr(plan->notes, "16 workers but 8 GPUs"));
	cr_assert_str_eq(plan->w[4].cpus_list, "8-15");
}

/* GPU locality beats NUMA order: the first GPU by bus id is on node 1. */
Test(binding, gpu_locality_small)
{
	cr_assert_eq(
	    make(CRUN_BIND_NODE, 2, DATA "2n1c-2gpu.xml", 0, "0-1", 0, 0), 0,
	    "%s", err);
	cr_assert_str_eq(cpus(), "1|0");
	cr_assert_str_eq(nodes(), "1|0");
}

/* A restricted starting mask: bound inside it; nothing inside: the mask. */
Test(binding, restricted_mask)
{
	cr_assert_eq(
	    make(CRUN_BIND_NODE, 8, DATA "8gpu.xml", 0, "4-11", 0, 0), 0,
	    "%s", err);
	cr_assert_str_eq(cpus(), "4-7|4-7|8-11|8-11|4-11|4-11|4-11|4-11");
	cr_assert_eq(plan->w[0].fallback, 0);
	cr_assert_eq(plan->w[4].fallback, 1);
	cr_assert(strstr(plan->notes, "local rank 4: no cpu of numa node 2"));
	cr_assert_eq(make(CRUN_BIND_AUTO, 4, NULL, SYN_2S2N8C, "1-2,33", 0, 0),
		     0, "%s", err);
	/* Only nodes with usable cpus take workers; one cpu, shared. */
	cr_assert_str_eq(cpus(), "1|2|33|33");
}

/* The starting mask holds no cpu of the topology: all of it, noted. */
Test(binding, mask_outside_topology)
{
	cr_assert_eq(make(CRUN_BIND_NODE, 2, NULL, "core:4 pu:1", "100-101",
			  0, 0),
		     0, "%s", err);
	cr_assert_str_eq(cpus(), "0-3|0-3");
	cr_assert(strstr(plan->notes, "no cpu of the starting mask"));
}

/* exclusive on a node with no usable cpu: the starting mask, not an error;
 * socket still finds the rest of its socket. */
Test(binding, exclusive_node_outside_mask)
{
	cr_assert_eq(make(CRUN_BIND_EXCLUSIVE, 4, DATA "8gpu.xml", 0, "8-31",
			  0, 0),
		     0, "%s", err);
	cr_assert_str_eq(cpus(), "8-31|8-31|8-11|12-15");
	cr_assert_eq(make(CRUN_BIND_SOCKET, 2, DATA "8gpu.xml", 0, "8-31", 0,
			  0),
		     0, "%s", err);
	cr_assert_str_eq(cpus(), "8-15|8-15");
	cr_assert_eq(plan->w[0].fallback, 0);
}

Test(binding, exclusive_too_few_cores)
{
	cr_assert_eq(make(CRUN_BIND_EXCLUSIVE, 8, DATA "8gpu.xml", 0,
			  "0,8-31", 0, 0),
		     CRUN_ECONFIG);
	cr_assert(strstr(err, "numa node 0 has 1 usable physical cores for "
			      "2 GPUs"),
		  "%s", err);
}

/* Memory nodes we may not use: no policy, and a note. */
Test(binding, restricted_mems)
{
	cr_assert_eq(make(CRUN_BIND_NODE, 4, NULL, SYN_2S2N8C, 0, "0", 0), 0,
		     "%s", err);
	cr_assert_eq(plan->w[0].mpol, MPOL_PREFERRED);
	cr_assert_eq(plan->w[1].mpol, 0);
	cr_assert(strstr(plan->notes, "local rank 1: numa node(s) 1 outside"));
}

/* No NUMA information: one node; cpus split, memory left alone. */
Test(binding, no_numa)
{
	cr_assert_eq(make(CRUN_BIND_NODE, 2, NULL, "core:4 pu:1", 0, 0, 0), 0,
		     "%s", err);
	cr_assert_str_eq(cpus(), "0-3|0-3");
	cr_assert_eq(plan->w[0].mpol, 0);
	cr_assert_eq(make(CRUN_BIND_EXCLUSIVE, 2, NULL, "core:4 pu:1", 0, 0, 0),
		     0, "%s", err);
	cr_assert_str_eq(cpus(), "0-1|2-3");
	cr_assert_eq(make(CRUN_BIND_CORE_COMPLEX, 2, NULL, "core:4 pu:1", 0, 0,
			  0),
		     0, "%s", err);
	cr_assert_str_eq(cpus(), "0-3|0-3"); /* no cache: one complex */
	cr_assert_eq(make(CRUN_BIND_SOCKET, 2, NULL, "core:4 pu:1", 0, 0, 0),
		     0, "%s", err);
	cr_assert_str_eq(cpus(), "0-3|0-3");
}

Test(binding, bad_inputs)
{
	cr_assert_eq(make(CRUN_BIND_NODE, 2, NULL, SYN_2S2N8C, "0-x", 0, 0),
		     CRUN_ECONFIG);
	cr_assert(strstr(err, "starting cpu mask: '0-x'"), "%s", err);
	cr_assert_eq(make(CRUN_BIND_NODE, 2, NULL, SYN_2S2N8C, 0, "", 0),
		     CRUN_ECONFIG);
	cr_assert(strstr(err, "memory node list"), "%s", err);
	cr_assert_eq(make(CRUN_BIND_NODE, 2, DATA "missing.xml", 0, 0, 0, 0),
		     CRUN_ECONFIG);
	cr_assert(strstr(err, "missing.xml"), "%s", err);
	cr_assert_eq(make(CRUN_BIND_NODE, 2, NULL, "pack:x", 0, 0, 0),
		     CRUN_ECONFIG);
	cr_assert(strstr(err, "cannot load the hwloc topology"), "%s", err);
}

Test(binding, describe)
{
	char line[512];

	cr_assert_eq(make(CRUN_BIND_NODE, 8, DATA "8gpu.xml", 0, 0, 0, 0), 0,
		     "%s", err);
	binding_describe(plan, 2, line, sizeof(line));
	cr_assert_str_eq(line, "local rank 2: cpus 8-15 numa 1 memory "
			       "preferred gpu 2 (0000:47:00.0)");
}

/* This system's plan honours hwloc's HWLOC_XMLFILE, CRUN_BINDING_MASK and
 * CUDA_VISIBLE_DEVICES. */
Test(binding, system_env)
{
	setenv("HWLOC_XMLFILE", DATA "8gpu.xml", 1);
	setenv("HWLOC_THISSYSTEM", "1", 1);
	setenv("CRUN_BINDING_MASK", "0-31", 1);
	setenv("CUDA_VISIBLE_DEVICES", "2,3", 1);
	cr_assert_eq(binding_plan_system(CRUN_BIND_EXCLUSIVE, 2, &plan, err,
					 sizeof(err)),
		     0, "%s", err);
	cr_assert_str_eq(cpus(), "8-11|12-15");
	binding_plan_free(plan);
	plan = NULL;
	setenv("CRUN_BINDING_MASK", "9-10", 1);
	unsetenv("CUDA_VISIBLE_DEVICES");
	cr_assert_eq(binding_plan_system(CRUN_BIND_NODE, 2, &plan, err,
					 sizeof(err)),
		     0, "%s", err);
	cr_assert_str_eq(cpus(), "9-10|9-10"); /* GPUs 0-1: node 0 */
	cr_assert_eq(plan->w[0].fallback, 1);
	unsetenv("HWLOC_XMLFILE");
	unsetenv("CRUN_BINDING_MASK");
}

static void on_bound_exit(struct crun_proc *p, int status, int sig)
{
	*(int *)proc_data(p) = status;
}

/* The child applies the binding before exec; a refusal fails the spawn with
 * the binding's own code and no program runs. */
static int spawn_bound(const cpu_set_t *set, int mpol,
		       const unsigned long *nodes, int *status)
{
	char *argv[] = {(char *)"/bin/sh", (char *)"-c",
			(char *)"exit $(grep -c '^Cpus_allowed_list:[[:space:]]*0$' "
				"/proc/$$/status)",
			NULL};
	uv_loop_t loop;
	struct crun_procs *r;
	struct crun_proc *p;
	struct proc_opts o;
	int rc;

	cr_assert_eq(uv_loop_init(&loop), 0);
	cr_assert_eq(procs_new(&loop, &r), 0);
	memset(&o, 0, sizeof(o));
	o.argv = argv;
	o.fd_in = o.fd_out = o.fd_err = -1;
	o.exit_cb = on_bound_exit;
	o.data = status;
	o.cpus = set;
	o.mpol = mpol;
	o.mpol_nodes = nodes;
	o.mpol_maxnode = CRUN_BIND_MAX_NODES;
	o.mpol_first = 0;
	*status = -1;
	rc = proc_spawn(r, &o, &p);
	while (rc == 0 && (*status < 0 || procs_live(r) > 0))
		uv_run(&loop, UV_RUN_ONCE);
	procs_close(r, NULL, NULL);
	uv_run(&loop, UV_RUN_DEFAULT);
	cr_assert_eq(uv_loop_close(&loop), 0);
	return rc;
}

Test(binding, applied_in_child)
{
	unsigned long nodes[CRUN_BIND_NODE_WORDS] = {1UL}; /* node 0 */
	unsigned long far[CRUN_BIND_NODE_WORDS] = {0};
	cpu_set_t set;
	int status;

	CPU_ZERO(&set);
	CPU_SET(0, &set);
	cr_assert_eq(spawn_bound(&set, MPOL_PREFERRED, nodes, &status), 0);
	cr_assert_eq(status, 1, "the child runs on cpu 0 alone");
	/* No such cpu: the kernel refuses, the spawn says so. */
	CPU_ZERO(&set);
	CPU_SET(CPU_SETSIZE - 1, &set);
	cr_assert_eq(spawn_bound(&set, 0, NULL, &status), CRUN_ECPUBIND);
	cr_assert_eq(status, -1, "nothing ran");
	/* No such memory node. */
	far[CRUN_BIND_NODE_WORDS - 1] = 1UL << 3;
	cr_assert_eq(spawn_bound(NULL, MPOL_PREFERRED, far, &status),
		     CRUN_EMEMBIND);
	cr_assert_str_eq(crun_strerror(CRUN_ECPUBIND),
			 "the kernel refused the cpu binding");
}

/*
 * SLURM environments -> what crun derives, and the pitfalls it warns about.
 * The base environments are trimmed copies of what Slurm 22.05 really set
 * (tests/integration/slurm_single.sh prints the same variables).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "crun/err.h"
#include "crun/slurm.h"

/* An envp built from a base plus overrides ("NAME=" alone removes NAME). */
struct env {
	char *v[64];
	char buf[64][256];
	int n;
};

static void env_set(struct env *e, const char *kv)
{
	size_t nl = strcspn(kv, "=");

	for (int i = 0; i < e->n; i++)
		if (strncmp(e->buf[i], kv, nl + 1) == 0) {
			if (kv[nl + 1] == '\0') { /* remove */
				memmove(&e->buf[i], &e->buf[i + 1],
					(size_t)(e->n - i - 1) * sizeof(e->buf[0]));
				e->n--;
			} else {
				snprintf(e->buf[i], sizeof(e->buf[i]), "%s", kv);
			}
			goto done;
		}
	if (kv[nl] == '=' && kv[nl + 1] != '\0')
		snprintf(e->buf[e->n++], sizeof(e->buf[0]), "%s", kv);
done:
	for (int i = 0; i < e->n; i++)
		e->v[i] = e->buf[i];
	e->v[e->n] = NULL;
}

static void env_build(struct env *e, const char *const *base,
		      const char *const *over)
{
	e->n = 0;
	e->v[0] = NULL;
	for (; base && *base; base++)
		env_set(e, *base);
	for (; over && *over; over++)
		env_set(e, *over);
}

/* srun -N2 --ntasks-per-node=1 in a 2-node job (what slurm.sbatch runs). */
static const char *const step2[] = {
	"SLURM_JOB_ID=4242",	     "SLURM_JOBID=4242",
	"SLURM_JOB_NODELIST=n[1-2]", "SLURM_NODELIST=n[1-2]",
	"SLURM_JOB_NUM_NODES=2",     "SLURM_NNODES=2",
	"SLURM_STEP_ID=0",	     "SLURM_STEPID=0",
	"SLURM_STEP_NODELIST=n[1-2]", "SLURM_STEP_NUM_NODES=2",
	"SLURM_STEP_NUM_TASKS=2",    "SLURM_STEP_TASKS_PER_NODE=1(x2)",
	"SLURM_TASKS_PER_NODE=1(x2)", "SLURM_NTASKS=2",
	"SLURM_NODEID=1",	     "SLURM_PROCID=1",
	"SLURM_LOCALID=0",	     "SLURMD_NODENAME=n2",
	"SLURM_CPUS_ON_NODE=8",	     "PATH=/usr/bin",
	NULL,
};

/* The batch shell of sbatch -N1 -n3. */
static const char *const batch1[] = {
	"SLURM_JOB_ID=2",	  "SLURM_JOBID=2",	 "SLURM_JOB_NODELIST=vm",
	"SLURM_NODELIST=vm",	  "SLURM_JOB_NUM_NODES=1", "SLURM_NNODES=1",
	"SLURM_NODEID=0",	  "SLURM_PROCID=0",	 "SLURM_LOCALID=0",
	"SLURM_NTASKS=3",	  "SLURM_TASKS_PER_NODE=3", "SLURMD_NODENAME=vm",
	"SLURM_CPUS_ON_NODE=3",	  NULL,
};

static struct crun_slurm detect_ok(const char *const *base,
				   const char *const *over)
{
	struct env e;
	struct crun_slurm s;
	char err[256] = "";
	int rc;

	env_build(&e, base, over);
	rc = slurm_detect(e.v, &s, err, sizeof(err));
	cr_assert_eq(rc, 0, "slurm_detect: %s (%s)", err, crun_err_name(rc));
	return s;
}

static void detect_err(const char *const *base, const char *const *over,
		       const char *needle)
{
	struct env e;
	struct crun_slurm s;
	char err[256] = "";

	env_build(&e, base, over);
	cr_expect_eq(slurm_detect(e.v, &s, err, sizeof(err)), CRUN_ECONFIG);
	cr_expect(strstr(err, needle) != NULL, "message '%s' lacks '%s'", err,
		  needle);
}

static int has_warn(const struct crun_slurm *s, const char *needle)
{
	for (int i = 0; i < s->nwarn; i++)
		if (strstr(s->warn[i], needle) != NULL)
			return 1;
	return 0;
}

Test(slurm, not_in_slurm)
{
	static const char *const none[] = { "PATH=/usr/bin", NULL };
	static const char *const only_job[] = { "SLURM_JOB_ID=5", NULL };
	struct crun_slurm s;
	char err[8];

	s = detect_ok(none, NULL);
	cr_expect_eq(s.in_slurm, 0);
	s = detect_ok(only_job, NULL);
	cr_expect_eq(s.in_slurm, 0, "a job id alone (salloc shell) is not a "
				    "step");
	cr_expect_eq(slurm_detect(NULL, &s, err, sizeof(err)), 0);
	cr_expect_eq(s.in_slurm, 0);
}

Test(slurm, step_two_nodes)
{
	struct crun_slurm s = detect_ok(step2, NULL);

	cr_expect_eq(s.in_slurm, 1);
	cr_expect_eq(s.in_step, 1);
	cr_expect_str_eq(s.job_id, "4242");
	cr_expect_eq(s.nnodes, 2);
	cr_expect_eq(s.node_rank, 1);
	cr_expect_eq(s.tasks_here, 1);
	cr_expect_str_eq(s.host, "n1");
	cr_expect_eq(s.port, 20000 + 4242);
	cr_expect_str_eq(s.endpoint, "n1:24242");
	cr_expect_str_eq(s.nproc_spec, "cpu");
	cr_expect_eq(s.nproc, 0);
	cr_expect_eq(s.nwarn, 0, "unexpected warning: %s", s.warn[0]);
	cr_expect_str_eq(s.why_rdzv_id, "SLURM_JOB_ID=4242");
	cr_expect_str_eq(s.why_nnodes, "SLURM_STEP_NUM_NODES=2");
	cr_expect_str_eq(s.why_node_rank, "SLURM_NODEID=1");
	cr_expect(strstr(s.why_endpoint, "SLURM_STEP_NODELIST=n[1-2]") != NULL,
		  "%s", s.why_endpoint);
	cr_expect(strstr(s.why_nproc, "CRUN_SLURM_TASKS_PER_NODE") != NULL,
		  "%s", s.why_nproc);
}

Test(slurm, port_formula)
{
	cr_expect_eq(slurm_port(0), 20000);
	cr_expect_eq(slurm_port(9999), 29999);
	cr_expect_eq(slurm_port(10000), 20000);
	cr_expect_eq(slurm_port(123456), 23456);
	/* Jobs sharing a node never collide while their ids lie within one
	 * span of each other: every port of a window of SPAN consecutive ids
	 * is distinct (checked for every pair, not only neighbours), and below
	 * the kernel's ephemeral range. Ids SPAN apart do share a port. */
	unsigned long starts[] = {0, 1000, 9999, 123456, 4294960000UL};
	for (size_t s = 0; s < sizeof(starts) / sizeof(starts[0]); s++) {
		static unsigned char seen[32768];

		memset(seen, 0, sizeof(seen));
		for (unsigned long j = starts[s];
		     j < starts[s] + CRUN_SLURM_PORT_SPAN; j++) {
			int p = slurm_port(j);

			cr_assert(p >= 1024 && p < 32768, "job %lu: port %d", j, p);
			cr_assert(!seen[p], "jobs within %d of %lu share port %d",
				  CRUN_SLURM_PORT_SPAN, starts[s], p);
			seen[p] = 1;
		}
		cr_expect_eq(slurm_port(starts[s]),
			     slurm_port(starts[s] + CRUN_SLURM_PORT_SPAN));
	}
}

Test(slurm, legacy_names)
{
	static const char *const legacy[] = {
		"SLURM_JOBID=77", "SLURM_STEPID=3", "SLURM_NODELIST=gpu[07-08]",
		"SLURM_NNODES=2", "SLURM_NODEID=0", NULL,
	};
	struct crun_slurm s = detect_ok(legacy, NULL);

	cr_expect_eq(s.in_step, 1);
	cr_expect_str_eq(s.job_id, "77");
	cr_expect_str_eq(s.why_rdzv_id, "SLURM_JOBID=77");
	cr_expect_str_eq(s.host, "gpu07");
	cr_expect_eq(s.nnodes, 2);
	cr_expect_str_eq(s.why_nnodes, "SLURM_NNODES=2");
}

Test(slurm, step_on_part_of_the_job)
{
	/* srun -N2 -w n[3-4] inside a 4-node job: the step's values win. */
	static const char *const over[] = {
		"SLURM_JOB_NODELIST=n[1-4]", "SLURM_JOB_NUM_NODES=4",
		"SLURM_STEP_NODELIST=n[3-4]", "SLURMD_NODENAME=n4", NULL,
	};
	struct crun_slurm s = detect_ok(step2, over);

	cr_expect_str_eq(s.host, "n3");
	cr_expect_eq(s.nnodes, 2);
	cr_expect_eq(s.nwarn, 0, "%s", s.warn[0]);
}

Test(slurm, gpus)
{
	static const char *const over[] = { "SLURM_GPUS_ON_NODE=4",
					    "CUDA_VISIBLE_DEVICES=0,1,2,3",
					    NULL };
	static const char *const per_node[] = { "SLURM_GPUS_PER_NODE=a100:8",
						NULL };
	static const char *const per_node_int[] = { "SLURM_GPUS_PER_NODE=2",
						    NULL };
	static const char *const zero[] = { "SLURM_GPUS_ON_NODE=0", NULL };
	struct crun_slurm s = detect_ok(step2, over);

	cr_expect_str_eq(s.nproc_spec, "4");
	cr_expect_eq(s.nproc, 4);
	cr_expect_str_eq(s.why_nproc, "SLURM_GPUS_ON_NODE=4");
	cr_expect_eq(s.nwarn, 0, "%s", s.warn[0]);

	/* Pitfall C4.3: "type:N", and unset with --gres. */
	s = detect_ok(step2, per_node);
	cr_expect_str_eq(s.nproc_spec, "8");
	cr_expect(strstr(s.why_nproc, "SLURM_GPUS_PER_NODE=a100:8") != NULL);
	s = detect_ok(step2, per_node_int);
	cr_expect_str_eq(s.nproc_spec, "2");
	s = detect_ok(step2, zero);
	cr_expect_str_eq(s.nproc_spec, "cpu");
}

Test(slurm, gpus_split_per_task)
{
	/* Pitfall C4.2: --gpus-per-task gives each task its own device. */
	static const char *const over[] = { "SLURM_GPUS_ON_NODE=4",
					    "SLURM_GPUS_PER_TASK=1",
					    "CUDA_VISIBLE_DEVICES=2", NULL };
	static const char *const bind[] = { "SLURM_GPUS_ON_NODE=2",
					    "SLURM_GPU_BIND=closest", NULL };
	struct crun_slurm s = detect_ok(step2, over);

	cr_expect_eq(s.nproc, 1, "only the visible GPU can be used");
	cr_expect(has_warn(&s, "SLURM_GPUS_PER_TASK"), "%s", s.warn[0]);
	cr_expect(has_warn(&s, "split per task"));
	cr_expect(strstr(s.why_nproc, "CUDA_VISIBLE_DEVICES=2") != NULL);

	s = detect_ok(step2, bind);
	cr_expect_eq(s.nproc, 2);
	cr_expect(has_warn(&s, "SLURM_GPU_BIND=closest"));
}

Test(slurm, several_crun_tasks_per_node)
{
	/* Pitfall C4.1: srun --ntasks-per-node=4 starts four cruns. */
	static const char *const over[] = {
		"SLURM_STEP_TASKS_PER_NODE=4(x2)", "SLURM_TASKS_PER_NODE=4(x2)",
		"SLURM_NTASKS_PER_NODE=4", "SLURM_LOCALID=3", NULL,
	};
	static const char *const uneven[] = {
		"SLURM_STEP_TASKS_PER_NODE=1,3", "SLURM_NODEID=0", NULL,
	};
	struct crun_slurm s = detect_ok(step2, over);

	cr_expect_eq(s.tasks_here, 4);
	cr_expect_eq(s.local_task, 3);
	cr_expect(has_warn(&s, "4 crun tasks run on this node"), "%s",
		  s.warn[0]);
	cr_expect(has_warn(&s, "--ntasks-per-node=1"));
	/* The step's task count is about crun, not workers. */
	cr_expect_str_eq(s.nproc_spec, "cpu");

	s = detect_ok(step2, uneven);
	cr_expect_eq(s.tasks_here, 1);
	cr_expect_eq(s.nwarn, 0);
}

Test(slurm, saved_job_layout)
{
	/* crun.sbatch saved the batch's SLURM_TASKS_PER_NODE before srun. */
	static const char *const over[] = {
		"CRUN_SLURM_TASKS_PER_NODE=4,2", NULL,
	};
	static const char *const sub[] = {
		/* A step on n[3-4] of a 4-node job: index by node name. */
		"CRUN_SLURM_TASKS_PER_NODE=8(x3),5", "SLURM_JOB_NODELIST=n[1-4]",
		"SLURM_JOB_NUM_NODES=4", "SLURM_STEP_NODELIST=n[3-4]",
		"SLURMD_NODENAME=n4", NULL,
	};
	static const char *const bad[] = { "CRUN_SLURM_TASKS_PER_NODE=4", NULL };
	struct crun_slurm s = detect_ok(step2, over);

	cr_expect_str_eq(s.nproc_spec, "2", "node 1 of '4,2'");
	cr_expect(strstr(s.why_nproc, "CRUN_SLURM_TASKS_PER_NODE=4,2") != NULL,
		  "%s", s.why_nproc);

	s = detect_ok(step2, sub);
	cr_expect_str_eq(s.nproc_spec, "5");

	/* Too short for node 1: ignored with a warning. */
	s = detect_ok(step2, bad);
	cr_expect_str_eq(s.nproc_spec, "cpu");
	cr_expect(has_warn(&s, "ignoring CRUN_SLURM_TASKS_PER_NODE"));

	/* GPUs still win. */
	{
		static const char *const both[] = {
			"CRUN_SLURM_TASKS_PER_NODE=4,2",
			"SLURM_GPUS_ON_NODE=8", NULL,
		};
		s = detect_ok(step2, both);
		cr_expect_str_eq(s.nproc_spec, "8");
	}
}

Test(slurm, batch_shell)
{
	static const char *const ntpn[] = { "SLURM_NTASKS_PER_NODE=6", NULL };
	static const char *const multi[] = {
		"SLURM_JOB_NODELIST=n[1-3]", "SLURM_JOB_NUM_NODES=3",
		"SLURM_TASKS_PER_NODE=2(x2),1", NULL,
	};
	static const char *const no_nodeid[] = { "SLURM_NODEID=", NULL };
	struct crun_slurm s = detect_ok(batch1, NULL);

	cr_expect_eq(s.in_slurm, 1);
	cr_expect_eq(s.in_step, 0);
	cr_expect_str_eq(s.host, "vm");
	cr_expect_eq(s.port, 20002);
	cr_expect_eq(s.nnodes, 1);
	cr_expect_str_eq(s.why_nnodes, "SLURM_JOB_NUM_NODES=1");
	cr_expect_str_eq(s.nproc_spec, "3");
	cr_expect(strstr(s.why_nproc, "SLURM_TASKS_PER_NODE=3") != NULL);
	cr_expect_eq(s.nwarn, 0, "%s", s.warn[0]);

	s = detect_ok(batch1, ntpn);
	cr_expect_str_eq(s.nproc_spec, "6");
	cr_expect_str_eq(s.why_nproc, "SLURM_NTASKS_PER_NODE=6");

	/* crun run by the batch shell of a multi-node job (not via srun). */
	s = detect_ok(batch1, multi);
	cr_expect_str_eq(s.nproc_spec, "2");
	cr_expect(has_warn(&s, "not inside an srun step"), "%s", s.warn[0]);

	s = detect_ok(batch1, no_nodeid);
	cr_expect_eq(s.node_rank, 0);
	cr_expect(strstr(s.why_node_rank, "batch shell") != NULL);
}

Test(slurm, mismatched_count_warns)
{
	static const char *const over[] = { "SLURM_STEP_NUM_NODES=3", NULL };
	struct crun_slurm s = detect_ok(step2, over);

	cr_expect_eq(s.nnodes, 3);
	cr_expect(has_warn(&s, "names 2 nodes"), "%s", s.warn[0]);
}

Test(slurm, errors)
{
	static const char *const badjob[] = { "SLURM_JOB_ID=12ab", NULL };
	static const char *const badlist[] = { "SLURM_STEP_NODELIST=n[3-1]",
					       NULL };
	static const char *const nolist[] = { "SLURM_STEP_NODELIST=",
					      "SLURM_JOB_NODELIST=",
					      "SLURM_NODELIST=", NULL };
	static const char *const emptylist[] = { "SLURM_STEP_NODELIST= , ",
						 NULL };
	static const char *const badnn[] = { "SLURM_STEP_NUM_NODES=two",
					     NULL };
	static const char *const zeronn[] = { "SLURM_STEP_NUM_NODES=0", NULL };
	static const char *const badid[] = { "SLURM_NODEID=2", NULL };
	static const char *const noid[] = { "SLURM_NODEID=", NULL };

	detect_err(step2, badjob, "SLURM_JOB_ID: '12ab' is not a job id");
	detect_err(step2, badlist,
		   "SLURM_STEP_NODELIST: column 3: descending range");
	detect_err(step2, nolist, "SLURM_JOB_NODELIST is not set");
	detect_err(step2, emptylist, "SLURM_STEP_NODELIST is empty");
	detect_err(step2, badnn, "SLURM_STEP_NUM_NODES: 'two'");
	detect_err(step2, zeronn, "SLURM_STEP_NUM_NODES: '0'");
	detect_err(step2, badid, "SLURM_NODEID: '2' is not a node index "
				 "below 2");
	detect_err(step2, noid, "SLURM_NODEID is not set");
}

Test(slurm, per_node_grammar)
{
	int n = -1;

	cr_expect_eq(slurm_per_node("2(x3),1", 0, &n), 0);
	cr_expect_eq(n, 2);
	cr_expect_eq(slurm_per_node("2(x3),1", 2, &n), 0);
	cr_expect_eq(n, 2);
	cr_expect_eq(slurm_per_node("2(x3),1", 3, &n), 0);
	cr_expect_eq(n, 1);
	cr_expect_eq(slurm_per_node("2(x3),1", 4, &n), CRUN_ENOTFOUND);
	cr_expect_eq(slurm_per_node("72(x2),36", 1, &n), 0);
	cr_expect_eq(n, 72);
	cr_expect_eq(slurm_per_node("4", 0, &n), 0);
	cr_expect_eq(n, 4);
	cr_expect_eq(slurm_per_node("1,0,3", 1, &n), 0);
	cr_expect_eq(n, 0);

	static const char *const bad[] = {
		"", "x", "2(x)", "2(x0)", "2(3)", "2(x3", "2,", ",2", "2;3",
		"-1", "2(x3)1", "2 ,3", "99999999", "1,2(x3),z",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_expect_eq(slurm_per_node(bad[i], 0, &n), CRUN_ECONFIG,
			     "'%s' should be rejected", bad[i]);
	cr_expect_eq(slurm_per_node(NULL, 0, &n), CRUN_ECONFIG);
	cr_expect_eq(slurm_per_node("1", -1, &n), CRUN_ECONFIG);
}

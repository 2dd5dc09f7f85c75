/*
 * Reading a SLURM step's environment into what crun needs (include/crun/
 * slurm.h). Inside a step the step's variables win over the job's: a step
 * may run on fewer nodes than the job holds, and then SLURM_STEP_NODELIST,
 * SLURM_STEP_NUM_NODES and SLURM_NODEID (relative to the step) are the ones
 * that agree with each other and with the crun processes that will meet.
 * Variables crun cannot do without (job id, node list, node count, node id)
 * are errors when malformed; the ones only used to spot pitfalls are not.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crun/err.h"
#include "crun/hostlist.h"
#include "crun/slurm.h"

/* The value of name in envp, or NULL. */
static const char *slurm_env(char **envp, const char *name)
{
	size_t len = strlen(name);

	if (envp == NULL)
		return NULL;
	for (char **e = envp; *e != NULL; e++)
		if (strncmp(*e, name, len) == 0 && (*e)[len] == '=')
			return *e + len + 1;
	return NULL;
}

/* The first of two names that is set; *used names it. */
static const char *slurm_env2(char **envp, const char *a, const char *b,
			      const char **used)
{
	const char *v = slurm_env(envp, a);

	*used = a;
	if (v == NULL && b != NULL) {
		v = slurm_env(envp, b);
		*used = b;
	}
	return v;
}

/* Parse a whole decimal integer in [min, max]; 0 or CRUN_ECONFIG. */
static int slurm_int(const char *s, long min, long max, long *out)
{
	char *end;
	long v;

	if (s == NULL || *s < '0' || *s > '9')
		return CRUN_ECONFIG;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno != 0 || *end != '\0' || v < min || v > max)
		return CRUN_ECONFIG;
	*out = v;
	return 0;
}

static void slurm_warn(struct crun_slurm *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void slurm_warn(struct crun_slurm *s, const char *fmt, ...)
{
	va_list ap;

	if (s->nwarn == CRUN_SLURM_MAX_WARN)
		return;
	va_start(ap, fmt);
	vsnprintf(s->warn[s->nwarn++], CRUN_SLURM_WARN, fmt, ap);
	va_end(ap);
}

static int slurm_err(char *errmsg, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int slurm_err(char *errmsg, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (errmsg != NULL && errlen > 0) {
		va_start(ap, fmt);
		vsnprintf(errmsg, errlen, fmt, ap);
		va_end(ap);
	}
	return CRUN_ECONFIG;
}

int slurm_per_node(const char *s, int index, int *count)
{
	const char *p = s;
	long at = 0;
	int found = 0;

	if (s == NULL || *s == '\0' || index < 0)
		return CRUN_ECONFIG;
	for (;;) {
		long n = 0, rep = 1;
		int digits = 0;

		for (; *p >= '0' && *p <= '9'; p++, digits++)
			if ((n = n * 10 + (*p - '0')) > 1000000)
				return CRUN_ECONFIG;
		if (digits == 0)
			return CRUN_ECONFIG;
		if (p[0] == '(' && p[1] == 'x') {
			rep = 0;
			digits = 0;
			for (p += 2; *p >= '0' && *p <= '9'; p++, digits++)
				if ((rep = rep * 10 + (*p - '0')) > 10000000)
					return CRUN_ECONFIG;
			if (digits == 0 || rep == 0 || *p++ != ')')
				return CRUN_ECONFIG;
		}
		if (*p != ',' && *p != '\0')
			return CRUN_ECONFIG;
		if (!found && index < at + rep) {
			/* Keep validating the rest: a bad tail is bad input. */
			*count = (int)n;
			found = 1;
		}
		at += rep;
		if (*p == '\0')
			break;
		p++;
	}
	return found ? 0 : CRUN_ENOTFOUND;
}

int slurm_port(unsigned long job_id)
{
	return CRUN_SLURM_PORT_BASE + (int)(job_id % CRUN_SLURM_PORT_SPAN);
}

/* Items in a CUDA_VISIBLE_DEVICES-style list ("0,1,3", "GPU-uuid,..."). */
static int slurm_list_len(const char *s)
{
	int n = 1;

	if (*s == '\0')
		return 0;
	for (; *s != '\0'; s++)
		n += *s == ',';
	return n;
}

/*
 * Index of node in the expanded list, or -1. Used to find this node's entry
 * in a job-level per-node list when the step covers only part of the job.
 */
static int slurm_index_of(const char *list, const char *node)
{
	char **hosts;
	size_t n;
	int idx = -1;

	if (list == NULL || node == NULL ||
	    hostlist_expand(list, &hosts, &n, NULL, 0) != 0)
		return -1;
	for (size_t i = 0; i < n && i < 1000000; i++)
		if (strcmp(hosts[i], node) == 0) {
			idx = (int)i;
			break;
		}
	hostlist_free(hosts);
	return idx;
}

/* GPUs on this node: SLURM_GPUS_ON_NODE, else SLURM_GPUS_PER_NODE. */
static int slurm_gpus(char **envp, struct crun_slurm *s)
{
	const char *v = slurm_env(envp, "SLURM_GPUS_ON_NODE"), *c;
	long n;

	if (v != NULL && slurm_int(v, 0, 100000, &n) == 0 && n > 0) {
		snprintf(s->why_nproc, sizeof(s->why_nproc),
			 "SLURM_GPUS_ON_NODE=%ld", n);
		return (int)n;
	}
	/* "[type:]N" (pitfall C4.3), set only with --gpus-per-node. */
	v = slurm_env(envp, "SLURM_GPUS_PER_NODE");
	if (v == NULL)
		return 0;
	c = strrchr(v, ':');
	if (slurm_int(c ? c + 1 : v, 0, 100000, &n) != 0 || n == 0)
		return 0;
	snprintf(s->why_nproc, sizeof(s->why_nproc),
		 "SLURM_GPUS_PER_NODE=%.64s (SLURM_GPUS_ON_NODE unset)", v);
	return (int)n;
}

/* Workers per node from the GPUs, with the per-task split checks (C4.2). */
static int slurm_nproc_gpus(char **envp, struct crun_slurm *s)
{
	int gpus = slurm_gpus(envp, s), vis;
	const char *cvd = slurm_env(envp, "CUDA_VISIBLE_DEVICES");
	const char *pertask = slurm_env(envp, "SLURM_GPUS_PER_TASK");
	const char *bind = slurm_env(envp, "SLURM_GPU_BIND");

	if (gpus == 0)
		return 0;
	if (pertask != NULL || bind != NULL)
		slurm_warn(s,
			   "GPUs are bound per task (%s=%.40s): crun starts "
			   "every worker of the node itself, so allocate GPUs "
			   "per node (--gpus-per-node or --gres=gpu:N) and "
			   "drop --gpus-per-task/--gpu-bind",
			   pertask ? "SLURM_GPUS_PER_TASK" : "SLURM_GPU_BIND",
			   pertask ? pertask : bind);
	if (cvd != NULL && strcmp(cvd, "NoDevFiles") != 0 &&
	    (vis = slurm_list_len(cvd)) < gpus) {
		slurm_warn(s,
			   "this task sees %d of the node's %d GPUs "
			   "(CUDA_VISIBLE_DEVICES=%.40s): the GPUs are split "
			   "per task; starting %d workers",
			   vis, gpus, cvd, vis);
		snprintf(s->why_nproc, sizeof(s->why_nproc),
			 "CUDA_VISIBLE_DEVICES=%.64s (%d of %d GPUs on the "
			 "node)",
			 cvd, vis, gpus);
		gpus = vis;
	}
	return gpus;
}

/*
 * Workers per node from a task layout meant for workers: the job's, saved by
 * crun.sbatch in CRUN_SLURM_TASKS_PER_NODE; or, outside a step (crun run by
 * the batch shell itself), the job's own SLURM_NTASKS_PER_NODE or
 * SLURM_TASKS_PER_NODE. Inside a step those two describe the crun tasks.
 */
static int slurm_nproc_tasks(char **envp, struct crun_slurm *s)
{
	const char *saved = slurm_env(envp, "CRUN_SLURM_TASKS_PER_NODE"), *v;
	int n, idx = s->node_rank;
	long l;

	if (saved != NULL) {
		if (s->in_step) {
			const char *job = slurm_env(envp, "SLURM_JOB_NODELIST");
			const char *me = slurm_env(envp, "SLURMD_NODENAME");
			int j = slurm_index_of(job, me);

			if (j >= 0)
				idx = j;
		}
		if (slurm_per_node(saved, idx, &n) == 0 && n > 0) {
			snprintf(s->why_nproc, sizeof(s->why_nproc),
				 "CRUN_SLURM_TASKS_PER_NODE=%.64s, entry %d "
				 "(the job's task layout)",
				 saved, idx);
			return n;
		}
		slurm_warn(s,
			   "ignoring CRUN_SLURM_TASKS_PER_NODE=%.64s: no "
			   "positive count for node %d",
			   saved, idx);
	}
	if (s->in_step)
		return 0;
	v = slurm_env(envp, "SLURM_NTASKS_PER_NODE");
	if (v != NULL && slurm_int(v, 1, 1000000, &l) == 0) {
		snprintf(s->why_nproc, sizeof(s->why_nproc),
			 "SLURM_NTASKS_PER_NODE=%ld", l);
		return (int)l;
	}
	v = slurm_env(envp, "SLURM_TASKS_PER_NODE");
	if (v != NULL && slurm_per_node(v, idx, &n) == 0 && n > 0) {
		snprintf(s->why_nproc, sizeof(s->why_nproc),
			 "SLURM_TASKS_PER_NODE=%.64s, entry %d", v, idx);
		return n;
	}
	return 0;
}

/*
 * How many crun processes the step put on this node (pitfall C4.1), and in
 * all (each is an agent of the rendezvous).
 */
static void slurm_step_tasks(char **envp, struct crun_slurm *out)
{
	const char *name, *v;
	long l;
	int n;

	v = slurm_env2(envp, "SLURM_STEP_TASKS_PER_NODE",
		       "SLURM_TASKS_PER_NODE", &name);
	if (v != NULL && slurm_per_node(v, out->node_rank, &n) == 0)
		out->tasks_here = n;
	if (out->tasks_here > 1)
		slurm_warn(out,
			   "%d crun tasks run on this node (%s=%.40s) and "
			   "each starts its own workers; launch one per node: "
			   "srun --ntasks-per-node=1 scripts/crun-slurm ...",
			   out->tasks_here, name, v);
	v = slurm_env(envp, "SLURM_STEP_NUM_TASKS");
	if (v != NULL && slurm_int(v, 1, 1000000, &l) == 0)
		out->ntasks = (int)l;
}

int slurm_detect(char **envp, struct crun_slurm *out, char *errmsg,
		 size_t errlen)
{
	const char *job, *jobname, *step, *procid, *list, *v, *name;
	char err[160], **hosts = NULL;
	unsigned long jobid;
	size_t nhosts;
	long l;
	int rc, nproc;

	memset(out, 0, sizeof(*out));
	if (errmsg != NULL && errlen > 0)
		errmsg[0] = '\0';
	job = slurm_env2(envp, "SLURM_JOB_ID", "SLURM_JOBID", &jobname);
	step = slurm_env2(envp, "SLURM_STEP_ID", "SLURM_STEPID", &name);
	procid = slurm_env(envp, "SLURM_PROCID");
	if (job == NULL || (step == NULL && procid == NULL))
		return 0;
	out->in_slurm = 1;
	out->in_step = step != NULL;

	/* Rendezvous id: the job id, which every node of the job shares. */
	if (slurm_int(job, 0, 2147483647L, &l) != 0)
		return slurm_err(errmsg, errlen, "%s: '%.32s' is not a job id",
				 jobname, job);
	jobid = (unsigned long)l;
	snprintf(out->job_id, sizeof(out->job_id), "%lu", jobid);
	snprintf(out->why_rdzv_id, sizeof(out->why_rdzv_id), "%s=%lu", jobname,
		 jobid);

	/* The nodes that will meet: the step's, else the job's. */
	list = NULL;
	if (out->in_step)
		list = slurm_env2(envp, "SLURM_STEP_NODELIST", NULL, &name);
	if (list == NULL)
		list = slurm_env2(envp, "SLURM_JOB_NODELIST", "SLURM_NODELIST",
				  &name);
	if (list == NULL)
		return slurm_err(errmsg, errlen,
				 "SLURM_JOB_NODELIST is not set");
	rc = hostlist_expand(list, &hosts, &nhosts, err, sizeof(err));
	if (rc != 0)
		return slurm_err(errmsg, errlen, "%s: %s", name, err);
	if (nhosts == 0) {
		hostlist_free(hosts);
		return slurm_err(errmsg, errlen, "%s is empty", name);
	}
	snprintf(out->host, sizeof(out->host), "%s", hosts[0]);
	hostlist_free(hosts);
	out->port = slurm_port(jobid);
	snprintf(out->endpoint, sizeof(out->endpoint), "%s:%d", out->host,
		 out->port);
	snprintf(out->why_endpoint, sizeof(out->why_endpoint),
		 "first node of %s=%.48s%s; port %d + SLURM_JOB_ID %% %d", name,
		 list, strlen(list) > 48 ? "..." : "", CRUN_SLURM_PORT_BASE,
		 CRUN_SLURM_PORT_SPAN);

	/* Node count: of the step if in one, else of the job. */
	v = NULL;
	if (out->in_step)
		v = slurm_env2(envp, "SLURM_STEP_NUM_NODES", NULL, &name);
	if (v == NULL)
		v = slurm_env2(envp, "SLURM_JOB_NUM_NODES", "SLURM_NNODES",
			       &name);
	if (v != NULL) {
		if (slurm_int(v, 1, 1000000, &l) != 0)
			return slurm_err(errmsg, errlen,
					 "%s: '%.32s' is not a node count",
					 name, v);
		out->nnodes = (int)l;
		snprintf(out->why_nnodes, sizeof(out->why_nnodes), "%s=%ld",
			 name, l);
		if ((size_t)l != nhosts)
			slurm_warn(out,
				   "%s=%ld but the node list names %zu nodes; "
				   "using %ld",
				   name, l, nhosts, l);
	} else {
		out->nnodes = (int)nhosts;
		snprintf(out->why_nnodes, sizeof(out->why_nnodes),
			 "the %zu names in the node list", nhosts);
	}

	/* Node rank. */
	v = slurm_env(envp, "SLURM_NODEID");
	if (v != NULL) {
		if (slurm_int(v, 0, out->nnodes - 1, &l) != 0)
			return slurm_err(errmsg, errlen,
					 "SLURM_NODEID: '%.32s' is not a node "
					 "index below %d",
					 v, out->nnodes);
		out->node_rank = (int)l;
		snprintf(out->why_node_rank, sizeof(out->why_node_rank),
			 "SLURM_NODEID=%ld", l);
	} else if (out->in_step) {
		return slurm_err(errmsg, errlen,
				 "SLURM_NODEID is not set in an srun step");
	} else {
		snprintf(out->why_node_rank, sizeof(out->why_node_rank),
			 "SLURM_NODEID unset: the batch shell runs on the "
			 "first node");
	}
	v = slurm_env(envp, "SLURM_LOCALID");
	if (v != NULL && slurm_int(v, 0, 1000000, &l) == 0)
		out->local_task = (int)l;

	if (out->in_step) {
		slurm_step_tasks(envp, out);
	} else if (out->nnodes > 1) {
		slurm_warn(out,
			   "not inside an srun step, so only this node joins "
			   "the %d-node rendezvous; launch one crun per node: "
			   "srun --ntasks-per-node=1 scripts/crun-slurm ...",
			   out->nnodes);
	}

	/* Workers per node: GPUs, else a task layout for workers, else cpu. */
	nproc = slurm_nproc_gpus(envp, out);
	if (nproc == 0)
		nproc = slurm_nproc_tasks(envp, out);
	if (nproc > 0) {
		out->nproc = nproc;
		snprintf(out->nproc_spec, sizeof(out->nproc_spec), "%d", nproc);
	} else {
		out->nproc = 0;
		snprintf(out->nproc_spec, sizeof(out->nproc_spec), "cpu");
		snprintf(out->why_nproc, sizeof(out->why_nproc), "%s",
			 out->in_step
			     ? "no GPUs (SLURM_GPUS_ON_NODE unset) and no "
			       "saved job layout (CRUN_SLURM_TASKS_PER_NODE)"
			     : "no GPUs (SLURM_GPUS_ON_NODE unset) and no "
			       "task layout");
	}
	return 0;
}

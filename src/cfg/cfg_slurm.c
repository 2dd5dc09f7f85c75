/*
 * SLURM into the configuration: with --slurm, or by
 * itself inside an srun step when no multi-node option was given, offer what
 * slurm_detect read from the step's environment as derived values. cfg_set
 * keeps every value the user gave (command line, environment, job file), and
 * --print-config shows each derived one as "derived (slurm: <variable>)".
 *
 *   nnodes            SLURM_STEP_NUM_NODES / SLURM_JOB_NUM_NODES / SLURM_NNODES
 *   rdzv_id           SLURM_JOB_ID
 *   rdzv_backend      c10d
 *   rdzv_endpoint     first node of the step, port 20000 + job id % 10000
 *                     (with a user-chosen static backend: node_rank from
 *                     SLURM_NODEID, master_addr and master_port instead)
 *   nproc_per_node    GPUs on the node, else the job's task layout, else cpu
 *   signals_to_handle the default list plus SIGUSR1, the usual
 *                     --signal=USR1@T warning, so it reaches the workers
 *
 * Auto mode stays off outside a step (a batch shell would wait alone for the
 * other nodes), when --slurm=0 / CRUN_SLURM=0, and when any of nnodes,
 * rdzv_backend, rdzv_endpoint, node_rank, master_addr, master_port or
 * standalone was set: then crun behaves exactly as torchrun would.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "crun/cfg.h"
#include "crun/err.h"
#include "crun/log.h"
#include "crun/slurm.h"
#include "cfg_opts.h"

#define RAW(id) (cfg->raw[CFG_##id])

/* Offer a derived value; why is shown by --print-config. */
static void offer(struct crun_cfg *cfg, int id, const char *v, const char *why)
{
	char origin[CRUN_SLURM_WHY + 64];

	snprintf(origin, sizeof(origin), "slurm: %s", why);
	cfg_set(cfg, id, v, CRUN_SRC_DERIVED, origin);
}

/* The option the user set that turns auto mode off, or -1. */
static int multi_node_option(const struct crun_cfg *cfg)
{
	static const int ids[] = {
	    CFG_nnodes,	     CFG_rdzv_backend, CFG_rdzv_endpoint, CFG_node_rank,
	    CFG_master_addr, CFG_master_port,  CFG_standalone};

	for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++)
		if (cfg->raw[ids[i]] && cfg->src[ids[i]] > CRUN_SRC_DERIVED)
			return ids[i];
	return -1;
}

int cfg_apply_slurm(struct crun_cfg *cfg, char **envp, char *errmsg, size_t len)
{
	struct crun_slurm s;
	char why[CRUN_SLURM_WHY + 32], num[32], det[256];
	int mode = -1, standalone = 0, is_static;

	if (RAW(slurm) && cfg_parse_bool(RAW(slurm), &mode))
		return cfg__err(
		    errmsg, len,
		    "%s: invalid value '%s': expected 0/1 or true/false",
		    cfg->origin[CFG_slurm], RAW(slurm));
	if (mode == 0)
		return 0;
	if (slurm_detect(envp, &s, det, sizeof(det)) != 0) {
		if (mode == 1)
			return cfg__err(errmsg, len, "--slurm: %s", det);
		log_say("not using SLURM (%s); --slurm=0 silences this", det);
		return 0;
	}
	if (!s.in_slurm) {
		if (mode == 1)
			return cfg__err(errmsg, len,
					"--slurm: not inside a SLURM job "
					"(SLURM_JOB_ID, and "
					"SLURM_STEP_ID or SLURM_PROCID, are "
					"unset); run it in a "
					"step: srun --ntasks-per-node=1 "
					"scripts/crun-slurm ...");
		return 0;
	}
	if (s.in_step) {
		cfg->slurm_agents = s.nnodes;
		snprintf(cfg->slurm_agents_why, sizeof(cfg->slurm_agents_why),
			 "%s", s.why_nnodes);
		if (s.ntasks > s.nnodes) { /* several crun per node */
			cfg->slurm_agents = s.ntasks;
			snprintf(cfg->slurm_agents_why,
				 sizeof(cfg->slurm_agents_why),
				 "SLURM_STEP_NUM_TASKS=%d", s.ntasks);
		}
	}
	if (mode == -1 && (!s.in_step || multi_node_option(cfg) >= 0))
		return 0;
	if (RAW(standalone) &&
	    cfg_parse_bool(RAW(standalone), &standalone) == 0 && standalone)
		return cfg__err(errmsg, len,
				"--slurm: not allowed with --standalone "
				"(--slurm=0 for one node inside a SLURM job)");

	if (mode == -1)
		offer(cfg, CFG_slurm, "1",
		      "inside an srun step, no multi-node option given");
	snprintf(num, sizeof(num), "%d", s.nnodes);
	offer(cfg, CFG_nnodes, num, s.why_nnodes);
	offer(cfg, CFG_rdzv_id, s.job_id, s.why_rdzv_id);
	offer(cfg, CFG_rdzv_backend, "c10d",
	      "one crun per node, meeting at the first node");
	is_static = strcmp(RAW(rdzv_backend), "static") == 0;
	if (is_static) {
		/* The user asked for the static backend: node 0 is the master.
		 */
		snprintf(num, sizeof(num), "%d", s.node_rank);
		offer(cfg, CFG_node_rank, num, s.why_node_rank);
		snprintf(why, sizeof(why), "%s", s.why_endpoint);
		offer(cfg, CFG_master_addr, s.host, why);
		snprintf(num, sizeof(num), "%d", s.port);
		offer(cfg, CFG_master_port, num, why);
	} else {
		offer(cfg, CFG_rdzv_endpoint, s.endpoint, s.why_endpoint);
	}
	offer(cfg, CFG_nproc_per_node, s.nproc_spec, s.why_nproc);
	if (RAW(signals_to_handle) == NULL) {
		snprintf(why, sizeof(why), "%s,SIGUSR1",
			 cfg_opts[CFG_signals_to_handle].def);
		offer(cfg, CFG_signals_to_handle, why,
		      "the default plus SIGUSR1, the --signal=USR1@T warning");
	}

	/* One line saying what SLURM decided (the winners, user values too). */
	if (is_static)
		snprintf(det, sizeof(det),
			 "--node_rank=%s --master_addr=%s --master_port=%s",
			 RAW(node_rank), RAW(master_addr), RAW(master_port));
	else
		snprintf(det, sizeof(det), "--rdzv_endpoint=%s",
			 RAW(rdzv_endpoint));
	log_say(
	    "SLURM job %s, node %d of %d%s: --nnodes=%s "
	    "--nproc_per_node=%s "
	    "--rdzv_backend=%s %s --rdzv_id=%s (%s; --print-config shows "
	    "why)",
	    s.job_id, s.node_rank, s.nnodes, s.in_step ? "" : " (batch shell)",
	    RAW(nnodes), RAW(nproc_per_node), RAW(rdzv_backend), det,
	    RAW(rdzv_id) ? RAW(rdzv_id) : "",
	    mode == -1 ? "automatic inside an srun step; --slurm=0 turns it off"
		       : "--slurm");
	for (int i = 0; i < s.nwarn; i++)
		log_warn("%s", s.warn[i]);
	return 0;
}

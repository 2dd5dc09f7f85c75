/*
 * The launch configuration. One table (cfg_opts.h) lists every option once:
 * its spellings, its job-file section, its default, its environment
 * fallback, its help text, and how its text becomes a typed field. The
 * command line (cfg_args.c), environment, job file (cfg_ini.c) and SLURM
 * (cfg_slurm.c) all go through cfg_set, which keeps the value with the
 * highest-precedence source; cfg_finalize then converts the winning texts by
 * the table and checks the rules between options. Error messages name the
 * option and where its value came from.
 */
#include <ctype.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "crun/binding.h"
#include "crun/cfg.h"
#include "crun/log.h"
#include "crun/err.h"
#include "crun/etcd.h"
#include "crun/fingerprint.h"
#include "crun/gpu.h"
#include "crun/rdzv_types.h"
#include "cfg_opts.h"

const struct cfg_opt cfg_opts[CFG_NOPTS] = {
#define X(id, name, shrt, type, sect, def, env, group, help, conv, lo, hi,     \
	  field, flags, unit)                                                  \
	{CFG_##id, name,	 shrt, CFG_T_##type, sect,  def,   env, group, \
	 help,	   CFG_C_##conv, lo,   hi,	     field, flags, unit},
    CFG_OPTS(X)
#undef X
};

void cfg_init(struct crun_cfg *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->master_port = -1;
	cfg->slurm = -1;
	cfg->metrics_port = -1;
	cfg->agent_store = 1;
	cfg->rdzv.is_host = -1;
}

void cfg_release(struct crun_cfg *cfg)
{
	int i;

	for (i = 0; i < CRUN_CFG_MAX_OPTS; i++) {
		free(cfg->raw[i]);
		free(cfg->origin[i]);
	}
	free(cfg->nproc_spec);
	free(cfg->start_method);
	free(cfg->role);
	free(cfg->log_line_prefix_template);
	for (i = 0; i < cfg->argc; i++)
		free(cfg->argv[i]);
	free(cfg->argv);
	free(cfg->python);
	free(cfg->numa_binding);
	free(cfg->event_log);
	free(cfg->metrics_addr);
	free(cfg->python_why);
	free(cfg->rdzv_backend);
	free(cfg->rdzv_endpoint);
	free(cfg->rdzv_id);
	free(cfg->rdzv_conf_str);
	cfg_rdzv_conf_release(&cfg->rdzv);
	free(cfg->master_addr);
	free(cfg->local_addr);
	free(cfg->log_dir);
	free(cfg->local_ranks_filter_str);
	free(cfg->local_ranks_filter);
	for (int k = 0; k < 2; k++) {
		for (int j = 0; j < cfg->ndup_filters[k]; j++)
			free(cfg->dup_filters[k][j]);
		free(cfg->dup_filters[k]);
	}
	free(cfg->signals_str);
	free(cfg->config_file);
	for (i = 0; i < cfg->nenv; i++)
		free(cfg->env[i]);
	free(cfg->env);
	memset(cfg, 0, sizeof(*cfg));
}

int cfg_set(struct crun_cfg *cfg, int id, const char *value, int src,
	    const char *origin)
{
	assert_opt_id(id);
	if (cfg->raw[id] && cfg->src[id] > src)
		return 0;
	cfg__set_str(&cfg->raw[id], value);
	cfg__set_str(&cfg->origin[id], origin);
	cfg->src[id] = (unsigned char)src;
	return 1;
}

int cfg_option_at(int i, const char **name, char *shrt, int *takes_value)
{
	if (i < 0 || i >= CFG_NOPTS)
		return -1;
	*name = cfg_opts[i].name;
	*shrt = cfg_opts[i].shrt;
	*takes_value = cfg_opts[i].type != CFG_T_BOOL;
	return 0;
}

const struct cfg_opt *cfg_opt_by_name(const char *name, size_t len,
				      int *ambiguous)
{
	const struct cfg_opt *hit = NULL;
	char norm[64];
	size_t i;
	int n = 0;

	*ambiguous = 0;
	if (len == 0 || len >= sizeof(norm))
		return NULL;
	/* Dash and underscore spellings are the same option. */
	for (i = 0; i < len; i++)
		norm[i] = name[i] == '-' ? '_' : name[i];
	norm[len] = '\0';
	for (i = 0; i < CFG_NOPTS; i++) {
		const char *o = cfg_opts[i].name;

		if (strcmp(o, norm) == 0)
			return &cfg_opts[i];
		if (strncmp(o, norm, len) == 0) {
			hit = &cfg_opts[i];
			n++;
		}
	}
	/* argparse accepts unique prefixes of long options. */
	if (n > 1)
		*ambiguous = 1;
	return n == 1 ? hit : NULL;
}

/* --- conversion by the table ------------------------------------------- */

#define RAW(id) (cfg->raw[CFG_##id])

int cfg__bad(const struct crun_cfg *cfg, int id, char *errmsg, size_t len,
	     const char *why)
{
	const char *origin =
	    cfg->origin[id] ? cfg->origin[id] : cfg_opts[id].name;

	return cfg__err(errmsg, len, "%s: invalid value '%s'%s%s", origin,
			cfg->raw[id] ? cfg->raw[id] : "", why ? ": " : "",
			why ? why : "");
}

/* SECS: a duration; every timer takes ms, so a year at most. */
static int convert_secs(const struct crun_cfg *cfg, const struct cfg_opt *o,
			double *out, char *e, size_t l)
{
	int positive = (o->flags & CFG_F_POSITIVE) != 0;
	char why[80];
	double v;

	if (cfg__parse_double(cfg->raw[o->id], 0, &v) || (positive && v <= 0))
		return cfg__bad(cfg, o->id, e, l,
				positive ? "expected a number > 0"
					 : "expected a number >= 0");
	if (v > CFG_MAX_SECONDS || v > o->hi) {
		snprintf(why, sizeof(why),
			 "out of range (at most %.0f seconds)",
			 v > CFG_MAX_SECONDS ? CFG_MAX_SECONDS : o->hi);
		return cfg__bad(cfg, o->id, e, l, why);
	}
	*out = v;
	return 0;
}

int cfg__convert(struct crun_cfg *cfg, int id, char *e, size_t l)
{
	const struct cfg_opt *o = &cfg_opts[id];
	void *f = (char *)cfg + o->field;
	const char *raw = cfg->raw[id];
	char why[80];
	size_t z;
	long v;

	assert_opt_id(id);
	if (raw == NULL || o->conv == CFG_C_NONE)
		return 0;
	switch (o->conv) {
	case CFG_C_BOOL:
		if (cfg_parse_bool(raw, (int *)f))
			return cfg__bad(cfg, id, e, l,
					"expected 0/1 or true/false");
		break;
	case CFG_C_INT:
		if (cfg__parse_long(raw, (long)o->lo, (long)o->hi, &v)) {
			snprintf(why, sizeof(why),
				 "expected an integer in %ld..%ld", (long)o->lo,
				 (long)o->hi);
			return cfg__bad(cfg, id, e, l, why);
		}
		*(int *)f = (int)v;
		break;
	case CFG_C_SECS:
		return convert_secs(cfg, o, (double *)f, e, l);
	case CFG_C_SIZE:
		if (cfg_parse_size(raw, &z))
			return cfg__bad(cfg, id, e, l,
					"expected a size like 8192, 64K, 8M, "
					"1G");
		if ((double)z > o->hi) {
			snprintf(why, sizeof(why), "out of range (at most %zu)",
				 (size_t)o->hi);
			return cfg__bad(cfg, id, e, l, why);
		}
		*(size_t *)f = z;
		break;
	case CFG_C_STR:
		cfg__set_str((char **)f, raw);
		break;
	}
	return 0;
}

/* --- finalize ----------------------------------------------------------- */

/* GPUs that "gpu" counts: CUDA devices, which ROCm builds also report. */
int cfg_gpu_count(void)
{
	return gpu_count(CRUN_GPU_NVIDIA) + gpu_count(CRUN_GPU_AMD);
}

static int cpu_count(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n > 0 ? (int)n : 1;
}

/* Derive a value (standalone, static endpoint) unless the user gave one. */
static void derive(struct crun_cfg *cfg, int id, const char *v, const char *why)
{
	if (cfg->src[id] < CRUN_SRC_DERIVED || cfg->raw[id] == NULL)
		cfg_set(cfg, id, v, CRUN_SRC_DERIVED, why);
}

/* --standalone, --nnodes, --nproc_per_node. */
static int fin_nodes(struct crun_cfg *cfg, char *e, size_t l)
{
	const char *np = RAW(nproc_per_node);
	long v;

	if (cfg->standalone) {
		cfg->src[CFG_rdzv_backend] = cfg->src[CFG_rdzv_endpoint] =
		    CRUN_SRC_DEFAULT;
		/* As torchrun: a single-node c10d rendezvous with a fresh id.
		 */
		cfg_set(cfg, CFG_rdzv_backend, "c10d", CRUN_SRC_DERIVED,
			"--standalone");
		cfg_set(cfg, CFG_rdzv_endpoint, "localhost:0", CRUN_SRC_DERIVED,
			"--standalone");
		/* torchrun overrides explicit rendezvous flags here, the id
		 * too. */
		cfg->src[CFG_rdzv_backend] = cfg->src[CFG_rdzv_endpoint] =
		    CRUN_SRC_DERIVED;
		cfg__set_str(&cfg->raw[CFG_rdzv_id], NULL);
	}

	if (cfg_parse_nnodes(RAW(nnodes), &cfg->nnodes_min, &cfg->nnodes_max))
		return cfg__bad(cfg, CFG_nnodes, e, l,
				"expected N or MIN:MAX with 0 < MIN <= MAX");
	if (cfg->standalone && cfg->nnodes_max != 1)
		return cfg__bad(cfg, CFG_nnodes, e, l,
				"--standalone runs exactly one node");

	cfg__set_str(&cfg->nproc_spec, np);
	if (strcmp(np, "cpu") == 0) {
		cfg->nproc_per_node = cpu_count();
	} else if (strcmp(np, "gpu") == 0) {
		cfg->nproc_per_node = cfg_gpu_count();
		if (cfg->nproc_per_node == 0)
			return cfg__bad(
			    cfg, CFG_nproc_per_node, e, l,
			    "no NVIDIA or AMD GPU is visible (see "
			    "CUDA_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES)");
	} else if (strcmp(np, "xpu") == 0) {
		cfg->nproc_per_node = gpu_count(CRUN_GPU_INTEL);
		if (cfg->nproc_per_node == 0)
			return cfg__bad(cfg, CFG_nproc_per_node, e, l,
					"no Intel XPU is visible (see "
					"ZE_AFFINITY_MASK)");
	} else if (strcmp(np, "auto") == 0) {
		/* As torchrun 2.x: the accelerators, else the CPUs. */
		cfg->nproc_per_node = cfg_gpu_count();
		if (cfg->nproc_per_node == 0)
			cfg->nproc_per_node = gpu_count(CRUN_GPU_INTEL);
		if (cfg->nproc_per_node == 0)
			cfg->nproc_per_node = cpu_count();
	} else if (cfg__parse_long(np, 1, CRUN_MAX_LOCAL_RANKS, &v)) {
		return cfg__bad(cfg, CFG_nproc_per_node, e, l,
				"expected a count 1..1024, cpu, gpu, xpu or "
				"auto");
	} else {
		cfg->nproc_per_node = (int)v;
	}
	return 0;
}

/* The choices of the launch and the logs that are not plain numbers. */
static int fin_launch(struct crun_cfg *cfg, char *e, size_t l)
{
	unsigned char ip[16];

	if (strcmp(RAW(start_method), "spawn") &&
	    strcmp(RAW(start_method), "fork") &&
	    strcmp(RAW(start_method), "forkserver"))
		return cfg__bad(cfg, CFG_start_method, e, l,
				"expected spawn, fork or forkserver");
	/* Empty is allowed, as torchrun (TorchX passes --role ''). */
	if (strlen(RAW(role)) > 127) /* rdzv_descr's role */
		return cfg__bad(cfg, CFG_role, e, l, "longer than 127 bytes");
	if (RAW(numa_binding) &&
	    binding_mode_parse(RAW(numa_binding), NULL) < 0)
		return cfg__bad(cfg, CFG_numa_binding, e, l,
				"expected node, socket, exclusive or "
				"core-complex");
	if (binding_mode_parse(NULL, RAW(cpu_bind)) < 0)
		return cfg__bad(cfg, CFG_cpu_bind, e, l,
				"expected none or auto");
	if (RAW(numa_binding) && strcmp(RAW(cpu_bind), "none"))
		return cfg__err(
		    e, l, "--cpu_bind=%s: not allowed with --numa_binding",
		    RAW(cpu_bind));
	cfg->bind_mode = binding_mode_parse(RAW(numa_binding), RAW(cpu_bind));
#ifdef _WIN32
	cfg->bind_mode = CRUN_BIND_NONE; /* (cfg_notices says so) */
#endif
	/* torchrun 2.x fails on a log-spec entry point or an event handler
	 * it does not have; crun has torchrun's built-in ones only. */
	if (RAW(logs_specs) && strcmp(RAW(logs_specs), "default"))
		return cfg__bad(cfg, CFG_logs_specs, e, l,
				"no such log-spec plugin (crun has only "
				"'default')");
	if (RAW(event_log_handler) && strcmp(RAW(event_log_handler), "null") &&
	    strcmp(RAW(event_log_handler), "console") &&
	    strcmp(RAW(event_log_handler), "dynamic_rendezvous"))
		return cfg__bad(cfg, CFG_event_log_handler, e, l,
				"expected null, console or dynamic_rendezvous");
	if (RAW(event_log) && *RAW(event_log) == '\0')
		return cfg__bad(cfg, CFG_event_log, e, l,
				"expected a file or -");
	if (inet_pton(AF_INET, RAW(metrics_addr), ip) != 1 &&
	    inet_pton(AF_INET6, RAW(metrics_addr), ip) != 1)
		return cfg__bad(cfg, CFG_metrics_addr, e, l,
				"expected a numeric IPv4 or IPv6 address");
	if (strcmp(RAW(console), "plain") && strcmp(RAW(console), "collapse") &&
	    strcmp(RAW(console), "collapse,job"))
		return cfg__bad(cfg, CFG_console, e, l,
				"expected plain, collapse or collapse,job");
	cfg->console_collapse = strncmp(RAW(console), "collapse", 8) == 0;
	cfg->console_job = strcmp(RAW(console), "collapse,job") == 0;
	if (strcmp(RAW(env_check), "warn") == 0)
		cfg->env_check = CRUN_ENV_CHECK_WARN;
	else if (strcmp(RAW(env_check), "strict") == 0)
		cfg->env_check = CRUN_ENV_CHECK_STRICT;
	else if (strcmp(RAW(env_check), "off") == 0)
		cfg->env_check = CRUN_ENV_CHECK_OFF;
	else
		return cfg__bad(cfg, CFG_env_check, e, l,
				"expected warn, strict or off");
	if (cfg->module && cfg->no_python)
		return cfg__err(
		    e, l, "argument -m/--module: not allowed with --no_python");
	return 0;
}

/* The backend, its endpoint and rdzv_conf. */
static int fin_rdzv(struct crun_cfg *cfg, char *e, size_t l)
{
	const char *be = RAW(rdzv_backend), *ep = RAW(rdzv_endpoint);
	char host[256], why[400];
	int port = -1, ep_given = *ep != '\0';

	if (strcmp(be, "static") && strcmp(be, "c10d") && strcmp(be, "etcd") &&
	    strcmp(be, "etcd-v3") && strcmp(be, "etcd-v2"))
		return cfg__bad(cfg, CFG_rdzv_backend, e, l,
				"expected static, c10d or etcd (alias "
				"etcd-v3)");
	if (strcmp(be, "etcd-v2") == 0)
		return cfg__bad(cfg, CFG_rdzv_backend, e, l,
				"etcd-v2 speaks etcd's v2 API, which etcd 3.4 "
				"turns off and 3.6 removes; use "
				"--rdzv_backend=etcd (the v3 API) with the "
				"same endpoints");
	cfg__set_str(&cfg->rdzv_backend,
		     strcmp(be, "etcd-v3") == 0 ? "etcd" : be);

	/* The static backend meets at master_addr:master_port. */
	if (strcmp(cfg->rdzv_backend, "static") == 0 && *ep == '\0') {
		char sep[300];

		snprintf(sep, sizeof(sep),
			 strchr(RAW(master_addr), ':') ? "[%s]:%d" : "%s:%d",
			 RAW(master_addr),
			 cfg->master_port < 0 ? 29500 : cfg->master_port);
		derive(cfg, CFG_rdzv_endpoint, sep,
		       "--master_addr:--master_port");
		ep = RAW(rdzv_endpoint);
	}
	if (strcmp(cfg->rdzv_backend, "etcd") == 0 && *ep) {
		char urls[ETCD_MAX_ENDPOINTS][300];

		if (etcd_parse_endpoints(ep, 0, urls, ETCD_MAX_ENDPOINTS, why,
					 sizeof(why)) < 0)
			return cfg__bad(cfg, CFG_rdzv_endpoint, e, l, why);
	} else if (*ep && cfg_split_endpoint(ep, host, sizeof(host), &port)) {
		return cfg__bad(cfg, CFG_rdzv_endpoint, e, l,
				"expected HOST[:PORT] with PORT in 0..65535");
	} else if (strcmp(cfg->rdzv_backend, "static") == 0 && ep_given &&
		   port > 0 && cfg->master_port < 0) {
		/* As torchrun: the static endpoint's port is the workers'
		 * MASTER_PORT (a firewall opens exactly that one). */
		char p[16];

		snprintf(p, sizeof(p), "%d", port);
		derive(cfg, CFG_master_port, p, "--rdzv_endpoint's port");
		cfg->master_port = port;
	}
	cfg__set_str(&cfg->rdzv_endpoint, ep);
	/* The id names the job's keys: refused whole, never cut (rdzv.h). */
	if (RAW(rdzv_id) && strlen(RAW(rdzv_id)) > RDZV_ID_MAX)
		return cfg__err(
		    e, l,
		    "%s: invalid value '%.32s...' (%zu bytes): at "
		    "most %d bytes",
		    cfg->origin[CFG_rdzv_id] ? cfg->origin[CFG_rdzv_id]
					     : cfg_opts[CFG_rdzv_id].name,
		    RAW(rdzv_id), strlen(RAW(rdzv_id)), RDZV_ID_MAX);
	cfg__set_str(&cfg->rdzv_id, RAW(rdzv_id));

	cfg_rdzv_conf_release(&cfg->rdzv);
	cfg_rdzv_conf_init(&cfg->rdzv);
	cfg__set_str(&cfg->rdzv_conf_str, RAW(rdzv_conf));
	if (*RAW(rdzv_conf) &&
	    cfg_parse_rdzv_conf(RAW(rdzv_conf), &cfg->rdzv, why, sizeof(why)))
		return cfg__err(e, l, "%s: %s", cfg->origin[CFG_rdzv_conf],
				why);
	/* rdzv_conf's secret_file is the option, at rdzv_conf's precedence. */
	if (cfg->rdzv.secret_file)
		cfg_set(cfg, CFG_rdzv_secret_file, cfg->rdzv.secret_file,
			cfg->src[CFG_rdzv_conf], cfg->origin[CFG_rdzv_conf]);
	if (RAW(rdzv_secret_file) && *RAW(rdzv_secret_file))
		cfg__set_str(&cfg->rdzv.secret_file, RAW(rdzv_secret_file));
	return 0;
}

/* The redirect maps, the console filters and the signals. */
static int fin_streams(struct crun_cfg *cfg, char *e, size_t l)
{
	if (cfg_parse_std(RAW(redirects), &cfg->redirects))
		return cfg__bad(cfg, CFG_redirects, e, l,
				"expected 0-3 or a map like 0:1,1:2");
	if (cfg_parse_std(RAW(tee), &cfg->tee))
		return cfg__bad(cfg, CFG_tee, e, l,
				"expected 0-3 or a map like 0:1,1:2");
	free(cfg->local_ranks_filter);
	cfg->local_ranks_filter = NULL;
	cfg__set_str(&cfg->local_ranks_filter_str, RAW(local_ranks_filter));
	if (*RAW(local_ranks_filter) &&
	    cfg__parse_filter(RAW(local_ranks_filter), &cfg->local_ranks_filter,
			      &cfg->nfilter))
		return cfg__bad(cfg, CFG_local_ranks_filter, e, l,
				"expected integers like 0,2");
	if (cfg__parse_dup_filters(RAW(duplicate_stdout_filters),
				   &cfg->dup_filters[0],
				   &cfg->ndup_filters[0]) ||
	    cfg__parse_dup_filters(RAW(duplicate_stderr_filters),
				   &cfg->dup_filters[1], &cfg->ndup_filters[1]))
		return cfg__bad(
		    cfg,
		    cfg->ndup_filters[0] < 0 ? CFG_duplicate_stdout_filters
					     : CFG_duplicate_stderr_filters,
		    e, l, "expected at most 64 filters of 1..256 bytes");

	cfg__set_str(&cfg->signals_str, RAW(signals_to_handle));
	if (cfg_parse_signals(RAW(signals_to_handle), cfg->signals, 32,
			      &cfg->nsignals))
		return cfg__bad(
		    cfg, CFG_signals_to_handle, e, l,
		    "expected signal names or numbers like SIGTERM,SIGUSR1");
	return 0;
}

/* The rules between options. */
static int fin_cross(struct crun_cfg *cfg, char *e, size_t l)
{
	if (cfg->store.max_output < cfg->store.max_value + 64)
		return cfg__bad(cfg, CFG_store_max_output, e, l,
				"must be at least store_max_value_size + 64 "
				"(one reply of the largest value)");
	if (strcmp(cfg->rdzv_backend, "static") == 0 &&
	    cfg->nnodes_min != cfg->nnodes_max)
		return cfg__bad(cfg, CFG_nnodes, e, l,
				"the static backend needs a fixed node count");
	if (strcmp(cfg->rdzv_backend, "static") == 0 &&
	    cfg->node_rank >= cfg->nnodes_max)
		return cfg__bad(cfg, CFG_node_rank, e, l,
				"must be below --nnodes");
	/* The entrypoint: "crun" with nothing to run is a usage error. */
	if (cfg->argc == 0 && !cfg->print_config)
		return cfg__err(
		    e, l,
		    "the following arguments are required: training_script");
	return 0;
}

int cfg_finalize(struct crun_cfg *cfg, char *e, size_t l)
{
	int rc, no_store = 0;

	/* Fill in the defaults of options nobody set. */
	for (int i = 0; i < CFG_NOPTS; i++)
		if (cfg->raw[i] == NULL && cfg_opts[i].def)
			cfg_set(cfg, i, cfg_opts[i].def, CRUN_SRC_DEFAULT,
				cfg_opts[i].name);
	/* Every option the table converts, in table order. */
	for (int i = 0; i < CFG_NOPTS; i++)
		if ((rc = cfg__convert(cfg, i, e, l)))
			return rc;
	if (RAW(no_agent_store) &&
	    cfg_parse_bool(RAW(no_agent_store), &no_store))
		return cfg__bad(cfg, CFG_no_agent_store, e, l,
				"expected 0/1 or true/false");
	cfg->agent_store = !no_store;
	if ((rc = fin_nodes(cfg, e, l)) || (rc = fin_launch(cfg, e, l)) ||
	    (rc = fin_rdzv(cfg, e, l)) || (rc = fin_streams(cfg, e, l)))
		return rc;
	return fin_cross(cfg, e, l);
}

static const char *src_name(int src)
{
	switch (src) {
	case CRUN_SRC_CLI:
		return "command line";
	case CRUN_SRC_ENV:
		return "environment";
	case CRUN_SRC_FILE:
		return "job file";
	case CRUN_SRC_DERIVED:
		return "derived";
	default:
		return "default";
	}
}

void cfg_print(const struct crun_cfg *cfg, FILE *fp)
{
	size_t i;

	fprintf(fp, "# crun %s: effective configuration (value  # source)\n",
		CRUN_VERSION);
	for (i = 0; i < CFG_NOPTS; i++) {
		const struct cfg_opt *o = &cfg_opts[i];

		if (o->id == CFG_print_config || o->help == NULL)
			continue;
		fprintf(fp, "%-24s = %-28s # %s", o->name,
			cfg->raw[i] ? cfg->raw[i] : "", src_name(cfg->src[i]));
		if (cfg->src[i] != CRUN_SRC_DEFAULT && cfg->origin[i])
			fprintf(fp, " (%s)", cfg->origin[i]);
		fputc('\n', fp);
	}
	fprintf(fp, "%-24s = %d\n", "nproc_per_node (resolved)",
		cfg->nproc_per_node);
	fprintf(fp, "%-24s =", "entrypoint");
	for (int k = 0; k < cfg->argc; k++)
		fprintf(fp, " %s", cfg->argv[k]);
	fputc('\n', fp);
	if (cfg->python)
		fprintf(fp, "%-24s = %-28s # %s\n", "python", cfg->python,
			cfg->python_why ? cfg->python_why : "");
	for (int k = 0; k < cfg->nenv; k++)
		fprintf(fp, "env: %s\n", cfg->env[k]);
}

void cfg_notices(const struct crun_cfg *cfg)
{
	const char *p = cfg->rdzv.unknown;
	const char *rc = cfg->origin[CFG_rdzv_conf] ? cfg->origin[CFG_rdzv_conf]
						    : "--rdzv_conf";

	if (cfg->rdzv.quoted)
		log_say("%s: quotes around the value or its items "
			"removed (no shell removed them): %s",
			rc, RAW(rdzv_conf));

	while (p && *p) {
		int n = (int)strcspn(p, ",");

		log_say("%s: unknown rdzv_conf key '%.*s' ignored "
			"(as torchrun does)",
			rc, n, p);
		p += n + (p[n] == ',');
	}
	if (RAW(event_log_handler) && strcmp(RAW(event_log_handler), "null"))
		log_say("--event_log_handler=%s: crun says each "
			"rendezvous and worker event on its own stderr "
			"lines",
			RAW(event_log_handler));
#ifdef _WIN32
	if (binding_mode_parse(RAW(numa_binding), RAW(cpu_bind)) !=
	    CRUN_BIND_NONE)
		log_say("binding workers (%s) needs Linux (hwloc, "
			"sched_setaffinity): on Windows they run unbound",
			binding_mode_name(binding_mode_parse(RAW(numa_binding),
							     RAW(cpu_bind))));
#endif
}

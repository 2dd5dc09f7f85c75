/*
 * The launch configuration: every torchrun flag plus crun's own, the sources
 * they may come from (command line, PET_* / CRUN_* environment, job file,
 * defaults), validation, and printing. The launcher fills a crun_cfg and hands
 * it to the agent; nothing else parses flags.
 */
#ifndef CRUN_CFG_H
#define CRUN_CFG_H

#include <stddef.h>
#include <stdio.h>

#include "crun/store.h"

struct etcd_limits;

/*
 * The largest exclude_after: the failure history the rendezvous keeps
 * (rdzv_records.h's RDZV_MAX_FAILS, which rdzv_exclude.c holds equal).
 */
#define CFG_MAX_EXCLUDE_AFTER 32

/* Bits of a redirect/tee value, as torchrun's Std: 1 stdout, 2 stderr. */
enum crun_std {
	CRUN_STD_NONE = 0,
	CRUN_STD_OUT = 1,
	CRUN_STD_ERR = 2,
	CRUN_STD_ALL = 3
};

/* Where a value came from, for --print-config. Higher wins. */
enum crun_src {
	CRUN_SRC_DEFAULT = 0,
	CRUN_SRC_DERIVED,
	CRUN_SRC_FILE,
	CRUN_SRC_ENV,
	CRUN_SRC_CLI
};

#define CRUN_MAX_LOCAL_RANKS 1024
#define CRUN_CFG_MAX_OPTS 96

/* The agent's FileTimer server (torch's FileTimerClient requests): bounds
 * that are not options, listed in the limits table (CFG_FIXED_LIMITS). */
#define CRUN_FILETIMER_MAX_TIMERS 4096 /* live timers at once */
#define CRUN_FILETIMER_MAX_SCOPE 255   /* bytes in a timer's scope */
#define CRUN_FILETIMER_MAX_ARM 3600    /* seconds one wait is armed for */

/* "3" or "0:1,1:2": one value for every local rank, or a per-rank map. */
struct crun_std_spec {
	int all; /* applies to local ranks not in the map */
	int nmap;
	int rank[64];
	unsigned char val[64];
};

/* rdzv_conf keys (durations in seconds); cfg_rdzv_conf_init fills in the
 * defaults of src/cfg/cfg_opts.h's CFG_RDZV_KEYS. */
struct crun_rdzv_conf {
	double join_timeout;
	double last_call_timeout;
	double close_timeout;
	double read_timeout;
	double heartbeat_timeout;
	double keep_alive_interval;
	int keep_alive_max_attempt;
	/* heartbeats per second the store host takes (0: no bound) */
	long heartbeat_rate;
	double timeout;	  /* static backend: wait for all agents (0: join) */
	int is_host;	  /* -1 auto, 0, 1 */
	char *store_type; /* "tcp" (only tcp is supported) */
	char *local_addr;
	/* etcd backend */
	char *etcd_prefix; /* key prefix, "/crun" */
	int https;	   /* protocol=https for bare endpoints */
	char *cacert, *cert, *key;
	char *user, *password_file;
	double lease_ttl; /* s: a node that stops refreshing is lost */
	/* etcd client bounds (see etcd.h's struct etcd_limits) */
	size_t etcd_turn_bytes, etcd_max_message, etcd_max_json_items;
	size_t etcd_max_body; /* one answer */
	unsigned etcd_turn_messages;
	double etcd_backoff, etcd_backoff_max; /* s: retry pauses */
	double etcd_attempt_timeout; /* s: one try at one endpoint, at most */
	double etcd_connect_timeout; /* s: connecting to one endpoint */
	char *secret_file;   /* the rendezvous secret (see auth.h), or NULL */
	int store_allow_any; /* workers' store: 1 any peer, 0 the round's */
	int store_port;	     /* workers' store of a multi-node job, 0: free */
	int store_relay;     /* a per-node relay to it: 1, 0, -1 auto */
	int set_ifname;	     /* export *_SOCKET_IFNAME: 0 no, 1 gloo, 2 +nccl */
	int exclude_after;   /* leave out a node after K failures (0: off) */
	double exclude_for;  /* ... for this many seconds */
	char *unknown;	     /* keys crun does not know, "a,b" (or NULL) */
	int quoted;	     /* quotes around the value or items were removed */
};

struct crun_cfg {
	/* Nodes and workers. */
	int nnodes_min, nnodes_max;
	char *nproc_spec;   /* as given: "4", "cpu", "gpu", "auto" */
	int nproc_per_node; /* resolved */
	int standalone;
	int max_restarts;
	double monitor_interval;
	char *start_method;
	char *role;
	char *log_line_prefix_template; /* "" or NULL: torchrun's default */
	const char *print_completion;	/* --print-completion's shell */

	/* Entrypoint. */
	int module;
	int no_python;
	int run_path;
	int virtual_local_rank;
	char *numa_binding; /* --numa_binding as given, or NULL */
	int bind_mode;	    /* enum crun_bind_mode (binding.h) */
	int verbose;	    /* --verbose: say each worker's binding */
	char *event_log;    /* --event_log path, "-" or NULL */
	char **argv;	    /* training script (or binary) and its args */
	int argc;
	char *python;	  /* interpreter of Python workers, NULL: direct exec */
	char *python_why; /* where it came from (for --print-config) */

	/* Rendezvous. */
	char *rdzv_backend; /* "static", "c10d", "etcd", "etcd-v2" */
	char *rdzv_endpoint;
	char *rdzv_id;
	char *rdzv_conf_str;
	struct crun_rdzv_conf rdzv;
	int node_rank;
	char *master_addr;
	int master_port; /* -1 when not given */
	char *local_addr;
	int env_check;		  /* fingerprint.h's CRUN_ENV_CHECK_* */
	double env_check_timeout; /* bound on computing the fingerprint */

	/* Logs. */
	char *log_dir;
	size_t console_buffer; /* bytes held for a slow console reader */
	int console_collapse;  /* --console=collapse */
	int console_job;       /* --console=collapse,job */
	double console_window; /* seconds a collapsed line may wait */
	size_t console_hold;   /* bytes of lines waiting to be collapsed */
	struct crun_std_spec redirects;
	struct crun_std_spec tee;
	char *local_ranks_filter_str;
	int *local_ranks_filter; /* NULL: every rank reaches the console */
	int nfilter;
	/* --duplicate_std{out,err}_filters: [0] stdout, [1] stderr. */
	char **dup_filters[2];
	int ndup_filters[2];

	/* Lifecycle. */
	double shutdown_timeout;
	double checkpoint_grace; /* 0: off (agent/grace.h) */
	double
	    stack_timeout; /* a stack dump before SIGKILL, at most; 0: none */
	double init_warn_after; /* 0: no init diagnosis (agent/initdiag.c) */
	double stall_timeout;	/* 0: no stall detector (agent/stall.c) */
	char *signals_str;
	int signals[32];
	int nsignals;

	/* crun's own. */
	int agent_store;	    /* 1: the agent hosts the workers' store */
	double store_probe_timeout; /* s to ask torch which store (0: never) */
	struct crun_store_limits store;
	/* --config_max_value, --config_max_expansion: bounds of the job
	 * file's ${} expansion (0 until parsed: the defaults) */
	size_t ini_max_value, ini_max_expansion;
	size_t ini_max_bytes; /* --config_max_bytes: the largest job file */
	char *config_file;
	int print_config;
	int slurm; /* -1 auto, 0 off, 1 on */
	/* Inside an srun step: its crun tasks (its nodes, or its tasks when
	 * it runs several per node), which the first round waits for when
	 * --nnodes is a range (0: not in a step), and why. */
	int slurm_agents;
	char slurm_agents_why[192];

	/* The metrics server (agent/metrics.c). */
	int metrics_port;	  /* --metrics_port, -1: none */
	char *metrics_addr;	  /* its listening address */
	int metrics_max_conns;	  /* connections it serves at once */
	int metrics_idle_timeout; /* seconds before an idle one is closed */

	/* Extra environment for workers ([env] in a job file), NAME=VALUE. */
	char **env;
	int nenv;

	/*
	 * Every option as text, indexed by option id: the value (NULL when
	 * unset), where it came from (enum crun_src) and a human-readable
	 * origin
	 * ("--nnodes", "PET_NNODES", "job.ini:3") for error messages and
	 * --print-config. Typed fields above are derived from these by
	 * cfg_finalize, so precedence is decided in one place (cfg_set).
	 */
	char *raw[CRUN_CFG_MAX_OPTS];
	char *origin[CRUN_CFG_MAX_OPTS];
	unsigned char src[CRUN_CFG_MAX_OPTS];
	int nargs_override; /* entrypoint args given after a job file */
};

/** Fill cfg with torchrun's defaults. Release with cfg_release. */
void cfg_init(struct crun_cfg *cfg);

/** Free every string and array cfg owns. */
void cfg_release(struct crun_cfg *cfg);

/**
 * The i-th option of the table (0 <= i): its name (underscore spelling; the
 * dash spelling is accepted too), short letter (0: none) and whether it takes
 * a value. 0, or -1 past the last.
 */
int cfg_option_at(int i, const char **name, char *shrt, int *takes_value);

/** Fill c with the rdzv_conf defaults (every key not given). */
void cfg_rdzv_conf_init(struct crun_rdzv_conf *c);

/** The etcd client's bounds (etcd.h) from c's etcd_* keys. */
void cfg_etcd_limits(const struct crun_rdzv_conf *c, struct etcd_limits *lim);

/** Free the strings of an rdzv_conf (cfg_parse_rdzv_conf sets them). */
void cfg_rdzv_conf_release(struct crun_rdzv_conf *c);

/*
 * The launcher reads a configuration in five steps, in this order:
 * cfg_parse_args (the command line), cfg_apply_env (PET_* / CRUN_*),
 * cfg_load_job (the job file, whose name and bounds may come from either),
 * cfg_apply_slurm, then cfg_finalize. Each step only offers values with
 * cfg_set, so precedence does not depend on the order; cfg_finalize turns
 * the winning texts into the typed fields.
 */

/**
 * Parse a command line (argv[0] is the program name) into cfg. On error
 * returns CRUN_EUSAGE with a one-line message in errmsg naming the flag and
 * the value. Sets *done to 1 if --help, --version or --print-limits was
 * handled (text written to stdout).
 */
int cfg_parse_args(struct crun_cfg *cfg, int argc, char **argv, int *done,
		   char *errmsg, size_t errlen);

/**
 * The job file step: when --config (CRUN_CONFIG, or a first positional
 * ending in .ini) names one, load it with cfg_load_ini, bounded by
 * --config_max_bytes, --config_max_value and --config_max_expansion.
 */
int cfg_load_job(struct crun_cfg *cfg, char **envp, char *errmsg,
		 size_t errlen);

/**
 * Check cross-option rules and resolve derived values (nproc "cpu"/"gpu"/
 * "auto", standalone, static endpoint). CRUN_EUSAGE with errmsg on failure.
 */
int cfg_finalize(struct crun_cfg *cfg, char *errmsg, size_t errlen);

/** Parse "N" or "MIN:MAX". */
int cfg_parse_nnodes(const char *s, int *min, int *max);

/** Parse "3" or "0:1,1:2" into spec. */
int cfg_parse_std(const char *s, struct crun_std_spec *spec);

/** The redirect/tee bits for one local rank. */
int cfg_std_for(const struct crun_std_spec *spec, int local_rank);

/**
 * Parse "k=v,k2=v2" into conf. Bad values fail; unknown keys are accepted,
 * as torchrun does, and listed in conf->unknown (cfg_notices names them).
 */
int cfg_parse_rdzv_conf(const char *s, struct crun_rdzv_conf *conf,
			char *errmsg, size_t errlen);

/** Parse "SIGTERM,SIGUSR1,15" into a list of signal numbers. */
int cfg_parse_signals(const char *s, int *sigs, int max, int *n);

/** Number of NVIDIA GPUs visible (honours CUDA_VISIBLE_DEVICES), no CUDA. */
int cfg_gpu_count(void);

/** Whether local_rank's output reaches the console. */
int cfg_rank_on_console(const struct crun_cfg *cfg, int local_rank);

/**
 * Offer value (owned by the caller, copied) for option id from source src
 * (enum crun_src); it is kept only if no higher-precedence source set it.
 * origin names where it came from for messages. Returns 1 if kept.
 */
int cfg_set(struct crun_cfg *cfg, int id, const char *value, int src,
	    const char *origin);

/**
 * Read PET_* / CRUN_* variables from envp (NULL: environ) into cfg (source:
 * environment).
 */
int cfg_apply_env(struct crun_cfg *cfg, char **envp);

/**
 * With --slurm (or, unless --slurm=0, inside an srun step when no multi-node
 * option was given) offer SLURM's node count, rendezvous id, backend and
 * endpoint, workers per node and SIGUSR1 as derived values
 * (src/cfg/cfg_slurm.c), announcing them and slurm_detect's warnings through
 * log.h, one line each. Call after cfg_load_job, before cfg_finalize.
 * CRUN_EUSAGE with errmsg for --slurm outside SLURM or a malformed SLURM
 * environment.
 */
int cfg_apply_slurm(struct crun_cfg *cfg, char **envp, char *errmsg,
		    size_t len);

/**
 * Load an INI job file into cfg (source: job file). ${VAR} and ${VAR:-dflt}
 * in values expand from envp. Errors fill errmsg as "file:line: message".
 */
int cfg_load_ini(struct crun_cfg *cfg, const char *path, char **envp,
		 char *errmsg, size_t errlen);

/** Parse a size: digits with an optional K, M or G (powers of 1024), > 0. */
int cfg_parse_size(const char *s, size_t *out);

/** Parse a boolean: 1/0, true/false, t/f, yes/no, y/n, on/off. */
int cfg_parse_bool(const char *s, int *out);

/** Split "host[:port]" or "[v6]:port"; *port is -1 when absent. */
int cfg_split_endpoint(const char *ep, char *host, size_t hostlen, int *port);

/** "SIGTERM" for 15, "SIG70" for unnamed numbers (static buffer). */
const char *cfg_signame(int sig);

/** Write the effective configuration and each value's source to fp. */
void cfg_print(const struct crun_cfg *cfg, FILE *fp);

/**
 * One line (log.h) for each torchrun option that crun accepts but handles its
 * own way (--event_log_handler) and for each rdzv_conf key it does not know,
 * so that nothing given is silently ignored.
 */
void cfg_notices(const struct crun_cfg *cfg);

#endif

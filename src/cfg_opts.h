/*
 * Private to the cfg module (cfg.c, cfg_ini.c): the one table of options.
 * Each row: id, long name (underscore spelling; the dash spelling is
 * accepted too), short letter, value type, job-file section, default text,
 * environment fallback (PET_<NAME> for torchrun's flags, CRUN_<NAME> for
 * crun's own), --help group and help text.
 */
#ifndef CRUN_CFG_OPTS_H
#define CRUN_CFG_OPTS_H

#include <assert.h>

#include "crun/cfg.h"

enum { CFG_T_BOOL, CFG_T_STR, CFG_T_INT };
enum { CFG_ENV_NONE, CFG_ENV_PET, CFG_ENV_CRUN };

#define G_SIZE "Worker/node size"
#define G_RDZV "Rendezvous"
#define G_LAUNCH "User-code launch"
#define G_LOGS "Logs"
#define G_LIFE "Lifecycle and signals"
#define G_STORE "Store (crun)"
#define G_JOB "Job files and SLURM (crun)"
#define G_METRICS "Metrics and health (crun)"

#define CFG_OPTS(X)                                                            \
	X(nnodes, "nnodes", 0, STR, "job", "1:1", CFG_ENV_PET, G_SIZE,        \
	  "number of nodes, N or MIN:MAX")                                     \
	X(nproc_per_node, "nproc_per_node", 0, STR, "job", "1", CFG_ENV_PET,  \
	  G_SIZE, "workers per node: a count, cpu, gpu, xpu, auto")             \
	X(rdzv_backend, "rdzv_backend", 0, STR, "rendezvous", "static",       \
	  CFG_ENV_PET, G_RDZV, "rendezvous backend: c10d, etcd (alias etcd-v3) or static")           \
	X(rdzv_endpoint, "rdzv_endpoint", 0, STR, "rendezvous", "",           \
	  CFG_ENV_PET, G_RDZV, "rendezvous HOST[:PORT] (c10d port 29400; etcd: H1:2379,H2,...)")     \
	X(rdzv_id, "rdzv_id", 0, STR, "rendezvous", NULL, CFG_ENV_PET, G_RDZV, \
	  "job id shared by all nodes (default: a fresh unique id)")           \
	X(rdzv_conf, "rdzv_conf", 0, STR, "rendezvous", "", CFG_ENV_PET,      \
	  G_RDZV, "key=value,...: timeouts, secret_file, store_allow, exclude_after, " \
	  "etcd_* limits (crun(1))") \
	X(rdzv_secret_file, "rdzv_secret_file", 0, STR, "rendezvous", NULL,  \
	  CFG_ENV_CRUN, G_RDZV,                                                \
	  "file with the rendezvous secret: agents authenticate (crun(1))")   \
	X(standalone, "standalone", 0, BOOL, "job", NULL, CFG_ENV_PET, G_RDZV,  \
	  "single node: local rendezvous on a free port, unique id")           \
	X(max_restarts, "max_restarts", 0, INT, "job", "0", CFG_ENV_PET,      \
	  G_LIFE, "worker-group restarts before failing")                      \
	X(monitor_interval, "monitor_interval", 0, STR, "job", "0.1",         \
	  CFG_ENV_PET, G_LIFE,                                                 \
	  "accepted for compatibility; crun never polls workers")              \
	X(start_method, "start_method", 0, STR, "job", "spawn", CFG_ENV_PET,  \
	  G_LAUNCH, "accepted for compatibility (spawn, fork, forkserver)")    \
	X(role, "role", 0, STR, "job", "default", CFG_ENV_PET, G_LAUNCH,      \
	  "worker role: ROLE_NAME and the [<role><rank>]: prefix")             \
	X(module, "module", 'm', BOOL, "job", NULL, CFG_ENV_PET, G_LAUNCH,      \
	  "run the entrypoint as python3 -u -m MODULE")                        \
	X(no_python, "no_python", 0, BOOL, "job", NULL, CFG_ENV_PET, G_LAUNCH,  \
	  "execute the entrypoint directly, even a .py file")                  \
	X(run_path, "run_path", 0, BOOL, "job", NULL, CFG_ENV_PET, G_LAUNCH,    \
	  "accepted for compatibility; crun always starts a fresh process")    \
	X(virtual_local_rank, "virtual_local_rank", 0, BOOL, "job", NULL,     \
	  CFG_ENV_PET, G_LAUNCH,                                               \
	  "LOCAL_RANK=0 and only its own GPU visible, for each worker")        \
	X(numa_binding, "numa_binding", 0, STR, "job", NULL, CFG_ENV_PET,      \
	  G_LAUNCH, "bind each worker near its GPU: node, socket, exclusive, "  \
	  "core-complex")                                                      \
	X(cpu_bind, "cpu_bind", 0, STR, "job", "none", CFG_ENV_CRUN, G_LAUNCH,  \
	  "auto: each worker on the cores nearest its GPU, shared fairly; none") \
	X(verbose, "verbose", 0, BOOL, "job", NULL, CFG_ENV_CRUN, G_LOGS,       \
	  "say more: each worker's cpu and memory binding")                   \
	X(log_dir, "log_dir", 0, STR, "logs", NULL, CFG_ENV_PET, G_LOGS,        \
	  "write <dir>/<run_id>_<rand>/attempt_<n>/<rank>/{stdout,stderr}.log") \
	X(redirects, "redirects", 'r', STR, "logs", "0", CFG_ENV_PET, G_LOGS, \
	  "streams to files only: 0 none, 1 out, 2 err, 3 both, or 0:1,1:2")  \
	X(tee, "tee", 't', STR, "logs", "0", CFG_ENV_PET, G_LOGS,             \
	  "streams to files and console, with [<role><rank>]: prefixes")      \
	X(local_ranks_filter, "local_ranks_filter", 0, STR, "logs", "",       \
	  CFG_ENV_PET, G_LOGS, "local ranks whose output reaches the console") \
	X(duplicate_stdout_filters, "duplicate_stdout_filters", 0, STR, "logs", \
	  "", CFG_ENV_PET, G_LOGS,                                             \
	  "copy stdout lines holding any of these (a,b; ,, is a comma) "       \
	  "to <attempt>/filtered_stdout.log")                                  \
	X(duplicate_stderr_filters, "duplicate_stderr_filters", 0, STR, "logs", \
	  "", CFG_ENV_PET, G_LOGS,                                             \
	  "the same for stderr, to <attempt>/filtered_stderr.log")             \
	X(logs_specs, "logs_specs", 0, STR, "logs", NULL, CFG_ENV_PET, G_LOGS,  \
	  "accepted for compatibility; the log layout is built in")            \
	X(event_log_handler, "event_log_handler", 0, STR, "logs", NULL,       \
	  CFG_ENV_PET, G_LOGS,                                                 \
	  "accepted for compatibility; crun says each event on stderr")        \
	X(event_log, "event_log", 0, STR, "logs", NULL, CFG_ENV_CRUN, G_LOGS,   \
	  "one JSON line per state change to this file (- : stderr)")         \
	X(console_buffer, "console_buffer", 0, STR, "logs", "4M",             \
	  CFG_ENV_CRUN, G_LOGS,                                                \
	  "console bytes held for a slow reader before lines are dropped")    \
	X(metrics_port, "metrics_port", 0, INT, "logs", NULL, CFG_ENV_CRUN,   \
	  G_METRICS, "serve /metrics and /healthz on this port (0: a free one)") \
	X(metrics_addr, "metrics_addr", 0, STR, "logs", "0.0.0.0",            \
	  CFG_ENV_CRUN, G_METRICS, "address the metrics server listens on")    \
	X(metrics_max_conns, "metrics_max_conns", 0, INT, "logs", "32",       \
	  CFG_ENV_CRUN, G_METRICS, "concurrent metrics connections")           \
	X(metrics_idle_timeout, "metrics_idle_timeout", 0, INT, "logs", "10", \
	  CFG_ENV_CRUN, G_METRICS,                                             \
	  "seconds an idle metrics connection is kept")                        \
	X(node_rank, "node_rank", 0, INT, "rendezvous", "0", CFG_ENV_PET,     \
	  G_RDZV, "this node's rank (static backend only)")                    \
	X(master_addr, "master_addr", 0, STR, "rendezvous", "127.0.0.1",      \
	  CFG_ENV_PET, G_RDZV, "node 0's address (static backend only)")       \
	X(master_port, "master_port", 0, INT, "rendezvous", NULL,             \
	  CFG_ENV_PET, G_RDZV, "node 0's port (static backend; default 29500)") \
	X(local_addr, "local_addr", 0, STR, "rendezvous", NULL, CFG_ENV_PET,    \
	  G_RDZV, "address naming this node; MASTER_ADDR when it is rank 0")  \
	X(env_check, "env_check", 0, STR, "rendezvous", "warn", CFG_ENV_CRUN, \
	  G_RDZV,                                                              \
	  "nodes whose driver/torch/CUDA/NCCL differ: warn, strict or off")  \
	X(env_check_timeout, "env_check_timeout", 0, STR, "rendezvous", "2",  \
	  CFG_ENV_CRUN, G_RDZV,                                                \
	  "seconds (0-5) the descriptor waits for this node's fingerprint")   \
	X(shutdown_timeout, "shutdown_timeout", 0, STR, "job", "30",          \
	  CFG_ENV_PET, G_LIFE, "seconds between the stop signal and SIGKILL")  \
	X(init_warn_after, "init_warn_after", 0, STR, "job", "30",            \
	  CFG_ENV_CRUN, G_LIFE,                                                \
	  "seconds before naming ranks not yet at the workers' store (0: off)") \
	X(signals_to_handle, "signals_to_handle", 0, STR, "job",              \
	  "SIGTERM,SIGINT,SIGHUP,SIGQUIT", CFG_ENV_PET, G_LIFE,                \
	  "signals forwarded to the workers")                                  \
	X(no_agent_store, "no_agent_store", 0, BOOL, "store", NULL,           \
	  CFG_ENV_CRUN, G_STORE,                                               \
	  "worker rank 0 hosts its own TCPStore, as plain torch.distributed")  \
	X(store_max_key_size, "store_max_key_size", 0, STR, "store", "8K",   \
	  CFG_ENV_CRUN, G_STORE, "largest key the store accepts")             \
	X(store_max_value_size, "store_max_value_size", 0, STR, "store",      \
	  "8M", CFG_ENV_CRUN, G_STORE, "largest value the store accepts")     \
	X(store_max_keys, "store_max_keys", 0, STR, "store", "128K",          \
	  CFG_ENV_CRUN, G_STORE, "most keys in one request")                   \
	X(store_max_memory, "store_max_memory", 0, STR, "store", "1G",        \
	  CFG_ENV_CRUN, G_STORE, "total bytes of keys and values held")        \
	X(store_max_conns, "store_max_conns", 0, STR, "store", "65536",       \
	  CFG_ENV_CRUN, G_STORE, "concurrent store connections")               \
	X(store_max_output, "store_max_output", 0, STR, "store", "64M",       \
	  CFG_ENV_CRUN, G_STORE, "unsent reply bytes per store connection")    \
	X(store_idle_timeout, "store_idle_timeout", 0, STR, "store", "30",    \
	  CFG_ENV_CRUN, G_STORE,                                               \
	  "seconds a stalled store connection is kept")                        \
	X(config, "config", 0, STR, "job", NULL, CFG_ENV_CRUN, G_JOB,           \
	  "read options from an INI job file (also: crun job.ini)")            \
	X(config_max_value, "config_max_value", 0, STR, "job", "1M",          \
	  CFG_ENV_CRUN, G_JOB,                                                 \
	  "longest job-file value after ${} expansion (not settable in the file)") \
	X(config_max_expansion, "config_max_expansion", 0, STR, "job", "4M",  \
	  CFG_ENV_CRUN, G_JOB,                                                 \
	  "most a job file's values may hold after ${} expansion")             \
	X(print_config, "print_config", 0, BOOL, "job", NULL, CFG_ENV_NONE,     \
	  G_JOB, "print the effective configuration and its sources, then exit") \
	X(slurm, "slurm", 0, BOOL, "job", NULL, CFG_ENV_CRUN, G_JOB,            \
	  "take nodes, id and endpoint from SLURM (auto inside a step)")

enum cfg_opt_id {
#define X(id, ...) CFG_##id,
	CFG_OPTS(X)
#undef X
	CFG_NOPTS
};

struct cfg_opt {
	int id;
	const char *name;
	char shrt;
	int type;
	const char *section;
	const char *def;
	int env;
	const char *group;
	const char *help;
};

extern const struct cfg_opt cfg_opts[CFG_NOPTS];

#define assert_opt_id(id) assert((id) >= 0 && (id) < CFG_NOPTS)

/** Find an option by long name (dash or underscore; unique prefix). */
const struct cfg_opt *cfg_opt_by_name(const char *name, size_t len,
				      int *ambiguous);

/** Format a one-line error into errmsg; returns CRUN_EUSAGE. */
int cfg__err(char *errmsg, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/** Split a shell-like word list (quotes, backslashes) into a NULL-ended array. */
int cfg_split_words(const char *s, char ***out, int *n);

#endif

/*
 * Private to the cfg module (cfg*.c): the one table of options and the one
 * table of rdzv_conf keys.
 *
 * An option's row: id, long name (underscore spelling; the dash spelling is
 * accepted too), short letter, value type on the command line, job-file
 * section, default text, environment fallback (PET_<NAME> for torchrun's
 * flags, CRUN_<NAME> for crun's own), --help group, help text; then how
 * cfg_finalize converts the text (conv), the range lo..hi, the crun_cfg
 * field it fills, flags (CFG_F_LIMIT: listed under "Limits") and the unit.
 * Options with conv NONE are converted by hand in cfg_finalize.
 */
#ifndef CRUN_CFG_OPTS_H
#define CRUN_CFG_OPTS_H

#include <assert.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>

#include "crun/cfg.h"

enum { CFG_T_BOOL, CFG_T_STR, CFG_T_INT };
enum { CFG_ENV_NONE, CFG_ENV_PET, CFG_ENV_CRUN };

/*
 * How a value's text becomes its field. INT: an int in lo..hi. SECS: a
 * double >= 0 (> 0 with CFG_F_POSITIVE), at most hi. SIZE: a size_t
 * (cfg_parse_size) at most hi. STR: a copy. BOOL: cfg_parse_bool.
 */
enum { CFG_C_NONE, CFG_C_BOOL, CFG_C_INT, CFG_C_SECS, CFG_C_SIZE, CFG_C_STR };

#define CFG_F_LIMIT 1u	  /* a bound on input: listed in the limits table */
#define CFG_F_POSITIVE 2u /* SECS: 0 is refused */
#define CFG_F_NOFILE 4u	  /* not settable inside a job file */

/* The longest duration any option takes: a year, in seconds. */
#define CFG_MAX_SECONDS (365.0 * 24 * 3600)

#define F(field) offsetof(struct crun_cfg, field)
#define NOF 0

#define G_SIZE "Worker/node size"
#define G_RDZV "Rendezvous"
#define G_LAUNCH "User-code launch"
#define G_LOGS "Logs"
#define G_LIFE "Lifecycle and signals"
#define G_STORE "Store (crun)"
#define G_JOB "Job files and SLURM (crun)"
#define G_METRICS "Metrics and health (crun)"

#define CFG_OPTS(X)                                                            \
	X(nnodes, "nnodes", 0, STR, "job", "1:1", CFG_ENV_PET, G_SIZE,         \
	  "number of nodes, N or MIN:MAX", NONE, 0, 0, NOF, 0, "")             \
	X(nproc_per_node, "nproc_per_node", 0, STR, "job", "1", CFG_ENV_PET,   \
	  G_SIZE, "workers per node: a count, cpu, gpu, xpu, auto", NONE, 0,   \
	  0, NOF, 0, "")                                                       \
	X(rdzv_backend, "rdzv_backend", 0, STR, "rendezvous", "static",        \
	  CFG_ENV_PET, G_RDZV,                                                 \
	  "rendezvous backend: c10d, etcd (alias etcd-v3) or static", NONE, 0, \
	  0, NOF, 0, "")                                                       \
	X(rdzv_endpoint, "rdzv_endpoint", 0, STR, "rendezvous", "",            \
	  CFG_ENV_PET, G_RDZV,                                                 \
	  "rendezvous HOST[:PORT] (c10d port 29400; etcd: H1:2379,H2,...)",    \
	  NONE, 0, 0, NOF, 0, "")                                              \
	X(rdzv_id, "rdzv_id", 0, STR, "rendezvous", NULL, CFG_ENV_PET, G_RDZV, \
	  "job id shared by all nodes, at most 200 bytes (default: a fresh "   \
	  "unique id)",                                                        \
	  NONE, 0, 0, NOF, 0, "")                                              \
	X(rdzv_conf, "rdzv_conf", 0, STR, "rendezvous", "", CFG_ENV_PET,       \
	  G_RDZV,                                                              \
	  "key=value,...: timeouts, secret_file, store_allow, exclude_after, " \
	  "etcd_* limits (crun(1))",                                           \
	  NONE, 0, 0, NOF, 0, "")                                              \
	X(rdzv_secret_file, "rdzv_secret_file", 0, STR, "rendezvous", NULL,    \
	  CFG_ENV_CRUN, G_RDZV,                                                \
	  "file with the rendezvous secret: agents authenticate (crun(1))",    \
	  NONE, 0, 0, NOF, 0, "")                                              \
	X(standalone, "standalone", 0, BOOL, "job", NULL, CFG_ENV_PET, G_RDZV, \
	  "single node: local rendezvous on a free port, unique id", BOOL, 0,  \
	  0, F(standalone), 0, "")                                             \
	X(max_restarts, "max_restarts", 0, INT, "job", "0", CFG_ENV_PET,       \
	  G_LIFE, "worker-group restarts before failing", INT, 0, INT_MAX,     \
	  F(max_restarts), 0, "")                                              \
	X(monitor_interval, "monitor_interval", 0, STR, "job", "0.1",          \
	  CFG_ENV_PET, G_LIFE,                                                 \
	  "accepted for compatibility; crun never polls workers", SECS, 0,     \
	  CFG_MAX_SECONDS, F(monitor_interval), CFG_F_POSITIVE, "seconds")     \
	X(start_method, "start_method", 0, STR, "job", "spawn", CFG_ENV_PET,   \
	  G_LAUNCH, "accepted for compatibility (spawn, fork, forkserver)",    \
	  STR, 0, 0, F(start_method), 0, "")                                   \
	X(role, "role", 0, STR, "job", "default", CFG_ENV_PET, G_LAUNCH,       \
	  "worker role: ROLE_NAME and the [<role><rank>]: prefix", STR, 0, 0,  \
	  F(role), 0, "")                                                      \
	X(module, "module", 'm', BOOL, "job", NULL, CFG_ENV_PET, G_LAUNCH,     \
	  "run the entrypoint as python3 -u -m MODULE", BOOL, 0, 0, F(module), \
	  0, "")                                                               \
	X(no_python, "no_python", 0, BOOL, "job", NULL, CFG_ENV_PET, G_LAUNCH, \
	  "execute the entrypoint directly, even a .py file", BOOL, 0, 0,      \
	  F(no_python), 0, "")                                                 \
	X(run_path, "run_path", 0, BOOL, "job", NULL, CFG_ENV_PET, G_LAUNCH,   \
	  "accepted for compatibility; crun always starts a fresh process",    \
	  BOOL, 0, 0, F(run_path), 0, "")                                      \
	X(virtual_local_rank, "virtual_local_rank", 0, BOOL, "job", NULL,      \
	  CFG_ENV_PET, G_LAUNCH,                                               \
	  "LOCAL_RANK=0 and only its own GPU visible, for each worker", BOOL,  \
	  0, 0, F(virtual_local_rank), 0, "")                                  \
	X(numa_binding, "numa_binding", 0, STR, "job", NULL, CFG_ENV_PET,      \
	  G_LAUNCH,                                                            \
	  "bind each worker near its GPU: node, socket, exclusive, "           \
	  "core-complex",                                                      \
	  STR, 0, 0, F(numa_binding), 0, "")                                   \
	X(cpu_bind, "cpu_bind", 0, STR, "job", "none", CFG_ENV_CRUN, G_LAUNCH, \
	  "auto: each worker on the cores nearest its GPU, shared fairly; "    \
	  "none",                                                              \
	  NONE, 0, 0, NOF, 0, "")                                              \
	X(verbose, "verbose", 0, BOOL, "job", NULL, CFG_ENV_CRUN, G_LOGS,      \
	  "say more: each worker's cpu and memory binding", BOOL, 0, 0,        \
	  F(verbose), 0, "")                                                   \
	X(log_dir, "log_dir", 0, STR, "logs", NULL, CFG_ENV_PET, G_LOGS,       \
	  "write "                                                             \
	  "<dir>/<run_id>_<rand>/attempt_<n>/<rank>/{stdout,stderr}.log",      \
	  STR, 0, 0, F(log_dir), 0, "")                                        \
	X(redirects, "redirects", 'r', STR, "logs", "0", CFG_ENV_PET, G_LOGS,  \
	  "streams to files only: 0 none, 1 out, 2 err, 3 both, or 0:1,1:2",   \
	  NONE, 0, 0, NOF, 0, "")                                              \
	X(tee, "tee", 't', STR, "logs", "0", CFG_ENV_PET, G_LOGS,              \
	  "streams to files and console, with [<role><rank>]: prefixes", NONE, \
	  0, 0, NOF, 0, "")                                                    \
	X(log_line_prefix_template, "log_line_prefix_template", 0, STR,        \
	  "logs", "", CFG_ENV_PET, G_LOGS,                                     \
	  "console line prefix with ${role_name} ${local_rank} ${rank} "      \
	  "${hostname} (else TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE)",          \
	  STR, 0, 0, F(log_line_prefix_template), 0, "")                       \
	X(local_ranks_filter, "local_ranks_filter", 0, STR, "logs", "",        \
	  CFG_ENV_PET, G_LOGS, "local ranks whose output reaches the console", \
	  NONE, 0, 0, NOF, 0, "")                                              \
	X(duplicate_stdout_filters, "duplicate_stdout_filters", 0, STR,        \
	  "logs", "", CFG_ENV_PET, G_LOGS,                                     \
	  "copy stdout lines holding any of these (a,b; ,, is a comma) "       \
	  "to <attempt>/filtered_stdout.log",                                  \
	  NONE, 0, 0, NOF, 0, "")                                              \
	X(duplicate_stderr_filters, "duplicate_stderr_filters", 0, STR,        \
	  "logs", "", CFG_ENV_PET, G_LOGS,                                     \
	  "the same for stderr, to <attempt>/filtered_stderr.log", NONE, 0, 0, \
	  NOF, 0, "")                                                          \
	X(logs_specs, "logs_specs", 0, STR, "logs", NULL, CFG_ENV_PET, G_LOGS, \
	  "accepted for compatibility; the log layout is built in", NONE, 0,   \
	  0, NOF, 0, "")                                                       \
	X(event_log_handler, "event_log_handler", 0, STR, "logs", NULL,        \
	  CFG_ENV_PET, G_LOGS,                                                 \
	  "accepted for compatibility; crun says each event on stderr", NONE,  \
	  0, 0, NOF, 0, "")                                                    \
	X(event_log, "event_log", 0, STR, "logs", NULL, CFG_ENV_CRUN, G_LOGS,  \
	  "one JSON line per state change to this file (- : stderr)", STR, 0,  \
	  0, F(event_log), 0, "")                                              \
	X(console_buffer, "console_buffer", 0, STR, "logs", "4M",              \
	  CFG_ENV_CRUN, G_LOGS,                                                \
	  "console bytes held for a slow reader before lines are dropped",     \
	  SIZE, 1, 1ULL << 30, F(console_buffer), CFG_F_LIMIT, "bytes")         \
	X(console, "console", 0, STR, "logs", "plain", CFG_ENV_CRUN, G_LOGS,   \
	  "plain: every line as its rank printed it; collapse: lines several " \
	  "local ranks print alike shown once, with their ranks; "             \
	  "collapse,job: the whole job's, on the store host's console",        \
	  NONE, 0, 0, NOF, 0, "")                                              \
	X(console_window, "console_window", 0, STR, "logs", "0.2",             \
	  CFG_ENV_CRUN, G_LOGS,                                                \
	  "seconds a collapsed line may wait for the other ranks' twins",      \
	  SECS, 0.001, 10, F(console_window), 0, "seconds")                    \
	X(console_hold, "console_hold", 0, STR, "logs", "4M", CFG_ENV_CRUN,    \
	  G_LOGS,                                                              \
	  "bytes of lines waiting to be collapsed, each rank a share",         \
	  SIZE, 1024, 1ULL << 30, F(console_hold), CFG_F_LIMIT, "bytes")        \
	X(metrics_port, "metrics_port", 0, INT, "logs", NULL, CFG_ENV_CRUN,    \
	  G_METRICS,                                                           \
	  "serve /metrics and /healthz on this port (0: a free one)", INT, 0,  \
	  65535, F(metrics_port), 0, "")                                       \
	X(metrics_addr, "metrics_addr", 0, STR, "logs", "0.0.0.0",             \
	  CFG_ENV_CRUN, G_METRICS, "address the metrics server listens on",    \
	  STR, 0, 0, F(metrics_addr), 0, "")                                   \
	X(metrics_max_conns, "metrics_max_conns", 0, INT, "logs", "32",        \
	  CFG_ENV_CRUN, G_METRICS, "concurrent metrics connections", INT, 1,   \
	  65536, F(metrics_max_conns), CFG_F_LIMIT, "connections")             \
	X(metrics_idle_timeout, "metrics_idle_timeout", 0, INT, "logs", "10",  \
	  CFG_ENV_CRUN, G_METRICS,                                             \
	  "seconds an idle metrics connection is kept", INT, 1, 86400,         \
	  F(metrics_idle_timeout), CFG_F_LIMIT, "seconds")                     \
	X(node_rank, "node_rank", 0, INT, "rendezvous", "0", CFG_ENV_PET,      \
	  G_RDZV, "this node's rank (static backend only)", INT, 0, INT_MAX,   \
	  F(node_rank), 0, "")                                                 \
	X(master_addr, "master_addr", 0, STR, "rendezvous", "127.0.0.1",       \
	  CFG_ENV_PET, G_RDZV, "node 0's address (static backend only)", STR,  \
	  0, 0, F(master_addr), 0, "")                                         \
	X(master_port, "master_port", 0, INT, "rendezvous", NULL, CFG_ENV_PET, \
	  G_RDZV, "node 0's port (static backend; default 29500)", INT, 0,     \
	  65535, F(master_port), 0, "")                                        \
	X(local_addr, "local_addr", 0, STR, "rendezvous", NULL, CFG_ENV_PET,   \
	  G_RDZV, "address naming this node; MASTER_ADDR when it is rank 0",   \
	  STR, 0, 0, F(local_addr), 0, "")                                     \
	X(env_check, "env_check", 0, STR, "rendezvous", "warn", CFG_ENV_CRUN,  \
	  G_RDZV,                                                              \
	  "nodes whose driver/torch/CUDA/NCCL differ: warn, strict or off",    \
	  NONE, 0, 0, NOF, 0, "")                                              \
	X(env_check_timeout, "env_check_timeout", 0, STR, "rendezvous", "2",   \
	  CFG_ENV_CRUN, G_RDZV,                                                \
	  "seconds (0-5) the descriptor waits for this node's fingerprint",    \
	  SECS, 0, 5, F(env_check_timeout), 0, "seconds")                      \
	X(shutdown_timeout, "shutdown_timeout", 0, STR, "job", "30",           \
	  CFG_ENV_PET, G_LIFE, "seconds between the stop signal and SIGKILL",  \
	  SECS, 0, CFG_MAX_SECONDS, F(shutdown_timeout), 0, "seconds")         \
	X(checkpoint_grace, "checkpoint_grace", 0, STR, "job", "0",            \
	  CFG_ENV_CRUN, G_LIFE,                                                \
	  "seconds a rank writing a checkpoint may finish it before its stop " \
	  "signal (0: off)",                                                   \
	  SECS, 0, CFG_MAX_SECONDS, F(checkpoint_grace), 0, "seconds")         \
	X(stack_timeout, "stack_timeout", 0, STR, "job", "5", CFG_ENV_CRUN,    \
	  G_LIFE,                                                              \
	  "seconds a worker's stack dump before SIGKILL may take (0: none)",   \
	  SECS, 0, 60, F(stack_timeout), CFG_F_LIMIT, "seconds")               \
	X(init_warn_after, "init_warn_after", 0, STR, "job", "30",             \
	  CFG_ENV_CRUN, G_LIFE,                                                \
	  "seconds before naming ranks not yet at the workers' store (0: "     \
	  "off)",                                                              \
	  SECS, 0, CFG_MAX_SECONDS, F(init_warn_after), 0, "seconds")          \
	X(stall_timeout, "stall_timeout", 0, STR, "job", "0", CFG_ENV_CRUN,    \
	  G_LIFE,                                                              \
	  "seconds with no rank progressing (CPU or I/O) before the job is "   \
	  "called hung and restarted (0: off)",                                \
	  SECS, 0, CFG_MAX_SECONDS, F(stall_timeout), 0, "seconds")            \
	X(signals_to_handle, "signals_to_handle", 0, STR, "job",               \
	  "SIGTERM,SIGINT,SIGHUP,SIGQUIT", CFG_ENV_PET, G_LIFE,                \
	  "signals forwarded to the workers", NONE, 0, 0, NOF, 0, "")          \
	X(no_agent_store, "no_agent_store", 0, BOOL, "store", NULL,            \
	  CFG_ENV_CRUN, G_STORE,                                               \
	  "worker rank 0 hosts its own TCPStore, as plain torch.distributed",  \
	  NONE, 0, 0, NOF, 0, "")                                              \
	X(store_probe_timeout, "store_probe_timeout", 0, STR, "store", "60",   \
	  CFG_ENV_CRUN, G_STORE,                                               \
	  "seconds the first run on an interpreter may take to ask its torch " \
	  "which workers' store it accepts (0: never ask)",                    \
	  SECS, 0, 3600, F(store_probe_timeout), CFG_F_LIMIT, "seconds")       \
	X(store_max_key_size, "store_max_key_size", 0, STR, "store", "8K",     \
	  CFG_ENV_CRUN, G_STORE, "largest key the store accepts", SIZE, 1,     \
	  1ULL << 30, F(store.max_key), CFG_F_LIMIT, "bytes")                   \
	X(store_max_value_size, "store_max_value_size", 0, STR, "store", "8M", \
	  CFG_ENV_CRUN, G_STORE, "largest value the store accepts", SIZE, 1,   \
	  1ULL << 34, F(store.max_value), CFG_F_LIMIT, "bytes")                 \
	X(store_max_keys, "store_max_keys", 0, STR, "store", "128K",           \
	  CFG_ENV_CRUN, G_STORE, "most keys in one request", SIZE, 1,          \
	  1ULL << 24, F(store.max_keys), CFG_F_LIMIT, "keys")                   \
	X(store_max_memory, "store_max_memory", 0, STR, "store", "1G",         \
	  CFG_ENV_CRUN, G_STORE, "total bytes of keys and values held", SIZE,  \
	  1, 1ULL << 40, F(store.max_memory), CFG_F_LIMIT, "bytes")             \
	X(store_max_conns, "store_max_conns", 0, STR, "store", "65536",        \
	  CFG_ENV_CRUN, G_STORE, "concurrent store connections", SIZE, 1,      \
	  1ULL << 20, F(store.max_conns), CFG_F_LIMIT, "connections")           \
	X(store_max_output, "store_max_output", 0, STR, "store", "64M",        \
	  CFG_ENV_CRUN, G_STORE, "unsent reply bytes per store connection",    \
	  SIZE, 1, 1ULL << 40, F(store.max_output), CFG_F_LIMIT, "bytes")       \
	X(store_idle_timeout, "store_idle_timeout", 0, STR, "store", "30",     \
	  CFG_ENV_CRUN, G_STORE, "seconds a stalled store connection is kept", \
	  SIZE, 1, CFG_MAX_SECONDS, F(store.idle_timeout), CFG_F_LIMIT,        \
	  "seconds")                                                           \
	X(config, "config", 0, STR, "job", NULL, CFG_ENV_CRUN, G_JOB,          \
	  "read options from an INI job file (also: crun job.ini)", STR, 0, 0, \
	  F(config_file), CFG_F_NOFILE, "")                                    \
	X(config_max_value, "config_max_value", 0, STR, "job", "1M",           \
	  CFG_ENV_CRUN, G_JOB,                                                 \
	  "longest job-file value after ${} expansion (not settable in the "   \
	  "file)",                                                             \
	  SIZE, 1, 1ULL << 30, F(ini_max_value), CFG_F_LIMIT | CFG_F_NOFILE,    \
	  "bytes")                                                             \
	X(config_max_expansion, "config_max_expansion", 0, STR, "job", "4M",   \
	  CFG_ENV_CRUN, G_JOB,                                                 \
	  "most a job file's values may hold after ${} expansion", SIZE, 1,    \
	  1ULL << 30, F(ini_max_expansion), CFG_F_LIMIT | CFG_F_NOFILE,         \
	  "bytes")                                                             \
	X(config_max_bytes, "config_max_bytes", 0, STR, "job", "1M",           \
	  CFG_ENV_CRUN, G_JOB,                                                 \
	  "largest job file read (not settable in the file)", SIZE, 1,         \
	  1ULL << 30, F(ini_max_bytes), CFG_F_LIMIT | CFG_F_NOFILE, "bytes")    \
	X(print_config, "print_config", 0, BOOL, "job", NULL, CFG_ENV_NONE,    \
	  G_JOB,                                                               \
	  "print the effective configuration and its sources, then exit",      \
	  BOOL, 0, 0, F(print_config), 0, "")                                  \
	X(slurm, "slurm", 0, BOOL, "job", NULL, CFG_ENV_CRUN, G_JOB,           \
	  "take nodes, id and endpoint from SLURM (auto inside a step)", BOOL, \
	  0, 0, F(slurm), 0, "")

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
	int conv;	  /* CFG_C_* */
	double lo, hi;	  /* the range of INT, SECS and SIZE */
	size_t field;	  /* offset in struct crun_cfg (conv != NONE) */
	unsigned flags;	  /* CFG_F_* */
	const char *unit; /* for the limits table */
};

extern const struct cfg_opt cfg_opts[CFG_NOPTS];

#define assert_opt_id(id) assert((id) >= 0 && (id) < CFG_NOPTS)

/*
 * The rdzv_conf keys, shared by --rdzv_conf and a job file's [rendezvous]
 * keys. Each row: key, kind, range lo..hi, default text (NULL: none), the
 * crun_rdzv_conf field (R: its offset and C type), flags (CFG_F_LIMIT;
 * CFG_F_NOFILE: not a key of [rendezvous]) and help text for the limits
 * table. Kinds: DUR seconds in 0.001..hi; BYTES a size in lo..hi; COUNT and
 * INT an integer in lo..hi (COUNT's message names the range); BOOL; STR a
 * copy; OTHER checked by hand in cfg_rdzv.c; IGNORED accepted, unused.
 */
enum { R_DUR, R_BYTES, R_COUNT, R_INT, R_BOOL, R_STR, R_OTHER, R_IGNORED };
enum { RT_NONE, RT_DBL, RT_INT, RT_LONG, RT_SIZE, RT_UNS, RT_STR };

#define R(field, t) offsetof(struct crun_rdzv_conf, field), t
#define NOR 0, RT_NONE

#define CFG_RDZV_KEYS(X)                                                       \
	X("join_timeout", DUR, 0, CFG_MAX_SECONDS, "600",                      \
	  R(join_timeout, RT_DBL), 0, "")                                      \
	X("last_call_timeout", DUR, 0, CFG_MAX_SECONDS, "30",                  \
	  R(last_call_timeout, RT_DBL), 0, "")                                 \
	X("close_timeout", DUR, 0, CFG_MAX_SECONDS, "30",                      \
	  R(close_timeout, RT_DBL), 0, "")                                     \
	X("read_timeout", DUR, 0, CFG_MAX_SECONDS, "60",                       \
	  R(read_timeout, RT_DBL), 0, "")                                      \
	X("heartbeat_timeout", DUR, 0, CFG_MAX_SECONDS, "0",                   \
	  R(heartbeat_timeout, RT_DBL), CFG_F_LIMIT,                           \
	  "seconds without a heartbeat before a node is lost "                 \
	  "(0: keep_alive_interval x keep_alive_max_attempt)")                 \
	X("keep_alive_interval", DUR, 0, 3600, "0.5",                          \
	  R(keep_alive_interval, RT_DBL), CFG_F_LIMIT,                         \
	  "seconds between a node's heartbeats")                               \
	X("keep_alive_max_attempt", INT, 1, 1000000, "3",                      \
	  R(keep_alive_max_attempt, RT_INT), CFG_F_LIMIT,                      \
	  "heartbeats missed before a node is lost")                           \
	X("heartbeat_rate", INT, 0, 100000000, "2000",                         \
	  R(heartbeat_rate, RT_LONG), CFG_F_LIMIT,                             \
	  "heartbeats per second the store host takes (0: no bound)")          \
	X("is_host", BOOL, 0, 0, "-1", R(is_host, RT_INT), 0, "")              \
	X("store_type", OTHER, 0, 0, NULL, R(store_type, RT_STR), 0, "")       \
	X("timeout", DUR, 0, CFG_MAX_SECONDS, "0", R(timeout, RT_DBL), 0, "")  \
	X("store_allow", OTHER, 0, 0, NULL, NOR, 0, "")                        \
	X("store_port", INT, 1, 65535, NULL, R(store_port, RT_INT), 0, "")     \
	X("store_relay", OTHER, 0, 0, "-1", R(store_relay, RT_INT), 0, "")     \
	X("set_socket_ifname", OTHER, 0, 0, NULL, NOR, 0, "")                  \
	X("exclude_after", COUNT, 0, CFG_MAX_EXCLUDE_AFTER, NULL,                  \
	  R(exclude_after, RT_INT), 0, "")                                     \
	X("exclude_for", DUR, 0, CFG_MAX_SECONDS, "300",                       \
	  R(exclude_for, RT_DBL), 0, "")                                       \
	X("etcd_prefix", OTHER, 0, 0, "/crun", R(etcd_prefix, RT_STR), 0, "")  \
	X("protocol", OTHER, 0, 0, NULL, NOR, 0, "")                           \
	X("cacert", STR, 0, 0, NULL, R(cacert, RT_STR), 0, "")                 \
	X("cert", STR, 0, 0, NULL, R(cert, RT_STR), 0, "")                     \
	X("key", STR, 0, 0, NULL, R(key, RT_STR), 0, "")                       \
	X("user", STR, 0, 0, NULL, R(user, RT_STR), 0, "")                     \
	X("password_file", STR, 0, 0, NULL, R(password_file, RT_STR), 0, "")   \
	X("lease_ttl", DUR, 0, CFG_MAX_SECONDS, "10", R(lease_ttl, RT_DBL), 0, \
	  "")                                                                  \
	X("etcd_turn_bytes", BYTES, 4096, 1ul << 30, "256K",                   \
	  R(etcd_turn_bytes, RT_SIZE), CFG_F_LIMIT,                            \
	  "bytes one etcd transfer takes per loop turn")                       \
	X("etcd_turn_messages", COUNT, 1, 100000000, "128",                    \
	  R(etcd_turn_messages, RT_UNS), CFG_F_LIMIT,                          \
	  "etcd watch messages taken per loop turn")                           \
	X("etcd_max_message", BYTES, 4096, 1ul << 30, "8M",                    \
	  R(etcd_max_message, RT_SIZE), CFG_F_LIMIT,                           \
	  "largest etcd watch message")                                        \
	X("etcd_max_body", BYTES, 4096, 1ul << 30, "64M",                      \
	  R(etcd_max_body, RT_SIZE), CFG_F_LIMIT, "largest etcd answer")       \
	X("etcd_max_json_items", COUNT, 1, 100000000, "65536",                 \
	  R(etcd_max_json_items, RT_SIZE), CFG_F_LIMIT,                        \
	  "JSON values (strings and numbers too) in one etcd answer or "       \
	  "message")                                                           \
	X("etcd_backoff", DUR, 0, 60, "0.1", R(etcd_backoff, RT_DBL), 0, "")   \
	X("etcd_backoff_max", DUR, 0, 600, "2", R(etcd_backoff_max, RT_DBL),   \
	  0, "")                                                               \
	X("etcd_attempt_timeout", DUR, 0, 3600, "3",                           \
	  R(etcd_attempt_timeout, RT_DBL), CFG_F_LIMIT,                        \
	  "seconds one etcd request waits for one endpoint")                   \
	X("etcd_connect_timeout", DUR, 0, 3600, "1",                           \
	  R(etcd_connect_timeout, RT_DBL), CFG_F_LIMIT,                        \
	  "seconds connecting to one etcd endpoint takes "                     \
	  "(at most etcd_attempt_timeout)")                                    \
	X("local_addr", STR, 0, 0, NULL, R(local_addr, RT_STR), CFG_F_NOFILE,  \
	  "")                                                                  \
	X("secret_file", STR, 0, 0, NULL, R(secret_file, RT_STR),              \
	  CFG_F_NOFILE, "")                                                    \
	X("ca_cert", STR, 0, 0, NULL, R(cacert, RT_STR), CFG_F_NOFILE, "")     \
	X("ssl_cert", STR, 0, 0, NULL, R(cert, RT_STR), CFG_F_NOFILE, "")      \
	X("ssl_cert_key", STR, 0, 0, NULL, R(key, RT_STR), CFG_F_NOFILE, "")   \
	X("rank", IGNORED, 0, 0, NULL, NOR, CFG_F_NOFILE, "")                  \
	X("use_libuv", IGNORED, 0, 0, NULL, NOR, CFG_F_NOFILE, "")

#define X_ONE(...) +1
enum { CFG_NRDZV_KEYS = 0 CFG_RDZV_KEYS(X_ONE) };
#undef X_ONE

struct cfg_rdzv_key {
	const char *key;
	int kind;	  /* R_* */
	double lo, hi;	  /* the range of DUR, BYTES, COUNT, INT */
	const char *def;  /* default text, NULL: none (0 / unset) */
	size_t field;	  /* offset in struct crun_rdzv_conf */
	int ftype;	  /* RT_*: the field's C type */
	unsigned flags;	  /* CFG_F_* */
	const char *help; /* for the limits table */
};

extern const struct cfg_rdzv_key cfg_rdzv_keys[CFG_NRDZV_KEYS];
#define cfg_nrdzv_keys ((int)CFG_NRDZV_KEYS)

/*
 * Bounds on input that are not options, listed in the limits table beside
 * them: what, the value (a libcrun header's constant) and its unit.
 */
#define CFG_FIXED_LIMITS(X)                                                    \
	X("names in one SLURM hostlist", HOSTLIST_MAX_HOSTS, "")               \
	X("names in one LO-HI range of a hostlist", HOSTLIST_MAX_RANGE, "")    \
	X("items in one bracket group of a hostlist", HOSTLIST_MAX_RANGES, "") \
	X("bytes in one host name of a hostlist", HOSTLIST_MAX_NAME, "bytes")  \
	X("bytes in a --rdzv_id (a longer one is refused)", RDZV_ID_MAX,       \
	  "bytes")                                                             \
	X("live FileTimer timers (more are refused)",                          \
	  CRUN_FILETIMER_MAX_TIMERS, "")                                       \
	X("bytes in a FileTimer scope", CRUN_FILETIMER_MAX_SCOPE, "bytes")     \
	X("seconds a FileTimer wait is armed for (later expirations are "      \
	  "looked at again then)",                                             \
	  CRUN_FILETIMER_MAX_ARM, "seconds")

/*
 * Bounds derived from the options, listed after them: what, and the rule.
 */
#define CFG_DERIVED_LIMITS(X)                                                  \
	X("largest request the store reads",                                   \
	  "2 x store_max_value_size + store_max_key_size + 64 bytes")          \
	X("unsent reply bytes of one store connection while several have "     \
	  "some",                                                              \
	  "store_max_output, at most store_max_memory / 2 / their number")

/** The rdzv_conf key named n (exactly), or NULL. */
const struct cfg_rdzv_key *cfg_rdzv_key_named(const char *n);

/** Find an option by long name (dash or underscore; unique prefix). */
const struct cfg_opt *cfg_opt_by_name(const char *name, size_t len,
				      int *ambiguous);

/** Format a one-line error into errmsg; returns CRUN_EUSAGE. */
int cfg__err(char *errmsg, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/**
 * Convert option id's text (when set) into its field, as its row says;
 * CRUN_EUSAGE with a message naming the option and the value's origin.
 */
int cfg__convert(struct crun_cfg *cfg, int id, char *errmsg, size_t len);

/** "ORIGIN: invalid value 'V': why", CRUN_EUSAGE. */
int cfg__bad(const struct crun_cfg *cfg, int id, char *errmsg, size_t len,
	     const char *why);

/** Integer / double parsers of the whole string; 0 or -1. */
int cfg__parse_long(const char *s, long lo, long hi, long *out);
int cfg__parse_double(const char *s, double lo, double *out);

/** strdup / realloc that abort when out of memory. */
char *cfg__strdup(const char *s);
void *cfg__realloc(void *p, size_t n);

/** torchrun's --duplicate_*_filters ("a,b", ",," a comma); *n -1 on error. */
int cfg__parse_dup_filters(const char *s, char ***out, int *n);

/** --local_ranks_filter "0,2" into an array. */
int cfg__parse_filter(const char *s, int **out, int *n);

/** Replace *slot with a copy of s (or NULL). */
void cfg__set_str(char **slot, const char *s);

/**
 * The --help text, and its "Limits" section alone: every CFG_F_LIMIT option
 * and rdzv_conf key and CFG_FIXED_LIMITS, as format "text" (--help),
 * "markdown" (the README) or "man" (crun(1)).
 */
void cfg__usage(FILE *fp);
void cfg__print_limits(FILE *fp, const char *format);

/** Split a shell-like word list (quotes, backslashes): a NULL-ended array. */
int cfg_split_words(const char *s, char ***out, int *n);

#endif

/*
 * The launch configuration. One table lists every option once: its spellings,
 * its job-file section, its default, its environment fallback and its help
 * text. Command line, environment and job file all go through cfg_set, which
 * keeps the value with the highest-precedence source; cfg_finalize then turns
 * the winning texts into typed fields and checks the rules between options.
 * Error messages name the option and where its value came from.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "crun/binding.h"
#include "crun/cfg.h"
#include "crun/err.h"
#include "crun/etcd.h"
#include "crun/fingerprint.h"
#include "crun/gpu.h"
#include "crun/rdzv_records.h"
#include "crun/banned.h"
#include "cfg_opts.h"

extern char **environ;

const struct cfg_opt cfg_opts[CFG_NOPTS] = {
#define X(id, name, shrt, type, sect, def, env, group, help)                   \
	{CFG_##id, name, shrt, CFG_T_##type, sect, def, env, group, help},
    CFG_OPTS(X)
#undef X
};

/* Format into errmsg; returns CRUN_EUSAGE so callers can `return
 * cfg__err(...)`. */
int cfg__err(char *errmsg, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (errmsg && len) {
		va_start(ap, fmt);
		vsnprintf(errmsg, len, fmt, ap);
		va_end(ap);
		/* One line, whatever the value quoted in it holds. */
		for (char *p = errmsg; *p; p++)
			if ((unsigned char)*p < 0x20 || *p == 0x7f)
				*p = '?';
	}
	return CRUN_EUSAGE;
}

static char *xstrdup(const char *s)
{
	char *p = strdup(s);

	if (p == NULL)
		abort();
	return p;
}

static void *xrealloc(void *p, size_t n)
{
	p = realloc(p, n);
	if (p == NULL)
		abort();
	return p;
}

/* Replace *slot with a copy of s (or NULL). */
static void set_str(char **slot, const char *s)
{
	free(*slot);
	*slot = s ? xstrdup(s) : NULL;
}

void cfg_init(struct crun_cfg *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->master_port = -1;
	cfg->slurm = -1;
	cfg->metrics_port = -1;
	cfg->agent_store = 1;
	cfg->rdzv.is_host = -1;
}

void cfg_rdzv_conf_release(struct crun_rdzv_conf *c)
{
	free(c->store_type);
	free(c->local_addr);
	free(c->etcd_prefix);
	free(c->cacert);
	free(c->cert);
	free(c->key);
	free(c->user);
	free(c->password_file);
	free(c->secret_file);
	free(c->unknown);
	c->unknown = NULL;
	c->store_type = c->local_addr = c->etcd_prefix = NULL;
	c->cacert = c->cert = c->key = c->user = c->password_file = NULL;
	c->secret_file = NULL;
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
	set_str(&cfg->raw[id], value);
	set_str(&cfg->origin[id], origin);
	cfg->src[id] = (unsigned char)src;
	return 1;
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

/* --- value parsers ------------------------------------------------------ */

static int parse_long(const char *s, long lo, long hi, long *out)
{
	char *end;
	long v;

	if (s == NULL || *s == '\0' || isspace((unsigned char)*s))
		return -1;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end != '\0' || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

/* The longest duration any option takes: a year, in seconds. */
#define CFG_MAX_SECONDS (365.0 * 24 * 3600)

static int parse_double(const char *s, double lo, double *out)
{
	char *end;
	double v;

	if (s == NULL || *s == '\0' || isspace((unsigned char)*s))
		return -1;
	errno = 0;
	v = strtod(s, &end);
	if (errno || *end != '\0' || !isfinite(v) || v < lo)
		return -1;
	*out = v;
	return 0;
}

int cfg_parse_bool(const char *s, int *out)
{
	static const char *yes[] = {"1", "true", "t", "yes", "y", "on"};
	static const char *no[] = {"0", "false", "f", "no", "n", "off"};
	size_t i;

	for (i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		if (strcasecmp(s, yes[i]) == 0) {
			*out = 1;
			return 0;
		}
		if (strcasecmp(s, no[i]) == 0) {
			*out = 0;
			return 0;
		}
	}
	return -1;
}

int cfg_parse_nnodes(const char *s, int *min, int *max)
{
	const char *colon = strchr(s, ':');
	long lo, hi;
	char buf[32];

	if (colon == NULL) {
		if (parse_long(s, 1, INT_MAX, &lo))
			return CRUN_EUSAGE;
		*min = *max = (int)lo;
		return 0;
	}
	if (strchr(colon + 1, ':') || (size_t)(colon - s) >= sizeof(buf))
		return CRUN_EUSAGE;
	memcpy(buf, s, (size_t)(colon - s));
	buf[colon - s] = '\0';
	if (parse_long(buf, 1, INT_MAX, &lo) ||
	    parse_long(colon + 1, 1, INT_MAX, &hi) || lo > hi)
		return CRUN_EUSAGE;
	*min = (int)lo;
	*max = (int)hi;
	return 0;
}

int cfg_parse_std(const char *s, struct crun_std_spec *spec)
{
	const char *p = s;
	long r, v;

	memset(spec, 0, sizeof(*spec));
	if (parse_long(s, 0, 3, &v) == 0) {
		spec->all = (int)v;
		return 0;
	}
	/* A map "LOCAL_RANK:VALUE,…"; ranks not named get 0 (as torchrun). */
	while (*p) {
		char *end;

		if (!isdigit((unsigned char)*p))
			return CRUN_EUSAGE;
		errno = 0;
		r = strtol(p, &end, 10);
		if (errno || r >= CRUN_MAX_LOCAL_RANKS || *end != ':')
			return CRUN_EUSAGE;
		p = end + 1;
		if (*p < '0' || *p > '3')
			return CRUN_EUSAGE;
		v = *p++ - '0';
		if (*p != ',' && *p != '\0')
			return CRUN_EUSAGE;
		if (*p == ',' && *++p == '\0')
			return CRUN_EUSAGE;
		if (spec->nmap ==
		    (int)(sizeof(spec->rank) / sizeof(spec->rank[0])))
			return CRUN_EUSAGE;
		spec->rank[spec->nmap] = (int)r;
		spec->val[spec->nmap++] = (unsigned char)v;
	}
	return spec->nmap ? 0 : CRUN_EUSAGE;
}

int cfg_std_for(const struct crun_std_spec *spec, int local_rank)
{
	int i;

	for (i = spec->nmap - 1; i >= 0; i--)
		if (spec->rank[i] == local_rank)
			return spec->val[i];
	return spec->all;
}

static const struct {
	const char *name;
	int sig;
} signames[] = {
    {"SIGHUP", SIGHUP},	  {"SIGINT", SIGINT},	{"SIGQUIT", SIGQUIT},
    {"SIGTERM", SIGTERM}, {"SIGUSR1", SIGUSR1}, {"SIGUSR2", SIGUSR2},
    {"SIGCONT", SIGCONT}, {"SIGALRM", SIGALRM}, {"SIGWINCH", SIGWINCH},
    {"SIGXCPU", SIGXCPU}, {"SIGPWR", SIGPWR},	{"SIGTSTP", SIGTSTP},
};

int cfg_parse_signals(const char *s, int *sigs, int max, int *n)
{
	char buf[256], *tok, *save = NULL;
	size_t i;

	if (strlen(s) >= sizeof(buf))
		return CRUN_EUSAGE;
	memcpy(buf, s, strlen(s) + 1);
	*n = 0;
	for (tok = strtok_r(buf, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		long v = -1;

		while (isspace((unsigned char)*tok))
			tok++;
		for (i = strlen(tok);
		     i > 0 && isspace((unsigned char)tok[i - 1]); i--)
			tok[i - 1] = '\0';
		for (i = 0; i < sizeof(signames) / sizeof(signames[0]); i++) {
			if (strcasecmp(tok, signames[i].name) == 0 ||
			    strcasecmp(tok, signames[i].name + 3) == 0)
				v = signames[i].sig;
		}
		/* SIGKILL and SIGSTOP cannot be trapped; SIGCHLD is crun's. */
		if (v < 0 && parse_long(tok, 1, 64, &v))
			return CRUN_EUSAGE;
		if (v == SIGKILL || v == SIGSTOP || v == SIGCHLD || *n >= max)
			return CRUN_EUSAGE;
		sigs[(*n)++] = (int)v;
	}
	return *n ? 0 : CRUN_EUSAGE;
}

const char *cfg_signame(int sig)
{
	static char buf[16];
	size_t i;

	for (i = 0; i < sizeof(signames) / sizeof(signames[0]); i++)
		if (signames[i].sig == sig)
			return signames[i].name;
	switch (sig) {
	case SIGKILL:
		return "SIGKILL";
	case SIGSEGV:
		return "SIGSEGV";
	case SIGABRT:
		return "SIGABRT";
	case SIGBUS:
		return "SIGBUS";
	case SIGFPE:
		return "SIGFPE";
	case SIGILL:
		return "SIGILL";
	case SIGPIPE:
		return "SIGPIPE";
	case SIGSTOP:
		return "SIGSTOP";
	case SIGTRAP:
		return "SIGTRAP";
	case SIGSYS:
		return "SIGSYS";
	}
	snprintf(buf, sizeof(buf), "SIG%d", sig);
	return buf;
}

/* Append KEY to the comma-separated list *list (once). */
static void add_unknown(char **list, const char *key)
{
	size_t a = *list ? strlen(*list) : 0, b = strlen(key);
	const char *p = *list;

	while (p && *p) {
		size_t n = strcspn(p, ",");

		if (n == b && memcmp(p, key, n) == 0)
			return;
		p += n + (p[n] == ',');
	}
	*list = xrealloc(*list, a + b + 2);
	if (a)
		(*list)[a++] = ',';
	memcpy(*list + a, key, b + 1);
}

/* rdzv_conf keys: name, offset kind. */
int cfg_parse_rdzv_conf(const char *s, struct crun_rdzv_conf *conf,
			char *errmsg, size_t errlen)
{
	char *copy = xstrdup(s), *tok, *save = NULL;
	int rc = 0;

	for (tok = strtok_r(copy, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(tok, '='), *k = tok, *v, *e;
		double d;
		long l;
		int b;

		if (eq == NULL) {
			rc = cfg__err(errmsg, errlen,
				      "rdzv_conf: '%s' is not key=value", tok);
			goto out;
		}
		*eq = '\0';
		v = eq + 1;
		while (isspace((unsigned char)*k))
			k++;
		for (e = eq; e > k && isspace((unsigned char)e[-1]); e--)
			e[-1] = '\0';
		while (isspace((unsigned char)*v))
			v++;
		for (e = v + strlen(v); e > v && isspace((unsigned char)e[-1]);
		     e--)
			e[-1] = '\0';
		if (*k == '\0' || *v == '\0') {
			rc = cfg__err(
			    errmsg, errlen,
			    "rdzv_conf: empty key or value in '%s=%s'", k, v);
			goto out;
		}
#define DUR(name, field, hi)                                                   \
	if (strcmp(k, name) == 0) {                                            \
		if (parse_double(v, 0, &d) || d <= 0)                          \
			goto bad;                                              \
		if (d < 0.001 || d > (hi)) {                                   \
			rc = cfg__err(errmsg, errlen,                          \
				      "rdzv_conf: '%s' for '%s' is out of "    \
				      "range (0.001..%.0f seconds)",           \
				      v, k, (double)(hi));                     \
			goto out;                                              \
		}                                                              \
		conf->field = d;                                               \
		continue;                                                      \
	}
		DUR("join_timeout", join_timeout, CFG_MAX_SECONDS)
		DUR("last_call_timeout", last_call_timeout, CFG_MAX_SECONDS)
		DUR("close_timeout", close_timeout, CFG_MAX_SECONDS)
		DUR("read_timeout", read_timeout, CFG_MAX_SECONDS)
		DUR("heartbeat_timeout", heartbeat_timeout, CFG_MAX_SECONDS)
		DUR("keep_alive_interval", keep_alive_interval, 3600)
		DUR("timeout", timeout, CFG_MAX_SECONDS)
		DUR("lease_ttl", lease_ttl, CFG_MAX_SECONDS)
		DUR("exclude_for", exclude_for, CFG_MAX_SECONDS)
		DUR("etcd_backoff", etcd_backoff, 60)
		DUR("etcd_backoff_max", etcd_backoff_max, 600)
#undef DUR
#define SIZE(name, field, lo, hi)                                              \
	if (strcmp(k, name) == 0) {                                            \
		size_t z;                                                      \
		if (cfg_parse_size(v, &z) || z < (lo) || z > (hi)) {           \
			rc = cfg__err(errmsg, errlen,                          \
				      "rdzv_conf: '%s' for '%s' is out of "    \
				      "range (%lu..%lu bytes)",                \
				      v, k, (unsigned long)(lo),               \
				      (unsigned long)(hi));                    \
			goto out;                                              \
		}                                                              \
		conf->field = z;                                               \
		continue;                                                      \
	}
		SIZE("etcd_turn_bytes", etcd_turn_bytes, 4096, 1ul << 30)
		SIZE("etcd_max_message", etcd_max_message, 4096, 1ul << 30)
#undef SIZE
		if (strcmp(k, "etcd_max_json_items") == 0 ||
		    strcmp(k, "etcd_turn_messages") == 0) {
			if (parse_long(v, 1, 100000000, &l)) {
				rc = cfg__err(errmsg, errlen,
					      "rdzv_conf: '%s' for '%s' is not "
					      "a count in 1..100000000",
					      v, k);
				goto out;
			}
			if (strcmp(k, "etcd_max_json_items") == 0)
				conf->etcd_max_json_items = (size_t)l;
			else
				conf->etcd_turn_messages = (unsigned)l;
		} else if (strcmp(k, "exclude_after") == 0) {
			if (parse_long(v, 0, RDZV_MAX_FAILS, &l)) {
				rc = cfg__err(errmsg, errlen,
					      "rdzv_conf: '%s' for "
					      "'exclude_after' is not a count "
					      "in 0..%d (0: off)",
					      v, RDZV_MAX_FAILS);
				goto out;
			}
			conf->exclude_after = (int)l;
		} else if (strcmp(k, "keep_alive_max_attempt") == 0) {
			if (parse_long(v, 1, 1000000, &l))
				goto bad;
			conf->keep_alive_max_attempt = (int)l;
		} else if (strcmp(k, "heartbeat_rate") == 0) {
			if (parse_long(v, 0, 100000000, &l))
				goto bad;
			conf->heartbeat_rate = l;
		} else if (strcmp(k, "is_host") == 0) {
			if (cfg_parse_bool(v, &b))
				goto bad;
			conf->is_host = b;
		} else if (strcmp(k, "store_type") == 0) {
			if (strcmp(v, "tcp") != 0)
				goto bad;
			set_str(&conf->store_type, v);
		} else if (strcmp(k, "local_addr") == 0) {
			set_str(&conf->local_addr, v);
		} else if (strcmp(k, "etcd_prefix") == 0) {
			if (*v != '/' || strlen(v) > 200)
				goto bad;
			set_str(&conf->etcd_prefix, v);
		} else if (strcmp(k, "protocol") == 0) {
			if (strcmp(v, "http") && strcmp(v, "https"))
				goto bad;
			conf->https = strcmp(v, "https") == 0;
		} else if (strcmp(k, "cacert") == 0 ||
			   strcmp(k, "ca_cert") == 0) {
			set_str(&conf->cacert, v);
		} else if (strcmp(k, "cert") == 0 ||
			   strcmp(k, "ssl_cert") == 0) {
			set_str(&conf->cert, v);
		} else if (strcmp(k, "key") == 0 ||
			   strcmp(k, "ssl_cert_key") == 0) {
			set_str(&conf->key, v);
		} else if (strcmp(k, "user") == 0) {
			set_str(&conf->user, v);
		} else if (strcmp(k, "password_file") == 0) {
			set_str(&conf->password_file, v);
		} else if (strcmp(k, "secret_file") == 0) {
			set_str(&conf->secret_file, v);
		} else if (strcmp(k, "set_socket_ifname") == 0) {
			if (strcmp(v, "nccl") == 0)
				conf->set_ifname = 2;
			else if (cfg_parse_bool(v, &b) == 0)
				conf->set_ifname = b;
			else
				goto bad;
		} else if (strcmp(k, "store_port") == 0) {
			if (parse_long(v, 1, 65535, &l))
				goto bad;
			conf->store_port = (int)l;
		} else if (strcmp(k, "store_allow") == 0) {
			if (strcmp(v, "any") != 0 && strcmp(v, "round") != 0)
				goto bad;
			conf->store_allow_any = strcmp(v, "any") == 0;
		} else if (strcmp(k, "rank") == 0 ||
			   strcmp(k, "use_libuv") == 0) {
			/* Accepted for torchrun compatibility; crun needs
			 * neither. */
		} else {
			/* torchrun hands the keys to its rendezvous handler,
			 * which ignores those it does not know: kept here for
			 * cfg_notices to name. */
			add_unknown(&conf->unknown, k);
		}
		continue;
	bad:
		rc = cfg__err(errmsg, errlen,
			      "rdzv_conf: invalid value '%s' for '%s'", v, k);
		goto out;
	}
out:
	free(copy);
	return rc;
}

/* GPUs that "gpu" counts: CUDA devices, which ROCm builds also report. */
int cfg_gpu_count(void)
{
	return gpu_count(CRUN_GPU_NVIDIA) + gpu_count(CRUN_GPU_AMD);
}

/*
 * torchrun's duplicate filters: a comma-separated list in which ",," stands
 * for a literal comma; empty entries are dropped. *n is -1 on error.
 */
static int parse_dup_filters(const char *s, char ***out, int *n)
{
	char buf[257];
	size_t k = 0;

	for (int i = 0; i < *n; i++)
		free((*out)[i]);
	free(*out);
	*out = NULL;
	*n = 0;
	for (;; s++) {
		if (*s == ',' && s[1] == ',') {
			s++; /* a literal comma */
		} else if (*s == ',' || *s == '\0') {
			if (k > 0) {
				if (*n == 64)
					goto bad;
				*out = xrealloc(*out, sizeof(char *) *
							  (size_t)(*n + 1));
				buf[k] = '\0';
				(*out)[(*n)++] = xstrdup(buf);
				k = 0;
			}
			if (*s == '\0')
				return 0;
			continue;
		}
		if (k == sizeof(buf) - 1)
			goto bad;
		buf[k++] = *s;
	}
bad:
	for (int i = 0; i < *n; i++)
		free((*out)[i]);
	free(*out);
	*out = NULL;
	*n = -1;
	return -1;
}

static int parse_filter(const char *s, int **out, int *n)
{
	char *copy = xstrdup(s), *tok, *save = NULL;
	int cap = 8, *v = malloc(sizeof(int) * (size_t)cap);

	*n = 0;
	for (tok = strtok_r(copy, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		long r;

		while (isspace((unsigned char)*tok))
			tok++;
		if (parse_long(tok, 0, CRUN_MAX_LOCAL_RANKS - 1, &r)) {
			free(copy);
			free(v);
			return CRUN_EUSAGE;
		}
		if (*n == cap) {
			cap *= 2;
			v = realloc(v, sizeof(int) * (size_t)cap);
		}
		v[(*n)++] = (int)r;
	}
	free(copy);
	*out = v;
	return 0;
}

int cfg_rank_on_console(const struct crun_cfg *cfg, int local_rank)
{
	int i;

	if (cfg->local_ranks_filter == NULL)
		return 1;
	for (i = 0; i < cfg->nfilter; i++)
		if (cfg->local_ranks_filter[i] == local_rank)
			return 1;
	return 0;
}

/* host[:port] or [v6]:port; port 0..65535. */
int cfg_split_endpoint(const char *ep, char *host, size_t hostlen, int *port)
{
	const char *h = ep, *colon;
	size_t n;
	long p;

	*port = -1;
	if (*ep == '[') {
		const char *close = strchr(ep, ']');

		if (close == NULL)
			return CRUN_EUSAGE;
		h = ep + 1;
		n = (size_t)(close - h);
		colon = close[1] == ':' ? close + 1 : NULL;
		if (close[1] != '\0' && colon == NULL)
			return CRUN_EUSAGE;
	} else {
		colon = strrchr(ep, ':');
		if (colon && strchr(ep, ':') != colon)
			colon = NULL; /* a bare IPv6 address */
		n = colon ? (size_t)(colon - ep) : strlen(ep);
	}
	if (n == 0 || n >= hostlen)
		return CRUN_EUSAGE;
	memcpy(host, h, n);
	host[n] = '\0';
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)host[i];

		if (!isalnum(c) && c != '-' && c != '.' && c != '_' &&
		    c != ':' && c != '%')
			return CRUN_EUSAGE;
	}
	if (colon) {
		if (parse_long(colon + 1, 0, 65535, &p))
			return CRUN_EUSAGE;
		*port = (int)p;
	}
	return 0;
}

/* Split a job file's args= value like a shell would: quotes and backslash. */
int cfg_split_words(const char *s, char ***out, int *n)
{
	size_t len = strlen(s);
	char *word = malloc(len + 1), **v = NULL;
	int cap = 0, have = 0;
	size_t w = 0;
	char q = 0;

	*n = 0;
	for (const char *p = s;; p++) {
		char c = *p;

		if (c == '\0' || (!q && isspace((unsigned char)c))) {
			if (c == '\0' && q) {
				free(word);
				for (int i = 0; i < *n; i++)
					free(v[i]);
				free(v);
				return CRUN_EUSAGE;
			}
			if (have) {
				if (*n + 1 >= cap) {
					cap = cap ? cap * 2 : 8;
					v = realloc(v, sizeof(char *) *
							   (size_t)cap);
				}
				word[w] = '\0';
				v[(*n)++] = xstrdup(word);
				w = 0;
				have = 0;
			}
			if (c == '\0')
				break;
			continue;
		}
		have = 1;
		if (q) {
			if (c == q)
				q = 0;
			else if (c == '\\' && q == '"' && p[1])
				word[w++] = *++p;
			else
				word[w++] = c;
		} else if (c == '"' || c == '\'') {
			q = c;
		} else if (c == '\\' && p[1]) {
			word[w++] = *++p;
		} else {
			word[w++] = c;
		}
	}
	free(word);
	if (v == NULL)
		v = calloc(1, sizeof(char *));
	v[*n] = NULL;
	*out = v;
	return 0;
}

/* --- command line ------------------------------------------------------- */

/* One option's line of --help. */
static void usage_opt(FILE *fp, const struct cfg_opt *o)
{
	char spell[96];
	int n;

	n = snprintf(spell, sizeof(spell), "  %s%c%s--%s", o->shrt ? "-" : "",
		     o->shrt ? o->shrt : ' ', o->shrt ? ", " : "", o->name);
	if (!o->shrt)
		n = snprintf(spell, sizeof(spell), "  --%s", o->name);
	if (o->type != CFG_T_BOOL)
		snprintf(spell + n, sizeof(spell) - (size_t)n, " %s",
			 o->type == CFG_T_INT ? "N" : "VALUE");
	if (strlen(spell) > 30)
		fprintf(fp, "%s\n%32s", spell, "");
	else
		fprintf(fp, "%-32s", spell);
	fprintf(fp, "%s", o->help);
	if (o->def && *o->def)
		fprintf(fp, " (default: %s)", o->def);
	fputc('\n', fp);
}

/* Whether an option before table row i belongs to group. */
static int group_seen(size_t i, const char *group)
{
	for (size_t k = 0; k < i; k++)
		if (cfg_opts[k].help && strcmp(cfg_opts[k].group, group) == 0)
			return 1;
	return 0;
}

static void usage(FILE *fp)
{
	size_t i;

	fprintf(
	    fp,
	    "usage: crun [options] training_script [args...]\n"
	    "       crun job.ini [args...]\n"
	    "       crun store --port PORT [options]\n"
	    "       crun status --rdzv_endpoint=H:P [--rdzv_id=ID] [--json]\n\n"
	    "Start nproc_per_node workers on this node, meet the other nodes "
	    "in a\n"
	    "rendezvous, and restart the workers when they fail or nodes come "
	    "and\n"
	    "go. A .py script runs under python3 -u ($PYTHON_EXEC), -m runs a "
	    "module,\n"
	    "anything else is executed directly. ${local_rank} in an argument "
	    "is\n"
	    "replaced per worker. Options also read PET_<NAME> (crun's own:\n"
	    "CRUN_<NAME>) from the environment; both - and _ spellings "
	    "work.\n");
	/* Each group once, in the order groups first appear in the table. */
	for (i = 0; i < CFG_NOPTS; i++) {
		const char *group = cfg_opts[i].group;

		if (cfg_opts[i].help == NULL || group_seen(i, group))
			continue;
		fprintf(fp, "\n%s:\n", group);
		for (size_t k = i; k < CFG_NOPTS; k++)
			if (cfg_opts[k].help &&
			    strcmp(cfg_opts[k].group, group) == 0)
				usage_opt(fp, &cfg_opts[k]);
	}
	fprintf(
	    fp,
	    "\n  -h, --help                    show this help and exit\n"
	    "  --version                     show the version and exit\n"
	    "\nExit status: 0 on success, 2 for usage errors, else the failed\n"
	    "worker's exit code (128+N when it died of signal N), 1 "
	    "otherwise.\n"
	    "A node left out by rdzv_conf exclude_after=K,exclude_for=S "
	    "exits 0 when\nthe job succeeded without it, 1 when it failed.\n"
	    "See crun(1) for the full reference.\n");
}

static void env_name(const struct cfg_opt *o, char *buf, size_t len)
{
	size_t i, n;

	n = (size_t)snprintf(buf, len, "%s_",
			     o->env == CFG_ENV_PET ? "PET" : "CRUN");
	for (i = 0; o->name[i] && n + 1 < len; i++)
		buf[n++] = (char)toupper((unsigned char)o->name[i]);
	buf[n] = '\0';
}

static const char *envp_get(char **envp, const char *name)
{
	size_t n = strlen(name);

	for (; envp && *envp; envp++)
		if (strncmp(*envp, name, n) == 0 && (*envp)[n] == '=')
			return *envp + n + 1;
	return NULL;
}

int cfg_apply_env(struct crun_cfg *cfg, char **envp)
{
	char name[80];
	size_t i;

	for (i = 0; i < CFG_NOPTS; i++) {
		const struct cfg_opt *o = &cfg_opts[i];
		const char *v;

		if (o->env == CFG_ENV_NONE)
			continue;
		env_name(o, name, sizeof(name));
		v = envp_get(envp, name);
		/* torchrun 2.x's own variable, below PET_SHUTDOWN_TIMEOUT. */
		if ((v == NULL || *v == '\0') &&
		    o->id == CFG_shutdown_timeout) {
			snprintf(name, sizeof(name),
				 "TORCH_ELASTIC_SHUTDOWN_TIMEOUT");
			v = envp_get(envp, name);
		}
		/* An empty value is ignored, as torchrun's env action does. */
		if (v && *v)
			cfg_set(cfg, o->id, v, CRUN_SRC_ENV, name);
	}
	return 0;
}

static int is_job_file(const char *s)
{
	size_t n = strlen(s);

	return n > 4 && strcmp(s + n - 4, ".ini") == 0;
}

static int get_size_max(struct crun_cfg *cfg, int id, size_t hi, size_t *out,
			char *e, size_t l);

int cfg_parse_args(struct crun_cfg *cfg, int argc, char **argv, char **envp,
		   int *done, char *errmsg, size_t errlen)
{
	int i;

	*done = 0;
	if (envp == NULL)
		envp = environ;
	for (i = 1; i < argc; i++) {
		const char *a = argv[i], *val = NULL, *name;
		const struct cfg_opt *o = NULL;
		char origin[80];
		size_t nlen;
		int amb = 0;

		if (strcmp(a, "--") == 0) {
			i++;
			break;
		}
		if (a[0] != '-' || a[1] == '\0')
			break;
		/*
		 * No option but --help starts with "h": any prefix is unique;
		 * "--v" could be --version or --virtual_local_rank.
		 */
		if (strcmp(a, "--v") == 0)
			return cfg__err(errmsg, errlen,
					"ambiguous argument '--v'");
		if (strcmp(a, "-h") == 0 ||
		    (a[1] == '-' && a[2] == 'h' &&
		     strncmp(a + 2, "help", strlen(a + 2)) == 0)) {
			usage(stdout);
			*done = 1;
			return 0;
		}
		if (a[1] == '-' && a[2] == 'v' && a[3] == 'e' &&
		    strncmp(a + 2, "version", strlen(a + 2)) == 0) {
			printf("crun %s\n", CRUN_VERSION);
			*done = 1;
			return 0;
		}
		if (a[1] != '-') {
			/* Short options: -m, -r VALUE, -r3, -t VALUE. */
			for (size_t k = 0; k < CFG_NOPTS; k++)
				if (cfg_opts[k].shrt == a[1])
					o = &cfg_opts[k];
			if (o == NULL)
				return cfg__err(errmsg, errlen,
						"unrecognized argument '%s'",
						a);
			/* -t3, and -t=3 as argparse reads it. */
			if (o->type != CFG_T_BOOL && a[2])
				val = a + 2 + (a[2] == '=');
			else if (o->type == CFG_T_BOOL && a[2])
				return cfg__err(errmsg, errlen,
						"unrecognized argument '%s'",
						a);
			snprintf(origin, sizeof(origin), "argument -%c/--%s",
				 o->shrt, o->name);
		} else {
			name = a + 2;
			nlen = strcspn(name, "=");
			if (name[nlen] == '=')
				val = name + nlen + 1;
			o = cfg_opt_by_name(name, nlen, &amb);
			if (o == NULL)
				return cfg__err(
				    errmsg, errlen, "%s argument '--%.*s'",
				    amb ? "ambiguous" : "unrecognized",
				    (int)nlen, name);
			snprintf(origin, sizeof(origin), "argument --%s",
				 o->name);
		}
		if (o->type == CFG_T_BOOL) {
			/* --slurm=0 turns off the automatic SLURM mode. */
			if (val && o->id != CFG_slurm)
				return cfg__err(
				    errmsg, errlen,
				    "%s: ignored explicit value '%s'", origin,
				    val);
			if (val == NULL)
				val = "1";
		} else if (val == NULL) {
			if (i + 1 >= argc)
				return cfg__err(errmsg, errlen,
						"%s: expected one value",
						origin);
			val = argv[++i];
		}
		cfg_set(cfg, o->id, val, CRUN_SRC_CLI, origin);
	}

	/* The first positional is the training script, or a job file. */
	if (i < argc && is_job_file(argv[i]) && cfg->raw[CFG_config] == NULL) {
		cfg_set(cfg, CFG_config, argv[i], CRUN_SRC_CLI,
			"job file argument");
		i++;
		cfg->nargs_override = 1;
	}
	if (i < argc) {
		cfg->argc = argc - i;
		cfg->argv = calloc((size_t)cfg->argc + 1, sizeof(char *));
		for (int k = 0; k < cfg->argc; k++)
			cfg->argv[k] = xstrdup(argv[i + k]);
	}
	cfg_apply_env(cfg, envp);
	/* The job file's own bounds: from the command line or environment,
	 * before the file is read. */
	if (get_size_max(cfg, CFG_config_max_value, 1UL << 30,
			 &cfg->ini_max_value, errmsg, errlen) ||
	    get_size_max(cfg, CFG_config_max_expansion, 1UL << 30,
			 &cfg->ini_max_expansion, errmsg, errlen))
		return CRUN_EUSAGE;
	if (cfg->raw[CFG_config]) {
		int rc = cfg_load_ini(cfg, cfg->raw[CFG_config], envp, errmsg,
				      errlen);

		if (rc)
			return rc;
	}
	return 0;
}

/* --- finalize ----------------------------------------------------------- */

#define RAW(id) (cfg->raw[CFG_##id])

/* One line naming the option, where the value came from, and why it is bad. */
static int bad(struct crun_cfg *cfg, int id, char *errmsg, size_t len,
	       const char *why)
{
	const char *origin =
	    cfg->origin[id] ? cfg->origin[id] : cfg_opts[id].name;

	return cfg__err(errmsg, len, "%s: invalid value '%s'%s%s", origin,
			cfg->raw[id] ? cfg->raw[id] : "", why ? ": " : "",
			why ? why : "");
}

static int get_bool(struct crun_cfg *cfg, int id, int *out, char *e, size_t l)
{
	if (cfg->raw[id] == NULL) {
		*out = 0;
		return 0;
	}
	if (cfg_parse_bool(cfg->raw[id], out))
		return bad(cfg, id, e, l, "expected 0/1 or true/false");
	return 0;
}

static int get_int(struct crun_cfg *cfg, int id, long lo, long hi, int *out,
		   char *e, size_t l)
{
	long v;

	if (cfg->raw[id] == NULL)
		return 0;
	if (parse_long(cfg->raw[id], lo, hi, &v)) {
		char why[80];

		snprintf(why, sizeof(why), "expected an integer in %ld..%ld",
			 lo, hi);
		return bad(cfg, id, e, l, why);
	}
	*out = (int)v;
	return 0;
}

int cfg_parse_size(const char *s, size_t *out)
{
	unsigned long long v, mul = 1;
	char *end;

	if (!isdigit((unsigned char)*s))
		return CRUN_EUSAGE;
	errno = 0;
	v = strtoull(s, &end, 10);
	switch (*end) {
	case 'k':
	case 'K':
		mul = 1ULL << 10;
		end++;
		break;
	case 'm':
	case 'M':
		mul = 1ULL << 20;
		end++;
		break;
	case 'g':
	case 'G':
		mul = 1ULL << 30;
		end++;
		break;
	}
	if (errno || *end || v == 0 || v > (1ULL << 40) / mul)
		return CRUN_EUSAGE;
	*out = (size_t)(v * mul);
	return 0;
}

static int get_double(struct crun_cfg *cfg, int id, double lo, int positive,
		      double *out, char *e, size_t l)
{
	double v;
	char why[80];

	if (cfg->raw[id] == NULL)
		return 0;
	if (parse_double(cfg->raw[id], lo, &v) || (positive && v <= 0))
		return bad(cfg, id, e, l,
			   positive ? "expected a number > 0"
				    : "expected a number >= 0");
	/* Every double option is a duration in seconds: timers take ms. */
	if (v > CFG_MAX_SECONDS) {
		snprintf(why, sizeof(why),
			 "out of range (at most %.0f seconds)",
			 (double)CFG_MAX_SECONDS);
		return bad(cfg, id, e, l, why);
	}
	*out = v;
	return 0;
}

/* A size option with an upper bound of its own. */
static int get_size_max(struct crun_cfg *cfg, int id, size_t hi, size_t *out,
			char *e, size_t l)
{
	char why[80];
	size_t v;

	if (cfg->raw[id] == NULL)
		return 0;
	if (cfg_parse_size(cfg->raw[id], &v))
		return bad(cfg, id, e, l,
			   "expected a size like 8192, 64K, 8M, 1G");
	if (v > hi) {
		snprintf(why, sizeof(why), "out of range (at most %zu)", hi);
		return bad(cfg, id, e, l, why);
	}
	*out = v;
	return 0;
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

int cfg_finalize(struct crun_cfg *cfg, char *e, size_t l)
{
	char host[256];
	long v;
	int rc, port;

	/* Fill in the defaults of options nobody set. */
	for (size_t i = 0; i < CFG_NOPTS; i++)
		if (cfg->raw[i] == NULL && cfg_opts[i].def)
			cfg_set(cfg, (int)i, cfg_opts[i].def, CRUN_SRC_DEFAULT,
				cfg_opts[i].name);

	if ((rc = get_bool(cfg, CFG_standalone, &cfg->standalone, e, l)) ||
	    (rc = get_bool(cfg, CFG_module, &cfg->module, e, l)) ||
	    (rc = get_bool(cfg, CFG_no_python, &cfg->no_python, e, l)) ||
	    (rc = get_bool(cfg, CFG_run_path, &cfg->run_path, e, l)) ||
	    (rc = get_bool(cfg, CFG_virtual_local_rank,
			   &cfg->virtual_local_rank, e, l)) ||
	    (rc = get_bool(cfg, CFG_print_config, &cfg->print_config, e, l)) ||
	    (rc = get_bool(cfg, CFG_verbose, &cfg->verbose, e, l)) ||
	    (rc = get_bool(cfg, CFG_no_agent_store, &cfg->agent_store, e, l)))
		return rc;
	cfg->agent_store = !cfg->agent_store;
	if (RAW(slurm)) {
		if (cfg_parse_bool(RAW(slurm), &cfg->slurm))
			return bad(cfg, CFG_slurm, e, l,
				   "expected 0/1 or true/false");
	}

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
		set_str(&cfg->raw[CFG_rdzv_id], NULL);
	}

	if (cfg_parse_nnodes(RAW(nnodes), &cfg->nnodes_min, &cfg->nnodes_max))
		return bad(cfg, CFG_nnodes, e, l,
			   "expected N or MIN:MAX with 0 < MIN <= MAX");
	if (cfg->standalone && cfg->nnodes_max != 1)
		return bad(cfg, CFG_nnodes, e, l,
			   "--standalone runs exactly one node");

	set_str(&cfg->nproc_spec, RAW(nproc_per_node));
	if (strcmp(RAW(nproc_per_node), "cpu") == 0) {
		cfg->nproc_per_node = cpu_count();
	} else if (strcmp(RAW(nproc_per_node), "gpu") == 0) {
		cfg->nproc_per_node = cfg_gpu_count();
		if (cfg->nproc_per_node == 0)
			return bad(
			    cfg, CFG_nproc_per_node, e, l,
			    "no NVIDIA or AMD GPU is visible (see "
			    "CUDA_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES)");
	} else if (strcmp(RAW(nproc_per_node), "xpu") == 0) {
		cfg->nproc_per_node = gpu_count(CRUN_GPU_INTEL);
		if (cfg->nproc_per_node == 0)
			return bad(cfg, CFG_nproc_per_node, e, l,
				   "no Intel XPU is visible (see "
				   "ZE_AFFINITY_MASK)");
	} else if (strcmp(RAW(nproc_per_node), "auto") == 0) {
		/* As torchrun 2.x: the accelerators, else the CPUs. */
		cfg->nproc_per_node = cfg_gpu_count();
		if (cfg->nproc_per_node == 0)
			cfg->nproc_per_node = gpu_count(CRUN_GPU_INTEL);
		if (cfg->nproc_per_node == 0)
			cfg->nproc_per_node = cpu_count();
	} else if (parse_long(RAW(nproc_per_node), 1, CRUN_MAX_LOCAL_RANKS,
			      &v)) {
		return bad(cfg, CFG_nproc_per_node, e, l,
			   "expected a count 1..1024, cpu, gpu, xpu or auto");
	} else {
		cfg->nproc_per_node = (int)v;
	}

	if ((rc = get_int(cfg, CFG_max_restarts, 0, INT_MAX, &cfg->max_restarts,
			  e, l)) ||
	    (rc = get_double(cfg, CFG_monitor_interval, 0, 1,
			     &cfg->monitor_interval, e, l)) ||
	    (rc = get_int(cfg, CFG_node_rank, 0, INT_MAX, &cfg->node_rank, e,
			  l)) ||
	    (rc = get_int(cfg, CFG_master_port, 0, 65535, &cfg->master_port, e,
			  l)) ||
	    (rc = get_double(cfg, CFG_shutdown_timeout, 0, 0,
			     &cfg->shutdown_timeout, e, l)) ||
	    (rc = get_double(cfg, CFG_init_warn_after, 0, 0,
			     &cfg->init_warn_after, e, l)))
		return rc;

	if (strcmp(RAW(start_method), "spawn") &&
	    strcmp(RAW(start_method), "fork") &&
	    strcmp(RAW(start_method), "forkserver"))
		return bad(cfg, CFG_start_method, e, l,
			   "expected spawn, fork or forkserver");
	set_str(&cfg->start_method, RAW(start_method));
	if (*RAW(role) == '\0')
		return bad(cfg, CFG_role, e, l, "must not be empty");
	set_str(&cfg->role, RAW(role));
	if (RAW(numa_binding) &&
	    binding_mode_parse(RAW(numa_binding), NULL) < 0)
		return bad(cfg, CFG_numa_binding, e, l,
			   "expected node, socket, exclusive or core-complex");
	if (binding_mode_parse(NULL, RAW(cpu_bind)) < 0)
		return bad(cfg, CFG_cpu_bind, e, l, "expected none or auto");
	if (RAW(numa_binding) && strcmp(RAW(cpu_bind), "none"))
		return cfg__err(
		    e, l, "--cpu_bind=%s: not allowed with --numa_binding",
		    RAW(cpu_bind));
	set_str(&cfg->numa_binding, RAW(numa_binding));
	cfg->bind_mode = binding_mode_parse(RAW(numa_binding), RAW(cpu_bind));
	/* torchrun 2.x fails on a log-spec entry point or an event handler
	 * it does not have; crun has torchrun's built-in ones only. */
	if (RAW(logs_specs) && strcmp(RAW(logs_specs), "default"))
		return bad(cfg, CFG_logs_specs, e, l,
			   "no such log-spec plugin (crun has only 'default')");
	if (RAW(event_log_handler) && strcmp(RAW(event_log_handler), "null") &&
	    strcmp(RAW(event_log_handler), "console") &&
	    strcmp(RAW(event_log_handler), "dynamic_rendezvous"))
		return bad(cfg, CFG_event_log_handler, e, l,
			   "expected null, console or dynamic_rendezvous");
	if (RAW(event_log) && *RAW(event_log) == '\0')
		return bad(cfg, CFG_event_log, e, l, "expected a file or -");
	set_str(&cfg->event_log, RAW(event_log));
	if ((rc = get_int(cfg, CFG_metrics_port, 0, 65535, &cfg->metrics_port,
			  e, l)) ||
	    (rc = get_int(cfg, CFG_metrics_max_conns, 1, 65536,
			  &cfg->metrics_max_conns, e, l)) ||
	    (rc = get_int(cfg, CFG_metrics_idle_timeout, 1, 86400,
			  &cfg->metrics_idle_timeout, e, l)))
		return rc;
	{
		unsigned char ip[16];

		if (inet_pton(AF_INET, RAW(metrics_addr), ip) != 1 &&
		    inet_pton(AF_INET6, RAW(metrics_addr), ip) != 1)
			return bad(cfg, CFG_metrics_addr, e, l,
				   "expected a numeric IPv4 or IPv6 address");
	}
	set_str(&cfg->metrics_addr, RAW(metrics_addr));
	if (strcmp(RAW(env_check), "warn") == 0)
		cfg->env_check = CRUN_ENV_CHECK_WARN;
	else if (strcmp(RAW(env_check), "strict") == 0)
		cfg->env_check = CRUN_ENV_CHECK_STRICT;
	else if (strcmp(RAW(env_check), "off") == 0)
		cfg->env_check = CRUN_ENV_CHECK_OFF;
	else
		return bad(cfg, CFG_env_check, e, l,
			   "expected warn, strict or off");
	if ((rc = get_double(cfg, CFG_env_check_timeout, 0, 0,
			     &cfg->env_check_timeout, e, l)))
		return rc;
	/* The closer reads the descriptors for at most 10 s. */
	if (cfg->env_check_timeout > 5)
		return bad(cfg, CFG_env_check_timeout, e, l,
			   "out of range (at most 5 seconds)");

	if (cfg->module && cfg->no_python)
		return cfg__err(
		    e, l, "argument -m/--module: not allowed with --no_python");

	if (strcmp(RAW(rdzv_backend), "static") &&
	    strcmp(RAW(rdzv_backend), "c10d") &&
	    strcmp(RAW(rdzv_backend), "etcd") &&
	    strcmp(RAW(rdzv_backend), "etcd-v3") &&
	    strcmp(RAW(rdzv_backend), "etcd-v2"))
		return bad(cfg, CFG_rdzv_backend, e, l,
			   "expected static, c10d or etcd (alias etcd-v3)");
	if (strcmp(RAW(rdzv_backend), "etcd-v2") == 0)
		return bad(cfg, CFG_rdzv_backend, e, l,
			   "etcd-v2 speaks etcd's v2 API, which etcd 3.4 turns "
			   "off and 3.6 removes; use --rdzv_backend=etcd (the "
			   "v3 API) with the same endpoints");
	set_str(&cfg->rdzv_backend, strcmp(RAW(rdzv_backend), "etcd-v3") == 0
					? "etcd"
					: RAW(rdzv_backend));

	/* The static backend meets at master_addr:master_port. */
	if (strcmp(cfg->rdzv_backend, "static") == 0 &&
	    *RAW(rdzv_endpoint) == '\0') {
		char ep[300];

		snprintf(ep, sizeof(ep),
			 strchr(RAW(master_addr), ':') ? "[%s]:%d" : "%s:%d",
			 RAW(master_addr),
			 cfg->master_port < 0 ? 29500 : cfg->master_port);
		derive(cfg, CFG_rdzv_endpoint, ep,
		       "--master_addr:--master_port");
	}
	if (strcmp(cfg->rdzv_backend, "etcd") == 0 && *RAW(rdzv_endpoint)) {
		char urls[ETCD_MAX_ENDPOINTS][300], why[400];

		if (etcd_parse_endpoints(RAW(rdzv_endpoint), 0, urls,
					 ETCD_MAX_ENDPOINTS, why,
					 sizeof(why)) < 0)
			return bad(cfg, CFG_rdzv_endpoint, e, l, why);
	} else if (*RAW(rdzv_endpoint) &&
		   cfg_split_endpoint(RAW(rdzv_endpoint), host, sizeof(host),
				      &port))
		return bad(cfg, CFG_rdzv_endpoint, e, l,
			   "expected HOST[:PORT] with PORT in 0..65535");
	set_str(&cfg->rdzv_endpoint, RAW(rdzv_endpoint));
	set_str(&cfg->rdzv_id, RAW(rdzv_id));
	set_str(&cfg->master_addr, RAW(master_addr));
	set_str(&cfg->local_addr, RAW(local_addr));

	cfg->rdzv.join_timeout = 600;
	cfg->rdzv.last_call_timeout = 30;
	cfg->rdzv.close_timeout = 30;
	cfg->rdzv.read_timeout = 60;
	/* 0: keep_alive_interval x keep_alive_max_attempt (1.5 s). */
	cfg->rdzv.heartbeat_timeout = 0;
	cfg->rdzv.keep_alive_interval = 0.5;
	cfg->rdzv.keep_alive_max_attempt = 3;
	/* Past 1000 nodes the interval grows (a dead node is still seen at
	 * once: its connections close). */
	cfg->rdzv.heartbeat_rate = 2000;
	cfg->rdzv.timeout = 0; /* static backend: 0 means join_timeout */
	cfg->rdzv.is_host = -1;
	cfg->rdzv.lease_ttl = 10;
	cfg->rdzv.etcd_turn_bytes = ETCD_TURN_BYTES;
	cfg->rdzv.etcd_turn_messages = ETCD_TURN_MSGS;
	cfg->rdzv.etcd_max_message = ETCD_MAX_MESSAGE;
	cfg->rdzv.etcd_max_json_items = ETCD_MAX_JSON_ITEMS;
	cfg->rdzv.etcd_backoff = ETCD_BACKOFF_MS / 1000.0;
	cfg->rdzv.etcd_backoff_max = ETCD_BACKOFF_MAX_MS / 1000.0;
	cfg->rdzv.exclude_for = 300; /* exclude_after=0: off */
	set_str(&cfg->rdzv.etcd_prefix, "/crun");
	set_str(&cfg->rdzv_conf_str, RAW(rdzv_conf));
	if (*RAW(rdzv_conf)) {
		char why[400];

		if (cfg_parse_rdzv_conf(RAW(rdzv_conf), &cfg->rdzv, why,
					sizeof(why)))
			return cfg__err(e, l, "%s: %s",
					cfg->origin[CFG_rdzv_conf], why);
	}
	/* rdzv_conf's secret_file is the option, at rdzv_conf's precedence. */
	if (cfg->rdzv.secret_file)
		cfg_set(cfg, CFG_rdzv_secret_file, cfg->rdzv.secret_file,
			cfg->src[CFG_rdzv_conf], cfg->origin[CFG_rdzv_conf]);
	if (RAW(rdzv_secret_file) && *RAW(rdzv_secret_file))
		set_str(&cfg->rdzv.secret_file, RAW(rdzv_secret_file));

	set_str(&cfg->log_dir, RAW(log_dir));
	if (cfg_parse_std(RAW(redirects), &cfg->redirects))
		return bad(cfg, CFG_redirects, e, l,
			   "expected 0-3 or a map like 0:1,1:2");
	if (cfg_parse_std(RAW(tee), &cfg->tee))
		return bad(cfg, CFG_tee, e, l,
			   "expected 0-3 or a map like 0:1,1:2");
	free(cfg->local_ranks_filter);
	cfg->local_ranks_filter = NULL;
	set_str(&cfg->local_ranks_filter_str, RAW(local_ranks_filter));
	if (*RAW(local_ranks_filter) &&
	    parse_filter(RAW(local_ranks_filter), &cfg->local_ranks_filter,
			 &cfg->nfilter))
		return bad(cfg, CFG_local_ranks_filter, e, l,
			   "expected local ranks like 0,2");
	if (parse_dup_filters(RAW(duplicate_stdout_filters),
			      &cfg->dup_filters[0], &cfg->ndup_filters[0]) ||
	    parse_dup_filters(RAW(duplicate_stderr_filters),
			      &cfg->dup_filters[1], &cfg->ndup_filters[1]))
		return bad(cfg,
			   cfg->ndup_filters[0] < 0
			       ? CFG_duplicate_stdout_filters
			       : CFG_duplicate_stderr_filters,
			   e, l, "expected at most 64 filters of 1..256 bytes");

	set_str(&cfg->signals_str, RAW(signals_to_handle));
	if (cfg_parse_signals(RAW(signals_to_handle), cfg->signals, 32,
			      &cfg->nsignals))
		return bad(
		    cfg, CFG_signals_to_handle, e, l,
		    "expected signal names or numbers like SIGTERM,SIGUSR1");

	if ((rc = get_size_max(cfg, CFG_store_max_key_size, 1UL << 30,
			       &cfg->store.max_key, e, l)) ||
	    (rc = get_size_max(cfg, CFG_store_max_value_size, 1UL << 34,
			       &cfg->store.max_value, e, l)) ||
	    (rc = get_size_max(cfg, CFG_store_max_keys, 1UL << 24,
			       &cfg->store.max_keys, e, l)) ||
	    (rc = get_size_max(cfg, CFG_store_max_memory, 1UL << 40,
			       &cfg->store.max_memory, e, l)) ||
	    (rc = get_size_max(cfg, CFG_store_max_conns, 1UL << 20,
			       &cfg->store.max_conns, e, l)) ||
	    (rc = get_size_max(cfg, CFG_store_max_output, 1UL << 40,
			       &cfg->store.max_output, e, l)) ||
	    (rc = get_size_max(cfg, CFG_store_idle_timeout, CFG_MAX_SECONDS,
			       &cfg->store.idle_timeout, e, l)) ||
	    (rc = get_size_max(cfg, CFG_console_buffer, 1UL << 30,
			       &cfg->console_buffer, e, l)))
		return rc;
	if (cfg->store.max_output < cfg->store.max_value + 64)
		return bad(cfg, CFG_store_max_output, e, l,
			   "must be at least store_max_value_size + 64 (one "
			   "reply of the largest value)");

	set_str(&cfg->config_file, RAW(config));

	if (strcmp(cfg->rdzv_backend, "static") == 0 &&
	    cfg->nnodes_min != cfg->nnodes_max)
		return bad(cfg, CFG_nnodes, e, l,
			   "the static backend needs a fixed node count");
	if (strcmp(cfg->rdzv_backend, "static") == 0 &&
	    cfg->node_rank >= cfg->nnodes_max)
		return bad(cfg, CFG_node_rank, e, l, "must be below --nnodes");

	/* The entrypoint: "crun" with nothing to run is a usage error. */
	if (cfg->argc == 0 && !cfg->print_config)
		return cfg__err(
		    e, l,
		    "the following arguments are required: training_script");
	return 0;
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

void cfg_notices(const struct crun_cfg *cfg, FILE *fp)
{
	const char *p = cfg->rdzv.unknown;

	while (p && *p) {
		int n = (int)strcspn(p, ",");

		fprintf(fp,
			"crun: %s: unknown rdzv_conf key '%.*s' ignored "
			"(as torchrun does)\n",
			cfg->origin[CFG_rdzv_conf] ? cfg->origin[CFG_rdzv_conf]
						   : "--rdzv_conf",
			n, p);
		p += n + (p[n] == ',');
	}
	if (RAW(event_log_handler) && strcmp(RAW(event_log_handler), "null"))
		fprintf(fp,
			"crun: --event_log_handler=%s: crun says each "
			"rendezvous and worker event on its own stderr "
			"lines\n",
			RAW(event_log_handler));
}

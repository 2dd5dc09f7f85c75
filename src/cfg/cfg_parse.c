/*
 * The cfg module's value parsers: the texts of options (numbers, sizes,
 * node counts, redirect maps, signal lists, endpoints, filters, word lists)
 * into values. Each parses the whole string or fails; none prints. And
 * cfg__err, the one way every part of cfg words a usage error.
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
#include <strings.h>

#include "crun/cfg.h"
#include "crun/err.h"
#include "cfg_opts.h"

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

char *cfg__strdup(const char *s)
{
	char *p = strdup(s);

	if (p == NULL)
		abort();
	return p;
}

void *cfg__realloc(void *p, size_t n)
{
	p = realloc(p, n);
	if (p == NULL)
		abort();
	return p;
}

void cfg__set_str(char **slot, const char *s)
{
	free(*slot);
	*slot = s ? cfg__strdup(s) : NULL;
}

int cfg__parse_long(const char *s, long lo, long hi, long *out)
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

int cfg__parse_double(const char *s, double lo, double *out)
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
		if (cfg__parse_long(s, 1, INT_MAX, &lo))
			return CRUN_EUSAGE;
		*min = *max = (int)lo;
		return 0;
	}
	if (strchr(colon + 1, ':') || (size_t)(colon - s) >= sizeof(buf))
		return CRUN_EUSAGE;
	memcpy(buf, s, (size_t)(colon - s));
	buf[colon - s] = '\0';
	if (cfg__parse_long(buf, 1, INT_MAX, &lo) ||
	    cfg__parse_long(colon + 1, 1, INT_MAX, &hi) || lo > hi)
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
	if (cfg__parse_long(s, 0, 3, &v) == 0) {
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
		if (v < 0 && cfg__parse_long(tok, 1, 64, &v))
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

/*
 * torchrun's duplicate filters: a comma-separated list in which ",," stands
 * for a literal comma; empty entries are dropped. *n is -1 on error.
 */
int cfg__parse_dup_filters(const char *s, char ***out, int *n)
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
				*out = cfg__realloc(*out, sizeof(char *) *
							      (size_t)(*n + 1));
				buf[k] = '\0';
				(*out)[(*n)++] = cfg__strdup(buf);
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

int cfg__parse_filter(const char *s, int **out, int *n)
{
	char *copy = cfg__strdup(s), *tok, *save = NULL;
	int cap = 8, *v = malloc(sizeof(int) * (size_t)cap);

	*n = 0;
	for (tok = strtok_r(copy, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		long r;

		while (isspace((unsigned char)*tok))
			tok++;
		/* Any integers, as torchrun: a rank that no worker has (-1,
		 * as torchtitan gives nodes that should print nothing)
		 * filters out every worker. */
		if (cfg__parse_long(tok, INT_MIN, INT_MAX, &r)) {
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
		if (cfg__parse_long(colon + 1, 0, 65535, &p))
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
				v[(*n)++] = cfg__strdup(word);
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

/*
 * rdzv_conf: the "key=value,..." of --rdzv_conf (and of a job file's
 * [rendezvous] keys, which cfg_ini.c turns into the same text). One table,
 * CFG_RDZV_KEYS in cfg_opts.h, gives each key its kind, range and default;
 * the few keys with rules of their own are checked in rdzv_other.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crun/cfg.h"
#include "crun/err.h"
#include "crun/etcd.h"
#include "cfg_opts.h"

const struct cfg_rdzv_key cfg_rdzv_keys[CFG_NRDZV_KEYS] = {
/* field is R(name, type): the offset and the C type, two initializers. */
#define X(key, kind, lo, hi, def, field, flags, help)                          \
	{key, R_##kind, lo, hi, def, field, flags, help},
    CFG_RDZV_KEYS(X)
#undef X
};

const struct cfg_rdzv_key *cfg_rdzv_key_named(const char *n)
{
	for (int i = 0; i < cfg_nrdzv_keys; i++)
		if (strcmp(cfg_rdzv_keys[i].key, n) == 0)
			return &cfg_rdzv_keys[i];
	return NULL;
}

/* Store a number in k's field, whatever its C type. */
static void put_num(struct crun_rdzv_conf *c, const struct cfg_rdzv_key *k,
		    double v)
{
	char *f = (char *)c + k->field;

	switch (k->ftype) {
	case RT_DBL:
		*(double *)(void *)f = v;
		break;
	case RT_INT:
		*(int *)(void *)f = (int)v;
		break;
	case RT_LONG:
		*(long *)(void *)f = (long)v;
		break;
	case RT_SIZE:
		*(size_t *)(void *)f = (size_t)v;
		break;
	case RT_UNS:
		*(unsigned *)(void *)f = (unsigned)v;
		break;
	}
}

static void put_str(struct crun_rdzv_conf *c, const struct cfg_rdzv_key *k,
		    const char *v)
{
	cfg__set_str((char **)(void *)((char *)c + k->field), v);
}

void cfg_rdzv_conf_init(struct crun_rdzv_conf *c)
{
	memset(c, 0, sizeof(*c));
	for (int i = 0; i < cfg_nrdzv_keys; i++) {
		const struct cfg_rdzv_key *k = &cfg_rdzv_keys[i];
		size_t z;

		/* Defaults are the table's own text: trusted, not checked. */
		if (k->def == NULL || k->ftype == RT_NONE)
			continue;
		if (k->ftype == RT_STR)
			put_str(c, k, k->def);
		else if (k->kind == R_BYTES && cfg_parse_size(k->def, &z) == 0)
			put_num(c, k, (double)z);
		else
			put_num(c, k, strtod(k->def, NULL));
	}
}

void cfg_rdzv_conf_release(struct crun_rdzv_conf *c)
{
	for (int i = 0; i < cfg_nrdzv_keys; i++)
		if (cfg_rdzv_keys[i].ftype == RT_STR)
			put_str(c, &cfg_rdzv_keys[i], NULL);
	free(c->unknown);
	c->unknown = NULL;
}

void cfg_etcd_limits(const struct crun_rdzv_conf *c, struct etcd_limits *lim)
{
	lim->turn_bytes = c->etcd_turn_bytes;
	lim->turn_msgs = c->etcd_turn_messages;
	lim->max_message = c->etcd_max_message;
	lim->max_body = c->etcd_max_body;
	lim->max_json_items = c->etcd_max_json_items;
	lim->backoff_ms = (unsigned)(c->etcd_backoff * 1000 + 0.5);
	lim->backoff_max_ms = (unsigned)(c->etcd_backoff_max * 1000 + 0.5);
	lim->attempt_ms = (unsigned)(c->etcd_attempt_timeout * 1000 + 0.5);
	lim->connect_ms = (unsigned)(c->etcd_connect_timeout * 1000 + 0.5);
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
	*list = cfg__realloc(*list, a + b + 2);
	if (a)
		(*list)[a++] = ',';
	memcpy(*list + a, key, b + 1);
}

/* The keys with rules of their own; 0, or -1 for "invalid value". */
static int rdzv_other(struct crun_rdzv_conf *c, const struct cfg_rdzv_key *k,
		      const char *v)
{
	int b;

	if (strcmp(k->key, "store_type") == 0) {
		if (strcmp(v, "tcp") != 0)
			return -1;
		put_str(c, k, v);
	} else if (strcmp(k->key, "etcd_prefix") == 0) {
		if (*v != '/' || strlen(v) > 200)
			return -1;
		put_str(c, k, v);
	} else if (strcmp(k->key, "protocol") == 0) {
		if (strcmp(v, "http") && strcmp(v, "https"))
			return -1;
		c->https = strcmp(v, "https") == 0;
	} else if (strcmp(k->key, "set_socket_ifname") == 0) {
		if (strcmp(v, "nccl") == 0)
			c->set_ifname = 2;
		else if (cfg_parse_bool(v, &b) == 0)
			c->set_ifname = b;
		else
			return -1;
	} else if (strcmp(k->key, "store_relay") == 0) {
		if (strcmp(v, "auto") == 0)
			c->store_relay = -1;
		else if (cfg_parse_bool(v, &b) == 0)
			c->store_relay = b;
		else
			return -1;
	} else if (strcmp(k->key, "store_allow") == 0) {
		if (strcmp(v, "any") != 0 && strcmp(v, "round") != 0)
			return -1;
		c->store_allow_any = strcmp(v, "any") == 0;
	}
	return 0;
}

/* One key=value by its row; CRUN_EUSAGE with errmsg when it is bad. */
static int rdzv_one(struct crun_rdzv_conf *c, const struct cfg_rdzv_key *k,
		    const char *v, char *errmsg, size_t errlen)
{
	double d;
	size_t z;
	long l;
	int b;

	switch (k->kind) {
	case R_DUR:
		if (cfg__parse_double(v, 0, &d) || d <= 0)
			break;
		if (d < 0.001 || d > k->hi)
			return cfg__err(errmsg, errlen,
					"rdzv_conf: '%s' for '%s' is out of "
					"range (0.001..%.0f seconds)",
					v, k->key, k->hi);
		put_num(c, k, d);
		return 0;
	case R_BYTES:
		if (cfg_parse_size(v, &z) || (double)z < k->lo ||
		    (double)z > k->hi)
			return cfg__err(errmsg, errlen,
					"rdzv_conf: '%s' for '%s' is out of "
					"range (%lu..%lu bytes)",
					v, k->key, (unsigned long)k->lo,
					(unsigned long)k->hi);
		put_num(c, k, (double)z);
		return 0;
	case R_COUNT:
		if (cfg__parse_long(v, (long)k->lo, (long)k->hi, &l))
			return cfg__err(errmsg, errlen,
					"rdzv_conf: '%s' for '%s' is not a "
					"count in %ld..%ld%s",
					v, k->key, (long)k->lo, (long)k->hi,
					k->lo == 0 ? " (0: off)" : "");
		put_num(c, k, (double)l);
		return 0;
	case R_INT:
		if (cfg__parse_long(v, (long)k->lo, (long)k->hi, &l))
			break;
		put_num(c, k, (double)l);
		return 0;
	case R_BOOL:
		if (cfg_parse_bool(v, &b))
			break;
		put_num(c, k, b);
		return 0;
	case R_STR:
		put_str(c, k, v);
		return 0;
	case R_OTHER:
		if (rdzv_other(c, k, v))
			break;
		return 0;
	case R_IGNORED:
		/* Accepted for torchrun compatibility; crun needs neither. */
		return 0;
	}
	return cfg__err(errmsg, errlen,
			"rdzv_conf: invalid value '%s' for '%s'", v, k->key);
}

/* Strip blanks around s in place. */
static char *strip(char *s)
{
	char *e;

	while (isspace((unsigned char)*s))
		s++;
	for (e = s + strlen(s); e > s && isspace((unsigned char)e[-1]); e--)
		e[-1] = '\0';
	return s;
}

/*
 * s without one pair of matching quotes around it, in place: a value no
 * shell unquoted (a Kubernetes args: list, a YAML job spec, PyTorch's own
 * launcher tests pass --rdzv-conf='k=v,...' so). *quoted says there was one.
 */
static char *unquote(char *s, int *quoted)
{
	size_t n = strlen(s);

	if (n < 2 || (s[0] != '\'' && s[0] != '"') || s[n - 1] != s[0])
		return s;
	s[n - 1] = '\0';
	*quoted = 1;
	return s + 1;
}

int cfg_parse_rdzv_conf(const char *s, struct crun_rdzv_conf *conf,
			char *errmsg, size_t errlen)
{
	char *copy = cfg__strdup(s), *tok, *save = NULL;
	int rc = 0;

	for (tok = strtok_r(unquote(strip(copy), &conf->quoted), ",", &save);
	     tok && rc == 0; tok = strtok_r(NULL, ",", &save)) {
		char *eq, *k, *v;
		const struct cfg_rdzv_key *key;

		tok = unquote(strip(tok), &conf->quoted);
		eq = strchr(tok, '=');

		if (eq == NULL) {
			rc = cfg__err(errmsg, errlen,
				      "rdzv_conf: '%s' is not key=value", tok);
			break;
		}
		*eq = '\0';
		k = strip(tok);
		v = unquote(strip(eq + 1), &conf->quoted);
		if (*k == '\0' || *v == '\0') {
			rc = cfg__err(
			    errmsg, errlen,
			    "rdzv_conf: empty key or value in '%s=%s'", k, v);
			break;
		}
		if ((key = cfg_rdzv_key_named(k)) != NULL)
			rc = rdzv_one(conf, key, v, errmsg, errlen);
		else
			/* torchrun hands the keys to its rendezvous handler,
			 * which ignores those it does not know: kept here for
			 * cfg_notices to name. */
			add_unknown(&conf->unknown, k);
	}
	free(copy);
	return rc;
}

/*
 * INI job files: `crun job.ini [args...]` and `crun --config job.ini ...`.
 * A job file holds what a command line can, under the flag's own name:
 *
 *   [job]         entrypoint, args, and every option the table files under
 *                 "job" (nnodes, nproc_per_node, max_restarts, role, ...)
 *   [rendezvous]  the "rendezvous" options; backend, endpoint, id and conf
 *   (or [rdzv])   may drop the rdzv_ prefix, and each rdzv_conf key
 *                 (join_timeout, read_timeout, ...) is a key of its own
 *   [logs]        log_dir (or dir), redirects, tee, local_ranks_filter
 *                 (or filter)
 *   [store]       the agent store's limits (store_max_keys or max_keys, ...)
 *   [env]         NAME = VALUE pairs exported to every worker
 *
 * Key names take dashes or underscores and any case, like flags; [env] names
 * are kept exactly. Values may use ${NAME} and ${NAME:-default} (the default
 * is used when NAME is unset or empty; it is literal text) from the agent's
 * environment, and $$ for a literal '$'; any other '$' is an error so that a
 * shell habit like $HOME is caught rather than passed on. Lines starting with
 * ';' or '#' are comments, as is the rest of a line after " ;". An indented
 * line continues the value above it (joined with one space), which is how a
 * long args list is written: inih's line buffer holds about 200 characters.
 *
 * inih does the tokenising. Debian's libinih is built without
 * INI_HANDLER_LINENO, so the handler cannot learn its line; instead we feed
 * inih through our own reader, which counts lines (the handler always runs
 * for the line read last) and also checks section headers, which inih never
 * reports to the handler. Loading is two passes: collect every key, then
 * resolve and check them all, and only when the whole file is good apply
 * them with cfg_set (source: job file). A bad file leaves cfg untouched, and
 * the first error by line number is the one reported.
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <ini.h>

#include "crun/cfg.h"
#include "crun/err.h"
#include "cfg_opts.h"

extern char **environ;

/* The sections, with the option-table section each one reads. */
enum { SEC_JOB, SEC_RDZV, SEC_LOGS, SEC_STORE, SEC_ENV, SEC_N };
static const char *const sec_names[SEC_N] = {"job", "rendezvous", "logs",
					     "store", "env"};

/* Variables the worker contract sets; [env] must not pretend to set them. */
static const char *const contract_vars[] = {
    "LOCAL_RANK",      "RANK",
    "GROUP_RANK",      "ROLE_RANK",
    "ROLE_NAME",       "LOCAL_WORLD_SIZE",
    "WORLD_SIZE",      "GROUP_WORLD_SIZE",
    "ROLE_WORLD_SIZE", "MASTER_ADDR",
    "MASTER_PORT",
};

/* What a key resolved to. */
enum { K_NONE, K_OPT, K_CONF, K_ENTRY, K_ARGS, K_ENV };

struct ini_entry {
	int line;
	int sec;     /* SEC_*, or -1 under an unknown section */
	char *key;   /* as written */
	char *value; /* as written, continuation lines joined */
	/* Filled by resolve(). */
	int kind;
	int id;	      /* option id (K_OPT) or cfg_rdzv_keys index (K_CONF) */
	char *xval;   /* value after ${} expansion */
	char **words; /* K_ENTRY, K_ARGS: the split value */
	int nwords;
};

struct ini_state {
	const char *path;
	char **envp;
	FILE *fp;
	char *buf; /* getline's buffer */
	size_t cap;
	int line;     /* physical lines read so far */
	size_t nread; /* bytes read so far */
	int indented; /* the line read last starts with a blank */
	int have_key; /* a key since the last header (inih's prev_name) */
	int sec_line[SEC_N]; /* where each section's header was, 0: not yet */
	int cur_sec;	     /* from the last header; -1 unknown, -2 none yet */
	struct ini_entry *v;
	int n, cap_v;
	size_t expanded;   /* bytes of the values expanded so far */
	size_t max_bytes;  /* of the file */
	char max_text[32]; /* max_bytes as "1024 KiB" */
	size_t max_value, max_expansion; /* the bounds of the expansion */
	int err_line; /* first error: line (0: none yet) and message */
	char err[512];
	int read_errno;
};

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

/* Record an error at line unless an earlier line already has one. */
static void note(struct ini_state *st, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void note(struct ini_state *st, int line, const char *fmt, ...)
{
	va_list ap;

	if (st->err_line && st->err_line <= line)
		return;
	st->err_line = line;
	va_start(ap, fmt);
	vsnprintf(st->err, sizeof(st->err), fmt, ap);
	va_end(ap);
}

/* Lower case, dashes to underscores: the spelling the option table uses.
 * Returns 0, or -1 if s holds a character no key name can have. */
static int norm_key(const char *s, char *out, size_t len)
{
	size_t i;

	for (i = 0; s[i]; i++) {
		unsigned char c = (unsigned char)s[i];

		if (i + 1 >= len || !(isalnum(c) || c == '_' || c == '-'))
			return -1;
		out[i] = c == '-' ? '_' : (char)tolower(c);
	}
	out[i] = '\0';
	return i ? 0 : -1;
}

static int section_id(const char *name)
{
	char n[32];

	if (norm_key(name, n, sizeof(n)))
		return -1;
	if (strcmp(n, "rdzv") == 0)
		return SEC_RDZV;
	for (int i = 0; i < SEC_N; i++)
		if (strcmp(n, sec_names[i]) == 0)
			return i;
	return -1;
}

static char *trim(char *s)
{
	char *e;

	while (isspace((unsigned char)*s))
		s++;
	for (e = s + strlen(s); e > s && isspace((unsigned char)e[-1]); e--)
		;
	*e = '\0';
	return s;
}

/* inih's line classification, repeated so that headers and malformed lines
 * get their own messages; inih itself would only give a line number. */
static void check_line(struct ini_state *st, char *text)
{
	char *p = text, *close;

	if (st->line == 1 && strncmp(p, "\xEF\xBB\xBF", 3) == 0)
		p += 3;
	st->indented = *p == ' ' || *p == '\t';
	p = trim(p);
	if (*p == '\0' || *p == ';' || *p == '#')
		return;
	if (st->indented && st->have_key)
		return; /* a continuation line */
	if (*p == '[') {
		int sec;

		close = strchr(p, ']');
		st->have_key = 0;
		st->cur_sec = -1;
		if (close == NULL) {
			note(st, st->line, "unterminated section header '%s'",
			     p);
			return;
		}
		*close = '\0';
		sec = section_id(trim(p + 1));
		if (sec < 0) {
			note(st, st->line,
			     "unknown section [%s] (known: job, rendezvous, "
			     "logs, "
			     "store, env)",
			     trim(p + 1));
			return;
		}
		if (st->sec_line[sec]) {
			note(st, st->line,
			     "duplicate section [%s] (first at line %d)",
			     sec_names[sec], st->sec_line[sec]);
			return;
		}
		st->sec_line[sec] = st->line;
		st->cur_sec = sec;
		return;
	}
	st->have_key = 1;
	if (strpbrk(p, "=:") == NULL)
		note(st, st->line,
		     "malformed line '%s': expected 'key = value' or "
		     "'[section]'",
		     p);
	else if (*p == '=' || *p == ':')
		note(st, st->line, "missing key name before '%c'", *p);
}

/* inih's fgets-style reader: one physical line per call, counted. */
static char *ini_read(char *str, int num, void *stream)
{
	struct ini_state *st = stream;
	ssize_t len;
	char *copy;

	errno = 0;
	len = getline(&st->buf, &st->cap, st->fp);
	if (len < 0) {
		if (ferror(st->fp))
			st->read_errno = errno ? errno : EIO;
		return NULL;
	}
	st->line++;
	st->nread += (size_t)len;
	if (st->nread > st->max_bytes) {
		/* It grew while we read it. */
		note(st, st->line, "job file larger than %s (config_max_bytes)",
		     st->max_text);
		return NULL;
	}
	if (len + 1 > num) {
		/* fgets would split the line and inih parse the halves. */
		note(
		    st, st->line,
		    "line too long (over %d characters); continue a long value "
		    "on indented lines",
		    num - 2);
		return NULL;
	}
	if (memchr(st->buf, '\0', (size_t)len)) {
		note(st, st->line, "line contains a NUL byte");
		return NULL;
	}
	memcpy(str, st->buf, (size_t)len + 1);
	copy = xstrdup(st->buf);
	check_line(st, copy);
	free(copy);
	return str;
}

static int on_key(void *user, const char *section, const char *name,
		  const char *value)
{
	struct ini_state *st = user;
	struct ini_entry *e;

	if (*section == '\0') {
		note(st, st->line,
		     "key '%s' outside a section (start with [job])", name);
		return 1;
	}
	if (st->cur_sec == -1)
		return 1; /* under a bad header, already reported */
	e = st->n ? &st->v[st->n - 1] : NULL;
	if (st->indented && e && e->line && strcmp(e->key, name) == 0) {
		/* A continuation line: inih repeats the key, but (unlike on a
		 * key line) leaves an inline " ;" comment in the value. */
		size_t a = strlen(e->value), b;

		for (b = 0; value[b]; b++)
			if (value[b] == ';' && b &&
			    isspace((unsigned char)value[b - 1]))
				break;
		while (b && isspace((unsigned char)value[b - 1]))
			b--;

		e->value = xrealloc(e->value, a + b + 2);
		if (a && b)
			e->value[a++] = ' ';
		memcpy(e->value + a, value, b);
		e->value[a + b] = '\0';
		return 1;
	}
	if (st->n == st->cap_v) {
		st->cap_v = st->cap_v ? st->cap_v * 2 : 16;
		st->v = xrealloc(st->v, sizeof(*st->v) * (size_t)st->cap_v);
	}
	e = &st->v[st->n++];
	memset(e, 0, sizeof(*e));
	e->line = st->line;
	e->sec = st->cur_sec;
	e->key = xstrdup(name);
	e->value = xstrdup(value);
	return 1;
}

static const char *envp_get(char **envp, const char *name, size_t n)
{
	for (; envp && *envp; envp++)
		if (strncmp(*envp, name, n) == 0 && (*envp)[n] == '=')
			return *envp + n + 1;
	return NULL;
}

/* Append n bytes of s to the growing string *out. */
static void put(char **out, size_t *len, size_t *cap, const char *s, size_t n)
{
	if (*len + n + 1 > *cap) {
		*cap = (*len + n + 1) * 2;
		*out = xrealloc(*out, *cap);
	}
	memcpy(*out + *len, s, n);
	*len += n;
	(*out)[*len] = '\0';
}

/*
 * Whether n more bytes fit e's expansion, now len bytes long: within
 * max_value, and the file's within max_expansion.
 */
static int expand_fits(struct ini_state *st, const struct ini_entry *e,
		       size_t len, size_t n)
{
	if (len + n > st->max_value) {
		note(st, e->line,
		     "%s: value longer than %zu bytes after ${} expansion "
		     "(config_max_value)",
		     e->key, st->max_value);
		return 0;
	}
	if (st->expanded + len + n > st->max_expansion) {
		note(st, e->line,
		     "%s: the job file's values pass %zu bytes after ${} "
		     "expansion (config_max_expansion)",
		     e->key, st->max_expansion);
		return 0;
	}
	return 1;
}

/* ${NAME}, ${NAME:-default} and $$ in e->value, into e->xval, bounded by
 * expand_fits. */
static int expand(struct ini_state *st, struct ini_entry *e)
{
	const char *p = e->value, *name, *dflt = NULL, *v, *end;
	size_t len = 0, cap = 0, nlen;
	char *out = NULL;

	put(&out, &len, &cap, "", 0);
	while (*p) {
		const char *dollar = strchr(p, '$');

		if (dollar == NULL) {
			put(&out, &len, &cap, p, strlen(p));
			break;
		}
		put(&out, &len, &cap, p, (size_t)(dollar - p));
		p = dollar + 1;
		if (*p == '$') {
			put(&out, &len, &cap, "$", 1);
			p++;
			continue;
		}
		if (*p != '{') {
			note(st, e->line,
			     "%s: '$' must start ${NAME} or ${NAME:-default}; "
			     "write "
			     "$$ for a literal '$'",
			     e->key);
			goto fail;
		}
		name = ++p;
		end = strchr(p, '}');
		if (end == NULL) {
			note(st, e->line, "%s: unterminated '${' in '%s'",
			     e->key, e->value);
			goto fail;
		}
		nlen = strspn(
		    name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
			  "0123456789_");
		if (name + nlen != end && strncmp(name + nlen, ":-", 2) == 0)
			dflt = name + nlen + 2;
		else
			dflt = NULL;
		if (nlen == 0 || isdigit((unsigned char)*name) ||
		    (name + nlen != end && dflt == NULL)) {
			note(st, e->line,
			     "%s: bad variable reference '${%.*s}': expected "
			     "${NAME} "
			     "or ${NAME:-default}",
			     e->key, (int)(end - name), name);
			goto fail;
		}
		v = envp_get(st->envp, name, nlen);
		if (dflt && (v == NULL || *v == '\0'))
			v = NULL;
		else if (v == NULL) {
			note(st, e->line,
			     "%s: undefined variable '%.*s' (set it, or write "
			     "${%.*s:-default})",
			     e->key, (int)nlen, name, (int)nlen, name);
			goto fail;
		}
		if (v == NULL)
			v = dflt;
		nlen = v == dflt ? (size_t)(end - dflt) : strlen(v);
		if (!expand_fits(st, e, len, nlen))
			goto fail;
		put(&out, &len, &cap, v, nlen);
		p = end + 1;
	}
	st->expanded += len;
	e->xval = out;
	return 0;
fail:
	free(out);
	return -1;
}

/* The option whose full name (not a prefix: files should say what they
 * mean) is n, or NULL. */
static const struct cfg_opt *opt_named(const char *n)
{
	for (int i = 0; i < CFG_NOPTS; i++)
		if (strcmp(cfg_opts[i].name, n) == 0)
			return &cfg_opts[i];
	return NULL;
}

/* The rdzv_conf key n as a key of [rendezvous] (its index), or -1. local_addr
 * is not one: in [rendezvous] it names the --local_addr option, as the flag
 * does. */
static int conf_key(const char *n)
{
	const struct cfg_rdzv_key *k = cfg_rdzv_key_named(n);

	if (k == NULL || (k->flags & CFG_F_NOFILE))
		return -1;
	return (int)(k - cfg_rdzv_keys);
}

static int is_entry(const char *n)
{
	return strcmp(n, "entrypoint") == 0 ||
	       strcmp(n, "training_script") == 0;
}

static int is_args(const char *n)
{
	return strcmp(n, "args") == 0 || strcmp(n, "training_script_args") == 0;
}

/* Map a normalised key of section sec to what it sets. */
static void lookup(struct ini_state *st, struct ini_entry *e, const char *n)
{
	static const struct {
		int sec;
		const char *alias;
		int id;
	} aliases[] = {
	    {SEC_RDZV, "backend", CFG_rdzv_backend},
	    {SEC_RDZV, "endpoint", CFG_rdzv_endpoint},
	    {SEC_RDZV, "id", CFG_rdzv_id},
	    {SEC_RDZV, "conf", CFG_rdzv_conf},
	    {SEC_RDZV, "secret_file", CFG_rdzv_secret_file},
	    {SEC_LOGS, "dir", CFG_log_dir},
	    {SEC_LOGS, "filter", CFG_local_ranks_filter},
	    {SEC_STORE, "max_key_size", CFG_store_max_key_size},
	    {SEC_STORE, "max_value_size", CFG_store_max_value_size},
	    {SEC_STORE, "max_keys", CFG_store_max_keys},
	    {SEC_STORE, "max_memory", CFG_store_max_memory},
	    {SEC_STORE, "max_conns", CFG_store_max_conns},
	    {SEC_STORE, "max_output", CFG_store_max_output},
	    {SEC_STORE, "idle_timeout", CFG_store_idle_timeout},
	};
	const struct cfg_opt *o;
	int amb = 0;

	for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++)
		if (aliases[i].sec == e->sec &&
		    strcmp(aliases[i].alias, n) == 0) {
			e->kind = K_OPT;
			e->id = aliases[i].id;
			return;
		}
	if ((o = opt_named(n)) != NULL) {
		if (o->flags & CFG_F_NOFILE)
			note(st, e->line,
			     "'%s' cannot be set inside a job file", e->key);
		else if (strcmp(o->section, sec_names[e->sec]) != 0)
			note(st, e->line, "key '%s' belongs in [%s], not [%s]",
			     e->key, o->section, sec_names[e->sec]);
		e->kind = K_OPT;
		e->id = o->id;
		return;
	}
	if ((e->id = conf_key(n)) >= 0) {
		if (e->sec != SEC_RDZV)
			note(st, e->line,
			     "key '%s' belongs in [rendezvous], not [%s]",
			     e->key, sec_names[e->sec]);
		e->kind = K_CONF;
		return;
	}
	if (is_entry(n) || is_args(n)) {
		if (e->sec != SEC_JOB)
			note(st, e->line, "key '%s' belongs in [job], not [%s]",
			     e->key, sec_names[e->sec]);
		e->kind = is_entry(n) ? K_ENTRY : K_ARGS;
		return;
	}
	o = cfg_opt_by_name(n, strlen(n), &amb);
	if (o && strcmp(o->section, sec_names[e->sec]) == 0)
		note(st, e->line,
		     "unknown key '%s' in [%s] (did you mean '%s'?)", e->key,
		     sec_names[e->sec], o->name);
	else
		note(st, e->line, "unknown key '%s' in [%s]", e->key,
		     sec_names[e->sec]);
}

static int env_name_ok(const char *s)
{
	if (!(isalpha((unsigned char)*s) || *s == '_'))
		return 0;
	for (; *s; s++)
		if (!(isalnum((unsigned char)*s) || *s == '_'))
			return 0;
	return 1;
}

/* Check one value of rdzv_conf text now, so the error has its line. */
static void check_conf(struct ini_state *st, struct ini_entry *e,
		       const char *text)
{
	struct crun_rdzv_conf scratch;
	char why[400];

	memset(&scratch, 0, sizeof(scratch));
	if (cfg_parse_rdzv_conf(text, &scratch, why, sizeof(why)))
		note(st, e->line, "%s", why);
	cfg_rdzv_conf_release(&scratch);
}

/* Pass one for one entry: what it sets, its expanded value, and whether it
 * repeats an earlier key. first[] holds the entry index that first set each
 * target; it is only written for keys without errors. */
static void resolve(struct ini_state *st, int idx, int *first_opt,
		    int *first_conf, int *first_entry, int *first_args)
{
	struct ini_entry *e = &st->v[idx], *prev = NULL;
	char n[64], conf[512];
	int *slot = NULL;

	if (e->sec == SEC_ENV) {
		e->kind = K_ENV;
		if (!env_name_ok(e->key)) {
			note(st, e->line, "invalid variable name '%s' in [env]",
			     e->key);
			return;
		}
		for (size_t i = 0;
		     i < sizeof(contract_vars) / sizeof(contract_vars[0]); i++)
			if (strcmp(e->key, contract_vars[i]) == 0 ||
			    strncmp(e->key, "TORCHELASTIC_", 13) == 0) {
				note(st, e->line,
				     "'%s' is set by crun for each worker; "
				     "[env] cannot "
				     "change it",
				     e->key);
				return;
			}
		for (int i = 0; i < idx; i++)
			if (st->v[i].kind == K_ENV &&
			    strcmp(st->v[i].key, e->key) == 0) {
				note(
				    st, e->line,
				    "duplicate key '%s' (first set at line %d)",
				    e->key, st->v[i].line);
				return;
			}
		expand(st, e);
		return;
	}
	if (norm_key(e->key, n, sizeof(n))) {
		note(st, e->line, "unknown key '%s' in [%s]", e->key,
		     sec_names[e->sec]);
		return;
	}
	lookup(st, e, n);
	switch (e->kind) {
	case K_OPT:
		slot = &first_opt[e->id];
		break;
	case K_CONF:
		slot = &first_conf[e->id];
		break;
	case K_ENTRY:
		slot = first_entry;
		break;
	case K_ARGS:
		slot = first_args;
		break;
	default:
		return;
	}
	if (*slot >= 0) {
		prev = &st->v[*slot];
		if (strcmp(prev->key, e->key) == 0)
			note(st, e->line,
			     "duplicate key '%s' (first set at line %d)",
			     e->key, prev->line);
		else
			note(st, e->line,
			     "duplicate key '%s' (already set at line %d as "
			     "'%s')",
			     e->key, prev->line, prev->key);
		return;
	}
	*slot = idx;
	if (expand(st, e))
		return;
	if (e->kind == K_CONF && *e->xval) {
		snprintf(conf, sizeof(conf), "%s=%s", cfg_rdzv_keys[e->id].key,
			 e->xval);
		if (strchr(e->xval, ','))
			note(st, e->line, "%s: a value cannot contain ','",
			     e->key);
		else
			check_conf(st, e, conf);
	} else if (e->kind == K_OPT && e->id == CFG_rdzv_conf && *e->xval) {
		check_conf(st, e, e->xval);
	} else if (e->kind == K_ENTRY || e->kind == K_ARGS) {
		if (cfg_split_words(e->xval, &e->words, &e->nwords)) {
			note(st, e->line, "%s: unbalanced quotes in '%s'",
			     e->key, e->xval);
			e->words = NULL;
		} else if (e->kind == K_ENTRY && e->nwords > 1) {
			note(st, e->line,
			     "%s: expected one program, got '%s' (put its "
			     "arguments in "
			     "'args')",
			     e->key, e->xval);
		}
	}
}

static void free_words(char **w, int n)
{
	if (w == NULL)
		return;
	for (int i = 0; i < n; i++)
		free(w[i]);
	free(w);
}

/*
 * A script named by a job file is found next to the file, wherever crun runs
 * from: "../examples/train.py" in configs/x.ini is configs/../examples/...
 * Absolute paths, modules and bare program names (looked up on PATH, like
 * "python3" or "torchrun") are kept as written.
 */
static char *job_relative(const char *job, const char *p, int module)
{
	const char *slash = strrchr(job, '/');
	size_t n = strlen(p);
	char *out;

	if (module || *p == '/' || slash == NULL ||
	    (strchr(p, '/') == NULL && (n < 3 || strcmp(p + n - 3, ".py"))))
		return xstrdup(p);
	out = xrealloc(NULL, (size_t)(slash - job) + n + 2);
	memcpy(out, job, (size_t)(slash - job) + 1);
	memcpy(out + (slash - job) + 1, p, n + 1);
	return out;
}

/* Pass two: the whole file is good, hand its values to cfg. */
static void apply(struct crun_cfg *cfg, struct ini_state *st, int first_entry,
		  int first_args)
{
	char origin[1024], *conf = NULL;
	const char *conf_name = "rdzv_conf";
	size_t clen = 0, ccap = 0;
	int conf_line = 0;

	for (int i = 0; i < st->n; i++) {
		struct ini_entry *e = &st->v[i];

		/* An empty value leaves the option alone, as an empty PET_*
		 * variable does; ${X:-} can thus make a key optional. */
		if (e->xval == NULL || (*e->xval == '\0' && e->kind != K_ENV))
			continue;
		snprintf(origin, sizeof(origin), "%s:%d: %s", st->path, e->line,
			 e->key);
		if (e->kind == K_OPT && e->id != CFG_rdzv_conf) {
			cfg_set(cfg, e->id, e->xval, CRUN_SRC_FILE, origin);
		} else if (e->kind == K_ENV) {
			size_t a = strlen(e->key), b = strlen(e->xval);
			char *kv = xrealloc(NULL, a + b + 2);

			memcpy(kv, e->key, a);
			kv[a] = '=';
			memcpy(kv + a + 1, e->xval, b + 1);
			cfg->env = xrealloc(
			    cfg->env, sizeof(char *) * (size_t)(cfg->nenv + 2));
			cfg->env[cfg->nenv++] = kv;
			cfg->env[cfg->nenv] = NULL;
		} else if (e->kind == K_CONF ||
			   (e->kind == K_OPT && e->id == CFG_rdzv_conf)) {
			/* The conf text first, the single keys after it, so a
			 * single key wins over the same key inside conf. */
			if (clen)
				put(&conf, &clen, &ccap, ",", 1);
			if (e->kind == K_CONF) {
				put(&conf, &clen, &ccap,
				    cfg_rdzv_keys[e->id].key,
				    strlen(cfg_rdzv_keys[e->id].key));
				put(&conf, &clen, &ccap, "=", 1);
			}
			put(&conf, &clen, &ccap, e->xval, strlen(e->xval));
			/* Name the conf key itself when there is one. */
			if (conf_line == 0)
				conf_line = e->line;
			if (e->kind == K_OPT) {
				conf_line = e->line;
				conf_name = e->key;
			}
		}
	}
	if (conf) {
		snprintf(origin, sizeof(origin), "%s:%d: %s", st->path,
			 conf_line, conf_name);
		cfg_set(cfg, CFG_rdzv_conf, conf, CRUN_SRC_FILE, origin);
		free(conf);
	}

	/*
	 * The entrypoint. A training script on the command line replaces the
	 * file's entrypoint and args; `crun job.ini extra...` keeps the file's
	 * entrypoint and replaces only its args (or, when the file has no
	 * entrypoint, runs the extras as the command).
	 */
	if (cfg->argc > 0 && !cfg->nargs_override)
		return;
	if (first_entry >= 0 && st->v[first_entry].nwords == 1) {
		struct ini_entry *ent = &st->v[first_entry];
		struct ini_entry *args =
		    first_args >= 0 ? &st->v[first_args] : NULL;
		int nextra = cfg->argc > 0 ? cfg->argc
			     : args	   ? args->nwords
					   : 0;
		char **argv =
		    xrealloc(NULL, sizeof(char *) * (size_t)(nextra + 2));

		argv[0] = job_relative(st->path, ent->words[0], cfg->module);
		for (int k = 0; k < nextra; k++) {
			if (cfg->argc > 0) {
				argv[k + 1] = cfg->argv[k];
			} else {
				argv[k + 1] = args->words[k];
				args->words[k] = NULL;
			}
		}
		argv[nextra + 1] = NULL;
		free(cfg->argv);
		cfg->argv = argv;
		cfg->argc = nextra + 1;
	}
}

/* Pass one over every entry, then the argument rules that span keys. */
static void check_all(struct crun_cfg *cfg, struct ini_state *st,
		      int *first_entry, int *first_args)
{
	int first_opt[CFG_NOPTS], first_conf[CFG_NRDZV_KEYS];

	for (int i = 0; i < CFG_NOPTS; i++)
		first_opt[i] = -1;
	for (int i = 0; i < CFG_NRDZV_KEYS; i++)
		first_conf[i] = -1;
	for (int i = 0; i < st->n; i++)
		if (st->v[i].sec >= 0)
			resolve(st, i, first_opt, first_conf, first_entry,
				first_args);
	/* args without an entrypoint only make sense if the command line
	 * names the program. */
	if (*first_entry >= 0 && st->v[*first_entry].nwords == 0)
		*first_entry = -1; /* entrypoint = ${X:-}: none */
	if (*first_args >= 0 && *first_entry < 0 && cfg->argc == 0 &&
	    st->v[*first_args].nwords > 0)
		note(st, st->v[*first_args].line,
		     "%s: no entrypoint to pass them to (set 'entrypoint' in "
		     "[job])",
		     st->v[*first_args].key);
}

/* A message is one line, whatever the path or value quoted in it holds. */
static void one_line(char *msg)
{
	for (; *msg; msg++)
		if ((unsigned char)*msg < 0x20 || *msg == 0x7f)
			*msg = '?';
}

/* A job-file bound: its field once converted, else the table's default. */
static size_t bound(const struct crun_cfg *cfg, int id, size_t field)
{
	size_t v = 0;

	if (field == 0 && cfg_parse_size(cfg_opts[id].def, &v) == 0)
		field = v;
	return field;
}

int cfg_load_job(struct crun_cfg *cfg, char **envp, char *errmsg, size_t errlen)
{
	int rc;

	/* The job file's own bounds: from the command line or environment,
	 * before the file is read. */
	if ((rc = cfg__convert(cfg, CFG_config_max_bytes, errmsg, errlen)) ||
	    (rc = cfg__convert(cfg, CFG_config_max_value, errmsg, errlen)) ||
	    (rc = cfg__convert(cfg, CFG_config_max_expansion, errmsg, errlen)))
		return rc;
	if (cfg->raw[CFG_config] == NULL)
		return 0;
	return cfg_load_ini(cfg, cfg->raw[CFG_config], envp, errmsg, errlen);
}

int cfg_load_ini(struct crun_cfg *cfg, const char *path, char **envp,
		 char *errmsg, size_t errlen)
{
	struct ini_state st;
	int rc, first_entry = -1, first_args = -1;

	memset(&st, 0, sizeof(st));
	st.path = path;
	st.envp = envp ? envp : environ;
	st.cur_sec = -2;
	st.max_bytes = bound(cfg, CFG_config_max_bytes, cfg->ini_max_bytes);
	st.max_value = bound(cfg, CFG_config_max_value, cfg->ini_max_value);
	st.max_expansion =
	    bound(cfg, CFG_config_max_expansion, cfg->ini_max_expansion);
	if (st.max_bytes % 1024 == 0)
		snprintf(st.max_text, sizeof(st.max_text), "%zu KiB",
			 st.max_bytes / 1024);
	else
		snprintf(st.max_text, sizeof(st.max_text), "%zu bytes",
			 st.max_bytes);
	st.fp = fopen(path, "r");
	if (st.fp == NULL) {
		snprintf(errmsg, errlen, "%s: cannot open job file: %s", path,
			 strerror(errno));
		one_line(errmsg);
		return CRUN_EUSAGE;
	}
	/* A job file is a small regular file: never read /dev/zero or a
	 * pipe without bound. */
	{
		struct stat sb;

		if (fstat(fileno(st.fp), &sb) == 0 && S_ISDIR(sb.st_mode)) {
			snprintf(errmsg, errlen, "%s: cannot read job file: %s",
				 path, strerror(EISDIR));
			fclose(st.fp);
			return CRUN_EUSAGE;
		}
		if (fstat(fileno(st.fp), &sb) || !S_ISREG(sb.st_mode) ||
		    (size_t)sb.st_size > st.max_bytes) {
			if (S_ISREG(sb.st_mode))
				snprintf(errmsg, errlen,
					 "%s: job file larger than %s "
					 "(config_max_bytes)",
					 path, st.max_text);
			else
				snprintf(errmsg, errlen,
					 "%s: job file is not a regular file "
					 "(%s at most)",
					 path, st.max_text);
			fclose(st.fp);
			return CRUN_EUSAGE;
		}
	}
	rc = ini_parse_stream(ini_read, &st, on_key, &st);
	if (st.read_errno) {
		snprintf(errmsg, errlen, "%s: cannot read job file: %s", path,
			 strerror(st.read_errno));
		rc = CRUN_EUSAGE;
		goto out;
	}
	/* check_line reports whatever inih rejects; this is a safety net. */
	if (rc > 0)
		note(&st, rc, "malformed line");
	if (rc < 0)
		note(&st, st.line, "out of memory");
	check_all(cfg, &st, &first_entry, &first_args);
	if (st.err_line) {
		snprintf(errmsg, errlen, "%s:%d: %s", path, st.err_line,
			 st.err);
		rc = CRUN_EUSAGE;
		goto out;
	}
	apply(cfg, &st, first_entry, first_args);
	rc = 0;
out:
	for (int i = 0; i < st.n; i++) {
		free(st.v[i].key);
		free(st.v[i].value);
		free(st.v[i].xval);
		free_words(st.v[i].words, st.v[i].nwords);
	}
	free(st.v);
	free(st.buf);
	fclose(st.fp);
	if (rc != 0)
		one_line(errmsg);
	return rc;
}

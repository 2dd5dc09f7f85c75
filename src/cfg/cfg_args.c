/*
 * The command line and the environment: cfg_parse_args reads argv the way
 * torchrun's argparse does (long options by unique prefix, - and _ alike,
 * -m/-r/-t), cfg_apply_env reads PET_<NAME> and CRUN_<NAME>; both offer
 * values to cfg_set. Also --help, whose "Limits" section (and the hidden
 * --print-limits=markdown|man that docs/crun.1 and the README are made
 * from) lists every bound on input from the option tables.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crun/cfg.h"
#include "crun/err.h"
#include "crun/hostlist.h"
#include "crun/rdzv_types.h"
#include "cfg_opts.h"

extern char **environ;

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

void cfg__usage(FILE *fp)
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
	    "\nLimits (a bound on input, its default, and what sets it):\n");
	cfg__print_limits(fp, "text");
	fprintf(
	    fp,
	    "\n  -h, --help                    show this help and exit\n"
	    "  --version                     show the version and exit\n"
	    "  --print-completion SHELL      print a completion script for "
	    "bash, zsh\n"
	    "                                or tcsh and exit\n"
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

	/* The first byte first: a hundred options, each against the whole
	 * environment, at every start. */
	for (; envp && *envp; envp++)
		if (**envp == *name && strncmp(*envp, name, n) == 0 &&
		    (*envp)[n] == '=')
			return *envp + n + 1;
	return NULL;
}

int cfg_apply_env(struct crun_cfg *cfg, char **envp)
{
	char name[80];
	size_t i;

	if (envp == NULL)
		envp = environ;
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

int cfg_parse_args(struct crun_cfg *cfg, int argc, char **argv, int *done,
		   char *errmsg, size_t errlen)
{
	int i, dashdash = 0, skip;

	*done = 0;
	for (i = 1; i < argc; i++) {
		const char *a = argv[i], *val = NULL, *name;
		const struct cfg_opt *o = NULL;
		char origin[80];
		size_t nlen;
		int amb = 0;

		if (strcmp(a, "--") == 0) {
			i++;
			dashdash = 1;
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
			cfg__usage(stdout);
			*done = 1;
			return 0;
		}
		/* Hidden: the limits table docs/crun.1 and the README hold. */
		if (strncmp(a, "--print-limits=", 15) == 0 ||
		    strncmp(a, "--print_limits=", 15) == 0) {
			if (strcmp(a + 15, "markdown") && strcmp(a + 15, "man"))
				return cfg__err(errmsg, errlen,
						"argument --print-limits: "
						"expected markdown or man");
			cfg__print_limits(stdout, a + 15);
			*done = 1;
			return 0;
		}
		/* torchrun 2.14's: the script comes from the option tables. */
		if ((strncmp(a, "--print-completion", 18) == 0 ||
		     strncmp(a, "--print_completion", 18) == 0) &&
		    (a[18] == '\0' || a[18] == '=')) {
			const char *sh = a[18] == '='	? a + 19
					 : i + 1 < argc ? argv[++i]
							: "";

			if (strcmp(sh, "bash") && strcmp(sh, "zsh") &&
			    strcmp(sh, "tcsh"))
				return cfg__err(errmsg, errlen,
						"argument --print-completion: "
						"invalid choice '%s' (choose "
						"from bash, zsh, tcsh)",
						sh);
			cfg->print_completion = sh[0] == 'b'   ? "bash"
						: sh[0] == 'z' ? "zsh"
							       : "tcsh";
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

	/*
	 * The first positional is the training script, or a job file.
	 * argparse drops one "--" among the positionals: the one that ended
	 * the options, else one right after the script (or the job file), as
	 * in `torchrun -m train -- --depth=26`.
	 */
	skip = dashdash ? -1 : i + 1;
	if (i < argc && is_job_file(argv[i]) && cfg->raw[CFG_config] == NULL) {
		cfg_set(cfg, CFG_config, argv[i], CRUN_SRC_CLI,
			"job file argument");
		i++;
		cfg->nargs_override = 1;
	}
	if (skip < 0 || skip >= argc || strcmp(argv[skip], "--") != 0)
		skip = -1;
	if (i < argc) {
		cfg->argv = calloc((size_t)(argc - i) + 1, sizeof(char *));
		cfg->argc = 0;
		for (int k = i; k < argc; k++)
			if (k != skip)
				cfg->argv[cfg->argc++] = cfg__strdup(argv[k]);
	}
	return 0;
}

/* --- the limits table ---------------------------------------------------- */

/* s for a man page: '-' is a hyphen only as "\-". */
static void man_text(FILE *fp, const char *s)
{
	for (; *s; s++)
		if (*s == '-' || *s == '\\')
			fprintf(fp, "\\%c", *s);
		else
			fputc(*s, fp);
}

/*
 * One limit: what it bounds, its value (an option's default) with its unit,
 * and what sets it: an option (flag and environment variable), an rdzv_conf
 * key, or nothing (flag and key NULL: env is "fixed" or "derived").
 */
static void limit_row(FILE *fp, const char *format, const char *what,
		      const char *def, const char *unit, const char *flag,
		      const char *env, const char *key)
{
	char dflt[64], set[160];

	/* "1 second", "3 seconds". */
	snprintf(dflt, sizeof(dflt), "%s%s%.*s", def ? def : "none",
		 *unit ? " " : "",
		 (int)strlen(unit) - (def && strcmp(def, "1") == 0 && *unit),
		 unit);
	if (strcmp(format, "markdown") == 0) {
		if (key)
			snprintf(set, sizeof(set), "`--rdzv_conf=%s=`", key);
		else if (flag)
			snprintf(set, sizeof(set), "`--%s`, `%s`", flag, env);
		else
			snprintf(set, sizeof(set), "%s", env);
		fprintf(fp, "| %s | %s | %s |\n", what, dflt, set);
		return;
	}
	if (key)
		snprintf(set, sizeof(set), "rdzv_conf %s", key);
	else if (flag)
		snprintf(set, sizeof(set), "--%s", flag);
	else
		snprintf(set, sizeof(set), "(%s)", env);
	if (strcmp(format, "man") == 0) {
		fprintf(fp, ".TP\n.B ");
		man_text(fp, set);
		fprintf(fp, "\n");
		man_text(fp, what);
		fprintf(fp, " (%s", flag || key ? "default " : "");
		man_text(fp, dflt);
		if (flag) {
			fprintf(fp, "; ");
			man_text(fp, env);
		}
		fprintf(fp, ").\n");
	} else if (strlen(set) >= 30) {
		fprintf(fp, "  %s\n%32s%s (%s%s)\n", set, "", what,
			flag || key ? "default: " : "", dflt);
	} else {
		fprintf(fp, "  %-30s%s (%s%s)\n", set, what,
			flag || key ? "default: " : "", dflt);
	}
}

void cfg__print_limits(FILE *fp, const char *format)
{
	static const struct {
		const char *what;
		long value;
		const char *unit;
	} fixed[] = {
#define X(what, value, unit) {what, value, unit},
	    CFG_FIXED_LIMITS(X)
#undef X
	};
	static const struct {
		const char *what, *rule;
	} derived[] = {
#define X(what, rule) {what, rule},
	    CFG_DERIVED_LIMITS(X)
#undef X
	};
	char env[80], v[32];

	if (strcmp(format, "markdown") == 0)
		fprintf(fp, "| Limit | Default | Set with |\n|---|---|---|\n");
	for (size_t i = 0; i < CFG_NOPTS; i++) {
		const struct cfg_opt *o = &cfg_opts[i];

		if (!(o->flags & CFG_F_LIMIT))
			continue;
		env_name(o, env, sizeof(env));
		limit_row(fp, format, o->help, o->def, o->unit, o->name, env,
			  NULL);
	}
	for (int i = 0; i < cfg_nrdzv_keys; i++) {
		const struct cfg_rdzv_key *k = &cfg_rdzv_keys[i];

		if (k->flags & CFG_F_LIMIT)
			limit_row(fp, format, k->help, k->def,
				  k->kind == R_BYTES ? "bytes"
				  : k->kind == R_DUR ? "seconds"
						     : "",
				  NULL, NULL, k->key);
	}
	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++) {
		snprintf(v, sizeof(v), "%ld", fixed[i].value);
		limit_row(fp, format, fixed[i].what, v, fixed[i].unit, NULL,
			  "fixed", NULL);
	}
	for (size_t i = 0; i < sizeof(derived) / sizeof(derived[0]); i++)
		limit_row(fp, format, derived[i].what, derived[i].rule, "",
			  NULL, "derived", NULL);
}

/*
 * `crun --print-completion bash|zsh|tcsh` (torchrun 2.14's flag): a shell
 * completion script for crun's own options, every spelling (--a_b and
 * --a-b, short letters), and for `crun status` and `crun store`, written
 * from the option tables themselves (cfg's, cmd_status_options(),
 * cmd_store_options()), so it never lists an option crun lacks or misses
 * one it has. Words after the options are files (the training script).
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "crun/cfg.h"
#include "launcher.h"

/* One word list: "--a_b --a-b -x ..." for crun, or a subcommand's. */
static void words_crun(FILE *fp, const char *sep)
{
	const char *name;
	char shrt, dashed[96];
	int val;

	fprintf(fp, "--help%s--version%s--print-completion%s--print_completion",
		sep, sep, sep);
	for (int i = 0; cfg_option_at(i, &name, &shrt, &val) == 0; i++) {
		snprintf(dashed, sizeof(dashed), "%s", name);
		for (char *p = dashed; *p; p++)
			if (*p == '_')
				*p = '-';
		fprintf(fp, "%s--%s", sep, name);
		if (strcmp(dashed, name))
			fprintf(fp, "%s--%s", sep, dashed);
		if (shrt)
			fprintf(fp, "%s-%c", sep, shrt);
	}
}

static void words_sub(FILE *fp, const struct option *o, const char *sep)
{
	for (int i = 0; o[i].name != NULL; i++)
		fprintf(fp, "%s--%s", i ? sep : "", o[i].name);
}

static void print_bash(FILE *fp, int zsh)
{
	if (zsh)
		fprintf(fp, "#compdef crun\n"
			    "# crun --print-completion zsh > "
			    "\"${fpath[1]}/_crun\"\n"
			    "local -a opts\n"
			    "case ${words[2]} in\n"
			    "status) opts=(");
	else
		fprintf(fp, "# crun --print-completion bash > "
			    "~/.local/share/bash-completion/completions/crun\n"
			    "_crun() {\n"
			    "\tlocal cur=${COMP_WORDS[COMP_CWORD]} opts\n"
			    "\tcase \"${COMP_WORDS[1]}\" in\n"
			    "\tstatus) opts=\"");
	words_sub(fp, cmd_status_options(), " ");
	fprintf(fp, zsh ? ") ;;\nstore) opts=(" : "\" ;;\n\tstore) opts=\"");
	words_sub(fp, cmd_store_options(), " ");
	fprintf(fp, zsh ? ") ;;\n*) opts=(" : "\" ;;\n\t*) opts=\"");
	words_crun(fp, " ");
	if (zsh) {
		fprintf(fp, ") ;;\n"
			    "esac\n"
			    "if [[ $PREFIX == -* ]]; then\n"
			    "\tcompadd -- $opts\n"
			    "elif (( CURRENT == 2 )); then\n"
			    "\tcompadd -- status store\n"
			    "\t_files\n"
			    "else\n"
			    "\t_files\n"
			    "fi\n");
		return;
	}
	fprintf(fp, "\" ;;\n"
		    "\tesac\n"
		    "\tif [[ $cur == -* ]]; then\n"
		    "\t\tCOMPREPLY=($(compgen -W \"$opts\" -- \"$cur\"))\n"
		    "\telif [ \"$COMP_CWORD\" -eq 1 ]; then\n"
		    "\t\tCOMPREPLY=($(compgen -W \"status store\" -- \"$cur\") "
		    "$(compgen -f -- \"$cur\"))\n"
		    "\telse\n"
		    "\t\tCOMPREPLY=($(compgen -f -- \"$cur\"))\n"
		    "\tfi\n"
		    "}\n"
		    "complete -o filenames -F _crun crun\n");
}

/* tcsh's complete has no notion of a subcommand: one list for all. */
static void print_tcsh(FILE *fp)
{
	fprintf(fp, "# crun --print-completion tcsh >> ~/.tcshrc\n"
		    "complete crun 'C/-/(");
	words_crun(fp, " ");
	fputc(' ', fp);
	words_sub(fp, cmd_status_options(), " ");
	fputc(' ', fp);
	words_sub(fp, cmd_store_options(), " ");
	fprintf(fp, ")/' 'n/*/f/'\n");
}

int completion_print(FILE *fp, const char *shell)
{
	if (strcmp(shell, "bash") == 0 || strcmp(shell, "zsh") == 0)
		print_bash(fp, shell[0] == 'z');
	else if (strcmp(shell, "tcsh") == 0)
		print_tcsh(fp);
	else
		return 2;
	return 0;
}

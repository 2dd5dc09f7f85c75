/*
 * The numbers of a round's end (rdzv_end.h), read once out of the reason
 * the node that ended it wrote, so that no receiver parses text again.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crun/cfg.h"
#include "crun/rdzv_end.h"

/* The signal named at the end of why ("... (SIGTERM)"), or 0. */
static int end_signal(const char *why)
{
	const char *open = strrchr(why, '(');
	char name[16];
	int sig, n;

	if (open == NULL || sscanf(open, "(%15[A-Z0-9])", name) != 1 ||
	    cfg_parse_signals(name, &sig, 1, &n) != 0)
		return 0;
	return sig;
}

/* The word before " left (", after "the store host ", before " exited". */
static void end_host(int kind, const char *why, char *host, size_t len)
{
	const char *p = why, *q = NULL;

	*host = '\0';
	if (kind == 'J') {
		q = why + strlen(why);
	} else if (strncmp(why, "the store host ", 15) == 0) {
		p = why + 15;
		q = strstr(p, " was stopped");
	} else if ((q = strstr(why, " left (")) == NULL) {
		p = strstr(why, ") on ");
		p = p ? p + 5 : NULL;
		q = p ? strstr(p, " exited") : NULL;
	}
	if (p && q && q > p && strcspn(p, " ") >= (size_t)(q - p))
		snprintf(host, len, "%.*s", (int)(q - p), p);
}

void rdzv_end_describe(int kind, const char *why, struct rdzv_end *e)
{
	char *rest = NULL;
	long st = 0;

	memset(e, 0, sizeof(*e));
	e->kind = kind;
	e->why = why;
	e->detail = why;
	if (kind == 'F') { /* "<status> rank ...": the status first */
		st = strtol(why, &rest, 10);
		e->status = st > 0 && st < 256 ? (int)st : 0;
		if (rest != why && *rest == ' ')
			e->detail = rest + 1;
	}
	e->signal = end_signal(why);
	end_host(kind, why, e->host, sizeof(e->host));
}

/* Placeholder: INI job files land with their own change. */
#include <stdio.h>

#include "crun/cfg.h"
#include "crun/err.h"

int cfg_load_ini(struct crun_cfg *cfg, const char *path, char **envp,
		 char *errmsg, size_t errlen)
{
	(void)cfg;
	(void)envp;
	snprintf(errmsg, errlen, "%s: job files are not supported yet", path);
	return CRUN_EUSAGE;
}

/* Placeholder until the store lands: `crun store` is not built yet. */
#include <stdio.h>

#include "launcher.h"

int cmd_store_main(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fprintf(stderr, "crun: store: not built yet\n");
	return 2;
}

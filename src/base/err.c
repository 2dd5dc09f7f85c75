/*
 * The one table of crun's error codes. The enum in err.h and the two lookup
 * functions here are generated from the same X-macro list so they cannot drift.
 */
#include <uv.h>

#include "crun/err.h"

const char *crun_strerror(int err)
{
	switch (err) {
#define X(name, val, msg)                                                      \
	case CRUN_##name:                                                      \
		return msg;
		CRUN_ERRNO_MAP(X)
#undef X
	default:
		return uv_strerror(err);
	}
}

const char *crun_err_name(int err)
{
	switch (err) {
#define X(name, val, msg)                                                      \
	case CRUN_##name:                                                      \
		return "CRUN_" #name;
		CRUN_ERRNO_MAP(X)
#undef X
	default:
		return uv_err_name(err);
	}
}

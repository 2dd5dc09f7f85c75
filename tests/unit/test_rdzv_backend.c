/*
 * The backend opener shared by the agents and `crun status`
 * (src/rdzv/rdzv_backend.c): the names both accept and refuse, and an endpoint
 * that is not HOST[:PORT] refused before anything opens.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "crun/err.h"
#include "crun/rdzv_backend.h"

Test(rdzv_backend, names)
{
	char why[400] = "";

	cr_assert_eq(rdzv_backend_kind("c10d", why, sizeof(why)),
		     RDZV_BACKEND_C10D);
	cr_assert_eq(rdzv_backend_kind("static", why, sizeof(why)),
		     RDZV_BACKEND_STATIC);
	cr_assert_eq(rdzv_backend_kind("etcd", why, sizeof(why)),
		     RDZV_BACKEND_ETCD);
	cr_assert_eq(rdzv_backend_kind("etcd-v3", why, sizeof(why)),
		     RDZV_BACKEND_ETCD);
	cr_assert_str_empty(why);
	cr_assert_eq(rdzv_backend_kind("etcd-v2", why, sizeof(why)),
		     CRUN_EUSAGE);
	cr_assert(strstr(why, "v2 API, which etcd 3.4 turns off"), "%s", why);
	cr_assert(strstr(why, "use --rdzv_backend=etcd"), "%s", why);
	cr_assert_eq(rdzv_backend_kind("zookeeper", why, sizeof(why)),
		     CRUN_EUSAGE);
	cr_assert_str_eq(why, "expected static, c10d or etcd (alias etcd-v3)");
}

static void never_store(struct crun_rdzv_store *s, int status, void *data)
{
	(void)s;
	(void)status;
	(void)data;
	cr_assert_fail("no callback after a synchronous error");
}

Test(rdzv_backend, bad_endpoint, .timeout = 10)
{
	uv_loop_t loop;
	struct rdzv_backend_opts o;
	struct crun_rdzv_store *rs = NULL;
	char errmsg[256] = "";

	cr_assert_eq(uv_loop_init(&loop), 0);
	memset(&o, 0, sizeof(o));
	o.kind = RDZV_BACKEND_C10D;
	o.endpoint = "host:notaport";
	o.timeout = 1;
	o.errmsg = errmsg;
	o.errlen = sizeof(errmsg);
	cr_assert_eq(rdzv_backend_open(&loop, &o, never_store, NULL, NULL,
				       &rs, NULL),
		     CRUN_EUSAGE);
	cr_assert_null(rs);
	cr_assert(strstr(errmsg, "expected HOST[:PORT]"), "%s", errmsg);
	uv_run(&loop, UV_RUN_DEFAULT);
	cr_assert_eq(uv_loop_close(&loop), 0);
}

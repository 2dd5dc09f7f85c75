/*
 * The numbers of a round's end (src/rdzv/rdzv_end.c): status, signal and host
 * read out of the reasons the agents write, and nothing out of text that
 * names none.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <string.h>

#include "crun/rdzv_end.h"

/* An end as the callback gets it: status, signal and host, never text. */
Test(rdzv_end, describe)
{
	struct rdzv_end e;

	rdzv_end_describe('F', "3 rank 5 (local rank 1) on node-b exited with 3", &e);
	cr_assert_eq(e.kind, 'F');
	cr_assert_eq(e.status, 3);
	cr_assert_eq(e.signal, 0);
	cr_assert_str_eq(e.host, "node-b");
	cr_assert_str_eq(e.detail, "rank 5 (local rank 1) on node-b exited with 3");
	rdzv_end_describe('D', "node-c left (SIGUSR1)", &e);
	cr_assert_eq(e.status, 0);
	cr_assert_eq(e.signal, SIGUSR1);
	cr_assert_str_eq(e.host, "node-c");
	cr_assert_str_eq(e.detail, "node-c left (SIGUSR1)");
	rdzv_end_describe('X', "the store host node-a was stopped (SIGTERM)", &e);
	cr_assert_eq(e.signal, SIGTERM);
	cr_assert_str_eq(e.host, "node-a");
	rdzv_end_describe('J', "node-d", &e);
	cr_assert_str_eq(e.host, "node-d");
	/* Text that names nothing: no status, no signal, no host. */
	rdzv_end_describe('F', "rank (SIGBOGUS) on", &e);
	cr_assert_eq(e.status, 0);
	cr_assert_eq(e.signal, 0);
	cr_assert_str_eq(e.host, "");
	cr_assert_str_eq(e.detail, "rank (SIGBOGUS) on");
	rdzv_end_describe('D', "lost node-e: no heartbeat for 30 s", &e);
	cr_assert_str_eq(e.host, "");
}

/*
 * The FileTimer server (agent/filetimer.c, compiled in here: it is private
 * to agent/): how far ahead it arms its one timer for what clients ask.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../../agent/filetimer.c"

static int owns_all(void *data, pid_t pid, int *rank)
{
	(void)data;
	(void)pid;
	*rank = 0;
	return 1;
}

/* Write line to ft's FIFO and run the loop (bounded) until it is read. */
static void request(uv_loop_t *loop, struct filetimer *ft, const char *line,
		    int want_n)
{
	int fd = open(filetimer_path(ft), O_WRONLY | O_NONBLOCK);

	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, line, strlen(line)), (ssize_t)strlen(line));
	close(fd);
	for (int i = 0; i < 1000 && ft->n != want_n; i++) {
		uv_run(loop, UV_RUN_NOWAIT);
		usleep(1000);
	}
	cr_assert_eq(ft->n, want_n, "the request was not taken");
}

/*
 * An expiration of 1e300 (no integer holds it in ms) armed the timer for
 * 1 ms: about 925 wake-ups a second. It must be armed far ahead, and an
 * ordinary one as asked.
 */
Test(filetimer, far_expiration_arms_far_ahead, .timeout = 30)
{
	uv_loop_t loop;
	struct filetimer *ft = NULL;
	char err[256] = "", line[256];

	cr_assert_eq(uv_loop_init(&loop), 0);
	cr_assert_eq(filetimer_new(&loop, NULL, owns_all, NULL, &ft, err,
				   sizeof(err)),
		     0, "%s", err);
	snprintf(line, sizeof(line),
		 "{\"pid\": %d, \"scope_id\": \"far\", \"expiration_time\": "
		 "1e300, \"signal\": 0}\n",
		 (int)getpid());
	request(&loop, ft, line, 1);
	cr_assert(uv_is_active((uv_handle_t *)&ft->timer));
	cr_assert_geq(uv_timer_get_due_in(&ft->timer), 3000 * 1000,
		      "armed for %llu ms",
		      (unsigned long long)uv_timer_get_due_in(&ft->timer));
	/* One 60 s ahead is armed for those 60 s. */
	snprintf(line, sizeof(line),
		 "{\"pid\": %d, \"scope_id\": \"near\", \"expiration_time\": "
		 "%.3f, \"signal\": 0}\n",
		 (int)getpid(), now_epoch() + 60);
	request(&loop, ft, line, 2);
	cr_assert_geq(uv_timer_get_due_in(&ft->timer), 55 * 1000);
	cr_assert_leq(uv_timer_get_due_in(&ft->timer), 61 * 1000);
	filetimer_close(ft);
	uv_run(&loop, UV_RUN_DEFAULT);
	cr_assert_eq(uv_loop_close(&loop), 0);
}

/*
 * The agent's console buffer (agent/console.c, compiled in here as
 * test_console does) at its edge: with the reader stalled, writes up to
 * exactly the limit are queued and all reach the reader once it reads;
 * the write that would pass the limit by one byte is dropped whole and
 * counted in the notice. The default (--console_buffer's 4M) and a set
 * value.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../agent/collapse.c"
#include "../../agent/jobcon.c"
#include "../../agent/jobrec.c"
#include "../../agent/console.c"
#include "crun/cfg.h"

/* fd 1 becomes the write end of a pipe of 4 KiB; returns the read end. */
static int stdout_to_pipe(void)
{
	int p[2];

	cr_assert_eq(pipe(p), 0);
	fcntl(p[1], F_SETPIPE_SZ, 4096);
	cr_assert_eq(dup2(p[1], 1), 1);
	close(p[1]);
	return p[0];
}

/* The default of --console_buffer, as the option table gives it. */
static size_t default_limit(void)
{
	struct crun_cfg cfg;
	char *argv[] = {(char *)"crun", (char *)"x.py", NULL};
	char *envp[] = {NULL};
	char err[512];
	int done = 0;
	size_t v;

	cfg_init(&cfg);
	cr_assert_eq(cfg_parse_args(&cfg, 2, argv, &done, err, sizeof(err)),
		     0, "%s", err);
	cr_assert_eq(cfg_apply_env(&cfg, envp), 0);
	cr_assert_eq(cfg_finalize(&cfg, err, sizeof(err)), 0, "%s", err);
	v = cfg.console_buffer;
	cfg_release(&cfg);
	return v;
}

/*
 * Fill the stalled pipe (4 KiB taken by the kernel), then queue lines of
 * exactly limit bytes, then extra bytes more; read it all back: every
 * queued byte arrives, and the last line was dropped iff extra > 0.
 */
static void edge(size_t limit, size_t extra)
{
	uv_loop_t loop;
	struct console *c;
	static char line[1 << 16];
	size_t queued = 0, len = 0, cap = 0, step, sent = 0;
	char *all = NULL, buf[65536];
	int rfd, idle;

	uv_loop_init(&loop);
	rfd = stdout_to_pipe();
	cr_assert_eq(console_new(&loop, limit, &c), 0);
	memset(line, 'a', sizeof(line));
	/* What the pipe takes at once is written, not queued. */
	for (int i = 0; i < 64 && console_out(c, 1)->len == 0; i++) {
		line[99] = '\n';
		console_write(c, 1, line, 100);
		sent += 100;
	}
	cr_assert_gt(console_out(c, 1)->len, 0, "the pipe never filled");
	queued = console_out(c, 1)->len;
	/* Lines up to exactly the limit. */
	while (queued < limit) {
		step = limit - queued < sizeof(line) ? limit - queued
						     : sizeof(line);
		memset(line, 'b', step);
		line[step - 1] = '\n';
		console_put(c, 1, line, step);
		cr_assert_eq(console_out(c, 1)->len, queued + step,
			     "a line within the limit was dropped");
		queued += step;
		sent += step;
	}
	cr_assert_eq(console_out(c, 1)->len, limit);
	cr_assert_eq(console_out(c, 1)->drop_bytes, 0);
	if (extra > 0) {
		memset(line, 'c', extra);
		line[extra - 1] = '\n';
		console_put(c, 1, line, extra);
		cr_assert_eq(console_out(c, 1)->len, limit);
		cr_assert_eq(console_out(c, 1)->drop_bytes, extra);
		cr_assert_eq(console_out(c, 1)->drop_lines, 1);
	}
	/* The reader wakes up: everything queued, then the notice. */
	fcntl(rfd, F_SETFL, O_NONBLOCK);
	console_flush(c, 1);
	for (idle = 0; idle < 200;) {
		ssize_t k = read(rfd, buf, sizeof(buf));

		if (k > 0) {
			if (len + (size_t)k + 1 > cap) {
				cap = (len + (size_t)k + 1) * 2;
				all = realloc(all, cap);
			}
			memcpy(all + len, buf, (size_t)k);
			len += (size_t)k;
			idle = 0;
		} else {
			idle++;
			usleep(2000);
		}
		uv_run(&loop, UV_RUN_NOWAIT);
	}
	cr_assert_not_null(all);
	all[len] = '\0';
	if (extra > 0) {
		char note[128];

		snprintf(note, sizeof(note),
			 "crun: dropped 1 line (%zu bytes) of console output",
			 extra);
		cr_assert_not_null(strstr(all, note), "%.200s", all + sent);
		/* What was queued, then the notice alone: not the line. */
		cr_assert_eq(strncmp(all + sent, note, strlen(note)), 0);
		cr_assert_eq(len, sent + strlen(all + sent));
		cr_assert(strchr(all + sent, '\n') == all + len - 1,
			  "more than the notice after the queue");
	} else {
		cr_assert_eq(len, sent, "queued bytes lost or added");
	}
	cr_assert_eq(all[len - 1], '\n');
	console_close(c);
	uv_run(&loop, UV_RUN_DEFAULT);
	cr_assert_eq(uv_loop_close(&loop), 0);
	console_free(c, 100);
	close(rfd);
	free(all);
}

Test(limits_console, default_exact, .timeout = 60)
{
	size_t l = default_limit();

	cr_assert_eq(l, 4u << 20);
	edge(l, 0);
}

Test(limits_console, default_plus_one, .timeout = 60)
{
	edge(default_limit(), 1);
}

Test(limits_console, set_exact, .timeout = 30) { edge(16384, 0); }

Test(limits_console, set_plus_one, .timeout = 30) { edge(16384, 1); }

Test(limits_console, set_plus_line, .timeout = 30) { edge(16384, 100); }

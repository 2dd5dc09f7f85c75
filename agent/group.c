/*
 * A worker's process group after the worker exited: whatever it left behind
 * (`sleep 987 &`, dataloader processes) is stopped too, so nothing of a
 * worker outlives its round, let alone crun.
 *
 * Happy path: at the worker's exit its group is empty (kill(-pgid, 0) fails)
 * and nothing happens. Otherwise the survivors get SIGTERM, and a timer of
 * the worker's checks every 50 ms whether the group is gone; the worker is
 * not done (its round does not end) until it is.
 *
 * Failure modes: survivors ignore SIGTERM (SIGKILL after --shutdown_timeout);
 * survivors that are only zombies whose new parent does not reap them count
 * as gone; a group still there 5 s after SIGKILL (a process stuck in the
 * kernel) is given up on with a message naming the process, its state and
 * wait channel (stacks.h), so the round still ends.
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crun/log.h"
#include "group.h"
#include "crun/stacks.h"

#define GROUP_TICK_MS 50
#define GROUP_KILL_GRACE_MS 5000

/*
 * Is a process of group pg alive (not a zombie)? Scans /proc when needed;
 * *who (may be NULL) is then the first one found.
 */
static int group_alive_pid(pid_t pg, pid_t *who)
{
	DIR *d;
	struct dirent *e;
	int alive = 0;

	if (who)
		*who = 0;
	if (pg <= 0 || kill(-pg, 0) != 0)
		return 0;
	d = opendir("/proc");
	if (d == NULL)
		return 1;
	while (!alive && (e = readdir(d)) != NULL) {
		char path[300], buf[512], *close_paren, state;
		long pgrp;
		FILE *f;

		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
		f = fopen(path, "r");
		if (f == NULL)
			continue;
		if (fgets(buf, sizeof(buf), f) &&
		    (close_paren = strrchr(buf, ')')) != NULL &&
		    sscanf(close_paren + 1, " %c %*d %ld", &state, &pgrp) ==
			2 &&
		    pgrp == pg && state != 'Z') {
			alive = 1;
			if (who)
				*who = (pid_t)strtol(e->d_name, NULL, 10);
		}
		fclose(f);
	}
	closedir(d);
	return alive;
}

static int group_alive(pid_t pg)
{
	return group_alive_pid(pg, NULL);
}

static void group_on_close(uv_handle_t *h)
{
	struct wgroup *g = h->data;

	g->active = 0;
	g->closed_cb(g, g->data);
}

static void group_on_tick(uv_timer_t *t)
{
	struct wgroup *g = t->data;
	uint64_t now = uv_now(t->loop);

	if (!group_alive(g->pgid)) {
		uv_timer_stop(t);
		uv_close((uv_handle_t *)t, group_on_close);
		return;
	}
	if (!g->killed && now >= g->deadline) {
		kill(-g->pgid, SIGKILL);
		g->killed = 1;
		g->deadline = now + GROUP_KILL_GRACE_MS;
	} else if (g->killed && now >= g->deadline) {
		char line[300];
		pid_t who;

		log_say("process group %d of local rank %d survives SIGKILL: "
			"giving up on it",
			(int)g->pgid, g->local_rank);
		/* Name the one still there: its state and wait channel. */
		if (group_alive_pid(g->pgid, &who) && who > 0) {
			stacks_describe_unkillable(g->local_rank, who, line,
						   sizeof(line));
			log_say("in it, local %s", line);
		}
		uv_timer_stop(t);
		uv_close((uv_handle_t *)t, group_on_close);
	}
}

int group_reap(struct wgroup *g, uv_loop_t *loop, pid_t pgid, int local_rank,
	       double timeout_s, wgroup_closed_cb closed_cb, void *data)
{
	if (g->active || !group_alive(pgid))
		return 0;
	kill(-pgid, SIGTERM);
	if (uv_timer_init(loop, &g->timer)) {
		kill(-pgid, SIGKILL);
		return 0;
	}
	g->pgid = pgid;
	g->local_rank = local_rank;
	g->closed_cb = closed_cb;
	g->data = data;
	g->timer.data = g;
	g->active = 1;
	g->killed = 0;
	g->deadline = uv_now(loop) + (uint64_t)(timeout_s * 1000);
	uv_timer_start(&g->timer, group_on_tick, GROUP_TICK_MS, GROUP_TICK_MS);
	return 1;
}

void group_signal(struct wgroup *g, int sig)
{
	if (g->active)
		kill(-g->pgid, sig);
}

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
 * kernel) is given up on with a message, so the round still ends.
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crun/log.h"
#include "agent.h"

#define GROUP_TICK_MS 50
#define GROUP_KILL_GRACE_MS 5000

/* Is a process of group pg alive (not a zombie)? Scans /proc when needed. */
static int group_alive(pid_t pg)
{
	DIR *d;
	struct dirent *e;
	int alive = 0;

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
		    pgrp == pg && state != 'Z')
			alive = 1;
		fclose(f);
	}
	closedir(d);
	return alive;
}

static void group_on_close(uv_handle_t *h)
{
	struct worker *w = h->data;

	w->grp.active = 0;
	worker_handle_closed(w);
}

static void group_on_tick(uv_timer_t *t)
{
	struct worker *w = t->data;
	uint64_t now = uv_now(t->loop);

	if (!group_alive(w->pid)) {
		uv_timer_stop(t);
		uv_close((uv_handle_t *)t, group_on_close);
		return;
	}
	if (!w->grp.killed && now >= w->grp.deadline) {
		kill(-w->pid, SIGKILL);
		w->grp.killed = 1;
		w->grp.deadline = now + GROUP_KILL_GRACE_MS;
	} else if (w->grp.killed && now >= w->grp.deadline) {
		log_say("process group %d of local rank %d survives SIGKILL: "
			"giving up on it",
			(int)w->pid, w->local_rank);
		uv_timer_stop(t);
		uv_close((uv_handle_t *)t, group_on_close);
	}
}

void group_reap(struct worker *w)
{
	const struct crun_cfg *cfg = agent_cfg(w->a);
	uv_loop_t *loop = agent_loop(w->a);

	if (w->grp.active || !group_alive(w->pid))
		return;
	kill(-w->pid, SIGTERM);
	if (uv_timer_init(loop, &w->grp.timer)) {
		kill(-w->pid, SIGKILL);
		return;
	}
	w->grp.timer.data = w;
	w->grp.active = 1;
	w->grp.killed = 0;
	w->grp.deadline =
	    uv_now(loop) + (uint64_t)(cfg->shutdown_timeout * 1000);
	w->handles++;
	uv_timer_start(&w->grp.timer, group_on_tick, GROUP_TICK_MS,
		       GROUP_TICK_MS);
}

void group_signal(struct worker *w, int sig)
{
	if (w->grp.active)
		kill(-w->pid, sig);
}

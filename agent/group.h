/*
 * A worker's process group after the worker exited (group.c): what it left
 * behind gets SIGTERM, SIGKILL after the shutdown timeout, and its owner
 * hears through closed_cb once the group is gone. Private to agent/.
 */
#ifndef CRUN_AGENT_GROUP_H
#define CRUN_AGENT_GROUP_H

#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

struct wgroup;

/** The group is gone (or given up on) and the timer closed. */
typedef void (*wgroup_closed_cb)(struct wgroup *g, void *data);

/* The survivors of one worker's process group; embedded in its worker. */
struct wgroup {
	uv_timer_t timer;
	pid_t pgid;
	int local_rank; /* for the line said when SIGKILL does not help */
	int active;	/* the timer handle is open */
	int killed;	/* SIGKILL sent */
	uint64_t deadline;
	wgroup_closed_cb closed_cb;
	void *data;
};

/**
 * After the worker (the leader of group pgid) exited: stop what is left of
 * the group, SIGKILL after timeout_s. Returns 1 if something was left and
 * closed_cb(g, data) will run once it is gone, 0 if nothing was left (then
 * closed_cb never runs).
 */
int group_reap(struct wgroup *g, uv_loop_t *loop, pid_t pgid, int local_rank,
	       double timeout_s, wgroup_closed_cb closed_cb, void *data);

/** Send sig to what is left of the group, if group_reap is watching it. */
void group_signal(struct wgroup *g, int sig);

#endif

/*
 * Checkpoint grace (--checkpoint_grace): when the group must stop, a rank
 * that is writing a checkpoint finishes it first. A rank says so with a
 * marker file, $CRUN_CHECKPOINT_FILE, which it creates before it writes and
 * removes after: no crun library. At the stop, the ranks whose marker
 * exists are held (their stop signal waits) until the marker is gone or the
 * grace has passed, whichever comes first; the others are stopped at once.
 * The markers' directory is watched (inotify), not polled.
 *
 * The pool owns one and reports to nobody else: each held rank let go is
 * told by the release callback, once.
 */
#ifndef CRUN_AGENT_GRACE_H
#define CRUN_AGENT_GRACE_H

#include <uv.h>

/* A held rank let go: its marker is gone (timed_out 0) or the grace passed. */
typedef void (*grace_release_cb)(void *data, int local_rank, int timed_out);

struct grace {
	uv_fs_event_t watch; /* the markers' directory, while ranks are held */
	uv_timer_t timer;    /* the grace, while ranks are held */
	double seconds;	     /* 0: off */
	int n;		     /* ranks of the round */
	char *held;	     /* per local rank: held now */
	const char **marker; /* per local rank, borrowed; NULL: none */
	int nheld;
	grace_release_cb release;
	void *data;
};

/** Set g up on loop: seconds of grace (0: off). 0 or a libuv error. */
int grace_init(struct grace *g, uv_loop_t *loop, double seconds,
	       grace_release_cb release, void *data);

/** Close g's handles (the loop then runs dry once the rest is closed). */
void grace_close(struct grace *g);

/**
 * The group must stop: hold each of the n ranks whose marker[i] (NULL: none)
 * exists. marker must outlive the hold. Returns how many are held (0 when
 * the grace is off or none is writing).
 */
int grace_hold(struct grace *g, const char *const *marker, int n);

/** Whether local rank i is held. */
int grace_holds(const struct grace *g, int i);

/** Rank i needs no more waiting (it exited): no release for it. */
void grace_forget(struct grace *g, int i);

/** The round is over: nothing is held any more, no release comes. */
void grace_end(struct grace *g);

#endif

/*
 * Checkpoint grace (grace.h).
 *
 * Happy path: grace_hold finds the ranks whose marker exists, watches the
 * markers' directory and arms the grace; each marker removed lets its rank
 * go (release, timed_out 0); the last one disarms both.
 *
 * Failure modes: the grace passes (every rank still held is let go,
 * timed_out 1); the directory cannot be watched (the grace alone bounds the
 * hold, said once); a held rank exits by itself (grace_forget).
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "crun/log.h"
#include "grace.h"

/* The directory part of path, in buf. */
static const char *dir_of(const char *path, char *buf, size_t len)
{
	const char *slash = strrchr(path, '/');
	size_t n = slash ? (size_t)(slash - path) : 0;

	if (slash == NULL)
		return ".";
	if (n == 0)
		return "/";
	if (n >= len)
		n = len - 1;
	memcpy(buf, path, n);
	buf[n] = '\0';
	return buf;
}

/* Nothing is held any more: disarm. */
static void grace_idle(struct grace *g)
{
	uv_timer_stop(&g->timer);
	uv_fs_event_stop(&g->watch);
}

static void grace_let_go(struct grace *g, int i, int timed_out)
{
	g->held[i] = 0;
	if (--g->nheld == 0)
		grace_idle(g);
	g->release(g->data, i, timed_out);
}

/* Something changed in the markers' directory: which markers are gone. */
static void grace_on_event(uv_fs_event_t *h, const char *name, int events,
			   int status)
{
	struct grace *g = h->data;

	(void)name;
	(void)events;
	(void)status;
	for (int i = 0; i < g->n && g->nheld > 0; i++)
		if (g->held[i] && access(g->marker[i], F_OK) != 0)
			grace_let_go(g, i, 0);
}

static void grace_on_timer(uv_timer_t *t)
{
	struct grace *g = t->data;

	for (int i = 0; i < g->n && g->nheld > 0; i++)
		if (g->held[i])
			grace_let_go(g, i, 1);
}

int grace_init(struct grace *g, uv_loop_t *loop, double seconds,
	       grace_release_cb release, void *data)
{
	int rc;

	memset(g, 0, sizeof(*g));
	g->seconds = seconds;
	g->release = release;
	g->data = data;
	g->watch.data = g;
	g->timer.data = g;
	if ((rc = uv_timer_init(loop, &g->timer)))
		return rc;
	return uv_fs_event_init(loop, &g->watch);
}

void grace_close(struct grace *g)
{
	grace_end(g);
	uv_close((uv_handle_t *)&g->timer, NULL);
	uv_close((uv_handle_t *)&g->watch, NULL);
}

int grace_hold(struct grace *g, const char *const *marker, int n)
{
	char buf[4096];
	const char *dir;
	int rc, first = -1;

	grace_end(g);
	for (int i = 0; i < n && first < 0; i++)
		if (marker[i])
			first = i;
	if (g->seconds <= 0 || first < 0)
		return 0;
	if ((g->held = calloc((size_t)n, 1)) == NULL)
		return 0;
	g->n = n;
	g->marker = (const char **)marker;
	/*
	 * The watch first (the round's markers share one directory): a
	 * marker removed after it is read is an event to come.
	 */
	dir = dir_of(marker[first], buf, sizeof(buf));
	rc = uv_fs_event_start(&g->watch, grace_on_event, dir, 0);
	for (int i = 0; i < n; i++)
		if (marker[i] && access(marker[i], F_OK) == 0) {
			g->held[i] = 1;
			g->nheld++;
		}
	if (g->nheld == 0) {
		grace_end(g);
		return 0;
	}
	if (rc)
		log_say("cannot watch '%s' for checkpoint markers (%s): "
			"waiting the whole grace",
			dir, uv_strerror(rc));
	uv_timer_start(&g->timer, grace_on_timer, (uint64_t)(g->seconds * 1000),
		       0);
	return g->nheld;
}

int grace_holds(const struct grace *g, int i)
{
	return g->held && i >= 0 && i < g->n && g->held[i];
}

void grace_forget(struct grace *g, int i)
{
	if (!grace_holds(g, i))
		return;
	g->held[i] = 0;
	if (--g->nheld == 0)
		grace_idle(g);
}

void grace_end(struct grace *g)
{
	if (g->held)
		grace_idle(g);
	free(g->held);
	g->held = NULL;
	g->marker = NULL;
	g->n = g->nheld = 0;
}

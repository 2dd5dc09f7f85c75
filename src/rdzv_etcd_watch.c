/*
 * The etcd backend's watch stream (rdzv_etcd.c has the whole backend): one
 * stream on the job's keys, opened from the last revision seen. A PUT on a
 * key a read waits for wakes it (or, while the read is out, makes it read
 * again); a DELETE of a node's mark tells the store host the node vanished.
 *
 * Failure modes: the revision was compacted (reopen from now and re-read
 * every waiter); etcd ends, cancels or never confirms the watch (reopen
 * after pauses, doubling up to 2 s; after read_timeout of that the backend
 * fails, saying what etcd did); a failover (reopen on the new endpoint).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crun/err.h"
#include "crun/log.h"
#include "rdzv_etcd_internal.h"

/*
 * A PUT of k: read again if o waits for it. If o is reading right now, its
 * answer may predate the PUT (the watch and the read are two connections):
 * mark it, so a pass that found keys missing reads once more.
 */
static int wants(struct kop *o, const char *k)
{
	if (o == NULL || (o->type != OP_MGET && o->type != OP_WATCH) || o->dead)
		return 0;
	for (size_t i = 0; i < o->n; i++) {
		if (strcmp(o->keys[i], k) != 0)
			continue;
		if (o->waiting)
			return 1;
		o->dirty = 1;
		return 0;
	}
	return 0;
}

/* Something changed, or may have: every waiter reads again. */
static void recheck_all(struct crun_rdzv_etcd *s)
{
	if (s->head && s->head->waiting)
		rdzv_etcd__step(s->head);
	if (s->w && s->w->waiting)
		rdzv_etcd__step(s->w);
}

static void on_event(struct crun_rdzv_etcd *s, json_t *ev)
{
	json_t *kv = json_object_get(ev, "kv");
	const char *type = json_string_value(json_object_get(ev, "type"));
	size_t nslen = strlen(s->ns), klen;
	char *k = NULL;
	int64_t rev = etcd_int(kv, "mod_revision");

	if (rev > s->rev)
		s->rev = rev;
	if (etcd_unb64(json_object_get(kv, "key"), &k, &klen))
		return;
	if (klen <= nslen + 2 || memcmp(k, s->ns, nslen) != 0)
		goto out;
	if (type && strcmp(type, "DELETE") == 0) {
		/* A node's mark went: that node vanished (or left). */
		const char *p = k + nslen, *slash;

		if (strncmp(p, "w/", 2) == 0 &&
		    (slash = strchr(p + 2, '/')) != NULL && s->vanish_cb &&
		    strncmp(p + 2, s->node, (size_t)(slash - p - 2)) != 0)
			s->vanish_cb(s->vanish_arg, slash + 1,
				     strlen(slash + 1));
		goto out;
	}
	if (wants(s->head, k))
		rdzv_etcd__step(s->head);
	if (wants(s->w, k))
		rdzv_etcd__step(s->w);
out:
	free(k);
}

static void handle_msg(struct crun_rdzv_etcd *s, json_t *msg)
{
	json_t *res = json_object_get(msg, "result"), *evs, *ev;
	int64_t hrev;
	size_t i;

	if (res == NULL)
		return; /* an error: the stream ends and is reopened */
	hrev = etcd_int(json_object_get(res, "header"), "revision");
	if (etcd_int(res, "compact_revision") > 0) {
		/*
		 * Compacted past us: watch again from the oldest revision
		 * etcd still has and read every wait again, so a PUT lands
		 * in the reads or in the new watch.
		 */
		int64_t c = etcd_int(res, "compact_revision");

		log_say("etcd compacted past revision %lld of this "
			"node's watch; reading every wait again",
			(long long)s->rev + 1);
		s->rev = c - 1;
		s->reopen = 1;
		uv_timer_start(&s->restart, rdzv_etcd__on_restart, 0, 0);
		recheck_all(s);
		return;
	}
	if (json_is_true(json_object_get(res, "canceled"))) {
		const char *why =
		    json_string_value(json_object_get(res, "cancel_reason"));
		char m[300];

		snprintf(m, sizeof(m), "etcd canceled this node's watch (%s)",
			 why && *why ? why : "no reason given");
		s->reopen = 1;
		rdzv_etcd__watch_retry(s, m, 1);
		recheck_all(s);
		return;
	}
	if (json_is_true(json_object_get(res, "created")))
		s->wcreated = 1;
	if (json_is_true(json_object_get(res, "created")) && s->rev == 0 &&
	    hrev > 0)
		s->rev = hrev;
	evs = json_object_get(res, "events");
	if (json_array_size(evs))
		s->wtries = 0, s->wsince = 0; /* the watch works */
	json_array_foreach(evs, i, ev) on_event(s, ev);
}

static void on_evtimer(uv_timer_t *t)
{
	struct crun_rdzv_etcd *s = t->data;
	json_t *q = s->pending, *m;
	size_t i;

	s->pending = json_array();
	json_array_foreach(q, i, m)
	{
		if (s->closing || s->failed)
			break;
		handle_msg(s, m);
	}
	json_decref(q);
}

/*
 * Called from inside curl's write callback, where the transfers must not
 * change: handled from the loop instead.
 */
static void on_watch_msg(json_t *msg, void *arg)
{
	struct crun_rdzv_etcd *s = arg;

	json_array_append(s->pending, msg);
	if (!uv_is_active((uv_handle_t *)&s->evtimer))
		uv_timer_start(&s->evtimer, on_evtimer, 0, 0);
}

void rdzv_etcd__on_restart(uv_timer_t *t)
{
	struct crun_rdzv_etcd *s = t->data;

	if (s->closing || s->failed)
		return;
	if (s->stream && s->reopen) {
		etcd_req_cancel(s->stream);
		s->stream = NULL;
	}
	s->reopen = 0;
	if (s->stream == NULL)
		rdzv_etcd__watch_open(s);
}

static void on_watch_end(int status, json_t *resp, void *arg)
{
	struct crun_rdzv_etcd *s = arg;
	char m[1200];

	(void)resp;
	s->stream = NULL;
	if (status != CRUN_ECANCELED && json_array_size(s->pending)) {
		/* Its last messages first (they may say why it ended). */
		uv_timer_stop(&s->evtimer);
		on_evtimer(&s->evtimer);
	}
	if (status == CRUN_ECANCELED || s->closing || s->failed ||
	    (s->reopen && uv_is_active((uv_handle_t *)&s->restart)))
		return; /* (a cancel already set the reopening) */
	/* Reopen from where we were, after a pause. */
	snprintf(m, sizeof(m), "this node's etcd watch ended (%s)",
		 status ? etcd_errmsg(s->etcd) : "closed by etcd");
	/* No answer at all: the other requests tell (naming endpoints). */
	rdzv_etcd__watch_retry(s, m, status != CRUN_EETCD);
}

/*
 * The watch ended or was canceled (why): open it again after a pause that
 * doubles; saying why once for each run of ends, and giving up (fatal)
 * once they went on for the timeout. A watch that lived a while before
 * ending starts a new run.
 */
void rdzv_etcd__watch_retry(struct crun_rdzv_etcd *s, const char *why,
			    int may_give_up)
{
	uint64_t now = uv_now(s->loop);
	char m[1400];

	if (s->wsince == 0 || now - s->wopened >= WATCH_STABLE_MS) {
		s->wsince = now;
		s->wtries = 0;
		log_say("%s; opening it again", why);
	}
	if (may_give_up && now - s->wsince >= (uint64_t)(s->timeout * 1000)) {
		snprintf(m, sizeof(m), "%s, again and again for %.0f s", why,
			 s->timeout);
		return rdzv_etcd__fail_all(s, CRUN_EETCD, m);
	}
	uv_timer_start(&s->restart, rdzv_etcd__on_restart,
		       etcd_backoff_ms(etcd_limits(s->etcd), s->wtries++), 0);
}

void rdzv_etcd__watch_open(struct crun_rdzv_etcd *s)
{
	int rc;

	s->wopened = uv_now(s->loop);
	s->wcreated = 0;
	s->stream_failovers = etcd_failovers(s->etcd);
	rc = etcd_stream(s->etcd, "/v3/watch",
			 etcd_watch_req(s->ns, s->rev ? s->rev + 1 : 0),
			 on_watch_msg, on_watch_end, s, &s->stream);
	if (rc)
		s->stream = NULL;
}

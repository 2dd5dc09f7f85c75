/*
 * The etcd backend's watch stream: one stream on the job's keys, opened
 * from the last revision seen. Each PUT and DELETE under the job's keys is
 * reported (the backend wakes its reads, or hears that a node vanished).
 *
 * Failure modes: the revision was compacted (reopen from the oldest
 * revision etcd has, and report a recheck); etcd ends, cancels or never
 * confirms the stream (reopen after pauses, doubling up to 2 s; after
 * read_timeout of that, fatal, saying what etcd did); a failover (reopen on
 * the new endpoint).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crun/err.h"
#include "crun/log.h"
#include "rdzv_etcd_watch.h"

#define STABLE_MS 5000	/* a stream that lived this long worked */
#define CREATED_MS 2000 /* etcd confirms a new stream within this */

static void watch_open(struct rdzv_etcd_watch *w);
static void watch_retry(struct rdzv_etcd_watch *w, const char *why,
			int may_give_up);

static void on_event(struct rdzv_etcd_watch *w, json_t *ev)
{
	json_t *kv = json_object_get(ev, "kv");
	const char *type = json_string_value(json_object_get(ev, "type"));
	size_t nslen = strlen(w->ns), klen;
	char *k = NULL;
	int64_t rev = etcd_int(kv, "mod_revision");

	if (rev > w->rev)
		w->rev = rev;
	if (etcd_unb64(json_object_get(kv, "key"), &k, &klen))
		return;
	if (klen > nslen + 2 && memcmp(k, w->ns, nslen) == 0) {
		if (type && strcmp(type, "DELETE") == 0)
			w->on.deleted(w->data, k);
		else
			w->on.put(w->data, k);
	}
	free(k);
}

static void on_restart(uv_timer_t *t)
{
	struct rdzv_etcd_watch *w = t->data;

	if (w->stopped)
		return;
	if (w->stream && w->reopen) {
		etcd_req_cancel(w->stream);
		w->stream = NULL;
	}
	w->reopen = 0;
	if (w->stream == NULL)
		watch_open(w);
}

static void handle_msg(struct rdzv_etcd_watch *w, json_t *msg)
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
			(long long)w->rev + 1);
		w->rev = c - 1;
		w->reopen = 1;
		uv_timer_start(&w->restart, on_restart, 0, 0);
		w->on.recheck(w->data);
		return;
	}
	if (json_is_true(json_object_get(res, "canceled"))) {
		const char *why =
		    json_string_value(json_object_get(res, "cancel_reason"));
		char m[300];

		snprintf(m, sizeof(m), "etcd canceled this node's watch (%s)",
			 why && *why ? why : "no reason given");
		w->reopen = 1;
		watch_retry(w, m, 1);
		if (!w->stopped)
			w->on.recheck(w->data);
		return;
	}
	if (json_is_true(json_object_get(res, "created")))
		w->created = 1;
	if (json_is_true(json_object_get(res, "created")) && w->rev == 0 &&
	    hrev > 0)
		w->rev = hrev;
	evs = json_object_get(res, "events");
	if (json_array_size(evs))
		w->tries = 0, w->since = 0; /* the watch works */
	json_array_foreach(evs, i, ev)
	{
		if (w->stopped)
			break;
		on_event(w, ev);
	}
}

static void on_evtimer(uv_timer_t *t)
{
	struct rdzv_etcd_watch *w = t->data;
	json_t *q = w->pending, *m;
	size_t i;

	w->pending = json_array();
	json_array_foreach(q, i, m)
	{
		if (w->stopped)
			break;
		handle_msg(w, m);
	}
	json_decref(q);
}

/*
 * Called from inside curl's write callback, where the transfers must not
 * change: handled from the loop instead.
 */
static void on_watch_msg(json_t *msg, void *arg)
{
	struct rdzv_etcd_watch *w = arg;

	json_array_append(w->pending, msg);
	if (!uv_is_active((uv_handle_t *)&w->evtimer))
		uv_timer_start(&w->evtimer, on_evtimer, 0, 0);
}

static void on_watch_end(int status, json_t *resp, void *arg)
{
	struct rdzv_etcd_watch *w = arg;
	char m[1200];

	(void)resp;
	w->stream = NULL;
	if (status != CRUN_ECANCELED && json_array_size(w->pending)) {
		/* Its last messages first (they may say why it ended). */
		uv_timer_stop(&w->evtimer);
		on_evtimer(&w->evtimer);
	}
	if (status == CRUN_ECANCELED || w->stopped ||
	    (w->reopen && uv_is_active((uv_handle_t *)&w->restart)))
		return; /* (a cancel already set the reopening) */
	/* Reopen from where we were, after a pause. */
	snprintf(m, sizeof(m), "this node's etcd watch ended (%s)",
		 status ? etcd_errmsg(w->etcd) : "closed by etcd");
	/* No answer at all: the other requests tell (naming endpoints). */
	watch_retry(w, m, status != CRUN_EETCD);
}

/*
 * The stream ended or was canceled (why): open it again after a pause
 * that doubles; saying why once for each run of ends, and giving up
 * (fatal) once they went on for the timeout. A stream that lived a while
 * before ending starts a new run.
 */
static void watch_retry(struct rdzv_etcd_watch *w, const char *why,
			int may_give_up)
{
	uint64_t now = uv_now(w->loop);
	char m[1400];

	if (w->since == 0 || now - w->opened >= STABLE_MS) {
		w->since = now;
		w->tries = 0;
		log_say("%s; opening it again", why);
	}
	if (may_give_up && now - w->since >= (uint64_t)(w->timeout * 1000)) {
		snprintf(m, sizeof(m), "%s, again and again for %.0f s", why,
			 w->timeout);
		w->on.fatal(w->data, CRUN_EETCD, m);
		return;
	}
	uv_timer_start(&w->restart, on_restart,
		       etcd_backoff_ms(etcd_limits(w->etcd), w->tries++), 0);
}

static void watch_open(struct rdzv_etcd_watch *w)
{
	w->opened = uv_now(w->loop);
	w->created = 0;
	w->failovers = etcd_failovers(w->etcd);
	if (etcd_stream(w->etcd, "/v3/watch",
			etcd_watch_req(w->ns, w->rev ? w->rev + 1 : 0),
			on_watch_msg, on_watch_end, w, &w->stream))
		w->stream = NULL;
}

void rdzv_etcd_watch_init(struct rdzv_etcd_watch *w, uv_loop_t *loop,
			  struct etcd *etcd, const char *ns, double timeout,
			  const struct rdzv_etcd_watch_ops *on, void *data)
{
	memset(w, 0, sizeof(*w));
	w->loop = loop;
	w->etcd = etcd;
	w->ns = ns;
	w->timeout = timeout;
	w->on = *on;
	w->data = data;
	w->pending = json_array();
	uv_timer_init(loop, &w->restart);
	uv_timer_init(loop, &w->evtimer);
	w->restart.data = w->evtimer.data = w;
}

void rdzv_etcd_watch_start(struct rdzv_etcd_watch *w, int64_t rev)
{
	if (w->stopped)
		return;
	if (w->rev == 0)
		w->rev = rev;
	if (w->stream == NULL)
		watch_open(w);
}

void rdzv_etcd_watch_check(struct rdzv_etcd_watch *w)
{
	if (w->stopped || w->stream == NULL)
		return;
	if (!w->created && uv_now(w->loop) - w->opened >= CREATED_MS) {
		/* Without it this node would never see the others' writes. */
		etcd_req_cancel(w->stream);
		w->stream = NULL;
		watch_retry(w,
			    "etcd accepted this node's watch but never "
			    "confirmed it (no answer in 2 s)",
			    1);
		return;
	}
	/* After a failover the stream moves to the endpoint that answers. */
	if (etcd_failovers(w->etcd) != w->failovers) {
		etcd_req_cancel(w->stream);
		w->stream = NULL;
		watch_open(w);
	}
}

void rdzv_etcd_watch_stop(struct rdzv_etcd_watch *w)
{
	w->stopped = 1;
	if (w->stream) {
		etcd_req_cancel(w->stream);
		w->stream = NULL;
	}
	uv_timer_stop(&w->restart);
}

static void on_handle_closed(uv_handle_t *h)
{
	struct rdzv_etcd_watch *w = h->data;

	if (--w->handles == 0)
		w->closed_cb(w->data);
}

void rdzv_etcd_watch_close(struct rdzv_etcd_watch *w, void (*cb)(void *data))
{
	rdzv_etcd_watch_stop(w);
	w->closed_cb = cb;
	w->handles = 2;
	uv_close((uv_handle_t *)&w->restart, on_handle_closed);
	uv_close((uv_handle_t *)&w->evtimer, on_handle_closed);
}

void rdzv_etcd_watch_free(struct rdzv_etcd_watch *w)
{
	json_decref(w->pending);
	w->pending = NULL;
}

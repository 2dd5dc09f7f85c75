/*
 * The etcd backend's watch stream (rdzv_etcd_watch.c), a part of the
 * backend (rdzv_etcd.c creates it): one stream on the job's keys, opened
 * from the last revision seen, reopened when it ends. It reports what it
 * sees through rdzv_etcd_watch.on and never looks at the backend's
 * operations. Private to libcrun.
 */
#ifndef CRUN_RDZV_ETCD_WATCH_H
#define CRUN_RDZV_ETCD_WATCH_H

#include <stdint.h>
#include <uv.h>

#include "crun/etcd.h"

struct rdzv_etcd_watch_ops {
	/* A PUT (put) or DELETE (deleted) of key, an etcd key under ns. */
	void (*put)(void *data, const char *key);
	void (*deleted)(void *data, const char *key);
	/* Events may have been missed (compaction, a cancel): every wait
	 * reads again. */
	void (*recheck)(void *data);
	/* The watch could not be kept open for read_timeout: the backend
	 * cannot go on. */
	void (*fatal)(void *data, int status, const char *why);
};

struct rdzv_etcd_watch {
	uv_loop_t *loop;
	struct etcd *etcd;
	const char *ns;	  /* the job's keys: "<prefix>/<run_id>/" */
	double timeout;	  /* s: read_timeout, before giving up */
	uv_timer_t restart, evtimer;
	int handles;	  /* closing: handles not yet closed */
	struct etcd_req *stream;
	int64_t rev;	  /* last revision seen */
	uint64_t opened;  /* loop time the stream was last opened */
	uint64_t since;	  /* first of the stream's ends in a row (0: none) */
	int tries;	  /* its ends in a row */
	int created;	  /* etcd confirmed the stream open now */
	int reopen;	  /* the stream must be replaced */
	unsigned failovers; /* etcd_failovers when it was opened */
	int stopped;
	json_t *pending; /* messages not yet handled */
	struct rdzv_etcd_watch_ops on;
	void *data;
	void (*closed_cb)(void *data);
};

void rdzv_etcd_watch_init(struct rdzv_etcd_watch *w, uv_loop_t *loop,
			  struct etcd *etcd, const char *ns, double timeout,
			  const struct rdzv_etcd_watch_ops *on, void *data);
/* Open the stream (if not open), from revision rev+1 unless it saw one. */
void rdzv_etcd_watch_start(struct rdzv_etcd_watch *w, int64_t rev);
/* Now and then (every keepalive): replace a stream etcd never confirmed,
 * or one left on an endpoint the client failed over from. */
void rdzv_etcd_watch_check(struct rdzv_etcd_watch *w);
/* No more: the stream goes, nothing more is reported. */
void rdzv_etcd_watch_stop(struct rdzv_etcd_watch *w);
/* Close the handles (after stop); cb(data) once they are closed. */
void rdzv_etcd_watch_close(struct rdzv_etcd_watch *w, void (*cb)(void *data));
void rdzv_etcd_watch_free(struct rdzv_etcd_watch *w);

#endif

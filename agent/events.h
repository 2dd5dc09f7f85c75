/*
 * The event log (--event_log=PATH, or "-" for stderr): one JSON object per
 * line for every state change of this agent, each carrying "name",
 * "timestamp" (epoch seconds), "host", "run_id", "round" and "generation",
 * plus the event's own fields. Names follow torchelastic's where it has one
 * ("torchelastic.worker.status.SUCCEEDED" / ".FAILED"); crun's own start
 * with "crun.". Private to agent/.
 */
#ifndef CRUN_EVENTS_H
#define CRUN_EVENTS_H

#include <jansson.h>

struct events;

/** Open the log at path ("-": stderr). 0, or a negative error in errmsg. */
int events_open(const char *path, const char *host, struct events **out,
		char *errmsg, size_t errlen);

/** The run id, round and generation the next events carry. */
void events_context(struct events *ev, const char *run_id, int round,
		    int generation);

/**
 * Write one event named name with fields (an object, stolen; NULL: none).
 * A NULL ev does nothing, so call sites need no check.
 */
void events_emit(struct events *ev, const char *name, json_t *fields);

/**
 * events_emit with the fields json_pack builds from fmt and what follows,
 * built only when ev is not NULL (no event log: no work). The arguments
 * must own nothing ("o" takes a reference: use events_emit for those).
 */
void events_emitf(struct events *ev, const char *name, const char *fmt, ...);

void events_close(struct events *ev);

#endif

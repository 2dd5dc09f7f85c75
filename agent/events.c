/*
 * The event log (see events.h). A line is built whole with jansson and
 * written with one write(2) on an O_APPEND descriptor, so lines of agents
 * sharing one file never mix. A log that cannot be written (a full disk)
 * loses lines, counted in the next line that goes through ("lost"); it never
 * stops the job. "-" writes to stderr, which is the console's: a few lines
 * per state change, not a stream, so they go straight out.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "events.h"

struct events {
	int fd;
	int own_fd;
	char host[256];
	char run_id[256];
	int round, generation;
	unsigned long lost;
};

int events_open(const char *path, const char *host, struct events **out,
		char *errmsg, size_t errlen)
{
	struct events *ev = calloc(1, sizeof(*ev));

	*out = NULL;
	if (ev == NULL)
		return -ENOMEM;
	if (strcmp(path, "-") == 0) {
		ev->fd = 2;
	} else {
		ev->fd =
		    open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		if (ev->fd < 0) {
			int err = errno;

			snprintf(errmsg, errlen,
				 "cannot open the event log '%s': %s", path,
				 strerror(err));
			free(ev);
			return -err;
		}
		ev->own_fd = 1;
	}
	snprintf(ev->host, sizeof(ev->host), "%s", host);
	ev->round = ev->generation = -1;
	*out = ev;
	return 0;
}

void events_context(struct events *ev, const char *run_id, int round,
		    int generation)
{
	if (ev == NULL)
		return;
	snprintf(ev->run_id, sizeof(ev->run_id), "%s", run_id ? run_id : "");
	ev->round = round;
	ev->generation = generation;
}

void events_emit(struct events *ev, const char *name, json_t *fields)
{
	struct timespec ts;
	json_t *o;
	char *line;
	size_t len;

	if (ev == NULL) {
		json_decref(fields);
		return;
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	o = json_is_object(fields) ? fields : json_object();
	if (fields && !json_is_object(fields))
		json_decref(fields);
	json_object_set_new(o, "name", json_string(name));
	json_object_set_new(
	    o, "timestamp",
	    json_real((double)ts.tv_sec + (double)ts.tv_nsec / 1e9));
	json_object_set_new(o, "host", json_string(ev->host));
	json_object_set_new(o, "run_id", json_string(ev->run_id));
	json_object_set_new(
	    o, "round", ev->round >= 0 ? json_integer(ev->round) : json_null());
	json_object_set_new(o, "generation",
			    ev->generation >= 0 ? json_integer(ev->generation)
						: json_null());
	if (ev->lost)
		json_object_set_new(o, "lost",
				    json_integer((json_int_t)ev->lost));
	line = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII);
	json_decref(o);
	if (line == NULL) {
		ev->lost++;
		return;
	}
	len = strlen(line);
	line[len] = '\n'; /* replaces the NUL: one write, one line */
	if (write(ev->fd, line, len + 1) == (ssize_t)(len + 1))
		ev->lost = 0;
	else
		ev->lost++;
	free(line);
}

void events_emitf(struct events *ev, const char *name, const char *fmt, ...)
{
	va_list ap;

	if (ev == NULL)
		return;
	va_start(ap, fmt);
	events_emit(ev, name, json_vpack_ex(NULL, 0, fmt, ap));
	va_end(ap);
}

void events_close(struct events *ev)
{
	if (ev == NULL)
		return;
	if (ev->own_fd)
		close(ev->fd);
	free(ev);
}

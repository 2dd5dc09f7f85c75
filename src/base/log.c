/*
 * One log sink for the whole process (log.h). Lines are formatted here, once,
 * into a bounded buffer, and handed whole to the sink, so that a sink that
 * writes to a non-blocking console never sees half a line.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "crun/log.h"

static log_sink_cb sink;
static void *sink_data;

void log_set_sink(log_sink_cb cb, void *data)
{
	sink = cb;
	sink_data = data;
}

/* The default sink: the whole line to fd 2, retried on EINTR only. */
static void log_to_stderr(const char *line, size_t len)
{
	while (len > 0) {
		ssize_t n = write(2, line, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return; /* stderr gone: nothing else to tell */
		line += n;
		len -= (size_t)n;
	}
}

void log_vmsg(enum log_level level, const char *prefix, const char *fmt,
	      va_list ap)
{
	char line[LOG_LINE_MAX], msg[LOG_LINE_MAX];
	size_t head, len;
	int n;

	n = snprintf(line, sizeof(line), "%s: ", prefix);
	if (n < 0 || (size_t)n >= sizeof(line) - 1)
		return;
	head = (size_t)n;
	n = vsnprintf(line + head, sizeof(line) - head, fmt, ap);
	if (n < 0)
		return;
	len = head + (size_t)n;
	if (len > sizeof(line) - 2)
		len = sizeof(line) - 2;
	line[len++] = '\n';
	line[len] = '\0';
	if (sink == NULL) {
		log_to_stderr(line, len);
		return;
	}
	memcpy(msg, line + head, len - 1 - head);
	msg[len - 1 - head] = '\0';
	sink(sink_data, level, line, len, msg);
}

void log_msg(enum log_level level, const char *prefix, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vmsg(level, prefix, fmt, ap);
	va_end(ap);
}

void log_say(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vmsg(LOG_INFO, "crun", fmt, ap);
	va_end(ap);
}

void log_warn(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vmsg(LOG_WARN, "crun: warning", fmt, ap);
	va_end(ap);
}

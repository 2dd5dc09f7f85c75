/*
 * crun's one way to say a line. Every module of libcrun, the store server
 * and the agent write their "crun: ..." lines through here; the program
 * installs the sink they go to (the agent's non-blocking console, log.c's
 * default is stderr). A line is "<prefix>: <message>\n"; the level is for
 * the sink (a sink may count, filter or colour by it), never written.
 *
 * Not thread-safe: call from the loop thread (the only writer of a crun
 * process's console), or before the loop runs.
 */
#ifndef CRUN_LOG_H
#define CRUN_LOG_H

#include <stdarg.h>
#include <stddef.h>

enum log_level {
	LOG_ERROR,
	LOG_WARN,
	LOG_INFO,
	LOG_DEBUG,
};

/** The longest line said (longer messages are cut, the newline kept). */
#define LOG_LINE_MAX 1024

/**
 * A sink gets each whole line, "<prefix>: <message>\n" (len counts the
 * newline), and msg, the message alone (NUL-terminated, no newline).
 */
typedef void (*log_sink_cb)(void *data, enum log_level level, const char *line,
			    size_t len, const char *msg);

/** Send every line to cb(data, ...) from now on; cb NULL: back to stderr. */
void log_set_sink(log_sink_cb cb, void *data);

/** Say one line with prefix ("crun", "crun store"). */
void log_msg(enum log_level level, const char *prefix, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void log_vmsg(enum log_level level, const char *prefix, const char *fmt,
	      va_list ap) __attribute__((format(printf, 3, 0)));

/** "crun: <message>" at LOG_INFO, the common case. */
void log_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/** "crun: warning: <message>" at LOG_WARN. */
void log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif

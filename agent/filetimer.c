/*
 * torchelastic's FileTimer server (see filetimer.h).
 *
 * Happy path: the FIFO is opened for reading and, so that the last client
 * closing it is not an end of file, for writing too; requests arrive as
 * whole lines (a client writes at most PIPE_BUF bytes at once, so lines of
 * different workers never mix), are parsed with jansson and kept in a small
 * table keyed by (pid, scope); one uv timer is armed for the earliest
 * expiration (at most FT_MAX_WAIT_MS ahead: expirations are doubles, and
 * one far away is looked at again then). When it fires, every expired timer's
 * process gets its signal (the first expired timer with a signal > 0, as torch
 * does) and that pid's timers are dropped.
 *
 * Failure modes: a line that is not such a request (bad JSON, missing or
 * mistyped fields, a line longer than PIPE_BUF) is ignored with one notice;
 * more than MAX_TIMERS live timers: the request is refused with a notice; a
 * pid that is not one of this agent's workers (or their process groups) is
 * never signalled.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "crun/cfg.h"
#include "crun/linebuf.h"
#include "crun/log.h"
#include "filetimer.h"

#define MAX_TIMERS CRUN_FILETIMER_MAX_TIMERS
#define SCOPE_MAX (CRUN_FILETIMER_MAX_SCOPE + 1)
/* The longest the timer is armed for: a later expiration (up to 1e308 s
 * away, which no integer holds) is looked at again after this. */
#define FT_MAX_WAIT_MS (CRUN_FILETIMER_MAX_ARM * 1000.0)

struct ftimer {
	pid_t pid;
	char scope[SCOPE_MAX];
	double expires; /* epoch seconds */
	int signal;
};

struct filetimer {
	uv_loop_t *loop;
	uv_pipe_t pipe;
	uv_timer_t timer;
	int wfd; /* our own writer: no EOF when clients close */
	int nhandles;
	char path[PATH_MAX];
	struct crun_linebuf lb;
	filetimer_owns_cb owns;
	filetimer_kill_cb kill; /* NULL: kill(2) */
	void *data;
	struct ftimer *t;
	int n;
	int notices; /* bad requests reported (the rest are counted) */
};

static char readbuf[PIPE_BUF * 4];

static void note(struct filetimer *ft, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* One line through the log; bad requests are rate-limited to the first few. */
static void note(struct filetimer *ft, const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	(void)ft;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	log_msg(LOG_INFO, "crun", "watchdog: %s", buf);
}

static double now_epoch(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void drop_pid(struct filetimer *ft, pid_t pid)
{
	for (int i = 0; i < ft->n;)
		if (ft->t[i].pid == pid)
			ft->t[i] = ft->t[--ft->n];
		else
			i++;
}

static void filetimer_on_timer(uv_timer_t *h);

/* Arm the timer for the earliest expiration, or stop it. */
static void rearm(struct filetimer *ft)
{
	double first = 0, wait;

	for (int i = 0; i < ft->n; i++)
		if (i == 0 || ft->t[i].expires < first)
			first = ft->t[i].expires;
	if (ft->n == 0) {
		uv_timer_stop(&ft->timer);
		return;
	}
	wait = (first - now_epoch()) * 1000;
	if (wait > FT_MAX_WAIT_MS)
		wait = FT_MAX_WAIT_MS;
	uv_timer_start(&ft->timer, filetimer_on_timer,
		       wait <= 0 ? 0 : (uint64_t)wait + 1, 0);
}

static void filetimer_on_timer(uv_timer_t *h)
{
	struct filetimer *ft = h->data;
	double now = now_epoch();

	for (int i = 0; i < ft->n;) {
		struct ftimer *x = &ft->t[i], first;
		int rank = -1;

		if (x->expires > now) {
			i++;
			continue;
		}
		/* The first expired timer of this pid with a signal. */
		first = *x;
		for (int k = 0; k < ft->n; k++) {
			struct ftimer *y = &ft->t[k];

			if (y->pid == first.pid && y->expires <= now &&
			    y->signal > 0 &&
			    (first.signal <= 0 || y->expires < first.expires))
				first = *y;
		}
		if (first.signal <= 0) {
			note(ft,
			     "timer '%s' of pid %d expired; no signal set, "
			     "so the worker is left running",
			     first.scope, (int)first.pid);
		} else if (ft->owns(ft->data, first.pid, &rank)) {
			note(ft,
			     "timer '%s' of rank %d (pid %d) expired: sending "
			     "%s",
			     first.scope, rank, (int)first.pid,
			     cfg_signame(first.signal));
			if (first.signal == SIGKILL && ft->kill)
				ft->kill(ft->data, first.pid, rank);
			else
				kill(first.pid, first.signal);
		}
		drop_pid(ft, first.pid);
		i = 0; /* the table changed under us */
	}
	rearm(ft);
}

/* One request line from a client. */
static void on_request(void *ctx, const char *line, size_t len)
{
	struct filetimer *ft = ctx;
	json_t *j = json_loadb(line, len, 0, NULL);
	json_t *pid = json_object_get(j, "pid");
	json_t *scope = json_object_get(j, "scope_id");
	json_t *exp = json_object_get(j, "expiration_time");
	json_t *sig = json_object_get(j, "signal");
	struct ftimer x;
	int rank, i;

	if (!json_is_integer(pid) || !json_is_string(scope) ||
	    !json_is_number(exp) || !json_is_integer(sig) ||
	    json_integer_value(pid) <= 0 || json_integer_value(pid) > INT_MAX ||
	    json_integer_value(sig) < -64 || json_integer_value(sig) > 64 ||
	    strlen(json_string_value(scope)) >= SCOPE_MAX) {
		if (ft->notices++ < 5)
			note(ft,
			     "ignoring a request that is not a FileTimer "
			     "request ('%.60s')",
			     line);
		json_decref(j);
		return;
	}
	memset(&x, 0, sizeof(x));
	x.pid = (pid_t)json_integer_value(pid);
	snprintf(x.scope, sizeof(x.scope), "%s", json_string_value(scope));
	x.expires = json_number_value(exp);
	x.signal = (int)json_integer_value(sig);
	json_decref(j);
	for (i = 0; i < ft->n; i++)
		if (ft->t[i].pid == x.pid &&
		    strcmp(ft->t[i].scope, x.scope) == 0)
			break;
	if (x.expires < 0) { /* release */
		if (i < ft->n)
			ft->t[i] = ft->t[--ft->n];
		rearm(ft);
		return;
	}
	if (!ft->owns(ft->data, x.pid, &rank)) {
		if (ft->notices++ < 5)
			note(ft,
			     "refusing a timer for pid %d: not a worker of "
			     "this agent",
			     (int)x.pid);
		return;
	}
	if (i == ft->n && ft->n == MAX_TIMERS) {
		if (ft->notices++ < 5)
			note(ft,
			     "refusing timer '%s' of pid %d: %d timers are "
			     "set already",
			     x.scope, (int)x.pid, MAX_TIMERS);
		return;
	}
	if (i == ft->n)
		ft->n++;
	ft->t[i] = x;
	rearm(ft);
}

static void filetimer_on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
	(void)h;
	(void)hint;
	buf->base = readbuf;
	buf->len = sizeof(readbuf);
}

static void filetimer_on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
	struct filetimer *ft = s->data;

	if (n > 0)
		linebuf_feed(&ft->lb, buf->base, (size_t)n, on_request, ft);
	/* No EOF can come while we hold a writer; errors stop reading. */
	else if (n < 0)
		uv_read_stop(s);
}

int filetimer_new(uv_loop_t *loop, const char *path, filetimer_owns_cb owns,
		  void *data, struct filetimer **out, char *errmsg,
		  size_t errlen)
{
	struct filetimer *ft = calloc(1, sizeof(*ft));
	int rfd = -1, rc;

	*out = NULL;
	if (ft == NULL)
		return UV_ENOMEM;
	ft->loop = loop;
	ft->owns = owns;
	ft->data = data;
	ft->wfd = -1;
	ft->t = calloc(MAX_TIMERS, sizeof(*ft->t));
	if (ft->t == NULL || linebuf_init(&ft->lb, "", PIPE_BUF)) {
		rc = UV_ENOMEM;
		goto fail;
	}
	if (path && *path) {
		snprintf(ft->path, sizeof(ft->path), "%s", path);
	} else {
		const char *tmp = getenv("TMPDIR");
		unsigned char r[8] = {0};
		int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);

		if (fd >= 0) {
			if (read(fd, r, sizeof(r)) < 0)
				r[0] = (unsigned char)getpid();
			close(fd);
		}
		snprintf(ft->path, sizeof(ft->path),
			 "%s/watchdog_timer_%02x%02x%02x%02x%02x%02x%02x%02x",
			 tmp && *tmp ? tmp : "/tmp", r[0], r[1], r[2], r[3],
			 r[4], r[5], r[6], r[7]);
	}
#ifdef _WIN32
	/* (torch's FileTimer server is as Linux's as its FIFO) */
	rc = UV_ENOSYS;
	snprintf(errmsg, errlen,
		 "the watchdog (TORCHELASTIC_TIMER_FILE) needs a FIFO: not "
		 "on Windows");
	goto fail;
#endif
	/* As torch's server: a file already there is replaced. */
	unlink(ft->path);
	if (mkfifo(ft->path, 0600)) {
		rc = -errno;
		snprintf(errmsg, errlen,
			 "cannot create the watchdog FIFO '%s': %s", ft->path,
			 strerror(errno));
		goto fail;
	}
	rfd = open(ft->path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	ft->wfd =
	    rfd < 0 ? -1 : open(ft->path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
	if (rfd < 0 || ft->wfd < 0) {
		rc = -errno;
		snprintf(errmsg, errlen,
			 "cannot open the watchdog FIFO '%s': %s", ft->path,
			 strerror(errno));
		goto fail;
	}
	uv_timer_init(loop, &ft->timer);
	ft->timer.data = ft;
	uv_pipe_init(loop, &ft->pipe, 0);
	ft->pipe.data = ft;
	ft->nhandles = 2;
	rc = uv_pipe_open(&ft->pipe, rfd);
	if (rc) {
		snprintf(errmsg, errlen, "cannot watch the watchdog FIFO: %s",
			 uv_strerror(rc));
		close(rfd);
		filetimer_close(ft); /* frees ft once both handles close */
		return rc;
	}
	uv_read_start((uv_stream_t *)&ft->pipe, filetimer_on_alloc,
		      filetimer_on_read);
	*out = ft;
	return 0;
fail:
	if (rfd >= 0)
		close(rfd);
	if (ft->wfd >= 0)
		close(ft->wfd);
	if (*ft->path)
		unlink(ft->path);
	if (ft->lb.buf)
		linebuf_release(&ft->lb);
	free(ft->t);
	free(ft);
	return rc;
}

void filetimer_set_kill(struct filetimer *ft, filetimer_kill_cb kill_cb)
{
	ft->kill = kill_cb;
}

const char *filetimer_path(const struct filetimer *ft)
{
	return ft->path;
}

void filetimer_clear(struct filetimer *ft)
{
	ft->n = 0;
	uv_timer_stop(&ft->timer);
}

static void filetimer_on_close(uv_handle_t *h)
{
	struct filetimer *ft = h->data;

	if (--ft->nhandles > 0)
		return;
	linebuf_release(&ft->lb);
	free(ft->t);
	free(ft);
}

void filetimer_close(struct filetimer *ft)
{
	if (ft == NULL)
		return;
	unlink(ft->path);
	if (ft->wfd >= 0)
		close(ft->wfd);
	ft->wfd = -1;
	uv_close((uv_handle_t *)&ft->timer, filetimer_on_close);
	uv_close((uv_handle_t *)&ft->pipe, filetimer_on_close);
}

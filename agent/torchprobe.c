/*
 * The torch probe (see torchprobe.h).
 *
 * Happy path: the interpreter starts, imports torch (1 to 3 s), prints two
 * short lines and exits; once both its exit and the pipe's end are seen,
 * the output is parsed and the callback runs.
 *
 * Failure modes: an interpreter that cannot be started, exits non-zero or
 * prints nothing understood gives TORCHSTORE_UNKNOWN with why; one that
 * does not end within the timeout is killed (SIGKILL) and answers UNKNOWN
 * at once, its exit still awaited before the memory goes; output past
 * TORCHSTORE_MAX_OUTPUT is read and dropped. Its stderr goes nowhere.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crun/err.h"
#include "torchprobe.h"

struct torchprobe {
	uv_process_t proc;
	uv_pipe_t out;
	uv_timer_t timer;
	int handles; /* open handles; freed at 0 once closing */
	int closing;
	int exited, eof, reported;
	long long status;
	int signal;
	double timeout_s;
	torchprobe_cb cb;
	void *data;
	size_t len;
	char buf[TORCHSTORE_MAX_OUTPUT];
};

static void torchprobe_on_close(uv_handle_t *h)
{
	struct torchprobe *p = h->data;

	if (--p->handles == 0 && p->closing)
		free(p);
}

static void close_one(struct torchprobe *p, uv_handle_t *h)
{
	if (!uv_is_closing(h))
		uv_close(h, torchprobe_on_close);
}

/* Everything is done or abandoned: close what is still open. */
static void torchprobe_end(struct torchprobe *p)
{
	p->closing = 1;
	uv_timer_stop(&p->timer);
	close_one(p, (uv_handle_t *)&p->timer);
	close_one(p, (uv_handle_t *)&p->out);
	/* The process handle closes at its exit (torchprobe_on_exit). */
	if (p->exited)
		close_one(p, (uv_handle_t *)&p->proc);
	else
		uv_process_kill(&p->proc, SIGKILL);
}

static void report(struct torchprobe *p, const struct torchstore *ts)
{
	if (p->reported || p->closing)
		return;
	p->reported = 1;
	p->cb(ts, p->data);
}

/* Both the exit and the pipe's end are in: answer. */
static void maybe_done(struct torchprobe *p)
{
	struct torchstore ts;

	if (!p->exited || !p->eof || p->reported)
		return;
	torchstore_parse(p->buf, p->len, &ts);
	if (ts.kind == TORCHSTORE_UNKNOWN && (p->status || p->signal))
		snprintf(ts.why, sizeof(ts.why), "it exited with %s %d",
			 p->signal ? "signal" : "status",
			 p->signal ? p->signal : (int)p->status);
	report(p, &ts);
	torchprobe_end(p);
}

static void torchprobe_on_exit(uv_process_t *h, int64_t status, int sig)
{
	struct torchprobe *p = h->data;

	p->exited = 1;
	p->status = status;
	p->signal = sig;
	close_one(p, (uv_handle_t *)h);
	if (p->closing)
		return;
	maybe_done(p);
}

static void torchprobe_on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *b)
{
	struct torchprobe *p = h->data;
	static char sink[512];

	(void)hint;
	/* Past the cap the rest is read and dropped, so the child can end. */
	if (p->len < sizeof(p->buf))
		*b = uv_buf_init(p->buf + p->len,
				 (unsigned)(sizeof(p->buf) - p->len));
	else
		*b = uv_buf_init(sink, sizeof(sink));
}

static void torchprobe_on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
	struct torchprobe *p = s->data;

	if (n > 0 && b->base == p->buf + p->len)
		p->len += (size_t)n;
	if (n >= 0)
		return;
	p->eof = 1;
	uv_read_stop(s);
	maybe_done(p);
}

static void torchprobe_on_timeout(uv_timer_t *t)
{
	struct torchprobe *p = t->data;
	struct torchstore ts;

	memset(&ts, 0, sizeof(ts));
	snprintf(ts.why, sizeof(ts.why), "it did not answer within %g s",
		 p->timeout_s);
	report(p, &ts);
	torchprobe_end(p);
}

int torchprobe_start(uv_loop_t *loop, const char *python, double timeout_s,
		     torchprobe_cb cb, void *data, struct torchprobe **out)
{
	struct torchprobe *p = calloc(1, sizeof(*p));
	char *argv[] = {(char *)python, (char *)"-c", (char *)TORCHSTORE_PROBE,
			NULL};
	uv_process_options_t po;
	uv_stdio_container_t io[3];
	int rc;

	*out = NULL;
	if (p == NULL)
		return UV_ENOMEM;
	p->cb = cb;
	p->data = data;
	p->timeout_s = timeout_s;
	uv_timer_init(loop, &p->timer);
	uv_pipe_init(loop, &p->out, 0);
	p->timer.data = p->out.data = p->proc.data = p;
	p->handles = 2;
	memset(&po, 0, sizeof(po));
	io[0].flags = UV_IGNORE;
	io[1].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
	io[1].data.stream = (uv_stream_t *)&p->out;
	io[2].flags = UV_IGNORE;
	po.file = python;
	po.args = argv;
	po.stdio = io;
	po.stdio_count = 3;
	po.exit_cb = torchprobe_on_exit;
	rc = uv_spawn(loop, &p->proc, &po);
	p->handles++; /* closed even after a failed spawn */
	if (rc == 0)
		rc = uv_read_start((uv_stream_t *)&p->out, torchprobe_on_alloc,
				   torchprobe_on_read);
	if (rc == 0)
		rc = uv_timer_start(&p->timer, torchprobe_on_timeout,
				    (uint64_t)(timeout_s * 1000), 0);
	if (rc) {
		p->exited = !uv_is_active((uv_handle_t *)&p->proc);
		torchprobe_end(p);
		return rc;
	}
	*out = p;
	return 0;
}

void torchprobe_close(struct torchprobe *p)
{
	if (p && !p->closing)
		torchprobe_end(p);
}

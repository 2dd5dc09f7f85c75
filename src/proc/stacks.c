/*
 * Workers' stacks (stacks.h), taken all at once on the loop.
 *
 * Happy path: for each process, py-spy is looked up (crun's PATH, then the
 * directory of the process's argv[0] and of its executable: a venv's bin)
 * and run as `py-spy dump --pid P`, its output (stdout and stderr on one
 * pipe) read into a bounded buffer; when every dump has exited and its pipe
 * closed, cb runs. Without py-spy, before a kill, a Python process whose
 * environment enables faulthandler gets SIGABRT (its core dump limit set to
 * 0 first): it writes every thread's traceback to its stderr and dies, and
 * its owner hands that stderr over (stacks_exited). A non-Python process,
 * one in uninterruptible sleep (no signal or ptrace reaches it) or one
 * stopped (SIGSTOP or a tracer: it could not dump before it is continued)
 * gets its state, wait channel and kernel stack from /proc at once.
 *
 * Failure modes: py-spy exits non-zero (its message is the text; before a
 * kill the process then falls back to faulthandler or /proc); py-spy or
 * faulthandler does not finish within timeout_s (abandoned: py-spy is
 * killed, one line names the pids, the text says so); a dump longer than
 * STACKS_MAX_TEXT is cut; the process is gone already (the text says so);
 * /proc holds garbage (every read is bounded and unprintable bytes are
 * replaced). stacks_free before cb kills what runs and frees once every
 * handle is closed.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crun/log.h"
#include "crun/stacks.h"

#define STACKS_PROC_READ 4096 /* /proc/PID/stack, stat, wchan: enough */
#define STACKS_ENVIRON_MAX (1 << 20)

enum one_state { ONE_PENDING, ONE_SPY, ONE_FAULT, ONE_DONE };

struct stacks_one {
	struct stacks *s;
	pid_t pid;
	int python;
	enum one_state st;
	int taken;	    /* text is a stack, not a why */
	const char *source; /* how it was taken */
	int faulted;	    /* it was sent faulthandler's SIGABRT */
	char *text;
	size_t len;
	char *buf; /* py-spy's output so far */
	size_t blen;
	int cut;
	uv_process_t proc;
	uv_pipe_t out;
	int proc_open, pipe_open, spy_exited;
	int64_t spy_status;
	int spy_signal;
};

struct stacks {
	uv_loop_t *loop;
	enum stacks_mode mode;
	double timeout_s;
	size_t n, pending;
	struct stacks_one *one;
	uv_timer_t timer;
	int handles; /* open handles: the timer, each py-spy and its pipe */
	int called, freed, in_cb;
	stacks_done_cb cb;
	void *data;
};

static char proc_root[PATH_MAX] = "/proc";

void stacks_set_proc_root(const char *root)
{
	snprintf(proc_root, sizeof(proc_root), "%s", root ? root : "/proc");
}

/* Read at most max bytes of <root>/<pid>/<name> into a new buffer. */
static char *read_proc(pid_t pid, const char *name, size_t max, size_t *len)
{
	char path[PATH_MAX + 64], *buf;
	size_t n = 0;
	int fd;

	snprintf(path, sizeof(path), "%s/%d/%s", proc_root, (int)pid, name);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return NULL;
	buf = malloc(max + 1);
	while (buf && n < max) {
		ssize_t k = read(fd, buf + n, max - n);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		n += (size_t)k;
	}
	close(fd);
	if (buf) {
		buf[n] = '\0';
		*len = n;
	}
	return buf;
}

/* Copy at most len - 1 printable bytes of src (n bytes) into out. */
static void printable(char *out, size_t len, const char *src, size_t n)
{
	size_t k = 0;

	for (size_t i = 0; i < n && k + 1 < len; i++) {
		unsigned char c = (unsigned char)src[i];

		out[k++] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
	}
	out[k] = '\0';
}

int stacks_proc_state(pid_t pid, struct stacks_pstate *st)
{
	char *stat, *wchan, *open_paren, *close_paren;
	size_t n = 0;

	memset(st, 0, sizeof(*st));
	st->state = '?';
	stat = read_proc(pid, "stat", STACKS_PROC_READ, &n);
	if (stat == NULL)
		return UV_ESRCH;
	/*
	 * "pid (comm) S ...": comm may hold spaces and parentheses. The
	 * state is one letter of either case: a tracing stop is 't'.
	 */
	open_paren = memchr(stat, '(', n);
	close_paren = strrchr(stat, ')');
	if (open_paren == NULL || close_paren == NULL ||
	    close_paren < open_paren || close_paren[1] != ' ' ||
	    !((close_paren[2] >= 'A' && close_paren[2] <= 'Z') ||
	      (close_paren[2] >= 'a' && close_paren[2] <= 'z'))) {
		free(stat);
		return UV_ESRCH;
	}
	st->state = close_paren[2];
	printable(st->comm, sizeof(st->comm), open_paren + 1,
		  (size_t)(close_paren - open_paren - 1));
	free(stat);
	wchan = read_proc(pid, "wchan", sizeof(st->wchan) - 1, &n);
	if (wchan) {
		/* "0" means none (a running process). */
		if (!(n == 1 && wchan[0] == '0'))
			printable(st->wchan, sizeof(st->wchan), wchan,
				  strcspn(wchan, "\n"));
		free(wchan);
	}
	return 0;
}

static const char *state_name(char c)
{
	switch (c) {
	case 'R':
		return "running";
	case 'S':
		return "sleeping";
	case 'D':
		return "in uninterruptible sleep";
	case 'T':
		return "stopped";
	case 't':
		return "stopped by a tracer";
	case 'Z':
		return "a zombie";
	default:
		return "in an unknown state";
	}
}

char stacks_describe_unkillable(int rank, pid_t pid, char *out, size_t len)
{
	struct stacks_pstate st;

	if (stacks_proc_state(pid, &st)) {
		snprintf(out, len, "rank %d (pid %d) is gone", rank, (int)pid);
		return '?';
	}
	if (st.state == 'D')
		snprintf(out, len,
			 "rank %d (pid %d) is in uninterruptible sleep in "
			 "`%s`, it cannot be killed",
			 rank, (int)pid, st.wchan[0] ? st.wchan : "?");
	else
		snprintf(out, len,
			 "rank %d (pid %d) survives SIGKILL: it is %s (state "
			 "%c)%s%s%s",
			 rank, (int)pid, state_name(st.state), st.state,
			 st.wchan[0] ? " in `" : "", st.wchan,
			 st.wchan[0] ? "`" : "");
	return st.state;
}

/* The kernel's view of where o waits: state, wait channel, stack. */
static void one_from_proc(struct stacks_one *o)
{
	struct stacks_pstate st;
	char *kstack, *text;
	size_t n = 0, cap;
	int k;

	free(o->text);
	if (stacks_proc_state(o->pid, &st)) {
		o->text = NULL;
		if (asprintf(&o->text, "pid %d is gone", (int)o->pid) < 0)
			o->text = NULL;
		o->taken = 0;
		goto out;
	}
	kstack = read_proc(o->pid, "stack", STACKS_PROC_READ, &n);
	cap = 256 + 2 * n;
	text = malloc(cap);
	if (text == NULL) {
		free(kstack);
		o->text = NULL;
		goto out;
	}
	k = snprintf(text, cap, "pid %d (%s) is %s (state %c), wchan `%s`\n",
		     (int)o->pid, st.comm, state_name(st.state), st.state,
		     st.wchan[0] ? st.wchan : "-");
	/* The kernel stack, line by line, made printable. */
	for (size_t i = 0; kstack && i < n;) {
		size_t l = strcspn(kstack + i, "\n");

		if (l > 0 && (size_t)k + l + 4 < cap) {
			text[k++] = ' ';
			text[k++] = ' ';
			printable(text + k, l + 1, kstack + i, l);
			k += (int)strlen(text + k);
			text[k++] = '\n';
			text[k] = '\0';
		}
		i += l + 1;
	}
	free(kstack);
	o->text = text;
	o->taken = 1;
	o->source = "/proc";
out:
	if (o->text == NULL)
		o->text = strdup("");
	o->len = o->text ? strlen(o->text) : 0;
}

static void one_why(struct stacks_one *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The text is a one-line why, not a stack. */
static void one_why(struct stacks_one *o, const char *fmt, ...)
{
	va_list ap;

	free(o->text);
	va_start(ap, fmt);
	if (vasprintf(&o->text, fmt, ap) < 0)
		o->text = strdup("");
	va_end(ap);
	o->len = o->text ? strlen(o->text) : 0;
	o->taken = 0;
}

static void stacks_maybe_free(struct stacks *s)
{
	if (!s->freed || s->handles > 0 || s->in_cb)
		return;
	for (size_t i = 0; i < s->n; i++) {
		free(s->one[i].text);
		free(s->one[i].buf);
	}
	free(s->one);
	free(s);
}

static void stacks_on_handle_close(uv_handle_t *h)
{
	struct stacks *s = h->data;

	s->handles--;
	stacks_maybe_free(s);
}

static void stacks_on_one_close(uv_handle_t *h)
{
	struct stacks_one *o = h->data;

	o->s->handles--;
	stacks_maybe_free(o->s);
}

/* Every process is answered: cb, once. */
static void stacks_finish(struct stacks *s)
{
	if (s->called || s->freed)
		return;
	s->called = 1;
	uv_timer_stop(&s->timer);
	s->in_cb = 1;
	s->cb(s, s->data);
	s->in_cb = 0;
	stacks_maybe_free(s);
}

static void one_done(struct stacks_one *o)
{
	if (o->st == ONE_DONE)
		return;
	o->st = ONE_DONE;
	if (--o->s->pending == 0)
		stacks_finish(o->s);
}

/* Does pid's environment (or command line) switch faulthandler on? */
static int faulthandler_on(pid_t pid)
{
	size_t n = 0, i;
	char *env = read_proc(pid, "environ", STACKS_ENVIRON_MAX, &n);
	int on = 0;

	for (i = 0; env && i < n; i += strlen(env + i) + 1)
		if (strncmp(env + i, "PYTHONFAULTHANDLER=", 19) == 0 &&
		    env[i + 19] != '\0')
			on = 1;
	free(env);
	env = read_proc(pid, "cmdline", STACKS_PROC_READ, &n);
	for (i = 0; env && i < n; i += strlen(env + i) + 1)
		if (strcmp(env + i, "-Xfaulthandler") == 0 ||
		    (strcmp(env + i, "-X") == 0 && i + 3 < n &&
		     strcmp(env + i + 3, "faulthandler") == 0))
			on = 1;
	free(env);
	return on;
}

/* Before a kill, without (working) py-spy: faulthandler, else /proc. */
static void one_fallback(struct stacks_one *o)
{
	struct stacks_pstate st;
	struct rlimit nocore = {0, 0};

	if (o->s->mode == STACKS_LIVE) {
		if (o->python) {
			if (o->text == NULL)
				one_why(o,
					"pid %d: no live Python stack without "
					"py-spy (not found on PATH or beside "
					"the interpreter)",
					(int)o->pid);
		} else {
			one_from_proc(o);
		}
		one_done(o);
		return;
	}
	if (o->python && stacks_proc_state(o->pid, &st) == 0 &&
	    st.state != 'D' && st.state != 'Z' && st.state != 'T' &&
	    st.state != 't' && faulthandler_on(o->pid)) {
		/* A core of every rank would fill the disk: none. */
		prlimit(o->pid, RLIMIT_CORE, &nocore, NULL);
		if (kill(o->pid, SIGABRT) == 0) {
			o->st = ONE_FAULT;
			o->faulted = 1;
			return;
		}
	}
	one_from_proc(o);
	one_done(o);
}

static void stacks_on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
	static char readbuf[16 * 1024];

	(void)h;
	(void)hint;
	buf->base = readbuf;
	buf->len = sizeof(readbuf);
}

/* py-spy has exited and its pipe is closed: its output is the answer. */
static void one_spy_end(struct stacks_one *o)
{
	if (o->s->freed || o->s->called || o->st != ONE_SPY || !o->spy_exited ||
	    o->pipe_open)
		return;
	if (o->spy_status == 0 && o->spy_signal == 0 && o->blen > 0) {
		free(o->text);
		o->text = o->buf;
		o->len = o->blen;
		o->buf = NULL;
		o->blen = 0;
		o->taken = 1;
		o->source = "py-spy";
		if (o->cut) {
			static const char cut[] = "... (cut)\n";

			memcpy(o->text + o->len, cut, sizeof(cut));
			o->len += sizeof(cut) - 1;
		}
		one_done(o);
		return;
	}
	/* py-spy's own message, first line, as the why. */
	if (o->buf) {
		char line[256];

		printable(line, sizeof(line), o->buf, strcspn(o->buf, "\n"));
		one_why(o, "pid %d: py-spy failed: %s", (int)o->pid, line);
	} else {
		one_why(o, "pid %d: py-spy failed", (int)o->pid);
	}
	o->st = ONE_PENDING;
	one_fallback(o);
}

static void stacks_on_spy_read(uv_stream_t *h, ssize_t nread,
			       const uv_buf_t *buf)
{
	struct stacks_one *o = h->data;

	if (nread > 0) {
		size_t k = (size_t)nread;

		if (o->buf == NULL)
			o->buf = malloc(STACKS_MAX_TEXT + 16);
		if (o->buf == NULL)
			return;
		if (o->blen + k > STACKS_MAX_TEXT) {
			k = STACKS_MAX_TEXT - o->blen;
			o->cut = 1;
		}
		memcpy(o->buf + o->blen, buf->base, k);
		o->blen += k;
		o->buf[o->blen] = '\0';
		return;
	}
	if (nread < 0) {
		o->pipe_open = 0;
		uv_close((uv_handle_t *)&o->out, stacks_on_one_close);
		one_spy_end(o);
	}
}

static void stacks_on_spy_exit(uv_process_t *p, int64_t status, int sig)
{
	struct stacks_one *o = p->data;

	o->spy_exited = 1;
	o->spy_status = status;
	o->spy_signal = sig;
	o->proc_open = 0;
	uv_close((uv_handle_t *)p, stacks_on_one_close);
	one_spy_end(o);
}

static int is_exec(const char *path)
{
	struct stat st;

	return access(path, X_OK) == 0 && stat(path, &st) == 0 &&
	       S_ISREG(st.st_mode);
}

/* py-spy in dir (the directory part of path when file is set). */
static int spy_in(const char *path, size_t dlen, char *out, size_t len)
{
	if (dlen == 0 || dlen + 8 >= len)
		return 0;
	snprintf(out, len, "%.*s/py-spy", (int)dlen, path);
	return is_exec(out);
}

/*
 * Find py-spy for pid: on crun's PATH, else beside the interpreter (the
 * directory of its argv[0] as it was started, then of its executable).
 */
static int spy_find(pid_t pid, char *out, size_t len)
{
	const char *path = getenv("PATH");
	char link[PATH_MAX + 64], exe[PATH_MAX];
	char *argv0, *slash;
	size_t n = 0;
	ssize_t k;

	while (path && *path) {
		size_t l = strcspn(path, ":");

		if (spy_in(path, l, out, len))
			return 1;
		path += l + (path[l] == ':');
	}
	argv0 = read_proc(pid, "cmdline", PATH_MAX, &n);
	if (argv0 && argv0[0] == '/' && (slash = strrchr(argv0, '/')) &&
	    spy_in(argv0, (size_t)(slash - argv0), out, len)) {
		free(argv0);
		return 1;
	}
	free(argv0);
	snprintf(link, sizeof(link), "%s/%d/exe", proc_root, (int)pid);
	k = readlink(link, exe, sizeof(exe) - 1);
	if (k > 0) {
		exe[k] = '\0';
		if ((slash = strrchr(exe, '/')) &&
		    spy_in(exe, (size_t)(slash - exe), out, len))
			return 1;
	}
	return 0;
}

/* Start `py-spy dump --pid P` for o; 0, or an error (nothing started). */
static int one_spy_start(struct stacks_one *o, const char *spy)
{
	struct stacks *s = o->s;
	uv_process_options_t po;
	uv_stdio_container_t io[3];
	uv_file fds[2] = {-1, -1};
	char pid[16],
	    *argv[] = {(char *)spy, (char *)"dump", (char *)"--pid", pid, NULL};
	int rc;

	snprintf(pid, sizeof(pid), "%d", (int)o->pid);
	if ((rc = uv_pipe(fds, 0, 0)))
		return rc;
	if ((rc = uv_pipe_init(s->loop, &o->out, 0))) {
		close(fds[0]);
		close(fds[1]);
		return rc;
	}
	o->out.data = o;
	o->pipe_open = 1;
	s->handles++;
	if ((rc = uv_pipe_open(&o->out, fds[0]))) {
		close(fds[0]);
		goto fail;
	}
	memset(&po, 0, sizeof(po));
	io[0].flags = UV_IGNORE;
	io[1].flags = UV_INHERIT_FD;
	io[1].data.fd = fds[1];
	io[2].flags = UV_INHERIT_FD;
	io[2].data.fd = fds[1];
	po.file = spy;
	po.args = argv;
	po.stdio = io;
	po.stdio_count = 3;
	po.exit_cb = stacks_on_spy_exit;
	o->proc.data = o;
	rc = uv_spawn(s->loop, &o->proc, &po);
	/* uv_spawn's handle must be closed even when the spawn failed. */
	s->handles++;
	if (rc) {
		uv_close((uv_handle_t *)&o->proc, stacks_on_one_close);
		goto fail;
	}
	o->proc_open = 1;
	close(fds[1]);
	fds[1] = -1;
	if ((rc = uv_read_start((uv_stream_t *)&o->out, stacks_on_alloc,
				stacks_on_spy_read))) {
		uv_process_kill(&o->proc, SIGKILL);
		o->pipe_open = 0;
		uv_close((uv_handle_t *)&o->out, stacks_on_one_close);
		o->st = ONE_SPY; /* its exit ends it */
		return 0;
	}
	o->st = ONE_SPY;
	return 0;
fail:
	if (fds[1] >= 0)
		close(fds[1]);
	o->pipe_open = 0;
	uv_close((uv_handle_t *)&o->out, stacks_on_one_close);
	return rc;
}

/* Abandon what has not answered within the timeout; one line names it. */
static void stacks_on_timeout(uv_timer_t *t)
{
	struct stacks *s = t->data;
	char pids[256] = "";
	size_t k = 0;
	int nab = 0;

	for (size_t i = 0; i < s->n && s->pending > 0; i++) {
		struct stacks_one *o = &s->one[i];

		if (o->st == ONE_DONE)
			continue;
		if (o->st == ONE_SPY && o->proc_open)
			uv_process_kill(&o->proc, SIGKILL);
		one_why(o,
			o->st == ONE_SPY
			    ? "pid %d: stack dump abandoned: py-spy did not "
			      "finish in time"
			    : "pid %d: stack dump abandoned: no faulthandler "
			      "dump in time",
			(int)o->pid);
		if (k + 16 < sizeof(pids))
			k +=
			    (size_t)snprintf(pids + k, sizeof(pids) - k, "%s%d",
					     nab ? ", " : "", (int)o->pid);
		nab++;
		o->st = ONE_DONE;
		s->pending--;
	}
	if (nab > 0)
		log_say("stack dump of pid%s %s abandoned after %g s",
			nab > 1 ? "s" : "", pids, s->timeout_s);
	stacks_finish(s);
}

int stacks_start(uv_loop_t *loop, const struct stacks_proc *p, size_t n,
		 enum stacks_mode mode, double timeout_s, stacks_done_cb cb,
		 void *data, struct stacks **out)
{
	struct stacks *s;
	char spy[PATH_MAX];
	int rc;

	*out = NULL;
#ifdef _WIN32
	{
		static int said;

		if (!said++)
			log_say(
			    "taking the workers' stacks needs Linux (/proc, "
			    "py-spy's ptrace, faulthandler's SIGABRT): not "
			    "on Windows");
		return UV_ENOSYS;
	}
#endif
	s = calloc(1, sizeof(*s));
	if (s == NULL ||
	    (s->one = calloc(n ? n : 1, sizeof(*s->one))) == NULL) {
		free(s);
		return UV_ENOMEM;
	}
	if ((rc = uv_timer_init(loop, &s->timer))) {
		free(s->one);
		free(s);
		return rc;
	}
	s->loop = loop;
	s->mode = mode;
	s->timeout_s = timeout_s;
	s->n = s->pending = n;
	s->cb = cb;
	s->data = data;
	s->timer.data = s;
	s->handles = 1;
	/* Every one is answered before the first finish can run. */
	s->pending++;
	for (size_t i = 0; i < n; i++) {
		struct stacks_one *o = &s->one[i];
		struct stacks_pstate st;

		o->s = s;
		o->pid = p[i].pid;
		o->python = p[i].python;
		if (o->pid <= 0 || stacks_proc_state(o->pid, &st)) {
			one_why(o, "pid %d is gone", (int)o->pid);
			one_done(o);
		} else if (!o->python || st.state == 'D' || st.state == 'T' ||
			   st.state == 't') {
			/*
			 * Neither ptrace nor a signal reaches state D; a
			 * stopped process (T, t) would answer neither py-spy
			 * nor faulthandler before it is continued, so each
			 * would only cost the whole timeout.
			 */
			one_from_proc(o);
			one_done(o);
		} else if (!spy_find(o->pid, spy, sizeof(spy)) ||
			   one_spy_start(o, spy) != 0) {
			one_fallback(o);
		}
	}
	*out = s;
	if (--s->pending == 0)
		uv_timer_start(&s->timer, stacks_on_timeout, 0, 0);
	else
		uv_timer_start(&s->timer, stacks_on_timeout,
			       timeout_s > 0 ? (uint64_t)(timeout_s * 1000) : 0,
			       0);
	return 0;
}

/* The end of a faulthandler dump in tail: from its last "Fatal Python". */
int stacks_exited(struct stacks *s, size_t i, const char *tail, size_t len)
{
	static const char mark[] = "Fatal Python error";
	struct stacks_one *o;
	const char *start = NULL, *p = tail;
	size_t left = len;

	if (s == NULL || i >= s->n)
		return 0;
	o = &s->one[i];
	if (s->called || o->st != ONE_FAULT)
		return o->faulted;
	while (tail && left >= sizeof(mark) - 1) {
		const char *hit = memmem(p, left, mark, sizeof(mark) - 1);

		if (hit == NULL)
			break;
		start = hit;
		left -= (size_t)(hit + 1 - p);
		p = hit + 1;
	}
	if (start == NULL) {
		one_why(o,
			"pid %d exited without a faulthandler dump on its "
			"stderr",
			(int)o->pid);
	} else {
		size_t k = len - (size_t)(start - tail);

		if (k > STACKS_MAX_TEXT)
			k = STACKS_MAX_TEXT;
		free(o->text);
		o->text = malloc(k + 1);
		if (o->text) {
			memcpy(o->text, start, k);
			o->text[k] = '\0';
			o->len = k;
			o->taken = 1;
			o->source = "faulthandler";
		} else {
			one_why(o, "pid %d: out of memory", (int)o->pid);
		}
	}
	one_done(o);
	return 1;
}

const char *stacks_text(const struct stacks *s, size_t i, size_t *len)
{
	const char *t = i < s->n && s->one[i].text ? s->one[i].text : "";

	if (len)
		*len = strlen(t);
	return t;
}

int stacks_taken(const struct stacks *s, size_t i)
{
	return i < s->n && s->one[i].taken;
}

const char *stacks_source(const struct stacks *s, size_t i)
{
	return i < s->n && s->one[i].taken ? s->one[i].source : NULL;
}

void stacks_free(struct stacks *s)
{
	if (s == NULL || s->freed)
		return;
	s->freed = 1;
	for (size_t i = 0; i < s->n; i++) {
		struct stacks_one *o = &s->one[i];

		if (o->proc_open)
			uv_process_kill(&o->proc, SIGKILL);
		if (o->pipe_open) {
			o->pipe_open = 0;
			uv_close((uv_handle_t *)&o->out, stacks_on_one_close);
		}
	}
	uv_close((uv_handle_t *)&s->timer, stacks_on_handle_close);
	stacks_maybe_free(s);
}

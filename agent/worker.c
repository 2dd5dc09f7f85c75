/*
 * One worker: its command line and environment (built completely before the
 * spawn), its process, and where its two output streams go (stream.c
 * carries the bytes, group.c stops what it leaves behind).
 *
 * Each stream goes where --redirects/--tee/--local_ranks_filter say: straight
 * into a log file when only the file wants it (the agent never touches those
 * bytes), to /dev/null when nobody wants stdout, and otherwise through a pipe
 * the agent reads on its loop. Piped bytes are framed into whole lines, copied
 * raw to the tee file, and written to the console one batch of whole lines at
 * a time, so lines from different workers never mix. stderr always feeds a
 * bounded tail for the failure report (from the pipe, or later from the file).
 *
 * A worker is done when its process has been reaped, its pipes closed, its
 * process group is empty and whatever else it left behind (in sessions of
 * their own: `setsid sleep &`) is gone, which its proc's guard sees to
 * (proc.c). At exit the pipes are drained synchronously, but only of the
 * bytes already in them, so nothing the worker wrote before exiting is lost
 * and a grandchild that keeps writing (`yes &`) cannot keep the agent in the
 * drain. The survivors (`sleep 987 &`) then get SIGTERM, and SIGKILL after
 * --shutdown_timeout (group.c for the worker's group, the guard for the
 * others).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#ifndef _WIN32
#include <pty.h>
#include <sys/ioctl.h>
#include <termios.h>
#endif

#include "crun/err.h"
#include "crun/gpu.h"
#include "console.h"
#include "worker.h"

#ifdef _WIN32
#define NULL_DEVICE "NUL"
#else
#define NULL_DEVICE "/dev/null"
#endif

extern char **environ;

#define LINE_MAX_BYTES (64 * 1024)
#define TAIL_BYTES (16 * 1024)

double worker_wall_time(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* One of the worker's handles closed; done once all are and it exited. */
static void worker_handle_closed(struct worker *w)
{
	if (--w->handles == 0 && w->exited)
		w->ctx->on_done(w, w->ctx->data);
}

static void worker_on_stream_closed(struct wstream *st, void *data)
{
	(void)st;
	worker_handle_closed(data);
}

static void worker_on_group_closed(struct wgroup *g, void *data)
{
	(void)g;
	worker_handle_closed(data);
}

/* The worker's process is gone (or given up on): drain and report it. */
static void worker_exited(struct worker *w, int status, int sig)
{
	w->exited = 1;
	w->status = status;
	w->signal = sig;
	w->exit_time = worker_wall_time();
#ifndef _WIN32
	stream_drain(&w->out);
	stream_drain(&w->err);
	stream_finish(&w->out);
	stream_finish(&w->err);
#else
	/* Windows' pipes cannot be read beside libuv's pending read: their
	 * EOF comes once the worker's job is empty (--shutdown_timeout at
	 * most, proc_win.c), and nothing written before it is lost. */
	if (w->abandoned) {
		stream_finish(&w->out);
		stream_finish(&w->err);
	}
#endif
	if (!w->abandoned &&
	    group_reap(&w->grp, w->ctx->loop, w->pid, w->local_rank,
		       w->ctx->cfg->shutdown_timeout, worker_on_group_closed,
		       w))
		w->handles++;
	w->ctx->on_exit(w, w->ctx->data);
	if (w->handles == 0)
		w->ctx->on_done(w, w->ctx->data);
}

static void worker_on_exit(struct crun_proc *p, int status, int sig)
{
	struct worker *w = proc_data(p);

	w->proc = NULL;
	w->rest = p; /* until worker_on_done */
	w->handles++;
	worker_exited(w, status, sig);
}

void worker_abandon(struct worker *w)
{
	if (w->proc == NULL || w->exited)
		return;
	proc_abandon(w->proc);
	w->proc = NULL;
	w->abandoned = 1;
	/* Its pipes never see EOF while it lives: only what is there now. */
	worker_exited(w, 128 + SIGKILL, SIGKILL);
}

/* Nothing the worker left behind lives any more. */
static void worker_on_done(struct crun_proc *p)
{
	struct worker *w = proc_data(p);

	w->rest = NULL;
	worker_handle_closed(w);
}

static char *path_join(const char *dir, const char *name)
{
	size_t n = strlen(dir) + strlen(name) + 2;
	char *p = malloc(n);

	if (p)
		snprintf(p, n, "%s/%s", dir, name);
	return p;
}

char *worker_error_file(const char *prefix, int local_rank)
{
	size_t n = strlen(prefix) + 32;
	char *p = malloc(n);

	if (p)
		snprintf(p, n, "%s%d.error.json", prefix, local_rank);
	return p;
}

/* Replace every "${local_rank}" in arg (torchrun's template substitution). */
static char *subst_local_rank(const char *arg, int local_rank)
{
	static const char key[] = "${local_rank}";
	char num[16], *out, *o;
	const char *p;
	size_t n = 0, klen = sizeof(key) - 1, nlen;

	nlen = (size_t)snprintf(num, sizeof(num), "%d", local_rank);
	for (p = arg; (p = strstr(p, key)) != NULL; p += klen)
		n++;
	out = malloc(strlen(arg) + n * nlen + 1);
	if (out == NULL)
		return NULL;
	for (o = out, p = arg;;) {
		const char *hit = strstr(p, key);
		size_t k = hit ? (size_t)(hit - p) : strlen(p);

		memcpy(o, p, k);
		o += k;
		if (hit == NULL)
			break;
		memcpy(o, num, nlen);
		o += nlen;
		p = hit + klen;
	}
	*o = '\0';
	return out;
}

/* torchrun's command: [python, -u, (-m), script, args...] or [script, args...].
 */
static char **build_argv(const struct crun_cfg *cfg, int local_rank)
{
	char **argv = calloc((size_t)cfg->argc + 4, sizeof(char *));
	int n = 0;

	if (argv == NULL)
		return NULL;
	/* The launcher decided (and chose the interpreter) once. */
	if (cfg->python) {
		argv[n++] = strdup(cfg->python);
		argv[n++] = strdup("-u");
		if (cfg->module)
			argv[n++] = strdup("-m");
	}
	for (int i = 0; i < cfg->argc; i++)
		argv[n++] = subst_local_rank(cfg->argv[i], local_rank);
	return argv;
}

/*
 * Why exec of prog said ENOENT when prog exists: its "#!" interpreter does
 * not. Puts the interpreter's path in out and returns 1, or 0 (prog is
 * missing, or not a script). Reads one small line; never blocks on a FIFO.
 */
static int missing_interpreter(const char *prog, char *out, size_t len)
{
	char line[256], *p;
	struct stat st;
	ssize_t n;
	size_t k;
	int fd;

	if (strchr(prog, '/') == NULL ||
	    (fd = open(prog, O_RDONLY | O_CLOEXEC | O_NONBLOCK)) < 0)
		return 0;
	n = fstat(fd, &st) == 0 && S_ISREG(st.st_mode)
		? read(fd, line, sizeof(line) - 1)
		: -1;
	close(fd);
	if (n < 3 || line[0] != '#' || line[1] != '!')
		return 0;
	line[n] = '\0';
	p = line + 2 + strspn(line + 2, " \t");
	k = strcspn(p, " \t\r\n");
	if (k == 0 || k >= len)
		return 0;
	memcpy(out, p, k);
	out[k] = '\0';
	return access(out, F_OK) != 0;
}

/* Is prog a Python interpreter (python, python3, python3.12, ...)? */
static int is_python(const char *prog)
{
	const char *base = strrchr(prog, '/');

	base = base ? base + 1 : prog;
	return strncmp(base, "python", 6) == 0 &&
	       strspn(base + 6, "0123456789.") == strlen(base + 6);
}

/*
 * A Python worker's environment: faulthandler on, so that before a kill it
 * dumps every thread at SIGABRT (stacks.c); the user's setting, even an
 * empty one, stands.
 */
static int python_env(struct crun_env *env)
{
	if (env_get(env, "PYTHONFAULTHANDLER") != NULL)
		return 0;
	return env_set(env, "PYTHONFAULTHANDLER", "1");
}

static void free_argv(char **argv)
{
	for (int i = 0; argv && argv[i]; i++)
		free(argv[i]);
	free(argv);
}

static int open_log(const char *dir, const char *name, char **path_out)
{
	char *path = path_join(dir, name);
	int fd;

	if (path == NULL)
		return -1;
	/* The filtered files are shared by the workers: never truncated
	 * (each attempt directory is new anyway). */
	fd = open(path,
		  O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC |
		      (strncmp(name, "filtered_", 9) ? O_TRUNC : 0),
		  0644);
	if (path_out && fd >= 0)
		*path_out = path;
	else
		free(path);
	return fd;
}

/*
 * The console prefix of a tee'd line: [<role><local_rank>]:, or torchrun's
 * template (--log_line_prefix_template, else
 * TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE) with ${role_name}, ${local_rank},
 * ${rank} and ${hostname} replaced (other text kept as written).
 */
static void line_prefix(const struct crun_cfg *cfg, int local_rank, int rank,
			char *out, size_t len)
{
	const char *t = cfg->log_line_prefix_template;
	char host[256];
	size_t n = 0;

	if (t == NULL || *t == '\0')
		t = getenv("TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE");

	if (t == NULL || *t == '\0') {
		snprintf(out, len, "[%s%d]:", cfg->role, local_rank);
		return;
	}
	*out = '\0';
	while (*t && n + 1 < len) {
		const char *sub = NULL;
		char num[16];
		size_t skip = 0;

		if (strncmp(t, "${role_name}", 12) == 0) {
			sub = cfg->role;
			skip = 12;
		} else if (strncmp(t, "${local_rank}", 13) == 0) {
			snprintf(num, sizeof(num), "%d", local_rank);
			sub = num;
			skip = 13;
		} else if (strncmp(t, "${rank}", 7) == 0) {
			snprintf(num, sizeof(num), "%d", rank);
			sub = num;
			skip = 7;
		} else if (strncmp(t, "${hostname}", 11) == 0) {
			if (gethostname(host, sizeof(host)) != 0)
				host[0] = '\0';
			host[sizeof(host) - 1] = '\0';
			sub = host;
			skip = 11;
		}
		if (sub) {
			n += (size_t)snprintf(out + n, len - n, "%s", sub);
			t += skip;
		} else {
			out[n++] = *t++;
			out[n] = '\0';
		}
		if (n >= len)
			n = len - 1;
	}
}

/*
 * Whether a console stream is a terminal the workers should see as one
 * (CRUN_WORKER_PTY=0 turns this off: plain pipes, as before).
 */
static int console_is_terminal(int fd)
{
#ifdef _WIN32
	return 0; /* (a pseudo console on Windows is for a later step) */
#else
	const char *v = getenv("CRUN_WORKER_PTY");

	return isatty(fd) && !(v && strcmp(v, "0") == 0);
#endif
}

/*
 * A pseudo-terminal instead of a pipe, for a stream whose console is a
 * terminal: the worker's isatty() is true (progress bars redraw, colours,
 * line-buffered stdio) while the agent still reads every byte for the
 * prefixes, the tail and the log files. The pty does no output processing
 * (no \n -> \r\n) and has the console's window size. fds[0] is the side
 * the agent reads, fds[1] the worker's.
 */
#ifdef _WIN32
static int open_pty(int console_fd, int fds[2])
{
	return UV_ENOSYS;
}
#else
static int open_pty(int console_fd, int fds[2])
{
	struct winsize ws;
	struct termios t;
	int have_ws = ioctl(console_fd, TIOCGWINSZ, &ws) == 0;

	if (openpty(&fds[0], &fds[1], NULL, NULL, have_ws ? &ws : NULL))
		return -errno;
	fcntl(fds[0], F_SETFD, FD_CLOEXEC);
	fcntl(fds[1], F_SETFD, FD_CLOEXEC);
	if (tcgetattr(fds[1], &t) == 0) {
		t.c_oflag &= ~(tcflag_t)OPOST;
		t.c_lflag &= ~(tcflag_t)(ECHO | ICANON | ISIG);
		tcsetattr(fds[1], TCSANOW, &t);
	}
	return 0;
}
#endif

/*
 * Decide where one stream goes and set up the pipe end the agent reads.
 * *child_fd is what the worker gets as fd 1 or 2 (-1: inherit).
 */
static int stream_setup(struct worker *w, struct wstream *s, int bit,
			const struct worker_round *r, int *child_fd,
			int *close_fd)
{
	const struct crun_cfg *cfg = w->ctx->cfg;
	int rbits = cfg_std_for(&cfg->redirects, w->local_rank);
	int tbits = cfg_std_for(&cfg->tee, w->local_rank);
	int to_file = w->dir && ((rbits | tbits) & bit);
	/* tee wins over redirects, as torchrun's "tee implies redirect". */
	int to_console = ((tbits & bit) || !(rbits & bit)) &&
			 cfg_rank_on_console(cfg, w->local_rank);
	const char *name = bit == CRUN_STD_OUT ? "stdout.log" : "stderr.log";
	int tty = 0;
	/* The duplicate filters need the lines: through the pipe too. */
	int filter =
	    r->attempt_dir && cfg->ndup_filters[bit == CRUN_STD_ERR] > 0;
	int fds[2], rc;

	stream_init(s, bit == CRUN_STD_ERR);
	s->console = w->ctx->console;
	s->tail = s->is_err ? &w->tail : NULL;
	if (filter) {
		s->filters = cfg->dup_filters[s->is_err];
		s->nfilters = cfg->ndup_filters[s->is_err];
	}
	*child_fd = -1;
	*close_fd = -1;

	if (filter) {
		char prefix[128];

		s->filter_fd = open_log(r->attempt_dir,
					s->is_err ? "filtered_stderr.log"
						  : "filtered_stdout.log",
					NULL);
		if (s->filter_fd < 0)
			return -errno;
		line_prefix(cfg, w->local_rank,
			    r->ranks.base_rank + w->local_rank, prefix,
			    sizeof(prefix));
		if ((rc = linebuf_init(&s->flb, prefix, LINE_MAX_BYTES)))
			return rc;
	}
	if (to_file && !to_console && !filter) {
		/* Only the file wants it: give it to the worker directly. */
		*child_fd =
		    open_log(w->dir, name, s->is_err ? &w->stderr_file : NULL);
		*close_fd = *child_fd;
		return *child_fd < 0 ? -errno : 0;
	}
	if (!to_file && !to_console && !s->is_err && !filter) {
		*child_fd = open(NULL_DEVICE, O_WRONLY | O_CLOEXEC);
		*close_fd = *child_fd;
		return *child_fd < 0 ? -errno : 0;
	}
	if (to_file) {
		s->file_fd = open_log(w->dir, name, NULL);
		if (s->file_fd < 0)
			return -errno;
	}
	if (to_console) {
		char prefix[128] = "";

		s->by_rank = console_collapsing(s->console);
		s->rank = w->local_rank;
		if ((tbits & bit) || s->by_rank)
			line_prefix(cfg, w->local_rank,
				    r->ranks.base_rank + w->local_rank, prefix,
				    sizeof(prefix));
		s->console_fd = s->is_err ? 2 : 1;
		if (s->by_rank)
			console_rank_open(s->console, s->console_fd, s->rank);
		rc = linebuf_init(&s->lb, prefix, LINE_MAX_BYTES);
		if (rc)
			return rc;
		tty = console_is_terminal(s->console_fd);
		linebuf_set_partial(&s->lb, tty);
	}
	if (tty) {
		if ((rc = open_pty(s->console_fd, fds)))
			return rc;
		s->pty = 1;
#ifdef _WIN32
	} else if ((rc = uv_pipe(fds, UV_NONBLOCK_PIPE, 0)) != 0) {
		return rc;
	}
#else
	} else if (pipe2(fds, O_CLOEXEC)) {
		return -errno;
	} else {
		/* A roomy pipe absorbs bursts from fast writers. */
		fcntl(fds[1], F_SETPIPE_SZ, 1 << 20);
	}
#endif
	rc = stream_open(s, w->ctx->loop, fds[0], worker_on_stream_closed, w);
	if (!s->open) {
		close(fds[0]);
		close(fds[1]);
		return rc;
	}
	w->handles++;
	*child_fd = fds[1];
	*close_fd = fds[1];
	return rc;
}

void worker_init(struct worker *w, const struct worker_ctx *ctx, int local_rank)
{
	memset(w, 0, sizeof(*w));
	w->ctx = ctx;
	w->local_rank = local_rank;
	stream_init(&w->out, 0);
	stream_init(&w->err, 1);
}

void worker_fail(struct worker *w)
{
	w->exited = 1;
	w->status = 127;
	w->exit_time = worker_wall_time();
}

/* Never started: no exit event will come; close what is open. */
static void worker_never_ran(struct worker *w)
{
	worker_fail(w);
	stream_finish(&w->out);
	stream_finish(&w->err);
}

int worker_start_begin(struct worker *w, const struct worker_ctx *wc,
		       int local_rank, const struct worker_round *r,
		       char *errmsg, size_t errlen)
{
	const struct crun_cfg *cfg = wc->cfg;
	struct crun_worker_ctx ctx;
	struct crun_env env;
	struct proc_opts po;
	const struct crun_binding_plan *bind;
	char **argv = NULL;
	int out_fd, err_fd, close_out = -1, close_err = -1, rc;

	worker_init(w, wc, local_rank);
	env.v = NULL;
	if ((rc = tail_init(&w->tail, TAIL_BYTES)))
		goto fail;
	if (r->attempt_dir) {
		char name[16];

		snprintf(name, sizeof(name), "%d", local_rank);
		w->dir = path_join(r->attempt_dir, name);
		if (w->dir == NULL || mkdir(w->dir, 0755)) {
			rc = -errno;
			snprintf(errmsg, errlen,
				 "cannot create log directory '%s': %s",
				 w->dir ? w->dir : r->attempt_dir,
				 strerror(errno));
			goto fail;
		}
		w->error_file = path_join(w->dir, "error.json");
	} else if (r->error_prefix) {
		w->error_file = worker_error_file(r->error_prefix, local_rank);
	}
	if ((rc = stream_setup(w, &w->out, CRUN_STD_OUT, r, &out_fd,
			       &close_out)) ||
	    (rc = stream_setup(w, &w->err, CRUN_STD_ERR, r, &err_fd,
			       &close_err))) {
		snprintf(errmsg, errlen,
			 "cannot set up output of local rank %d: %s",
			 local_rank, crun_strerror(rc));
		goto fail;
	}

	if ((rc = env_init(&env, wc->envp ? wc->envp : environ)))
		goto fail;
	for (int i = 0; i < cfg->nenv; i++)
		env_put(&env, cfg->env[i]);
	ctx.role = cfg->role;
	ctx.local_rank = local_rank;
	ctx.master_addr = r->master_addr;
	ctx.master_port = r->master_port;
	ctx.restart_count = r->restart_count;
	ctx.max_restarts = cfg->max_restarts;
	ctx.run_id = cfg->rdzv_id;
	ctx.use_agent_store = r->use_agent_store;
	ctx.no_libuv = r->no_libuv;
	ctx.error_file = w->error_file;
	ctx.nproc = r->ranks.local_world_size;
	if ((rc = env_add_contract(&env, &r->ranks, &ctx)))
		goto fail;
	if (cfg->checkpoint_grace > 0 && r->error_prefix) {
		size_t n = strlen(r->error_prefix) + 32;

		if ((w->ckpt_file = malloc(n)) == NULL) {
			rc = UV_ENOMEM;
			goto fail;
		}
		snprintf(w->ckpt_file, n, "%s%d.checkpointing", r->error_prefix,
			 local_rank);
		if ((rc = env_set(&env, "CRUN_CHECKPOINT_FILE", w->ckpt_file)))
			goto fail;
	}
	if (cfg->virtual_local_rank) {
		const char *var;
		char dev[64];

		/* torchrun 2.x: the worker's device is its only one, as 0. */
		gpu_virtual_device(local_rank, &var, dev, sizeof(dev));
		if ((rc = env_set(&env, "LOCAL_RANK", "0")) ||
		    (rc = env_set(&env, var, dev)))
			goto fail;
	}

	argv = build_argv(cfg, local_rank);
	if (argv == NULL) {
		rc = UV_ENOMEM;
		goto fail;
	}
	w->python = cfg->python != NULL || is_python(argv[0]);
	if (w->python && (rc = python_env(&env)))
		goto fail;
	memset(&po, 0, sizeof(po));
	po.argv = argv;
	po.envp = env.v;
	po.fd_in = 0;
	po.fd_out = out_fd;
	po.fd_err = err_fd;
	po.pdeath_signal = SIGKILL;
	po.own_group = 1;
	po.rest_grace_ms = cfg->shutdown_timeout < INT_MAX / 1000
			       ? (int)(cfg->shutdown_timeout * 1000)
			       : INT_MAX;
	po.exit_cb = worker_on_exit;
	po.done_cb = worker_on_done;
	po.data = w;
	bind = wc->binding;
	if (bind && local_rank < bind->n) {
		const struct crun_binding *b = &bind->w[local_rank];

		po.cpus = &b->cpus;
		po.mpol = b->mpol;
		po.mpol_nodes = b->nodes;
		po.mpol_maxnode = CRUN_BIND_MAX_NODES;
		po.mpol_first = b->first_node;
	}
	rc = proc_spawn_begin(wc->procs, &po, &w->starting);
	if (rc) {
		snprintf(errmsg, errlen, "cannot execute '%s': %s", argv[0],
			 crun_strerror(rc));
		goto fail;
	}
	/* For worker_start_end's message, should the exec fail. */
	w->prog = strdup(argv[0]);
	rc = 0;
fail:
	/* The child holds its own copies of these now. */
	if (close_out >= 0)
		close(close_out);
	if (close_err >= 0)
		close(close_err);
	free_argv(argv);
	if (env.v)
		env_release(&env);
	if (rc)
		worker_never_ran(w);
	return rc;
}

void worker_kill(struct worker *w)
{
	if (w->proc)
		proc_kill(w->proc, SIGKILL);
	else
		worker_signal(w, SIGKILL);
}

void worker_inject(struct worker *w, const char *text, size_t len)
{
	stream_inject(&w->err, text, len);
	if (w->err.console_fd >= 0)
		console_flush(w->ctx->console, w->err.console_fd);
}

char *worker_stderr_end(struct worker *w, int max_lines)
{
	struct crun_tail keep = w->tail;
	char *s;

	if (w->stderr_file == NULL)
		return tail_lines(&w->tail, max_lines);
	/* stderr went straight to its file: read its end into a tail of its
	 * own (the failure report reads it into w's tail later). */
	if (tail_init(&w->tail, TAIL_BYTES)) {
		w->tail = keep;
		return NULL;
	}
	worker_tail_from_file(w);
	s = tail_lines(&w->tail, max_lines);
	tail_release(&w->tail);
	w->tail = keep;
	return s;
}

int worker_start_end(struct worker *w, char *errmsg, size_t errlen)
{
	const struct crun_binding_plan *bind = w->ctx->binding;
	const char *prog = w->prog ? w->prog : "?";
	int rc = proc_spawn_end(w->starting);

	if (rc == 0) {
		w->proc = w->starting;
		w->pid = proc_pid(w->proc);
	} else if (rc == CRUN_ECPUBIND || rc == CRUN_EMEMBIND) {
		const struct crun_binding *b = &bind->w[w->local_rank];

		snprintf(errmsg, errlen,
			 rc == CRUN_ECPUBIND
			     ? "cannot bind local rank %d to cpus %s: %s "
			       "(sched_setaffinity)"
			     : "cannot bind local rank %d's memory to numa "
			       "node(s) %s: %s (set_mempolicy)",
			 w->local_rank,
			 rc == CRUN_ECPUBIND ? b->cpus_list : b->nodes_list,
			 crun_strerror(rc));
	} else {
		char interp[PATH_MAX];

		if (rc == UV_ENOENT &&
		    missing_interpreter(prog, interp, sizeof(interp)))
			snprintf(errmsg, errlen,
				 "cannot execute '%s': its interpreter '%s' "
				 "does not exist",
				 prog, interp);
		else
			snprintf(errmsg, errlen, "cannot execute '%s': %s",
				 prog, crun_strerror(rc));
	}
	w->starting = NULL;
	free(w->prog);
	w->prog = NULL;
	if (rc)
		worker_never_ran(w);
	return rc;
}

void worker_start_cancel(struct worker *w)
{
	proc_spawn_cancel(w->starting);
	w->starting = NULL;
	free(w->prog);
	w->prog = NULL;
	w->stopped = 1;
	worker_never_ran(w);
}

void worker_signal(struct worker *w, int sig)
{
	if (w->proc == NULL) {
		/* Exited: its survivors get the signal (a second SIGINT's
		 * SIGKILL, say). */
		group_signal(&w->grp, sig);
		if (w->rest)
			proc_kill(w->rest, sig);
		return;
	}
	w->stopped = 1;
	proc_kill(w->proc, sig);
}

/*
 * Give each of w's terminals the console's new size and tell the worker's
 * group, as a terminal does for its foreground group (the worker's pty is
 * not its controlling terminal, so the kernel does not).
 */
#ifdef _WIN32
void worker_winch(struct worker *w)
{
	/* (no terminal of its own: nothing to tell) */
}
#else
void worker_winch(struct worker *w)
{
	struct wstream *ss[2] = {&w->out, &w->err};
	struct winsize ws;
	uv_os_fd_t fd;
	int told = 0;

	for (int i = 0; i < 2; i++) {
		struct wstream *s = ss[i];

		if (s->pty && s->open &&
		    ioctl(s->console_fd, TIOCGWINSZ, &ws) == 0 &&
		    uv_fileno((uv_handle_t *)&s->pipe, &fd) == 0 &&
		    ioctl(fd, TIOCSWINSZ, &ws) == 0)
			told = 1;
	}
	if (told && w->proc != NULL)
		proc_kill(w->proc, SIGWINCH);
}
#endif

void worker_release(struct worker *w)
{
	stream_release(&w->out);
	stream_release(&w->err);
	tail_release(&w->tail);
	free(w->dir);
	free(w->stderr_file);
	free(w->error_file);
	free(w->stacks);
	if (w->ckpt_file)
		unlink(w->ckpt_file); /* a marker left by a rank that died */
	free(w->ckpt_file);
	w->dir = w->stderr_file = w->error_file = w->stacks = NULL;
	w->ckpt_file = NULL;
}

void worker_tail_from_file(struct worker *w)
{
	char buf[16384];
	ssize_t k;
	off_t size;
	int fd;

	if (w->stderr_file == NULL)
		return;
	fd = open(w->stderr_file, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	size = lseek(fd, 0, SEEK_END);
	if (size > (off_t)sizeof(buf))
		lseek(fd, size - (off_t)sizeof(buf), SEEK_SET);
	else
		lseek(fd, 0, SEEK_SET);
	k = read(fd, buf, sizeof(buf));
	close(fd);
	if (k > 0)
		tail_write(&w->tail, buf, (size_t)k);
}

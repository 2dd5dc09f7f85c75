/*
 * Choosing the interpreter for Python workers (see include/crun/pyexec.h).
 *
 * Happy path: $PYTHON_EXEC or $PYTHON is set and is used as given (no
 * process is started). Otherwise the candidates are, in order, the first
 * python3 on PATH, the interpreter named by the shebang of the torchrun
 * script on PATH, and the other python3 on PATH; each is asked, once, to find
 * the torch package with importlib (about 20 ms; torch itself is not
 * imported), and the first that can wins.
 *
 * Failure modes: a candidate that does not start, crashes, or does not answer
 * within the timeout counts as "cannot import torch" (it is killed). When no
 * candidate has torch the first python3 on PATH is used anyway (the job may
 * not need torch) and the reason says so; with no python3 on PATH at all,
 * "python3" is left for exec to report.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#ifdef _WIN32
#include <uv.h>
#else
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#endif

#include "crun/pyexec.h"

#define MAX_CANDIDATES 8

/* PATH's separator, and the interpreter's file name (Windows' installers
 * name it python.exe). */
#ifdef _WIN32
#define PATH_SEP ';'
#define PYTHON3 "python.exe"
#else
#define PATH_SEP ':'
#define PYTHON3 "python3"
#endif

static const char *env_get(char **envp, const char *name)
{
	size_t n = strlen(name);

	for (; envp && *envp; envp++)
		if (strncmp(*envp, name, n) == 0 && (*envp)[n] == '=')
			return *envp + n + 1;
	return NULL;
}

static int is_exec_file(const char *path)
{
	struct stat st;

	return access(path, X_OK) == 0 && stat(path, &st) == 0 &&
	       S_ISREG(st.st_mode);
}

/* Every executable `name` along PATH, in order, at most max. */
static int path_all(char **envp, const char *name, char out[][PATH_MAX],
		    int max)
{
	const char *p = env_get(envp, "PATH");
	int n = 0;

	if (p == NULL)
		p = "/usr/local/bin:/usr/bin:/bin";
	while (*p && n < max) {
		size_t len = strcspn(p, (const char[]){PATH_SEP, '\0'});

		if (len > 0 && len < PATH_MAX - 64) {
			snprintf(out[n], PATH_MAX, "%.*s/%s", (int)len, p,
				 name);
			if (is_exec_file(out[n]))
				n++;
		}
		p += len + (p[len] == PATH_SEP);
	}
	return n;
}

/* The interpreter of a "#!/path/python3 ..." script, or "" (env, none). */
static void shebang_of(const char *script, char *out, size_t len)
{
	char line[PATH_MAX];
	ssize_t k;
	int fd = open(script, O_RDONLY | O_CLOEXEC);

	*out = '\0';
	if (fd < 0)
		return;
	k = read(fd, line, sizeof(line) - 1);
	close(fd);
	if (k < 3 || line[0] != '#' || line[1] != '!')
		return;
	line[k] = '\0';
	line[strcspn(line, "\n")] = '\0';
	{
		char *s = line + 2 + strspn(line + 2, " \t");
		size_t n = strcspn(s, " \t");

		s[n] = '\0';
		/* "#!/usr/bin/env python3" finds the PATH's python3 again. */
		if (*s == '/' && strcmp(s + n - (n >= 4 ? 4 : n), "/env") &&
		    is_exec_file(s))
			snprintf(out, len, "%s", s);
	}
}

#ifdef _WIN32
/*
 * Windows has no posix_spawn: the same on a loop of its own (libuv's
 * process, pipe and timer), which this call runs until the child has
 * exited and its output is read, or the deadline has passed.
 */
struct pyexec_run {
	uv_process_t proc;
	uv_pipe_t out;
	uv_timer_t timer;
	char *buf;
	size_t len, got;
	int exited, status;
};

static void pyexec_on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *b)
{
	struct pyexec_run *r = h->data;

	*b = uv_buf_init(r->buf + r->got, (unsigned)(r->len - 1 - r->got));
}

static void pyexec_on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
	struct pyexec_run *r = s->data;

	if (n > 0)
		r->got += (size_t)n;
	if (n < 0 || r->got == r->len - 1)
		uv_read_stop(s);
}

static void pyexec_on_exit(uv_process_t *p, int64_t status, int sig)
{
	struct pyexec_run *r = p->data;

	r->exited = 1;
	r->status = sig ? -1 : (int)status;
	uv_timer_stop(&r->timer);
}

static void pyexec_on_timeout(uv_timer_t *t)
{
	struct pyexec_run *r = t->data;

	uv_process_kill(&r->proc, SIGKILL);
	uv_read_stop((uv_stream_t *)&r->out);
}

int pyexec_output(const char *interp, char *const argv[], char **envp,
		  int timeout_ms, char *out, size_t len)
{
	struct pyexec_run r = {.buf = out, .len = len};
	uv_process_options_t o = {0};
	uv_stdio_container_t io[3];
	uv_loop_t loop;
	int rc;

	*out = '\0';
	if (len < 1 || uv_loop_init(&loop) != 0)
		return -1;
	uv_pipe_init(&loop, &r.out, 0);
	uv_timer_init(&loop, &r.timer);
	r.proc.data = r.out.data = r.timer.data = &r;
	io[0].flags = UV_IGNORE;
	io[1].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
	io[1].data.stream = (uv_stream_t *)&r.out;
	io[2].flags = UV_IGNORE;
	o.file = interp;
	o.args = (char **)argv;
	o.env = envp;
	o.stdio = io;
	o.stdio_count = 3;
	o.exit_cb = pyexec_on_exit;
	o.flags = UV_PROCESS_WINDOWS_HIDE;
	rc = uv_spawn(&loop, &r.proc, &o);
	if (rc == 0) {
		uv_read_start((uv_stream_t *)&r.out, pyexec_on_alloc,
			      pyexec_on_read);
		uv_timer_start(&r.timer, pyexec_on_timeout,
			       (uint64_t)(timeout_ms > 0 ? timeout_ms : 0), 0);
		uv_run(&loop, UV_RUN_DEFAULT);
		uv_close((uv_handle_t *)&r.proc, NULL);
	}
	uv_close((uv_handle_t *)&r.out, NULL);
	uv_close((uv_handle_t *)&r.timer, NULL);
	uv_run(&loop, UV_RUN_DEFAULT);
	uv_loop_close(&loop);
	out[r.got] = '\0';
	return rc == 0 && r.exited && r.status == 0 ? 0 : -1;
}
#else
int pyexec_output(const char *interp, char *const argv[], char **envp,
		  int timeout_ms, char *out, size_t len)
{
	posix_spawn_file_actions_t fa;
	size_t got = 0;
	struct timespec t0, t1;
	pid_t pid;
	int fds[2], status = 0;

	*out = '\0';
	if (len < 1 || pipe2(fds, O_CLOEXEC))
		return -1;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	if (posix_spawn(&pid, interp, &fa, NULL, argv, envp) != 0)
		pid = -1;
	posix_spawn_file_actions_destroy(&fa);
	close(fds[1]);
	if (pid < 0) {
		close(fds[0]);
		return -1;
	}
	/* Read the answer until EOF or the deadline, whichever comes first. */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		struct pollfd pfd = {fds[0], POLLIN, 0};
		long el;
		ssize_t k;

		clock_gettime(CLOCK_MONOTONIC, &t1);
		el = (t1.tv_sec - t0.tv_sec) * 1000 +
		     (t1.tv_nsec - t0.tv_nsec) / 1000000;
		if (el >= timeout_ms ||
		    poll(&pfd, 1, (int)(timeout_ms - el)) == 0) {
			kill(pid, SIGKILL);
			break;
		}
		k = read(fds[0], out + got, len - 1 - got);
		if (k < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (k <= 0)
			break;
		got += (size_t)k;
		if (got == len - 1)
			break;
	}
	close(fds[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	out[got] = '\0';
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}
#endif

int pyexec_has_torch(const char *interp, char **envp, int timeout_ms)
{
	static const char probe[] =
	    "import importlib.util as u, sys\n"
	    "sys.stdout.write('yes' if u.find_spec('torch') else 'no')\n";
	char *argv[] = {(char *)interp, (char *)"-c", (char *)probe, NULL};
	char buf[8];

	return pyexec_output(interp, argv, envp, timeout_ms, buf,
			     sizeof(buf)) == 0 &&
	       strcmp(buf, "yes") == 0;
}

void pyexec_choose(char **envp, int timeout_ms, struct crun_pyexec *out)
{
	char cand[MAX_CANDIDATES + 1][PATH_MAX], torchrun[1][PATH_MAX];
	const char *v;
	int n, nt;

	memset(out, 0, sizeof(*out));
	if ((v = env_get(envp, "PYTHON_EXEC")) && *v) {
		snprintf(out->path, sizeof(out->path), "%s", v);
		snprintf(out->why, sizeof(out->why), "from $PYTHON_EXEC");
		return;
	}
	if ((v = env_get(envp, "PYTHON")) && *v) {
		snprintf(out->path, sizeof(out->path), "%s", v);
		snprintf(out->why, sizeof(out->why), "from $PYTHON");
		return;
	}
	out->probed = 1;
	n = path_all(envp, PYTHON3, cand, MAX_CANDIDATES);
	/* torchrun's own interpreter has torch: try it right after the first.
	 */
	nt = path_all(envp, "torchrun", torchrun, 1);
	if (nt == 1) {
		char interp[PATH_MAX];
		int dup = 0;

		shebang_of(torchrun[0], interp, sizeof(interp));
		for (int i = 0; i < n && *interp; i++)
			dup |= strcmp(cand[i], interp) == 0;
		if (*interp && !dup) {
			int at = n > 0 ? 1 : 0;

			memmove(cand[at + 1], cand[at],
				sizeof(cand[0]) * (size_t)(n - at));
			snprintf(cand[at], PATH_MAX, "%s", interp);
			n++;
		}
	}
	if (n == 0) {
		snprintf(out->path, sizeof(out->path), PYTHON3);
		snprintf(out->why, sizeof(out->why), "no python3 on PATH");
		return;
	}
	for (int i = 0; i < n; i++) {
		if (!pyexec_has_torch(cand[i], envp, timeout_ms))
			continue;
		snprintf(out->path, sizeof(out->path), "%.*s", PATH_MAX - 1,
			 cand[i]);
		if (i == 0)
			snprintf(out->why, sizeof(out->why),
				 "the first python3 on PATH; it can import "
				 "torch");
		else
			snprintf(out->why, sizeof(out->why),
				 "it can import torch; %.*s (first on PATH) "
				 "cannot: set PYTHON_EXEC to choose",
				 (int)sizeof(out->why) / 2, cand[0]);
		return;
	}
	snprintf(out->path, sizeof(out->path), "%.*s", PATH_MAX - 1, cand[0]);
	snprintf(out->why, sizeof(out->why),
		 "the first python3 on PATH; none of the %d interpreters "
		 "tried can import torch",
		 n);
}

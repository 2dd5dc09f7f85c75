/*
 * The worker-group lifecycle of one node, on one libuv loop.
 *
 *   ROUND ──(rendezvous done)──> RUNNING ──(a worker fails, a signal, a
 *   membership change)──> STOPPING ──(every worker reaped)──> ROUND or DONE
 *
 * RUNNING ends on the first worker failure: the agent sends the stop signal
 * to every worker's process group and arms a timer that sends SIGKILL after
 * --shutdown_timeout. When the last worker is reaped the round is judged:
 * restart (a fresh round, TORCHELASTIC_RESTART_COUNT + 1) while restarts are
 * left, else print the root cause and exit with the failed worker's status.
 * Signals only record intent and start the same stop sequence; a second
 * SIGINT escalates to SIGKILL at once.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <ftw.h>
#include <stdarg.h>

#include "crun/err.h"
#include "crun/report.h"
#include "agent.h"

extern char **environ;

enum agent_state { A_ROUND, A_RUNNING, A_STOPPING, A_DONE };
enum stop_reason { STOP_NONE, STOP_FAILURE, STOP_SIGNAL };

struct agent {
	uv_loop_t loop;
	struct crun_cfg *cfg;
	struct crun_procs *procs;
	uv_signal_t sigs[32];
	int nsigs;
	uv_timer_t kill_timer;
	char host[256];
	char *log_root;		/* <log_dir>/<run_id>, NULL: no files */
	int log_root_tmp;	/* we made it up: remove after success */
	char *attempt_dir;
	int restart_count;
	int restarts_left;
	enum agent_state state;
	enum stop_reason reason;
	int stop_signal;
	int sigint_seen;
	struct worker *workers;
	int nworkers, ndone;
	int port_fd;		/* MASTER_PORT held for the round */
	struct round round;
	int failed_rank;
	int exit_status;
};

static void agent_round_start(struct agent *a);
static void agent_finish(struct agent *a, int status);

const struct crun_cfg *agent_cfg(const struct agent *a)
{
	return a->cfg;
}

struct crun_procs *agent_procs(const struct agent *a)
{
	return a->procs;
}

uv_loop_t *agent_loop(const struct agent *a)
{
	return (uv_loop_t *)&a->loop;
}

char **agent_base_env(const struct agent *a)
{
	(void)a;
	return environ;
}

double agent_wall_time(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Write whole lines to the console; the agent is its only writer. */
void agent_console(struct agent *a, int fd, const char *line, size_t len)
{
	(void)a;
	while (len > 0) {
		ssize_t n = write(fd, line, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return; /* console gone: keep running, files still work */
		line += n;
		len -= (size_t)n;
	}
}

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* One line from crun itself, on stderr. */
static void say(const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	int n;

	n = snprintf(buf, sizeof(buf), "crun: ");
	va_start(ap, fmt);
	n += vsnprintf(buf + n, sizeof(buf) - (size_t)n, fmt, ap);
	va_end(ap);
	if (n >= (int)sizeof(buf) - 1)
		n = sizeof(buf) - 2;
	buf[n++] = '\n';
	agent_console(NULL, 2, buf, (size_t)n);
}

/* --- stopping ----------------------------------------------------------- */

static void agent_signal_workers(struct agent *a, int sig)
{
	for (int i = 0; i < a->nworkers; i++)
		worker_signal(&a->workers[i], sig);
}

static void agent_on_kill_timer(uv_timer_t *t)
{
	struct agent *a = t->data;

	say("workers still running %.0f s after the stop signal: sending SIGKILL",
	    a->cfg->shutdown_timeout);
	agent_signal_workers(a, SIGKILL);
}

/* Stop the running group: sig now, SIGKILL after the shutdown timeout. */
static void agent_stop_group(struct agent *a, enum stop_reason why, int sig)
{
	if (a->state != A_RUNNING)
		return;
	a->state = A_STOPPING;
	a->reason = why;
	agent_signal_workers(a, sig);
	uv_timer_start(&a->kill_timer, agent_on_kill_timer,
		       (uint64_t)(a->cfg->shutdown_timeout * 1000), 0);
}

static void agent_on_signal(uv_signal_t *h, int sig)
{
	struct agent *a = h->data;

	if (a->state == A_DONE)
		return;
	if (sig == SIGINT && a->sigint_seen) {
		say("second SIGINT: killing the workers now");
		agent_signal_workers(a, SIGKILL);
		return;
	}
	if (sig == SIGINT)
		a->sigint_seen = 1;
	if (a->stop_signal == 0)
		a->stop_signal = sig;
	if (a->state == A_RUNNING) {
		say("received %s: forwarding it to the workers", cfg_signame(sig));
		agent_stop_group(a, STOP_SIGNAL, sig);
	} else if (a->state == A_STOPPING) {
		agent_signal_workers(a, sig);
	} else {
		say("received %s before the workers started: exiting", cfg_signame(sig));
		agent_finish(a, 128 + sig);
	}
}

/* --- rounds ------------------------------------------------------------- */

void agent_on_worker_exit(struct agent *a, struct worker *w)
{
	if (a->state != A_RUNNING || w->status == 0)
		return;
	agent_stop_group(a, STOP_FAILURE, SIGTERM);
}

/* Read the last bytes of a log file into the worker's tail. */
static void tail_from_file(struct worker *w)
{
	char buf[16384];
	ssize_t k;
	off_t size;
	int fd = open(w->stderr_file, O_RDONLY | O_CLOEXEC);

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

/* Collect the failures of the round that just ended; returns how many. */
static int agent_collect_failures(struct agent *a, struct crun_failure **out)
{
	struct crun_failure *f = calloc((size_t)a->nworkers, sizeof(*f));
	int n = 0;

	for (int i = 0; i < a->nworkers && f; i++) {
		struct worker *w = &a->workers[i];
		struct crun_failure *x = &f[n];

		/* Workers the agent stopped were terminated, not failed. */
		if (w->status == 0 || w->stopped)
			continue;
		x->local_rank = w->local_rank;
		x->group_rank = a->round.ranks.group_rank;
		x->rank = a->round.ranks.base_rank + w->local_rank;
		x->pid = w->pid;
		snprintf(x->host, sizeof(x->host), "%s", a->host);
		x->exitcode = w->status;
		x->signal = w->signal;
		x->time = w->exit_time;
		if (w->error_file == NULL ||
		    failure_read_error_file(x, w->error_file) != 0) {
			/* stderr that went straight to its file: read its end. */
			if (w->stderr_file)
				tail_from_file(w);
			x->traceback = tail_lines(&w->tail, 20);
		}
		n++;
	}
	*out = f;
	return n;
}

static void agent_round_end(struct agent *a)
{
	struct crun_failure *f = NULL;
	const char *ep = a->cfg->argv[0];
	char path[PATH_MAX] = "";
	int nf, root = 0, status = 0, restart;

	uv_timer_stop(&a->kill_timer);
	if (a->port_fd >= 0) {
		close(a->port_fd);
		a->port_fd = -1;
	}
	nf = agent_collect_failures(a, &f);
	restart = nf > 0 && a->reason == STOP_FAILURE && a->restarts_left > 0;
	if (nf > 0) {
		root = report_root(f, nf);
		status = f[root].exitcode;
		if (a->attempt_dir) {
			snprintf(path, sizeof(path), "%s/failures.json", a->attempt_dir);
			report_write_json(path, ep, f, nf);
		}
	}
	if (restart) {
		a->restarts_left--;
		a->restart_count++;
		say("rank %d (local rank %d, pid %d) failed with exit code %d%s%s; "
		    "restarting the worker group (restart %d of %d)",
		    f[root].rank, f[root].local_rank, (int)f[root].pid, status,
		    f[root].signal ? ", " : "",
		    f[root].signal ? cfg_signame(f[root].signal) : "",
		    a->restart_count, a->cfg->max_restarts);
	} else if (nf > 0) {
		a->failed_rank = f[root].rank;
		report_print(stderr, ep, f, nf);
		if (*path)
			say("failure report saved to %s", path);
	}
	for (int i = 0; i < a->nworkers; i++)
		worker_release(&a->workers[i]);
	free(a->workers);
	a->workers = NULL;
	a->nworkers = a->ndone = 0;
	for (int i = 0; i < nf; i++)
		failure_release(&f[i]);
	free(f);

	if (a->reason == STOP_SIGNAL)
		agent_finish(a, 128 + a->stop_signal);
	else if (restart)
		agent_round_start(a);
	else if (nf > 0) {
		say("worker group failed; exiting with status %d (that of rank %d)",
		    status, a->failed_rank);
		agent_finish(a, status);
	} else
		agent_finish(a, 0);
}

void agent_on_worker_done(struct agent *a, struct worker *w)
{
	(void)w;
	if (++a->ndone == a->nworkers)
		agent_round_end(a);
}

/*
 * Hold a free TCP port for MASTER_PORT until the round ends. The socket is
 * bound with SO_REUSEADDR but never listens, so worker rank 0's TCPStore
 * (which also sets SO_REUSEADDR) can bind and listen on it, while nothing
 * else can take the port in between.
 */
static int reserve_port(struct agent *a, int *port)
{
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);
	int one = 1, fd;

	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_ANY);
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(fd, (struct sockaddr *)&sin, sizeof(sin)) ||
	    getsockname(fd, (struct sockaddr *)&sin, &len)) {
		int err = -errno;

		close(fd);
		return err;
	}
	a->port_fd = fd;
	*port = ntohs(sin.sin_port);
	return 0;
}

/* Create <log_root>/attempt_<n>; a directory that exists is never reused. */
static int make_attempt_dir(struct agent *a)
{
	char path[PATH_MAX];

	free(a->attempt_dir);
	a->attempt_dir = NULL;
	if (a->log_root == NULL)
		return 0;
	snprintf(path, sizeof(path), "%s/attempt_%d", a->log_root, a->restart_count);
	for (int k = 1; mkdir(path, 0755) != 0; k++) {
		if (errno != EEXIST || k > 1000) {
			say("cannot create log directory '%s': %s", path, strerror(errno));
			return -errno;
		}
		snprintf(path, sizeof(path), "%s/attempt_%d.%d", a->log_root,
			 a->restart_count, k);
	}
	a->attempt_dir = strdup(path);
	return 0;
}

/* The rendezvous of a single node: it is group rank 0 of a group of one. */
static void agent_round_start(struct agent *a)
{
	struct crun_cfg *cfg = a->cfg;
	struct crun_node_info self = {cfg->role, cfg->nproc_per_node};
	struct round *rp = &a->round, r;
	char errmsg[512];
	int rc;

	a->state = A_ROUND;
	a->reason = STOP_NONE;
	memset(&r, 0, sizeof(r));
	env_compute_ranks(&self, 1, 0, &r.ranks);
	r.restart_count = a->restart_count;
	r.master_addr = cfg->local_addr ? cfg->local_addr : "127.0.0.1";
	if (strcmp(cfg->rdzv_backend, "static") == 0 && cfg->master_port >= 0) {
		r.master_addr = cfg->master_addr;
		r.master_port = cfg->master_port;
	} else if ((rc = reserve_port(a, &r.master_port))) {
		say("cannot reserve a port for MASTER_PORT: %s", crun_strerror(rc));
		agent_finish(a, 1);
		return;
	}
	r.use_agent_store = 0;
	if (make_attempt_dir(a)) {
		agent_finish(a, 1);
		return;
	}
	r.attempt_dir = a->attempt_dir;
	*rp = r;

	a->nworkers = cfg->nproc_per_node;
	a->ndone = 0;
	a->workers = calloc((size_t)a->nworkers, sizeof(*a->workers));
	a->state = A_RUNNING;
	for (int i = 0; i < a->nworkers; i++) {
		rc = worker_start(a, &a->workers[i], i, rp, errmsg, sizeof(errmsg));
		if (rc == 0)
			continue;
		/* Workers that never started count as done (and not as failed). */
		say("%s", errmsg);
		for (int k = i + 1; k < a->nworkers; k++) {
			struct worker *w = &a->workers[k];

			w->a = a;
			w->local_rank = k;
			w->out.file_fd = w->err.file_fd = -1;
			w->exited = w->stopped = 1;
			w->status = 127;
		}
		agent_stop_group(a, STOP_FAILURE, SIGTERM);
		a->ndone += a->nworkers - i - 1 + (a->workers[i].handles == 0);
		if (a->ndone == a->nworkers)
			agent_round_end(a);
		return;
	}
}

/* --- start and finish --------------------------------------------------- */

static int rm_entry(const char *path, const struct stat *st, int flag,
		    struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static void agent_on_handle_closed(uv_handle_t *h)
{
	(void)h;
}

static void agent_finish(struct agent *a, int status)
{
	if (a->state == A_DONE)
		return;
	a->state = A_DONE;
	a->exit_status = status;
	for (int i = 0; i < a->nsigs; i++)
		uv_close((uv_handle_t *)&a->sigs[i], agent_on_handle_closed);
	uv_close((uv_handle_t *)&a->kill_timer, agent_on_handle_closed);
	procs_close(a->procs, NULL, NULL);
	a->procs = NULL;
}

/* A unique run id: torchrun's default "none" makes unrelated jobs collide. */
static char *make_run_id(const char *host)
{
	unsigned char rnd[6];
	char buf[128];
	int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);

	memset(rnd, 0, sizeof(rnd));
	if (fd >= 0) {
		if (read(fd, rnd, sizeof(rnd)) < 0)
			rnd[0] = (unsigned char)getpid();
		close(fd);
	}
	snprintf(buf, sizeof(buf), "crun-%.32s-%02x%02x%02x%02x%02x%02x", host, rnd[0],
		 rnd[1], rnd[2], rnd[3], rnd[4], rnd[5]);
	return strdup(buf);
}

static int agent_setup_logs(struct agent *a)
{
	const char *dir = a->cfg->log_dir;
	char path[PATH_MAX];

	if (dir && strcmp(dir, "/dev/null") == 0)
		return 0; /* no files at all, as newer torchrun */
	if (dir == NULL) {
		const char *tmp = getenv("TMPDIR");

		snprintf(path, sizeof(path), "%s/crun_XXXXXX", tmp && *tmp ? tmp : "/tmp");
		if (mkdtemp(path) == NULL) {
			say("cannot create a log directory in '%s': %s",
			    tmp && *tmp ? tmp : "/tmp", strerror(errno));
			return -errno;
		}
		a->log_root_tmp = 1;
		dir = path;
	} else if (mkdir(dir, 0755) && errno != EEXIST) {
		say("cannot create log directory '%s': %s", dir, strerror(errno));
		return -errno;
	}
	a->log_root = malloc(strlen(dir) + strlen(a->cfg->rdzv_id) + 2);
	snprintf(a->log_root, strlen(dir) + strlen(a->cfg->rdzv_id) + 2, "%s/%s", dir,
		 a->cfg->rdzv_id);
	if (mkdir(a->log_root, 0755) && errno != EEXIST) {
		say("cannot create log directory '%s': %s", a->log_root, strerror(errno));
		return -errno;
	}
	return 0;
}

int agent_run(struct crun_cfg *cfg)
{
	struct agent a;
	int rc;

	memset(&a, 0, sizeof(a));
	a.cfg = cfg;
	a.port_fd = -1;
	a.restarts_left = cfg->max_restarts;
	if (gethostname(a.host, sizeof(a.host) - 1))
		snprintf(a.host, sizeof(a.host), "localhost");
	if (cfg->rdzv_id == NULL)
		cfg->rdzv_id = make_run_id(a.host);

	rc = uv_loop_init(&a.loop);
	if (rc) {
		say("cannot start the event loop: %s", crun_strerror(rc));
		return 1;
	}
	uv_timer_init(&a.loop, &a.kill_timer);
	a.kill_timer.data = &a;
	rc = procs_new(&a.loop, &a.procs);
	if (rc) {
		say("cannot watch child processes: %s", crun_strerror(rc));
		return 1;
	}
	for (int i = 0; i < cfg->nsignals; i++) {
		uv_signal_init(&a.loop, &a.sigs[a.nsigs]);
		a.sigs[a.nsigs].data = &a;
		if (uv_signal_start(&a.sigs[a.nsigs], agent_on_signal, cfg->signals[i]) == 0)
			a.nsigs++;
		else
			uv_close((uv_handle_t *)&a.sigs[a.nsigs], agent_on_handle_closed);
	}
	/* Workers inherit this (torchrun exports it to the agent's env too). */
	setenv("TORCHELASTIC_SIGNALS_TO_HANDLE", cfg->signals_str, 1);
	if (getenv("OMP_NUM_THREADS") == NULL && cfg->nproc_per_node > 1)
		say("setting OMP_NUM_THREADS=1 for each worker (unset, and %d workers "
		    "share this node); set it yourself to tune", cfg->nproc_per_node);

	if (agent_setup_logs(&a) == 0)
		agent_round_start(&a);
	else
		agent_finish(&a, 1);

	uv_run(&a.loop, UV_RUN_DEFAULT);
	rc = uv_loop_close(&a.loop);
	if (rc)
		say("internal error: event loop closed with handles open");

	/* A log directory crun invented is removed after a success. */
	if (a.log_root_tmp && a.exit_status == 0 && a.log_root) {
		char *parent = strdup(a.log_root);

		nftw(a.log_root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
		if (parent && strrchr(parent, '/')) {
			*strrchr(parent, '/') = '\0';
			rmdir(parent);
		}
		free(parent);
	}
	free(a.log_root);
	free(a.attempt_dir);
	return a.exit_status;
}

/*
 * rdzv_sim: internet scale on one machine, simulated.
 *
 * Two curves, one CSV row per N on stdout:
 *
 *   workers   N simulated ranks do what init_process_group does against the
 *             workers' store: connect, ADD(barrier, 1), WAIT[go], then G GETs
 *             of shared keys (the rank whose ADD returns N SETs go). The
 *             clients speak the TCPStore wire protocol (G0, as PyTorch 1.13)
 *             from --procs forked processes, one epoll set each, spread over
 *             source addresses 127.0.0.1..K (about 4096 connections per
 *             address: connect()'s port search turns slow past ~14K per
 *             pair). The same clients run against a fresh `crun store` and a
 *             fresh do-nothing server (store_load null-server) in the same
 *             run: "floor_seconds".
 *   rdzv      N rendezvous participants, each a real src/rdzv/rdzv.c instance over
 *             the real c10d backend (src/rdzv/rdzv_store.c, the async store
 *             client), spread over --procs forked processes on libuv loops.
 *             One more process hosts the store exactly as an agent does
 *             (rdzv_store_open with is_host, plus its own participant, group
 *             rank 0); one holds a single victim participant. Rows:
 *               rdzv-form    from "join" to the last node's round callback
 *               rdzv-steady  a quiet window after that (--steady seconds,
 *                            at least one heartbeat interval, after one
 *                            interval to settle): the host's CPU on
 *                            heartbeats and liveness
 *               rdzv-reform  SIGKILL of the victim to the last survivor
 *                            formed in the next round (floor_seconds: to the
 *                            last survivor told the round ended)
 *
 * Columns: curve, N, seconds, floor_seconds, ops_per_round (store requests,
 * heartbeats excluded), bytes_per_node (workers: wire bytes both ways;
 * rdzv: key and value bytes both ways), host_cpu_pct (store host process,
 * % of one core over the measured span), host_rss_mb (its peak RSS),
 * load1 (the machine's 1-minute load average when the row was taken).
 *
 * Failure modes: a client that fails, a round that does not form, or a
 * bound (--timeout) that passes makes the run exit 1 with a one-line reason,
 * and so do wrong ranks in a round (each of 0..N-1 once, the host's node 0,
 * one world size: N, then N-1 after the loss). Descriptors: RLIMIT_NOFILE is raised
 * (as root the hard limit too, and fs.nr_open if it is too small: said on
 * stderr).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "crun/err.h"
#include "crun/rdzv.h"
#include "crun/rdzv_store.h"
#include "crun/store.h"

#include "crun/banned.h"

#define MAX_EVENTS 1024
#define PER_SOURCE 4096 /* connections per loopback source address */
#define MAX_PROCS 16
#define WINDOW 3072 /* connects in flight, all client processes together */

struct opts {
	const char *mode;
	const char *crun, *floor;
	long sizes[32];
	int nsizes;
	int procs;
	int gets;
	double timeout;
	double steady;
	double ka_interval;
	int ka_attempts;
	double hb_rate;
	int header;
};

static struct opts opt;

/* ------------------------------------------------------------ helpers */

static double now(void)
{
	return (double)uv_hrtime() / 1e9;
}

static void die(const char *msg)
{
	fprintf(stderr, "rdzv_sim: %s\n", msg);
	exit(1);
}

/*
 * Make room for need descriptors in each process: soft limit to hard, and
 * as root (with CAP_SYS_RESOURCE) the hard limit and fs.nr_open up to need.
 * 0, or -1 with the reason on stderr when one process cannot have need.
 */
static int nofile_raise(long need, const char *who)
{
	struct rlimit rl;
	long nr_open = 0;
	FILE *f;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return -1;
	if ((long)rl.rlim_max < need && geteuid() == 0) {
		f = fopen("/proc/sys/fs/nr_open", "r");
		if (f != NULL) {
			if (fscanf(f, "%ld", &nr_open) != 1)
				nr_open = 0;
			fclose(f);
		}
		if (nr_open > 0 && nr_open < need) {
			f = fopen("/proc/sys/fs/nr_open", "w");
			if (f != NULL) {
				fprintf(f, "%ld\n", need);
				if (fclose(f) == 0)
					fprintf(stderr,
						"rdzv_sim: raised fs.nr_open "
						"from %ld to %ld\n",
						nr_open, need);
			}
		}
		rl.rlim_max = (rlim_t)need;
		rl.rlim_cur = (rlim_t)need;
		if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
			getrlimit(RLIMIT_NOFILE, &rl);
	}
	rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
	getrlimit(RLIMIT_NOFILE, &rl);
	if ((long)rl.rlim_cur >= need)
		return 0;
	fprintf(stderr,
		"rdzv_sim: skipped: %s needs %ld descriptors, RLIMIT_NOFILE "
		"allows %llu and cannot be raised here%s\n",
		who, need, (unsigned long long)rl.rlim_cur,
		geteuid() == 0 ? " (no CAP_SYS_RESOURCE)" : " (not root)");
	return -1;
}

/* CPU seconds (user + system) of pid so far, or -1. */
static double proc_cpu(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long ut = 0, st = 0;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (f == NULL)
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	p = strrchr(buf, ')');
	if (p == NULL ||
	    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu",
		   &ut, &st) != 2)
		return -1;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* Peak resident set of pid in MB, or -1. */
static double proc_hwm_mb(pid_t pid)
{
	char path[64], line[256];
	long kb = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	if (f == NULL)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmHWM: %ld kB", &kb) == 1)
			break;
	fclose(f);
	return kb < 0 ? -1 : (double)kb / 1024;
}

static double load1(void)
{
	double l = -1;
	FILE *f = fopen("/proc/loadavg", "r");

	if (f != NULL) {
		if (fscanf(f, "%lf", &l) != 1)
			l = -1;
		fclose(f);
	}
	return l;
}

static void row(const char *curve, long n, double sec, double floor_sec,
		double ops, double bytes, double cpu, double rss)
{
	char fs[32] = "";

	if (floor_sec >= 0)
		snprintf(fs, sizeof(fs), "%.3f", floor_sec);
	printf("%s,%ld,%.3f,%s,%.0f,%.0f,%.1f,%.1f,%.2f\n", curve, n, sec, fs,
	       ops, bytes, cpu, rss, load1());
	fflush(stdout);
}

/* A free TCP port below the ephemeral range is not guaranteed; ask the
 * kernel for one and give it back (the server binds it right after). */
static int pick_port(void)
{
	struct sockaddr_in a;
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0), port = -1;

	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&a, &len) == 0)
		port = ntohs(a.sin_port);
	if (fd >= 0)
		close(fd);
	return port;
}

static struct sockaddr_in loop_addr(int host_octets, int port)
{
	struct sockaddr_in a;

	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_port = htons((uint16_t)port);
	a.sin_addr.s_addr = htonl((127u << 24) + (unsigned)host_octets);
	return a;
}

/* Wait (bounded) until something accepts on 127.0.0.1:port. */
static int wait_listening(int port, double secs)
{
	double end = now() + secs;

	while (now() < end) {
		struct sockaddr_in a = loop_addr(1, port);
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		int ok = fd >= 0 &&
			 connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;

		if (fd >= 0)
			close(fd);
		if (ok)
			return 0;
		usleep(20000);
	}
	return -1;
}

/* Start argv[0] (a store server) with stdout and stderr to /dev/null. */
static pid_t spawn(const char *const argv[])
{
	pid_t pid = fork();

	if (pid == 0) {
		int nul = open("/dev/null", O_WRONLY);

		if (nul >= 0) {
			dup2(nul, 1);
			dup2(nul, 2);
		}
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	return pid;
}

static void reap(pid_t pid)
{
	if (pid > 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
}

/* --------------------------------------------------------- wire helpers */

struct buf {
	unsigned char p[256];
	size_t len;
};

static void put_u8(struct buf *b, unsigned v)
{
	b->p[b->len++] = (unsigned char)v;
}

static void put_u64(struct buf *b, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		b->p[b->len++] = (unsigned char)(v >> (8 * i));
}

static void put_str(struct buf *b, const char *s)
{
	size_t n = strlen(s);

	put_u64(b, n);
	memcpy(b->p + b->len, s, n);
	b->len += n;
}

static uint64_t get_u64(const unsigned char *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

/* G0 opcodes (PyTorch's TCPStore wire protocol). */
enum { OP_SET = 0, OP_GET = 2, OP_ADD = 3, OP_WAIT = 5 };

/* ------------------------------------------------------- workers curve */

enum wstate { W_CONNECTING, W_ADD, W_WAIT, W_GET, W_DONE, W_FAILED };

struct wclient {
	int fd;
	unsigned char state, gets;
	unsigned short inlen;
	unsigned char in[96];
};

/* What a worker process reports when it is done. */
struct wreport {
	long done, failed;
	double t_last;
	double bytes, ops;
	int first_errno;
};

struct wfleet {
	long n, first, count; /* global size, our slice */
	int nsrc;
	int port;
	long connecting; /* connects in flight */
	struct wclient *c;
	struct buf add, wait, setwait, get[8];
	struct wreport rep;
};

static void w_send(struct wfleet *f, struct wclient *c, const struct buf *b)
{
	ssize_t w = write(c->fd, b->p, b->len);

	if (w != (ssize_t)b->len) {
		/* A fresh socket always takes a frame this small. */
		if (!f->rep.first_errno)
			f->rep.first_errno = w < 0 ? errno : EAGAIN;
		c->state = W_FAILED;
		f->rep.failed++;
		close(c->fd);
		c->fd = -1;
		return;
	}
	f->rep.bytes += (double)b->len;
	f->rep.ops++;
}

static void w_fail(struct wfleet *f, struct wclient *c, int err)
{
	if (c->state == W_CONNECTING)
		f->connecting--;
	if (!f->rep.first_errno)
		f->rep.first_errno = err ? err : ECONNRESET;
	c->state = W_FAILED;
	f->rep.failed++;
	close(c->fd);
	c->fd = -1;
}

static void w_event(struct wfleet *f, int ep, struct wclient *c, uint32_t ev)
{
	ssize_t r;
	size_t need;

	if (c->state == W_CONNECTING) {
		int err = 0;
		socklen_t len = sizeof(err);
		struct epoll_event e = {.events = EPOLLIN, .data.ptr = c};

		getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
		if (err || (ev & (EPOLLERR | EPOLLHUP)))
			return w_fail(f, c, err);
		if (!(ev & EPOLLOUT))
			return;
		f->connecting--;
		epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &e);
		c->state = W_ADD;
		return w_send(f, c, &f->add);
	}
	r = read(c->fd, c->in + c->inlen, sizeof(c->in) - c->inlen);
	if (r < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (r <= 0)
		return w_fail(f, c, r == 0 ? 0 : errno);
	f->rep.bytes += (double)r;
	c->inlen = (unsigned short)(c->inlen + r);
	for (;;) {
		if (c->state == W_ADD) {
			if (c->inlen < 8)
				return;
			c->state = W_WAIT;
			c->inlen = 0;
			/* The rank that completes the barrier opens it. */
			w_send(f, c,
			       (long)get_u64(c->in) == f->n ? &f->setwait
							    : &f->wait);
			if (c->state == W_WAIT && (long)get_u64(c->in) == f->n)
				f->rep.ops++;
			return;
		}
		if (c->state == W_WAIT) {
			if (c->inlen < 1)
				return;
			if (c->in[0] != 0)
				return w_fail(f, c, EPROTO);
			c->inlen = 0;
			if (opt.gets == 0)
				goto done;
			c->state = W_GET;
			c->gets = 0;
			return w_send(f, c, &f->get[0]);
		}
		if (c->state == W_GET) {
			if (c->inlen < 8)
				return;
			need = 8 + (size_t)get_u64(c->in);
			if (need > sizeof(c->in))
				return w_fail(f, c, EPROTO);
			if (c->inlen < need)
				return;
			c->inlen = 0;
			if (++c->gets < opt.gets)
				return w_send(f, c, &f->get[c->gets]);
			goto done;
		}
		return;
	}
done:
	c->state = W_DONE;
	f->rep.done++;
	f->rep.t_last = now();
	close(c->fd);
	c->fd = -1;
}

static void w_connect(struct wfleet *f, int ep, struct wclient *c, long gi)
{
	struct sockaddr_in dst = loop_addr(1, f->port);
	struct sockaddr_in src = loop_addr(1 + (int)(gi % f->nsrc), 0);
	struct epoll_event e = {.events = EPOLLIN | EPOLLOUT, .data.ptr = c};
	int one = 1;

	c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (c->fd < 0) {
		c->state = W_FAILED;
		f->rep.failed++;
		if (!f->rep.first_errno)
			f->rep.first_errno = errno;
		return;
	}
	setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(c->fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one,
		   sizeof(one));
	c->state = W_CONNECTING;
	f->connecting++;
	if (bind(c->fd, (struct sockaddr *)&src, sizeof(src)) != 0 ||
	    (connect(c->fd, (struct sockaddr *)&dst, sizeof(dst)) != 0 &&
	     errno != EINPROGRESS) ||
	    epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &e) != 0)
		w_fail(f, c, errno);
}

/* One worker process: its slice of clients, from "go" until all done. */
static void w_run(struct wfleet *f, int cmd, int rep)
{
	struct epoll_event evs[MAX_EVENTS];
	double deadline;
	long next = 0;
	char go;
	int ep = epoll_create1(EPOLL_CLOEXEC);

	f->c = calloc((size_t)f->count, sizeof(*f->c));
	if (f->c == NULL || ep < 0)
		_exit(3);
	if (read(cmd, &go, 1) != 1)
		_exit(3);
	deadline = now() + opt.timeout;
	while (f->rep.done + f->rep.failed < f->count && now() < deadline) {
		long stop = next + 256 < f->count ? next + 256 : f->count;
		int n;

		/*
		 * At most a window of connects in flight, all processes
		 * together below the server's accept backlog (somaxconn,
		 * 4096 here): past it the kernel drops SYNs and each costs a
		 * retransmit of 1 s or more, for crun and the floor alike.
		 */
		if (stop - next > WINDOW / opt.procs - f->connecting)
			stop = next + (WINDOW / opt.procs - f->connecting > 0
					   ? WINDOW / opt.procs - f->connecting
					   : 0);
		for (; next < stop; next++)
			w_connect(f, ep, &f->c[next], f->first + next);
		n = epoll_wait(ep, evs, MAX_EVENTS, next < f->count ? 0 : 20);
		for (int i = 0; i < n; i++)
			w_event(f, ep, evs[i].data.ptr, evs[i].events);
	}
	if (write(rep, &f->rep, sizeof(f->rep)) != sizeof(f->rep))
		_exit(3);
	_exit(0);
}

/* Set the shared keys the ranks read (rank 0's MASTER-side state). */
static int w_seed(int port)
{
	struct sockaddr_in a = loop_addr(1, port);
	int fd = socket(AF_INET, SOCK_STREAM, 0), rc = -1;
	struct buf b;
	char k[32];

	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0)
		goto out;
	for (int i = 0; i < opt.gets; i++) {
		b.len = 0;
		put_u8(&b, OP_SET);
		snprintf(k, sizeof(k), "sim/shared/%d", i);
		put_str(&b, k);
		put_str(&b, "tcp://10.0.0.1:29500/gloo/v1.13");
		if (write(fd, b.p, b.len) != (ssize_t)b.len)
			goto out;
	}
	/* A GET behind the SETs: once answered, they are all in. */
	b.len = 0;
	put_u8(&b, OP_GET);
	put_str(&b, "sim/shared/0");
	if (write(fd, b.p, b.len) != (ssize_t)b.len)
		goto out;
	if (read(fd, b.p, sizeof(b.p)) > 0)
		rc = 0;
out:
	if (fd >= 0)
		close(fd);
	return rc;
}

/* Drive N ranks against the server on port; 0 or -1 (why on stderr). */
static int w_round(long n, int port, double *secs, double *ops,
		   double *bytes)
{
	struct wfleet f;
	pid_t pids[MAX_PROCS];
	int cmd[2], rep[2], rc = 0;
	struct wreport tot = {0}, r;
	double t0;
	char k[32];

	if (opt.gets > 0 && w_seed(port) != 0) {
		fprintf(stderr, "rdzv_sim: cannot seed the shared keys\n");
		return -1;
	}
	memset(&f, 0, sizeof(f));
	f.n = n;
	f.port = port;
	f.nsrc = (int)((n + PER_SOURCE - 1) / PER_SOURCE);
	put_u8(&f.add, OP_ADD);
	put_str(&f.add, "sim/barrier");
	put_u64(&f.add, 1);
	put_u8(&f.wait, OP_WAIT);
	put_u64(&f.wait, 1);
	put_str(&f.wait, "sim/go");
	put_u8(&f.setwait, OP_SET);
	put_str(&f.setwait, "sim/go");
	put_str(&f.setwait, "1");
	memcpy(f.setwait.p + f.setwait.len, f.wait.p, f.wait.len);
	f.setwait.len += f.wait.len;
	for (int i = 0; i < opt.gets && i < 8; i++) {
		put_u8(&f.get[i], OP_GET);
		snprintf(k, sizeof(k), "sim/shared/%d", i);
		put_str(&f.get[i], k);
	}
	if (pipe(cmd) || pipe(rep))
		return -1;
	for (int p = 0; p < opt.procs; p++) {
		f.first = n * p / opt.procs;
		f.count = n * (p + 1) / opt.procs - f.first;
		pids[p] = fork();
		if (pids[p] == 0) {
			close(cmd[1]);
			close(rep[0]);
			w_run(&f, cmd[0], rep[1]);
		}
	}
	close(cmd[0]);
	close(rep[1]);
	t0 = now();
	for (int p = 0; p < opt.procs; p++)
		if (write(cmd[1], "g", 1) != 1)
			rc = -1;
	for (int p = 0; p < opt.procs; p++) {
		if (read(rep[0], &r, sizeof(r)) != sizeof(r)) {
			rc = -1;
			continue;
		}
		tot.done += r.done;
		tot.failed += r.failed;
		tot.bytes += r.bytes;
		tot.ops += r.ops;
		if (r.t_last > tot.t_last)
			tot.t_last = r.t_last;
		if (r.first_errno && !tot.first_errno)
			tot.first_errno = r.first_errno;
	}
	for (int p = 0; p < opt.procs; p++)
		waitpid(pids[p], NULL, 0);
	close(cmd[1]);
	close(rep[0]);
	if (rc == 0 && tot.done != n) {
		fprintf(stderr,
			"rdzv_sim: workers N=%ld: %ld done, %ld failed (%s)\n",
			n, tot.done, tot.failed,
			tot.first_errno ? strerror(tot.first_errno)
					: "timed out");
		rc = -1;
	}
	*secs = tot.t_last - t0;
	*ops = tot.ops;
	*bytes = tot.bytes / (double)n;
	return rc;
}

static int run_workers(void)
{
	char portarg[16], maxc[32];
	int status = 0;

	if (opt.crun == NULL || opt.floor == NULL)
		die("workers needs --crun PATH and --floor PATH");
	for (int i = 0; i < opt.nsizes; i++) {
		long n = opt.sizes[i];
		double s = 0, fs = 0, ops = 0, bytes = 0, fops, fbytes, c0, rss,
		       cpu;
		int port = pick_port();
		pid_t pid;

		if (nofile_raise(n + 256, "the store (one per rank)") ||
		    nofile_raise(n / opt.procs + 256, "a client process"))
			continue;
		snprintf(portarg, sizeof(portarg), "%d", port);
		snprintf(maxc, sizeof(maxc), "%ld", n + 1024);
		{
			const char *av[] = {opt.crun, "store",   "--port",
				      portarg,		"--max-conns", maxc,
				      "--quiet",	NULL};
			pid = spawn(av);
		}
		if (wait_listening(port, 10) != 0) {
			reap(pid);
			die("crun store did not come up");
		}
		c0 = proc_cpu(pid);
		if (w_round(n, port, &s, &ops, &bytes) != 0)
			status = 1;
		cpu = (proc_cpu(pid) - c0) / s * 100;
		rss = proc_hwm_mb(pid);
		reap(pid);

		port = pick_port();
		snprintf(portarg, sizeof(portarg), "%d", port);
		{
			const char *av[] = {opt.floor, "null-server", "--port",
				      portarg, NULL};
			pid = spawn(av);
		}
		if (wait_listening(port, 10) != 0) {
			reap(pid);
			die("the floor server did not come up");
		}
		if (w_round(n, port, &fs, &fops, &fbytes) != 0)
			status = 1;
		reap(pid);
		row("workers", n, s, fs, ops, bytes, cpu, rss);
	}
	return status;
}

/* --------------------------------------------------------- rdzv curve */

/* Messages from a participant process to the parent (one write each). */
enum { M_PORT = 1, M_OPEN, M_ROUND, M_END, M_STATS, M_ERR };

struct msg {
	int type, a, b, c;
	double t;
	double ops, bytes, hbops;
};

struct sim;

struct counters {
	double ops, bytes, hbops;
};

struct inst {
	struct sim *sim;
	int id;
	struct crun_rdzv_store *st;
	struct crun_rdzv *r;
	char host[32], addr[32];
};

struct sim {
	uv_loop_t loop;
	uv_poll_t cmd;
	int cmd_fd, rep_fd;
	long n; /* nodes in the job */
	int is_host, port;
	int count;
	struct inst *in;
	struct counters cnt;
	int opened;
};

static struct sim *the_sim;

static void send_msg(struct sim *s, const struct msg *m)
{
	if (write(s->rep_fd, m, sizeof(*m)) != sizeof(*m))
		_exit(4);
}

/* The store operations, counted on their way to the real c10d backend. */
struct creq {
	rdzv_kv_cb cb;
	void *arg;
};

static void count_req(const char *key, size_t vlen)
{
	size_t kl = strlen(key);

	if (kl > 3 && strstr(key, "/hb/") != NULL) {
		the_sim->cnt.hbops++;
		return;
	}
	the_sim->cnt.ops++;
	the_sim->cnt.bytes += (double)(kl + vlen);
}

static void c_on_reply(int status, const struct crun_store_reply *r, void *arg)
{
	struct creq *q = arg;

	if (status == 0 && r != NULL) {
		the_sim->cnt.bytes += (double)r->len;
		for (size_t i = 0; i < r->nvalues; i++)
			the_sim->cnt.bytes += (double)r->values[i].len;
	}
	q->cb(status, r, q->arg);
	free(q);
}

/* Wrap (cb, arg) for counting; NULL cb stays NULL. */
static struct creq *c_wrap(rdzv_kv_cb *cb, void **arg)
{
	struct creq *q;

	if (*cb == NULL)
		return NULL;
	q = malloc(sizeof(*q));
	if (q == NULL)
		abort();
	q->cb = *cb;
	q->arg = *arg;
	*cb = c_on_reply;
	*arg = q;
	return q;
}

#define C_CALL(call)                                                           \
	do {                                                                   \
		struct creq *q = c_wrap(&cb, &arg);                            \
		int rc_ = (call);                                              \
		if (rc_)                                                       \
			free(q);                                               \
		return rc_;                                                    \
	} while (0)

static int c_add(void *kv, const char *key, int64_t d, rdzv_kv_cb cb,
		 void *arg)
{
	count_req(key, 8);
	C_CALL(rdzv_store_ops.add(kv, key, d, cb, arg));
}

static int c_set(void *kv, const char *key, const void *v, size_t n,
		 rdzv_kv_cb cb, void *arg)
{
	count_req(key, n);
	C_CALL(rdzv_store_ops.set(kv, key, v, n, cb, arg));
}

static int c_compare_set(void *kv, const char *key, const void *e, size_t el,
			 const void *d, size_t dl, rdzv_kv_cb cb, void *arg)
{
	count_req(key, el + dl);
	C_CALL(rdzv_store_ops.compare_set(kv, key, e, el, d, dl, cb, arg));
}

static int c_multi_get(void *kv, const char *const *keys, size_t n, int tmo,
		       rdzv_kv_cb cb, void *arg)
{
	for (size_t i = 0; i < n; i++)
		count_req(keys[i], 0);
	C_CALL(rdzv_store_ops.multi_get(kv, keys, n, tmo, cb, arg));
}

static int c_peek(void *kv, const char *const *keys, size_t n, rdzv_kv_cb cb,
		  void *arg)
{
	for (size_t i = 0; i < n; i++)
		count_req(keys[i], 0);
	C_CALL(rdzv_store_ops.peek(kv, keys, n, cb, arg));
}

static int c_multi_set(void *kv, const char *const *keys,
		       const void *const *vals, const size_t *lens, size_t n,
		       rdzv_kv_cb cb, void *arg)
{
	for (size_t i = 0; i < n; i++)
		count_req(keys[i], lens[i]);
	C_CALL(rdzv_store_ops.multi_set(kv, keys, vals, lens, n, cb, arg));
}

static int c_watch(void *kv, const char *const *keys, size_t n, int tmo,
		   rdzv_kv_cb cb, void *arg)
{
	for (size_t i = 0; i < n; i++)
		count_req(keys[i], 0);
	C_CALL(rdzv_store_ops.watch(kv, keys, n, tmo, cb, arg));
}

static void c_on_vanish(void *kv, void (*cb)(void *, const char *, size_t),
			void *arg)
{
	rdzv_store_ops.on_vanish(kv, cb, arg);
}

static const struct rdzv_kv_ops counted_ops = {
    .add = c_add,
    .set = c_set,
    .compare_set = c_compare_set,
    .multi_get = c_multi_get,
    .peek = c_peek,
    .multi_set = c_multi_set,
    .watch = c_watch,
    .on_vanish = c_on_vanish,
};

static int sim_start_master(void *data, int round, int *port,
			    int *by_worker)
{
	(void)data;
	(void)round;
	*port = 29500; /* nobody connects: the workers' curve is separate */
	return 0;
}

static void on_round(struct crun_rdzv *r, int status,
		     const struct rdzv_result *res, void *data)
{
	struct inst *in = data;
	struct msg m = {.type = M_ROUND, .t = now()};

	(void)r;
	if (status) {
		m.type = M_ERR;
		m.a = status;
		fprintf(stderr, "rdzv_sim: node %d: %s: %s\n", in->id,
			crun_strerror(status), rdzv_errmsg(in->r));
	} else {
		m.a = res->round;
		m.b = res->ranks.group_rank;
		m.c = res->ranks.group_world_size;
	}
	send_msg(in->sim, &m);
}

static void on_end(struct crun_rdzv *r, const struct rdzv_end *e, void *data)
{
	struct inst *in = data;
	struct msg m = {.type = M_END, .a = e->kind, .t = now()};

	send_msg(in->sim, &m);
	/* What an agent does after a node died: join the next round. */
	if (e->kind == RDZV_END_DEAD && rdzv_next(r, on_round, in) != 0) {
		m.type = M_ERR;
		send_msg(in->sim, &m);
	}
}

static void on_open(struct crun_rdzv_store *st, int status, void *data)
{
	struct inst *in = data;
	struct sim *s = in->sim;
	struct rdzv_opts o;
	struct msg m = {.type = M_OPEN};

	if (status) {
		fprintf(stderr, "rdzv_sim: node %d: %s\n", in->id,
			rdzv_store_errmsg(st));
		m.type = M_ERR;
		m.a = status;
		send_msg(s, &m);
		return;
	}
	memset(&o, 0, sizeof(o));
	o.run_id = "sim";
	o.min_nodes = s->n > 1 ? (int)s->n - 1 : 1;
	o.max_nodes = (int)s->n;
	o.static_rank = -1;
	o.max_restarts = 3;
	o.host = in->host;
	o.addr = in->addr;
	o.is_store_host = s->is_host;
	o.nproc = 8;
	o.role = "default";
	o.join_timeout = opt.timeout;
	o.last_call_timeout = opt.timeout;
	o.close_timeout = 30;
	o.keep_alive_interval = opt.ka_interval;
	o.keep_alive_max_attempt = opt.ka_attempts;
	o.heartbeat_rate = opt.hb_rate;
	o.start_master = sim_start_master;
	o.data = in;
	if (rdzv_new(&s->loop, &o, &counted_ops, st, on_end, &in->r) != 0)
		_exit(5);
	if (s->is_host) {
		m.type = M_PORT;
		m.a = store_server_port(rdzv_store_server(st));
		send_msg(s, &m);
	}
	if (++s->opened == s->count) {
		m.type = M_OPEN;
		m.a = s->count;
		send_msg(s, &m);
	}
}

static void on_cmd(uv_poll_t *h, int status, int events)
{
	struct sim *s = h->data;
	struct msg m = {.type = M_STATS};
	char c;

	(void)status;
	(void)events;
	if (read(s->cmd_fd, &c, 1) != 1)
		_exit(0); /* the parent went away */
	switch (c) {
	case 'J':
		for (int i = 0; i < s->count; i++)
			if (rdzv_next(s->in[i].r, on_round, &s->in[i]) != 0)
				_exit(6);
		break;
	case 'S':
		m.ops = s->cnt.ops;
		m.bytes = s->cnt.bytes;
		m.hbops = s->cnt.hbops;
		send_msg(s, &m);
		break;
	default:
		_exit(0);
	}
}

/* A participant process: count nodes (ids first..), on one loop. */
static void sim_child(struct sim *s, int first)
{
	struct rdzv_store_opts so;
	char err[256];

	the_sim = s;
	signal(SIGPIPE, SIG_IGN);
	uv_loop_init(&s->loop);
	s->in = calloc((size_t)s->count, sizeof(*s->in));
	if (s->in == NULL)
		_exit(3);
	for (int i = 0; i < s->count; i++) {
		struct inst *in = &s->in[i];
		int id = first + i;

		in->sim = s;
		in->id = id;
		snprintf(in->host, sizeof(in->host), "node%06d", id);
		snprintf(in->addr, sizeof(in->addr), "127.1.%d.%d",
			 (id >> 8) & 255, id & 255);
		memset(&so, 0, sizeof(so));
		/* Spread over destination addresses: one 4-tuple space each. */
		snprintf(err, sizeof(err), "127.0.0.%d",
			 1 + (id / 2) % 16);
		so.host = s->is_host ? "127.0.0.1" : err;
		so.port = s->is_host ? 0 : s->port;
		so.is_host = s->is_host;
		so.timeout_ms = (int)(opt.timeout * 1000);
		so.errmsg = err;
		so.errlen = sizeof(err);
		if (rdzv_store_open(&s->loop, &so, on_open, in, &in->st) != 0) {
			fprintf(stderr, "rdzv_sim: node %d: %s\n", id, err);
			_exit(3);
		}
	}
	uv_poll_init(&s->loop, &s->cmd, s->cmd_fd);
	s->cmd.data = s;
	uv_poll_start(&s->cmd, UV_READABLE, on_cmd);
	uv_run(&s->loop, UV_RUN_DEFAULT);
	_exit(0);
}

/* The parent's view of one participant process. */
struct proc {
	pid_t pid;
	int cmd, rep;
	int count;
};

static pid_t fork_sim(struct proc *p, long n, int is_host, int port,
		      int first, int count)
{
	int cmd[2], rep[2];
	struct sim s;

	if (pipe(cmd) || pipe(rep))
		return -1;
	p->count = count;
	p->pid = fork();
	if (p->pid == 0) {
		close(cmd[1]);
		close(rep[0]);
		memset(&s, 0, sizeof(s));
		s.cmd_fd = cmd[0];
		s.rep_fd = rep[1];
		s.n = n;
		s.is_host = is_host;
		s.port = port;
		s.count = count;
		sim_child(&s, first);
	}
	close(cmd[0]);
	close(rep[1]);
	p->cmd = cmd[1];
	p->rep = rep[0];
	return p->pid;
}

/* Everything the parent learns from the participants of one job. */
struct tally {
	long opened_procs;
	long formed[8]; /* per round (mod 8) */
	double t_formed[8];
	long ended;
	double t_ended;
	long errors;
	int bad_kind;
	unsigned char *seen; /* ranks of the round being checked */
	int check_round;
	long bad_ranks;
	int port;
	long stats;
	struct counters cnt;
};

/* Read every pending message from ps[0..np-1]; wait up to ms for one. */
static void drain(struct proc *ps, int np, struct tally *t, long n, int ms)
{
	struct pollfd pf[MAX_PROCS + 2];
	struct msg m;

	for (int i = 0; i < np; i++) {
		pf[i].fd = ps[i].rep;
		pf[i].events = POLLIN;
	}
	if (poll(pf, (nfds_t)np, ms) <= 0)
		return;
	for (int i = 0; i < np; i++) {
		if (!(pf[i].revents & (POLLIN | POLLHUP)))
			continue;
		if (read(ps[i].rep, &m, sizeof(m)) != sizeof(m)) {
			ps[i].rep = -1; /* closed: a killed victim */
			continue;
		}
		switch (m.type) {
		case M_PORT:
			t->port = m.a;
			break;
		case M_OPEN:
			t->opened_procs++;
			break;
		case M_ROUND:
			t->formed[m.a & 7]++;
			if (m.t > t->t_formed[m.a & 7])
				t->t_formed[m.a & 7] = m.t;
			if (m.a == t->check_round) {
				if (m.b < 0 || m.b >= m.c || m.c != n - (m.a > 0) ||
				    t->seen[m.b]++ || (i == 0 && m.b != 0))
					t->bad_ranks++;
			}
			break;
		case M_END:
			t->ended++;
			if (m.t > t->t_ended)
				t->t_ended = m.t;
			if (m.a != RDZV_END_DEAD)
				t->bad_kind = m.a;
			break;
		case M_STATS:
			t->stats++;
			t->cnt.ops += m.ops;
			t->cnt.bytes += m.bytes;
			t->cnt.hbops += m.hbops;
			break;
		default:
			t->errors++;
		}
	}
}

static void tell(struct proc *ps, int np, char c)
{
	for (int i = 0; i < np; i++)
		if (ps[i].pid > 0 && write(ps[i].cmd, &c, 1) != 1)
			ps[i].pid = -ps[i].pid;
}

/* Gather the op counters of every live process. */
static void gather(struct proc *ps, int np, struct tally *t, long n)
{
	double end = now() + 10;
	int live = 0;

	for (int i = 0; i < np; i++)
		live += ps[i].pid > 0;
	memset(&t->cnt, 0, sizeof(t->cnt));
	t->stats = 0;
	tell(ps, np, 'S');
	while (t->stats < live && now() < end)
		drain(ps, np, t, n, 100);
}

#define WAIT_UNTIL(cond)                                                       \
	do {                                                                   \
		double end_ = now() + opt.timeout;                             \
		while (!(cond) && t.errors == 0 && now() < end_)               \
			drain(ps, np, &t, n, 50);                              \
	} while (0)

static int rdzv_job(long n)
{
	struct proc ps[MAX_PROCS + 2];
	struct tally t;
	int np = 0, status = 1, procs = opt.procs;
	long rest = n - 2, first = 2;
	double t0, c0, c1, w0, form_s, ops1, bytes1, cpu_form, tk, hb_s;
	const char *why = NULL;

	memset(&t, 0, sizeof(t));
	memset(ps, 0, sizeof(ps));
	t.check_round = 0;
	if (nofile_raise(n + 256, "the store host (one per node)") ||
	    nofile_raise(n / procs + 256, "a node process"))
		return 0;
	t.seen = calloc((size_t)n, 1);
	/* The host: the store and node 0, as an agent hosting it. */
	if (fork_sim(&ps[np++], n, 1, 0, 0, 1) < 0)
		goto out;
	WAIT_UNTIL(t.port > 0 && t.opened_procs == 1);
	if (t.port <= 0) {
		why = "the store host did not open";
		goto out;
	}
	/* The victim, alone in its process; then the others. */
	if (fork_sim(&ps[np++], n, 0, t.port, 1, 1) < 0)
		goto out;
	for (int p = 0; p < procs; p++) {
		int cnt = (int)(rest * (p + 1) / procs - rest * p / procs);

		if (fork_sim(&ps[np++], n, 0, t.port, (int)first, cnt) < 0)
			goto out;
		first += cnt;
	}
	WAIT_UNTIL(t.opened_procs == np);
	if (t.opened_procs != np) {
		why = "not every node reached the store";
		goto out;
	}
	gather(ps, np, &t, n);
	ops1 = t.cnt.ops;
	bytes1 = t.cnt.bytes;

	/* Round 0: everyone joins at once. */
	c0 = proc_cpu(ps[0].pid);
	t0 = now();
	tell(ps, np, 'J');
	WAIT_UNTIL(t.formed[0] == n);
	if (t.formed[0] != n) {
		why = "round 0 did not form";
		goto out;
	}
	form_s = t.t_formed[0] - t0;
	cpu_form = (proc_cpu(ps[0].pid) - c0) / form_s * 100;
	gather(ps, np, &t, n);
	row("rdzv-form", n, form_s, -1, t.cnt.ops - ops1,
	    (t.cnt.bytes - bytes1) / (double)n, cpu_form,
	    proc_hwm_mb(ps[0].pid));
	if (t.bad_ranks) {
		why = "round 0: wrong ranks";
		goto out;
	}

	/*
	 * Steady state: heartbeats and liveness only. The heartbeat interval
	 * grows past keep_alive x rate nodes (to n / rate, as rdzv.c does):
	 * one interval settles (every node has beaten once), and the window
	 * spans one interval at least.
	 */
	hb_s = opt.ka_interval;
	if (opt.hb_rate > 0 && n / opt.hb_rate > hb_s)
		hb_s = n / opt.hb_rate;
	w0 = now();
	while (now() < w0 + (hb_s > 0.5 ? hb_s : 0.5))
		drain(ps, np, &t, n, 100);
	gather(ps, np, &t, n);
	ops1 = t.cnt.hbops;
	c0 = proc_cpu(ps[0].pid);
	w0 = now();
	while (now() < w0 + (opt.steady > hb_s ? opt.steady : hb_s))
		drain(ps, np, &t, n, 100);
	c1 = proc_cpu(ps[0].pid);
	w0 = now() - w0;
	gather(ps, np, &t, n);
	row("rdzv-steady", n, w0, -1, (t.cnt.hbops - ops1) / w0, 0,
	    (c1 - c0) / w0 * 100, proc_hwm_mb(ps[0].pid));
	if (t.ended) {
		why = "the round ended in the steady state";
		goto out;
	}

	/* A node is lost: detected, and the round re-formed without it. */
	memset(t.seen, 0, (size_t)n);
	t.check_round = 1;
	ops1 = t.cnt.ops;
	bytes1 = t.cnt.bytes;
	c0 = proc_cpu(ps[0].pid);
	tk = now();
	kill(ps[1].pid, SIGKILL);
	waitpid(ps[1].pid, NULL, 0);
	ps[1].pid = 0;
	WAIT_UNTIL(t.formed[1] == n - 1);
	if (t.formed[1] != n - 1) {
		why = "round 1 did not form without the lost node";
		goto out;
	}
	c1 = proc_cpu(ps[0].pid);
	gather(ps, np, &t, n);
	row("rdzv-reform", n, t.t_formed[1] - tk, t.t_ended - tk,
	    t.cnt.ops - ops1, (t.cnt.bytes - bytes1) / (double)(n - 1),
	    (c1 - c0) / (t.t_formed[1] - tk) * 100, proc_hwm_mb(ps[0].pid));
	if (t.bad_ranks)
		why = "round 1: wrong ranks";
	else if (t.bad_kind)
		why = "a round ended for another reason than the lost node";
	else if (t.ended != n - 1)
		why = "not every survivor was told the round ended";
	else
		status = 0;
out:
	if (t.errors)
		why = "a node failed (see above)";
	if (why != NULL)
		fprintf(stderr,
			"rdzv_sim: rdzv N=%ld: %s (formed %ld then %ld, %ld "
			"told of an end)\n",
			n, why, t.formed[0], t.formed[1], t.ended);
	for (int i = 0; i < np; i++) {
		if (ps[i].pid > 0)
			kill(ps[i].pid, SIGKILL);
		if (ps[i].pid != 0)
			waitpid(ps[i].pid > 0 ? ps[i].pid : -ps[i].pid, NULL,
				0);
		close(ps[i].cmd);
		if (ps[i].rep >= 0)
			close(ps[i].rep);
	}
	free(t.seen);
	return status;
}

static int run_rdzv(void)
{
	int status = 0;

	for (int i = 0; i < opt.nsizes; i++) {
		if (opt.sizes[i] < 3) {
			fprintf(stderr, "rdzv_sim: rdzv needs N >= 3\n");
			return 2;
		}
		if (rdzv_job(opt.sizes[i]) != 0)
			status = 1;
	}
	return status;
}

/* ------------------------------------------------------------- main */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: rdzv_sim workers --crun PATH --floor PATH [options]\n"
		"       rdzv_sim rdzv [options]\n"
		"options: --sizes N[,N...]  --procs P (2)  --timeout S (60)\n"
		"         --gets G (3, workers)  --steady S (5, rdzv)\n"
		"         --keep-alive S (0.5)  --keep-alive-attempts K (3)\n"
		"         --heartbeat-rate R (2000: as crun's heartbeat_rate)\n"
		"         --header (print the CSV header first)\n");
}

static double num(const char *name, const char *v, double lo, double hi)
{
	char *end;
	double d;

	errno = 0;
	d = strtod(v, &end);
	if (errno || end == v || *end || d < lo || d > hi) {
		fprintf(stderr, "rdzv_sim: invalid %s \"%s\"\n", name, v);
		exit(2);
	}
	return d;
}

int main(int argc, char **argv)
{
	int rc;

	opt.procs = 2;
	opt.gets = 3;
	opt.timeout = 60;
	opt.steady = 5;
	opt.ka_interval = 0.5;
	opt.ka_attempts = 3;
	opt.hb_rate = 2000;
	opt.sizes[0] = 1024;
	opt.nsizes = 1;
	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	opt.mode = argv[1];
	for (int i = 2; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "--header")) {
			opt.header = 1;
			continue;
		}
		if (v == NULL) {
			fprintf(stderr, "rdzv_sim: option \"%s\" needs a value\n",
				a);
			return 2;
		}
		i++;
		if (!strcmp(a, "--crun"))
			opt.crun = v;
		else if (!strcmp(a, "--floor"))
			opt.floor = v;
		else if (!strcmp(a, "--procs"))
			opt.procs = (int)num(a, v, 1, MAX_PROCS);
		else if (!strcmp(a, "--gets"))
			opt.gets = (int)num(a, v, 0, 8);
		else if (!strcmp(a, "--timeout"))
			opt.timeout = num(a, v, 1, 3600);
		else if (!strcmp(a, "--steady"))
			opt.steady = num(a, v, 0.1, 600);
		else if (!strcmp(a, "--keep-alive"))
			opt.ka_interval = num(a, v, 0.01, 60);
		else if (!strcmp(a, "--heartbeat-rate"))
			opt.hb_rate = num(a, v, 0, 1e8);
		else if (!strcmp(a, "--keep-alive-attempts"))
			opt.ka_attempts = (int)num(a, v, 1, 100);
		else if (!strcmp(a, "--sizes")) {
			char *dup = strdup(v), *tok, *save = NULL;

			opt.nsizes = 0;
			for (tok = strtok_r(dup, ",", &save);
			     tok != NULL && opt.nsizes < 32;
			     tok = strtok_r(NULL, ",", &save))
				opt.sizes[opt.nsizes++] =
				    (long)num("--sizes", tok, 1, 1 << 20);
			free(dup);
		} else {
			fprintf(stderr, "rdzv_sim: unknown option \"%s\"\n", a);
			usage(stderr);
			return 2;
		}
	}
	signal(SIGPIPE, SIG_IGN);
	if (opt.header)
		printf("curve,N,seconds,floor_seconds,ops_per_round,"
		       "bytes_per_node,host_cpu_pct,host_rss_mb,load1\n");
	if (!strcmp(opt.mode, "workers"))
		rc = run_workers();
	else if (!strcmp(opt.mode, "rdzv"))
		rc = run_rdzv();
	else {
		fprintf(stderr, "rdzv_sim: unknown mode \"%s\"\n", opt.mode);
		usage(stderr);
		rc = 2;
	}
	return rc;
}

/*
 * relay_sim: the workers' store behind per-node relays, at 131072 ranks on
 * one machine.
 *
 * N simulated ranks, --per-node (8) to a node, do what init_process_group
 * does against the workers' store: connect, ADD(barrier, 1), WAIT[go], then
 * G GETs of shared keys (the rank whose ADD returns N SETs go). Each rank
 * connects to its own node's relay (src/store/store_relay.c, the code an agent
 * runs, many relays on one libuv loop per process), and the relays forward
 * over one connection each to one real workers' store (store_server_new, the
 * server `crun store` and the agent run, in a process of its own). One row
 * per N on stdout, curve "relay".
 *
 * The floor ("floor_seconds"): the same clients, same processes, same
 * connections and requests, against do-nothing servers (store_load
 * null-server), one per relay process, each serving the ranks of the nodes
 * that process would relay. So floor_seconds is what the clients and the
 * kernel's loopback TCP cost; the difference is what the relays and the
 * store add. The floor stores nothing, so its WAITs are answered at once
 * and its ADDs return 1: the clients check replies only against the real
 * store. --runs R alternates R relay rounds with R floor rounds, so that the
 * machine's drift falls on both alike, and reports the median of each.
 *
 * What is checked against the real store (any miss fails the run): every
 * rank finishes; the ADD results are 1..N, each exactly once (a map shared
 * by the client processes); no WAIT is answered before the rank that got N
 * sent the SET of go; every GET returns the value seeded; no relay reports
 * its upstream lost.
 *
 * Processes (RLIMIT_NOFILE is about 20000 here and cannot be raised): the
 * clients in --procs processes (default: one per 8192 ranks, at least 2),
 * the relays in --relay-procs processes (one per 1024 nodes, at least 2:
 * 1024 listeners, 8192 accepted connections and 1024 upstream ones), the
 * store in one (one connection per relay). Node i's relay listens on
 * 127.2.(i / 256).(i % 256), the store on 127.0.0.1 and the relays reach it
 * through 127.0.0.1..16 (one 4-tuple space each, as rdzv_sim's nodes do).
 *
 * Columns: rdzv_sim's nine (ops_per_round: requests the store ran during
 * the round; bytes_per_node: client wire bytes per rank; host_cpu_pct and
 * host_rss_mb: the store process), then store_conns (the store's peak
 * connections during the round), store_reqs_per_rank, store_cpu_us_per_rank,
 * relay_cpu_us_per_node (all relay processes' CPU over the round, per node)
 * and relay_rss_kb_per_node (their peak RSS summed, per node). A line on
 * stderr per N says where the CPU went (clients, relays, store, floor).
 *
 * Why this file is long: it is four programs that only make sense together
 * (the clients, the store's process, the relays' processes and the parent
 * that runs and checks them), and splitting them would need a bench library
 * for one benchmark.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uv.h>

#include "crun/err.h"
#include "crun/store.h"
#include "crun/store_relay.h"

#include "crun/banned.h"

#define MAX_EVENTS 1024
#define PER_SOURCE 4096 /* client connections per loopback source address */
#define MAX_PROCS 64	/* client or relay processes */
#define WINDOW 3072	/* connects in flight, all client processes together */
#define UP_ADDRS 16	/* destination addresses of the store for relays */
#define MAX_RUNS 9
#define SHARED_VALUE "tcp://10.0.0.1:29500/gloo/v1.13"

struct opts {
	const char *floor;
	long sizes[32];
	int nsizes;
	int procs, relay_procs, per_node, gets, runs;
	double timeout;
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
	fprintf(stderr, "relay_sim: %s\n", msg);
	exit(1);
}

/* Soft RLIMIT_NOFILE to the hard one; 0 if need fit, -1 (said) if not. */
static int nofile_need(long need, const char *who)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return -1;
	rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
	if ((long)rl.rlim_cur >= need)
		return 0;
	fprintf(stderr,
		"relay_sim: skipped: %s needs %ld descriptors, RLIMIT_NOFILE "
		"allows %llu (more processes: --procs, --relay-procs)\n",
		who, need, (unsigned long long)rl.rlim_cur);
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

/* Peak resident set of pid in KB, or -1. */
static double proc_hwm_kb(pid_t pid)
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
	return (double)kb;
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

/* A free TCP port: ask the kernel for one and give it back. */
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

/* 127.0.0.0/8 + host, port. */
static struct sockaddr_in loop_addr(uint32_t host, int port)
{
	struct sockaddr_in a;

	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_port = htons((uint16_t)port);
	a.sin_addr.s_addr = htonl((127u << 24) + host);
	return a;
}

/* Node i's relay address (127.2.x.y) and floor server k's (127.3.0.k+1). */
static uint32_t relay_host(long node)
{
	return (2u << 16) + (uint32_t)node;
}

static uint32_t floor_host(int k)
{
	return (3u << 16) + 1 + (uint32_t)k;
}

static void host_str(uint32_t host, char *out, size_t len)
{
	snprintf(out, len, "127.%u.%u.%u", (host >> 16) & 255,
		 (host >> 8) & 255, host & 255);
}

/* Wait (bounded) until something accepts on 127/8 + host : port. */
static int wait_listening(uint32_t host, int port, double secs)
{
	double end = now() + secs;

	while (now() < end) {
		struct sockaddr_in a = loop_addr(host, port);
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

/* Start argv[0] with stdout and stderr to /dev/null. */
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

static int read_full(int fd, void *p, size_t n, int ms)
{
	struct pollfd pf = {.fd = fd, .events = POLLIN};
	size_t got = 0;

	while (got < n) {
		ssize_t r;

		if (poll(&pf, 1, ms) <= 0)
			return -1;
		r = read(fd, (char *)p + got, n - got);
		if (r <= 0)
			return -1;
		got += (size_t)r;
	}
	return 0;
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

/* G0 opcodes (PyTorch's TCPStore wire protocol, as 1.13 speaks it). */
enum { OP_SET = 0, OP_GET = 2, OP_ADD = 3, OP_WAIT = 5 };

/* ------------------------------------------------------------- clients */

enum cstate { C_CONNECTING, C_ADD, C_WAIT, C_GET, C_DONE, C_FAILED };

struct client {
	int fd;
	unsigned char state, gets;
	unsigned short inlen;
	unsigned char in[96];
};

/* What a client process reports when it is done. */
struct creport {
	long done, failed, bad;
	double t_last;	   /* the last of its ranks through */
	double t_set;	   /* when its rank that got N sent SET go (or 0) */
	double t_wait_min; /* its earliest WAIT reply */
	double bytes, ops;
	int first_errno;
	char why[96]; /* the first wrong reply */
};

struct fleet {
	long n, first, count; /* ranks in all, our slice */
	int nsrc;
	int port;
	int nfloor; /* 0: ranks go to their node's relay; else floor servers */
	unsigned char *seen; /* shared: ADD results seen, per value - 1 */
	long connecting;
	struct client *c;
	struct buf add, wait, setwait, get[8];
	struct creport rep;
};

static void c_close(struct fleet *f, struct client *c, int state)
{
	c->state = (unsigned char)state;
	close(c->fd);
	c->fd = -1;
	if (state == C_FAILED)
		f->rep.failed++;
}

static void c_fail(struct fleet *f, struct client *c, int err)
{
	if (c->state == C_CONNECTING)
		f->connecting--;
	if (!f->rep.first_errno)
		f->rep.first_errno = err ? err : ECONNRESET;
	c_close(f, c, C_FAILED);
}

/* A reply that is not what the real store must answer. */
static void c_bad(struct fleet *f, struct client *c, const char *why)
{
	if (f->rep.bad++ == 0)
		snprintf(f->rep.why, sizeof(f->rep.why), "%s", why);
	c_close(f, c, C_FAILED);
}

static void c_send(struct fleet *f, struct client *c, const struct buf *b)
{
	ssize_t w = write(c->fd, b->p, b->len);

	if (w != (ssize_t)b->len) {
		/* A connected socket always takes a frame this small. */
		c_fail(f, c, w < 0 ? errno : EAGAIN);
		return;
	}
	f->rep.bytes += (double)b->len;
	f->rep.ops++;
}

/* The ADD reply: the barrier's count after this rank's 1. */
static void c_on_add(struct fleet *f, struct client *c)
{
	uint64_t v = get_u64(c->in);

	c->state = C_WAIT;
	c->inlen = 0;
	if (f->nfloor) {
		c_send(f, c, &f->wait);
		return;
	}
	if (v < 1 || v > (uint64_t)f->n)
		return c_bad(f, c, "an ADD result outside 1..N");
	if (__atomic_fetch_add(&f->seen[v - 1], 1, __ATOMIC_RELAXED) != 0)
		return c_bad(f, c, "an ADD result given twice");
	if (v != (uint64_t)f->n)
		return c_send(f, c, &f->wait);
	/* The rank that completes the barrier opens it. */
	f->rep.t_set = now();
	c_send(f, c, &f->setwait);
	if (c->state == C_WAIT)
		f->rep.ops++;
}

static void c_done(struct fleet *f, struct client *c)
{
	f->rep.done++;
	f->rep.t_last = now();
	c_close(f, c, C_DONE);
}

/* Every whole reply in c->in, in the order the requests went. */
static void c_replies(struct fleet *f, struct client *c)
{
	size_t need;

	for (;;) {
		switch (c->state) {
		case C_ADD:
			if (c->inlen < 8)
				return;
			c_on_add(f, c);
			break;
		case C_WAIT: {
			double t = now();

			if (c->inlen < 1)
				return;
			if (c->in[0] != 0)
				return c_bad(f, c,
					     "a WAIT reply that is not 0");
			if (f->rep.t_wait_min == 0 || t < f->rep.t_wait_min)
				f->rep.t_wait_min = t;
			c->inlen = 0;
			if (opt.gets == 0)
				return c_done(f, c);
			c->state = C_GET;
			c->gets = 0;
			c_send(f, c, &f->get[0]);
			break;
		}
		case C_GET:
			if (c->inlen < 8)
				return;
			need = 8 + (size_t)get_u64(c->in);
			if (need > sizeof(c->in))
				return c_bad(f, c, "a GET reply too long");
			if (c->inlen < need)
				return;
			if (!f->nfloor &&
			    (need - 8 != strlen(SHARED_VALUE) ||
			     memcmp(c->in + 8, SHARED_VALUE, need - 8) != 0))
				return c_bad(f, c,
					     "a GET reply of another value");
			c->inlen = 0;
			if (++c->gets == opt.gets)
				return c_done(f, c);
			c_send(f, c, &f->get[c->gets]);
			break;
		default:
			return;
		}
		/* One reply at a time is outstanding: nothing can follow it. */
		if (c->inlen == 0 || c->state >= C_DONE)
			return;
	}
}

static void c_event(struct fleet *f, int ep, struct client *c, uint32_t ev)
{
	ssize_t r;

	if (c->state == C_CONNECTING) {
		int err = 0;
		socklen_t len = sizeof(err);
		struct epoll_event e = {.events = EPOLLIN, .data.ptr = c};

		getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
		if (err || (ev & (EPOLLERR | EPOLLHUP)))
			return c_fail(f, c, err);
		if (!(ev & EPOLLOUT))
			return;
		f->connecting--;
		epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &e);
		c->state = C_ADD;
		return c_send(f, c, &f->add);
	}
	if (c->state >= C_DONE)
		return;
	r = read(c->fd, c->in + c->inlen, sizeof(c->in) - c->inlen);
	if (r < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (r <= 0)
		return c_fail(f, c, r == 0 ? 0 : errno);
	f->rep.bytes += (double)r;
	c->inlen = (unsigned short)(c->inlen + r);
	c_replies(f, c);
}

static void c_connect(struct fleet *f, int ep, struct client *c, long rank)
{
	long node = rank / opt.per_node;
	struct sockaddr_in dst = loop_addr(
	    f->nfloor ? floor_host((int)(node % f->nfloor)) : relay_host(node),
	    f->port);
	struct sockaddr_in src = loop_addr(1 + (uint32_t)(rank % f->nsrc), 0);
	struct epoll_event e = {.events = EPOLLIN | EPOLLOUT, .data.ptr = c};
	int one = 1;

	c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (c->fd < 0) {
		c->state = C_FAILED;
		f->rep.failed++;
		if (!f->rep.first_errno)
			f->rep.first_errno = errno;
		return;
	}
	setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(c->fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one,
		   sizeof(one));
	c->state = C_CONNECTING;
	f->connecting++;
	if (bind(c->fd, (struct sockaddr *)&src, sizeof(src)) != 0 ||
	    (connect(c->fd, (struct sockaddr *)&dst, sizeof(dst)) != 0 &&
	     errno != EINPROGRESS) ||
	    epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &e) != 0)
		c_fail(f, c, errno);
}

/* One client process: its slice of ranks, from "go" until all are done. */
static void c_run(struct fleet *f, int cmd, int rep)
{
	struct epoll_event evs[MAX_EVENTS];
	long next = 0, window = WINDOW / opt.procs;
	double deadline;
	char go;
	int ep = epoll_create1(EPOLL_CLOEXEC);

	/* Named per role, for top and perf. */
	prctl(PR_SET_NAME, "rsim-client");
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
		 * A window of connects in flight, all processes together
		 * below a listener's accept backlog (somaxconn, 4096 here):
		 * past it the kernel drops SYNs and each costs a retransmit
		 * of 1 s or more (the floor's servers hold many nodes each).
		 */
		if (stop - next > window - f->connecting)
			stop = next + (window > f->connecting
					   ? window - f->connecting
					   : 0);
		for (; next < stop; next++)
			c_connect(f, ep, &f->c[next], f->first + next);
		/* Spin only while there are connects to start: 16 spinning
		 * processes would take the cores from the servers. */
		n = epoll_wait(ep, evs, MAX_EVENTS,
			       next < f->count && f->connecting < window ? 0
									 : 20);
		for (int i = 0; i < n; i++)
			c_event(f, ep, evs[i].data.ptr, evs[i].events);
	}
	if (write(rep, &f->rep, sizeof(f->rep)) != sizeof(f->rep))
		_exit(3);
	_exit(0);
}

/* The parent's view of one forked child. */
struct child {
	pid_t pid;
	int cmd, rep;
};

static int fork_child(struct child *ch)
{
	int cmd[2], rep[2];

	ch->pid = -1;
	if (pipe(cmd))
		return -1;
	if (pipe(rep)) {
		close(cmd[0]);
		close(cmd[1]);
		return -1;
	}
	ch->pid = fork();
	if (ch->pid == 0) {
		close(cmd[1]);
		close(rep[0]);
		ch->cmd = cmd[0];
		ch->rep = rep[1];
		return 0;
	}
	close(cmd[0]);
	close(rep[1]);
	ch->cmd = cmd[1];
	ch->rep = rep[0];
	return ch->pid < 0 ? -1 : 1;
}

static void child_end(struct child *ch)
{
	reap(ch->pid);
	ch->pid = -1;
	close(ch->cmd);
	close(ch->rep);
}

/* The totals of one client round. */
struct round {
	double secs, ops, bytes_per_rank, cpu;
	double open_secs; /* to the SET of go: every rank's ADD answered */
	struct creport tot;
};

/*
 * Drive N ranks at port: their relays (nfloor 0) or nfloor floor servers.
 * Returns 0, or -1 with the reason on stderr.
 */
static int c_round(long n, int port, int nfloor, unsigned char *seen,
		   struct round *out)
{
	struct fleet f;
	struct child ch[MAX_PROCS];
	struct creport r;
	char k[32];
	double t0;
	int rc = 0;

	memset(&f, 0, sizeof(f));
	memset(out, 0, sizeof(*out));
	f.n = n;
	f.port = port;
	f.nfloor = nfloor;
	f.seen = seen;
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
	for (int i = 0; i < opt.gets; i++) {
		put_u8(&f.get[i], OP_GET);
		snprintf(k, sizeof(k), "sim/shared/%d", i);
		put_str(&f.get[i], k);
	}
	for (int p = 0; p < opt.procs; p++) {
		/* Whole nodes to a process. */
		long nodes = n / opt.per_node;

		f.first = nodes * p / opt.procs * opt.per_node;
		f.count = nodes * (p + 1) / opt.procs * opt.per_node - f.first;
		switch (fork_child(&ch[p])) {
		case 0:
			c_run(&f, ch[p].cmd, ch[p].rep);
			break;
		case -1:
			die("fork");
		}
	}
	t0 = now();
	for (int p = 0; p < opt.procs; p++)
		if (write(ch[p].cmd, "g", 1) != 1)
			rc = -1;
	for (int p = 0; p < opt.procs; p++) {
		if (read_full(ch[p].rep, &r, sizeof(r),
			      (int)(opt.timeout * 1000) + 10000) != 0) {
			rc = -1;
			continue;
		}
		out->tot.done += r.done;
		out->tot.failed += r.failed;
		out->tot.bad += r.bad;
		out->tot.bytes += r.bytes;
		out->tot.ops += r.ops;
		if (r.t_last > out->tot.t_last)
			out->tot.t_last = r.t_last;
		if (r.t_set > 0)
			out->tot.t_set = r.t_set;
		if (r.t_wait_min > 0 && (out->tot.t_wait_min == 0 ||
					 r.t_wait_min < out->tot.t_wait_min))
			out->tot.t_wait_min = r.t_wait_min;
		if (r.first_errno && !out->tot.first_errno)
			out->tot.first_errno = r.first_errno;
		if (r.bad && !out->tot.why[0])
			memcpy(out->tot.why, r.why, sizeof(r.why));
	}
	for (int p = 0; p < opt.procs; p++) {
		double c = proc_cpu(ch[p].pid);

		out->cpu += c > 0 ? c : 0;
		waitpid(ch[p].pid, NULL, 0);
		close(ch[p].cmd);
		close(ch[p].rep);
	}
	if (rc == 0 && (out->tot.done != n || out->tot.bad)) {
		fprintf(stderr,
			"relay_sim: N=%ld%s: %ld done, %ld failed (%s)%s%s\n",
			n, nfloor ? " floor" : "", out->tot.done,
			out->tot.failed,
			out->tot.first_errno ? strerror(out->tot.first_errno)
			: out->tot.bad	     ? "wrong replies"
					     : "timed out",
			out->tot.bad ? ": " : "", out->tot.why);
		rc = -1;
	}
	out->secs = out->tot.t_last > t0 ? out->tot.t_last - t0 : 0;
	out->open_secs = out->tot.t_set > t0 ? out->tot.t_set - t0 : 0;
	out->ops = out->tot.ops;
	out->bytes_per_rank = out->tot.bytes / (double)n;
	return rc;
}

/* --------------------------------------------------------------- store */

/* What the store process answers to 'S'. */
struct store_report {
	int port;
	uint64_t reqs;
	size_t conns, peak;
};

struct store_proc {
	uv_loop_t loop;
	uv_poll_t cmd;
	uv_timer_t tick;
	struct crun_store_server *srv;
	struct child *ch;
	size_t peak;
};

static uint64_t store_reqs(const struct crun_store_server *srv)
{
	const char *name;
	uint64_t sum = 0, v;

	for (int i = 0;; i++) {
		v = store_server_ops(srv, i, &name);
		if (name == NULL)
			return sum;
		sum += v;
	}
}

static void store_report(struct store_proc *sp)
{
	struct store_report r = {0};

	r.port = store_server_port(sp->srv);
	r.reqs = store_reqs(sp->srv);
	r.conns = store_server_nconns(sp->srv);
	r.peak = sp->peak > r.conns ? sp->peak : r.conns;
	if (write(sp->ch->rep, &r, sizeof(r)) != sizeof(r))
		_exit(4);
}

/* The peak connection count, sampled (nconns is O(1)). */
static void store_on_tick(uv_timer_t *t)
{
	struct store_proc *sp = t->data;
	size_t c = store_server_nconns(sp->srv);

	if (c > sp->peak)
		sp->peak = c;
}

static void store_on_cmd(uv_poll_t *h, int status, int events)
{
	struct store_proc *sp = h->data;
	char c;

	(void)status;
	(void)events;
	if (read(sp->ch->cmd, &c, 1) != 1 || c != 'S')
		_exit(0);
	store_report(sp);
}

/* The store's process: one server on 127.0.0.1 and 0.0.0.0, until killed. */
static void store_run(struct child *ch, long nodes)
{
	struct crun_store_limits lim;
	struct store_proc sp;

	memset(&sp, 0, sizeof(sp));
	sp.ch = ch;
	prctl(PR_SET_NAME, "rsim-store");
	signal(SIGPIPE, SIG_IGN);
	uv_loop_init(&sp.loop);
	store_limits_default(&lim);
	lim.max_conns = (unsigned)nodes + 1024;
	if (store_server_new(&sp.loop, "0.0.0.0", 0, &lim, &sp.srv) != 0)
		_exit(3);
	store_server_set_quiet(sp.srv, 1);
	uv_timer_init(&sp.loop, &sp.tick);
	sp.tick.data = &sp;
	uv_timer_start(&sp.tick, store_on_tick, 5, 5);
	uv_poll_init(&sp.loop, &sp.cmd, ch->cmd);
	sp.cmd.data = &sp;
	uv_poll_start(&sp.cmd, UV_READABLE, store_on_cmd);
	store_report(&sp);
	uv_run(&sp.loop, UV_RUN_DEFAULT);
	_exit(0);
}

static int store_ask(struct child *ch, struct store_report *r)
{
	if (write(ch->cmd, "S", 1) != 1)
		return -1;
	return read_full(ch->rep, r, sizeof(*r), 10000);
}

/* Set the shared keys the ranks read (rank 0's MASTER-side state). */
static int store_seed(int port)
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
		put_str(&b, SHARED_VALUE);
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

/* -------------------------------------------------------------- relays */

/* What a relay process says: once its relays are up, then to each 'S'. */
struct relay_report {
	long created, lost;
	int first_err;
	uint64_t clients, requests_in, requests_up;
};

struct relay_proc {
	uv_loop_t loop;
	uv_poll_t cmd;
	struct child *ch;
	struct crun_store_relay **r;
	long count;
	struct relay_report rep;
};

static void relay_on_lost(struct crun_store_relay *r, int status, void *data)
{
	struct relay_proc *rp = data;

	(void)r;
	if (rp->rep.lost++ == 0)
		rp->rep.first_err = status;
}

static void relay_report(struct relay_proc *rp)
{
	struct store_relay_stats st;

	rp->rep.clients = rp->rep.requests_in = rp->rep.requests_up = 0;
	for (long i = 0; i < rp->count; i++) {
		if (rp->r[i] == NULL)
			continue;
		store_relay_stats(rp->r[i], &st);
		rp->rep.clients += st.clients;
		rp->rep.requests_in += st.requests_in;
		rp->rep.requests_up += st.requests_up;
	}
	if (write(rp->ch->rep, &rp->rep, sizeof(rp->rep)) != sizeof(rp->rep))
		_exit(4);
}

static void relay_on_cmd(uv_poll_t *h, int status, int events)
{
	struct relay_proc *rp = h->data;
	char c;

	(void)status;
	(void)events;
	if (read(rp->ch->cmd, &c, 1) != 1 || c != 'S')
		_exit(0);
	relay_report(rp);
}

/* A relay process: nodes first.. first + count - 1 on one loop. */
static void relay_run(struct child *ch, long first, long count, int up_port,
		      int listen_port)
{
	struct relay_proc rp;
	char up[32], lh[32];

	memset(&rp, 0, sizeof(rp));
	rp.ch = ch;
	rp.count = count;
	prctl(PR_SET_NAME, "rsim-relay");
	signal(SIGPIPE, SIG_IGN);
	uv_loop_init(&rp.loop);
	rp.r = calloc((size_t)count, sizeof(*rp.r));
	if (rp.r == NULL)
		_exit(3);
	for (long i = 0; i < count; i++) {
		struct store_relay_opts o;
		long node = first + i;
		int rc;

		memset(&o, 0, sizeof(o));
		host_str((uint32_t)(1 + node % UP_ADDRS), up, sizeof(up));
		host_str(relay_host(node), lh, sizeof(lh));
		o.up_host = up;
		o.up_port = up_port;
		o.listen_host = lh;
		o.listen_port = listen_port;
		o.listen_fd = -1;
		rc =
		    store_relay_new(&rp.loop, &o, relay_on_lost, &rp, &rp.r[i]);
		if (rc != 0) {
			rp.r[i] = NULL;
			if (!rp.rep.first_err)
				rp.rep.first_err = rc;
			continue;
		}
		rp.rep.created++;
	}
	uv_poll_init(&rp.loop, &rp.cmd, ch->cmd);
	rp.cmd.data = &rp;
	uv_poll_start(&rp.cmd, UV_READABLE, relay_on_cmd);
	relay_report(&rp);
	uv_run(&rp.loop, UV_RUN_DEFAULT);
	_exit(0);
}

/* The relay processes' stats summed; -1 if one does not answer. */
static int relays_ask(struct child *ch, int np, struct relay_report *sum)
{
	struct relay_report r;

	memset(sum, 0, sizeof(*sum));
	for (int p = 0; p < np; p++) {
		if (write(ch[p].cmd, "S", 1) != 1 ||
		    read_full(ch[p].rep, &r, sizeof(r), 10000) != 0)
			return -1;
		sum->created += r.created;
		sum->lost += r.lost;
		if (r.first_err && !sum->first_err)
			sum->first_err = r.first_err;
		sum->clients += r.clients;
		sum->requests_in += r.requests_in;
		sum->requests_up += r.requests_up;
	}
	return 0;
}

/* ---------------------------------------------------------------- runs */

/* Everything measured of one N with relays. */
struct relay_run {
	struct round cr;
	struct store_report s0, s1;
	struct relay_report rr;
	double store_cpu, relay_cpu, store_rss_kb, relay_rss_kb;
};

/*
 * Wait (bounded) until the store holds one connection per relay and their
 * handshakes are done (its request count still for 100 ms), so that what
 * the round counts is the ranks' requests.
 */
static void relays_settle(struct child *store, long nodes)
{
	struct store_report r, last;
	double end = now() + 20;

	memset(&last, 0, sizeof(last));
	while (now() < end) {
		if (store_ask(store, &r) != 0)
			return;
		if (r.conns >= (size_t)nodes && r.reqs == last.reqs)
			return;
		last = r;
		usleep(100000);
	}
	fprintf(stderr,
		"relay_sim: %zu of %ld relays connected upstream before the "
		"round (the rest connect during it)\n",
		r.conns, nodes);
}

static int relay_measure(long n, struct relay_run *m)
{
	long nodes = n / opt.per_node;
	struct child store, rel[MAX_PROCS];
	unsigned char *seen;
	int lport = pick_port(), rc = -1, nrel = 0;
	double c0 = 0;
	const char *why = NULL;

	memset(m, 0, sizeof(*m));
	store.pid = -1;
	seen = mmap(NULL, (size_t)n, PROT_READ | PROT_WRITE,
		    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (seen == MAP_FAILED)
		die("mmap");
	switch (fork_child(&store)) {
	case 0:
		store_run(&store, nodes);
		break;
	case -1:
		die("fork");
	}
	if (read_full(store.rep, &m->s0, sizeof(m->s0), 10000) != 0) {
		why = "the store did not open";
		goto out;
	}
	if (opt.gets > 0 && store_seed(m->s0.port) != 0) {
		why = "cannot seed the shared keys";
		goto out;
	}
	for (; nrel < opt.relay_procs; nrel++) {
		long first = nodes * nrel / opt.relay_procs;
		long cnt = nodes * (nrel + 1) / opt.relay_procs - first;

		switch (fork_child(&rel[nrel])) {
		case 0:
			relay_run(&rel[nrel], first, cnt, m->s0.port, lport);
			break;
		case -1:
			die("fork");
		}
		if (read_full(rel[nrel].rep, &m->rr, sizeof(m->rr), 30000) !=
			0 ||
		    m->rr.created != cnt) {
			fprintf(stderr, "relay_sim: relays: %s\n",
				crun_strerror(m->rr.first_err));
			why = "the relays did not open";
			nrel++;
			goto out;
		}
	}
	relays_settle(&store, nodes);
	if (store_ask(&store, &m->s0) != 0) {
		why = "the store did not answer";
		goto out;
	}
	m->store_cpu = proc_cpu(store.pid);
	for (int p = 0; p < nrel; p++)
		c0 += proc_cpu(rel[p].pid);
	if (c_round(n, lport, 0, seen, &m->cr) != 0)
		why = "the ranks did not all get through (see above)";
	m->store_cpu = proc_cpu(store.pid) - m->store_cpu;
	for (int p = 0; p < nrel; p++) {
		m->relay_cpu += proc_cpu(rel[p].pid);
		m->relay_rss_kb += proc_hwm_kb(rel[p].pid);
	}
	m->relay_cpu -= c0;
	m->store_rss_kb = proc_hwm_kb(store.pid);
	if (store_ask(&store, &m->s1) != 0 || relays_ask(rel, nrel, &m->rr)) {
		why = "the store or a relay did not answer";
		goto out;
	}
	if (why != NULL)
		goto out;
	for (long v = 0; v < n; v++)
		if (seen[v] != 1) {
			why = "an ADD result was not given exactly once";
			goto out;
		}
	if (m->cr.tot.t_set == 0 || m->cr.tot.t_wait_min < m->cr.tot.t_set)
		why = "a WAIT was answered before go was set";
	else if (m->rr.lost)
		why = "a relay lost its upstream";
	else
		rc = 0;
out:
	if (why != NULL)
		fprintf(stderr, "relay_sim: relay N=%ld: %s\n", n, why);
	for (int p = 0; p < nrel; p++)
		child_end(&rel[p]);
	if (store.pid > 0)
		child_end(&store);
	munmap(seen, (size_t)n);
	return rc;
}

/* The floor: the same clients against relay_procs do-nothing servers. */
static int floor_measure(long n, struct round *fr, double *server_cpu)
{
	pid_t pids[MAX_PROCS];
	int port = pick_port(), rc = 0;
	char ps[16], hs[32];

	snprintf(ps, sizeof(ps), "%d", port);
	*server_cpu = 0;
	for (int k = 0; k < opt.relay_procs; k++) {
		host_str(floor_host(k), hs, sizeof(hs));
		{
			const char *av[] = {opt.floor, "null-server", "--host",
					    hs,	       "--port",      ps,
					    NULL};
			pids[k] = spawn(av);
		}
		if (wait_listening(floor_host(k), port, 10) != 0) {
			for (int j = 0; j <= k; j++)
				reap(pids[j]);
			die("a floor server did not come up");
		}
	}
	if (c_round(n, port, opt.relay_procs, NULL, fr) != 0)
		rc = -1;
	for (int k = 0; k < opt.relay_procs; k++) {
		double c = proc_cpu(pids[k]);

		*server_cpu += c > 0 ? c : 0;
		reap(pids[k]);
	}
	return rc;
}

/* The index of the median of v[0..n-1] (n odd: the middle one). */
static int median_at(const double *v, int n)
{
	for (int i = 0; i < n; i++) {
		int below = 0, same = 0;

		for (int j = 0; j < n; j++) {
			below += v[j] < v[i];
			same += v[j] == v[i] && j < i;
		}
		if (below + same == n / 2)
			return i;
	}
	return 0;
}

/*
 * One N: --runs rounds through relays, each followed by a floor round (so
 * that the machine's drift falls on both alike); the row is the median
 * relay round, beside the median floor.
 */
static int run_size(long n)
{
	long nodes = n / opt.per_node;
	struct relay_run m[MAX_RUNS], *mm;
	struct round fr;
	double secs[MAX_RUNS], fsecs[MAX_RUNS], fcpu, req;
	int status = 0;

	if (nofile_need(n / opt.procs + 256, "a client process") ||
	    nofile_need((nodes / opt.relay_procs + 1) * (opt.per_node + 2) +
			    256,
			"a relay process") ||
	    nofile_need(nodes + 256, "the store (one per relay)"))
		return 0;
	for (int i = 0; i < opt.runs && status == 0; i++) {
		if (relay_measure(n, &m[i]) != 0)
			status = 1;
		if (floor_measure(n, &fr, &fcpu) != 0)
			status = 1;
		secs[i] = m[i].cr.secs;
		fsecs[i] = fr.secs;
		fprintf(stderr,
			"relay_sim: N=%ld (%ld nodes, run %d): %.3f s (barrier "
			"open after %.3f), floor %.3f s; CPU s: clients %.2f, "
			"relays %.2f, store "
			"%.2f; floor: clients %.2f, servers %.2f; requests: "
			"relays in %llu, up %llu, store ran %llu; load %.2f\n",
			n, nodes, i + 1, m[i].cr.secs, m[i].cr.open_secs,
			fr.secs, m[i].cr.cpu, m[i].relay_cpu, m[i].store_cpu,
			fr.cpu, fcpu, (unsigned long long)m[i].rr.requests_in,
			(unsigned long long)m[i].rr.requests_up,
			(unsigned long long)(m[i].s1.reqs - m[i].s0.reqs),
			load1());
	}
	if (status)
		return status;
	mm = &m[median_at(secs, opt.runs)];
	req = (double)(mm->s1.reqs - mm->s0.reqs);
	printf(
	    "relay,%ld,%.3f,%.3f,%.0f,%.0f,%.1f,%.1f,%.2f,%zu,%.4f,%.2f,%.1f,"
	    "%.1f\n",
	    n, mm->cr.secs, fsecs[median_at(fsecs, opt.runs)], req,
	    mm->cr.bytes_per_rank, mm->store_cpu / mm->cr.secs * 100,
	    mm->store_rss_kb / 1024, load1(), mm->s1.peak, req / (double)n,
	    mm->store_cpu * 1e6 / (double)n,
	    mm->relay_cpu * 1e6 / (double)nodes,
	    mm->relay_rss_kb / (double)nodes);
	fflush(stdout);
	return 0;
}

/* ------------------------------------------------------------- main */

static void usage(FILE *f)
{
	fprintf(
	    f, "usage: relay_sim --floor PATH [options]\n"
	       "options: --sizes N[,N...] (ranks; 131072)  --per-node R (8)\n"
	       "         --procs P (client processes; one per 8192 ranks)\n"
	       "         --relay-procs P (one per 1024 nodes)  --gets G (3)\n"
	       "         --timeout S (120)  --header (the CSV header first)\n");
}

static double num(const char *name, const char *v, double lo, double hi)
{
	char *end;
	double d;

	errno = 0;
	d = strtod(v, &end);
	if (errno || end == v || *end || d < lo || d > hi) {
		fprintf(stderr, "relay_sim: invalid %s \"%s\"\n", name, v);
		exit(2);
	}
	return d;
}

static void parse(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "--header")) {
			opt.header = 1;
			continue;
		}
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			exit(0);
		}
		if (v == NULL) {
			fprintf(stderr, "relay_sim: \"%s\" needs a value\n", a);
			exit(2);
		}
		i++;
		if (!strcmp(a, "--floor"))
			opt.floor = v;
		else if (!strcmp(a, "--procs"))
			opt.procs = (int)num(a, v, 1, MAX_PROCS);
		else if (!strcmp(a, "--relay-procs"))
			opt.relay_procs = (int)num(a, v, 1, MAX_PROCS);
		else if (!strcmp(a, "--per-node"))
			opt.per_node = (int)num(a, v, 1, 1024);
		else if (!strcmp(a, "--runs"))
			opt.runs = (int)num(a, v, 1, MAX_RUNS);
		else if (!strcmp(a, "--gets"))
			opt.gets = (int)num(a, v, 0, 8);
		else if (!strcmp(a, "--timeout"))
			opt.timeout = num(a, v, 1, 3600);
		else if (!strcmp(a, "--sizes")) {
			char *dup = strdup(v), *tok, *save = NULL;

			opt.nsizes = 0;
			for (tok = strtok_r(dup, ",", &save);
			     tok != NULL && opt.nsizes < 32;
			     tok = strtok_r(NULL, ",", &save))
				opt.sizes[opt.nsizes++] =
				    (long)num("--sizes", tok, 2, 1 << 22);
			free(dup);
		} else {
			fprintf(stderr, "relay_sim: unknown option \"%s\"\n",
				a);
			usage(stderr);
			exit(2);
		}
	}
}

int main(int argc, char **argv)
{
	int status = 0, procs, relay_procs;

	opt.per_node = 8;
	opt.gets = 3;
	opt.runs = 1;
	opt.timeout = 120;
	opt.sizes[0] = 131072;
	opt.nsizes = 1;
	parse(argc, argv);
	if (opt.floor == NULL)
		die("--floor PATH (store_load) is needed");
	signal(SIGPIPE, SIG_IGN);
	if (opt.header)
		printf("curve,N,seconds,floor_seconds,ops_per_round,"
		       "bytes_per_node,host_cpu_pct,host_rss_mb,load1,"
		       "store_conns,store_reqs_per_rank,store_cpu_us_per_rank,"
		       "relay_cpu_us_per_node,relay_rss_kb_per_node\n");
	procs = opt.procs;
	relay_procs = opt.relay_procs;
	for (int i = 0; i < opt.nsizes; i++) {
		long n = opt.sizes[i], nodes = n / opt.per_node;

		if (n % opt.per_node) {
			fprintf(stderr, "relay_sim: N=%ld is not whole nodes\n",
				n);
			return 2;
		}
		opt.procs = procs ? procs : (int)((n + 8191) / 8192);
		opt.procs = opt.procs < 2 ? 2 : opt.procs;
		opt.relay_procs =
		    relay_procs ? relay_procs : (int)((nodes + 1023) / 1024);
		opt.relay_procs = opt.relay_procs < 2 ? 2 : opt.relay_procs;
		if (opt.procs > MAX_PROCS || opt.relay_procs > MAX_PROCS) {
			fprintf(stderr,
				"relay_sim: N=%ld: too many processes\n", n);
			return 2;
		}
		if (run_size(n) != 0)
			status = 1;
	}
	return status;
}

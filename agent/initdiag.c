/*
 * A stuck process-group init, named (see initdiag.h).
 *
 * Happy path: the round's workers start; every agent, on one timer (a
 * quarter of --init_warn_after, between 0.1 and 1 s), walks /proc/<pid>/fd
 * of each worker and its descendants for socket inodes and looks them up in
 * /proc/net/tcp and tcp6: a worker holding an ESTABLISHED connection to
 * MASTER_ADDR:MASTER_PORT has connected (for good: the bit stays), one with
 * a SYN_SENT socket there is trying. The sockets are looked up with one
 * sock_diag dump per address family that the kernel filters to the store's
 * port, so the work per tick is the workers' own connections to it, however
 * many unrelated sockets the host has (the host's whole /proc/net/tcp was
 * 300 ms per 8 s with 19k of them); only where sock_diag is refused are the
 * tables read, at most SCAN_MAX_ROWS rows each. Each agent of a multi-node
 * round publishes the result as a small record under "<round>/diag/<group
 * rank>" in the rendezvous store when its workers start and whenever it
 * changes; an agent whose ranks have all connected stops scanning. Group rank 0
 * (the node hosting the workers' store) counts from the first rank it sees
 * reach the store (so a slow `import torch` never reads as a missing rank):
 * after
 * --init_warn_after, 2x, 4x ... it reads every node's record and prints one
 * line per node with ranks missing, adding what the store itself sees (its
 * connections by peer address, PyTorch's store-based barrier count); after
 * the first warning it reads every tick until every rank has connected
 * (or the barrier counts the whole world), says so once, and stops.
 *
 * Failure modes: a record that is missing or does not parse leaves its
 * node's ranks "with no report" (the node named by its address when it is
 * the only one, with the store's count of connections from it); a read
 * waits at most read_ms for its key; a store address that does not resolve
 * is matched by port alone. Nothing is said while no rank anywhere has
 * touched the store (a script that never calls init_process_group), and
 * nothing at all on a healthy run. Work per tick is bounded: at most
 * SCAN_MAX_PIDS processes per worker, SCAN_MAX_INODES sockets and
 * SCAN_MAX_DIAG_BYTES of sock_diag replies.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "crun/err.h"
#include "crun/rdzv_records.h"
#include "crun/tcptab.h"
#include "crun/log.h"
#include "events.h"
#include "initdiag.h"

#define SCAN_MAX_PIDS 64     /* processes walked per worker */
#define SCAN_MAX_INODES 4096 /* sockets remembered per scan */
#define MAX_ADDRS 8	     /* addresses MASTER_ADDR resolves to */
#define STORE_VIEW_MAX 65536 /* store connections looked at per warning */
#define SCAN_MAX_DIAG_BYTES (256 * 1024) /* sock_diag replies per dump */
#define SCAN_MAX_ROWS 4096 /* rows of /proc/net/tcp read without sock_diag */

struct initdiag {
	uv_loop_t *loop;
	double warn_after;
	struct events *ev;
	uv_timer_t timer;
	int timer_open;
	int closing;
	int active;
	unsigned gen; /* bumped by every start and stop */

	/* The round, its strings copied here. */
	struct initdiag_round r;
	char host[256], addr[256], prefix[512];
	char *peers; /* the nodes' addresses by group rank, or NULL */
	uint64_t start_ms;

	/* MASTER_ADDR resolved. */
	uv_getaddrinfo_t gai;
	int gai_busy;
	unsigned gai_gen;
	unsigned char addrs[MAX_ADDRS][16];
	int naddrs;

	/* This node's workers. */
	unsigned char conn[RDZV_DIAG_MAX_NPROC];
	unsigned char trying[RDZV_DIAG_MAX_NPROC];
	int own_done;
	char published[RDZV_MAX_RECORD + 1];

	/* Group rank 0: the checks. */
	uint64_t warn_ms;
	uint64_t next_check_ms; /* since start_ms */
	int has_act;		/* a rank somewhere touched the store ... */
	uint64_t act_ms;	/* ... this long after start_ms (first seen) */
	uint64_t mult;		/* checks at act_ms + warn_ms * 1, 2, 4 ... */
	int warned;
	int reading;
	int read_gaps; /* the last read missed a record: read only at checks */
};

/* ---- pure parts --------------------------------------------------------- */

int initdiag_ranges(const unsigned char *flags, int n, int base, int want,
		    char *buf, size_t len)
{
	size_t o = 0;
	int count = 0, cut = 0;

	if (len == 0)
		return 0;
	buf[0] = '\0';
	for (int i = 0; i < n; i++) {
		int j = i, w;
		char part[48];

		if (!!flags[i] != !!want)
			continue;
		while (j + 1 < n && !!flags[j + 1] == !!want)
			j++;
		count += j - i + 1;
		if (j == i)
			w = snprintf(part, sizeof(part), "%s%d", o ? "," : "",
				     base + i);
		else
			w = snprintf(part, sizeof(part), "%s%d-%d",
				     o ? "," : "", base + i, base + j);
		/* Each part leaves room for a final ",..." and the NUL. */
		if (!cut && o + (size_t)w + 5 <= len) {
			memcpy(buf + o, part, (size_t)w + 1);
			o += (size_t)w;
		} else if (!cut) {
			const char *more = o ? ",..." : "...";

			if (o + strlen(more) < len)
				memcpy(buf + o, more, strlen(more) + 1);
			cut = 1;
		}
		i = j;
	}
	return count;
}

/* flags as ceil(n / 4) lower-case hex digits (rdzv_parse_diag's mask). */
static size_t mask_hex(const unsigned char *flags, int n, char *out)
{
	size_t k = 0;

	for (int i = 0; i < n; i += 4) {
		int v = 0;

		for (int b = 0; b < 4 && i + b < n; b++)
			v |= (flags[i + b] ? 1 : 0) << b;
		out[k++] = "0123456789abcdef"[v];
	}
	out[k] = '\0';
	return k;
}

int initdiag_format_record(char *buf, size_t len, int group_rank, int base_rank,
			   int nproc, const unsigned char *connected,
			   const unsigned char *trying, const char *host)
{
	char c[RDZV_DIAG_MAX_NPROC / 4 + 1], t[RDZV_DIAG_MAX_NPROC / 4 + 1];
	int n;

	if (nproc < 1 || nproc > RDZV_DIAG_MAX_NPROC)
		return CRUN_EPROTO;
	mask_hex(connected, nproc, c);
	mask_hex(trying, nproc, t);
	n = snprintf(buf, len, "%d %d %d %s %s %.255s", group_rank, base_rank,
		     nproc, c, t, host);
	return n < 0 || (size_t)n >= len ? CRUN_ETOOBIG : n;
}

void initdiag_format_missing(char *buf, size_t len, const char *ranks,
			     int nmissing, const char *host, const char *addr,
			     int port, double secs, int trying)
{
	int n = snprintf(
	    buf, len,
	    "rank%s %s on %s %s not connected to the workers' store at "
	    "%s:%d after %.0f s%s: check that %s can reach %s on port %d",
	    nmissing == 1 ? "" : "s", ranks, host,
	    nmissing == 1 ? "has" : "have", addr, port, secs,
	    trying ? " (their connection attempts get no answer)" : "", host,
	    addr, port);

	if (n < 0 && len > 0)
		buf[0] = '\0'; /* cut lines are fine: never a broken format */
}

/* ---- scanning this node's workers ---------------------------------------- */

struct scan {
	uint64_t inode[SCAN_MAX_INODES];
	int rank[SCAN_MAX_INODES];
	int n;
};

/* One pass of scan_own over the host's sockets. */
struct scan_pass {
	struct initdiag *d;
	const struct scan *sc;
	unsigned char *trying;
};

/* Remember the socket inodes among pid's descriptors, for local rank r. */
static void scan_fds(struct scan *sc, int pid, int r)
{
	char path[64], link[64];
	DIR *dir;
	struct dirent *e;

	snprintf(path, sizeof(path), "/proc/%d/fd", pid);
	if ((dir = opendir(path)) == NULL)
		return;
	while ((e = readdir(dir)) != NULL && sc->n < SCAN_MAX_INODES) {
		ssize_t k;
		unsigned long long ino;

		if (e->d_name[0] == '.')
			continue;
		k = readlinkat(dirfd(dir), e->d_name, link, sizeof(link) - 1);
		if (k <= 0)
			continue;
		link[k] = '\0';
		if (sscanf(link, "socket:[%llu]", &ino) != 1)
			continue;
		sc->inode[sc->n] = ino;
		sc->rank[sc->n++] = r;
	}
	closedir(dir);
}

/* Append pid's children (from every thread's children file) to q. */
static void scan_children(int pid, int *q, int *nq)
{
	char path[96];
	DIR *dir;
	struct dirent *e;

	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	if ((dir = opendir(path)) == NULL)
		return;
	while ((e = readdir(dir)) != NULL && *nq < SCAN_MAX_PIDS) {
		FILE *fp;
		int c;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%.16s/children",
			 pid, e->d_name);
		if ((fp = fopen(path, "re")) == NULL)
			continue;
		while (*nq < SCAN_MAX_PIDS && fscanf(fp, "%d", &c) == 1)
			q[(*nq)++] = c;
		fclose(fp);
	}
	closedir(dir);
}

static int scan_is_store(const struct initdiag *d, const struct tcptab_row *t)
{
	if (t->remote_port != d->r.store_port)
		return 0;
	if (d->naddrs == 0)
		return 1; /* not resolved (yet): the port alone */
	for (int i = 0; i < d->naddrs; i++)
		if (memcmp(d->addrs[i], t->remote, 16) == 0)
			return 1;
	return 0;
}

/* A socket t of the host: mark the worker holding it if it reaches the store.
 */
static void scan_mark(struct initdiag *d, const struct scan *sc,
		      const struct tcptab_row *t, unsigned char *trying)
{
	if (!scan_is_store(d, t))
		return;
	for (int i = 0; i < sc->n; i++) {
		if (sc->inode[i] != t->inode)
			continue;
		if (t->state == 1)
			d->conn[sc->rank[i]] = 1;
		else if (t->state == 2)
			trying[sc->rank[i]] = 1;
	}
}

/* tcptab_cb: one socket of the host; mark the worker holding it. */
static void scan_on_row(void *data, const struct tcptab_row *t)
{
	struct scan_pass *sp = data;

	scan_mark(sp->d, sp->sc, t, sp->trying);
}

/* One pass over this node's workers; sets own_done once all connected. */
static void scan_own(struct initdiag *d)
{
	struct scan *sc = malloc(sizeof(*sc));
	struct scan_pass sp;
	unsigned char trying[RDZV_DIAG_MAX_NPROC];
	int done = 1;

	if (sc == NULL)
		return;
	sc->n = 0;
	memset(trying, 0, sizeof(trying));
	for (int r = 0; r < d->r.nproc; r++) {
		pid_t pid = d->r.pids[r];
		int q[SCAN_MAX_PIDS], nq = 0;

		if (d->conn[r] || pid <= 0)
			continue;
		q[nq++] = (int)pid;
		for (int k = 0; k < nq && sc->n < SCAN_MAX_INODES; k++) {
			scan_fds(sc, q[k], r);
			scan_children(q[k], q, &nq);
		}
	}
	sp.d = d;
	sp.sc = sc;
	sp.trying = trying;
	if (sc->n > 0 &&
	    tcptab_dump_port(AF_INET, d->r.store_port, TCPTAB_TO_PORT,
			     SCAN_MAX_DIAG_BYTES, scan_on_row, &sp))
		tcptab_read("/proc/net/tcp", SCAN_MAX_ROWS, scan_on_row, &sp);
	if (sc->n > 0 &&
	    tcptab_dump_port(AF_INET6, d->r.store_port, TCPTAB_TO_PORT,
			     SCAN_MAX_DIAG_BYTES, scan_on_row, &sp))
		tcptab_read("/proc/net/tcp6", SCAN_MAX_ROWS, scan_on_row, &sp);
	free(sc);
	memcpy(d->trying, trying, sizeof(trying));
	for (int r = 0; r < d->r.nproc; r++)
		done &= d->conn[r];
	d->own_done = done;
}

/* ---- the records and the checks ----------------------------------------- */

static void on_set(int status, const struct crun_store_reply *r, void *arg)
{
	(void)status;
	(void)r;
	(void)arg; /* a lost record only means a later, staler warning */
}

/* Publish this node's record if it changed. */
static void publish(struct initdiag *d)
{
	char rec[RDZV_MAX_RECORD + 1], key[600];
	int n;

	if (d->r.ops == NULL)
		return;
	n = initdiag_format_record(rec, sizeof(rec), d->r.group_rank,
				   d->r.base_rank, d->r.nproc, d->conn,
				   d->trying, d->host);
	if (n < 0 || strcmp(rec, d->published) == 0)
		return;
	snprintf(key, sizeof(key), "%sdiag/%d", d->prefix, d->r.group_rank);
	if (d->r.ops->set(d->r.kv, key, rec, (size_t)n, on_set, d) == 0)
		memcpy(d->published, rec, (size_t)n + 1);
}

static double elapsed(const struct initdiag *d)
{
	return (double)(uv_now(d->loop) - d->start_ms) / 1000.0;
}

/* PyTorch's store-based barrier count, when this agent hosts the store. */
static int barrier_count(const struct initdiag *d)
{
	char key[128], num[24], *end;
	const void *v;
	size_t len;
	long n;

	if (d->r.wstore == NULL)
		return -1;
	snprintf(key, sizeof(key),
		 "/worker/attempt_%d/default_pg/store_based_barrier_key:1",
		 d->r.restart_count);
	if (store_server_get(d->r.wstore, key, &v, &len) || len == 0 ||
	    len >= sizeof(num))
		return -1;
	memcpy(num, v, len);
	num[len] = '\0';
	n = strtol(num, &end, 10);
	return *end == '\0' && n >= 0 && n <= INT32_MAX ? (int)n : -1;
}

static void stop_timer(struct initdiag *d)
{
	if (d->timer_open)
		uv_timer_stop(&d->timer);
}

/* An IPv4 (as v4-mapped) or IPv6 address as 16 bytes; 0 if neither. */
static int sockaddr16(const struct sockaddr *sa, unsigned char out[16])
{
	memset(out, 0, 16);
	if (sa->sa_family == AF_INET) {
		out[10] = out[11] = 0xff;
		memcpy(out + 12, &((const struct sockaddr_in *)sa)->sin_addr,
		       4);
		return 1;
	}
	if (sa->sa_family == AF_INET6) {
		memcpy(out, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
		return 1;
	}
	return 0;
}

/* What the store host sees itself, for one round of warnings. */
struct store_view {
	int barrier;		   /* PyTorch's barrier count, or -1 */
	unsigned char (*peer)[16]; /* its connections' peer addresses */
	int npeer;		   /* -1: this agent does not host the store */
};

/* The store's connections, when this agent hosts the workers' store. */
static void store_view_fill(const struct initdiag *d, struct store_view *v)
{
	struct sockaddr_storage *ss;
	size_t n, max;

	if (d->r.wstore == NULL)
		return;
	max = store_server_nconns(d->r.wstore);
	max = max > STORE_VIEW_MAX ? STORE_VIEW_MAX : max + 1;
	ss = calloc(max, sizeof(*ss));
	v->peer = calloc(max, sizeof(*v->peer));
	if (ss == NULL || v->peer == NULL) {
		free(ss);
		return;
	}
	n = store_server_peers(d->r.wstore, ss, max);
	v->npeer = 0;
	for (size_t i = 0; i < n; i++)
		v->npeer +=
		    sockaddr16((struct sockaddr *)&ss[i], v->peer[v->npeer]);
	free(ss);
}

/* The field'th blank-separated word of list into out; 0 or -1. */
static int list_field(const char *list, int field, char *out, size_t len)
{
	const char *p = list;

	for (int i = 0; p && *p; i++) {
		size_t n;

		while (*p == ' ')
			p++;
		n = strcspn(p, " ");
		if (i == field && n > 0 && n < len) {
			memcpy(out, p, n);
			out[n] = '\0';
			return 0;
		}
		p += n;
	}
	return -1;
}

/*
 * How many of the store's connections come from group rank g's address (as
 * its descriptor gave it), or -1 when unknown. The name resolves through
 * the system's resolver, as peers_new did when the round formed: only ever
 * on a warning, never per tick.
 */
static int store_conns_from(const struct initdiag *d,
			    const struct store_view *v, int g)
{
	struct addrinfo hints, *res = NULL, *ai;
	char name[256];
	int n = 0;

	if (v->npeer < 0 || g < 0 || d->peers == NULL ||
	    list_field(d->peers, g, name, sizeof(name)))
		return -1;
	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	if (getaddrinfo(name, NULL, &hints, &res) != 0)
		return -1;
	for (int i = 0; i < v->npeer; i++) {
		for (ai = res; ai; ai = ai->ai_next) {
			unsigned char a[16];

			if (!sockaddr16(ai->ai_addr, a) ||
			    memcmp(a, v->peer[i], 16))
				continue;
			n++;
			break;
		}
	}
	freeaddrinfo(res);
	return n;
}

/*
 * Say one line for the ranks of one node. A node without a record (no
 * host in rd) is named by its address when it is the only one (noreport
 * >= 0: its group rank), else only by its ranks.
 */
static void warn_node(struct initdiag *d, const struct rdzv_diag *rd,
		      const struct store_view *v, int noreport, double secs)
{
	char ranks[512], line[1200], who[256] = "";
	int trying = 0, n, conns;
	int g = *rd->host ? rd->group_rank : noreport;

	n = initdiag_ranges(rd->connected, rd->nproc, rd->base_rank, 0, ranks,
			    sizeof(ranks));
	if (n == 0)
		return;
	for (int i = 0; i < rd->nproc; i++)
		trying |= !rd->connected[i] && rd->trying[i];
	conns = store_conns_from(d, v, g);
	if (*rd->host) {
		initdiag_format_missing(line, sizeof(line), ranks, n, rd->host,
					d->addr, d->r.store_port, secs, trying);
	} else {
		if (noreport >= 0 && d->peers)
			list_field(d->peers, noreport, who, sizeof(who));
		if (snprintf(line, sizeof(line),
			     "rank%s %s%s%s %s not connected to the workers' "
			     "store at %s:%d after %.0f s, and %s's agent sent "
			     "no report",
			     n == 1 ? "" : "s", ranks, *who ? " on " : "", who,
			     n == 1 ? "has" : "have", d->addr, d->r.store_port,
			     secs, *who ? who : "their node") < 0)
			line[0] = '\0';
		if (conns >= 0 && strlen(line) + 64 < sizeof(line))
			snprintf(line + strlen(line), 64,
				 " (the store has %d connection%s from it)",
				 conns, conns == 1 ? "" : "s");
	}
	log_say("%s", line);
	events_emit(
	    d->ev, "crun.init_diagnosis",
	    json_pack("{s:s, s:s?, s:i, s:s, s:i, s:s, s:i, s:f, s:b, s:s, "
		      "s:o?, s:o?, s:f}",
		      "state", "missing", "node",
		      *rd->host ? rd->host
		      : *who	? who
				: NULL,
		      "group_rank", g, "ranks", ranks, "missing", n,
		      "store_addr", d->addr, "store_port", d->r.store_port,
		      "after", secs, "trying", trying, "source",
		      *rd->host ? "the node's agent (its workers' sockets)"
				: "no record from the node's agent",
		      "barrier_arrived",
		      v->barrier >= 0 ? json_integer(v->barrier) : NULL,
		      "store_conns_from_node",
		      conns >= 0 ? json_integer(conns) : NULL,
		      "since_first_connection",
		      (double)(uv_now(d->loop) - d->start_ms - d->act_ms) /
			  1000.0));
}

/*
 * The group starts initialising: the checks count from now, so the time
 * torch takes to import never reads as a missing rank.
 */
static void mark_active(struct initdiag *d, uint64_t now)
{
	if (d->has_act)
		return;
	d->has_act = 1;
	d->act_ms = now;
	d->mult = 1;
	d->next_check_ms = now + d->warn_ms;
}

/*
 * Judge the group from every node's record (recs[g], valid[g]; this node's
 * from memory): all in, or a warning when a check is due.
 */
static void evaluate(struct initdiag *d, struct rdzv_diag *recs,
		     const int *valid)
{
	unsigned char *covered = calloc((size_t)d->r.world_size, 1);
	uint64_t now = uv_now(d->loop) - d->start_ms;
	double secs = elapsed(d);
	int all = 1, active = 0, barrier;

	if (covered == NULL)
		return;
	for (int g = 0; g < d->r.group_world_size; g++) {
		const struct rdzv_diag *rd = &recs[g];

		if (!valid[g])
			continue;
		for (int i = 0; i < rd->nproc; i++) {
			covered[rd->base_rank + i] = 1;
			all &= rd->connected[i];
			active |= rd->connected[i] | rd->trying[i];
		}
	}
	for (int k = 0; k < d->r.world_size; k++)
		all &= covered[k];
	/*
	 * PyTorch's store-based barrier at the end of init_process_group
	 * counts every rank that got through: all of them connected, even one
	 * that came and went between two scans.
	 */
	barrier = barrier_count(d);
	if (barrier >= d->r.world_size)
		all = active = 1;
	if (active)
		mark_active(d, now);
	if (all) {
		if (d->warned) {
			log_say("all %d ranks connected to the workers' "
				"store after %.0f s",
				d->r.world_size, secs);
			events_emit(
			    d->ev, "crun.init_diagnosis",
			    json_pack("{s:s, s:i, s:f, s:s, s:i, s:o?}",
				      "state", "connected", "world_size",
				      d->r.world_size, "after", secs,
				      "store_addr", d->addr, "store_port",
				      d->r.store_port, "barrier_arrived",
				      barrier >= 0 ? json_integer(barrier)
						   : NULL));
		}
		d->active = 0;
		stop_timer(d);
		free(covered);
		return;
	}
	if (now < d->next_check_ms) {
		free(covered);
		return;
	}
	if (!d->has_act) {
		/* Nobody has touched the store: look again one period on. */
		d->next_check_ms = now + d->warn_ms;
	} else {
		struct rdzv_diag *nr = calloc(1, sizeof(*nr));
		struct store_view v = {barrier, NULL, -1};
		int noreport = -1, nnoreport = 0;

		store_view_fill(d, &v);
		for (int g = 0; g < d->r.group_world_size; g++) {
			if (valid[g])
				warn_node(d, &recs[g], &v, -1, secs);
			else if (nnoreport++ == 0)
				noreport = g;
		}
		if (nnoreport != 1)
			noreport = -1;
		/* Ranks no record names, in runs of at most nproc. */
		for (int k = 0; k < d->r.world_size && nr; k++) {
			int j = k;

			if (covered[k])
				continue;
			while (j + 1 < d->r.world_size && !covered[j + 1] &&
			       j + 1 - k < RDZV_DIAG_MAX_NPROC)
				j++;
			memset(nr, 0, sizeof(*nr));
			nr->group_rank = -1;
			nr->base_rank = k;
			nr->nproc = j - k + 1;
			warn_node(d, nr, &v, noreport, secs);
			k = j;
		}
		free(nr);
		free(v.peer);
		d->warned = 1;
		d->mult *= 2;
		d->next_check_ms = d->act_ms + d->warn_ms * d->mult;
	}
	free(covered);
}

/* This node's own state as a record. */
static void own_record(const struct initdiag *d, struct rdzv_diag *rd)
{
	rd->group_rank = d->r.group_rank;
	rd->base_rank = d->r.base_rank;
	rd->nproc = d->r.nproc;
	memcpy(rd->connected, d->conn, (size_t)d->r.nproc);
	memcpy(rd->trying, d->trying, (size_t)d->r.nproc);
	snprintf(rd->host, sizeof(rd->host), "%s", d->host);
}

/* One read of every other node's record, answered key by key. */
struct rbatch {
	struct initdiag *d;
	unsigned gen;
	int left; /* replies still to come */
	struct rdzv_diag *recs;
	int *valid;
};

/* One key of a batch. */
struct rreq {
	struct rbatch *b;
	int g;
};

/* Every reply is in: judge (unless the round moved on), then free. */
static void batch_done(struct rbatch *b)
{
	struct initdiag *d = b->d;

	d->reading = 0;
	d->read_gaps = 0;
	for (int g = 0; g < d->r.group_world_size; g++)
		d->read_gaps |= !b->valid[g];
	if (!d->closing && d->active && b->gen == d->gen)
		evaluate(d, b->recs, b->valid);
	free(b->recs);
	free(b->valid);
	free(b);
}

/*
 * Node g's record: parsed and range-checked, else that node sent no report
 * (a missing key, an error, or a record that does not parse).
 */
static void on_record(int status, const struct crun_store_reply *r, void *arg)
{
	struct rreq *q = arg;
	struct rbatch *b = q->b;
	char why[128];

	if (status == 0 && r != NULL && r->nvalues == 1 &&
	    rdzv_parse_diag(r->values[0].base, r->values[0].len,
			    b->d->r.group_world_size, b->d->r.world_size,
			    &b->recs[q->g], why, sizeof(why)) == 0 &&
	    b->recs[q->g].group_rank == q->g)
		b->valid[q->g] = 1;
	else
		memset(&b->recs[q->g], 0, sizeof(b->recs[q->g]));
	free(q);
	if (--b->left == 0)
		batch_done(b);
}

/*
 * Group rank 0: read the other nodes' records (or judge alone). One read
 * per key, each waiting at most read_ms for its key, so a node that never
 * published costs that wait and its own line, never the other nodes'
 * reports. (Every node publishes when its workers start, long before the
 * first check.)
 */
static void check(struct initdiag *d)
{
	struct rbatch *b;
	char key[600];

	if (d->r.ops == NULL || d->r.group_world_size == 1) {
		struct rdzv_diag *rd = calloc(1, sizeof(*rd));
		int valid = 1;

		if (rd) {
			own_record(d, rd);
			evaluate(d, rd, &valid);
		}
		free(rd);
		return;
	}
	if (d->reading)
		return;
	b = calloc(1, sizeof(*b));
	if (b == NULL)
		return;
	b->d = d;
	b->gen = d->gen;
	b->recs = calloc((size_t)d->r.group_world_size, sizeof(*b->recs));
	b->valid = calloc((size_t)d->r.group_world_size, sizeof(*b->valid));
	if (b->recs == NULL || b->valid == NULL) {
		free(b->recs);
		free(b->valid);
		free(b);
		return;
	}
	own_record(d, &b->recs[d->r.group_rank]);
	b->valid[d->r.group_rank] = 1;
	d->reading = 1;
	b->left = 1; /* held until every read is sent */
	for (int g = 0; g < d->r.group_world_size; g++) {
		struct rreq *q;
		const char *k = key;

		if (g == d->r.group_rank || (q = malloc(sizeof(*q))) == NULL)
			continue;
		q->b = b;
		q->g = g;
		snprintf(key, sizeof(key), "%sdiag/%d", d->prefix, g);
		b->left++;
		if (d->r.ops->multi_get(d->r.kv, &k, 1, d->r.read_ms, on_record,
					q) != 0) {
			b->left--;
			free(q);
		}
	}
	if (--b->left == 0)
		batch_done(b);
}

static void on_tick(uv_timer_t *t)
{
	struct initdiag *d = t->data;
	uint64_t now;

	if (!d->active)
		return;
	now = uv_now(d->loop) - d->start_ms;
	if (!d->own_done) {
		scan_own(d);
		publish(d);
		for (int r = 0; r < d->r.nproc; r++)
			if (d->conn[r] || d->trying[r])
				mark_active(d, now);
	}
	if (d->r.group_rank != 0) {
		if (d->own_done)
			stop_timer(d);
		return;
	}
	/*
	 * After a warning, every tick, to say soon when all are in; but a
	 * record that was missing costs a wait per read, so then only at the
	 * checks.
	 */
	if ((d->warned && !d->read_gaps) || now >= d->next_check_ms)
		check(d);
}

static void on_resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *res)
{
	struct initdiag *d = req->data;
	struct addrinfo *ai;

	d->gai_busy = 0;
	if (status == 0 && !d->closing && d->active && d->gai_gen == d->gen) {
		d->naddrs = 0;
		for (ai = res; ai && d->naddrs < MAX_ADDRS; ai = ai->ai_next) {
			d->naddrs +=
			    sockaddr16(ai->ai_addr, d->addrs[d->naddrs]);
		}
	}
	uv_freeaddrinfo(res);
}

static void resolve(struct initdiag *d)
{
	struct addrinfo hints;
	struct sockaddr_storage ss;

	/* A numeric address needs no lookup (nor libuv's thread pool, four
	 * threads started on its first use: ~2 ms of every agent's CPU). */
	if (uv_ip4_addr(d->addr, 0, (struct sockaddr_in *)&ss) == 0 ||
	    uv_ip6_addr(d->addr, 0, (struct sockaddr_in6 *)&ss) == 0) {
		d->naddrs =
		    sockaddr16((const struct sockaddr *)&ss, d->addrs[0]);
		return;
	}
	if (d->gai_busy)
		return; /* the stale answer is dropped; the port still works */
	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	d->gai.data = d;
	d->gai_gen = d->gen;
	if (uv_getaddrinfo(d->loop, &d->gai, on_resolved, d->addr, NULL,
			   &hints) == 0)
		d->gai_busy = 1;
}

/* ---- lifecycle ---------------------------------------------------------- */

int initdiag_new(uv_loop_t *loop, double warn_after, struct events *ev,
		 struct initdiag **out)
{
	struct initdiag *d = calloc(1, sizeof(*d));

	*out = NULL;
	if (d == NULL)
		return UV_ENOMEM;
	d->loop = loop;
	d->warn_after = warn_after;
	d->ev = ev;
	if (warn_after > 0) {
		uv_timer_init(loop, &d->timer);
		d->timer.data = d;
		d->timer_open = 1;
	}
	*out = d;
	return 0;
}

void initdiag_start(struct initdiag *d, const struct initdiag_round *r)
{
	uint64_t warn_ms, tick;

	if (d == NULL || !d->timer_open || d->closing)
		return;
	initdiag_stop(d);
	if (r->nproc < 1 || r->nproc > RDZV_DIAG_MAX_NPROC ||
	    r->world_size < 1 || r->store_port <= 0)
		return; /* nothing a record could carry */
	d->gen++;
	d->r = *r;
	snprintf(d->host, sizeof(d->host), "%s", r->host);
	snprintf(d->addr, sizeof(d->addr), "%s", r->store_addr);
	snprintf(d->prefix, sizeof(d->prefix), "%s",
		 r->prefix ? r->prefix : "");
	free(d->peers);
	d->peers = r->peers ? strdup(r->peers) : NULL;
	d->r.host = d->host;
	d->r.store_addr = d->addr;
	d->r.prefix = d->prefix;
	d->r.peers = d->peers;
	d->naddrs = 0;
	memset(d->conn, 0, sizeof(d->conn));
	memset(d->trying, 0, sizeof(d->trying));
	d->own_done = 0;
	d->published[0] = '\0';
	d->warned = 0;
	d->has_act = 0;
	d->read_gaps = 0;
	d->start_ms = uv_now(d->loop);
	warn_ms = (uint64_t)(d->warn_after * 1000);
	d->warn_ms = warn_ms > 0 ? warn_ms : 1;
	d->next_check_ms = d->warn_ms;
	d->active = 1;
	resolve(d);
	publish(d); /* every key exists before group rank 0 reads it */
	tick = warn_ms / 4;
	tick = tick < 100 ? 100 : tick > 1000 ? 1000 : tick;
	uv_timer_start(&d->timer, on_tick, tick, tick);
}

void initdiag_stop(struct initdiag *d)
{
	if (d == NULL || !d->active)
		return;
	/* After a warning, the group may have got through between ticks. */
	if (d->warned && barrier_count(d) >= d->r.world_size)
		log_say("all %d ranks connected to the workers' store after "
			"%.0f s",
			d->r.world_size, elapsed(d));
	d->active = 0;
	d->gen++;
	d->r.pids = NULL;
	stop_timer(d);
}

void initdiag_close(struct initdiag *d)
{
	if (d == NULL || d->closing)
		return;
	initdiag_stop(d);
	d->closing = 1;
	if (d->gai_busy)
		uv_cancel((uv_req_t *)&d->gai);
	if (d->timer_open)
		uv_close((uv_handle_t *)&d->timer, NULL);
}

void initdiag_free(struct initdiag *d)
{
	if (d)
		free(d->peers);
	free(d);
}

/*
 * The init diagnosis (agent/initdiag.c, compiled in here: it is private to
 * agent/): rank range compression, the warning line, the per-node record
 * and its parser
 * (src/rdzv/rdzv_records.c), the judgement over a group's records, one real
 * scan of a worker's grandchild holding a connection, and the bytes a scan
 * reads on a host with many unrelated sockets.
 */
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../agent/initdiag.c"

/* ---- stubs of the agent's hooks ----------------------------------------- */

static char said[16][1200];
static int nsaid;
static int nevents;

/* log.h's sink for every test: the messages said, without "crun: ". */
static void capture(void *data, enum log_level level, const char *line,
		    size_t len, const char *msg)
{
	(void)data;
	(void)level;
	(void)line;
	(void)len;
	if (nsaid < 16)
		snprintf(said[nsaid++], sizeof(said[0]), "%s", msg);
}

__attribute__((constructor)) static void capture_lines(void)
{
	log_set_sink(capture, NULL);
}

void events_emit(struct events *ev, const char *name, json_t *fields)
{
	(void)ev;
	cr_assert_str_eq(name, "crun.init_diagnosis");
	cr_assert(json_is_object(fields));
	nevents++;
	json_decref(fields);
}

/* An IPv4 address as the 16 bytes initdiag compares (IPv4 mapped). */
static void v4(unsigned char out[16], const char *s)
{
	memset(out, 0, 16);
	out[10] = out[11] = 0xff;
	cr_assert_eq(inet_pton(AF_INET, s, out + 12), 1);
}

/* ---- ranges and lines ---------------------------------------------------- */

Test(initdiag, ranges, .timeout = 20)
{
	unsigned char f[] = {1, 1, 0, 0, 0, 1, 0, 1, 1, 1};
	char buf[64];

	cr_assert_eq(initdiag_ranges(f, 10, 0, 0, buf, sizeof(buf)), 4);
	cr_assert_str_eq(buf, "2-4,6");
	cr_assert_eq(initdiag_ranges(f, 10, 100, 1, buf, sizeof(buf)), 6);
	cr_assert_str_eq(buf, "100-101,105,107-109");
	cr_assert_eq(initdiag_ranges(f, 2, 6, 1, buf, sizeof(buf)), 2);
	cr_assert_str_eq(buf, "6-7");
	cr_assert_eq(initdiag_ranges(f, 2, 6, 0, buf, sizeof(buf)), 0);
	cr_assert_str_eq(buf, "");
	/* Cut, never overflowing, and the count stays exact. */
	cr_assert_eq(initdiag_ranges(f, 10, 1000, 1, buf, 14), 6);
	cr_assert_str_eq(buf, "1000-1001,...");
	cr_assert_eq(initdiag_ranges(f, 10, 1000, 1, buf, 13), 6);
	cr_assert_str_eq(buf, "...");
	cr_assert_eq(initdiag_ranges(f, 10, 1000, 1, buf, 3), 6);
	cr_assert_str_eq(buf, "");
}

Test(initdiag, ranges_many, .timeout = 20)
{
	unsigned char f[RDZV_DIAG_MAX_NPROC];
	char buf[512];

	for (int i = 0; i < RDZV_DIAG_MAX_NPROC; i++)
		f[i] = (unsigned char)(i % 2);
	cr_assert_eq(initdiag_ranges(f, RDZV_DIAG_MAX_NPROC, 0, 1, buf,
				     sizeof(buf)),
		     RDZV_DIAG_MAX_NPROC / 2);
	cr_assert(strlen(buf) < sizeof(buf));
	cr_assert(strstr(buf, ",...") != NULL);
}

Test(initdiag, warning_line, .timeout = 20)
{
	char line[512];
	volatile size_t small = 10;

	initdiag_format_missing(line, sizeof(line), "6-7", 2, "n2", "10.0.0.1",
				41911, 30, 0);
	cr_assert_str_eq(
	    line, "ranks 6-7 on n2 have not connected to the workers' store at "
		  "10.0.0.1:41911 after 30 s: check that n2 can reach 10.0.0.1 "
		  "on port 41911");
	initdiag_format_missing(line, sizeof(line), "3", 1, "n1", "h1", 23457,
				60.4, 1);
	cr_assert_str_eq(
	    line, "rank 3 on n1 has not connected to the workers' store at "
		  "h1:23457 after 60 s (their connection attempts get no "
		  "answer): check that n1 can reach h1 on port 23457");
	/* A short buffer is cut, still terminated (volatile: not a constant
	 * the compiler would warn about). */
	initdiag_format_missing(line, small, "3", 1, "n1", "h1", 1, 1, 0);
	cr_assert_str_eq(line, "rank 3 on");
}

/* ---- records --------------------------------------------------------------
 */

Test(initdiag, record_roundtrip, .timeout = 20)
{
	unsigned char c[RDZV_DIAG_MAX_NPROC] = {0}, t[RDZV_DIAG_MAX_NPROC] = {0};
	struct rdzv_diag d;
	char rec[RDZV_MAX_RECORD + 1], why[128];
	int n;

	c[0] = c[2] = c[5] = 1;
	t[1] = 1;
	n = initdiag_format_record(rec, sizeof(rec), 2, 6, 6, c, t, "n2");
	cr_assert_str_eq(rec, "2 6 6 52 20 n2");
	cr_assert_eq(rdzv_parse_diag(rec, (size_t)n, 3, 12, &d, why,
				     sizeof(why)),
		     0, "%s", why);
	cr_assert_eq(d.group_rank, 2);
	cr_assert_eq(d.base_rank, 6);
	cr_assert_eq(d.nproc, 6);
	cr_assert_eq(memcmp(d.connected, c, 6), 0);
	cr_assert_eq(memcmp(d.trying, t, 6), 0);
	cr_assert_str_eq(d.host, "n2");

	/* The largest node a record describes fits a record. */
	memset(c, 1, sizeof(c));
	n = initdiag_format_record(rec, sizeof(rec), 0, 0, RDZV_DIAG_MAX_NPROC,
				   c, t, "a-rather-long-host-name.example.org");
	cr_assert_gt(n, 0);
	cr_assert_eq(rdzv_parse_diag(rec, (size_t)n, 1, RDZV_DIAG_MAX_NPROC,
				     &d, why, sizeof(why)),
		     0, "%s", why);
	cr_assert_eq(d.connected[RDZV_DIAG_MAX_NPROC - 1], 1);
	cr_assert_lt(initdiag_format_record(rec, sizeof(rec), 0, 0,
					    RDZV_DIAG_MAX_NPROC + 1, c, t, "h"),
		     0);
}

Test(initdiag, record_bad, .timeout = 20)
{
	static const struct {
		const char *rec, *why;
	} bad[] = {
	    {"", "empty record"},
	    {"3 0 2 3 0 h", "group rank '3' is not a number in 0..2"},
	    {"0 11 2 3 0 h", "ranks 11..12 outside a world of 12"},
	    {"0 0 0 0 0 h", "nproc '0' is not a number in 1..12"},
	    {"0 0 2 3 0", "host missing"},
	    {"0 0 2 7 0 h", "connected mask names local rank 2 of 2"},
	    {"0 0 2 33 0 h", "connected mask of 2 digits for 2 ranks (want 1)"},
	    {"0 0 2 3 g h", "trying mask has 'g'"},
	    {"0 0 2 3 0 h x", "trailing fields after the host"},
	    {"0 0 2 3 0 h\x01", "host has a control character"},
	    {"-1 0 2 3 0 h", "group rank '-1' is not a number in 0..2"},
	};
	struct rdzv_diag d;
	char why[128];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_assert_eq(rdzv_parse_diag(bad[i].rec, strlen(bad[i].rec), 3,
					     12, &d, why, sizeof(why)),
			     CRUN_EPROTO, "record '%s'", bad[i].rec);
		cr_assert_str_eq(why, bad[i].why, "record '%s'", bad[i].rec);
	}
	{
		char big[RDZV_MAX_RECORD + 2];

		memset(big, '1', sizeof(big));
		cr_assert_eq(rdzv_parse_diag(big, sizeof(big), 3, 12, &d, why,
					     sizeof(why)),
			     CRUN_EPROTO);
		cr_assert(strstr(why, "record of") != NULL, "%s", why);
	}
	cr_assert_eq(rdzv_parse_diag("0 0 1 1 0 h", 11, 0, 12, &d, why,
				     sizeof(why)),
		     CRUN_EPROTO, "a round of no nodes");
}

/* ---- the judgement ---------------------------------------------------------
 */

/* A group of 8 ranks on n0 (0-3), n1 (4-5) and n2 (6-7), check due. */
static struct initdiag *group(struct rdzv_diag recs[3], int valid[3])
{
	struct initdiag *d = calloc(1, sizeof(*d));
	const char *host[] = {"n0", "n1", "n2"};
	int base[] = {0, 4, 6}, np[] = {4, 2, 2};

	cr_assert_not_null(d);
	d->loop = uv_default_loop();
	d->start_ms = uv_now(d->loop);
	d->warn_ms = 30000;
	d->next_check_ms = 0;
	d->has_act = 1;
	d->mult = 1;
	d->active = 1;
	d->r.group_rank = 0;
	d->r.group_world_size = 3;
	d->r.world_size = 8;
	d->r.store_port = 41911;
	snprintf(d->addr, sizeof(d->addr), "10.0.0.1");
	memset(recs, 0, 3 * sizeof(*recs));
	for (int g = 0; g < 3; g++) {
		recs[g].group_rank = g;
		recs[g].base_rank = base[g];
		recs[g].nproc = np[g];
		memset(recs[g].connected, 1, (size_t)np[g]);
		snprintf(recs[g].host, sizeof(recs[g].host), "%s", host[g]);
		valid[g] = 1;
	}
	nsaid = nevents = 0;
	return d;
}

Test(initdiag, judge_names_the_missing_node, .timeout = 20)
{
	struct rdzv_diag recs[3];
	int valid[3];
	struct initdiag *d = group(recs, valid);

	recs[2].connected[0] = recs[2].connected[1] = 0;
	recs[2].trying[1] = 1;
	recs[1].connected[1] = 0;
	evaluate(d, recs, valid);
	cr_assert_eq(nsaid, 2);
	cr_assert_str_eq(said[0],
			 "rank 5 on n1 has not connected to the workers' store "
			 "at 10.0.0.1:41911 after 0 s: check that n1 can reach "
			 "10.0.0.1 on port 41911");
	cr_assert_str_eq(said[1],
			 "ranks 6-7 on n2 have not connected to the workers' "
			 "store at 10.0.0.1:41911 after 0 s (their connection "
			 "attempts get no answer): check that n2 can reach "
			 "10.0.0.1 on port 41911");
	cr_assert_eq(nevents, 2);
	cr_assert_eq(d->warned, 1);
	cr_assert_eq(d->next_check_ms, 60000, "the next check doubles");

	/* Not due yet: nothing more. */
	evaluate(d, recs, valid);
	cr_assert_eq(nsaid, 2);

	/* Everyone in: said once, and the diagnosis stops. */
	recs[2].connected[0] = recs[2].connected[1] = 1;
	recs[1].connected[1] = 1;
	evaluate(d, recs, valid);
	cr_assert_eq(nsaid, 3);
	cr_assert_str_eq(said[2], "all 8 ranks connected to the workers' "
				  "store after 0 s");
	cr_assert_eq(d->active, 0);
	free(d);
}

Test(initdiag, judge_no_record, .timeout = 20)
{
	struct rdzv_diag recs[3];
	int valid[3];
	struct initdiag *d = group(recs, valid);

	valid[2] = 0;
	evaluate(d, recs, valid);
	cr_assert_eq(nsaid, 1);
	cr_assert_str_eq(said[0], "ranks 6-7 have not connected to the "
				  "workers' store at 10.0.0.1:41911 after 0 "
				  "s, and their node's agent sent no report");
	free(d);
}

Test(initdiag, judge_no_record_named_by_the_store, .timeout = 20)
{
	struct rdzv_diag recs[3];
	int valid[3];
	struct initdiag *d = group(recs, valid);
	struct crun_store_server *srv;
	struct sockaddr_in sin;
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	/* The store host's own view: one connection from 127.0.0.1. */
	cr_assert_eq(store_server_new(d->loop, "127.0.0.1", 0, NULL, &srv), 0);
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = htons((uint16_t)store_server_port(srv));
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert_eq(connect(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	for (int i = 0; i < 200 && store_server_nconns(srv) == 0; i++)
		uv_run(d->loop, UV_RUN_NOWAIT);
	cr_assert_eq(store_server_nconns(srv), 1);
	{
		struct sockaddr_storage ss[4];

		cr_assert_eq(store_server_peers(srv, ss, 4), 1);
		cr_assert_eq(ss[0].ss_family, AF_INET);
		cr_assert_eq(store_server_peers(srv, ss, 0), 0);
	}

	d->r.wstore = srv;
	d->peers = strdup("10.0.0.1 10.0.0.2 127.0.0.1");
	valid[2] = 0;
	evaluate(d, recs, valid);
	cr_assert_eq(nsaid, 1);
	cr_assert_str_eq(said[0], "ranks 6-7 on 127.0.0.1 have not connected "
				  "to the workers' store at 10.0.0.1:41911 "
				  "after 0 s, and 127.0.0.1's agent sent no "
				  "report (the store has 1 connection from "
				  "it)");
	/* Two nodes without a record: their ranks, no guess at a node. */
	d->next_check_ms = 0;
	valid[1] = 0;
	evaluate(d, recs, valid);
	cr_assert_eq(nsaid, 2);
	cr_assert_str_eq(said[1], "ranks 4-7 have not connected to the "
				  "workers' store at 10.0.0.1:41911 after 0 "
				  "s, and their node's agent sent no report");
	close(fd);
	store_server_close(srv, NULL, NULL);
	uv_run(d->loop, UV_RUN_DEFAULT);
	free(d->peers);
	free(d);
}

Test(initdiag, judge_quiet, .timeout = 20)
{
	struct rdzv_diag recs[3];
	int valid[3];
	struct initdiag *d = group(recs, valid);

	/* All in before any warning: nothing said. */
	evaluate(d, recs, valid);
	cr_assert_eq(nsaid, 0);
	cr_assert_eq(d->active, 0);
	free(d);

	/* Nobody touched the store (no init_process_group): nothing said. */
	d = group(recs, valid);
	d->has_act = 0;
	for (int g = 0; g < 3; g++)
		memset(recs[g].connected, 0, sizeof(recs[g].connected));
	evaluate(d, recs, valid);
	cr_assert_eq(nsaid, 0);
	cr_assert_eq(d->warned, 0);
	free(d);
}

Test(initdiag, off_does_nothing, .timeout = 20)
{
	struct initdiag *d;
	struct initdiag_round r;
	pid_t w = 0;

	memset(&r, 0, sizeof(r));
	memset(&w, 0, sizeof(w));
	r.host = "n0";
	r.store_addr = "127.0.0.1";
	r.store_port = 1;
	r.group_world_size = r.nproc = r.world_size = 1;
	r.pids = &w;
	cr_assert_eq(initdiag_new(uv_default_loop(), 0, NULL, &d), 0);
	initdiag_start(d, &r);
	cr_assert_eq(d->active, 0, "--init_warn_after=0: off");
	initdiag_stop(d);
	initdiag_close(d);
	initdiag_free(d);
	cr_assert_eq(uv_run(uv_default_loop(), UV_RUN_NOWAIT), 0);

	/* On, then closed: the loop drains. */
	cr_assert_eq(initdiag_new(uv_default_loop(), 5, NULL, &d), 0);
	initdiag_start(d, &r);
	cr_assert_eq(d->active, 1);
	initdiag_close(d);
	uv_run(uv_default_loop(), UV_RUN_DEFAULT);
	cr_assert_eq(uv_loop_alive(uv_default_loop()), 0);
	initdiag_free(d);
}

/* ---- a real scan ------------------------------------------------------------
 */

Test(initdiag, scan_finds_a_grandchilds_connection, .timeout = 20)
{
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);
	pid_t w[2] = {0, 0};
	struct initdiag *d = calloc(1, sizeof(*d));
	int ls = socket(AF_INET, SOCK_STREAM, 0), p[2];
	pid_t child, other;
	char c;

	cr_assert_not_null(d);
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert_eq(bind(ls, (struct sockaddr *)&sin, sizeof(sin)), 0);
	cr_assert_eq(listen(ls, 4), 0);
	cr_assert_eq(getsockname(ls, (struct sockaddr *)&sin, &len), 0);
	cr_assert_eq(pipe(p), 0);

	/* Worker 0: a shell-like parent whose child holds the connection. */
	child = fork();
	cr_assert_geq(child, 0);
	if (child == 0) {
		pid_t g;

		setpgid(0, 0);
		g = fork();

		if (g == 0) {
			int s = socket(AF_INET, SOCK_STREAM, 0);

			if (connect(s, (struct sockaddr *)&sin, sizeof(sin)))
				_exit(1);
			if (write(p[1], "x", 1) != 1)
				_exit(1);
			pause();
			_exit(0);
		}
		pause();
		_exit(0);
	}
	setpgid(child, child);
	/* Worker 1: never connects. */
	other = fork();
	cr_assert_geq(other, 0);
	if (other == 0) {
		pause();
		_exit(0);
	}
	cr_assert_eq(read(p[0], &c, 1), 1);

	memset(w, 0, sizeof(w));
	w[0] = child;
	w[1] = other;
	d->r.pids = w;
	d->r.nproc = 2;
	d->r.store_port = ntohs(sin.sin_port);
	v4(d->addrs[0], "127.0.0.1");
	d->naddrs = 1;
	scan_own(d);
	cr_assert_eq(d->conn[0], 1, "the grandchild's connection counts");
	cr_assert_eq(d->conn[1], 0);
	cr_assert_eq(d->own_done, 0);

	/* Another address on the same port is not the store. */
	memset(d->conn, 0, sizeof(d->conn));
	v4(d->addrs[0], "127.0.0.2");
	scan_own(d);
	cr_assert_eq(d->conn[0], 0);

	kill(-child, SIGKILL); /* the worker and its child */
	kill(other, SIGKILL);
	waitpid(child, NULL, 0);
	waitpid(other, NULL, 0);
	close(ls);
	free(d);
}

/* Bytes this process has read so far (/proc/self/io rchar: every read(2)). */
static unsigned long long rchar(void)
{
	unsigned long long v = 0;
	char line[128];
	FILE *f = fopen("/proc/self/io", "r");

	cr_assert_not_null(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "rchar: %llu", &v) == 1)
			break;
	fclose(f);
	return v;
}

/* A listening socket on 127.0.0.1, port 0; its port in *port. */
static int listener(int *port)
{
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);
	int ls = socket(AF_INET, SOCK_STREAM, 0);

	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert_eq(bind(ls, (struct sockaddr *)&sin, sizeof(sin)), 0);
	cr_assert_eq(listen(ls, 1024), 0);
	cr_assert_eq(getsockname(ls, (struct sockaddr *)&sin, &len), 0);
	*port = ntohs(sin.sin_port);
	return ls;
}

static int connect_to(int port)
{
	struct sockaddr_in sin;
	int s = socket(AF_INET, SOCK_STREAM, 0);

	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sin.sin_port = htons((unsigned short)port);
	cr_assert_eq(connect(s, (struct sockaddr *)&sin, sizeof(sin)), 0);
	return s;
}

/*
 * 1500 unrelated established connections on the host (3000 rows of
 * /proc/net/tcp, about 450 KB) and one worker connected to the store: a
 * scan finds the worker and reads a few KB, not the host's tables (counted
 * in bytes read, not time).
 */
Test(initdiag, scan_work_is_bounded_by_the_workers_sockets, .timeout = 60)
{
	enum { UNRELATED = 1500 };
	struct rlimit rl;
	pid_t w[1] = {0};
	struct initdiag *d = calloc(1, sizeof(*d));
	int sport, oport, ls = -1, other, p[2], *fds;
	unsigned long long before, cost;
	pid_t child;
	char c;

	cr_assert_not_null(d);
	cr_assert_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
	if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < 2 * UNRELATED + 64)
		cr_skip_test("RLIMIT_NOFILE %llu too low",
			     (unsigned long long)rl.rlim_max);
	rl.rlim_cur = 2 * UNRELATED + 64;
	cr_assert_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
	ls = listener(&sport);
	other = listener(&oport);
	cr_assert_eq(pipe(p), 0);
	child = fork();
	cr_assert_geq(child, 0);
	if (child == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL); /* even when an assert fails */
		connect_to(sport);
		if (write(p[1], "x", 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	cr_assert_eq(read(p[0], &c, 1), 1);
	fds = calloc(2 * UNRELATED, sizeof(*fds));
	cr_assert_not_null(fds);
	for (int i = 0; i < UNRELATED; i++) {
		fds[2 * i] = connect_to(oport);
		fds[2 * i + 1] = accept(other, NULL, NULL);
		cr_assert_geq(fds[2 * i + 1], 0);
	}

	memset(w, 0, sizeof(w));
	w[0] = child;
	d->r.pids = w;
	d->r.nproc = 1;
	d->r.store_port = sport;
	v4(d->addrs[0], "127.0.0.1");
	d->naddrs = 1;
	before = rchar();
	scan_own(d);
	cost = rchar() - before;
	cr_log_info("one scan read %llu bytes", cost);
	cr_assert_eq(d->conn[0], 1, "the worker's connection is found");
	cr_assert_lt(cost, 64 * 1024,
		     "one scan read %llu bytes with %d unrelated connections",
		     cost, UNRELATED);

	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	for (int i = 0; i < 2 * UNRELATED; i++)
		close(fds[i]);
	free(fds);
	close(ls);
	close(other);
	free(d);
}

/*
 * The job console's link (agent/jobcon.c, compiled in here: it is private
 * to agent/) and what it stands on: rank lists (src/base/ranges.c), the
 * store's sink (keys under a prefix handed to the owner, not stored), the
 * records and their parser on untrusted bytes, and a sender against a real
 * store server on one loop: batches in order under their round's key,
 * records held until the host is ready, no room past the cap, and every
 * batch not acknowledged given back when the host goes away or never
 * answers.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../agent/jobcon.c"
#include "../../agent/jobrec.c"

/* ---- rank lists ---------------------------------------------------------- */

Test(ranges, format_and_parse_round_trip)
{
	int r[] = {0, 1, 2, 3, 5, 7, 8, 9}, back[16], n;
	char s[64], why[128];

	cr_assert_eq(ranges_format(r, 8, 0, s, sizeof(s)), strlen("0-3,5,7-9"));
	cr_assert_str_eq(s, "0-3,5,7-9");
	cr_assert_eq(ranges_format(r, 8, 8, s, sizeof(s)), strlen("8-11,13,15-17"));
	cr_assert_str_eq(s, "8-11,13,15-17");
	cr_assert_eq(ranges_parse(s, strlen(s), 17, back, 16, &n, why, sizeof(why)), 0);
	cr_assert_eq(n, 8);
	for (int i = 0; i < n; i++)
		cr_assert_eq(back[i], r[i] + 8);
}

Test(ranges, format_says_what_it_needs_when_cut)
{
	int r[] = {10, 12, 14, 16};
	char s[8];

	cr_assert_eq(ranges_format(r, 4, 0, s, sizeof(s)), strlen("10,12,14,16"));
	cr_assert_str_eq(s, "10,12,1");
	cr_assert_eq(ranges_format(r, 0, 0, s, sizeof(s)), 0);
	cr_assert_str_eq(s, "");
}

Test(ranges, bad_lists_are_named)
{
	static const struct {
		const char *s, *why;
	} bad[] = {
	    {"", "empty"},	     {"1,", "','"},	      {",1", "a rank expected"},
	    {"3,2", "not ascending"}, {"2-1", "not ascending"}, {"1,1", "not ascending"},
	    {"0-9999999999", "rank past"}, {"0-100", "more than"}, {"1 2", "' '"},
	    {"-3", "a rank expected"}, {"1-", "a rank expected"},
	};
	int out[64], n;
	char why[128];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		why[0] = '\0';
		cr_assert_eq(ranges_parse(bad[i].s, strlen(bad[i].s), 1000, out, 64, &n, why,
					  sizeof(why)),
			     -1, "'%s' accepted", bad[i].s);
		cr_assert(strstr(why, bad[i].why), "'%s': %s", bad[i].s, why);
	}
	/* Exactly cap ranks are fine. */
	cr_assert_eq(ranges_parse("0-63", 4, 1000, out, 64, &n, why, sizeof(why)), 0);
	cr_assert_eq(n, 64);
}

/* ---- records -------------------------------------------------------------- */

static size_t rec_line(char *out, size_t cap, int fd, unsigned age, const char *ranks,
		       const char *prefix, size_t taglen, const char *line)
{
	return (size_t)snprintf(out, cap, "L %d %u %s %zu %zu %zu\n%s%s", fd, age, ranks,
				strlen(prefix), taglen, strlen(line), prefix, line);
}

Test(jobcon_records, read_in_order)
{
	char b[512];
	size_t k = 0, off = 0;
	int ranks[16];
	struct jobcon_rec r;
	char why[128];

	k += rec_line(b + k, sizeof(b) - k, 1, 7, "0-3", "[default0-3]:", 0, "hello\n");
	k += rec_line(b + k, sizeof(b) - k, 2, 0, "5", "[default1]:[rank5]: ", 9, "boom\n");
	k += (size_t)snprintf(b + k, sizeof(b) - k, "D 2 4-5\n");
	k += rec_line(b + k, sizeof(b) - k, 1, 0, "-", "", 0, "partial");

	cr_assert_eq(jobcon_next(b, k, &off, 8, ranks, 8, &r, why, sizeof(why)), 1);
	cr_assert_eq(r.kind, 'L');
	cr_assert_eq(r.fd, 1);
	cr_assert_eq(r.age_ms, 7);
	cr_assert_eq(r.n, 4);
	cr_assert_eq(r.ranks[3], 3);
	cr_assert_eq(r.plen, strlen("[default0-3]:"));
	cr_assert(memcmp(r.line, "hello\n", r.len) == 0 && r.len == 6);

	cr_assert_eq(jobcon_next(b, k, &off, 8, ranks, 8, &r, why, sizeof(why)), 1);
	cr_assert_eq(r.fd, 2);
	cr_assert_eq(r.n, 1);
	cr_assert_eq(r.ranks[0], 5);
	cr_assert_eq(r.taglen, 9);
	/* torch's tag ends the prefix, right before the line */
	cr_assert(memcmp(r.line - r.taglen, "[rank5]: boom\n", 14) == 0);

	cr_assert_eq(jobcon_next(b, k, &off, 8, ranks, 8, &r, why, sizeof(why)), 1);
	cr_assert_eq(r.kind, 'D');
	cr_assert_eq(r.n, 2);
	cr_assert_eq(r.ranks[0], 4);

	cr_assert_eq(jobcon_next(b, k, &off, 8, ranks, 8, &r, why, sizeof(why)), 1);
	cr_assert_eq(r.n, 0);
	cr_assert_eq(r.plen, 0);
	cr_assert_eq(r.len, 7);
	cr_assert_eq(jobcon_next(b, k, &off, 8, ranks, 8, &r, why, sizeof(why)), 0);
	cr_assert_eq(off, k);
}

Test(jobcon_records, bad_records_are_named)
{
	static const struct {
		const char *rec, *why;
	} bad[] = {
	    {"X 1 0 0 0 0 0\n", "unknown record 'X'"},
	    {"L 1 0 0 0 0 5\nabc", "no line length in [0, 3]"},
	    {"L 1 0 0 4 0 0\nab", "longer than its batch"},
	    {"L 1 0 0 2 3 0\nab", "no tag length"},
	    {"L 3 0 0 0 0 0\n", "no fd"},
	    {"L 0 0 0 0 0 0\n", "fd 0"},
	    {"L 1 x 0 0 0 0\n", "no age"},
	    {"L 1 0 9 0 0 0\n", "rank past 7"},
	    {"L 1 0 2,1 0 0 0\n", "not ascending"},
	    {"L 1 0 0 0 0 0 9\n", "longer than its batch"},
	    {"L 1 0 0 0 0 99999999999999999999\n", "no line length"},
	    {"L 1 0 0 2000 0 0\n", "no prefix length"},
	    {"L 1 0 0 0 0 0", "without its end"},
	    {"D 1\n", "no ranks"},
	    {"D 1 0 junk\n", "malformed end"},
	    {"L  1 0 0 0 0 0\n", "no fd"},
	};
	int ranks[8];
	struct jobcon_rec r;
	char why[128];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		size_t off = 0;

		why[0] = '\0';
		cr_assert_eq(jobcon_next(bad[i].rec, strlen(bad[i].rec), &off, 8, ranks, 8, &r,
					 why, sizeof(why)),
			     -1, "'%s' accepted", bad[i].rec);
		cr_assert(strstr(why, bad[i].why), "'%s': %s", bad[i].rec, why);
		cr_assert_eq(off, 0);
	}
}

/* Random bytes and cut batches: never a read past the batch, never a crash. */
Test(jobcon_records, untrusted_bytes)
{
	char good[256], b[256];
	int ranks[8];
	struct jobcon_rec r;
	char why[128];
	size_t k = rec_line(good, sizeof(good), 1, 3, "0-7", "[x]:", 0, "a line\n");

	srand(7);
	for (int round = 0; round < 20000; round++) {
		size_t len = (size_t)rand() % k, off = 0;
		char *p = malloc(len ? len : 1); /* exact size: ASAN sees overreads */

		memcpy(b, good, k);
		for (int f = rand() % 4; f > 0; f--)
			b[rand() % k] = (char)(rand() % 256);
		memcpy(p, b, len);
		while (jobcon_next(p, len, &off, 8, ranks, 8, &r, why, sizeof(why)) == 1) {
			cr_assert_leq(off, len);
			if (r.kind == 'L')
				cr_assert_leq((size_t)(r.line + r.len - p), len);
		}
		free(p);
	}
}

/* ---- the sink and a sender ------------------------------------------------ */

static uv_loop_t loop;
static struct crun_store_server *srv;
static struct jobcon_sink sink;
static char got[65536]; /* "<round>/<node>:" and each batch's lines */
static size_t ngot;
static char local[65536]; /* what the link gave back */
static size_t nlocal;

/* Each line of a batch, as "<round>/<node>|<prefix><line>". */
static void on_batch(void *data, int round, int node, const char *p, size_t len)
{
	struct jobcon_rec r;
	int ranks[64];
	size_t off = 0;
	char why[128];

	(void)data;
	while (jobcon_next(p, len, &off, 64, ranks, 64, &r, why, sizeof(why)) == 1)
		ngot += (size_t)snprintf(got + ngot, sizeof(got) - ngot, "%d/%d|%c|%.*s%.*s",
					 round, node, r.kind, (int)r.plen, r.prefix,
					 (int)r.len, r.line);
}

static void on_local(void *data, const char *p, size_t len)
{
	(void)data;
	cr_assert_lt(nlocal + len, sizeof(local));
	memcpy(local + nlocal, p, len);
	nlocal += len;
}

static int host(void)
{
	struct crun_store_limits lim;

	ngot = nlocal = 0;
	cr_assert_eq(uv_loop_init(&loop), 0);
	store_limits_default(&lim);
	cr_assert_eq(store_server_new(&loop, "127.0.0.1", 0, &lim, &srv), 0);
	store_server_set_quiet(srv, 1);
	return store_server_port(srv);
}

static struct jobcon *sender(int port, size_t cap, int ready_ms)
{
	struct crun_store_aclient *c;
	struct jobcon_opts o = {&loop, NULL, cap, ready_ms, on_local, NULL};

	cr_assert_eq(store_aclient_new(&loop, "127.0.0.1", port, 5000, NULL, NULL, &c), 0);
	store_aclient_use_wait_get(c);
	o.client = c;
	return jobcon_new(&o);
}

static int put(struct jobcon *j, const char *line)
{
	int r[2] = {0, 1};

	return jobcon_put(j, 1, 0, r, 2, 4, "[default0-1]:", 13, 0, line, strlen(line));
}

/* Run the loop until cond holds (or a turn budget passes). */
#define RUN_UNTIL(cond)                                                        \
	for (int turn_ = 0; !(cond) && turn_ < 100000; turn_++)                \
	uv_run(&loop, UV_RUN_ONCE)

static void closed(void *data) { *(int *)data = 1; }

static void finish(void)
{
	int done = 0;

	if (srv)
		store_server_close(srv, closed, &done);
	RUN_UNTIL(done || srv == NULL);
	uv_run(&loop, UV_RUN_DEFAULT);
	cr_assert_eq(uv_loop_close(&loop), 0);
	srv = NULL;
}

Test(jobcon_sink, keys_under_the_prefix_are_handed_over_not_stored, .timeout = 20)
{
	struct crun_store_aclient *c;
	int port = host();
	const void *v;
	size_t vlen;

	sink.batch = on_batch;
	cr_assert_eq(jobcon_host(srv, &sink), 0);
	cr_assert_eq(store_server_get(srv, JOBCON_READY, &v, &vlen), 0);
	cr_assert_eq(store_aclient_new(&loop, "127.0.0.1", port, 5000, NULL, NULL, &c), 0);
	cr_assert_eq(store_aclient_append(c, JOBCON_PREFIX "3/1", "L 1 0 4 1 0 2\n>a\n", 17,
					  NULL, NULL), 0);
	cr_assert_eq(store_aclient_set(c, JOBCON_PREFIX "junk", "x", 1, NULL, NULL), 0);
	cr_assert_eq(store_aclient_set(c, "other", "kept", 4, NULL, NULL), 0);
	RUN_UNTIL(store_server_get(srv, "other", &v, &vlen) == 0);
	cr_assert_str_eq(got, "3/1|L|>a\n");
	cr_assert_eq(sink.bad, 1); /* the key of no node: said, dropped */
	cr_assert_neq(store_server_get(srv, JOBCON_PREFIX "3/1", &v, &vlen), 0);
	cr_assert_neq(store_server_get(srv, JOBCON_PREFIX "junk", &v, &vlen), 0);
	store_aclient_close(c, NULL, NULL);
	finish();
}

Test(jobcon_sender, batches_arrive_in_order_under_their_rounds_key, .timeout = 20)
{
	int port = host();
	struct jobcon *j = sender(port, 1 << 20, 5000);
	char want[4096];
	size_t k = 0;

	sink.batch = on_batch;
	sink.bad = 0;
	jobcon_round(j, 2, 1);
	/* Put before the host is ready: held, not lost. */
	cr_assert_eq(put(j, "early\n"), 0);
	for (int i = 0; i < 100; i++)
		uv_run(&loop, UV_RUN_NOWAIT);
	cr_assert_eq(ngot, 0);
	cr_assert_eq(jobcon_host(srv, &sink), 0);
	for (int i = 0; i < 50; i++) {
		char line[32];

		snprintf(line, sizeof(line), "line %d\n", i);
		cr_assert_eq(put(j, line), 0);
		if (i == 25)
			jobcon_round(j, 3, 0);
	}
	k += (size_t)snprintf(want + k, sizeof(want) - k, "2/1|L|[default0-1]:early\n");
	for (int i = 0; i < 50; i++)
		k += (size_t)snprintf(want + k, sizeof(want) - k, "%d/%d|L|[default0-1]:line %d\n",
				      i <= 25 ? 2 : 3, i <= 25 ? 1 : 0, i);
	RUN_UNTIL(ngot >= k);
	cr_assert_str_eq(got, want);
	jobcon_close(j);
	finish();
	cr_assert_eq(nlocal, 0);
}

Test(jobcon_sender, no_room_past_the_cap_until_the_next_round, .timeout = 20)
{
	int port = host();
	struct jobcon *j = sender(port, 200, 5000); /* the host is never ready */
	int n = 0;

	while (put(j, "a line of the job\n") == 0)
		n++;
	cr_assert_gt(n, 0);
	cr_assert_lt(n, 10);
	cr_assert_eq(put(j, "x\n"), -1); /* still full */
	jobcon_round(j, 1, 0);
	/* A new round takes records again, within the same cap. */
	cr_assert_eq(jobcon_put(j, 1, 0, NULL, 0, 0, "", 0, 0, "y\n", 2), -1);
	jobcon_close(j); /* everything held goes back, in order */
	finish();
	cr_assert_eq(nlocal > 0, 1);
	cr_assert(strstr(local, "a line of the job\n"));
}

Test(jobcon_sender, a_host_that_never_answers_gives_everything_back, .timeout = 20)
{
	int port = host();
	struct jobcon *j = sender(port, 1 << 20, 200);

	cr_assert_eq(put(j, "one\n"), 0);
	cr_assert_eq(put(j, "two\n"), 0);
	RUN_UNTIL(nlocal > 0);
	cr_assert(strstr(local, "[default0-1]:one\n") < strstr(local, "[default0-1]:two\n"));
	cr_assert_eq(put(j, "three\n"), -1); /* the link is down for good */
	jobcon_close(j);
	finish();
}

Test(jobcon_sender, a_lost_host_gives_back_what_it_did_not_acknowledge, .timeout = 20)
{
	int port = host(), done = 0;
	struct jobcon *j = sender(port, 1 << 20, 5000);

	sink.batch = on_batch;
	cr_assert_eq(jobcon_host(srv, &sink), 0);
	cr_assert_eq(put(j, "acked\n"), 0);
	RUN_UNTIL(ngot > 0);
	for (int i = 0; i < 20; i++)
		uv_run(&loop, UV_RUN_NOWAIT); /* the acknowledgement */
	store_server_close(srv, closed, &done);
	srv = NULL;
	RUN_UNTIL(done);
	cr_assert_eq(put(j, "after\n"), 0); /* not known lost yet: held */
	RUN_UNTIL(nlocal > 0);
	cr_assert(strstr(local, "after\n"));
	cr_assert_null(strstr(local, "acked\n"));
	cr_assert_eq(put(j, "later\n"), -1);
	jobcon_close(j);
	finish();
}

static int ndrained;
static size_t got_at_drain;

static void on_drained(void *data)
{
	(void)data;
	ndrained++;
	got_at_drain = ngot;
}

/*
 * A drain is told once the host has taken every record put before it (the
 * round's lines are on its console before the round's end is told), at
 * once when nothing waits, and never after the link closes.
 */
Test(jobcon_sender, a_drain_waits_for_the_hosts_acknowledgement, .timeout = 20)
{
	int port = host();
	struct jobcon *j = sender(port, 1 << 20, 5000);

	sink.batch = on_batch;
	ndrained = 0;
	jobcon_round(j, 0, 1);
	cr_assert_eq(put(j, "first\n"), 0);
	cr_assert_eq(put(j, "second\n"), 0);
	jobcon_drain(j, on_drained, NULL);
	cr_assert_eq(ndrained, 0, "drained before the host was ready");
	cr_assert_eq(jobcon_host(srv, &sink), 0);
	RUN_UNTIL(ndrained > 0);
	cr_assert_str_eq(got, "0/1|L|[default0-1]:first\n0/1|L|[default0-1]:second\n");
	cr_assert_eq(got_at_drain, ngot);
	jobcon_drain(j, on_drained, NULL); /* nothing waits: at once */
	cr_assert_eq(ndrained, 2);
	cr_assert_eq(put(j, "third\n"), 0);
	jobcon_drain(j, on_drained, NULL);
	jobcon_close(j); /* sent, then closed once acknowledged */
	RUN_UNTIL(strstr(got, "third\n") && ndrained == 2 && nlocal == 0 &&
		  store_server_nconns(srv) == 0);
	cr_assert_eq(store_server_nconns(srv), 0, "the link never closed");
	finish();
	cr_assert_eq(ndrained, 2, "told after the link closed");
	cr_assert_eq(nlocal, 0);
}

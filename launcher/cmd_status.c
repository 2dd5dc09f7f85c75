/*
 * `crun status`: what a running job is doing, read from its rendezvous like
 * an agent that never joins. It connects to the c10d store (with the
 * rendezvous secret when one is given) or to etcd, reads the job's keys
 * with rdzv_status_read, prints them as text or JSON (--json) and exits:
 * 0 the job runs (or re-forms after a restart), 1 no such job (nothing
 * listening on a c10d endpoint, another run id, or the job ended), 2 a
 * usage error, 3 the rendezvous could not be reached or read (an endpoint
 * that does not answer, with either backend; a malformed record, a refused
 * secret).
 *
 * Every wait is bounded: connecting and every read by --timeout, the
 * heartbeat sampling by --hb_wait, and the whole command by their sum
 * plus one second (a timer that gives up with one line).
 */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdarg.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uv.h>

#include "crun/auth.h"
#include "crun/cfg.h"
#include "crun/err.h"
#include "crun/log.h"
#include "crun/rdzv_backend.h"
#include "crun/rdzv_etcd.h"
#include "crun/rdzv_status.h"
#include "crun/rdzv_store.h"
#include "launcher.h"
#include "status_stacks.h"

static const char status_usage[] =
    "usage: crun status --rdzv_endpoint=H[:P] [--rdzv_id=ID] [options]\n"
    "\n"
    "Show a running job as its rendezvous sees it, like an agent that does\n"
    "not join: run id, round, generation, restarts used (and allowed), each\n"
    "node (host, address, nproc, ranks, age of its last heartbeat), the\n"
    "last worker failure, and whether the round is forming, running or\n"
    "ended.\n"
    "\n"
    "  --rdzv_endpoint=H[:P]  the job's endpoint (c10d: port 29400; etcd:\n"
    "                         H1:2379,H2,... or URLs) [PET_RDZV_ENDPOINT]\n"
    "  --rdzv_id=ID           the job's run id (c10d: default whatever job\n"
    "                         the endpoint serves; etcd: \"none\")\n"
    "                         [PET_RDZV_ID]\n"
    "  --rdzv_backend=B       c10d (default), static, etcd or its alias\n"
    "                         etcd-v3 [PET_RDZV_BACKEND]\n"
    "  --rdzv_conf=K=V,...    as the agents': secret_file (c10d), and\n"
    "                         etcd_prefix, protocol, cacert, cert, key,\n"
    "                         user, password_file (etcd) [PET_RDZV_CONF]\n"
    "  --rdzv_secret_file=F   the rendezvous secret [CRUN_RDZV_SECRET_FILE]\n"
    "  --json                 one JSON object on stdout, for scripts\n"
    "  --timeout=S            give up connecting or on any read after S\n"
    "                         seconds (default 5)\n"
    "  --hb_wait=S            watch the heartbeats at most S seconds to\n"
    "                         see each move (default: twice the agents'\n"
    "                         keep_alive_interval, at most 10; 0: do not\n"
    "                         wait)\n"
    "  --max_nodes=N          refuse a job announcing more nodes than N\n"
    "                         (default 1048576)\n"
    "  --stacks               instead, ask every node for its ranks' live\n"
    "                         Python stacks (py-spy on the nodes; nothing\n"
    "                         is stopped) and print them grouped\n"
    "  --stacks_wait=S        wait at most S seconds for the nodes'\n"
    "                         answers (default 30)\n"
    "  -h, --help             show this help\n"
    "\n"
    "Exit status: 0 the job runs (or re-forms to restart), 1 no such job\n"
    "(nothing listening on a c10d endpoint, another run id, or the job\n"
    "ended), 2 usage error, 3 the rendezvous could not be reached or read\n"
    "(an endpoint that does not answer within --timeout, an etcd that\n"
    "cannot be reached, a malformed record, a secret refused, the store\n"
    "lost; --stacks: a node that did not answer, or answered garbage).\n";

struct cmd_status {
	uv_loop_t loop;
	uv_timer_t deadline;
	int json;
	const char *endpoint;
	const char *backend;
	struct rdzv_status_opts so;
	struct crun_rdzv_store *rs;
	struct crun_rdzv_etcd *re;
	struct crun_rdzv_status *st;
	int rc;
	int closing;
	int stacks;	    /* --stacks */
	double stacks_wait; /* --stacks_wait */
	const struct rdzv_kv_ops *ops;
	void *kv;
	struct status_stacks *ss;
};

static int status_usage_error(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
static int status_usage_error(const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_msg(LOG_ERROR, "crun status", "%s (see crun status --help)", msg);
	return 2;
}

/* A duration in seconds in [0, max]. */
static int parse_secs(const char *s, double max, double *out)
{
	char *end;
	double d;

	errno = 0;
	d = strtod(s, &end);
	if (errno || end == s || *end != '\0' || !(d >= 0) || d > max)
		return -1;
	*out = d;
	return 0;
}

static void on_handle_closed(uv_handle_t *h)
{
	(void)h;
}

/* The backend is closed (its requests failed): the reader can go. */
static void status_free_reader(struct cmd_status *cs)
{
	if (cs->st != NULL)
		rdzv_status_free(cs->st);
	cs->st = NULL;
	status_stacks_free(cs->ss);
	cs->ss = NULL;
}

static void on_rs_closed(void *data)
{
	struct cmd_status *cs = data;

	rdzv_store_free(cs->rs);
	cs->rs = NULL;
	status_free_reader(cs);
}

static void on_re_closed(void *data)
{
	struct cmd_status *cs = data;

	rdzv_etcd_free(cs->re);
	cs->re = NULL;
	status_free_reader(cs);
}

/* Close the backend, then the reader, then the timer: the loop ends. */
static void status_close(struct cmd_status *cs, int rc)
{
	if (cs->closing)
		return;
	cs->closing = 1;
	cs->rc = rc;
	uv_timer_stop(&cs->deadline);
	uv_close((uv_handle_t *)&cs->deadline, on_handle_closed);
	if (cs->rs != NULL)
		rdzv_store_close(cs->rs, on_rs_closed, cs);
	else if (cs->re != NULL)
		rdzv_etcd_close(cs->re, on_re_closed, cs);
	else
		status_free_reader(cs);
}

static void on_deadline(uv_timer_t *t)
{
	struct cmd_status *cs = t->data;

	log_msg(LOG_ERROR, "crun status",
		"no complete answer from %s within %.1f s", cs->endpoint,
		(double)uv_timer_get_repeat(t) / 1000);
	status_close(cs, 3);
}

/* "0-1" or "4": the global ranks of a node. */
static void ranks_text(const struct rdzv_status_node *n, char *buf, size_t len)
{
	if (n->group_rank < 0)
		snprintf(buf, len, "-");
	else if (n->ranks.local_world_size == 1)
		snprintf(buf, len, "%d", n->ranks.base_rank);
	else
		snprintf(buf, len, "%d-%d", n->ranks.base_rank,
			 n->ranks.base_rank + n->ranks.local_world_size - 1);
}

static double now_unix(void)
{
	uv_timeval64_t tv;

	if (uv_gettimeofday(&tv) != 0)
		return 0;
	return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

static void iso_time(int64_t ms, char *buf, size_t len)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;

	if (gmtime_r(&t, &tm) == NULL ||
	    strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
		snprintf(buf, len, "?");
}

/* The signal a worker died of (exit code 128 + N), or 0. */
static int failure_signal(const struct rdzv_failure *f)
{
	return f->exit_code > 128 && f->exit_code < 128 + 65
		   ? f->exit_code - 128
		   : 0;
}

static json_t *status_json(const struct cmd_status *cs,
			   const struct rdzv_status *st)
{
	json_t *o = json_object(), *nodes = json_array(), *ex;

	json_object_set_new(o, "run_id", json_string(st->run_id));
	json_object_set_new(o, "endpoint", json_string(cs->endpoint));
	json_object_set_new(o, "backend", json_string(st->config.backend));
	json_object_set_new(o, "state",
			    json_string(rdzv_status_state_name(st->state)));
	json_object_set_new(o, "round", json_integer(st->round));
	json_object_set_new(o, "generation",
			    st->state == RDZV_STATUS_RUNNING
				? json_integer(st->round)
				: json_null());
	json_object_set_new(o, "restarts", json_integer(st->restarts));
	json_object_set_new(o, "max_restarts",
			    st->have_params
				? json_integer(st->params.max_restarts)
				: json_null());
	json_object_set_new(o, "keep_alive_interval",
			    st->have_params
				? json_real(st->params.keep_alive_ms / 1000.0)
				: json_null());
	json_object_set_new(o, "min_nodes", json_integer(st->config.min_nodes));
	json_object_set_new(o, "max_nodes", json_integer(st->config.max_nodes));
	json_object_set_new(o, "joined", json_integer(st->joined));
	json_object_set_new(o, "heartbeat_window", json_real(st->hb_window));
	if (st->master_port > 0)
		json_object_set_new(o, "master",
				    json_pack("{s:s, s:i}", "addr",
					      st->master_addr, "port",
					      st->master_port));
	else
		json_object_set_new(o, "master", json_null());
	if (st->end_kind) {
		char kind[2] = {(char)st->end_kind, '\0'};

		json_object_set_new(
		    o, "end",
		    json_pack("{s:s, s:s}", "kind", kind, "why", st->end_why));
	} else
		json_object_set_new(o, "end", json_null());
	for (int i = 0; i < st->nnodes; i++) {
		const struct rdzv_status_node *n = &st->nodes[i];
		json_t *j = json_pack(
		    "{s:i, s:s, s:s, s:i, s:s, s:i, s:b}", "index", n->index,
		    "host", n->d.host, "addr", n->d.addr, "nproc", n->d.nproc,
		    "role", n->d.role, "pid", n->d.pid, "done", n->done);

		json_object_set_new(
		    j, "progress_age",
		    n->progress_ms >= 0
			? json_real((double)n->progress_ms / 1000)
			: json_null());
		json_t *ranks = json_array();

		if (n->group_rank >= 0) {
			json_object_set_new(j, "group_rank",
					    json_integer(n->group_rank));
			for (int r = 0; r < n->ranks.local_world_size; r++)
				json_array_append_new(
				    ranks,
				    json_integer(n->ranks.base_rank + r));
			json_object_set_new(j, "world_size",
					    json_integer(n->ranks.world_size));
		} else {
			json_object_set_new(j, "group_rank", json_null());
		}
		json_object_set_new(j, "ranks", ranks);
		json_object_set_new(j, "heartbeat",
				    n->hb >= 0 ? json_integer(n->hb)
					       : json_null());
		json_object_set_new(j, "heartbeat_age",
				    n->hb_age >= 0 ? json_real(n->hb_age)
						   : json_null());
		json_array_append_new(nodes, j);
	}
	json_object_set_new(o, "nodes", nodes);
	nodes = json_array();
	for (int i = 0; i < st->nspares; i++) {
		const struct rdzv_status_node *n = &st->spares[i];

		json_array_append_new(
		    nodes, json_pack("{s:i, s:s, s:s, s:i, s:s, s:i}", "index",
				     n->index, "host", n->d.host, "addr",
				     n->d.addr, "nproc", n->d.nproc, "role",
				     n->d.role, "pid", n->d.pid));
	}
	json_object_set_new(o, "spares", nodes);
	if (st->have_failure) {
		const struct rdzv_failure *f = &st->failure;
		char when[64];
		int sig = failure_signal(f);

		iso_time(f->unix_ms, when, sizeof(when));
		json_object_set_new(
		    o, "last_failure",
		    json_pack("{s:i, s:s, s:i, s:i, s:i, s:o, s:s, s:I, s:f}",
			      "round", f->round, "host", f->host, "rank",
			      f->rank, "local_rank", f->local_rank, "exit_code",
			      f->exit_code, "signal",
			      sig ? json_string(cfg_signame(sig)) : json_null(),
			      "time", when, "unix_ms", (json_int_t)f->unix_ms,
			      "age", now_unix() - (double)f->unix_ms / 1000));
	} else {
		json_object_set_new(o, "last_failure", json_null());
	}
	ex = json_array();
	for (int i = 0; i < st->nexcluded; i++) {
		const struct rdzv_exclusion *x = &st->excluded[i];

		json_array_append_new(
		    ex,
		    json_pack("{s:s, s:s, s:I, s:i, s:i, s:f}", "host", x->host,
			      "addr", x->addr, "until", (json_int_t)x->until,
			      "since_round", x->round, "failures", x->fails,
			      "left_s", (double)x->until - now_unix()));
	}
	json_object_set_new(o, "excluded", ex);
	json_object_set_new(o, "excluded_ignored",
			    *st->excluded_ignored
				? json_string(st->excluded_ignored)
				: json_null());
	return o;
}

static void status_text(const struct cmd_status *cs,
			const struct rdzv_status *st)
{
	char ranks[64], gen[32], maxr[32], hb[64];

	if (st->state == RDZV_STATUS_RUNNING)
		snprintf(gen, sizeof(gen), "%d", st->round);
	else
		snprintf(gen, sizeof(gen), "-");
	if (st->have_params)
		snprintf(maxr, sizeof(maxr), "%d", st->params.max_restarts);
	else
		snprintf(maxr, sizeof(maxr), "?");
	printf("job '%s' at %s (%s): %s\n", st->run_id, cs->endpoint,
	       st->config.backend, rdzv_status_state_name(st->state));
	printf("round %d, generation %s, restarts %lld of %s, nodes %d "
	       "(min %d, max %d)",
	       st->round, gen, (long long)st->restarts, maxr,
	       st->state == RDZV_STATUS_RUNNING ? st->nnodes : st->joined,
	       st->config.min_nodes, st->config.max_nodes);
	if (st->nspares > 0)
		printf(", %d spare%s waiting", st->nspares,
		       st->nspares == 1 ? "" : "s");
	printf("\n");
	if (st->master_port > 0 && st->state == RDZV_STATUS_RUNNING)
		printf("workers' store %s:%d, world size %d\n", st->master_addr,
		       st->master_port,
		       st->nnodes > 0 ? st->nodes[0].ranks.world_size : 0);
	if (st->end_kind)
		printf("round %d ended: %c %s\n", st->round, st->end_kind,
		       st->end_why);
	if (st->nnodes > 0)
		printf("  %-5s %-20s %-16s %5s %-11s %s\n", "GRANK", "HOST",
		       "ADDRESS", "NPROC", "RANKS", "LAST HEARTBEAT");
	for (int i = 0; i < st->nnodes; i++) {
		const struct rdzv_status_node *n = &st->nodes[i];
		char g[16];

		ranks_text(n, ranks, sizeof(ranks));
		if (n->group_rank >= 0)
			snprintf(g, sizeof(g), "%d", n->group_rank);
		else
			snprintf(g, sizeof(g), "-");
		if (n->done)
			snprintf(hb, sizeof(hb), "finished");
		else if (n->hb_age >= 0)
			snprintf(hb, sizeof(hb), "%.1f s ago", n->hb_age);
		else if (n->group_rank < 0)
			snprintf(hb, sizeof(hb), "joining");
		else if (st->hb_window > 0)
			snprintf(hb, sizeof(hb), "none for %.1f s (stalled?)",
				 st->hb_window);
		else
			snprintf(hb, sizeof(hb), "not sampled");
		printf("  %-5s %-20s %-16s %5d %-11s %s\n", g, n->d.host,
		       n->d.addr, n->d.nproc, ranks, hb);
	}
	for (int i = 0; i < st->nspares; i++) {
		const struct rdzv_status_node *n = &st->spares[i];

		printf("  %-5s %-20s %-16s %5d %-11s %s\n", "spare", n->d.host,
		       n->d.addr, n->d.nproc, "-", "waiting for a place");
	}
	for (int i = 0; i < st->nnodes; i++)
		if (st->nodes[i].progress_ms >= 0)
			printf("%s group rank %d: last progress %.1f s ago "
			       "(--stall_timeout)\n",
			       st->nodes[i].d.host, st->nodes[i].group_rank,
			       (double)st->nodes[i].progress_ms / 1000);
	if (st->have_failure) {
		const struct rdzv_failure *f = &st->failure;
		char when[64], sig[48] = "";
		int s = failure_signal(f);

		iso_time(f->unix_ms, when, sizeof(when));
		if (s)
			snprintf(sig, sizeof(sig), " (%s)", cfg_signame(s));
		printf("last failure: rank %d (local rank %d) on %s exited "
		       "with %d%s in round %d at %s (%.0f s ago)\n",
		       f->rank, f->local_rank, f->host, f->exit_code, sig,
		       f->round, when, now_unix() - (double)f->unix_ms / 1000);
	} else {
		printf("last failure: none\n");
	}
	for (int i = 0; i < st->nexcluded; i++) {
		const struct rdzv_exclusion *x = &st->excluded[i];
		double left = (double)x->until - now_unix();

		printf("left out: %s (%s) after %d failed rounds in a row, "
		       "since round %d, %.0f s to go\n",
		       x->host, x->addr, x->fails, x->round,
		       left > 0 ? left : 0);
	}
	if (*st->excluded_ignored)
		printf("left out: none (the agents ignore the 'excluded' "
		       "record: %s)\n",
		       st->excluded_ignored);
}

static void on_stacks_done(struct status_stacks *ss, int rc, void *data)
{
	(void)ss;
	status_close(data, rc);
}

/* --stacks: the round is known, ask its nodes. */
static void status_stacks(struct cmd_status *cs, const struct rdzv_status *st)
{
	int rc;

	if (st->state != RDZV_STATUS_RUNNING) {
		log_msg(LOG_ERROR, "crun status",
			"job '%s' runs no round now (%s): no stacks to take",
			st->run_id, rdzv_status_state_name(st->state));
		return status_close(cs, 1);
	}
	rc = status_stacks_run(&cs->loop, cs->ops, cs->kv, st, cs->json,
			       cs->stacks_wait, on_stacks_done, cs, &cs->ss);
	if (rc) {
		log_msg(LOG_ERROR, "crun status", "cannot ask for stacks: %s",
			crun_strerror(rc));
		status_close(cs, 3);
	}
}

static void on_status(struct crun_rdzv_status *s, int status,
		      const struct rdzv_status *st, const char *errmsg,
		      void *data)
{
	struct cmd_status *cs = data;
	int rc;

	(void)s;
	if (status == CRUN_ENOTFOUND) {
		log_msg(LOG_ERROR, "crun status", "%s", errmsg);
		return status_close(cs, 1);
	}
	if (status) {
		log_msg(LOG_ERROR, "crun status", "%s", errmsg);
		return status_close(cs, 3);
	}
	if (cs->stacks)
		return status_stacks(cs, st);
	if (cs->json) {
		json_t *j = status_json(cs, st);

		json_dumpf(j, stdout, JSON_COMPACT | JSON_REAL_PRECISION(6));
		fputc('\n', stdout);
		json_decref(j);
	} else {
		status_text(cs, st);
	}
	rc = st->state == RDZV_STATUS_ENDED ? 1 : 0;
	if (rc)
		log_msg(LOG_ERROR, "crun status", "job '%s' has ended",
			st->run_id);
	fflush(stdout);
	status_close(cs, rc);
}

static void start_read(struct cmd_status *cs, const struct rdzv_kv_ops *ops,
		       void *kv)
{
	int rc;

	cs->ops = ops;
	cs->kv = kv;
	rc = rdzv_status_read(&cs->loop, ops, kv, &cs->so, on_status, cs,
			      &cs->st);

	if (rc) {
		log_msg(LOG_ERROR, "crun status", "cannot read: %s",
			crun_strerror(rc));
		status_close(cs, 3);
	}
}

static void on_rs_open(struct crun_rdzv_store *rs, int status, void *data)
{
	struct cmd_status *cs = data;

	cs->rs = rs; /* maybe called before rdzv_store_open returned */
	if (status) {
		/* Nothing listening is "not found" (the store goes with the
		 * job); an endpoint that does not answer, like an etcd that
		 * does not, is one that cannot be reached; anything else an
		 * error. rdzv_store gives up on the first with CRUN_EREFUSED,
		 * on the second with CRUN_ETIMEDOUT. */
		if (status == UV_ECONNREFUSED || status == CRUN_EREFUSED) {
			log_msg(LOG_ERROR, "crun status", "no job at %s: %s",
				cs->endpoint, rdzv_store_errmsg(rs));
			return status_close(cs, 1);
		}
		if (status == CRUN_ETIMEDOUT) {
			log_msg(LOG_ERROR, "crun status",
				"cannot reach the rendezvous at %s: %s",
				cs->endpoint, rdzv_store_errmsg(rs));
			return status_close(cs, 3);
		}
		if (status == CRUN_EADDRINUSE_OTHER) {
			log_msg(
			    LOG_ERROR, "crun status",
			    "no job at %s: it answers, but not as a crun store",
			    cs->endpoint);
			return status_close(cs, 1);
		}
		log_msg(LOG_ERROR, "crun status", "%s", rdzv_store_errmsg(rs));
		return status_close(cs, 3);
	}
	start_read(cs, &rdzv_store_ops, rs);
}

static void on_re_open(struct crun_rdzv_etcd *re, int status, void *data)
{
	struct cmd_status *cs = data;

	cs->re = re; /* maybe called before rdzv_etcd_open returned */
	if (status) {
		log_msg(LOG_ERROR, "crun status", "etcd at %s: %s",
			cs->endpoint, rdzv_etcd_errmsg(re));
		return status_close(cs, status == CRUN_ENOTFOUND ? 1 : 3);
	}
	start_read(cs, &rdzv_etcd_ops, re);
}

/* What the command line and the environment ask for. */
struct status_args {
	const char *endpoint, *run_id, *backend, *conf_str, *secret;
	double timeout, hb_wait;
	long max_nodes;
};

static const struct option status_opts[] = {
    {"rdzv_endpoint", required_argument, NULL, 'e'},
    {"rdzv-endpoint", required_argument, NULL, 'e'},
    {"rdzv_id", required_argument, NULL, 'i'},
    {"rdzv-id", required_argument, NULL, 'i'},
    {"rdzv_backend", required_argument, NULL, 'b'},
    {"rdzv-backend", required_argument, NULL, 'b'},
    {"rdzv_conf", required_argument, NULL, 'c'},
    {"rdzv-conf", required_argument, NULL, 'c'},
    {"rdzv_secret_file", required_argument, NULL, 's'},
    {"rdzv-secret-file", required_argument, NULL, 's'},
    {"json", no_argument, NULL, 'j'},
    {"timeout", required_argument, NULL, 't'},
    {"hb_wait", required_argument, NULL, 'w'},
    {"hb-wait", required_argument, NULL, 'w'},
    {"max_nodes", required_argument, NULL, 'n'},
    {"max-nodes", required_argument, NULL, 'n'},
    {"stacks", no_argument, NULL, 'S'},
    {"stacks_wait", required_argument, NULL, 'W'},
    {"stacks-wait", required_argument, NULL, 'W'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

const struct option *cmd_status_options(void)
{
	return status_opts;
}

/*
 * Read the options into sa (cs->json too); returns -1 to go on, else the
 * exit status (--help: 0, a usage error: 2).
 */
static int status_parse_args(int argc, char **argv, struct status_args *sa,
			     struct cmd_status *cs)
{
	double d;
	char *end;
	int c;

	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":h", status_opts, NULL)) != -1) {
		switch (c) {
		case 'h':
			fputs(status_usage, stdout);
			return 0;
		case 'e':
			sa->endpoint = optarg;
			break;
		case 'i':
			sa->run_id = optarg;
			break;
		case 'b':
			sa->backend = optarg;
			break;
		case 'c':
			sa->conf_str = optarg;
			break;
		case 's':
			sa->secret = optarg;
			break;
		case 'j':
			cs->json = 1;
			break;
		case 't':
			if (parse_secs(optarg, 3600, &sa->timeout) ||
			    sa->timeout <= 0)
				return status_usage_error(
				    "invalid --timeout \"%s\": seconds in "
				    "(0, 3600]",
				    optarg);
			break;
		case 'w':
			if (parse_secs(optarg, 3600, &d))
				return status_usage_error(
				    "invalid --hb_wait \"%s\": seconds in "
				    "[0, 3600]",
				    optarg);
			sa->hb_wait = d;
			break;
		case 'n':
			errno = 0;
			sa->max_nodes = strtol(optarg, &end, 10);
			if (errno || *end != '\0' || end == optarg ||
			    sa->max_nodes < 1 || sa->max_nodes > (1 << 20))
				return status_usage_error(
				    "invalid --max_nodes \"%s\": a count in "
				    "1..1048576",
				    optarg);
			break;
		case 'S':
			cs->stacks = 1;
			break;
		case 'W':
			if (parse_secs(optarg, 3600, &cs->stacks_wait) ||
			    cs->stacks_wait <= 0)
				return status_usage_error(
				    "invalid --stacks_wait \"%s\": seconds in "
				    "(0, 3600]",
				    optarg);
			break;
		case ':':
			return status_usage_error("option \"%s\" needs a value",
						  argv[optind - 1]);
		default:
			return status_usage_error("unknown option \"%s\"",
						  argv[optind - 1]);
		}
	}
	if (optind < argc)
		return status_usage_error("unexpected argument \"%s\"",
					  argv[optind]);
	return -1;
}

int cmd_status_main(int argc, char **argv)
{
	struct cmd_status cs;
	struct crun_rdzv_conf conf;
	struct crun_auth_key key;
	struct status_args sa;
	const char *endpoint, *run_id, *backend, *conf_str, *secret;
	double timeout, hb_wait, d;
	char errmsg[512] = "", host[256], why[400];
	struct rdzv_backend_opts bo;
	int rc, port, etcd, kind, has_key = 0;
	long max_nodes;

	memset(&cs, 0, sizeof(cs));
	sa.endpoint = getenv("PET_RDZV_ENDPOINT");
	sa.run_id = getenv("PET_RDZV_ID");
	sa.backend = getenv("PET_RDZV_BACKEND");
	sa.conf_str = getenv("PET_RDZV_CONF");
	sa.secret = getenv("CRUN_RDZV_SECRET_FILE");
	sa.timeout = 5;
	sa.hb_wait = -1;
	sa.max_nodes = 1 << 20;
	cs.stacks_wait = 30;
	rc = status_parse_args(argc, argv, &sa, &cs);
	if (rc >= 0)
		return rc;
	endpoint = sa.endpoint;
	run_id = sa.run_id;
	backend = sa.backend;
	conf_str = sa.conf_str;
	secret = sa.secret;
	timeout = sa.timeout;
	hb_wait = sa.hb_wait;
	max_nodes = sa.max_nodes;
	if (endpoint == NULL || *endpoint == '\0')
		return status_usage_error("missing --rdzv_endpoint");
	if (backend == NULL || *backend == '\0')
		backend = "c10d";
	/* The names the agents accept (rdzv_backend.h), no more. */
	kind = rdzv_backend_kind(backend, why, sizeof(why));
	if (kind < 0)
		return status_usage_error("invalid --rdzv_backend \"%s\": %s",
					  backend, why);
	etcd = kind == RDZV_BACKEND_ETCD;
	if (run_id != NULL && *run_id == '\0')
		run_id = NULL;
	/* The agents' bound (rdzv.h): a longer id is no job's. */
	if (run_id != NULL && strlen(run_id) > RDZV_ID_MAX)
		return status_usage_error(
		    "invalid --rdzv_id \"%.32s...\" (%zu bytes): at most %d "
		    "bytes",
		    run_id, strlen(run_id), RDZV_ID_MAX);
	if (run_id != NULL && strchr(run_id, '/'))
		return status_usage_error("invalid --rdzv_id \"%s\": no '/'",
					  run_id);

	cfg_rdzv_conf_init(&conf);
	if (conf_str != NULL && *conf_str &&
	    cfg_parse_rdzv_conf(conf_str, &conf, why, sizeof(why))) {
		cfg_rdzv_conf_release(&conf);
		log_msg(LOG_ERROR, "crun status", "--rdzv_conf: %s", why);
		return 2;
	}
	if (conf.secret_file != NULL && secret == NULL)
		secret = conf.secret_file;
	if (secret != NULL && *secret && !etcd) {
		if (auth_key_load(secret, &key, errmsg, sizeof(errmsg))) {
			cfg_rdzv_conf_release(&conf);
			log_msg(LOG_ERROR, "crun status", "%s", errmsg);
			return 2;
		}
		has_key = 1;
	}
	if (!etcd &&
	    cfg_split_endpoint(endpoint, host, sizeof(host), &port) != 0) {
		cfg_rdzv_conf_release(&conf);
		sodium_memzero(&key, sizeof(key));
		return status_usage_error(
		    "invalid --rdzv_endpoint \"%s\": expected HOST[:PORT]",
		    endpoint);
	}

	cs.endpoint = endpoint;
	cs.backend = backend;
	cs.so.run_id = run_id;
	cs.so.max_nodes = (int)max_nodes;
	/* --stacks shows no heartbeat ages: do not wait to sample them. */
	if (cs.stacks && hb_wait < 0)
		hb_wait = 0;
	cs.so.hb_wait = hb_wait;
	uv_loop_init(&cs.loop);
	uv_timer_init(&cs.loop, &cs.deadline);
	cs.deadline.data = &cs;
	/* Connect and reads (timeout), sampling (hb_wait, or at most its
	 * default window), and a second. */
	d = hb_wait >= 0 ? hb_wait : RDZV_STATUS_DEFAULT_HB_WAIT_MAX;
	if (cs.stacks)
		d += cs.stacks_wait;
	uv_timer_set_repeat(&cs.deadline,
			    (uint64_t)(1000 * (2 * timeout + d + 1)));
	uv_timer_start(&cs.deadline, on_deadline,
		       uv_timer_get_repeat(&cs.deadline), 0);
	memset(&bo, 0, sizeof(bo));
	bo.kind = kind;
	bo.endpoint = endpoint;
	bo.run_id = run_id;
	bo.conf = &conf;
	bo.is_host = 0; /* never serve: only read */
	bo.readonly = 1;
	bo.timeout = timeout;
	bo.auth = has_key ? &key : NULL;
	bo.errmsg = errmsg;
	bo.errlen = sizeof(errmsg);
	if (etcd && cs.so.run_id == NULL)
		cs.so.run_id = "none";
	rc = rdzv_backend_open(&cs.loop, &bo, on_rs_open, on_re_open, &cs,
			       &cs.rs, &cs.re);
	sodium_memzero(&key, sizeof(key));
	if (rc) {
		log_msg(LOG_ERROR, "crun status", "%s",
			*errmsg ? errmsg : crun_strerror(rc));
		cs.re = NULL;
		cs.rs = NULL;
		status_close(&cs,
			     rc == CRUN_EUSAGE || rc == CRUN_ECONFIG ? 2 : 3);
	}
	uv_run(&cs.loop, UV_RUN_DEFAULT);
	cfg_rdzv_conf_release(&conf);
	if (uv_loop_close(&cs.loop) != 0) {
		log_msg(LOG_ERROR, "crun status", "loop not closed cleanly");
		return 3;
	}
	return cs.rc;
}

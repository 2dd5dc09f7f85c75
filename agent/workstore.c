/*
 * The workers' store of a round (workstore.h): a fresh keyspace per round
 * on the agent's own store server, confined to the round's nodes, or, without
 * the agent store, a free port held for worker rank 0's own TCPStore. With
 * store_relay, every node's agent also runs a relay (store_relay.h) for the
 * round: its workers connect to it on loopback and it forwards their
 * requests over one connection, so the store holds one connection per node.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "crun/auth.h"
#include "crun/err.h"
#include "crun/log.h"
#include "crun/rdzv.h"
#include "crun/torchstore.h"
#include "logs.h"
#include "torchprobe.h"
#include "workstore.h"

void workstore_init(struct workstore *ws, uv_loop_t *loop,
		    const struct crun_cfg *cfg, int multi,
		    workstore_lost_cb on_lost, void *data)
{
	memset(ws, 0, sizeof(*ws));
	ws->loop = loop;
	ws->cfg = cfg;
	ws->multi = multi;
	ws->port_fd = -1;
	ws->on_lost = on_lost;
	ws->data = data;
}

/*
 * Hold a free TCP port for MASTER_PORT until the round ends. The socket is
 * bound with SO_REUSEADDR but never listens, so worker rank 0's TCPStore
 * (which also sets SO_REUSEADDR) can bind and listen on it, while nothing
 * else can take the port in between.
 */
static int reserve_port(struct workstore *ws, int *port)
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
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, (const void *)&one,
		       sizeof(one)) ||
	    bind(fd, (struct sockaddr *)&sin, sizeof(sin)) ||
	    getsockname(fd, (struct sockaddr *)&sin, &len)) {
		int err = -errno;

		close(fd);
		return err;
	}
	ws->port_fd = fd;
	*port = ntohs(sin.sin_port);
	return 0;
}

/*
 * PyTorch's clients cannot authenticate: the workers' store accepts only
 * loopback, this machine's addresses and the round's nodes (peers.h),
 * unless --rdzv_conf=store_allow=any.
 */
static int confine_store(struct workstore *ws, const struct crun_rdzv *rdzv)
{
	char why[512];
	int rc;

	peers_free(ws->peers);
	ws->peers = NULL;
	if (ws->cfg->rdzv.store_allow_any)
		return 0;
	rc = peers_new(ws->multi && rdzv ? rdzv_peers(rdzv) : NULL, &ws->peers,
		       why, sizeof(why));
	if (rc)
		return rc;
	if (*why)
		log_say("workers' store: %s: their workers will be refused",
			why);
	store_server_set_allow(ws->server, peers_allow, ws->peers);
	return 0;
}

/*
 * Start the workers' store of a round (called on group rank 0): a fresh
 * keyspace per round serves PyTorch versions that prefix /worker/attempt_<n>
 * and those that expect a new store per attempt alike. Without the agent
 * store, hold a free port for worker rank 0's own TCPStore instead.
 */
int workstore_start(struct workstore *ws, int round,
		    struct crun_store_server *rs, const struct crun_rdzv *rdzv,
		    int survivors, int *port, int *by_worker)
{
	const struct crun_cfg *cfg = ws->cfg;
	/*
	 * Alone, --master_port names the workers' store; with several nodes
	 * rdzv_conf store_port does (firewalls that open one port), else the
	 * workers get a free port of their own.
	 */
	int want = !ws->multi && cfg->master_port >= 0 ? cfg->master_port
		   : ws->multi			       ? cfg->rdzv.store_port
						       : 0,
	    rc;

	/*
	 * A worker that survived SIGKILL may still hold a connection to the
	 * old store: the new one must be another port (made while the old one
	 * still holds its own), so that nothing of it is reused or counted.
	 */
	struct crun_store_server *old = ws->server;
	int stuck = survivors > ws->survivors;

	workstore_release_port(ws);
	ws->survivors = survivors;
	ws->server = NULL;
	if (old &&
	    !(stuck && want == 0 && cfg->agent_store && !ws->worker_hosted)) {
		/* The previous round's workers are gone; so is their store. */
		store_server_close(old, NULL, NULL);
		old = NULL;
	}
	/* Their torch may refuse the agent store's client (torchstore.h). */
	*by_worker = !cfg->agent_store || ws->worker_hosted;
	if (*by_worker)
		return reserve_port(ws, port);
	/*
	 * The static backend on several nodes, as torchrun's: the workers use
	 * the store on --master_port itself (PyTorch keeps each generation's
	 * keys under /worker/attempt_<n>). Not behind a rendezvous secret,
	 * which PyTorch's clients cannot prove: then they get a store of
	 * their own, said once.
	 */
	if (ws->multi && strcmp(cfg->rdzv_backend, "static") == 0 &&
	    want == 0 && rs != NULL) {
		if (cfg->rdzv.secret_file == NULL) {
			if (old)
				store_server_close(old, NULL, NULL);
			*port = store_server_port(rs);
			return 0;
		}
		if (round == 0)
			log_say("the workers' store cannot share --master_port "
				"with "
				"a rendezvous secret (PyTorch's clients cannot "
				"prove it): it gets a port of its own (pin one "
				"with "
				"--rdzv_conf=store_port=P)");
	}
	rc = store_server_new(ws->loop, NULL, want, &cfg->store, &ws->server);
	if (old) {
		store_server_close(old, NULL, NULL);
		old = NULL;
	}
	if (rc)
		return rc;
	store_server_set_quiet(ws->server, 1);
	*port = store_server_port(ws->server);
	if (stuck)
		log_say("a worker of the last round survived SIGKILL: the "
			"workers' store starts afresh on port %d, without its "
			"connections",
			*port);
	return confine_store(ws, rdzv);
}

void workstore_release_port(struct workstore *ws)
{
	if (ws->port_fd >= 0) {
		close(ws->port_fd);
		ws->port_fd = -1;
	}
}

/*
 * Whether this round's workers go through a relay: store_relay=true, or
 * auto (the default) once their own connections (two per rank for PyTorch
 * <= 1.13's clients, one for 2.x) could take half of the store's connection
 * budget (max_conns, which nofile.c keeps under RLIMIT_NOFILE): with fewer
 * ranks the store serves them directly at no cost, and a relay would only
 * add a hop. Only with several nodes and the agent store (the relay speaks
 * crun's own extensions to it).
 */
static int wants_relay(const struct workstore *ws,
		       const struct worker_round *rp)
{
	const struct crun_cfg *cfg = ws->cfg;
	size_t conns = 2 * (size_t)rp->ranks.world_size;

	if (!ws->multi || !rp->use_agent_store_host ||
	    cfg->rdzv.store_relay == 0)
		return 0;
	return cfg->rdzv.store_relay == 1 || conns >= cfg->store.max_conns / 2;
}

/* The relay lost the workers' store; it closed its workers' connections. */
static void on_relay_lost(struct crun_store_relay *r, int status, void *data)
{
	struct workstore *ws = data;

	(void)r;
	ws->on_lost(ws->data, ws->relay_up, status);
}

int workstore_start_relay(struct workstore *ws, struct worker_round *rp)
{
	struct store_relay_opts o;
	int rc;

	workstore_stop_relay(ws);
	if (!wants_relay(ws, rp))
		return 0;
	memset(&o, 0, sizeof(o));
	o.up_host = rp->master_addr;
	o.up_port = rp->master_port;
	/* Loopback only: the relay has no allow list of its own. */
	o.listen_host = "127.0.0.1";
	o.listen_fd = -1;
	o.lim = &ws->cfg->store;
	o.connect_timeout_ms = 10000;
	rc = store_relay_new(ws->loop, &o, on_relay_lost, ws, &ws->relay);
	if (rc)
		return rc;
	snprintf(ws->relay_up, sizeof(ws->relay_up), "%.256s:%d", o.up_host,
		 o.up_port);
	rp->master_addr = "127.0.0.1";
	rp->master_port = store_relay_port(ws->relay);
	return 0;
}

void workstore_stop_relay(struct workstore *ws)
{
	if (ws->relay == NULL)
		return;
	store_relay_close(ws->relay, NULL, NULL);
	ws->relay = NULL;
}

void workstore_close(struct workstore *ws)
{
	torchprobe_close(ws->probe);
	ws->probe = NULL;
	workstore_release_port(ws);
	workstore_stop_relay(ws);
	if (ws->server) {
		store_server_close(ws->server, NULL, NULL);
		ws->server = NULL;
	}
	peers_free(ws->peers);
	ws->peers = NULL;
}

/* What the workers' torch accepts is known (cached, or asked just now). */
static void torch_known(struct workstore *ws, const struct torchstore *ts)
{
	ws->worker_hosted = ts->kind == TORCHSTORE_NO_LIBUV ||
			    ts->kind == TORCHSTORE_NO_AGENT_STORE;
	if (ts->kind == TORCHSTORE_NO_AGENT_STORE)
		log_say("the workers' torch (%s) predates the agent store "
			"(PyTorch 1.9): they get "
			"TORCHELASTIC_USE_AGENT_STORE=False%s "
			"(docs/compatibility.md)",
			ts->torch_dir,
			ws->multi ? "" : "; worker rank 0 hosts their store");
	else if (ws->worker_hosted)
		log_say("the workers' torch (%s) is built without libuv, and "
			"refuses the agent store's client: they get "
			"USE_LIBUV=0 and TORCHELASTIC_USE_AGENT_STORE=False%s "
			"(docs/compatibility.md)",
			ts->torch_dir,
			ws->multi ? "" : "; worker rank 0 hosts their store");
	else if (ts->kind == TORCHSTORE_UNKNOWN && ws->cfg->verbose)
		log_say("could not ask %s which store its torch accepts (%s): "
			"the agent store it is",
			ws->cfg->python, ts->why);
}

static void on_torch(const struct torchstore *ts, void *data)
{
	struct workstore *ws = data;
	char dir[PATH_MAX], path[PATH_MAX + 64];

	ws->probe = NULL;
	if (ts->kind != TORCHSTORE_UNKNOWN &&
	    logs_user_dir(dir, sizeof(dir)) == 0 &&
	    torchstore_cache_path(dir, ws->cfg->python, getenv("PYTHONPATH"),
				  path, sizeof(path)) == 0)
		torchstore_cache_save(path, ws->cfg->python,
				      getenv("PYTHONPATH"), ts);
	torch_known(ws, ts);
	ws->on_torch(ws->data);
}

/*
 * Python workers on the agent store: does their torch accept its client
 * (torchstore.h)? From the cache at once, else asked (the first run on an
 * interpreter, or after its torch changed).
 */
int workstore_ask_torch(struct workstore *ws, void (*known)(void *data))
{
	const struct crun_cfg *cfg = ws->cfg;
	const char *pp = getenv("PYTHONPATH");
	char dir[PATH_MAX], path[PATH_MAX + 64];
	struct torchstore ts;

	if (cfg->python == NULL || !cfg->agent_store ||
	    cfg->store_probe_timeout <= 0)
		return 0;
	if (logs_user_dir(dir, sizeof(dir)) == 0 &&
	    torchstore_cache_path(dir, cfg->python, pp, path, sizeof(path)) ==
		0 &&
	    torchstore_cache_load(path, cfg->python, pp, &ts) == 0) {
		torch_known(ws, &ts);
		return 0;
	}
	if (cfg->verbose)
		log_say("asking %s which workers' store its torch accepts "
			"(once per interpreter and torch)",
			cfg->python);
	ws->on_torch = known;
	return torchprobe_start(ws->loop, cfg->python, cfg->store_probe_timeout,
				on_torch, ws, &ws->probe) == 0;
}

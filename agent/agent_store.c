/*
 * The workers' store of a round (rank 0's node): a fresh keyspace per round
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
#include "crun/store_relay.h"
#include "agent.h"
#include "nodes.h"

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

/*
 * PyTorch's clients cannot authenticate: the workers' store accepts only
 * loopback, this machine's addresses and the round's nodes (peers.h),
 * unless --rdzv_conf=store_allow=any.
 */
static int agent_confine_store(struct agent *a)
{
	char why[512];
	int rc;

	peers_free(a->peers);
	a->peers = NULL;
	if (a->cfg->rdzv.store_allow_any)
		return 0;
	rc = peers_new(a->multi && nodes_rdzv(a->nodes)
			   ? rdzv_peers(nodes_rdzv(a->nodes))
			   : NULL,
		       &a->peers, why, sizeof(why));
	if (rc)
		return rc;
	if (*why)
		log_say("workers' store: %s: their workers will be refused",
			why);
	store_server_set_allow(a->wstore, peers_allow, a->peers);
	return 0;
}

/*
 * Start the workers' store of a round (called on group rank 0): a fresh
 * keyspace per round serves PyTorch versions that prefix /worker/attempt_<n>
 * and those that expect a new store per attempt alike. Without the agent
 * store, hold a free port for worker rank 0's own TCPStore instead.
 */
int agent__start_master(void *data, int round, int *port, int *by_worker)
{
	struct agent *a = data;
	const struct crun_cfg *cfg = a->cfg;
	struct crun_store_server *rs = nodes_store_server(a->nodes);
	/*
	 * Alone, --master_port names the workers' store; with several nodes
	 * rdzv_conf store_port does (firewalls that open one port), else the
	 * workers get a free port of their own.
	 */
	int want = !a->multi && cfg->master_port >= 0 ? cfg->master_port
		   : a->multi			      ? cfg->rdzv.store_port
						      : 0,
	    rc;

	/*
	 * A worker that survived SIGKILL may still hold a connection to the
	 * old store: the new one must be another port (made while the old one
	 * still holds its own), so that nothing of it is reused or counted.
	 */
	struct crun_store_server *old = a->wstore;
	int stuck = a->pool.survivors > a->store_survivors;

	a->store_survivors = a->pool.survivors;
	a->wstore = NULL;
	if (old &&
	    !(stuck && want == 0 && cfg->agent_store && !a->worker_store)) {
		/* The previous round's workers are gone; so is their store. */
		store_server_close(old, NULL, NULL);
		old = NULL;
	}
	/* Their torch may refuse the agent store's client (torchstore.h). */
	*by_worker = !cfg->agent_store || a->worker_store;
	if (*by_worker)
		return reserve_port(a, port);
	/*
	 * The static backend on several nodes, as torchrun's: the workers use
	 * the store on --master_port itself (PyTorch keeps each generation's
	 * keys under /worker/attempt_<n>). Not behind a rendezvous secret,
	 * which PyTorch's clients cannot prove: then they get a store of
	 * their own, said once.
	 */
	if (a->multi && strcmp(cfg->rdzv_backend, "static") == 0 && want == 0 &&
	    rs != NULL) {
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
	rc = store_server_new(&a->loop, NULL, want, &a->cfg->store, &a->wstore);
	if (old) {
		store_server_close(old, NULL, NULL);
		old = NULL;
	}
	if (rc)
		return rc;
	store_server_set_quiet(a->wstore, 1);
	*port = store_server_port(a->wstore);
	if (stuck)
		log_say("a worker of the last round survived SIGKILL: the "
			"workers' store starts afresh on port %d, without its "
			"connections",
			*port);
	return agent_confine_store(a);
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
static int agent_wants_relay(const struct agent *a,
			     const struct worker_round *rp)
{
	const struct crun_cfg *cfg = a->cfg;
	size_t conns = 2 * (size_t)rp->ranks.world_size;

	if (!a->multi || !rp->use_agent_store_host ||
	    cfg->rdzv.store_relay == 0)
		return 0;
	return cfg->rdzv.store_relay == 1 || conns >= cfg->store.max_conns / 2;
}

/*
 * The relay lost the workers' store, which group rank 0 serves: as when that
 * node stops answering its heartbeat, the round ends as its loss unless it
 * finished (it then served until the end, and the workers finish as they
 * would without the relay: a worker that still asks the store finds its
 * connection closed). The relay has closed its workers' connections.
 */
static void agent_on_relay_lost(struct crun_store_relay *r, int status,
				void *data)
{
	struct agent *a = data;

	(void)r;
	if (a->state != A_RUNNING || a->stop.reason != STOP_NONE)
		return;
	log_say("this node's store relay lost the workers' store at %s (%s): "
		"unless group rank 0 finished, the round ends as its loss",
		a->relay_up, crun_strerror(status));
	rdzv_node_lost(nodes_rdzv(a->nodes), 0,
		       "lost: a node's store relay lost its workers' store");
}

int agent__start_relay(struct agent *a, struct worker_round *rp)
{
	struct store_relay_opts o;
	int rc;

	agent__stop_relay(a);
	if (!agent_wants_relay(a, rp))
		return 0;
	memset(&o, 0, sizeof(o));
	o.up_host = rp->master_addr;
	o.up_port = rp->master_port;
	/* Loopback only: the relay has no allow list of its own. */
	o.listen_host = "127.0.0.1";
	o.listen_fd = -1;
	o.lim = &a->cfg->store;
	o.connect_timeout_ms = 10000;
	rc = store_relay_new(&a->loop, &o, agent_on_relay_lost, a, &a->relay);
	if (rc)
		return rc;
	snprintf(a->relay_up, sizeof(a->relay_up), "%.256s:%d", o.up_host,
		 o.up_port);
	rp->master_addr = "127.0.0.1";
	rp->master_port = store_relay_port(a->relay);
	return 0;
}

void agent__stop_relay(struct agent *a)
{
	if (a->relay == NULL)
		return;
	store_relay_close(a->relay, NULL, NULL);
	a->relay = NULL;
}

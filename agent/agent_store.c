/*
 * The workers' store of a round (rank 0's node): a fresh keyspace per round
 * on the agent's own store server, confined to the round's nodes, or, without
 * the agent store, a free port held for worker rank 0's own TCPStore.
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

#include "agent.h"

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
	rc = peers_new(a->multi && a->rdzv ? rdzv_peers(a->rdzv) : NULL,
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
int agent__start_master(void *data, int round, int *port)
{
	struct agent *a = data;
	const struct crun_cfg *cfg = a->cfg;
	struct crun_store_server *rs = a->rs ? rdzv_store_server(a->rs) : NULL;
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
	if (old && !(stuck && want == 0 && cfg->agent_store)) {
		/* The previous round's workers are gone; so is their store. */
		store_server_close(old, NULL, NULL);
		old = NULL;
	}
	if (!cfg->agent_store)
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

/*
 * Why the agent stops, and with which status: the one record the agent
 * (agent.c) shares with its parts. nodes.c reads and writes it as rounds
 * end on other nodes; everything else of the agent reaches it through
 * agent.c. Private to agent/.
 */
#ifndef CRUN_AGENT_STOP_H
#define CRUN_AGENT_STOP_H

enum agent_state { A_ROUND, A_RUNNING, A_STOPPING, A_DONE };
enum stop_reason { STOP_NONE, STOP_FAILURE, STOP_SIGNAL, STOP_PEER, STOP_STALL };

/* How the round ended elsewhere (rdzv_end_cb), or by our own failure. */
struct peer_end {
	int kind; /* enum rdzv_end_kind, 0: not ended elsewhere */
	int status, signal;
	char why[512];	  /* as recorded, for logs */
	char detail[512]; /* for display: why without its leading status */
};

struct agent_stop {
	enum stop_reason reason; /* why the running group stops, this round */
	int signal;		 /* the first signal received, 0: none */
	int sigint_seen;	 /* a second SIGINT escalates to SIGKILL */
	int leaving;	/* the group is over: waiting for the others to leave */
	int own_status; /* the root failure's status on this node */
	int failed_rank; /* its rank */
	int exit_status; /* crun's exit status once decided */
	struct peer_end peer;
};

#endif

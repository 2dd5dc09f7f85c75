/*
 * Parsers of the rendezvous records (see rdzv.h for the keys). Every value
 * read from the store is untrusted: anyone who reaches the store can write
 * any key, so each parser checks the syntax, the ranges and the arithmetic
 * the algorithm relies on (a group world size of 0 is a division by zero
 * later), and fills why with a lower-case reason on failure. Pure functions
 * on (bytes, length): no NUL terminator is needed, none is assumed. The
 * writers (at the end) format each record a parser reads; plain counters
 * and the closer's list of addresses are written where they are counted.
 */
#ifndef CRUN_RDZV_RECORDS_H
#define CRUN_RDZV_RECORDS_H

#include <stddef.h>
#include <stdint.h>

#include "crun/env.h"
#include "crun/fingerprint.h"

/* Largest nproc a descriptor may announce (PyTorch caps far lower). */
#define RDZV_MAX_NPROC 65536
/* Largest field of a descriptor (host, address, role). */
#define RDZV_MAX_FIELD 255
/* Largest record the parsers accept. */
#define RDZV_MAX_RECORD 1024
/*
 * The rendezvous protocol of this crun, in the job's config record: 2 since
 * waiting reads are WAIT_GET, "assigned" says "ok N" and end marks carry
 * the end; 3 since "closed" is absent until set (joiners peek, not ADD 0),
 * a node that read round R's end joins R+1 without reading "round" and the
 * wait on "assigned" is a WAIT_FIRST_GET (0x65) reading the assignment.
 * Nodes that differ stop at their first request, saying so.
 */
#define RDZV_PROTO 3

/* Largest env-check record (the closer's lines about differing nodes). */
#define RDZV_MAX_ENVCHECK 4096

/*
 * A node's descriptor: "is_host node_rank nproc pid host addr role", then
 * optionally "ip=<a>[,<b>...]" (the node's interface addresses, IPv4 or
 * IPv6 literals: what the workers' store admits, for host names may
 * resolve nowhere) and "env=<fingerprint>" (fingerprint.h; absent when the
 * node does not check, or its fingerprint was not ready in time).
 */
struct rdzv_descr {
	int is_host;
	int node_rank;
	int nproc;
	int pid;
	char host[RDZV_MAX_FIELD + 1];
	char addr[RDZV_MAX_FIELD + 1];
	char role[128];
	char ips[RDZV_MAX_FIELD + 1]; /* "a,b,...", "" when absent */
	struct crun_fingerprint fp;   /* all "" (unknown) when absent */
};

/**
 * A decimal integer in [lo, hi], the whole record (surrounding blanks
 * allowed). 0 or CRUN_EPROTO with why filled.
 */
int rdzv_parse_int(const void *p, size_t len, int64_t lo, int64_t hi,
		   int64_t *out, char *why, size_t wlen);

/**
 * A descriptor of a round of at most max_nodes nodes. Its host (when that
 * field could be read) is copied even on failure, for messages.
 */
int rdzv_parse_descr(const void *p, size_t len, int max_nodes,
		     struct rdzv_descr *d, char *why, size_t wlen);

/**
 * An assignment "group_rank group_world base_rank world base_role_rank
 * role_world local_world" for a round of nodes participants (1..max_nodes)
 * and a node running nproc workers: every rank inside its world.
 */
int rdzv_parse_assign(const void *p, size_t len, int nodes, int nproc,
		      struct crun_ranks *k, char *why, size_t wlen);

/**
 * The "assigned" record: "ok N" (*closed = N, 1..max_nodes), "ok" from an
 * older closer (*closed = 0: read "closed"), or "abort ..." (*closed = -1).
 */
int rdzv_parse_assigned(const void *p, size_t len, int max_nodes, int *closed,
			char *why, size_t wlen);

/**
 * The master record "addr port [worker]": a non-empty address, port
 * 1..65535, and "worker" when worker rank 0 hosts the workers' store there
 * (*by_worker, when not NULL, says which).
 */
int rdzv_parse_master(const void *p, size_t len, char *addr, size_t alen,
		      int *port, int *by_worker, char *why, size_t wlen);

/**
 * An end record "<kind> <why>": kind one of F J D S X. On success *kind is
 * set and the reason (maybe empty) copied into text.
 */
int rdzv_parse_end(const void *p, size_t len, int *kind, char *text,
		   size_t tlen, char *why, size_t wlen);

/* Largest field of the addresses record: "addr,ip,..." of one node. */
#define RDZV_MAX_ADDRS_FIELD (2 * RDZV_MAX_FIELD + 1)

/**
 * The addresses record of a round of nodes participants: exactly that many
 * blank-separated fields of 1..RDZV_MAX_ADDRS_FIELD printable bytes (each
 * node's addresses, comma-separated). *out gets a malloc'd NUL-terminated
 * copy.
 */
int rdzv_parse_addrs(const void *p, size_t len, int nodes, char **out,
		     char *why, size_t wlen);

/**
 * A counter as the backends store it: "N" (the crun store) or "N token"
 * (etcd writes who added last beside the sum). N in [0, INT64_MAX].
 */
int rdzv_parse_counter(const void *p, size_t len, int64_t *out, char *why,
		       size_t wlen);

/* The job's "config" record: what every agent of the job agreed on. */
struct rdzv_config {
	int min_nodes, max_nodes;
	char backend[32];
	int exclude_after;  /* 0: no node is ever left out */
	double exclude_for; /* seconds (with exclude_after > 0) */
};

/**
 * The job's "config" record "nnodes=MIN:MAX backend=B [exclude=K:S]
 * [proto=P]" (rdzv.c writes it): 1 <= MIN <= MAX <= max_nodes, B a word of
 * at most 31 bytes, K 1..32, S seconds as %g prints them, P 1..999 (absent:
 * a crun before proto=2).
 */
int rdzv_parse_config(const void *p, size_t len, int max_nodes,
		      struct rdzv_config *out, char *why, size_t wlen);

/* The job's "params" record: what every agent was started with. */
struct rdzv_params {
	int max_restarts;  /* 0..INT32_MAX */
	int keep_alive_ms; /* heartbeat interval, 1..3600000 */
};

/** "max_restarts=N keep_alive_ms=N" (written by each agent as it joins). */
int rdzv_parse_params(const void *p, size_t len, struct rdzv_params *out,
		      char *why, size_t wlen);

/* The job's last worker failure (the "failure" record). */
struct rdzv_failure {
	int round;	 /* the round it ended */
	int64_t unix_ms; /* the failing node's wall clock, ms since 1970 */
	int exit_code;	 /* 128 + N: killed by signal N */
	int rank;	 /* global rank of the worker */
	int local_rank;
	char host[RDZV_MAX_FIELD + 1];
};

/**
 * "<round> <unix_ms> <code> rank <r> (local rank <l>) on <host> exited
 * with <code>": the round, the time and the reason of the end record of a
 * failure (rdzv_end_round writes it; the agent words the reason).
 */
int rdzv_parse_failure(const void *p, size_t len, struct rdzv_failure *f,
		       char *why, size_t wlen);

/**
 * The env-check record of a round: "-" (nothing differs), or up to 16
 * lines ended by '\n' of printable ASCII, at most RDZV_MAX_ENVCHECK bytes.
 * On success text gets the lines (maybe ""), NUL-terminated.
 */
int rdzv_parse_envcheck(const void *p, size_t len, char *text, size_t tlen,
			char *why, size_t wlen);

/* Most workers an init-diagnosis record describes (two hex bit masks). */
#define RDZV_DIAG_MAX_NPROC 1024

/*
 * A node's init-diagnosis record (agent/initdiag.c), "group_rank base_rank
 * nproc connected trying host": which of its local ranks hold a connection
 * to the workers' store, and which are still trying (SYN sent). Each mask
 * is ceil(nproc / 4) hex digits, digit i holding local ranks 4i..4i+3 (bit
 * 1 << (r % 4)); no bit past nproc may be set.
 */
struct rdzv_diag {
	int group_rank;
	int base_rank;
	int nproc;
	unsigned char connected[RDZV_DIAG_MAX_NPROC];
	unsigned char trying[RDZV_DIAG_MAX_NPROC];
	char host[RDZV_MAX_FIELD + 1];
};

/**
 * An init-diagnosis record of a round of nodes nodes and world ranks: the
 * group rank below nodes, the node's ranks inside the world.
 */
int rdzv_parse_diag(const void *p, size_t len, int nodes, int world,
		    struct rdzv_diag *d, char *why, size_t wlen);

/*
 * Leaving out a failing node (--rdzv_conf=exclude_after=K,exclude_for=S).
 * A node is known by its host name, its address and the id its agent drew
 * at start (several agents on one machine share the first two): the
 * records write the address field as "<addr>#<id>". A field without '#'
 * (an older crun) has an empty id, which is no agent's.
 */
/* Longest node id (lower-case hex). */
#define RDZV_MAX_ID 16
/* Largest exclude_after, and most entries of the failure history. */
#define RDZV_MAX_FAILS 32
/* Most nodes left out at once. */
#define RDZV_MAX_EXCLUDED 32
/* Largest "fails" or "excluded" record. */
#define RDZV_MAX_LIST_RECORD 20000

/* One failure-ended round of the history: who failed first. */
struct rdzv_fail {
	int round;
	char host[RDZV_MAX_FIELD + 1];
	char addr[RDZV_MAX_FIELD + 1];
	char id[RDZV_MAX_ID + 1];
};

/* One node left out of the rounds (see rdzv.h, "excluded"). */
struct rdzv_exclusion {
	char host[RDZV_MAX_FIELD + 1];
	char addr[RDZV_MAX_FIELD + 1];
	char id[RDZV_MAX_ID + 1];
	int64_t until; /* epoch seconds (the excluded node's own clock) */
	int round;     /* the round whose failure left it out */
	int fails;     /* how many failure-ended rounds in a row were its */
};

/**
 * The failure history "<n> <round> <host> <addr> ..." (n entries, n in
 * 0..max, max <= RDZV_MAX_FAILS): rounds in 0..INT32_MAX, increasing.
 * *n gets the count. 0 or CRUN_EPROTO with why filled.
 */
int rdzv_parse_fails(const void *p, size_t len, struct rdzv_fail *f, int max,
		     int *n, char *why, size_t wlen);

/**
 * The exclusions "<n> <host> <addr> <until> <round> <fails> ..." (n in
 * 0..max, max <= RDZV_MAX_EXCLUDED): until in 0..2^40, round in
 * 0..INT32_MAX, fails in 1..RDZV_MAX_FAILS, no node twice.
 */
int rdzv_parse_excluded(const void *p, size_t len, struct rdzv_exclusion *x,
			int max, int *n, char *why, size_t wlen);

/* Leeway for the clocks of other nodes when reading an until (s). */
#define RDZV_EXCLUDE_SKEW_S 60

/**
 * Whether every entry of x[0..n) ends at most exclude_for seconds after
 * now (rounded up, plus RDZV_EXCLUDE_SKEW_S), as a node's own exclusion
 * does: a later one is forged, or from a job with other settings, and the
 * agents read the record as no node left out. 0, or CRUN_EPROTO with why
 * naming the first entry beyond.
 */
int rdzv_check_excluded(const struct rdzv_exclusion *x, int n, int64_t now,
			double exclude_for, char *why, size_t wlen);

/* Where one rank was when the job hung (pystack.h's label). */
#define RDZV_MAX_STALL_WHERE 127
struct rdzv_stall_rank {
	int rank;
	char where[RDZV_MAX_STALL_WHERE + 1];
};

/**
 * A node's stall record, written after an "H" end: "<host> <n>", then n
 * lines "<rank> <where>" (where: printable, blanks allowed, at most
 * RDZV_MAX_STALL_WHERE bytes), at most RDZV_MAX_LIST_RECORD bytes. Fills
 * host (hlen bytes) and up to max entries of r, *n how many (n > max is
 * refused).
 */
int rdzv_parse_stall(const void *p, size_t len, char *host, size_t hlen,
		     struct rdzv_stall_rank *r, int max, int *n, char *why,
		     size_t wlen);

/*
 * The writers: each formats the record its parser above reads back into
 * buf (len bytes, NUL-terminated; what does not fit is cut, as snprintf
 * does) and returns the length written, at most len - 1.
 */

/* What a descriptor is written from (rdzv_descr is what is read back). */
struct rdzv_descr_in {
	int is_host;
	int node_rank;
	int nproc;
	int pid;
	const char *host, *addr, *role;
	const char *ips; /* "a,b,...": as many whole ones as fit, or NULL */
	const char *env; /* the fingerprint (fingerprint.h), "" or NULL */
};

/** A descriptor, at most RDZV_MAX_RECORD bytes when its fields fit. */
size_t rdzv_format_descr(char *buf, size_t len, const struct rdzv_descr_in *d);

/** An assignment (rdzv_parse_assign). */
size_t rdzv_format_assign(char *buf, size_t len, const struct crun_ranks *k);

/** "assigned" once the round closed with closed nodes: "ok N". */
size_t rdzv_format_assigned(char *buf, size_t len, int closed);

/** "assigned" of a round aborted while forming: "abort <kind> <why>". */
size_t rdzv_format_abort(char *buf, size_t len, int kind, const char *why);

/** Where the workers' store is (rdzv_parse_master). */
size_t rdzv_format_master(char *buf, size_t len, const char *addr, int port,
			  int by_worker);

/** An end record or end mark: "<kind> <why>" (rdzv_parse_end). */
size_t rdzv_format_end(char *buf, size_t len, int kind, const char *why);

/** The job's config (rdzv_parse_config); exclude_after 0: no exclusion. */
size_t rdzv_format_config(char *buf, size_t len, int min, int max,
			  const char *backend, int exclude_after,
			  double exclude_for);

/** The job's "params" record (rdzv_parse_params). */
size_t rdzv_format_params(char *buf, size_t len, int max_restarts,
			  long long keep_alive_ms);

/** The "failure" record: the round, the time, the end's reason. */
size_t rdzv_format_failure(char *buf, size_t len, int round, int64_t unix_ms,
			   const char *why);

/** The failure history "fails" (rdzv_parse_fails). */
size_t rdzv_format_fails(char *buf, size_t len, const struct rdzv_fail *f,
			 int n);

/**
 * A node's stall record "r<R>/stall/<g>" (rdzv_parse_stall): its host and
 * where each of its ranks was when the job hung.
 */
size_t rdzv_format_stall(char *buf, size_t len, const char *host,
			 const struct rdzv_stall_rank *r, int n);

/** The nodes left out, "excluded" (rdzv_parse_excluded). */
size_t rdzv_format_excluded(char *buf, size_t len,
			    const struct rdzv_exclusion *x, int n);

#endif

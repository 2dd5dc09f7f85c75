/*
 * The host's TCP sockets, as the kernel lists them: rows of /proc/net/tcp and
 * tcp6, or sock_diag's dump of the sockets to one port. Used by the agent's
 * init diagnosis to see which workers reach their store; no state, no loop.
 */
#ifndef CRUN_TCPTAB_H
#define CRUN_TCPTAB_H

#include <stddef.h>
#include <stdint.h>

/* One socket: addresses as 16 bytes (IPv4 mapped into IPv6). */
struct tcptab_row {
	unsigned char local[16], remote[16];
	int local_port, remote_port;
	int state; /* 1 ESTABLISHED, 2 SYN_SENT, ... (the kernel's numbers) */
	uint64_t inode;
};

/** Called once per socket, during the call that reads them. */
typedef void (*tcptab_cb)(void *data, const struct tcptab_row *t);

/** Parse one row of /proc/net/tcp or tcp6 (not the header); 0 or -1. */
int tcptab_parse_row(const char *line, struct tcptab_row *t);

/**
 * Every row of the table at path ("/proc/net/tcp"), its first max_rows rows
 * only (a bound, not a full answer: a host that large has sock_diag).
 * Returns 0, or a negative errno when the file cannot be opened.
 */
int tcptab_read(const char *path, int max_rows, tcptab_cb cb, void *data);

/* What tcptab_dump_port asks for. */
enum {
	TCPTAB_TO_PORT,	  /* ESTABLISHED or SYN_SENT, to the remote port */
	TCPTAB_LISTENING, /* LISTEN, on the local port */
};

/**
 * The host's sockets of family (AF_INET, AF_INET6) on port as which says,
 * from sock_diag (the kernel filters: sockets of other ports and states,
 * TIME_WAIT ones by the thousand, cost nothing), at most max_bytes of
 * replies (cut there: a later call looks again). Non-blocking. Returns 0,
 * or -1 when sock_diag is not there or refuses the request (then read the
 * table instead).
 */
int tcptab_dump_port(int family, int port, int which, size_t max_bytes,
		     tcptab_cb cb, void *data);

#endif

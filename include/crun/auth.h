/*
 * The rendezvous secret: a mutual HMAC-SHA256 challenge-response (libsodium)
 * that agents and the rendezvous store host run on connect, before any
 * other request, when the job has a secret file (--rdzv_conf=secret_file=,
 * CRUN_RDZV_SECRET_FILE or [rendezvous] secret_file).
 *
 * On the wire (crun-only opcode STORE_OP_AUTH, outside PyTorch's range,
 * carrying one length-prefixed string; see store_wire.h):
 *   client -> AUTH(Nc)               32 random bytes
 *   server <- Ns || HMAC(K, "crun-auth-server" || Nc || Ns)   64 bytes
 *   client -> AUTH(HMAC(K, "crun-auth-client" || Nc || Ns))
 * The client checks the server's MAC before it proves anything, the server
 * checks the client's before it serves anything; both compare in constant
 * time. K is the BLAKE2b hash of the secret file's bytes (trailing newlines
 * dropped), so any file content of 1..CRUN_AUTH_MAX_SECRET bytes works.
 * Fresh nonces on both sides make every MAC single-use: a recorded exchange
 * cannot be replayed, and neither side can be used as an oracle for the
 * other's proof because the labels differ.
 */
#ifndef CRUN_AUTH_H
#define CRUN_AUTH_H

#include <stddef.h>

#define CRUN_AUTH_KEY_LEN 32
#define CRUN_AUTH_NONCE_LEN 32
#define CRUN_AUTH_MAC_LEN 32
/* The server's challenge: its nonce and its MAC. */
#define CRUN_AUTH_CHALLENGE_LEN (CRUN_AUTH_NONCE_LEN + CRUN_AUTH_MAC_LEN)
/*
 * What a store with a secret answers to a PING that comes before the AUTH
 * exchange, just before it closes: a crun client without the secret can
 * then tell "needs a secret" from "not a crun store".
 */
#define CRUN_AUTH_NEEDED 0x54554143u /* "CAUT" */
/* Largest secret file read (bytes). */
#define CRUN_AUTH_MAX_SECRET 4096

struct crun_auth_key {
	unsigned char k[CRUN_AUTH_KEY_LEN];
};

/* One side's state during one handshake. */
struct crun_auth_hs {
	unsigned char nc[CRUN_AUTH_NONCE_LEN];
	unsigned char ns[CRUN_AUTH_NONCE_LEN];
	int step; /* 0 nothing yet, 1 challenged, 2 done */
};

/**
 * Read the secret file at path: a regular file of 1..CRUN_AUTH_MAX_SECRET
 * bytes (after dropping trailing newlines) that neither group nor others
 * can read or write (like ssh's keys: refused otherwise). 0, or a negative
 * code with a one-line errmsg naming the file.
 */
int auth_key_load(const char *path, struct crun_auth_key *key, char *errmsg,
		  size_t errlen);

/** The key for secret bytes (tests, and the SLURM-derived secret). */
int auth_key_from(const void *secret, size_t n, struct crun_auth_key *key);

/** Client: start a handshake; the nonce to send in the first AUTH. */
void auth_client_hello(struct crun_auth_hs *hs,
		       unsigned char nc[CRUN_AUTH_NONCE_LEN]);

/**
 * Client: check the server's challenge (CRUN_AUTH_CHALLENGE_LEN bytes) and
 * compute the proof to send. 0, or CRUN_EAUTH if the server does not know
 * the secret (then send nothing more).
 */
int auth_client_answer(const struct crun_auth_key *key, struct crun_auth_hs *hs,
		       const unsigned char *challenge,
		       unsigned char proof[CRUN_AUTH_MAC_LEN]);

/**
 * Server: the first AUTH (the client's nonce, len bytes) -> the challenge
 * to send back. CRUN_EAUTH for a wrong length or a repeated hello.
 */
int auth_server_challenge(const struct crun_auth_key *key,
			  struct crun_auth_hs *hs, const unsigned char *nc,
			  size_t len,
			  unsigned char out[CRUN_AUTH_CHALLENGE_LEN]);

/**
 * Server: the second AUTH (the client's proof). 0 once the client proved
 * the secret, else CRUN_EAUTH.
 */
int auth_server_check(const struct crun_auth_key *key, struct crun_auth_hs *hs,
		      const unsigned char *proof, size_t len);

/* ---- where the exchange runs (store_conn.c, store_aclient.c) --------- */

struct crun_store_server;
struct crun_store_aclient;
struct sockaddr;

/**
 * Make every client of srv prove key (a copy is kept) before any request
 * but VALIDATE; NULL turns it off. A client that skips or fails the
 * exchange is closed, and the store logs one line naming it.
 */
void store_server_set_auth(struct crun_store_server *srv,
			   const struct crun_auth_key *key);

/** Whether the peer may connect: nonzero to accept. */
typedef int (*store_allow_cb)(void *data, const struct sockaddr *peer);

/**
 * Accept only the peers cb allows (NULL: any); the others are closed at
 * accept with one log line. data must outlive srv or the next call.
 */
void store_server_set_allow(struct crun_store_server *srv, store_allow_cb cb,
			    void *data);

/**
 * Prove key on every connection of c (a copy is kept), and require the
 * server to prove it too. Call right after store_aclient_new, before the
 * loop runs. A server that does not know the secret (or has none) makes
 * the connect fail with CRUN_EAUTH, without retrying.
 */
void store_aclient_set_auth(struct crun_store_aclient *c,
			    const struct crun_auth_key *key);

#endif

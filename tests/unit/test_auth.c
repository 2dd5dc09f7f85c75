/*
 * The rendezvous secret (src/store/auth.c): the secret file's checks, the
 * handshake's two halves against each other, and an async client against
 * a store server on one loop: same secret served, wrong secret and no
 * secret refused with CRUN_EAUTH, a client that skips the exchange closed.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include "crun/auth.h"
#include "crun/err.h"
#include "crun/store.h"

static void write_file(const char *path, const void *p, size_t n, int mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	cr_assert(fd >= 0);
	cr_assert_eq(write(fd, p, n), (ssize_t)n);
	close(fd);
	cr_assert_eq(chmod(path, (mode_t)mode), 0);
}

Test(auth, secret_file_checks, .timeout = 20)
{
	char dir[] = "/tmp/crun-auth-XXXXXX", path[300], err[400];
	struct crun_auth_key k1, k2;
	char big[CRUN_AUTH_MAX_SECRET + 10];

	cr_assert_not_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/s", dir);
	write_file(path, "hunter2\n", 8, 0600);
	cr_assert_eq(auth_key_load(path, &k1, err, sizeof(err)), 0, "%s", err);
	/* The trailing newline does not count: printf and echo agree. */
	cr_assert_eq(auth_key_from("hunter2", 7, &k2), 0);
	cr_assert_eq(memcmp(k1.k, k2.k, sizeof(k1.k)), 0);
	write_file(path, "hunter2", 7, 0640);
	cr_assert_neq(auth_key_load(path, &k1, err, sizeof(err)), 0);
	cr_assert(strstr(err, "chmod 600") != NULL, "%s", err);
	write_file(path, "\n\n", 2, 0600);
	cr_assert_neq(auth_key_load(path, &k1, err, sizeof(err)), 0);
	cr_assert(strstr(err, "is empty") != NULL, "%s", err);
	memset(big, 'x', sizeof(big));
	write_file(path, big, sizeof(big), 0600);
	cr_assert_eq(auth_key_load(path, &k1, err, sizeof(err)), CRUN_ETOOBIG);
	unlink(path);
	cr_assert_neq(auth_key_load(path, &k1, err, sizeof(err)), 0);
	cr_assert(strstr(err, path) != NULL, "%s", err);
	cr_assert_neq(auth_key_load(dir, &k1, err, sizeof(err)), 0);
	rmdir(dir);
}

Test(auth, handshake_halves, .timeout = 20)
{
	struct crun_auth_key k, wrong;
	struct crun_auth_hs c, s, s2;
	unsigned char nc[CRUN_AUTH_NONCE_LEN], ch[CRUN_AUTH_CHALLENGE_LEN];
	unsigned char proof[CRUN_AUTH_MAC_LEN];

	auth_key_from("secret", 6, &k);
	auth_key_from("other", 5, &wrong);
	/* Same key: both sides verify. */
	memset(&s, 0, sizeof(s));
	auth_client_hello(&c, nc);
	cr_assert_eq(auth_server_challenge(&k, &s, nc, sizeof(nc), ch), 0);
	cr_assert_eq(auth_client_answer(&k, &c, ch, proof), 0);
	cr_assert_eq(auth_server_check(&k, &s, proof, sizeof(proof)), 0);
	/* A replayed proof fails on a fresh server handshake. */
	memset(&s2, 0, sizeof(s2));
	cr_assert_eq(auth_server_challenge(&k, &s2, nc, sizeof(nc), ch), 0);
	cr_assert_eq(auth_server_check(&k, &s2, proof, sizeof(proof)),
		     CRUN_EAUTH);
	/* The client refuses a server with another key. */
	memset(&s, 0, sizeof(s));
	auth_client_hello(&c, nc);
	cr_assert_eq(auth_server_challenge(&wrong, &s, nc, sizeof(nc), ch), 0);
	cr_assert_eq(auth_client_answer(&k, &c, ch, proof), CRUN_EAUTH);
	/* The server refuses a client with another key, and a short proof. */
	memset(&s, 0, sizeof(s));
	auth_client_hello(&c, nc);
	cr_assert_eq(auth_server_challenge(&k, &s, nc, sizeof(nc), ch), 0);
	cr_assert_eq(auth_client_answer(&k, &c, ch, proof), 0);
	proof[0] ^= 1;
	cr_assert_eq(auth_server_check(&k, &s, proof, sizeof(proof)),
		     CRUN_EAUTH);
	memset(&s, 0, sizeof(s));
	cr_assert_eq(auth_server_challenge(&k, &s, nc, 5, ch), CRUN_EAUTH);
	/* Out of order: a proof before any challenge, a second hello. */
	memset(&s, 0, sizeof(s));
	cr_assert_eq(auth_server_check(&k, &s, proof, sizeof(proof)),
		     CRUN_EAUTH);
	cr_assert_eq(auth_server_challenge(&k, &s, nc, sizeof(nc), ch), 0);
	cr_assert_eq(auth_server_challenge(&k, &s, nc, sizeof(nc), ch),
		     CRUN_EAUTH);
}

/* ---- an async client against a server on one loop --------------------- */

struct run {
	int status;
	int done;
	int64_t num;
};

static void on_add(struct crun_store_aclient *c, int status,
		   const struct crun_store_reply *r, void *data)
{
	struct run *x = data;

	x->status = status;
	x->num = status == 0 ? r->num : 0;
	x->done = 1;
}

/* Connect with ckey (NULL: none) to a server with skey; ADD once. */
static struct run try_add(const struct crun_auth_key *skey,
			  const struct crun_auth_key *ckey)
{
	uv_loop_t loop;
	struct crun_store_server *srv;
	struct crun_store_aclient *c;
	struct crun_store_limits lim;
	struct run x = {0, 0, 0};

	cr_assert_eq(uv_loop_init(&loop), 0);
	store_limits_default(&lim);
	cr_assert_eq(store_server_new(&loop, "127.0.0.1", 0, &lim, &srv), 0);
	store_server_set_quiet(srv, 1);
	store_server_set_auth(srv, skey);
	cr_assert_eq(store_aclient_new(&loop, "127.0.0.1",
				       store_server_port(srv), 3000, NULL, NULL,
				       &c),
		     0);
	store_aclient_set_auth(c, ckey);
	cr_assert_eq(store_aclient_add(c, "k", 5, on_add, &x), 0);
	while (!x.done)
		uv_run(&loop, UV_RUN_ONCE);
	store_aclient_close(c, NULL, NULL);
	store_server_close(srv, NULL, NULL);
	uv_run(&loop, UV_RUN_DEFAULT);
	cr_assert_eq(uv_loop_close(&loop), 0);
	return x;
}

Test(auth, client_against_server, .timeout = 20)
{
	struct crun_auth_key k, wrong;
	struct run x;

	auth_key_from("secret", 6, &k);
	auth_key_from("other", 5, &wrong);
	x = try_add(&k, &k);
	cr_assert_eq(x.status, 0, "%s", crun_strerror(x.status));
	cr_assert_eq(x.num, 5);
	x = try_add(&k, &wrong);
	cr_assert_eq(x.status, CRUN_EAUTH, "%s", crun_strerror(x.status));
	x = try_add(&k, NULL);
	cr_assert_eq(x.status, CRUN_EAUTH, "%s", crun_strerror(x.status));
	x = try_add(NULL, &k);
	cr_assert_eq(x.status, CRUN_EAUTH, "%s", crun_strerror(x.status));
	x = try_add(NULL, NULL);
	cr_assert_eq(x.status, 0, "%s", crun_strerror(x.status));
}

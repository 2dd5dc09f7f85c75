/*
 * The rendezvous secret (see auth.h): loading the secret file and the two
 * halves of the HMAC-SHA256 challenge-response, all on libsodium
 * (crypto_auth_hmacsha256, randombytes_buf, crypto_verify_32,
 * crypto_generichash). No I/O besides reading the file; the store server
 * and the async client carry the bytes.
 *
 * Failure modes: an unreadable, empty, oversized or group/world-accessible
 * secret file (errmsg names it); a MAC that does not verify (CRUN_EAUTH);
 * a handshake message of the wrong length or out of order (CRUN_EAUTH).
 */
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include "crun/auth.h"
#include "crun/err.h"

static const char auth_label_server[] = "crun-auth-server";
static const char auth_label_client[] = "crun-auth-client";

/* HMAC(K, label || nc || ns). */
static void auth_mac(const struct crun_auth_key *key, const char *label,
		     const struct crun_auth_hs *hs,
		     unsigned char out[CRUN_AUTH_MAC_LEN])
{
	crypto_auth_hmacsha256_state st;

	crypto_auth_hmacsha256_init(&st, key->k, sizeof(key->k));
	crypto_auth_hmacsha256_update(&st, (const unsigned char *)label,
				      strlen(label));
	crypto_auth_hmacsha256_update(&st, hs->nc, sizeof(hs->nc));
	crypto_auth_hmacsha256_update(&st, hs->ns, sizeof(hs->ns));
	crypto_auth_hmacsha256_final(&st, out);
	sodium_memzero(&st, sizeof(st));
}

int auth_key_from(const void *secret, size_t n, struct crun_auth_key *key)
{
	if (sodium_init() < 0)
		return UV_ENOSYS;
	if (n == 0)
		return UV_EINVAL;
	crypto_generichash(key->k, sizeof(key->k), secret, n, NULL, 0);
	return 0;
}

int auth_key_load(const char *path, struct crun_auth_key *key, char *errmsg,
		  size_t errlen)
{
	unsigned char buf[CRUN_AUTH_MAX_SECRET + 1];
	struct stat st;
	size_t n = 0;
	ssize_t got;
	int fd = -1, rc = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		rc = -errno;
		snprintf(errmsg, errlen, "secret file '%s': %s", path,
			 strerror(errno));
		goto out;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		rc = UV_EINVAL;
		snprintf(errmsg, errlen, "secret file '%s': not a regular file",
			 path);
		goto out;
	}
#ifndef _WIN32
	/* (On Windows, who may read it is the file's ACL, which mode bits do
	 * not show: a file in the user's profile is the user's.) */
	if (st.st_mode & (S_IRWXG | S_IRWXO)) {
		rc = UV_EPERM;
		snprintf(errmsg, errlen,
			 "secret file '%s' is accessible to group or others "
			 "(mode %04o): chmod 600 it",
			 path, (unsigned)(st.st_mode & 07777));
		goto out;
	}
#endif
	while (n < sizeof(buf) &&
	       (got = read(fd, buf + n, sizeof(buf) - n)) != 0) {
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			rc = -errno;
			snprintf(errmsg, errlen, "secret file '%s': %s", path,
				 strerror(errno));
			goto out;
		}
		n += (size_t)got;
	}
	if (n > CRUN_AUTH_MAX_SECRET) {
		rc = CRUN_ETOOBIG;
		snprintf(errmsg, errlen,
			 "secret file '%s' is larger than %d bytes", path,
			 CRUN_AUTH_MAX_SECRET);
		goto out;
	}
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
		n--;
	if (n == 0) {
		rc = UV_EINVAL;
		snprintf(errmsg, errlen, "secret file '%s' is empty", path);
		goto out;
	}
	rc = auth_key_from(buf, n, key);
	if (rc != 0)
		snprintf(errmsg, errlen, "secret file '%s': libsodium failed",
			 path);
out:
	sodium_memzero(buf, sizeof(buf));
	if (fd >= 0)
		close(fd);
	return rc;
}

void auth_client_hello(struct crun_auth_hs *hs,
		       unsigned char nc[CRUN_AUTH_NONCE_LEN])
{
	memset(hs, 0, sizeof(*hs));
	randombytes_buf(hs->nc, sizeof(hs->nc));
	memcpy(nc, hs->nc, sizeof(hs->nc));
	hs->step = 1;
}

int auth_client_answer(const struct crun_auth_key *key, struct crun_auth_hs *hs,
		       const unsigned char *challenge,
		       unsigned char proof[CRUN_AUTH_MAC_LEN])
{
	unsigned char want[CRUN_AUTH_MAC_LEN];
	int ok;

	if (hs->step != 1)
		return CRUN_EAUTH;
	memcpy(hs->ns, challenge, sizeof(hs->ns));
	auth_mac(key, auth_label_server, hs, want);
	ok = crypto_verify_32(want, challenge + CRUN_AUTH_NONCE_LEN) == 0;
	hs->step = 2;
	if (!ok)
		return CRUN_EAUTH;
	auth_mac(key, auth_label_client, hs, proof);
	return 0;
}

int auth_server_challenge(const struct crun_auth_key *key,
			  struct crun_auth_hs *hs, const unsigned char *nc,
			  size_t len,
			  unsigned char out[CRUN_AUTH_CHALLENGE_LEN])
{
	if (hs->step != 0 || len != CRUN_AUTH_NONCE_LEN)
		return CRUN_EAUTH;
	memcpy(hs->nc, nc, sizeof(hs->nc));
	randombytes_buf(hs->ns, sizeof(hs->ns));
	memcpy(out, hs->ns, sizeof(hs->ns));
	auth_mac(key, auth_label_server, hs, out + CRUN_AUTH_NONCE_LEN);
	hs->step = 1;
	return 0;
}

int auth_server_check(const struct crun_auth_key *key, struct crun_auth_hs *hs,
		      const unsigned char *proof, size_t len)
{
	unsigned char want[CRUN_AUTH_MAC_LEN];

	if (hs->step != 1 || len != CRUN_AUTH_MAC_LEN)
		return CRUN_EAUTH;
	hs->step = 2; /* one try */
	auth_mac(key, auth_label_client, hs, want);
	return crypto_verify_32(want, proof) == 0 ? 0 : CRUN_EAUTH;
}

/*
 * The blocking store client, for C programs and tests: plain non-blocking
 * sockets driven by poll() against a deadline, one request at a time. It
 * speaks G3 (VALIDATE and PING on every connect) or, on request, G0 for
 * PyTorch <= 1.13 servers.
 *
 * The only delicate part is a WAIT that times out. The server keeps the wait
 * registered and may still answer it. In G3 the client sends CANCEL_WAIT and
 * reads until the WAIT_CANCELED byte, swallowing a STOP_WAITING that won the
 * race. G0 has no cancel, and PyTorch 1.13's own client simply leaves the
 * late byte to be misread by its next request; this client reconnects
 * instead, so the stream never desynchronises.
 */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uv.h>
#ifndef _WIN32
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>
#endif

#include "crun/err.h"
#include "crun/store.h"
#include "store_wire.h"

struct crun_store_client {
	int fd; /* -1 once broken */
	enum store_gen gen;
	int timeout_ms; /* default per call; -1: none */
	char *host;
	int port;
	struct store_buf out;
};

/*
 * The socket calls, the same on Linux and Windows: errors as libuv's codes
 * (-errno on Linux, Winsock's translated on Windows).
 */
#ifdef _WIN32
#define MSG_NOSIGNAL 0
#define sk_close(fd) closesocket((SOCKET)(fd))
#define sk_poll(p, n, t) WSAPoll((p), (n), (t))
#define sk_err() uv_translate_sys_error(WSAGetLastError())
#define SK_INPROGRESS UV_EAGAIN /* a non-blocking connect: "would block" */

/* A non-blocking TCP socket, or -1 (sk_err). */
static int sk_socket(const struct addrinfo *ai)
{
	SOCKET s = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
	u_long on = 1;

	if (s == INVALID_SOCKET)
		return -1;
	if (ioctlsocket(s, FIONBIO, &on) != 0) {
		closesocket(s);
		return -1;
	}
	return (int)s;
}
#else
#define sk_close(fd) close(fd)
#define sk_poll(p, n, t) poll((p), (n), (t))
#define sk_err() (-errno)
#define SK_INPROGRESS (-EINPROGRESS)

static int sk_socket(const struct addrinfo *ai)
{
	return socket(ai->ai_family,
		      ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
		      ai->ai_protocol);
}
#endif

/* Milliseconds on the monotonic clock. */
static int64_t store_client_now(void)
{
	return (int64_t)(uv_hrtime() / 1000000);
}

/* The deadline of a timeout (-1: none). */
static int64_t store_client_deadline(int timeout_ms)
{
	return timeout_ms < 0 ? -1 : store_client_now() + timeout_ms;
}

/* Poll fd for events until deadline: 0, CRUN_ETIMEDOUT or an error. */
static int store_client_poll(int fd, short events, int64_t deadline)
{
	struct pollfd pfd = {fd, events, 0};
	int64_t left;
	int rc;

	for (;;) {
		left = deadline < 0 ? -1 : deadline - store_client_now();
		if (deadline >= 0 && left < 0)
			left = 0;
		rc = sk_poll(&pfd, 1, left > 1000000 ? 1000000 : (int)left);
		if (rc > 0)
			return 0;
		if (rc == 0 && deadline >= 0 && store_client_now() >= deadline)
			return CRUN_ETIMEDOUT;
		if (rc < 0 && (rc = sk_err()) != UV_EINTR)
			return rc;
	}
}

/* Connect once to one address before deadline: the fd or an error. */
static int store_client_try(const struct addrinfo *ai, int64_t deadline)
{
	socklen_t len = sizeof(int);
	int fd, rc, err = 0, one = 1;

	fd = sk_socket(ai);
	if (fd < 0)
		return sk_err();
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, (const void *)&one,
		   sizeof(one));
	if (connect(fd, ai->ai_addr, (socklen_t)ai->ai_addrlen) != 0) {
		rc = sk_err();
		if (rc != SK_INPROGRESS)
			goto fail;
		rc = store_client_poll(fd, POLLOUT, deadline);
		if (rc != 0)
			goto fail;
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, (void *)&err, &len) !=
		    0)
			err = -sk_err();
		if (err != 0) {
			rc = uv_translate_sys_error(err);
			goto fail;
		}
	}
	return fd;
fail:
	sk_close(fd);
	return rc;
}

/* Write all of buf before deadline. */
static int store_client_write(struct crun_store_client *c,
			      const unsigned char *buf, size_t len,
			      int64_t deadline)
{
	ssize_t n;
	int rc;

	while (len > 0) {
		n = send(c->fd, (const void *)buf,
			 len > INT32_MAX ? INT32_MAX : len, MSG_NOSIGNAL);
		if (n > 0) {
			buf += n;
			len -= (size_t)n;
			continue;
		}
		rc = n < 0 ? sk_err() : UV_EAGAIN;
		if (rc == UV_EINTR)
			continue;
		if (rc != UV_EAGAIN)
			return rc;
		rc = store_client_poll(c->fd, POLLOUT, deadline);
		if (rc != 0)
			return rc;
	}
	return 0;
}

/* Read exactly len bytes before deadline (UV_EOF if the server closed). */
static int store_client_read(struct crun_store_client *c, void *dst, size_t len,
			     int64_t deadline)
{
	unsigned char *p = dst;
	ssize_t n;
	int rc;

	while (len > 0) {
		n = recv(c->fd, (void *)p, len > INT32_MAX ? INT32_MAX : len,
			 0);
		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (n == 0)
			return UV_EOF;
		rc = sk_err();
		if (rc == UV_EINTR)
			continue;
		if (rc != UV_EAGAIN)
			return rc;
		rc = store_client_poll(c->fd, POLLIN, deadline);
		if (rc != 0)
			return rc;
	}
	return 0;
}

/* Mark the connection broken after err (anything but a clean result). */
static int store_client_broken(struct crun_store_client *c, int err)
{
	if (err < 0 && c->fd >= 0) {
		sk_close(c->fd);
		c->fd = -1;
	}
	return err;
}

/* Send c->out (then empty it). */
static int store_client_send(struct crun_store_client *c, int64_t deadline)
{
	int rc;

	if (c->fd < 0) {
		c->out.len = 0;
		return CRUN_ECLOSED;
	}
	if (c->out.oom) {
		store_buf_release(&c->out);
		return UV_ENOMEM;
	}
	rc = store_client_write(c, c->out.data, c->out.len, deadline);
	c->out.len = 0;
	return store_client_broken(c, rc);
}

/* Read a u64 reply. */
static int store_client_u64(struct crun_store_client *c, uint64_t *v,
			    int64_t deadline)
{
	unsigned char b[8];
	int rc = store_client_read(c, b, 8, deadline);

	if (rc == 0)
		*v = store_wire_u64(b);
	return store_client_broken(c, rc);
}

/* Read a u8 reply. */
static int store_client_u8(struct crun_store_client *c, unsigned char *v,
			   int64_t deadline)
{
	return store_client_broken(c, store_client_read(c, v, 1, deadline));
}

/* Read a bytes reply into a malloc'd, NUL-terminated copy. */
static int store_client_bytes(struct crun_store_client *c, void **val,
			      size_t *len, int64_t deadline)
{
	unsigned char *p;
	uint64_t n;
	int rc;

	rc = store_client_u64(c, &n, deadline);
	if (rc != 0)
		return rc;
	if (n > ((uint64_t)1 << 40))
		return store_client_broken(c, CRUN_EPROTO);
	p = malloc((size_t)n + 1);
	if (p == NULL)
		return store_client_broken(c, UV_ENOMEM);
	rc = store_client_read(c, p, (size_t)n, deadline);
	if (rc != 0) {
		free(p);
		return store_client_broken(c, rc);
	}
	p[n] = '\0';
	*val = p;
	*len = (size_t)n;
	return 0;
}

/* Whether a connect error is worth retrying (the server is not up yet). */
static int store_client_retryable(int err)
{
	return err == UV_ECONNREFUSED || err == UV_ECONNRESET ||
	       err == UV_ENETUNREACH || err == UV_EHOSTUNREACH ||
	       err == UV_EOF || err == UV_ECONNABORTED || err == UV_EPIPE ||
	       err == CRUN_ETIMEDOUT;
}

/* Open c->fd (and validate in G3), retrying until the deadline. */
static int store_client_open(struct crun_store_client *c, int64_t deadline)
{
	struct addrinfo hints, *res = NULL, *ai;
	unsigned char echo[4];
	char pstr[16];
	int backoff = 10, rc, fd;
	uint32_t nonce;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	snprintf(pstr, sizeof(pstr), "%d", c->port);
	rc = getaddrinfo(c->host, pstr, &hints, &res);
	if (rc != 0)
		return rc == EAI_SYSTEM ? -errno : UV_EAI_NONAME;
	for (;;) {
		rc = CRUN_ETIMEDOUT;
		for (ai = res; ai != NULL; ai = ai->ai_next) {
			fd = store_client_try(ai, deadline);
			if (fd < 0) {
				rc = fd;
				continue;
			}
			c->fd = fd;
			rc = 0;
			if (c->gen != STORE_GEN_G3)
				break;
			/* VALIDATE, then a PING whose nonce must come back. */
			nonce = (uint32_t)uv_os_getpid();
			store_buf_op(&c->out, STORE_GEN_G3, STORE_OP_VALIDATE);
			store_buf_u32(&c->out, STORE_WIRE_MAGIC);
			store_buf_op(&c->out, STORE_GEN_G3, STORE_OP_PING);
			store_buf_u32(&c->out, nonce);
			rc = store_client_send(c, deadline);
			if (rc == 0)
				rc = store_client_broken(
				    c, store_client_read(c, echo, 4, deadline));
			if (rc == 0 && store_wire_u32(echo) != nonce)
				rc = store_client_broken(c, CRUN_EPROTO);
			if (rc == 0)
				break;
		}
		if (rc == 0 || !store_client_retryable(rc))
			break;
		if (deadline >= 0 && store_client_now() + backoff > deadline) {
			rc = CRUN_ETIMEDOUT;
			break;
		}
		uv_sleep((unsigned)backoff);
		backoff = backoff * 2 > 1000 ? 1000 : backoff * 2;
	}
	freeaddrinfo(res);
	return rc;
}

int store_connect_ex(const char *host, int port, int timeout_ms, int flags,
		     struct crun_store_client **out)
{
	struct crun_store_client *c;
	int rc;

	c = calloc(1, sizeof(*c));
	if (c == NULL)
		return UV_ENOMEM;
	c->fd = -1;
	c->gen = (flags & CRUN_STORE_G0) ? STORE_GEN_G0 : STORE_GEN_G3;
	c->timeout_ms = timeout_ms;
	c->port = port;
	store_buf_init(&c->out);
	c->host = strdup(host != NULL ? host : "127.0.0.1");
	if (c->host == NULL) {
		rc = UV_ENOMEM;
		goto fail;
	}
	rc = store_client_open(c, store_client_deadline(timeout_ms));
	if (rc != 0)
		goto fail;
	*out = c;
	return 0;
fail:
	store_close(c);
	return rc;
}

int store_connect(const char *host, int port, int timeout_ms,
		  struct crun_store_client **out)
{
	return store_connect_ex(host, port, timeout_ms, 0, out);
}

void store_close(struct crun_store_client *c)
{
	if (c == NULL)
		return;
	if (c->fd >= 0)
		sk_close(c->fd);
	store_buf_release(&c->out);
	free(c->host);
	free(c);
}

void store_set_timeout(struct crun_store_client *c, int timeout_ms)
{
	c->timeout_ms = timeout_ms;
}

/* Append an op and a key to the output. */
static void store_client_op_key(struct crun_store_client *c, enum store_op op,
				const char *key)
{
	store_buf_op(&c->out, c->gen, op);
	if (key != NULL)
		store_buf_str(&c->out, key, strlen(key));
}

/* Append a u64 count and the keys. */
static void store_client_keys(struct crun_store_client *c,
			      const char *const *keys, size_t n)
{
	size_t i;

	store_buf_u64(&c->out, n);
	for (i = 0; i < n; i++)
		store_buf_str(&c->out, keys[i], strlen(keys[i]));
}

int store_set(struct crun_store_client *c, const char *key, const void *val,
	      size_t len)
{
	store_client_op_key(c, STORE_OP_SET, key);
	store_buf_str(&c->out, val, len);
	return store_client_send(c, store_client_deadline(c->timeout_ms));
}

int store_append(struct crun_store_client *c, const char *key, const void *val,
		 size_t len)
{
	store_client_op_key(c, STORE_OP_APPEND, key);
	store_buf_str(&c->out, val, len);
	return store_client_send(c, store_client_deadline(c->timeout_ms));
}

/* WAIT on keys until the deadline; cancels (G3) or reconnects (G0) on timeout.
 */
static int store_client_wait(struct crun_store_client *c,
			     const char *const *keys, size_t n, int timeout_ms)
{
	int64_t deadline, dl2;
	unsigned char b;
	int rc;

	if (timeout_ms < 0)
		timeout_ms = c->timeout_ms;
	deadline = store_client_deadline(timeout_ms);
	store_buf_op(&c->out, c->gen, STORE_OP_WAIT);
	store_client_keys(c, keys, n);
	rc = store_client_send(c, deadline);
	if (rc != 0)
		return rc;
	rc = store_client_read(c, &b, 1, deadline);
	if (rc == 0)
		return b == STORE_STOP_WAITING
			   ? 0
			   : store_client_broken(c, CRUN_EPROTO);
	if (rc != CRUN_ETIMEDOUT)
		return store_client_broken(c, rc);
	dl2 = store_client_deadline(c->timeout_ms < 0 ? 10000 : c->timeout_ms);
	if (c->gen == STORE_GEN_G3) {
		store_buf_op(&c->out, c->gen, STORE_OP_CANCEL_WAIT);
		rc = store_client_send(c, dl2);
		if (rc == 0)
			rc = store_client_u8(c, &b, dl2);
		if (rc == 0 && b == STORE_STOP_WAITING)
			rc = store_client_u8(c, &b, dl2); /* lost the race */
		if (rc == 0 && b != STORE_WAIT_CANCELED)
			rc = store_client_broken(c, CRUN_EPROTO);
		return rc != 0 ? rc : CRUN_ETIMEDOUT;
	}
	/* G0: no cancel; a fresh connection cannot receive the stale answer. */
	sk_close(c->fd);
	c->fd = -1;
	rc = store_client_open(c, dl2);
	return rc != 0 ? rc : CRUN_ETIMEDOUT;
}

int store_wait(struct crun_store_client *c, const char *const *keys, size_t n,
	       int timeout_ms)
{
	return store_client_wait(c, keys, n, timeout_ms);
}

int store_get(struct crun_store_client *c, const char *key, int timeout_ms,
	      void **val, size_t *len)
{
	int64_t deadline;
	int rc;

	rc = store_client_wait(c, &key, 1, timeout_ms);
	if (rc != 0)
		return rc;
	deadline = store_client_deadline(c->timeout_ms);
	store_client_op_key(c, STORE_OP_GET, key);
	rc = store_client_send(c, deadline);
	if (rc == 0)
		rc = store_client_bytes(c, val, len, deadline);
	return rc;
}

int store_add(struct crun_store_client *c, const char *key, int64_t delta,
	      int64_t *result)
{
	int64_t deadline = store_client_deadline(c->timeout_ms);
	uint64_t v;
	int rc;

	store_client_op_key(c, STORE_OP_ADD, key);
	store_buf_u64(&c->out, (uint64_t)delta);
	rc = store_client_send(c, deadline);
	if (rc == 0)
		rc = store_client_u64(c, &v, deadline);
	if (rc == 0 && result != NULL)
		*result = (int64_t)v;
	return rc;
}

int store_compare_set(struct crun_store_client *c, const char *key,
		      const void *expected, size_t elen, const void *desired,
		      size_t dlen, void **cur, size_t *curlen)
{
	int64_t deadline = store_client_deadline(c->timeout_ms);
	int rc;

	store_client_op_key(c, STORE_OP_COMPARE_SET, key);
	store_buf_str(&c->out, expected, elen);
	store_buf_str(&c->out, desired, dlen);
	rc = store_client_send(c, deadline);
	if (rc == 0)
		rc = store_client_bytes(c, cur, curlen, deadline);
	return rc;
}

int store_check(struct crun_store_client *c, const char *const *keys, size_t n,
		int *ready)
{
	int64_t deadline = store_client_deadline(c->timeout_ms);
	unsigned char b;
	int rc;

	store_buf_op(&c->out, c->gen, STORE_OP_CHECK);
	store_client_keys(c, keys, n);
	rc = store_client_send(c, deadline);
	if (rc == 0)
		rc = store_client_u8(c, &b, deadline);
	if (rc == 0 && b > STORE_NOT_READY)
		rc = store_client_broken(c, CRUN_EPROTO);
	if (rc == 0)
		*ready = b == STORE_READY;
	return rc;
}

int store_delete_key(struct crun_store_client *c, const char *key, int *deleted)
{
	int64_t deadline = store_client_deadline(c->timeout_ms);
	uint64_t v;
	int rc;

	store_client_op_key(c, STORE_OP_DELETE_KEY, key);
	rc = store_client_send(c, deadline);
	if (rc == 0)
		rc = store_client_u64(c, &v, deadline);
	if (rc == 0 && deleted != NULL)
		*deleted = v == 1;
	return rc;
}

int store_num_keys(struct crun_store_client *c, int64_t *n)
{
	int64_t deadline = store_client_deadline(c->timeout_ms);
	uint64_t v;
	int rc;

	store_client_op_key(c, STORE_OP_GETNUMKEYS, NULL);
	rc = store_client_send(c, deadline);
	if (rc == 0)
		rc = store_client_u64(c, &v, deadline);
	if (rc == 0)
		*n = (int64_t)v;
	return rc;
}

int store_multi_get(struct crun_store_client *c, const char *const *keys,
		    size_t n, int timeout_ms, void **vals, size_t *lens)
{
	int64_t deadline;
	size_t i, got = 0;
	int rc;

	rc = store_client_wait(c, keys, n, timeout_ms);
	if (rc != 0)
		return rc;
	deadline = store_client_deadline(c->timeout_ms);
	if (c->gen == STORE_GEN_G3) {
		store_buf_op(&c->out, c->gen, STORE_OP_MULTI_GET);
		store_client_keys(c, keys, n);
	} else {
		for (i = 0; i < n; i++)
			store_client_op_key(c, STORE_OP_GET, keys[i]);
	}
	rc = store_client_send(c, deadline);
	for (; rc == 0 && got < n; got += rc == 0)
		rc = store_client_bytes(c, &vals[got], &lens[got], deadline);
	if (rc != 0) {
		for (i = 0; i < got; i++) {
			free(vals[i]);
			vals[i] = NULL;
		}
	}
	return rc;
}

int store_multi_set(struct crun_store_client *c, const char *const *keys,
		    const void *const *vals, const size_t *lens, size_t n)
{
	size_t i;

	if (c->gen == STORE_GEN_G3) {
		store_buf_op(&c->out, c->gen, STORE_OP_MULTI_SET);
		store_buf_u64(&c->out, n);
		for (i = 0; i < n; i++) {
			store_buf_str(&c->out, keys[i], strlen(keys[i]));
			store_buf_str(&c->out, vals[i], lens[i]);
		}
	} else {
		for (i = 0; i < n; i++) {
			store_client_op_key(c, STORE_OP_SET, keys[i]);
			store_buf_str(&c->out, vals[i], lens[i]);
		}
	}
	return store_client_send(c, store_client_deadline(c->timeout_ms));
}
